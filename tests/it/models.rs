//! The model layer: hosted providers against fake servers speaking their wire formats, the local
//! GGUF model, resolution order, encrypted credentials, the document type catalog, enrichment and
//! retrieval defaults.

use std::sync::Arc;

use serde_json::{Value, json};
use steward::config::Secret;
use steward::models::chat::claude::Claude;
use steward::models::chat::gemini::Gemini;
use steward::models::chat::openai::OpenAi;
use steward::models::chat::{Cancel, ChatModel, ChatRequest, ErrorKind, Finish, Message, OutputSchema};
use steward::models::resolve::{self, Resolved, Slot};

use crate::fake_llm::{FakeProvider, Reply, openai_stream};
use crate::support::{Auth, TestApp, contains_bytes};

const KEY: &str = "sk-test-7f3a9c2e1b";
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

fn req() -> ChatRequest {
    ChatRequest::new(vec![Message::system("Be brief."), Message::user("Say hello")]).max_tokens(20)
}

/// Runs `f` on a plain thread (the blocking HTTP clients must not run inside the test's runtime).
fn off_runtime<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(f).join().expect("thread")
}

fn drain(t: &TestApp) {
    let app = t.app.clone();
    off_runtime(move || {
        loop {
            let jobs = steward::jobs::run_until_idle(&app).unwrap();
            let steps = steward::documents::pipeline::run_until_idle(&app).unwrap();
            if jobs == 0 && steps == 0 {
                break;
            }
        }
    });
}

#[test]
fn openai_streams_tokens_and_sends_schema_natively() {
    let fake = FakeProvider::start(|_| openai_stream("Hello there, friend."));
    let m = OpenAi::new("openai", "gpt-test", &fake.url, Some(Secret::new(KEY.into())), TIMEOUT).unwrap();
    let mut pieces = Vec::new();
    let out = m.chat(&req(), &mut |p| pieces.push(p.to_string()), &Cancel::new()).unwrap();
    assert_eq!(out.text, "Hello there, friend.");
    assert!(pieces.len() > 2, "streamed in pieces: {pieces:?}");
    assert_eq!(pieces.concat(), out.text);
    assert_eq!((out.usage.prompt_tokens, out.usage.completion_tokens), (42, 7));
    assert_eq!(out.finish, Finish::Stop);
    let r = fake.last();
    assert_eq!(r.uri, "/chat/completions");
    assert_eq!(r.header("authorization").unwrap(), format!("Bearer {KEY}"));
    assert_eq!(r.body["model"], "gpt-test");
    assert_eq!(r.body["stream"], true);
    assert_eq!(r.body["messages"][0], json!({"role": "system", "content": "Be brief."}));
    assert!(r.body.get("response_format").is_none());

    // structured output: native schema on openai, instruction only on openai-compatible
    let fake = FakeProvider::start(|_| openai_stream("{\"answer\": \"yes\"}"));
    let schema = OutputSchema { name: "verdict".into(), schema: json!({"type": "object", "required": ["answer"]}) };
    let m = OpenAi::new("openai", "gpt-test", &fake.url, Some(Secret::new(KEY.into())), TIMEOUT).unwrap();
    let (v, _) = steward::models::chat::chat_json(&m, req(), schema.clone(), &Cancel::new()).unwrap();
    assert_eq!(v, json!({"answer": "yes"}));
    assert_eq!(fake.last().body["response_format"]["json_schema"]["name"], "verdict");
    let c = OpenAi::new("openai-compatible", "local-llama", &fake.url, None, TIMEOUT).unwrap();
    steward::models::chat::chat_json(&c, req(), schema, &Cancel::new()).unwrap();
    let r = fake.last();
    assert!(r.body.get("response_format").is_none(), "no schema sent to the compatible provider");
    assert!(r.header("authorization").is_none());
    assert!(r.body["messages"][0]["content"].as_str().unwrap().contains("JSON Schema"));
}

