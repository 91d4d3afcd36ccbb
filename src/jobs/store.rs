//! SQL for the job queue (private to `jobs`): enqueue, claim with leases, finish, retry, dead
//! jobs, orphan recovery and the depth gauges.

use rusqlite::{OptionalExtension, params, params_from_iter};
use serde_json::Value;

use super::{Enqueued, NewJob, Outcome};
use crate::error::Result;
use crate::storage::{Conn, Row, SqlValue, Tx};

#[derive(Debug, Clone)]
pub struct JobRow {
    pub id: i64,
    pub kind: String,
    pub payload: Value,
    pub dedupe_key: Option<String>,
    pub priority: i32,
    pub state: String,
    pub attempts: u32,
    pub max_attempts: u32,
    pub run_at: i64,
    pub lease_until: Option<i64>,
    pub last_error: Option<String>,
    pub workspace_id: Option<String>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct QueueDepth {
    pub kind: String,
    pub state: String,
    pub count: i64,
}

const COLS: &str = "id, kind, payload, dedupe_key, priority, state, attempts, max_attempts, run_at, lease_until, last_error, workspace_id";

fn row(r: &Row) -> rusqlite::Result<JobRow> {
    let payload: String = r.get(2)?;
    Ok(JobRow {
        id: r.get(0)?,
        kind: r.get(1)?,
        payload: serde_json::from_str(&payload).unwrap_or(Value::Null),
        dedupe_key: r.get(3)?,
        priority: r.get(4)?,
        state: r.get(5)?,
        attempts: r.get(6)?,
        max_attempts: r.get(7)?,
        run_at: r.get(8)?,
        lease_until: r.get(9)?,
        last_error: r.get(10)?,
        workspace_id: r.get(11)?,
    })
}

/// A new job's row (a job with the dedupe key of one already queued is that job: no error, which
/// on PostgreSQL would end the transaction).
const INSERT: &str = "INSERT INTO jobs (kind, payload, dedupe_key, priority, state, attempts, max_attempts, run_at, workspace_id, created_at, updated_at)
     VALUES (?1, ?2, ?3, ?4, 'queued', 0, ?5, ?6, ?7, ?8, ?8) ON CONFLICT (dedupe_key) DO NOTHING";

/// The values of [`INSERT`]'s placeholders.
fn insert_values(now: i64, default_max: u32, job: &NewJob) -> [SqlValue; 8] {
    [
        job.kind.clone().into(),
        job.payload.to_string().into(),
        job.dedupe_key.clone().into(),
        job.priority.into(),
        job.max_attempts.unwrap_or(default_max).into(),
        job.run_at.unwrap_or(now).into(),
        job.workspace_id.clone().into(),
        now.into(),
    ]
}

pub fn insert(tx: &Tx, now: i64, default_max: u32, job: &NewJob) -> Result<Enqueued> {
    let values = params_from_iter(insert_values(now, default_max, job));
    let id: Option<i64> = tx.query_row(&format!("{INSERT} RETURNING id"), values, |r| r.get(0)).optional()?;
    match id {
        Some(id) => Ok(Enqueued { id, created: true }),
        None => {
            let id: i64 = tx.query_row("SELECT id FROM jobs WHERE dedupe_key = ?1", [&job.dedupe_key], |r| r.get(0))?;
            Ok(Enqueued { id, created: false })
        }
    }
}

/// [`insert`] for a caller that does not need the job's id: deferred with the transaction's next
/// statement (`Tx::execute_deferred`); a job with the same dedupe key already queued is kept.
pub fn insert_deferred(tx: &Tx, now: i64, default_max: u32, job: &NewJob) -> Result<()> {
    tx.execute_deferred(INSERT, params_from_iter(insert_values(now, default_max, job)))?;
    Ok(())
}

/// Claims the best due job: queued and due, or running with an expired lease. A job that has
/// used all its attempts and is found with an expired lease goes dead instead.
/// On PostgreSQL the row is locked as it is chosen (`FOR UPDATE SKIP LOCKED`): no two nodes can
/// claim one job, whatever else serialises their writes.
pub fn claim(tx: &Tx, now: i64, lease_until: i64, owner: &str, kinds: &str) -> Result<Option<JobRow>> {
    let lock = if tx.is_postgres() { " FOR UPDATE SKIP LOCKED" } else { "" };
    loop {
        // the best due job (walking `jobs_ready` from the front, in the claim's order) and the
        // best lapsed lease (the few running jobs past `lease_until`, found by `jobs_lease`), then
        // the better of the two: one query with `OR` across both states read and sorted every
        // queued job on each claim, which made a long queue slow to drain. On PostgreSQL each
        // branch locks the row it found; the one not taken stays locked until the commit.
        let candidate: Option<(i64, u32, u32, String)> = tx
            .query_row(
                &format!(
                    "WITH due AS (
                        SELECT id, attempts, max_attempts, state, priority, run_at FROM jobs
                        WHERE state = 'queued' AND run_at <= ?1 AND kind IN (SELECT value FROM json_each(?2))
                        ORDER BY priority DESC, run_at, id LIMIT 1{lock}),
                     lapsed AS (
                        SELECT id, attempts, max_attempts, state, priority, run_at FROM jobs
                        WHERE state = 'running' AND lease_until < ?1 AND kind IN (SELECT value FROM json_each(?2))
                        ORDER BY priority DESC, run_at, id LIMIT 1{lock})
                     SELECT id, attempts, max_attempts, state FROM (SELECT * FROM due UNION ALL SELECT * FROM lapsed) AS c
                     ORDER BY priority DESC, run_at, id LIMIT 1"
                ),
                params![now, kinds],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()?;
        let Some((id, attempts, max_attempts, state)) = candidate else {
            return Ok(None);
        };
        if state == "running" && attempts >= max_attempts {
            tx.execute(
                "UPDATE jobs SET state = 'dead', lease_until = NULL, lease_owner = NULL, finished_at = ?2, updated_at = ?2,
                 last_error = coalesce(last_error || '; ', '') || 'the worker running it stopped before finishing (lease expired) on the last attempt'
                 WHERE id = ?1",
                params![id, now],
            )?;
            continue;
        }
        let job = tx.query_row(
            &format!(
                "UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_until = ?2, lease_owner = ?3, updated_at = ?4
                 WHERE id = ?1 RETURNING {COLS}"
            ),
            params![id, lease_until, owner, now],
            row,
        )?;
        return Ok(Some(job));
    }
}

pub fn extend_lease(tx: &Tx, id: i64, owner: &str, until: i64) -> Result<()> {
    tx.execute(
        "UPDATE jobs SET lease_until = ?3 WHERE id = ?1 AND lease_owner = ?2 AND state = 'running'",
        params![id, owner, until],
    )?;
    Ok(())
}

/// Records the outcome; returns true when the job went dead. Ignored when the lease was lost.
pub fn finish(tx: &Tx, job: &JobRow, owner: &str, now: i64, outcome: &Outcome) -> Result<bool> {
    let guard = "WHERE id = ?1 AND lease_owner = ?2 AND attempts = ?3 AND state = 'running'";
    match outcome {
        Outcome::Done => {
            tx.execute(
                &format!(
                    "UPDATE jobs SET state = 'done', lease_until = NULL, lease_owner = NULL, finished_at = ?4, updated_at = ?4 {guard}"
                ),
                params![job.id, owner, job.attempts, now],
            )?;
            Ok(false)
        }
        Outcome::Retry { after, error } => {
            if job.attempts >= job.max_attempts {
                tx.execute(
                    &format!("UPDATE jobs SET state = 'dead', lease_until = NULL, lease_owner = NULL, last_error = ?5, finished_at = ?4, updated_at = ?4 {guard}"),
                    params![job.id, owner, job.attempts, now, error],
                )?;
                return Ok(true);
            }
            let delay = after.unwrap_or_else(|| super::backoff(job.attempts));
            tx.execute(
                &format!("UPDATE jobs SET state = 'queued', lease_until = NULL, lease_owner = NULL, last_error = ?5, run_at = ?6, updated_at = ?4 {guard}"),
                params![job.id, owner, job.attempts, now, error, now + delay.as_millis() as i64],
            )?;
            Ok(false)
        }
        Outcome::Fail(reason) => {
            tx.execute(
                &format!("UPDATE jobs SET state = 'dead', lease_until = NULL, lease_owner = NULL, last_error = ?5, finished_at = ?4, updated_at = ?4 {guard}"),
                params![job.id, owner, job.attempts, now, reason],
            )?;
            Ok(true)
        }
        Outcome::Release => {
            tx.execute(
                &format!("UPDATE jobs SET state = 'queued', lease_until = NULL, lease_owner = NULL, attempts = attempts - 1, updated_at = ?4 {guard}"),
                params![job.id, owner, job.attempts, now],
            )?;
            Ok(false)
        }
    }
}

/// Puts back every job this process holds (graceful shutdown).
pub fn release_owned(tx: &Tx, process_id: &str) -> Result<usize> {
    Ok(tx.execute(
        "UPDATE jobs SET state = 'queued', lease_until = NULL, lease_owner = NULL, attempts = max(attempts - 1, 0)
         WHERE state = 'running' AND lease_owner LIKE ?1 || ':%'",
        [process_id],
    )?)
}

/// At start-up, with the data directory locked, no other process can hold a lease: every running
/// job belongs to a process that died. Put them back at once (the crashed attempt counts). With
/// `node` (PostgreSQL), only the jobs this node's earlier processes held (owners `<node>/…`):
/// other nodes' leases expire on their own.
pub fn recover_orphans(tx: &Tx, now: i64, node: Option<&str>) -> Result<usize> {
    let set = "UPDATE jobs SET state = 'queued', lease_until = NULL, lease_owner = NULL, run_at = ?1, updated_at = ?1,
         last_error = coalesce(last_error || '; ', '') || 'the process running it stopped (crash or kill)'
         WHERE state = 'running'";
    Ok(match node {
        None => tx.execute(set, [now])?,
        Some(node) => tx.execute(&format!("{set} AND lease_owner LIKE ?2"), params![now, format!("{node}/%")])?,
    })
}

pub fn next_due(c: &Conn, kinds: &str) -> Result<Option<i64>> {
    Ok(c.query_row(
        "SELECT min(t) FROM (SELECT min(run_at) AS t FROM jobs WHERE state = 'queued' AND kind IN (SELECT value FROM json_each(?1))
                             UNION ALL SELECT min(lease_until) FROM jobs WHERE state = 'running') AS due",
        [kinds],
        |r| r.get(0),
    )?)
}

