//! The converse surface: other AI agents (over MCP) and backends (REST) talking to one agent.
//!
//! Built so far: agent channel credentials (issue 21, first part). An agent's manager creates a
//! credential for an audience (`mcp` or `rest`) with a label and an optional expiry; its secret
//! is shown once and only its SHA-256 is kept. Rotating replaces the secret and bumps the version
//! (what was made under the old version stops working); revoking ends it. `verify` is what the
//! session exchange and the REST channel will call on every request. Still to come: the session
//! exchange, the converse routes, `/mcp` and outbound MCP.

mod store;

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

fn secret_for(audience: &str) -> String {
    new_secret(if audience == "mcp" { "scm_" } else { "scr_" })
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
