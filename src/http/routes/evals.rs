//! Evals: snapshots, cases (by source message too), runs, suites with progress and regressions,
//! the workspace summary, and candidate-against-published comparisons of an agent.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::App;
use crate::error::{Error, Result};
use crate::evals::api::{self, CaseBodyIn, CasePatchIn, ComparisonBodyIn, RunBodyIn, SnapshotBodyIn, SuiteBodyIn};
use crate::evals::{self, suite};
use crate::http::extract::{Ctx, Json, Path, Query};
use crate::http::openapi::shapes::{any_object, array, obj};
use crate::http::openapi::{Op, Routes};
use schemars::JsonSchema;

pub fn routes() -> Routes {
    let case = |g: &mut _| api::case_schema(g);
    let run = |summary| Op::new(summary).perm("workspace.agents.read").ok_any();
    Routes::new("Evals")
        .post(
            "/api/v1/evals/snapshots",
            create_snapshot,
            Op::new("Snapshot a conversation turn for evals")
                .perm("workspace.agents.manage")
                .body_any()
                .answers_any(201, "Created"),
        )
        .get("/api/v1/evals/snapshots/{id}", get_snapshot, run("Get a snapshot"))
        .get(
            "/api/v1/evals/cases",
            list_cases,
            Op::new("List eval cases with the workspace summary")
                .perm("workspace.agents.read")
                .query::<AgentQuery>()
                .ok_with(|g| obj(json!({"cases": array(api::case_schema(g)), "summary": api::summary_schema()}))),
        )
        .post(
            "/api/v1/evals/cases",
            create_case,
            Op::new("Create an eval case")
                .perm("workspace.agents.manage")
                .body_any()
                .answers_with(201, "Created", case),
        )
        .post(
            "/api/v1/evals/cases/run",
            run_suite,
            Op::new("Run cases as a suite (202 while it runs)")
                .perm("workspace.agents.manage")
                .body_any()
                .answers_any(202, "Running")
                .ok_any()
                .errors(&[409, 429]),
        )
        .get(
            "/api/v1/evals/cases/by-source-message/{id}",
            find_by_message,
            Op::new("Find the case made from a message")
                .perm("workspace.agents.read")
                .ok_with(|g| obj(json!({"case": api::case_schema(g), "snapshot": any_object()}))),
        )
        .put(
            "/api/v1/evals/cases/by-source-message/{id}",
            put_by_message,
            Op::new("Create or update the case made from a message")
                .perm("workspace.agents.manage")
                .body_any()
                .answers_with(201, "Created", by_message)
                .ok_with(by_message),
        )
        .get(
            "/api/v1/evals/cases/{id}",
            get_case,
            Op::new("Get an eval case").perm("workspace.agents.read").ok_with(case),
        )
        .patch(
            "/api/v1/evals/cases/{id}",
            update_case,
            Op::new("Change an eval case").perm("workspace.agents.manage").body_any().ok_with(case),
        )
        .delete(
            "/api/v1/evals/cases/{id}",
            delete_case,
            Op::new("Delete an eval case").perm("workspace.agents.manage").no_content(),
        )
        .get(
            "/api/v1/evals/cases/{id}/runs",
            case_runs,
            Op::new("List a case's runs").perm("workspace.agents.read").query::<AgentQuery>().ok_any(),
        )
        .post(
            "/api/v1/evals/cases/{id}/runs",
            run_case,
            Op::new("Run a case").perm("workspace.agents.manage").body_any().answers_any(201, "Run").errors(&[429]),
        )
        .get("/api/v1/evals/runs/{id}", get_run, run("Get a run"))
        .get("/api/v1/evals/suites", list_suites, run("List suites").query::<AgentQuery>())
        .get(
            "/api/v1/evals/suites/{id}",
            get_suite,
            run("Get a suite (optionally wait until it ends)").query::<WaitQuery>(),
        )
        .get(
            "/api/v1/evals/suites/{id}/regressions",
            suite_regressions,
            run("A suite's regressions against a baseline").query::<BaselineQuery>(),
        )
        .get(
            "/api/v1/evals/summary",
            summary,
            Op::new("The eval summary")
                .perm("workspace.agents.read")
                .query::<AgentQuery>()
                .ok_json(api::summary_schema()),
        )
        .post(
            "/api/v1/agents/{agentId}/eval-runs",
            start_comparison,
            Op::new("Compare the candidate with the published revision")
                .perm("workspace.agents.manage")
                .body_any()
                .answers_any(202, "Queued")
                .ok_any()
                .errors(&[429]),
        )
        .get(
            "/api/v1/agents/{agentId}/eval-runs/{id}",
            get_comparison,
            run("Get a comparison (optionally wait until it ends)").query::<WaitQuery>(),
        )
}

