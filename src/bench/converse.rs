//! `steward bench converse`: the converse surface of a real server with the Cranfield collection
//! and the built-in answerer.
//!
//! 1. **Latency**: the same `questions` Cranfield queries asked through `POST
//!    /api/v1/agents/{id}/chat` with a REST channel credential and through the `ask_agent` tool of
//!    one `/mcp` session (plain HTTP: `initialize`, `notifications/initialized`, `tools/call`),
//!    alternating which path goes first, after a few uncounted warm-up calls on each. Each path
//!    keeps one conversation (REST passes the `conversationId` back; the MCP session is bound to
//!    one). Reported: end-to-end latency p50/p95 per path as the client sees it (MCP: until the
//!    JSON-RPC result event arrives), the server's turn time of the same calls (their traces), and
//!    the ratio of the p50s (target ≤ 1.2).
//! 2. **Long polls**: `polls` converse sessions (REST exchange of an MCP credential), each with
//!    one answered question, each holding `GET /api/v1/mcp/converse/messages?cursor=<end>&
//!    waitMs=25000` at once: nothing arrives, so every poll waits the full 25 s. Reported: the
//!    server's resident memory before and while they are held, the server's CPU time while they
//!    are held (from /proc, against an idle baseline of the same server with nothing held), and
//!    whether every poll answered 200 with an empty page after about 25 s.
//!
//! Limits: every call comes from one address and the latency run asks more than 30 questions in
//! one session, so the run sets `STEWARD_CONVERSE_ASKS_PER_SESSION_PER_MINUTE`,
//! `STEWARD_CONVERSE_EXCHANGES_PER_SOURCE_PER_MINUTE` and
//! `STEWARD_CONVERSE_READS_PER_SOURCE_PER_MINUTE` to 0 (no limit); the per-session read limit
//! (60 a minute) stays at its default (each poller reads twice).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::join_all;
use serde_json::{Value, json};

use super::cranfield::Collection;
use super::knowledge::{cranfield_ingestion, ingest_cranfield};
use super::server::ChildServer;
use super::{median, percentile};

/// The MCP protocol revision the bench speaks.
const PROTOCOL: &str = "2025-11-25";
/// Uncounted calls on each path before the measured ones.
const WARM_UP: usize = 5;
/// How long each poll asks to wait.
const WAIT_MS: u64 = 25_000;
/// The idle baseline, and the part of the hold the CPU is measured over (from `HOLD_FROM` after
/// the polls are sent to `HOLD_TO`, so that setting them up and answering them is outside).
const BASELINE: Duration = Duration::from_secs(20);
const HOLD_FROM: Duration = Duration::from_secs(2);
const HOLD_TO: Duration = Duration::from_secs(22);
/// `/proc/<pid>/stat` counts CPU time in USER_HZ ticks, 100 a second on Linux.
const TICKS_PER_SEC: f64 = 100.0;

/// The limits the run sets (see the module docs).
const LIMITS: [(&str, &str); 3] = [
    ("STEWARD_CONVERSE_ASKS_PER_SESSION_PER_MINUTE", "0"),
    ("STEWARD_CONVERSE_EXCHANGES_PER_SOURCE_PER_MINUTE", "0"),
    ("STEWARD_CONVERSE_READS_PER_SOURCE_PER_MINUTE", "0"),
];

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// CPU seconds (user + system, all threads) `pid` has used, from `/proc/<pid>/stat`.
fn cpu_secs(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // the fields after the command name (which may hold spaces) start at field 3 (state);
    // utime and stime are fields 14 and 15
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_SEC)
}

