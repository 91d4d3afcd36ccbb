//! Outbound delivery: webhooks and email, sent as outbox jobs, behind the SSRF guard. With
//! `models/`, the only module that makes outbound requests.
//!
//! - [`enqueue_webhook`] and [`enqueue_email`] write a delivery row and its job inside the
//!   caller's transaction, so the change that needs a notice and the notice commit together.
//!   Ids derive from the idempotency key, so enqueueing the same notice twice (a job that ran again
//!   after a crash) changes nothing.
//! - A webhook is POSTed as JSON with `Idempotency-Key` (the same on every attempt), at least
//!   once: transport errors, 408, 429 (after its `Retry-After`) and 5xx are retried with
//!   exponential backoff and jitter; other answers and guard refusals are terminal.
//! - Email goes through the configured SMTP server (`config::SmtpConfig`); with none configured an
//!   email delivery is recorded as `skipped` with that reason and webhooks still go.
//! - Every attempt is logged (outcome, status, duration, error — never a body) and readable by
//!   operators (`GET /deliveries`).

pub mod api;
pub mod client;
pub mod config;
mod email;
pub mod guard;
pub mod mcp_client;
pub mod notices;
mod store;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::app::App;
use crate::auth::{Perm, Principal};
use crate::documents::{decode_cursor, encode_cursor};
use crate::error::{Error, Result};
use crate::jobs::{self, JobCtx, JobPayload, NewJob, Outcome};
use crate::storage::Tx;

pub use client::{Answer, Failure, Outbound};
pub use email::{SmtpAnswer, send_test_email};

/// Why email is off, in words (no SMTP server configured).
pub fn email_not_configured() -> &'static str {
    email::NOT_CONFIGURED
}

/// A webhook's JSON body: free-form by nature (each event defines its own, as the spec's Events
/// table does).
pub type WebhookBody = Value;

/// The webhook job kind.
pub const WEBHOOK_JOB: &str = "delivery.webhook";
/// The email job kind.
pub const EMAIL_JOB: &str = "delivery.email";
/// Attempts before a webhook or email delivery fails for good (about 17 minutes of backoff).
pub const MAX_ATTEMPTS: u32 = 10;
/// The longest `Retry-After` honoured; a longer one waits this long.
pub const MAX_RETRY_AFTER_SECS: u64 = 3600;

/// The job kinds this module runs.
pub fn jobs() -> Vec<(&'static str, jobs::Handler)> {
    vec![
        (WEBHOOK_JOB, webhook_job),
        (EMAIL_JOB, email::email_job),
        (notices::HANDOFF_JOB, notices::handoff_job),
        (crate::usage::limits::NOTICE_JOB, notices::usage_job),
    ]
}

/// A delivery as the log shows it.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub id: String,
    pub workspace_id: String,
    /// `webhook` or `email`.
    pub channel: String,
    pub event: String,
    pub target: String,
    pub conversation_id: Option<String>,
    pub idempotency_key: String,
    /// `pending`, `retry`, `success`, `failed` or `skipped`.
    pub status: String,
    pub attempts: i64,
    pub last_status_code: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub delivered_at: Option<String>,
}

/// One attempt.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub attempt: i64,
    pub at: String,
    pub outcome: String,
    pub status_code: Option<i64>,
    pub duration_ms: f64,
    pub error: Option<String>,
}

/// What a new delivery row holds.
pub struct NewDelivery<'a> {
    pub workspace_id: &'a str,
    pub channel: &'a str,
    pub event: &'a str,
    pub target: &'a str,
    pub conversation_id: Option<&'a str>,
    pub idempotency_key: &'a str,
}

