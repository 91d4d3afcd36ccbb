//! What a visitor may read back on their session: the session's own conversations, a
//! conversation's messages, new messages after a cursor (the tail), and feedback on answers. Any
//! conversation that is not the session's is 404, as if it did not exist. Nothing here shows who
//! owns a conversation beyond whether a person has it, or an operator's account id (an operator's
//! reply carries only their display name).

use super::session::Session;
use crate::app::App;
use crate::conversations::{self, Conversation, Message, OwnershipState, feedback};
use crate::error::{Error, ErrorCode, Result};

/// Conversations a session lists at most.
const LIST_LIMIT: usize = 50;

fn not_found() -> Error {
    Error::new(ErrorCode::NotFound, "Not found")
}

/// The session's conversation `id`, else 404.
fn own(c: &crate::storage::Conn, s: &Session, id: &str) -> Result<Conversation> {
    if !crate::ids::is_uuid(id) {
        return Err(not_found());
    }
    let conv = conversations::find_in(c, &s.workspace_id, id, false).map_err(|_| not_found())?;
    if conv.public_session_id.as_deref() != Some(s.public_session_id.as_str()) {
        return Err(not_found());
    }
    Ok(conv)
}

/// The session's conversations, most recently active first.
pub fn list(app: &App, s: &Session) -> Result<Vec<Conversation>> {
    app.db.read(|c| conversations::of_public_session(c, &s.workspace_id, &s.public_session_id, LIST_LIMIT))
}

/// A conversation's messages as the visitor sees them.
pub struct History {
    pub conversation_id: String,
    pub messages: Vec<Message>,
    pub has_more: bool,
    pub tail_cursor: i64,
    /// Whether a person has the conversation.
    pub human_owned: bool,
}

/// `GET …/history/{id}`: up to 200 messages from the start (or after `cursor`).
pub fn history(app: &App, s: &Session, id: &str, cursor: Option<&str>) -> Result<History> {
    let after = conversations::parse_seq(cursor)?;
    app.db.read(|c| {
        let conv = own(c, s, id)?;
        let mut messages = conversations::messages_after(c, &conv.id, after, conversations::HISTORY_PAGE + 1)?;
        let has_more = messages.len() > conversations::HISTORY_PAGE;
        messages.truncate(conversations::HISTORY_PAGE);
        Ok(History {
            conversation_id: conv.id,
            messages,
            has_more,
            tail_cursor: conv.message_count,
            human_owned: conv.ownership.state == OwnershipState::HumanOwned,
        })
    })
}

/// New messages of a conversation.
pub struct Tail {
    pub conversation_id: String,
    pub messages: Vec<Message>,
    pub cursor: i64,
}

/// `GET …/tail/{id}?cursor=`: messages after `cursor` (none: the newest page) and the advanced
/// cursor.
pub fn tail(app: &App, s: &Session, id: &str, cursor: Option<&str>) -> Result<Tail> {
    let after = cursor.map(|c| conversations::parse_seq(Some(c))).transpose()?;
    app.db.read(|c| {
        let conv = own(c, s, id)?;
        let messages = match after {
            Some(seq) => conversations::messages_after(c, &conv.id, seq, conversations::TAIL_PAGE)?,
            None => conversations::last_messages(c, &conv.id, conversations::TAIL_PAGE)?,
        };
        let cursor = messages.last().map(|m| m.seq).or(after).unwrap_or(0);
        Ok(Tail { conversation_id: conv.id, messages, cursor })
    })
}

/// Checks that `id` is one of the session's conversations (the events stream).
pub fn check_own(app: &App, s: &Session, id: &str) -> Result<()> {
    app.db.read(|c| own(c, s, id)).map(|_| ())
}

/// Rates an answer of one of the session's conversations.
pub fn rate(
    app: &App,
    s: &Session,
    message_id: &str,
    rating: &str,
    comment: Option<String>,
) -> Result<feedback::Feedback> {
    let (cid, by) = rater(app, s, message_id)?;
    feedback::rate(app, by, &cid, message_id, rating, comment)
}

/// Removes the visitor's rating of an answer.
pub fn clear(app: &App, s: &Session, message_id: &str) -> Result<()> {
    let (cid, by) = rater(app, s, message_id)?;
    feedback::clear(app, by, &cid, message_id)
}

fn rater<'a>(app: &App, s: &'a Session, message_id: &str) -> Result<(String, feedback::Rater<'a>)> {
    if !crate::ids::is_uuid(message_id) {
        return Err(not_found());
    }
    let cid = feedback::conversation_of_message(app, &s.workspace_id, message_id).map_err(|_| not_found())?;
    let by = feedback::Rater::Visitor { workspace_id: &s.workspace_id, public_session_id: &s.public_session_id };
    Ok((cid, by))
}
