//! The connector framework through the API: both built-in connectors with their schemas, saving
//! with per-key validation, secrets sealed at rest and never returned, generated secrets shown
//! once, enable/disable/sync and their conflicts, who may do what, audit without secret values,
//! and the connectors in the sources list.

use serde_json::{Value, json};

use crate::support::{Auth, TestApp, contains_bytes};

fn sealed_app() -> TestApp {
    TestApp::with_config(|c| {
        c.encryption_key = Some(steward::config::Secret::new([5u8; 32]));
        c.public_url = Some("https://steward.example".into());
    })
}

const TOKEN: &str = "EAAG-very-secret-access-token";

fn whatsapp_config() -> Value {
    json!({"config": {"phone_number_id": "106540352242922", "access_token": TOKEN, "app_secret": "app-secret-value-1",
                      "business_account_id": "102290129340398"}})
}

#[tokio::test]
async fn both_connectors_are_listed_with_their_schema() {
    let t = sealed_app();
    let owner = t.owner().await;
    let v = t.get("/api/v1/connectors", &owner).await.json();
    assert_eq!(v["encryptionConfigured"], true);
    let ids: Vec<&str> = v["connectors"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["wordpress", "whatsapp"]);
    let wp = &v["connectors"][0];
    assert_eq!(
        (wp["enabled"].as_bool(), wp["configured"].as_bool(), wp["syncSupported"].as_bool()),
        (Some(false), Some(false), Some(true))
    );
    let types: Vec<(&str, &str)> = wp["configSchema"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["key"].as_str().unwrap(), f["type"].as_str().unwrap()))
        .collect();
    assert_eq!(
        types,
        [
            ("site_url", "text"),
            ("webhook_shared_secret", "generated_secret"),
            ("wp_username", "text"),
            ("wp_application_password", "secret"),
            ("post_types", "text"),
            ("poll_interval_sec", "text")
        ]
    );
    assert_eq!(wp["configSchema"][4]["default"], "page,post");
    let wa = &v["connectors"][1];
    assert_eq!(wa["syncSupported"], false);
    let d = t.get("/api/v1/connectors/whatsapp", &owner).await.json();
    let ws = t.get_ws();
    assert_eq!(d["connector"]["webhookUrl"], format!("https://steward.example/api/connectors/whatsapp/{ws}/webhook"));
    assert_eq!(d["connector"]["config"]["conversation_timeout_hours"], "24");
    assert_eq!(d["connector"]["syncState"]["status"], "idle");
    t.get("/api/v1/connectors/slack", &owner).await.assert_status(404);
}

