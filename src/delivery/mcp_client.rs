//! Outbound MCP: Steward as a client of another MCP server (an agent's `mcp_tool` skill), over
//! the official Rust SDK's streamable HTTP transport carried by the delivery client — the SSRF
//! guard is its only resolver, IP-literal URLs are checked first, and redirects are not followed.
//!
//! Each use opens a session (initialize), does its one thing (list the tools, or call one) and
//! closes it; calls are bounded by [`CALL_TIMEOUT`], and every answer (a JSON body, an error body,
//! each event stream) is read through a byte limit (`mcp_max_response_bytes`) as it arrives: over
//! it, the read stops and the use fails saying so.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::StatusCode;
use reqwest::header::{self, HeaderName, HeaderValue};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, SseError, StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse,
};
use serde_json::{Map, Value};
use sse_stream::{Sse, SseStream};

use crate::app::App;
use crate::error::{Error, ErrorCode, Result};

/// How long one outbound MCP use (connect, then list or call) may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// A tool the remote server offers.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteTool {
    pub name: String,
    pub description: Option<String>,
    pub input_schema: Value,
}

/// What a remote tool answered.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteResult {
    pub is_error: bool,
    /// The text contents, joined by blank lines.
    pub text: String,
    pub structured: Option<Value>,
}

/// The delivery client, as the MCP transport's HTTP client, with the byte limit of one answer.
#[derive(Clone)]
struct Guarded {
    http: reqwest::Client,
    limit: usize,
    /// Set when an answer went over the limit (the transport's own error loses the reason).
    over: Arc<AtomicBool>,
}

/// Why a capped read stopped.
#[derive(Debug)]
enum ReadError {
    Http(reqwest::Error),
    TooLarge(usize),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Http(e) => write!(f, "{e}"),
            ReadError::TooLarge(n) => write!(f, "the answer exceeds the limit of {n} bytes"),
        }
    }
}

impl std::error::Error for ReadError {}

impl Guarded {
    fn too_large(&self) -> ReadError {
        if !self.over.swap(true, Ordering::Relaxed) {
            tracing::warn!(limit = self.limit, "outbound MCP: an answer went over the size limit; read aborted");
        }
        ReadError::TooLarge(self.limit)
    }

