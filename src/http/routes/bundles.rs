//! Agent bundles: export an agent's draft as a bundle, import a bundle as a new agent, read an
//! import job. The rules live in `crate::bundles`.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing;
use serde_json::Value;

use crate::app::App;
use crate::bundles::{self, api::ImportView};
use crate::error::Result;
use crate::http::extract::{Ctx, Json, Path};

pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/v1/agents/{id}/bundle", routing::get(export))
        .route("/api/v1/agents/bundle", routing::post(import))
        .route("/api/v1/agents/bundle/imports/{iid}", routing::get(get_import))
}

/// A file name for the download: the agent's name in lowercase letters, digits and dashes.
fn file_name(agent: &str) -> String {
    let slug: String =
        agent.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    let slug: Vec<&str> = slug.split('-').filter(|s| !s.is_empty()).collect();
    let slug = if slug.is_empty() { "agent".to_string() } else { slug.join("-") };
    format!("{}.bundle.json", slug.chars().take(60).collect::<String>())
}

async fn export(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<Response> {
    let e = app.blocking(move |app| bundles::export(app, &ctx.p, &ctx.actor(), &id)).await?;
    let body = serde_json::to_vec_pretty(&e.bundle)?;
    let disposition = format!("attachment; filename=\"{}\"", file_name(&e.agent_name));
    Ok(([(header::CONTENT_TYPE, "application/json".to_string()), (header::CONTENT_DISPOSITION, disposition)], body)
        .into_response())
}

async fn import(State(app): State<Arc<App>>, ctx: Ctx, Json(b): Json<Value>) -> Result<Response> {
    let r = app.blocking(move |app| bundles::import(app, &ctx.p, &ctx.actor(), &b)).await?;
    let status = if r.replayed { StatusCode::OK } else { StatusCode::CREATED };
    Ok((status, axum::Json(ImportView::of(&r.job, r.replayed))).into_response())
}

async fn get_import(State(app): State<Arc<App>>, ctx: Ctx, Path(iid): Path<String>) -> Result<Response> {
    let j = app.blocking(move |app| bundles::get_import(app, &ctx.p, &iid)).await?;
    Ok(axum::Json(ImportView::of(&j, false)).into_response())
}
