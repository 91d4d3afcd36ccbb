//! The crawler's SQL: crawl jobs with their counters, each job's frontier (its checkpoint) and
//! what is known of each page of a website source.

use std::collections::BTreeMap;

use rusqlite::{OptionalExtension, params};

use super::{Counters, CrawlJob, JobFilter, NOTES_KEPT, PageNote, PageRecord, Pending};
use crate::error::Result;
use crate::ids::WorkspaceId;
use crate::storage::{Conn, Row, Tx};

const JOB_COLS: &str =
    "id, workspace_id, source_id, kind, requested_url, status, page_limit, fresh, discovered, fetched,
     indexed, unchanged, failed, skipped, removed, skipped_by, failures, skips, last_error, truncated, started_at,
     created_at, updated_at, completed_at, uncertain";

fn job_row(r: &Row) -> rusqlite::Result<CrawlJob> {
    let json = |i: usize| -> rusqlite::Result<String> { r.get(i) };
    Ok(CrawlJob {
        id: r.get(0)?,
        workspace_id: r.get(1)?,
        source_id: r.get(2)?,
        kind: r.get(3)?,
        requested_url: r.get(4)?,
        status: r.get(5)?,
        limit: r.get(6)?,
        fresh: r.get(7)?,
        counters: Counters {
            discovered: r.get(8)?,
            fetched: r.get(9)?,
            indexed: r.get(10)?,
            unchanged: r.get(11)?,
            failed: r.get(12)?,
            skipped: r.get(13)?,
            removed: r.get(14)?,
            uncertain: r.get(24)?,
        },
        skipped_by: serde_json::from_str(&json(15)?).unwrap_or_default(),
        failures: notes(&json(16)?),
        skips: notes(&json(17)?),
        last_error: r.get(18)?,
        truncated: r.get(19)?,
        started_at: r.get(20)?,
        created_at: r.get(21)?,
        updated_at: r.get(22)?,
        completed_at: r.get(23)?,
    })
}

fn notes(s: &str) -> Vec<PageNote> {
    let v: Vec<(String, String, Option<String>)> = serde_json::from_str(s).unwrap_or_default();
    v.into_iter().map(|(url, reason, code)| PageNote { url, reason, code }).collect()
}

fn notes_json(n: &[PageNote]) -> String {
    let v: Vec<(&str, &str, Option<&str>)> =
        n.iter().map(|p| (p.url.as_str(), p.reason.as_str(), p.code.as_deref())).collect();
    serde_json::to_string(&v).unwrap_or_else(|_| "[]".into())
}

pub fn insert_job(tx: &Tx, j: &CrawlJob) -> Result<()> {
    tx.execute(
        "INSERT INTO crawl_jobs (id, workspace_id, source_id, kind, requested_url, status, page_limit, fresh, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
        params![j.id, j.workspace_id, j.source_id, j.kind, j.requested_url, j.status, j.limit, j.fresh, j.created_at],
    )?;
    Ok(())
}

pub fn job(c: &Conn, ws: &WorkspaceId, id: &str) -> Result<Option<CrawlJob>> {
    Ok(c.query_row(
        &format!("SELECT {JOB_COLS} FROM crawl_jobs WHERE workspace_id = ?1 AND id = ?2"),
        params![ws, id],
        job_row,
    )
    .optional()?)
}

/// A job by id alone (the worker's view; the job row carries its workspace).
pub fn job_by_id(c: &Conn, id: &str) -> Result<Option<CrawlJob>> {
    Ok(c.query_row(&format!("SELECT {JOB_COLS} FROM crawl_jobs WHERE id = ?1"), [id], job_row).optional()?)
}

