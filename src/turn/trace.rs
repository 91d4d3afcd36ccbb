//! Turn traces: what a turn did, stage by stage — decisions, candidate ids, counts and timings,
//! never message text, document text, prompts, secrets or sensitive values. Operators read them
//! by `traceId`; the quality report lists turns with their grounding diagnostics.

use std::time::Instant;

use rusqlite::{OptionalExtension, params};
use serde::Serialize;
use serde_json::{Value, json};

use super::kinds::{Availability, Outcome, RouteKind, StageStatus, TraceStage};
use crate::app::App;
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::documents::{decode_cursor, encode_cursor};
use crate::error::{Error, Result};
use crate::storage::Tx;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stage {
    pub id: String,
    pub kind: TraceStage,
    pub status: StageStatus,
    pub outputs: Value,
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
    pub fn stage(&mut self, app: &App, kind: TraceStage, status: StageStatus, outputs: Value) {
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

    pub fn finish(&self, app: &App) -> Value {
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
    let g = r.grounding;
    tx.execute(
        "INSERT INTO turn_traces (id, workspace_id, conversation_id, agent_id, revision_id, user_message_id, message_id, request_id,
            surface, route, outcome, availability, coverage, coverage_reason, grounding_verdict, claim_count, sourced_claim_count,
            unsourced_claim_count, invalid_source_count, trace, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)",
        params![
            r.trace_id,
            r.workspace_id,
            r.conversation_id,
            r.agent_id,
            r.revision_id,
            r.user_message_id,
            r.message_id,
            r.request_id,
            r.surface,
            r.route.map(RouteKind::as_str),
            r.outcome.as_str(),
            r.availability.as_str(),
            r.coverage,
            r.reason,
            g.map(|g| g.verdict),
            g.map(|g| g.claim_count),
            g.map(|g| g.sourced_claim_count),
            g.map(|g| g.unsourced_claim_count),
            g.map(|g| g.invalid_source_count),
            r.trace.to_string(),
            now
        ],
    )?;
    Ok(())
}

const COLS: &str = "id, conversation_id, agent_id, revision_id, user_message_id, message_id, request_id, surface, route, outcome, \
    availability, coverage, coverage_reason, grounding_verdict, claim_count, sourced_claim_count, unsourced_claim_count, \
    invalid_source_count, trace, created_at";

fn row_view(r: &rusqlite::Row, with_trace: bool) -> rusqlite::Result<Value> {
    let verdict: Option<String> = r.get(13)?;
    let grounding = match verdict {
        Some(v) => json!({"verdict": v, "claimCount": r.get::<_, i64>(14)?, "sourcedClaimCount": r.get::<_, i64>(15)?,
                          "unsourcedClaimCount": r.get::<_, i64>(16)?, "invalidSourceCount": r.get::<_, i64>(17)?}),
        None => Value::Null,
    };
    let availability: Option<String> = r.get(10)?;
    let mut v = json!({
        "turnId": r.get::<_, String>(0)?, "traceId": r.get::<_, String>(0)?,
        "conversationId": r.get::<_, Option<String>>(1)?, "agentId": r.get::<_, Option<String>>(2)?,
        "revisionId": r.get::<_, Option<String>>(3)?, "userMessageId": r.get::<_, Option<String>>(4)?,
        "messageId": r.get::<_, Option<String>>(5)?, "requestId": r.get::<_, Option<String>>(6)?,
        "surface": r.get::<_, String>(7)?, "route": r.get::<_, Option<String>>(8)?, "outcome": r.get::<_, Option<String>>(9)?,
        "answerCoverage": {"availability": availability, "coverage": r.get::<_, Option<String>>(11)?, "reason": r.get::<_, Option<String>>(12)?},
        "grounding": grounding,
        "createdAt": r.get::<_, String>(19)?,
    });
    if with_trace {
        v["trace"] = serde_json::from_str(&r.get::<_, String>(18)?).unwrap_or(Value::Null);
    }
    Ok(v)
}

/// `GET /traces/{traceId}`: one turn's trace, for operators.
pub fn get(app: &App, p: &Principal, id: &str) -> Result<Value> {
    p.require(Perm::ConversationsRead)?;
    app.db.read(|c| {
        c.query_row(
            &format!("SELECT {COLS} FROM turn_traces WHERE id = ?1 AND workspace_id = ?2"),
            params![id, p.workspace_id.0],
            |r| row_view(r, true),
        )
        .optional()?
        .ok_or_else(|| Error::not_found("trace"))
    })
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
pub fn quality_turns(app: &App, p: &Principal, q: QualityQuery) -> Result<Value> {
    p.require(Perm::ConversationsRead)?;
    if let Some(v) = &q.grounding_verdict
        && !["grounded", "degraded", "no_support"].contains(&v.as_str())
    {
        return Err(Error::invalid_field("groundingVerdict", "groundingVerdict is grounded, degraded or no_support"));
    }
    let limit = q.limit.clamp(1, 100);
    let after = q.cursor.as_deref().map(decode_cursor).transpose()?;
    let (au, ai) = after.unzip();
    let filter = "workspace_id = ?1 AND surface IN ('chat', 'retrieval_answer')
        AND (?2 IS NULL OR grounding_verdict = ?2)
        AND (?3 IS NULL OR (?3 = 1 AND unsourced_claim_count > 0) OR (?3 = 0 AND unsourced_claim_count = 0))
        AND (?4 IS NULL OR (?4 = 1 AND invalid_source_count > 0) OR (?4 = 0 AND invalid_source_count = 0))
        AND (?5 IS NULL OR agent_id = ?5)";
    let ws = p.workspace_id.0.clone();
    let args = (q.grounding_verdict.clone(), q.has_unsourced_claims, q.has_invalid_sources, q.agent_id.clone());
    app.db.read(move |c| {
        let total: i64 = c.query_row(&format!("SELECT count(*) FROM turn_traces WHERE {filter}"), params![ws, args.0, args.1, args.2, args.3], |r| {
            r.get(0)
        })?;
        let mut st = c.prepare(&format!(
            "SELECT {COLS} FROM turn_traces WHERE {filter} AND (?6 IS NULL OR created_at < ?6 OR (created_at = ?6 AND id < ?7))
             ORDER BY created_at DESC, id DESC LIMIT ?8"
        ))?;
        let mut rows: Vec<(String, String, Value)> = st
            .query_map(params![ws, args.0, args.1, args.2, args.3, au, ai, (limit + 1) as i64], |r| {
                Ok((r.get::<_, String>(19)?, r.get::<_, String>(0)?, row_view(r, false)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        let more = rows.len() > limit;
        rows.truncate(limit);
        let next = if more { rows.last().map(|(at, id, _)| encode_cursor(at, id)) } else { None };
        Ok(json!({"turns": rows.into_iter().map(|r| r.2).collect::<Vec<_>>(), "total": total, "nextCursor": next, "hasMore": more}))
    })
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
