//! The organization, its people and workspaces: registration (the first one creates the
//! organization; later ones need an invitation), sign-in, invitations, workspaces, and the
//! headless bootstrap used by `steward admin bootstrap`.

use chrono::Duration as ChronoDuration;

use super::password::{check_password_rules, new_secret, normalize_email, sha256_hex};
use super::permissions::{Perm, PermSet, Role};
use super::{Invitation, Organization, Principal, User, Via, Workspace, store};
use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::clock::{parse_rfc3339, rfc3339};
use crate::error::{Error, ErrorCode, Result};
use crate::ids::{OrgId, UserId, WorkspaceId, new_id};
use crate::ratelimit::shared::{self, Allowance, Scope};
use crate::storage::{Conn, Tx};

/// Where a request came from (for sessions and login limits).
#[derive(Debug, Clone, Default)]
pub struct ClientInfo {
    pub addr: Option<String>,
    pub user_agent: Option<String>,
}

pub struct RegisterInput {
    pub email: String,
    pub password: String,
    pub name: Option<String>,
    pub invitation_token: Option<String>,
    pub organization_name: Option<String>,
}

/// A signed-in user with a fresh session token (the cookie value).
pub struct SignedIn {
    pub user: User,
    pub organization: Organization,
    pub role: Role,
    pub session_token: String,
    pub expires_at: String,
}

const MAX_NAME_CHARS: usize = 200;

fn clean_name(field: &str, name: Option<String>) -> Result<Option<String>> {
    match name.map(|n| n.split_whitespace().collect::<Vec<_>>().join(" ")) {
        Some(n) if n.is_empty() => Ok(None),
        Some(n) if n.chars().count() > MAX_NAME_CHARS => {
            Err(Error::invalid_field(field, format!("{field} must be at most {MAX_NAME_CHARS} characters")))
        }
        other => Ok(other),
    }
}

fn required_name(field: &str, name: &str) -> Result<String> {
    clean_name(field, Some(name.to_string()))?
        .ok_or_else(|| Error::invalid_field(field, format!("{field} must not be empty")))
}

/// Sets up what every new workspace starts with. Other modules add their defaults here (default
/// agent, settings) so a workspace is complete the moment it exists.
pub fn init_workspace(tx: &Tx, now: &str, ws: &Workspace) -> Result<()> {
    crate::workspace_init::initialize(tx, now, ws)
}

fn new_workspace(tx: &Tx, org: &OrgId, name: &str, is_default: bool, now: &str) -> Result<Workspace> {
    let ws = Workspace {
        id: WorkspaceId::new(),
        organization_id: org.clone(),
        name: name.to_string(),
        is_default,
        created_at: now.to_string(),
        updated_at: now.to_string(),
    };
    store::insert_workspace(tx, &ws)?;
    init_workspace(tx, now, &ws)?;
    Ok(ws)
}

fn start_session(tx: &Tx, app: &App, user: &UserId, client: &ClientInfo) -> Result<(String, String)> {
    let token = new_secret("");
    let now = app.clock.now();
    let expires = rfc3339(now + ChronoDuration::from_std(app.config.session_ttl).unwrap_or(ChronoDuration::days(14)));
    store::insert_session(
        tx,
        &sha256_hex(&token),
        user,
        &rfc3339(now),
        &expires,
        client.user_agent.as_deref().map(|s| &s[..s.floor_char_boundary(300)]),
        client.addr.as_deref(),
    )?;
    Ok((token, expires))
}

/// Who may register: the founder of a server without an organization, or the holder of a valid
/// invitation to the existing one.
enum Admission {
    Founder,
    Invited { org: Organization, invitation: Box<Invitation> },
}

fn invitation_error(message: &str, code: &str) -> Error {
    Error::new(ErrorCode::InvitationRequired, message.to_string()).with_details(serde_json::json!({"code": code}))
}

