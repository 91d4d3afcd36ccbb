//! Conversations: who talks to which agent, on which revision, who owns the conversation (the AI
//! or a person), and the messages in order. The answer turn (`crate::turn`) writes them through
//! the functions here; the history routes read them. Test conversations (private test executions)
//! are stored the same way but never appear in history.
//!
//! Typed records in and out; all SQL is in the private `store.rs`; the wire shapes are in
//! `api.rs` (owned by the HTTP edge).

pub mod api;
pub mod feedback;
pub mod ownership;
mod store;

use serde_json::Value;

use crate::app::App;
use crate::auth::{Perm, Principal};
use crate::documents::{decode_cursor, encode_cursor};
use crate::error::{Error, Result};
use crate::names::names;
use crate::storage::{Conn, Later, Tx};

/// A conversation's free-form state (routines keep their progress here). Stored as JSON.
pub type ConversationState = Value;
/// A message's free-form metadata (coverage, suggestions, the turn id, a turn failure). Stored as
/// JSON, and shown in history as the reference describes.
pub type MessageMetadata = Value;
/// A message's citations, as the turn that wrote them recorded them. Stored as JSON.
pub type CitationsJson = Value;

names! {
    /// Who answers the conversation.
    pub OwnershipState { AiOwned = "ai_owned", HumanOwned = "human_owned" }
}

names! {
    /// Visitor conversations appear in history; test conversations belong to a test execution.
    pub Visibility { Visitor = "visitor", Test = "test" }
}

names! {
    /// Where the conversation takes place.
    pub Channel {
        Api = "api", Test = "test", AnonymousLink = "anonymous_link", WebsiteEmbed = "website_embed",
        /// Another AI agent over the converse surface (REST converse routes or `/mcp`).
        Mcp = "mcp",
        /// A customer on WhatsApp (the `whatsapp` connector): replies are relayed there.
        Whatsapp = "whatsapp",
    }
}

names! {
    /// Who a message is from, as a chat model sees it.
    pub Role { User = "user", Assistant = "assistant" }
}

names! {
    /// Who wrote a message.
    pub Source { Visitor = "visitor", Tester = "tester", Agent = "agent", HumanAgent = "human_agent" }
}

/// The ownership record.
#[derive(Debug, Clone)]
pub struct Ownership {
    pub state: OwnershipState,
    pub version: i64,
    pub reason: Option<String>,
    pub owner_user_id: Option<String>,
    /// The owner's name, else their email.
    pub owner_display_name: Option<String>,
    pub taken_over_at: Option<String>,
}

/// A new ownership state for [`ownership`]'s operations.
#[derive(Debug, Clone)]
pub struct OwnershipChange {
    pub state: OwnershipState,
    pub owner_user_id: Option<String>,
    pub reason: Option<String>,
    pub operator_replied: bool,
}

#[derive(Debug, Clone)]
pub struct Conversation {
    pub id: String,
    pub workspace_id: String,
    pub agent_id: String,
    pub revision_id: Option<String>,
    pub channel: Channel,
    pub visibility: Visibility,
    pub test_execution_id: Option<String>,
    pub ownership: Ownership,
    pub operator_replied: bool,
    pub state: ConversationState,
    pub started_by: Option<String>,
    /// The anonymous visitor session of a public-chat conversation.
    pub public_session_id: Option<String>,
    pub message_count: i64,
    pub last_message_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl Conversation {
    pub fn is_test(&self) -> bool {
        self.visibility == Visibility::Test
    }
    pub fn human_owned(&self) -> bool {
        self.ownership.state == OwnershipState::HumanOwned
    }
}

#[derive(Debug, Clone)]
pub struct Message {
    pub id: String,
    pub conversation_id: String,
    pub seq: i64,
    pub role: Role,
    pub source: Source,
    pub content: String,
    pub citations: CitationsJson,
    pub metadata: MessageMetadata,
    pub trace_id: Option<String>,
    pub request_id: Option<String>,
    pub created_at: String,
}

/// A conversation to start.
pub struct NewConversation<'a> {
    pub workspace_id: &'a str,
    pub agent_id: &'a str,
    /// The revision the conversation is pinned to (none: the agent has no published revision).
    pub revision_id: Option<&'a str>,
    pub channel: Channel,
    pub visibility: Visibility,
    pub test_execution_id: Option<&'a str>,
    pub started_by: Option<&'a str>,
    /// The anonymous visitor session (public chat only).
    pub public_session_id: Option<&'a str>,
}

