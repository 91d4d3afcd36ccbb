//! Public sessions (`POST /api/v1/public/chat/{token}/sessions`): a launch token opens a session
//! on its channel for the workspace's default agent; the session token (12 h) goes in the
//! `x-service-public-session` header of every later request, and the resume token (30 days)
//! resumes the same visitor. Both are bound to the launch token, workspace, agent, channel and
//! origin, and are checked against the current settings on every use.

use super::token::{self, Claims, Kind, Secret};
use crate::app::App;
use crate::error::{Error, ErrorCode, Result};
use crate::ratelimit::shared::{self, Allowance, Scope};
use crate::settings::general::{self, Channel, General};

/// A session request.
#[derive(Debug, Clone)]
pub struct NewSession {
    /// `anonymous_link` or `website_embed`.
    pub channel: String,
    pub resume_token: Option<String>,
    /// The request's `Origin` header.
    pub origin: Option<String>,
}

/// What a session request grants.
#[derive(Debug, Clone)]
pub struct Grant {
    pub public_chat_token: String,
    pub public_session_id: String,
    pub public_session_token: String,
    pub resume_token: String,
    pub workspace_id: String,
    pub agent_id: String,
    /// The admitted origin of a website-embed session (what CORS answers to).
    pub origin: Option<String>,
    /// The agent's name, else the assistant name, else the workspace's.
    pub workspace_name: String,
    pub assistant_bootstrap_active: bool,
    pub expires_at: i64,
    pub resume_expires_at: i64,
}

fn not_found() -> Error {
    Error::new(ErrorCode::NotFound, "Public chat not found")
}

fn invalid_request() -> Error {
    Error::invalid("Invalid public chat session request")
}

/// The deployment's session secret (the environment's, else the data dir's key file).
pub fn secret(app: &App) -> Result<&Secret> {
    if let Some(s) = app.public_secret.get() {
        return Ok(s);
    }
    let env = app.config.public_session_secret.as_ref().map(|s| s.expose().as_str());
    let s = Secret::load_or_create(&app.config.data_dir, env)
        .map_err(|m| Error::new(ErrorCode::ServiceUnavailable, format!("public chat is unavailable: {m}")))?;
    let _ = app.public_secret.set(s);
    app.public_secret.get().ok_or_else(|| Error::internal_msg("session secret unavailable"))
}

/// Which channel a launch token opens, checked against the request: the surface must be on, and
/// a website-embed request must come from an admitted origin.
fn open_channel(g: &General, channel: Channel, requested: &str, origin: Option<&str>) -> Result<Option<String>> {
    match (channel, requested) {
        (Channel::AnonymousChat, "anonymous_link") if g.anonymous_chat_enabled => Ok(None),
        (Channel::WebsiteEmbed, "website_embed") if g.website_embed_enabled => {
            let origin =
                origin.ok_or_else(|| Error::invalid("a website_embed session needs the page's Origin header"))?;
            if !general::admits(g, origin) {
                return Err(Error::new(ErrorCode::Forbidden, "this website is not allowed to embed the chat")
                    .with_details(serde_json::json!({"code": "origin_not_admitted"})));
            }
            Ok(Some(general::normalize_origin(origin)?))
        }
        (_, "anonymous_link" | "website_embed") => Err(not_found()),
        _ => Err(Error::invalid_field("channel", "channel is anonymous_link or website_embed")),
    }
}

/// Creates or resumes a session.
pub fn create(app: &App, launch_token: &str, req: NewSession) -> Result<Grant> {
    let (ws, g, channel) = general::by_launch_token(app, launch_token)?.ok_or_else(not_found)?;
    let origin = open_channel(&g, channel, &req.channel, req.origin.as_deref())?;
    let secret = secret(app)?;
    let now = app.clock.now().timestamp();
    let agent_id = default_agent(app, &ws)?;
    let (agent_name, assistant_bootstrap_active) = app.db.read(|c| {
        let a = crate::agents::config::published(c, &ws, &agent_id)?;
        Ok((a.name, bootstrap_active(&g, &a.settings)))
    })?;
    let binding = token::launch_binding(secret, launch_token);
    let session_id = match &req.resume_token {
        Some(rt) => {
            let c = token::verify::<Claims>(secret, Kind::Resume, rt, now).map_err(|_| invalid_request())?;
            let same = c.workspace_id == ws.0
                && c.agent_id == agent_id
                && c.channel == req.channel
                && c.origin == origin
                && c.launch_binding == binding;
            if !same {
                return Err(invalid_request());
            }
            c.public_session_id
        }
        None => crate::ids::new_id(),
    };
    let claims = |expires_at| Claims {
        workspace_id: ws.0.clone(),
        agent_id: agent_id.clone(),
        public_session_id: session_id.clone(),
        channel: req.channel.clone(),
        origin: origin.clone(),
        expires_at,
        launch_binding: binding.clone(),
        visitor_key: None,
    };
    let (exp, resume_exp) = (now + token::SESSION_SECS, now + token::RESUME_SECS);
    general::mark_used(app, &ws, channel)?;
    let workspace_name = if !agent_name.trim().is_empty() {
        agent_name
    } else if !g.assistant_name.is_empty() {
        g.assistant_name.clone()
    } else {
        crate::auth::accounts::workspace(app, &ws)?.map(|w| w.name).unwrap_or_default()
    };
    Ok(Grant {
        public_chat_token: launch_token.to_string(),
        public_session_id: session_id.clone(),
        public_session_token: token::sign(secret, Kind::Session, &claims(exp)),
        resume_token: token::sign(secret, Kind::Resume, &claims(resume_exp)),
        workspace_id: ws.0.clone(),
        agent_id: agent_id.clone(),
        origin: origin.clone(),
        workspace_name,
        assistant_bootstrap_active,
        expires_at: exp,
        resume_expires_at: resume_exp,
    })
}

