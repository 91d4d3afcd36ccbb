//! Email over SMTP (lettre): the transport from the deployment settings, the email job, and the
//! test message an operator sends from the settings page or `steward admin test-email`.

use std::time::{Duration, Instant};

use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::{Message, SmtpTransport, Transport};

use super::config::{SmtpConfig, SmtpSecurity};
use super::{Verdict, log_attempt, settle};
use crate::app::App;
use crate::error::{Error, Result};
use crate::jobs::{JobCtx, JobPayload, Outcome};

/// Why an email delivery was skipped.
pub const NOT_CONFIGURED: &str = "no SMTP server is configured (STEWARD_SMTP_HOST)";

/// What the SMTP server answered.
#[derive(Debug, Clone)]
pub struct SmtpAnswer {
    pub ok: bool,
    /// The reply code (`250`), when the server answered.
    pub code: Option<u16>,
    /// The server's reply text, or the connection error.
    pub message: String,
    pub duration: Duration,
}

fn transport(cfg: &SmtpConfig) -> Result<SmtpTransport, String> {
    let builder = match cfg.security {
        SmtpSecurity::Tls => SmtpTransport::relay(&cfg.host).map_err(|e| e.to_string())?,
        SmtpSecurity::Starttls => SmtpTransport::starttls_relay(&cfg.host).map_err(|e| e.to_string())?,
        SmtpSecurity::None => SmtpTransport::builder_dangerous(&cfg.host),
    };
    let mut builder = builder.port(cfg.port).timeout(Some(Duration::from_secs(15)));
    if let (Some(u), Some(p)) = (&cfg.username, &cfg.password) {
        builder = builder.credentials(Credentials::new(u.clone(), p.expose().clone()));
    }
    Ok(builder.build())
}

fn message(cfg: &SmtpConfig, to: &[String], subject: &str, text: &str, html: &str) -> Result<Message, String> {
    let from: Mailbox = cfg.from.parse().map_err(|e| format!("from address: {e}"))?;
    let mut b = Message::builder().from(from).subject(subject);
    for t in to {
        b = b.to(t.parse::<Mailbox>().map_err(|e| format!("recipient {t}: {e}"))?);
    }
    b.multipart(MultiPart::alternative_plain_html(text.to_string(), html.to_string())).map_err(|e| e.to_string())
}

/// Sends one message and reports the server's answer.
fn send(cfg: &SmtpConfig, to: &[String], subject: &str, text: &str, html: &str) -> (SmtpAnswer, bool) {
    let started = Instant::now();
    let fail = |message: String, transient: bool| {
        (SmtpAnswer { ok: false, code: None, message, duration: started.elapsed() }, transient)
    };
    let msg = match message(cfg, to, subject, text, html) {
        Ok(m) => m,
        Err(e) => return fail(e, false),
    };
    let t = match transport(cfg) {
        Ok(t) => t,
        Err(e) => return fail(e, false),
    };
    match t.send(&msg) {
        Ok(r) => {
            let text: Vec<&str> = r.message().collect();
            let code = r.code().to_string().parse().ok();
            (SmtpAnswer { ok: true, code, message: text.join(" "), duration: started.elapsed() }, false)
        }
        Err(e) => {
            let code = e.status().and_then(|c| c.to_string().parse().ok());
            let transient = !e.is_permanent();
            let mut a = fail(format!("{e}"), transient);
            a.0.code = code;
            a
        }
    }
}

/// Runs one email attempt.
pub(super) fn email_job(app: &App, ctx: &JobCtx, payload: &JobPayload) -> Outcome {
    let Some(id) = payload["deliveryId"].as_str() else {
        return Outcome::Fail("malformed email job".into());
    };
    let Some(cfg) = &app.config.smtp else {
        let v = Verdict { outcome: Outcome::Done, status_code: None, error: Some(NOT_CONFIGURED.into()) };
        let _ = log_attempt(app, id, "skipped", Instant::now(), &v);
        return Outcome::Done;
    };
    let to: Vec<String> =
        payload["to"].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_string)).collect();
    let s = |k: &str| payload[k].as_str().unwrap_or_default().to_string();
    let started = Instant::now();
    let (answer, transient) = send(cfg, &to, &s("subject"), &s("text"), &s("html"));
    let note = format!("{}{}", answer.code.map(|c| format!("{c} ")).unwrap_or_default(), answer.message);
    let v = if answer.ok {
        Verdict { outcome: Outcome::Done, status_code: answer.code.map(i64::from), error: Some(note) }
    } else if transient {
        Verdict { outcome: Outcome::retry(note.clone()), status_code: answer.code.map(i64::from), error: Some(note) }
    } else {
        Verdict { outcome: Outcome::Fail(note.clone()), status_code: answer.code.map(i64::from), error: Some(note) }
    };
    let (status, outcome) = settle(ctx, v.clone_parts());
    if let Err(e) = log_attempt(app, id, status, started, &v) {
        tracing::warn!(delivery = id, error = %e, "could not log a delivery attempt");
    }
    outcome
}

/// Sends a test message now (not through the outbox) and reports what the server answered.
pub fn send_test_email(app: &App, to: &str) -> Result<SmtpAnswer> {
    if to.parse::<Mailbox>().is_err() {
        return Err(Error::invalid_field("to", "to must be an email address"));
    }
    let cfg = app.config.smtp.as_ref().ok_or_else(|| {
        Error::new(crate::ErrorCode::Unprocessable, NOT_CONFIGURED)
            .with_details(serde_json::json!({"code": "smtp_not_configured"}))
    })?;
    let text =
        "This is a test message from Steward. Email notices (handoffs, contact requests) will arrive like this one.";
    let html = "<p>This is a test message from <strong>Steward</strong>. Email notices (handoffs, contact requests) will arrive like this one.</p>";
    Ok(send(cfg, &[to.to_string()], "Steward test message", text, html).0)
}
