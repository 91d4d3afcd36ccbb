//! `steward bench public-chat`: anonymous visitors on the public link of a real server with the
//! Cranfield collection and the built-in answerer.
//!
//! 1. **Load**: `sessions` visitors at once, each opening a session and sending `messages`
//!    streamed questions one after another (Cranfield queries, round robin). Reported: messages
//!    per second over the whole run, time to the first streamed chunk (p50/p95) and to the end of
//!    the stream, errors by kind (target 0), and the server's peak resident memory sampled during
//!    the run. The per-address rate limit is off for this run (every visitor comes from one
//!    address here); the per-session limit stays at its default.
//! 2. **Idle streams**: `idle_streams` event streams held open on the visitors' conversations
//!    (round robin), each read until its `ready`; reported is the server's resident memory before
//!    and after, and the difference per stream. The stream caps are off for these two runs (they
//!    measure capacity, and every visitor comes from one address).
//! 3. **Caps reached**: the server restarted with the default stream caps; 50 of the visitors
//!    each try to open 10 streams at once from the one address. Reported: streams opened and
//!    refused (429), the server's memory with the caps reached, and per open stream.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::join_all;
use serde_json::{Value, json};

use super::cranfield::Collection;
use super::knowledge::{cranfield_ingestion, ingest_cranfield};
use super::{median, percentile};

const SESSION_HEADER: &str = "x-service-public-session";

