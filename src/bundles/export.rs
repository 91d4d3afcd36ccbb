//! The bundle of an agent's draft (what `GET /agents/{agentId}/bundle` answers).
//!
//! Redaction (spec: Agent bundles rules 1 and 5): `agent.contactRequestDelivery` is removed
//! entirely; a skill carries only the config keys its capability marks portable
//! (`agents::skills::non_portable_keys`) and the names of the others in `omittedConfigKeys` (a
//! sealed value is named by the setting it seals: `webhookUrl`, `serverUrl`, `credential`); a
//! target's id becomes `{"__ref": "agentSkillTarget"}`; selected source ids are dropped
//! (`{"mode": "selected", "sourceIds": []}`); a logo becomes `{"__ref": "agentLogo"}`; context
//! values, launch tokens, channel credentials and provider keys are not part of an agent and
//! never appear. Routines and directives reference skills and variables by name, a completion
//! export its destination by the destination's name, and a routine-scoped directive tag its
//! routine by position in the bundle (`routine:#0`, `step:#0:<stepId>`).
//!
//! The document is canonical: object keys sorted, skills and directives by name, variables by
//! name, routines by name then version.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value, json};

use super::api::{LOGO_REF, REF_KEY, RoutineEntry, SkillEntry, TARGET_REF, TargetEntry, VariableEntry};
use super::{BUNDLE_VERSION, Counts};
use crate::agents::skills::{MCP_SEALED, SEALED_URL, Skill, non_portable_keys};
use crate::agents::{self, Agent, SCHEMA_VERSION};
use crate::app::App;
use crate::error::Result;
use crate::storage::Conn;

/// Every object's keys sorted, recursively: the canonical form of a document.
pub(super) fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), canonical(&m[k]))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        x => x.clone(),
    }
}

/// A selected source scope without its ids (they do not carry across workspaces).
pub(super) fn redact_scope(scope: &mut Value) {
    if scope["mode"] == "selected" {
        *scope = json!({"mode": "selected", "sourceIds": []});
    }
}

/// The bundle of `agent`'s draft, canonical, with what it holds.
pub(super) fn build(app: &App, c: &Conn, agent: &Agent) -> Result<(Value, Counts)> {
    let skills = agents::skills::of_agent(c, &agent.id)?;
    let skill_names: HashMap<&str, &str> = skills.iter().map(|s| (s.id.as_str(), s.name.as_str())).collect();
    let mut routines = crate::routines::of_agent(c, &agent.id)?;
    routines.sort_by(|a, b| (&a.name, a.version).cmp(&(&b.name, b.version)));
    let positions: HashMap<String, usize> = routines.iter().enumerate().map(|(i, r)| (r.id.clone(), i)).collect();
    let destinations: HashMap<String, String> =
        crate::routines::destinations::names(c, &agent.workspace_id.0)?.into_iter().collect();
    let mut directives = agents::directives::of_agent(c, &agent.id)?;
    directives.sort_by(|a, b| a.name.cmp(&b.name));
    let mut enablements = agents::context::enablements(c, &agent.id)?;
    enablements.sort_by(|a, b| a.name.cmp(&b.name));

    let skill_entries: Vec<SkillEntry> = skills.iter().map(|s| skill_entry(app, s)).collect();
    let variable_entries: Vec<VariableEntry> = enablements
        .iter()
        .map(|e| VariableEntry {
            variable_name: e.name.clone(),
            source: e.source.clone(),
            resolver_skill_name: e
                .resolver_skill_id
                .as_deref()
                .and_then(|id| skill_names.get(id))
                .map(|n| n.to_string()),
            enabled: e.enabled,
            surfacing: Some(e.surfacing.clone()),
        })
        .collect();
    let routine_entries: Vec<RoutineEntry> = routines
        .iter()
        .map(|r| {
            let mut definition = r.definition.clone();
            if let Some(x) = &mut definition.completion_export
                && let Some(name) = destinations.get(&x.destination_ref)
            {
                x.destination_ref = name.clone();
            }
            RoutineEntry { name: r.name.clone(), version: r.version, definition }
        })
        .collect();
    let directive_entries: Vec<Value> = directives
        .iter()
        .map(|d| {
            let mut v = serde_json::to_value(&d.body)?;
            v["name"] = json!(d.name);
            v["tags"] = json!(d.body.tags.iter().map(|t| portable_tag(t, &positions)).collect::<Vec<_>>());
            Ok(v)
        })
        .collect::<Result<_>>()?;
    let eval_cases = crate::evals::portable::export(c, &agent.workspace_id, &agent.id)?;
    let counts = Counts {
        routines: routine_entries.len(),
        skills: skill_entries.len(),
        context_variables: variable_entries.len(),
        directives: directive_entries.len(),
        eval_cases: eval_cases.len(),
        unresolved: 0,
    };
    let mut bundle = json!({
        "bundleVersion": BUNDLE_VERSION,
        "agent": agent_entry(c, agent)?,
        "agentSkills": skill_entries,
        "contextVariables": variable_entries,
        "routines": routine_entries,
        "directives": directive_entries,
    });
    // beyond the spec: the agent's eval cases, when it has any
    if !eval_cases.is_empty() {
        bundle["evalCases"] = Value::Array(eval_cases);
    }
    Ok((canonical(&bundle), counts))
}

