//! Judging conditions (triggers, LLM guards) against a visitor's message: the chosen chat model
//! when one is configured explicitly, else the local embedding model's cosine similarity.

use serde_json::json;

use crate::app::App;
use crate::error::Result;
use crate::turn::TurnInput;

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 { 0.0 } else { dot / (na.sqrt() * nb.sqrt()) }
}

/// How a set of conditions was judged against a message.
pub(super) struct Judged {
    pub scores: Vec<f32>,
    /// `chat_model` or `embedding_similarity`.
    pub judge: &'static str,
    pub threshold: f32,
}

/// Scores each condition against the message: the chosen chat model's confidence (JSON output)
/// when one is configured explicitly, else the local embedding model's cosine (`threshold`). A
/// model that fails falls back to the embeddings.
pub(super) fn judge(
    app: &App,
    input: &TurnInput,
    message: &str,
    conditions: &[&str],
    threshold: f32,
) -> Result<Judged> {
    use crate::models::chat::{Cancel, ChatRequest, Message, OutputSchema, chat_json};
    let models = crate::turn::TurnModels::resolve(app, &input.workspace, &input.agent)?;
    if let Some(m) = crate::turn::as_model(&models.matcher) {
        let listing: String = conditions.iter().enumerate().map(|(i, c)| format!("{i}: {c}\n")).collect();
        let schema = json!({"type": "object", "required": ["scores"], "properties": {"scores": {"type": "array",
            "items": {"type": "object", "required": ["index", "confidence"],
                      "properties": {"index": {"type": "integer"}, "confidence": {"type": "number", "minimum": 0, "maximum": 1}}}}}});
        let req = ChatRequest::new(vec![
            Message::system("For each numbered condition, judge whether the visitor's message meets it. Return every condition's index with a confidence from 0 to 1."),
            Message::user(format!("Conditions:\n{listing}\nVisitor's message: {message}")),
        ])
        .max_tokens(300);
        match chat_json(
            m,
            ChatRequest { temperature: 0.0, ..req },
            OutputSchema { name: "routine_conditions".into(), schema },
            &Cancel::new(),
        ) {
            Ok((v, _)) => {
                let mut scores = vec![0.0f32; conditions.len()];
                for x in v["scores"].as_array().into_iter().flatten() {
                    if let (Some(i), Some(c)) = (x["index"].as_u64(), x["confidence"].as_f64())
                        && let Some(slot) = scores.get_mut(i as usize)
                    {
                        *slot = c as f32;
                    }
                }
                return Ok(Judged { scores, judge: "chat_model", threshold: 0.5 });
            }
            Err(e) => tracing::warn!(error = %e.message, "routine conditions: the model failed; using the embeddings"),
        }
    }
    Ok(Judged { scores: similarities(app, message, conditions)?, judge: "embedding_similarity", threshold })
}

/// Vectors of authored texts (triggers, guard prose): they change only when a routine does, so
/// they are embedded once per process (at most [`CONDITION_CACHE`] texts; then the cache starts
/// over).
static CONDITIONS: std::sync::OnceLock<parking_lot::Mutex<std::collections::HashMap<String, Vec<f32>>>> =
    std::sync::OnceLock::new();
const CONDITION_CACHE: usize = 4096;

/// Similarity of a message to each text (the local embedding model).
fn similarities(app: &App, message: &str, texts: &[&str]) -> Result<Vec<f32>> {
    let e = app.models.embedder()?;
    let failed = |e: crate::models::embed::EmbedError| crate::Error::unavailable(format!("embedding failed: {e}"));
    let q = e.embed_query(message).map_err(failed)?;
    let cache = CONDITIONS.get_or_init(Default::default);
    let mut out = Vec::with_capacity(texts.len());
    for t in texts {
        let known = cache.lock().get(*t).cloned();
        let v = match known {
            Some(v) => v,
            None => {
                let v = e.embed_query(t).map_err(failed)?;
                let mut c = cache.lock();
                if c.len() >= CONDITION_CACHE {
                    c.clear();
                }
                c.insert(t.to_string(), v.clone());
                v
            }
        };
        out.push(cosine(&q, &v));
    }
    Ok(out)
}

/// Says a routine's reply with the directives scoped to the routine or its step as guidance,
/// through the chosen chat model (none configured, or a failure: the reply as it is). Facts and
/// values in the reply are kept; the directives' bindings do not run here.
pub(super) fn phrase(app: &App, input: &TurnInput, reply: &str, guidance: &[&str]) -> Option<String> {
    use crate::models::chat::{Cancel, ChatRequest, Message};
    if guidance.is_empty() || reply.trim().is_empty() {
        return None;
    }
    let models = crate::turn::TurnModels::resolve(app, &input.workspace, &input.agent).ok()?;
    let m = crate::turn::as_model(&models.matcher)?;
    let rules: String = guidance.iter().map(|g| format!("- {g}\n")).collect();
    let req = ChatRequest::new(vec![
        Message::system(format!(
            "You write the assistant's next message in a guided flow. Keep every fact, value, question and request of the draft; follow these operator rules as subordinate guidance:\n{rules}Reply with the message only."
        )),
        Message::user(format!("Visitor's last message: {}\n\nDraft: {reply}", input.message)),
    ])
    .max_tokens(300);
    match m.chat(&req, &mut |_| {}, &Cancel::new()) {
        Ok(o) if !o.text.trim().is_empty() => Some(o.text.trim().to_string()),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(error = %e.message, "routine reply: the model failed; the reply is used as it is");
            None
        }
    }
}
