//! `kill -9` of the real binary after a WhatsApp message was acknowledged and before its reply
//! was sent: after the restart the reply is sent exactly once. Two places: mid-turn (the model
//! call held), and after the turn saved its reply but before the batch was closed (a failpoint).

use reqwest::Method;
use serde_json::{Value, json};
use steward::connectors::whatsapp::{delivery_json, sign};

use crate::e2e::{Api, Server, bootstrap};
use crate::receiver::Receiver;
use crate::whatsapp::{APP_SECRET, PHONE, TOKEN, sent_ok};

/// A signed-in dashboard session against the real binary.
struct Session {
    http: reqwest::Client,
    base: String,
    cookie: String,
}

impl Session {
    async fn login(base: &str) -> Session {
        let http = reqwest::Client::new();
        let r = http
            .post(format!("{base}/api/v1/auth/login"))
            .json(&json!({"email": "root@example.com", "password": "root-password"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let cookie = r.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string();
        Session { http, base: base.to_string(), cookie }
    }

    async fn call(&self, method: Method, path: &str, body: Value) -> Value {
        let r = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("cookie", &self.cookie)
            .header("sec-fetch-site", "same-origin")
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "{path}: {status} {v}");
        v
    }
}

/// A signed delivery of one message from 16505551234 to a running server (`None` text: an image).
pub async fn deliver(base: &str, ws: &str, id: &str, text: Option<&str>) {
    let body = delivery_json(PHONE, &[("16505551234", id, text)]).to_string();
    let r = reqwest::Client::new()
        .post(format!("{base}/api/connectors/whatsapp/{ws}/webhook"))
        .header("content-type", "application/json")
        .header("x-hub-signature-256", sign(APP_SECRET, body.as_bytes()))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "acknowledged");
}

/// Polls the message log until the inbound message is answered and its reply delivered.
async fn wait_delivered(api: &Api) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let log = api.call(Method::GET, "/api/v1/connectors/whatsapp/messages", None).await;
        let msgs = log["messages"].as_array().unwrap().clone();
        let answered = msgs.iter().any(|m| m["direction"] == "in" && m["status"] == "answered");
        let delivered = msgs.iter().any(|m| m["direction"] == "out" && m["deliveryStatus"] == "success");
        if answered && delivered {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "not answered and delivered in time: {log}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn crash_and_restart(failpoint: Option<&str>) {
    let trigger = "How long does standard shipping take?";
    let (fake, started, release) = crate::chat::held_model(trigger);
    if failpoint.is_some() {
        // the model answers at once; the failpoint stops the process
        release.send(()).unwrap();
    }
    let graph = Receiver::start().await;
    graph.set_default(sent_ok());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = bootstrap(&data);
    let (ca, graph_url) = (graph.ca_file.to_str().unwrap().to_string(), format!("{}/v21.0", graph.base));
    let key = "07".repeat(32);
    let mut env = vec![
        ("OPENAI_API_KEY", "sk-test"),
        ("OPENAI_BASE_URL", fake.url.as_str()),
        ("LLM_CHAT_PROVIDER", "openai"),
        ("LLM_CHAT_MODEL", "gpt-test"),
        ("CONNECTOR_ENCRYPTION_KEY", key.as_str()),
        ("STEWARD_DELIVERY_ALLOW", "127.0.0.1/32"),
        ("STEWARD_DELIVERY_CA_FILE", ca.as_str()),
        ("STEWARD_WHATSAPP_GRAPH_BASE_URL", graph_url.as_str()),
        ("STEWARD_WHATSAPP_BURST_MS", "0"),
    ];
    let normal = env.clone();
    if let Some(f) = failpoint {
        env.push(("STEWARD_TEST_FAILPOINT", f));
    }
    let mut server = Server::start(&data, &env);
    let api = Api::new(&server.base, &token);
    let ws = api.call(Method::GET, "/api/v1/auth/me", None).await["workspace"]["id"].as_str().unwrap().to_string();
    let doc = api
        .call(
            Method::POST,
            "/api/v1/document/",
            Some(json!({"title": "Shipping", "content": "Standard shipping takes two to four working days. Express shipping arrives the next day."})),
        )
        .await;
    let doc = doc["id"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while api.call(Method::GET, &format!("/api/v1/document/{doc}"), None).await["status"] != "ready" {
        assert!(std::time::Instant::now() < deadline, "the document did not get ready");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let session = Session::login(&server.base).await;
    session
        .call(
            Method::PUT,
            "/api/v1/connectors/whatsapp",
            json!({"config": {"phone_number_id": PHONE, "access_token": TOKEN, "app_secret": APP_SECRET, "business_account_id": "102290129340398"}}),
        )
        .await;
    session.call(Method::POST, "/api/v1/connectors/whatsapp/enable", json!({})).await;

    deliver(&server.base, &ws, "wamid.crash", Some(trigger)).await;
    match failpoint {
        // the turn is in its model call: the reply is not saved, let alone sent
        None => {
            crate::chat::wait(started).await;
            server.kill();
            // the held call ends (its process is gone); the fake serves the next one
            release.send(()).unwrap();
        }
        // the process aborts itself once the reply is saved, before the batch is closed
        Some(_) => {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while server.child.try_wait().unwrap().is_none() {
                assert!(std::time::Instant::now() < deadline, "the failpoint was not reached");
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    }
    let before = graph.hits().len();
    assert_eq!(before, 0, "nothing was sent before the crash");
    server = Server::start(&data, &normal);
    let api = Api::new(&server.base, &token);
    wait_delivered(&api).await;
    let hits = graph.hits();
    assert_eq!(hits.len(), 1, "the reply went out exactly once");
    assert!(hits[0].body["text"]["body"].as_str().unwrap().contains("two to four"), "{}", hits[0].body);
    assert_eq!(hits[0].headers["authorization"], format!("Bearer {TOKEN}").as_str());
    // one answered turn in the transcript
    let cid = api.call(Method::GET, "/api/v1/history/chat", None).await["conversations"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let conv = api.call(Method::GET, &format!("/api/v1/history/chat/{cid}"), None).await;
    let replies = conv["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "assistant").count();
    assert_eq!(replies, 1, "{conv}");
    server.terminate();
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_nine_mid_turn_sends_the_reply_once_after_the_restart() {
    crash_and_restart(None).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_after_the_reply_was_saved_sends_it_once_and_does_not_answer_again() {
    crash_and_restart(Some("whatsapp.turn.replied")).await;
}
