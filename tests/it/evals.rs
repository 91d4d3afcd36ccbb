//! Evals through the API: a case saved from a real answer (idempotently, under concurrency),
//! replayed in both modes, flipped by a document change and by an instruction override; the
//! assertion schema's errors; `llm_judge` on a scripted OpenAI-compatible server and on the local
//! GGUF; suites with skipped cases, repeats, flaky cases, the summary and regressions; a
//! candidate compared with the published revision.

use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::chat::{corpus, with_model};
use crate::fake_llm::{FakeProvider, openai_stream};
use crate::support::{Auth, TestApp};

async fn ask(t: &TestApp, a: &Auth, message: &str) -> Value {
    let r = t.post("/api/v1/chat", a, json!({"message": message})).await;
    r.assert_status(200);
    r.json()
}

/// Saves the answer as a case and sets its assertions; returns the case id.
async fn case_with(t: &TestApp, a: &Auth, message_id: &str, assertions: Value) -> String {
    let r = t.put(&format!("/api/v1/evals/cases/by-source-message/{message_id}"), a, json!({})).await;
    assert!(r.status == 201 || r.status == 200, "{}", r.text());
    let id = r.json()["case"]["id"].as_str().unwrap().to_string();
    t.patch(&format!("/api/v1/evals/cases/{id}"), a, json!({"assertions": assertions})).await.assert_status(200);
    id
}

