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

pub mod agent;
pub mod answer;
pub mod compose;
pub mod context;
pub mod interpret;
pub mod retrieval;
pub mod steering;
pub mod supersede;
pub mod test_exec;
pub mod trace;

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};

use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::conversations::{self, NewMessage, store as conv_store};
use crate::error::{Error, ErrorCode, Result};
use crate::ids::WorkspaceId;
use crate::jobs::{self, NewJob};
use crate::models::chat::ChatModel;
use crate::models::extractive::{Citation, Segment};
use crate::models::resolve::{self, Resolved, Slot as ModelSlot};
use crate::search::filter::{self, Filter};
use agent::AgentConfig;
use compose::{Composed, Suggestion};
use supersede::{Slot, Superseded};
use trace::{Grounding, TraceBuilder, TurnRecord};

/// The job that tells a person a conversation needs them.
pub const HANDOFF_JOB: &str = "handoff.notify";
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
}

impl Surface {
    fn as_str(self) -> &'static str {
        match self {
            Surface::Chat => "chat",
            Surface::Test => "test",
        }
    }
}

/// Where streamed events go.
pub trait Events: Send {
    fn status(&mut self, stage: &'static str);
    fn chunk(&mut self, text: &str);
}

/// Events nobody listens to (non-streaming turns).
pub struct Silent;
impl Events for Silent {
    fn status(&mut self, _: &'static str) {}
    fn chunk(&mut self, _: &str) {}
}

/// The coverage assessment of a reply, as the envelope carries it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerCoverage {
    pub availability: &'static str,
    pub coverage: Option<String>,
    pub reason: Option<String>,
    pub originating_turn_id: String,
    pub originating_request_id: Option<String>,
}

/// One reply, whatever the surface. [`Reply::envelope`] and [`Reply::rest`] are its two wire
/// shapes.
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
    pub ownership_state: String,
    pub suppressed: bool,
    pub trace_id: String,
    pub suggestions: Vec<Suggestion>,
    pub outcome: &'static str,
    pub grounding: Option<Grounding>,
    pub diagnostics: Value,
    pub trace: Option<Value>,
}

impl Reply {
    /// The agent reply envelope (converse, MCP): `answer` is `{text, citations}`.
    pub fn envelope(&self) -> Value {
        json!({
            "conversationId": self.conversation_id,
            "answer": {"text": self.text, "citations": self.citations},
            "answerCoverage": self.coverage,
            "ownership": {"state": self.ownership_state, "suppressed": self.suppressed},
            "traceId": self.trace_id,
        })
    }

    /// The REST chat shape: the envelope's fields with `answer` as the string and `citations`
    /// beside it, plus the message id, segments, suggestions and diagnostics (and the trace when
    /// debug was asked for).
    pub fn rest(&self) -> Value {
        let mut v = json!({
            "conversationId": self.conversation_id,
            "messageId": self.message_id,
            "agentId": self.agent_id,
            "answer": self.text,
            "citations": self.citations,
            "answerSegments": self.segments,
            "answerCoverage": self.coverage,
            "ownership": {"state": self.ownership_state, "suppressed": self.suppressed},
            "traceId": self.trace_id,
            "suggestions": self.suggestions,
            "diagnostics": self.diagnostics,
        });
        if let Some(t) = &self.trace {
            v["debug"] = json!({"turnTrace": t});
        }
        v
    }
}

/// The models one turn may call.
///
/// A local GGUF model that serves only because nothing is configured (the `default` source)
/// composes answers, declines and waiting lines, but the structured side calls (rewrite, search
/// plan, rerank, directive matching, suggestions) use the built-in methods: a model that small does
/// not return reliable JSON, and each extra call costs seconds on a CPU. Configure a slot
/// explicitly to use any model for them.
struct TurnModels {
    /// Composes the answer: the agent's override, else the workspace/environment chat model.
    chat: Resolved,
    /// The workspace chat model (no agent override): no-context decline, waiting line.
    workspace_chat: Resolved,
    /// Judges contextual directives: the workspace chat model unless it serves only by default.
    matcher: Resolved,
    /// Writes follow-up suggestions: the answer's model unless it serves only by default.
    suggest: Resolved,
    helpers: retrieval::Helpers,
}

