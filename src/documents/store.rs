//! SQL for sources, documents and chunks.

use rusqlite::{OptionalExtension, params, params_from_iter};
use serde_json::{Value, json};

use super::enrich::EnrichDoc;
use super::{ChunkFacts, ChunkSummary, Document, DocumentMeta, Source};
use crate::error::Result;
use crate::ids::WorkspaceId;
use crate::storage::{Conn, Later, Row, SqlValue, Tx};

// -- sources

const SOURCE_COLS: &str = "s.id, s.workspace_id, s.kind, s.name, s.external_id, s.builtin, s.config, s.metadata, s.enrichment_override, s.created_at, s.updated_at,
    (SELECT count(*) FROM documents d WHERE d.source_id = s.id)";

fn source_row(r: &Row) -> rusqlite::Result<Source> {
    let config: String = r.get(6)?;
    let metadata: String = r.get(7)?;
    Ok(Source {
        id: r.get(0)?,
        workspace_id: r.get(1)?,
        kind: r.get(2)?,
        name: r.get(3)?,
        external_id: r.get(4)?,
        builtin: r.get(5)?,
        config: serde_json::from_str(&config).unwrap_or(Value::Null),
        metadata: serde_json::from_str(&metadata).unwrap_or(Value::Null),
        enrichment_override: r.get(8)?,
        created_at: r.get(9)?,
        updated_at: r.get(10)?,
        document_count: r.get(11)?,
    })
}

