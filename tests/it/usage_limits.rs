//! Usage limits, plans and credits through the real router: the admin token, the plan catalog and
//! seeded profiles, no overshoot under concurrency (answers on REST and public chat, document
//! writes at the byte cap), reservations released by a failed turn and swept after a dead process,
//! conversation weights, credits idempotency, month rollover, the organization creation cap, and
//! the 80 % notice delivered to a real webhook receiver and a real SMTP server.

use serde_json::{Value, json};
use steward::config::Secret;

use crate::chat::corpus;
use crate::fake_llm::{FakeProvider, Reply as LlmReply};
use crate::public_chat::{Visitor, public_app};
use crate::support::{Auth, TestApp};

const ADMIN: &str = "usage-admin-secret";

fn admin() -> Auth {
    Auth::Bearer(ADMIN.into())
}

fn with_admin(c: &mut steward::config::Config) {
    c.usage.admin_token = Some(Secret::new(ADMIN.into()));
}

fn app() -> TestApp {
    TestApp::with_config(with_admin)
}

async fn org_of(t: &TestApp, a: &Auth) -> String {
    t.get("/api/v1/auth/me", a).await.json()["organization"]["id"].as_str().unwrap().to_string()
}

async fn put_profile(t: &TestApp, key: &str, body: Value) {
    t.put(&format!("/api/v1/ee/usage-limits/profiles/{key}"), &admin(), body).await.assert_status(200);
}

async fn assign(t: &TestApp, org: &str, key: Option<&str>) -> Value {
    let r = t.put(&format!("/api/v1/ee/usage-limits/accounts/{org}"), &admin(), json!({"profileKey": key})).await;
    r.assert_status(200);
    r.json()
}

async fn usage(t: &TestApp, org: &str) -> Value {
    let r = t.get(&format!("/api/v1/ee/usage-limits/accounts/{org}/usage"), &admin()).await;
    r.assert_status(200);
    r.json()
}

fn held(t: &TestApp, org: &str) -> i64 {
    steward::usage::limits::reservations_held(&t.app, org)
}

/// Sends every request at once (each answer runs on its own blocking thread).
async fn all<F: std::future::Future<Output = crate::support::Resp>>(futs: Vec<F>) -> Vec<crate::support::Resp> {
    futures::future::join_all(futs).await
}

