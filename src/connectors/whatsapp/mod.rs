//! The WhatsApp Cloud API connector: customers talk to the agent on WhatsApp.
//!
//! - The webhook (`verify`, `receive`): Meta's verify-token handshake; deliveries signed with the
//!   app secret over the raw body (`payload.rs`), refused (401) when the signature is missing or
//!   wrong; each message routed by the business number it was sent to.
//! - Before the 200, every message is in the log (`whatsapp_messages`, unique by Meta's id, so a
//!   redelivery is ignored) and each new text message has its turn job queued, due after the
//!   burst window (`turn.rs`: a burst from one sender is one turn). A non-text message gets the
//!   configured reply, or is recorded as skipped.
//! - Every reply in a WhatsApp conversation, whoever wrote it, is relayed (`relay.rs`) through the
//!   outbox to the Graph API, inside the 24-hour customer service window only.
//! - The log is kept 90 days (`whatsapp.cleanup`, daily).

mod payload;
mod relay;
mod store;
mod turn;

use std::collections::BTreeMap;

use super::{Connector, ConnectorId};
use crate::app::App;
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, Result};
use crate::ids::WorkspaceId;
use crate::jobs::{self, JobCtx, JobPayload, NewJob, Outcome};

pub use payload::{Inbound, delivery_json, sign, signature_ok};

/// Days the message log is kept.
pub const LOG_DAYS: i64 = 90;
/// The daily cleanup of the message log.
pub const CLEANUP_JOB: &str = "whatsapp.cleanup";

pub fn jobs() -> Vec<(&'static str, jobs::Handler)> {
    vec![(turn::TURN_JOB, turn::handle), (crate::conversations::RELAY_JOB, relay::handle), (CLEANUP_JOB, cleanup)]
}

/// A customer.
#[derive(Debug, Clone)]
pub struct Contact {
    pub wa_id: String,
    pub profile_name: Option<String>,
    pub conversation_id: Option<String>,
    pub conversation_last_at: Option<String>,
    /// Their last message: the 24-hour window runs from it.
    pub last_inbound_at: String,
}

/// A burst of messages answered as one turn.
#[derive(Debug, Clone)]
pub struct Batch {
    pub id: String,
    pub workspace_id: String,
    pub wa_id: String,
    pub conversation_id: Option<String>,
    pub turn_id: String,
    pub job_id: i64,
    pub status: String,
}

/// Messages in the log (90 days).
#[derive(Debug, Clone, Copy, Default)]
pub struct Counts {
    pub inbound: i64,
    pub outbound: i64,
    /// Inbound messages whose turn failed, and replies not sent (outside the window).
    pub failed: i64,
    /// Text messages waiting for their turn.
    pub pending: i64,
}

impl Counts {
    pub fn total(&self) -> i64 {
        self.inbound + self.outbound
    }
}

