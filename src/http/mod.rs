//! The HTTP edge: the router (each area of `routes/` registers its own routes, each with its
//! OpenAPI operation (`openapi::Routes`); `routes` merges them, one line per area), middleware (request ids, metrics, logs,
//! timeouts, panics, body limits, the error envelope) and serving with graceful shutdown.

pub mod dashboard;
pub mod error;
pub mod extract;
pub mod mcp;
pub mod openapi;
pub(crate) mod routes;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, Uri};
use axum::middleware::{self, Next};
use axum::response::Response;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tracing::Instrument;

use crate::app::App;
use crate::error::{Error, ErrorCode};
use extract::RequestId;
use openapi::Routes;

/// Every request body is limited to 1 MB, except uploads (`DOCUMENT_UPLOAD_MAX_BYTES`).
pub const BODY_LIMIT: usize = 1024 * 1024;

/// The whole API.
pub fn router(app: Arc<App>) -> Router {
    router_with(app, Router::new())
}

/// Every route the server answers, each with its operation (`openapi::Routes`): the areas of
/// `routes/`, uploads, `/mcp` and the web pages, inside their body limits.
pub fn routes(app: &Arc<App>) -> Routes {
    use routes::*;
    let api = Routes::new("Operations")
        .merge(ops::routes())
        .merge(account::routes())
        .merge(documents::routes())
        .merge(crawl::routes())
        .merge(evals::routes())
        .merge(settings::routes())
        .merge(agents::routes())
        .merge(bundles::routes())
        .merge(chat::routes())
        .merge(inbox::routes())
        .merge(delivery::routes())
        .merge(public_chat::routes())
        .merge(routines::routes())
        .merge(converse::routes())
        .merge(usage::routes())
        .merge(connectors::routes())
        .merge(admin::routes())
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(RequestBodyLimitLayer::new(BODY_LIMIT));

    // Uploads have their own limit (DOCUMENT_UPLOAD_MAX_BYTES, plus room for the form around it).
    let upload_limit = (app.config.upload_max_bytes as usize).saturating_add(1024 * 1024);
    let uploads = documents::upload_routes()
        .layer(DefaultBodyLimit::max(upload_limit))
        .layer(RequestBodyLimitLayer::new(upload_limit));

    api.merge(uploads).merge(mcp::routes(app)).merge(dashboard::routes())
}

