//! The wire shapes of workspace settings (owned by the HTTP edge; the typed records in the
//! submodules know nothing of them). The document type catalog is stored in the same camelCase
//! shape the API shows, so its stored form ([`StoredJson`]) is defined here too.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::credentials::CredentialList;
use super::document_types::{CatalogUpdate, CatalogView, FieldInput, OperatorType, Retired, Stored, TypeView};
use super::general::{General, GeneralPatch};
use super::llm_models::{KnownModels, ModelsPatch, ModelsView, SlotValue};
use super::retrieval::DefaultsView;

// -- retrieval defaults

/// The system retrieval defaults. The same JSON is a new agent's `retrieval.answer` skill
/// configuration.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetrievalDefaults {
    pub query_rewrite_enabled: bool,
    pub semantic_rewrite_instructions: String,
    pub lexical_rewrite_instructions: String,
    pub rerank_enabled: bool,
    pub vector_top_k: u32,
    pub rerank_top_k: u32,
    pub similarity_threshold: f32,
    pub retrieval_strategy: String,
    pub metadata_rules: Vec<Value>,
    pub custom_instruction: String,
    pub temporal_structured_lookup_enabled: bool,
    pub temporal_boost_upcoming_enabled: bool,
    pub temporal_deterministic_sort_enabled: bool,
}

impl Default for RetrievalDefaults {
    fn default() -> Self {
        RetrievalDefaults {
            query_rewrite_enabled: true,
            semantic_rewrite_instructions: String::new(),
            lexical_rewrite_instructions: String::new(),
            // the spec: reranking is off by default
            rerank_enabled: false,
            vector_top_k: 15,
            rerank_top_k: 5,
            similarity_threshold: 0.2,
            retrieval_strategy: "fixed".into(),
            metadata_rules: vec![],
            custom_instruction: String::new(),
            temporal_structured_lookup_enabled: true,
            temporal_boost_upcoming_enabled: true,
            temporal_deterministic_sort_enabled: true,
        }
    }
}

/// `GET /settings/retrieval-defaults`: the defaults, then `metadataFieldSuggestions`.
pub fn retrieval_defaults(v: &DefaultsView) -> Result<Value, serde_json::Error> {
    let mut out = serde_json::to_value(&v.defaults)?;
    out["metadataFieldSuggestions"] = json!(
        v.metadata_field_suggestions
            .iter()
            .map(|s| json!({"key": s.key, "valueType": s.value_type, "source": s.source.as_str()}))
            .collect::<Vec<_>>()
    );
    Ok(out)
}

// -- credentials

/// `PUT /settings/credentials/{provider}`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CredentialBody {
    pub api_key: String,
}

/// `GET /settings/credentials`.
pub fn credentials(l: &CredentialList) -> Value {
    let env: Map<String, Value> =
        l.env_provider_availability.iter().map(|(k, has)| (k.to_string(), json!(has))).collect();
    json!({
        "encryptionConfigured": l.encryption_configured,
        "credentials": l.credentials.iter().map(|c| json!({"provider": c.provider, "updatedAt": c.updated_at})).collect::<Vec<_>>(),
        "envProviderAvailability": env,
    })
}

// -- model preferences

/// Reads a `PUT /settings/llm-models` body (checked by `llm_models::put`).
pub fn models_patch(body: Value) -> ModelsPatch {
    let Value::Object(map) = body else { return ModelsPatch::NotAnObject };
    let slot = |v: Value| match v {
        Value::Null => SlotValue::Clear,
        Value::Object(o) => SlotValue::Choice {
            provider: o.get("provider").and_then(Value::as_str).unwrap_or("").trim().to_string(),
            model: o.get("model").and_then(Value::as_str).unwrap_or("").trim().to_string(),
            unknown_field: o.keys().find(|k| *k != "provider" && *k != "model").cloned(),
        },
        _ => SlotValue::Other,
    };
    ModelsPatch::Slots(map.into_iter().map(|(k, v)| (k, slot(v))).collect())
}

fn known_models(k: &KnownModels) -> Value {
    Value::Object(k.0.iter().map(|(provider, ids)| (provider.to_string(), json!(ids))).collect())
}

