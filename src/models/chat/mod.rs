//! The one chat-model interface every caller uses (answers, rewrites, reranking, judgements,
//! enrichment): messages in, text out, tokens streamed to a callback, cancellation, token usage,
//! structured JSON output and typed errors.
//!
//! Calls are blocking: callers run on worker or blocking threads, never on the async runtime.
//! Hosted providers speak HTTP (`openai.rs`, `claude.rs`, `gemini.rs`); `local.rs` runs a GGUF
//! file through llama.cpp.

pub mod claude;
pub mod gemini;
#[cfg(feature = "llama")]
pub mod local;
pub mod openai;
mod sse;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

impl Message {
    pub fn system(c: impl Into<String>) -> Message {
        Message { role: Role::System, content: c.into() }
    }
    pub fn user(c: impl Into<String>) -> Message {
        Message { role: Role::User, content: c.into() }
    }
    pub fn assistant(c: impl Into<String>) -> Message {
        Message { role: Role::Assistant, content: c.into() }
    }
}

/// A JSON Schema the output must follow, with a name (providers ask for one).
#[derive(Debug, Clone)]
pub struct OutputSchema {
    pub name: String,
    pub schema: JsonSchema,
}

/// A JSON Schema (the subset [`check`] reads): free-form JSON.
pub type JsonSchema = Value;
/// A model's structured reply: free-form JSON, checked against a [`JsonSchema`].
pub type StructuredReply = Value;
/// A provider's request body: free-form JSON in that provider's own API shape.
pub type ProviderBody = Value;

#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    pub max_tokens: u32,
    pub temperature: f32,
    /// A fixed sampling seed where the provider takes one (OpenAI, Gemini, the local model), so a
    /// repeated call samples the same way.
    pub seed: Option<u64>,
    /// A GBNF grammar the local model's sampling must follow (hosted providers ignore it).
    pub grammar: Option<String>,
    /// Ask the provider for JSON following this schema where it supports it natively.
    pub schema: Option<OutputSchema>,
    /// Whose prompts may share the local model's prompt cache with this one (the agent): a
    /// cached state is never reused across scopes, so one tenant's prompts cannot be probed
    /// through another's cache hits. `None`: the unscoped cache.
    pub cache_scope: Option<String>,
}

impl ChatRequest {
    pub fn new(messages: Vec<Message>) -> ChatRequest {
        ChatRequest {
            messages,
            max_tokens: 512,
            temperature: 0.2,
            seed: None,
            grammar: None,
            schema: None,
            cache_scope: None,
        }
    }
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = n;
        self
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens a local model restored from its prompt cache instead of reading (part of
    /// `prompt_tokens`; 0 for providers that do not say).
    #[serde(skip_serializing_if = "is_zero")]
    pub cached_prompt_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    Stop,
    Length,
    Cancelled,
}

#[derive(Debug, Clone)]
pub struct ChatOutput {
    pub text: String,
    pub usage: Usage,
    pub finish: Finish,
}

/// What went wrong, in terms a caller can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The key is missing, wrong or lacks access (401/403 from the provider).
    Auth,
    /// The provider throttled the call (429); see `retry_after_secs`.
    RateLimited,
    /// Network failure, timeout or a 5xx: worth retrying later.
    Unavailable,
    /// The model answered, but not in the shape asked for (even after one repair).
    InvalidOutput,
    /// The provider refused the request itself (400, unknown model).
    BadRequest,
    /// The selection cannot work as configured (no base URL, no key, no model file).
    Misconfigured,
    /// The caller cancelled.
    Cancelled,
}

#[derive(Debug, Clone)]
pub struct LlmError {
    pub kind: ErrorKind,
    pub message: String,
    pub retry_after_secs: Option<u64>,
}

impl LlmError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> LlmError {
        LlmError { kind, message: message.into(), retry_after_secs: None }
    }
    pub fn retryable(&self) -> bool {
        matches!(self.kind, ErrorKind::RateLimited | ErrorKind::Unavailable)
    }
}

impl fmt::Display for LlmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for LlmError {}