#[test]
fn provider_errors_are_typed_and_never_carry_the_key() {
    let fake = FakeProvider::start(|r| match r.body["model"].as_str() {
        Some("auth") => Reply::status(401, r#"{"error":{"message":"Incorrect API key provided"}}"#),
        Some("busy") => Reply { status: 429, headers: vec![("retry-after", "7".into())], body: "{}".into() },
        Some("bad") => Reply::status(400, r#"{"error":{"message":"model not found"}}"#),
        _ => Reply::status(503, "upstream down"),
    });
    // capture every log line while the calls run
    let logs = Arc::new(parking_lot::Mutex::new(Vec::<u8>::new()));
    let sink = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || LogSink(sink.clone()))
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let call = |model: &str| {
            OpenAi::new("openai", model, &fake.url, Some(Secret::new(KEY.into())), TIMEOUT)
                .unwrap()
                .chat(&req(), &mut |_| {}, &Cancel::new())
                .unwrap_err()
        };
        let e = call("auth");
        assert_eq!(e.kind, ErrorKind::Auth);
        assert!(e.message.contains("Incorrect API key"));
        let e = call("busy");
        assert_eq!((e.kind, e.retry_after_secs), (ErrorKind::RateLimited, Some(7)));
        assert!(e.retryable());
        assert_eq!(call("bad").kind, ErrorKind::BadRequest);
        assert_eq!(call("down").kind, ErrorKind::Unavailable);
        for e in [call("auth"), call("busy"), call("down")] {
            assert!(!e.message.contains(KEY) && !format!("{e:?}").contains(KEY));
        }
        // nothing listening
        let e = OpenAi::new("openai", "x", "http://127.0.0.1:9", Some(Secret::new(KEY.into())), TIMEOUT)
            .unwrap()
            .chat(&req(), &mut |_| {}, &Cancel::new())
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unavailable);
    });
    let logs = String::from_utf8_lossy(&logs.lock()).to_string();
    assert!(!logs.contains(KEY), "the key leaked into the logs");
}

struct LogSink(Arc<parking_lot::Mutex<Vec<u8>>>);
impl std::io::Write for LogSink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn claude_speaks_the_messages_api() {
    let events: Vec<String> = [
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 31}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi "}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "there."}}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}),
        json!({"type": "message_stop"}),
    ]
    .iter()
    .map(|e| format!("event: {}\ndata: {e}", e["type"].as_str().unwrap()))
    .collect();
    let fake = FakeProvider::start(move |_| Reply::sse(&events));
    let m = Claude::new("claude-test", &fake.url, Secret::new(KEY.into()), TIMEOUT).unwrap();
    let mut pieces = vec![];
    let out = m.chat(&req(), &mut |p| pieces.push(p.to_string()), &Cancel::new()).unwrap();
    assert_eq!(out.text, "Hi there.");
    assert_eq!(pieces, vec!["Hi ", "there."]);
    assert_eq!((out.usage.prompt_tokens, out.usage.completion_tokens), (31, 3));
    let r = fake.last();
    assert_eq!(r.uri, "/v1/messages");
    assert_eq!(r.header("x-api-key").unwrap(), KEY);
    assert!(r.header("anthropic-version").is_some());
    assert!(r.header("authorization").is_none());
    assert_eq!(r.body["system"], "Be brief.");
    assert_eq!(r.body["messages"], json!([{"role": "user", "content": "Say hello"}]));
    let fake = FakeProvider::start(|_| {
        Reply::status(529, r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#)
    });
    let e = Claude::new("c", &fake.url, Secret::new(KEY.into()), TIMEOUT)
        .unwrap()
        .chat(&req(), &mut |_| {}, &Cancel::new())
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unavailable);
}

#[test]
fn gemini_speaks_generate_content() {
    let events: Vec<String> = [
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "{\"ok\":"}]}}]}),
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": " true}"}]}, "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 4}}),
    ]
    .iter()
    .map(|e| format!("data: {e}"))
    .collect();
    let fake = FakeProvider::start(move |_| Reply::sse(&events));
    let m = Gemini::new("gemini-test", &fake.url, Secret::new(KEY.into()), TIMEOUT).unwrap();
    let schema = OutputSchema {
        name: "x".into(),
        schema: json!({"type": "object", "required": ["ok"], "additionalProperties": false, "properties": {"ok": {"type": "boolean"}}}),
    };
    let (v, usage) = steward::models::chat::chat_json(&m, req(), schema, &Cancel::new()).unwrap();
    assert_eq!(v, json!({"ok": true}));
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (12, 4));
    let r = fake.last();
    assert_eq!(r.uri, "/v1beta/models/gemini-test:streamGenerateContent?alt=sse");
    assert!(!r.uri.contains(KEY));
    assert_eq!(r.header("x-goog-api-key").unwrap(), KEY);
    assert_eq!(r.body["contents"][0]["role"], "user");
    assert!(r.body["systemInstruction"]["parts"][0]["text"].as_str().unwrap().starts_with("Be brief."));
    assert_eq!(r.body["generationConfig"]["responseMimeType"], "application/json");
    assert!(r.body["generationConfig"]["responseSchema"].get("additionalProperties").is_none());
    let fake = FakeProvider::start(|_| Reply::status(403, r#"{"error":{"code":403,"message":"API key not valid"}}"#));
    let e = Gemini::new("g", &fake.url, Secret::new(KEY.into()), TIMEOUT)
        .unwrap()
        .chat(&req(), &mut |_| {}, &Cancel::new())
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Auth);
}

