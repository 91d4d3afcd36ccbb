//! Turn traces: what a turn did, stage by stage — decisions, candidate ids, counts and timings,
//! never message text, document text, prompts, secrets or sensitive values. Operators read them
//! by `traceId`; the quality report lists turns with their grounding diagnostics.

use std::time::Instant;

use serde::Serialize;
use serde_json::{Value, json};

use super::TraceJson;
use super::kinds::{Availability, Outcome, RouteKind, StageStatus, TraceStage};
use crate::app::App;
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::documents::{decode_cursor, encode_cursor};
use crate::error::{Error, Result};
use crate::storage::Tx;

/// What a stage decided and counted (free-form per stage; never text).
pub type StageOutputs = Value;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stage {
    pub id: String,
    pub kind: TraceStage,
    pub status: StageStatus,
    pub outputs: StageOutputs,
    pub started_at: String,
    pub completed_at: String,
    pub duration_ms: f64,
}

/// Collects stages as a turn runs.
pub struct TraceBuilder {
    pub trace_id: String,
    started_at: String,
    started: Instant,
    last: Instant,
    last_at: String,
    pub stages: Vec<Stage>,
}

impl TraceBuilder {
    pub fn new(app: &App) -> TraceBuilder {
        let now = rfc3339(app.clock.now());
        TraceBuilder {
            trace_id: crate::ids::new_id(),
            started_at: now.clone(),
            started: Instant::now(),
            last: Instant::now(),
            last_at: now,
            stages: Vec::new(),
        }
    }

    /// Records a stage that ran since the previous one.
    pub fn stage(&mut self, app: &App, kind: TraceStage, status: StageStatus, outputs: StageOutputs) {
        let now = Instant::now();
        let at = rfc3339(app.clock.now());
        self.stages.push(Stage {
            id: kind.to_string(),
            kind,
            status,
            outputs,
            started_at: self.last_at.clone(),
            completed_at: at.clone(),
            duration_ms: ((now - self.last).as_secs_f64() * 1_000_000.0).round() / 1000.0,
        });
        self.last = now;
        self.last_at = at;
    }

    pub fn elapsed_ms(&self) -> f64 {
        self.started.elapsed().as_secs_f64() * 1000.0
    }

    pub fn finish(&self, app: &App) -> TraceJson {
        json!({
            "traceId": self.trace_id,
            "startedAt": self.started_at,
            "completedAt": rfc3339(app.clock.now()),
            "durationMs": (self.elapsed_ms() * 1000.0).round() / 1000.0,
            "stages": self.stages,
        })
    }
}

/// The grounding diagnostic of one answer: how many claims it makes, how many cite a source
/// retrieved this turn, how many do not, and how many citations pointed at nothing retrieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Grounding {
    pub verdict: &'static str,
    pub claim_count: i64,
    pub sourced_claim_count: i64,
    pub unsourced_claim_count: i64,
    pub invalid_source_count: i64,
}

impl Grounding {
    pub fn from_counts(claims: i64, sourced: i64, invalid: i64) -> Grounding {
        let unsourced = claims - sourced;
        let verdict = if sourced == 0 {
            "no_support"
        } else if unsourced > 0 || invalid > 0 {
            "degraded"
        } else {
            "grounded"
        };
        Grounding {
            verdict,
            claim_count: claims,
            sourced_claim_count: sourced,
            unsourced_claim_count: unsourced,
            invalid_source_count: invalid,
        }
    }
}

/// A finished turn's row.
pub struct TurnRecord<'a> {
    pub trace_id: &'a str,
    pub workspace_id: &'a str,
    pub conversation_id: Option<&'a str>,
    pub agent_id: Option<&'a str>,
    pub revision_id: Option<&'a str>,
    pub user_message_id: Option<&'a str>,
    pub message_id: Option<&'a str>,
    pub request_id: Option<&'a str>,
    pub surface: &'a str,
    pub route: Option<RouteKind>,
    pub outcome: Outcome,
    pub availability: Availability,
    pub coverage: Option<&'a str>,
    pub reason: Option<&'a str>,
    pub grounding: Option<Grounding>,
    pub trace: &'a Value,
}

pub fn insert(tx: &Tx, r: &TurnRecord, now: &str) -> Result<()> {
    super::store::insert_trace(tx, r, now)
}

/// The grounding counts a stored turn carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredGrounding {
    pub verdict: String,
    pub claim_count: i64,
    pub sourced_claim_count: i64,
    pub unsourced_claim_count: i64,
    pub invalid_source_count: i64,
}

/// A stored turn: what its trace row says (the trace itself only when asked for).
#[derive(Debug, Clone)]
pub struct TraceRow {
    pub id: String,
    pub conversation_id: Option<String>,
    pub agent_id: Option<String>,
    pub revision_id: Option<String>,
    pub user_message_id: Option<String>,
    pub message_id: Option<String>,
    pub request_id: Option<String>,
    pub surface: String,
    pub route: Option<String>,
    pub outcome: Option<String>,
    pub availability: Option<String>,
    pub coverage: Option<String>,
    pub reason: Option<String>,
    pub grounding: Option<StoredGrounding>,
    pub trace: Option<TraceJson>,
    pub created_at: String,
}

