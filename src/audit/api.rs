//! The wire shapes of the audit log (owned by the HTTP edge; `mod.rs` knows nothing of them).

use serde::Serialize;

use super::{AuditEvent, AuditMeta, Page};

/// `GET /audit-events`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PageJson {
    pub events: Vec<EventJson>,
    pub next_cursor: Option<String>,
    pub has_more: bool,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventJson {
    pub id: String,
    pub workspace_id: Option<String>,
    pub actor: KindJson,
    pub action: String,
    pub target: Option<KindJson>,
    pub metadata: AuditMeta,
    pub request_id: Option<String>,
    pub created_at: String,
}

/// `{type, id}` of an actor or a target.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct KindJson {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: Option<String>,
}

impl From<AuditEvent> for EventJson {
    fn from(e: AuditEvent) -> Self {
        EventJson {
            id: e.id,
            workspace_id: e.workspace_id,
            actor: KindJson { kind: e.actor.kind, id: e.actor.id },
            action: e.action,
            target: e.target.map(|t| KindJson { kind: t.kind, id: t.id }),
            metadata: e.metadata,
            request_id: e.request_id,
            created_at: e.created_at,
        }
    }
}

impl From<Page> for PageJson {
    fn from(p: Page) -> Self {
        PageJson {
            events: p.events.into_iter().map(EventJson::from).collect(),
            next_cursor: p.next_cursor,
            has_more: p.has_more,
        }
    }
}