/// `GET/PUT /settings/llm-models`.
pub fn models(v: &ModelsView) -> Value {
    let effective: Map<String, Value> = v
        .effective
        .iter()
        .map(|(slot, s)| (slot.as_str().into(), json!({"provider": s.provider, "model": s.model, "source": s.source})))
        .collect();
    let prefs = &v.preferences;
    let mut out = json!({
        "chat": prefs.chat,
        "rewrite": prefs.rewrite,
        "rerank": prefs.rerank,
        "managed": {"chat": null, "rewrite": null, "rerank": null},
        "effective": effective,
    });
    if let Some(k) = &v.known_models {
        out["knownModelsByProvider"] = known_models(k);
    }
    out
}

// -- the document type catalog

/// An operator type, as sent and as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OperatorTypeJson {
    pub key: String,
    pub label: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default)]
    pub fields: Vec<FieldJson>,
}

fn yes() -> bool {
    true
}

/// A field, as sent, shown and stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FieldJson {
    pub key: String,
    pub label: String,
    pub value_type: String,
    #[serde(default)]
    pub instruction: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetiredJson {
    pub key: String,
    pub value_type: String,
}

/// The catalog as stored per workspace (`workspace_settings`, namespace `document_types`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredJson {
    pub revision: u64,
    pub types: Vec<OperatorTypeJson>,
    pub disabled_built_in_type_keys: Vec<String>,
    pub retired_fields: Vec<RetiredJson>,
}

impl Default for StoredJson {
    fn default() -> Self {
        StoredJson::from(&Stored::default())
    }
}

/// `PUT /settings/document-types`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DocumentTypesBody {
    pub expected_revision: String,
    pub types: Vec<OperatorTypeJson>,
    #[serde(default)]
    pub disabled_built_in_type_keys: Vec<String>,
}

impl From<FieldJson> for FieldInput {
    fn from(f: FieldJson) -> Self {
        FieldInput { key: f.key, label: f.label, value_type: f.value_type, instruction: f.instruction }
    }
}

impl From<&FieldInput> for FieldJson {
    fn from(f: &FieldInput) -> Self {
        FieldJson {
            key: f.key.clone(),
            label: f.label.clone(),
            value_type: f.value_type.clone(),
            instruction: f.instruction.clone(),
        }
    }
}

impl From<OperatorTypeJson> for OperatorType {
    fn from(t: OperatorTypeJson) -> Self {
        OperatorType {
            key: t.key,
            label: t.label,
            description: t.description,
            enabled: t.enabled,
            fields: t.fields.into_iter().map(FieldInput::from).collect(),
        }
    }
}

impl From<&OperatorType> for OperatorTypeJson {
    fn from(t: &OperatorType) -> Self {
        OperatorTypeJson {
            key: t.key.clone(),
            label: t.label.clone(),
            description: t.description.clone(),
            enabled: t.enabled,
            fields: t.fields.iter().map(FieldJson::from).collect(),
        }
    }
}

impl From<&Retired> for RetiredJson {
    fn from(r: &Retired) -> Self {
        RetiredJson { key: r.key.clone(), value_type: r.value_type.clone() }
    }
}

impl From<StoredJson> for Stored {
    fn from(s: StoredJson) -> Self {
        Stored {
            revision: s.revision,
            types: s.types.into_iter().map(OperatorType::from).collect(),
            disabled_built_in_type_keys: s.disabled_built_in_type_keys,
            retired_fields: s
                .retired_fields
                .into_iter()
                .map(|r| Retired { key: r.key, value_type: r.value_type })
                .collect(),
        }
    }
}

impl From<&Stored> for StoredJson {
    fn from(s: &Stored) -> Self {
        StoredJson {
            revision: s.revision,
            types: s.types.iter().map(OperatorTypeJson::from).collect(),
            disabled_built_in_type_keys: s.disabled_built_in_type_keys.clone(),
            retired_fields: s.retired_fields.iter().map(RetiredJson::from).collect(),
        }
    }
}

impl From<DocumentTypesBody> for CatalogUpdate {
    fn from(b: DocumentTypesBody) -> Self {
        CatalogUpdate {
            expected_revision: b.expected_revision,
            types: b.types.into_iter().map(OperatorType::from).collect(),
            disabled_built_in_type_keys: b.disabled_built_in_type_keys,
        }
    }
}

fn type_view(t: &TypeView) -> Value {
    json!({
        "key": t.key, "label": t.label, "description": t.description, "enabled": t.enabled,
        "origin": t.origin, "payload": t.payload, "disableable": t.disableable,
        "fields": t.fields.iter().map(FieldJson::from).collect::<Vec<_>>(),
    })
}

