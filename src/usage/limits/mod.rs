//! Usage limits: the profile an account is held to, and enforcement before the work.
//!
//! An answer takes a *reservation* before any model call ([`reserve_answer`]): under the
//! process's [`Ledger`] lock, the meter's settled value plus every live reservation plus this one
//! is checked against the limit and the amount held, so concurrent answers cannot pass the cap
//! together — and no write transaction is spent on it (the server holds the data-directory lock:
//! no other process reserves). The meters move in the transaction that writes the reply
//! ([`Hold::settle`]); the hold is given back once that transaction committed ([`Hold::committed`])
//! or when the work fails before commit ([`Hold`]'s drop). A process that dies in between holds
//! nothing after its restart: the ledger died with it, and its work never committed.
//!
//! Documents need no reservation: a create or import checks the byte and document meters
//! inside the very transaction that inserts the document ([`check_document`]), counting documents
//! still queued or processing as pending, so the check and the row that consumes it commit
//! together.
//!
//! An account with no profile assigned (every account of a self-hosted server until an operator
//! assigns one) is unlimited; its usage is still metered. Months are period keys (`YYYY-MM`,
//! UTC): nothing resets at a month's end.

mod ledger;
pub mod profiles;
mod store;

use chrono::{DateTime, Datelike, Utc};
use serde_json::json;

use super::{MONTHLY_ANSWERS, MONTHLY_INDEXED_BYTES, STORED_INDEXED_BYTES};
use crate::app::App;
use crate::clock::rfc3339;
use crate::error::{Error, ErrorCode, Result};
use crate::storage::{Conn, Db, Later, Tx};

pub use ledger::Ledger;
pub use profiles::{Plan, catalog};

/// The monthly conversation meter, in half conversations (a test run weighs 0.5).
pub const MONTHLY_CONVERSATION_HALVES: &str = "monthly_conversation_halves";
/// The job that sends an 80 % or 100 % usage notice.
pub const NOTICE_JOB: &str = "usage.notify";

/// One agent's answers in a period: workspace, agent, answers, input and output tokens.
pub type AgentAnswers = (String, String, i64, i64, i64);

/// A usage profile (spec: Usage profile). `None` limits are unlimited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
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

impl Profile {
    /// Metered in conversations (rule 1): the answer limit is then not enforced.
    pub fn conversation_metered(&self) -> bool {
        self.monthly_conversation_limit.is_some()
    }
}

/// The meters a limit is enforced on (`details.resource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    StoredIndexedBytes,
    MonthlyIndexedBytes,
    StoredDocuments,
    MonthlyAnswers,
    MonthlyConversations,
}

impl Resource {
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::StoredIndexedBytes => "stored_indexed_bytes",
            Resource::MonthlyIndexedBytes => "monthly_indexed_bytes",
            Resource::StoredDocuments => "stored_documents",
            Resource::MonthlyAnswers => "monthly_answers",
            Resource::MonthlyConversations => "monthly_conversations",
        }
    }
}

/// A calendar month (UTC) by its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Period {
    /// `YYYY-MM`.
    pub key: String,
    /// `YYYY-MM-DD`.
    pub start: String,
    /// The first instant of the next month (RFC 3339).
    pub reset_at: String,
}

impl Period {
    pub fn of(now: DateTime<Utc>) -> Period {
        Period::parse(&format!("{:04}-{:02}", now.year(), now.month())).unwrap_or_else(|_| Period {
            key: String::new(),
            start: String::new(),
            reset_at: String::new(),
        })
    }

