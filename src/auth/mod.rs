//! Who is calling: dashboard sessions (cookie), personal access tokens and workspace service
//! credentials (bearer), resolved into a [`Principal`] with a workspace context and the
//! permissions that apply in it.
//!
//! Accounts (organization, people, workspaces, invitations) are in [`accounts`]; credential
//! lifecycle in [`tokens`].

pub mod accounts;
pub mod api;
mod cache;
pub mod password;
pub mod permissions;
mod store;
pub mod tokens;

use std::collections::HashMap;

use parking_lot::Mutex;
use serde::Serialize;

pub use permissions::{Perm, PermSet, Role};

use crate::app::App;
use crate::audit::Actor;
use crate::clock::{parse_rfc3339, rfc3339};
use crate::error::{Error, Result};
use crate::ids::{OrgId, UserId, WorkspaceId};

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Organization {
    pub id: OrgId,
    pub name: String,
    pub created_at: String,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct User {
    pub id: UserId,
    pub email: String,
    pub name: Option<String>,
    pub created_at: String,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Workspace {
    pub id: WorkspaceId,
    pub organization_id: OrgId,
    pub name: String,
    pub is_default: bool,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone)]
pub struct Invitation {
    pub id: String,
    pub organization_id: OrgId,
    pub email: Option<String>,
    pub role: Role,
    pub created_at: String,
    pub expires_at: String,
    pub accepted_at: Option<String>,
    pub revoked_at: Option<String>,
    pub invited_by: Option<UserId>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    Personal,
    Service,
}

impl TokenKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenKind::Personal => "personal",
            TokenKind::Service => "service",
        }
    }
}

#[derive(Debug, Clone)]
pub struct ApiToken {
    pub id: String,
    pub kind: TokenKind,
    pub name: String,
    pub prefix: String,
    pub organization_id: OrgId,
    pub user_id: Option<UserId>,
    pub workspace_id: Option<WorkspaceId>,
    pub permissions: PermSet,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub last_used_at: Option<String>,
    pub revoked_at: Option<String>,
    pub created_by: Option<UserId>,
}

/// How the caller authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    Session,
    PersonalToken,
    ServiceCredential,
    /// A REST-audience agent channel credential (chat with its one agent only).
    ChannelCredential,
}

/// An authenticated caller in one workspace.
#[derive(Debug, Clone)]
pub struct Principal {
    pub via: Via,
    pub org_id: OrgId,
    pub user_id: Option<UserId>,
    pub role: Option<Role>,
    /// The API token's id (personal or service), when a token was used.
    pub credential_id: Option<String>,
    /// SHA-256 of the session token, when a session was used.
    pub session_hash: Option<String>,
    /// The workspace this request acts in.
    pub workspace_id: WorkspaceId,
    /// Effective permissions in that workspace.
    pub permissions: PermSet,
}

impl Principal {
    /// 403 unless the caller holds `p`.
    pub fn require(&self, p: Perm) -> Result<()> {
        if self.permissions.contains(p) {
            Ok(())
        } else {
            Err(Error::forbidden(format!("this credential lacks the permission {}", p.name()))
                .with_details(serde_json::json!({ "permission": p.name() })))
        }
    }

    pub fn has(&self, p: Perm) -> bool {
        self.permissions.contains(p)
    }

    /// 401 unless the caller signed in to the dashboard (session-only routes).
    pub fn require_session(&self) -> Result<()> {
        if self.via == Via::Session { Ok(()) } else { Err(session_only_error()) }
    }

    pub fn actor(&self, request_id: Option<String>) -> Actor {
        match self.via {
            Via::ServiceCredential => Actor::service(self.credential_id.clone(), request_id),
            _ => Actor::user(self.user_id.clone(), request_id),
        }
    }
}

pub fn session_only_error() -> Error {
    Error::unauthorized("this route needs a signed-in dashboard session; API credentials are not accepted here")
        .with_details(serde_json::json!({ "code": "session_required" }))
}

/// Credentials presented by a request.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    pub bearer: Option<String>,
    pub session: Option<String>,
}

/// Per-process authentication state: the password hashing gate, the last-used bookkeeping of
/// tokens and the cache of recent authentications.
pub struct AuthState {
    /// Bounds the password hashing of the whole process.
    pub hashing: password::HashGate,
    touched: Mutex<HashMap<String, i64>>,
    cache: cache::AuthCache,
}

impl AuthState {
    pub fn new(config: &crate::config::Config) -> Self {
        AuthState {
            hashing: password::HashGate::new(config.password_hashes_concurrent),
            touched: Mutex::new(HashMap::new()),
            cache: cache::AuthCache::default(),
        }
    }
}

/// `last_used_at` is written at most this often per token, so reads stay reads.
const TOUCH_EVERY_MS: i64 = 60_000;

/// Resolves the caller and the workspace context (`X-Workspace-Id`, else the only or default
/// workspace). Missing, unknown, revoked or expired credentials are 401; a workspace the caller
/// cannot see is 404. A success is kept in the authentication cache (see [`cached`]).
pub fn authenticate(app: &App, creds: &Credentials, workspace_header: Option<&str>) -> Result<Principal> {
    // read before the rows: a change committed after this point makes the entry stale
    let generation = app.db.identity_generation();
    let (principal, valid_until) = resolve(app, creds, workspace_header)?;
    if let Some(key) = cache::Key::of(creds, workspace_header) {
        app.auth.cache.insert(key, principal.clone(), valid_until, generation);
    }
    Ok(principal)
}

