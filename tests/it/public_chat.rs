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

#[tokio::test]
async fn sessions_open_on_enabled_channels_resume_and_stop_when_the_settings_change() {
    use axum::http::Method;
    use steward::public_chat::session::authenticate;
    let t = TestApp::new();
    let owner = t.owner().await;
    let g = t.get("/api/v1/settings/general", &owner).await.json();
    let anon = g["anonymousChatToken"].as_str().unwrap().to_string();
    let embed = g["websiteEmbedToken"].as_str().unwrap().to_string();
    let open = |token: &str, body: Value, origin: Option<&'static str>| {
        let path = format!("/api/v1/public/chat/{token}/sessions");
        let t = &t;
        async move {
            let headers: Vec<(&str, &str)> = origin.map(|o| vec![("origin", o)]).unwrap_or_default();
            t.send(Method::POST, &path, &crate::support::Auth::None, Some(body), &headers).await
        }
    };
    // a channel that is off does not exist
    let r = open(&anon, json!({"channel": "anonymous_link"}), None).await;
    r.assert_status(404);
    assert_eq!(r.json()["error"]["message"], "Public chat not found");
    open("pc_nope", json!({"channel": "anonymous_link"}), None).await.assert_status(404);

    t.put(
        "/api/v1/settings/general",
        &owner,
        json!({"anonymousChatEnabled": true, "websiteEmbedEnabled": true, "websiteEmbedAllowedOrigins": ["https://shop.example"]}),
    )
    .await
    .assert_status(200);
    let r = open(&anon, json!({"channel": "anonymous_link"}), None).await;
    r.assert_status(201);
    let cookie = r.headers.get("set-cookie").unwrap().to_str().unwrap().to_string();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"), "{cookie}");
    let s = r.json();
    for k in [
        "publicChatToken",
        "publicSessionId",
        "publicSessionToken",
        "resumeToken",
        "workspaceName",
        "assistantBootstrapActive",
        "expiresAt",
        "resumeExpiresAt",
    ] {
        assert!(s.get(k).is_some(), "{k}: {s}");
    }
    assert_eq!(s["assistantBootstrapActive"], false);
    // the resume token resumes the same visitor; it does not work for another channel
    let resumed = open(&anon, json!({"channel": "anonymous_link", "resumeToken": s["resumeToken"]}), None).await.json();
    assert_eq!(resumed["publicSessionId"], s["publicSessionId"]);
    open(&embed, json!({"channel": "website_embed", "resumeToken": s["resumeToken"]}), Some("https://shop.example"))
        .await
        .assert_status(400);
    open(&anon, json!({"channel": "anonymous_link", "resumeToken": s["publicSessionToken"]}), None)
        .await
        .assert_status(400);
    open(&anon, json!({"channel": "website_embed"}), None).await.assert_status(404);
    open(&anon, json!({"channel": "carrier_pigeon"}), None).await.assert_status(400);
    open(&anon, json!({"channel": "anonymous_link", "extra": 1}), None).await.assert_status(400);

    // the embed: only from an admitted origin, and CORS says so
    open(&embed, json!({"channel": "website_embed"}), None).await.assert_status(400);
    let r = open(&embed, json!({"channel": "website_embed"}), Some("https://evil.example")).await;
    r.assert_status(403);
    let r = open(&embed, json!({"channel": "website_embed"}), Some("https://shop.example")).await;
    r.assert_status(201);
    assert_eq!(r.headers["access-control-allow-origin"], "https://shop.example");
    let es = r.json();
    let pre = t
        .send(
            Method::OPTIONS,
            &format!("/api/v1/public/chat/{embed}/sessions"),
            &crate::support::Auth::None,
            None,
            &[("origin", "https://shop.example")],
        )
        .await;
    pre.assert_status(204);
    assert!(pre.headers["access-control-allow-headers"].to_str().unwrap().contains("x-service-public-session"));

    // every later request re-checks the session against the settings
    let app = t.app.clone();
    let st = |v: &Value| v["publicSessionToken"].as_str().unwrap().to_string();
    let (anon_st, embed_st) = (st(&s), st(&es));
    let check = |token: String, session: String, origin: Option<&'static str>| {
        let app = app.clone();
        async move { tokio::task::spawn_blocking(move || authenticate(&app, &token, Some(&session), origin)).await.unwrap() }
    };
    assert!(check(embed.clone(), embed_st.clone(), Some("https://shop.example")).await.is_ok());
    assert!(check(embed.clone(), embed_st.clone(), Some("https://evil.example")).await.is_err(), "another origin");
    assert!(check(anon.clone(), embed_st.clone(), None).await.is_err(), "another launch token");
    assert!(check(anon.clone(), anon_st.clone(), None).await.is_ok());
    // removing the origin stops the live embed session; rotating stops the old link's sessions
    t.put("/api/v1/settings/general", &owner, json!({"websiteEmbedAllowedOrigins": []})).await.assert_status(200);
    assert!(check(embed.clone(), embed_st, Some("https://shop.example")).await.is_err());
    let rotated = t.post("/api/v1/settings/general/anonymous-chat-token/rotate", &owner, json!({})).await.json();
    let new_anon = rotated["anonymousChatToken"].as_str().unwrap().to_string();
    assert!(check(anon.clone(), anon_st.clone(), None).await.is_err(), "the old token is gone");
    assert!(check(new_anon.clone(), anon_st, None).await.is_err(), "sessions were bound to the old token");
    open(&anon, json!({"channel": "anonymous_link"}), None).await.assert_status(404);
    open(&new_anon, json!({"channel": "anonymous_link"}), None).await.assert_status(201);
    let g = t.get("/api/v1/settings/general", &owner).await.json();
    assert!(g["anonymousChatLastUsedAt"].is_string() && g["websiteEmbedLastUsedAt"].is_string());
}
