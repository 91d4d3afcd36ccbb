//! The wire shapes of usage (owned by the HTTP edge; `mod.rs` knows nothing of them).

use serde::Serialize;

use super::{AccountUsage, EmbeddingTotals, Meter, PeriodMeter, UsageDay, WorkspaceUsage};

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MeterJson {
    pub used: i64,
    pub limit: Option<i64>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PeriodMeterJson {
    pub used: i64,
    pub limit: Option<i64>,
    pub period_start: String,
    pub reset_at: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EmbeddingTotalsJson {
    pub events: i64,
    pub vectors: i64,
    pub tokens: i64,
    pub input_bytes: i64,
}

/// `GET /usage/account`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AccountUsageJson {
    pub account_id: String,
    pub stored_indexed_bytes: MeterJson,
    pub monthly_indexed_bytes: PeriodMeterJson,
    pub stored_documents: MeterJson,
    pub embeddings_this_month: EmbeddingTotalsJson,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageDayJson {
    pub day: String,
    pub embedding_calls: i64,
    pub vectors: i64,
    pub indexed_bytes: i64,
}

/// `GET /usage` (the request's workspace).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceUsageJson {
    pub account_id: String,
    pub workspace_id: String,
    pub stored_indexed_bytes: MeterJson,
    pub monthly_indexed_bytes: PeriodMeterJson,
    pub stored_documents: MeterJson,
    pub embeddings_this_month: EmbeddingTotalsJson,
    pub daily: Vec<UsageDayJson>,
}

impl From<Meter> for MeterJson {
    fn from(m: Meter) -> Self {
        MeterJson { used: m.used, limit: m.limit }
    }
}

impl From<PeriodMeter> for PeriodMeterJson {
    fn from(m: PeriodMeter) -> Self {
        PeriodMeterJson { used: m.used, limit: m.limit, period_start: m.period_start, reset_at: m.reset_at }
    }
}

impl From<EmbeddingTotals> for EmbeddingTotalsJson {
    fn from(t: EmbeddingTotals) -> Self {
        EmbeddingTotalsJson { events: t.events, vectors: t.vectors, tokens: t.tokens, input_bytes: t.input_bytes }
    }
}

impl From<UsageDay> for UsageDayJson {
    fn from(d: UsageDay) -> Self {
        UsageDayJson {
            day: d.day,
            embedding_calls: d.embedding_calls,
            vectors: d.vectors,
            indexed_bytes: d.indexed_bytes,
        }
    }
}

impl From<AccountUsage> for AccountUsageJson {
    fn from(u: AccountUsage) -> Self {
        AccountUsageJson {
            account_id: u.account_id,
            stored_indexed_bytes: u.stored_indexed_bytes.into(),
            monthly_indexed_bytes: u.monthly_indexed_bytes.into(),
            stored_documents: u.stored_documents.into(),
            embeddings_this_month: u.embeddings_this_month.into(),
        }
    }
}

impl From<WorkspaceUsage> for WorkspaceUsageJson {
    fn from(u: WorkspaceUsage) -> Self {
        WorkspaceUsageJson {
            account_id: u.account_id,
            workspace_id: u.workspace_id,
            stored_indexed_bytes: u.stored_indexed_bytes.into(),
            monthly_indexed_bytes: u.monthly_indexed_bytes.into(),
            stored_documents: u.stored_documents.into(),
            embeddings_this_month: u.embeddings_this_month.into(),
            daily: u.daily.into_iter().map(UsageDayJson::from).collect(),
        }
    }
}
