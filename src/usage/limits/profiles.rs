//! Plans and profiles: the plan catalog, the seeded plan profiles, profile edits and account
//! assignment under the admin token, credits, the account usage read, and the organization
//! creation cap.

use serde_json::json;

use super::{Account, MONTHLY_CONVERSATION_HALVES, Period, Profile, store};
use crate::app::App;
use crate::clock::rfc3339;
use crate::error::{Error, ErrorCode, Result};
use crate::storage::{Conn, Db};
use crate::usage::{MONTHLY_ANSWERS, MONTHLY_INDEXED_BYTES, STORED_INDEXED_BYTES};

/// One plan of the catalog (reference §2).
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub id: &'static str,
    pub name: &'static str,
    pub price_cents: i64,
    pub annual_price_cents: Option<i64>,
    pub monthly_conversations: i64,
    pub stored_bytes: i64,
    pub monthly_indexed_bytes: i64,
    pub documents: i64,
    pub models: &'static str,
    pub support: &'static str,
}

/// The catalog, cheapest first.
pub fn catalog() -> &'static [Plan] {
    const MIB: i64 = 1024 * 1024;
    &[
        Plan {
            id: "comet",
            name: "Comet",
            price_cents: 0,
            annual_price_cents: None,
            monthly_conversations: 50,
            stored_bytes: 10 * MIB,
            monthly_indexed_bytes: 20 * MIB,
            documents: 2_000,
            models: "managed",
            support: "community",
        },
        Plan {
            id: "satellite",
            name: "Satellite",
            price_cents: 14_900,
            annual_price_cents: Some(149_000),
            monthly_conversations: 1_000,
            stored_bytes: 20 * MIB,
            monthly_indexed_bytes: 40 * MIB,
            documents: 10_000,
            models: "managed",
            support: "email",
        },
        Plan {
            id: "planet",
            name: "Planet",
            price_cents: 49_900,
            annual_price_cents: Some(499_000),
            monthly_conversations: 5_000,
            stored_bytes: 100 * MIB,
            monthly_indexed_bytes: 200 * MIB,
            documents: 50_000,
            models: "byok",
            support: "priority",
        },
    ]
}

pub const DEFAULT_PLAN: &str = "comet";
pub const SELF_SERVE_CEILING: &str = "planet";
pub const REPLIES_PER_CONVERSATION: i64 = 10;

/// The profile seeded for a plan.
fn seeded(p: &Plan, now: &str) -> Profile {
    Profile {
        key: p.id.to_string(),
        display_name: p.name.to_string(),
        monthly_answer_limit: None,
        stored_document_limit: Some(p.documents),
        stored_indexed_byte_limit: Some(p.stored_bytes),
        monthly_indexed_byte_limit: Some(p.monthly_indexed_bytes),
        monthly_conversation_limit: Some(p.monthly_conversations),
        replies_per_conversation: REPLIES_PER_CONVERSATION,
        created_at: now.to_string(),
        updated_at: now.to_string(),
    }
}

/// Inserts the plan profiles that are missing (never overwriting an edited one); returns how many.
pub fn seed(db: &Db, now: &str) -> Result<usize> {
    db.write(|tx| {
        let mut n = 0;
        for p in catalog() {
            n += usize::from(store::insert_profile_if_missing(tx, &seeded(p, now))?);
        }
        Ok(n)
    })
}

/// A profile as a PUT gives it: the required fields, and the optional ones (`None`: keep).
#[derive(Debug, Clone, Default)]
pub struct ProfileInput {
    pub display_name: Option<String>,
    /// `Some(None)`: unlimited. The outer `None` means the field was missing (required ones: 400).
    pub monthly_answer_limit: Option<Option<i64>>,
    pub stored_document_limit: Option<Option<i64>>,
    pub stored_indexed_byte_limit: Option<Option<i64>>,
    pub monthly_indexed_byte_limit: Option<Option<i64>>,
    pub monthly_conversation_limit: Option<Option<i64>>,
    pub replies_per_conversation: Option<i64>,
}

/// A profile key: `^[a-z0-9][a-z0-9_-]{1,62}[a-z0-9]$`.
pub fn valid_key(k: &str) -> bool {
    let b = k.as_bytes();
    let inner = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    (3..=64).contains(&b.len())
        && inner(&b[0])
        && inner(&b[b.len() - 1])
        && b.iter().all(|c| inner(c) || *c == b'_' || *c == b'-')
}

fn limit(field: &str, v: Option<i64>) -> Result<Option<i64>> {
    match v {
        Some(n) if n < 0 => Err(Error::invalid_field(field, format!("{field} must be a whole number ≥ 0 or null"))),
        v => Ok(v),
    }
}

