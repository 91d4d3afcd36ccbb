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

// ---- usage limits, plans and credits ----

use super::limits::profiles::{self as plans, AccountUsage as LimitedUsage, MeterRead};
use super::limits::{Plan, Profile};

/// A usage profile.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileJson {
    pub key: String,
    pub display_name: String,
    pub monthly_answer_limit: Option<i64>,
    pub stored_document_limit: Option<i64>,
    pub stored_indexed_byte_limit: Option<i64>,
    pub monthly_indexed_byte_limit: Option<i64>,
    pub monthly_conversation_limit: Option<i64>,
    pub replies_per_conversation: i64,
    pub created_at: String,
    pub updated_at: String,
}

impl From<Profile> for ProfileJson {
    fn from(p: Profile) -> Self {
        ProfileJson {
            key: p.key,
            display_name: p.display_name,
            monthly_answer_limit: p.monthly_answer_limit,
            stored_document_limit: p.stored_document_limit,
            stored_indexed_byte_limit: p.stored_indexed_byte_limit,
            monthly_indexed_byte_limit: p.monthly_indexed_byte_limit,
            monthly_conversation_limit: p.monthly_conversation_limit,
            replies_per_conversation: p.replies_per_conversation,
            created_at: p.created_at,
            updated_at: p.updated_at,
        }
    }
}

fn number(v: f64) -> serde_json::Value {
    if v.fract() == 0.0 { serde_json::json!(v as i64) } else { serde_json::json!(v) }
}

fn meter(m: &MeterRead) -> serde_json::Value {
    serde_json::json!({"used": number(m.used), "limit": m.limit})
}

fn period_meter(m: &MeterRead, u: &LimitedUsage) -> serde_json::Value {
    serde_json::json!({"used": number(m.used), "limit": m.limit, "periodStart": u.period.start, "resetAt": u.period.reset_at})
}

/// The account usage response (spec: Account usage response), with the month's answers by day and
/// by agent for the Usage page.
pub fn account_usage(u: &LimitedUsage) -> serde_json::Value {
    let conversations = u.monthly_conversations.as_ref().map(|c| {
        let kinds: serde_json::Map<String, serde_json::Value> =
            c.by_kind.iter().map(|(k, v)| (k.to_string(), number(*v))).collect();
        let (m, credits) = (&c.meter, c.credits);
        serde_json::json!({"used": number(m.used), "limit": m.limit, "credits": credits, "periodStart": u.period.start,
            "resetAt": u.period.reset_at, "byKind": kinds})
    });
    let by_agent: Vec<serde_json::Value> = u
        .by_agent
        .iter()
        .map(|(ws, agent, answers, input, output)| {
            serde_json::json!({"workspaceId": ws, "agentId": agent, "answers": answers, "inputTokens": input, "outputTokens": output})
        })
        .collect();
    let daily: Vec<serde_json::Value> =
        u.answers_by_day.iter().map(|(d, n)| serde_json::json!({"day": d, "answers": n})).collect();
    serde_json::json!({
        "accountId": u.account_id,
        "profile": u.profile.clone().map(ProfileJson::from),
        "period": u.period.key,
        "storedIndexedBytes": meter(&u.stored_indexed_bytes),
        "monthlyIndexedBytes": period_meter(&u.monthly_indexed_bytes, u),
        "monthlyAnswers": period_meter(&u.monthly_answers, u),
        "storedDocuments": meter(&u.stored_documents),
        "monthlyConversations": conversations,
        "answersByDay": daily,
        "byAgent": by_agent,
    })
}

/// The plan catalog (`GET /api/v1/plans`, reference §2).
pub fn catalog() -> serde_json::Value {
    let plan = |p: &Plan| {
        serde_json::json!({
            "id": p.id, "name": p.name, "priceCents": p.price_cents, "annualPriceCents": p.annual_price_cents,
            "interval": "month", "monthlyConversations": p.monthly_conversations, "storedBytes": p.stored_bytes,
            "monthlyIndexedBytes": p.monthly_indexed_bytes, "documents": p.documents, "models": p.models,
            "support": p.support, "stripe": null,
        })
    };
    serde_json::json!({
        "currency": "EUR",
        "plans": plans::catalog().iter().map(plan).collect::<Vec<_>>(),
        "defaultPlanId": plans::DEFAULT_PLAN,
        "selfServeCeilingPlanId": plans::SELF_SERVE_CEILING,
        "repliesPerConversation": plans::REPLIES_PER_CONVERSATION,
        "countsAs": {"conversation": 1, "copilot": 1, "test_run": 0.5, "pulse_report": 10, "other": 0},
        "topUp": {"conversations": 300, "priceCents": 5000, "stripeLookupKey": "topup_300"},
        "managedService": {"priceCents": 9900, "interval": "month", "stripeLookupKey": "managed_month"},
    })
}
