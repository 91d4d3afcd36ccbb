//! Agents as authored: the agent record and its settings, the workspace's default agent, logos,
//! skills (`skills.rs`), directives with `#skill` chips (`directives.rs`), context variables
//! (`context.rs`), immutable revisions (`revisions.rs`) and the rows an agent bundle import
//! writes (`imported.rs`).
//!
//! Directives, skills, context-variable enablements and settings are the *draft*. Every
//! successful write to them advances the agent's draft generation (`touch`); a candidate revision
//! snapshots one generation; publishing a candidate is what visitors' new conversations use.

pub mod api;
pub mod catalog;
pub mod config;
pub mod context;
pub mod directives;
pub mod imported;
pub mod revisions;
pub mod skills;
mod store;

use serde_json::json;

pub use api::{
    AgentBody, Delivery, ExactVariant, ExactWords, ModelChoice, Settings, SourceScope, Surfaces, Theme, Webhook,
};

use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, Result};
use crate::ids::WorkspaceId;
use crate::storage::{Conn, Tx};

/// The agent format version exports carry.
pub const SCHEMA_VERSION: u32 = 4;
pub const MAX_NAME: usize = 200;
pub const MAX_LOGO_BYTES: usize = 512 * 1024;

/// `#rrggbb`.
pub(crate) fn hex_color(v: &str) -> bool {
    v.len() == 7 && v.starts_with('#') && v[1..].chars().all(|c| c.is_ascii_hexdigit())
}

