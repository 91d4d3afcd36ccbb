//! Search: a Tantivy BM25 index and usearch vector indexes, both derived from the chunks in SQLite
//! and kept in step through the `index_ops` log; hybrid retrieval fuses the two rankings with
//! weighted reciprocal rank fusion.
//!
//! Consistency: every chunk that becomes live writes an `add` op, every chunk row deleted writes a
//! `del` op (SQL trigger), in the same transaction as the change. [`SearchIndex::sync`] applies
//! ops in order and records the position it reached (Tantivy commit payload; `vectors.json` when
//! the vector files are saved). At start the indexes replay what they missed; an index that is not
//! current (missing, corrupt, from another database or schema, or older than the database) is
//! rebuilt from SQLite in the background while search answers from what is ready (`rebuild`).

pub mod api;
pub mod filter;
pub mod history;
pub mod inspect;
pub mod query;
mod rebuild;
mod snippet;
pub mod spaces;
mod store;
pub mod text;
pub mod vectors;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

pub use rebuild::RebuildStatus;
pub use snippet::snippet;
pub use store::{LiveChunk, SearchRecord};

use crate::error::{Error, Result};
use crate::ids::WorkspaceId;
use crate::storage::Db;
use text::{Lang, TextDoc, TextIndex};
use vectors::VectorIndex;

struct SyncState {
    applied: i64,
    /// The text index holds every op up to here (it may be ahead of `applied`, which the vectors
    /// hold back): a replay does not index those chunks twice.
    text_applied: i64,
    vectors_saved: i64,
    vectors_dirty: bool,
    last_save: Instant,
}

pub struct SearchIndex {
    dir: PathBuf,
    text: TextIndex,
    /// Each workspace's language for lexical analysis and the live space of its vectors, as
    /// `search_workspaces` says (see `spaces`).
    confs: parking_lot::RwLock<HashMap<String, (Lang, String)>>,
    writer: Mutex<tantivy::IndexWriter>,
    vectors: VectorIndex,
    state: Mutex<SyncState>,
    db_id: i64,
    /// The generation each index's position names (see `rebuild`).
    gens: Mutex<Gens>,
    /// The rebuild due or running, if any.
    rebuild: Mutex<Option<rebuild::Rebuild>>,
    stopping: std::sync::atomic::AtomicBool,
    /// On PostgreSQL, this node's id (its generations and position are its own; see
    /// docs/scale-out.md, section 6); `None` on SQLite.
    node: Option<String>,
    /// Scope of the generation rows: empty on SQLite, `.<node id>` on PostgreSQL.
    scope: String,
    /// Tells the other nodes when this node's writes logged index operations.
    announce: std::sync::OnceLock<crate::cluster::Announce>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Gens {
    text: i64,
    vectors: i64,
}

fn tantivy_err(e: tantivy::TantivyError) -> Error {
    Error::internal_msg(format!("search index: {e}"))
}

/// Retrieval modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Hybrid,
    Bm25,
    Vector,
}

/// How the two rankings are combined.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fusion {
    /// Weighted reciprocal rank fusion: sum of weight / (k + rank).
    Rrf,
    /// Convex combination of scores, each list min-max normalized over its candidates:
    /// `alpha * lexical + (1 - alpha) * vector` (a missing score counts as 0).
    Convex { alpha: f32 },
}

/// Fusion and candidate settings (chosen on two collections; see docs/performance.md).
#[derive(Debug, Clone, Copy)]
pub struct Tuning {
    pub lexical_k: usize,
    pub vector_k: usize,
    pub rrf_k: f32,
    /// Vector candidates below this cosine similarity are dropped (unrelated text scores near 0
    /// with this model; the original product's default threshold is 0.2).
    pub min_similarity: f32,
    pub lexical_weight: f32,
    pub vector_weight: f32,
    /// Drop English question and filler words from keyword queries (`text::QUESTION_WORDS`).
    pub question_words: bool,
    /// A document's score from its chunks' scores: the best chunk's plus this share of the rest.
    pub rest_weight: f32,
    pub fusion: Fusion,
    /// Pseudo-relevance feedback: a second pass informed by the first pass's best documents.
    pub feedback: Option<Feedback>,
}

