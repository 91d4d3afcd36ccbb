//! `steward bench knowledge`: Cranfield through the HTTP API of a real server process, and a
//! synthetic corpus of 50,000+ chunks. Reports ingestion speed, embedding overhead, search
//! latency and quality, and memory. See docs/performance.md for the method and results.

use std::time::Instant;

use futures::StreamExt;
use serde_json::{Value, json};

use super::cranfield::{Collection, ndcg_at, recall_at};
use super::server::ChildServer;
use super::{median, percentile};

/// Settings the benchmark ingests Cranfield with: one chunk per abstract.
pub fn cranfield_ingestion() -> Value {
    json!({"chunkingStrategy": "fixed_window", "fixedWindowChunkSize": 4000, "fixedWindowChunkOverlap": 0})
}

pub struct IngestRun {
    pub seconds: f64,
    pub docs: usize,
    pub chunks: i64,
    pub peak_rss_mib: f64,
}

async fn post_all(s: &ChildServer, docs: Vec<Value>, concurrency: usize) -> anyhow::Result<()> {
    let results: Vec<anyhow::Result<Value>> = futures::stream::iter(
        docs.into_iter().map(|d| async move { s.send(reqwest::Method::POST, "/api/v1/document/", &d).await }),
    )
    .buffer_unordered(concurrency)
    .collect()
    .await;
    for r in results {
        r?;
    }
    Ok(())
}

fn cranfield_docs(c: &Collection) -> Vec<Value> {
    c.docs
        .iter()
        .filter(|d| !d.body.trim().is_empty())
        .map(|d| {
            let title = if d.title.trim().is_empty() { format!("Cranfield {}", d.id) } else { d.title.clone() };
            json!({"title": title, "content": d.body, "metadata": {"cranfieldId": d.id, "author": d.author}})
        })
        .collect()
}

/// Ingests Cranfield into a fresh server; returns the timing and the server (still running).
pub async fn ingest_cranfield(
    c: &Collection,
    ingestion: &Value,
    concurrency: usize,
) -> anyhow::Result<(IngestRun, ChildServer)> {
    let s = ChildServer::start(&[])?;
    s.send_session(reqwest::Method::PUT, "/api/v1/settings/ingestion", ingestion).await?;
    let docs = cranfield_docs(c);
    let n = docs.len();
    let started = Instant::now();
    post_all(&s, docs, concurrency).await?;
    let p = s.wait_idle().await?;
    let seconds = started.elapsed().as_secs_f64();
    anyhow::ensure!(p["ready"].as_u64() == Some(n as u64), "not every document became ready: {p}");
    let (peak, _) = s.rss();
    Ok((IngestRun { seconds, docs: n, chunks: p["index"]["liveChunks"].as_i64().unwrap_or(0), peak_rss_mib: peak }, s))
}

pub struct ModeReport {
    pub mode: &'static str,
    pub ndcg10: f64,
    pub ndcg10_odd: f64,
    pub ndcg10_even: f64,
    pub recall100: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub server_p50_ms: f64,
    pub server_p95_ms: f64,
}

async fn search(s: &ChildServer, query: &str, mode: &str, limit: usize) -> anyhow::Result<(Value, f64)> {
    let t = Instant::now();
    let debug = std::env::var("BENCH_SEARCH_DEBUG").is_ok();
    let v = s
        .send(
            reqwest::Method::POST,
            "/api/v1/document/search",
            &json!({"query": query, "mode": mode, "limit": limit, "includeDebug": debug}),
        )
        .await?;
    if debug && limit == 10 {
        eprintln!("{mode} {}", v["debug"]["timingsMs"]);
    }
    Ok((v, t.elapsed().as_secs_f64() * 1000.0))
}

