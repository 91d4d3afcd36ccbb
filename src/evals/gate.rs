//! `steward eval run`: the regression gate an operator puts in their own CI. It asks a Steward
//! server (over its API, with a token) to run the eval suite — or to compare a candidate revision
//! with the published one — waits for it, prints each case, optionally writes JUnit XML, and
//! exits non-zero when a case regressed or the pass rate is under the bar.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

/// What to run and what passes.
#[derive(Debug, Clone, clap::Args)]
pub struct GateArgs {
    /// The Steward server, e.g. https://steward.example.com.
    #[arg(long, env = "STEWARD_SERVER", value_name = "URL")]
    pub server: String,
    /// A personal token or service credential with workspace.agents.manage.
    #[arg(long, env = "STEWARD_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    pub token: String,
    /// The workspace (default: the token's own).
    #[arg(long, value_name = "ID")]
    pub workspace: Option<String>,
    /// Only this agent's cases (needed with --revision).
    #[arg(long, value_name = "ID")]
    pub agent: Option<String>,
    /// Run against this candidate revision, compared with the published one.
    #[arg(long, value_name = "ID", requires = "agent")]
    pub revision: Option<String>,
    /// retrieval_only or full_assistant.
    #[arg(long, default_value = "full_assistant")]
    pub mode: String,
    /// Only these cases (comma-separated ids).
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub cases: Option<Vec<String>>,
    /// Run each case this many times (1–5).
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Passes of `repeat` a case needs (default: a majority).
    #[arg(long)]
    pub pass_threshold: Option<u32>,
    /// Fail when the pass rate over the scored cases run is below this (0–1).
    #[arg(long, value_name = "RATE")]
    pub min_pass_rate: Option<f64>,
    /// Write JUnit XML here.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Give up waiting after this many seconds.
    #[arg(long, default_value_t = 3600)]
    pub timeout_secs: u64,
}

struct Client {
    http: reqwest::blocking::Client,
    base: String,
    token: String,
    workspace: Option<String>,
}

