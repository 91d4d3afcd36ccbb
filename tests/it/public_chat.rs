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

    // the merged resource: the general fields at the top, the other namespaces beside them
    let m = t.get("/api/v1/settings", &owner).await.json();
    assert_eq!(m["websiteEmbedToken"], g3["websiteEmbedToken"]);
    assert!(m["llmModels"].is_object() && m["ingestion"].is_object(), "{m}");
    let r = t.put("/api/v1/settings", &owner, json!({"assistantName": "Bea", "proactiveGreetingEnabled": true})).await;
    r.assert_status(200);
    assert_eq!(r.json()["assistantName"], "Bea");
    assert!(r.json()["ingestion"].is_object());
    assert_eq!(t.get("/api/v1/settings/general", &owner).await.json()["proactiveGreetingEnabled"], true);
    t.put("/api/v1/settings", &owner, json!({"ingestion": {}})).await.assert_status(400);
    t.put("/api/v1/settings", &token, json!({"assistantName": "x"})).await.assert_status(401);
    t.get("/api/v1/settings", &token).await.assert_status(200);
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
    assert_eq!(r.headers["access-control-allow-origin"], "https://evil.example", "a refusal is readable");
    let r = open(&embed, json!({"channel": "website_embed", "nope": 1}), Some("https://evil.example")).await;
    r.assert_status(400);
    assert_eq!(r.headers["access-control-allow-origin"], "https://evil.example", "so is a malformed body");
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

// ---- messages, history, events, feedback, embed config ----

use axum::http::Method;

use crate::chat::{corpus, held_model, sse_events, wait, with_model};
use crate::support::Auth;

/// A visitor on a public channel: the launch token and the session.
pub(crate) struct Visitor {
    pub token: String,
    pub session: String,
    pub resume: String,
    pub origin: Option<&'static str>,
}

impl Visitor {
    pub async fn open(t: &TestApp, token: &str, channel: &str, origin: Option<&'static str>) -> Visitor {
        let headers: Vec<(&str, &str)> = origin.map(|o| vec![("origin", o)]).unwrap_or_default();
        let r = t
            .send(
                Method::POST,
                &format!("/api/v1/public/chat/{token}/sessions"),
                &Auth::None,
                Some(json!({"channel": channel})),
                &headers,
            )
            .await;
        r.assert_status(201);
        let v = r.json();
        Visitor {
            token: token.to_string(),
            session: v["publicSessionToken"].as_str().unwrap().to_string(),
            resume: v["resumeToken"].as_str().unwrap().to_string(),
            origin,
        }
    }

    pub async fn call(&self, t: &TestApp, method: Method, path: &str, body: Option<Value>) -> crate::support::Resp {
        let mut headers: Vec<(&str, &str)> = vec![("x-service-public-session", &self.session)];
        if let Some(o) = self.origin {
            headers.push(("origin", o));
        }
        let path = if path.starts_with("/api/") {
            path.to_string()
        } else {
            format!("/api/v1/public/chat/{}{path}", self.token)
        };
        t.send(method, &path, &Auth::None, body, &headers).await
    }

    pub async fn say(&self, t: &TestApp, body: Value) -> crate::support::Resp {
        self.call(t, Method::POST, "", Some(body)).await
    }
}

pub(crate) async fn public_app(t: &TestApp) -> (Auth, String, String) {
    let owner = t.owner().await;
    let g = t
        .put(
            "/api/v1/settings/general",
            &owner,
            json!({"anonymousChatEnabled": true, "websiteEmbedEnabled": true,
                   "websiteEmbedAllowedOrigins": ["https://shop.example"]}),
        )
        .await
        .json();
    let anon = g["anonymousChatToken"].as_str().unwrap().to_string();
    let embed = g["websiteEmbedToken"].as_str().unwrap().to_string();
    (owner, anon, embed)
}

