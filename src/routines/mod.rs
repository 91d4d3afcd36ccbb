//! Routines: multi-step flows an agent runs in a conversation (collect typed slots, branch, call
//! skills, wait for an approval, hand off, export the result).
//!
//! - [`definition`]: the structured definition (the one stored shape).
//! - [`markdown`]: portable routine markdown: parse with diagnostics, canonicalize, compile to a
//!   definition, project a definition back to markdown.
//! - [`validate`]: the definition's rules, with located findings.
//! - this module: routines as an agent authors them. They are part of the agent's draft (every
//!   write advances the draft generation) and travel in its candidates and published revisions,
//!   so a running conversation keeps the routine version its revision holds.
//!
//! Typed records in and out; all SQL is in the private `store.rs`; wire shapes in `api.rs`.

pub mod api;
pub mod decisions;
pub mod definition;
pub mod destinations;
pub mod effects;
pub mod markdown;
pub mod runtime;
pub mod slots;
mod store;
pub mod validate;

use serde_json::json;

use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::crypto::SealedJson;
use crate::error::{Error, ErrorCode, Result};
use crate::storage::Conn;
use definition::{Definition, Finding, GateOption};

/// A routine as an agent authors it.
#[derive(Debug, Clone)]
pub struct RoutineRecord {
    pub id: String,
    pub agent_id: String,
    pub workspace_id: String,
    pub name: String,
    pub version: i64,
    pub definition: Definition,
    pub created_at: String,
    pub updated_at: String,
}

/// A routine waiting for a person's decision.
#[derive(Debug, Clone)]
pub struct Decision {
    pub handle: String,
    pub workspace_id: String,
    pub agent_id: String,
    pub conversation_id: String,
    pub routine_id: String,
    pub routine_name: String,
    pub step_id: String,
    pub reason: String,
    pub options: Vec<GateOption>,
    pub content_hash: String,
    pub deadline: Option<String>,
    pub timeout_option: Option<String>,
    pub resolved: bool,
    pub chosen_option: Option<String>,
    pub resolved_by: Option<String>,
    pub resolved_at: Option<String>,
    pub created_at: String,
}

/// Where a routine's result is exported (signed webhook).
#[derive(Debug, Clone)]
pub struct Destination {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub url: String,
    /// The signing secret, sealed.
    pub secret_sealed: SealedJson,
    pub last_delivery_status: Option<String>,
    pub last_delivery_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// A routine to write: the definition and the author's version (default 1).
#[derive(Debug, Clone)]
pub struct RoutineInput {
    pub version: Option<i64>,
    pub definition: Definition,
}

/// The job kinds routines run.
pub fn jobs() -> Vec<(&'static str, crate::jobs::Handler)> {
    vec![(effects::ACTION_JOB, effects::action_job), (effects::TIMEOUT_JOB, effects::timeout_job)]
}

/// A definition that failed validation: 422 `routine_invalid` with the findings.
pub fn invalid(findings: &[Finding]) -> Error {
    Error::new(ErrorCode::RoutineInvalid, "Routine definition is invalid")
        .with_details(json!({"validation": {"ok": false, "diagnostics": findings}}))
}

/// What validation knows of the agent and workspace: the agent's enabled skills (with the inputs
/// each capability takes) and the workspace's webhook destinations.
fn context(c: &Conn, ws: &str, agent_id: &str) -> Result<validate::ValidationContext> {
    context_with(c, ws, agent_id, &[])
}

/// [`context`], counting the disabled skills named in `also` as there (a bundle import's skills
/// that came across disabled until their connection is bound again).
fn context_with(c: &Conn, ws: &str, agent_id: &str, also: &[String]) -> Result<validate::ValidationContext> {
    use validate::{InputType, SkillInfo, SkillInput};
    let input = |name: &str, input_type: InputType| SkillInput { name: name.into(), input_type, required: false };
    let skills = crate::agents::skills::of_agent(c, agent_id)?
        .into_iter()
        .filter(|s| s.enabled || also.contains(&s.name))
        .map(|s| {
            let inputs = match s.capability.as_str() {
                "retrieve" => vec![input("query", InputType::Text)],
                "notify" | "email" => {
                    vec![
                        input("message", InputType::Text),
                        input("name", InputType::Text),
                        input("email", InputType::Email),
                        input("subject", InputType::Text),
                    ]
                }
                "webhook_call" | "slack_post" => {
                    vec![input("payload", InputType::Text), input("message", InputType::Text)]
                }
                _ => vec![],
            };
            let open_inputs = s.capability == "mcp_tool";
            SkillInfo { name: s.name, inputs, outputs: None, open_inputs }
        })
        .collect();
    Ok(validate::ValidationContext {
        skills: Some(skills),
        context_variables: None,
        destinations: Some(destinations::ids(c, ws)?),
    })
}

/// Validates a definition against the agent it belongs to.
pub fn check(c: &Conn, ws: &str, agent_id: &str, def: &Definition) -> Result<()> {
    let findings = validate::validate(def, &context(c, ws, agent_id)?);
    if findings.is_empty() { Ok(()) } else { Err(invalid(&findings)) }
}

pub fn list(app: &App, p: &Principal, agent_id: &str) -> Result<Vec<RoutineRecord>> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| {
        crate::agents::get_in(c, &p.workspace_id, agent_id)?;
        store::of_agent(c, agent_id)
    })
}

