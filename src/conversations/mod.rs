//! Conversations: who talks to which agent, on which revision, who owns the conversation (the AI
//! or a person), and the messages in order. The answer turn (`crate::turn`) writes them; the
//! history routes here read them. Test conversations (private test executions) are stored the
//! same way but never appear in history.

pub mod store;

use serde::Serialize;
use serde_json::{Value, json};

use crate::app::App;
use crate::auth::{Perm, Principal};
use crate::documents::{decode_cursor, encode_cursor};
use crate::error::{Error, Result};

pub const AI_OWNED: &str = "ai_owned";
pub const HUMAN_OWNED: &str = "human_owned";

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Ownership {
    pub state: String,
    pub version: i64,
    pub reason: Option<String>,
    pub owner_user_id: Option<String>,
    pub taken_over_at: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Conversation {
    pub id: String,
    pub workspace_id: String,
    pub agent_id: String,
    pub revision_id: Option<String>,
    pub channel: String,
    pub visibility: String,
    pub test_execution_id: Option<String>,
    pub ownership: Ownership,
    pub operator_replied: bool,
    pub state: Value,
    pub started_by: Option<String>,
    pub message_count: i64,
    pub last_message_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl Conversation {
    pub fn is_test(&self) -> bool {
        self.visibility == "test"
    }
    pub fn human_owned(&self) -> bool {
        self.ownership.state == HUMAN_OWNED
    }
    pub fn summary(&self) -> Value {
        json!({
            "id": self.id, "agentId": self.agent_id, "revisionId": self.revision_id, "channel": self.channel,
            "ownership": {"state": self.ownership.state, "version": self.ownership.version, "reason": self.ownership.reason},
            "messageCount": self.message_count, "lastMessageAt": self.last_message_at,
            "createdAt": self.created_at, "updatedAt": self.updated_at,
        })
    }
}

#[derive(Debug, Clone)]
pub struct Message {
    pub id: String,
    pub conversation_id: String,
    pub seq: i64,
    pub role: String,
    pub source: String,
    pub content: String,
    pub citations: Value,
    pub metadata: Value,
    pub trace_id: Option<String>,
    pub request_id: Option<String>,
    pub created_at: String,
}

impl Message {
    /// The history shape of a message (content included: history is for operators).
    pub fn view(&self) -> Value {
        let mut v = json!({
            "id": self.id, "role": self.role, "source": self.source, "text": self.content,
            "createdAt": self.created_at, "cursor": self.seq.to_string(),
        });
        if self.role == "assistant" {
            v["citations"] = self.citations.clone();
            v["traceId"] = json!(self.trace_id);
            for k in ["answerCoverage", "suggestions", "outcome"] {
                if let Some(x) = self.metadata.get(k) {
                    v[k] = x.clone();
                }
            }
        }
        if let Some(f) = self.metadata.get("turnFailure") {
            v["turnFailure"] = f.clone();
        }
        v
    }
}

/// A message to append.
pub struct NewMessage<'a> {
    pub conversation_id: &'a str,
    pub role: &'a str,
    pub source: &'a str,
    pub content: &'a str,
    pub citations: Value,
    pub metadata: Value,
    pub trace_id: Option<&'a str>,
    pub request_id: Option<&'a str>,
}

/// The conversation, or 404 when it is not in the workspace. Test conversations are 404 too
/// unless `include_test`.
pub fn find_in(c: &rusqlite::Connection, ws: &str, id: &str, include_test: bool) -> Result<Conversation> {
    match store::find(c, ws, id)? {
        Some(conv) if include_test || !conv.is_test() => Ok(conv),
        _ => Err(Error::not_found("conversation")),
    }
}

pub struct ListQuery {
    pub agent_id: Option<String>,
    pub ownership: Option<String>,
    pub cursor: Option<String>,
    pub limit: usize,
}

/// `GET /history/chat`: visitor conversations, most recently active first.
pub fn list(app: &App, p: &Principal, q: ListQuery) -> Result<Value> {
    p.require(Perm::ConversationsRead)?;
    if let Some(o) = &q.ownership
        && ![AI_OWNED, HUMAN_OWNED].contains(&o.as_str())
    {
        return Err(Error::invalid_field("ownership", "ownership is ai_owned or human_owned"));
    }
    let limit = q.limit.clamp(1, 100);
    let after = q.cursor.as_deref().map(decode_cursor).transpose()?;
    let ws = p.workspace_id.0.clone();
    let (mut rows, total) = app.db.read(|c| {
        store::list(
            c,
            &ws,
            q.agent_id.as_deref(),
            q.ownership.as_deref(),
            after.as_ref().map(|(a, b)| (a.as_str(), b.as_str())),
            limit + 1,
        )
    })?;
    let more = rows.len() > limit;
    rows.truncate(limit);
    let next = if more { rows.last().map(|c| encode_cursor(&c.updated_at, &c.id)) } else { None };
    Ok(
        json!({"conversations": rows.iter().map(Conversation::summary).collect::<Vec<_>>(), "total": total, "nextCursor": next, "hasMore": more}),
    )
}

/// `GET /history/chat/{id}`: the conversation with its messages (up to 200 from the start, or
/// after `cursor`) and the cursor of its newest message (`tailCursor`).
pub fn get(app: &App, p: &Principal, id: &str, cursor: Option<&str>) -> Result<Value> {
    p.require(Perm::ConversationsRead)?;
    let after = parse_seq(cursor)?;
    let ws = p.workspace_id.0.clone();
    app.db.read(|c| {
        let conv = find_in(c, &ws, id, false)?;
        let msgs = store::messages_after(c, &conv.id, after, 201)?;
        let more = msgs.len() > 200;
        let mut v = conv.summary();
        v["messages"] = json!(msgs.iter().take(200).map(Message::view).collect::<Vec<_>>());
        v["hasMore"] = json!(more);
        v["tailCursor"] = json!(conv.message_count.to_string());
        Ok(v)
    })
}

fn parse_seq(cursor: Option<&str>) -> Result<i64> {
    match cursor {
        None | Some("") => Ok(0),
        Some(c) => c.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
            Error::invalid_field("cursor", "the cursor is not valid; pass a cursor from a previous page")
        }),
    }
}

/// Page size of a tail read.
pub const TAIL_PAGE: usize = 50;

/// `GET /history/chat/{id}/tail`: messages after `cursor` (none: the newest page), the advanced
/// cursor and the ownership record.
pub fn tail(app: &App, p: &Principal, id: &str, cursor: Option<&str>) -> Result<Value> {
    p.require(Perm::ConversationsRead)?;
    let ws = p.workspace_id.0.clone();
    let after = cursor.map(|c| parse_seq(Some(c))).transpose()?;
    app.db.read(|c| {
        let conv = find_in(c, &ws, id, false)?;
        let msgs = match after {
            Some(seq) => store::messages_after(c, &conv.id, seq, TAIL_PAGE)?,
            None => store::last_messages(c, &conv.id, TAIL_PAGE)?,
        };
        let next = msgs.last().map(|m| m.seq).or(after).unwrap_or(0);
        Ok(json!({
            "conversationId": conv.id,
            "messages": msgs.iter().map(Message::view).collect::<Vec<_>>(),
            "cursor": next.to_string(),
            "ownership": {"state": conv.ownership.state, "version": conv.ownership.version, "reason": conv.ownership.reason},
        }))
    })
}
