//! `steward bench chat`: the answer turn on Cranfield through the REST chat route of a real
//! server. Each query is asked as a new conversation of the default agent; reported are the turn
//! latency (server side and end to end), how often the answer cites a judged-relevant document,
//! and the same with the local GGUF model (time to first token, total) on a sample of queries.

use std::collections::HashMap;
use std::time::Instant;

use futures::StreamExt;
use serde_json::{Value, json};

use super::cranfield::Collection;
use super::knowledge::{cranfield_ingestion, ingest_cranfield};
use super::server::ChildServer;
use super::{median, percentile};

/// document id → Cranfield id, from the document list.
pub(super) async fn id_map(s: &ChildServer) -> anyhow::Result<HashMap<String, u32>> {
    let mut out = HashMap::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/v1/document/?limit=200&cursor={c}"),
            None => "/api/v1/document/?limit=200".to_string(),
        };
        let page = s.get(&path).await?;
        for d in page["documents"].as_array().into_iter().flatten() {
            if let (Some(id), Some(cid)) = (d["id"].as_str(), d["metadata"]["cranfieldId"].as_u64()) {
                out.insert(id.to_string(), cid as u32);
            }
        }
        match page["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return Ok(out),
        }
    }
}

#[derive(Default)]
struct Tally {
    e2e_ms: Vec<f64>,
    server_ms: Vec<f64>,
    first_chunk_ms: Vec<f64>,
    judged: usize,
    /// Judged queries whose answer cites anything.
    judged_cited: usize,
    relevant: usize,
    cited: usize,
    declined: usize,
    outcomes: HashMap<String, usize>,
    /// A chat model's prompt tokens per turn, and those it restored from its prompt cache.
    prompt_tokens: Vec<f64>,
    cached_prompt_tokens: Vec<f64>,
}

