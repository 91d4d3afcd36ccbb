//! Copying a SQLite database into an empty PostgreSQL database of the same schema version, for
//! `steward migrate-store`: every table in foreign-key order by `COPY … BINARY`, values carried
//! exactly (ids and timestamps included), identity sequences moved past the copied ids, the
//! originals into `blobs`, then every table read back and its row count and checksum compared with
//! the source's before one commit. A failure anywhere leaves the target without a row (the
//! schema, migrated before, stays: a second run into it is fine).
//!
//! One value cannot be carried exactly, because PostgreSQL cannot store it: U+0000 in text (a
//! visitor can type one). By default the copy stops and names the row; asked to (`Nul::Replace`),
//! it writes U+FFFD and reports how many values of which columns changed.
//!
//! The checksum of a table does not depend on row order (the two engines sort text differently):
//! each row's values are hashed with their types, the row digests sorted, and the list hashed.

use std::collections::{BTreeMap, BTreeSet};

use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use postgres::{Client, Transaction};
use rusqlite::types::ValueRef;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// One copied table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableCopy {
    pub table: String,
    pub rows: i64,
    /// Hex SHA-256 of the sorted row digests; the same on both sides.
    pub checksum: String,
}

/// What a copy moved.
#[derive(Debug, Clone, Default)]
pub struct Copied {
    pub tables: Vec<TableCopy>,
    pub originals: u64,
    pub original_bytes: u64,
    /// With [`Nul::Replace`]: how many values of each `table.column` held U+0000, which
    /// PostgreSQL cannot store, and were written with U+FFFD instead.
    pub nul_texts: BTreeMap<String, u64>,
}

/// A column's type on PostgreSQL (the baseline uses only these four).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    Real,
    Text,
    Bytes,
}

impl Kind {
    fn of(data_type: &str) -> Option<Kind> {
        Some(match data_type {
            "bigint" => Kind::Int,
            "double precision" => Kind::Real,
            "text" => Kind::Text,
            "bytea" => Kind::Bytes,
            _ => return None,
        })
    }
    fn pg(self) -> Type {
        match self {
            Kind::Int => Type::INT8,
            Kind::Real => Type::FLOAT8,
            Kind::Text => Type::TEXT,
            Kind::Bytes => Type::BYTEA,
        }
    }
}

/// One value on its way, already in its PostgreSQL column's type.
#[derive(Debug)]
enum Val {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Bytes(Vec<u8>),
}

impl ToSql for Val {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Val::Null => Ok(IsNull::Yes),
            Val::Int(v) => v.to_sql(ty, out),
            Val::Real(v) => v.to_sql(ty, out),
            Val::Text(v) => v.to_sql(ty, out),
            Val::Bytes(v) => v.to_sql(ty, out),
        }
    }
    fn accepts(ty: &Type) -> bool {
        [Type::INT8, Type::FLOAT8, Type::TEXT, Type::BYTEA].contains(ty)
    }
    to_sql_checked!();
}

/// Adds a value, tagged with its type, to a row digest.
fn hash_val(h: &mut Sha256, v: &Val) {
    match v {
        Val::Null => h.update([0]),
        Val::Int(i) => {
            h.update([1]);
            h.update(i.to_le_bytes());
        }
        Val::Real(f) => {
            h.update([2]);
            h.update(f.to_bits().to_le_bytes());
        }
        Val::Text(s) => {
            h.update([3]);
            h.update((s.len() as u64).to_le_bytes());
            h.update(s.as_bytes());
        }
        Val::Bytes(b) => {
            h.update([4]);
            h.update((b.len() as u64).to_le_bytes());
            h.update(b);
        }
    }
}

fn table_digest(mut rows: Vec<[u8; 32]>) -> String {
    rows.sort_unstable();
    let mut h = Sha256::new();
    for r in &rows {
        h.update(r);
    }
    hex::encode(h.finalize())
}

