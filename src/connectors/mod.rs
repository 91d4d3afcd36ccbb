//! Connectors: the built-in links between a workspace and an outside system — `wordpress` keeps a
//! WordPress site's posts and pages in the knowledge base, `whatsapp` lets customers talk to the
//! agent over the WhatsApp Cloud API.
//!
//! - The framework (here): each connector's config schema (`schema.rs`), saving with per-key
//!   validation, secrets sealed at rest (`crypto`, `CONNECTOR_ENCRYPTION_KEY`) and generated
//!   secrets shown once, enable/disable, sync requests and their state; audit events that never
//!   carry a secret. SQL only in `store.rs`; wire shapes in `api.rs`; deployment settings in
//!   `config.rs`.
//! - `wordpress/`: the source, backfill, pushes, polling and incremental syncs over the REST API.
//! - `whatsapp/`: the webhook (verify token, signatures), the message log, bursts answered as one
//!   turn, replies through the outbox, the 24-hour window.
//!
//! Like `delivery/`, this module makes outbound requests, always through `delivery`'s SSRF-guarded
//! client.

pub mod api;
pub mod config;
pub mod schema;
mod store;
pub mod whatsapp;
pub mod wordpress;

use std::collections::BTreeMap;

use base64::Engine;
use rand::RngCore;
use serde_json::json;

use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::crypto::SealedJson;
use crate::error::{Error, ErrorCode, Result};
use crate::ids::WorkspaceId;
use crate::names::names;
use schema::{Field, FieldType};

names! {
    /// The built-in connectors (their ids are the type identifiers).
    pub ConnectorId { Wordpress = "wordpress", Whatsapp = "whatsapp" }
}

names! {
    /// Where a connector's sync stands.
    pub SyncStatus { Idle = "idle", Queued = "queued", Running = "running" }
}

impl ConnectorId {
    pub fn schema(self) -> &'static [Field] {
        match self {
            ConnectorId::Wordpress => schema::WORDPRESS,
            ConnectorId::Whatsapp => schema::WHATSAPP,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            ConnectorId::Wordpress => "WordPress",
            ConnectorId::Whatsapp => "WhatsApp",
        }
    }
    /// `content` (brings documents in) or `messaging` (conversations in and out).
    pub fn kind(self) -> &'static str {
        match self {
            ConnectorId::Wordpress => "content",
            ConnectorId::Whatsapp => "messaging",
        }
    }
    pub fn description(self) -> &'static str {
        match self {
            ConnectorId::Wordpress => {
                "Keeps a WordPress site's posts and pages (and custom post types) in the knowledge base: a backfill, then pushes from the site and optional polling."
            }
            ConnectorId::Whatsapp => {
                "Lets customers talk to the agent on WhatsApp (Cloud API): replies, human takeover from the Inbox and routines."
            }
        }
    }
    pub fn sync_supported(self) -> bool {
        self == ConnectorId::Wordpress
    }
    /// The key whose value is unique across the deployment.
    pub fn channel_field(self) -> &'static str {
        match self {
            ConnectorId::Wordpress => "site_url",
            ConnectorId::Whatsapp => "phone_number_id",
        }
    }
    /// The public webhook path for a workspace.
    pub fn webhook_path(self, ws: &WorkspaceId) -> String {
        format!("/api/connectors/{}/{}/webhook", self.as_str(), ws.0)
    }
}

/// What a sync run has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Progress {
    pub seen: i64,
    pub indexed: i64,
    pub unchanged: i64,
    pub removed: i64,
}

/// A connector's sync state (WordPress; WhatsApp never syncs).
#[derive(Debug, Clone, Default)]
pub struct SyncState {
    pub status: Option<SyncStatus>,
    pub run_id: Option<String>,
    pub mode: Option<String>,
    pub again: bool,
    pub progress: Option<Progress>,
    pub backfill_completed_at: Option<String>,
    pub last_sync_at: Option<String>,
    pub last_sync_finished_at: Option<String>,
    pub modified_cursor: Option<String>,
    pub last_ingested_count: Option<i64>,
    pub last_error: Option<String>,
}

