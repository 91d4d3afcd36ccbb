//! What an outside security and conformance review found, each closed at its root: work bounded
//! before authentication, panics reachable from input, spec conformance.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::Body;
use axum::http::{Method, Request, header};
use futures::future::join_all;
use serde_json::{Value, json};
use steward::config::Secret;

use crate::fake_llm::{FakeProvider, openai_stream};
use crate::support::{Auth, TestApp};

const RETURNS: &str = "Returns policy. Items can be returned within 30 days of delivery for a full refund. \
    The return window starts on the day the parcel arrives.";

/// Materializes and publishes the agent's draft (the candidate body left empty, as the spec allows).
async fn publish(t: &TestApp, a: &Auth, agent: &str) {
    let state = t.get(&format!("/api/v1/agents/{agent}/revision-state"), a).await.json();
    let g = state["draft"]["generation"].as_i64().unwrap();
    let published = state["publishedRevision"]["id"].clone();
    let r = t.send(Method::POST, &format!("/api/v1/agents/{agent}/revisions/candidates"), a, None, &[]).await;
    assert!(r.status == 201 || r.status == 200, "{}", r.text());
    let cand = r.json();
    t.post(
        &format!("/api/v1/agents/{agent}/revisions/{}/publish", cand["id"].as_str().unwrap()),
        a,
        json!({"expectedDraftGeneration": g, "expectedPublishedRevisionId": published, "idempotencyKey": format!("k{g}")}),
    )
    .await
    .assert_status(200);
}

// ---- 1, 2: work before authentication ----

#[tokio::test]
async fn a_bogus_invitation_is_refused_before_any_password_is_hashed() {
    let t = TestApp::new();
    let _owner = t.owner().await;
    let before = t.app.auth.hashing.hashes_run();
    for i in 0..5 {
        let r = t
            .post(
                "/api/v1/auth/register",
                &Auth::None,
                json!({"email": format!("x{i}@example.com"), "password": "long enough password", "invitationToken": "bogus"}),
            )
            .await;
        r.assert_status(403);
    }
    assert_eq!(t.app.auth.hashing.hashes_run(), before, "no hashing for a registration that cannot succeed");
}

#[tokio::test]
async fn registrations_are_rate_limited_per_client_address() {
    let t = TestApp::with_config(|c| c.register_limit_per_ip.max = 3);
    let _owner = t.owner().await; // the first registration counts too
    let body = |i: usize| json!({"email": format!("r{i}@example.com"), "password": "long enough password", "invitationToken": "bogus"});
    for i in 0..2 {
        t.post("/api/v1/auth/register", &Auth::None, body(i)).await.assert_status(403);
    }
    let r = t.post("/api/v1/auth/register", &Auth::None, body(9)).await;
    r.assert_status(429);
    assert_eq!(r.json()["error"]["code"], "rate_limit_exceeded");
    assert!(r.headers.contains_key(header::RETRY_AFTER));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_bad_logins_get_exactly_the_limit_of_401s() {
    let t = Arc::new(TestApp::with_config(|c| c.login_limit_per_ip.max = 5));
    let _owner = t.owner().await;
    // distinct emails: the per-address limit is the one that binds
    let attempts = (0..20).map(|i| {
        let t = t.clone();
        async move {
            t.post(
                "/api/v1/auth/login",
                &Auth::None,
                json!({"email": format!("nobody{i}@example.com"), "password": "wrong password"}),
            )
            .await
            .status
            .as_u16()
        }
    });
    let statuses = join_all(attempts).await;
    let count = |s: u16| statuses.iter().filter(|x| **x == s).count();
    assert_eq!(count(401), 5, "{statuses:?}");
    assert_eq!(count(429), 15, "{statuses:?}");
}

#[tokio::test]
async fn a_successful_sign_in_gives_its_attempt_back() {
    let t = TestApp::with_config(|c| c.login_limit_per_ip.max = 2);
    let _owner = t.owner().await;
    let ok = json!({"email": "owner@example.com", "password": "owner-password"});
    for _ in 0..4 {
        t.post("/api/v1/auth/login", &Auth::None, ok.clone()).await.assert_status(200);
    }
    t.post("/api/v1/auth/login", &Auth::None, json!({"email": "owner@example.com", "password": "nope nope"}))
        .await
        .assert_status(401);
    t.post("/api/v1/auth/login", &Auth::None, ok).await.assert_status(200);
}

// ---- 3: uploads ----

/// A multipart upload whose file part streams `chunks` chunks of 64 KiB, counting those read.
fn streaming_upload(auth: &Auth, chunks: usize, polled: Arc<AtomicUsize>) -> Request<Body> {
    let boundary = "----hardeningboundary";
    let head = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.txt\"\r\nContent-Type: text/plain\r\n\r\n"
    );
    let tail = format!("\r\n--{boundary}--\r\n");
    let parts = std::iter::once(head.into_bytes())
        .chain((0..chunks).map(|_| vec![b'a'; 64 * 1024]))
        .chain(std::iter::once(tail.into_bytes()))
        .map(move |b| {
            polled.fetch_add(1, Ordering::SeqCst);
            Ok::<_, std::io::Error>(axum::body::Bytes::from(b))
        });
    let mut b = Request::builder()
        .method(Method::POST)
        .uri("/api/v1/document/import")
        .header(header::CONTENT_TYPE, format!("multipart/form-data; boundary={boundary}"));
    if let Auth::Cookie(c) = auth {
        b = b.header(header::COOKIE, c).header("sec-fetch-site", "same-origin");
    }
    b.body(Body::from_stream(futures::stream::iter(parts))).unwrap()
}

