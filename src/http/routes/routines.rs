//! Routines: an agent's routines (structured), portable markdown, decisions (approvals) and
//! webhook destinations. The rules live in `crate::routines`.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing;

use crate::app::App;
use crate::error::Result;
use serde::Deserialize;
use serde_json::json;

use crate::http::extract::{Ctx, Json, Path, SessionCtx};
use crate::routines::{self, api, decisions, destinations};

pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/v1/agents/{id}/routines", routing::get(list).post(create))
        .route("/api/v1/agents/{id}/routines/{rid}", routing::get(get).put(update).delete(delete))
        .route("/api/v1/agents/{id}/routines/portable", routing::post(create_portable))
        .route("/api/v1/agents/{id}/routines/{rid}/portable", routing::get(get_portable).put(put_portable))
        .route("/api/v1/routines/portable/canonicalize", routing::post(canonicalize))
        .route("/api/v1/decisions", routing::get(open_decisions))
        .route("/api/v1/agents/{id}/decisions/{handle}/resolve", routing::post(resolve))
        .route("/api/v1/settings/webhook-destinations", routing::get(list_destinations).post(create_destination))
        .route(
            "/api/v1/settings/webhook-destinations/{did}",
            routing::get(get_destination).put(update_destination).delete(delete_destination),
        )
        .route("/api/v1/settings/webhook-destinations/{did}/rotate-secret", routing::post(rotate_destination))
}

// ---- portable markdown ----

/// The portable envelope `{grammarVersion, content}` (strict).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Envelope {
    grammar_version: i64,
    content: String,
}

async fn canonicalize(State(app): State<Arc<App>>, ctx: Ctx, Json(b): Json<Envelope>) -> Result<impl IntoResponse> {
    let content = app.blocking(move |_| routines::canonicalize(&ctx.p, b.grammar_version, &b.content)).await?;
    Ok(axum::Json(json!({"grammarVersion": 1, "content": content})))
}

async fn create_portable(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Json(b): Json<Envelope>,
) -> Result<impl IntoResponse> {
    let (r, content) = app
        .blocking(move |app| {
            let r = routines::create_portable(app, &ctx.p, &ctx.actor(), &id, b.grammar_version, &b.content)?;
            let content = routines::portable(&r).ok();
            Ok((r, content))
        })
        .await?;
    Ok((StatusCode::CREATED, axum::Json(json!({"routineId": r.id, "grammarVersion": 1, "content": content}))))
}

async fn get_portable(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path((id, rid)): Path<(String, String)>,
) -> Result<impl IntoResponse> {
    let content = app.blocking(move |app| routines::portable(&routines::get(app, &ctx.p, &id, &rid)?)).await?;
    Ok(axum::Json(json!({"grammarVersion": 1, "content": content})))
}

async fn put_portable(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path((id, rid)): Path<(String, String)>,
    Json(b): Json<Envelope>,
) -> Result<impl IntoResponse> {
    let (r, content) = app
        .blocking(move |app| {
            let r = routines::update_portable(app, &ctx.p, &ctx.actor(), &id, &rid, b.grammar_version, &b.content)?;
            let content = routines::portable(&r).ok();
            Ok((r, content))
        })
        .await?;
    Ok(axum::Json(json!({"routineId": r.id, "grammarVersion": 1, "content": content})))
}

// ---- decisions ----

