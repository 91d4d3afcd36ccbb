//! The audit log: an append-only table (SQL triggers refuse updates and deletes) and one function
//! every module calls inside the transaction of the change it records. Metadata carries ids, counts
//! and names, never secrets or document or message content.

pub mod api;
mod store;

use base64::Engine;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::ids::{OrgId, WorkspaceId};
use crate::storage::{Conn, Tx};

/// An event's free-form metadata (ids, counts, names; never secrets or content). Stored as JSON.
pub type AuditMeta = Value;

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
    pub metadata: AuditMeta,
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
    pub fn meta(mut self, metadata: AuditMeta) -> Self {
        self.metadata = metadata;
        self
    }
}

/// Records `ev` in the caller's transaction. When only a workspace is given, its organization is
/// filled in from the workspace.
pub fn record(tx: &Tx, now: &str, actor: &Actor, ev: Event) -> Result<()> {
    store::insert(tx, now, actor, &ev)
}

/// A recorded event.
#[derive(Debug, Clone)]
pub struct AuditEvent {
    pub id: String,
    pub workspace_id: Option<String>,
    pub actor: AuditActor,
    pub action: String,
    pub target: Option<AuditTarget>,
    pub metadata: AuditMeta,
    pub request_id: Option<String>,
    pub created_at: String,
}

/// Who did it, as recorded.
#[derive(Debug, Clone)]
pub struct AuditActor {
    pub kind: String,
    pub id: Option<String>,
}

/// What it was done to.
#[derive(Debug, Clone)]
pub struct AuditTarget {
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

/// A page of events, newest first.
#[derive(Debug, Clone)]
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
pub fn list(c: &Conn, org: &OrgId, f: &Filter) -> Result<Page> {
    let before = f.cursor.as_deref().map(decode_cursor).transpose()?;
    let mut out = store::list(c, org, f, before, f.limit + 1)?;
    let has_more = out.len() > f.limit;
    out.truncate(f.limit);
    let next_cursor = if has_more { out.last().map(|(id, _)| encode_cursor(*id)) } else { None };
    Ok(Page { events: out.into_iter().map(|(_, e)| e).collect(), next_cursor, has_more })
}
