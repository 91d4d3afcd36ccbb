use axum::http::Method;
use serde_json::json;

use crate::support::{Auth, TestApp, contains_bytes};

#[tokio::test]
async fn personal_token_is_shown_once_and_stored_hashed() {
    if crate::support::sqlite_mode_only("reads the SQLite file's bytes") {
        return;
    }
    let t = TestApp::new();
    let owner = t.owner().await;
    let r = t.post("/api/v1/account/tokens", &owner, json!({"name": "ci", "expiresInDays": 30})).await;
    r.assert_status(201);
    let body = r.json();
    let secret = body["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("stw_pat_"));
    assert_eq!(body["token"]["prefix"].as_str().unwrap(), &secret[..12]);

    // the listing never shows it again
    let list = t.get("/api/v1/account/tokens", &owner).await;
    list.assert_status(200);
    assert!(!list.text().contains(&secret));
    assert_eq!(list.json()["tokens"][0]["lastUsedAt"], serde_json::Value::Null);

    // it works as a bearer credential and records its last use
    let me = t.get("/api/v1/auth/me", &Auth::Bearer(secret.clone())).await;
    me.assert_status(200);
    assert_eq!(me.json()["authenticatedVia"], "personal_token");
    let list = t.get("/api/v1/account/tokens", &owner).await.json();
    assert!(list["tokens"][0]["lastUsedAt"].is_string());

    // the database holds the hash, never the token
    let bytes = t.db_bytes();
    assert!(!contains_bytes(&bytes, secret.as_bytes()), "raw token found in the database file");
    let hash = steward::auth::password::sha256_hex(&secret);
    assert!(contains_bytes(&bytes, hash.as_bytes()), "token hash not found in the database file");
}

#[tokio::test]
async fn revoked_and_expired_tokens_get_401() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let r = t.post("/api/v1/account/tokens", &owner, json!({"name": "short", "expiresInDays": 1})).await.json();
    let short = Auth::Bearer(r["secret"].as_str().unwrap().into());
    let r = t.post("/api/v1/account/tokens", &owner, json!({"name": "revoke-me"})).await.json();
    let revoked = Auth::Bearer(r["secret"].as_str().unwrap().into());
    let id = r["token"]["id"].as_str().unwrap().to_string();

    t.get("/api/v1/auth/me", &revoked).await.assert_status(200);
    t.delete(&format!("/api/v1/account/tokens/{id}"), &owner).await.assert_status(204);
    let r = t.get("/api/v1/auth/me", &revoked).await;
    r.assert_status(401);
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("revoked"));
    t.delete(&format!("/api/v1/account/tokens/{id}"), &owner).await.assert_status(404);

    t.get("/api/v1/auth/me", &short).await.assert_status(200);
    t.clock.advance_secs(24 * 3600 + 1);
    let r = t.get("/api/v1/auth/me", &short).await;
    r.assert_status(401);
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("expired"));

    // garbage and wrong schemes
    t.get("/api/v1/auth/me", &Auth::Bearer("stw_pat_nope".into())).await.assert_status(401);
    let r = t.send(Method::GET, "/api/v1/auth/me", &Auth::None, None, &[("authorization", "Basic abc")]).await;
    r.assert_status(401);
    t.get("/api/v1/auth/me", &Auth::None).await.assert_status(401);
}

/// Repeated requests with one credential are answered from the authentication cache; a
/// revocation, a logout or an expiry takes effect on the very next request.
#[tokio::test]
async fn cached_authentication_follows_revocation_logout_and_expiry_at_once() {
    use steward::auth::{Credentials, cached};
    let t = TestApp::new();
    // on PostgreSQL a node caches while its listening line is up (docs/scale-out.md, section 5),
    // which the node's background start opens
    t.app.start_background();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !t.app.db.caches_identity() {
        assert!(std::time::Instant::now() < deadline, "the node never started caching authentications");
        tokio::task::yield_now().await;
    }
    let owner = t.owner().await;
    let bearer = |s: &str| Credentials { bearer: Some(s.to_string()), session: None };

    let r = t.post("/api/v1/account/tokens", &owner, json!({"name": "hot"})).await.json();
    let (hot, id) = (r["secret"].as_str().unwrap().to_string(), r["token"]["id"].as_str().unwrap().to_string());
    assert!(cached(&t.app, &bearer(&hot), None).is_none(), "nothing cached before first use");
    for _ in 0..3 {
        t.get("/api/v1/auth/me", &Auth::Bearer(hot.clone())).await.assert_status(200);
    }
    let p = cached(&t.app, &bearer(&hot), None).expect("the repeated requests were cached");
    assert_eq!(p.credential_id.as_deref(), Some(id.as_str()));
    assert!(cached(&t.app, &bearer("stw_pat_unknown"), None).is_none());

    // a revocation: the next request is refused
    t.delete(&format!("/api/v1/account/tokens/{id}"), &owner).await.assert_status(204);
    assert!(cached(&t.app, &bearer(&hot), None).is_none());
    let r = t.get("/api/v1/auth/me", &Auth::Bearer(hot.clone())).await;
    r.assert_status(401);
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("revoked"));

    // an expiry, with nothing written in between
    let r = t.post("/api/v1/account/tokens", &owner, json!({"name": "short", "expiresInDays": 1})).await.json();
    let short = r["secret"].as_str().unwrap().to_string();
    for _ in 0..3 {
        t.get("/api/v1/auth/me", &Auth::Bearer(short.clone())).await.assert_status(200);
    }
    assert!(cached(&t.app, &bearer(&short), None).is_some());
    t.clock.advance_secs(24 * 3600 + 1);
    assert!(cached(&t.app, &bearer(&short), None).is_none());
    let r = t.get("/api/v1/auth/me", &Auth::Bearer(short.clone())).await;
    r.assert_status(401);
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("expired"));

    // a logout ends a cached session
    let Auth::Cookie(cookie) = &owner else { unreachable!() };
    let session = Credentials { bearer: None, session: Some(cookie.split_once('=').unwrap().1.to_string()) };
    for _ in 0..2 {
        t.get("/api/v1/auth/me", &owner).await.assert_status(200);
    }
    assert!(cached(&t.app, &session, None).is_some());
    t.post("/api/v1/auth/logout", &owner, json!({})).await.assert_status(204);
    assert!(cached(&t.app, &session, None).is_none());
    t.get("/api/v1/auth/me", &owner).await.assert_status(401);
    t.app.shutdown();
}