pub fn sources(c: &Conn, ws: &WorkspaceId) -> Result<Vec<Source>> {
    let mut stmt = c.prepare(&format!(
        "SELECT {SOURCE_COLS} FROM sources s WHERE s.workspace_id = ?1 ORDER BY s.created_at, s.id"
    ))?;
    let rows = stmt.query_map([ws], source_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The one source matching `cond` (over `s`), if any.
fn one_source(c: &Conn, cond: &str, p: impl rusqlite::Params) -> Result<Option<Source>> {
    Ok(c.query_row(&format!("SELECT {SOURCE_COLS} FROM sources s WHERE {cond}"), p, source_row).optional()?)
}

pub fn source(c: &Conn, ws: &WorkspaceId, id: &str) -> Result<Option<Source>> {
    one_source(c, "s.workspace_id = ?1 AND s.id = ?2", params![ws, id])
}

/// The id of the workspace's built-in source of `kind` (without the source's document count).
pub fn builtin_source_id(c: &Conn, ws: &WorkspaceId, kind: &str) -> Result<Option<String>> {
    let sql = "SELECT id FROM sources WHERE workspace_id = ?1 AND kind = ?2 AND builtin = 1";
    Ok(c.query_row(sql, params![ws, kind], |r| r.get(0)).optional()?)
}

/// The source of `kind` with this external id (a website source's canonical start URL).
pub fn source_by_external_id(c: &Conn, ws: &WorkspaceId, kind: &str, external: &str) -> Result<Option<Source>> {
    one_source(c, "s.workspace_id = ?1 AND s.kind = ?2 AND s.external_id = ?3", params![ws, kind, external])
}

pub fn insert_source(tx: &Tx, s: &Source) -> Result<()> {
    tx.execute(
        "INSERT INTO sources (id, workspace_id, kind, name, external_id, builtin, config, metadata, enrichment_override, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        params![
            s.id,
            s.workspace_id,
            s.kind,
            s.name,
            s.external_id,
            s.builtin,
            s.config.to_string(),
            s.metadata.to_string(),
            s.enrichment_override,
            s.created_at,
            s.updated_at
        ],
    )?;
    Ok(())
}

pub fn set_source_override(tx: &Tx, id: &str, value: &str, now: &str) -> Result<()> {
    tx.execute("UPDATE sources SET enrichment_override = ?2, updated_at = ?3 WHERE id = ?1", params![id, value, now])?;
    Ok(())
}

pub fn set_source_config(tx: &Tx, id: &str, config: &Value, now: &str) -> Result<()> {
    tx.execute("UPDATE sources SET config = ?2, updated_at = ?3 WHERE id = ?1", params![id, config.to_string(), now])?;
    Ok(())
}

pub fn delete_source(tx: &Tx, id: &str) -> Result<()> {
    tx.execute("DELETE FROM sources WHERE id = ?1", [id])?;
    Ok(())
}

// -- documents

pub const DOC_COLS: &str = "d.id, d.workspace_id, d.source_id, d.title, d.external_document_id, d.status, d.failure_reason, d.revision,
    d.indexed_revision, d.metadata, d.source_kind, d.content_hash, d.content_size_bytes, d.blob_sha256, d.source_filename,
    d.source_mime_type, d.source_size_bytes, d.detected_format, d.chunk_count, d.enrichment, d.processed_at, d.created_at,
    d.updated_at, d.metered_bytes, s.kind, s.name, s.external_id";

pub fn doc_row(r: &Row) -> rusqlite::Result<Document> {
    let metadata: String = r.get(9)?;
    let enrichment: Option<String> = r.get(19)?;
    Ok(Document {
        id: r.get(0)?,
        workspace_id: r.get(1)?,
        source_id: r.get(2)?,
        title: r.get(3)?,
        external_document_id: r.get(4)?,
        status: r.get(5)?,
        failure_reason: r.get(6)?,
        revision: r.get(7)?,
        indexed_revision: r.get(8)?,
        metadata: serde_json::from_str(&metadata).unwrap_or(Value::Object(Default::default())),
        source_kind: r.get(10)?,
        content_hash: r.get(11)?,
        content_size_bytes: r.get(12)?,
        blob_sha256: r.get(13)?,
        source_filename: r.get(14)?,
        source_mime_type: r.get(15)?,
        source_size_bytes: r.get(16)?,
        detected_format: r.get(17)?,
        chunk_count: r.get(18)?,
        enrichment: enrichment.and_then(|e| serde_json::from_str(&e).ok()),
        processed_at: r.get(20)?,
        created_at: r.get(21)?,
        updated_at: r.get(22)?,
        metered_bytes: r.get(23)?,
        source_type: r.get(24)?,
        source_name: r.get(25)?,
        source_external_id: r.get(26)?,
        content: None,
    })
}

const DOC_FROM: &str = "FROM documents d JOIN sources s ON s.id = d.source_id";

/// The one document matching `cond` (over `d`), if any.
fn one_document(c: &Conn, cond: &str, p: impl rusqlite::Params) -> Result<Option<Document>> {
    Ok(c.query_row(&format!("SELECT {DOC_COLS} {DOC_FROM} WHERE {cond}"), p, doc_row).optional()?)
}

pub fn document(c: &Conn, ws: &WorkspaceId, id: &str) -> Result<Option<Document>> {
    one_document(c, "d.workspace_id = ?1 AND d.id = ?2", params![ws, id])
}

/// [`document`], read with the transaction's next request or commit ([`Tx::query_later`]).
pub fn document_later(tx: &Tx, ws: &WorkspaceId, id: &str) -> Result<Later<Option<Document>>> {
    let sql = format!("SELECT {DOC_COLS} {DOC_FROM} WHERE d.workspace_id = ?1 AND d.id = ?2");
    Ok(tx.query_later(&sql, params![ws, id], doc_row)?.map(|rows| rows.into_iter().next()))
}

/// Any workspace's document (for jobs, which carry the id).
pub fn document_any(c: &Conn, id: &str) -> Result<Option<Document>> {
    one_document(c, "d.id = ?1", [id])
}

pub fn content(c: &Conn, id: &str) -> Result<Option<String>> {
    Ok(c.query_row("SELECT content FROM documents WHERE id = ?1", [id], |r| r.get(0)).optional()?.flatten())
}

pub fn by_external_id(c: &Conn, ws: &WorkspaceId, source: &str, external: &str) -> Result<Option<Document>> {
    one_document(
        c,
        "d.workspace_id = ?1 AND d.source_id = ?2 AND d.external_document_id = ?3",
        params![ws, source, external],
    )
}

pub struct NewDocRow<'a> {
    pub id: &'a str,
    pub workspace_id: &'a WorkspaceId,
    pub source_id: &'a str,
    pub title: &'a str,
    pub external_document_id: Option<&'a str>,
    pub metadata: &'a Value,
    pub source_kind: &'a str,
    pub content: Option<&'a str>,
    pub content_hash: Option<&'a str>,
    pub content_size_bytes: i64,
    pub blob_sha256: Option<&'a str>,
    pub source_filename: Option<&'a str>,
    pub source_mime_type: Option<&'a str>,
    pub source_size_bytes: Option<i64>,
    pub detected_format: Option<&'a str>,
    pub now: &'a str,
}

