//! Converse sessions: an MCP credential exchanged for a session, re-checked against the
//! credential on every request.
//!
//! A session is a row in `converse_sessions`. Over REST it is carried by a signed session token
//! (12 hours, absolute, never refreshed); on `/mcp` its id is the `Mcp-Session-Id` (kept for
//! [`MCP_IDLE_SECS`] after its last use). Both are bound to the credential's id and version:
//! rotating or revoking the credential ends them at the next request. The session pins the agent
//! release it was opened on (its routine tools) and is bound to one conversation at its first ask
//! (concurrent first asks share it).
//!
//! Sessionless `/mcp` calls continue a conversation with a signed conversation handle instead,
//! bound to the credential the same way.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{Credential, store};
use crate::agents::config::{self as agent, AgentConfig};
use crate::app::App;
use crate::clock::rfc3339;
use crate::conversations::{self, Channel, NewConversation, Visibility};
use crate::error::{Error, ErrorCode, Result};
use crate::names::names;
use crate::public_chat::token::{self, Expiring, Kind};

/// How long a REST converse session token is valid.
pub const SESSION_SECS: i64 = token::SESSION_SECS;
/// How long an `Mcp-Session-Id` lives after its last use.
pub const MCP_IDLE_SECS: i64 = 24 * 3600;
/// How long a conversation handle is valid.
pub const HANDLE_SECS: i64 = 30 * 24 * 3600;

names! {
    /// How a converse session is carried.
    pub Transport { Rest = "rest", Mcp = "mcp" }
}

/// A converse session.
#[derive(Debug, Clone)]
pub struct ConverseSession {
    pub id: String,
    pub workspace_id: String,
    pub agent_id: String,
    pub credential_id: String,
    pub credential_version: i64,
    pub transport: Transport,
    /// The agent release pinned at the exchange (none: the agent had no published revision).
    pub revision_id: Option<String>,
    pub conversation_id: Option<String>,
    pub client_name: Option<String>,
    pub client_version: Option<String>,
    pub created_at: String,
    pub expires_at: String,
}

impl ConverseSession {
    /// The caller the session acts for.
    pub fn caller(&self) -> Caller {
        Caller {
            workspace_id: self.workspace_id.clone(),
            agent_id: self.agent_id.clone(),
            credential_id: self.credential_id.clone(),
            credential_version: self.credential_version,
        }
    }
}

/// What calls the converse surface: the credential's agent.
#[derive(Debug, Clone)]
pub struct Caller {
    pub workspace_id: String,
    pub agent_id: String,
    pub credential_id: String,
    pub credential_version: i64,
}

impl Caller {
    pub fn of(c: &Credential) -> Caller {
        Caller {
            workspace_id: c.workspace_id.clone(),
            agent_id: c.agent_id.clone(),
            credential_id: c.id.clone(),
            credential_version: c.version,
        }
    }
}