#[test]
fn cancelling_stops_a_hosted_stream() {
    let long = "word ".repeat(400);
    let fake = FakeProvider::start(move |_| openai_stream(&long));
    let m = OpenAi::new("openai", "gpt-test", &fake.url, Some(Secret::new(KEY.into())), TIMEOUT).unwrap();
    let cancel = Cancel::new();
    let c2 = cancel.clone();
    let mut n = 0;
    let out = m
        .chat(
            &req(),
            &mut |_| {
                n += 1;
                if n == 3 {
                    c2.cancel();
                }
            },
            &cancel,
        )
        .unwrap();
    assert_eq!(out.finish, Finish::Cancelled);
    assert_eq!(n, 3);
}

fn local_model() -> Arc<dyn ChatModel> {
    let config = crate::support::test_config(std::path::Path::new("/nonexistent"));
    let models = steward::models::Models::new(&config);
    models.local().expect("the SmolLM2 GGUF is installed by scripts/fetch-models.sh")
}

#[test]
fn local_gguf_generates_streams_and_cancels() {
    let m = local_model();
    assert_eq!(m.provider(), "local");
    let mut r =
        ChatRequest::new(vec![Message::user("What is the capital of France? Answer in one word.")]).max_tokens(12);
    r.temperature = 0.0;
    let mut pieces = vec![];
    let out = m.chat(&r, &mut |p| pieces.push(p.to_string()), &Cancel::new()).unwrap();
    assert!(!out.text.trim().is_empty());
    assert_eq!(pieces.concat(), out.text);
    assert!(out.usage.prompt_tokens > 5 && out.usage.completion_tokens >= 1);
    // deterministic with greedy sampling
    assert_eq!(m.chat(&r, &mut |_| {}, &Cancel::new()).unwrap().text, out.text);
    // cancellation stops generation
    let mut long = ChatRequest::new(vec![Message::user("Write a long story about a ship.")]).max_tokens(200);
    long.temperature = 0.0;
    let cancel = Cancel::new();
    let c2 = cancel.clone();
    let mut n = 0;
    let out = m
        .chat(
            &long,
            &mut |_| {
                n += 1;
                if n == 2 {
                    c2.cancel();
                }
            },
            &cancel,
        )
        .unwrap();
    assert_eq!(out.finish, Finish::Cancelled);
    assert!(out.usage.completion_tokens <= 3, "{}", out.usage.completion_tokens);
}

fn with_key(c: &mut steward::config::Config) {
    c.encryption_key = Some(Secret::new([9u8; 32]));
}