pub fn get(app: &App, p: &Principal, agent_id: &str, id: &str) -> Result<RoutineRecord> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| {
        crate::agents::get_in(c, &p.workspace_id, agent_id)?;
        store::find(c, agent_id, id)?.ok_or_else(|| Error::not_found("routine"))
    })
}

/// The routines of an agent's draft (for snapshots and the runtime of test chat).
pub fn of_agent(c: &Conn, agent_id: &str) -> Result<Vec<RoutineRecord>> {
    store::of_agent(c, agent_id)
}

fn check_version(v: Option<i64>) -> Result<i64> {
    match v.unwrap_or(1) {
        v if v >= 1 => Ok(v),
        _ => Err(Error::invalid_field("version", "version is a whole number of at least 1")),
    }
}

fn audit_event<'a>(p: &'a Principal, action: &'a str, id: &'a str, agent_id: &str) -> Event<'a> {
    Event::new(action).workspace(&p.workspace_id).target("routine", id).meta(json!({"agentId": agent_id}))
}

/// Adds a routine to the agent's draft; 409 when one with the same name and version exists.
pub fn create(app: &App, p: &Principal, actor: &Actor, agent_id: &str, i: RoutineInput) -> Result<RoutineRecord> {
    p.require(Perm::AgentsManage)?;
    let version = check_version(i.version)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        crate::agents::get_in(tx, &p.workspace_id, agent_id)?;
        let def = i.definition.clone();
        if store::named(tx, agent_id, &def.name, version)?.is_some() {
            return Err(Error::conflict(format!(
                "the agent already has a routine `{}` at version {version}",
                def.name
            ))
            .with_details(json!({"field": "name"})));
        }
        check(tx, &p.workspace_id.0, agent_id, &def)?;
        let r = RoutineRecord {
            id: crate::ids::new_id(),
            agent_id: agent_id.to_string(),
            workspace_id: p.workspace_id.0.clone(),
            name: def.name.clone(),
            version,
            definition: def,
            created_at: now.clone(),
            updated_at: now.clone(),
        };
        store::insert(tx, &r)?;
        crate::agents::touch(tx, agent_id, &now)?;
        audit::record(tx, &now, actor, audit_event(p, "agent.routine.created", &r.id, agent_id))?;
        Ok(r)
    })
}

/// Replaces a routine's definition (and version, when given) in the agent's draft.
pub fn update(
    app: &App,
    p: &Principal,
    actor: &Actor,
    agent_id: &str,
    id: &str,
    i: RoutineInput,
) -> Result<RoutineRecord> {
    p.require(Perm::AgentsManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        crate::agents::get_in(tx, &p.workspace_id, agent_id)?;
        let cur = store::find(tx, agent_id, id)?.ok_or_else(|| Error::not_found("routine"))?;
        let version = match i.version {
            Some(v) => check_version(Some(v))?,
            None => cur.version,
        };
        let def = i.definition.clone();
        if (def.name != cur.name || version != cur.version)
            && store::named(tx, agent_id, &def.name, version)?.is_some_and(|other| other != cur.id)
        {
            return Err(Error::conflict(format!(
                "the agent already has a routine `{}` at version {version}",
                def.name
            )));
        }
        check(tx, &p.workspace_id.0, agent_id, &def)?;
        let r = RoutineRecord { name: def.name.clone(), version, definition: def, updated_at: now.clone(), ..cur };
        store::update(tx, &r)?;
        crate::agents::touch(tx, agent_id, &now)?;
        audit::record(tx, &now, actor, audit_event(p, "agent.routine.updated", id, agent_id))?;
        Ok(r)
    })
}

pub fn delete(app: &App, p: &Principal, actor: &Actor, agent_id: &str, id: &str) -> Result<()> {
    p.require(Perm::AgentsManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        crate::agents::get_in(tx, &p.workspace_id, agent_id)?;
        store::find(tx, agent_id, id)?.ok_or_else(|| Error::not_found("routine"))?;
        store::delete(tx, id)?;
        crate::agents::touch(tx, agent_id, &now)?;
        audit::record(tx, &now, actor, audit_event(p, "agent.routine.deleted", id, agent_id))
    })
}

