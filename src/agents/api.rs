//! The agents' wire shapes (owned by the HTTP edge): the settings document, which is also the
//! stored format of an agent's settings and of revision snapshots (versioned by
//! `SCHEMA_VERSION`), the create/update body, and the views of agents and logos.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::context::{Enablement, ScopedValue, Variable};
use super::directives::{Body, DirectiveRecord, Draft};
use super::revisions::{Revision, RevisionDetail, RevisionState, SNAPSHOT_FORMAT};
use super::skills::{BuiltInSkill, Skill};
use super::{Agent, AgentRecord, Logo, SCHEMA_VERSION};
use crate::error::{Error, Result};

/// Free-form per-skill settings overrides, keyed by built-in skill name.
pub type SkillSettings = Map<String, Value>;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelChoice {
    pub provider: String,
    pub model: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Webhook {
    pub url: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[derive(Default)]
pub struct Delivery {
    pub recipient_emails: Vec<String>,
    pub webhook: Option<Webhook>,
}

/// An "Exact words" greeting: the text shown verbatim (no model call) when a visitor opens the
/// chat, per language, with up to five authored chips. Chip `k` of every variant is the same chip
/// in another language, so every variant labels every chip.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExactWords {
    /// Locale (`en`, `pt-BR`) → the greeting in that language.
    pub variants: std::collections::BTreeMap<String, ExactVariant>,
}

/// One language of an Exact words greeting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExactVariant {
    pub text: String,
    #[serde(default)]
    pub chips: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Theme {
    pub brand: String,
    pub brand_text: String,
    pub surface: String,
    pub text: String,
}

impl Default for Theme {
    fn default() -> Self {
        Theme {
            brand: "#0f172a".into(),
            brand_text: "#f8fafc".into(),
            surface: "#ffffff".into(),
            text: "#0f172a".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, tag = "mode")]
pub enum SourceScope {
    #[serde(rename = "all")]
    All,
    #[serde(rename = "selected", rename_all = "camelCase")]
    Selected { source_ids: Vec<String> },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[derive(Default)]
pub struct Surface {
    pub enabled: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct EmbedSurface {
    pub enabled: bool,
    pub allowed_origins: Vec<String>,
    pub launcher_label: String,
    pub launcher_position: String,
}

impl Default for EmbedSurface {
    fn default() -> Self {
        EmbedSurface {
            enabled: false,
            allowed_origins: vec![],
            launcher_label: "Chat with us".into(),
            launcher_position: "bottom-right".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Surfaces {
    pub authenticated_chat: Surface,
    pub anonymous_chat: Surface,
    pub website_embed: EmbedSurface,
}

impl Default for Surfaces {
    fn default() -> Self {
        Surfaces {
            authenticated_chat: Surface { enabled: true },
            anonymous_chat: Surface::default(),
            website_embed: EmbedSurface::default(),
        }
    }
}

/// Every authored agent setting (the name lives beside it). Unknown keys are refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Settings {
    pub custom_instruction: String,
    pub retrieval_enabled: bool,
    pub handoff_on_retrieval_miss: bool,
    pub chat_model_override: Option<ModelChoice>,
    pub suggested_questions_enabled: bool,
    pub citation_display_enabled: bool,
    pub contact_requests_enabled: bool,
    pub webhook_exports_enabled: bool,
    pub contact_request_delivery: Delivery,
    pub greeting_instruction: String,
    pub assistant_default_locale: Option<String>,
    pub proactive_greeting_enabled: bool,
    /// The Exact words greeting (none: the greeting is generated from `greetingInstruction`).
    pub greeting_exact_words: Option<ExactWords>,
    pub theme: Theme,
    pub source_scope: SourceScope,
    pub surface_settings: Surfaces,
    /// Per built-in skill overrides; retrieval overrides live under `"retrieval.answer"`.
    pub skill_settings: SkillSettings,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            custom_instruction: String::new(),
            retrieval_enabled: true,
            handoff_on_retrieval_miss: false,
            chat_model_override: None,
            suggested_questions_enabled: true,
            citation_display_enabled: true,
            contact_requests_enabled: false,
            webhook_exports_enabled: false,
            contact_request_delivery: Delivery::default(),
            greeting_instruction: String::new(),
            assistant_default_locale: None,
            proactive_greeting_enabled: false,
            greeting_exact_words: None,
            theme: Theme::default(),
            source_scope: SourceScope::All,
            surface_settings: Surfaces::default(),
            skill_settings: Map::new(),
        }
    }
}

/// Deserializes a key that is present (even as `null`) to `Some`.
pub(crate) fn present<'de, D, T>(d: D) -> std::result::Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// Deserializes a key that must not be `null` (a setting without a "none" value); `null` is a
/// 400 naming the key, rather than a silent no-op.
pub(crate) fn not_null<'de, D, T>(d: D) -> std::result::Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    match Option::<T>::deserialize(d)? {
        Some(v) => Ok(Some(v)),
        None => Err(serde::de::Error::custom(
            "null is not allowed here: send the value you want (the defaults are in docs/api.md)",
        )),
    }
}

/// Declares the agent body: the name plus every settings field, each optional (a present key
/// replaces the setting), and the read-only keys of the view, which are refused by name.
macro_rules! agent_body {
    (
        settings { $($(#[$m:meta])* $field:ident : $ty:ty => $wire:literal,)* }
        read_only { $($ro:ident => $ro_wire:literal,)* }
    ) => {
        /// The body of `POST /agents` and `PUT /agents/{id}`: the keys it carries replace those
        /// settings; the rest keep their value. Unknown keys are refused.
        #[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct AgentBody {
            #[serde(default, alias = "internalName", deserialize_with = "not_null")]
            pub name: Option<String>,
            $($(#[$m])* #[serde(default)] pub $field: Option<$ty>,)*
            $(#[serde(default)] #[schemars(skip)] $ro: Option<serde::de::IgnoredAny>,)*
        }

        impl AgentBody {
            /// `cur` with this body's settings applied, validated.
            pub fn settings(&self, cur: &Settings) -> Result<Settings> {
                $(if self.$ro.is_some() {
                    return Err(Error::invalid_field($ro_wire, format!("`{}` is read-only", $ro_wire)));
                })*
                let mut s = cur.clone();
                $(if let Some(v) = &self.$field {
                    s.$field = v.clone();
                })*
                s.validate()?;
                Ok(s)
            }

            /// The wire names of the keys this body carries (for the audit record).
            pub fn fields(&self) -> Vec<&'static str> {
                let mut out = Vec::new();
                if self.name.is_some() {
                    out.push("name");
                }
                $(if self.$field.is_some() {
                    out.push($wire);
                })*
                out
            }
        }
    };
}

agent_body! {
    settings {
        #[serde(deserialize_with = "not_null")]
        custom_instruction: String => "customInstruction",
        #[serde(deserialize_with = "not_null")]
        retrieval_enabled: bool => "retrievalEnabled",
        #[serde(deserialize_with = "not_null")]
        handoff_on_retrieval_miss: bool => "handoffOnRetrievalMiss",
        #[serde(deserialize_with = "present")]
        chat_model_override: Option<ModelChoice> => "chatModelOverride",
        #[serde(deserialize_with = "not_null")]
        suggested_questions_enabled: bool => "suggestedQuestionsEnabled",
        #[serde(deserialize_with = "not_null")]
        citation_display_enabled: bool => "citationDisplayEnabled",
        #[serde(deserialize_with = "not_null")]
        contact_requests_enabled: bool => "contactRequestsEnabled",
        #[serde(deserialize_with = "not_null")]
        webhook_exports_enabled: bool => "webhookExportsEnabled",
        #[serde(deserialize_with = "not_null")]
        contact_request_delivery: Delivery => "contactRequestDelivery",
        #[serde(deserialize_with = "not_null")]
        greeting_instruction: String => "greetingInstruction",
        #[serde(deserialize_with = "present")]
        assistant_default_locale: Option<String> => "assistantDefaultLocale",
        #[serde(deserialize_with = "not_null")]
        proactive_greeting_enabled: bool => "proactiveGreetingEnabled",
        #[serde(deserialize_with = "present")]
        greeting_exact_words: Option<ExactWords> => "greetingExactWords",
        #[serde(deserialize_with = "not_null")]
        theme: Theme => "theme",
        #[serde(deserialize_with = "not_null")]
        source_scope: SourceScope => "sourceScope",
        #[serde(deserialize_with = "not_null")]
        surface_settings: Surfaces => "surfaceSettings",
        #[serde(deserialize_with = "not_null")]
        skill_settings: SkillSettings => "skillSettings",
    }
    read_only {
        id => "id",
        workspace_id => "workspaceId",
        is_default => "isDefault",
        schema_version => "schemaVersion",
        logo => "logo",
        draft_generation => "draftGeneration",
        published_revision_id => "publishedRevisionId",
        created_at => "createdAt",
        updated_at => "updatedAt",
    }
}

/// An agent's logo, as the views show it.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogoView {
    mime_type: String,
    filename: Option<String>,
    size_bytes: i64,
    updated_at: String,
    url: String,
}

impl LogoView {
    pub fn of(agent_id: &str, l: &Logo) -> LogoView {
        LogoView {
            mime_type: l.mime_type.clone(),
            filename: l.filename.clone(),
            size_bytes: l.size_bytes,
            updated_at: l.updated_at.clone(),
            url: format!("/api/v1/agents/{agent_id}/assistant-logo"),
        }
    }
}

/// An agent: its settings with its identity and draft state beside them.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentView<'a> {
    #[serde(flatten)]
    settings: &'a Settings,
    id: &'a str,
    workspace_id: &'a str,
    name: &'a str,
    is_default: bool,
    schema_version: u32,
    logo: Option<LogoView>,
    draft_generation: i64,
    published_revision_id: Option<&'a str>,
    created_at: &'a str,
    updated_at: &'a str,
}

impl<'a> AgentView<'a> {
    pub fn of(r: &'a AgentRecord) -> AgentView<'a> {
        let a: &Agent = &r.agent;
        AgentView {
            settings: &a.settings,
            id: &a.id,
            workspace_id: &a.workspace_id.0,
            name: &a.name,
            is_default: a.is_default,
            schema_version: SCHEMA_VERSION,
            logo: r.logo.as_ref().map(|l| LogoView::of(&a.id, l)),
            draft_generation: a.draft_generation,
            published_revision_id: a.published_revision_id.as_deref(),
            created_at: &a.created_at,
            updated_at: &a.updated_at,
        }
    }
}

/// `GET /agents`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct AgentList<'a> {
    pub agents: Vec<AgentView<'a>>,
}

/// A skill. Snapshots in revisions carry the same shape without the timestamps.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkillView<'a> {
    id: &'a str,
    agent_id: &'a str,
    name: &'a str,
    capability: &'a str,
    target: &'a Option<Value>,
    config: std::borrow::Cow<'a, Map<String, Value>>,
    invocation_mode: &'a str,
    enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    created_at: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    updated_at: Option<&'a str>,
}

impl<'a> SkillView<'a> {
    pub fn of(s: &'a Skill) -> SkillView<'a> {
        let mut v =
            SkillView { created_at: Some(&s.created_at), updated_at: Some(&s.updated_at), ..SkillView::snapshot(s) };
        // sealed secrets never leave the server: the view says whether one is set
        if s.config.contains_key(super::skills::SEALED_URL) || s.config.contains_key("webhookUrl") {
            let mut c = s.config.clone();
            c.remove(super::skills::SEALED_URL);
            c.remove("webhookUrl");
            c.insert("webhookUrlConfigured".into(), Value::Bool(true));
            v.config = std::borrow::Cow::Owned(c);
        }
        // a URL saved before user info was refused is shown without it
        let url_of = |c: &Map<String, Value>| c.get("url").and_then(Value::as_str).map(str::to_string);
        if let Some(u) = url_of(&v.config)
            && let std::borrow::Cow::Owned(shown) = crate::delivery::shown_url(&u)
        {
            v.config.to_mut().insert("url".into(), Value::String(shown));
        }
        let hook = v.config.get("delivery").and_then(|d| d.pointer("/webhook/url")).and_then(Value::as_str);
        if let Some(u) = hook.map(str::to_string)
            && let std::borrow::Cow::Owned(shown) = crate::delivery::shown_url(&u)
            && let Some(w) = v.config.to_mut().get_mut("delivery").and_then(|d| d.get_mut("webhook"))
        {
            w["url"] = Value::String(shown);
        }
        if v.config.contains_key(super::skills::MCP_SEALED) {
            let mut c = v.config.clone().into_owned();
            c.remove(super::skills::MCP_SEALED);
            c.insert("mcpServerConfigured".into(), Value::Bool(true));
            v.config = std::borrow::Cow::Owned(c);
        }
        v
    }

    pub fn snapshot(s: &'a Skill) -> SkillView<'a> {
        SkillView {
            id: &s.id,
            agent_id: &s.agent_id,
            name: &s.name,
            capability: &s.capability,
            target: &s.target,
            config: std::borrow::Cow::Borrowed(&s.config),
            invocation_mode: &s.invocation_mode,
            enabled: s.enabled,
            created_at: None,
            updated_at: None,
        }
    }
}

/// `GET /agents/{id}/skills`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct SkillList<'a> {
    pub skills: Vec<SkillView<'a>>,
}

/// A directive's chip in the view.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChipView<'a> {
    skill_name: &'a str,
    start: usize,
    end: usize,
    text: &'a str,
    status: &'a str,
}

/// A directive: its body with its identity and located chips.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DirectiveView<'a> {
    #[serde(flatten)]
    body: &'a Body,
    id: &'a str,
    agent_id: &'a str,
    name: &'a str,
    created_at: &'a str,
    updated_at: &'a str,
    chips: Vec<ChipView<'a>>,
}

impl<'a> DirectiveView<'a> {
    pub fn of(r: &'a DirectiveRecord) -> DirectiveView<'a> {
        let d = &r.directive;
        DirectiveView {
            body: &d.body,
            id: &d.id,
            agent_id: &d.agent_id,
            name: &d.name,
            created_at: &d.created_at,
            updated_at: &d.updated_at,
            chips: r
                .chips
                .iter()
                .map(|c| ChipView {
                    skill_name: &c.skill_name,
                    start: c.start,
                    end: c.end,
                    text: &c.text,
                    status: c.status,
                })
                .collect(),
        }
    }
}

/// `GET /agents/{id}/directives`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct DirectiveList<'a> {
    pub directives: Vec<DirectiveView<'a>>,
}

/// `POST /agents/{id}/directives/draft`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DraftView<'a> {
    draft: &'a Value,
    generated_by: Option<ModelChoice>,
}

impl<'a> DraftView<'a> {
    pub fn of(d: &'a Draft) -> DraftView<'a> {
        DraftView {
            draft: &d.draft,
            generated_by: d
                .generated_by
                .as_ref()
                .map(|c| ModelChoice { provider: c.provider.clone(), model: c.model.clone() }),
        }
    }
}

/// A context variable of the workspace catalog.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VariableView<'a> {
    id: &'a str,
    name: &'a str,
    description: &'a str,
    value_type: &'a str,
    trust_tier: &'a str,
    sensitivity: &'a str,
    default_surfacing: &'a str,
    created_at: &'a str,
    updated_at: &'a str,
}

impl<'a> VariableView<'a> {
    pub fn of(v: &'a Variable) -> VariableView<'a> {
        VariableView {
            id: &v.id,
            name: &v.name,
            description: &v.description,
            value_type: &v.value_type,
            trust_tier: &v.trust_tier,
            sensitivity: &v.sensitivity,
            default_surfacing: &v.default_surfacing,
            created_at: &v.created_at,
            updated_at: &v.updated_at,
        }
    }
}

/// `GET /context-variables` and `GET /agents/{id}/context-variables`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextVariableList<T> {
    pub context_variables: Vec<T>,
}

/// A variable's enablement on an agent. Snapshots carry it without `updatedAt`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnablementView<'a> {
    context_variable_id: &'a str,
    name: &'a str,
    source: &'a str,
    surfacing: &'a str,
    enabled: bool,
    resolver_skill_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    updated_at: Option<&'a str>,
}

