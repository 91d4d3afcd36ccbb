//! Agent authoring routes: agents, logos, revisions, directives, skills, context variables and
//! the read-only skills catalog. Handlers are thin: the rules live in `crate::agents`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::agents::api::{
    self, AgentList, AgentView, ContextVariableList, DirectiveList, DirectiveView, DraftView, EnablementView, LogoView,
    SkillList, SkillView, ValueList, ValueView, VariableView,
};
use crate::agents::{self, AgentBody, context, directives, revisions, skills};
use crate::app::App;
use crate::error::{Error, Result};
use crate::http::extract::{Ctx, Json, OptionalJson, Path, Query};
use axum::Router;
use axum::routing;

/// The agents routes (merged into the API by `http::router_with`).
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/v1/agents", routing::get(list).post(create))
        .route("/api/v1/agents/{id}", routing::get(get).put(update))
        .route("/api/v1/agents/{id}/assistant-logo", routing::get(get_logo).post(put_logo).delete(delete_logo))
        .route("/api/v1/agents/{id}/default", routing::post(make_default))
        .route("/api/v1/agents/{id}/revision-state", routing::get(revision_state))
        .route("/api/v1/agents/{id}/revisions", routing::get(list_revisions))
        .route("/api/v1/agents/{id}/revisions/candidates", routing::post(candidates))
        .route("/api/v1/agents/{id}/revisions/{rid}", routing::get(get_revision))
        .route("/api/v1/agents/{id}/revisions/{rid}/publish", routing::post(publish))
        .route("/api/v1/agents/{id}/directives", routing::get(list_directives).post(create_directive))
        .route("/api/v1/agents/{id}/directives/draft", routing::post(draft_directive))
        .route("/api/v1/agents/{id}/directives/{did}", routing::patch(update_directive).delete(delete_directive))
        .route("/api/v1/agents/{id}/skill-capabilities", routing::get(skill_capabilities))
        .route("/api/v1/agents/{id}/skills", routing::get(list_skills).post(create_skill))
        .route("/api/v1/agents/{id}/skills/{sid}", routing::patch(update_skill).delete(delete_skill))
        .route("/api/v1/agents/{id}/skills/{sid}/mcp-tools", routing::get(mcp_tools))
        .route("/api/v1/agents/{id}/context-variables", routing::get(list_enablements))
        .route("/api/v1/agents/{id}/context-variables/{vid}", routing::put(put_enablement).delete(delete_enablement))
        .route("/api/v1/context-variables", routing::get(list_variables).post(create_variable))
        .route(
            "/api/v1/context-variables/{id}",
            routing::get(get_variable).patch(update_variable).delete(delete_variable),
        )
        .route("/api/v1/context-variables/{id}/values", routing::get(list_values).put(put_value).delete(delete_value))
        .route("/api/v1/skills", routing::get(skills_catalog))
        .route("/api/v1/skills/{name}", routing::get(skills_catalog_entry))
}

fn agent_json(r: &agents::AgentRecord) -> Response {
    axum::Json(AgentView::of(r)).into_response()
}

pub async fn list(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    let all = app.blocking(move |app| agents::list(app, &ctx.p)).await?;
    Ok(axum::Json(AgentList { agents: all.iter().map(AgentView::of).collect() }).into_response())
}

pub async fn create(State(app): State<Arc<App>>, ctx: Ctx, Json(b): Json<AgentBody>) -> Result<impl IntoResponse> {
    let r = app.blocking(move |app| agents::create(app, &ctx.p, &ctx.actor(), b)).await?;
    Ok((StatusCode::CREATED, agent_json(&r)))
}

