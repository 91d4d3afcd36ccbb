use serde_json::json;

use crate::support::{Auth, TestApp};

#[tokio::test]
async fn register_login_me_logout() {
    let t = TestApp::new();
    let r = t
        .post(
            "/api/v1/auth/register",
            &Auth::None,
            json!({"email": " Owner@Example.com ", "password": "owner-password", "name": "Olive"}),
        )
        .await;
    r.assert_status(201);
    let body = r.json();
    assert_eq!(body["user"]["email"], "owner@example.com");
    assert_eq!(body["role"], "owner");
    let set_cookie = r.headers.get("set-cookie").unwrap().to_str().unwrap().to_string();
    assert!(set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Lax"), "{set_cookie}");
    assert!(!set_cookie.contains("Secure"), "no TLS configured: {set_cookie}");

    // sign in again with the normalized email
    let r = t
        .post("/api/v1/auth/login", &Auth::None, json!({"email": "OWNER@example.com", "password": "owner-password"}))
        .await;
    r.assert_status(200);
    let session = Auth::Cookie(r.cookie().unwrap());

    let me = t.get("/api/v1/auth/me", &session).await;
    me.assert_status(200);
    let me = me.json();
    assert_eq!(me["user"]["email"], "owner@example.com");
    assert_eq!(me["role"], "owner");
    assert_eq!(me["workspaces"].as_array().unwrap().len(), 1);
    assert_eq!(me["workspace"]["isDefault"], true);
    let perms: Vec<&str> = me["permissions"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    for p in [
        "workspace.agents.manage",
        "workspace.agents.read",
        "workspace.retrieval.query",
        "workspace.conversation.takeover",
        "organization.audit.read",
    ] {
        assert!(perms.contains(&p), "{p} missing from {perms:?}");
    }
    assert_eq!(me["authenticatedVia"], "session");

    let r = t.post("/api/v1/auth/logout", &session, json!({})).await;
    r.assert_status(204);
    assert!(r.headers.get("set-cookie").unwrap().to_str().unwrap().contains("Max-Age=0"));
    let r = t.get("/api/v1/auth/me", &session).await;
    r.assert_status(401);
    assert_eq!(r.code(), "unauthorized");
}

#[tokio::test]
async fn secure_cookie_behind_tls() {
    let t = TestApp::with_config(|c| c.public_url = Some("https://steward.example.com".into()));
    let r = t
        .post("/api/v1/auth/register", &Auth::None, json!({"email": "a@example.com", "password": "owner-password"}))
        .await;
    assert!(r.headers.get("set-cookie").unwrap().to_str().unwrap().contains("; Secure"));
}

#[tokio::test]
async fn wrong_password_and_unknown_email_look_the_same() {
    let t = TestApp::new();
    t.owner().await;
    let a = t
        .post("/api/v1/auth/login", &Auth::None, json!({"email": "owner@example.com", "password": "nope-nope-nope"}))
        .await;
    let b = t
        .post("/api/v1/auth/login", &Auth::None, json!({"email": "nobody@example.com", "password": "nope-nope-nope"}))
        .await;
    a.assert_status(401);
    b.assert_status(401);
    assert_eq!(a.json()["error"]["message"], b.json()["error"]["message"]);
}

#[tokio::test]
async fn registration_rules() {
    let t = TestApp::new();
    // validation
    let r = t
        .post("/api/v1/auth/register", &Auth::None, json!({"email": "not-an-email", "password": "owner-password"}))
        .await;
    r.assert_status(400);
    assert_eq!(r.json()["error"]["details"]["field"], "email");
    let r = t.post("/api/v1/auth/register", &Auth::None, json!({"email": "a@example.com", "password": "short"})).await;
    r.assert_status(400);
    assert_eq!(r.json()["error"]["details"]["field"], "password");

    let owner = t.owner().await;

    // a second registration without an invitation is refused
    let r = t
        .post(
            "/api/v1/auth/register",
            &Auth::None,
            json!({"email": "second@example.com", "password": "second-password"}),
        )
        .await;
    r.assert_status(403);
    assert_eq!(r.code(), "invitation_required");
    let r = t
        .post(
            "/api/v1/auth/register",
            &Auth::None,
            json!({"email": "second@example.com", "password": "second-password", "invitationToken": "stw_inv_bogus"}),
        )
        .await;
    r.assert_status(403);

    // with an invitation it is accepted, with the invitation's role
    let inv =
        t.post("/api/v1/account/invitations", &owner, json!({"email": "second@example.com", "role": "member"})).await;
    inv.assert_status(201);
    let token = inv.json()["token"].as_str().unwrap().to_string();
    let r = t
        .post(
            "/api/v1/auth/register",
            &Auth::None,
            json!({"email": "someone-else@example.com", "password": "second-password", "invitationToken": token}),
        )
        .await;
    r.assert_status(403); // the invitation names another email
    let r = t
        .post(
            "/api/v1/auth/register",
            &Auth::None,
            json!({"email": "second@example.com", "password": "second-password", "invitationToken": token}),
        )
        .await;
    r.assert_status(201);
    assert_eq!(r.json()["role"], "member");
    let member = Auth::Cookie(r.cookie().unwrap());

    // an invitation works once
    let r = t
        .post(
            "/api/v1/auth/register",
            &Auth::None,
            json!({"email": "second@example.com", "password": "second-password", "invitationToken": token}),
        )
        .await;
    assert!(r.status == 403 || r.status == 409, "{}", r.text());

    // the member sees the same organization, fewer permissions, and cannot invite
    let me = t.get("/api/v1/auth/me", &member).await.json();
    assert_eq!(me["role"], "member");
    assert!(!me["permissions"].as_array().unwrap().contains(&json!("workspace.agents.manage")));
    let r = t.post("/api/v1/account/invitations", &member, json!({"role": "member"})).await;
    r.assert_status(403);
    assert_eq!(r.json()["error"]["details"]["permission"], "organization.members.manage");

    // listing shows the accepted invitation; a new one can be revoked and then fails
    let list = t.get("/api/v1/account/invitations", &owner).await.json();
    assert_eq!(list["invitations"][0]["status"], "accepted");
    let inv = t.post("/api/v1/account/invitations", &owner, json!({"role": "admin"})).await.json();
    let id = inv["invitation"]["id"].as_str().unwrap();
    t.delete(&format!("/api/v1/account/invitations/{id}"), &owner).await.assert_status(204);
    let r = t
        .post(
            "/api/v1/auth/register",
            &Auth::None,
            json!({"email": "third@example.com", "password": "third-password", "invitationToken": inv["token"]}),
        )
        .await;
    r.assert_status(403);
    // owner invitations are not a thing
    t.post("/api/v1/account/invitations", &owner, json!({"role": "owner"})).await.assert_status(400);
}

#[tokio::test]
async fn invitations_expire() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let inv = t.post("/api/v1/account/invitations", &owner, json!({"role": "member", "expiresInDays": 1})).await.json();
    t.clock.advance_secs(2 * 24 * 3600);
    let r = t
        .post(
            "/api/v1/auth/register",
            &Auth::None,
            json!({"email": "late@example.com", "password": "late-password", "invitationToken": inv["token"]}),
        )
        .await;
    r.assert_status(403);
    assert_eq!(r.json()["error"]["details"]["code"], "invitation_expired");
}

#[tokio::test]
async fn login_is_rate_limited_per_email_and_per_address() {
    let t = TestApp::with_config(|c| {
        c.login_limit_per_email.max = 3;
        c.login_limit_per_ip.max = 5;
    });
    t.owner().await;
    for _ in 0..3 {
        t.post("/api/v1/auth/login", &Auth::None, json!({"email": "owner@example.com", "password": "wrong-password"}))
            .await
            .assert_status(401);
    }
    // the right password is refused too while the email is limited
    let r = t
        .post("/api/v1/auth/login", &Auth::None, json!({"email": "owner@example.com", "password": "owner-password"}))
        .await;
    r.assert_status(429);
    assert_eq!(r.code(), "rate_limit_exceeded");
    assert!(r.headers.get("retry-after").is_some());
    // other emails from the same address hit the address limit after 5 failures in total
    for i in 0..2 {
        t.post(
            "/api/v1/auth/login",
            &Auth::None,
            json!({"email": format!("x{i}@example.com"), "password": "wrong-password"}),
        )
        .await
        .assert_status(401);
    }
    t.post("/api/v1/auth/login", &Auth::None, json!({"email": "y@example.com", "password": "wrong-password"}))
        .await
        .assert_status(429);
    // the attempts are counted in the database: a restart does not forget them
    let t = t.restart(vec![]);
    let r = t
        .post("/api/v1/auth/login", &Auth::None, json!({"email": "owner@example.com", "password": "owner-password"}))
        .await;
    r.assert_status(429);
    // and what is counted is a hash of the email or address, never the email or address
    let stored: Vec<String> = t
        .app
        .db
        .read(|c| {
            let mut st = c.prepare("SELECT key FROM limit_hits")?;
            Ok(st.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?)
        })
        .unwrap();
    assert_eq!(stored.len(), 11, "the registration, five attempts per email, five per address: {stored:?}");
    assert!(stored.iter().all(|k| k.len() == 64 && !k.contains('@') && !k.contains("127.")), "{stored:?}");
    // the window slides
    t.clock.advance_secs(16 * 60);
    t.post("/api/v1/auth/login", &Auth::None, json!({"email": "owner@example.com", "password": "owner-password"}))
        .await
        .assert_status(200);
}

#[tokio::test]
async fn workspaces_and_workspace_context() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let r = t.post("/api/v1/workspaces", &owner, json!({"name": "Support EU"})).await;
    r.assert_status(201);
    let ws2 = r.json()["workspace"]["id"].as_str().unwrap().to_string();
    t.post("/api/v1/workspaces", &owner, json!({"name": "support eu"})).await.assert_status(409);
    t.post("/api/v1/workspaces", &owner, json!({"name": "  "})).await.assert_status(400);

    let list = t.get("/api/v1/workspaces", &owner).await.json();
    assert_eq!(list["workspaces"].as_array().unwrap().len(), 2);
    let r = t.patch(&format!("/api/v1/workspaces/{ws2}"), &owner, json!({"name": "Support Europe"})).await;
    r.assert_status(200);
    assert_eq!(r.json()["workspace"]["name"], "Support Europe");

    // X-Workspace-Id selects the context; without it the default workspace is used
    let me = t.send(axum::http::Method::GET, "/api/v1/auth/me", &owner, None, &[("x-workspace-id", &ws2)]).await.json();
    assert_eq!(me["workspace"]["id"], ws2.as_str());
    let me = t.get("/api/v1/auth/me", &owner).await.json();
    assert_ne!(me["workspace"]["id"], ws2.as_str());
    // an unknown workspace is a 404
    let r = t
        .send(
            axum::http::Method::GET,
            "/api/v1/auth/me",
            &owner,
            None,
            &[("x-workspace-id", "0191ee1e-0000-7000-8000-000000000000")],
        )
        .await;
    r.assert_status(404);
    assert_eq!(r.code(), "not_found");
}

