//! Usage: immutable usage events (one per embedding call of a document revision, with a
//! deterministic idempotency key so a retried job never counts twice), daily rollups, and the
//! meters the spec defines (stored indexed bytes; monthly indexed bytes; monthly answers and
//! conversations). Enforcement of limits, plans and credits is `limits`.

pub mod api;
pub mod config;
pub mod limits;
mod store;

use crate::error::Result;
use crate::storage::{Conn, Tx};

pub const STORED_INDEXED_BYTES: &str = "stored_indexed_bytes";
pub const MONTHLY_INDEXED_BYTES: &str = "monthly_indexed_bytes";
/// Answers this month (calendar month).
pub const MONTHLY_ANSWERS: &str = "monthly_answers";

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
    let inserted = store::insert_embedding_event(tx, u, now)?;
    if inserted {
        store::add_to_daily(tx, u, &now[..10])?;
        add_meter(tx, u.organization_id, MONTHLY_INDEXED_BYTES, &now[..7], u.input_bytes)?;
    }
    Ok(inserted)
}

/// Adds `delta` (may be negative) to a meter.
pub fn add_meter(tx: &Tx, org: &str, meter: &str, period: &str, delta: i64) -> Result<()> {
    if delta == 0 {
        return Ok(());
    }
    store::add_meter(tx, org, meter, period, delta)
}

pub fn meter(c: &Conn, org: &str, meter: &str, period: &str) -> Result<i64> {
    store::meter(c, org, meter, period)
}

#[derive(Debug, Clone)]
pub struct Meter {
    pub used: i64,
    pub limit: Option<i64>,
}

#[derive(Debug, Clone)]
pub struct PeriodMeter {
    pub used: i64,
    pub limit: Option<i64>,
    pub period_start: String,
    pub reset_at: String,
}

#[derive(Debug, Clone)]
pub struct EmbeddingTotals {
    pub events: i64,
    pub vectors: i64,
    pub tokens: i64,
    pub input_bytes: i64,
}

#[derive(Debug, Clone)]
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
#[derive(Debug, Clone)]
pub struct UsageDay {
    pub day: String,
    pub embedding_calls: i64,
    pub vectors: i64,
    pub indexed_bytes: i64,
}

/// The usage of one workspace: what its documents hold now and what it embedded this month.
#[derive(Debug, Clone)]
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
    c: &Conn,
    org: &str,
    ws: &str,
    now: chrono::DateTime<chrono::Utc>,
    days: u32,
) -> Result<WorkspaceUsage> {
    let (_, start, reset_at) = month_of(now);
    let (docs, stored) = store::workspace_documents(c, ws)?;
    let month = store::workspace_embeddings_since(c, ws, &format!("{start}T00:00:00"))?;
    let first = now.date_naive() - chrono::Days::new(u64::from(days.max(1)) - 1);
    let mut by_day: std::collections::HashMap<String, UsageDay> =
        store::workspace_embeddings_by_day(c, ws, &format!("{first}T00:00:00"))?
            .into_iter()
            .map(|d| (d.day.clone(), d))
            .collect();
    let daily = first
        .iter_days()
        .take_while(|d| *d <= now.date_naive())
        .map(|d| {
            let day = d.to_string();
            by_day.remove(&day).unwrap_or(UsageDay { day, embedding_calls: 0, vectors: 0, indexed_bytes: 0 })
        })
        .collect();
    Ok(WorkspaceUsage {
        account_id: org.to_string(),
        workspace_id: ws.to_string(),
        stored_indexed_bytes: Meter { used: stored, limit: None },
        monthly_indexed_bytes: PeriodMeter {
            used: month.input_bytes,
            limit: None,
            period_start: start.to_string(),
            reset_at,
        },
        stored_documents: Meter { used: docs, limit: None },
        embeddings_this_month: month,
        daily,
    })
}

/// The account's (organization's) usage for the month containing `now`, across its workspaces
/// (limits are not enforced in this edition; they report null).
pub fn account_usage(c: &Conn, org: &str, now: chrono::DateTime<chrono::Utc>) -> Result<AccountUsage> {
    let (period, start, reset_at) = month_of(now);
    let docs = store::organization_documents(c, org)?;
    let month = store::organization_embeddings_of_month(c, org, &period)?;
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
        embeddings_this_month: month,
    })
}