/// `GET/PUT /settings/document-types`.
pub fn catalog(v: &CatalogView) -> Value {
    json!({
        "workspaceId": v.workspace_id,
        "revision": v.revision.to_string(),
        "types": v.types.iter().map(type_view).collect::<Vec<_>>(),
        "retiredFields": v.retired_fields.iter().map(RetiredJson::from).collect::<Vec<_>>(),
        "referencedFieldKeys": v.referenced_field_keys,
    })
}

/// The stored format of the general settings (and its wire shape, tokens included).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct GeneralDoc {
    pub anonymous_chat_enabled: bool,
    pub anonymous_chat_token: String,
    pub anonymous_chat_last_used_at: Option<String>,
    pub assistant_name: String,
    pub greeting_instruction: String,
    pub assistant_default_locale: Option<String>,
    pub proactive_greeting_enabled: bool,
    pub website_embed_enabled: bool,
    pub website_embed_token: String,
    pub website_embed_last_used_at: Option<String>,
    pub website_embed_allowed_origins: Vec<String>,
    pub website_embed_launcher_label: String,
    pub website_embed_launcher_position: String,
    pub website_embed_theme: crate::agents::Theme,
    pub website_embed_copy: serde_json::Map<String, Value>,
    pub website_embed_expert_overrides: serde_json::Map<String, Value>,
    pub public_chat_visitor_messages_per_minute: Option<u32>,
    pub public_chat_visitor_messages_per_day: Option<u32>,
    pub updated_at: Option<String>,
}

impl Default for GeneralDoc {
    fn default() -> Self {
        GeneralDoc::from(&General::default())
    }
}

impl From<&General> for GeneralDoc {
    fn from(g: &General) -> Self {
        GeneralDoc {
            anonymous_chat_enabled: g.anonymous_chat_enabled,
            anonymous_chat_token: g.anonymous_chat_token.clone(),
            anonymous_chat_last_used_at: g.anonymous_chat_last_used_at.clone(),
            assistant_name: g.assistant_name.clone(),
            greeting_instruction: g.greeting_instruction.clone(),
            assistant_default_locale: g.assistant_default_locale.clone(),
            proactive_greeting_enabled: g.proactive_greeting_enabled,
            website_embed_enabled: g.website_embed_enabled,
            website_embed_token: g.website_embed_token.clone(),
            website_embed_last_used_at: g.website_embed_last_used_at.clone(),
            website_embed_allowed_origins: g.website_embed_allowed_origins.clone(),
            website_embed_launcher_label: g.website_embed_launcher_label.clone(),
            website_embed_launcher_position: g.website_embed_launcher_position.clone(),
            website_embed_theme: g.website_embed_theme.clone(),
            website_embed_copy: g.website_embed_copy.clone(),
            website_embed_expert_overrides: g.website_embed_expert_overrides.clone(),
            public_chat_visitor_messages_per_minute: g.public_chat_visitor_messages_per_minute,
            public_chat_visitor_messages_per_day: g.public_chat_visitor_messages_per_day,
            updated_at: g.updated_at.clone(),
        }
    }
}

impl From<GeneralDoc> for General {
    fn from(d: GeneralDoc) -> Self {
        General {
            anonymous_chat_enabled: d.anonymous_chat_enabled,
            anonymous_chat_token: d.anonymous_chat_token,
            anonymous_chat_last_used_at: d.anonymous_chat_last_used_at,
            assistant_name: d.assistant_name,
            greeting_instruction: d.greeting_instruction,
            assistant_default_locale: d.assistant_default_locale,
            proactive_greeting_enabled: d.proactive_greeting_enabled,
            website_embed_enabled: d.website_embed_enabled,
            website_embed_token: d.website_embed_token,
            website_embed_last_used_at: d.website_embed_last_used_at,
            website_embed_allowed_origins: d.website_embed_allowed_origins,
            website_embed_launcher_label: d.website_embed_launcher_label,
            website_embed_launcher_position: d.website_embed_launcher_position,
            website_embed_theme: d.website_embed_theme,
            website_embed_copy: d.website_embed_copy,
            website_embed_expert_overrides: d.website_embed_expert_overrides,
            public_chat_visitor_messages_per_minute: d.public_chat_visitor_messages_per_minute,
            public_chat_visitor_messages_per_day: d.public_chat_visitor_messages_per_day,
            updated_at: d.updated_at,
        }
    }
}