#[tokio::test]
async fn audit_log_records_and_pages() {
    let t = TestApp::new();
    let owner = t.owner().await;
    for i in 0..3 {
        t.post("/api/v1/workspaces", &owner, json!({"name": format!("W{i}")})).await.assert_status(201);
    }
    let page = t.get("/api/v1/audit-events?action=workspace.created&limit=2", &owner).await;
    page.assert_status(200);
    let page = page.json();
    assert_eq!(page["events"].as_array().unwrap().len(), 2);
    assert_eq!(page["hasMore"], true);
    let first = page["events"][0].clone();
    assert_eq!(first["action"], "workspace.created");
    assert_eq!(first["actor"]["type"], "user");
    let cursor = page["nextCursor"].as_str().unwrap();
    let page2 =
        t.get(&format!("/api/v1/audit-events?action=workspace.created&limit=2&cursor={cursor}"), &owner).await.json();
    // 3 created here + the default workspace = 4 events
    assert_eq!(page2["events"].as_array().unwrap().len(), 2);
    assert_eq!(page2["hasMore"], false);
    t.get("/api/v1/audit-events?cursor=garbage", &owner).await.assert_status(400);
    t.get("/api/v1/audit-events?since=yesterday", &owner).await.assert_status(400);

    // only owners read the audit log
    let admin = t.member(&owner, "admin@example.com", "admin").await;
    t.get("/api/v1/audit-events", &admin).await.assert_status(403);

    // the log is append-only, even for the database
    let err = t.app.db.write(|tx| Ok(tx.execute("DELETE FROM audit_events", [])?)).unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
}