impl Client {
    fn send(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> anyhow::Result<Value> {
        let mut req = self.http.request(method, format!("{}{path}", self.base)).bearer_auth(&self.token);
        if let Some(ws) = &self.workspace {
            req = req.header("x-workspace-id", ws);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().with_context(|| format!("could not reach {}", self.base))?;
        let status = resp.status();
        let v: Value = resp.json().unwrap_or(Value::Null);
        if !status.is_success() {
            let msg = v["error"]["message"].as_str().unwrap_or("no error message");
            bail!("{path}: {status}: {msg}");
        }
        Ok(v)
    }
}

/// The outcome the gate judges: every case of the run, the regressions and the pass rate.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub results: Vec<Value>,
    pub regressed: Vec<Value>,
    pub pass_rate: Option<f64>,
    pub label: String,
}

impl Verdict {
    /// Why the gate fails, if it does.
    pub fn failures(&self, min_pass_rate: Option<f64>) -> Vec<String> {
        let mut out = Vec::new();
        for r in &self.regressed {
            out.push(format!("regressed: {} ({} → {})", r["name"].as_str().unwrap_or("?"), r["before"], r["after"]));
        }
        if let (Some(min), rate) = (min_pass_rate, self.pass_rate) {
            let rate = rate.unwrap_or(0.0);
            if rate < min {
                out.push(format!("pass rate {:.1}% is below {:.1}%", rate * 100.0, min * 100.0));
            }
        }
        out
    }
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // characters XML 1.0 cannot carry at all
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// The run as JUnit XML: one test case per eval case; a failure for `fail`, an error for
/// `error`, skipped for cases without assertions; regressions named in the failure message.
pub fn junit(v: &Verdict) -> String {
    let count = |s: &str| v.results.iter().filter(|r| r["status"] == s).count();
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    xml.push_str(&format!(
        "<testsuites name=\"steward evals\">\n  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">\n",
        escape(&v.label),
        v.results.len(),
        count("fail"),
        count("error"),
        count("skipped")
    ));
    for r in &v.results {
        let id = r["caseId"].as_str().unwrap_or_default();
        let name = r["name"].as_str().unwrap_or(id);
        let reason = r["reason"].as_str().unwrap_or_default();
        let regressed = v.regressed.iter().any(|x| x["caseId"] == id);
        xml.push_str(&format!("    <testcase classname=\"steward.evals\" name=\"{} ({})\">", escape(name), escape(id)));
        match r["status"].as_str() {
            Some("fail") => {
                let tag = if regressed { "regressed: " } else { "" };
                xml.push_str(&format!("<failure message=\"{}{}\"/>", tag, escape(reason)));
            }
            Some("error") => xml.push_str(&format!("<error message=\"{}\"/>", escape(reason))),
            Some("skipped") => xml.push_str(&format!("<skipped message=\"{}\"/>", escape(reason))),
            _ => {}
        }
        if r["flaky"] == true {
            xml.push_str("<system-out>flaky: its repeats disagreed</system-out>");
        }
        xml.push_str("</testcase>\n");
    }
    xml.push_str("  </testsuite>\n</testsuites>\n");
    xml
}

fn wait_suite(c: &Client, path: &str, deadline: Instant, done: impl Fn(&Value) -> bool) -> anyhow::Result<Value> {
    loop {
        let v = c.send(reqwest::Method::GET, &format!("{path}?waitMs=20000"), None)?;
        if done(&v) {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            bail!("the eval run did not finish in time");
        }
    }
}

fn run_remote(a: &GateArgs) -> anyhow::Result<Verdict> {
    let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(120)).build()?;
    let c = Client {
        http,
        base: a.server.trim_end_matches('/').to_string(),
        token: a.token.clone(),
        workspace: a.workspace.clone(),
    };
    let deadline = Instant::now() + Duration::from_secs(a.timeout_secs);
    let mut body = json!({"mode": a.mode, "repeat": a.repeat});
    if let Some(k) = a.pass_threshold {
        body["passThreshold"] = json!(k);
    }
    if let Some(ids) = &a.cases {
        body["caseIds"] = json!(ids);
    }
    if let (Some(agent), Some(rev)) = (&a.agent, &a.revision) {
        body["revisionIds"] = json!([rev]);
        body["executionPolicy"] = json!("safe_test");
        let started = c.send(reqwest::Method::POST, &format!("/api/v1/agents/{agent}/eval-runs"), Some(&body))?;
        let id = started["id"].as_str().context("no comparison id")?;
        let v =
            wait_suite(&c, &format!("/api/v1/agents/{agent}/eval-runs/{id}"), deadline, |v| v["status"] != "running")?;
        if v["status"] == "failed" {
            bail!("the comparison failed on the server");
        }
        let cand = v["sides"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["side"] == "candidate")
            .cloned()
            .unwrap_or(Value::Null);
        return Ok(Verdict {
            results: cand["results"].as_array().cloned().unwrap_or_default(),
            regressed: v["regressions"]["regressed"].as_array().cloned().unwrap_or_default(),
            pass_rate: cand["runSummary"]["passRate"].as_f64(),
            label: format!("candidate {rev} against the published revision"),
        });
    }
    if let Some(agent) = &a.agent {
        body["agentId"] = json!(agent);
    }
    body["wait"] = json!(false);
    let started = c.send(reqwest::Method::POST, "/api/v1/evals/cases/run", Some(&body))?;
    let id = started["id"].as_str().context("no suite id")?;
    let v = wait_suite(&c, &format!("/api/v1/evals/suites/{id}"), deadline, |v| {
        v["status"] == "completed" || v["status"] == "failed"
    })?;
    if v["status"] == "failed" {
        bail!("the suite failed on the server: {}", v["error"].as_str().unwrap_or("no reason given"));
    }
    Ok(Verdict {
        results: v["results"].as_array().cloned().unwrap_or_default(),
        regressed: v["regressions"]["regressed"].as_array().cloned().unwrap_or_default(),
        pass_rate: v["runSummary"]["passRate"].as_f64(),
        label: format!("suite {id}"),
    })
}

/// Runs the gate: 0 when it passes, 1 when it fails (regression or pass rate), 2 when it could
/// not run.
#[allow(clippy::print_stdout, clippy::print_stderr, reason = "a command-line tool reports on the terminal")]
pub fn run(a: &GateArgs) -> u8 {
    if let Some(m) = a.min_pass_rate
        && !(0.0..=1.0).contains(&m)
    {
        eprintln!("--min-pass-rate must be between 0 and 1");
        return 2;
    }
    let v = match run_remote(a) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("steward eval run: {e:#}");
            return 2;
        }
    };
    for r in &v.results {
        let flaky = if r["flaky"] == true { " (flaky)" } else { "" };
        println!(
            "{:<8} {}{}  {}",
            r["status"].as_str().unwrap_or("?"),
            r["name"].as_str().unwrap_or_default(),
            flaky,
            r["reason"].as_str().unwrap_or_default()
        );
    }
    match v.pass_rate {
        Some(p) => println!("pass rate {:.1}% over {} cases", p * 100.0, v.results.len()),
        None => println!("no scored case ran"),
    }
    if let Some(path) = &a.junit
        && let Err(e) = std::fs::write(path, junit(&v))
    {
        eprintln!("could not write {}: {e}", path.display());
        return 2;
    }
    let failures = v.failures(a.min_pass_rate);
    for f in &failures {
        println!("FAILED: {f}");
    }
    if failures.is_empty() { 0 } else { 1 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn verdict(names: &[&str]) -> Verdict {
        Verdict {
            results: names
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    let status = ["pass", "fail", "error", "skipped"][i % 4];
                    json!({"caseId": format!("c{i}"), "name": n, "status": status, "reason": n})
                })
                .collect(),
            regressed: vec![
                json!({"caseId": "c1", "name": names.get(1).copied().unwrap_or(""), "before": "pass", "after": "fail"}),
            ],
            pass_rate: Some(0.5),
            label: "suite <1>".into(),
        }
    }

    #[test]
    fn junit_counts_and_marks_regressions() {
        let x = junit(&verdict(&["a", "b & <c>", "d", "e"]));
        assert!(x.contains("tests=\"4\" failures=\"1\" errors=\"1\" skipped=\"1\""));
        assert!(x.contains("<failure message=\"regressed: b &amp; &lt;c&gt;\"/>"));
        assert!(x.contains("name=\"suite &lt;1&gt;\""));
    }

    #[test]
    fn the_gate_fails_on_a_regression_or_a_low_pass_rate() {
        let mut v = verdict(&["a", "b"]);
        assert_eq!(v.failures(None).len(), 1);
        v.regressed.clear();
        assert!(v.failures(Some(0.5)).is_empty());
        assert_eq!(v.failures(Some(0.9)).len(), 1);
        v.pass_rate = None;
        assert_eq!(v.failures(Some(0.1)).len(), 1);
    }

    proptest! {
        #[test]
        fn junit_is_well_formed_xml_for_any_text(name in crate::testkit::hostile_text(12), reason in crate::testkit::hostile_text(12)) {
            let v = Verdict {
                results: vec![json!({"caseId": "c0", "name": name, "status": "fail", "reason": reason})],
                regressed: vec![],
                pass_rate: None,
                label: name.clone(),
            };
            let x = junit(&v);
            let mut r = quick_xml::Reader::from_str(&x);
            loop {
                match r.read_event() {
                    Ok(quick_xml::events::Event::Eof) => break,
                    Ok(_) => {}
                    Err(e) => prop_assert!(false, "{e}: {x}"),
                }
            }
        }
    }
}
