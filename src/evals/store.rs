//! The evals' SQL: snapshots, cases, runs and suites.

use rusqlite::{OptionalExtension, params};
use serde_json::Value;

use super::assertions::{self, Assertion};
use super::{Case, Run, Snapshot, SnapshotBody, Suite, Summary};
use crate::error::{Error, Result};
use crate::storage::{Conn, Row, Tx};

const SNAP_COLS: &str =
    "id, workspace_id, agent_id, source_conversation_id, source_message_id, fidelity, body, captured_at, captured_by";

fn snapshot_row(r: &Row) -> rusqlite::Result<(Snapshot, String)> {
    let body: String = r.get(6)?;
    Ok((
        Snapshot {
            id: r.get(0)?,
            workspace_id: r.get(1)?,
            agent_id: r.get(2)?,
            source_conversation_id: r.get(3)?,
            source_message_id: r.get(4)?,
            fidelity: r.get(5)?,
            body: SnapshotBody::default(),
            captured_at: r.get(7)?,
            captured_by: r.get(8)?,
        },
        body,
    ))
}

fn with_body((mut s, body): (Snapshot, String)) -> Result<Snapshot> {
    s.body = serde_json::from_str(&body).map_err(|e| Error::internal_msg(format!("eval snapshot body: {e}")))?;
    Ok(s)
}

pub fn insert_snapshot(tx: &Tx, s: &Snapshot) -> Result<()> {
    let body = serde_json::to_string(&s.body).map_err(|e| Error::internal_msg(e.to_string()))?;
    tx.execute(
        &format!("INSERT INTO eval_snapshots ({SNAP_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"),
        params![
            s.id,
            s.workspace_id,
            s.agent_id,
            s.source_conversation_id,
            s.source_message_id,
            s.fidelity,
            body,
            s.captured_at,
            s.captured_by
        ],
    )?;
    Ok(())
}

pub fn snapshot(c: &Conn, ws: &str, id: &str) -> Result<Option<Snapshot>> {
    let row = c
        .query_row(
            &format!("SELECT {SNAP_COLS} FROM eval_snapshots WHERE id = ?1 AND workspace_id = ?2"),
            params![id, ws],
            snapshot_row,
        )
        .optional()?;
    row.map(with_body).transpose()
}

const CASE_COLS: &str = "id, workspace_id, snapshot_id, agent_id, source_message_id, name, assertions, status,
     last_run_id, created_at, updated_at, question";

fn case_row(r: &Row) -> rusqlite::Result<(Case, String)> {
    Ok((
        Case {
            id: r.get(0)?,
            workspace_id: r.get(1)?,
            snapshot_id: r.get(2)?,
            agent_id: r.get(3)?,
            source_message_id: r.get(4)?,
            name: r.get(5)?,
            assertions: Vec::new(),
            status: r.get(7)?,
            last_run_id: r.get(8)?,
            question: r.get(11)?,
            created_at: r.get(9)?,
            updated_at: r.get(10)?,
        },
        r.get(6)?,
    ))
}

fn finish_case((mut c, assertions): (Case, String)) -> Result<Case> {
    let v: Value = serde_json::from_str(&assertions).unwrap_or(Value::Array(vec![]));
    c.assertions =
        assertions::parse_list(&v).map_err(|e| Error::internal_msg(format!("stored assertions: {}", e.message)))?;
    Ok(c)
}

fn assertions_json(a: &[Assertion]) -> String {
    Value::Array(a.iter().map(Assertion::to_json).collect()).to_string()
}

pub fn insert_case(tx: &Tx, c: &Case) -> Result<()> {
    tx.execute(
        "INSERT INTO eval_cases (id, workspace_id, snapshot_id, agent_id, source_message_id, name, assertions,
             assertion_count, status, last_run_id, created_at, updated_at, question)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        params![
            c.id,
            c.workspace_id,
            c.snapshot_id,
            c.agent_id,
            c.source_message_id,
            c.name,
            assertions_json(&c.assertions),
            c.assertions.len() as i64,
            c.status,
            c.last_run_id,
            c.created_at,
            c.updated_at,
            c.question
        ],
    )?;
    Ok(())
}

