//! Eval wire shapes: request bodies, and the snapshot, case, run and suite views. A snapshot's
//! body and a run's overrides are stored in the same camelCase shape they are shown in.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::{Case, Run, Snapshot, Suite, Summary};

/// One message of a frozen conversation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SnapMessage {
    pub id: String,
    pub role: String,
    pub content: String,
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub citations: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_segments: Option<Value>,
}

/// One chunk of the retrieval result a snapshot froze.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SnapChunk {
    pub chunk_id: String,
    pub document_id: String,
    pub title: String,
    pub rank: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub similarity: Option<f64>,
}

/// The agent configuration behind the answer: the revision it ran on and that revision's
/// snapshot (the stored agent settings document).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OriginalAgent {
    pub agent_id: String,
    pub revision_id: String,
    pub version: Option<i64>,
    pub snapshot: Value,
}

/// What a snapshot froze (stored as is).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotBody {
    pub messages: Vec<SnapMessage>,
    pub original_instruction_block: Option<String>,
    pub original_model_id: Option<String>,
    pub original_retrieval_settings: Option<Value>,
    pub original_agent: Option<OriginalAgent>,
    pub original_retrieval_result: Option<Vec<SnapChunk>>,
}

/// A model override.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelChoice {
    pub provider: String,
    pub model: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InstructionsOverride {
    pub custom_instruction: String,
}

/// What a run replays against instead of the current settings (stored as given).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Overrides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_override: Option<ModelChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assistant_instructions_override: Option<InstructionsOverride>,
    /// A partial `retrieval.answer` settings object laid over the agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieval_settings_override: Option<Map<String, Value>>,
    /// Agent settings laid over the configuration the snapshot captured (full snapshots and
    /// `full_assistant` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_config_override: Option<Map<String, Value>>,
    /// The routine the replayed conversation is in when the question arrives (full snapshots and
    /// `full_assistant` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routine_start_state: Option<RoutineStart>,
}

/// A routine to be in when the replay starts: by name, at a step, with slots filled.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoutineStart {
    pub routine_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_id: Option<String>,
    #[serde(default)]
    pub slots: Map<String, Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SnapshotBodyIn {
    pub conversation_id: String,
    #[serde(default)]
    pub message_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CaseBodyIn {
    pub snapshot_id: String,
    pub name: String,
    #[serde(default)]
    pub assertions: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CasePatchIn {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub assertions: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunBodyIn {
    pub mode: String,
    #[serde(default)]
    pub overrides: Option<Overrides>,
    /// Replay against this revision of the agent instead of the published one.
    #[serde(default)]
    pub revision_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SuiteBodyIn {
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub case_ids: Option<Vec<String>>,
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(default)]
    pub revision_id: Option<String>,
    #[serde(default)]
    pub repeat: Option<u32>,
    #[serde(default)]
    pub pass_threshold: Option<u32>,
    /// Answer at once with the queued suite instead of waiting for it.
    #[serde(default)]
    pub wait: Option<bool>,
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// `POST /agents/{agentId}/eval-runs`: selected cases against a candidate and the published
/// revision, side by side.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ComparisonBodyIn {
    pub revision_ids: Vec<String>,
    #[serde(default)]
    pub case_ids: Option<Vec<String>>,
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub execution_policy: Option<String>,
    #[serde(default)]
    pub idempotency_key: Option<String>,
    #[serde(default)]
    pub repeat: Option<u32>,
    #[serde(default)]
    pub pass_threshold: Option<u32>,
}

/// Keys whose values are sealed secrets in a stored agent configuration: never shown.
fn redact(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.ends_with("Sealed") && k.as_str() != "contactRequestDelivery")
                .map(|(k, v)| (k.clone(), redact(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(redact).collect()),
        other => other.clone(),
    }
}

pub fn snapshot(s: &Snapshot) -> Value {
    let b = &s.body;
    json!({
        "id": s.id, "workspaceId": s.workspace_id, "agentId": s.agent_id,
        "sourceConversationId": s.source_conversation_id, "sourceMessageId": s.source_message_id,
        "fidelity": s.fidelity, "messages": b.messages,
        "originalInstructionBlock": b.original_instruction_block, "originalModelId": b.original_model_id,
        "originalRetrievalSettings": b.original_retrieval_settings,
        "originalAgent": b.original_agent.as_ref().map(|a| json!({"agentId": a.agent_id, "revisionId": a.revision_id,
            "version": a.version, "configuration": redact(&a.snapshot)})),
        "originalRetrievalResult": b.original_retrieval_result,
        "capturedAt": s.captured_at, "capturedBy": s.captured_by,
    })
}

pub fn case(c: &Case) -> Value {
    json!({
        "id": c.id, "workspaceId": c.workspace_id, "snapshotId": c.snapshot_id, "agentId": c.agent_id,
        "sourceMessageId": c.source_message_id, "name": c.name,
        "assertions": c.assertions.iter().map(|a| a.to_json()).collect::<Vec<_>>(),
        "status": c.status, "scored": !c.assertions.is_empty(), "lastRunId": c.last_run_id,
        "question": c.question, "createdAt": c.created_at, "updatedAt": c.updated_at,
    })
}

/// The JSON Schema of [`case`] (OpenAPI).
pub fn case_schema(_: &mut schemars::SchemaGenerator) -> Value {
    use crate::http::openapi::shapes::{any_object, array, boolean, obj, one_of, string, string_or_null};
    obj(json!({
        "id": string(), "workspaceId": string(), "snapshotId": string(), "agentId": string(),
        "sourceMessageId": string_or_null(), "name": string(), "assertions": array(any_object()),
        "status": one_of(&["pending", "passing", "failing", "error"]), "scored": boolean(), "lastRunId": string_or_null(), "question": string_or_null(),
        "createdAt": string(), "updatedAt": string(),
    }))
}

pub fn run(r: &Run) -> Value {
    json!({
        "id": r.id, "workspaceId": r.workspace_id, "snapshotId": r.snapshot_id, "caseId": r.case_id,
        "suiteId": r.suite_id, "mode": r.mode, "revisionId": r.revision_id, "overrides": r.overrides,
        "resolvedConfig": r.resolved_config, "observedOutput": r.observed_output, "status": r.status,
        "outcomeReason": r.outcome_reason, "assertionVerdicts": r.verdicts,
        "startedAt": r.started_at, "completedAt": r.completed_at,
    })
}

pub fn summary(s: &Summary) -> Value {
    json!({
        "total": s.total, "scored": s.scored, "passing": s.passing, "failing": s.failing, "error": s.error,
        "pending": s.pending, "unscored": s.unscored, "passRate": s.pass_rate(),
    })
}

/// The JSON Schema of [`summary`] (OpenAPI).
pub fn summary_schema() -> Value {
    use crate::http::openapi::shapes::{integer, nullable, number, obj};
    obj(json!({
        "total": integer(), "scored": integer(), "passing": integer(), "failing": integer(), "error": integer(),
        "pending": integer(), "unscored": integer(), "passRate": nullable(number()),
    }))
}

pub fn suite(s: &Suite) -> Value {
    json!({
        "id": s.id, "agentId": s.agent_id, "comparisonId": s.comparison_id, "side": s.side,
        "revisionId": s.revision_id, "mode": s.mode, "repeat": s.repeat, "passThreshold": s.pass_threshold,
        "caseIds": s.case_ids, "status": s.status, "progress": {"done": s.done, "total": s.total},
        "results": s.results, "summary": s.summary, "runSummary": s.run_summary(), "error": s.error,
        "createdAt": s.created_at, "completedAt": s.completed_at,
    })
}
