//! `steward bench knowledge`: Cranfield through the HTTP API of a real server process, and a
//! synthetic corpus of 50,000+ chunks. Reports ingestion speed, embedding overhead, search
//! latency and quality, and memory. See docs/performance.md for the method and results.

use std::time::Instant;

use futures::StreamExt;
use serde_json::{Value, json};

use super::cranfield::Collection;
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

/// Synthetic documents of about `chunks` chunks: paragraphs recombined from Cranfield sentences
/// (a fixed pseudo-random order), ten 600-character chunks per document.
pub fn synthetic_docs(c: &Collection, chunks: usize) -> Vec<Value> {
    let sentences: Vec<&str> =
        c.docs.iter().flat_map(|d| d.body.split(" . ")).map(|s| s.trim()).filter(|s| s.len() > 30).collect();
    let mut next = super::xorshift(0x9E3779B97F4A7C15);
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
    /// (seconds since the start, chunks searchable then), sampled every 15 s while ingesting.
    pub rate: Vec<(f64, i64)>,
    /// Per mode: (mode, p50, p95 end to end, p50, p95 server), ms.
    pub modes: Vec<(&'static str, f64, f64, f64, f64)>,
    pub peak_rss_mib: f64,
    pub rss_after_mib: f64,
    pub index_bytes: u64,
    pub database_bytes: u64,
}

async fn timed_search(s: &ChildServer, query: &str, mode: &str) -> anyhow::Result<(f64, f64)> {
    let t = Instant::now();
    let v = s
        .send(reqwest::Method::POST, "/api/v1/document/search", &json!({"query": query, "mode": mode, "limit": 10}))
        .await?;
    Ok((t.elapsed().as_secs_f64() * 1000.0, v["tookMs"].as_f64().unwrap_or(f64::NAN)))
}

/// The synthetic corpus of about `chunks` chunks through the HTTP API: ingestion (with the rate
/// over time), then every Cranfield query once per mode as warm-up and once measured.
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
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (http, base, token, done) = (s.http.clone(), s.base.clone(), s.token.clone(), done.clone());
        tokio::spawn(async move {
            let mut rate = Vec::new();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                tokio::time::sleep(std::time::Duration::from_secs(15)).await;
                let r = http.get(format!("{base}/api/v1/document/progress")).bearer_auth(&token).send().await;
                if let Ok(r) = r
                    && let Ok(v) = r.json::<Value>().await
                {
                    rate.push((started.elapsed().as_secs_f64(), v["index"]["liveChunks"].as_i64().unwrap_or(0)));
                }
            }
            rate
        })
    };
    post_all(&s, docs, concurrency).await?;
    let p = s.wait_idle().await?;
    let ingest_seconds = started.elapsed().as_secs_f64();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let rate = sampler.await.unwrap_or_default();
    let mut modes = Vec::new();
    for mode in ["bm25", "vector", "hybrid"] {
        for q in &c.queries {
            timed_search(&s, &q.text, mode).await?;
        }
        let (mut e2e, mut server) = (Vec::new(), Vec::new());
        for q in &c.queries {
            let (ms, took) = timed_search(&s, &q.text, mode).await?;
            e2e.push(ms);
            server.push(took);
        }
        modes.push((mode, median(&e2e), percentile(&e2e, 95.0), median(&server), percentile(&server, 95.0)));
        eprintln!(
            "synthetic {mode}: p50 {:.2} ms, p95 {:.2} ms (server {:.2} / {:.2})",
            median(&e2e),
            percentile(&e2e, 95.0),
            median(&server),
            percentile(&server, 95.0)
        );
    }
    let (peak, now) = s.rss();
    let data = s.data_dir();
    let r = SyntheticReport {
        docs: n,
        chunks: p["index"]["liveChunks"].as_i64().unwrap_or(0),
        ingest_seconds,
        rate,
        modes,
        peak_rss_mib: peak,
        rss_after_mib: now,
        index_bytes: super::retrieval::dir_size(&data.join("index")),
        database_bytes: ["steward.db", "steward.db-wal"]
            .iter()
            .map(|f| std::fs::metadata(data.join(f)).map(|m| m.len()).unwrap_or(0))
            .sum(),
    };
    s.stop();
    Ok(r)
}