/// The routines of a snapshot: `{id, name, version, definition}` (sorted by name and version).
pub fn snapshot(c: &Conn, agent_id: &str) -> Result<Vec<crate::agents::revisions::SnapshotEntry>> {
    Ok(store::of_agent(c, agent_id)?
        .into_iter()
        .map(|r| json!({"id": r.id, "name": r.name, "version": r.version, "definition": r.definition}))
        .collect())
}

/// Writes a routine an agent bundle carries into the agent's draft (in the import's
/// transaction), validated against the agent as imported; `also` names skills that came across
/// disabled, which the routine may still call once they are bound. The findings instead when it
/// does not validate or its name and version are taken.
pub fn insert_imported(
    tx: &crate::storage::Tx,
    ws: &str,
    agent_id: &str,
    version: i64,
    definition: Definition,
    also: &[String],
    now: &str,
) -> Result<std::result::Result<RoutineRecord, Vec<Finding>>> {
    let version = check_version(Some(version))?;
    if store::named(tx, agent_id, &definition.name, version)?.is_some() {
        let message = format!("the agent already has a routine `{}` at version {version}", definition.name);
        return Ok(Err(vec![Finding { code: "duplicate_routine", location: "routine".into(), message }]));
    }
    let findings = validate::validate(&definition, &context_with(tx, ws, agent_id, also)?);
    if !findings.is_empty() {
        return Ok(Err(findings));
    }
    let r = RoutineRecord {
        id: crate::ids::new_id(),
        agent_id: agent_id.to_string(),
        workspace_id: ws.to_string(),
        name: definition.name.clone(),
        version,
        definition,
        created_at: now.to_string(),
        updated_at: now.to_string(),
    };
    store::insert(tx, &r)?;
    Ok(Ok(r))
}

/// Names of the workspace's routines whose completion export uses `destination`.
pub fn exporting_to(c: &Conn, ws: &str, destination: &str) -> Result<Vec<String>> {
    store::exporting_to(c, ws, destination)
}

// ---- portable markdown ----

/// A markdown document that did not parse: 400 with every diagnostic `{line, code, message}`.
pub fn diagnostics_error(d: &[markdown::Diagnostic]) -> Error {
    Error::invalid("the routine markdown has errors").with_details(json!({"diagnostics": d}))
}

fn parsed(grammar_version: i64, content: &str) -> Result<markdown::Document> {
    markdown::check_grammar_version(grammar_version).map_err(|d| diagnostics_error(&[d]))?;
    markdown::parse(content).map_err(|d| diagnostics_error(&d))
}

/// `POST /routines/portable/canonicalize`: grammar and formatting only.
pub fn canonicalize(p: &Principal, grammar_version: i64, content: &str) -> Result<String> {
    p.require(Perm::AgentsManage)?;
    markdown::check_grammar_version(grammar_version).map_err(|d| diagnostics_error(&[d]))?;
    markdown::canonicalize(content).map_err(|d| diagnostics_error(&d))
}

/// A routine as canonical markdown; 422 `routine_not_portable` for what markdown v1 cannot say.
pub fn portable(r: &RoutineRecord) -> Result<String> {
    markdown::project(&r.definition).map_err(|e| {
        Error::new(ErrorCode::RoutineNotPortable, e.to_string()).with_details(json!({"diagnostics": [e.diagnostic()]}))
    })
}

/// `POST /agents/{id}/routines/portable`: parse, compile, validate and create (version 1).
pub fn create_portable(
    app: &App,
    p: &Principal,
    actor: &Actor,
    agent_id: &str,
    grammar_version: i64,
    content: &str,
) -> Result<RoutineRecord> {
    p.require(Perm::AgentsManage)?;
    let doc = parsed(grammar_version, content)?;
    create(app, p, actor, agent_id, RoutineInput { version: None, definition: markdown::compile(&doc) })
}

/// `PUT /agents/{id}/routines/{routineId}/portable`: the document onto the routine, keeping what
/// the document does not say (its completion export, terminals, activation gate).
pub fn update_portable(
    app: &App,
    p: &Principal,
    actor: &Actor,
    agent_id: &str,
    id: &str,
    grammar_version: i64,
    content: &str,
) -> Result<RoutineRecord> {
    let cur = get(app, p, agent_id, id)?;
    p.require(Perm::AgentsManage)?;
    let doc = parsed(grammar_version, content)?;
    let definition = markdown::compile_onto(&cur.definition, &doc);
    update(app, p, actor, agent_id, id, RoutineInput { version: Some(cur.version), definition })
}
