//! Running a skill: the one place an agent's skill is executed, whoever calls it — a routine's
//! tool step, a directive's bound `mcp_tool` skill claiming a turn, an operator's test send.
//!
//! A skill's *definition* (capabilities, configuration, sealed secrets, CRUD) is the agents
//! domain's (`agents::skills`); here it runs:
//! - `retrieve` answers from the workspace's documents through the turn's retrieval and answer
//!   stages, reached through [`Retrieval`] — installed on the `App` by its builder (as the routine
//!   pass is), so this module never calls up into the turn;
//! - `notify`, `webhook_call`, `email`, `slack_post` deliver through the outbox ([`deliver`]);
//! - `mcp_tool` calls its tool on an external MCP server ([`mcp`]);
//! - other capabilities report `failed` with the reason `no_executor` until their connectors
//!   exist.
//!
//! A call's result is `{status, outputs}` ([`ToolResult`]); a test execution (`simulate`) sends
//! nothing.

mod deliver;
mod mcp;

use serde_json::{Map, Value, json};

use crate::agents::config::AgentConfig;
use crate::app::App;
use crate::auth::{Perm, Principal};
use crate::error::{Error, Result};
use crate::ids::WorkspaceId;

/// A step's inputs: named values, free-form JSON (the skill's configuration says which it takes).
pub type SkillInputs = Map<String, Value>;

/// What an invocation did.
#[derive(Debug, Clone)]
pub struct SkillResult {
    /// One of the capability's outcomes (`delivered`, `missing_input`, `destination_not_found`,
    /// `sent`, `drafted`, `posted`, `failed`).
    pub outcome: &'static str,
    /// Inputs that were needed and not given.
    pub missing_inputs: Vec<String>,
    pub delivery_ids: Vec<String>,
    /// Why it failed, in words.
    pub reason: Option<String>,
}

impl SkillResult {
    pub(crate) fn of(outcome: &'static str) -> SkillResult {
        SkillResult { outcome, missing_inputs: Vec::new(), delivery_ids: Vec::new(), reason: None }
    }
    pub(crate) fn failed(reason: impl Into<String>) -> SkillResult {
        SkillResult { reason: Some(reason.into()), ..SkillResult::of("failed") }
    }
}

/// A tool call's result: `{status, outputs}`, free-form JSON (each skill has its own outputs).
pub type ToolResult = Value;

fn failed(skill: &str, reason: &str) -> ToolResult {
    json!({"status": "failed", "outputs": {"skill": skill, "reason": reason}})
}

/// Who calls a skill, and on what.
pub struct Call<'a> {
    pub workspace: &'a WorkspaceId,
    /// The agent configuration the caller runs (a revision, or the draft in a test).
    pub agent: &'a AgentConfig,
    pub conversation_id: Option<&'a str>,
    /// The visitor's message (a retrieval skill's query when the call gives none).
    pub message: &'a str,
    /// A test execution: delivering and external skills report success and send nothing.
    pub simulate: bool,
    /// Makes the call's deliveries idempotent (a retried step sends nothing twice).
    pub key: &'a str,
}

/// What a retrieval skill found.
#[derive(Debug, Clone, Default)]
pub struct Found {
    pub answer: Option<String>,
    pub result_count: usize,
    pub top_title: Option<String>,
}

/// Answers a query from the workspace's documents as the agent would (the turn's retrieval and
/// composition, implemented by the turn and installed on the `App`).
pub trait Retrieval: Send + Sync {
    fn answer(&self, app: &App, workspace: &WorkspaceId, agent: &AgentConfig, query: &str) -> Result<Found>;
}

/// Calls the agent's enabled skill `name` with `inputs`.
pub fn run(app: &App, c: &Call, name: &str, inputs: &SkillInputs) -> Result<ToolResult> {
    let Some(snap) = c.agent.skill(name).filter(|s| s.enabled) else {
        return Ok(failed(name, "unknown_skill"));
    };
    let skill = snap.to_skill(&c.agent.agent_id);
    match skill.capability.as_str() {
        "retrieve" => {
            let query = inputs.get("query").and_then(Value::as_str).unwrap_or(c.message);
            let f = app.skill_retrieval.answer(app, c.workspace, c.agent, query)?;
            Ok(json!({"status": "completed", "outputs": {
                "skill": name, "answer": f.answer, "resultCount": f.result_count, "topTitle": f.top_title,
            }}))
        }
        "notify" | "webhook_call" | "email" | "slack_post" => {
            if c.simulate {
                return Ok(json!({"status": "completed", "outputs": {"skill": name, "simulated": true}}));
            }
            let r = deliver::invoke(app, &c.workspace.0, &skill, inputs, c.conversation_id, c.key)?;
            let status = match r.outcome {
                "delivered" | "sent" | "posted" | "drafted" => "completed",
                _ => "failed",
            };
            Ok(json!({"status": status, "outputs": {"skill": name, "outcome": r.outcome, "deliveryIds": r.delivery_ids,
                       "missingInputs": r.missing_inputs, "reason": r.reason}}))
        }
        "mcp_tool" => mcp::call(app, c, &skill, inputs),
        _ => Ok(failed(name, "no_executor")),
    }
}

/// `POST /agents/{agentId}/skills/{skillId}/test`: runs a delivering skill of the draft once,
/// with the operator's test inputs.
pub fn test(app: &App, p: &Principal, agent_id: &str, skill_id: &str, inputs: &SkillInputs) -> Result<SkillResult> {
    p.require(Perm::AgentsManage)?;
    let skill = crate::agents::skills::get(app, p, agent_id, skill_id)?;
    if !["webhook_call", "slack_post", "email", "notify"].contains(&skill.capability.as_str()) {
        return Err(Error::invalid(format!(
            "a {} skill does not deliver; only notify, webhook_call, email and slack_post can be tested here",
            skill.capability
        )));
    }
    let key = format!("skill-test:{}", crate::ids::new_id());
    deliver::invoke(app, &p.workspace_id.0, &skill, inputs, None, &key)
}
