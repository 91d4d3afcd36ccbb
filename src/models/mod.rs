//! Models: where their files are, the local sentence embedder (ONNX Runtime), chat models behind
//! one trait (`chat`), which model serves a job (`resolve`), and the built-in extractive answerer.

pub mod chat;
pub mod embed;
pub mod extractive;
pub mod kernels;
pub mod locate;
pub mod resolve;

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
    /// Embedders of other spaces (a workspace on the multilingual model, a re-embedding), by id.
    spaces: parking_lot::Mutex<std::collections::HashMap<String, Arc<Embedder>>>,
    /// The local GGUF chat model, loaded on first use and kept.
    local: parking_lot::Mutex<Option<Arc<dyn chat::ChatModel>>>,
}

impl Models {
    pub fn new(config: &Config) -> Models {
        Models {
            config: config.clone(),
            embedder: OnceLock::new(),
            spaces: Default::default(),
            local: parking_lot::Mutex::new(None),
        }
    }

    /// The default space: MiniLM at `embed_max_tokens` (its model card's 256 unless configured).
    pub fn default_space(&self) -> embed::Space {
        embed::Space::of(&embed::MINILM, self.config.embed_max_tokens)
    }

    /// The space a model runs in here: its model card's limit (MiniLM: `embed_max_tokens`).
    pub fn space_of(&self, model: &'static embed::ModelSpec) -> embed::Space {
        if model.id == embed::MINILM.id { self.default_space() } else { embed::Space::of(model, model.max_tokens) }
    }

    /// The sentence embedder of the default space, loading it on first call. A missing or broken
    /// model is a 503 with a message naming the files and the fix.
    pub fn embedder(&self) -> Result<Arc<Embedder>> {
        let r = self.embedder.get_or_init(|| {
            let files = locate::embedding(&self.config).map_err(|m| m.to_string())?;
            let started = std::time::Instant::now();
            let e = Embedder::load(&files, self.config.embed_threads, self.default_space())
                .map_err(|e| format!("{e}; {}", locate::FETCH_HINT))?;
            tracing::info!(model = %files.onnx.display(), ms = started.elapsed().as_millis() as u64, "embedding model loaded");
            Ok(e)
        });
        r.clone().map_err(|m| {
            Error::unavailable(format!("the embedding model is not available: {m}"))
                .with_details(serde_json::json!({"code": "embedding_model_unavailable"}))
        })
    }

    /// The embedder of `space` (the default one, or another model or limit), loaded once.
    pub fn embedder_for(&self, space: embed::Space) -> Result<Arc<Embedder>> {
        if space == self.default_space() {
            return self.embedder();
        }
        let id = space.id();
        if let Some(e) = self.spaces.lock().get(&id) {
            return Ok(e.clone());
        }
        let unavailable = |m: String| {
            Error::unavailable(format!("the embedding model {} is not available: {m}", space.model.id))
                .with_details(serde_json::json!({"code": "embedding_model_unavailable", "model": space.model.id}))
        };
        let files = locate::embedding_for(&self.config, space.model).map_err(|m| unavailable(m.to_string()))?;
        let e = Embedder::load(&files, self.config.embed_threads, space)
            .map_err(|e| unavailable(format!("{e}; {}", locate::FETCH_HINT)))?;
        tracing::info!(space = %id, model = %files.onnx.display(), "embedding model loaded");
        self.spaces.lock().insert(id, e.clone());
        Ok(e)
    }

    /// Whether a model's files are installed (without loading it).
    pub fn installed(&self, model: &embed::ModelSpec) -> bool {
        locate::embedding_for(&self.config, model).is_ok()
    }

    /// The embedder's state without loading it: `None` before the first attempt.
    pub fn embedder_status(&self) -> Option<std::result::Result<(), String>> {
        self.embedder.get().map(|r| r.as_ref().map(|_| ()).map_err(|e| e.clone()))
    }

    /// The local GGUF chat model (`local` provider), loaded once and shared.
    pub fn local(&self) -> std::result::Result<Arc<dyn chat::ChatModel>, chat::LlmError> {
        let mut slot = self.local.lock();
        if let Some(m) = slot.as_ref() {
            return Ok(m.clone());
        }
        #[cfg(feature = "llama")]
        {
            let path = resolve::local_model_path(&self.config).ok_or_else(|| {
                chat::LlmError::new(
                    chat::ErrorKind::Misconfigured,
                    format!("no local GGUF model file is installed; set STEWARD_LOCAL_MODEL or {}", locate::FETCH_HINT),
                )
            })?;
            let m = chat::local::LocalModel::load(&path, chat::local::LocalSettings::of(&self.config.llm))?;
            tracing::info!(model = %path.display(), ms = m.load_ms, "local chat model loaded");
            let m: Arc<dyn chat::ChatModel> = Arc::new(m);
            *slot = Some(m.clone());
            Ok(m)
        }
        #[cfg(not(feature = "llama"))]
        {
            Err(chat::LlmError::new(
                chat::ErrorKind::Misconfigured,
                "this build has no local model support (feature `llama`)",
            ))
        }
    }
}
