//! The website crawler: learns a site into a website source's documents.
//!
//! - Commands in ([`start`], [`recrawl`], [`pause`], [`resume`], [`list_jobs`], [`delete_job`],
//!   [`set_interval`]), typed records out ([`CrawlJob`]); SQL only in `store.rs`; the wire shapes
//!   in `api.rs`.
//! - A crawl is a durable job (`crawl.run`) over a checkpoint: the job's frontier (every URL it
//!   discovered, in order, and which are done). A page's document and its `done` mark commit in
//!   one transaction, so pause, resume, a restart or `kill -9` continue with exactly the pages not
//!   yet done (`run.rs`).
//! - Everything it fetches goes through the SSRF-guarded client of `delivery/` (the operator's
//!   allow-list admits intranet sites); robots.txt, `noindex` and `nofollow` are honoured.
//! - The pure parts — URL canonical form (`canonical.rs`), robots.txt (`robots.rs`), sitemaps
//!   (`sitemap.rs`), main-content extraction (`extract.rs`, over `dom.rs` and `render.rs`) and the
//!   normalized content hash (`hash.rs`) — do no I/O and are tested on their own.

mod canonical;
pub mod config;
mod dom;
mod extract;
mod hash;
mod page;
mod render;
mod robots;
mod run;
mod sitemap;
mod store;

pub mod api;

use std::collections::BTreeMap;

use serde_json::json;

use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::documents::website::{self, WEBSITE_SOURCE, WebsiteSource};
use crate::error::{Error, Result};
use crate::ids::{WorkspaceId, new_id};
use crate::jobs::{self, NewJob};
use crate::storage::Tx;

pub use canonical::canonicalize;
pub use extract::{PageKind, extract as extract_page};

/// Failures and skipped pages kept per job (the counters count them all).
pub const NOTES_KEPT: usize = 200;
/// The queue job that runs a crawl.
pub const RUN_JOB: &str = "crawl.run";
/// The queue job that starts a source's scheduled recrawl.
pub const SCHEDULE_JOB: &str = "crawl.scheduled";
/// Pages larger than this many characters are not indexed.
pub const MAX_PAGE_CHARS: usize = 500_000;
/// The longest recrawl interval, in hours (30 days).
pub const MAX_INTERVAL_HOURS: i64 = 720;

pub fn jobs() -> Vec<(&'static str, jobs::Handler)> {
    vec![(RUN_JOB, run::handle), (SCHEDULE_JOB, run::scheduled)]
}

/// A crawl's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// URLs found (the seed, sitemap entries and links within the site).
    pub discovered: i64,
    /// Pages requested.
    pub fetched: i64,
    /// Pages written as a new document or a new revision.
    pub indexed: i64,
    /// Pages found unchanged (a 304 or the same content): nothing re-embedded.
    pub unchanged: i64,
    pub failed: i64,
    pub skipped: i64,
    /// Documents removed: pages gone from the site, or no longer indexable.
    pub removed: i64,
    /// Failures that leave a page's state unknown (all but 404 and 410).
    pub uncertain: i64,
}

/// A page a job could not index, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageNote {
    pub url: String,
    pub reason: String,
    /// The skip code (skips only).
    pub code: Option<String>,
}

/// One run of the crawler over a website source.
#[derive(Debug, Clone)]
pub struct CrawlJob {
    pub id: String,
    pub workspace_id: WorkspaceId,
    pub source_id: String,
    /// `crawl` or `recrawl`.
    pub kind: String,
    pub requested_url: String,
    pub status: String,
    pub limit: i64,
    /// Never paused, resumed or restarted: only such a run removes pages it did not see.
    pub fresh: bool,
    pub counters: Counters,
    pub skipped_by: BTreeMap<String, i64>,
    pub failures: Vec<PageNote>,
    pub skips: Vec<PageNote>,
    pub last_error: Option<String>,
    /// The page limit cut the frontier short.
    pub truncated: bool,
    pub started_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub completed_at: Option<String>,
}

impl CrawlJob {
    pub fn active(&self) -> bool {
        matches!(self.status.as_str(), "queued" | "processing" | "paused")
    }
}

/// A URL in a job's frontier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub seq: i64,
    /// The canonical form: the dedupe key.
    pub key: String,
    /// The URL to fetch (as found, without its fragment).
    pub url: String,
    pub depth: i64,
    /// Fetched for its links only (a seed outside the include patterns).
    pub discovery: bool,
}