/// A checked public session: what every later public request runs as.
#[derive(Debug, Clone)]
pub struct Session {
    pub workspace_id: String,
    pub agent_id: String,
    pub public_session_id: String,
    pub channel: String,
    pub origin: Option<String>,
    /// When the session token runs out (unix seconds): an events stream ends then.
    pub expires_at: i64,
    /// The workspace's per-visitor message limits (general settings): per minute (`None` the
    /// server's default) and per UTC day (`None` none).
    pub visitor_limits: (Option<u32>, Option<u32>),
}

/// Checks a request's session token against its launch token and the current settings: the
/// token's signature and lifetime, the launch token it was made under (rotation breaks it), the
/// channel still on, for the embed the origin still admitted and the same as the request's, and
/// the agent still the workspace's default. Any failure is 404 `Not found` (the caller learns nothing more).
pub fn authenticate(
    app: &App,
    launch_token: &str,
    session_token: Option<&str>,
    origin: Option<&str>,
) -> Result<Session> {
    let nf = || Error::new(ErrorCode::NotFound, "Not found");
    let token_str = session_token.ok_or_else(nf)?;
    let (ws, g, channel) = general::by_launch_token(app, launch_token)?.ok_or_else(nf)?;
    let secret = secret(app)?;
    let c = token::verify::<Claims>(secret, Kind::Session, token_str, app.clock.now().timestamp()).map_err(|_| nf())?;
    if c.workspace_id != ws.0 || c.launch_binding != token::launch_binding(secret, launch_token) {
        return Err(nf());
    }
    let open = open_channel(&g, channel, &c.channel, origin).map_err(|_| nf())?;
    if open != c.origin {
        return Err(nf());
    }
    // a session serves the agent it was opened for while that agent is still the default: after
    // the default changes the session ends (its resume token is refused too), and the visitor's
    // next session talks to the new default agent in a new conversation
    if default_agent(app, &ws)? != c.agent_id {
        return Err(nf());
    }
    Ok(Session {
        expires_at: c.expires_at,
        visitor_limits: (g.public_chat_visitor_messages_per_minute, g.public_chat_visitor_messages_per_day),
        workspace_id: c.workspace_id,
        agent_id: c.agent_id,
        public_session_id: c.public_session_id,
        channel: c.channel,
        origin: c.origin,
    })
}

impl Session {
    /// Runs `f` (a message, a rating) as one of the visitor's messages: counted against the
    /// visitor's limits and the server's per-address limit first (`0` turns one off; over one,
    /// 429 `rate_limit_exceeded` and `f` does not run). Per minute (the workspace's, else the
    /// server's default) and per address are flood limits kept in each node's memory, and every
    /// request counts there; per UTC day is the workspace's allowance, counted in the database so
    /// it holds across nodes and restarts, and it counts only what `f` accepts: when `f` fails (a
    /// message refused as invalid, a conversation or message not found) its count is given back.
    pub fn counted<T>(&self, app: &App, addr: Option<&str>, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let day = self.count_message(app, addr)?;
        f().inspect_err(|_| {
            if let Some(at) = day {
                let _ = app.db.write(|tx| shared::refund(tx, Scope::VisitorDay, &self.public_session_id, at));
            }
        })
    }

