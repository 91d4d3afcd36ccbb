//! Hardening, round 3: what an outside review of the visitor-facing surfaces found. Each test
//! failed on the code before the fix: capped event streams and long polls, a header-read timeout,
//! outbound MCP answers read through a byte limit, redirects that leave the saved origin checked as
//! public-only, feedback counted against the visitor limits, sessions that end when the default
//! agent changes, URLs with credentials refused, cookie state changes that must say where they
//! came from, case-insensitive destination names, the 413 envelope readable by clients that send
//! their whole body first, and a plain-text log when it does not go to a terminal.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use axum::http::Method;
use reqwest::header;
use serde_json::{Value, json};

use crate::e2e::{Server, bootstrap};
use crate::public_chat::{Visitor, public_app};
use crate::receiver::{Receiver, Reply};
use crate::support::{Auth, TestApp};

/// A real server with the owner's token and dashboard cookie.
struct Real {
    server: Server,
    token: String,
    cookie: String,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Real {
    async fn start(env: &[(&str, &str)]) -> Real {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let token = bootstrap(&data);
        let server = Server::start(&data, env);
        let http = reqwest::Client::new();
        let r = http
            .post(format!("{}/api/v1/auth/login", server.base))
            .json(&json!({"email": "root@example.com", "password": "root-password"}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
        let cookie = r.headers()[header::SET_COOKIE].to_str().unwrap().split(';').next().unwrap().to_string();
        Real { server, token, cookie, http, _dir: dir }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.base)
    }

    /// A dashboard call (settings and credentials need the session); panics unless it succeeds.
    async fn dash(&self, method: Method, path: &str, body: Value) -> Value {
        let mut req = self
            .http
            .request(method, self.url(path))
            .header(header::COOKIE, &self.cookie)
            .header(header::ORIGIN, &self.server.base);
        if !body.is_null() {
            req = req.json(&body);
        }
        let r = req.send().await.unwrap();
        let status = r.status();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "{path}: {status} {v}");
        v
    }

    /// Opens an anonymous-link session: (launch token, session token).
    async fn visitor(&self, launch: &str) -> String {
        let r = self
            .http
            .post(self.url(&format!("/api/v1/public/chat/{launch}/sessions")))
            .json(&json!({"channel": "anonymous_link"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        r.json::<Value>().await.unwrap()["publicSessionToken"].as_str().unwrap().to_string()
    }

    /// A visitor's first message; the conversation id.
    async fn conversation(&self, launch: &str, session: &str) -> String {
        let r = self
            .http
            .post(self.url(&format!("/api/v1/public/chat/{launch}")))
            .header("x-service-public-session", session)
            .json(&json!({"message": "Hello there"}))
            .send()
            .await
            .unwrap();
        let v: Value = r.json().await.unwrap();
        v["conversationId"].as_str().unwrap_or_else(|| panic!("{v}")).to_string()
    }

    async fn open_events(&self, launch: &str, session: &str, cid: &str) -> reqwest::Response {
        self.http
            .get(self.url(&format!("/api/v1/public/chat/{launch}/events/{cid}")))
            .header("x-service-public-session", session)
            .send()
            .await
            .unwrap()
    }

    fn pid(&self) -> u32 {
        self.server.child.id()
    }
}

/// A 429 that says when to come back.
async fn assert_refused(r: reqwest::Response) {
    assert_eq!(r.status(), 429);
    assert!(r.headers().contains_key(header::RETRY_AFTER), "{:?}", r.headers());
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "rate_limit_exceeded", "{v}");
}

/// `VmRSS` and `VmHWM` (peak) of a process, in KiB.
fn memory_kib(pid: u32) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[tokio::test(flavor = "multi_thread")]
async fn event_streams_and_long_polls_are_capped_per_holder() {
    let s = Real::start(&[
        ("STEWARD_PUBLIC_STREAMS_PER_SESSION", "2"),
        ("STEWARD_PUBLIC_STREAMS_PER_IP", "3"),
        ("STEWARD_EVENTS_STREAMS_PER_USER", "2"),
    ])
    .await;
    let g = s.dash(Method::PUT, "/api/v1/settings/general", json!({"anonymousChatEnabled": true})).await;
    let launch = g["anonymousChatToken"].as_str().unwrap().to_string();
    let (one, two) = (s.visitor(&launch).await, s.visitor(&launch).await);
    let (c1, c2) = (s.conversation(&launch, &one).await, s.conversation(&launch, &two).await);

    // a session holds two streams; the third is refused with Retry-After
    let a = s.open_events(&launch, &one, &c1).await;
    let b = s.open_events(&launch, &one, &c1).await;
    assert_eq!((a.status().as_u16(), b.status().as_u16()), (200, 200));
    assert_refused(s.open_events(&launch, &one, &c1).await).await;
    // another session from the same address gets the address's last place, then no more
    let c = s.open_events(&launch, &two, &c2).await;
    assert_eq!(c.status(), 200);
    assert_refused(s.open_events(&launch, &two, &c2).await).await;
    // a stream the server ends gives its place back: a new session on a stream that failed
    // authentication holds nothing
    drop((a, b, c));

    // the operator events stream: per person
    let events = || async { s.http.get(s.url("/api/v1/events")).bearer_auth(&s.token).send().await.unwrap() };
    let (e1, e2) = (events().await, events().await);
    assert_eq!((e1.status().as_u16(), e2.status().as_u16()), (200, 200));
    assert_refused(events().await).await;
    drop((e1, e2));
    s.server.terminate();
}

#[tokio::test(flavor = "multi_thread")]
async fn waiting_converse_reads_are_capped_per_credential() {
    let s = Real::start(&[("STEWARD_CONVERSE_WAITS_PER_CREDENTIAL", "1")]).await;
    let agents = s.dash(Method::GET, "/api/v1/agents", Value::Null).await;
    let agent = agents["agents"][0]["id"].as_str().unwrap().to_string();
    let cred = s
        .dash(
            Method::POST,
            &format!("/api/v1/agents/{agent}/channel-credentials"),
            json!({"audience": "mcp", "label": "caps"}),
        )
        .await;
    let secret = cred["secret"].as_str().unwrap().to_string();
    let exchange = || async {
        let r = s.http.post(s.url("/api/v1/mcp/converse/session")).json(&json!({"launchToken": secret})).send().await;
        let v: Value = r.unwrap().json().await.unwrap();
        v["sessionToken"].as_str().unwrap_or_else(|| panic!("{v}")).to_string()
    };
    let (t1, t2) = (exchange().await, exchange().await);
    // bind a conversation and read to its end, so the next read waits
    let ask = s
        .http
        .post(s.url("/api/v1/mcp/converse/ask"))
        .bearer_auth(&t1)
        .json(&json!({"message": "Hello"}))
        .send()
        .await
        .unwrap();
    assert!(ask.status().is_success(), "{}", ask.status());
    let page: Value =
        s.http.get(s.url("/api/v1/mcp/converse/messages")).bearer_auth(&t1).send().await.unwrap().json().await.unwrap();
    let cursor = page["cursor"].as_str().unwrap_or_else(|| panic!("{page}")).to_string();
    let wait = |token: String, ms: &'static str| {
        s.http
            .get(s.url("/api/v1/mcp/converse/messages"))
            .query(&[("cursor", cursor.as_str()), ("waitMs", ms)])
            .bearer_auth(token)
            .send()
    };
    // Take the place with t1's long read. A probe of t2 may itself hold the place for an instant
    // and refuse t1's read; then t1 asks again, until a probe is refused by the cap while t1 waits.
    let started = Instant::now();
    let held = loop {
        assert!(started.elapsed() < Duration::from_secs(30), "a second waiting read was never refused");
        let held = tokio::spawn(wait(t1.clone(), "25000"));
        let mut refused = None;
        while !held.is_finished() {
            let r = wait(t2.clone(), "1").await.unwrap();
            if r.status() == 429 {
                refused = Some(r);
                break;
            }
        }
        if let Some(r) = refused
            && !held.is_finished()
        {
            assert_refused(r).await;
            break held;
        }
        let _ = held.await;
    };
    // a new reply in the conversation answers the first read
    let r = s.http.post(s.url("/api/v1/mcp/converse/ask")).bearer_auth(&t1).json(&json!({"message": "And?"})).send();
    assert!(r.await.unwrap().status().is_success());
    let first = held.await.unwrap().unwrap();
    assert_eq!(first.status(), 200);
    assert!(!first.json::<Value>().await.unwrap()["messages"].as_array().unwrap().is_empty());
    // the place is free again once the first read answered
    assert_eq!(wait(t2.clone(), "1").await.unwrap().status(), 200);
    s.server.terminate();
}

#[tokio::test]
async fn a_visitor_stream_ends_when_its_session_token_runs_out() {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let t = TestApp::new();
    let (_owner, anon, _embed) = public_app(&t).await;
    let v = Visitor::open(&t, &anon, "anonymous_link", None).await;
    let cid = v.say(&t, json!({"message": "Hi"})).await.json()["conversationId"].as_str().unwrap().to_string();
    // one second of the 12-hour session is left
    t.clock.advance_ms(12 * 3600 * 1000 - 1000);
    let req = axum::http::Request::builder()
        .uri(format!("/api/v1/public/chat/{anon}/events/{cid}"))
        .header("x-service-public-session", &v.session)
        .body(axum::body::Body::empty())
        .unwrap();
    let resp = t.router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let started = Instant::now();
    let body = tokio::time::timeout(Duration::from_secs(10), resp.into_body().collect())
        .await
        .expect("the stream ended when the session did")
        .unwrap()
        .to_bytes();
    assert!(String::from_utf8_lossy(&body).contains("event: ready"));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_that_never_finishes_its_headers_is_closed() {
    let s = Real::start(&[("STEWARD_HEADER_READ_TIMEOUT_SECS", "1")]).await;
    let addr = s.server.base.trim_start_matches("http://").to_string();
    let started = Instant::now();
    let closed = tokio::task::spawn_blocking(move || {
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        c.write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\n").unwrap();
        let mut buf = [0u8; 512];
        // the server closes (0 bytes, or a reset) instead of waiting for the rest
        matches!(c.read(&mut buf), Ok(0) | Err(_))
    })
    .await
    .unwrap();
    let took = started.elapsed();
    assert!(closed, "the connection was answered instead of closed");
    assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(10), "{took:?}");
    // a complete request is still served (on a new connection: the same timeout closes the idle
    // ones a shared client keeps, and one closed as it is reused fails the request)
    let fresh = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    assert_eq!(fresh.get(s.url("/readyz")).send().await.unwrap().status(), 200);
    s.server.terminate();
}

/// A hostile MCP server: whatever it is asked, it answers an endless JSON body (`/json`) or an
/// endless event stream (`/sse`); returns its base URL and a counter of the bytes it wrote.
fn hostile_mcp_server() -> (String, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    use std::sync::atomic::Ordering;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = sent.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let counter = counter.clone();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                let sse = String::from_utf8_lossy(&head).contains("/sse");
                let (ctype, start) = if sse {
                    ("text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"x\":\"")
                } else {
                    ("application/json", "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"x\":\"")
                };
                let header = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: {ctype}\r\ntransfer-encoding: chunked\r\nmcp-session-id: s1\r\n\r\n"
                );
                if conn.write_all(header.as_bytes()).is_err() {
                    return;
                }
                let chunk = |data: &[u8]| {
                    let mut c = format!("{:x}\r\n", data.len()).into_bytes();
                    c.extend_from_slice(data);
                    c.extend_from_slice(b"\r\n");
                    c
                };
                let _ = conn.write_all(&chunk(start.as_bytes()));
                let filler = chunk(&vec![b'a'; 64 * 1024]);
                // up to 200 MB, or until the client hangs up
                for _ in 0..3200 {
                    if conn.write_all(&filler).is_err() {
                        return;
                    }
                    counter.fetch_add(filler.len() as u64, Ordering::Relaxed);
                }
            });
        }
    });
    (base, sent)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_outbound_mcp_answer_over_the_limit_is_aborted_and_memory_stays_bounded() {
    use std::sync::atomic::Ordering;
    let key = "cd".repeat(32);
    let s = Real::start(&[("CONNECTOR_ENCRYPTION_KEY", &key), ("STEWARD_DELIVERY_ALLOW", "127.0.0.1")]).await;
    let agents = s.dash(Method::GET, "/api/v1/agents", Value::Null).await;
    let agent = agents["agents"][0]["id"].as_str().unwrap().to_string();
    let (base, sent) = hostile_mcp_server();
    let (before, _) = memory_kib(s.pid());
    for path in ["/json", "/sse"] {
        sent.store(0, Ordering::Relaxed);
        let skill = s
            .dash(
                Method::POST,
                &format!("/api/v1/agents/{agent}/skills"),
                json!({"name": format!("hostile{}", &path[1..]), "capability": "mcp_tool", "invocationMode": "routine_named",
                    "target": {"kind": "mcp_connection", "id": "hostile"},
                    "config": {"serverUrl": format!("{base}{path}"), "toolName": "anything"}}),
            )
            .await;
        let sid = skill["id"].as_str().unwrap();
        let r = s
            .http
            .get(s.url(&format!("/api/v1/agents/{agent}/skills/{sid}/mcp-tools")))
            .header(header::COOKIE, &s.cookie)
            .send()
            .await
            .unwrap();
        let status = r.status();
        let v: Value = r.json().await.unwrap();
        assert!(status.is_client_error() || status.is_server_error(), "{path}: {status} {v}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("larger than the limit"), "{path}: {v}");
        // the read stopped near the limit (1 MiB), not at the server's 200 MB
        assert!(sent.load(Ordering::Relaxed) < 64 * 1024 * 1024, "{path}: {} bytes sent", sent.load(Ordering::Relaxed));
    }
    let (_, peak) = memory_kib(s.pid());
    assert!(peak < before + 100 * 1024, "peak RSS {peak} KiB, {before} KiB before the hostile answers");
    s.server.terminate();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_off_the_saved_origin_is_public_only_even_by_name() {
    // a name of this machine that resolves to a loopback or private address (Debian lists the
    // host name in /etc/hosts)
    let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default().trim().to_string();
    let host = if host.is_empty() { "localhost".to_string() } else { host };
    let a = Receiver::start().await;
    let b = Receiver::start_for(std::slice::from_ref(&host)).await;
    let dir = tempfile::tempdir().unwrap();
    let cas = dir.path().join("cas.pem");
    let mut pem = std::fs::read(&a.ca_file).unwrap();
    pem.extend(std::fs::read(&b.ca_file).unwrap());
    std::fs::write(&cas, pem).unwrap();
    let t = TestApp::with_config(|c| {
        // the whole loopback network is allow-listed: the saved URL's host and the name's address
        c.delivery.allow = vec!["127.0.0.0/8".into()];
        c.delivery.ca_file = Some(cas.clone());
        c.public_url = Some("https://steward.example".into());
    });
    let owner = t.owner().await;
    let agent = t.default_agent(&owner).await;
    t.put(
        &format!("/api/v1/agents/{agent}"),
        &owner,
        json!({"handoffOnRetrievalMiss": true, "contactRequestDelivery": {"recipientEmails": [],
            "webhook": {"url": format!("{}/hook", a.base)}}}),
    )
    .await
    .assert_status(200);
    t.publish(&owner, &agent).await;
    let port_b = b.base.rsplit(':').next().unwrap().to_string();
    a.push(Reply::status(307).header("location", format!("https://{host}:{port_b}/steal")));
    let r = t.post("/api/v1/chat", &owner, json!({"message": "Do you repair vintage radios?"})).await;
    let cid = r.json()["conversationId"].as_str().unwrap().to_string();
    let app = t.app.clone();
    tokio::task::spawn_blocking(move || steward::jobs::run_until_idle(&app).unwrap()).await.unwrap();
    assert_eq!(a.hits().len(), 1, "the saved URL was called");
    assert!(b.hits().is_empty(), "the redirect reached {host} on the allow-listed network: {:?}", b.hits());
    let page = t.get(&format!("/api/v1/deliveries?channel=webhook&conversationId={cid}"), &owner).await.json();
    let id = page["deliveries"][0]["id"].as_str().unwrap().to_string();
    let log = t.get(&format!("/api/v1/deliveries/{id}"), &owner).await.json();
    let err = log["lastError"].as_str().unwrap_or_default();
    assert!(err.contains("redirect") && err.contains("refused") && err.contains(&host), "{log}");
}

#[tokio::test]
async fn answer_feedback_counts_against_the_visitor_limits() {
    let t = TestApp::with_config(|c| c.public_chat_limit_per_session.max = 5);
    let (_owner, anon, _embed) = public_app(&t).await;
    let v = Visitor::open(&t, &anon, "anonymous_link", None).await;
    let r = v.say(&t, json!({"message": "Hi"})).await;
    r.assert_status(200);
    let mid = r.json()["messageId"].as_str().or(r.json()["message"]["id"].as_str()).unwrap().to_string();
    let path = format!("/api/v1/answer-feedback/public/chat/{anon}/messages/{mid}");
    let mut statuses = Vec::new();
    for i in 0..10 {
        let rating = if i % 2 == 0 { "up" } else { "down" };
        let r = v.call(&t, Method::PUT, &path, Some(json!({"rating": rating}))).await;
        if r.status == 429 {
            assert!(r.headers.contains_key(header::RETRY_AFTER));
        }
        statuses.push(r.status.as_u16());
    }
    // one message and four ratings fill the session's five
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 4, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 6, "{statuses:?}");
    assert_eq!(v.call(&t, Method::DELETE, &path, None).await.status, 429, "clearing counts too");
}

#[tokio::test]
async fn a_session_ends_when_the_default_agent_changes() {
    let t = TestApp::new();
    let (owner, anon, _embed) = public_app(&t).await;
    let first_agent = t.default_agent(&owner).await;
    let v = Visitor::open(&t, &anon, "anonymous_link", None).await;
    let r = v.say(&t, json!({"message": "Hi"})).await;
    r.assert_status(200);
    let old_cid = r.json()["conversationId"].as_str().unwrap().to_string();

    let created = t.post("/api/v1/agents", &owner, json!({"name": "Second desk"})).await;
    created.assert_status(201);
    let second = created.json()["id"].as_str().or(created.json()["agent"]["id"].as_str()).unwrap().to_string();
    t.post(&format!("/api/v1/agents/{second}/default"), &owner, json!({})).await.assert_status(200);

    // the old session is over (the documented 404), and its resume token does not bring it back
    let r = v.say(&t, json!({"message": "Still there?", "conversationId": old_cid})).await;
    r.assert_status(404);
    let resumed = t
        .send(
            Method::POST,
            &format!("/api/v1/public/chat/{anon}/sessions"),
            &Auth::None,
            Some(json!({"channel": "anonymous_link", "resumeToken": v.resume})),
            &[],
        )
        .await;
    resumed.assert_status(400);
    // a new session talks to the new default agent, in a new conversation
    let fresh = Visitor::open(&t, &anon, "anonymous_link", None).await;
    let r = fresh.say(&t, json!({"message": "Hello again"})).await;
    r.assert_status(200);
    let cid = r.json()["conversationId"].as_str().unwrap().to_string();
    assert_ne!(cid, old_cid);
    let h = t.get(&format!("/api/v1/history/chat/{cid}"), &owner).await.json();
    let agent_of = h["agentId"].as_str().or(h["conversation"]["agentId"].as_str()).unwrap_or_default().to_string();
    assert_eq!(agent_of, second, "{h}");
    assert_ne!(agent_of, first_agent);
}

#[tokio::test]
async fn urls_with_credentials_are_refused_with_the_field_named() {
    let t = TestApp::with_config(|c| c.encryption_key = Some(steward::config::Secret::new([7u8; 32])));
    let owner = t.owner().await;
    let r = t
        .post(
            "/api/v1/settings/webhook-destinations",
            &owner,
            json!({"name": "Billing", "url": "https://user:s3cret@hooks.example.com/x"}),
        )
        .await;
    r.assert_status(400);
    assert!(r.text().contains("url") && !r.text().contains("s3cret"), "{}", r.text());

    let agent = t.default_agent(&owner).await;
    let r = t
        .post(
            &format!("/api/v1/agents/{agent}/skills"),
            &owner,
            json!({"name": "crm_hook", "capability": "webhook_call", "invocationMode": "routine_named",
                "target": {"kind": "webhook_destination", "id": "crm"}, "config": {"url": "https://token@crm.example.com/in"}}),
        )
        .await;
    r.assert_status(400);
    assert!(r.text().contains("config.url"), "{}", r.text());
    let r = t
        .put(
            &format!("/api/v1/agents/{agent}"),
            &owner,
            json!({"contactRequestDelivery": {"recipientEmails": [], "webhook": {"url": "https://a:b@hooks.example.com/"}}}),
        )
        .await;
    r.assert_status(400);
    assert!(r.text().contains("contactRequestDelivery.webhook.url"), "{}", r.text());
}

#[tokio::test]
async fn a_cookie_state_change_must_say_where_it_came_from() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let Auth::Cookie(cookie) = &owner else { unreachable!() };
    let cid = "0190f2a4-8a3c-7b1e-9c2d-3e4f5a6b7c8d";
    let send = |headers: Vec<(&'static str, &'static str)>| {
        let mut b = axum::http::Request::builder()
            .method(Method::POST)
            .uri(format!("/api/v1/conversations/{cid}/takeover"))
            .header(header::HOST.as_str(), "steward.example")
            .header(header::COOKIE.as_str(), cookie.as_str())
            .header(header::CONTENT_TYPE.as_str(), "text/plain");
        for (k, v) in headers {
            b = b.header(k, v);
        }
        t.raw(b.body(axum::body::Body::empty()).unwrap())
    };
    // no Origin, no Sec-Fetch-Site: refused
    let r = send(vec![]).await;
    r.assert_status(403);
    assert!(r.text().contains("Origin"), "{}", r.text());
    // another site
    send(vec![("origin", "https://evil.example")]).await.assert_status(403);
    send(vec![("sec-fetch-site", "cross-site")]).await.assert_status(403);
    send(vec![("sec-fetch-site", "same-site")]).await.assert_status(403);
    // this site: past the check (the conversation does not exist)
    send(vec![("origin", "http://steward.example")]).await.assert_status(404);
    send(vec![("sec-fetch-site", "same-origin")]).await.assert_status(404);
    // a bearer token is not a browser's ambient credential: no header needed
    let token = t.token(&owner).await;
    t.send(Method::POST, "/api/v1/document/", &token, Some(json!({"title": "t", "content": "c"})), &[])
        .await
        .assert_status(202);
}