/// Jobs of a workspace, newest first: those created since `since`, and every active one.
pub fn jobs(c: &Conn, ws: &WorkspaceId, f: &JobFilter) -> Result<Vec<CrawlJob>> {
    let mut st = c.prepare(&format!(
        "SELECT {JOB_COLS} FROM crawl_jobs
         WHERE workspace_id = ?1 AND (created_at >= ?2 OR status IN ('queued', 'processing', 'paused'))
           AND (?3 IS NULL OR status = ?3) AND (?4 IS NULL OR source_id = ?4)
         ORDER BY created_at DESC, id DESC LIMIT ?5"
    ))?;
    let rows = st.query_map(params![ws, f.since, f.status, f.source_id, f.limit as i64], job_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The newest job of each website source of a workspace.
pub fn latest_jobs(c: &Conn, ws: &WorkspaceId) -> Result<BTreeMap<String, CrawlJob>> {
    let mut st = c.prepare(&format!(
        "SELECT {JOB_COLS} FROM crawl_jobs j WHERE workspace_id = ?1 AND id = (
            SELECT id FROM crawl_jobs k WHERE k.source_id = j.source_id ORDER BY created_at DESC, id DESC LIMIT 1)"
    ))?;
    let rows = st.query_map([ws], job_row)?;
    let mut out = BTreeMap::new();
    for j in rows {
        let j = j?;
        out.insert(j.source_id.clone(), j);
    }
    Ok(out)
}

/// The source's queued, processing or paused job.
pub fn active_job(c: &Conn, source_id: &str) -> Result<Option<CrawlJob>> {
    Ok(c.query_row(
        &format!(
            "SELECT {JOB_COLS} FROM crawl_jobs WHERE source_id = ?1 AND status IN ('queued', 'processing', 'paused')
             ORDER BY created_at DESC LIMIT 1"
        ),
        [source_id],
        job_row,
    )
    .optional()?)
}

/// Whether the run `run_id` still owns the job: it is processing under that run.
pub fn owns(c: &Conn, id: &str, run_id: &str) -> Result<bool> {
    Ok(c.query_row(
        "SELECT 1 FROM crawl_jobs WHERE id = ?1 AND status = 'processing' AND run_id = ?2",
        params![id, run_id],
        |_| Ok(()),
    )
    .optional()?
    .is_some())
}

pub fn set_status(tx: &Tx, id: &str, status: &str, now: &str) -> Result<()> {
    tx.execute("UPDATE crawl_jobs SET status = ?2, updated_at = ?3 WHERE id = ?1", params![id, status, now])?;
    Ok(())
}

/// The worker takes a job: `processing`, started now (the first time), and no longer fresh when
/// it continues a frontier already under way.
/// `false`: the job is no longer queued or processing (paused or ended since it was read).
pub fn start(tx: &Tx, id: &str, run_id: &str, continuing: bool, now: &str) -> Result<bool> {
    let n = tx.execute(
        "UPDATE crawl_jobs SET status = 'processing', run_id = ?4, started_at = COALESCE(started_at, ?2), updated_at = ?2,
            fresh = CASE WHEN ?3 THEN 0 ELSE fresh END
         WHERE id = ?1 AND status IN ('queued', 'processing')",
        params![id, now, continuing, run_id],
    )?;
    Ok(n == 1)
}

/// Fails a job that is queued or processing (under `run_id` when given); `false` when it was
/// not (paused, ended, or another run's).
pub fn fail(tx: &Tx, id: &str, run_id: Option<&str>, msg: &str, now: &str) -> Result<bool> {
    let n = tx.execute(
        "UPDATE crawl_jobs SET status = 'failed', last_error = ?3, updated_at = ?4, completed_at = ?4
         WHERE id = ?1 AND status IN ('queued', 'processing') AND (?2 IS NULL OR run_id = ?2)",
        params![id, run_id, msg, now],
    )?;
    Ok(n == 1)
}

/// Some of the site was left out of this run (links or sitemap pages over a cap).
pub fn mark_truncated(tx: &Tx, id: &str) -> Result<()> {
    tx.execute("UPDATE crawl_jobs SET truncated = 1 WHERE id = ?1", [id])?;
    Ok(())
}

/// Queues a paused job again; a resumed run never removes pages.
pub fn requeue(tx: &Tx, id: &str, now: &str) -> Result<()> {
    tx.execute("UPDATE crawl_jobs SET status = 'queued', fresh = 0, updated_at = ?2 WHERE id = ?1", params![id, now])?;
    Ok(())
}

pub fn finish(tx: &Tx, id: &str, status: &str, last_error: Option<&str>, truncated: bool, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE crawl_jobs SET status = ?2, last_error = ?3, truncated = MAX(truncated, ?4), updated_at = ?5, completed_at = ?5
         WHERE id = ?1",
        params![id, status, last_error, truncated, now],
    )?;
    Ok(())
}

