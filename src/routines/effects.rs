//! What a routine turn writes beside its reply, in the turn's own transaction: the handoff (the
//! conversation becomes human-owned and `handoff.notify` is queued with the routine and the
//! collected slots), a pending decision and its `approval.request` notice, the completion export
//! (`webhook.send`, signed) and action markers (`routine.action`, idempotent outbox jobs).
//! Test conversations (test chat) record the effects in the trace but send nothing.

use serde_json::{Map, Value, json};

use super::definition::GateOption;
use super::{Decision, store};
use crate::app::App;
use crate::audit::{self, Event};
use crate::delivery::notices::HANDOFF_JOB;
use crate::error::Result;
use crate::ids::WorkspaceId;
use crate::jobs::{self, JobCtx, JobPayload, NewJob, Outcome};
use crate::storage::Tx;
use crate::turn::TurnInput;
use crate::turn::routine::Effects;

/// The job kind of an action marker.
pub const ACTION_JOB: &str = "routine.action";

fn dashboard(app: &App, cid: &str) -> Option<String> {
    app.config.public_url.as_ref().map(|u| format!("{}/app/inbox/{cid}", u.trim_end_matches('/')))
}

/// Hands the conversation to a person at a routine's handoff terminal.
pub fn hand_off(
    app: &App,
    tx: &Tx,
    input: &TurnInput,
    routine_id: &str,
    routine_name: &str,
    collected: &Map<String, Value>,
    now: &str,
) -> Result<()> {
    let (ws, cid) = (&input.workspace, &input.conversation_id);
    let version = crate::conversations::hand_off(tx, cid, "routine_handoff", now)?;
    let payload = json!({
        "workspaceId": ws.0, "agentId": input.agent.agent_id, "conversationId": cid, "reason": "routine_handoff",
        "routine": {"id": routine_id, "name": routine_name}, "collected": collected,
        "dashboardUrl": dashboard(app, cid), "requestId": input.request_id,
    });
    let job = NewJob::new(HANDOFF_JOB, payload).workspace(&ws.0).dedupe(format!("handoff:{cid}:{version}"));
    jobs::enqueue_tx(tx, app.clock.now_ms(), app.jobs.default_max_attempts(), &job)?;
    let meta = json!({"action": "handoff_requested", "reason": "routine_handoff", "routineId": routine_id, "version": version});
    audit::record(
        tx,
        now,
        &input.actor,
        Event::new("hitl.ownership").workspace(ws).target("conversation", cid).meta(meta),
    )
}

/// A pending decision to open.
pub struct NewDecision<'a> {
    pub handle: &'a str,
    pub routine_id: &'a str,
    pub routine_name: &'a str,
    pub step_id: &'a str,
    pub reason: &'a str,
    pub options: &'a [GateOption],
    pub content_hash: &'a str,
    pub collected: &'a Map<String, Value>,
    pub deadline_secs: Option<i64>,
    pub timeout_option: Option<&'a str>,
}

/// The job that takes an approval's timeout option when its deadline passes.
pub const TIMEOUT_JOB: &str = "routine.decision_timeout";