pub fn insert_document(tx: &Tx, d: &NewDocRow) -> Result<()> {
    tx.execute_deferred(
        "INSERT INTO documents (id, workspace_id, source_id, title, external_document_id, status, revision, metadata, source_kind,
            content, content_hash, content_size_bytes, blob_sha256, source_filename, source_mime_type, source_size_bytes, detected_format,
            created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, 'queued', 1, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?16)",
        params![
            d.id,
            d.workspace_id,
            d.source_id,
            d.title,
            d.external_document_id,
            d.metadata.to_string(),
            d.source_kind,
            d.content,
            d.content_hash,
            d.content_size_bytes,
            d.blob_sha256,
            d.source_filename,
            d.source_mime_type,
            d.source_size_bytes,
            d.detected_format,
            d.now
        ],
    )?;
    Ok(())
}

/// Replaces content and/or title/metadata and queues a new revision; returns it.
#[allow(clippy::too_many_arguments)]
pub fn update_document(
    tx: &Tx,
    id: &str,
    title: &str,
    metadata: &DocumentMeta,
    content: Option<(&str, &str, i64)>,
    make_inline: bool,
    now: &str,
) -> Result<i64> {
    if let Some((text, hash, size)) = content {
        tx.execute(
            "UPDATE documents SET content = ?2, content_hash = ?3, content_size_bytes = ?4 WHERE id = ?1",
            params![id, text, hash, size],
        )?;
    }
    if make_inline {
        tx.execute(
            "UPDATE documents SET source_kind = 'inline_text', blob_sha256 = NULL, source_filename = NULL, source_mime_type = NULL,
             source_size_bytes = NULL, detected_format = 'text' WHERE id = ?1",
            [id],
        )?;
    }
    Ok(tx.query_row(
        "UPDATE documents SET title = ?2, metadata = ?3, revision = revision + 1, status = 'queued', failure_reason = NULL, updated_at = ?4
         WHERE id = ?1 RETURNING revision",
        params![id, title, metadata.to_string(), now],
        |r| r.get(0),
    )?)
}

/// Puts the document back in the queue with a new revision (reprocess).
pub fn bump_revision(tx: &Tx, id: &str, now: &str) -> Result<i64> {
    Ok(tx.query_row(
        "UPDATE documents SET revision = revision + 1, status = 'queued', failure_reason = NULL, updated_at = ?2 WHERE id = ?1 RETURNING revision",
        params![id, now],
        |r| r.get(0),
    )?)
}

pub fn delete_document(tx: &Tx, id: &str) -> Result<()> {
    tx.execute("DELETE FROM documents WHERE id = ?1", [id])?;
    Ok(())
}

/// Every document that refers to a stored original, with its SHA-256.
pub fn blob_references(c: &Conn) -> Result<Vec<(String, String)>> {
    let sql = "SELECT id, blob_sha256 FROM documents WHERE blob_sha256 IS NOT NULL ORDER BY blob_sha256, id";
    Ok(c.prepare(sql)?.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<_>>()?)
}

pub fn blob_in_use(c: &Conn, sha: &str) -> Result<bool> {
    Ok(c.query_row("SELECT 1 FROM documents WHERE blob_sha256 = ?1 LIMIT 1", [sha], |_| Ok(true))
        .optional()?
        .unwrap_or(false))
}

/// Marks processing started if the revision is current; false when a newer revision exists.
pub fn mark_processing(tx: &Tx, id: &str, revision: i64, now: &str) -> Result<bool> {
    Ok(tx.execute(
        "UPDATE documents SET status = 'processing', updated_at = ?3 WHERE id = ?1 AND revision = ?2 AND status IN ('queued', 'processing')",
        params![id, revision, now],
    )? == 1)
}

pub fn mark_failed(tx: &Tx, id: &str, revision: i64, reason: &str, now: &str) -> Result<bool> {
    Ok(tx.execute(
        "UPDATE documents SET status = 'failed', failure_reason = ?3, processed_at = ?4, updated_at = ?4 WHERE id = ?1 AND revision = ?2",
        params![id, revision, reason, now],
    )? == 1)
}

pub fn set_extracted(tx: &Tx, id: &str, text: &str, hash: &str, format: &str) -> Result<()> {
    tx.execute(
        "UPDATE documents SET content = ?2, content_hash = ?3, content_size_bytes = ?4, detected_format = ?5 WHERE id = ?1",
        params![id, text, hash, text.len() as i64, format],
    )?;
    Ok(())
}

