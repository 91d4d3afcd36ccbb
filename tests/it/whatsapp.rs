//! The WhatsApp connector end to end, in process: signed webhook deliveries built from the
//! documented payload shapes, the turn as a queue job, and a real local HTTPS server speaking the
//! Graph API's message-send shape that records every send (its own CA, as the delivery tests do).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, header};
use serde_json::{Value, json};
use steward::app::App;
use steward::connectors::whatsapp::{delivery_json, sign};

use crate::receiver::{Hit, Receiver, Reply};
use crate::support::{Auth, Resp, TestApp};

pub const PHONE: &str = "106540352242922";
pub const APP_SECRET: &str = "meta-app-secret-for-tests";
pub const TOKEN: &str = "EAAG-access-token-for-tests";
const BURST_MS: i64 = 2000;

/// A workspace with the WhatsApp connector configured and enabled, its Graph API on `graph`.
pub struct Wa {
    pub t: TestApp,
    pub owner: Auth,
    pub graph: Receiver,
    pub ws: String,
    pub verify_token: String,
}

/// Graph's answer to a send.
pub fn sent_ok() -> Reply {
    Reply::status(200).json(json!({
        "messaging_product": "whatsapp",
        "contacts": [{"input": "16505551234", "wa_id": "16505551234"}],
        "messages": [{"id": "wamid.HBgLMTY1MDU1NTEyMzQVAgARGBI"}],
    }))
}

/// Runs due jobs off the async runtime (sends block on the network; the fake Graph API needs the
/// runtime to answer).
pub async fn run_jobs(app: &Arc<App>) -> usize {
    let app = app.clone();
    tokio::task::spawn_blocking(move || steward::jobs::run_until_idle(&app).unwrap()).await.unwrap()
}

/// A signed delivery of one message from `from` to the webhook of workspace `ws` on `t`.
pub async fn say_to(t: &TestApp, ws: &str, from: &str, id: &str, text: Option<&str>) -> Resp {
    let body = delivery_json(PHONE, &[(from, id, text)]).to_string();
    let req = Request::builder()
        .method(Method::POST)
        .uri(format!("/api/connectors/whatsapp/{ws}/webhook"))
        .header(header::CONTENT_TYPE, "application/json")
        .header("x-hub-signature-256", sign(APP_SECRET, body.as_bytes()))
        .body(Body::from(body))
        .unwrap();
    t.raw(req).await
}

impl Wa {
    pub async fn start() -> Wa {
        Wa::start_with(|_| {}).await
    }

    pub async fn start_with(f: impl FnOnce(&mut steward::config::Config)) -> Wa {
        let graph = Receiver::start().await;
        graph.set_default(sent_ok());
        let (ca, base) = (graph.ca_file.clone(), graph.base.clone());
        let t = TestApp::with_config(move |c| {
            c.encryption_key = Some(steward::config::Secret::new([7u8; 32]));
            c.delivery.allow = vec!["127.0.0.1/32".into()];
            c.delivery.ca_file = Some(ca);
            c.connectors.graph_base_url = format!("{base}/v21.0");
            c.connectors.burst = Duration::from_millis(BURST_MS as u64);
            f(c);
        });
        let owner = t.owner().await;
        let ws = t.get_ws();
        let r = t
            .put(
                "/api/v1/connectors/whatsapp",
                &owner,
                json!({"config": {"phone_number_id": PHONE, "access_token": TOKEN, "app_secret": APP_SECRET,
                                  "business_account_id": "102290129340398"}}),
            )
            .await;
        r.assert_status(200);
        let verify_token = r.json()["generatedSecrets"]["webhook_verify_token"].as_str().unwrap().to_string();
        t.post("/api/v1/connectors/whatsapp/enable", &owner, json!({})).await.assert_status(200);
        Wa { t, owner, graph, ws, verify_token }
    }

    pub fn path(&self) -> String {
        format!("/api/connectors/whatsapp/{}/webhook", self.ws)
    }