pub fn update_case(tx: &Tx, c: &Case) -> Result<()> {
    tx.execute(
        "UPDATE eval_cases SET name = ?2, assertions = ?3, assertion_count = ?4, status = ?5, last_run_id = ?6,
             updated_at = ?7 WHERE id = ?1",
        params![
            c.id,
            c.name,
            assertions_json(&c.assertions),
            c.assertions.len() as i64,
            c.status,
            c.last_run_id,
            c.updated_at
        ],
    )?;
    Ok(())
}

/// Records a case's latest scored run; a run of assertions that changed meanwhile, or one that
/// started before the run the case already shows, does not.
pub fn set_case_result(tx: &Tx, case_id: &str, assertions: &str, status: &str, run_id: &str, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE eval_cases SET status = ?3, last_run_id = ?4, updated_at = ?5
         WHERE id = ?1 AND assertions = ?2
           AND (last_run_id IS NULL
                OR (SELECT started_at FROM eval_runs WHERE id = eval_cases.last_run_id)
                   <= (SELECT started_at FROM eval_runs WHERE id = ?4))",
        params![case_id, assertions, status, run_id, now],
    )?;
    Ok(())
}

pub fn delete_case(tx: &Tx, c: &Case) -> Result<()> {
    tx.execute("DELETE FROM eval_runs WHERE case_id = ?1", params![c.id])?;
    tx.execute("DELETE FROM eval_cases WHERE id = ?1", params![c.id])?;
    tx.execute(
        "DELETE FROM eval_snapshots WHERE id = ?1 AND NOT EXISTS (SELECT 1 FROM eval_cases WHERE snapshot_id = ?1)",
        params![c.snapshot_id],
    )?;
    Ok(())
}

pub fn case(c: &Conn, ws: &str, id: &str) -> Result<Option<Case>> {
    let row = c
        .query_row(
            &format!("SELECT {CASE_COLS} FROM eval_cases WHERE id = ?1 AND workspace_id = ?2"),
            params![id, ws],
            case_row,
        )
        .optional()?;
    row.map(finish_case).transpose()
}

pub fn case_by_source(c: &Conn, ws: &str, message_id: &str) -> Result<Option<Case>> {
    let row = c
        .query_row(
            &format!("SELECT {CASE_COLS} FROM eval_cases WHERE workspace_id = ?1 AND source_message_id = ?2"),
            params![ws, message_id],
            case_row,
        )
        .optional()?;
    row.map(finish_case).transpose()
}

pub fn cases(c: &Conn, ws: &str, agent_id: Option<&str>, limit: usize) -> Result<Vec<Case>> {
    let mut st = c.prepare(&format!(
        "SELECT {CASE_COLS} FROM eval_cases WHERE workspace_id = ?1 AND (?2 IS NULL OR agent_id = ?2)
         ORDER BY created_at, id LIMIT ?3"
    ))?;
    let rows = st.query_map(params![ws, agent_id, limit as i64], case_row)?.collect::<rusqlite::Result<Vec<_>>>()?;
    rows.into_iter().map(finish_case).collect()
}

pub fn summary(c: &Conn, ws: &str, agent_id: Option<&str>) -> Result<Summary> {
    Ok(c.query_row(
        "SELECT COUNT(*),
                COALESCE(SUM(assertion_count > 0), 0),
                COALESCE(SUM(assertion_count > 0 AND status = 'passing'), 0),
                COALESCE(SUM(assertion_count > 0 AND status = 'failing'), 0),
                COALESCE(SUM(assertion_count > 0 AND status = 'error'), 0),
                COALESCE(SUM(assertion_count > 0 AND status = 'pending'), 0),
                COALESCE(SUM(assertion_count = 0), 0)
         FROM eval_cases WHERE workspace_id = ?1 AND (?2 IS NULL OR agent_id = ?2)",
        params![ws, agent_id],
        |r| {
            Ok(Summary {
                total: r.get(0)?,
                scored: r.get(1)?,
                passing: r.get(2)?,
                failing: r.get(3)?,
                error: r.get(4)?,
                pending: r.get(5)?,
                unscored: r.get(6)?,
            })
        },
    )?)
}

const RUN_COLS: &str =
    "id, workspace_id, snapshot_id, case_id, suite_id, mode, revision_id, overrides, resolved_config,
     observed_output, assertions, status, outcome_reason, verdicts, started_at, completed_at";

