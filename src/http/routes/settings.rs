//! Settings routes: provider credentials, model preferences, the document type catalog and
//! retrieval defaults. (Ingestion settings live with the documents routes.) Settings that change
//! state take the dashboard session (`SessionCtx`); reads accept API credentials.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::Value;

use crate::app::App;
use crate::error::Result;
use crate::http::extract::{Ctx, Json, Path, SessionCtx};
use crate::http::openapi::{Op, Routes};
use crate::settings::api::{self, CredentialBody, DocumentTypesBody};
use crate::settings::{credentials, document_types, general, llm_models, retrieval};

/// The settings routes (merged into the API by `http::routes`).
pub fn routes() -> Routes {
    let read = |summary| Op::new(summary).perm("workspace.settings.read");
    let manage = |summary| Op::new(summary).session().perm("workspace.settings.manage");
    Routes::new("Settings")
        .get(
            "/api/v1/settings/credentials",
            list_credentials,
            Op::new("Which providers have a stored key (never the keys)")
                .session()
                .perm("workspace.settings.read")
                .ok_any(),
        )
        .put(
            "/api/v1/settings/credentials/{provider}",
            put_credential,
            manage("Store a provider's API key (encrypted)").body::<CredentialBody>().no_content().errors(&[503]),
        )
        .delete(
            "/api/v1/settings/credentials/{provider}",
            delete_credential,
            manage("Remove a provider's key").no_content(),
        )
        .get("/api/v1/settings/llm-models", llm_models, read("Model preferences per slot").ok_any())
        .put("/api/v1/settings/llm-models", put_llm_models, manage("Change model preferences").body_any().ok_any())
        .get("/api/v1/settings/document-types", document_types, read("The document type catalog").ok_any())
        .put(
            "/api/v1/settings/document-types",
            put_document_types,
            manage("Replace the operator's document types").body_any().ok_any().errors(&[409]),
        )
        .get("/api/v1/settings/retrieval-defaults", retrieval_defaults, read("Retrieval defaults").ok_any())
        .get(
            "/api/v1/settings",
            get_merged,
            read("The merged settings resource (general settings, `llmModels`, `ingestion`)").ok_any(),
        )
        .put(
            "/api/v1/settings",
            put_merged,
            manage("Change the general settings; answers the merged resource").body::<api::GeneralBody>().ok_any(),
        )
        .get(
            "/api/v1/settings/general",
            get_general,
            read("General settings: public chat and the website widget").ok::<api::GeneralDoc>(),
        )
        .put(
            "/api/v1/settings/general",
            put_general,
            manage("Change the general settings").body::<api::GeneralBody>().ok::<api::GeneralDoc>(),
        )
        .post(
            "/api/v1/settings/general/anonymous-chat-token/rotate",
            rotate_anonymous,
            manage("Rotate the anonymous chat link's token").ok::<api::GeneralDoc>(),
        )
        .post(
            "/api/v1/settings/general/website-embed-token/rotate",
            rotate_embed,
            manage("Rotate the website widget's token").ok::<api::GeneralDoc>(),
        )
}

pub async fn list_credentials(State(app): State<Arc<App>>, SessionCtx(ctx): SessionCtx) -> Result<impl IntoResponse> {
    let list = app.blocking(move |app| credentials::list(app, &ctx.p)).await?;
    Ok(axum::Json(api::credentials(&list)))
}

pub async fn put_credential(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Path(provider): Path<String>,
    Json(b): Json<CredentialBody>,
) -> Result<impl IntoResponse> {
    app.blocking(move |app| credentials::put(app, &ctx.p, &ctx.actor(), &provider, &b.api_key)).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn delete_credential(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Path(provider): Path<String>,
) -> Result<impl IntoResponse> {
    app.blocking(move |app| credentials::delete(app, &ctx.p, &ctx.actor(), &provider)).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn llm_models(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    let v = app.blocking(move |app| llm_models::get(app, &ctx.p)).await?;
    Ok(axum::Json(api::models(&v)))
}

pub async fn put_llm_models(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Json(b): Json<Value>,
) -> Result<impl IntoResponse> {
    let v = app.blocking(move |app| llm_models::put(app, &ctx.p, &ctx.actor(), api::models_patch(b))).await?;
    Ok(axum::Json(api::models(&v)))
}

pub async fn document_types(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    let v = app.blocking(move |app| document_types::get(app, &ctx.p)).await?;
    Ok(axum::Json(api::catalog(&v)))
}

pub async fn put_document_types(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Json(b): Json<DocumentTypesBody>,
) -> Result<impl IntoResponse> {
    let v = app.blocking(move |app| document_types::put(app, &ctx.p, &ctx.actor(), b.into())).await?;
    Ok(axum::Json(api::catalog(&v)))
}

pub async fn retrieval_defaults(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    let v = app.blocking(move |app| retrieval::get(app, &ctx.p)).await?;
    Ok(axum::Json(api::retrieval_defaults(&v)?))
}

/// `GET /settings`: the merged platform resource — the general settings' fields at the top level,
/// with the workspace's model choices (`llmModels`) and ingestion settings (`ingestion`) beside
/// them, read-only here (each has its own route to change it).
pub async fn get_merged(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    merged(app, ctx.p).await
}

async fn merged(app: Arc<App>, p: crate::auth::Principal) -> Result<axum::Json<Value>> {
    let (g, models, ingestion) = app
        .blocking(move |app| {
            Ok((general::get(app, &p)?, llm_models::get(app, &p)?, crate::documents::ingestion_settings(app, &p)?))
        })
        .await?;
    let mut v = serde_json::to_value(api::GeneralDoc::from(&g))?;
    v["llmModels"] = api::models(&models);
    v["ingestion"] = serde_json::to_value(ingestion)?;
    Ok(axum::Json(v))
}

/// `PUT /settings`: the general settings' fields (as `PUT /settings/general`); the nested
/// resources are changed through their own routes. Answers the merged resource.
pub async fn put_merged(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Json(b): Json<api::GeneralBody>,
) -> Result<impl IntoResponse> {
    let patch = b.patch()?;
    let p = ctx.p.clone();
    app.blocking(move |app| general::update(app, &ctx.p, &ctx.actor(), patch)).await?;
    merged(app, p).await
}

pub async fn get_general(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    let g = app.blocking(move |app| general::get(app, &ctx.p)).await?;
    Ok(axum::Json(api::GeneralDoc::from(&g)))
}

/// Session only: settings that change state take the dashboard session.
pub async fn put_general(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Json(b): Json<api::GeneralBody>,
) -> Result<impl IntoResponse> {
    let patch = b.patch()?;
    let g = app.blocking(move |app| general::update(app, &ctx.p, &ctx.actor(), patch)).await?;
    Ok(axum::Json(api::GeneralDoc::from(&g)))
}

pub async fn rotate_anonymous(State(app): State<Arc<App>>, SessionCtx(ctx): SessionCtx) -> Result<impl IntoResponse> {
    let g =
        app.blocking(move |app| general::rotate(app, &ctx.p, &ctx.actor(), general::Channel::AnonymousChat)).await?;
    Ok(axum::Json(api::GeneralDoc::from(&g)))
}

pub async fn rotate_embed(State(app): State<Arc<App>>, SessionCtx(ctx): SessionCtx) -> Result<impl IntoResponse> {
    let g = app.blocking(move |app| general::rotate(app, &ctx.p, &ctx.actor(), general::Channel::WebsiteEmbed)).await?;
    Ok(axum::Json(api::GeneralDoc::from(&g)))
}
