//! Agents as authored: the agent record and its settings, the workspace's default agent, logos,
//! skills (`skills.rs`), directives with `#skill` chips (`directives.rs`), context variables
//! (`context.rs`) and immutable revisions (`revisions.rs`).
//!
//! Directives, skills, context-variable enablements and settings are the *draft*. Every
//! successful write to them advances the agent's draft generation (`touch`); a candidate revision
//! snapshots one generation; publishing a candidate is what visitors' new conversations use.

pub mod context;
pub mod directives;
pub mod revisions;
pub mod skills;

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, Result};
use crate::ids::WorkspaceId;
use crate::storage::Tx;

/// The agent format version exports carry.
pub const SCHEMA_VERSION: u32 = 4;
pub const MAX_NAME: usize = 200;
pub const MAX_LOGO_BYTES: usize = 512 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelChoice {
    pub provider: String,
    pub model: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Webhook {
    pub url: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[derive(Default)]
pub struct Delivery {
    pub recipient_emails: Vec<String>,
    pub webhook: Option<Webhook>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Theme {
    pub brand: String,
    pub brand_text: String,
    pub surface: String,
    pub text: String,
}

impl Default for Theme {
    fn default() -> Self {
        Theme {
            brand: "#0f172a".into(),
            brand_text: "#f8fafc".into(),
            surface: "#ffffff".into(),
            text: "#0f172a".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, tag = "mode")]
pub enum SourceScope {
    #[serde(rename = "all")]
    All,
    #[serde(rename = "selected", rename_all = "camelCase")]
    Selected { source_ids: Vec<String> },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[derive(Default)]
pub struct Surface {
    pub enabled: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct EmbedSurface {
    pub enabled: bool,
    pub allowed_origins: Vec<String>,
    pub launcher_label: String,
    pub launcher_position: String,
}

impl Default for EmbedSurface {
    fn default() -> Self {
        EmbedSurface {
            enabled: false,
            allowed_origins: vec![],
            launcher_label: "Chat with us".into(),
            launcher_position: "bottom-right".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Surfaces {
    pub authenticated_chat: Surface,
    pub anonymous_chat: Surface,
    pub website_embed: EmbedSurface,
}

impl Default for Surfaces {
    fn default() -> Self {
        Surfaces {
            authenticated_chat: Surface { enabled: true },
            anonymous_chat: Surface::default(),
            website_embed: EmbedSurface::default(),
        }
    }
}

/// Every authored agent setting (the name lives beside it). Unknown keys are refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Settings {
    pub custom_instruction: String,
    pub retrieval_enabled: bool,
    pub handoff_on_retrieval_miss: bool,
    pub chat_model_override: Option<ModelChoice>,
    pub suggested_questions_enabled: bool,
    pub citation_display_enabled: bool,
    pub contact_requests_enabled: bool,
    pub webhook_exports_enabled: bool,
    pub contact_request_delivery: Delivery,
    pub greeting_instruction: String,
    pub assistant_default_locale: Option<String>,
    pub proactive_greeting_enabled: bool,
    pub theme: Theme,
    pub source_scope: SourceScope,
    pub surface_settings: Surfaces,
    /// Per built-in skill overrides; retrieval overrides live under `"retrieval.answer"`.
    pub skill_settings: Map<String, Value>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            custom_instruction: String::new(),
            retrieval_enabled: true,
            handoff_on_retrieval_miss: false,
            chat_model_override: None,
            suggested_questions_enabled: true,
            citation_display_enabled: true,
            contact_requests_enabled: false,
            webhook_exports_enabled: false,
            contact_request_delivery: Delivery::default(),
            greeting_instruction: String::new(),
            assistant_default_locale: None,
            proactive_greeting_enabled: false,
            theme: Theme::default(),
            source_scope: SourceScope::All,
            surface_settings: Surfaces::default(),
            skill_settings: Map::new(),
        }
    }
}

fn hex_color(v: &str) -> bool {
    v.len() == 7 && v.starts_with('#') && v[1..].chars().all(|c| c.is_ascii_hexdigit())
}

pub fn check_http_url(field: &str, url: &str) -> Result<()> {
    let ok = url.len() <= 2048
        && reqwest::Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
    if ok { Ok(()) } else { Err(Error::invalid_field(field, "must be an http(s) URL of at most 2048 characters")) }
}

pub fn check_recipients(field: &str, emails: &mut Vec<String>) -> Result<()> {
    if emails.len() > 5 {
        return Err(Error::invalid_field(field, "at most 5 recipient emails"));
    }
    for e in emails.iter_mut() {
        *e = crate::auth::password::normalize_email(e)
            .map_err(|_| Error::invalid_field(field, format!("`{e}` is not a valid email address")))?;
    }
    emails.dedup();
    Ok(())
}

impl Settings {
    pub fn validate(&mut self) -> Result<()> {
        if self.custom_instruction.chars().count() > 2000 {
            return Err(Error::invalid_field("customInstruction", "customInstruction must be at most 2000 characters"));
        }
        if self.greeting_instruction.chars().count() > 200 {
            return Err(Error::invalid_field(
                "greetingInstruction",
                "greetingInstruction must be at most 200 characters",
            ));
        }
        if let Some(l) = &self.assistant_default_locale {
            let l = l.trim();
            if l.is_empty() {
                self.assistant_default_locale = None;
            } else if l.len() > 35
                || !l.split('-').all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric()))
            {
                return Err(Error::invalid_field(
                    "assistantDefaultLocale",
                    "assistantDefaultLocale must be a language tag like en or pt-BR",
                ));
            }
        }
        if let Some(m) = &self.chat_model_override {
            if !crate::models::PROVIDERS.contains(&m.provider.as_str()) {
                return Err(Error::invalid_field(
                    "chatModelOverride.provider",
                    format!("provider must be one of {}", crate::models::PROVIDERS.join(", ")),
                ));
            }
            if m.model.trim().is_empty() || m.model.chars().count() > 200 {
                return Err(Error::invalid_field("chatModelOverride.model", "model must be 1 to 200 characters"));
            }
        }
        check_recipients(
            "contactRequestDelivery.recipientEmails",
            &mut self.contact_request_delivery.recipient_emails,
        )?;
        if let Some(w) = &self.contact_request_delivery.webhook {
            check_http_url("contactRequestDelivery.webhook.url", &w.url)?;
        }
        for (k, v) in [
            ("brand", &self.theme.brand),
            ("brandText", &self.theme.brand_text),
            ("surface", &self.theme.surface),
            ("text", &self.theme.text),
        ] {
            if !hex_color(v) {
                return Err(Error::invalid_field(&format!("theme.{k}"), "colours are 6-digit hex like #0f172a"));
            }
        }
        if let SourceScope::Selected { source_ids } = &mut self.source_scope {
            source_ids.dedup();
            if source_ids.is_empty() || source_ids.len() > 200 {
                return Err(Error::invalid_field("sourceScope.sourceIds", "select 1 to 200 sources (or use mode all)"));
            }
        }
        let embed = &mut self.surface_settings.website_embed;
        if embed.allowed_origins.len() > 20 || embed.allowed_origins.iter().any(|o| o.len() > 200) {
            return Err(Error::invalid_field(
                "surfaceSettings.websiteEmbed.allowedOrigins",
                "at most 20 origins of at most 200 characters",
            ));
        }
        if embed.launcher_label.chars().count() > 80 {
            return Err(Error::invalid_field("surfaceSettings.websiteEmbed.launcherLabel", "at most 80 characters"));
        }
        if !["bottom-right", "bottom-left"].contains(&embed.launcher_position.as_str()) {
            return Err(Error::invalid_field(
                "surfaceSettings.websiteEmbed.launcherPosition",
                "bottom-right or bottom-left",
            ));
        }
        if let Some(r) = self.skill_settings.get("retrieval.answer") {
            skills::check_retrieval_config(r, "skillSettings.retrieval.answer")?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
pub struct Agent {
    pub id: String,
    pub workspace_id: WorkspaceId,
    pub name: String,
    pub is_default: bool,
    pub settings: Settings,
    pub draft_generation: i64,
    pub draft_updated_at: String,
    pub published_revision_id: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

const COLS: &str = "id, workspace_id, name, is_default, settings, draft_generation, draft_updated_at, published_revision_id, created_at, updated_at";

fn row(r: &rusqlite::Row) -> rusqlite::Result<Agent> {
    let raw: String = r.get(4)?;
    Ok(Agent {
        id: r.get(0)?,
        workspace_id: WorkspaceId(r.get(1)?),
        name: r.get(2)?,
        is_default: r.get::<_, i64>(3)? == 1,
        settings: serde_json::from_str(&raw).unwrap_or_default(),
        draft_generation: r.get(5)?,
        draft_updated_at: r.get(6)?,
        published_revision_id: r.get(7)?,
        created_at: r.get(8)?,
        updated_at: r.get(9)?,
    })
}

pub fn find(c: &Connection, ws: &WorkspaceId, id: &str) -> Result<Option<Agent>> {
    Ok(c.query_row(&format!("SELECT {COLS} FROM agents WHERE id = ?1 AND workspace_id = ?2"), params![id, ws.0], row)
        .optional()?)
}

/// The agent, or 404 when it is not in `ws`.
pub fn get_in(c: &Connection, ws: &WorkspaceId, id: &str) -> Result<Agent> {
    find(c, ws, id)?.ok_or_else(|| Error::not_found("agent"))
}

pub fn default_agent(c: &Connection, ws: &WorkspaceId) -> Result<Option<Agent>> {
    Ok(c.query_row(&format!("SELECT {COLS} FROM agents WHERE workspace_id = ?1 AND is_default = 1"), [&ws.0], row)
        .optional()?)
}

fn insert(tx: &Tx, ws: &WorkspaceId, name: &str, settings: &Settings, is_default: bool, now: &str) -> Result<String> {
    let id = crate::ids::new_id();
    tx.execute(
        "INSERT INTO agents (id, workspace_id, name, is_default, settings, draft_generation, draft_updated_at, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6, ?6, ?6)",
        params![id, ws.0, name, is_default as i64, serde_json::to_string(settings)?, now],
    )?;
    // new agents start published (v1 of their initial configuration), so a visitor never meets a draft
    revisions::publish_initial(tx, &id, ws, now)?;
    Ok(id)
}

/// Creates the workspace's default agent if it has none (new workspaces; older data dirs).
pub fn ensure_default(tx: &Tx, ws: &WorkspaceId, now: &str) -> Result<String> {
    if let Some(a) = default_agent(tx, ws)? {
        return Ok(a.id);
    }
    insert(tx, ws, "Assistant", &Settings::default(), true, now)
}

/// Advances the agent's draft generation: call after every successful authored write.
pub fn touch(tx: &Tx, agent_id: &str, now: &str) -> Result<i64> {
    tx.execute(
        "UPDATE agents SET draft_generation = draft_generation + 1, draft_updated_at = ?2, updated_at = ?2 WHERE id = ?1",
        params![agent_id, now],
    )?;
    Ok(tx.query_row("SELECT draft_generation FROM agents WHERE id = ?1", [agent_id], |r| r.get(0))?)
}

fn logo_info(c: &Connection, id: &str) -> Result<Option<Value>> {
    Ok(c.query_row("SELECT mime_type, filename, length(bytes), updated_at FROM agent_logos WHERE agent_id = ?1", [id], |r| {
        Ok(json!({"mimeType": r.get::<_, String>(0)?, "filename": r.get::<_, Option<String>>(1)?, "sizeBytes": r.get::<_, i64>(2)?, "updatedAt": r.get::<_, String>(3)?, "url": format!("/api/v1/agents/{id}/assistant-logo")}))
    })
    .optional()?)
}

pub fn view(c: &Connection, a: &Agent) -> Result<Value> {
    let mut v = serde_json::to_value(&a.settings)?;
    #[allow(clippy::expect_used, reason = "a struct serializes to an object")]
    let m = v.as_object_mut().expect("object");
    m.insert("id".into(), json!(a.id));
    m.insert("workspaceId".into(), json!(a.workspace_id.0));
    m.insert("name".into(), json!(a.name));
    m.insert("isDefault".into(), json!(a.is_default));
    m.insert("schemaVersion".into(), json!(SCHEMA_VERSION));
    m.insert("logo".into(), logo_info(c, &a.id)?.unwrap_or(Value::Null));
    m.insert("draftGeneration".into(), json!(a.draft_generation));
    m.insert("publishedRevisionId".into(), json!(a.published_revision_id));
    m.insert("createdAt".into(), json!(a.created_at));
    m.insert("updatedAt".into(), json!(a.updated_at));
    Ok(v)
}

fn clean_name(v: Option<&Value>) -> Result<Option<String>> {
    match v {
        None => Ok(None),
        Some(Value::String(s)) => {
            let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
            if s.is_empty() || s.chars().count() > MAX_NAME {
                return Err(Error::invalid_field("name", "name must be 1 to 200 characters"));
            }
            Ok(Some(s))
        }
        Some(_) => Err(Error::invalid_field("name", "name must be a string")),
    }
}

/// Applies a partial body (top-level keys replace) to settings, strictly.
fn merged(cur: &Settings, body: &Map<String, Value>) -> Result<Settings> {
    let mut v = serde_json::to_value(cur)?;
    for (k, val) in body {
        if matches!(k.as_str(), "name" | "internalName") {
            continue;
        }
        if matches!(
            k.as_str(),
            "id" | "workspaceId"
                | "isDefault"
                | "schemaVersion"
                | "logo"
                | "draftGeneration"
                | "publishedRevisionId"
                | "createdAt"
                | "updatedAt"
        ) {
            return Err(Error::invalid_field(k, format!("`{k}` is read-only")));
        }
        v[k] = val.clone();
    }
    let mut s: Settings =
        serde_json::from_value(v).map_err(|e| Error::invalid(format!("invalid agent settings: {e}")))?;
    s.validate()?;
    Ok(s)
}

pub fn list(app: &App, p: &Principal) -> Result<Value> {
    p.require(Perm::AgentsRead)?;
    app.db.write(|tx| {
        let now = rfc3339(app.clock.now());
        ensure_default(tx, &p.workspace_id, &now)?;
        let mut st =
            tx.prepare(&format!("SELECT {COLS} FROM agents WHERE workspace_id = ?1 ORDER BY created_at, id"))?;
        let agents: Vec<Agent> = st.query_map([&p.workspace_id.0], row)?.collect::<rusqlite::Result<_>>()?;
        let views = agents.iter().map(|a| view(tx, a)).collect::<Result<Vec<_>>>()?;
        Ok(json!({"agents": views}))
    })
}

pub fn get(app: &App, p: &Principal, id: &str) -> Result<Value> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| view(c, &get_in(c, &p.workspace_id, id)?))
}

pub fn create(app: &App, p: &Principal, actor: &Actor, body: Value) -> Result<Value> {
    p.require(Perm::AgentsManage)?;
    let Value::Object(body) = body else { return Err(Error::invalid("the body must be a JSON object")) };
    let name = clean_name(body.get("name").or_else(|| body.get("internalName")))?
        .ok_or_else(|| Error::invalid_field("name", "name is required"))?;
    let settings = merged(&Settings::default(), &body)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        ensure_default(tx, &p.workspace_id, &now)?;
        let id = insert(tx, &p.workspace_id, &name, &settings, false, &now)?;
        audit::record(tx, &now, actor, Event::new("agent.created").workspace(&p.workspace_id).target("agent", &id))?;
        view(tx, &get_in(tx, &p.workspace_id, &id)?)
    })
}

pub fn update(app: &App, p: &Principal, actor: &Actor, id: &str, body: Value) -> Result<Value> {
    p.require(Perm::AgentsManage)?;
    let Value::Object(body) = body else { return Err(Error::invalid("the body must be a JSON object")) };
    let name = clean_name(body.get("name").or_else(|| body.get("internalName")))?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let a = get_in(tx, &p.workspace_id, id)?;
        let settings = merged(&a.settings, &body)?;
        if let Some(m) = &settings.chat_model_override
            && Some(m) != a.settings.chat_model_override.as_ref()
            && let Some(why) = crate::models::resolve::unusable(app, &p.workspace_id, &m.provider)?
        {
            return Err(Error::invalid_field("chatModelOverride.provider", why));
        }
        let name = name.clone().unwrap_or(a.name.clone());
        tx.execute(
            "UPDATE agents SET name = ?2, settings = ?3, updated_at = ?4 WHERE id = ?1",
            params![id, name, serde_json::to_string(&settings)?, now],
        )?;
        touch(tx, id, &now)?;
        let keys: Vec<&String> = body.keys().collect();
        audit::record(
            tx,
            &now,
            actor,
            Event::new("agent.updated").workspace(&p.workspace_id).target("agent", id).meta(json!({"fields": keys})),
        )?;
        view(tx, &get_in(tx, &p.workspace_id, id)?)
    })
}

pub fn make_default(app: &App, p: &Principal, actor: &Actor, id: &str) -> Result<Value> {
    p.require(Perm::AgentsManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        get_in(tx, &p.workspace_id, id)?;
        tx.execute("UPDATE agents SET is_default = 0 WHERE workspace_id = ?1 AND is_default = 1", [&p.workspace_id.0])?;
        tx.execute("UPDATE agents SET is_default = 1, updated_at = ?2 WHERE id = ?1", params![id, now])?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("agent.default_changed").workspace(&p.workspace_id).target("agent", id),
        )?;
        view(tx, &get_in(tx, &p.workspace_id, id)?)
    })
}

