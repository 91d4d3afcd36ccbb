//! One crawl, run by a queue worker: robots.txt and sitemaps first, then the frontier, page by
//! page, by a few fetch threads behind one politeness gate. Each page ends in one transaction
//! that marks it done, adds its links, writes or removes its document and counts it — the
//! checkpoint a resumed or restarted run continues from.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use reqwest::header;
use serde_json::json;
use url::Url;

use super::canonical::{canonicalize, fetchable, same_site};
use super::robots::{self, Robots};
use super::{Counters, CrawlJob, PageNote, PageRecord, Pending, SCHEDULE_JOB, SiteConfig, sitemap, store};
use crate::app::App;
use crate::audit::Actor;
use crate::clock::rfc3339;
use crate::delivery::Failure;
use crate::documents::NewDocument;
use crate::documents::website;
use crate::error::Result;
use crate::ids::WorkspaceId;
use crate::jobs::{self, JobCtx, JobPayload, NewJob, Outcome};
use crate::storage::Tx;

const MAX_ROBOTS_BYTES: usize = 512 * 1024;
const MAX_SITEMAP_BYTES: usize = 10 * 1024 * 1024;
/// Sitemap files read per crawl (an index and the sitemaps it lists).
const MAX_SITEMAPS: usize = 25;
/// The longest page URL crawled (a document's external id is its canonical URL).
const MAX_URL_CHARS: usize = 500;

/// Why the fetch threads stopped before the frontier ran out.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Stop {
    /// Paused, deleted, or its source deleted: the job's row says so.
    NotProcessing,
    /// The server is shutting down: the queue job is released and continues at the next start.
    Shutdown,
    Error(String),
}

pub(super) struct State {
    pub(super) queue: VecDeque<Pending>,
    pub(super) in_flight: usize,
    /// Pages taken this run plus those fetched before it (the limit counts both).
    pub(super) taken: i64,
    pub(super) stop: Option<Stop>,
    /// The seed's failure, when it failed.
    pub(super) seed_failure: Option<String>,
    /// URLs in the frontier (a crawl trap stops growing it at ten times the limit).
    pub(super) frontier: i64,
}

/// One crawl's shared state.
pub(super) struct Crawl<'a> {
    pub(super) app: &'a App,
    pub(super) job: CrawlJob,
    pub(super) site: SiteConfig,
    pub(super) base: Url,
    pub(super) robots: Robots,
    pub(super) state: Mutex<State>,
    pub(super) changed: Condvar,
    /// The earliest time the next request may go.
    pub(super) gate: Mutex<Instant>,
    pub(super) interval: Duration,
    pub(super) seed_key: String,
    /// This run's id: it saves only while the job row names it.
    pub(super) run_id: String,
}

/// What became of one page.
pub(super) enum Verdict {
    /// New or changed: written as a document.
    Indexed {
        record: PageRecord,
        doc: NewDocument,
    },
    /// A 304, or the same content as before.
    Unchanged {
        record: PageRecord,
    },
    Skipped {
        code: &'static str,
        reason: String,
        record: Option<PageRecord>,
    },
    /// `gone`: the page answered 404 or 410, so its document goes.
    Failed {
        reason: String,
        gone: bool,
    },
}

pub(super) struct PageResult {
    pub(super) entry: Pending,
    pub(super) verdict: Verdict,
    pub(super) links: Vec<Pending>,
    pub(super) fetched: bool,
    /// Links were left out (a page with too many, or a full frontier): the run is incomplete.
    pub(super) dropped: bool,
}

/// Crawls running in this process now: at most all workers but one, so documents keep being
/// processed (and embedded) while sites are crawled.
static RUNNING: AtomicUsize = AtomicUsize::new(0);
/// The longest robots.txt `Crawl-delay` honoured as asked; a longer one is honoured as this.
const MAX_CRAWL_DELAY: Duration = Duration::from_secs(60);