impl Tally {
    fn add(&mut self, reply: &Value, ids: &HashMap<String, u32>, judged: Option<&HashMap<u32, u32>>) {
        self.server_ms.push(reply["diagnostics"]["durationMs"].as_f64().unwrap_or(f64::NAN));
        let outcome = reply["diagnostics"]["outcome"].as_str().unwrap_or("?").to_string();
        if outcome == "no_context" {
            self.declined += 1;
        }
        *self.outcomes.entry(outcome).or_default() += 1;
        let usage = &reply["diagnostics"]["composer"]["usage"];
        if let Some(p) = usage["promptTokens"].as_f64().filter(|p| *p > 0.0) {
            self.prompt_tokens.push(p);
            self.cached_prompt_tokens.push(usage["cachedPromptTokens"].as_f64().unwrap_or(0.0));
        }
        let cited: Vec<u32> = reply["citations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["documentId"].as_str().and_then(|d| ids.get(d)).copied())
            .collect();
        if !cited.is_empty() {
            self.cited += 1;
        }
        if let Some(j) = judged {
            self.judged += 1;
            self.judged_cited += !cited.is_empty() as usize;
            if cited.iter().any(|d| j.get(d).is_some_and(|rel| *rel > 0)) {
                self.relevant += 1;
            }
        }
    }

    fn report(&self, n: usize) -> Value {
        json!({
            "turns": n,
            "serverP50Ms": median(&self.server_ms), "serverP95Ms": percentile(&self.server_ms, 95.0),
            "endToEndP50Ms": median(&self.e2e_ms), "endToEndP95Ms": percentile(&self.e2e_ms, 95.0),
            "firstChunkP50Ms": if self.first_chunk_ms.is_empty() { Value::Null } else { json!(median(&self.first_chunk_ms)) },
            "firstChunkP95Ms": if self.first_chunk_ms.is_empty() { Value::Null } else { json!(percentile(&self.first_chunk_ms, 95.0)) },
            "queriesWithJudgments": self.judged,
            "answersCitingARelevantDocument": self.relevant,
            "relevantCitationShare": self.relevant as f64 / self.judged.max(1) as f64,
            "relevantCitationShareOfAnswers": self.relevant as f64 / self.judged_cited.max(1) as f64,
            "answersWithCitations": self.cited,
            "declined": self.declined,
            "outcomes": self.outcomes,
            "promptTokensP50": if self.prompt_tokens.is_empty() { Value::Null } else { json!(median(&self.prompt_tokens)) },
            "cachedPromptTokensP50": if self.prompt_tokens.is_empty() { Value::Null } else { json!(median(&self.cached_prompt_tokens)) },
        })
    }
}

/// One streamed turn: `(reply, ms to the first chunk, total ms)`.
async fn streamed(s: &ChildServer, message: &str) -> anyhow::Result<(Value, Option<f64>, f64)> {
    streamed_in(s, message, None).await
}

/// One streamed turn, in `conversation` when given.
async fn streamed_in(
    s: &ChildServer,
    message: &str,
    conversation: Option<&str>,
) -> anyhow::Result<(Value, Option<f64>, f64)> {
    let t = Instant::now();
    let mut body = json!({"message": message, "stream": true});
    if let Some(c) = conversation {
        body["conversationId"] = json!(c);
    }
    let r = s.http.post(format!("{}/api/v1/chat", s.base)).bearer_auth(&s.token).json(&body).send().await?;
    anyhow::ensure!(r.status().is_success(), "chat: {}", r.status());
    let mut body = r.bytes_stream();
    let mut buf = String::new();
    let mut first = None;
    while let Some(piece) = body.next().await {
        buf.push_str(&String::from_utf8_lossy(&piece?));
        if first.is_none() && buf.contains("event: chunk") {
            first = Some(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    let total = t.elapsed().as_secs_f64() * 1000.0;
    let done = buf
        .split("\n\n")
        .find(|b| b.starts_with("event: done"))
        .and_then(|b| b.lines().find_map(|l| l.strip_prefix("data:")))
        .ok_or_else(|| {
            anyhow::anyhow!("the stream ended without done: {}", buf.chars().take(400).collect::<String>())
        })?;
    Ok((serde_json::from_str(done.trim())?, first, total))
}

/// Threads that keep cores busy (a spinning loop each) until dropped: "one core busy elsewhere".
struct Busy {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Busy {
    fn start(cores: usize) -> Busy {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let threads = (0..cores)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                    }
                })
            })
            .collect();
        Busy { stop, threads }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Runs the benchmark. `gguf_queries` queries (0 skips) are also asked with the local GGUF model,
/// with `busy_cores` cores kept busy by spinning threads meanwhile.
pub async fn run(
    c: &Collection,
    concurrency: usize,
    gguf: Option<std::path::PathBuf>,
    gguf_queries: usize,
    busy_cores: usize,
) -> anyhow::Result<Value> {
    let (ingest, s) = ingest_cranfield(c, &cranfield_ingestion(), concurrency).await?;
    eprintln!("ingested {} documents in {:.1} s", ingest.docs, ingest.seconds);
    let ids = id_map(&s).await?;
    // warm-up: the first turns load the embedder's sessions and fill caches
    for q in c.queries.iter().take(10) {
        s.send(reqwest::Method::POST, "/api/v1/chat", &json!({"message": q.text})).await?;
    }
    let mut builtin = Tally::default();
    for q in &c.queries {
        let t = Instant::now();
        let v = s.send(reqwest::Method::POST, "/api/v1/chat", &json!({"message": q.text})).await?;
        builtin.e2e_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        builtin.add(&v, &ids, c.qrels.get(&q.id));
    }
    let mut streamed_builtin = Tally::default();
    for q in c.queries.iter().take(50) {
        let (v, first, total) = streamed(&s, &q.text).await?;
        streamed_builtin.e2e_ms.push(total);
        if let Some(f) = first {
            streamed_builtin.first_chunk_ms.push(f);
        }
        streamed_builtin.add(&v, &ids, c.qrels.get(&q.id));
    }
    // the queries the local model is asked, asked the same way of the built-in answerer: in pairs,
    // the second as a follow-up in the first's conversation (a short follow-up is searched with
    // the question before it)
    let asked: Vec<_> = c.queries.iter().skip(1).take(gguf_queries).collect();
    let mut builtin_same = Tally::default();
    for pair in asked.chunks(2) {
        let (v, _, _) = streamed(&s, &pair[0].text).await?;
        builtin_same.add(&v, &ids, c.qrels.get(&pair[0].id));
        if let Some(q) = pair.get(1) {
            let conversation = v["conversationId"].as_str().map(str::to_string);
            let (v, _, _) = streamed_in(&s, &q.text, conversation.as_deref()).await?;
            builtin_same.add(&v, &ids, c.qrels.get(&q.id));
        }
    }
    let peak = s.rss().0;
    let mut report = json!({
        "machine": {"cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)},
        "ingestSeconds": ingest.seconds,
        "builtin": builtin.report(c.queries.len()),
        "builtinStreamed": streamed_builtin.report(50.min(c.queries.len())),
        "peakRssMiB": peak,
    });
    if let (Some(path), true) = (gguf, gguf_queries > 0) {
        let s = s.restart(&[("STEWARD_LOCAL_MODEL", path.display().to_string())])?;
        let mut first_turns = Tally::default();
        let mut follow_ups = Tally::default();
        let mut local = Tally::default();
        // warm-up: loads the model
        streamed(&s, &c.queries[0].text).await?;
        let busy = Busy::start(busy_cores);
        // pairs of queries: the first asked in a new conversation, the second as its follow-up
        for pair in asked.chunks(2) {
            let (v, first, total) = streamed(&s, &pair[0].text).await?;
            first_turns.e2e_ms.push(total);
            first_turns.first_chunk_ms.extend(first);
            first_turns.add(&v, &ids, c.qrels.get(&pair[0].id));
            local.add(&v, &ids, c.qrels.get(&pair[0].id));
            if let Some(q) = pair.get(1) {
                let conversation = v["conversationId"].as_str().map(str::to_string);
                let (v, first, total) = streamed_in(&s, &q.text, conversation.as_deref()).await?;
                follow_ups.e2e_ms.push(total);
                follow_ups.first_chunk_ms.extend(first);
                follow_ups.add(&v, &ids, c.qrels.get(&q.id));
                local.add(&v, &ids, c.qrels.get(&q.id));
            }
        }
        // four visitors at once, twice
        let mut concurrent = Tally::default();
        let mut rounds_ms = vec![];
        for round in c.queries.iter().skip(1 + gguf_queries).take(8).collect::<Vec<_>>().chunks(4) {
            let t = Instant::now();
            let all = futures::future::join_all(round.iter().map(|q| streamed(&s, &q.text))).await;
            rounds_ms.push(t.elapsed().as_secs_f64() * 1000.0);
            for (v, first, total) in all.into_iter().flatten() {
                concurrent.e2e_ms.push(total);
                concurrent.first_chunk_ms.extend(first);
                concurrent.add(&v, &ids, None);
            }
        }
        report["localGgufFirstTurns"] = first_turns.report(first_turns.e2e_ms.len());
        report["localGgufFollowUps"] = follow_ups.report(follow_ups.e2e_ms.len());
        report["builtinOnTheLocalQueries"] = builtin_same.report(asked.len());
        report["localGgufFourVisitors"] = concurrent.report(concurrent.e2e_ms.len());
        report["localGgufFourVisitors"]["roundMs"] = json!(rounds_ms);
        report["localGguf"] = local.report(gguf_queries);
        report["localGguf"]["model"] = json!(path.file_name().map(|f| f.to_string_lossy().to_string()));
        report["localGguf"]["peakRssMiB"] = json!(s.rss().0);
        report["localGguf"]["busyCores"] = json!(busy_cores);
        drop(busy);
        s.stop();
    } else {
        s.stop();
    }
    Ok(report)
}
