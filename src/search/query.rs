//! Hybrid retrieval for the search endpoint and for answers: BM25 and vector candidates fused by
//! weighted reciprocal rank fusion, hydrated from SQLite (only live chunks of the workspace
//! survive), optionally collapsed to the best chunk per document, with highlighted snippets.
//! Every endpoint search is saved with its exact result set for replay.

use std::collections::HashSet;
use std::time::Instant;

use serde::Serialize;
use serde_json::{Value, json};

use super::{Mode, Tuning, filter, fuse, store};
use crate::app::App;
use crate::audit::Actor;
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, Result};
use crate::ids::{WorkspaceId, new_id};

/// What to retrieve.
#[derive(Debug, Clone)]
pub struct Retrieve {
    pub query: String,
    pub filter: Option<filter::Filter>,
    pub source_ids: Option<Vec<String>>,
    pub mode: Mode,
    pub limit: usize,
    /// One result per document (its best chunk).
    pub collapse: bool,
}

/// One retrieved chunk.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hit {
    pub document_id: String,
    pub chunk_id: String,
    pub title: String,
    pub snippet: String,
    /// 1.0 for a chunk ranked first by every retriever used; smaller further down.
    pub score: f32,
    pub metadata: Value,
    pub source_id: String,
    pub heading_path: Option<String>,
    pub page: Option<u32>,
    pub sheet: Option<String>,
    #[serde(skip)]
    pub content: String,
    #[serde(skip)]
    pub lexical_rank: Option<usize>,
    #[serde(skip)]
    pub vector_rank: Option<usize>,
}

/// Document ids allowed by the filter and source scope; `None` when nothing restricts.
fn allowed_documents(app: &App, ws: &WorkspaceId, r: &Retrieve) -> Result<Option<HashSet<String>>> {
    let has_filter = r.filter.as_ref().is_some_and(|f| !f.is_empty());
    if !has_filter && r.source_ids.is_none() {
        return Ok(None);
    }
    let docs = app.db.read(|c| store::documents_metadata(c, &ws.0, r.source_ids.as_deref()))?;
    let empty = serde_json::Map::new();
    Ok(Some(
        docs.into_iter()
            .filter(|(_, meta)| match &r.filter {
                Some(f) => f.matches(meta.as_object().unwrap_or(&empty)),
                None => true,
            })
            .map(|(id, _)| id)
            .collect(),
    ))
}

/// Retrieves with the default tuning.
pub fn retrieve(app: &App, ws: &WorkspaceId, r: &Retrieve) -> Result<Vec<Hit>> {
    retrieve_tuned(app, ws, r, &Tuning::default())
}

