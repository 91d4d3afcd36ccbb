//! The converse surface through the API: agent channel credentials (secret shown once, stored
//! hashed, rotate and revoke effective at once, dashboard session and agent manage only), the
//! session exchange, asks and routine tool calls with every validation code, the tool catalog,
//! conversation updates with the long poll across an operator's reply, the REST channel, and
//! isolation.

use serde_json::{Value, json};

use crate::support::{Auth, TestApp};

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

fn slot(key: &str, t: &str, required: bool, ordinal: i64) -> Value {
    json!({"stableSlotId": key, "key": key, "type": t, "required": required, "ordinal": ordinal,
        "description": format!("the customer's {key}")})
}

/// A refund request exposed as the tool `request_refund`: order reference and email required,
/// an optional amount and date; once per conversation.
pub fn refund_routine() -> Value {
    json!({
        "name": "Refund request",
        "activation": {"triggerDescription": "customer wants a refund for an order", "priority": 1},
        "slots": [slot("order_ref", "text", true, 1), slot("email", "email", true, 2),
                  slot("amount", "number", false, 3), slot("since", "date", false, 4)],
        "steps": [{"stableStepId": "collect", "kind": "chat", "ordinal": 1,
                   "instruction": "To request a refund I need the {{slot.order_ref}} and your {{slot.email}}."}],
        "transitions": [{"fromStep": "collect", "toRef": "done", "guardKind": "default", "ordinal": 1}],
        "terminals": [{"stableStepId": "done", "kind": "complete", "ordinal": 1,
                       "instruction": "Refund for {{slot.order_ref}} requested (amount: {{slot.amount}}, since {{slot.since}}); we will write to {{slot.email}}."}],
        "exposure": {"enabled": true, "toolName": "request_refund", "description": "Request a refund for an order."},
    })
}

/// A published agent with the refund routine and an MCP credential; returns the secret.
pub async fn converse_setup(t: &TestApp, owner: &Auth, audience: &str) -> (String, String) {
    let agent = t.default_agent(owner).await;
    t.doc(owner, "Shipping times", "Standard shipping takes 3 to 5 business days within the country.", json!({})).await;
    t.drain();
    let r = t.post(&format!("/api/v1/agents/{agent}/routines"), owner, json!({"definition": refund_routine()})).await;
    r.assert_status(201);
    t.publish(owner, &agent).await;
    let r = t
        .post(
            &format!("/api/v1/agents/{agent}/channel-credentials"),
            owner,
            json!({"audience": audience, "label": "bot"}),
        )
        .await;
    r.assert_status(201);
    (agent, r.json()["secret"].as_str().unwrap().to_string())
}

async fn exchange(t: &TestApp, secret: &str) -> Auth {
    let r = t
        .post("/api/v1/mcp/converse/session", &Auth::None, json!({"launchToken": secret, "client": {"name": "tests"}}))
        .await;
    r.assert_status(200);
    let v = r.json();
    assert!(v["conversationId"].is_null());
    assert!(v["expiresAt"].as_str().is_some());
    Auth::Bearer(v["sessionToken"].as_str().unwrap().to_string())
}

