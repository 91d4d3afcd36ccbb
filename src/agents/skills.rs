//! Agent skills: what an agent can do beyond answering (retrieve with its own scope, call an MCP
//! tool, send email, post to Slack, call a webhook, notify a person). The capability registry
//! says, per capability, its target, inputs, outcomes and invocation modes; each skill is checked
//! against it. Also the read-only catalog of built-in skills (`GET /skills`).

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::api::SkillView;
use super::{get_in, store, touch};
use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, Result};
use crate::storage::Conn;

pub const CAPABILITIES: [&str; 6] = ["retrieve", "mcp_tool", "email", "slack_post", "webhook_call", "notify"];
pub const MODES: [&str; 3] = ["default_answer", "routine_named", "agent_selectable"];

struct Capability {
    id: &'static str,
    target_kind: &'static str,
    target_required: bool,
    modes: &'static [&'static str],
    default_mode: &'static str,
    outcomes: &'static [&'static str],
}

const REGISTRY: [Capability; 6] = [
    Capability {
        id: "retrieve",
        target_kind: "source_scope",
        target_required: false,
        modes: &["default_answer", "routine_named", "agent_selectable"],
        default_mode: "default_answer",
        outcomes: &["found", "empty"],
    },
    Capability {
        id: "mcp_tool",
        // the target names the connection; its server (URL and credential, sealed) is held on
        // the skill itself
        target_kind: "mcp_connection",
        target_required: true,
        modes: &["routine_named", "agent_selectable"],
        default_mode: "routine_named",
        outcomes: &["completed", "failed"],
    },
    Capability {
        id: "email",
        target_kind: "customer_email_connection",
        target_required: false,
        modes: &["routine_named", "agent_selectable"],
        default_mode: "routine_named",
        outcomes: &["drafted", "sent", "failed"],
    },
    Capability {
        id: "slack_post",
        target_kind: "slack_connection",
        target_required: false,
        modes: &["routine_named", "agent_selectable"],
        default_mode: "routine_named",
        outcomes: &["posted", "failed"],
    },
    Capability {
        id: "webhook_call",
        target_kind: "webhook_destination",
        target_required: false,
        modes: &["routine_named", "agent_selectable"],
        default_mode: "routine_named",
        outcomes: &["delivered", "missing_input", "destination_not_found", "failed"],
    },
    Capability {
        id: "notify",
        target_kind: "notify_delivery",
        target_required: false,
        modes: &["routine_named", "agent_selectable"],
        default_mode: "routine_named",
        outcomes: &["delivered", "failed"],
    },
];

fn capability(id: &str) -> Option<&'static Capability> {
    REGISTRY.iter().find(|c| c.id == id)
}

/// The kind of target a registered capability's skills name (`None`: not registered here).
pub fn target_kind(cap: &str) -> Option<&'static str> {
    capability(cap).map(|c| c.target_kind)
}

/// `mode` (or the capability's default) when the registered capability supports it.
pub fn mode_for(cap: &str, mode: Option<&str>) -> Result<String> {
    let c = capability(cap).ok_or_else(|| Error::invalid_field("capability", format!("unknown capability `{cap}`")))?;
    check_mode(c, mode)
}

/// Retrieval config keys, their kinds and ranges (unset = the inherited default).
const RETRIEVAL_KEYS: [(&str, &str); 14] = [
    ("retrievalStrategy", "strategy"),
    ("vectorTopK", "int:1:300"),
    ("rerankEnabled", "bool"),
    ("rerankTopK", "int:1:100"),
    ("queryRewriteEnabled", "bool"),
    ("semanticRewriteInstructions", "text:2000"),
    ("lexicalRewriteInstructions", "text:2000"),
    ("suggestedQuestionsEnabled", "bool"),
    ("suggestedQuestionsCount", "int:1:4"),
    ("temporalStructuredLookupEnabled", "bool"),
    ("temporalBoostUpcomingEnabled", "bool"),
    ("temporalDeterministicSortEnabled", "bool"),
    ("instruction", "text:2000"),
    ("sourceScope", "scope"),
];

/// A skill's configuration: free-form JSON keys (checked per capability by [`check_config`]).
pub type SkillConfig = Map<String, Value>;
/// A retrieval override as sent: free-form JSON, checked to be an object of known keys.
pub type RetrievalOverride = Value;
/// The capability registry as the dashboard reads it: a static descriptive document.
pub type CapabilityDoc = Value;

