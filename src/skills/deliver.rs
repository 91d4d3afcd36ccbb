//! Skills that deliver — `notify`, `webhook_call`, `email` and `slack_post`: each writes its
//! deliveries into the outbox (`delivery::enqueue_webhook`, `delivery::enqueue_email`) inside one
//! transaction, idempotent by the caller's key, and reports the capability registry's outcome.

use serde_json::{Map, Value, json};

use super::{SkillInputs, SkillResult};
use crate::agents::skills::{self, Skill};
use crate::app::App;
use crate::clock::rfc3339;
use crate::error::{Error, Result};

/// The values a step works with: the skill's bound values, then the exposed ones from `inputs`.
/// Returns the merged object and the exposed names missing from `inputs`.
fn merged(
    config: &Map<String, Value>,
    bound: &str,
    exposed: &str,
    inputs: &SkillInputs,
) -> (Map<String, Value>, Vec<String>) {
    let mut out = config.get(bound).and_then(Value::as_object).cloned().unwrap_or_default();
    let names: Vec<String> = match config.get(exposed) {
        Some(Value::Array(a)) => a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
        Some(Value::Object(m)) => {
            m.iter().filter(|(_, v)| v.as_bool() != Some(false)).map(|(k, _)| k.clone()).collect()
        }
        _ => Vec::new(),
    };
    let mut missing = Vec::new();
    for n in names {
        match inputs.get(&n) {
            Some(v) if !v.is_null() => {
                out.insert(n, v.clone());
            }
            _ => missing.push(n),
        }
    }
    (out, missing)
}

