//! SQL of the originals kept in PostgreSQL's `blobs` table (private to `documents::blobs`).

use rusqlite::{OptionalExtension, params};

use crate::error::Result;
use crate::storage::{Conn, Tx};

/// Stores an original in PostgreSQL's `blobs` table (docs/scale-out.md, section 7); a no-op when
/// it is there already.
pub fn put_blob(tx: &Tx, sha: &str, bytes: &[u8], now: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO blobs (sha256, bytes, size_bytes, created_at) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (sha256) DO NOTHING",
        params![sha, bytes, bytes.len() as i64, now],
    )?;
    Ok(())
}

/// An original's bytes from PostgreSQL's `blobs` table.
pub fn blob_bytes(c: &Conn, sha: &str) -> Result<Option<Vec<u8>>> {
    Ok(c.query_row("SELECT bytes FROM blobs WHERE sha256 = ?1", [sha], |r| r.get(0)).optional()?)
}

/// Deletes an original from `blobs` unless a document names it again.
pub fn delete_blob_if_unused(tx: &Tx, sha: &str) -> Result<bool> {
    Ok(tx.execute(
        "DELETE FROM blobs WHERE sha256 = ?1 AND NOT EXISTS (SELECT 1 FROM documents WHERE blob_sha256 = ?1)",
        [sha],
    )? > 0)
}
