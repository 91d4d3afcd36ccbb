//! Approvals: a routine waiting on a person's decision, and its resolution.
//!
//! `resolve` checks, in the reference's order: the decision exists for this agent (404), it is
//! still pending (409 `already_resolved`), the caller may decide (403 `forbidden_decider`), the
//! proposal the caller saw is the current one (409 `stale_proposal`, by content hash), and the
//! option is one of the gate's (422 `invalid_option`). The routine then resumes from the gate
//! along the chosen option, and the decision's flip, the routine's new state, its reply and its
//! effects commit in one transaction; a concurrent resolve loses with 409
//! `concurrent_resolution`. Work the resumed routine does before that commit (a tool's delivery)
//! is keyed by the routine execution and step, so a retried resolve does it once.
//!
//! While a person owns the conversation, a resolve records the choice but the routine waits: it
//! follows the chosen option on the visitor's next turn after hand-back (so nothing is said over
//! the operator's head).

use serde_json::json;

use super::runtime::{self, Run};
use super::{Decision, store};
use crate::app::App;
use crate::auth::{Perm, Principal};
use crate::bus::BusKind;
use crate::clock::rfc3339;
use crate::conversations::{self, Channel, NewMessage, Role, Source};
use crate::error::{Error, ErrorCode, Result};
use crate::turn::{Surface, TurnInput};

/// Open decisions shown at most.
const OPEN_LIMIT: usize = 200;

/// `GET /decisions`: open decisions, newest first.
pub fn open(app: &App, p: &Principal) -> Result<Vec<Decision>> {
    p.require(Perm::ConversationTakeover)?;
    app.db.read(|c| store::open_decisions(c, &p.workspace_id.0, OPEN_LIMIT))
}

/// A resolve request.
#[derive(Debug, Clone)]
pub struct Resolve {
    pub option_id: String,
    pub content_hash: String,
}

/// What a resolve did.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub decision: Decision,
    pub option_id: String,
    /// Whether the routine moved on now (false: it waits for the conversation's hand-back).
    pub resumed: bool,
    /// The routine's reply, when it said something.
    pub message_id: Option<String>,
}

fn code(code: ErrorCode, c: &str, message: &str) -> Error {
    Error::new(code, message).with_details(json!({"code": c}))
}

/// `POST /agents/{agentId}/decisions/{handle}/resolve`.
pub fn resolve(app: &App, p: &Principal, agent_id: &str, handle: &str, r: Resolve) -> Result<Resolved> {
    if r.option_id.trim().is_empty() {
        return Err(Error::invalid_field("optionId", "optionId is required"));
    }
    if r.content_hash.trim().is_empty() {
        return Err(Error::invalid_field("contentHash", "contentHash is required"));
    }
    let ws = p.workspace_id.clone();
    let d = app
        .db
        .read(|c| store::decision(c, &ws.0, handle))?
        .filter(|d| d.agent_id == agent_id)
        .ok_or_else(|| Error::not_found("decision"))?;
    if d.resolved {
        return Err(Error::new(ErrorCode::AlreadyResolved, "this decision was already made"));
    }
    if !p.has(Perm::ConversationTakeover) {
        return Err(code(ErrorCode::Forbidden, "forbidden_decider", "you may not decide this approval"));
    }
    if d.content_hash != r.content_hash.trim().trim_start_matches("sha256:") {
        return Err(code(
            ErrorCode::Conflict,
            "stale_proposal",
            "the proposal changed since you saw it; reload the decision and decide again",
        ));
    }
    if !d.options.iter().any(|o| o.id == r.option_id) {
        return Err(code(ErrorCode::Unprocessable, "invalid_option", "optionId must be one of the decision's options"));
    }
    let by = p.user_id.as_ref().map(|u| u.0.clone());
    commit(app, &ws, d, &r.option_id, by, p.actor(None))
}

/// The deadline of a decision passed undecided: its timeout option is taken, as a decision by the
/// system (audited as such). A decision made in the meantime stays as it is.
pub fn time_out(app: &App, ws: &str, handle: &str) -> Result<Resolved> {
    let ws = crate::ids::WorkspaceId(ws.to_string());
    let d = app.db.read(|c| store::decision(c, &ws.0, handle))?.ok_or_else(|| Error::not_found("decision"))?;
    if d.resolved {
        return Err(Error::new(ErrorCode::AlreadyResolved, "this decision was already made"));
    }
    let option = d.timeout_option.clone().ok_or_else(|| Error::invalid("this decision has no timeout option"))?;
    commit(app, &ws, d, &option, None, crate::audit::Actor::system())
}

