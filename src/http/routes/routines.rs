//! Routines: an agent's routines (structured), portable markdown, decisions (approvals) and
//! webhook destinations. The rules live in `crate::routines`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;

use crate::app::App;
use crate::error::Result;
use crate::http::openapi::shapes::{
    any_object, array, boolean, integer, obj, obj_some, one_of, string, string_or_null,
};
use crate::http::openapi::{Op, Routes};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::http::extract::{Ctx, Json, Path, SessionCtx};
use crate::routines::{self, api, decisions, destinations};

pub fn routes() -> Routes {
    let read = |summary| Op::new(summary).perm("workspace.agents.read");
    let manage = |summary| Op::new(summary).perm("workspace.agents.manage");
    let portable = obj_some(
        json!({"routineId": string(), "grammarVersion": integer(), "content": string()}),
        &["grammarVersion", "content"],
    );
    let settings = |summary| Op::new(summary).tag("Settings").perm("workspace.settings.read");
    let settings_manage = |summary| Op::new(summary).tag("Settings").session().perm("workspace.settings.manage");
    let with_secret = obj(json!({"destination": destination_schema(), "secret": string()}));
    Routes::new("Routines")
        .get("/api/v1/agents/{id}/routines", list, read("List the agent's routines").ok_any())
        .post(
            "/api/v1/agents/{id}/routines",
            create,
            manage("Create a routine").body_any().answers_any(201, "Created").errors(&[409, 422]),
        )
        .get("/api/v1/agents/{id}/routines/{rid}", get, read("Get a routine").ok_any())
        .put("/api/v1/agents/{id}/routines/{rid}", update, manage("Replace a routine").body_any().ok_any().errors(&[409, 422]))
        .delete("/api/v1/agents/{id}/routines/{rid}", delete, manage("Delete a routine").no_content())
        .post(
            "/api/v1/agents/{id}/routines/portable",
            create_portable,
            manage("Create a routine from portable markdown")
                .body::<Envelope>()
                .answers_json(201, "Created", portable.clone())
                .errors(&[409, 422]),
        )
        .get(
            "/api/v1/agents/{id}/routines/{rid}/portable",
            get_portable,
            read("A routine as portable markdown").ok_json(portable.clone()).errors(&[422]),
        )
        .put(
            "/api/v1/agents/{id}/routines/{rid}/portable",
            put_portable,
            manage("Replace a routine from portable markdown").body::<Envelope>().ok_json(portable.clone()).errors(&[409, 422]),
        )
        .post(
            "/api/v1/routines/portable/canonicalize",
            canonicalize,
            read("Canonicalize portable markdown").body::<Envelope>().ok_json(portable).errors(&[422]),
        )
        .get(
            "/api/v1/decisions",
            open_decisions,
            Op::new("Open decisions (approvals) across agents")
                .perm("workspace.conversation.takeover")
                .ok_json(obj(json!({"decisions": array(any_object())}))),
        )
        .post(
            "/api/v1/agents/{id}/decisions/{handle}/resolve",
            resolve,
            Op::new("Resolve a decision")
                .perm("workspace.conversation.takeover")
                .body::<ResolveBody>()
                .ok_json(obj_some(
                    json!({
                        "status": one_of(&["resolved"]), "decision": obj(json!({"handle": string(), "optionId": string()})),
                        "conversationId": string_or_null(), "resumed": boolean(), "messageId": string_or_null(),
                    }),
                    &["status", "decision"],
                ))
                .errors(&[409]),
        )
        .get(
            "/api/v1/settings/webhook-destinations",
            list_destinations,
            settings("List webhook destinations").ok_json(obj(json!({"destinations": array(destination_schema())}))),
        )
        .post(
            "/api/v1/settings/webhook-destinations",
            create_destination,
            settings_manage("Create a webhook destination (the signing secret is shown once)")
                .body::<DestinationBody>()
                .answers_json(201, "Created", with_secret.clone())
                .errors(&[409]),
        )
        .get(
            "/api/v1/settings/webhook-destinations/{did}",
            get_destination,
            settings("Get a webhook destination").ok_json(obj(json!({"destination": destination_schema()}))),
        )
        .put(
            "/api/v1/settings/webhook-destinations/{did}",
            update_destination,
            settings_manage("Change a webhook destination")
                .body::<DestinationBody>()
                .ok_json(obj(json!({"destination": destination_schema()})))
                .errors(&[409]),
        )
        .delete(
            "/api/v1/settings/webhook-destinations/{did}",
            delete_destination,
            settings_manage("Delete a webhook destination").no_content(),
        )
        .post(
            "/api/v1/settings/webhook-destinations/{did}/rotate-secret",
            rotate_destination,
            settings_manage("Rotate a webhook destination's signing secret").ok_json(with_secret),
        )
}

fn destination_schema() -> serde_json::Value {
    obj(json!({
        "id": string(), "name": string(), "url": string(), "lastDeliveryStatus": string_or_null(),
        "lastDeliveryAt": string_or_null(), "createdAt": string(), "updatedAt": string(),
    }))
}

// ---- portable markdown ----

/// The portable envelope `{grammarVersion, content}` (strict).
#[derive(Deserialize, JsonSchema)]
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

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResolveBody {
    option_id: String,
    content_hash: String,
    #[schemars(with = "Option<serde_json::Value>")]
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

#[derive(Deserialize, JsonSchema)]
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
