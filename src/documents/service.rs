//! Document operations behind the API.

use base64::Engine;
use serde_json::{Value, json};

use super::extract;
use super::{
    API_SOURCE, Document, DocumentMeta, DocumentView, PROCESS_JOB, UPLOAD_SOURCE, blobs,
    sources::ensure_builtin_source, store,
};
use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, ErrorCode, Result};
use crate::ids::{WorkspaceId, new_id};
use crate::jobs::{self, NewJob};
use crate::settings::{self, ingestion::IngestionPatch, ingestion::IngestionSettings};
use crate::storage::{Conn, Later, Tx};
use crate::usage;

pub const MAX_TITLE_CHARS: usize = 500;
pub const MAX_METADATA_BYTES: usize = 64 * 1024;
pub const MAX_EXTERNAL_ID_CHARS: usize = 500;

pub struct NewDocument {
    pub title: String,
    pub content: String,
    pub metadata: Option<Value>,
    pub external_document_id: Option<String>,
    pub enrichment_override: Option<String>,
    pub source_id: Option<String>,
}

pub struct Upload {
    pub filename: String,
    pub bytes: Vec<u8>,
    pub title: Option<String>,
    /// An operator source to file it under (default: the workspace's upload source).
    pub source_id: Option<String>,
    pub metadata: Option<Value>,
    pub external_document_id: Option<String>,
    pub enrichment_override: Option<String>,
}

#[derive(Default)]
pub struct DocumentUpdate {
    pub title: Option<String>,
    pub content: Option<String>,
    pub metadata: Option<Value>,
    pub enrichment_override: Option<String>,
}

fn clean_title(t: &str) -> Result<String> {
    let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
    if t.is_empty() {
        return Err(Error::invalid_field("title", "title must not be empty"));
    }
    if t.chars().count() > MAX_TITLE_CHARS {
        return Err(Error::invalid_field("title", format!("title must be at most {MAX_TITLE_CHARS} characters")));
    }
    Ok(t)
}

fn clean_content(c: &str) -> Result<String> {
    let c = c.replace('\0', "").replace("\r\n", "\n");
    if c.trim().is_empty() {
        return Err(Error::invalid_field("content", "content must not be empty"));
    }
    Ok(c)
}

fn clean_metadata(m: Option<Value>) -> Result<Value> {
    match m {
        None | Some(Value::Null) => Ok(json!({})),
        Some(Value::Object(map)) => {
            for k in map.keys() {
                if k.is_empty()
                    || k.len() > 200
                    || !k.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
                {
                    return Err(Error::invalid_field(
                        "metadata",
                        format!("metadata key {k:?} is not valid: use letters, digits, '_', '-' and '.'"),
                    ));
                }
            }
            let v = Value::Object(map);
            if v.to_string().len() > MAX_METADATA_BYTES {
                return Err(Error::invalid_field(
                    "metadata",
                    format!("metadata must be at most {} KB", MAX_METADATA_BYTES / 1024),
                ));
            }
            Ok(v)
        }
        Some(_) => Err(Error::invalid_field("metadata", "metadata must be an object")),
    }
}

fn clean_external_id(e: Option<String>) -> Result<Option<String>> {
    match e.map(|s| s.trim().to_string()) {
        Some(s) if s.is_empty() => Ok(None),
        Some(s) if s.chars().count() > MAX_EXTERNAL_ID_CHARS => Err(Error::invalid_field(
            "externalDocumentId",
            format!("externalDocumentId must be at most {MAX_EXTERNAL_ID_CHARS} characters"),
        )),
        other => Ok(other),
    }
}

/// A per-request enrichment override: `on` or `off`.
pub fn clean_override(o: Option<String>) -> Result<Option<String>> {
    match o.as_deref() {
        None => Ok(None),
        Some("on") | Some("off") => Ok(o),
        Some(other) => Err(Error::invalid_field(
            "documentEnrichmentOverride",
            format!("documentEnrichmentOverride must be on or off, not {other:?}"),
        )),
    }
}

pub fn content_hash(text: &str) -> String {
    blobs::sha256_hex(text.as_bytes())
}