impl<'a> EnablementView<'a> {
    pub fn of(e: &'a Enablement) -> EnablementView<'a> {
        EnablementView { updated_at: Some(&e.updated_at), ..EnablementView::snapshot(e) }
    }

    pub fn snapshot(e: &'a Enablement) -> EnablementView<'a> {
        EnablementView {
            context_variable_id: &e.variable_id,
            name: &e.name,
            source: &e.source,
            surfacing: &e.surfacing,
            enabled: e.enabled,
            resolver_skill_id: e.resolver_skill_id.as_deref(),
            updated_at: None,
        }
    }
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
struct ScopeView<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    id: &'a str,
}

/// A value of a variable at one scope (`data` null when redacted).
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValueView<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    context_variable_id: Option<&'a str>,
    scope: ScopeView<'a>,
    data: &'a Option<Value>,
    redacted: bool,
    updated_at: &'a str,
}

impl<'a> ValueView<'a> {
    /// One value; `variable_id` is named when the value stands alone.
    pub fn of(v: &'a ScopedValue, variable_id: Option<&'a str>) -> ValueView<'a> {
        ValueView {
            context_variable_id: variable_id,
            scope: ScopeView { kind: &v.scope_type, id: &v.scope_id },
            data: &v.data,
            redacted: v.redacted,
            updated_at: &v.updated_at,
        }
    }
}

