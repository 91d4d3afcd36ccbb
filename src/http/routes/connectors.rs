//! Connectors: the workspace's connectors (list, read, save, enable, disable, sync), WhatsApp's
//! message log, and the public webhooks the outside systems call. Every route is in [`ROUTES`]
//! with what it does (the one list to register elsewhere, such as an API description).

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing;
use serde::Deserialize;
use serde_json::json;

use super::account::page_limit;
use crate::app::App;
use crate::connectors::{self, api};
use crate::error::Result;
use crate::http::extract::{Ctx, Json, Path, Query, SessionCtx};

/// Every connector route: method, path, what it does.
#[allow(dead_code, reason = "the one list to register with the API description; `routes` below mounts the same")]
pub const ROUTES: &[(&str, &str, &str)] = &[
    ("GET", "/api/v1/connectors", "both built-in connectors with their config schema"),
    ("GET", "/api/v1/connectors/{id}", "a connector with its config (no secrets) and sync state"),
    ("PUT", "/api/v1/connectors/{id}", "save config; generated secrets are returned once"),
    ("POST", "/api/v1/connectors/{id}/enable", "enable a configured connector"),
    ("POST", "/api/v1/connectors/{id}/disable", "disable a connector"),
    ("POST", "/api/v1/connectors/{id}/sync", "queue a full sync (202)"),
    ("GET", "/api/v1/connectors/whatsapp/messages", "the WhatsApp message log, newest first"),
    ("GET", "/api/connectors/whatsapp/{workspace_id}/webhook", "Meta's verify-token handshake"),
    ("POST", "/api/connectors/whatsapp/{workspace_id}/webhook", "a signed WhatsApp delivery"),
    ("POST", "/api/connectors/wordpress/{workspace_id}/webhook", "a push from the WordPress site"),
];

pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/v1/connectors", routing::get(list))
        .route("/api/v1/connectors/whatsapp/messages", routing::get(messages))
        .route("/api/v1/connectors/{id}", routing::get(get).put(put))
        .route("/api/v1/connectors/{id}/enable", routing::post(enable))
        .route("/api/v1/connectors/{id}/disable", routing::post(disable))
        .route("/api/v1/connectors/{id}/sync", routing::post(sync))
        .route("/api/connectors/whatsapp/{workspace_id}/webhook", routing::get(whatsapp_verify).post(whatsapp_receive))
        .route("/api/connectors/wordpress/{workspace_id}/webhook", routing::post(wordpress_push))
}

pub async fn list(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    let list = app.blocking(move |app| connectors::list(app, &ctx.p)).await?;
    let encryption = app.config.encryption_key.is_some();
    Ok(axum::Json(json!({
        "encryptionConfigured": encryption,
        "connectors": list.iter().map(api::summary).collect::<Vec<_>>(),
    })))
}

pub async fn get(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<impl IntoResponse> {
    let d = app.blocking(move |app| connectors::get(app, &ctx.p, &id)).await?;
    Ok(axum::Json(json!({"connector": api::detail(&d)})))
}

pub async fn put(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Path(id): Path<String>,
    Json(b): Json<api::SaveBody>,
) -> Result<impl IntoResponse> {
    let save = b.into_save()?;
    let s = app.blocking(move |app| connectors::save(app, &ctx.p, &ctx.actor(), &id, save)).await?;
    Ok(axum::Json(api::saved(&s)))
}

pub async fn enable(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Path(id): Path<String>,
) -> Result<impl IntoResponse> {
    let d = app.blocking(move |app| connectors::enable(app, &ctx.p, &ctx.actor(), &id)).await?;
    Ok(axum::Json(json!({"connector": api::detail(&d)})))
}

pub async fn disable(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Path(id): Path<String>,
) -> Result<impl IntoResponse> {
    let d = app.blocking(move |app| connectors::disable(app, &ctx.p, &ctx.actor(), &id)).await?;
    Ok(axum::Json(json!({"connector": api::detail(&d)})))
}

/// 202 `{accepted: true}`: the sync goes on after the response.
pub async fn sync(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Path(id): Path<String>,
) -> Result<impl IntoResponse> {
    app.blocking(move |app| connectors::sync(app, &ctx.p, &ctx.actor(), &id)).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(json!({"accepted": true}))))
}

pub async fn messages(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Query(q): Query<api::LogQuery>,
) -> Result<impl IntoResponse> {
    let limit = page_limit(q.limit)?;
    let page = app
        .blocking(move |app| connectors::whatsapp::log(app, &ctx.p, q.direction.as_deref(), q.cursor.as_deref(), limit))
        .await?;
    Ok(axum::Json(api::log_page(&page)))
}

/// Meta's handshake query (`hub.mode`, `hub.verify_token`, `hub.challenge`).
#[derive(Deserialize)]
pub struct Handshake {
    #[serde(rename = "hub.mode")]
    mode: Option<String>,
    #[serde(rename = "hub.verify_token")]
    token: Option<String>,
    #[serde(rename = "hub.challenge")]
    challenge: Option<String>,
}

pub async fn whatsapp_verify(
    State(app): State<Arc<App>>,
    Path(ws): Path<String>,
    Query(q): Query<Handshake>,
) -> Result<impl IntoResponse> {
    let challenge = app
        .blocking(move |app| {
            connectors::whatsapp::verify(app, &ws, q.mode.as_deref(), q.token.as_deref(), q.challenge.as_deref())
        })
        .await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], challenge))
}

/// A delivery: the signature is checked over these very bytes.
pub async fn whatsapp_receive(
    State(app): State<Arc<App>>,
    Path(ws): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<impl IntoResponse> {
    let sig = headers.get("x-hub-signature-256").and_then(|v| v.to_str().ok()).map(str::to_string);
    let n = app.blocking(move |app| connectors::whatsapp::receive(app, &ws, sig.as_deref(), &body)).await?;
    Ok(axum::Json(json!({"received": n})))
}

/// The secret may come as a query parameter (plugins that cannot set headers); other parameters
/// a plugin adds are ignored.
#[derive(Deserialize)]
pub struct PushQuery {
    secret: Option<String>,
}

pub async fn wordpress_push(
    State(app): State<Arc<App>>,
    Path(ws): Path<String>,
    Query(q): Query<PushQuery>,
    headers: HeaderMap,
    _body: Bytes,
) -> Result<impl IntoResponse> {
    let secret = headers.get("x-webhook-secret").and_then(|v| v.to_str().ok()).map(str::to_string).or(q.secret);
    app.blocking(move |app| connectors::wordpress::push(app, &ws, secret.as_deref())).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(json!({"accepted": true}))))
}
