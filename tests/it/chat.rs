//! The answer turn: the reply envelope, citations from retrieved chunks only, declines and
//! grounding gaps, retrieval-miss handoff, human-owned suppression, directives and bindings,
//! supersede, streaming, revision pinning, test executions, quality filters and retrieval-only
//! answers.

use std::sync::mpsc;

use parking_lot::Mutex;
use serde_json::{Value, json};
use steward::config::Secret;

use crate::fake_llm::{FakeProvider, openai_stream};
use crate::support::{Auth, TestApp};

const KEY: &str = "sk-chat-test-51c0ffee";

const RETURNS: &str = "Returns and refunds. Items can be returned within 30 days of delivery for a full refund. \
    Refunds are paid to the original payment method within five business days. Sale items cannot be returned.";
const SHIPPING: &str = "Shipping. Orders ship from our warehouse in Rotterdam. Standard shipping takes two to four working days. \
    Express delivery arrives the next working day when ordered before 14:00.";
const CARE: &str =
    "Product care. Wash cotton shirts at 30 degrees and hang them to dry. Wool sweaters should be washed by hand.";

pub(crate) async fn corpus(t: &TestApp, a: &Auth) -> Vec<String> {
    let ids = vec![
        t.doc(a, "Returns policy", RETURNS, json!({"topic": "returns"})).await,
        t.doc(a, "Shipping", SHIPPING, json!({"topic": "shipping"})).await,
        t.doc(a, "Care guide", CARE, json!({"topic": "care"})).await,
    ];
    t.drain();
    ids
}

async fn chat(t: &TestApp, a: &Auth, body: Value) -> Value {
    let r = t.post("/api/v1/chat", a, body).await;
    r.assert_status(200);
    r.json()
}

/// Publishes the agent's current draft.
async fn publish(t: &TestApp, a: &Auth, agent: &str) {
    t.publish(a, agent).await;
}

async fn trace(t: &TestApp, a: &Auth, id: &str) -> Value {
    let r = t.get(&format!("/api/v1/traces/{id}"), a).await;
    r.assert_status(200);
    r.json()
}

fn stage<'a>(trace: &'a Value, kind: &str) -> &'a Value {
    trace["trace"]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == kind)
        .unwrap_or_else(|| panic!("no stage {kind}"))
}

/// A test app whose chat slot is an OpenAI-compatible fake.
pub(crate) fn with_model(fake: &FakeProvider) -> TestApp {
    let url = fake.url.clone();
    TestApp::with_config(move |c| {
        c.llm.env_keys.insert("openai".into(), Secret::new(KEY.into()));
        c.llm.base_urls.insert("openai".into(), url.clone());
        c.llm.chat =
            steward::config::LlmSlotDefault { provider: Some("openai".into()), model: Some("gpt-test".into()) };
    })
}

#[tokio::test]
async fn a_grounded_answer_has_the_documented_envelope() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let docs = corpus(&t, &owner).await;
    let v = chat(&t, &owner, json!({"message": "How many days do I have to return an item?"})).await;
    assert!(v["answer"].as_str().unwrap().contains("30 days"), "{v}");
    assert_eq!(v["citations"][0]["documentId"], docs[0].as_str());
    assert_eq!(v["answerCoverage"]["availability"], "assessed");
    assert_eq!(v["ownership"], json!({"state": "ai_owned", "suppressed": false}));
    assert_eq!(v["diagnostics"]["retrievalInvoked"], true);
    assert_eq!(v["answerCoverage"]["originatingTurnId"], v["traceId"]);
    let redacted = json!({
        "keys": v.as_object().unwrap().keys().collect::<Vec<_>>(),
        "citationKeys": v["citations"][0].as_object().unwrap().keys().collect::<Vec<_>>(),
        "answerCoverage": {"availability": v["answerCoverage"]["availability"], "coverage": v["answerCoverage"]["coverage"], "reason": v["answerCoverage"]["reason"],
                           "keys": v["answerCoverage"].as_object().unwrap().keys().collect::<Vec<_>>()},
        "ownership": v["ownership"],
        "segmentKeys": v["answerSegments"][0].as_object().unwrap().keys().collect::<Vec<_>>(),
        "diagnosticsKeys": v["diagnostics"].as_object().unwrap().keys().collect::<Vec<_>>(),
    });
    insta::assert_json_snapshot!("chat_reply_shape", redacted);
    // the conversation and both messages are kept, with the revision the conversation started on
    let cid = v["conversationId"].as_str().unwrap();
    let conv = t.get(&format!("/api/v1/history/chat/{cid}"), &owner).await.json();
    assert_eq!(conv["messages"].as_array().unwrap().len(), 2);
    assert_eq!(conv["messages"][0]["role"], "user");
    assert_eq!(conv["messages"][1]["citations"], v["citations"]);
    assert!(conv["revisionId"].is_string());
    // the trace holds ids, decisions and timings, never the text
    let tr = trace(&t, &owner, v["traceId"].as_str().unwrap()).await;
    let text = tr.to_string();
    assert!(!text.contains("return an item") && !text.contains("original payment method"), "no content in traces");
    let kinds: Vec<&str> =
        tr["trace"]["stages"].as_array().unwrap().iter().map(|s| s["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        vec![
            "message",
            "gather",
            "routine_pass",
            "turn_interpretation",
            "directive_steering",
            "retrieval_fanout",
            "context_variables",
            "skill_selection",
            "compose",
            "coverage_assessment",
            "persist"
        ]
    );
    // every citation points at a chunk retrieved this turn
    let retrieved: Vec<&str> = stage(&tr, "retrieval_fanout")["outputs"]["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["chunkId"].as_str().unwrap())
        .collect();
    for c in v["citations"].as_array().unwrap() {
        assert!(retrieved.contains(&c["chunkId"].as_str().unwrap()));
    }
    // the default agent is reachable by id too, and the agent-scoped route is the same turn engine
    let agent = t.default_agent(&owner).await;
    let r = t
        .post(
            &format!("/api/v1/agents/{agent}/chat"),
            &owner,
            json!({"message": "How long does standard shipping take?", "conversationId": cid}),
        )
        .await;
    r.assert_status(200);
    assert!(r.json()["answer"].as_str().unwrap().contains("two to four working days"), "{}", r.text());
}