/// Queues processing of `revision` in the caller's transaction.
pub(super) fn enqueue_process(
    tx: &Tx,
    app: &App,
    ws: &WorkspaceId,
    doc: &str,
    revision: i64,
    enrichment_override: Option<&str>,
) -> Result<()> {
    let job = NewJob::new(
        PROCESS_JOB,
        json!({"documentId": doc, "revision": revision, "documentEnrichmentOverride": enrichment_override}),
    )
    .dedupe(format!("doc:{doc}:rev:{revision}"))
    .workspace(ws.0.clone())
    .priority(10);
    jobs::enqueue_tx_deferred(tx, app.clock.now_ms(), app.jobs.default_max_attempts(), &job)
}

fn load(app: &App, ws: &WorkspaceId, id: &str) -> Result<Document> {
    app.db.read(|c| load_in(c, ws, id))
}

fn load_in(c: &Conn, ws: &WorkspaceId, id: &str) -> Result<Document> {
    store::document(c, ws, id)?.ok_or_else(|| Error::not_found("document"))
}

/// Creates an inline document (or, with an `externalDocumentId` already in its source, updates
/// that one). An upsert that changes nothing queues nothing and returns the current record.
pub fn create(app: &App, p: &Principal, actor: &Actor, input: NewDocument) -> Result<Document> {
    p.require(Perm::DocumentsManage)?;
    let d = CleanDoc::of(input)?;
    let ws = p.workspace_id.clone();
    let now = rfc3339(app.clock.now());
    // on PostgreSQL the account (for the usage check) goes with the source's lookup, and the
    // writes and the record's read-back with the commit: two round trips for a new document
    let saved = app.db.write(|tx| {
        let account = usage::limits::account_later(tx, &ws.0)?;
        let source_id = match &d.source_id {
            Some(sid) => store::source(tx, &ws, sid)?.ok_or_else(|| Error::not_found("source"))?.id,
            None => ensure_builtin_source(tx, &ws, API_SOURCE, &now)?,
        };
        let w = DocWrite { app, actor, ws: &ws, now: &now, account: Some(account.get()?) };
        if let Some(ext) = &d.external
            && let Some(existing) = store::by_external_id(tx, &ws, &source_id, ext)?
        {
            if d.same_as(&existing) {
                return Ok(Later::ready(Some(existing)));
            }
            update_inline(tx, &w, &existing, &d)?;
            return store::document_later(tx, &ws, &existing.id);
        }
        let id = insert_inline(tx, &w, &source_id, &d)?;
        store::document_later(tx, &ws, &id)
    })?;
    saved.get()?.ok_or_else(|| Error::not_found("document"))
}

/// An inline document's input, checked and cleaned.
pub(super) struct CleanDoc {
    pub(super) title: String,
    pub(super) content: String,
    pub(super) metadata: DocumentMeta,
    pub(super) external: Option<String>,
    pub(super) over: Option<String>,
    pub(super) hash: String,
    pub(super) size: i64,
    pub(super) source_id: Option<String>,
}

impl CleanDoc {
    pub(super) fn of(input: NewDocument) -> Result<CleanDoc> {
        let title = clean_title(&input.title)?;
        let content = clean_content(&input.content)?;
        let metadata = clean_metadata(input.metadata)?;
        let external = clean_external_id(input.external_document_id)?;
        let over = clean_override(input.enrichment_override)?;
        let hash = content_hash(&content);
        let size = content.len() as i64;
        Ok(CleanDoc { title, content, metadata, external, over, hash, size, source_id: input.source_id })
    }

    /// Whether `existing` already holds exactly this (an upsert that would change nothing).
    pub(super) fn same_as(&self, existing: &Document) -> bool {
        existing.title == self.title
            && existing.metadata == self.metadata
            && existing.content_hash.as_deref() == Some(self.hash.as_str())
            && existing.source_kind == "inline_text"
            && existing.status != "failed"
    }
}

/// Who writes documents in a transaction, where and when: what its document writes share.
pub(super) struct DocWrite<'a> {
    pub(super) app: &'a App,
    pub(super) actor: &'a Actor,
    pub(super) ws: &'a WorkspaceId,
    pub(super) now: &'a str,
    /// The workspace's usage account, when the caller read it already (with its first
    /// statement: [`usage::limits::account_later`]); read by the usage check otherwise.
    pub(super) account: Option<usage::limits::Account>,
}

