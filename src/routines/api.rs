//! The wire shapes of routines (owned by the HTTP edge).

use serde::Deserialize;
use serde_json::{Value, json};

use super::definition::Definition;
use super::{RoutineInput, RoutineRecord};

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
