//! The import job. `POST /agents/bundle` reads the bundle into a plan (nothing written on a
//! 400), then runs the job within the request, each step its own short transaction:
//!
//! 1. the idempotency key is checked and the job row written `queued`, with a queue job that
//!    fences it if it is still active at its orphan deadline (`sweep.rs`);
//! 2. `queued → applying`: the agent is created with its settings and named on the row;
//! 3. while still `applying` (the fence: a cleanup that fenced the job makes this step write
//!    nothing): skills, context-variable enablements, routines and directives, then `applied`
//!    with the unresolved list and counts, and the audit event.
//!
//! A step that fails marks the job `failed` and deletes the agent it made; a process that dies
//! between steps leaves the job `applying`, which the cleanup compensates. Only one attempt per
//! key can be active or applied (checked in the writing transaction, and by a unique index).

use std::collections::HashMap;

use serde_json::Value;

use super::plan::{Plan, plan};
use super::{Counts, ImportJob, ImportState, Imported, Unresolved, UnresolvedKind as K, fenced, in_progress, store};
use crate::agents::context::Enablement;
use crate::agents::directives::Directive;
use crate::agents::skills::Skill;
use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::Principal;
use crate::clock::rfc3339;
use crate::error::{Error, ErrorCode, Result};
use crate::storage::Tx;

/// How the key check went.
enum Begin {
    /// A new job, queued.
    Started(String),
    /// The completed job of a repeated key.
    Replay(Box<ImportJob>),
    /// An active job of this key is past its orphan age: fence it, then answer the retryable 409.
    Stale(String),
}

pub(super) fn run(app: &App, p: &Principal, actor: &Actor, raw: &Value) -> Result<Imported> {
    let plan = app.db.read(|c| plan(c, raw))?;
    let id = match begin(app, p, &plan)? {
        Begin::Replay(job) => return Ok(Imported { job: *job, replayed: true }),
        Begin::Stale(id) => {
            super::sweep::fence(app, &id, super::sweep::Reason::OrphanAge)?;
            return Err(fenced(&id));
        }
        Begin::Started(id) => id,
    };
    match apply(app, p, actor, &plan, &id) {
        Ok(job) => Ok(Imported { job, replayed: false }),
        Err(e) if e.code == ErrorCode::AgentBundleImportFenced => Err(e),
        Err(e) => {
            if let Err(x) = fail(app, &p.workspace_id, &id, &e) {
                tracing::warn!(import = %id, error = %x, "could not mark a failed bundle import");
            }
            Err(e)
        }
    }
}

fn begin(app: &App, p: &Principal, plan: &Plan) -> Result<Begin> {
    let now = app.clock.now();
    let now_ms = app.clock.now_ms();
    let age = app.config.bundle_import_orphan_age.as_millis() as i64;
    let ws = &p.workspace_id.0;
    let begun = app.db.write(|tx| {
        if let Some(key) = &plan.key
            && let Some(held) = store::holding_key(tx, ws, key)?
        {
            return match held.state {
                ImportState::Applied if held.fingerprint == plan.fingerprint => Ok(Begin::Replay(Box::new(held))),
                ImportState::Applied => Err(Error::conflict("this idempotencyKey was used to import another bundle")
                    .with_details(serde_json::json!({"importId": held.id}))),
                _ if now_ms - held.created_at_ms >= age => Ok(Begin::Stale(held.id)),
                _ => Err(in_progress(&held.id)),
            };
        }
        let job = ImportJob {
            id: crate::ids::new_id(),
            workspace_id: ws.clone(),
            idempotency_key: plan.key.clone(),
            fingerprint: plan.fingerprint.clone(),
            state: ImportState::Queued,
            agent_id: None,
            unresolved: vec![],
            counts: Counts::default(),
            error: None,
            created_at: rfc3339(now),
            created_at_ms: now_ms,
            updated_at: rfc3339(now),
            finished_at: None,
        };
        store::insert(tx, &job, p.user_id.as_ref().map(|u| u.0.as_str()))?;
        let sweep = crate::jobs::NewJob::new(super::SWEEP_JOB, serde_json::json!({"importId": job.id}))
            .dedupe(format!("{}:{}", super::SWEEP_JOB, job.id))
            .run_at(now_ms + age)
            .priority(-1)
            .workspace(ws.clone());
        crate::jobs::enqueue_tx(tx, now_ms, app.jobs.default_max_attempts(), &sweep)?;
        Ok(Begin::Started(job.id))
    })?;
    Ok(begun)
}