#[tokio::test]
async fn an_empty_workspace_declines_briefly_as_a_grounding_gap() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let v = chat(&t, &owner, json!({"message": "What is the warranty on the espresso machine?"})).await;
    assert_eq!(v["answer"], "I couldn't find an answer to that in the available documents.");
    assert_eq!(v["citations"], json!([]));
    assert_eq!(
        (v["answerCoverage"]["coverage"].as_str(), v["answerCoverage"]["reason"].as_str()),
        (Some("unanswered"), Some("insufficient_evidence"))
    );
    assert_eq!(v["diagnostics"]["outcome"], "no_context");
    assert_eq!(v["diagnostics"]["grounding"]["verdict"], "no_support");
    // a greeting is a direct reply: no retrieval, coverage not recorded
    let v = chat(&t, &owner, json!({"message": "Hello!"})).await;
    assert_eq!(v["diagnostics"]["retrievalInvoked"], false);
    assert_eq!(v["answerCoverage"]["availability"], "not_recorded");
    assert_eq!(v["answerCoverage"]["coverage"], Value::Null);
    // an off-topic question over real documents declines too
    corpus(&t, &owner).await;
    let v = chat(&t, &owner, json!({"message": "Which airline flies to Lisbon on Sundays?"})).await;
    assert_eq!(v["diagnostics"]["outcome"], "no_context", "{v}");
}