async fn run(t: &TestApp, a: &Auth, case: &str, body: Value) -> Value {
    let r = t.post(&format!("/api/v1/evals/cases/{case}/runs"), a, body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()
}

/// Runs due jobs on a plain thread (a replay's blocking model client must not run inside the
/// test's runtime, as it never does in the server's worker threads).
fn run_jobs(t: &TestApp) {
    let app = t.app.clone();
    std::thread::spawn(move || steward::jobs::run_until_idle(&app).unwrap()).join().unwrap();
}

/// Queues a suite, runs the queue on this thread, and reads the finished suite.
async fn suite(t: &TestApp, a: &Auth, mut body: Value) -> Value {
    body["wait"] = json!(false);
    let r = t.post("/api/v1/evals/cases/run", a, body).await;
    assert_eq!(r.status, 202, "{}", r.text());
    let id = r.json()["id"].as_str().unwrap().to_string();
    run_jobs(t);
    let s = t.get(&format!("/api/v1/evals/suites/{id}"), a).await.json();
    assert_eq!(s["status"], "completed", "{s}");
    s
}

#[tokio::test]
async fn a_saved_answer_replays_and_a_document_change_flips_it() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let ids = corpus(&t, &owner).await;
    let shipping = &ids[1];
    let v = ask(&t, &owner, "How long does standard shipping take?").await;
    let mid = v["messageId"].as_str().unwrap();

    // saved once, whoever asks again
    let first = t.put(&format!("/api/v1/evals/cases/by-source-message/{mid}"), &owner, json!({})).await;
    first.assert_status(201);
    let again = t.put(&format!("/api/v1/evals/cases/by-source-message/{mid}"), &owner, json!({})).await;
    again.assert_status(200);
    assert_eq!(first.json()["case"]["id"], again.json()["case"]["id"]);
    let got = t.get(&format!("/api/v1/evals/cases/by-source-message/{mid}"), &owner).await.json();
    let snap = &got["snapshot"];
    assert_eq!(snap["fidelity"], "full", "{snap}");
    assert_eq!(snap["sourceMessageId"], mid);
    assert_eq!(snap["messages"].as_array().unwrap().len(), 2);
    assert!(snap["originalRetrievalResult"].as_array().unwrap().iter().any(|c| c["documentId"] == shipping.as_str()));
    assert!(snap["originalModelId"].as_str().unwrap().starts_with("builtin/extractive"), "{snap}");
    assert!(snap["originalAgent"]["configuration"]["settings"].is_object());
    assert_eq!(got["case"]["status"], "pending");
    assert_eq!(got["case"]["assertions"], json!([]));

    let case = case_with(
        &t,
        &owner,
        mid,
        json!([
            {"type": "retrieval_includes_document", "documentId": shipping},
            {"type": "retrieval_top_k_includes_document", "documentId": shipping, "k": 1},
            {"type": "retrieval_chunk_metadata", "documentId": shipping, "metadata": {"topic": "shipping"}}
        ]),
    )
    .await;
    let r = run(&t, &owner, &case, json!({"mode": "retrieval_only"})).await;
    assert_eq!(r["status"], "pass", "{r}");
    assert_eq!(r["outcomeReason"], "All 3 assertions passed.");
    assert!(r["observedOutput"]["answer"].is_null());
    assert!(r["resolvedConfig"]["retrievalSettings"]["vectorTopK"].is_number());
    assert_eq!(r["resolvedConfig"]["source"], "published");
    assert_eq!(t.get(&format!("/api/v1/evals/cases/{case}"), &owner).await.json()["status"], "passing");

    // the shipping page is rewritten about something else: the same case now fails
    t.put(
        &format!("/api/v1/document/{shipping}"),
        &owner,
        json!({"content": "Gift cards. Gift cards never expire and can be used online.", "metadata": {"topic": "gift cards"}}),
    )
    .await
    .assert_status(202);
    t.drain();
    let r = run(&t, &owner, &case, json!({"mode": "retrieval_only"})).await;
    assert_eq!(r["status"], "fail", "{r}");
    assert!(r["outcomeReason"].as_str().unwrap().contains(shipping.as_str()), "{r}");
    let verdicts = r["assertionVerdicts"].as_array().unwrap();
    assert_eq!(verdicts[1]["status"], "fail", "{r}");
    assert_eq!(verdicts[2]["status"], "fail", "{r}");
    assert_eq!(t.get(&format!("/api/v1/evals/cases/{case}"), &owner).await.json()["status"], "failing");
    let runs = t.get(&format!("/api/v1/evals/cases/{case}/runs"), &owner).await.json();
    assert_eq!(runs["runs"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn concurrent_saves_of_one_answer_make_one_case() {
    let t = TestApp::new();
    let owner = t.owner().await;
    corpus(&t, &owner).await;
    let v = ask(&t, &owner, "Can I return sale items?").await;
    let path = format!("/api/v1/evals/cases/by-source-message/{}", v["messageId"].as_str().unwrap());
    let puts = (0..8).map(|_| t.put(&path, &owner, json!({})));
    let all = futures::future::join_all(puts).await;
    let created = all.iter().filter(|r| r.status == 201).count();
    assert_eq!(created, 1, "{:?}", all.iter().map(|r| r.status).collect::<Vec<_>>());
    let ids: std::collections::HashSet<String> =
        all.iter().map(|r| r.json()["case"]["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(ids.len(), 1);
    let list = t.get("/api/v1/evals/cases", &owner).await.json();
    assert_eq!(list["cases"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn the_assertion_schema_names_the_index_and_field() {
    let t = TestApp::new();
    let owner = t.owner().await;
    corpus(&t, &owner).await;
    let v = ask(&t, &owner, "How long does standard shipping take?").await;
    let conv = v["conversationId"].as_str().unwrap();
    let s = t.post("/api/v1/evals/snapshots", &owner, json!({"conversationId": conv})).await;
    s.assert_status(201);
    let sid = s.json()["id"].as_str().unwrap().to_string();
    let doc = "0190a0b0-0000-7000-8000-000000000001";
    let bad = t
        .post(
            "/api/v1/evals/cases",
            &owner,
            json!({"snapshotId": sid, "name": "x", "assertions": [
                {"type": "retrieval_includes_document", "documentId": doc},
                {"type": "retrieval_top_k_includes_document", "documentId": doc, "k": 0}
            ]}),
        )
        .await;
    bad.assert_status(400);
    assert_eq!(bad.json()["error"]["details"]["field"], "assertions[1].k");
    assert_eq!(bad.json()["error"]["details"]["index"], 1);
    let many = vec![json!({"type": "answer_contains", "pattern": "x"}); 21];
    let r = t.post("/api/v1/evals/cases", &owner, json!({"snapshotId": sid, "name": "x", "assertions": many})).await;
    r.assert_status(400);
    let r = t.post("/api/v1/evals/cases", &owner, json!({"snapshotId": sid, "name": "x", "assertions": [{"type": "answer_contains", "pattern": "a", "matchMode": "fuzzy"}]})).await;
    assert_eq!(r.json()["error"]["details"]["field"], "assertions[0].matchMode");
    // a snapshot of another workspace, an unknown mode, an override the mode cannot take
    let other = t.workspace(&owner, "Other").await;
    let r = t
        .send(
            axum::http::Method::POST,
            "/api/v1/evals/cases",
            &owner,
            Some(json!({"snapshotId": sid, "name": "x"})),
            &[("x-workspace-id", &other)],
        )
        .await;
    r.assert_status(404);
    let c = t.post("/api/v1/evals/cases", &owner, json!({"snapshotId": sid, "name": "Shipping time"})).await.json();
    let cid = c["id"].as_str().unwrap();
    let r = t.post(&format!("/api/v1/evals/cases/{cid}/runs"), &owner, json!({"mode": "both"})).await;
    assert_eq!(r.json()["error"]["details"]["field"], "mode");
    let r = t
        .post(
            &format!("/api/v1/evals/cases/{cid}/runs"),
            &owner,
            json!({"mode": "retrieval_only", "overrides": {"agentConfigOverride": {"retrievalEnabled": false}}}),
        )
        .await;
    r.assert_status(400);
    assert_eq!(r.json()["error"]["details"]["field"], "overrides.agentConfigOverride");
    // a case without assertions is recorded, and an answer assertion needs full_assistant
    let r = run(&t, &owner, cid, json!({"mode": "retrieval_only"})).await;
    assert_eq!(r["status"], "recorded");
    t.patch(
        &format!("/api/v1/evals/cases/{cid}"),
        &owner,
        json!({"assertions": [{"type": "answer_contains", "pattern": "days"}]}),
    )
    .await
    .assert_status(200);
    let r = run(&t, &owner, cid, json!({"mode": "retrieval_only"})).await;
    assert_eq!(r["status"], "error");
    assert!(r["assertionVerdicts"][0]["reason"].as_str().unwrap().contains("full_assistant"));
    // a retrieval-only run cannot speak for an answer assertion: the case stays pending
    assert_eq!(t.get(&format!("/api/v1/evals/cases/{cid}"), &owner).await.json()["status"], "pending");
    let r = run(&t, &owner, cid, json!({"mode": "full_assistant"})).await;
    assert_eq!(r["status"], "pass", "{r}");
    assert!(r["observedOutput"]["answer"].as_str().unwrap().contains("days"));
    assert_eq!(t.get(&format!("/api/v1/evals/cases/{cid}"), &owner).await.json()["status"], "passing");
    // conversation text needs workspace.conversations.read as well
    let narrow = t.token_with(&owner, &["workspace.agents.read"]).await;
    t.get(&format!("/api/v1/evals/snapshots/{sid}"), &narrow).await.assert_status(403);
    t.get(&format!("/api/v1/evals/runs/{}", r["id"].as_str().unwrap()), &narrow).await.assert_status(403);
    let list = t.get("/api/v1/evals/cases", &narrow).await.json();
    assert!(list["cases"][0]["question"].is_null(), "{list}");
    assert!(t.get("/api/v1/evals/cases", &owner).await.json()["cases"][0]["question"].is_string());
    // a member may read but not run
    let member = t.member(&owner, "m@example.com", "member").await;
    t.get(&format!("/api/v1/evals/cases/{cid}"), &member).await.assert_status(200);
    t.post(&format!("/api/v1/evals/cases/{cid}/runs"), &member, json!({"mode": "retrieval_only"}))
        .await
        .assert_status(403);
}

/// A fake model: answers like a pirate when the system prompt says so, and judges by the marker
/// in the reference answer (`VALID`, `FENCED`, `GARBAGE`, `FLIP`).
fn scripted() -> (FakeProvider, std::sync::Arc<Mutex<u32>>) {
    let flips = std::sync::Arc::new(Mutex::new(0u32));
    let f2 = flips.clone();
    let fake = FakeProvider::start(move |r| {
        let msgs = r.body["messages"].as_array().cloned().unwrap_or_default();
        let system = msgs.first().and_then(|m| m["content"].as_str()).unwrap_or_default().to_string();
        let user = msgs.last().and_then(|m| m["content"].as_str()).unwrap_or_default().to_string();
        if system.contains("You are grading") {
            let text = if user.contains("VALID") {
                r#"{"verdict":"pass","reason":"Same meaning."}"#.to_string()
            } else if user.contains("FENCED") {
                "```json\n{\"verdict\": \"fail\", \"reason\": \"Leaves out the express option.\"}\n```".to_string()
            } else if user.contains("FLIP") {
                let mut n = f2.lock();
                *n += 1;
                if *n % 2 == 1 {
                    r#"{"verdict":"pass","reason":"ok"}"#.into()
                } else {
                    r#"{"verdict":"fail","reason":"no"}"#.into()
                }
            } else {
                "I think it is fine.".to_string()
            };
            return openai_stream(&text);
        }
        if system.contains("PIRATE") {
            return openai_stream("Arr, standard shipping takes two to four working days [1].");
        }
        openai_stream("Standard shipping takes two to four working days [1].")
    });
    (fake, flips)
}

#[tokio::test]
async fn an_instruction_override_flips_answer_contains_and_the_judge_parses_strictly() {
    let (fake, _) = scripted();
    let t = with_model(&fake);
    let owner = t.owner().await;
    corpus(&t, &owner).await;
    let v = ask(&t, &owner, "How long does standard shipping take?").await;
    let mid = v["messageId"].as_str().unwrap();
    let case =
        case_with(&t, &owner, mid, json!([{"type": "answer_contains", "pattern": "ARR", "matchMode": "regex"}])).await;
    let r = run(&t, &owner, &case, json!({"mode": "full_assistant"})).await;
    assert_eq!(r["status"], "fail", "{r}");
    let r = run(
        &t,
        &owner,
        &case,
        json!({"mode": "full_assistant", "overrides": {"assistantInstructionsOverride": {"customInstruction": "Talk like a PIRATE."}}}),
    )
    .await;
    assert_eq!(r["status"], "pass", "{r}");
    assert_eq!(r["overrides"]["assistantInstructionsOverride"]["customInstruction"], "Talk like a PIRATE.");
    assert!(r["resolvedConfig"]["composedInstructions"].as_str().unwrap().contains("PIRATE"));
    assert_eq!(r["resolvedConfig"]["modelId"], "gpt-test");
    // an override run does not move the case's status
    assert_eq!(t.get(&format!("/api/v1/evals/cases/{case}"), &owner).await.json()["status"], "failing");

    let judge = |marker: &str| json!({"type": "llm_judge", "expectedAnswer": format!("Two to four working days. {marker}"), "criteria": "Mention working days."});
    t.patch(
        &format!("/api/v1/evals/cases/{case}"),
        &owner,
        json!({"assertions": [judge("VALID"), judge("FENCED"), judge("GARBAGE")]}),
    )
    .await
    .assert_status(200);
    let tokens = |u: Value| (u["byAgent"][0]["inputTokens"].as_i64(), u["byAgent"][0]["outputTokens"].as_i64());
    let before = tokens(t.get("/api/v1/ee/usage-limits/me", &owner).await.json());
    let r = run(
        &t,
        &owner,
        &case,
        json!({"mode": "full_assistant", "overrides": {"modelOverride": {"provider": "openai", "model": "gpt-override"}}}),
    )
    .await;
    // the run's model tokens reach the agent's usage: the answer's and the three judge calls'
    let after = tokens(t.get("/api/v1/ee/usage-limits/me", &owner).await.json());
    assert_eq!(
        (after.0.unwrap() - before.0.unwrap(), after.1.unwrap() - before.1.unwrap()),
        (4 * 42, 4 * 7),
        "{before:?} → {after:?}"
    );
    let v = r["assertionVerdicts"].as_array().unwrap();
    assert_eq!(v[0]["status"], "pass");
    assert_eq!(v[0]["reason"], "Same meaning.");
    assert_eq!(v[1]["status"], "fail");
    assert_eq!(v[1]["reason"], "Leaves out the express option.");
    assert_eq!(v[2]["status"], "error", "garbage is never a pass: {}", v[2]);
    assert_eq!(r["status"], "error");
    // the judge is the workspace model, not the run's override; its prompt is hashed
    assert_eq!(v[0]["judge"]["judgeModel"], "openai/gpt-test");
    assert_eq!(v[0]["judge"]["promptHash"].as_str().unwrap().len(), 64);
    assert_eq!(v[0]["judge"]["usage"]["operation"], "llm_judge");
    assert_eq!(v[2]["judge"]["usage"]["attempt"], "assertion-2");
    assert_eq!(r["resolvedConfig"]["modelId"], "gpt-override");
    let reqs = fake.requests.lock().clone();
    let judged: Vec<_> = reqs
        .iter()
        .filter(|q| q.body["messages"][0]["content"].as_str().unwrap_or_default().contains("You are grading"))
        .collect();
    assert_eq!(judged.len(), 3);
    for q in judged {
        assert_eq!(q.body["model"], "gpt-test");
        assert_eq!(q.body["temperature"], 0.0);
        assert_eq!(q.body["seed"], 7);
        let user = q.body["messages"][1]["content"].as_str().unwrap();
        assert!(user.contains("QUESTION:\nHow long does standard shipping take?"));
        assert!(user.contains("ADDITIONAL GRADING CRITERIA:\nMention working days."));
    }
}

#[tokio::test]
async fn suites_skip_unscored_cases_flag_flaky_ones_and_report_regressions() {
    let (fake, _) = scripted();
    let t = with_model(&fake);
    let owner = t.owner().await;
    let ids = corpus(&t, &owner).await;
    let (returns, shipping) = (&ids[0], &ids[1]);
    let a = ask(&t, &owner, "How long does standard shipping take?").await;
    let b = ask(&t, &owner, "Can I return sale items?").await;
    let c = ask(&t, &owner, "How do I wash wool?").await;
    let ship = case_with(
        &t,
        &owner,
        a["messageId"].as_str().unwrap(),
        json!([{"type": "retrieval_top_k_includes_document", "documentId": shipping, "k": 1}]),
    )
    .await;
    let wrong = case_with(
        &t,
        &owner,
        b["messageId"].as_str().unwrap(),
        json!([{"type": "retrieval_excludes_document", "documentId": returns}]),
    )
    .await;
    let bare = t
        .put(&format!("/api/v1/evals/cases/by-source-message/{}", c["messageId"].as_str().unwrap()), &owner, json!({}))
        .await
        .json()["case"]["id"]
        .clone();

    let s = suite(&t, &owner, json!({"mode": "retrieval_only"})).await;
    let results = s["results"].as_array().unwrap();
    let status_of = |id: &str| results.iter().find(|r| r["caseId"] == id).unwrap()["status"].clone();
    assert_eq!(status_of(&ship), "pass");
    assert_eq!(status_of(&wrong), "fail");
    assert_eq!(status_of(bare.as_str().unwrap()), "skipped");
    assert_eq!(s["progress"], json!({"done": 2, "total": 2}));
    assert_eq!(s["summary"]["total"], 3);
    assert_eq!(s["summary"]["scored"], 2);
    assert_eq!(s["summary"]["passing"], 1);
    assert_eq!(s["summary"]["failing"], 1);
    assert_eq!(s["summary"]["unscored"], 1);
    assert_eq!(s["summary"]["passRate"], 0.5);
    let summary = t.get("/api/v1/evals/summary", &owner).await.json();
    assert_eq!(summary, s["summary"]);

    // the shipping page changes: the next suite lists the shipping case as a regression
    t.put(
        &format!("/api/v1/document/{shipping}"),
        &owner,
        json!({"content": "Gift cards. Gift cards never expire and can be used online.", "metadata": {"topic": "gift cards"}}),
    )
    .await
    .assert_status(202);
    t.drain();
    let s2 = suite(&t, &owner, json!({"mode": "retrieval_only"})).await;
    assert_eq!(s2["regressions"]["baselineSuiteId"], s["id"]);
    let regressed = s2["regressions"]["regressed"].as_array().unwrap();
    assert_eq!(regressed.len(), 1, "{s2}");
    assert_eq!(regressed[0]["caseId"], ship.as_str());

    // a judge that disagrees with itself: two passes of three clear a 2-of-3 bar, and it is flaky
    t.patch(
        &format!("/api/v1/evals/cases/{wrong}"),
        &owner,
        json!({"assertions": [{"type": "llm_judge", "expectedAnswer": "No. FLIP"}]}),
    )
    .await
    .assert_status(200);
    let s3 =
        suite(&t, &owner, json!({"mode": "full_assistant", "caseIds": [wrong], "repeat": 3, "passThreshold": 2})).await;
    let r = &s3["results"][0];
    assert_eq!(r["repeats"], 3);
    assert_eq!(r["passes"], 2, "{r}");
    assert_eq!(r["status"], "pass");
    assert_eq!(r["flaky"], true);
    assert_eq!(s3["runSummary"]["flaky"], 1);
    // bad suite bodies
    let r = t.post("/api/v1/evals/cases/run", &owner, json!({"repeat": 9})).await;
    assert_eq!(r.json()["error"]["details"]["field"], "repeat");
    let r = t.post("/api/v1/evals/cases/run", &owner, json!({"repeat": 2, "passThreshold": 3})).await;
    assert_eq!(r.json()["error"]["details"]["field"], "passThreshold");
    let r =
        t.post("/api/v1/evals/cases/run", &owner, json!({"caseIds": ["0190a0b0-0000-7000-8000-00000000dead"]})).await;
    r.assert_status(404);
}

#[tokio::test]
async fn a_candidate_is_compared_with_the_published_revision() {
    let (fake, _) = scripted();
    let t = with_model(&fake);
    let owner = t.owner().await;
    corpus(&t, &owner).await;
    let agent = t.default_agent(&owner).await;
    let v = ask(&t, &owner, "How long does standard shipping take?").await;
    let case = case_with(
        &t,
        &owner,
        v["messageId"].as_str().unwrap(),
        json!([{"type": "answer_does_not_contain", "pattern": "arr,"}]),
    )
    .await;
    // the draft gains a pirate instruction; freeze it as a candidate
    t.put(&format!("/api/v1/agents/{agent}"), &owner, json!({"customInstruction": "Talk like a PIRATE."}))
        .await
        .assert_status(200);
    let state = t.get(&format!("/api/v1/agents/{agent}/revision-state"), &owner).await.json();
    let g = state["draft"]["generation"].as_i64().unwrap();
    let cand = t
        .post(&format!("/api/v1/agents/{agent}/revisions/candidates"), &owner, json!({"expectedDraftGeneration": g}))
        .await
        .json();
    let cand_id = cand["id"].as_str().unwrap();
    let body = json!({"revisionIds": [cand_id], "caseIds": [case], "mode": "full_assistant", "executionPolicy": "safe_test", "idempotencyKey": "cmp-1"});
    let r = t.post(&format!("/api/v1/agents/{agent}/eval-runs"), &owner, body.clone()).await;
    assert_eq!(r.status, 202, "{}", r.text());
    let cmp = r.json();
    let id = cmp["id"].as_str().unwrap();
    // the draft moves on during the run: the result is pinned to the candidate's revision
    t.put(&format!("/api/v1/agents/{agent}"), &owner, json!({"customInstruction": "Be plain."}))
        .await
        .assert_status(200);
    run_jobs(&t);
    let done = t.get(&format!("/api/v1/agents/{agent}/eval-runs/{id}"), &owner).await.json();
    assert_eq!(done["status"], "completed", "{done}");
    let side = |n: &str| done["sides"].as_array().unwrap().iter().find(|s| s["side"] == n).unwrap().clone();
    assert_eq!(side("candidate")["revisionId"], cand_id);
    assert_eq!(side("candidate")["results"][0]["status"], "fail");
    assert_eq!(side("baseline")["results"][0]["status"], "pass");
    assert_eq!(done["regressions"]["regressed"][0]["caseId"], case.as_str());
    let run_id = side("candidate")["results"][0]["runIds"][0].as_str().unwrap().to_string();
    let run = t.get(&format!("/api/v1/evals/runs/{run_id}"), &owner).await.json();
    assert_eq!(run["revisionId"], cand_id);
    assert!(run["resolvedConfig"]["composedInstructions"].as_str().unwrap().contains("PIRATE"));
    // the same key answers with the same comparison
    let again = t.post(&format!("/api/v1/agents/{agent}/eval-runs"), &owner, body).await;
    again.assert_status(200);
    assert_eq!(again.json()["id"], id);
    let r = t
        .post(&format!("/api/v1/agents/{agent}/eval-runs"), &owner, json!({"revisionIds": [], "caseIds": [case]}))
        .await;
    r.assert_status(400);
}

#[tokio::test]
async fn llm_judge_runs_on_the_local_gguf() {
    let gguf =
        steward::models::resolve::local_model_path(&crate::support::test_config(std::path::Path::new("/nonexistent")))
            .expect("the SmolLM2 GGUF is installed by scripts/fetch-models.sh");
    let t = TestApp::with_config(move |c| c.llm.local_model_path = Some(gguf.clone()));
    let owner = t.owner().await;
    corpus(&t, &owner).await;
    let v = ask(&t, &owner, "How long does standard shipping take?").await;
    let case = case_with(
        &t,
        &owner,
        v["messageId"].as_str().unwrap(),
        json!([{"type": "llm_judge", "expectedAnswer": "Standard shipping takes two to four working days."}]),
    )
    .await;
    let r = run(&t, &owner, &case, json!({"mode": "full_assistant"})).await;
    let verdict = &r["assertionVerdicts"][0];
    // the local model's sampling is held to the verdict's grammar: even a 135M model answers in
    // the shape asked for, so the verdict is a real pass or fail with a reason
    assert!(["pass", "fail"].contains(&verdict["status"].as_str().unwrap()), "{r}");
    assert!(!verdict["reason"].as_str().unwrap_or_default().is_empty(), "{r}");
    assert_eq!(verdict["judge"]["judgeModel"].as_str().unwrap().split('/').next(), Some("local"), "{r}");
    assert_eq!(verdict["judge"]["promptHash"].as_str().unwrap().len(), 64);
    // the same judgement again is the same verdict (temperature 0, fixed seed)
    let again = run(&t, &owner, &case, json!({"mode": "full_assistant"})).await;
    assert_eq!(again["assertionVerdicts"][0]["status"], verdict["status"]);
    assert_eq!(again["assertionVerdicts"][0]["reason"], verdict["reason"]);
}

/// Runs `steward eval run` against a server; returns the exit code and stdout.
fn gate(base: &str, token: &str, extra: &[&str]) -> (i32, String) {
    let mut args = vec!["eval", "run", "--server", base, "--token", token, "--mode", "retrieval_only"];
    args.extend_from_slice(extra);
    let out = std::process::Command::new(crate::e2e::BIN).args(&args).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

fn well_formed(xml: &str) -> usize {
    let mut r = quick_xml::Reader::from_str(xml);
    let mut cases = 0;
    loop {
        match r.read_event().unwrap() {
            quick_xml::events::Event::Eof => return cases,
            quick_xml::events::Event::Start(e) | quick_xml::events::Event::Empty(e)
                if e.name().as_ref() == b"testcase" =>
            {
                cases += 1
            }
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_gate_passes_then_fails_on_a_seeded_regression_with_junit() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = crate::e2e::bootstrap(&data);
    let server = crate::e2e::Server::start(&data, &[]);
    let http = reqwest::Client::new();
    let call = |m: reqwest::Method, path: &str, body: Option<Value>| {
        let mut r = http.request(m, format!("{}{path}", server.base)).bearer_auth(&token);
        if let Some(b) = body {
            r = r.json(&b);
        }
        async move {
            let resp = r.send().await.unwrap();
            let status = resp.status();
            let v: Value = resp.json().await.unwrap_or(Value::Null);
            assert!(status.is_success(), "{status}: {v}");
            v
        }
    };
    let idle = || call(reqwest::Method::GET, "/api/v1/document/progress?waitMs=30000", None);
    let mut docs = Vec::new();
    for (title, content, topic) in [
        (
            "Returns policy",
            "Returns and refunds. Items can be returned within 30 days of delivery for a full refund.",
            "returns",
        ),
        (
            "Shipping",
            "Shipping. Standard shipping takes two to four working days. Express delivery arrives the next working day.",
            "shipping",
        ),
        (
            "Care guide",
            "Product care. Wash cotton shirts at 30 degrees. Wool sweaters should be washed by hand.",
            "care",
        ),
    ] {
        let v = call(
            reqwest::Method::POST,
            "/api/v1/document/",
            Some(json!({"title": title, "content": content, "metadata": {"topic": topic}})),
        )
        .await;
        docs.push(v["id"].as_str().unwrap().to_string());
    }
    while idle().await["idle"] != true {}
    let shipping = docs[1].clone();
    let v =
        call(reqwest::Method::POST, "/api/v1/chat", Some(json!({"message": "How long does standard shipping take?"})))
            .await;
    let mid = v["messageId"].as_str().unwrap();
    let c = call(reqwest::Method::PUT, &format!("/api/v1/evals/cases/by-source-message/{mid}"), Some(json!({}))).await;
    let case = c["case"]["id"].as_str().unwrap();
    let assertions = json!([{"type": "retrieval_top_k_includes_document", "documentId": shipping, "k": 1}]);
    call(reqwest::Method::PATCH, &format!("/api/v1/evals/cases/{case}"), Some(json!({"assertions": assertions}))).await;

    let junit = dir.path().join("evals.xml");
    let junit_s = junit.to_str().unwrap();
    let (code, out) = gate(&server.base, &token, &["--min-pass-rate", "0.9", "--junit", junit_s]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("pass rate 100.0%"), "{out}");
    assert_eq!(well_formed(&std::fs::read_to_string(&junit).unwrap()), 1);

    // the shipping page is replaced: the same suite regresses and the gate says so
    call(
        reqwest::Method::PUT,
        &format!("/api/v1/document/{shipping}"),
        Some(json!({"content": "Gift cards. Gift cards never expire and can be used online.", "metadata": {"topic": "gift cards"}})),
    )
    .await;
    while idle().await["idle"] != true {}
    let (code, out) = gate(&server.base, &token, &["--junit", junit_s]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAILED: regressed"), "{out}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(well_formed(&xml), 1);
    assert!(xml.contains("failures=\"1\""), "{xml}");
    assert!(xml.contains("<failure message=\"regressed: "), "{xml}");
    // a server that is not there: exit 2, not a pass
    let (code, _) = gate("http://127.0.0.1:9", &token, &[]);
    assert_eq!(code, 2);
    server.terminate();
}

const ROUTINE_MD: &str = "---
name: Order lookup
vars: order_ref:text
trigger: shopper asks where their order is
end: done (\"Thanks, I will look it up.\")
---
# Collect
Ask for the @order_ref.
[filled @order_ref] -> end:done
";

#[tokio::test]
async fn agent_configuration_and_routine_start_overrides_replay_the_captured_agent() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let ids = corpus(&t, &owner).await;
    let agent = t.default_agent(&owner).await;
    let r = t
        .post(
            &format!("/api/v1/agents/{agent}/routines/portable"),
            &owner,
            json!({"grammarVersion": 1, "content": ROUTINE_MD}),
        )
        .await;
    r.assert_status(201);
    t.publish(&owner, &agent).await;
    let v = ask(&t, &owner, "How long does standard shipping take?").await;
    let case = case_with(
        &t,
        &owner,
        v["messageId"].as_str().unwrap(),
        json!([{"type": "retrieval_includes_document", "documentId": ids[1]}]),
    )
    .await;
    let plain = run(&t, &owner, &case, json!({"mode": "full_assistant"})).await;
    assert_eq!(plain["status"], "pass", "{plain}");
    // the captured configuration with retrieval off: nothing retrieved, the case fails
    let off = run(
        &t,
        &owner,
        &case,
        json!({"mode": "full_assistant", "overrides": {"agentConfigOverride": {"retrievalEnabled": false}}}),
    )
    .await;
    assert_eq!(off["status"], "fail", "{off}");
    assert_eq!(off["resolvedConfig"]["source"], "snapshot");
    assert_eq!(off["observedOutput"]["retrievedChunks"], json!([]));
    let r = t
        .post(
            &format!("/api/v1/evals/cases/{case}/runs"),
            &owner,
            json!({"mode": "full_assistant", "overrides": {"agentConfigOverride": {"noSuchSetting": 1}}}),
        )
        .await;
    r.assert_status(400);
    assert_eq!(r.json()["error"]["details"]["field"], "overrides.agentConfigOverride.noSuchSetting");
    // the replay starts inside the routine: the reply is the routine's
    let inside = run(
        &t,
        &owner,
        &case,
        json!({"mode": "full_assistant", "overrides": {"routineStartState": {"routineName": "Order lookup", "stepId": "collect"}}}),
    )
    .await;
    assert_eq!(inside["observedOutput"]["routine"]["name"], "Order lookup", "{inside}");
    let r = t
        .post(
            &format!("/api/v1/evals/cases/{case}/runs"),
            &owner,
            json!({"mode": "full_assistant", "overrides": {"routineStartState": {"routineName": "Nope"}}}),
        )
        .await;
    r.assert_status(400);
    assert_eq!(r.json()["error"]["details"]["field"], "overrides.routineStartState");
}

#[tokio::test]
async fn a_bundle_carries_the_agents_eval_cases_to_another_workspace() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let ids = corpus(&t, &owner).await;
    let agent = t.default_agent(&owner).await;
    let v = ask(&t, &owner, "How long does standard shipping take?").await;
    case_with(
        &t,
        &owner,
        v["messageId"].as_str().unwrap(),
        json!([{"type": "retrieval_includes_document", "documentId": ids[1]}, {"type": "answer_contains", "pattern": "days"}]),
    )
    .await;
    let bundle = t.get(&format!("/api/v1/agents/{agent}/bundle"), &owner).await.json();
    let cases = bundle["evalCases"].as_array().unwrap();
    assert_eq!(cases.len(), 1);
    assert_eq!(cases[0]["messages"][0], json!({"role": "user", "content": "How long does standard shipping take?"}));
    assert_eq!(cases[0]["assertions"].as_array().unwrap().len(), 2);
    // the snapshot's messages only: no message, conversation or chunk ids, no retrieval result
    let text = bundle.to_string();
    assert!(!text.contains(v["messageId"].as_str().unwrap()));
    assert!(!text.contains(v["conversationId"].as_str().unwrap()));
    assert!(!text.contains("originalRetrievalResult"));

    let ws2 = t.workspace(&owner, "Elsewhere").await;
    let r = t
        .send(
            axum::http::Method::POST,
            "/api/v1/agents/bundle",
            &owner,
            Some(bundle.clone()),
            &[("x-workspace-id", &ws2)],
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let res = r.json();
    assert_eq!(res["counts"]["evalCases"], 1);
    let unresolved = res["unresolved"].as_array().unwrap();
    assert!(
        unresolved.iter().any(|u| u["kind"] == "document_source_unresolved" && u["element"] == "evalCases[0]"),
        "{res}"
    );
    let listed = t.get_in(&ws2, "/api/v1/evals/cases", &owner).await.json();
    let case = &listed["cases"][0];
    assert_eq!(case["agentId"], res["agentId"]);
    assert_eq!(case["status"], "pending");
    assert_eq!(case["question"], "How long does standard shipping take?");
    // checked at once: the imported agent answers it; the source's document is not here
    let cid = case["id"].as_str().unwrap();
    let r = t
        .send(
            axum::http::Method::POST,
            &format!("/api/v1/evals/cases/{cid}/runs"),
            &owner,
            Some(json!({"mode": "full_assistant"})),
            &[("x-workspace-id", &ws2)],
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["assertionVerdicts"][0]["status"], "fail");
    // exported again from the second workspace: the same cases
    let again =
        t.get_in(&ws2, &format!("/api/v1/agents/{}/bundle", res["agentId"].as_str().unwrap()), &owner).await.json();
    assert_eq!(again["evalCases"], bundle["evalCases"]);
    // a bad case is refused with nothing written
    let mut bad = bundle.clone();
    bad["evalCases"][0]["assertions"][0]["documentId"] = json!("not-a-uuid");
    let r =
        t.send(axum::http::Method::POST, "/api/v1/agents/bundle", &owner, Some(bad), &[("x-workspace-id", &ws2)]).await;
    r.assert_status(400);
    assert_eq!(r.json()["error"]["details"]["field"], "evalCases[0].assertions[0].documentId");
}