fn run_row(r: &Row) -> rusqlite::Result<Run> {
    let json = |i: usize| -> rusqlite::Result<Value> {
        let s: String = r.get(i)?;
        Ok(serde_json::from_str(&s).unwrap_or(Value::Null))
    };
    Ok(Run {
        id: r.get(0)?,
        workspace_id: r.get(1)?,
        snapshot_id: r.get(2)?,
        case_id: r.get(3)?,
        suite_id: r.get(4)?,
        mode: r.get(5)?,
        revision_id: r.get(6)?,
        overrides: json(7)?,
        resolved_config: json(8)?,
        observed_output: json(9)?,
        assertions: json(10)?,
        status: r.get(11)?,
        outcome_reason: r.get(12)?,
        verdicts: json(13)?,
        started_at: r.get(14)?,
        completed_at: r.get(15)?,
    })
}

pub fn insert_run(tx: &Tx, r: &Run) -> Result<()> {
    tx.execute(
        &format!(
            "INSERT INTO eval_runs ({RUN_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)"
        ),
        params![
            r.id,
            r.workspace_id,
            r.snapshot_id,
            r.case_id,
            r.suite_id,
            r.mode,
            r.revision_id,
            r.overrides.to_string(),
            r.resolved_config.to_string(),
            r.observed_output.to_string(),
            r.assertions.to_string(),
            r.status,
            r.outcome_reason,
            r.verdicts.to_string(),
            r.started_at,
            r.completed_at
        ],
    )?;
    Ok(())
}

pub fn run(c: &Conn, ws: &str, id: &str) -> Result<Option<Run>> {
    Ok(c.query_row(
        &format!("SELECT {RUN_COLS} FROM eval_runs WHERE id = ?1 AND workspace_id = ?2"),
        params![id, ws],
        run_row,
    )
    .optional()?)
}

pub fn runs_of_case(c: &Conn, case_id: &str, limit: usize) -> Result<Vec<Run>> {
    let mut st = c.prepare(&format!(
        "SELECT {RUN_COLS} FROM eval_runs WHERE case_id = ?1 ORDER BY started_at DESC, id DESC LIMIT ?2"
    ))?;
    Ok(st.query_map(params![case_id, limit as i64], run_row)?.collect::<rusqlite::Result<_>>()?)
}

/// The runs a suite already made of one case (a resumed suite runs only the missing repeats).
pub fn suite_case_runs(c: &Conn, suite_id: &str, case_id: &str) -> Result<Vec<Run>> {
    let mut st = c.prepare(&format!(
        "SELECT {RUN_COLS} FROM eval_runs WHERE suite_id = ?1 AND case_id = ?2 ORDER BY started_at, id"
    ))?;
    Ok(st.query_map(params![suite_id, case_id], run_row)?.collect::<rusqlite::Result<_>>()?)
}

const SUITE_COLS: &str = "id, workspace_id, agent_id, comparison_id, side, revision_id, mode, repeat_count,
     pass_threshold, case_ids, status, done, total, results, summary, error, created_at, completed_at";

fn suite_row(r: &Row) -> rusqlite::Result<Suite> {
    let text = |i: usize| -> rusqlite::Result<String> { r.get(i) };
    let summary: Option<String> = r.get(14)?;
    Ok(Suite {
        id: r.get(0)?,
        workspace_id: r.get(1)?,
        agent_id: r.get(2)?,
        comparison_id: r.get(3)?,
        side: r.get(4)?,
        revision_id: r.get(5)?,
        mode: r.get(6)?,
        repeat: r.get(7)?,
        pass_threshold: r.get(8)?,
        case_ids: serde_json::from_str(&text(9)?).unwrap_or_default(),
        status: r.get(10)?,
        done: r.get(11)?,
        total: r.get(12)?,
        results: serde_json::from_str(&text(13)?).unwrap_or_default(),
        summary: summary.and_then(|s| serde_json::from_str(&s).ok()),
        error: r.get(15)?,
        created_at: r.get(16)?,
        completed_at: r.get(17)?,
    })
}

