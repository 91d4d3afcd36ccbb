//! `/mcp`: the converse surface as a Model Context Protocol server (the official Rust SDK,
//! streamable HTTP), mounted in the same server.
//!
//! - **Authentication**: every request carries `Authorization: Bearer <MCP credential>`, checked
//!   (and re-checked against revocation and rotation) before the protocol is involved; a
//!   browser's `Origin` must be the deployment's own or an allowed one (DNS rebinding).
//! - **Sessions**: `initialize` opens a converse session whose id is the `Mcp-Session-Id`; it
//!   keeps one conversation and the tool list pinned when it opened. Sessions live in SQLite, so
//!   after a restart the transport restores a known id by replaying its initialization; an
//!   unknown or expired id is 404 (the protocol's signal to initialize again).
//! - **Sessionless** calls (clients on the protocol revision without sessions) start a new
//!   conversation per call, or continue one given its signed `conversation` handle.
//! - **Tools**: `ask_agent`, `get_conversation_updates`, `get_agent_profile`, `list_routines`,
//!   and one tool per exposed routine. Arguments are checked against the tool's schema before
//!   anything is recorded; failures are tool errors carrying the API's error envelope.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, InitializeRequestParams,
    InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{
    EventStore, ServerSseMessage, SessionState, SessionStore, SessionStoreError,
};
use rmcp::transport::streamable_http_server::{RestoreOutcome, SessionId, SessionManager};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};

use crate::app::App;
use crate::converse::ask::{self, Ask};
use crate::converse::session::{self, Caller, ClientName, ConverseSession, Target};
use crate::converse::{self, Credential, api, tools, updates};
use crate::error::Error;

/// `/mcp` behind [`guard`], with its operations.
pub fn routes(app: &Arc<App>) -> crate::http::openapi::Routes {
    use crate::http::openapi::{Auth, Op, Routes};
    use axum::http::Method;
    let mcp = tower::ServiceBuilder::new()
        .layer(axum::middleware::from_fn_with_state(app.clone(), guard))
        .layer(axum::extract::DefaultBodyLimit::max(crate::http::BODY_LIMIT))
        .service(service(app.clone()));
    let op =
        |summary| Op::new(summary).auth(Auth::Channel).header("mcp-session-id", false, "The session, after initialize");
    Routes::new("MCP").service(
        "/mcp",
        mcp,
        vec![
            (
                Method::POST,
                op("Send a JSON-RPC message (initialize, tools/list, tools/call, …)")
                    .about("Streamable HTTP: the answer is JSON or an event stream. An unknown or expired session id is a 404 (initialize again).")
                    .body_json(serde_json::json!({"type": "object", "description": "A JSON-RPC 2.0 message"}))
                    .media(200, "application/json", "A JSON-RPC answer (or text/event-stream)")
                    .media(202, "application/json", "Accepted (a notification or a response)")
                    .errors(&[403, 404]),
            ),
            (Method::GET, op("Open the session's event stream").events("Server-to-client messages").errors(&[403, 404])),
            (Method::DELETE, op("Close the session").media(200, "application/json", "Closed").errors(&[403, 404])),
        ],
    )
}

/// The MCP service, ready for `Router::nest_service("/mcp", …)` behind [`guard`].
pub fn service(app: Arc<App>) -> StreamableHttpService<ConverseServer, Tagging> {
    let mut cfg = StreamableHttpServerConfig::default()
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        // the host check is ours (the deployment answers under any name it is given); origins
        // are checked by `guard`
        .disable_allowed_hosts()
        // the sessions' event streams end when the server shuts down (their state stays in SQLite)
        .with_cancellation_token(app.closing.child_token())
        .with_max_request_body_bytes(crate::http::BODY_LIMIT);
    cfg.session_store = Some(Arc::new(SqlSessions { app: app.clone() }) as Arc<dyn SessionStore>);
    let mut inner = LocalSessionManager::default();
    // an idle session's worker is dropped after 30 minutes; the session itself lives on in SQLite
    inner.session_config.keep_alive = Some(Duration::from_secs(30 * 60));
    StreamableHttpService::new(move || Ok(ConverseServer { app: app.clone() }), Arc::new(Tagging { inner }), cfg)
}