/// Checks a retrieval override object: known keys only, each in range.
pub fn check_retrieval_config(v: &RetrievalOverride, at: &str) -> Result<()> {
    let Some(m) = v.as_object() else { return Err(Error::invalid_field(at, "must be an object")) };
    for (k, val) in m {
        let Some((_, kind)) = RETRIEVAL_KEYS.iter().find(|(n, _)| n == k) else {
            return Err(Error::invalid_field(&format!("{at}.{k}"), format!("unknown retrieval setting `{k}`")));
        };
        let field = format!("{at}.{k}");
        let ok = match *kind {
            "bool" => val.is_boolean(),
            "strategy" => matches!(val.as_str(), Some("fixed" | "reasoning" | "auto")),
            "scope" => serde_json::from_value::<super::SourceScope>(val.clone()).is_ok(),
            k if k.starts_with("int:") => {
                let p: Vec<i64> = k[4..].split(':').filter_map(|x| x.parse().ok()).collect();
                val.as_i64().is_some_and(|n| n >= p[0] && n <= p[1])
            }
            k if k.starts_with("text:") => {
                val.as_str().is_some_and(|s| s.chars().count() <= k[5..].parse::<usize>().unwrap_or(0))
            }
            _ => false,
        };
        if !ok {
            let expect = match *kind {
                "bool" => "a boolean".to_string(),
                "strategy" => "fixed, reasoning or auto".to_string(),
                "scope" => "{mode: all} or {mode: selected, sourceIds}".to_string(),
                k if k.starts_with("int:") => format!("an integer from {}", k[4..].replace(':', " to ")),
                k => format!("text of at most {} characters", &k[5..]),
            };
            return Err(Error::invalid_field(&field, format!("{field} must be {expect}")));
        }
    }
    if let (Some(r), Some(v)) =
        (m.get("rerankTopK").and_then(Value::as_i64), m.get("vectorTopK").and_then(Value::as_i64))
        && r > v.max(50)
    {
        return Err(Error::invalid_field(
            &format!("{at}.rerankTopK"),
            "rerankTopK cannot exceed the candidates retrieved",
        ));
    }
    Ok(())
}

fn object(v: Option<&Value>) -> Map<String, Value> {
    v.and_then(Value::as_object).cloned().unwrap_or_default()
}

fn disjoint(m: &Map<String, Value>, a: &str, b: &str) -> Result<()> {
    let (x, y) = (object(m.get(a)), object(m.get(b)));
    if let Some(k) = x.keys().find(|k| y.contains_key(*k)) {
        return Err(Error::invalid_field(&format!("config.{b}.{k}"), format!("`{k}` cannot be both {a} and {b}")));
    }
    Ok(())
}

