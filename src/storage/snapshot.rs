//! The database as a whole, for backups, restores and checks: a consistent copy taken while the
//! server writes (`VACUUM INTO` on its own read-only connection: one read transaction, so the copy
//! is the database as of one commit, and writers are not held up in WAL mode), the schema version
//! read without changing the file, the integrity check and the row count of every table.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use super::migrations::{self, Status};
use crate::error::{Error, Result};

/// Opens `path` read-only: nothing this connection does changes the database file.
pub fn open_read_only(path: &Path) -> Result<Connection> {
    let c = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|e| Error::internal_msg(format!("cannot open the database {}: {e}", path.display())))?;
    c.busy_timeout(std::time::Duration::from_secs(30))?;
    Ok(c)
}

/// The migration status of the database at `path`, read without changing it (`None`: no
/// database there yet).
pub fn peek_status(path: &Path) -> Result<Option<Status>> {
    if !path.is_file() {
        return Ok(None);
    }
    let c = open_read_only(path)?;
    migrations::status(&c).map(Some)
}

/// Writes a consistent copy of the database at `src` to `dest` (which must not exist).
pub fn copy_into(src: &Path, dest: &Path) -> Result<()> {
    let c = open_read_only(src)?;
    let dest = dest.to_str().ok_or_else(|| Error::internal_msg("the snapshot path is not UTF-8"))?;
    c.execute("VACUUM INTO ?1", [dest]).map_err(|e| Error::internal_msg(format!("cannot copy the database: {e}")))?;
    Ok(())
}

/// Opens a copy made by [`copy_into`] and brings it to this binary's schema version (the applied
/// versions are returned); the live database is not touched.
pub fn open_copy_migrated(path: &Path) -> Result<(Connection, Vec<u32>)> {
    let mut c = Connection::open(path)
        .map_err(|e| Error::internal_msg(format!("cannot open the copy {}: {e}", path.display())))?;
    let applied = migrations::apply(&mut c, None)?;
    Ok((c, applied))
}

/// `PRAGMA integrity_check`: empty when the database is whole, else SQLite's findings.
pub fn integrity_problems(c: &Connection) -> Result<Vec<String>> {
    let mut stmt = c.prepare("PRAGMA integrity_check")?;
    let rows: Vec<String> = stmt.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
    Ok(if rows.len() == 1 && rows[0] == "ok" { Vec::new() } else { rows })
}

/// Rows that break a foreign key (`PRAGMA foreign_key_check`).
pub fn foreign_key_problems(c: &Connection) -> Result<i64> {
    Ok(c.query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| r.get(0))?)
}

/// The row count of every table, by name.
pub fn table_counts(c: &Connection) -> Result<BTreeMap<String, i64>> {
    let mut stmt =
        c.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")?;
    let names: Vec<String> = stmt.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
    let mut out = BTreeMap::new();
    for name in names {
        // a table name from sqlite_master, quoted as an identifier
        let sql = format!("SELECT count(*) FROM \"{}\"", name.replace('"', "\"\""));
        out.insert(name, c.query_row(&sql, [], |r| r.get(0))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_whole_and_counts_every_table() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("a.db");
        let db = crate::storage::Db::open(&src, 1).unwrap();
        db.write(|tx| {
            tx.execute("INSERT INTO organizations (id, name, created_at) VALUES ('o1', 'Acme', 'now')", [])?;
            Ok(())
        })
        .unwrap();
        let dest = dir.path().join("b.db");
        copy_into(&src, &dest).unwrap();
        let c = open_read_only(&dest).unwrap();
        assert!(integrity_problems(&c).unwrap().is_empty());
        assert_eq!(foreign_key_problems(&c).unwrap(), 0);
        let counts = table_counts(&c).unwrap();
        assert_eq!(counts["organizations"], 1);
        assert!(counts.contains_key("schema_migrations"));
        let st = peek_status(&dest).unwrap().unwrap();
        assert!(st.is_current());
        assert!(peek_status(&dir.path().join("none.db")).unwrap().is_none());
    }
}