/// Decides whether `email` may register with `token`, from the database alone (no hashing): run
/// before the password is hashed, and again in the writing transaction.
fn admission(c: &Conn, now: chrono::DateTime<chrono::Utc>, email: &str, token: Option<&str>) -> Result<Admission> {
    if store::user_by_email(c, email)?.is_some() {
        return Err(Error::conflict("an account with this email already exists; sign in instead")
            .with_details(serde_json::json!({"code": "email_taken"})));
    }
    let Some(org) = store::the_organization(c)? else { return Ok(Admission::Founder) };
    let Some(token) = token.filter(|t| !t.is_empty()) else {
        return Err(Error::new(
            ErrorCode::InvitationRequired,
            "this server already has an organization; ask an owner or admin for an invitation",
        ));
    };
    let inv = store::invitation_by_hash(c, &sha256_hex(token))?
        .filter(|i| i.organization_id == org.id)
        .ok_or_else(|| invitation_error("the invitation is not valid", "invitation_invalid"))?;
    if inv.revoked_at.is_some() || inv.accepted_at.is_some() {
        return Err(invitation_error("the invitation was already used or revoked", "invitation_used"));
    }
    if parse_rfc3339(&inv.expires_at).is_none_or(|e| e <= now) {
        return Err(invitation_error("the invitation has expired; ask for a new one", "invitation_expired"));
    }
    if inv.email.as_deref().is_some_and(|e| e != email) {
        return Err(invitation_error(
            "the invitation was made for a different email address",
            "invitation_email_mismatch",
        ));
    }
    Ok(Admission::Invited { org, invitation: Box::new(inv) })
}

/// Registers a person. The first registration on a server creates the organization, its default
/// workspace and the owner; later ones need a valid invitation (403 `invitation_required`).
/// Registrations are limited per client address (429), and the invitation is checked before the
/// password is hashed, so a flood of bogus registrations costs no hashing.
pub fn register(app: &App, input: RegisterInput, client: &ClientInfo) -> Result<SignedIn> {
    let addr_key = client.addr.clone().unwrap_or_else(|| "unknown".into());
    let allowance = Allowance::Sliding(app.config.register_limit_per_ip);
    shared::count(&app.db, app.clock.now_ms(), &[(Scope::Registration, &addr_key, allowance)])?;
    register_unlimited(app, input, client)
}

fn register_unlimited(app: &App, input: RegisterInput, client: &ClientInfo) -> Result<SignedIn> {
    let email = normalize_email(&input.email)?;
    check_password_rules(&input.password)?;
    let name = clean_name("name", input.name)?;
    let org_name = clean_name("organizationName", input.organization_name)?;
    let token = input.invitation_token.as_deref();
    app.db.read(|c| admission(c, app.clock.now(), &email, token))?;
    let hash = app.auth.hashing.hash(&input.password)?;
    let now = rfc3339(app.clock.now());
    let actor_req = Actor { kind: "user", id: None, request_id: None };

    app.db.write(|tx| {
        let user = User { id: UserId::new(), email: email.clone(), name: name.clone(), created_at: now.clone() };
        match admission(tx, app.clock.now(), &email, token)? {
            Admission::Founder => {
                let org = Organization {
                    id: OrgId::new(),
                    name: org_name.clone().unwrap_or_else(|| "My organization".into()),
                    created_at: now.clone(),
                };
                store::insert_org(tx, &org)?;
                store::insert_user(tx, &user, &hash)?;
                store::insert_membership(tx, &org.id, &user.id, Role::Owner, &now)?;
                let ws = new_workspace(tx, &org.id, "Default workspace", true, &now)?;
                let actor = Actor { id: Some(user.id.0.clone()), ..actor_req.clone() };
                audit::record(
                    tx,
                    &now,
                    &actor,
                    Event::new("organization.created").org(&org.id).target("organization", org.id.as_str()),
                )?;
                audit::record(
                    tx,
                    &now,
                    &actor,
                    Event::new("workspace.created").workspace(&ws.id).target("workspace", ws.id.as_str()),
                )?;
                audit::record(
                    tx,
                    &now,
                    &actor,
                    Event::new("user.registered")
                        .org(&org.id)
                        .target("user", user.id.as_str())
                        .meta(serde_json::json!({"role": "owner"})),
                )?;
                let (session_token, expires_at) = start_session(tx, app, &user.id, client)?;
                Ok(SignedIn { user, organization: org, role: Role::Owner, session_token, expires_at })
            }
            Admission::Invited { org, invitation: inv } => {
                store::insert_user(tx, &user, &hash)?;
                store::insert_membership(tx, &org.id, &user.id, inv.role, &now)?;
                if !store::accept_invitation(tx, &inv.id, &user.id, &now)? {
                    return Err(Error::new(ErrorCode::InvitationRequired, "the invitation was already used"));
                }
                let actor = Actor { id: Some(user.id.0.clone()), ..actor_req.clone() };
                audit::record(
                    tx,
                    &now,
                    &actor,
                    Event::new("user.registered")
                        .org(&org.id)
                        .target("user", user.id.as_str())
                        .meta(serde_json::json!({"role": inv.role.as_str(), "invitationId": inv.id})),
                )?;
                let (session_token, expires_at) = start_session(tx, app, &user.id, client)?;
                Ok(SignedIn { user, organization: org, role: inv.role, session_token, expires_at })
            }
        }
    })
}

