//! Agent bundles: an agent as authored (its draft: settings, skills, context-variable
//! enablements, routines, directives) exported as one portable JSON document, and imported into
//! a workspace as a new agent.
//!
//! - `export.rs`: the bundle of an agent's draft, redacted (contact delivery, non-portable skill
//!   settings, sealed values, targets, source ids, the logo never leave) and canonical (sorted keys
//!   and lists), so export → import → export gives the same document apart from ids.
//! - `plan.rs`: reading a bundle (versions first, then every element, refusing by field name)
//!   into a plan of what to write and what cannot come across (the unresolved list), before
//!   anything is written.
//! - `import.rs`: the import job (`queued → applying → applied | failed | compensated`), one row
//!   in `agent_bundle_imports`, run within the request in short transactions; the idempotency key.
//! - `sweep.rs`: the cleanup that fences an import left active (a crash, a stall) and removes the
//!   agent it was building: at start-up, at each import's orphan deadline (a queued job), and when
//!   a request with its key arrives.
//!
//! Typed records in and out; SQL only in the private `store.rs`; wire shapes in `api.rs`.

pub mod api;
mod export;
mod import;
mod plan;
mod store;
mod sweep;

use serde_json::json;

use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, ErrorCode, Result};
use crate::names::names;

/// The bundle format this version writes and reads.
pub const BUNDLE_VERSION: i64 = 1;
/// The agent formats (`agent.schemaVersion`) an import reads: only the current one, since no
/// older format's fields are all defaulted yet.
pub const ACCEPTED_SCHEMA_VERSIONS: [i64; 1] = [crate::agents::SCHEMA_VERSION as i64];
/// The queue job that fences imports past their orphan age.
pub const SWEEP_JOB: &str = "bundle.import_sweep";

names! {
    /// Where an import job stands.
    pub ImportState {
        Queued = "queued", Applying = "applying", Applied = "applied", Failed = "failed", Compensated = "compensated"
    }
}

impl ImportState {
    /// Queued or applying: the job holds its key and may still write.
    pub fn active(self) -> bool {
        matches!(self, ImportState::Queued | ImportState::Applying)
    }
}

names! {
    /// What of a bundle could not come across as it was (spec: Agent bundles rule 6).
    pub UnresolvedKind {
        SkillTargetUnbound = "skill_target_unbound",
        SkillCapabilityUnknown = "skill_capability_unknown",
        ContextVariableMissing = "context_variable_missing",
        ResolverSkillMissing = "resolver_skill_missing",
        RoutineInvalid = "routine_invalid",
        DocumentSourceUnresolved = "document_source_unresolved",
        SurfaceCredentialUnbound = "surface_credential_unbound",
        McpConnectionUnbound = "mcp_connection_unbound",
        AssetNotPortable = "asset_not_portable",
        ContactDeliveryUnbound = "contact_delivery_unbound",
        DirectiveBindingUnbound = "directive_binding_unbound",
        SkillConfigNotPortable = "skill_config_not_portable",
    }
}

/// One thing that did not come across: its kind, the bundle element (`agentSkills.crm`,
/// `routines.Refund@1`, `agent.logo`) and what was done instead.
#[derive(Debug, Clone, PartialEq)]
pub struct Unresolved {
    pub kind: UnresolvedKind,
    pub element: String,
    pub detail: String,
}

impl Unresolved {
    pub fn new(kind: UnresolvedKind, element: impl Into<String>, detail: impl Into<String>) -> Unresolved {
        Unresolved { kind, element: element.into(), detail: detail.into() }
    }
}

/// How much a bundle holds (export) or an import created.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counts {
    pub routines: usize,
    pub skills: usize,
    pub context_variables: usize,
    pub directives: usize,
    /// Eval cases carried (beyond the spec).
    pub eval_cases: usize,
    pub unresolved: usize,
}

impl Counts {
    /// The audit metadata: counts only, never contents.
    fn audit(&self, agent_id: &str, import_id: Option<&str>) -> serde_json::Value {
        let mut m = json!({
            "agentId": agent_id, "routines": self.routines, "skills": self.skills,
            "contextVariables": self.context_variables, "directives": self.directives, "evalCases": self.eval_cases,
            "unresolved": self.unresolved,
        });
        if let Some(id) = import_id {
            m["importId"] = json!(id);
        }
        m
    }
}

