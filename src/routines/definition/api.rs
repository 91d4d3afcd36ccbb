//! The structured routine definition: what a routine is, whatever it was written in (the
//! structured routes, portable markdown, a bundle). Stored as this JSON shape (camelCase) inside
//! the agent's draft and in revision snapshots; the portable markdown compiles to it and projects
//! from it.
//!
//! A routine collects typed slots over a graph of steps (`chat`, `tool`, `action`, `approval`),
//! joined by guarded transitions, and ends at a terminal (`complete` or `handoff`).

use serde::{Deserialize, Serialize};

use crate::names::names;

names! {
    /// A slot's type; values are checked against it when collected.
    pub SlotType { Text = "text", Number = "number", Boolean = "boolean", Email = "email", Date = "date" }
}

names! {
    /// What a step does.
    pub StepKind { Chat = "chat", Tool = "tool", Action = "action", Approval = "approval" }
}

names! {
    /// How a transition decides.
    pub GuardKind {
        Llm = "llm", Default = "default", SlotFilled = "slot_filled", Outcome = "outcome", Counter = "counter", Field = "field"
    }
}

names! {
    /// A terminal's kind.
    pub TerminalKind { Complete = "complete", Handoff = "handoff" }
}

names! {
    /// Whether a routine that already ran in a conversation may start again.
    pub ReentryMode { OncePerConversation = "once_per_conversation", Always = "always", Semantic = "semantic" }
}

names! {
    /// A field guard's operator.
    pub FieldOp {
        Equals = "equals", NotEquals = "not_equals", In = "in", Gt = "gt", Gte = "gte", Lt = "lt", Lte = "lte",
        IsTrue = "is_true", IsFalse = "is_false", IsPresent = "is_present", IsAbsent = "is_absent",
        OlderThan = "older_than", Within = "within"
    }
}

names! {
    /// The unit of a relative date guard.
    pub DateUnit { Days = "days", Weeks = "weeks", Months = "months", Years = "years" }
}

/// `names!` types serialize as their names; they also read back from them.
macro_rules! deserialize_names {
    ($($t:ident),+) => {$(
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                $t::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("unknown {} `{s}`", stringify!($t))))
            }
        }
    )+};
}
deserialize_names!(SlotType, StepKind, GuardKind, TerminalKind, ReentryMode, FieldOp, DateUnit);

/// When a routine starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Activation {
    /// What the visitor says or wants when this routine applies (1–2000 characters).
    pub trigger_description: String,
    /// An activation gate (a routine that must be approved before it starts); not expressible in
    /// markdown v1.
    #[serde(default)]
    pub gate_ref: Option<String>,
    #[serde(default)]
    pub priority: i64,
    #[serde(default = "default_reentry")]
    pub reentry_mode: ReentryMode,
}

fn default_reentry() -> ReentryMode {
    ReentryMode::OncePerConversation
}

/// A typed value the routine collects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Slot {
    pub stable_slot_id: String,
    pub key: String,
    #[serde(rename = "type")]
    pub slot_type: SlotType,
    pub required: bool,
    #[serde(default)]
    pub description: Option<String>,
    pub ordinal: i64,
    /// Can be changed after it was given (re-running the guards that depend on it).
    #[serde(default)]
    pub mutable: bool,
}

/// An option of an approval or decision gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GateOption {
    pub id: String,
    pub label: String,
    #[serde(default)]
    pub description: Option<String>,
}

/// A binding of a tool step's input: a literal, a slot (`@slot`) or a context variable
/// (`ctx.<name>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase", tag = "kind", deny_unknown_fields)]
pub enum InputBinding {
    Literal { name: String, value: serde_json::Value },
    VariableRef { name: String, variable: String },
    ContextVariableRef { name: String, context_variable: String },
}

/// A tool output assigned to a slot (`out name=@slot`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutputAssignment {
    pub output: String,
    pub variable: String,
}

