//! Prometheus text metrics: HTTP requests by route and status with latency histograms, job queue
//! depth by kind and state, busy workers. Counters live in memory; queue depth is read at scrape.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

use parking_lot::Mutex;

const BUCKETS: [f64; 13] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

#[derive(Default)]
pub struct Metrics {
    http: Mutex<BTreeMap<(String, String, u16), Histogram>>,
}

impl Metrics {
    pub fn record_request(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        let mut m = self.http.lock();
        let h = m.entry((method.to_string(), route.to_string(), status)).or_default();
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                h.counts[i] += 1;
            }
        }
        h.sum += secs;
        h.count += 1;
    }

    /// Renders every metric in the Prometheus text exposition format.
    pub fn render(&self, app: &crate::app::App) -> String {
        let mut out = String::new();
        out.push_str("# HELP steward_http_requests_total HTTP requests by method, route and status.\n");
        out.push_str("# TYPE steward_http_requests_total counter\n");
        let m = self.http.lock();
        for ((method, route, status), h) in m.iter() {
            let _ = writeln!(
                out,
                "steward_http_requests_total{{method=\"{method}\",route=\"{}\",status=\"{status}\"}} {}",
                escape(route),
                h.count
            );
        }
        out.push_str("# HELP steward_http_request_duration_seconds HTTP request latency.\n");
        out.push_str("# TYPE steward_http_request_duration_seconds histogram\n");
        for ((method, route, status), h) in m.iter() {
            let labels = format!("method=\"{method}\",route=\"{}\",status=\"{status}\"", escape(route));
            for (i, b) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "steward_http_request_duration_seconds_bucket{{{labels},le=\"{b}\"}} {}",
                    h.counts[i]
                );
            }
            let _ = writeln!(out, "steward_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}", h.count);
            let _ = writeln!(out, "steward_http_request_duration_seconds_sum{{{labels}}} {}", h.sum);
            let _ = writeln!(out, "steward_http_request_duration_seconds_count{{{labels}}} {}", h.count);
        }
        drop(m);
        let (calls, seconds) = app.db.busy();
        out.push_str("# HELP steward_db_calls_total Database calls (reads and write transactions).\n");
        out.push_str("# TYPE steward_db_calls_total counter\n");
        let _ = writeln!(out, "steward_db_calls_total {calls}");
        out.push_str("# HELP steward_db_seconds_total Wall time spent in database calls, waits included.\n");
        out.push_str("# TYPE steward_db_seconds_total counter\n");
        let _ = writeln!(out, "steward_db_seconds_total {seconds}");
        if let Some(trips) = app.db.round_trips() {
            out.push_str("# HELP steward_db_round_trips_total Round trips to PostgreSQL (statements, preparations, transaction control).\n");
            out.push_str("# TYPE steward_db_round_trips_total counter\n");
            let _ = writeln!(out, "steward_db_round_trips_total {trips}");
        }
        out.push_str("# HELP steward_jobs Jobs in the durable queue by kind and state.\n");
        out.push_str("# TYPE steward_jobs gauge\n");
        if let Ok(depth) = crate::jobs::queue_depth(app) {
            for d in depth {
                let _ = writeln!(out, "steward_jobs{{kind=\"{}\",state=\"{}\"}} {}", escape(&d.kind), d.state, d.count);
            }
        }
        out.push_str("# HELP steward_workers_busy Worker threads running a job now.\n");
        out.push_str("# TYPE steward_workers_busy gauge\n");
        let _ = writeln!(out, "steward_workers_busy {}", app.jobs.busy());
        out.push_str("# HELP steward_workers Worker threads alive.\n");
        out.push_str("# TYPE steward_workers gauge\n");
        let _ = writeln!(out, "steward_workers {}", app.jobs.workers_alive());
        let rebuild = app.search().ok().and_then(|s| s.rebuild_status());
        out.push_str("# HELP steward_search_rebuild_chunks A running rebuild of the search indexes: chunks done and to do (0 when none runs).\n");
        out.push_str("# TYPE steward_search_rebuild_chunks gauge\n");
        let (done, total) = rebuild.map_or((0, 0), |r| (r.done.min(r.total), r.total));
        let _ = writeln!(out, "steward_search_rebuild_chunks{{state=\"done\"}} {done}");
        let _ = writeln!(out, "steward_search_rebuild_chunks{{state=\"total\"}} {total}");
        out.push_str("# HELP steward_uptime_seconds Seconds since the server started.\n");
        out.push_str("# TYPE steward_uptime_seconds gauge\n");
        let _ = writeln!(out, "steward_uptime_seconds {}", app.started_at.elapsed().as_secs());
        out
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
