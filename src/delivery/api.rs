//! The wire shapes of the delivery log and the notification settings (owned by the HTTP edge).

use serde_json::{Value, json};

use super::config::SmtpConfig;
use super::{Attempt, Delivery, DeliveryPage, SmtpAnswer};

pub fn delivery(d: &Delivery) -> Value {
    json!({
        "id": d.id, "channel": d.channel, "event": d.event, "target": d.target, "conversationId": d.conversation_id,
        "idempotencyKey": d.idempotency_key, "status": d.status, "attempts": d.attempts,
        "lastStatusCode": d.last_status_code, "lastError": d.last_error,
        "createdAt": d.created_at, "updatedAt": d.updated_at, "deliveredAt": d.delivered_at,
    })
}

pub fn page(p: &DeliveryPage) -> Value {
    json!({
        "deliveries": p.deliveries.iter().map(delivery).collect::<Vec<_>>(),
        "total": p.total, "nextCursor": p.next_cursor, "hasMore": p.next_cursor.is_some(),
    })
}

pub fn detail(d: &Delivery, attempts: &[Attempt]) -> Value {
    let mut v = delivery(d);
    v["log"] = attempts
        .iter()
        .map(|a| {
            json!({"attempt": a.attempt, "at": a.at, "outcome": a.outcome, "statusCode": a.status_code,
                   "durationMs": a.duration_ms, "error": a.error})
        })
        .collect();
    v
}

/// `GET /settings/notifications`: the SMTP server (never its password) and the guard's setup.
pub fn notifications(smtp: Option<&SmtpConfig>, allow_list: usize, public_url: Option<&str>) -> Value {
    json!({
        "email": match smtp {
            Some(s) => json!({
                "configured": true, "host": s.host, "port": s.port, "security": s.security.as_str(), "from": s.from,
                "authenticated": s.username.is_some() && s.password.is_some(),
            }),
            None => json!({"configured": false, "reason": super::email::NOT_CONFIGURED}),
        },
        "webhooks": {"httpsRequired": true, "allowListEntries": allow_list},
        "dashboardLinks": public_url.is_some(),
    })
}

pub fn smtp_answer(a: &SmtpAnswer) -> Value {
    json!({"ok": a.ok, "code": a.code, "message": a.message, "durationMs": a.duration.as_millis() as u64})
}
