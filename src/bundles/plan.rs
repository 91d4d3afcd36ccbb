//! Reading a bundle into a plan, before anything is written: the versions first (an unread
//! `bundleVersion` or `agent.schemaVersion` is a 400 and nothing else is looked at), then every
//! element, each refused by the field that is wrong (`agentSkills[2].config.toolName`). What the
//! bundle alone shows cannot come across as it was goes into the plan's unresolved list, with what
//! the import does instead (spec: Agent bundles rules 5 and 6): surfaces import off, selected
//! sources become none selected, connection-bound skills import disabled, and so on. What depends
//! on the destination workspace (its variables, its webhook destinations, routine validation) is
//! decided while applying (`import.rs`).

use std::collections::HashSet;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::api::{LOGO_REF, REF_KEY, RoutineEntry, SkillEntry, TARGET_REF, VariableEntry};
use super::export::{canonical, redact_scope};
use super::{ACCEPTED_SCHEMA_VERSIONS, BUNDLE_VERSION, Unresolved, UnresolvedKind as K};
use crate::agents::directives::{Body, Input};
use crate::agents::{self, Settings, SourceScope};
use crate::error::{Error, ErrorCode, Result};
use crate::storage::Conn;

/// The top-level keys a bundle may carry (`evalCases` beyond the spec: `evals::portable`).
const KNOWN: [&str; 8] = [
    "bundleVersion",
    "agent",
    "agentSkills",
    "contextVariables",
    "routines",
    "directives",
    "evalCases",
    "idempotencyKey",
];

/// A skill to create.
#[derive(Debug, Clone)]
pub(super) struct PlannedSkill {
    pub name: String,
    pub capability: String,
    pub mode: String,
    pub enabled: bool,
    pub config: Map<String, Value>,
    pub target: Option<Value>,
}

/// What an import writes, and what could not come across as it was.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub name: String,
    pub settings: Settings,
    pub skills: Vec<PlannedSkill>,
    pub variables: Vec<VariableEntry>,
    pub routines: Vec<RoutineEntry>,
    pub directives: Vec<(String, Body)>,
    pub eval_cases: Vec<crate::evals::portable::PortableCase>,
    pub unresolved: Vec<Unresolved>,
    pub key: Option<String>,
    /// sha256 of the canonical bundle without its idempotency key.
    pub fingerprint: String,
}

/// `e` with its field named under `prefix` (`agentSkills[2]` + `config.url`).
fn under(prefix: &str, e: Error) -> Error {
    if e.code != ErrorCode::InvalidRequest {
        return e;
    }
    let inner = e.details.as_ref().and_then(|d| d["field"].as_str()).map(str::to_string);
    let field = match inner {
        Some(f) if !f.is_empty() => format!("{prefix}.{f}"),
        _ => prefix.to_string(),
    };
    let message = if e.message.starts_with(&field) { e.message } else { format!("{field}: {}", e.message) };
    Error::invalid_field(&field, message)
}

/// A version field: required, and one of `accepted` (else 400 `unsupported_bundle_version`).
fn check_version(v: Option<&Value>, field: &str, accepted: &[i64]) -> Result<()> {
    match v {
        None | Some(Value::Null) => Err(Error::invalid_field(field, format!("{field} is required"))),
        Some(x) if x.as_i64().is_some_and(|n| accepted.contains(&n)) => Ok(()),
        Some(x) => Err(Error::new(
            ErrorCode::UnsupportedBundleVersion,
            format!(
                "{field} {x} is not supported: this server reads {field} {}",
                accepted.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ")
            ),
        )
        .with_details(json!({"field": field, "got": x, "accepted": accepted}))),
    }
}

/// The array at `key` (absent or null: empty).
fn array<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<&'a [Value]> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(Error::invalid_field(key, format!("{key} must be an array"))),
    }
}

/// Element `i` of `key` as `T`, or 400 naming it.
fn element<T: DeserializeOwned>(key: &str, i: usize, v: &Value) -> Result<T> {
    let field = format!("{key}[{i}]");
    serde_json::from_value(v.clone()).map_err(|e| Error::invalid_field(&field, format!("{field}: {e}")))
}

