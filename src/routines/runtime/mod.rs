//! The routine runtime: the turn's routine stage (`App::routine_pass`).
//!
//! Per turn: a routine that is running continues (a suspended one says it is waiting for review);
//! otherwise the message may activate one (trigger similarity and priority, under the reentry
//! rule). A running routine reads the visitor's message for the slots its current step collects
//! (typed and checked; a bad value is asked again), then walks the graph: deterministic guards
//! (field operators, tool outcomes, filled slots, bounded loops) before LLM guards, tool steps
//! call the agent's skills, action steps queue an idempotent outbox action, approval steps
//! suspend on a pending decision, and terminals complete the routine or hand the conversation to
//! a person. An off-topic question mid-routine is answered normally and the pending step is asked
//! again.
//!
//! **No model needed.** Slots are extracted deterministically (`slots.rs`). LLM guards and
//! triggers are judged by similarity over the local embedding model: a trigger activates at
//! cosine ≥ [`TRIGGER_THRESHOLD`], an LLM guard passes at ≥ [`GUARD_THRESHOLD`]. With an
//! explicitly chosen chat model, the model judges guards and triggers (JSON output) and its
//! decision is recorded in the trace.
//!
//! The conversation's `state.routine` holds the running routine (`Run`); `state.routinesDone`
//! the routines completed in this conversation (for the reentry rule).

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde_json::{Map, Value, json};

mod api;
mod guards;
mod invoke;
mod judge;
mod reading;
mod tool_step;

use super::definition::{Definition, GuardKind, SlotType, Step, StepKind, TerminalKind, Transition};
use super::effects::{ActionEffect, DecisionEffect, ExportEffect, HandoffEffect, RoutineEffects};
use super::slots;
use crate::agents::config::{AgentConfig, RoutineSnap};
use crate::app::App;
use crate::error::Result;
use crate::turn::TurnInput;
use crate::turn::routine::{PendingInput, RoutineAnswer, RoutineDecision, RoutinePass, RoutineReport, RoutineTurn};
pub use api::Run;
pub use guards::content_hash;
pub use invoke::{exposed, start_state};
use invoke::{invoke, running};
use judge::judge;

/// Cosine similarity at which a message activates a routine's trigger.
pub const TRIGGER_THRESHOLD: f32 = 0.45;
/// Cosine similarity at which a message passes an LLM guard (its prose).
pub const GUARD_THRESHOLD: f32 = 0.5;
/// A routine waiting this long for the visitor's input is abandoned at their next message.
pub const ABANDON_AFTER_SECS: i64 = 24 * 3600;
/// Steps one turn may walk through (a guard against cycles the validator missed).
const MAX_MOVES: usize = 64;
/// Asks of the same step in a row before the "exhausted" wording.
const REASK_LIMIT: u32 = 3;

/// The engine.
pub struct Engine;

impl RoutinePass for Engine {
    fn run(&self, app: &App, turn: &RoutineTurn) -> Result<RoutineDecision> {
        let agent = &turn.input.agent;
        let state = turn.conversation.state.clone();
        if let Some(inv) = &turn.input.invocation {
            return invoke(app, turn.input, inv, state);
        }
        if let Some((mut run, snap)) = running(agent, &state) {
            let now = app.clock.now().timestamp();
            let idle = run.touched_at.is_some_and(|t| now - t > ABANDON_AFTER_SECS);
            // a routine left waiting for the visitor's input for a day is abandoned (one waiting
            // for a person's decision is not: that wait is theirs)
            if idle && run.status == "active" {
                run.status = "abandoned".into();
                let mut state = state;
                state["routine"] = serde_json::to_value(&run).unwrap_or(Value::Null);
                let report = RoutineReport {
                    name: run.name.clone(),
                    status: "abandoned",
                    pending_input: vec![],
                    tool_name: None,
                };
                let trace = json!({"routineId": run.routine_id, "event": "abandoned", "idleSecs": now - run.touched_at.unwrap_or(now)});
                return Ok(RoutineDecision::Abandoned { report, state, trace });
            }
            return continue_run(app, turn.input, snap, run, state);
        }
        if agent.routines.iter().all(|r| !r.definition.enabled) {
            return Ok(RoutineDecision::NotEngaged { reason: "no_routines" });
        }
        match activate(app, turn.input, &state)? {
            Some((snap, score)) => start(app, turn.input, snap, state, score),
            None => Ok(RoutineDecision::NotEngaged { reason: "no_trigger_matched" }),
        }
    }
}

