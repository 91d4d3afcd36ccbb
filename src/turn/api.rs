//! The wire shapes of a turn (owned by the HTTP edge): the REST chat body, the agent reply
//! envelope and the REST reply.

use serde::Deserialize;
use serde_json::{Value, json};

use super::answer::Answered;
use super::{AnswerCoverage, ChatCommand, Reply, context, scope_id};
use crate::error::Result;
use crate::search::filter::FilterJson;

/// A chat request as the REST route takes it.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChatBody {
    pub message: String,
    #[serde(default)]
    pub conversation_id: Option<String>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub metadata_filter: Option<FilterJson>,
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
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextScopeBody {
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub customer_id: Option<String>,
}

impl ChatBody {
    /// The turn the body asks for, its `contextScope` checked.
    pub fn command(self) -> Result<ChatCommand> {
        let scope = self.context_scope.unwrap_or_default();
        Ok(ChatCommand {
            message: self.message,
            conversation_id: self.conversation_id,
            metadata_filter: self.metadata_filter,
            include_debug: self.include_debug,
            context_scope: context::ContextScope {
                session_id: scope_id("contextScope.sessionId", scope.session_id.as_deref())?,
                customer_id: scope_id("contextScope.customerId", scope.customer_id.as_deref())?,
            },
        })
    }
}

/// The `POST /retrieval/answer` response.
pub fn answer(a: &Answered) -> Value {
    let composed = &a.composed;
    let mut v = json!({
        "answer": composed.text,
        "citations": composed.citations,
        "answerSegments": composed.segments,
        "answerCoverage": coverage(&a.coverage),
        "agentScope": a.scoped.as_ref().map(|s| json!({"agentId": s.agent_id, "retrievalEnabled": s.settings.retrieval_enabled})),
        "results": a.hits.iter().map(|h| json!({"documentId": h.document_id, "chunkId": h.chunk_id, "title": h.title, "snippet": h.snippet, "score": h.score})).collect::<Vec<_>>(),
        "traceId": a.trace_id,
        "diagnostics": {"retrievalInvoked": true, "outcome": composed.outcome, "grounding": composed.grounding,
                        "composer": {"provider": composed.provider, "model": composed.model,
                                     "usage": composed.usage}},
    });
    if let Some(t) = &a.debug_trace {
        v["debug"] = json!({"turnTrace": t});
    }
    v
}

/// `answerCoverage`.
pub fn coverage(c: &AnswerCoverage) -> Value {
    json!({
        "availability": c.availability, "coverage": c.coverage, "reason": c.reason,
        "originatingTurnId": c.originating_turn_id, "originatingRequestId": c.originating_request_id,
    })
}

/// The envelope's `routine`: `{name, status, pendingInput [{key, type, required, description}],
/// toolName}`.
pub fn routine(r: &super::routine::RoutineReport) -> Value {
    let pending: Vec<Value> = r
        .pending_input
        .iter()
        .map(|p| json!({"key": p.key, "type": p.slot_type, "required": p.required, "description": p.description}))
        .collect();
    json!({"name": r.name, "status": r.status, "pendingInput": pending, "toolName": r.tool_name})
}

/// The agent reply envelope (converse, MCP): `answer` is `{text, citations}`; `routine` when the
/// turn touched one.
pub fn envelope(r: &Reply) -> Value {
    let mut v = json!({
        "conversationId": r.conversation_id,
        "answer": {"text": r.text, "citations": r.citations},
        "answerCoverage": coverage(&r.coverage),
        "ownership": {"state": r.ownership_state.as_str(), "suppressed": r.suppressed},
        "traceId": r.trace_id,
    });
    if let Some(x) = &r.routine {
        v["routine"] = routine(x);
    }
    if let Some(i) = &r.invocation {
        v["invocation"] = json!({"toolName": i.tool_name, "outcome": i.outcome});
    }
    v
}

/// The REST chat shape: the envelope's fields with `answer` as the string and `citations` beside
/// it, plus the message id, segments, suggestions and diagnostics (and the trace when debug was
/// asked for).
pub fn rest(r: &Reply) -> Value {
    let mut v = json!({
        "conversationId": r.conversation_id,
        "messageId": r.message_id,
        "agentId": r.agent_id,
        "answer": r.text,
        "citations": r.citations,
        "answerSegments": r.segments,
        "answerCoverage": coverage(&r.coverage),
        "ownership": {"state": r.ownership_state.as_str(), "suppressed": r.suppressed},
        "traceId": r.trace_id,
        "suggestions": r.suggestions,
        "diagnostics": r.diagnostics,
    });
    if let Some(x) = &r.routine {
        v["routine"] = routine(x);
    }
    if let Some(i) = &r.invocation {
        v["invocation"] = json!({"toolName": i.tool_name, "outcome": i.outcome});
    }
    if let Some(t) = &r.trace {
        v["debug"] = json!({"turnTrace": t});
    }
    v
}

/// The JSON Schema of [`rest`] (OpenAPI).
pub fn rest_schema() -> Value {
    use crate::http::openapi::shapes::{any_object, array, boolean, obj, obj_some, string, string_or_null};
    let chip = obj_some(json!({"text": string(), "kind": string(), "action": any_object()}), &["text", "kind"]);
    obj_some(
        json!({
            "conversationId": string_or_null(), "messageId": string_or_null(), "agentId": string_or_null(),
            "answer": string(), "citations": array(any_object()), "answerSegments": array(any_object()),
            "answerCoverage": obj(json!({
                "availability": string(), "coverage": {}, "reason": {},
                "originatingTurnId": {}, "originatingRequestId": {},
            })),
            "ownership": obj(json!({"state": string(), "suppressed": boolean()})),
            "traceId": string(), "suggestions": array(chip), "diagnostics": {},
            "routine": any_object(), "invocation": obj(json!({"toolName": string(), "outcome": {}})),
            "debug": obj(json!({"turnTrace": {}})),
        }),
        &[
            "conversationId",
            "messageId",
            "agentId",
            "answer",
            "citations",
            "answerSegments",
            "answerCoverage",
            "ownership",
            "traceId",
            "suggestions",
            "diagnostics",
        ],
    )
}

