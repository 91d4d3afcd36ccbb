//! The test harness: a `TestApp` on a temp data dir driving the real router in-process, a fake
//! clock, helpers for sessions and tokens, and a way to run jobs until idle (no sleeps).

#![allow(dead_code)]

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use chrono::Utc;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use steward::app::{App, Options};
use steward::clock::Clock;
use steward::clock::FakeClock;
use steward::config::Config;
use steward::jobs::Handler;
use tower::ServiceExt;

pub struct TestApp {
    pub app: Arc<App>,
    pub router: Router,
    pub clock: Arc<FakeClock>,
    pub dir: tempfile::TempDir,
}

pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|_| panic!("not JSON ({}): {}", self.status, self.text()))
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    #[track_caller]
    pub fn assert_status(&self, s: u16) -> &Self {
        assert_eq!(self.status.as_u16(), s, "unexpected status; body: {}", self.text());
        self
    }
    /// The `error.code` of an envelope.
    pub fn code(&self) -> String {
        self.json()["error"]["code"].as_str().unwrap_or_default().to_string()
    }
    pub fn cookie(&self) -> Option<String> {
        self.headers
            .get(header::SET_COOKIE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|s| s.to_string())
    }
}

/// How a request authenticates.
#[derive(Clone, Debug)]
pub enum Auth {
    None,
    Cookie(String),
    Bearer(String),
}

pub fn test_config(dir: &std::path::Path) -> Config {
    let mut c = Config::with_data_dir(dir.join("data"));
    c.workers = 2;
    c.log_level = "warn".into();
    c.embed_threads = 1;
    // uploaded PDF/DOCX/XLSX are parsed by the real binary, in a child process, as in production
    c.extractor_exe = Some(env!("CARGO_BIN_EXE_steward").into());
    // the suite on PostgreSQL (docs/scale-out.md): each app its own new database
    if std::env::var("STEWARD_TEST_DATABASE").is_ok_and(|v| v == "postgres") {
        c.database = Some(steward::config::Secret::new(crate::pg_server::PgServer::get().fresh_db()));
    }
    c
}

/// True when the suite runs on PostgreSQL (`STEWARD_TEST_DATABASE=postgres`): a test of what only
/// the SQLite mode has (its file, `steward backup`, start-up recovery that assumes one process)
/// says why and stops there; the rest of the suite runs on both backends.
pub fn sqlite_mode_only(why: &str) -> bool {
    let pg = std::env::var("STEWARD_TEST_DATABASE").is_ok_and(|v| v == "postgres");
    if pg {
        eprintln!("the SQLite mode only: {why}");
    }
    pg
}

/// The database a real binary serving `data_dir` uses when the suite runs on PostgreSQL
/// (`STEWARD_TEST_DATABASE=postgres`): a new database per data directory, the same one each time
/// it is asked for again (a restart, a command on the same data directory).
pub fn database_for(data_dir: &std::path::Path) -> Option<String> {
    static URLS: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<std::path::PathBuf, String>>> =
        std::sync::LazyLock::new(Default::default);
    if !std::env::var("STEWARD_TEST_DATABASE").is_ok_and(|v| v == "postgres") {
        return None;
    }
    let mut urls = URLS.lock().unwrap();
    Some(urls.entry(data_dir.to_path_buf()).or_insert_with(|| crate::pg_server::PgServer::get().fresh_db()).clone())
}