/// A new revision of the document `existing` (found by its external id), queued for processing.
pub(super) fn update_inline(tx: &Tx, w: &DocWrite, existing: &Document, d: &CleanDoc) -> Result<()> {
    let (app, actor, ws, now) = (w.app, w.actor, w.ws, w.now);
    // a new revision reserves only its growth (a shrinking page is accepted even at the cap)
    let growth = (d.size - existing.metered_bytes).max(0);
    let work = usage::limits::DocumentWork {
        workspace: &ws.0,
        account: w.account.as_ref(),
        stored_delta: growth,
        indexed_bytes: growth,
        new_document: false,
    };
    usage::limits::check_document(app, tx, &work)?;
    let rev = store::update_document(
        tx,
        &existing.id,
        &d.title,
        &d.metadata,
        Some((&d.content, &d.hash, d.size)),
        existing.source_kind != "inline_text",
        now,
    )?;
    enqueue_process(tx, app, ws, &existing.id, rev, d.over.as_deref())?;
    audit::record(
        tx,
        now,
        actor,
        Event::new("document.updated")
            .workspace(ws)
            .target("document", &existing.id)
            .meta(json!({"revision": rev, "via": "externalDocumentId"})),
    )?;
    Ok(())
}

/// A new inline document, queued for processing; its id.
pub(super) fn insert_inline(tx: &Tx, w: &DocWrite, source_id: &str, d: &CleanDoc) -> Result<String> {
    let (app, actor, ws, now) = (w.app, w.actor, w.ws, w.now);
    let work = usage::limits::DocumentWork {
        workspace: &ws.0,
        account: w.account.as_ref(),
        stored_delta: d.size,
        indexed_bytes: d.size,
        new_document: true,
    };
    usage::limits::check_document(app, tx, &work)?;
    let id = new_id();
    store::insert_document(
        tx,
        &store::NewDocRow {
            id: &id,
            workspace_id: ws,
            source_id,
            title: &d.title,
            external_document_id: d.external.as_deref(),
            metadata: &d.metadata,
            source_kind: "inline_text",
            content: Some(&d.content),
            content_hash: Some(&d.hash),
            content_size_bytes: d.size,
            blob_sha256: None,
            source_filename: None,
            source_mime_type: None,
            source_size_bytes: None,
            detected_format: Some("text"),
            now,
        },
    )?;
    enqueue_process(tx, app, ws, &id, 1, d.over.as_deref())?;
    audit::record(
        tx,
        now,
        actor,
        Event::new("document.created")
            .workspace(ws)
            .target("document", &id)
            .meta(json!({"sourceId": source_id, "bytes": d.size})),
    )?;
    Ok(id)
}

/// Imports an uploaded file: checks its type from its content, keeps the original, queues it.
/// An upload let in: the caller may upload, is within its upload rate, and holds one of the
/// places for uploads being read (`uploads_concurrent`). Taken before the body is read; dropping
/// it frees the place.
pub struct UploadPermit {
    _place: tokio::sync::OwnedSemaphorePermit,
}

/// Lets an upload in, before its body is read: 403 without the permission, 429 over the caller's
/// upload rate or when every upload place is taken (`Retry-After` 1 s).
pub fn admit_upload(app: &App, p: &Principal) -> Result<UploadPermit> {
    p.require(Perm::DocumentsManage)?;
    let key = p.credential_id.clone().or_else(|| p.user_id.as_ref().map(|u| u.0.clone())).unwrap_or_default();
    let place = app.uploads.clone().try_acquire_owned().map_err(|_| {
        Error::new(ErrorCode::RateLimitExceeded, "too many uploads are in progress; try again in a moment")
            .with_details(json!({"limit": app.config.uploads_concurrent, "retryAfterSeconds": 1}))
    })?;
    app.upload_limiter.hit(&key, app.clock.now_ms())?;
    Ok(UploadPermit { _place: place })
}

