//! `steward bench retrieval --collection DIR`: any BEIR-shaped collection through the HTTP API of a
//! real server with the product's default settings, every figure beside the plain reference
//! computed in the same run (`plain.rs`):
//!
//! 1. **Ingestion**: the documents (`title`, `content` = text) posted 8 at a time to a fresh server
//!    until every one is ready; wall time, documents and chunks per second, peak RSS (`--runs`
//!    fresh servers; medians).
//! 2. **Quality** per mode (bm25, vector, hybrid): nDCG@10 (also on the odd and even halves of the
//!    queries), recall@100, MRR@10, with a paired 95 % interval against the plain reference.
//! 3. **Latency** per mode: every query once as warm-up, then once more, one at a time: p50/p95
//!    end to end and as the server reports it (`tookMs`).
//! 4. Optionally (`--python`) the plain Python pipeline (`scripts/plain-pipeline.py`: bm25s +
//!    onnxruntime, the same model and sequence limit) on the same machine, for its ingest time.
//! 5. Optionally (`--rerank-model`) the answer turn's retrieval with reranking on: the `rerank`
//!    model slot set to that model on an OpenAI-compatible server (`--rerank-base-url`, key from
//!    `OPENAI_COMPATIBLE_API_KEY`), the default agent's retrieval with `rerankEnabled` (50
//!    candidates, the best 10 kept), every query through `POST /retrieval/answer`, scored the same
//!    way and beside the same answers without reranking.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use futures::StreamExt;
use serde_json::{Value, json};

pub use super::api::ModeFigures;
use super::collection::{Collection, Quality, Scorer, paired_interval};
use super::plain;
use super::server::ChildServer;
use super::{median, percentile};

pub struct Options {
    pub collection: PathBuf,
    pub runs: usize,
    pub concurrency: usize,
    /// Run `scripts/plain-pipeline.py` for the Python pipeline's ingest time.
    pub python: bool,
    pub rerank_model: Option<String>,
    pub rerank_base_url: Option<String>,
    /// Extra environment for the server (`STEWARD_*` settings under test).
    pub env: Vec<(String, String)>,
}

/// The metadata key that carries a document's collection id.
const ID_KEY: &str = "benchId";

fn docs_of(c: &Collection) -> Vec<Value> {
    c.docs
        .iter()
        .filter(|d| !(d.title.trim().is_empty() && d.text.trim().is_empty()))
        .map(|d| {
            let title = if d.title.trim().is_empty() { format!("Document {}", d.id) } else { d.title.clone() };
            let content = if d.text.trim().is_empty() { d.title.clone() } else { d.text.clone() };
            json!({"title": title, "content": content, "metadata": {ID_KEY: d.id}})
        })
        .collect()
}

pub struct Ingested {
    /// The server's document id → the collection's.
    pub ids: HashMap<String, String>,
    pub seconds: f64,
    pub docs: usize,
    pub chunks: i64,
    pub peak_rss_mib: f64,
}

/// Posts every document to a fresh server and waits until all are ready.
pub async fn ingest(
    c: &Collection,
    concurrency: usize,
    env: &[(&str, String)],
) -> anyhow::Result<(Ingested, ChildServer)> {
    let s = ChildServer::start(env)?;
    let docs = docs_of(c);
    let n = docs.len();
    let started = Instant::now();
    let results: Vec<anyhow::Result<(String, String)>> = futures::stream::iter(docs.into_iter().map(|d| {
        let s = &s;
        async move {
            let v = s.send(reqwest::Method::POST, "/api/v1/document/", &d).await?;
            let id = v["id"].as_str().ok_or_else(|| anyhow::anyhow!("no document id: {v}"))?.to_string();
            Ok((id, d["metadata"][ID_KEY].as_str().unwrap_or_default().to_string()))
        }
    }))
    .buffer_unordered(concurrency)
    .collect()
    .await;
    let ids: HashMap<String, String> = results.into_iter().collect::<anyhow::Result<_>>()?;
    let p = s.wait_idle().await?;
    let seconds = started.elapsed().as_secs_f64();
    anyhow::ensure!(p["ready"].as_u64() == Some(n as u64), "not every document became ready: {p}");
    let peak_rss_mib = s.rss().0;
    Ok((Ingested { ids, seconds, docs: n, chunks: p["index"]["liveChunks"].as_i64().unwrap_or(0), peak_rss_mib }, s))
}

