//! Public chat for anonymous visitors: sessions, messages (JSON or server-sent events), the
//! session's conversations, history, tail, the events stream, answer feedback, the widget's
//! configuration and the assistant logo. No dashboard credential: the launch token in the path
//! and the session token in the `x-service-public-session` header are the credentials. The rules
//! live in `crate::public_chat`.
//!
//! CORS: every answer echoes the request's `Origin` (with `Vary: Origin`) so the widget on any
//! page can read a refusal (403 for an origin that is not admitted, 404, 429) and say so; what a
//! page may do is decided by the server-side origin check on every request, not by CORS. No
//! route here uses cookies as a credential. The assistant logo alone is shared only with admitted
//! origins.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::chat::{event_stream, turn_event_as};
use crate::app::App;
use crate::error::{Error, ErrorCode, Result};
use crate::http::extract::{Client, Json, Path, Query};
use crate::http::openapi::shapes::{any_object, array, boolean, obj, string};
use crate::http::openapi::{Auth, Op, Routes};
use crate::public_chat::chat::{
    self as pchat, InputMetadata, InputMethod, Intent, MessageCommand, PageContext, Prepared,
};
use crate::public_chat::history;
use crate::public_chat::session::{self, NewSession, Session};
use crate::turn::{self, StreamEvent, TurnError};
use schemars::JsonSchema;

/// The request header that carries the session token.
pub const SESSION_HEADER: &str = "x-service-public-session";
const BASE: &str = "/api/v1/public/chat/{token}";

pub fn routes() -> Routes {
    let visitor = |summary| Op::new(summary).auth(Auth::Visitor).errors(&[403, 404, 429]);
    let api = Routes::new("Public chat")
        .post(
            &format!("{BASE}/sessions"),
            create_session,
            Op::new("Open (or resume) a visitor session")
                .public()
                .about("The launch token in the path is the anonymous link's or the website widget's; an origin the widget does not admit is a 403.")
                .body::<SessionBody>()
                .answers_json(201, "Opened", session_schema())
                .errors(&[403, 404, 429]),
        )
        .get(
            BASE,
            list,
            visitor("The session's conversations").ok_json(obj(json!({"conversations": array(any_object())}))),
        )
        .post(
            BASE,
            send,
            visitor("Send a message (JSON or, with `stream: true`, an event stream)")
                .body::<MessageBody>()
                .ok_any()
                .events("With `stream: true`")
                .errors(&[409]),
        )
        .get(
            &format!("{BASE}/history/{{cid}}"),
            get_history,
            visitor("A conversation's history").query::<CursorQuery>().ok_any(),
        )
        .get(
            &format!("{BASE}/tail/{{cid}}"),
            get_tail,
            visitor("A conversation's messages after a cursor").query::<CursorQuery>().ok_any(),
        )
        .get(&format!("{BASE}/events/{{cid}}"), events, visitor("A conversation's event stream").events("Server-sent events"))
        .get(
            &format!("{BASE}/embed-config"),
            embed_config,
            Op::new("The widget's configuration").public().ok_any().errors(&[403, 404]),
        )
        .put(
            "/api/v1/answer-feedback/public/chat/{token}/messages/{mid}",
            rate,
            visitor("Rate an answer in one of the session's conversations").body::<FeedbackBody>().ok_any(),
        )
        .delete(
            "/api/v1/answer-feedback/public/chat/{token}/messages/{mid}",
            clear_rating,
            visitor("Clear the session's rating of an answer").no_content(),
        );
    // every route here answers a CORS preflight
    let preflights = [
        format!("{BASE}/sessions"),
        BASE.to_string(),
        format!("{BASE}/history/{{cid}}"),
        format!("{BASE}/tail/{{cid}}"),
        format!("{BASE}/events/{{cid}}"),
        format!("{BASE}/embed-config"),
        "/api/v1/answer-feedback/public/chat/{token}/messages/{mid}".to_string(),
    ];
    let preflight_op = || Op::new("CORS preflight").public().no_content();
    let api = preflights
        .iter()
        .fold(api, |r, path| r.options(path, preflight, preflight_op()))
        // every answer, errors and extractor refusals included, carries the CORS answer
        .layer(axum::middleware::from_fn(with_cors));
    // the logo answers CORS itself: only to admitted origins
    Routes::new("Public chat")
        .get(
            &format!("{BASE}/assistant-logo"),
            logo,
            Op::new("The assistant's logo").public().media(200, "image/*", "The image").errors(&[404]),
        )
        .options(&format!("{BASE}/assistant-logo"), preflight, preflight_op())
        .merge(api)
}