/// `GET /context-variables/{id}/values`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValueList<'a> {
    pub context_variable_id: &'a str,
    pub values: Vec<ValueView<'a>>,
}

/// The built-in skills catalog (`GET /skills`).
pub fn catalog(skills: &[BuiltInSkill]) -> Value {
    json!({"skills": skills.iter().map(catalog_entry).collect::<Vec<_>>()})
}

/// One built-in skill of the catalog.
pub fn catalog_entry(s: &BuiltInSkill) -> Value {
    let refs: Vec<Value> = s
        .contract_references
        .iter()
        .map(|r| {
            let mut v = Map::new();
            v.insert("kind".into(), json!(r.kind));
            v.insert("label".into(), json!(r.label));
            if let Some(m) = r.method {
                v.insert("method".into(), json!(m));
            }
            v.insert("path".into(), json!(r.path));
            Value::Object(v)
        })
        .collect();
    let outcomes: Vec<Value> = s
        .outcomes
        .iter()
        .map(|(name, status, grounded)| json!({"name": name, "displayName": name.replace('_', " "), "status": status, "groundedAnswer": grounded}))
        .collect();
    json!({
        "name": s.name, "displayName": s.display_name, "description": s.description, "owner": "steward",
        "executionClass": "interactive", "supportedCallers": ["chat", "api", "mcp"],
        "availability": {"available": true},
        "requiredCapabilities": s.required_capabilities, "contractReferences": refs,
        "diagnostics": {"defined": true, "shapeAware": s.name.starts_with("retrieval."), "strategyAware": s.name == "retrieval.answer", "supportedFields": []},
        "outcomes": outcomes,
    })
}

