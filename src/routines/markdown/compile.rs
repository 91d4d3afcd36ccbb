//! A parsed document into a structured [`Definition`] (reference §4–§9, §11): steps from lines
//! and headings, default chaining, branch lines attached to the step before them, gates,
//! terminals and the slots the body uses. [`compile_onto`] is the update (PUT) variant that
//! keeps what the document leaves out.

use std::collections::HashSet;

use super::scan::{is_slot_key, slot_refs};
use super::{Binding, Document, Gate, Segment, SkillCall, Target, Test};
use crate::routines::definition::{
    Activation, CompletionExport, Definition, FieldOp, GateOption, GuardKind, InputBinding, OutputAssignment, Slot,
    Step, StepKind, StepMetadata, Terminal, TerminalKind, Transition,
};

/// What a handoff terminal says when the document gives no message.
pub const DEFAULT_HANDOFF_MESSAGE: &str = "Bringing in a teammate.";
/// The name of a routine whose document has none.
pub const UNTITLED_NAME: &str = "Untitled routine";
/// The trigger of a routine whose document has none.
pub const UNTITLED_TRIGGER: &str = "When this routine applies.";

/// A terminal's id and message.
type End = (String, Option<String>);

/// The definition `doc` describes (a create: fresh terminals, no export unless written).
pub fn compile(doc: &Document) -> Definition {
    let complete = doc.end.as_ref().map_or(("done".to_string(), None), |t| (t.id.clone(), t.message.clone()));
    build(doc, complete, written_handoff(doc).unwrap_or_else(default_handoff))
}

/// The definition `doc` describes as an update of `existing`: without `end` the routine keeps
/// its primary completion terminal (id and message), without `handoff` its handoff terminal,
/// without `export` its completion export; it always keeps the activation gate, `enabled`,
/// `exposure`, terminal operator notices (by id) and slot ids and descriptions (by key), which
/// markdown cannot say.
pub fn compile_onto(existing: &Definition, doc: &Document) -> Definition {
    let complete = match &doc.end {
        Some(t) => (t.id.clone(), t.message.clone()),
        None => primary_complete(existing)
            .map_or(("done".to_string(), None), |t| (t.stable_step_id.clone(), t.instruction.clone())),
    };
    let handoff = written_handoff(doc).unwrap_or_else(|| {
        existing
            .terminals
            .iter()
            .find(|t| t.kind == TerminalKind::Handoff)
            .map_or_else(default_handoff, |t| (t.stable_step_id.clone(), t.instruction.clone()))
    });
    let mut def = build(doc, complete, handoff);
    if doc.export.is_none() {
        def.completion_export = existing.completion_export.clone();
    }
    def.activation.gate_ref = existing.activation.gate_ref.clone();
    def.enabled = existing.enabled;
    def.exposure = existing.exposure.clone();
    for t in &mut def.terminals {
        if let Some(old) = existing.terminals.iter().find(|o| o.stable_step_id == t.stable_step_id && o.kind == t.kind)
        {
            t.operator_notice = old.operator_notice.clone();
        }
    }
    for s in &mut def.slots {
        if let Some(old) = existing.slot(&s.key) {
            s.stable_slot_id = old.stable_slot_id.clone();
            s.description = old.description.clone();
        }
    }
    def
}

fn written_handoff(doc: &Document) -> Option<End> {
    doc.handoff
        .as_ref()
        .map(|t| (t.id.clone(), Some(t.message.clone().unwrap_or_else(|| DEFAULT_HANDOFF_MESSAGE.into()))))
}

fn default_handoff() -> End {
    ("handoff".into(), Some(DEFAULT_HANDOFF_MESSAGE.into()))
}

/// The primary completion terminal: the one a default transition reaches, else the first
/// completion terminal.
pub fn primary_complete(def: &Definition) -> Option<&Terminal> {
    let mut completes: Vec<&Terminal> = def.terminals.iter().filter(|t| t.kind == TerminalKind::Complete).collect();
    completes.sort_by_key(|t| t.ordinal);
    let defaults: HashSet<&str> =
        def.transitions.iter().filter(|e| e.guard_kind == GuardKind::Default).map(|e| e.to_ref.as_str()).collect();
    completes.iter().find(|t| defaults.contains(t.stable_step_id.as_str())).or(completes.first()).copied()
}

