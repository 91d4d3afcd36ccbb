//! Hybrid retrieval for the search endpoint and for answers: BM25 and vector candidates fused by
//! weighted reciprocal rank fusion, hydrated from SQLite (only live chunks of the workspace
//! survive), optionally collapsed to the best chunk per document, with highlighted snippets.
//! Every endpoint search is saved with its exact result set for replay.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use super::filter::FilterJson;
use super::text::TermCounts;
use super::{FeedbackSource, Mode, Tuning, filter, fuse, store};
use crate::app::App;
use crate::audit::Actor;
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, Result};
use crate::ids::{WorkspaceId, new_id};
use crate::models::embed::Embedder;

/// What to retrieve.
#[derive(Debug, Clone)]
pub struct Retrieve {
    /// The query: embedded for the vector search, and the keyword query unless `lexical_query`.
    pub query: String,
    /// A separate keyword query for BM25 (a rewrite's lexical query).
    pub lexical_query: Option<String>,
    pub filter: Option<filter::Filter>,
    pub source_ids: Option<Vec<String>>,
    pub mode: Mode,
    pub limit: usize,
    /// One result per document (its best chunk).
    pub collapse: bool,
}

/// One retrieved chunk.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
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

impl Hit {
    /// A crawled page's address (its `sourceUrl` metadata), when it is a web address.
    pub fn page_url(&self) -> Option<String> {
        let url = self.metadata["sourceUrl"].as_str()?;
        (url.starts_with("https://") || url.starts_with("http://")).then(|| url.to_string())
    }
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

/// What a retrieval did, for traces and `includeDebug`: candidate counts and stage timings. No
/// query or document text.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetrievalTrace {
    pub mode: Mode,
    /// The embedding space the vector search ran in (empty for BM25 alone).
    pub space: String,
    pub lexical_candidates: usize,
    pub vector_candidates: usize,
    pub feedback_documents: usize,
    pub expansion_terms: usize,
    pub filtered_documents: Option<usize>,
    /// Chunk keys of the final candidates, best first.
    pub result_keys: Vec<u64>,
    /// Milliseconds per stage.
    pub timings_ms: Vec<(String, f64)>,
    /// Index operations in the database this node had not applied when it searched (on
    /// PostgreSQL, what other nodes wrote moments ago): the results are right for what is applied.
    /// Read for a search's debug block only.
    #[serde(skip)]
    pub index_lag: i64,
}

/// Milliseconds, to the microsecond.
fn ms(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0
}

impl RetrievalTrace {
    fn mark(&mut self, stage: &str, since: &mut Instant) {
        let now = Instant::now();
        self.timings_ms.push((stage.to_string(), ms(now - *since)));
        *since = now;
    }
}

/// Retrieves with the default tuning.
pub fn retrieve(app: &App, ws: &WorkspaceId, r: &Retrieve) -> Result<Vec<Hit>> {
    retrieve_tuned(app, ws, r, &Tuning::default())
}

pub fn retrieve_tuned(app: &App, ws: &WorkspaceId, r: &Retrieve, t: &Tuning) -> Result<Vec<Hit>> {
    retrieve_traced(app, ws, r, t).map(|(hits, _)| hits)
}

/// Why one attempt at a retrieval stopped.
enum Stop {
    /// The workspace's vector index switched to another embedding space during the attempt (a
    /// re-embedding finished): the query must be embedded again.
    SpaceChanged,
    Failed(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Failed(e)
    }
}

type Attempt<T> = std::result::Result<T, Stop>;

/// Retrieves and reports what it did.
#[tracing::instrument(name = "search.retrieve", skip_all, fields(workspace = %ws.0))]
pub fn retrieve_traced(app: &App, ws: &WorkspaceId, r: &Retrieve, t: &Tuning) -> Result<(Vec<Hit>, RetrievalTrace)> {
    // a switch of embedding space between embedding the query and searching: once more, in the
    // new space (switches are rare; two in a row cannot happen within one search)
    for _ in 0..2 {
        match attempt(app, ws, r, t) {
            Ok(x) => return Ok(x),
            Err(Stop::Failed(e)) => return Err(e),
            Err(Stop::SpaceChanged) => continue,
        }
    }
    Err(Error::unavailable("the workspace's vector index is switching to a new embedding model; try again"))
}