pub fn handle(app: &App, ctx: &JobCtx, payload: &JobPayload) -> Outcome {
    let Some(id) = payload["crawlJobId"].as_str() else {
        return Outcome::Fail("no crawlJobId".into());
    };
    let cap = app.config.workers.saturating_sub(1).max(1);
    if RUNNING.fetch_add(1, Ordering::SeqCst) >= cap {
        RUNNING.fetch_sub(1, Ordering::SeqCst);
        return Outcome::Retry { after: Some(Duration::from_secs(20)), error: "waiting for a crawl place".into() };
    }
    let out = match run(app, ctx, id) {
        Ok(o) => o,
        Err(e) => {
            fail(app, id, None, &e.to_string());
            Outcome::Done
        }
    };
    RUNNING.fetch_sub(1, Ordering::SeqCst);
    out
}

/// Marks the job failed (only while it is queued or processing, and under `run_id` when given)
/// and plans its source's next scheduled recrawl, so one bad run does not end the schedule.
fn fail(app: &App, id: &str, run_id: Option<&str>, msg: &str) {
    let now = rfc3339(app.clock.now());
    let r = app.db.write(|tx| {
        if !store::fail(tx, id, run_id, msg, &now)? {
            return Ok(());
        }
        let Some(job) = store::job_by_id(tx, id)? else { return Ok(()) };
        store::drop_frontier(tx, id)?;
        let site =
            website::source(tx, &job.workspace_id, &job.source_id)?.and_then(|s| super::api::site_config(&s.config));
        if let Some(h) = site.and_then(|s| s.interval_hours) {
            schedule(app, tx, &job.workspace_id, &job.source_id, h)?;
        }
        Ok(())
    });
    if let Err(e) = r {
        tracing::warn!(job = id, error = %e, "could not record a failed crawl");
    }
}

fn run(app: &App, ctx: &JobCtx, id: &str) -> Result<Outcome> {
    let Some(job) = app.db.read(|c| store::job_by_id(c, id))? else {
        return Ok(Outcome::Done);
    };
    if !matches!(job.status.as_str(), "queued" | "processing") {
        return Ok(Outcome::Done);
    }
    let Some(source) = app.db.read(|c| website::source(c, &job.workspace_id, &job.source_id))? else {
        return Ok(Outcome::Done);
    };
    let Some(site) = super::api::site_config(&source.config) else {
        fail(app, id, None, "the website source has no crawl settings");
        return Ok(Outcome::Done);
    };
    let base = Url::parse(&site.url).map_err(|e| crate::Error::internal_msg(format!("start URL: {e}")))?;
    let (frontier, done) = app.db.read(|c| store::frontier_size(c, id))?;
    let now = rfc3339(app.clock.now());
    let run_id = crate::ids::new_id();
    // a pause committed since the read above wins: the job is taken only if still runnable
    if !app.db.write(|tx| store::start(tx, id, &run_id, done > 0, &now))? {
        return Ok(Outcome::Done);
    }
    let cfg = &app.config.crawler;

    let robots = match read_robots(app, &base) {
        Ok(r) => r,
        Err(msg) => {
            fail(app, id, Some(&run_id), &msg);
            return Ok(Outcome::Done);
        }
    };
    let delay = robots.crawl_delay().map(|d| d.min(MAX_CRAWL_DELAY));
    let interval = delay.map_or(cfg.min_delay, |d| d.max(cfg.min_delay));
    let seed_key = canonicalize(&base).to_string();
    let crawl = Crawl {
        app,
        site,
        base,
        robots,
        state: Mutex::new(State {
            queue: VecDeque::new(),
            in_flight: 0,
            taken: job.counters.fetched,
            stop: None,
            seed_failure: None,
            frontier,
        }),
        changed: Condvar::new(),
        gate: Mutex::new(Instant::now()),
        interval,
        seed_key,
        run_id,
        job,
    };
    if frontier == 0 && !crawl.seed(ctx)? {
        return Ok(Outcome::Release);
    }
    let pending = app.db.read(|c| store::pending(c, id))?;
    crawl.state.lock().queue.extend(pending);

    let threads = cfg.concurrency.max(1);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| crawl.work());
        }
        // this thread keeps the lease and watches for shutdown while the fetch threads work
        let mut st = crawl.state.lock();
        let mut beat = Instant::now();
        while !(st.in_flight == 0 && (st.queue.is_empty() || st.stop.is_some() || st.taken >= crawl.job.limit)) {
            crawl.changed.wait_for(&mut st, Duration::from_secs(5));
            if ctx.stopping() && st.stop.is_none() {
                st.stop = Some(Stop::Shutdown);
                crawl.changed.notify_all();
            }
            // the lease is extended every few seconds, not at every page
            if beat.elapsed() >= Duration::from_secs(5) {
                drop(st);
                ctx.heartbeat();
                beat = Instant::now();
                st = crawl.state.lock();
            }
        }
        crawl.changed.notify_all();
    });
    let st = crawl.state.lock();
    match st.stop.clone() {
        Some(Stop::Shutdown) => Ok(Outcome::Release),
        Some(Stop::NotProcessing) => Ok(Outcome::Done),
        Some(Stop::Error(e)) => {
            fail(app, id, Some(&crawl.run_id), &e);
            Ok(Outcome::Done)
        }
        None => {
            let truncated = !st.queue.is_empty();
            let seed_failure = st.seed_failure.clone();
            drop(st);
            crawl.finish(truncated, seed_failure)?;
            Ok(Outcome::Done)
        }
    }
}