#[tokio::test]
async fn credentials_are_encrypted_session_only_and_never_returned() {
    let t = TestApp::with_config(|c| {
        with_key(c);
        c.llm.env_keys.insert("gemini".into(), Secret::new("env-gemini-key".into()));
    });
    let owner = t.owner().await;
    let r = t.get("/api/v1/settings/credentials", &owner).await;
    r.assert_status(200);
    assert_eq!(r.json()["encryptionConfigured"], true);
    assert_eq!(
        r.json()["envProviderAvailability"],
        json!({"openai": false, "openai-compatible": false, "claude": false, "gemini": true})
    );
    t.put("/api/v1/settings/credentials/openai", &owner, json!({"apiKey": KEY})).await.assert_status(204);
    let r = t.get("/api/v1/settings/credentials", &owner).await;
    assert_eq!(r.json()["credentials"][0]["provider"], "openai");
    assert!(r.json()["credentials"][0]["updatedAt"].is_string());
    assert!(!r.text().contains(KEY));
    assert!(!contains_bytes(&t.db_bytes(), KEY.as_bytes()), "the key is in the database file in clear");
    // decrypts for the workspace that stored it
    let ws = steward::ids::WorkspaceId(t.get_ws());
    let k = steward::settings::credentials::workspace_key(&t.app, &ws, "openai").unwrap().unwrap();
    assert_eq!(k.expose(), KEY);
    // bearer credentials are refused on these routes
    let token = t.token(&owner).await;
    assert_eq!(t.get("/api/v1/settings/credentials", &token).await.status, 401);
    assert_eq!(t.put("/api/v1/settings/credentials/openai", &token, json!({"apiKey": "x"})).await.status, 401);
    // validation
    assert_eq!(t.put("/api/v1/settings/credentials/acme", &owner, json!({"apiKey": "x"})).await.status, 400);
    assert_eq!(t.put("/api/v1/settings/credentials/openai", &owner, json!({"apiKey": " "})).await.status, 400);
    t.delete("/api/v1/settings/credentials/openai", &owner).await.assert_status(204);
    let r = t.delete("/api/v1/settings/credentials/openai", &owner).await;
    assert_eq!((r.status.as_u16(), r.code()), (404, "not_found".to_string()));
    // members cannot manage them
    let member = t.member(&owner, "m@example.com", "member").await;
    assert_eq!(t.put("/api/v1/settings/credentials/openai", &member, json!({"apiKey": KEY})).await.status, 403);
}

#[tokio::test]
async fn credentials_without_an_encryption_key_answer_503() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let r = t.get("/api/v1/settings/credentials", &owner).await;
    assert_eq!(r.json()["encryptionConfigured"], false);
    let r = t.put("/api/v1/settings/credentials/openai", &owner, json!({"apiKey": KEY})).await;
    assert_eq!((r.status.as_u16(), r.code()), (503, "encryption_not_configured".to_string()));
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("CONNECTOR_ENCRYPTION_KEY"));
}

#[tokio::test]
async fn model_preferences_merge_and_resolve_in_order() {
    let fake = FakeProvider::start(|_| openai_stream("ok"));
    let url = fake.url.clone();
    let t = TestApp::with_config(move |c| {
        with_key(c);
        c.llm.base_urls.insert("openai".into(), url.clone());
        c.llm.rewrite =
            steward::config::LlmSlotDefault { provider: Some("openai".into()), model: Some("env-rewriter".into()) };
    });
    let owner = t.owner().await;
    let ws = steward::ids::WorkspaceId(t.get_ws());
    // nothing configured: the built-in answerer serves chat; the environment serves rewrite
    let r = t.get("/api/v1/settings/llm-models", &owner).await.json();
    assert_eq!(r["chat"], Value::Null);
    assert_eq!(r["managed"], json!({"chat": null, "rewrite": null, "rerank": null}));
    assert_eq!(r["effective"]["chat"], json!({"provider": "builtin", "model": "extractive-v1", "source": "default"}));
    assert_eq!(r["effective"]["rewrite"]["source"], "environment");
    assert!(matches!(resolve::resolve(&t.app, &ws, Slot::Chat, None).unwrap().1, Resolved::Builtin));
    // a provider without a key cannot be chosen
    let r =
        t.put("/api/v1/settings/llm-models", &owner, json!({"chat": {"provider": "openai", "model": "gpt-x"}})).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["details"]["code"], "provider_unavailable");
    t.put("/api/v1/settings/credentials/openai", &owner, json!({"apiKey": KEY})).await.assert_status(204);
    let r =
        t.put("/api/v1/settings/llm-models", &owner, json!({"chat": {"provider": "openai", "model": "gpt-x"}})).await;
    r.assert_status(200);
    let v = r.json();
    assert_eq!(v["chat"], json!({"provider": "openai", "model": "gpt-x"}));
    assert!(v["knownModelsByProvider"]["openai"].as_array().is_some());
    assert!(v["knownModelsByProvider"]["local"].is_array());
    // merge: setting rerank keeps chat; null clears
    t.put("/api/v1/settings/llm-models", &owner, json!({"rerank": {"provider": "openai", "model": "gpt-r"}}))
        .await
        .assert_status(200);
    let v = t.get("/api/v1/settings/llm-models", &owner).await.json();
    assert_eq!(v["chat"]["model"], "gpt-x");
    assert_eq!(v["rerank"]["model"], "gpt-r");
    t.put("/api/v1/settings/llm-models", &owner, json!({"rerank": null})).await.assert_status(200);
    assert_eq!(t.get("/api/v1/settings/llm-models", &owner).await.json()["rerank"], Value::Null);
    assert_eq!(t.put("/api/v1/settings/llm-models", &owner, json!({"summary": null})).await.status, 400);
    // workspace preference, with the workspace credential, reaches the provider
    let app = t.app.clone();
    let ws2 = ws.clone();
    let sel = off_runtime(move || {
        let (sel, r) = resolve::resolve(&app, &ws2, Slot::Chat, None).unwrap();
        let Resolved::Model(m) = r else { panic!("a model") };
        m.chat(&req(), &mut |_| {}, &Cancel::new()).unwrap();
        sel
    });
    assert_eq!((sel.source, sel.model.as_str()), ("workspace", "gpt-x"));
    assert_eq!(fake.last().header("authorization").unwrap(), format!("Bearer {KEY}"));
    assert_eq!(fake.last().body["model"], "gpt-x");
    // the agent override wins for chat only
    let agent = steward::settings::llm_models::Choice { provider: "openai".into(), model: "agent-model".into() };
    let prefs: steward::settings::llm_models::Preferences =
        t.app.db.read(|c| steward::settings::load(c, &ws, steward::settings::llm_models::NAMESPACE)).unwrap();
    assert_eq!(resolve::selection(&t.app, &ws, Slot::Chat, Some(&agent), &prefs).source, "agent");
    assert_eq!(resolve::selection(&t.app, &ws, Slot::Rewrite, Some(&agent), &prefs).model, "env-rewriter");
}