    /// Counts one message; the instant the day's allowance counted it at, when it has one. The
    /// memory limits are checked first and given back when the day refuses, so a refused message
    /// uses up nothing.
    fn count_message(&self, app: &App, addr: Option<&str>) -> Result<Option<i64>> {
        let now = app.clock.now_ms();
        let per_minute = match self.visitor_limits.0 {
            Some(max) => crate::config::RateLimit { max, window: std::time::Duration::from_secs(60) },
            None => app.config.public_chat_limit_per_session,
        };
        let addr = addr.filter(|_| app.config.public_chat_limit_per_ip.max > 0);
        app.public_by_session.hit_as(&self.public_session_id, now, per_minute)?;
        if let Some(a) = addr
            && let Err(e) = app.public_by_addr.hit(a, now)
        {
            app.public_by_session.refund(&self.public_session_id, now);
            return Err(e);
        }
        let Some(max) = self.visitor_limits.1 else {
            return Ok(None);
        };
        let day = Allowance::PerUtcDay(max);
        app.db.write(|tx| shared::hit(tx, Scope::VisitorDay, &self.public_session_id, now, day)).inspect_err(|_| {
            app.public_by_session.refund(&self.public_session_id, now);
            if let Some(a) = addr {
                app.public_by_addr.refund(a, now);
            }
        })?;
        Ok(Some(now))
    }
}

/// What the widget is configured with.
pub struct EmbedConfig {
    pub token: String,
    pub general: General,
    /// The assistant name, else the agent's.
    pub assistant_name: String,
    pub has_logo: bool,
    /// Whether the widget greets on open (proactive greeting with a name to greet as).
    pub bootstrap_active: bool,
}

/// The workspace, settings and default agent a launch token serves, when its channel is on (an
/// embed request from an origin that is not admitted is 400, as the reference says).
fn serving(app: &App, launch_token: &str, origin: Option<&str>) -> Result<(crate::ids::WorkspaceId, General, String)> {
    let (ws, g, channel) = general::by_launch_token(app, launch_token)?.ok_or_else(not_found)?;
    let on = match channel {
        Channel::AnonymousChat => g.anonymous_chat_enabled,
        Channel::WebsiteEmbed => g.website_embed_enabled,
    };
    if !on {
        return Err(not_found());
    }
    if channel == Channel::WebsiteEmbed
        && let Some(o) = origin
        && !general::admits(&g, o)
    {
        return Err(Error::invalid("This website is not approved for the chat")
            .with_details(serde_json::json!({"code": "origin_not_admitted"})));
    }
    let agent = default_agent(app, &ws)?;
    Ok((ws, g, agent))
}

/// The workspace's default agent: a read, and a write only the first time (an older data dir
/// whose workspace has none yet), so public requests do not queue on the database's writer.
fn default_agent(app: &App, ws: &crate::ids::WorkspaceId) -> Result<String> {
    if let Some(id) = app.db.read(|c| crate::agents::default_id(c, ws))? {
        return Ok(id);
    }
    let now = crate::clock::rfc3339(app.clock.now());
    app.db.write(|tx| crate::agents::ensure_default(tx, ws, &now))
}

/// `GET …/embed-config`.
pub fn embed_config(app: &App, launch_token: &str, origin: Option<&str>) -> Result<EmbedConfig> {
    let (ws, g, agent_id) = serving(app, launch_token, origin)?;
    let agent = app.db.read(|c| crate::agents::config::published(c, &ws, &agent_id))?;
    let has_logo = crate::agents::public_logo(app, &ws, &agent_id)?.is_some();
    let assistant_name = if g.assistant_name.is_empty() { agent.name.clone() } else { g.assistant_name.clone() };
    let bootstrap_active = bootstrap_active(&g, &agent.settings);
    Ok(EmbedConfig { token: launch_token.to_string(), general: g, assistant_name, has_logo, bootstrap_active })
}

/// Whether a session greets on open: the proactive greeting is on (workspace or agent) and there
/// is a name or an authored greeting to greet with.
pub fn bootstrap_active(g: &General, s: &crate::agents::Settings) -> bool {
    (g.proactive_greeting_enabled || s.proactive_greeting_enabled)
        && (!g.assistant_name.is_empty() || s.greeting_exact_words.is_some() || !s.greeting_instruction.is_empty())
}

/// `GET …/assistant-logo`: the default agent's logo, and whether the request's origin may read it
/// (an admitted embed origin).
pub fn logo(app: &App, launch_token: &str, origin: Option<&str>) -> Result<(String, Vec<u8>, bool)> {
    let (ws, g, agent_id) = serving(app, launch_token, origin)?;
    let (mime, bytes) = crate::agents::public_logo(app, &ws, &agent_id)?.ok_or_else(|| Error::not_found("logo"))?;
    let admitted = origin.is_some_and(|o| g.website_embed_enabled && general::admits(&g, o));
    Ok((mime, bytes, admitted))
}