/// A message to append.
pub struct NewMessage<'a> {
    pub conversation_id: &'a str,
    pub role: Role,
    pub source: Source,
    pub content: &'a str,
    pub citations: CitationsJson,
    pub metadata: MessageMetadata,
    pub trace_id: Option<&'a str>,
    pub request_id: Option<&'a str>,
}

/// Starts a conversation; returns its id.
pub fn start(tx: &Tx, c: &NewConversation, now: &str) -> Result<String> {
    let id = crate::ids::new_id();
    store::insert(tx, &id, c, now)?;
    Ok(id)
}

/// The conversation, or 404 when it is not in the workspace. Test conversations are 404 too
/// unless `include_test`.
pub fn find_in(c: &Conn, ws: &str, id: &str, include_test: bool) -> Result<Conversation> {
    match store::find(c, ws, id)? {
        Some(conv) if include_test || !conv.is_test() => Ok(conv),
        _ => Err(Error::not_found("conversation")),
    }
}

/// The visitor conversations of an anonymous public session, most recently active first (at most
/// `limit`).
pub fn of_public_session(c: &Conn, ws: &str, public_session_id: &str, limit: usize) -> Result<Vec<Conversation>> {
    store::of_public_session(c, ws, public_session_id, limit)
}

/// The job that relays a conversation's replies to the outside channel it takes place on (a
/// `whatsapp` conversation's agent and operator replies go to the customer). This module queues
/// it with the reply; the channel's connector handles it (`connectors::whatsapp`).
pub const RELAY_JOB: &str = "conversation.relay";

impl Channel {
    /// Whether replies in a conversation on this channel are relayed by [`RELAY_JOB`].
    pub fn relayed(self) -> bool {
        self == Channel::Whatsapp
    }
}

/// Appends a message at the end of the conversation; a reply in a relayed conversation queues
/// its relay in the same transaction.
pub fn append_message(tx: &Tx, ws: &str, m: &NewMessage, now: &str) -> Result<Message> {
    Ok(append_and_read(tx, ws, m, now)?.0)
}

/// [`append_message`], with the conversation as the message leaves it (read by the statement
/// that appends, so a turn that opens with its visitor's message reads the conversation in the
/// same round trip); 404 when the conversation is not in the workspace (test conversations
/// included).
pub fn append_and_read(tx: &Tx, ws: &str, m: &NewMessage, now: &str) -> Result<(Message, Conversation)> {
    let (msg, conv) = store::append(tx, ws, m, now)?.ok_or_else(|| Error::not_found("conversation"))?;
    if m.role == Role::Assistant && conv.channel.relayed() {
        let job = crate::jobs::NewJob::new(
            RELAY_JOB,
            serde_json::json!({"workspaceId": ws, "conversationId": m.conversation_id, "messageId": msg.id}),
        )
        .dedupe(format!("relay:{}", msg.id))
        .workspace(ws)
        .priority(5)
        .max_attempts(10);
        let now_ms = crate::clock::parse_rfc3339(now).map(|t| t.timestamp_millis()).unwrap_or_default();
        crate::jobs::enqueue_tx_deferred(tx, now_ms, 10, &job)?;
    }
    Ok((msg, conv))
}

