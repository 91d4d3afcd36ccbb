//! A `steward serve` child process on a fresh data directory, driven over HTTP like a user would.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

pub struct ChildServer {
    pub child: Child,
    pub base: String,
    pub token: String,
    pub dir: tempfile::TempDir,
    pub http: reqwest::Client,
}

/// A benchmark that fails stops its server with it (its data directory goes with the TempDir).
impl Drop for ChildServer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn exe() -> anyhow::Result<PathBuf> {
    Ok(std::env::current_exe()?)
}

impl ChildServer {
    /// Bootstraps an owner and starts the server; `env` is added to the child's environment.
    pub fn start(env: &[(&str, String)]) -> anyhow::Result<ChildServer> {
        let dir = tempfile::tempdir()?;
        let data = dir.path().join("data");
        let out = Command::new(exe()?)
            .args([
                "--data-dir",
                data.to_str().unwrap_or_default(),
                "admin",
                "bootstrap",
                "--email",
                "bench@example.com",
                "--password",
                "bench-password",
                "--print-token",
            ])
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .output()?;
        anyhow::ensure!(out.status.success(), "bootstrap failed: {}", String::from_utf8_lossy(&out.stderr));
        let token = String::from_utf8(out.stdout)?.trim().to_string();
        let (child, base) = spawn_serve(&data, env)?;
        let http = reqwest::Client::builder().pool_max_idle_per_host(64).build()?;
        Ok(ChildServer { child, base, token, dir, http })
    }

    /// Stops the server and starts it again on the same data directory with `env`.
    pub fn restart(mut self, env: &[(&str, String)]) -> anyhow::Result<ChildServer> {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let _ = self.child.wait();
        let (child, base) = spawn_serve(&self.data_dir(), env)?;
        self.child = child;
        self.base = base;
        Ok(self)
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        let r = self.http.get(format!("{}{path}", self.base)).bearer_auth(&self.token).send().await?;
        let status = r.status();
        let v: Value = r.json().await?;
        anyhow::ensure!(status.is_success(), "GET {path}: {status} {v}");
        Ok(v)
    }

    pub async fn send(&self, method: reqwest::Method, path: &str, body: &Value) -> anyhow::Result<Value> {
        let r = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await?;
        success(&method, path, r).await
    }

    /// Like [`send`](Self::send), signed in as the bootstrap owner with a dashboard session (the
    /// session-only settings routes refuse the token).
    pub async fn send_session(&self, method: reqwest::Method, path: &str, body: &Value) -> anyhow::Result<Value> {
        let login = self
            .http
            .post(format!("{}/api/v1/auth/login", self.base))
            .json(&serde_json::json!({"email": "bench@example.com", "password": "bench-password"}))
            .send()
            .await?;
        anyhow::ensure!(login.status().is_success(), "sign-in failed: {}", login.status());
        let cookie = login
            .headers()
            .get_all(reqwest::header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok()?.split(';').next().map(str::to_string))
            .collect::<Vec<_>>()
            .join("; ");
        let r = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .header(reqwest::header::COOKIE, cookie)
            .header(reqwest::header::ORIGIN, &self.base)
            .json(body)
            .send()
            .await?;
        success(&method, path, r).await
    }

    /// Waits (server-side long poll) until nothing is queued or processing.
    pub async fn wait_idle(&self) -> anyhow::Result<Value> {
        loop {
            let p = self.get("/api/v1/document/progress?waitMs=60000").await?;
            if p["idle"] == true {
                return Ok(p);
            }
        }
    }

    /// (peak, current) resident memory in MiB.
    pub fn rss(&self) -> (f64, f64) {
        super::rss_mib(self.child.id()).unwrap_or((f64::NAN, f64::NAN))
    }

    pub fn stop(mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let _ = self.child.wait();
    }
}

/// The JSON body of a successful response, or an error naming the request, status and body.
async fn success(method: &reqwest::Method, path: &str, r: reqwest::Response) -> anyhow::Result<Value> {
    let status = r.status();
    let v: Value = r.json().await?;
    anyhow::ensure!(status.is_success(), "{method} {path}: {status} {v}");
    Ok(v)
}

/// Starts `steward serve` on `data` (port chosen by the OS); returns the child and its base URL.
fn spawn_serve(data: &Path, env: &[(&str, String)]) -> anyhow::Result<(Child, String)> {
    let mut cmd = Command::new(exe()?);
    cmd.args(["--data-dir", data.to_str().unwrap_or_default(), "serve", "--listen", "127.0.0.1:0"])
        .env("STEWARD_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn()?;
    let mut line = String::new();
    #[allow(clippy::expect_used, reason = "stdout is piped by the spawn above")]
    BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
    let base = line
        .trim()
        .strip_prefix("steward listening on ")
        .ok_or_else(|| anyhow::anyhow!("unexpected output {line:?}"))?
        .to_string();
    Ok((child, base))
}

pub fn path_str(p: &Path) -> String {
    p.display().to_string()
}
