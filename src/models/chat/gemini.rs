//! `gemini`: Google's generateContent, streamed (`streamGenerateContent?alt=sse`). The key goes in
//! the `x-goog-api-key` header, never the URL. JSON schemas are sent natively
//! (`responseMimeType` + `responseSchema`).

use serde_json::{Value, json};

use super::openai::stream_error;
use super::sse::Events;
use super::{Cancel, ChatModel, ChatOutput, ChatRequest, ErrorKind, Finish, LlmError, ProviderBody, Role, Usage};
use crate::config::Secret;

pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";

pub struct Gemini {
    model: String,
    base_url: String,
    key: Secret<String>,
    client: reqwest::blocking::Client,
}

impl Gemini {
    pub fn new(
        model: &str,
        base_url: &str,
        key: Secret<String>,
        timeout: std::time::Duration,
    ) -> Result<Gemini, LlmError> {
        Ok(Gemini {
            model: model.to_string(),
            base_url: base_url.trim_end_matches('/').to_string(),
            key,
            client: super::http_client(timeout)?,
        })
    }

    pub fn body(&self, req: &ChatRequest) -> ProviderBody {
        let system: Vec<&str> =
            req.messages.iter().filter(|m| m.role == Role::System).map(|m| m.content.as_str()).collect();
        let contents: Vec<Value> = req
            .messages
            .iter()
            .filter(|m| m.role != Role::System)
            .map(|m| {
                let role = if m.role == Role::Assistant { "model" } else { "user" };
                json!({"role": role, "parts": [{"text": m.content}]})
            })
            .collect();
        let mut generation = json!({"maxOutputTokens": req.max_tokens, "temperature": req.temperature});
        if let Some(seed) = req.seed {
            generation["seed"] = json!(seed);
        }
        if let Some(s) = &req.schema {
            generation["responseMimeType"] = json!("application/json");
            generation["responseSchema"] = strip_unsupported(&s.schema);
        }
        let mut body = json!({"contents": contents, "generationConfig": generation});
        if !system.is_empty() {
            body["systemInstruction"] = json!({"parts": [{"text": system.join("\n\n")}]});
        }
        body
    }
}

/// Gemini's schema dialect is an OpenAPI subset: it refuses `additionalProperties`.
fn strip_unsupported(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| k.as_str() != "additionalProperties")
                .map(|(k, v)| (k.clone(), strip_unsupported(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_unsupported).collect()),
        other => other.clone(),
    }
}

impl ChatModel for Gemini {
    fn provider(&self) -> &str {
        "gemini"
    }
    fn model(&self) -> &str {
        &self.model
    }
    fn native_schema(&self) -> bool {
        true
    }

    fn chat(&self, req: &ChatRequest, on_token: &mut dyn FnMut(&str), cancel: &Cancel) -> Result<ChatOutput, LlmError> {
        let url = format!("{}/v1beta/models/{}:streamGenerateContent?alt=sse", self.base_url, self.model);
        let resp = self
            .client
            .post(url)
            .header("x-goog-api-key", self.key.expose())
            .json(&self.body(req))
            .send()
            .map_err(|e| super::transport_error("gemini", e))?;
        if !resp.status().is_success() {
            return Err(super::http_error("gemini", resp));
        }
        let mut events = Events::new(resp);
        let (mut text, mut usage, mut finish) = (String::new(), Usage::default(), Finish::Stop);
        loop {
            if cancel.is_cancelled() {
                finish = Finish::Cancelled;
                break;
            }
            let Some((_, data)) = events.next_event().map_err(|e| stream_error("gemini", e))? else { break };
            let v: Value = serde_json::from_str(&data).map_err(|e| {
                LlmError::new(ErrorKind::Unavailable, format!("gemini sent an unreadable stream event: {e}"))
            })?;
            if let Some(msg) = v.pointer("/error/message").and_then(Value::as_str) {
                return Err(LlmError::new(ErrorKind::Unavailable, format!("gemini failed mid-answer: {msg}")));
            }
            for part in v.pointer("/candidates/0/content/parts").and_then(Value::as_array).into_iter().flatten() {
                if let Some(piece) = part["text"].as_str() {
                    text.push_str(piece);
                    on_token(piece);
                }
            }
            match v.pointer("/candidates/0/finishReason").and_then(Value::as_str) {
                Some("MAX_TOKENS") => finish = Finish::Length,
                Some("SAFETY") | Some("RECITATION") | Some("BLOCKLIST") | Some("PROHIBITED_CONTENT") => {
                    return Err(LlmError::new(ErrorKind::BadRequest, "gemini blocked the answer (safety filter)"));
                }
                _ => {}
            }
            if let Some(u) = v.get("usageMetadata") {
                usage.prompt_tokens = u["promptTokenCount"].as_u64().unwrap_or(usage.prompt_tokens);
                usage.completion_tokens = u["candidatesTokenCount"].as_u64().unwrap_or(usage.completion_tokens);
            }
        }
        Ok(ChatOutput { text, usage, finish })
    }
}