/// The highest resident memory (MiB) of `pid` sampled every 20 ms until `stop` is set.
fn sample_peak(pid: u32, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<f64> {
    std::thread::spawn(move || {
        let mut peak: f64 = 0.0;
        while !stop.load(Ordering::Relaxed) {
            if let Some((_, rss)) = super::rss_mib(pid) {
                peak = peak.max(rss);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        peak
    })
}

/// One visitor's run: `(first chunk ms, total ms)` per message, errors, and the conversation.
struct Visit {
    first_ms: Vec<f64>,
    total_ms: Vec<f64>,
    errors: Vec<String>,
    session: Option<String>,
    conversation: Option<String>,
}

async fn open_session(http: &reqwest::Client, base: &str, token: &str) -> anyhow::Result<String> {
    let r = http
        .post(format!("{base}/api/v1/public/chat/{token}/sessions"))
        .json(&json!({"channel": "anonymous_link"}))
        .send()
        .await?;
    anyhow::ensure!(r.status().is_success(), "session: {}", r.status());
    let v: Value = r.json().await?;
    v["publicSessionToken"].as_str().map(str::to_string).ok_or_else(|| anyhow::anyhow!("no session token"))
}

/// Sends one streamed message; `(first chunk ms, total ms, conversation id)`.
async fn message(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    session: &str,
    text: &str,
    conversation: Option<&str>,
) -> anyhow::Result<(f64, f64, String)> {
    let t = Instant::now();
    let mut body = json!({"message": text, "stream": true});
    if let Some(c) = conversation {
        body["conversationId"] = json!(c);
    }
    let r = http
        .post(format!("{base}/api/v1/public/chat/{token}"))
        .header(SESSION_HEADER, session)
        .json(&body)
        .send()
        .await?;
    anyhow::ensure!(r.status().is_success(), "status {}", r.status());
    let mut stream = r.bytes_stream();
    let mut buf = String::new();
    let mut first = None;
    while let Some(piece) = stream.next().await {
        buf.push_str(&String::from_utf8_lossy(&piece?));
        if first.is_none() && buf.contains("event: chunk") {
            first = Some(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    let total = t.elapsed().as_secs_f64() * 1000.0;
    anyhow::ensure!(buf.contains("event: done"), "no done event");
    let cid = buf
        .split("\n\n")
        .find(|b| b.starts_with("event: conversation"))
        .and_then(|b| b.lines().find_map(|l| l.strip_prefix("data:")))
        .and_then(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .and_then(|v| v["conversationId"].as_str().map(str::to_string))
        .ok_or_else(|| anyhow::anyhow!("no conversation event"))?;
    Ok((first.unwrap_or(total), total, cid))
}

async fn visit(http: reqwest::Client, base: String, token: String, questions: Vec<String>) -> Visit {
    let mut v = Visit { first_ms: vec![], total_ms: vec![], errors: vec![], session: None, conversation: None };
    let session = match open_session(&http, &base, &token).await {
        Ok(s) => s,
        Err(e) => {
            v.errors.push(e.to_string());
            return v;
        }
    };
    for q in &questions {
        match message(&http, &base, &token, &session, q, v.conversation.as_deref()).await {
            Ok((first, total, cid)) => {
                v.first_ms.push(first);
                v.total_ms.push(total);
                v.conversation = Some(cid);
            }
            Err(e) => v.errors.push(e.to_string()),
        }
    }
    v.session = Some(session);
    v
}

/// Opens one events stream and reads it until `ready`; returns the open response.
async fn idle_stream(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    session: &str,
    conversation: &str,
) -> anyhow::Result<impl futures::Stream + use<>> {
    let r = http
        .get(format!("{base}/api/v1/public/chat/{token}/events/{conversation}"))
        .header(SESSION_HEADER, session)
        .send()
        .await?;
    anyhow::ensure!(r.status().is_success(), "events: {}", r.status());
    let mut s = r.bytes_stream();
    let mut buf = String::new();
    while !buf.contains("event: ready") {
        let piece = s.next().await.ok_or_else(|| anyhow::anyhow!("the stream ended"))??;
        buf.push_str(&String::from_utf8_lossy(&piece));
    }
    Ok(s)
}

pub async fn run(c: &Collection, sessions: usize, messages: usize, idle_streams: usize) -> anyhow::Result<Value> {
    let (ingest, s) = ingest_cranfield(c, &cranfield_ingestion(), 8).await?;
    eprintln!("ingested {} documents in {:.1} s", ingest.docs, ingest.seconds);
    let s = s.restart(&[
        ("STEWARD_PUBLIC_CHAT_PER_IP_PER_MINUTE", "0".into()),
        ("STEWARD_PUBLIC_STREAMS_PER_SESSION", "0".into()),
        ("STEWARD_PUBLIC_STREAMS_PER_IP", "0".into()),
    ])?;
    let g = s
        .send_session(reqwest::Method::PUT, "/api/v1/settings/general", &json!({"anonymousChatEnabled": true}))
        .await?;
    let token = g["anonymousChatToken"].as_str().ok_or_else(|| anyhow::anyhow!("no token"))?.to_string();
    // many connections at once: a client of its own without a pool limit
    let http = reqwest::Client::builder().pool_max_idle_per_host(2048).build()?;
    // warm-up: the first turns load the embedder's sessions and fill caches
    let warm =
        visit(http.clone(), s.base.clone(), token.clone(), c.queries.iter().take(5).map(|q| q.text.clone()).collect())
            .await;
    anyhow::ensure!(warm.errors.is_empty(), "warm-up failed: {:?}", warm.errors);
    let idle_rss = s.rss().1;

    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_peak(s.child.id(), stop.clone());
    let started = Instant::now();
    let visits = (0..sessions).map(|k| {
        let qs: Vec<String> =
            (0..messages).map(|m| c.queries[(k * messages + m) % c.queries.len()].text.clone()).collect();
        visit(http.clone(), s.base.clone(), token.clone(), qs)
    });
    let visits = join_all(visits).await;
    let secs = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let peak = sampler.join().map_err(|_| anyhow::anyhow!("the memory sampler failed"))?;
    let first: Vec<f64> = visits.iter().flat_map(|v| v.first_ms.iter().copied()).collect();
    let total: Vec<f64> = visits.iter().flat_map(|v| v.total_ms.iter().copied()).collect();
    let mut errors = std::collections::BTreeMap::<String, usize>::new();
    for e in visits.iter().flat_map(|v| v.errors.iter()) {
        *errors.entry(e.clone()).or_default() += 1;
    }
    let load = json!({
        "sessions": sessions, "messagesPerSession": messages,
        "messagesAnswered": total.len(), "seconds": (secs * 100.0).round() / 100.0,
        "messagesPerSecond": ((total.len() as f64 / secs) * 100.0).round() / 100.0,
        "firstChunkP50Ms": median(&first), "firstChunkP95Ms": percentile(&first, 95.0),
        "streamEndP50Ms": median(&total), "streamEndP95Ms": percentile(&total, 95.0),
        "errors": errors, "idleRssMiB": idle_rss, "peakRssMiB": peak,
    });
    eprintln!("load: {load}");

    // idle event streams on the visitors' conversations
    let targets: Vec<(String, String)> =
        visits.iter().filter_map(|v| Some((v.session.clone()?, v.conversation.clone()?))).collect();
    anyhow::ensure!(!targets.is_empty(), "no conversation to listen to");
    let before = s.rss().1;
    let opens = (0..idle_streams).map(|k| {
        let (session, cid) = &targets[k % targets.len()];
        let (http, base, token) = (http.clone(), s.base.clone(), token.clone());
        let (session, cid) = (session.clone(), cid.clone());
        async move { idle_stream(&http, &base, &token, &session, &cid).await }
    });
    let streams = join_all(opens).await;
    let open = streams.iter().filter(|r| r.is_ok()).count();
    let failed: Vec<String> = streams.iter().filter_map(|r| r.as_ref().err().map(|e| e.to_string())).take(3).collect();
    let after = s.rss().1;
    let per_stream_kib = (after - before) * 1024.0 / open.max(1) as f64;
    let idle = json!({
        "streams": idle_streams, "open": open, "failedExamples": failed,
        "rssBeforeMiB": before, "rssAfterMiB": after, "rssPerStreamKiB": (per_stream_kib * 10.0).round() / 10.0,
    });
    drop(streams);
    eprintln!("idle streams: {idle}");

    // the caps at their defaults: one address tries to hold 500 streams
    let s = s.restart(&[("STEWARD_PUBLIC_CHAT_PER_IP_PER_MINUTE", "0".into())])?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = s.rss().1;
    let attempts = targets.iter().take(50).flat_map(|(session, cid)| {
        (0..10).map(|_| {
            let (http, base, token) = (http.clone(), s.base.clone(), token.clone());
            let (session, cid) = (session.clone(), cid.clone());
            async move { idle_stream(&http, &base, &token, &session, &cid).await }
        })
    });
    let held = join_all(attempts).await;
    let opened = held.iter().filter(|r| r.is_ok()).count();
    let refused = held.iter().filter(|r| r.as_ref().err().is_some_and(|e| e.to_string().contains("429"))).count();
    let after = s.rss().1;
    let caps = json!({
        "attempts": held.len(), "opened": opened, "refused429": refused,
        "rssBeforeMiB": before, "rssWithCapsReachedMiB": after,
        "rssPerStreamKiB": (((after - before) * 1024.0 / opened.max(1) as f64) * 10.0).round() / 10.0,
    });
    eprintln!("caps reached: {caps}");
    drop(held);
    s.stop();
    Ok(json!({
        "machine": {"cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)},
        "documents": ingest.docs,
        "load": load,
        "idleStreams": idle,
        "capsReached": caps,
    }))
}