/// Stores an uploaded file as a document and queues its processing. `_permit` (from
/// [`admit_upload`]) is held until the file is stored.
pub fn import(app: &App, p: &Principal, actor: &Actor, up: Upload, _permit: UploadPermit) -> Result<Document> {
    p.require(Perm::DocumentsManage)?;
    if up.bytes.len() as u64 > app.config.upload_max_bytes {
        return Err(too_large(app.config.upload_max_bytes));
    }
    let filename = up.filename.trim().to_string();
    let format = extract::detect(&up.bytes, &filename)?;
    let title = upload_title(up.title.as_deref(), &filename)?;
    let metadata = clean_metadata(up.metadata)?;
    let external = clean_external_id(up.external_document_id)?;
    let over = clean_override(up.enrichment_override)?;
    let now = rfc3339(app.clock.now());
    let sha = blobs::store(&app.config.data_dir, &app.db, &up.bytes, &now)?;
    let size = up.bytes.len() as i64;
    let ws = p.workspace_id.clone();
    let fname = if filename.is_empty() { None } else { Some(filename.chars().take(255).collect::<String>()) };
    let saved = app.db.write(|tx| {
        // read with the source's lookup
        let account = usage::limits::account_later(tx, &ws.0)?;
        let source_id = match &up.source_id {
            Some(sid) => store::source(tx, &ws, sid)?.ok_or_else(|| Error::not_found("source"))?.id,
            None => ensure_builtin_source(tx, &ws, UPLOAD_SOURCE, &now)?,
        };
        let account = account.get()?;
        if let Some(ext) = &external
            && let Some(existing) = store::by_external_id(tx, &ws, &source_id, ext)?
        {
            let growth = (size - existing.metered_bytes).max(0);
            let work = usage::limits::DocumentWork {
                workspace: &ws.0,
                account: Some(&account),
                stored_delta: growth,
                indexed_bytes: growth,
                new_document: false,
            };
            usage::limits::check_document(app, tx, &work)?;
            store::delete_unlive_chunks(tx, &existing.id)?;
            let upload = store::UploadRow {
                sha256: &sha,
                filename: fname.as_deref(),
                mime_type: format.mime(),
                size_bytes: size,
                format: &format.name(),
            };
            store::set_upload(tx, &existing.id, &upload)?;
            let rev = store::update_document(tx, &existing.id, &title, &metadata, None, false, &now)?;
            enqueue_process(tx, app, &ws, &existing.id, rev, over.as_deref())?;
            let ev = Event::new("document.updated").workspace(&ws).target("document", &existing.id);
            audit::record(tx, &now, actor, ev.meta(json!({"revision": rev, "format": format.name()})))?;
            return store::document_later(tx, &ws, &existing.id);
        }
        let work = usage::limits::DocumentWork {
            workspace: &ws.0,
            account: Some(&account),
            stored_delta: size,
            indexed_bytes: size,
            new_document: true,
        };
        usage::limits::check_document(app, tx, &work)?;
        let id = new_id();
        store::insert_document(
            tx,
            &store::NewDocRow {
                id: &id,
                workspace_id: &ws,
                source_id: &source_id,
                title: &title,
                external_document_id: external.as_deref(),
                metadata: &metadata,
                source_kind: "uploaded_file",
                content: None,
                content_hash: None,
                content_size_bytes: 0,
                blob_sha256: Some(&sha),
                source_filename: fname.as_deref(),
                source_mime_type: Some(format.mime()),
                source_size_bytes: Some(size),
                detected_format: Some(&format.name()),
                now: &now,
            },
        )?;
        enqueue_process(tx, app, &ws, &id, 1, over.as_deref())?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("document.imported")
                .workspace(&ws)
                .target("document", &id)
                .meta(json!({"format": format.name(), "bytes": size})),
        )?;
        store::document_later(tx, &ws, &id)
    })?;
    saved.get()?.ok_or_else(|| Error::not_found("document"))
}

/// An upload's title: the one given, else the file name without its extension.
fn upload_title(given: Option<&str>, filename: &str) -> Result<String> {
    match given.map(str::trim).filter(|t| !t.is_empty()) {
        Some(t) => clean_title(t),
        None => {
            let stem = std::path::Path::new(filename).file_stem().and_then(|s| s.to_str()).unwrap_or("").to_string();
            clean_title(if stem.is_empty() { "Untitled upload" } else { &stem })
        }
    }
}