/// The heading slug: lowercase, runs outside `[a-z0-9_]` become `_`, `_` runs collapse, no
/// leading or trailing `_`, `value` when nothing is left, `_` before a leading digit.
pub fn slug(title: &str) -> String {
    let mut out = String::new();
    for c in title.trim().to_lowercase().chars() {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() { c } else { '_' };
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    let s = out.trim_matches('_');
    match s.chars().next() {
        None => "value".into(),
        Some(c) if c.is_ascii_digit() => format!("_{s}"),
        Some(_) => s.to_string(),
    }
}

/// A line's prose: its text with `@x` as `{{slot.x}}` and other tokens removed.
pub fn prose(segments: &[Segment]) -> String {
    let mut s = String::new();
    for seg in segments {
        match seg {
            Segment::Text(t) => s.push_str(t),
            Segment::Var(n) => {
                s.push_str("{{slot.");
                s.push_str(n);
                s.push_str("}}");
            }
            _ => {}
        }
    }
    s
}

struct Builder {
    complete: End,
    handoff: End,
    steps: Vec<Step>,
    edges: Vec<Transition>,
    /// The step branch lines attach to.
    last: Option<usize>,
    /// The last step is an approval block gate: it routes itself; branch lines after it are dropped.
    routes: bool,
    /// The last step is a decision gate: branch lines attach, no default edge leaves it.
    decision: bool,
    /// A titled step still taking body lines, and those lines.
    titled: Option<(usize, Vec<String>)>,
    need_handoff: bool,
    named: Vec<End>,
    decision_keys: HashSet<String>,
}

fn build(doc: &Document, complete: End, handoff: End) -> Definition {
    let decision_keys = doc
        .lines
        .iter()
        .flat_map(|l| &l.segments)
        .filter_map(|s| match s {
            Segment::Gate(g) if !g.approval => Some(g.key.clone()),
            _ => None,
        })
        .collect();
    let mut b = Builder {
        complete,
        handoff,
        steps: Vec::new(),
        edges: Vec::new(),
        last: None,
        routes: false,
        decision: false,
        titled: None,
        need_handoff: false,
        named: Vec::new(),
        decision_keys,
    };
    for line in &doc.lines {
        let text = prose(&line.segments);
        b.line(line.heading, &line.segments, text.trim());
    }
    b.flush_titled();
    if let Some(last) = b.last
        && !b.routes
        && !b.decision
    {
        let to = b.complete.0.clone();
        b.edge(last, to, GuardKind::Default);
    }
    let mut terminals = vec![terminal(&b.complete, TerminalKind::Complete, 0)];
    if b.need_handoff {
        terminals.push(terminal(&b.handoff, TerminalKind::Handoff, 1));
    }
    for end in &b.named {
        let ordinal = terminals.len() as i64;
        terminals.push(terminal(end, TerminalKind::Complete, ordinal));
    }
    let used = read_variables(&b.steps, &b.edges, &terminals);
    let slots = doc
        .variables()
        .into_iter()
        .filter(|v| used.contains(&v.key) && is_slot_key(&v.key))
        .enumerate()
        .map(|(i, v)| Slot {
            stable_slot_id: v.key.clone(),
            description: Some(v.key.clone()),
            key: v.key,
            slot_type: v.slot_type,
            required: !v.optional,
            ordinal: i as i64,
            mutable: v.mutable,
        })
        .collect();
    Definition {
        name: if doc.name.is_empty() { UNTITLED_NAME.into() } else { doc.name.clone() },
        enabled: true,
        activation: Activation {
            trigger_description: if doc.trigger.is_empty() { UNTITLED_TRIGGER.into() } else { doc.trigger.clone() },
            gate_ref: None,
            priority: doc.priority,
            reentry_mode: doc.reentry,
        },
        slots,
        steps: b.steps,
        transitions: b.edges,
        terminals,
        completion_export: doc.export.as_ref().map(|e| CompletionExport {
            enabled: true,
            trigger_kinds: e.kinds.clone(),
            destination_ref: e.destination.clone(),
        }),
        exposure: None,
    }
}

/// The variables a compiled routine reads: `{{slot.x}}` in instructions, guard texts and
/// terminal messages, field guards and input bindings. Only these become slots, so a token the
/// compiler dropped (a guard on a line that is not a branch) declares nothing.
fn read_variables(steps: &[Step], edges: &[Transition], terminals: &[Terminal]) -> HashSet<String> {
    let texts = steps
        .iter()
        .map(|s| s.instruction.as_str())
        .chain(edges.iter().filter_map(|e| e.guard_text.as_deref()))
        .chain(terminals.iter().filter_map(|t| t.instruction.as_deref()));
    let mut used: HashSet<String> = texts.flat_map(slot_refs).map(str::to_string).collect();
    used.extend(edges.iter().filter(|e| e.guard_kind == GuardKind::Field).filter_map(|e| e.field_ref.clone()));
    for b in steps.iter().flat_map(|s| &s.metadata.input_bindings) {
        if let InputBinding::VariableRef { variable, .. } = b {
            used.insert(variable.clone());
        }
    }
    used
}

fn terminal(end: &End, kind: TerminalKind, ordinal: i64) -> Terminal {
    Terminal { stable_step_id: end.0.clone(), kind, instruction: end.1.clone(), ordinal, operator_notice: None }
}

fn chat(id: String, instruction: String) -> Step {
    Step {
        stable_step_id: id,
        kind: StepKind::Chat,
        instruction,
        tool_ref: None,
        action_type: None,
        capture_key: None,
        options: Vec::new(),
        ordinal: 0,
        metadata: StepMetadata::default(),
    }
}

/// Makes `step` call `skill` (its bindings as the step's metadata).
fn make_tool(step: &mut Step, skill: &SkillCall) {
    step.kind = StepKind::Tool;
    step.tool_ref = Some(skill.name.clone());
    step.action_type = None;
    let m = &mut step.metadata;
    m.input_bindings = skill
        .inputs
        .iter()
        .map(|(name, b)| match b {
            Binding::Slot(v) => InputBinding::VariableRef { name: name.clone(), variable: v.clone() },
            Binding::Context(v) => InputBinding::ContextVariableRef { name: name.clone(), context_variable: v.clone() },
            Binding::Literal(v) => InputBinding::Literal { name: name.clone(), value: v.clone() },
        })
        .collect();
    m.output_assignments =
        skill.outputs.iter().map(|(o, v)| OutputAssignment { output: o.clone(), variable: v.clone() }).collect();
    m.mode = Some(if skill.untyped { "untyped" } else { "typed" }.into());
}

fn make_action(step: &mut Step, action: &str) {
    step.kind = StepKind::Action;
    step.action_type = Some(action.to_string());
    step.tool_ref = None;
    let label = step.metadata.outline_label.take();
    step.metadata = StepMetadata { outline_label: label, ..StepMetadata::default() };
}

impl Builder {
    fn line(&mut self, heading: bool, segs: &[Segment], text: &str) {
        let chips = segs.iter().any(|s| !matches!(s, Segment::Text(_) | Segment::Var(_)));
        if text.is_empty() && !chips {
            return;
        }
        let gate_of = |approval: bool| {
            segs.iter().find_map(|s| match s {
                Segment::Gate(g) if g.approval == approval => Some(g),
                _ => None,
            })
        };
        if let Some(g) = gate_of(true).or_else(|| gate_of(false)) {
            return self.gate(g, text);
        }
        if segs.iter().any(Segment::is_target) {
            return self.branch(segs, text);
        }
        if heading && !text.is_empty() {
            self.flush_titled();
            let mut step = chat(slug(text), text.to_string());
            step.metadata.outline_label = Some(text.to_string());
            let idx = self.push(step);
            self.titled = Some((idx, Vec::new()));
            return;
        }
        let skill = segs.iter().find_map(|s| match s {
            Segment::Skill(s) => Some(s),
            _ => None,
        });
        let action = segs.iter().find_map(|s| match s {
            Segment::Action(a) => Some(a.as_str()),
            _ => None,
        });
        if text.is_empty() && skill.is_none() && action.is_none() {
            return;
        }
        if let Some((idx, body)) = &mut self.titled {
            if !text.is_empty() {
                body.push(text.to_string());
            }
            let step = &mut self.steps[*idx];
            if let Some(s) = skill {
                make_tool(step, s);
            } else if let Some(a) = action {
                make_action(step, a);
            }
            return;
        }
        let fallback = action.or(skill.map(|s| s.name.as_str())).unwrap_or_default();
        let instruction = if text.is_empty() { fallback } else { text };
        let mut step = chat(format!("step_{}", self.steps.len() + 1), instruction.to_string());
        if let Some(a) = action {
            make_action(&mut step, a);
        } else if let Some(s) = skill {
            make_tool(&mut step, s);
        }
        self.push(step);
    }

    /// Adds a step (with the default edge into it) and makes it the last one.
    fn push(&mut self, mut step: Step) -> usize {
        let idx = self.steps.len();
        step.ordinal = idx as i64;
        let id = step.stable_step_id.clone();
        self.steps.push(step);
        if let Some(last) = self.last
            && !self.routes
            && !self.decision
        {
            self.edge(last, id, GuardKind::Default);
        }
        self.last = Some(idx);
        self.routes = false;
        self.decision = false;
        idx
    }

    fn flush_titled(&mut self) {
        if let Some((idx, body)) = self.titled.take()
            && !body.is_empty()
        {
            self.steps[idx].instruction = body.join("\n");
        }
    }

    fn gate(&mut self, g: &Gate, text: &str) {
        let options = g
            .options
            .iter()
            .map(|o| GateOption { id: o.id.clone(), label: o.label.clone(), description: o.description.clone() })
            .collect();
        let idx = match self.titled.as_ref().map(|(idx, _)| *idx) {
            Some(idx) => {
                // A heading just before the gate names it (keeping its id and incoming edge).
                self.flush_titled();
                idx
            }
            None => self.push(chat(format!("step_{}", self.steps.len() + 1), g.key.clone())),
        };
        let step = &mut self.steps[idx];
        step.kind = StepKind::Approval;
        if !text.is_empty() {
            step.instruction = text.to_string();
        }
        step.tool_ref = None;
        step.action_type = None;
        step.capture_key = Some(g.key.clone());
        step.options = options;
        let label = step.metadata.outline_label.take();
        step.metadata = StepMetadata { outline_label: label, decision: !g.approval, ..StepMetadata::default() };
        if g.approval {
            for o in &g.options {
                let to = match &o.target {
                    Some(Target::End) => self.complete.0.clone(),
                    Some(Target::Handoff) => {
                        self.need_handoff = true;
                        self.handoff.0.clone()
                    }
                    Some(Target::Step(id)) => id.clone(),
                    None => continue,
                };
                let e = self.edge(idx, to, GuardKind::Field);
                e.field_ref = Some(format!("{}.id", g.key));
                e.field_op = Some(FieldOp::Equals);
                e.field_value = Some(serde_json::Value::String(o.id.clone()));
            }
        }
        self.last = Some(idx);
        self.routes = g.approval;
        self.decision = !g.approval;
    }

    /// A branch line: an edge from the last step (dropped before any step and after an
    /// approval block gate).
    fn branch(&mut self, segs: &[Segment], text: &str) {
        let Some(from) = self.last.filter(|_| !self.routes) else { return };
        let step_target = segs.iter().find_map(|s| match s {
            Segment::Step { id, max } => Some((id, *max)),
            _ => None,
        });
        let to = if let Some((id, _)) = step_target {
            id.clone()
        } else if segs.contains(&Segment::Handoff) {
            self.need_handoff = true;
            self.handoff.0.clone()
        } else {
            match segs.iter().find(|s| matches!(s, Segment::End { .. })) {
                Some(Segment::End { id: Some(id), message }) if *id != self.complete.0 && id != "done" => {
                    match self.named.iter_mut().find(|(n, _)| n == id) {
                        Some((_, m)) if m.is_none() => m.clone_from(message),
                        Some(_) => {}
                        None => self.named.push((id.clone(), message.clone())),
                    }
                    id.clone()
                }
                _ => self.complete.0.clone(),
            }
        };
        let guard = segs.iter().find(|s| matches!(s, Segment::If(_) | Segment::Outcome(_) | Segment::Filled(_)));
        let decision_ref = |field: &str| {
            if self.decision_keys.contains(field) { format!("{field}.id") } else { field.to_string() }
        };
        match guard {
            Some(Segment::Outcome(status)) => {
                self.edge(from, to, GuardKind::Outcome).outcome_status = Some(status.trim().to_string());
            }
            Some(Segment::Filled(keys)) => {
                let text: Vec<String> = keys.iter().map(|k| format!("{{{{slot.{k}}}}}")).collect();
                self.edge(from, to, GuardKind::SlotFilled).guard_text = Some(text.join(" "));
            }
            Some(Segment::If(c)) => match &c.test {
                None => self.edge(from, to, GuardKind::Llm).guard_text = Some(text.to_string()),
                Some(test) => {
                    let field_ref = decision_ref(&c.field);
                    let e = self.edge(from, to, GuardKind::Field);
                    e.field_ref = Some(field_ref);
                    match test {
                        Test::Is(op) => e.field_op = Some(*op),
                        Test::Compare(op, v) => {
                            e.field_op = Some(*op);
                            e.field_value = Some(v.clone());
                        }
                        Test::In(values) => {
                            e.field_op = Some(FieldOp::In);
                            e.field_values = Some(values.clone());
                        }
                        Test::Age(op, v, unit) => {
                            e.field_op = Some(*op);
                            e.field_value = Some(v.clone());
                            e.field_unit = Some(*unit);
                        }
                    }
                }
            },
            _ => match step_target {
                Some((_, Some(max))) => self.edge(from, to, GuardKind::Counter).counter_limit = Some(max),
                _ => self.edge(from, to, GuardKind::Llm).guard_text = Some(text.to_string()),
            },
        }
    }

    fn edge(&mut self, from: usize, to: String, guard_kind: GuardKind) -> &mut Transition {
        let ordinal = self.edges.len() as i64;
        let from_step = self.steps.get(from).map(|s| s.stable_step_id.clone()).unwrap_or_default();
        self.edges.push(Transition {
            from_step,
            to_ref: to,
            guard_kind,
            guard_text: None,
            outcome_status: None,
            counter_limit: None,
            field_ref: None,
            field_op: None,
            field_value: None,
            field_values: None,
            field_unit: None,
            ordinal,
        });
        let last = self.edges.len() - 1;
        &mut self.edges[last]
    }
}