async fn open_decisions(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    let ds = app.blocking(move |app| decisions::open(app, &ctx.p)).await?;
    Ok(axum::Json(json!({"decisions": ds.iter().map(api::decision).collect::<Vec<_>>()})))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResolveBody {
    option_id: String,
    content_hash: String,
    #[serde(default)]
    payload: Option<serde::de::IgnoredAny>,
}

async fn resolve(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path((id, handle)): Path<(String, String)>,
    Json(b): Json<ResolveBody>,
) -> Result<impl IntoResponse> {
    let _ = b.payload;
    let r = decisions::Resolve { option_id: b.option_id, content_hash: b.content_hash };
    let out = app.blocking(move |app| decisions::resolve(app, &ctx.p, &id, &handle, r)).await?;
    Ok(axum::Json(json!({
        "status": "resolved", "decision": {"handle": out.decision.handle, "optionId": out.option_id},
        "conversationId": out.decision.conversation_id, "resumed": out.resumed, "messageId": out.message_id,
    })))
}

// ---- webhook destinations ----

fn destination(d: &routines::Destination) -> serde_json::Value {
    json!({"id": d.id, "name": d.name, "url": crate::delivery::shown_url(&d.url), "lastDeliveryStatus": d.last_delivery_status,
           "lastDeliveryAt": d.last_delivery_at, "createdAt": d.created_at, "updatedAt": d.updated_at})
}

/// `{destination, secret}`: the secret shown this once (create and rotate).
fn with_secret(c: &destinations::Created) -> serde_json::Value {
    json!({"destination": destination(&c.destination), "secret": c.secret})
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DestinationBody {
    name: Option<String>,
    url: Option<String>,
}

async fn list_destinations(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    let ds = app.blocking(move |app| destinations::list(app, &ctx.p)).await?;
    Ok(axum::Json(json!({"destinations": ds.iter().map(destination).collect::<Vec<_>>()})))
}

async fn create_destination(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Json(b): Json<DestinationBody>,
) -> Result<impl IntoResponse> {
    let name = b.name.ok_or_else(|| crate::Error::invalid_field("name", "name is required"))?;
    let url = b.url.ok_or_else(|| crate::Error::invalid_field("url", "url is required"))?;
    let c = app.blocking(move |app| destinations::create(app, &ctx.p, &ctx.actor(), &name, &url)).await?;
    Ok((StatusCode::CREATED, axum::Json(with_secret(&c))))
}

async fn get_destination(State(app): State<Arc<App>>, ctx: Ctx, Path(did): Path<String>) -> Result<impl IntoResponse> {
    let d = app.blocking(move |app| destinations::get(app, &ctx.p, &did)).await?;
    Ok(axum::Json(json!({"destination": destination(&d)})))
}

async fn update_destination(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Path(did): Path<String>,
    Json(b): Json<DestinationBody>,
) -> Result<impl IntoResponse> {
    let d = app
        .blocking(move |app| destinations::update(app, &ctx.p, &ctx.actor(), &did, b.name.as_deref(), b.url.as_deref()))
        .await?;
    Ok(axum::Json(json!({"destination": destination(&d)})))
}

async fn rotate_destination(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Path(did): Path<String>,
) -> Result<impl IntoResponse> {
    let c = app.blocking(move |app| destinations::rotate(app, &ctx.p, &ctx.actor(), &did)).await?;
    Ok(axum::Json(with_secret(&c)))
}

async fn delete_destination(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Path(did): Path<String>,
) -> Result<impl IntoResponse> {
    app.blocking(move |app| destinations::delete(app, &ctx.p, &ctx.actor(), &did)).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<impl IntoResponse> {
    let rs = app.blocking(move |app| routines::list(app, &ctx.p, &id)).await?;
    Ok(axum::Json(serde_json::json!({"routines": rs.iter().map(api::routine).collect::<Vec<_>>()})))
}

async fn create(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Json(b): Json<api::RoutineBody>,
) -> Result<impl IntoResponse> {
    let r = app.blocking(move |app| routines::create(app, &ctx.p, &ctx.actor(), &id, b.into())).await?;
    Ok((StatusCode::CREATED, axum::Json(api::routine(&r))))
}

async fn get(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path((id, rid)): Path<(String, String)>,
) -> Result<impl IntoResponse> {
    let r = app.blocking(move |app| routines::get(app, &ctx.p, &id, &rid)).await?;
    Ok(axum::Json(api::routine(&r)))
}

async fn update(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path((id, rid)): Path<(String, String)>,
    Json(b): Json<api::RoutineBody>,
) -> Result<impl IntoResponse> {
    let r = app.blocking(move |app| routines::update(app, &ctx.p, &ctx.actor(), &id, &rid, b.into())).await?;
    Ok(axum::Json(api::routine(&r)))
}

async fn delete(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path((id, rid)): Path<(String, String)>,
) -> Result<impl IntoResponse> {
    app.blocking(move |app| routines::delete(app, &ctx.p, &ctx.actor(), &id, &rid)).await?;
    Ok(StatusCode::NO_CONTENT)
}