#[tokio::test]
async fn the_upload_rate_is_checked_before_the_body_is_read() {
    let t = TestApp::with_config(|c| c.upload_limit.max = 1);
    let owner = t.owner().await;
    t.upload(&owner, "a.txt", b"first upload", &[]).await.assert_status(202);
    let polled = Arc::new(AtomicUsize::new(0));
    let r = t.raw(streaming_upload(&owner, 200, polled.clone())).await;
    r.assert_status(429);
    // the refusal is decided before the body is read; then at most 4 MiB of it (64 chunks of 64
    // KiB) is drained and discarded, so a client sending its whole body first can read the 429
    let read = polled.load(Ordering::SeqCst);
    assert!(read <= 66, "{read} chunks of a refused upload were read");
    assert_eq!(t.get("/api/v1/document/", &owner).await.json()["total"], 1, "the refused upload was not stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_uploads_are_bounded() {
    let t = Arc::new(TestApp::with_config(|c| c.uploads_concurrent = 1));
    let owner = t.owner().await;
    // the first upload's body arrives only when the test says so
    let (tx, rx) = tokio::sync::mpsc::channel::<axum::body::Bytes>(4);
    let boundary = "----held";
    let stream =
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (Ok::<_, std::io::Error>(b), rx)) });
    let mut req = Request::builder()
        .method(Method::POST)
        .uri("/api/v1/document/import")
        .header(header::CONTENT_TYPE, format!("multipart/form-data; boundary={boundary}"));
    if let Auth::Cookie(c) = &owner {
        req = req.header(header::COOKIE, c).header("sec-fetch-site", "same-origin");
    }
    let held = {
        let t = t.clone();
        let req = req.body(Body::from_stream(stream)).unwrap();
        tokio::spawn(async move { t.raw(req).await })
    };
    while t.app.uploads.available_permits() > 0 {
        tokio::task::yield_now().await;
    }
    let r = t.upload(&owner, "b.txt", b"second upload", &[]).await;
    r.assert_status(429);
    assert!(r.headers.contains_key(header::RETRY_AFTER));
    // the held upload finishes normally and frees its place
    tx.send(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\nheld upload\r\n--{boundary}--\r\n").into()).await.unwrap();
    drop(tx);
    held.await.unwrap().assert_status(202);
    t.upload(&owner, "c.txt", b"third upload", &[]).await.assert_status(202);
}

