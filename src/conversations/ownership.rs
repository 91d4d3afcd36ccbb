//! Human takeover: an operator takes a conversation over, replies, transfers it to a teammate and
//! hands it back. Every action checks the ownership version the caller saw (`expectedVersion`),
//! writes the audit event `hitl.ownership` and tells the bus.
//!
//! Rules (spec: Human takeover; reference §1): a reply to an AI-owned or unclaimed conversation
//! claims it for the replier; a conversation a teammate holds refuses others (transfer it instead);
//! the transfer target must be a member of the workspace's organization who may take conversations
//! over; a stale version answers 409 with the current record in `details.ownership`.

use serde_json::json;

use super::{Conversation, Message, NewMessage, OwnershipChange, OwnershipState, Role, Source, find_in, store};
use crate::app::App;
use crate::audit::{self, Event};
use crate::auth::{Perm, Principal, accounts};
use crate::bus::BusKind;
use crate::clock::rfc3339;
use crate::error::{Error, ErrorCode, Result};
use crate::storage::Tx;

/// Longest takeover reason.
pub const MAX_REASON_CHARS: usize = 500;
/// Longest operator reply.
pub const MAX_REPLY_CHARS: usize = 50_000;

fn conflict(conv: &Conversation, code: &str, message: &str) -> Error {
    Error::new(ErrorCode::Conflict, message)
        .with_details(json!({"code": code, "ownership": super::api::ownership_record(conv)}))
}

fn check_version(conv: &Conversation, expected: i64) -> Result<()> {
    if conv.ownership.version != expected {
        return Err(conflict(conv, "stale_version", "Conversation ownership changed"));
    }
    Ok(())
}

fn me(p: &Principal) -> Result<String> {
    p.require_session()?;
    p.require(Perm::ConversationTakeover)?;
    p.user_id.as_ref().map(|u| u.0.clone()).ok_or_else(crate::auth::session_only_error)
}

fn audit(
    app: &App,
    tx: &Tx,
    p: &Principal,
    conv: &Conversation,
    action: &str,
    version: i64,
    extra: serde_json::Value,
) -> Result<()> {
    let mut meta = json!({"action": action, "version": version});
    if let (Some(m), Some(x)) = (meta.as_object_mut(), extra.as_object()) {
        m.extend(x.clone());
    }
    let ws = p.workspace_id.clone();
    let event = Event::new("hitl.ownership").workspace(&ws).target("conversation", &conv.id).meta(meta);
    audit::record(tx, &rfc3339(app.clock.now()), &p.actor(None), event)
}

/// Runs an ownership change in one transaction and returns the conversation after it.
fn change(
    app: &App,
    p: &Principal,
    id: &str,
    f: impl FnOnce(&Tx, &Conversation, &str) -> Result<()>,
) -> Result<Conversation> {
    let ws = p.workspace_id.0.clone();
    let now = rfc3339(app.clock.now());
    let conv = app.db.write(|tx| {
        let conv = find_in(tx, &ws, id, false)?;
        f(tx, &conv, &now)?;
        find_in(tx, &ws, id, false)
    })?;
    app.bus.publish(&ws, Some(id), BusKind::OwnershipChanged);
    Ok(conv)
}

/// `POST /conversations/{id}/takeover`: the caller owns the conversation. Taking over what you
/// already hold returns it unchanged; what a teammate holds answers 409 `held_by_teammate`.
pub fn takeover(app: &App, p: &Principal, id: &str, reason: Option<String>) -> Result<Conversation> {
    let user = me(p)?;
    let reason = reason.map(|r| r.trim().to_string()).filter(|r| !r.is_empty());
    if reason.as_ref().is_some_and(|r| r.chars().count() > MAX_REASON_CHARS) {
        return Err(Error::invalid_field("reason", format!("reason must be at most {MAX_REASON_CHARS} characters")));
    }
    change(app, p, id, |tx, conv, now| {
        let o = &conv.ownership;
        if o.state == OwnershipState::HumanOwned {
            match o.owner_user_id.as_deref() {
                Some(u) if u == user => return Ok(()),
                Some(_) => {
                    return Err(conflict(
                        conv,
                        "held_by_teammate",
                        "A teammate holds this conversation; ask them to transfer it",
                    ));
                }
                None => {}
            }
        }
        let keep_reason = (o.state == OwnershipState::HumanOwned).then(|| o.reason.clone()).flatten();
        let ch = OwnershipChange {
            state: OwnershipState::HumanOwned,
            owner_user_id: Some(user.clone()),
            reason: reason.clone().or(keep_reason).or_else(|| Some("operator_takeover".into())),
            operator_replied: conv.operator_replied,
        };
        let v = store::write_ownership(tx, &conv.id, &ch, true, now)?;
        audit(app, tx, p, conv, "taken_over", v, json!({"reason": ch.reason}))
    })
}

