//! The HTTP edge: the router (every route in one place), middleware (request ids, metrics, logs,
//! timeouts, panics, body limits, the error envelope) and serving with graceful shutdown.

pub mod dashboard;
pub mod error;
pub mod extract;
mod routes;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, Uri};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{delete, get, patch, post, put};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tracing::Instrument;

use crate::app::App;
use crate::error::{Error, ErrorCode};
use extract::RequestId;

/// Every request body is limited to 1 MB, except uploads (`DOCUMENT_UPLOAD_MAX_BYTES`).
pub const BODY_LIMIT: usize = 1024 * 1024;

/// The whole API.
pub fn router(app: Arc<App>) -> Router {
    router_with(app, Router::new())
}

/// The API plus `extra` routes inside the same middleware (tests inject failing routes with it).
pub fn router_with(app: Arc<App>, extra: Router<Arc<App>>) -> Router {
    use routes::*;
    let api = Router::new()
        // operations
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        // accounts and access
        .route("/api/v1/auth/register", post(account::register))
        .route("/api/v1/auth/login", post(account::login))
        .route("/api/v1/auth/logout", post(account::logout))
        .route("/api/v1/auth/me", get(account::me))
        .route("/api/v1/account/invitations", get(account::list_invitations).post(account::create_invitation))
        .route("/api/v1/account/invitations/{id}", delete(account::revoke_invitation))
        .route("/api/v1/account/tokens", get(account::list_tokens).post(account::create_token))
        .route("/api/v1/account/tokens/{id}", delete(account::revoke_token))
        .route("/api/v1/workspaces", get(account::list_workspaces).post(account::create_workspace))
        .route("/api/v1/workspaces/{id}", get(account::get_workspace).patch(account::rename_workspace))
        .route(
            "/api/v1/service-credentials",
            get(account::list_service_credentials).post(account::create_service_credential),
        )
        .route("/api/v1/service-credentials/{id}", delete(account::revoke_service_credential))
        .route("/api/v1/audit-events", get(account::audit_events))
        // documents, sources, search
        .route("/api/v1/document", get(documents::list).post(documents::create))
        .route("/api/v1/document/", get(documents::list).post(documents::create))
        .route("/api/v1/document/progress", get(documents::progress))
        .route("/api/v1/document/sources", get(documents::sources))
        .route("/api/v1/document/sources/{id}", patch(documents::patch_source).delete(documents::delete_source))
        .route("/api/v1/document/sources/{id}/documents", get(documents::source_documents))
        .route("/api/v1/document/sources/{id}/reprocess", post(documents::reprocess_source))
        .route("/api/v1/document/sources/{id}/recrawl", post(documents::recrawl))
        .route("/api/v1/document/sources/{id}/pause-crawl", post(documents::pause_crawl))
        .route("/api/v1/document/sources/{id}/resume-crawl", post(documents::resume_crawl))
        .route("/api/v1/document/search", post(documents::search))
        .route("/api/v1/document/search/history", get(documents::search_history))
        .route("/api/v1/document/search/history/{id}", get(documents::search_replay))
        .route("/api/v1/document/{id}", get(documents::get).put(documents::update).delete(documents::delete))
        .route("/api/v1/document/{id}/reprocess", post(documents::reprocess))
        // settings
        .route("/api/v1/settings/ingestion", get(documents::ingestion_settings).put(documents::put_ingestion_settings))
        .route("/api/v1/settings/ingestion/reprocess", post(documents::reprocess_all))
        .route("/api/v1/usage", get(documents::usage))
        .route("/api/v1/usage/organization", get(documents::organization_usage))
        .route("/api/v1/settings/credentials", get(settings::list_credentials))
        .route(
            "/api/v1/settings/credentials/{provider}",
            put(settings::put_credential).delete(settings::delete_credential),
        )
        .route("/api/v1/settings/llm-models", get(settings::llm_models).put(settings::put_llm_models))
        .route("/api/v1/settings/document-types", get(settings::document_types).put(settings::put_document_types))
        .route("/api/v1/settings/retrieval-defaults", get(settings::retrieval_defaults))
        .route("/api/v1/agents", get(agents::list).post(agents::create))
        .route("/api/v1/agents/{id}", get(agents::get).put(agents::update))
        .route(
            "/api/v1/agents/{id}/assistant-logo",
            get(agents::get_logo).post(agents::put_logo).delete(agents::delete_logo),
        )
        .route("/api/v1/agents/{id}/default", post(agents::make_default))
        .route("/api/v1/agents/{id}/revision-state", get(agents::revision_state))
        .route("/api/v1/agents/{id}/revisions", get(agents::list_revisions))
        .route("/api/v1/agents/{id}/revisions/candidates", post(agents::candidates))
        .route("/api/v1/agents/{id}/revisions/{rid}", get(agents::get_revision))
        .route("/api/v1/agents/{id}/revisions/{rid}/publish", post(agents::publish))
        .route("/api/v1/agents/{id}/directives", get(agents::list_directives).post(agents::create_directive))
        .route("/api/v1/agents/{id}/directives/draft", post(agents::draft_directive))
        .route("/api/v1/agents/{id}/directives/{did}", patch(agents::update_directive).delete(agents::delete_directive))
        .route("/api/v1/agents/{id}/skill-capabilities", get(agents::skill_capabilities))
        .route("/api/v1/agents/{id}/skills", get(agents::list_skills).post(agents::create_skill))
        .route("/api/v1/agents/{id}/skills/{sid}", patch(agents::update_skill).delete(agents::delete_skill))
        .route("/api/v1/agents/{id}/context-variables", get(agents::list_enablements))
        .route(
            "/api/v1/agents/{id}/context-variables/{vid}",
            put(agents::put_enablement).delete(agents::delete_enablement),
        )
        .route("/api/v1/context-variables", get(agents::list_variables).post(agents::create_variable))
        .route(
            "/api/v1/context-variables/{id}",
            get(agents::get_variable).patch(agents::update_variable).delete(agents::delete_variable),
        )
        .route(
            "/api/v1/context-variables/{id}/values",
            get(agents::list_values).put(agents::put_value).delete(agents::delete_value),
        )
        .route("/api/v1/skills", get(agents::skills_catalog))
        .route("/api/v1/skills/{name}", get(agents::skills_catalog_entry))
        // the answer turn
        .route("/api/v1/agents/{id}/chat", post(chat::agent_chat))
        .route("/api/v1/chat", post(chat::default_chat))
        .route("/api/v1/retrieval/answer", post(chat::retrieval_answer))
        .route("/api/v1/agents/{id}/test-executions", get(chat::list_tests).post(chat::start_test))
        .route("/api/v1/agents/{id}/test-executions/{eid}", get(chat::get_test))
        .route("/api/v1/agents/{id}/test-executions/{eid}/messages", post(chat::test_message))
        .route("/api/v1/history/chat", get(chat::history))
        .route("/api/v1/history/chat/{id}", get(chat::conversation))
        .route("/api/v1/history/chat/{id}/tail", get(chat::tail))
        .route("/api/v1/traces/{id}", get(chat::get_trace))
        .route("/api/v1/quality/turns", get(chat::quality_turns))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(RequestBodyLimitLayer::new(BODY_LIMIT));

    // Uploads have their own limit (DOCUMENT_UPLOAD_MAX_BYTES, plus room for the form around it).
    let upload_limit = (app.config.upload_max_bytes as usize).saturating_add(1024 * 1024);
    let uploads = Router::new()
        .route("/api/v1/document/import", post(documents::import))
        .layer(DefaultBodyLimit::max(upload_limit))
        .layer(RequestBodyLimitLayer::new(upload_limit));

    Router::new()
        .merge(api)
        .merge(uploads)
        .merge(dashboard::routes())
        .merge(extra)
        .fallback(not_found)
        .layer(CatchPanicLayer::custom(error::panic_response))
        .layer(middleware::from_fn_with_state(app.clone(), timeout))
        .layer(middleware::from_fn(close_unread))
        .layer(middleware::from_fn_with_state(app.clone(), observe))
        .with_state(app)
}

