//! The SQL of the converse surface: agent channel credentials and converse sessions.

use rusqlite::{OptionalExtension, params};

use super::Credential;
use super::session::{ConverseSession, Transport};
use crate::error::Result;
use crate::storage::{Conn as Connection, Row, Tx};

const COLS: &str = "id, workspace_id, agent_id, audience, label, prefix, version, revoked_at, expires_at, last_used_at, created_at, updated_at";

fn row(r: &Row) -> rusqlite::Result<Credential> {
    Ok(Credential {
        id: r.get(0)?,
        workspace_id: r.get(1)?,
        agent_id: r.get(2)?,
        audience: r.get(3)?,
        label: r.get(4)?,
        prefix: r.get(5)?,
        version: r.get(6)?,
        revoked_at: r.get(7)?,
        expires_at: r.get(8)?,
        last_used_at: r.get(9)?,
        created_at: r.get(10)?,
        updated_at: r.get(11)?,
    })
}

pub fn insert(tx: &Tx, c: &Credential, hash: &str) -> Result<()> {
    tx.execute(
        &format!("INSERT INTO channel_credentials ({COLS}, secret_hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"),
        params![
            c.id, c.workspace_id, c.agent_id, c.audience, c.label, c.prefix, c.version, c.revoked_at, c.expires_at,
            c.last_used_at, c.created_at, c.updated_at, hash
        ],
    )?;
    Ok(())
}

pub fn of_agent(c: &Connection, agent_id: &str, audience: Option<&str>) -> Result<Vec<Credential>> {
    let mut st = c.prepare(&format!(
        "SELECT {COLS} FROM channel_credentials WHERE agent_id = ?1 AND (?2 IS NULL OR audience = ?2) ORDER BY created_at DESC, id DESC"
    ))?;
    Ok(st.query_map(params![agent_id, audience], row)?.collect::<rusqlite::Result<Vec<_>>>()?)
}

pub fn find(c: &Connection, agent_id: &str, id: &str) -> Result<Option<Credential>> {
    Ok(c.query_row(
        &format!("SELECT {COLS} FROM channel_credentials WHERE id = ?1 AND agent_id = ?2"),
        params![id, agent_id],
        row,
    )
    .optional()?)
}

pub fn by_hash(c: &Connection, hash: &str) -> Result<Option<Credential>> {
    Ok(c.query_row(&format!("SELECT {COLS} FROM channel_credentials WHERE secret_hash = ?1"), params![hash], row)
        .optional()?)
}

/// A new secret and version (the old secret stops working at once).
pub fn rotate(tx: &Tx, id: &str, hash: &str, prefix: &str, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE channel_credentials SET secret_hash = ?2, prefix = ?3, version = version + 1, updated_at = ?4 WHERE id = ?1",
        params![id, hash, prefix, now],
    )?;
    Ok(())
}

pub fn revoke(tx: &Tx, id: &str, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE channel_credentials SET revoked_at = coalesce(revoked_at, ?2), updated_at = ?2 WHERE id = ?1",
        params![id, now],
    )?;
    Ok(())
}

pub fn by_id(c: &Connection, id: &str) -> Result<Option<Credential>> {
    Ok(c.query_row(&format!("SELECT {COLS} FROM channel_credentials WHERE id = ?1"), params![id], row).optional()?)
}

/// Records a credential's use (at each session it opens).
pub fn touch_credential(tx: &Tx, id: &str, now: &str) -> Result<()> {
    tx.execute("UPDATE channel_credentials SET last_used_at = ?2 WHERE id = ?1", params![id, now])?;
    Ok(())
}

const SESSION_COLS: &str = "id, workspace_id, agent_id, credential_id, credential_version, transport, revision_id, conversation_id, client_name, client_version, created_at, expires_at";

fn session_row(r: &Row) -> rusqlite::Result<ConverseSession> {
    let transport: String = r.get(5)?;
    Ok(ConverseSession {
        id: r.get(0)?,
        workspace_id: r.get(1)?,
        agent_id: r.get(2)?,
        credential_id: r.get(3)?,
        credential_version: r.get(4)?,
        transport: Transport::parse(&transport).unwrap_or(Transport::Rest),
        revision_id: r.get(6)?,
        conversation_id: r.get(7)?,
        client_name: r.get(8)?,
        client_version: r.get(9)?,
        created_at: r.get(10)?,
        expires_at: r.get(11)?,
    })
}

pub fn insert_session(tx: &Tx, s: &ConverseSession, now: &str) -> Result<()> {
    tx.execute(
        &format!("INSERT OR IGNORE INTO converse_sessions ({SESSION_COLS}, last_used_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"),
        params![
            s.id, s.workspace_id, s.agent_id, s.credential_id, s.credential_version, s.transport.as_str(),
            s.revision_id, s.conversation_id, s.client_name, s.client_version, s.created_at, s.expires_at, now
        ],
    )?;
    Ok(())
}

pub fn session(c: &Connection, id: &str) -> Result<Option<ConverseSession>> {
    Ok(c.query_row(&format!("SELECT {SESSION_COLS} FROM converse_sessions WHERE id = ?1"), params![id], session_row)
        .optional()?)
}

/// Binds a session's conversation when it has none yet.
pub fn bind_conversation(tx: &Tx, id: &str, conversation_id: &str) -> Result<()> {
    tx.execute(
        "UPDATE converse_sessions SET conversation_id = ?2 WHERE id = ?1 AND conversation_id IS NULL",
        params![id, conversation_id],
    )?;
    Ok(())
}

pub fn extend_session(tx: &Tx, id: &str, expires_at: &str, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE converse_sessions SET expires_at = ?2, last_used_at = ?3 WHERE id = ?1",
        params![id, expires_at, now],
    )?;
    Ok(())
}

pub fn delete_session(tx: &Tx, id: &str) -> Result<()> {
    tx.execute("DELETE FROM converse_sessions WHERE id = ?1", params![id])?;
    Ok(())
}

/// The MCP transport's state of a live session.
pub fn mcp_state(c: &Connection, id: &str, now: &str) -> Result<Option<String>> {
    Ok(c.query_row(
        "SELECT mcp_state FROM converse_sessions WHERE id = ?1 AND transport = 'mcp' AND expires_at > ?2",
        params![id, now],
        |r| r.get::<_, Option<String>>(0),
    )
    .optional()?
    .flatten())
}

pub fn set_mcp_state(tx: &Tx, id: &str, state: &str) -> Result<()> {
    tx.execute("UPDATE converse_sessions SET mcp_state = ?2 WHERE id = ?1", params![id, state])?;
    Ok(())
}

/// Deletes the sessions expired before `now`.
pub fn prune_sessions(tx: &Tx, now: &str) -> Result<usize> {
    Ok(tx.execute("DELETE FROM converse_sessions WHERE expires_at <= ?1", params![now])?)
}

/// The organization of a credential's workspace.
pub fn organization_of(c: &Connection, workspace_id: &str) -> Result<String> {
    Ok(c.query_row("SELECT organization_id FROM workspaces WHERE id = ?1", [workspace_id], |r| r.get(0))?)
}