fn as_model(r: &Resolved) -> Option<&dyn ChatModel> {
    match r {
        Resolved::Model(m) => Some(m.as_ref()),
        Resolved::Builtin => None,
    }
}

impl TurnModels {
    fn resolve(app: &App, ws: &WorkspaceId, agent: &AgentConfig) -> Result<TurnModels> {
        let choice = agent
            .settings
            .chat_model_override
            .as_ref()
            .map(|m| crate::settings::llm_models::Choice { provider: m.provider.clone(), model: m.model.clone() });
        let (chat_sel, chat) = resolve::resolve(app, ws, ModelSlot::Chat, choice.as_ref())?;
        let slot = |slot: ModelSlot| match resolve::resolve(app, ws, slot, None) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::warn!(slot = slot.as_str(), error = %e.message, "model slot unusable; using the built-in method");
                None
            }
        };
        // structured side calls only go to models someone chose
        let chosen = |r: Option<(resolve::Selection, Resolved)>| match r {
            Some((sel, m)) if sel.source != "default" => m,
            _ => Resolved::Builtin,
        };
        let workspace = if choice.is_some() { slot(ModelSlot::Chat) } else { Some((chat_sel.clone(), chat.clone())) };
        Ok(TurnModels {
            workspace_chat: workspace.as_ref().map(|w| w.1.clone()).unwrap_or(Resolved::Builtin),
            matcher: chosen(workspace),
            suggest: chosen(Some((chat_sel, chat.clone()))),
            chat,
            helpers: retrieval::Helpers {
                rewrite: chosen(slot(ModelSlot::Rewrite)),
                rerank: chosen(slot(ModelSlot::Rerank)),
            },
        })
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
}

/// The error a superseded turn answers with.
pub fn superseded_error(conversation_id: &str, stage: &str) -> Error {
    Error::new(ErrorCode::ChatTurnSuperseded, "a newer message for this conversation replaced this one")
        .with_details(json!({"conversationId": conversation_id, "reason": "superseded", "stage": stage}))
}

/// Passes answer text to the event stream; the first chunk of a streaming turn pins it (it can no
/// longer be superseded).
struct StreamSink<'a> {
    slot: &'a Slot,
    events: &'a mut dyn Events,
    streaming: bool,
    pinned: bool,
}

impl compose::Sink for StreamSink<'_> {
    fn chunk(&mut self, text: &str) -> bool {
        if !self.streaming {
            return self.slot.check().is_ok();
        }
        if !self.pinned {
            if self.slot.pin().is_err() {
                return false;
            }
            self.pinned = true;
        }
        self.events.chunk(text);
        true
    }
}

fn history_pairs(msgs: &[conversations::Message]) -> Vec<(String, String)> {
    msgs.iter().filter(|m| !m.content.trim().is_empty()).map(|m| (m.role.clone(), m.content.clone())).collect()
}