/// A workspace's connector as stored (a connector never saved has defaults only).
#[derive(Debug, Clone)]
pub struct Connector {
    pub workspace_id: WorkspaceId,
    pub id: ConnectorId,
    pub enabled: bool,
    /// Plain values as saved (defaults not filled in).
    pub plain: BTreeMap<String, String>,
    /// Sealed secrets by key.
    pub sealed: BTreeMap<String, SealedJson>,
    pub source_id: Option<String>,
    pub sync: SyncState,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
}

impl Connector {
    fn unsaved(ws: &WorkspaceId, id: ConnectorId) -> Connector {
        Connector {
            workspace_id: ws.clone(),
            id,
            enabled: false,
            plain: BTreeMap::new(),
            sealed: BTreeMap::new(),
            source_id: None,
            sync: SyncState::default(),
            created_at: None,
            updated_at: None,
        }
    }
    pub fn secrets_set(&self) -> Vec<String> {
        self.sealed.keys().cloned().collect()
    }
    /// Every required key holds a value.
    pub fn configured(&self) -> bool {
        schema::first_missing(self.id.schema(), &self.plain, &self.secrets_set()).is_none()
    }
    /// A plain value, or the key's default.
    pub fn value(&self, key: &str) -> Option<&str> {
        schema::value(self.id.schema(), &self.plain, key)
    }
    /// Opens a sealed secret.
    pub fn secret(&self, app: &App, key: &str) -> Result<Option<String>> {
        match self.sealed.get(key) {
            None => Ok(None),
            Some(v) => {
                crate::crypto::open_text(encryption_key(app), v, &aad(&self.workspace_id, self.id, key)).map(Some)
            }
        }
    }
}

/// A connector as the API shows it: the record, where its webhook is, and (WhatsApp) its
/// message counts.
#[derive(Debug, Clone)]
pub struct Detail {
    pub connector: Connector,
    pub webhook_url: String,
    pub messages: Option<whatsapp::Counts>,
}

/// A save: the keys to change and the generated secrets to make anew.
#[derive(Debug, Clone, Default)]
pub struct Save {
    pub config: BTreeMap<String, String>,
    pub rotate: Vec<String>,
}

/// What a save answers: the connector and the secrets generated by it (shown this once).
pub struct Saved {
    pub detail: Detail,
    pub generated: BTreeMap<String, String>,
}

/// The job kinds of connectors, with their handlers.
pub fn jobs() -> Vec<(&'static str, crate::jobs::Handler)> {
    let mut v = wordpress::jobs();
    v.extend(whatsapp::jobs());
    v
}

fn encryption_key(app: &App) -> Option<&[u8; 32]> {
    app.config.encryption_key.as_ref().map(|k| k.expose())
}

fn aad(ws: &WorkspaceId, id: ConnectorId, key: &str) -> String {
    format!("connector:{}:{}:{key}", ws.0, id.as_str())
}

pub fn parse_id(id: &str) -> Result<ConnectorId> {
    ConnectorId::parse(id).ok_or_else(|| Error::not_found("connector"))
}

/// What every change asks first: `workspace.settings.manage` from a dashboard session; the
/// connector and the workspace it is changed in.
fn changing(p: &Principal, id: &str) -> Result<(ConnectorId, WorkspaceId)> {
    p.require(Perm::SettingsManage)?;
    p.require_session()?;
    Ok((parse_id(id)?, p.workspace_id.clone()))
}

fn conflict(code: &str, message: impl Into<String>) -> Error {
    Error::new(ErrorCode::Conflict, message).with_details(json!({ "code": code }))
}

/// The connector `id` of `ws` (defaults when never saved).
pub fn load(app: &App, ws: &WorkspaceId, id: ConnectorId) -> Result<Connector> {
    Ok(app.db.read(|c| store::get(c, ws, id))?.unwrap_or_else(|| Connector::unsaved(ws, id)))
}

