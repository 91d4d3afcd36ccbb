//! The answer turn: a visitor's message in, the agent's reply out, with citations, an honest
//! coverage assessment and a trace.
//!
//! Stages, in order (each traced): save the message → ownership gate (a human-owned conversation
//! saves the message and runs nothing else) → routine pass (the seam for routines) →
//! interpretation (`retrieval` or `direct`) → directive matching → retrieval → skill selection
//! and the binding winner → compose → coverage assessment → persist (reply, trace, ownership
//! change and `handoff.notify` job in one transaction).
//!
//! A turn runs on a blocking thread. One turn per conversation runs at a time; a newer message
//! cancels a turn that has not streamed or started persisting (`supersede`).

use crate::agents::config as agent;
pub mod answer;
pub mod api;
pub mod compose;
pub mod context;
pub mod interpret;
pub mod kinds;
pub mod markers;
pub mod retrieval;
pub mod routine;
mod stages;
pub mod steering;
mod store;
pub mod supersede;
pub mod test_exec;
pub mod trace;
mod transcript;

use std::sync::Arc;

use serde_json::{Value, json};

use crate::app::App;
use crate::audit::Actor;
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::conversations::{self, Channel, NewConversation, OwnershipState, TurnFailure, Visibility};
use crate::error::{Error, ErrorCode, Result};
use crate::ids::WorkspaceId;
use crate::models::extractive::{Citation, Segment};
use crate::search::filter::{self, Filter};
use agent::AgentConfig;
use compose::Suggestion;
use kinds::{Availability, Outcome, Phase, Progress};
pub(crate) use stages::{TurnModels, as_model};
use trace::Grounding;

pub use crate::delivery::notices::HANDOFF_JOB;
pub const MAX_MESSAGE_CHARS: usize = 20_000;
/// Messages of history a turn reads.
const HISTORY: usize = 10;

/// Where a turn came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// A visitor conversation (REST chat).
    Chat,
    /// A private test execution: no handoffs or outward effects, never in visitor history or the
    /// quality report.
    Test,
    /// An anonymous visitor through the public link or the website widget.
    Public,
    /// A customer on WhatsApp (the `whatsapp` connector), the turn run by a queue job.
    Whatsapp,
}

impl Surface {
    pub fn as_str(self) -> &'static str {
        match self {
            Surface::Chat => "chat",
            Surface::Test => "test",
            Surface::Public => "public",
            Surface::Whatsapp => "whatsapp",
        }
    }
}

/// Where streamed events go.
pub trait Events: Send {
    fn status(&mut self, progress: Progress);
    fn chunk(&mut self, text: &str);
}

/// Events nobody listens to (non-streaming turns).
pub struct Silent;
impl Events for Silent {
    fn status(&mut self, _: Progress) {}
    fn chunk(&mut self, _: &str) {}
}

/// The coverage assessment of a reply.
#[derive(Debug, Clone)]
pub struct AnswerCoverage {
    pub availability: Availability,
    pub coverage: Option<String>,
    pub reason: Option<String>,
    pub originating_turn_id: String,
    pub originating_request_id: Option<String>,
}

/// One reply, whatever the surface. `api::envelope` and `api::rest` are its two wire shapes.
#[derive(Debug, Clone)]
pub struct Reply {
    pub conversation_id: Option<String>,
    pub message_id: Option<String>,
    pub user_message_id: Option<String>,
    pub agent_id: Option<String>,
    pub revision_id: Option<String>,
    pub text: String,
    pub citations: Vec<Citation>,
    pub segments: Vec<Segment>,
    pub coverage: AnswerCoverage,
    pub ownership_state: OwnershipState,
    pub suppressed: bool,
    pub trace_id: String,
    pub suggestions: Vec<Suggestion>,
    pub outcome: Outcome,
    pub grounding: Option<Grounding>,
    /// The reply's diagnostics (route, strategy, composer, timings): free-form JSON.
    pub diagnostics: TraceJson,
    /// The turn's trace, when debug was asked for.
    pub trace: Option<TraceJson>,
    /// Where the routine the turn touched stands.
    pub routine: Option<routine::RoutineReport>,
    /// On a routine tool call: the tool and how the call went.
    pub invocation: Option<routine::InvocationReport>,
    /// The chunks the answer was composed from, best first (empty off the retrieval route).
    pub retrieved: Vec<crate::search::query::Hit>,
    /// The composing model's tokens (zero without a model call).
    pub usage: crate::models::chat::Usage,
}