/// Signs in with email and password. Attempts are limited per email and per client address
/// (429 `rate_limit_exceeded`), counted in the database so the limits hold across nodes and
/// restarts: each attempt is counted before the password is checked, so parallel attempts cannot
/// all slip past the limit; a flood past a limit is refused by a read, before the write lock.
/// An attempt is given back when the password is right (whatever happens next) or when the server
/// could not check it.
pub fn login(app: &App, email: &str, pw: &str, client: &ClientInfo) -> Result<SignedIn> {
    let email_key = email.trim().to_lowercase();
    let addr_key = client.addr.clone().unwrap_or_else(|| "unknown".into());
    let now_ms = app.clock.now_ms();
    let limits = [
        (Scope::SignInEmail, email_key.as_str(), Allowance::Sliding(app.config.login_limit_per_email)),
        (Scope::SignInAddress, addr_key.as_str(), Allowance::Sliding(app.config.login_limit_per_ip)),
    ];
    shared::count(&app.db, now_ms, &limits)?;
    // a correct password takes its attempt back from the address and clears the email's failures
    let forgive = |tx: &Tx| {
        shared::refund(tx, Scope::SignInAddress, &addr_key, now_ms)?;
        shared::reset(tx, Scope::SignInEmail, &email_key)
    };
    // an attempt the server could not check is given back (best effort: the database may be why)
    let refund = || {
        let _ =
            app.db.write(|tx| limits.iter().try_for_each(|&(scope, key, _)| shared::refund(tx, scope, key, now_ms)));
    };
    let found = app.db.read(|c| store::user_by_email(c, &email_key)).inspect_err(|_| refund())?;
    let ok = match &found {
        Some((_, hash)) => app.auth.hashing.verify(pw, hash),
        // the same time as a real check, so unknown emails are not revealed by timing
        None => app.auth.hashing.verify_nobody(pw).map(|()| false),
    }
    .inspect_err(|_| refund())?;
    let Some((user, _)) = found.filter(|_| ok) else {
        return Err(Error::unauthorized("the email or password is not right"));
    };
    // forgiven with the session's write; if anything fails before or in it, on its own
    start_signed_in(app, user, client, &forgive).inspect_err(|_| {
        let _ = app.db.write(forgive);
    })
}

/// The rest of a sign-in whose password was right: its organization and role, and the session,
/// written with `forgive`.
fn start_signed_in(
    app: &App,
    user: User,
    client: &ClientInfo,
    forgive: &dyn Fn(&Tx) -> Result<()>,
) -> Result<SignedIn> {
    let no_access = || Error::unauthorized("this account has no access");
    let (org, role) = app.db.read(|c| store::membership_of(c, &user.id))?.ok_or_else(no_access)?;
    let organization = app.db.read(|c| store::organization(c, &org))?.ok_or_else(no_access)?;
    let now = rfc3339(app.clock.now());
    let (session_token, expires_at) = app.db.write(|tx| {
        forgive(tx)?;
        let s = start_session(tx, app, &user.id, client)?;
        store::delete_expired_sessions(tx, &now)?;
        audit::record(
            tx,
            &now,
            &Actor::user(Some(user.id.clone()), None),
            Event::new("user.signed_in").org(&org).target("user", user.id.as_str()),
        )?;
        Ok(s)
    })?;
    Ok(SignedIn { user, organization, role, session_token, expires_at })
}

pub fn logout(app: &App, principal: &Principal) -> Result<()> {
    if let Some(hash) = &principal.session_hash {
        app.db.write(|tx| store::delete_session(tx, hash))?;
    }
    Ok(())
}