/// Validates `config` for `capability` (and normalizes it in place).
pub fn check_config(cap: &str, config: &mut SkillConfig) -> Result<()> {
    match cap {
        "retrieve" => check_retrieval_config(&Value::Object(config.clone()), "config"),
        "notify" => {
            for k in config.keys() {
                if !["delivery", "exposedInputs"].contains(&k.as_str()) {
                    return Err(Error::invalid_field(&format!("config.{k}"), format!("unknown notify setting `{k}`")));
                }
            }
            if let Some(d) = config.get_mut("delivery") {
                let mut delivery: super::Delivery = serde_json::from_value(d.clone())
                    .map_err(|e| Error::invalid_field("config.delivery", format!("invalid delivery: {e}")))?;
                super::check_recipients("config.delivery.recipientEmails", &mut delivery.recipient_emails)?;
                if let Some(w) = &delivery.webhook {
                    super::check_http_url("config.delivery.webhook.url", &w.url)?;
                }
                *d = serde_json::to_value(delivery)?;
            }
            if let Some(e) = config.get("exposedInputs") {
                let ok = e.as_object().is_some_and(|m| {
                    m.iter().all(|(k, v)| ["message", "email"].contains(&k.as_str()) && v.is_boolean())
                });
                if !ok {
                    return Err(Error::invalid_field(
                        "config.exposedInputs",
                        "exposedInputs is {message?: boolean, email?: boolean}",
                    ));
                }
            }
            Ok(())
        }
        "mcp_tool" => {
            if let Some(u) = config.get("serverUrl") {
                let u = u.as_str().ok_or_else(|| Error::invalid_field("config.serverUrl", "serverUrl is a string"))?;
                super::check_http_url("config.serverUrl", u)?;
            }
            if let Some(c) = config.get("credential") {
                let ok = c
                    .as_str()
                    .is_some_and(|c| !c.trim().is_empty() && c.len() <= 4096 && !c.chars().any(char::is_control));
                if !ok {
                    return Err(Error::invalid_field("config.credential", "credential is the server's bearer token"));
                }
            }
            let tool = config.get("toolName").and_then(Value::as_str).unwrap_or("");
            if tool.trim().is_empty() || tool.chars().count() > 200 {
                return Err(Error::invalid_field("config.toolName", "toolName is required (at most 200 characters)"));
            }
            disjoint(config, "boundParams", "exposedParams")?;
            for o in config.get("declaredOutcomes").and_then(Value::as_array).into_iter().flatten() {
                let ok = o.as_str().is_some_and(|s| {
                    s.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                });
                if !ok {
                    return Err(Error::invalid_field(
                        "config.declaredOutcomes",
                        "outcome names match ^[a-z][a-z0-9_]*$",
                    ));
                }
            }
            Ok(())
        }
        "email" => {
            match config.get("mode").and_then(Value::as_str) {
                None => {
                    config.insert("mode".into(), json!("draft"));
                }
                Some("draft" | "send") => {}
                Some(_) => return Err(Error::invalid_field("config.mode", "mode is draft or send")),
            }
            disjoint(config, "boundInputs", "exposedInputs")
        }
        "webhook_call" => {
            if let Some(u) = config.get("url") {
                let u = u.as_str().ok_or_else(|| Error::invalid_field("config.url", "url is a string"))?;
                super::check_http_url("config.url", u)?;
            }
            disjoint(config, "boundPayload", "exposedPayload")
        }
        "slack_post" => {
            if let Some(u) = config.get("webhookUrl") {
                let ok = u.as_str().is_some_and(|u| u.starts_with("https://") && u.len() <= 2048);
                if !ok {
                    return Err(Error::invalid_field(
                        "config.webhookUrl",
                        "webhookUrl is an https:// incoming-webhook URL",
                    ));
                }
            }
            disjoint(config, "boundInputs", "exposedInputs")
        }
        _ => Ok(()),
    }
}

/// Where a skill's sealed incoming-webhook URL lives in its config (never shown by the API).
pub const SEALED_URL: &str = "webhookUrlSealed";

/// The associated data a skill's sealed URL is bound to.
fn sealed_aad(agent_id: &str) -> String {
    format!("agent_skill:{agent_id}:webhookUrl")
}

/// Seals a `slack_post` skill's `webhookUrl` (the URL is its credential): replaced in the config by
/// [`SEALED_URL`]. Needs `CONNECTOR_ENCRYPTION_KEY` (503 `encryption_not_configured` without it).
fn seal_secrets(app: &App, agent_id: &str, config: &mut SkillConfig, current: Option<&SkillConfig>) -> Result<()> {
    // what the API shows in place of the secret is never stored; a client cannot supply a sealed value
    config.remove("webhookUrlConfigured");
    config.remove(SEALED_URL);
    if !config.contains_key("webhookUrl")
        && let Some(sealed) = current.and_then(|c| c.get(SEALED_URL))
    {
        // an edit that does not touch the URL keeps it
        config.insert(SEALED_URL.into(), sealed.clone());
        return Ok(());
    }
    if let Some(Value::String(url)) = config.remove("webhookUrl") {
        let key = app.config.encryption_key.as_ref().map(|k| k.expose());
        config.insert(SEALED_URL.into(), crate::crypto::seal_text(key, &url, &sealed_aad(agent_id))?);
    }
    Ok(())
}

/// Where an `mcp_tool` skill's sealed server (`{serverUrl, credential}`) lives in its config.
pub const MCP_SEALED: &str = "mcpServerSealed";

fn mcp_aad(agent_id: &str) -> String {
    format!("agent_skill:{agent_id}:mcpServer")
}