/// Quality (limit 100) and latency (limit 10, sequential, after a warm-up pass) per mode.
pub async fn evaluate(s: &ChildServer, c: &Collection) -> anyhow::Result<Vec<ModeReport>> {
    let mut out = Vec::new();
    for mode in ["bm25", "vector", "hybrid"] {
        let (mut all, mut odd, mut even, mut rec) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (i, q) in c.queries.iter().enumerate() {
            let Some(judged) = c.qrels.get(&q.id) else { continue };
            let (v, _) = search(s, &q.text, mode, 100).await?;
            let ranked: Vec<u32> = v["results"]
                .as_array()
                .map(|a| a.iter().filter_map(|h| h["metadata"]["cranfieldId"].as_u64().map(|x| x as u32)).collect())
                .unwrap_or_default();
            let n = ndcg_at(&ranked, judged, 10);
            all.push(n);
            if i % 2 == 1 {
                odd.push(n)
            } else {
                even.push(n)
            }
            rec.push(recall_at(&ranked, judged, 100));
        }
        for q in &c.queries {
            search(s, &q.text, mode, 10).await?; // warm-up
        }
        let (mut e2e, mut server) = (Vec::new(), Vec::new());
        for q in &c.queries {
            let (v, ms) = search(s, &q.text, mode, 10).await?;
            e2e.push(ms);
            server.push(v["tookMs"].as_f64().unwrap_or(f64::NAN));
        }
        let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len().max(1) as f64;
        out.push(ModeReport {
            mode,
            ndcg10: mean(&all),
            ndcg10_odd: mean(&odd),
            ndcg10_even: mean(&even),
            recall100: mean(&rec),
            p50_ms: median(&e2e),
            p95_ms: percentile(&e2e, 95.0),
            server_p50_ms: median(&server),
            server_p95_ms: percentile(&server, 95.0),
        });
    }
    Ok(out)
}

/// Synthetic documents of about `chunks` chunks: paragraphs recombined from Cranfield sentences
/// (a fixed pseudo-random order), ten 600-character chunks per document.
pub fn synthetic_docs(c: &Collection, chunks: usize) -> Vec<Value> {
    let sentences: Vec<&str> =
        c.docs.iter().flat_map(|d| d.body.split(" . ")).map(|s| s.trim()).filter(|s| s.len() > 30).collect();
    let mut state: u64 = 0x9E3779B97F4A7C15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let docs = chunks.div_ceil(10);
    (0..docs)
        .map(|i| {
            let mut text = String::new();
            while text.len() < 5800 {
                text.push_str(sentences[(next() % sentences.len() as u64) as usize]);
                text.push_str(". ");
            }
            json!({"title": format!("Synthetic report {i}"), "content": text, "metadata": {"synthetic": i}})
        })
        .collect()
}

pub struct SyntheticReport {
    pub docs: usize,
    pub chunks: i64,
    pub ingest_seconds: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub server_p50_ms: f64,
    pub server_p95_ms: f64,
    pub peak_rss_mib: f64,
    pub rss_after_mib: f64,
}

pub async fn synthetic(c: &Collection, chunks: usize, concurrency: usize) -> anyhow::Result<SyntheticReport> {
    let s = ChildServer::start(&[])?;
    s.send_session(
        reqwest::Method::PUT,
        "/api/v1/settings/ingestion",
        &json!({"chunkingStrategy": "fixed_window", "fixedWindowChunkSize": 600, "fixedWindowChunkOverlap": 0}),
    )
    .await?;
    let docs = synthetic_docs(c, chunks);
    let n = docs.len();
    let started = Instant::now();
    post_all(&s, docs, concurrency).await?;
    let p = s.wait_idle().await?;
    let ingest_seconds = started.elapsed().as_secs_f64();
    for q in &c.queries {
        search(&s, &q.text, "hybrid", 10).await?;
    }
    let (mut e2e, mut server) = (Vec::new(), Vec::new());
    for q in &c.queries {
        let (v, ms) = search(&s, &q.text, "hybrid", 10).await?;
        e2e.push(ms);
        server.push(v["tookMs"].as_f64().unwrap_or(f64::NAN));
    }
    let (peak, now) = s.rss();
    let r = SyntheticReport {
        docs: n,
        chunks: p["index"]["liveChunks"].as_i64().unwrap_or(0),
        ingest_seconds,
        p50_ms: median(&e2e),
        p95_ms: percentile(&e2e, 95.0),
        server_p50_ms: median(&server),
        server_p95_ms: percentile(&server, 95.0),
        peak_rss_mib: peak,
        rss_after_mib: now,
    };
    s.stop();
    Ok(r)
}
