//! The converse surface through the API: agent channel credentials (secret shown once, stored
//! hashed, rotate and revoke effective at once, dashboard session and agent manage only).

use serde_json::json;

use crate::support::TestApp;

#[tokio::test]
async fn channel_credentials_show_their_secret_once_and_rotate_and_revoke_at_once() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let agent = t.default_agent(&owner).await;
    let path = format!("/api/v1/agents/{agent}/channel-credentials");
    let r = t.post(&path, &owner, json!({"audience": "mcp", "label": "Claude Desktop"})).await;
    r.assert_status(201);
    let v = r.json();
    let secret = v["secret"].as_str().unwrap().to_string();
    let id = v["credential"]["id"].as_str().unwrap().to_string();
    assert!(secret.starts_with("scm_") && secret.len() > 30, "{secret}");
    assert_eq!(v["credential"]["status"], "active");
    assert_eq!(v["credential"]["prefix"], &secret[..12]);
    // never again: not in the list, not in the database
    let list = t.get(&format!("{path}?audience=mcp"), &owner).await;
    list.assert_status(200);
    assert!(!list.text().contains(&secret));
    assert_eq!(list.json()["credentials"].as_array().unwrap().len(), 1);
    assert!(!crate::support::contains_bytes(&t.db_bytes(), secret.as_bytes()), "only a hash is stored");
    let app = t.app.clone();
    let s2 = secret.clone();
    let ok = tokio::task::spawn_blocking(move || steward::converse::verify(&app, &s2, "mcp").unwrap()).await.unwrap();
    assert_eq!(ok.map(|c| c.id), Some(id.clone()));
    let app = t.app.clone();
    let s2 = secret.clone();
    let wrong =
        tokio::task::spawn_blocking(move || steward::converse::verify(&app, &s2, "rest").unwrap()).await.unwrap();
    assert!(wrong.is_none(), "another audience");

    // rotate: a new secret, the old one stops at once
    let r = t.post(&format!("{path}/{id}/rotate"), &owner, json!({})).await;
    r.assert_status(200);
    let new_secret = r.json()["secret"].as_str().unwrap().to_string();
    assert_ne!(new_secret, secret);
    assert_eq!(r.json()["credential"]["version"], 2);
    let verify = |s: String| {
        let app = t.app.clone();
        async move {
            tokio::task::spawn_blocking(move || steward::converse::verify(&app, &s, "mcp").unwrap()).await.unwrap()
        }
    };
    assert!(verify(secret.clone()).await.is_none());
    assert!(verify(new_secret.clone()).await.is_some());
    // revoke: nothing works
    let r = t.post(&format!("{path}/{id}/revoke"), &owner, json!({})).await;
    r.assert_status(200);
    assert_eq!(r.json()["credential"]["status"], "revoked");
    assert!(verify(new_secret).await.is_none());
    t.post(&format!("{path}/{id}/rotate"), &owner, json!({})).await.assert_status(409);

    // validation and access
    for (body, field) in [
        (json!({"audience": "smtp", "label": "x"}), "audience"),
        (json!({"audience": "rest", "label": "  "}), "label"),
        (json!({"audience": "rest", "label": "x", "expiresAt": "2001-01-01T00:00:00Z"}), "expiresAt"),
        (json!({"audience": "rest", "label": "x", "expiresAt": "soon"}), "expiresAt"),
        (json!({"audience": "rest"}), "label"),
    ] {
        let r = t.post(&path, &owner, body.clone()).await;
        r.assert_status(400);
        assert!(r.text().contains(field), "{body} → {}", r.text());
    }
    let token = t.token(&owner).await;
    t.post(&path, &token, json!({"audience": "rest", "label": "x"})).await.assert_status(401);
    let member = t.member(&owner, "m@example.com", "member").await;
    t.post(&path, &member, json!({"audience": "rest", "label": "x"})).await.assert_status(403);
    t.post(
        "/api/v1/agents/0190f2a4-8a3c-7b1e-9c2d-3e4f5a6b7c8d/channel-credentials",
        &owner,
        json!({"audience": "rest", "label": "x"}),
    )
    .await
    .assert_status(404);
    let audit = t.get("/api/v1/audit-events?action=agent.channel_credential.created", &owner).await.text();
    assert!(audit.contains(&id) && !audit.contains(&secret));
}