/// A revision in lists.
pub fn revision_summary(r: &Revision) -> Value {
    json!({"id": r.id, "agentId": r.agent_id, "label": r.label(), "kind": r.kind, "versionNumber": r.version_number,
           "generation": r.generation, "createdAt": r.created_at, "publishedAt": r.published_at})
}

/// `GET /agents/{id}/revisions`.
pub fn revision_list(rs: &[Revision]) -> Value {
    json!({"revisions": rs.iter().map(revision_summary).collect::<Vec<_>>()})
}

/// `GET /agents/{id}/revision-state`.
pub fn revision_state(s: &RevisionState) -> Value {
    let a = &s.agent;
    let status = if s.draft_is_published() { "published" } else { "draft_changes" };
    json!({
        "agentId": a.id,
        "status": status,
        "draft": {"generation": a.draft_generation, "basePublishedRevisionId": a.published_revision_id, "updatedAt": a.draft_updated_at,
                  "candidateRevisionId": s.current.as_ref().filter(|r| r.kind == "candidate").map(|r| r.id.clone())},
        "publishedRevision": s.published.as_ref().map(revision_summary),
        "canPublish": !s.draft_is_published(),
        "proactiveGreetingEnabled": a.settings.proactive_greeting_enabled,
    })
}

/// Entries of `key` in two snapshots, matched by `id_field`: added, changed and removed.
fn diff_by_id(before: &Value, after: &Value, key: &str, id_field: &str) -> Vec<Value> {
    let index = |v: &Value| -> Vec<(String, Value)> {
        v[key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| (x[id_field].as_str().unwrap_or("").to_string(), x.clone()))
            .collect()
    };
    let (b, a) = (index(before), index(after));
    let mut out = Vec::new();
    for (id, av) in &a {
        match b.iter().find(|(i, _)| i == id) {
            None => out.push(json!({"id": id, "change": "added", "after": av})),
            Some((_, bv)) if bv != av => out.push(json!({"id": id, "change": "changed", "before": bv, "after": av})),
            _ => {}
        }
    }
    for (id, bv) in &b {
        if !a.iter().any(|(i, _)| i == id) {
            out.push(json!({"id": id, "change": "removed", "before": bv}));
        }
    }
    out
}

