//! SQL behind search: the index change log, live chunks, hydration of results, search history.

use std::collections::HashSet;

use rusqlite::{OptionalExtension, params, params_from_iter};
use serde::Serialize;
use serde_json::Value;

use crate::documents::DocumentMeta;
use crate::error::Result;
use crate::storage::{Conn, Row, SqlValue, Tx};

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

/// [`database_id`] without recording one (a read-only look).
pub fn database_id_of(c: &Conn) -> Result<Option<i64>> {
    Ok(c.query_row("SELECT applied_seq FROM index_state WHERE name = 'database'", [], |r| r.get(0)).optional()?)
}

/// The generation of each index (text, vectors) as SQLite knows it: a random id chosen when the
/// index is rebuilt from scratch and recorded here once that rebuild is complete. An index whose
/// saved position names another generation (a copy from before a rebuild, or a rebuild that did
/// not finish) is not current. 0 when none was recorded (an index from before generations).
pub fn generations(c: &Conn, scope: &str) -> Result<(i64, i64)> {
    let one = |name: &str| -> Result<i64> {
        Ok(c.query_row("SELECT applied_seq FROM index_state WHERE name = ?1", [name], |r| r.get(0))
            .optional()?
            .unwrap_or(0))
    };
    Ok((one(&format!("{GEN_TEXT}{scope}"))?, one(&format!("{GEN_VECTORS}{scope}"))?))
}

const GEN_TEXT: &str = "generation.text";
const GEN_VECTORS: &str = "generation.vectors";

/// Records a completed rebuild's generation (`text` or vectors). `scope` is empty for the one
/// node of a SQLite database, `.<node id>` for each node on PostgreSQL (each keeps its own index).
pub fn set_generation(tx: &Tx, text: bool, generation: i64, now: &str, scope: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO index_state (name, applied_seq, updated_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (name) DO UPDATE SET applied_seq = excluded.applied_seq, updated_at = excluded.updated_at",
        params![format!("{}{scope}", if text { GEN_TEXT } else { GEN_VECTORS }), generation, now],
    )?;
    Ok(())
}

/// Records the index position a node on PostgreSQL has durably applied (the log below every
/// node's position is pruned).
pub fn record_position(tx: &Tx, node: &str, seq: i64, now: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO index_state (name, applied_seq, updated_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (name) DO UPDATE SET applied_seq = excluded.applied_seq, updated_at = excluded.updated_at",
        params![format!("node.{node}"), seq, now],
    )?;
    Ok(())
}

/// Prunes the log below the lowest position a node recorded since `since`; positions older than
/// that are forgotten (such a node rebuilds when it comes back). Returns the ops removed.
pub fn prune_ops_of_nodes(tx: &Tx, since: &str) -> Result<usize> {
    tx.execute("DELETE FROM index_state WHERE name LIKE 'node.%' AND updated_at < ?1", [since])?;
    Ok(tx.execute(
        "DELETE FROM index_ops WHERE seq <= (SELECT min(applied_seq) FROM index_state WHERE name LIKE 'node.%')",
        [],
    )?)
}

pub fn max_seq(c: &Conn) -> Result<i64> {
    let sql = if c.is_postgres() {
        "SELECT pg_sequence_last_value(pg_get_serial_sequence('index_ops', 'seq')::regclass)"
    } else {
        "SELECT seq FROM sqlite_sequence WHERE name = 'index_ops'"
    };
    Ok(c.query_row(sql, [], |r| r.get::<_, Option<i64>>(0)).optional()?.flatten().unwrap_or(0))
}