/// Runs one turn. `streaming` says whether `events` reaches a client (then the first chunk pins
/// the turn).
pub fn run(app: &App, input: TurnInput, slot: &Slot, events: &mut dyn Events, streaming: bool) -> Result<Reply> {
    let cid = input.conversation_id.clone();
    let sup = |s: Superseded| superseded_error(&cid, s.stage);
    let ws = input.workspace.clone();
    let agent = &input.agent;
    let mut tr = TraceBuilder::new(app);
    tr.trace_id = input.turn_id.clone();
    slot.stage("preparing").map_err(sup)?;

    // the message is saved first, whatever happens next
    let source = if input.surface == Surface::Test { "tester" } else { "visitor" };
    let (conv, user_msg, history) = app.db.write(|tx| {
        let now = rfc3339(app.clock.now());
        let conv = conversations::find_in(tx, &ws.0, &cid, true)?;
        let history = conv_store::last_messages(tx, &cid, HISTORY)?;
        let m = conv_store::append(
            tx,
            &ws.0,
            &NewMessage {
                conversation_id: &cid,
                role: "user",
                source,
                content: &input.message,
                citations: json!([]),
                metadata: json!({"turnId": input.turn_id}),
                trace_id: None,
                request_id: input.request_id.as_deref(),
            },
            &now,
        )?;
        Ok((conv, m, history))
    })?;
    let history = history_pairs(&history);
    tr.stage(
        app,
        "message",
        "applied",
        json!({"messageId": user_msg.id, "seq": user_msg.seq, "contentLength": input.message.chars().count()}),
    );
    tr.stage(
        app,
        "gather",
        "applied",
        json!({"historyCount": history.len(), "revisionId": agent.revision_id, "revisionVersion": agent.version}),
    );

    let base = Reply {
        conversation_id: Some(cid.clone()),
        message_id: None,
        user_message_id: Some(user_msg.id.clone()),
        agent_id: Some(agent.agent_id.clone()),
        revision_id: agent.revision_id.clone(),
        text: String::new(),
        citations: vec![],
        segments: vec![],
        coverage: AnswerCoverage {
            availability: "not_recorded",
            coverage: None,
            reason: None,
            originating_turn_id: input.turn_id.clone(),
            originating_request_id: input.request_id.clone(),
        },
        ownership_state: conv.ownership.state.clone(),
        suppressed: false,
        trace_id: input.turn_id.clone(),
        suggestions: vec![],
        outcome: "direct",
        grounding: None,
        diagnostics: Value::Null,
        trace: None,
    };

    // ownership gate: a person owns the conversation; the AI does nothing but (before the first
    // operator reply) a short waiting line
    if conv.human_owned() {
        return suppressed(app, &input, slot, events, streaming, base, tr, conv.operator_replied);
    }
    tr.stage(app, "routine_pass", "skipped", json!({"reason": "no_routines"}));

    slot.stage("routing").map_err(sup)?;
    events.status("interpreting");
    let models = TurnModels::resolve(app, &ws, agent)?;
    let route = interpret::route(&input.message, history.len(), agent.settings.retrieval_enabled);
    tr.stage(
        app,
        "turn_interpretation",
        "applied",
        json!({"route": route.kind, "reason": route.reason, "retrievalEnabled": agent.settings.retrieval_enabled}),
    );

    let steering = steering::match_directives(app, agent, &input.message, route.kind, &models.matcher, &slot.cancel);
    tr.stage(app, "directive_steering", "applied", steering.trace.clone());
    slot.check().map_err(sup)?;

    let settings = retrieval::Settings::for_agent(agent);
    let mut hits = Vec::new();
    let retrieval_invoked = route.kind == "retrieval";
    if retrieval_invoked {
        events.status("searching");
        let r = retrieval::run(
            app,
            &ws,
            &settings,
            &models.helpers,
            &input.message,
            &history,
            input.filter.as_ref(),
            &slot.cancel,
        )?;
        hits = r.hits;
        tr.stage(app, "retrieval_fanout", "applied", r.trace);
    } else {
        tr.stage(app, "retrieval_fanout", "skipped", json!({"reason": route.reason}));
    }

    let turn_context = context::TurnContext::resolve(app, &ws, agent, &input.context_scope, &input.test_values)?;
    // the authored text of this turn: what `on_reference` variables must be referenced in
    let authored: Vec<&str> = std::iter::once(agent.settings.custom_instruction.as_str())
        .chain(steering.matched.iter().map(|m| m.directive.body.action.as_str()))
        .collect();
    let context_block = turn_context.prompt_block(&authored);
    let status = if agent.context_variables.is_empty() { "skipped" } else { "applied" };
    tr.stage(app, "context_variables", status, turn_context.trace(&authored));

    let selection = steering::select_binding(agent, &steering.matched, route.kind);
    let mut lookup = Value::Null;
    if let Some((directive_id, skill_name, cap)) = &selection.winner
        && cap == "retrieve"
        && let Some(skill) = agent.skill(skill_name)
    {
        // a bound retrieve skill is staged as a directive-scoped lookup
        let s = settings.for_skill(&skill.config);
        let r = retrieval::run(
            app,
            &ws,
            &s,
            &models.helpers,
            &input.message,
            &history,
            input.filter.as_ref(),
            &slot.cancel,
        )?;
        lookup = json!({"directiveId": directive_id, "skillName": skill_name, "results": r.hits.len(),
                        "candidates": r.hits.iter().map(|h| h.chunk_id.clone()).collect::<Vec<_>>()});
        hits = retrieval::merge(vec![r.hits, hits], retrieval::FINAL_CONTEXT);
    }
    let mut sel_trace = selection.trace.clone();
    sel_trace["lookup"] = lookup;
    tr.stage(app, "skill_selection", "applied", sel_trace);
    slot.check().map_err(sup)?;

    slot.stage("rendering").map_err(sup)?;
    events.status("composing");
    let mut sink = StreamSink { slot, events, streaming, pinned: false };
    let cancel = slot.cancel.clone();
    let composed: Option<Composed> = if route.kind == "direct" {
        compose::direct(
            as_model(&models.chat),
            agent,
            &steering.matched,
            &context_block,
            route.reason,
            &input.message,
            &history,
            &mut sink,
            &cancel,
        )
        .map_err(compose::llm_error)?
    } else if hits.is_empty() {
        compose::decline(as_model(&models.workspace_chat), &input.message, &mut sink, &cancel)
    } else {
        match &models.chat {
            Resolved::Builtin => compose::builtin_grounded(&input.message, &hits, &mut sink),
            Resolved::Model(m) => compose::model_grounded(
                m.as_ref(),
                agent,
                &steering.matched,
                &steering.gated,
                &context_block,
                &input.message,
                &history,
                &hits,
                &mut sink,
                &cancel,
            )
            .map_err(compose::llm_error)?,
        }
    };
    let Some(composed) = composed else {
        return Err(sup(slot.check().err().unwrap_or(Superseded { stage: "rendering" })));
    };
    let pinned = sink.pinned;
    tr.stage(
        app,
        "compose",
        "applied",
        json!({"provider": composed.provider, "model": composed.model, "outcome": composed.outcome, "answerLength": composed.text.chars().count(),
               "usage": composed.usage, "citations": composed.citations.iter().map(|c| c.chunk_id.clone()).collect::<Vec<_>>(),
               "contextChunks": hits.iter().map(|h| h.chunk_id.clone()).collect::<Vec<_>>()}),
    );

    let (availability, coverage, reason) = match &composed.coverage {
        Some((c, r)) if route.kind == "retrieval" => ("assessed", Some(c.clone()), Some(r.clone())),
        _ => ("not_recorded", None, None),
    };
    let gated = steering::coverage_gated(&steering.gated, coverage.as_deref(), reason.as_deref());
    tr.stage(
        app,
        "coverage_assessment",
        if availability == "assessed" { "applied" } else { "skipped" },
        json!({"availability": availability, "coverage": coverage, "reason": reason, "outcome": composed.outcome,
               "grounding": composed.grounding, "coverageDirectivesMatched": gated.iter().map(|d| d.id.clone()).collect::<Vec<_>>()}),
    );

    let suggestions =
        if matches!(composed.outcome, "grounded" | "grounded_degraded") && settings.suggested_questions_enabled {
            compose::suggestions(
                as_model(&models.suggest),
                &input.message,
                &composed,
                &hits,
                settings.suggested_questions_count,
                &cancel,
            )
        } else {
            vec![]
        };
    let handoff =
        input.surface == Surface::Chat && composed.outcome == "no_context" && agent.settings.handoff_on_retrieval_miss;

    slot.stage("persisting").map_err(sup)?;
    slot.pin().map_err(sup)?;
    tr.stage(
        app,
        "persist",
        "applied",
        json!({"handoff": handoff, "suggestions": suggestions.len(), "streamed": pinned}),
    );
    let mut diagnostics = json!({
        "route": route.kind, "routeReason": route.reason, "retrievalInvoked": retrieval_invoked,
        "retrievalStrategy": if retrieval_invoked { Some(settings.effective_strategy(&input.message)) } else { None },
        "retrievedChunks": hits.len(), "composer": {"provider": composed.provider, "model": composed.model},
        "outcome": composed.outcome, "grounding": composed.grounding, "handoff": handoff,
        "revision": {"id": agent.revision_id, "version": agent.version},
    });
    let mut trace_json = tr.finish(app);
    trace_json["outcome"] = json!(composed.outcome);
    let coverage_view =
        AnswerCoverage { availability, coverage: coverage.clone(), reason: reason.clone(), ..base.coverage.clone() };
    let (message_id, ownership_state) = app.db.write(|tx| {
        let now = rfc3339(app.clock.now());
        let m = conv_store::append(
            tx,
            &ws.0,
            &NewMessage {
                conversation_id: &cid,
                role: "assistant",
                source: "agent",
                content: &composed.text,
                citations: json!(composed.citations),
                metadata: json!({"answerCoverage": coverage_view, "segments": composed.segments, "suggestions": suggestions,
                                 "outcome": composed.outcome, "turnId": input.turn_id, "grounding": composed.grounding}),
                trace_id: Some(&input.turn_id),
                request_id: input.request_id.as_deref(),
            },
            &now,
        )?;
        let mut state = conversations::AI_OWNED.to_string();
        if handoff {
            let version = conv_store::set_ownership(tx, &cid, conversations::HUMAN_OWNED, Some("retrieval_miss"), &now)?;
            state = conversations::HUMAN_OWNED.to_string();
            let payload = handoff_payload(app, &ws, &agent.agent_id, &cid, input.request_id.as_deref());
            jobs::enqueue_tx(tx, app.clock.now_ms(), app.jobs.default_max_attempts(), &NewJob::new(HANDOFF_JOB, payload).workspace(&ws.0).dedupe(format!("handoff:{cid}:{version}")))?;
            audit::record(
                tx,
                &now,
                &input.actor,
                Event::new("hitl.ownership").workspace(&ws).target("conversation", &cid).meta(json!({"action": "handoff_requested", "reason": "retrieval_miss", "version": version})),
            )?;
        }
        trace::insert(
            tx,
            &TurnRecord {
                trace_id: &input.turn_id,
                workspace_id: &ws.0,
                conversation_id: Some(&cid),
                agent_id: Some(&agent.agent_id),
                revision_id: agent.revision_id.as_deref(),
                user_message_id: Some(&user_msg.id),
                message_id: Some(&m.id),
                request_id: input.request_id.as_deref(),
                surface: input.surface.as_str(),
                route: Some(route.kind),
                outcome: composed.outcome,
                availability,
                coverage: coverage.as_deref(),
                reason: reason.as_deref(),
                grounding: composed.grounding,
                trace: &trace_json,
            },
            &now,
        )?;
        Ok((m.id, state))
    })?;
    if handoff {
        app.jobs.wake();
    }
    // the whole turn on the server, persisting included
    diagnostics["durationMs"] = json!((tr.elapsed_ms() * 1000.0).round() / 1000.0);
    Ok(Reply {
        message_id: Some(message_id),
        text: composed.text,
        citations: composed.citations,
        segments: composed.segments,
        coverage: coverage_view,
        ownership_state,
        suggestions,
        outcome: composed.outcome,
        grounding: composed.grounding,
        diagnostics,
        trace: input.include_debug.then_some(trace_json),
        ..base
    })
}

