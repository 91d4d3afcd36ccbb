//! Routines through the API with the built-in answerer (no chat model): structured routines in
//! the agent's draft and revisions, the runtime end to end through REST chat (typed slots,
//! re-asks, digressions, tool steps, bounded loops, handoffs, approvals), decisions and webhook
//! destinations.

use serde_json::{Value, json};

use crate::chat::corpus;
use crate::support::{Auth, TestApp};

async fn chat(t: &TestApp, a: &Auth, message: &str, cid: Option<&str>) -> Value {
    let mut body = json!({"message": message});
    if let Some(c) = cid {
        body["conversationId"] = json!(c);
    }
    let r = t.post("/api/v1/chat", a, body).await;
    r.assert_status(200);
    r.json()
}

fn slot(key: &str, t: &str, required: bool, ordinal: i64) -> Value {
    json!({"stableSlotId": key, "key": key, "type": t, "required": required, "ordinal": ordinal})
}

fn edge(from: &str, to: &str, kind: &str, ordinal: i64, extra: Value) -> Value {
    let mut v = json!({"fromStep": from, "toRef": to, "guardKind": kind, "ordinal": ordinal});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

/// A return flow: order reference, email and purchase date; too old → a refusal terminal; a
/// visitor who wants a person → handoff.
pub(crate) fn returns_routine() -> Value {
    json!({
        "name": "Returns",
        "activation": {"triggerDescription": "customer wants to return an item they bought and get a refund", "priority": 5},
        "slots": [slot("order_ref", "text", true, 1), slot("email", "email", true, 2), slot("purchase_date", "date", true, 3)],
        "steps": [
            {"stableStepId": "collect", "kind": "chat", "ordinal": 1,
             "instruction": "To start your return I need the {{slot.order_ref}}, your {{slot.email}} and the {{slot.purchase_date}}."},
        ],
        "transitions": [
            edge("collect", "handoff", "llm", 1, json!({"guardText": "I want to talk to a human person"})),
            edge("collect", "too_old", "field", 2, json!({"fieldRef": "purchase_date", "fieldOp": "older_than", "fieldValue": 1, "fieldUnit": "years"})),
            edge("collect", "done", "default", 3, json!({})),
        ],
        "terminals": [
            {"stableStepId": "done", "kind": "complete", "ordinal": 1,
             "instruction": "Your return for {{slot.order_ref}} is registered; we will write to {{slot.email}}."},
            {"stableStepId": "too_old", "kind": "complete", "ordinal": 2, "instruction": "Sorry, returns are possible for one year only."},
            {"stableStepId": "handoff", "kind": "handoff", "ordinal": 3},
        ],
    })
}

async fn setup() -> (TestApp, Auth, String) {
    let t = TestApp::new();
    let owner = t.owner().await;
    corpus(&t, &owner).await;
    let agent = t.default_agent(&owner).await;
    (t, owner, agent)
}

async fn add_routine(t: &TestApp, owner: &Auth, agent: &str, def: Value) -> String {
    let r = t.post(&format!("/api/v1/agents/{agent}/routines"), owner, json!({"definition": def})).await;
    r.assert_status(201);
    let id = r.json()["id"].as_str().unwrap().to_string();
    t.publish(owner, agent).await;
    id
}

#[tokio::test]
async fn routines_live_in_the_draft_and_travel_in_revisions() {
    let (t, owner, agent) = setup().await;
    let before = t.get(&format!("/api/v1/agents/{agent}"), &owner).await.json()["draftGeneration"].as_i64().unwrap();
    let r = t.post(&format!("/api/v1/agents/{agent}/routines"), &owner, json!({"definition": returns_routine()})).await;
    r.assert_status(201);
    let v = r.json();
    assert_eq!(
        (v["name"].as_str(), v["version"].as_i64(), v["enabled"].as_bool()),
        (Some("Returns"), Some(1), Some(true))
    );
    let after = t.get(&format!("/api/v1/agents/{agent}"), &owner).await.json()["draftGeneration"].as_i64().unwrap();
    assert!(after > before, "a routine write advances the draft");
    // the same name and version again: 409
    t.post(&format!("/api/v1/agents/{agent}/routines"), &owner, json!({"definition": returns_routine()}))
        .await
        .assert_status(409);
    t.post(&format!("/api/v1/agents/{agent}/routines"), &owner, json!({"version": 2, "definition": returns_routine()}))
        .await
        .assert_status(201);
    // an invalid definition is a located 422
    let mut bad = returns_routine();
    bad["transitions"][0]["toRef"] = json!("nowhere");
    bad["name"] = json!("Bad");
    let r = t.post(&format!("/api/v1/agents/{agent}/routines"), &owner, json!({"definition": bad})).await;
    r.assert_status(422);
    assert_eq!(r.code(), "routine_invalid");
    assert!(r.text().contains("transition:collect->nowhere"), "{}", r.text());
    let list = t.get(&format!("/api/v1/agents/{agent}/routines"), &owner).await.json();
    assert_eq!(list["routines"].as_array().unwrap().len(), 2);
    // a published revision carries them
    t.publish(&owner, &agent).await;
    let a = t.get(&format!("/api/v1/agents/{agent}"), &owner).await.json();
    let rev = a["publishedRevisionId"].as_str().unwrap();
    let snap = t.get(&format!("/api/v1/agents/{agent}/revisions/{rev}"), &owner).await.json();
    assert_eq!(snap["snapshot"]["routines"].as_array().unwrap().len(), 2, "{snap}");
}

#[tokio::test]
async fn a_return_flow_collects_typed_slots_reasks_answers_a_digression_and_completes() {
    let (t, owner, agent) = setup().await;
    add_routine(&t, &owner, &agent, returns_routine()).await;

    let v = chat(&t, &owner, "Hi, I would like to return an item I bought and get my money back", None).await;
    let cid = v["conversationId"].as_str().unwrap().to_string();
    assert_eq!(v["routine"]["name"], "Returns", "{v}");
    assert_eq!(v["routine"]["status"], "waiting_for_input");
    let pending: Vec<&str> =
        v["routine"]["pendingInput"].as_array().unwrap().iter().map(|p| p["key"].as_str().unwrap()).collect();
    assert_eq!(pending, ["order_ref", "email", "purchase_date"]);
    assert!(v["answer"].as_str().unwrap().contains("order ref"), "{v}");

    // a bad email is asked again; the order reference is kept
    let v = chat(&t, &owner, "my order ref is A-123 and my email is bob@example", Some(&cid)).await;
    assert!(v["answer"].as_str().unwrap().contains("valid email"), "{v}");
    let pending: Vec<&str> =
        v["routine"]["pendingInput"].as_array().unwrap().iter().map(|p| p["key"].as_str().unwrap()).collect();
    assert_eq!(pending, ["email", "purchase_date"]);

    // a digression is answered from the documents, then the same slots are asked again
    let v = chat(&t, &owner, "How long does standard shipping take?", Some(&cid)).await;
    let answer = v["answer"].as_str().unwrap();
    assert!(answer.contains("two to four"), "{answer}");
    assert!(answer.contains("To continue"), "{answer}");
    assert_eq!(v["routine"]["status"], "waiting_for_input");

    // the rest in one message: the routine completes with the values in its words
    let recent = (chrono::Utc::now() - chrono::Duration::days(20)).format("%Y-%m-%d").to_string();
    let v = chat(&t, &owner, &format!("bob@example.com, bought on {recent}"), Some(&cid)).await;
    assert_eq!(v["routine"]["status"], "completed", "{v}");
    assert_eq!(v["routine"]["pendingInput"], json!([]));
    assert_eq!(v["answer"], "Your return for A-123 is registered; we will write to bob@example.com.");
    // completed once per conversation: the same request is answered normally now
    let v = chat(&t, &owner, "I want to return an item I bought and get a refund", Some(&cid)).await;
    assert!(v.get("routine").is_none(), "{v}");
}

#[tokio::test]
async fn a_field_guard_ends_early_and_a_visitor_can_ask_for_a_person() {
    let (t, owner, agent) = setup().await;
    add_routine(&t, &owner, &agent, returns_routine()).await;
    let v = chat(
        &t,
        &owner,
        "I want to return an item I bought and get a refund. Order ref Z-9, me@shop.example.com, bought 2020-01-05",
        None,
    )
    .await;
    assert_eq!(v["routine"]["status"], "completed", "{v}");
    assert_eq!(v["answer"], "Sorry, returns are possible for one year only.");

    let v = chat(&t, &owner, "I want to return an item I bought and get a refund", None).await;
    let cid = v["conversationId"].as_str().unwrap().to_string();
    let v = chat(&t, &owner, "I want to talk to a human person please", Some(&cid)).await;
    assert_eq!(v["routine"]["status"], "completed", "{v}");
    assert_eq!(v["ownership"]["state"], "human_owned");
    assert_eq!(v["answer"], "Bringing in a teammate.");
    // the handoff notice carries the routine and what was collected
    let jobs = t.app.db.read(|c| {
        Ok(c.query_row("SELECT payload FROM jobs WHERE kind = 'handoff.notify' ORDER BY id DESC LIMIT 1", [], |r| {
            r.get::<_, String>(0)
        })?)
    });
    let payload: Value = serde_json::from_str(&jobs.unwrap()).unwrap();
    assert_eq!(payload["reason"], "routine_handoff");
    assert_eq!(payload["routine"]["name"], "Returns");
}

/// A refund flow: amount and email; below 50 pays at once, otherwise a manager approves or
/// declines; the completion is exported to a webhook destination.
fn refund_routine(destination: &str) -> Value {
    json!({
        "name": "Refund",
        "activation": {"triggerDescription": "shopper asks for a refund of money on an order"},
        "slots": [slot("amount", "number", true, 1), slot("contact", "email", true, 2)],
        "steps": [
            {"stableStepId": "collect", "kind": "chat", "ordinal": 1,
             "instruction": "Tell me the refund {{slot.amount}} and a {{slot.contact}} address."},
            {"stableStepId": "review", "kind": "approval", "ordinal": 2, "captureKey": "refund_call",
             "instruction": "A manager must check this refund; you will hear back here.",
             "options": [{"id": "approve", "label": "Approve refund"}, {"id": "deny", "label": "Decline"}]},
            {"stableStepId": "pay", "kind": "action", "ordinal": 3, "actionType": "refund.pay", "instruction": "Pay"},
        ],
        "transitions": [
            edge("collect", "pay", "field", 1, json!({"fieldRef": "amount", "fieldOp": "lt", "fieldValue": 50})),
            edge("collect", "review", "default", 2, json!({})),
            edge("review", "pay", "field", 1, json!({"fieldRef": "refund_call.id", "fieldOp": "equals", "fieldValue": "approve"})),
            edge("review", "declined", "field", 2, json!({"fieldRef": "refund_call.id", "fieldOp": "equals", "fieldValue": "deny"})),
            edge("pay", "done", "default", 1, json!({})),
        ],
        "terminals": [
            {"stableStepId": "done", "kind": "complete", "ordinal": 1, "instruction": "Your refund of {{slot.amount}} is on its way."},
            {"stableStepId": "declined", "kind": "complete", "ordinal": 2, "instruction": "We could not approve this refund."},
        ],
        "completionExport": {"enabled": true, "triggerKinds": ["complete"], "destinationRef": destination},
    })
}

async fn run_jobs(app: &std::sync::Arc<steward::app::App>) -> usize {
    let app = app.clone();
    tokio::task::spawn_blocking(move || steward::jobs::run_until_idle(&app).unwrap()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn approvals_gate_a_refund_and_the_completion_export_is_signed() {
    let r = crate::receiver::Receiver::start().await;
    let t = TestApp::with_config(|c| {
        c.delivery.allow = vec!["127.0.0.1/32".into()];
        c.delivery.ca_file = Some(r.ca_file.clone());
        c.encryption_key = Some(steward::config::Secret::new([7u8; 32]));
    });
    let owner = t.owner().await;
    let agent = t.default_agent(&owner).await;
    t.put(&format!("/api/v1/agents/{agent}"), &owner, json!({"webhookExportsEnabled": true})).await.assert_status(200);
    let d = t
        .post(
            "/api/v1/settings/webhook-destinations",
            &owner,
            json!({"name": "Books", "url": format!("{}/hooks/refunds", r.base)}),
        )
        .await;
    d.assert_status(201);
    let dest = d.json();
    let secret = dest["secret"].as_str().unwrap().to_string();
    let dest_id = dest["destination"]["id"].as_str().unwrap().to_string();
    assert!(t.get("/api/v1/settings/webhook-destinations", &owner).await.text().find(&secret).is_none(), "shown once");
    add_routine(&t, &owner, &agent, refund_routine(&dest_id)).await;
    // the destination is in use: it cannot be deleted
    let del = t.delete(&format!("/api/v1/settings/webhook-destinations/{dest_id}"), &owner).await;
    del.assert_status(409);
    assert!(del.text().contains("Refund"), "{}", del.text());

    // a small refund pays at once and exports
    let v = chat(&t, &owner, "I want a refund of 20 for my order, contact me at ann@example.com", None).await;
    assert_eq!(v["routine"]["status"], "completed", "{v}");
    assert_eq!(v["answer"], "Your refund of 20 is on its way.");
    run_jobs(&t.app).await;
    r.wait_for(1).await;
    let hit = r.hits().into_iter().find(|h| h.path == "/hooks/refunds").unwrap();
    assert_eq!(hit.body["data"], json!({"amount": 20, "contact": "ann@example.com"}));
    assert_eq!(hit.body["source"]["terminalKind"], "complete");
    let ts = hit.headers["x-service-timestamp"].to_str().unwrap().to_string();
    let sig = hit.headers["x-service-signature"].to_str().unwrap().to_string();
    {
        use hmac::{KeyInit, Mac};
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(format!("{ts}.").as_bytes());
        mac.update(&hit.raw);
        assert_eq!(
            sig,
            format!("sha256={}", hex::encode(mac.finalize().into_bytes())),
            "the receiver verifies the signature"
        );
    }
    assert!(hit.headers.get("idempotency-key").is_some());
    let dests = t.get("/api/v1/settings/webhook-destinations", &owner).await.json();
    assert_eq!(dests["destinations"][0]["lastDeliveryStatus"], "success");

    // a large refund waits for a decision
    let v = chat(&t, &owner, "I want a refund of 120 please, my email is bo@example.com", None).await;
    let cid = v["conversationId"].as_str().unwrap().to_string();
    assert_eq!(v["routine"]["status"], "waiting_for_approval", "{v}");
    assert_eq!(v["answer"], "A manager must check this refund; you will hear back here.");
    assert_eq!(v["ownership"]["state"], "ai_owned");
    let open = t.get("/api/v1/decisions", &owner).await.json();
    let d = &open["decisions"][0];
    let handle = d["handle"].as_str().unwrap().to_string();
    let hash = d["contentHash"].as_str().unwrap().to_string();
    assert!(handle.starts_with("pd_"));
    let inbox = t.get("/api/v1/inbox", &owner).await.json();
    assert_eq!(inbox["approvals"], 1, "{inbox}");
    assert_eq!(inbox["items"][0]["kind"], "approval");
    assert_eq!(inbox["items"][0]["decision"]["handle"], handle.as_str());
    assert_eq!(inbox["items"][0]["decision"]["routineName"], "Refund");
    assert_eq!(d["options"].as_array().unwrap().len(), 2);
    // while waiting, the visitor is told so
    let w = chat(&t, &owner, "any news?", Some(&cid)).await;
    assert_eq!(w["routine"]["status"], "waiting_for_approval");
    // the checks in order
    let resolve = |h: &str, body: Value| {
        let path = format!("/api/v1/agents/{agent}/decisions/{h}/resolve");
        let (t, owner) = (&t, &owner);
        async move { t.post(&path, owner, body).await }
    };
    resolve("pd_nope", json!({"optionId": "approve", "contentHash": hash})).await.assert_status(404);
    let r409 = resolve(&handle, json!({"optionId": "approve", "contentHash": "0".repeat(64)})).await;
    r409.assert_status(409);
    assert!(r409.text().contains("stale_proposal"));
    let r422 = resolve(&handle, json!({"optionId": "maybe", "contentHash": hash})).await;
    r422.assert_status(422);
    assert!(r422.text().contains("invalid_option"));
    let ok = resolve(&handle, json!({"optionId": "approve", "contentHash": hash})).await;
    ok.assert_status(200);
    assert_eq!(ok.json()["resumed"], true);
    resolve(&handle, json!({"optionId": "approve", "contentHash": hash})).await.assert_status(409);
    let h = t.get(&format!("/api/v1/history/chat/{cid}"), &owner).await.json();
    let last = h["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["text"], "Your refund of 120 is on its way.", "{h}");
    assert_eq!(t.get("/api/v1/decisions", &owner).await.json()["decisions"], json!([]));
    // the gated action ran once, as an outbox action
    run_jobs(&t.app).await;
    let audit = t.get("/api/v1/audit-events?action=routine.action", &owner).await.json();
    assert_eq!(audit["events"].as_array().map(|a| a.len()).unwrap_or(0), 2, "{audit}");

    // rejected: the rejection branch
    let v = chat(&t, &owner, "I need a refund of 300, email cy@example.com", None).await;
    assert_eq!(v["routine"]["status"], "waiting_for_approval");
    let d = t.get("/api/v1/decisions", &owner).await.json()["decisions"][0].clone();
    let ok = resolve(d["handle"].as_str().unwrap(), json!({"optionId": "deny", "contentHash": d["contentHash"]})).await;
    ok.assert_status(200);
    let cid = v["conversationId"].as_str().unwrap();
    let h = t.get(&format!("/api/v1/history/chat/{cid}"), &owner).await.json();
    assert_eq!(h["messages"].as_array().unwrap().last().unwrap()["text"], "We could not approve this refund.");
}

#[tokio::test]
async fn a_tool_step_writes_an_output_slot_and_a_bounded_loop_gives_up() {
    let (t, owner, agent) = setup().await;
    // a retrieval skill the routine calls by name
    t.post(
        &format!("/api/v1/agents/{agent}/skills"),
        &owner,
        json!({"name": "policy_lookup", "capability": "retrieve", "invocationMode": "routine_named"}),
    )
    .await
    .assert_status(201);
    let def = json!({
        "name": "Shipping check",
        "activation": {"triggerDescription": "customer asks to check the shipping policy for their parcel"},
        "slots": [slot("code", "text", true, 1), slot("policy", "text", false, 2)],
        "steps": [
            {"stableStepId": "lookup", "kind": "tool", "ordinal": 1, "instruction": "Look it up", "toolRef": "policy_lookup",
             "metadata": {"inputBindings": [{"kind": "literal", "name": "query", "value": "How long does standard shipping take?"}],
                          "outputAssignments": [{"output": "answer", "variable": "policy"}]}},
            {"stableStepId": "verify", "kind": "chat", "ordinal": 2, "instruction": "Policy: {{slot.policy}} Now send the six letter {{slot.code}}."},
        ],
        "transitions": [
            edge("lookup", "verify", "default", 1, json!({})),
            edge("verify", "done", "field", 1, json!({"fieldRef": "code", "fieldOp": "equals", "fieldValue": "ABCDEF"})),
            edge("verify", "verify", "counter", 2, json!({"counterLimit": 2})),
            edge("verify", "handoff", "default", 3, json!({})),
        ],
        "terminals": [
            {"stableStepId": "done", "kind": "complete", "ordinal": 1, "instruction": "Verified."},
            {"stableStepId": "handoff", "kind": "handoff", "ordinal": 2},
        ],
    });
    let r = t.post(&format!("/api/v1/agents/{agent}/routines"), &owner, json!({"definition": def})).await;
    assert!(r.status.as_u16() == 201, "{}", r.text());
    t.publish(&owner, &agent).await;
    let v = chat(&t, &owner, "Please check the shipping policy for my parcel", None).await;
    let cid = v["conversationId"].as_str().unwrap().to_string();
    assert_eq!(v["routine"]["toolName"], "policy_lookup", "{v}");
    assert!(v["answer"].as_str().unwrap().contains("two to four"), "the tool's output fills the slot: {v}");
    // wrong codes loop back at most twice, then the default exit hands off
    let v = chat(&t, &owner, "code XXXXXX", Some(&cid)).await;
    assert_eq!(v["routine"]["status"], "waiting_for_input", "{v}");
    let v = chat(&t, &owner, "code YYYYYY", Some(&cid)).await;
    assert_eq!(v["routine"]["status"], "completed", "{v}");
    assert_eq!(v["ownership"]["state"], "human_owned");
}

#[tokio::test]
async fn with_a_chat_model_the_model_judges_triggers_and_its_decision_is_traced() {
    use crate::fake_llm::{FakeProvider, openai_stream};
    let fake = FakeProvider::start(|r| {
        let system = r.body["messages"][0]["content"].as_str().unwrap_or("").to_string();
        if system.contains("numbered condition") {
            // the visitor's wording shares nothing with the trigger; the model still sees it
            return openai_stream("{\"scores\": [{\"index\": 0, \"confidence\": 0.93}]}");
        }
        openai_stream("COVERAGE: answered sufficient_evidence\nFine.")
    });
    let t = crate::chat::with_model(&fake);
    let owner = t.owner().await;
    let agent = t.default_agent(&owner).await;
    add_routine(&t, &owner, &agent, returns_routine()).await;
    let r = t
        .post(
            "/api/v1/chat",
            &owner,
            json!({"message": "this jacket is the wrong size, send it back", "includeDebug": true}),
        )
        .await;
    r.assert_status(200);
    let v = r.json();
    assert_eq!(v["routine"]["name"], "Returns", "{v}");
    let trace = v["debug"]["turnTrace"].to_string();
    assert!(trace.contains("\"activated\""), "{trace}");
    assert!(fake.requests.lock().iter().any(|q| q.body.to_string().contains("numbered condition")));
}

const REFUND_MD: &str = "---
name: Refund over threshold
vars: order_ref:text:mutable, amount:number, contact:email
trigger: shopper asks for money back on an order
end: done (\"Your refund request is closed.\")
reentry: always
---
# Collect
Ask for the @order_ref, the refund @amount and a @contact address.
[if amount < 50]-> step:pay
# Review
Say a manager must check the refund. [decision refund_call: approve=\"Approve refund\", deny=\"Decline\" (\"Explain why\")]
[if refund_call = approve] -> step:pay
[if refund_call = deny] -> end:declined (\"We could not approve this refund.\")
# Pay
[action \"contact.send\"]
";

const REFUND_CANONICAL: &str = "---
grammar: 1
name: Refund over threshold
trigger: shopper asks for money back on an order
reentry: always
end: done (\"Your refund request is closed.\")
vars: order_ref:text:mutable, amount:number, contact:email
---
# Collect
Ask for the @order_ref, the refund @amount and a @contact address.
[if amount < 50] -> step:pay
# Review
Say a manager must check the refund. [decision refund_call: approve=\"Approve refund\", deny=\"Decline\" (\"Explain why\")]
[if refund_call = approve] -> step:pay
[if refund_call = deny] -> end:declined (\"We could not approve this refund.\")
# Pay
[action contact.send]
";

#[tokio::test]
async fn portable_markdown_creates_exports_updates_and_canonicalizes() {
    let (t, owner, agent) = setup().await;
    // canonicalize: grammar and formatting only
    let r = t
        .post("/api/v1/routines/portable/canonicalize", &owner, json!({"grammarVersion": 1, "content": REFUND_MD}))
        .await;
    r.assert_status(200);
    assert_eq!(r.json()["content"], REFUND_CANONICAL);
    let r = t
        .post("/api/v1/routines/portable/canonicalize", &owner, json!({"grammarVersion": 2, "content": REFUND_MD}))
        .await;
    r.assert_status(400);
    assert_eq!(r.json()["error"]["details"]["diagnostics"][0]["code"], "unsupported_grammar_version");
    let r = t
        .post(
            "/api/v1/routines/portable/canonicalize",
            &owner,
            json!({"grammarVersion": 1, "content": "---\nname: x\n---\nsee [FAQ]\n"}),
        )
        .await;
    r.assert_status(400);
    let d = &r.json()["error"]["details"]["diagnostics"][0];
    assert_eq!((d["line"].as_i64(), d["code"].as_str()), (Some(4), Some("unknown_bracket_token")));
    t.post("/api/v1/routines/portable/canonicalize", &owner, json!({"grammarVersion": 1, "content": "x", "extra": 1}))
        .await
        .assert_status(400);

    // create → GET portable returns the canonical document byte for byte
    let r = t
        .post(
            &format!("/api/v1/agents/{agent}/routines/portable"),
            &owner,
            json!({"grammarVersion": 1, "content": REFUND_MD}),
        )
        .await;
    r.assert_status(201);
    let rid = r.json()["routineId"].as_str().unwrap().to_string();
    let g = t.get(&format!("/api/v1/agents/{agent}/routines/{rid}/portable"), &owner).await;
    g.assert_status(200);
    assert_eq!(g.json()["content"], REFUND_CANONICAL);
    // the same name and version again: 409
    t.post(
        &format!("/api/v1/agents/{agent}/routines/portable"),
        &owner,
        json!({"grammarVersion": 1, "content": REFUND_MD}),
    )
    .await
    .assert_status(409);
    // the structured form is the compiled one
    let s = t.get(&format!("/api/v1/agents/{agent}/routines/{rid}"), &owner).await.json();
    let steps: Vec<(&str, &str)> = s["definition"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["stableStepId"].as_str().unwrap(), x["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(steps, [("collect", "chat"), ("review", "approval"), ("pay", "action")]);
    // PUT: a new trigger; the end terminal's message is kept when the document omits `end`
    let edited = REFUND_CANONICAL
        .replace("trigger: shopper asks for money back on an order\n", "trigger: shopper wants a refund\n")
        .replace("end: done (\"Your refund request is closed.\")\n", "");
    let r = t
        .put(
            &format!("/api/v1/agents/{agent}/routines/{rid}/portable"),
            &owner,
            json!({"grammarVersion": 1, "content": edited}),
        )
        .await;
    r.assert_status(200);
    let content = r.json()["content"].as_str().unwrap().to_string();
    assert!(
        content.contains("trigger: shopper wants a refund")
            && content.contains("end: done (\"Your refund request is closed.\")"),
        "{content}"
    );
    // a routine markdown cannot express: 422 routine_not_portable
    let mut def = returns_routine();
    def["name"] = json!("Gated");
    def["activation"]["gateRef"] = json!("some_gate");
    let r = t.post(&format!("/api/v1/agents/{agent}/routines"), &owner, json!({"definition": def})).await;
    if r.status.as_u16() == 201 {
        let gid = r.json()["id"].as_str().unwrap().to_string();
        let g = t.get(&format!("/api/v1/agents/{agent}/routines/{gid}/portable"), &owner).await;
        g.assert_status(422);
        assert_eq!(g.code(), "routine_not_portable");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_resolves_of_one_decision_one_wins() {
    let t = TestApp::with_config(|c| c.encryption_key = Some(steward::config::Secret::new([7u8; 32])));
    let owner = t.owner().await;
    let agent = t.default_agent(&owner).await;
    let mut def = refund_routine("unused");
    def.as_object_mut().unwrap().remove("completionExport");
    add_routine(&t, &owner, &agent, def).await;
    let v = chat(&t, &owner, "I want a refund of 500, email dee@example.com", None).await;
    assert_eq!(v["routine"]["status"], "waiting_for_approval", "{v}");
    let d = t.get("/api/v1/decisions", &owner).await.json()["decisions"][0].clone();
    let path = format!("/api/v1/agents/{agent}/decisions/{}/resolve", d["handle"].as_str().unwrap());
    let body = json!({"optionId": "approve", "contentHash": d["contentHash"]});
    let (a, b) = tokio::join!(t.post(&path, &owner, body.clone()), t.post(&path, &owner, body.clone()));
    let mut statuses = [a.status.as_u16(), b.status.as_u16()];
    statuses.sort();
    assert_eq!(statuses, [200, 409], "{} / {}", a.text(), b.text());
    // one resumed turn: the routine's closing line is in the conversation once
    let cid = v["conversationId"].as_str().unwrap();
    let h = t.get(&format!("/api/v1/history/chat/{cid}"), &owner).await.json();
    let closing =
        h["messages"].as_array().unwrap().iter().filter(|m| m["text"] == "Your refund of 500 is on its way.").count();
    assert_eq!(closing, 1);
}

/// kill -9 between a resolve's work and its commit, then the resolve again: the gated action
/// runs once and the decision resolves once.
#[tokio::test(flavor = "multi_thread")]
async fn a_crash_before_the_resolve_commits_leaves_it_pending_and_the_retry_acts_once() {
    use reqwest::Method;
    let dir = tempfile::tempdir().unwrap();
    let token = crate::e2e::bootstrap(dir.path());
    let key = "11".repeat(32);
    let env = [("CONNECTOR_ENCRYPTION_KEY", key.as_str())];
    let server = crate::e2e::Server::start(dir.path(), &env);
    let api = crate::e2e::Api::new(&server.base, &token);
    let agents = api.call(Method::GET, "/api/v1/agents", None).await;
    let agent = agents["agents"][0]["id"].as_str().unwrap().to_string();
    let mut def = refund_routine("unused");
    def.as_object_mut().unwrap().remove("completionExport");
    api.call(Method::POST, &format!("/api/v1/agents/{agent}/routines"), Some(json!({"definition": def}))).await;
    api.configure_default_agent(json!({})).await;
    let v = api
        .call(Method::POST, "/api/v1/chat", Some(json!({"message": "I want a refund of 900, email eve@example.com"})))
        .await;
    assert_eq!(v["routine"]["status"], "waiting_for_approval", "{v}");
    let cid = v["conversationId"].as_str().unwrap().to_string();
    let d = api.call(Method::GET, "/api/v1/decisions", None).await["decisions"][0].clone();
    let path = format!("/api/v1/agents/{agent}/decisions/{}/resolve", d["handle"].as_str().unwrap());
    let body = json!({"optionId": "approve", "contentHash": d["contentHash"]});
    server.terminate();

    // the process dies after the resume's work, before its commit
    let crashing =
        crate::e2e::Server::start(dir.path(), &[env[0], ("STEWARD_TEST_FAILPOINT", "decision.before_commit")]);
    let r =
        reqwest::Client::new().post(format!("{}{path}", crashing.base)).bearer_auth(&token).json(&body).send().await;
    assert!(r.is_err(), "the connection dies with the process");
    let mut crashing = crashing;
    let _ = crashing.child.wait();

    let server = crate::e2e::Server::start(dir.path(), &env);
    let api = crate::e2e::Api::new(&server.base, &token);
    let pending = api.call(Method::GET, "/api/v1/decisions", None).await;
    assert_eq!(pending["decisions"].as_array().unwrap().len(), 1, "still pending after the crash");
    let r = api.call(Method::POST, &path, Some(body.clone())).await;
    assert_eq!(r["resumed"], true);
    // the action job is queued once, and runs once
    let h = api.call(Method::GET, &format!("/api/v1/history/chat/{cid}"), None).await;
    let closing =
        h["messages"].as_array().unwrap().iter().filter(|m| m["text"] == "Your refund of 900 is on its way.").count();
    assert_eq!(closing, 1, "{h}");
    let mut actions = 0;
    for _ in 0..200 {
        let audit = api.call(Method::GET, "/api/v1/audit-events?action=routine.action", None).await;
        actions = audit["events"].as_array().map(|a| a.len()).unwrap_or(0);
        if actions > 0 {
            break;
        }
        api.call(Method::GET, "/api/v1/document/progress?waitMs=50", None).await;
    }
    assert_eq!(actions, 1, "the gated action ran exactly once");
    assert!(server.terminate().success());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_past_its_deadline_takes_the_timeout_option() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let agent = t.default_agent(&owner).await;
    let mut def = refund_routine("unused");
    def.as_object_mut().unwrap().remove("completionExport");
    def["steps"][1]["metadata"] = json!({"deadlineSecs": 3600, "timeoutOption": "deny"});
    add_routine(&t, &owner, &agent, def).await;
    let v = chat(&t, &owner, "I want a refund of 400, email gil@example.com", None).await;
    assert_eq!(v["routine"]["status"], "waiting_for_approval", "{v}");
    let cid = v["conversationId"].as_str().unwrap().to_string();
    let d = t.get("/api/v1/decisions", &owner).await.json()["decisions"][0].clone();
    assert!(d["deadline"].is_string(), "{d}");
    // before the deadline nothing happens
    run_jobs(&t.app).await;
    assert_eq!(t.get("/api/v1/decisions", &owner).await.json()["decisions"].as_array().unwrap().len(), 1);
    t.clock.advance_ms(3_601_000);
    run_jobs(&t.app).await;
    assert_eq!(t.get("/api/v1/decisions", &owner).await.json()["decisions"], json!([]));
    let h = t.get(&format!("/api/v1/history/chat/{cid}"), &owner).await.json();
    assert_eq!(h["messages"].as_array().unwrap().last().unwrap()["text"], "We could not approve this refund.");
}

#[tokio::test]
async fn directives_scoped_to_a_routine_guide_its_replies_and_nothing_else() {
    use crate::fake_llm::{FakeProvider, openai_stream};
    let fake = FakeProvider::start(|r| {
        let body = r.body.to_string();
        if body.contains("numbered condition") {
            let c = if body.contains("return my jacket") { 0.95 } else { 0.05 };
            return openai_stream(&format!("{{\"scores\": [{{\"index\": 0, \"confidence\": {c}}}]}}"));
        }
        if body.contains("guided flow") {
            return openai_stream(
                "Dear customer, to start your return please send the order ref, your email and the purchase date.",
            );
        }
        openai_stream("COVERAGE: answered sufficient_evidence\nFine.")
    });
    let t = crate::chat::with_model(&fake);
    let owner = t.owner().await;
    let agent = t.default_agent(&owner).await;
    let r = t.post(&format!("/api/v1/agents/{agent}/routines"), &owner, json!({"definition": returns_routine()})).await;
    r.assert_status(201);
    let rid = r.json()["id"].as_str().unwrap().to_string();
    t.post(
        &format!("/api/v1/agents/{agent}/directives"),
        &owner,
        json!({"name": "polite-returns", "action": "Address the visitor as 'dear customer'.", "tags": [format!("routine:{rid}")]}),
    )
    .await
    .assert_status(201);
    t.publish(&owner, &agent).await;
    let v = chat(&t, &owner, "I want to return my jacket", None).await;
    assert_eq!(v["routine"]["name"], "Returns", "{v}");
    assert!(v["answer"].as_str().unwrap().starts_with("Dear customer"), "{v}");
    // outside the routine the directive does not apply
    let requests_before = fake.requests.lock().len();
    let _ = chat(&t, &owner, "How long does shipping take?", None).await;
    let after: Vec<String> = fake.requests.lock()[requests_before..].iter().map(|q| q.body.to_string()).collect();
    assert!(after.iter().all(|b| !b.contains("dear customer")), "the routine's directive leaked into a normal turn");
}

#[tokio::test]
async fn a_routine_left_idle_for_a_day_is_abandoned() {
    let (t, owner, agent) = setup().await;
    add_routine(&t, &owner, &agent, returns_routine()).await;
    let v = chat(&t, &owner, "I want to return an item I bought and get a refund", None).await;
    let cid = v["conversationId"].as_str().unwrap().to_string();
    assert_eq!(v["routine"]["status"], "waiting_for_input");
    t.clock.advance_ms(25 * 3600 * 1000);
    let v = chat(&t, &owner, "How long does standard shipping take?", Some(&cid)).await;
    assert_eq!(v["routine"]["status"], "abandoned", "{v}");
    assert_eq!(v["routine"]["pendingInput"], json!([]));
    assert!(v["answer"].as_str().unwrap().contains("two to four"), "answered normally: {v}");
    let v = chat(&t, &owner, "And express?", Some(&cid)).await;
    assert!(v.get("routine").is_none(), "the abandoned routine stays behind: {v}");
}

#[tokio::test]
async fn a_mutable_slot_can_be_changed_and_its_guards_decide_again() {
    let (t, owner, agent) = setup().await;
    let mut amount = slot("amount", "number", true, 1);
    amount["mutable"] = json!(true);
    let def = json!({
        "name": "Refund size",
        "activation": {"triggerDescription": "shopper asks for a refund of money on an order"},
        "slots": [amount, slot("ok", "boolean", true, 2), slot("contact", "email", true, 3)],
        "steps": [
            {"stableStepId": "collect", "kind": "chat", "ordinal": 1, "instruction": "How much is the refund {{slot.amount}}?"},
            {"stableStepId": "small", "kind": "chat", "ordinal": 2, "instruction": "A small refund of {{slot.amount}}. Shall I pay it now {{slot.ok}}?"},
            {"stableStepId": "big", "kind": "chat", "ordinal": 3, "instruction": "A refund of {{slot.amount}} needs a manager; your {{slot.contact}}?"},
        ],
        "transitions": [
            edge("collect", "small", "field", 1, json!({"fieldRef": "amount", "fieldOp": "lt", "fieldValue": 50})),
            edge("collect", "big", "default", 2, json!({})),
            edge("small", "done", "default", 1, json!({})),
            edge("big", "done", "default", 1, json!({})),
        ],
        "terminals": [{"stableStepId": "done", "kind": "complete", "ordinal": 1, "instruction": "Done."}],
    });
    add_routine(&t, &owner, &agent, def).await;
    let v = chat(&t, &owner, "I want a refund of money on my order, it was 20", None).await;
    let cid = v["conversationId"].as_str().unwrap().to_string();
    assert!(v["answer"].as_str().unwrap().starts_with("A small refund of 20"), "{v}");
    let v = chat(&t, &owner, "sorry, change the amount to 80", Some(&cid)).await;
    assert!(
        v["answer"].as_str().unwrap().starts_with("A refund of 80 needs a manager"),
        "the guard decided again: {v}"
    );
    let pending: Vec<&str> =
        v["routine"]["pendingInput"].as_array().unwrap().iter().map(|p| p["key"].as_str().unwrap()).collect();
    assert_eq!(pending, ["ok", "contact"], "every required slot not given yet: {v}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_decision_made_while_a_person_owns_the_conversation_waits_for_the_hand_back() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let agent = t.default_agent(&owner).await;
    let mut def = refund_routine("unused");
    def.as_object_mut().unwrap().remove("completionExport");
    add_routine(&t, &owner, &agent, def).await;
    let v = chat(&t, &owner, "I want a refund of 250, email hal@example.com", None).await;
    assert_eq!(v["routine"]["status"], "waiting_for_approval", "{v}");
    let cid = v["conversationId"].as_str().unwrap().to_string();
    t.post(&format!("/api/v1/conversations/{cid}/takeover"), &owner, json!({})).await.assert_status(200);
    let d = t.get("/api/v1/decisions", &owner).await.json()["decisions"][0].clone();
    let r = t
        .post(
            &format!("/api/v1/agents/{agent}/decisions/{}/resolve", d["handle"].as_str().unwrap()),
            &owner,
            json!({"optionId": "approve", "contentHash": d["contentHash"]}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(r.json()["resumed"], false, "nothing is said over the operator's head");
    let h = t.get(&format!("/api/v1/history/chat/{cid}"), &owner).await.json();
    assert!(h["messages"].as_array().unwrap().iter().all(|m| m["text"] != "Your refund of 250 is on its way."));
    let version = h["ownership"]["version"].as_i64().unwrap();
    t.post(&format!("/api/v1/conversations/{cid}/handback"), &owner, json!({"expectedVersion": version}))
        .await
        .assert_status(200);
    let v = chat(&t, &owner, "any news on my refund?", Some(&cid)).await;
    assert_eq!(v["answer"], "Your refund of 250 is on its way.", "{v}");
    assert_eq!(v["routine"]["status"], "completed");
}

#[tokio::test(flavor = "multi_thread")]
async fn coming_back_to_an_approval_asks_for_a_new_decision() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let agent = t.default_agent(&owner).await;
    let mut amount = slot("amount", "number", true, 1);
    amount["mutable"] = json!(true);
    let def = json!({
        "name": "Refund",
        "activation": {"triggerDescription": "shopper asks for a refund of money on an order"},
        "slots": [amount, slot("ok", "boolean", true, 2)],
        "steps": [
            {"stableStepId": "collect", "kind": "chat", "ordinal": 1, "instruction": "How much {{slot.amount}}?"},
            {"stableStepId": "review", "kind": "approval", "ordinal": 2, "captureKey": "call", "instruction": "A manager checks this.",
             "options": [{"id": "approve", "label": "Approve"}, {"id": "deny", "label": "Decline"}]},
            {"stableStepId": "confirm", "kind": "chat", "ordinal": 3, "instruction": "Approved. Pay {{slot.amount}} now {{slot.ok}}?"},
        ],
        "transitions": [
            edge("collect", "done", "field", 1, json!({"fieldRef": "amount", "fieldOp": "lt", "fieldValue": 10})),
            edge("collect", "review", "default", 2, json!({})),
            edge("review", "confirm", "field", 1, json!({"fieldRef": "call.id", "fieldOp": "equals", "fieldValue": "approve"})),
            edge("review", "done", "field", 2, json!({"fieldRef": "call.id", "fieldOp": "equals", "fieldValue": "deny"})),
            edge("confirm", "done", "default", 1, json!({})),
        ],
        "terminals": [{"stableStepId": "done", "kind": "complete", "ordinal": 1, "instruction": "Done."}],
    });
    add_routine(&t, &owner, &agent, def).await;
    let v = chat(&t, &owner, "I want a refund of money on my order, 100", None).await;
    assert_eq!(v["routine"]["status"], "waiting_for_approval", "{v}");
    let cid = v["conversationId"].as_str().unwrap().to_string();
    let d = t.get("/api/v1/decisions", &owner).await.json()["decisions"][0].clone();
    let path = format!("/api/v1/agents/{agent}/decisions/{}/resolve", d["handle"].as_str().unwrap());
    t.post(&path, &owner, json!({"optionId": "approve", "contentHash": d["contentHash"]})).await.assert_status(200);
    // the visitor raises the amount after the approval: the routine goes back, and the approval
    // is asked for again rather than reused
    let v = chat(&t, &owner, "actually, change the amount to 900", Some(&cid)).await;
    assert_eq!(v["routine"]["status"], "waiting_for_approval", "{v}");
    assert_eq!(t.get("/api/v1/decisions", &owner).await.json()["decisions"].as_array().unwrap().len(), 1);
}