/// Filters for listing documents.
#[derive(Debug, Default, Clone)]
pub struct ListFilter {
    pub source_id: Option<String>,
    pub status: Option<String>,
    /// Case-insensitive text the title or the source file name contains.
    pub title: Option<String>,
    /// (created_at, id) of the last document of the previous page.
    pub before: Option<(String, String)>,
    pub limit: usize,
}

pub fn list_documents(c: &Conn, ws: &WorkspaceId, f: &ListFilter) -> Result<(Vec<Document>, i64, bool)> {
    let mut cond = String::from("d.workspace_id = ?");
    let mut args: Vec<SqlValue> = vec![SqlValue::Text(ws.0.clone())];
    if let Some(s) = &f.source_id {
        cond.push_str(" AND d.source_id = ?");
        args.push(SqlValue::Text(s.clone()));
    }
    if let Some(s) = &f.status {
        cond.push_str(" AND d.status = ?");
        args.push(SqlValue::Text(s.clone()));
    }
    if let Some(t) = &f.title {
        cond.push_str(
            " AND (instr(lower(d.title), lower(?)) > 0 OR instr(lower(coalesce(d.source_filename, '')), lower(?)) > 0)",
        );
        args.push(SqlValue::Text(t.clone()));
        args.push(SqlValue::Text(t.clone()));
    }
    let total: i64 =
        c.query_row(&format!("SELECT count(*) FROM documents d WHERE {cond}"), params_from_iter(args.iter()), |r| {
            r.get(0)
        })?;
    if let Some((t, id)) = &f.before {
        cond.push_str(" AND (d.created_at < ? OR (d.created_at = ? AND d.id < ?))");
        args.push(SqlValue::Text(t.clone()));
        args.push(SqlValue::Text(t.clone()));
        args.push(SqlValue::Text(id.clone()));
    }
    let order = "ORDER BY d.created_at DESC, d.id DESC";
    let mut stmt = c.prepare(&format!("SELECT {DOC_COLS} {DOC_FROM} WHERE {cond} {order} LIMIT {}", f.limit + 1))?;
    let rows = stmt.query_map(params_from_iter(args.iter()), doc_row)?;
    let mut docs: Vec<Document> = rows.collect::<rusqlite::Result<_>>()?;
    let more = docs.len() > f.limit;
    docs.truncate(f.limit);
    Ok((docs, total, more))
}