/// The agent's name and settings, redacted.
fn agent_entry(c: &Conn, agent: &Agent) -> Result<Value> {
    let mut m = match serde_json::to_value(&agent.settings)? {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    m.remove("contactRequestDelivery");
    if let Some(s) = m.get_mut("sourceScope") {
        redact_scope(s);
    }
    if let Some(s) =
        m.get_mut("skillSettings").and_then(|s| s.get_mut("retrieval.answer")).and_then(|r| r.get_mut("sourceScope"))
    {
        redact_scope(s);
    }
    m.insert("schemaVersion".into(), json!(SCHEMA_VERSION));
    m.insert("name".into(), json!(agent.name));
    if agents::imported::has_logo(c, &agent.id)? {
        m.insert("logo".into(), json!({REF_KEY: LOGO_REF}));
    }
    Ok(Value::Object(m))
}

/// A skill with only its portable settings; the names of the rest.
fn skill_entry(app: &App, s: &Skill) -> SkillEntry {
    let stays = non_portable_keys(&s.capability);
    let mut config = Map::new();
    let mut omitted = BTreeSet::new();
    for (k, v) in &s.config {
        if !stays.contains(&k.as_str()) {
            config.insert(k.clone(), v.clone());
            continue;
        }
        match k.as_str() {
            SEALED_URL => {
                omitted.insert("webhookUrl".to_string());
            }
            MCP_SEALED => {
                omitted.insert("serverUrl".to_string());
                // name the credential only when one is set (unknown without the key: named)
                let credential = agents::skills::open_mcp_server(app, &s.agent_id, &s.config)
                    .map(|server| server.is_some_and(|(_, c)| c.is_some()))
                    .unwrap_or(true);
                if credential {
                    omitted.insert("credential".to_string());
                }
            }
            other => {
                omitted.insert(other.to_string());
            }
        }
    }
    let target = s.target.as_ref().map(|t| TargetEntry {
        kind: t["kind"].as_str().unwrap_or_default().to_string(),
        id: if t["id"].is_null() { Value::Null } else { json!({REF_KEY: TARGET_REF}) },
    });
    SkillEntry {
        name: s.name.clone(),
        capability: s.capability.clone(),
        invocation_mode: Some(s.invocation_mode.clone()),
        enabled: s.enabled,
        config,
        omitted_config_keys: omitted.into_iter().collect(),
        target,
    }
}

/// `routine:<id>` and `step:<id>:<stepId>` of one of the agent's routines, by the routine's
/// position in the bundle; other tags as they are.
fn portable_tag(tag: &str, positions: &HashMap<String, usize>) -> String {
    let parts: Vec<&str> = tag.split(':').collect();
    let mapped = match parts.as_slice() {
        ["routine", id] => positions.get(*id).map(|n| format!("routine:#{n}")),
        ["step", id, step] => positions.get(*id).map(|n| format!("step:#{n}:{step}")),
        _ => None,
    };
    mapped.unwrap_or_else(|| tag.to_string())
}