#[tokio::test]
async fn an_upload_can_name_its_source() {
    let t = TestApp::new();
    let owner = t.owner().await;
    t.doc(&owner, "Seed", "makes the api source exist", json!({})).await;
    let sources = t.get("/api/v1/document/sources", &owner).await.json();
    let api = sources["sources"].as_array().unwrap().iter().find(|s| s["kind"] == "api").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = t.upload(&owner, "n.txt", b"filed under the api source", &[("sourceId", &api)]).await;
    r.assert_status(202);
    assert_eq!(r.json()["sourceId"], api.as_str());
    t.upload(&owner, "n.txt", b"x", &[("sourceId", "no-such-source")]).await.assert_status(404);
}

// ---- 4, 5, 6: input that used to panic or exhaust ----

#[tokio::test]
async fn a_dotted_capital_i_is_answered_under_every_retrieval_strategy() {
    let t = TestApp::new();
    let owner = t.owner().await;
    t.doc(&owner, "Returns", RETURNS, json!({})).await;
    t.drain();
    let agent = t.default_agent(&owner).await;
    for strategy in ["auto", "reasoning", "fixed"] {
        t.put(
            &format!("/api/v1/agents/{agent}"),
            &owner,
            json!({"skillSettings": {"retrieval.answer": {"retrievalStrategy": strategy}}}),
        )
        .await
        .assert_status(200);
        publish(&t, &owner, &agent).await;
        let r = t.post("/api/v1/chat", &owner, json!({"message": "İ how long is the return window"})).await;
        r.assert_status(200);
        // a joint followed by a multi-byte letter: offsets found in the full lowercase of the
        // message land one byte into it
        let r = t
            .post("/api/v1/chat", &owner, json!({"message": "İ how long is the return window and élan of refunds"}))
            .await;
        r.assert_status(200);
        assert_eq!(
            r.json()["diagnostics"]["retrievalStrategy"],
            if strategy == "fixed" { "fixed" } else { "reasoning" }
        );
        let cid = r.json()["conversationId"].as_str().unwrap().to_string();
        // and the conversation goes on (its history holds the message)
        t.post("/api/v1/chat", &owner, json!({"message": "and the refund?", "conversationId": cid}))
            .await
            .assert_status(200);
    }
    for q in ["İ how long is the return window", "İ how long is the return window and élan of refunds"] {
        t.post("/api/v1/retrieval/answer", &owner, json!({"query": q})).await.assert_status(200);
    }
}

#[tokio::test]
async fn a_long_source_file_with_text_across_its_middle_is_chunked() {
    let t = TestApp::new();
    let owner = t.owner().await;
    t.put("/api/v1/settings/ingestion", &owner, json!({"chunkingStrategy": "recursive_text"})).await.assert_status(200);
    // 60 KB of three-byte characters after one ASCII byte: the middle of the first presplit
    // window falls inside a character
    let body = format!("x{}", "名".repeat(20_000));
    let r = t.upload(&owner, "big.rs", body.as_bytes(), &[]).await;
    r.assert_status(202);
    let id = r.json()["id"].as_str().unwrap().to_string();
    t.drain();
    let d = t.document(&owner, &id).await;
    assert_eq!(d["status"], "ready", "{d}");
}

#[tokio::test]
async fn searches_bound_their_source_ids_and_filter_clauses() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let ids: Vec<String> = (0..40_000).map(|i| format!("s{i}")).collect();
    let r = t.post("/api/v1/document/search", &owner, json!({"query": "x", "sourceIds": ids})).await;
    r.assert_status(400);
    assert_eq!(r.json()["error"]["details"]["field"], "sourceIds");
    assert_eq!(r.json()["error"]["details"]["limit"], 200);
    let ids: Vec<String> = (0..200).map(|i| format!("s{i}")).collect();
    t.post("/api/v1/document/search", &owner, json!({"query": "x", "sourceIds": ids})).await.assert_status(200);
    let wide: Vec<Value> = (0..60).map(|i| json!({format!("f{i}"): {"$in": (0..20).collect::<Vec<_>>()}})).collect();
    let r = t.post("/api/v1/document/search", &owner, json!({"query": "x", "metadataFilter": {"$or": wide}})).await;
    r.assert_status(400);
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("too many clauses"));
}