/// Pseudo-relevance feedback settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Feedback {
    /// Documents of the first pass used as feedback.
    pub docs: usize,
    /// Expansion terms added to the lexical query (RM3-style: the terms most frequent in the
    /// feedback documents, weighted by their share).
    pub terms: usize,
    /// Weight of the strongest expansion term relative to an original query term.
    pub term_weight: f32,
    /// Weight of the feedback centroid added to the query vector (Rocchio).
    pub vector_weight: f32,
    /// Which first-pass ranking feeds the lexical expansion.
    pub lexical_source: FeedbackSource,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedbackSource {
    /// The fused ranking of pass one (needs the vector search first).
    Fused,
    /// The lexical ranking of pass one (its second pass overlaps the query embedding).
    Lexical,
}

impl Default for Tuning {
    fn default() -> Self {
        // Chosen with `steward bench tune` on Cranfield and NFCorpus together (the mean of both,
        // checked on the odd and even halves of each); the neighbourhood is flat (within ±0.005).
        // See docs/performance.md, "Retrieval".
        Tuning {
            lexical_k: 100,
            vector_k: 100,
            rrf_k: 60.0,
            min_similarity: 0.2,
            lexical_weight: 1.0,
            vector_weight: 1.0,
            question_words: true,
            rest_weight: 0.0,
            fusion: Fusion::Convex { alpha: 0.5 },
            feedback: Some(Feedback {
                docs: 3,
                terms: 20,
                term_weight: 0.5,
                vector_weight: 1.0,
                lexical_source: FeedbackSource::Lexical,
            }),
        }
    }
}

/// A fused candidate before hydration.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub key: u64,
    pub score: f32,
    pub lexical_rank: Option<usize>,
    pub vector_rank: Option<usize>,
}

/// Min-max normalization over a candidate list.
fn normalizer(list: &[(u64, f32)]) -> impl Fn(f32) -> f32 + use<> {
    let (min, max) = list.iter().fold((f32::MAX, f32::MIN), |(lo, hi), x| (lo.min(x.1), hi.max(x.1)));
    move |s| if max > min { (s - min) / (max - min) } else { 1.0 }
}

/// Fuses two rankings (best first) as `t.fusion` says.
pub fn fuse(lexical: &[(u64, f32)], vector: &[(u64, f32)], t: &Tuning) -> Vec<Candidate> {
    let mut by_key: HashMap<u64, Candidate> = HashMap::new();
    if let Fusion::Convex { alpha } = t.fusion {
        let nl = normalizer(lexical);
        let nv = normalizer(vector);
        for (rank, (key, s)) in lexical.iter().enumerate() {
            let c = by_key.entry(*key).or_insert(Candidate {
                key: *key,
                score: 0.0,
                lexical_rank: None,
                vector_rank: None,
            });
            c.score += alpha * nl(*s);
            c.lexical_rank = Some(rank);
        }
        for (rank, (key, s)) in vector.iter().enumerate() {
            let c = by_key.entry(*key).or_insert(Candidate {
                key: *key,
                score: 0.0,
                lexical_rank: None,
                vector_rank: None,
            });
            c.score += (1.0 - alpha) * nv(*s);
            c.vector_rank = Some(rank);
        }
        let mut out: Vec<Candidate> = by_key.into_values().collect();
        out.sort_by(|a, b| b.score.partial_cmp(&a.score).unwrap_or(std::cmp::Ordering::Equal).then(a.key.cmp(&b.key)));
        return out;
    }
    for (rank, (key, _)) in lexical.iter().enumerate() {
        let c =
            by_key.entry(*key).or_insert(Candidate { key: *key, score: 0.0, lexical_rank: None, vector_rank: None });
        c.score += t.lexical_weight / (t.rrf_k + rank as f32 + 1.0);
        c.lexical_rank = Some(rank);
    }
    for (rank, (key, _)) in vector.iter().enumerate() {
        let c =
            by_key.entry(*key).or_insert(Candidate { key: *key, score: 0.0, lexical_rank: None, vector_rank: None });
        c.score += t.vector_weight / (t.rrf_k + rank as f32 + 1.0);
        c.vector_rank = Some(rank);
    }
    let mut out: Vec<Candidate> = by_key.into_values().collect();
    out.sort_by(|a, b| b.score.partial_cmp(&a.score).unwrap_or(std::cmp::Ordering::Equal).then(a.key.cmp(&b.key)));
    out
}