    /// A `YYYY-MM` key (400 on anything else).
    pub fn parse(key: &str) -> Result<Period> {
        let bad = || Error::invalid_field("period", "period must be YYYY-MM");
        let (y, m) = key.split_once('-').ok_or_else(bad)?;
        if y.len() != 4 || m.len() != 2 {
            return Err(bad());
        }
        let (y, m): (i32, u32) = (y.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
        let start = chrono::NaiveDate::from_ymd_opt(y, m, 1).ok_or_else(bad)?;
        let next = start.checked_add_months(chrono::Months::new(1)).ok_or_else(bad)?;
        Ok(Period { key: key.to_string(), start: start.to_string(), reset_at: format!("{next}T00:00:00.000Z") })
    }
}

/// The 429 of a cap (spec: Usage limits rule 4).
fn exceeded(r: Resource, limit: serde_json::Value, used: serde_json::Value, period: Option<&Period>) -> Error {
    let mut details = json!({"resource": r.as_str(), "limit": limit, "used": used});
    if let Some(p) = period {
        details["periodStart"] = json!(p.start);
        details["resetAt"] = json!(p.reset_at);
    } else {
        details["resetAt"] = serde_json::Value::Null;
    }
    Error::new(ErrorCode::UsageLimitExceeded, format!("the account has reached its {} limit", r.as_str()))
        .with_details(details)
}

/// The account of a workspace: its organization, profile and credits.
pub struct Account {
    pub organization_id: String,
    pub profile: Option<Profile>,
    pub credits: i64,
}

pub fn account_of_workspace(c: &Conn, ws: &str) -> Result<Account> {
    Ok(answer_account(c, ws, None)?.0)
}

/// [`account_of_workspace`], read with the transaction's next statement ([`Tx::query_later`]): a
/// document write asks for it before its first read, which carries it (404 when the workspace
/// does not exist).
pub fn account_later(tx: &Tx, ws: &str) -> Result<Later<Account>> {
    let later = store::workspace_account_later(tx, ws)?;
    Ok(later.and_then(|found| found.ok_or_else(|| Error::not_found("workspace"))))
}

/// The account of a workspace and the agent replies already in `conversation`.
fn answer_account(c: &Conn, ws: &str, conversation: Option<&str>) -> Result<(Account, i64)> {
    store::workspace_account(c, ws, conversation)?.ok_or_else(|| Error::not_found("workspace"))
}

pub fn account(c: &Conn, org: &str) -> Result<Account> {
    let (profile, credits) = store::account(c, org)?;
    Ok(Account { organization_id: org.to_string(), profile, credits })
}

/// Deletes the reservation rows an older version left (reservations are held in memory now);
/// returns how many.
pub fn sweep(db: &Db) -> Result<usize> {
    db.write(store::delete_all_reservations)
}

/// Capacity an account's answers in flight hold now (for tests and diagnostics).
pub fn reservations_held(app: &App, org: &str) -> i64 {
    app.usage_ledger.held(org)
}

/// What an answer counts as (spec: Usage limits rule 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerKind {
    /// A reply in a conversation: a block of `repliesPerConversation` replies counts one.
    Conversation,
    /// A test run (test chat, test execution, replay, eval run): half a conversation per block of
    /// `repliesPerConversation` replies in its test conversation (an eval run: one reply).
    TestRun,
    /// An answer outside any conversation (the retrieval-only answer): one conversation.
    Standalone,
}

impl AnswerKind {
    /// The `byKind` key.
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerKind::Conversation | AnswerKind::Standalone => "conversation",
            AnswerKind::TestRun => "test_run",
        }
    }
}

/// The half conversations an answer adds, given the agent replies its conversation had before it
/// (read when the answer is reserved: by the time it settles, its own reply is in the conversation).
fn halves(kind: AnswerKind, conversation: Option<&str>, replies_before: i64, per_conversation: i64) -> i64 {
    match (kind, conversation) {
        (AnswerKind::TestRun, None) => 1,
        (AnswerKind::TestRun | AnswerKind::Conversation, Some(_)) => {
            let unit = if kind == AnswerKind::TestRun { 1 } else { 2 };
            if replies_before % per_conversation.max(1) == 0 { unit } else { 0 }
        }
        (AnswerKind::Conversation | AnswerKind::Standalone, _) => 2,
    }
}