#[tokio::test]
async fn openai_compatible_without_a_base_url_fails_at_resolve_time() {
    let t = TestApp::with_config(|c| {
        with_key(c);
        c.llm.env_keys.insert("openai-compatible".into(), Secret::new("k".into()));
        c.llm.chat =
            steward::config::LlmSlotDefault { provider: Some("openai-compatible".into()), model: Some("m".into()) };
    });
    let _owner = t.owner().await;
    let ws = steward::ids::WorkspaceId(t.get_ws());
    let e = resolve::resolve(&t.app, &ws, Slot::Chat, None).err().expect("an error");
    assert_eq!(e.kind, ErrorKind::Misconfigured);
    assert!(e.message.contains("OPENAI_COMPATIBLE_BASE_URL"));
}

#[tokio::test]
async fn document_type_catalog_saves_conditionally_and_names_limits() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let v = t.get("/api/v1/settings/document-types", &owner).await.json();
    assert_eq!(v["revision"], "1");
    let keys: Vec<&str> = v["types"].as_array().unwrap().iter().map(|t| t["key"].as_str().unwrap()).collect();
    assert_eq!(keys, vec!["event", "article", "profile", "reference", "generic"]);
    assert_eq!(v["types"][4]["disableable"], false);
    assert_eq!(v["types"][0]["payload"], "facts");
    assert_eq!(v["referencedFieldKeys"], json!([]));
    let body = json!({"expectedRevision": "1", "disabledBuiltInTypeKeys": ["profile"], "types": [
        {"key": "course", "label": "Course", "description": "A class we teach", "enabled": true,
         "fields": [{"key": "level", "label": "Level", "valueType": "string", "instruction": "beginner, intermediate or advanced"},
                    {"key": "price", "label": "Price", "valueType": "number", "instruction": "in euros"}]}]});
    let r = t.put("/api/v1/settings/document-types", &owner, body.clone()).await;
    r.assert_status(200);
    let v = r.json();
    assert_eq!(v["revision"], "2");
    assert_eq!(v["types"][2]["enabled"], false);
    assert_eq!(v["types"][5]["origin"], "operator");
    assert_eq!(v["types"][5]["payload"], "fields");
    // stale revision
    let r = t.put("/api/v1/settings/document-types", &owner, body).await;
    assert_eq!(r.status, 409);
    assert_eq!(r.json()["error"]["details"]["currentRevision"], "2");
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("current revision is 2"));
    // limits are named
    let r = t
        .put(
            "/api/v1/settings/document-types",
            &owner,
            json!({"expectedRevision": "2", "types": [{"key": "x", "label": "X", "description": "d".repeat(501)}]}),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["details"]["limit"], "description");
    // removing a field retires it with its type
    let r = t
        .put("/api/v1/settings/document-types", &owner, json!({"expectedRevision": "2", "types": [{"key": "course", "label": "Course", "fields": [{"key": "level", "label": "Level", "valueType": "string"}]}]}))
        .await;
    r.assert_status(200);
    assert_eq!(r.json()["retiredFields"], json!([{"key": "price", "valueType": "number"}]));
    let member = t.member(&owner, "m@example.com", "member").await;
    assert_eq!(
        t.put("/api/v1/settings/document-types", &member, json!({"expectedRevision": "3", "types": []})).await.status,
        403
    );
}

