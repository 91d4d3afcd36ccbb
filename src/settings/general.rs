//! General settings (`GET/PUT /api/v1/settings/general`): the workspace's public channels (the
//! anonymous chat link and the website embed) and how its assistant greets visitors on them. The
//! channels serve the workspace's default agent. Each channel has its own launch token, minted
//! when the settings are first read and replaced only by rotating it; a launch token is a public
//! identifier (it sits in every page that embeds the widget), so it is shown to operators at any
//! time. Changes apply at once (they are not drafts): removing an origin stops sessions from it.

use crate::agents::Theme;
use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, Result};

pub const NAMESPACE: &str = "general";
/// Most admitted origins.
pub const MAX_ORIGINS: usize = 20;

/// The general settings.
#[derive(Debug, Clone, PartialEq)]
pub struct General {
    pub anonymous_chat_enabled: bool,
    pub anonymous_chat_token: String,
    pub anonymous_chat_last_used_at: Option<String>,
    pub assistant_name: String,
    pub greeting_instruction: String,
    pub assistant_default_locale: Option<String>,
    pub proactive_greeting_enabled: bool,
    pub website_embed_enabled: bool,
    pub website_embed_token: String,
    pub website_embed_last_used_at: Option<String>,
    /// Normalized `scheme://host[:port]` origins, or `*` (any); empty admits none.
    pub website_embed_allowed_origins: Vec<String>,
    pub website_embed_launcher_label: String,
    pub website_embed_launcher_position: String,
    pub website_embed_theme: Theme,
    /// Locale → key → text (free-form copy overrides).
    pub website_embed_copy: serde_json::Map<String, serde_json::Value>,
    pub website_embed_expert_overrides: serde_json::Map<String, serde_json::Value>,
    /// Messages one visitor (public chat session) may send per minute on both channels: `None`
    /// the server's default (`public_chat_limit_per_session`), `Some(0)` no per-minute limit.
    pub public_chat_visitor_messages_per_minute: Option<u32>,
    /// Messages one visitor may send per UTC day: `None` no daily limit.
    pub public_chat_visitor_messages_per_day: Option<u32>,
    pub updated_at: Option<String>,
}

/// Most messages per minute a workspace may allow one visitor.
pub const MAX_VISITOR_PER_MINUTE: u32 = 600;
/// Most messages per day a workspace may allow one visitor.
pub const MAX_VISITOR_PER_DAY: u32 = 100_000;

impl Default for General {
    fn default() -> Self {
        General {
            anonymous_chat_enabled: false,
            anonymous_chat_token: String::new(),
            anonymous_chat_last_used_at: None,
            assistant_name: String::new(),
            greeting_instruction: String::new(),
            assistant_default_locale: None,
            proactive_greeting_enabled: false,
            website_embed_enabled: false,
            website_embed_token: String::new(),
            website_embed_last_used_at: None,
            website_embed_allowed_origins: Vec::new(),
            website_embed_launcher_label: "Chat with us".into(),
            website_embed_launcher_position: "bottom-right".into(),
            website_embed_theme: Theme::default(),
            website_embed_copy: Default::default(),
            website_embed_expert_overrides: Default::default(),
            public_chat_visitor_messages_per_minute: None,
            public_chat_visitor_messages_per_day: None,
            updated_at: None,
        }
    }
}

/// A PUT: the fields sent replace; the rest keep their value.
#[derive(Debug, Clone, Default)]
pub struct GeneralPatch {
    pub anonymous_chat_enabled: Option<bool>,
    pub assistant_name: Option<String>,
    pub greeting_instruction: Option<String>,
    /// `Some(None)`: back to no default locale.
    pub assistant_default_locale: Option<Option<String>>,
    pub proactive_greeting_enabled: Option<bool>,
    pub website_embed_enabled: Option<bool>,
    pub website_embed_allowed_origins: Option<Vec<String>>,
    pub website_embed_launcher_label: Option<String>,
    pub website_embed_launcher_position: Option<String>,
    pub website_embed_theme: Option<Theme>,
    pub website_embed_copy: Option<serde_json::Map<String, serde_json::Value>>,
    pub website_embed_expert_overrides: Option<serde_json::Map<String, serde_json::Value>>,
    /// `Some(None)`: back to the server's default.
    pub public_chat_visitor_messages_per_minute: Option<Option<u32>>,
    /// `Some(None)`: no daily limit.
    pub public_chat_visitor_messages_per_day: Option<Option<u32>>,
}

