//! The WordPress connector's SQL: what is known of each post it indexed.

use rusqlite::params;

use crate::error::Result;
use crate::ids::WorkspaceId;
use crate::storage::{Conn, Tx};

pub fn put_post(
    tx: &Tx,
    ws: &WorkspaceId,
    key: &str,
    document_id: &str,
    modified: Option<&str>,
    now: &str,
) -> Result<()> {
    tx.execute(
        "INSERT INTO wordpress_posts (workspace_id, post_key, document_id, modified, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (workspace_id, post_key) DO UPDATE SET
            document_id = excluded.document_id, modified = excluded.modified, updated_at = excluded.updated_at",
        params![ws, key, document_id, modified, now],
    )?;
    Ok(())
}

/// Every known post: `(key, document id)`.
pub fn posts(c: &Conn, ws: &WorkspaceId) -> Result<Vec<(String, String)>> {
    let mut st = c.prepare("SELECT post_key, document_id FROM wordpress_posts WHERE workspace_id = ?1")?;
    let rows = st.query_map(params![ws], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

pub fn delete_post(tx: &Tx, ws: &WorkspaceId, key: &str) -> Result<()> {
    tx.execute("DELETE FROM wordpress_posts WHERE workspace_id = ?1 AND post_key = ?2", params![ws, key])?;
    Ok(())
}
