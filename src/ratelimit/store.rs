//! SQL for the shared limits' counted events (`limit_hits`).

use crate::error::Result;
#[cfg(test)]
use crate::storage::Conn;
use crate::storage::Tx;

/// Events of `key` in `scope` after `after_ms`, and the oldest of them.
pub fn window(tx: &Tx, scope: &str, key: &str, after_ms: i64) -> Result<(i64, Option<i64>)> {
    Ok(tx.query_row(
        "SELECT count(*), min(at_ms) FROM limit_hits WHERE scope = ?1 AND key = ?2 AND at_ms > ?3",
        rusqlite::params![scope, key, after_ms],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?)
}

/// Counts one event, and forgets the events of the whole scope that no window can reach again.
pub fn insert(tx: &Tx, scope: &str, key: &str, at_ms: i64, forget_up_to_ms: i64) -> Result<()> {
    tx.execute_deferred(
        "DELETE FROM limit_hits WHERE scope = ?1 AND at_ms <= ?2",
        rusqlite::params![scope, forget_up_to_ms],
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
