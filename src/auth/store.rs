//! SQL for organizations, users, workspaces, sessions, invitations and API tokens.

use rusqlite::{OptionalExtension, params};

use super::permissions::{PermSet, Role};
use super::{ApiToken, Invitation, Organization, TokenKind, User, Workspace};
use crate::error::Result;
use crate::ids::{OrgId, UserId, WorkspaceId};
use crate::storage::{Conn, Row, Tx};

pub fn the_organization(c: &Conn) -> Result<Option<Organization>> {
    Ok(c.query_row("SELECT id, name, created_at FROM organizations ORDER BY created_at LIMIT 1", [], |r| {
        Ok(Organization { id: r.get(0)?, name: r.get(1)?, created_at: r.get(2)? })
    })
    .optional()?)
}

pub fn organization(c: &Conn, id: &OrgId) -> Result<Option<Organization>> {
    Ok(c.query_row("SELECT id, name, created_at FROM organizations WHERE id = ?1", [id], |r| {
        Ok(Organization { id: r.get(0)?, name: r.get(1)?, created_at: r.get(2)? })
    })
    .optional()?)
}

pub fn insert_org(tx: &Tx, org: &Organization) -> Result<()> {
    tx.execute(
        "INSERT INTO organizations (id, name, created_at) VALUES (?1, ?2, ?3)",
        params![org.id, org.name, org.created_at],
    )?;
    Ok(())
}

fn user_row(r: &Row) -> rusqlite::Result<(User, String)> {
    Ok((User { id: r.get(0)?, email: r.get(1)?, name: r.get(2)?, created_at: r.get(3)? }, r.get(4)?))
}

pub fn user_by_email(c: &Conn, email: &str) -> Result<Option<(User, String)>> {
    Ok(c.query_row("SELECT id, email, name, created_at, password_hash FROM users WHERE email = ?1", [email], user_row)
        .optional()?)
}

pub fn user_by_id(c: &Conn, id: &UserId) -> Result<Option<User>> {
    Ok(c.query_row("SELECT id, email, name, created_at, password_hash FROM users WHERE id = ?1", [id], user_row)
        .optional()?
        .map(|(u, _)| u))
}

pub fn insert_user(tx: &Tx, user: &User, password_hash: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO users (id, email, name, password_hash, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
        params![user.id, user.email, user.name, password_hash, user.created_at],
    )?;
    Ok(())
}

pub fn insert_membership(tx: &Tx, org: &OrgId, user: &UserId, role: Role, now: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO memberships (organization_id, user_id, role, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![org, user, role.as_str(), now],
    )?;
    Ok(())
}