/// How many ready documents the workspace has (in `sources` when given), and the titles of the
/// newest `limit` of them.
pub fn ready_titles(
    c: &Conn,
    ws: &WorkspaceId,
    sources: Option<&[String]>,
    limit: usize,
) -> Result<(i64, Vec<String>)> {
    let scope = sources.map(|s| serde_json::to_string(s).unwrap_or_default());
    let filter =
        "workspace_id = ?1 AND status = 'ready' AND (?2 IS NULL OR source_id IN (SELECT value FROM json_each(?2)))";
    let n: i64 =
        c.query_row(&format!("SELECT count(*) FROM documents WHERE {filter}"), rusqlite::params![ws, scope], |r| {
            r.get(0)
        })?;
    let mut st = c.prepare(&format!("SELECT title FROM documents WHERE {filter} ORDER BY created_at DESC LIMIT ?3"))?;
    let titles = st
        .query_map(rusqlite::params![ws, scope, limit as i64], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok((n, titles))
}

/// (documents, ready, queued+processing, failed) in the workspace.
pub fn counts(c: &Conn, ws: &WorkspaceId) -> Result<(i64, i64, i64, i64)> {
    Ok(c.query_row(
        "SELECT count(*), coalesce(sum(status = 'ready'), 0), coalesce(sum(status IN ('queued', 'processing')), 0), coalesce(sum(status = 'failed'), 0)
         FROM documents WHERE workspace_id = ?1",
        [ws],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )?)
}

/// (id, status) of documents in a source, or in the whole workspace.
pub fn ids_and_status(c: &Conn, ws: &WorkspaceId, source: Option<&str>) -> Result<Vec<(String, String)>> {
    let mut stmt = c.prepare(
        "SELECT id, status FROM documents WHERE workspace_id = ?1 AND (?2 IS NULL OR source_id = ?2) ORDER BY created_at",
    )?;
    let rows = stmt.query_map(params![ws, source], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

// -- chunks

pub struct NewChunk<'a> {
    pub id: &'a str,
    pub chunk_index: i64,
    pub content: &'a str,
    pub start: i64,
    pub end: i64,
    pub heading_path: Option<&'a str>,
    pub page: Option<i64>,
    pub sheet: Option<&'a str>,
    pub kind: &'a str,
    pub metadata: &'a Value,
    pub content_hash: &'a str,
}

/// Deletes chunks of `doc` that are not live (a previous attempt or a stale revision).
pub fn delete_unlive_chunks(tx: &Tx, doc: &str) -> Result<usize> {
    Ok(tx.execute(
        "DELETE FROM chunks WHERE document_id = ?1 AND revision IS NOT (SELECT indexed_revision FROM documents WHERE id = ?1)",
        [doc],
    )?)
}

/// `coalesce(embedding_space, …)`: a chunk embedded before spaces were recorded is in the legacy one.
const SPACE_OF: &str = "coalesce(embedding_space, 'all-minilm-l6-v2@128')";

/// Inserts a chunk; when a chunk with the same text already has an embedding in the workspace's
/// embedding space `space`, it is copied (no duplicate embedding work). Returns whether an
/// embedding was reused.
pub fn insert_chunk(
    tx: &Tx,
    ws: &WorkspaceId,
    doc: &str,
    revision: i64,
    c: &NewChunk,
    space: &str,
    now: &str,
) -> Result<bool> {
    let cached: Option<Vec<u8>> = tx
        .prepare_cached(&format!(
            "SELECT embedding FROM chunks WHERE workspace_id = ?1 AND content_hash = ?2 AND embedding IS NOT NULL AND {SPACE_OF} = ?3 LIMIT 1"
        ))?
        .query_row(params![ws, c.content_hash, space], |r| r.get(0))
        .optional()?;
    let cached_space = cached.as_ref().map(|_| space);
    tx.prepare_cached(
        "INSERT INTO chunks (id, document_id, workspace_id, revision, chunk_index, content, start_offset, end_offset, heading_path, page, sheet,
            kind, metadata, content_hash, embedding, embedding_space, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
    )?
    .execute(params![
        c.id,
        doc,
        ws,
        revision,
        c.chunk_index,
        c.content,
        c.start,
        c.end,
        c.heading_path,
        c.page,
        c.sheet,
        c.kind,
        c.metadata.to_string(),
        c.content_hash,
        cached,
        cached_space,
        now
    ])?;
    Ok(cached.is_some())
}

/// A chunk waiting for its embedding.
pub struct PendingChunk {
    pub key: i64,
    pub document_id: String,
    pub workspace_id: String,
    pub content: String,
    pub title: String,
}

/// Up to `limit` chunks without an embedding, of documents whose revision they belong to.
pub fn pending_chunks(c: &Conn, limit: usize) -> Result<Vec<PendingChunk>> {
    let mut stmt = c.prepare_cached(
        "SELECT c.rowid, c.document_id, c.workspace_id, c.content, d.title FROM chunks c JOIN documents d ON d.id = c.document_id
         WHERE c.embedding IS NULL AND c.revision = d.revision ORDER BY c.rowid LIMIT ?1",
    )?;
    let rows = stmt.query_map([limit as i64], |r| {
        Ok(PendingChunk {
            key: r.get(0)?,
            document_id: r.get(1)?,
            workspace_id: r.get(2)?,
            content: r.get(3)?,
            title: r.get(4)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Stores a chunk's first embedding, in `space`.
pub fn set_embedding(tx: &Tx, key: i64, embedding: &[u8], tokens: i64, space: &str) -> Result<()> {
    tx.prepare_cached(
        "UPDATE chunks SET embedding = ?2, token_count = ?3, embedding_space = ?4 WHERE rowid = ?1 AND embedding IS NULL",
    )?
    .execute(params![key, embedding, tokens, space])?;
    Ok(())
}

/// Every live chunk's embedded text (the document's title and the chunk, as the pipeline embeds
/// it) with its document's metadata (the retrieval benchmark hands them to the plain pipeline).
pub fn embedded_texts(c: &Conn) -> Result<Vec<(String, String, String)>> {
    let mut stmt = c.prepare(
        "SELECT d.metadata, d.title, c.content FROM chunks c JOIN documents d ON d.id = c.document_id
         WHERE c.revision = d.indexed_revision ORDER BY c.rowid",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

// -- re-embedding a workspace into another space (driven by `search::spaces`)

/// Up to `limit` chunks of `ws` that have an embedding but no vector in the target space yet:
/// (key, document title, content).
pub fn chunks_to_reembed(c: &Conn, ws: &str, limit: usize) -> Result<Vec<(i64, String, String)>> {
    let mut stmt = c.prepare_cached(
        "SELECT c.rowid, d.title, c.content FROM chunks c JOIN documents d ON d.id = c.document_id
         WHERE c.workspace_id = ?1 AND c.embedding IS NOT NULL AND c.next_embedding IS NULL ORDER BY c.rowid LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![ws, limit as i64], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// (chunks of `ws` with a target-space vector, chunks with an embedding).
pub fn reembed_counts(c: &Conn, ws: &str) -> Result<(i64, i64)> {
    Ok(c.query_row(
        "SELECT count(next_embedding), count(*) FROM chunks WHERE workspace_id = ?1 AND embedding IS NOT NULL",
        [ws],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?)
}

pub fn set_next_embedding(tx: &Tx, key: i64, embedding: &[u8]) -> Result<()> {
    tx.prepare_cached("UPDATE chunks SET next_embedding = ?2 WHERE rowid = ?1 AND embedding IS NOT NULL")?
        .execute(params![key, embedding])?;
    Ok(())
}

/// The target-space vectors of `ws` become its embeddings, in `space`.
pub fn promote_next_embeddings(tx: &Tx, ws: &str, space: &str) -> Result<usize> {
    Ok(tx.execute(
        "UPDATE chunks SET embedding = next_embedding, embedding_space = ?2, next_embedding = NULL
         WHERE workspace_id = ?1 AND next_embedding IS NOT NULL",
        params![ws, space],
    )?)
}

/// Drops the target-space vectors of `ws` (a re-embedding abandoned or retargeted).
pub fn clear_next_embeddings(tx: &Tx, ws: &str) -> Result<usize> {
    Ok(tx.execute(
        "UPDATE chunks SET next_embedding = NULL WHERE workspace_id = ?1 AND next_embedding IS NOT NULL",
        [ws],
    )?)
}

/// Documents in `processing` whose current revision has chunks and none of them pending.
pub fn finalizable(c: &Conn, limit: usize) -> Result<Vec<(String, i64)>> {
    let mut stmt = c.prepare_cached(
        "SELECT d.id, d.revision FROM documents d
         WHERE d.status = 'processing'
           AND (d.indexed_revision IS NULL OR d.indexed_revision <> d.revision)
           AND EXISTS (SELECT 1 FROM chunks c WHERE c.document_id = d.id AND c.revision = d.revision)
           AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.document_id = d.id AND c.revision = d.revision AND c.embedding IS NULL)
         LIMIT ?1",
    )?;
    let rows = stmt.query_map([limit as i64], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// What finalizing a revision needs: (workspace, organization, chunk count, embedded-here stats
/// (vectors, bytes, tokens), indexed revision, metered bytes, source kind, source size, content size).
pub struct FinalizeInfo {
    pub workspace_id: WorkspaceId,
    pub organization_id: String,
    pub chunk_count: i64,
    pub embedded_vectors: i64,
    pub embedded_bytes: i64,
    pub embedded_tokens: i64,
    pub indexed_revision: Option<i64>,
    pub metered_bytes: i64,
    pub source_kind: String,
    pub source_size_bytes: Option<i64>,
    pub content_size_bytes: i64,
    /// The model the revision's chunks were embedded with (the space's model).
    pub embedding_model: String,
}

pub fn finalize_info(c: &Conn, doc: &str, revision: i64) -> Result<Option<FinalizeInfo>> {
    Ok(c.query_row(
        "SELECT d.workspace_id, w.organization_id,
            (SELECT count(*) FROM chunks c WHERE c.document_id = d.id AND c.revision = ?2),
            (SELECT count(*) FROM chunks c WHERE c.document_id = d.id AND c.revision = ?2 AND c.token_count IS NOT NULL),
            (SELECT coalesce(sum(length(CAST(c.content AS BLOB))), 0) FROM chunks c WHERE c.document_id = d.id AND c.revision = ?2 AND c.token_count IS NOT NULL),
            (SELECT coalesce(sum(c.token_count), 0) FROM chunks c WHERE c.document_id = d.id AND c.revision = ?2 AND c.token_count IS NOT NULL),
            d.indexed_revision, d.metered_bytes, d.source_kind, d.source_size_bytes, d.content_size_bytes,
            (SELECT coalesce(c.embedding_space, 'all-minilm-l6-v2@128') FROM chunks c WHERE c.document_id = d.id AND c.revision = ?2 LIMIT 1)
         FROM documents d JOIN workspaces w ON w.id = d.workspace_id WHERE d.id = ?1 AND d.revision = ?2",
        params![doc, revision],
        |r| {
            Ok(FinalizeInfo {
                workspace_id: r.get(0)?,
                organization_id: r.get(1)?,
                chunk_count: r.get(2)?,
                embedded_vectors: r.get(3)?,
                embedded_bytes: r.get(4)?,
                embedded_tokens: r.get(5)?,
                indexed_revision: r.get(6)?,
                metered_bytes: r.get(7)?,
                source_kind: r.get(8)?,
                source_size_bytes: r.get(9)?,
                content_size_bytes: r.get(10)?,
                embedding_model: r
                    .get::<_, Option<String>>(11)?
                    .map(|s| s.split('@').next().unwrap_or_default().to_string())
                    .unwrap_or_default(),
            })
        },
    )
    .optional()?)
}

/// Makes `revision` live: older chunks go (their index entries with them, by trigger), the new
/// ones are logged for the indexes.
pub fn go_live(tx: &Tx, doc: &str, revision: i64, chunk_count: i64, metered: i64) -> Result<()> {
    tx.execute("DELETE FROM chunks WHERE document_id = ?1 AND revision <> ?2", params![doc, revision])?;
    crate::search::log_added_chunks(tx, doc, revision)?;
    tx.execute(
        "UPDATE documents SET indexed_revision = ?2, chunk_count = ?3, metered_bytes = ?4 WHERE id = ?1",
        params![doc, revision, chunk_count, metered],
    )?;
    Ok(())
}

/// Marks live documents ready (after the indexes applied their chunks).
pub fn mark_ready(tx: &Tx, docs: &[(String, i64)], now: &str) -> Result<usize> {
    let mut n = 0;
    for (id, rev) in docs {
        n += tx.execute(
            "UPDATE documents SET status = 'ready', failure_reason = NULL, processed_at = ?3, updated_at = ?3
             WHERE id = ?1 AND revision = ?2 AND indexed_revision = ?2 AND status = 'processing'",
            params![id, rev, now],
        )?;
    }
    Ok(n)
}

/// Documents stuck in `processing` whose revision is already live (a crash between indexing and
/// marking them ready).
pub fn live_but_processing(c: &Conn) -> Result<Vec<(String, i64)>> {
    let mut stmt =
        c.prepare("SELECT id, revision FROM documents WHERE status = 'processing' AND indexed_revision = revision")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Chunk summaries of a document's live revision.
pub fn chunk_summaries(c: &Conn, doc: &str) -> Result<Vec<ChunkSummary>> {
    let mut stmt = c.prepare(
        "SELECT c.id, c.chunk_index, c.content, c.start_offset, c.end_offset, c.heading_path, c.page, c.sheet, c.kind, c.token_count
         FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.document_id = ?1 AND c.revision = d.indexed_revision ORDER BY c.chunk_index",
    )?;
    let rows = stmt.query_map([doc], |r| {
        let content: String = r.get(2)?;
        let preview: String = content.chars().take(200).collect();
        Ok(ChunkSummary {
            id: r.get(0)?,
            chunk_index: r.get(1)?,
            content_preview: preview,
            content_length: content.chars().count(),
            start_offset: r.get(3)?,
            end_offset: r.get(4)?,
            heading_path: r.get(5)?,
            page: r.get(6)?,
            sheet: r.get(7)?,
            kind: r.get(8)?,
            token_count: r.get(9)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// (queued, processing, ready, failed, chunks waiting for an embedding) in the workspace.
pub fn progress(c: &Conn, ws: &WorkspaceId) -> Result<(i64, i64, i64, i64, i64)> {
    let (q, p, r, f): (i64, i64, i64, i64) = c.query_row(
        "SELECT coalesce(sum(status = 'queued'), 0), coalesce(sum(status = 'processing'), 0), coalesce(sum(status = 'ready'), 0),
                coalesce(sum(status = 'failed'), 0) FROM documents WHERE workspace_id = ?1",
        [ws],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )?;
    let pending: i64 =
        c.query_row("SELECT count(*) FROM chunks WHERE workspace_id = ?1 AND embedding IS NULL", [ws], |r| r.get(0))?;
    Ok((q, p, r, f, pending))
}

/// Live chunks of the workspace.
pub fn live_chunks(c: &Conn, ws: &WorkspaceId) -> Result<i64> {
    Ok(c.query_row(
        "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.workspace_id = ?1 AND c.revision = d.indexed_revision",
        [ws],
        |r| r.get(0),
    )?)
}

/// The document's current revision (an error when there is no such document).
pub fn current_revision(c: &Conn, id: &str) -> Result<i64> {
    Ok(c.query_row("SELECT revision FROM documents WHERE id = ?1", [id], |r| r.get(0))?)
}

/// A source's enrichment override.
pub fn source_override(c: &Conn, source: &str) -> Result<String> {
    Ok(c.query_row("SELECT enrichment_override FROM sources WHERE id = ?1", [source], |r| r.get(0))?)
}

/// Points an existing document at a newly uploaded original (its text is extracted again).
pub fn set_upload(tx: &Tx, id: &str, u: &UploadRow) -> Result<()> {
    tx.execute(
        "UPDATE documents SET source_kind = 'uploaded_file', blob_sha256 = ?2, source_filename = ?3, source_mime_type = ?4,
         source_size_bytes = ?5, detected_format = ?6, content = NULL WHERE id = ?1",
        params![id, u.sha256, u.filename, u.mime_type, u.size_bytes, u.format],
    )?;
    Ok(())
}

/// The original an upload stored.
pub struct UploadRow<'a> {
    pub sha256: &'a str,
    pub filename: Option<&'a str>,
    pub mime_type: &'a str,
    pub size_bytes: i64,
    pub format: &'a str,
}

// -- enrichment

/// The document's enrichment report (JSON), if any.
pub fn enrichment(c: &Conn, id: &str) -> Result<Option<String>> {
    Ok(c.query_row("SELECT enrichment FROM documents WHERE id = ?1", [id], |r| r.get(0)).optional()?.flatten())
}

pub fn set_enrichment(tx: &Tx, id: &str, report: &str) -> Result<()> {
    tx.execute("UPDATE documents SET enrichment = ?2 WHERE id = ?1", params![id, report])?;
    Ok(())
}

pub fn set_enrichment_and_metadata(tx: &Tx, id: &str, report: &str, metadata: &str) -> Result<()> {
    tx.execute("UPDATE documents SET enrichment = ?2, metadata = ?3 WHERE id = ?1", params![id, report, metadata])?;
    Ok(())
}

/// The document's revision when it is the live one.
pub fn live_revision(c: &Conn, id: &str) -> Result<Option<i64>> {
    Ok(c.query_row("SELECT revision FROM documents WHERE id = ?1 AND indexed_revision = revision", [id], |r| r.get(0))
        .optional()?)
}

/// What enrichment reads of `id` when `rev` is its live, ready revision.
pub fn enrich_doc(c: &Conn, id: &str, rev: i64) -> Result<Option<EnrichDoc>> {
    Ok(c.query_row(
        "SELECT workspace_id, title, coalesce(content, ''), metadata, enrichment, created_at FROM documents
         WHERE id = ?1 AND revision = ?2 AND indexed_revision = ?2 AND status = 'ready'",
        params![id, rev],
        |r| {
            Ok(EnrichDoc {
                workspace_id: WorkspaceId(r.get(0)?),
                title: r.get(1)?,
                content: r.get(2)?,
                metadata: serde_json::from_str(&r.get::<_, String>(3)?).unwrap_or(json!({})),
                enrichment: r
                    .get::<_, Option<String>>(4)?
                    .and_then(|s| serde_json::from_str(&s).ok())
                    .unwrap_or(json!({})),
                created_at: r.get(5)?,
            })
        },
    )
    .optional()?)
}

/// `(rowid, start_offset, end_offset)` of the chunks of `doc`'s `revision`.
pub fn chunk_ranges(c: &Conn, doc: &str, revision: i64) -> Result<Vec<(i64, i64, i64)>> {
    let mut st =
        c.prepare("SELECT rowid, start_offset, end_offset FROM chunks WHERE document_id = ?1 AND revision = ?2")?;
    let rows = st.query_map(params![doc, revision], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Merges `facts` (an object) into the chunk's metadata.
pub fn add_chunk_facts(tx: &Tx, rowid: i64, facts: &ChunkFacts) -> Result<()> {
    let cur: String = tx.query_row("SELECT metadata FROM chunks WHERE rowid = ?1", [rowid], |r| r.get(0))?;
    let mut m: Value = serde_json::from_str(&cur).unwrap_or(json!({}));
    for (k, v) in facts.as_object().into_iter().flatten() {
        m[k] = v.clone();
    }
    tx.execute("UPDATE chunks SET metadata = ?2 WHERE rowid = ?1", params![rowid, m.to_string()])?;
    Ok(())
}
