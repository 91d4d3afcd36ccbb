//! Sending to WhatsApp: every reply saved in a WhatsApp conversation (the agent's, an operator's,
//! a routine resumed by a decision) arrives here as a `conversation.relay` job, queued in the
//! transaction that saved it. Inside the 24-hour customer service window the text goes out as
//! outbox webhooks to the Graph API's messages endpoint (split at 4,096 characters, one delivery
//! per part: a relay that runs twice sends nothing twice); outside it nothing is attempted and
//! the log says why.

use serde_json::json;

use super::store;
use crate::app::App;
use crate::clock::{parse_rfc3339, rfc3339};
use crate::connectors::{Connector, ConnectorId};
use crate::error::{Error, Result};
use crate::ids::WorkspaceId;
use crate::jobs::{JobCtx, JobPayload, Outcome};
use crate::storage::Tx;

/// WhatsApp's longest text message.
pub const MAX_TEXT_CHARS: usize = 4096;
/// How long after a customer's last message a free-form reply may be sent.
pub const WINDOW_HOURS: i64 = 24;

pub const NOT_SENT_WINDOW: &str = "not sent: the customer's last message is more than 24 hours old (WhatsApp's customer service window); a template message would be needed, which Steward does not send";

pub fn handle(app: &App, _ctx: &JobCtx, payload: &JobPayload) -> Outcome {
    let (Some(ws), Some(cid), Some(mid)) =
        (payload["workspaceId"].as_str(), payload["conversationId"].as_str(), payload["messageId"].as_str())
    else {
        return Outcome::Fail("malformed relay job".into());
    };
    match relay(app, ws, cid, mid) {
        Ok(()) => Outcome::Done,
        Err(e) if e.code.status() >= 500 => Outcome::retry(e.message),
        Err(e) => Outcome::Fail(e.message),
    }
}

fn relay(app: &App, ws: &str, cid: &str, mid: &str) -> Result<()> {
    let Some((thread_ws, wa_id)) = app.db.read(|c| store::thread(c, cid))? else { return Ok(()) };
    if thread_ws != ws {
        return Ok(());
    }
    let Some(msg) = app.db.read(|c| crate::conversations::message(c, ws, mid))? else { return Ok(()) };
    let text = msg.content.trim();
    if text.is_empty() {
        return Ok(());
    }
    let c = super::super::load(app, &WorkspaceId(ws.to_string()), ConnectorId::Whatsapp)?;
    let contact = app.db.read(|conn| store::contact(conn, ws, &wa_id))?;
    let now = app.clock.now();
    let in_window = contact
        .as_ref()
        .and_then(|k| parse_rfc3339(&k.last_inbound_at))
        .is_some_and(|t| now - t < chrono::Duration::hours(WINDOW_HOURS));
    let reason = if !c.enabled {
        Some("not sent: the WhatsApp connector is disabled")
    } else if !in_window {
        Some(NOT_SENT_WINDOW)
    } else {
        None
    };
    let now = rfc3339(now);
    app.db.write(|tx| match reason {
        None => send(app, tx, &c, &wa_id, text, mid, Some(cid), &now),
        Some(r) => {
            let row = crate::ids::new_id();
            store::insert_row(
                tx,
                &store::NewRow {
                    id: &row,
                    ws,
                    direction: "out",
                    wa_message_id: None,
                    wa_id: &wa_id,
                    kind: "text",
                    body: Some(text),
                    status: "not_sent",
                    error: Some(r),
                    conversation_id: Some(cid),
                    message_id: Some(mid),
                    part: Some(0),
                },
                &now,
            )?;
            Ok(())
        }
    })?;
    Ok(())
}

/// Splits a reply into WhatsApp-sized parts, at a line or word break when one is near the limit.
pub fn parts(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while rest.chars().count() > MAX_TEXT_CHARS {
        let cut = rest.char_indices().nth(MAX_TEXT_CHARS).map(|(i, _)| i).unwrap_or(rest.len());
        let head = &rest[..cut];
        let at = head.rfind('\n').or_else(|| head.rfind(' ')).filter(|i| *i > cut / 2).unwrap_or(cut);
        out.push(rest[..at].trim_end().to_string());
        rest = rest[at..].trim_start();
    }
    if !rest.is_empty() {
        out.push(rest.to_string());
    }
    out
}

/// Queues `text` to `wa_id` through the outbox in the caller's transaction: one log row and one
/// delivery per part, keyed by `key` (a conversation message id, or `unsupported:<wamid>`), so
/// queueing the same text twice sends it once.
#[allow(clippy::too_many_arguments)]
pub fn send(
    app: &App,
    tx: &Tx,
    c: &Connector,
    wa_id: &str,
    text: &str,
    key: &str,
    conversation_id: Option<&str>,
    now: &str,
) -> Result<()> {
    let ws = &c.workspace_id.0;
    let token = c.secret(app, "access_token")?.ok_or_else(|| Error::invalid("the WhatsApp access token is not set"))?;
    let number = c.value("phone_number_id").unwrap_or_default();
    let url = format!("{}/{number}/messages", app.config.connectors.graph_base_url);
    for (i, part) in parts(text).iter().enumerate() {
        let row = crate::ids::new_id();
        let fresh = store::insert_row(
            tx,
            &store::NewRow {
                id: &row,
                ws,
                direction: "out",
                wa_message_id: None,
                wa_id,
                kind: "text",
                body: Some(part),
                status: "queued",
                error: None,
                conversation_id,
                message_id: Some(key),
                part: Some(i as i64),
            },
            now,
        )?;
        if !fresh {
            continue;
        }
        let body = json!({
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": wa_id,
            "type": "text",
            "text": {"preview_url": false, "body": part},
        });
        let delivery = crate::delivery::enqueue_webhook(
            app,
            tx,
            now,
            &crate::delivery::Webhook {
                workspace_id: ws,
                event: "whatsapp.message",
                url: &url,
                body: &body,
                conversation_id,
                key: &format!("wa:{key}:{i}"),
                secret_url: false,
                signed_by: None,
                bearer: Some(&token),
            },
        )?;
        store::set_delivery(tx, &row, &delivery)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_replies_split_at_breaks_and_keep_every_word() {
        assert_eq!(parts("  short  "), vec!["short"]);
        let long = "word ".repeat(2000);
        let p = parts(&long);
        assert_eq!(p.len(), 3);
        assert!(p.iter().all(|x| x.chars().count() <= MAX_TEXT_CHARS && !x.ends_with(' ')));
        assert_eq!(p.join(" ").split_whitespace().count(), 2000);
        let dense = "é".repeat(9000);
        let d = parts(&dense);
        assert_eq!(d.iter().map(|x| x.chars().count()).sum::<usize>(), 9000);
        assert!(d.iter().all(|x| x.chars().count() <= MAX_TEXT_CHARS));
    }
}