/// A test hook for the crash tests: with `STEWARD_TEST_BUNDLE_APPLY_PAUSE_MS` set, a debug build
/// pauses here, between creating the agent and filling it in, and says so on the log. Release
/// builds ignore the variable.
fn pause_for_tests(import_id: &str) {
    #[cfg(debug_assertions)]
    if let Some(ms) = std::env::var("STEWARD_TEST_BUNDLE_APPLY_PAUSE_MS").ok().and_then(|v| v.parse::<u64>().ok()) {
        tracing::warn!(import = import_id, ms, "test hook: bundle import paused while applying");
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
    #[cfg(not(debug_assertions))]
    let _ = import_id;
}

fn apply(app: &App, p: &Principal, actor: &Actor, plan: &Plan, id: &str) -> Result<ImportJob> {
    let ws = &p.workspace_id;
    let now = rfc3339(app.clock.now());
    let agent_id = app.db.write(|tx| {
        let agent_id = crate::agents::imported::create_agent(tx, ws, &plan.name, &plan.settings, &now)?;
        if !store::start_applying(tx, id, &agent_id, &now)? {
            return Err(fenced(id));
        }
        Ok(agent_id)
    })?;
    pause_for_tests(id);
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        if !store::still_applying(tx, id)? {
            return Err(fenced(id));
        }
        let mut unresolved = plan.unresolved.clone();
        let mut counts = Counts::default();
        let skills = write_skills(tx, p, plan, &agent_id, &now)?;
        counts.skills = skills.len();
        counts.context_variables = write_variables(tx, p, plan, &agent_id, &skills, &now, &mut unresolved)?;
        let routine_ids = write_routines(tx, p, plan, &agent_id, &skills, &now, &mut unresolved)?;
        counts.routines = routine_ids.iter().flatten().count();
        counts.directives = write_directives(tx, p, plan, &agent_id, &skills, &routine_ids, &now, &mut unresolved)?;
        for i in crate::evals::portable::import(tx, ws, &agent_id, id, &plan.eval_cases, &now)? {
            let detail = "The case's assertions name documents of the source workspace; point them at this workspace's documents.";
            unresolved.push(Unresolved::new(K::DocumentSourceUnresolved, format!("evalCases[{i}]"), detail));
        }
        counts.eval_cases = plan.eval_cases.len();
        crate::agents::touch(tx, &agent_id, &now)?;
        counts.unresolved = unresolved.len();
        if !store::finish_applied(tx, id, &unresolved, &counts, &now)? {
            return Err(fenced(id));
        }
        let ev = Event::new("agent.bundle.imported").workspace(ws).target("agent", &agent_id);
        audit::record(tx, &now, actor, ev.meta(counts.audit(&agent_id, Some(id))))?;
        store::get(tx, id)?.ok_or_else(|| Error::internal_msg("the import job vanished"))
    })
}

/// The skills, by name: `(id, enabled)`.
type Created = HashMap<String, (String, bool)>;

fn write_skills(tx: &Tx, p: &Principal, plan: &Plan, agent_id: &str, now: &str) -> Result<Created> {
    let mut created = HashMap::new();
    for s in &plan.skills {
        let skill = Skill {
            id: crate::ids::new_id(),
            agent_id: agent_id.to_string(),
            name: s.name.clone(),
            capability: s.capability.clone(),
            target: s.target.clone(),
            config: s.config.clone(),
            invocation_mode: s.mode.clone(),
            enabled: s.enabled,
            created_at: now.to_string(),
            updated_at: now.to_string(),
        };
        crate::agents::imported::insert_skill(tx, &p.workspace_id, &skill)?;
        created.insert(skill.name.clone(), (skill.id, skill.enabled));
    }
    Ok(created)
}

fn write_variables(
    tx: &Tx,
    p: &Principal,
    plan: &Plan,
    agent_id: &str,
    skills: &Created,
    now: &str,
    out: &mut Vec<Unresolved>,
) -> Result<usize> {
    let here: HashMap<String, crate::agents::context::Variable> =
        crate::agents::imported::variables(tx, &p.workspace_id)?.into_iter().map(|v| (v.name.clone(), v)).collect();
    let mut n = 0;
    for e in &plan.variables {
        let element = format!("contextVariables.{}", e.variable_name);
        let Some(var) = here.get(&e.variable_name) else {
            out.push(Unresolved::new(
                K::ContextVariableMissing,
                element,
                format!("This workspace has no context variable `{}`; it was not enabled.", e.variable_name),
            ));
            continue;
        };
        let resolver = match e.resolver_skill_name.as_deref() {
            None => None,
            Some(name) => {
                match skills.get(&name.trim().to_lowercase()) {
                    Some(s) => Some(s),
                    None => {
                        out.push(Unresolved::new(
                        K::ResolverSkillMissing,
                        element,
                        format!("The resolver skill `{name}` is not on the imported agent; the variable was not enabled."),
                    ));
                        continue;
                    }
                }
            }
        };
        let enablement = Enablement {
            variable_id: var.id.clone(),
            name: var.name.clone(),
            source: e.source.clone(),
            surfacing: e.surfacing.clone().unwrap_or_else(|| var.default_surfacing.clone()),
            // a disabled resolver skill resolves nothing: its variables import disabled too
            enabled: e.enabled && resolver.is_none_or(|(_, on)| *on),
            resolver_skill_id: resolver.map(|(id, _)| id.clone()),
            updated_at: now.to_string(),
        };
        crate::agents::imported::insert_enablement(tx, agent_id, &enablement)?;
        n += 1;
    }
    Ok(n)
}

