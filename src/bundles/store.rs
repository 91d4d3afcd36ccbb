//! SQL for `agent_bundle_imports`. Private to `bundles`.

use rusqlite::{OptionalExtension, params};
use serde_json::{Value, json};

use super::{Counts, ImportJob, ImportState, Unresolved, UnresolvedKind};
use crate::error::Result;
use crate::storage::{Conn, Row, Tx};

const COLS: &str = "id, workspace_id, idempotency_key, fingerprint, state, agent_id, unresolved, counts, error, created_at, created_at_ms, updated_at, finished_at";

fn unresolved_of(raw: &str) -> Vec<Unresolved> {
    let v: Value = serde_json::from_str(raw).unwrap_or(Value::Null);
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|u| {
            Some(Unresolved {
                kind: UnresolvedKind::parse(u["kind"].as_str()?)?,
                element: u["element"].as_str().unwrap_or_default().to_string(),
                detail: u["detail"].as_str().unwrap_or_default().to_string(),
            })
        })
        .collect()
}

fn unresolved_text(us: &[Unresolved]) -> String {
    let v: Vec<Value> =
        us.iter().map(|u| json!({"kind": u.kind.as_str(), "element": u.element, "detail": u.detail})).collect();
    Value::Array(v).to_string()
}

fn counts_of(raw: &str) -> Counts {
    let v: Value = serde_json::from_str(raw).unwrap_or(Value::Null);
    let n = |k: &str| v[k].as_u64().unwrap_or(0) as usize;
    Counts {
        routines: n("routines"),
        skills: n("skills"),
        context_variables: n("contextVariables"),
        directives: n("directives"),
        eval_cases: n("evalCases"),
        unresolved: n("unresolved"),
    }
}

fn counts_text(c: &Counts) -> String {
    json!({"routines": c.routines, "skills": c.skills, "contextVariables": c.context_variables,
           "directives": c.directives, "evalCases": c.eval_cases, "unresolved": c.unresolved})
    .to_string()
}

fn row(r: &Row) -> rusqlite::Result<ImportJob> {
    let state: String = r.get(4)?;
    let error: Option<String> = r.get(8)?;
    Ok(ImportJob {
        id: r.get(0)?,
        workspace_id: r.get(1)?,
        idempotency_key: r.get(2)?,
        fingerprint: r.get(3)?,
        state: ImportState::parse(&state).unwrap_or(ImportState::Failed),
        agent_id: r.get(5)?,
        unresolved: unresolved_of(&r.get::<_, String>(6)?),
        counts: counts_of(&r.get::<_, String>(7)?),
        error: error.and_then(|e| {
            let v: Value = serde_json::from_str(&e).ok()?;
            Some((v["code"].as_str()?.to_string(), v["message"].as_str().unwrap_or_default().to_string()))
        }),
        created_at: r.get(9)?,
        created_at_ms: r.get(10)?,
        updated_at: r.get(11)?,
        finished_at: r.get(12)?,
    })
}

pub(super) fn get(c: &Conn, id: &str) -> Result<Option<ImportJob>> {
    Ok(c.query_row(&format!("SELECT {COLS} FROM agent_bundle_imports WHERE id = ?1"), [id], row).optional()?)
}

/// The attempt holding `key` in the workspace (active or applied), if any.
pub(super) fn holding_key(c: &Conn, ws: &str, key: &str) -> Result<Option<ImportJob>> {
    let sql = format!(
        "SELECT {COLS} FROM agent_bundle_imports WHERE workspace_id = ?1 AND idempotency_key = ?2
         AND state IN ('queued', 'applying', 'applied')"
    );
    Ok(c.query_row(&sql, params![ws, key], row).optional()?)
}

/// A new attempt, queued.
pub(super) fn insert(tx: &Tx, j: &ImportJob, created_by: Option<&str>) -> Result<()> {
    tx.execute(
        "INSERT INTO agent_bundle_imports (id, workspace_id, idempotency_key, fingerprint, state, created_by, created_at, created_at_ms, updated_at)
         VALUES (?1, ?2, ?3, ?4, 'queued', ?5, ?6, ?7, ?6)",
        params![j.id, j.workspace_id, j.idempotency_key, j.fingerprint, created_by, j.created_at, j.created_at_ms],
    )?;
    Ok(())
}

/// Queued → applying, naming the agent it creates; false when the attempt is no longer queued
/// (the cleanup fenced it).
pub(super) fn start_applying(tx: &Tx, id: &str, agent_id: &str, now: &str) -> Result<bool> {
    Ok(tx.execute(
        "UPDATE agent_bundle_imports SET state = 'applying', agent_id = ?2, updated_at = ?3 WHERE id = ?1 AND state = 'queued'",
        params![id, agent_id, now],
    )? == 1)
}

/// Whether the attempt is still applying (its fence: a step writes only while this holds, inside
/// the step's transaction).
pub(super) fn still_applying(c: &Conn, id: &str) -> Result<bool> {
    Ok(c.query_row("SELECT state FROM agent_bundle_imports WHERE id = ?1", [id], |r| r.get::<_, String>(0))
        .optional()?
        .is_some_and(|s| s == "applying"))
}

/// Applying → applied with what came across.
pub(super) fn finish_applied(tx: &Tx, id: &str, unresolved: &[Unresolved], counts: &Counts, now: &str) -> Result<bool> {
    Ok(tx.execute(
        "UPDATE agent_bundle_imports SET state = 'applied', unresolved = ?2, counts = ?3, updated_at = ?4, finished_at = ?4
         WHERE id = ?1 AND state = 'applying'",
        params![id, unresolved_text(unresolved), counts_text(counts), now],
    )? == 1)
}

/// An active attempt → `state` (failed or compensated) with its reason; false when it was not
/// active any more.
pub(super) fn finish_inactive(
    tx: &Tx,
    id: &str,
    state: ImportState,
    code: &str,
    message: &str,
    now: &str,
) -> Result<bool> {
    let error = json!({"code": code, "message": message}).to_string();
    Ok(tx.execute(
        "UPDATE agent_bundle_imports SET state = ?2, error = ?3, updated_at = ?4, finished_at = ?4
         WHERE id = ?1 AND state IN ('queued', 'applying')",
        params![id, state.as_str(), error, now],
    )? == 1)
}

/// Ids of active attempts created at or before `cutoff_ms` (all of them with `i64::MAX`).
pub(super) fn active_before(c: &Conn, cutoff_ms: i64) -> Result<Vec<String>> {
    let mut st = c.prepare(
        "SELECT id FROM agent_bundle_imports WHERE state IN ('queued', 'applying') AND created_at_ms <= ?1 ORDER BY created_at_ms",
    )?;
    Ok(st.query_map([cutoff_ms], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?)
}