/// A SQLite value as the PostgreSQL column's type, exactly or not at all.
fn convert(v: ValueRef<'_>, kind: Kind, table: &str, column: &str) -> Result<Val> {
    let wrong = |what: &str| {
        Error::invalid(format!(
            "{table}.{column} holds {what}, which its PostgreSQL column ({kind:?}) cannot take exactly"
        ))
    };
    Ok(match (v, kind) {
        (ValueRef::Null, _) => Val::Null,
        (ValueRef::Integer(i), Kind::Int) => Val::Int(i),
        (ValueRef::Integer(i), Kind::Real) if i.unsigned_abs() <= 1 << 53 => Val::Real(i as f64),
        (ValueRef::Real(f), Kind::Real) => Val::Real(f),
        (ValueRef::Text(t), Kind::Text) => {
            let text = String::from_utf8(t.to_vec()).map_err(|_| wrong("text that is not UTF-8"))?;
            // PostgreSQL text cannot hold U+0000 (SQLite's can: a visitor may have typed one):
            // it becomes U+FFFD, counted and reported; the checksum covers the value written
            Val::Text(if text.contains('\0') { text.replace('\0', "\u{FFFD}") } else { text })
        }
        (ValueRef::Blob(b), Kind::Bytes) => Val::Bytes(b.to_vec()),
        (ValueRef::Integer(_), _) => return Err(wrong("an integer")),
        (ValueRef::Real(_), _) => return Err(wrong("a real number")),
        (ValueRef::Text(_), _) => return Err(wrong("text")),
        (ValueRef::Blob(_), _) => return Err(wrong("bytes")),
    })
}

/// "1 row", "2 rows".
pub fn plural(n: i64, word: &str) -> String {
    if n == 1 { format!("1 {word}") } else { format!("{n} {word}s") }
}

fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// The tables of the PostgreSQL schema with their columns in order (Steward's own bookkeeping
/// and `blobs` excluded).
fn pg_tables(tx: &mut Transaction<'_>) -> Result<BTreeMap<String, Vec<(String, Kind)>>> {
    let rows = tx.query(
        "SELECT c.table_name::text, c.column_name::text, c.data_type::text
         FROM information_schema.columns c JOIN information_schema.tables t
           ON t.table_schema = c.table_schema AND t.table_name = c.table_name
         WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
         ORDER BY c.table_name, c.ordinal_position",
        &[],
    )?;
    let mut out: BTreeMap<String, Vec<(String, Kind)>> = BTreeMap::new();
    for r in rows {
        let (table, column, ty): (String, String, String) = (r.get(0), r.get(1), r.get(2));
        if table == "schema_migrations" || table == "blobs" {
            continue;
        }
        let kind = Kind::of(&ty).ok_or_else(|| {
            Error::internal_msg(format!("{table}.{column} has the unexpected type {ty} on PostgreSQL"))
        })?;
        out.entry(table).or_default().push((column, kind));
    }
    Ok(out)
}

/// The SQLite tables (bookkeeping excluded), parents before the tables that refer to them.
fn sqlite_tables_in_order(src: &rusqlite::Connection) -> Result<Vec<String>> {
    let mut stmt = src.prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
           AND name <> 'schema_migrations' ORDER BY name",
    )?;
    let names: Vec<String> = stmt.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
    let mut parents: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for n in &names {
        let mut fk = src.prepare(&format!("SELECT \"table\" FROM pragma_foreign_key_list({})", quote_lit(n)))?;
        let refs: BTreeSet<String> = fk.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<BTreeSet<String>>>()?;
        parents.insert(n.clone(), refs.into_iter().filter(|p| p != n).collect());
    }
    let mut order = Vec::new();
    let mut placed = BTreeSet::new();
    while order.len() < names.len() {
        let next = names
            .iter()
            .find(|n| {
                !placed.contains(*n) && parents[*n].iter().all(|p| placed.contains(p) || !parents.contains_key(p))
            })
            .ok_or_else(|| Error::internal_msg("the foreign keys of the SQLite schema form a cycle"))?;
        placed.insert(next.clone());
        order.push(next.clone());
    }
    Ok(order)
}

fn quote_lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn sqlite_columns(src: &rusqlite::Connection, table: &str) -> Result<Vec<String>> {
    let mut stmt = src.prepare(&format!("SELECT name FROM pragma_table_info({}) ORDER BY cid", quote_lit(table)))?;
    Ok(stmt.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?)
}

/// Refuses a target that holds any row (the schema alone is fine: a node may have migrated it).
/// Run inside the copy's transaction, after its lock: two copies cannot both find it empty.
fn ensure_empty(tx: &mut Transaction<'_>, tables: &BTreeMap<String, Vec<(String, Kind)>>) -> Result<()> {
    for table in tables.keys().map(String::as_str).chain(["blobs"]) {
        let any: bool = tx.query_one(&format!("SELECT EXISTS (SELECT 1 FROM {})", quote(table)), &[])?.get(0);
        if any {
            return Err(Error::conflict(format!(
                "the target database is not empty (table {table} has rows); migrate-store copies into an empty database only"
            )));
        }
    }
    Ok(())
}

