//! SQL for the audit log (private to `audit`).

use rusqlite::params_from_iter;

use super::{Actor, AuditActor, AuditEvent, AuditTarget, Event, Filter};
use crate::error::Result;
use crate::ids::OrgId;
use crate::storage::{Conn, SqlValue, Tx};

/// Appends `ev`; its organization is the workspace's when only a workspace is given.
pub(super) fn insert(tx: &Tx, now: &str, actor: &Actor, ev: &Event) -> Result<()> {
    tx.execute_deferred(
        "INSERT INTO audit_events (event_id, organization_id, workspace_id, actor_type, actor_id, action, target_type, target_id, metadata, request_id, created_at)
         VALUES (?1, coalesce(?2, (SELECT organization_id FROM workspaces WHERE id = ?3)), ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        rusqlite::params![
            crate::ids::new_id(),
            ev.org,
            ev.workspace,
            actor.kind,
            actor.id,
            ev.action,
            ev.target_type,
            ev.target_id,
            ev.metadata.to_string(),
            actor.request_id,
            now
        ],
    )?;
    Ok(())
}

/// Events of `org` matching `f`, newest first, with their row ids (the cursor): at most `limit`,
/// before row id `before` when given.
pub(super) fn list(
    c: &Conn,
    org: &OrgId,
    f: &Filter,
    before: Option<i64>,
    limit: usize,
) -> Result<Vec<(i64, AuditEvent)>> {
    let mut sql = String::from(
        "SELECT id, event_id, workspace_id, actor_type, actor_id, action, target_type, target_id, metadata, request_id, created_at
         FROM audit_events WHERE organization_id = ?",
    );
    let mut args: Vec<SqlValue> = vec![SqlValue::Text(org.0.clone())];
    let mut add = |clause: &str, v: &Option<String>| {
        if let Some(v) = v {
            sql.push_str(clause);
            args.push(SqlValue::Text(v.clone()));
        }
    };
    add(" AND workspace_id = ?", &f.workspace_id);
    add(" AND action = ?", &f.action);
    add(" AND actor_id = ?", &f.actor_id);
    add(" AND target_type = ?", &f.target_type);
    add(" AND target_id = ?", &f.target_id);
    add(" AND created_at >= ?", &f.since);
    add(" AND created_at < ?", &f.until);
    if let Some(id) = before {
        sql.push_str(" AND id < ?");
        args.push(SqlValue::Integer(id));
    }
    sql.push_str(" ORDER BY id DESC LIMIT ?");
    args.push(SqlValue::Integer(limit as i64));
    let mut stmt = c.prepare(&sql)?;
    let rows = stmt.query_map(params_from_iter(args.iter()), |r| {
        let target_type: Option<String> = r.get(6)?;
        Ok((
            r.get::<_, i64>(0)?,
            AuditEvent {
                id: r.get(1)?,
                workspace_id: r.get(2)?,
                actor: AuditActor { kind: r.get(3)?, id: r.get(4)? },
                action: r.get(5)?,
                target: target_type.map(|kind| AuditTarget { kind, id: r.get(7).ok().flatten() }),
                metadata: serde_json::from_str(&r.get::<_, String>(8)?).unwrap_or(serde_json::Value::Null),
                request_id: r.get(9)?,
                created_at: r.get(10)?,
            },
        ))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}