impl SearchIndex {
    /// Opens the indexes under `dir` and replays the ops they have not applied. An index that is
    /// not current is cleared and its rebuild planned: [`SearchIndex::run_rebuild`] does it (the
    /// server in the background), at once when the database has no live chunk.
    pub fn open(dir: &Path, db: &Db) -> Result<SearchIndex> {
        std::fs::create_dir_all(dir)?;
        let node = if db.is_postgres() { Some(crate::cluster::node_id(dir)?) } else { None };
        let scope = node.as_ref().map(|n| format!(".{n}")).unwrap_or_default();
        let db_id = db.write(store::database_id)?;
        if let Some(node) = &node {
            // hold the whole log while this node finds its place (no node prunes below it)
            let now = crate::clock::rfc3339(chrono::Utc::now());
            db.write(|tx| {
                let first = store::min_seq(tx)?.map_or_else(|| store::max_seq(tx), Ok)?;
                store::record_position(tx, node, first - 1, &now)
            })?;
        }
        let max_seq = db.read(store::max_seq)?;
        let min_seq = db.read(store::min_seq)?;
        let (text_gen, vec_gen) = db.read(|c| store::generations(c, &scope))?;
        let valid = rebuild::Validity { db_id, max_seq, min_seq };
        let (text, text_pos) = rebuild::open_text(dir, &valid, text_gen)?;
        let writer = text.writer().map_err(tantivy_err)?;
        let (vectors, vec_pos) = rebuild::open_vectors(dir, &valid, vec_gen, db)?;
        let idx = SearchIndex {
            dir: dir.to_path_buf(),
            text,
            confs: parking_lot::RwLock::new(
                db.read(store::space_rows)?
                    .into_iter()
                    .map(|r| (r.workspace_id.clone(), (Lang::of_locale(&r.language), r.space)))
                    .collect(),
            ),
            writer: Mutex::new(writer),
            vectors,
            state: Mutex::new(SyncState {
                applied: 0,
                text_applied: 0,
                vectors_saved: 0,
                vectors_dirty: false,
                last_save: Instant::now(),
            }),
            db_id,
            gens: Mutex::new(Gens { text: text_gen, vectors: vec_gen }),
            rebuild: Mutex::new(None),
            stopping: Default::default(),
            node,
            scope,
            announce: Default::default(),
        };
        let started = Instant::now();
        let rebuild_text = text_pos.is_none();
        let rebuild_vectors = vec_pos.is_none();
        // a workspace whose saved vectors are in another space than its chunks' (a re-embedding
        // switched over and the process stopped before the index was saved) is rebuilt alone
        if !rebuild_vectors {
            for (ws, space) in idx.vectors.spaces() {
                if idx.cached_space(&ws).is_some_and(|s| s != space) {
                    idx.rebuild_vectors_of(db, &ws)?;
                }
            }
        }
        // what a rebuild makes covers every op so far
        let text_seq = text_pos.unwrap_or(max_seq);
        let vec_seq = vec_pos.unwrap_or(max_seq);
        {
            let mut st = idx.state.lock();
            st.applied = text_seq.min(vec_seq);
            st.text_applied = text_seq;
            st.vectors_saved = vec_seq;
        }
        if rebuild_text || rebuild_vectors {
            idx.begin_rebuild(db, rebuild_text, rebuild_vectors)?;
        }
        let replayed = idx.sync(db)?;
        if replayed > 0 {
            tracing::info!(
                replayed_ops = replayed,
                ms = started.elapsed().as_millis() as u64,
                "search indexes replayed"
            );
        }
        idx.save_vectors(db)?;
        if idx.rebuild_status().is_some_and(|r| r.total == 0) {
            idx.run_rebuild(db)?;
        }
        Ok(idx)
    }

    fn text_position(&self, seq: i64) -> String {
        let generation = self.gens.lock().text;
        let p = rebuild::Position { seq, schema: text::SCHEMA_VERSION, db: self.db_id, generation };
        serde_json::to_string(&p).unwrap_or_default()
    }

    fn vector_position(&self, seq: i64) -> String {
        let generation = self.gens.lock().vectors;
        let p = rebuild::Position { seq, schema: vectors::SCHEMA_VERSION, db: self.db_id, generation };
        serde_json::to_string(&p).unwrap_or_default()
    }