/// Whether the turn `turn_id` saved its user message in the conversation, and the reply it
/// saved, if any (a job re-running a turn after a crash asks before answering twice).
pub fn turn_messages(c: &Conn, conversation: &str, turn_id: &str) -> Result<(bool, Option<Message>)> {
    store::turn_messages(c, conversation, turn_id)
}

/// A message of the workspace.
pub fn message(c: &Conn, ws: &str, id: &str) -> Result<Option<Message>> {
    store::message(c, ws, id)
}

/// Messages after position `after_seq`, oldest first, at most `limit`.
pub fn messages_after(c: &Conn, conversation: &str, after_seq: i64, limit: usize) -> Result<Vec<Message>> {
    store::messages_after(c, conversation, after_seq, limit)
}

/// Where a message of this workspace is: its conversation and position.
pub fn message_position(c: &Conn, ws: &str, message_id: &str) -> Result<Option<(String, i64)>> {
    store::message_position(c, ws, message_id)
}

/// The last `limit` messages, oldest first.
pub fn last_messages(c: &Conn, conversation: &str, limit: usize) -> Result<Vec<Message>> {
    store::last_messages(c, conversation, limit)
}

/// [`last_messages`] as the transaction stands, read with its next statement or its commit
/// ([`crate::storage::Tx::query_later`]).
pub fn last_messages_later(tx: &Tx, conversation: &str, limit: usize) -> Result<Later<Vec<Message>>> {
    store::last_messages_later(tx, conversation, limit)
}

/// Replaces the conversation's state.
pub fn set_state(tx: &Tx, id: &str, state: &ConversationState, now: &str) -> Result<()> {
    store::set_state(tx, id, state, now)
}

/// Replaces the state only if it is still `expected` (what the caller read); false when another
/// writer changed it in between (the caller's view is stale).
pub fn set_state_if(
    tx: &Tx,
    id: &str,
    expected: &ConversationState,
    state: &ConversationState,
    now: &str,
) -> Result<bool> {
    store::set_state_if(tx, id, expected, state, now)
}

/// Hands the conversation to a person (`reason`, for example `retrieval_miss`); returns the new
/// ownership version.
pub fn hand_off(tx: &Tx, id: &str, reason: &str, now: &str) -> Result<i64> {
    store::set_ownership(tx, id, OwnershipState::HumanOwned, Some(reason), now)
}

/// How a turn that did not finish ended, kept on its user message for the dashboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnFailure {
    /// A newer message replaced it.
    Cancelled,
    /// It failed.
    Failed,
}

impl TurnFailure {
    pub const fn as_str(self) -> &'static str {
        match self {
            TurnFailure::Cancelled => "cancelled",
            TurnFailure::Failed => "failed",
        }
    }
}

/// Records on the user message a turn saved (found by its `turn_id`) that the turn ended at
/// `stage` without a reply.
pub fn mark_turn_failed(tx: &Tx, conversation: &str, turn_id: &str, failure: TurnFailure, stage: &str) -> Result<()> {
    let patch = serde_json::json!({"turnFailure": {"eventStatus": failure.as_str(), "stage": stage}});
    store::patch_turn_message(tx, conversation, turn_id, &patch)
}

/// What `GET /history/chat` asks for.
pub struct ListQuery {
    pub agent_id: Option<String>,
    pub ownership: Option<String>,
    pub cursor: Option<String>,
    pub limit: usize,
}

/// A page of conversations.
pub struct ConversationPage {
    pub conversations: Vec<Conversation>,
    pub total: i64,
    pub next_cursor: Option<String>,
    pub has_more: bool,
}