#[tokio::test]
async fn visitors_chat_read_back_only_their_own_conversations_and_rate_answers() {
    let t = TestApp::new();
    let (owner, anon, embed) = public_app(&t).await;
    corpus(&t, &owner).await;
    let v = Visitor::open(&t, &anon, "anonymous_link", None).await;

    // no session header, or someone else's token: nothing exists
    let r = t
        .send(Method::POST, &format!("/api/v1/public/chat/{anon}"), &Auth::None, Some(json!({"message": "hi"})), &[])
        .await;
    r.assert_status(404);
    assert_eq!(r.json()["error"]["message"], "Not found");

    let r = v.say(&t, json!({"message": "How long does standard shipping take?"})).await;
    r.assert_status(200);
    let a = r.json();
    let cid = a["conversationId"].as_str().unwrap().to_string();
    assert!(a["answer"].as_str().unwrap().contains("two to four"), "{a}");
    assert_eq!(a["citations"][0]["title"], "Shipping");
    assert_eq!(a["ownership"], json!({"state": "ai_owned", "suppressed": false}));
    assert!(a.get("diagnostics").is_none() && a.get("debug").is_none(), "no internals on the public shape: {a}");
    assert!(a["suggestions"].as_array().unwrap().len() <= 3);

    // streaming: conversation, status stages, chunks, then done with the same shape
    let r = v
        .say(&t, json!({"message": "How should wool sweaters be washed?", "conversationId": cid, "stream": true}))
        .await;
    r.assert_status(200);
    assert_eq!(r.headers["content-type"], "text/event-stream");
    let events = sse_events(&r.text());
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"conversation"), "{names:?}");
    assert!(names.contains(&"status") && names.contains(&"chunk"), "{names:?}");
    assert_eq!(names.last(), Some(&"done"));
    let stages: Vec<&str> =
        events.iter().filter(|(n, _)| n == "status").filter_map(|(_, d)| d["stage"].as_str()).collect();
    assert!(stages.contains(&"searching") && stages.contains(&"composing"), "{stages:?}");
    let done = &events.last().unwrap().1;
    let chunks: String =
        events.iter().filter(|(n, _)| n == "chunk").map(|(_, d)| d["text"].as_str().unwrap()).collect();
    assert_eq!(chunks, done["answer"].as_str().unwrap());
    assert!(done.get("diagnostics").is_none());

    // the session's conversations, history and tail
    let list = v.call(&t, Method::GET, "", None).await.json();
    assert_eq!(list["conversations"][0]["id"], cid.as_str());
    assert_eq!(list["conversations"][0]["messageCount"], 4);
    let h = v.call(&t, Method::GET, &format!("/history/{cid}"), None).await.json();
    let msgs = h["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 4);
    assert_eq!((msgs[0]["source"].as_str(), msgs[1]["source"].as_str()), (Some("visitor"), Some("agent")));
    assert!(msgs[1].get("traceId").is_none());
    assert_eq!(h["ownership"], json!({"state": "ai_owned"}));
    assert_eq!(h["tailCursor"], "4");
    let tail = v.call(&t, Method::GET, &format!("/tail/{cid}?cursor=2"), None).await.json();
    assert_eq!(tail["messages"].as_array().unwrap().len(), 2);
    assert_eq!(tail["cursor"], "4");
    assert!(tail.get("ownership").is_none());
    v.call(&t, Method::GET, &format!("/tail/{cid}?cursor=x"), None).await.assert_status(400);

    // an operator's reply reaches the visitor's tail with a display name and no account id
    t.post(&format!("/api/v1/conversations/{cid}/takeover"), &owner, json!({})).await.assert_status(200);
    let conv = t.get(&format!("/api/v1/history/chat/{cid}"), &owner).await.json();
    let version = conv["ownership"]["version"].as_i64().unwrap();
    t.post(
        &format!("/api/v1/conversations/{cid}/reply"),
        &owner,
        json!({"message": "Hello, a person here.", "expectedVersion": version}),
    )
    .await
    .assert_status(201);
    let tail = v.call(&t, Method::GET, &format!("/tail/{cid}?cursor=4"), None).await.json();
    let m = &tail["messages"][0];
    assert_eq!((m["source"].as_str(), m["text"].as_str()), (Some("human_agent"), Some("Hello, a person here.")));
    assert!(m["operatorDisplayName"].is_string());
    assert!(!m["operatorDisplayName"].as_str().unwrap().contains('@'), "never an operator's email: {m}");
    assert!(!tail.to_string().contains("ownerAccountId"));
    let h = v.call(&t, Method::GET, &format!("/history/{cid}"), None).await.json();
    assert_eq!(h["ownership"], json!({"state": "human_owned"}));
    // the person replied: the visitor's next message gets no AI reply
    let r = v.say(&t, json!({"message": "Thanks!", "conversationId": cid})).await.json();
    assert_eq!(r["ownership"], json!({"state": "human_owned", "suppressed": true}));

    // another visitor sees none of it
    let other = Visitor::open(&t, &anon, "anonymous_link", None).await;
    other.call(&t, Method::GET, &format!("/history/{cid}"), None).await.assert_status(404);
    other.call(&t, Method::GET, &format!("/tail/{cid}"), None).await.assert_status(404);
    other.say(&t, json!({"message": "hi", "conversationId": cid})).await.assert_status(404);
    assert_eq!(other.call(&t, Method::GET, "", None).await.json()["conversations"], json!([]));
    let answer_id = msgs[1]["id"].as_str().unwrap().to_string();
    let fb = format!("/api/v1/answer-feedback/public/chat/{anon}/messages/{answer_id}");
    other.call(&t, Method::PUT, &fb, Some(json!({"rating": "down"}))).await.assert_status(404);
    // the embed token does not open the link's conversations either
    let e = Visitor::open(&t, &embed, "website_embed", Some("https://shop.example")).await;
    let r = t
        .send(
            Method::GET,
            &format!("/api/v1/public/chat/{anon}/history/{cid}"),
            &Auth::None,
            None,
            &[("x-service-public-session", &e.session)],
        )
        .await;
    r.assert_status(404);

    // feedback: thumbs down with a comment lands in the inbox
    let r = v.call(&t, Method::PUT, &fb, Some(json!({"rating": "down", "comment": "Too vague"}))).await;
    r.assert_status(200);
    assert_eq!(r.json()["feedback"]["rating"], "down");
    let inbox = t.get("/api/v1/inbox", &owner).await.json().to_string();
    assert!(inbox.contains("Too vague"), "{inbox}");
    let long = "x".repeat(2001);
    v.call(&t, Method::PUT, &fb, Some(json!({"rating": "down", "comment": long}))).await.assert_status(400);
    v.call(&t, Method::PUT, &fb, Some(json!({"rating": "meh"}))).await.assert_status(400);
    let user_msg = msgs[0]["id"].as_str().unwrap();
    let fb_user = format!("/api/v1/answer-feedback/public/chat/{anon}/messages/{user_msg}");
    v.call(&t, Method::PUT, &fb_user, Some(json!({"rating": "up"}))).await.assert_status(400);
    v.call(&t, Method::DELETE, &fb, None).await.assert_status(204);
    v.call(&t, Method::DELETE, &fb, None).await.assert_status(404);

    // operators see the channel in history
    let hist = t.get("/api/v1/history/chat", &owner).await.json();
    assert_eq!(hist["conversations"][0]["channel"], "anonymous_link");
    let _ = v.resume;
}

