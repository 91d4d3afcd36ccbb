//! Agent chat (JSON or server-sent events), retrieval-only answers, conversation history, turn
//! traces, the quality report and private test executions. The rules live in `crate::turn` and
//! `crate::conversations`.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use serde::Deserialize;
use serde_json::json;

use super::account::{PageQuery, page_limit};
use crate::app::App;
use crate::conversations::{self, ListQuery};
use crate::error::Result;
use crate::http::extract::{ChatCaller, Ctx, Json, Path, Query};
use crate::http::openapi::{Auth, Op, Routes};
use crate::turn::api::ChatBody;
use crate::turn::test_exec::TestEvent;
use crate::turn::{self, StreamEvent, TurnError, test_exec, trace};
use schemars::JsonSchema;

/// The chat routes (merged into the API by `http::routes`).
pub fn routes() -> Routes {
    let chat = |summary| {
        Op::new(summary)
            .perm("workspace.chat")
            .about("With `stream: true` the answer is a `text/event-stream`: `conversation`, then `status` and `chunk` events, and one terminal event (`done` with this reply, `cancelled` or `error`).")
            .body::<ChatBody>()
            .ok_json(turn::api::rest_schema())
            .events("With `stream: true`")
            .errors(&[409, 429, 502])
    };
    let conversations = |summary| Op::new(summary).perm("workspace.conversations.read");
    let tests = |summary| Op::new(summary).perm("workspace.agents.manage");
    Routes::new("Chat")
        .post("/api/v1/agents/{id}/chat", agent_chat, chat("Chat with an agent").auth(Auth::MemberOrChannel))
        .post("/api/v1/chat", default_chat, chat("Chat with the workspace's default agent (or `agentId`)"))
        .post(
            "/api/v1/retrieval/answer",
            retrieval_answer,
            Op::new("A retrieval-only answer (no agent, no conversation)")
                .perm("workspace.retrieval.query")
                .body_any()
                .ok_any()
                .errors(&[429]),
        )
        .get(
            "/api/v1/agents/{id}/test-executions",
            list_tests,
            tests("List the agent's test executions").query::<PageQuery>().ok_any(),
        )
        .post(
            "/api/v1/agents/{id}/test-executions",
            start_test,
            tests("Start a test execution of a revision (201 new, 200 for a repeated key)")
                .body_any()
                .answers_any(201, "Started")
                .ok_any()
                .errors(&[409]),
        )
        .get("/api/v1/agents/{id}/test-executions/{eid}", get_test, tests("Get a test execution").ok_any())
        .post(
            "/api/v1/agents/{id}/test-executions/{eid}/messages",
            test_message,
            tests("Send messages in a test execution (JSON or an event stream)")
                .body_any()
                .ok_any()
                .events("With `stream: true`")
                .errors(&[409, 429]),
        )
        .get(
            "/api/v1/history/chat",
            history,
            conversations("List conversations, newest first").query::<HistoryQuery>().ok_any(),
        )
        .get(
            "/api/v1/history/chat/{id}",
            conversation,
            conversations("A conversation with its messages").query::<CursorQuery>().ok_any(),
        )
        .get(
            "/api/v1/history/chat/{id}/tail",
            tail,
            conversations("A conversation's messages after a cursor").query::<CursorQuery>().ok_any(),
        )
        .get("/api/v1/traces/{id}", get_trace, conversations("A turn's trace").ok_any())
        .get(
            "/api/v1/quality/turns",
            quality_turns,
            conversations("Turns for the quality report").query::<QualityParams>().ok_any(),
        )
        .get(
            "/api/v1/quality/daily",
            quality_daily,
            conversations("Daily quality figures").query::<DailyParams>().ok_any(),
        )
}