/// An answer's claim on its account's meters, from before its model call to its commit.
pub struct Hold<'a> {
    /// `None`: an unmetered hold (its caller meters the work as a whole).
    ledger: Option<&'a Ledger>,
    org: String,
    workspace: String,
    agent: String,
    conversation: Option<String>,
    kind: AnswerKind,
    period: Period,
    /// The half conversations the answer counts.
    halves: i64,
    /// What the ledger holds (meter, amount); `None`: no limit applied.
    reservation: Option<(&'static str, i64)>,
    /// The limits to notify about (meter, cap in its unit).
    caps: Vec<(&'static str, i64)>,
    done: bool,
}

/// What an answer is, for [`reserve_answer`].
pub struct AnswerWork<'a> {
    pub workspace: &'a str,
    pub agent: &'a str,
    pub conversation: Option<&'a str>,
    pub kind: AnswerKind,
}

/// Reserves an answer's usage before any model call: 429 `usage_limit_exceeded` when the account's
/// answer or conversation limit has no room left.
pub fn reserve_answer<'a>(app: &'a App, w: &AnswerWork) -> Result<Hold<'a>> {
    let period = Period::of(app.clock.now());
    let (acct, replies_before) = app.db.read(|c| answer_account(c, w.workspace, w.conversation))?;
    let per_conversation = acct.profile.as_ref().map(|p| p.replies_per_conversation).unwrap_or(10);
    let mut hold = Hold {
        ledger: Some(&app.usage_ledger),
        org: acct.organization_id.clone(),
        workspace: w.workspace.to_string(),
        agent: w.agent.to_string(),
        conversation: w.conversation.map(str::to_string),
        kind: w.kind,
        period,
        halves: halves(w.kind, w.conversation, replies_before, per_conversation),
        reservation: None,
        caps: vec![],
        done: false,
    };
    let Some(profile) = acct.profile else { return Ok(hold) };
    let (meter, cap, resource) = match (profile.monthly_conversation_limit, profile.monthly_answer_limit) {
        (Some(l), _) => (MONTHLY_CONVERSATION_HALVES, (l + acct.credits) * 2, Resource::MonthlyConversations),
        (None, Some(l)) => (MONTHLY_ANSWERS, l, Resource::MonthlyAnswers),
        (None, None) => return Ok(hold),
    };
    hold.caps.push((meter, cap));
    let amount = if meter == MONTHLY_ANSWERS { 1 } else { hold.halves };
    if amount == 0 {
        hold.reservation = Some((meter, 0));
        return Ok(hold);
    }
    let key = (hold.org.as_str(), meter, hold.period.key.as_str());
    let held = app.usage_ledger.reserve(key, |held| {
        let used = app.db.read(|c| super::meter(c, key.0, meter, key.2))? + held;
        if used + amount <= cap {
            return Ok(amount);
        }
        let (limit, used) = if meter == MONTHLY_ANSWERS {
            (json!(cap), json!(used))
        } else {
            (json!(profile.monthly_conversation_limit), json!(used as f64 / 2.0))
        };
        let e = exceeded(resource, limit, used, Some(&hold.period));
        Err(match (meter != MONTHLY_ANSWERS, e.details.clone()) {
            (true, Some(mut d)) => {
                d["credits"] = json!(acct.credits);
                e.with_details(d)
            }
            _ => e,
        })
    })?;
    hold.reservation = Some((meter, held));
    Ok(hold)
}