#[tokio::test]
async fn a_calling_agent_asks_invokes_routine_tools_and_reads_updates() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let (agent, secret) = converse_setup(&t, &owner, "mcp").await;
    let s = exchange(&t, &secret).await;
    let v = t.get("/api/v1/mcp/converse/session", &s).await.json();
    assert_eq!(v["valid"], true);
    assert_eq!(v["agentId"], agent.as_str());

    // the catalog: one descriptor, its schema from the slots
    let v = t.get("/api/v1/mcp/converse/tools", &s).await.json();
    assert_eq!(v["tools"].as_array().unwrap().len(), 1, "{v}");
    let d = &v["tools"][0];
    assert_eq!(d["toolName"], "request_refund");
    assert_eq!(d["description"], "Request a refund for an order.");
    assert_eq!(d["inputSchema"]["required"], json!(["order_ref", "email"]));
    assert_eq!(
        d["inputSchema"]["properties"]["email"],
        json!({"type": "string", "format": "email", "description": "the customer's email"})
    );
    assert_eq!(d["inputSchema"]["additionalProperties"], false);

    // nothing yet
    let v = t.get("/api/v1/mcp/converse/messages", &s).await.json();
    assert_eq!(v, json!({"messages": [], "cursor": null, "ownership": {"state": "ai_owned"}}));

    // a question: the envelope
    let r = t
        .post("/api/v1/mcp/converse/ask", &s, json!({"message": "How many business days does standard shipping take?"}))
        .await;
    r.assert_status(200);
    let v = r.json();
    let cid = v["conversationId"].as_str().unwrap().to_string();
    assert!(v["answer"]["text"].as_str().unwrap().contains("3 to 5 business days"), "{v}");
    assert_eq!(v["answer"]["citations"][0]["title"], "Shipping times");
    assert_eq!(v["ownership"], json!({"state": "ai_owned", "suppressed": false}));
    assert!(v["traceId"].as_str().is_some() && v.get("invocation").is_none());

    // invalid input: every code at once, nothing recorded, values never echoed
    let bad = json!({"routine": {"toolName": "request_refund", "input":
        {"order_ref": "x".repeat(2001), "email": "not-an-email", "amount": "twelve", "since": "2026-02-30", "colour": "secret-blue"}}});
    let r = t.post("/api/v1/mcp/converse/ask", &s, bad).await;
    r.assert_status(400);
    let e = r.json();
    assert_eq!(e["error"]["details"]["code"], "routine_invocation_invalid");
    let mut got: Vec<(String, String)> = e["error"]["details"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["path"].as_str().unwrap().to_string(), x["code"].as_str().unwrap().to_string()))
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("amount", "type"),
            ("colour", "unknown_field"),
            ("email", "format"),
            ("order_ref", "too_long"),
            ("since", "format")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    assert!(!r.text().contains("secret-blue") && !r.text().contains("not-an-email"));
    let r = t
        .post(
            "/api/v1/mcp/converse/ask",
            &s,
            json!({"routine": {"toolName": "request_refund", "input": {"order_ref": "  "}}}),
        )
        .await;
    r.assert_status(400);
    let codes: Vec<String> = r.json()["error"]["details"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| format!("{}:{}", x["path"].as_str().unwrap(), x["code"].as_str().unwrap()))
        .collect();
    assert_eq!(codes, ["order_ref:required", "email:required"], "a blank string is missing");
    let r = t.post("/api/v1/mcp/converse/ask", &s, json!({"routine": {"toolName": "no_such_tool", "input": {}}})).await;
    r.assert_status(404);
    assert_eq!(r.json()["error"]["details"]["code"], "routine_tool_unknown");
    let n = t.get(&format!("/api/v1/history/chat/{cid}"), &owner).await.json()["messages"].as_array().unwrap().len();
    assert_eq!(n, 2, "refused calls recorded nothing");

    // a valid call: started and completed at once (its slots given)
    let call = json!({"routine": {"toolName": "request_refund", "input": {"order_ref": " A-17 ", "email": "ann@example.com"}}});
    let v = t.post("/api/v1/mcp/converse/ask", &s, call.clone()).await.json();
    assert_eq!(v["conversationId"], cid.as_str(), "the session keeps one conversation");
    assert_eq!(v["invocation"], json!({"toolName": "request_refund", "outcome": "started"}), "{v}");
    assert_eq!(v["routine"]["status"], "completed");
    assert_eq!(v["routine"]["toolName"], "request_refund");
    assert!(v["answer"]["text"].as_str().unwrap().contains("A-17"), "{v}");
    // again: completed once per conversation → declined, answered normally
    let v = t.post("/api/v1/mcp/converse/ask", &s, call).await.json();
    assert_eq!(v["invocation"]["outcome"], "declined", "{v}");
    assert_eq!(
        v["routine"],
        json!({"name": "Refund request", "status": "completed", "pendingInput": [], "toolName": "request_refund"})
    );

    // updates: the agent's replies, paged by cursor
    let v = t.get("/api/v1/mcp/converse/messages", &s).await.json();
    let msgs = v["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3, "{v}");
    assert!(msgs.iter().all(|m| m["author"] == "agent"));
    let cursor = v["cursor"].as_str().unwrap().to_string();
    let v = t.get(&format!("/api/v1/mcp/converse/messages?cursor={cursor}"), &s).await.json();
    assert_eq!(v["messages"], json!([]));
    assert_eq!(v["cursor"], cursor.as_str());
    t.get("/api/v1/mcp/converse/messages?cursor=not.a.cursor", &s).await.assert_status(400);
    t.get("/api/v1/mcp/converse/messages?waitMs=25001", &s).await.assert_status(400);

    // a long poll woken by an operator's reply
    let wait = {
        let router = t.router.clone();
        let (tok, cursor) = (
            match &s {
                Auth::Bearer(b) => b.clone(),
                _ => unreachable!(),
            },
            cursor.clone(),
        );
        tokio::spawn(async move {
            use tower::ServiceExt;
            let req = axum::http::Request::get(format!("/api/v1/mcp/converse/messages?cursor={cursor}&waitMs=25000"))
                .header("authorization", format!("Bearer {tok}"))
                .body(axum::body::Body::empty())
                .unwrap();
            let resp = router.oneshot(req).await.unwrap();
            let b = http_body_util::BodyExt::collect(resp.into_body()).await.unwrap().to_bytes();
            serde_json::from_slice::<Value>(&b).unwrap()
        })
    };
    let v = t.post(&format!("/api/v1/conversations/{cid}/takeover"), &owner, json!({})).await;
    v.assert_status(200);
    let version = v.json()["ownership"]["version"].as_i64().unwrap();
    t.post(
        &format!("/api/v1/conversations/{cid}/reply"),
        &owner,
        json!({"message": "Hi, Sam here: approved.", "expectedVersion": version}),
    )
    .await
    .assert_status(201);
    let mut page = tokio::time::timeout(std::time::Duration::from_secs(20), wait)
        .await
        .expect("woken before the deadline")
        .unwrap();
    if page["messages"] == json!([]) {
        // the takeover (an ownership change) ended the wait before the reply: its state, no message
        assert_eq!(page["ownership"]["state"], "human_owned", "{page}");
        assert_eq!(page["cursor"], cursor.as_str());
        page = t.get(&format!("/api/v1/mcp/converse/messages?cursor={cursor}&waitMs=20000"), &s).await.json();
    }
    let msgs = page["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 1, "{page}");
    assert_eq!(msgs[0]["author"], "human");
    assert_eq!(msgs[0]["text"], "Hi, Sam here: approved.");
    assert_eq!(page["ownership"]["state"], "human_owned");

    // revoking the credential ends the session at the next request
    let creds = t.get(&format!("/api/v1/agents/{agent}/channel-credentials"), &owner).await.json();
    let id = creds["credentials"][0]["id"].as_str().unwrap().to_string();
    t.post(&format!("/api/v1/agents/{agent}/channel-credentials/{id}/revoke"), &owner, json!({}))
        .await
        .assert_status(200);
    let r = t.post("/api/v1/mcp/converse/ask", &s, json!({"message": "still there?"})).await;
    r.assert_status(401);
    assert_eq!(r.json()["error"]["details"]["code"], "invalid_session");
    t.post("/api/v1/mcp/converse/session", &Auth::None, json!({"launchToken": secret})).await.assert_status(401);
}

#[tokio::test]
async fn converse_bodies_are_checked_and_credentials_reach_nothing_else() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let (agent, secret) = converse_setup(&t, &owner, "mcp").await;
    for body in [
        json!({}),
        json!({"launchToken": secret, "publicId": "x"}),
        json!({"launchToken": "a\u{7}b"}),
        json!({"launchToken": "x".repeat(2049)}),
        json!({"launchToken": secret, "client": {"name": "n".repeat(129)}}),
    ] {
        t.post("/api/v1/mcp/converse/session", &Auth::None, body).await.assert_status(400);
    }
    t.post("/api/v1/mcp/converse/session", &Auth::None, json!({"launchToken": "scm_unknown"})).await.assert_status(401);
    let s = exchange(&t, &secret).await;
    for body in [
        json!({}),
        json!({"message": "a", "routine": {"toolName": "request_refund"}}),
        json!({"message": "   "}),
        json!({"message": "a", "stream": true}),
        json!({"message": "a", "extra": 1}),
    ] {
        t.post("/api/v1/mcp/converse/ask", &s, body).await.assert_status(400);
    }
    // the raw MCP credential and the session token on every other route: 401
    let raw = Auth::Bearer(secret.clone());
    for path in [
        "/api/v1/document",
        "/api/v1/agents",
        &format!("/api/v1/agents/{agent}"),
        "/api/v1/settings",
        &format!("/api/v1/agents/{agent}/channel-credentials"),
        "/api/v1/history/chat",
        "/api/v1/auth/me",
    ] {
        t.get(path, &raw).await.assert_status(401);
        t.get(path, &s).await.assert_status(401);
    }
    t.post(&format!("/api/v1/agents/{agent}/chat"), &raw, json!({"message": "hi"})).await.assert_status(401);
    t.post("/api/v1/chat", &s, json!({"message": "hi"})).await.assert_status(401);
    // the raw credential is not a session token, and a session token cannot be exchanged
    t.post("/api/v1/mcp/converse/ask", &raw, json!({"message": "hi"})).await.assert_status(401);
    match &s {
        Auth::Bearer(tok) => {
            t.post("/api/v1/mcp/converse/session", &Auth::None, json!({"launchToken": tok})).await.assert_status(401);
        }
        _ => unreachable!(),
    }
}

