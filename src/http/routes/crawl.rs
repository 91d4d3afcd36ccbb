//! Website crawls: start one, list and delete crawl jobs, recrawl, pause and resume a source.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::json;

use super::account::page_limit;
use crate::app::App;
use crate::crawler::api::{CrawlBody, JobJson};
use crate::crawler::{self, JobFilter, STATUSES};
use crate::error::{Error, Result};
use crate::http::extract::{Ctx, Json, Path, Query};
use crate::http::openapi::shapes::{array, obj, of};
use crate::http::openapi::{Op, Routes};
use schemars::JsonSchema;

pub fn routes() -> Routes {
    let job_shape = |g: &mut _| obj(json!({"job": of::<JobJson>(g)}));
    Routes::new("Crawls")
        .post(
            "/api/v1/document/crawl",
            start,
            Op::new("Start crawling a website (a website source and a queued crawl job)")
                .perm("workspace.documents.manage")
                .body::<CrawlBody>()
                .answers_with(202, "Queued", |g| {
                    obj(json!({"job": of::<JobJson>(g), "source": of::<crate::documents::SourceView>(g)}))
                })
                .errors(&[409, 429]),
        )
        .get(
            "/api/v1/document/crawl/jobs",
            jobs,
            Op::new("List crawl jobs")
                .perm("workspace.documents.read")
                .query::<JobsQuery>()
                .ok_with(|g| obj(json!({"jobs": array(of::<JobJson>(g))}))),
        )
        .get(
            "/api/v1/document/crawl/jobs/{id}",
            job,
            Op::new("Get a crawl job (optionally wait until it ends)")
                .perm("workspace.documents.read")
                .query::<WaitQuery>()
                .ok_with(job_shape),
        )
        .delete(
            "/api/v1/document/crawl/jobs/{id}",
            delete_job,
            Op::new("Delete a finished crawl job").perm("workspace.documents.manage").no_content().errors(&[409]),
        )
        .post(
            "/api/v1/document/sources/{id}/recrawl",
            recrawl,
            Op::new("Recrawl a website source")
                .perm("workspace.documents.manage")
                .answers_with(202, "Queued", job_shape)
                .errors(&[409]),
        )
        .post(
            "/api/v1/document/sources/{id}/pause-crawl",
            pause,
            Op::new("Pause a website source's crawl")
                .perm("workspace.documents.manage")
                .ok_with(job_shape)
                .errors(&[409]),
        )
        .post(
            "/api/v1/document/sources/{id}/resume-crawl",
            resume,
            Op::new("Resume a paused crawl")
                .perm("workspace.documents.manage")
                .answers_with(202, "Queued", job_shape)
                .errors(&[409]),
        )
}

/// 202 with the queued job and its website source.
pub async fn start(State(app): State<Arc<App>>, ctx: Ctx, Json(b): Json<CrawlBody>) -> Result<impl IntoResponse> {
    let (job, source) = app.blocking(move |app| crawler::start(app, &ctx.p, &ctx.actor(), b.into())).await?;
    let source = crate::documents::SourceView::from(&source);
    Ok((StatusCode::ACCEPTED, axum::Json(json!({"job": JobJson::from(&job), "source": source}))))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobsQuery {
    status: Option<String>,
    since_minutes: Option<i64>,
    limit: Option<usize>,
    source_id: Option<String>,
}

pub async fn jobs(State(app): State<Arc<App>>, ctx: Ctx, Query(q): Query<JobsQuery>) -> Result<impl IntoResponse> {
    if let Some(s) = q.status.as_deref().filter(|s| !STATUSES.contains(s)) {
        return Err(Error::invalid_field(
            "status",
            format!("status must be one of {}, not {s:?}", STATUSES.join(", ")),
        ));
    }
    let minutes = q.since_minutes.unwrap_or(30);
    if !(1..=1440).contains(&minutes) {
        return Err(Error::invalid_field("sinceMinutes", "sinceMinutes must be 1 to 1440"));
    }
    let limit = page_limit(q.limit)?;
    let since = crate::clock::rfc3339(app.clock.now() - chrono::Duration::minutes(minutes));
    let f = JobFilter { status: q.status, since, limit, source_id: q.source_id };
    let list = app.blocking(move |app| crawler::list_jobs(app, &ctx.p, f)).await?;
    Ok(axum::Json(json!({"jobs": list.iter().map(JobJson::from).collect::<Vec<_>>()})))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitQuery {
    wait_ms: Option<u64>,
}

/// The job; with `waitMs` (at most 30,000), answers once the job has ended or the time is up.
pub async fn job(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Query(q): Query<WaitQuery>,
) -> Result<impl IntoResponse> {
    let wait = q.wait_ms.unwrap_or(0);
    if wait > 30_000 {
        return Err(Error::invalid_field("waitMs", "waitMs must be 0 to 30000"));
    }
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(wait);
    loop {
        let (p, id2) = (ctx.p.clone(), id.clone());
        let j = app.blocking(move |app| crawler::get_job(app, &p, &id2)).await?;
        if !j.active() || tokio::time::Instant::now() >= deadline {
            return Ok(axum::Json(json!({"job": JobJson::from(&j)})));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

pub async fn delete_job(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<StatusCode> {
    app.blocking(move |app| crawler::delete_job(app, &ctx.p, &ctx.actor(), &id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn recrawl(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<impl IntoResponse> {
    let j = app.blocking(move |app| crawler::recrawl(app, &ctx.p, &ctx.actor(), &id)).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(json!({"job": JobJson::from(&j)}))))
}

pub async fn pause(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<impl IntoResponse> {
    let j = app.blocking(move |app| crawler::pause(app, &ctx.p, &ctx.actor(), &id)).await?;
    Ok(axum::Json(json!({"job": JobJson::from(&j)})))
}

pub async fn resume(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<impl IntoResponse> {
    let j = app.blocking(move |app| crawler::resume(app, &ctx.p, &ctx.actor(), &id)).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(json!({"job": JobJson::from(&j)}))))
}