/// Seals an `mcp_tool` skill's `serverUrl` and `credential` together, replaced in the config by
/// [`MCP_SEALED`]; an edit that gives neither keeps the sealed server (a skill without one is
/// unbound: its calls fail with `no_server`). Needs
/// `CONNECTOR_ENCRYPTION_KEY` (503 `encryption_not_configured` without it).
fn seal_mcp(app: &App, agent_id: &str, config: &mut SkillConfig, current: Option<&SkillConfig>) -> Result<()> {
    config.remove("mcpServerConfigured");
    config.remove(MCP_SEALED);
    let url = config.remove("serverUrl");
    let credential = config.remove("credential");
    match (url, current.and_then(|c| c.get(MCP_SEALED))) {
        (Some(Value::String(url)), _) => {
            let plain = serde_json::json!({"serverUrl": url, "credential": credential.and_then(|c| c.as_str().map(str::to_string))});
            let key = app.config.encryption_key.as_ref().map(|k| k.expose());
            config.insert(MCP_SEALED.into(), crate::crypto::seal_text(key, &plain.to_string(), &mcp_aad(agent_id))?);
            Ok(())
        }
        (None, Some(sealed)) if credential.is_none() => {
            config.insert(MCP_SEALED.into(), sealed.clone());
            Ok(())
        }
        // not bound to a server yet: its calls fail with `no_server` until one is set
        (None, _) if credential.is_none() => Ok(()),
        _ => Err(Error::invalid_field("config.serverUrl", "a credential needs its serverUrl")),
    }
}

/// An `mcp_tool` skill's server: `(serverUrl, credential)`, opened from its sealed config.
pub fn open_mcp_server(app: &App, agent_id: &str, config: &SkillConfig) -> Result<Option<(String, Option<String>)>> {
    let Some(v) = config.get(MCP_SEALED) else { return Ok(None) };
    let key = app.config.encryption_key.as_ref().map(|k| k.expose());
    let plain: Value = serde_json::from_str(&crate::crypto::open_text(key, v, &mcp_aad(agent_id))?)?;
    let url = plain["serverUrl"].as_str().unwrap_or_default().to_string();
    Ok(Some((url, plain["credential"].as_str().map(str::to_string))))
}

/// The server of an agent's `mcp_tool` skill, for listing its tools (agent manage permission):
/// `(serverUrl, credential)`; 400 for another capability, 409 when no server is set.
pub fn mcp_server_of(app: &App, p: &Principal, agent_id: &str, skill_id: &str) -> Result<(String, Option<String>)> {
    p.require(Perm::AgentsManage)?;
    let skill = get(app, p, agent_id, skill_id)?;
    if skill.capability != "mcp_tool" {
        return Err(Error::invalid("only an mcp_tool skill has an MCP server"));
    }
    open_mcp_server(app, agent_id, &skill.config)?.ok_or_else(|| Error::conflict("this skill has no MCP server yet"))
}

/// Opens a skill's sealed incoming-webhook URL.
pub fn open_sealed_url(app: &App, agent_id: &str, config: &SkillConfig) -> Result<Option<String>> {
    let Some(v) = config.get(SEALED_URL) else { return Ok(None) };
    let key = app.config.encryption_key.as_ref().map(|k| k.expose());
    Ok(Some(crate::crypto::open_text(key, v, &sealed_aad(agent_id))?))
}

/// Config keys that stay behind when an agent is exported (recipients, URLs, sealed secrets).
pub fn non_portable_keys(capability: &str) -> &'static [&'static str] {
    match capability {
        "notify" => &["delivery"],
        "webhook_call" => &["url"],
        "slack_post" => &["webhookUrl", SEALED_URL],
        "email" => &["boundInputs"],
        "retrieve" => &["sourceScope"],
        "mcp_tool" => &["serverUrl", "credential", MCP_SEALED],
        _ => &[],
    }
}

/// Skill names: lowercase identifiers (`[a-z][a-z0-9_.-]*`, at most 64, not ending in `.`).
pub fn clean_name(raw: &str) -> Result<String> {
    let n = raw.trim().to_lowercase();
    let ok = n.len() <= 64
        && n.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '.' | '-'))
        && !n.ends_with(['.', '-']);
    if ok {
        Ok(n)
    } else {
        Err(Error::invalid_field(
            "name",
            "a skill name is a lowercase identifier: letters, digits, _ . - (starting with a letter, at most 64)",
        ))
    }
}