    /// POSTs `body` as is, with `signature` when given.
    pub async fn deliver(&self, body: Vec<u8>, signature: Option<String>) -> Resp {
        let mut b =
            Request::builder().method(Method::POST).uri(self.path()).header(header::CONTENT_TYPE, "application/json");
        if let Some(s) = signature {
            b = b.header("x-hub-signature-256", s);
        }
        self.t.raw(b.body(Body::from(body)).unwrap()).await
    }

    /// A signed delivery of one message from `from` (`None` text: an image).
    pub async fn say(&self, from: &str, id: &str, text: Option<&str>) -> Resp {
        say_to(&self.t, &self.ws, from, id, text).await
    }

    /// Lets the burst window pass and runs every job (turns, relays, sends).
    pub async fn settle(&self) {
        self.t.clock.advance_ms(BURST_MS + 1);
        run_jobs(&self.t.app).await;
    }

    /// What the Graph API was sent (successfully or not).
    pub fn sends(&self) -> Vec<Hit> {
        self.graph.hits()
    }

    /// The conversation the sender's messages went to.
    pub fn conversation_of(&self, wa_id: &str) -> String {
        let wa_id = wa_id.to_string();
        self.t
            .app
            .db
            .read(move |c| {
                Ok(c.query_row("SELECT conversation_id FROM whatsapp_contacts WHERE wa_id = ?1", [wa_id], |r| {
                    r.get(0)
                })?)
            })
            .unwrap()
    }

    pub async fn messages(&self, cid: &str) -> Vec<Value> {
        let r = self.t.get(&format!("/api/v1/history/chat/{cid}"), &self.owner).await;
        r.assert_status(200);
        r.json()["messages"].as_array().unwrap().clone()
    }

    /// Turn traces of the workspace.
    pub fn turns(&self) -> i64 {
        self.t
            .app
            .db
            .read(|c| Ok(c.query_row("SELECT COUNT(*) FROM turn_traces WHERE surface = 'whatsapp'", [], |r| r.get(0))?))
            .unwrap()
    }

    /// The agent hands off what it cannot answer; `from` asks it something it cannot (message
    /// `id`), and the conversation, now in the Inbox, is returned.
    pub async fn handed_off(&self, from: &str, id: &str) -> String {
        let agent = self.t.default_agent(&self.owner).await;
        let body = json!({"handoffOnRetrievalMiss": true});
        self.t.put(&format!("/api/v1/agents/{agent}"), &self.owner, body).await.assert_status(200);
        self.t.publish(&self.owner, &agent).await;
        self.say(from, id, Some("Do you repair vintage radios?")).await.assert_status(200);
        self.settle().await;
        self.conversation_of(from)
    }

    /// An operator's Inbox reply in `cid`, at the conversation's current ownership version.
    pub async fn operator_reply(&self, cid: &str, text: &str) -> Resp {
        let tail = self.t.get(&format!("/api/v1/history/chat/{cid}/tail"), &self.owner).await.json();
        let version = tail["ownership"]["version"].as_i64().unwrap();
        let body = json!({"message": text, "expectedVersion": version});
        self.t.post(&format!("/api/v1/conversations/{cid}/reply"), &self.owner, body).await
    }