pub fn min_seq(c: &Conn) -> Result<Option<i64>> {
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

pub fn ops_after(c: &Conn, seq: i64, limit: usize) -> Result<Vec<Op>> {
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

fn live_row(r: &Row) -> rusqlite::Result<LiveChunk> {
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

pub fn chunks_by_keys(c: &Conn, keys: &[u64]) -> Result<Vec<LiveChunk>> {
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

/// Up to `limit` live chunks after rowid `after`, in rowid order (a background rebuild's batch).
pub fn live_after(c: &Conn, after: u64, limit: usize) -> Result<Vec<LiveChunk>> {
    let mut stmt = c.prepare_cached(&format!(
        "SELECT {LIVE_COLS} FROM chunks c JOIN documents d ON d.id = c.document_id
         WHERE c.rowid > ?1 AND c.revision = d.indexed_revision AND c.embedding IS NOT NULL
         ORDER BY c.rowid LIMIT ?2"
    ))?;
    let rows = stmt.query_map(params![after as i64, limit as i64], live_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// [`live_after`] and the last op issued, read in one transaction: the batch is the database as
/// of that op.
pub fn live_batch(c: &Conn, after: u64, limit: usize) -> Result<(i64, Vec<LiveChunk>)> {
    c.snapshot(|c| Ok((max_seq(c)?, live_after(c, after, limit)?)))
}

/// The key and workspace of every live chunk (what `steward verify` expects in the indexes).
pub fn live_keys(c: &Conn) -> Result<Vec<(u64, String)>> {
    let mut stmt = c.prepare(
        "SELECT c.rowid, c.workspace_id FROM chunks c JOIN documents d ON d.id = c.document_id
         WHERE c.revision = d.indexed_revision AND c.embedding IS NOT NULL ORDER BY c.rowid",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Calls `f` for every live chunk (of a document's indexed revision, embedded) of one workspace.
pub fn for_each_live_of(c: &Conn, ws: &str, mut f: impl FnMut(LiveChunk) -> Result<()>) -> Result<()> {
    let mut stmt = c.prepare(&format!(
        "SELECT {LIVE_COLS} FROM chunks c JOIN documents d ON d.id = c.document_id
         WHERE c.workspace_id = ?1 AND c.revision = d.indexed_revision AND c.embedding IS NOT NULL ORDER BY c.rowid"
    ))?;
    let mut rows = stmt.query([ws])?;
    while let Some(r) = rows.next()? {
        f(live_row(&r)?)?;
    }
    Ok(())
}

pub fn live_count(c: &Conn) -> Result<i64> {
    Ok(c.query_row(
        "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.revision = d.indexed_revision AND c.embedding IS NOT NULL",
        [],
        |r| r.get(0),
    )?)
}

/// Keys of the live chunks of `documents`.
pub fn live_keys_of_documents(c: &Conn, workspace: &str, documents: &HashSet<String>) -> Result<HashSet<u64>> {
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
/// The document of each live chunk among `keys` (chunks deleted or replaced since they were
/// indexed are left out).
pub fn documents_of(c: &Conn, workspace: &str, keys: &[u64]) -> Result<Vec<(u64, String)>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    // one statement text whatever the number of keys (on PostgreSQL: prepared and planned once)
    let mut stmt = c.prepare_cached(
        "SELECT c.rowid, c.document_id FROM chunks c JOIN documents d ON d.id = c.document_id
         WHERE +c.workspace_id = ?1 AND c.revision = d.indexed_revision
           AND c.rowid IN (SELECT CAST(value AS BIGINT) FROM json_each(?2))",
    )?;
    let rows = stmt.query_map(params![workspace, json_list(keys)], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// `keys` as a JSON array, for `IN (SELECT value FROM json_each(?))`.
fn json_list<T: Serialize>(keys: &[T]) -> String {
    serde_json::to_string(keys).unwrap_or_else(|_| "[]".into())
}

pub fn hydrate(c: &Conn, workspace: &str, keys: &[u64]) -> Result<Vec<Hydrated>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut stmt = c.prepare_cached(
        "SELECT c.rowid, c.id, c.document_id, d.source_id, d.title, c.content, c.heading_path, c.page, c.sheet, c.chunk_index, d.metadata
         FROM chunks c JOIN documents d ON d.id = c.document_id
         WHERE +c.workspace_id = ?1 AND c.revision = d.indexed_revision
           AND c.rowid IN (SELECT CAST(value AS BIGINT) FROM json_each(?2))",
    )?;
    let rows = stmt.query_map(params![workspace, json_list(keys)], hydrated_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
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
    /// The documents whose titles are the preview (compact format; read after the page).
    #[serde(skip)]
    pub top_documents: Vec<String>,
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
    c: &Conn,
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
        let results = serde_json::from_str::<Value>(&results).unwrap_or(Value::Null);
        // the older format kept the titles; the compact one names the documents (titles read below)
        let titles: Vec<String> = results
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|h| h.get("title").and_then(|t| t.as_str()).map(|s| s.to_string()))
            .take(3)
            .collect();
        let top_documents = if titles.is_empty() {
            super::history::document_ids(&results).into_iter().take(3).collect()
        } else {
            Vec::new()
        };
        Ok(HistoryEntry {
            search_id: r.get(0)?,
            query: r.get(1)?,
            mode: r.get(2)?,
            metadata_filter: filter.and_then(|f| serde_json::from_str(&f).ok()),
            created_at: r.get(4)?,
            result_count: r.get(5)?,
            preview_top_titles: titles,
            top_documents,
        })
    })?;
    let mut entries: Vec<HistoryEntry> = rows.collect::<rusqlite::Result<_>>()?;
    let more = entries.len() > limit;
    entries.truncate(limit);
    let ids: Vec<String> = entries.iter().flat_map(|e| e.top_documents.iter().cloned()).collect();
    if !ids.is_empty() {
        let titles = titles_of(c, workspace, &ids)?;
        for e in &mut entries {
            let docs = std::mem::take(&mut e.top_documents);
            e.preview_top_titles.extend(docs.iter().filter_map(|d| titles.get(d).cloned()));
        }
    }
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

pub fn search_record(c: &Conn, workspace: &str, id: &str) -> Result<Option<StoredSearch>> {
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
    c: &Conn,
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
pub fn chunk_contents_by_key(c: &Conn, keys: &[u64]) -> Result<Vec<(u64, String)>> {
    let marks = vec!["?"; keys.len().max(1)].join(",");
    let sql = format!("SELECT rowid, content FROM chunks WHERE rowid IN ({marks})");
    let mut stmt = c.prepare_cached(&sql)?;
    let args: Vec<i64> = if keys.is_empty() { vec![-1] } else { keys.iter().map(|k| *k as i64).collect() };
    let rows = stmt.query_map(params_from_iter(args.iter()), |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

// -- the workspaces' knowledge index settings (`search_workspaces`)

/// A workspace's knowledge index settings as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct SpaceRow {
    pub workspace_id: String,
    pub history_days: i64,
    pub history_max: i64,
    pub language: String,
    pub model: Option<String>,
    pub space: String,
    pub target_space: Option<String>,
    pub reembed_total: i64,
    pub reembed_done: i64,
    pub reembed_started_at: Option<String>,
    pub updated_at: String,
}

const SPACE_COLS: &str = "workspace_id, language, model, space, target_space, reembed_total, reembed_done, reembed_started_at, updated_at, history_days, history_max";

fn space_row(r: &Row) -> rusqlite::Result<SpaceRow> {
    Ok(SpaceRow {
        workspace_id: r.get(0)?,
        language: r.get(1)?,
        model: r.get(2)?,
        space: r.get(3)?,
        target_space: r.get(4)?,
        reembed_total: r.get(5)?,
        reembed_done: r.get(6)?,
        reembed_started_at: r.get(7)?,
        updated_at: r.get(8)?,
        history_days: r.get(9)?,
        history_max: r.get(10)?,
    })
}

pub fn space_rows(c: &Conn) -> Result<Vec<SpaceRow>> {
    let mut st = c.prepare(&format!("SELECT {SPACE_COLS} FROM search_workspaces ORDER BY workspace_id"))?;
    Ok(st.query_map([], space_row)?.collect::<rusqlite::Result<Vec<_>>>()?)
}

pub fn space_row_of(c: &Conn, ws: &str) -> Result<Option<SpaceRow>> {
    Ok(c.query_row(&format!("SELECT {SPACE_COLS} FROM search_workspaces WHERE workspace_id = ?1"), [ws], space_row)
        .optional()?)
}

/// Inserts a workspace's row unless it has one; returns the row as it is then.
pub fn ensure_space_row(tx: &Tx, ws: &str, space: &str, now: &str) -> Result<SpaceRow> {
    tx.execute(
        "INSERT INTO search_workspaces (workspace_id, space, updated_at) VALUES (?1, ?2, ?3) ON CONFLICT (workspace_id) DO NOTHING",
        params![ws, space, now],
    )?;
    space_row_of(tx, ws)?.ok_or_else(|| crate::error::Error::not_found("workspace"))
}

pub fn set_language_and_model(tx: &Tx, ws: &str, language: &str, model: Option<&str>, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE search_workspaces SET language = ?2, model = ?3, updated_at = ?4 WHERE workspace_id = ?1",
        params![ws, language, model, now],
    )?;
    Ok(())
}

/// Starts (or retargets) a re-embedding toward `target` with `total` chunks to do.
pub fn set_target(tx: &Tx, ws: &str, target: Option<&str>, total: i64, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE search_workspaces SET target_space = ?2, reembed_total = ?3, reembed_done = 0,
             reembed_started_at = CASE WHEN ?2 IS NULL THEN NULL ELSE ?4 END, updated_at = ?4
         WHERE workspace_id = ?1",
        params![ws, target, total, now],
    )?;
    Ok(())
}

pub fn set_progress(tx: &Tx, ws: &str, done: i64, total: i64) -> Result<()> {
    tx.execute(
        "UPDATE search_workspaces SET reembed_done = ?2, reembed_total = ?3 WHERE workspace_id = ?1",
        params![ws, done, total],
    )?;
    Ok(())
}

/// The re-embedding is complete: `target` is the live space.
pub fn finish_target(tx: &Tx, ws: &str, target: &str, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE search_workspaces SET space = ?2, target_space = NULL, reembed_done = reembed_total, updated_at = ?3
         WHERE workspace_id = ?1",
        params![ws, target, now],
    )?;
    Ok(())
}

/// Vectors keyed by chunk rowid.
pub type KeyedVectors = Vec<(u64, Vec<f32>)>;

/// The live chunks of a workspace with their target-space vectors (`next_embedding`), for the
/// index a re-embedding switches to; chunks without one are reported by key.
pub fn next_vectors(c: &Conn, ws: &str) -> Result<(KeyedVectors, Vec<u64>)> {
    let mut st = c.prepare(
        "SELECT c.rowid, c.next_embedding FROM chunks c JOIN documents d ON d.id = c.document_id
         WHERE c.workspace_id = ?1 AND c.revision = d.indexed_revision AND c.embedding IS NOT NULL ORDER BY c.rowid",
    )?;
    let mut rows = st.query([ws])?;
    let (mut have, mut missing) = (Vec::new(), Vec::new());
    while let Some(r) = rows.next()? {
        let key = r.get::<_, i64>(0)? as u64;
        match r.get::<_, Option<Vec<u8>>>(1)? {
            Some(b) => have.push((key, decode_vector(&b))),
            None => missing.push(key),
        }
    }
    Ok((have, missing))
}

/// The live chunks of one workspace with their vectors (a workspace's index rebuilt alone).
pub fn live_vectors_of(c: &Conn, ws: &str) -> Result<Vec<(u64, Vec<f32>)>> {
    let mut st = c.prepare(
        "SELECT c.rowid, c.embedding FROM chunks c JOIN documents d ON d.id = c.document_id
         WHERE c.workspace_id = ?1 AND c.revision = d.indexed_revision AND c.embedding IS NOT NULL ORDER BY c.rowid",
    )?;
    let rows = st.query_map([ws], |r| Ok((r.get::<_, i64>(0)? as u64, decode_vector(&r.get::<_, Vec<u8>>(1)?))))?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

pub fn set_history_retention(tx: &Tx, ws: &str, days: i64, max: i64, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE search_workspaces SET history_days = ?2, history_max = ?3, updated_at = ?4 WHERE workspace_id = ?1",
        params![ws, days, max, now],
    )?;
    Ok(())
}

/// Deletes a workspace's searches made before `cutoff`, and all but the newest `max`; returns how
/// many went.
pub fn delete_old_searches(tx: &Tx, ws: &str, cutoff: &str, max: i64) -> Result<usize> {
    let old = tx.execute("DELETE FROM searches WHERE workspace_id = ?1 AND created_at < ?2", params![ws, cutoff])?;
    let over = tx.execute(
        "DELETE FROM searches WHERE workspace_id = ?1 AND id IN (
             SELECT id FROM searches WHERE workspace_id = ?1 ORDER BY created_at DESC, id DESC LIMIT -1 OFFSET ?2)",
        params![ws, max],
    )?;
    Ok(old + over)
}

/// The chunk index and content hash of chunks `ids` of `ws` that still exist.
pub fn chunk_refs(c: &Conn, ws: &str, ids: &[&str]) -> Result<std::collections::HashMap<String, (i64, String)>> {
    if ids.is_empty() {
        return Ok(Default::default());
    }
    let mut stmt = c.prepare_cached(
        "SELECT id, chunk_index, content_hash FROM chunks WHERE workspace_id = ?1 AND id IN (SELECT value FROM json_each(?2))",
    )?;
    let rows = stmt.query_map(params![ws, json_list(ids)], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// A chunk as it is now, with its content hash.
pub struct ChunkNow {
    pub hydrated: Hydrated,
    pub content_hash: String,
}

const NOW_COLS: &str = "c.rowid, c.id, c.document_id, d.source_id, d.title, c.content, c.heading_path, c.page, c.sheet, c.chunk_index, d.metadata, c.content_hash";

fn chunk_now(r: &Row) -> rusqlite::Result<ChunkNow> {
    Ok(ChunkNow { hydrated: hydrated_row(r)?, content_hash: r.get(11)? })
}

/// A chunk's columns in the order of `hydrate` (and the first eleven of `NOW_COLS`).
fn hydrated_row(r: &Row) -> rusqlite::Result<Hydrated> {
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
}

/// The chunk `id` of `ws`, while its document's live revision holds it.
pub fn hydrate_chunk_id(c: &Conn, ws: &str, id: &str) -> Result<Option<ChunkNow>> {
    Ok(c.query_row(
        &format!(
            "SELECT {NOW_COLS} FROM chunks c JOIN documents d ON d.id = c.document_id
             WHERE c.id = ?2 AND c.workspace_id = ?1 AND c.revision = d.indexed_revision"
        ),
        params![ws, id],
        chunk_now,
    )
    .optional()?)
}

/// The live chunk at position `index` of document `doc` (or its last one, when it has fewer now).
pub fn chunk_at(c: &Conn, ws: &str, doc: &str, index: i64) -> Result<Option<ChunkNow>> {
    Ok(c.query_row(
        &format!(
            "SELECT {NOW_COLS} FROM chunks c JOIN documents d ON d.id = c.document_id
             WHERE c.document_id = ?2 AND c.workspace_id = ?1 AND c.revision = d.indexed_revision AND c.chunk_index <= ?3
             ORDER BY c.chunk_index DESC LIMIT 1"
        ),
        params![ws, doc, index],
        chunk_now,
    )
    .optional()?)
}

/// Titles of documents `ids` of `ws` that still exist.
pub fn titles_of(c: &Conn, ws: &str, ids: &[String]) -> Result<std::collections::HashMap<String, String>> {
    let mut out = std::collections::HashMap::new();
    for part in ids.chunks(500) {
        let marks = vec!["?"; part.len()].join(",");
        let sql = format!("SELECT id, title FROM documents WHERE workspace_id = ? AND id IN ({marks})");
        let mut args: Vec<SqlValue> = vec![SqlValue::Text(ws.to_string())];
        args.extend(part.iter().map(|k| SqlValue::Text(k.clone())));
        let mut stmt = c.prepare_cached(&sql)?;
        for r in stmt.query_map(params_from_iter(args.iter()), |r| Ok((r.get(0)?, r.get(1)?)))? {
            let (id, t): (String, String) = r?;
            out.insert(id, t);
        }
    }
    Ok(out)
}