/// A webhook to send.
pub struct Webhook<'a> {
    pub workspace_id: &'a str,
    pub event: &'a str,
    pub url: &'a str,
    pub body: &'a WebhookBody,
    pub conversation_id: Option<&'a str>,
    /// Sent as `Idempotency-Key`; also what makes enqueueing idempotent.
    pub key: &'a str,
    /// The URL is a credential (a Slack incoming webhook): it is sealed in the job, and the log
    /// shows only its origin.
    pub secret_url: bool,
    /// Sign each attempt with this webhook destination's secret (`X-Service-Timestamp`,
    /// `X-Service-Signature`); the destination is read at send time.
    pub signed_by: Option<&'a str>,
    /// Sent as `Authorization: Bearer …` (an API's access token, such as WhatsApp's): sealed in
    /// the job, never logged.
    pub bearer: Option<&'a str>,
}

/// An email to send.
pub struct Email<'a> {
    pub workspace_id: &'a str,
    pub event: &'a str,
    pub to: &'a [String],
    pub subject: &'a str,
    pub text: &'a str,
    pub html: &'a str,
    pub conversation_id: Option<&'a str>,
    pub key: &'a str,
}

fn delivery_id(channel: &str, key: &str, target: &str) -> String {
    let h = Sha256::digest(format!("{channel}\n{key}\n{target}").as_bytes());
    format!("dl_{}", hex::encode(&h[..12]))
}

/// The URL as the log shows it: no query or fragment (they may carry a token), no user info.
pub fn loggable_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            u.set_query(None);
            u.set_fragment(None);
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        }
        Err(_) => "(invalid URL)".into(),
    }
}

/// A URL as members see it: without a user name or password (a URL saved before they were
/// refused may carry one; it is never shown).
pub fn shown_url(url: &str) -> std::borrow::Cow<'_, str> {
    match reqwest::Url::parse(url) {
        Ok(mut u) if !u.username().is_empty() || u.password().is_some() => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            std::borrow::Cow::Owned(u.to_string())
        }
        _ => std::borrow::Cow::Borrowed(url),
    }
}

/// `https://host:port/…`: where a secret URL goes, without the part that is the secret.
fn origin_only(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) => format!("{}/…", u.origin().ascii_serialization()),
        Err(_) => "(invalid URL)".into(),
    }
}

fn url_key(app: &App) -> Option<&[u8; 32]> {
    app.config.encryption_key.as_ref().map(|k| k.expose())
}

/// Queues a webhook in the caller's transaction; returns the delivery id. Idempotent per key
/// and URL.
pub fn enqueue_webhook(app: &App, tx: &Tx, now: &str, w: &Webhook) -> Result<String> {
    let id = delivery_id("webhook", w.key, w.url);
    let target = if w.secret_url { origin_only(w.url) } else { loggable_url(w.url) };
    let d = NewDelivery {
        workspace_id: w.workspace_id,
        channel: "webhook",
        event: w.event,
        target: &target,
        conversation_id: w.conversation_id,
        idempotency_key: w.key,
    };
    if store::insert(tx, &id, &d, "pending", None, now)? {
        let mut payload = json!({"deliveryId": id, "body": w.body, "key": w.key, "event": w.event});
        if let Some(d) = w.signed_by {
            payload["signedBy"] = json!({"destinationId": d, "workspaceId": w.workspace_id});
        }
        if let Some(token) = w.bearer {
            payload["authSealed"] = crate::crypto::seal_text(url_key(app), token, &format!("delivery:{id}:auth"))?;
        }
        if w.secret_url {
            payload["urlSealed"] = crate::crypto::seal_text(url_key(app), w.url, &format!("delivery:{id}"))?;
        } else {
            payload["url"] = json!(w.url);
        }
        let job = NewJob::new(WEBHOOK_JOB, payload)
            .workspace(w.workspace_id)
            .dedupe(format!("delivery:{id}"))
            .max_attempts(MAX_ATTEMPTS);
        let e = jobs::enqueue_tx(tx, app.clock.now_ms(), MAX_ATTEMPTS, &job)?;
        store::set_job(tx, &id, e.id)?;
    }
    Ok(id)
}