/// The highest resident memory (MiB) of `pid` sampled every 100 ms until `stop` is set.
fn sample_peak(pid: u32, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<f64> {
    std::thread::spawn(move || {
        let mut peak: f64 = 0.0;
        while !stop.load(Ordering::Relaxed) {
            if let Some((_, rss)) = super::rss_mib(pid) {
                peak = peak.max(rss);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        peak
    })
}

/// The JSON payloads of the complete server-sent events at the front of `buf` (removed from it);
/// events without data (priming, keep-alive comments) are skipped.
fn take_events(buf: &mut String) -> Vec<String> {
    if buf.contains('\r') {
        *buf = buf.replace("\r\n", "\n").replace('\r', "\n");
    }
    let mut out = vec![];
    while let Some(end) = buf.find("\n\n") {
        let event: String = buf.drain(..end + 2).collect();
        let data: Vec<&str> =
            event.lines().filter_map(|l| l.strip_prefix("data:")).map(|d| d.strip_prefix(' ').unwrap_or(d)).collect();
        let data = data.join("\n");
        if !data.trim().is_empty() {
            out.push(data);
        }
    }
    out
}

/// One `/mcp` session spoken over plain HTTP.
struct Mcp {
    http: reqwest::Client,
    url: String,
    secret: String,
    session: String,
    next_id: u64,
}

impl Mcp {
    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        let mut r = self
            .http
            .post(&self.url)
            .bearer_auth(&self.secret)
            .header(reqwest::header::ACCEPT, "application/json, text/event-stream")
            .json(body);
        if !self.session.is_empty() {
            r = r.header("mcp-session-id", &self.session).header("mcp-protocol-version", PROTOCOL);
        }
        r
    }

    /// The JSON-RPC response to request `id` in `r` (an event stream or a JSON body), and the ms
    /// from `t` to its arrival. The rest of the stream is read (untimed) so the connection is
    /// reused.
    async fn response(r: reqwest::Response, id: u64, t: Instant) -> anyhow::Result<(Value, f64)> {
        let status = r.status();
        let is_json = r
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if !status.is_success() {
            let body = r.text().await.unwrap_or_default();
            anyhow::bail!("mcp: {status} {body}");
        }
        if is_json {
            let v: Value = r.json().await?;
            return Ok((v, ms(t)));
        }
        let mut stream = r.bytes_stream();
        let mut buf = String::new();
        let mut found = None;
        while found.is_none() {
            let piece =
                stream.next().await.ok_or_else(|| anyhow::anyhow!("mcp: the stream ended without a response"))?;
            buf.push_str(&String::from_utf8_lossy(&piece?));
            for data in take_events(&mut buf) {
                let v: Value = serde_json::from_str(&data)?;
                if v["id"].as_u64() == Some(id) && (v.get("result").is_some() || v.get("error").is_some()) {
                    found = Some((v, ms(t)));
                }
            }
        }
        // the request's stream ends after its response
        let _ = tokio::time::timeout(Duration::from_secs(5), async { while stream.next().await.is_some() {} }).await;
        found.ok_or_else(|| anyhow::anyhow!("mcp: no response"))
    }

    /// A request; its `result` and the ms it took.
    async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<(Value, f64)> {
        self.next_id += 1;
        let id = self.next_id;
        let t = Instant::now();
        let r = self.post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).send().await?;
        let (v, took) = Mcp::response(r, id, t).await?;
        anyhow::ensure!(v.get("error").is_none(), "mcp {method}: {}", v["error"]);
        Ok((v["result"].clone(), took))
    }

    /// Initializes a session.
    async fn open(http: reqwest::Client, base: &str, secret: &str) -> anyhow::Result<Mcp> {
        let mut m =
            Mcp { http, url: format!("{base}/mcp"), secret: secret.to_string(), session: String::new(), next_id: 0 };
        let id = 0;
        let t = Instant::now();
        let r = m
            .post(&json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
                "protocolVersion": PROTOCOL, "capabilities": {},
                "clientInfo": {"name": "steward-bench", "version": env!("CARGO_PKG_VERSION")}}}))
            .send()
            .await?;
        let sid = r
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .ok_or_else(|| anyhow::anyhow!("initialize: no mcp-session-id ({})", r.status()))?;
        let (v, _) = Mcp::response(r, id, t).await?;
        anyhow::ensure!(v["result"]["protocolVersion"].is_string(), "initialize: {v}");
        m.session = sid;
        let r = m.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).send().await?;
        anyhow::ensure!(r.status().as_u16() == 202, "notifications/initialized: {}", r.status());
        Ok(m)
    }

    /// `ask_agent`: (the reply envelope, ms).
    async fn ask(&mut self, message: &str) -> anyhow::Result<(Value, f64)> {
        let (r, took) =
            self.request("tools/call", json!({"name": "ask_agent", "arguments": {"message": message}})).await?;
        anyhow::ensure!(r["isError"] != true, "ask_agent: {}", r["content"][0]["text"]);
        anyhow::ensure!(r["content"][0]["text"].is_string(), "ask_agent: no text content");
        let env = r["structuredContent"].clone();
        anyhow::ensure!(env["status"] == "complete", "ask_agent: {}", env["status"]);
        Ok((env, took))
    }
}