#[tokio::test]
async fn the_admin_routes_need_the_token_and_the_plans_are_public() {
    // no token configured: 503 naming the variable
    let t = TestApp::new();
    let r = t.get("/api/v1/ee/usage-limits/profiles", &admin()).await;
    r.assert_status(503);
    assert_eq!(r.json()["error"]["details"]["missingEnv"], "EE_USAGE_ADMIN_TOKEN");

    let t = app();
    let owner = t.owner().await;
    t.get("/api/v1/ee/usage-limits/profiles", &Auth::Bearer("wrong".into())).await.assert_status(401);
    t.get("/api/v1/ee/usage-limits/profiles", &owner).await.assert_status(401);
    let list = t.get("/api/v1/ee/usage-limits/profiles", &admin()).await.json();
    let keys: Vec<&str> = list["profiles"].as_array().unwrap().iter().map(|p| p["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["comet", "planet", "satellite"]);
    let comet = &list["profiles"][0];
    assert_eq!(
        (&comet["monthlyConversationLimit"], &comet["storedIndexedByteLimit"], &comet["monthlyAnswerLimit"]),
        (&json!(50), &json!(10_485_760), &Value::Null)
    );

    // the catalog is public and cacheable
    let r = t.get("/api/v1/plans", &Auth::None).await;
    r.assert_status(200);
    assert_eq!(r.headers["cache-control"], "public, max-age=300");
    let c = r.json();
    assert_eq!(c["defaultPlanId"], "comet");
    assert_eq!(c["plans"][1]["monthlyIndexedBytes"], 41_943_040);
    assert_eq!(c["countsAs"]["test_run"], 0.5);

    // validation
    let bad = [
        ("Bad_Key", json!({"displayName": "x", "monthlyAnswerLimit": null, "storedDocumentLimit": null})),
        ("ok-key", json!({"monthlyAnswerLimit": null, "storedDocumentLimit": null})),
        ("ok-key", json!({"displayName": "x", "storedDocumentLimit": null})),
        ("ok-key", json!({"displayName": "x", "monthlyAnswerLimit": -1, "storedDocumentLimit": null})),
        (
            "ok-key",
            json!({"displayName": "x", "monthlyAnswerLimit": 1, "storedDocumentLimit": 1, "repliesPerConversation": 0}),
        ),
        ("ok-key", json!({"displayName": "x", "monthlyAnswerLimit": 1, "storedDocumentLimit": 1, "bogus": 1})),
    ];
    for (key, body) in bad {
        let r = t.put(&format!("/api/v1/ee/usage-limits/profiles/{key}"), &admin(), body.clone()).await;
        r.assert_status(400);
    }
    // an edited seeded profile survives a restart (the seed inserts only missing profiles)
    put_profile(
        &t,
        "comet",
        json!({"displayName": "Comet (edited)", "monthlyAnswerLimit": null, "storedDocumentLimit": 5}),
    )
    .await;
    let t = t.restart(vec![]);
    let list = t.get("/api/v1/ee/usage-limits/profiles", &admin()).await.json();
    let comet = &list["profiles"][0];
    assert_eq!((&comet["displayName"], &comet["storedDocumentLimit"]), (&json!("Comet (edited)"), &json!(5)));
    assert_eq!(comet["monthlyConversationLimit"], 50, "omitted optional limits keep their stored value");
    // an unknown account is 404
    t.get("/api/v1/ee/usage-limits/accounts/nope/usage", &admin()).await.assert_status(404);
}

#[tokio::test]
async fn replies_count_their_conversation_before_any_profile_is_assigned() {
    // the meters run without a profile too, so a profile assigned mid-month starts from what was
    // used: a conversation counts at its first reply, not at its tenth
    let t = app();
    let owner = t.owner().await;
    corpus(&t, &owner).await;
    let org = org_of(&t, &owner).await;
    let v = t.post("/api/v1/chat", &owner, json!({"message": "How long does standard shipping take?"})).await;
    v.assert_status(200);
    let cid = v.json()["conversationId"].clone();
    let body = json!({"message": "And the returns policy?", "conversationId": cid});
    t.post("/api/v1/chat", &owner, body).await.assert_status(200);
    assign(&t, &org, Some("comet")).await;
    let u = usage(&t, &org).await;
    assert_eq!(u["monthlyConversations"]["used"], 1, "two replies of one conversation: {u}");
    assert_eq!(u["monthlyAnswers"]["used"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_answers_at_the_limit_minus_one_let_exactly_one_through() {
    let t = TestApp::with_config(|c| {
        with_admin(c);
        c.public_chat_limit_per_ip.max = 0;
    });
    let (owner, anon, _) = public_app(&t).await;
    corpus(&t, &owner).await;
    let org = org_of(&t, &owner).await;
    // no profile: unlimited, still metered
    t.post("/api/v1/chat", &owner, json!({"message": "How long does standard shipping take?"}))
        .await
        .assert_status(200);
    assert_eq!(usage(&t, &org).await["monthlyAnswers"]["used"], 1);
    put_profile(&t, "three", json!({"displayName": "Three", "monthlyAnswerLimit": 3, "storedDocumentLimit": null}))
        .await;
    let u = assign(&t, &org, Some("three")).await;
    assert_eq!(u["monthlyAnswers"]["limit"], 3);
    assert_eq!(u["monthlyConversations"], Value::Null, "answer-metered");
    t.post("/api/v1/chat", &owner, json!({"message": "What is the returns policy?"})).await.assert_status(200);

    let mut visitors = Vec::new();
    for _ in 0..25 {
        visitors.push(Visitor::open(&t, &anon, "anonymous_link", None).await);
    }
    let rest: Vec<_> = (0..25)
        .map(|i| t.post("/api/v1/chat", &owner, json!({"message": format!("How do I care for linen {i}?")})))
        .collect();
    let public: Vec<_> =
        visitors.iter().map(|v| v.say(&t, json!({"message": "How long does standard shipping take?"}))).collect();
    let (a, b) = tokio::join!(all(rest), all(public));
    let results: Vec<_> = a.into_iter().chain(b).collect();
    let ok = results.iter().filter(|r| r.status == 200).count();
    let refused: Vec<_> = results.iter().filter(|r| r.status == 429).collect();
    assert_eq!((ok, refused.len()), (1, 49), "{:?}", results.iter().map(|r| r.status).collect::<Vec<_>>());
    for r in refused {
        let e = r.json()["error"].clone();
        assert_eq!(e["code"], "usage_limit_exceeded");
        assert_eq!((&e["details"]["resource"], &e["details"]["limit"]), (&json!("monthly_answers"), &json!(3)));
        assert!(e["details"]["used"].as_i64().unwrap() >= 2 && e["details"]["resetAt"].is_string(), "{e}");
    }
    assert_eq!(usage(&t, &org).await["monthlyAnswers"]["used"], 3);
    assert_eq!(held(&t, &org), 0, "no reservation outlives its request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_concurrent_document_writes_at_the_byte_cap_let_exactly_one_through() {
    let t = TestApp::with_config(|c| {
        with_admin(c);
        c.uploads_concurrent = 32;
    });
    let owner = t.owner().await;
    let org = org_of(&t, &owner).await;
    put_profile(
        &t,
        "bytes",
        json!({"displayName": "Bytes", "monthlyAnswerLimit": null, "storedDocumentLimit": null, "storedIndexedByteLimit": 1500}),
    )
    .await;
    assign(&t, &org, Some("bytes")).await;
    t.doc(&owner, "First", &"a".repeat(1000), json!({})).await;
    let body = "b".repeat(500);
    let inline: Vec<_> = (0..10)
        .map(|i| t.post("/api/v1/document/", &owner, json!({"title": format!("Inline {i}"), "content": body.clone()})))
        .collect();
    let names: Vec<String> = (0..10).map(|i| format!("f{i}.txt")).collect();
    let files: Vec<_> = names.iter().map(|n| t.upload(&owner, n, body.as_bytes(), &[])).collect();
    let (a, b) = tokio::join!(all(inline), all(files));
    let results: Vec<_> = a.into_iter().chain(b).collect();
    let ok = results.iter().filter(|r| r.status.is_success()).count();
    let refused: Vec<_> = results.iter().filter(|r| r.status == 429).collect();
    assert_eq!((ok, refused.len()), (1, 19), "{:?}", results.iter().map(|r| r.status).collect::<Vec<_>>());
    assert_eq!(refused[0].json()["error"]["details"]["resource"], "stored_indexed_bytes");
    t.drain();
    let u = usage(&t, &org).await;
    assert_eq!((&u["storedIndexedBytes"]["used"], &u["storedDocuments"]["used"]), (&json!(1500), &json!(2)));
    // a new revision that shrinks is accepted at the cap; one that grows is not
    let list = t.get("/api/v1/document/?limit=10", &owner).await.json();
    let first = list["documents"].as_array().unwrap().iter().find(|d| d["title"] == "First").unwrap()["id"].clone();
    let first = first.as_str().unwrap();
    t.patch(&format!("/api/v1/document/{first}"), &owner, json!({"content": "a".repeat(900)})).await;
    let r = t.post("/api/v1/document/", &owner, json!({"title": "More", "content": "c"})).await;
    assert!(r.status.is_success() || r.status == 429, "{}", r.text());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_turn_releases_its_reservation_and_a_dead_process_leaves_none() {
    let fake = FakeProvider::start(|_| LlmReply::status(401, r#"{"error":{"message":"bad key"}}"#));
    let url = fake.url.clone();
    let t = TestApp::with_config(move |c| {
        with_admin(c);
        c.llm.env_keys.insert("openai".into(), Secret::new("sk-test".into()));
        c.llm.base_urls.insert("openai".into(), url.clone());
        c.llm.chat =
            steward::config::LlmSlotDefault { provider: Some("openai".into()), model: Some("gpt-test".into()) };
    });
    let owner = t.owner().await;
    corpus(&t, &owner).await;
    let org = org_of(&t, &owner).await;
    put_profile(&t, "one", json!({"displayName": "One", "monthlyAnswerLimit": 1, "storedDocumentLimit": null})).await;
    assign(&t, &org, Some("one")).await;
    // the model fails after the reservation: nothing is counted, nothing stays held
    let r = t.post("/api/v1/chat", &owner, json!({"message": "How long does standard shipping take?"})).await;
    assert!(r.status.is_server_error(), "{} {}", r.status, r.text());
    assert_eq!(held(&t, &org), 0);
    assert_eq!(usage(&t, &org).await["monthlyAnswers"]["used"], 0);

    // a reservation whose process died (its release never ran) holds capacity until the restart
    let ws = t.get_ws();
    let agent = t.default_agent(&owner).await;
    let work = steward::usage::limits::AnswerWork {
        workspace: &ws,
        agent: &agent,
        conversation: None,
        kind: steward::usage::limits::AnswerKind::Standalone,
    };
    let hold = steward::usage::limits::reserve_answer(&t.app, &work).unwrap();
    std::mem::forget(hold);
    assert_eq!(held(&t, &org), 1);
    let again = steward::usage::limits::reserve_answer(&t.app, &work).err().expect("the limit is held");
    assert_eq!(again.details.unwrap()["resource"], "monthly_answers");
    let t = t.restart(vec![]);
    assert_eq!(held(&t, &org), 0, "swept at start");
    drop(steward::usage::limits::reserve_answer(&t.app, &work).unwrap());
}

#[tokio::test]
async fn conversations_count_in_blocks_test_runs_half_and_greetings_nothing() {
    let t = app();
    let owner = t.owner().await;
    corpus(&t, &owner).await;
    let org = org_of(&t, &owner).await;
    assign(&t, &org, Some("comet")).await;
    let mut cid: Option<String> = None;
    for i in 0..10 {
        let mut body = json!({"message": format!("How long does standard shipping take ({i})?")});
        if let Some(c) = &cid {
            body["conversationId"] = json!(c);
        }
        let v = t.post("/api/v1/chat", &owner, body).await;
        v.assert_status(200);
        cid = v.json()["conversationId"].as_str().map(str::to_string);
    }
    let conv = |u: &Value| u["monthlyConversations"]["used"].clone();
    assert_eq!(conv(&usage(&t, &org).await), 1, "10 replies: one conversation");
    let body = json!({"message": "And the returns policy?", "conversationId": cid});
    t.post("/api/v1/chat", &owner, body).await.assert_status(200);
    assert_eq!(conv(&usage(&t, &org).await), 2, "the 11th reply starts a second block");
    // a test chat run counts half
    let agent = t.default_agent(&owner).await;
    let e = t.post(&format!("/api/v1/agents/{agent}/test-executions"), &owner, json!({})).await;
    e.assert_status(201);
    let eid = e.json()["id"].as_str().unwrap().to_string();
    let m = format!("/api/v1/agents/{agent}/test-executions/{eid}/messages");
    t.post(&m, &owner, json!({"message": "How long does standard shipping take?"})).await.assert_status(200);
    let u = usage(&t, &org).await;
    assert_eq!(conv(&u), 2.5);
    assert_eq!(
        u["monthlyConversations"]["byKind"],
        json!({"conversation": 2, "copilot": 0, "test_run": 0.5, "pulse_report": 0})
    );
    assert_eq!(u["monthlyAnswers"]["limit"], Value::Null, "not enforced on a conversation-metered profile");
    assert_eq!(u["monthlyAnswers"]["used"], 12);
    assert_eq!(u["byAgent"][0]["answers"], 12);
    // the dashboard's own read
    let me = t.get("/api/v1/ee/usage-limits/me", &owner).await.json();
    assert_eq!(me["monthlyConversations"]["used"], 2.5);
    assert_eq!(me["profile"]["key"], "comet");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn credits_apply_once_per_reference_under_concurrency() {
    let t = app();
    let owner = t.owner().await;
    let org = org_of(&t, &owner).await;
    let path = format!("/api/v1/ee/usage-limits/accounts/{org}/credits");
    // only on conversation-metered profiles; an unknown account is 404
    put_profile(&t, "answers", json!({"displayName": "A", "monthlyAnswerLimit": 5, "storedDocumentLimit": null})).await;
    assign(&t, &org, Some("answers")).await;
    t.post(&path, &admin(), json!({"conversations": 300, "reference": "x"})).await.assert_status(409);
    t.post("/api/v1/ee/usage-limits/accounts/nope/credits", &admin(), json!({"conversations": 1, "reference": "x"}))
        .await
        .assert_status(404);
    t.post(&path, &owner, json!({"conversations": 1, "reference": "x"})).await.assert_status(401);
    assign(&t, &org, Some("comet")).await;
    let root = admin();
    let calls: Vec<_> =
        (0..10).map(|_| t.post(&path, &root, json!({"conversations": 300, "reference": "invoice-42"}))).collect();
    let results = all(calls).await;
    let applied = results.iter().filter(|r| r.json()["applied"] == true).count();
    assert_eq!(applied, 1);
    assert!(results.iter().all(|r| r.status == 200 && r.json()["credits"] == 300));
    let u = usage(&t, &org).await;
    assert_eq!((&u["monthlyConversations"]["credits"], &u["monthlyConversations"]["limit"]), (&json!(300), &json!(50)));
}

#[tokio::test]
async fn the_month_rolls_over_with_no_job_and_past_periods_stay_readable() {
    let t = app();
    let owner = t.owner().await;
    corpus(&t, &owner).await;
    let org = org_of(&t, &owner).await;
    put_profile(&t, "two", json!({"displayName": "Two", "monthlyAnswerLimit": 1, "storedDocumentLimit": null})).await;
    assign(&t, &org, Some("two")).await;
    t.post("/api/v1/chat", &owner, json!({"message": "How long does standard shipping take?"}))
        .await
        .assert_status(200);
    let r = t.post("/api/v1/chat", &owner, json!({"message": "What is the returns policy?"})).await;
    r.assert_status(429);
    let reset = r.json()["error"]["details"]["resetAt"].as_str().unwrap().to_string();
    let first = usage(&t, &org).await["period"].as_str().unwrap().to_string();
    // move the clock to the reset instant: a new period key, nothing reset by a job
    let at = chrono::DateTime::parse_from_rfc3339(&reset).unwrap().timestamp_millis();
    t.clock.advance_ms(at - steward::clock::Clock::now_ms(&*t.clock));
    t.post("/api/v1/chat", &owner, json!({"message": "What is the returns policy?"})).await.assert_status(200);
    let now = usage(&t, &org).await;
    assert_ne!(now["period"], first.as_str());
    assert_eq!(now["monthlyAnswers"]["used"], 1);
    let past = t.get(&format!("/api/v1/ee/usage-limits/accounts/{org}/usage?period={first}"), &admin()).await.json();
    assert_eq!(past["monthlyAnswers"]["used"], 1);
    assert_eq!(past["monthlyAnswers"]["resetAt"], reset.as_str());
    t.get(&format!("/api/v1/ee/usage-limits/accounts/{org}/usage?period=2026-13"), &admin()).await.assert_status(400);
}

#[tokio::test]
async fn organization_creation_is_capped_per_user_and_month_with_an_override() {
    let t = TestApp::with_config(|c| {
        with_admin(c);
        c.usage.max_orgs_per_user_per_month = 2;
    });
    let owner = t.owner().await;
    let me = t.get("/api/v1/auth/me", &owner).await.json();
    let user = me["user"]["id"].as_str().unwrap().to_string();
    // registration and workspace creation do not count
    t.workspace(&owner, "Second").await;
    for i in 0..2 {
        t.post("/api/v1/account/accounts", &owner, json!({"name": format!("Org {i}")})).await.assert_status(201);
    }
    let r = t.post("/api/v1/account/accounts", &owner, json!({"name": "One too many"})).await;
    r.assert_status(429);
    let d = r.json()["error"]["details"].clone();
    assert_eq!(
        (&r.json()["error"]["code"], &d["limit"], &d["used"]),
        (&json!("rate_limit_exceeded"), &json!(2), &json!(2))
    );
    assert!(d["periodStart"].is_string() && d["resetAt"].is_string());
    let path = format!("/api/v1/ee/usage-limits/org-creation/users/{user}");
    assert_eq!(t.get(&path, &admin()).await.json()["override"]["overridden"], false);
    t.put(&path, &admin(), json!({"monthlyLimit": 3})).await.assert_status(200);
    t.post("/api/v1/account/accounts", &owner, json!({"name": "Third"})).await.assert_status(201);
    t.post("/api/v1/account/accounts", &owner, json!({"name": "Fourth"})).await.assert_status(429);
    t.put(&path, &admin(), json!({"monthlyLimit": null})).await.assert_status(200);
    t.post("/api/v1/account/accounts", &owner, json!({"name": "Unlimited"})).await.assert_status(201);
    t.delete(&path, &admin()).await.assert_status(204);
    t.post("/api/v1/account/accounts", &owner, json!({"name": "Back to the default"})).await.assert_status(429);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_eighty_percent_notice_reaches_a_real_webhook_receiver_and_smtp_server_once() {
    let smtp = crate::delivery::Smtp::start();
    let port = smtp.port;
    let r = crate::receiver::Receiver::start().await;
    let ca = r.ca_file.clone();
    let t = TestApp::with_config(move |c| {
        with_admin(c);
        c.delivery.allow = vec!["127.0.0.1/32".into()];
        c.delivery.ca_file = Some(ca);
        c.smtp = Some(steward::delivery::config::SmtpConfig {
            host: "127.0.0.1".into(),
            port,
            security: steward::delivery::config::SmtpSecurity::None,
            username: None,
            password: None,
            from: "Steward <steward@example.com>".into(),
        });
    });
    let owner = t.owner().await;
    corpus(&t, &owner).await;
    let org = org_of(&t, &owner).await;
    let agent = t.default_agent(&owner).await;
    let hook = format!("{}/usage-hook", r.base);
    let delivery = json!({"recipientEmails": ["ops@example.com"], "webhook": {"url": hook}});
    t.put(&format!("/api/v1/agents/{agent}"), &owner, json!({"contactRequestDelivery": delivery}))
        .await
        .assert_status(200);
    t.publish(&owner, &agent).await;
    put_profile(&t, "five", json!({"displayName": "Five", "monthlyAnswerLimit": 5, "storedDocumentLimit": null})).await;
    assign(&t, &org, Some("five")).await;
    for i in 0..4 {
        let body = json!({"message": format!("How long does standard shipping take ({i})?")});
        t.post("/api/v1/chat", &owner, body).await.assert_status(200);
        let app = t.app.clone();
        tokio::task::spawn_blocking(move || steward::jobs::run_until_idle(&app).unwrap()).await.unwrap();
    }
    // the fourth answer crossed 80 %: one webhook, one email, and no repeat
    let hits = r.hits();
    assert_eq!(hits.len(), 1, "{hits:?}");
    let body = &hits[0].body;
    assert_eq!(
        (&body["resource"], &body["threshold"], &body["used"]),
        (&json!("monthly_answers"), &json!(80), &json!(4))
    );
    let mails = smtp.messages();
    assert_eq!(mails.len(), 1);
    assert!(mails[0].contains("ops@example.com") && mails[0].contains("80 %"), "{}", mails[0]);

    // a document write that takes the stored-documents meter past 80 % (and not to 100 %) is
    // noticed once too, through the default agent's destination
    let docs = usage(&t, &org).await["storedDocuments"]["used"].as_i64().unwrap();
    let cap = (docs + 2..=docs * 10).find(|l| docs * 100 < 80 * l && (docs + 1) * 100 >= 80 * l).unwrap();
    put_profile(&t, "five", json!({"displayName": "Five", "monthlyAnswerLimit": 5, "storedDocumentLimit": cap})).await;
    t.doc(&owner, "Gift cards", "Gift cards never expire and can be used online and in stores.", json!({})).await;
    let app = t.app.clone();
    tokio::task::spawn_blocking(move || steward::jobs::run_until_idle(&app).unwrap()).await.unwrap();
    let hits = r.hits();
    assert_eq!(hits.len(), 2, "{hits:?}");
    let body = &hits[1].body;
    assert_eq!(
        (&body["resource"], &body["threshold"], &body["used"], &body["limit"], &body["resetAt"]),
        (&json!("stored_documents"), &json!(80), &json!(docs + 1), &json!(cap), &Value::Null)
    );
    assert_eq!((&body["agentId"], &body["kind"]), (&Value::Null, &Value::Null));
    let mails = smtp.messages();
    assert_eq!(mails.len(), 2);
    assert!(mails[1].contains("stored documents"), "{}", mails[1]);
}

/// The Usage page in a real browser against the real binary: the plan card at 80 % with the banner
/// naming the kind that drives usage, answers by agent, axe clean; then the 100 % state.
#[tokio::test(flavor = "multi_thread")]
async fn the_usage_page_shows_the_plan_card_and_the_eighty_percent_banner() {
    use crate::browser::{check_page, sign_in_as_root};
    use crate::e2e::{Api, Server, bootstrap};
    use reqwest::Method;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = bootstrap(&data);
    let server = Server::start(&data, &[("EE_USAGE_ADMIN_TOKEN", ADMIN)]);
    let base = server.base.clone();
    let api = Api::new(&base, &token);
    let root = Api::new(&base, ADMIN);
    let org = api.call(Method::GET, "/api/v1/auth/me", None).await["organization"]["id"].as_str().unwrap().to_string();
    let profile = json!({"displayName": "Small", "monthlyAnswerLimit": null, "storedDocumentLimit": null,
                         "monthlyConversationLimit": 5});
    root.call(Method::PUT, "/api/v1/ee/usage-limits/profiles/small", Some(profile)).await;
    root.call(Method::PUT, &format!("/api/v1/ee/usage-limits/accounts/{org}"), Some(json!({"profileKey": "small"})))
        .await;
    for i in 0..4 {
        api.call(Method::POST, "/api/v1/chat", Some(json!({"message": format!("Hello number {i}")}))).await;
    }

    let driver = crate::webdriver::Driver::start();
    let b = driver.session().await;
    let mut problems = Vec::new();
    sign_in_as_root(&b, &base).await;
    b.go(&format!("{base}/app/settings/usage")).await;
    let banner = b.tid("usage-banner").await.text().await;
    assert!(banner.contains("80 %") && banner.contains("conversations"), "{banner}");
    assert!(b.tid("plan-used").await.text().await.contains("4 of 5 conversations"));
    b.tid("usage-by-agent").await;
    check_page(&b, "usage-80", &mut problems).await;

    api.call(Method::POST, "/api/v1/chat", Some(json!({"message": "One more"}))).await;
    b.go(&format!("{base}/app/settings/usage")).await;
    let full = b.tid("usage-full").await.text().await;
    assert!(full.contains("limit for this month is reached"), "{full}");
    check_page(&b, "usage-100", &mut problems).await;
    assert!(problems.is_empty(), "{problems:#?}");
    server.terminate();
}

/// `kill -9` while an answer holds its reservation (its model call is in flight): the restarted
/// server holds nothing, so the one answer the limit allows still goes through.
#[tokio::test(flavor = "multi_thread")]
async fn kill_nine_between_reservation_and_commit_leaves_nothing_held_after_the_restart() {
    use crate::e2e::{Api, Server, bootstrap};
    use reqwest::Method;
    let trigger = "How long does standard shipping take?";
    let (fake, started, _release) = crate::chat::held_model(trigger);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = bootstrap(&data);
    let env = [
        ("EE_USAGE_ADMIN_TOKEN", ADMIN),
        ("OPENAI_API_KEY", "sk-test"),
        ("OPENAI_BASE_URL", fake.url.as_str()),
        ("LLM_CHAT_PROVIDER", "openai"),
        ("LLM_CHAT_MODEL", "gpt-test"),
    ];
    let server = Server::start(&data, &env);
    let (api, root) = (Api::new(&server.base, &token), Api::new(&server.base, ADMIN));
    let org = api.call(Method::GET, "/api/v1/auth/me", None).await["organization"]["id"].as_str().unwrap().to_string();
    let one = json!({"displayName": "One", "monthlyAnswerLimit": 1, "storedDocumentLimit": null});
    root.call(Method::PUT, "/api/v1/ee/usage-limits/profiles/one", Some(one)).await;
    root.call(Method::PUT, &format!("/api/v1/ee/usage-limits/accounts/{org}"), Some(json!({"profileKey": "one"})))
        .await;
    let http = reqwest::Client::new();
    let chat = |base: String, message: &'static str| {
        let (http, token) = (http.clone(), token.clone());
        async move {
            http.post(format!("{base}/api/v1/chat"))
                .bearer_auth(token)
                .json(&json!({"message": message}))
                .send()
                .await
                .map(|r| r.status().as_u16())
        }
    };
    let held = tokio::spawn(chat(server.base.clone(), trigger));
    crate::chat::wait(started).await;
    // the reservation is held: the account's one answer is taken meanwhile
    assert_eq!(chat(server.base.clone(), "What is the returns policy?").await.unwrap(), 429);
    server.kill();
    assert!(held.await.unwrap().is_err(), "the answer died with the server");

    let server = Server::start(&data, &env);
    let root = Api::new(&server.base, ADMIN);
    assert_eq!(chat(server.base.clone(), "What is the returns policy?").await.unwrap(), 200);
    let u = root.call(Method::GET, &format!("/api/v1/ee/usage-limits/accounts/{org}/usage"), None).await;
    assert_eq!(u["monthlyAnswers"]["used"], 1);
    server.terminate();
}
