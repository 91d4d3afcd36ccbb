//! Answer feedback and the operator inbox.
//!
//! Whoever can chat rates an answer up or down with an optional comment (API chat and test chat).
//! The inbox lists what needs a person: open handoffs (awaiting anyone, held by me, held by a
//! teammate), then unresolved negative feedback, each newest first. Done on a handoff is a
//! handback (`ownership::handback`); Done on feedback resolves it here. Approvals join the inbox
//! with the routines issue as a third kind of [`InboxItem`].

use super::{Conversation, Message, Role, find_in, store};
use crate::app::App;
use crate::auth::{Perm, Principal};
use crate::bus::BusKind;
use crate::clock::rfc3339;
use crate::error::{Error, Result};
use crate::names::names;

/// Longest feedback comment.
pub const MAX_COMMENT_CHARS: usize = 2_000;

names! {
    /// Thumbs up or down.
    pub Rating { Up = "up", Down = "down" }
}

/// One answer's feedback.
#[derive(Debug, Clone)]
pub struct Feedback {
    pub message_id: String,
    pub workspace_id: String,
    pub conversation_id: String,
    pub rating: Rating,
    pub comment: Option<String>,
    pub user_id: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub resolved_at: Option<String>,
}

/// Who gives feedback: a signed-in user or API caller of the workspace, or an anonymous visitor
/// rating an answer in one of their own public conversations.
#[derive(Debug, Clone)]
pub enum Rater<'a> {
    Member(&'a Principal),
    Visitor { workspace_id: &'a str, public_session_id: &'a str },
}

impl Rater<'_> {
    fn workspace(&self) -> Result<String> {
        match self {
            Rater::Member(p) => {
                p.require(Perm::Chat)?;
                Ok(p.workspace_id.0.clone())
            }
            Rater::Visitor { workspace_id, .. } => Ok(workspace_id.to_string()),
        }
    }

    fn user_id(&self) -> Option<String> {
        match self {
            Rater::Member(p) => p.user_id.as_ref().map(|u| u.0.clone()),
            Rater::Visitor { .. } => None,
        }
    }

    /// The conversation, when this rater may rate in it (a visitor only in their own).
    fn conversation(&self, c: &crate::storage::Conn, ws: &str, id: &str) -> Result<Conversation> {
        let conv = find_in(c, ws, id, matches!(self, Rater::Member(_)))?;
        match self {
            Rater::Visitor { public_session_id, .. }
                if conv.public_session_id.as_deref() != Some(public_session_id) =>
            {
                Err(Error::not_found("conversation"))
            }
            _ => Ok(conv),
        }
    }
}

/// Rates an answer (replacing an earlier rating, which reopens it).
pub fn rate(
    app: &App,
    by: Rater,
    conversation: &str,
    message: &str,
    rating: &str,
    comment: Option<String>,
) -> Result<Feedback> {
    let ws = by.workspace()?;
    let rating = Rating::parse(rating).ok_or_else(|| Error::invalid_field("rating", "rating is up or down"))?;
    let comment = comment.map(|c| c.trim().to_string()).filter(|c| !c.is_empty());
    if comment.as_ref().is_some_and(|c| c.chars().count() > MAX_COMMENT_CHARS) {
        return Err(Error::invalid_field("comment", format!("comment must be at most {MAX_COMMENT_CHARS} characters")));
    }
    let now = rfc3339(app.clock.now());
    let f = app.db.write(|tx| {
        by.conversation(tx, &ws, conversation)?;
        let m = store::message(tx, &ws, message)?
            .filter(|m| m.conversation_id == conversation)
            .ok_or_else(|| Error::not_found("message"))?;
        if m.role != Role::Assistant {
            return Err(Error::invalid_field("messageId", "only answers (assistant messages) take feedback"));
        }
        let f = Feedback {
            message_id: m.id,
            workspace_id: ws.clone(),
            conversation_id: conversation.to_string(),
            rating,
            comment,
            user_id: by.user_id(),
            created_at: now.clone(),
            updated_at: now.clone(),
            resolved_at: None,
        };
        store::upsert_feedback(tx, &f)?;
        store::feedback_of(tx, &ws, &f.message_id)?.ok_or_else(|| Error::internal_msg("feedback vanished"))
    })?;
    app.bus.publish(&ws, Some(conversation), BusKind::InboxChanged);
    Ok(f)
}

/// Removes an answer's feedback.
pub fn clear(app: &App, by: Rater, conversation: &str, message: &str) -> Result<()> {
    let ws = by.workspace()?;
    let gone = app.db.write(|tx| {
        by.conversation(tx, &ws, conversation)?;
        store::delete_feedback(tx, &ws, conversation, message)
    })?;
    if !gone {
        return Err(Error::not_found("feedback"));
    }
    app.bus.publish(&ws, Some(conversation), BusKind::InboxChanged);
    Ok(())
}

/// The conversation an answer belongs to (public feedback routes name only the message).
pub fn conversation_of_message(app: &App, ws: &str, message: &str) -> Result<String> {
    app.db
        .read(|c| store::message(c, ws, message))?
        .map(|m| m.conversation_id)
        .ok_or_else(|| Error::not_found("message"))
}

/// Done on a feedback item.
pub fn resolve(app: &App, p: &Principal, message: &str) -> Result<()> {
    p.require(Perm::ConversationTakeover)?;
    let ws = p.workspace_id.0.clone();
    let by = p.user_id.as_ref().map(|u| u.0.clone()).unwrap_or_default();
    let now = rfc3339(app.clock.now());
    if !app.db.write(|tx| store::resolve_feedback(tx, &ws, message, &by, &now))? {
        return Err(Error::not_found("open feedback"));
    }
    app.bus.publish(&ws, None, BusKind::InboxChanged);
    Ok(())
}

/// Who holds a handoff, from the caller's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldBy {
    Nobody,
    Me,
    Teammate,
}

/// One inbox item.
#[derive(Debug, Clone)]
pub enum InboxItem {
    Handoff { conversation: Box<Conversation>, held_by: HeldBy, last_message: Option<Message> },
    Feedback { feedback: Feedback, answer: Message },
}

/// Most items of each kind the inbox returns.
pub const INBOX_LIMIT: usize = 200;

/// `GET /inbox`: open handoffs (newest first), then open negative feedback (newest first).
pub fn inbox(app: &App, p: &Principal) -> Result<Vec<InboxItem>> {
    p.require(Perm::ConversationTakeover)?;
    let ws = p.workspace_id.0.clone();
    let me = p.user_id.as_ref().map(|u| u.0.clone());
    app.db.read(|c| {
        let mut items = Vec::new();
        for conv in store::open_handoffs(c, &ws, INBOX_LIMIT)? {
            let held_by = match (&conv.ownership.owner_user_id, &me) {
                (None, _) => HeldBy::Nobody,
                (Some(o), Some(m)) if o == m => HeldBy::Me,
                _ => HeldBy::Teammate,
            };
            let last_message = store::last_messages(c, &conv.id, 1)?.pop();
            items.push(InboxItem::Handoff { conversation: Box::new(conv), held_by, last_message });
        }
        for (feedback, answer) in store::open_negative_feedback(c, &ws, INBOX_LIMIT)? {
            items.push(InboxItem::Feedback { feedback, answer });
        }
        Ok(items)
    })
}