// ---- 8, 9, 10: spec conformance ----

#[tokio::test]
async fn settings_that_change_state_take_the_dashboard_session() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let token = t.token(&owner).await;
    for (method, path, body) in [
        (Method::PUT, "/api/v1/settings/ingestion", json!({"fixedWindowChunkSize": 500})),
        (Method::POST, "/api/v1/settings/ingestion/reprocess", json!({})),
        (Method::PUT, "/api/v1/settings/llm-models", json!({"rerank": null})),
        (Method::PUT, "/api/v1/settings/document-types", json!({"expectedRevision": "1", "types": []})),
    ] {
        let r = t.send(method.clone(), path, &token, Some(body.clone()), &[]).await;
        r.assert_status(401);
        assert_eq!(r.json()["error"]["details"]["code"], "session_required", "{path}");
        assert!(t.send(method, path, &owner, Some(body), &[]).await.status.is_success(), "{path} with the session");
    }
    // reads stay open to credentials
    for path in ["/api/v1/settings/ingestion", "/api/v1/settings/llm-models", "/api/v1/settings/document-types"] {
        t.get(path, &token).await.assert_status(200);
    }
}

#[tokio::test]
async fn a_candidate_needs_no_body_and_the_generation_guard_stays_optional() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let agent = t.default_agent(&owner).await;
    t.put(&format!("/api/v1/agents/{agent}"), &owner, json!({"customInstruction": "Be brief."}))
        .await
        .assert_status(200);
    let path = format!("/api/v1/agents/{agent}/revisions/candidates");
    let r = t.send(Method::POST, &path, &owner, None, &[]).await;
    r.assert_status(201);
    let g = r.json()["generation"].as_i64().unwrap();
    // the same generation again: the same candidate
    t.post(&path, &owner, json!({})).await.assert_status(200);
    let r = t.post(&path, &owner, json!({"expectedDraftGeneration": g + 5})).await;
    r.assert_status(409);
    assert_eq!(r.json()["error"]["code"], "revision_conflict");
    t.post(&path, &owner, json!({"expectedDraftGeneration": g})).await.assert_status(200);
    t.post(&path, &owner, json!({"unknown": 1})).await.assert_status(400);
}

#[tokio::test]
async fn usage_and_progress_are_the_workspaces_own() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let other = t.workspace(&owner, "Other").await;
    t.doc(&owner, "Meter", "Bytes that belong to the default workspace.", json!({})).await;
    t.drain();
    let mine = t.get("/api/v1/usage", &owner).await.json();
    assert_eq!(mine["storedDocuments"]["used"], 1);
    assert_eq!(mine["embeddingsThisMonth"]["events"], 1);
    assert_eq!(mine["daily"].as_array().unwrap().len(), 30);
    assert_eq!(mine["daily"][29]["embeddingCalls"], 1);
    let theirs = t.get_in(&other, "/api/v1/usage", &owner).await.json();
    assert_eq!(theirs["storedDocuments"]["used"], 0, "{theirs}");
    assert_eq!(theirs["storedIndexedBytes"]["used"], 0);
    assert_eq!(theirs["embeddingsThisMonth"]["events"], 0);
    let p = t.get_in(&other, "/api/v1/document/progress", &owner).await.json();
    assert_eq!(p["ready"], 0);
    assert_eq!(p["index"]["textDocuments"], 0, "{p}");
    assert_eq!(p["index"]["vectors"], 0, "{p}");
    let p = t.get("/api/v1/document/progress", &owner).await.json();
    assert_eq!(p["index"]["vectors"], 1, "{p}");
    // the organization's view is its own route, for those who may see it
    let org = t.get("/api/v1/usage/organization", &owner).await;
    org.assert_status(200);
    assert_eq!(org.json()["storedDocuments"]["used"], 1);
    let member = t.member(&owner, "m@example.com", "member").await;
    t.get("/api/v1/usage/organization", &member).await.assert_status(403);
}

// ---- 11, 14: context variables ----