/// A revision with its snapshot and what it changes against the published revision it was
/// based on.
pub fn revision_detail(d: &RevisionDetail) -> Value {
    let (r, base) = (&d.revision, &d.base);
    let s = &r.snapshot;
    let text_change =
        |k: &str| json!({"before": base.pointer(k), "after": s.pointer(k), "changed": base.pointer(k) != s.pointer(k)});
    let mut v = revision_summary(r);
    v["snapshotFormatVersion"] = json!(SNAPSHOT_FORMAT);
    v["scope"] = json!({"customInstructions": true, "directives": true, "routines": true, "contextVariableEnablements": true, "greeting": true, "skills": true, "settings": true});
    v["basePublishedRevisionId"] = json!(r.base_published_revision_id);
    v["snapshot"] = s.clone();
    v["enabledContextVariableIds"] = s["enabledContextVariableIds"].clone();
    v["scopedChanges"] = json!({
        "customInstruction": text_change("/customInstruction"),
        "greeting": text_change("/greeting"),
        "settings": text_change("/settings"),
        "directives": diff_by_id(base, s, "directives", "id"),
        "skills": diff_by_id(base, s, "skills", "id"),
        "routines": diff_by_id(base, s, "routines", "id"),
        "contextVariableEnablements": diff_by_id(base, s, "contextVariableEnablements", "contextVariableId"),
    });
    let warnings: Vec<Value> = s["directives"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| {
            let b = d["binding"]["skillName"].as_str()?;
            let ok = s["skills"].as_array().into_iter().flatten().any(|k| k["name"] == b && k["enabled"] == true);
            (!ok).then(|| json!({"code": "binding_unknown_skill", "directive": d["name"], "skillName": b}))
        })
        .collect();
    v["dependencyWarnings"] = json!(warnings);
    v
}