pub async fn get(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<impl IntoResponse> {
    Ok(agent_json(&app.blocking(move |app| agents::get(app, &ctx.p, &id)).await?))
}

pub async fn update(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Json(b): Json<AgentBody>,
) -> Result<impl IntoResponse> {
    Ok(agent_json(&app.blocking(move |app| agents::update(app, &ctx.p, &ctx.actor(), &id, b)).await?))
}

pub async fn make_default(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<impl IntoResponse> {
    Ok(agent_json(&app.blocking(move |app| agents::make_default(app, &ctx.p, &ctx.actor(), &id)).await?))
}

pub async fn get_logo(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<Response> {
    let (mime, bytes) = app.blocking(move |app| agents::get_logo(app, &ctx.p, &id)).await?;
    Ok((
        [
            (header::CONTENT_TYPE, mime),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".into()),
            (header::CONTENT_SECURITY_POLICY, "default-src 'none'; style-src 'unsafe-inline'; sandbox".into()),
        ],
        bytes,
    )
        .into_response())
}

/// The logo is the request body (any image content type), or the `file` field of a multipart form.
pub async fn put_logo(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    req: Request,
) -> Result<impl IntoResponse> {
    let ct = req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let bad = |e: String| Error::invalid(format!("bad multipart body: {e}"));
    let (filename, bytes) = if ct.starts_with("multipart/form-data") {
        let mut mp = Multipart::from_request(req, &app).await.map_err(|e| bad(e.body_text()))?;
        let mut found = None;
        while let Some(field) = mp.next_field().await.map_err(|e| bad(e.body_text()))? {
            if field.name() == Some("file") {
                let name = field.file_name().map(str::to_string);
                let data = field.bytes().await.map_err(|e| bad(e.body_text()))?;
                found = Some((name, data.to_vec()));
            }
        }
        found.ok_or_else(|| Error::invalid_field("file", "send the logo as the `file` field"))?
    } else {
        let body = Bytes::from_request(req, &app).await.map_err(|e| Error::invalid(e.body_text()))?;
        (None, body.to_vec())
    };
    let aid = id.clone();
    let logo = app.blocking(move |app| agents::put_logo(app, &ctx.p, &ctx.actor(), &id, filename, bytes)).await?;
    Ok((StatusCode::CREATED, axum::Json(LogoView::of(&aid, &logo))))
}

pub async fn delete_logo(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<impl IntoResponse> {
    app.blocking(move |app| agents::delete_logo(app, &ctx.p, &ctx.actor(), &id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

// ---- revisions ----

pub async fn revision_state(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
) -> Result<impl IntoResponse> {
    Ok(axum::Json(api::revision_state(&app.blocking(move |app| revisions::state(app, &ctx.p, &id)).await?)))
}

pub async fn candidates(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    OptionalJson(b): OptionalJson<revisions::CandidateInput>,
) -> Result<impl IntoResponse> {
    let (created, d) = app.blocking(move |app| revisions::candidate(app, &ctx.p, &ctx.actor(), &id, b)).await?;
    Ok((if created { StatusCode::CREATED } else { StatusCode::OK }, axum::Json(api::revision_detail(&d))))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RevisionsQuery {
    include: Option<String>,
}

pub async fn list_revisions(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Query(q): Query<RevisionsQuery>,
) -> Result<impl IntoResponse> {
    let include = match q.include.as_deref() {
        None => false,
        Some("published") => true,
        Some(other) => {
            return Err(Error::invalid_field("include", format!("include accepts only `published`, not `{other}`")));
        }
    };
    Ok(axum::Json(api::revision_list(&app.blocking(move |app| revisions::list(app, &ctx.p, &id, include)).await?)))
}

pub async fn get_revision(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path((id, rid)): Path<(String, String)>,
) -> Result<impl IntoResponse> {
    Ok(axum::Json(api::revision_detail(&app.blocking(move |app| revisions::get(app, &ctx.p, &id, &rid)).await?)))
}

pub async fn publish(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path((id, rid)): Path<(String, String)>,
    Json(b): Json<revisions::PublishInput>,
) -> Result<impl IntoResponse> {
    let d = app.blocking(move |app| revisions::publish(app, &ctx.p, &ctx.actor(), &id, &rid, b)).await?;
    Ok(axum::Json(api::revision_detail(&d)))
}

// ---- directives ----

pub async fn list_directives(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
) -> Result<impl IntoResponse> {
    let all = app.blocking(move |app| directives::list(app, &ctx.p, &id)).await?;
    Ok(axum::Json(DirectiveList { directives: all.iter().map(DirectiveView::of).collect() }).into_response())
}

pub async fn create_directive(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Json(b): Json<directives::Input>,
) -> Result<impl IntoResponse> {
    let d = app.blocking(move |app| directives::create(app, &ctx.p, &ctx.actor(), &id, b)).await?;
    Ok((StatusCode::CREATED, axum::Json(DirectiveView::of(&d)).into_response()))
}

pub async fn draft_directive(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Json(b): Json<directives::DraftInput>,
) -> Result<impl IntoResponse> {
    let d = app.blocking(move |app| directives::draft(app, &ctx.p, &id, b)).await?;
    Ok(axum::Json(DraftView::of(&d)).into_response())
}

pub async fn update_directive(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path((id, did)): Path<(String, String)>,
    Json(b): Json<directives::Input>,
) -> Result<impl IntoResponse> {
    let d = app.blocking(move |app| directives::update(app, &ctx.p, &ctx.actor(), &id, &did, b)).await?;
    Ok(axum::Json(DirectiveView::of(&d)).into_response())
}

pub async fn delete_directive(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path((id, did)): Path<(String, String)>,
) -> Result<impl IntoResponse> {
    app.blocking(move |app| directives::delete(app, &ctx.p, &ctx.actor(), &id, &did)).await?;
    Ok(StatusCode::NO_CONTENT)
}

// ---- skills ----

/// `GET /agents/{id}/skills/{sid}/mcp-tools`: the tools the skill's MCP server offers (asked live).
pub async fn mcp_tools(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path((id, sid)): Path<(String, String)>,
) -> Result<impl IntoResponse> {
    let (url, credential) = app.blocking(move |app| skills::mcp_server_of(app, &ctx.p, &id, &sid)).await?;
    let tools = crate::delivery::mcp_client::list_tools(&app, &url, credential.as_deref()).await?;
    let tools: Vec<serde_json::Value> = tools
        .iter()
        .map(|t| serde_json::json!({"name": t.name, "description": t.description, "inputSchema": t.input_schema}))
        .collect();
    Ok(axum::Json(serde_json::json!({"tools": tools})))
}

pub async fn skill_capabilities(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
) -> Result<impl IntoResponse> {
    Ok(axum::Json(app.blocking(move |app| skills::capabilities(app, &ctx.p, &id)).await?))
}

pub async fn list_skills(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<impl IntoResponse> {
    let all = app.blocking(move |app| skills::list(app, &ctx.p, &id)).await?;
    Ok(axum::Json(SkillList { skills: all.iter().map(SkillView::of).collect() }).into_response())
}

pub async fn create_skill(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Json(b): Json<skills::NewSkill>,
) -> Result<impl IntoResponse> {
    let s = app.blocking(move |app| skills::create(app, &ctx.p, &ctx.actor(), &id, b)).await?;
    Ok((StatusCode::CREATED, axum::Json(SkillView::of(&s)).into_response()))
}

pub async fn update_skill(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path((id, sid)): Path<(String, String)>,
    Json(b): Json<skills::SkillPatch>,
) -> Result<impl IntoResponse> {
    let s = app.blocking(move |app| skills::update(app, &ctx.p, &ctx.actor(), &id, &sid, b)).await?;
    Ok(axum::Json(SkillView::of(&s)).into_response())
}

pub async fn delete_skill(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path((id, sid)): Path<(String, String)>,
) -> Result<impl IntoResponse> {
    app.blocking(move |app| skills::delete(app, &ctx.p, &ctx.actor(), &id, &sid)).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn skills_catalog(ctx: Ctx) -> Result<impl IntoResponse> {
    Ok(axum::Json(api::catalog(skills::catalog_list(&ctx.p)?)))
}

pub async fn skills_catalog_entry(ctx: Ctx, Path(name): Path<String>) -> Result<impl IntoResponse> {
    Ok(axum::Json(api::catalog_entry(skills::catalog_get(&ctx.p, &name)?)))
}

// ---- context variables ----

pub async fn list_variables(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    let all = app.blocking(move |app| context::list(app, &ctx.p)).await?;
    Ok(axum::Json(ContextVariableList { context_variables: all.iter().map(VariableView::of).collect() })
        .into_response())
}

pub async fn create_variable(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Json(b): Json<context::VariableInput>,
) -> Result<impl IntoResponse> {
    let v = app.blocking(move |app| context::create(app, &ctx.p, &ctx.actor(), b)).await?;
    Ok((StatusCode::CREATED, axum::Json(VariableView::of(&v)).into_response()))
}

pub async fn get_variable(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<impl IntoResponse> {
    let v = app.blocking(move |app| context::get(app, &ctx.p, &id)).await?;
    Ok(axum::Json(VariableView::of(&v)).into_response())
}

pub async fn update_variable(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Json(b): Json<context::VariableInput>,
) -> Result<impl IntoResponse> {
    let v = app.blocking(move |app| context::update(app, &ctx.p, &ctx.actor(), &id, b)).await?;
    Ok(axum::Json(VariableView::of(&v)).into_response())
}

pub async fn delete_variable(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
) -> Result<impl IntoResponse> {
    app.blocking(move |app| context::delete(app, &ctx.p, &ctx.actor(), &id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn list_values(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<impl IntoResponse> {
    let vid = id.clone();
    let all = app.blocking(move |app| context::list_values(app, &ctx.p, &id)).await?;
    let values = all.iter().map(|v| ValueView::of(v, None)).collect();
    Ok(axum::Json(ValueList { context_variable_id: &vid, values }).into_response())
}

pub async fn put_value(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Json(b): Json<context::ValueInput>,
) -> Result<impl IntoResponse> {
    let vid = id.clone();
    let v = app.blocking(move |app| context::put_value(app, &ctx.p, &ctx.actor(), &id, b)).await?;
    Ok(axum::Json(ValueView::of(&v, Some(&vid))).into_response())
}

pub async fn delete_value(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Query(q): Query<context::ValueSelector>,
) -> Result<impl IntoResponse> {
    app.blocking(move |app| context::delete_value(app, &ctx.p, &ctx.actor(), &id, q)).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn list_enablements(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
) -> Result<impl IntoResponse> {
    let all = app.blocking(move |app| context::list_enablements(app, &ctx.p, &id)).await?;
    Ok(axum::Json(ContextVariableList { context_variables: all.iter().map(EnablementView::of).collect() })
        .into_response())
}

pub async fn put_enablement(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path((id, vid)): Path<(String, String)>,
    Json(b): Json<context::EnablementInput>,
) -> Result<impl IntoResponse> {
    let e = app.blocking(move |app| context::put_enablement(app, &ctx.p, &ctx.actor(), &id, &vid, b)).await?;
    Ok(axum::Json(EnablementView::of(&e)).into_response())
}

pub async fn delete_enablement(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path((id, vid)): Path<(String, String)>,
) -> Result<impl IntoResponse> {
    app.blocking(move |app| context::delete_enablement(app, &ctx.p, &ctx.actor(), &id, &vid)).await?;
    Ok(StatusCode::NO_CONTENT)
}