async fn not_found(method: Method, uri: Uri) -> Error {
    Error::new(ErrorCode::NotFound, format!("no such route: {method} {}", uri.path()))
}

fn valid_request_id(v: &HeaderValue) -> Option<String> {
    let s = v.to_str().ok()?;
    (!s.is_empty()
        && s.len() <= 64
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.'))
    .then(|| s.to_string())
}

/// Outermost middleware: request id (kept from the client when sane), a tracing span carrying
/// it, the envelope guarantee, metrics and one log line per request.
async fn observe(State(app): State<Arc<App>>, mut req: Request, next: Next) -> Response {
    let rid = req.headers().get("x-request-id").and_then(valid_request_id).unwrap_or_else(crate::ids::new_id);
    req.extensions_mut().insert(RequestId(rid.clone()));
    let method = req.method().clone();
    let route =
        req.extensions().get::<MatchedPath>().map(|m| m.as_str().to_string()).unwrap_or_else(|| "unmatched".into());
    let span = tracing::info_span!("request", request_id = %rid, method = %method, route = %route);
    let started = Instant::now();
    let resp = next.run(req).instrument(span.clone()).await;
    let mut resp = error::ensure_envelope(resp);
    if let Ok(v) = HeaderValue::from_str(&rid) {
        resp.headers_mut().insert("x-request-id", v);
    }
    let status = resp.status().as_u16();
    let elapsed = started.elapsed();
    app.metrics.record_request(method.as_str(), &route, status, elapsed);
    span.in_scope(|| {
        if status >= 500 {
            tracing::warn!(status, ms = elapsed.as_secs_f64() * 1000.0, "request");
        } else {
            tracing::info!(status, ms = elapsed.as_secs_f64() * 1000.0, "request");
        }
    });
    resp
}

/// Requests that take longer than `request_timeout` answer 504 `timeout` (a stream counts as
/// answered once its headers are sent).
async fn timeout(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    use axum::response::IntoResponse;
    match tokio::time::timeout(app.config.request_timeout, next.run(req)).await {
        Ok(resp) => resp,
        Err(_) => Error::new(ErrorCode::Timeout, "the request took too long and was stopped").into_response(),
    }
}

/// A request body that notes when it has been read to its end.
struct Tracked {
    inner: axum::body::Body,
    done: Arc<AtomicBool>,
}

impl axum::body::HttpBody for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(r, std::task::Poll::Ready(None)) || self.inner.is_end_stream() {
            self.done.store(true, Ordering::Relaxed);
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Says `Connection: close` on a response sent before the request's body was read to its end (an
/// early 400, 401 or 413): the server will not read the rest, so it closes the connection after
/// the response, and without the header a client reusing the connection meets a closed socket on
/// its next request.
async fn close_unread(req: Request, next: Next) -> Response {
    let has_body = req.headers().contains_key(axum::http::header::TRANSFER_ENCODING)
        || req
            .headers()
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|n| n > 0);
    if !has_body {
        return next.run(req).await;
    }
    let done = Arc::new(AtomicBool::new(false));
    let (parts, body) = req.into_parts();
    let body = axum::body::Body::new(Tracked { inner: body, done: done.clone() });
    let mut resp = next.run(Request::from_parts(parts, body)).await;
    if !done.load(Ordering::Relaxed) {
        resp.headers_mut().insert(axum::http::header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// Serves until `shutdown` resolves, then stops accepting and lets in-flight requests finish.
pub async fn serve(
    app: Arc<App>,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt;
    let router = router(app);
    // streamed replies write many small frames: without TCP_NODELAY each one after the first
    // waits for the client's delayed ACK (~40 ms)
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
    });
    axum::serve(listener, router.into_make_service_with_connect_info::<SocketAddr>())
        .with_graceful_shutdown(shutdown)
        .await
}