impl From<LlmError> for crate::Error {
    fn from(e: LlmError) -> crate::Error {
        use crate::{Error, ErrorCode};
        let kind = serde_json::to_value(e.kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        let details = serde_json::json!({"code": format!("model_{kind}")});
        let code = match e.kind {
            ErrorKind::RateLimited => ErrorCode::RateLimitExceeded,
            ErrorKind::Misconfigured | ErrorKind::Auth | ErrorKind::BadRequest => ErrorCode::ProviderMisconfigured,
            ErrorKind::InvalidOutput => ErrorCode::Unprocessable,
            ErrorKind::Unavailable | ErrorKind::Cancelled => ErrorCode::ServiceUnavailable,
        };
        let mut details = details;
        if let Some(s) = e.retry_after_secs {
            details["retryAfterSeconds"] = s.into();
        }
        Error::new(code, e.message).with_details(details)
    }
}

/// A cancellation flag shared between a caller and a running generation.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// A chat model. Implementations stream text pieces to `on_token` as they arrive and check
/// `cancel` between pieces; a cancelled call returns what it had with `Finish::Cancelled`.
pub trait ChatModel: Send + Sync {
    fn provider(&self) -> &str;
    fn model(&self) -> &str;
    /// True when the provider enforces `ChatRequest::schema` itself.
    fn native_schema(&self) -> bool;
    fn chat(&self, req: &ChatRequest, on_token: &mut dyn FnMut(&str), cancel: &Cancel) -> Result<ChatOutput, LlmError>;
    /// The model's context window in tokens, when it is small enough to plan a prompt around (the
    /// local model's).
    fn context_window(&self) -> Option<usize> {
        None
    }
    /// How many prompt tokens the model reads in `seconds` on the cores it would get now, when it
    /// reads slowly enough for a prompt to be planned around it (the local model, from its own
    /// recent reading speed). Hosted models read fast enough: `None`.
    fn prompt_tokens_within(&self, _seconds: f64) -> Option<usize> {
        None
    }
    /// [`ChatModel::chat`] for a model that serves one caller at a time (the local model): while
    /// the call waits its turn, `on_wait` hears how many are ahead of it. Hosted models never wait.
    fn chat_queued(
        &self,
        req: &ChatRequest,
        on_token: &mut dyn FnMut(&str),
        on_wait: &mut dyn FnMut(usize),
        cancel: &Cancel,
    ) -> Result<ChatOutput, LlmError> {
        let _ = on_wait;
        self.chat(req, on_token, cancel)
    }
}

/// Structured output: asks for JSON following `schema` (natively where the provider can,
/// otherwise by instruction), parses it strictly, checks it against the schema, and on failure
/// asks once more with the problem spelled out.
pub fn chat_json(
    model: &dyn ChatModel,
    mut req: ChatRequest,
    schema: OutputSchema,
    cancel: &Cancel,
) -> Result<(StructuredReply, Usage), LlmError> {
    let instruction = format!(
        "Reply with one JSON object only, no prose and no code fences. It must match this JSON Schema:\n{}",
        schema.schema
    );
    match req.messages.first_mut() {
        Some(m) if m.role == Role::System => {
            m.content.push_str("\n\n");
            m.content.push_str(&instruction);
        }
        _ => req.messages.insert(0, Message::system(instruction)),
    }
    req.schema = if model.native_schema() { Some(schema.clone()) } else { None };
    let mut usage = Usage::default();
    let first = model.chat(&req, &mut |_| {}, cancel)?;
    add_usage(&mut usage, first.usage);
    let problem = match parse_checked(&first.text, &schema.schema) {
        Ok(v) => return Ok((v, usage)),
        Err(p) => p,
    };
    if cancel.is_cancelled() {
        return Err(LlmError::new(ErrorKind::Cancelled, "cancelled"));
    }
    req.messages.push(Message::assistant(first.text));
    req.messages.push(Message::user(format!(
        "That reply is not valid: {problem}. Reply again with only the corrected JSON object."
    )));
    let second = model.chat(&req, &mut |_| {}, cancel)?;
    add_usage(&mut usage, second.usage);
    parse_checked(&second.text, &schema.schema)
        .map(|v| (v, usage))
        .map_err(|p| LlmError::new(ErrorKind::InvalidOutput, format!("the model did not return valid JSON: {p}")))
}

fn add_usage(total: &mut Usage, u: Usage) {
    total.prompt_tokens += u.prompt_tokens;
    total.completion_tokens += u.completion_tokens;
    total.cached_prompt_tokens += u.cached_prompt_tokens;
}

/// Where a JSON object starts.
const OBJECT_OPEN: char = '{';

/// Parses the first JSON object of `text` (tolerating code fences around it) and checks it.
pub fn parse_checked(text: &str, schema: &JsonSchema) -> Result<StructuredReply, String> {
    let t = text.trim();
    let start = t.find(OBJECT_OPEN).ok_or("no JSON object in the reply")?;
    let mut de = serde_json::Deserializer::from_str(&t[start..]).into_iter::<Value>();
    let v = match de.next() {
        Some(Ok(v)) => v,
        Some(Err(e)) => return Err(format!("not valid JSON ({e})")),
        None => return Err("no JSON object in the reply".into()),
    };
    check(&v, schema, "$")?;
    Ok(v)
}

/// Checks `v` against the subset of JSON Schema Steward writes: `type`, `properties`,
/// `required`, `enum`, `items`, `additionalProperties: false`, `minimum`/`maximum`.
pub fn check(v: &StructuredReply, schema: &JsonSchema, path: &str) -> Result<(), String> {
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(v)
    {
        return Err(format!("{path} must be one of {}", Value::Array(allowed.clone())));
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    if !types.is_empty() && !types.iter().any(|t| type_matches(v, t)) {
        return Err(format!("{path} must be of type {}", types.join(" or ")));
    }
    if let Some(n) = v.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            return Err(format!("{path} must be at least {min}"));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            return Err(format!("{path} must be at most {max}"));
        }
    }
    if let Value::Object(map) = v {
        let props = schema.get("properties").and_then(Value::as_object);
        for key in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            if !map.contains_key(key) {
                return Err(format!("{path}.{key} is required"));
            }
        }
        for (k, val) in map {
            match props.and_then(|p| p.get(k)) {
                Some(s) => check(val, s, &format!("{path}.{k}"))?,
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    return Err(format!("{path}.{k} is not allowed"));
                }
                None => {}
            }
        }
    }
    if let (Value::Array(items), Some(s)) = (v, schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            check(item, s, &format!("{path}[{i}]"))?;
        }
    }
    Ok(())
}

