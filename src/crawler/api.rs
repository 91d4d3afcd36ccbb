//! The crawler's wire shapes (camelCase): crawl requests in, crawl jobs out, and a website
//! source's crawl settings as they are stored in its `config` (the same shape the API shows).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{CrawlJob, CrawlRequest, PageNote, SiteConfig};

/// `POST /document/crawl`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
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

#[derive(Debug, Serialize, schemars::JsonSchema)]
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

#[derive(Debug, Serialize, schemars::JsonSchema)]
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
#[derive(Debug, Serialize, schemars::JsonSchema)]
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

/// A website source's `config`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredConfig {
    url: String,
    limit: i64,
    #[serde(default)]
    include_url_patterns: Vec<String>,
    #[serde(default)]
    exclude_url_patterns: Vec<String>,
    #[serde(default = "yes")]
    preserve_content_links: bool,
    #[serde(default)]
    recrawl_interval_hours: Option<i64>,
}

fn yes() -> bool {
    true
}

/// The crawl settings to store in a website source's `config`.
pub fn stored_config(c: &SiteConfig) -> serde_json::Value {
    serde_json::json!(StoredConfig {
        url: c.url.clone(),
        limit: c.limit,
        include_url_patterns: c.include.clone(),
        exclude_url_patterns: c.exclude.clone(),
        preserve_content_links: c.preserve_links,
        recrawl_interval_hours: c.interval_hours,
    })
}

/// A website source's crawl settings, from its stored `config` (`None`: it holds none).
pub fn site_config(v: &serde_json::Value) -> Option<SiteConfig> {
    let c = StoredConfig::deserialize(v).ok()?;
    Some(SiteConfig {
        url: c.url,
        limit: c.limit,
        include: c.include_url_patterns,
        exclude: c.exclude_url_patterns,
        preserve_links: c.preserve_content_links,
        interval_hours: c.recrawl_interval_hours.filter(|h| *h > 0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_settings_round_trip() {
        let c = SiteConfig {
            url: "https://example.com/".into(),
            limit: 50,
            include: vec!["/docs".into()],
            exclude: vec![],
            preserve_links: false,
            interval_hours: Some(24),
        };
        assert_eq!(site_config(&stored_config(&c)), Some(c));
        let old = serde_json::json!({"url": "https://example.com/", "limit": 5, "recrawlIntervalHours": 0});
        let read = site_config(&old).unwrap();
        assert!(read.preserve_links && read.include.is_empty() && read.interval_hours.is_none());
        assert_eq!(site_config(&serde_json::json!({})), None);
    }
}
