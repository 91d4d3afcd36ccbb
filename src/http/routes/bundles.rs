//! Agent bundles: export an agent's draft as a bundle, import a bundle as a new agent, read an
//! import job. The rules live in `crate::bundles`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::app::App;
use crate::bundles::{self, api::ImportView};
use crate::error::Result;
use crate::http::extract::{Ctx, Json, Path};
use crate::http::openapi::{Op, Routes};

pub fn routes() -> Routes {
    Routes::new("Bundles")
        .get(
            "/api/v1/agents/{id}/bundle",
            export,
            Op::new("Export an agent's draft as a bundle (a JSON download, secrets redacted)")
                .perm("workspace.agents.read")
                .ok_any(),
        )
        .post(
            "/api/v1/agents/bundle",
            import,
            Op::new("Import a bundle as a new agent")
                .about("201 with the import job; 200 when the `idempotencyKey` was already applied.")
                .perm("workspace.agents.manage")
                .body_any()
                .answers::<ImportView>(201, "Imported")
                .ok::<ImportView>()
                .errors(&[409, 422]),
        )
        .get(
            "/api/v1/agents/bundle/imports/{iid}",
            get_import,
            Op::new("Get a bundle import job").perm("workspace.agents.read").ok::<ImportView>(),
        )
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
