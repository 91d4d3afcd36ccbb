//! The real `steward` binary, as a user runs it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

pub const BIN: &str = env!("CARGO_BIN_EXE_steward");

/// The binary the tests start: this build's, or `STEWARD_TEST_BIN` (a release build, for the
/// ignored figure tests).
pub fn bin() -> String {
    std::env::var("STEWARD_TEST_BIN").unwrap_or_else(|_| BIN.to_string())
}

/// A running `steward serve` on a free loopback port.
pub struct Server {
    pub child: Child,
    pub base: String,
}

/// A server a failed test left running is stopped with the test, not left behind.
impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Server {
    pub fn start(data_dir: &std::path::Path, extra_env: &[(&str, &str)]) -> Server {
        Server::start_at(data_dir, "127.0.0.1:0", extra_env)
    }

    /// Starts on `listen` (a restart on the address a client already uses).
    pub fn start_at(data_dir: &std::path::Path, listen: &str, extra_env: &[(&str, &str)]) -> Server {
        let mut cmd = Command::new(bin());
        cmd.args(["--data-dir", data_dir.to_str().unwrap(), "serve", "--listen", listen])
            .env("STEWARD_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(url) = crate::support::database_for(data_dir) {
            cmd.env("STEWARD_DATABASE_URL", url);
        }
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start steward");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let base = line
            .trim()
            .strip_prefix("steward listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        Server { child, base }
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        self.child.wait().unwrap()
    }

    /// SIGKILL: a crash.
    #[allow(dead_code)]
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

pub fn bootstrap(data_dir: &std::path::Path) -> String {
    bootstrap_with(data_dir, &[])
}

/// [`bootstrap`] with extra environment (a node's `STEWARD_DATABASE_URL`).
pub fn bootstrap_with(data_dir: &std::path::Path, env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(bin());
    if let Some(url) = crate::support::database_for(data_dir) {
        cmd.env("STEWARD_DATABASE_URL", url);
    }
    let out = cmd
        .envs(env.iter().copied())
        .args([
            "--data-dir",
            data_dir.to_str().unwrap(),
            "admin",
            "bootstrap",
            "--email",
            "root@example.com",
            "--password",
            "root-password",
            "--print-token",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "bootstrap failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn binary_bootstraps_serves_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = bootstrap(&data);
    assert!(token.starts_with("stw_pat_"), "{token}");
    // bootstrapping again is safe and mints another working token
    let token2 = bootstrap(&data);
    assert_ne!(token, token2);

    let server = Server::start(&data, &[]);
    let http = reqwest::Client::new();
    let ready = http.get(format!("{}/readyz", server.base)).send().await.unwrap();
    assert_eq!(ready.status(), 200, "{}", ready.text().await.unwrap());

    let me = http.get(format!("{}/api/v1/auth/me", server.base)).bearer_auth(&token).send().await.unwrap();
    assert_eq!(me.status(), 200);
    assert!(me.headers().contains_key("x-request-id"));
    let me: serde_json::Value = me.json().await.unwrap();
    assert_eq!(me["user"]["email"], "root@example.com");
    assert_eq!(me["role"], "owner");
    assert!(me["permissions"].as_array().unwrap().len() >= 14);
    let me2 = http.get(format!("{}/api/v1/auth/me", server.base)).bearer_auth(&token2).send().await.unwrap();
    assert_eq!(me2.status(), 200);

    let status = server.terminate();
    assert!(status.success(), "exit status {status:?}");
    // the data dir lock was released: another server can start on it
    let again = Server::start(&data, &[]);
    again.terminate();
}

#[test]
fn doctor_and_help_explain_themselves() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN).args(["--data-dir", dir.path().to_str().unwrap(), "doctor"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("data directory"), "{text}");
    assert!(text.contains("sentence-embedding model"), "{text}");

    // a models dir without models: a plain message naming the fetch script
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["--data-dir", dir.path().to_str().unwrap(), "--models-dir", empty.path().to_str().unwrap(), "doctor"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("fetch-models.sh"), "{text}");

    let out = Command::new(BIN).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for word in ["serve", "admin", "doctor", "STEWARD_DATA_DIR", "--config"] {
        assert!(help.contains(word), "--help lacks {word}: {help}");
    }
    let out = Command::new(BIN).arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("steward "));

    // a bad config value is refused with a clear message
    let out = Command::new(BIN)
        .args(["--data-dir", dir.path().to_str().unwrap(), "doctor"])
        .env("CONNECTOR_ENCRYPTION_KEY", "too-short")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("CONNECTOR_ENCRYPTION_KEY"));
}

#[tokio::test(flavor = "multi_thread")]
async fn binary_answers_a_question_from_an_ingested_document() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = bootstrap(&data);
    let server = Server::start(&data, &[]);
    let http = reqwest::Client::new();
    let doc: serde_json::Value = http
        .post(format!("{}/api/v1/document/", server.base))
        .bearer_auth(&token)
        .json(&serde_json::json!({"title": "Opening hours", "content": "The library is open from 9:00 to 17:00 on weekdays. On Saturdays it opens at 10:00 and closes at 14:00."}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // wait for processing with the server-side long poll (no sleeps)
    loop {
        let p: serde_json::Value = http
            .get(format!("{}/api/v1/document/progress?waitMs=30000", server.base))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if p["idle"] == true {
            break;
        }
    }
    let r = http
        .post(format!("{}/api/v1/chat", server.base))
        .bearer_auth(&token)
        .json(&serde_json::json!({"message": "When does the library open on Saturdays?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    assert!(v["answer"].as_str().unwrap().contains("10:00"), "{v}");
    assert_eq!(v["citations"][0]["documentId"], doc["id"]);
    assert_eq!(v["answerCoverage"]["availability"], "assessed");
    assert!(server.terminate().success());
}

/// A small API client of the real binary, authenticated with a bearer token.
pub struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Api {
    pub fn new(base: &str, token: &str) -> Api {
        Api { http: reqwest::Client::new(), base: base.to_string(), token: token.to_string() }
    }

    /// One call; panics unless it succeeds; the JSON answer (null when there is none).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> serde_json::Value {
        let mut req = self.http.request(method, format!("{}{path}", self.base)).bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        let status = r.status();
        let v: serde_json::Value = r.json().await.unwrap_or(serde_json::Value::Null);
        assert!(status.is_success(), "{path}: {status} {v}");
        v
    }

    /// Applies `settings` to the default agent and publishes it; returns the agent's id.
    pub async fn configure_default_agent(&self, settings: serde_json::Value) -> String {
        use reqwest::Method;
        let agents = self.call(Method::GET, "/api/v1/agents", None).await;
        let agent = agents["agents"][0]["id"].as_str().unwrap().to_string();
        self.call(Method::PUT, &format!("/api/v1/agents/{agent}"), Some(settings)).await;
        let state = self.call(Method::GET, &format!("/api/v1/agents/{agent}/revision-state"), None).await;
        let g = state["draft"]["generation"].as_i64().unwrap();
        let cand = self
            .call(
                Method::POST,
                &format!("/api/v1/agents/{agent}/revisions/candidates"),
                Some(serde_json::json!({"expectedDraftGeneration": g})),
            )
            .await;
        let publish = serde_json::json!({"expectedDraftGeneration": g,
            "expectedPublishedRevisionId": state["publishedRevision"]["id"], "idempotencyKey": format!("e2e-{g}")});
        let path = format!("/api/v1/agents/{agent}/revisions/{}/publish", cand["id"].as_str().unwrap());
        self.call(Method::POST, &path, Some(publish)).await;
        agent
    }
}
