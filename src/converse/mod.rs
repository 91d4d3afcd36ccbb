//! The converse surface: other AI agents (over MCP) and backends (REST) talking to one agent.
//!
//! - **Credentials** (this file): an agent's manager creates a credential for an audience (`mcp`
//!   or `rest`) with a label and an optional expiry; its secret is shown once and only its SHA-256
//!   is kept. Rotating replaces the secret and bumps the version (what was made under the old
//!   version stops working); revoking ends it.
//! - **Sessions** (`session.rs`): an MCP credential exchanged for a converse session, re-checked
//!   against the credential on every request, bound to one conversation.
//! - **Asks** (`ask.rs`) and **routine tools** (`tools.rs`): a message or a typed routine call,
//!   checked before anything is recorded, run as the agent's normal turn.
//! - **Updates** (`updates.rs`): the replies since a cursor, with a bus-woken long poll.

pub mod api;
pub mod ask;
pub mod session;
mod store;
pub mod tools;
pub mod updates;

use serde_json::json;

use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::password::{new_secret, sha256_hex};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, Result};

/// An agent channel credential (never its secret).
#[derive(Debug, Clone)]
pub struct Credential {
    pub id: String,
    pub workspace_id: String,
    pub agent_id: String,
    /// `mcp` or `rest`.
    pub audience: String,
    pub label: String,
    /// The secret's first characters.
    pub prefix: String,
    pub version: i64,
    pub revoked_at: Option<String>,
    pub expires_at: Option<String>,
    pub last_used_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl Credential {
    /// `active`, `revoked` or `expired` at `now` (RFC 3339).
    pub fn status(&self, now: &str) -> &'static str {
        if self.revoked_at.is_some() {
            "revoked"
        } else if self.expires_at.as_deref().is_some_and(|e| e <= now) {
            "expired"
        } else {
            "active"
        }
    }
}

/// A credential with its secret, shown this once.
pub struct Issued {
    pub credential: Credential,
    pub secret: String,
}

/// What a credential is made with.
#[derive(Debug, Clone)]
pub struct NewCredential {
    pub audience: String,
    pub label: String,
    pub expires_at: Option<String>,
}

const AUDIENCES: [&str; 2] = ["mcp", "rest"];

/// What a converse session may do (its fixed permission set): talk to its one agent, call its
/// routine tools and read its own conversation. Nothing else.
pub const PERMISSIONS: [&str; 3] = ["agent.converse", "agent.routine_tools.call", "conversation.updates.read"];

/// How an MCP-audience secret begins.
pub const MCP_PREFIX: &str = "scm_";
/// How a REST-audience secret begins.
pub const REST_PREFIX: &str = "scr_";

fn secret_for(audience: &str) -> String {
    new_secret(if audience == "mcp" { MCP_PREFIX } else { REST_PREFIX })
}

fn prefix_of(secret: &str) -> String {
    secret.chars().take(12).collect()
}

fn agent_in_workspace(c: &crate::storage::Conn, p: &Principal, agent_id: &str) -> Result<()> {
    crate::agents::get_in(c, &p.workspace_id, agent_id).map(|_| ())
}

/// `POST /agents/{agentId}/channel-credentials`: dashboard session and agent manage permission.
pub fn create(app: &App, p: &Principal, actor: &Actor, agent_id: &str, n: NewCredential) -> Result<Issued> {
    p.require_session()?;
    p.require(Perm::AgentsManage)?;
    if !AUDIENCES.contains(&n.audience.as_str()) {
        return Err(Error::invalid_field("audience", "audience is mcp or rest"));
    }
    let label = n.label.trim().to_string();
    if label.is_empty() || label.chars().count() > 120 {
        return Err(Error::invalid_field("label", "label is 1 to 120 characters"));
    }
    let now = app.clock.now();
    let expires_at = match n.expires_at.as_deref() {
        None => None,
        Some(e) => {
            let t = chrono::DateTime::parse_from_rfc3339(e)
                .map_err(|_| Error::invalid_field("expiresAt", "expiresAt is an RFC 3339 time"))?
                .with_timezone(&chrono::Utc);
            if t <= now {
                return Err(Error::invalid_field("expiresAt", "expiresAt must be in the future"));
            }
            Some(rfc3339(t))
        }
    };
    let secret = secret_for(&n.audience);
    let now_s = rfc3339(now);
    let c = Credential {
        id: crate::ids::new_id(),
        workspace_id: p.workspace_id.0.clone(),
        agent_id: agent_id.to_string(),
        audience: n.audience.clone(),
        label,
        prefix: prefix_of(&secret),
        version: 1,
        revoked_at: None,
        expires_at,
        last_used_at: None,
        created_at: now_s.clone(),
        updated_at: now_s.clone(),
    };
    app.db.write(|tx| {
        agent_in_workspace(tx, p, agent_id)?;
        store::insert(tx, &c, &sha256_hex(&secret))?;
        let ev = Event::new("agent.channel_credential.created")
            .workspace(&p.workspace_id)
            .target("channel_credential", &c.id);
        audit::record(tx, &now_s, actor, ev.meta(json!({"agentId": agent_id, "audience": c.audience})))
    })?;
    Ok(Issued { credential: c, secret })
}

/// `GET /agents/{agentId}/channel-credentials?audience=`: no secrets.
pub fn list(app: &App, p: &Principal, agent_id: &str, audience: Option<&str>) -> Result<Vec<Credential>> {
    p.require_session()?;
    p.require(Perm::AgentsManage)?;
    if audience.is_some_and(|a| !AUDIENCES.contains(&a)) {
        return Err(Error::invalid_field("audience", "audience is mcp or rest"));
    }
    app.db.read(|c| {
        agent_in_workspace(c, p, agent_id)?;
        store::of_agent(c, agent_id, audience)
    })
}