pub fn insert_suite(tx: &Tx, s: &Suite, key: Option<&str>, by: Option<&str>) -> Result<()> {
    tx.execute(
        "INSERT INTO eval_suites (id, workspace_id, agent_id, comparison_id, side, revision_id, mode, repeat_count,
             pass_threshold, case_ids, status, done, total, results, idempotency_key, created_by, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 0, ?12, ?16, ?13, ?14, ?15)",
        params![
            s.id,
            s.workspace_id,
            s.agent_id,
            s.comparison_id,
            s.side,
            s.revision_id,
            s.mode,
            s.repeat,
            s.pass_threshold,
            serde_json::to_string(&s.case_ids).unwrap_or_default(),
            s.status,
            s.total,
            key,
            by,
            s.created_at,
            Value::Array(s.results.clone()).to_string()
        ],
    )?;
    Ok(())
}

pub fn suite(c: &Conn, ws: &str, id: &str) -> Result<Option<Suite>> {
    Ok(c.query_row(
        &format!("SELECT {SUITE_COLS} FROM eval_suites WHERE id = ?1 AND workspace_id = ?2"),
        params![id, ws],
        suite_row,
    )
    .optional()?)
}

/// The suites a key started (one, or a comparison's two).
pub fn suites_by_key(c: &Conn, ws: &str, key: &str) -> Result<Vec<Suite>> {
    let mut st = c.prepare(&format!(
        "SELECT {SUITE_COLS} FROM eval_suites WHERE workspace_id = ?1 AND idempotency_key = ?2 ORDER BY side"
    ))?;
    Ok(st.query_map(params![ws, key], suite_row)?.collect::<rusqlite::Result<_>>()?)
}

pub fn comparison(c: &Conn, ws: &str, comparison_id: &str) -> Result<Vec<Suite>> {
    let mut st = c.prepare(&format!(
        "SELECT {SUITE_COLS} FROM eval_suites WHERE workspace_id = ?1 AND comparison_id = ?2 ORDER BY side"
    ))?;
    Ok(st.query_map(params![ws, comparison_id], suite_row)?.collect::<rusqlite::Result<_>>()?)
}

/// Suites newest first (comparison sides included), at most `limit`.
pub fn suites(c: &Conn, ws: &str, agent_id: Option<&str>, limit: usize) -> Result<Vec<Suite>> {
    let mut st = c.prepare(&format!(
        "SELECT {SUITE_COLS} FROM eval_suites WHERE workspace_id = ?1 AND (?2 IS NULL OR agent_id = ?2)
         ORDER BY created_at DESC, id DESC LIMIT ?3"
    ))?;
    Ok(st.query_map(params![ws, agent_id, limit as i64], suite_row)?.collect::<rusqlite::Result<_>>()?)
}

/// The last completed plain suite (not a comparison side) before `suite`, of the same agent scope
/// and mode: what a regression is measured against.
pub fn previous_suite(c: &Conn, s: &Suite) -> Result<Option<Suite>> {
    Ok(c.query_row(
        &format!(
            "SELECT {SUITE_COLS} FROM eval_suites WHERE workspace_id = ?1 AND agent_id IS ?2 AND mode = ?3
             AND status = 'completed' AND comparison_id IS NULL AND (created_at, id) < (?4, ?5)
             ORDER BY created_at DESC, id DESC LIMIT 1"
        ),
        params![s.workspace_id, s.agent_id, s.mode, s.created_at, s.id],
        suite_row,
    )
    .optional()?)
}

pub fn start_suite(tx: &Tx, id: &str) -> Result<bool> {
    Ok(tx.execute(
        "UPDATE eval_suites SET status = 'running' WHERE id = ?1 AND status IN ('queued', 'running')",
        params![id],
    )? == 1)
}

/// Saves progress when the suite is where this worker left it (`prev` cases done); false when
/// another worker moved it meanwhile.
pub fn suite_progress(tx: &Tx, id: &str, prev: i64, done: i64, results: &[Value]) -> Result<bool> {
    let n = tx.execute(
        "UPDATE eval_suites SET done = ?3, results = ?4 WHERE id = ?1 AND done = ?2 AND status = 'running'",
        params![id, prev, done, Value::Array(results.to_vec()).to_string()],
    )?;
    Ok(n == 1)
}

pub fn finish_suite(
    tx: &Tx,
    id: &str,
    status: &str,
    summary: Option<&Value>,
    error: Option<&str>,
    now: &str,
) -> Result<()> {
    tx.execute(
        "UPDATE eval_suites SET status = ?2, summary = ?3, error = ?4, completed_at = ?5 WHERE id = ?1",
        params![id, status, summary.map(|s| s.to_string()), error, now],
    )?;
    Ok(())
}