/// One REST agent chat turn: (the reply, ms).
async fn rest_ask(
    http: &reqwest::Client,
    base: &str,
    agent: &str,
    secret: &str,
    message: &str,
    conversation: Option<&str>,
) -> anyhow::Result<(Value, f64)> {
    let mut body = json!({"message": message});
    if let Some(c) = conversation {
        body["conversationId"] = json!(c);
    }
    let t = Instant::now();
    let r = http.post(format!("{base}/api/v1/agents/{agent}/chat")).bearer_auth(secret).json(&body).send().await?;
    let status = r.status();
    let v: Value = r.json().await?;
    let took = ms(t);
    anyhow::ensure!(status.is_success(), "rest chat: {status} {v}");
    Ok((v, took))
}

/// The calls of one path: end-to-end ms and trace ids.
#[derive(Default)]
struct Path {
    e2e_ms: Vec<f64>,
    traces: Vec<String>,
}

impl Path {
    fn add(&mut self, reply: &Value, took: f64) {
        self.e2e_ms.push(took);
        if let Some(t) = reply["traceId"].as_str() {
            self.traces.push(t.to_string());
        }
    }

    /// The figures, with the server's turn time of each call from its trace.
    async fn report(&self, s: &ChildServer) -> Value {
        let mut server = vec![];
        for t in &self.traces {
            if let Ok(v) = s.get(&format!("/api/v1/traces/{t}")).await
                && let Some(d) = v["trace"]["durationMs"].as_f64()
            {
                server.push(d);
            }
        }
        let outside: Vec<f64> = if server.len() == self.e2e_ms.len() {
            self.e2e_ms.iter().zip(&server).map(|(e, s)| e - s).collect()
        } else {
            vec![]
        };
        let fig = |xs: &[f64], p: f64| if xs.is_empty() { Value::Null } else { json!(round2(percentile(xs, p))) };
        json!({
            "calls": self.e2e_ms.len(),
            "p50Ms": fig(&self.e2e_ms, 50.0), "p95Ms": fig(&self.e2e_ms, 95.0),
            "serverTurnP50Ms": fig(&server, 50.0), "serverTurnP95Ms": fig(&server, 95.0),
            "outsideTurnP50Ms": fig(&outside, 50.0),
        })
    }
}

