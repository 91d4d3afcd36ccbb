//! What an agent bundle import writes (`crate::bundles` decides what a bundle means; these are
//! the agents' own rows, written as the bundle describes them): a new agent with its settings,
//! skills, context-variable enablements and directives, and the removal of an agent an
//! interrupted import left behind. Callers hold `workspace.agents.manage`; nothing here checks a
//! principal. Every write runs in the caller's transaction.

use serde_json::json;

use super::context::{Enablement, Variable};
use super::directives::{Body, Directive, Input, chip_tokens};
use super::skills::Skill;
use super::{Settings, store};
use crate::error::{Error, Result};
use crate::ids::WorkspaceId;
use crate::storage::{Conn, Tx};

/// Creates a (non-default) agent with `settings`, published as v1 like every new agent; the
/// rest of the import lands in its draft.
pub fn create_agent(tx: &Tx, ws: &WorkspaceId, name: &str, settings: &Settings, now: &str) -> Result<String> {
    super::insert(tx, ws, name, settings, false, now)
}

/// Deletes an agent an import created, with everything under it; false when it is gone already
/// (or became the workspace's default meanwhile, which is never deleted).
pub fn delete_agent(tx: &Tx, ws: &WorkspaceId, id: &str) -> Result<bool> {
    store::delete_agent(tx, ws, id)
}

/// Whether the agent has a logo.
pub fn has_logo(c: &Conn, id: &str) -> Result<bool> {
    Ok(store::logo_info(c, id)?.is_some())
}

/// The workspace's context variables (by name).
pub fn variables(c: &Conn, ws: &WorkspaceId) -> Result<Vec<Variable>> {
    store::variables(c, ws)
}

/// Inserts a skill as given (its config checked by the caller; no secret in it).
pub fn insert_skill(tx: &Tx, ws: &WorkspaceId, s: &Skill) -> Result<()> {
    store::insert_skill(tx, ws, s)
}

/// Enables a variable on the agent as given (a resolver names a skill of this agent).
pub fn insert_enablement(tx: &Tx, agent_id: &str, e: &Enablement) -> Result<()> {
    store::put_enablement(tx, agent_id, e)
}

/// A directive of a bundle, checked like a created one except its binding, which is kept by
/// skill name whatever skills the agent has (Directive bindings rule 8): the name and body to
/// insert. `field` prefixes the names of refused fields.
pub fn check_directive(c: &Conn, mut i: Input, field: &str) -> Result<(String, Body)> {
    let at = |e: Error| {
        let inner = e.details.as_ref().and_then(|d| d["field"].as_str()).unwrap_or("").to_string();
        let name = if inner.is_empty() { field.to_string() } else { format!("{field}.{inner}") };
        Error::invalid_field(&name, format!("{name}: {}", e.message))
    };
    let name = super::directives::clean_name(i.name.as_deref().unwrap_or("")).map_err(at)?;
    if i.action.is_none() {
        return Err(at(Error::invalid_field("action", "action is required")));
    }
    let binding = i.binding.take().flatten();
    let mut body = super::directives::build(c, "", None, i).map_err(at)?;
    if let Some(mut b) = binding {
        b.skill_name = b.skill_name.trim().to_lowercase();
        if b.kind != "skill" {
            return Err(at(Error::invalid_field("binding.kind", "the only binding kind is skill")));
        }
        if !chip_tokens(&body.action).iter().any(|t| t.name == b.skill_name) {
            return Err(at(Error::invalid_field(
                "binding.skillName",
                format!("the action text must contain the chip #{}", b.skill_name),
            )
            .with_details(json!({"field": "binding.skillName"}))));
        }
        body.binding = Some(b);
    }
    Ok((name, body))
}

/// Inserts a checked directive.
pub fn insert_directive(tx: &Tx, ws: &WorkspaceId, d: &Directive) -> Result<()> {
    store::insert_directive(tx, ws, d)
}