/// Who the caller is: `GET /auth/me`.
#[derive(Debug, Clone)]
pub struct Me {
    pub user: Option<User>,
    pub organization: Organization,
    pub role: Option<Role>,
    pub workspace: Workspace,
    pub workspaces: Vec<Workspace>,
    pub permissions: PermSet,
    pub via: Via,
}

pub fn me(app: &App, p: &Principal) -> Result<Me> {
    app.db.read(|c| {
        let organization = store::organization(c, &p.org_id)?.ok_or_else(|| Error::not_found("organization"))?;
        let user = match &p.user_id {
            Some(u) => store::user_by_id(c, u)?,
            None => None,
        };
        let workspace = store::workspace(c, p.workspace_id.as_str())?.ok_or_else(|| Error::not_found("workspace"))?;
        let workspaces = match p.via {
            Via::ServiceCredential => vec![workspace.clone()],
            _ => store::workspaces_of(c, &p.org_id)?,
        };
        Ok(Me { user, organization, role: p.role, workspace, workspaces, permissions: p.permissions, via: p.via })
    })
}

// -- invitations

/// An invitation as its issuers see it (never its token).
#[derive(Debug, Clone)]
pub struct InvitationView {
    pub id: String,
    pub email: Option<String>,
    pub role: Role,
    /// `pending`, `accepted`, `revoked` or `expired`.
    pub status: &'static str,
    pub created_at: String,
    pub expires_at: String,
    pub accepted_at: Option<String>,
}

fn view(inv: &Invitation, now: chrono::DateTime<chrono::Utc>) -> InvitationView {
    let status = if inv.revoked_at.is_some() {
        "revoked"
    } else if inv.accepted_at.is_some() {
        "accepted"
    } else if parse_rfc3339(&inv.expires_at).is_none_or(|e| e <= now) {
        "expired"
    } else {
        "pending"
    };
    InvitationView {
        id: inv.id.clone(),
        email: inv.email.clone(),
        role: inv.role,
        status,
        created_at: inv.created_at.clone(),
        expires_at: inv.expires_at.clone(),
        accepted_at: inv.accepted_at.clone(),
    }
}

pub struct NewInvitation {
    pub email: Option<String>,
    pub role: String,
    pub expires_in_days: Option<u32>,
}

/// Creates an invitation; the token is returned once and only its hash is kept.
pub fn create_invitation(
    app: &App,
    p: &Principal,
    actor: &Actor,
    input: NewInvitation,
) -> Result<(InvitationView, String)> {
    p.require(Perm::MembersManage)?;
    let role = match input.role.as_str() {
        "admin" => Role::Admin,
        "member" => Role::Member,
        "owner" => {
            return Err(Error::invalid_field(
                "role",
                "invitations can grant admin or member; there is one owner per organization",
            ));
        }
        other => {
            return Err(Error::invalid_field("role", format!("unknown role {other:?}; use admin or member")));
        }
    };
    let email = input.email.as_deref().filter(|e| !e.trim().is_empty()).map(normalize_email).transpose()?;
    let days = input.expires_in_days.unwrap_or(7);
    if !(1..=90).contains(&days) {
        return Err(Error::invalid_field("expiresInDays", "expiresInDays must be between 1 and 90"));
    }
    let now = app.clock.now();
    let now_s = rfc3339(now);
    let token = new_secret("stw_inv_");
    let inv = Invitation {
        id: new_id(),
        organization_id: p.org_id.clone(),
        email,
        role,
        created_at: now_s.clone(),
        expires_at: rfc3339(now + ChronoDuration::days(days as i64)),
        accepted_at: None,
        revoked_at: None,
        invited_by: p.user_id.clone(),
    };
    app.db.write(|tx| {
        if let Some(e) = &inv.email
            && store::user_by_email(tx, e)?.is_some()
        {
            return Err(Error::conflict("a person with this email already has an account"));
        }
        store::insert_invitation(tx, &inv, &sha256_hex(&token))?;
        audit::record(
            tx,
            &now_s,
            actor,
            Event::new("invitation.created")
                .org(&p.org_id)
                .target("invitation", &inv.id)
                .meta(serde_json::json!({"role": role.as_str()})),
        )?;
        Ok(())
    })?;
    Ok((view(&inv, now), token))
}