async fn latency(s: &ChildServer, c: &Collection, agent: &str, questions: usize) -> anyhow::Result<Value> {
    let cred = |audience: &'static str| async move {
        let v = s
            .send_session(
                reqwest::Method::POST,
                &format!("/api/v1/agents/{agent}/channel-credentials"),
                &json!({"audience": audience, "label": format!("bench {audience}")}),
            )
            .await?;
        v["secret"].as_str().map(str::to_string).ok_or_else(|| anyhow::anyhow!("no secret: {v}"))
    };
    let rest_secret = cred("rest").await?;
    let mcp_secret = cred("mcp").await?;
    let http = reqwest::Client::builder().pool_max_idle_per_host(16).build()?;
    let base = s.base.as_str();
    let mut mcp = Mcp::open(http.clone(), base, &mcp_secret).await?;
    let q = |i: usize| c.queries[i % c.queries.len()].text.as_str();
    // warm-up (uncounted) on questions outside the measured ones
    let mut conversation: Option<String> = None;
    for i in 0..WARM_UP {
        let (v, _) = rest_ask(&http, base, agent, &rest_secret, q(questions + i), conversation.as_deref()).await?;
        conversation = v["conversationId"].as_str().map(str::to_string);
        mcp.ask(q(questions + i)).await?;
    }
    let (mut rest, mut over_mcp) = (Path::default(), Path::default());
    for i in 0..questions {
        // alternate which path goes first, so drift touches both alike
        for path in if i % 2 == 0 { ["rest", "mcp"] } else { ["mcp", "rest"] } {
            if path == "rest" {
                let (v, took) = rest_ask(&http, base, agent, &rest_secret, q(i), conversation.as_deref()).await?;
                anyhow::ensure!(v["answer"].is_string(), "rest chat: no answer: {v}");
                rest.add(&v, took);
            } else {
                let (v, took) = mcp.ask(q(i)).await?;
                anyhow::ensure!(v["answer"]["text"].is_string(), "ask_agent: no answer: {v}");
                over_mcp.add(&v, took);
            }
        }
    }
    let ratio = median(&over_mcp.e2e_ms) / median(&rest.e2e_ms);
    Ok(json!({
        "questions": questions, "warmUpCallsPerPath": WARM_UP,
        "rest": rest.report(s).await,
        "mcp": over_mcp.report(s).await,
        "mcpOverRestP50": (ratio * 1000.0).round() / 1000.0,
        "mcpMinusRestP50Ms": round2(median(&over_mcp.e2e_ms) - median(&rest.e2e_ms)),
        "target": "mcpOverRestP50 <= 1.2",
    }))
}

/// A converse session with one answered question: (session token, the cursor at its end).
async fn poller(http: &reqwest::Client, base: &str, secret: &str, question: &str) -> anyhow::Result<(String, String)> {
    let r = http
        .post(format!("{base}/api/v1/mcp/converse/session"))
        .json(&json!({"launchToken": secret, "client": {"name": "steward-bench"}}))
        .send()
        .await?;
    anyhow::ensure!(r.status().is_success(), "exchange: {}", r.status());
    let v: Value = r.json().await?;
    let token = v["sessionToken"].as_str().ok_or_else(|| anyhow::anyhow!("no session token"))?.to_string();
    let r = http
        .post(format!("{base}/api/v1/mcp/converse/ask"))
        .bearer_auth(&token)
        .json(&json!({"message": question}))
        .send()
        .await?;
    anyhow::ensure!(r.status().is_success(), "ask: {}", r.status());
    let r = http.get(format!("{base}/api/v1/mcp/converse/messages")).bearer_auth(&token).send().await?;
    anyhow::ensure!(r.status().is_success(), "messages: {}", r.status());
    let v: Value = r.json().await?;
    anyhow::ensure!(v["messages"].as_array().is_some_and(|m| !m.is_empty()), "no reply: {v}");
    let cursor = v["cursor"].as_str().ok_or_else(|| anyhow::anyhow!("no cursor: {v}"))?.to_string();
    Ok((token, cursor))
}

/// One long poll: (status, messages returned, seconds).
async fn long_poll(
    http: reqwest::Client,
    base: String,
    token: String,
    cursor: String,
) -> anyhow::Result<(u16, usize, f64)> {
    let t = Instant::now();
    let r = http
        .get(format!("{base}/api/v1/mcp/converse/messages"))
        .query(&[("cursor", cursor.as_str()), ("waitMs", &WAIT_MS.to_string())])
        .bearer_auth(&token)
        .timeout(Duration::from_secs(60))
        .send()
        .await?;
    let status = r.status().as_u16();
    let v: Value = r.json().await?;
    Ok((status, v["messages"].as_array().map_or(usize::MAX, Vec::len), t.elapsed().as_secs_f64()))
}

