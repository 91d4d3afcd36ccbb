//! Personal access tokens and workspace service credentials: created with the dashboard session,
//! shown once, stored as SHA-256, optionally expiring, revocable (effective on the next request).

use chrono::{DateTime, Duration as ChronoDuration, Utc};
use serde::Serialize;

use super::password::{new_secret, sha256_hex};
use super::permissions::{Perm, PermSet};
use super::{ApiToken, Principal, TokenKind, store};
use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::clock::{parse_rfc3339, rfc3339};
use crate::error::{Error, Result};
use crate::ids::{OrgId, UserId, new_id};

#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenView {
    pub id: String,
    pub kind: &'static str,
    pub name: String,
    /// The first characters of the secret, to recognise it.
    pub prefix: String,
    pub permissions: PermSet,
    pub workspace_id: Option<String>,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub last_used_at: Option<String>,
}

impl From<&ApiToken> for TokenView {
    fn from(t: &ApiToken) -> Self {
        TokenView {
            id: t.id.clone(),
            kind: t.kind.as_str(),
            name: t.name.clone(),
            prefix: t.prefix.clone(),
            permissions: t.permissions,
            workspace_id: t.workspace_id.as_ref().map(|w| w.0.clone()),
            created_at: t.created_at.clone(),
            expires_at: t.expires_at.clone(),
            last_used_at: t.last_used_at.clone(),
        }
    }
}

pub struct NewToken {
    pub name: String,
    pub permissions: Option<Vec<String>>,
    pub expires_at: Option<String>,
    pub expires_in_days: Option<u32>,
}

fn expiry(now: DateTime<Utc>, at: Option<&str>, days: Option<u32>) -> Result<Option<String>> {
    match (at, days) {
        (Some(_), Some(_)) => Err(Error::invalid("send expiresAt or expiresInDays, not both")),
        (Some(at), None) => {
            let t = parse_rfc3339(at)
                .ok_or_else(|| Error::invalid_field("expiresAt", "expiresAt must be an RFC 3339 timestamp"))?;
            if t <= now {
                return Err(Error::invalid_field("expiresAt", "expiresAt must be in the future"));
            }
            Ok(Some(rfc3339(t)))
        }
        (None, Some(d)) if (1..=3650).contains(&d) => Ok(Some(rfc3339(now + ChronoDuration::days(d as i64)))),
        (None, Some(_)) => Err(Error::invalid_field("expiresInDays", "expiresInDays must be between 1 and 3650")),
        (None, None) => Ok(None),
    }
}

fn clean_token_name(name: &str) -> Result<String> {
    let n = name.trim();
    if n.is_empty() || n.chars().count() > 100 {
        return Err(Error::invalid_field("name", "name must be 1 to 100 characters"));
    }
    Ok(n.to_string())
}

/// Mints a personal token (also used by `steward admin bootstrap`). Returns the record and the
/// secret.
#[allow(clippy::too_many_arguments)]
pub fn mint_personal(
    app: &App,
    user: &UserId,
    org: &OrgId,
    name: &str,
    permissions: PermSet,
    expires_at: Option<String>,
    actor: &Actor,
    now: &str,
) -> Result<(ApiToken, String)> {
    let secret = new_secret("stw_pat_");
    let token = ApiToken {
        id: new_id(),
        kind: TokenKind::Personal,
        name: name.to_string(),
        prefix: secret[..12].to_string(),
        organization_id: org.clone(),
        user_id: Some(user.clone()),
        workspace_id: None,
        permissions,
        created_at: now.to_string(),
        expires_at,
        last_used_at: None,
        revoked_at: None,
        created_by: Some(user.clone()),
    };
    app.db.write(|tx| {
        store::insert_token(tx, &token, &sha256_hex(&secret))?;
        audit::record(
            tx,
            now,
            actor,
            Event::new("personal_token.created")
                .org(org)
                .target("api_token", &token.id)
                .meta(serde_json::json!({"permissions": permissions.names()})),
        )
    })?;
    Ok((token, secret))
}

