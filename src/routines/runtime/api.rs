//! The stored shape of a running routine (`state.routine` of a conversation, camelCase JSON).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A running routine, kept in the conversation's state.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    pub routine_id: String,
    pub name: String,
    pub version: i64,
    pub execution_id: String,
    /// The step the routine stands on.
    pub step: String,
    pub variables: Map<String, Value>,
    /// Entries into each step.
    pub attempts: BTreeMap<String, i64>,
    /// `active`, `suspended` (waiting for a decision) or `completed`.
    pub status: String,
    pub reask_count: u32,
    pub path: Vec<String>,
    /// The last tool step's result: `{status, outputs}`.
    #[serde(default)]
    pub last_result: Option<Value>,
    /// The pending decision's handle while suspended.
    #[serde(default)]
    pub decision: Option<String>,
    /// Whether the current step has been said to the visitor (its reply was shown).
    #[serde(default)]
    pub asked: bool,
    /// When the routine last took a turn (Unix seconds): an idle routine is abandoned.
    #[serde(default)]
    pub touched_at: Option<i64>,
}