async fn long_polls(s: &ChildServer, c: &Collection, agent: &str, polls: usize) -> anyhow::Result<(Value, bool)> {
    let v = s
        .send_session(
            reqwest::Method::POST,
            &format!("/api/v1/agents/{agent}/channel-credentials"),
            &json!({"audience": "mcp", "label": "bench pollers"}),
        )
        .await?;
    let secret = v["secret"].as_str().ok_or_else(|| anyhow::anyhow!("no secret: {v}"))?.to_string();
    let http = reqwest::Client::builder().pool_max_idle_per_host(polls + 16).build()?;
    let base = s.base.clone();
    let made: Vec<anyhow::Result<(String, String)>> = futures::stream::iter((0..polls).map(|k| {
        let (http, base, secret) = (&http, &base, &secret);
        let q = c.queries[k % c.queries.len()].text.clone();
        async move { poller(http, base, secret, &q).await }
    }))
    .buffered(8)
    .collect()
    .await;
    let sessions: Vec<(String, String)> = made.into_iter().collect::<anyhow::Result<_>>()?;

    let pid = s.child.id();
    // an idle baseline: the same server with nothing held
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (c0, t0) = (cpu_secs(pid), Instant::now());
    tokio::time::sleep(BASELINE).await;
    let (c1, t1) = (cpu_secs(pid), Instant::now());
    let idle_cpu = c0.zip(c1).map(|(a, b)| (b - a) / (t1 - t0).as_secs_f64() * 100.0);
    let before = s.rss().1;

    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let held = tokio::spawn(join_all(
        sessions.into_iter().map(|(token, cursor)| long_poll(http.clone(), base.clone(), token, cursor)),
    ));
    tokio::time::sleep(HOLD_FROM).await;
    let sampler = sample_peak(pid, stop.clone());
    let (h0, ht0) = (cpu_secs(pid), Instant::now());
    tokio::time::sleep(HOLD_TO.saturating_sub(started.elapsed())).await;
    let (h1, ht1) = (cpu_secs(pid), Instant::now());
    let while_held = s.rss().1;
    stop.store(true, Ordering::Relaxed);
    let peak = sampler.join().map_err(|_| anyhow::anyhow!("the memory sampler failed"))?;
    let hold_secs = (ht1 - ht0).as_secs_f64();
    let hold_cpu_secs = h0.zip(h1).map(|(a, b)| b - a);
    let results = held.await?;
    let after = s.rss().1;

    let mut statuses = std::collections::BTreeMap::<String, usize>::new();
    let mut secs = vec![];
    let mut empty_at_25s = 0;
    for r in &results {
        match r {
            Ok((status, n, took)) => {
                *statuses.entry(status.to_string()).or_default() += 1;
                secs.push(*took);
                if *status == 200 && *n == 0 && (24.9..27.0).contains(took) {
                    empty_at_25s += 1;
                }
            }
            Err(e) => *statuses.entry(format!("error: {e}")).or_default() += 1,
        }
    }
    let all_ok = empty_at_25s == polls;
    let fig = |p: f64| if secs.is_empty() { Value::Null } else { json!(round2(percentile(&secs, p))) };
    let min = secs.iter().copied().fold(f64::INFINITY, f64::min);
    let v = json!({
        "polls": polls, "route": "GET /api/v1/mcp/converse/messages?cursor=<end>&waitMs=25000", "waitMs": WAIT_MS,
        "statuses": statuses, "emptyPageAt25s": empty_at_25s, "allEmptyAt25s": all_ok,
        "pollSecondsMin": if secs.is_empty() { Value::Null } else { json!(round2(min)) },
        "pollSecondsP50": fig(50.0), "pollSecondsMax": fig(100.0),
        "rssBeforeMiB": round2(before), "rssWhileHeldMiB": round2(while_held), "rssPeakWhileHeldMiB": round2(peak),
        "rssAfterMiB": round2(after),
        "rssPerPollKiB": round2((while_held - before) * 1024.0 / polls.max(1) as f64),
        "idleBaselineSeconds": round2((t1 - t0).as_secs_f64()),
        "idleCpuPercent": idle_cpu.map(round2),
        "holdSecondsMeasured": round2(hold_secs),
        "holdCpuSeconds": hold_cpu_secs.map(round2),
        "holdCpuPercent": hold_cpu_secs.map(|x| round2(x / hold_secs * 100.0)),
        "cpuResolutionSeconds": 1.0 / TICKS_PER_SEC,
    });
    Ok((v, all_ok))
}

