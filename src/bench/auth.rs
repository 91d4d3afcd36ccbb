//! `steward bench auth`: the unauthenticated paths under a flood, against a real server process.
//! 64 concurrent registrations with a bogus invitation, then 100 concurrent wrong passwords from
//! one address (distinct emails: the per-address limit binds), then 100 on one email (the
//! per-email limit binds; the server is restarted first, as the limits are per process). Reports
//! the status counts and the server's resident memory: idle, and the highest sampled during each
//! flood.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::future::join_all;
use serde_json::{Value, json};

use super::server::ChildServer;

/// The highest resident memory (MiB) of `pid` sampled every 5 ms until `stop` is set.
fn sample_peak(pid: u32, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<f64> {
    std::thread::spawn(move || {
        let mut peak: f64 = 0.0;
        while !stop.load(Ordering::Relaxed) {
            if let Some((_, rss)) = super::rss_mib(pid) {
                peak = peak.max(rss);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        peak
    })
}

/// Fires `bodies` at `path` all at once; returns the status counts, the peak RSS and the time.
async fn flood(server: &ChildServer, path: &str, bodies: Vec<Value>) -> anyhow::Result<Value> {
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_peak(server.child.id(), stop.clone());
    let started = Instant::now();
    let url = format!("{}{path}", server.base);
    let sends = bodies.into_iter().map(|b| {
        let http = server.http.clone();
        let url = url.clone();
        async move { http.post(&url).json(&b).send().await.map(|r| r.status().as_u16()) }
    });
    let results = join_all(sends).await;
    let secs = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let peak = sampler.join().map_err(|_| anyhow::anyhow!("the memory sampler failed"))?;
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for r in results {
        let key = match r {
            Ok(s) => s.to_string(),
            Err(_) => "transport_error".into(),
        };
        *counts.entry(key).or_default() += 1;
    }
    Ok(
        json!({"statuses": counts, "peakRssMiB": (peak * 10.0).round() / 10.0, "seconds": (secs * 1000.0).round() / 1000.0}),
    )
}

pub async fn run() -> anyhow::Result<Value> {
    let server = ChildServer::start(&[])?;
    server.get("/api/v1/auth/me").await?;
    let idle = server.rss().1;

    let registrations = (0..64)
        .map(|i| json!({"email": format!("flood{i}@example.com"), "password": "a long enough password", "invitationToken": "bogus"}))
        .collect();
    let register = flood(&server, "/api/v1/auth/register", registrations).await?;

    let by_address =
        (0..100).map(|i| json!({"email": format!("nobody{i}@example.com"), "password": "not the password"})).collect();
    let login_address = flood(&server, "/api/v1/auth/login", by_address).await?;

    // limits are per process: a restart gives the address its allowance back
    let server = server.restart(&[])?;
    server.get("/api/v1/auth/me").await?;
    let by_email = (0..100).map(|_| json!({"email": "bench@example.com", "password": "not the password"})).collect();
    let login_email = flood(&server, "/api/v1/auth/login", by_email).await?;
    let after = server.rss().1;
    server.stop();

    let peak =
        [&register, &login_address, &login_email].iter().filter_map(|v| v["peakRssMiB"].as_f64()).fold(idle, f64::max);
    Ok(json!({
        "idleRssMiB": (idle * 10.0).round() / 10.0,
        "peakRssMiB": peak,
        "peakOverIdleMiB": ((peak - idle) * 10.0).round() / 10.0,
        "rssAfterMiB": (after * 10.0).round() / 10.0,
        "limits": {"loginAttemptsPerAddress": 50, "loginAttemptsPerEmail": 10, "registrationsPerAddress": 20},
        "register64BogusInvitations": register,
        "login100WrongPasswordsOneAddress": login_address,
        "login100WrongPasswordsOneEmail": login_email,
    }))
}