/// Opens a pending decision and queues its `approval.request` notice (not for test chat).
pub fn open_decision(app: &App, tx: &Tx, input: &TurnInput, d: &NewDecision, now: &str) -> Result<()> {
    let test = input.surface == crate::turn::Surface::Test;
    if test {
        return Ok(());
    }
    let (ws, cid) = (&input.workspace, &input.conversation_id);
    let due_ms = d.deadline_secs.map(|s| app.clock.now_ms() + s * 1000);
    let deadline = due_ms.and_then(chrono::DateTime::from_timestamp_millis).map(crate::clock::rfc3339);
    if let (Some(due), Some(_)) = (due_ms, d.timeout_option) {
        let job = NewJob::new(TIMEOUT_JOB, json!({"workspaceId": ws.0, "handle": d.handle}))
            .workspace(&ws.0)
            .dedupe(format!("timeout:{}", d.handle))
            .run_at(due);
        jobs::enqueue_tx(tx, app.clock.now_ms(), app.jobs.default_max_attempts(), &job)?;
    }
    store::insert_decision(
        tx,
        &Decision {
            handle: d.handle.to_string(),
            workspace_id: ws.0.clone(),
            agent_id: input.agent.agent_id.clone(),
            conversation_id: cid.clone(),
            routine_id: d.routine_id.to_string(),
            routine_name: d.routine_name.to_string(),
            step_id: d.step_id.to_string(),
            reason: d.reason.to_string(),
            options: d.options.to_vec(),
            content_hash: d.content_hash.to_string(),
            deadline: deadline.clone(),
            timeout_option: d.timeout_option.map(str::to_string),
            resolved: false,
            chosen_option: None,
            resolved_by: None,
            resolved_at: None,
            created_at: now.to_string(),
        },
    )?;
    let payload = json!({
        "workspaceId": ws.0, "agentId": input.agent.agent_id, "conversationId": cid, "handle": d.handle,
        "routine": {"id": d.routine_id, "name": d.routine_name}, "collected": d.collected,
        "dashboardUrl": dashboard(app, cid), "requestId": input.request_id,
    });
    let job = NewJob::new(HANDOFF_JOB, payload).workspace(&ws.0).dedupe(format!("approval:{}", d.handle));
    jobs::enqueue_tx(tx, app.clock.now_ms(), app.jobs.default_max_attempts(), &job)?;
    Ok(())
}

/// Queues the completion export to a webhook destination (`webhook.send`, signed at send time).
/// A missing destination, or an agent with exports off, is a terminal `skipped` delivery.
#[allow(clippy::too_many_arguments)]
pub fn queue_export(
    app: &App,
    tx: &Tx,
    ws: &WorkspaceId,
    agent_id: &str,
    cid: &str,
    destination: &str,
    body: &crate::delivery::WebhookBody,
    key: &str,
    test: bool,
) -> Result<()> {
    if test {
        return Ok(());
    }
    let now = crate::clock::rfc3339(app.clock.now());
    let exports_on =
        crate::agents::get_in(tx, ws, agent_id).map(|a| a.settings.webhook_exports_enabled).unwrap_or(false);
    let dest = store::destination(tx, &ws.0, destination)?;
    match dest {
        Some(d) if exports_on => {
            crate::delivery::enqueue_webhook(
                app,
                tx,
                &now,
                &crate::delivery::Webhook {
                    workspace_id: &ws.0,
                    event: "webhook.send",
                    url: &d.url,
                    body,
                    conversation_id: Some(cid),
                    key,
                    secret_url: false,
                    signed_by: Some(&d.id),
                    bearer: None,
                },
            )?;
        }
        other => {
            let reason = if other.is_none() {
                "the webhook destination does not exist"
            } else {
                "webhook exports are off for this agent"
            };
            crate::delivery::record_skipped(tx, &ws.0, "webhook.send", destination, Some(cid), key, reason, &now)?;
        }
    }
    Ok(())
}

/// Queues an action marker as an idempotent outbox job.
#[allow(clippy::too_many_arguments)]
pub fn queue_action(
    app: &App,
    tx: &Tx,
    ws: &WorkspaceId,
    cid: &str,
    action_type: &str,
    payload: &Map<String, Value>,
    key: &str,
    test: bool,
) -> Result<()> {
    if test {
        return Ok(());
    }
    let job = NewJob::new(
        ACTION_JOB,
        json!({"workspaceId": ws.0, "conversationId": cid, "actionType": action_type,
        "payload": payload, "key": key}),
    )
    .workspace(&ws.0)
    .dedupe(key.to_string());
    jobs::enqueue_tx(tx, app.clock.now_ms(), app.jobs.default_max_attempts(), &job)?;
    Ok(())
}

/// Takes an approval's timeout option when its deadline passed undecided (a decision made in the
/// meantime wins: the job then does nothing).
pub fn timeout_job(app: &App, _ctx: &JobCtx, payload: &JobPayload) -> Outcome {
    let (Some(ws), Some(handle)) = (payload["workspaceId"].as_str(), payload["handle"].as_str()) else {
        return Outcome::Fail("malformed decision timeout".into());
    };
    match super::decisions::time_out(app, ws, handle) {
        Ok(_) => Outcome::Done,
        Err(e) if e.status() < 500 => Outcome::Done,
        Err(e) => Outcome::retry(e.message),
    }
}