/// The `handoff.notify` payload of a retrieval-miss handoff (spec: handoff notice).
fn handoff_payload(
    app: &App,
    ws: &WorkspaceId,
    agent_id: &str,
    conversation_id: &str,
    request_id: Option<&str>,
) -> Value {
    let dashboard =
        app.config.public_url.as_ref().map(|u| format!("{}/conversations/{conversation_id}", u.trim_end_matches('/')));
    json!({
        "workspaceId": ws.0, "agentId": agent_id, "conversationId": conversation_id, "reason": "retrieval_miss",
        "routine": null, "collected": {}, "dashboardUrl": dashboard, "requestId": request_id,
    })
}

/// A turn in a human-owned conversation: the message is saved; before the first operator reply
/// the visitor gets a short waiting line, afterwards nothing.
#[allow(clippy::too_many_arguments)]
fn suppressed(
    app: &App,
    input: &TurnInput,
    slot: &Slot,
    events: &mut dyn Events,
    streaming: bool,
    base: Reply,
    mut tr: TraceBuilder,
    operator_replied: bool,
) -> Result<Reply> {
    let cid = input.conversation_id.clone();
    let line = if operator_replied {
        None
    } else {
        let model = TurnModels::resolve(app, &input.workspace, &input.agent).ok().map(|m| m.workspace_chat);
        Some(compose::waiting_line(model.as_ref().and_then(as_model), &input.message, &slot.cancel))
    };
    tr.stage(
        app,
        "ownership_gate",
        "applied",
        json!({"state": conversations::HUMAN_OWNED, "suppressed": true, "waitingLine": line.is_some()}),
    );
    slot.stage("persisting").map_err(|s| superseded_error(&cid, s.stage))?;
    slot.pin().map_err(|s| superseded_error(&cid, s.stage))?;
    if let (Some(l), true) = (&line, streaming) {
        events.chunk(l);
    }
    let mut trace_json = tr.finish(app);
    trace_json["outcome"] = json!("suppressed");
    let message_id = app.db.write(|tx| {
        let now = rfc3339(app.clock.now());
        let mid = match &line {
            Some(l) => Some(
                conv_store::append(
                    tx,
                    &input.workspace.0,
                    &NewMessage {
                        conversation_id: &cid,
                        role: "assistant",
                        source: "agent",
                        content: l,
                        citations: json!([]),
                        metadata: json!({"outcome": "waiting", "turnId": input.turn_id}),
                        trace_id: Some(&input.turn_id),
                        request_id: input.request_id.as_deref(),
                    },
                    &now,
                )?
                .id,
            ),
            None => None,
        };
        trace::insert(
            tx,
            &TurnRecord {
                trace_id: &input.turn_id,
                workspace_id: &input.workspace.0,
                conversation_id: Some(&cid),
                agent_id: Some(&input.agent.agent_id),
                revision_id: input.agent.revision_id.as_deref(),
                user_message_id: base.user_message_id.as_deref(),
                message_id: mid.as_deref(),
                request_id: input.request_id.as_deref(),
                surface: input.surface.as_str(),
                route: None,
                outcome: "suppressed",
                availability: "not_recorded",
                coverage: None,
                reason: None,
                grounding: None,
                trace: &trace_json,
            },
            &now,
        )?;
        Ok(mid)
    })?;
    Ok(Reply {
        message_id,
        text: line.unwrap_or_default(),
        ownership_state: conversations::HUMAN_OWNED.into(),
        suppressed: true,
        outcome: "suppressed",
        diagnostics: json!({"route": null, "retrievalInvoked": false, "outcome": "suppressed"}),
        trace: input.include_debug.then_some(trace_json),
        ..base
    })
}