/// robots.txt: a 4xx means no rules; a 5xx or no answer means the site cannot be crawled now.
/// A redirect is followed within the site (up to 5 hops, as RFC 9309 asks).
fn read_robots(app: &App, base: &Url) -> std::result::Result<Robots, String> {
    let mut url = base.join("/robots.txt").map_err(|e| format!("robots.txt URL: {e}"))?;
    let ua = app.config.crawler.user_agent.clone();
    for _ in 0..=5 {
        let a = match app.outbound.get_page(&url, &[(header::USER_AGENT, ua.clone())], MAX_ROBOTS_BYTES) {
            Ok(a) => a,
            Err(Failure::Refused(m)) => return Err(format!("the site cannot be reached: {m}")),
            Err(f) => return Err(format!("robots.txt could not be read: {f}")),
        };
        let next = matches!(a.status, 301 | 302 | 303 | 307 | 308)
            .then(|| a.headers.get(header::LOCATION).and_then(|v| v.to_str().ok()).and_then(|l| url.join(l).ok()))
            .flatten();
        return match a.status {
            200..=299 => Ok(robots::parse(&String::from_utf8_lossy(&a.body), &ua)),
            301 | 302 | 303 | 307 | 308 => match next.filter(|n| same_site(n, base)) {
                Some(n) => {
                    url = n;
                    continue;
                }
                // a robots.txt that leads off the site: no rules of this site's
                None => Ok(Robots::default()),
            },
            429 => Err("robots.txt answered HTTP 429: the site asks to be crawled later".into()),
            300..=499 => Ok(Robots::default()),
            s => Err(format!("robots.txt answered HTTP {s}: the site cannot be crawled now")),
        };
    }
    Err("robots.txt redirects more than 5 times".into())
}