#[tokio::test]
async fn destination_names_are_unique_per_workspace_whatever_their_case() {
    let t = TestApp::with_config(|c| {
        c.encryption_key = Some(steward::config::Secret::new([7u8; 32]));
        c.delivery.allow = vec!["127.0.0.1/32".into()];
    });
    let owner = t.owner().await;
    let create = |name: &'static str| {
        t.post(
            "/api/v1/settings/webhook-destinations",
            &owner,
            json!({"name": name, "url": "https://127.0.0.1:9/hook"}),
        )
    };
    create("Billing").await.assert_status(201);
    let r = create("BILLING").await;
    r.assert_status(409);
    assert_eq!(r.code(), "conflict");
    let other = create("Support").await;
    other.assert_status(201);
    let id = other.json()["destination"]["id"].as_str().unwrap().to_string();
    let r = t.put(&format!("/api/v1/settings/webhook-destinations/{id}"), &owner, json!({"name": "billing"})).await;
    r.assert_status(409);
    // renaming onto its own name in another case is fine
    t.put(&format!("/api/v1/settings/webhook-destinations/{id}"), &owner, json!({"name": "SUPPORT"}))
        .await
        .assert_status(200);
    // another workspace may use the name
    let ws = t.workspace(&owner, "Second").await;
    t.send(
        Method::POST,
        "/api/v1/settings/webhook-destinations",
        &owner,
        Some(json!({"name": "billing", "url": "https://127.0.0.1:9/hook"})),
        &[("x-workspace-id", &ws)],
    )
    .await
    .assert_status(201);
}