/// The API plus `extra` routes inside the same middleware (tests inject failing routes with it;
/// they are not in the OpenAPI document).
pub fn router_with(app: Arc<App>, extra: Router<Arc<App>>) -> Router {
    let (api, ops) = routes(&app).into_parts();
    let doc = Arc::new(openapi::ApiDocument::new(ops));
    Router::new()
        .merge(api)
        .merge(extra)
        .fallback(not_found)
        .layer(axum::Extension(doc))
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
    // the server's own time (until the headers, for a stream), for clients and benchmarks
    if let Ok(v) = HeaderValue::from_str(&format!("app;dur={:.3}", elapsed.as_secs_f64() * 1000.0)) {
        resp.headers_mut().insert("server-timing", v);
    }
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

/// A request body that notes when it has been read to its end, and when dropped before that
/// hands what is left back to [`close_unread`] (to drain).
struct Tracked {
    inner: axum::body::Body,
    done: Arc<AtomicBool>,
    left: Arc<parking_lot::Mutex<Option<axum::body::Body>>>,
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

impl Drop for Tracked {
    fn drop(&mut self) {
        if !self.done.load(Ordering::Relaxed) {
            *self.left.lock() = Some(std::mem::replace(&mut self.inner, axum::body::Body::empty()));
        }
    }
}

/// What [`close_unread`] reads of a body a response left unread, at most.
const DRAIN_BYTES: usize = 4 * 1024 * 1024;
/// How long [`close_unread`] reads such a body, at most.
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(2);

/// Reads and discards up to [`DRAIN_BYTES`] of `body` for up to [`DRAIN_TIME`].
async fn drain(mut body: axum::body::Body) {
    use http_body_util::BodyExt;
    let deadline = tokio::time::Instant::now() + DRAIN_TIME;
    let mut read = 0usize;
    while read <= DRAIN_BYTES {
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(Some(Ok(f))) => read += f.data_ref().map_or(0, |d| d.len()),
            _ => return,
        }
    }
}

/// A response sent before the request's body was read to its end (an early 400, 401 or 413):
/// first reads on a little of what the client is still sending (up to 4 MiB or 2 s), so a client
/// that sends its whole body before reading (Python's `requests`, `urllib`) gets to read the
/// answer instead of a reset; then says `Connection: close`, since the server will not read the
/// rest, and without the header a client reusing the connection meets a closed socket on its next
/// request. A client that sent `Expect: 100-continue` has sent nothing yet: it is answered at once.
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
    let waits_to_send = req
        .headers()
        .get(axum::http::header::EXPECT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"));
    let done = Arc::new(AtomicBool::new(false));
    let left = Arc::new(parking_lot::Mutex::new(None));
    let (parts, body) = req.into_parts();
    let body = axum::body::Body::new(Tracked { inner: body, done: done.clone(), left: left.clone() });
    let mut resp = next.run(Request::from_parts(parts, body)).await;
    if !done.load(Ordering::Relaxed) {
        let rest = left.lock().take();
        if let Some(rest) = rest
            && !waits_to_send
        {
            drain(rest).await;
        }
        resp.headers_mut().insert(axum::http::header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// Serves until `shutdown` resolves, then stops accepting and lets in-flight requests finish.
///
/// Each connection is HTTP/1.1 through hyper with a header-read timeout (`header_read_timeout`):
/// a client that connects and never finishes a request's headers, or leaves a kept-alive
/// connection idle that long, is disconnected instead of holding a descriptor.
pub async fn serve(
    app: Arc<App>,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use hyper_util::service::TowerToHyperService;
    use tower::ServiceExt;

    let router = router(app.clone());
    let header_timeout = app.config.header_read_timeout;
    // connections watch `stop` to begin their graceful shutdown; each holds a `done` sender, so
    // the receiver ends when the last connection has finished
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (done_tx, mut done_rx) = tokio::sync::mpsc::channel::<()>(1);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = &mut shutdown => break,
        };
        let (tcp, addr) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // a connection that failed before it was accepted concerns only that client; running
                // out of descriptors passes as the connections in flight finish
                if !matches!(e.kind(), std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::ConnectionReset) {
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                continue;
            }
        };
        // streamed replies write many small frames: without TCP_NODELAY each one after the first
        // waits for the client's delayed ACK (~40 ms)
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
        let svc = router.clone().map_request(move |req: axum::http::Request<hyper::body::Incoming>| {
            let mut req = req.map(axum::body::Body::new);
            req.extensions_mut().insert(axum::extract::ConnectInfo(addr));
            req
        });
        let (mut stop, done) = (stop_rx.clone(), done_tx.clone());
        tokio::spawn(async move {
            let mut b = hyper::server::conn::http1::Builder::new();
            b.timer(TokioTimer::new()).header_read_timeout(header_timeout);
            let conn = b.serve_connection(TokioIo::new(tcp), TowerToHyperService::new(svc));
            let mut conn = std::pin::pin!(conn);
            let mut stopping = *stop.borrow();
            if stopping {
                conn.as_mut().graceful_shutdown();
            }
            loop {
                tokio::select! {
                    r = conn.as_mut() => {
                        if let Err(e) = r {
                            tracing::trace!(error = %e, "connection ended with an error");
                        }
                        break;
                    }
                    changed = stop.changed(), if !stopping => {
                        stopping = true;
                        let _ = changed;
                        conn.as_mut().graceful_shutdown();
                    }
                }
            }
            drop(done);
        });
    }
    // long-lived streams end when the shutdown begins
    app.closing.cancel();
    drop(listener);
    let _ = stop_tx.send(true);
    drop(done_tx);
    let _ = done_rx.recv().await;
    Ok(())
}