fn detail(app: &App, c: Connector) -> Result<Detail> {
    let base = app.config.public_url.as_deref().map(|u| u.trim_end_matches('/')).unwrap_or("");
    let webhook_url = format!("{base}{}", c.id.webhook_path(&c.workspace_id));
    let messages = match c.id {
        ConnectorId::Whatsapp => Some(whatsapp::counts(app, &c.workspace_id)?),
        ConnectorId::Wordpress => None,
    };
    Ok(Detail { connector: c, webhook_url, messages })
}

/// `GET /connectors`: both built-in connectors of the workspace.
pub fn list(app: &App, p: &Principal) -> Result<Vec<Connector>> {
    p.require(Perm::SettingsRead)?;
    ConnectorId::ALL.iter().map(|id| load(app, &p.workspace_id, *id)).collect()
}

/// `GET /connectors/{id}`.
pub fn get(app: &App, p: &Principal, id: &str) -> Result<Detail> {
    p.require(Perm::SettingsRead)?;
    let id = parse_id(id)?;
    detail(app, load(app, &p.workspace_id, id)?)
}

fn generate_secret() -> String {
    let mut b = [0u8; 32];
    rand::rng().fill_bytes(&mut b);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

/// Checks the values that have rules beyond their type (the whole config as it will be).
fn check_values(app: &App, ws: &WorkspaceId, id: ConnectorId, plain: &mut BTreeMap<String, String>) -> Result<()> {
    if id == ConnectorId::Wordpress
        && let Some(u) = plain.get("site_url").cloned()
    {
        let stored = schema::site_url(&u, |u| app.outbound.guard().check_url(u))?;
        plain.insert("site_url".into(), stored);
    }
    let s = id.schema();
    let v = |k: &str| schema::value(s, plain, k).map(str::to_string);
    match id {
        ConnectorId::Wordpress => {
            if let Some(t) = v("post_types") {
                schema::post_types(&t)?;
            }
            if let Some(n) = v("poll_interval_sec") {
                schema::poll_interval(&n)?;
            }
        }
        ConnectorId::Whatsapp => {
            for k in ["phone_number_id", "business_account_id"] {
                if let Some(x) = v(k) {
                    schema::meta_id(k, &x)?;
                }
            }
            if let Some(n) = v("conversation_timeout_hours") {
                schema::timeout_hours(&n)?;
            }
            if let Some(agent) = v("agent_id") {
                let known = app.db.read(|c| crate::agents::find(c, ws, &agent))?.is_some();
                if !known {
                    return Err(Error::invalid_field("config.agent_id", "agent_id names no agent of this workspace"));
                }
            }
        }
    }
    Ok(())
}

/// `PUT /connectors/{id}`: validates per key, seals secrets, generates what is missing.
pub fn save(app: &App, p: &Principal, actor: &Actor, id: &str, cmd: Save) -> Result<Saved> {
    let (id, ws) = changing(p, id)?;
    let current = load(app, &ws, id)?;
    let ch = schema::changes(id.schema(), cmd.config, &cmd.rotate, &current.secrets_set())?;
    let mut plain = current.plain.clone();
    for k in &ch.cleared {
        plain.remove(*k);
    }
    plain.extend(ch.plain.clone());
    check_values(app, &ws, id, &mut plain)?;
    let mut generated = BTreeMap::new();
    for k in &ch.generate {
        generated.insert(k.to_string(), generate_secret());
    }
    let mut sealed = current.sealed.clone();
    for k in &ch.cleared {
        sealed.remove(*k);
    }
    for (k, v) in ch.secrets.iter().chain(generated.iter()) {
        sealed.insert(k.clone(), crate::crypto::seal_text(encryption_key(app), v, &aad(&ws, id, k))?);
    }
    if id == ConnectorId::Wordpress {
        let user = plain.contains_key("wp_username");
        let pass = sealed.contains_key("wp_application_password");
        let field = if user { "config.wp_application_password" } else { "config.wp_username" };
        if user != pass {
            return Err(Error::invalid_field(field, "wp_username and wp_application_password are set together"));
        }
        let polls = schema::value(id.schema(), &plain, "poll_interval_sec").is_some_and(|v| v != "0");
        if polls && !user {
            return Err(Error::invalid_field(
                "config.wp_username",
                "polling (poll_interval_sec > 0) needs wp_username and wp_application_password",
            ));
        }
    }
    let channel = plain.get(id.channel_field()).cloned();
    let changed: Vec<&str> = id
        .schema()
        .iter()
        .filter(|f| {
            ch.cleared.contains(&f.key)
                || ch.generate.contains(&f.key)
                || ch.secrets.contains_key(f.key)
                || (ch.plain.contains_key(f.key) && current.plain.get(f.key) != plain.get(f.key))
        })
        .map(|f| f.key)
        .collect();
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        if let Some(key) = &channel
            && let Some(owner) = store::channel_owner(tx, id, key)?
            && owner != ws
        {
            return Err(conflict(
                "connector_channel_taken",
                format!("another workspace already uses this {}", id.channel_field()),
            ));
        }
        let now_row = store::get(tx, &ws, id)?;
        let site_changed = id == ConnectorId::Wordpress
            && now_row.as_ref().and_then(|c| c.plain.get("site_url")) != plain.get("site_url");
        if site_changed
            && now_row.as_ref().is_some_and(|c| c.sync.status.is_some_and(|s| s != SyncStatus::Idle))
        {
            return Err(conflict("connector_sync_running", "site_url cannot change while a sync is queued or running"));
        }
        store::put_config(tx, &ws, id, &plain, &sealed, channel.as_deref(), &now)?;
        if site_changed {
            // another site: the next sync reads everything, and removes what the old site had
            store::reset_cursor(tx, &ws, id, &now)?;
        }
        let meta = json!({
            "changed": changed,
            "secretsChanged": changed.iter().filter(|k| schema::field_of(id.schema(), k).is_some_and(|f| f.kind.is_secret())).collect::<Vec<_>>(),
        });
        audit::record(
            tx,
            &now,
            actor,
            Event::new("connector.updated").workspace(&ws).target("connector", id.as_str()).meta(meta),
        )?;
        if id == ConnectorId::Wordpress
            && let Some(c) = store::get(tx, &ws, id)?
            && c.enabled
        {
            wordpress::after_save(app, tx, &c)?;
        }
        Ok(())
    })?;
    Ok(Saved { detail: detail(app, load(app, &ws, id)?)?, generated })
}