/// What `guard` found: the caller's credential and address.
#[derive(Clone)]
pub struct McpAuth {
    pub credential: Credential,
    pub source: String,
    /// The live session the request's `Mcp-Session-Id` names (checked by `guard`).
    pub session: Option<ConverseSession>,
}

fn refuse(status: StatusCode, e: &Error) -> Response {
    let body = json!({"error": {"code": e.code.as_str(), "message": e.message, "details": e.details}});
    let mut r = (status, axum::Json(body)).into_response();
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
    }
    r
}

/// Whether a browser `Origin` may call `/mcp`: the deployment's public origin or an allowed one.
fn origin_allowed(app: &App, origin: &str) -> bool {
    let origin = origin.trim_end_matches('/');
    let public = app.config.public_url.as_deref().and_then(|u| url::Url::parse(u).ok()).map(|u| {
        let o = u.origin().ascii_serialization();
        o.trim_end_matches('/').to_string()
    });
    public.as_deref() == Some(origin) || app.config.mcp_allowed_origins.iter().any(|o| o == origin)
}

/// Checks a `/mcp` request before the protocol sees it: the browser origin, the bearer MCP
/// credential (401 otherwise), and a given `Mcp-Session-Id` being a live session of that
/// credential and version (404 otherwise).
pub async fn guard(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    if let Some(o) = req.headers().get(header::ORIGIN).and_then(|v| v.to_str().ok())
        && !origin_allowed(&app, o)
    {
        let e = Error::forbidden("this origin may not call /mcp").with_details(json!({"code": "origin_not_allowed"}));
        return refuse(StatusCode::FORBIDDEN, &e);
    }
    let bearer = crate::http::extract::bearer(req.headers()).ok().flatten();
    let Some(secret) = bearer else {
        return refuse(StatusCode::UNAUTHORIZED, &session::invalid_credential());
    };
    let sid = req.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_string);
    let checked = app
        .blocking(move |app| {
            let c = session::credential(app, &secret)?;
            let live = match &sid {
                Some(id) => Some(session::mcp_session(app, &c, id)?),
                None => None,
            };
            Ok((c, live))
        })
        .await;
    let (credential, live) = match checked {
        Ok(x) => x,
        Err(e) if e.status() == 401 => return refuse(StatusCode::UNAUTHORIZED, &e),
        Err(e) => {
            tracing::warn!(error = %e, "mcp: could not check the credential");
            return refuse(StatusCode::SERVICE_UNAVAILABLE, &Error::unavailable("try again shortly"));
        }
    };
    let session = match live {
        Some(None) => {
            let e = Error::not_found("MCP session").with_details(json!({"code": "session_not_found"}));
            return refuse(StatusCode::NOT_FOUND, &e);
        }
        Some(s) => s,
        None => None,
    };
    let source = crate::http::extract::client_addr(&app, req.headers(), req.extensions()).unwrap_or_default();
    // a new session (`initialize`) counts against the address's exchange limit: 429 with Retry-After
    // a body that is not JSON is the protocol's parse error (400, -32700)
    let mut req = if req.method() == axum::http::Method::POST {
        let (parts, body) = req.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, crate::http::BODY_LIMIT).await else {
            let e = Error::new(crate::ErrorCode::PayloadTooLarge, "the request body is over 1 MB");
            return refuse(StatusCode::PAYLOAD_TOO_LARGE, &e);
        };
        let Ok(msg) = serde_json::from_slice::<Value>(&bytes) else {
            let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}});
            return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
        };
        let initialize = msg["method"] == "initialize";
        if session.is_none()
            && initialize
            && let Err(e) = app.converse_exchanges.hit(&source, app.clock.now().timestamp_millis())
        {
            return e.into_response();
        }
        Request::from_parts(parts, axum::body::Body::from(bytes))
    } else {
        req
    };
    req.extensions_mut().insert(McpAuth { credential, source, session });
    next.run(req).await
}

/// The id of the session a message belongs to (tagged by [`Tagging`]).
#[derive(Clone, Debug)]
pub struct McpSessionId(pub SessionId);

/// The transport's session manager, tagging every message with its session id so the handler
/// knows it (in `initialize` too).
#[derive(Default)]
pub struct Tagging {
    inner: LocalSessionManager,
}

