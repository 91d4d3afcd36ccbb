//! The converse surface over REST: agent channel credentials, the session exchange, asks, the
//! routine tool catalog and conversation updates. The rules live in `crate::converse`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::App;
use crate::converse::ask::{self, Ask};
use crate::converse::session::{self, ClientName, ConverseSession, Target};
use crate::converse::{self, Credential, NewCredential, updates};
use crate::error::{Error, ErrorCode, Result};
use crate::http::extract::{Client, Json, Path, Query, RequestId, SessionCtx};
use crate::http::openapi::shapes::{array, boolean, obj, string, string_or_null};
use crate::http::openapi::{Auth, Op, Routes};
use schemars::JsonSchema;

pub fn routes() -> Routes {
    let manage = |summary| Op::new(summary).session().perm("workspace.agents.manage");
    let converse = |summary| Op::new(summary).auth(Auth::Converse);
    Routes::new("Converse")
        .get(
            "/api/v1/agents/{id}/channel-credentials",
            list,
            manage("List the agent's channel credentials")
                .query::<ListQuery>()
                .ok_json(obj(json!({"credentials": array(view_schema())}))),
        )
        .post(
            "/api/v1/agents/{id}/channel-credentials",
            create,
            manage("Create a channel credential (the secret is shown once)")
                .body::<CreateBody>()
                .answers_any(201, "Created"),
        )
        .post(
            "/api/v1/agents/{id}/channel-credentials/{cid}/rotate",
            rotate,
            manage("Rotate a channel credential's secret")
                .ok_json(obj(json!({"credential": view_schema(), "secret": string()})))
                .errors(&[409]),
        )
        .post(
            "/api/v1/agents/{id}/channel-credentials/{cid}/revoke",
            revoke,
            manage("Revoke a channel credential").ok_json(obj(json!({"credential": view_schema()}))),
        )
        .post(
            "/api/v1/mcp/converse/session",
            exchange,
            Op::new("Exchange an MCP credential (`launchToken`) for a converse session token")
                .public()
                .body::<ExchangeBody>()
                .ok_json(obj(json!({
                    "sessionToken": string(), "expiresAt": string(),
                    "agent": obj(json!({"id": string(), "name": string()})), "conversationId": string_or_null(),
                })))
                .errors(&[401, 404, 429]),
        )
        .get(
            "/api/v1/mcp/converse/session",
            validate,
            converse("Whether the session token still holds, and what it grants").ok_json(obj(json!({
                "valid": boolean(), "workspaceId": string(), "agentId": string(), "conversationId": string_or_null(),
                "expiresAt": string(), "permissions": array(string()),
            }))),
        )
        .post(
            "/api/v1/mcp/converse/ask",
            ask,
            converse("Ask the agent (a message or a routine tool call)")
                .body::<AskBody>()
                .ok_any()
                .errors(&[400, 409, 429]),
        )
        .get("/api/v1/mcp/converse/tools", tools, converse("The agent's routine tools").ok_any())
        .get(
            "/api/v1/mcp/converse/messages",
            messages,
            converse("Conversation updates after a cursor (optionally waiting)")
                .query::<MessagesQuery>()
                .ok_any()
                .errors(&[429]),
        )
}