pub fn delete_job(tx: &Tx, id: &str) -> Result<()> {
    tx.execute("DELETE FROM crawl_jobs WHERE id = ?1", [id])?;
    Ok(())
}

/// Adds counters, skip reasons and notes (the first [`NOTES_KEPT`] of each kind) to a job.
pub fn add_progress(
    tx: &Tx,
    id: &str,
    d: &Counters,
    failures: &[PageNote],
    skips: &[PageNote],
    now: &str,
) -> Result<()> {
    let (by, mut kept_failures, mut kept_skips): (String, String, String) =
        tx.query_row("SELECT skipped_by, failures, skips FROM crawl_jobs WHERE id = ?1", [id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    let mut by: BTreeMap<String, i64> = serde_json::from_str(&by).unwrap_or_default();
    for s in skips {
        *by.entry(s.code.clone().unwrap_or_default()).or_default() += 1;
    }
    for (list, new) in [(&mut kept_failures, failures), (&mut kept_skips, skips)] {
        if !new.is_empty() {
            let mut all = notes(list);
            all.extend(new.iter().take(NOTES_KEPT.saturating_sub(all.len())).cloned());
            *list = notes_json(&all);
        }
    }
    tx.execute(
        "UPDATE crawl_jobs SET discovered = discovered + ?2, fetched = fetched + ?3, indexed = indexed + ?4,
            unchanged = unchanged + ?5, failed = failed + ?6, skipped = skipped + ?7, removed = removed + ?8,
            skipped_by = ?9, failures = ?10, skips = ?11, updated_at = ?12, uncertain = uncertain + ?13
         WHERE id = ?1",
        params![
            id,
            d.discovered,
            d.fetched,
            d.indexed,
            d.unchanged,
            d.failed,
            d.skipped,
            d.removed,
            serde_json::to_string(&by).unwrap_or_else(|_| "{}".into()),
            kept_failures,
            kept_skips,
            now,
            d.uncertain
        ],
    )?;
    Ok(())
}

// -- the frontier

/// Adds URLs to a job's frontier; those already in it (by key) are ignored. Returns the rows
/// that were new, in order.
pub fn add_frontier(tx: &Tx, job: &str, urls: &[Pending]) -> Result<Vec<Pending>> {
    if urls.is_empty() {
        return Ok(vec![]);
    }
    let mut seq: i64 =
        tx.query_row("SELECT COALESCE(MAX(seq), 0) FROM crawl_frontier WHERE job_id = ?1", [job], |r| r.get(0))?;
    let mut st = tx.prepare_cached(
        "INSERT OR IGNORE INTO crawl_frontier (job_id, seq, url_key, url, depth, discovery) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    let mut added = Vec::new();
    for p in urls {
        seq += 1;
        if st.execute(params![job, seq, p.key, p.url, p.depth, p.discovery])? == 1 {
            added.push(Pending { seq, ..p.clone() });
        }
    }
    Ok(added)
}

/// The frontier's URLs not done yet, in discovery order.
pub fn pending(c: &Conn, job: &str) -> Result<Vec<Pending>> {
    let mut st = c.prepare(
        "SELECT seq, url_key, url, depth, discovery FROM crawl_frontier WHERE job_id = ?1 AND done = 0 ORDER BY seq",
    )?;
    let rows = st.query_map([job], |r| {
        Ok(Pending { seq: r.get(0)?, key: r.get(1)?, url: r.get(2)?, depth: r.get(3)?, discovery: r.get(4)? })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// How many frontier URLs a job has, and how many are done.
pub fn frontier_size(c: &Conn, job: &str) -> Result<(i64, i64)> {
    Ok(c.query_row("SELECT COUNT(*), COALESCE(SUM(done), 0) FROM crawl_frontier WHERE job_id = ?1", [job], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })?)
}

pub fn mark_done(tx: &Tx, job: &str, key: &str) -> Result<()> {
    tx.execute("UPDATE crawl_frontier SET done = 1 WHERE job_id = ?1 AND url_key = ?2", params![job, key])?;
    Ok(())
}

/// A finished job's frontier is not needed any more.
pub fn drop_frontier(tx: &Tx, job: &str) -> Result<()> {
    tx.execute("DELETE FROM crawl_frontier WHERE job_id = ?1", [job])?;
    Ok(())
}

// -- pages

fn page_row(r: &Row) -> rusqlite::Result<PageRecord> {
    let links: String = r.get(6)?;
    Ok(PageRecord {
        key: r.get(0)?,
        url: r.get(1)?,
        document_id: r.get(2)?,
        etag: r.get(3)?,
        last_modified: r.get(4)?,
        content_hash: r.get(5)?,
        links: serde_json::from_str(&links).unwrap_or_default(),
        last_job_id: r.get(7)?,
    })
}

const PAGE_COLS: &str = "url_key, url, document_id, etag, last_modified, content_hash, links, last_job_id";

pub fn page(c: &Conn, source: &str, key: &str) -> Result<Option<PageRecord>> {
    Ok(c.query_row(
        &format!("SELECT {PAGE_COLS} FROM crawl_pages WHERE source_id = ?1 AND url_key = ?2"),
        params![source, key],
        page_row,
    )
    .optional()?)
}

/// Another indexed page of the source with this content hash.
pub fn indexed_with_hash(c: &Conn, source: &str, hash: &str, not_key: &str) -> Result<Option<PageRecord>> {
    Ok(c.query_row(
        &format!(
            "SELECT {PAGE_COLS} FROM crawl_pages
             WHERE source_id = ?1 AND content_hash = ?2 AND url_key <> ?3 AND document_id IS NOT NULL LIMIT 1"
        ),
        params![source, hash, not_key],
        page_row,
    )
    .optional()?)
}

pub fn put_page(tx: &Tx, source: &str, p: &PageRecord, now: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO crawl_pages (source_id, url_key, url, document_id, etag, last_modified, content_hash, links, last_job_id, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT (source_id, url_key) DO UPDATE SET url = ?3, document_id = ?4, etag = ?5, last_modified = ?6,
            content_hash = ?7, links = ?8, last_job_id = ?9, updated_at = ?10",
        params![
            source,
            p.key,
            p.url,
            p.document_id,
            p.etag,
            p.last_modified,
            p.content_hash,
            serde_json::to_string(&p.links).unwrap_or_else(|_| "[]".into()),
            p.last_job_id,
            now
        ],
    )?;
    Ok(())
}

/// Pages of the source the job did not see (`last_job_id` another job's).
pub fn unseen_pages(c: &Conn, source: &str, job: &str) -> Result<Vec<PageRecord>> {
    let mut st = c.prepare(&format!(
        "SELECT {PAGE_COLS} FROM crawl_pages WHERE source_id = ?1 AND last_job_id <> ?2 ORDER BY url_key"
    ))?;
    let rows = st.query_map(params![source, job], page_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn delete_page(tx: &Tx, source: &str, key: &str) -> Result<()> {
    tx.execute("DELETE FROM crawl_pages WHERE source_id = ?1 AND url_key = ?2", params![source, key])?;
    Ok(())
}