/// Trace outputs and diagnostics: free-form JSON (ids, counts, decisions, timings).
pub type TraceJson = Value;

/// Why a turn produced no reply.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// A newer message for the conversation replaced this turn at `stage`.
    #[error("a newer message for this conversation replaced this one")]
    Superseded { conversation_id: String, stage: Phase },
    #[error(transparent)]
    Failed(#[from] Error),
}

impl From<TurnError> for Error {
    fn from(e: TurnError) -> Error {
        match e {
            TurnError::Superseded { conversation_id, stage } => superseded_error(&conversation_id, stage),
            TurnError::Failed(e) => e,
        }
    }
}

/// Everything a turn needs.
pub struct TurnInput {
    pub workspace: WorkspaceId,
    pub conversation_id: String,
    pub agent: AgentConfig,
    pub message: String,
    pub filter: Option<Filter>,
    pub request_id: Option<String>,
    pub surface: Surface,
    /// The turn's id (its trace id).
    pub turn_id: String,
    pub include_debug: bool,
    pub actor: Actor,
    /// Who the turn is about, for session- and customer-scoped context values.
    pub context_scope: context::ContextScope,
    /// A test execution's frozen values (variable id → value), in place of stored ones.
    pub test_values: Vec<(String, Value)>,
    /// A routine tool call (converse): the routine to start instead of reading the message.
    pub invocation: Option<routine::Invocation>,
}

impl TurnInput {
    /// This turn as the caller of a skill (`skills::run`); `key` makes its deliveries idempotent.
    pub fn skill_call<'a>(&'a self, key: &'a str) -> crate::skills::Call<'a> {
        crate::skills::Call {
            workspace: &self.workspace,
            agent: &self.agent,
            conversation_id: Some(&self.conversation_id),
            message: &self.message,
            simulate: self.surface == Surface::Test,
            key,
        }
    }
}

/// The error a superseded turn answers with.
pub fn superseded_error(conversation_id: &str, stage: Phase) -> Error {
    Error::new(ErrorCode::ChatTurnSuperseded, "a newer message for this conversation replaced this one")
        .with_details(json!({"conversationId": conversation_id, "reason": "superseded", "stage": stage}))
}

/// Marks the user message of a turn that did not finish (superseded or failed), for the
/// dashboard.
pub fn mark_failed(app: &App, conversation_id: &str, turn_id: &str, failure: TurnFailure, stage: Phase) {
    let r = app.db.write(|tx| conversations::mark_turn_failed(tx, conversation_id, turn_id, failure, stage.as_str()));
    if let Err(e) = r {
        tracing::warn!(error = %e, "could not mark the interrupted turn");
    }
}

// ---- the REST chat entry ----

/// A chat turn as a client asks for it (the REST body, checked at the edge into this).
#[derive(Debug, Clone, Default)]
pub struct ChatCommand {
    pub message: String,
    pub conversation_id: Option<String>,
    pub metadata_filter: Option<filter::FilterJson>,
    pub include_debug: bool,
    pub context_scope: context::ContextScope,
}

/// Checks a `contextScope` id: trimmed, empty is none, at most 200 characters.
pub fn scope_id(field: &str, v: Option<&str>) -> Result<Option<String>> {
    match v.map(str::trim) {
        None | Some("") => Ok(None),
        Some(s) if s.chars().count() <= 200 => Ok(Some(s.to_string())),
        Some(_) => Err(Error::invalid_field(field, format!("{field} must be at most 200 characters"))),
    }
}

pub fn check_message(m: &str) -> Result<String> {
    let t = m.trim();
    if t.is_empty() {
        return Err(Error::invalid_field("message", "message must not be empty"));
    }
    if t.chars().count() > MAX_MESSAGE_CHARS {
        return Err(Error::invalid_field("message", format!("message must be at most {MAX_MESSAGE_CHARS} characters")));
    }
    Ok(t.to_string())
}

pub fn parse_filter(v: Option<&filter::FilterJson>) -> Result<Option<Filter>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(f) => filter::parse(f).map(Some),
    }
}

