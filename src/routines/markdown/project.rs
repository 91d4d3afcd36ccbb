//! A structured definition back to canonical markdown (GET …/portable). The definition is laid
//! out as the compiler reads documents: steps in ordinal order, a heading where a step needs a
//! name (an outline label, an id that is not `step_<position>`, or any step after a titled one,
//! which would otherwise join its body), branch lines after each step, the default branch
//! implied. Then the text is read back onto the definition ([`compile_onto`], as a PUT of it
//! would) and must come out unchanged: whatever markdown v1 cannot express is found that way,
//! the common cases with a reason of their own first (activation gate, several handoff
//! terminals, a terminal nothing reaches, a step id no heading produces).

use std::collections::{HashMap, HashSet};
use std::fmt;

use serde_json::Value;

use super::compile::{DEFAULT_HANDOFF_MESSAGE, compile_onto, primary_complete, slug};
use super::scan::{clip, is_ident, split_slot_refs};
use super::{Binding, Choice, Condition, Diagnostic, Document, Export, Gate, Line, Segment, SkillCall, Target};
use super::{TerminalSpec, Test, VarDecl, parse, serialize};
use crate::routines::definition::{
    Definition, FieldOp, GuardKind, InputBinding, Slot, Step, StepKind, Terminal, TerminalKind, Transition,
};

/// `routine_not_portable`: what markdown v1 cannot express, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotPortable {
    pub reason: String,
}

impl NotPortable {
    pub const CODE: &'static str = "routine_not_portable";

    /// As a diagnostic (line 1), the shape the portable routes answer with.
    pub fn diagnostic(&self) -> Diagnostic {
        Diagnostic::new(1, Self::CODE, self.to_string())
    }
}

impl fmt::Display for NotPortable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "portable markdown v1 cannot express {}", self.reason)
    }
}

fn np(reason: impl Into<String>) -> NotPortable {
    NotPortable { reason: reason.into() }
}

type R<T> = Result<T, NotPortable>;

/// `def` as canonical markdown, or why it cannot be.
pub fn project(def: &Definition) -> R<String> {
    let text = serialize(&render(def)?);
    let reread = parse(&text).map_err(|d| {
        let first = d.first().map_or(String::new(), |d| format!(" ({} at line {})", d.code, d.line));
        np(format!("this routine's text, which does not read back{first}"))
    })?;
    match difference(def, &compile_onto(def, &reread)) {
        Some(what) => Err(np(what)),
        None => Ok(text),
    }
}

struct Ctx<'a> {
    primary: &'a Terminal,
    handoff: Option<&'a Terminal>,
    terminals: HashMap<&'a str, &'a Terminal>,
    decision_keys: HashSet<&'a str>,
}