/// Runs a delivering skill with `inputs`; `key` makes the deliveries idempotent.
pub(super) fn invoke(
    app: &App,
    workspace_id: &str,
    skill: &Skill,
    inputs: &SkillInputs,
    conversation_id: Option<&str>,
    key: &str,
) -> Result<SkillResult> {
    let now = rfc3339(app.clock.now());
    let cfg = &skill.config;
    let webhook = |url: &str, body: &Value, event: &str, outcome: &'static str| -> Result<SkillResult> {
        let id = app.db.write(|tx| {
            crate::delivery::enqueue_webhook(
                app,
                tx,
                &now,
                &crate::delivery::Webhook {
                    workspace_id,
                    event,
                    url,
                    body,
                    conversation_id,
                    key,
                    secret_url: event == "skill.slack_post",
                    signed_by: None,
                    bearer: None,
                },
            )
        })?;
        Ok(SkillResult { delivery_ids: vec![id], ..SkillResult::of(outcome) })
    };
    match skill.capability.as_str() {
        "webhook_call" => {
            let Some(url) = cfg.get("url").and_then(Value::as_str) else {
                return Ok(SkillResult {
                    reason: Some("the skill has no URL".into()),
                    ..SkillResult::of("destination_not_found")
                });
            };
            let (payload, missing) = merged(cfg, "boundPayload", "exposedPayload", inputs);
            if !missing.is_empty() {
                return Ok(SkillResult { missing_inputs: missing, ..SkillResult::of("missing_input") });
            }
            webhook(url, &Value::Object(payload), "skill.webhook_call", "delivered")
        }
        "slack_post" => {
            let Some(url) = skills::open_sealed_url(app, &skill.agent_id, cfg)? else {
                return Ok(SkillResult::failed("the skill has no incoming-webhook URL"));
            };
            // `text` is exposed unless the configuration binds it or names the exposed inputs
            let mut c = cfg.clone();
            if !c.contains_key("exposedInputs") && c.get("boundInputs").is_none_or(|b| b.get("text").is_none()) {
                c.insert("exposedInputs".into(), json!(["text"]));
            }
            let (values, missing) = merged(&c, "boundInputs", "exposedInputs", inputs);
            let text = values.get("text").and_then(Value::as_str);
            let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
                let mut missing = missing;
                missing.push("text".into());
                return Ok(SkillResult { missing_inputs: missing, ..SkillResult::failed("a Slack post needs text") });
            };
            webhook(&url, &json!({"text": text}), "skill.slack_post", "posted")
        }
        "email" => {
            let (values, mut missing) = merged(cfg, "boundInputs", "exposedInputs", inputs);
            // only what the skill binds or exposes: a caller cannot pick recipients the operator did not offer
            let s = |k: &str| values.get(k).and_then(Value::as_str).map(str::to_string);
            for k in ["to", "subject"] {
                if s(k).is_none() && !missing.iter().any(|m| m == k) {
                    missing.push(k.into());
                }
            }
            if s("bodyText").is_none() && s("bodyHtml").is_none() {
                missing.push("bodyText".into());
            }
            if !missing.is_empty() {
                return Ok(SkillResult {
                    missing_inputs: missing,
                    ..SkillResult::failed("the email is missing inputs")
                });
            }
            if cfg.get("mode").and_then(Value::as_str) != Some("send") {
                return Ok(SkillResult::of("drafted"));
            }
            if app.config.smtp.is_none() {
                return Ok(SkillResult::failed(crate::delivery::email_not_configured()));
            }
            let to: Vec<String> = s("to")
                .unwrap_or_default()
                .split(',')
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
                .collect();
            let text = s("bodyText").unwrap_or_default();
            // HTML only from the operator's own configuration; exposed text is escaped
            let bound_html =
                cfg.get("boundInputs").and_then(|b| b.get("bodyHtml")).and_then(Value::as_str).map(str::to_string);
            let html = bound_html
                .unwrap_or_else(|| format!("<p>{}</p>", crate::delivery::notices::escape(&text).replace('\n', "<br>")));
            let subject = s("subject").unwrap_or_default();
            let id = app.db.write(|tx| {
                let m = crate::delivery::Email {
                    workspace_id,
                    event: "skill.email",
                    to: &to,
                    subject: &subject,
                    text: &text,
                    html: &html,
                    conversation_id,
                    key,
                };
                crate::delivery::enqueue_email(app, tx, &now, &m)
            })?;
            Ok(SkillResult { delivery_ids: vec![id], ..SkillResult::of("sent") })
        }
        "notify" => {
            let delivery: crate::agents::Delivery =
                cfg.get("delivery").and_then(|d| serde_json::from_value(d.clone()).ok()).unwrap_or_default();
            let message = inputs.get("message").and_then(Value::as_str).unwrap_or("").trim().to_string();
            if message.is_empty() {
                return Ok(SkillResult {
                    missing_inputs: vec!["message".into()],
                    ..SkillResult::failed("a notice needs a message")
                });
            }
            let body = json!({
                "name": inputs.get("name"), "email": inputs.get("email"), "message": message, "workspaceId": workspace_id,
                "conversationId": conversation_id, "requestId": Value::Null,
            });
            let mut ids = Vec::new();
            if let Some(w) = &delivery.webhook {
                ids.extend(webhook(&w.url, &body, "contact.request", "delivered")?.delivery_ids);
            }
            if !delivery.recipient_emails.is_empty() {
                let text = format!("{message}\n");
                let html = format!("<p>{}</p>", crate::delivery::notices::escape(&message));
                let id = app.db.write(|tx| {
                    let m = crate::delivery::Email {
                        workspace_id,
                        event: "contact.request",
                        to: &delivery.recipient_emails,
                        subject: &format!("Notice: {}", skill.name),
                        text: &text,
                        html: &html,
                        conversation_id,
                        key,
                    };
                    crate::delivery::enqueue_email(app, tx, &now, &m)
                })?;
                ids.push(id);
            }
            Ok(SkillResult { delivery_ids: ids, ..SkillResult::of("delivered") })
        }
        other => Err(Error::invalid(format!("a {other} skill does not deliver"))),
    }
}