impl Hold<'_> {
    /// A hold that meters nothing (work metered by its caller: an eval run's turn).
    pub fn unmetered() -> Hold<'static> {
        Hold {
            ledger: None,
            org: String::new(),
            workspace: String::new(),
            agent: String::new(),
            conversation: None,
            kind: AnswerKind::TestRun,
            period: Period { key: String::new(), start: String::new(), reset_at: String::new() },
            halves: 0,
            reservation: None,
            caps: vec![],
            done: true,
        }
    }

    /// Settles the answer inside the transaction that writes it: the reservation goes, the
    /// meters move, and a notice is queued when a limit's 80 % or 100 % is crossed. Call
    /// [`Hold::committed`] once that transaction has committed.
    pub fn settle(&self, app: &App, tx: &Tx, tokens: crate::models::chat::Usage) -> Result<()> {
        if self.ledger.is_none() {
            return Ok(());
        }
        let halves = self.halves;
        let (org, month) = (&self.org, &self.period.key);
        super::add_meter(tx, org, MONTHLY_ANSWERS, month, 1)?;
        super::add_meter(tx, org, MONTHLY_CONVERSATION_HALVES, month, halves)?;
        super::add_meter(tx, org, &format!("{MONTHLY_CONVERSATION_HALVES}_{}", self.kind.as_str()), month, halves)?;
        let now = app.clock.now();
        let tokens = (tokens.prompt_tokens as i64, tokens.completion_tokens as i64);
        store::add_answer_day(tx, org, &self.workspace, &self.agent, &now.format("%Y-%m-%d").to_string(), tokens)?;
        for (meter, cap) in &self.caps {
            let used = super::meter(tx, org, meter, month)?;
            let delta = if *meter == MONTHLY_ANSWERS { 1 } else { halves };
            let resource =
                if *meter == MONTHLY_ANSWERS { Resource::MonthlyAnswers } else { Resource::MonthlyConversations };
            let crossing = Crossing { meter, resource, before: used - delta, after: used, cap: *cap };
            notify_if_crossed(app, tx, &self.notice_context(), &crossing)?;
        }
        Ok(())
    }

    fn notice_context(&self) -> NoticeContext<'_> {
        NoticeContext {
            org: &self.org,
            workspace: &self.workspace,
            agent: Some(&self.agent),
            conversation: self.conversation.as_deref(),
            kind: Some(self.kind.as_str()),
            period: &self.period,
        }
    }

    /// The settling transaction committed (or the work is abandoned): the hold is given back.
    pub fn committed(&mut self) {
        self.release();
    }

    fn release(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        if let (Some((meter, amount)), Some(ledger)) = (self.reservation, self.ledger) {
            ledger.release((&self.org, meter, &self.period.key), amount);
        }
    }
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

/// The thresholds of a notice, in percent.
const THRESHOLDS: [i64; 2] = [80, 100];

/// Who and what a notice is about.
struct NoticeContext<'a> {
    org: &'a str,
    workspace: &'a str,
    agent: Option<&'a str>,
    conversation: Option<&'a str>,
    /// The answer's kind (`byKind` key); `None` for documents.
    kind: Option<&'static str>,
    /// The month the notice counts in (stored meters: the month their threshold was crossed).
    period: &'a Period,
}

/// A meter moving from `before` to `after` against `cap` (all in the meter's unit).
struct Crossing<'a> {
    meter: &'a str,
    resource: Resource,
    before: i64,
    after: i64,
    cap: i64,
}

/// Queues one `usage.notify` job per threshold the meter crossed, once per account, meter, period
/// and threshold.
fn notify_if_crossed(app: &App, tx: &Tx, h: &NoticeContext, c: &Crossing) -> Result<()> {
    for t in THRESHOLDS {
        let line = c.cap * t;
        if c.cap <= 0 || !(c.before * 100 < line && c.after * 100 >= line) {
            continue;
        }
        let now = rfc3339(app.clock.now());
        if !store::insert_notice(tx, h.org, c.meter, &h.period.key, t, &now)? {
            continue;
        }
        let (used, limit) = if c.meter == MONTHLY_CONVERSATION_HALVES {
            (json!(c.after as f64 / 2.0), json!(c.cap / 2))
        } else {
            (json!(c.after), json!(c.cap))
        };
        let monthly = !matches!(c.resource, Resource::StoredIndexedBytes | Resource::StoredDocuments);
        let payload = json!({
            "event": "usage.threshold", "accountId": h.org, "workspaceId": h.workspace, "agentId": h.agent,
            "conversationId": h.conversation, "resource": c.resource.as_str(), "threshold": t, "used": used,
            "limit": limit, "kind": h.kind, "periodStart": h.period.start,
            "resetAt": if monthly { json!(h.period.reset_at) } else { serde_json::Value::Null },
        });
        let job = crate::jobs::NewJob::new(NOTICE_JOB, payload)
            .workspace(h.workspace)
            .dedupe(format!("usage:{}:{}:{}:{t}", h.org, c.meter, h.period.key));
        crate::jobs::enqueue_tx(tx, app.clock.now_ms(), app.jobs.default_max_attempts(), &job)?;
    }
    Ok(())
}