pub fn list_invitations(app: &App, p: &Principal) -> Result<Vec<InvitationView>> {
    p.require(Perm::MembersManage)?;
    let now = app.clock.now();
    Ok(app.db.read(|c| store::invitations(c, &p.org_id))?.iter().map(|i| view(i, now)).collect())
}

/// A member of the organization.
#[derive(Debug, Clone)]
pub struct Member {
    pub user: User,
    pub role: Role,
    pub joined_at: String,
}

/// `GET /account/members`: who belongs to the organization, with their roles.
pub fn list_members(app: &App, p: &Principal) -> Result<Vec<Member>> {
    p.require(Perm::MembersManage)?;
    let rows = app.db.read(|c| store::members_of(c, &p.org_id))?;
    Ok(rows.into_iter().map(|(user, role, joined_at)| Member { user, role, joined_at }).collect())
}

/// A member of the organization and their role (`None`: not a member).
pub fn member(c: &Conn, org: &OrgId, user_id: &str) -> Result<Option<(User, Role)>> {
    store::member_of(c, org, user_id)
}

/// How people see a user: their name, else their email, else "Operator".
pub fn display_name(u: &User) -> String {
    u.name
        .clone()
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| if u.email.is_empty() { "Operator".into() } else { u.email.clone() })
}

/// Whether registration without an invitation is open: only until the first person (the
/// owner) has registered.
pub fn registration_open(app: &App) -> Result<bool> {
    Ok(app.db.read(store::the_organization)?.is_none())
}

/// The server's organization: the first one created (by the first registration or bootstrap).
pub fn server_organization(app: &App) -> Result<Option<Organization>> {
    app.db.read(store::the_organization)
}

pub fn revoke_invitation(app: &App, p: &Principal, actor: &Actor, id: &str) -> Result<()> {
    p.require(Perm::MembersManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let inv = store::invitation(tx, &p.org_id, id)?.ok_or_else(|| Error::not_found("invitation"))?;
        if inv.accepted_at.is_some() {
            return Err(Error::conflict("the invitation was already accepted"));
        }
        store::revoke_invitation(tx, id, &now)?;
        audit::record(tx, &now, actor, Event::new("invitation.revoked").org(&p.org_id).target("invitation", id))
    })
}

// -- workspaces

pub fn list_workspaces(app: &App, p: &Principal) -> Result<Vec<Workspace>> {
    app.db.read(|c| {
        if p.via == Via::ServiceCredential {
            return Ok(store::workspace(c, p.workspace_id.as_str())?.into_iter().collect());
        }
        store::workspaces_of(c, &p.org_id)
    })
}

/// Creates an additional organization owned by the signed-in user, with its default workspace
/// (`POST /api/v1/account/accounts`). Counts against the user's organization creation cap for the
/// UTC month (429 `rate_limit_exceeded` over it), checked in the creating transaction.
pub fn create_organization(app: &App, p: &Principal, actor: &Actor, name: &str) -> Result<(Organization, Workspace)> {
    let user =
        p.user_id.clone().ok_or_else(|| Error::forbidden("only a signed-in person can create an organization"))?;
    let name = required_name("name", name)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let org = Organization { id: OrgId::new(), name: name.clone(), created_at: now.clone() };
        crate::usage::limits::profiles::take_org_creation(app, tx, &user.0, org.id.as_str())?;
        store::insert_org(tx, &org)?;
        store::insert_membership(tx, &org.id, &user, Role::Owner, &now)?;
        let ws = new_workspace(tx, &org.id, "Default workspace", true, &now)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("organization.created").org(&org.id).target("organization", org.id.as_str()),
        )?;
        Ok((org, ws))
    })
}

pub fn create_workspace(app: &App, p: &Principal, actor: &Actor, name: &str) -> Result<Workspace> {
    p.require(Perm::WorkspacesManage)?;
    if p.via == Via::ServiceCredential {
        return Err(Error::forbidden("service credentials are bound to one workspace and cannot create others"));
    }
    let name = required_name("name", name)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        if store::workspace_name_taken(tx, &p.org_id, &name, None)? {
            return Err(Error::conflict(format!("a workspace named {name:?} already exists")));
        }
        let ws = new_workspace(tx, &p.org_id, &name, false, &now)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("workspace.created").workspace(&ws.id).target("workspace", ws.id.as_str()),
        )?;
        Ok(ws)
    })
}