/// `POST /agents/{agentId}/chat`: a dashboard session or API credential with the chat permission,
/// or the agent's own REST channel credential (`scr_…`).
pub async fn agent_chat(
    State(app): State<Arc<App>>,
    caller: ChatCaller,
    Path(id): Path<String>,
    Json(b): Json<ChatBody>,
) -> Result<Response> {
    if b.agent_id.as_deref().is_some_and(|a| a != id) {
        return Err(crate::Error::invalid_field("agentId", "agentId in the body must match the path (or be left out)"));
    }
    let ctx = match caller {
        ChatCaller::Ctx(ctx) => ctx,
        ChatCaller::Channel { secret, request_id } => {
            let agent = id.clone();
            let cid = b.conversation_id.clone();
            let p = app
                .blocking(move |app| {
                    let p = crate::converse::rest_principal(app, &secret, &agent)?;
                    if let Some(cid) = &cid {
                        crate::converse::check_rest_conversation(app, &p, cid)?;
                    }
                    Ok(p)
                })
                .await?;
            Ctx { p, request_id }
        }
    };
    // a channel credential never sees the turn's trace
    let b = if matches!(ctx.p.via, crate::auth::Via::ChannelCredential) {
        ChatBody { include_debug: false, ..b }
    } else {
        b
    };
    chat(app, ctx, Some(id), b).await
}

/// `POST /chat`: the workspace's default agent, or `agentId` from the body.
pub async fn default_chat(State(app): State<Arc<App>>, ctx: Ctx, Json(b): Json<ChatBody>) -> Result<Response> {
    let agent = b.agent_id.clone();
    chat(app, ctx, agent, b).await
}

async fn chat(app: Arc<App>, ctx: Ctx, agent: Option<String>, body: ChatBody) -> Result<Response> {
    let stream = body.stream;
    let command = body.command()?;
    let request_id = ctx.request_id.clone();
    let actor = ctx.actor();
    let mut input = app.blocking(move |app| turn::prepare_chat(app, &ctx.p, agent.as_deref(), command)).await?;
    input.request_id = request_id;
    input.actor = actor;
    if !stream {
        let reply = turn::execute(app, input, None).await?;
        return Ok(axum::Json(turn::api::rest(&reply)).into_response());
    }
    let cid = input.conversation_id.clone();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let final_tx = tx.clone();
    tokio::spawn(async move {
        let last = match turn::execute(app, input, Some(tx)).await {
            Ok(reply) => StreamEvent::Done(Box::new(reply)),
            Err(TurnError::Superseded { conversation_id, stage }) => StreamEvent::Cancelled { conversation_id, stage },
            Err(TurnError::Failed(e)) => StreamEvent::Failed(e),
        };
        let _ = final_tx.send(last);
    });
    Ok(sse(cid, rx).into_response())
}

/// The event stream of a turn: `conversation` first, then `status` and `chunk` events, and one
/// terminal event — `done` (the REST reply), `cancelled` or `error` (the error envelope).
fn sse(
    conversation_id: String,
    rx: tokio::sync::mpsc::UnboundedReceiver<StreamEvent>,
) -> Sse<impl Stream<Item = std::result::Result<Event, Infallible>>> {
    let first = Event::default().event("conversation").json_data(json!({"conversationId": conversation_id}));
    event_stream(first, rx, turn_event)
}

