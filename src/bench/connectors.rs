//! `steward bench connectors`: the two connectors through the real binary.
//!
//! - WordPress: a real local WordPress (`wordpress.rs`) with `posts` posts made of Cranfield
//!   abstracts; the connector enabled: time until the backfill is done and until everything is
//!   searchable, the server's peak memory; then "sync now" of the unchanged site (time, items
//!   rewritten).
//! - WhatsApp: `senders` customers at once, each sending `messages` signed text messages one after
//!   another to the webhook, each waiting for its reply before the next (Cranfield questions, the
//!   built-in answerer, a local sink standing in for the Graph API): acknowledgement latency
//!   p50/p99, reply latency, replies/s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use reqwest::Method;
use serde_json::{Value, json};

use super::cranfield::Collection;
use super::server::ChildServer;
use super::wordpress::{LocalWordPress, USER};
use crate::connectors::whatsapp::{delivery_json, sign};

const KEY: &str = "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b";
const PHONE: &str = "106540352242922";
const APP_SECRET: &str = "bench-app-secret";

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

pub async fn run(
    c: &Collection,
    posts: usize,
    senders: usize,
    messages: usize,
    burst_ms: u64,
) -> anyhow::Result<Value> {
    let wordpress = if posts > 0 { wordpress(c, posts).await? } else { Value::Null };
    let whatsapp = if senders > 0 { whatsapp(c, senders, messages.max(1), burst_ms).await? } else { Value::Null };
    Ok(json!({"wordpress": wordpress, "whatsapp": whatsapp}))
}

