//! Connectors: the workspace's connectors (list, read, save, enable, disable, sync), WhatsApp's
//! message log, and the public webhooks the outside systems call.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use serde_json::json;

use super::account::page_limit;
use crate::app::App;
use crate::connectors::{self, api};
use crate::error::Result;
use crate::http::extract::{Ctx, Json, Path, Query, SessionCtx};
use crate::http::openapi::shapes::{any_object, array, obj_some, string};
use crate::http::openapi::{Op, Routes};

/// The connector routes (merged into the API by `http::routes`).
pub fn routes() -> Routes {
    let read = |summary| Op::new(summary).perm("workspace.settings.read");
    let manage = |summary| Op::new(summary).session().perm("workspace.settings.manage");
    Routes::new("Connectors")
        .get(
            "/api/v1/connectors",
            list,
            read("Both built-in connectors with their config schema").ok::<api::ConnectorListJson>(),
        )
        .get(
            "/api/v1/connectors/whatsapp/messages",
            messages,
            read("The WhatsApp message log, newest first").query::<api::LogQuery>().ok::<api::LogPageJson>(),
        )
        .get(
            "/api/v1/connectors/{id}",
            get,
            read("A connector with its config (never a secret's value) and sync state").ok::<api::ConnectorEnvelope>(),
        )
        .put(
            "/api/v1/connectors/{id}",
            put,
            manage("Save a connector's config")
                .about(
                    "Keys left out keep their value; secrets are sealed at rest and never returned; a \
                     `generated_secret` made by this save is in `generatedSecrets`, shown this once. A 400 names \
                     the key (`details.field` = `config.<key>`); 409 when another workspace has the same site or \
                     business number; 503 when a secret is saved without `CONNECTOR_ENCRYPTION_KEY`.",
                )
                .body::<api::SaveBody>()
                .ok::<api::SavedJson>()
                .errors(&[409, 503]),
        )
        .post(
            "/api/v1/connectors/{id}/enable",
            enable,
            manage("Enable a configured connector (400 names the first missing key)").ok::<api::ConnectorEnvelope>(),
        )
        .post(
            "/api/v1/connectors/{id}/disable",
            disable,
            manage("Disable a connector (what it ingested stays)").ok::<api::ConnectorEnvelope>(),
        )
        .post(
            "/api/v1/connectors/{id}/sync",
            sync,
            manage("Sync now: read everything again (202)")
                .about(
                    "409 when the connector does not sync (WhatsApp), is not enabled, or a sync is queued or running.",
                )
                .accepted::<api::AcceptedJson>()
                .errors(&[409]),
        )
        .get(
            "/api/connectors/whatsapp/{workspace_id}/webhook",
            whatsapp_verify,
            Op::new("WhatsApp: Meta's verify-token handshake")
                .tag("Connector webhooks")
                .public()
                .query::<api::Handshake>()
                .media(200, "text/plain", "`hub.challenge`, as text")
                .errors(&[403]),
        )
        .post(
            "/api/connectors/whatsapp/{workspace_id}/webhook",
            whatsapp_receive,
            Op::new("WhatsApp: a signed delivery from the Cloud API")
                .about(
                    "`X-Hub-Signature-256` is checked over the raw body with the app secret (401 when missing or \
                     wrong). Every message is stored before the answer; the turn runs afterwards.",
                )
                .tag("Connector webhooks")
                .public()
                .header("x-hub-signature-256", true, "`sha256=` and the hex HMAC-SHA256 of the raw body")
                .body_json(obj_some(json!({"object": string(), "entry": array(any_object())}), &["entry"]))
                .ok::<api::ReceivedJson>()
                .errors(&[401]),
        )
        .post(
            "/api/connectors/wordpress/{workspace_id}/webhook",
            wordpress_push,
            Op::new("WordPress: a push from the site (queues an incremental sync)")
                .about("The shared secret in `X-Webhook-Secret` or `?secret=`; any body, ignored.")
                .tag("Connector webhooks")
                .public()
                .query::<api::PushQuery>()
                .header("x-webhook-secret", false, "The connector's webhook shared secret")
                .accepted::<api::AcceptedJson>()
                .errors(&[401]),
        )
}

pub async fn list(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    let list = app.blocking(move |app| connectors::list(app, &ctx.p)).await?;
    let encryption = app.config.encryption_key.is_some();
    Ok(axum::Json(api::ConnectorListJson {
        encryption_configured: encryption,
        connectors: list.iter().map(api::summary).collect(),
    }))
}

pub async fn get(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<impl IntoResponse> {
    let d = app.blocking(move |app| connectors::get(app, &ctx.p, &id)).await?;
    Ok(axum::Json(api::envelope(&d)))
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
    Ok(axum::Json(api::envelope(&d)))
}

pub async fn disable(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Path(id): Path<String>,
) -> Result<impl IntoResponse> {
    let d = app.blocking(move |app| connectors::disable(app, &ctx.p, &ctx.actor(), &id)).await?;
    Ok(axum::Json(api::envelope(&d)))
}

/// 202 `{accepted: true}`: the sync goes on after the response.
pub async fn sync(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Path(id): Path<String>,
) -> Result<impl IntoResponse> {
    app.blocking(move |app| connectors::sync(app, &ctx.p, &ctx.actor(), &id)).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(api::AcceptedJson { accepted: true })))
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

pub async fn whatsapp_verify(
    State(app): State<Arc<App>>,
    Path(ws): Path<String>,
    Query(q): Query<api::Handshake>,
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
    Ok(axum::Json(api::ReceivedJson { received: n }))
}

pub async fn wordpress_push(
    State(app): State<Arc<App>>,
    Path(ws): Path<String>,
    Query(q): Query<api::PushQuery>,
    headers: HeaderMap,
    _body: Bytes,
) -> Result<impl IntoResponse> {
    let secret = headers.get("x-webhook-secret").and_then(|v| v.to_str().ok()).map(str::to_string).or(q.secret);
    app.blocking(move |app| connectors::wordpress::push(app, &ws, secret.as_deref())).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(api::AcceptedJson { accepted: true })))
}
