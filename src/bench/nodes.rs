//! Steward on PostgreSQL beside SQLite (docs/scale-out.md, "Measured"): the server time and the
//! database time of sign-in, a document upload, a search and a built-in answer turn on each
//! backend (one request at a time, real `steward serve` children); the job queue's throughput
//! with nodes of four workers each; how fast a new node builds its indexes from the database.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde_json::{Value, json};

use super::median;
use super::server::ChildServer;
use crate::app::{App, Options};
use crate::config::{Config, Secret};
use crate::jobs::{JobCtx, JobPayload, Jobs, NewJob, Outcome};

/// The four requests, each `rounds` times, on SQLite and on a new database at `postgres`: both
/// servers run side by side and each round asks one then the other, so a change in the machine's
/// state (another process, the CPU's clock) weighs on both alike.
pub async fn requests(postgres: &str, cranfield: &Path, rounds: usize) -> anyhow::Result<Value> {
    let c = super::collection::Collection::load(cranfield)?;
    let mut report = json!({});
    let url = fresh(postgres)?;
    let mut servers = Vec::new();
    for (name, env) in [("sqlite", vec![]), ("postgres", vec![("STEWARD_DATABASE_URL", url.clone())])] {
        let server = ChildServer::start(&env)?;
        // a small corpus to search and answer from
        for d in c.docs.iter().take(200) {
            server
                .send(reqwest::Method::POST, "/api/v1/document/", &json!({"title": d.title, "content": d.text}))
                .await?;
        }
        server.wait_idle().await?;
        servers.push((name, server));
    }
    let kinds = ["signIn", "upload", "search", "answer"];
    let mut figures: Vec<Vec<Vec<Timed>>> = vec![vec![Vec::new(); kinds.len()]; servers.len()];
    for i in 0..rounds {
        let q = &c.queries[i % c.queries.len()].text;
        for (s, (_, server)) in servers.iter().enumerate() {
            let login = json!({"email": "bench@example.com", "password": "bench-password"});
            figures[s][0].push(timed(server, "/api/v1/auth/login", &login, false).await?);
            let doc = json!({"title": format!("Bench note {i}"), "content": format!("Note {i}: {q}")});
            figures[s][1].push(timed(server, "/api/v1/document/", &doc, true).await?);
            // the upload's processing is not part of the next request's figures
            server.wait_idle().await?;
            figures[s][2].push(timed(server, "/api/v1/document/search", &json!({"query": q}), true).await?);
            figures[s][3].push(timed(server, "/api/v1/chat", &json!({"message": q}), true).await?);
        }
    }
    for ((name, server), per_kind) in servers.into_iter().zip(&figures) {
        let mut out = json!({});
        for (k, xs) in kinds.iter().zip(per_kind) {
            let col = |f: fn(&Timed) -> f64| median(&xs.iter().map(f).collect::<Vec<_>>());
            out[*k] = json!({"serverMs": col(|x| x.0), "dbMs": col(|x| x.1), "dbCalls": col(|x| x.2)});
            if name == "postgres" {
                out[*k]["roundTrips"] = json!(col(|x| x.3));
            }
        }
        report[name] = out;
        server.stop();
    }
    eprintln!("requests: {rounds} rounds measured on each backend");
    let mut ratio = json!({});
    for k in kinds {
        let (s, p) = (report["sqlite"][k]["serverMs"].as_f64(), report["postgres"][k]["serverMs"].as_f64());
        if let (Some(s), Some(p)) = (s, p) {
            ratio[k] = json!((p / s * 100.0).round() / 100.0);
        }
    }
    report["postgresOverSqlite"] = ratio;
    drop_fresh(&url);
    Ok(report)
}

/// A new database next to the one `url` names (its server, same credentials); returns its URL.
fn fresh(url: &str) -> anyhow::Result<String> {
    let name = format!("steward_bench_{}", crate::ids::new_id().to_lowercase().replace('-', ""));
    crate::storage::postgres::create_database(url, &name).map_err(|e| anyhow::anyhow!("{e}"))
}

/// One request: (server ms from `Server-Timing`, database ms, calls and round trips from the
/// metrics around it, less what reading the metrics costs).
async fn timed(server: &ChildServer, path: &str, body: &Value, token: bool) -> anyhow::Result<Timed> {
    let before = db_counters(server).await?;
    let mut req = server.http.post(format!("{}{path}", server.base)).json(body);
    if token {
        req = req.bearer_auth(&server.token);
    }
    let r = req.send().await?;
    anyhow::ensure!(r.status().is_success(), "POST {path}: {}", r.status());
    let ms = r
        .headers()
        .get("server-timing")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split("dur=").nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(f64::NAN);
    r.bytes().await?;
    let after = db_counters(server).await?;
    let idle = {
        let (a, b) = (db_counters(server).await?, db_counters(server).await?);
        (b.0 - a.0, b.1 - a.1, b.2 - a.2)
    };
    Ok((
        ms,
        ((after.0 - before.0) - idle.0).max(0.0) * 1000.0,
        ((after.1 - before.1) - idle.1).max(0.0),
        ((after.2 - before.2) - idle.2).max(0.0),
    ))
}