/// `PUT /settings/general`: every field optional; the launch tokens and last-used times are
/// read-only (refused by name).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GeneralBody {
    #[serde(default, deserialize_with = "crate::agents::api::not_null")]
    anonymous_chat_enabled: Option<bool>,
    #[serde(default, deserialize_with = "crate::agents::api::not_null")]
    assistant_name: Option<String>,
    #[serde(default, deserialize_with = "crate::agents::api::not_null")]
    greeting_instruction: Option<String>,
    #[serde(default, deserialize_with = "crate::agents::api::present")]
    assistant_default_locale: Option<Option<String>>,
    #[serde(default, deserialize_with = "crate::agents::api::not_null")]
    proactive_greeting_enabled: Option<bool>,
    #[serde(default, deserialize_with = "crate::agents::api::not_null")]
    website_embed_enabled: Option<bool>,
    #[serde(default, deserialize_with = "crate::agents::api::not_null")]
    website_embed_allowed_origins: Option<Vec<String>>,
    #[serde(default, deserialize_with = "crate::agents::api::not_null")]
    website_embed_launcher_label: Option<String>,
    #[serde(default, deserialize_with = "crate::agents::api::not_null")]
    website_embed_launcher_position: Option<String>,
    #[serde(default, deserialize_with = "crate::agents::api::not_null")]
    website_embed_theme: Option<crate::agents::Theme>,
    #[serde(default, deserialize_with = "crate::agents::api::not_null")]
    website_embed_copy: Option<serde_json::Map<String, Value>>,
    #[serde(default, deserialize_with = "crate::agents::api::not_null")]
    website_embed_expert_overrides: Option<serde_json::Map<String, Value>>,
    #[serde(default, deserialize_with = "crate::agents::api::present")]
    public_chat_visitor_messages_per_minute: Option<Option<u32>>,
    #[serde(default, deserialize_with = "crate::agents::api::present")]
    public_chat_visitor_messages_per_day: Option<Option<u32>>,
    #[schemars(skip)]
    #[serde(default)]
    anonymous_chat_token: Option<serde::de::IgnoredAny>,
    #[schemars(skip)]
    #[serde(default)]
    website_embed_token: Option<serde::de::IgnoredAny>,
    #[schemars(skip)]
    #[serde(default)]
    anonymous_chat_last_used_at: Option<serde::de::IgnoredAny>,
    #[schemars(skip)]
    #[serde(default)]
    website_embed_last_used_at: Option<serde::de::IgnoredAny>,
}

impl GeneralBody {
    /// The typed patch; a read-only key is a 400 naming it.
    pub fn patch(self) -> crate::error::Result<GeneralPatch> {
        for (present, name) in [
            (self.anonymous_chat_token.is_some(), "anonymousChatToken"),
            (self.website_embed_token.is_some(), "websiteEmbedToken"),
            (self.anonymous_chat_last_used_at.is_some(), "anonymousChatLastUsedAt"),
            (self.website_embed_last_used_at.is_some(), "websiteEmbedLastUsedAt"),
        ] {
            if present {
                return Err(crate::error::Error::invalid_field(
                    name,
                    format!("`{name}` is read-only (rotate a token with its rotate route)"),
                ));
            }
        }
        Ok(GeneralPatch {
            anonymous_chat_enabled: self.anonymous_chat_enabled,
            assistant_name: self.assistant_name,
            greeting_instruction: self.greeting_instruction,
            assistant_default_locale: self.assistant_default_locale,
            proactive_greeting_enabled: self.proactive_greeting_enabled,
            website_embed_enabled: self.website_embed_enabled,
            website_embed_allowed_origins: self.website_embed_allowed_origins,
            website_embed_launcher_label: self.website_embed_launcher_label,
            website_embed_launcher_position: self.website_embed_launcher_position,
            website_embed_theme: self.website_embed_theme,
            website_embed_copy: self.website_embed_copy,
            website_embed_expert_overrides: self.website_embed_expert_overrides,
            public_chat_visitor_messages_per_minute: self.public_chat_visitor_messages_per_minute,
            public_chat_visitor_messages_per_day: self.public_chat_visitor_messages_per_day,
        })
    }
}
