//! Notices to people: where a handoff (and, with routines, an approval) notice goes, and the
//! `handoff.notify` job that sends it as a webhook and an email.
//!
//! Destination (spec: Skills rules 2–3): the agent's `contact_human` notify skill when it exists
//! and is enabled (disabled: notices are silenced), else the agent's `contactRequestDelivery`,
//! else the workspace owner; a destination without recipient emails sends its email to the
//! workspace owner. The agent configuration is the revision the conversation runs on.

use serde_json::{Value, json};

use crate::agents::Delivery;
use crate::agents::config::AgentConfig;
use crate::app::App;
use crate::auth::accounts;
use crate::clock::rfc3339;
use crate::error::{Error, Result};
use crate::ids::WorkspaceId;
use crate::jobs::{JobCtx, JobPayload, Outcome};

/// The notify skill handoff and approval notices use.
pub const CONTACT_SKILL: &str = "contact_human";
/// The job that tells a person a conversation needs them (written by a turn's or a routine's
/// handoff, sent here).
pub const HANDOFF_JOB: &str = "handoff.notify";

/// Where a notice goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// `contact_human` is disabled: no notice at all.
    Silenced,
    Send {
        emails: Vec<String>,
        webhook_url: Option<String>,
        from: &'static str,
    },
}

/// Resolves a contact request's destination (Skills rule 2): a named notify skill that is enabled
/// delivers through its own settings; otherwise (unnamed, missing or disabled) the request goes
/// where notices go ([`destination`]).
pub fn contact_destination(cfg: &AgentConfig, skill: Option<&str>, owners: &[String]) -> Destination {
    if let Some(name) = skill
        && let Some(s) = cfg.skills.iter().find(|s| s.name == name && s.capability == "notify" && s.enabled)
    {
        let delivery: Delivery =
            s.config.get("delivery").and_then(|d| serde_json::from_value(d.clone()).ok()).unwrap_or_default();
        let emails = if delivery.recipient_emails.is_empty() { owners.to_vec() } else { delivery.recipient_emails };
        return Destination::Send { emails, webhook_url: delivery.webhook.map(|w| w.url), from: "skill" };
    }
    destination(cfg, owners)
}

/// Resolves a notice's destination for an agent configuration (owners' emails fill in empty
/// recipients).
pub fn destination(cfg: &AgentConfig, owners: &[String]) -> Destination {
    let skill = cfg.skills.iter().find(|s| s.name == CONTACT_SKILL && s.capability == "notify");
    let (delivery, from) = match skill {
        Some(s) if !s.enabled => return Destination::Silenced,
        Some(s) => (
            s.config
                .get("delivery")
                .and_then(|d| serde_json::from_value::<Delivery>(d.clone()).ok())
                .unwrap_or_default(),
            "contact_human",
        ),
        None => {
            let d = &cfg.settings.contact_request_delivery;
            if d.recipient_emails.is_empty() && d.webhook.is_none() {
                (Delivery::default(), "owner")
            } else {
                (d.clone(), "agent")
            }
        }
    };
    let emails = if delivery.recipient_emails.is_empty() { owners.to_vec() } else { delivery.recipient_emails.clone() };
    Destination::Send { emails, webhook_url: delivery.webhook.map(|w| w.url), from }
}

fn reason_text(reason: &str) -> &str {
    match reason {
        "retrieval_miss" => "the agent found nothing in your documents to answer with",
        "routine_handoff" => "a routine reached a handoff step",
        "approval" => "a routine step needs approval (decide in the Inbox)",
        other => other,
    }
}

pub(crate) fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The handoff email: plain text and HTML, with the `Collected:` section and the dashboard link.
pub fn handoff_email(agent_name: &str, notice: &super::WebhookBody) -> (String, String, String) {
    let approval = notice.get("handle").is_some_and(|h| h.is_string());
    let reason = if approval { "approval" } else { notice["reason"].as_str().unwrap_or("handoff") };
    let collected: Vec<(String, String)> = notice["collected"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))
                .collect()
        })
        .unwrap_or_default();
    let link = notice["dashboardUrl"].as_str();
    let subject = if approval {
        format!("Approval needed: {agent_name}")
    } else {
        format!("A visitor needs a person: {agent_name}")
    };
    let what = if approval { "is waiting for a person's decision" } else { "was handed to a person" };
    let mut text = format!("A conversation with {agent_name} {what}.\nReason: {}\n\nCollected:\n", reason_text(reason));
    if collected.is_empty() {
        text.push_str("  (nothing)\n");
    }
    for (k, v) in &collected {
        text.push_str(&format!("  {k}: {v}\n"));
    }
    match link {
        Some(l) => text.push_str(&format!("\nOpen the conversation: {l}\n")),
        None => {
            text.push_str("\nOpen the Inbox in the Steward dashboard (set STEWARD_PUBLIC_URL to get a link here).\n")
        }
    }
    let mut html = format!(
        "<p>A conversation with <strong>{}</strong> {what}.<br>Reason: {}</p><p>Collected:</p><ul>",
        escape(agent_name),
        escape(reason_text(reason))
    );
    if collected.is_empty() {
        html.push_str("<li>(nothing)</li>");
    }
    for (k, v) in &collected {
        html.push_str(&format!("<li>{}: {}</li>", escape(k), escape(v)));
    }
    html.push_str("</ul>");
    match link {
        Some(l) => html.push_str(&format!("<p><a href=\"{0}\">Open the conversation</a> ({0})</p>", escape(l))),
        None => html.push_str("<p>Open the Inbox in the Steward dashboard.</p>"),
    }
    (subject, text, html)
}

