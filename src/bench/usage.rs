//! `steward bench usage`: what enforcing usage limits costs an answer. One child server with a
//! small corpus answers through the REST chat route (a new conversation each, the built-in
//! answerer, so the model's time does not drown the difference); rounds alternate between the
//! account unlimited (no profile) and capped far away (a profile whose answer limit is never
//! reached, so every answer takes and settles a reservation). Reported per side: the server
//! time of a turn (p50/p95 of `diagnostics.durationMs`, which starts before the reservation and
//! ends after the settling commit) over sequential answers, and answers per second at 64
//! concurrent requests; medians over the rounds. `in_process` times the enforcement alone (reserve
//! and settle against the reply's transaction) with no HTTP or turn around it.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};

use super::server::ChildServer;
use super::{median, percentile};

const ADMIN: &str = "bench-usage-admin";

const TOPICS: [(&str, &str); 8] = [
    (
        "Shipping",
        "Standard shipping takes two to four working days. Express shipping arrives the next working day when ordered before noon.",
    ),
    (
        "Returns",
        "Items can be returned within 30 days of delivery for a full refund, unworn and with their labels attached.",
    ),
    ("Care", "Wash linen at 40 degrees, inside out, and dry it flat in the shade. Iron while still slightly damp."),
    ("Warranty", "Every bag carries a two year warranty against defects in stitching, zips and hardware."),
    ("Sizing", "Our shirts run true to size; between two sizes, choose the larger for a relaxed fit."),
    ("Payments", "We accept cards, bank transfers and invoices for business customers with an approved account."),
    ("Repairs", "Send a damaged item to our workshop and we repair it free of charge within the warranty period."),
    ("Stores", "Our stores in Utrecht and Ghent open from ten to six, Monday to Saturday."),
];

const QUESTIONS: [&str; 8] = [
    "How long does standard shipping take?",
    "Can I return an item after three weeks?",
    "How should I wash linen?",
    "How long is the warranty on bags?",
    "Do your shirts run small?",
    "Which payment methods do you accept?",
    "Do you repair damaged items?",
    "When are the stores open?",
];

async fn answer(s: &ChildServer, i: usize) -> anyhow::Result<f64> {
    let body = json!({"message": QUESTIONS[i % QUESTIONS.len()]});
    let v = s.send(reqwest::Method::POST, "/api/v1/chat", &body).await?;
    Ok(v["diagnostics"]["durationMs"].as_f64().unwrap_or(f64::NAN))
}

/// Server times of `n` sequential answers.
async fn sequential(s: &ChildServer, n: usize) -> anyhow::Result<Vec<f64>> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        out.push(answer(s, i).await?);
    }
    Ok(out)
}