/// Marks the user message of a turn that did not finish (superseded or failed), for the
/// dashboard.
pub fn mark_failed(app: &App, conversation_id: &str, turn_id: &str, status: &str, stage: &str) {
    let failure = json!({"turnFailure": {"eventStatus": status, "stage": stage}});
    let r = app.db.write(|tx| conv_store::patch_turn_message(tx, conversation_id, turn_id, &failure));
    if let Err(e) = r {
        tracing::warn!(error = %e, "could not mark the interrupted turn");
    }
}

// ---- the REST chat entry ----

/// A chat request as the REST route takes it.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChatBody {
    pub message: String,
    #[serde(default)]
    pub conversation_id: Option<String>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub metadata_filter: Option<Value>,
    #[serde(default)]
    pub include_debug: bool,
    /// Only on `POST /chat` (the default agent when absent).
    #[serde(default)]
    pub agent_id: Option<String>,
    /// The session and customer the turn is about (their context values apply).
    #[serde(default)]
    pub context_scope: Option<ContextScopeBody>,
}

/// `contextScope` of a chat request.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextScopeBody {
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub customer_id: Option<String>,
}

impl ContextScopeBody {
    fn checked(&self) -> Result<context::ContextScope> {
        let clean = |field: &str, v: &Option<String>| -> Result<Option<String>> {
            match v.as_deref().map(str::trim) {
                None | Some("") => Ok(None),
                Some(s) if s.chars().count() <= 200 => Ok(Some(s.to_string())),
                Some(_) => Err(Error::invalid_field(field, format!("{field} must be at most 200 characters"))),
            }
        };
        Ok(context::ContextScope {
            session_id: clean("contextScope.sessionId", &self.session_id)?,
            customer_id: clean("contextScope.customerId", &self.customer_id)?,
        })
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

pub fn parse_filter(v: Option<&Value>) -> Result<Option<Filter>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(f) => filter::parse(f).map(Some),
    }
}