/// Which launch token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    AnonymousChat,
    WebsiteEmbed,
}

/// An origin as browsers send it: `scheme://host[:port]` in lowercase, the default port dropped;
/// `*` stays `*`.
pub fn normalize_origin(raw: &str) -> Result<String> {
    let raw = raw.trim();
    if raw == "*" {
        return Ok("*".into());
    }
    let bad = || {
        Error::invalid_field(
            "websiteEmbedAllowedOrigins",
            format!("`{raw}` is not an origin like https://shop.example.com"),
        )
    };
    let u = url::Url::parse(raw).map_err(|_| bad())?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() || !u.username().is_empty() {
        return Err(bad());
    }
    if !(u.path() == "/" || u.path().is_empty()) || u.query().is_some() || u.fragment().is_some() {
        return Err(Error::invalid_field(
            "websiteEmbedAllowedOrigins",
            format!("`{raw}` has a path: an origin is only scheme://host[:port]"),
        ));
    }
    Ok(u.origin().ascii_serialization())
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn check_map(field: &str, m: &serde_json::Map<String, serde_json::Value>) -> Result<()> {
    if serde_json::to_string(m).map(|s| s.len()).unwrap_or(usize::MAX) > 16 * 1024 {
        return Err(Error::invalid_field(field, format!("{field} must be at most 16 KB")));
    }
    Ok(())
}

impl General {
    /// This settings with `p` applied, validated and normalized.
    pub fn apply(&self, p: GeneralPatch) -> Result<General> {
        let mut g = self.clone();
        if let Some(v) = p.anonymous_chat_enabled {
            g.anonymous_chat_enabled = v;
        }
        if let Some(v) = p.assistant_name {
            g.assistant_name = collapse(&v);
        }
        if let Some(v) = p.greeting_instruction {
            g.greeting_instruction = v.trim().to_string();
        }
        if let Some(v) = p.assistant_default_locale {
            g.assistant_default_locale = v.map(|l| l.trim().to_string()).filter(|l| !l.is_empty());
        }
        if let Some(v) = p.proactive_greeting_enabled {
            g.proactive_greeting_enabled = v;
        }
        if let Some(v) = p.website_embed_enabled {
            g.website_embed_enabled = v;
        }
        if let Some(v) = p.website_embed_allowed_origins {
            let mut out: Vec<String> = Vec::new();
            for o in &v {
                if o.chars().count() > 200 {
                    return Err(Error::invalid_field(
                        "websiteEmbedAllowedOrigins",
                        "an origin is at most 200 characters",
                    ));
                }
                let n = normalize_origin(o)?;
                if !out.contains(&n) {
                    out.push(n);
                }
            }
            if out.len() > MAX_ORIGINS {
                return Err(Error::invalid_field(
                    "websiteEmbedAllowedOrigins",
                    format!("at most {MAX_ORIGINS} origins"),
                ));
            }
            g.website_embed_allowed_origins = out;
        }
        if let Some(v) = p.website_embed_launcher_label {
            g.website_embed_launcher_label = v.trim().to_string();
        }
        if let Some(v) = p.website_embed_launcher_position {
            g.website_embed_launcher_position = v;
        }
        if let Some(v) = p.website_embed_theme {
            g.website_embed_theme = v;
        }
        if let Some(v) = p.website_embed_copy {
            g.website_embed_copy = v;
        }
        if let Some(v) = p.website_embed_expert_overrides {
            g.website_embed_expert_overrides = v;
        }
        if let Some(v) = p.public_chat_visitor_messages_per_minute {
            g.public_chat_visitor_messages_per_minute = v;
        }
        if let Some(v) = p.public_chat_visitor_messages_per_day {
            g.public_chat_visitor_messages_per_day = v;
        }
        g.validate()?;
        Ok(g)
    }

    fn validate(&self) -> Result<()> {
        if self.assistant_name.chars().count() > 200 {
            return Err(Error::invalid_field("assistantName", "assistantName must be at most 200 characters"));
        }
        if self.greeting_instruction.chars().count() > 200 {
            return Err(Error::invalid_field(
                "greetingInstruction",
                "greetingInstruction must be at most 200 characters",
            ));
        }
        if let Some(l) = &self.assistant_default_locale
            && !valid_locale(l)
        {
            return Err(Error::invalid_field(
                "assistantDefaultLocale",
                "assistantDefaultLocale must be a language tag like en, pt-BR or zh-Hant-TW",
            ));
        }
        let label = self.website_embed_launcher_label.chars().count();
        if label == 0 || label > 80 {
            return Err(Error::invalid_field(
                "websiteEmbedLauncherLabel",
                "websiteEmbedLauncherLabel must be 1 to 80 characters",
            ));
        }
        if !["bottom-right", "bottom-left"].contains(&self.website_embed_launcher_position.as_str()) {
            return Err(Error::invalid_field(
                "websiteEmbedLauncherPosition",
                "websiteEmbedLauncherPosition is bottom-right or bottom-left",
            ));
        }
        let t = &self.website_embed_theme;
        for (k, v) in [("brand", &t.brand), ("brandText", &t.brand_text), ("surface", &t.surface), ("text", &t.text)] {
            if !crate::agents::hex_color(v) {
                return Err(Error::invalid_field(
                    &format!("websiteEmbedTheme.{k}"),
                    "colours are 6-digit hex like #0f172a",
                ));
            }
        }
        for (locale, texts) in &self.website_embed_copy {
            let ok = texts
                .as_object()
                .is_some_and(|m| m.values().all(|v| v.as_str().is_some_and(|s| s.chars().count() <= 500)));
            if !ok {
                return Err(Error::invalid_field(
                    &format!("websiteEmbedCopy.{locale}"),
                    "websiteEmbedCopy maps a locale to {key: text} with texts of at most 500 characters",
                ));
            }
        }
        if self.public_chat_visitor_messages_per_minute.is_some_and(|n| n > MAX_VISITOR_PER_MINUTE) {
            return Err(Error::invalid_field(
                "publicChatVisitorMessagesPerMinute",
                format!(
                    "publicChatVisitorMessagesPerMinute is 0 (no limit) to {MAX_VISITOR_PER_MINUTE}, or null for the server's default"
                ),
            ));
        }
        if self.public_chat_visitor_messages_per_day.is_some_and(|n| n == 0 || n > MAX_VISITOR_PER_DAY) {
            return Err(Error::invalid_field(
                "publicChatVisitorMessagesPerDay",
                format!("publicChatVisitorMessagesPerDay is 1 to {MAX_VISITOR_PER_DAY}, or null for no daily limit"),
            ));
        }
        check_map("websiteEmbedCopy", &self.website_embed_copy)?;
        check_map("websiteEmbedExpertOverrides", &self.website_embed_expert_overrides)
    }
}

/// `^[A-Za-z]{2,3}(-[A-Za-z]{4})?(-([A-Za-z]{2}|\d{3}))?$`, at most 35 characters.
pub fn valid_locale(l: &str) -> bool {
    let parts: Vec<&str> = l.split('-').collect();
    let lang = |p: &str| (2..=3).contains(&p.len()) && p.chars().all(|c| c.is_ascii_alphabetic());
    let script = |p: &str| p.len() == 4 && p.chars().all(|c| c.is_ascii_alphabetic());
    let region = |p: &str| {
        (p.len() == 2 && p.chars().all(|c| c.is_ascii_alphabetic()))
            || (p.len() == 3 && p.chars().all(|c| c.is_ascii_digit()))
    };
    l.len() <= 35
        && match parts.as_slice() {
            [a] => lang(a),
            [a, b] => lang(a) && (script(b) || region(b)),
            [a, b, c] => lang(a) && script(b) && region(c),
            _ => false,
        }
}

fn mint(channel: Channel) -> String {
    crate::auth::password::new_secret(match channel {
        Channel::AnonymousChat => "pc_",
        Channel::WebsiteEmbed => "we_",
    })
}

fn load_in(c: &crate::storage::Conn, ws: &crate::ids::WorkspaceId) -> Result<General> {
    let doc: super::api::GeneralDoc = super::load(c, ws, NAMESPACE)?;
    Ok(doc.into())
}

/// `GET /settings/general`; mints the launch tokens the first time.
pub fn get(app: &App, p: &Principal) -> Result<General> {
    p.require(Perm::SettingsRead)?;
    let ws = p.workspace_id.clone();
    let g = app.db.read(|c| load_in(c, &ws))?;
    if !g.anonymous_chat_token.is_empty() && !g.website_embed_token.is_empty() {
        return Ok(g);
    }
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let mut g = load_in(tx, &ws)?;
        if g.anonymous_chat_token.is_empty() {
            g.anonymous_chat_token = mint(Channel::AnonymousChat);
        }
        if g.website_embed_token.is_empty() {
            g.website_embed_token = mint(Channel::WebsiteEmbed);
        }
        super::store(tx, &ws, NAMESPACE, &super::api::GeneralDoc::from(&g), &now)?;
        Ok(g)
    })
}

