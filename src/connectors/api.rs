//! The connectors' wire shapes: the save body, the summary and detail of a connector (never a
//! secret's value), the message log page.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

use super::whatsapp::{LogEntry, LogPage};
use super::{Connector, ConnectorId, Detail, Save, Saved, SourceSummary, SyncState, SyncStatus};
use crate::error::{Error, Result};

/// `PUT /connectors/{id}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SaveBody {
    #[serde(default)]
    pub config: BTreeMap<String, Value>,
    #[serde(default)]
    pub rotate: Vec<String>,
}

impl SaveBody {
    /// Config values are strings; a number or boolean is taken as its text, null clears the key.
    pub fn into_save(self) -> Result<Save> {
        let mut config = BTreeMap::new();
        for (k, v) in self.config {
            let s = match v {
                Value::String(s) => s,
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                Value::Null => String::new(),
                _ => {
                    return Err(Error::invalid_field(&format!("config.{k}"), format!("config.{k} must be a string")));
                }
            };
            config.insert(k, s);
        }
        Ok(Save { config, rotate: self.rotate })
    }
}

fn schema_json(id: ConnectorId) -> Value {
    id.schema()
        .iter()
        .map(|f| {
            json!({"key": f.key, "label": f.label, "type": f.kind.as_str(), "required": f.required,
                   "default": f.default, "help": f.help})
        })
        .collect()
}

/// A connector in the list.
pub fn summary(c: &Connector) -> Value {
    json!({
        "id": c.id.as_str(),
        "name": c.id.name(),
        "kind": c.id.kind(),
        "description": c.id.description(),
        "enabled": c.enabled,
        "configured": c.configured(),
        "syncSupported": c.id.sync_supported(),
        "configSchema": schema_json(c.id),
    })
}

pub fn sync_state(s: &SyncState) -> Value {
    let status = s.status.unwrap_or(SyncStatus::Idle);
    json!({
        "status": status.as_str(),
        "queued": status == SyncStatus::Queued,
        "running": status == SyncStatus::Running,
        "backfillCompletedAt": s.backfill_completed_at,
        "lastSyncAt": s.last_sync_at,
        "lastSyncFinishedAt": s.last_sync_finished_at,
        "modifiedCursor": s.modified_cursor,
        "lastIngestedCount": s.last_ingested_count,
        "lastError": s.last_error,
        "progress": s.progress.map(|p| json!({"seen": p.seen, "indexed": p.indexed, "unchanged": p.unchanged, "removed": p.removed})),
    })
}

/// A connector with its config (plain values, defaults filled in), the secrets set, the sync
/// state and its webhook URL.
pub fn detail(d: &Detail) -> Value {
    let c = &d.connector;
    let mut v = summary(c);
    let config: serde_json::Map<String, Value> =
        c.id.schema().iter().filter(|f| f.kind.shown()).map(|f| (f.key.to_string(), json!(c.value(f.key)))).collect();
    v["config"] = Value::Object(config);
    v["secretsSet"] = json!(c.secrets_set());
    v["sourceId"] = json!(c.source_id);
    v["webhookUrl"] = json!(d.webhook_url);
    v["syncState"] = sync_state(&c.sync);
    v["updatedAt"] = json!(c.updated_at);
    if let Some(m) = &d.messages {
        v["messages"] = json!({"inbound": m.inbound, "outbound": m.outbound, "failed": m.failed, "pending": m.pending});
    }
    v
}

/// `PUT` answers the connector and what it generated (shown this once).
pub fn saved(s: &Saved) -> Value {
    json!({"connector": detail(&s.detail), "generatedSecrets": s.generated})
}

/// What `GET /document/sources` says of the connectors.
pub fn source_summary(s: &SourceSummary, document_count: Option<i64>) -> Value {
    json!({
        "id": s.id.as_str(),
        "name": s.id.name(),
        "enabled": s.enabled,
        "sourceId": s.source_id,
        "documentCount": document_count,
        "messageCount": s.message_count,
    })
}

/// The `connector` object on a connector's source.
pub fn on_source(s: &SourceSummary) -> Value {
    json!({"id": s.id.as_str(), "enabled": s.enabled, "syncState": sync_state(&s.sync)})
}

fn entry(e: &LogEntry) -> Value {
    json!({
        "id": e.id,
        "direction": e.direction,
        "waId": e.wa_id,
        "kind": e.kind,
        "body": e.body,
        "status": e.status,
        "error": e.error,
        "conversationId": e.conversation_id,
        "deliveryId": e.delivery_id,
        "deliveryStatus": e.delivery_status,
        "createdAt": e.created_at,
        "updatedAt": e.updated_at,
    })
}

/// `GET /connectors/whatsapp/messages`.
pub fn log_page(p: &LogPage) -> Value {
    json!({
        "messages": p.entries.iter().map(entry).collect::<Vec<_>>(),
        "nextCursor": p.next_cursor,
        "hasMore": p.next_cursor.is_some(),
    })
}

/// `GET /connectors/whatsapp/messages` query.
#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogQuery {
    pub limit: Option<usize>,
    pub cursor: Option<String>,
    pub direction: Option<String>,
}