pub fn too_large(limit: u64) -> Error {
    Error::new(
        ErrorCode::PayloadTooLarge,
        format!("the file is larger than the upload limit of {} bytes (DOCUMENT_UPLOAD_MAX_BYTES)", limit),
    )
    .with_details(json!({"limit": limit}))
}

/// Changes title, content and/or metadata; queues a new revision.
pub fn update(app: &App, p: &Principal, actor: &Actor, id: &str, u: DocumentUpdate) -> Result<Document> {
    p.require(Perm::DocumentsManage)?;
    if u.title.is_none() && u.content.is_none() && u.metadata.is_none() {
        return Err(Error::invalid("send at least one of title, content or metadata"));
    }
    let over = clean_override(u.enrichment_override)?;
    let title = u.title.as_deref().map(clean_title).transpose()?;
    let content = u.content.as_deref().map(clean_content).transpose()?;
    let metadata = u.metadata.map(|m| clean_metadata(Some(m))).transpose()?;
    let ws = p.workspace_id.clone();
    let now = rfc3339(app.clock.now());
    let mut old_blob = None;
    app.db.write(|tx| {
        let doc = store::document(tx, &ws, id)?.ok_or_else(|| Error::not_found("document"))?;
        let title = title.clone().unwrap_or_else(|| doc.title.clone());
        let metadata = metadata.clone().unwrap_or_else(|| doc.metadata.clone());
        let new_content = content.as_ref().map(|c| (c.as_str(), content_hash(c), c.len() as i64));
        let make_inline = new_content.is_some() && doc.source_kind != "inline_text";
        if make_inline {
            old_blob = doc.blob_sha256.clone();
        }
        let rev = store::update_document(
            tx,
            id,
            &title,
            &metadata,
            new_content.as_ref().map(|(c, h, s)| (*c, h.as_str(), *s)),
            make_inline,
            &now,
        )?;
        enqueue_process(tx, app, &ws, id, rev, over.as_deref())?;
        if let Some(e) = super::enrich::transfer_ownership(
            doc.enrichment.as_ref().map(|e| e.to_string()).as_deref(),
            &doc.metadata,
            &metadata,
        ) {
            store::set_enrichment(tx, id, &e)?;
        }
        audit::record(
            tx,
            &now,
            actor,
            Event::new("document.updated").workspace(&ws).target("document", id).meta(json!({"revision": rev})),
        )
    })?;
    if let Some(sha) = old_blob {
        release_blob(app, &sha)?;
    }
    load(app, &ws, id)
}

/// Queues the document again with a new revision (re-extracting uploads from the original).
pub fn reprocess(
    app: &App,
    p: &Principal,
    actor: &Actor,
    id: &str,
    enrichment_override: Option<String>,
) -> Result<Document> {
    p.require(Perm::DocumentsManage)?;
    let over = clean_override(enrichment_override)?;
    let ws = p.workspace_id.clone();
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        store::document(tx, &ws, id)?.ok_or_else(|| Error::not_found("document"))?;
        let rev = store::bump_revision(tx, id, &now)?;
        enqueue_process(tx, app, &ws, id, rev, over.as_deref())?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("document.reprocessed").workspace(&ws).target("document", id).meta(json!({"revision": rev})),
        )
    })?;
    load(app, &ws, id)
}

fn release_blob(app: &App, sha: &str) -> Result<()> {
    if !app.db.read(|c| store::blob_in_use(c, sha))? {
        blobs::remove(&app.config.data_dir, &app.db, sha);
    }
    Ok(())
}

/// Deletes a document; it leaves both search indexes before this returns.
pub fn delete(app: &App, p: &Principal, actor: &Actor, id: &str) -> Result<()> {
    p.require(Perm::DocumentsManage)?;
    let ws = p.workspace_id.clone();
    let now = rfc3339(app.clock.now());
    let doc = app.db.write(|tx| {
        let doc = store::document(tx, &ws, id)?.ok_or_else(|| Error::not_found("document"))?;
        delete_in_tx(tx, &doc)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("document.deleted")
                .workspace(&ws)
                .target("document", id)
                .meta(json!({"title_chars": doc.title.chars().count()})),
        )?;
        Ok(doc)
    })?;
    app.search()?.sync(&app.db)?;
    if let Some(sha) = &doc.blob_sha256 {
        release_blob(app, sha)?;
    }
    Ok(())
}

