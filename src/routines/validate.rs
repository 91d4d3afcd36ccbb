//! The rules of a routine definition (reference §10, §11): located findings (`step:<id>`,
//! `transition:<from>-><to>`, `slot:<key>`, `routine`), every one collected. Structural rules
//! need only the definition; the agent's skills, context variables and webhook destinations come
//! in a [`ValidationContext`] (a `None` there skips the rules that need it, for callers that check
//! structure only).
//!
//! Codes from the reference: `node_id_collision`, `missing_terminal`, `unreachable_step`,
//! `dangling_step_reference`, `dangling_action_reference`, `unknown_skill`, `unbounded_back_edge`,
//! `attempt_limit_without_fallback`, `outcome_guard_on_non_tool_step`,
//! `structured_guard_missing_parameter`, `field_guard_unknown_reference`,
//! `field_guard_incompatible_type`, `missing_action_follow_up`, `referenced_undeclared_slot`,
//! `declared_unused_slot`, `variable_name_collision`, `unknown_input_binding`,
//! `input_type_mismatch`, `unknown_variable_ref`, `unsatisfiable_required_input`,
//! `unknown_context_variable`, `approval_step_no_decision_edge`, `approval_step_llm_edge`,
//! `approval_step_unreachable_option`, `approval_step_unknown_option`,
//! `completion_export_missing_destination`, `exposure_tool_name_invalid`,
//! `exposure_tool_name_reserved`, `exposure_requires_ungated_activation`.
//! Steward's own, for the schema limits the reference gives without naming a code:
//! `invalid_name` (1–200 characters), `invalid_trigger` (1–2000), `invalid_instruction` (steps
//! 1–4000, terminal messages at most 4000), `invalid_identifier` (ids and refs
//! `[A-Za-z_][A-Za-z0-9_.-]*` up to 120, slot, capture and binding keys `[A-Za-z_][A-Za-z0-9_]*`
//! up to 120, skill and action names and destination ids up to 300), `invalid_text_length`
//! (option labels 1–120, descriptions up to 500, slot descriptions up to 1000, guard text up to
//! 2000, field values 1–500), `invalid_approval_step` (capture key, 2–8 options with unique ids,
//! no skill or action; gate fields only on approval steps), `missing_step`, `duplicate_slot_key`,
//! `completion_export_missing_trigger` and `unknown_output_assignment` (an `out` naming an output
//! the skill does not declare).
//!
//! Deliberate readings: a slot bound as a skill input counts as used; a field guard may read the
//! output (or a dotted path into it) of the tool step it leaves; a `slot_filled` guard must name
//! a slot; context variables are referenced in instructions as `{{context.<name>}}` or
//! `{{ctx.<name>}}`.
//!
//! The tests live with the markdown tests (src/routines/markdown/tests/validate.rs): most failing
//! definitions are easiest to write as markdown.

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::Value;

use super::definition::{
    Definition, FieldOp, Finding, GuardKind, InputBinding, Slot, SlotType, Step, StepKind, Transition,
};
use super::markdown::{brace_refs, is_ident, is_slot_key, slot_refs};

/// What the caller knows about the agent the routine belongs to.
#[derive(Debug, Clone, Default)]
pub struct ValidationContext {
    /// The agent's skills (enabled ones); `None`: skills are not checked.
    pub skills: Option<Vec<SkillInfo>>,
    /// The context variables enabled for the agent; `None`: not checked.
    pub context_variables: Option<Vec<ContextVariableInfo>>,
    /// The ids of the workspace's webhook destinations; `None`: not checked.
    pub destinations: Option<Vec<String>>,
}

/// A skill a tool step may call, with its declared inputs and outputs.
#[derive(Debug, Clone)]
pub struct SkillInfo {
    pub name: String,
    pub inputs: Vec<SkillInput>,
    /// The outputs it returns; `None`: any name (the result's shape is not declared).
    pub outputs: Option<Vec<String>>,
    /// Whether any input name is accepted (an external MCP tool's arguments are its server's to
    /// check).
    pub open_inputs: bool,
}