#[tokio::test]
async fn a_rest_credential_chats_with_its_own_agent_only() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let (agent, secret) = converse_setup(&t, &owner, "rest").await;
    let rest = Auth::Bearer(secret.clone());
    let r = t
        .post(
            &format!("/api/v1/agents/{agent}/chat"),
            &rest,
            json!({"message": "How many business days does standard shipping take?"}),
        )
        .await;
    r.assert_status(200);
    let v = r.json();
    assert!(v["answer"].as_str().unwrap().contains("3 to 5 business days"), "{v}");
    assert!(v["ownership"].is_object() && v["answerCoverage"].is_object());
    // it continues its own conversation, never someone else's
    let cid = v["conversationId"].as_str().unwrap().to_string();
    let r = t
        .post(&format!("/api/v1/agents/{agent}/chat"), &rest, json!({"message": "Thanks", "conversationId": cid}))
        .await;
    r.assert_status(200);
    let theirs = t.post(&format!("/api/v1/agents/{agent}/chat"), &owner, json!({"message": "Hello"})).await.json();
    let theirs = theirs["conversationId"].as_str().unwrap().to_string();
    let r = t
        .post(&format!("/api/v1/agents/{agent}/chat"), &rest, json!({"message": "Summarize", "conversationId": theirs}))
        .await;
    r.assert_status(404);
    // another agent, other routes, the converse exchange: 401
    let other =
        t.post("/api/v1/agents", &owner, json!({"name": "Other"})).await.json()["id"].as_str().unwrap().to_string();
    t.post(&format!("/api/v1/agents/{other}/chat"), &rest, json!({"message": "hi"})).await.assert_status(401);
    t.post("/api/v1/chat", &rest, json!({"message": "hi"})).await.assert_status(401);
    t.get("/api/v1/history/chat", &rest).await.assert_status(401);
    t.post("/api/v1/mcp/converse/session", &Auth::None, json!({"launchToken": secret})).await.assert_status(401);
}