/// Creates or replaces a profile (`PUT /ee/usage-limits/profiles/{key}`).
pub fn put_profile(app: &App, key: &str, i: ProfileInput) -> Result<Profile> {
    if !valid_key(key) {
        return Err(Error::invalid_field("profileKey", "profile keys match ^[a-z0-9][a-z0-9_-]{1,62}[a-z0-9]$"));
    }
    let name = i.display_name.map(|s| s.trim().to_string()).unwrap_or_default();
    if name.is_empty() || name.chars().count() > 120 {
        return Err(Error::invalid_field("displayName", "displayName is required, 1 to 120 characters"));
    }
    let answers = i.monthly_answer_limit.ok_or_else(|| {
        Error::invalid_field("monthlyAnswerLimit", "monthlyAnswerLimit is required (null: unlimited)")
    })?;
    let docs = i.stored_document_limit.ok_or_else(|| {
        Error::invalid_field("storedDocumentLimit", "storedDocumentLimit is required (null: unlimited)")
    })?;
    if let Some(r) = i.replies_per_conversation
        && !(1..=1000).contains(&r)
    {
        return Err(Error::invalid_field("repliesPerConversation", "repliesPerConversation must be 1 to 1000"));
    }
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let old = store::profile(tx, key)?;
        let keep = |new: Option<Option<i64>>, old: Option<i64>| new.unwrap_or(old);
        let p = Profile {
            key: key.to_string(),
            display_name: name.clone(),
            monthly_answer_limit: limit("monthlyAnswerLimit", answers)?,
            stored_document_limit: limit("storedDocumentLimit", docs)?,
            stored_indexed_byte_limit: limit(
                "storedIndexedByteLimit",
                keep(i.stored_indexed_byte_limit, old.as_ref().and_then(|o| o.stored_indexed_byte_limit)),
            )?,
            monthly_indexed_byte_limit: limit(
                "monthlyIndexedByteLimit",
                keep(i.monthly_indexed_byte_limit, old.as_ref().and_then(|o| o.monthly_indexed_byte_limit)),
            )?,
            monthly_conversation_limit: limit(
                "monthlyConversationLimit",
                keep(i.monthly_conversation_limit, old.as_ref().and_then(|o| o.monthly_conversation_limit)),
            )?,
            replies_per_conversation: i
                .replies_per_conversation
                .or(old.as_ref().map(|o| o.replies_per_conversation))
                .unwrap_or(REPLIES_PER_CONVERSATION),
            created_at: old.as_ref().map(|o| o.created_at.clone()).unwrap_or_else(|| now.clone()),
            updated_at: now.clone(),
        };
        store::upsert_profile(tx, &p)?;
        Ok(p)
    })
}

pub fn profiles(app: &App) -> Result<Vec<Profile>> {
    app.db.read(store::profiles)
}

fn require_org(c: &Conn, org: &str) -> Result<()> {
    if store::organization_exists(c, org)? { Ok(()) } else { Err(Error::not_found("account")) }
}

/// Assigns a profile to an account (`None`: unassign, so unlimited).
pub fn assign(app: &App, org: &str, key: Option<&str>) -> Result<()> {
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        require_org(tx, org)?;
        if let Some(k) = key
            && store::profile(tx, k)?.is_none()
        {
            return Err(Error::invalid_field("profileKey", "no usage profile has this key"));
        }
        store::set_account_profile(tx, org, key, &now)
    })
}

/// Adds credits once per `reference`; returns whether this call applied them and the balance.
pub fn add_credits(app: &App, org: &str, conversations: i64, reference: &str) -> Result<(bool, i64)> {
    if !(1..=1_000_000).contains(&conversations) {
        return Err(Error::invalid_field("conversations", "conversations must be 1 to 1,000,000"));
    }
    let reference = reference.trim();
    if reference.is_empty() || reference.chars().count() > 200 {
        return Err(Error::invalid_field("reference", "reference is required, at most 200 characters"));
    }
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        require_org(tx, org)?;
        let (profile, _) = store::account(tx, org)?;
        if !profile.as_ref().is_some_and(Profile::conversation_metered) {
            return Err(Error::new(
                ErrorCode::Conflict,
                "credits apply only to accounts on a conversation-metered profile",
            ));
        }
        let applied = store::grant_credits(tx, org, reference, conversations, &now)?;
        Ok((applied, store::account(tx, org)?.1))
    })
}

/// A meter as read: used (a conversation meter may hold a half) and its limit.
#[derive(Debug, Clone, PartialEq)]
pub struct MeterRead {
    pub used: f64,
    pub limit: Option<i64>,
}