/// What is known of one page of a website source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageRecord {
    pub key: String,
    pub url: String,
    pub document_id: Option<String>,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    pub content_hash: Option<String>,
    /// The page's links within the site (canonical URLs), replayed when it answers 304.
    pub links: Vec<String>,
    pub last_job_id: String,
}

/// A website source's crawl settings (its `config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteConfig {
    pub url: String,
    pub limit: i64,
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    pub preserve_links: bool,
    pub interval_hours: Option<i64>,
}

/// A crawl to start.
#[derive(Debug, Clone, Default)]
pub struct CrawlRequest {
    pub url: String,
    pub limit: Option<i64>,
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    pub preserve_links: Option<bool>,
    pub interval_hours: Option<i64>,
}

/// Which jobs to list.
#[derive(Debug, Clone)]
pub struct JobFilter {
    pub status: Option<String>,
    /// RFC 3339: jobs created since (active jobs always listed).
    pub since: String,
    pub limit: usize,
    pub source_id: Option<String>,
}

pub const STATUSES: [&str; 5] = ["queued", "processing", "paused", "completed", "failed"];

fn check_patterns(field: &str, v: Vec<String>) -> Result<Vec<String>> {
    let v: Vec<String> = v.into_iter().map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect();
    if v.len() > 50 || v.iter().any(|p| p.chars().count() > 200) {
        return Err(Error::invalid_field(field, format!("{field}: at most 50 patterns of at most 200 characters")));
    }
    Ok(v)
}

pub fn check_interval(h: Option<i64>) -> Result<Option<i64>> {
    match h {
        None | Some(0) => Ok(None),
        Some(h) if (1..=MAX_INTERVAL_HOURS).contains(&h) => Ok(Some(h)),
        Some(_) => Err(Error::invalid_field(
            "recrawlIntervalHours",
            format!("recrawlIntervalHours must be 1 to {MAX_INTERVAL_HOURS} hours, or 0 / null for none"),
        )),
    }
}

/// The start URL, checked: http(s), a host, no credentials, and admitted by the outbound guard.
fn check_url(app: &App, raw: &str) -> Result<url::Url> {
    let bad = |m: String| Error::invalid_field("url", m);
    let u = url::Url::parse(raw.trim()).map_err(|e| bad(format!("url is not a valid URL: {e}")))?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none_or(str::is_empty) {
        return Err(bad("url must be an http:// or https:// address with a host".into()));
    }
    app.outbound.guard().check_url(&u).map_err(|m| bad(format!("this site cannot be crawled: {m}")))?;
    Ok(u)
}

fn crawl_in_progress(j: &CrawlJob) -> Error {
    let what = if j.status == "paused" {
        "paused: resume it and let it finish first"
    } else {
        "running: wait for it to finish"
    };
    Error::conflict(format!("a crawl of this source is {what}"))
        .with_details(json!({"code": "crawl_in_progress", "jobId": j.id, "status": j.status}))
}

/// Starts crawling a site: finds or creates its website source (one per canonical start URL),
/// saves the crawl settings on it and queues the job. 409 while the source has an active job.
pub fn start(app: &App, p: &Principal, actor: &Actor, r: CrawlRequest) -> Result<(CrawlJob, crate::documents::Source)> {
    p.require(Perm::DocumentsManage)?;
    let url = check_url(app, &r.url)?;
    let cfg = &app.config.crawler;
    let limit = r.limit.unwrap_or(i64::from(cfg.default_limit));
    if !(1..=i64::from(cfg.max_limit)).contains(&limit) {
        return Err(Error::invalid_field("limit", format!("limit must be 1 to {} pages", cfg.max_limit)));
    }
    let site = SiteConfig {
        url: url.to_string(),
        limit,
        include: check_patterns("includeUrlPatterns", r.include)?,
        exclude: check_patterns("excludeUrlPatterns", r.exclude)?,
        preserve_links: r.preserve_links.unwrap_or(true),
        interval_hours: check_interval(r.interval_hours)?,
    };
    let lower = url.as_str().to_lowercase();
    if site.exclude.iter().any(|p| lower.contains(&p.to_lowercase())) {
        return Err(Error::invalid_field(
            "excludeUrlPatterns",
            "the start URL matches one of excludeUrlPatterns: nothing could be crawled",
        ));
    }
    let key = canonicalize(&url).to_string();
    let name = url.host_str().unwrap_or_default().to_string();
    let ws = p.workspace_id.clone();
    let now = rfc3339(app.clock.now());
    let (job, source) = app.db.write(|tx| {
        let source = website::website_source(
            tx,
            &ws,
            WebsiteSource {
                external_id: &key,
                name: &name,
                config: api::stored_config(&site),
                requested_url: r.url.trim(),
            },
            &now,
        )?;
        if let Some(j) = store::active_job(tx, &source.id)? {
            return Err(crawl_in_progress(&j));
        }
        let job = queue_job(app, tx, &ws, &source.id, "crawl", &site, &now)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("crawl.started")
                .workspace(&ws)
                .target("source", &source.id)
                .meta(json!({"jobId": job.id, "limit": limit})),
        )?;
        Ok((job, source))
    })?;
    Ok((job, source))
}