#[tokio::test]
async fn every_rule_of_the_message_body_is_checked() {
    let t = TestApp::new();
    let (_owner, anon, _) = public_app(&t).await;
    let v = Visitor::open(&t, &anon, "anonymous_link", None).await;
    let id = "0190f2a4-8a3c-7b1e-9c2d-3e4f5a6b7c8d";
    for (body, field) in [
        (json!({}), "message"),
        (json!({"message": "   "}), "message"),
        (json!({"message": "x".repeat(20_001)}), "message"),
        (json!({"startConversation": true, "conversationId": id}), "startConversation"),
        (json!({"startConversation": true, "bootstrapGreetingId": id}), "startConversation"),
        (json!({"message": "hi", "conversationId": id, "bootstrapGreetingId": id}), "bootstrapGreetingId"),
        (json!({"message": "hi", "conversationId": "not-an-id"}), "conversationId"),
        (json!({"message": "hi", "bootstrapGreetingId": id}), "bootstrapGreetingId"),
        (json!({"message": "hi", "userExpectedLocale": "x".repeat(36)}), "userExpectedLocale"),
        (json!({"message": "hi", "inputMetadata": {"method": "shout"}}), "inputMetadata.method"),
        (json!({"message": "hi", "inputMetadata": {"method": "suggestion_click"}}), "suggestionSourceMessageId"),
        (
            json!({"message": "hi", "inputMetadata": {"method": "intent_click", "suggestionSourceMessageId": "m"}}),
            "intent",
        ),
        (
            json!({"message": "hi", "inputMetadata": {"method": "intent_click", "suggestionSourceMessageId": "m", "intent": {"skillName": ""}}}),
            "skillName",
        ),
        (json!({"message": "hi", "pageContext": {"pageUrl": "x".repeat(2049)}}), "pageUrl"),
        (json!({"message": "hi", "pageContext": {"pageTitle": "x".repeat(181)}}), "pageTitle"),
        (json!({"message": "hi", "pageContext": {"content": "x".repeat(6001)}}), "content"),
        (json!({"message": "hi", "signedIdentity": "x".repeat(8193)}), "signedIdentity"),
        (json!({"message": "hi", "stream": "yes"}), "stream"),
        (json!({"message": "hi", "surprise": 1}), "surprise"),
    ] {
        let r = v.say(&t, body.clone()).await;
        assert_eq!(r.status.as_u16(), 400, "{body} → {}", r.text());
        assert!(r.text().contains(field), "{body} → {}", r.text());
    }
    // the valid forms
    v.say(&t, json!({"message": "hi", "inputMetadata": {"method": "typed"}})).await.assert_status(200);
    v.say(
        &t,
        json!({"message": "hi", "inputMetadata": {"method": "suggestion_click", "suggestionSourceMessageId": "m1"},
               "pageContext": {"pageUrl": "https://shop.example/p", "referrer": "android-app://x", "content": "page text"},
               "clientContextCapabilities": {"x": 1}, "userExpectedLocale": "en-GB"}),
    )
    .await
    .assert_status(200);
}