    /// Deletes and rebuilds both indexes from SQLite now (`steward reindex`); returns the live
    /// chunks indexed.
    pub fn rebuild(&self, db: &Db) -> Result<usize> {
        self.begin_rebuild(db, true, true)?;
        self.run_rebuild(db)?;
        Ok(db.read(store::live_count)? as usize)
    }

    /// Applies pending index ops; returns how many. Called after every change that writes ops;
    /// on PostgreSQL the other nodes are told to apply them too.
    pub fn sync(&self, db: &Db) -> Result<usize> {
        let n = self.apply(db)?;
        if n > 0
            && let Some(a) = self.announce.get()
        {
            a.send(&crate::cluster::Wake::Index);
        }
        Ok(n)
    }

    /// Applies the ops other nodes logged (the index tail on PostgreSQL).
    pub fn tail(&self, db: &Db) -> Result<usize> {
        self.apply(db)
    }

    /// Makes [`SearchIndex::sync`] tell the other nodes (PostgreSQL).
    pub fn announce_with(&self, announce: crate::cluster::Announce) {
        let _ = self.announce.set(announce);
    }

    /// Index operations in the database this node has not applied yet (0 when current).
    pub fn lag(&self, db: &Db) -> Result<i64> {
        let max = db.read(store::max_seq)?;
        Ok((max - self.state.lock().applied).max(0))
    }

    fn apply(&self, db: &Db) -> Result<usize> {
        let mut st = self.state.lock();
        let mut total = 0;
        loop {
            let ops = db.read(|c| store::ops_after(c, st.applied, 5000))?;
            if ops.is_empty() {
                break;
            }
            let add_keys: Vec<u64> = ops.iter().filter(|o| o.add).map(|o| o.key).collect();
            let chunks: HashMap<u64, LiveChunk> =
                db.read(|c| store::chunks_by_keys(c, &add_keys))?.into_iter().map(|c| (c.key, c)).collect();
            // which ops the text index needs: not those it holds already (Tantivy would keep the
            // replaced copy as a deleted document, which still counts in BM25's statistics)
            let text_ops: HashSet<i64> = {
                let mut r = self.rebuild.lock();
                ops.iter()
                    .filter(|op| op.seq > st.text_applied)
                    .filter(|op| match r.as_mut() {
                        Some(r) if r.text && op.add => r.sync_adds(op.key, op.seq),
                        _ => true,
                    })
                    .map(|op| op.seq)
                    .collect()
            };
            let w = self.writer.lock();
            let mut last = st.applied;
            for op in &ops {
                let text_op = text_ops.contains(&op.seq);
                if text_op {
                    self.text.delete(&w, op.key);
                }
                if op.add {
                    if let Some(ch) = chunks.get(&op.key)
                        && text_op
                    {
                        self.text
                            .add(
                                &w,
                                &TextDoc {
                                    key: ch.key,
                                    workspace: &ch.workspace_id,
                                    document: &ch.document_id,
                                    lang: self.language(&ch.workspace_id),
                                    title: &ch.title,
                                    heading: &ch.heading,
                                    body: &ch.content,
                                },
                            )
                            .map_err(tantivy_err)?;
                    }
                    if let Some(ch) = chunks.get(&op.key)
                        && let Some(v) = &ch.embedding
                    {
                        self.vectors
                            .add(&ch.workspace_id, &self.space_of_db(db, &ch.workspace_id), ch.key, v)
                            .map_err(Error::internal_msg)?;
                    }
                } else {
                    self.vectors.remove(&op.workspace_id, op.key).map_err(Error::internal_msg)?;
                }
                last = op.seq;
            }
            drop(w);
            self.commit_text(last.max(st.text_applied))?;
            total += ops.len();
            st.applied = last;
            st.text_applied = st.text_applied.max(last);
            st.vectors_dirty = true;
        }
        Ok(total)
    }

    /// Saves the vector indexes when they changed and `force` or 10 s passed; then prunes ops both
    /// indexes have durably applied.
    pub fn save_vectors_if_due(&self, db: &Db, force: bool) -> Result<()> {
        let due = {
            let st = self.state.lock();
            st.vectors_dirty && (force || st.last_save.elapsed().as_secs() >= 10)
        };
        if due { self.save_vectors(db) } else { Ok(()) }
    }

