//! Public chat through the API: the general settings (the workspace's public channels) and their
//! launch tokens.

use serde_json::{Value, json};

use crate::support::TestApp;

#[tokio::test]
async fn general_settings_have_defaults_tokens_validation_and_rotation() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let g = t.get("/api/v1/settings/general", &owner).await.json();
    assert_eq!(g["anonymousChatEnabled"], false);
    assert_eq!(g["websiteEmbedEnabled"], false);
    assert_eq!(g["websiteEmbedAllowedOrigins"], json!([]));
    assert_eq!(g["websiteEmbedLauncherLabel"], "Chat with us");
    assert_eq!(g["websiteEmbedLauncherPosition"], "bottom-right");
    assert_eq!(g["websiteEmbedTheme"]["brand"], "#0f172a");
    assert_eq!(g["assistantDefaultLocale"], Value::Null);
    let (anon, embed) = (g["anonymousChatToken"].as_str().unwrap(), g["websiteEmbedToken"].as_str().unwrap());
    assert!(anon.starts_with("pc_") && embed.starts_with("we_") && anon.len() > 40);
    assert_eq!(t.get("/api/v1/settings/general", &owner).await.json()["anonymousChatToken"], anon, "minted once");

    // a partial PUT: origins normalized and deduplicated, the rest kept
    let r = t
        .put(
            "/api/v1/settings/general",
            &owner,
            json!({"websiteEmbedEnabled": true, "websiteEmbedAllowedOrigins": ["HTTPS://Shop.Example.com/", "https://shop.example.com:443"],
                   "assistantName": "  Ada ", "assistantDefaultLocale": "pt-BR"}),
        )
        .await;
    r.assert_status(200);
    let g2 = r.json();
    assert_eq!(g2["websiteEmbedAllowedOrigins"], json!(["https://shop.example.com"]));
    assert_eq!(g2["assistantName"], "Ada");
    assert_eq!(g2["websiteEmbedToken"], embed);
    assert_eq!(g2["anonymousChatEnabled"], false);
    let cleared = t.put("/api/v1/settings/general", &owner, json!({"assistantDefaultLocale": null})).await.json();
    assert_eq!(cleared["assistantDefaultLocale"], Value::Null);
    // validation names the field
    for (body, field) in [
        (json!({"websiteEmbedAllowedOrigins": ["https://shop.example.com/checkout"]}), "websiteEmbedAllowedOrigins"),
        (
            json!({"websiteEmbedAllowedOrigins": (0..21).map(|i| format!("https://s{i}.example")).collect::<Vec<_>>()}),
            "websiteEmbedAllowedOrigins",
        ),
        (json!({"assistantDefaultLocale": "english"}), "assistantDefaultLocale"),
        (json!({"websiteEmbedLauncherPosition": "top"}), "websiteEmbedLauncherPosition"),
        (
            json!({"websiteEmbedTheme": {"brand": "red", "brandText": "#ffffff", "surface": "#ffffff", "text": "#000000"}}),
            "websiteEmbedTheme.brand",
        ),
        (json!({"greetingInstruction": "x".repeat(201)}), "greetingInstruction"),
        (json!({"websiteEmbedToken": "we_mine"}), "websiteEmbedToken"),
    ] {
        let r = t.put("/api/v1/settings/general", &owner, body.clone()).await;
        r.assert_status(400);
        assert!(r.text().contains(field), "{body} → {}", r.text());
    }
    t.put("/api/v1/settings/general", &owner, json!({"websiteEmbedEnabled": null})).await.assert_status(400);
    t.put("/api/v1/settings/general", &owner, json!({"bogus": true})).await.assert_status(400);

    // rotation replaces one token only; it needs the dashboard session
    let r = t.post("/api/v1/settings/general/website-embed-token/rotate", &owner, json!({})).await;
    r.assert_status(200);
    let g3 = r.json();
    assert_ne!(g3["websiteEmbedToken"], embed);
    assert_eq!(g3["anonymousChatToken"], anon);
    let token = t.token(&owner).await;
    t.get("/api/v1/settings/general", &token).await.assert_status(200);
    t.post("/api/v1/settings/general/anonymous-chat-token/rotate", &token, json!({})).await.assert_status(401);
    t.put("/api/v1/settings/general", &token, json!({"anonymousChatEnabled": true})).await.assert_status(401);
    // a member reads, an admin-only change is refused
    let member = t.member(&owner, "m@example.com", "member").await;
    t.get("/api/v1/settings/general", &member).await.assert_status(200);
    t.put("/api/v1/settings/general", &member, json!({"anonymousChatEnabled": true})).await.assert_status(403);
    let audit = t.get("/api/v1/audit-events?action=settings.general.token_rotated", &owner).await.json().to_string();
    assert!(audit.contains("website_embed"), "{audit}");
}
