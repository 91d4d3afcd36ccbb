//! The wire shapes of document pages, bulk reprocessing and progress (owned by the HTTP edge;
//! `service.rs` knows nothing of them).

use serde::Serialize;

use super::{DocumentPage, DocumentView, IndexState, Progress, ReprocessOutcome, Summary};

#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SummaryJson {
    pub document_count: i64,
    pub ready_document_count: i64,
    pub pending_document_count: i64,
    pub failed_document_count: i64,
}

/// `GET /document` and a source's documents.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DocumentPageJson {
    pub documents: Vec<DocumentView>,
    pub total: i64,
    pub next_cursor: Option<String>,
    pub has_more: bool,
    pub summary: SummaryJson,
}

/// The outcome of a bulk reprocess.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReprocessOutcomeJson {
    pub queued_document_count: i64,
    pub skipped_document_count: i64,
    pub status: &'static str,
}

/// `GET /document/progress`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProgressJson {
    pub queued: i64,
    pub processing: i64,
    pub ready: i64,
    pub failed: i64,
    pub pending_chunks: i64,
    pub idle: bool,
    pub index: IndexStateJson,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IndexStateJson {
    pub live_chunks: i64,
    pub text_documents: u64,
    pub vectors: usize,
    pub rebuilding: bool,
}

impl From<Summary> for SummaryJson {
    fn from(s: Summary) -> Self {
        SummaryJson {
            document_count: s.document_count,
            ready_document_count: s.ready_document_count,
            pending_document_count: s.pending_document_count,
            failed_document_count: s.failed_document_count,
        }
    }
}

impl From<DocumentPage> for DocumentPageJson {
    fn from(p: DocumentPage) -> Self {
        DocumentPageJson {
            documents: p.documents,
            total: p.total,
            next_cursor: p.next_cursor,
            has_more: p.has_more,
            summary: p.summary.into(),
        }
    }
}

impl From<ReprocessOutcome> for ReprocessOutcomeJson {
    fn from(o: ReprocessOutcome) -> Self {
        ReprocessOutcomeJson {
            queued_document_count: o.queued_document_count,
            skipped_document_count: o.skipped_document_count,
            status: o.status,
        }
    }
}

impl From<IndexState> for IndexStateJson {
    fn from(i: IndexState) -> Self {
        IndexStateJson {
            live_chunks: i.live_chunks,
            text_documents: i.text_documents,
            vectors: i.vectors,
            rebuilding: i.rebuilding,
        }
    }
}

impl From<Progress> for ProgressJson {
    fn from(p: Progress) -> Self {
        ProgressJson {
            queued: p.queued,
            processing: p.processing,
            ready: p.ready,
            failed: p.failed,
            pending_chunks: p.pending_chunks,
            idle: p.idle,
            index: p.index.into(),
        }
    }
}