/// Server-sent events from a channel: `first`, then each item rendered until a terminal one.
pub(super) fn event_stream<T: Send + 'static>(
    first: std::result::Result<Event, axum::Error>,
    rx: tokio::sync::mpsc::UnboundedReceiver<T>,
    render: impl Fn(T) -> (std::result::Result<Event, axum::Error>, bool) + Clone + Send + 'static,
) -> Sse<impl Stream<Item = std::result::Result<Event, Infallible>>> {
    let first = first.unwrap_or_default();
    let stream = futures::stream::unfold((Some(first), rx, false), move |(first, mut rx, ended)| {
        let render = render.clone();
        async move {
            if let Some(f) = first {
                return Some((Ok(f), (None, rx, false)));
            }
            if ended {
                return None;
            }
            let item = rx.recv().await?;
            let (event, terminal) = render(item);
            Some((Ok(event.unwrap_or_default()), (None, rx, terminal)))
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// One turn event on the wire, and whether it ends the stream.
fn turn_event(ev: StreamEvent) -> (std::result::Result<Event, axum::Error>, bool) {
    turn_event_as(ev, turn::api::rest)
}

/// One turn event on the wire with `done` rendered by `done`, and whether it ends the stream.
pub(super) fn turn_event_as(
    ev: StreamEvent,
    done: fn(&turn::Reply) -> serde_json::Value,
) -> (std::result::Result<Event, axum::Error>, bool) {
    match ev {
        StreamEvent::Status(stage) => (Event::default().event("status").json_data(json!({"stage": stage})), false),
        StreamEvent::Chunk(text) => (Event::default().event("chunk").json_data(json!({"text": text})), false),
        StreamEvent::Done(reply) => (Event::default().event("done").json_data(done(&reply)), true),
        StreamEvent::Cancelled { conversation_id, stage } => (
            Event::default()
                .event("cancelled")
                .json_data(json!({"conversationId": conversation_id, "reason": "superseded", "stage": stage})),
            true,
        ),
        StreamEvent::Failed(e) => (Event::default().event("error").json_data(error_body(&e)), true),
    }
}

/// The error envelope of a failed streamed turn (internal details never leave the server).
pub(super) fn error_body(e: &crate::Error) -> serde_json::Value {
    if e.status() >= 500 {
        tracing::warn!(error = %e, "chat turn failed");
    }
    let message = if e.status() >= 500 && e.code == crate::ErrorCode::Internal {
        "internal error".to_string()
    } else {
        e.message.clone()
    };
    json!({"error": {"code": e.code.as_str(), "message": message, "details": e.details}})
}

pub async fn retrieval_answer(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Json(b): Json<turn::answer::AnswerInput>,
) -> Result<impl IntoResponse> {
    let rid = ctx.request_id.clone();
    let a = app.blocking(move |app| turn::answer::answer(app, &ctx.p, rid.as_deref(), b)).await?;
    Ok(axum::Json(turn::api::answer(&a)))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HistoryQuery {
    limit: Option<usize>,
    cursor: Option<String>,
    agent_id: Option<String>,
    ownership: Option<String>,
}

pub async fn history(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Query(q): Query<HistoryQuery>,
) -> Result<impl IntoResponse> {
    let limit = page_limit(q.limit)?;
    let v = app
        .blocking(move |app| {
            conversations::list(
                app,
                &ctx.p,
                ListQuery { agent_id: q.agent_id, ownership: q.ownership, cursor: q.cursor, limit },
            )
        })
        .await?;
    Ok(axum::Json(conversations::api::page(&v)))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CursorQuery {
    cursor: Option<String>,
}

pub async fn conversation(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Query(q): Query<CursorQuery>,
) -> Result<impl IntoResponse> {
    let d = app.blocking(move |app| conversations::get(app, &ctx.p, &id, q.cursor.as_deref())).await?;
    Ok(axum::Json(conversations::api::detail(&d)))
}

pub async fn tail(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Query(q): Query<CursorQuery>,
) -> Result<impl IntoResponse> {
    let t = app.blocking(move |app| conversations::tail(app, &ctx.p, &id, q.cursor.as_deref())).await?;
    Ok(axum::Json(conversations::api::tail(&t)))
}

pub async fn get_trace(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<impl IntoResponse> {
    Ok(axum::Json(turn::api::trace_row(&app.blocking(move |app| trace::get(app, &ctx.p, &id)).await?)))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QualityParams {
    limit: Option<usize>,
    cursor: Option<String>,
    grounding_verdict: Option<String>,
    has_unsourced_claims: Option<bool>,
    has_invalid_sources: Option<bool>,
    agent_id: Option<String>,
}

pub async fn quality_turns(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Query(q): Query<QualityParams>,
) -> Result<impl IntoResponse> {
    let limit = page_limit(q.limit)?;
    let query = trace::QualityQuery {
        grounding_verdict: q.grounding_verdict,
        has_unsourced_claims: q.has_unsourced_claims,
        has_invalid_sources: q.has_invalid_sources,
        agent_id: q.agent_id,
        cursor: q.cursor,
        limit,
    };
    Ok(axum::Json(turn::api::quality_page(&app.blocking(move |app| trace::quality_turns(app, &ctx.p, query)).await?)))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DailyParams {
    days: Option<u32>,
    agent_id: Option<String>,
}

pub async fn quality_daily(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Query(q): Query<DailyParams>,
) -> Result<impl IntoResponse> {
    let days = q.days.unwrap_or(30);
    let rows = app.blocking(move |app| trace::quality_daily(app, &ctx.p, days, q.agent_id.as_deref())).await?;
    Ok(axum::Json(turn::api::quality_daily(&rows)))
}

// ---- test executions ----

pub async fn start_test(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Json(b): Json<test_exec::StartInput>,
) -> Result<impl IntoResponse> {
    let (created, d) = app.blocking(move |app| test_exec::start(app, &ctx.p, &ctx.actor(), &id, b)).await?;
    Ok((if created { StatusCode::CREATED } else { StatusCode::OK }, axum::Json(turn::api::execution(&d))))
}

pub async fn list_tests(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Query(q): Query<PageQuery>,
) -> Result<impl IntoResponse> {
    let limit = page_limit(q.limit)?;
    let page = app.blocking(move |app| test_exec::list(app, &ctx.p, &id, q.cursor.as_deref(), limit)).await?;
    Ok(axum::Json(turn::api::execution_page(&page)))
}

pub async fn get_test(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path((id, eid)): Path<(String, String)>,
) -> Result<impl IntoResponse> {
    Ok(axum::Json(turn::api::execution(&app.blocking(move |app| test_exec::get(app, &ctx.p, &id, &eid)).await?)))
}

pub async fn test_message(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path((id, eid)): Path<(String, String)>,
    Json(b): Json<test_exec::MessageInput>,
) -> Result<Response> {
    let (aid, xid, stream) = (id.clone(), eid.clone(), b.stream);
    let turns = app.blocking(move |app| test_exec::prepare_message(app, &ctx.p, &aid, &xid, &b)).await?;
    if !stream {
        let results = test_exec::send(app, turns).await?;
        return Ok(axum::Json(turn::api::execution_replies(&id, &eid, &results)).into_response());
    }
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(test_exec::send_streaming(app, turns, tx));
    let first = Event::default().event("execution").json_data(json!({"executionId": eid, "agentId": id}));
    Ok(event_stream(first, rx, move |ev| test_event(&id, &eid, ev)).into_response())
}

/// One event of a streamed test message: `side` before each side's turn, that turn's `status` and
/// `chunk` events, `reply` when it finishes, then `done` (the same body as the JSON answer) or the
/// turn's `cancelled`/`error`.
fn test_event(agent_id: &str, execution_id: &str, ev: TestEvent) -> (std::result::Result<Event, axum::Error>, bool) {
    let side = |s: &test_exec::Side| json!({"label": s.label, "revisionId": s.revision_id, "conversationId": s.conversation_id});
    match ev {
        TestEvent::Side(s) => (Event::default().event("side").json_data(side(&s)), false),
        TestEvent::Turn(e) => turn_event(e),
        TestEvent::Replied(s, reply) => {
            let mut v = side(&s);
            v["reply"] = turn::api::rest(&reply);
            (Event::default().event("reply").json_data(v), false)
        }
        TestEvent::Finished(results) => (
            Event::default().event("done").json_data(turn::api::execution_replies(agent_id, execution_id, &results)),
            true,
        ),
        TestEvent::Failed(TurnError::Superseded { conversation_id, stage }) => {
            turn_event(StreamEvent::Cancelled { conversation_id, stage })
        }
        TestEvent::Failed(TurnError::Failed(e)) => turn_event(StreamEvent::Failed(e)),
    }
}
