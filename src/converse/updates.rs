//! Conversation updates for a calling agent: the replies (the agent's and operators') after a
//! cursor, in pages of [`PAGE`], with a long poll woken by the event bus the operator and visitor
//! streams use (no polling loop: a waiting call costs nothing until a message arrives).

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;

use super::session::Caller;
use crate::app::App;
use crate::bus::BusKind;
use crate::conversations::{self, OwnershipState, Source};
use crate::error::{Error, Result};

/// Messages per page (fixed).
pub const PAGE: usize = 50;
/// Longest wait a call may ask for.
pub const MAX_WAIT_MS: u64 = 25_000;
/// Longest cursor accepted.
const MAX_CURSOR: usize = 1024;

/// One reply as a calling agent sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    pub id: String,
    /// `agent`, or `human` for an operator's reply.
    pub author: &'static str,
    pub created_at: String,
    pub text: String,
}

/// A page of updates.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdatePage {
    pub messages: Vec<Update>,
    /// Where the next call continues (none: the conversation has no reply yet).
    pub cursor: Option<String>,
    pub ownership: OwnershipState,
}

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
}

fn encode(seq: i64) -> String {
    b64().encode(format!("m1:{seq}"))
}

fn bad_cursor() -> Error {
    Error::invalid_field("cursor", "cursor is not one this conversation gave out")
}

/// The position a cursor stands for (none: no cursor, the most recent page).
pub fn parse_cursor(cursor: Option<&str>) -> Result<Option<i64>> {
    let Some(c) = cursor.map(str::trim).filter(|c| !c.is_empty()) else {
        return Ok(None);
    };
    if c.len() > MAX_CURSOR || !c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return Err(bad_cursor());
    }
    let raw = b64().decode(c).map_err(|_| bad_cursor())?;
    let s = String::from_utf8(raw).map_err(|_| bad_cursor())?;
    s.strip_prefix("m1:").and_then(|n| n.parse::<i64>().ok()).filter(|n| *n >= 0).map(Some).ok_or_else(bad_cursor)
}

/// Checks a requested wait (0 to 25,000 ms).
pub fn check_wait(wait_ms: Option<i64>) -> Result<u64> {
    match wait_ms {
        None => Ok(0),
        Some(w) if (0..=MAX_WAIT_MS as i64).contains(&w) => Ok(w as u64),
        Some(_) => Err(Error::invalid_field("waitMs", "waitMs is 0 to 25000")),
    }
}

/// The page after `after` of the caller's conversation (none yet: an empty page, `ai_owned`).
pub fn read(app: &App, caller: &Caller, conversation_id: Option<&str>, after: Option<i64>) -> Result<UpdatePage> {
    let Some(cid) = conversation_id else {
        return Ok(UpdatePage { messages: vec![], cursor: None, ownership: OwnershipState::AiOwned });
    };
    app.db.read(|c| {
        let conv = conversations::find_in(c, &caller.workspace_id, cid, false)?;
        if conv.agent_id != caller.agent_id {
            return Err(Error::not_found("conversation"));
        }
        if after.is_some_and(|a| a > conv.message_count) {
            return Err(bad_cursor());
        }
        let msgs = conversations::replies(c, &conv.id, after, PAGE)?;
        let cursor = msgs.last().map(|m| m.seq).or(after).map(encode);
        let messages = msgs
            .into_iter()
            .map(|m| Update {
                id: m.id,
                author: if m.source == Source::HumanAgent { "human" } else { "agent" },
                created_at: m.created_at,
                text: m.content,
            })
            .collect();
        Ok(UpdatePage { messages, cursor, ownership: conv.ownership.state })
    })
}

/// The cursor standing at the conversation's current end (what a later reply comes after).
pub fn cursor_now(app: &App, caller: &Caller, conversation_id: &str) -> Result<String> {
    app.db.read(|c| {
        let conv = conversations::find_in(c, &caller.workspace_id, conversation_id, false)?;
        Ok(encode(conv.message_count))
    })
}

/// Reads the page after `cursor`; when it is empty and `wait_ms` > 0, waits for the
/// conversation's next message or ownership change until the deadline, then answers an empty
/// page (with the ownership as it is then). The bus subscription is taken before the first read,
/// so nothing slips between them. A waiting read holds a place of its credential's
/// (`streams.converse_waits_per_credential`) while it waits; one over the cap is 429.
pub async fn poll(
    app: Arc<App>,
    caller: Caller,
    conversation_id: Option<String>,
    cursor: Option<String>,
    wait_ms: u64,
) -> Result<UpdatePage> {
    let after = parse_cursor(cursor.as_deref())?;
    // a waiting read holds one of its credential's places until it answers (429 over the cap)
    let _slot = if wait_ms > 0 { Some(app.streams.converse_credential.acquire(&caller.credential_id)?) } else { None };
    let mut rx = app.bus.subscribe();
    let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms.min(MAX_WAIT_MS));
    let read_now = |app: Arc<App>| {
        let (caller, cid) = (caller.clone(), conversation_id.clone());
        async move { app.blocking(move |app| read(app, &caller, cid.as_deref(), after)).await }
    };
    let first = read_now(app.clone()).await?;
    // with no cursor the most recent page is the answer, as it is
    if !first.messages.is_empty() || wait_ms == 0 || after.is_none() || conversation_id.is_none() {
        return Ok(first);
    }
    let cid = conversation_id.clone().unwrap_or_default();
    let mut last = first;
    loop {
        let woke = tokio::select! {
            ev = rx.recv() => match ev {
                Ok(e) => e.conversation_id.as_deref() == Some(cid.as_str())
                    && matches!(e.kind, BusKind::MessageCreated | BusKind::OwnershipChanged),
                // missed events: read again to be sure
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => true,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => false,
            },
            _ = tokio::time::sleep_until(deadline) => return Ok(last),
        };
        if woke {
            let page = read_now(app.clone()).await?;
            if !page.messages.is_empty() || page.ownership != last.ownership {
                return Ok(page);
            }
            last = page;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cursors_round_trip_and_refuse_anything_else() {
        assert_eq!(parse_cursor(Some(&encode(42))).unwrap(), Some(42));
        assert_eq!(parse_cursor(None).unwrap(), None);
        assert_eq!(parse_cursor(Some("  ")).unwrap(), None);
        for bad in ["abc", "a.b", "!!", &b64().encode("m1:-3"), &"A".repeat(2000)] {
            assert!(parse_cursor(Some(bad)).is_err(), "{bad}");
        }
        assert!(check_wait(Some(25_001)).is_err());
        assert!(check_wait(Some(-1)).is_err());
        assert_eq!(check_wait(Some(25_000)).unwrap(), 25_000);
    }

    proptest! {
        #[test]
        fn no_cursor_panics(c in ".{0,200}") {
            let _ = parse_cursor(Some(&c));
        }

        #[test]
        fn every_position_round_trips(n in 0i64..i64::MAX) {
            prop_assert_eq!(parse_cursor(Some(&encode(n))).unwrap(), Some(n));
        }
    }
}