/// (`steward_db_seconds_total`, `steward_db_calls_total`, `steward_db_round_trips_total`: NaN on
/// SQLite).
async fn db_counters(server: &ChildServer) -> anyhow::Result<(f64, f64, f64)> {
    let text =
        server.http.get(format!("{}/metrics", server.base)).bearer_auth(&server.token).send().await?.text().await?;
    let read = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    Ok((read("steward_db_seconds_total"), read("steward_db_calls_total"), read("steward_db_round_trips_total")))
}

/// One request's (server ms, database ms, database calls, round trips).
type Timed = (f64, f64, f64, f64);

static RAN: AtomicUsize = AtomicUsize::new(0);

fn noop(_: &App, _: &JobCtx, _: &JobPayload) -> Outcome {
    RAN.fetch_add(1, Ordering::SeqCst);
    Outcome::Done
}

fn node(config: &Config, dir: &Path, database: Option<&str>) -> anyhow::Result<Arc<App>> {
    let mut config = Config { data_dir: dir.to_path_buf(), ..config.clone() };
    config.database = database.map(|u| Secret::new(u.to_string()));
    App::build(config, Options { extra_handlers: vec![("bench.noop", noop)], ..Options::default() })
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// `jobs` no-op jobs queued, then run by `nodes` nodes of `workers` workers each (SQLite: one
/// node). Jobs per second from the first claim to the last finish.
pub fn jobs(config: &Config, database: Option<&str>, nodes: usize, workers: usize, n: usize) -> anyhow::Result<Value> {
    let work = tempfile::tempdir()?;
    let url = database.map(fresh).transpose()?;
    let apps: Vec<Arc<App>> = (0..nodes)
        .map(|i| node(config, &work.path().join(format!("n{i}")), url.as_deref()))
        .collect::<Result<_, _>>()?;
    let first = &apps[0];
    let now = first.clock.now_ms();
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        first
            .db
            .write(|tx| {
                for i in chunk {
                    crate::jobs::enqueue_tx(tx, now, 3, &NewJob::new("bench.noop", json!({"i": i})))?;
                }
                Ok(())
            })
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    RAN.store(0, Ordering::SeqCst);
    let started = Instant::now();
    for app in &apps {
        Jobs::start(app, workers);
    }
    for app in &apps {
        anyhow::ensure!(app.jobs.wait_idle(app, std::time::Duration::from_secs(600)), "the jobs did not finish");
    }
    let seconds = started.elapsed().as_secs_f64();
    let ran = RAN.load(Ordering::SeqCst);
    anyhow::ensure!(ran == n, "{ran} of {n} jobs ran");
    for app in &apps {
        app.shutdown();
    }
    drop(apps);
    if let Some(url) = url {
        drop_fresh(&url);
    }
    Ok(
        json!({"nodes": nodes, "workersPerNode": workers, "jobs": n, "seconds": seconds, "jobsPerSecond": n as f64 / seconds}),
    )
}

fn drop_fresh(url: &str) {
    if let Some((base, name)) = url.rsplit_once('/') {
        let _ = crate::storage::postgres::drop_database(&format!("{base}/postgres"), name);
    }
}

/// Cranfield ingested through a node on a new database at `postgres`, then a new node (an empty
/// data directory) builds its indexes from the database, `runs` times: chunks per second.
pub fn catch_up(config: &Config, postgres: &str, cranfield: &Path, runs: usize) -> anyhow::Result<Value> {
    let c = super::collection::Collection::load(cranfield)?;
    let work = tempfile::tempdir()?;
    let url = fresh(postgres)?;
    let mut first = config.clone();
    first.database = Some(Secret::new(url.clone()));
    let t = Instant::now();
    let (app, _) = super::tune::ingest(&work.path().join("first"), &c, json!({}), Some(first))?;
    let ingest_s = t.elapsed().as_secs_f64();
    app.shutdown();
    drop(app);
    let mut seconds = Vec::new();
    let mut chunks = 0;
    for i in 0..runs {
        let app = node(config, &work.path().join(format!("new{i}")), Some(&url))?;
        let search = app.search().map_err(|e| anyhow::anyhow!("{e}"))?;
        chunks = search.rebuild_status().map_or(0, |r| r.total);
        let t = Instant::now();
        app.finish_search_rebuild().map_err(|e| anyhow::anyhow!("{e}"))?;
        seconds.push(t.elapsed().as_secs_f64());
        anyhow::ensure!(search.counts().0 == chunks, "rebuilt {:?} of {chunks}", search.counts());
        app.shutdown();
    }
    drop_fresh(&url);
    let s = median(&seconds);
    Ok(
        json!({"chunks": chunks, "ingestSeconds": ingest_s, "seconds": s, "runs": seconds, "chunksPerSecond": chunks as f64 / s}),
    )
}