/// Follow-up chips a public reply carries at most, and action chips.
const PUBLIC_FOLLOW_UPS: usize = 2;
const PUBLIC_ACTIONS: usize = 1;

/// A reply to a visitor on a public channel: the REST shape without diagnostics or debug, with at
/// most two follow-up chips and one action chip.
pub fn public(r: &Reply) -> Value {
    let (mut follow, mut action) = (0, 0);
    let chips: Vec<&super::compose::Suggestion> = r
        .suggestions
        .iter()
        .filter(|s| {
            if s.action.get("kind").and_then(Value::as_str).is_some_and(|k| k != "ask_followup") {
                action += 1;
                action <= PUBLIC_ACTIONS
            } else {
                follow += 1;
                follow <= PUBLIC_FOLLOW_UPS
            }
        })
        .collect();
    let mut v = json!({
        "conversationId": r.conversation_id,
        "messageId": r.message_id,
        "agentId": r.agent_id,
        "answer": r.text,
        "citations": r.citations,
        "answerSegments": r.segments,
        "answerCoverage": coverage(&r.coverage),
        "ownership": {"state": r.ownership_state.as_str(), "suppressed": r.suppressed},
        "traceId": r.trace_id,
        "suggestions": chips,
    });
    if let Some(x) = &r.routine {
        v["routine"] = routine(x);
    }
    v
}

/// A stored turn as `GET /traces/{id}` (with its trace) and the quality report show it.
pub fn trace_row(t: &super::trace::TraceRow) -> Value {
    let grounding = t.grounding.as_ref().map(|g| {
        json!({"verdict": g.verdict, "claimCount": g.claim_count, "sourcedClaimCount": g.sourced_claim_count,
               "unsourcedClaimCount": g.unsourced_claim_count, "invalidSourceCount": g.invalid_source_count})
    });
    let mut v = json!({
        "turnId": t.id, "traceId": t.id,
        "conversationId": t.conversation_id, "agentId": t.agent_id,
        "revisionId": t.revision_id, "userMessageId": t.user_message_id,
        "messageId": t.message_id, "requestId": t.request_id,
        "surface": t.surface, "route": t.route, "outcome": t.outcome,
        "answerCoverage": {"availability": t.availability, "coverage": t.coverage, "reason": t.reason},
        "grounding": grounding,
        "createdAt": t.created_at,
    });
    if let Some(trace) = &t.trace {
        v["trace"] = trace.clone();
    }
    v
}

/// `GET /quality/turns`.
pub fn quality_page(p: &super::trace::QualityPage) -> Value {
    json!({"turns": p.turns.iter().map(trace_row).collect::<Vec<_>>(), "total": p.total,
           "nextCursor": p.next_cursor, "hasMore": p.has_more})
}

/// A test execution; with its transcripts, each side's messages.
pub fn execution(d: &super::test_exec::ExecutionDetail) -> Value {
    let e = &d.execution;
    let sides: Vec<Value> = e
        .sides
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let mut v = json!({"label": s.label, "revisionId": s.revision_id, "conversationId": s.conversation_id});
            if let Some(t) = d.transcripts.as_ref().and_then(|t| t.get(k)) {
                v["messages"] = json!(crate::conversations::api::messages(t));
            }
            v
        })
        .collect();
    // values are frozen inputs: only their variable ids are shown (a sensitive value never leaves)
    let values: Vec<Value> = e
        .test_values
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| json!({"contextVariableId": v["contextVariableId"]}))
        .collect();
    json!({
        "id": e.id, "agentId": e.agent_id, "mode": e.mode, "sides": sides, "draftGeneration": e.draft_generation,
        "seedConversationId": e.seed_conversation_id, "testValues": values, "skillEffects": e.skill_effects,
        "createdAt": e.created_at,
    })
}

/// `GET /agents/{id}/test-executions`.
pub fn execution_page(p: &super::test_exec::ExecutionPage) -> Value {
    json!({"testExecutions": p.executions.iter().map(execution).collect::<Vec<_>>(), "nextCursor": p.next_cursor, "hasMore": p.has_more})
}

/// The replies of a test message, one per side.
pub fn execution_replies(agent_id: &str, execution_id: &str, results: &[(super::test_exec::Side, Reply)]) -> Value {
    let results: Vec<Value> = results
        .iter()
        .map(|(side, reply)| {
            json!({"label": side.label, "revisionId": side.revision_id, "conversationId": side.conversation_id, "reply": rest(reply)})
        })
        .collect();
    json!({"executionId": execution_id, "agentId": agent_id, "results": results})
}

/// `GET /quality/daily`.
pub fn quality_daily(days: &[super::trace::DailyCoverage]) -> Value {
    let days: Vec<Value> = days
        .iter()
        .map(|d| json!({"day": d.day, "answered": d.answered, "partial": d.partial, "unanswered": d.unanswered, "unclear": d.unclear}))
        .collect();
    json!({"days": days})
}