#[derive(Debug, Clone)]
pub struct SkillInput {
    pub name: String,
    pub input_type: InputType,
    pub required: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum InputType {
    Text,
    Number,
    Boolean,
    Email,
    Date,
    /// A string from this list.
    Enum(Vec<String>),
}

#[derive(Debug, Clone)]
pub struct ContextVariableInfo {
    pub name: String,
    /// `valueType: json` (any input accepts it); otherwise a string.
    pub json: bool,
}

/// Tool names a routine exposure cannot take: the agent surface's own tools.
pub const RESERVED_TOOL_NAMES: [&str; 4] =
    ["ask_agent", "get_conversation_updates", "get_agent_profile", "list_routines"];

const MAX_ID: usize = 120;

/// Every finding for `def`; empty when it is valid.
pub fn validate(def: &Definition, ctx: &ValidationContext) -> Vec<Finding> {
    let ix = Index::of(def);
    let mut v = Check { def, ctx, ix: &ix, out: Vec::new() };
    v.schema();
    v.structure();
    v.bindings();
    v.transitions();
    v.slot_use();
    v.reachability();
    v.out
}

fn sorted(d: &Definition) -> Vec<&Step> {
    let mut s: Vec<&Step> = d.steps.iter().collect();
    s.sort_by_key(|s| s.ordinal);
    s
}

/// Lookups by id, built once (a definition from a 1 MB document has many thousands of steps).
struct Index<'a> {
    steps: HashMap<&'a str, &'a Step>,
    terminals: HashSet<&'a str>,
    slots: HashMap<&'a str, &'a Slot>,
    exits: HashMap<&'a str, Vec<&'a Transition>>,
}

impl<'a> Index<'a> {
    fn of(d: &'a Definition) -> Index<'a> {
        let mut exits: HashMap<&str, Vec<&Transition>> = HashMap::new();
        for e in &d.transitions {
            exits.entry(e.from_step.as_str()).or_default().push(e);
        }
        Index {
            steps: d.steps.iter().map(|s| (s.stable_step_id.as_str(), s)).collect(),
            terminals: d.terminals.iter().map(|t| t.stable_step_id.as_str()).collect(),
            slots: d.slots.iter().map(|s| (s.key.as_str(), s)).collect(),
            exits,
        }
    }
    fn step(&self, id: &str) -> Option<&'a Step> {
        self.steps.get(id).copied()
    }
    fn slot(&self, key: &str) -> Option<&'a Slot> {
        self.slots.get(key).copied()
    }
    fn is_node(&self, id: &str) -> bool {
        self.steps.contains_key(id) || self.terminals.contains(id)
    }
    fn exits(&self, id: &str) -> &[&'a Transition] {
        self.exits.get(id).map_or(&[], Vec::as_slice)
    }
    /// A counter edge's way out: it goes to a terminal, or its step's default edge does.
    fn terminal_path(&self, e: &Transition) -> bool {
        self.terminals.contains(e.to_ref.as_str())
            || self
                .exits(&e.from_step)
                .iter()
                .any(|x| x.guard_kind == GuardKind::Default && self.terminals.contains(x.to_ref.as_str()))
    }
}

/// The routine's variables: slots and skill-output targets.
fn variables(d: &Definition) -> HashSet<&str> {
    d.slots
        .iter()
        .map(|s| s.key.as_str())
        .chain(d.steps.iter().flat_map(|s| &s.metadata.output_assignments).map(|o| o.variable.as_str()))
        .collect()
}

struct Check<'a> {
    def: &'a Definition,
    ctx: &'a ValidationContext,
    ix: &'a Index<'a>,
    out: Vec<Finding>,
}

fn step_at(id: &str) -> String {
    format!("step:{id}")
}

fn edge_at(e: &Transition) -> String {
    format!("transition:{}->{}", e.from_step, e.to_ref)
}

fn is_id(s: &str) -> bool {
    s.len() <= MAX_ID && is_ident(s)
}

fn is_key(s: &str) -> bool {
    s.len() <= MAX_ID && is_slot_key(s)
}

/// Trimmed length within `min..=max` characters.
fn fits(s: &str, min: usize, max: usize) -> bool {
    let n = s.trim().chars().count();
    (min..=max).contains(&n)
}

