//! Every failure class answers `{"error":{"code","message","details"}}` with `x-request-id`.

use axum::body::Body;
use axum::http::{Method, Request, header};
use axum::routing::get;
use serde_json::json;

use crate::support::{Auth, TestApp};

async fn panics() -> &'static str {
    panic!("secret internal detail /etc/passwd")
}

async fn hangs() -> &'static str {
    std::future::pending::<&'static str>().await
}

fn with_failing_routes(t: &mut TestApp) {
    let extra = axum::Router::new().route("/test/panic", get(panics)).route("/test/hang", get(hangs));
    t.router = steward::http::router_with(t.app.clone(), extra);
}

#[tokio::test]
async fn envelope_for_every_error_class() {
    // the timeout only has to stop the hanging route: room for every other request on a busy machine
    let mut t = TestApp::with_config(|c| c.request_timeout = std::time::Duration::from_secs(2));
    with_failing_routes(&mut t);
    let owner = t.owner().await;

    let mut cases = Vec::new();

    // malformed JSON
    let req = Request::post("/api/v1/auth/login")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{\"email\": "))
        .unwrap();
    cases.push(("malformed_json", 400, t.raw(req).await));
    // wrong types
    cases.push((
        "wrong_type",
        400,
        t.post("/api/v1/auth/login", &Auth::None, json!({"email": 42, "password": "x"})).await,
    ));
    // missing field
    cases.push(("missing_field", 400, t.post("/api/v1/auth/login", &Auth::None, json!({"email": "a@b.co"})).await));
    // unknown field (strict bodies)
    cases.push((
        "unknown_field",
        400,
        t.post("/api/v1/workspaces", &owner, json!({"name": "x", "colour": "red"})).await,
    ));
    // wrong content type
    let req =
        Request::post("/api/v1/auth/login").header(header::CONTENT_TYPE, "text/plain").body(Body::from("hi")).unwrap();
    cases.push(("unsupported_media_type", 415, t.raw(req).await));
    // unknown route
    cases.push(("unknown_route", 404, t.get("/api/v1/nope", &Auth::None).await));
    // wrong method
    cases.push(("wrong_method", 405, t.send(Method::DELETE, "/api/v1/auth/login", &Auth::None, None, &[]).await));
    // unauthenticated
    cases.push(("unauthenticated", 401, t.get("/api/v1/auth/me", &Auth::None).await));
    // forbidden
    let limited = t.token_with(&owner, &["workspace.agents.read"]).await;
    cases.push(("forbidden", 403, t.get("/api/v1/audit-events", &limited).await));
    // bad query
    cases.push(("bad_query", 400, t.get("/api/v1/audit-events?limit=many", &owner).await));
    // a panic: 500 without internals
    cases.push(("panic", 500, t.get("/test/panic", &Auth::None).await));
    // a timeout
    cases.push(("timeout", 504, t.get("/test/hang", &Auth::None).await));

    for (name, status, resp) in &cases {
        assert_eq!(resp.status.as_u16(), *status, "{name}: {}", resp.text());
        assert!(resp.headers.get("x-request-id").is_some(), "{name} has no x-request-id");
        let body = resp.json();
        let err = &body["error"];
        assert!(
            err["code"].is_string() && err["message"].is_string() && err.get("details").is_some(),
            "{name}: {body}"
        );
        assert_eq!(body.as_object().unwrap().len(), 1, "{name}: only the error key");
        insta::assert_json_snapshot!(*name, body);
    }
    let panic_text = cases.iter().find(|c| c.0 == "panic").unwrap().2.text();
    assert!(!panic_text.contains("passwd") && !panic_text.contains("secret"), "{panic_text}");
}

#[tokio::test]
async fn bodies_over_one_megabyte_get_413_on_every_route() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let big = "x".repeat(1_200_000);
    // declared length
    let req = Request::post("/api/v1/auth/login")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(format!("{{\"email\":\"{big}\"}}")))
        .unwrap();
    let r = t.raw(req).await;
    r.assert_status(413);
    assert_eq!(r.code(), "payload_too_large");
    insta::assert_json_snapshot!("payload_too_large", r.json());
    // streamed without a length
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = (0..12).map(|_| Ok(vec![b' '; 100_000])).collect();
    let stream = futures::stream::iter(chunks);
    let req = Request::post("/api/v1/workspaces")
        .header(header::CONTENT_TYPE, "application/json")
        .header(
            header::COOKIE,
            match &owner {
                Auth::Cookie(c) => c.clone(),
                _ => unreachable!(),
            },
        )
        .header("sec-fetch-site", "same-origin")
        .body(Body::from_stream(stream))
        .unwrap();
    let r = t.raw(req).await;
    r.assert_status(413);
    assert_eq!(r.code(), "payload_too_large");
    // an unknown route with a big body: still an envelope
    let req = Request::post("/api/v1/nope")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(big.clone()))
        .unwrap();
    let r = t.raw(req).await;
    assert!(r.status == 404 || r.status == 413);
    assert!(r.json()["error"]["code"].is_string());
}

#[tokio::test]
async fn request_ids_are_kept_or_assigned() {
    let t = TestApp::new();
    let r = t.send(Method::GET, "/healthz", &Auth::None, None, &[("x-request-id", "client-chosen-42")]).await;
    assert_eq!(r.headers.get("x-request-id").unwrap(), "client-chosen-42");
    let r = t.send(Method::GET, "/healthz", &Auth::None, None, &[("x-request-id", "bad id with spaces")]).await;
    let id = r.headers.get("x-request-id").unwrap().to_str().unwrap();
    assert!(steward::ids::is_uuid(id), "{id}");
}

#[tokio::test]
async fn health_readiness_and_metrics() {
    let t = TestApp::new();
    t.get("/healthz", &Auth::None).await.assert_status(200);
    // workers are not started in this harness: not ready, and the check says why
    let r = t.get("/readyz", &Auth::None).await;
    r.assert_status(503);
    assert_eq!(r.code(), "service_unavailable");
    assert_eq!(r.json()["error"]["details"]["checks"]["database"]["ok"], true);
    assert_eq!(r.json()["error"]["details"]["checks"]["workers"]["ok"], false);
    t.app.start_background();
    let r = t.get("/readyz", &Auth::None).await;
    r.assert_status(200);
    assert_eq!(r.json()["status"], "ready");

    t.get("/api/v1/auth/me", &Auth::None).await;
    let m = t.get("/metrics", &Auth::None).await;
    m.assert_status(200);
    let text = m.text();
    assert!(
        text.contains("steward_http_requests_total{method=\"GET\",route=\"/api/v1/auth/me\",status=\"401\"} 1"),
        "{text}"
    );
    assert!(text.contains("steward_http_request_duration_seconds_bucket"));
    assert!(text.contains("steward_workers_busy"));
    t.app.shutdown();
}
