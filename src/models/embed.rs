//! The local sentence embedders on ONNX Runtime, each with its tokenizer: all-MiniLM-L6-v2 (English,
//! int8, WordPiece) and multilingual-e5-small (about 100 languages, 4-bit, SentencePiece unigram,
//! `query: `/`passage: ` prefixes); both 384 dimensions, mean pooling, L2-normalized ([`MODELS`]).
//! An embedding [`Space`] is one model at one sequence limit: vectors of different spaces are
//! never compared.
//!
//! Throughput comes from computing (almost) no padding and from parallel sessions: inputs are
//! tokenized once and sorted by length; texts of 64 tokens or more run one at a time (a text's
//! vector then never depends on what else was embedded with it), shorter ones in small batches
//! whose longest member bounds the padding; batches are spread over a pool of single-threaded
//! sessions (on a small model, N sessions of one thread beat one session of N threads: no
//! per-operator synchronization). Queries use their own session so a search never waits behind an
//! ingestion batch.
//!
//! ONNX Runtime's environment is process-global (one per process, by the library's design); the
//! loaded models are cached per file so several `App`s in one process (tests) share them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;
use ort::value::Tensor;
use parking_lot::Mutex;
use tokenizers::{Tokenizer, TruncationParams};

use super::locate::EmbeddingFiles;

pub const DIMENSIONS: usize = 384;
pub const PROVIDER: &str = "local";

/// A sentence-embedding model Steward can run.
#[derive(Debug)]
pub struct ModelSpec {
    /// The id settings and spaces use.
    pub id: &'static str,
    pub name: &'static str,
    pub languages: &'static str,
    /// Its directory under the models directory.
    pub dir: &'static str,
    /// Model files in that directory, best first (builds made at install, then the published one).
    pub onnx: &'static [&'static str],
    /// The sequence limit its model card states.
    pub max_tokens: usize,
    pub query_prefix: &'static str,
    pub passage_prefix: &'static str,
    /// Embedding cost relative to MiniLM at the same text length (measured, docs/performance.md).
    pub relative_cost: f32,
}

pub const MINILM: ModelSpec = ModelSpec {
    id: "all-minilm-l6-v2",
    name: "all-MiniLM-L6-v2 (English)",
    languages: "English",
    dir: "minilm",
    onnx: &["model.fused.q8.onnx", "model.q8.onnx", "model.onnx"],
    max_tokens: 256,
    query_prefix: "",
    passage_prefix: "",
    relative_cost: 1.0,
};

pub const E5_SMALL: ModelSpec = ModelSpec {
    id: "multilingual-e5-small",
    name: "multilingual-e5-small (about 100 languages)",
    languages: "about 100 languages",
    dir: "e5-small",
    onnx: &["model.onnx"],
    max_tokens: 512,
    query_prefix: "query: ",
    passage_prefix: "passage: ",
    relative_cost: 3.5,
};

/// Every model, the default first.
pub const MODELS: [&ModelSpec; 2] = [&MINILM, &E5_SMALL];

/// The model of id `id`.
pub fn spec(id: &str) -> Option<&'static ModelSpec> {
    MODELS.into_iter().find(|m| m.id == id)
}

/// An embedding space: one model at one sequence limit. Its id (`all-minilm-l6-v2@256`) is stored
/// with every vector and with each workspace's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Space {
    pub model: &'static ModelSpec,
    pub max_tokens: usize,
}

impl PartialEq for ModelSpec {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for ModelSpec {}

impl std::hash::Hash for ModelSpec {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id.hash(state)
    }
}

/// The space every data dir written before spaces existed is in: MiniLM truncating at 128 tokens.
pub const LEGACY_SPACE: &str = "all-minilm-l6-v2@128";

impl Space {
    pub fn of(model: &'static ModelSpec, max_tokens: usize) -> Space {
        Space { model, max_tokens: max_tokens.clamp(16, model.max_tokens.max(16)) }
    }

    pub fn id(&self) -> String {
        format!("{}@{}", self.model.id, self.max_tokens)
    }

    /// The space of a stored id (`None`: a model this build does not know).
    pub fn parse(id: &str) -> Option<Space> {
        let (m, n) = id.split_once('@')?;
        Some(Space { model: spec(m)?, max_tokens: n.parse().ok()? })
    }
}

impl std::fmt::Display for Space {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.model.id, self.max_tokens)
    }
}

