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
use crate::http::openapi::shapes::{obj, obj_some, string};
use crate::http::openapi::{Op, Routes};
use schemars::JsonSchema;

/// The agents routes (merged into the API by `http::routes`).
pub fn routes() -> Routes {
    let read = |summary| Op::new(summary).perm("workspace.agents.read");
    let manage = |summary| Op::new(summary).perm("workspace.agents.manage");
    Routes::new("Agents")
        .get("/api/v1/agents", list, read("List agents").ok::<AgentList>())
        .post(
            "/api/v1/agents",
            create,
            manage("Create an agent").body::<AgentBody>().answers::<AgentView>(201, "Created").errors(&[409]),
        )
        .get("/api/v1/agents/{id}", get, read("Get an agent").ok::<AgentView>())
        .put(
            "/api/v1/agents/{id}",
            update,
            manage("Change an agent's draft (`expectedDraftGeneration` guards it)")
                .body::<AgentBody>()
                .ok::<AgentView>()
                .errors(&[409]),
        )
        .get(
            "/api/v1/agents/{id}/assistant-logo",
            get_logo,
            read("The agent's logo image").media(200, "image/*", "The image"),
        )
        .post(
            "/api/v1/agents/{id}/assistant-logo",
            put_logo,
            manage("Upload the agent's logo (the body is the image, or a multipart form's `file`)")
                .body_media("image/*", serde_json::json!({"type": "string", "contentMediaType": "image/*"}))
                .answers::<LogoView>(201, "Stored")
                .errors(&[413, 415]),
        )
        .delete("/api/v1/agents/{id}/assistant-logo", delete_logo, manage("Remove the agent's logo").no_content())
        .post(
            "/api/v1/agents/{id}/default",
            make_default,
            manage("Make this the workspace's default agent").ok::<AgentView>(),
        )
        .get("/api/v1/agents/{id}/revision-state", revision_state, read("Draft and published revision state").ok_any())
        .get(
            "/api/v1/agents/{id}/revisions",
            list_revisions,
            read("List the agent's revisions").query::<RevisionsQuery>().ok_any(),
        )
        .post(
            "/api/v1/agents/{id}/revisions/candidates",
            candidates,
            manage("Freeze the draft as a candidate revision (201 new, 200 unchanged)")
                .body_any()
                .answers_any(201, "Created")
                .ok_any()
                .errors(&[409, 422]),
        )
        .get("/api/v1/agents/{id}/revisions/{rid}", get_revision, read("Get a revision").ok_any())
        .post(
            "/api/v1/agents/{id}/revisions/{rid}/publish",
            publish,
            manage("Publish a revision").body_any().ok_any().errors(&[409, 422]),
        )
        .get("/api/v1/agents/{id}/directives", list_directives, read("List directives").ok::<DirectiveList>())
        .post(
            "/api/v1/agents/{id}/directives",
            create_directive,
            manage("Create a directive").body::<directives::Input>().answers::<DirectiveView>(201, "Created"),
        )
        .post(
            "/api/v1/agents/{id}/directives/draft",
            draft_directive,
            manage("Draft a directive from a description (a model call)")
                .body::<directives::DraftInput>()
                .ok::<DraftView>()
                .errors(&[502]),
        )
        .patch(
            "/api/v1/agents/{id}/directives/{did}",
            update_directive,
            manage("Change a directive").body::<directives::Input>().ok::<DirectiveView>(),
        )
        .delete("/api/v1/agents/{id}/directives/{did}", delete_directive, manage("Delete a directive").no_content())
        .get(
            "/api/v1/agents/{id}/skill-capabilities",
            skill_capabilities,
            read("The capabilities the agent's skills may use").ok_any(),
        )
        .get("/api/v1/agents/{id}/skills", list_skills, read("List the agent's skills").ok::<SkillList>())
        .post(
            "/api/v1/agents/{id}/skills",
            create_skill,
            manage("Add a skill").body::<skills::NewSkill>().answers::<SkillView>(201, "Created"),
        )
        .patch(
            "/api/v1/agents/{id}/skills/{sid}",
            update_skill,
            manage("Change a skill").body::<skills::SkillPatch>().ok::<SkillView>(),
        )
        .delete("/api/v1/agents/{id}/skills/{sid}", delete_skill, manage("Remove a skill").no_content())
        .get(
            "/api/v1/agents/{id}/skills/{sid}/mcp-tools",
            mcp_tools,
            read("The tools the skill's MCP server offers (asked live)").ok_with(|_| {
                obj(serde_json::json!({"tools": crate::http::openapi::shapes::array(obj_some(
                    serde_json::json!({"name": string(), "description": {}, "inputSchema": {}}),
                    &["name"],
                ))}))
            }),
        )
        .get(
            "/api/v1/agents/{id}/context-variables",
            list_enablements,
            read("The context variables enabled for the agent").ok::<ContextVariableList<EnablementView>>(),
        )
        .put(
            "/api/v1/agents/{id}/context-variables/{vid}",
            put_enablement,
            manage("Enable a context variable for the agent").body::<context::EnablementInput>().ok::<EnablementView>(),
        )
        .delete(
            "/api/v1/agents/{id}/context-variables/{vid}",
            delete_enablement,
            manage("Disable a context variable for the agent").no_content(),
        )
        .get(
            "/api/v1/context-variables",
            list_variables,
            read("List context variables").ok::<ContextVariableList<VariableView>>(),
        )
        .post(
            "/api/v1/context-variables",
            create_variable,
            manage("Create a context variable")
                .body::<context::VariableInput>()
                .answers::<VariableView>(201, "Created")
                .errors(&[409]),
        )
        .get("/api/v1/context-variables/{id}", get_variable, read("Get a context variable").ok::<VariableView>())
        .patch(
            "/api/v1/context-variables/{id}",
            update_variable,
            manage("Change a context variable").body::<context::VariableInput>().ok::<VariableView>().errors(&[409]),
        )
        .delete("/api/v1/context-variables/{id}", delete_variable, manage("Delete a context variable").no_content())
        .get(
            "/api/v1/context-variables/{id}/values",
            list_values,
            read("A context variable's values").ok::<ValueList>(),
        )
        .put(
            "/api/v1/context-variables/{id}/values",
            put_value,
            manage("Set a context variable's value in a scope (sensitive values are sealed)")
                .body::<context::ValueInput>()
                .ok::<ValueView>()
                .errors(&[503]),
        )
        .delete(
            "/api/v1/context-variables/{id}/values",
            delete_value,
            manage("Remove a context variable's value in a scope").query::<context::ValueSelector>().no_content(),
        )
        .get("/api/v1/skills", skills_catalog, read("The built-in skill catalog").ok_any())
        .get("/api/v1/skills/{name}", skills_catalog_entry, read("One built-in skill").ok_any())
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

#[derive(Deserialize, JsonSchema)]
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
