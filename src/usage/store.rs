//! SQL for usage events, daily rollups and meters (private to `usage`).

use rusqlite::{OptionalExtension, params};

use super::{EmbeddingTotals, EmbeddingUsage, UsageDay, embedding_key};
use crate::error::Result;
use crate::storage::{Conn, Tx};

/// Inserts the event unless its idempotency key is already there; returns whether it was new.
pub(super) fn insert_embedding_event(tx: &Tx, u: &EmbeddingUsage, now: &str) -> Result<bool> {
    Ok(tx.execute(
        "INSERT INTO usage_events (idempotency_key, organization_id, workspace_id, kind, document_id, revision, provider, model,
            input_bytes, vector_count, tokens, created_at)
         VALUES (?1, ?2, ?3, 'embedding', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
         ON CONFLICT (idempotency_key) DO NOTHING",
        params![embedding_key(u), u.organization_id, u.workspace_id, u.document_id, u.revision, u.provider, u.model, u.input_bytes, u.vector_count, u.tokens, now],
    )? == 1)
}

/// Adds the event to its organization's rollup of `day`.
pub(super) fn add_to_daily(tx: &Tx, u: &EmbeddingUsage, day: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO usage_daily (organization_id, day, kind, provider, model, events, input_bytes, vector_count, tokens)
         VALUES (?1, ?2, 'embedding', ?3, ?4, 1, ?5, ?6, ?7)
         ON CONFLICT (organization_id, day, kind, provider, model) DO UPDATE SET
           events = usage_daily.events + 1, input_bytes = usage_daily.input_bytes + excluded.input_bytes,
           vector_count = usage_daily.vector_count + excluded.vector_count, tokens = usage_daily.tokens + excluded.tokens",
        params![u.organization_id, day, u.provider, u.model, u.input_bytes, u.vector_count, u.tokens],
    )?;
    Ok(())
}

/// Adds `delta` to a meter, never below zero.
pub(super) fn add_meter(tx: &Tx, org: &str, meter: &str, period: &str, delta: i64) -> Result<()> {
    tx.execute_deferred(
        "INSERT INTO usage_meters (organization_id, meter, period, value) VALUES (?1, ?2, ?3, max(?4, 0))
         ON CONFLICT (organization_id, meter, period) DO UPDATE SET value = max(usage_meters.value + ?4, 0)",
        params![org, meter, period, delta],
    )?;
    Ok(())
}

pub(super) fn meter(c: &Conn, org: &str, meter: &str, period: &str) -> Result<i64> {
    Ok(c.query_row(
        "SELECT value FROM usage_meters WHERE organization_id = ?1 AND meter = ?2 AND period = ?3",
        params![org, meter, period],
        |r| r.get(0),
    )
    .optional()?
    .unwrap_or(0))
}

/// The workspace's document count and stored indexed bytes.
pub(super) fn workspace_documents(c: &Conn, ws: &str) -> Result<(i64, i64)> {
    Ok(c.query_row(
        "SELECT count(*), coalesce(sum(metered_bytes), 0) FROM documents WHERE workspace_id = ?1",
        [ws],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?)
}

/// The workspace's embedding events since `since`.
pub(super) fn workspace_embeddings_since(c: &Conn, ws: &str, since: &str) -> Result<EmbeddingTotals> {
    Ok(c.query_row(
        "SELECT count(*), coalesce(sum(vector_count),0), coalesce(sum(tokens),0), coalesce(sum(input_bytes),0)
         FROM usage_events WHERE workspace_id = ?1 AND kind = 'embedding' AND created_at >= ?2",
        params![ws, since],
        |r| Ok(EmbeddingTotals { events: r.get(0)?, vectors: r.get(1)?, tokens: r.get(2)?, input_bytes: r.get(3)? }),
    )?)
}

/// The workspace's embedding events since `since`, one entry per day that has any.
pub(super) fn workspace_embeddings_by_day(c: &Conn, ws: &str, since: &str) -> Result<Vec<UsageDay>> {
    let mut st = c.prepare_cached(
        "SELECT substr(created_at, 1, 10) AS day, count(*), coalesce(sum(vector_count),0), coalesce(sum(input_bytes),0)
         FROM usage_events WHERE workspace_id = ?1 AND kind = 'embedding' AND created_at >= ?2 GROUP BY day",
    )?;
    let rows = st.query_map(params![ws, since], |r| {
        Ok(UsageDay { day: r.get(0)?, embedding_calls: r.get(1)?, vectors: r.get(2)?, indexed_bytes: r.get(3)? })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The number of documents across the organization's workspaces.
pub(super) fn organization_documents(c: &Conn, org: &str) -> Result<i64> {
    Ok(c.query_row(
        "SELECT count(*) FROM documents d JOIN workspaces w ON w.id = d.workspace_id WHERE w.organization_id = ?1",
        [org],
        |r| r.get(0),
    )?)
}

/// The organization's embedding totals of the month `period` (`YYYY-MM`), from the rollups.
pub(super) fn organization_embeddings_of_month(c: &Conn, org: &str, period: &str) -> Result<EmbeddingTotals> {
    Ok(c.query_row(
        "SELECT coalesce(sum(events),0), coalesce(sum(vector_count),0), coalesce(sum(tokens),0), coalesce(sum(input_bytes),0)
         FROM usage_daily WHERE organization_id = ?1 AND kind = 'embedding' AND substr(day, 1, 7) = ?2",
        params![org, period],
        |r| Ok(EmbeddingTotals { events: r.get(0)?, vectors: r.get(1)?, tokens: r.get(2)?, input_bytes: r.get(3)? }),
    )?)
}