impl SessionManager for Tagging {
    type Error = <LocalSessionManager as SessionManager>::Error;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.inner.create_session().await
    }
    async fn initialize_session(
        &self,
        id: &SessionId,
        mut message: rmcp::model::ClientJsonRpcMessage,
    ) -> Result<rmcp::model::ServerJsonRpcMessage, Self::Error> {
        message.insert_extension(McpSessionId(id.clone()));
        self.inner.initialize_session(id, message).await
    }
    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }
    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.inner.close_session(id).await
    }
    async fn create_stream(
        &self,
        id: &SessionId,
        mut message: rmcp::model::ClientJsonRpcMessage,
    ) -> Result<impl futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        message.insert_extension(McpSessionId(id.clone()));
        self.inner.create_stream(id, message).await
    }
    async fn accept_message(
        &self,
        id: &SessionId,
        mut message: rmcp::model::ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        message.insert_extension(McpSessionId(id.clone()));
        self.inner.accept_message(id, message).await
    }
    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }
    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.resume(id, last_event_id).await
    }
    async fn restore_session(&self, id: SessionId) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.inner.restore_session(id).await
    }
    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}

/// The transport's session store: the converse session's row.
struct SqlSessions {
    app: Arc<App>,
}

fn store_error(e: Error) -> SessionStoreError {
    Box::new(e)
}

#[async_trait::async_trait]
impl SessionStore for SqlSessions {
    async fn load(&self, id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let id = id.to_string();
        let state = self.app.blocking(move |app| session::mcp_state(app, &id)).await.map_err(store_error)?;
        Ok(state.and_then(|s| serde_json::from_str(&s).ok()))
    }
    async fn store(&self, id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let (id, json) = (id.to_string(), serde_json::to_string(state)?);
        self.app.blocking(move |app| session::set_mcp_state(app, &id, &json)).await.map_err(store_error)
    }
    async fn delete(&self, id: &str) -> Result<(), SessionStoreError> {
        let id = id.to_string();
        self.app.blocking(move |app| session::close_mcp(app, &id)).await.map_err(store_error)
    }
}

/// The protocol handler of one session (or one sessionless request).
#[derive(Clone)]
pub struct ConverseServer {
    app: Arc<App>,
}

/// Who a message comes from, and its session.
struct Call {
    auth: McpAuth,
    caller: Caller,
    session: Option<ConverseSession>,
}

fn auth_of(context: &RequestContext<RoleServer>) -> Result<McpAuth, ErrorData> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.extensions.get::<McpAuth>())
        .cloned()
        .ok_or_else(|| ErrorData::internal_error("the request was not authenticated", None))
}

const ASK_AGENT: &str = "ask_agent";
const UPDATES: &str = "get_conversation_updates";
const PROFILE: &str = "get_agent_profile";
const ROUTINES: &str = "list_routines";
/// Progress notifications are sent this often during a long turn.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

fn schema(v: Value) -> Arc<JsonObject> {
    Arc::new(match v {
        Value::Object(m) => m,
        _ => JsonObject::new(),
    })
}

fn handle_property() -> Value {
    json!({"type": "string", "minLength": 1,
        "description": "The conversation handle from an earlier reply (`conversation`), to continue that conversation without an MCP session."})
}

/// The tools every session has.
fn static_tools() -> Vec<Tool> {
    vec![
        Tool::new(
            ASK_AGENT,
            "Ask this agent a question. It answers from its workspace's documents and authored behaviour, \
             and may hand the conversation to a person. The reply is the answer text followed by the reply envelope \
             (citations, coverage, ownership, routine status) as JSON.",
            schema(json!({"type": "object", "properties": {
                "message": {"type": "string", "minLength": 1, "description": "What to ask or say."},
                "conversation": handle_property(),
            }, "required": ["message"], "additionalProperties": false})),
        ),
        Tool::new(
            UPDATES,
            "Read the conversation's new replies (the agent's and a human operator's) since a cursor. \
             With waitMs the call waits up to 25 seconds for the next reply and returns an empty list at the deadline; \
             call again with the same cursor.",
            schema(json!({"type": "object", "properties": {
                "cursor": {"type": "string", "minLength": 1, "description": "The cursor of the previous page; none: the most recent page."},
                "waitMs": {"type": "integer", "minimum": 0, "maximum": updates::MAX_WAIT_MS, "description": "How long to wait for a new reply (milliseconds)."},
                "conversation": handle_property(),
            }, "additionalProperties": false})),
        ),
        Tool::new(
            PROFILE,
            "This agent's profile: its name, what it can answer (how many documents and which titles it answers from), \
             whether a person can take over, and the routines it offers as tools.",
            schema(json!({"type": "object", "properties": {}, "additionalProperties": false})),
        ),
        Tool::new(
            ROUTINES,
            "The routines this agent offers as tools in this session: name, description and input schema of each.",
            schema(json!({"type": "object", "properties": {}, "additionalProperties": false})),
        ),
    ]
}

