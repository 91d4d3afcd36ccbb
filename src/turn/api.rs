//! The wire shapes of a turn (owned by the HTTP edge): the REST chat body, the agent reply
//! envelope and the REST reply.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{AnswerCoverage, ChatCommand, Reply, context, scope_id};
use crate::error::Result;
use crate::search::filter::FilterJson;

/// A chat request as the REST route takes it.
#[derive(Debug, Clone, Deserialize)]
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
#[derive(Debug, Clone, Default, Deserialize)]
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

/// `answerCoverage`.
pub fn coverage(c: &AnswerCoverage) -> Value {
    json!({
        "availability": c.availability, "coverage": c.coverage, "reason": c.reason,
        "originatingTurnId": c.originating_turn_id, "originatingRequestId": c.originating_request_id,
    })
}

/// The agent reply envelope (converse, MCP): `answer` is `{text, citations}`.
pub fn envelope(r: &Reply) -> Value {
    json!({
        "conversationId": r.conversation_id,
        "answer": {"text": r.text, "citations": r.citations},
        "answerCoverage": coverage(&r.coverage),
        "ownership": {"state": r.ownership_state.as_str(), "suppressed": r.suppressed},
        "traceId": r.trace_id,
    })
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
    if let Some(t) = &r.trace {
        v["debug"] = json!({"turnTrace": t});
    }
    v
}
