//! The connectors' wire shapes: the save body, the summary and detail of a connector (never a
//! secret's value), the message log page, and what the webhooks answer. Each is a type with its
//! schema derived (`schemars`), so the OpenAPI document states exactly what is sent.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::schema::FieldType;
use super::whatsapp::{Counts, LogEntry, LogPage};
use super::{Connector, Detail, Progress, Save, Saved, SourceSummary, SyncState, SyncStatus};
use crate::error::{Error, Result};

/// `PUT /connectors/{id}`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SaveBody {
    /// The keys to change (a key left out keeps its value; an empty string or null clears an
    /// optional key). Values are strings; a number or boolean is taken as its text.
    #[serde(default)]
    pub config: BTreeMap<String, Value>,
    /// `generated_secret` keys to generate anew.
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

/// A config field's type on the wire.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FieldTypeJson {
    Text,
    Secret,
    GeneratedSecret,
}

impl From<FieldType> for FieldTypeJson {
    fn from(t: FieldType) -> Self {
        match t {
            FieldType::Text => FieldTypeJson::Text,
            FieldType::Secret => FieldTypeJson::Secret,
            FieldType::GeneratedSecret => FieldTypeJson::GeneratedSecret,
        }
    }
}

/// One key of a connector's config schema.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FieldJson {
    pub key: &'static str,
    pub label: &'static str,
    #[serde(rename = "type")]
    pub kind: FieldTypeJson,
    pub required: bool,
    pub default: Option<&'static str>,
    pub help: &'static str,
}

/// A connector in the list.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectorJson {
    /// `wordpress` or `whatsapp`.
    pub id: &'static str,
    pub name: &'static str,
    /// `content` or `messaging`.
    pub kind: &'static str,
    pub description: &'static str,
    pub enabled: bool,
    /// Every required key holds a value.
    pub configured: bool,
    pub sync_supported: bool,
    pub config_schema: Vec<FieldJson>,
}

/// `GET /connectors`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectorListJson {
    /// `CONNECTOR_ENCRYPTION_KEY` is set (without it, secrets cannot be saved).
    pub encryption_configured: bool,
    pub connectors: Vec<ConnectorJson>,
}

/// A sync run's counts so far.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ProgressJson {
    pub seen: i64,
    pub indexed: i64,
    pub unchanged: i64,
    pub removed: i64,
}

impl From<Progress> for ProgressJson {
    fn from(p: Progress) -> Self {
        ProgressJson { seen: p.seen, indexed: p.indexed, unchanged: p.unchanged, removed: p.removed }
    }
}

/// A sync run's status.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SyncStatusJson {
    Idle,
    Queued,
    Running,
}

/// Where a connector's sync stands (null fields for WhatsApp, which does not sync).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncStateJson {
    pub status: SyncStatusJson,
    pub queued: bool,
    pub running: bool,
    pub backfill_completed_at: Option<String>,
    pub last_sync_at: Option<String>,
    pub last_sync_finished_at: Option<String>,
    pub modified_cursor: Option<String>,
    pub last_ingested_count: Option<i64>,
    /// Operator-safe text; a successful sync clears it.
    pub last_error: Option<String>,
    pub progress: Option<ProgressJson>,
}

impl From<&SyncState> for SyncStateJson {
    fn from(s: &SyncState) -> Self {
        let status = s.status.unwrap_or(SyncStatus::Idle);
        SyncStateJson {
            status: match status {
                SyncStatus::Idle => SyncStatusJson::Idle,
                SyncStatus::Queued => SyncStatusJson::Queued,
                SyncStatus::Running => SyncStatusJson::Running,
            },
            queued: status == SyncStatus::Queued,
            running: status == SyncStatus::Running,
            backfill_completed_at: s.backfill_completed_at.clone(),
            last_sync_at: s.last_sync_at.clone(),
            last_sync_finished_at: s.last_sync_finished_at.clone(),
            modified_cursor: s.modified_cursor.clone(),
            last_ingested_count: s.last_ingested_count,
            last_error: s.last_error.clone(),
            progress: s.progress.map(ProgressJson::from),
        }
    }
}

/// WhatsApp's message log counts over the 90 days kept.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MessageCountsJson {
    pub inbound: i64,
    pub outbound: i64,
    /// Inbound messages whose turn failed, and replies not sent (outside the window).
    pub failed: i64,
    /// Text messages waiting for their turn.
    pub pending: i64,
}

impl From<&Counts> for MessageCountsJson {
    fn from(m: &Counts) -> Self {
        MessageCountsJson { inbound: m.inbound, outbound: m.outbound, failed: m.failed, pending: m.pending }
    }
}

/// A connector with its config (plain values, defaults filled in), the secrets set, the sync
/// state and its webhook URL.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectorDetailJson {
    #[serde(flatten)]
    pub summary: ConnectorJson,
    /// The plain (non-secret) values.
    pub config: BTreeMap<String, Option<String>>,
    /// The secret keys that hold a value (never the values).
    pub secrets_set: Vec<String>,
    pub source_id: Option<String>,
    /// The URL to paste into the other system.
    pub webhook_url: String,
    pub sync_state: SyncStateJson,
    pub updated_at: Option<String>,
    /// WhatsApp only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages: Option<MessageCountsJson>,
}

/// `{connector}`: what reads, enable and disable answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ConnectorEnvelope {
    pub connector: ConnectorDetailJson,
}

/// `PUT` answers the connector and what it generated (shown this once).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SavedJson {
    pub connector: ConnectorDetailJson,
    /// The `generated_secret` values made by this save, by key: shown this once.
    pub generated_secrets: BTreeMap<String, String>,
}