#[tokio::test]
async fn a_save_is_validated_per_key_and_secrets_are_sealed_never_shown() {
    let t = sealed_app();
    let owner = t.owner().await;
    let field =
        |r: &crate::support::Resp| r.json()["error"]["details"]["field"].as_str().unwrap_or_default().to_string();
    let r = t.put("/api/v1/connectors/whatsapp", &owner, json!({"config": {"phone_number_id": "+1 555"}})).await;
    r.assert_status(400);
    assert_eq!(field(&r), "config.phone_number_id");
    let r = t.put("/api/v1/connectors/whatsapp", &owner, json!({"config": {"colour": "blue"}})).await;
    assert_eq!((r.status.as_u16(), field(&r)), (400, "config.colour".to_string()));
    let r = t.put("/api/v1/connectors/whatsapp", &owner, json!({"config": {"conversation_timeout_hours": 0}})).await;
    assert_eq!((r.status.as_u16(), field(&r)), (400, "config.conversation_timeout_hours".to_string()));
    let r = t.put("/api/v1/connectors/whatsapp", &owner, json!({"config": {"agent_id": "nope"}})).await;
    assert_eq!((r.status.as_u16(), field(&r)), (400, "config.agent_id".to_string()));
    let r = t.put("/api/v1/connectors/wordpress", &owner, json!({"config": {"site_url": "ftp://blog.example"}})).await;
    assert_eq!((r.status.as_u16(), field(&r)), (400, "config.site_url".to_string()));
    let r = t.put("/api/v1/connectors/wordpress", &owner, json!({"config": {"site_url": "https://10.0.0.5"}})).await;
    assert_eq!(
        (r.status.as_u16(), field(&r)),
        (400, "config.site_url".to_string()),
        "the outbound guard refuses private sites"
    );
    let r = t
        .put(
            "/api/v1/connectors/wordpress",
            &owner,
            json!({"config": {"site_url": "https://blog.example", "wp_username": "admin"}}),
        )
        .await;
    assert_eq!((r.status.as_u16(), field(&r)), (400, "config.wp_application_password".to_string()));
    let r = t
        .put(
            "/api/v1/connectors/wordpress",
            &owner,
            json!({"config": {"site_url": "https://blog.example", "poll_interval_sec": "300"}}),
        )
        .await;
    assert_eq!((r.status.as_u16(), field(&r)), (400, "config.wp_username".to_string()));

    // a valid save: the generated verify token is shown this once
    let r = t.put("/api/v1/connectors/whatsapp", &owner, whatsapp_config()).await;
    r.assert_status(200);
    let v = r.json();
    let token = v["generatedSecrets"]["webhook_verify_token"].as_str().unwrap().to_string();
    assert!(token.len() >= 32);
    let c = &v["connector"];
    assert_eq!(c["configured"], true);
    assert_eq!(c["secretsSet"], json!(["access_token", "app_secret", "webhook_verify_token"]));
    assert!(c["config"].get("access_token").is_none());
    let text = r.text();
    assert!(!text.contains(TOKEN) && !text.contains("app-secret-value-1"), "{text}");
    // a later save keeps it and shows nothing; a rotation shows the new one
    let again = t
        .put(
            "/api/v1/connectors/whatsapp",
            &owner,
            json!({"config": {"unsupported_message_reply": "Text only, please."}}),
        )
        .await;
    again.assert_status(200);
    assert_eq!(again.json()["generatedSecrets"], json!({}));
    let got = t.get("/api/v1/connectors/whatsapp", &owner).await;
    assert!(!got.text().contains(&token) && !got.text().contains(TOKEN));
    assert_eq!(got.json()["connector"]["config"]["unsupported_message_reply"], "Text only, please.");
    let rotated =
        t.put("/api/v1/connectors/whatsapp", &owner, json!({"rotate": ["webhook_verify_token"]})).await.json();
    let new_token = rotated["generatedSecrets"]["webhook_verify_token"].as_str().unwrap();
    assert_ne!(new_token, token);
    let r = t.put("/api/v1/connectors/whatsapp", &owner, json!({"rotate": ["access_token"]})).await;
    assert_eq!((r.status.as_u16(), field(&r)), (400, "rotate".to_string()));
    // sealed at rest
    let db = t.db_bytes();
    assert!(!contains_bytes(&db, TOKEN.as_bytes()) && !contains_bytes(&db, new_token.as_bytes()));
    // the audit log names the keys that changed, never a value
    let audit = t.get("/api/v1/audit-events?action=connector.updated", &owner).await;
    audit.assert_status(200);
    let events = audit.json();
    let first = events["events"].as_array().unwrap().last().unwrap().clone();
    assert!(first["metadata"]["secretsChanged"].as_array().unwrap().contains(&json!("access_token")), "{first}");
    assert!(!audit.text().contains(TOKEN) && !audit.text().contains(&token));
}

#[tokio::test]
async fn without_the_encryption_key_secrets_cannot_be_saved() {
    let t = TestApp::new();
    let owner = t.owner().await;
    assert_eq!(t.get("/api/v1/connectors", &owner).await.json()["encryptionConfigured"], false);
    let r = t.put("/api/v1/connectors/whatsapp", &owner, whatsapp_config()).await;
    r.assert_status(503);
    assert_eq!(r.code(), "encryption_not_configured");
}

