//! Human takeover (takeover, reply, transfer, handback), answer feedback, the operator inbox and
//! the operator events stream. The rules live in `crate::conversations::{ownership, feedback}`.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::sse::{Event, KeepAlive, Sse};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::App;
use crate::auth::Perm;
use crate::conversations::feedback::{self, HeldBy, InboxItem};
use crate::conversations::{api, ownership};
use crate::error::Result;
use crate::http::extract::{Ctx, Json, OptionalJson, Path};
use crate::http::openapi::shapes::{any_object, array, integer, obj, one_of, string, string_or_null};
use crate::http::openapi::{Op, Routes};
use schemars::JsonSchema;

pub fn routes() -> Routes {
    let takeover = |summary| Op::new(summary).perm("workspace.conversation.takeover");
    let ownership = || obj(json!({"ownership": any_object()}));
    Routes::new("Inbox")
        .post(
            "/api/v1/conversations/{id}/takeover",
            takeover_conversation,
            takeover("Take over a conversation").optional_body::<TakeoverBody>().ok_json(ownership()).errors(&[409]),
        )
        .post(
            "/api/v1/conversations/{id}/reply",
            reply,
            takeover("Reply as the operator holding the conversation")
                .body::<ReplyBody>()
                .answers_json(201, "Sent", obj(json!({"message": any_object(), "ownership": any_object()})))
                .errors(&[409]),
        )
        .post(
            "/api/v1/conversations/{id}/transfer",
            transfer,
            takeover("Transfer a conversation to another operator")
                .body::<TransferBody>()
                .ok_json(ownership())
                .errors(&[409]),
        )
        .post(
            "/api/v1/conversations/{id}/handback",
            handback,
            takeover("Hand a conversation back to the agent")
                .body::<HandbackBody>()
                .ok_json(ownership())
                .errors(&[409]),
        )
        .put(
            "/api/v1/history/chat/{id}/messages/{mid}/feedback",
            rate,
            Op::new("Rate an answer")
                .perm("workspace.conversations.read")
                .body::<FeedbackBody>()
                .ok_json(obj(json!({"feedback": feedback_schema()}))),
        )
        .delete(
            "/api/v1/history/chat/{id}/messages/{mid}/feedback",
            clear,
            Op::new("Clear your rating of an answer").perm("workspace.conversations.read").no_content(),
        )
        .get(
            "/api/v1/inbox",
            inbox,
            takeover("The operator inbox: handoffs, approvals, feedback").ok_json(obj(json!({
                "items": array(any_object()), "handoffs": integer(), "approvals": integer(), "feedback": integer(),
            }))),
        )
        .post(
            "/api/v1/inbox/feedback/{mid}/resolve",
            resolve,
            takeover("Mark negative feedback as resolved").no_content(),
        )
        .get(
            "/api/v1/events",
            events,
            Op::new("The operator event stream (conversation and inbox changes)")
                .events("Server-sent events, ids only")
                .errors(&[429]),
        )
}

fn feedback_schema() -> Value {
    obj(json!({
        "messageId": string(), "conversationId": string(), "rating": one_of(&["up", "down"]),
        "comment": string_or_null(), "accountId": string_or_null(), "createdAt": string(), "updatedAt": string(),
        "resolvedAt": string_or_null(),
    }))
}

#[derive(Deserialize, Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TakeoverBody {
    reason: Option<String>,
}