/// Reads `raw` (the request body) into a plan; 400 for anything it cannot read.
pub(super) fn plan(c: &Conn, raw: &Value) -> Result<Plan> {
    let obj = raw.as_object().ok_or_else(|| Error::invalid("a bundle is a JSON object"))?;
    check_version(obj.get("bundleVersion"), "bundleVersion", &[BUNDLE_VERSION])?;
    let agent = match obj.get("agent") {
        Some(Value::Object(m)) => m,
        None | Some(Value::Null) => return Err(Error::invalid_field("agent", "agent is required")),
        Some(_) => return Err(Error::invalid_field("agent", "agent must be an object")),
    };
    check_version(agent.get("schemaVersion"), "agent.schemaVersion", &ACCEPTED_SCHEMA_VERSIONS)?;
    if let Some(k) = obj.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(Error::invalid_field(k, format!("`{k}` is not a field of a bundle")));
    }
    let key = match obj.get("idempotencyKey") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.trim().is_empty() && s.trim().chars().count() <= 200 => Some(s.trim().to_string()),
        Some(_) => return Err(Error::invalid_field("idempotencyKey", "idempotencyKey is 1 to 200 characters")),
    };
    let mut unresolved = Vec::new();
    let (name, settings) = agent_plan(agent, &mut unresolved)?;
    let skills = skills_plan(array(obj, "agentSkills")?, &mut unresolved)?;
    let variables = variables_plan(array(obj, "contextVariables")?)?;
    let routines = routines_plan(array(obj, "routines")?)?;
    let mut directives = Vec::new();
    let mut seen = HashSet::new();
    for (i, v) in array(obj, "directives")?.iter().enumerate() {
        let field = format!("directives[{i}]");
        let (name, body) = agents::imported::check_directive(c, element::<Input>("directives", i, v)?, &field)?;
        if !seen.insert(name.clone()) {
            return Err(Error::invalid_field(&format!("{field}.name"), format!("two directives are named `{name}`")));
        }
        directives.push((name, body));
    }
    let eval_cases = crate::evals::portable::parse(obj.get("evalCases"))?;
    let mut rest = obj.clone();
    rest.remove("idempotencyKey");
    let fingerprint = hex::encode(Sha256::digest(serde_json::to_vec(&canonical(&Value::Object(rest)))?));
    Ok(Plan { name, settings, skills, variables, routines, directives, eval_cases, unresolved, key, fingerprint })
}

/// The agent's name and settings, with surfaces, sources and the logo brought down to what the
/// destination can hold.
fn agent_plan(agent: &Map<String, Value>, out: &mut Vec<Unresolved>) -> Result<(String, Settings)> {
    let mut m = agent.clone();
    m.remove("schemaVersion");
    let name = match m.remove("name") {
        Some(Value::String(s)) => s.split_whitespace().collect::<Vec<_>>().join(" "),
        _ => String::new(),
    };
    if name.is_empty() || name.chars().count() > agents::MAX_NAME {
        return Err(Error::invalid_field("agent.name", "agent.name must be 1 to 200 characters"));
    }
    match m.remove("logo") {
        None | Some(Value::Null) => {}
        Some(v) if v == json!({REF_KEY: LOGO_REF}) => out.push(Unresolved::new(
            K::AssetNotPortable,
            "agent.logo",
            "The logo's image does not travel in a bundle; the agent imports without a logo.",
        )),
        Some(_) => return Err(Error::invalid_field("agent.logo", "agent.logo is {\"__ref\": \"agentLogo\"} or null")),
    }
    if m.contains_key("contactRequestDelivery") {
        return Err(Error::invalid_field(
            "agent.contactRequestDelivery",
            "contactRequestDelivery does not travel in a bundle: set recipients and webhook on the imported agent",
        ));
    }
    let defaults = serde_json::to_value(Settings::default())?;
    for (k, v) in &m {
        let field = format!("agent.{k}");
        if defaults.get(k).is_none() {
            return Err(Error::invalid_field(&field, format!("`{k}` is not an agent setting")));
        }
        let mut one = defaults.clone();
        one[k] = v.clone();
        serde_json::from_value::<Settings>(one).map_err(|e| Error::invalid_field(&field, format!("{field}: {e}")))?;
    }
    let mut settings: Settings =
        serde_json::from_value(Value::Object(m)).map_err(|e| Error::invalid_field("agent", format!("agent: {e}")))?;
    settings.validate().map_err(|e| under("agent", e))?;
    let surfaces = &mut settings.surface_settings;
    for (on, element) in [
        (&mut surfaces.anonymous_chat.enabled, "agent.surfaceSettings.anonymousChat"),
        (&mut surfaces.website_embed.enabled, "agent.surfaceSettings.websiteEmbed"),
    ] {
        if *on {
            *on = false;
            out.push(Unresolved::new(
                K::SurfaceCredentialUnbound,
                element,
                "The surface's launch token stayed in the source workspace; it imports off.",
            ));
        }
    }
    if let SourceScope::Selected { source_ids } = &mut settings.source_scope {
        source_ids.clear();
        out.push(Unresolved::new(
            K::DocumentSourceUnresolved,
            "agent.sourceScope",
            "The agent searched selected sources, whose ids do not carry across; it imports with none selected.",
        ));
    }
    if let Some(scope) = settings.skill_settings.get_mut("retrieval.answer").and_then(|r| r.get_mut("sourceScope"))
        && scope["mode"] == "selected"
    {
        redact_scope(scope);
        out.push(Unresolved::new(
            K::DocumentSourceUnresolved,
            "agent.skillSettings.retrieval.answer.sourceScope",
            "The retrieval override searched selected sources; it imports with none selected.",
        ));
    }
    if settings.contact_requests_enabled {
        out.push(Unresolved::new(
            K::ContactDeliveryUnbound,
            "agent.contactRequestDelivery",
            "Contact requests are on, but their recipients and webhook stayed in the source workspace; until they are set, requests go to the workspace owner.",
        ));
    }
    Ok((name, settings))
}