/// Padding budget: a batch holds at most this many token slots (sequences × longest length).
/// Small batches keep the activations in cache; measured best on 2 cores.
const BATCH_TOKEN_BUDGET: usize = 1024;
const MAX_BATCH_SEQUENCES: usize = 64;
/// Sequences at least this long run alone. The int8 model quantizes each batch's activations with
/// one scale, so a batched text's vector depends slightly on its batch-mates (Cranfield hybrid
/// nDCG@10 moved by ±0.003 between ingestions of the same documents); alone, a text always gets
/// the same vector. At this length one sequence keeps the matrix products busy: measured on
/// Cranfield, as fast as batching (8.4–9.0 s vs 8.9 s in `steward bench embed`). Shorter texts
/// are still batched, where the per-run overhead would dominate.
const SOLO_TOKENS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("cannot load ONNX Runtime from {path}: {message}")]
    Runtime { path: PathBuf, message: String },
    #[error("cannot load the embedding model {path}: {message}")]
    Model { path: PathBuf, message: String },
    #[error("cannot load the tokenizer {path}: {message}")]
    Tokenizer { path: PathBuf, message: String },
    #[error("embedding failed: {0}")]
    Inference(String),
}

/// What one call embedded.
#[derive(Debug, Clone)]
pub struct Embedded {
    pub vectors: Vec<Vec<f32>>,
    /// Tokens the model saw (after truncation, special tokens included).
    pub tokens: usize,
}

pub struct Embedder {
    space: Space,
    tokenizer: Tokenizer,
    /// One single-threaded session per parallel worker.
    sessions: Vec<Mutex<Session>>,
    query_session: Mutex<Session>,
    max_tokens: usize,
    uses_token_types: bool,
    output: String,
}

fn ort_environment(lib: &Path) -> Result<&'static ort::environment::Environment, EmbedError> {
    static ENV: OnceLock<Result<ort::environment::Environment, String>> = OnceLock::new();
    let r = ENV.get_or_init(|| {
        ort::init_from(lib)
            .map_err(|e| e.to_string())?
            .with_name("steward")
            .with_telemetry(false)
            .build()
            .map_err(|e| e.to_string())
    });
    r.as_ref().map_err(|m| EmbedError::Runtime { path: lib.to_path_buf(), message: m.clone() })
}

/// A session with the CPU arena on and memory patterns off: input shapes change with every batch,
/// and per-shape patterns cost more memory (about 90 MB on Cranfield) and time than they save.
fn session(env: &ort::environment::Environment, onnx: &Path, threads: usize) -> Result<Session, EmbedError> {
    let err = |e: ort::Error| EmbedError::Model { path: onnx.to_path_buf(), message: e.to_string() };
    Session::builder(env)
        .map_err(err)?
        .with_execution_providers([ort::ep::CPU::default().with_arena_allocator(true).build()])
        .map_err(|e| err(e.into()))?
        .with_memory_pattern(false)
        .map_err(|e| err(e.into()))?
        .with_optimization_level(GraphOptimizationLevel::All)
        .map_err(|e| err(e.into()))?
        .with_intra_threads(threads)
        .map_err(|e| err(e.into()))?
        .with_inter_threads(1)
        .map_err(|e| err(e.into()))?
        // Only the query session has a pool (the ingestion sessions are single-threaded); letting
        // its second thread spin briefly between operators cuts a short query's latency, measured.
        .with_intra_op_spinning(threads > 1)
        .map_err(|e| err(e.into()))?
        // ... but not after the run: a thread still spinning then takes a core from the rest of
        // the search (vector search, SQLite, snippets) on a small machine
        .with_config_entry("session.force_spinning_stop", "1")
        .map_err(|e| err(e.into()))?
        // the built model's element-wise operators (see `kernels`); unused by other models
        .with_operators(super::kernels::domain().map_err(err)?)
        .map_err(|e| err(e.into()))?
        .commit_from_file(onnx)
        .map_err(err)
}