fn attempt(app: &App, ws: &WorkspaceId, r: &Retrieve, t: &Tuning) -> Attempt<(Vec<Hit>, RetrievalTrace)> {
    let mut trace = RetrievalTrace { mode: r.mode, ..Default::default() };
    let mut clock = Instant::now();
    let index = app.search()?;
    if r.query.trim().is_empty() || r.limit == 0 {
        return Ok((Vec::new(), trace));
    }
    let allowed = allowed_documents(app, ws, r)?;
    trace.filtered_documents = allowed.as_ref().map(|a| a.len());
    if allowed.as_ref().is_some_and(|a| a.is_empty()) {
        return Ok((Vec::new(), trace));
    }
    let allowed_keys = match (&allowed, r.mode) {
        (Some(docs), Mode::Hybrid | Mode::Vector) => {
            Some(app.db.read(|c| store::live_keys_of_documents(c, &ws.0, docs))?)
        }
        _ => None,
    };
    let terms: Vec<(String, f32)> =
        index.analyzed_terms(&ws.0, r.lexical_query.as_deref().unwrap_or(&r.query), t.question_words);
    let (space, embedder) = if r.mode == Mode::Bm25 {
        (String::new(), None)
    } else {
        let space = super::spaces::live_space(app, &ws.0)?;
        let parsed = crate::models::embed::Space::parse(&space)
            .ok_or_else(|| Error::internal_msg(format!("unknown embedding space {space}")))?;
        (space, Some(app.models.embedder_for(parsed)?))
    };
    trace.space = space.clone();
    let p = Passes { app, ws, r, t, index, allowed, allowed_keys, terms, space };
    let first = p.first_pass(embedder.as_deref(), &mut trace)?;
    let mut fused = fuse(&first.lexical, &first.vector, t);
    trace.mark("firstPass", &mut clock);
    if let Some(fb) = t.feedback {
        p.feedback_round(fb, first, &mut fused, &mut trace)?;
        trace.mark("feedback", &mut clock);
    }
    // Documents, not chunks, are ranked when results are collapsed: each document by its fused
    // chunks' scores (`by_document`), represented by its best chunk.
    if r.collapse && !fused.is_empty() {
        fused = by_document(app, ws, fused, t.rest_weight)?;
        trace.mark("documents", &mut clock);
    }
    // The candidates that are still live (a chunk deleted or replaced since it was indexed is
    // dropped), with their rows, read best first in batches until `limit` are chosen.
    let candidates: &[super::Candidate] = if r.collapse { &fused } else { &fused[..fused.len().min(r.limit * 2)] };
    let (chosen, rows) = hydrate_best(app, ws, r, candidates)?;
    let final_keys: Vec<u64> = chosen.iter().map(|c| c.key).collect();
    trace.mark("hydrate", &mut clock);
    let terms: Vec<String> = p.terms.into_iter().map(|(t, _)| t).collect();
    let out = into_hits(chosen, rows, &terms, max_score(r.mode, t));
    trace.mark("snippets", &mut clock);
    trace.result_keys = final_keys;
    Ok((out, trace))
}

/// One retrieval's fixed inputs, shared by its lexical and vector passes.
struct Passes<'a> {
    app: &'a App,
    ws: &'a WorkspaceId,
    r: &'a Retrieve,
    t: &'a Tuning,
    index: &'a super::SearchIndex,
    allowed: Option<HashSet<String>>,
    allowed_keys: Option<HashSet<u64>>,
    /// The analyzed keyword query, each term of weight 1.
    terms: Vec<(String, f32)>,
    /// The embedding space the query vector is in.
    space: String,
}

/// What pass one found.
struct FirstPass {
    lexical: Vec<(u64, f32)>,
    /// The feedback round's lexical search, when it ran early (feedback from the lexical ranking).
    early_lexical2: Option<Vec<(u64, f32)>>,
    query_vector: Option<Vec<f32>>,
    vector: Vec<(u64, f32)>,
}

