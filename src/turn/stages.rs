//! The stages of a turn, in order, over one [`Turn`]: gate (save the message; a human-owned
//! conversation stops here), the routine pass, interpret, steer, retrieve (with context
//! variables and the bound skill's lookup), compose, cover, persist. Each stage records itself in
//! the trace; [`run`] is the sequence.

use serde_json::{Value, json};

use super::compose::{self, Composed, Suggestion};
use super::interpret::{self, Route};
use super::kinds::{Availability, Outcome, Phase, Progress, RouteKind, StageStatus, TraceStage};
use super::routine::{RoutineAnswer, RoutineDecision, RoutineReport, RoutineTurn};
use crate::agents::config::AgentConfig;

/// What the routine pass left for the rest of the turn.
enum Routed {
    NotEngaged,
    Answered(Box<RoutineAnswer>),
    /// Answer normally, then append the routine's lead-back.
    Digression(String, RoutineReport),
    /// Answer normally; the routine was abandoned (or, on a tool call, declined).
    Abandoned(RoutineReport),
}

/// The reply's `invocation` on a routine tool call, with `outcome`.
fn invoked(input: &TurnInput, outcome: &'static str) -> Option<super::routine::InvocationReport> {
    input.invocation.as_ref().map(|i| super::routine::InvocationReport { tool_name: i.tool_name.clone(), outcome })
}
use super::steering::{self, Steering};
use super::supersede::{Slot, StreamSink, Superseded};
use super::trace::{self, TraceBuilder, TurnRecord};
use super::{AnswerCoverage, Events, HANDOFF_JOB, HISTORY, Reply, Surface, TurnError, TurnInput, context, retrieval};
use crate::app::App;
use crate::audit::{self, Event};
use crate::clock::rfc3339;
use crate::conversations::{self, Conversation, Message, NewMessage, OwnershipState, Role, Source};
use crate::error::Result;
use crate::ids::WorkspaceId;
use crate::jobs::{self, NewJob};
use crate::models::chat::ChatModel;
use crate::models::resolve::{self, Resolved, Slot as ModelSlot};
use crate::search::query::Hit;

/// The models one turn may call.
///
/// A local GGUF model that serves only because nothing is configured (the `default` source)
/// composes answers, declines and waiting lines, but the structured side calls (rewrite, search
/// plan, rerank, directive matching, suggestions) use the built-in methods: a model that small does
/// not return reliable JSON, and each extra call costs seconds on a CPU. Configure a slot
/// explicitly to use any model for them.
pub(crate) struct TurnModels {
    /// Composes the answer: the agent's override, else the workspace/environment chat model.
    pub chat: Resolved,
    /// The workspace chat model (no agent override): no-context decline, waiting line.
    pub workspace_chat: Resolved,
    /// Judges contextual directives: the workspace chat model unless it serves only by default.
    pub(crate) matcher: Resolved,
    /// Writes follow-up suggestions: the answer's model unless it serves only by default.
    suggest: Resolved,
    pub helpers: retrieval::Helpers,
}

pub(crate) fn as_model(r: &Resolved) -> Option<&dyn ChatModel> {
    match r {
        Resolved::Model(m) => Some(m.as_ref()),
        Resolved::Builtin => None,
    }
}