/// `GET /history/chat`: visitor conversations, most recently active first.
pub fn list(app: &App, p: &Principal, q: ListQuery) -> Result<ConversationPage> {
    p.require(Perm::ConversationsRead)?;
    let ownership = match q.ownership.as_deref() {
        None => None,
        Some(o) => Some(
            OwnershipState::parse(o)
                .ok_or_else(|| Error::invalid_field("ownership", "ownership is ai_owned or human_owned"))?,
        ),
    };
    let limit = q.limit.clamp(1, 100);
    let after = q.cursor.as_deref().map(decode_cursor).transpose()?;
    let ws = p.workspace_id.0.clone();
    let (mut rows, total) = app.db.read(|c| {
        store::list(
            c,
            &ws,
            q.agent_id.as_deref(),
            ownership,
            after.as_ref().map(|(a, b)| (a.as_str(), b.as_str())),
            limit + 1,
        )
    })?;
    let has_more = rows.len() > limit;
    rows.truncate(limit);
    let next_cursor = if has_more { rows.last().map(|c| encode_cursor(&c.updated_at, &c.id)) } else { None };
    Ok(ConversationPage { conversations: rows, total, next_cursor, has_more })
}

/// A conversation with a page of its messages.
pub struct ConversationDetail {
    pub conversation: Conversation,
    pub messages: Vec<Message>,
    pub has_more: bool,
    /// The cursor of the newest message.
    pub tail_cursor: i64,
}

/// Messages a history page shows at most.
pub const HISTORY_PAGE: usize = 200;

/// `GET /history/chat/{id}`: the conversation with its messages (up to 200 from the start, or
/// after `cursor`) and the cursor of its newest message.
pub fn get(app: &App, p: &Principal, id: &str, cursor: Option<&str>) -> Result<ConversationDetail> {
    p.require(Perm::ConversationsRead)?;
    let after = parse_seq(cursor)?;
    let ws = p.workspace_id.0.clone();
    app.db.read(|c| {
        let conversation = find_in(c, &ws, id, false)?;
        let mut messages = store::messages_after(c, &conversation.id, after, HISTORY_PAGE + 1)?;
        let has_more = messages.len() > HISTORY_PAGE;
        messages.truncate(HISTORY_PAGE);
        let tail_cursor = conversation.message_count;
        Ok(ConversationDetail { conversation, messages, has_more, tail_cursor })
    })
}

/// A message cursor (a position in the conversation); none or empty is the start.
pub fn parse_seq(cursor: Option<&str>) -> Result<i64> {
    match cursor {
        None | Some("") => Ok(0),
        Some(c) => c.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
            Error::invalid_field("cursor", "the cursor is not valid; pass a cursor from a previous page")
        }),
    }
}

/// Page size of a tail read.
pub const TAIL_PAGE: usize = 50;

/// The replies (assistant-role messages: the agent's and operators') of a conversation after
/// position `after` (none: the last `limit`), oldest first. For surfaces that show only what was
/// said to the caller (the converse updates).
pub fn replies(c: &Conn, conversation_id: &str, after: Option<i64>, limit: usize) -> Result<Vec<Message>> {
    store::replies(c, conversation_id, after, limit)
}

/// New messages of a conversation.
pub struct Tail {
    pub conversation_id: String,
    pub messages: Vec<Message>,
    /// The advanced cursor.
    pub cursor: i64,
    pub ownership: Ownership,
}

/// `GET /history/chat/{id}/tail`: messages after `cursor` (none: the newest page), the advanced
/// cursor and the ownership record.
pub fn tail(app: &App, p: &Principal, id: &str, cursor: Option<&str>) -> Result<Tail> {
    p.require(Perm::ConversationsRead)?;
    let ws = p.workspace_id.0.clone();
    let after = cursor.map(|c| parse_seq(Some(c))).transpose()?;
    app.db.read(|c| {
        let conv = find_in(c, &ws, id, false)?;
        let messages = match after {
            Some(seq) => store::messages_after(c, &conv.id, seq, TAIL_PAGE)?,
            None => store::last_messages(c, &conv.id, TAIL_PAGE)?,
        };
        let cursor = messages.last().map(|m| m.seq).or(after).unwrap_or(0);
        Ok(Tail { conversation_id: conv.id, messages, cursor, ownership: conv.ownership })
    })
}
