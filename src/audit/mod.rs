//! The audit log: an append-only table (SQL triggers refuse updates and deletes) and one function
//! every module calls inside the transaction of the change it records. Metadata carries ids, counts
//! and names, never secrets or document or message content.

use base64::Engine;
use rusqlite::{Connection, params_from_iter};
use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::ids::{OrgId, WorkspaceId};
use crate::storage::{SqlValue, Tx};

/// Who did it.
#[derive(Debug, Clone)]
pub struct Actor {
    /// `user`, `service_credential`, `system` or `cli`.
    pub kind: &'static str,
    pub id: Option<String>,
    pub request_id: Option<String>,
}

impl Actor {
    pub fn user(id: Option<crate::ids::UserId>, request_id: Option<String>) -> Actor {
        Actor { kind: "user", id: id.map(|u| u.0), request_id }
    }
    pub fn service(id: Option<String>, request_id: Option<String>) -> Actor {
        Actor { kind: "service_credential", id, request_id }
    }
    pub fn system() -> Actor {
        Actor { kind: "system", id: None, request_id: None }
    }
    pub fn cli() -> Actor {
        Actor { kind: "cli", id: None, request_id: None }
    }
}

/// One event to record.
pub struct Event<'a> {
    pub org: Option<&'a OrgId>,
    pub workspace: Option<&'a WorkspaceId>,
    pub action: &'a str,
    pub target_type: Option<&'a str>,
    pub target_id: Option<&'a str>,
    pub metadata: Value,
}

impl<'a> Event<'a> {
    pub fn new(action: &'a str) -> Self {
        Event {
            org: None,
            workspace: None,
            action,
            target_type: None,
            target_id: None,
            metadata: Value::Object(Default::default()),
        }
    }
    pub fn org(mut self, org: &'a OrgId) -> Self {
        self.org = Some(org);
        self
    }
    pub fn workspace(mut self, ws: &'a WorkspaceId) -> Self {
        self.workspace = Some(ws);
        self
    }
    pub fn target(mut self, kind: &'a str, id: &'a str) -> Self {
        self.target_type = Some(kind);
        self.target_id = Some(id);
        self
    }
    pub fn meta(mut self, metadata: Value) -> Self {
        self.metadata = metadata;
        self
    }
}

/// Records `ev` in the caller's transaction. When only a workspace is given, its organization is
/// filled in from the workspace.
pub fn record(tx: &Tx, now: &str, actor: &Actor, ev: Event) -> Result<()> {
    tx.execute(
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

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    pub id: String,
    pub workspace_id: Option<String>,
    pub actor: AuditActor,
    pub action: String,
    pub target: Option<AuditTarget>,
    pub metadata: Value,
    pub request_id: Option<String>,
    pub created_at: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditActor {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditTarget {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: Option<String>,
}

/// Filters for [`list`]; all optional.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    pub workspace_id: Option<String>,
    pub action: Option<String>,
    pub actor_id: Option<String>,
    pub target_type: Option<String>,
    pub target_id: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub cursor: Option<String>,
    pub limit: usize,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Page {
    pub events: Vec<AuditEvent>,
    pub next_cursor: Option<String>,
    pub has_more: bool,
}

fn encode_cursor(id: i64) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("a:{id}"))
}

fn decode_cursor(c: &str) -> Result<i64> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(c)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.strip_prefix("a:").and_then(|n| n.parse().ok()))
        .ok_or_else(|| {
            Error::invalid_field("cursor", "the cursor is not valid; pass nextCursor from the previous page")
        })
}

/// Events of `org`, newest first.
pub fn list(c: &Connection, org: &OrgId, f: &Filter) -> Result<Page> {
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
    if let Some(cur) = &f.cursor {
        sql.push_str(" AND id < ?");
        args.push(SqlValue::Integer(decode_cursor(cur)?));
    }
    sql.push_str(" ORDER BY id DESC LIMIT ?");
    args.push(SqlValue::Integer(f.limit as i64 + 1));
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
                metadata: serde_json::from_str(&r.get::<_, String>(8)?).unwrap_or(Value::Null),
                request_id: r.get(9)?,
                created_at: r.get(10)?,
            },
        ))
    })?;
    let mut out: Vec<(i64, AuditEvent)> = rows.collect::<rusqlite::Result<_>>()?;
    let has_more = out.len() > f.limit;
    out.truncate(f.limit);
    let next_cursor = if has_more { out.last().map(|(id, _)| encode_cursor(*id)) } else { None };
    Ok(Page { events: out.into_iter().map(|(_, e)| e).collect(), next_cursor, has_more })
}