/// `POST /connectors/{id}/enable`: 400 naming the first missing key when the config is incomplete.
pub fn enable(app: &App, p: &Principal, actor: &Actor, id: &str) -> Result<Detail> {
    let (id, ws) = changing(p, id)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let c = store::get(tx, &ws, id)?.unwrap_or_else(|| Connector::unsaved(&ws, id));
        if let Some(missing) = schema::first_missing(id.schema(), &c.plain, &c.secrets_set()) {
            return Err(Error::invalid_field(
                &format!("config.{missing}"),
                format!("incomplete connector config: {missing} is required before the connector can be enabled"),
            ));
        }
        if c.enabled {
            return Ok(());
        }
        store::set_enabled(tx, &ws, id, true, &now)?;
        if id == ConnectorId::Wordpress {
            wordpress::on_enable(app, tx, &c, &now)?;
        }
        audit::record(tx, &now, actor, Event::new("connector.enabled").workspace(&ws).target("connector", id.as_str()))
    })?;
    detail(app, load(app, &ws, id)?)
}

/// `POST /connectors/{id}/disable`: stops syncs, polling and deliveries; keeps what came in.
pub fn disable(app: &App, p: &Principal, actor: &Actor, id: &str) -> Result<Detail> {
    let (id, ws) = changing(p, id)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let Some(c) = store::get(tx, &ws, id)?.filter(|c| c.enabled) else { return Ok(()) };
        store::set_enabled(tx, &ws, id, false, &now)?;
        if c.sync.status.is_some_and(|s| s != SyncStatus::Idle) {
            store::end_run(tx, &ws, id, &now)?;
        }
        audit::record(tx, &now, actor, Event::new("connector.disabled").workspace(&ws).target("connector", id.as_str()))
    })?;
    detail(app, load(app, &ws, id)?)
}

