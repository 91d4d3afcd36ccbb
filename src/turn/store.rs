//! SQL for the turn's own tables: turn traces (the quality report reads them) and test
//! executions. Private to `turn`.

use rusqlite::{OptionalExtension, params};

use super::kinds::RouteKind;
use super::test_exec::Execution;
use super::trace::{StoredGrounding, TraceRow, TurnRecord};
use crate::error::Result;
use crate::ids::WorkspaceId;
use crate::storage::{Conn, Row, Tx};

// -- traces

pub(super) fn insert_trace(tx: &Tx, r: &TurnRecord, now: &str) -> Result<()> {
    let g = r.grounding;
    tx.execute_deferred(
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

const TRACE_COLS: &str = "id, conversation_id, agent_id, revision_id, user_message_id, message_id, request_id, surface, route, outcome, \
    availability, coverage, coverage_reason, grounding_verdict, claim_count, sourced_claim_count, unsourced_claim_count, \
    invalid_source_count, trace, created_at";

fn trace_row(r: &Row, with_trace: bool) -> rusqlite::Result<TraceRow> {
    let verdict: Option<String> = r.get(13)?;
    let grounding = match verdict {
        Some(verdict) => Some(StoredGrounding {
            verdict,
            claim_count: r.get(14)?,
            sourced_claim_count: r.get(15)?,
            unsourced_claim_count: r.get(16)?,
            invalid_source_count: r.get(17)?,
        }),
        None => None,
    };
    let trace = if with_trace {
        Some(serde_json::from_str(&r.get::<_, String>(18)?).unwrap_or(serde_json::Value::Null))
    } else {
        None
    };
    Ok(TraceRow {
        id: r.get(0)?,
        conversation_id: r.get(1)?,
        agent_id: r.get(2)?,
        revision_id: r.get(3)?,
        user_message_id: r.get(4)?,
        message_id: r.get(5)?,
        request_id: r.get(6)?,
        surface: r.get(7)?,
        route: r.get(8)?,
        outcome: r.get(9)?,
        availability: r.get(10)?,
        coverage: r.get(11)?,
        reason: r.get(12)?,
        grounding,
        trace,
        created_at: r.get(19)?,
    })
}

pub(super) fn trace(c: &Conn, ws: &WorkspaceId, id: &str) -> Result<Option<TraceRow>> {
    Ok(c.query_row(
        &format!("SELECT {TRACE_COLS} FROM turn_traces WHERE id = ?1 AND workspace_id = ?2"),
        params![id, ws.0],
        |r| trace_row(r, true),
    )
    .optional()?)
}

/// The quality report's filters.
pub(super) struct QualityFilter {
    pub grounding_verdict: Option<String>,
    pub has_unsourced_claims: Option<bool>,
    pub has_invalid_sources: Option<bool>,
    pub agent_id: Option<String>,
}

const QUALITY_WHERE: &str = "workspace_id = ?1 AND surface IN ('chat', 'public', 'whatsapp', 'retrieval_answer')
    AND (?2 IS NULL OR grounding_verdict = ?2)
    AND (?3 IS NULL OR (?3 = 1 AND unsourced_claim_count > 0) OR (?3 = 0 AND unsourced_claim_count = 0))
    AND (?4 IS NULL OR (?4 = 1 AND invalid_source_count > 0) OR (?4 = 0 AND invalid_source_count = 0))
    AND (?5 IS NULL OR agent_id = ?5)";

pub(super) fn quality_count(c: &Conn, ws: &WorkspaceId, f: &QualityFilter) -> Result<i64> {
    Ok(c.query_row(
        &format!("SELECT count(*) FROM turn_traces WHERE {QUALITY_WHERE}"),
        params![ws.0, f.grounding_verdict, f.has_unsourced_claims, f.has_invalid_sources, f.agent_id],
        |r| r.get(0),
    )?)
}

/// Up to `limit` turns, newest first, after the `(created_at, id)` cursor.
pub(super) fn quality_page(
    c: &Conn,
    ws: &WorkspaceId,
    f: &QualityFilter,
    after: Option<&(String, String)>,
    limit: usize,
) -> Result<Vec<TraceRow>> {
    let (au, ai) = (after.map(|a| &a.0), after.map(|a| &a.1));
    let mut st = c.prepare(&format!(
        "SELECT {TRACE_COLS} FROM turn_traces WHERE {QUALITY_WHERE} AND (?6 IS NULL OR created_at < ?6 OR (created_at = ?6 AND id < ?7))
         ORDER BY created_at DESC, id DESC LIMIT ?8"
    ))?;
    let rows = st.query_map(
        params![
            ws.0,
            f.grounding_verdict,
            f.has_unsourced_claims,
            f.has_invalid_sources,
            f.agent_id,
            au,
            ai,
            limit as i64
        ],
        |r| trace_row(r, false),
    )?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Turns per day and coverage since `since` (an RFC 3339 day start): `(day, coverage, count)`.
pub(super) fn daily_coverage(
    c: &Conn,
    ws: &WorkspaceId,
    since: &str,
    agent_id: Option<&str>,
) -> Result<Vec<(String, Option<String>, i64)>> {
    let mut st = c.prepare(
        "SELECT substr(created_at, 1, 10) AS day, coverage, count(*) FROM turn_traces
         WHERE workspace_id = ?1 AND surface IN ('chat', 'public', 'whatsapp', 'retrieval_answer') AND created_at >= ?2
           AND (?3 IS NULL OR agent_id = ?3)
         GROUP BY day, coverage ORDER BY day",
    )?;
    let rows = st.query_map(params![ws.0, since, agent_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

// -- test executions

const EXEC_COLS: &str = "id, agent_id, mode, sides, frozen_draft, draft_generation, seed_conversation_id, test_values, skill_effects, created_at";

fn exec_row(r: &Row) -> rusqlite::Result<Execution> {
    Ok(Execution {
        id: r.get(0)?,
        agent_id: r.get(1)?,
        mode: r.get(2)?,
        sides: serde_json::from_str(&r.get::<_, String>(3)?).unwrap_or_default(),
        frozen_draft: r.get::<_, Option<String>>(4)?.and_then(|s| serde_json::from_str(&s).ok()),
        draft_generation: r.get(5)?,
        seed_conversation_id: r.get(6)?,
        test_values: serde_json::from_str(&r.get::<_, String>(7)?).unwrap_or(serde_json::Value::Array(vec![])),
        skill_effects: r.get(8)?,
        created_at: r.get(9)?,
    })
}

pub(super) fn execution(c: &Conn, ws: &str, agent_id: &str, id: &str) -> Result<Option<Execution>> {
    Ok(c.query_row(
        &format!("SELECT {EXEC_COLS} FROM test_executions WHERE id = ?1 AND agent_id = ?2 AND workspace_id = ?3"),
        params![id, agent_id, ws],
        exec_row,
    )
    .optional()?)
}

pub(super) fn execution_by_key(c: &Conn, agent_id: &str, key: &str) -> Result<Option<Execution>> {
    Ok(c.query_row(
        &format!("SELECT {EXEC_COLS} FROM test_executions WHERE agent_id = ?1 AND idempotency_key = ?2"),
        params![agent_id, key],
        exec_row,
    )
    .optional()?)
}

pub(super) fn insert_execution(
    tx: &Tx,
    ws: &WorkspaceId,
    e: &Execution,
    idempotency_key: Option<&str>,
    created_by: Option<&str>,
) -> Result<()> {
    tx.execute(
        "INSERT INTO test_executions (id, workspace_id, agent_id, mode, sides, frozen_draft, draft_generation, seed_conversation_id, test_values,
            skill_effects, idempotency_key, created_by, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13)",
        params![
            e.id,
            ws.0,
            e.agent_id,
            e.mode,
            serde_json::to_string(&e.sides)?,
            e.frozen_draft.as_ref().map(|f| f.to_string()),
            e.draft_generation,
            e.seed_conversation_id,
            e.test_values.to_string(),
            e.skill_effects,
            idempotency_key,
            created_by,
            e.created_at
        ],
    )?;
    Ok(())
}

/// Up to `limit` executions of the agent, newest first, after the `(created_at, id)` cursor.
pub(super) fn executions(
    c: &Conn,
    ws: &WorkspaceId,
    agent_id: &str,
    after: Option<&(String, String)>,
    limit: usize,
) -> Result<Vec<Execution>> {
    let (au, ai) = (after.map(|a| &a.0), after.map(|a| &a.1));
    let mut st = c.prepare(&format!(
        "SELECT {EXEC_COLS} FROM test_executions WHERE agent_id = ?1 AND workspace_id = ?2
         AND (?3 IS NULL OR created_at < ?3 OR (created_at = ?3 AND id < ?4)) ORDER BY created_at DESC, id DESC LIMIT ?5"
    ))?;
    let rows = st.query_map(params![agent_id, ws.0, au, ai, limit as i64], exec_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}