impl Embedder {
    /// Loads the model (cached per file, thread count and length limit).
    ///
    /// The cache is a process global on purpose (a documented exception to "state lives in
    /// `App`", docs/ARCHITECTURE.md): a loaded model holds about 90 MB and takes a second or two
    /// to build, and several `App`s in one process (the test suite, `bench tune`) load the same
    /// file; each `App` still owns its handle (`Models::embedder`). It is keyed by everything
    /// that makes two loads differ, so no `App` sees another's configuration.
    pub fn load(files: &EmbeddingFiles, threads: usize, space: Space) -> Result<Arc<Embedder>, EmbedError> {
        type Cache = Mutex<HashMap<(PathBuf, usize, usize), Arc<Embedder>>>;
        static CACHE: OnceLock<Cache> = OnceLock::new();
        let max_tokens = space.max_tokens;
        let key = (files.onnx.clone(), threads, max_tokens);
        let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
        let mut cache = cache.lock();
        if let Some(e) = cache.get(&key) {
            return Ok(e.clone());
        }
        let env = ort_environment(&files.ort_library)?;
        let mut tokenizer = Tokenizer::from_file(&files.tokenizer)
            .map_err(|e| EmbedError::Tokenizer { path: files.tokenizer.clone(), message: e.to_string() })?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: max_tokens, ..Default::default() }))
            .map_err(|e| EmbedError::Tokenizer { path: files.tokenizer.clone(), message: e.to_string() })?;
        let sessions: Vec<Session> =
            (0..threads.max(1)).map(|_| session(env, &files.onnx, 1)).collect::<Result<_, _>>()?;
        // two threads for a single query: its latency matters more than its throughput
        let query_session = session(env, &files.onnx, threads.clamp(1, 2))?;
        let first = &sessions[0];
        let uses_token_types = first.inputs().iter().any(|i| i.name() == "token_type_ids");
        let output = first
            .outputs()
            .iter()
            .map(|o| o.name().to_string())
            .find(|n| n == "last_hidden_state" || n == "token_embeddings")
            .or_else(|| first.outputs().first().map(|o| o.name().to_string()))
            .ok_or_else(|| EmbedError::Model {
                path: files.onnx.clone(),
                message: "the model has no outputs".into(),
            })?;
        let e = Arc::new(Embedder {
            space,
            tokenizer,
            sessions: sessions.into_iter().map(Mutex::new).collect(),
            query_session: Mutex::new(query_session),
            max_tokens,
            uses_token_types,
            output,
        });
        cache.insert(key, e.clone());
        Ok(e)
    }

    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// The space this embedder's vectors are in.
    pub fn space(&self) -> Space {
        self.space
    }

    /// Token ids of passages (documents' chunks), with the model's passage prefix.
    pub fn tokenize_passages(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>, EmbedError> {
        let prefix = self.space.model.passage_prefix;
        if prefix.is_empty() {
            return self.tokenize(texts);
        }
        let owned: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
        self.tokenize(&owned.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// Token ids of `texts` (truncated), in order.
    pub fn tokenize(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>, EmbedError> {
        let enc = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| EmbedError::Inference(format!("tokenizing: {e}")))?;
        Ok(enc.into_iter().map(|e| e.get_ids().to_vec()).collect())
    }

    /// Embeds `texts` (documents): tokenized once, sorted by length, batched under a padding budget.
    pub fn embed(&self, texts: &[&str]) -> Result<Embedded, EmbedError> {
        let ids = self.tokenize(texts)?;
        self.embed_tokenized(&ids, false)
    }

    /// Embeds passages (documents' chunks) as the model wants them embedded for retrieval.
    pub fn embed_passages(&self, texts: &[&str]) -> Result<Embedded, EmbedError> {
        let ids = self.tokenize_passages(texts)?;
        self.embed_tokenized(&ids, false)
    }

    /// Embeds one query (with the model's query prefix) on the query session.
    pub fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let prefix = self.space.model.query_prefix;
        let ids =
            if prefix.is_empty() { self.tokenize(&[text])? } else { self.tokenize(&[&format!("{prefix}{text}")])? };
        let mut out = self.embed_tokenized(&ids, true)?;
        out.vectors.pop().ok_or_else(|| EmbedError::Inference("no vector".into()))
    }

    /// Embeds pre-tokenized inputs.
    pub fn embed_tokenized(&self, ids: &[Vec<u32>], query: bool) -> Result<Embedded, EmbedError> {
        let tokens: usize = ids.iter().map(|v| v.len()).sum();
        let batches = plan_batches(ids);
        let mut vectors: Vec<Vec<f32>> = vec![Vec::new(); ids.len()];
        if query || batches.len() == 1 || self.sessions.len() == 1 {
            let session = if query { &self.query_session } else { &self.sessions[0] };
            for b in &batches {
                let seqs: Vec<&[u32]> = b.iter().map(|&i| ids[i].as_slice()).collect();
                for (k, v) in self.run(&seqs, session)?.into_iter().enumerate() {
                    vectors[b[k]] = v;
                }
            }
            return Ok(Embedded { vectors, tokens });
        }
        // Parallel: each worker owns a session and takes the next batch.
        let next = std::sync::atomic::AtomicUsize::new(0);
        type BatchOut = Result<Vec<(usize, Vec<Vec<f32>>)>, EmbedError>;
        let results: Vec<BatchOut> = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .sessions
                .iter()
                .map(|session| {
                    let next = &next;
                    let batches = &batches;
                    scope.spawn(move || {
                        let mut done = Vec::new();
                        loop {
                            let bi = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(b) = batches.get(bi) else { break };
                            let seqs: Vec<&[u32]> = b.iter().map(|&i| ids[i].as_slice()).collect();
                            done.push((bi, self.run(&seqs, session)?));
                        }
                        Ok(done)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(EmbedError::Inference("an embedding thread crashed".into()))))
                .collect()
        });
        for r in results {
            for (bi, vs) in r? {
                for (k, v) in vs.into_iter().enumerate() {
                    vectors[batches[bi][k]] = v;
                }
            }
        }
        Ok(Embedded { vectors, tokens })
    }

    fn run(&self, batch: &[&[u32]], session: &Mutex<Session>) -> Result<Vec<Vec<f32>>, EmbedError> {
        let n = batch.len();
        let len = batch.iter().map(|b| b.len()).max().unwrap_or(0).max(1);
        let mut input_ids = vec![0i64; n * len];
        let mut mask = vec![0i64; n * len];
        for (r, seq) in batch.iter().enumerate() {
            for (c, id) in seq.iter().enumerate() {
                input_ids[r * len + c] = *id as i64;
                mask[r * len + c] = 1;
            }
        }
        let shape = [n, len];
        let inf = |e: ort::Error| EmbedError::Inference(e.to_string());
        let ids_t = Tensor::from_array((shape, input_ids)).map_err(inf)?;
        let mask_t = Tensor::from_array((shape, mask.clone())).map_err(inf)?;
        let mut session = session.lock();
        let outputs = if self.uses_token_types {
            let types_t = Tensor::from_array((shape, vec![0i64; n * len])).map_err(inf)?;
            session
                .run(ort::inputs!["input_ids" => ids_t, "attention_mask" => mask_t, "token_type_ids" => types_t])
                .map_err(inf)?
        } else {
            session.run(ort::inputs!["input_ids" => ids_t, "attention_mask" => mask_t]).map_err(inf)?
        };
        let (out_shape, data) = outputs[self.output.as_str()].try_extract_tensor::<f32>().map_err(inf)?;
        let dims: Vec<usize> = out_shape.iter().map(|d| *d as usize).collect();
        if dims.len() != 3 || dims[0] != n || dims[1] != len {
            return Err(EmbedError::Inference(format!("unexpected output shape {dims:?}")));
        }
        let hidden = dims[2];
        let mut result = Vec::with_capacity(n);
        for r in 0..n {
            let mut acc = vec![0f32; hidden];
            let mut count = 0f32;
            for c in 0..len {
                if mask[r * len + c] == 1 {
                    let row = &data[(r * len + c) * hidden..(r * len + c + 1) * hidden];
                    for (a, x) in acc.iter_mut().zip(row) {
                        *a += x;
                    }
                    count += 1.0;
                }
            }
            let count = count.max(1.0);
            for a in acc.iter_mut() {
                *a /= count;
            }
            normalize(&mut acc);
            result.push(acc);
        }
        Ok(result)
    }
}

/// Groups input indices into batches: sorted by length; a sequence of [`SOLO_TOKENS`] or more is a
/// batch of its own; shorter ones are grouped while the padded size (count × longest) fits
/// [`BATCH_TOKEN_BUDGET`].
fn plan_batches(ids: &[Vec<u32>]) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by_key(|&i| ids[i].len());
    let mut batches = Vec::new();
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && end - start < MAX_BATCH_SEQUENCES {
            let len = ids[order[end]].len();
            if len >= SOLO_TOKENS || (end - start + 1) * len > BATCH_TOKEN_BUDGET {
                break;
            }
            end += 1;
        }
        batches.push(order[start..end].to_vec());
        start = end;
    }
    batches
}

pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in v.iter_mut() {
            *x /= norm;
        }
    }
}

pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_sequences_run_alone_and_short_ones_are_batched_by_length() {
        let lens = [70usize, 5, 200, 6, 64, 63, 5];
        let ids: Vec<Vec<u32>> = lens.iter().map(|&n| vec![1; n]).collect();
        let batches = plan_batches(&ids);
        // every index exactly once
        let mut all: Vec<usize> = batches.iter().flatten().copied().collect();
        all.sort();
        assert_eq!(all, (0..lens.len()).collect::<Vec<_>>());
        for b in &batches {
            let longest = b.iter().map(|&i| lens[i]).max().unwrap();
            if longest >= SOLO_TOKENS {
                assert_eq!(b.len(), 1, "{b:?}");
            }
            assert!(b.len() * longest <= BATCH_TOKEN_BUDGET.max(longest));
        }
        // the short ones (5, 5, 6, 63) share batches: 4 × 63 fits the budget
        assert_eq!(batches.len(), 4, "{batches:?}");
        assert_eq!(batches[0].len(), 4);
        // many short texts are split by the budget
        let ids: Vec<Vec<u32>> = (0..100).map(|_| vec![1; 32]).collect();
        let batches = plan_batches(&ids);
        assert!(batches.iter().all(|b| b.len() * 32 <= BATCH_TOKEN_BUDGET));
        assert_eq!(batches.len(), 100usize.div_ceil(BATCH_TOKEN_BUDGET / 32));
    }
}