/// An http(s) URL of at most 2048 characters, with no user name or password in it (a URL is shown
/// to members; credentials go in a secret, never the URL).
pub fn check_http_url(field: &str, url: &str) -> Result<()> {
    let parsed = reqwest::Url::parse(url)
        .ok()
        .filter(|u| url.len() <= 2048 && matches!(u.scheme(), "http" | "https") && u.host().is_some());
    let Some(u) = parsed else {
        return Err(Error::invalid_field(field, "must be an http(s) URL of at most 2048 characters"));
    };
    if !u.username().is_empty() || u.password().is_some() {
        return Err(Error::invalid_field(field, "must not carry a user name or password (user:password@)"));
    }
    Ok(())
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

/// Longest Exact words greeting, most chips and longest chip label.
pub const EXACT_WORDS_MAX_CHARS: usize = 8_000;
pub const EXACT_WORDS_MAX_CHIPS: usize = 5;
pub const CHIP_MAX_CHARS: usize = 80;

/// Checks an Exact words greeting: 1 to 10 language variants with valid tags, each 1–8,000
/// characters of text (not only whitespace) and the same 0–5 chips of 1–80 characters; the
/// agent's default locale (when set) must have a variant.
fn check_exact_words(x: &mut ExactWords, default_locale: Option<&str>) -> Result<()> {
    const F: &str = "greetingExactWords";
    if x.variants.is_empty() || x.variants.len() > 10 {
        return Err(Error::invalid_field(F, "greetingExactWords has 1 to 10 language variants"));
    }
    let chips = x.variants.values().next().map(|v| v.chips.len()).unwrap_or(0);
    for (locale, v) in x.variants.iter_mut() {
        let field = format!("{F}.variants.{locale}");
        if !crate::settings::general::valid_locale(locale) {
            return Err(Error::invalid_field(&field, format!("`{locale}` is not a language tag like en or pt-BR")));
        }
        let n = v.text.chars().count();
        if v.text.trim().is_empty() || n > EXACT_WORDS_MAX_CHARS {
            return Err(Error::invalid_field(
                &format!("{field}.text"),
                format!("the greeting is 1 to {EXACT_WORDS_MAX_CHARS} characters and not only whitespace"),
            ));
        }
        if v.chips.len() > EXACT_WORDS_MAX_CHIPS {
            return Err(Error::invalid_field(
                &format!("{field}.chips"),
                format!("at most {EXACT_WORDS_MAX_CHIPS} chips"),
            ));
        }
        if v.chips.len() != chips {
            return Err(Error::invalid_field(
                &format!("{field}.chips"),
                "every language variant labels every chip (the same number of chips in each)",
            ));
        }
        for c in v.chips.iter_mut() {
            *c = c.split_whitespace().collect::<Vec<_>>().join(" ");
            if c.is_empty() || c.chars().count() > CHIP_MAX_CHARS {
                return Err(Error::invalid_field(
                    &format!("{field}.chips"),
                    format!("a chip label is 1 to {CHIP_MAX_CHARS} characters"),
                ));
            }
        }
    }
    if let Some(d) = default_locale
        && !x.variants.keys().any(|k| k.eq_ignore_ascii_case(d))
    {
        return Err(Error::invalid_field(
            F,
            format!("greetingExactWords needs a variant for the default locale `{d}` (assistantDefaultLocale)"),
        ));
    }
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
        if let Some(x) = &mut self.greeting_exact_words {
            check_exact_words(x, self.assistant_default_locale.as_deref())?;
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
        // an empty selection searches nothing (an imported agent starts there: source ids do not
        // travel in bundles)
        if let SourceScope::Selected { source_ids } = &mut self.source_scope {
            source_ids.dedup();
            if source_ids.len() > 200 {
                return Err(Error::invalid_field(
                    "sourceScope.sourceIds",
                    "select at most 200 sources (or use mode all)",
                ));
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

/// An agent as stored: its name, settings and draft state.
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

/// An agent's logo, without its bytes.
#[derive(Debug, Clone)]
pub struct Logo {
    pub mime_type: String,
    pub filename: Option<String>,
    pub size_bytes: i64,
    pub updated_at: String,
}

/// An agent with what its view shows beside it.
#[derive(Debug, Clone)]
pub struct AgentRecord {
    pub agent: Agent,
    pub logo: Option<Logo>,
}

pub fn find(c: &Conn, ws: &WorkspaceId, id: &str) -> Result<Option<Agent>> {
    store::find(c, ws, id)
}

/// The agent, or 404 when it is not in `ws`.
pub fn get_in(c: &Conn, ws: &WorkspaceId, id: &str) -> Result<Agent> {
    find(c, ws, id)?.ok_or_else(|| Error::not_found("agent"))
}

fn insert(tx: &Tx, ws: &WorkspaceId, name: &str, settings: &Settings, is_default: bool, now: &str) -> Result<String> {
    let id = crate::ids::new_id();
    store::insert(tx, &id, ws, name, settings, is_default, now)?;
    // new agents start published (v1 of their initial configuration), so a visitor never meets a draft
    revisions::publish_initial(tx, &id, ws, now)?;
    Ok(id)
}

/// The workspace's default agent, if it has one (a read; see [`ensure_default`]).
pub fn default_id(c: &Conn, ws: &WorkspaceId) -> Result<Option<String>> {
    Ok(store::default_agent(c, ws)?.map(|a| a.id))
}

/// Creates the workspace's default agent if it has none (new workspaces; older data dirs).
pub fn ensure_default(tx: &Tx, ws: &WorkspaceId, now: &str) -> Result<String> {
    Ok(ensure_default_agent(tx, ws, now)?.id)
}

/// [`ensure_default`], returning the agent's row.
pub fn ensure_default_agent(tx: &Tx, ws: &WorkspaceId, now: &str) -> Result<Agent> {
    if let Some(a) = store::default_agent(tx, ws)? {
        return Ok(a);
    }
    let id = insert(tx, ws, "Assistant", &Settings::default(), true, now)?;
    get_in(tx, ws, &id)
}

/// Advances the agent's draft generation: call after every successful authored write.
pub fn touch(tx: &Tx, agent_id: &str, now: &str) -> Result<i64> {
    store::touch(tx, agent_id, now)
}

fn record(c: &Conn, agent: Agent) -> Result<AgentRecord> {
    Ok(AgentRecord { logo: store::logo_info(c, &agent.id)?, agent })
}

fn record_in(c: &Conn, ws: &WorkspaceId, id: &str) -> Result<AgentRecord> {
    record(c, get_in(c, ws, id)?)
}

fn clean_name(v: Option<&str>) -> Result<Option<String>> {
    let Some(s) = v else { return Ok(None) };
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.is_empty() || s.chars().count() > MAX_NAME {
        return Err(Error::invalid_field("name", "name must be 1 to 200 characters"));
    }
    Ok(Some(s))
}

/// The workspace's agents (creating its default agent first if it has none).
pub fn list(app: &App, p: &Principal) -> Result<Vec<AgentRecord>> {
    p.require(Perm::AgentsRead)?;
    app.db.write(|tx| {
        let now = rfc3339(app.clock.now());
        ensure_default(tx, &p.workspace_id, &now)?;
        store::list(tx, &p.workspace_id)?.into_iter().map(|a| record(tx, a)).collect()
    })
}

pub fn get(app: &App, p: &Principal, id: &str) -> Result<AgentRecord> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| record_in(c, &p.workspace_id, id))
}

pub fn create(app: &App, p: &Principal, actor: &Actor, body: AgentBody) -> Result<AgentRecord> {
    p.require(Perm::AgentsManage)?;
    let name = clean_name(body.name.as_deref())?.ok_or_else(|| Error::invalid_field("name", "name is required"))?;
    let settings = body.settings(&Settings::default())?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        ensure_default(tx, &p.workspace_id, &now)?;
        let id = insert(tx, &p.workspace_id, &name, &settings, false, &now)?;
        audit::record(tx, &now, actor, Event::new("agent.created").workspace(&p.workspace_id).target("agent", &id))?;
        record_in(tx, &p.workspace_id, &id)
    })
}

pub fn update(app: &App, p: &Principal, actor: &Actor, id: &str, body: AgentBody) -> Result<AgentRecord> {
    p.require(Perm::AgentsManage)?;
    let name = clean_name(body.name.as_deref())?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let a = get_in(tx, &p.workspace_id, id)?;
        let settings = body.settings(&a.settings)?;
        if let Some(m) = &settings.chat_model_override
            && Some(m) != a.settings.chat_model_override.as_ref()
            && let Some(why) = crate::models::resolve::unusable(app, &p.workspace_id, &m.provider)?
        {
            return Err(Error::invalid_field("chatModelOverride.provider", why));
        }
        let name = name.clone().unwrap_or(a.name.clone());
        store::update(tx, id, &name, &settings, &now)?;
        touch(tx, id, &now)?;
        let ev = Event::new("agent.updated").workspace(&p.workspace_id).target("agent", id);
        audit::record(tx, &now, actor, ev.meta(json!({"fields": body.fields()})))?;
        record_in(tx, &p.workspace_id, id)
    })
}