/// The agent configuration a conversation runs on (its revision, else the published one).
fn config_of(app: &App, ws: &WorkspaceId, conversation_id: &str, agent_id: &str) -> Result<AgentConfig> {
    app.db.read(|c| {
        let conv = crate::conversations::find_in(c, &ws.0, conversation_id, true)?;
        match &conv.revision_id {
            Some(rid) => crate::agents::config::revision(c, agent_id, rid),
            None => crate::agents::config::published(c, ws, agent_id),
        }
    })
}

fn owner_emails(app: &App, ws: &WorkspaceId) -> Result<Vec<String>> {
    let w = accounts::workspace(app, ws)?.ok_or_else(|| Error::not_found("workspace"))?;
    Ok(accounts::owners(app, &w.organization_id)?.into_iter().map(|u| u.email).collect())
}

/// Queues a notice's webhook and email (idempotent per `key`); returns how many deliveries.
pub fn send_notice(
    app: &App,
    ws: &WorkspaceId,
    agent_id: &str,
    notice: &super::WebhookBody,
    key: &str,
) -> Result<usize> {
    let cid = notice["conversationId"].as_str().unwrap_or_default().to_string();
    let cfg = config_of(app, ws, &cid, agent_id)?;
    let owners = owner_emails(app, ws)?;
    let Destination::Send { emails, webhook_url, .. } = destination(&cfg, &owners) else {
        tracing::info!(conversation = %cid, "handoff notice silenced: the contact_human skill is disabled");
        return Ok(0);
    };
    let mail = handoff_email(&cfg.name, notice);
    let event = if notice.get("handle").is_some_and(|h| h.is_string()) { "approval.request" } else { "handoff.notify" };
    queue(
        app,
        &Outgoing {
            ws,
            event,
            webhook_url: webhook_url.as_deref(),
            body: notice,
            emails: &emails,
            mail,
            conversation_id: Some(&cid),
            key,
        },
    )
}

/// A notice ready to go: its webhook (if any), its email (if it has recipients).
struct Outgoing<'a> {
    ws: &'a WorkspaceId,
    event: &'a str,
    webhook_url: Option<&'a str>,
    body: &'a super::WebhookBody,
    emails: &'a [String],
    /// Subject, plain text, HTML.
    mail: (String, String, String),
    conversation_id: Option<&'a str>,
    key: &'a str,
}

/// Queues a notice's deliveries in one transaction and wakes the workers; returns how many.
fn queue(app: &App, o: &Outgoing) -> Result<usize> {
    let now = rfc3339(app.clock.now());
    let (subject, text, html) = &o.mail;
    let n = app.db.write(|tx| {
        let mut n = 0;
        if let Some(url) = o.webhook_url {
            let w = super::Webhook {
                workspace_id: &o.ws.0,
                event: o.event,
                url,
                body: o.body,
                conversation_id: o.conversation_id,
                key: o.key,
                secret_url: false,
                signed_by: None,
                bearer: None,
            };
            super::enqueue_webhook(app, tx, &now, &w)?;
            n += 1;
        }
        if !o.emails.is_empty() {
            let m = super::Email {
                workspace_id: &o.ws.0,
                event: o.event,
                to: o.emails,
                subject,
                text,
                html,
                conversation_id: o.conversation_id,
                key: o.key,
            };
            super::enqueue_email(app, tx, &now, &m)?;
            n += 1;
        }
        Ok(n)
    })?;
    Ok(n)
}