fn render(def: &Definition) -> R<Document> {
    if let Some(g) = &def.activation.gate_ref {
        return Err(np(format!("the activation gate `{}`", clip(g))));
    }
    let handoffs: Vec<&Terminal> = def.terminals.iter().filter(|t| t.kind == TerminalKind::Handoff).collect();
    if handoffs.len() > 1 {
        return Err(np("more than one handoff terminal"));
    }
    let handoff = handoffs.first().copied();
    let primary = primary_complete(def).ok_or_else(|| np("a routine without a completion terminal"))?;
    let targets: HashSet<&str> = def.transitions.iter().map(|e| e.to_ref.as_str()).collect();
    let branch_targets: HashSet<&str> =
        def.transitions.iter().filter(|e| e.guard_kind != GuardKind::Default).map(|e| e.to_ref.as_str()).collect();
    let reached = |id: &str, by_default: bool| if by_default { &targets } else { &branch_targets }.contains(id);
    if let Some(h) = handoff.filter(|h| !reached(&h.stable_step_id, true)) {
        return Err(np(format!("the handoff terminal `{}`, which no branch reaches", clip(&h.stable_step_id))));
    }
    for t in
        def.terminals.iter().filter(|t| t.kind == TerminalKind::Complete && t.stable_step_id != primary.stable_step_id)
    {
        if !reached(&t.stable_step_id, false) {
            return Err(np(format!("the terminal `{}`, which no branch reaches", clip(&t.stable_step_id))));
        }
    }
    let mut steps: Vec<&Step> = def.steps.iter().collect();
    steps.sort_by_key(|s| s.ordinal);
    let mut ids = HashSet::new();
    for id in steps.iter().map(|s| &s.stable_step_id).chain(def.terminals.iter().map(|t| &t.stable_step_id)) {
        if !ids.insert(id.as_str()) {
            return Err(np(format!("the id `{}`, which names two steps or terminals", clip(id))));
        }
    }
    let step_ids: HashSet<&str> = steps.iter().map(|s| s.stable_step_id.as_str()).collect();
    if let Some(e) = def.transitions.iter().find(|e| !step_ids.contains(e.from_step.as_str())) {
        return Err(np(format!("a branch from `{}`, which is not a step", clip(&e.from_step))));
    }
    let decision_keys = steps
        .iter()
        .filter(|s| s.kind == StepKind::Approval && s.metadata.decision)
        .filter_map(|s| s.capture_key.as_deref())
        .collect();
    let terminals = def.terminals.iter().map(|t| (t.stable_step_id.as_str(), t)).collect();
    let ctx = Ctx { primary, handoff, terminals, decision_keys };
    // Headings first, so a step id no heading produces is the reason given.
    let mut titles = Vec::new();
    let mut open = false;
    for (i, step) in steps.iter().enumerate() {
        let untitled =
            !open && step.metadata.outline_label.is_none() && step.stable_step_id == format!("step_{}", i + 1);
        let title = if untitled { None } else { Some(title_for(step)?) };
        open = title.is_some() && step.kind != StepKind::Approval;
        titles.push(title);
    }
    let by_from = exits_by_step(def);
    let mut lines = Vec::new();
    for (i, (step, title)) in steps.iter().zip(titles).enumerate() {
        let exits = by_from.get(step.stable_step_id.as_str()).map_or(&[][..], Vec::as_slice);
        let chain = steps.get(i + 1).map_or(primary.stable_step_id.as_str(), |s| s.stable_step_id.as_str());
        if step.kind == StepKind::Approval {
            ctx.gate(step, title.as_deref(), exits, &mut lines)?;
        } else {
            ctx.plain(step, title.as_deref(), &mut lines)?;
            ctx.branches(step, exits, Some(chain), &mut lines)?;
        }
    }
    let mut slots: Vec<&Slot> = def.slots.iter().collect();
    slots.sort_by_key(|s| s.ordinal);
    Ok(Document {
        name: def.name.clone(),
        trigger: def.activation.trigger_description.clone(),
        reentry: def.activation.reentry_mode,
        priority: def.activation.priority,
        export: def
            .completion_export
            .as_ref()
            .filter(|e| e.enabled)
            .map(|e| Export { kinds: e.trigger_kinds.clone(), destination: e.destination_ref.clone() }),
        end: (primary.stable_step_id != "done" || primary.instruction.is_some())
            .then(|| TerminalSpec { id: primary.stable_step_id.clone(), message: primary.instruction.clone() }),
        handoff: handoff
            .filter(|h| {
                h.stable_step_id != "handoff" || h.instruction.as_deref().is_some_and(|m| m != DEFAULT_HANDOFF_MESSAGE)
            })
            .map(|h| TerminalSpec {
                id: h.stable_step_id.clone(),
                message: h.instruction.clone().filter(|m| m != DEFAULT_HANDOFF_MESSAGE),
            }),
        vars: slots
            .iter()
            .map(|s| VarDecl { key: s.key.clone(), slot_type: s.slot_type, optional: !s.required, mutable: s.mutable })
            .collect(),
        lines,
    })
}

/// The heading of a step: its outline label (which must slug to its id), else one made from the id.
fn title_for(step: &Step) -> R<String> {
    let id = &step.stable_step_id;
    if let Some(label) = &step.metadata.outline_label {
        if slug(label) == *id {
            return Ok(label.clone());
        }
        return Err(np(format!("step `{}`, whose heading `{}` names another id", clip(id), clip(label))));
    }
    let words: Vec<String> = id
        .split('_')
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next().map_or(String::new(), |f| f.to_ascii_uppercase().to_string() + c.as_str())
        })
        .collect();
    let human = words.join(" ");
    if !human.is_empty() && slug(&human) == *id {
        Ok(human)
    } else if slug(id) == *id {
        Ok(id.clone())
    } else {
        Err(np(format!("the step id `{}`, which no heading produces", clip(id))))
    }
}