/// Resolves the agent and the conversation of a REST chat turn (creating the conversation,
/// pinned to the agent's published revision, when none is given).
pub fn prepare_chat(app: &App, p: &Principal, agent_id: Option<&str>, body: ChatCommand) -> Result<TurnInput> {
    p.require(Perm::Chat)?;
    let message = check_message(&body.message)?;
    let filter = parse_filter(body.metadata_filter.as_ref())?;
    let context_scope = body.context_scope;
    let ws = p.workspace_id.clone();
    let started_by = p.user_id.as_ref().map(|u| u.0.clone()).or_else(|| p.credential_id.clone());
    let (cid, agent) = app.db.write(|tx| {
        let now = rfc3339(app.clock.now());
        match &body.conversation_id {
            Some(cid) => {
                let agent_row = match agent_id {
                    Some(id) => crate::agents::get_in(tx, &ws, id)?,
                    None => crate::agents::ensure_default_agent(tx, &ws, &now)?,
                };
                let conv = conversations::find_in(tx, &ws.0, cid, false)?;
                if conv.agent_id != agent_row.id {
                    return Err(Error::not_found("conversation"));
                }
                let agent = match &conv.revision_id {
                    Some(rid) => agent::revision(tx, &agent_row.id, rid)?,
                    None => agent::published(tx, &ws, &agent_row.id)?,
                };
                Ok((conv.id, agent))
            }
            None => {
                // the agent and its published revision in one statement
                let (agent_row, agent) = agent::agent_published(tx, &ws, agent_id, &now)?;
                let cid = conversations::start(
                    tx,
                    &NewConversation {
                        workspace_id: &ws.0,
                        agent_id: &agent_row.id,
                        revision_id: agent.revision_id.as_deref(),
                        channel: Channel::Api,
                        visibility: Visibility::Visitor,
                        test_execution_id: None,
                        started_by: started_by.as_deref(),
                        public_session_id: None,
                    },
                    &now,
                )?;
                Ok((cid, agent))
            }
        }
    })?;
    Ok(TurnInput {
        workspace: ws,
        conversation_id: cid,
        agent,
        message,
        filter,
        request_id: None,
        surface: Surface::Chat,
        turn_id: crate::ids::new_id(),
        include_debug: body.include_debug,
        actor: Actor::system(),
        context_scope,
        test_values: Vec::new(),
        invocation: None,
    })
}

/// What a streamed turn emits.
#[derive(Debug)]
pub enum StreamEvent {
    Status(Progress),
    Chunk(String),
    Done(Box<Reply>),
    Cancelled { conversation_id: String, stage: Phase },
    Failed(Error),
}

/// Events sent down a channel to a streaming response.
pub struct ChannelEvents(pub tokio::sync::mpsc::UnboundedSender<StreamEvent>);

impl Events for ChannelEvents {
    fn status(&mut self, progress: Progress) {
        let _ = self.0.send(StreamEvent::Status(progress));
    }
    fn chunk(&mut self, text: &str) {
        let _ = self.0.send(StreamEvent::Chunk(text.to_string()));
    }
}

/// Runs a prepared turn in its conversation's order: waits for (or supersedes) earlier turns,
/// runs the pipeline on a blocking thread, and answers 409 `chat_turn_superseded` as soon as a
/// newer message takes over. With `events`, the turn streams.
pub async fn execute(
    app: Arc<App>,
    input: TurnInput,
    events: Option<tokio::sync::mpsc::UnboundedSender<StreamEvent>>,
) -> Result<Reply, TurnError> {
    let cid = input.conversation_id.clone();
    let turn_id = input.turn_id.clone();
    let (ws, is_test) = (input.workspace.0.clone(), input.surface == Surface::Test);
    let superseded = |stage| TurnError::Superseded { conversation_id: cid.clone(), stage };
    let guard = match app.turns.enter(&cid).await {
        Ok(g) => g,
        Err(s) => return Err(superseded(s.stage)),
    };
    let slot = guard.slot.clone();
    let task = {
        let app = app.clone();
        let slot = slot.clone();
        tokio::task::spawn_blocking(move || match events {
            Some(tx) => stages::run(&app, &input, &slot, &mut ChannelEvents(tx), true, true),
            None => stages::run(&app, &input, &slot, &mut Silent, false, true),
        })
    };
    let result = tokio::select! {
        r = task => r.map_err(|e| Error::internal_msg(format!("turn task failed: {e}")))?,
        _ = slot.cancelled() => Err(superseded(slot.check().err().map(|s| s.stage).unwrap_or(Phase::Rendering))),
    };
    drop(guard);
    if let Err(e) = &result {
        let (failure, stage) = match e {
            TurnError::Superseded { stage, .. } => (TurnFailure::Cancelled, *stage),
            TurnError::Failed(_) => (TurnFailure::Failed, slot.current_stage()),
        };
        let app2 = app.clone();
        let (cid, turn_id) = (cid.clone(), turn_id.clone());
        let _ = tokio::task::spawn_blocking(move || mark_failed(&app2, &cid, &turn_id, failure, stage)).await;
    }
    if let Ok(reply) = &result
        && !is_test
    {
        app.bus.publish(&ws, Some(&cid), crate::bus::BusKind::MessageCreated);
        if reply.ownership_state == OwnershipState::HumanOwned {
            app.bus.publish(&ws, Some(&cid), crate::bus::BusKind::OwnershipChanged);
        }
        // a routine that now waits for a decision puts an approval in the Inbox
        if reply.routine.as_ref().is_some_and(|r| r.status == "waiting_for_approval") {
            app.bus.publish(&ws, Some(&cid), crate::bus::BusKind::InboxChanged);
        }
    }
    result
}