/// Deletes the row (chunks go by cascade, their index entries by trigger) and its meter share.
pub(super) fn delete_in_tx(tx: &Tx, doc: &Document) -> Result<()> {
    let org = usage::limits::account_of_workspace(tx, &doc.workspace_id.0)?.organization_id;
    store::delete_document(tx, &doc.id)?;
    usage::add_meter(tx, &org, usage::STORED_INDEXED_BYTES, "", -doc.metered_bytes)?;
    Ok(())
}

/// One document, with its text and chunk summaries when asked.
pub fn get(app: &App, p: &Principal, id: &str, with_content: bool, with_chunks: bool) -> Result<DocumentView> {
    p.require(Perm::DocumentsRead)?;
    let mut doc = load(app, &p.workspace_id, id)?;
    if with_content {
        doc.content = app.db.read(|c| store::content(c, &doc.id))?;
    }
    let mut view = doc.view();
    if with_chunks {
        view.chunks = Some(app.db.read(|c| store::chunk_summaries(c, &doc.id))?);
    }
    Ok(view)
}

#[derive(Debug, Clone)]
pub struct Summary {
    pub document_count: i64,
    pub ready_document_count: i64,
    pub pending_document_count: i64,
    pub failed_document_count: i64,
}

#[derive(Debug)]
pub struct DocumentPage {
    pub documents: Vec<DocumentView>,
    pub total: i64,
    pub next_cursor: Option<String>,
    pub has_more: bool,
    pub summary: Summary,
}

pub fn encode_cursor(created_at: &str, id: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{created_at}|{id}"))
}

pub fn decode_cursor(c: &str) -> Result<(String, String)> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(c)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.split_once('|').map(|(a, b)| (a.to_string(), b.to_string())))
        .ok_or_else(|| {
            Error::invalid_field("cursor", "the cursor is not valid; pass nextCursor from the previous page")
        })
}

pub fn list(app: &App, p: &Principal, f: store::ListFilter) -> Result<DocumentPage> {
    p.require(Perm::DocumentsRead)?;
    if let Some(s) = &f.status
        && !["queued", "processing", "ready", "failed"].contains(&s.as_str())
    {
        return Err(Error::invalid_field("status", "status must be queued, processing, ready or failed"));
    }
    if f.title.as_ref().is_some_and(|t| t.chars().count() > 200) {
        return Err(Error::invalid_field("q", "q must be at most 200 characters"));
    }
    let ws = p.workspace_id.clone();
    let (docs, total, more) = app.db.read(|c| store::list_documents(c, &ws, &f))?;
    let (n, ready, pending, failed) = app.db.read(|c| store::counts(c, &ws))?;
    let next_cursor = if more { docs.last().map(|d| encode_cursor(&d.created_at, &d.id)) } else { None };
    Ok(DocumentPage {
        documents: docs.iter().map(|d| d.view()).collect(),
        total,
        next_cursor,
        has_more: more,
        summary: Summary {
            document_count: n,
            ready_document_count: ready,
            pending_document_count: pending,
            failed_document_count: failed,
        },
    })
}

// -- ingestion settings and workspace-wide reprocess

pub fn ingestion_settings(app: &App, p: &Principal) -> Result<IngestionSettings> {
    p.require(Perm::SettingsRead)?;
    app.db.read(|c| settings::load(c, &p.workspace_id, settings::ingestion::NAMESPACE))
}

pub fn update_ingestion_settings(
    app: &App,
    p: &Principal,
    actor: &Actor,
    patch: IngestionPatch,
) -> Result<IngestionSettings> {
    p.require(Perm::SettingsManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let cur: IngestionSettings = settings::load(tx, &p.workspace_id, settings::ingestion::NAMESPACE)?;
        let next = cur.apply(patch)?;
        settings::store(tx, &p.workspace_id, settings::ingestion::NAMESPACE, &next, &now)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("settings.ingestion.updated")
                .workspace(&p.workspace_id)
                .meta(json!({"chunkingStrategy": next.chunking_strategy})),
        )?;
        Ok(next)
    })
}