fn line(heading: bool, segments: Vec<Segment>) -> Line {
    Line { number: 0, heading, segments }
}

/// Text with `{{slot.x}}` as `@x`.
fn text_segments(text: &str) -> Vec<Segment> {
    let mut out = Vec::new();
    for (prose, slot) in split_slot_refs(text) {
        if !prose.is_empty() {
            out.push(Segment::Text(prose.to_string()));
        }
        if let Some(k) = slot {
            out.push(Segment::Var(k.to_string()));
        }
    }
    out
}

/// `prose` then `chip`, one space apart (the chip alone when there is no prose).
fn with_chip(mut prose: Vec<Segment>, chip: Segment) -> Vec<Segment> {
    if !prose.is_empty() {
        prose.push(Segment::Text(" ".into()));
    }
    prose.push(chip);
    prose
}

impl Ctx<'_> {
    /// A chat, tool or action step.
    fn plain(&self, step: &Step, title: Option<&str>, out: &mut Vec<Line>) -> R<()> {
        let id = clip(&step.stable_step_id);
        let m = &step.metadata;
        let tool_metadata = !m.input_bindings.is_empty() || !m.output_assignments.is_empty() || m.mode.is_some();
        if step.capture_key.is_some() || !step.options.is_empty() || m.decision {
            return Err(np(format!("the gate fields of step `{id}`, which is not an approval step")));
        }
        let (chip, name) = match step.kind {
            StepKind::Tool => {
                let name = step
                    .tool_ref
                    .as_deref()
                    .filter(|n| !n.is_empty())
                    .ok_or_else(|| np(format!("tool step `{id}` without a skill")))?;
                if step.action_type.is_some() {
                    return Err(np(format!("the action type of tool step `{id}`")));
                }
                (Some(Segment::Skill(skill_call(step, name)?)), Some(name))
            }
            StepKind::Action => {
                let action = step
                    .action_type
                    .as_deref()
                    .filter(|a| !a.is_empty())
                    .ok_or_else(|| np(format!("action step `{id}` without an action type")))?;
                if step.tool_ref.is_some() || tool_metadata {
                    return Err(np(format!("the skill fields of action step `{id}`")));
                }
                (Some(Segment::Action(action.to_string())), Some(action))
            }
            _ => {
                if step.tool_ref.is_some() || step.action_type.is_some() || tool_metadata {
                    return Err(np(format!("the skill or action fields of chat step `{id}`")));
                }
                (None, None)
            }
        };
        let instruction = step.instruction.as_str();
        match title {
            None => {
                let prose =
                    if chip.is_some() && name == Some(instruction) { Vec::new() } else { text_segments(instruction) };
                out.push(line(
                    false,
                    match chip {
                        Some(c) => with_chip(prose, c),
                        None => prose,
                    },
                ));
            }
            Some(t) => {
                out.push(line(true, text_segments(t)));
                let mut body: Vec<Vec<Segment>> =
                    if instruction == t { Vec::new() } else { instruction.split('\n').map(text_segments).collect() };
                if let Some(c) = chip {
                    match body.pop() {
                        Some(last) => body.push(with_chip(last, c)),
                        None => body.push(vec![c]),
                    }
                }
                out.extend(body.into_iter().map(|s| line(false, s)));
            }
        }
        Ok(())
    }

    fn gate(&self, step: &Step, title: Option<&str>, exits: &[&Transition], out: &mut Vec<Line>) -> R<()> {
        let id = clip(&step.stable_step_id);
        let key =
            step.capture_key.as_deref().ok_or_else(|| np(format!("approval step `{id}` without a capture key")))?;
        let m = &step.metadata;
        if step.tool_ref.is_some()
            || step.action_type.is_some()
            || !m.input_bindings.is_empty()
            || !m.output_assignments.is_empty()
            || m.mode.is_some()
        {
            return Err(np(format!("the skill or action fields of approval step `{id}`")));
        }
        let block = !m.decision;
        let mut options = Vec::new();
        for o in &step.options {
            let target = if block {
                let routes: Vec<&&Transition> = exits.iter().filter(|e| is_option_edge(e, key, &o.id)).collect();
                match routes.as_slice() {
                    [only] => Some(self.option_target(&only.to_ref)?),
                    _ => {
                        return Err(np(format!(
                            "option `{}` of approval step `{id}` without exactly one route",
                            clip(&o.id)
                        )));
                    }
                }
            } else {
                None
            };
            options.push(Choice {
                id: o.id.clone(),
                label: o.label.clone(),
                description: o.description.clone(),
                target,
            });
        }
        if block && exits.len() != options.len() {
            return Err(np(format!("branches of approval step `{id}` that are not its options")));
        }
        let token = Segment::Gate(Gate { approval: block, key: key.to_string(), options });
        let instruction = step.instruction.as_str();
        match title {
            None => {
                let prose = if instruction == key { Vec::new() } else { text_segments(instruction) };
                out.push(line(false, with_chip(prose, token)));
            }
            Some(t) => {
                out.push(line(true, text_segments(t)));
                if instruction == t {
                    out.push(line(false, vec![token]));
                } else if !instruction.contains('\n') {
                    out.push(line(false, with_chip(text_segments(instruction), token)));
                } else {
                    out.extend(instruction.split('\n').map(|l| line(false, text_segments(l))));
                    out.push(line(false, vec![token]));
                }
            }
        }
        if block { Ok(()) } else { self.branches(step, exits, None, out) }
    }

    fn option_target(&self, to: &str) -> R<Target> {
        if to == self.primary.stable_step_id {
            Ok(Target::End)
        } else if self.handoff.is_some_and(|h| h.stable_step_id == to) {
            Ok(Target::Handoff)
        } else if self.terminals.contains_key(to) || !is_ident(to) {
            Err(np(format!("an approval option routed to `{}`", clip(to))))
        } else {
            Ok(Target::Step(to.to_string()))
        }
    }

    /// The branch lines of a step; `chain` is where its default branch must go (`None`: it has none).
    fn branches(&self, step: &Step, exits: &[&Transition], chain: Option<&str>, out: &mut Vec<Line>) -> R<()> {
        let id = clip(&step.stable_step_id);
        let mut chained = false;
        for e in exits {
            if e.guard_kind == GuardKind::Default {
                if chain == Some(e.to_ref.as_str()) && !chained {
                    chained = true;
                    continue;
                }
                let then = chain.map_or("has none".to_string(), |c| format!("continues to `{}`", clip(c)));
                return Err(np(format!(
                    "the default branch from `{id}` to `{}` (in markdown this step {then})",
                    clip(&e.to_ref)
                )));
            }
            out.push(line(false, self.branch(e)?));
        }
        match chain {
            Some(c) if !chained => Err(np(format!("step `{id}` without its default branch to `{}`", clip(c)))),
            _ => Ok(()),
        }
    }

    fn branch(&self, e: &Transition) -> R<Vec<Segment>> {
        let at = || format!("the branch {} -> {}", clip(&e.from_step), clip(&e.to_ref));
        let mut target = if e.to_ref == self.primary.stable_step_id {
            Segment::End { id: None, message: None }
        } else if self.handoff.is_some_and(|h| h.stable_step_id == e.to_ref) {
            Segment::Handoff
        } else if let Some(t) = self.terminals.get(e.to_ref.as_str()) {
            Segment::End { id: Some(t.stable_step_id.clone()), message: t.instruction.clone() }
        } else if is_ident(&e.to_ref) {
            Segment::Step { id: e.to_ref.clone(), max: None }
        } else {
            return Err(np(at()));
        };
        let mut segs = match e.guard_kind {
            GuardKind::Llm => text_segments(e.guard_text.as_deref().unwrap_or("")),
            GuardKind::Field => vec![Segment::If(self.condition(e).ok_or_else(|| np(at()))?)],
            GuardKind::Outcome => {
                let status = e.outcome_status.as_deref().or(e.guard_text.as_deref()).filter(|s| !s.trim().is_empty());
                vec![Segment::Outcome(status.ok_or_else(|| np(at()))?.to_string())]
            }
            GuardKind::SlotFilled => {
                let keys: Vec<String> =
                    super::slot_refs(e.guard_text.as_deref().unwrap_or("")).into_iter().map(str::to_string).collect();
                if keys.is_empty() {
                    return Err(np(at()));
                }
                vec![Segment::Filled(keys)]
            }
            GuardKind::Counter => {
                let limit = e.counter_limit.filter(|n| *n >= 0).ok_or_else(|| np(at()))?;
                match &mut target {
                    Segment::Step { max, .. } => *max = Some(limit),
                    _ => return Err(np(format!("{}, a bounded loop to a terminal", at()))),
                }
                Vec::new()
            }
            GuardKind::Default => return Err(np(at())),
        };
        segs.push(target);
        Ok(segs)
    }

    fn condition(&self, e: &Transition) -> Option<Condition> {
        let r = e.field_ref.as_deref()?;
        let field = match r.strip_suffix(".id") {
            Some(k) if self.decision_keys.contains(k) => k,
            _ => r,
        };
        let op = e.field_op?;
        let test = match op {
            FieldOp::IsTrue | FieldOp::IsFalse | FieldOp::IsPresent | FieldOp::IsAbsent => Test::Is(op),
            FieldOp::In => Test::In(e.field_values.clone().filter(|v| !v.is_empty())?),
            FieldOp::OlderThan | FieldOp::Within => {
                Test::Age(op, e.field_value.clone().filter(Value::is_number)?, e.field_unit?)
            }
            _ => Test::Compare(op, e.field_value.clone()?),
        };
        Some(Condition { field: field.to_string(), test: Some(test) })
    }
}