/// The routines, in bundle order: the id of each one created (`None`: routine_invalid).
fn write_routines(
    tx: &Tx,
    p: &Principal,
    plan: &Plan,
    agent_id: &str,
    skills: &Created,
    now: &str,
    out: &mut Vec<Unresolved>,
) -> Result<Vec<Option<String>>> {
    let ws = &p.workspace_id.0;
    let destinations = crate::routines::destinations::names(tx, ws)?;
    // skills that came across disabled may still be called once bound again
    let disabled: Vec<String> = skills.iter().filter(|(_, (_, on))| !on).map(|(n, _)| n.clone()).collect();
    let mut ids = Vec::new();
    for r in &plan.routines {
        let mut definition = r.definition.clone();
        if let Some(x) = &mut definition.completion_export {
            let wanted = x.destination_ref.to_lowercase();
            if let Some((id, _)) = destinations.iter().find(|(_, name)| name.to_lowercase() == wanted) {
                x.destination_ref = id.clone();
            }
        }
        match crate::routines::insert_imported(tx, ws, agent_id, r.version, definition, &disabled, now)? {
            Ok(created) => ids.push(Some(created.id)),
            Err(findings) => {
                let why: Vec<String> = findings.iter().take(3).map(|f| format!("{} ({})", f.message, f.code)).collect();
                out.push(Unresolved::new(
                    K::RoutineInvalid,
                    format!("routines.{}@{}", r.name, r.version),
                    format!("The routine could not be written here: {}.", why.join("; ")),
                ));
                ids.push(None);
            }
        }
    }
    Ok(ids)
}

/// `routine:#n` and `step:#n:<stepId>` back to the id of the routine created at position `n`.
fn local_tag(tag: &str, routines: &[Option<String>]) -> String {
    let parts: Vec<&str> = tag.split(':').collect();
    let at = |n: &str| n.strip_prefix('#')?.parse::<usize>().ok().and_then(|i| routines.get(i)?.clone());
    let mapped = match parts.as_slice() {
        ["routine", n] => at(n).map(|id| format!("routine:{id}")),
        ["step", n, step] => at(n).map(|id| format!("step:{id}:{step}")),
        _ => None,
    };
    mapped.unwrap_or_else(|| tag.to_string())
}

#[allow(clippy::too_many_arguments, reason = "one step of the import, with the context the others built")]
fn write_directives(
    tx: &Tx,
    p: &Principal,
    plan: &Plan,
    agent_id: &str,
    skills: &Created,
    routines: &[Option<String>],
    now: &str,
    out: &mut Vec<Unresolved>,
) -> Result<usize> {
    for (name, body) in &plan.directives {
        let mut body = body.clone();
        if let Some(b) = &body.binding
            && !skills.contains_key(&b.skill_name)
        {
            body.enabled = false;
            out.push(Unresolved::new(
                K::DirectiveBindingUnbound,
                format!("directives.{name}"),
                format!("The bound skill `{}` did not come across; the directive imports switched off.", b.skill_name),
            ));
        }
        body.tags = body.tags.iter().map(|t| local_tag(t, routines)).collect();
        let d = Directive {
            id: crate::ids::new_id(),
            agent_id: agent_id.to_string(),
            name: name.clone(),
            body,
            created_at: now.to_string(),
            updated_at: now.to_string(),
        };
        crate::agents::imported::insert_directive(tx, &p.workspace_id, &d)?;
    }
    Ok(plan.directives.len())
}

/// The job failed while applying: `failed`, with the agent it made removed.
fn fail(app: &App, ws: &crate::ids::WorkspaceId, id: &str, e: &Error) -> Result<()> {
    let now = rfc3339(app.clock.now());
    let message = if e.code == ErrorCode::Internal { "internal error" } else { e.message.as_str() };
    app.db.write(|tx| {
        let job = store::get(tx, id)?;
        if store::finish_inactive(tx, id, ImportState::Failed, e.code.as_str(), message, &now)?
            && let Some(agent) = job.and_then(|j| j.agent_id)
        {
            crate::agents::imported::delete_agent(tx, ws, &agent)?;
        }
        Ok(())
    })
}
