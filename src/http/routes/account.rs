//! Registration, sign-in, invitations, workspaces, personal tokens, service credentials, audit.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use crate::app::App;
use crate::auth::Perm;
use crate::auth::accounts::{self, NewInvitation, RegisterInput, SignedIn};
use crate::auth::api::{InvitationJson, MeJson};
use crate::auth::tokens::{self, NewToken};
use crate::error::{Error, Result};
use crate::http::extract::{Client, Ctx, Json, Path, Query, SESSION_COOKIE, SessionCtx};
use crate::http::openapi::shapes::{array, boolean, obj, of, string, timestamp};
use crate::http::openapi::{Op, Routes};
use schemars::JsonSchema;

/// The account routes (merged into the API by `http::routes`).
pub fn routes() -> Routes {
    use crate::audit::api::PageJson as AuditPage;
    use crate::auth::api::MemberJson;
    use crate::auth::tokens::TokenView;
    use crate::auth::{Organization, Workspace};
    let workspace = |g: &mut _| obj(json!({ "workspace": of::<Workspace>(g) }));
    Routes::new("Accounts")
        .post(
            "/api/v1/auth/register",
            register,
            Op::new("Register (the first one creates the organization)")
                .public()
                .about("Email is trimmed and lowercased; password 8–256 characters. Sets the session cookie. Limited per client address (429).")
                .body::<RegisterBody>()
                .answers_with(201, "Registered and signed in", signed_in_schema)
                .errors(&[403, 409, 429, 503]),
        )
        .post(
            "/api/v1/auth/login",
            login,
            Op::new("Sign in")
                .public()
                .about("Sets the session cookie. Attempts are limited per email and per client address (429).")
                .body::<LoginBody>()
                .ok_with(signed_in_schema)
                .errors(&[401, 429, 503]),
        )
        .post("/api/v1/auth/logout", logout, Op::new("Sign out (clears the cookie)").session().no_content())
        .get("/api/v1/auth/me", me, Op::new("Who am I: user, organization, role, workspaces, permissions").ok::<MeJson>())
        .get(
            "/api/v1/account/invitations",
            list_invitations,
            Op::new("List invitations")
                .perm("organization.members.manage")
                .ok_with(|g| obj(json!({ "invitations": array(of::<InvitationJson>(g)) }))),
        )
        .post(
            "/api/v1/account/invitations",
            create_invitation,
            Op::new("Invite someone (the token is shown once)")
                .perm("organization.members.manage")
                .body::<InvitationBody>()
                .answers_with(201, "Created", |g| obj(json!({ "invitation": of::<InvitationJson>(g), "token": string() }))),
        )
        .get(
            "/api/v1/account/members",
            list_members,
            Op::new("List the organization's members")
                .perm("organization.members.manage")
                .ok_with(|g| obj(json!({ "members": array(of::<MemberJson>(g)) }))),
        )
        .get(
            "/api/v1/auth/registration",
            registration,
            Op::new("Whether first-run registration is open").public().ok_json(obj(json!({ "open": boolean() }))),
        )
        .delete(
            "/api/v1/account/invitations/{id}",
            revoke_invitation,
            Op::new("Revoke an invitation").perm("organization.members.manage").no_content(),
        )
        .get(
            "/api/v1/account/tokens",
            list_tokens,
            Op::new("List your personal access tokens").session().ok_with(|g| obj(json!({ "tokens": array(of::<TokenView>(g)) }))),
        )
        .post(
            "/api/v1/account/tokens",
            create_token,
            Op::new("Create a personal access token (the secret is shown once)")
                .session()
                .body::<TokenBody>()
                .answers_with(201, "Created", |g| obj(json!({ "token": of::<TokenView>(g), "secret": string() }))),
        )
        .delete("/api/v1/account/tokens/{id}", revoke_token, Op::new("Revoke a personal access token").session().no_content())
        .get(
            "/api/v1/workspaces",
            list_workspaces,
            Op::new("List the workspaces you can see").ok_with(|g| obj(json!({ "workspaces": array(of::<Workspace>(g)) }))),
        )
        .post(
            "/api/v1/workspaces",
            create_workspace,
            Op::new("Create a workspace")
                .perm("organization.workspaces.manage")
                .body::<WorkspaceBody>()
                .answers_with(201, "Created", workspace)
                .errors(&[409]),
        )
        .post(
            "/api/v1/account/accounts",
            create_account,
            Op::new("Create another organization (the creation cap applies)")
                .session()
                .body::<WorkspaceBody>()
                .answers_with(201, "Created", |g| {
                    obj(json!({ "organization": of::<Organization>(g), "workspace": of::<Workspace>(g) }))
                })
                .errors(&[429]),
        )
        .get("/api/v1/workspaces/{id}", get_workspace, Op::new("Get a workspace").ok_with(workspace))
        .patch(
            "/api/v1/workspaces/{id}",
            rename_workspace,
            Op::new("Rename a workspace")
                .perm("organization.workspaces.manage")
                .body::<WorkspaceBody>()
                .ok_with(workspace)
                .errors(&[409]),
        )
        .get(
            "/api/v1/service-credentials",
            list_service_credentials,
            Op::new("List the workspace's service credentials")
                .session()
                .perm("organization.api_access.manage")
                .ok_with(|g| obj(json!({ "credentials": array(of::<TokenView>(g)) }))),
        )
        .post(
            "/api/v1/service-credentials",
            create_service_credential,
            Op::new("Create a service credential (the secret is shown once)")
                .session()
                .perm("organization.api_access.manage")
                .body::<TokenBody>()
                .answers_with(201, "Created", |g| obj(json!({ "credential": of::<TokenView>(g), "secret": string() }))),
        )
        .delete(
            "/api/v1/service-credentials/{id}",
            revoke_service_credential,
            Op::new("Revoke a service credential").session().perm("organization.api_access.manage").no_content(),
        )
        .get(
            "/api/v1/audit-events",
            audit_events,
            Op::new("Read the audit log, newest first").perm("organization.audit.read").query::<AuditQuery>().ok::<AuditPage>(),
        )
}

