//! The wire shapes of routines (owned by the HTTP edge).

use serde::Deserialize;
use serde_json::{Value, json};

use super::definition::Definition;
use super::{Decision, RoutineInput, RoutineRecord};

/// `POST /agents/{id}/routines` and `PUT …/{routineId}`: `{version?, definition}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoutineBody {
    #[serde(default)]
    pub version: Option<i64>,
    pub definition: Definition,
}

impl From<RoutineBody> for RoutineInput {
    fn from(b: RoutineBody) -> RoutineInput {
        RoutineInput { version: b.version, definition: b.definition }
    }
}

/// A routine as the routes show it.
pub fn routine(r: &RoutineRecord) -> Value {
    json!({
        "id": r.id, "agentId": r.agent_id, "name": r.name, "version": r.version,
        "enabled": r.definition.enabled, "definition": r.definition,
        "createdAt": r.created_at, "updatedAt": r.updated_at,
    })
}

/// A decision as the routes show it (option payloads never leave).
pub fn decision(d: &Decision) -> Value {
    json!({
        "handle": d.handle, "conversationId": d.conversation_id, "agentId": d.agent_id, "routineId": d.routine_id,
        "routineName": d.routine_name,
        "stepId": d.step_id, "reason": d.reason,
        "options": d.options.iter().map(|o| json!({"id": o.id, "label": o.label, "description": o.description})).collect::<Vec<_>>(),
        "contentHash": d.content_hash, "deadline": d.deadline, "status": if d.resolved { "resolved" } else { "pending" },
        "createdAt": d.created_at,
    })
}
