//! Which model serves a job, decided at request time (spec: Settings rule 6):
//! the agent's `chatModelOverride` (chat slot only) → the workspace preference → the deployment
//! default (`LLM_<SLOT>_PROVIDER` / `LLM_<SLOT>_MODEL`) → with nothing configured, the local GGUF
//! file if the operator configured one (`STEWARD_LOCAL_MODEL`), else the built-in extractive
//! answerer. API keys: the workspace credential first, then the provider's environment variable.

use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

use super::chat::{ChatModel, ErrorKind, LlmError};
use crate::app::App;
use crate::config::{Config, LlmSlotDefault, Secret};
use crate::ids::WorkspaceId;
use crate::settings::credentials;
use crate::settings::llm_models::{Choice, Preferences};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Slot {
    Chat,
    Rewrite,
    Rerank,
}

impl Slot {
    pub const ALL: [Slot; 3] = [Slot::Chat, Slot::Rewrite, Slot::Rerank];
    pub fn parse(s: &str) -> Option<Slot> {
        Slot::ALL.into_iter().find(|x| x.as_str() == s)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Slot::Chat => "chat",
            Slot::Rewrite => "rewrite",
            Slot::Rerank => "rerank",
        }
    }
    fn env_default(self, c: &Config) -> &LlmSlotDefault {
        match self {
            Slot::Chat => &c.llm.chat,
            Slot::Rewrite => &c.llm.rewrite,
            Slot::Rerank => &c.llm.rerank,
        }
    }
}

/// A resolved choice and where it came from (`agent`, `workspace`, `environment`, `default`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Selection {
    pub provider: String,
    pub model: String,
    pub source: &'static str,
}

/// The model a provider uses when only the provider is configured.
pub fn default_model(provider: &str, config: &Config) -> Option<String> {
    match provider {
        "openai" => Some("gpt-4o-mini".into()),
        "claude" => Some("claude-3-5-haiku-latest".into()),
        "gemini" => Some("gemini-2.0-flash".into()),
        "local" => local_model_path(config).and_then(|p| p.file_stem().map(|s| s.to_string_lossy().to_string())),
        super::extractive::PROVIDER => Some(super::extractive::MODEL.into()),
        _ => None,
    }
}

/// The GGUF file of the `local` provider: the configured path, else the one the install fetched.
pub fn local_model_path(config: &Config) -> Option<PathBuf> {
    config.llm.local_model_path.clone().or_else(|| super::locate::gguf(config))
}

/// Where the choice for `slot` comes from, without loading anything.
pub fn selection(app: &App, _ws: &WorkspaceId, slot: Slot, agent: Option<&Choice>, prefs: &Preferences) -> Selection {
    let from = |c: &Choice, source| Selection { provider: c.provider.clone(), model: c.model.clone(), source };
    if slot == Slot::Chat
        && let Some(c) = agent
    {
        return from(c, "agent");
    }
    if let Some(c) = prefs.get(slot) {
        return from(c, "workspace");
    }
    let env = slot.env_default(&app.config);
    if let Some(provider) = &env.provider {
        let model = env.model.clone().or_else(|| default_model(provider, &app.config)).unwrap_or_default();
        return Selection { provider: provider.clone(), model, source: "environment" };
    }
    if let Some(path) = app.config.llm.local_model_path.as_ref().filter(|p| p.is_file()) {
        let model = path.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_else(|| "local".into());
        return Selection { provider: "local".into(), model, source: "default" };
    }
    Selection {
        provider: super::extractive::PROVIDER.into(),
        model: super::extractive::MODEL.into(),
        source: "default",
    }
}

/// Why `provider` cannot be selected in this workspace (rule 4), or `None` when it can.
pub fn unusable(app: &App, ws: &WorkspaceId, provider: &str) -> crate::Result<Option<String>> {
    Ok(match provider {
        "local" => match local_model_path(&app.config) {
            Some(p) if p.is_file() && cfg!(feature = "llama") => None,
            _ if !cfg!(feature = "llama") => Some("this build has no local model support (feature `llama`)".into()),
            _ => Some(format!(
                "no local GGUF model file is installed; set STEWARD_LOCAL_MODEL or {}",
                super::locate::FETCH_HINT
            )),
        },
        "openai-compatible" => {
            let keyed =
                app.config.llm.env_keys.contains_key(provider) || credentials::has_workspace_key(app, ws, provider)?;
            if keyed || app.config.llm.base_urls.contains_key(provider) {
                None
            } else {
                Some("openai-compatible needs OPENAI_COMPATIBLE_BASE_URL (and a key if the server asks for one)".into())
            }
        }
        p => {
            if app.config.llm.env_keys.contains_key(p) || credentials::has_workspace_key(app, ws, p)? {
                None
            } else {
                Some(format!("{p} has no API key: add a workspace credential or set {}", env_key_var(p)))
            }
        }
    })
}