/// The workspace's general settings as stored (for the public routes, which have no principal).
pub fn of_workspace(app: &App, ws: &crate::ids::WorkspaceId) -> Result<General> {
    app.db.read(|c| load_in(c, ws))
}

/// The workspace and settings a launch token opens, and which channel it is for.
pub fn by_launch_token(app: &App, token: &str) -> Result<Option<(crate::ids::WorkspaceId, General, Channel)>> {
    if token.len() > 200 || !(token.starts_with("pc_") || token.starts_with("we_")) {
        return Ok(None);
    }
    let (field, channel) = if token.starts_with("pc_") {
        ("anonymousChatToken", Channel::AnonymousChat)
    } else {
        ("websiteEmbedToken", Channel::WebsiteEmbed)
    };
    let Some((ws, json)) = app.db.read(|c| super::store::workspace_by_launch_token(c, field, token))? else {
        return Ok(None);
    };
    let doc: super::api::GeneralDoc = serde_json::from_str(&json)?;
    Ok(Some((ws, doc.into(), channel)))
}

/// Records that a channel launched a session now (at most once a minute: the time is for people
/// to read, and a burst of sessions should not rewrite the settings each time).
pub fn mark_used(app: &App, ws: &crate::ids::WorkspaceId, channel: Channel) -> Result<()> {
    let now = rfc3339(app.clock.now());
    let minute_ago = rfc3339(app.clock.now() - chrono::Duration::seconds(60));
    let g = app.db.read(|c| load_in(c, ws))?;
    let last = match channel {
        Channel::AnonymousChat => g.anonymous_chat_last_used_at.as_deref(),
        Channel::WebsiteEmbed => g.website_embed_last_used_at.as_deref(),
    };
    if last.is_some_and(|t| t > minute_ago.as_str()) {
        return Ok(());
    }
    app.db.write(|tx| {
        let mut g = load_in(tx, ws)?;
        match channel {
            Channel::AnonymousChat => g.anonymous_chat_last_used_at = Some(now.clone()),
            Channel::WebsiteEmbed => g.website_embed_last_used_at = Some(now.clone()),
        }
        super::store(tx, ws, NAMESPACE, &super::api::GeneralDoc::from(&g), &now)
    })
}