/// Sends a request with a 1.1 MB body in full before reading (as Python's `requests` and
/// `urllib` do, with no `Expect: 100-continue`), then reads the answer. The body goes out in
/// 64 KiB pieces a millisecond apart, as over a real network: on loopback a body sent in one
/// write is in the server's buffers before it answers, and the problem never shows.
fn send_whole_then_read(addr: &str, token: &str) -> std::io::Result<String> {
    let body = format!("{{\"title\":\"big\",\"content\":\"{}\"}}", "x".repeat(1_100_000));
    let mut c = std::net::TcpStream::connect(addr)?;
    c.set_read_timeout(Some(Duration::from_secs(20)))?;
    let head = format!(
        "POST /api/v1/document/ HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes())?;
    for piece in body.as_bytes().chunks(64 * 1024) {
        c.write_all(piece)?;
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut out = Vec::new();
    c.read_to_end(&mut out)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_sends_its_whole_body_first_reads_the_413_envelope() {
    let s = Real::start(&[]).await;
    let addr = s.server.base.trim_start_matches("http://").to_string();
    let token = s.token.clone();
    let answers = tokio::task::spawn_blocking(move || {
        (0..10).map(|_| send_whole_then_read(&addr, &token).map_err(|e| e.to_string())).collect::<Vec<_>>()
    })
    .await
    .unwrap();
    for a in answers {
        let a = a.unwrap_or_else(|e| panic!("the client saw {e} instead of the answer"));
        assert!(a.starts_with("HTTP/1.1 413"), "{a}");
        assert!(a.contains("\"payload_too_large\""), "{a}");
        assert!(a.to_ascii_lowercase().contains("connection: close"), "{a}");
    }
    s.server.terminate();
}

#[test]
fn the_log_written_to_a_pipe_has_no_colour_codes() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut child = Command::new(crate::e2e::bin())
        .args(["--data-dir", data.to_str().unwrap(), "serve", "--listen", "127.0.0.1:0"])
        .env("STEWARD_LOG", "info")
        .env_remove("NO_COLOR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
    let base = line.trim().strip_prefix("steward listening on ").unwrap().to_string();
    let r = reqwest::blocking::get(format!("{base}/readyz")).unwrap();
    assert_eq!(r.status(), 200);
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    child.wait().unwrap();
    let mut log = String::new();
    child.stderr.take().unwrap().read_to_string(&mut log).unwrap();
    assert!(log.contains("INFO") && log.contains("request"), "{log}");
    assert!(!log.contains('\u{1b}'), "escape codes in the piped log: {log:?}");
}
