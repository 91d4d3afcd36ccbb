//! The SQL of the converse surface: agent channel credentials.

use rusqlite::{OptionalExtension, params};

use super::Credential;
use crate::error::Result;
use crate::storage::{Conn as Connection, Tx};

const COLS: &str = "id, workspace_id, agent_id, audience, label, prefix, version, revoked_at, expires_at, last_used_at, created_at, updated_at";

fn row(r: &rusqlite::Row) -> rusqlite::Result<Credential> {
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