/// The `handoff.notify` job: resolves the destination and queues the deliveries.
pub(super) fn handoff_job(app: &App, ctx: &JobCtx, payload: &JobPayload) -> Outcome {
    let (Some(ws), Some(agent)) = (payload["workspaceId"].as_str(), payload["agentId"].as_str()) else {
        return Outcome::Fail("malformed handoff notice".into());
    };
    let mut notice = json!({
        "workspaceId": payload["workspaceId"], "agentId": payload["agentId"], "conversationId": payload["conversationId"],
        "reason": payload["reason"], "routine": payload["routine"], "collected": payload["collected"],
        "dashboardUrl": payload["dashboardUrl"], "requestId": payload["requestId"],
    });
    // an approval notice carries the decision's handle instead of a reason
    if let (Some(h), Some(n)) = (payload.get("handle").filter(|h| h.is_string()), notice.as_object_mut()) {
        n.remove("reason");
        n.insert("handle".into(), h.clone());
    }
    match send_notice(app, &WorkspaceId(ws.to_string()), agent, &notice, &format!("handoff.notify:{}", ctx.id)) {
        Ok(_) => Outcome::Done,
        Err(e) if e.status() == 404 => Outcome::Fail(e.message),
        Err(e) => Outcome::retry(e.message),
    }
}

/// A visitor's request to be contacted (spec: contact request webhook).
#[derive(Debug, Clone)]
pub struct ContactRequest {
    pub name: Option<String>,
    pub email: Option<String>,
    pub message: String,
    pub conversation_id: Option<String>,
    /// The notify skill the request names (a routine step or a contact button); `None`: the
    /// unnamed contact flow.
    pub skill: Option<String>,
    pub request_id: Option<String>,
}

/// What became of a contact request.
#[derive(Debug, Clone)]
pub struct ContactOutcome {
    /// `queued`, or `silenced` (the `contact_human` skill is disabled).
    pub status: &'static str,
    /// Where it went: `skill`, `contact_human`, `agent` or `owner`.
    pub destination: Option<&'static str>,
    pub deliveries: usize,
}

/// Longest contact message.
pub const MAX_CONTACT_MESSAGE: usize = 5_000;
const MAX_CONTACT_NAME: usize = 200;
const MAX_EMAIL: usize = 320;

fn check_contact(r: &ContactRequest) -> Result<()> {
    let msg = r.message.trim();
    if msg.is_empty() || msg.chars().count() > MAX_CONTACT_MESSAGE {
        return Err(Error::invalid_field("message", format!("message must be 1 to {MAX_CONTACT_MESSAGE} characters")));
    }
    if r.name.as_ref().is_some_and(|n| n.chars().count() > MAX_CONTACT_NAME || n.chars().any(char::is_control)) {
        return Err(Error::invalid_field(
            "name",
            format!("name must be at most {MAX_CONTACT_NAME} characters, on one line"),
        ));
    }
    if msg.chars().any(|c| c.is_control() && c != '\n' && c != '\t' && c != '\r') {
        return Err(Error::invalid_field("message", "message must not contain control characters"));
    }
    if let Some(e) = &r.email {
        let ok = e.len() <= MAX_EMAIL && !e.contains('<') && e.parse::<lettre::message::Mailbox>().is_ok();
        if !ok {
            return Err(Error::invalid_field("email", "email must be an email address"));
        }
    }
    Ok(())
}

/// The contact request email: who, how to reach them, what they wrote, and the conversation.
fn contact_email(agent_name: &str, body: &Value, link: Option<&str>) -> (String, String, String) {
    let s = |k: &str| body[k].as_str().unwrap_or("").to_string();
    let or_none = |v: String| if v.is_empty() { "(not given)".to_string() } else { v };
    let subject = format!("Contact request: {agent_name}");
    let mut text = format!(
        "A visitor asked to be contacted through {agent_name}.\n\nName: {}\nEmail: {}\n\nMessage:\n{}\n",
        or_none(s("name")),
        or_none(s("email")),
        s("message")
    );
    if let Some(l) = link {
        text.push_str(&format!("\nOpen the conversation: {l}\n"));
    }
    let mut html = format!(
        "<p>A visitor asked to be contacted through <strong>{}</strong>.</p><p>Name: {}<br>Email: {}</p><p>Message:</p><blockquote>{}</blockquote>",
        escape(agent_name),
        escape(&or_none(s("name"))),
        escape(&or_none(s("email"))),
        escape(&s("message")).replace('\n', "<br>")
    );
    if let Some(l) = link {
        html.push_str(&format!("<p><a href=\"{0}\">Open the conversation</a> ({0})</p>", escape(l)));
    }
    (subject, text, html)
}

/// The agent configuration a contact request runs on: the conversation's revision (the
/// conversation must belong to the agent), else the published one.
fn contact_config(app: &App, ws: &WorkspaceId, agent_id: &str, conversation_id: Option<&str>) -> Result<AgentConfig> {
    app.db.read(|c| {
        crate::agents::get_in(c, ws, agent_id)?;
        let Some(cid) = conversation_id else {
            return crate::agents::config::published(c, ws, agent_id);
        };
        let conv = crate::conversations::find_in(c, &ws.0, cid, true)?;
        if conv.agent_id != agent_id {
            return Err(Error::not_found("conversation"));
        }
        match &conv.revision_id {
            Some(rid) => crate::agents::config::revision(c, agent_id, rid),
            None => crate::agents::config::published(c, ws, agent_id),
        }
    })
}