    /// Adds a document the built-in answerer can quote, ready for search.
    pub async fn knowledge(&self) {
        self.t
            .doc(
                &self.owner,
                "Opening hours",
                "The Harbour Bakery is open from 7 am to 6 pm, Monday to Saturday. On Sundays the bakery is closed.",
                json!({}),
            )
            .await;
        self.t.drain_blocking().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_verify_token_handshake_answers_the_challenge_only_with_the_token() {
    let w = Wa::start().await;
    let q = |mode: &str, token: &str| {
        format!("{}?hub.mode={mode}&hub.verify_token={token}&hub.challenge=1158201444", w.path())
    };
    let r = w.t.get(&q("subscribe", &w.verify_token), &Auth::None).await;
    r.assert_status(200);
    assert_eq!(r.text(), "1158201444");
    assert!(r.headers[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/plain"));
    w.t.get(&q("subscribe", "wrong-token"), &Auth::None).await.assert_status(403);
    w.t.get(&q("unsubscribe", &w.verify_token), &Auth::None).await.assert_status(403);
    // another workspace (or none) has no token to match
    let other = "/api/connectors/whatsapp/00000000-0000-0000-0000-000000000000/webhook?hub.mode=subscribe&hub.verify_token=x&hub.challenge=1";
    w.t.get(other, &Auth::None).await.assert_status(403);
}

#[tokio::test(flavor = "multi_thread")]
async fn signatures_are_checked_over_the_raw_bytes_and_fail_closed() {
    let w = Wa::start().await;
    // emoji and non-ASCII text as raw UTF-8, and the same text escaped: each signed over its bytes
    let raw = delivery_json(PHONE, &[("16505551234", "wamid.raw", Some("Grüße 👋 ¿qué tal? 你好"))]).to_string();
    assert!(raw.contains('👋'));
    let r = w.deliver(raw.clone().into_bytes(), Some(sign(APP_SECRET, raw.as_bytes()))).await;
    r.assert_status(200);
    assert_eq!(r.json()["received"], 1);
    let escaped = raw.replace("👋", "\\ud83d\\udc4b").replace("wamid.raw", "wamid.esc");
    w.deliver(escaped.clone().into_bytes(), Some(sign(APP_SECRET, escaped.as_bytes()))).await.assert_status(200);
    // tampered: one byte changed after signing
    let sig = sign(APP_SECRET, raw.as_bytes());
    let tampered = raw.replace("Grüße", "Grüsse");
    let r = w.deliver(tampered.into_bytes(), Some(sig.clone())).await;
    r.assert_status(401);
    assert_eq!(r.code(), "unauthorized");
    // missing, malformed, another secret's
    w.deliver(raw.clone().into_bytes(), None).await.assert_status(401);
    w.deliver(raw.clone().into_bytes(), Some("sha256=nothex".into())).await.assert_status(401);
    w.deliver(raw.clone().into_bytes(), Some(sign("another-secret", raw.as_bytes()))).await.assert_status(401);
    // signed but not a delivery: 400
    let junk = b"[1,2,3]".to_vec();
    w.deliver(junk.clone(), Some(sign(APP_SECRET, &junk))).await.assert_status(400);
    // what was stored: the two signed messages, the text byte for byte
    let log = w.t.get("/api/v1/connectors/whatsapp/messages?direction=in", &w.owner).await.json();
    let bodies: Vec<&str> = log["messages"].as_array().unwrap().iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, vec!["Grüße 👋 ¿qué tal? 你好"; 2]);
}

#[tokio::test(flavor = "multi_thread")]
async fn five_concurrent_replays_of_one_message_make_one_turn_and_one_reply() {
    let w = Wa::start().await;
    w.knowledge().await;
    let body = delivery_json(PHONE, &[("16505551234", "wamid.once", Some("When is the bakery open?"))]).to_string();
    let sig = sign(APP_SECRET, body.as_bytes());
    let sends = (0..5).map(|_| w.deliver(body.clone().into_bytes(), Some(sig.clone())));
    let results = futures::future::join_all(sends).await;
    assert!(results.iter().all(|r| r.status == 200));
    let stored: i64 = results.iter().map(|r| r.json()["received"].as_i64().unwrap()).sum();
    assert_eq!(stored, 1, "one of the five stored it");
    w.settle().await;
    assert_eq!(w.turns(), 1);
    let sends = w.sends();
    assert_eq!(sends.len(), 1, "one reply");
    let s = &sends[0];
    assert_eq!(s.path, format!("/v21.0/{PHONE}/messages"));
    assert_eq!(s.headers["authorization"], format!("Bearer {TOKEN}").as_str());
    assert_eq!(s.body["messaging_product"], "whatsapp");
    assert_eq!(s.body["to"], "16505551234");
    assert_eq!(s.body["type"], "text");
    assert!(s.body["text"]["body"].as_str().unwrap().contains("7 am to 6 pm"), "{}", s.body);
    // replayed again later: still nothing new
    w.deliver(body.into_bytes(), Some(sig)).await.assert_status(200);
    w.settle().await;
    assert_eq!((w.turns(), w.sends().len()), (1, 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_burst_of_three_messages_is_answered_as_one_turn() {
    let w = Wa::start().await;
    w.knowledge().await;
    for (i, text) in ["Hi!", "I have a question", "when is the bakery open on sundays?"].iter().enumerate() {
        w.say("16505550001", &format!("wamid.burst{i}"), Some(text)).await.assert_status(200);
        w.t.clock.advance_ms(300);
    }
    w.settle().await;
    assert_eq!(w.turns(), 1);
    assert_eq!(w.sends().len(), 1);
    let cid = w.conversation_of("16505550001");
    let msgs = w.messages(&cid).await;
    let users: Vec<&Value> = msgs.iter().filter(|m| m["role"] == "user").collect();
    assert_eq!(users.len(), 1, "one turn: {msgs:?}");
    assert_eq!(users[0]["text"], "Hi!\nI have a question\nwhen is the bakery open on sundays?");
    let log = w.t.get("/api/v1/connectors/whatsapp/messages?direction=in", &w.owner).await.json();
    assert!(log["messages"].as_array().unwrap().iter().all(|m| m["status"] == "answered"), "{log}");
    // a message after the reply is a new turn in the same conversation
    w.say("16505550001", "wamid.burst3", Some("thanks")).await.assert_status(200);
    w.settle().await;
    assert_eq!(w.turns(), 2);
    assert_eq!(w.conversation_of("16505550001"), cid);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_gets_the_unsupported_reply_verbatim_or_is_skipped() {
    let w = Wa::start().await;
    w.say("16505550002", "wamid.img1", None).await.assert_status(200);
    w.settle().await;
    assert!(w.sends().is_empty(), "no reply configured: skipped");
    assert_eq!(w.turns(), 0);
    let reply = "Sorry — I can only read text messages 🙏";
    w.t.put("/api/v1/connectors/whatsapp", &w.owner, json!({"config": {"unsupported_message_reply": reply}}))
        .await
        .assert_status(200);
    w.say("16505550002", "wamid.img2", None).await.assert_status(200);
    w.settle().await;
    assert_eq!(w.turns(), 0, "no turn for a non-text message");
    let sends = w.sends();
    assert_eq!(sends.len(), 1);
    assert_eq!(sends[0].body["text"]["body"], reply);
    let log = w.t.get("/api/v1/connectors/whatsapp/messages", &w.owner).await.json();
    let statuses: Vec<(&str, &str)> = log["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["direction"].as_str().unwrap(), m["status"].as_str().unwrap()))
        .collect();
    assert_eq!(statuses, vec![("out", "queued"), ("in", "unsupported"), ("in", "skipped")]);
    assert_eq!(log["messages"][0]["deliveryStatus"], "success");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_send_that_fails_twice_is_delivered_exactly_once() {
    let w = Wa::start().await;
    w.knowledge().await;
    w.graph.push(Reply::status(503));
    w.graph.push(Reply::status(503));
    w.say("16505550003", "wamid.retry", Some("When is the bakery open?")).await.assert_status(200);
    w.settle().await;
    assert_eq!(w.sends().len(), 1);
    for attempt in 1..=2 {
        w.t.clock.advance_ms(steward::jobs::max_backoff(attempt).as_millis() as i64);
        run_jobs(&w.t.app).await;
    }
    let sends = w.sends();
    assert_eq!(sends.len(), 3, "two 503s, then the delivery");
    let key = |h: &Hit| h.headers["idempotency-key"].to_str().unwrap().to_string();
    assert!(sends.iter().all(|h| key(h) == key(&sends[0]) && h.raw == sends[0].raw), "the same send each time");
    // nothing more is due, however long we wait
    w.t.clock.advance_ms(3_600_000);
    run_jobs(&w.t.app).await;
    assert_eq!(w.sends().len(), 3);
    assert_eq!(w.turns(), 1);
    let log = w.t.get("/api/v1/connectors/whatsapp/messages?direction=out", &w.owner).await.json();
    assert_eq!(log["messages"].as_array().unwrap().len(), 1);
    assert_eq!(log["messages"][0]["deliveryStatus"], "success");
}

#[tokio::test(flavor = "multi_thread")]
async fn takeover_replies_go_to_whatsapp_and_handback_returns_to_the_agent() {
    let w = Wa::start().await;
    let cid = w.handed_off("16505550004", "wamid.h1").await;
    // the handed-off WhatsApp conversation is in the Inbox
    let inbox = w.t.get("/api/v1/inbox", &w.owner).await.json();
    let item = inbox["items"].as_array().unwrap().iter().find(|i| i["conversationId"] == cid.as_str()).cloned();
    let item = item.unwrap_or_else(|| panic!("not in the inbox: {inbox}"));
    assert_eq!(item["kind"], "handoff");
    let before = w.sends().len();
    let r = w.operator_reply(&cid, "Hi, Olive here — yes we do! 📻").await;
    r.assert_status(201);
    let version = r.json()["ownership"]["version"].as_i64().unwrap();
    run_jobs(&w.t.app).await;
    let sends = w.sends();
    assert_eq!(sends.len(), before + 1, "the operator's reply went out");
    assert_eq!(sends.last().unwrap().body["text"]["body"], "Hi, Olive here — yes we do! 📻");
    assert_eq!(sends.last().unwrap().body["to"], "16505550004");
    // while a person holds it, a customer message gets no agent answer
    w.say("16505550004", "wamid.h2", Some("Great, how much?")).await.assert_status(200);
    w.settle().await;
    assert_eq!(w.sends().len(), before + 1);
    // hand back: the agent answers again
    w.t.post(&format!("/api/v1/conversations/{cid}/handback"), &w.owner, json!({"expectedVersion": version}))
        .await
        .assert_status(200);
    w.knowledge().await;
    w.say("16505550004", "wamid.h3", Some("When is the bakery open?")).await.assert_status(200);
    w.settle().await;
    let last = w.sends().last().unwrap().body.clone();
    assert!(last["text"]["body"].as_str().unwrap().contains("7 am"), "{last}");
}

#[tokio::test(flavor = "multi_thread")]
async fn outside_the_24_hour_window_a_reply_is_not_attempted_and_the_log_says_why() {
    let w = Wa::start().await;
    let cid = w.handed_off("16505550005", "wamid.w1").await;
    let sent_before = w.sends().len();
    // 25 hours later an operator answers: too late for a free-form message
    w.t.clock.advance_ms(25 * 3_600_000);
    w.operator_reply(&cid, "Sorry for the wait!").await.assert_status(201);
    run_jobs(&w.t.app).await;
    assert_eq!(w.sends().len(), sent_before, "nothing attempted");
    let log = w.t.get("/api/v1/connectors/whatsapp/messages?direction=out", &w.owner).await.json();
    let last = &log["messages"][0];
    assert_eq!(last["status"], "not_sent");
    assert!(last["error"].as_str().unwrap().contains("24 hours"), "{last}");
    let detail = w.t.get("/api/v1/connectors/whatsapp", &w.owner).await.json();
    assert!(detail["connector"]["messages"]["failed"].as_i64().unwrap() >= 1);
    // the customer writes again: the window reopens, and the next reply goes out
    w.say("16505550005", "wamid.w2", Some("Hello?")).await.assert_status(200);
    w.settle().await;
    w.operator_reply(&cid, "Here now!").await.assert_status(201);
    run_jobs(&w.t.app).await;
    assert_eq!(w.sends().last().unwrap().body["text"]["body"], "Here now!");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sender_stays_on_a_conversation_until_the_timeout() {
    let w = Wa::start().await;
    w.t.put("/api/v1/connectors/whatsapp", &w.owner, json!({"config": {"conversation_timeout_hours": "2"}}))
        .await
        .assert_status(200);
    w.say("16505550006", "wamid.c1", Some("hello")).await.assert_status(200);
    w.settle().await;
    let first = w.conversation_of("16505550006");
    w.t.clock.advance_ms(3_600_000);
    w.say("16505550006", "wamid.c2", Some("still there?")).await.assert_status(200);
    w.settle().await;
    assert_eq!(w.conversation_of("16505550006"), first, "within two hours: the same conversation");
    w.t.clock.advance_ms(3 * 3_600_000);
    w.say("16505550006", "wamid.c3", Some("new question")).await.assert_status(200);
    w.settle().await;
    let second = w.conversation_of("16505550006");
    assert_ne!(second, first, "after the timeout: a new conversation");
    let conv = w.t.get(&format!("/api/v1/history/chat/{second}"), &w.owner).await.json();
    assert_eq!(conv["channel"], "whatsapp", "{conv}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_routine_collects_its_slots_over_whatsapp() {
    let w = Wa::start().await;
    crate::chat::corpus(&w.t, &w.owner).await;
    let agent = w.t.default_agent(&w.owner).await;
    let r =
        w.t.post(
            &format!("/api/v1/agents/{agent}/routines"),
            &w.owner,
            json!({"definition": crate::routines::returns_routine()}),
        )
        .await;
    r.assert_status(201);
    w.t.publish(&w.owner, &agent).await;
    w.say("16505550007", "wamid.r1", Some("I want to return an item I bought and get a refund"))
        .await
        .assert_status(200);
    w.settle().await;
    let asked = w.sends().last().unwrap().body["text"]["body"].as_str().unwrap().to_string();
    assert!(asked.contains("order ref"), "{asked}");
    let recent = (chrono::Utc::now() - chrono::Duration::days(20)).format("%Y-%m-%d").to_string();
    let text = format!("my order ref is A-123, my email is bob@example.com and I bought it on {recent}");
    w.say("16505550007", "wamid.r2", Some(&text)).await.assert_status(200);
    w.settle().await;
    assert_eq!(
        w.sends().last().unwrap().body["text"]["body"],
        "Your return for A-123 is registered; we will write to bob@example.com."
    );
    assert_eq!(w.turns(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn whatsapp_answers_are_metered_like_every_other_surface() {
    let w = Wa::start().await;
    w.knowledge().await;
    let usage = |v: Value| {
        v["monthlyAnswers"]["used"].as_f64().unwrap_or(0.0) + v["monthlyConversations"]["used"].as_f64().unwrap_or(0.0)
    };
    let before = usage(w.t.get("/api/v1/ee/usage-limits/me", &w.owner).await.json());
    w.say("16505550008", "wamid.m1", Some("When is the bakery open?")).await.assert_status(200);
    w.settle().await;
    let after = usage(w.t.get("/api/v1/ee/usage-limits/me", &w.owner).await.json());
    assert!(after > before, "the answer was metered ({before} → {after})");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_message_log_is_kept_ninety_days() {
    let w = Wa::start().await;
    // the session would expire in 91 days: read the log with a token
    let reader = w.t.token(&w.owner).await;
    w.say("16505550009", "wamid.old", None).await.assert_status(200);
    w.settle().await;
    w.t.clock.advance_ms(91 * 24 * 3_600_000);
    w.say("16505550009", "wamid.new", None).await.assert_status(200);
    steward::connectors::whatsapp::schedule_cleanup(&w.t.app).unwrap();
    run_jobs(&w.t.app).await;
    let log = w.t.get("/api/v1/connectors/whatsapp/messages", &reader).await.json();
    let ids: Vec<&str> = log["messages"].as_array().unwrap().iter().map(|m| m["status"].as_str().unwrap()).collect();
    assert_eq!(ids, vec!["skipped"], "only the recent message is left: {log}");
    // the next cleanup is planned for tomorrow
    let planned: i64 =
        w.t.app
            .db
            .read(|c| {
                Ok(c.query_row(
                    "SELECT COUNT(*) FROM jobs WHERE kind = 'whatsapp.cleanup' AND state = 'queued'",
                    [],
                    |r| r.get(0),
                )?)
            })
            .unwrap();
    assert_eq!(planned, 1);
}