/// Resolves the agent and the conversation of a REST chat turn (creating the conversation,
/// pinned to the agent's published revision, when none is given).
pub fn prepare_chat(app: &App, p: &Principal, agent_id: Option<&str>, body: &ChatBody) -> Result<TurnInput> {
    p.require(Perm::Chat)?;
    let message = check_message(&body.message)?;
    let filter = parse_filter(body.metadata_filter.as_ref())?;
    let context_scope = body.context_scope.clone().unwrap_or_default().checked()?;
    let ws = p.workspace_id.clone();
    let started_by = p.user_id.as_ref().map(|u| u.0.clone()).or_else(|| p.credential_id.clone());
    let (cid, agent) = app.db.write(|tx| {
        let now = rfc3339(app.clock.now());
        let agent_row = match agent_id {
            Some(id) => crate::agents::get_in(tx, &ws, id)?,
            None => {
                let id = crate::agents::ensure_default(tx, &ws, &now)?;
                crate::agents::get_in(tx, &ws, &id)?
            }
        };
        match &body.conversation_id {
            Some(cid) => {
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
                let agent = agent::published(tx, &ws, &agent_row.id)?;
                let cid = crate::ids::new_id();
                conv_store::insert(
                    tx,
                    &conv_store::NewConversation {
                        id: &cid,
                        workspace_id: &ws.0,
                        agent_id: &agent_row.id,
                        revision_id: agent.revision_id.as_deref(),
                        channel: "api",
                        visibility: "visitor",
                        test_execution_id: None,
                        state: &json!({}),
                        started_by: started_by.as_deref(),
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
    })
}

/// What a streamed turn emits.
#[derive(Debug)]
pub enum StreamEvent {
    Status(&'static str),
    Chunk(String),
    Done(Box<Reply>),
    Cancelled { conversation_id: String, stage: String },
    Failed(Error),
}

/// Events sent down a channel to a streaming response.
pub struct ChannelEvents(pub tokio::sync::mpsc::UnboundedSender<StreamEvent>);

impl Events for ChannelEvents {
    fn status(&mut self, stage: &'static str) {
        let _ = self.0.send(StreamEvent::Status(stage));
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
) -> Result<Reply> {
    let cid = input.conversation_id.clone();
    let turn_id = input.turn_id.clone();
    let guard = match app.turns.enter(&cid).await {
        Ok(g) => g,
        Err(s) => return Err(superseded_error(&cid, s.stage)),
    };
    let slot = guard.slot.clone();
    let task = {
        let app = app.clone();
        let slot = slot.clone();
        tokio::task::spawn_blocking(move || match events {
            Some(tx) => run(&app, input, &slot, &mut ChannelEvents(tx), true),
            None => run(&app, input, &slot, &mut Silent, false),
        })
    };
    let result = tokio::select! {
        r = task => r.map_err(|e| Error::internal_msg(format!("turn task failed: {e}")))?,
        _ = slot.cancelled() => Err(superseded_error(&cid, slot.check().err().map(|s| s.stage).unwrap_or("rendering"))),
    };
    drop(guard);
    if let Err(e) = &result {
        let (status, stage) = match e.code {
            ErrorCode::ChatTurnSuperseded => {
                ("cancelled", e.details.as_ref().and_then(|d| d["stage"].as_str()).unwrap_or("rendering").to_string())
            }
            _ => ("failed", slot.current_stage().to_string()),
        };
        let app2 = app.clone();
        let (cid, turn_id) = (cid.clone(), turn_id.clone());
        let _ = tokio::task::spawn_blocking(move || mark_failed(&app2, &cid, &turn_id, status, &stage)).await;
    }
    result
}