fn type_matches(v: &Value, t: &str) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.as_i64().is_some() || v.as_u64().is_some(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => true,
    }
}

/// The blocking HTTP client hosted providers share (no redirects: an API never needs one).
pub(crate) fn http_client(timeout: std::time::Duration) -> Result<reqwest::blocking::Client, LlmError> {
    reqwest::blocking::Client::builder()
        .timeout(timeout)
        .connect_timeout(std::time::Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("steward/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| LlmError::new(ErrorKind::Unavailable, format!("cannot create the HTTP client: {e}")))
}

/// Maps a failed HTTP response to a typed error. The provider's own message is kept (it never
/// contains our key); the body is cut short.
pub(crate) fn http_error(provider: &str, resp: reqwest::blocking::Response) -> LlmError {
    let status = resp.status();
    let retry_after =
        resp.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok());
    let body = resp.text().unwrap_or_default();
    let detail = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| v["message"].as_str().map(str::to_string))
        })
        .unwrap_or_else(|| body.chars().take(200).collect());
    let kind = match status.as_u16() {
        401 | 403 => ErrorKind::Auth,
        429 => ErrorKind::RateLimited,
        400 | 404 | 409 | 413 | 422 => ErrorKind::BadRequest,
        _ => ErrorKind::Unavailable,
    };
    let what = match kind {
        ErrorKind::Auth => "rejected the API key",
        ErrorKind::RateLimited => "is rate-limiting this key",
        ErrorKind::BadRequest => "refused the request",
        _ => "is unavailable",
    };
    let mut e = LlmError::new(kind, format!("{provider} {what} (HTTP {}): {detail}", status.as_u16()));
    e.retry_after_secs = retry_after;
    e
}

pub(crate) fn transport_error(provider: &str, e: reqwest::Error) -> LlmError {
    let what = if e.is_timeout() { "timed out" } else { "could not be reached" };
    // reqwest's message can include the URL; ours never carries a key in the URL.
    LlmError::new(ErrorKind::Unavailable, format!("{provider} {what}: {}", e.without_url()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parse_checked_accepts_fenced_json_and_checks_types() {
        let schema = json!({"type": "object", "required": ["shape"], "properties": {"shape": {"type": "string", "enum": ["a", "b"]}, "n": {"type": "number", "minimum": 0, "maximum": 1}}});
        assert_eq!(parse_checked("```json\n{\"shape\":\"a\"}\n```", &schema).unwrap(), json!({"shape": "a"}));
        assert!(parse_checked("{\"shape\":\"c\"}", &schema).unwrap_err().contains("one of"));
        assert!(parse_checked("{}", &schema).unwrap_err().contains("required"));
        assert!(parse_checked("{\"shape\":\"a\",\"n\":2}", &schema).unwrap_err().contains("at most"));
        assert!(parse_checked("sure!", &schema).is_err());
    }

    struct Scripted(parking_lot::Mutex<Vec<&'static str>>, parking_lot::Mutex<Vec<ChatRequest>>);
    impl ChatModel for Scripted {
        fn provider(&self) -> &str {
            "test"
        }
        fn model(&self) -> &str {
            "scripted"
        }
        fn native_schema(&self) -> bool {
            false
        }
        fn chat(&self, req: &ChatRequest, _: &mut dyn FnMut(&str), _: &Cancel) -> Result<ChatOutput, LlmError> {
            self.1.lock().push(req.clone());
            let text = self.0.lock().remove(0).to_string();
            Ok(ChatOutput {
                text,
                usage: Usage { prompt_tokens: 10, completion_tokens: 5, ..Usage::default() },
                finish: Finish::Stop,
            })
        }
    }

    #[test]
    fn chat_json_repairs_once_then_gives_up() {
        let schema = OutputSchema { name: "x".into(), schema: json!({"type": "object", "required": ["a"]}) };
        let m = Scripted(parking_lot::Mutex::new(vec!["nope", "{\"a\": 1}"]), Default::default());
        let (v, usage) =
            chat_json(&m, ChatRequest::new(vec![Message::user("q")]), schema.clone(), &Cancel::new()).unwrap();
        assert_eq!(v, json!({"a": 1}));
        assert_eq!(usage.prompt_tokens, 20);
        let sent = m.1.lock();
        assert!(sent[0].messages[0].content.contains("JSON Schema"));
        assert!(sent[1].messages.last().unwrap().content.contains("not valid"));
        let m = Scripted(parking_lot::Mutex::new(vec!["nope", "still no"]), Default::default());
        let e = chat_json(&m, ChatRequest::new(vec![Message::user("q")]), schema, &Cancel::new()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidOutput);
    }
}