/// The body of `POST …/sessions`.
fn session_schema() -> Value {
    obj(json!({
        "publicChatToken": string(), "publicSessionId": string(), "publicSessionToken": string(),
        "resumeToken": string(), "workspaceName": string(), "assistantBootstrapActive": boolean(),
        "expiresAt": string(), "resumeExpiresAt": string(),
    }))
}

async fn with_cors(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let origin = origin_of(req.headers());
    cors(next.run(req).await, origin.as_deref())
}

fn origin_of(h: &HeaderMap) -> Option<String> {
    h.get(header::ORIGIN).and_then(|v| v.to_str().ok()).map(str::to_string).filter(|o| o != "null")
}

/// Adds the CORS answer for `origin` (see the module doc).
fn cors(mut r: Response, origin: Option<&str>) -> Response {
    let h = r.headers_mut();
    h.insert(header::VARY, HeaderValue::from_static("Origin"));
    if let Some(v) = origin.and_then(|o| HeaderValue::from_str(o).ok()) {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
        h.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("retry-after"));
    }
    r
}

async fn preflight() -> Response {
    let mut r = StatusCode::NO_CONTENT.into_response();
    let hd = r.headers_mut();
    hd.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, POST, PUT, DELETE"));
    hd.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static("content-type, x-service-public-session"));
    hd.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
    r
}

/// The request's session, checked (404 `Not found` for any failure).
async fn authenticate(app: &Arc<App>, token: String, headers: &HeaderMap) -> Result<Session> {
    let st = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_string);
    let origin = origin_of(headers);
    app.blocking(move |app| session::authenticate(app, &token, st.as_deref(), origin.as_deref())).await
}

// ---- sessions ----

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code, reason = "the hint fields are accepted (the reference sends them) and deliberately unused")]
pub struct SessionBody {
    channel: String,
    resume_token: Option<String>,
    /// Hints the reference accepts and ignores (never resume credentials).
    #[schemars(with = "Option<serde_json::Value>")]
    #[serde(default)]
    chat_session_id: Option<serde::de::IgnoredAny>,
    #[schemars(with = "Option<serde_json::Value>")]
    #[serde(default)]
    anonymous_session_id: Option<serde::de::IgnoredAny>,
    #[schemars(with = "Option<serde_json::Value>")]
    #[serde(default)]
    agent_id: Option<serde::de::IgnoredAny>,
    #[schemars(with = "Option<serde_json::Value>")]
    #[serde(default)]
    visitor_key: Option<serde::de::IgnoredAny>,
    #[schemars(with = "Option<serde_json::Value>")]
    #[serde(default)]
    page_context: Option<serde::de::IgnoredAny>,
    #[schemars(with = "Option<serde_json::Value>")]
    #[serde(default)]
    client_context_capabilities: Option<serde::de::IgnoredAny>,
}