pub fn retrieve_tuned(app: &App, ws: &WorkspaceId, r: &Retrieve, t: &Tuning) -> Result<Vec<Hit>> {
    let index = app.search()?;
    if r.query.trim().is_empty() || r.limit == 0 {
        return Ok(Vec::new());
    }
    let allowed = allowed_documents(app, ws, r)?;
    if allowed.as_ref().is_some_and(|a| a.is_empty()) {
        return Ok(Vec::new());
    }
    let allowed_keys = match (&allowed, r.mode) {
        (Some(docs), Mode::Hybrid | Mode::Vector) => {
            Some(app.db.read(|c| store::live_keys_of_documents(c, &ws.0, docs))?)
        }
        _ => None,
    };
    let terms: Vec<(String, f32)> = index.analyzed_terms(&r.query).into_iter().map(|t| (t, 1.0)).collect();
    let query_vector = match r.mode {
        Mode::Bm25 => None,
        _ => Some(app.models.embedder()?.embed_query(&r.query).map_err(Error::internal)?),
    };
    let lexical_pass = |terms: &[(String, f32)]| -> Result<Vec<(u64, f32)>> {
        if r.mode == Mode::Vector {
            Ok(Vec::new())
        } else {
            index.lexical_terms(&ws.0, terms, t.lexical_k, allowed.as_ref(), t.boosts)
        }
    };
    let vector_pass = |q: Option<&Vec<f32>>| -> Result<Vec<(u64, f32)>> {
        let Some(q) = q else { return Ok(Vec::new()) };
        let mut v = index.semantic(&ws.0, q, t.vector_k, allowed_keys.as_ref())?;
        v.retain(|(_, sim)| *sim >= t.min_similarity);
        Ok(v)
    };
    let mut fused = fuse(&lexical_pass(&terms)?, &vector_pass(query_vector.as_ref())?, t);
    if let Some(fb) = t.feedback {
        let fb_keys: Vec<u64> = fused.iter().take(fb.docs).map(|c| c.key).collect();
        if !fb_keys.is_empty() {
            let rows = app.db.read(|c| store::feedback_rows(c, &fb_keys))?;
            let contents: Vec<&str> = rows.iter().map(|(_, c, _)| c.as_str()).collect();
            let expanded = expand_terms(index, &terms, &contents, fb);
            let vecs: Vec<&Vec<f32>> = rows.iter().filter_map(|(_, _, v)| v.as_ref()).collect();
            let moved = query_vector.as_ref().map(|q| rocchio(q, &vecs, fb.vector_weight));
            fused = fuse(&lexical_pass(&expanded)?, &vector_pass(moved.as_ref())?, t);
        }
    }
    let max_score = match (r.mode, t.fusion) {
        (_, super::Fusion::Convex { .. }) => 1.0,
        (Mode::Hybrid, _) => (t.lexical_weight + t.vector_weight) / (t.rrf_k + 1.0),
        (Mode::Bm25, _) => t.lexical_weight / (t.rrf_k + 1.0),
        (Mode::Vector, _) => t.vector_weight / (t.rrf_k + 1.0),
    };
    let want = if r.collapse { (r.limit * 6).max(50) } else { r.limit * 2 };
    let top: Vec<&super::Candidate> = fused.iter().take(want).collect();
    let keys: Vec<u64> = top.iter().map(|c| c.key).collect();
    let mut rows: std::collections::HashMap<u64, store::Hydrated> =
        app.db.read(|c| store::hydrate(c, &ws.0, &keys))?.into_iter().map(|h| (h.key, h)).collect();
    let terms: Vec<String> = terms.into_iter().map(|(t, _)| t).collect();
    let mut seen_docs = HashSet::new();
    let mut out = Vec::new();
    for c in top {
        let Some(h) = rows.remove(&c.key) else { continue }; // deleted or replaced since indexed
        if r.collapse && !seen_docs.insert(h.document_id.clone()) {
            continue;
        }
        out.push(Hit {
            snippet: super::snippet(&h.content, &terms),
            document_id: h.document_id,
            chunk_id: h.chunk_id,
            title: h.title,
            score: (c.score / max_score).min(1.0),
            metadata: h.metadata,
            source_id: h.source_id,
            heading_path: h.heading_path,
            page: h.page,
            sheet: h.sheet,
            content: h.content,
            lexical_rank: c.lexical_rank,
            vector_rank: c.vector_rank,
        });
        if out.len() >= r.limit {
            break;
        }
    }
    Ok(out)
}

/// RM3-style query expansion: the query terms plus the `fb.terms` terms that make up the largest
/// share of the feedback documents, weighted relative to the strongest (numbers and terms of two
/// letters or fewer are left out).
fn expand_terms(
    index: &super::SearchIndex,
    original: &[(String, f32)],
    feedback: &[&str],
    fb: super::Feedback,
) -> Vec<(String, f32)> {
    if fb.terms == 0 || fb.term_weight <= 0.0 {
        return original.to_vec();
    }
    let mut weights: std::collections::HashMap<String, f32> = std::collections::HashMap::new();
    for content in feedback {
        let terms = index.document_terms(content);
        let n = terms.len().max(1) as f32;
        for term in terms {
            if term.len() > 2 && !term.chars().all(|c| c.is_ascii_digit()) {
                *weights.entry(term).or_default() += 1.0 / n;
            }
        }
    }
    let mut expansion: Vec<(String, f32)> =
        weights.into_iter().filter(|(t, _)| !original.iter().any(|(o, _)| o == t)).collect();
    expansion.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or(std::cmp::Ordering::Equal).then(a.0.cmp(&b.0)));
    expansion.truncate(fb.terms);
    let top = expansion.first().map(|e| e.1).unwrap_or(1.0);
    let mut q = original.to_vec();
    q.extend(expansion.into_iter().map(|(t, w)| (t, fb.term_weight * w / top)));
    q
}