/// The user's organization and role (one organization per server in this edition).
pub fn membership_of(c: &Conn, user: &UserId) -> Result<Option<(OrgId, Role)>> {
    // on every request: cached statements
    let row: Option<(OrgId, String)> = c
        .prepare_cached("SELECT organization_id, role FROM memberships WHERE user_id = ?1 ORDER BY created_at LIMIT 1")?
        .query_row([user], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok(row.and_then(|(o, r)| Role::parse(&r).map(|role| (o, role))))
}

pub fn owners_of(c: &Conn, org: &OrgId) -> Result<Vec<User>> {
    let mut stmt = c.prepare(
        "SELECT u.id, u.email, u.name, u.created_at, u.password_hash FROM users u
         JOIN memberships m ON m.user_id = u.id WHERE m.organization_id = ?1 AND m.role = 'owner' ORDER BY m.created_at",
    )?;
    let rows = stmt.query_map([org], user_row)?;
    Ok(rows.map(|r| r.map(|(u, _)| u)).collect::<rusqlite::Result<_>>()?)
}

/// The organization's members with their roles, oldest first.
pub fn members_of(c: &Conn, org: &OrgId) -> Result<Vec<(User, Role, String)>> {
    let mut stmt = c.prepare(
        "SELECT u.id, u.email, u.name, u.created_at, u.password_hash, m.role, m.created_at FROM users u
         JOIN memberships m ON m.user_id = u.id WHERE m.organization_id = ?1 ORDER BY m.created_at, u.id",
    )?;
    let rows = stmt.query_map([org], |r| Ok((user_row(r)?.0, r.get::<_, String>(5)?, r.get::<_, String>(6)?)))?;
    let rows: Vec<(User, String, String)> = rows.collect::<rusqlite::Result<_>>()?;
    Ok(rows.into_iter().filter_map(|(u, role, at)| Role::parse(&role).map(|role| (u, role, at))).collect())
}

/// One member of the organization, with their role.
pub fn member_of(c: &Conn, org: &OrgId, user: &str) -> Result<Option<(User, Role)>> {
    let row = c
        .query_row(
            "SELECT u.id, u.email, u.name, u.created_at, u.password_hash, m.role FROM users u
             JOIN memberships m ON m.user_id = u.id WHERE m.organization_id = ?1 AND u.id = ?2",
            params![org, user],
            |r| Ok((user_row(r)?.0, r.get::<_, String>(5)?)),
        )
        .optional()?;
    Ok(row.and_then(|(u, role)| Role::parse(&role).map(|role| (u, role))))
}

fn ws_row(r: &Row) -> rusqlite::Result<Workspace> {
    Ok(Workspace {
        id: r.get(0)?,
        organization_id: r.get(1)?,
        name: r.get(2)?,
        is_default: r.get(3)?,
        created_at: r.get(4)?,
        updated_at: r.get(5)?,
    })
}

const WS_COLS: &str = "id, organization_id, name, is_default, created_at, updated_at";

pub fn insert_workspace(tx: &Tx, ws: &Workspace) -> Result<()> {
    tx.execute(
        "INSERT INTO workspaces (id, organization_id, name, is_default, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![ws.id, ws.organization_id, ws.name, ws.is_default, ws.created_at, ws.updated_at],
    )?;
    Ok(())
}

pub fn workspaces_of(c: &Conn, org: &OrgId) -> Result<Vec<Workspace>> {
    let mut stmt = c.prepare(&format!(
        "SELECT {WS_COLS} FROM workspaces WHERE organization_id = ?1 ORDER BY is_default DESC, created_at"
    ))?;
    let rows = stmt.query_map([org], ws_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn workspace(c: &Conn, id: &str) -> Result<Option<Workspace>> {
    Ok(c.query_row(&format!("SELECT {WS_COLS} FROM workspaces WHERE id = ?1"), [id], ws_row).optional()?)
}

pub fn default_workspace(c: &Conn, org: &OrgId) -> Result<Option<Workspace>> {
    Ok(c.prepare_cached(&format!(
        "SELECT {WS_COLS} FROM workspaces WHERE organization_id = ?1 ORDER BY is_default DESC, created_at LIMIT 1"
    ))?
    .query_row([org], ws_row)
    .optional()?)
}

pub fn rename_workspace(tx: &Tx, id: &WorkspaceId, name: &str, now: &str) -> Result<()> {
    tx.execute("UPDATE workspaces SET name = ?2, updated_at = ?3 WHERE id = ?1", params![id, name, now])?;
    Ok(())
}

pub fn workspace_name_taken(c: &Conn, org: &OrgId, name: &str, except: Option<&WorkspaceId>) -> Result<bool> {
    let n: i64 = c.query_row(
        "SELECT count(*) FROM workspaces WHERE organization_id = ?1 AND lower(name) = lower(?2) AND id IS NOT ?3",
        params![org, name, except],
        |r| r.get(0),
    )?;
    Ok(n > 0)
}

// -- sessions

pub fn insert_session(
    tx: &Tx,
    hash: &str,
    user: &UserId,
    now: &str,
    expires: &str,
    ua: Option<&str>,
    addr: Option<&str>,
) -> Result<()> {
    tx.execute(
        "INSERT INTO sessions (token_hash, user_id, created_at, expires_at, user_agent, client_addr) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![hash, user, now, expires, ua, addr],
    )?;
    Ok(())
}

/// (user id, expires_at)
pub fn session(c: &Conn, hash: &str) -> Result<Option<(UserId, String)>> {
    Ok(c.prepare_cached("SELECT user_id, expires_at FROM sessions WHERE token_hash = ?1")?
        .query_row([hash], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?)
}

pub fn delete_session(tx: &Tx, hash: &str) -> Result<()> {
    tx.execute("DELETE FROM sessions WHERE token_hash = ?1", [hash])?;
    Ok(())
}

pub fn delete_expired_sessions(tx: &Tx, now: &str) -> Result<usize> {
    Ok(tx.execute("DELETE FROM sessions WHERE expires_at < ?1", [now])?)
}

// -- invitations

fn inv_row(r: &Row) -> rusqlite::Result<Invitation> {
    Ok(Invitation {
        id: r.get(0)?,
        email: r.get(1)?,
        role: Role::parse(&r.get::<_, String>(2)?).unwrap_or(Role::Member),
        created_at: r.get(3)?,
        expires_at: r.get(4)?,
        accepted_at: r.get(5)?,
        revoked_at: r.get(6)?,
        invited_by: r.get(7)?,
        organization_id: r.get(8)?,
    })
}

const INV_COLS: &str = "id, email, role, created_at, expires_at, accepted_at, revoked_at, invited_by, organization_id";

pub fn insert_invitation(tx: &Tx, inv: &Invitation, token_hash: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO invitations (id, organization_id, email, role, token_hash, invited_by, created_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            inv.id,
            inv.organization_id,
            inv.email,
            inv.role.as_str(),
            token_hash,
            inv.invited_by,
            inv.created_at,
            inv.expires_at
        ],
    )?;
    Ok(())
}

pub fn invitations(c: &Conn, org: &OrgId) -> Result<Vec<Invitation>> {
    let mut stmt =
        c.prepare(&format!("SELECT {INV_COLS} FROM invitations WHERE organization_id = ?1 ORDER BY created_at DESC"))?;
    let rows = stmt.query_map([org], inv_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn invitation(c: &Conn, org: &OrgId, id: &str) -> Result<Option<Invitation>> {
    Ok(c.query_row(
        &format!("SELECT {INV_COLS} FROM invitations WHERE organization_id = ?1 AND id = ?2"),
        params![org, id],
        inv_row,
    )
    .optional()?)
}

pub fn invitation_by_hash(c: &Conn, hash: &str) -> Result<Option<Invitation>> {
    Ok(c.query_row(&format!("SELECT {INV_COLS} FROM invitations WHERE token_hash = ?1"), [hash], inv_row).optional()?)
}

pub fn revoke_invitation(tx: &Tx, id: &str, now: &str) -> Result<()> {
    tx.execute("UPDATE invitations SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL", params![id, now])?;
    Ok(())
}

/// Marks the invitation used; false when someone else used it first.
pub fn accept_invitation(tx: &Tx, id: &str, user: &UserId, now: &str) -> Result<bool> {
    Ok(tx.execute(
        "UPDATE invitations SET accepted_at = ?3, accepted_by = ?2 WHERE id = ?1 AND accepted_at IS NULL AND revoked_at IS NULL",
        params![id, user, now],
    )? == 1)
}

// -- API tokens

fn token_row(r: &Row) -> rusqlite::Result<ApiToken> {
    let kind: String = r.get(1)?;
    Ok(ApiToken {
        id: r.get(0)?,
        kind: if kind == "service" { TokenKind::Service } else { TokenKind::Personal },
        name: r.get(2)?,
        prefix: r.get(3)?,
        organization_id: r.get(4)?,
        user_id: r.get(5)?,
        workspace_id: r.get(6)?,
        permissions: PermSet::from_json(&r.get::<_, String>(7)?),
        created_at: r.get(8)?,
        expires_at: r.get(9)?,
        last_used_at: r.get(10)?,
        revoked_at: r.get(11)?,
        created_by: r.get(12)?,
    })
}

const TOKEN_COLS: &str = "id, kind, name, token_prefix, organization_id, user_id, workspace_id, permissions, created_at, expires_at, last_used_at, revoked_at, created_by";

pub fn insert_token(tx: &Tx, t: &ApiToken, hash: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO api_tokens (id, kind, name, token_hash, token_prefix, organization_id, user_id, workspace_id, permissions, created_by, created_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        params![
            t.id,
            t.kind.as_str(),
            t.name,
            hash,
            t.prefix,
            t.organization_id,
            t.user_id,
            t.workspace_id,
            t.permissions.to_json(),
            t.created_by,
            t.created_at,
            t.expires_at
        ],
    )?;
    Ok(())
}

pub fn token_by_hash(c: &Conn, hash: &str) -> Result<Option<ApiToken>> {
    Ok(c.prepare_cached(&format!("SELECT {TOKEN_COLS} FROM api_tokens WHERE token_hash = ?1"))?
        .query_row([hash], token_row)
        .optional()?)
}

pub fn personal_tokens(c: &Conn, user: &UserId) -> Result<Vec<ApiToken>> {
    let mut stmt = c.prepare(&format!(
        "SELECT {TOKEN_COLS} FROM api_tokens WHERE kind = 'personal' AND user_id = ?1 AND revoked_at IS NULL ORDER BY created_at DESC"
    ))?;
    let rows = stmt.query_map([user], token_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn service_credentials(c: &Conn, ws: &WorkspaceId) -> Result<Vec<ApiToken>> {
    let mut stmt = c.prepare(&format!(
        "SELECT {TOKEN_COLS} FROM api_tokens WHERE kind = 'service' AND workspace_id = ?1 AND revoked_at IS NULL ORDER BY created_at DESC"
    ))?;
    let rows = stmt.query_map([ws], token_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn token(c: &Conn, id: &str) -> Result<Option<ApiToken>> {
    Ok(c.query_row(&format!("SELECT {TOKEN_COLS} FROM api_tokens WHERE id = ?1"), [id], token_row).optional()?)
}

pub fn revoke_token(tx: &Tx, id: &str, now: &str) -> Result<bool> {
    Ok(tx.execute("UPDATE api_tokens SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL", params![id, now])? == 1)
}

pub fn touch_token(tx: &Tx, id: &str, now: &str) -> Result<()> {
    tx.execute("UPDATE api_tokens SET last_used_at = ?2 WHERE id = ?1", params![id, now])?;
    Ok(())
}