/// `POST /conversations/{id}/reply`: an operator's message, saved as an assistant message with
/// source `human_agent` and the operator in its metadata. Claims an AI-owned or unclaimed
/// conversation.
pub fn reply(
    app: &App,
    p: &Principal,
    id: &str,
    message: &str,
    expected_version: i64,
) -> Result<(Message, Conversation)> {
    let user = me(p)?;
    let text = message.trim();
    if text.is_empty() {
        return Err(Error::invalid_field("message", "message must not be empty"));
    }
    if text.chars().count() > MAX_REPLY_CHARS {
        return Err(Error::invalid_field("message", format!("message must be at most {MAX_REPLY_CHARS} characters")));
    }
    let name = app
        .db
        .read(|c| accounts::member(c, &p.org_id, &user))?
        .map(|(u, _)| accounts::display_name(&u))
        .unwrap_or_else(|| "Operator".into());
    let ws = p.workspace_id.0.clone();
    let mut saved = None;
    let conv = change(app, p, id, |tx, conv, now| {
        check_version(conv, expected_version)?;
        let o = &conv.ownership;
        if o.state == OwnershipState::HumanOwned && o.owner_user_id.as_deref().is_some_and(|u| u != user) {
            return Err(conflict(
                conv,
                "held_by_teammate",
                "A teammate holds this conversation; ask them to transfer it",
            ));
        }
        let claims = o.state == OwnershipState::AiOwned || o.owner_user_id.is_none();
        let ch = OwnershipChange {
            state: OwnershipState::HumanOwned,
            owner_user_id: Some(user.clone()),
            reason: o
                .reason
                .clone()
                .filter(|_| o.state == OwnershipState::HumanOwned)
                .or_else(|| Some("operator_takeover".into())),
            operator_replied: true,
        };
        let v = store::write_ownership(tx, &conv.id, &ch, claims, now)?;
        let m = super::append_message(
            tx,
            &ws,
            &NewMessage {
                conversation_id: &conv.id,
                role: Role::Assistant,
                source: Source::HumanAgent,
                content: text,
                citations: json!([]),
                metadata: json!({"operator": {"accountId": user, "displayName": name}}),
                trace_id: None,
                request_id: None,
            },
            now,
        )?;
        saved = Some(m);
        audit(app, tx, p, conv, "replied", v, json!({"claimed": claims}))
    })?;
    app.bus.publish(&ws, Some(id), BusKind::MessageCreated);
    let m = saved.ok_or_else(|| Error::internal_msg("reply saved no message"))?;
    Ok((m, conv))
}

/// Whether the caller may move a conversation someone holds: its holder, anyone while nobody
/// holds it, or an admin (who may manage members).
fn may_move(conv: &Conversation, user: &str, p: &Principal) -> bool {
    conv.ownership.owner_user_id.as_deref().is_none_or(|o| o == user) || p.has(Perm::MembersManage)
}

/// `POST /conversations/{id}/transfer`: another member who may take conversations over holds it.
pub fn transfer(app: &App, p: &Principal, id: &str, to: &str, expected_version: i64) -> Result<Conversation> {
    let user = me(p)?;
    let target = app.db.read(|c| accounts::member(c, &p.org_id, to))?;
    if !target.as_ref().is_some_and(|(_, role)| role.permissions().contains(Perm::ConversationTakeover)) {
        return Err(
            Error::new(ErrorCode::NotFound, "Transfer target not found").with_details(json!({"field": "toAccountId"}))
        );
    }
    change(app, p, id, |tx, conv, now| {
        check_version(conv, expected_version)?;
        if conv.ownership.state != OwnershipState::HumanOwned {
            return Err(conflict(conv, "not_human_owned", "Take the conversation over before transferring it"));
        }
        if !may_move(conv, &user, p) {
            return Err(conflict(
                conv,
                "held_by_teammate",
                "A teammate holds this conversation; only they or an admin can transfer it",
            ));
        }
        if conv.ownership.owner_user_id.as_deref() == Some(to) {
            return Ok(()); // already theirs: nothing changes
        }
        let ch = OwnershipChange {
            state: OwnershipState::HumanOwned,
            owner_user_id: Some(to.to_string()),
            reason: conv.ownership.reason.clone(),
            operator_replied: conv.operator_replied,
        };
        let v = store::write_ownership(tx, &conv.id, &ch, true, now)?;
        audit(app, tx, p, conv, "transferred", v, json!({"toAccountId": to}))
    })
}

/// `POST /conversations/{id}/handback`: the AI answers again from the next visitor message.
pub fn handback(app: &App, p: &Principal, id: &str, expected_version: i64) -> Result<Conversation> {
    let user = me(p)?;
    change(app, p, id, |tx, conv, now| {
        check_version(conv, expected_version)?;
        if conv.ownership.state != OwnershipState::HumanOwned {
            return Err(conflict(conv, "not_human_owned", "The conversation is not human-owned"));
        }
        if !may_move(conv, &user, p) {
            return Err(conflict(
                conv,
                "held_by_teammate",
                "A teammate holds this conversation; only they or an admin can hand it back",
            ));
        }
        let ch = OwnershipChange {
            state: OwnershipState::AiOwned,
            owner_user_id: None,
            reason: None,
            operator_replied: false,
        };
        let v = store::write_ownership(tx, &conv.id, &ch, true, now)?;
        audit(app, tx, p, conv, "handed_back", v, json!({}))
    })
}