/// `202 {accepted: true}`: the work goes on after the response.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AcceptedJson {
    pub accepted: bool,
}

/// What a WhatsApp delivery answers: how many of its messages were new.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReceivedJson {
    pub received: usize,
}

/// A connector in the list.
pub fn summary(c: &Connector) -> ConnectorJson {
    ConnectorJson {
        id: c.id.as_str(),
        name: c.id.name(),
        kind: c.id.kind(),
        description: c.id.description(),
        enabled: c.enabled,
        configured: c.configured(),
        sync_supported: c.id.sync_supported(),
        config_schema: c
            .id
            .schema()
            .iter()
            .map(|f| FieldJson {
                key: f.key,
                label: f.label,
                kind: f.kind.into(),
                required: f.required,
                default: f.default,
                help: f.help,
            })
            .collect(),
    }
}

/// A connector with everything the detail shows.
pub fn detail(d: &Detail) -> ConnectorDetailJson {
    let c = &d.connector;
    ConnectorDetailJson {
        summary: summary(c),
        config: c
            .id
            .schema()
            .iter()
            .filter(|f| f.kind.shown())
            .map(|f| (f.key.to_string(), c.value(f.key).map(str::to_string)))
            .collect(),
        secrets_set: c.secrets_set(),
        source_id: c.source_id.clone(),
        webhook_url: d.webhook_url.clone(),
        sync_state: SyncStateJson::from(&c.sync),
        updated_at: c.updated_at.clone(),
        messages: d.messages.as_ref().map(MessageCountsJson::from),
    }
}

pub fn envelope(d: &Detail) -> ConnectorEnvelope {
    ConnectorEnvelope { connector: detail(d) }
}

pub fn saved(s: &Saved) -> SavedJson {
    SavedJson { connector: detail(&s.detail), generated_secrets: s.generated.clone() }
}

/// What `GET /document/sources` says of a connector (its `connectors` list).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceConnectorJson {
    pub id: &'static str,
    pub name: &'static str,
    pub enabled: bool,
    pub source_id: Option<String>,
    /// The documents of its source (content connectors).
    pub document_count: Option<i64>,
    /// The messages in its log (messaging connectors).
    pub message_count: Option<i64>,
}

pub fn source_summary(s: &SourceSummary, document_count: Option<i64>) -> SourceConnectorJson {
    SourceConnectorJson {
        id: s.id.as_str(),
        name: s.id.name(),
        enabled: s.enabled,
        source_id: s.source_id.clone(),
        document_count,
        message_count: s.message_count,
    }
}

/// The `connector` object on a connector's source.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OnSourceJson {
    pub id: &'static str,
    pub enabled: bool,
    pub sync_state: SyncStateJson,
}

pub fn on_source(s: &SourceSummary) -> OnSourceJson {
    OnSourceJson { id: s.id.as_str(), enabled: s.enabled, sync_state: SyncStateJson::from(&s.sync) }
}

/// One row of WhatsApp's message log.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogEntryJson {
    pub id: String,
    /// `in` or `out`.
    pub direction: String,
    /// The customer's WhatsApp id.
    pub wa_id: String,
    /// `text`, `image`, …
    pub kind: String,
    pub body: Option<String>,
    pub status: String,
    pub error: Option<String>,
    pub conversation_id: Option<String>,
    pub delivery_id: Option<String>,
    /// The outbox delivery's status (replies that were queued).
    pub delivery_status: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl From<&LogEntry> for LogEntryJson {
    fn from(e: &LogEntry) -> Self {
        LogEntryJson {
            id: e.id.clone(),
            direction: e.direction.clone(),
            wa_id: e.wa_id.clone(),
            kind: e.kind.clone(),
            body: e.body.clone(),
            status: e.status.clone(),
            error: e.error.clone(),
            conversation_id: e.conversation_id.clone(),
            delivery_id: e.delivery_id.clone(),
            delivery_status: e.delivery_status.clone(),
            created_at: e.created_at.clone(),
            updated_at: e.updated_at.clone(),
        }
    }
}

/// `GET /connectors/whatsapp/messages`: newest first.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogPageJson {
    pub messages: Vec<LogEntryJson>,
    pub next_cursor: Option<String>,
    pub has_more: bool,
}

pub fn log_page(p: &LogPage) -> LogPageJson {
    LogPageJson {
        messages: p.entries.iter().map(LogEntryJson::from).collect(),
        next_cursor: p.next_cursor.clone(),
        has_more: p.next_cursor.is_some(),
    }
}

/// `GET /connectors/whatsapp/messages` query.
#[derive(Debug, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogQuery {
    /// Page size (default 50, at most 200).
    pub limit: Option<usize>,
    /// `nextCursor` of the previous page.
    pub cursor: Option<String>,
    /// `in` or `out`.
    pub direction: Option<String>,
}

/// Meta's handshake query on `GET /api/connectors/whatsapp/{workspaceId}/webhook`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Handshake {
    /// `subscribe`.
    #[serde(rename = "hub.mode")]
    pub mode: Option<String>,
    /// The connector's `verify_token`.
    #[serde(rename = "hub.verify_token")]
    pub token: Option<String>,
    /// Echoed back as text when the token matches.
    #[serde(rename = "hub.challenge")]
    pub challenge: Option<String>,
}

/// The WordPress push's query: the secret may come as a parameter (plugins that cannot set
/// headers); other parameters a plugin adds are ignored.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PushQuery {
    /// The webhook shared secret (instead of `X-Webhook-Secret`).
    pub secret: Option<String>,
}