fn done_ids(state: &Value) -> Vec<String> {
    state["routinesDone"].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_string)).collect()
}

/// The routine the message starts, if any: eligible (enabled; not completed here unless reentry
/// allows it) and similar enough to its trigger; the best score wins, priority breaks near ties.
fn activate<'a>(app: &App, input: &'a TurnInput, state: &Value) -> Result<Option<(&'a RoutineSnap, f32)>> {
    let agent: &'a AgentConfig = &input.agent;
    let done = done_ids(state);
    let eligible: Vec<&RoutineSnap> = agent
        .routines
        .iter()
        .filter(|r| r.definition.enabled && r.definition.activation.gate_ref.is_none())
        .filter(|r| {
            !done.contains(&r.id)
                || r.definition.activation.reentry_mode != super::definition::ReentryMode::OncePerConversation
        })
        .collect();
    if eligible.is_empty() {
        return Ok(None);
    }
    let triggers: Vec<&str> = eligible.iter().map(|r| r.definition.activation.trigger_description.as_str()).collect();
    let judged = judge(app, input, &input.message, &triggers, TRIGGER_THRESHOLD)?;
    let mut best: Option<(&RoutineSnap, f32)> = None;
    for (r, s) in eligible.into_iter().zip(judged.scores) {
        if s < judged.threshold {
            continue;
        }
        best = match best {
            None => Some((r, s)),
            Some((b, bs)) => {
                let near = (s - bs).abs() < 0.05;
                let better = if near {
                    r.definition.activation.priority > b.definition.activation.priority
                        || (r.definition.activation.priority == b.definition.activation.priority && s > bs)
                } else {
                    s > bs
                };
                if better { Some((r, s)) } else { Some((b, bs)) }
            }
        };
    }
    Ok(best)
}

/// A run's execution id: the same for every attempt at starting this routine's `n`th run in the
/// conversation (a superseded or failed activation that already queued a tool's delivery keys it
/// the same way the next time), a new one for each later run.
fn execution_id(conversation_id: &str, routine_id: &str, state: &Value) -> String {
    use sha2::{Digest, Sha256};
    let n = state.pointer(&format!("/routineRuns/{routine_id}")).and_then(Value::as_u64).unwrap_or(0);
    let h = Sha256::digest(format!("{conversation_id}\n{routine_id}\n{n}").as_bytes());
    hex::encode(&h[..16])
}

fn new_run(snap: &RoutineSnap) -> Option<Run> {
    let root = snap.definition.root()?;
    Some(Run {
        routine_id: snap.id.clone(),
        name: snap.name.clone(),
        version: snap.version,
        execution_id: crate::ids::new_id(),
        step: root.stable_step_id.clone(),
        variables: Map::new(),
        attempts: BTreeMap::from([(root.stable_step_id.clone(), 1)]),
        status: "active".into(),
        reask_count: 0,
        path: vec![root.stable_step_id.clone()],
        last_result: None,
        decision: None,
        asked: false,
        touched_at: None,
    })
}

fn start(app: &App, input: &TurnInput, snap: &RoutineSnap, state: Value, score: f32) -> Result<RoutineDecision> {
    let Some(mut run) = new_run(snap) else {
        return Ok(RoutineDecision::NotEngaged { reason: "routine_without_steps" });
    };
    run.execution_id = execution_id(&input.conversation_id, &snap.id, &state);
    let mut w = Walk::new(app, input, snap, run);
    w.trace.push(json!({"event": "activated", "routineId": snap.id, "score": score}));
    w.walk(true)?;
    Ok(w.finish(state))
}