/// Records a delivery that will not be attempted (`skipped`, with the reason) in the caller's
/// transaction, so the log says why nothing was sent.
#[allow(clippy::too_many_arguments)]
pub fn record_skipped(
    tx: &Tx,
    workspace_id: &str,
    event: &str,
    target: &str,
    conversation_id: Option<&str>,
    key: &str,
    reason: &str,
    now: &str,
) -> Result<String> {
    let id = delivery_id("webhook", key, target);
    let d = NewDelivery { workspace_id, channel: "webhook", event, target, conversation_id, idempotency_key: key };
    store::insert(tx, &id, &d, "skipped", Some(reason), now)?;
    Ok(id)
}

/// Queues an email in the caller's transaction (or records it `skipped` when no SMTP server is
/// configured); returns the delivery id.
pub fn enqueue_email(app: &App, tx: &Tx, now: &str, m: &Email) -> Result<String> {
    let target = m.to.join(", ");
    let id = delivery_id("email", m.key, &target);
    let d = NewDelivery {
        workspace_id: m.workspace_id,
        channel: "email",
        event: m.event,
        target: &target,
        conversation_id: m.conversation_id,
        idempotency_key: m.key,
    };
    if app.config.smtp.is_none() {
        store::insert(tx, &id, &d, "skipped", Some(email::NOT_CONFIGURED), now)?;
        return Ok(id);
    }
    if store::insert(tx, &id, &d, "pending", None, now)? {
        let payload = json!({"deliveryId": id, "to": m.to, "subject": m.subject, "text": m.text, "html": m.html});
        let job = NewJob::new(EMAIL_JOB, payload)
            .workspace(m.workspace_id)
            .dedupe(format!("delivery:{id}"))
            .max_attempts(MAX_ATTEMPTS);
        let e = jobs::enqueue_tx(tx, app.clock.now_ms(), MAX_ATTEMPTS, &job)?;
        store::set_job(tx, &id, e.id)?;
    }
    Ok(id)
}

/// How one attempt ended, for the log and the job queue.
struct Verdict {
    outcome: Outcome,
    status_code: Option<i64>,
    error: Option<String>,
}

fn classify(r: &std::result::Result<Answer, Failure>) -> Verdict {
    match r {
        Ok(a) if (200..300).contains(&a.status) => {
            Verdict { outcome: Outcome::Done, status_code: Some(a.status as i64), error: None }
        }
        Ok(a) if a.status == 408 || a.status == 429 || a.status >= 500 => {
            let after = a.retry_after.map(|d| d.min(std::time::Duration::from_secs(MAX_RETRY_AFTER_SECS)));
            let error = format!("HTTP {}", a.status);
            Verdict {
                outcome: Outcome::Retry { after, error: error.clone() },
                status_code: Some(a.status as i64),
                error: Some(error),
            }
        }
        Ok(a) => Verdict {
            outcome: Outcome::Fail(format!("HTTP {} (not retried)", a.status)),
            status_code: Some(a.status as i64),
            error: Some(format!("HTTP {} (not retried)", a.status)),
        },
        Err(f @ Failure::Transport(_)) => {
            Verdict { outcome: Outcome::retry(f.to_string()), status_code: None, error: Some(f.to_string()) }
        }
        Err(f) => Verdict { outcome: Outcome::Fail(f.to_string()), status_code: None, error: Some(f.to_string()) },
    }
}

/// The delivery status an attempt leaves, and the outcome the queue sees.
fn settle(ctx: &JobCtx, v: Verdict) -> (&'static str, Outcome) {
    match v.outcome {
        Outcome::Done => ("success", Outcome::Done),
        Outcome::Retry { after, error } if ctx.attempt < ctx.max_attempts => {
            // honour Retry-After, but never retry sooner than the backoff would
            let after = after.map(|a| a.max(jobs::backoff(ctx.attempt)));
            ("retry", Outcome::Retry { after, error })
        }
        Outcome::Retry { error, .. } => {
            ("failed", Outcome::Fail(format!("gave up after {} attempts: {error}", ctx.attempt)))
        }
        other => ("failed", other),
    }
}