fn is_option_edge(e: &Transition, key: &str, option: &str) -> bool {
    e.guard_kind == GuardKind::Field
        && e.field_op == Some(FieldOp::Equals)
        && e.field_ref.as_deref().and_then(|r| r.strip_suffix(".id")) == Some(key)
        && e.field_value.as_ref().and_then(Value::as_str) == Some(option)
}

fn skill_call(step: &Step, name: &str) -> R<SkillCall> {
    let m = &step.metadata;
    let untyped = match m.mode.as_deref() {
        None | Some("typed") => false,
        Some("untyped") => true,
        Some(other) => return Err(np(format!("the mode `{}` of step `{}`", clip(other), clip(&step.stable_step_id)))),
    };
    let inputs = m
        .input_bindings
        .iter()
        .map(|b| match b {
            InputBinding::VariableRef { name, variable } => (name.clone(), Binding::Slot(variable.clone())),
            InputBinding::ContextVariableRef { name, context_variable } => {
                (name.clone(), Binding::Context(context_variable.clone()))
            }
            InputBinding::Literal { name, value } => (name.clone(), Binding::Literal(value.clone())),
        })
        .collect();
    let outputs = m.output_assignments.iter().map(|o| (o.output.clone(), o.variable.clone())).collect();
    Ok(SkillCall { name: name.to_string(), inputs, outputs, untyped })
}