impl Passes<'_> {
    fn lexical(&self, terms: &[(String, f32)]) -> Result<Vec<(u64, f32)>> {
        if self.r.mode == Mode::Vector {
            Ok(Vec::new())
        } else {
            self.index.lexical_terms(&self.ws.0, terms, self.t.lexical_k, self.allowed.as_ref())
        }
    }

    fn vector(&self, q: &[f32]) -> Attempt<Vec<(u64, f32)>> {
        let Some(mut v) =
            self.index.semantic(&self.ws.0, &self.space, q, self.t.vector_k, self.allowed_keys.as_ref())?
        else {
            return Err(Stop::SpaceChanged);
        };
        v.retain(|(_, sim)| *sim >= self.t.min_similarity);
        Ok(v)
    }

    /// The keyword query expanded from the feedback chunks `keys` (unexpanded without feedback).
    fn expand_from(&self, keys: &[u64]) -> Result<Vec<(String, f32)>> {
        let Some(fb) = self.t.feedback.filter(|_| self.r.mode != Mode::Vector) else { return Ok(self.terms.clone()) };
        Ok(expand_terms(&self.terms, &feedback_term_counts(self.app, self.index, &self.ws.0, keys)?, fb))
    }

    /// Pass one: the lexical search, then the query embedding and the vector search, one after the
    /// other. The embedding runs on two threads; a lexical search beside it (on 2 cores) stalls
    /// the embedding's threads at every operator and made hybrid search about 1 ms slower, measured.
    /// When the lexical feedback comes from the lexical ranking, its second pass runs at once.
    fn first_pass(&self, embedder: Option<&Embedder>, trace: &mut RetrievalTrace) -> Attempt<FirstPass> {
        let (r, t) = (self.r, self.t);
        let lexical_feedback_first = t.feedback.is_some_and(|f| f.lexical_source == FeedbackSource::Lexical);
        let lexical = if r.mode == Mode::Vector { Vec::new() } else { self.lexical(&self.terms)? };
        let early_lexical2 = if lexical_feedback_first && r.mode != Mode::Vector {
            #[allow(clippy::expect_used, reason = "set on the feedback round, which is the only caller")]
            let fb = t.feedback.expect("feedback");
            let keys: Vec<u64> = lexical.iter().take(fb.docs).map(|c| c.0).collect();
            Some(self.lexical(&self.expand_from(&keys)?)?)
        } else {
            None
        };
        let (query_vector, vector, embed_ms, vector_ms) = match embedder {
            None => (None, Vec::new(), 0.0, 0.0),
            Some(e) => {
                let started = Instant::now();
                let q = e.embed_query(&r.query).map_err(Error::internal)?;
                let embedded = Instant::now();
                let v = self.vector(&q)?;
                (Some(q), v, ms(embedded - started), ms(embedded.elapsed()))
            }
        };
        if embedder.is_some() {
            trace.timings_ms.push(("queryEmbedding".into(), embed_ms));
            trace.timings_ms.push(("vectorSearch".into(), vector_ms));
        }
        trace.lexical_candidates = lexical.len();
        trace.vector_candidates = vector.len();
        Ok(FirstPass { lexical, early_lexical2, query_vector, vector })
    }

    /// Pass two (relevance feedback): the best documents of pass one move the query vector
    /// (Rocchio) and expand the lexical query (RM3); the searches run again, side by side.
    fn feedback_round(
        &self,
        fb: super::Feedback,
        first: FirstPass,
        fused: &mut Vec<super::Candidate>,
        trace: &mut RetrievalTrace,
    ) -> Attempt<()> {
        let fb_keys: Vec<u64> = fused.iter().take(fb.docs).map(|c| c.key).collect();
        if fb_keys.is_empty() {
            return Ok(());
        }
        trace.feedback_documents = fb_keys.len();
        let mode = self.r.mode;
        // the feedback vectors come from the vector index itself (no SQLite read)
        let vector_side = || -> Attempt<Vec<(u64, f32)>> {
            let Some(q) = &first.query_vector else { return Ok(Vec::new()) };
            let vecs: Vec<Vec<f32>> = fb_keys.iter().filter_map(|k| self.index.stored_vector(&self.ws.0, *k)).collect();
            self.vector(&rocchio(q, &vecs, fb.vector_weight))
        };
        let lexical_side = |early: Option<Vec<(u64, f32)>>| -> Result<Vec<(u64, f32)>> {
            match early {
                Some(l) => Ok(l),
                None if mode == Mode::Vector => Ok(Vec::new()),
                None => self.expand_from(&fb_keys).and_then(|q| self.lexical(&q)),
            }
        };
        let (lexical2, vector2) = match mode {
            // both searches, side by side (the embedding is done: the cores are free)
            Mode::Hybrid => std::thread::scope(|scope| {
                let vector = scope.spawn(vector_side);
                let lexical = lexical_side(first.early_lexical2);
                let vector = vector.join().map_err(|_| Error::internal_msg("the vector search thread panicked"))?;
                Ok::<_, Stop>((lexical?, vector?))
            })?,
            Mode::Vector => (Vec::new(), vector_side()?),
            Mode::Bm25 => (lexical_side(first.early_lexical2)?, Vec::new()),
        };
        trace.lexical_candidates = lexical2.len();
        trace.vector_candidates = vector2.len();
        *fused = fuse(&lexical2, &vector2, self.t);
        Ok(())
    }
}