/// Flips the decision to `option` and resumes its routine, all in one transaction.
fn commit(
    app: &App,
    ws: &crate::ids::WorkspaceId,
    d: Decision,
    option: &str,
    by: Option<String>,
    actor: crate::audit::Actor,
) -> Result<Resolved> {
    let handle = d.handle.clone();
    let handle = handle.as_str();
    let r = Resolve { option_id: option.to_string(), content_hash: d.content_hash.clone() };
    let ws = ws.clone();
    // the routine's resume, computed before the commit (its tool calls are idempotent)
    let conv = app.db.read(|c| conversations::find_in(c, &ws.0, &d.conversation_id, true))?;
    let run: Option<Run> = conv.state.get("routine").and_then(|v| serde_json::from_value(v.clone()).ok());
    let Some(mut run) = run.filter(|r| r.decision.as_deref() == Some(handle)) else {
        // the routine is gone (a newer one replaced it): the decision is still recorded
        return commit_flip_only(app, by, d, &r.option_id);
    };
    let agent = app.db.read(|c| match &conv.revision_id {
        Some(rid) => crate::agents::config::revision(c, &conv.agent_id, rid),
        None => crate::agents::config::published(c, &ws, &conv.agent_id),
    })?;
    let Some(snap) = agent.routine(&run.routine_id).cloned() else {
        return commit_flip_only(app, by, d, &r.option_id);
    };
    let step = snap.definition.step(&run.step).cloned();
    let capture = step.and_then(|s| s.capture_key).unwrap_or_default();
    run.variables.insert(capture, json!({"id": r.option_id}));
    run.status = "active".into();
    run.decision = None;
    run.asked = false;
    if conv.human_owned() {
        let mut state = conv.state.clone();
        state["routine"] = serde_json::to_value(&run)?;
        let now = rfc3339(app.clock.now());
        app.db.write(|tx| {
            if !store::resolve_decision(tx, handle, &r.option_id, by.as_deref(), &now)?
                || !conversations::set_state_if(tx, &conv.id, &conv.state, &state, &now)?
            {
                return Err(code(
                    ErrorCode::Conflict,
                    "concurrent_resolution",
                    "the conversation changed meanwhile; try again",
                ));
            }
            Ok(())
        })?;
        app.bus.publish(&ws.0, Some(&conv.id), BusKind::InboxChanged);
        return Ok(Resolved { decision: d, option_id: r.option_id, resumed: false, message_id: None });
    }
    let input = TurnInput {
        workspace: ws.clone(),
        conversation_id: conv.id.clone(),
        agent,
        message: String::new(),
        filter: None,
        request_id: None,
        surface: match conv.channel {
            Channel::Test => Surface::Test,
            Channel::AnonymousLink | Channel::WebsiteEmbed => Surface::Public,
            Channel::Api | Channel::Mcp => Surface::Chat,
            Channel::Whatsapp => Surface::Whatsapp,
        },
        turn_id: crate::ids::new_id(),
        include_debug: false,
        actor: actor.clone(),
        context_scope: Default::default(),
        test_values: Vec::new(),
        invocation: None,
    };
    let a = runtime::resume(app, &input, &snap, run, conv.state.clone())?;
    crate::jobs::crash_point("decision.before_commit");
    let now = rfc3339(app.clock.now());
    let report = crate::turn::api::routine(&a.report);
    let mid = app.db.write(|tx| {
        if !store::resolve_decision(tx, handle, &r.option_id, by.as_deref(), &now)?
            || !conversations::set_state_if(tx, &conv.id, &conv.state, &a.state, &now)?
        {
            return Err(code(ErrorCode::Conflict, "concurrent_resolution", "the conversation changed meanwhile; try again"));
        }
        let mid = if a.text.is_empty() {
            None
        } else {
            let m = conversations::append_message(
                tx,
                &ws.0,
                &NewMessage {
                    conversation_id: &conv.id,
                    role: Role::Assistant,
                    source: Source::Agent,
                    content: &a.text,
                    citations: json!([]),
                    metadata: json!({"turnId": input.turn_id, "routine": report, "resumedBy": {"decision": handle, "option": r.option_id}}),
                    trace_id: None,
                    request_id: None,
                },
                &now,
            )?;
            Some(m.id)
        };
        a.effects.apply(app, tx, &input, &now)?;
        let meta = json!({"handle": handle, "optionId": r.option_id, "conversationId": conv.id});
        crate::audit::record(
            tx,
            &now,
            &actor,
            crate::audit::Event::new("routine.decision.resolved").workspace(&ws).target("decision", handle).meta(meta),
        )?;
        Ok(mid)
    })?;
    app.bus.publish(&ws.0, Some(&conv.id), BusKind::MessageCreated);
    app.bus.publish(&ws.0, Some(&conv.id), BusKind::InboxChanged);
    Ok(Resolved { decision: d, option_id: r.option_id, resumed: true, message_id: mid })
}

fn commit_flip_only(app: &App, by: Option<String>, d: Decision, option: &str) -> Result<Resolved> {
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        if !store::resolve_decision(tx, &d.handle, option, by.as_deref(), &now)? {
            return Err(code(ErrorCode::Conflict, "concurrent_resolution", "someone else decided first"));
        }
        Ok(())
    })?;
    app.bus.publish(&d.workspace_id, Some(&d.conversation_id), BusKind::InboxChanged);
    Ok(Resolved { decision: d, option_id: option.to_string(), resumed: false, message_id: None })
}
