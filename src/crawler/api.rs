//! The crawler's wire shapes (camelCase): crawl requests in, crawl jobs out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{CrawlJob, CrawlRequest, PageNote};

/// `POST /document/crawl`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CrawlBody {
    pub url: String,
    pub limit: Option<i64>,
    #[serde(default)]
    pub include_url_patterns: Vec<String>,
    #[serde(default)]
    pub exclude_url_patterns: Vec<String>,
    pub preserve_content_links: Option<bool>,
    pub recrawl_interval_hours: Option<i64>,
}

impl From<CrawlBody> for CrawlRequest {
    fn from(b: CrawlBody) -> Self {
        CrawlRequest {
            url: b.url,
            limit: b.limit,
            include: b.include_url_patterns,
            exclude: b.exclude_url_patterns,
            preserve_links: b.preserve_content_links,
            interval_hours: b.recrawl_interval_hours,
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NoteJson {
    pub source_url: String,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

impl From<&PageNote> for NoteJson {
    fn from(n: &PageNote) -> Self {
        NoteJson { source_url: n.url.clone(), reason: n.reason.clone(), code: n.code.clone() }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressJson {
    pub discovered: i64,
    pub fetched: i64,
    pub indexed: i64,
    pub unchanged: i64,
    pub removed: i64,
    pub failed: i64,
    pub skipped: i64,
    pub skipped_by_reason: BTreeMap<String, i64>,
    /// The page limit cut the crawl short (pages beyond it were not fetched).
    pub limit_reached: bool,
}

/// A crawl job as the API shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobJson {
    pub id: String,
    pub kind: String,
    pub requested_url: String,
    pub status: String,
    pub limit: i64,
    pub source_id: String,
    /// Pages the source holds from this run (indexed or unchanged), once it ended.
    pub document_count: Option<i64>,
    pub skipped_page_count: i64,
    pub failed_page_count: i64,
    pub failures: Vec<NoteJson>,
    pub skipped: Vec<NoteJson>,
    pub last_error: Option<String>,
    pub progress: ProgressJson,
    pub started_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub completed_at: Option<String>,
}

impl From<&CrawlJob> for JobJson {
    fn from(j: &CrawlJob) -> Self {
        let c = j.counters;
        JobJson {
            id: j.id.clone(),
            kind: j.kind.clone(),
            requested_url: j.requested_url.clone(),
            status: j.status.clone(),
            limit: j.limit,
            source_id: j.source_id.clone(),
            document_count: (!j.active()).then_some(c.indexed + c.unchanged),
            skipped_page_count: c.skipped,
            failed_page_count: c.failed,
            failures: j.failures.iter().map(NoteJson::from).collect(),
            skipped: j.skips.iter().map(NoteJson::from).collect(),
            last_error: j.last_error.clone(),
            progress: ProgressJson {
                discovered: c.discovered,
                fetched: c.fetched,
                indexed: c.indexed,
                unchanged: c.unchanged,
                removed: c.removed,
                failed: c.failed,
                skipped: c.skipped,
                skipped_by_reason: j.skipped_by.clone(),
                limit_reached: j.truncated,
            },
            started_at: j.started_at.clone(),
            created_at: j.created_at.clone(),
            updated_at: j.updated_at.clone(),
            completed_at: j.completed_at.clone(),
        }
    }
}
