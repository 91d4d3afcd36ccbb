//! The log as an operator reads it from the real binary: plain text without colour codes when it
//! does not go to a terminal, one JSON object per line with `--log-format json`, the request id on
//! every request's line (errors included), and the start-up banner naming where the data, the
//! models and the logs are.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use crate::e2e::bin;

/// A `steward serve` whose stdout banner was read and whose stderr (the log), when piped, is
/// collected line by line on a thread.
pub struct Running {
    child: Child,
    pub base: String,
    /// The banner's lines after the first (`steward listening on …`).
    pub banner: Vec<String>,
    log: Option<Receiver<String>>,
    seen: Vec<String>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Running {
    /// Spawns `cmd` (stdout must be piped) and reads the banner.
    pub fn spawn(mut cmd: Command) -> Running {
        let mut child = cmd.spawn().expect("start steward");
        let log = child.stderr.take().map(|stderr| {
            let (tx, rx) = channel();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            rx
        });
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let base = line
            .trim()
            .strip_prefix("steward listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        // the banner is written in one piece with the first line
        let mut banner = Vec::new();
        for _ in 0..3 {
            let mut l = String::new();
            out.read_line(&mut l).unwrap();
            banner.push(l.trim_end().to_string());
        }
        Running { child, base, banner, log, seen: Vec::new() }
    }

    /// Waits (up to 30 s) for a log line containing every one of `needles`; returns it.
    pub fn wait_for(&mut self, needles: &[&str]) -> String {
        let log = self.log.as_ref().expect("stderr is piped");
        let deadline = Instant::now() + Duration::from_secs(30);
        if let Some(l) = self.seen.iter().find(|l| needles.iter().all(|n| l.contains(n))) {
            return l.clone();
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line =
                log.recv_timeout(left).unwrap_or_else(|_| panic!("no log line with {needles:?}: {:?}", self.seen));
            self.seen.push(line.clone());
            if needles.iter().all(|n| line.contains(n)) {
                return line;
            }
        }
    }

    /// SIGTERM, then every log line the server wrote, to its end.
    pub fn terminate(mut self) -> ExitStatus {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        self.child.wait().unwrap()
    }

    /// SIGTERM; the exit status and the whole log.
    fn stop(mut self) -> (ExitStatus, Vec<String>) {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        let status = self.child.wait().unwrap();
        let mut lines = std::mem::take(&mut self.seen);
        if let Some(log) = self.log.take() {
            // the writer's end closed with the process: the thread ends the channel
            lines.extend(log.iter());
        }
        (status, lines)
    }
}

fn serve(data: &Path, format: &str) -> Running {
    let mut cmd = Command::new(bin());
    cmd.arg("--data-dir")
        .arg(data)
        .args(["--log-format", format, "serve", "--listen", "127.0.0.1:0"])
        .env("STEWARD_LOG", "info")
        .env_remove("NO_COLOR")
        .env_remove("JOURNAL_STREAM")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Running::spawn(cmd)
}

/// Three requests that log: a success, a 404 and a 401, each with the id the client chose.
async fn requests(base: &str, tag: &str) -> [String; 3] {
    let http = reqwest::Client::new();
    let ids = [format!("{tag}-ready"), format!("{tag}-missing"), format!("{tag}-denied")];
    for (path, id, status) in
        [("/readyz", &ids[0], 200), ("/api/v1/no-such-thing", &ids[1], 404), ("/api/v1/auth/me", &ids[2], 401)]
    {
        let r = http.get(format!("{base}{path}")).header("x-request-id", id.as_str()).send().await.unwrap();
        assert_eq!(r.status(), status, "{path}");
        assert_eq!(r.headers()["x-request-id"], id.as_str());
    }
    ids
}

#[tokio::test(flavor = "multi_thread")]
async fn text_logs_to_a_pipe_are_plain_and_name_the_request_and_the_banner_says_where_things_are() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = serve(&data, "text");

    let b = &server.banner;
    assert_eq!(b[0], format!("  data:   {}", data.display()), "{b:?}");
    let models = steward::models::locate::models_dir(&steward::config::Config::with_data_dir(&data)).unwrap();
    assert_eq!(b[1], format!("  models: {}", models.display()), "{b:?}");
    assert_eq!(b[2], "  logs:   standard error; text; level info", "{b:?}");

    let ids = requests(&server.base, "text").await;
    for id in &ids {
        let line = server.wait_for(&[&format!("request_id={id}"), " request "]);
        assert!(line.contains("status="), "{line}");
    }
    let listening = server.wait_for(&["steward is listening"]);
    assert!(listening.contains(&format!("models_dir={}", models.display())), "{listening}");
    let (status, lines) = server.stop();
    assert!(status.success());
    assert!(lines.len() > 4, "{lines:?}");
    for l in &lines {
        assert!(!l.contains('\u{1b}'), "an ANSI escape in a log that is not a terminal: {l:?}");
    }
    // a line written while serving a request names it
    for l in lines.iter().filter(|l| l.contains("route=")) {
        assert!(l.contains("request_id="), "{l}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn json_logs_are_one_object_per_line_and_request_lines_carry_the_id() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = serve(&dir.path().join("data"), "json");
    assert_eq!(server.banner[2], "  logs:   standard error; json, one object per line; level info");
    let ids = requests(&server.base, "json").await;
    for id in &ids {
        server.wait_for(&[&format!("\"request_id\":\"{id}\"")]);
    }
    let (status, lines) = server.stop();
    assert!(status.success());
    let mut by_id = std::collections::HashMap::new();
    for l in &lines {
        let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
        assert!(v["timestamp"].is_string() && v["level"].is_string(), "{l}");
        if v["message"] == "request" {
            let id = v["span"]["request_id"].as_str().unwrap_or_else(|| panic!("a request line without its id: {l}"));
            by_id.insert(id.to_string(), v["status"].as_u64());
        }
    }
    assert_eq!(by_id.get(&ids[0]), Some(&Some(200)));
    assert_eq!(by_id.get(&ids[1]), Some(&Some(404)));
    assert_eq!(by_id.get(&ids[2]), Some(&Some(401)));
}
