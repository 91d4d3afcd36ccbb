//! `whatsapp.turn`: answering a customer. The job of a text message runs after the burst window;
//! the first to run gathers every pending text of that sender received so far into one batch and
//! runs one turn on them, in the sender's conversation (a new one after
//! `conversation_timeout_hours` of silence). One batch per sender is answered at a time: a job
//! that finds another batch running leaves its message to it, and a batch that ends queues a turn
//! for what arrived meanwhile. The reply is saved by the turn, which queues its relay.
//!
//! Crash safety: a job killed mid-turn runs again (same job, same batch). A batch whose turn
//! already saved its reply is only closed; one whose turn saved the customer's message but no
//! reply has that attempt marked interrupted and runs again under a new turn id.

use serde_json::json;

use super::{Batch, store};
use crate::agents::config::AgentConfig;
use crate::app::App;
use crate::audit::Actor;
use crate::bus::BusKind;
use crate::clock::{parse_rfc3339, rfc3339};
use crate::connectors::{Connector, ConnectorId};
use crate::conversations::{self, Channel, NewConversation, OwnershipState, TurnFailure, Visibility};
use crate::error::{ErrorCode, Result};
use crate::ids::{WorkspaceId, new_id};
use crate::jobs::{self, JobCtx, JobPayload, NewJob, Outcome};
use crate::storage::Tx;
use crate::turn::{self, Surface, TurnError, TurnInput};

pub const TURN_JOB: &str = "whatsapp.turn";

pub fn handle(app: &App, ctx: &JobCtx, payload: &JobPayload) -> Outcome {
    let (Some(ws), Some(wa_id), Some(row)) =
        (payload["workspaceId"].as_str(), payload["waId"].as_str(), payload["rowId"].as_str())
    else {
        return Outcome::Fail("malformed WhatsApp turn job".into());
    };
    match run(app, ctx, ws, wa_id, row) {
        Ok(o) => o,
        Err(e) => Outcome::retry(e.message),
    }
}

/// What the job does after looking at its message.
enum Next {
    /// Answered, or another job's batch has it.
    Nothing,
    Answer(Batch),
}

fn run(app: &App, ctx: &JobCtx, ws: &str, wa_id: &str, row: &str) -> Result<Outcome> {
    let c = super::super::load(app, &WorkspaceId(ws.to_string()), ConnectorId::Whatsapp)?;
    let now = rfc3339(app.clock.now());
    let next = app.db.write(|tx| {
        let Some(r) = store::row(tx, row)? else { return Ok(Next::Nothing) };
        if let Some(bid) = &r.batch_id {
            return Ok(match store::batch(tx, bid)? {
                // this job was cut off while answering: carry on
                Some(b) if b.status == "running" && b.job_id == ctx.id => Next::Answer(b),
                _ => Next::Nothing,
            });
        }
        if r.status != "pending" {
            return Ok(Next::Nothing);
        }
        if let Some(b) = store::running_batch(tx, ws, wa_id)? {
            // that batch queues a turn for this message when it ends
            return Ok(if b.job_id == ctx.id { Next::Answer(b) } else { Next::Nothing });
        }
        if !c.enabled {
            let b = new_batch(tx, ws, wa_id, None, ctx.id, &now)?;
            store::end_batch(tx, &b.id, "skipped", Some("the WhatsApp connector is disabled"), &now)?;
            return Ok(Next::Nothing);
        }
        let cid = conversation_for(tx, &c, wa_id, &now)?;
        Ok(Next::Answer(new_batch(tx, ws, wa_id, Some(&cid), ctx.id, &now)?))
    })?;
    let Next::Answer(b) = next else { return Ok(Outcome::Done) };
    let outcome = answer(app, ctx, &c, &b);
    if !matches!(outcome, Outcome::Retry { .. }) {
        follow_up(app, ws, wa_id, &b.id)?;
    }
    Ok(outcome)
}

/// A running batch of the sender's pending texts received until now.
fn new_batch(tx: &Tx, ws: &str, wa_id: &str, cid: Option<&str>, job: i64, now: &str) -> Result<Batch> {
    let b = Batch {
        id: new_id(),
        workspace_id: ws.to_string(),
        wa_id: wa_id.to_string(),
        conversation_id: cid.map(str::to_string),
        turn_id: new_id(),
        job_id: job,
        status: "running".into(),
    };
    store::insert_batch(tx, &b, now)?;
    store::claim(tx, ws, wa_id, &b.id, cid, now)?;
    Ok(b)
}

/// The sender's conversation: the current one while they wrote within the timeout, else a new one
/// with the connector's agent (pinned to its published revision).
fn conversation_for(tx: &Tx, c: &Connector, wa_id: &str, now: &str) -> Result<String> {
    let ws = &c.workspace_id;
    let hours: i64 = c.value("conversation_timeout_hours").and_then(|v| v.parse().ok()).unwrap_or(24);
    let contact = store::contact(tx, &ws.0, wa_id)?;
    let current = contact.as_ref().and_then(|k| {
        let last = parse_rfc3339(k.conversation_last_at.as_deref()?)?;
        let fresh = parse_rfc3339(now).is_some_and(|n| n - last < chrono::Duration::hours(hours));
        fresh.then(|| k.conversation_id.clone()).flatten()
    });
    let cid = match current.filter(|cid| conversations::find_in(tx, &ws.0, cid, false).is_ok()) {
        Some(cid) => cid,
        None => {
            let configured = c.value("agent_id").filter(|a| crate::agents::find(tx, ws, a).ok().flatten().is_some());
            let agent_id = match configured {
                Some(a) => a.to_string(),
                None => crate::agents::ensure_default(tx, ws, now)?,
            };
            let agent = crate::agents::config::published(tx, ws, &agent_id)?;
            let cid = conversations::start(
                tx,
                &NewConversation {
                    workspace_id: &ws.0,
                    agent_id: &agent_id,
                    revision_id: agent.revision_id.as_deref(),
                    channel: Channel::Whatsapp,
                    visibility: Visibility::Visitor,
                    test_execution_id: None,
                    started_by: None,
                    public_session_id: None,
                },
                now,
            )?;
            store::insert_thread(tx, &cid, &ws.0, wa_id, now)?;
            cid
        }
    };
    store::set_contact_conversation(tx, &ws.0, wa_id, &cid, now)?;
    Ok(cid)
}