/// What differs between `a` and `b` where it matters, named for the reason; `None` when they are
/// the same routine. Orders that carry no meaning are ignored: ordinal values (only their order),
/// slot order, where a default branch sits among a step's exits, the order of an approval
/// block's option routes, terminal order; so are a missing outline label in `a` (the projection
/// made a heading up), a tool step's unset mode (typed), an LLM guard's unset text (empty) and a
/// handoff terminal's unset message (the default one, which the runtime says then).
fn difference(a: &Definition, b: &Definition) -> Option<String> {
    if a.name != b.name {
        return Some("the name".into());
    }
    if a.activation != b.activation {
        return Some("the activation (trigger, priority or reentry)".into());
    }
    if a.enabled != b.enabled || a.exposure != b.exposure {
        return Some("`enabled` or the exposure".into());
    }
    if a.completion_export != b.completion_export {
        return Some("the completion export".into());
    }
    if slots(a) != slots(b) {
        return Some("the slots (keys, types, flags)".into());
    }
    let (sa, sb) = (sorted_steps(a), sorted_steps(b));
    let (ea, eb) = (exits_by_step(a), exits_by_step(b));
    if sa.len() != sb.len() {
        return Some(format!("the steps ({} would become {})", sa.len(), sb.len()));
    }
    for (x, y) in sa.iter().zip(&sb) {
        let keep_label = x.metadata.outline_label.is_some();
        if step_norm(x, keep_label) != step_norm(y, keep_label) {
            return Some(format!("step `{}`", clip(&x.stable_step_id)));
        }
        let block = x.kind == StepKind::Approval && !x.metadata.decision;
        if exits(&ea, &x.stable_step_id, block) != exits(&eb, &y.stable_step_id, block) {
            return Some(format!("the branches of step `{}`", clip(&x.stable_step_id)));
        }
    }
    let terminals = |d: &Definition| {
        let mut t: Vec<Terminal> = d
            .terminals
            .iter()
            .map(|t| {
                // The runtime says the default message for a handoff without one.
                let default = (t.kind == TerminalKind::Handoff).then(|| DEFAULT_HANDOFF_MESSAGE.to_string());
                Terminal { ordinal: 0, instruction: t.instruction.clone().or(default), ..t.clone() }
            })
            .collect();
        t.sort_by(|x, y| x.stable_step_id.cmp(&y.stable_step_id));
        t
    };
    if terminals(a) != terminals(b) {
        return Some("the terminals (ids, kinds or messages)".into());
    }
    None
}