/// The skills to create; the ones that cannot be, and what each created one left behind.
fn skills_plan(entries: &[Value], out: &mut Vec<Unresolved>) -> Result<Vec<PlannedSkill>> {
    let mut seen = HashSet::new();
    let mut planned = Vec::new();
    for (i, v) in entries.iter().enumerate() {
        let at = format!("agentSkills[{i}]");
        let e: SkillEntry = element("agentSkills", i, v)?;
        let name = agents::skills::clean_name(&e.name).map_err(|x| under(&at, x))?;
        if !seen.insert(name.clone()) {
            return Err(Error::invalid_field(&format!("{at}.name"), format!("two skills are named `{name}`")));
        }
        let element = format!("agentSkills.{name}");
        let Some(target_kind) = agents::skills::target_kind(&e.capability) else {
            out.push(Unresolved::new(
                K::SkillCapabilityUnknown,
                element,
                format!("Capability `{}` is not registered on this server; the skill was not created.", e.capability),
            ));
            continue;
        };
        let stays = agents::skills::non_portable_keys(&e.capability);
        if let Some(k) = e.config.keys().find(|k| stays.contains(&k.as_str()) || k.ends_with("Sealed")) {
            return Err(Error::invalid_field(
                &format!("{at}.config.{k}"),
                format!("`{k}` stays in its workspace and does not travel in a bundle (name it in omittedConfigKeys)"),
            ));
        }
        let mut omitted: Vec<String> = Vec::new();
        for k in &e.omitted_config_keys {
            if k.trim().is_empty() || k.chars().count() > 100 {
                return Err(Error::invalid_field(
                    &format!("{at}.omittedConfigKeys"),
                    "a setting name is 1 to 100 characters",
                ));
            }
            if !omitted.contains(k) {
                omitted.push(k.clone());
            }
        }
        if e.config.values().all(Value::is_null) && !omitted.is_empty() {
            out.push(Unresolved::new(
                K::SkillConfigNotPortable,
                element,
                format!(
                    "All of the skill's settings ({}) stayed in the source workspace; the skill was not created.",
                    omitted.join(", ")
                ),
            ));
            continue;
        }
        let mode = agents::skills::mode_for(&e.capability, e.invocation_mode.as_deref()).map_err(|x| under(&at, x))?;
        let mut config = e.config.clone();
        config.retain(|_, v| !v.is_null());
        agents::skills::check_config(&e.capability, &mut config).map_err(|x| under(&at, x))?;
        let mut target_unbound = false;
        let target = match &e.target {
            None => None,
            Some(t) if t.kind != target_kind => {
                return Err(Error::invalid_field(
                    &format!("{at}.target.kind"),
                    format!("the target kind of a {} skill is {target_kind}", e.capability),
                ));
            }
            Some(t) if t.id.is_null() => Some(json!({"kind": t.kind, "id": null})),
            Some(t) if t.id == json!({REF_KEY: TARGET_REF}) => {
                target_unbound = true;
                None
            }
            Some(_) => {
                return Err(Error::invalid_field(
                    &format!("{at}.target.id"),
                    "a target's id does not travel: it is null or {\"__ref\": \"agentSkillTarget\"}",
                ));
            }
        };
        let mut enabled = e.enabled;
        let connection = ["url", "webhookUrl", "serverUrl", "credential"];
        let lost_connection = omitted.iter().any(|k| connection.contains(&k.as_str()));
        if e.capability == "mcp_tool" && (target_unbound || lost_connection) {
            enabled = false;
            out.push(Unresolved::new(
                K::McpConnectionUnbound,
                element.clone(),
                "The MCP server (URL and credential) and its connection stayed in the source workspace; the skill imports disabled.",
            ));
        } else if target_unbound || lost_connection {
            enabled = false;
            out.push(Unresolved::new(
                K::SkillTargetUnbound,
                element.clone(),
                "The skill's target or connection stayed in the source workspace; the skill imports disabled.",
            ));
        }
        if omitted.iter().any(|k| k == "sourceScope") {
            config.insert("sourceScope".into(), json!({"mode": "selected", "sourceIds": []}));
            out.push(Unresolved::new(
                K::DocumentSourceUnresolved,
                format!("{element}.config.sourceScope"),
                "The skill's source scope named sources whose ids do not carry across; it imports with none selected.",
            ));
        }
        let rest: Vec<&str> =
            omitted.iter().map(String::as_str).filter(|k| *k != "sourceScope" && !connection.contains(k)).collect();
        if !rest.is_empty() {
            out.push(Unresolved::new(
                K::SkillConfigNotPortable,
                element.clone(),
                format!(
                    "Settings {} stayed in the source workspace; the skill was created without them.",
                    rest.join(", ")
                ),
            ));
        }
        planned.push(PlannedSkill { name, capability: e.capability.clone(), mode, enabled, config, target });
    }
    Ok(planned)
}