/// Outcome of a bulk reprocess.
#[derive(Debug, Clone)]
pub struct ReprocessOutcome {
    pub queued_document_count: i64,
    pub skipped_document_count: i64,
    /// `queued` when anything was queued, else `noop`.
    pub status: &'static str,
}

/// Requeues every document in scope (one source, or the workspace) that is not already queued or
/// processing.
pub(super) fn reprocess_scope(
    app: &App,
    ws: &WorkspaceId,
    actor: &Actor,
    source: Option<&str>,
    over: Option<String>,
    action: &str,
) -> Result<ReprocessOutcome> {
    let over = clean_override(over)?;
    let now = rfc3339(app.clock.now());
    let out = app.db.write(|tx| {
        let docs = store::ids_and_status(tx, ws, source)?;
        let (mut queued, mut skipped) = (0i64, 0i64);
        for (id, status) in docs {
            if status == "queued" || status == "processing" {
                skipped += 1;
                continue;
            }
            let rev = store::bump_revision(tx, &id, &now)?;
            enqueue_process(tx, app, ws, &id, rev, over.as_deref())?;
            queued += 1;
        }
        let mut ev = Event::new(action).workspace(ws).meta(json!({"queued": queued, "skipped": skipped}));
        if let Some(s) = source {
            ev = ev.target("source", s);
        }
        audit::record(tx, &now, actor, ev)?;
        Ok(ReprocessOutcome {
            queued_document_count: queued,
            skipped_document_count: skipped,
            status: if queued > 0 { "queued" } else { "noop" },
        })
    })?;
    Ok(out)
}

pub fn reprocess_workspace(app: &App, p: &Principal, actor: &Actor, over: Option<String>) -> Result<ReprocessOutcome> {
    p.require(Perm::SettingsManage)?;
    reprocess_scope(app, &p.workspace_id, actor, None, over, "settings.ingestion.reprocess")
}

/// Days of daily usage [`usage`] reports.
pub const USAGE_DAYS: u32 = 30;

/// The request's workspace's usage: stored and monthly indexed bytes, documents, this month's
/// embeddings and the last [`USAGE_DAYS`] days.
pub fn usage(app: &App, p: &Principal) -> Result<usage::WorkspaceUsage> {
    p.require(Perm::SettingsRead)?;
    let now = app.clock.now();
    app.db.read(|c| usage::workspace_usage(c, &p.org_id.0, &p.workspace_id.0, now, USAGE_DAYS))
}

/// The organization's usage across all its workspaces (the account meters).
pub fn organization_usage(app: &App, p: &Principal) -> Result<usage::AccountUsage> {
    p.require(Perm::UsageRead)?;
    let now = app.clock.now();
    app.db.read(|c| usage::account_usage(c, &p.org_id.0, now))
}

/// Processing progress of the workspace and the state of the indexes.
#[derive(Debug, Clone)]
pub struct Progress {
    pub queued: i64,
    pub processing: i64,
    pub ready: i64,
    pub failed: i64,
    pub pending_chunks: i64,
    /// Nothing queued or processing.
    pub idle: bool,
    pub index: IndexState,
}

#[derive(Debug, Clone)]
pub struct IndexState {
    /// Live chunks of this workspace in SQLite.
    pub live_chunks: i64,
    /// Chunks in the lexical index and vectors in the vector index, all workspaces.
    pub text_documents: u64,
    pub vectors: usize,
    /// The indexes are being rebuilt from the database (after a restore, or damaged or stale
    /// index files): search answers from what is rebuilt so far.
    pub rebuilding: bool,
}

pub fn progress(app: &App, p: &Principal) -> Result<Progress> {
    p.require(Perm::DocumentsRead)?;
    let (queued, processing, ready, failed, pending_chunks) = app.db.read(|c| store::progress(c, &p.workspace_id))?;
    let live_chunks = app.db.read(|c| store::live_chunks(c, &p.workspace_id))?;
    let search = app.search()?;
    let (text_documents, vectors) = search.counts_of(&p.workspace_id);
    let rebuilding = search.rebuild_status().is_some();
    Ok(Progress {
        queued,
        processing,
        ready,
        failed,
        pending_chunks,
        idle: queued == 0 && processing == 0 && !rebuilding,
        index: IndexState { live_chunks, text_documents, vectors, rebuilding },
    })
}