#[tokio::test]
async fn greetings_wait_unsaved_until_the_first_message_and_exact_words_are_verbatim() {
    let t = TestApp::new();
    let (owner, anon, _) = public_app(&t).await;
    // without a name or authored greeting the widget does not greet on open, but can ask
    let v = Visitor::open(&t, &anon, "anonymous_link", None).await;
    let g = v.say(&t, json!({"startConversation": true})).await.json();
    assert!(g["answer"].as_str().unwrap().starts_with("Hi!"), "{g}");
    assert_eq!(g["suggestions"], json!([]));

    // Exact words per language, with chips, published on the default agent
    let agent = t.default_agent(&owner).await;
    let exact = json!({"variants": {
        "en": {"text": "Welcome to   the shop!\nAsk me anything.", "chips": ["Track my order", "Returns"]},
        "pt": {"text": "Bem-vindo à loja!", "chips": ["Rastrear pedido", "Devoluções"]},
    }});
    for (bad, field) in [
        (json!({"variants": {}}), "greetingExactWords"),
        (json!({"variants": {"en": {"text": "   "}}}), "text"),
        (json!({"variants": {"en": {"text": "x".repeat(8001)}}}), "text"),
        (json!({"variants": {"en": {"text": "hi", "chips": ["a", "b", "c", "d", "e", "f"]}}}), "chips"),
        (json!({"variants": {"en": {"text": "hi", "chips": ["x".repeat(81)]}}}), "chips"),
        (json!({"variants": {"en": {"text": "hi", "chips": ["a"]}, "pt": {"text": "oi"}}}), "chips"),
        (json!({"variants": {"english": {"text": "hi"}}}), "english"),
    ] {
        let r = t.put(&format!("/api/v1/agents/{agent}"), &owner, json!({"greetingExactWords": bad})).await;
        assert_eq!(r.status.as_u16(), 400, "{}", r.text());
        assert!(r.text().contains(field), "{}", r.text());
    }
    let r = t
        .put(
            &format!("/api/v1/agents/{agent}"),
            &owner,
            json!({"greetingExactWords": exact, "assistantDefaultLocale": "fr"}),
        )
        .await;
    r.assert_status(400);
    assert!(r.text().contains("default locale"), "{}", r.text());
    t.put(
        &format!("/api/v1/agents/{agent}"),
        &owner,
        json!({"greetingExactWords": exact, "proactiveGreetingEnabled": true}),
    )
    .await
    .assert_status(200);
    t.publish(&owner, &agent).await;

    let v = Visitor::open(&t, &anon, "anonymous_link", None).await;
    let s = t
        .send(
            Method::POST,
            &format!("/api/v1/public/chat/{anon}/sessions"),
            &Auth::None,
            Some(json!({"channel": "anonymous_link", "resumeToken": v.resume})),
            &[],
        )
        .await
        .json();
    assert_eq!(s["assistantBootstrapActive"], true);
    let g = v.say(&t, json!({"startConversation": true, "pageContext": {"browserLocale": "pt-BR"}})).await.json();
    assert_eq!(g["answer"], "Bem-vindo à loja!");
    let g = v.say(&t, json!({"startConversation": true, "userExpectedLocale": "de"})).await.json();
    assert_eq!(g["answer"], "Welcome to   the shop!\nAsk me anything.", "verbatim, default language");
    let chips = g["suggestions"].as_array().unwrap();
    assert_eq!(chips.len(), 2);
    assert_eq!(chips[0]["text"], "Track my order");
    assert_eq!(chips[0]["kind"], "authored");
    assert_eq!(chips[0]["action"], json!({"kind": "ask_followup"}));
    assert!(chips[0]["id"].is_string());
    // nothing saved yet
    assert_eq!(v.call(&t, Method::GET, "", None).await.json()["conversations"], json!([]));

    // the first message carries the greeting id: the greeting is saved before it
    let gid = g["bootstrapGreetingId"].as_str().unwrap();
    let r = v
        .say(
            &t,
            json!({"message": "Track my order", "bootstrapGreetingId": gid,
                   "inputMetadata": {"method": "suggestion_click", "suggestionSourceMessageId": chips[0]["id"]}}),
        )
        .await;
    r.assert_status(200);
    let cid = r.json()["conversationId"].as_str().unwrap().to_string();
    let h = v.call(&t, Method::GET, &format!("/history/{cid}"), None).await.json();
    let msgs = h["messages"].as_array().unwrap();
    assert_eq!(msgs[0]["text"], "Welcome to   the shop!\nAsk me anything.");
    assert_eq!(msgs[0]["source"], "agent");
    assert_eq!(msgs[0]["suggestions"].as_array().unwrap().len(), 2);
    assert_eq!(msgs[1]["text"], "Track my order");
    // a greeting is used once, and only by its own session
    v.say(&t, json!({"message": "again", "bootstrapGreetingId": gid})).await.assert_status(400);
    let g2 = v.say(&t, json!({"startConversation": true})).await.json();
    let other = Visitor::open(&t, &anon, "anonymous_link", None).await;
    let r = other.say(&t, json!({"message": "hi", "bootstrapGreetingId": g2["bootstrapGreetingId"]})).await;
    r.assert_status(400);
}