#[derive(Debug, Clone)]
pub struct Skill {
    pub id: String,
    pub agent_id: String,
    pub name: String,
    pub capability: String,
    pub target: Option<Value>,
    pub config: Map<String, Value>,
    pub invocation_mode: String,
    pub enabled: bool,
    pub created_at: String,
    pub updated_at: String,
}

pub fn of_agent(c: &Conn, agent_id: &str) -> Result<Vec<Skill>> {
    store::skills_of(c, agent_id)
}

pub fn by_name(c: &Conn, agent_id: &str, name: &str) -> Result<Option<Skill>> {
    store::skill_by_name(c, agent_id, name)
}

fn by_id(c: &Conn, agent_id: &str, id: &str) -> Result<Skill> {
    store::skill_by_id(c, agent_id, id)?.ok_or_else(|| Error::not_found("skill"))
}

fn check_target(cap: &Capability, target: Option<&Value>) -> Result<Option<Value>> {
    match target {
        None | Some(Value::Null) if !cap.target_required => Ok(match cap.id {
            "notify" => Some(json!({"kind": "notify_delivery", "id": null})),
            _ => None,
        }),
        None | Some(Value::Null) => Err(Error::invalid_field(
            "target",
            format!("a {} skill needs a target {{kind: {}, id}}", cap.id, cap.target_kind),
        )),
        Some(t) => {
            let kind = t["kind"].as_str().unwrap_or("");
            if kind != cap.target_kind {
                return Err(Error::invalid_field(
                    "target.kind",
                    format!("the target kind of a {} skill is {}", cap.id, cap.target_kind),
                ));
            }
            let id = &t["id"];
            match cap.id {
                "notify" | "retrieve" if !id.is_null() => {
                    Err(Error::invalid_field("target.id", "this target has no id (null)"))
                }
                "notify" | "retrieve" => Ok(Some(json!({"kind": kind, "id": null}))),
                _ if id.as_str().is_none_or(|s| s.trim().is_empty()) => {
                    Err(Error::invalid_field("target.id", "target.id is required"))
                }
                _ => Ok(Some(json!({"kind": kind, "id": id}))),
            }
        }
    }
}

fn check_mode(cap: &Capability, mode: Option<&str>) -> Result<String> {
    let m = mode.unwrap_or(cap.default_mode);
    if !cap.modes.contains(&m) {
        return Err(Error::invalid_field(
            "invocationMode",
            format!("a {} skill supports {}", cap.id, cap.modes.join(", ")),
        ));
    }
    Ok(m.to_string())
}

pub fn capabilities(app: &App, p: &Principal, agent_id: &str) -> Result<CapabilityDoc> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| get_in(c, &p.workspace_id, agent_id))?;
    let defaults = serde_json::to_value(crate::settings::retrieval::RetrievalDefaults::default())?;
    let smtp = app.config.smtp.is_some();
    let sealing = app.config.encryption_key.is_some();
    let reason = |id: &str| match id {
        "mcp_tool" if !sealing => {
            Some("needs CONNECTOR_ENCRYPTION_KEY to keep the MCP server's URL and credential sealed")
        }
        "email" if !smtp => Some("needs an SMTP server (STEWARD_SMTP_HOST)"),
        "slack_post" if !sealing => Some("needs CONNECTOR_ENCRYPTION_KEY to keep the webhook URL sealed"),
        _ => None,
    };
    let caps: Vec<Value> = REGISTRY
        .iter()
        .map(|c| {
            let mut v = json!({
                "id": c.id,
                "targetKind": c.target_kind,
                "targetRequired": c.target_required,
                "inputSchema": input_schema(c.id),
                "outcomes": c.outcomes,
                "nonPortableConfigKeys": non_portable_keys(c.id),
                "invocationModes": c.modes,
                "defaultInvocationMode": c.default_mode,
                // delivering skills go through the outbox (SMTP for email; the sealed incoming webhook for Slack)
                "availability": {"available": reason(c.id).is_none(), "reason": reason(c.id)},
            });
            if c.id == "retrieve" {
                v["inheritedDefaults"] = defaults.clone();
                v["fieldHelp"] = json!({
                    "retrievalStrategy": "fixed: one search pass; reasoning: the model plans several searches; auto: chosen per query",
                    "vectorTopK": "chunks fetched from the vector index before filtering and reranking (1–300)",
                    "rerankEnabled": "rerank candidates with the rerank model (adds a model call per retrieval)",
                    "rerankTopK": "chunks kept after reranking (1–100)",
                    "queryRewriteEnabled": "rewrite the question into a semantic and a keyword query",
                    "semanticRewriteInstructions": "replaces the default instruction for the semantic query",
                    "lexicalRewriteInstructions": "replaces the default instruction for the keyword query",
                    "suggestedQuestionsEnabled": "offer follow-up questions",
                    "suggestedQuestionsCount": "how many follow-up questions (1–4)",
                });
                v["dependencyHints"] = json!({"rerankTopK": "used when rerankEnabled", "semanticRewriteInstructions": "used when queryRewriteEnabled", "lexicalRewriteInstructions": "used when queryRewriteEnabled", "suggestedQuestionsCount": "used when suggestedQuestionsEnabled"});
            }
            v
        })
        .collect();
    Ok(json!({"capabilities": caps}))
}

