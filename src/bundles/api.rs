//! The bundles' wire shapes: the elements of a bundle document (written by export, read by
//! import; the agent object and directives reuse the agents' own shapes) and the import job's
//! view.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Counts, ImportJob, Unresolved};
use crate::routines::definition::Definition;

/// What a bundle puts where an id of the source workspace was: `{"__ref": "<what>"}`.
pub const REF_KEY: &str = "__ref";
/// The reference a skill's target id becomes.
pub const TARGET_REF: &str = "agentSkillTarget";
/// The reference the agent's logo becomes (its bytes never travel).
pub const LOGO_REF: &str = "agentLogo";

fn yes() -> bool {
    true
}

/// A skill's target: its kind, and `id` null (targets without one) or `{"__ref": "agentSkillTarget"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TargetEntry {
    pub kind: String,
    #[serde(default)]
    pub id: Value,
}

/// One skill of the agent: only the config keys its capability marks portable; the names (never
/// the values) of the others in `omittedConfigKeys`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillEntry {
    pub name: String,
    pub capability: String,
    #[serde(default)]
    pub invocation_mode: Option<String>,
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default)]
    pub config: Map<String, Value>,
    #[serde(default)]
    pub omitted_config_keys: Vec<String>,
    #[serde(default)]
    pub target: Option<TargetEntry>,
}

/// A context variable enabled on the agent, by the variable's name (the resolver skill by its
/// name). `surfacing` goes beyond the spec's fields so a round trip keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VariableEntry {
    pub variable_name: String,
    pub source: String,
    #[serde(default)]
    pub resolver_skill_name: Option<String>,
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default)]
    pub surfacing: Option<String>,
}

/// A routine: the structured definition (its own `enabled` flag inside; skills and variables by
/// name; a completion export's destination by the destination's name).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoutineEntry {
    pub name: String,
    pub version: i64,
    pub definition: Definition,
}

/// One unresolved reference of an import.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnresolvedView<'a> {
    kind: &'a str,
    element: &'a str,
    detail: &'a str,
}

impl<'a> UnresolvedView<'a> {
    pub fn of(u: &'a Unresolved) -> UnresolvedView<'a> {
        UnresolvedView { kind: u.kind.as_str(), element: &u.element, detail: &u.detail }
    }
}

/// What an import created (or a bundle holds).
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CountsView {
    routines: usize,
    skills: usize,
    context_variables: usize,
    directives: usize,
    eval_cases: usize,
    unresolved: usize,
}

impl CountsView {
    pub fn of(c: &Counts) -> CountsView {
        CountsView {
            routines: c.routines,
            skills: c.skills,
            context_variables: c.context_variables,
            directives: c.directives,
            eval_cases: c.eval_cases,
            unresolved: c.unresolved,
        }
    }
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct JobError<'a> {
    code: &'a str,
    message: &'a str,
}

/// An import job: the answer of `POST /agents/bundle` (with `replayed`) and of
/// `GET /agents/bundle/imports/{importId}`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImportView<'a> {
    import_id: &'a str,
    agent_id: Option<&'a str>,
    status: &'a str,
    replayed: bool,
    unresolved: Vec<UnresolvedView<'a>>,
    counts: CountsView,
    idempotency_key: Option<&'a str>,
    error: Option<JobError<'a>>,
    created_at: &'a str,
    updated_at: &'a str,
    finished_at: Option<&'a str>,
}

impl<'a> ImportView<'a> {
    pub fn of(j: &'a ImportJob, replayed: bool) -> ImportView<'a> {
        ImportView {
            import_id: &j.id,
            agent_id: j.agent_id.as_deref(),
            status: j.state.as_str(),
            replayed,
            unresolved: j.unresolved.iter().map(UnresolvedView::of).collect(),
            counts: CountsView::of(&j.counts),
            idempotency_key: j.idempotency_key.as_deref(),
            error: j.error.as_ref().map(|(code, message)| JobError { code, message }),
            created_at: &j.created_at,
            updated_at: &j.updated_at,
            finished_at: j.finished_at.as_deref(),
        }
    }
}
