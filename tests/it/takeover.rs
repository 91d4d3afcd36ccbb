//! Human takeover and the operator inbox through the API: every ownership transition of the
//! spec's table, stale versions, transfers, what a human-owned conversation suppresses (no model
//! call once an operator replied, asserted on the fake provider, the trace and usage), the audit
//! trail, answer feedback and the inbox.

use serde_json::{Value, json};
use steward::config::Secret;

use crate::fake_llm::{FakeProvider, openai_stream};
use crate::support::{Auth, TestApp};

fn with_model(fake: &FakeProvider) -> TestApp {
    let url = fake.url.clone();
    TestApp::with_config(move |c| {
        c.llm.env_keys.insert("openai".into(), Secret::new("sk-takeover-test".into()));
        c.llm.base_urls.insert("openai".into(), url.clone());
        c.llm.chat =
            steward::config::LlmSlotDefault { provider: Some("openai".into()), model: Some("gpt-test".into()) };
    })
}

async fn chat(t: &TestApp, a: &Auth, body: Value) -> Value {
    let r = t.post("/api/v1/chat", a, body).await;
    r.assert_status(200);
    r.json()
}

async fn me(t: &TestApp, a: &Auth) -> String {
    t.get("/api/v1/auth/me", a).await.json()["user"]["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn takeover_reply_transfer_and_handback_follow_the_ownership_table() {
    let fake = FakeProvider::start(|_| openai_stream("One moment, a person will be with you shortly."));
    let t = with_model(&fake);
    let owner = t.owner().await;
    let mate = t.member(&owner, "mate@example.com", "member").await;
    let (owner_id, mate_id) = (me(&t, &owner).await, me(&t, &mate).await);
    let agent = t.default_agent(&owner).await;
    t.put(&format!("/api/v1/agents/{agent}"), &owner, json!({"handoffOnRetrievalMiss": true})).await.assert_status(200);
    t.publish(&owner, &agent).await;

    // a retrieval miss hands off: human-owned, nobody holds it yet, in the inbox
    let v = chat(&t, &owner, json!({"message": "Do you repair vintage radios?"})).await;
    let cid = v["conversationId"].as_str().unwrap().to_string();
    let base = format!("/api/v1/conversations/{cid}");
    let inbox = t.get("/api/v1/inbox", &owner).await.json();
    assert_eq!(inbox["items"][0]["kind"], "handoff");
    assert_eq!(inbox["items"][0]["heldBy"], "nobody");
    let o = &inbox["items"][0]["ownership"];
    assert_eq!(
        (o["state"].as_str(), o["reason"].as_str(), o["ownerAccountId"].as_null()),
        (Some("human_owned"), Some("retrieval_miss"), Some(()))
    );
    let v0 = o["version"].as_i64().unwrap();

    // before any operator reply a visitor message gets one waiting line (a model call)
    let calls = fake.requests.lock().len();
    let w = chat(&t, &owner, json!({"message": "Hello?", "conversationId": cid})).await;
    assert_eq!(w["ownership"], json!({"state": "human_owned", "suppressed": true}));
    assert!(!w["answer"].as_str().unwrap().is_empty());
    assert_eq!(fake.requests.lock().len(), calls + 1, "the waiting line");

    // a stale version: 409 with the current record
    let r = t.post(&format!("{base}/reply"), &mate, json!({"message": "Hi!", "expectedVersion": v0 - 1})).await;
    r.assert_status(409);
    let e = r.json();
    assert_eq!(e["error"]["details"]["code"], "stale_version");
    assert_eq!(e["error"]["details"]["ownership"]["version"], v0);
    // the owner replies: the message is the operator's, and the reply claims the conversation
    let r = t
        .post(&format!("{base}/reply"), &owner, json!({"message": "  Hi, Olivia here.  ", "expectedVersion": v0}))
        .await;
    r.assert_status(201);
    let rep = r.json();
    assert_eq!(rep["message"]["role"], "assistant");
    assert_eq!(rep["message"]["source"], "human_agent");
    assert_eq!(rep["message"]["text"], "Hi, Olivia here.");
    assert_eq!(rep["message"]["operatorDisplayName"], "Olive Owner");
    assert_eq!(rep["ownership"]["ownerAccountId"], owner_id.as_str());
    let v1 = rep["ownership"]["version"].as_i64().unwrap();
    assert_eq!(v1, v0 + 1);
    // a teammate cannot take it or reply while the owner holds it
    let r = t.post(&format!("{base}/takeover"), &mate, json!({})).await;
    r.assert_status(409);
    assert_eq!(r.json()["error"]["details"]["code"], "held_by_teammate");
    let r = t.post(&format!("{base}/reply"), &mate, json!({"message": "me too", "expectedVersion": v1})).await;
    assert_eq!(r.json()["error"]["details"]["code"], "held_by_teammate");
    // after an operator replied, a visitor message runs nothing: no reply, no model call
    let calls = fake.requests.lock().len();
    let s = chat(&t, &owner, json!({"message": "Great, thanks", "conversationId": cid})).await;
    assert_eq!(s["ownership"], json!({"state": "human_owned", "suppressed": true}));
    assert_eq!(s["answer"], "");
    assert_eq!(s["diagnostics"]["retrievalInvoked"], false);
    assert_eq!(fake.requests.lock().len(), calls, "no model call once an operator replied");
    let tr = t.get(&format!("/api/v1/traces/{}", s["traceId"].as_str().unwrap()), &owner).await.json();
    assert!(!tr.to_string().contains("\"retrieve\""), "no retrieval stage ran: {tr}");
    // the operator tail shows the operator's name and the ownership
    let tail = t.get(&format!("/api/v1/history/chat/{cid}/tail"), &owner).await.json();
    assert_eq!(tail["ownership"]["ownerDisplayName"], "Olive Owner");
    assert!(tail["messages"].as_array().unwrap().iter().any(|m| m["operatorDisplayName"] == "Olive Owner"));

    // transfer: only to a member who may take over; stale versions refused
    let r = t.post(&format!("{base}/transfer"), &owner, json!({"toAccountId": "nobody", "expectedVersion": v1})).await;
    r.assert_status(404);
    let r =
        t.post(&format!("{base}/transfer"), &owner, json!({"toAccountId": mate_id, "expectedVersion": v1 - 1})).await;
    r.assert_status(409);
    let r = t.post(&format!("{base}/transfer"), &owner, json!({"toAccountId": mate_id, "expectedVersion": v1})).await;
    r.assert_status(200);
    let o = r.json()["ownership"].clone();
    assert_eq!((o["ownerAccountId"].as_str(), o["version"].as_i64()), (Some(mate_id.as_str()), Some(v1 + 1)));
    assert_eq!(t.get("/api/v1/inbox", &mate).await.json()["items"][0]["heldBy"], "me");
    // another member cannot move what a teammate holds (its holder or an admin can)
    let third = t.member(&owner, "third@example.com", "member").await;
    let r = t.post(&format!("{base}/handback"), &third, json!({"expectedVersion": v1 + 1})).await;
    r.assert_status(409);
    assert_eq!(r.json()["error"]["details"]["code"], "held_by_teammate");
    let third_id = me(&t, &third).await;
    let r =
        t.post(&format!("{base}/transfer"), &third, json!({"toAccountId": third_id, "expectedVersion": v1 + 1})).await;
    assert_eq!(r.json()["error"]["details"]["code"], "held_by_teammate");
    assert_eq!(t.get("/api/v1/inbox", &owner).await.json()["items"][0]["heldBy"], "teammate");

    // hand back: the next visitor message is answered by the agent again
    let r = t.post(&format!("{base}/handback"), &mate, json!({"expectedVersion": v1 + 1})).await;
    r.assert_status(200);
    assert_eq!(r.json()["ownership"]["state"], "ai_owned");
    let r = t.post(&format!("{base}/handback"), &mate, json!({"expectedVersion": v1 + 2})).await;
    r.assert_status(409);
    assert_eq!(r.json()["error"]["details"]["code"], "not_human_owned");
    assert!(t.get("/api/v1/inbox", &owner).await.json()["items"].as_array().unwrap().is_empty());
    let n = chat(&t, &owner, json!({"message": "What are your opening hours?", "conversationId": cid})).await;
    assert_eq!(n["ownership"]["suppressed"], false);

    // takeover of an AI-owned conversation, with a reason; reasons are bounded
    let long = "x".repeat(501);
    t.post(&format!("{base}/takeover"), &owner, json!({"reason": long})).await.assert_status(400);
    let r = t.post(&format!("{base}/takeover"), &owner, json!({"reason": "VIP customer"})).await;
    r.assert_status(200);
    let o = r.json()["ownership"].clone();
    assert_eq!((o["state"].as_str(), o["reason"].as_str()), (Some("human_owned"), Some("VIP customer")));
    assert!(o["takenOverAt"].is_string());
    t.post(&format!("{base}/takeover"), &owner, json!({"bogus": 1})).await.assert_status(400);
    // a body that is not JSON (what a cross-site form can send) is refused
    let r = t
        .send_bytes(
            axum::http::Method::POST,
            &format!("{base}/takeover"),
            &owner,
            br#"{"reason":"csrf"}"#.to_vec(),
            "text/plain",
        )
        .await;
    r.assert_status(415);

    // the audit trail: every action
    let audit = t.get("/api/v1/audit-events?action=hitl.ownership&limit=50", &owner).await.json().to_string();
    for action in ["handoff_requested", "replied", "transferred", "handed_back", "taken_over"] {
        assert!(audit.contains(action), "audit has {action}: {audit}");
    }
    // session only: an API token is refused; a conversation elsewhere is not found
    let token = t.token(&owner).await;
    t.post(&format!("{base}/takeover"), &token, json!({})).await.assert_status(401);
    t.post("/api/v1/conversations/0190b7a2-0000-7000-8000-000000000000/takeover", &owner, json!({}))
        .await
        .assert_status(404);
}

#[tokio::test]
async fn negative_feedback_waits_in_the_inbox_until_resolved() {
    let t = TestApp::new();
    let owner = t.owner().await;
    t.doc(&owner, "Hours", "We are open from nine to five on weekdays.", json!({})).await;
    t.drain();
    let v = chat(&t, &owner, json!({"message": "When are you open?"})).await;
    let (cid, mid) = (v["conversationId"].as_str().unwrap().to_string(), v["messageId"].as_str().unwrap().to_string());
    let path = format!("/api/v1/history/chat/{cid}/messages/{mid}/feedback");
    t.put(&path, &owner, json!({"rating": "sideways"})).await.assert_status(400);
    t.put(&path, &owner, json!({"rating": "down", "comment": "x".repeat(2001)})).await.assert_status(400);
    let r = t.put(&path, &owner, json!({"rating": "down", "comment": "Saturday hours are missing"})).await;
    r.assert_status(200);
    assert_eq!(r.json()["feedback"]["rating"], "down");
    let inbox = t.get("/api/v1/inbox", &owner).await.json();
    assert_eq!(inbox["items"][0]["kind"], "feedback");
    assert_eq!(inbox["items"][0]["feedback"]["comment"], "Saturday hours are missing");
    assert_eq!(inbox["items"][0]["answer"]["id"], mid.as_str());
    // a thumbs up is not an inbox item
    t.put(&path, &owner, json!({"rating": "up"})).await.assert_status(200);
    assert!(t.get("/api/v1/inbox", &owner).await.json()["items"].as_array().unwrap().is_empty());
    t.put(&path, &owner, json!({"rating": "down"})).await.assert_status(200);
    t.post(&format!("/api/v1/inbox/feedback/{mid}/resolve"), &owner, json!({})).await.assert_status(204);
    assert!(t.get("/api/v1/inbox", &owner).await.json()["items"].as_array().unwrap().is_empty());
    t.post(&format!("/api/v1/inbox/feedback/{mid}/resolve"), &owner, json!({})).await.assert_status(404);
    // only answers take feedback; clearing works once
    let history = t.get(&format!("/api/v1/history/chat/{cid}"), &owner).await.json();
    let user_msg = history["messages"][0]["id"].as_str().unwrap();
    t.put(&format!("/api/v1/history/chat/{cid}/messages/{user_msg}/feedback"), &owner, json!({"rating": "up"}))
        .await
        .assert_status(400);
    t.delete(&path, &owner).await.assert_status(204);
    t.delete(&path, &owner).await.assert_status(404);
}
