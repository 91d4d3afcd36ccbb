//! Public chat for anonymous visitors: sessions so far (messages, history, events and the widget
//! follow). No dashboard credential: the launch token in the path and the session token in the
//! `x-service-public-session` header are the credentials. The rules live in
//! `crate::public_chat`.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing;
use serde::Deserialize;
use serde_json::json;

use crate::app::App;
use crate::error::Result;
use crate::http::extract::{Json, Path};
use crate::public_chat::session::{self, NewSession};

pub fn routes() -> Router<Arc<App>> {
    Router::new().route("/api/v1/public/chat/{token}/sessions", routing::post(create_session).options(preflight))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code, reason = "the hint fields are accepted (the reference sends them) and deliberately unused")]
pub struct SessionBody {
    channel: String,
    resume_token: Option<String>,
    /// Hints the reference accepts and ignores (never resume credentials).
    #[serde(default)]
    chat_session_id: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    anonymous_session_id: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    agent_id: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    visitor_key: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    page_context: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    client_context_capabilities: Option<serde::de::IgnoredAny>,
}

fn origin_of(h: &HeaderMap) -> Option<String> {
    h.get(header::ORIGIN).and_then(|v| v.to_str().ok()).map(str::to_string).filter(|o| o != "null")
}

/// CORS for a public route: the request's origin is echoed when the launch token admits it.
fn cors(app: &App, token: &str, origin: Option<&str>, h: &mut HeaderMap) {
    h.insert(header::VARY, HeaderValue::from_static("Origin"));
    let Some(origin) = origin else { return };
    let admitted = crate::settings::general::by_launch_token(app, token)
        .ok()
        .flatten()
        .is_some_and(|(_, g, _)| g.website_embed_enabled && crate::settings::general::admits(&g, origin));
    if admitted && let Ok(v) = HeaderValue::from_str(origin) {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
    }
}

async fn preflight(State(app): State<Arc<App>>, Path(token): Path<String>, headers: HeaderMap) -> Result<Response> {
    let origin = origin_of(&headers);
    let h = app
        .blocking(move |app| {
            let mut h = HeaderMap::new();
            cors(app, &token, origin.as_deref(), &mut h);
            Ok(h)
        })
        .await?;
    let mut r = StatusCode::NO_CONTENT.into_response();
    r.headers_mut().extend(h);
    let hd = r.headers_mut();
    hd.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, POST, PUT"));
    hd.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static("content-type, x-service-public-session"));
    hd.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
    Ok(r)
}

async fn create_session(
    State(app): State<Arc<App>>,
    Path(token): Path<String>,
    headers: HeaderMap,
    Json(b): Json<SessionBody>,
) -> Result<Response> {
    let origin = origin_of(&headers);
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
    r.headers_mut().insert(header::VARY, HeaderValue::from_static("Origin"));
    // an embed session exists only for an admitted origin: the request's own Origin is the answer
    if g.origin.is_some()
        && let Some(v) = origin.as_deref().and_then(|o| HeaderValue::from_str(o).ok())
    {
        r.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
    }
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
