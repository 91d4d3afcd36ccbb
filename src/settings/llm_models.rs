//! Workspace model preferences: one `{provider, model}` (or null = inherit) per job slot.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, Result};
use crate::models::resolve::{self, Slot};

pub const NAMESPACE: &str = "llm_models";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    pub provider: String,
    pub model: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preferences {
    pub chat: Option<Choice>,
    pub rewrite: Option<Choice>,
    pub rerank: Option<Choice>,
}

impl Preferences {
    pub fn get(&self, slot: Slot) -> Option<&Choice> {
        match slot {
            Slot::Chat => self.chat.as_ref(),
            Slot::Rewrite => self.rewrite.as_ref(),
            Slot::Rerank => self.rerank.as_ref(),
        }
    }
    fn set(&mut self, slot: Slot, c: Option<Choice>) {
        match slot {
            Slot::Chat => self.chat = c,
            Slot::Rewrite => self.rewrite = c,
            Slot::Rerank => self.rerank = c,
        }
    }
}

/// Models Steward knows each provider offers (any model id is accepted; these are suggestions).
pub fn known_models(app: &App) -> Value {
    let local: Vec<String> = resolve::local_model_path(&app.config)
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().to_string()))
        .into_iter()
        .collect();
    json!({
        "openai": ["gpt-4o-mini", "gpt-4o", "gpt-4.1-mini", "gpt-4.1"],
        "openai-compatible": [],
        "claude": ["claude-3-5-haiku-latest", "claude-sonnet-4-0", "claude-opus-4-0"],
        "gemini": ["gemini-2.0-flash", "gemini-2.5-flash", "gemini-2.5-pro"],
        "local": local,
    })
}

fn view(app: &App, p: &Principal, prefs: &Preferences) -> Result<Value> {
    let mut effective = Map::new();
    for slot in Slot::ALL {
        let s = resolve::selection(app, &p.workspace_id, slot, None, prefs);
        effective.insert(slot.as_str().into(), json!({"provider": s.provider, "model": s.model, "source": s.source}));
    }
    Ok(json!({
        "chat": prefs.chat,
        "rewrite": prefs.rewrite,
        "rerank": prefs.rerank,
        "managed": {"chat": null, "rewrite": null, "rerank": null},
        "effective": effective,
    }))
}

pub fn get(app: &App, p: &Principal) -> Result<Value> {
    p.require(Perm::SettingsRead)?;
    let prefs: Preferences = app.db.read(|c| super::load(c, &p.workspace_id, NAMESPACE))?;
    view(app, p, &prefs)
}

/// `PUT /settings/llm-models`: a merge; each slot present is set (`{provider, model}`) or
/// cleared (`null`).
pub fn put(app: &App, p: &Principal, actor: &Actor, body: Value) -> Result<Value> {
    p.require(Perm::SettingsManage)?;
    let Value::Object(map) = body else { return Err(Error::invalid("the body must be a JSON object")) };
    let mut changes: Vec<(Slot, Option<Choice>)> = Vec::new();
    for (k, v) in map {
        let slot = Slot::parse(&k).ok_or_else(|| {
            Error::invalid_field(&k, format!("unknown slot `{k}`; the slots are chat, rewrite and rerank"))
        })?;
        let choice = match v {
            Value::Null => None,
            Value::Object(o) => {
                let provider = o.get("provider").and_then(Value::as_str).unwrap_or("").trim().to_string();
                let model = o.get("model").and_then(Value::as_str).unwrap_or("").trim().to_string();
                if let Some(extra) = o.keys().find(|k| *k != "provider" && *k != "model") {
                    return Err(Error::invalid_field(&format!("{k}.{extra}"), format!("unknown field `{extra}`")));
                }
                if !crate::models::PROVIDERS.contains(&provider.as_str()) {
                    return Err(Error::invalid_field(
                        &format!("{k}.provider"),
                        format!("provider must be one of {}", crate::models::PROVIDERS.join(", ")),
                    ));
                }
                if model.is_empty() || model.chars().count() > 200 {
                    return Err(Error::invalid_field(&format!("{k}.model"), "model must be 1 to 200 characters"));
                }
                if let Some(why) = resolve::unusable(app, &p.workspace_id, &provider)? {
                    return Err(Error::invalid_field(&format!("{k}.provider"), why)
                        .with_details(json!({"field": format!("{k}.provider"), "code": "provider_unavailable"})));
                }
                Some(Choice { provider, model })
            }
            _ => return Err(Error::invalid_field(&k, "each slot is null or {provider, model}")),
        };
        changes.push((slot, choice));
    }
    let now = rfc3339(app.clock.now());
    let prefs = app.db.write(|tx| {
        let mut prefs: Preferences = super::load(tx, &p.workspace_id, NAMESPACE)?;
        for (slot, c) in &changes {
            prefs.set(*slot, c.clone());
        }
        super::store(tx, &p.workspace_id, NAMESPACE, &prefs, &now)?;
        let slots: Vec<&str> = changes.iter().map(|(s, _)| s.as_str()).collect();
        audit::record(
            tx,
            &now,
            actor,
            Event::new("settings.llm_models.updated").workspace(&p.workspace_id).meta(json!({"slots": slots})),
        )?;
        Ok(prefs)
    })?;
    let mut v = view(app, p, &prefs)?;
    v["knownModelsByProvider"] = known_models(app);
    Ok(v)
}