fn is_tool_name(s: &str) -> bool {
    let mut c = s.chars();
    (2..=63).contains(&s.len())
        && c.next().is_some_and(|c| c.is_ascii_lowercase())
        && c.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

impl Check<'_> {
    fn push(&mut self, code: &'static str, location: impl Into<String>, message: impl Into<String>) {
        self.out.push(Finding { code, location: location.into(), message: message.into() });
    }

    fn schema(&mut self) {
        let d = self.def;
        if !fits(&d.name, 1, 200) {
            self.push("invalid_name", "routine", "the name is 1 to 200 characters");
        }
        if !fits(&d.activation.trigger_description, 1, 2000) {
            self.push("invalid_trigger", "routine", "the trigger is 1 to 2000 characters");
        }
        if d.activation.gate_ref.as_deref().is_some_and(|g| !fits(g, 1, 300)) {
            self.push("invalid_identifier", "routine", "the activation gate reference is 1 to 300 characters");
        }
        if d.steps.is_empty() {
            self.push("missing_step", "routine", "a routine needs at least one step");
        }
        for s in &d.steps {
            self.step_schema(s);
        }
        let mut keys = HashSet::new();
        let mut ids = HashSet::new();
        for s in &d.slots {
            let at = format!("slot:{}", s.key);
            if !is_key(&s.key) || !is_id(&s.stable_slot_id) {
                self.push("invalid_identifier", &at, "a slot key is `[A-Za-z_][A-Za-z0-9_]*`, its id an identifier");
            }
            if s.description.as_deref().is_some_and(|t| !fits(t, 1, 1000)) {
                self.push("invalid_text_length", &at, "a slot description is 1 to 1000 characters");
            }
            if !keys.insert(s.key.as_str()) || !ids.insert(s.stable_slot_id.as_str()) {
                self.push("duplicate_slot_key", at, format!("slot `{}` is declared more than once", s.key));
            }
        }
        for e in &d.transitions {
            let at = edge_at(e);
            if !is_id(&e.from_step) || !is_id(&e.to_ref) {
                self.push("invalid_identifier", &at, "transition ends are identifiers of up to 120 characters");
            }
            let long = e.guard_text.as_deref().is_some_and(|t| t.chars().count() > 2000)
                || e.outcome_status.as_deref().is_some_and(|t| t.chars().count() > MAX_ID)
                || e.field_ref.as_deref().is_some_and(|t| t.chars().count() > 200)
                || e.field_value
                    .iter()
                    .chain(e.field_values.iter().flatten())
                    .any(|v| v.as_str().is_some_and(|t| !fits(t, 1, 500)));
            if long {
                self.push("invalid_text_length", at, "a guard text, field, outcome or value is empty or too long");
            }
        }
        for t in &d.terminals {
            if !is_id(&t.stable_step_id) {
                self.push("invalid_identifier", step_at(&t.stable_step_id), "a terminal id is an identifier");
            }
            if t.instruction.as_deref().is_some_and(|i| !fits(i, 1, 4000)) {
                self.push("invalid_instruction", step_at(&t.stable_step_id), "a message is 1 to 4000 characters");
            }
        }
        if let Some(x) = d.completion_export.as_ref().filter(|x| x.enabled) {
            if x.trigger_kinds.is_empty() {
                self.push(
                    "completion_export_missing_trigger",
                    "routine",
                    "an export names `complete`, `handoff` or both",
                );
            }
            let dest = x.destination_ref.trim();
            if dest.is_empty() {
                self.push("completion_export_missing_destination", "routine", "an export names a webhook destination");
            } else if dest.chars().count() > 300 {
                self.push("invalid_identifier", "routine", "a destination reference is at most 300 characters");
            } else if self.ctx.destinations.as_ref().is_some_and(|all| !all.iter().any(|d| d == dest)) {
                self.push(
                    "completion_export_missing_destination",
                    "routine",
                    format!("no webhook destination `{dest}`"),
                );
            }
        }
        if let Some(x) = d.exposure.as_ref().filter(|x| x.enabled) {
            if !is_tool_name(&x.tool_name) {
                self.push("exposure_tool_name_invalid", "routine", "a tool name is `[a-z][a-z0-9_]{1,62}`");
            } else if RESERVED_TOOL_NAMES.contains(&x.tool_name.as_str()) {
                self.push("exposure_tool_name_reserved", "routine", format!("`{}` is a built-in tool", x.tool_name));
            }
            if d.activation.gate_ref.is_some() {
                self.push(
                    "exposure_requires_ungated_activation",
                    "routine",
                    "a tool call would bypass the activation gate",
                );
            }
        }
    }

    fn step_schema(&mut self, s: &Step) {
        let at = step_at(&s.stable_step_id);
        if !is_id(&s.stable_step_id) {
            self.push("invalid_identifier", &at, "a step id is an identifier");
        }
        if !fits(&s.instruction, 1, 4000) {
            self.push("invalid_instruction", &at, "an instruction is 1 to 4000 characters");
        }
        if s.tool_ref.iter().chain(&s.action_type).any(|n| !fits(n, 1, 300)) {
            self.push("invalid_identifier", &at, "a skill or action name is 1 to 300 characters");
        }
        let m = &s.metadata;
        let names_ok = m.input_bindings.iter().all(|b| match b {
            InputBinding::Literal { name, .. } => is_key(name),
            InputBinding::VariableRef { name, variable } => is_key(name) && is_key(variable),
            InputBinding::ContextVariableRef { name, context_variable } => is_key(name) && is_key(context_variable),
        }) && m.output_assignments.iter().all(|o| is_key(&o.output) && is_key(&o.variable))
            && m.mode.as_deref().is_none_or(|x| x == "typed" || x == "untyped");
        if !names_ok {
            self.push(
                "invalid_identifier",
                &at,
                "a binding, slot or variable name is not a key, or the mode is unknown",
            );
        }
        if s.kind != StepKind::Approval {
            if s.capture_key.is_some() || !s.options.is_empty() || m.decision {
                self.push("invalid_approval_step", at, "only an approval step has a capture key and options");
            }
            return;
        }
        let mut problems = Vec::new();
        if !s.capture_key.as_deref().is_some_and(is_key) {
            problems.push("a capture key (`[A-Za-z_][A-Za-z0-9_]*`)");
        }
        if !(2..=8).contains(&s.options.len()) {
            problems.push("2 to 8 options");
        }
        let mut seen = HashSet::new();
        if s.options.iter().any(|o| !is_id(&o.id) || !seen.insert(o.id.as_str())) {
            problems.push("unique option ids");
        }
        if s.tool_ref.is_some() || s.action_type.is_some() {
            problems.push("no skill or action");
        }
        if !problems.is_empty() {
            self.push("invalid_approval_step", &at, format!("an approval step needs {}", problems.join(", ")));
        }
        if s.options
            .iter()
            .any(|o| !fits(&o.label, 1, 120) || o.description.as_deref().is_some_and(|d| !fits(d, 1, 500)))
        {
            self.push("invalid_text_length", at, "an option label is 1 to 120 characters, a description 1 to 500");
        }
    }

    fn structure(&mut self) {
        let (d, ctx, ix) = (self.def, self.ctx, self.ix);
        let mut seen = HashSet::new();
        let mut reported = HashSet::new();
        for id in d.steps.iter().map(|s| &s.stable_step_id).chain(d.terminals.iter().map(|t| &t.stable_step_id)) {
            if !seen.insert(id.as_str()) && reported.insert(id.as_str()) {
                self.push("node_id_collision", step_at(id), format!("`{id}` names more than one step or terminal"));
            }
        }
        if d.terminals.is_empty() {
            self.push("missing_terminal", "routine", "a routine needs at least one terminal");
        }
        for s in sorted(d) {
            let at = step_at(&s.stable_step_id);
            match s.kind {
                StepKind::Tool => match s.tool_ref.as_deref().filter(|t| !t.trim().is_empty()) {
                    None => self.push("dangling_action_reference", at, "a tool step names the skill it calls"),
                    Some(t) => {
                        if ctx.skills.as_ref().is_some_and(|all| !all.iter().any(|k| k.name == t)) {
                            self.push("unknown_skill", at, format!("the agent has no enabled skill `{t}`"));
                        }
                    }
                },
                StepKind::Action if s.action_type.as_deref().is_none_or(|a| a.trim().is_empty()) => {
                    self.push("dangling_action_reference", at, "an action step names its action type");
                }
                StepKind::Approval => self.approval(s),
                _ => {}
            }
            if let Some(vars) = &ctx.context_variables {
                for name in brace_refs(&s.instruction, &["context.", "ctx."]) {
                    if !vars.iter().any(|v| v.name == name) {
                        self.push(
                            "unknown_context_variable",
                            step_at(&s.stable_step_id),
                            format!("no context variable `{name}`"),
                        );
                    }
                }
            }
            let has_exit = ix.exits(&s.stable_step_id).iter().any(|e| ix.is_node(&e.to_ref));
            if s.kind == StepKind::Action && !has_exit {
                self.push(
                    "missing_action_follow_up",
                    step_at(&s.stable_step_id),
                    "an action step needs a branch onward",
                );
            }
        }
    }

    fn approval(&mut self, s: &Step) {
        let Some(key) = s.capture_key.as_deref() else { return };
        let at = step_at(&s.stable_step_id);
        let decision_ref = format!("{key}.id");
        let exits = self.ix.exits(&s.stable_step_id);
        if exits.iter().any(|e| e.guard_kind == GuardKind::Llm) {
            self.push("approval_step_llm_edge", &at, "an approval branches on its decision only");
        }
        let decisions: Vec<&&Transition> = exits
            .iter()
            .filter(|e| {
                e.guard_kind == GuardKind::Field
                    && e.field_op == Some(FieldOp::Equals)
                    && e.field_ref.as_deref() == Some(&decision_ref)
            })
            .collect();
        if decisions.is_empty() {
            self.push("approval_step_no_decision_edge", &at, format!("an approval step branches on `{decision_ref}`"));
        }
        for e in &decisions {
            let value = e.field_value.as_ref().and_then(Value::as_str);
            if !value.is_some_and(|v| s.options.iter().any(|o| o.id == v)) {
                self.push(
                    "approval_step_unknown_option",
                    edge_at(e),
                    format!("`{}` is not an option", value.unwrap_or("?")),
                );
            }
        }
        for o in &s.options {
            if !decisions.iter().any(|e| e.field_value.as_ref().and_then(Value::as_str) == Some(o.id.as_str())) {
                self.push("approval_step_unreachable_option", &at, format!("option `{}` has no branch", o.id));
            }
        }
    }

    fn bindings(&mut self) {
        let (d, ctx, ix) = (self.def, self.ctx, self.ix);
        let mut targets: HashMap<&str, usize> = HashMap::new();
        for o in d.steps.iter().flat_map(|s| &s.metadata.output_assignments) {
            *targets.entry(o.variable.as_str()).or_default() += 1;
        }
        let variables = variables(d);
        let mut guaranteed: Option<Guaranteed> = None;
        for s in sorted(d) {
            let at = step_at(&s.stable_step_id);
            let skill = s.tool_ref.as_deref().and_then(|t| ctx.skills.as_ref()?.iter().find(|k| k.name == t));
            for o in &s.metadata.output_assignments {
                // a tool may fill an optional slot (that is how its output reaches the visitor's
                // words); a required slot is the visitor's to give, so a tool writing it collides
                if ix.slot(&o.variable).is_some_and(|slot| slot.required) {
                    self.push("variable_name_collision", &at, format!("a tool writes required slot `{}`", o.variable));
                }
                if targets.get(o.variable.as_str()).is_some_and(|n| *n > 1) {
                    self.push("variable_name_collision", &at, format!("`{}` is assigned by two outputs", o.variable));
                }
                if let Some(outputs) = skill.and_then(|k| k.outputs.as_ref())
                    && !outputs.contains(&o.output)
                {
                    self.push("unknown_output_assignment", &at, format!("the skill returns no output `{}`", o.output));
                }
            }
            for b in &s.metadata.input_bindings {
                let (name, input) = match b {
                    InputBinding::Literal { name, .. }
                    | InputBinding::VariableRef { name, .. }
                    | InputBinding::ContextVariableRef { name, .. } => {
                        (name, skill.and_then(|k| k.inputs.iter().find(|i| i.name == *name)))
                    }
                };
                if skill.is_some_and(|k| !k.open_inputs) && input.is_none() {
                    self.push("unknown_input_binding", &at, format!("the skill has no input `{name}`"));
                }
                let mismatch = match b {
                    InputBinding::Literal { value, .. } => input.is_some_and(|i| !literal_fits(value, &i.input_type)),
                    InputBinding::VariableRef { variable, .. } => {
                        if !variables.contains(variable.as_str()) {
                            self.push(
                                "unknown_variable_ref",
                                &at,
                                format!("input `{name}`: `{variable}` is no slot or output"),
                            );
                        }
                        match (ix.slot(variable), input) {
                            (Some(slot), Some(i)) => !slot_fits(slot.slot_type, &i.input_type),
                            _ => false,
                        }
                    }
                    InputBinding::ContextVariableRef { context_variable, .. } => {
                        match ctx.context_variables.as_ref().map(|all| all.iter().find(|v| v.name == *context_variable))
                        {
                            Some(None) => {
                                self.push("unknown_context_variable", &at, format!("input `{name}` reads context variable `{context_variable}`, which the agent does not have"));
                                false
                            }
                            Some(Some(v)) => input.is_some_and(|i| {
                                !v.json && matches!(i.input_type, InputType::Number | InputType::Boolean)
                            }),
                            None => false,
                        }
                    }
                };
                if mismatch {
                    self.push("input_type_mismatch", &at, format!("input `{name}` gets a value of the wrong type"));
                }
            }
            let Some(skill) = skill else { continue };
            for i in skill.inputs.iter().filter(|i| i.required) {
                let bound = s.metadata.input_bindings.iter().find(|b| binding_name(b) == i.name);
                let why = match bound {
                    None => Some("is not bound".to_string()),
                    Some(InputBinding::ContextVariableRef { context_variable, .. }) => {
                        Some(format!("is bound to context variable `{context_variable}`, which may be unset"))
                    }
                    Some(InputBinding::VariableRef { variable, .. }) if variables.contains(variable.as_str()) => {
                        let g = guaranteed.get_or_insert_with(|| guaranteed_on_entry(d));
                        (!g.has(&s.stable_step_id, variable))
                            .then(|| format!("reads `{variable}`, which is not always filled before this step"))
                    }
                    _ => None,
                };
                if let Some(why) = why {
                    self.push("unsatisfiable_required_input", &at, format!("required input `{}` {why}", i.name));
                }
            }
        }
    }

    fn transitions(&mut self) {
        let (d, ix) = (self.def, self.ix);
        let order: HashMap<&str, i64> = d.steps.iter().map(|s| (s.stable_step_id.as_str(), s.ordinal)).collect();
        let variables = variables(d);
        for e in &d.transitions {
            let at = edge_at(e);
            let from = ix.step(&e.from_step);
            if from.is_none() {
                self.push("dangling_step_reference", &at, format!("`{}` is not a step", e.from_step));
            }
            if !ix.is_node(&e.to_ref) {
                self.push("dangling_step_reference", &at, format!("`{}` is not a step or terminal", e.to_ref));
            }
            if let (Some(f), Some(t)) = (order.get(e.from_step.as_str()), order.get(e.to_ref.as_str()))
                && t <= f
                && e.guard_kind != GuardKind::Counter
            {
                self.push("unbounded_back_edge", &at, "a branch back to an earlier (or the same) step needs `(max N)`");
            }
            let missing = |what: &str| format!("a {} guard needs {what}", e.guard_kind);
            match e.guard_kind {
                GuardKind::Outcome => {
                    if from.is_some_and(|s| s.kind != StepKind::Tool) {
                        self.push("outcome_guard_on_non_tool_step", &at, "an outcome guard leaves a tool step");
                    }
                    if e.outcome_status.as_deref().or(e.guard_text.as_deref()).is_none_or(|s| s.trim().is_empty()) {
                        self.push("structured_guard_missing_parameter", at, missing("a status"));
                    }
                }
                GuardKind::Counter => {
                    if e.counter_limit.is_none_or(|n| n <= 0) {
                        self.push("structured_guard_missing_parameter", at, missing("a positive limit"));
                    } else if !ix.terminal_path(e) {
                        self.push(
                            "attempt_limit_without_fallback",
                            at,
                            "a bounded loop needs a default branch to a terminal",
                        );
                    }
                }
                GuardKind::SlotFilled if slot_refs(e.guard_text.as_deref().unwrap_or("")).is_empty() => {
                    self.push("structured_guard_missing_parameter", at, missing("a slot"));
                }
                GuardKind::Field => self.field(e, from, &variables),
                _ => {}
            }
        }
    }

    fn field(&mut self, e: &Transition, from: Option<&Step>, variables: &HashSet<&str>) {
        let ctx = self.ctx;
        let at = edge_at(e);
        let (Some(r), Some(op)) = (e.field_ref.as_deref().filter(|r| !r.is_empty()), e.field_op) else {
            self.push("structured_guard_missing_parameter", at, "a field guard needs a field and an operator");
            return;
        };
        let missing = match op {
            FieldOp::IsTrue | FieldOp::IsFalse | FieldOp::IsPresent | FieldOp::IsAbsent => None,
            FieldOp::In => e.field_values.as_ref().is_none_or(Vec::is_empty).then_some("a list of values"),
            FieldOp::OlderThan | FieldOp::Within if e.field_unit.is_none() => Some("a unit"),
            _ => e.field_value.as_ref().is_none_or(Value::is_null).then_some("a value"),
        };
        if let Some(what) = missing {
            self.push("structured_guard_missing_parameter", &at, format!("`{op}` needs {what}"));
        }
        let decision = from
            .and_then(|s| s.capture_key.as_deref().filter(|_| s.kind == StepKind::Approval))
            .is_some_and(|k| r == format!("{k}.id"));
        let head = r.split('.').next().unwrap_or(r);
        let tool_output = from.is_some_and(|s| {
            s.kind == StepKind::Tool
                && (s.metadata.output_assignments.iter().any(|o| o.output == head)
                    || s.tool_ref
                        .as_deref()
                        .and_then(|t| ctx.skills.as_ref()?.iter().find(|k| k.name == t))
                        .and_then(|k| k.outputs.as_ref())
                        .is_some_and(|o| o.iter().any(|o| o == head)))
        });
        if let Some(slot) = self.ix.slot(r) {
            let fits = match op {
                FieldOp::OlderThan | FieldOp::Within => slot.slot_type == SlotType::Date,
                FieldOp::Gt | FieldOp::Gte | FieldOp::Lt | FieldOp::Lte => slot.slot_type == SlotType::Number,
                FieldOp::IsTrue | FieldOp::IsFalse => slot.slot_type == SlotType::Boolean,
                _ => true,
            };
            if !fits {
                self.push(
                    "field_guard_incompatible_type",
                    at,
                    format!("`{op}` does not apply to {} slot `{r}`", slot.slot_type),
                );
            }
        } else if !variables.contains(r) && !decision && !tool_output {
            self.push("field_guard_unknown_reference", at, format!("`{r}` is no slot, output or decision"));
        }
    }

    fn slot_use(&mut self) {
        let d = self.def;
        let mut referenced: Vec<&str> = Vec::new();
        for text in d
            .steps
            .iter()
            .map(|s| s.instruction.as_str())
            .chain(d.transitions.iter().filter_map(|e| e.guard_text.as_deref()))
            .chain(d.terminals.iter().filter_map(|t| t.instruction.as_deref()))
        {
            referenced.extend(slot_refs(text));
        }
        let mut reported = HashSet::new();
        for key in &referenced {
            if self.ix.slot(key).is_none() && reported.insert(*key) {
                self.push(
                    "referenced_undeclared_slot",
                    format!("slot:{key}"),
                    format!("`{{{{slot.{key}}}}}` names no slot"),
                );
            }
        }
        let mut read: HashSet<&str> = referenced.into_iter().collect();
        read.extend(
            d.transitions.iter().filter(|e| e.guard_kind == GuardKind::Field).filter_map(|e| e.field_ref.as_deref()),
        );
        for b in d.steps.iter().flat_map(|s| &s.metadata.input_bindings) {
            if let InputBinding::VariableRef { variable, .. } = b {
                read.insert(variable);
            }
        }
        for s in &d.slots {
            if !read.contains(s.key.as_str()) {
                self.push("declared_unused_slot", format!("slot:{}", s.key), "nothing asks for or reads this slot");
            }
        }
    }

    fn reachability(&mut self) {
        let d = self.def;
        let steps = sorted(d);
        let Some(root) = steps.first() else { return };
        let mut seen: HashSet<&str> = HashSet::new();
        let mut queue = VecDeque::from([root.stable_step_id.as_str()]);
        while let Some(id) = queue.pop_front() {
            if !seen.insert(id) {
                continue;
            }
            queue.extend(self.ix.exits(id).iter().map(|e| e.to_ref.as_str()));
        }
        for s in &steps {
            if !seen.contains(s.stable_step_id.as_str()) {
                self.push("unreachable_step", step_at(&s.stable_step_id), "no path from the first step leads here");
            }
        }
        if !d.terminals.is_empty() && !d.terminals.iter().any(|t| seen.contains(t.stable_step_id.as_str())) {
            self.push("missing_terminal", "routine", "no terminal can be reached from the first step");
        }
    }
}

