//! The converse surface: agent channel credentials so far. The rules live in `crate::converse`.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::App;
use crate::converse::{self, Credential, NewCredential};
use crate::error::Result;
use crate::http::extract::{Json, Path, Query, SessionCtx};

pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/v1/agents/{id}/channel-credentials", routing::get(list).post(create))
        .route("/api/v1/agents/{id}/channel-credentials/{cid}/rotate", routing::post(rotate))
        .route("/api/v1/agents/{id}/channel-credentials/{cid}/revoke", routing::post(revoke))
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

#[derive(Deserialize)]
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

#[derive(Deserialize)]
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