/// One stored turn with its trace, by id (an eval snapshot reads what stood behind an answer).
pub fn find(c: &crate::storage::Conn, ws: &crate::ids::WorkspaceId, id: &str) -> Result<Option<TraceRow>> {
    super::store::trace(c, ws, id)
}

/// `GET /traces/{traceId}`: one turn's trace, for operators.
pub fn get(app: &App, p: &Principal, id: &str) -> Result<TraceRow> {
    p.require(Perm::ConversationsRead)?;
    app.db.read(|c| super::store::trace(c, &p.workspace_id, id)?.ok_or_else(|| Error::not_found("trace")))
}

#[derive(Debug, Default)]
pub struct QualityQuery {
    pub grounding_verdict: Option<String>,
    pub has_unsourced_claims: Option<bool>,
    pub has_invalid_sources: Option<bool>,
    pub agent_id: Option<String>,
    pub cursor: Option<String>,
    pub limit: usize,
}

/// `GET /quality/turns`: answered turns of visitor conversations and retrieval-only answers,
/// newest first, each with its grounding diagnostic (or null when none was computed). A `false`
/// count filter keeps turns whose diagnostic counted zero and leaves out turns without one.
/// A page of the quality report.
#[derive(Debug, Clone)]
pub struct QualityPage {
    pub turns: Vec<TraceRow>,
    pub total: i64,
    pub next_cursor: Option<String>,
    pub has_more: bool,
}

pub fn quality_turns(app: &App, p: &Principal, q: QualityQuery) -> Result<QualityPage> {
    p.require(Perm::ConversationsRead)?;
    if let Some(v) = &q.grounding_verdict
        && !["grounded", "degraded", "no_support"].contains(&v.as_str())
    {
        return Err(Error::invalid_field("groundingVerdict", "groundingVerdict is grounded, degraded or no_support"));
    }
    let limit = q.limit.clamp(1, 100);
    let after = q.cursor.as_deref().map(decode_cursor).transpose()?;
    let filter = super::store::QualityFilter {
        grounding_verdict: q.grounding_verdict.clone(),
        has_unsourced_claims: q.has_unsourced_claims,
        has_invalid_sources: q.has_invalid_sources,
        agent_id: q.agent_id.clone(),
    };
    app.db.read(move |c| {
        let total = super::store::quality_count(c, &p.workspace_id, &filter)?;
        let mut turns = super::store::quality_page(c, &p.workspace_id, &filter, after.as_ref(), limit + 1)?;
        let has_more = turns.len() > limit;
        turns.truncate(limit);
        let next_cursor = if has_more { turns.last().map(|t| encode_cursor(&t.created_at, &t.id)) } else { None };
        Ok(QualityPage { turns, total, next_cursor, has_more })
    })
}

/// One day of the quality report's chart: answered turns by coverage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DailyCoverage {
    /// `YYYY-MM-DD` (UTC).
    pub day: String,
    pub answered: i64,
    pub partial: i64,
    pub unanswered: i64,
    pub unclear: i64,
}

/// `GET /quality/daily`: the last `days` days (1 to 366, today included), every day present.
pub fn quality_daily(app: &App, p: &Principal, days: u32, agent_id: Option<&str>) -> Result<Vec<DailyCoverage>> {
    p.require(Perm::ConversationsRead)?;
    if !(1..=366).contains(&days) {
        return Err(Error::invalid_field("days", "days is 1 to 366"));
    }
    let today = app.clock.now().date_naive();
    let first = today - chrono::Duration::days(i64::from(days) - 1);
    let since = format!("{}T00:00:00Z", first.format("%Y-%m-%d"));
    let rows = app.db.read(|c| super::store::daily_coverage(c, &p.workspace_id, &since, agent_id))?;
    let mut out: Vec<DailyCoverage> = (0..i64::from(days))
        .map(|k| DailyCoverage {
            day: (first + chrono::Duration::days(k)).format("%Y-%m-%d").to_string(),
            ..Default::default()
        })
        .collect();
    for (day, coverage, n) in rows {
        let Some(d) = out.iter_mut().find(|d| d.day == day) else { continue };
        match coverage.as_deref() {
            Some("answered") => d.answered += n,
            Some("partial") => d.partial += n,
            Some("unanswered") => d.unanswered += n,
            _ => d.unclear += n,
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_follow_the_counts() {
        assert_eq!(Grounding::from_counts(3, 3, 0).verdict, "grounded");
        assert_eq!(Grounding::from_counts(3, 2, 0).verdict, "degraded");
        assert_eq!(Grounding::from_counts(3, 3, 1).verdict, "degraded");
        assert_eq!(Grounding::from_counts(2, 0, 0).verdict, "no_support");
        assert_eq!(Grounding::from_counts(0, 0, 0).verdict, "no_support");
        assert_eq!(Grounding::from_counts(3, 1, 0).unsourced_claim_count, 2);
    }
}
