//! Workspace model preferences: one `{provider, model}` (or null = inherit) per job slot.

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, Result};
use crate::models::resolve::{self, Selection, Slot};

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

/// Models Steward knows each provider offers (any model id is accepted; these are suggestions):
/// `(provider, model ids)`.
#[derive(Debug, Clone)]
pub struct KnownModels(pub Vec<(&'static str, Vec<String>)>);

/// Models Steward knows each provider offers.
pub fn known_models(app: &App) -> KnownModels {
    let local: Vec<String> = resolve::local_model_path(&app.config)
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().to_string()))
        .into_iter()
        .collect();
    let list = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    KnownModels(vec![
        ("openai", list(&["gpt-4o-mini", "gpt-4o", "gpt-4.1-mini", "gpt-4.1"])),
        ("openai-compatible", vec![]),
        ("claude", list(&["claude-3-5-haiku-latest", "claude-sonnet-4-0", "claude-opus-4-0"])),
        ("gemini", list(&["gemini-2.0-flash", "gemini-2.5-flash", "gemini-2.5-pro"])),
        ("local", local),
    ])
}

/// The workspace's model preferences and what each slot resolves to.
#[derive(Debug, Clone)]
pub struct ModelsView {
    pub preferences: Preferences,
    /// Every slot, in [`Slot::ALL`] order, with the model it uses now.
    pub effective: Vec<(Slot, Selection)>,
    /// Present after a change.
    pub known_models: Option<KnownModels>,
}

fn view(app: &App, p: &Principal, prefs: Preferences) -> ModelsView {
    let effective =
        Slot::ALL.iter().map(|slot| (*slot, resolve::selection(app, &p.workspace_id, *slot, None, &prefs))).collect();
    ModelsView { preferences: prefs, effective, known_models: None }
}

pub fn get(app: &App, p: &Principal) -> Result<ModelsView> {
    p.require(Perm::SettingsRead)?;
    let prefs: Preferences = app.db.read(|c| super::load(c, &p.workspace_id, NAMESPACE))?;
    Ok(view(app, p, prefs))
}

/// One slot of a `PUT /settings/llm-models` body, as sent.
#[derive(Debug, Clone)]
pub enum SlotValue {
    /// `null`: inherit.
    Clear,
    /// An object: its `provider` and `model` (empty when missing or not text), and the first other
    /// key it has, if any.
    Choice { provider: String, model: String, unknown_field: Option<String> },
    /// Anything else.
    Other,
}

/// A `PUT /settings/llm-models` body: its slots in the order sent, or not an object.
#[derive(Debug, Clone)]
pub enum ModelsPatch {
    Slots(Vec<(String, SlotValue)>),
    NotAnObject,
}

/// Checks one slot of a change.
fn choice_of(app: &App, p: &Principal, k: &str, v: SlotValue) -> Result<Option<Choice>> {
    let (provider, model, unknown) = match v {
        SlotValue::Clear => return Ok(None),
        SlotValue::Other => return Err(Error::invalid_field(k, "each slot is null or {provider, model}")),
        SlotValue::Choice { provider, model, unknown_field } => (provider, model, unknown_field),
    };
    if let Some(extra) = unknown {
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
    Ok(Some(Choice { provider, model }))
}

/// `PUT /settings/llm-models`: a merge; each slot present is set (`{provider, model}`) or
/// cleared (`null`).
pub fn put(app: &App, p: &Principal, actor: &Actor, body: ModelsPatch) -> Result<ModelsView> {
    p.require(Perm::SettingsManage)?;
    let ModelsPatch::Slots(slots) = body else { return Err(Error::invalid("the body must be a JSON object")) };
    let mut changes: Vec<(Slot, Option<Choice>)> = Vec::new();
    for (k, v) in slots {
        let slot = Slot::parse(&k).ok_or_else(|| {
            Error::invalid_field(&k, format!("unknown slot `{k}`; the slots are chat, rewrite and rerank"))
        })?;
        changes.push((slot, choice_of(app, p, &k, v)?));
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
    Ok(ModelsView { known_models: Some(known_models(app)), ..view(app, p, prefs) })
}