#[tokio::test]
async fn embed_config_and_logo_follow_the_channel_and_origins() {
    let t = TestApp::new();
    let (owner, anon, embed) = public_app(&t).await;
    let get = |token: String, path: &'static str, origin: Option<&'static str>| {
        let t = &t;
        async move {
            let headers: Vec<(&str, &str)> = origin.map(|o| vec![("origin", o)]).unwrap_or_default();
            t.send(Method::GET, &format!("/api/v1/public/chat/{token}/{path}"), &Auth::None, None, &headers).await
        }
    };
    t.put(
        "/api/v1/settings/general",
        &owner,
        json!({"websiteEmbedLauncherLabel": "Ask us", "websiteEmbedCopy": {"en": {"title": "Help"}},
               "websiteEmbedExpertOverrides": {"hidePoweredBy": true}, "assistantName": "Ada"}),
    )
    .await
    .assert_status(200);
    let r = get(embed.clone(), "embed-config", Some("https://shop.example")).await;
    r.assert_status(200);
    assert_eq!(r.headers["vary"], "Origin");
    assert_eq!(r.headers["cache-control"], "public, max-age=300");
    assert_eq!(r.headers["access-control-allow-origin"], "https://shop.example");
    let c = r.json();
    assert_eq!(c["launcherLabel"], "Ask us");
    assert_eq!(c["launcherPosition"], "bottom-right");
    assert_eq!(
        c["theme"],
        json!({"brand": "#0f172a", "brandText": "#f8fafc", "surface": "#ffffff", "text": "#0f172a"})
    );
    assert_eq!(c["copy"]["en"]["title"], "Help");
    assert_eq!(c["branding"]["hidePoweredBy"], true);
    assert_eq!(c["assistantName"], "Ada");
    assert_eq!(c["assistantLogoUrl"], Value::Null);
    let r = get(embed.clone(), "embed-config", Some("https://evil.example")).await;
    r.assert_status(400);
    assert!(r.text().contains("not approved"));
    get(anon.clone(), "embed-config", None).await.assert_status(200);
    get("we_nope".into(), "embed-config", None).await.assert_status(404);

    // the logo: CORS only for admitted origins
    get(embed.clone(), "assistant-logo", Some("https://shop.example")).await.assert_status(404);
    let agent = t.default_agent(&owner).await;
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89".to_vec();
    t.send_bytes(Method::POST, &format!("/api/v1/agents/{agent}/assistant-logo"), &owner, png.clone(), "image/png")
        .await
        .assert_status(201);
    let c = get(embed.clone(), "embed-config", None).await.json();
    assert_eq!(c["assistantLogoUrl"], format!("/api/v1/public/chat/{embed}/assistant-logo"));
    let r = get(embed.clone(), "assistant-logo", Some("https://shop.example")).await;
    r.assert_status(200);
    assert_eq!(r.body, png);
    assert_eq!(r.headers["access-control-allow-origin"], "https://shop.example");
    assert_eq!(r.headers["cache-control"], "public, max-age=300");
    get(embed.clone(), "assistant-logo", Some("https://evil.example")).await.assert_status(400);

    // switched off: gone
    t.put("/api/v1/settings/general", &owner, json!({"websiteEmbedEnabled": false})).await.assert_status(200);
    get(embed, "embed-config", Some("https://shop.example")).await.assert_status(404);
}