fn agent_of(tx: &crate::storage::Conn, ws: &WorkspaceId, cid: &str) -> Result<AgentConfig> {
    let conv = conversations::find_in(tx, &ws.0, cid, false)?;
    match &conv.revision_id {
        Some(rid) => crate::agents::config::revision(tx, &conv.agent_id, rid),
        None => crate::agents::config::published(tx, ws, &conv.agent_id),
    }
}

/// Runs the batch's turn (unless an earlier attempt already answered) and closes the batch.
fn answer(app: &App, ctx: &JobCtx, c: &Connector, b: &Batch) -> Outcome {
    let close = |status: &str, error: Option<&str>| {
        let now = rfc3339(app.clock.now());
        app.db.write(|tx| store::end_batch(tx, &b.id, status, error, &now))
    };
    let ws = c.workspace_id.clone();
    let Some(cid) = b.conversation_id.clone() else { return Outcome::Done };
    let prepared = app.db.read(|conn| {
        let texts = store::texts(conn, &b.id)?;
        let (saved, reply) = conversations::turn_messages(conn, &cid, &b.turn_id)?;
        Ok((texts, saved, reply.is_some(), agent_of(conn, &ws, &cid)?))
    });
    let (texts, saved, replied, agent) = match prepared {
        Ok(x) => x,
        Err(e) => return give_up_or_retry(app, ctx, b, e.message),
    };
    if replied || texts.is_empty() {
        return settle(close("answered", None));
    }
    let mut turn_id = b.turn_id.clone();
    if saved {
        // an attempt cut off mid-turn: it is marked interrupted, and this one is a new turn
        turn_id = new_id();
        let now = rfc3339(app.clock.now());
        let r = app.db.write(|tx| {
            conversations::mark_turn_failed(tx, &cid, &b.turn_id, TurnFailure::Failed, "interrupted")?;
            store::set_batch_turn(tx, &b.id, &turn_id, &now)
        });
        if let Err(e) = r {
            return give_up_or_retry(app, ctx, b, e.message);
        }
    }
    let message: String = texts.join("\n").chars().take(turn::MAX_MESSAGE_CHARS).collect();
    let input = TurnInput {
        workspace: ws.clone(),
        conversation_id: cid.clone(),
        agent,
        message,
        filter: None,
        request_id: None,
        surface: Surface::Whatsapp,
        turn_id,
        include_debug: false,
        actor: Actor::system(),
        context_scope: turn::context::ContextScope {
            session_id: None,
            customer_id: Some(format!("whatsapp:{}", b.wa_id)),
        },
        test_values: Vec::new(),
        invocation: None,
    };
    match turn::run_queued(app, &input) {
        Ok(reply) => {
            // the reply and its relay are saved; the batch is not closed yet
            jobs::crash_point("whatsapp.turn.replied");
            app.bus.publish(&ws.0, Some(&cid), BusKind::MessageCreated);
            if reply.ownership_state == OwnershipState::HumanOwned {
                app.bus.publish(&ws.0, Some(&cid), BusKind::OwnershipChanged);
            }
            settle(close("answered", None))
        }
        Err(TurnError::Failed(e)) if e.code == ErrorCode::UsageLimitExceeded => {
            settle(close("failed", Some("not answered: the account's usage limit is reached")))
        }
        Err(TurnError::Failed(e)) if e.code.status() < 500 => settle(close("failed", Some(&e.message))),
        Err(e) => give_up_or_retry(app, ctx, b, Error::from(e).message),
    }
}

use crate::error::Error;

fn settle(r: Result<()>) -> Outcome {
    match r {
        Ok(()) => Outcome::Done,
        Err(e) => Outcome::retry(e.message),
    }
}

/// A transient failure: retried, except on the job's last attempt, which closes the batch.
fn give_up_or_retry(app: &App, ctx: &JobCtx, b: &Batch, error: String) -> Outcome {
    if ctx.attempt < ctx.max_attempts {
        return Outcome::retry(error);
    }
    let now = rfc3339(app.clock.now());
    let msg = format!("not answered: {error}");
    match app.db.write(|tx| store::end_batch(tx, &b.id, "failed", Some(&msg), &now)) {
        Ok(()) => Outcome::Fail(error),
        Err(e) => Outcome::retry(e.message),
    }
}

/// After a batch: texts that arrived while it ran get their turn (their own jobs found it
/// running and left them to it).
fn follow_up(app: &App, ws: &str, wa_id: &str, batch: &str) -> Result<()> {
    let due = app.clock.now_ms();
    app.db.write(|tx| {
        let Some(row) = store::oldest_pending(tx, ws, wa_id)? else { return Ok(()) };
        let job = NewJob::new(TURN_JOB, json!({"workspaceId": ws, "waId": wa_id, "rowId": row}))
            .dedupe(format!("wa-turn:{row}:after:{batch}"))
            .workspace(ws)
            .run_at(due)
            .priority(5)
            .max_attempts(8);
        jobs::enqueue_tx(tx, due, app.jobs.default_max_attempts(), &job)?;
        Ok(())
    })
}