/// Ranks documents by their chunks' scores: a document scores as its best chunk plus `rest_weight`
/// times the sum of its other candidate chunks (max-passage when 0), and is represented by its best
/// chunk. Chunks no longer live are dropped. One SQLite read maps the candidates to documents.
fn by_document(
    app: &App,
    ws: &WorkspaceId,
    fused: Vec<super::Candidate>,
    rest_weight: f32,
) -> Result<Vec<super::Candidate>> {
    let keys: Vec<u64> = fused.iter().map(|c| c.key).collect();
    let doc_of: HashMap<u64, String> = app.db.read(|c| store::documents_of(c, &ws.0, &keys))?.into_iter().collect();
    Ok(aggregate(fused, |k| doc_of.get(&k).cloned(), rest_weight))
}

/// [`by_document`]'s ranking, given each chunk's document (`None`: not live).
fn aggregate(
    fused: Vec<super::Candidate>,
    doc_of: impl Fn(u64) -> Option<String>,
    rest_weight: f32,
) -> Vec<super::Candidate> {
    // `fused` is best first, so a document's first chunk is its best
    let mut best: Vec<super::Candidate> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    let mut rest: Vec<f32> = Vec::new();
    for c in fused {
        let Some(doc) = doc_of(c.key) else { continue };
        match at.get(&doc) {
            Some(&i) => rest[i] += c.score,
            None => {
                at.insert(doc, best.len());
                best.push(c);
                rest.push(0.0);
            }
        }
    }
    for (c, r) in best.iter_mut().zip(&rest) {
        c.score += rest_weight * r;
    }
    best.sort_by(|a, b| b.score.partial_cmp(&a.score).unwrap_or(std::cmp::Ordering::Equal).then(a.key.cmp(&b.key)));
    best
}

/// The fused score of a chunk ranked first by every retriever used (scores are divided by it).
fn max_score(mode: Mode, t: &Tuning) -> f32 {
    match (mode, t.fusion) {
        (_, super::Fusion::Convex { .. }) => 1.0,
        (Mode::Hybrid, _) => (t.lexical_weight + t.vector_weight) / (t.rrf_k + 1.0),
        (Mode::Bm25, _) => t.lexical_weight / (t.rrf_k + 1.0),
        (Mode::Vector, _) => t.vector_weight / (t.rrf_k + 1.0),
    }
}