impl TestApp {
    /// The id of the workspace's default agent.
    pub async fn default_agent(&self, a: &Auth) -> String {
        let list = self.get("/api/v1/agents", a).await.json();
        list["agents"].as_array().unwrap().iter().find(|x| x["isDefault"] == true).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    pub fn new() -> TestApp {
        Self::build(|_| {}, vec![])
    }

    pub fn with_handlers(handlers: Vec<(&'static str, Handler)>) -> TestApp {
        Self::build(|_| {}, handlers)
    }

    pub fn with_config(f: impl FnOnce(&mut Config)) -> TestApp {
        Self::build(f, vec![])
    }

    pub fn build(f: impl FnOnce(&mut Config), handlers: Vec<(&'static str, Handler)>) -> TestApp {
        // STEWARD_TEST_LOG=warn (a filter) shows the app's log beside a failing test's output
        if let Ok(filter) = std::env::var("STEWARD_TEST_LOG") {
            let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
        }
        let dir = tempfile::tempdir().unwrap();
        let mut config = test_config(dir.path());
        f(&mut config);
        Self::open(dir, config, handlers)
    }

    /// Opens (or reopens, after a simulated restart) an app on `dir`. A search index rebuild the
    /// start found due runs here, to its end (the server runs it in the background; this harness
    /// has no background threads).
    pub fn open(dir: tempfile::TempDir, config: Config, handlers: Vec<(&'static str, Handler)>) -> TestApp {
        let t = Self::open_with_rebuild_due(dir, config, handlers);
        t.app.finish_search_rebuild().unwrap();
        t
    }

    /// [`TestApp::open`], leaving a due search index rebuild undone (to watch the server answer
    /// meanwhile; `app.finish_search_rebuild()` runs it).
    pub fn open_with_rebuild_due(
        dir: tempfile::TempDir,
        config: Config,
        handlers: Vec<(&'static str, Handler)>,
    ) -> TestApp {
        let clock = Arc::new(FakeClock::new(Utc::now()));
        let app = App::build(config, Options { clock: clock.clone(), extra_handlers: handlers, lock_data_dir: true })
            .unwrap();
        let router = steward::http::router(app.clone());
        TestApp { app, router, clock, dir }
    }

    /// Shuts this app down and opens a new one on the same data dir, like a restart.
    pub fn restart(self, handlers: Vec<(&'static str, Handler)>) -> TestApp {
        let config = self.app.config.clone();
        let clock_now = self.clock.now_ms();
        let dir = self.dir;
        drop(self.router);
        drop(self.app);
        let t = Self::open(dir, config, handlers);
        let delta = clock_now - t.clock.now_ms();
        if delta > 0 {
            t.clock.advance_ms(delta);
        }
        t
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        auth: &Auth,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Resp {
        let mut b = Request::builder().method(method).uri(path);
        match auth {
            Auth::None => {}
            // a browser says where a request came from; a cookie state change without it is refused
            Auth::Cookie(c) => b = b.header(header::COOKIE, c).header("sec-fetch-site", "same-origin"),
            Auth::Bearer(t) => b = b.header(header::AUTHORIZATION, format!("Bearer {t}")),
        }
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let req = match body {
            Some(v) => b.header(header::CONTENT_TYPE, "application/json").body(Body::from(v.to_string())).unwrap(),
            None => b.body(Body::empty()).unwrap(),
        };
        self.raw(req).await
    }

    /// Sends raw bytes with a content type.
    pub async fn send_bytes(
        &self,
        method: Method,
        path: &str,
        auth: &Auth,
        bytes: Vec<u8>,
        content_type: &str,
    ) -> Resp {
        let mut b = Request::builder().method(method).uri(path).header(header::CONTENT_TYPE, content_type);
        match auth {
            Auth::None => {}
            // a browser says where a request came from; a cookie state change without it is refused
            Auth::Cookie(c) => b = b.header(header::COOKIE, c).header("sec-fetch-site", "same-origin"),
            Auth::Bearer(t) => b = b.header(header::AUTHORIZATION, format!("Bearer {t}")),
        }
        self.raw(b.body(Body::from(bytes)).unwrap()).await
    }

    pub async fn raw(&self, req: Request<Body>) -> Resp {
        let resp = self.router.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = resp.into_body().collect().await.unwrap().to_bytes().to_vec();
        Resp { status, headers, body }
    }

    pub async fn get(&self, path: &str, auth: &Auth) -> Resp {
        self.send(Method::GET, path, auth, None, &[]).await
    }
    pub async fn post(&self, path: &str, auth: &Auth, body: Value) -> Resp {
        self.send(Method::POST, path, auth, Some(body), &[]).await
    }
    pub async fn put(&self, path: &str, auth: &Auth, body: Value) -> Resp {
        self.send(Method::PUT, path, auth, Some(body), &[]).await
    }
    pub async fn patch(&self, path: &str, auth: &Auth, body: Value) -> Resp {
        self.send(Method::PATCH, path, auth, Some(body), &[]).await
    }
    pub async fn delete(&self, path: &str, auth: &Auth) -> Resp {
        self.send(Method::DELETE, path, auth, None, &[]).await
    }
    /// GET in the workspace `ws` (the `X-Workspace-Id` header).
    pub async fn get_in(&self, ws: &str, path: &str, auth: &Auth) -> Resp {
        self.send(Method::GET, path, auth, None, &[("x-workspace-id", ws)]).await
    }

    /// Creates a second workspace and returns its id.
    pub async fn workspace(&self, owner: &Auth, name: &str) -> String {
        let r = self.post("/api/v1/workspaces", owner, json!({ "name": name })).await;
        r.json()["workspace"]["id"].as_str().expect("workspace id").to_string()
    }

    /// Registers the first user (the owner) and returns their session cookie.
    pub async fn owner(&self) -> Auth {
        let r = self
            .post(
                "/api/v1/auth/register",
                &Auth::None,
                json!({"email": "owner@example.com", "password": "owner-password", "name": "Olive Owner"}),
            )
            .await;
        r.assert_status(201);
        Auth::Cookie(r.cookie().expect("session cookie"))
    }

    /// Invites and registers a person with `role`; returns their session cookie.
    pub async fn member(&self, owner: &Auth, email: &str, role: &str) -> Auth {
        let inv = self.post("/api/v1/account/invitations", owner, json!({"email": email, "role": role})).await;
        inv.assert_status(201);
        let token = inv.json()["token"].as_str().unwrap().to_string();
        let r = self
            .post(
                "/api/v1/auth/register",
                &Auth::None,
                json!({"email": email, "password": "member-password", "invitationToken": token}),
            )
            .await;
        r.assert_status(201);
        Auth::Cookie(r.cookie().unwrap())
    }

    /// A personal token with every permission of the session's role.
    pub async fn token(&self, session: &Auth) -> Auth {
        let r = self.post("/api/v1/account/tokens", session, json!({"name": "test"})).await;
        r.assert_status(201);
        Auth::Bearer(r.json()["secret"].as_str().unwrap().to_string())
    }

    /// A personal token limited to `perms`.
    pub async fn token_with(&self, session: &Auth, perms: &[&str]) -> Auth {
        let r = self.post("/api/v1/account/tokens", session, json!({"name": "limited", "permissions": perms})).await;
        r.assert_status(201);
        Auth::Bearer(r.json()["secret"].as_str().unwrap().to_string())
    }

    /// Publishes the agent's current draft.
    pub async fn publish(&self, a: &Auth, agent: &str) {
        let t = self;
        let state = t.get(&format!("/api/v1/agents/{agent}/revision-state"), a).await.json();
        let g = state["draft"]["generation"].as_i64().unwrap();
        let published = state["publishedRevision"]["id"].clone();
        let cand = t
            .post(&format!("/api/v1/agents/{agent}/revisions/candidates"), a, json!({"expectedDraftGeneration": g}))
            .await
            .json();
        t.post(
            &format!("/api/v1/agents/{agent}/revisions/{}/publish", cand["id"].as_str().unwrap()),
            a,
            json!({"expectedDraftGeneration": g, "expectedPublishedRevisionId": published, "idempotencyKey": format!("k{g}")}),
        )
        .await
        .assert_status(200);
    }

    /// Runs due jobs on this thread until none is left.
    pub fn run_jobs(&self) -> usize {
        steward::jobs::run_until_idle(&self.app).unwrap()
    }

    /// Runs jobs and the embedding pipeline on this thread until both are idle.
    pub fn drain(&self) {
        drain_app(&self.app);
    }

    /// [`drain`](Self::drain) off the async runtime: for jobs that call servers the test runs on
    /// it (a fake Graph API, a local WordPress read over HTTP).
    pub async fn drain_blocking(&self) {
        let app = self.app.clone();
        tokio::task::spawn_blocking(move || drain_app(&app)).await.unwrap();
    }

    /// Creates an inline document; returns its id.
    pub async fn doc(&self, auth: &Auth, title: &str, content: &str, metadata: Value) -> String {
        let r = self
            .post("/api/v1/document/", auth, json!({"title": title, "content": content, "metadata": metadata}))
            .await;
        r.assert_status(202);
        r.json()["id"].as_str().unwrap().to_string()
    }

    pub async fn search(&self, auth: &Auth, body: Value) -> Value {
        let r = self.post("/api/v1/document/search", auth, body).await;
        r.assert_status(200);
        r.json()
    }

    /// Titles of the results of `query`, best first.
    pub async fn titles(&self, auth: &Auth, query: &str) -> Vec<String> {
        let v = self.search(auth, json!({"query": query})).await;
        v["results"].as_array().unwrap().iter().map(|h| h["title"].as_str().unwrap().to_string()).collect()
    }

    /// Titles of the BM25-only results (exact term presence).
    pub async fn titles_bm25(&self, auth: &Auth, query: &str) -> Vec<String> {
        let v = self.search(auth, json!({"query": query, "mode": "bm25"})).await;
        v["results"].as_array().unwrap().iter().map(|h| h["title"].as_str().unwrap().to_string()).collect()
    }

    pub async fn document(&self, auth: &Auth, id: &str) -> Value {
        let r = self.get(&format!("/api/v1/document/{id}"), auth).await;
        r.assert_status(200);
        r.json()
    }

    /// Uploads `bytes` as `filename` with extra form fields.
    pub async fn upload(&self, auth: &Auth, filename: &str, bytes: &[u8], fields: &[(&str, &str)]) -> Resp {
        let boundary = "----stewardtestboundary7MA4YWxkTrZu0gW";
        let mut body: Vec<u8> = Vec::new();
        for (k, v) in fields {
            body.extend_from_slice(
                format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n").as_bytes(),
            );
        }
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\nContent-Type: application/octet-stream\r\n\r\n").as_bytes(),
        );
        body.extend_from_slice(bytes);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let mut b = Request::builder()
            .method(Method::POST)
            .uri("/api/v1/document/import")
            .header(header::CONTENT_TYPE, format!("multipart/form-data; boundary={boundary}"));
        match auth {
            Auth::None => {}
            // a browser says where a request came from; a cookie state change without it is refused
            Auth::Cookie(c) => b = b.header(header::COOKIE, c).header("sec-fetch-site", "same-origin"),
            Auth::Bearer(t) => b = b.header(header::AUTHORIZATION, format!("Bearer {t}")),
        }
        self.raw(b.body(Body::from(body)).unwrap()).await
    }

    /// The default workspace's id.
    pub fn get_ws(&self) -> String {
        self.app
            .db
            .read(|c| Ok(c.query_row("SELECT id FROM workspaces ORDER BY created_at LIMIT 1", [], |r| r.get(0))?))
            .unwrap()
    }

    pub fn db_bytes(&self) -> Vec<u8> {
        // include the WAL: recent writes live there until a checkpoint
        let mut all = std::fs::read(self.app.config.db_path()).unwrap_or_default();
        let wal = self.app.config.db_path().with_extension("db-wal");
        all.extend(std::fs::read(wal).unwrap_or_default());
        all
    }
}

/// True when `needle` occurs in `hay`.
pub fn contains_bytes(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Runs jobs and the embedding pipeline until both are idle.
fn drain_app(app: &App) {
    loop {
        let jobs = steward::jobs::run_until_idle(app).unwrap();
        let steps = steward::documents::pipeline::run_until_idle(app).unwrap();
        if jobs == 0 && steps == 0 {
            break;
        }
    }
}
