//! Models: where their files are, the local sentence embedder (ONNX Runtime) and, in later
//! modules, chat models behind one trait.

pub mod embed;
pub mod locate;

/// Chat-model provider ids, as the API writes them.
pub const PROVIDERS: &[&str] = &["openai", "openai-compatible", "claude", "gemini", "local"];

use std::sync::{Arc, OnceLock};

use crate::config::Config;
use crate::error::{Error, Result};
use embed::Embedder;

/// The models an `App` uses, loaded on first use (or at start by `App::start_background`).
pub struct Models {
    config: Config,
    embedder: OnceLock<std::result::Result<Arc<Embedder>, String>>,
}

impl Models {
    pub fn new(config: &Config) -> Models {
        Models { config: config.clone(), embedder: OnceLock::new() }
    }

    /// The sentence embedder, loading it on first call. A missing or broken model is a 503 with a
    /// message naming the files and the fix.
    pub fn embedder(&self) -> Result<Arc<Embedder>> {
        let r = self.embedder.get_or_init(|| {
            let files = locate::embedding(&self.config).map_err(|m| m.to_string())?;
            let started = std::time::Instant::now();
            let e = Embedder::load(&files, self.config.embed_threads, self.config.embed_max_tokens).map_err(|e| format!("{e}; {}", locate::FETCH_HINT))?;
            tracing::info!(model = %files.onnx.display(), ms = started.elapsed().as_millis() as u64, "embedding model loaded");
            Ok(e)
        });
        r.clone().map_err(|m| {
            Error::unavailable(format!("the embedding model is not available: {m}"))
                .with_details(serde_json::json!({"code": "embedding_model_unavailable"}))
        })
    }

    /// The embedder's state without loading it: `None` before the first attempt.
    pub fn embedder_status(&self) -> Option<std::result::Result<(), String>> {
        self.embedder.get().map(|r| r.as_ref().map(|_| ()).map_err(|e| e.clone()))
    }
}
