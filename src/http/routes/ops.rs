//! Liveness, readiness, metrics and the OpenAPI document.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::app::App;
use crate::error::{Error, ErrorCode};
use crate::http::openapi::shapes::{boolean, integer, map_of, nullable, obj, one_of, string};
use crate::http::openapi::{ApiDocument, Op, Routes};

/// The ops routes (merged into the API by `http::routes`).
pub fn routes() -> Routes {
    Routes::new("Operations")
        .get("/healthz", healthz, Op::new("Liveness").public().ok_json(obj(json!({"status": one_of(&["ok"])}))))
        .get(
            "/readyz",
            readyz,
            Op::new("Readiness")
                .public()
                .about("200 when the database answers, migrations are current, the workers run and the embedding model is available; otherwise 503 `service_unavailable` with the same checks in `details`.")
                .ok_json(readiness_schema())
                .errors(&[503]),
        )
        .get(
            "/metrics",
            metrics,
            Op::new("Prometheus metrics").public().media(200, "text/plain", "The Prometheus text exposition format"),
        )
        .get(
            "/api/v1/openapi.json",
            openapi,
            Op::new("This OpenAPI document").public().ok_json(json!({"type": "object", "required": ["openapi", "paths"]})),
        )
}

fn readiness_schema() -> serde_json::Value {
    obj(json!({
        "status": one_of(&["ready", "degraded"]),
        // index operations in the database this node has not applied yet (docs/scale-out.md)
        "indexLag": nullable(integer()),
        "checks": map_of(obj(json!({"ok": boolean(), "message": string()}))),
    }))
}

/// The document of the routes this router serves (built on first use).
pub async fn openapi(axum::Extension(doc): axum::Extension<Arc<ApiDocument>>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], doc.bytes()).into_response()
}

pub async fn healthz() -> impl IntoResponse {
    axum::Json(json!({ "status": "ok" }))
}

/// 200 when the database answers, migrations are current, workers run and the embedding model is
/// loaded (`degraded` while the search indexes are rebuilt); otherwise 503 with the checks that
/// failed.
pub async fn readyz(State(app): State<Arc<App>>) -> Result<Response, Error> {
    let (checks, lag) = app
        .blocking(|app| {
            let lag = crate::readiness::index_lag(app);
            Ok((crate::readiness::check(app, lag), lag))
        })
        .await?;
    let ready = checks.iter().all(|c| c.ok);
    let degraded = checks.iter().any(|c| c.degraded);
    let status = match (ready, degraded) {
        (false, _) => "not_ready",
        (true, true) => "degraded",
        (true, false) => "ready",
    };
    let body = json!({
        "status": status,
        "indexLag": lag,
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