/// A document write about to commit: the bytes it adds (stored, and to be indexed this month) and
/// whether it is a new document.
pub struct DocumentWork<'a> {
    pub workspace: &'a str,
    /// The workspace's account, when the caller read it already ([`account_later`]).
    pub account: Option<&'a Account>,
    /// Bytes the stored-bytes meter grows by (a new document's size, a new revision's growth;
    /// zero for a shrinking page, which is accepted even at the cap).
    pub stored_delta: i64,
    /// Bytes that will be embedded this month (zero for unchanged content).
    pub indexed_bytes: i64,
    pub new_document: bool,
}

/// Checks a document write against the account's byte and document limits, inside the
/// transaction that writes the document (so the check and its consumption commit together):
/// 429 `usage_limit_exceeded` when it would pass one.
pub fn check_document(app: &App, tx: &Tx, w: &DocumentWork) -> Result<()> {
    let read;
    let acct = match w.account {
        Some(a) => a,
        None => {
            read = account_of_workspace(tx, w.workspace)?;
            &read
        }
    };
    let Some(p) = &acct.profile else { return Ok(()) };
    if p.stored_document_limit.is_none()
        && p.stored_indexed_byte_limit.is_none()
        && p.monthly_indexed_byte_limit.is_none()
    {
        return Ok(());
    }
    let org = &acct.organization_id;
    let period = Period::of(app.clock.now());
    let (docs, pending_growth, pending_bytes) = store::document_totals(tx, org)?;
    let mut crossings = Vec::new();
    if let Some(l) = p.stored_document_limit
        && w.new_document
    {
        if docs + 1 > l {
            return Err(exceeded(Resource::StoredDocuments, json!(l), json!(docs), None));
        }
        crossings.push(Crossing {
            meter: "stored_documents",
            resource: Resource::StoredDocuments,
            before: docs,
            after: docs + 1,
            cap: l,
        });
    }
    if let Some(l) = p.stored_indexed_byte_limit
        && w.stored_delta > 0
    {
        let used = super::meter(tx, org, STORED_INDEXED_BYTES, "")? + pending_growth;
        if used + w.stored_delta > l {
            return Err(exceeded(Resource::StoredIndexedBytes, json!(l), json!(used), None));
        }
        let after = used + w.stored_delta;
        crossings.push(Crossing {
            meter: STORED_INDEXED_BYTES,
            resource: Resource::StoredIndexedBytes,
            before: used,
            after,
            cap: l,
        });
    }
    if let Some(l) = p.monthly_indexed_byte_limit
        && w.indexed_bytes > 0
    {
        let used = super::meter(tx, org, MONTHLY_INDEXED_BYTES, &period.key)? + pending_bytes;
        if used + w.indexed_bytes > l {
            return Err(exceeded(Resource::MonthlyIndexedBytes, json!(l), json!(used), Some(&period)));
        }
        let after = used + w.indexed_bytes;
        crossings.push(Crossing {
            meter: MONTHLY_INDEXED_BYTES,
            resource: Resource::MonthlyIndexedBytes,
            before: used,
            after,
            cap: l,
        });
    }
    // the write is accepted: what it takes counts now, so its 80 % and 100 % notices go with it
    let ctx =
        NoticeContext { org, workspace: w.workspace, agent: None, conversation: None, kind: None, period: &period };
    for c in &crossings {
        notify_if_crossed(app, tx, &ctx, c)?;
    }
    Ok(())
}