fn control_free(field: &str, v: &str, max: usize) -> Result<String> {
    let t = v.trim();
    if t.chars().count() > max || t.chars().any(char::is_control) {
        return Err(Error::invalid_field(
            field,
            format!("{field} is at most {max} characters, without control characters"),
        ));
    }
    Ok(t.to_string())
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientBody {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    version: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExchangeBody {
    #[serde(default)]
    launch_token: Option<String>,
    #[serde(default)]
    public_id: Option<String>,
    #[serde(default)]
    client: Option<ClientBody>,
}

/// `POST /mcp/converse/session`: an MCP credential (`launchToken`) for a 12-hour session token.
async fn exchange(
    State(app): State<Arc<App>>,
    Client(client): Client,
    Json(b): Json<ExchangeBody>,
) -> Result<impl IntoResponse> {
    let source = client.addr.unwrap_or_default();
    app.converse_exchanges.hit(&source, app.clock.now().timestamp_millis())?;
    let token = match (b.launch_token, b.public_id) {
        (Some(t), None) => control_free("launchToken", &t, 2048)?,
        (None, Some(_)) => {
            return Err(Error::new(
                ErrorCode::NotFound,
                "no walk-in agent is offered here: exchange an agent credential",
            )
            .with_details(json!({"code": "walk_in_not_available"})));
        }
        _ => return Err(Error::invalid("send exactly one of launchToken or publicId")),
    };
    let name = match b.client {
        Some(c) => ClientName {
            name: c.name.as_deref().map(|n| control_free("client.name", n, 128)).transpose()?,
            version: c.version.as_deref().map(|v| control_free("client.version", v, 64)).transpose()?,
        },
        None => ClientName::default(),
    };
    let x = app.blocking(move |app| session::exchange(app, &token, &name)).await?;
    Ok(axum::Json(json!({
        "sessionToken": x.session_token, "expiresAt": x.expires_at,
        "agent": {"id": x.agent_id, "name": x.agent_name}, "conversationId": x.session.conversation_id,
    })))
}

/// The converse session of a request (401 `invalid_session` otherwise).
async fn converse_session(app: &Arc<App>, headers: &HeaderMap) -> Result<ConverseSession> {
    let t = crate::http::extract::bearer(headers).map_err(|_| session::invalid_session())?;
    app.blocking(move |app| session::authenticate(app, t.as_deref())).await
}

/// `GET /mcp/converse/session`: whether the session token still holds, and what it grants.
async fn validate(State(app): State<Arc<App>>, headers: HeaderMap) -> Result<impl IntoResponse> {
    let s = converse_session(&app, &headers).await?;
    Ok(axum::Json(json!({
        "valid": true, "workspaceId": s.workspace_id, "agentId": s.agent_id, "conversationId": s.conversation_id,
        "expiresAt": s.expires_at, "permissions": converse::PERMISSIONS,
    })))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoutineCall {
    tool_name: String,
    #[serde(default)]
    input: Value,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AskBody {
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    routine: Option<RoutineCall>,
    #[serde(default)]
    stream: Option<bool>,
}

impl AskBody {
    pub fn ask(self) -> Result<Ask> {
        if self.stream == Some(true) {
            return Err(Error::invalid_field("stream", "the converse ask does not stream: leave stream out or false"));
        }
        match (self.message, self.routine) {
            (Some(m), None) => Ok(Ask::Message(m)),
            (None, Some(r)) => Ok(Ask::Routine { tool_name: r.tool_name, input: r.input }),
            _ => Err(Error::invalid("send exactly one of message or routine")),
        }
    }
}

/// `POST /mcp/converse/ask`: a message or a routine tool call → the agent reply envelope.
async fn ask(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    request_id: Option<axum::Extension<RequestId>>,
    Json(b): Json<AskBody>,
) -> Result<impl IntoResponse> {
    let s = converse_session(&app, &headers).await?;
    let a = b.ask()?;
    app.converse_asks.hit(&s.id, app.clock.now().timestamp_millis())?;
    let rid = request_id.map(|r| r.0.0);
    let input = app.blocking(move |app| ask::prepare(app, &s.caller(), &Target::Session(&s), a, rid)).await?;
    // the turn finishes (and tells the bus) even when the caller goes away
    let turn = tokio::spawn(crate::turn::execute(app, input, None));
    let reply = turn.await.map_err(|e| Error::internal_msg(format!("turn task: {e}")))??;
    Ok(axum::Json(crate::turn::api::envelope(&reply)))
}

/// `GET /mcp/converse/tools`: the agent's current published routine tools.
async fn tools(State(app): State<Arc<App>>, headers: HeaderMap) -> Result<impl IntoResponse> {
    let s = converse_session(&app, &headers).await?;
    let caller = s.caller();
    let (name, tools) = app
        .blocking(move |app| {
            let cfg = session::release(app, &caller, &Target::Sessionless(None))?;
            Ok((cfg.name.clone(), converse::tools::descriptors(&cfg)))
        })
        .await?;
    let tools: Vec<Value> = tools.iter().map(converse::api::descriptor).collect();
    Ok(axum::Json(json!({"agent": {"name": name, "description": null}, "tools": tools})))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MessagesQuery {
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    wait_ms: Option<i64>,
}

/// `GET /mcp/converse/messages?cursor=&waitMs=`: the replies since the cursor; an empty first read
/// waits up to `waitMs` for the next one.
async fn messages(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Client(client): Client,
    Query(q): Query<MessagesQuery>,
) -> Result<impl IntoResponse> {
    let s = converse_session(&app, &headers).await?;
    let wait = updates::check_wait(q.wait_ms)?;
    updates::parse_cursor(q.cursor.as_deref())?;
    let now = app.clock.now().timestamp_millis();
    app.converse_reads_by_session.hit(&s.id, now)?;
    app.converse_reads_by_source.hit(&client.addr.unwrap_or_default(), now)?;
    let caller = s.caller();
    let page = updates::poll(app, caller, s.conversation_id.clone(), q.cursor, wait).await?;
    Ok(axum::Json(converse::api::page(&page)))
}

/// The schema of [`view`].
fn view_schema() -> Value {
    use crate::http::openapi::shapes::integer;
    obj(json!({
        "id": string(), "agentId": string(), "audience": string(), "label": string(), "prefix": string(),
        "status": string(), "version": integer(), "expiresAt": string_or_null(), "revokedAt": string_or_null(),
        "lastUsedAt": string_or_null(), "createdAt": string(), "updatedAt": string(),
    }))
}

fn view(c: &Credential, now: &str) -> Value {
    json!({
        "id": c.id, "agentId": c.agent_id, "audience": c.audience, "label": c.label, "prefix": c.prefix,
        "status": c.status(now), "version": c.version, "expiresAt": c.expires_at, "revokedAt": c.revoked_at,
        "lastUsedAt": c.last_used_at, "createdAt": c.created_at, "updatedAt": c.updated_at,
    })
}

fn now(app: &App) -> String {
    crate::clock::rfc3339(app.clock.now())
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateBody {
    audience: String,
    label: String,
    #[serde(default)]
    expires_at: Option<String>,
}

async fn create(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Path(id): Path<String>,
    Json(b): Json<CreateBody>,
) -> Result<impl IntoResponse> {
    let n = NewCredential { audience: b.audience, label: b.label, expires_at: b.expires_at };
    let issued = app.blocking(move |app| converse::create(app, &ctx.p, &ctx.actor(), &id, n)).await?;
    let body = json!({"credential": view(&issued.credential, &now(&app)), "secret": issued.secret});
    Ok((StatusCode::CREATED, axum::Json(body)))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListQuery {
    audience: Option<String>,
}

async fn list(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Path(id): Path<String>,
    Query(q): Query<ListQuery>,
) -> Result<impl IntoResponse> {
    let cs = app.blocking(move |app| converse::list(app, &ctx.p, &id, q.audience.as_deref())).await?;
    let t = now(&app);
    Ok(axum::Json(json!({"credentials": cs.iter().map(|c| view(c, &t)).collect::<Vec<_>>()})))
}

async fn rotate(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Path((id, cid)): Path<(String, String)>,
) -> Result<impl IntoResponse> {
    let issued = app.blocking(move |app| converse::rotate(app, &ctx.p, &ctx.actor(), &id, &cid)).await?;
    Ok(axum::Json(json!({"credential": view(&issued.credential, &now(&app)), "secret": issued.secret})))
}

async fn revoke(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Path((id, cid)): Path<(String, String)>,
) -> Result<impl IntoResponse> {
    let c = app.blocking(move |app| converse::revoke(app, &ctx.p, &ctx.actor(), &id, &cid)).await?;
    Ok(axum::Json(json!({"credential": view(&c, &now(&app))})))
}
