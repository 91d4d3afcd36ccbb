//! The delivery log and the notification settings (SMTP status, test email). The rules live in
//! `crate::delivery`.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing;
use serde::Deserialize;

use super::account::page_limit;
use crate::app::App;
use crate::auth::Perm;
use crate::delivery::{self, api};
use crate::error::Result;
use crate::http::extract::{Ctx, Json, Path, Query};

pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/v1/deliveries", routing::get(list))
        .route("/api/v1/deliveries/{id}", routing::get(get))
        .route("/api/v1/settings/notifications", routing::get(notifications))
        .route("/api/v1/settings/notifications/test-email", routing::post(test_email))
}

#[derive(Deserialize)]
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

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestEmailBody {
    to: String,
}

async fn test_email(State(app): State<Arc<App>>, ctx: Ctx, Json(b): Json<TestEmailBody>) -> Result<impl IntoResponse> {
    ctx.p.require(Perm::SettingsManage)?;
    let a = app.blocking(move |app| delivery::send_test_email(app, &b.to)).await?;
    Ok(axum::Json(api::smtp_answer(&a)))
}
