//! Liveness, readiness and metrics.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::app::App;
use crate::error::{Error, ErrorCode};
use axum::Router;
use axum::routing;

/// The ops routes (merged into the API by `http::router_with`).
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/healthz", routing::get(healthz))
        .route("/readyz", routing::get(readyz))
        .route("/metrics", routing::get(metrics))
}

pub async fn healthz() -> impl IntoResponse {
    axum::Json(json!({ "status": "ok" }))
}

/// 200 when the database answers, migrations are current, workers run and the embedding model is
/// loaded (`degraded` while the search indexes are rebuilt); otherwise 503 with the checks that
/// failed.
pub async fn readyz(State(app): State<Arc<App>>) -> Result<Response, Error> {
    let checks = app.blocking(|app| Ok(crate::readiness::check(app))).await?;
    let ready = checks.iter().all(|c| c.ok);
    let degraded = checks.iter().any(|c| c.degraded);
    let status = match (ready, degraded) {
        (false, _) => "not_ready",
        (true, true) => "degraded",
        (true, false) => "ready",
    };
    let body = json!({
        "status": status,
        "checks": checks.iter().map(|c| {
            let mut v = json!({"ok": c.ok, "message": c.message});
            if c.degraded {
                v["degraded"] = json!(true);
            }
            (c.name.to_string(), v)
        }).collect::<serde_json::Map<_, _>>(),
    });
    if ready {
        return Ok((StatusCode::OK, axum::Json(body)).into_response());
    }
    let failing: Vec<String> = checks.iter().filter(|c| !c.ok).map(|c| format!("{}: {}", c.name, c.message)).collect();
    Err(Error::new(ErrorCode::ServiceUnavailable, format!("not ready: {}", failing.join("; "))).with_details(body))
}

pub async fn metrics(State(app): State<Arc<App>>) -> Result<Response, Error> {
    let text = app.blocking(|app| Ok(app.metrics.render(app))).await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response())
}