fn log_attempt(app: &App, id: &str, status: &str, started: std::time::Instant, v: &Verdict) -> Result<()> {
    let a = Attempt {
        attempt: 0,
        at: crate::clock::rfc3339(app.clock.now()),
        outcome: status.to_string(),
        status_code: v.status_code,
        duration_ms: (started.elapsed().as_secs_f64() * 1e5).round() / 100.0,
        error: v.error.clone(),
    };
    app.db.write(|tx| store::record_attempt(tx, id, &a, status))
}

/// Ends a delivery that could not even be attempted, so the log does not show it pending for ever.
fn fail_unsent(app: &App, id: &str, reason: String) -> Outcome {
    let v = Verdict { outcome: Outcome::Fail(reason.clone()), status_code: None, error: Some(reason.clone()) };
    if let Err(e) = log_attempt(app, id, "failed", std::time::Instant::now(), &v) {
        tracing::warn!(delivery = id, error = %e, "could not log a delivery attempt");
    }
    Outcome::Fail(reason)
}

/// Ends a delivery that cannot be sent and should not be: `skipped` with the reason.
fn skip_unsent(app: &App, id: &str, reason: &str) -> Outcome {
    let v = Verdict { outcome: Outcome::Done, status_code: None, error: Some(reason.to_string()) };
    if let Err(e) = log_attempt(app, id, "skipped", std::time::Instant::now(), &v) {
        tracing::warn!(delivery = id, error = %e, "could not log a delivery attempt");
    }
    Outcome::Done
}

/// Runs one webhook attempt.
fn webhook_job(app: &App, ctx: &JobCtx, payload: &JobPayload) -> Outcome {
    let (Some(id), Some(key)) = (payload["deliveryId"].as_str(), payload["key"].as_str()) else {
        return Outcome::Fail("malformed webhook job".into());
    };
    let url = match (payload["url"].as_str(), payload.get("urlSealed")) {
        (Some(u), _) => u.to_string(),
        (None, Some(s)) => match crate::crypto::open_text(url_key(app), s, &format!("delivery:{id}")) {
            Ok(u) => u,
            Err(e) => return fail_unsent(app, id, e.message),
        },
        _ => return fail_unsent(app, id, "malformed webhook job".into()),
    };
    match app.db.read(|c| store::get(c, id)) {
        Ok(Some(d)) if d.status == "success" || d.status == "failed" => return Outcome::Done,
        Ok(Some(_)) => {}
        Ok(None) => return Outcome::Fail("the delivery is gone".into()),
        Err(e) => return Outcome::retry(e.to_string()),
    }
    let body = payload["body"].to_string();
    let event = payload["event"].as_str().unwrap_or("webhook").to_string();
    let mut headers =
        vec![("Idempotency-Key", key.to_string()), ("X-Steward-Event", event), ("X-Steward-Delivery", id.to_string())];
    if let Some(sealed) = payload.get("authSealed") {
        match crate::crypto::open_text(url_key(app), sealed, &format!("delivery:{id}:auth")) {
            Ok(token) => headers.push(("Authorization", format!("Bearer {token}"))),
            Err(e) => return fail_unsent(app, id, e.message),
        }
    }
    let signed_by = payload["signedBy"]["destinationId"].as_str();
    let mut url = url;
    if let Some(dest) = signed_by {
        let ws = payload["signedBy"]["workspaceId"].as_str().unwrap_or_default();
        match crate::routines::destinations::target(app, ws, dest) {
            Ok(Some((now_url, secret))) => {
                url = now_url;
                let ts = app.clock.now().timestamp().to_string();
                headers.push(("X-Service-Timestamp", ts.clone()));
                headers.push(("X-Service-Signature", crate::routines::destinations::signature(&secret, &ts, &body)));
            }
            Ok(None) => return skip_unsent(app, id, "the webhook destination no longer exists"),
            Err(e) => return fail_unsent(app, id, e.message),
        }
    }
    let header_refs: Vec<(&str, String)> = headers.iter().map(|(k, v)| (*k, v.clone())).collect();
    let started = std::time::Instant::now();
    let r = app.outbound.post_json(&url, body.as_bytes(), &header_refs);
    let v = classify(&r);
    let (status, outcome) = settle(ctx, v.clone_parts());
    if let Some(dest) = signed_by {
        crate::routines::destinations::record_delivery(app, dest, status);
    }
    if let Err(e) = log_attempt(app, id, status, started, &v) {
        tracing::warn!(delivery = id, error = %e, "could not log a delivery attempt");
    }
    if status != "success" {
        tracing::info!(
            delivery = id,
            attempt = ctx.attempt,
            status,
            error = v.error.as_deref().unwrap_or(""),
            "webhook not delivered"
        );
    }
    outcome
}