/// An import attempt, as recorded.
#[derive(Debug, Clone)]
pub struct ImportJob {
    pub id: String,
    pub workspace_id: String,
    pub idempotency_key: Option<String>,
    pub fingerprint: String,
    pub state: ImportState,
    /// The agent it created (kept after a compensation removed the agent).
    pub agent_id: Option<String>,
    pub unresolved: Vec<Unresolved>,
    pub counts: Counts,
    /// `(code, message)` of a failed or compensated attempt.
    pub error: Option<(String, String)>,
    pub created_at: String,
    pub created_at_ms: i64,
    pub updated_at: String,
    pub finished_at: Option<String>,
}

/// What `POST /agents/bundle` answers: the job, and whether it is the earlier result of a
/// repeated idempotency key.
#[derive(Debug, Clone)]
pub struct Imported {
    pub job: ImportJob,
    pub replayed: bool,
}

/// An agent's bundle: the canonical document and the agent's name (for a file name).
#[derive(Debug, Clone)]
pub struct Exported {
    pub bundle: crate::agents::revisions::Snapshot,
    pub agent_name: String,
}

/// The job kinds bundles run.
pub fn jobs() -> Vec<(&'static str, crate::jobs::Handler)> {
    vec![(SWEEP_JOB, sweep::job)]
}

/// `GET /agents/{agentId}/bundle`: the bundle of the agent's draft; audited with counts.
pub fn export(app: &App, p: &Principal, actor: &Actor, agent_id: &str) -> Result<Exported> {
    p.require(Perm::AgentsRead)?;
    let (agent, bundle, counts) = app.db.read(|c| {
        let agent = crate::agents::get_in(c, &p.workspace_id, agent_id)?;
        let (bundle, counts) = export::build(app, c, &agent)?;
        Ok((agent, bundle, counts))
    })?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let ev = Event::new("agent.bundle.exported").workspace(&p.workspace_id).target("agent", agent_id);
        audit::record(tx, &now, actor, ev.meta(counts.audit(agent_id, None)))
    })?;
    Ok(Exported { bundle, agent_name: agent.name })
}

/// `POST /agents/bundle`: imports a bundle as a new agent of the caller's workspace, within the
/// request (see `import.rs`).
pub fn import(app: &App, p: &Principal, actor: &Actor, bundle: &serde_json::Value) -> Result<Imported> {
    p.require(Perm::AgentsManage)?;
    import::run(app, p, actor, bundle)
}

/// `GET /agents/bundle/imports/{importId}`.
pub fn get_import(app: &App, p: &Principal, id: &str) -> Result<ImportJob> {
    p.require(Perm::AgentsRead)?;
    app.db
        .read(|c| store::get(c, id))?
        .filter(|j| j.workspace_id == p.workspace_id.0)
        .ok_or_else(|| Error::not_found("bundle import"))
}

/// At start-up (holding the data directory): every import still active was running in a
/// process that is gone, so each is fenced and its agent removed. Returns how many.
pub fn recover(app: &App) -> Result<usize> {
    sweep::recover(app)
}

/// Fences the imports older than the orphan age (`AGENT_BUNDLE_IMPORT_ORPHAN_AGE_MS`).
pub fn sweep(app: &App) -> Result<usize> {
    sweep::sweep(app)
}

/// 409 `agent_bundle_import_in_progress`.
fn in_progress(import_id: &str) -> Error {
    Error::new(ErrorCode::AgentBundleImportInProgress, "an import with this idempotencyKey is still applying")
        .with_details(json!({"importId": import_id}))
}

/// The retryable 409: the import was fenced by the cleanup (its agent is removed); send it again.
fn fenced(import_id: &str) -> Error {
    Error::new(
        ErrorCode::AgentBundleImportFenced,
        "an earlier import with this idempotencyKey was interrupted and has been cleaned up; send the request again",
    )
    .with_details(json!({"importId": import_id, "retryable": true, "retryAfterSeconds": 1}))
}