#[tokio::test]
async fn the_public_rate_limit_answers_429_with_retry_after() {
    let t = TestApp::with_config(|c| c.public_chat_limit_per_session.max = 2);
    let (_owner, anon, _) = public_app(&t).await;
    let v = Visitor::open(&t, &anon, "anonymous_link", None).await;
    v.say(&t, json!({"message": "one"})).await.assert_status(200);
    v.say(&t, json!({"message": "two"})).await.assert_status(200);
    let r = v.say(&t, json!({"message": "three"})).await;
    r.assert_status(429);
    assert_eq!(r.code(), "rate_limit_exceeded");
    assert!(r.headers["retry-after"].to_str().unwrap().parse::<u64>().unwrap() > 0);
    // another visitor is not affected
    let w = Visitor::open(&t, &anon, "anonymous_link", None).await;
    w.say(&t, json!({"message": "one"})).await.assert_status(200);
}

/// Per-visitor limits set in the general settings: the workspace's per-minute limit replaces the
/// server's, a daily limit holds until midnight UTC, both channels count, and the settings are
/// validated by field.
#[tokio::test]
async fn visitor_limits_in_the_general_settings_apply_to_the_link_and_the_widget() {
    let t = TestApp::with_config(|c| c.public_chat_limit_per_session.max = 2);
    // an hour before midnight UTC (sessions last twelve hours)
    let day = 86_400_000;
    let start = steward::clock::Clock::now_ms(&*t.clock);
    t.clock.advance_ms((start / day + 2) * day - 3_600_000 - start);
    let (owner, anon, embed) = public_app(&t).await;
    let put = |body: Value| t.put("/api/v1/settings/general", &owner, body);
    for (body, field) in [
        (json!({"publicChatVisitorMessagesPerMinute": 601}), "publicChatVisitorMessagesPerMinute"),
        (json!({"publicChatVisitorMessagesPerDay": 0}), "publicChatVisitorMessagesPerDay"),
        (json!({"publicChatVisitorMessagesPerDay": -1}), "publicChatVisitorMessagesPerDay"),
    ] {
        let r = put(body).await;
        r.assert_status(400);
        assert!(r.text().contains(field), "{}", r.text());
    }
    let g = put(json!({"publicChatVisitorMessagesPerMinute": 0, "publicChatVisitorMessagesPerDay": 4})).await;
    g.assert_status(200);
    assert_eq!(g.json()["publicChatVisitorMessagesPerDay"], 4);
    // no per-minute limit now (the server's 2 no longer applies); the day allows four
    let v = Visitor::open(&t, &anon, "anonymous_link", None).await;
    // what the server refuses (an empty message, a conversation it does not know) uses none of it
    v.say(&t, json!({"message": "   "})).await.assert_status(400);
    v.say(&t, json!({"message": "hi", "conversationId": "01a22665-0000-7000-8000-000000000000"}))
        .await
        .assert_status(404);
    for i in 0..4 {
        v.say(&t, json!({"message": format!("message {i}")})).await.assert_status(200);
    }
    let r = v.say(&t, json!({"message": "five"})).await;
    r.assert_status(429);
    assert_eq!(r.code(), "rate_limit_exceeded");
    let retry: i64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
    let now = steward::clock::Clock::now_ms(&*t.clock);
    let midnight = (now / day + 1) * day;
    assert_eq!(retry, (midnight - now + 999) / 1000, "until midnight UTC");
    assert_eq!(r.json()["error"]["details"]["limit"], 4);
    // the widget's visitors count the same way; at midnight UTC the day starts again
    let w = Visitor::open(&t, &embed, "website_embed", Some("https://shop.example")).await;
    put(json!({"publicChatVisitorMessagesPerMinute": 1, "publicChatVisitorMessagesPerDay": null}))
        .await
        .assert_status(200);
    w.say(&t, json!({"message": "one"})).await.assert_status(200);
    w.say(&t, json!({"message": "two"})).await.assert_status(429);
    t.clock.advance_ms(midnight - now);
    v.say(&t, json!({"message": "a new day"})).await.assert_status(200);
    // back to the server's default (2 a minute)
    put(json!({"publicChatVisitorMessagesPerMinute": null})).await.assert_status(200);
    let x = Visitor::open(&t, &anon, "anonymous_link", None).await;
    x.say(&t, json!({"message": "one"})).await.assert_status(200);
    x.say(&t, json!({"message": "two"})).await.assert_status(200);
    x.say(&t, json!({"message": "three"})).await.assert_status(429);
}