/// Answers per second with `concurrency` requests in flight until `total` are answered.
async fn throughput(s: &Arc<ChildServer>, concurrency: usize, total: usize) -> anyhow::Result<f64> {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (s, next) = (s.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= total {
                    return anyhow::Ok(());
                }
                answer(&s, i).await?;
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

/// One side's per-round figures.
struct Side {
    name: &'static str,
    p50: Vec<f64>,
    p95: Vec<f64>,
    rate: Vec<f64>,
}

impl Side {
    fn new(name: &'static str) -> Side {
        Side { name, p50: vec![], p95: vec![], rate: vec![] }
    }
}

async fn set_profile(s: &ChildServer, org: &str, key: Option<&str>) -> anyhow::Result<()> {
    let r = s
        .http
        .put(format!("{}/api/v1/ee/usage-limits/accounts/{org}", s.base))
        .bearer_auth(ADMIN)
        .json(&json!({"profileKey": key}))
        .send()
        .await?;
    anyhow::ensure!(r.status().is_success(), "assigning the profile: {}", r.status());
    Ok(())
}

/// Runs the benchmark: `rounds` alternating rounds of `sequential` answers and `total` answers
/// at `concurrency`.
pub async fn run(rounds: usize, sequential_n: usize, concurrency: usize, total: usize) -> anyhow::Result<Value> {
    let s = Arc::new(ChildServer::start(&[("EE_USAGE_ADMIN_TOKEN", ADMIN.to_string())])?);
    for (title, content) in TOPICS {
        s.send(reqwest::Method::POST, "/api/v1/document/", &json!({"title": title, "content": content})).await?;
    }
    s.wait_idle().await?;
    let org = s.get("/api/v1/auth/me").await?["organization"]["id"].as_str().unwrap_or_default().to_string();
    let r = s
        .http
        .put(format!("{}/api/v1/ee/usage-limits/profiles/far-away", s.base))
        .bearer_auth(ADMIN)
        .json(&json!({"displayName": "Far away", "monthlyAnswerLimit": 1_000_000_000i64, "storedDocumentLimit": null}))
        .send()
        .await?;
    anyhow::ensure!(r.status().is_success(), "creating the profile: {}", r.status());
    // warm up both paths
    sequential(&s, 20).await?;
    let mut sides = [Side::new("unlimited"), Side::new("capped")];
    for round in 0..rounds {
        for side in 0..2 {
            // alternate which side goes first, so drift favours neither
            let side = if round % 2 == 0 { side } else { 1 - side };
            set_profile(&s, &org, (side == 1).then_some("far-away")).await?;
            let times = sequential(&s, sequential_n).await?;
            let rate = throughput(&s, concurrency, total).await?;
            let entry = &mut sides[side];
            entry.p50.push(median(&times));
            entry.p95.push(percentile(&times, 95.0));
            entry.rate.push(rate);
        }
    }
    let report = |s: &Side| {
        json!({"side": s.name, "serverP50Ms": median(&s.p50), "serverP95Ms": median(&s.p95),
               "answersPerSecond": median(&s.rate), "rounds": {"p50": s.p50, "p95": s.p95, "answersPerSecond": s.rate}})
    };
    let (u, c) = (&sides[0], &sides[1]);
    let usage: Value = s
        .http
        .get(format!("{}/api/v1/ee/usage-limits/accounts/{org}/usage", s.base))
        .bearer_auth(ADMIN)
        .send()
        .await?
        .json()
        .await?;
    Ok(json!({
        "machine": {"cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)},
        "rounds": rounds, "sequentialPerRound": sequential_n, "concurrency": concurrency, "concurrentPerRound": total,
        "unlimited": report(u),
        "capped": report(c),
        "addedP50Ms": median(&c.p50) - median(&u.p50),
        "addedP95Ms": median(&c.p95) - median(&u.p95),
        "throughputRatio": median(&c.rate) / median(&u.rate),
        "answersMetered": usage["monthlyAnswers"]["used"],
    }))
}

/// Microseconds per call of `f`, `n` times.
fn samples(n: usize, f: impl Fn() -> crate::error::Result<()>) -> anyhow::Result<Vec<f64>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f()?;
        out.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok(out)
}

/// The enforcement's own cost per answer, in process on a fresh data directory: reserving (a read
/// of the account; with a profile, the meter's read and the check under the ledger's lock) plus
/// settling inside the reply's write transaction, less that transaction alone. `n` answers per side.
pub fn in_process(n: usize) -> anyhow::Result<Value> {
    use crate::usage::limits::{self, AnswerKind, AnswerWork, profiles};
    let dir = tempfile::tempdir()?;
    let config = crate::config::Config::with_data_dir(dir.path().join("data"));
    let clock: Arc<dyn crate::clock::Clock> = Arc::new(crate::clock::SystemClock);
    let app =
        crate::app::App::build(config, crate::app::Options { clock, extra_handlers: vec![], lock_data_dir: true })?;
    let b = crate::auth::accounts::bootstrap(&app, "bench@example.com", "bench-password", None, false)?;
    let (ws, org) = (b.workspace.id.0.clone(), b.organization.id.0.clone());
    let work = AnswerWork { workspace: &ws, agent: "bench", conversation: None, kind: AnswerKind::Standalone };
    let answer = || {
        let mut h = limits::reserve_answer(&app, &work)?;
        app.db.write(|tx| h.settle(&app, tx, Default::default()))?;
        h.committed();
        Ok(())
    };
    let empty = || app.db.write(|_| Ok(()));
    let side = |name: &str| -> anyhow::Result<Value> {
        samples(n / 10, answer)?;
        let (mut with, mut without) = (Vec::new(), Vec::new());
        for _ in 0..10 {
            with.extend(samples(n / 10, answer)?);
            without.extend(samples(n / 10, empty)?);
        }
        Ok(json!({"side": name, "answerP50Us": median(&with), "answerP95Us": percentile(&with, 95.0),
            "writeAloneP50Us": median(&without), "writeAloneP95Us": percentile(&without, 95.0),
            "addedP50Us": median(&with) - median(&without), "addedP95Us": percentile(&with, 95.0) - percentile(&without, 95.0)}))
    };
    let unlimited = side("unlimited")?;
    let input = profiles::ProfileInput {
        display_name: Some("Far away".into()),
        monthly_answer_limit: Some(Some(1_000_000_000)),
        stored_document_limit: Some(None),
        ..Default::default()
    };
    profiles::put_profile(&app, "far-away", input)?;
    profiles::assign(&app, &org, Some("far-away"))?;
    let capped = side("capped")?;
    Ok(json!({"answersPerSide": n, "unlimited": unlimited, "capped": capped}))
}
