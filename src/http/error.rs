//! The error envelope on the wire, and the middleware that guarantees every failure carries it,
//! whoever produced the response (our handlers, axum's 405, the body limit, the panic catcher).

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::{Error, ErrorCode};

pub fn envelope(code: &str, message: &str, details: Option<&Value>) -> Value {
    json!({ "error": { "code": code, "message": message, "details": details.cloned().unwrap_or(Value::Null) } })
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if status.is_server_error() {
            // The cause is logged once here (the request span carries the request id); the client
            // sees only the code and a generic message.
            match &self.source {
                Some(src) => {
                    tracing::error!(code = self.code.as_str(), error = %src, "request failed")
                }
                None => {
                    tracing::error!(code = self.code.as_str(), message = %self.message, "request failed")
                }
            }
        }
        let body = envelope(self.code.as_str(), &self.message, self.details.as_ref());
        let mut resp = (status, axum::Json(body)).into_response();
        // a refusal that can be retried later says when
        if matches!(
            self.code,
            ErrorCode::RateLimitExceeded
                | ErrorCode::UsageLimitExceeded
                | ErrorCode::ServiceUnavailable
                | ErrorCode::AgentBundleImportFenced
        ) && let Some(secs) = self.details.as_ref().and_then(|d| d.get("retryAfterSeconds")).and_then(|v| v.as_u64())
            && let Ok(v) = HeaderValue::from_str(&secs.to_string())
        {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
        resp
    }
}

fn default_message(status: StatusCode) -> &'static str {
    match status.as_u16() {
        404 => "no such route",
        405 => "this route does not accept that method",
        408 | 504 => "the request took too long",
        413 => "the request body is too large",
        415 => "unsupported content type",
        500 => "internal error",
        _ => status.canonical_reason().unwrap_or("request failed"),
    }
}

/// Turns a failure response that is not already an envelope into one. Bodies of such responses
/// (plain-text errors from layers) are discarded; they may carry internals.
pub fn ensure_envelope(resp: Response) -> Response {
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        return resp;
    }
    let code = ErrorCode::from_status(status.as_u16());
    let body = envelope(code.as_str(), default_message(status), None);
    let (mut parts, _) = resp.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Response::from_parts(parts, Body::from(body.to_string()))
}

/// The response for a panic inside a handler (no internals). The panic's message is not logged:
/// it can quote the request's text. The panic hook ([`crate::cli::install_panic_hook`]) logged
/// where it happened, inside the request's span (so with its request id).
pub fn panic_response(_err: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let body = envelope(ErrorCode::Internal.as_str(), "internal error", None);
    (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(body)).into_response()
}