fn slots(d: &Definition) -> Vec<Slot> {
    let mut s: Vec<Slot> = d.slots.iter().map(|s| Slot { ordinal: 0, ..s.clone() }).collect();
    s.sort_by(|x, y| x.key.cmp(&y.key));
    s
}

fn sorted_steps(d: &Definition) -> Vec<&Step> {
    let mut s: Vec<&Step> = d.steps.iter().collect();
    s.sort_by_key(|s| s.ordinal);
    s
}

fn step_norm(s: &Step, keep_label: bool) -> Step {
    let mut n = Step { ordinal: 0, ..s.clone() };
    if !keep_label {
        n.metadata.outline_label = None;
    }
    if n.kind == StepKind::Tool && n.metadata.mode.is_none() {
        n.metadata.mode = Some("typed".into());
    }
    n
}

/// A step's exits: the guarded ones in order (an approval block's by option), then the defaults.
/// Each step's exits, in ordinal order.
fn exits_by_step(d: &Definition) -> HashMap<&str, Vec<&Transition>> {
    let mut by: HashMap<&str, Vec<&Transition>> = HashMap::new();
    for e in &d.transitions {
        by.entry(e.from_step.as_str()).or_default().push(e);
    }
    for exits in by.values_mut() {
        exits.sort_by_key(|e| e.ordinal);
    }
    by
}

fn exits(by: &HashMap<&str, Vec<&Transition>>, step: &str, block: bool) -> (Vec<Transition>, Vec<Transition>) {
    let all = by.get(step).map_or(&[][..], Vec::as_slice);
    let norm = |e: &&Transition| {
        let mut n = Transition { ordinal: 0, ..(*e).clone() };
        if n.guard_kind == GuardKind::Llm && n.guard_text.is_none() {
            n.guard_text = Some(String::new());
        }
        n.field_value = n.field_value.as_ref().map(value_norm);
        n.field_values = n.field_values.as_ref().map(|v| v.iter().map(value_norm).collect());
        n
    };
    let mut guarded: Vec<Transition> = all.iter().filter(|e| e.guard_kind != GuardKind::Default).map(norm).collect();
    if block {
        guarded.sort_by(|x, y| {
            x.field_value.as_ref().map(Value::to_string).cmp(&y.field_value.as_ref().map(Value::to_string))
        });
    }
    let defaults = all.iter().filter(|e| e.guard_kind == GuardKind::Default).map(norm).collect();
    (guarded, defaults)
}

/// Numbers compared by value (2 and 2.0 are the same literal).
fn value_norm(v: &Value) -> Value {
    match v.as_f64() {
        Some(f) if v.is_f64() && f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0 => Value::from(f as i64),
        _ => v.clone(),
    }
}
