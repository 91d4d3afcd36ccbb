//! The delivery log, the notification settings (SMTP status, test email) and visitor contact
//! requests. The rules live in `crate::delivery`.

use std::sync::Arc;

use axum::extract::State;
use axum::response::IntoResponse;
use serde::Deserialize;

use super::account::page_limit;
use crate::app::App;
use crate::auth::Perm;
use crate::delivery::{self, api};
use crate::error::Result;
use crate::http::extract::{Ctx, Json, Path, Query};
use crate::http::openapi::shapes::{obj, string};
use crate::http::openapi::{Op, Routes};
use schemars::JsonSchema;
use serde_json::json;

pub fn routes() -> Routes {
    Routes::new("Delivery")
        .get(
            "/api/v1/deliveries",
            list,
            Op::new("The delivery log (webhooks, email), newest first")
                .perm("workspace.settings.read")
                .query::<ListQuery>()
                .ok_any(),
        )
        .get(
            "/api/v1/deliveries/{id}",
            get,
            Op::new("A delivery with its attempts").perm("workspace.settings.read").ok_any(),
        )
        .get(
            "/api/v1/settings/notifications",
            notifications,
            Op::new("Notification settings (SMTP, allow-list)")
                .tag("Settings")
                .perm("workspace.settings.read")
                .ok_any(),
        )
        .post(
            "/api/v1/settings/notifications/test-email",
            test_email,
            Op::new("Send a test email")
                .tag("Settings")
                .perm("workspace.settings.manage")
                .body::<TestEmailBody>()
                .ok_any()
                .errors(&[502, 503]),
        )
        .post(
            "/api/v1/agents/{id}/contact-requests",
            contact,
            Op::new("Send a contact request to the agent's destination")
                .perm("workspace.chat")
                .body::<ContactBody>()
                .answers_json(202, "Queued", obj(json!({"status": string(), "destination": {}, "deliveries": {}})))
                .errors(&[422, 429]),
        )
        .post(
            "/api/v1/agents/{id}/skills/{sid}/test",
            test_skill,
            Op::new("Test a delivering skill with sample inputs")
                .perm("workspace.agents.manage")
                .body::<SkillTestBody>()
                .answers_any(202, "Queued")
                .errors(&[422]),
        )
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListQuery {
    limit: Option<usize>,
    cursor: Option<String>,
    status: Option<String>,
    channel: Option<String>,
    conversation_id: Option<String>,
}

async fn list(State(app): State<Arc<App>>, ctx: Ctx, Query(q): Query<ListQuery>) -> Result<impl IntoResponse> {
    let limit = page_limit(q.limit)?;
    let page = app
        .blocking(move |app| {
            delivery::list(app, &ctx.p, q.status, q.channel, q.conversation_id, q.cursor.as_deref(), limit)
        })
        .await?;
    Ok(axum::Json(api::page(&page)))
}

async fn get(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<impl IntoResponse> {
    let (d, attempts) = app.blocking(move |app| delivery::get(app, &ctx.p, &id)).await?;
    Ok(axum::Json(api::detail(&d, &attempts)))
}

async fn notifications(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    ctx.p.require(Perm::SettingsRead)?;
    let c = &app.config;
    Ok(axum::Json(api::notifications(c.smtp.as_ref(), c.delivery.allow.len(), c.public_url.as_deref())))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestEmailBody {
    to: String,
}

async fn test_email(State(app): State<Arc<App>>, ctx: Ctx, Json(b): Json<TestEmailBody>) -> Result<impl IntoResponse> {
    ctx.p.require(Perm::SettingsManage)?;
    let a = app.blocking(move |app| delivery::send_test_email(app, &b.to)).await?;
    Ok(axum::Json(api::smtp_answer(&a)))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContactBody {
    message: String,
    name: Option<String>,
    email: Option<String>,
    conversation_id: Option<String>,
    skill: Option<String>,
}

async fn contact(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(agent): Path<String>,
    Json(b): Json<ContactBody>,
) -> Result<impl IntoResponse> {
    let request_id = ctx.request_id.clone();
    let r = delivery::notices::ContactRequest {
        name: b.name.map(|n| n.trim().to_string()).filter(|n| !n.is_empty()),
        email: b.email.map(|e| e.trim().to_string()).filter(|e| !e.is_empty()),
        message: b.message,
        conversation_id: b.conversation_id,
        skill: b.skill,
        request_id,
    };
    let o = app.blocking(move |app| delivery::notices::contact_request(app, &ctx.p, &agent, r)).await?;
    Ok((
        axum::http::StatusCode::ACCEPTED,
        axum::Json(serde_json::json!({"status": o.status, "destination": o.destination, "deliveries": o.deliveries})),
    ))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillTestBody {
    #[serde(default)]
    inputs: serde_json::Map<String, serde_json::Value>,
}

async fn test_skill(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path((agent, skill)): Path<(String, String)>,
    Json(b): Json<SkillTestBody>,
) -> Result<impl IntoResponse> {
    let r = app.blocking(move |app| crate::skills::test(app, &ctx.p, &agent, &skill, &b.inputs)).await?;
    Ok((
        axum::http::StatusCode::ACCEPTED,
        axum::Json(serde_json::json!({
            "outcome": r.outcome, "missingInputs": r.missing_inputs, "deliveryIds": r.delivery_ids, "reason": r.reason,
        })),
    ))
}