/// `POST /agents/{agentId}/contact-requests`: queues the contact webhook and email for a
/// visitor's request, resolved as Skills rule 2 says.
pub fn contact_request(
    app: &App,
    p: &crate::auth::Principal,
    agent_id: &str,
    r: ContactRequest,
) -> Result<ContactOutcome> {
    p.require(crate::auth::Perm::Chat)?;
    check_contact(&r)?;
    let ws = p.workspace_id.clone();
    let cfg = contact_config(app, &ws, agent_id, r.conversation_id.as_deref())?;
    if !cfg.settings.contact_requests_enabled {
        return Err(Error::new(
            crate::ErrorCode::Forbidden,
            "contact requests are off for this agent (contactRequestsEnabled)",
        )
        .with_details(json!({"code": "contact_requests_disabled"})));
    }
    let skill = r.skill.as_deref().map(|s| s.trim().to_lowercase());
    let owners = owner_emails(app, &ws)?;
    let Destination::Send { emails, webhook_url, from } = contact_destination(&cfg, skill.as_deref(), &owners) else {
        return Ok(ContactOutcome { status: "silenced", destination: None, deliveries: 0 });
    };
    let key = format!("contact:{}", crate::ids::new_id());
    let body = json!({
        "name": r.name, "email": r.email, "message": r.message.trim(), "workspaceId": ws.0,
        "conversationId": r.conversation_id, "requestId": r.request_id,
    });
    let link = r.conversation_id.as_ref().and_then(|cid| {
        app.config.public_url.as_ref().map(|u| format!("{}/app/conversations/{cid}", u.trim_end_matches('/')))
    });
    let mail = contact_email(&cfg.name, &body, link.as_deref());
    let n = queue(
        app,
        &Outgoing {
            ws: &ws,
            event: "contact.request",
            webhook_url: webhook_url.as_deref(),
            body: &body,
            emails: &emails,
            mail,
            conversation_id: r.conversation_id.as_deref(),
            key: &key,
        },
    )?;
    Ok(ContactOutcome { status: "queued", destination: Some(from), deliveries: n })
}

/// The `usage.notify` job: an account crossed 80 % or 100 % of a limit. The notice goes where the
/// answering agent's handoff notices go ([`destination`]) — for a document write, the workspace's
/// default agent's: its webhook gets the payload as JSON, its recipients (else the workspace
/// owners) an email.
pub(super) fn usage_job(app: &App, ctx: &JobCtx, payload: &JobPayload) -> Outcome {
    let Some(ws) = payload["workspaceId"].as_str() else {
        return Outcome::Fail("malformed usage notice".into());
    };
    let ws = WorkspaceId(ws.to_string());
    let agent = match payload["agentId"].as_str() {
        Some(a) => a.to_string(),
        None => match app.db.read(|c| crate::agents::default_id(c, &ws)) {
            Ok(Some(a)) => a,
            Ok(None) => return Outcome::Fail("the workspace has no agent to take its usage notice".into()),
            Err(e) => return Outcome::retry(e.message),
        },
    };
    let cfg = match app.db.read(|c| crate::agents::config::published(c, &ws, &agent)) {
        Ok(c) => c,
        Err(e) if e.status() == 404 => return Outcome::Fail(e.message),
        Err(e) => return Outcome::retry(e.message),
    };
    let owners = match owner_emails(app, &ws) {
        Ok(o) => o,
        Err(e) => return Outcome::retry(e.message),
    };
    let Destination::Send { emails, webhook_url, .. } = destination(&cfg, &owners) else {
        return Outcome::Done;
    };
    let resource = payload["resource"].as_str().unwrap_or("usage").replace('_', " ");
    let threshold = payload["threshold"].as_i64().unwrap_or(0);
    let subject = format!("Usage at {threshold} % of the {resource} limit");
    let text = format!(
        "Your account has used {} of {} {resource} ({threshold} %). {}",
        payload["used"],
        payload["limit"],
        match payload["resetAt"].as_str() {
            Some(at) => format!("The monthly period resets at {at}."),
            None => "Stored usage goes down only when documents are deleted.".to_string(),
        }
    );
    let html = format!("<p>{}</p>", escape(&text));
    let conversation = payload["conversationId"].as_str().map(str::to_string);
    let r = queue(
        app,
        &Outgoing {
            ws: &ws,
            event: "usage.threshold",
            webhook_url: webhook_url.as_deref(),
            body: payload,
            emails: &emails,
            mail: (subject, text, html),
            conversation_id: conversation.as_deref(),
            key: &format!("usage.notify:{}", ctx.id),
        },
    );
    match r {
        Ok(_) => Outcome::Done,
        Err(e) => Outcome::retry(e.message),
    }
}