/// Rocchio: the query vector moved toward the centroid of the feedback vectors, re-normalized.
fn rocchio(q: &[f32], feedback: &[&Vec<f32>], weight: f32) -> Vec<f32> {
    let mut out = q.to_vec();
    if feedback.is_empty() || weight <= 0.0 {
        return out;
    }
    for v in feedback {
        for (a, x) in out.iter_mut().zip(v.iter()) {
            *a += weight * x / feedback.len() as f32;
        }
    }
    crate::models::embed::normalize(&mut out);
    out
}

/// A search request from the API.
pub struct SearchRequest {
    pub query: String,
    pub metadata_filter: Option<Value>,
    pub mode: Option<Mode>,
    pub limit: Option<usize>,
    pub source_ids: Option<Vec<String>>,
}

pub const MAX_QUERY_CHARS: usize = 2000;

/// `POST /api/v1/document/search`: retrieves, saves the search with its results, returns it.
pub fn search(app: &App, p: &Principal, actor: &Actor, req: SearchRequest) -> Result<Value> {
    p.require(Perm::RetrievalQuery)?;
    let query = req.query.trim().to_string();
    if query.is_empty() {
        return Err(Error::invalid_field("query", "query must not be empty"));
    }
    if query.chars().count() > MAX_QUERY_CHARS {
        return Err(Error::invalid_field("query", format!("query must be at most {MAX_QUERY_CHARS} characters")));
    }
    let limit = req.limit.unwrap_or(10);
    if !(1..=50).contains(&limit) {
        return Err(Error::invalid_field("limit", "limit must be between 1 and 50"));
    }
    let filter = req.metadata_filter.as_ref().map(filter::parse).transpose()?;
    let mode = req.mode.unwrap_or_default();
    let started = Instant::now();
    let hits = retrieve(
        app,
        &p.workspace_id,
        &Retrieve { query: query.clone(), filter, source_ids: req.source_ids.clone(), mode, limit, collapse: true },
    )?;
    let took_ms = started.elapsed().as_secs_f64() * 1000.0;
    let results = serde_json::to_value(&hits)?;
    let id = new_id();
    let now = rfc3339(app.clock.now());
    let mode_s = serde_json::to_value(mode)?.as_str().unwrap_or("hybrid").to_string();
    app.db.write(|tx| {
        store::insert_search(
            tx,
            &store::SearchRecord {
                id: &id,
                workspace_id: &p.workspace_id.0,
                actor_type: actor.kind,
                actor_id: actor.id.as_deref(),
                query: &query,
                metadata_filter: req.metadata_filter.as_ref(),
                mode: &mode_s,
                results: &results,
                result_count: hits.len(),
                took_ms,
                created_at: &now,
            },
        )
    })?;
    Ok(json!({
        "searchId": id,
        "query": query,
        "mode": mode_s,
        "metadataFilter": req.metadata_filter,
        "results": results,
        "resultCount": hits.len(),
        "tookMs": (took_ms * 100.0).round() / 100.0,
        "createdAt": now,
    }))
}

/// Past searches, newest first.
pub fn history(app: &App, p: &Principal, cursor: Option<&str>, limit: usize) -> Result<store::HistoryPage> {
    p.require(Perm::RetrievalQuery)?;
    let before = cursor.map(crate::documents::decode_cursor).transpose()?;
    let (searches, total, more) = app.db.read(|c| store::history_page(c, &p.workspace_id.0, before, limit))?;
    let next_cursor =
        if more { searches.last().map(|s| crate::documents::encode_cursor(&s.created_at, &s.search_id)) } else { None };
    Ok(store::HistoryPage { searches, total, next_cursor, has_more: more })
}

/// One past search with exactly the results it returned then.
pub fn replay(app: &App, p: &Principal, id: &str) -> Result<Value> {
    p.require(Perm::RetrievalQuery)?;
    let s =
        app.db.read(|c| store::search_record(c, &p.workspace_id.0, id))?.ok_or_else(|| Error::not_found("search"))?;
    let count = s.results.as_array().map(|a| a.len()).unwrap_or(0);
    Ok(json!({
        "searchId": id,
        "query": s.query,
        "mode": s.mode,
        "metadataFilter": s.metadata_filter,
        "results": s.results,
        "resultCount": count,
        "tookMs": (s.took_ms * 100.0).round() / 100.0,
        "createdAt": s.created_at,
    }))
}