/// The client a session was opened by (as it says; for the dashboard).
#[derive(Debug, Clone, Default)]
pub struct ClientName {
    pub name: Option<String>,
    pub version: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionClaims {
    workspace_id: String,
    agent_id: String,
    session_id: String,
    credential_id: String,
    credential_version: i64,
    expires_at: i64,
}

impl Expiring for SessionClaims {
    fn expires_at(&self) -> i64 {
        self.expires_at
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HandleClaims {
    conversation_id: String,
    credential_id: String,
    credential_version: i64,
    expires_at: i64,
}

impl Expiring for HandleClaims {
    fn expires_at(&self) -> i64 {
        self.expires_at
    }
}

/// The 401 of a converse request whose session or credential no longer holds.
pub fn invalid_session() -> Error {
    Error::unauthorized("the converse session is missing, expired or no longer valid: exchange the credential again")
        .with_details(json!({"code": "invalid_session"}))
}

/// The 401 of a secret that is not an active MCP credential.
pub fn invalid_credential() -> Error {
    Error::unauthorized("this is not an active agent credential for the MCP audience")
        .with_details(json!({"code": "invalid_credential"}))
}

/// The active MCP credential a secret belongs to (401 otherwise: unknown, revoked, expired,
/// rotated away, or a REST credential).
pub fn credential(app: &App, secret: &str) -> Result<Credential> {
    super::verify(app, secret, "mcp")?.ok_or_else(invalid_credential)
}

/// What an exchange gives.
pub struct Exchanged {
    pub session_token: String,
    pub expires_at: String,
    pub agent_id: String,
    pub agent_name: String,
    pub session: ConverseSession,
}

/// Opens a session for a credential over `transport`: pins the agent's published release and
/// records the client. Expired sessions are pruned on the way.
pub fn open(app: &App, c: &Credential, transport: Transport, client: &ClientName) -> Result<(ConverseSession, String)> {
    let id = format!("cs_{}", crate::ids::new_id().replace('-', ""));
    open_as(app, c, transport, client, &id)
}

/// Opens the `/mcp` session `id` (the `Mcp-Session-Id` the transport assigned) for a credential;
/// an id already open stays as it is (a restored session replays its initialization).
pub fn open_mcp(app: &App, c: &Credential, client: &ClientName, id: &str) -> Result<ConverseSession> {
    if let Some(s) = app.db.read(|db| store::session(db, id))? {
        return Ok(s);
    }
    open_as(app, c, Transport::Mcp, client, id).map(|(s, _)| s)
}

fn open_as(
    app: &App,
    c: &Credential,
    transport: Transport,
    client: &ClientName,
    id: &str,
) -> Result<(ConverseSession, String)> {
    let now = app.clock.now();
    let now_s = rfc3339(now);
    let life = if transport == Transport::Rest { SESSION_SECS } else { MCP_IDLE_SECS };
    app.db.write(|tx| {
        store::prune_sessions(tx, &now_s)?;
        let ws = crate::ids::WorkspaceId(c.workspace_id.clone());
        let cfg = agent::published(tx, &ws, &c.agent_id)?;
        let s = ConverseSession {
            id: id.to_string(),
            workspace_id: c.workspace_id.clone(),
            agent_id: c.agent_id.clone(),
            credential_id: c.id.clone(),
            credential_version: c.version,
            transport,
            revision_id: cfg.revision_id.clone(),
            conversation_id: None,
            client_name: client.name.clone(),
            client_version: client.version.clone(),
            created_at: now_s.clone(),
            expires_at: rfc3339(now + chrono::Duration::seconds(life)),
        };
        store::insert_session(tx, &s, &now_s)?;
        store::touch_credential(tx, &c.id, &now_s)?;
        Ok((s, cfg.name))
    })
}

/// `POST /mcp/converse/session`: an MCP credential for a signed session token (12 hours).
pub fn exchange(app: &App, secret: &str, client: &ClientName) -> Result<Exchanged> {
    let c = credential(app, secret)?;
    let secret_key = crate::public_chat::session::secret(app)?;
    let (session, agent_name) = open(app, &c, Transport::Rest, client)?;
    let exp = chrono::DateTime::parse_from_rfc3339(&session.expires_at).map(|t| t.timestamp()).unwrap_or(0);
    let claims = SessionClaims {
        workspace_id: session.workspace_id.clone(),
        agent_id: session.agent_id.clone(),
        session_id: session.id.clone(),
        credential_id: c.id.clone(),
        credential_version: c.version,
        expires_at: exp,
    };
    Ok(Exchanged {
        session_token: token::sign(secret_key, Kind::Converse, &claims),
        expires_at: session.expires_at.clone(),
        agent_id: session.agent_id.clone(),
        agent_name,
        session,
    })
}

/// Whether the credential a session or handle was made under still holds (same id and version,
/// active, the MCP audience).
fn credential_holds(app: &App, credential_id: &str, version: i64) -> Result<bool> {
    let now = rfc3339(app.clock.now());
    let c = app.db.read(|c| store::by_id(c, credential_id))?;
    Ok(c.is_some_and(|c| c.audience == "mcp" && c.version == version && c.status(&now) == "active"))
}

/// The session a REST converse request's bearer token carries, re-checked against its credential
/// (401 `invalid_session` otherwise).
pub fn authenticate(app: &App, bearer: Option<&str>) -> Result<ConverseSession> {
    let t = bearer.ok_or_else(invalid_session)?;
    let key = crate::public_chat::session::secret(app)?;
    let c: SessionClaims =
        token::verify(key, Kind::Converse, t, app.clock.now().timestamp()).map_err(|_| invalid_session())?;
    if !credential_holds(app, &c.credential_id, c.credential_version)? {
        return Err(invalid_session());
    }
    let s = app.db.read(|db| store::session(db, &c.session_id))?.ok_or_else(invalid_session)?;
    if s.credential_id != c.credential_id || s.agent_id != c.agent_id || s.transport != Transport::Rest {
        return Err(invalid_session());
    }
    Ok(s)
}

/// The live `/mcp` session `id` of this credential (none when unknown, expired, or made under
/// another credential or version); its expiry moves on with the use.
pub fn mcp_session(app: &App, c: &Credential, id: &str) -> Result<Option<ConverseSession>> {
    let now = app.clock.now();
    let now_s = rfc3339(now);
    let s = app.db.read(|db| store::session(db, id))?;
    let Some(s) = s.filter(|s| {
        s.transport == Transport::Mcp
            && s.credential_id == c.id
            && s.credential_version == c.version
            && s.expires_at.as_str() > now_s.as_str()
    }) else {
        return Ok(None);
    };
    // the idle expiry moves at most once a minute per session
    let next = rfc3339(now + chrono::Duration::seconds(MCP_IDLE_SECS));
    if chrono::DateTime::parse_from_rfc3339(&s.expires_at)
        .is_ok_and(|e| (now + chrono::Duration::seconds(MCP_IDLE_SECS - 60)) > e)
    {
        app.db.write(|tx| store::extend_session(tx, &s.id, &next, &now_s))?;
    }
    Ok(Some(s))
}

/// Ends an `/mcp` session (the client's `DELETE`).
pub fn close_mcp(app: &App, id: &str) -> Result<()> {
    app.db.write(|tx| store::delete_session(tx, id))
}

/// What the MCP transport keeps of a session to restore it after a restart (its initialization,
/// as JSON), when the session is live.
pub fn mcp_state(app: &App, id: &str) -> Result<Option<String>> {
    let now = rfc3339(app.clock.now());
    app.db.read(|db| store::mcp_state(db, id, &now))
}

pub fn set_mcp_state(app: &App, id: &str, state: &str) -> Result<()> {
    app.db.write(|tx| store::set_mcp_state(tx, id, state))
}

/// A signed handle for `conversation_id`, bound to the caller's credential.
pub fn handle(app: &App, caller: &Caller, conversation_id: &str) -> Result<String> {
    let key = crate::public_chat::session::secret(app)?;
    let claims = HandleClaims {
        conversation_id: conversation_id.to_string(),
        credential_id: caller.credential_id.clone(),
        credential_version: caller.credential_version,
        expires_at: app.clock.now().timestamp() + HANDLE_SECS,
    };
    Ok(token::sign(key, Kind::Handle, &claims))
}

/// The conversation a handle names, when it was made for this caller's credential (same id and
/// version); 404 otherwise.
pub fn from_handle(app: &App, caller: &Caller, handle: &str) -> Result<String> {
    let nf = || {
        Error::new(ErrorCode::NotFound, "this conversation handle is unknown, expired or not yours")
            .with_details(json!({"code": "conversation_not_found"}))
    };
    let key = crate::public_chat::session::secret(app)?;
    let c: HandleClaims =
        token::verify(key, Kind::Handle, handle.trim(), app.clock.now().timestamp()).map_err(|_| nf())?;
    if c.credential_id != caller.credential_id || c.credential_version != caller.credential_version {
        return Err(nf());
    }
    Ok(c.conversation_id)
}

/// Where a converse ask lands.
#[derive(Debug, Clone)]
pub enum Target<'a> {
    /// The session's conversation (bound at the first ask).
    Session(&'a ConverseSession),
    /// A sessionless call: the handle's conversation, or a new one.
    Sessionless(Option<String>),
}

/// The conversation of `target` and its agent release, when it exists already.
pub fn existing(app: &App, caller: &Caller, target: &Target) -> Result<Option<(String, AgentConfig)>> {
    let cid = match target {
        Target::Session(s) => app.db.read(|db| store::session(db, &s.id))?.ok_or_else(invalid_session)?.conversation_id,
        Target::Sessionless(h) => h.clone(),
    };
    let Some(cid) = cid else { return Ok(None) };
    app.db.read(|db| {
        let conv = conversations::find_in(db, &caller.workspace_id, &cid, false)?;
        if conv.agent_id != caller.agent_id {
            return Err(Error::not_found("conversation"));
        }
        let cfg = match &conv.revision_id {
            Some(rid) => agent::revision(db, &conv.agent_id, rid)?,
            None => agent::published(db, &crate::ids::WorkspaceId(caller.workspace_id.clone()), &conv.agent_id)?,
        };
        Ok(Some((conv.id, cfg)))
    })
}

/// The agent release a new conversation of `target` would be pinned to.
pub fn release(app: &App, caller: &Caller, target: &Target) -> Result<AgentConfig> {
    app.db.read(|db| match target {
        Target::Session(ConverseSession { revision_id: Some(rid), .. }) => agent::revision(db, &caller.agent_id, rid),
        _ => agent::published(db, &crate::ids::WorkspaceId(caller.workspace_id.clone()), &caller.agent_id),
    })
}

/// The conversation of `target`, started (pinned to `cfg`'s release) when there is none yet.
/// A session's first asks all bind the same conversation (the binding is one conditional write).
pub fn conversation(app: &App, caller: &Caller, target: &Target, cfg: &AgentConfig) -> Result<String> {
    if let Some((cid, _)) = existing(app, caller, target)? {
        return Ok(cid);
    }
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let new = NewConversation {
            workspace_id: &caller.workspace_id,
            agent_id: &caller.agent_id,
            revision_id: cfg.revision_id.as_deref(),
            channel: Channel::Mcp,
            visibility: Visibility::Visitor,
            test_execution_id: None,
            started_by: Some(&caller.credential_id),
            public_session_id: None,
        };
        match target {
            Target::Session(s) => {
                if let Some(cid) = store::session(tx, &s.id)?.and_then(|s| s.conversation_id) {
                    return Ok(cid);
                }
                let cid = conversations::start(tx, &new, &now)?;
                store::bind_conversation(tx, &s.id, &cid)?;
                Ok(cid)
            }
            Target::Sessionless(_) => conversations::start(tx, &new, &now),
        }
    })
}

/// The conversation a session is bound to, if any yet.
pub fn conversation_of(app: &App, session_id: &str) -> Result<Option<String>> {
    Ok(app.db.read(|db| store::session(db, session_id))?.and_then(|s| s.conversation_id))
}