    /// The whole body, or `TooLarge` as soon as more than the limit has arrived (a declared
    /// length over it is refused before anything is read).
    async fn read(&self, resp: reqwest::Response) -> std::result::Result<Vec<u8>, ReadError> {
        if resp.content_length().is_some_and(|n| n > self.limit as u64) {
            return Err(self.too_large());
        }
        let mut body = Vec::new();
        let mut chunks = resp.bytes_stream();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(ReadError::Http)?;
            if body.len() + chunk.len() > self.limit {
                return Err(self.too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// The body as a stream of chunks that ends with `TooLarge` once the stream as a whole passes
    /// the limit.
    fn stream(
        &self,
        resp: reqwest::Response,
    ) -> impl futures::Stream<Item = std::result::Result<bytes::Bytes, ReadError>> + Send + 'static {
        let this = self.clone();
        let mut seen = 0usize;
        let mut done = false;
        resp.bytes_stream()
            .map(move |chunk| {
                let chunk = chunk.map_err(ReadError::Http)?;
                seen = seen.saturating_add(chunk.len());
                if seen > this.limit { Err(this.too_large()) } else { Ok(chunk) }
            })
            .take_while(move |r| {
                // nothing after the first error
                let go = !done;
                done = done || r.is_err();
                futures::future::ready(go)
            })
    }
}

type E = StreamableHttpError<reqwest::Error>;
const SESSION: &str = "mcp-session-id";

fn apply(
    mut rb: reqwest::RequestBuilder,
    session_id: Option<&str>,
    auth: Option<String>,
    custom: HashMap<HeaderName, HeaderValue>,
) -> reqwest::RequestBuilder {
    if let Some(t) = auth {
        rb = rb.bearer_auth(t);
    }
    if let Some(s) = session_id {
        rb = rb.header(SESSION, s);
    }
    for (k, v) in custom {
        rb = rb.header(k, v);
    }
    rb
}

fn auth_error(resp: &reqwest::Response) -> Option<E> {
    if resp.status() != StatusCode::UNAUTHORIZED {
        return None;
    }
    let h = resp.headers().get(header::WWW_AUTHENTICATE)?.to_str().ok()?;
    Some(StreamableHttpError::AuthRequired(AuthRequiredError::new(h.to_owned())))
}

fn content_type_is(resp: &reqwest::Response, mime: &str) -> bool {
    resp.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case(mime))
}

impl StreamableHttpClient for Guarded {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> std::result::Result<StreamableHttpPostResponse, E> {
        let rb =
            self.http.post(uri.as_ref()).header(header::ACCEPT, "text/event-stream, application/json").json(&message);
        let resp = apply(rb, session_id.as_deref(), auth_header, custom_headers)
            .send()
            .await
            .map_err(StreamableHttpError::Client)?;
        if let Some(e) = auth_error(&resp) {
            return Err(e);
        }
        let status = resp.status();
        if status == StatusCode::ACCEPTED || status == StatusCode::NO_CONTENT {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        let new_sid = resp.headers().get(SESSION).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let awaits_nothing = !matches!(message, ClientJsonRpcMessage::Request(_));
        if !status.is_success() {
            let body = self.read(resp).await.unwrap_or_default();
            if let Ok(m @ ServerJsonRpcMessage::Error(_)) = serde_json::from_slice(&body) {
                return Ok(StreamableHttpPostResponse::Json(m, new_sid));
            }
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!("HTTP {status}"))));
        }
        if content_type_is(&resp, "text/event-stream") {
            return Ok(StreamableHttpPostResponse::Sse(
                SseStream::from_bytes_stream(self.stream(resp)).boxed(),
                new_sid,
            ));
        }
        if content_type_is(&resp, "application/json") {
            let bytes = self.read(resp).await.map_err(|e| match e {
                ReadError::Http(e) => StreamableHttpError::Client(e),
                tl @ ReadError::TooLarge(_) => {
                    StreamableHttpError::UnexpectedServerResponse(Cow::Owned(tl.to_string()))
                }
            })?;
            return match serde_json::from_slice::<ServerJsonRpcMessage>(&bytes) {
                Ok(m) => Ok(StreamableHttpPostResponse::Json(m, new_sid)),
                Err(_) if awaits_nothing => Ok(StreamableHttpPostResponse::Accepted),
                Err(e) => Err(e.into()),
            };
        }
        if awaits_nothing {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        Err(StreamableHttpError::UnexpectedContentType(
            resp.headers().get(header::CONTENT_TYPE).map(|v| format!("{v:?}")),
        ))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> std::result::Result<(), E> {
        let resp = apply(self.http.delete(uri.as_ref()), Some(&session_id), auth_header, custom_headers)
            .send()
            .await
            .map_err(StreamableHttpError::Client)?;
        if resp.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(());
        }
        resp.error_for_status().map_err(StreamableHttpError::Client)?;
        Ok(())
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> std::result::Result<BoxStream<'static, std::result::Result<Sse, SseError>>, E> {
        let mut rb = self.http.get(uri.as_ref()).header(header::ACCEPT, "text/event-stream");
        if let Some(id) = last_event_id {
            rb = rb.header("last-event-id", id);
        }
        let resp = apply(rb, session_id.as_deref(), auth_header, custom_headers)
            .send()
            .await
            .map_err(StreamableHttpError::Client)?;
        if resp.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if let Some(e) = auth_error(&resp) {
            return Err(e);
        }
        let resp = resp.error_for_status().map_err(StreamableHttpError::Client)?;
        if !content_type_is(&resp, "text/event-stream") {
            return Err(StreamableHttpError::UnexpectedContentType(None));
        }
        Ok(SseStream::from_bytes_stream(self.stream(resp)).boxed())
    }
}

