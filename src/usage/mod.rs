//! Usage: immutable usage events (one per embedding call of a document revision, with a
//! deterministic idempotency key so a retried job never counts twice), daily rollups, and the
//! meters the spec defines (stored indexed bytes; monthly indexed bytes). Enforcement of limits
//! builds on these.

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use crate::error::Result;
use crate::storage::Tx;

pub const STORED_INDEXED_BYTES: &str = "stored_indexed_bytes";
pub const MONTHLY_INDEXED_BYTES: &str = "monthly_indexed_bytes";

/// One embedding call's usage.
pub struct EmbeddingUsage<'a> {
    pub organization_id: &'a str,
    pub workspace_id: &'a str,
    pub document_id: &'a str,
    pub revision: i64,
    pub provider: &'a str,
    pub model: &'a str,
    pub input_bytes: i64,
    pub vector_count: i64,
    pub tokens: i64,
}

/// The idempotency key of an embedding event: one per workspace, document, revision, provider and
/// model (spec, usage limits rule 7).
pub fn embedding_key(u: &EmbeddingUsage) -> String {
    format!("embed:{}:{}:{}:{}:{}", u.workspace_id, u.document_id, u.revision, u.provider, u.model)
}

/// Records the event once; the daily rollup and the monthly indexed-bytes meter move only when it
/// is new. Returns whether it was new.
pub fn record_embedding(tx: &Tx, u: &EmbeddingUsage, now: &str) -> Result<bool> {
    let inserted = tx.execute(
        "INSERT INTO usage_events (idempotency_key, organization_id, workspace_id, kind, document_id, revision, provider, model,
            input_bytes, vector_count, tokens, created_at)
         VALUES (?1, ?2, ?3, 'embedding', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
         ON CONFLICT (idempotency_key) DO NOTHING",
        params![embedding_key(u), u.organization_id, u.workspace_id, u.document_id, u.revision, u.provider, u.model, u.input_bytes, u.vector_count, u.tokens, now],
    )? == 1;
    if inserted {
        let day = &now[..10];
        tx.execute(
            "INSERT INTO usage_daily (organization_id, day, kind, provider, model, events, input_bytes, vector_count, tokens)
             VALUES (?1, ?2, 'embedding', ?3, ?4, 1, ?5, ?6, ?7)
             ON CONFLICT (organization_id, day, kind, provider, model) DO UPDATE SET
               events = events + 1, input_bytes = input_bytes + excluded.input_bytes,
               vector_count = vector_count + excluded.vector_count, tokens = tokens + excluded.tokens",
            params![u.organization_id, day, u.provider, u.model, u.input_bytes, u.vector_count, u.tokens],
        )?;
        add_meter(tx, u.organization_id, MONTHLY_INDEXED_BYTES, &now[..7], u.input_bytes)?;
    }
    Ok(inserted)
}

/// Adds `delta` (may be negative) to a meter.
pub fn add_meter(tx: &Tx, org: &str, meter: &str, period: &str, delta: i64) -> Result<()> {
    if delta == 0 {
        return Ok(());
    }
    tx.execute(
        "INSERT INTO usage_meters (organization_id, meter, period, value) VALUES (?1, ?2, ?3, max(?4, 0))
         ON CONFLICT (organization_id, meter, period) DO UPDATE SET value = max(value + ?4, 0)",
        params![org, meter, period, delta],
    )?;
    Ok(())
}