    fn save_vectors(&self, db: &Db) -> Result<()> {
        let mut st = self.state.lock();
        self.vectors.save().map_err(Error::internal_msg)?;
        std::fs::write(self.dir.join("vectors/vectors.json"), self.vector_position(st.applied))?;
        st.vectors_saved = st.applied;
        st.vectors_dirty = false;
        st.last_save = Instant::now();
        let upto = st.vectors_saved.min(st.applied);
        drop(st);
        match &self.node {
            None => {
                db.write(|tx| store::prune_ops(tx, upto))?;
            }
            // the log is pruned below every node's position (a node silent for a day is left out
            // and rebuilds when it comes back)
            Some(node) => {
                let now = chrono::Utc::now();
                let since = crate::clock::rfc3339(now - chrono::Duration::days(1));
                db.write(|tx| {
                    store::record_position(tx, node, upto, &crate::clock::rfc3339(now))?;
                    store::prune_ops_of_nodes(tx, &since)
                })?;
            }
        }
        Ok(())
    }

    /// BM25 candidates for analyzed, weighted terms.
    pub fn lexical_terms(
        &self,
        workspace: &str,
        terms: &[(String, f32)],
        k: usize,
        documents: Option<&HashSet<String>>,
    ) -> Result<Vec<(u64, f32)>> {
        self.text.search_terms(workspace, terms, k, documents).map_err(tantivy_err)
    }

    /// Every analyzed term of a text of `workspace` (with repetitions).
    pub fn document_terms(&self, workspace: &str, text: &str) -> Vec<String> {
        text::analyze(self.language(workspace), text)
    }

    /// The term counts the text index stored for chunks `keys` (a key not indexed is left out).
    pub fn stored_term_counts(&self, keys: &[u64]) -> Result<Vec<(u64, text::TermCounts)>> {
        self.text.stored_term_counts(keys).map_err(tantivy_err)
    }

    /// The language a workspace's text is analyzed in.
    pub fn language(&self, workspace: &str) -> Lang {
        self.confs.read().get(workspace).map(|c| c.0).unwrap_or_default()
    }

    /// The live space of a workspace's vectors, when known.
    pub fn cached_space(&self, workspace: &str) -> Option<String> {
        self.confs.read().get(workspace).map(|c| c.1.clone())
    }

    /// The live space of a workspace's vectors: cached, else read from its row (and cached), else
    /// the legacy one (no row: its chunks predate spaces).
    fn space_of_db(&self, db: &Db, workspace: &str) -> String {
        if let Some(s) = self.cached_space(workspace) {
            return s;
        }
        match db.read(|c| store::space_row_of(c, workspace)) {
            Ok(Some(r)) => {
                self.set_conf(workspace, Lang::of_locale(&r.language), &r.space);
                r.space
            }
            _ => crate::models::embed::LEGACY_SPACE.to_string(),
        }
    }

    /// [`Self::space_of_db`] without a database at hand (rebuilds read every row at open).
    fn space_for(&self, workspace: &str) -> String {
        self.cached_space(workspace).unwrap_or_else(|| crate::models::embed::LEGACY_SPACE.to_string())
    }

    /// Records a workspace's language and live space (`spaces` calls it when they change).
    pub fn set_conf(&self, workspace: &str, lang: Lang, space: &str) {
        self.confs.write().insert(workspace.to_string(), (lang, space.to_string()));
    }

    /// Rebuilds one workspace's vector index from its live chunks in SQLite.
    fn rebuild_vectors_of(&self, db: &Db, ws: &str) -> Result<()> {
        let vectors = db.read(|c| store::live_vectors_of(c, ws))?;
        self.vectors.replace(ws, &self.space_for(ws), &vectors).map_err(Error::internal_msg)?;
        self.state.lock().vectors_dirty = true;
        tracing::info!(workspace = ws, vectors = vectors.len(), "rebuilt a workspace's vector index from SQLite");
        Ok(())
    }