/// An account's usage over one month (spec: Account usage response).
#[derive(Debug, Clone)]
pub struct AccountUsage {
    pub account_id: String,
    pub profile: Option<Profile>,
    pub period: Period,
    pub stored_indexed_bytes: MeterRead,
    pub monthly_indexed_bytes: MeterRead,
    pub monthly_answers: MeterRead,
    pub stored_documents: MeterRead,
    /// On conversation-metered accounts: the meter, the credits and the half conversations by kind.
    pub monthly_conversations: Option<ConversationMeter>,
    /// Answers per day of the month, and per agent (workspace, agent, answers, input and output
    /// tokens).
    pub answers_by_day: Vec<(String, i64)>,
    pub by_agent: Vec<super::AgentAnswers>,
}

/// The conversation meter of a conversation-metered account: used and limit, the credits on top,
/// and the half conversations by kind (as conversations).
#[derive(Debug, Clone)]
pub struct ConversationMeter {
    pub meter: MeterRead,
    pub credits: i64,
    pub by_kind: Vec<(&'static str, f64)>,
}

/// The usage of account `org` in `period`.
pub fn usage(app: &App, org: &str, period: &Period) -> Result<AccountUsage> {
    app.db.read(|c| {
        require_org(c, org)?;
        let Account { profile, credits, .. } = super::account(c, org)?;
        let m = |meter: &str, key: &str| crate::usage::meter(c, org, meter, key);
        let (docs, _, _) = store::document_totals(c, org)?;
        let p = profile.as_ref();
        let conversations = match p.and_then(|p| p.monthly_conversation_limit) {
            Some(l) => {
                let used = m(MONTHLY_CONVERSATION_HALVES, &period.key)? as f64 / 2.0;
                let mut by_kind = vec![];
                for k in ["conversation", "copilot", "test_run", "pulse_report"] {
                    by_kind.push((k, m(&format!("{MONTHLY_CONVERSATION_HALVES}_{k}"), &period.key)? as f64 / 2.0));
                }
                Some(ConversationMeter { meter: MeterRead { used, limit: Some(l) }, credits, by_kind })
            }
            None => None,
        };
        let answer_limit = p.filter(|p| !p.conversation_metered()).and_then(|p| p.monthly_answer_limit);
        Ok(AccountUsage {
            account_id: org.to_string(),
            profile: profile.clone(),
            period: period.clone(),
            stored_indexed_bytes: MeterRead {
                used: m(STORED_INDEXED_BYTES, "")? as f64,
                limit: p.and_then(|p| p.stored_indexed_byte_limit),
            },
            monthly_indexed_bytes: MeterRead {
                used: m(MONTHLY_INDEXED_BYTES, &period.key)? as f64,
                limit: p.and_then(|p| p.monthly_indexed_byte_limit),
            },
            monthly_answers: MeterRead { used: m(MONTHLY_ANSWERS, &period.key)? as f64, limit: answer_limit },
            stored_documents: MeterRead { used: docs as f64, limit: p.and_then(|p| p.stored_document_limit) },
            monthly_conversations: conversations,
            answers_by_day: store::answers_by_day(c, org, &period.key)?,
            by_agent: store::answers_by_agent(c, org, &period.key)?,
        })
    })
}

// ---- the organization creation cap (Usage limits rule 6) ----

/// A user's cap override: `None` none set, `Some(None)` unlimited, `Some(Some(n))`.
pub fn org_override(app: &App, user: &str) -> Result<Option<Option<i64>>> {
    app.db.read(|c| store::org_override(c, user))
}

pub fn set_org_override(app: &App, user: &str, limit: Option<i64>) -> Result<()> {
    if limit.is_some_and(|l| l < 0) {
        return Err(Error::invalid_field("monthlyLimit", "monthlyLimit must be a whole number ≥ 0 or null"));
    }
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| store::set_org_override(tx, user, limit, &now))
}

pub fn delete_org_override(app: &App, user: &str) -> Result<bool> {
    app.db.write(|tx| store::delete_org_override(tx, user))
}

/// Checks the creation cap for `user` and records the creation of `org`, inside the
/// transaction that creates the organization: 429 `rate_limit_exceeded` over the cap.
pub fn take_org_creation(app: &App, tx: &crate::storage::Tx, user: &str, org: &str) -> Result<()> {
    let now = app.clock.now();
    let period = Period::of(now);
    let cap = match store::org_override(tx, user)? {
        Some(o) => o,
        None => Some(i64::from(app.config.usage.max_orgs_per_user_per_month)),
    };
    let used = store::org_creations_since(tx, user, &format!("{}T00:00:00", period.start))?;
    if let Some(l) = cap
        && used >= l
    {
        return Err(Error::new(
            ErrorCode::RateLimitExceeded,
            "you have created as many organizations as allowed this month",
        )
        .with_details(json!({"limit": l, "used": used, "periodStart": period.start, "resetAt": period.reset_at})));
    }
    store::record_org_creation(tx, user, org, &rfc3339(now))
}