pub fn rename_workspace(app: &App, p: &Principal, actor: &Actor, id: &str, name: &str) -> Result<Workspace> {
    p.require(Perm::WorkspacesManage)?;
    let name = required_name("name", name)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let ws = store::workspace(tx, id)?
            .filter(|w| w.organization_id == p.org_id)
            .ok_or_else(|| Error::not_found("workspace"))?;
        if p.via == Via::ServiceCredential && ws.id != p.workspace_id {
            return Err(Error::not_found("workspace"));
        }
        if store::workspace_name_taken(tx, &p.org_id, &name, Some(&ws.id))? {
            return Err(Error::conflict(format!("a workspace named {name:?} already exists")));
        }
        store::rename_workspace(tx, &ws.id, &name, &now)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("workspace.renamed").workspace(&ws.id).target("workspace", ws.id.as_str()),
        )?;
        Ok(Workspace { name, updated_at: now.clone(), ..ws })
    })
}

pub fn workspace(app: &App, id: &WorkspaceId) -> Result<Option<Workspace>> {
    app.db.read(|c| store::workspace(c, id.as_str()))
}

/// The organization's owners (for notices that default to them).
pub fn owners(app: &App, org: &OrgId) -> Result<Vec<User>> {
    app.db.read(|c| store::owners_of(c, org))
}

// -- bootstrap

pub struct Bootstrapped {
    pub created_organization: bool,
    pub created_user: bool,
    pub organization: Organization,
    pub user: User,
    pub workspace: Workspace,
    pub token: Option<String>,
}

/// Creates the organization, its default workspace and the owner if they do not exist, and
/// optionally mints a personal token with every permission. Safe to run again.
pub fn bootstrap(app: &App, email: &str, pw: &str, name: Option<String>, mint_token: bool) -> Result<Bootstrapped> {
    let email = normalize_email(email)?;
    check_password_rules(pw)?;
    let existing_org = app.db.read(store::the_organization)?;
    let (created_org, created_user) = match existing_org {
        None => {
            register_unlimited(
                app,
                RegisterInput {
                    email: email.clone(),
                    password: pw.to_string(),
                    name,
                    invitation_token: None,
                    organization_name: None,
                },
                &ClientInfo { addr: Some("cli".into()), user_agent: Some("steward admin bootstrap".into()) },
            )?;
            (true, true)
        }
        Some(org) => {
            let found = app.db.read(|c| store::user_by_email(c, &email))?;
            match found {
                None => {
                    let owners = app.db.read(|c| store::owners_of(c, &org.id))?;
                    let owner = owners.first().map(|u| u.email.clone()).unwrap_or_default();
                    return Err(Error::conflict(format!(
                        "this server was already set up (owner {owner}); add people with an invitation instead"
                    )));
                }
                Some((_, hash)) => {
                    if !app.auth.hashing.verify(pw, &hash)? {
                        return Err(Error::unauthorized(format!(
                            "{email} already exists and the password does not match"
                        )));
                    }
                    (false, false)
                }
            }
        }
    };
    let (user, _) = app
        .db
        .read(|c| store::user_by_email(c, &email))?
        .ok_or_else(|| Error::internal_msg("owner missing after bootstrap"))?;
    let (org_id, role) =
        app.db.read(|c| store::membership_of(c, &user.id))?.ok_or_else(|| Error::internal_msg("membership missing"))?;
    let organization =
        app.db.read(|c| store::organization(c, &org_id))?.ok_or_else(|| Error::internal_msg("organization missing"))?;
    let workspace = app
        .db
        .read(|c| store::default_workspace(c, &org_id))?
        .ok_or_else(|| Error::internal_msg("workspace missing"))?;
    let token = if mint_token {
        let now = rfc3339(app.clock.now());
        let (_, secret) = super::tokens::mint_personal(
            app,
            &user.id,
            &org_id,
            "bootstrap",
            role.permissions(),
            None,
            &Actor::cli(),
            &now,
        )?;
        Some(secret)
    } else {
        None
    };
    Ok(Bootstrapped { created_organization: created_org, created_user, organization, user, workspace, token })
}