fn by_message(g: &mut schemars::SchemaGenerator) -> Value {
    obj(json!({"created": {"type": "boolean"}, "case": api::case_schema(g), "snapshot": any_object()}))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentQuery {
    agent_id: Option<String>,
    limit: Option<usize>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitQuery {
    wait_ms: Option<u64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BaselineQuery {
    baseline: Option<String>,
}

const MAX_WAIT_MS: u64 = 30_000;
const POLL: Duration = Duration::from_millis(100);

fn wait_ms(q: &WaitQuery) -> Result<u64> {
    let w = q.wait_ms.unwrap_or(0);
    if w > MAX_WAIT_MS {
        return Err(Error::invalid_field("waitMs", format!("waitMs must be 0 to {MAX_WAIT_MS}")));
    }
    Ok(w)
}

pub async fn create_snapshot(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Json(b): Json<SnapshotBodyIn>,
) -> Result<impl IntoResponse> {
    let s = app
        .blocking(move |app| {
            evals::create_snapshot(app, &ctx.p, &ctx.actor(), &b.conversation_id, b.message_id.as_deref())
        })
        .await?;
    Ok((StatusCode::CREATED, axum::Json(api::snapshot(&s))))
}

pub async fn get_snapshot(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<impl IntoResponse> {
    let s = app.blocking(move |app| evals::get_snapshot(app, &ctx.p, &id)).await?;
    Ok(axum::Json(api::snapshot(&s)))
}

pub async fn list_cases(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Query(q): Query<AgentQuery>,
) -> Result<impl IntoResponse> {
    let (cases, summary) = app
        .blocking(move |app| {
            let cases = evals::list_cases(app, &ctx.p, q.agent_id.as_deref(), q.limit.unwrap_or(evals::MAX_LIST))?;
            Ok((cases, evals::summary(app, &ctx.p, q.agent_id.as_deref())?))
        })
        .await?;
    let cases: Vec<Value> = cases.iter().map(api::case).collect();
    Ok(axum::Json(json!({"cases": cases, "summary": api::summary(&summary)})))
}

pub async fn create_case(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Json(b): Json<CaseBodyIn>,
) -> Result<impl IntoResponse> {
    let c = app
        .blocking(move |app| {
            evals::create_case(app, &ctx.p, &ctx.actor(), &b.snapshot_id, &b.name, b.assertions.as_ref())
        })
        .await?;
    Ok((StatusCode::CREATED, axum::Json(api::case(&c))))
}

pub async fn get_case(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<impl IntoResponse> {
    let c = app.blocking(move |app| evals::get_case(app, &ctx.p, &id)).await?;
    Ok(axum::Json(api::case(&c)))
}

pub async fn update_case(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Json(b): Json<CasePatchIn>,
) -> Result<impl IntoResponse> {
    let c = app
        .blocking(move |app| {
            evals::update_case(app, &ctx.p, &ctx.actor(), &id, b.name.as_deref(), b.assertions.as_ref())
        })
        .await?;
    Ok(axum::Json(api::case(&c)))
}

pub async fn delete_case(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<StatusCode> {
    app.blocking(move |app| evals::delete_case(app, &ctx.p, &ctx.actor(), &id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// 201 when the case was created now, else 200 with the linked one.
pub async fn put_by_message(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
) -> Result<impl IntoResponse> {
    let (created, c, s) = app.blocking(move |app| evals::case_for_message(app, &ctx.p, &ctx.actor(), &id)).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, axum::Json(json!({"created": created, "case": api::case(&c), "snapshot": api::snapshot(&s)}))))
}

pub async fn find_by_message(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
) -> Result<impl IntoResponse> {
    let (c, s) = app.blocking(move |app| evals::find_case_for_message(app, &ctx.p, &id)).await?;
    Ok(axum::Json(json!({"case": api::case(&c), "snapshot": api::snapshot(&s)})))
}

pub async fn run_case(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Json(b): Json<RunBodyIn>,
) -> Result<impl IntoResponse> {
    let r = app.blocking(move |app| evals::replay::run_case(app, &ctx.p, &ctx.actor(), &id, b)).await?;
    Ok((StatusCode::CREATED, axum::Json(api::run(&r))))
}

pub async fn case_runs(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Query(q): Query<AgentQuery>,
) -> Result<impl IntoResponse> {
    let runs = app.blocking(move |app| evals::case_runs(app, &ctx.p, &id, q.limit.unwrap_or(50))).await?;
    Ok(axum::Json(json!({"runs": runs.iter().map(api::run).collect::<Vec<_>>()})))
}

pub async fn get_run(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<impl IntoResponse> {
    let r = app.blocking(move |app| evals::get_run(app, &ctx.p, &id)).await?;
    Ok(axum::Json(api::run(&r)))
}

/// A suite's view with, once it ended, its regressions against the previous suite.
async fn suite_view(app: &Arc<App>, ctx: &Ctx, s: &evals::Suite) -> Result<Value> {
    let mut v = api::suite(s);
    if !s.active() {
        let (p, id) = (ctx.p.clone(), s.id.clone());
        v["regressions"] =
            app.blocking(move |app| suite::regressions(app, &p, &id, None)).await?.unwrap_or(Value::Null);
    }
    Ok(v)
}

/// Polls a suite until it ends or `deadline` passes.
async fn wait_for(
    app: &Arc<App>,
    ctx: &Ctx,
    mut s: evals::Suite,
    deadline: tokio::time::Instant,
) -> Result<evals::Suite> {
    while s.active() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(POLL).await;
        let (p, id) = (ctx.p.clone(), s.id.clone());
        s = app.blocking(move |app| suite::get(app, &p, &id)).await?;
    }
    Ok(s)
}

/// `POST /evals/cases/run`: queues the suite and, unless `wait` is false, waits for it (up to a
/// little under the request timeout): 200 with every case's outcome and the workspace summary, or
/// 202 with the suite still running (poll `GET /evals/suites/{id}`).
pub async fn run_suite(State(app): State<Arc<App>>, ctx: Ctx, Json(b): Json<SuiteBodyIn>) -> Result<impl IntoResponse> {
    let wait = b.wait.unwrap_or(true);
    let c2 = Ctx { p: ctx.p.clone(), request_id: ctx.request_id.clone() };
    let (_, s) = app.blocking(move |app| suite::start(app, &c2.p, &c2.actor(), b)).await?;
    let budget = app.config.request_timeout.saturating_sub(Duration::from_secs(5));
    let deadline = tokio::time::Instant::now() + if wait { budget } else { Duration::ZERO };
    let s = wait_for(&app, &ctx, s, deadline).await?;
    let status = if s.active() { StatusCode::ACCEPTED } else { StatusCode::OK };
    Ok((status, axum::Json(suite_view(&app, &ctx, &s).await?)))
}

pub async fn list_suites(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Query(q): Query<AgentQuery>,
) -> Result<impl IntoResponse> {
    let list = app.blocking(move |app| suite::list(app, &ctx.p, q.agent_id.as_deref(), q.limit.unwrap_or(50))).await?;
    Ok(axum::Json(json!({"suites": list.iter().map(api::suite).collect::<Vec<_>>()})))
}

/// The suite; with `waitMs` (at most 30,000), answers once it has ended or the time is up.
pub async fn get_suite(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Query(q): Query<WaitQuery>,
) -> Result<impl IntoResponse> {
    let wait = wait_ms(&q)?;
    let (p, id2) = (ctx.p.clone(), id.clone());
    let s = app.blocking(move |app| suite::get(app, &p, &id2)).await?;
    let s = wait_for(&app, &ctx, s, tokio::time::Instant::now() + Duration::from_millis(wait)).await?;
    Ok(axum::Json(suite_view(&app, &ctx, &s).await?))
}

pub async fn suite_regressions(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Query(q): Query<BaselineQuery>,
) -> Result<impl IntoResponse> {
    let r = app.blocking(move |app| suite::regressions(app, &ctx.p, &id, q.baseline.as_deref())).await?;
    Ok(axum::Json(r.unwrap_or_else(|| json!({"baselineSuiteId": null, "regressed": [], "fixed": []}))))
}

pub async fn summary(State(app): State<Arc<App>>, ctx: Ctx, Query(q): Query<AgentQuery>) -> Result<impl IntoResponse> {
    let s = app.blocking(move |app| evals::summary(app, &ctx.p, q.agent_id.as_deref())).await?;
    Ok(axum::Json(api::summary(&s)))
}

fn comparison_view(c: &suite::Comparison) -> Value {
    json!({"id": c.id, "agentId": c.agent_id, "status": c.status(),
        "sides": c.sides.iter().map(api::suite).collect::<Vec<_>>(), "regressions": c.regressions()})
}

/// 202 with both sides queued (200 with the existing comparison for a repeated key).
pub async fn start_comparison(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(agent_id): Path<String>,
    Json(b): Json<ComparisonBodyIn>,
) -> Result<impl IntoResponse> {
    let (created, c) =
        app.blocking(move |app| suite::start_comparison(app, &ctx.p, &ctx.actor(), &agent_id, b)).await?;
    let status = if created { StatusCode::ACCEPTED } else { StatusCode::OK };
    Ok((status, axum::Json(comparison_view(&c))))
}

pub async fn get_comparison(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path((agent_id, id)): Path<(String, String)>,
    Query(q): Query<WaitQuery>,
) -> Result<impl IntoResponse> {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms(&q)?);
    loop {
        let (p, a, i) = (ctx.p.clone(), agent_id.clone(), id.clone());
        let c = app.blocking(move |app| suite::get_comparison(app, &p, &a, &i)).await?;
        if c.status() != "running" || tokio::time::Instant::now() >= deadline {
            return Ok(axum::Json(comparison_view(&c)));
        }
        tokio::time::sleep(POLL).await;
    }
}