fn with_model_and_key(fake: &FakeProvider) -> TestApp {
    let url = fake.url.clone();
    TestApp::with_config(move |c| {
        c.encryption_key = Some(Secret::new([7u8; 32]));
        c.llm.env_keys.insert("openai".into(), Secret::new("sk-ctx-test".into()));
        c.llm.base_urls.insert("openai".into(), url.clone());
        c.llm.chat =
            steward::config::LlmSlotDefault { provider: Some("openai".into()), model: Some("gpt-test".into()) };
    })
}

/// The system prompt of the last answer the fake model composed.
fn last_system_prompt(fake: &FakeProvider) -> String {
    let reqs = fake.requests.lock();
    let r = reqs
        .iter()
        .rev()
        .find(|r| r.body["messages"][0]["content"].as_str().is_some_and(|s| s.contains("You are")))
        .unwrap();
    r.body["messages"][0]["content"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn context_values_reach_the_model_as_their_surfacing_says_and_sensitive_ones_are_sealed() {
    if crate::support::sqlite_mode_only("reads the SQLite file's bytes") {
        return;
    }
    let fake = FakeProvider::start(|r| {
        if r.body.to_string().contains("follow-up") {
            return openai_stream("{\"questions\": []}");
        }
        openai_stream("COVERAGE: answered sufficient_evidence\nYou can return items within 30 days [1].")
    });
    let t = with_model_and_key(&fake);
    let owner = t.owner().await;
    t.doc(&owner, "Returns", RETURNS, json!({})).await;
    t.drain();
    let agent = t.default_agent(&owner).await;
    t.put(
        &format!("/api/v1/agents/{agent}"),
        &owner,
        json!({"customInstruction": "Address the visitor as ctx.first_name."}),
    )
    .await
    .assert_status(200);
    let mut ids = std::collections::HashMap::new();
    for (name, surfacing, sensitivity, value) in [
        ("plan", "always", "normal", "Pro plan"),
        ("first_name", "on_reference", "normal", "Ada"),
        ("tier", "on_reference", "normal", "gold tier"),
        ("notes", "operator_only", "normal", "difficult customer"),
        ("account_number", "always", "sensitive", "NL91ABNA0417164300"),
    ] {
        let v = t
            .post(
                "/api/v1/context-variables",
                &owner,
                json!({"name": name, "sensitivity": sensitivity, "defaultSurfacing": surfacing}),
            )
            .await
            .json();
        let vid = v["id"].as_str().unwrap().to_string();
        t.put(&format!("/api/v1/agents/{agent}/context-variables/{vid}"), &owner, json!({"source": "pushed"}))
            .await
            .assert_status(200);
        t.put(
            &format!("/api/v1/context-variables/{vid}/values"),
            &owner,
            json!({"scope": {"type": "customer", "id": "cust-1"}, "data": {"value": value}}),
        )
        .await
        .assert_status(200);
        ids.insert(name, vid);
    }
    // the sensitive value is sealed at rest
    assert!(!crate::support::contains_bytes(&t.db_bytes(), b"NL91ABNA0417164300"), "sealed at rest");
    assert!(crate::support::contains_bytes(&t.db_bytes(), b"gold tier"), "a normal value is stored as is");
    publish(&t, &owner, &agent).await;

    let r = t
        .post(
            "/api/v1/chat",
            &owner,
            json!({"message": "How long is the return window?", "contextScope": {"customerId": "cust-1"}, "includeDebug": true}),
        )
        .await;
    r.assert_status(200);
    let system = last_system_prompt(&fake);
    assert!(system.contains("ctx.plan: Pro plan"), "always: {system}");
    assert!(system.contains("ctx.first_name: Ada"), "referenced on_reference: {system}");
    assert!(!system.contains("gold tier"), "unreferenced on_reference stays out: {system}");
    assert!(!system.contains("difficult customer"), "operator_only never reaches the model: {system}");
    assert!(system.contains("NL91ABNA0417164300"), "a surfaced sensitive value reaches the model");
    let trace_id = r.json()["traceId"].as_str().unwrap().to_string();
    let trace = t.get(&format!("/api/v1/traces/{trace_id}"), &owner).await.text();
    for secret in ["NL91ABNA", "Pro plan", "difficult customer"] {
        assert!(!trace.contains(secret), "the trace holds no values: {trace}");
    }
    assert!(trace.contains("context_variables"), "{trace}");
    assert!(!r.text().contains("NL91ABNA"), "nor does the debug reply");

    // another customer has none of these values
    t.post(
        "/api/v1/chat",
        &owner,
        json!({"message": "How long is the return window?", "contextScope": {"customerId": "cust-2"}}),
    )
    .await
    .assert_status(200);
    assert!(!last_system_prompt(&fake).contains("Pro plan"));

    // a test execution's values take the place of stored ones
    let e = t
        .post(
            &format!("/api/v1/agents/{agent}/test-executions"),
            &owner,
            json!({"testValues": [{"contextVariableId": ids["plan"], "value": {"value": "Trial plan"}},
                                   {"contextVariableId": ids["account_number"], "value": {"value": "TESTIBAN99"}}]}),
        )
        .await;
    assert!(e.status.is_success(), "{}", e.text());
    let eid = e.json()["id"].as_str().unwrap().to_string();
    assert!(!crate::support::contains_bytes(&t.db_bytes(), b"TESTIBAN99"), "a sensitive test value is sealed too");
    t.post(
        &format!("/api/v1/agents/{agent}/test-executions/{eid}/messages"),
        &owner,
        json!({"message": "How long is the return window?"}),
    )
    .await
    .assert_status(200);
    let system = last_system_prompt(&fake);
    assert!(system.contains("ctx.plan: Trial plan") && system.contains("TESTIBAN99"), "{system}");

    // a variable made normal is stored in clear again; made sensitive, sealed
    let tier = &ids["tier"];
    t.patch(&format!("/api/v1/context-variables/{tier}"), &owner, json!({"sensitivity": "sensitive"}))
        .await
        .assert_status(200);
    let sealed: (String, Option<Vec<u8>>) = t
        .app
        .db
        .read(|c| {
            Ok(c.query_row("SELECT data, ciphertext FROM context_values WHERE variable_id = ?1", [tier], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?)
        })
        .unwrap();
    assert_eq!(sealed.0, "", "sealed when it became sensitive");
    assert!(sealed.1.is_some_and(|c| !crate::support::contains_bytes(&c, b"gold")));
    t.patch(&format!("/api/v1/context-variables/{tier}"), &owner, json!({"sensitivity": "normal"}))
        .await
        .assert_status(200);
    let data: String = t
        .app
        .db
        .read(|c| Ok(c.query_row("SELECT data FROM context_values WHERE variable_id = ?1", [tier], |r| r.get(0))?))
        .unwrap();
    assert!(data.contains("gold tier"), "in clear again: {data}");
}

// ---- 12: keep-alive after an early error ----

#[tokio::test(flavor = "multi_thread")]
async fn a_response_sent_before_the_body_was_read_closes_the_connection_and_says_so() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let server = crate::e2e::Server::start(&dir.path().join("data"), &[]);
    let addr = server.base.strip_prefix("http://").unwrap().to_string();

    // an early 401: the body was never read
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let body = "x".repeat(200_000);
    let req = format!(
        "POST /api/v1/document/ HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let _ = s.write_all(body.as_bytes()).await;
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp).await; // the server closes: read_to_end returns
    let text = String::from_utf8_lossy(&resp).to_lowercase();
    assert!(text.starts_with("http/1.1 401"), "{text}");
    assert!(text.contains("connection: close"), "the client is told not to reuse it: {text}");

    // a request whose body was read keeps the connection usable for the next one
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let login = r#"{"email":"a@example.com","password":"wrong one"}"#;
    for _ in 0..2 {
        let req = format!(
            "POST /api/v1/auth/login HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{login}",
            login.len()
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let mut buf = vec![0u8; 4096];
        let n = s.read(&mut buf).await.unwrap();
        let text = String::from_utf8_lossy(&buf[..n]).to_lowercase();
        assert!(text.starts_with("http/1.1 401"), "{text}");
        assert!(!text.contains("connection: close"), "{text}");
    }
    server.terminate();
}