async fn create_session(
    State(app): State<Arc<App>>,
    Path(token): Path<String>,
    Client(client): Client,
    headers: HeaderMap,
    Json(b): Json<SessionBody>,
) -> Result<Response> {
    let origin = origin_of(&headers);
    // opening sessions counts against the client address's public chat budget
    if app.config.public_chat_limit_per_ip.max > 0
        && let Some(a) = client.addr.as_deref()
    {
        app.public_by_addr.hit(a, app.clock.now().timestamp_millis())?;
    }
    let req = NewSession { channel: b.channel, resume_token: b.resume_token, origin: origin.clone() };
    let (g, secure) =
        app.blocking(move |app| Ok((session::create(app, &token, req)?, app.config.cookies_secure()))).await?;
    let iso = |secs: i64| chrono::DateTime::from_timestamp(secs, 0).map(crate::clock::rfc3339).unwrap_or_default();
    let body = json!({
        "publicChatToken": g.public_chat_token, "publicSessionId": g.public_session_id,
        "publicSessionToken": g.public_session_token, "resumeToken": g.resume_token,
        "workspaceName": g.workspace_name, "assistantBootstrapActive": g.assistant_bootstrap_active,
        "expiresAt": iso(g.expires_at), "resumeExpiresAt": iso(g.resume_expires_at),
    });
    let mut r = (StatusCode::CREATED, axum::Json(body)).into_response();
    let cookie = format!(
        "anon_session_{}={}; Path=/api/v1/public/; HttpOnly; SameSite=Lax; Max-Age={}{}",
        g.workspace_id,
        g.public_session_id,
        crate::public_chat::token::RESUME_SECS,
        if secure { "; Secure" } else { "" }
    );
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        r.headers_mut().append(header::SET_COOKIE, v);
    }
    Ok(r)
}