/// A step's authoring metadata (how markdown wrote it; tool bindings).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StepMetadata {
    /// The heading a markdown step had (`# Title`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outline_label: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input_bindings: Vec<InputBinding>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output_assignments: Vec<OutputAssignment>,
    /// `typed` (default) or `untyped` (inputs passed as given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// A decision gate (inline, routed by branch lines) rather than an approval block gate.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub decision: bool,
    /// An approval's time limit in seconds: its decision's `deadline` (beyond the spec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_secs: Option<i64>,
    /// The option an approval takes when its deadline passes undecided (beyond the spec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_option: Option<String>,
}

/// A step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Step {
    pub stable_step_id: String,
    pub kind: StepKind,
    /// What the step says or does (1–4000 characters); `{{slot.x}}` names a slot.
    pub instruction: String,
    /// A tool step's skill (by name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_ref: Option<String>,
    /// An action step's action type (run as an idempotent outbox action).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_type: Option<String>,
    /// An approval step's capture key (the chosen option is stored under it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_key: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<GateOption>,
    pub ordinal: i64,
    #[serde(default)]
    pub metadata: StepMetadata,
}

/// A guarded edge from a step to a step or terminal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Transition {
    pub from_step: String,
    pub to_ref: String,
    pub guard_kind: GuardKind,
    /// An LLM guard's question; a slot-filled guard's `{{slot.a}} {{slot.b}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome_status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter_limit: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_op: Option<FieldOp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_value: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_values: Option<Vec<serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_unit: Option<DateUnit>,
    pub ordinal: i64,
}

/// What operators are told when a completion terminal notifies them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OperatorNotice {
    #[serde(default)]
    pub subject: Option<String>,
    #[serde(default)]
    pub intro: Option<String>,
}

/// Where a routine ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Terminal {
    pub stable_step_id: String,
    pub kind: TerminalKind,
    /// What the visitor is told at the end.
    #[serde(default)]
    pub instruction: Option<String>,
    pub ordinal: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_notice: Option<OperatorNotice>,
}

/// Sends the routine's result to a webhook destination when it ends at one of `trigger_kinds`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompletionExport {
    pub enabled: bool,
    pub trigger_kinds: Vec<TerminalKind>,
    pub destination_ref: String,
}

/// The routine as a typed tool for calling agents (the converse surface).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Exposure {
    pub enabled: bool,
    pub tool_name: String,
    #[serde(default)]
    pub description: String,
}

/// A routine definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Definition {
    pub name: String,
    #[serde(default = "yes")]
    pub enabled: bool,
    pub activation: Activation,
    #[serde(default)]
    pub slots: Vec<Slot>,
    pub steps: Vec<Step>,
    #[serde(default)]
    pub transitions: Vec<Transition>,
    pub terminals: Vec<Terminal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_export: Option<CompletionExport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exposure: Option<Exposure>,
}

fn yes() -> bool {
    true
}

impl Definition {
    pub fn step(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.stable_step_id == id)
    }
    pub fn terminal(&self, id: &str) -> Option<&Terminal> {
        self.terminals.iter().find(|t| t.stable_step_id == id)
    }
    pub fn slot(&self, key: &str) -> Option<&Slot> {
        self.slots.iter().find(|s| s.key == key)
    }
    /// The transitions leaving `step`, in ordinal order.
    pub fn exits(&self, step: &str) -> Vec<&Transition> {
        let mut v: Vec<&Transition> = self.transitions.iter().filter(|t| t.from_step == step).collect();
        v.sort_by_key(|t| t.ordinal);
        v
    }
    /// The first step (lowest ordinal).
    pub fn root(&self) -> Option<&Step> {
        self.steps.iter().min_by_key(|s| s.ordinal)
    }
}

/// A validation finding: where (`step:<id>`, `transition:<from>-><to>`, `slot:<key>`, `routine`),
/// a stable code and a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub code: &'static str,
    pub location: String,
    pub message: String,
}
