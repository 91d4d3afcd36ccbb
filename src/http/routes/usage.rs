//! Usage limits, plans and credits: the public plan catalog, the signed-in account's usage, and
//! the admin routes under `/api/v1/ee/usage-limits` (bearer `EE_USAGE_ADMIN_TOKEN`).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::app::App;
use crate::error::{Error, ErrorCode, Result};
use crate::http::extract::{Json, Path, Query, SessionCtx};
use crate::http::openapi::{Auth, Op, Routes};
use crate::usage::api::{self as wire, ProfileJson};
use crate::usage::limits::Period;
use crate::usage::limits::profiles::{self, ProfileInput};
use schemars::JsonSchema;

const BASE: &str = "/api/v1/ee/usage-limits";

pub fn routes() -> Routes {
    let admin = |summary| Op::new(summary).auth(Auth::UsageAdmin);
    Routes::new("Usage")
        .get("/api/v1/plans", plans, Op::new("The plan catalog").public().ok_any())
        .get(
            &format!("{BASE}/me"),
            me,
            Op::new("Your account's usage against its limits")
                .session()
                .query::<PeriodQuery>()
                .ok_with(account_usage_schema),
        )
        .get(&format!("{BASE}/profiles"), list_profiles, admin("List usage profiles").ok_any())
        .put(
            &format!("{BASE}/profiles/{{key}}"),
            put_profile,
            admin("Create or change a usage profile").body_any().ok_any(),
        )
        .put(
            &format!("{BASE}/accounts/{{id}}"),
            assign,
            admin("Assign a profile to an account").body::<AssignBody>().ok_with(account_usage_schema),
        )
        .get(
            &format!("{BASE}/accounts/{{id}}/usage"),
            account_usage,
            admin("An account's usage").query::<PeriodQuery>().ok_with(account_usage_schema),
        )
        .post(
            &format!("{BASE}/accounts/{{id}}/credits"),
            credits,
            admin("Add conversation credits").body::<CreditsBody>().ok_any(),
        )
        .get(
            &format!("{BASE}/org-creation/users/{{id}}"),
            get_override,
            admin("A person's organization creation limit").ok_any(),
        )
        .put(
            &format!("{BASE}/org-creation/users/{{id}}"),
            put_override,
            admin("Override a person's organization creation limit").body::<OverrideBody>().ok_any(),
        )
        .delete(
            &format!("{BASE}/org-creation/users/{{id}}"),
            delete_override,
            admin("Remove the override").no_content(),
        )
}

/// The schema of `usage::api::account_usage` (the account usage response).
fn account_usage_schema(_: &mut schemars::SchemaGenerator) -> Value {
    use crate::http::openapi::shapes::{array, integer, map_of, nullable, number, obj, string};
    let limit = json!({"type": ["number", "null"]});
    let meter = obj(json!({"used": number(), "limit": limit}));
    let period_meter = obj(json!({"used": number(), "limit": limit, "periodStart": string(), "resetAt": string()}));
    let profile = obj(json!({
        "key": string(), "displayName": string(), "monthlyAnswerLimit": limit, "storedDocumentLimit": limit,
        "storedIndexedByteLimit": limit, "monthlyIndexedByteLimit": limit, "monthlyConversationLimit": limit,
        "repliesPerConversation": integer(), "createdAt": string(), "updatedAt": string(),
    }));
    let conversations = obj(json!({
        "used": number(), "limit": limit, "credits": number(), "periodStart": string(), "resetAt": string(),
        "byKind": map_of(number()),
    }));
    obj(json!({
        "accountId": string(), "profile": nullable(profile), "period": string(),
        "storedIndexedBytes": meter, "monthlyIndexedBytes": period_meter, "monthlyAnswers": period_meter,
        "storedDocuments": meter, "monthlyConversations": nullable(conversations),
        "answersByDay": array(obj(json!({"day": string(), "answers": integer()}))),
        "byAgent": array(obj(json!({
            "workspaceId": string(), "agentId": crate::http::openapi::shapes::string_or_null(), "answers": integer(),
            "inputTokens": integer(), "outputTokens": integer(),
        }))),
    }))
}

/// The admin bearer: 503 `service_unavailable` (`details.missingEnv`) when the deployment has no
/// token, 401 for any other credential.
fn admin(app: &App, headers: &HeaderMap) -> Result<()> {
    let Some(token) = &app.config.usage.admin_token else {
        return Err(Error::new(ErrorCode::ServiceUnavailable, "usage administration is not configured")
            .with_details(json!({"missingEnv": "EE_USAGE_ADMIN_TOKEN"})));
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    let (a, b) = (given.as_bytes(), token.expose().as_bytes());
    let same = a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0;
    if same { Ok(()) } else { Err(Error::new(ErrorCode::Unauthorized, "the usage admin token is missing or wrong")) }
}

#[derive(Deserialize, JsonSchema)]
pub struct PeriodQuery {
    period: Option<String>,
}

fn period(app: &App, q: &PeriodQuery) -> Result<Period> {
    match q.period.as_deref().map(str::trim).filter(|p| !p.is_empty()) {
        Some(p) => Period::parse(p),
        None => Ok(Period::of(app.clock.now())),
    }
}

pub async fn plans() -> impl IntoResponse {
    ([(header::CACHE_CONTROL, "public, max-age=300")], axum::Json(wire::catalog()))
}

pub async fn me(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Query(q): Query<PeriodQuery>,
) -> Result<impl IntoResponse> {
    let u = app
        .blocking(move |app| {
            let p = period(app, &q)?;
            profiles::usage(app, &ctx.p.org_id.0, &p)
        })
        .await?;
    Ok(axum::Json(wire::account_usage(&u)))
}

pub async fn list_profiles(State(app): State<Arc<App>>, headers: HeaderMap) -> Result<impl IntoResponse> {
    admin(&app, &headers)?;
    let list = app.blocking(profiles::profiles).await?;
    Ok(axum::Json(json!({"profiles": list.into_iter().map(ProfileJson::from).collect::<Vec<_>>()})))
}

/// `Some(None)` for null, `Some(Some(n))` for a number, `None` when absent; 400 otherwise.
fn nullable(m: &Map<String, Value>, field: &str) -> Result<Option<Option<i64>>> {
    match m.get(field) {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(None)),
        Some(v) => v
            .as_i64()
            .map(|n| Some(Some(n)))
            .ok_or_else(|| Error::invalid_field(field, format!("{field} must be a whole number or null"))),
    }
}

