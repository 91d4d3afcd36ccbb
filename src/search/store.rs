//! SQL behind search: the index change log, live chunks, hydration of results, search history.

use std::collections::HashSet;

use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use serde::Serialize;
use serde_json::Value;

use crate::documents::DocumentMeta;
use crate::error::Result;
use crate::storage::{SqlValue, Tx};

pub fn encode_vector(v: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 4);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

pub fn decode_vector(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// A random identity of this database, so an index built for another one is recognised.
pub fn database_id(tx: &Tx) -> Result<i64> {
    if let Some(id) =
        tx.query_row("SELECT applied_seq FROM index_state WHERE name = 'database'", [], |r| r.get(0)).optional()?
    {
        return Ok(id);
    }
    let id: i64 = rand::random::<i64>().abs().max(1);
    tx.execute("INSERT INTO index_state (name, applied_seq, updated_at) VALUES ('database', ?1, '')", [id])?;
    Ok(id)
}

/// The highest op sequence ever issued (survives pruning).
pub fn max_seq(c: &Connection) -> Result<i64> {
    Ok(c.query_row("SELECT seq FROM sqlite_sequence WHERE name = 'index_ops'", [], |r| r.get(0))
        .optional()?
        .unwrap_or(0))
}

pub fn min_seq(c: &Connection) -> Result<Option<i64>> {
    Ok(c.query_row("SELECT min(seq) FROM index_ops", [], |r| r.get(0))?)
}

pub fn prune_ops(tx: &Tx, upto: i64) -> Result<usize> {
    Ok(tx.execute("DELETE FROM index_ops WHERE seq <= ?1", [upto])?)
}

/// Logs the chunks of `doc`'s `revision` for the indexes to add (in the transaction that makes
/// the revision live).
pub fn log_added_chunks(tx: &Tx, doc: &str, revision: i64) -> Result<()> {
    tx.execute(
        "INSERT INTO index_ops (op, chunk_rowid, workspace_id) SELECT 'add', rowid, workspace_id FROM chunks WHERE document_id = ?1 AND revision = ?2 ORDER BY rowid",
        rusqlite::params![doc, revision],
    )?;
    Ok(())
}

pub struct Op {
    pub seq: i64,
    pub add: bool,
    pub key: u64,
    pub workspace_id: String,
}

pub fn ops_after(c: &Connection, seq: i64, limit: usize) -> Result<Vec<Op>> {
    let mut stmt = c.prepare_cached(
        "SELECT seq, op, chunk_rowid, workspace_id FROM index_ops WHERE seq > ?1 ORDER BY seq LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![seq, limit as i64], |r| {
        Ok(Op {
            seq: r.get(0)?,
            add: r.get::<_, String>(1)? == "add",
            key: r.get::<_, i64>(2)? as u64,
            workspace_id: r.get(3)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// A chunk with what the indexes need.
pub struct LiveChunk {
    pub key: u64,
    pub workspace_id: String,
    pub document_id: String,
    pub title: String,
    pub heading: String,
    pub content: String,
    pub embedding: Option<Vec<f32>>,
}

fn live_row(r: &rusqlite::Row) -> rusqlite::Result<LiveChunk> {
    let emb: Option<Vec<u8>> = r.get(6)?;
    Ok(LiveChunk {
        key: r.get::<_, i64>(0)? as u64,
        workspace_id: r.get(1)?,
        document_id: r.get(2)?,
        title: r.get(3)?,
        heading: r.get::<_, Option<String>>(4)?.unwrap_or_default(),
        content: r.get(5)?,
        embedding: emb.map(|b| decode_vector(&b)),
    })
}

const LIVE_COLS: &str = "c.rowid, c.workspace_id, c.document_id, d.title, c.heading_path, c.content, c.embedding";

pub fn chunks_by_keys(c: &Connection, keys: &[u64]) -> Result<Vec<LiveChunk>> {
    let mut out = Vec::with_capacity(keys.len());
    for part in keys.chunks(500) {
        let marks = vec!["?"; part.len()].join(",");
        let sql = format!(
            "SELECT {LIVE_COLS} FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.rowid IN ({marks})"
        );
        let mut stmt = c.prepare(&sql)?;
        let rows = stmt.query_map(params_from_iter(part.iter().map(|k| *k as i64)), live_row)?;
        for r in rows {
            out.push(r?);
        }
    }
    Ok(out)
}

/// Calls `f` for every live chunk (of a document's indexed revision, embedded).
pub fn for_each_live(c: &Connection, mut f: impl FnMut(LiveChunk) -> Result<()>) -> Result<()> {
    let mut stmt = c.prepare(&format!(
        "SELECT {LIVE_COLS} FROM chunks c JOIN documents d ON d.id = c.document_id
         WHERE c.revision = d.indexed_revision AND c.embedding IS NOT NULL ORDER BY c.rowid"
    ))?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        f(live_row(r)?)?;
    }
    Ok(())
}

pub fn live_count(c: &Connection) -> Result<i64> {
    Ok(c.query_row(
        "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.revision = d.indexed_revision AND c.embedding IS NOT NULL",
        [],
        |r| r.get(0),
    )?)
}

/// Keys of the live chunks of `documents`.
pub fn live_keys_of_documents(c: &Connection, workspace: &str, documents: &HashSet<String>) -> Result<HashSet<u64>> {
    let mut out = HashSet::new();
    let ids: Vec<&String> = documents.iter().collect();
    for part in ids.chunks(500) {
        let marks = vec!["?"; part.len()].join(",");
        let sql = format!(
            "SELECT c.rowid FROM chunks c JOIN documents d ON d.id = c.document_id
             WHERE c.workspace_id = ? AND c.revision = d.indexed_revision AND d.id IN ({marks})"
        );
        let mut args: Vec<SqlValue> = vec![SqlValue::Text(workspace.to_string())];
        args.extend(part.iter().map(|s| SqlValue::Text((*s).clone())));
        let mut stmt = c.prepare(&sql)?;
        let rows = stmt.query_map(params_from_iter(args.iter()), |r| r.get::<_, i64>(0))?;
        for r in rows {
            out.insert(r? as u64);
        }
    }
    Ok(out)
}

/// A result chunk with its document.
#[derive(Debug, Clone)]
pub struct Hydrated {
    pub key: u64,
    pub chunk_id: String,
    pub document_id: String,
    pub source_id: String,
    pub title: String,
    pub content: String,
    pub heading_path: Option<String>,
    pub page: Option<u32>,
    pub sheet: Option<String>,
    pub chunk_index: i64,
    /// The document's metadata, as stored (JSON text; parsed only for the results kept).
    pub metadata: String,
}

/// Loads result chunks by key, keeping only live chunks of `workspace` (a chunk deleted or
/// replaced after the index saw it is dropped here).
pub fn hydrate(c: &Connection, workspace: &str, keys: &[u64]) -> Result<Vec<Hydrated>> {
    let mut out = Vec::with_capacity(keys.len());
    for part in keys.chunks(500) {
        let marks = vec!["?"; part.len()].join(",");
        let sql = format!(
            "SELECT c.rowid, c.id, c.document_id, d.source_id, d.title, c.content, c.heading_path, c.page, c.sheet, c.chunk_index, d.metadata
             FROM chunks c JOIN documents d ON d.id = c.document_id
             WHERE +c.workspace_id = ? AND c.revision = d.indexed_revision AND c.rowid IN ({marks})"
        );
        let mut args: Vec<SqlValue> = vec![SqlValue::Text(workspace.to_string())];
        args.extend(part.iter().map(|k| SqlValue::Integer(*k as i64)));
        let mut stmt = c.prepare_cached(&sql)?;
        let rows = stmt.query_map(params_from_iter(args.iter()), |r| {
            Ok(Hydrated {
                key: r.get::<_, i64>(0)? as u64,
                chunk_id: r.get(1)?,
                document_id: r.get(2)?,
                source_id: r.get(3)?,
                title: r.get(4)?,
                content: r.get(5)?,
                heading_path: r.get(6)?,
                page: r.get(7)?,
                sheet: r.get(8)?,
                chunk_index: r.get(9)?,
                metadata: r.get(10)?,
            })
        })?;
        for r in rows {
            out.push(r?);
        }
    }
    Ok(out)
}

// -- search history

pub struct SearchRecord<'a> {
    pub id: &'a str,
    pub workspace_id: &'a str,
    pub actor_type: &'a str,
    pub actor_id: Option<&'a str>,
    pub query: &'a str,
    pub metadata_filter: Option<&'a Value>,
    pub mode: &'a str,
    pub results: &'a Value,
    pub result_count: usize,
    pub took_ms: f64,
    pub created_at: &'a str,
}

pub fn insert_search(tx: &Tx, s: &SearchRecord) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO searches (id, workspace_id, actor_type, actor_id, query, metadata_filter, mode, results, result_count, took_ms, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?
    .execute(
        params![
            s.id,
            s.workspace_id,
            s.actor_type,
            s.actor_id,
            s.query,
            s.metadata_filter.map(|v| v.to_string()),
            s.mode,
            s.results.to_string(),
            s.result_count as i64,
            s.took_ms,
            s.created_at
        ],
    )?;
    Ok(())
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    pub search_id: String,
    pub query: String,
    pub mode: String,
    pub metadata_filter: Option<Value>,
    pub created_at: String,
    pub result_count: i64,
    pub preview_top_titles: Vec<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryPage {
    pub searches: Vec<HistoryEntry>,
    pub total: i64,
    pub next_cursor: Option<String>,
    pub has_more: bool,
}

/// Newest first; `before` is the (created_at, id) of the last entry of the previous page.
pub fn history_page(
    c: &Connection,
    workspace: &str,
    before: Option<(String, String)>,
    limit: usize,
) -> Result<(Vec<HistoryEntry>, i64, bool)> {
    let total: i64 = c.query_row("SELECT count(*) FROM searches WHERE workspace_id = ?1", [workspace], |r| r.get(0))?;
    let (cond, args): (&str, Vec<SqlValue>) = match &before {
        Some((t, id)) => (
            "AND (created_at < ?2 OR (created_at = ?2 AND id < ?3))",
            vec![SqlValue::Text(workspace.into()), SqlValue::Text(t.clone()), SqlValue::Text(id.clone())],
        ),
        None => ("", vec![SqlValue::Text(workspace.into())]),
    };
    let sql = format!(
        "SELECT id, query, mode, metadata_filter, created_at, result_count, results FROM searches
         WHERE workspace_id = ?1 {cond} ORDER BY created_at DESC, id DESC LIMIT {}",
        limit + 1
    );
    let mut stmt = c.prepare(&sql)?;
    let rows = stmt.query_map(params_from_iter(args.iter()), |r| {
        let filter: Option<String> = r.get(3)?;
        let results: String = r.get(6)?;
        let titles: Vec<String> = serde_json::from_str::<Value>(&results)
            .ok()
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|h| h.get("title").and_then(|t| t.as_str()).map(|s| s.to_string()))
            .take(3)
            .collect();
        Ok(HistoryEntry {
            search_id: r.get(0)?,
            query: r.get(1)?,
            mode: r.get(2)?,
            metadata_filter: filter.and_then(|f| serde_json::from_str(&f).ok()),
            created_at: r.get(4)?,
            result_count: r.get(5)?,
            preview_top_titles: titles,
        })
    })?;
    let mut entries: Vec<HistoryEntry> = rows.collect::<rusqlite::Result<_>>()?;
    let more = entries.len() > limit;
    entries.truncate(limit);
    Ok((entries, total, more))
}

/// A saved search.
pub struct StoredSearch {
    pub query: String,
    pub mode: String,
    pub metadata_filter: Option<Value>,
    pub results: Value,
    pub created_at: String,
    pub took_ms: f64,
}

pub fn search_record(c: &Connection, workspace: &str, id: &str) -> Result<Option<StoredSearch>> {
    Ok(c.query_row(
        "SELECT query, mode, metadata_filter, results, created_at, took_ms FROM searches WHERE workspace_id = ?1 AND id = ?2",
        params![workspace, id],
        |r| {
            let f: Option<String> = r.get(2)?;
            let res: String = r.get(3)?;
            Ok(StoredSearch {
                query: r.get(0)?,
                mode: r.get(1)?,
                metadata_filter: f.and_then(|f| serde_json::from_str(&f).ok()),
                results: serde_json::from_str(&res).unwrap_or(Value::Null),
                created_at: r.get(4)?,
                took_ms: r.get(5)?,
            })
        },
    )
    .optional()?)
}

/// (document id, metadata) of the workspace's searchable documents, optionally of some sources.
pub fn documents_metadata(
    c: &Connection,
    workspace: &str,
    sources: Option<&[String]>,
) -> Result<Vec<(String, DocumentMeta)>> {
    let mut sql =
        String::from("SELECT id, metadata FROM documents WHERE workspace_id = ? AND indexed_revision IS NOT NULL");
    let mut args: Vec<SqlValue> = vec![SqlValue::Text(workspace.to_string())];
    if let Some(s) = sources {
        sql.push_str(&format!(" AND source_id IN ({})", vec!["?"; s.len().max(1)].join(",")));
        if s.is_empty() {
            args.push(SqlValue::Null);
        }
        args.extend(s.iter().map(|x| SqlValue::Text(x.clone())));
    }
    let mut stmt = c.prepare(&sql)?;
    let rows = stmt.query_map(params_from_iter(args.iter()), |r| {
        let m: String = r.get(1)?;
        Ok((r.get(0)?, serde_json::from_str(&m).unwrap_or(Value::Object(Default::default()))))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// (key, content) of the chunks `keys` that exist: relevance feedback reads a chunk here when the
/// text index does not show it yet (the vector index can find a chunk before the text index's
/// reader reloads).
pub fn chunk_contents_by_key(c: &Connection, keys: &[u64]) -> Result<Vec<(u64, String)>> {
    let marks = vec!["?"; keys.len().max(1)].join(",");
    let sql = format!("SELECT rowid, content FROM chunks WHERE rowid IN ({marks})");
    let mut stmt = c.prepare_cached(&sql)?;
    let args: Vec<i64> = if keys.is_empty() { vec![-1] } else { keys.iter().map(|k| *k as i64).collect() };
    let rows = stmt.query_map(params_from_iter(args.iter()), |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}