#[tokio::test]
async fn a_newer_public_message_supersedes_the_first_reply() {
    let (fake, started, release) = held_model("How long does shipping take?");
    let t = with_model(&fake);
    let (owner, anon, _) = public_app(&t).await;
    corpus(&t, &owner).await;
    let v = Visitor::open(&t, &anon, "anonymous_link", None).await;
    let cid = v.say(&t, json!({"message": "Hi"})).await.json()["conversationId"].as_str().unwrap().to_string();
    // non-streaming: the first answers 409 chat_turn_superseded
    let first = v.say(&t, json!({"message": "How long does shipping take?", "conversationId": cid}));
    let second = async {
        wait(started).await;
        v.say(&t, json!({"message": "How long does standard shipping take exactly?", "conversationId": cid})).await
    };
    let release_after_first = async {
        let r = first.await;
        let _ = release.send(());
        r
    };
    let (a, b) = tokio::join!(release_after_first, second);
    assert_eq!(a.status.as_u16(), 409, "{}", a.text());
    assert_eq!(a.code(), "chat_turn_superseded");
    b.assert_status(200);
    assert!(b.json()["answer"].as_str().unwrap().contains("exactly"));
}

#[tokio::test]
async fn a_superseded_public_stream_ends_with_cancelled() {
    let (fake, started, release) = held_model("How long does shipping take?");
    let t = with_model(&fake);
    let (owner, anon, _) = public_app(&t).await;
    corpus(&t, &owner).await;
    let v = Visitor::open(&t, &anon, "anonymous_link", None).await;
    let cid = v.say(&t, json!({"message": "Hi"})).await.json()["conversationId"].as_str().unwrap().to_string();
    let first = v.say(&t, json!({"message": "How long does shipping take?", "conversationId": cid, "stream": true}));
    let second = async {
        wait(started).await;
        v.say(&t, json!({"message": "And express?", "conversationId": cid})).await
    };
    let release_after_first = async {
        let r = first.await;
        let _ = release.send(());
        r
    };
    let (a, b) = tokio::join!(release_after_first, second);
    let events = sse_events(&a.text());
    let last = events.last().unwrap();
    assert_eq!(last.0, "cancelled", "{events:?}");
    assert_eq!(last.1["conversationId"], cid.as_str());
    assert_eq!(last.1["reason"], "superseded");
    assert!(events.iter().all(|(n, _)| n != "chunk" && n != "done"));
    b.assert_status(200);
}