impl Verdict {
    fn clone_parts(&self) -> Verdict {
        Verdict { outcome: self.outcome.clone(), status_code: self.status_code, error: self.error.clone() }
    }
}

/// What `GET /deliveries` asks for.
pub struct DeliveryFilter {
    pub status: Option<String>,
    pub channel: Option<String>,
    pub conversation_id: Option<String>,
    pub before: Option<(String, String)>,
    pub limit: usize,
}

/// A page of the delivery log.
pub struct DeliveryPage {
    pub deliveries: Vec<Delivery>,
    pub total: i64,
    pub next_cursor: Option<String>,
}

/// `GET /deliveries`: the workspace's deliveries, newest first.
pub fn list(
    app: &App,
    p: &Principal,
    status: Option<String>,
    channel: Option<String>,
    conversation_id: Option<String>,
    cursor: Option<&str>,
    limit: usize,
) -> Result<DeliveryPage> {
    p.require(Perm::SettingsRead)?;
    if status.as_deref().is_some_and(|s| !["pending", "retry", "success", "failed", "skipped"].contains(&s)) {
        return Err(Error::invalid_field("status", "status is pending, retry, success, failed or skipped"));
    }
    if channel.as_deref().is_some_and(|c| c != "webhook" && c != "email") {
        return Err(Error::invalid_field("channel", "channel is webhook or email"));
    }
    let before = cursor.map(decode_cursor).transpose()?;
    let f = DeliveryFilter { status, channel, conversation_id, before, limit };
    let ws = p.workspace_id.0.clone();
    let (mut rows, total) = app.db.read(|c| store::list(c, &ws, &f))?;
    let more = rows.len() > limit;
    rows.truncate(limit);
    let next_cursor = if more { rows.last().map(|d| encode_cursor(&d.created_at, &d.id)) } else { None };
    Ok(DeliveryPage { deliveries: rows, total, next_cursor })
}

/// `GET /deliveries/{id}`: one delivery with its attempts.
pub fn get(app: &App, p: &Principal, id: &str) -> Result<(Delivery, Vec<Attempt>)> {
    p.require(Perm::SettingsRead)?;
    let ws = p.workspace_id.0.clone();
    app.db.read(|c| {
        let d = store::get(c, id)?.filter(|d| d.workspace_id == ws).ok_or_else(|| Error::not_found("delivery"))?;
        Ok((d, store::attempts(c, id)?))
    })
}

/// A delivery's status and last error (for logs that point at their deliveries).
pub fn status_of(c: &crate::storage::Conn, id: &str) -> Result<Option<(String, Option<String>)>> {
    Ok(store::get(c, id)?.map(|d| (d.status, d.last_error)))
}

/// Deliveries by status, all workspaces (benchmarks).
pub fn status_counts(app: &App) -> Result<Vec<(String, i64)>> {
    app.db.read(store::count_by_status)
}