pub async fn put_profile(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(key): Path<String>,
    Json(body): Json<Value>,
) -> Result<impl IntoResponse> {
    admin(&app, &headers)?;
    let m = body.as_object().ok_or_else(|| Error::invalid_field("body", "the body must be an object"))?;
    const KNOWN: [&str; 7] = [
        "displayName",
        "monthlyAnswerLimit",
        "storedDocumentLimit",
        "storedIndexedByteLimit",
        "monthlyIndexedByteLimit",
        "monthlyConversationLimit",
        "repliesPerConversation",
    ];
    if let Some(k) = m.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(Error::invalid_field(k, format!("unknown field {k}")));
    }
    let input = ProfileInput {
        display_name: m.get("displayName").and_then(Value::as_str).map(str::to_string),
        monthly_answer_limit: nullable(m, "monthlyAnswerLimit")?,
        stored_document_limit: nullable(m, "storedDocumentLimit")?,
        stored_indexed_byte_limit: nullable(m, "storedIndexedByteLimit")?,
        monthly_indexed_byte_limit: nullable(m, "monthlyIndexedByteLimit")?,
        monthly_conversation_limit: nullable(m, "monthlyConversationLimit")?,
        replies_per_conversation: match m.get("repliesPerConversation") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_i64().ok_or_else(|| {
                Error::invalid_field("repliesPerConversation", "repliesPerConversation must be 1 to 1000")
            })?),
        },
    };
    let p = app.blocking(move |app| profiles::put_profile(app, &key, input)).await?;
    Ok(axum::Json(json!({"profile": ProfileJson::from(p)})))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AssignBody {
    profile_key: Option<String>,
}

pub async fn assign(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Json(b): Json<AssignBody>,
) -> Result<impl IntoResponse> {
    admin(&app, &headers)?;
    let u = app
        .blocking(move |app| {
            profiles::assign(app, &id, b.profile_key.as_deref())?;
            profiles::usage(app, &id, &Period::of(app.clock.now()))
        })
        .await?;
    Ok(axum::Json(wire::account_usage(&u)))
}

pub async fn account_usage(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<PeriodQuery>,
) -> Result<impl IntoResponse> {
    admin(&app, &headers)?;
    let u = app
        .blocking(move |app| {
            let p = period(app, &q)?;
            profiles::usage(app, &id, &p)
        })
        .await?;
    Ok(axum::Json(wire::account_usage(&u)))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreditsBody {
    conversations: i64,
    reference: String,
}

pub async fn credits(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Json(b): Json<CreditsBody>,
) -> Result<impl IntoResponse> {
    admin(&app, &headers)?;
    let (applied, balance, u) = app
        .blocking(move |app| {
            let (applied, balance) = profiles::add_credits(app, &id, b.conversations, &b.reference)?;
            Ok((applied, balance, profiles::usage(app, &id, &Period::of(app.clock.now()))?))
        })
        .await?;
    Ok(axum::Json(json!({"credits": balance, "applied": applied, "usage": wire::account_usage(&u)})))
}

fn override_json(user: &str, limit: Option<Option<i64>>, default: u32) -> Value {
    match limit {
        Some(l) => json!({"userId": user, "monthlyLimit": l, "overridden": true}),
        None => json!({"userId": user, "monthlyLimit": default, "overridden": false}),
    }
}

pub async fn get_override(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<impl IntoResponse> {
    admin(&app, &headers)?;
    let user = id.clone();
    let o = app.blocking(move |app| profiles::org_override(app, &user)).await?;
    Ok(axum::Json(json!({"override": override_json(&id, o, app.config.usage.max_orgs_per_user_per_month)})))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OverrideBody {
    monthly_limit: Option<i64>,
}

pub async fn put_override(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Json(b): Json<OverrideBody>,
) -> Result<impl IntoResponse> {
    admin(&app, &headers)?;
    let user = id.clone();
    app.blocking(move |app| profiles::set_org_override(app, &user, b.monthly_limit)).await?;
    let default = app.config.usage.max_orgs_per_user_per_month;
    Ok(axum::Json(json!({"override": override_json(&id, Some(b.monthly_limit), default)})))
}

pub async fn delete_override(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    admin(&app, &headers)?;
    let existed = app.blocking(move |app| profiles::delete_org_override(app, &id)).await?;
    if existed { Ok(StatusCode::NO_CONTENT) } else { Err(Error::not_found("override")) }
}