impl Crawl<'_> {
    fn now(&self) -> String {
        rfc3339(self.app.clock.now())
    }

    /// A URL of the site as a frontier entry, when the patterns let it in (a seed outside the
    /// include patterns is fetched for its links only).
    pub(super) fn admit(&self, mut url: Url, depth: i64, seed: bool) -> Option<Pending> {
        if !same_site(&url, &self.base) {
            return None;
        }
        // the `www.` alias is fetched under the host the crawl started from
        if url.host_str() != self.base.host_str() {
            url.set_host(self.base.host_str()).ok()?;
        }
        let _ = url.set_username("");
        let _ = url.set_password(None);
        let url = fetchable(&url);
        let key = canonicalize(&url).to_string();
        // a page must fit a document's external id (its canonical URL)
        if url.as_str().len() > MAX_URL_CHARS || key.chars().count() > MAX_URL_CHARS {
            return None;
        }
        let lower = url.as_str().to_lowercase();
        if self.site.exclude.iter().any(|p| lower.contains(&p.to_lowercase())) {
            return None;
        }
        let included =
            self.site.include.is_empty() || self.site.include.iter().any(|p| lower.contains(&p.to_lowercase()));
        if !included && !seed {
            return None;
        }
        Some(Pending { seq: 0, key, url: url.to_string(), depth, discovery: !included })
    }

    /// The first frontier: the start URL, then the pages the site's sitemaps list. `false`: the
    /// server is stopping (nothing was saved; the next start seeds again).
    fn seed(&self, ctx: &JobCtx) -> Result<bool> {
        let mut seeds: Vec<Pending> = self.admit(self.base.clone(), 0, true).into_iter().collect();
        let mut files: VecDeque<String> = self.robots.sitemaps().iter().cloned().collect();
        let mut read = 0;
        let mut cut = false;
        while let Some(f) = files.pop_front() {
            if read >= MAX_SITEMAPS || seeds.len() as i64 > self.job.limit * 4 {
                cut = true;
                break;
            }
            ctx.heartbeat();
            if ctx.stopping() {
                return Ok(false);
            }
            let Ok(u) = self.base.join(&f) else { continue };
            if !same_site(&u, &self.base) {
                continue;
            }
            read += 1;
            self.wait_turn();
            let ua = self.app.config.crawler.user_agent.clone();
            let Ok(a) = self.app.outbound.get_page(&u, &[(header::USER_AGENT, ua)], MAX_SITEMAP_BYTES) else {
                continue;
            };
            if !(200..300).contains(&a.status) {
                continue;
            }
            match sitemap::parse(&a.body) {
                Ok(sitemap::Sitemap::Index(more)) => files.extend(more.into_iter().take(MAX_SITEMAPS)),
                Ok(sitemap::Sitemap::Urls(urls)) => {
                    seeds.extend(urls.iter().filter_map(|s| Url::parse(s).ok()).filter_map(|u| self.admit(u, 1, false)))
                }
                Err(_) => {}
            }
        }
        let now = self.now();
        let id = self.job.id.clone();
        let added = self.app.db.write(|tx| {
            if !store::owns(tx, &id, &self.run_id)? {
                return Ok(0);
            }
            let added = store::add_frontier(tx, &id, &seeds)?;
            let d = Counters { discovered: added.len() as i64, ..Counters::default() };
            store::add_progress(tx, &id, &d, &[], &[], &now)?;
            if cut {
                // sitemap pages were left out: this run cannot tell what is gone
                store::mark_truncated(tx, &id)?;
            }
            Ok(added.len() as i64)
        })?;
        self.state.lock().frontier += added;
        Ok(true)
    }

    /// Waits for the politeness gate: at most one request per interval to the site. `false`:
    /// the crawl stopped meanwhile, and nothing may be sent.
    pub(super) fn wait_turn(&self) -> bool {
        let at = {
            let mut g = self.gate.lock();
            let at = (*g).max(Instant::now());
            *g = at + self.interval;
            at
        };
        let wait = at.saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            self.sleep(wait);
        }
        self.state.lock().stop.is_none()
    }

    /// Sleeps up to `d`, woken early when the crawl stops.
    pub(super) fn sleep(&self, d: Duration) {
        let until = Instant::now() + d;
        let mut st = self.state.lock();
        while st.stop.is_none() && Instant::now() < until {
            self.changed.wait_until(&mut st, until);
        }
    }

    /// A fetch thread: takes pages until the frontier is empty (and no page in hand may add to
    /// it), the limit is reached, or the crawl stops.
    fn work(&self) {
        loop {
            let entry = {
                let mut st = self.state.lock();
                loop {
                    if st.stop.is_some() || st.taken >= self.job.limit {
                        self.changed.notify_all();
                        return;
                    }
                    if let Some(e) = st.queue.pop_front() {
                        st.in_flight += 1;
                        // the place under the limit is taken now (given back if nothing is fetched)
                        st.taken += 1;
                        break e;
                    }
                    if st.in_flight == 0 {
                        self.changed.notify_all();
                        return;
                    }
                    self.changed.wait(&mut st);
                }
            };
            // a page that panics stops the crawl (as an error), never the counting of pages in hand
            let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut result = self.page(entry)?;
                let counted = result.fetched;
                let seed_failure = match &result.verdict {
                    Verdict::Failed { reason, .. } if result.entry.key == self.seed_key => Some(reason.clone()),
                    _ => None,
                };
                if self.state.lock().frontier >= self.job.limit.saturating_mul(10).max(10_000)
                    && !result.links.is_empty()
                {
                    result.links.clear();
                    result.dropped = true;
                }
                Some((counted, seed_failure, self.commit(result)))
            }));
            let mut st = self.state.lock();
            st.in_flight -= 1;
            let (counted, seed_failure, committed) = match handled {
                Ok(Some(done)) => done,
                // abandoned: the crawl stopped before its request went out; the page stays pending
                Ok(None) => (false, None, Ok(Some(vec![]))),
                Err(_) => (false, None, Err(crate::Error::internal_msg("a page could not be handled"))),
            };
            if !counted {
                st.taken -= 1;
            }
            if seed_failure.is_some() {
                st.seed_failure = seed_failure;
            }
            match committed {
                Ok(Some(added)) => {
                    st.frontier += added.len() as i64;
                    st.queue.extend(added);
                }
                Ok(None) => {
                    st.stop.get_or_insert(Stop::NotProcessing);
                }
                Err(e) => {
                    st.stop.get_or_insert(Stop::Error(format!("could not save the crawl's progress: {e}")));
                }
            }
            self.changed.notify_all();
        }
    }

    /// Saves one page's outcome with its `done` mark, in one transaction that first checks the
    /// job is still processing. `None`: it is not (paused or deleted) and nothing was saved.
    fn commit(&self, r: PageResult) -> Result<Option<Vec<Pending>>> {
        let app = self.app;
        let (job, ws, source) = (&self.job.id, &self.job.workspace_id, &self.job.source_id);
        let now = self.now();
        let actor = Actor::system();
        app.db.write(|tx| {
            if !store::owns(tx, job, &self.run_id)? {
                return Ok(None);
            }
            store::mark_done(tx, job, &r.entry.key)?;
            let added = store::add_frontier(tx, job, &r.links)?;
            if r.dropped {
                store::mark_truncated(tx, job)?;
            }
            let mut d =
                Counters { discovered: added.len() as i64, fetched: i64::from(r.fetched), ..Counters::default() };
            let (mut failures, mut skips) = (vec![], vec![]);
            let known = store::page(tx, source, &r.entry.key)?;
            let had_doc = known.as_ref().and_then(|k| k.document_id.clone());
            let mut skipped = |tx: &Tx,
                               d: &mut Counters,
                               code: &str,
                               reason: String,
                               record: Option<PageRecord>|
             -> Result<()> {
                if let Some(doc) = &had_doc
                    && website::remove_page(tx, ws, doc)?
                {
                    d.removed += 1;
                }
                if let Some(rec) = record {
                    store::put_page(tx, source, &PageRecord { document_id: None, content_hash: None, ..rec }, &now)?;
                } else if known.is_some() {
                    store::delete_page(tx, source, &r.entry.key)?;
                }
                d.skipped += 1;
                skips.push(PageNote { url: clip(&r.entry.url), reason: clip(&reason), code: Some(code.to_string()) });
                Ok(())
            };
            match r.verdict {
                Verdict::Indexed { mut record, doc } => {
                    let hash = record.content_hash.clone().unwrap_or_default();
                    if let Some(other) = store::indexed_with_hash(tx, source, &hash, &r.entry.key)? {
                        let reason = format!("The same content as another page: {}", other.url);
                        skipped(tx, &mut d, "duplicate_content", reason, Some(record))?;
                    } else {
                        record.document_id = Some(website::write_page(tx, app, &actor, ws, source, doc, &now)?);
                        store::put_page(tx, source, &record, &now)?;
                        d.indexed += 1;
                    }
                }
                Verdict::Unchanged { record } => {
                    store::put_page(tx, source, &record, &now)?;
                    d.unchanged += 1;
                }
                Verdict::Skipped { code, reason, record } => skipped(tx, &mut d, code, reason, record)?,
                Verdict::Failed { reason, gone } => {
                    if gone {
                        if let Some(doc) = &had_doc
                            && website::remove_page(tx, ws, doc)?
                        {
                            d.removed += 1;
                        }
                        store::delete_page(tx, source, &r.entry.key)?;
                    } else if let Some(k) = &known {
                        // still known: the page stays as it was, seen by this run
                        store::put_page(tx, source, &PageRecord { last_job_id: job.clone(), ..k.clone() }, &now)?;
                    }
                    d.failed += 1;
                    d.uncertain += i64::from(!gone);
                    failures.push(PageNote { url: clip(&r.entry.url), reason: clip(&reason), code: None });
                }
            }
            store::add_progress(tx, job, &d, &failures, &skips, &now)?;
            Ok(Some(added))
        })
    }

    /// The frontier ran out or the limit was reached: removes what a fresh, complete and
    /// faultless run did not see, marks the job done and plans the next scheduled recrawl.
    fn finish(&self, truncated: bool, seed_failure: Option<String>) -> Result<()> {
        let app = self.app;
        let (job, ws, source) = (&self.job.id, &self.job.workspace_id, &self.job.source_id);
        let now = self.now();
        let current = app.db.read(|c| store::job_by_id(c, job))?;
        let Some(current) = current.filter(|j| j.status == "processing") else {
            return Ok(());
        };
        if !app.db.read(|c| store::owns(c, job, &self.run_id))? {
            return Ok(());
        }
        let c = current.counters;
        let complete = current.fresh && !truncated && !current.truncated && c.uncertain == 0 && seed_failure.is_none();
        let unseen = if complete { app.db.read(|conn| store::unseen_pages(conn, source, job))? } else { vec![] };
        let mut removed_any = false;
        app.db.write(|tx| {
            if !store::owns(tx, job, &self.run_id)? {
                return Ok(());
            }
            let mut d = Counters::default();
            for p in &unseen {
                if let Some(doc) = &p.document_id
                    && website::remove_page(tx, ws, doc)?
                {
                    d.removed += 1;
                }
                store::delete_page(tx, source, &p.key)?;
            }
            removed_any = d.removed > 0;
            store::add_progress(tx, job, &d, &[], &[], &now)?;
            let failed = seed_failure.as_ref().filter(|_| c.indexed + c.unchanged == 0);
            let status = if failed.is_some() { "failed" } else { "completed" };
            store::finish(
                tx,
                job,
                status,
                failed.map(|f| format!("the start page could not be read: {f}")).as_deref(),
                truncated,
                &now,
            )?;
            store::drop_frontier(tx, job)?;
            if let Some(h) = self.site.interval_hours {
                schedule(app, tx, ws, source, h)?;
            }
            Ok(())
        })?;
        if removed_any {
            app.search()?.sync(&app.db)?;
        }
        Ok(())
    }
}