fn env_key_var(provider: &str) -> &'static str {
    match provider {
        "openai" => "OPENAI_API_KEY",
        "openai-compatible" => "OPENAI_COMPATIBLE_API_KEY",
        "claude" => "ANTHROPIC_API_KEY",
        "gemini" => "GEMINI_API_KEY",
        _ => "",
    }
}

/// What serves a job.
#[derive(Clone)]
pub enum Resolved {
    /// The built-in extractive answerer: no model at all.
    Builtin,
    Model(Arc<dyn ChatModel>),
}

/// The key for `provider`: the workspace credential, else the deployment key.
fn key_for(app: &App, ws: &WorkspaceId, provider: &str) -> Result<Option<Secret<String>>, LlmError> {
    let stored = credentials::workspace_key(app, ws, provider)
        .map_err(|e| LlmError::new(ErrorKind::Misconfigured, e.message.clone()))?;
    Ok(stored.or_else(|| app.config.llm.env_keys.get(provider).cloned()))
}

/// Resolves `slot` for workspace `ws` to something that can answer.
pub fn resolve(
    app: &App,
    ws: &WorkspaceId,
    slot: Slot,
    agent: Option<&Choice>,
) -> Result<(Selection, Resolved), LlmError> {
    resolve_with(app, ws, slot, agent, &preferences(app, ws)?)
}

/// The workspace's model preferences, read once by a caller that resolves several slots.
pub fn preferences(app: &App, ws: &WorkspaceId) -> Result<Preferences, LlmError> {
    app.db
        .read(|c| crate::settings::load(c, ws, crate::settings::llm_models::NAMESPACE))
        .map_err(|e| LlmError::new(ErrorKind::Unavailable, e.message.clone()))
}

/// [`resolve`] with the workspace's preferences already read.
pub fn resolve_with(
    app: &App,
    ws: &WorkspaceId,
    slot: Slot,
    agent: Option<&Choice>,
    prefs: &Preferences,
) -> Result<(Selection, Resolved), LlmError> {
    let sel = selection(app, ws, slot, agent, prefs);
    let r = build(app, ws, &sel)?;
    Ok((sel, r))
}

/// Builds the model a selection names.
pub fn build(app: &App, ws: &WorkspaceId, sel: &Selection) -> Result<Resolved, LlmError> {
    let llm = &app.config.llm;
    let timeout = llm.request_timeout;
    let base = |p: &str, default: &str| llm.base_urls.get(p).cloned().unwrap_or_else(|| default.to_string());
    let missing_key = |p: &str| {
        LlmError::new(
            ErrorKind::Misconfigured,
            format!("{p} has no API key: add a workspace credential or set {}", env_key_var(p)),
        )
    };
    if sel.model.is_empty() && sel.provider != super::extractive::PROVIDER {
        return Err(LlmError::new(
            ErrorKind::Misconfigured,
            format!(
                "no model is set for provider {}; set LLM_<SLOT>_MODEL or choose one in the model preferences",
                sel.provider
            ),
        ));
    }
    let m: Arc<dyn ChatModel> = match sel.provider.as_str() {
        p if p == super::extractive::PROVIDER => return Ok(Resolved::Builtin),
        "openai" => {
            let key = key_for(app, ws, "openai")?.ok_or_else(|| missing_key("openai"))?;
            Arc::new(super::chat::openai::OpenAi::new(
                "openai",
                &sel.model,
                &base("openai", super::chat::openai::DEFAULT_BASE_URL),
                Some(key),
                timeout,
            )?)
        }
        "openai-compatible" => {
            let url = llm.base_urls.get("openai-compatible").ok_or_else(|| {
                LlmError::new(
                    ErrorKind::Misconfigured,
                    "the openai-compatible provider needs OPENAI_COMPATIBLE_BASE_URL",
                )
            })?;
            let key = key_for(app, ws, "openai-compatible")?;
            Arc::new(super::chat::openai::OpenAi::new("openai-compatible", &sel.model, url, key, timeout)?)
        }
        "claude" => {
            let key = key_for(app, ws, "claude")?.ok_or_else(|| missing_key("claude"))?;
            Arc::new(super::chat::claude::Claude::new(
                &sel.model,
                &base("claude", super::chat::claude::DEFAULT_BASE_URL),
                key,
                timeout,
            )?)
        }
        "gemini" => {
            let key = key_for(app, ws, "gemini")?.ok_or_else(|| missing_key("gemini"))?;
            Arc::new(super::chat::gemini::Gemini::new(
                &sel.model,
                &base("gemini", super::chat::gemini::DEFAULT_BASE_URL),
                key,
                timeout,
            )?)
        }
        "local" => app.models.local()?,
        other => return Err(LlmError::new(ErrorKind::Misconfigured, format!("unknown provider `{other}`"))),
    };
    Ok(Resolved::Model(m))
}