fn continue_run(app: &App, input: &TurnInput, snap: &RoutineSnap, run: Run, state: Value) -> Result<RoutineDecision> {
    let mut w = Walk::new(app, input, snap, run);
    if w.run.status == "suspended" {
        w.reply = Some(w.say_step(&w.run.step.clone()));
        w.trace.push(json!({"event": "waiting_for_approval", "decision": w.run.decision}));
        return Ok(w.finish(state));
    }
    let corrected = w.correct_mutable();
    // a digression: nothing for the pending step, and the visitor asked something else
    let missing = w.missing_for(&w.run.step.clone());
    let step_kind = w.def().step(&w.run.step).map(|s| s.kind);
    if step_kind == Some(StepKind::Chat)
        && !corrected
        && !missing.is_empty()
        && slots::is_question(&input.message)
        && !w.message_gives_anything(&w.run.step.clone())
        && !w.any_exit_fires(&w.run.step.clone())?
    {
        let lead_back = format!("To continue: {}", w.ask_text(&w.run.step.clone(), &missing));
        let report = w.report();
        let trace = json!({"routineId": snap.id, "event": "digression", "step": w.run.step});
        return Ok(RoutineDecision::Digression { lead_back, report, trace });
    }
    w.walk(false)?;
    Ok(w.finish(state))
}

/// One turn's walk through a routine.
struct Walk<'a> {
    app: &'a App,
    input: &'a TurnInput,
    snap: &'a RoutineSnap,
    run: Run,
    reply: Option<String>,
    effects: RoutineEffects,
    trace: Vec<Value>,
    tool_name: Option<String>,
    today: NaiveDate,
    /// Steps that already read this message.
    read: Vec<String>,
    /// Whether the message is read for slots (not on a routine tool call).
    reading: bool,
    /// On a routine tool call: how it went.
    outcome: Option<&'static str>,
}

impl<'a> Walk<'a> {
    fn new(app: &'a App, input: &'a TurnInput, snap: &'a RoutineSnap, run: Run) -> Walk<'a> {
        let today = app.clock.now().date_naive();
        Walk {
            app,
            input,
            snap,
            run,
            reply: None,
            effects: RoutineEffects::default(),
            trace: vec![],
            tool_name: None,
            today,
            read: vec![],
            reading: true,
            outcome: None,
        }
    }

    fn def(&self) -> &'a Definition {
        &self.snap.definition
    }