/// The best `limit` live candidates and their rows, read best first in batches. Collapsing keeps
/// the best chunk per document, so when one document's chunks crowd the top the batches grow
/// (doubling) and go on down the whole candidate list.
fn hydrate_best<'c>(
    app: &App,
    ws: &WorkspaceId,
    r: &Retrieve,
    candidates: &'c [super::Candidate],
) -> Result<(Vec<&'c super::Candidate>, HashMap<u64, store::Hydrated>)> {
    let mut rows: HashMap<u64, store::Hydrated> = HashMap::new();
    let mut seen_docs = HashSet::new();
    let mut chosen: Vec<&super::Candidate> = Vec::new();
    let (mut next, mut batch_len) = (0, 0);
    while chosen.len() < r.limit && next < candidates.len() {
        let need = r.limit - chosen.len();
        batch_len = (need + need / 2 + 2).max(batch_len * 2);
        let end = (next + batch_len).min(candidates.len());
        let batch = &candidates[next..end];
        next = end;
        let keys: Vec<u64> = batch.iter().map(|c| c.key).collect();
        rows.extend(app.db.read(|c| store::hydrate(c, &ws.0, &keys))?.into_iter().map(|h| (h.key, h)));
        for c in batch {
            let Some(h) = rows.get(&c.key) else { continue };
            if r.collapse && !seen_docs.insert(h.document_id.clone()) {
                continue;
            }
            chosen.push(c);
            if chosen.len() >= r.limit {
                break;
            }
        }
    }
    Ok((chosen, rows))
}

/// The chosen candidates as hits, with snippets for `terms`.
fn into_hits(
    chosen: Vec<&super::Candidate>,
    mut rows: HashMap<u64, store::Hydrated>,
    terms: &[String],
    max_score: f32,
) -> Vec<Hit> {
    let mut out = Vec::new();
    for c in chosen {
        let Some(h) = rows.remove(&c.key) else { continue };
        out.push(Hit {
            snippet: super::snippet(&h.content, terms),
            document_id: h.document_id,
            chunk_id: h.chunk_id,
            title: h.title,
            score: (c.score / max_score).min(1.0),
            metadata: serde_json::from_str(&h.metadata).unwrap_or(Value::Object(Default::default())),
            source_id: h.source_id,
            heading_path: h.heading_path,
            page: h.page,
            sheet: h.sheet,
            content: h.content,
            lexical_rank: c.lexical_rank,
            vector_rank: c.vector_rank,
        });
    }
    out
}

/// The feedback chunks' term counts, as the text index stored them at indexing (a chunk the index
/// does not hold yet is read from SQLite and analysed), in the order of `keys`.
fn feedback_term_counts(app: &App, index: &super::SearchIndex, ws: &str, keys: &[u64]) -> Result<Vec<TermCounts>> {
    let mut stored: std::collections::HashMap<u64, TermCounts> = index.stored_term_counts(keys)?.into_iter().collect();
    let missing: Vec<u64> = keys.iter().copied().filter(|k| !stored.contains_key(k)).collect();
    if !missing.is_empty() {
        let contents = app.db.read(|c| store::chunk_contents_by_key(c, &missing))?;
        for (key, content) in contents {
            stored.insert(key, TermCounts::of(&index.document_terms(ws, &content)));
        }
    }
    Ok(keys.iter().filter_map(|k| stored.remove(k)).collect())
}

/// RM3-style query expansion: the query terms plus the `fb.terms` terms that make up the largest
/// share of the feedback documents, weighted relative to the strongest (numbers and terms of two
/// letters or fewer are left out).
fn expand_terms(original: &[(String, f32)], feedback: &[TermCounts], fb: super::Feedback) -> Vec<(String, f32)> {
    if fb.terms == 0 || fb.term_weight <= 0.0 {
        return original.to_vec();
    }
    let mut weights: std::collections::HashMap<&str, f32> = std::collections::HashMap::new();
    for doc in feedback {
        let n = doc.total.max(1) as f32;
        for (term, count) in &doc.counts {
            *weights.entry(term).or_default() += *count as f32 / n;
        }
    }
    let mut expansion: Vec<(&str, f32)> =
        weights.into_iter().filter(|(t, _)| !original.iter().any(|(o, _)| o == t)).collect();
    expansion.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or(std::cmp::Ordering::Equal).then(a.0.cmp(b.0)));
    expansion.truncate(fb.terms);
    let top = expansion.first().map(|e| e.1).unwrap_or(1.0);
    let mut q = original.to_vec();
    q.extend(expansion.into_iter().map(|(t, w)| (t.to_string(), fb.term_weight * w / top)));
    q
}