/// Jobs due now (of a kind this process runs) or running.
pub fn pending_count(c: &Conn, now: i64, kinds: &str) -> Result<i64> {
    Ok(c.query_row(
        "SELECT count(*) FROM jobs WHERE (state = 'queued' AND run_at <= ?1 AND kind IN (SELECT value FROM json_each(?2))) OR state = 'running'",
        params![now, kinds],
        |r| r.get(0),
    )?)
}

pub fn get(c: &Conn, id: i64) -> Result<Option<JobRow>> {
    Ok(c.query_row(&format!("SELECT {COLS} FROM jobs WHERE id = ?1"), [id], row).optional()?)
}

pub fn depth(c: &Conn) -> Result<Vec<QueueDepth>> {
    let mut stmt = c.prepare("SELECT kind, state, count(*) FROM jobs GROUP BY kind, state ORDER BY kind, state")?;
    let rows = stmt.query_map([], |r| Ok(QueueDepth { kind: r.get(0)?, state: r.get(1)?, count: r.get(2)? }))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn prune_done(tx: &Tx, cutoff: i64) -> Result<usize> {
    Ok(tx.execute("DELETE FROM jobs WHERE state = 'done' AND finished_at < ?1", [cutoff])?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::NewJob;
    use crate::storage::Db;

    fn job(priority: i32, max_attempts: Option<u32>) -> NewJob {
        NewJob { priority, max_attempts, ..NewJob::new("k", serde_json::json!({})) }
    }

    /// The better of the best due job and the best lapsed lease, as one query over both did.
    #[test]
    fn a_claim_takes_the_best_of_the_due_jobs_and_the_lapsed_leases() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("steward.db"), 1).unwrap();
        let kinds = r#"["k"]"#;
        let claim_at = |now: i64| db.write(|tx| claim(tx, now, now + 10, "n", kinds)).unwrap().map(|j| j.id);
        let low = db.write(|tx| insert(tx, 0, 3, &job(0, None))).unwrap().id;
        let high = db.write(|tx| insert(tx, 0, 3, &job(5, None))).unwrap().id;
        assert_eq!(claim_at(1), Some(high));
        // high's lease lapses at 11: it outranks the due low
        assert_eq!(claim_at(20), Some(high));
        // a due job of higher priority outranks the lapsed lease
        let top = db.write(|tx| insert(tx, 25, 3, &job(9, None))).unwrap().id;
        assert_eq!(claim_at(40), Some(top));
        // a lapsed lease on its last attempt goes dead, and the claim goes on to the next best
        let once = db.write(|tx| insert(tx, 40, 3, &job(20, Some(1)))).unwrap().id;
        assert_eq!(claim_at(41), Some(once));
        // at 60 every lease has lapsed: `once` (on its last attempt) goes dead, then the order
        // is top's, high's, low's
        assert_eq!(claim_at(60), Some(top));
        let state: String =
            db.read(|c| Ok(c.query_row("SELECT state FROM jobs WHERE id = ?1", [once], |r| r.get(0))?)).unwrap();
        assert_eq!(state, "dead");
        assert_eq!(claim_at(61), Some(high));
        assert_eq!(claim_at(62), Some(low));
        assert_eq!(claim_at(63), None);
    }
}