/// A new queued job for the source and the queue job that runs it.
fn queue_job(
    app: &App,
    tx: &Tx,
    ws: &WorkspaceId,
    source: &str,
    kind: &str,
    site: &SiteConfig,
    now: &str,
) -> Result<CrawlJob> {
    let job = CrawlJob {
        id: new_id(),
        workspace_id: ws.clone(),
        source_id: source.to_string(),
        kind: kind.to_string(),
        requested_url: site.url.clone(),
        status: "queued".into(),
        limit: site.limit,
        fresh: true,
        counters: Counters::default(),
        skipped_by: BTreeMap::new(),
        failures: vec![],
        skips: vec![],
        last_error: None,
        truncated: false,
        started_at: None,
        created_at: now.to_string(),
        updated_at: now.to_string(),
        completed_at: None,
    };
    store::insert_job(tx, &job)?;
    enqueue_run(app, tx, ws, &job.id, "start")?;
    Ok(job)
}

fn enqueue_run(app: &App, tx: &Tx, ws: &WorkspaceId, job: &str, why: &str) -> Result<()> {
    let q = NewJob::new(RUN_JOB, json!({"crawlJobId": job}))
        .dedupe(format!("crawl:{job}:{why}:{}", app.clock.now_ms()))
        .workspace(ws.0.clone())
        .max_attempts(50);
    jobs::enqueue_tx(tx, app.clock.now_ms(), app.jobs.default_max_attempts(), &q)?;
    Ok(())
}

/// The website source `id` with its crawl settings; 409 for other kinds of source.
fn website_of(app: &App, ws: &WorkspaceId, id: &str, action: &str) -> Result<SiteConfig> {
    let s = app.db.read(|c| website::source(c, ws, id))?.ok_or_else(|| Error::not_found("source"))?;
    if s.kind != WEBSITE_SOURCE {
        return Err(Error::conflict(format!(
            "this source ({}) is not a website crawl source; {action} applies only to crawl sources",
            s.kind
        ))
        .with_details(json!({"code": "not_a_crawl_source", "sourceKind": s.kind})));
    }
    api::site_config(&s.config).ok_or_else(|| Error::internal_msg("a website source without its crawl settings"))
}

/// Crawls a website source again with its stored URL and limit.
pub fn recrawl(app: &App, p: &Principal, actor: &Actor, source: &str) -> Result<CrawlJob> {
    p.require(Perm::DocumentsManage)?;
    let ws = p.workspace_id.clone();
    let site = website_of(app, &ws, source, "recrawl")?;
    let now = rfc3339(app.clock.now());
    let job = app.db.write(|tx| {
        if let Some(j) = store::active_job(tx, source)? {
            return Err(crawl_in_progress(&j));
        }
        let job = queue_job(app, tx, &ws, source, "recrawl", &site, &now)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("crawl.recrawl").workspace(&ws).target("source", source).meta(json!({"jobId": job.id})),
        )?;
        Ok(job)
    })?;
    Ok(job)
}

/// Pauses the source's queued or processing job: the worker stops after the page in hand (that
/// page is done again on resume) and the checkpoint stays.
pub fn pause(app: &App, p: &Principal, actor: &Actor, source: &str) -> Result<CrawlJob> {
    p.require(Perm::DocumentsManage)?;
    let ws = p.workspace_id.clone();
    website_of(app, &ws, source, "pause-crawl")?;
    let now = rfc3339(app.clock.now());
    let id = app.db.write(|tx| {
        let j = store::active_job(tx, source)?.filter(|j| j.status != "paused").ok_or_else(|| {
            Error::conflict("no crawl of this source is queued or running")
                .with_details(json!({"code": "no_active_crawl"}))
        })?;
        store::set_status(tx, &j.id, "paused", &now)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("crawl.paused").workspace(&ws).target("source", source).meta(json!({"jobId": j.id})),
        )?;
        Ok(j.id)
    })?;
    get_job_in(app, &ws, &id)
}