/// Rocchio: the query vector moved toward the centroid of the feedback vectors, re-normalized.
fn rocchio(q: &[f32], feedback: &[Vec<f32>], weight: f32) -> Vec<f32> {
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
    /// Add a `debug` object (candidate counts, stage timings) to the response.
    pub include_debug: bool,
}

pub const MAX_QUERY_CHARS: usize = 2000;

/// `POST /api/v1/document/search`: retrieves, saves the search with its results, returns it.
/// The most sources one search may name (each is one SQL variable), as an agent's source scope.
pub const MAX_SOURCE_IDS: usize = 200;

/// 400 when a search names more than [`MAX_SOURCE_IDS`] sources.
pub fn check_source_ids(ids: Option<&[String]>) -> Result<()> {
    match ids {
        Some(ids) if ids.len() > MAX_SOURCE_IDS => Err(Error::invalid_field(
            "sourceIds",
            format!("sourceIds names {} sources; at most {MAX_SOURCE_IDS} are allowed", ids.len()),
        )
        .with_details(serde_json::json!({"field": "sourceIds", "limit": MAX_SOURCE_IDS}))),
        _ => Ok(()),
    }
}

/// A search as it ran (`search::api::search` renders it).
#[derive(Debug)]
pub struct Searched {
    pub search_id: String,
    pub query: String,
    pub mode: String,
    pub metadata_filter: Option<FilterJson>,
    pub results: SavedResults,
    pub result_count: usize,
    pub took_ms: f64,
    pub created_at: String,
    /// What retrieval did, when `includeDebug` asked for it.
    pub debug: Option<RetrievalTrace>,
}

/// A search's hits as saved for replay: free-form JSON (the hits' wire shape when it ran).
pub type SavedResults = Value;

#[tracing::instrument(name = "search.request", skip_all)]
pub fn search(app: &App, p: &Principal, actor: &Actor, req: SearchRequest) -> Result<Searched> {
    p.require(Perm::RetrievalQuery)?;
    let query = req.query.trim().to_string();
    if query.is_empty() {
        return Err(Error::invalid_field("query", "query must not be empty"));
    }
    if query.chars().count() > MAX_QUERY_CHARS {
        return Err(Error::invalid_field("query", format!("query must be at most {MAX_QUERY_CHARS} characters")));
    }
    let limit = req.limit.unwrap_or(10);
    if !(1..=100).contains(&limit) {
        return Err(Error::invalid_field("limit", "limit must be between 1 and 100"));
    }
    let filter = req.metadata_filter.as_ref().map(filter::parse).transpose()?;
    check_source_ids(req.source_ids.as_deref())?;
    let mode = req.mode.unwrap_or_default();
    let started = Instant::now();
    let (hits, trace) = retrieve_traced(
        app,
        &p.workspace_id,
        &Retrieve {
            query: query.clone(),
            lexical_query: None,
            filter,
            source_ids: req.source_ids.clone(),
            mode,
            limit,
            collapse: true,
        },
        &Tuning::default(),
    )?;
    let took_ms = started.elapsed().as_secs_f64() * 1000.0;
    let results = serde_json::to_value(&hits)?;
    let stored = super::history::compact(app, &p.workspace_id.0, &hits)?;
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
                results: &stored,
                result_count: hits.len(),
                took_ms,
                created_at: &now,
            },
        )
    })?;
    Ok(Searched {
        search_id: id,
        query,
        mode: mode_s,
        metadata_filter: req.metadata_filter,
        results,
        result_count: hits.len(),
        took_ms,
        created_at: now,
        debug: match req.include_debug {
            true => Some(RetrievalTrace { index_lag: app.search()?.lag(&app.db)?, ..trace }),
            false => None,
        },
    })
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