async fn course_catalog(t: &TestApp, owner: &Auth) {
    t.put(
        "/api/v1/settings/document-types",
        owner,
        json!({"expectedRevision": "1", "types": [{"key": "course", "label": "Course", "fields": [
            {"key": "level", "label": "Level", "valueType": "string"},
            {"key": "price", "label": "Price", "valueType": "number"}]}]}),
    )
    .await
    .assert_status(200);
}

#[tokio::test]
async fn enrichment_extracts_declared_fields_after_the_document_is_searchable() {
    let answer = json!({"shape": "course", "confidence": 0.9, "fields": {"level": "beginner", "price": "120", "teacher": "not declared"}}).to_string();
    let fake = FakeProvider::start(move |_| openai_stream(&answer));
    let url = fake.url.clone();
    let t = TestApp::with_config(move |c| {
        c.llm.env_keys.insert("openai".into(), Secret::new(KEY.into()));
        c.llm.base_urls.insert("openai".into(), url.clone());
        c.llm.chat =
            steward::config::LlmSlotDefault { provider: Some("openai".into()), model: Some("gpt-enrich".into()) };
    });
    let owner = t.owner().await;
    course_catalog(&t, &owner).await;
    t.put("/api/v1/settings/ingestion", &owner, json!({"documentEnrichmentEnabled": true})).await.assert_status(200);
    let id = t
        .doc(
            &owner,
            "Pottery for beginners",
            "A six-week pottery course for beginners. Price: 120 euros.",
            json!({"room": "B2"}),
        )
        .await;
    // an operator-owned key is never overwritten
    drain(&t);
    let d = t.document(&owner, &id).await;
    assert_eq!(d["status"], "ready");
    let e = &d["enrichment"];
    assert_eq!(e["status"], "applied", "{e}");
    assert_eq!(e["shape"], "course");
    assert_eq!(e["model"], "gpt-enrich");
    assert_eq!(e["fieldCount"], 2);
    assert!(e.get("content").is_none() && !e.to_string().contains("pottery"), "no source text in the report");
    assert_eq!(d["metadata"]["level"], "beginner");
    assert_eq!(d["metadata"]["price"], 120.0);
    assert_eq!(d["metadata"]["room"], "B2");
    assert!(d["metadata"].get("teacher").is_none());
    // the model saw the catalog and the document
    let sent = fake.last().body["messages"].to_string();
    assert!(sent.contains("course") && sent.contains("six-week pottery"));
    // the extracted fields are filterable
    let v = t
        .search(
            &owner,
            json!({"query": "pottery course", "metadataFilter": {"level": "beginner", "price": {"$lt": 200}}}),
        )
        .await;
    assert_eq!(v["results"][0]["documentId"], id.as_str());
    // per-request override off: the next revision is not enriched again
    let before = fake.requests.lock().len();
    t.post(&format!("/api/v1/document/{id}/reprocess"), &owner, json!({"documentEnrichmentOverride": "off"}))
        .await
        .assert_status(202);
    drain(&t);
    assert_eq!(fake.requests.lock().len(), before);
}

