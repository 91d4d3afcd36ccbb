//! Numbered, append-only migrations. Each file in `migrations/` is applied once, in order, and
//! recorded with a checksum; the pending ones of a start are applied together in one `BEGIN
//! IMMEDIATE` transaction (SQLite's write lock: a second process waits, then finds them applied),
//! so a failure leaves the database as it was. An applied migration whose text changed, or a
//! database that knows a migration this binary does not (a newer Steward wrote it), stops the
//! start with a plain message.

use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

pub struct Migration {
    pub version: u32,
    pub name: &'static str,
    pub sql: &'static str,
}

macro_rules! migration {
    ($v:expr, $name:expr) => {
        Migration { version: $v, name: $name, sql: include_str!(concat!("../../migrations/", $name, ".sql")) }
    };
}

/// Every migration, in order. Append only: never edit or reorder an entry that has shipped.
pub const MIGRATIONS: &[Migration] = &[
    migration!(1, "0001_foundation"),
    migration!(2, "0002_knowledge"),
    migration!(3, "0003_models"),
    migration!(4, "0004_agents"),
    migration!(5, "0005_conversations"),
    migration!(6, "0006_hardening"),
    migration!(7, "0007_delivery_takeover"),
    migration!(8, "0008_public_chat"),
    migration!(9, "0009_routines"),
    migration!(10, "0010_channel_credentials"),
    migration!(11, "0011_converse_sessions"),
    migration!(12, "0012_knowledge_spaces"),
    migration!(13, "0013_crawls"),
    migration!(14, "0014_evals"),
    migration!(15, "0015_bundle_imports"),
    migration!(16, "0016_usage_limits"),
    migration!(17, "0017_connectors"),
    migration!(18, "0018_shared_limits"),
];

/// The checksum recorded beside an applied migration (its text's SHA-256).
pub(crate) fn checksum(sql: &str) -> String {
    hex::encode(Sha256::digest(sql.as_bytes()))
}

fn ensure_table(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            checksum TEXT NOT NULL,
            applied_at TEXT NOT NULL
        );",
    )
}

#[derive(Debug, Clone)]
pub struct Status {
    /// Versions recorded in the database.
    pub applied: Vec<u32>,
    /// Versions this binary has and the database has not.
    pub pending: Vec<u32>,
    /// Versions the database has that this binary does not know (a newer binary ran here).
    pub unknown: Vec<u32>,
    /// Applied versions whose text differs from this binary's.
    pub modified: Vec<u32>,
}

impl Status {
    pub fn is_current(&self) -> bool {
        self.pending.is_empty() && self.unknown.is_empty() && self.modified.is_empty()
    }
}

pub fn status(conn: &Connection) -> Result<Status> {
    let exists: bool = conn
        .query_row("SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_migrations'", [], |_| Ok(true))
        .optional()?
        .unwrap_or(false);
    let mut rows: Vec<(u32, String)> = Vec::new();
    if exists {
        let mut stmt = conn.prepare("SELECT version, checksum FROM schema_migrations ORDER BY version")?;
        rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<_>>()?;
    }
    Ok(status_of(MIGRATIONS, &rows))
}

/// The status of a database whose recorded `(version, checksum)` rows are `rows`, against the
/// migrations `list` this binary brings (SQLite's, or PostgreSQL's).
pub fn status_of(list: &[Migration], rows: &[(u32, String)]) -> Status {
    let mut st = Status { applied: vec![], pending: vec![], unknown: vec![], modified: vec![] };
    for (v, sum) in rows {
        st.applied.push(*v);
        match list.iter().find(|m| m.version == *v) {
            None => st.unknown.push(*v),
            Some(m) if checksum(m.sql) != *sum => st.modified.push(*v),
            Some(_) => {}
        }
    }
    st.pending = list.iter().map(|m| m.version).filter(|v| !rows.iter().any(|(d, _)| d == v)).collect();
    st
}