/// Detects an image type from its bytes; SVG is accepted only when it carries nothing active.
pub fn check_logo(bytes: &[u8]) -> Result<&'static str> {
    if bytes.is_empty() {
        return Err(Error::invalid_field("logo", "the logo file is empty"));
    }
    if bytes.len() > MAX_LOGO_BYTES {
        return Err(Error::new(
            crate::ErrorCode::PayloadTooLarge,
            format!("the logo is larger than {} KB", MAX_LOGO_BYTES / 1024),
        ));
    }
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Ok("image/png");
    }
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return Ok("image/jpeg");
    }
    if bytes.len() > 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        return Ok("image/webp");
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|_| Error::invalid_field("logo", "the logo must be a PNG, JPEG, WebP or SVG image"))?;
    if text.contains("<svg") {
        check_svg(text)?;
        return Ok("image/svg+xml");
    }
    Err(Error::invalid_field("logo", "the logo must be a PNG, JPEG, WebP or SVG image"))
}

/// Refuses SVG that could run or fetch anything: scripts, foreign content, event handlers,
/// external references, entities.
fn check_svg(text: &str) -> Result<()> {
    use quick_xml::events::Event as X;
    let refuse = |why: &str| Error::invalid_field("logo", format!("the SVG was refused: {why}"));
    if text.contains("<!ENTITY") || text.contains("<!DOCTYPE") {
        return Err(refuse("it declares a DOCTYPE or entities"));
    }
    let mut r = quick_xml::Reader::from_str(text);
    loop {
        match r.read_event() {
            Ok(X::Start(e)) | Ok(X::Empty(e)) => {
                let name = String::from_utf8_lossy(e.local_name().as_ref()).to_lowercase();
                if [
                    "script",
                    "foreignobject",
                    "iframe",
                    "embed",
                    "object",
                    "audio",
                    "video",
                    "animate",
                    "set",
                    "handler",
                    "listener",
                ]
                .contains(&name.as_str())
                {
                    return Err(refuse(&format!("it contains a <{name}> element")));
                }
                for a in e.attributes().flatten() {
                    let key = String::from_utf8_lossy(a.key.local_name().as_ref()).to_lowercase();
                    let val = String::from_utf8_lossy(&a.value).to_lowercase();
                    if key.starts_with("on") {
                        return Err(refuse(&format!("it has an event handler ({key})")));
                    }
                    if (key == "href" || key == "src")
                        && !(val.starts_with('#')
                            || val.starts_with("data:image/png")
                            || val.starts_with("data:image/jpeg"))
                    {
                        return Err(refuse("it references an external resource"));
                    }
                    if val.contains("javascript:") || (key == "style" && val.contains("url(")) {
                        return Err(refuse("it contains a script or external URL"));
                    }
                }
            }
            Ok(X::Eof) => return Ok(()),
            Err(e) => return Err(refuse(&format!("it is not well-formed XML ({e})"))),
            _ => {}
        }
    }
}

