//! `steward bench models`: the local GGUF model (load time, prompt and generation speed, time to
//! first token for a grounded prompt of ~1,500 tokens, memory) and the built-in extractive
//! answerer's latency per answer over the Cranfield queries.

use std::time::Instant;

use serde_json::{Value, json};

use super::cranfield::Collection;
use super::{median, percentile};
use crate::config::Config;
use crate::models::chat::{Cancel, ChatRequest, Message};
use crate::models::extractive::{self, Passage};

/// A grounded prompt: instructions, passages of the collection up to about `target_tokens`
/// (counted roughly as words × 1.3), and a question.
pub fn grounded_prompt(c: &Collection, query: &str, target_tokens: usize) -> ChatRequest {
    let mut context = String::new();
    for (n, d) in (1..).zip(c.docs.iter()) {
        if (context.split_whitespace().count() as f64 * 1.3) as usize >= target_tokens {
            break;
        }
        context.push_str(&format!("[{n}] {}\n{}\n\n", d.title.trim(), d.body.trim()));
    }
    let mut r = ChatRequest::new(vec![
        Message::system("Answer the question using only the numbered sources below. Cite sources as [n]. If they do not answer it, say so."),
        Message::user(format!("Sources:\n{context}\nQuestion: {query}")),
    ])
    .max_tokens(64);
    r.temperature = 0.0;
    r
}

#[cfg(feature = "llama")]
fn local(config: &Config, c: &Collection, runs: usize) -> anyhow::Result<Value> {
    let path = crate::models::resolve::local_model_path(config)
        .ok_or_else(|| anyhow::anyhow!("no GGUF file found; run scripts/fetch-models.sh"))?;
    let mut report = json!({
        "model": path.display().to_string(),
        "contextTokens": config.llm.local_context,
        "promptBatch": "16 tokens, batches at fixed positions (see models/chat/local)",
    });
    // the prompt cache off: every run reads the whole prompt
    for threads in [1usize, 2] {
        let settings = crate::models::chat::local::LocalSettings {
            threads,
            context: config.llm.local_context,
            cache_bytes: 0,
            sequences: 1,
        };
        report[format!("threads{threads}")] = speeds(&path, settings, c, runs)?;
    }
    report["autoThreadsNow"] = json!(crate::models::chat::local::threads_now(8, false));
    Ok(report)
}

#[cfg(feature = "llama")]
fn speeds(
    path: &std::path::Path,
    settings: crate::models::chat::local::LocalSettings,
    c: &Collection,
    runs: usize,
) -> anyhow::Result<Value> {
    use crate::models::chat::local::LocalModel;
    let rss_before = super::rss_mib(std::process::id()).map(|x| x.1).unwrap_or(f64::NAN);
    let (mut loads, mut prefill, mut generation, mut ttft, mut prompt_tokens) = (vec![], vec![], vec![], vec![], 0);
    let mut rss_loaded = f64::NAN;
    for _ in 0..runs {
        let t = Instant::now();
        let m = LocalModel::load(path, settings)?;
        loads.push(t.elapsed().as_secs_f64() * 1000.0);
        rss_loaded = super::rss_mib(std::process::id()).map(|x| x.1).unwrap_or(f64::NAN);
        for q in c.queries.iter().take(3) {
            let req = grounded_prompt(c, &q.text, 1400);
            let (_, s) = m.generate(&req, &mut |_| {}, &Cancel::new())?;
            prompt_tokens = s.prompt_tokens;
            prefill.push(s.prompt_tokens as f64 / (s.prompt_ms / 1000.0));
            ttft.push(s.first_token_ms);
            if s.generated_tokens > 1 {
                generation.push(s.generated_tokens as f64 / (s.generate_ms / 1000.0));
            }
        }
        // generation speed on a short prompt with a long answer
        let mut r = ChatRequest::new(vec![Message::user("Write a paragraph about aircraft wings.")]).max_tokens(128);
        r.temperature = 0.0;
        let (_, s) = m.generate(&r, &mut |_| {}, &Cancel::new())?;
        if s.generated_tokens > 1 {
            generation.push(s.generated_tokens as f64 / (s.generate_ms / 1000.0));
        }
    }
    let peak = super::rss_mib(std::process::id()).map(|x| x.0).unwrap_or(f64::NAN);
    Ok(json!({
        "threads": settings.threads,
        "loadMs": median(&loads),
        "groundedPromptTokens": prompt_tokens,
        "promptTokensPerSecond": median(&prefill),
        "generationTokensPerSecond": median(&generation),
        "timeToFirstTokenMs": {"p50": median(&ttft), "p95": percentile(&ttft, 95.0)},
        "rssMiB": {"beforeLoad": rss_before, "loaded": rss_loaded, "peak": peak},
    }))
}

#[cfg(not(feature = "llama"))]
fn local(_: &Config, _: &Collection, _: usize) -> anyhow::Result<Value> {
    Ok(json!({"skipped": "built without the `llama` feature"}))
}

/// The extractive answerer over each query's judged documents (up to 8 passages, as retrieval
/// would hand them over).
fn extractive_latency(c: &Collection, runs: usize) -> Value {
    let by_id: std::collections::HashMap<u32, &super::cranfield::Doc> = c.docs.iter().map(|d| (d.id, d)).collect();
    let mut times = Vec::new();
    let mut covered = 0;
    for run in 0..runs {
        for q in &c.queries {
            let mut judged: Vec<(&u32, &u32)> = c.qrels.get(&q.id).map(|m| m.iter().collect()).unwrap_or_default();
            judged.sort();
            let passages: Vec<Passage> = judged
                .iter()
                .filter_map(|(id, _)| by_id.get(id))
                .take(8)
                .map(|d| Passage {
                    document_id: d.id.to_string(),
                    chunk_id: d.id.to_string(),
                    title: d.title.clone(),
                    content: d.body.clone(),
                    url: None,
                })
                .collect();
            let t = Instant::now();
            let a = extractive::compose(&q.text, &passages);
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            if run == 0 && a.covered {
                covered += 1;
            }
        }
    }
    json!({
        "answers": times.len(),
        "p50Ms": median(&times),
        "p95Ms": percentile(&times, 95.0),
        "coveredShare": covered as f64 / c.queries.len().max(1) as f64,
    })
}

pub fn run(config: &Config, c: &Collection, runs: usize) -> anyhow::Result<Value> {
    Ok(json!({
        "extractive": extractive_latency(c, runs),
        "local": local(config, c, runs)?,
    }))
}