#[tokio::test]
async fn token_permissions_are_enforced() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let reader = t.token_with(&owner, &["workspace.agents.read"]).await;
    let r = t.get("/api/v1/account/invitations", &reader).await;
    r.assert_status(403);
    assert_eq!(r.code(), "forbidden");
    assert_eq!(r.json()["error"]["details"]["permission"], "organization.members.manage");
    t.get("/api/v1/auth/me", &reader).await.assert_status(200);

    // unknown permission names are rejected by name
    let r =
        t.post("/api/v1/account/tokens", &owner, json!({"name": "x", "permissions": ["workspace.everything"]})).await;
    r.assert_status(400);
    assert!(r.text().contains("workspace.everything"));

    // a member cannot mint a token with permissions their role lacks
    let member = t.member(&owner, "m@example.com", "member").await;
    t.post("/api/v1/account/tokens", &member, json!({"name": "x", "permissions": ["workspace.agents.manage"]}))
        .await
        .assert_status(403);
    // and a member's full token carries only the member's permissions
    let mt = t.token(&member).await;
    let me = t.get("/api/v1/auth/me", &mt).await.json();
    assert!(!me["permissions"].as_array().unwrap().contains(&json!("workspace.agents.manage")));
}

#[tokio::test]
async fn session_only_routes_refuse_bearer_credentials() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let tok = t.token(&owner).await;
    for (method, path) in [
        (Method::POST, "/api/v1/account/tokens"),
        (Method::GET, "/api/v1/account/tokens"),
        (Method::POST, "/api/v1/service-credentials"),
        (Method::GET, "/api/v1/service-credentials"),
    ] {
        let r = t
            .send(method.clone(), path, &tok, Some(json!({"name": "x", "permissions": ["workspace.agents.read"]})), &[])
            .await;
        r.assert_status(401);
        assert_eq!(r.json()["error"]["details"]["code"], "session_required", "{method} {path}");
    }
}

#[tokio::test]
async fn service_credentials_are_bound_to_their_workspace() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let ws_b = t.post("/api/v1/workspaces", &owner, json!({"name": "B"})).await.json()["workspace"]["id"]
        .as_str()
        .unwrap()
        .to_string();

    // needs an explicit permission list
    t.post("/api/v1/service-credentials", &owner, json!({"name": "bot"})).await.assert_status(400);
    t.post(
        "/api/v1/service-credentials",
        &owner,
        json!({"name": "bot", "permissions": ["organization.members.manage"]}),
    )
    .await
    .assert_status(400);
    let r = t
        .post(
            "/api/v1/service-credentials",
            &owner,
            json!({"name": "bot", "permissions": ["workspace.agents.read", "workspace.retrieval.query"]}),
        )
        .await;
    r.assert_status(201);
    let body = r.json();
    let svc = Auth::Bearer(body["secret"].as_str().unwrap().into());
    let svc_id = body["credential"]["id"].as_str().unwrap().to_string();
    let ws_a = body["credential"]["workspaceId"].as_str().unwrap().to_string();
    assert!(body["secret"].as_str().unwrap().starts_with("stw_svc_"));

    let me = t.get("/api/v1/auth/me", &svc).await;
    me.assert_status(200);
    let me = me.json();
    assert_eq!(me["authenticatedVia"], "service_credential");
    assert_eq!(me["workspace"]["id"], ws_a.as_str());
    assert_eq!(me["workspaces"].as_array().unwrap().len(), 1);
    assert_eq!(me["permissions"], json!(["workspace.agents.read", "workspace.retrieval.query"]));

    // it cannot reach the other workspace
    let r = t.send(Method::GET, "/api/v1/auth/me", &svc, None, &[("x-workspace-id", &ws_b)]).await;
    r.assert_status(404);
    t.get(&format!("/api/v1/workspaces/{ws_b}"), &svc).await.assert_status(404);
    t.get(&format!("/api/v1/workspaces/{ws_a}"), &svc).await.assert_status(200);

    // another workspace's resource answers 404: the credential seen from workspace B
    let r = t
        .send(
            Method::DELETE,
            &format!("/api/v1/service-credentials/{svc_id}"),
            &owner,
            None,
            &[("x-workspace-id", &ws_b)],
        )
        .await;
    r.assert_status(404);
    let list_b =
        t.send(Method::GET, "/api/v1/service-credentials", &owner, None, &[("x-workspace-id", &ws_b)]).await.json();
    assert_eq!(list_b["credentials"].as_array().unwrap().len(), 0);
    assert!(!list_b.to_string().contains(&svc_id));

    // revocation takes effect on the next request
    t.delete(&format!("/api/v1/service-credentials/{svc_id}"), &owner).await.assert_status(204);
    t.get("/api/v1/auth/me", &svc).await.assert_status(401);
}
