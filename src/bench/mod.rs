//! `steward bench …`: the benchmarks behind the figures in docs/performance.md.
#![allow(clippy::print_stdout, reason = "benchmarks print their reports")]

pub mod api;
pub mod auth;
pub mod backup;
pub mod bundle;
pub mod chat;
pub mod collection;
pub mod command;
pub mod connectors;
pub mod converse;
pub mod cranfield;
pub mod crawl;
pub mod embed;
pub mod evals;
pub mod knowledge;
pub mod models;
pub mod nodes;
pub mod plain;
pub mod public_chat;
pub mod retrieval;
pub mod routines;
pub mod server;
pub mod tune;
pub mod usage;
pub mod wordpress;

use std::path::PathBuf;

/// A fixed-seed xorshift64 sequence: reproducible pseudo-random choices for generated corpora
/// and bootstrap resampling.
pub fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// Median of `xs` (sorted copy).
pub fn median(xs: &[f64]) -> f64 {
    percentile(xs, 50.0)
}

/// Nearest-rank percentile of `xs`.
pub fn percentile(xs: &[f64], p: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

/// Where the Cranfield collection is by default (the shared bench data beside the checkout).
pub fn default_cranfield_dir() -> PathBuf {
    PathBuf::from("../shared/bench/cranfield")
}

/// Peak and current resident memory of a process, in MiB, from /proc.
pub fn rss_mib(pid: u32) -> Option<(f64, f64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<f64> {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map(|kb| kb / 1024.0)
    };
    Some((field("VmHWM:")?, field("VmRSS:")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let xs: Vec<f64> = (1..=100).map(|x| x as f64).collect();
        assert_eq!(median(&xs), 50.0);
        assert_eq!(percentile(&xs, 95.0), 95.0);
        assert_eq!(percentile(&xs, 99.0), 99.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    }
}
