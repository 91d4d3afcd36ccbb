//! The wire shapes of conversations and messages (owned by the HTTP edge; the domain types in
//! `mod.rs` know nothing of them).

use serde_json::{Value, json};

use super::{Conversation, ConversationDetail, ConversationPage, Message, Ownership, Role, Tail};

/// `{state, version, reason, ownerAccountId, ownerDisplayName, takenOverAt}`.
pub fn ownership(o: &Ownership) -> Value {
    json!({
        "state": o.state.as_str(), "version": o.version, "reason": o.reason,
        "ownerAccountId": o.owner_user_id, "ownerDisplayName": o.owner_display_name, "takenOverAt": o.taken_over_at,
    })
}

/// The whole ownership record (takeover routes, 409 details).
pub fn ownership_record(c: &Conversation) -> Value {
    let mut v = ownership(&c.ownership);
    v["conversationId"] = json!(c.id);
    v["workspaceId"] = json!(c.workspace_id);
    v["updatedAt"] = json!(c.updated_at);
    v
}

/// A conversation as history lists it.
pub fn summary(c: &Conversation) -> Value {
    json!({
        "id": c.id, "agentId": c.agent_id, "revisionId": c.revision_id, "channel": c.channel.as_str(),
        "ownership": ownership(&c.ownership),
        "messageCount": c.message_count, "lastMessageAt": c.last_message_at,
        "createdAt": c.created_at, "updatedAt": c.updated_at,
    })
}

/// The history shape of a message (content included: history is for operators).
pub fn message(m: &Message) -> Value {
    let mut v = json!({
        "id": m.id, "role": m.role.as_str(), "source": m.source.as_str(), "text": m.content,
        "createdAt": m.created_at, "cursor": m.seq.to_string(),
    });
    if m.role == Role::Assistant {
        v["citations"] = m.citations.clone();
        v["traceId"] = json!(m.trace_id);
        for k in ["answerCoverage", "suggestions", "outcome"] {
            if let Some(x) = m.metadata.get(k) {
                v[k] = x.clone();
            }
        }
    }
    if let Some(name) = m.metadata.pointer("/operator/displayName") {
        v["operatorDisplayName"] = name.clone();
    }
    if let Some(f) = m.metadata.get("turnFailure") {
        v["turnFailure"] = f.clone();
    }
    v
}

/// Messages in their history shape.
pub fn messages(ms: &[Message]) -> Vec<Value> {
    ms.iter().map(message).collect()
}

/// `GET /history/chat`.
pub fn page(p: &ConversationPage) -> Value {
    json!({
        "conversations": p.conversations.iter().map(summary).collect::<Vec<_>>(),
        "total": p.total, "nextCursor": p.next_cursor, "hasMore": p.has_more,
    })
}

/// `GET /history/chat/{id}`.
pub fn detail(d: &ConversationDetail) -> Value {
    let mut v = summary(&d.conversation);
    v["messages"] = json!(messages(&d.messages));
    v["hasMore"] = json!(d.has_more);
    v["tailCursor"] = json!(d.tail_cursor.to_string());
    v
}

/// `GET /history/chat/{id}/tail`.
pub fn tail(t: &Tail) -> Value {
    json!({
        "conversationId": t.conversation_id,
        "messages": messages(&t.messages),
        "cursor": t.cursor.to_string(),
        "ownership": ownership(&t.ownership),
    })
}