/// A tool error carrying the API's error envelope (text: the message; structured: the envelope).
fn tool_error(e: &Error) -> CallToolResponse {
    let message = if e.status() >= 500 && e.code == crate::ErrorCode::Internal {
        tracing::warn!(error = %e, "mcp tool call failed");
        "internal error".to_string()
    } else {
        e.message.clone()
    };
    let body = json!({"error": {"code": e.code.as_str(), "message": message, "details": e.details}});
    let mut r = CallToolResult::error(vec![ContentBlock::text(format!("{}: {message}", e.code.as_str()))]);
    r.structured_content = Some(body);
    r.into()
}

/// A successful result: `text` first, then the JSON pretty-printed; structured: the JSON.
fn tool_ok(text: &str, v: Value) -> CallToolResponse {
    let pretty = serde_json::to_string_pretty(&v).unwrap_or_default();
    let full = if text.is_empty() { pretty } else { format!("{text}\n\n{pretty}") };
    let mut r = CallToolResult::success(vec![ContentBlock::text(full)]);
    r.structured_content = Some(v);
    r.into()
}

fn invalid_arguments(errors: Vec<Value>) -> Error {
    Error::invalid("the tool's arguments do not match its schema")
        .with_details(json!({"code": "invalid_arguments", "errors": errors}))
}

/// Checks the arguments of a static tool: only `allowed` keys, strings where strings go.
fn check_args(args: &Map<String, Value>, allowed: &[&str]) -> Result<(), Error> {
    let mut errors = vec![];
    for (k, v) in args {
        if !allowed.contains(&k.as_str()) {
            errors.push(json!({"path": k, "code": "unknown_field"}));
        } else if k != "waitMs" && !matches!(v, Value::String(_) | Value::Null) {
            errors.push(json!({"path": k, "code": "type"}));
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(invalid_arguments(errors)) }
}

fn text_arg(args: &Map<String, Value>, key: &str) -> Option<String> {
    args.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty()).map(str::to_string)
}

/// Where an ask or update read lands: a given handle's conversation, else the session's, else
/// (sessionless) a new one.
fn target_of<'a>(app: &App, call: &'a Call, handle: Option<String>) -> Result<Target<'a>, Error> {
    if let Some(h) = handle {
        return Ok(Target::Sessionless(Some(session::from_handle(app, &call.caller, &h)?)));
    }
    Ok(match &call.session {
        Some(s) => Target::Session(s),
        None => Target::Sessionless(None),
    })
}

impl ConverseServer {
    async fn call_of(&self, context: &RequestContext<RoleServer>) -> Result<Call, Error> {
        let auth = auth_of(context).map_err(|_| session::invalid_credential())?;
        let sid = context.extensions.get::<McpSessionId>().map(|s| s.0.to_string());
        let session = match (sid, &auth.session) {
            // `guard` already checked the session the request names
            (Some(id), Some(s)) if s.id == id => Some(s.clone()),
            (Some(id), _) => {
                let c = auth.credential.clone();
                let s = self.app.blocking(move |app| session::mcp_session(app, &c, &id)).await?;
                Some(s.ok_or_else(session::invalid_session)?)
            }
            (None, _) => None,
        };
        let caller = Caller::of(&auth.credential);
        Ok(Call { auth, caller, session })
    }