async fn takeover_conversation(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    OptionalJson(b): OptionalJson<TakeoverBody>,
) -> Result<impl IntoResponse> {
    let reason = b.reason;
    let c = app.blocking(move |app| ownership::takeover(app, &ctx.p, &id, reason)).await?;
    Ok(axum::Json(json!({"ownership": api::ownership_record(&c)})))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplyBody {
    message: String,
    expected_version: i64,
}

async fn reply(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Json(b): Json<ReplyBody>,
) -> Result<impl IntoResponse> {
    let (m, c) = app.blocking(move |app| ownership::reply(app, &ctx.p, &id, &b.message, b.expected_version)).await?;
    Ok((StatusCode::CREATED, axum::Json(json!({"message": api::message(&m), "ownership": api::ownership_record(&c)}))))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TransferBody {
    to_account_id: String,
    expected_version: i64,
}

async fn transfer(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Json(b): Json<TransferBody>,
) -> Result<impl IntoResponse> {
    let c =
        app.blocking(move |app| ownership::transfer(app, &ctx.p, &id, &b.to_account_id, b.expected_version)).await?;
    Ok(axum::Json(json!({"ownership": api::ownership_record(&c)})))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HandbackBody {
    expected_version: i64,
}

async fn handback(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Json(b): Json<HandbackBody>,
) -> Result<impl IntoResponse> {
    let c = app.blocking(move |app| ownership::handback(app, &ctx.p, &id, b.expected_version)).await?;
    Ok(axum::Json(json!({"ownership": api::ownership_record(&c)})))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeedbackBody {
    rating: String,
    comment: Option<String>,
}

fn feedback_json(f: &feedback::Feedback) -> Value {
    json!({
        "messageId": f.message_id, "conversationId": f.conversation_id, "rating": f.rating.as_str(),
        "comment": f.comment, "accountId": f.user_id, "createdAt": f.created_at, "updatedAt": f.updated_at,
        "resolvedAt": f.resolved_at,
    })
}

async fn rate(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path((id, mid)): Path<(String, String)>,
    Json(b): Json<FeedbackBody>,
) -> Result<impl IntoResponse> {
    let f = app
        .blocking(move |app| feedback::rate(app, feedback::Rater::Member(&ctx.p), &id, &mid, &b.rating, b.comment))
        .await?;
    Ok(axum::Json(json!({"feedback": feedback_json(&f)})))
}

async fn clear(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path((id, mid)): Path<(String, String)>,
) -> Result<impl IntoResponse> {
    app.blocking(move |app| feedback::clear(app, feedback::Rater::Member(&ctx.p), &id, &mid)).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn resolve(State(app): State<Arc<App>>, ctx: Ctx, Path(mid): Path<String>) -> Result<impl IntoResponse> {
    app.blocking(move |app| feedback::resolve(app, &ctx.p, &mid)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /inbox`: open handoffs, then approvals waiting for a decision, then unhelpful answers.
async fn inbox(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    let (items, decisions) = app
        .blocking(move |app| Ok((feedback::inbox(app, &ctx.p)?, crate::routines::decisions::open(app, &ctx.p)?)))
        .await?;
    let mut approvals: Vec<Value> = decisions
        .iter()
        .map(|d| {
            json!({"kind": "approval", "conversationId": d.conversation_id, "decision": crate::routines::api::decision(d),
                   "updatedAt": d.created_at})
        })
        .collect();
    let mut items: Vec<Value> = items
        .iter()
        .map(|i| match i {
            InboxItem::Handoff { conversation, held_by, last_message } => json!({
                "kind": "handoff",
                "conversationId": conversation.id, "agentId": conversation.agent_id,
                "ownership": api::ownership_record(conversation),
                "heldBy": match held_by { HeldBy::Nobody => "nobody", HeldBy::Me => "me", HeldBy::Teammate => "teammate" },
                "messageCount": conversation.message_count, "lastMessageAt": conversation.last_message_at,
                "lastMessage": last_message.as_ref().map(api::message),
                "updatedAt": conversation.updated_at,
            }),
            InboxItem::Feedback { feedback: f, answer } => json!({
                "kind": "feedback",
                "conversationId": f.conversation_id,
                "feedback": feedback_json(f),
                "answer": api::message(answer),
                "updatedAt": f.updated_at,
            }),
        })
        .collect();
    let handoffs = items.iter().filter(|i| i["kind"] == "handoff").count();
    let feedback = items.len() - handoffs;
    let approval_count = approvals.len();
    let rest = items.split_off(handoffs);
    items.append(&mut approvals);
    items.extend(rest);
    Ok(axum::Json(json!({"items": items, "handoffs": handoffs, "approvals": approval_count, "feedback": feedback})))
}

/// `GET /events`: the workspace's conversation events as server-sent events — `ready` first,
/// then `message.created`, `ownership.changed` and `inbox.changed` with `{conversationId}`. A
/// listener that falls behind gets `resync` and should reload what it shows. A person holds a
/// capped number of these streams at once (`streams.events_per_user`; one more is 429).
async fn events(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    ctx.p.require(Perm::ConversationsRead)?;
    let holder = match (&ctx.p.user_id, &ctx.p.credential_id) {
        (Some(u), _) => u.0.clone(),
        (None, Some(c)) => c.clone(),
        (None, None) => ctx.p.org_id.0.clone(),
    };
    let slot = app.streams.events_user.acquire(&holder)?;
    let ws = ctx.p.workspace_id.0.clone();
    let rx = app.bus.subscribe();
    let first = Event::default().event("ready").json_data(json!({"workspaceId": ws})).unwrap_or_default();
    let state = (Some(first), rx, ws, app.clone(), slot);
    let stream = futures::stream::unfold(state, |(first, mut rx, ws, app, slot)| async move {
        if let Some(f) = first {
            return Some((Ok::<_, Infallible>(f), (None, rx, ws, app, slot)));
        }
        loop {
            let e = tokio::select! {
                e = rx.recv() => e,
                _ = app.closing.cancelled() => return None,
            };
            match e {
                Ok(e) if e.workspace_id == ws => {
                    let ev = Event::default()
                        .event(e.kind.as_str())
                        .json_data(json!({"conversationId": e.conversation_id}))
                        .unwrap_or_default();
                    return Some((Ok(ev), (None, rx, ws, app, slot)));
                }
                Ok(_) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    return Some((Ok(Event::default().event("resync").data("{}")), (None, rx, ws, app, slot)));
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