    /// Slots a step collects: the slots its instruction names (`{{slot.x}}`), in declaration
    /// order; a slot is collected by the first chat step that names it.
    fn collected_by(&self, step_id: &str) -> Vec<&'a super::definition::Slot> {
        let def = self.def();
        let mut steps: Vec<&Step> = def.steps.iter().filter(|s| s.kind == StepKind::Chat).collect();
        steps.sort_by_key(|s| s.ordinal);
        let mut slots: Vec<&super::definition::Slot> = def.slots.iter().collect();
        slots.sort_by_key(|s| s.ordinal);
        slots
            .into_iter()
            .filter(|slot| {
                let tag = format!("{{{{slot.{}}}}}", slot.key);
                steps.iter().find(|s| s.instruction.contains(&tag)).is_some_and(|s| s.stable_step_id == step_id)
            })
            .collect()
    }

    /// The slots a step still needs: its required collected slots without a value (all of them
    /// when it collects only optional ones).
    fn missing_for(&self, step_id: &str) -> Vec<&'a super::definition::Slot> {
        let collected = self.collected_by(step_id);
        let all_optional = collected.iter().all(|s| !s.required);
        collected
            .into_iter()
            .filter(|s| (s.required || all_optional) && !self.run.variables.contains_key(&s.key))
            .collect()
    }

    fn message_gives_anything(&self, step_id: &str) -> bool {
        self.collected_by(step_id).iter().any(|s| {
            s.slot_type != SlotType::Text
                && slots::extract(s.slot_type, &s.key, &self.input.message, self.today).is_some()
                || s.slot_type == SlotType::Text && slots::find_named_text(&self.input.message, &s.key).is_some()
        })
    }

    /// The LLM edge the message passes, judged by similarity to each edge's prose.
    fn llm_choice(&mut self, llm: &[&'a Transition]) -> Result<Option<&'a Transition>> {
        let with_text: Vec<&&Transition> =
            llm.iter().filter(|t| t.guard_text.as_deref().is_some_and(|g| !g.trim().is_empty())).collect();
        if with_text.is_empty() {
            return Ok(None);
        }
        let texts: Vec<&str> = with_text.iter().map(|t| t.guard_text.as_deref().unwrap_or_default()).collect();
        let j = judge(self.app, self.input, &self.input.message, &texts, GUARD_THRESHOLD)?;
        let scores = &j.scores;
        let best = with_text
            .iter()
            .zip(scores.iter())
            .filter(|(_, s)| **s >= j.threshold)
            .max_by(|a, b| a.1.partial_cmp(b.1).unwrap_or(std::cmp::Ordering::Equal));
        self.trace.push(json!({"event": "llm_guards", "judge": j.judge, "threshold": j.threshold,
            "scores": texts.iter().zip(scores.iter()).map(|(t, s)| json!({"guard": t, "score": s})).collect::<Vec<_>>()}));
        Ok(best.map(|(t, _)| **t))
    }

    /// Whether a non-default exit of the step fires for this message (used to tell a digression
    /// from an exit like "the visitor wants a person").
    fn any_exit_fires(&mut self, step_id: &str) -> Result<bool> {
        let exits = self.def().exits(step_id);
        if exits.iter().any(|t| {
            t.guard_kind != GuardKind::Default
                && t.guard_kind != GuardKind::Llm
                && t.guard_kind != GuardKind::Counter
                && self.deterministic(t)
        }) {
            return Ok(true);
        }
        let llm: Vec<&Transition> = exits.into_iter().filter(|t| t.guard_kind == GuardKind::Llm).collect();
        Ok(self.llm_choice(&llm)?.is_some())
    }

    /// The exit to take from the current step, or none (stay).
    fn choose(&mut self, step: &'a Step, fresh: bool) -> Result<Option<&'a Transition>> {
        let exits = self.def().exits(&step.stable_step_id);
        if step.kind == StepKind::Action {
            return Ok(exits.first().copied());
        }
        // a step still waiting for its slots is not retried (a counter loop) before it is answered
        let waiting = step.kind == StepKind::Chat && !self.missing_for(&step.stable_step_id).is_empty();
        let conditioned: Vec<&Transition> = exits
            .iter()
            .copied()
            .filter(|t| !matches!(t.guard_kind, GuardKind::Default | GuardKind::Llm))
            .filter(|t| !(waiting && t.guard_kind == GuardKind::Counter))
            .collect();
        if let Some(t) = conditioned.iter().find(|t| self.deterministic(t)) {
            return Ok(Some(t));
        }
        let llm: Vec<&Transition> = exits.iter().copied().filter(|t| t.guard_kind == GuardKind::Llm).collect();
        // a chat step's LLM exits judge the visitor's answer to it, not the message that led here
        if !(llm.is_empty() || step.kind == StepKind::Chat && fresh || self.input.message.trim().is_empty())
            && let Some(t) = self.llm_choice(&llm)?
        {
            return Ok(Some(t));
        }
        Ok(exits.iter().copied().find(|t| t.guard_kind == GuardKind::Default))
    }

    /// Walks from the current step until the routine must wait for the visitor, a decision, or
    /// ends. `activated`: this message started the routine.
    fn walk(&mut self, _activated: bool) -> Result<()> {
        for _ in 0..MAX_MOVES {
            let id = self.run.step.clone();
            let Some(step) = self.def().step(&id) else {
                return self.end_at(&id);
            };
            match step.kind {
                StepKind::Chat => {
                    let refused = self.read_slots(&id);
                    if let Some((key, t)) = refused.first() {
                        self.run.reask_count += 1;
                        self.reply = Some(self.reask_text(key, *t));
                        self.run.asked = true;
                        return Ok(());
                    }
                    let missing = self.missing_for(&id);
                    let collects = !self.collected_by(&id).is_empty();
                    // a step that only says something waits for the visitor once
                    let say_only = !collects && !self.run.asked;
                    if say_only && !self.def().exits(&id).iter().all(|t| t.guard_kind == GuardKind::Default) {
                        self.reply = Some(self.say_step(&id));
                        self.run.asked = true;
                        return Ok(());
                    }
                    let exit = self.choose(step, !self.run.asked)?;
                    match exit {
                        Some(t) if missing.is_empty() || t.guard_kind != GuardKind::Default => {
                            if say_only {
                                // say the step on the way through
                                self.push_said(&id);
                            }
                            self.move_to(t)?;
                        }
                        _ => {
                            if !missing.is_empty() || !self.run.asked {
                                self.run.reask_count = if self.run.asked { self.run.reask_count + 1 } else { 0 };
                                self.reply = Some(if missing.is_empty() {
                                    self.say_step(&id)
                                } else {
                                    self.ask_text(&id, &missing)
                                });
                            } else {
                                self.reply = Some(self.say_step(&id));
                            }
                            self.run.asked = true;
                            return Ok(());
                        }
                    }
                }
                StepKind::Tool => {
                    self.run_tool(step)?;
                    match self.choose(step, false)? {
                        Some(t) => self.move_to(t)?,
                        None => {
                            self.reply = Some(self.say_step(&id));
                            return Ok(());
                        }
                    }
                }
                StepKind::Action => {
                    let action_type = step.action_type.clone().unwrap_or_else(|| step.instruction.clone());
                    let attempt = self.run.attempts.get(&id).copied().unwrap_or(1);
                    self.effects.actions.push(ActionEffect {
                        action_type: action_type.clone(),
                        payload: self.run.variables.clone(),
                        key: format!("routine-action:{}:{}:{attempt}", self.run.execution_id, id),
                    });
                    self.trace.push(json!({"event": "action", "step": id, "actionType": action_type}));
                    match self.choose(step, false)? {
                        Some(t) => self.move_to(t)?,
                        None => return self.end_at("__none__"),
                    }
                }
                StepKind::Approval => {
                    if let Some(chosen) = self.chosen(step) {
                        // resumed after a decision: follow the chosen option
                        let t = self.def().exits(&id).into_iter().find(|t| {
                            self.deterministic(t)
                                || (t.guard_kind == GuardKind::Field
                                    && t.field_value.as_ref().and_then(Value::as_str) == Some(chosen.as_str())
                                    && t.field_ref
                                        .as_deref()
                                        .is_some_and(|r| r.starts_with(step.capture_key.as_deref().unwrap_or("\u{0}"))))
                        });
                        match t {
                            Some(t) => self.move_to(t)?,
                            None => return self.end_at("__none__"),
                        }
                        continue;
                    }
                    self.suspend(step);
                    return Ok(());
                }
            }
            if self.run.status == "completed" {
                return Ok(());
            }
        }
        self.trace.push(json!({"event": "move_limit"}));
        Ok(())
    }

    fn chosen(&self, step: &Step) -> Option<String> {
        let key = step.capture_key.as_deref()?;
        self.run.variables.get(key).and_then(|v| v["id"].as_str()).map(str::to_string)
    }

    fn push_said(&mut self, id: &str) {
        let said = self.say_step(id);
        self.effects.said.push(said);
    }

    /// Moves along `t` (to a step or a terminal).
    fn move_to(&mut self, t: &Transition) -> Result<()> {
        self.trace.push(json!({"event": "transition", "from": t.from_step, "to": t.to_ref, "guard": t.guard_kind}));
        if self.def().step(&t.to_ref).is_some() {
            // a bounded loop back into a step asks its slots again
            if t.guard_kind == GuardKind::Counter {
                for s in self.collected_by(&t.to_ref) {
                    self.run.variables.remove(&s.key);
                }
            }
            // arriving at an approval again asks for a new decision (an earlier choice never
            // carries over, whatever sent the routine back)
            if let Some(key) = self.def().step(&t.to_ref).and_then(|s| s.capture_key.as_deref()) {
                self.run.variables.remove(key);
            }
            self.run.step = t.to_ref.clone();
            *self.run.attempts.entry(t.to_ref.clone()).or_insert(0) += 1;
            self.run.path.push(t.to_ref.clone());
            self.run.asked = false;
            self.run.reask_count = 0;
            Ok(())
        } else {
            self.end_at(&t.to_ref)
        }
    }

    /// Reaches a terminal: completes the routine; a handoff terminal hands the conversation to a
    /// person; the completion export fires for the terminal's kind.
    fn end_at(&mut self, terminal_id: &str) -> Result<()> {
        let def = self.def();
        let terminal =
            def.terminal(terminal_id).or_else(|| def.terminals.iter().find(|t| t.kind == TerminalKind::Complete));
        self.run.status = "completed".into();
        self.run.asked = false;
        let (kind, tid, message) = match terminal {
            Some(t) => (t.kind, t.stable_step_id.clone(), t.instruction.clone()),
            None => (TerminalKind::Complete, terminal_id.to_string(), None),
        };
        self.trace.push(json!({"event": "terminal", "terminal": tid, "kind": kind}));
        let collected = self.collected();
        if kind == TerminalKind::Handoff {
            self.effects.handoff = Some(HandoffEffect {
                routine_id: self.run.routine_id.clone(),
                routine_name: self.run.name.clone(),
                collected: collected.clone(),
            });
        }
        if let Some(x) = def.completion_export.as_ref().filter(|x| x.enabled && x.trigger_kinds.contains(&kind)) {
            self.effects.export = Some(ExportEffect {
                destination_ref: x.destination_ref.clone(),
                body: json!({
                    "destinationRef": x.destination_ref,
                    "source": {"routineId": self.run.routine_id, "routineName": self.run.name, "executionId": self.run.execution_id,
                               "stepId": tid, "terminalKind": kind, "status": "completed"},
                    "data": collected,
                }),
                key: format!("routine-export:{}:{}", self.run.execution_id, tid),
            });
        }
        let text = message.map(|m| self.render(&m)).unwrap_or_else(|| match kind {
            TerminalKind::Handoff => "Bringing in a teammate.".to_string(),
            TerminalKind::Complete => "All done, thank you!".to_string(),
        });
        self.reply = Some(text);
        Ok(())
    }

    /// Declared slot values in declaration order (strings, numbers and booleans only).
    fn collected(&self) -> Map<String, Value> {
        let mut slots: Vec<&super::definition::Slot> = self.def().slots.iter().collect();
        slots.sort_by_key(|s| s.ordinal);
        slots
            .iter()
            .filter_map(|s| {
                let v = self.run.variables.get(&s.key)?;
                matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_)).then(|| (s.key.clone(), v.clone()))
            })
            .collect()
    }

    /// Lands on an approval step: the routine suspends on a new pending decision.
    fn suspend(&mut self, step: &Step) {
        let handle = format!("pd_{}", crate::ids::new_id());
        let capture = step.capture_key.clone().unwrap_or_default();
        let hash = content_hash(&self.run.routine_id, &step.stable_step_id, &capture, &step.options);
        self.effects.decision = Some(DecisionEffect {
            handle: handle.clone(),
            routine_id: self.run.routine_id.clone(),
            routine_name: self.run.name.clone(),
            step_id: step.stable_step_id.clone(),
            reason: self.render(&step.instruction),
            options: step.options.clone(),
            content_hash: hash,
            collected: self.collected(),
            deadline_secs: step.metadata.deadline_secs.filter(|s| *s > 0),
            timeout_option: step.metadata.timeout_option.clone().filter(|o| step.options.iter().any(|x| x.id == *o)),
        });
        self.run.status = "suspended".into();
        self.run.decision = Some(handle);
        self.run.asked = true;
        self.reply = Some(self.say_step(&step.stable_step_id));
        self.trace.push(json!({"event": "approval_requested", "step": step.stable_step_id}));
    }

    /// `{{slot.x}}` → the value when given, else the slot's name in words.
    fn render(&self, text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(i) = rest.find("{{slot.") {
            out.push_str(&rest[..i]);
            let after = &rest[i + 7..];
            match after.find("}}") {
                Some(j) => {
                    let key = &after[..j];
                    match self.run.variables.get(key) {
                        Some(Value::String(s)) => out.push_str(s),
                        Some(v) if !v.is_object() => out.push_str(&v.to_string()),
                        _ => out.push_str(&key.replace('_', " ")),
                    }
                    rest = &after[j + 2..];
                }
                None => {
                    out.push_str(&rest[i..]);
                    rest = "";
                }
            }
        }
        out.push_str(rest);
        out.trim().to_string()
    }

    /// What a step says to the visitor (its instruction, slots filled in).
    fn say_step(&self, id: &str) -> String {
        match self.def().step(id) {
            Some(s) => self.render(&s.instruction),
            None => String::new(),
        }
    }

    /// Asks for the slots a step still needs: the step's own words, then the fields named with
    /// the form they take.
    fn ask_text(&self, id: &str, missing: &[&super::definition::Slot]) -> String {
        let hint = |s: &super::definition::Slot| {
            let name = s
                .description
                .clone()
                .filter(|d| !d.is_empty() && d != &s.key)
                .unwrap_or_else(|| s.key.replace('_', " "));
            match s.slot_type {
                SlotType::Email => format!("{name} (an email address)"),
                SlotType::Date => format!("{name} (a date like 2026-03-01)"),
                SlotType::Number => format!("{name} (a number)"),
                SlotType::Boolean => format!("{name} (yes or no)"),
                SlotType::Text => name,
            }
        };
        let fields: Vec<String> = missing.iter().map(|s| hint(s)).collect();
        let lead = if self.run.reask_count >= REASK_LIMIT { "I still need" } else { "Please tell me" };
        let step = self.say_step(id);
        if self.run.asked || step.is_empty() {
            format!("{lead}: {}.", fields.join(", "))
        } else {
            format!("{step}\n{lead}: {}.", fields.join(", "))
        }
    }

    fn reask_text(&self, key: &str, t: SlotType) -> String {
        let name = key.replace('_', " ");
        let form = match t {
            SlotType::Email => "an email address like name@example.com",
            SlotType::Date => "a date like 2026-03-01",
            SlotType::Number => "a number",
            SlotType::Boolean => "yes or no",
            SlotType::Text => "some text",
        };
        if self.run.reask_count > REASK_LIMIT {
            format!("I still could not read the {name}. Please send it as {form}.")
        } else {
            format!("That does not look like a valid {name}. Please send it as {form}.")
        }
    }

    /// The envelope's `routine`.
    fn report(&self) -> RoutineReport {
        let status = match self.run.status.as_str() {
            "completed" => "completed",
            "suspended" => "waiting_for_approval",
            _ if self.def().step(&self.run.step).is_some_and(|s| s.kind == StepKind::Chat)
                && !self.missing_for(&self.run.step).is_empty() =>
            {
                "waiting_for_input"
            }
            _ => "active",
        };
        let pending_input = if status == "completed" {
            vec![]
        } else {
            let current: Vec<String> = self.collected_by(&self.run.step).iter().map(|s| s.key.clone()).collect();
            let mut slots: Vec<&super::definition::Slot> = self.def().slots.iter().collect();
            slots.sort_by_key(|s| s.ordinal);
            slots
                .into_iter()
                .filter(|s| !self.run.variables.contains_key(&s.key) && (s.required || current.contains(&s.key)))
                .map(|s| PendingInput {
                    key: s.key.clone(),
                    slot_type: s.slot_type.as_str(),
                    required: s.required,
                    description: s.description.clone(),
                })
                .collect()
        };
        RoutineReport { name: self.run.name.clone(), status, pending_input, tool_name: self.tool_name.clone() }
    }

    fn finish(mut self, mut state: Value) -> RoutineDecision {
        let report = self.report();
        if self.run.status == "completed" {
            let runs =
                state.pointer(&format!("/routineRuns/{}", self.run.routine_id)).and_then(Value::as_u64).unwrap_or(0);
            if !state["routineRuns"].is_object() {
                state["routineRuns"] = json!({});
            }
            state["routineRuns"][&self.run.routine_id] = json!(runs + 1);
            let mut done = done_ids(&state);
            if !done.contains(&self.run.routine_id) {
                done.push(self.run.routine_id.clone());
            }
            state["routinesDone"] = json!(done);
        }
        if !state.is_object() {
            state = json!({});
        }
        self.run.touched_at = Some(self.app.clock.now().timestamp());
        state["routine"] = serde_json::to_value(&self.run).unwrap_or(Value::Null);
        let mut text = std::mem::take(&mut self.effects.said).join("\n\n");
        if let Some(r) = self.reply.take() {
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(&r);
        }
        // never an empty reply: the step's own words, else a plain line
        if text.trim().is_empty() {
            let step = self.say_step(&self.run.step.clone());
            text = if step.is_empty() { "Thank you. Let's continue.".to_string() } else { step };
        }
        // directives scoped to this routine or its current step apply as guidance (their
        // bindings are inert in routine turns)
        let tags =
            [format!("routine:{}", self.run.routine_id), format!("step:{}:{}", self.run.routine_id, self.run.step)];
        let scoped: Vec<&crate::agents::config::AuthoredDirective> = self
            .input
            .agent
            .directives
            .iter()
            .filter(|d| d.body.enabled && d.body.tags.iter().any(|t| tags.contains(t)))
            .collect();
        if !scoped.is_empty() {
            let guidance: Vec<&str> = scoped.iter().map(|d| d.body.action.as_str()).collect();
            let phrased = judge::phrase(self.app, self.input, &text, &guidance);
            self.trace.push(
                json!({"event": "scoped_directives", "directives": scoped.iter().map(|d| &d.id).collect::<Vec<_>>(),
                "applied": phrased.is_some()}),
            );
            if let Some(p) = phrased {
                text = p;
            }
        }
        let trace = json!({"routineId": self.run.routine_id, "version": self.run.version, "executionId": self.run.execution_id,
            "step": self.run.step, "status": report.status, "events": self.trace});
        RoutineDecision::Answered(Box::new(RoutineAnswer {
            text,
            report,
            state,
            effects: Box::new(self.effects),
            trace,
            invocation: self.outcome,
        }))
    }
}

/// Resumes a routine after its decision (the chosen option is in `run.variables`): walks on from
/// the gate and answers what the routine says next.
pub fn resume(
    app: &App,
    input: &TurnInput,
    snap: &RoutineSnap,
    run: Run,
    state: crate::conversations::ConversationState,
) -> Result<RoutineAnswer> {
    let mut w = Walk::new(app, input, snap, run);
    w.walk(false)?;
    match w.finish(state) {
        RoutineDecision::Answered(a) => Ok(*a),
        _ => Err(crate::Error::internal_msg("a resumed routine did not answer")),
    }
}
