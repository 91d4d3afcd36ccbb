//! Routine tool calls (the converse surface): a routine started by its exposed tool name with
//! typed input, instead of by the visitor's message.

use serde_json::{Value, json};

use super::{Run, Walk, done_ids, execution_id, new_run};
use crate::agents::config::{AgentConfig, RoutineSnap};
use crate::app::App;
use crate::error::Result;
use crate::turn::TurnInput;
use crate::turn::routine::{Invocation, RoutineDecision, RoutineReport};

/// The routine running in the conversation (active or waiting for a decision), if any.
pub(super) fn running<'a>(agent: &'a AgentConfig, state: &Value) -> Option<(Run, &'a RoutineSnap)> {
    let run: Run = state.get("routine").and_then(|v| serde_json::from_value(v.clone()).ok())?;
    if run.status == "completed" || run.status == "abandoned" {
        return None;
    }
    let snap = agent.routine(&run.routine_id)?;
    Some((run, snap))
}

/// The enabled routine exposed as `tool_name` in this agent release.
pub fn exposed<'a>(agent: &'a AgentConfig, tool_name: &str) -> Option<&'a RoutineSnap> {
    agent.routines.iter().find(|r| {
        r.definition.enabled && r.definition.exposure.as_ref().is_some_and(|e| e.enabled && e.tool_name == tool_name)
    })
}

/// A routine tool call: the activator never runs. A routine already running keeps the turn
/// (`not_started`: it says where it stands, reading nothing from the call); a routine completed
/// here under `once_per_conversation` declines (the agent answers normally); otherwise the routine
/// starts (`started`, or `reentered` when it completed here before) with the call's input as its
/// variables, so steps whose slots are given are passed through.
pub(super) fn invoke(app: &App, input: &TurnInput, inv: &Invocation, state: Value) -> Result<RoutineDecision> {
    let agent = &input.agent;
    // a routine left waiting for input past the abandon time does not hold the call back
    let now = app.clock.now().timestamp();
    let stale = |r: &Run| r.status == "active" && r.touched_at.is_some_and(|t| now - t > super::ABANDON_AFTER_SECS);
    if let Some((run, snap)) = running(agent, &state).filter(|(r, _)| !stale(r)) {
        let mut w = Walk::new(app, input, snap, run);
        w.reading = false;
        w.outcome = Some("not_started");
        w.trace.push(json!({"event": "invocation_not_started", "toolName": inv.tool_name}));
        // the running routine says where it stands; the call moves nothing
        let step = w.run.step.clone();
        let missing = w.missing_for(&step);
        w.reply = Some(if w.run.status == "suspended" || missing.is_empty() {
            w.say_step(&step)
        } else {
            w.ask_text(&step, &missing)
        });
        return Ok(w.finish(state));
    }
    let Some(snap) = exposed(agent, &inv.tool_name) else {
        return Ok(RoutineDecision::NotEngaged { reason: "unknown_tool" });
    };
    let done = done_ids(&state).contains(&snap.id);
    if done && snap.definition.activation.reentry_mode == crate::routines::definition::ReentryMode::OncePerConversation
    {
        let report = RoutineReport {
            name: snap.name.clone(),
            status: "completed",
            pending_input: vec![],
            tool_name: Some(inv.tool_name.clone()),
        };
        let trace = json!({"routineId": snap.id, "event": "invocation_declined", "toolName": inv.tool_name});
        return Ok(RoutineDecision::Declined { report, trace });
    }
    let Some(mut run) = new_run(snap) else {
        return Ok(RoutineDecision::NotEngaged { reason: "routine_without_steps" });
    };
    run.execution_id = execution_id(&input.conversation_id, &snap.id, &state);
    run.variables = inv.input.clone();
    let mut w = Walk::new(app, input, snap, run);
    w.reading = false;
    w.tool_name = Some(inv.tool_name.clone());
    w.outcome = Some(if done { "reentered" } else { "started" });
    w.trace.push(json!({"event": "invoked", "routineId": snap.id, "toolName": inv.tool_name,
        "given": inv.input.keys().collect::<Vec<_>>()}));
    w.walk(true)?;
    Ok(w.finish(state))
}

/// A conversation state in which the routine named `name` is already running: at `step` (else
/// its first step), its question asked, with `slots` filled. An eval replay starts here.
pub fn start_state(
    agent: &AgentConfig,
    name: &str,
    step: Option<&str>,
    slots: &serde_json::Map<String, Value>,
    now_secs: i64,
) -> std::result::Result<Value, String> {
    let snap = agent
        .routines
        .iter()
        .find(|r| r.name == name)
        .ok_or_else(|| format!("the agent has no routine named {name:?}"))?;
    let mut run = new_run(snap).ok_or_else(|| format!("the routine {name:?} has no steps"))?;
    if let Some(s) = step {
        if !snap.definition.steps.iter().any(|x| x.stable_step_id == s) {
            return Err(format!("the routine {name:?} has no step {s:?}"));
        }
        run.step = s.to_string();
        run.attempts = std::collections::BTreeMap::from([(s.to_string(), 1)]);
        run.path.push(s.to_string());
    }
    run.variables = slots.clone();
    run.asked = true;
    run.touched_at = Some(now_secs);
    let run = serde_json::to_value(&run).map_err(|e| e.to_string())?;
    Ok(json!({"routine": run}))
}