/// The schema version of a database: the highest migration applied (0 for none).
pub fn schema_version(st: &Status) -> u32 {
    st.applied.iter().copied().max().unwrap_or(0)
}

/// The schema version this binary brings: its last migration.
pub fn latest() -> u32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// The plain refusal of a database a newer Steward wrote.
pub fn newer_message(st: &Status) -> String {
    format!(
        "this data directory was written by a newer Steward (its database is at schema version {}, this steward knows up to {}): run that version, or restore a backup made for this one; nothing was changed",
        schema_version(st),
        latest()
    )
}

/// Applies pending migrations up to `up_to` (all when `None`) in one transaction; returns the
/// versions applied.
pub fn apply(conn: &mut Connection, up_to: Option<u32>) -> Result<Vec<u32>> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    ensure_table(&tx)?;
    // read under the write lock: another process that migrated meanwhile is seen here
    let st = status(&tx)?;
    if !st.unknown.is_empty() {
        return Err(Error::internal_msg(newer_message(&st)));
    }
    if let Some(v) = st.modified.first() {
        return Err(Error::internal_msg(format!(
            "migration {v} changed after it was applied to this database; migrations are append-only"
        )));
    }
    let mut applied = Vec::new();
    let now = crate::clock::rfc3339(chrono::Utc::now());
    for m in MIGRATIONS {
        if !st.pending.contains(&m.version) || up_to.is_some_and(|u| m.version > u) {
            continue;
        }
        tx.execute_batch(m.sql)
            .map_err(|e| Error::internal_msg(format!("migration {} ({}) failed: {e}", m.version, m.name)))?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (?1, ?2, ?3, ?4)",
            params![m.version, m.name, checksum(m.sql), now],
        )?;
        applied.push(m.version);
    }
    tx.commit()?;
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_strictly_increasing_and_files_are_numbered() {
        let mut last = 0;
        for m in MIGRATIONS {
            assert!(m.version > last);
            assert!(m.name.starts_with(&format!("{:04}_", m.version)), "{}", m.name);
            last = m.version;
        }
    }

    #[test]
    fn applying_twice_is_a_no_op() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Connection::open(dir.path().join("m.db")).unwrap();
        let first = apply(&mut c, None).unwrap();
        assert_eq!(first.len(), MIGRATIONS.len());
        assert!(apply(&mut c, None).unwrap().is_empty());
        assert!(status(&c).unwrap().is_current());
    }

    #[test]
    fn an_edited_migration_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Connection::open(dir.path().join("m.db")).unwrap();
        apply(&mut c, None).unwrap();
        c.execute("UPDATE schema_migrations SET checksum = 'x' WHERE version = 1", []).unwrap();
        let err = apply(&mut c, None).unwrap_err().to_string();
        assert!(err.contains("append-only"), "{err}");
    }

    #[test]
    fn a_newer_database_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Connection::open(dir.path().join("m.db")).unwrap();
        apply(&mut c, None).unwrap();
        c.execute("INSERT INTO schema_migrations VALUES (9999, 'future', 'x', 'now')", []).unwrap();
        let err = apply(&mut c, None).unwrap_err().to_string();
        assert!(err.contains("newer Steward"), "{err}");
    }

    #[test]
    fn a_failing_migration_leaves_the_database_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Connection::open(dir.path().join("m.db")).unwrap();
        apply(&mut c, Some(3)).unwrap();
        // a table migration 5 creates exists already: 4 applies, then 5 fails, and neither stays
        c.execute_batch("CREATE TABLE conversations (x)").unwrap();
        let err = apply(&mut c, None).unwrap_err().to_string();
        assert!(err.contains("failed"), "{err}");
        assert_eq!(schema_version(&status(&c).unwrap()), 3, "all or nothing");
        let agents: i64 =
            c.query_row("SELECT count(*) FROM sqlite_master WHERE name = 'agents'", [], |r| r.get(0)).unwrap();
        assert_eq!(agents, 0, "migration 4's tables were rolled back with the rest");
    }
}