/// Whether an origin is admitted: `*` admits any, an empty list none.
pub fn admits(g: &General, origin: &str) -> bool {
    let Ok(o) = normalize_origin(origin) else { return false };
    g.website_embed_allowed_origins.iter().any(|a| a == "*" || *a == o)
}

/// `PUT /settings/general`.
pub fn update(app: &App, p: &Principal, actor: &Actor, patch: GeneralPatch) -> Result<General> {
    p.require(Perm::SettingsManage)?;
    let cur = get(app, p)?;
    let ws = p.workspace_id.clone();
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let mut g = load_in(tx, &ws)?;
        g.anonymous_chat_token = cur.anonymous_chat_token.clone();
        g.website_embed_token = cur.website_embed_token.clone();
        let mut next = g.apply(patch)?;
        next.updated_at = Some(now.clone());
        super::store(tx, &ws, NAMESPACE, &super::api::GeneralDoc::from(&next), &now)?;
        audit::record(tx, &now, actor, Event::new("settings.general.updated").workspace(&ws))?;
        Ok(next)
    })
}

/// `POST /settings/general/{anonymous-chat,website-embed}-token/rotate`: a new launch token; the
/// old one stops launching sessions at once, and sessions bound to it stop working.
pub fn rotate(app: &App, p: &Principal, actor: &Actor, channel: Channel) -> Result<General> {
    p.require_session()?;
    p.require(Perm::SettingsManage)?;
    get(app, p)?;
    let ws = p.workspace_id.clone();
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let mut g = load_in(tx, &ws)?;
        match channel {
            Channel::AnonymousChat => g.anonymous_chat_token = mint(channel),
            Channel::WebsiteEmbed => g.website_embed_token = mint(channel),
        }
        g.updated_at = Some(now.clone());
        super::store(tx, &ws, NAMESPACE, &super::api::GeneralDoc::from(&g), &now)?;
        let which = if channel == Channel::AnonymousChat { "anonymous_chat" } else { "website_embed" };
        audit::record(
            tx,
            &now,
            actor,
            Event::new("settings.general.token_rotated").workspace(&ws).meta(serde_json::json!({"channel": which})),
        )?;
        Ok(g)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn origins_normalize_and_locales_follow_the_pattern() {
        assert_eq!(normalize_origin("HTTPS://Shop.Example.com:443/").unwrap(), "https://shop.example.com");
        assert_eq!(normalize_origin("http://localhost:8080").unwrap(), "http://localhost:8080");
        assert_eq!(normalize_origin(" * ").unwrap(), "*");
        for bad in [
            "shop.example.com",
            "https://shop.example.com/page",
            "ftp://x.example",
            "https://u:p@x.example",
            "https://x.example/?q=1",
        ] {
            assert!(normalize_origin(bad).is_err(), "{bad}");
        }
        for ok in ["en", "pt-BR", "zh-Hant-TW", "es-419", "deu"] {
            assert!(valid_locale(ok), "{ok}");
        }
        for bad in ["e", "english", "en-", "en_US", "en-Latn-US-x", "12"] {
            assert!(!valid_locale(bad), "{bad}");
        }
    }

    #[test]
    fn a_patch_replaces_only_what_it_sends_and_validates() {
        let g = General::default();
        let p = GeneralPatch {
            website_embed_allowed_origins: Some(vec![
                "https://a.example/".into(),
                "https://A.example".into(),
                "*".into(),
            ]),
            assistant_name: Some("  Ada   the  helper ".into()),
            ..Default::default()
        };
        let n = g.apply(p).unwrap();
        assert_eq!(n.website_embed_allowed_origins, vec!["https://a.example", "*"]);
        assert_eq!(n.assistant_name, "Ada the helper");
        assert_eq!(n.website_embed_launcher_label, "Chat with us");
        let many = (0..21).map(|i| format!("https://s{i}.example")).collect();
        assert!(g.apply(GeneralPatch { website_embed_allowed_origins: Some(many), ..Default::default() }).is_err());
        let pos = GeneralPatch { website_embed_launcher_position: Some("top".into()), ..Default::default() };
        assert!(g.apply(pos).is_err());
    }

    proptest! {
        #[test]
        fn origin_normalization_never_panics_and_is_idempotent(s in ".{0,120}") {
            if let Ok(n) = normalize_origin(&s) {
                prop_assert_eq!(normalize_origin(&n).unwrap(), n);
            }
        }
    }
}
