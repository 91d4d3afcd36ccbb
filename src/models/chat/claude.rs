//! `claude`: the Anthropic messages API, streamed. System messages go to the `system` field.
//! It has no native JSON-schema mode here, so structured output uses the instruction route.

use serde_json::{Value, json};

use super::openai::stream_error;
use super::sse::Events;
use super::{Cancel, ChatModel, ChatOutput, ChatRequest, ErrorKind, Finish, LlmError, ProviderBody, Role, Usage};
use crate::config::Secret;

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
pub const API_VERSION: &str = "2023-06-01";

pub struct Claude {
    model: String,
    base_url: String,
    key: Secret<String>,
    client: reqwest::blocking::Client,
}

impl Claude {
    pub fn new(
        model: &str,
        base_url: &str,
        key: Secret<String>,
        timeout: std::time::Duration,
    ) -> Result<Claude, LlmError> {
        Ok(Claude {
            model: model.to_string(),
            base_url: base_url.trim_end_matches('/').to_string(),
            key,
            client: super::http_client(timeout)?,
        })
    }

    pub fn body(&self, req: &ChatRequest) -> ProviderBody {
        let system: Vec<&str> =
            req.messages.iter().filter(|m| m.role == Role::System).map(|m| m.content.as_str()).collect();
        let messages: Vec<Value> = req
            .messages
            .iter()
            .filter(|m| m.role != Role::System)
            .map(|m| json!({"role": m.role.as_str(), "content": m.content}))
            .collect();
        let mut body = json!({
            "model": self.model,
            "max_tokens": req.max_tokens,
            "temperature": req.temperature,
            "messages": messages,
            "stream": true,
        });
        if !system.is_empty() {
            body["system"] = json!(system.join("\n\n"));
        }
        body
    }
}

impl ChatModel for Claude {
    fn provider(&self) -> &str {
        "claude"
    }
    fn model(&self) -> &str {
        &self.model
    }
    fn native_schema(&self) -> bool {
        false
    }

    fn chat(&self, req: &ChatRequest, on_token: &mut dyn FnMut(&str), cancel: &Cancel) -> Result<ChatOutput, LlmError> {
        let resp = self
            .client
            .post(format!("{}/v1/messages", self.base_url))
            .header("x-api-key", self.key.expose())
            .header("anthropic-version", API_VERSION)
            .json(&self.body(req))
            .send()
            .map_err(|e| super::transport_error("claude", e))?;
        if !resp.status().is_success() {
            return Err(super::http_error("claude", resp));
        }
        let mut events = Events::new(resp);
        let (mut text, mut usage, mut finish) = (String::new(), Usage::default(), Finish::Stop);
        loop {
            if cancel.is_cancelled() {
                finish = Finish::Cancelled;
                break;
            }
            let Some((_, data)) = events.next_event().map_err(|e| stream_error("claude", e))? else { break };
            let v: Value = serde_json::from_str(&data).map_err(|e| {
                LlmError::new(ErrorKind::Unavailable, format!("claude sent an unreadable stream event: {e}"))
            })?;
            match v["type"].as_str() {
                Some("message_start") => {
                    usage.prompt_tokens = v.pointer("/message/usage/input_tokens").and_then(Value::as_u64).unwrap_or(0);
                }
                Some("content_block_delta") => {
                    if let Some(piece) = v.pointer("/delta/text").and_then(Value::as_str) {
                        text.push_str(piece);
                        on_token(piece);
                    }
                }
                Some("message_delta") => {
                    if let Some(n) = v.pointer("/usage/output_tokens").and_then(Value::as_u64) {
                        usage.completion_tokens = n;
                    }
                    if v.pointer("/delta/stop_reason").and_then(Value::as_str) == Some("max_tokens") {
                        finish = Finish::Length;
                    }
                }
                Some("message_stop") => break,
                Some("error") => {
                    let msg = v.pointer("/error/message").and_then(Value::as_str).unwrap_or("unknown error");
                    let kind = if v.pointer("/error/type").and_then(Value::as_str) == Some("overloaded_error") {
                        ErrorKind::Unavailable
                    } else {
                        ErrorKind::BadRequest
                    };
                    return Err(LlmError::new(kind, format!("claude failed mid-answer: {msg}")));
                }
                _ => {}
            }
        }
        Ok(ChatOutput { text, usage, finish })
    }
}