fn input_schema(cap: &str) -> Value {
    match cap {
        "mcp_tool" => json!({"source": "discovered"}),
        "retrieve" => {
            json!({"source": "static", "schema": {"fields": [{"name": "query", "type": "string"}], "required": ["query"]}})
        }
        "email" => {
            let fields: Vec<Value> = ["to", "cc", "subject", "bodyText", "bodyHtml", "replyTo"]
                .iter()
                .map(|f| json!({"name": f, "type": "string"}))
                .collect();
            json!({"source": "static", "schema": {"fields": fields}})
        }
        "slack_post" => {
            json!({"source": "static", "schema": {"fields": [{"name": "text", "type": "string"}], "required": ["text"]}})
        }
        "webhook_call" => json!({"source": "static", "schema": {"fields": [{"name": "payload", "type": "object"}]}}),
        _ => {
            json!({"source": "static", "schema": {"fields": [{"name": "message", "type": "string"}, {"name": "email", "type": "string"}]}})
        }
    }
}

/// One skill of an agent in the caller's workspace.
pub fn get(app: &App, p: &Principal, agent_id: &str, skill_id: &str) -> Result<Skill> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| {
        get_in(c, &p.workspace_id, agent_id)?;
        by_id(c, agent_id, skill_id)
    })
}

pub fn list(app: &App, p: &Principal, agent_id: &str) -> Result<Vec<Skill>> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| {
        get_in(c, &p.workspace_id, agent_id)?;
        of_agent(c, agent_id)
    })
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewSkill {
    pub name: String,
    pub capability: String,
    pub target: Option<Value>,
    pub config: Option<Map<String, Value>>,
    pub invocation_mode: Option<String>,
    pub enabled: Option<bool>,
}

pub fn create(app: &App, p: &Principal, actor: &Actor, agent_id: &str, b: NewSkill) -> Result<Skill> {
    p.require(Perm::AgentsManage)?;
    let name = clean_name(&b.name)?;
    let cap = capability(&b.capability).ok_or_else(|| {
        Error::invalid_field("capability", format!("capability must be one of {}", CAPABILITIES.join(", ")))
    })?;
    let target = check_target(cap, b.target.as_ref())?;
    let mode = check_mode(cap, b.invocation_mode.as_deref())?;
    let mut config = b.config.unwrap_or_default();
    config.retain(|_, v| !v.is_null());
    check_config(cap.id, &mut config)?;
    seal_secrets(app, agent_id, &mut config, None)?;
    if cap.id == "mcp_tool" {
        seal_mcp(app, agent_id, &mut config, None)?;
    }
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        get_in(tx, &p.workspace_id, agent_id)?;
        if by_name(tx, agent_id, &name)?.is_some() {
            return Err(Error::conflict(format!("the agent already has a skill named `{name}`"))
                .with_details(json!({"field": "name"})));
        }
        let id = crate::ids::new_id();
        let skill = Skill {
            id: id.clone(),
            agent_id: agent_id.to_string(),
            name: name.clone(),
            capability: cap.id.to_string(),
            target,
            config,
            invocation_mode: mode,
            enabled: b.enabled.unwrap_or(true),
            created_at: now.clone(),
            updated_at: now.clone(),
        };
        store::insert_skill(tx, &p.workspace_id, &skill)?;
        touch(tx, agent_id, &now)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("agent.skill.created")
                .workspace(&p.workspace_id)
                .target("agent_skill", &id)
                .meta(json!({"agentId": agent_id, "capability": cap.id, "name": name})),
        )?;
        by_id(tx, agent_id, &id)
    })
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillPatch {
    pub name: Option<String>,
    pub target: Option<Value>,
    pub config: Option<Map<String, Value>>,
    pub replace_config: Option<Map<String, Value>>,
    pub invocation_mode: Option<String>,
    pub enabled: Option<bool>,
}