fn binding_name(b: &InputBinding) -> &str {
    match b {
        InputBinding::Literal { name, .. }
        | InputBinding::VariableRef { name, .. }
        | InputBinding::ContextVariableRef { name, .. } => name,
    }
}

fn literal_fits(v: &Value, t: &InputType) -> bool {
    match t {
        InputType::Number => v.is_number(),
        InputType::Boolean => v.is_boolean(),
        InputType::Enum(values) => v.as_str().is_some_and(|s| values.is_empty() || values.iter().any(|x| x == s)),
        InputType::Text | InputType::Email | InputType::Date => v.is_string(),
    }
}

fn slot_fits(slot: SlotType, t: &InputType) -> bool {
    match t {
        InputType::Number => slot == SlotType::Number,
        InputType::Boolean => slot == SlotType::Boolean,
        _ => matches!(slot, SlotType::Text | SlotType::Email | SlotType::Date),
    }
}

/// For each step, the variables certainly filled when it is entered: nothing at the first step;
/// elsewhere what every step leading to it had on entry or filled itself (a chat step fills the
/// slots its instruction asks for, a tool step its output targets). A fixpoint over bitsets.
struct Guaranteed<'a> {
    vars: HashMap<&'a str, usize>,
    steps: HashMap<&'a str, usize>,
    entry: Vec<Vec<u64>>,
}