/// Runs an action marker. Action types name work for connectors this edition does not have, so
/// the action is recorded in the audit log (type and slot names, never values) and done.
pub fn action_job(app: &App, _ctx: &JobCtx, payload: &JobPayload) -> Outcome {
    let ws = payload["workspaceId"].as_str().unwrap_or_default().to_string();
    let keys: Vec<String> = payload["payload"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
    let meta = json!({"actionType": payload["actionType"], "slots": keys, "key": payload["key"]});
    let now = crate::clock::rfc3339(app.clock.now());
    let cid = payload["conversationId"].as_str().unwrap_or_default().to_string();
    let r = app.db.write(|tx| {
        audit::record(
            tx,
            &now,
            &crate::audit::Actor::system(),
            Event::new("routine.action")
                .workspace(&WorkspaceId(ws.clone()))
                .target("conversation", &cid)
                .meta(meta.clone()),
        )
    });
    match r {
        Ok(()) => Outcome::Done,
        Err(e) => Outcome::retry(e.to_string()),
    }
}

// ---- what a routine turn collected, applied in the turn's transaction ----

#[derive(Debug, Clone)]
pub(super) struct HandoffEffect {
    pub(super) routine_id: String,
    pub(super) routine_name: String,
    pub(super) collected: Map<String, Value>,
}

#[derive(Debug, Clone)]
pub(super) struct ExportEffect {
    pub(super) destination_ref: String,
    pub(super) body: Value,
    pub(super) key: String,
}

#[derive(Debug, Clone)]
pub(super) struct ActionEffect {
    pub(super) action_type: String,
    pub(super) payload: Map<String, Value>,
    pub(super) key: String,
}

#[derive(Debug, Clone)]
pub(super) struct DecisionEffect {
    pub(super) handle: String,
    pub(super) routine_id: String,
    pub(super) routine_name: String,
    pub(super) step_id: String,
    pub(super) reason: String,
    pub(super) options: Vec<super::definition::GateOption>,
    pub(super) content_hash: String,
    pub(super) collected: Map<String, Value>,
    pub(super) deadline_secs: Option<i64>,
    pub(super) timeout_option: Option<String>,
}

/// What a routine turn writes in the turn's transaction.
#[derive(Debug, Default)]
pub(super) struct RoutineEffects {
    pub(super) handoff: Option<HandoffEffect>,
    pub(super) export: Option<ExportEffect>,
    pub(super) actions: Vec<ActionEffect>,
    pub(super) decision: Option<DecisionEffect>,
    /// Steps said on the way through (before the reply).
    pub(super) said: Vec<String>,
}

impl Effects for RoutineEffects {
    fn apply(&self, app: &App, tx: &crate::storage::Tx, input: &TurnInput, now: &str) -> Result<bool> {
        let ws = &input.workspace;
        let cid = &input.conversation_id;
        let test = input.surface == crate::turn::Surface::Test;
        for a in &self.actions {
            queue_action(app, tx, ws, cid, &a.action_type, &a.payload, &a.key, test)?;
        }
        if let Some(x) = &self.export {
            queue_export(app, tx, ws, &input.agent.agent_id, cid, &x.destination_ref, &x.body, &x.key, test)?;
        }
        if let Some(d) = &self.decision {
            open_decision(
                app,
                tx,
                input,
                &NewDecision {
                    handle: &d.handle,
                    routine_id: &d.routine_id,
                    routine_name: &d.routine_name,
                    step_id: &d.step_id,
                    reason: &d.reason,
                    options: &d.options,
                    content_hash: &d.content_hash,
                    collected: &d.collected,
                    deadline_secs: d.deadline_secs,
                    timeout_option: d.timeout_option.as_deref(),
                },
                now,
            )?;
        }
        if let Some(h) = &self.handoff {
            if test {
                return Ok(false);
            }
            hand_off(app, tx, input, &h.routine_id, &h.routine_name, &h.collected, now)?;
            return Ok(true);
        }
        Ok(false)
    }
}