impl TurnModels {
    pub(crate) fn resolve(app: &App, ws: &WorkspaceId, agent: &AgentConfig) -> Result<TurnModels> {
        let choice = agent
            .settings
            .chat_model_override
            .as_ref()
            .map(|m| crate::settings::llm_models::Choice { provider: m.provider.clone(), model: m.model.clone() });
        // the preferences are read once for every slot the turn resolves
        let prefs = resolve::preferences(app, ws)?;
        let (chat_sel, chat) = resolve::resolve_with(app, ws, ModelSlot::Chat, choice.as_ref(), &prefs)?;
        let slot = |slot: ModelSlot| match resolve::resolve_with(app, ws, slot, None, &prefs) {
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

/// One running turn: its input, its supersede slot, its trace and where its events go.
struct Turn<'a> {
    app: &'a App,
    input: &'a TurnInput,
    slot: &'a Slot,
    events: &'a mut dyn Events,
    streaming: bool,
    /// Whether the answer was streamed (its first chunk pinned the turn).
    streamed: bool,
    tr: TraceBuilder,
    hold: crate::usage::limits::Hold<'a>,
}

/// What the gate saved and read.
struct Gathered {
    conv: Conversation,
    user_msg: Message,
    history: Vec<(String, String)>,
}

/// How the turn will answer.
struct Plan {
    route: Route,
    models: TurnModels,
    steering: Steering,
}

/// What the turn found to answer from.
struct Evidence {
    hits: Vec<Hit>,
    settings: retrieval::Settings,
    context_block: String,
    /// The reply of an external MCP skill that claimed the turn: `(skill name, text)`.
    external: Option<(String, String)>,
}

/// The coverage assessment and what follows from it.
struct Cover {
    view: AnswerCoverage,
    suggestions: Vec<Suggestion>,
    handoff: bool,
}

/// The conversation's messages as (role, text) for the prompt: "user", "assistant" (the agent's
/// own answers) or "operator" (a person's reply, shown to a model as the assistant's).
fn history_pairs(msgs: &[Message]) -> Vec<(String, String)> {
    msgs.iter()
        .filter(|m| !m.content.trim().is_empty())
        .map(|m| {
            let role = if m.source == Source::HumanAgent { "operator" } else { m.role.as_str() };
            (role.to_string(), m.content.clone())
        })
        .collect()
}

/// Runs one turn. `streaming` says whether `events` reaches a client (then the first chunk pins
/// the turn). A `metered` turn's `hold` reserves first; the reply settles it, a failure frees it.
#[tracing::instrument(name = "turn", skip_all, fields(turn_id = %input.turn_id, surface = input.surface.as_str()))]
pub fn run(
    app: &App,
    input: &TurnInput,
    slot: &Slot,
    events: &mut dyn Events,
    streaming: bool,
    metered: bool,
) -> Result<Reply, TurnError> {
    let mut tr = TraceBuilder::new(app);
    tr.trace_id = input.turn_id.clone();
    let hold = if metered { super::reserve(app, input)? } else { crate::usage::limits::Hold::unmetered() };
    let mut t = Turn { app, input, slot, events, streaming, streamed: false, tr, hold };
    t.phase(Phase::Preparing)?;
    let g = t.gate()?;
    // a tool call in a conversation a person owns starts nothing
    let base = Reply { invocation: invoked(input, "not_started"), ..t.base_reply(&g) };
    if g.conv.human_owned() {
        return t.suppressed(base, g.conv.operator_replied);
    }
    let (digression, base) = match t.routine_pass(&g)? {
        Routed::Answered(a) => {
            let base = Reply { invocation: a.invocation.and_then(|o| invoked(input, o)), ..base };
            return t.routine_reply(g, base, *a);
        }
        Routed::Digression(lead_back, report) => (Some((Some(lead_back), report)), base),
        Routed::Abandoned(report) => {
            let outcome = if input.invocation.is_some() { "declined" } else { "not_started" };
            (Some((None, report)), Reply { invocation: invoked(input, outcome), ..base })
        }
        Routed::NotEngaged => (None, Reply { invocation: invoked(input, "unknown_tool"), ..base }),
    };
    let plan = t.interpret(&g)?;
    let evidence = t.retrieve(&g, &plan)?;
    let mut composed = t.compose(&g, &plan, &evidence)?;
    let cover = t.cover(&plan, &evidence, &composed, &base);
    let base = match digression {
        // the question is answered, then the routine asks again
        Some((lead_back, report)) => {
            if let Some(lead_back) = lead_back {
                let tail = format!("\n\n{lead_back}");
                if t.streaming {
                    t.events.chunk(&tail);
                }
                composed.text.push_str(&tail);
            }
            Reply { routine: Some(report), ..base }
        }
        None => base,
    };
    t.persist(g, plan, evidence, composed, cover, base)
}

impl Turn<'_> {
    fn superseded(&self, s: Superseded) -> TurnError {
        TurnError::Superseded { conversation_id: self.input.conversation_id.clone(), stage: s.stage }
    }

    fn phase(&self, p: Phase) -> Result<(), TurnError> {
        self.slot.stage(p).map_err(|s| self.superseded(s))
    }

    fn check(&self) -> Result<(), TurnError> {
        self.slot.check().map_err(|s| self.superseded(s))
    }

    fn stage(&mut self, kind: TraceStage, status: StageStatus, outputs: Value) {
        self.tr.stage(self.app, kind, status, outputs);
    }

    /// Saves the visitor's message first, whatever happens next, and reads the history before it.
    #[tracing::instrument(name = "turn.gate", skip_all)]
    fn gate(&mut self) -> Result<Gathered, TurnError> {
        let (app, input) = (self.app, self.input);
        let ws = &input.workspace;
        let cid = &input.conversation_id;
        let source = if input.surface == Surface::Test { Source::Tester } else { Source::Visitor };
        // the history as it was before this message (read with the statement that appends it,
        // which reads the conversation back)
        let (conv, user_msg, history) = app.db.write(|tx| {
            let now = rfc3339(app.clock.now());
            let history = conversations::last_messages_later(tx, cid, HISTORY)?;
            let (m, conv) = conversations::append_and_read(
                tx,
                &ws.0,
                &NewMessage {
                    conversation_id: cid,
                    role: Role::User,
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
        let history = history_pairs(&history.get()?);
        let chars = input.message.chars().count();
        let msg = json!({"messageId": user_msg.id, "seq": user_msg.seq, "contentLength": chars});
        self.stage(TraceStage::Message, StageStatus::Applied, msg);
        let agent = &input.agent;
        let gather =
            json!({"historyCount": history.len(), "revisionId": agent.revision_id, "revisionVersion": agent.version});
        self.stage(TraceStage::Gather, StageStatus::Applied, gather);
        Ok(Gathered { conv, user_msg, history })
    }

    /// The reply every path starts from.
    fn base_reply(&self, g: &Gathered) -> Reply {
        let input = self.input;
        Reply {
            conversation_id: Some(input.conversation_id.clone()),
            message_id: None,
            user_message_id: Some(g.user_msg.id.clone()),
            agent_id: Some(input.agent.agent_id.clone()),
            revision_id: input.agent.revision_id.clone(),
            text: String::new(),
            citations: vec![],
            segments: vec![],
            coverage: AnswerCoverage {
                availability: Availability::NotRecorded,
                coverage: None,
                reason: None,
                originating_turn_id: input.turn_id.clone(),
                originating_request_id: input.request_id.clone(),
            },
            ownership_state: g.conv.ownership.state,
            suppressed: false,
            trace_id: input.turn_id.clone(),
            suggestions: vec![],
            outcome: Outcome::Direct,
            grounding: None,
            diagnostics: Value::Null,
            trace: None,
            retrieved: vec![],
            routine: None,
            invocation: None,
            usage: Default::default(),
        }
    }

    /// The routine pass: the agent's routines may take the turn.
    #[tracing::instrument(name = "turn.routine_pass", skip_all)]
    fn routine_pass(&mut self, g: &Gathered) -> Result<Routed, TurnError> {
        let turn = RoutineTurn { input: self.input, conversation: &g.conv };
        match self.app.routine_pass.run(self.app, &turn)? {
            RoutineDecision::NotEngaged { reason } => {
                self.stage(TraceStage::RoutinePass, StageStatus::Skipped, json!({"reason": reason}));
                Ok(Routed::NotEngaged)
            }
            RoutineDecision::Answered(a) => {
                self.stage(TraceStage::RoutinePass, StageStatus::Applied, a.trace.clone());
                Ok(Routed::Answered(a))
            }
            RoutineDecision::Digression { lead_back, report, trace } => {
                self.stage(TraceStage::RoutinePass, StageStatus::Applied, trace);
                Ok(Routed::Digression(lead_back, report))
            }
            RoutineDecision::Declined { report, trace } => {
                self.stage(TraceStage::RoutinePass, StageStatus::Applied, trace);
                Ok(Routed::Abandoned(report))
            }
            RoutineDecision::Abandoned { report, state, trace } => {
                self.stage(TraceStage::RoutinePass, StageStatus::Applied, trace);
                let (app, input) = (self.app, self.input);
                app.db.write(|tx| {
                    conversations::set_state(tx, &input.conversation_id, &state, &rfc3339(app.clock.now()))
                })?;
                Ok(Routed::Abandoned(report))
            }
        }
    }

    /// A routine answered: its reply, state and effects (handoff, decision, actions) in one write.
    fn routine_reply(mut self, g: Gathered, base: Reply, a: RoutineAnswer) -> Result<Reply, TurnError> {
        let (app, input) = (self.app, self.input);
        self.phase(Phase::Persisting)?;
        self.slot.pin().map_err(|s| self.superseded(s))?;
        if self.streaming && !a.text.is_empty() {
            self.events.chunk(&a.text);
        }
        let mut trace_json = self.tr.finish(app);
        trace_json["outcome"] = json!(Outcome::Direct);
        let report = super::api::routine(&a.report);
        let saved = app.db.write(|tx| {
            let now = rfc3339(app.clock.now());
            let m = conversations::append_message(
                tx,
                &input.workspace.0,
                &NewMessage {
                    conversation_id: &input.conversation_id,
                    role: Role::Assistant,
                    source: Source::Agent,
                    content: &a.text,
                    citations: json!([]),
                    metadata: json!({"outcome": Outcome::Direct, "turnId": input.turn_id, "routine": report}),
                    trace_id: Some(&input.turn_id),
                    request_id: input.request_id.as_deref(),
                },
                &now,
            )?;
            // a decision resolved (or a routine moved) since this turn read the state: the turn's
            // view is stale, so it writes nothing and answers as superseded
            if !conversations::set_state_if(tx, &input.conversation_id, &g.conv.state, &a.state, &now)? {
                return Err(crate::Error::new(
                    crate::error::ErrorCode::ChatTurnSuperseded,
                    "the routine moved on meanwhile",
                ));
            }
            let handed_off = a.effects.apply(app, tx, input, &now)?;
            self.hold.settle(app, tx, Default::default())?;
            let record = TurnRecord {
                user_message_id: Some(&g.user_msg.id),
                message_id: Some(&m.id),
                outcome: Outcome::Direct,
                ..record_of(input, &trace_json)
            };
            trace::insert(tx, &record, &now)?;
            Ok((m.id, if handed_off { OwnershipState::HumanOwned } else { OwnershipState::AiOwned }))
        })?;
        self.hold.committed();
        Ok(Reply {
            message_id: Some(saved.0),
            text: a.text,
            ownership_state: saved.1,
            outcome: Outcome::Direct,
            diagnostics: json!({"route": "routine", "retrievalInvoked": false, "outcome": Outcome::Direct,
                "durationMs": (self.tr.elapsed_ms() * 1000.0).round() / 1000.0}),
            trace: input.include_debug.then_some(trace_json),
            routine: Some(a.report),
            ..base
        })
    }

    /// Routes the turn, resolves its models and matches directives.
    #[tracing::instrument(name = "turn.interpret", skip_all)]
    fn interpret(&mut self, g: &Gathered) -> Result<Plan, TurnError> {
        let (app, input) = (self.app, self.input);
        let agent = &input.agent;
        self.phase(Phase::Routing)?;
        self.events.status(Progress::Interpreting);
        let models = TurnModels::resolve(app, &input.workspace, agent)?;
        let retrieval_enabled = agent.settings.retrieval_enabled;
        let route = interpret::route(&input.message, g.history.len(), retrieval_enabled);
        let outputs = json!({"route": route.kind, "reason": route.reason, "retrievalEnabled": retrieval_enabled});
        self.stage(TraceStage::TurnInterpretation, StageStatus::Applied, outputs);
        let steering =
            steering::match_directives(app, agent, &input.message, route.kind, &models.matcher, &self.slot.cancel);
        self.stage(TraceStage::DirectiveSteering, StageStatus::Applied, steering.trace.clone());
        self.check()?;
        Ok(Plan { route, models, steering })
    }

    /// Retrieval (on the retrieval route), context variables, and the binding winner's lookup.
    #[tracing::instrument(name = "turn.retrieve", skip_all)]
    fn retrieve(&mut self, g: &Gathered, plan: &Plan) -> Result<Evidence, TurnError> {
        let (app, input) = (self.app, self.input);
        let (ws, agent) = (&input.workspace, &input.agent);
        let settings = retrieval::Settings::for_agent(agent);
        let search = |s: &retrieval::Settings| {
            let filter = input.filter.as_ref();
            let helpers = &plan.models.helpers;
            retrieval::run(app, ws, s, helpers, &input.message, &g.history, filter, &self.slot.cancel)
        };
        let mut hits = Vec::new();
        if plan.route.kind == RouteKind::Retrieval {
            self.events.status(Progress::Searching);
            let r = search(&settings)?;
            hits = r.hits;
            self.stage(TraceStage::RetrievalFanout, StageStatus::Applied, r.trace);
        } else {
            let skipped = json!({"reason": plan.route.reason});
            self.stage(TraceStage::RetrievalFanout, StageStatus::Skipped, skipped);
        }

        let turn_context = context::TurnContext::resolve(app, ws, agent, &input.context_scope, &input.test_values)?;
        // the authored text of this turn: what `on_reference` variables must be referenced in
        let authored: Vec<&str> = std::iter::once(agent.settings.custom_instruction.as_str())
            .chain(plan.steering.matched.iter().map(|m| m.directive.body.action.as_str()))
            .collect();
        let context_block = turn_context.prompt_block(&authored);
        let status = if agent.context_variables.is_empty() { StageStatus::Skipped } else { StageStatus::Applied };
        self.stage(TraceStage::ContextVariables, status, turn_context.trace(&authored));

        let selection = steering::select_binding(agent, &plan.steering.matched, plan.route.kind);
        let mut lookup = Value::Null;
        if let Some((directive_id, skill_name, cap)) = &selection.winner
            && cap == "retrieve"
            && let Some(skill) = agent.skill(skill_name)
        {
            // a bound retrieve skill is staged as a directive-scoped lookup
            let r = search(&settings.for_skill(&skill.config))?;
            let candidates: Vec<&str> = r.hits.iter().map(|h| h.chunk_id.as_str()).collect();
            lookup = json!({"directiveId": directive_id, "skillName": skill_name, "results": r.hits.len(),
                            "candidates": candidates});
            hits = retrieval::merge(vec![r.hits, hits], retrieval::FINAL_CONTEXT);
        }
        // a bound external MCP skill claims the turn: its tool answers the visitor's message (a
        // failure falls back to the normal answer, recorded in the trace)
        let mut external = None;
        let mut claim = Value::Null;
        if let Some((directive_id, skill_name, cap)) = &selection.winner
            && cap == "mcp_tool"
            && let Some(skill) = agent.skill(skill_name)
        {
            let mut inputs = crate::skills::SkillInputs::new();
            inputs.insert("message".into(), json!(input.message));
            let r = crate::skills::run(app, &input.skill_call(&input.turn_id), &skill.name, &inputs)?;
            let answer = r["outputs"]["answer"].as_str().filter(|a| !a.trim().is_empty());
            claim = json!({"directiveId": directive_id, "skillName": skill_name, "status": r["status"],
                           "claimed": answer.is_some() && r["status"] == "completed", "reason": r["outputs"]["reason"]});
            if r["status"] == "completed"
                && let Some(a) = answer
            {
                external = Some((skill_name.clone(), a.to_string()));
            }
        }
        let mut sel_trace = selection.trace;
        sel_trace["lookup"] = lookup;
        sel_trace["external"] = claim;
        self.stage(TraceStage::SkillSelection, StageStatus::Applied, sel_trace);
        self.check()?;
        Ok(Evidence { hits, settings, context_block, external })
    }

    /// Composes the answer: direct, a decline when nothing was found, or grounded in the hits.
    #[tracing::instrument(name = "turn.compose", skip_all)]
    fn compose(&mut self, g: &Gathered, plan: &Plan, ev: &Evidence) -> Result<Composed, TurnError> {
        let input = self.input;
        let (agent, message, history) = (&input.agent, input.message.as_str(), g.history.as_slice());
        let matched = &plan.steering.matched;
        self.phase(Phase::Rendering)?;
        self.events.status(Progress::Composing);
        let cancel = self.slot.cancel.clone();
        let mut sink =
            StreamSink { slot: self.slot, events: &mut *self.events, streaming: self.streaming, pinned: false };
        let composed = if let Some((skill, text)) = &ev.external {
            compose::external(text, skill, &mut sink)
        } else if plan.route.kind == RouteKind::Direct {
            let (chat, block, reason) = (as_model(&plan.models.chat), &ev.context_block, plan.route.reason);
            compose::direct(chat, agent, matched, block, reason, message, history, &mut sink, &cancel)
                .map_err(compose::llm_error)?
        } else if ev.hits.is_empty() {
            compose::decline(as_model(&plan.models.workspace_chat), message, &mut sink, &cancel)
        } else {
            match &plan.models.chat {
                Resolved::Builtin => compose::builtin_grounded(message, &ev.hits, &mut sink),
                Resolved::Model(m) => {
                    let (gated, block) = (&plan.steering.gated, &ev.context_block);
                    compose::model_grounded(
                        m.as_ref(),
                        agent,
                        matched,
                        gated,
                        block,
                        message,
                        compose::History { conversation: Some(&g.conv.id), messages: history },
                        &ev.hits,
                        &mut sink,
                        &cancel,
                    )
                    .map_err(compose::llm_error)?
                }
            }
        };
        self.streamed = sink.pinned;
        let Some(composed) = composed else {
            let s = self.slot.check().err().unwrap_or(Superseded { stage: Phase::Rendering });
            return Err(self.superseded(s));
        };
        let cited: Vec<&str> = composed.citations.iter().map(|c| c.chunk_id.as_str()).collect();
        let context: Vec<&str> = ev.hits.iter().map(|h| h.chunk_id.as_str()).collect();
        let outputs = json!({"provider": composed.provider, "model": composed.model, "outcome": composed.outcome,
            "answerLength": composed.text.chars().count(), "usage": composed.usage, "citations": cited,
            "contextChunks": context});
        self.stage(TraceStage::Compose, StageStatus::Applied, outputs);
        Ok(composed)
    }

    /// The coverage assessment, coverage-gated directives, suggestions and whether to hand off.
    #[tracing::instrument(name = "turn.cover", skip_all)]
    fn cover(&mut self, plan: &Plan, ev: &Evidence, composed: &Composed, base: &Reply) -> Cover {
        let input = self.input;
        let (availability, coverage, reason) = match &composed.coverage {
            Some((c, r)) if plan.route.kind == RouteKind::Retrieval => {
                (Availability::Assessed, Some(c.clone()), Some(r.clone()))
            }
            _ => (Availability::NotRecorded, None, None),
        };
        let gated = steering::coverage_gated(&plan.steering.gated, coverage.as_deref(), reason.as_deref());
        let gated_ids: Vec<&str> = gated.iter().map(|d| d.id.as_str()).collect();
        let status = if availability == Availability::Assessed { StageStatus::Applied } else { StageStatus::Skipped };
        let outputs = json!({"availability": availability, "coverage": coverage, "reason": reason,
            "outcome": composed.outcome, "grounding": composed.grounding, "coverageDirectivesMatched": gated_ids});
        self.stage(TraceStage::CoverageAssessment, status, outputs);
        let suggestions = if composed.outcome.is_grounded() && ev.settings.suggested_questions_enabled {
            let count = ev.settings.suggested_questions_count;
            let model = as_model(&plan.models.suggest);
            compose::suggestions(model, &input.message, composed, &ev.hits, count, &self.slot.cancel)
        } else {
            vec![]
        };
        let handoff = input.surface != Surface::Test
            && composed.outcome == Outcome::NoContext
            && input.agent.settings.handoff_on_retrieval_miss;
        let view = AnswerCoverage { availability, coverage, reason, ..base.coverage.clone() };
        Cover { view, suggestions, handoff }
    }

    /// Writes the reply, the trace, any ownership change and the `handoff.notify` job in one
    /// transaction.
    #[tracing::instrument(name = "turn.persist", skip_all)]
    fn persist(
        mut self,
        g: Gathered,
        plan: Plan,
        ev: Evidence,
        composed: Composed,
        cover: Cover,
        base: Reply,
    ) -> Result<Reply, TurnError> {
        let (app, input) = (self.app, self.input);
        self.phase(Phase::Persisting)?;
        self.slot.pin().map_err(|s| self.superseded(s))?;
        let outputs =
            json!({"handoff": cover.handoff, "suggestions": cover.suggestions.len(), "streamed": self.streamed});
        self.stage(TraceStage::Persist, StageStatus::Applied, outputs);
        let mut diagnostics = diagnostics(input, &plan, &ev, &composed, &cover);
        let retrieved = ev.hits.clone();
        let mut trace_json = self.tr.finish(app);
        trace_json["outcome"] = json!(composed.outcome);
        let saved = app.db.write(|tx| {
            let now = rfc3339(app.clock.now());
            let metadata = json!({"answerCoverage": super::api::coverage(&cover.view), "segments": composed.segments,
                "suggestions": cover.suggestions, "outcome": composed.outcome, "turnId": input.turn_id,
                "grounding": composed.grounding});
            let m = conversations::append_message(
                tx,
                &input.workspace.0,
                &NewMessage {
                    conversation_id: &input.conversation_id,
                    role: Role::Assistant,
                    source: Source::Agent,
                    content: &composed.text,
                    citations: json!(composed.citations),
                    metadata,
                    trace_id: Some(&input.turn_id),
                    request_id: input.request_id.as_deref(),
                },
                &now,
            )?;
            let state = if cover.handoff { hand_off(app, tx, input, &now)? } else { OwnershipState::AiOwned };
            let record = TurnRecord {
                user_message_id: Some(&g.user_msg.id),
                message_id: Some(&m.id),
                route: Some(plan.route.kind),
                outcome: composed.outcome,
                availability: cover.view.availability,
                coverage: cover.view.coverage.as_deref(),
                reason: cover.view.reason.as_deref(),
                grounding: composed.grounding,
                ..record_of(input, &trace_json)
            };
            trace::insert(tx, &record, &now)?;
            self.hold.settle(app, tx, composed.usage)?;
            Ok((m.id, state))
        })?;
        self.hold.committed();
        // the whole turn on the server, persisting included
        diagnostics["durationMs"] = json!((self.tr.elapsed_ms() * 1000.0).round() / 1000.0);
        Ok(Reply {
            message_id: Some(saved.0),
            text: composed.text,
            citations: composed.citations,
            segments: composed.segments,
            coverage: cover.view,
            ownership_state: saved.1,
            suggestions: cover.suggestions,
            outcome: composed.outcome,
            grounding: composed.grounding,
            diagnostics,
            trace: input.include_debug.then_some(trace_json),
            retrieved,
            usage: composed.usage,
            ..base
        })
    }

    /// A turn in a human-owned conversation: the message is saved; before the first operator
    /// reply the visitor gets a short waiting line, afterwards nothing.
    fn suppressed(mut self, base: Reply, operator_replied: bool) -> Result<Reply, TurnError> {
        let (app, input) = (self.app, self.input);
        let line = if operator_replied {
            None
        } else {
            let model = TurnModels::resolve(app, &input.workspace, &input.agent).ok().map(|m| m.workspace_chat);
            Some(compose::waiting_line(model.as_ref().and_then(as_model), &input.message, &self.slot.cancel))
        };
        let outputs = json!({"state": OwnershipState::HumanOwned, "suppressed": true, "waitingLine": line.is_some()});
        self.stage(TraceStage::OwnershipGate, StageStatus::Applied, outputs);
        self.phase(Phase::Persisting)?;
        self.slot.pin().map_err(|s| self.superseded(s))?;
        if let (Some(l), true) = (&line, self.streaming) {
            self.events.chunk(l);
        }
        let mut trace_json = self.tr.finish(app);
        trace_json["outcome"] = json!(Outcome::Suppressed);
        let message_id = app.db.write(|tx| {
            let now = rfc3339(app.clock.now());
            let mid = match &line {
                Some(l) => Some(append_waiting_line(tx, input, l, &now)?),
                None => None,
            };
            let record = TurnRecord {
                user_message_id: base.user_message_id.as_deref(),
                message_id: mid.as_deref(),
                ..record_of(input, &trace_json)
            };
            trace::insert(tx, &record, &now)?;
            Ok(mid)
        })?;
        Ok(Reply {
            message_id,
            text: line.unwrap_or_default(),
            ownership_state: OwnershipState::HumanOwned,
            suppressed: true,
            outcome: Outcome::Suppressed,
            diagnostics: json!({"route": null, "retrievalInvoked": false, "outcome": Outcome::Suppressed}),
            trace: input.include_debug.then_some(trace_json),
            ..base
        })
    }
}

/// The reply's `diagnostics` (its duration is added last).
fn diagnostics(input: &TurnInput, plan: &Plan, ev: &Evidence, composed: &Composed, cover: &Cover) -> Value {
    let retrieval_invoked = plan.route.kind == RouteKind::Retrieval;
    let strategy = retrieval_invoked.then(|| ev.settings.effective_strategy(&input.message));
    json!({
        "route": plan.route.kind, "routeReason": plan.route.reason, "retrievalInvoked": retrieval_invoked,
        "retrievalStrategy": strategy, "retrievedChunks": ev.hits.len(),
        "composer": {"provider": composed.provider, "model": composed.model, "usage": composed.usage},
        "outcome": composed.outcome, "grounding": composed.grounding, "handoff": cover.handoff,
        "revision": {"id": input.agent.revision_id, "version": input.agent.version},
    })
}

/// The trace record of a turn in a conversation, as far as its input says: no messages, no route,
/// `suppressed` with no coverage until the caller fills in what the turn did.
fn record_of<'a>(input: &'a TurnInput, trace: &'a Value) -> TurnRecord<'a> {
    TurnRecord {
        trace_id: &input.turn_id,
        workspace_id: &input.workspace.0,
        conversation_id: Some(&input.conversation_id),
        agent_id: Some(&input.agent.agent_id),
        revision_id: input.agent.revision_id.as_deref(),
        user_message_id: None,
        message_id: None,
        request_id: input.request_id.as_deref(),
        surface: input.surface.as_str(),
        route: None,
        outcome: Outcome::Suppressed,
        availability: Availability::NotRecorded,
        coverage: None,
        reason: None,
        grounding: None,
        trace,
    }
}

fn append_waiting_line(tx: &crate::storage::Tx, input: &TurnInput, line: &str, now: &str) -> Result<String> {
    let m = conversations::append_message(
        tx,
        &input.workspace.0,
        &NewMessage {
            conversation_id: &input.conversation_id,
            role: Role::Assistant,
            source: Source::Agent,
            content: line,
            citations: json!([]),
            metadata: json!({"outcome": Outcome::Waiting, "turnId": input.turn_id}),
            trace_id: Some(&input.turn_id),
            request_id: input.request_id.as_deref(),
        },
        now,
    )?;
    Ok(m.id)
}

/// Hands the conversation to a person after a retrieval miss: the ownership change, its
/// `handoff.notify` job and the audit event.
fn hand_off(app: &App, tx: &crate::storage::Tx, input: &TurnInput, now: &str) -> Result<OwnershipState> {
    let (ws, cid) = (&input.workspace, &input.conversation_id);
    let version = conversations::hand_off(tx, cid, "retrieval_miss", now)?;
    let payload = handoff_payload(app, ws, &input.agent.agent_id, cid, input.request_id.as_deref());
    let job = NewJob::new(HANDOFF_JOB, payload).workspace(&ws.0).dedupe(format!("handoff:{cid}:{version}"));
    jobs::enqueue_tx(tx, app.clock.now_ms(), app.jobs.default_max_attempts(), &job)?;
    let meta = json!({"action": "handoff_requested", "reason": "retrieval_miss", "version": version});
    let event = Event::new("hitl.ownership").workspace(ws).target("conversation", cid).meta(meta);
    audit::record(tx, now, &input.actor, event)?;
    Ok(OwnershipState::HumanOwned)
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
        app.config.public_url.as_ref().map(|u| format!("{}/app/inbox/{conversation_id}", u.trim_end_matches('/')));
    json!({
        "workspaceId": ws.0, "agentId": agent_id, "conversationId": conversation_id, "reason": "retrieval_miss",
        "routine": null, "collected": {}, "dashboardUrl": dashboard, "requestId": request_id,
    })
}