/// `POST /connectors/{id}/sync`: queues a full sync (WordPress). 409 when the connector does not
/// sync, is disabled, or a sync is queued or running.
pub fn sync(app: &App, p: &Principal, actor: &Actor, id: &str) -> Result<()> {
    let (id, ws) = changing(p, id)?;
    if !id.sync_supported() {
        return Err(conflict(
            "sync_unsupported",
            format!("the {} connector has no manual sync: messages arrive through its webhook", id.name()),
        ));
    }
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let c = store::get(tx, &ws, id)?.filter(|c| c.enabled).ok_or_else(|| {
            conflict("connector_disabled", format!("enable the {} connector before syncing it", id.name()))
        })?;
        if c.sync.status.is_some_and(|s| s != SyncStatus::Idle) {
            return Err(conflict("sync_running", "a sync of this connector is already queued or running"));
        }
        wordpress::queue_run(app, tx, &c, wordpress::Mode::Full, &now)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("connector.sync_requested").workspace(&ws).target("connector", id.as_str()),
        )
    })?;
    Ok(())
}

/// The enabled connector of `ws` (for webhooks): 404 when it is missing or disabled.
pub fn enabled(app: &App, ws: &str, id: ConnectorId) -> Result<Connector> {
    let ws = WorkspaceId(ws.to_string());
    app.db.read(|c| store::get(c, &ws, id))?.filter(|c| c.enabled).ok_or_else(|| Error::not_found("connector"))
}

/// The connector whose channel field is `key` (WhatsApp routing by phone number id).
pub fn by_channel(app: &App, id: ConnectorId, key: &str) -> Result<Option<Connector>> {
    app.db.read(|c| store::by_channel(c, id, key))
}

/// What a connector contributes to the sources list: its source, whether it is on, and its
/// message count (WhatsApp).
pub struct SourceSummary {
    pub id: ConnectorId,
    pub enabled: bool,
    pub source_id: Option<String>,
    pub sync: SyncState,
    pub message_count: Option<i64>,
}

/// Both connectors of the workspace, for `GET /document/sources`.
pub fn source_summaries(app: &App, p: &Principal) -> Result<Vec<SourceSummary>> {
    p.require(Perm::DocumentsRead)?;
    let mut out = Vec::new();
    for id in ConnectorId::ALL {
        let c = load(app, &p.workspace_id, *id)?;
        let message_count = match id {
            ConnectorId::Whatsapp => Some(whatsapp::counts(app, &p.workspace_id)?.total()),
            ConnectorId::Wordpress => None,
        };
        out.push(SourceSummary { id: *id, enabled: c.enabled, source_id: c.source_id, sync: c.sync, message_count });
    }
    Ok(out)
}

/// Constant-time equality of two secrets (their SHA-256 digests compared without early exit, so
/// neither the content nor the length leaks through timing).
pub fn secret_eq(a: &str, b: &str) -> bool {
    use sha2::{Digest, Sha256};
    let (x, y) = (Sha256::digest(a.as_bytes()), Sha256::digest(b.as_bytes()));
    x.iter().zip(y.iter()).fold(0u8, |acc, (p, q)| acc | (p ^ q)) == 0
}

impl FieldType {
    /// Whether a field of this type is shown in `config` (plain values only).
    pub fn shown(self) -> bool {
        !self.is_secret()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_in_full() {
        assert!(secret_eq("abc", "abc"));
        assert!(!secret_eq("abc", "abd"));
        assert!(!secret_eq("abc", "abcd"));
        assert!(!secret_eq("", "x"));
    }

    #[test]
    fn ids_and_paths() {
        assert_eq!(parse_id("wordpress").unwrap(), ConnectorId::Wordpress);
        assert_eq!(parse_id("slack").unwrap_err().code, ErrorCode::NotFound);
        let ws = WorkspaceId("w1".into());
        assert_eq!(ConnectorId::Whatsapp.webhook_path(&ws), "/api/connectors/whatsapp/w1/webhook");
        assert_eq!(generate_secret().len(), 43);
    }
}