pub async fn run(c: &Collection, questions: usize, polls: usize) -> anyhow::Result<Value> {
    let (ingest, s) = ingest_cranfield(c, &cranfield_ingestion(), 8).await?;
    eprintln!("ingested {} documents in {:.1} s", ingest.docs, ingest.seconds);
    let env: Vec<(&str, String)> = LIMITS.iter().map(|(k, v)| (*k, v.to_string())).collect();
    let s = s.restart(&env)?;
    let agents = s.get("/api/v1/agents").await?;
    let agent = agents["agents"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["isDefault"] == true))
        .and_then(|a| a["id"].as_str())
        .ok_or_else(|| anyhow::anyhow!("no default agent: {agents}"))?
        .to_string();
    let idle_rss = s.rss().1;
    let lat = latency(&s, c, &agent, questions).await?;
    eprintln!("latency: {lat}");
    let (polls_report, polls_ok) = long_polls(&s, c, &agent, polls).await?;
    eprintln!("long polls: {polls_report}");
    s.stop();
    let limits: serde_json::Map<String, Value> = LIMITS.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    let report = json!({
        "machine": {"cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)},
        "documents": ingest.docs,
        "limits": limits,
        "idleRssMiB": round2(idle_rss),
        "latency": lat,
        "longPolls": polls_report,
    });
    anyhow::ensure!(polls_ok, "not every long poll answered 200 with an empty page after ~25 s: {report}");
    Ok(report)
}

/// A few lines for a person reading the run.
pub fn summary(r: &Value) -> String {
    let l = &r["latency"];
    let p = &r["longPolls"];
    let path = |name: &str, v: &Value| {
        format!(
            "{name}: p50 {} ms, p95 {} ms (server turn p50 {} ms, outside the turn p50 {} ms)",
            v["p50Ms"], v["p95Ms"], v["serverTurnP50Ms"], v["outsideTurnP50Ms"]
        )
    };
    [
        format!("{} questions on each path, alternating, after {} warm-up calls each", l["questions"], l["warmUpCallsPerPath"]),
        path("REST agent chat", &l["rest"]),
        path("/mcp ask_agent ", &l["mcp"]),
        format!(
            "MCP/REST p50: {}x ({:+.2} ms; target <= 1.2x)",
            l["mcpOverRestP50"],
            l["mcpMinusRestP50Ms"].as_f64().unwrap_or(f64::NAN)
        ),
        format!(
            "{} long polls (waitMs 25000): {} of them 200 with an empty page after {}-{} s",
            p["polls"], p["emptyPageAt25s"], p["pollSecondsMin"], p["pollSecondsMax"]
        ),
        format!(
            "server RSS {} MiB before -> {} MiB while held ({} KiB per poll); CPU while held {}% ({} s over {} s), idle baseline {}%",
            p["rssBeforeMiB"], p["rssWhileHeldMiB"], p["rssPerPollKiB"], p["holdCpuPercent"], p["holdCpuSeconds"],
            p["holdSecondsMeasured"], p["idleCpuPercent"]
        ),
    ]
    .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_split_and_empty_ones_skipped() {
        let mut buf = "id: 0\nretry: 3000\ndata:\n\ndata: {\"id\":1}\r\n\r\n: keep-alive\n\ndata: {\"a\":\ndata: 2}\n\ndata: {\"partial".to_string();
        let events = take_events(&mut buf);
        assert_eq!(events, vec!["{\"id\":1}".to_string(), "{\"a\":\n2}".to_string()]);
        assert_eq!(buf, "data: {\"partial");
    }
}