/// Polls the connector until `done` says so (or its sync stopped on an error).
async fn wait_connector(s: &ChildServer, id: &str, done: impl Fn(&Value) -> bool) -> anyhow::Result<Value> {
    loop {
        let d = s.get(&format!("/api/v1/connectors/{id}")).await?["connector"].clone();
        if done(&d) {
            return Ok(d);
        }
        let st = &d["syncState"];
        anyhow::ensure!(
            !(st["status"] == "idle" && st["lastError"].is_string()),
            "the sync failed: {}",
            st["lastError"]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wordpress(c: &Collection, n: usize) -> anyhow::Result<Value> {
    let docs: Vec<&super::cranfield::Doc> = c.docs.iter().filter(|d| d.body.len() > 200).collect();
    let items: Vec<(String, String)> = (0..n)
        .map(|i| {
            let (a, b) = (docs[i % docs.len()], docs[(i * 7 + 3) % docs.len()]);
            (
                format!("{} ({i})", a.title.trim()),
                format!(
                    "<!-- wp:paragraph --><p>{}</p><!-- /wp:paragraph -->\n<h2>{}</h2><p>{}</p>",
                    escape(&a.body),
                    escape(b.title.trim()),
                    escape(&b.body)
                ),
            )
        })
        .collect();
    let site = tokio::task::spawn_blocking(LocalWordPress::start).await??;
    let t = Instant::now();
    let site = tokio::task::spawn_blocking(move || site.seed(&items).map(|()| site)).await??;
    println!("wordpress: {n} posts seeded in {:.1} s", t.elapsed().as_secs_f64());

    let env = [("CONNECTOR_ENCRYPTION_KEY", KEY.to_string()), ("STEWARD_DELIVERY_ALLOW", "127.0.0.1/32".to_string())];
    let s = ChildServer::start(&env)?;
    let warm = json!({"title": "Warm-up", "content": "A first document loads the embedding model."});
    s.send(Method::POST, "/api/v1/document/", &warm).await?;
    s.wait_idle().await?;
    let (_, rss_before) = s.rss();
    let config = json!({"config": {"site_url": site.base, "wp_username": USER, "wp_application_password": site.app_password, "post_types": "post"}});
    s.send_session(Method::PUT, "/api/v1/connectors/wordpress", &config).await?;
    let started = Instant::now();
    s.send_session(Method::POST, "/api/v1/connectors/wordpress/enable", &json!({})).await?;
    let d = wait_connector(&s, "wordpress", |d| d["syncState"]["backfillCompletedAt"].is_string()).await?;
    let backfill = started.elapsed().as_secs_f64();
    s.wait_idle().await?;
    let searchable = started.elapsed().as_secs_f64();
    let (peak, _) = s.rss();
    let probe = docs[5].title.trim().to_string();
    let hits = s.send(Method::POST, "/api/v1/document/search", &json!({"query": probe, "mode": "bm25"})).await?;
    let found = hits["results"].as_array().is_some_and(|r| !r.is_empty());
    let ingested = d["syncState"]["lastIngestedCount"].clone();
    println!(
        "wordpress: backfill of {ingested} posts read in {backfill:.1} s, searchable after {searchable:.1} s; RSS {rss_before:.0} MiB before, peak {peak:.0} MiB"
    );

    let before = d["syncState"]["lastSyncFinishedAt"].clone();
    let t = Instant::now();
    s.send_session(Method::POST, "/api/v1/connectors/wordpress/sync", &json!({})).await?;
    let again = wait_connector(&s, "wordpress", |d| {
        d["syncState"]["status"] == "idle" && d["syncState"]["lastSyncFinishedAt"] != before
    })
    .await?;
    let resync = t.elapsed().as_secs_f64();
    s.wait_idle().await?;
    let p = &again["syncState"]["progress"];
    println!(
        "wordpress: sync now of the unchanged site in {resync:.1} s: {} rewritten, {} unchanged",
        p["indexed"], p["unchanged"]
    );
    s.stop();
    drop(site);
    Ok(json!({
        "posts": n,
        "backfill": {"ingested": ingested, "readSeconds": backfill, "searchableAfterSeconds": searchable, "searchFinds": found},
        "rssMiB": {"before": rss_before, "peak": peak, "growth": peak - rss_before},
        "syncNowUnchanged": {"seconds": resync, "rewritten": p["indexed"], "unchanged": p["unchanged"]},
    }))
}

/// A stand-in for the Graph API: answers every send as Meta does and notes when it came and to
/// whom.
struct Sink {
    base: String,
    hits: Arc<Mutex<Vec<(Instant, String)>>>,
}

impl Sink {
    fn replies_to(&self, to: &str) -> usize {
        self.hits.lock().iter().filter(|(_, t)| t == to).count()
    }
}

async fn sink() -> anyhow::Result<Sink> {
    use http_body_util::BodyExt;
    let hits: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}/v21.0", listener.local_addr()?);
    let h = hits.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let h = h.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let h = h.clone();
                    async move {
                        let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                        let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        h.lock().push((Instant::now(), v["to"].as_str().unwrap_or_default().to_string()));
                        let answer = r#"{"messaging_product":"whatsapp","contacts":[{"input":"1","wa_id":"1"}],"messages":[{"id":"wamid.bench"}]}"#;
                        hyper::Response::builder()
                            .header("content-type", "application/json")
                            .body(Full::new(Bytes::from_static(answer.as_bytes())))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tcp), svc).await;
            });
        }
    });
    Ok(Sink { base, hits })
}