    /// Switches a workspace whose chunks all have their vector in `target` over to it: the vectors
    /// are swapped in one transaction and the workspace's index is replaced whole, with no index
    /// op applied in between. Returns false (nothing changed) when a chunk still lacks its vector.
    pub fn switch_space(&self, app: &crate::app::App, ws: &str, target: &str) -> Result<bool> {
        let mut st = self.state.lock();
        let (vectors, missing) = app.db.read(|c| store::next_vectors(c, ws))?;
        if !missing.is_empty() {
            return Ok(false);
        }
        let now = crate::clock::rfc3339(app.clock.now());
        let switched = app.db.write(|tx| {
            let (done, total) = crate::documents::embeddings::reembed_counts(tx, ws)?;
            if done != total {
                return Ok(false);
            }
            crate::documents::embeddings::promote_next_embeddings(tx, ws, target)?;
            store::finish_target(tx, ws, target, &now)?;
            Ok(true)
        })?;
        if !switched {
            return Ok(false);
        }
        self.vectors.replace(ws, target, &vectors).map_err(Error::internal_msg)?;
        let lang = self.language(ws);
        self.set_conf(ws, lang, target);
        st.vectors_dirty = true;
        drop(st);
        self.save_vectors(&app.db)?;
        Ok(true)
    }

    /// Indexes a workspace's live chunks again (its language changed); returns how many.
    pub fn reanalyze(&self, db: &Db, ws: &str) -> Result<usize> {
        let _st = self.state.lock();
        let mut w = self.writer.lock();
        w.delete_term(tantivy::Term::from_field_text(self.text.fields.workspace, ws));
        let lang = self.language(ws);
        let mut n = 0;
        db.read(|c| {
            store::for_each_live_of(c, ws, |ch| {
                self.text
                    .add(
                        &w,
                        &TextDoc {
                            key: ch.key,
                            workspace: &ch.workspace_id,
                            document: &ch.document_id,
                            lang,
                            title: &ch.title,
                            heading: &ch.heading,
                            body: &ch.content,
                        },
                    )
                    .map_err(tantivy_err)?;
                n += 1;
                Ok(())
            })
        })?;
        w.commit().map_err(tantivy_err)?;
        drop(w);
        self.text.reader.reload().map_err(tantivy_err)?;
        Ok(n)
    }

    /// Vector candidates (cosine similarity) for a query embedded in `space`; `Ok(None)` when the
    /// workspace's index is in another space (it has just switched: embed the query again).
    pub fn semantic(
        &self,
        workspace: &str,
        space: &str,
        query: &[f32],
        k: usize,
        allowed: Option<&HashSet<u64>>,
    ) -> Result<Option<Vec<(u64, f32)>>> {
        match self.vectors.search(workspace, space, query, k, allowed) {
            Ok(v) => Ok(Some(v)),
            Err(vectors::VectorError::OtherSpace { .. }) => Ok(None),
            Err(vectors::VectorError::Failed(m)) => Err(Error::internal_msg(m)),
        }
    }

    /// The indexed vector of a chunk (for relevance feedback).
    pub fn stored_vector(&self, workspace: &str, key: u64) -> Option<Vec<f32>> {
        self.vectors.get(workspace, key)
    }

    /// Query terms of `workspace` as the lexical index analyzes them, weighted by their count in
    /// the query.
    pub fn analyzed_terms(&self, workspace: &str, text: &str, question_words: bool) -> Vec<(String, f32)> {
        text::query_terms(self.language(workspace), text, question_words)
    }

    /// (chunks in the text index, vectors in the vector index).
    pub fn counts(&self) -> (u64, usize) {
        (self.text.num_docs(), self.vectors.len())
    }

    /// Chunks in the text index and vectors in the vector index, of one workspace.
    pub fn counts_of(&self, ws: &WorkspaceId) -> (u64, usize) {
        (self.text.num_docs_of(&ws.0), self.vectors.len_of(&ws.0))
    }

    /// Segments in the lexical index.
    pub fn text_segments(&self) -> usize {
        self.text.reader.searcher().segment_readers().len()
    }

    pub fn vector_memory_bytes(&self) -> usize {
        self.vectors.memory_bytes()
    }
}

/// Gives both indexes a new generation in SQLite, so no index file saved before is current (a
/// restored database). The server rebuilds them at its next start.
pub fn forget_indexes(db: &Db) -> Result<()> {
    let now = crate::clock::rfc3339(chrono::Utc::now());
    db.write(|tx| {
        store::set_generation(tx, true, rebuild::new_generation(), &now, "")?;
        store::set_generation(tx, false, rebuild::new_generation(), &now, "")
    })
}

pub use store::{
    HistoryEntry, HistoryPage, Hydrated, decode_vector, documents_metadata, encode_vector, history_page, hydrate,
    insert_search, live_keys_of_documents, log_added_chunks, search_record,
};