#[tokio::test]
async fn a_failing_model_leaves_the_document_ready_and_searchable() {
    let fake = FakeProvider::start(|_| Reply::status(400, r#"{"error":{"message":"model not found"}}"#));
    let url = fake.url.clone();
    let t = TestApp::with_config(move |c| {
        c.llm.env_keys.insert("openai".into(), Secret::new(KEY.into()));
        c.llm.base_urls.insert("openai".into(), url.clone());
        c.llm.chat = steward::config::LlmSlotDefault { provider: Some("openai".into()), model: Some("missing".into()) };
    });
    let owner = t.owner().await;
    let r = t.get("/api/v1/document/sources", &owner).await.json();
    let _ = r;
    let r = t
        .post("/api/v1/document/", &owner, json!({"title": "Opening hours", "content": "We open at nine every weekday morning.", "documentEnrichmentOverride": "on"}))
        .await;
    r.assert_status(202);
    let id = r.json()["id"].as_str().unwrap().to_string();
    drain(&t);
    let d = t.document(&owner, &id).await;
    assert_eq!(d["status"], "ready");
    assert_eq!(d["enrichment"]["status"], "failed");
    assert!(d["enrichment"]["failureReason"].as_str().unwrap().contains("model not found"));
    assert!(!d["enrichment"].to_string().contains(KEY));
    assert_eq!(t.titles(&owner, "when do you open").await[0], "Opening hours");
}

#[tokio::test]
async fn enrichment_without_a_model_is_skipped() {
    let t = TestApp::new();
    let owner = t.owner().await;
    t.put("/api/v1/settings/ingestion", &owner, json!({"documentEnrichmentEnabled": true})).await.assert_status(200);
    let id = t.doc(&owner, "Note", "Some plain note about the garden shed.", json!({})).await;
    drain(&t);
    let d = t.document(&owner, &id).await;
    assert_eq!(d["status"], "ready");
    assert_eq!(d["enrichment"]["status"], "skipped");
}

#[tokio::test]
async fn retrieval_defaults_merge_catalog_and_observed_fields() {
    let t = TestApp::new();
    let owner = t.owner().await;
    course_catalog(&t, &owner).await;
    t.doc(
        &owner,
        "A",
        "Alpha text for the index.",
        json!({"city": "Oslo", "year": 2024, "level": 3, "opens": "2026-01-05"}),
    )
    .await;
    drain(&t);
    let v = t.get("/api/v1/settings/retrieval-defaults", &owner).await.json();
    for k in [
        "queryRewriteEnabled",
        "semanticRewriteInstructions",
        "lexicalRewriteInstructions",
        "rerankEnabled",
        "vectorTopK",
        "rerankTopK",
        "retrievalStrategy",
        "metadataRules",
        "customInstruction",
        "temporalStructuredLookupEnabled",
        "temporalBoostUpcomingEnabled",
        "temporalDeterministicSortEnabled",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    assert_eq!(v["metadataRules"], json!([]));
    assert_eq!(v["temporalBoostUpcomingEnabled"], true);
    let s: std::collections::HashMap<String, (String, String)> = v["metadataFieldSuggestions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["key"].as_str().unwrap().into(),
                (x["valueType"].as_str().unwrap().into(), x["source"].as_str().unwrap().into()),
            )
        })
        .collect();
    assert_eq!(s["city"], ("string".into(), "observed".into()));
    assert_eq!(s["year"], ("number".into(), "observed".into()));
    assert_eq!(s["opens"], ("date".into(), "observed".into()));
    // declared wins: `level` is a string field in the catalog though the data holds a number
    assert_eq!(s["level"], ("string".into(), "catalog".into()));
    assert_eq!(s["dateFrom"].0, "date");
}

#[test]
fn local_gguf_sampling_follows_a_grammar() {
    let m = local_model();
    let grammar = "root ::= \"{\\\"verdict\\\": \\\"\" (\"pass\" | \"fail\") \"\\\", \\\"reason\\\": \\\"\" r \"\\\"}\"\nr ::= [^\"\\\\\\x00-\\x1f]{1,40}\n";
    let mut r = ChatRequest::new(vec![Message::user("Is Paris in France? Reply in JSON.")]).max_tokens(40);
    r.temperature = 0.0;
    r.grammar = Some(grammar.to_string());
    let out = m.chat(&r, &mut |_| {}, &Cancel::new()).unwrap();
    let v: Value = serde_json::from_str(&out.text).unwrap_or_else(|e| panic!("{e}: {:?}", out.text));
    assert!(v["verdict"] == "pass" || v["verdict"] == "fail", "{v}");
    assert!(!v["reason"].as_str().unwrap().is_empty());
    // a grammar the sampler cannot read is a plain error, not a crash
    r.grammar = Some("root ::= (".to_string());
    assert_eq!(m.chat(&r, &mut |_| {}, &Cancel::new()).unwrap_err().kind, ErrorKind::BadRequest);
}