/// Reserves a turn's usage (a test turn is a test run; every other turn a reply in its
/// conversation): 429 `usage_limit_exceeded` when the account's limit has no room.
fn reserve<'a>(app: &'a App, input: &TurnInput) -> Result<crate::usage::limits::Hold<'a>> {
    use crate::usage::limits::{AnswerKind, AnswerWork};
    let kind = if input.surface == Surface::Test { AnswerKind::TestRun } else { AnswerKind::Conversation };
    let work = AnswerWork {
        workspace: &input.workspace.0,
        agent: &input.agent.agent_id,
        conversation: Some(&input.conversation_id),
        kind,
    };
    crate::usage::limits::reserve_answer(app, &work)
}

/// Runs a prepared turn here, on this (blocking) thread, without streaming and outside the
/// per-conversation order: for a conversation only its caller writes to (an eval replay's test
/// conversation). Does nothing that a test conversation does not do. Its usage is not metered
/// here: the caller holds the reservation of the whole run (an eval run).
pub fn run_detached(app: &App, input: &TurnInput) -> Result<Reply, TurnError> {
    let slot = supersede::Slot::detached();
    stages::run(app, input, &slot, &mut Silent, false, false)
}

/// Runs a prepared turn here, on this (blocking) thread, metered like any turn: for a queue job
/// that is the only writer of turns to its conversation (a WhatsApp batch; the connector runs one
/// batch per customer at a time), so no per-conversation order is needed. The caller publishes
/// on the bus.
pub fn run_queued(app: &App, input: &TurnInput) -> Result<Reply, TurnError> {
    let slot = supersede::Slot::detached();
    stages::run(app, input, &slot, &mut Silent, false, true)
}

/// What retrieval alone finds for `question` after `history`, as `agent`'s turn would run it:
/// nothing when the turn would not take the retrieval route.
pub struct Replayed {
    pub hits: Vec<crate::search::query::Hit>,
    pub retrieval_invoked: bool,
    pub settings: retrieval::Settings,
}

/// Retrieval for an eval replay: the turn's route, models and settings, no answer composed.
pub fn replay_retrieval(
    app: &App,
    ws: &WorkspaceId,
    agent: &AgentConfig,
    question: &str,
    history: &[(String, String)],
) -> Result<Replayed> {
    let settings = retrieval::Settings::for_agent(agent);
    // the turn reads the last HISTORY messages before the question
    let history = &history[history.len().saturating_sub(HISTORY)..];
    let route = interpret::route(question, history.len(), agent.settings.retrieval_enabled);
    if route.kind != kinds::RouteKind::Retrieval {
        return Ok(Replayed { hits: vec![], retrieval_invoked: false, settings });
    }
    let models = stages::TurnModels::resolve(app, ws, agent)?;
    let cancel = crate::models::chat::Cancel::new();
    let r = retrieval::run(app, ws, &settings, &models.helpers, question, history, None, &cancel)?;
    Ok(Replayed { hits: r.hits, retrieval_invoked: true, settings })
}
