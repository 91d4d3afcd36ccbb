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

/// Rates an answer (replacing an earlier rating, which reopens it).
pub fn rate(
    app: &App,
    p: &Principal,
    conversation: &str,
    message: &str,
    rating: &str,
    comment: Option<String>,
) -> Result<Feedback> {
    p.require(Perm::Chat)?;
    let rating = Rating::parse(rating).ok_or_else(|| Error::invalid_field("rating", "rating is up or down"))?;
    let comment = comment.map(|c| c.trim().to_string()).filter(|c| !c.is_empty());
    if comment.as_ref().is_some_and(|c| c.chars().count() > MAX_COMMENT_CHARS) {
        return Err(Error::invalid_field("comment", format!("comment must be at most {MAX_COMMENT_CHARS} characters")));
    }
    let ws = p.workspace_id.0.clone();
    let now = rfc3339(app.clock.now());
    let f = app.db.write(|tx| {
        find_in(tx, &ws, conversation, true)?;
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
            user_id: p.user_id.as_ref().map(|u| u.0.clone()),
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
pub fn clear(app: &App, p: &Principal, conversation: &str, message: &str) -> Result<()> {
    p.require(Perm::Chat)?;
    let ws = p.workspace_id.0.clone();
    let gone = app.db.write(|tx| {
        find_in(tx, &ws, conversation, true)?;
        store::delete_feedback(tx, &ws, conversation, message)
    })?;
    if !gone {
        return Err(Error::not_found("feedback"));
    }
    app.bus.publish(&ws, Some(conversation), BusKind::InboxChanged);
    Ok(())
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
    Handoff { conversation: Conversation, held_by: HeldBy, last_message: Option<Message> },
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
            items.push(InboxItem::Handoff { conversation: conv, held_by, last_message });
        }
        for (feedback, answer) in store::open_negative_feedback(c, &ws, INBOX_LIMIT)? {
            items.push(InboxItem::Feedback { feedback, answer });
        }
        Ok(items)
    })
}