/// Before anything is created in the target: it holds no table that is not Steward's (in any
/// schema), and none of Steward's holds a row. `copy` checks the rows again under its lock.
pub fn check_target(pg: &mut Client) -> Result<()> {
    let ours = super::table_names();
    let rows = pg.query(
        "SELECT table_schema::text, table_name::text FROM information_schema.tables
         WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')
         ORDER BY 1, 2",
        &[],
    )?;
    let current: String = pg.query_one("SELECT current_schema()::text", &[])?.get(0);
    let foreign: Vec<String> = rows
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
        .filter(|(schema, table)| *schema != current || !ours.contains(table.as_str()))
        .map(|(schema, table)| format!("{schema}.{table}"))
        .collect();
    if !foreign.is_empty() {
        let shown: Vec<&str> = foreign.iter().take(5).map(String::as_str).collect();
        return Err(Error::conflict(format!(
            "the target database is not empty: it holds tables that are not Steward's ({}{}); migrate-store copies into a new, empty database",
            shown.join(", "),
            if foreign.len() > 5 { ", …" } else { "" }
        )));
    }
    if rows.is_empty() {
        return Ok(());
    }
    let mut tx = pg.transaction()?;
    let tables = pg_tables(&mut tx)?;
    ensure_empty(&mut tx, &tables)
}

/// What to do with text holding U+0000, which PostgreSQL text cannot store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nul {
    /// Stop, naming where (the default: nothing is changed without being asked).
    Refuse,
    /// Write U+FFFD in its place, and count where.
    Replace,
}

/// Copies every table of `src` (a SQLite database at the binary's schema version) and the
/// `originals` (sha256, bytes) into `pg` (migrated to the same version, empty), verifies, commits.
pub fn copy(
    src: &rusqlite::Connection,
    pg: &mut Client,
    nul: Nul,
    originals: &mut dyn Iterator<Item = Result<(String, Vec<u8>)>>,
    progress: &mut dyn FnMut(&str),
) -> Result<Copied> {
    let mut tx = pg.transaction()?;
    // the migrations' lock: no node migrates, and no other copy starts, until this one ends
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&super::MIGRATE_LOCK])?;
    let targets = pg_tables(&mut tx)?;
    ensure_empty(&mut tx, &targets)?;
    let order = sqlite_tables_in_order(src)?;
    let mut copied = Copied::default();
    for table in &order {
        let cols = targets.get(table).ok_or_else(|| {
            Error::internal_msg(format!("the PostgreSQL schema has no table {table}; is it at this steward's version?"))
        })?;
        let names: Vec<String> = cols.iter().map(|(n, _)| n.clone()).collect();
        let source_names = sqlite_columns(src, table)?;
        if BTreeSet::from_iter(&names) != BTreeSet::from_iter(&source_names) {
            return Err(Error::internal_msg(format!(
                "table {table} has columns [{}] on SQLite and [{}] on PostgreSQL",
                source_names.join(", "),
                names.join(", ")
            )));
        }
        let list = names.iter().map(|n| quote(n)).collect::<Vec<_>>().join(", ");
        let (rows, checksum) = copy_table(src, &mut tx, table, cols, &list, nul, &mut copied.nul_texts)?;
        progress(&format!("copied {table}: {} (checksum {})", plural(rows, "row"), &checksum[..16]));
        copied.tables.push(TableCopy { table: table.clone(), rows, checksum });
    }
    if let Some(t) = targets.keys().find(|t| !order.contains(t)) {
        return Err(Error::internal_msg(format!("the PostgreSQL table {t} has no SQLite counterpart")));
    }
    advance_identities(src, &mut tx, &order)?;
    for item in originals {
        let (sha, bytes) = item?;
        if hex::encode(Sha256::digest(&bytes)) != sha {
            return Err(Error::invalid(format!("the stored original {sha} is damaged (its content has another hash)")));
        }
        tx.execute(
            "INSERT INTO blobs (sha256, bytes, size_bytes, created_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (sha256) DO NOTHING",
            &[&sha, &bytes, &(bytes.len() as i64), &crate::clock::rfc3339(chrono::Utc::now())],
        )?;
        copied.originals += 1;
        copied.original_bytes += bytes.len() as u64;
    }
    progress(&format!("copied {} ({} bytes)", plural(copied.originals as i64, "original"), copied.original_bytes));
    // read everything back before committing
    for t in &copied.tables {
        let (rows, checksum) = read_back(&mut tx, &t.table, &targets[&t.table])?;
        if rows != t.rows || checksum != t.checksum {
            return Err(Error::internal_msg(format!(
                "table {} did not copy whole ({} rows and checksum {} read back, {} rows and {} written); nothing was committed",
                t.table, rows, checksum, t.rows, t.checksum
            )));
        }
    }
    progress("read back every table: row counts and checksums match");
    let bad: i64 = tx
        .query_one(
            "SELECT count(*) FROM blobs WHERE encode(sha256(bytes), 'hex') <> sha256 OR length(bytes) <> size_bytes",
            &[],
        )?
        .get(0);
    if bad > 0 {
        return Err(Error::internal_msg(format!("{bad} originals read back differently; nothing was committed")));
    }
    tx.commit()?;
    Ok(copied)
}