/// Each customer writes, waits for the reply, writes again: acknowledgement latencies (the
/// webhook's answer) and reply latencies (acknowledged → the reply at the Graph API).
async fn whatsapp(c: &Collection, senders: usize, per: usize, burst_ms: u64) -> anyhow::Result<Value> {
    let graph = Arc::new(sink().await?);
    let env = [
        ("CONNECTOR_ENCRYPTION_KEY", KEY.to_string()),
        ("STEWARD_DELIVERY_ALLOW", "127.0.0.1/32".to_string()),
        ("STEWARD_WHATSAPP_GRAPH_BASE_URL", graph.base.clone()),
        ("STEWARD_WHATSAPP_BURST_MS", burst_ms.to_string()),
    ];
    let s = ChildServer::start(&env)?;
    for d in c.docs.iter().take(300) {
        s.send(Method::POST, "/api/v1/document/", &json!({"title": d.title.trim(), "content": d.body})).await?;
    }
    s.wait_idle().await?;
    let config = json!({"config": {"phone_number_id": PHONE, "access_token": "bench-token", "app_secret": APP_SECRET, "business_account_id": "1"}});
    s.send_session(Method::PUT, "/api/v1/connectors/whatsapp", &config).await?;
    s.send_session(Method::POST, "/api/v1/connectors/whatsapp/enable", &json!({})).await?;
    let ws = s.get("/api/v1/auth/me").await?["workspace"]["id"].as_str().unwrap_or_default().to_string();
    let url = format!("{}/api/connectors/whatsapp/{ws}/webhook", s.base);

    let started = Instant::now();
    let mut tasks = Vec::new();
    for sender in 0..senders {
        let (http, url, graph) = (s.http.clone(), url.clone(), graph.clone());
        let questions: Vec<String> =
            (0..per).map(|k| c.queries[(sender * per + k) % c.queries.len()].text.clone()).collect();
        tasks.push(tokio::spawn(async move {
            let (mut acks, mut replies) = (Vec::new(), Vec::new());
            let from = format!("1650555{sender:04}");
            for (k, q) in questions.iter().enumerate() {
                let body = delivery_json(PHONE, &[(&from, &format!("wamid.bench.{sender}.{k}"), Some(q))]).to_string();
                let sig = sign(APP_SECRET, body.as_bytes());
                let t = Instant::now();
                let r = http
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("x-hub-signature-256", sig)
                    .body(body)
                    .send()
                    .await?;
                anyhow::ensure!(r.status().is_success(), "webhook: {}", r.status());
                acks.push((k, t.elapsed().as_secs_f64() * 1000.0));
                let deadline = Instant::now() + Duration::from_secs(120);
                while graph.replies_to(&from) <= k {
                    anyhow::ensure!(Instant::now() < deadline, "no reply to {from} within 120 s");
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                replies.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            Ok::<_, anyhow::Error>((acks, replies))
        }));
    }
    let (mut by_round, mut replies): (Vec<(usize, f64)>, Vec<f64>) = (Vec::new(), Vec::new());
    for t in tasks {
        let (a, r) = t.await??;
        by_round.extend(a);
        replies.extend(r);
    }
    let acks: Vec<f64> = by_round.iter().map(|(_, ms)| *ms).collect();
    // every customer's first message arrives at the same instant (a cold herd); the rest are
    // spread by the replies they wait for
    let first: Vec<f64> = by_round.iter().filter(|(k, _)| *k == 0).map(|(_, ms)| *ms).collect();
    let later: Vec<f64> = by_round.iter().filter(|(k, _)| *k > 0).map(|(_, ms)| *ms).collect();
    by_round.sort_by(|a, b| b.1.total_cmp(&a.1));
    let slowest: Vec<Value> = by_round.iter().take(12).map(|(k, ms)| json!({"message": k, "ms": ms})).collect();
    let secs = started.elapsed().as_secs_f64();
    let total = senders * per;
    let (peak, _) = s.rss();
    let m = s.get("/api/v1/connectors/whatsapp").await?["connector"]["messages"].clone();
    println!(
        "whatsapp: {total} messages from {senders} customers at once: ack p50 {:.1} ms, p99 {:.1} ms; reply p50 {:.0} ms, p99 {:.0} ms; {:.1} replies/s",
        super::median(&acks),
        super::percentile(&acks, 99.0),
        super::median(&replies),
        super::percentile(&replies, 99.0),
        total as f64 / secs
    );
    s.stop();
    Ok(json!({
        "senders": senders, "messagesPerSender": per, "messages": total,
        "ackMs": {"p50": super::median(&acks), "p99": super::percentile(&acks, 99.0), "max": acks.iter().cloned().fold(0.0, f64::max),
                  "firstMessages": {"p50": super::median(&first), "max": first.iter().cloned().fold(0.0, f64::max)},
                  "laterMessages": {"p50": super::median(&later), "p99": super::percentile(&later, 99.0)},
                  "slowest": slowest},
        "replyMs": {"p50": super::median(&replies), "p99": super::percentile(&replies, 99.0)},
        "seconds": secs, "repliesPerSecond": total as f64 / secs,
        "failed": m["failed"], "peakRssMiB": peak,
    }))
}