pub fn meter(c: &Connection, org: &str, meter: &str, period: &str) -> Result<i64> {
    Ok(c.query_row(
        "SELECT value FROM usage_meters WHERE organization_id = ?1 AND meter = ?2 AND period = ?3",
        params![org, meter, period],
        |r| r.get(0),
    )
    .optional()?
    .unwrap_or(0))
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Meter {
    pub used: i64,
    pub limit: Option<i64>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PeriodMeter {
    pub used: i64,
    pub limit: Option<i64>,
    pub period_start: String,
    pub reset_at: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EmbeddingTotals {
    pub events: i64,
    pub vectors: i64,
    pub tokens: i64,
    pub input_bytes: i64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AccountUsage {
    pub account_id: String,
    pub stored_indexed_bytes: Meter,
    pub monthly_indexed_bytes: PeriodMeter,
    pub stored_documents: Meter,
    pub embeddings_this_month: EmbeddingTotals,
}

/// A calendar month: its key (`YYYY-MM`), first day and the instant the next one starts.
fn month_of(now: chrono::DateTime<chrono::Utc>) -> (String, chrono::NaiveDate, String) {
    use chrono::Datelike;
    let start = chrono::NaiveDate::from_ymd_opt(now.year(), now.month(), 1).unwrap_or_default();
    let next = start.checked_add_months(chrono::Months::new(1)).unwrap_or(start);
    (now.format("%Y-%m").to_string(), start, format!("{next}T00:00:00.000Z"))
}

/// One day of a workspace's embedding usage.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageDay {
    pub day: String,
    pub embedding_calls: i64,
    pub vectors: i64,
    pub indexed_bytes: i64,
}

/// The usage of one workspace: what its documents hold now and what it embedded this month.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceUsage {
    /// The organization the workspace belongs to (the account of the account-level meters).
    pub account_id: String,
    pub workspace_id: String,
    pub stored_indexed_bytes: Meter,
    pub monthly_indexed_bytes: PeriodMeter,
    pub stored_documents: Meter,
    pub embeddings_this_month: EmbeddingTotals,
    /// The last `days` days, oldest first, every day present (zeros included).
    pub daily: Vec<UsageDay>,
}

/// The usage of workspace `ws` for the month containing `now`, with the last `days` days.
pub fn workspace_usage(
    c: &Connection,
    org: &str,
    ws: &str,
    now: chrono::DateTime<chrono::Utc>,
    days: u32,
) -> Result<WorkspaceUsage> {
    let (_, start, reset_at) = month_of(now);
    let month_start = format!("{start}T00:00:00");
    let (docs, stored): (i64, i64) = c.query_row(
        "SELECT count(*), coalesce(sum(metered_bytes), 0) FROM documents WHERE workspace_id = ?1",
        [ws],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let (events, vectors, tokens, bytes): (i64, i64, i64, i64) = c.query_row(
        "SELECT count(*), coalesce(sum(vector_count),0), coalesce(sum(tokens),0), coalesce(sum(input_bytes),0)
         FROM usage_events WHERE workspace_id = ?1 AND kind = 'embedding' AND created_at >= ?2",
        params![ws, month_start],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )?;
    let first = now.date_naive() - chrono::Days::new(u64::from(days.max(1)) - 1);
    let mut by_day: std::collections::HashMap<String, (i64, i64, i64)> = std::collections::HashMap::new();
    let mut st = c.prepare_cached(
        "SELECT substr(created_at, 1, 10) AS day, count(*), coalesce(sum(vector_count),0), coalesce(sum(input_bytes),0)
         FROM usage_events WHERE workspace_id = ?1 AND kind = 'embedding' AND created_at >= ?2 GROUP BY day",
    )?;
    let rows = st.query_map(params![ws, format!("{first}T00:00:00")], |r| {
        Ok((r.get::<_, String>(0)?, (r.get(1)?, r.get(2)?, r.get(3)?)))
    })?;
    for row in rows {
        let (day, v) = row?;
        by_day.insert(day, v);
    }
    let daily = first
        .iter_days()
        .take_while(|d| *d <= now.date_naive())
        .map(|d| {
            let key = d.to_string();
            let (calls, vectors, bytes) = by_day.get(&key).copied().unwrap_or_default();
            UsageDay { day: key, embedding_calls: calls, vectors, indexed_bytes: bytes }
        })
        .collect();
    Ok(WorkspaceUsage {
        account_id: org.to_string(),
        workspace_id: ws.to_string(),
        stored_indexed_bytes: Meter { used: stored, limit: None },
        monthly_indexed_bytes: PeriodMeter { used: bytes, limit: None, period_start: start.to_string(), reset_at },
        stored_documents: Meter { used: docs, limit: None },
        embeddings_this_month: EmbeddingTotals { events, vectors, tokens, input_bytes: bytes },
        daily,
    })
}

/// The account's (organization's) usage for the month containing `now`, across its workspaces
/// (limits are not enforced in this edition; they report null).
pub fn account_usage(c: &Connection, org: &str, now: chrono::DateTime<chrono::Utc>) -> Result<AccountUsage> {
    let (period, start, reset_at) = month_of(now);
    let docs: i64 = c.query_row(
        "SELECT count(*) FROM documents d JOIN workspaces w ON w.id = d.workspace_id WHERE w.organization_id = ?1",
        [org],
        |r| r.get(0),
    )?;
    let (events, vectors, tokens, bytes): (i64, i64, i64, i64) = c.query_row(
        "SELECT coalesce(sum(events),0), coalesce(sum(vector_count),0), coalesce(sum(tokens),0), coalesce(sum(input_bytes),0)
         FROM usage_daily WHERE organization_id = ?1 AND kind = 'embedding' AND substr(day, 1, 7) = ?2",
        params![org, period],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )?;
    Ok(AccountUsage {
        account_id: org.to_string(),
        stored_indexed_bytes: Meter { used: meter(c, org, STORED_INDEXED_BYTES, "")?, limit: None },
        monthly_indexed_bytes: PeriodMeter {
            used: meter(c, org, MONTHLY_INDEXED_BYTES, &period)?,
            limit: None,
            period_start: start.to_string(),
            reset_at,
        },
        stored_documents: Meter { used: docs, limit: None },
        embeddings_this_month: EmbeddingTotals { events, vectors, tokens, input_bytes: bytes },
    })
}
