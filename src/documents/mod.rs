//! Documents: ingestion (create, import, update, reprocess, delete), sources, the processing job,
//! the embedding pipeline, extraction and chunking.
//!
//! Lifecycle: a write stores the document (`queued`, a new `revision`) and, in the same
//! transaction, a `document.process` job for that revision. The job extracts and chunks the text
//! (`processing`) and stores the chunks without embeddings. The embedding pipeline embeds pending
//! chunks in length-sorted batches across documents, then makes the revision live (older chunks
//! removed, new ones logged for the indexes), syncs the indexes and marks the document `ready`.
//! A job or pipeline step for a revision that is no longer current does nothing, so a stale job
//! never overwrites a newer revision.

pub mod api;
pub mod blobs;
pub mod chunking;
pub mod connector;
pub mod embeddings;
pub mod enrich;
pub mod extract;
pub mod pipeline;
pub mod process;
mod service;
mod sources;
mod store;
pub mod website;

use serde::Serialize;
use serde_json::Value;

pub use service::{
    DocumentPage, DocumentUpdate, IndexState, NewDocument, Progress, ReprocessOutcome, Summary, Upload, UploadPermit,
    admit_upload, create, decode_cursor, delete, encode_cursor, get, import, ingestion_settings, list,
    organization_usage, progress, reprocess, reprocess_workspace, too_large, update, update_ingestion_settings, usage,
};
pub use sources::{
    delete_source, ensure_builtin_source, get_source, list_sources, patch_source, reprocess_source, source_documents,
};
pub use store::ListFilter;

/// How many ready documents the workspace has (in `sources` when given), and the newest `limit`
/// titles (what an agent can answer from, for its profile).
pub fn ready_titles(
    c: &crate::storage::Conn,
    ws: &WorkspaceId,
    sources: Option<&[String]>,
    limit: usize,
) -> crate::Result<(i64, Vec<String>)> {
    store::ready_titles(c, ws, sources, limit)
}

use crate::ids::WorkspaceId;

pub const PROCESS_JOB: &str = "document.process";

/// The job kinds this module runs, with their handlers (registered by `App::build`).
pub fn jobs() -> Vec<(&'static str, crate::jobs::Handler)> {
    vec![(PROCESS_JOB, process::run), (enrich::JOB, enrich::run)]
}

/// The synthetic sources every workspace gets on demand.
pub const API_SOURCE: &str = "api";
pub const UPLOAD_SOURCE: &str = "upload";

