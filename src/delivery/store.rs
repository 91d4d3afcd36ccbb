//! SQL for deliveries and their attempts (private to `delivery`).

use rusqlite::{OptionalExtension, params};

use super::{Attempt, Delivery, DeliveryFilter, NewDelivery};
use crate::error::Result;
use crate::storage::{Conn, Row, Tx};

const COLS: &str = "id, workspace_id, channel, event, target, conversation_id, idempotency_key, status, attempts, \
    last_status_code, last_error, created_at, updated_at, delivered_at";

fn row(r: &Row) -> rusqlite::Result<Delivery> {
    Ok(Delivery {
        id: r.get(0)?,
        workspace_id: r.get(1)?,
        channel: r.get(2)?,
        event: r.get(3)?,
        target: r.get(4)?,
        conversation_id: r.get(5)?,
        idempotency_key: r.get(6)?,
        status: r.get(7)?,
        attempts: r.get(8)?,
        last_status_code: r.get(9)?,
        last_error: r.get(10)?,
        created_at: r.get(11)?,
        updated_at: r.get(12)?,
        delivered_at: r.get(13)?,
    })
}

/// Inserts a delivery unless one with this id exists; true when it was new.
pub fn insert(tx: &Tx, id: &str, d: &NewDelivery, status: &str, error: Option<&str>, now: &str) -> Result<bool> {
    Ok(tx.execute(
        "INSERT OR IGNORE INTO deliveries (id, workspace_id, channel, event, target, conversation_id, idempotency_key, status, last_error, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10)",
        params![id, d.workspace_id, d.channel, d.event, d.target, d.conversation_id, d.idempotency_key, status, error, now],
    )? > 0)
}

pub fn set_job(tx: &Tx, id: &str, job_id: i64) -> Result<()> {
    tx.execute("UPDATE deliveries SET job_id = ?2 WHERE id = ?1", params![id, job_id])?;
    Ok(())
}

pub fn get(c: &Conn, id: &str) -> Result<Option<Delivery>> {
    Ok(c.query_row(&format!("SELECT {COLS} FROM deliveries WHERE id = ?1"), [id], row).optional()?)
}

/// Records one attempt and the delivery's state after it.
pub fn record_attempt(tx: &Tx, id: &str, a: &Attempt, status: &str) -> Result<()> {
    let n: i64 = tx.query_row(
        "UPDATE deliveries SET attempts = attempts + 1, status = ?2, last_status_code = ?3, last_error = ?4, updated_at = ?5,
            delivered_at = CASE WHEN ?2 = 'success' THEN ?5 ELSE delivered_at END
         WHERE id = ?1 RETURNING attempts",
        params![id, status, a.status_code, a.error, a.at],
        |r| r.get(0),
    )?;
    tx.execute(
        "INSERT INTO delivery_attempts (delivery_id, attempt, at, outcome, status_code, duration_ms, error)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (delivery_id, attempt) DO UPDATE SET at = excluded.at, outcome = excluded.outcome,
           status_code = excluded.status_code, duration_ms = excluded.duration_ms, error = excluded.error",
        params![id, n, a.at, a.outcome, a.status_code, a.duration_ms, a.error],
    )?;
    Ok(())
}

pub fn attempts(c: &Conn, id: &str) -> Result<Vec<Attempt>> {
    let mut st = c.prepare(
        "SELECT attempt, at, outcome, status_code, duration_ms, error FROM delivery_attempts WHERE delivery_id = ?1 ORDER BY attempt",
    )?;
    let rows = st.query_map([id], |r| {
        Ok(Attempt {
            attempt: r.get(0)?,
            at: r.get(1)?,
            outcome: r.get(2)?,
            status_code: r.get(3)?,
            duration_ms: r.get(4)?,
            error: r.get(5)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// A page of the workspace's deliveries, newest first.
pub fn list(c: &Conn, ws: &str, f: &DeliveryFilter) -> Result<(Vec<Delivery>, i64)> {
    let filter = "workspace_id = ?1 AND (?2 IS NULL OR status = ?2) AND (?3 IS NULL OR channel = ?3) AND (?4 IS NULL OR conversation_id = ?4)";
    let total: i64 = c.query_row(
        &format!("SELECT count(*) FROM deliveries WHERE {filter}"),
        params![ws, f.status, f.channel, f.conversation_id],
        |r| r.get(0),
    )?;
    let (bt, bi) = f.before.clone().unzip();
    let mut st = c.prepare(&format!(
        "SELECT {COLS} FROM deliveries WHERE {filter} AND (?5 IS NULL OR created_at < ?5 OR (created_at = ?5 AND id < ?6))
         ORDER BY created_at DESC, id DESC LIMIT ?7"
    ))?;
    let rows = st.query_map(params![ws, f.status, f.channel, f.conversation_id, bt, bi, (f.limit + 1) as i64], row)?;
    Ok((rows.collect::<rusqlite::Result<_>>()?, total))
}

/// Deliveries by status across workspaces (the benchmark and the health view).
pub fn count_by_status(c: &Conn) -> Result<Vec<(String, i64)>> {
    let mut st = c.prepare("SELECT status, count(*) FROM deliveries GROUP BY status ORDER BY status")?;
    let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}