/// How a query is put to the server.
#[derive(Clone, Copy)]
pub enum Ask<'a> {
    /// `POST /document/search` in a mode.
    Search(&'a str),
    /// `POST /retrieval/answer` as this agent (its retrieval settings, reranking included).
    Answer(&'a str),
}

/// One search; the ranked collection ids and the end-to-end milliseconds.
async fn search(
    s: &ChildServer,
    ids: &HashMap<String, String>,
    query: &str,
    ask: Ask<'_>,
    limit: usize,
) -> anyhow::Result<(Vec<String>, f64, f64)> {
    let (path, body) = match ask {
        Ask::Search(mode) => ("/api/v1/document/search", json!({"query": query, "mode": mode, "limit": limit})),
        Ask::Answer(agent) => ("/api/v1/retrieval/answer", json!({"query": query, "agentId": agent})),
    };
    let t = Instant::now();
    let v = s.send(reqwest::Method::POST, path, &body).await?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let ranked = v["results"]
        .as_array()
        .map(|a| a.iter().filter_map(|h| h["documentId"].as_str().and_then(|d| ids.get(d)).cloned()).collect())
        .unwrap_or_default();
    let took = v["tookMs"].as_f64().or(v["diagnostics"]["durationMs"].as_f64()).unwrap_or(f64::NAN);
    Ok((ranked, ms, took))
}

fn r2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Quality (limit 100) and latency (limit 10, one at a time, after a warm-up pass) of a way of
/// asking (an answer is asked once: its own result count, its latency).
pub async fn evaluate(
    s: &ChildServer,
    ids: &HashMap<String, String>,
    c: &Collection,
    name: &str,
    ask: Ask<'_>,
) -> anyhow::Result<ModeFigures> {
    let mut scorer = Scorer::default();
    let (mut e2e, mut server) = (Vec::new(), Vec::new());
    for (i, q, judged) in c.judged_queries() {
        let (ranked, ms, took) = search(s, ids, &q.text, ask, 100).await?;
        scorer.add(i, &ranked, judged);
        if matches!(ask, Ask::Answer(_)) {
            e2e.push(ms);
            server.push(took);
        }
    }
    if matches!(ask, Ask::Search(_)) {
        for (_, q, _) in c.judged_queries() {
            search(s, ids, &q.text, ask, 10).await?;
        }
        for (_, q, _) in c.judged_queries() {
            let (_, ms, took) = search(s, ids, &q.text, ask, 10).await?;
            e2e.push(ms);
            server.push(took);
        }
    }
    Ok(ModeFigures {
        mode: name.to_string(),
        quality: scorer.quality(),
        p50_ms: r2(median(&e2e)),
        p95_ms: r2(percentile(&e2e, 95.0)),
        server_p50_ms: r2(median(&server)),
        server_p95_ms: r2(percentile(&server, 95.0)),
        per_query: scorer.per_query,
    })
}

/// The plain reference's quality per way of ranking, and what building it took.
pub struct Reference {
    pub bm25: (Quality, Vec<f64>),
    pub vectors: (Quality, Vec<f64>),
    pub rrf: (Quality, Vec<f64>),
    pub bm25_build_seconds: f64,
    pub embed_seconds: f64,
    pub embed_tokens: usize,
    pub max_tokens: usize,
}

/// Computes the plain reference in this process with the product's embedding model.
pub fn reference(c: &Collection, models_dir: Option<&Path>) -> anyhow::Result<Reference> {
    let mut config = crate::config::Config::with_data_dir(std::env::temp_dir());
    config.models_dir = models_dir.map(Path::to_path_buf);
    let models = crate::models::Models::new(&config);
    let embedder = models.embedder().map_err(|e| anyhow::anyhow!("{e}"))?;
    let started = Instant::now();
    let bm25 = plain::Bm25::build(c);
    let bm25_build_seconds = started.elapsed().as_secs_f64();
    let dense = plain::Dense::build(c, &embedder)?;
    let (mut sb, mut sv, mut sr) = (Scorer::default(), Scorer::default(), Scorer::default());
    let ids = |list: &[usize]| list.iter().map(|&d| c.docs[d].id.clone()).collect::<Vec<_>>();
    for (i, q, judged) in c.judged_queries() {
        let lex = bm25.search(&q.text, plain::DEPTH);
        let qv = embedder.embed_query(&q.text).map_err(|e| anyhow::anyhow!("{e}"))?;
        let vec = dense.search(&qv, plain::DEPTH);
        sb.add(i, &ids(&lex.iter().map(|x| x.0).collect::<Vec<_>>()), judged);
        sv.add(i, &ids(&vec.iter().map(|x| x.0).collect::<Vec<_>>()), judged);
        sr.add(i, &ids(&plain::rrf(&[&lex, &vec])), judged);
    }
    Ok(Reference {
        bm25: (sb.quality(), sb.per_query),
        vectors: (sv.quality(), sv.per_query),
        rrf: (sr.quality(), sr.per_query),
        bm25_build_seconds,
        embed_seconds: dense.seconds,
        embed_tokens: dense.tokens,
        max_tokens: embedder.max_tokens(),
    })
}

/// The chunk texts the server embedded, as `[{id, text}]` (id: the collection's document id), for
/// the Python pipeline to embed the same texts.
fn embedded_texts(s: &ChildServer) -> anyhow::Result<Vec<Value>> {
    let db = crate::storage::Db::open_without_migrating(&s.data_dir().join("steward.db"), 1)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let rows = crate::documents::embeddings::embedded_texts(&db).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(rows
        .into_iter()
        .filter_map(|(meta, text)| {
            let m: Value = serde_json::from_str(&meta).ok()?;
            Some(json!({"id": m[ID_KEY].as_str()?, "text": text}))
        })
        .collect())
}

/// The Python pipeline's figures (`scripts/plain-pipeline.py` on `texts`), when it runs here.
fn python_pipeline(collection: &Path, texts: &Path, max_tokens: usize) -> anyhow::Result<Value> {
    let script = Path::new("scripts/plain-pipeline.py");
    anyhow::ensure!(script.exists(), "scripts/plain-pipeline.py not found (run from the checkout)");
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(collection)
        .arg("--texts")
        .arg(texts)
        .args(["--max-tokens", &max_tokens.to_string(), "--threads", &cores.to_string()])
        .stderr(std::process::Stdio::inherit())
        .output()?;
    anyhow::ensure!(out.status.success(), "the Python pipeline failed");
    Ok(serde_json::from_slice(&out.stdout)?)
}

fn interval_json(a: &[f64], b: &[f64]) -> Value {
    let (d, lo, hi) = paired_interval(a, b);
    let r4 = |x: f64| (x * 10_000.0).round() / 10_000.0;
    json!({"difference": r4(d), "low": r4(lo), "high": r4(hi)})
}

pub async fn run(o: &Options) -> anyhow::Result<Value> {
    let c = Collection::load(&o.collection)?;
    let judged = c.judged_queries().count();
    eprintln!("{}: {} documents, {} judged queries", c.name, c.docs.len(), judged);
    let mut env: Vec<(&str, String)> = o.env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    if let Some(url) = &o.rerank_base_url {
        env.push(("OPENAI_COMPATIBLE_BASE_URL", url.clone()));
        env.push((
            "OPENAI_COMPATIBLE_API_KEY",
            std::env::var("OPENAI_COMPATIBLE_API_KEY").unwrap_or_else(|_| "not-needed".into()),
        ));
    }

    let mut runs = Vec::new();
    let mut server = None;
    for run in 0..o.runs.max(1) {
        if let Some(s) = server.take() {
            ChildServer::stop(s);
        }
        let (ing, s) = ingest(&c, o.concurrency, &env).await?;
        eprintln!(
            "ingestion run {}: {:.2} s ({} documents, {} chunks), peak RSS {:.0} MiB",
            run + 1,
            ing.seconds,
            ing.docs,
            ing.chunks,
            ing.peak_rss_mib
        );
        runs.push(ing);
        server = Some(s);
    }
    let s = server.ok_or_else(|| anyhow::anyhow!("no server"))?;
    let ids = runs.last().map(|r| r.ids.clone()).unwrap_or_default();
    let secs: Vec<f64> = runs.iter().map(|r| r.seconds).collect();
    let peaks: Vec<f64> = runs.iter().map(|r| r.peak_rss_mib).collect();
    let (docs, chunks) = (runs[0].docs, runs[0].chunks);

    let mut modes = Vec::new();
    for mode in ["bm25", "vector", "hybrid"] {
        let m = evaluate(&s, &ids, &c, mode, Ask::Search(mode)).await?;
        eprintln!(
            "{mode:>7}: nDCG@10 {:.4} (odd {:.4} / even {:.4}), recall@100 {:.4}, MRR@10 {:.4}; p50/p95 {:.2}/{:.2} ms (server {:.2}/{:.2})",
            m.quality.ndcg10,
            m.quality.ndcg10_odd,
            m.quality.ndcg10_even,
            m.quality.recall100,
            m.quality.mrr10,
            m.p50_ms,
            m.p95_ms,
            m.server_p50_ms,
            m.server_p95_ms
        );
        modes.push(m);
    }
    let rerank = match &o.rerank_model {
        Some(model) => {
            let agent = with_rerank(&s, model, false).await?;
            let plain = evaluate(&s, &ids, &c, "answer retrieval", Ask::Answer(&agent)).await?;
            with_rerank(&s, model, true).await?;
            let reranked = evaluate(&s, &ids, &c, "answer retrieval, reranked", Ask::Answer(&agent)).await?;
            eprintln!(
                "answer retrieval: nDCG@10 {:.4} without reranking, {:.4} reranked by {model}",
                plain.quality.ndcg10, reranked.quality.ndcg10
            );
            Some(json!({"model": model, "withoutRerank": plain, "reranked": reranked,
                "paired": interval_json(&reranked.per_query, &plain.per_query)}))
        }
        None => None,
    };
    let after_rss = s.rss();
    let index_bytes = dir_size(&s.data_dir().join("index"));
    let texts_file = tempfile::NamedTempFile::new()?;
    if o.python {
        std::fs::write(texts_file.path(), serde_json::to_vec(&embedded_texts(&s)?)?)?;
    }
    s.stop();

    eprintln!("computing the plain reference in this process…");
    let reference = reference(&c, None)?;
    let show = |name: &str, q: &Quality| {
        eprintln!(
            "{name:>13}: nDCG@10 {:.4} (odd {:.4} / even {:.4}), recall@100 {:.4}, MRR@10 {:.4}",
            q.ndcg10, q.ndcg10_odd, q.ndcg10_even, q.recall100, q.mrr10
        )
    };
    show("plain BM25", &reference.bm25.0);
    show("plain vectors", &reference.vectors.0);
    show("plain RRF", &reference.rrf.0);

    let python = if o.python {
        match python_pipeline(&o.collection, texts_file.path(), reference.max_tokens) {
            Ok(v) => Some(v),
            Err(e) => {
                eprintln!("the Python pipeline did not run: {e}");
                None
            }
        }
    } else {
        None
    };

    let by_mode: HashMap<&str, &ModeFigures> = modes.iter().map(|m| (m.mode.as_str(), m)).collect();
    let vs = |mode: &str, base: &[f64]| by_mode.get(mode).map(|m| interval_json(&m.per_query, base));
    Ok(json!({
        "collection": c.name,
        "documents": docs,
        "judgedQueries": judged,
        "chunks": chunks,
        "machine": {"cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)},
        "ingestion": {
            "runs": secs.iter().map(|x| r2(*x)).collect::<Vec<_>>(),
            "medianSeconds": r2(median(&secs)),
            "documentsPerSecond": r2(docs as f64 / median(&secs)),
            "chunksPerSecond": r2(chunks as f64 / median(&secs)),
            "peakRssMiB": r2(median(&peaks)),
        },
        "rssAfterQueriesMiB": r2(after_rss.1),
        "indexBytes": index_bytes,
        "modes": modes,
        "rerank": rerank,
        "reference": {
            "bm25": reference.bm25.0,
            "vectors": reference.vectors.0,
            "rrf": reference.rrf.0,
            "bm25BuildSeconds": r2(reference.bm25_build_seconds),
            "embedSeconds": r2(reference.embed_seconds),
            "embedTokens": reference.embed_tokens,
            "maxTokens": reference.max_tokens,
        },
        "pairedVsReference": {
            "bm25VsPlainBm25": vs("bm25", &reference.bm25.1),
            "vectorVsPlainVectors": vs("vector", &reference.vectors.1),
            "hybridVsPlainRrf": vs("hybrid", &reference.rrf.1),
        },
        "python": python,
    }))
}

/// Sets the `rerank` slot to `model` (openai-compatible) and the default agent's retrieval
/// (`skillSettings["retrieval.answer"]`) to rerank (`on`) or not, published; returns the agent's
/// id.
async fn with_rerank(s: &ChildServer, model: &str, on: bool) -> anyhow::Result<String> {
    s.send_session(
        reqwest::Method::PUT,
        "/api/v1/settings/llm-models",
        &json!({"rerank": {"provider": "openai-compatible", "model": model}}),
    )
    .await?;
    let agents = s.get("/api/v1/agents").await?;
    let agent = agents["agents"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["isDefault"] == true))
        .and_then(|a| a["id"].as_str())
        .ok_or_else(|| anyhow::anyhow!("no default agent: {agents}"))?
        .to_string();
    s.send(
        reqwest::Method::PUT,
        &format!("/api/v1/agents/{agent}"),
        &json!({"skillSettings": {"retrieval.answer": {"rerankEnabled": on, "rerankTopK": 10, "vectorTopK": 50}}}),
    )
    .await?;
    let state = s.get(&format!("/api/v1/agents/{agent}/revision-state")).await?;
    let g = state["draft"]["generation"].clone();
    let cand = s
        .send(
            reqwest::Method::POST,
            &format!("/api/v1/agents/{agent}/revisions/candidates"),
            &json!({"expectedDraftGeneration": g}),
        )
        .await?;
    let cand = cand["id"].as_str().ok_or_else(|| anyhow::anyhow!("no candidate: {cand}"))?;
    s.send(
        reqwest::Method::POST,
        &format!("/api/v1/agents/{agent}/revisions/{cand}/publish"),
        &json!({"expectedDraftGeneration": g, "expectedPublishedRevisionId": state["publishedRevision"]["id"],
                "idempotencyKey": format!("bench-rerank-{on}-{g}")}),
    )
    .await?;
    Ok(agent)
}

/// Bytes of the files under `dir`.
pub fn dir_size(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else { return 0 };
    rd.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            _ => e.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}