/// What a failure says to the operator: the size limit when an answer passed it, the server's
/// HTTP status when there was one, never the transport's internals or the server's body.
fn describe(e: &str, over: &AtomicBool, limit: usize) -> String {
    if over.load(Ordering::Relaxed) {
        return format!("the MCP server's answer was larger than the limit of {limit} bytes; the read was stopped");
    }
    let status = e.split("HTTP ").nth(1).and_then(|r| r.split(':').next()).map(str::trim);
    match status {
        Some(s) => format!("the MCP server answered HTTP {s}"),
        None if e.contains("connect") || e.contains("Connect") => "could not connect to the MCP server".into(),
        None => "the MCP server's answer was not usable".into(),
    }
}

fn failed(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::ProviderMisconfigured, message).with_details(serde_json::json!({"code": "mcp_server_failed"}))
}

/// A running client session with `url`, authenticated with `bearer`, and the flag its transport
/// sets when an answer goes over the size limit.
async fn connect(
    app: &App,
    url: &str,
    bearer: Option<&str>,
) -> Result<(rmcp::service::RunningService<rmcp::RoleClient, ()>, Arc<AtomicBool>)> {
    let parsed = url::Url::parse(url).map_err(|_| Error::invalid_field("serverUrl", "serverUrl is not a URL"))?;
    app.outbound
        .guard()
        .check_url(&parsed)
        .map_err(|m| Error::new(ErrorCode::Forbidden, format!("the MCP server is not allowed: {m}")))?;
    let http = app.outbound.streaming_client().map_err(|e| failed(format!("{e:?}")))?;
    let mut cfg = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    if let Some(b) = bearer {
        cfg = cfg.auth_header(b.to_string());
    }
    let over = Arc::new(AtomicBool::new(false));
    let limit = app.config.delivery.mcp_max_response_bytes;
    let transport = StreamableHttpClientTransport::with_client(Guarded { http, limit, over: over.clone() }, cfg);
    match ().serve(transport).await {
        Ok(client) => Ok((client, over)),
        Err(e) => {
            tracing::debug!(error = %e, "mcp client: initialize failed");
            Err(failed(describe(&e.to_string(), &over, limit)))
        }
    }
}

/// The tools `url` offers.
pub async fn list_tools(app: &App, url: &str, bearer: Option<&str>) -> Result<Vec<RemoteTool>> {
    let work = async {
        let (client, over) = connect(app, url, bearer).await?;
        let limit = app.config.delivery.mcp_max_response_bytes;
        let tools = client.list_all_tools().await.map_err(|e| failed(describe(&e.to_string(), &over, limit)));
        let _ = client.cancel().await;
        tools
    };
    let tools = tokio::time::timeout(CALL_TIMEOUT, work)
        .await
        .map_err(|_| failed("the MCP server did not answer in time"))??;
    Ok(tools
        .into_iter()
        .map(|t| RemoteTool {
            name: t.name.to_string(),
            description: t.description.map(|d| d.to_string()),
            input_schema: Value::Object((*t.input_schema).clone()),
        })
        .collect())
}

/// Calls tool `name` on `url` with `arguments`.
pub async fn call_tool(
    app: &App,
    url: &str,
    bearer: Option<&str>,
    name: &str,
    arguments: Map<String, Value>,
) -> Result<RemoteResult> {
    let work = async {
        let (client, over) = connect(app, url, bearer).await?;
        let limit = app.config.delivery.mcp_max_response_bytes;
        let params = CallToolRequestParams::new(name.to_string()).with_arguments(arguments);
        let r = client.call_tool(params).await.map_err(|e| failed(describe(&e.to_string(), &over, limit)));
        let _ = client.cancel().await;
        r
    };
    let r = tokio::time::timeout(CALL_TIMEOUT, work)
        .await
        .map_err(|_| failed("the MCP server did not answer in time"))??;
    let text: Vec<String> = r.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect();
    Ok(RemoteResult { is_error: r.is_error == Some(true), text: text.join("\n\n"), structured: r.structured_content })
}