/// Creates a personal token for the signed-in user (dashboard session only). Without
/// `permissions` it carries every permission of the user's role; it never carries more.
pub fn create_personal(app: &App, p: &Principal, actor: &Actor, input: NewToken) -> Result<(TokenView, String)> {
    p.require_session()?;
    let user = p.user_id.clone().ok_or_else(|| Error::forbidden("only people have personal tokens"))?;
    let role_perms = p.role.map(|r| r.permissions()).unwrap_or_default();
    let perms = match &input.permissions {
        None => role_perms,
        Some(list) => {
            let set = PermSet::parse_list(list)?;
            if !set.is_subset_of(role_perms) {
                return Err(Error::forbidden("a token cannot carry permissions your role does not have"));
            }
            set
        }
    };
    let name = clean_token_name(&input.name)?;
    let now = app.clock.now();
    let expires_at = expiry(now, input.expires_at.as_deref(), input.expires_in_days)?;
    let (t, secret) = mint_personal(app, &user, &p.org_id, &name, perms, expires_at, actor, &rfc3339(now))?;
    Ok((TokenView::from(&t), secret))
}

pub fn list_personal(app: &App, p: &Principal) -> Result<Vec<TokenView>> {
    p.require_session()?;
    let user = p.user_id.clone().ok_or_else(|| Error::forbidden("only people have personal tokens"))?;
    Ok(app.db.read(|c| store::personal_tokens(c, &user))?.iter().map(TokenView::from).collect())
}

pub fn revoke_personal(app: &App, p: &Principal, actor: &Actor, id: &str) -> Result<()> {
    p.require_session()?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let t = store::token(tx, id)?
            .filter(|t| t.kind == TokenKind::Personal && t.user_id == p.user_id && t.revoked_at.is_none())
            .ok_or_else(|| Error::not_found("token"))?;
        store::revoke_token(tx, &t.id, &now)?;
        audit::record(tx, &now, actor, Event::new("personal_token.revoked").org(&p.org_id).target("api_token", &t.id))
    })
}

/// Creates a service credential for the current workspace with an explicit permission list
/// (dashboard session, `organization.api_access.manage`).
pub fn create_service(app: &App, p: &Principal, actor: &Actor, input: NewToken) -> Result<(TokenView, String)> {
    p.require_session()?;
    p.require(Perm::ApiAccessManage)?;
    let list = input
        .permissions
        .as_ref()
        .filter(|l| !l.is_empty())
        .ok_or_else(|| Error::invalid_field("permissions", "list the permissions this credential needs"))?;
    let perms = PermSet::parse_list(list)?;
    for admin_only in [Perm::MembersManage, Perm::WorkspacesManage, Perm::ApiAccessManage, Perm::AuditRead] {
        if perms.contains(admin_only) {
            return Err(Error::invalid_field(
                "permissions",
                format!(
                    "{} is an organization permission; service credentials act in one workspace",
                    admin_only.name()
                ),
            ));
        }
    }
    if !perms.is_subset_of(p.permissions) {
        return Err(Error::forbidden("a credential cannot carry permissions you do not have"));
    }
    let name = clean_token_name(&input.name)?;
    let now = app.clock.now();
    let now_s = rfc3339(now);
    let expires_at = expiry(now, input.expires_at.as_deref(), input.expires_in_days)?;
    let secret = new_secret("stw_svc_");
    let token = ApiToken {
        id: new_id(),
        kind: TokenKind::Service,
        name,
        prefix: secret[..12].to_string(),
        organization_id: p.org_id.clone(),
        user_id: None,
        workspace_id: Some(p.workspace_id.clone()),
        permissions: perms,
        created_at: now_s.clone(),
        expires_at,
        last_used_at: None,
        revoked_at: None,
        created_by: p.user_id.clone(),
    };
    app.db.write(|tx| {
        store::insert_token(tx, &token, &sha256_hex(&secret))?;
        audit::record(
            tx,
            &now_s,
            actor,
            Event::new("service_credential.created")
                .workspace(&p.workspace_id)
                .target("api_token", &token.id)
                .meta(serde_json::json!({"permissions": perms.names()})),
        )
    })?;
    Ok((TokenView::from(&token), secret))
}

pub fn list_service(app: &App, p: &Principal) -> Result<Vec<TokenView>> {
    p.require_session()?;
    p.require(Perm::ApiAccessManage)?;
    Ok(app.db.read(|c| store::service_credentials(c, &p.workspace_id))?.iter().map(TokenView::from).collect())
}

pub fn revoke_service(app: &App, p: &Principal, actor: &Actor, id: &str) -> Result<()> {
    p.require_session()?;
    p.require(Perm::ApiAccessManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let t = store::token(tx, id)?
            .filter(|t| {
                t.kind == TokenKind::Service
                    && t.workspace_id.as_ref() == Some(&p.workspace_id)
                    && t.revoked_at.is_none()
            })
            .ok_or_else(|| Error::not_found("service credential"))?;
        store::revoke_token(tx, &t.id, &now)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("service_credential.revoked").workspace(&p.workspace_id).target("api_token", &t.id),
        )
    })
}
