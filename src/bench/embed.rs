//! Raw embedding throughput of the local model, outside the ingestion pipeline.

use std::time::Instant;

use crate::config::Config;
use crate::models::embed::Embedder;

pub struct EmbedReport {
    pub texts: usize,
    pub tokens: usize,
    pub runs_secs: Vec<f64>,
    /// One query at a time on the query session (milliseconds, after a warm-up pass).
    pub query_ms: Vec<f64>,
}

/// Embeds every Cranfield document (`title` + `body`) `runs` times, then each query alone.
pub fn run(config: &Config, texts: &[String], queries: &[String], runs: usize) -> anyhow::Result<EmbedReport> {
    let files = crate::models::locate::embedding(config).map_err(|m| anyhow::anyhow!("{m}"))?;
    let embedder = Embedder::load(
        &files,
        config.embed_threads,
        crate::models::embed::Space::of(&crate::models::embed::MINILM, config.embed_max_tokens),
    )?;
    let refs: Vec<&str> = texts.iter().map(|s| s.as_str()).collect();
    // warm up
    embedder.embed(&refs[..refs.len().min(64)])?;
    let mut runs_secs = Vec::new();
    let mut tokens = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let out = embedder.embed(&refs)?;
        runs_secs.push(t.elapsed().as_secs_f64());
        tokens = out.tokens;
    }
    let mut query_ms = Vec::new();
    for pass in 0..2 {
        for q in queries {
            let t = Instant::now();
            embedder.embed_query(q)?;
            if pass == 1 {
                query_ms.push(t.elapsed().as_secs_f64() * 1000.0);
            }
        }
    }
    Ok(EmbedReport { texts: texts.len(), tokens, runs_secs, query_ms })
}
