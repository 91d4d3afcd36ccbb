//! `openai` and `openai-compatible`: the chat completions wire format, streamed.
//! The compatible provider never receives the JSON schema (servers vary in what they accept).

use serde_json::{Value, json};

use super::sse::Events;
use super::{Cancel, ChatModel, ChatOutput, ChatRequest, ErrorKind, Finish, LlmError, ProviderBody, Usage};
use crate::config::Secret;

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

pub struct OpenAi {
    provider: &'static str,
    model: String,
    base_url: String,
    key: Option<Secret<String>>,
    client: reqwest::blocking::Client,
}

impl OpenAi {
    pub fn new(
        provider: &'static str,
        model: &str,
        base_url: &str,
        key: Option<Secret<String>>,
        timeout: std::time::Duration,
    ) -> Result<OpenAi, LlmError> {
        Ok(OpenAi {
            provider,
            model: model.to_string(),
            base_url: base_url.trim_end_matches('/').to_string(),
            key,
            client: super::http_client(timeout)?,
        })
    }

    pub fn body(&self, req: &ChatRequest) -> ProviderBody {
        let messages: Vec<Value> =
            req.messages.iter().map(|m| json!({"role": m.role.as_str(), "content": m.content})).collect();
        let mut body = json!({
            "model": self.model,
            "messages": messages,
            "max_tokens": req.max_tokens,
            "temperature": req.temperature,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if let Some(seed) = req.seed {
            body["seed"] = json!(seed);
        }
        if let Some(s) = req.schema.as_ref().filter(|_| self.native_schema()) {
            body["response_format"] =
                json!({"type": "json_schema", "json_schema": {"name": s.name, "schema": s.schema, "strict": false}});
        }
        body
    }
}

impl ChatModel for OpenAi {
    fn provider(&self) -> &str {
        self.provider
    }
    fn model(&self) -> &str {
        &self.model
    }
    fn native_schema(&self) -> bool {
        self.provider == "openai"
    }

    fn chat(&self, req: &ChatRequest, on_token: &mut dyn FnMut(&str), cancel: &Cancel) -> Result<ChatOutput, LlmError> {
        let mut rb = self.client.post(format!("{}/chat/completions", self.base_url)).json(&self.body(req));
        if let Some(k) = &self.key {
            rb = rb.bearer_auth(k.expose());
        }
        let resp = rb.send().map_err(|e| super::transport_error(self.provider, e))?;
        if !resp.status().is_success() {
            return Err(super::http_error(self.provider, resp));
        }
        let mut events = Events::new(resp);
        let (mut text, mut usage, mut finish) = (String::new(), Usage::default(), Finish::Stop);
        loop {
            if cancel.is_cancelled() {
                finish = Finish::Cancelled;
                break;
            }
            let Some((_, data)) = events.next_event().map_err(|e| stream_error(self.provider, e))? else { break };
            if data.trim() == "[DONE]" {
                break;
            }
            let v: Value = serde_json::from_str(&data).map_err(|e| {
                LlmError::new(ErrorKind::Unavailable, format!("{} sent an unreadable stream event: {e}", self.provider))
            })?;
            if let Some(msg) = v.pointer("/error/message").and_then(Value::as_str) {
                return Err(LlmError::new(
                    ErrorKind::Unavailable,
                    format!("{} failed mid-answer: {msg}", self.provider),
                ));
            }
            if let Some(piece) = v.pointer("/choices/0/delta/content").and_then(Value::as_str)
                && !piece.is_empty()
            {
                text.push_str(piece);
                on_token(piece);
            }
            if v.pointer("/choices/0/finish_reason").and_then(Value::as_str) == Some("length") {
                finish = Finish::Length;
            }
            if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
                usage.prompt_tokens = u["prompt_tokens"].as_u64().unwrap_or(0);
                usage.completion_tokens = u["completion_tokens"].as_u64().unwrap_or(0);
            }
        }
        Ok(ChatOutput { text, usage, finish })
    }
}

pub(crate) fn stream_error(provider: &str, e: std::io::Error) -> LlmError {
    LlmError::new(ErrorKind::Unavailable, format!("{provider}'s stream broke off: {e}"))
}