#[tokio::test]
async fn a_retrieval_miss_hands_off_and_a_human_owned_conversation_suppresses_the_ai() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let agent = t.default_agent(&owner).await;
    t.put(&format!("/api/v1/agents/{agent}"), &owner, json!({"handoffOnRetrievalMiss": true})).await.assert_status(200);
    // a draft setting does nothing until it is published
    let v = chat(&t, &owner, json!({"message": "Do you repair vintage radios?"})).await;
    assert_eq!(v["ownership"]["state"], "ai_owned");
    publish(&t, &owner, &agent).await;
    let v = chat(&t, &owner, json!({"message": "Do you repair vintage radios?"})).await;
    assert_eq!(v["ownership"], json!({"state": "human_owned", "suppressed": false}));
    let cid = v["conversationId"].as_str().unwrap().to_string();
    // the notice job is stored with the companion document's payload
    let jobs: Vec<(String, String, String)> = t
        .app
        .db
        .read(|c| {
            let mut st = c.prepare("SELECT kind, state, payload FROM jobs WHERE kind = 'handoff.notify'")?;
            Ok(st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .unwrap();
    assert_eq!(jobs.len(), 1);
    let payload: Value = serde_json::from_str(&jobs[0].2).unwrap();
    assert_eq!(payload["conversationId"], cid.as_str());
    assert_eq!(payload["agentId"], agent.as_str());
    assert_eq!(payload["reason"], "retrieval_miss");
    assert_eq!(payload["routine"], Value::Null);
    assert_eq!(payload["collected"], json!({}));
    for k in ["workspaceId", "dashboardUrl", "requestId"] {
        assert!(payload.get(k).is_some(), "{k}");
    }
    // the notice goes to the workspace owner (no destination configured); without SMTP the email
    // is recorded as skipped
    t.run_jobs();
    let state: String = t
        .app
        .db
        .read(|c| Ok(c.query_row("SELECT state FROM jobs WHERE kind = 'handoff.notify'", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(state, "done");
    let log = t.get(&format!("/api/v1/deliveries?conversationId={cid}"), &owner).await.json();
    assert_eq!(log["deliveries"][0]["channel"], "email");
    assert_eq!(log["deliveries"][0]["status"], "skipped");
    let audit = t.get("/api/v1/audit-events?action=hitl.ownership", &owner).await.json();
    assert!(audit.to_string().contains("retrieval_miss"), "{audit}");
    // the next visitor message: saved, the AI suppressed (a waiting line, nothing else runs)
    let v = chat(&t, &owner, json!({"message": "Hello? Anyone there?", "conversationId": cid})).await;
    assert_eq!(v["ownership"], json!({"state": "human_owned", "suppressed": true}));
    assert_eq!(v["diagnostics"]["retrievalInvoked"], false);
    assert_eq!(v["citations"], json!([]));
    assert!(!v["answer"].as_str().unwrap().is_empty(), "a waiting line before any operator reply");
    let tr = trace(&t, &owner, v["traceId"].as_str().unwrap()).await;
    assert_eq!(tr["outcome"], "suppressed");
    assert!(tr["trace"]["stages"].as_array().unwrap().iter().all(|s| s["kind"] != "retrieval_fanout"));
    let conv = t.get(&format!("/api/v1/history/chat/{cid}"), &owner).await.json();
    let texts: Vec<&str> = conv["messages"].as_array().unwrap().iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert!(texts.contains(&"Hello? Anyone there?"));
    // the operator replied: visitors get no AI reply at all
    t.app
        .db
        .write(|tx| Ok(tx.execute("UPDATE conversations SET operator_replied = 1 WHERE id = ?1", [&cid])?))
        .unwrap();
    let v = chat(&t, &owner, json!({"message": "Thanks", "conversationId": cid})).await;
    assert_eq!(v["answer"], "");
    assert_eq!(v["messageId"], Value::Null);
    // the history filter finds waiting handoffs
    let list = t.get("/api/v1/history/chat?ownership=human_owned", &owner).await.json();
    assert_eq!(list["total"], 1);
}

#[tokio::test]
async fn directives_match_and_one_binding_wins() {
    let t = TestApp::new();
    let owner = t.owner().await;
    corpus(&t, &owner).await;
    let agent = t.default_agent(&owner).await;
    let base = format!("/api/v1/agents/{agent}");
    for (name, cfg) in [("returns_lookup", json!({"vectorTopK": 5})), ("shipping_lookup", json!({"vectorTopK": 5}))] {
        t.post(
            &format!("{base}/skills"),
            &owner,
            json!({"name": name, "capability": "retrieve", "invocationMode": "agent_selectable", "config": cfg}),
        )
        .await
        .assert_status(201);
    }
    let d = |name: &str, priority: i64, skill: &str| json!({"name": name, "condition": {"kind": "always"}, "action": format!("Check #{skill}."), "priority": priority, "binding": {"kind": "skill", "skillName": skill}});
    let low = t.post(&format!("{base}/directives"), &owner, d("a-low", 20, "returns_lookup")).await.json();
    let high = t.post(&format!("{base}/directives"), &owner, d("b-high", 80, "shipping_lookup")).await.json();
    let refunds = t
        .post(&format!("{base}/directives"), &owner, json!({"name": "refund-tone", "condition": {"kind": "contextual", "description": "The visitor asks how to get a refund for a purchase"}, "action": "Be reassuring about refunds."}))
        .await
        .json();
    publish(&t, &owner, &agent).await;
    let v = chat(&t, &owner, json!({"message": "How do I get a refund for my purchase?"})).await;
    let tr = trace(&t, &owner, v["traceId"].as_str().unwrap()).await;
    let steering = &stage(&tr, "directive_steering")["outputs"];
    assert_eq!(steering["method"], "embedding");
    let matched: Vec<&str> =
        steering["matched"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert!(matched.contains(&refunds["id"].as_str().unwrap()), "{steering}");
    assert!(matched.contains(&low["id"].as_str().unwrap()) && matched.contains(&high["id"].as_str().unwrap()));
    let sel = &stage(&tr, "skill_selection")["outputs"];
    assert_eq!(sel["selected"]["skillName"], "shipping_lookup", "higher priority wins: {sel}");
    assert_eq!(sel["losing"][0]["directiveId"], low["id"]);
    assert!(sel["lookup"]["results"].as_u64().unwrap() > 0);
    // an unrelated question does not match the contextual directive
    let v = chat(&t, &owner, json!({"message": "How should I wash a wool sweater?"})).await;
    let tr = trace(&t, &owner, v["traceId"].as_str().unwrap()).await;
    let matched = stage(&tr, "directive_steering")["outputs"]["matched"].to_string();
    assert!(!matched.contains(refunds["id"].as_str().unwrap()), "{matched}");
    // disabling the winning skill: its binding is skipped (the action still applies), the other wins
    let skills = t.get(&format!("{base}/skills"), &owner).await.json();
    let ship = skills["skills"].as_array().unwrap().iter().find(|s| s["name"] == "shipping_lookup").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    t.patch(&format!("{base}/skills/{ship}"), &owner, json!({"enabled": false})).await.assert_status(200);
    publish(&t, &owner, &agent).await;
    let v = chat(&t, &owner, json!({"message": "How do I get a refund?"})).await;
    let tr = trace(&t, &owner, v["traceId"].as_str().unwrap()).await;
    let sel = &stage(&tr, "skill_selection")["outputs"];
    assert_eq!(sel["selected"]["skillName"], "returns_lookup");
    assert_eq!(sel["skipped"][0]["reason"], "skill_disabled");
}

#[tokio::test]
async fn conversations_keep_their_revision_and_drafts_never_leak() {
    let t = TestApp::new();
    let owner = t.owner().await;
    corpus(&t, &owner).await;
    let agent = t.default_agent(&owner).await;
    let first = chat(&t, &owner, json!({"message": "How long does standard shipping take?"})).await;
    assert_eq!(first["diagnostics"]["retrievalInvoked"], true);
    let cid = first["conversationId"].as_str().unwrap().to_string();
    // a draft change: nobody sees it
    t.put(&format!("/api/v1/agents/{agent}"), &owner, json!({"retrievalEnabled": false})).await.assert_status(200);
    let v = chat(&t, &owner, json!({"message": "How long does standard shipping take?"})).await;
    assert_eq!(v["diagnostics"]["retrievalInvoked"], true, "drafts never reach visitors");
    // published: new conversations use it; the running one keeps its revision
    publish(&t, &owner, &agent).await;
    let v = chat(&t, &owner, json!({"message": "How long does standard shipping take?"})).await;
    assert_eq!(v["diagnostics"]["retrievalInvoked"], false);
    assert_eq!(v["answerCoverage"]["availability"], "not_recorded");
    let v = chat(&t, &owner, json!({"message": "And express delivery?", "conversationId": cid})).await;
    assert_eq!(v["diagnostics"]["retrievalInvoked"], true);
    assert_eq!(v["diagnostics"]["revision"]["version"], 1);
    assert!(
        v["answer"].as_str().unwrap().contains("next working day"),
        "a follow-up borrows the previous question: {v}"
    );
}

#[tokio::test]
async fn streaming_emits_stages_chunks_then_done() {
    let t = TestApp::new();
    let owner = t.owner().await;
    corpus(&t, &owner).await;
    let r = t
        .post("/api/v1/chat", &owner, json!({"message": "How long does standard shipping take?", "stream": true}))
        .await;
    r.assert_status(200);
    assert!(r.headers["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let events = sse_events(&r.text());
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    let first_chunk = names.iter().position(|n| *n == "chunk").expect("chunks");
    assert_eq!(&names[..4], &["conversation", "status", "status", "status"]);
    let stages: Vec<&str> = events[1..4].iter().map(|(_, d)| d["stage"].as_str().unwrap()).collect();
    assert_eq!(stages, vec!["interpreting", "searching", "composing"]);
    assert!(first_chunk == 4 && names.last() == Some(&"done"));
    let streamed: String =
        events.iter().filter(|(n, _)| n == "chunk").map(|(_, d)| d["text"].as_str().unwrap()).collect();
    let done = &events.last().unwrap().1;
    assert_eq!(streamed, done["answer"].as_str().unwrap());
    assert_eq!(done["conversationId"], events[0].1["conversationId"]);
    assert!(!done["citations"].as_array().unwrap().is_empty());
}

pub(crate) fn sse_events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter_map(|block| {
            let mut name = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event:") {
                    name = Some(n.trim().to_string());
                } else if let Some(d) = line.strip_prefix("data:") {
                    data.push_str(d.trim_start());
                }
            }
            Some((name?, serde_json::from_str(&data).ok()?))
        })
        .collect()
}

/// A fake model that holds back its answer to `trigger` (once) until released, and tells the test
/// when that call arrived. Every answer names the question it answers.
pub(crate) fn held_model(trigger: &'static str) -> (FakeProvider, mpsc::Receiver<()>, mpsc::Sender<()>) {
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let started_tx = Mutex::new(Some(started_tx));
    let release_rx = Mutex::new(release_rx);
    let fake = FakeProvider::start(move |r| {
        let last = r.body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .map(|m| m["content"].as_str().unwrap_or("").to_string())
            .unwrap_or_default();
        if last == trigger
            && let Some(tx) = started_tx.lock().take()
        {
            let _ = tx.send(());
            let _ = release_rx.lock().recv();
        }
        openai_stream(&format!(
            "COVERAGE: answered sufficient_evidence\nStandard shipping takes two to four working days [1]. (answering: {last})"
        ))
    });
    (fake, started_rx, release_tx)
}

pub(crate) async fn wait(rx: mpsc::Receiver<()>) {
    tokio::task::spawn_blocking(move || rx.recv().unwrap()).await.unwrap();
}

#[tokio::test]
async fn a_newer_message_supersedes_a_reply_that_has_not_started() {
    let (fake, started, release) = held_model("How long does shipping take?");
    let t = with_model(&fake);
    let owner = t.owner().await;
    corpus(&t, &owner).await;
    let v = t.post("/api/v1/chat", &owner, json!({"message": "Hi"})).await.json();
    let cid = v["conversationId"].as_str().unwrap().to_string();
    let first =
        t.post("/api/v1/chat", &owner, json!({"message": "How long does shipping take?", "conversationId": cid}));
    let second = async {
        wait(started).await;

        t.post(
            "/api/v1/chat",
            &owner,
            json!({"message": "How long does standard shipping take exactly?", "conversationId": cid}),
        )
        .await
    };
    let release_after_first = async {
        let r = first.await;
        let _ = release.send(());
        r
    };
    let (a, b) = tokio::join!(release_after_first, second);
    assert_eq!(a.status.as_u16(), 409, "{}", a.text());
    assert_eq!(a.code(), "chat_turn_superseded");
    let d = &a.json()["error"]["details"];
    assert_eq!(
        (d["conversationId"].as_str(), d["reason"].as_str(), d["stage"].as_str()),
        (Some(cid.as_str()), Some("superseded"), Some("rendering"))
    );
    b.assert_status(200);
    assert!(b.json()["answer"].as_str().unwrap().contains("exactly"), "{}", b.text());
    // no reply was saved for the superseded turn; its message is marked
    let conv = t.get(&format!("/api/v1/history/chat/{cid}"), &owner).await.json();
    let msgs = conv["messages"].as_array().unwrap();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, vec!["user", "assistant", "user", "user", "assistant"]);
    assert_eq!(msgs[2]["turnFailure"], json!({"eventStatus": "cancelled", "stage": "rendering"}));
}

#[tokio::test]
async fn a_superseded_stream_ends_with_cancelled() {
    let (fake, started, release) = held_model("How long does shipping take?");
    let t = with_model(&fake);
    let owner = t.owner().await;
    corpus(&t, &owner).await;
    let v = t.post("/api/v1/chat", &owner, json!({"message": "Hi"})).await.json();
    let cid = v["conversationId"].as_str().unwrap().to_string();
    let first = t.post(
        "/api/v1/chat",
        &owner,
        json!({"message": "How long does shipping take?", "conversationId": cid, "stream": true}),
    );
    let second = async {
        wait(started).await;
        t.post("/api/v1/chat", &owner, json!({"message": "And express?", "conversationId": cid})).await
    };
    let release_after_first = async {
        let r = first.await;
        let _ = release.send(());
        r
    };
    let (a, b) = tokio::join!(release_after_first, second);
    a.assert_status(200);
    let events = sse_events(&a.text());
    let last = events.last().unwrap();
    assert_eq!(last.0, "cancelled", "{events:?}");
    assert_eq!(last.1, json!({"conversationId": cid, "reason": "superseded", "stage": "rendering"}));
    assert!(events.iter().all(|(n, _)| n != "chunk" && n != "done"));
    b.assert_status(200);
}

#[tokio::test]
async fn model_answers_count_unsourced_claims_and_invalid_sources_for_quality() {
    let fake = FakeProvider::start(|r| {
        let system = r.body["messages"][0]["content"].as_str().unwrap_or("").to_string();
        if system.contains("nothing that answers") {
            return openai_stream("Sorry, I could not find that.");
        }
        if r.body["messages"].to_string().contains("suggest") || system.contains("follow-up") {
            return openai_stream("{\"questions\": [\"What about express delivery?\"]}");
        }
        openai_stream(
            "COVERAGE: partial insufficient_evidence\nStandard shipping takes two to four working days [1]. We also plant a tree for every order. Express is next day [9].",
        )
    });
    let t = with_model(&fake);
    let owner = t.owner().await;
    corpus(&t, &owner).await;
    let v = chat(&t, &owner, json!({"message": "How long does standard shipping take?"})).await;
    assert_eq!(
        v["answer"],
        "Standard shipping takes two to four working days. We also plant a tree for every order. Express is next day."
    );
    assert_eq!(v["citations"].as_array().unwrap().len(), 1, "only retrieved sources are cited: {v}");
    assert_eq!(v["answerCoverage"]["coverage"], "partial");
    let g = &v["diagnostics"]["grounding"];
    assert_eq!(
        (
            g["verdict"].as_str(),
            g["claimCount"].as_i64(),
            g["sourcedClaimCount"].as_i64(),
            g["invalidSourceCount"].as_i64()
        ),
        (Some("degraded"), Some(3), Some(1), Some(1))
    );
    // the model saw numbered sources and the coverage instruction; no key in any trace
    let sent = fake.requests.lock().iter().map(|r| r.body.to_string()).collect::<String>();
    assert!(sent.contains("[1] ") && sent.contains("COVERAGE"));
    // a grounded builtin-like turn: a retrieval-only answer on an empty query scope declines
    let none = chat(
        &t,
        &owner,
        json!({"message": "Do you sell garden furniture?", "metadataFilter": {"topic": "nothing-here"}}),
    )
    .await;
    assert_eq!(none["diagnostics"]["grounding"]["verdict"], "no_support");
    let direct = chat(&t, &owner, json!({"message": "Hello"})).await;
    assert_eq!(direct["diagnostics"]["outcome"], "direct");
    // quality filters
    let q = |qs: &str| {
        let t = &t;
        let owner = &owner;
        let qs = qs.to_string();
        async move { t.get(&format!("/api/v1/quality/turns?{qs}"), owner).await.json() }
    };
    let all = q("").await;
    assert_eq!(all["total"], 3);
    assert!(
        all["turns"].as_array().unwrap().iter().any(|t| t["grounding"].is_null()),
        "direct turns have no diagnostic"
    );
    assert_eq!(q("groundingVerdict=degraded").await["total"], 1);
    assert_eq!(q("groundingVerdict=no_support").await["total"], 1);
    assert_eq!(q("hasUnsourcedClaims=true").await["total"], 1);
    // false: zero-count diagnostics in, turns without a diagnostic out
    let f = q("hasUnsourcedClaims=false").await;
    assert_eq!(f["total"], 1);
    assert_eq!(f["turns"][0]["grounding"]["verdict"], "no_support");
    assert_eq!(q("hasInvalidSources=true").await["total"], 1);
    assert_eq!(q("hasInvalidSources=false").await["total"], 1);
    assert_eq!(t.get("/api/v1/quality/turns?groundingVerdict=great", &owner).await.status, 400);
    let page = q("limit=2").await;
    assert_eq!(page["turns"].as_array().unwrap().len(), 2);
    let next = page["nextCursor"].as_str().unwrap();
    assert_eq!(q(&format!("limit=2&cursor={next}")).await["turns"].as_array().unwrap().len(), 1);
    assert!(!all.to_string().contains(KEY));
}

#[tokio::test]
async fn a_model_that_cites_nothing_gets_its_claims_attributed_but_stays_degraded() {
    let fake = FakeProvider::start(|r| {
        if r.body["messages"].to_string().contains("follow-up") {
            return openai_stream("{\"questions\": []}");
        }
        openai_stream(
            "Standard shipping takes two to four working days. Orders ship from Rotterdam. I hope this helps!",
        )
    });
    let t = with_model(&fake);
    let owner = t.owner().await;
    let ids = corpus(&t, &owner).await;
    let v = chat(&t, &owner, json!({"message": "How long does standard shipping take?"})).await;
    // both claims point at the shipping document; the closing pleasantry points nowhere
    let cited: Vec<&str> =
        v["citations"].as_array().unwrap().iter().map(|c| c["documentId"].as_str().unwrap()).collect();
    assert_eq!(cited, vec![ids[1].as_str()], "{v}");
    let segments = v["answerSegments"].as_array().unwrap();
    assert_eq!(segments[0]["citationIndices"], json!([0]));
    assert_eq!(segments[1]["citationIndices"], json!([0]));
    assert_eq!(segments[2]["citationIndices"], json!([]));
    // the model itself sourced nothing: the grounding says so
    assert_eq!(v["diagnostics"]["outcome"], "grounded_degraded");
    assert_eq!(v["diagnostics"]["grounding"]["sourcedClaimCount"], 0);
}

#[tokio::test]
async fn an_out_of_scope_decline_is_not_a_grounding_gap_and_does_not_hand_off() {
    let fake = FakeProvider::start(|_| {
        openai_stream("COVERAGE: unanswered intentional_scope_boundary\nI can only help with questions about our shop.")
    });
    let t = with_model(&fake);
    let owner = t.owner().await;
    corpus(&t, &owner).await;
    let agent = t.default_agent(&owner).await;
    t.put(&format!("/api/v1/agents/{agent}"), &owner, json!({"handoffOnRetrievalMiss": true})).await.assert_status(200);
    publish(&t, &owner, &agent).await;
    let v = chat(&t, &owner, json!({"message": "Write me a poem about shipping containers"})).await;
    assert_eq!(v["answerCoverage"]["reason"], "intentional_scope_boundary");
    assert_eq!(v["diagnostics"]["outcome"], "out_of_scope");
    assert_eq!(v["ownership"]["state"], "ai_owned", "no handoff for a scope decline");
}

#[tokio::test]
async fn retrieval_only_answers_run_on_defaults_or_as_an_agent() {
    let t = TestApp::new();
    let owner = t.owner().await;
    corpus(&t, &owner).await;
    let agent = t.default_agent(&owner).await;
    let r = t
        .post("/api/v1/retrieval/answer", &owner, json!({"query": "How many days do I have to return an item?"}))
        .await;
    r.assert_status(200);
    let v = r.json();
    assert!(v["answer"].as_str().unwrap().contains("30 days"));
    assert_eq!(v["agentScope"], Value::Null);
    assert!(!v["results"].as_array().unwrap().is_empty());
    let v = t
        .post(
            "/api/v1/retrieval/answer",
            &owner,
            json!({"query": "How do I wash wool?", "agentId": agent, "metadataFilter": {"topic": "care"}}),
        )
        .await
        .json();
    assert_eq!(v["agentScope"], json!({"agentId": agent, "retrievalEnabled": true}));
    assert!(v["citations"].as_array().unwrap().iter().all(|c| c["title"] == "Care guide"));
    // scoping to an agent needs agent read access; another workspace's agent is a 404
    let query_only = t.token_with(&owner, &["workspace.retrieval.query"]).await;
    t.post("/api/v1/retrieval/answer", &query_only, json!({"query": "returns"})).await.assert_status(200);
    let r = t.post("/api/v1/retrieval/answer", &query_only, json!({"query": "returns", "agentId": agent})).await;
    assert_eq!(r.status, 403);
    assert_eq!(
        t.post(
            "/api/v1/retrieval/answer",
            &owner,
            json!({"query": "returns", "agentId": "0190b7a2-0000-7000-8000-000000000000"})
        )
        .await
        .status,
        404
    );
    assert_eq!(t.post("/api/v1/retrieval/answer", &owner, json!({"query": ""})).await.status, 400);
    assert_eq!(
        t.post("/api/v1/retrieval/answer", &owner, json!({"query": "x", "metadataFilter": {"$bad": 1}})).await.status,
        400
    );
    // it is a turn of the quality report
    assert_eq!(t.get("/api/v1/quality/turns", &owner).await.json()["total"], 3);
}

#[tokio::test]
async fn chat_requests_are_validated_and_scoped() {
    let t = TestApp::new();
    let owner = t.owner().await;
    assert_eq!(t.post("/api/v1/chat", &owner, json!({"message": "   "})).await.status, 400);
    assert_eq!(t.post("/api/v1/chat", &owner, json!({"message": "x".repeat(20_001)})).await.status, 400);
    assert_eq!(t.post("/api/v1/chat", &owner, json!({"message": "hi", "colour": 1})).await.status, 400);
    assert_eq!(
        t.post(
            "/api/v1/chat",
            &owner,
            json!({"message": "hi", "conversationId": "0190b7a2-0000-7000-8000-000000000000"})
        )
        .await
        .status,
        404
    );
    assert_eq!(
        t.post("/api/v1/agents/0190b7a2-0000-7000-8000-000000000000/chat", &owner, json!({"message": "hi"}))
            .await
            .status,
        404
    );
    // a conversation belongs to one agent
    let v = chat(&t, &owner, json!({"message": "hi"})).await;
    let other =
        t.post("/api/v1/agents", &owner, json!({"name": "Other"})).await.json()["id"].as_str().unwrap().to_string();
    let r = t
        .post(
            &format!("/api/v1/agents/{other}/chat"),
            &owner,
            json!({"message": "hi", "conversationId": v["conversationId"]}),
        )
        .await;
    assert_eq!(r.status, 404);
    // permissions: chatting needs workspace.chat, history needs workspace.conversations.read
    let reader = t.token_with(&owner, &["workspace.documents.read"]).await;
    assert_eq!(t.post("/api/v1/chat", &reader, json!({"message": "hi"})).await.status, 403);
    assert_eq!(t.get("/api/v1/history/chat", &reader).await.status, 403);
    let chatter = t.token_with(&owner, &["workspace.chat"]).await;
    chat(&t, &chatter, json!({"message": "hi"})).await;
    // another workspace's conversation is a 404
    let ws2 = t.workspace(&owner, "Other").await;
    let conversation = format!("/api/v1/history/chat/{}", v["conversationId"].as_str().unwrap());
    assert_eq!(t.get_in(&ws2, &conversation, &owner).await.status, 404);
    let trace = format!("/api/v1/traces/{}", v["traceId"].as_str().unwrap());
    assert_eq!(t.get_in(&ws2, &trace, &owner).await.status, 404);
}

#[tokio::test]
async fn test_executions_are_private_seeded_and_frozen() {
    let t = TestApp::new();
    let owner = t.owner().await;
    corpus(&t, &owner).await;
    let agent = t.default_agent(&owner).await;
    let base = format!("/api/v1/agents/{agent}/test-executions");
    let visitor = chat(&t, &owner, json!({"message": "How long does standard shipping take?"})).await;
    let seed = visitor["conversationId"].as_str().unwrap().to_string();
    // a seeded execution holds the source conversation's messages; the source is unchanged
    let r = t.post(&base, &owner, json!({"seedConversationId": seed, "idempotencyKey": "run-1"})).await;
    r.assert_status(201);
    let e = r.json();
    assert_eq!(e["mode"], "single");
    assert_eq!(e["sides"][0]["label"], "draft");
    let msgs = e["sides"][0]["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[1]["role"], "assistant");
    let eid = e["id"].as_str().unwrap().to_string();
    // repeated key: the same execution
    let again = t.post(&base, &owner, json!({"seedConversationId": seed, "idempotencyKey": "run-1"})).await;
    again.assert_status(200);
    assert_eq!(again.json()["id"], eid.as_str());
    // the draft is frozen at start: a later draft change does not move it
    t.put(&format!("/api/v1/agents/{agent}"), &owner, json!({"retrievalEnabled": false})).await.assert_status(200);
    let r = t.post(&format!("{base}/{eid}/messages"), &owner, json!({"message": "And express delivery?"})).await;
    r.assert_status(200);
    let reply = &r.json()["results"][0]["reply"];
    assert_eq!(reply["diagnostics"]["retrievalInvoked"], true, "{reply}");
    assert!(
        reply["answer"].as_str().unwrap().contains("next working day"),
        "the seeded history informs the follow-up: {reply}"
    );
    let src = t.get(&format!("/api/v1/history/chat/{seed}"), &owner).await.json();
    assert_eq!(src["messages"].as_array().unwrap().len(), 2, "the source conversation is never changed");
    // a new execution sees the new draft; compare runs draft and published side by side
    let c = t.post(&base, &owner, json!({"mode": "compare"})).await.json();
    assert_eq!(c["sides"].as_array().unwrap().len(), 2);
    let cid = c["id"].as_str().unwrap();
    let r = t
        .post(&format!("{base}/{cid}/messages"), &owner, json!({"message": "How long does standard shipping take?"}))
        .await
        .json();
    assert_eq!(r["results"][0]["label"], "draft");
    assert_eq!(r["results"][0]["reply"]["diagnostics"]["retrievalInvoked"], false);
    assert_eq!(r["results"][1]["label"], "published");
    assert_eq!(r["results"][1]["reply"]["diagnostics"]["retrievalInvoked"], true);
    // streamed: each side announced, its stages and chunks, its reply; then the same body as JSON
    let r = t
        .post(
            &format!("{base}/{cid}/messages"),
            &owner,
            json!({"message": "How long does standard shipping take?", "stream": true}),
        )
        .await;
    r.assert_status(200);
    assert!(r.headers["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let events = sse_events(&r.text());
    assert_eq!(events[0].0, "execution");
    assert_eq!(events[0].1["executionId"], cid);
    let sides: Vec<&Value> = events.iter().filter(|(n, _)| n == "side").map(|(_, d)| d).collect();
    assert_eq!(sides.iter().map(|d| d["label"].as_str().unwrap()).collect::<Vec<_>>(), ["draft", "published"]);
    let published = events.iter().position(|(n, d)| n == "side" && d["label"] == "published").unwrap();
    let after: Vec<&str> = events[published..].iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(&after[..4], ["side", "status", "status", "status"]);
    assert!(after.contains(&"chunk"), "the published side's answer streams: {after:?}");
    let streamed: String =
        events[published..].iter().filter(|(n, _)| n == "chunk").map(|(_, d)| d["text"].as_str().unwrap()).collect();
    let replies: Vec<&Value> = events.iter().filter(|(n, _)| n == "reply").map(|(_, d)| d).collect();
    assert_eq!(replies.len(), 2);
    assert_eq!(streamed, replies[1]["reply"]["answer"].as_str().unwrap());
    let (last, done) = events.last().unwrap();
    assert_eq!(last, "done");
    assert_eq!(done["results"][1]["reply"]["answer"], replies[1]["reply"]["answer"]);
    assert_eq!(done["results"].as_array().unwrap().len(), 2);
    // rules
    assert_eq!(t.post(&base, &owner, json!({"mode": "compare", "seedConversationId": seed})).await.status, 400);
    assert_eq!(
        t.post(&base, &owner, json!({"seedConversationId": "0190b7a2-0000-7000-8000-000000000000"})).await.status,
        404
    );
    let other =
        t.post("/api/v1/agents", &owner, json!({"name": "Other"})).await.json()["id"].as_str().unwrap().to_string();
    assert_eq!(
        t.post(&format!("/api/v1/agents/{other}/test-executions"), &owner, json!({"seedConversationId": seed}))
            .await
            .status,
        404,
        "another agent's conversation"
    );
    let ws2 = t.workspace(&owner, "Elsewhere").await;
    let r = t
        .send(
            axum::http::Method::POST,
            &base,
            &owner,
            Some(json!({"seedConversationId": seed})),
            &[("x-workspace-id", ws2.as_str())],
        )
        .await;
    assert_eq!(r.status, 404);
    // never visible in visitor history; the test conversation cannot be chatted into
    let list = t.get("/api/v1/history/chat", &owner).await.json();
    assert_eq!(list["total"], 1);
    let side = e["sides"][0]["conversationId"].as_str().unwrap();
    assert_eq!(t.get(&format!("/api/v1/history/chat/{side}"), &owner).await.status, 404);
    assert_eq!(t.post("/api/v1/chat", &owner, json!({"message": "hi", "conversationId": side})).await.status, 404);
    let quality = t.get("/api/v1/quality/turns", &owner).await.json();
    assert_eq!(quality["total"], 1, "test turns are not in the quality report");
    // list and get need workspace.agents.manage
    let page = t.get(&format!("{base}?limit=50"), &owner).await.json();
    assert_eq!(page["testExecutions"].as_array().unwrap().len(), 2);
    t.get(&format!("{base}/{eid}"), &owner).await.assert_status(200);
    let member = t.member(&owner, "m@example.com", "member").await;
    assert_eq!(t.get(&base, &member).await.status, 403);
    assert_eq!(t.get(&format!("{base}/{eid}"), &member).await.status, 403);
}

#[tokio::test]
async fn a_default_local_model_composes_and_leaves_side_calls_to_built_in_methods() {
    let gguf =
        steward::models::resolve::local_model_path(&crate::support::test_config(std::path::Path::new("/nonexistent")))
            .expect("the SmolLM2 GGUF is installed by scripts/fetch-models.sh");
    let t = TestApp::with_config(move |c| c.llm.local_model_path = Some(gguf.clone()));
    let owner = t.owner().await;
    t.doc(&owner, "Opening hours", "The shop is open from nine to five on weekdays.", json!({})).await;
    t.drain();
    let agent = t.default_agent(&owner).await;
    t.post(
        &format!("/api/v1/agents/{agent}/directives"),
        &owner,
        json!({"name": "hours", "condition": {"kind": "contextual", "description": "The visitor asks when the shop is open"}, "action": "Mention the weekday hours."}),
    )
    .await
    .assert_status(201);
    publish(&t, &owner, &agent).await;
    let v = chat(&t, &owner, json!({"message": "When is the shop open?"})).await;
    assert_eq!(v["diagnostics"]["composer"]["provider"], "local", "{v}");
    // cite, then write: the sentences the model was given are the answer's sources
    assert_eq!(v["citations"][0]["title"], "Opening hours", "{v}");
    assert_eq!(v["answerCoverage"]["coverage"], "answered", "decided before generation: {v}");
    let tr = trace(&t, &owner, v["traceId"].as_str().unwrap()).await;
    assert_eq!(stage(&tr, "directive_steering")["outputs"]["method"], "embedding");
    assert_ne!(stage(&tr, "retrieval_fanout")["outputs"]["rewrite"]["method"], "model");
}