/// The caller as [`authenticate`] resolved it for the same credential and workspace header,
/// when nothing that decides it has changed since and the credential has not expired; `None`
/// means "authenticate". Reads no database, so it can run on the async threads. A token whose
/// last use is due to be recorded also answers `None`, so the full path records it.
pub fn cached(app: &App, creds: &Credentials, workspace_header: Option<&str>) -> Option<Principal> {
    let key = cache::Key::of(creds, workspace_header)?;
    let now = app.clock.now();
    let p = app.auth.cache.get(&key, app.db.identity_generation(), now)?;
    if let Some(token_id) = p.credential_id.as_deref() {
        let touched = app.auth.touched.lock();
        if touched.get(token_id).is_none_or(|last| now.timestamp_millis() - last >= TOUCH_EVERY_MS) {
            return None;
        }
    }
    Some(p)
}

/// The principal and when its credential expires.
type Resolved = (Principal, Option<chrono::DateTime<chrono::Utc>>);

/// [`authenticate`] without the cache: the principal and when its credential expires.
fn resolve(app: &App, creds: &Credentials, workspace_header: Option<&str>) -> Result<Resolved> {
    let now = app.clock.now();
    if let Some(bearer) = creds.bearer.as_deref() {
        return resolve_bearer(app, bearer, workspace_header, now);
    }
    if let Some(session) = creds.session.as_deref() {
        return resolve_session(app, session, workspace_header, now);
    }
    Err(Error::unauthorized("sign in, or send an API credential as Authorization: Bearer <token>"))
}

/// A personal token or service credential sent as `Authorization: Bearer`.
fn resolve_bearer(
    app: &App,
    bearer: &str,
    workspace_header: Option<&str>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Resolved> {
    let now_s = rfc3339(now);
    let hash = password::sha256_hex(bearer);
    let token = app
        .db
        .read(|c| store::token_by_hash(c, &hash))?
        .ok_or_else(|| Error::unauthorized("the API credential is not valid"))?;
    if token.revoked_at.is_some() {
        return Err(Error::unauthorized("the API credential was revoked"));
    }
    let expires = token.expires_at.as_deref().and_then(parse_rfc3339);
    if expires.is_some_and(|e| e <= now) {
        return Err(Error::unauthorized("the API credential has expired"));
    }
    touch(app, &token.id, now.timestamp_millis(), &now_s);
    match token.kind {
        TokenKind::Service => {
            let bound =
                token.workspace_id.clone().ok_or_else(|| Error::unauthorized("the API credential is not valid"))?;
            if let Some(h) = workspace_header.filter(|h| !h.is_empty())
                && h != bound.as_str()
            {
                return Err(Error::not_found("workspace"));
            }
            Ok((
                Principal {
                    via: Via::ServiceCredential,
                    org_id: token.organization_id.clone(),
                    user_id: None,
                    role: None,
                    credential_id: Some(token.id.clone()),
                    session_hash: None,
                    workspace_id: bound,
                    permissions: token.permissions,
                },
                expires,
            ))
        }
        TokenKind::Personal => {
            let user = token.user_id.clone().ok_or_else(|| Error::unauthorized("the API credential is not valid"))?;
            let (org, role) = app
                .db
                .read(|c| store::membership_of(c, &user))?
                .ok_or_else(|| Error::unauthorized("the API credential's owner has no access any more"))?;
            let ws = resolve_workspace(app, &org, workspace_header)?;
            Ok((
                Principal {
                    via: Via::PersonalToken,
                    org_id: org,
                    user_id: Some(user),
                    role: Some(role),
                    credential_id: Some(token.id.clone()),
                    session_hash: None,
                    workspace_id: ws,
                    permissions: token.permissions.intersect(role.permissions()),
                },
                expires,
            ))
        }
    }
}

/// A session cookie.
fn resolve_session(
    app: &App,
    session: &str,
    workspace_header: Option<&str>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Resolved> {
    let hash = password::sha256_hex(session);
    let (user, expires) = app
        .db
        .read(|c| store::session(c, &hash))?
        .ok_or_else(|| Error::unauthorized("the session is not valid; sign in again"))?;
    let expires = parse_rfc3339(&expires);
    if expires.is_none_or(|e| e <= now) {
        return Err(Error::unauthorized("the session has expired; sign in again"));
    }
    let (org, role) = app
        .db
        .read(|c| store::membership_of(c, &user))?
        .ok_or_else(|| Error::unauthorized("this account has no access any more"))?;
    let ws = resolve_workspace(app, &org, workspace_header)?;
    Ok((
        Principal {
            via: Via::Session,
            org_id: org,
            user_id: Some(user),
            role: Some(role),
            credential_id: None,
            session_hash: Some(hash),
            workspace_id: ws,
            permissions: role.permissions(),
        },
        expires,
    ))
}

fn resolve_workspace(app: &App, org: &OrgId, header: Option<&str>) -> Result<WorkspaceId> {
    match header.filter(|h| !h.is_empty()) {
        Some(h) => {
            let ws = app.db.read(|c| store::workspace(c, h))?;
            match ws {
                Some(ws) if &ws.organization_id == org => Ok(ws.id),
                _ => Err(Error::not_found("workspace")),
            }
        }
        None => app
            .db
            .read(|c| store::default_workspace(c, org))?
            .map(|w| w.id)
            .ok_or_else(|| Error::not_found("workspace")),
    }
}

fn touch(app: &App, token_id: &str, now_ms: i64, now_s: &str) {
    {
        let mut t = app.auth.touched.lock();
        if t.get(token_id).is_some_and(|last| now_ms - last < TOUCH_EVERY_MS) {
            return;
        }
        t.insert(token_id.to_string(), now_ms);
    }
    if let Err(e) = app.db.write(|tx| store::touch_token(tx, token_id, now_s)) {
        tracing::warn!(error = %e, "could not record a token's last use");
    }
}

impl Serialize for PermSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.names().serialize(s)
    }
}