fn variables_plan(entries: &[Value]) -> Result<Vec<VariableEntry>> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (i, v) in entries.iter().enumerate() {
        let at = format!("contextVariables[{i}]");
        let mut e: VariableEntry = element("contextVariables", i, v)?;
        e.variable_name = e.variable_name.trim().to_string();
        if e.variable_name.is_empty() || e.variable_name.len() > 64 {
            return Err(Error::invalid_field(&format!("{at}.variableName"), "variableName is 1 to 64 characters"));
        }
        if !seen.insert(e.variable_name.clone()) {
            return Err(Error::invalid_field(
                &format!("{at}.variableName"),
                format!("`{}` is enabled twice", e.variable_name),
            ));
        }
        match (e.source.as_str(), e.resolver_skill_name.as_deref()) {
            ("pushed", _) => e.resolver_skill_name = None,
            ("resolver", Some(s)) if !s.trim().is_empty() => {}
            ("resolver", _) => {
                return Err(Error::invalid_field(
                    &format!("{at}.resolverSkillName"),
                    "a resolver variable names its resolverSkillName",
                ));
            }
            _ => return Err(Error::invalid_field(&format!("{at}.source"), "source is pushed or resolver")),
        }
        if let Some(s) = &e.surfacing
            && !agents::context::SURFACING.contains(&s.as_str())
        {
            return Err(Error::invalid_field(
                &format!("{at}.surfacing"),
                format!("surfacing is one of {}", agents::context::SURFACING.join(", ")),
            ));
        }
        out.push(e);
    }
    Ok(out)
}

fn routines_plan(entries: &[Value]) -> Result<Vec<RoutineEntry>> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (i, v) in entries.iter().enumerate() {
        let at = format!("routines[{i}]");
        let r: RoutineEntry = element("routines", i, v)?;
        if r.name != r.definition.name {
            return Err(Error::invalid_field(&format!("{at}.name"), "name is the definition's name"));
        }
        if r.version < 1 {
            return Err(Error::invalid_field(&format!("{at}.version"), "version is a whole number of at least 1"));
        }
        if !seen.insert((r.name.clone(), r.version)) {
            return Err(Error::invalid_field(
                &format!("{at}.version"),
                format!("routine `{}` version {} appears twice", r.name, r.version),
            ));
        }
        out.push(r);
    }
    Ok(out)
}