/// One past search: its query and the documents and chunks it returned then, with their text as
/// it is now (a hit whose chunk changed or went since says so; see `history`).
pub fn replay(app: &App, p: &Principal, id: &str) -> Result<store::StoredSearch> {
    p.require(Perm::RetrievalQuery)?;
    let mut s =
        app.db.read(|c| store::search_record(c, &p.workspace_id.0, id))?.ok_or_else(|| Error::not_found("search"))?;
    s.results = super::history::replay_hits(app, &p.workspace_id.0, &s)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::super::Candidate;
    use super::*;

    fn cand(key: u64, score: f32) -> Candidate {
        Candidate { key, score, lexical_rank: None, vector_rank: None }
    }

    #[test]
    fn documents_rank_by_their_best_chunk_plus_a_share_of_the_rest() {
        // doc A: chunks 1 (0.9) and 3 (0.5); doc B: chunk 2 (0.8); chunk 4 is no longer live
        let fused = vec![cand(1, 0.9), cand(2, 0.8), cand(3, 0.5), cand(4, 0.95)];
        let doc = |k: u64| match k {
            1 | 3 => Some("A".to_string()),
            2 => Some("B".to_string()),
            _ => None,
        };
        let max = aggregate(fused.clone(), doc, 0.0);
        assert_eq!(max.iter().map(|c| c.key).collect::<Vec<_>>(), vec![1, 2], "max-passage, one per document");
        assert!((max[0].score - 0.9).abs() < 1e-6);
        let sum = aggregate(fused, doc, 0.5);
        assert!((sum[0].score - 1.15).abs() < 1e-6, "0.9 + 0.5 × 0.5");
        assert_eq!(sum[0].key, 1, "the document is represented by its best chunk");
    }

    proptest::proptest! {
        /// Whatever the scores, every document appears once, represented by its best live chunk,
        /// and the order is by the aggregate score.
        #[test]
        fn aggregation_keeps_one_chunk_per_document_in_score_order(
            scores in proptest::collection::vec((0u64..40, 0.0f32..1.0), 0..60),
            rest in 0.0f32..1.0,
        ) {
            let mut fused: Vec<Candidate> = scores.iter().enumerate().map(|(i, (_, s))| cand(i as u64, *s)).collect();
            fused.sort_by(|a, b| b.score.partial_cmp(&a.score).unwrap());
            let doc_of = |k: u64| scores.get(k as usize).filter(|(d, _)| d % 7 != 3).map(|(d, _)| format!("d{}", d % 11));
            let out = aggregate(fused.clone(), doc_of, rest);
            let mut seen = std::collections::HashSet::new();
            for c in &out {
                proptest::prop_assert!(seen.insert(doc_of(c.key).unwrap()));
            }
            for w in out.windows(2) {
                proptest::prop_assert!(w[0].score >= w[1].score);
            }
            let docs: std::collections::HashSet<String> = fused.iter().filter_map(|c| doc_of(c.key)).collect();
            proptest::prop_assert_eq!(out.len(), docs.len());
        }

        /// Fused scores stay in [0, 1] per retriever weight and every candidate of either list is kept once.
        #[test]
        fn fusion_keeps_every_candidate_once(
            lex in proptest::collection::vec((0u64..30, -5.0f32..30.0), 0..40),
            vec in proptest::collection::vec((0u64..30, -1.0f32..1.0), 0..40),
            alpha in 0.0f32..1.0,
        ) {
            let dedup = |v: Vec<(u64, f32)>| {
                let mut seen = std::collections::HashSet::new();
                v.into_iter().filter(|(k, _)| seen.insert(*k)).collect::<Vec<_>>()
            };
            let (lex, vec) = (dedup(lex), dedup(vec));
            let t = super::super::Tuning { fusion: super::super::Fusion::Convex { alpha }, ..Default::default() };
            let out = super::super::fuse(&lex, &vec, &t);
            let keys: std::collections::HashSet<u64> = lex.iter().chain(vec.iter()).map(|(k, _)| *k).collect();
            proptest::prop_assert_eq!(out.len(), keys.len());
            for c in &out {
                proptest::prop_assert!(c.score >= -1e-6 && c.score <= 1.0 + 1e-6, "{}", c.score);
            }
        }
    }
}