fn copy_table(
    src: &rusqlite::Connection,
    tx: &mut Transaction<'_>,
    table: &str,
    cols: &[(String, Kind)],
    list: &str,
    nul: Nul,
    nul_texts: &mut BTreeMap<String, u64>,
) -> Result<(i64, String)> {
    let types: Vec<Type> = cols.iter().map(|(_, k)| k.pg()).collect();
    let sink = tx.copy_in(&format!("COPY {} ({list}) FROM STDIN BINARY", quote(table)))?;
    let mut writer = BinaryCopyInWriter::new(sink, &types);
    let mut stmt = src.prepare(&format!("SELECT {list} FROM {}", quote(table)))?;
    let mut rows = stmt.query([])?;
    let mut digests = Vec::new();
    while let Some(r) = rows.next()? {
        let mut vals = Vec::with_capacity(cols.len());
        let mut h = Sha256::new();
        for (i, (name, kind)) in cols.iter().enumerate() {
            let raw = r.get_ref(i)?;
            if let ValueRef::Text(t) = raw
                && t.contains(&0)
            {
                if nul == Nul::Refuse {
                    let key = match r.get_ref(0)? {
                        ValueRef::Integer(v) => v.to_string(),
                        ValueRef::Text(v) => String::from_utf8_lossy(v).into_owned(),
                        _ => "?".into(),
                    };
                    return Err(Error::invalid(format!(
                        "{table}.{column} of the row {first} = {key} holds a NUL character (U+0000), which PostgreSQL text cannot store; nothing was copied (--replace-nul writes U+FFFD instead and reports where)",
                        column = name,
                        first = cols[0].0
                    )));
                }
                *nul_texts.entry(format!("{table}.{name}")).or_default() += 1;
            }
            let v = convert(raw, *kind, table, name)?;
            hash_val(&mut h, &v);
            vals.push(v);
        }
        digests.push(h.finalize().into());
        let refs: Vec<&(dyn ToSql + Sync)> = vals.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        writer.write(&refs)?;
    }
    let written = writer.finish()?;
    let count = digests.len() as i64;
    if written != count as u64 {
        return Err(Error::internal_msg(format!("{table}: {written} rows written of {count}")));
    }
    Ok((count, table_digest(digests)))
}

fn read_back(tx: &mut Transaction<'_>, table: &str, cols: &[(String, Kind)]) -> Result<(i64, String)> {
    let list = cols.iter().map(|(n, _)| quote(n)).collect::<Vec<_>>().join(", ");
    let portal = tx.bind(&format!("SELECT {list} FROM {}", quote(table)), &[])?;
    let mut digests: Vec<[u8; 32]> = Vec::new();
    loop {
        let rows = tx.query_portal(&portal, 1000)?;
        if rows.is_empty() {
            break;
        }
        for r in &rows {
            let mut h = Sha256::new();
            for (i, (_, kind)) in cols.iter().enumerate() {
                let v = match kind {
                    Kind::Int => r.get::<_, Option<i64>>(i).map_or(Val::Null, Val::Int),
                    Kind::Real => r.get::<_, Option<f64>>(i).map_or(Val::Null, Val::Real),
                    Kind::Text => r.get::<_, Option<String>>(i).map_or(Val::Null, Val::Text),
                    Kind::Bytes => r.get::<_, Option<Vec<u8>>>(i).map_or(Val::Null, Val::Bytes),
                };
                hash_val(&mut h, &v);
            }
            digests.push(h.finalize().into());
        }
    }
    Ok((digests.len() as i64, table_digest(digests)))
}