impl Guaranteed<'_> {
    fn has(&self, step: &str, var: &str) -> bool {
        match (self.steps.get(step), self.vars.get(var)) {
            (Some(&s), Some(&v)) => self.entry[s][v / 64] & (1 << (v % 64)) != 0,
            _ => false,
        }
    }
}

fn guaranteed_on_entry(d: &Definition) -> Guaranteed<'_> {
    let steps = sorted(d);
    let mut vars: HashMap<&str, usize> = HashMap::new();
    let names = d.slots.iter().map(|s| s.key.as_str());
    for k in names.chain(steps.iter().flat_map(|s| &s.metadata.output_assignments).map(|o| o.variable.as_str())) {
        let n = vars.len();
        vars.entry(k).or_insert(n);
    }
    let words = vars.len().div_ceil(64).max(1);
    let set = |keys: &mut dyn Iterator<Item = &str>| {
        let mut b = vec![0u64; words];
        for i in keys.filter_map(|k| vars.get(k)) {
            b[i / 64] |= 1 << (i % 64);
        }
        b
    };
    let full = set(&mut vars.keys().copied());
    let produced: Vec<Vec<u64>> = steps
        .iter()
        .map(|s| match s.kind {
            StepKind::Chat => set(&mut slot_refs(&s.instruction).into_iter()),
            StepKind::Tool => set(&mut s.metadata.output_assignments.iter().map(|o| o.variable.as_str())),
            _ => vec![0; words],
        })
        .collect();
    let pos: HashMap<&str, usize> = steps.iter().enumerate().map(|(i, s)| (s.stable_step_id.as_str(), i)).collect();
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); steps.len()];
    for e in &d.transitions {
        if let (Some(&f), Some(&t)) = (pos.get(e.from_step.as_str()), pos.get(e.to_ref.as_str())) {
            preds[t].push(f);
        }
    }
    let mut entry: Vec<Vec<u64>> =
        (0..steps.len()).map(|i| if i == 0 { vec![0; words] } else { full.clone() }).collect();
    let mut changed = true;
    while changed {
        changed = false;
        for t in 1..steps.len() {
            let mut next = full.clone();
            for &p in &preds[t] {
                for w in 0..words {
                    next[w] &= entry[p][w] | produced[p][w];
                }
            }
            if next != entry[t] {
                entry[t] = next;
                changed = true;
            }
        }
    }
    Guaranteed { vars, steps: pos, entry }
}