#[tokio::test]
async fn enable_disable_and_sync_follow_the_rules() {
    let t = sealed_app();
    let owner = t.owner().await;
    // incomplete: the first missing key is named
    let r = t.post("/api/v1/connectors/whatsapp/enable", &owner, json!({})).await;
    r.assert_status(400);
    assert_eq!(r.json()["error"]["details"]["field"], "config.phone_number_id");
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("incomplete connector config"));
    t.put("/api/v1/connectors/whatsapp", &owner, whatsapp_config()).await.assert_status(200);
    let v = t.post("/api/v1/connectors/whatsapp/enable", &owner, json!({})).await.json();
    assert_eq!(v["connector"]["enabled"], true);
    // WhatsApp has no manual sync; a disabled WordPress cannot sync
    let r = t.post("/api/v1/connectors/whatsapp/sync", &owner, json!({})).await;
    r.assert_status(409);
    assert_eq!(r.json()["error"]["details"]["code"], "sync_unsupported");
    let r = t.post("/api/v1/connectors/wordpress/sync", &owner, json!({})).await;
    r.assert_status(409);
    assert_eq!(r.json()["error"]["details"]["code"], "connector_disabled");
    let v = t.post("/api/v1/connectors/whatsapp/disable", &owner, json!({})).await.json();
    assert_eq!(v["connector"]["enabled"], false);
    let audit = t.get("/api/v1/audit-events", &owner).await.json();
    let actions: Vec<&str> =
        audit["events"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert!(actions.contains(&"connector.enabled") && actions.contains(&"connector.disabled"), "{actions:?}");
    // another workspace cannot take the same phone number
    let other = t.workspace(&owner, "Second").await;
    let r = t
        .send(
            axum::http::Method::PUT,
            "/api/v1/connectors/whatsapp",
            &owner,
            Some(whatsapp_config()),
            &[("x-workspace-id", &other)],
        )
        .await;
    r.assert_status(409);
    assert_eq!(r.json()["error"]["details"]["code"], "connector_channel_taken");
}

#[tokio::test]
async fn changes_take_the_dashboard_session_and_the_settings_permission() {
    let t = sealed_app();
    let owner = t.owner().await;
    let token = t.token(&owner).await;
    // reads accept a token; changes do not
    t.get("/api/v1/connectors", &token).await.assert_status(200);
    let r = t.put("/api/v1/connectors/whatsapp", &token, whatsapp_config()).await;
    r.assert_status(401);
    t.post("/api/v1/connectors/whatsapp/enable", &token, json!({})).await.assert_status(401);
    // a member may read settings, not change them
    let member = t.member(&owner, "member@example.com", "member").await;
    t.get("/api/v1/connectors/wordpress", &member).await.assert_status(200);
    t.put("/api/v1/connectors/wordpress", &member, json!({"config": {"site_url": "https://blog.example"}}))
        .await
        .assert_status(403);
    t.get("/api/v1/connectors", &Auth::None).await.assert_status(401);
}

#[tokio::test]
async fn the_sources_list_shows_both_connectors() {
    let t = sealed_app();
    let owner = t.owner().await;
    t.put("/api/v1/connectors/whatsapp", &owner, whatsapp_config()).await.assert_status(200);
    t.post("/api/v1/connectors/whatsapp/enable", &owner, json!({})).await.assert_status(200);
    let v = t.get("/api/v1/document/sources", &owner).await.json();
    let conns = v["connectors"].as_array().unwrap();
    assert_eq!(conns.len(), 2);
    assert_eq!(conns[0]["id"], "wordpress");
    assert_eq!((conns[1]["id"].as_str(), conns[1]["enabled"].as_bool()), (Some("whatsapp"), Some(true)));
    assert_eq!(conns[1]["messageCount"], 0);
}