pub fn put_logo(
    app: &App,
    p: &Principal,
    actor: &Actor,
    id: &str,
    filename: Option<String>,
    bytes: Vec<u8>,
) -> Result<Value> {
    p.require(Perm::AgentsManage)?;
    let mime = check_logo(&bytes)?;
    let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes));
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        get_in(tx, &p.workspace_id, id)?;
        tx.execute(
            "INSERT INTO agent_logos (agent_id, mime_type, filename, bytes, sha256, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (agent_id) DO UPDATE SET mime_type = excluded.mime_type, filename = excluded.filename, bytes = excluded.bytes, sha256 = excluded.sha256, updated_at = excluded.updated_at",
            params![id, mime, filename, bytes, sha, now],
        )?;
        tx.execute("UPDATE agents SET updated_at = ?2 WHERE id = ?1", params![id, now])?;
        audit::record(tx, &now, actor, Event::new("agent.logo_updated").workspace(&p.workspace_id).target("agent", id).meta(json!({"mimeType": mime, "bytes": bytes.len()})))?;
        Ok(logo_info(tx, id)?.unwrap_or(Value::Null))
    })
}

pub fn get_logo(app: &App, p: &Principal, id: &str) -> Result<(String, Vec<u8>)> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| {
        get_in(c, &p.workspace_id, id)?;
        c.query_row("SELECT mime_type, bytes FROM agent_logos WHERE agent_id = ?1", [id], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?
        .ok_or_else(|| Error::not_found("logo"))
    })
}

pub fn delete_logo(app: &App, p: &Principal, actor: &Actor, id: &str) -> Result<()> {
    p.require(Perm::AgentsManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        get_in(tx, &p.workspace_id, id)?;
        if tx.execute("DELETE FROM agent_logos WHERE agent_id = ?1", [id])? == 0 {
            return Err(Error::not_found("logo"));
        }
        audit::record(tx, &now, actor, Event::new("agent.logo_deleted").workspace(&p.workspace_id).target("agent", id))
    })
}