/// `{user, organization, role, sessionExpiresAt}` of a sign-in or registration.
fn signed_in_schema(g: &mut schemars::SchemaGenerator) -> serde_json::Value {
    use crate::auth::{Organization, Role, User};
    obj(json!({
        "user": of::<User>(g),
        "organization": of::<Organization>(g),
        "role": of::<Role>(g),
        "sessionExpiresAt": timestamp(),
    }))
}

fn session_cookie(app: &App, value: &str, max_age_secs: u64) -> HeaderValue {
    let secure = if app.config.cookies_secure() { "; Secure" } else { "" };
    let s = format!("{SESSION_COOKIE}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age_secs}{secure}");
    HeaderValue::from_str(&s).unwrap_or_else(|_| HeaderValue::from_static("steward_session=; Max-Age=0"))
}

fn signed_in_response(app: &App, status: StatusCode, s: SignedIn) -> Response {
    let body = json!({
        "user": s.user,
        "organization": s.organization,
        "role": s.role,
        "sessionExpiresAt": s.expires_at,
    });
    let mut resp = (status, axum::Json(body)).into_response();
    resp.headers_mut()
        .insert(header::SET_COOKIE, session_cookie(app, &s.session_token, app.config.session_ttl.as_secs()));
    resp
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegisterBody {
    email: String,
    password: String,
    name: Option<String>,
    invitation_token: Option<String>,
    organization_name: Option<String>,
}

pub async fn register(
    State(app): State<Arc<App>>,
    Client(client): Client,
    Json(b): Json<RegisterBody>,
) -> Result<Response> {
    let input = RegisterInput {
        email: b.email,
        password: b.password,
        name: b.name,
        invitation_token: b.invitation_token,
        organization_name: b.organization_name,
    };
    let signed = app.blocking(move |app| accounts::register(app, input, &client)).await?;
    Ok(signed_in_response(&app, StatusCode::CREATED, signed))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginBody {
    email: String,
    password: String,
}

pub async fn login(State(app): State<Arc<App>>, Client(client): Client, Json(b): Json<LoginBody>) -> Result<Response> {
    let signed = app.blocking(move |app| accounts::login(app, &b.email, &b.password, &client)).await?;
    Ok(signed_in_response(&app, StatusCode::OK, signed))
}

pub async fn logout(State(app): State<Arc<App>>, SessionCtx(ctx): SessionCtx) -> Result<Response> {
    let p = ctx.p.clone();
    app.blocking(move |app| accounts::logout(app, &p)).await?;
    let mut resp = StatusCode::NO_CONTENT.into_response();
    resp.headers_mut().insert(header::SET_COOKIE, session_cookie(&app, "", 0));
    Ok(resp)
}

pub async fn me(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    let me = app.blocking(move |app| accounts::me(app, &ctx.p)).await?;
    Ok(axum::Json(MeJson::from(me)))
}

// -- invitations

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InvitationBody {
    email: Option<String>,
    role: String,
    expires_in_days: Option<u32>,
}

pub async fn create_invitation(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Json(b): Json<InvitationBody>,
) -> Result<impl IntoResponse> {
    let (inv, token) = app
        .blocking(move |app| {
            accounts::create_invitation(
                app,
                &ctx.p,
                &ctx.actor(),
                NewInvitation { email: b.email, role: b.role, expires_in_days: b.expires_in_days },
            )
        })
        .await?;
    Ok((StatusCode::CREATED, axum::Json(json!({ "invitation": InvitationJson::from(inv), "token": token }))))
}

pub async fn list_members(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    let list = app.blocking(move |app| accounts::list_members(app, &ctx.p)).await?;
    let members: Vec<_> = list.iter().map(crate::auth::api::MemberJson::of).collect();
    Ok(axum::Json(json!({ "members": members })))
}

/// Public: whether the first-run registration (no invitation) is still open.
pub async fn registration(State(app): State<Arc<App>>) -> Result<impl IntoResponse> {
    let open = app.blocking(accounts::registration_open).await?;
    Ok(axum::Json(json!({ "open": open })))
}

pub async fn list_invitations(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    let list = app.blocking(move |app| accounts::list_invitations(app, &ctx.p)).await?;
    let list: Vec<InvitationJson> = list.into_iter().map(InvitationJson::from).collect();
    Ok(axum::Json(json!({ "invitations": list })))
}

pub async fn revoke_invitation(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<StatusCode> {
    app.blocking(move |app| accounts::revoke_invitation(app, &ctx.p, &ctx.actor(), &id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

// -- personal tokens and service credentials

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenBody {
    name: String,
    permissions: Option<Vec<String>>,
    expires_at: Option<String>,
    expires_in_days: Option<u32>,
}

impl From<TokenBody> for NewToken {
    fn from(b: TokenBody) -> Self {
        NewToken {
            name: b.name,
            permissions: b.permissions,
            expires_at: b.expires_at,
            expires_in_days: b.expires_in_days,
        }
    }
}

pub async fn create_token(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Json(b): Json<TokenBody>,
) -> Result<impl IntoResponse> {
    let (t, secret) = app.blocking(move |app| tokens::create_personal(app, &ctx.p, &ctx.actor(), b.into())).await?;
    Ok((StatusCode::CREATED, axum::Json(json!({ "token": t, "secret": secret }))))
}

pub async fn list_tokens(State(app): State<Arc<App>>, SessionCtx(ctx): SessionCtx) -> Result<impl IntoResponse> {
    let list = app.blocking(move |app| tokens::list_personal(app, &ctx.p)).await?;
    Ok(axum::Json(json!({ "tokens": list })))
}

pub async fn revoke_token(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    app.blocking(move |app| tokens::revoke_personal(app, &ctx.p, &ctx.actor(), &id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn create_service_credential(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Json(b): Json<TokenBody>,
) -> Result<impl IntoResponse> {
    let (t, secret) = app.blocking(move |app| tokens::create_service(app, &ctx.p, &ctx.actor(), b.into())).await?;
    Ok((StatusCode::CREATED, axum::Json(json!({ "credential": t, "secret": secret }))))
}

pub async fn list_service_credentials(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
) -> Result<impl IntoResponse> {
    let list = app.blocking(move |app| tokens::list_service(app, &ctx.p)).await?;
    Ok(axum::Json(json!({ "credentials": list })))
}

pub async fn revoke_service_credential(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    app.blocking(move |app| tokens::revoke_service(app, &ctx.p, &ctx.actor(), &id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

// -- workspaces

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceBody {
    name: String,
}

pub async fn list_workspaces(State(app): State<Arc<App>>, ctx: Ctx) -> Result<impl IntoResponse> {
    let list = app.blocking(move |app| accounts::list_workspaces(app, &ctx.p)).await?;
    Ok(axum::Json(json!({ "workspaces": list })))
}

pub async fn create_workspace(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Json(b): Json<WorkspaceBody>,
) -> Result<impl IntoResponse> {
    let ws = app.blocking(move |app| accounts::create_workspace(app, &ctx.p, &ctx.actor(), &b.name)).await?;
    Ok((StatusCode::CREATED, axum::Json(json!({ "workspace": ws }))))
}

/// `POST /api/v1/account/accounts`: an additional organization (the creation cap applies).
pub async fn create_account(
    State(app): State<Arc<App>>,
    SessionCtx(ctx): SessionCtx,
    Json(b): Json<WorkspaceBody>,
) -> Result<impl IntoResponse> {
    let (org, ws) = app.blocking(move |app| accounts::create_organization(app, &ctx.p, &ctx.actor(), &b.name)).await?;
    Ok((StatusCode::CREATED, axum::Json(json!({ "organization": org, "workspace": ws }))))
}

pub async fn get_workspace(State(app): State<Arc<App>>, ctx: Ctx, Path(id): Path<String>) -> Result<impl IntoResponse> {
    let ws = app
        .blocking(move |app| {
            let list = accounts::list_workspaces(app, &ctx.p)?;
            list.into_iter().find(|w| w.id.0 == id).ok_or_else(|| Error::not_found("workspace"))
        })
        .await?;
    Ok(axum::Json(json!({ "workspace": ws })))
}

pub async fn rename_workspace(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Path(id): Path<String>,
    Json(b): Json<WorkspaceBody>,
) -> Result<impl IntoResponse> {
    let ws = app.blocking(move |app| accounts::rename_workspace(app, &ctx.p, &ctx.actor(), &id, &b.name)).await?;
    Ok(axum::Json(json!({ "workspace": ws })))
}

// -- audit

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuditQuery {
    workspace_id: Option<String>,
    action: Option<String>,
    actor_id: Option<String>,
    target_type: Option<String>,
    target_id: Option<String>,
    since: Option<String>,
    until: Option<String>,
    cursor: Option<String>,
    limit: Option<usize>,
}

/// `?limit=&cursor=` of a paged list.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PageQuery {
    pub limit: Option<usize>,
    pub cursor: Option<String>,
}

/// A page size: 50 by default, 1–200.
pub fn page_limit(limit: Option<usize>) -> Result<usize> {
    match limit {
        None => Ok(50),
        Some(n) if (1..=200).contains(&n) => Ok(n),
        Some(_) => Err(Error::invalid_field("limit", "limit must be between 1 and 200")),
    }
}

pub async fn audit_events(
    State(app): State<Arc<App>>,
    ctx: Ctx,
    Query(q): Query<AuditQuery>,
) -> Result<impl IntoResponse> {
    ctx.require(Perm::AuditRead)?;
    for (name, v) in [("since", &q.since), ("until", &q.until)] {
        if let Some(v) = v
            && crate::clock::parse_rfc3339(v).is_none()
        {
            return Err(Error::invalid_field(name, format!("{name} must be an RFC 3339 timestamp")));
        }
    }
    let filter = crate::audit::Filter {
        workspace_id: q.workspace_id,
        action: q.action,
        actor_id: q.actor_id,
        target_type: q.target_type,
        target_id: q.target_id,
        since: q.since.as_deref().and_then(crate::clock::parse_rfc3339).map(crate::clock::rfc3339),
        until: q.until.as_deref().and_then(crate::clock::parse_rfc3339).map(crate::clock::rfc3339),
        cursor: q.cursor,
        limit: page_limit(q.limit)?,
    };
    let org = ctx.p.org_id.clone();
    let page = app.blocking(move |app| app.db.read(|c| crate::audit::list(c, &org, &filter))).await?;
    Ok(axum::Json(crate::audit::api::PageJson::from(page)))
}
