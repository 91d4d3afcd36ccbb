//! SQL for the shared limits' counted events (`limit_hits`).

use crate::error::Result;
use crate::storage::{Conn, Tx};

/// Most events one count forgets.
pub const FORGET_AT_ONCE: i64 = 64;

/// Events of `key` in `scope` after `after_ms`, and the oldest of them.
pub fn window(c: &Conn, scope: &str, key: &str, after_ms: i64) -> Result<(i64, Option<i64>)> {
    Ok(c.query_row(
        "SELECT count(*), min(at_ms) FROM limit_hits WHERE scope = ?1 AND key = ?2 AND at_ms > ?3",
        rusqlite::params![scope, key, after_ms],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?)
}

/// Counts one event, and forgets up to [`FORGET_AT_ONCE`] events of the scope at or before
/// `forget_up_to_ms` (each count forgets more than it adds, so the table keeps up, and no request
/// deletes a whole day's rows at once).
pub fn insert(tx: &Tx, scope: &str, key: &str, at_ms: i64, forget_up_to_ms: i64) -> Result<()> {
    tx.execute_deferred(
        "DELETE FROM limit_hits WHERE id IN (SELECT id FROM limit_hits WHERE scope = ?1 AND at_ms <= ?2 LIMIT ?3)",
        rusqlite::params![scope, forget_up_to_ms, FORGET_AT_ONCE],
    )?;
    tx.execute_deferred(
        "INSERT INTO limit_hits (scope, key, at_ms) VALUES (?1, ?2, ?3)",
        rusqlite::params![scope, key, at_ms],
    )?;
    Ok(())
}

/// Takes back one event of `key` counted at `at_ms`.
pub fn remove_one(tx: &Tx, scope: &str, key: &str, at_ms: i64) -> Result<()> {
    tx.execute_deferred(
        "DELETE FROM limit_hits WHERE id = (SELECT max(id) FROM limit_hits WHERE scope = ?1 AND key = ?2 AND at_ms = ?3)",
        rusqlite::params![scope, key, at_ms],
    )?;
    Ok(())
}

/// Forgets every event of `key`.
pub fn remove_all(tx: &Tx, scope: &str, key: &str) -> Result<()> {
    tx.execute_deferred("DELETE FROM limit_hits WHERE scope = ?1 AND key = ?2", rusqlite::params![scope, key])?;
    Ok(())
}

/// Every counted event's key (tests).
#[cfg(test)]
pub fn keys(c: &Conn) -> Result<Vec<String>> {
    let mut st = c.prepare("SELECT key FROM limit_hits ORDER BY id")?;
    let keys = st.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
    Ok(keys)
}