    /// The tools of a call: the static ones, then the pinned release's routine tools.
    async fn tools(&self, call: &Call) -> Result<(Vec<Tool>, Vec<tools::Descriptor>), Error> {
        let (caller, session) = (call.caller.clone(), call.session.clone());
        let descriptors = self
            .app
            .blocking(move |app| {
                let target = match &session {
                    Some(s) => Target::Session(s),
                    None => Target::Sessionless(None),
                };
                Ok(tools::descriptors(&session::release(app, &caller, &target)?))
            })
            .await?;
        let mut list = static_tools();
        for d in &descriptors {
            if list.iter().any(|t| t.name == d.tool_name) {
                // reserved names are refused when a routine is saved; an old one is skipped
                tracing::warn!(tool = %d.tool_name, "mcp: a routine tool shadows a built-in tool; skipped");
                continue;
            }
            list.push(Tool::new(d.tool_name.clone(), d.description.clone(), schema(d.input_schema.clone())));
        }
        Ok((list, descriptors))
    }

    async fn ask(
        &self,
        call: Call,
        handle: Option<String>,
        a: Ask,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, Error> {
        let limiter_key =
            call.session.as_ref().map(|s| s.id.clone()).unwrap_or_else(|| call.caller.credential_id.clone());
        self.app.converse_asks.hit(&limiter_key, self.app.clock.now().timestamp_millis())?;
        let app = self.app.clone();
        let (input, cursor) = tokio::task::spawn_blocking(move || {
            let target = target_of(&app, &call, handle)?;
            let input = ask::prepare(&app, &call.caller, &target, a, None)?;
            let cursor = updates::cursor_now(&app, &call.caller, &input.conversation_id)?;
            let h = session::handle(&app, &call.caller, &input.conversation_id)?;
            Ok::<_, Error>((input, (cursor, h)))
        })
        .await
        .map_err(|e| Error::internal_msg(format!("ask task: {e}")))??;
        let (cursor, handle) = cursor;
        let (cid, turn_id) = (input.conversation_id.clone(), input.turn_id.clone());
        let mut turn = tokio::spawn(crate::turn::execute(self.app.clone(), input, None));
        let ticker = context.meta.get_progress_token().map(|token| {
            let peer = context.peer.clone();
            tokio::spawn(async move {
                let mut n = 0.0;
                loop {
                    let p = ProgressNotificationParam::new(token.clone(), n).with_message("the agent is working on it");
                    if peer.notify_progress(p).await.is_err() {
                        return;
                    }
                    n += 1.0;
                    tokio::time::sleep(PROGRESS_EVERY).await;
                }
            })
        });
        let budget = self.app.config.mcp_turn_budget;
        let outcome = tokio::select! {
            biased;
            r = &mut turn => Some(r),
            _ = tokio::time::sleep(budget) => None,
        };
        if let Some(t) = ticker {
            t.abort();
        }
        let reply = match outcome {
            Some(r) => r.map_err(|e| Error::internal_msg(format!("turn task: {e}")))?.map_err(Error::from)?,
            None => {
                // the turn goes on; its reply arrives through get_conversation_updates
                return Ok(json!({
                    "conversationId": cid, "conversation": handle, "status": "pending",
                    "answer": {"text": "", "citations": []},
                    "ownership": {"state": "ai_owned", "suppressed": false}, "traceId": turn_id,
                    "updates": {"cursor": cursor, "hint": "call get_conversation_updates with this cursor and waitMs"},
                }));
            }
        };
        let mut env = crate::turn::api::envelope(&reply);
        env["conversation"] = json!(handle);
        env["status"] = json!("complete");
        Ok(env)
    }

    async fn updates(&self, call: Call, args: &Map<String, Value>) -> Result<Value, Error> {
        let cursor = text_arg(args, "cursor");
        let wait = match args.get("waitMs") {
            None | Some(Value::Null) => None,
            Some(v) => {
                Some(v.as_i64().ok_or_else(|| invalid_arguments(vec![json!({"path": "waitMs", "code": "type"})]))?)
            }
        };
        let wait = updates::check_wait(wait)?;
        updates::parse_cursor(cursor.as_deref())?;
        let now = self.app.clock.now().timestamp_millis();
        let key = call.session.as_ref().map(|s| s.id.clone()).unwrap_or_else(|| call.caller.credential_id.clone());
        self.app.converse_reads_by_session.hit(&key, now)?;
        self.app.converse_reads_by_source.hit(&call.auth.source, now)?;
        let cid = match target_of(&self.app, &call, text_arg(args, "conversation"))? {
            Target::Sessionless(cid) => cid,
            Target::Session(s) => {
                let id = s.id.clone();
                self.app.blocking(move |app| session::conversation_of(app, &id)).await?
            }
        };
        let page = updates::poll(self.app.clone(), call.caller.clone(), cid.clone(), cursor, wait).await?;
        let mut v = api::page(&page);
        if let Some(cid) = &cid {
            v["conversation"] = json!(session::handle(&self.app, &call.caller, cid)?);
        }
        v["summary"] = json!(api::page_summary(&page));
        Ok(v)
    }

    async fn profile(&self, call: &Call) -> Result<Value, Error> {
        let caller = call.caller.clone();
        let (_, descriptors) = self.tools(call).await?;
        let p = self.app.blocking(move |app| converse::profile(app, &caller)).await?;
        let tools: Vec<&str> = descriptors.iter().map(|d| d.tool_name.as_str()).collect();
        Ok(api::profile(&p, &tools))
    }
}

impl ServerHandler for ConverseServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("steward", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Talk to one Steward agent: ask_agent for questions, get_conversation_updates to read replies \
                 (a human operator may answer later), and the agent's routine tools for typed requests.",
            )
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        // (a new session was counted against the address's exchange limit by `guard`)
        let auth = auth_of(&context)?;
        if let Some(sid) = context.extensions.get::<McpSessionId>().map(|s| s.0.to_string()) {
            let client = ClientName {
                name: Some(request.client_info.name.chars().take(128).collect()),
                version: Some(request.client_info.version.chars().take(64).collect()),
            };
            let c = auth.credential.clone();
            self.app
                .blocking(move |app| session::open_mcp(app, &c, &client, &sid))
                .await
                .map_err(|e| ErrorData::internal_error(e.message, None))?;
        }
        if context.peer.peer_info().is_none() {
            context.peer.set_peer_info(request.clone());
        }
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let call = self.call_of(&context).await.map_err(|e| ErrorData::invalid_request(e.message, None))?;
        let (tools, _) = self.tools(&call).await.map_err(|e| ErrorData::internal_error(e.message, None))?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let call = match self.call_of(&context).await {
            Ok(c) => c,
            Err(e) => return Ok(tool_error(&e)),
        };
        let args = request.arguments.clone().unwrap_or_default();
        let name = request.name.as_ref();
        let result = match name {
            ASK_AGENT => match check_args(&args, &["message", "conversation"]) {
                Err(e) => Err(e),
                Ok(()) => match text_arg(&args, "message") {
                    None => Err(invalid_arguments(vec![json!({"path": "message", "code": "required"})])),
                    Some(m) => {
                        let h = text_arg(&args, "conversation");
                        self.ask(call, h, Ask::Message(m), &context).await.map(|v| {
                            let text = v["answer"]["text"].as_str().unwrap_or_default().to_string();
                            tool_ok(&text, v)
                        })
                    }
                },
            },
            UPDATES => match check_args(&args, &["cursor", "waitMs", "conversation"]) {
                Err(e) => Err(e),
                Ok(()) => self.updates(call, &args).await.map(|v| {
                    let summary = v["summary"].as_str().unwrap_or_default().to_string();
                    tool_ok(&summary, v)
                }),
            },
            PROFILE | ROUTINES if !args.is_empty() => {
                Err(invalid_arguments(args.keys().map(|k| json!({"path": k, "code": "unknown_field"})).collect()))
            }
            PROFILE => self.profile(&call).await.map(|v| {
                let text = v["description"].as_str().unwrap_or_default().to_string();
                tool_ok(&text, v)
            }),
            ROUTINES => self.tools(&call).await.map(|(_, ds)| {
                let list: Vec<Value> = ds.iter().map(api::descriptor).collect();
                let text = format!("{} routine tool(s).", list.len());
                tool_ok(&text, json!({"tools": list}))
            }),
            routine => {
                let a = Ask::Routine { tool_name: routine.to_string(), input: Value::Object(args) };
                self.ask(call, None, a, &context).await.map(|v| {
                    let text = v["answer"]["text"].as_str().unwrap_or_default().to_string();
                    tool_ok(&text, v)
                })
            }
        };
        Ok(result.unwrap_or_else(|e| tool_error(&e)))
    }
}