/// A note's text, at most 1,000 characters.
fn clip(s: &str) -> String {
    s.chars().take(1000).collect()
}

/// Plans the source's next scheduled recrawl, `hours` from now.
pub(super) fn schedule(app: &App, tx: &Tx, ws: &WorkspaceId, source: &str, hours: i64) -> Result<()> {
    let at = app.clock.now_ms() + hours * 3_600_000;
    let q = NewJob::new(SCHEDULE_JOB, json!({"sourceId": source, "workspaceId": ws.0, "hours": hours}))
        .dedupe(format!("crawl-schedule:{source}:{at}"))
        .workspace(ws.0.clone())
        .run_at(at);
    jobs::enqueue_tx(tx, app.clock.now_ms(), app.jobs.default_max_attempts(), &q)?;
    Ok(())
}

/// A scheduled recrawl is due: it starts unless the interval was changed or turned off, a crawl
/// is active, or one started within the interval (an earlier plan already did the work).
pub fn scheduled(app: &App, _ctx: &JobCtx, payload: &JobPayload) -> Outcome {
    let (Some(source), Some(ws), Some(hours)) =
        (payload["sourceId"].as_str(), payload["workspaceId"].as_str(), payload["hours"].as_i64())
    else {
        return Outcome::Fail("no sourceId".into());
    };
    let ws = WorkspaceId(ws.to_string());
    let r = app.db.write(|tx| {
        let Some(s) = website::source(tx, &ws, source)? else { return Ok(()) };
        let Some(site) = super::api::site_config(&s.config).filter(|c| c.interval_hours == Some(hours)) else {
            return Ok(());
        };
        if store::active_job(tx, source)?.is_some() {
            return Ok(());
        }
        let recent = app.clock.now_ms() - hours * 3_600_000 + 60_000;
        let latest = store::latest_jobs(tx, &ws)?.remove(source);
        let started_recently =
            |j: &CrawlJob| crate::clock::parse_rfc3339(&j.created_at).is_some_and(|t| t.timestamp_millis() > recent);
        if latest.is_some_and(|j| started_recently(&j)) {
            return Ok(());
        }
        let now = rfc3339(app.clock.now());
        super::queue_job(app, tx, &ws, source, "recrawl", &site, &now)?;
        Ok(())
    });
    match r {
        Ok(()) => Outcome::Done,
        Err(e) => Outcome::retry(e.to_string()),
    }
}