pub fn make_default(app: &App, p: &Principal, actor: &Actor, id: &str) -> Result<AgentRecord> {
    p.require(Perm::AgentsManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        get_in(tx, &p.workspace_id, id)?;
        store::make_default(tx, &p.workspace_id, id, &now)?;
        let ev = Event::new("agent.default_changed").workspace(&p.workspace_id).target("agent", id);
        audit::record(tx, &now, actor, ev)?;
        record_in(tx, &p.workspace_id, id)
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
) -> Result<Logo> {
    p.require(Perm::AgentsManage)?;
    let mime = check_logo(&bytes)?;
    let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes));
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        get_in(tx, &p.workspace_id, id)?;
        store::put_logo(tx, id, mime, filename.as_deref(), &bytes, &sha, &now)?;
        let ev = Event::new("agent.logo_updated").workspace(&p.workspace_id).target("agent", id);
        audit::record(tx, &now, actor, ev.meta(json!({"mimeType": mime, "bytes": bytes.len()})))?;
        store::logo_info(tx, id)?.ok_or_else(|| Error::not_found("logo"))
    })
}

/// The logo's content type and bytes.
pub fn get_logo(app: &App, p: &Principal, id: &str) -> Result<(String, Vec<u8>)> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| {
        get_in(c, &p.workspace_id, id)?;
        store::logo_bytes(c, id)?.ok_or_else(|| Error::not_found("logo"))
    })
}

/// The logo of a workspace's agent for its public channels (no principal: the caller checked the
/// launch token); `None` without one.
pub fn public_logo(app: &App, ws: &WorkspaceId, id: &str) -> Result<Option<(String, Vec<u8>)>> {
    app.db.read(|c| {
        get_in(c, ws, id)?;
        store::logo_bytes(c, id)
    })
}

pub fn delete_logo(app: &App, p: &Principal, actor: &Actor, id: &str) -> Result<()> {
    p.require(Perm::AgentsManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        get_in(tx, &p.workspace_id, id)?;
        if !store::delete_logo(tx, id)? {
            return Err(Error::not_found("logo"));
        }
        audit::record(tx, &now, actor, Event::new("agent.logo_deleted").workspace(&p.workspace_id).target("agent", id))
    })
}