#[derive(Debug, Clone)]
pub struct Source {
    pub id: String,
    pub workspace_id: WorkspaceId,
    pub kind: String,
    pub name: String,
    pub external_id: Option<String>,
    pub builtin: bool,
    pub config: Value,
    pub metadata: Value,
    pub enrichment_override: String,
    pub created_at: String,
    pub updated_at: String,
    pub document_count: i64,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceView {
    pub id: String,
    pub kind: String,
    pub name: String,
    pub external_id: Option<String>,
    pub builtin: bool,
    pub config: Value,
    pub metadata: Value,
    pub document_enrichment_override: String,
    pub document_count: i64,
    pub created_at: String,
    pub updated_at: String,
}

impl From<&Source> for SourceView {
    fn from(s: &Source) -> Self {
        SourceView {
            id: s.id.clone(),
            kind: s.kind.clone(),
            name: s.name.clone(),
            external_id: s.external_id.clone(),
            builtin: s.builtin,
            config: s.config.clone(),
            metadata: s.metadata.clone(),
            document_enrichment_override: s.enrichment_override.clone(),
            document_count: s.document_count,
            created_at: s.created_at.clone(),
            updated_at: s.updated_at.clone(),
        }
    }
}

/// A document's metadata: free-form JSON (an object) set by the operator and the enrichment.
pub type DocumentMeta = Value;
/// Enrichment facts merged into a chunk's metadata: a free-form JSON object.
pub type ChunkFacts = Value;

#[derive(Debug, Clone)]
pub struct Document {
    pub id: String,
    pub workspace_id: WorkspaceId,
    pub source_id: String,
    pub title: String,
    pub external_document_id: Option<String>,
    pub status: String,
    pub failure_reason: Option<String>,
    pub revision: i64,
    pub indexed_revision: Option<i64>,
    pub metadata: DocumentMeta,
    pub source_kind: String,
    pub content_hash: Option<String>,
    pub content_size_bytes: i64,
    pub blob_sha256: Option<String>,
    pub source_filename: Option<String>,
    pub source_mime_type: Option<String>,
    pub source_size_bytes: Option<i64>,
    pub detected_format: Option<String>,
    pub chunk_count: i64,
    pub enrichment: Option<Value>,
    pub processed_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub metered_bytes: i64,
    pub source_type: String,
    pub source_name: String,
    pub source_external_id: Option<String>,
    pub content: Option<String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceRef {
    pub id: String,
    pub kind: String,
    pub name: String,
    pub external_id: Option<String>,
}

/// The document record on the wire.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DocumentView {
    pub id: String,
    pub workspace_id: String,
    pub title: String,
    pub status: String,
    /// `processed` when the current revision is searchable, else `pending`.
    pub rag_status: &'static str,
    pub failure_reason: Option<String>,
    pub revision: i64,
    pub metadata: Value,
    pub source_id: String,
    pub source: SourceRef,
    pub external_document_id: Option<String>,
    pub source_kind: String,
    pub source_filename: Option<String>,
    pub source_mime_type: Option<String>,
    pub source_size_bytes: Option<i64>,
    pub detected_format: Option<String>,
    pub content_size_bytes: i64,
    pub content_hash: Option<String>,
    pub chunk_count: i64,
    pub enrichment: Option<Value>,
    pub processed_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunks: Option<Vec<ChunkSummary>>,
}

/// A chunk of a document's indexed revision, as the document view lists it (a preview of its
/// text, never all of it).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChunkSummary {
    pub id: String,
    pub chunk_index: i64,
    pub content_preview: String,
    pub content_length: usize,
    pub start_offset: i64,
    pub end_offset: i64,
    pub heading_path: Option<String>,
    pub page: Option<i64>,
    pub sheet: Option<String>,
    pub kind: String,
    pub token_count: Option<i64>,
}

impl Document {
    pub fn view(&self) -> DocumentView {
        let processed = self.status == "ready" && self.indexed_revision == Some(self.revision);
        DocumentView {
            id: self.id.clone(),
            workspace_id: self.workspace_id.0.clone(),
            title: self.title.clone(),
            status: self.status.clone(),
            rag_status: if processed { "processed" } else { "pending" },
            failure_reason: self.failure_reason.clone(),
            revision: self.revision,
            metadata: self.metadata.clone(),
            source_id: self.source_id.clone(),
            source: SourceRef {
                id: self.source_id.clone(),
                kind: self.source_type.clone(),
                name: self.source_name.clone(),
                external_id: self.source_external_id.clone(),
            },
            external_document_id: self.external_document_id.clone(),
            source_kind: self.source_kind.clone(),
            source_filename: self.source_filename.clone(),
            source_mime_type: self.source_mime_type.clone(),
            source_size_bytes: self.source_size_bytes,
            detected_format: self.detected_format.clone(),
            content_size_bytes: self.content_size_bytes,
            content_hash: self.content_hash.clone(),
            chunk_count: self.chunk_count,
            enrichment: self.enrichment.clone(),
            processed_at: self.processed_at.clone(),
            created_at: self.created_at.clone(),
            updated_at: self.updated_at.clone(),
            content: self.content.clone(),
            chunks: None,
        }
    }
}

/// The stored originals documents refer to: (document id, SHA-256), by SHA-256 (for backups and
/// `steward verify`).
pub fn blob_references(c: &crate::storage::Conn) -> crate::error::Result<Vec<(String, String)>> {
    store::blob_references(c)
}

/// Whether the workspace has this source (for checks in other modules).
pub fn source_exists(c: &crate::storage::Conn, ws: &WorkspaceId, id: &str) -> crate::error::Result<bool> {
    Ok(store::source(c, ws, id)?.is_some())
}