// ---- messages ----

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PageContextBody {
    page_url: Option<String>,
    page_title: Option<String>,
    page_locale: Option<String>,
    browser_locale: Option<String>,
    content: Option<String>,
    referrer: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IntentBody {
    skill_name: String,
    intent_name: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InputMetadataBody {
    method: String,
    suggestion_source_message_id: Option<String>,
    intent: Option<IntentBody>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code, reason = "accepted as the reference defines them; not used by this edition")]
pub struct MessageBody {
    message: Option<String>,
    #[serde(default)]
    stream: bool,
    conversation_id: Option<String>,
    bootstrap_greeting_id: Option<String>,
    #[serde(default)]
    start_conversation: bool,
    user_expected_locale: Option<String>,
    page_context: Option<PageContextBody>,
    input_metadata: Option<InputMetadataBody>,
    #[schemars(with = "Option<serde_json::Value>")]
    #[serde(default)]
    client_context_capabilities: Option<serde::de::IgnoredAny>,
    signed_identity: Option<String>,
}

impl MessageBody {
    /// The command, with the page context's lengths checked (the page's text is not used).
    fn command(self) -> Result<MessageCommand> {
        let page = match self.page_context {
            None => PageContext::default(),
            Some(p) => {
                for (name, v, max) in [
                    ("pageContext.pageUrl", &p.page_url, 2048),
                    ("pageContext.pageTitle", &p.page_title, 180),
                    ("pageContext.content", &p.content, 6000),
                    ("pageContext.referrer", &p.referrer, 2048),
                ] {
                    if v.as_ref().is_some_and(|s| s.chars().count() > max) {
                        return Err(Error::invalid_field(name, format!("{name} is at most {max} characters")));
                    }
                }
                PageContext { page_locale: p.page_locale, browser_locale: p.browser_locale }
            }
        };
        if self.signed_identity.as_ref().is_some_and(|s| s.len() > 8192) {
            return Err(Error::invalid_field("signedIdentity", "signedIdentity is at most 8192 characters"));
        }
        let input_metadata = match self.input_metadata {
            None => None,
            Some(m) => Some(InputMetadata {
                method: InputMethod::parse(&m.method).ok_or_else(|| {
                    Error::invalid_field("inputMetadata.method", "method is typed, suggestion_click or intent_click")
                })?,
                suggestion_source_message_id: m.suggestion_source_message_id,
                intent: m.intent.map(|i| Intent { skill_name: i.skill_name, intent_name: i.intent_name }),
            }),
        };
        Ok(MessageCommand {
            message: self.message,
            conversation_id: self.conversation_id,
            bootstrap_greeting_id: self.bootstrap_greeting_id,
            start_conversation: self.start_conversation,
            user_expected_locale: self.user_expected_locale,
            page,
            input_metadata,
        })
    }
}

fn empty_response() -> Error {
    Error::new(ErrorCode::ServiceUnavailable, "the assistant could not produce a reply; try again")
        .with_details(json!({"code": "public_chat_empty_response"}))
}

/// A reply with nothing to show (and no person behind it) is a 503, never an empty body.
fn usable(reply: &turn::Reply) -> bool {
    reply.suppressed || !reply.text.trim().is_empty()
}

async fn send(
    State(app): State<Arc<App>>,
    Path(token): Path<String>,
    Client(client): Client,
    headers: HeaderMap,
    Json(b): Json<MessageBody>,
) -> Result<Response> {
    let s = authenticate(&app, token, &headers).await?;
    let stream = b.stream;
    let cmd = b.command()?;
    let addr = client.addr.clone();
    let prepared = app.blocking(move |app| s.counted(app, addr.as_deref(), || pchat::send(app, &s, cmd))).await?;
    let input = match prepared {
        Prepared::Greeting(g) => {
            let chips: Vec<Value> = g.chips.iter().map(pchat::chip_json).collect();
            let body = json!({"bootstrapGreetingId": g.id, "answer": g.text, "suggestions": chips});
            return Ok(axum::Json(body).into_response());
        }
        Prepared::Turn(input) => *input,
    };
    if !stream {
        let reply = turn::execute(app, input, None).await?;
        if !usable(&reply) {
            return Err(empty_response());
        }
        return Ok(axum::Json(turn::api::public(&reply)).into_response());
    }
    let cid = input.conversation_id.clone();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let final_tx = tx.clone();
    tokio::spawn(async move {
        let last = match turn::execute(app, input, Some(tx)).await {
            Ok(reply) if usable(&reply) => StreamEvent::Done(Box::new(reply)),
            Ok(_) => StreamEvent::Failed(empty_response()),
            Err(TurnError::Superseded { conversation_id, stage }) => StreamEvent::Cancelled { conversation_id, stage },
            Err(TurnError::Failed(e)) => StreamEvent::Failed(e),
        };
        let _ = final_tx.send(last);
    });
    let first = Event::default().event("conversation").json_data(json!({"conversationId": cid}));
    let mut r = event_stream(first, rx, |ev| turn_event_as(ev, turn::api::public)).into_response();
    r.headers_mut().insert("x-accel-buffering", HeaderValue::from_static("no"));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(r)
}

// ---- reading back ----

/// A message as a visitor sees it: no trace ids, no operator account ids.
fn message(m: &crate::conversations::Message) -> Value {
    let mut v = json!({
        "id": m.id, "role": m.role.as_str(), "source": m.source.as_str(), "text": m.content,
        "createdAt": m.created_at, "cursor": m.seq.to_string(),
    });
    if m.role == crate::conversations::Role::Assistant {
        v["citations"] = m.citations.clone();
        if let Some(x) = m.metadata.get("suggestions") {
            v["suggestions"] = x.clone();
        }
    }
    // an operator's name, never their email address (an account without a name is "Team")
    if let Some(name) = m.metadata.pointer("/operator/displayName").and_then(Value::as_str) {
        v["operatorDisplayName"] = json!(if name.contains('@') { "Team" } else { name });
    }
    if m.metadata.get("greeting").is_some_and(|g| g.is_object()) {
        v["greeting"] = json!(true);
    }
    v
}

async fn list(State(app): State<Arc<App>>, Path(token): Path<String>, headers: HeaderMap) -> Result<Response> {
    let s = authenticate(&app, token, &headers).await?;
    let convs = app.blocking(move |app| history::list(app, &s)).await?;
    let convs: Vec<Value> = convs
        .iter()
        .map(|c| {
            json!({"id": c.id, "channel": c.channel.as_str(), "messageCount": c.message_count,
                   "lastMessageAt": c.last_message_at, "createdAt": c.created_at, "updatedAt": c.updated_at})
        })
        .collect();
    Ok(axum::Json(json!({"conversations": convs})).into_response())
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CursorQuery {
    cursor: Option<String>,
}

async fn get_history(
    State(app): State<Arc<App>>,
    Path((token, cid)): Path<(String, String)>,
    headers: HeaderMap,
    Query(q): Query<CursorQuery>,
) -> Result<Response> {
    let s = authenticate(&app, token, &headers).await?;
    let h = app.blocking(move |app| history::history(app, &s, &cid, q.cursor.as_deref())).await?;
    let state = if h.human_owned { "human_owned" } else { "ai_owned" };
    Ok(axum::Json(json!({
        "conversationId": h.conversation_id,
        "messages": h.messages.iter().map(message).collect::<Vec<_>>(),
        "hasMore": h.has_more,
        "tailCursor": h.tail_cursor.to_string(),
        "ownership": {"state": state},
    }))
    .into_response())
}

async fn get_tail(
    State(app): State<Arc<App>>,
    Path((token, cid)): Path<(String, String)>,
    headers: HeaderMap,
    Query(q): Query<CursorQuery>,
) -> Result<Response> {
    let s = authenticate(&app, token, &headers).await?;
    let t = app.blocking(move |app| history::tail(app, &s, &cid, q.cursor.as_deref())).await?;
    Ok(axum::Json(json!({
        "conversationId": t.conversation_id,
        "messages": t.messages.iter().map(message).collect::<Vec<_>>(),
        "cursor": t.cursor.to_string(),
    }))
    .into_response())
}

/// `ready` once subscribed, then `message.created` for each new message of the conversation. The
/// session is checked again before each event: a rotated token, a switched-off channel, a removed
/// origin or a new default agent ends the stream, and so does the session token running out. A
/// session and an address hold a capped number of streams at once (`streams` in the config);
/// one more is 429 with `Retry-After`.
async fn events(
    State(app): State<Arc<App>>,
    Path((token, cid)): Path<(String, String)>,
    Client(client): Client,
    headers: HeaderMap,
) -> Result<Response> {
    let s = authenticate(&app, token.clone(), &headers).await?;
    // places are taken before any work and held by the stream: they are freed when it ends or
    // its client goes away
    let mut slots = vec![app.streams.public_session.acquire(&s.public_session_id)?];
    if let Some(a) = client.addr.as_deref() {
        slots.push(app.streams.public_addr.acquire(a)?);
    }
    let expires = chrono::DateTime::from_timestamp(s.expires_at, 0).unwrap_or_default();
    let left = (expires - app.clock.now()).to_std().unwrap_or_default();
    let ends_at = tokio::time::Instant::now() + left;
    let c2 = cid.clone();
    app.blocking(move |app| history::check_own(app, &s, &c2)).await?;
    let rx = app.bus.subscribe();
    let ready = Event::default().event("ready").json_data(json!({"conversationId": cid})).unwrap_or_default();
    let state = Watch { first: Some(ready), rx, app: app.clone(), token, headers, cid, ends_at, _slots: slots };
    let stream = futures::stream::unfold(state, |mut w| async move {
        if let Some(f) = w.first.take() {
            return Some((Ok::<_, Infallible>(f), w));
        }
        let changed = || Event::default().event("message.created").json_data(json!({"conversationId": w.cid}));
        loop {
            let e = tokio::select! {
                e = w.rx.recv() => e,
                _ = tokio::time::sleep_until(w.ends_at) => return None,
                _ = w.app.closing.cancelled() => return None,
            };
            let e = match e {
                Ok(e) => e,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    let ev = changed().unwrap_or_default();
                    return Some((Ok(ev), w));
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            };
            if e.conversation_id.as_deref() != Some(w.cid.as_str()) || e.kind != crate::bus::BusKind::MessageCreated {
                continue;
            }
            authenticate(&w.app, w.token.clone(), &w.headers).await.ok()?;
            let ev = changed().unwrap_or_default();
            return Some((Ok(ev), w));
        }
    });
    let mut r = Sse::new(stream).keep_alive(KeepAlive::default()).into_response();
    r.headers_mut().insert("x-accel-buffering", HeaderValue::from_static("no"));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(r)
}

/// What a visitor's events stream holds between events.
struct Watch {
    first: Option<Event>,
    rx: tokio::sync::broadcast::Receiver<crate::bus::BusEvent>,
    app: Arc<App>,
    token: String,
    headers: HeaderMap,
    cid: String,
    /// When the session token runs out.
    ends_at: tokio::time::Instant,
    _slots: Vec<crate::ratelimit::Slot>,
}

// ---- feedback ----

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeedbackBody {
    rating: String,
    comment: Option<String>,
}

async fn rate(
    State(app): State<Arc<App>>,
    Path((token, mid)): Path<(String, String)>,
    Client(client): Client,
    headers: HeaderMap,
    Json(b): Json<FeedbackBody>,
) -> Result<Response> {
    let s = authenticate(&app, token, &headers).await?;
    // each rating is a write and an inbox broadcast: it counts like a message
    let f = app
        .blocking(move |app| {
            s.counted(app, client.addr.as_deref(), || history::rate(app, &s, &mid, &b.rating, b.comment))
        })
        .await?;
    Ok(axum::Json(json!({"feedback": {
        "messageId": f.message_id, "conversationId": f.conversation_id, "rating": f.rating.as_str(),
        "comment": f.comment, "updatedAt": f.updated_at,
    }}))
    .into_response())
}

async fn clear_rating(
    State(app): State<Arc<App>>,
    Path((token, mid)): Path<(String, String)>,
    Client(client): Client,
    headers: HeaderMap,
) -> Result<Response> {
    let s = authenticate(&app, token, &headers).await?;
    app.blocking(move |app| s.counted(app, client.addr.as_deref(), || history::clear(app, &s, &mid))).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

// ---- the widget's configuration and logo ----

async fn embed_config(State(app): State<Arc<App>>, Path(token): Path<String>, headers: HeaderMap) -> Result<Response> {
    let o2 = origin_of(&headers);
    let c = app.blocking(move |app| crate::public_chat::session::embed_config(app, &token, o2.as_deref())).await?;
    let theme = &c.general.website_embed_theme;
    let body = json!({
        "launcherLabel": c.general.website_embed_launcher_label,
        "launcherPosition": c.general.website_embed_launcher_position,
        "theme": {"brand": theme.brand, "brandText": theme.brand_text, "surface": theme.surface, "text": theme.text},
        "branding": {
            "hidePoweredBy": c.general.website_embed_expert_overrides.get("hidePoweredBy").and_then(Value::as_bool).unwrap_or(false),
            "privacyPolicyUrl": c.general.website_embed_expert_overrides.get("privacyPolicyUrl").and_then(Value::as_str),
        },
        "copy": c.general.website_embed_copy,
        "expertOverrides": c.general.website_embed_expert_overrides,
        "assistantName": c.assistant_name,
        "assistantLogoUrl": c.has_logo.then(|| format!("/api/v1/public/chat/{}/assistant-logo", c.token)),
        "proactiveGreetingEnabled": c.bootstrap_active,
    });
    let mut r = axum::Json(body).into_response();
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300"));
    Ok(r)
}

async fn logo(State(app): State<Arc<App>>, Path(token): Path<String>, headers: HeaderMap) -> Response {
    let origin = origin_of(&headers);
    let o2 = origin.clone();
    let r = app.blocking(move |app| crate::public_chat::session::logo(app, &token, o2.as_deref())).await;
    match r {
        Ok((mime, bytes, admitted)) => {
            let mut r = (
                [
                    (header::CONTENT_TYPE, mime),
                    (header::X_CONTENT_TYPE_OPTIONS, "nosniff".into()),
                    (header::CONTENT_SECURITY_POLICY, "default-src 'none'; style-src 'unsafe-inline'; sandbox".into()),
                    (header::CACHE_CONTROL, "public, max-age=300".into()),
                    (header::VARY, "Origin".into()),
                ],
                bytes,
            )
                .into_response();
            r.headers_mut().insert("cross-origin-resource-policy", HeaderValue::from_static("cross-origin"));
            if admitted && let Some(v) = origin.as_deref().and_then(|o| HeaderValue::from_str(o).ok()) {
                r.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
            }
            r
        }
        Err(e) => e.into_response(),
    }
}
