//! Agents as authored: agents and their defaults, logos, skills (merge vs replace), directives
//! with `#skill` chips and binding rules, coverage criteria, context variables and their scopes,
//! and the revision state machine.

use serde_json::{Value, json};

use crate::support::{Auth, TestApp};

async fn setup() -> (TestApp, Auth, String) {
    let t = TestApp::new();
    let owner = t.owner().await;
    let r = t.post("/api/v1/agents", &owner, json!({"name": "Support"})).await;
    r.assert_status(201);
    let id = r.json()["id"].as_str().unwrap().to_string();
    (t, owner, id)
}

async fn skill(t: &TestApp, a: &Auth, agent: &str, body: Value) -> Value {
    let r = t.post(&format!("/api/v1/agents/{agent}/skills"), a, body).await;
    r.assert_status(201);
    r.json()
}

#[tokio::test]
async fn agents_have_documented_defaults_and_a_default_agent() {
    let t = TestApp::new();
    let owner = t.owner().await;
    // the workspace starts with its default agent, published as v1
    let list = t.get("/api/v1/agents", &owner).await.json();
    let agents = list["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 1);
    assert_eq!(agents[0]["isDefault"], true);
    let first = agents[0]["id"].as_str().unwrap().to_string();
    let state = t.get(&format!("/api/v1/agents/{first}/revision-state"), &owner).await.json();
    assert_eq!(state["publishedRevision"]["label"], "v1");
    // a new agent: every default
    let r = t.post("/api/v1/agents", &owner, json!({"name": "  Sales   bot "})).await;
    r.assert_status(201);
    let a = r.json();
    assert_eq!(a["name"], "Sales bot");
    assert_eq!(a["retrievalEnabled"], true);
    assert_eq!(a["handoffOnRetrievalMiss"], false);
    assert_eq!(a["chatModelOverride"], Value::Null);
    assert_eq!(a["customInstruction"], "");
    assert_eq!(a["schemaVersion"], 4);
    assert_eq!(a["sourceScope"], json!({"mode": "all"}));
    assert_eq!(a["theme"]["brand"], "#0f172a");
    assert_eq!(a["surfaceSettings"]["authenticatedChat"]["enabled"], true);
    assert_eq!(a["surfaceSettings"]["anonymousChat"]["enabled"], false);
    assert_eq!(a["surfaceSettings"]["websiteEmbed"]["launcherLabel"], "Chat with us");
    assert_eq!(a["isDefault"], false);
    let id = a["id"].as_str().unwrap();
    // update: partial, validated
    let r = t
        .put(
            &format!("/api/v1/agents/{id}"),
            &owner,
            json!({"customInstruction": "Be kind.", "handoffOnRetrievalMiss": true}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(r.json()["customInstruction"], "Be kind.");
    assert_eq!(r.json()["retrievalEnabled"], true);
    assert_eq!(
        t.put(
            &format!("/api/v1/agents/{id}"),
            &owner,
            json!({"theme": {"brand": "red", "brandText": "#fff", "surface": "#ffffff", "text": "#000000"}})
        )
        .await
        .status,
        400
    );
    assert_eq!(t.put(&format!("/api/v1/agents/{id}"), &owner, json!({"unknownField": 1})).await.status, 400);
    assert_eq!(
        t.put(&format!("/api/v1/agents/{id}"), &owner, json!({"customInstruction": "x".repeat(2001)})).await.status,
        400
    );
    // a chat model override must be usable
    let r = t
        .put(
            &format!("/api/v1/agents/{id}"),
            &owner,
            json!({"chatModelOverride": {"provider": "claude", "model": "c"}}),
        )
        .await;
    assert_eq!(r.status, 400);
    // null is refused where a setting has no "none" (a silent no-op would mislead), and clears an override
    let r = t.put(&format!("/api/v1/agents/{id}"), &owner, json!({"contactRequestDelivery": null})).await;
    r.assert_status(400);
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("null"));
    t.put(&format!("/api/v1/agents/{id}"), &owner, json!({"name": null})).await.assert_status(400);
    t.put(&format!("/api/v1/agents/{id}"), &owner, json!({"assistantDefaultLocale": "de"})).await.assert_status(200);
    let a = t.put(&format!("/api/v1/agents/{id}"), &owner, json!({"assistantDefaultLocale": null})).await.json();
    assert_eq!(a["assistantDefaultLocale"], Value::Null);
    // switch the default
    t.post(&format!("/api/v1/agents/{id}/default"), &owner, json!({})).await.assert_status(200);
    let list = t.get("/api/v1/agents", &owner).await.json();
    let defaults: Vec<&Value> = list["agents"].as_array().unwrap().iter().filter(|a| a["isDefault"] == true).collect();
    assert_eq!(defaults.len(), 1);
    assert_eq!(defaults[0]["id"], id);
}

#[tokio::test]
async fn permissions_and_workspace_isolation() {
    let (t, owner, id) = setup().await;
    let member = t.member(&owner, "m@example.com", "member").await;
    t.get(&format!("/api/v1/agents/{id}"), &member).await.assert_status(200);
    assert_eq!(t.put(&format!("/api/v1/agents/{id}"), &member, json!({"customInstruction": "x"})).await.status, 403);
    assert_eq!(
        t.post(&format!("/api/v1/agents/{id}/directives"), &member, json!({"name": "a", "action": "b"})).await.status,
        403
    );
    assert_eq!(t.post("/api/v1/context-variables", &member, json!({"name": "plan"})).await.status, 403);
    let reader = t.token_with(&owner, &["workspace.documents.read"]).await;
    assert_eq!(t.get("/api/v1/agents", &reader).await.status, 403);
    // another workspace's agent is a 404
    let ws2 = t.workspace(&owner, "Other").await;
    assert_eq!(t.get_in(&ws2, &format!("/api/v1/agents/{id}"), &owner).await.status, 404);
}

#[tokio::test]
async fn logos_are_checked_and_unsafe_svg_refused() {
    let (t, owner, id) = setup().await;
    let path = format!("/api/v1/agents/{id}/assistant-logo");
    assert_eq!(t.get(&path, &owner).await.status, 404);
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89".to_vec();
    let r = t.send_bytes(axum::http::Method::POST, &path, &owner, png.clone(), "image/png").await;
    r.assert_status(201);
    assert_eq!(r.json()["mimeType"], "image/png");
    let r = t.get(&path, &owner).await;
    r.assert_status(200);
    assert_eq!(r.headers["content-type"], "image/png");
    assert_eq!(t.get(&format!("/api/v1/agents/{id}"), &owner).await.json()["logo"]["sizeBytes"], png.len());
    // not an image
    assert_eq!(t.send_bytes(axum::http::Method::POST, &path, &owner, b"hello".to_vec(), "image/png").await.status, 400);
    // safe SVG accepted, active SVG refused
    let ok = br##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10"><circle cx="5" cy="5" r="4" fill="#123456"/></svg>"##.to_vec();
    t.send_bytes(axum::http::Method::POST, &path, &owner, ok, "image/svg+xml").await.assert_status(201);
    for bad in [
        r#"<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>"#,
        r#"<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"></svg>"#,
        r#"<svg xmlns="http://www.w3.org/2000/svg"><image href="https://evil.example/x.png"/></svg>"#,
        r#"<svg xmlns="http://www.w3.org/2000/svg"><foreignObject><div/></foreignObject></svg>"#,
        r#"<!DOCTYPE svg [<!ENTITY x "y">]><svg xmlns="http://www.w3.org/2000/svg"/>"#,
    ] {
        let r = t.send_bytes(axum::http::Method::POST, &path, &owner, bad.as_bytes().to_vec(), "image/svg+xml").await;
        assert_eq!(r.status, 400, "{bad}");
        assert!(r.json()["error"]["message"].as_str().unwrap().contains("SVG was refused"));
    }
    // too large
    let mut big = b"\x89PNG\r\n\x1a\n".to_vec();
    big.resize(600 * 1024, 0);
    assert_eq!(t.send_bytes(axum::http::Method::POST, &path, &owner, big, "image/png").await.status, 413);
    t.delete(&path, &owner).await.assert_status(204);
    assert_eq!(t.delete(&path, &owner).await.status, 404);
}

#[tokio::test]
async fn skills_validate_per_capability_and_merge_or_replace_config() {
    let (t, owner, id) = setup().await;
    let caps = t.get(&format!("/api/v1/agents/{id}/skill-capabilities"), &owner).await.json();
    let ids: Vec<&str> = caps["capabilities"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec!["retrieve", "mcp_tool", "email", "slack_post", "webhook_call", "notify"]);
    let retrieve = &caps["capabilities"][0];
    assert_eq!(retrieve["targetRequired"], false);
    assert!(retrieve["inheritedDefaults"]["vectorTopK"].is_number());
    assert!(retrieve["fieldHelp"]["rerankTopK"].is_string());
    assert_eq!(caps["capabilities"][1]["targetRequired"], true);

    let s = skill(
        &t,
        &owner,
        &id,
        json!({"name": "FAQ_Lookup", "capability": "retrieve", "config": {"vectorTopK": 20, "rerankEnabled": true}}),
    )
    .await;
    assert_eq!(s["name"], "faq_lookup", "saved lowercased");
    assert_eq!(s["invocationMode"], "default_answer");
    let sid = s["id"].as_str().unwrap();
    let path = format!("/api/v1/agents/{id}/skills/{sid}");
    // merge: keeps other keys; null clears a key
    let v = t.patch(&path, &owner, json!({"config": {"rerankTopK": 5}})).await.json();
    assert_eq!(v["config"], json!({"vectorTopK": 20, "rerankEnabled": true, "rerankTopK": 5}));
    let v = t.patch(&path, &owner, json!({"config": {"rerankEnabled": null}})).await.json();
    assert_eq!(v["config"], json!({"vectorTopK": 20, "rerankTopK": 5}));
    // replace: omitted keys are removed
    let v = t.patch(&path, &owner, json!({"replaceConfig": {"queryRewriteEnabled": false}})).await.json();
    assert_eq!(v["config"], json!({"queryRewriteEnabled": false}));
    // both at once
    let r = t.patch(&path, &owner, json!({"config": {}, "replaceConfig": {}})).await;
    assert_eq!(r.status, 400);
    // ranges and unknown keys
    assert_eq!(t.patch(&path, &owner, json!({"config": {"vectorTopK": 301}})).await.status, 400);
    assert_eq!(t.patch(&path, &owner, json!({"config": {"suggestedQuestionsCount": 5}})).await.status, 400);
    assert_eq!(t.patch(&path, &owner, json!({"config": {"retrievalStrategy": "magic"}})).await.status, 400);
    assert_eq!(t.patch(&path, &owner, json!({"config": {"colour": "red"}})).await.status, 400);
    // targets and modes per capability
    let bad = |b: Value| {
        let t = &t;
        let owner = &owner;
        let id = &id;
        async move { t.post(&format!("/api/v1/agents/{id}/skills"), owner, b).await.status.as_u16() }
    };
    assert_eq!(
        bad(json!({"name": "mcp", "capability": "mcp_tool", "config": {"toolName": "x"}})).await,
        400,
        "target required"
    );
    assert_eq!(bad(json!({"name": "mcp", "capability": "mcp_tool", "target": {"kind": "webhook_destination", "id": "x"}, "config": {"toolName": "x"}})).await, 400);
    assert_eq!(bad(json!({"name": "r2", "capability": "retrieve", "invocationMode": "sometimes"})).await, 400);
    assert_eq!(bad(json!({"name": "n1", "capability": "notify", "invocationMode": "default_answer"})).await, 400);
    assert_eq!(bad(json!({"name": "Bad Name", "capability": "retrieve"})).await, 400);
    assert_eq!(bad(json!({"name": "x", "capability": "teleport"})).await, 400);
    assert_eq!(bad(json!({"name": "faq_lookup", "capability": "retrieve"})).await, 409);
    // notify: at most 5 recipients, valid emails, optional webhook URL
    let six: Vec<String> = (0..6).map(|i| format!("p{i}@example.com")).collect();
    assert_eq!(
        bad(json!({"name": "notify_sales", "capability": "notify", "config": {"delivery": {"recipientEmails": six}}}))
            .await,
        400
    );
    assert_eq!(bad(json!({"name": "notify_sales", "capability": "notify", "config": {"delivery": {"recipientEmails": ["not-an-email"]}}})).await, 400);
    assert_eq!(bad(json!({"name": "notify_sales", "capability": "notify", "config": {"delivery": {"webhook": {"url": "ftp://x"}}}})).await, 400);
    let n = skill(&t, &owner, &id, json!({"name": "notify_sales", "capability": "notify", "config": {"delivery": {"recipientEmails": ["Sales@Example.com"], "webhook": {"url": "https://hooks.example.com/x"}}, "exposedInputs": {"message": true, "email": false}}})).await;
    assert_eq!(n["target"], json!({"kind": "notify_delivery", "id": null}));
    assert_eq!(n["config"]["delivery"]["recipientEmails"], json!(["sales@example.com"]));
    // the list shape
    let list = t.get(&format!("/api/v1/agents/{id}/skills"), &owner).await.json();
    for k in ["name", "capability", "target", "config", "invocationMode", "enabled"] {
        assert!(list["skills"][0].get(k).is_some(), "{k}");
    }
    // the read-only catalog
    let cat = t.get("/api/v1/skills", &owner).await.json();
    assert!(cat["skills"].as_array().unwrap().iter().any(|s| s["name"] == "retrieval.answer"));
    let ra = t.get("/api/v1/skills/retrieval.answer", &owner).await.json();
    assert!(ra["contractReferences"].as_array().unwrap().iter().any(|c| c["path"] == "/api/v1/retrieval/answer"));
    assert_eq!(t.get("/api/v1/skills/nope", &owner).await.status, 404);
}

#[tokio::test]
async fn directive_bindings_follow_the_chip_rules() {
    let (t, owner, id) = setup().await;
    let dpath = format!("/api/v1/agents/{id}/directives");
    skill(
        &t,
        &owner,
        &id,
        json!({"name": "faq_lookup", "capability": "retrieve", "invocationMode": "agent_selectable"}),
    )
    .await;
    skill(&t, &owner, &id, json!({"name": "default_retrieve", "capability": "retrieve"})).await;
    let notify = skill(
        &t,
        &owner,
        &id,
        json!({"name": "notify_team", "capability": "notify", "invocationMode": "agent_selectable"}),
    )
    .await;
    let _ = notify;
    // a chip bound to a selectable retrieve skill; trailing punctuation is prose
    let r = t
        .post(&dpath, &owner, json!({"name": "pricing", "condition": {"kind": "contextual", "description": "The visitor asks about prices"}, "action": "Look it up with #faq_lookup.", "binding": {"kind": "skill", "skillName": "faq_lookup"}, "priority": 70}))
        .await;
    r.assert_status(201);
    let d = r.json();
    assert_eq!(d["binding"], json!({"kind": "skill", "skillName": "faq_lookup"}));
    assert_eq!(d["action"], "Look it up with #faq_lookup.", "reopening shows the same text");
    assert_eq!(d["chips"][0]["text"], "#faq_lookup");
    assert_eq!(d["chips"][0]["status"], "bound");
    let did = d["id"].as_str().unwrap().to_string();
    // a #name with a null binding stays prose, and the binding stays null
    let r = t.post(&dpath, &owner, json!({"name": "prose", "condition": {"kind": "always"}, "action": "Mention our #1 rated #faq_lookup team."})).await;
    r.assert_status(201);
    assert_eq!(r.json()["binding"], Value::Null);
    assert_eq!(r.json()["chips"], json!([]));
    // rule 1: each invalid binding is a 400 naming the skill
    for (name, skill_name, why) in [
        ("b1", "missing_skill", "no skill"),
        ("b2", "default_retrieve", "agent_selectable"),
        ("b3", "notify_team", "cannot be bound"),
    ] {
        let r = t.post(&dpath, &owner, json!({"name": name, "condition": {"kind": "always"}, "action": format!("Use #{skill_name}!"), "binding": {"kind": "skill", "skillName": skill_name}})).await;
        assert_eq!(r.status, 400, "{skill_name}");
        let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(msg.contains(skill_name) && msg.contains(why), "{msg}");
        assert_eq!(r.json()["error"]["details"]["skillName"], skill_name);
    }
    // the chip must be in the text
    let r = t.post(&dpath, &owner, json!({"name": "b4", "condition": {"kind": "always"}, "action": "No chip here", "binding": {"kind": "skill", "skillName": "faq_lookup"}})).await;
    assert_eq!(r.status, 400);
    // a disabled skill keeps its chip, marked unknown; so does a renamed one
    let skills = t.get(&format!("/api/v1/agents/{id}/skills"), &owner).await.json();
    let faq = skills["skills"].as_array().unwrap().iter().find(|s| s["name"] == "faq_lookup").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    t.patch(&format!("/api/v1/agents/{id}/skills/{faq}"), &owner, json!({"enabled": false})).await.assert_status(200);
    let ds = t.get(&dpath, &owner).await.json();
    let d = ds["directives"].as_array().unwrap().iter().find(|d| d["id"] == did.as_str()).unwrap().clone();
    assert_eq!(d["binding"]["skillName"], "faq_lookup");
    assert_eq!(d["chips"][0]["status"], "unknown_skill");
    t.patch(&format!("/api/v1/agents/{id}/skills/{faq}"), &owner, json!({"enabled": true, "name": "faq_search"}))
        .await
        .assert_status(200);
    let ds = t.get(&dpath, &owner).await.json();
    let d = ds["directives"].as_array().unwrap().iter().find(|d| d["id"] == did.as_str()).unwrap().clone();
    assert_eq!(d["chips"][0]["status"], "unknown_skill");
    assert_eq!(d["action"], "Look it up with #faq_lookup.");
    // removing the chip from the text removes the binding
    let r = t.patch(&format!("{dpath}/{did}"), &owner, json!({"action": "Just answer."})).await;
    r.assert_status(200);
    assert_eq!(r.json()["binding"], Value::Null);
    // built-in names are reserved; names are unique
    assert_eq!(t.post(&dpath, &owner, json!({"name": "represent-organization", "action": "x"})).await.status, 400);
    assert_eq!(t.post(&dpath, &owner, json!({"name": "prose", "action": "x"})).await.status, 409);
    // contextual needs a description; priority 0–100
    assert_eq!(
        t.post(&dpath, &owner, json!({"name": "c1", "condition": {"kind": "contextual"}, "action": "x"})).await.status,
        400
    );
    assert_eq!(t.post(&dpath, &owner, json!({"name": "c2", "action": "x", "priority": 101})).await.status, 400);
    assert_eq!(
        t.post(&dpath, &owner, json!({"name": "c3", "condition": {"kind": "sometimes"}, "action": "x"})).await.status,
        400
    );
    // scope tags
    let r = t
        .post(
            &dpath,
            &owner,
            json!({"name": "tagged", "action": "x", "tags": ["routine:r1", "step:r1:s2", "routine:r1"]}),
        )
        .await;
    r.assert_status(201);
    assert_eq!(r.json()["tags"], json!(["routine:r1", "step:r1:s2"]));
    assert_eq!(
        t.post(&dpath, &owner, json!({"name": "badtag", "action": "x", "tags": ["step:only"]})).await.status,
        400
    );
    // draft: proposes, does not save
    let before = t.get(&dpath, &owner).await.json()["directives"].as_array().unwrap().len();
    let r = t
        .post(
            &format!("{dpath}/draft"),
            &owner,
            json!({"prompt": "When someone asks for a refund, point them to the returns form"}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(r.json()["draft"]["condition"]["kind"], "contextual");
    assert_eq!(t.get(&dpath, &owner).await.json()["directives"].as_array().unwrap().len(), before);
}

#[tokio::test]
async fn coverage_criteria_keep_remove_and_validate() {
    let (t, owner, id) = setup().await;
    let dpath = format!("/api/v1/agents/{id}/directives");
    let r = t.post(&dpath, &owner, json!({"name": "gaps", "action": "Offer a human.", "coverageCriteria": {"coverage": ["partial", "unanswered"], "reasons": ["insufficient_evidence"]}})).await;
    r.assert_status(201);
    let did = r.json()["id"].as_str().unwrap().to_string();
    // omitted keeps it
    let v = t.patch(&format!("{dpath}/{did}"), &owner, json!({"priority": 10})).await.json();
    assert_eq!(v["coverageCriteria"]["coverage"], json!(["partial", "unanswered"]));
    // null removes it
    let v = t.patch(&format!("{dpath}/{did}"), &owner, json!({"coverageCriteria": null})).await.json();
    assert_eq!(v["coverageCriteria"], Value::Null);
    // illegal
    for bad in [
        json!({"coverage": []}),
        json!({"coverage": ["answered"], "reasons": ["insufficient_evidence"]}),
        json!({"coverage": ["unclear"], "reasons": ["sufficient_evidence"]}),
        json!({"coverage": ["answered", "answered"]}),
        json!({"coverage": ["mostly"]}),
    ] {
        assert_eq!(
            t.patch(&format!("{dpath}/{did}"), &owner, json!({"coverageCriteria": bad})).await.status,
            400,
            "{bad}"
        );
    }
}

#[tokio::test]
async fn context_variables_resolve_by_scope_and_follow_their_skill() {
    let (t, owner, id) = setup().await;
    let r = t
        .post(
            "/api/v1/context-variables",
            &owner,
            json!({"name": "plan", "description": "The customer's plan", "valueType": "string"}),
        )
        .await;
    r.assert_status(201);
    let v = r.json();
    assert_eq!(
        (v["trustTier"].as_str(), v["sensitivity"].as_str(), v["defaultSurfacing"].as_str()),
        (Some("unverified"), Some("normal"), Some("on_reference"))
    );
    let vid = v["id"].as_str().unwrap().to_string();
    assert_eq!(t.post("/api/v1/context-variables", &owner, json!({"name": "plan"})).await.status, 409);
    assert_eq!(t.post("/api/v1/context-variables", &owner, json!({"name": "Plan!"})).await.status, 400);
    assert_eq!(t.post("/api/v1/context-variables", &owner, json!({"name": "x", "valueType": "xml"})).await.status, 400);
    let values = format!("/api/v1/context-variables/{vid}/values");
    let ws = t.get_ws();
    for (scope, id_, val) in [
        ("workspace", None, "free"),
        ("agent", Some(id.clone()), "team"),
        ("customer", Some("cust-1".to_string()), "pro"),
        ("session", Some("sess-1".to_string()), "trial"),
    ] {
        t.put(&values, &owner, json!({"scope": {"type": scope, "id": id_}, "data": {"value": val}}))
            .await
            .assert_status(200);
    }
    assert_eq!(
        t.put(&values, &owner, json!({"scope": {"type": "customer"}, "data": {"value": "x"}})).await.status,
        400
    );
    assert_eq!(
        t.put(&values, &owner, json!({"scope": {"type": "galaxy", "id": "x"}, "data": {"value": "x"}})).await.status,
        400
    );
    assert_eq!(
        t.put(&values, &owner, json!({"scope": {"type": "customer", "id": "c"}, "data": {"value": 3}})).await.status,
        400
    );
    let wsid = steward::ids::WorkspaceId(ws.clone());
    let resolve = |session: Option<&str>, customer: Option<&str>, agent: Option<&str>| {
        t.app
            .db
            .read(|c| {
                steward::agents::context::resolve(
                    &t.app,
                    c,
                    &wsid,
                    &vid,
                    &steward::agents::context::Subject { session_id: session, customer_id: customer, agent_id: agent },
                )
            })
            .unwrap()
            .map(|r| (r.scope.to_string(), r.value["value"].as_str().unwrap().to_string()))
    };
    assert_eq!(resolve(Some("sess-1"), Some("cust-1"), Some(&id)), Some(("session".into(), "trial".into())));
    assert_eq!(resolve(Some("other"), Some("cust-1"), Some(&id)), Some(("customer".into(), "pro".into())));
    assert_eq!(resolve(None, Some("cust-2"), Some(&id)), Some(("agent".into(), "team".into())));
    assert_eq!(resolve(None, None, None), Some(("workspace".into(), "free".into())));
    t.send(axum::http::Method::DELETE, &format!("{values}?scopeType=workspace"), &owner, None, &[])
        .await
        .assert_status(204);
    assert_eq!(resolve(None, None, None), None);
    // sensitive values are never returned
    let s = t
        .post("/api/v1/context-variables", &owner, json!({"name": "account_number", "sensitivity": "sensitive"}))
        .await
        .json();
    let sid = s["id"].as_str().unwrap();
    // without CONNECTOR_ENCRYPTION_KEY a sensitive value cannot be stored (it would be in clear)
    let r = t
        .put(
            &format!("/api/v1/context-variables/{sid}/values"),
            &owner,
            json!({"scope": {"type": "customer", "id": "c1"}, "data": {"value": "NL91ABNA0417164300"}}),
        )
        .await;
    r.assert_status(503);
    assert_eq!(r.json()["error"]["code"], "encryption_not_configured");
    assert!(!r.text().contains("NL91ABNA"));

    // per-agent enablement: pushed, or resolver backed by an enabled skill of the same agent
    let epath = format!("/api/v1/agents/{id}/context-variables/{vid}");
    t.put(&epath, &owner, json!({"source": "pushed"})).await.assert_status(200);
    assert_eq!(t.put(&epath, &owner, json!({"source": "resolver"})).await.status, 400);
    let sk = skill(&t, &owner, &id, json!({"name": "crm", "capability": "mcp_tool", "target": {"kind": "mcp_connection", "id": "conn-1"}, "config": {"toolName": "lookup_plan"}})).await;
    let skid = sk["id"].as_str().unwrap().to_string();
    let e = t.put(&epath, &owner, json!({"source": "resolver", "resolverSkillId": skid, "surfacing": "always"})).await;
    e.assert_status(200);
    assert_eq!(e.json()["enabled"], true);
    // disabling the skill disables the enablement; re-enabling does not opt it back in
    let skpath = format!("/api/v1/agents/{id}/skills/{skid}");
    t.patch(&skpath, &owner, json!({"enabled": false})).await.assert_status(200);
    let list = t.get(&format!("/api/v1/agents/{id}/context-variables"), &owner).await.json();
    assert_eq!(list["contextVariables"][0]["enabled"], false);
    t.patch(&skpath, &owner, json!({"enabled": true})).await.assert_status(200);
    let list = t.get(&format!("/api/v1/agents/{id}/context-variables"), &owner).await.json();
    assert_eq!(list["contextVariables"][0]["enabled"], false);
    // deleting the skill removes the enablement
    t.delete(&skpath, &owner).await.assert_status(204);
    let list = t.get(&format!("/api/v1/agents/{id}/context-variables"), &owner).await.json();
    assert_eq!(list["contextVariables"], json!([]));
    // another agent's skill cannot resolve
    let other =
        t.post("/api/v1/agents", &owner, json!({"name": "Other"})).await.json()["id"].as_str().unwrap().to_string();
    let osk = skill(&t, &owner, &other, json!({"name": "crm", "capability": "mcp_tool", "target": {"kind": "mcp_connection", "id": "c"}, "config": {"toolName": "t"}})).await;
    assert_eq!(t.put(&epath, &owner, json!({"source": "resolver", "resolverSkillId": osk["id"]})).await.status, 400);
}

async fn generation(t: &TestApp, a: &Auth, id: &str) -> i64 {
    t.get(&format!("/api/v1/agents/{id}/revision-state"), a).await.json()["draft"]["generation"].as_i64().unwrap()
}

#[tokio::test]
async fn revisions_candidate_publish_conflicts_and_idempotency() {
    let (t, owner, id) = setup().await;
    let base = format!("/api/v1/agents/{id}");
    let state = t.get(&format!("{base}/revision-state"), &owner).await.json();
    let v1 = state["publishedRevision"]["id"].as_str().unwrap().to_string();
    assert_eq!(state["canPublish"], false);
    let g0 = state["draft"]["generation"].as_i64().unwrap();
    // every authored write advances the draft generation
    t.put(&base, &owner, json!({"customInstruction": "Answer in English."})).await.assert_status(200);
    assert_eq!(generation(&t, &owner, &id).await, g0 + 1);
    let r = t.post(&format!("{base}/directives"), &owner, json!({"name": "tone", "action": "Be warm."})).await;
    r.assert_status(201);
    let g = generation(&t, &owner, &id).await;
    assert_eq!(g, g0 + 2);
    let state = t.get(&format!("{base}/revision-state"), &owner).await.json();
    assert_eq!(state["status"], "draft_changes");
    assert_eq!(state["canPublish"], true);
    // a stale candidate request
    let r = t.post(&format!("{base}/revisions/candidates"), &owner, json!({"expectedDraftGeneration": g - 1})).await;
    assert_eq!((r.status.as_u16(), r.code()), (409, "revision_conflict".to_string()));
    // one candidate per generation
    let r = t.post(&format!("{base}/revisions/candidates"), &owner, json!({"expectedDraftGeneration": g})).await;
    r.assert_status(201);
    let cand = r.json();
    assert_eq!(cand["kind"], "candidate");
    assert!(cand["label"].as_str().unwrap().starts_with("Draft · "));
    assert_eq!(cand["scopedChanges"]["customInstruction"]["changed"], true);
    assert_eq!(cand["scopedChanges"]["directives"][0]["change"], "added");
    let again = t.post(&format!("{base}/revisions/candidates"), &owner, json!({"expectedDraftGeneration": g})).await;
    again.assert_status(200);
    assert_eq!(again.json()["id"], cand["id"]);
    let cid = cand["id"].as_str().unwrap().to_string();
    // publish checks: stale published revision, stale generation, missing key
    let publish = format!("{base}/revisions/{cid}/publish");
    let r = t
        .post(
            &publish,
            &owner,
            json!({"expectedDraftGeneration": g, "expectedPublishedRevisionId": null, "idempotencyKey": "k0"}),
        )
        .await;
    assert_eq!(r.code(), "revision_conflict");
    assert_eq!(
        t.post(&publish, &owner, json!({"expectedDraftGeneration": g, "expectedPublishedRevisionId": v1})).await.status,
        400
    );
    // concurrent publishes of the same candidate: one wins, the other gets 409
    let body = |k: &str| json!({"expectedDraftGeneration": g, "expectedPublishedRevisionId": v1, "idempotencyKey": k});
    let (a, b) = tokio::join!(t.post(&publish, &owner, body("k1")), t.post(&publish, &owner, body("k2")));
    let mut statuses = vec![a.status.as_u16(), b.status.as_u16()];
    statuses.sort();
    assert_eq!(statuses, vec![200, 409]);
    let winner = if a.status == 200 { a.json() } else { b.json() };
    let key = if a.status == 200 { "k1" } else { "k2" };
    assert_eq!(winner["label"], "v2");
    assert_eq!(winner["versionNumber"], 2);
    // a retried command returns the same version
    let retry = t.post(&publish, &owner, body(key)).await;
    retry.assert_status(200);
    assert_eq!(retry.json()["versionNumber"], 2);
    let state = t.get(&format!("{base}/revision-state"), &owner).await.json();
    assert_eq!(state["publishedRevision"]["id"], cid.as_str());
    assert_eq!(state["canPublish"], false);
    // the list: candidates only unless include=published
    let list = t.get(&format!("{base}/revisions"), &owner).await.json();
    assert!(list["revisions"].as_array().unwrap().iter().all(|r| r["kind"] == "candidate"));
    let list = t.get(&format!("{base}/revisions?include=published"), &owner).await.json();
    let labels: Vec<&str> =
        list["revisions"].as_array().unwrap().iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert_eq!(labels, vec!["v2", "v1"]);
    assert_eq!(t.get(&format!("{base}/revisions?include=everything"), &owner).await.status, 400);
    // the published snapshot is immutable: later draft edits do not change it
    t.put(&base, &owner, json!({"customInstruction": "Changed later."})).await.assert_status(200);
    let (rid, version, snap) = t.app.db.read(|c| steward::agents::revisions::published(c, &id)).unwrap().unwrap();
    assert_eq!((rid.as_str(), version), (cid.as_str(), 2));
    assert_eq!(snap["customInstruction"], "Answer in English.");
    // an invalid candidate is 422
    let src = t.get("/api/v1/document/sources", &owner).await.json();
    let _ = src;
    let doc = t.doc(&owner, "Scoped", "Some text.", json!({})).await;
    let source_id = t.document(&owner, &doc).await["sourceId"].as_str().unwrap().to_string();
    t.put(&base, &owner, json!({"sourceScope": {"mode": "selected", "sourceIds": [source_id]}}))
        .await
        .assert_status(200);
    t.delete(&format!("/api/v1/document/sources/{source_id}"), &owner).await.assert_status(204);
    let g = generation(&t, &owner, &id).await;
    let cand =
        t.post(&format!("{base}/revisions/candidates"), &owner, json!({"expectedDraftGeneration": g})).await.json();
    let r = t
        .post(
            &format!("{base}/revisions/{}/publish", cand["id"].as_str().unwrap()),
            &owner,
            json!({"expectedDraftGeneration": g, "expectedPublishedRevisionId": cid, "idempotencyKey": "k3"}),
        )
        .await;
    assert_eq!((r.status.as_u16(), r.code()), (422, "revision_invalid".to_string()));
    // readers can see state but not publish
    let member = t.member(&owner, "m@example.com", "member").await;
    t.get(&format!("{base}/revision-state"), &member).await.assert_status(200);
    assert_eq!(
        t.post(&format!("{base}/revisions/candidates"), &member, json!({"expectedDraftGeneration": g})).await.status,
        403
    );
}
