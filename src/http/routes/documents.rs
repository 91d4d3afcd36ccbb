//! Documents, sources, search, ingestion settings, usage.

use std::sync::Arc;

use axum::extract::{Multipart, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::{Value, json};

use super::account::{PageQuery, page_limit};
use crate::app::App;
use crate::crawler::api::JobJson;
use crate::documents::api::{DocumentPageJson, ProgressJson, ReprocessOutcomeJson};
use crate::documents::{self, DocumentUpdate, ListFilter, NewDocument, Upload};
use crate::error::{Error, Result};
use crate::http::extract::{Ctx, Json, OptionalJson, Path, Query, SessionCtx};
use crate::http::openapi::shapes::{any_object, array, integer, number, obj, obj_some, of, string, string_or_null};
use crate::http::openapi::{Op, Routes};
use crate::search::query::{self, SearchRequest};
use crate::search::{self, Mode};
use crate::settings::ingestion::IngestionPatch;
use schemars::JsonSchema;

/// The documents routes (merged into the API by `http::routes`).
pub fn routes() -> Routes {
    use crate::documents::DocumentView;
    let list_op = || {
        Op::new("List documents, newest first")
            .perm("workspace.documents.read")
            .query::<ListQuery>()
            .ok::<DocumentPageJson>()
    };
    let create_op = || {
        Op::new("Create a document from text (processed in the background)")
            .perm("workspace.documents.manage")
            .body::<CreateBody>()
            .accepted::<DocumentView>()
            .errors(&[409, 429])
    };
    let reprocess_op = |summary| {
        Op::new(summary).perm("workspace.documents.manage").optional_body::<OverrideBody>().ok::<ReprocessOutcomeJson>()
    };
    Routes::new("Documents")
        .get("/api/v1/document", list, list_op())
        .post("/api/v1/document", create, create_op())
        .get("/api/v1/document/", list, list_op())
        .post("/api/v1/document/", create, create_op())
        .get(
            "/api/v1/document/progress",
            progress,
            Op::new("Processing progress (optionally wait until idle)")
                .perm("workspace.documents.read")
                .query::<ProgressQuery>()
                .ok::<ProgressJson>(),
        )
        .get(
            "/api/v1/document/sources",
            sources,
            Op::new("List sources (a website source with its newest crawl, `lastCrawl`; connectors with their counts)")
                .perm("workspace.documents.read")
                .ok_with(|g| {
                    let connectors = array(of::<crate::connectors::api::SourceConnectorJson>(g));
                    obj(json!({ "sources": array(source_schema(g)), "connectors": connectors }))
                }),
        )
        .patch(
            "/api/v1/document/sources/{id}",
            patch_source,
            Op::new("Change a source")
                .perm("workspace.documents.manage")
                .body::<PatchSourceBody>()
                .ok_with(|g| obj(json!({ "source": source_schema(g) })))
                .errors(&[409]),
        )
        .delete(
            "/api/v1/document/sources/{id}",
            delete_source,
            Op::new("Delete a source and its documents").perm("workspace.documents.manage").no_content().errors(&[409]),
        )
        .get(
            "/api/v1/document/sources/{id}/documents",
            source_documents,
            Op::new("List a source's documents")
                .perm("workspace.documents.read")
                .query::<PageQuery>()
                .ok::<DocumentPageJson>(),
        )
        .post(
            "/api/v1/document/sources/{id}/reprocess",
            reprocess_source,
            reprocess_op("Reprocess a source's documents"),
        )
        .post(
            "/api/v1/document/search",
            search,
            Op::new("Search the workspace's documents")
                .tag("Search")
                .perm("workspace.retrieval.query")
                .body::<SearchBody>()
                .ok_with(search_schema),
        )
        .get(
            "/api/v1/document/search/history",
            search_history,
            Op::new("Search history, newest first")
                .tag("Search")
                .perm("workspace.documents.read")
                .query::<PageQuery>()
                .ok_any(),
        )
        .get(
            "/api/v1/document/search/history/{id}",
            search_replay,
            Op::new("Replay a saved search with the current text")
                .tag("Search")
                .perm("workspace.documents.read")
                .ok_json(replay_schema()),
        )
        .get(
            "/api/v1/document/{id}",
            get,
            Op::new("Get a document (with its content, optionally its chunks)")
                .perm("workspace.documents.read")
                .query::<GetQuery>()
                .ok::<DocumentView>(),
        )
        .put(
            "/api/v1/document/{id}",
            update,
            Op::new("Update a document (a new revision is processed)")
                .perm("workspace.documents.manage")
                .body::<UpdateBody>()
                .accepted::<DocumentView>()
                .errors(&[409]),
        )
        .delete(
            "/api/v1/document/{id}",
            delete,
            Op::new("Delete a document").perm("workspace.documents.manage").no_content(),
        )
        .post(
            "/api/v1/document/{id}/reprocess",
            reprocess,
            Op::new("Reprocess a document")
                .perm("workspace.documents.manage")
                .optional_body::<OverrideBody>()
                .accepted::<DocumentView>(),
        )
        .get(
            "/api/v1/settings/ingestion",
            ingestion_settings,
            Op::new("Ingestion settings").tag("Settings").perm("workspace.settings.read").ok_any(),
        )
        .put(
            "/api/v1/settings/ingestion",
            put_ingestion_settings,
            Op::new("Change ingestion settings").tag("Settings").perm("workspace.settings.manage").body_any().ok_any(),
        )
        .post(
            "/api/v1/settings/ingestion/reprocess",
            reprocess_all,
            reprocess_op("Reprocess every document with the current settings").tag("Settings"),
        )
        .get(
            "/api/v1/settings/knowledge",
            knowledge,
            Op::new("The knowledge index: language, embedding model, re-embedding progress")
                .tag("Search")
                .perm("workspace.settings.read")
                .ok_any(),
        )
        .put(
            "/api/v1/settings/knowledge",
            put_knowledge,
            Op::new("Change the workspace's language or embedding model (re-embeds in the background)")
                .tag("Search")
                .session()
                .perm("workspace.settings.manage")
                .body::<KnowledgeBody>()
                .ok_any(),
        )
        .get("/api/v1/usage", usage, Op::new("The workspace's usage").tag("Usage").ok_any())
        .get(
            "/api/v1/usage/organization",
            organization_usage,
            Op::new("The organization's usage across its workspaces")
                .tag("Usage")
                .perm("organization.usage.read")
                .ok_any(),
        )
}

/// The upload route, which has its own body limit (`http::routes` sets it).
pub fn upload_routes() -> Routes {
    Routes::new("Documents").post(
        "/api/v1/document/import",
        import,
        Op::new("Upload a file as a document (processed in the background)")
            .perm("workspace.documents.manage")
            .about("Multipart form: `file` and optional `title`, `metadata` (JSON), `externalDocumentId`, `sourceId`, `documentEnrichmentOverride`. Over `DOCUMENT_UPLOAD_MAX_BYTES` is 413.")
            .body_media(
                "multipart/form-data",
                obj_some(
                    json!({
                        "file": {"type": "string", "contentMediaType": "application/octet-stream"},
                        "title": string(), "metadata": string(), "externalDocumentId": string(),
                        "sourceId": string(), "documentEnrichmentOverride": string(),
                    }),
                    &["file"],
                ),
            )
            .accepted::<crate::documents::DocumentView>()
            .errors(&[409, 413, 429]),
    )
}

/// A source as `GET /document/sources` lists it: a `SourceView`, and a website source's newest
/// crawl job (`lastCrawl`) or a connector's source its connector (`connector`).
fn source_schema(g: &mut schemars::SchemaGenerator) -> Value {
    obj_some(
        json!({
            "id": string(), "kind": string(), "name": string(), "externalId": string_or_null(),
            "builtin": {"type": "boolean"}, "config": any_object(), "metadata": any_object(),
            "documentEnrichmentOverride": string(), "documentCount": integer(), "createdAt": string(),
            "updatedAt": string(), "lastCrawl": crate::http::openapi::shapes::nullable(of::<JobJson>(g)),
            "connector": of::<crate::connectors::api::OnSourceJson>(g),
        }),
        &[
            "id",
            "kind",
            "name",
            "externalId",
            "builtin",
            "config",
            "metadata",
            "documentEnrichmentOverride",
            "documentCount",
            "createdAt",
            "updatedAt",
        ],
    )
}

/// `POST /document/search`.
fn search_schema(g: &mut schemars::SchemaGenerator) -> Value {
    obj_some(
        json!({
            "searchId": string(), "query": string(), "mode": string(),
            "metadataFilter": {}, "results": array(of::<crate::search::query::Hit>(g)),
            "resultCount": integer(), "tookMs": number(), "createdAt": string(),
            "debug": any_object(),
        }),
        &["searchId", "query", "mode", "results", "resultCount", "tookMs", "createdAt"],
    )
}

/// `GET /document/search/history/{id}`: the saved hits with their current text.
fn replay_schema() -> Value {
    let hit = obj_some(
        json!({
            "documentId": string(), "chunkId": string(), "title": string_or_null(), "snippet": string(),
            "score": {}, "metadata": any_object(), "sourceId": string_or_null(), "headingPath": string_or_null(),
            "page": {"type": ["integer", "null"]}, "sheet": string_or_null(),
            "note": {"type": "string", "enum": ["changed", "deleted"]},
        }),
        &["documentId", "chunkId", "snippet"],
    );
    obj(json!({
        "searchId": string(), "query": string(), "mode": string(), "metadataFilter": {},
        "results": array(hit), "resultCount": integer(), "tookMs": number(), "createdAt": string(),
    }))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListQuery {
    limit: Option<usize>,
    cursor: Option<String>,
    status: Option<String>,
    source_id: Option<String>,
    q: Option<String>,
}

pub async fn list(State(app): State<Arc<App>>, ctx: Ctx, Query(q): Query<ListQuery>) -> Result<impl IntoResponse> {
    let limit = page_limit(q.limit)?;
    let before = q.cursor.as_deref().map(documents::decode_cursor).transpose()?;
    let page = app
        .blocking(move |app| {
            documents::list(
                app,
                &ctx.p,
                ListFilter {
                    source_id: q.source_id,
                    status: q.status,
                    title: q.q.filter(|t| !t.trim().is_empty()),
                    before,
                    limit,
                },
            )
        })
        .await?;
    Ok(axum::Json(DocumentPageJson::from(page)))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateBody {
    title: String,
    content: String,
    metadata: Option<Value>,
    external_document_id: Option<String>,
    document_enrichment_override: Option<String>,
    source_id: Option<String>,
}

pub async fn create(State(app): State<Arc<App>>, ctx: Ctx, Json(b): Json<CreateBody>) -> Result<impl IntoResponse> {
    let doc = app
        .blocking(move |app| {
            documents::create(
                app,
                &ctx.p,
                &ctx.actor(),
                NewDocument {
                    title: b.title,
                    content: b.content,
                    metadata: b.metadata,
                    external_document_id: b.external_document_id,
                    enrichment_override: b.document_enrichment_override,
                    source_id: b.source_id,
                },
            )
        })
        .await?;
    Ok((StatusCode::ACCEPTED, axum::Json(doc.view())))
}

fn multipart_error(e: axum::extract::multipart::MultipartError, limit: u64) -> Error {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        documents::too_large(limit)
    } else {
        Error::invalid(format!("the upload is not valid multipart/form-data: {}", e.body_text()))
    }
}

async fn text_field(field: axum::extract::multipart::Field<'_>, limit: u64) -> Result<String> {
    let name = field.name().unwrap_or_default().to_string();
    let t = field.text().await.map_err(|e| multipart_error(e, limit))?;
    if t.len() > 64 * 1024 {
        return Err(Error::invalid_field(&name, format!("{name} is too long")));
    }
    Ok(t)
}

/// `POST /api/v1/document/import`: multipart with `file` and optional `title`, `metadata` (JSON),
/// `externalDocumentId`, `sourceId`, `documentEnrichmentOverride`. The upload is let in (permission,
/// rate, concurrent uploads) before any of its body is read.
pub async fn import(State(app): State<Arc<App>>, ctx: Ctx, mut mp: Multipart) -> Result<impl IntoResponse> {
    let permit = documents::admit_upload(&app, &ctx.p)?;
    let limit = app.config.upload_max_bytes;
    let mut file: Option<(String, Vec<u8>)> = None;
    let (mut title, mut metadata, mut external, mut over, mut source_id) = (None, None, None, None, None);
    while let Some(mut field) = mp.next_field().await.map_err(|e| multipart_error(e, limit))? {
        match field.name().unwrap_or_default() {
            "file" => {
                let name = field.file_name().unwrap_or_default().to_string();
                let mut bytes = Vec::new();
                while let Some(chunk) = field.chunk().await.map_err(|e| multipart_error(e, limit))? {
                    if (bytes.len() + chunk.len()) as u64 > limit {
                        return Err(documents::too_large(limit));
                    }
                    bytes.extend_from_slice(&chunk);
                }
                file = Some((name, bytes));
            }
            "title" => title = Some(text_field(field, limit).await?),
            "metadata" => {
                let t = text_field(field, limit).await?;
                metadata =
                    Some(serde_json::from_str::<Value>(&t).map_err(|e| {
                        Error::invalid_field("metadata", format!("metadata must be a JSON object: {e}"))
                    })?);
            }
            "externalDocumentId" => external = Some(text_field(field, limit).await?),
            "sourceId" => source_id = Some(text_field(field, limit).await?),
            "documentEnrichmentOverride" => over = Some(text_field(field, limit).await?),
            other => {
                return Err(Error::invalid(format!(
                    "unknown form part {other:?}; send file, title, metadata, externalDocumentId, sourceId or documentEnrichmentOverride"
                )));
            }
        }
    }
    let Some((filename, bytes)) = file else {
        return Err(Error::invalid_field("file", "attach the document as the form part named file"));
    };
    let doc = app
        .blocking(move |app| {
            documents::import(
                app,
                &ctx.p,
                &ctx.actor(),
                Upload {
                    filename,
                    bytes,
                    title,
                    source_id,
                    metadata,
                    external_document_id: external,
                    enrichment_override: over,
                },
                permit,
            )
        })
        .await?;
    Ok((StatusCode::ACCEPTED, axum::Json(doc.view())))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GetQuery {
    include_content: Option<bool>,
    include_chunks: Option<bool>,
}

pub async fn get(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Query(q): Query<GetQuery>,
) -> Result<impl IntoResponse> {
    let view = app
        .blocking(move |app| {
            documents::get(app, &ctx.p, &id, q.include_content.unwrap_or(true), q.include_chunks.unwrap_or(false))
        })
        .await?;
    Ok(axum::Json(view))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateBody {
    title: Option<String>,
    content: Option<String>,
    metadata: Option<Value>,
    document_enrichment_override: Option<String>,
}

pub async fn update(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Json(b): Json<UpdateBody>,
) -> Result<impl IntoResponse> {
    let doc = app
        .blocking(move |app| {
            documents::update(
                app,
                &ctx.p,
                &ctx.actor(),
                &id,
                DocumentUpdate {
                    title: b.title,
                    content: b.content,
                    metadata: b.metadata,
                    enrichment_override: b.document_enrichment_override,
                },
            )
        })
        .await?;
    Ok((StatusCode::ACCEPTED, axum::Json(doc.view())))
}

#[derive(Deserialize, Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OverrideBody {
    document_enrichment_override: Option<String>,
}

pub async fn reprocess(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    OptionalJson(b): OptionalJson<OverrideBody>,
) -> Result<impl IntoResponse> {
    let doc = app
        .blocking(move |app| documents::reprocess(app, &ctx.p, &ctx.actor(), &id, b.document_enrichment_override))
        .await?;
    Ok((StatusCode::ACCEPTED, axum::Json(doc.view())))
}

pub async fn delete(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<StatusCode> {
    app.blocking(move |app| documents::delete(app, &ctx.p, &ctx.actor(), &id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

// -- sources

/// Sources, a website source with its newest crawl job (`lastCrawl`).
pub async fn sources(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    let (list, latest, conns) = app
        .blocking(move |app| {
            Ok((
                documents::list_sources(app, &ctx.p)?,
                crate::crawler::latest_jobs(app, &ctx.p)?,
                crate::connectors::source_summaries(app, &ctx.p)?,
            ))
        })
        .await?;
    let sources: Vec<Value> = list
        .iter()
        .map(|s| {
            let last = latest.get(&s.id).map(JobJson::from);
            let mut v = json!(s);
            if s.kind == crate::documents::website::WEBSITE_SOURCE {
                v["lastCrawl"] = json!(last);
            }
            if let Some(c) = conns.iter().find(|c| c.source_id.as_deref() == Some(s.id.as_str())) {
                v["connector"] = json!(crate::connectors::api::on_source(c));
            }
            v
        })
        .collect();
    let connectors: Vec<_> = conns
        .iter()
        .map(|c| {
            let docs = c.source_id.as_ref().and_then(|id| list.iter().find(|s| &s.id == id)).map(|s| s.document_count);
            crate::connectors::api::source_summary(c, docs)
        })
        .collect();
    Ok(axum::Json(json!({ "sources": sources, "connectors": connectors })))
}

pub async fn source_documents(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Query(q): Query<PageQuery>,
) -> Result<impl IntoResponse> {
    let limit = page_limit(q.limit)?;
    let page = app.blocking(move |app| documents::source_documents(app, &ctx.p, &id, q.cursor, limit)).await?;
    Ok(axum::Json(DocumentPageJson::from(page)))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchSourceBody {
    document_enrichment_override: Option<String>,
    /// A website source's recrawl interval: hours, or `null`/0 for none.
    #[serde(default, deserialize_with = "present")]
    recrawl_interval_hours: Option<Option<i64>>,
}

/// A field that was sent, `null` included (`Some(None)`), apart from one left out (`None`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<Option<i64>>, D::Error> {
    Ok(Some(Option::deserialize(d)?))
}

pub async fn patch_source(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Json(b): Json<PatchSourceBody>,
) -> Result<impl IntoResponse> {
    let s = app
        .blocking(move |app| {
            if b.document_enrichment_override.is_none() && b.recrawl_interval_hours.is_none() {
                return Err(Error::invalid(
                    "nothing to change: send documentEnrichmentOverride or recrawlIntervalHours",
                ));
            }
            // both checked before either is saved
            if let Some(o) = b.document_enrichment_override.as_deref()
                && !["inherit", "on", "off"].contains(&o)
            {
                return Err(Error::invalid_field(
                    "documentEnrichmentOverride",
                    "documentEnrichmentOverride must be inherit, on or off",
                ));
            }
            if let Some(hours) = b.recrawl_interval_hours {
                crate::crawler::set_interval(app, &ctx.p, &ctx.actor(), &id, hours)?;
            }
            match &b.document_enrichment_override {
                Some(o) => documents::patch_source(app, &ctx.p, &ctx.actor(), &id, o),
                None => documents::get_source(app, &ctx.p, &id),
            }
        })
        .await?;
    Ok(axum::Json(json!({ "source": s })))
}

pub async fn delete_source(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<StatusCode> {
    app.blocking(move |app| documents::delete_source(app, &ctx.p, &ctx.actor(), &id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn reprocess_source(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    OptionalJson(b): OptionalJson<OverrideBody>,
) -> Result<impl IntoResponse> {
    let out = app
        .blocking(move |app| {
            documents::reprocess_source(app, &ctx.p, &ctx.actor(), &id, b.document_enrichment_override)
        })
        .await?;
    Ok(axum::Json(ReprocessOutcomeJson::from(out)))
}

// -- search

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchBody {
    query: String,
    metadata_filter: Option<Value>,
    mode: Option<Mode>,
    limit: Option<usize>,
    source_ids: Option<Vec<String>>,
    include_debug: Option<bool>,
}

pub async fn search(State(app): State<Arc<App>>, ctx: Ctx, Json(b): Json<SearchBody>) -> Result<impl IntoResponse> {
    let out = app
        .compute(move |app| {
            query::search(
                app,
                &ctx.p,
                &ctx.actor(),
                SearchRequest {
                    query: b.query,
                    metadata_filter: b.metadata_filter,
                    mode: b.mode,
                    limit: b.limit,
                    source_ids: b.source_ids,
                    include_debug: b.include_debug.unwrap_or(false),
                },
            )
            .map(|s| search::api::search(&s))
        })
        .await?;
    Ok(axum::Json(out))
}

pub async fn search_history(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Query(q): Query<PageQuery>,
) -> Result<impl IntoResponse> {
    let limit = page_limit(q.limit)?;
    let page = app.blocking(move |app| query::history(app, &ctx.p, q.cursor.as_deref(), limit)).await?;
    Ok(axum::Json(page))
}

pub async fn search_replay(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<impl IntoResponse> {
    let out = app.blocking(move |app| query::replay(app, &ctx.p, &id).map(|s| search::api::replay(&id, &s))).await?;
    Ok(axum::Json(out))
}

// -- ingestion settings, usage

pub async fn ingestion_settings(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    let s = app.blocking(move |app| documents::ingestion_settings(app, &ctx.p)).await?;
    Ok(axum::Json(s))
}

/// Session only: settings that change state take the dashboard session (spec, Authentication).
pub async fn put_ingestion_settings(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Json(b): Json<IngestionPatch>,
) -> Result<impl IntoResponse> {
    let s = app.blocking(move |app| documents::update_ingestion_settings(app, &ctx.p, &ctx.actor(), b)).await?;
    Ok(axum::Json(s))
}

/// Session only, like the ingestion settings it applies.
pub async fn reprocess_all(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    OptionalJson(b): OptionalJson<OverrideBody>,
) -> Result<impl IntoResponse> {
    let out = app
        .blocking(move |app| documents::reprocess_workspace(app, &ctx.p, &ctx.actor(), b.document_enrichment_override))
        .await?;
    Ok(axum::Json(ReprocessOutcomeJson::from(out)))
}

pub async fn usage(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    let u = app.blocking(move |app| documents::usage(app, &ctx.p)).await?;
    Ok(axum::Json(crate::usage::api::WorkspaceUsageJson::from(u)))
}

pub async fn organization_usage(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    let u = app.blocking(move |app| documents::organization_usage(app, &ctx.p)).await?;
    Ok(axum::Json(crate::usage::api::AccountUsageJson::from(u)))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProgressQuery {
    wait_ms: Option<u64>,
}

/// `GET /api/v1/document/progress?waitMs=N`: processing counts; with `waitMs` the call waits (up
/// to 60 s) until nothing is queued or processing.
pub async fn progress(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Query(q): Query<ProgressQuery>,
) -> Result<impl IntoResponse> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(q.wait_ms.unwrap_or(0).min(60_000));
    let p = Arc::new(ctx.p);
    loop {
        let notified = app.document_events.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let pp = p.clone();
        let prog = app.blocking(move |app| documents::progress(app, &pp)).await?;
        if prog.idle || tokio::time::Instant::now() >= deadline {
            return Ok(axum::Json(ProgressJson::from(prog)));
        }
        // Wake on the next finished document, or re-check every second (jobs can also fail).
        let wait =
            deadline.saturating_duration_since(tokio::time::Instant::now()).min(std::time::Duration::from_secs(1));
        let _ = tokio::time::timeout(wait, notified).await;
    }
}

// ---- the workspace's knowledge index: language and embedding model ----

async fn knowledge(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    let v = app
        .blocking(move |app| {
            let k = crate::search::spaces::get(app, &ctx.p)?;
            Ok(crate::search::api::knowledge(app, &k))
        })
        .await?;
    Ok(axum::Json(v))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KnowledgeBody {
    language: Option<String>,
    /// `null` resets to the language's default model.
    #[serde(default, deserialize_with = "crate::agents::api::present")]
    embedding_model: Option<Option<String>>,
    search_history: Option<HistoryRetentionBody>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HistoryRetentionBody {
    retention_days: Option<i64>,
    max_entries: Option<i64>,
}

async fn put_knowledge(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Json(b): Json<KnowledgeBody>,
) -> Result<impl IntoResponse> {
    let (history_days, history_max) =
        b.search_history.map(|h| (h.retention_days, h.max_entries)).unwrap_or((None, None));
    let patch = crate::search::spaces::KnowledgePatch {
        language: b.language,
        model: b.embedding_model,
        history_days,
        history_max,
    };
    let v = app
        .blocking(move |app| {
            let k = crate::search::spaces::update(app, &ctx.p, &ctx.actor(), patch)?;
            Ok(crate::search::api::knowledge(app, &k))
        })
        .await?;
    Ok(axum::Json(v))
}