/// `POST …/{id}/rotate`: a new secret (shown once); the old one stops working at once.
pub fn rotate(app: &App, p: &Principal, actor: &Actor, agent_id: &str, id: &str) -> Result<Issued> {
    p.require_session()?;
    p.require(Perm::AgentsManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        agent_in_workspace(tx, p, agent_id)?;
        let cur = store::find(tx, agent_id, id)?.ok_or_else(|| Error::not_found("channel credential"))?;
        if cur.revoked_at.is_some() {
            return Err(Error::conflict("a revoked credential cannot be rotated; create a new one"));
        }
        let secret = secret_for(&cur.audience);
        store::rotate(tx, id, &sha256_hex(&secret), &prefix_of(&secret), &now)?;
        let ev =
            Event::new("agent.channel_credential.rotated").workspace(&p.workspace_id).target("channel_credential", id);
        audit::record(tx, &now, actor, ev.meta(json!({"agentId": agent_id})))?;
        let credential = store::find(tx, agent_id, id)?.ok_or_else(|| Error::not_found("channel credential"))?;
        Ok(Issued { credential, secret })
    })
}

/// `POST …/{id}/revoke`: the credential stops working at once.
pub fn revoke(app: &App, p: &Principal, actor: &Actor, agent_id: &str, id: &str) -> Result<Credential> {
    p.require_session()?;
    p.require(Perm::AgentsManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        agent_in_workspace(tx, p, agent_id)?;
        store::find(tx, agent_id, id)?.ok_or_else(|| Error::not_found("channel credential"))?;
        store::revoke(tx, id, &now)?;
        let ev =
            Event::new("agent.channel_credential.revoked").workspace(&p.workspace_id).target("channel_credential", id);
        audit::record(tx, &now, actor, ev.meta(json!({"agentId": agent_id})))?;
        store::find(tx, agent_id, id)?.ok_or_else(|| Error::not_found("channel credential"))
    })
}

/// The credential a secret belongs to, when it is active for `audience` (none otherwise: unknown,
/// revoked, expired, rotated away or another audience all look the same to the caller).
pub fn verify(app: &App, secret: &str, audience: &str) -> Result<Option<Credential>> {
    let now = rfc3339(app.clock.now());
    let c = app.db.read(|c| store::by_hash(c, &sha256_hex(secret)))?;
    Ok(c.filter(|c| c.audience == audience && c.status(&now) == "active"))
}

/// The caller of `POST /agents/{agentId}/chat` with a REST-audience credential: chat with its own
/// agent and nothing else (401 for any other secret, or another agent's path).
pub fn rest_principal(app: &App, secret: &str, agent_id: &str) -> Result<Principal> {
    let c = verify(app, secret, "rest")?
        .filter(|c| c.agent_id == agent_id)
        .ok_or_else(|| Error::unauthorized("this credential is not an active REST credential of this agent"))?;
    let org = app.db.read(|db| store::organization_of(db, &c.workspace_id))?;
    let mut permissions = crate::auth::PermSet::empty();
    permissions.insert(Perm::Chat);
    Ok(Principal {
        via: crate::auth::Via::ChannelCredential,
        org_id: crate::ids::OrgId(org),
        user_id: None,
        role: None,
        credential_id: Some(c.id),
        session_hash: None,
        workspace_id: crate::ids::WorkspaceId(c.workspace_id),
        permissions,
    })
}

/// What a calling agent learns about the agent it talks to (`get_agent_profile`).
#[derive(Debug, Clone)]
pub struct Profile {
    pub agent_id: String,
    pub name: String,
    pub retrieval_enabled: bool,
    /// Whether the agent hands a conversation to a person when it finds nothing to answer with.
    pub handoff_on_miss: bool,
    pub document_count: i64,
    /// The newest titles it answers from (at most [`PROFILE_TITLES`]).
    pub titles: Vec<String>,
}

/// Titles a profile lists at most.
pub const PROFILE_TITLES: usize = 20;

/// The profile of the caller's agent (its published release).
pub fn profile(app: &App, caller: &session::Caller) -> Result<Profile> {
    let ws = crate::ids::WorkspaceId(caller.workspace_id.clone());
    app.db.read(|c| {
        let cfg = crate::agents::config::published(c, &ws, &caller.agent_id)?;
        let sources = match &cfg.settings.source_scope {
            crate::agents::api::SourceScope::All => None,
            crate::agents::api::SourceScope::Selected { source_ids } => Some(source_ids.clone()),
        };
        let (document_count, titles) = if cfg.settings.retrieval_enabled {
            crate::documents::ready_titles(c, &ws, sources.as_deref(), PROFILE_TITLES)?
        } else {
            (0, vec![])
        };
        Ok(Profile {
            agent_id: cfg.agent_id.clone(),
            name: cfg.name.clone(),
            retrieval_enabled: cfg.settings.retrieval_enabled,
            handoff_on_miss: cfg.settings.handoff_on_retrieval_miss,
            document_count,
            titles,
        })
    })
}

/// A REST channel credential continues only the conversations it started itself (never a
/// visitor's, another credential's or a test's): 404 otherwise.
pub fn check_rest_conversation(app: &App, p: &Principal, conversation_id: &str) -> Result<()> {
    let conv = app.db.read(|c| crate::conversations::find_in(c, &p.workspace_id.0, conversation_id, false))?;
    let own = conv.channel == crate::conversations::Channel::Api
        && conv.started_by.is_some()
        && conv.started_by == p.credential_id;
    if own { Ok(()) } else { Err(Error::not_found("conversation")) }
}