/// Moves each identity column's sequence past the copied ids, and past SQLite's AUTOINCREMENT
/// high-water mark (ids of deleted rows are not handed out again there, nor here).
fn advance_identities(src: &rusqlite::Connection, tx: &mut Transaction<'_>, tables: &[String]) -> Result<()> {
    let rows = tx.query(
        "SELECT table_name::text, column_name::text FROM information_schema.columns
         WHERE table_schema = current_schema() AND is_identity = 'YES'",
        &[],
    )?;
    let has_sequence_table: bool =
        src.query_row("SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_sequence'", [], |r| r.get::<_, i64>(0))?
            > 0;
    for r in rows {
        let (table, column): (String, String) = (r.get(0), r.get(1));
        if !tables.contains(&table) {
            continue;
        }
        let max: Option<i64> =
            src.query_row(&format!("SELECT max({}) FROM {}", quote(&column), quote(&table)), [], |r| r.get(0))?;
        let mark: Option<i64> = if has_sequence_table {
            src.query_row("SELECT max(seq) FROM sqlite_sequence WHERE name = ?1", [&table], |r| r.get(0))?
        } else {
            None
        };
        if let Some(top) = max.into_iter().chain(mark).max() {
            // never backwards: a target whose sequences were used before (rows since deleted)
            let seq: String = tx.query_one("SELECT pg_get_serial_sequence($1, $2)", &[&quote(&table), &column])?.get(0);
            let (last, called): (i64, bool) = {
                let r = tx.query_one(&format!("SELECT last_value, is_called FROM {seq}"), &[])?;
                (r.get(0), r.get(1))
            };
            let used = if called { last } else { 0 };
            tx.execute("SELECT setval($1::text::regclass, $2)", &[&seq, &top.max(used).max(1)])?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_convert_exactly_or_are_refused() {
        assert!(matches!(convert(ValueRef::Integer(7), Kind::Int, "t", "c").unwrap(), Val::Int(7)));
        assert!(matches!(convert(ValueRef::Integer(2), Kind::Real, "t", "c").unwrap(), Val::Real(f) if f == 2.0));
        assert!(convert(ValueRef::Integer(i64::MAX), Kind::Real, "t", "c").is_err());
        assert!(matches!(convert(ValueRef::Null, Kind::Bytes, "t", "c").unwrap(), Val::Null));
        let e = convert(ValueRef::Text(b"x"), Kind::Int, "jobs", "attempts").err().unwrap().to_string();
        assert!(e.contains("jobs.attempts") && e.contains("text"), "{e}");
        assert!(convert(ValueRef::Blob(b"x"), Kind::Text, "t", "c").is_err());
        assert!(convert(ValueRef::Text(&[0xff]), Kind::Text, "t", "c").is_err());
        assert!(
            matches!(convert(ValueRef::Text(b"a\0b"), Kind::Text, "t", "c").unwrap(), Val::Text(t) if t == "a\u{FFFD}b")
        );
    }

    #[test]
    fn a_table_checksum_ignores_row_order_but_not_types_or_values() {
        let row = |vals: &[Val]| -> [u8; 32] {
            let mut h = Sha256::new();
            vals.iter().for_each(|v| hash_val(&mut h, v));
            h.finalize().into()
        };
        let a = row(&[Val::Int(1), Val::Text("x".into())]);
        let b = row(&[Val::Int(2), Val::Null]);
        assert_eq!(table_digest(vec![a, b]), table_digest(vec![b, a]));
        assert_ne!(table_digest(vec![a, b]), table_digest(vec![a, a]));
        assert_ne!(row(&[Val::Int(1)]), row(&[Val::Real(1.0)]));
        assert_ne!(row(&[Val::Text(String::new())]), row(&[Val::Null]));
        assert_ne!(
            row(&[Val::Text("ab".into()), Val::Text("c".into())]),
            row(&[Val::Text("a".into()), Val::Text("bc".into())])
        );
    }
}