#[tokio::test]
async fn the_events_stream_says_ready_then_each_new_message_and_ends_when_the_session_does() {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let t = TestApp::new();
    let (owner, _anon, embed) = public_app(&t).await;
    let v = Visitor::open(&t, &embed, "website_embed", Some("https://shop.example")).await;
    let cid = v.say(&t, json!({"message": "Hi"})).await.json()["conversationId"].as_str().unwrap().to_string();
    v.call(&t, Method::GET, "/events/0190f2a4-8a3c-7b1e-9c2d-3e4f5a6b7c8d", None).await.assert_status(404);
    let req = axum::http::Request::builder()
        .uri(format!("/api/v1/public/chat/{embed}/events/{cid}"))
        .header("x-service-public-session", &v.session)
        .header("origin", "https://shop.example")
        .body(axum::body::Body::empty())
        .unwrap();
    let resp = t.router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["access-control-allow-origin"], "https://shop.example");
    let mut body = resp.into_body();
    let mut next = async || loop {
        let f = body.frame().await?.ok()?;
        if let Ok(d) = f.into_data() {
            let s = String::from_utf8_lossy(&d).to_string();
            if !s.starts_with(':') {
                return Some(s);
            }
        }
    };
    assert!(next().await.unwrap().contains("event: ready"));
    // an operator's reply is a new message
    t.post(&format!("/api/v1/conversations/{cid}/takeover"), &owner, json!({})).await.assert_status(200);
    let version =
        t.get(&format!("/api/v1/history/chat/{cid}"), &owner).await.json()["ownership"]["version"].as_i64().unwrap();
    t.post(
        &format!("/api/v1/conversations/{cid}/reply"),
        &owner,
        json!({"message": "Hi from a person", "expectedVersion": version}),
    )
    .await
    .assert_status(201);
    let ev = next().await.unwrap();
    assert!(ev.contains("event: message.created") && ev.contains(&cid), "{ev}");
    // removing the origin ends the stream at the next event
    t.put("/api/v1/settings/general", &owner, json!({"websiteEmbedAllowedOrigins": []})).await.assert_status(200);
    t.post(
        &format!("/api/v1/conversations/{cid}/reply"),
        &owner,
        json!({"message": "Still there?", "expectedVersion": version}),
    )
    .await;
    assert_eq!(next().await, None, "the stream ended");
}