/// Shallow merge: keys sent replace, `null` removes the key (back to the inherited default).
pub fn merge_config(cur: &SkillConfig, patch: &SkillConfig) -> SkillConfig {
    let mut out = cur.clone();
    for (k, v) in patch {
        if v.is_null() {
            out.remove(k);
        } else {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

pub fn update(app: &App, p: &Principal, actor: &Actor, agent_id: &str, skill_id: &str, b: SkillPatch) -> Result<Skill> {
    p.require(Perm::AgentsManage)?;
    if b.config.is_some() && b.replace_config.is_some() {
        return Err(Error::invalid("send either config (a merge) or replaceConfig (the whole config), not both"));
    }
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        get_in(tx, &p.workspace_id, agent_id)?;
        let cur = by_id(tx, agent_id, skill_id)?;
        let cap =
            capability(&cur.capability).ok_or_else(|| Error::internal_msg("stored skill has an unknown capability"))?;
        let name = match &b.name {
            Some(n) => clean_name(n)?,
            None => cur.name.clone(),
        };
        if name != cur.name && by_name(tx, agent_id, &name)?.is_some() {
            return Err(Error::conflict(format!("the agent already has a skill named `{name}`"))
                .with_details(json!({"field": "name"})));
        }
        let target = if b.target.is_some() { check_target(cap, b.target.as_ref())? } else { cur.target.clone() };
        let mode = match &b.invocation_mode {
            Some(m) => check_mode(cap, Some(m))?,
            None => cur.invocation_mode.clone(),
        };
        let mut config = match (&b.config, &b.replace_config) {
            (Some(patch), None) => merge_config(&cur.config, patch),
            (None, Some(all)) => {
                all.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), v.clone())).collect()
            }
            _ => cur.config.clone(),
        };
        let clears_url = b.config.as_ref().and_then(|c| c.get("webhookUrl")).is_some_and(Value::is_null);
        check_config(cap.id, &mut config)?;
        seal_secrets(app, agent_id, &mut config, if clears_url { None } else { Some(&cur.config) })?;
        if cap.id == "mcp_tool" {
            seal_mcp(app, agent_id, &mut config, Some(&cur.config))?;
        }
        let enabled = b.enabled.unwrap_or(cur.enabled);
        let next =
            Skill { name, target, config, invocation_mode: mode, enabled, updated_at: now.clone(), ..cur.clone() };
        store::update_skill(tx, &next)?;
        if cur.enabled && !enabled {
            // disabling a skill disables the variables it resolves; re-enabling does not opt them back in
            store::disable_resolved_variables(tx, skill_id, &now)?;
        }
        touch(tx, agent_id, &now)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("agent.skill.updated")
                .workspace(&p.workspace_id)
                .target("agent_skill", skill_id)
                .meta(json!({"agentId": agent_id, "enabled": enabled})),
        )?;
        by_id(tx, agent_id, skill_id)
    })
}

pub fn delete(app: &App, p: &Principal, actor: &Actor, agent_id: &str, skill_id: &str) -> Result<()> {
    p.require(Perm::AgentsManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        get_in(tx, &p.workspace_id, agent_id)?;
        by_id(tx, agent_id, skill_id)?;
        // its resolver enablements go with it (also by foreign key)
        store::delete_skill(tx, skill_id)?;
        touch(tx, agent_id, &now)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("agent.skill.deleted")
                .workspace(&p.workspace_id)
                .target("agent_skill", skill_id)
                .meta(json!({"agentId": agent_id})),
        )
    })
}

pub use super::catalog::{BuiltInSkill, CATALOG, ContractRef, catalog_get, catalog_list};

/// Skills of an agent, as a revision snapshot carries them (without timestamps).
pub fn snapshot(c: &Conn, agent_id: &str) -> Result<Vec<super::revisions::SnapshotEntry>> {
    of_agent(c, agent_id)?.iter().map(|s| Ok(serde_json::to_value(SkillView::snapshot(s))?)).collect()
}