/// Resumes the source's paused job from its checkpoint (a resumed run never removes pages).
pub fn resume(app: &App, p: &Principal, actor: &Actor, source: &str) -> Result<CrawlJob> {
    p.require(Perm::DocumentsManage)?;
    let ws = p.workspace_id.clone();
    website_of(app, &ws, source, "resume-crawl")?;
    let now = rfc3339(app.clock.now());
    let id = app.db.write(|tx| {
        let j = store::active_job(tx, source)?.filter(|j| j.status == "paused").ok_or_else(|| {
            Error::conflict("no crawl of this source is paused").with_details(json!({"code": "no_paused_crawl"}))
        })?;
        store::requeue(tx, &j.id, &now)?;
        enqueue_run(app, tx, &ws, &j.id, "resume")?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("crawl.resumed").workspace(&ws).target("source", source).meta(json!({"jobId": j.id})),
        )?;
        Ok(j.id)
    })?;
    get_job_in(app, &ws, &id)
}

/// Sets a website source's recrawl interval (`None`: off). Returns the new settings.
pub fn set_interval(app: &App, p: &Principal, actor: &Actor, source: &str, hours: Option<i64>) -> Result<SiteConfig> {
    p.require(Perm::DocumentsManage)?;
    let ws = p.workspace_id.clone();
    website_of(app, &ws, source, "a recrawl interval")?;
    let hours = check_interval(hours)?;
    let now = rfc3339(app.clock.now());
    let site = app.db.write(|tx| {
        // read and written in one transaction: a crawl started meanwhile keeps its settings
        let current = website::source(tx, &ws, source)?.ok_or_else(|| Error::not_found("source"))?;
        let mut site = api::site_config(&current.config)
            .ok_or_else(|| Error::internal_msg("a website source without its crawl settings"))?;
        site.interval_hours = hours;
        website::set_config(tx, source, &api::stored_config(&site), &now)?;
        if let Some(h) = site.interval_hours {
            // the next recrawl, counted from now
            run::schedule(app, tx, &ws, source, h)?;
        }
        audit::record(
            tx,
            &now,
            actor,
            Event::new("source.updated")
                .workspace(&ws)
                .target("source", source)
                .meta(json!({"recrawlIntervalHours": site.interval_hours})),
        )?;
        Ok(site)
    })?;
    Ok(site)
}

fn get_job_in(app: &App, ws: &WorkspaceId, id: &str) -> Result<CrawlJob> {
    app.db.read(|c| store::job(c, ws, id))?.ok_or_else(|| Error::not_found("crawl job"))
}

pub fn get_job(app: &App, p: &Principal, id: &str) -> Result<CrawlJob> {
    p.require(Perm::DocumentsRead)?;
    get_job_in(app, &p.workspace_id, id)
}

pub fn list_jobs(app: &App, p: &Principal, f: JobFilter) -> Result<Vec<CrawlJob>> {
    p.require(Perm::DocumentsRead)?;
    app.db.read(|c| store::jobs(c, &p.workspace_id, &f))
}

/// The newest crawl job of each website source (for the sources list).
pub fn latest_jobs(app: &App, p: &Principal) -> Result<BTreeMap<String, CrawlJob>> {
    p.require(Perm::DocumentsRead)?;
    app.db.read(|c| store::latest_jobs(c, &p.workspace_id))
}

/// Deletes a finished job's record; 409 while it is active.
pub fn delete_job(app: &App, p: &Principal, actor: &Actor, id: &str) -> Result<()> {
    p.require(Perm::DocumentsManage)?;
    let ws = p.workspace_id.clone();
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let j = store::job(tx, &ws, id)?.ok_or_else(|| Error::not_found("crawl job"))?;
        if j.active() {
            return Err(Error::conflict(format!(
                "the crawl job is {}; only a completed or failed job can be deleted",
                j.status
            ))
            .with_details(json!({"code": "crawl_job_active", "status": j.status})));
        }
        store::delete_job(tx, id)?;
        audit::record(tx, &now, actor, Event::new("crawl.job_deleted").workspace(&ws).target("crawl_job", id))
    })
}
