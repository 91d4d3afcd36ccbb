//! `steward bench evals`: eval suites on Cranfield through the API of a real server. Each of the
//! first N judged queries is asked once in chat, its answer saved as a case (by source message)
//! asserting that the most relevant judged document is retrieved; then the whole suite runs in
//! `retrieval_only` and in `full_assistant` with the built-in answerer (wall time and cases/s,
//! medians over repeats), and, with the local GGUF, a few cases are answered and judged by
//! `llm_judge` (seconds per judged case, beside the same cases answered without a judge).

use std::collections::HashMap;
use std::time::Instant;

use serde_json::{Value, json};

use super::cranfield::Collection;
use super::knowledge::{cranfield_ingestion, ingest_cranfield};
use super::median;
use super::server::ChildServer;

/// Cranfield id → document id (the chat benchmark's map, turned around).
async fn doc_ids(s: &ChildServer) -> anyhow::Result<HashMap<u32, String>> {
    Ok(super::chat::id_map(s).await?.into_iter().map(|(doc, cranfield)| (cranfield, doc)).collect())
}

/// Runs a suite and waits for it; returns (seconds, the finished suite).
async fn suite(s: &ChildServer, body: Value) -> anyhow::Result<(f64, Value)> {
    let started = Instant::now();
    let mut body = body;
    body["wait"] = json!(false);
    let v = s.send(reqwest::Method::POST, "/api/v1/evals/cases/run", &body).await?;
    let id = v["id"].as_str().ok_or_else(|| anyhow::anyhow!("no suite id: {v}"))?.to_string();
    loop {
        let v = s.get(&format!("/api/v1/evals/suites/{id}?waitMs=30000")).await?;
        match v["status"].as_str() {
            Some("completed") => return Ok((started.elapsed().as_secs_f64(), v)),
            Some("failed") => anyhow::bail!("the suite failed: {}", v["error"]),
            _ => {}
        }
    }
}

async fn set_assertions(s: &ChildServer, case: &str, assertions: Value) -> anyhow::Result<()> {
    s.send(reqwest::Method::PATCH, &format!("/api/v1/evals/cases/{case}"), &json!({"assertions": assertions})).await?;
    Ok(())
}

/// The reference answer a judged case is graded against: the first sentence of the most relevant
/// document (Cranfield has no answers of its own).
fn reference(c: &Collection, doc: u32) -> String {
    let body = c.docs.iter().find(|d| d.id == doc).map(|d| d.body.as_str()).unwrap_or_default();
    let first = body.split(". ").next().unwrap_or(body);
    first.chars().take(600).collect()
}

/// Runs the benchmark.
pub async fn run(
    c: &Collection,
    concurrency: usize,
    cases: usize,
    repeats: usize,
    gguf: Option<std::path::PathBuf>,
    judged: usize,
) -> anyhow::Result<Value> {
    let (ingest, s) = ingest_cranfield(c, &cranfield_ingestion(), concurrency).await?;
    eprintln!("ingested {} documents in {:.1} s", ingest.docs, ingest.seconds);
    let ids = doc_ids(&s).await?;
    let mut made: Vec<(String, u32)> = Vec::new();
    let save_started = Instant::now();
    for q in &c.queries {
        if made.len() >= cases {
            break;
        }
        let Some(judgements) = c.qrels.get(&q.id) else { continue };
        let Some((&best, _)) = judgements.iter().max_by_key(|(d, g)| (**g, std::cmp::Reverse(**d))) else { continue };
        let Some(doc) = ids.get(&best) else { continue };
        let v = s.send(reqwest::Method::POST, "/api/v1/chat", &json!({"message": q.text})).await?;
        let mid = v["messageId"].as_str().ok_or_else(|| anyhow::anyhow!("no message id: {v}"))?;
        let case =
            s.send(reqwest::Method::PUT, &format!("/api/v1/evals/cases/by-source-message/{mid}"), &json!({})).await?;
        let case = case["case"]["id"].as_str().unwrap_or_default().to_string();
        set_assertions(&s, &case, json!([{"type": "retrieval_includes_document", "documentId": doc}])).await?;
        made.push((case, best));
    }
    let save_seconds = save_started.elapsed().as_secs_f64();
    eprintln!("saved {} cases in {save_seconds:.1} s", made.len());

    let mut retrieval = Vec::new();
    let mut pass_rate = Value::Null;
    for _ in 0..repeats.max(1) {
        let (secs, v) = suite(&s, json!({"mode": "retrieval_only"})).await?;
        pass_rate = v["runSummary"]["passRate"].clone();
        retrieval.push(secs);
    }
    let mut full = Vec::new();
    let mut full_pass_rate = Value::Null;
    for _ in 0..repeats.max(1) {
        let (secs, v) = suite(&s, json!({"mode": "full_assistant"})).await?;
        full_pass_rate = v["runSummary"]["passRate"].clone();
        full.push(secs);
    }
    let n = made.len() as f64;
    let mut report = json!({
        "machine": {"cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)},
        "cases": made.len(),
        "saveSeconds": save_seconds,
        "retrievalOnly": {"wallSeconds": retrieval, "medianSeconds": median(&retrieval), "casesPerSecond": n / median(&retrieval), "passRate": pass_rate},
        "fullAssistantBuiltin": {"wallSeconds": full, "medianSeconds": median(&full), "casesPerSecond": n / median(&full), "passRate": full_pass_rate},
        "peakRssMiB": s.rss().0,
    });
    if let (Some(path), true) = (gguf, judged > 0) {
        let s = s.restart(&[("STEWARD_LOCAL_MODEL", path.display().to_string())])?;
        let picked: Vec<&(String, u32)> = made.iter().take(judged).collect();
        let case_ids: Vec<&String> = picked.iter().map(|(c, _)| c).collect();
        // warm-up: loads the model
        suite(&s, json!({"mode": "full_assistant", "caseIds": [case_ids[0]]})).await?;
        let (answered, _) = suite(&s, json!({"mode": "full_assistant", "caseIds": case_ids})).await?;
        for (case, doc) in &picked {
            set_assertions(&s, case, json!([{"type": "llm_judge", "expectedAnswer": reference(c, *doc)}])).await?;
        }
        let (judged_secs, v) = suite(&s, json!({"mode": "full_assistant", "caseIds": case_ids})).await?;
        let k = picked.len() as f64;
        let verdicts: HashMap<String, usize> =
            v["results"].as_array().into_iter().flatten().fold(HashMap::new(), |mut m, r| {
                *m.entry(r["status"].as_str().unwrap_or("?").to_string()).or_default() += 1;
                m
            });
        report["localGgufJudge"] = json!({
            "model": path.file_name().map(|f| f.to_string_lossy().to_string()),
            "cases": picked.len(),
            "answeredSecondsPerCase": answered / k,
            "answeredAndJudgedSecondsPerCase": judged_secs / k,
            "judgeSecondsPerCase": (judged_secs - answered) / k,
            "verdicts": verdicts,
        });
        s.stop();
    } else {
        s.stop();
    }
    Ok(report)
}