/// One row of the message log.
#[derive(Debug, Clone)]
pub struct LogEntry {
    pub id: String,
    /// `in` or `out`.
    pub direction: String,
    pub wa_id: String,
    pub kind: String,
    pub body: Option<String>,
    pub status: String,
    pub error: Option<String>,
    pub conversation_id: Option<String>,
    pub delivery_id: Option<String>,
    pub batch_id: Option<String>,
    /// The outbox delivery's status (outbound rows that were queued).
    pub delivery_status: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// A page of the log.
pub struct LogPage {
    pub entries: Vec<LogEntry>,
    pub next_cursor: Option<String>,
}

pub fn counts(app: &App, ws: &WorkspaceId) -> Result<Counts> {
    app.db.read(|c| store::counts(c, &ws.0))
}

/// `GET /connectors/whatsapp/messages`: the log, newest first, with each reply's delivery status.
pub fn log(app: &App, p: &Principal, direction: Option<&str>, cursor: Option<&str>, limit: usize) -> Result<LogPage> {
    p.require(Perm::SettingsRead)?;
    if direction.is_some_and(|d| d != "in" && d != "out") {
        return Err(Error::invalid_field("direction", "direction is in or out"));
    }
    let before = cursor.map(crate::documents::decode_cursor).transpose()?;
    let ws = p.workspace_id.0.clone();
    app.db.read(|c| {
        let mut rows =
            store::log(c, &ws, direction, before.as_ref().map(|(a, b)| (a.as_str(), b.as_str())), limit + 1)?;
        let more = rows.len() > limit;
        rows.truncate(limit);
        for r in &mut rows {
            if let Some(d) = &r.delivery_id
                && let Some((status, error)) = crate::delivery::status_of(c, d)?
            {
                r.delivery_status = Some(status);
                if r.error.is_none() {
                    r.error = error;
                }
            }
        }
        let next_cursor =
            if more { rows.last().map(|r| crate::documents::encode_cursor(&r.created_at, &r.id)) } else { None };
        Ok(LogPage { entries: rows, next_cursor })
    })
}

/// The handshake Meta makes when the webhook is set up: the challenge back when `mode` is
/// `subscribe` and `token` is the connector's verify token (constant-time); 403 otherwise.
pub fn verify(app: &App, ws: &str, mode: Option<&str>, token: Option<&str>, challenge: Option<&str>) -> Result<String> {
    let refused = || Error::forbidden("the verify token does not match");
    let c = super::load(app, &WorkspaceId(ws.to_string()), ConnectorId::Whatsapp)?;
    let stored = c.secret(app, "webhook_verify_token")?.ok_or_else(refused)?;
    let ok = mode == Some("subscribe") && token.is_some_and(|t| super::secret_eq(t, &stored));
    let challenge = challenge.filter(|c| !c.is_empty() && c.len() <= 256).ok_or_else(refused)?;
    if !ok {
        return Err(refused());
    }
    Ok(challenge.to_string())
}

/// The app secret of `c`, when set.
fn app_secret(app: &App, c: &Connector) -> Result<Option<String>> {
    c.secret(app, "app_secret")
}

/// A delivery to the webhook of `ws`: the signature checked over the raw `body` (401, fail
/// closed), then each message routed by its business number, stored, and its turn queued.
/// Returns how many new messages were stored.
pub fn receive(app: &App, ws: &str, signature: Option<&str>, body: &[u8]) -> Result<usize> {
    let unauthorized = || Error::unauthorized("the X-Hub-Signature-256 signature is missing or does not match");
    let here = super::load(app, &WorkspaceId(ws.to_string()), ConnectorId::Whatsapp)?;
    let secret = app_secret(app, &here)?.ok_or_else(unauthorized)?;
    if !payload::signature_ok(&secret, signature, body) {
        return Err(unauthorized());
    }
    if !here.enabled {
        return Err(Error::not_found("connector"));
    }
    let messages = payload::messages(body).map_err(|m| Error::invalid(m.0))?;
    // route by business number: this workspace's, or another connector of the same Meta app
    // (whose app secret verifies this very signature)
    let mut routes: BTreeMap<String, Option<Connector>> = BTreeMap::new();
    for m in &messages {
        if routes.contains_key(&m.phone_number_id) {
            continue;
        }
        let target = if here.value("phone_number_id") == Some(m.phone_number_id.as_str()) {
            Some(here.clone())
        } else {
            super::by_channel(app, ConnectorId::Whatsapp, &m.phone_number_id)?.filter(|c| {
                c.enabled
                    && app_secret(app, c).ok().flatten().is_some_and(|s| payload::signature_ok(&s, signature, body))
            })
        };
        routes.insert(m.phone_number_id.clone(), target);
    }
    let unrouted = messages.iter().filter(|m| routes.get(&m.phone_number_id).is_none_or(Option::is_none)).count();
    if unrouted > 0 {
        tracing::warn!(messages = unrouted, "WhatsApp messages for a business number no enabled connector has");
    }
    let now = rfc3339(app.clock.now());
    let due = app.clock.now_ms() + app.config.connectors.burst.as_millis() as i64;
    let stored = app.db.write(|tx| {
        let mut stored = 0;
        for m in &messages {
            let Some(Some(c)) = routes.get(&m.phone_number_id) else { continue };
            stored += usize::from(store_inbound(app, tx, c, m, &now, due)?);
        }
        Ok(stored)
    })?;
    Ok(stored)
}

/// Stores one inbound message (nothing when its id is known) and what it calls for.
fn store_inbound(app: &App, tx: &crate::storage::Tx, c: &Connector, m: &Inbound, now: &str, due: i64) -> Result<bool> {
    let ws = &c.workspace_id.0;
    store::touch_contact(tx, ws, &m.from, m.profile_name.as_deref(), now)?;
    let text = m.text.as_deref().map(str::trim).filter(|t| !t.is_empty());
    let reply = c.value("unsupported_message_reply").filter(|r| !r.trim().is_empty());
    let status = match (text, reply) {
        (Some(_), _) => "pending",
        (None, Some(_)) => "unsupported",
        (None, None) => "skipped",
    };
    let row = crate::ids::new_id();
    let new = store::insert_row(
        tx,
        &store::NewRow {
            id: &row,
            ws,
            direction: "in",
            wa_message_id: Some(&m.id),
            wa_id: &m.from,
            kind: &m.kind,
            body: text,
            status,
            error: None,
            conversation_id: None,
            message_id: None,
            part: None,
        },
        now,
    )?;
    if !new {
        return Ok(false);
    }
    match (text, reply) {
        (Some(_), _) => {
            let job = NewJob::new(turn::TURN_JOB, serde_json::json!({"workspaceId": ws, "waId": m.from, "rowId": row}))
                .dedupe(format!("wa-turn:{row}"))
                .workspace(ws.clone())
                .run_at(due)
                .priority(5)
                .max_attempts(8);
            jobs::enqueue_tx(tx, app.clock.now_ms(), app.jobs.default_max_attempts(), &job)?;
        }
        (None, Some(r)) => {
            relay::send(app, tx, c, &m.from, r, &format!("unsupported:{}", m.id), None, now)?;
        }
        (None, None) => {}
    }
    Ok(true)
}

/// Deletes the log past [`LOG_DAYS`] and plans tomorrow's cleanup.
fn cleanup(app: &App, _ctx: &JobCtx, _payload: &JobPayload) -> Outcome {
    let cutoff = rfc3339(app.clock.now() - chrono::Duration::days(LOG_DAYS));
    match app.db.write(|tx| store::cleanup(tx, &cutoff)) {
        Ok(n) => {
            if n > 0 {
                tracing::info!(messages = n, "WhatsApp message log past 90 days deleted");
            }
            let tomorrow = (app.clock.now() + chrono::Duration::days(1)).date_naive();
            let at =
                tomorrow.and_hms_opt(0, 15, 0).map(|t| t.and_utc().timestamp_millis()).unwrap_or(app.clock.now_ms());
            if let Err(e) = jobs::schedule_once(app, CLEANUP_JOB, &format!("{CLEANUP_JOB}:{tomorrow}"), at) {
                tracing::warn!(error = %e, "could not queue the next WhatsApp log cleanup");
            }
            Outcome::Done
        }
        Err(e) => Outcome::retry(e.to_string()),
    }
}

/// At start: today's cleanup is queued (it runs at once when the server was down at its time).
pub fn schedule_cleanup(app: &App) -> Result<()> {
    let today = app.clock.now().date_naive();
    jobs::schedule_once(app, CLEANUP_JOB, &format!("{CLEANUP_JOB}:{today}"), app.clock.now_ms())
}
