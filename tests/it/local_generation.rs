//! Local generation with the real SmolLM2 GGUF (issue 36): the prompt cache gives the same tokens
//! as reading the whole prompt and follows prompt changes, stays within its bytes; concurrent
//! callers are decoded together, each getting the answer it gets alone, as long as there are free
//! sequences and room in the context, and otherwise wait first come first served (a waiting caller
//! hears it, a cancelled one leaves at once, a superseded generation frees its sequence at once);
//! streamed turns waiting for the model say so; a GGUF's own chat template formats its prompt.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use steward::models::chat::local::{LocalModel, LocalSettings};
use steward::models::chat::{Cancel, ChatRequest, Finish, Message};

use crate::support::{Auth, TestApp};

fn gguf() -> PathBuf {
    steward::models::resolve::local_model_path(&crate::support::test_config(Path::new("/nonexistent")))
        .expect("the SmolLM2 GGUF is installed by scripts/fetch-models.sh")
}

/// One thread: the same arithmetic in every run, so greedy outputs compare exactly.
fn model(cache_bytes: usize) -> LocalModel {
    model_with(cache_bytes, 2048, 4)
}

fn model_with(cache_bytes: usize, context: u32, sequences: usize) -> LocalModel {
    LocalModel::load(&gguf(), LocalSettings { threads: 1, context, cache_bytes, sequences }).unwrap()
}

const SYSTEM: &str = "You are the help desk of Harbor Books, a bookshop by the sea. Answer briefly and politely. \
    Only answer questions about the shop: its opening hours, its books, orders and deliveries. \
    The shop opens at nine and closes at five on weekdays, and opens from ten to two on Saturdays.";

fn req(system: &str, question: &str) -> ChatRequest {
    let mut r = ChatRequest::new(vec![Message::system(system), Message::user(question)]).max_tokens(24);
    r.temperature = 0.0;
    r
}

#[test]
fn the_prompt_cache_gives_the_tokens_a_full_read_gives_and_follows_prompt_changes() {
    let cached = model(64 << 20);
    let uncached = model(0);
    let first = req(SYSTEM, "When do you open on Saturday?");
    let (a, s) = cached.generate(&first, &mut |_| {}, &Cancel::new()).unwrap();
    assert_eq!(s.reused_tokens, 0, "nothing cached yet");
    let (again, s) = cached.generate(&first, &mut |_| {}, &Cancel::new()).unwrap();
    // (the cache is used in whole batches of 16 tokens, and the last prompt token is always read)
    assert!(s.reused_tokens + 16 >= s.prompt_tokens, "the prompt from the cache: {s:?}");
    assert_eq!(again.text, a.text, "the same prompt from the cache");
    // the same agent, another question: the instructions are not read again
    let second = req(SYSTEM, "Do you deliver books abroad?");
    let (b, s) = cached.generate(&second, &mut |_| {}, &Cancel::new()).unwrap();
    assert!(s.reused_tokens >= 32, "the fixed instructions come from the cache ({} reused)", s.reused_tokens);
    assert!(s.reused_tokens < s.prompt_tokens);
    let (b_full, s_full) = uncached.generate(&second, &mut |_| {}, &Cancel::new()).unwrap();
    assert_eq!(s_full.reused_tokens, 0);
    assert_eq!(b.text, b_full.text, "greedy tokens with the cached prefix = tokens of a full read");
    let (a_full, _) = uncached.generate(&first, &mut |_| {}, &Cancel::new()).unwrap();
    assert_eq!(a.text, a_full.text);
    // a follow-up turn of the first conversation reuses that conversation's prompt and answer
    let mut follow = first.clone();
    follow.messages.push(Message::assistant(a.text.clone()));
    follow.messages.push(Message::user("And on Sunday?"));
    let (_, s) = cached.generate(&follow, &mut |_| {}, &Cancel::new()).unwrap();
    let first_len = s.prompt_tokens - 10; // the follow-up adds the answer and a short question
    assert!(s.reused_tokens > 64 && s.reused_tokens <= first_len + 30, "{s:?}");
    // a published revision with other instructions shares nothing the cache could give
    let changed = req(&format!("Greet every visitor warmly. {SYSTEM}"), "Do you deliver books abroad?");
    let (c, s) = cached.generate(&changed, &mut |_| {}, &Cancel::new()).unwrap();
    assert!(s.reused_tokens < 16, "a changed prefix is read again ({} reused)", s.reused_tokens);
    assert_eq!(c.text, uncached.generate(&changed, &mut |_| {}, &Cancel::new()).unwrap().0.text);
    // another model (another load) has its own cache
    let (_, s) = model(64 << 20).generate(&second, &mut |_| {}, &Cancel::new()).unwrap();
    assert_eq!(s.reused_tokens, 0);
    // the same prompt in another scope (another agent, another workspace) is read anew, and
    // again in its own scope comes from the cache
    let scoped = |agent: &str| ChatRequest { cache_scope: Some(agent.to_string()), ..second.clone() };
    let (_, s) = cached.generate(&scoped("agent-a"), &mut |_| {}, &Cancel::new()).unwrap();
    assert_eq!(s.reused_tokens, 0, "nothing shared with the unscoped prompts");
    let (_, s) = cached.generate(&scoped("agent-b"), &mut |_| {}, &Cancel::new()).unwrap();
    assert_eq!(s.reused_tokens, 0, "nothing shared with another agent's prompts");
    let (_, s) = cached.generate(&scoped("agent-a"), &mut |_| {}, &Cancel::new()).unwrap();
    assert!(s.reused_tokens + 16 >= s.prompt_tokens, "its own scope: {s:?}");
}

#[test]
fn the_prompt_cache_never_holds_more_than_its_bound() {
    // about 23 KB of KV state per token for this model: 3 MiB holds a couple of these prompts
    let bound = 3 << 20;
    let m = model(bound);
    for i in 0..6 {
        let r = req(&format!("Reference number {i}. {SYSTEM}"), "When do you open?");
        m.generate(&r, &mut |_| {}, &Cancel::new()).unwrap();
        let (bytes, entries) = m.cached();
        assert!(bytes <= bound, "{bytes} bytes cached with a bound of {bound}");
        assert!(entries >= 1);
    }
}

/// Runs `question` on `m` in a thread, with what `on_wait` heard.
fn ask(m: &Arc<LocalModel>, question: &str, max_tokens: u32) -> std::thread::JoinHandle<(String, Vec<usize>)> {
    let (m, q) = (m.clone(), question.to_string());
    std::thread::spawn(move || {
        let mut waited = vec![];
        let mut r = req(SYSTEM, &q);
        r.max_tokens = max_tokens;
        let (out, _) = m.generate_queued(&r, &mut |_| {}, &mut |n| waited.push(n), &Cancel::new()).unwrap();
        (out.text, waited)
    })
}

#[test]
fn concurrent_callers_are_decoded_together_each_with_the_answer_it_gets_alone() {
    let m = Arc::new(model(0));
    let questions = ["When do you open on Saturday?", "Do you deliver books abroad?", "Do you sell maps?"];
    let alone: Vec<String> =
        questions.iter().map(|q| m.generate(&req(SYSTEM, q), &mut |_| {}, &Cancel::new()).unwrap().0.text).collect();
    let together: Vec<(String, Vec<usize>)> =
        questions.iter().map(|q| ask(&m, q, 24)).collect::<Vec<_>>().into_iter().map(|h| h.join().unwrap()).collect();
    for (i, (text, waited)) in together.iter().enumerate() {
        assert_eq!(text, &alone[i], "batched with the others, the same greedy answer");
        assert!(waited.is_empty(), "nobody waits while sequences are free: {together:?}");
    }
    // a context with room for one of these at a time: the second waits for the first
    let small = Arc::new(model_with(0, 512, 4));
    let runs: Vec<_> = questions[..2].iter().map(|q| ask(&small, q, 200)).collect();
    let both: Vec<(String, Vec<usize>)> = runs.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(both.iter().filter(|(_, w)| w.first() == Some(&1)).count(), 1, "one waited for room: {both:?}");
    assert!(both.iter().all(|(t, _)| !t.trim().is_empty()));
}

#[test]
fn with_one_sequence_callers_take_turns_and_a_cancelled_caller_leaves_at_once() {
    let m = Arc::new(model_with(0, 2048, 1));
    let questions = ["When do you open on Saturday?", "Do you deliver books abroad?"];
    let alone: Vec<String> =
        questions.iter().map(|q| m.generate(&req(SYSTEM, q), &mut |_| {}, &Cancel::new()).unwrap().0.text).collect();
    // together: both complete, each with its own answer; one of them waited
    let together: Vec<(String, Vec<usize>)> =
        questions.iter().map(|q| ask(&m, q, 24)).collect::<Vec<_>>().into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(together[0].0, alone[0]);
    assert_eq!(together[1].0, alone[1]);
    assert_eq!(together.iter().filter(|(_, w)| w.first() == Some(&1)).count(), 1, "one waited: {together:?}");
    // a long generation holds the model; a caller waiting behind it is cancelled and leaves at once
    let long_cancel = Cancel::new();
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (m1, c1) = (m.clone(), long_cancel.clone());
    let long = std::thread::spawn(move || {
        let mut r = req(SYSTEM, "Write a long story about the shop.");
        r.max_tokens = 2000;
        let mut sent = false;
        m1.generate(
            &r,
            &mut |_| {
                if !sent {
                    sent = true;
                    started_tx.send(()).unwrap();
                }
            },
            &c1,
        )
        .unwrap()
        .0
    });
    started_rx.recv().unwrap();
    let waiter_cancel = Cancel::new();
    let (wait_tx, wait_rx) = std::sync::mpsc::channel();
    let (m2, c2) = (m.clone(), waiter_cancel.clone());
    let waiter = std::thread::spawn(move || {
        m2.generate_queued(&req(SYSTEM, "Hello?"), &mut |_| {}, &mut |n| wait_tx.send(n).unwrap(), &c2).unwrap().0
    });
    assert_eq!(wait_rx.recv().unwrap(), 1, "the waiter hears one answer is ahead of it");
    waiter_cancel.cancel();
    let out = waiter.join().unwrap();
    assert_eq!(out.finish, Finish::Cancelled);
    assert!(!long.is_finished(), "the long generation is still running");
    // the superseded long generation frees the model at once for the caller behind it
    let (wait_tx, wait_rx) = std::sync::mpsc::channel();
    let m3 = m.clone();
    let next = std::thread::spawn(move || {
        m3.generate_queued(&req(SYSTEM, "Hello?"), &mut |_| {}, &mut |n| wait_tx.send(n).unwrap(), &Cancel::new())
            .unwrap()
    });
    assert_eq!(wait_rx.recv().unwrap(), 1);
    long_cancel.cancel();
    let long = long.join().unwrap();
    assert_eq!(long.finish, Finish::Cancelled);
    assert!(long.usage.completion_tokens < 2000);
    let (out, stats) = next.join().unwrap();
    assert_ne!(out.finish, Finish::Cancelled);
    assert!(stats.generated_tokens >= 1 && stats.waited_ms > 0.0, "{stats:?}");
}

/// A server answering with the local model, and its owner, with two shop documents indexed.
async fn shop_on_the_local_model() -> (TestApp, Auth) {
    shop_on_the_local_model_with(4).await
}

/// [`shop_on_the_local_model`] running at most `sequences` generations together.
async fn shop_on_the_local_model_with(sequences: usize) -> (TestApp, Auth) {
    let path = gguf();
    let t = TestApp::with_config(move |c| {
        c.llm.local_model_path = Some(path.clone());
        c.llm.local_sequences = sequences;
    });
    let owner = t.owner().await;
    t.doc(
        &owner,
        "Opening hours",
        "The shop is open from nine to five on weekdays. On Saturdays it opens from ten to two.",
        json!({}),
    )
    .await;
    t.doc(
        &owner,
        "Deliveries",
        "Books are delivered abroad within ten days. Delivery in the country takes two days.",
        json!({}),
    )
    .await;
    t.drain();
    (t, owner)
}

#[tokio::test(flavor = "multi_thread")]
async fn two_streamed_turns_on_the_local_model_both_finish_and_the_second_says_it_waits() {
    // one generation at a time (STEWARD_LOCAL_SEQUENCES=1): the second turn waits for the first
    let (t, owner) = shop_on_the_local_model_with(1).await;
    let ask = |q: &'static str| {
        let (t, owner) = (&t, &owner);
        async move { t.post("/api/v1/chat", owner, json!({"message": q, "stream": true})).await }
    };
    let (a, b) = tokio::join!(ask("When is the shop open on Saturdays?"), ask("How long does delivery abroad take?"));
    let mut waited = 0;
    let mut conversations = vec![];
    for r in [a, b] {
        r.assert_status(200);
        let events = crate::chat::sse_events(&r.text());
        let done = &events.last().unwrap().1;
        assert_eq!(events.last().unwrap().0, "done", "{events:?}");
        assert_eq!(done["diagnostics"]["composer"]["provider"], "local", "{done}");
        assert!(!done["answer"].as_str().unwrap().trim().is_empty());
        conversations.push(done["conversationId"].clone());
        let stages: Vec<&str> =
            events.iter().filter(|(n, _)| n == "status").filter_map(|(_, d)| d["stage"].as_str()).collect();
        if let Some(w) = stages.iter().position(|s| *s == "waiting") {
            waited += 1;
            assert_eq!(stages[w + 1], "composing", "composing again when its turn comes: {stages:?}");
        }
    }
    assert_ne!(conversations[0], conversations[1]);
    assert_eq!(waited, 1, "one turn waited for the other");
}

/// Copies a GGUF file with its `tokenizer.chat_template` replaced (the header rewritten, the
/// tensor data moved to the new aligned start).
fn with_template(src: &Path, dst: &Path, template: &str) {
    let b = std::fs::read(src).unwrap();
    let mut at = 0usize;
    let u32_at = |b: &[u8], at: &mut usize| {
        let v = u32::from_le_bytes(b[*at..*at + 4].try_into().unwrap());
        *at += 4;
        v
    };
    let u64_at = |b: &[u8], at: &mut usize| {
        let v = u64::from_le_bytes(b[*at..*at + 8].try_into().unwrap());
        *at += 8;
        v
    };
    assert_eq!(&b[..4], b"GGUF");
    at += 8;
    let n_tensors = u64_at(&b, &mut at);
    let n_kv = u64_at(&b, &mut at);
    let mut out = b[..at].to_vec();
    let mut alignment = 32u64;
    fn skip_value(b: &[u8], at: &mut usize, ty: u32) {
        let size = |t: u32| match t {
            0 | 1 | 7 => 1,
            2 | 3 => 2,
            4..=6 => 4,
            10..=12 => 8,
            _ => 0,
        };
        match ty {
            8 => {
                let n = u64::from_le_bytes(b[*at..*at + 8].try_into().unwrap()) as usize;
                *at += 8 + n;
            }
            9 => {
                let inner = u32::from_le_bytes(b[*at..*at + 4].try_into().unwrap());
                let n = u64::from_le_bytes(b[*at + 4..*at + 12].try_into().unwrap()) as usize;
                *at += 12;
                for _ in 0..n {
                    skip_value(b, at, inner);
                }
            }
            t => *at += size(t),
        }
    }
    for _ in 0..n_kv {
        let start = at;
        let klen = u64_at(&b, &mut at) as usize;
        let key = String::from_utf8(b[at..at + klen].to_vec()).unwrap();
        at += klen;
        let ty = u32_at(&b, &mut at);
        let value_at = at;
        skip_value(&b, &mut at, ty);
        if key == "tokenizer.chat_template" {
            out.extend_from_slice(&b[start..value_at]);
            out.extend_from_slice(&(template.len() as u64).to_le_bytes());
            out.extend_from_slice(template.as_bytes());
        } else {
            if key == "general.alignment" {
                alignment = u32::from_le_bytes(b[value_at..value_at + 4].try_into().unwrap()) as u64;
            }
            out.extend_from_slice(&b[start..at]);
        }
    }
    let infos = at;
    for _ in 0..n_tensors {
        let nlen = u64_at(&b, &mut at) as usize;
        at += nlen;
        let dims = u32_at(&b, &mut at) as usize;
        at += dims * 8 + 4 + 8;
    }
    out.extend_from_slice(&b[infos..at]);
    let align = |x: u64| x.div_ceil(alignment) * alignment;
    let data = align(at as u64) as usize;
    out.resize(align(out.len() as u64) as usize, 0);
    out.extend_from_slice(&b[data..]);
    std::fs::write(dst, out).unwrap();
}

#[test]
fn a_gguf_is_formatted_by_its_own_chat_template() {
    let bundled =
        LocalModel::load(&gguf(), LocalSettings { threads: 1, context: 512, cache_bytes: 0, sequences: 1 }).unwrap();
    let r = req("Be brief.", "Hello there");
    let chatml = bundled.prompt(&r).unwrap();
    assert!(chatml.contains("<|im_start|>user\nHello there<|im_end|>"), "{chatml}");
    // the same weights with a Gemma-style template in the file's metadata
    let dir = tempfile::tempdir().unwrap();
    let gemma_file = dir.path().join("gemma-template.gguf");
    let gemma = "{{ bos_token }}{% for message in messages %}<start_of_turn>{{ message['role'] }}\n{{ message['content'] }}<end_of_turn>\n{% endfor %}<start_of_turn>model\n";
    with_template(&gguf(), &gemma_file, gemma);
    let other = LocalModel::load(&gemma_file, LocalSettings { threads: 1, context: 512, cache_bytes: 0, sequences: 1 })
        .unwrap();
    let p = other.prompt(&r).unwrap();
    assert!(p.contains("<start_of_turn>user\n"), "{p}");
    assert!(p.trim_end().ends_with("<start_of_turn>model"), "{p}");
    assert!(!p.contains("<|im_start|>"));
    // and it still generates from the moved tensor data
    let (out, _) = other.generate(&r, &mut |_| {}, &Cancel::new()).unwrap();
    assert!(out.usage.completion_tokens >= 1);
}

#[tokio::test]
async fn a_local_answer_the_sources_do_not_cover_is_declined_before_any_generation() {
    let path = gguf();
    let t = TestApp::with_config(move |c| c.llm.local_model_path = Some(path.clone()));
    let owner = t.owner().await;
    t.doc(&owner, "Opening hours", "The shop is open from nine to five on weekdays.", json!({})).await;
    t.drain();
    let v = t.post("/api/v1/chat", &owner, json!({"message": "Which volcano erupted in Iceland last spring?"})).await;
    v.assert_status(200);
    let v = v.json();
    assert_eq!(v["diagnostics"]["outcome"], "no_context", "{v}");
    assert_ne!(v["diagnostics"]["composer"]["provider"], "local", "no generation ran: {v}");
    assert!(v["citations"].as_array().is_none_or(|c| c.is_empty()), "{v}");
}

#[tokio::test]
async fn a_follow_up_restores_the_conversation_it_follows_from_the_prompt_cache() {
    let (t, owner) = shop_on_the_local_model().await;
    let usage = |v: &serde_json::Value| {
        assert_eq!(v["diagnostics"]["composer"]["provider"], "local", "{v}");
        let u = &v["diagnostics"]["composer"]["usage"];
        (u["promptTokens"].as_u64().unwrap(), u["cachedPromptTokens"].as_u64().unwrap_or(0))
    };
    let first = t.post("/api/v1/chat", &owner, json!({"message": "When is the shop open on Saturdays?"})).await;
    first.assert_status(200);
    let first = first.json();
    let (first_prompt, _) = usage(&first);
    let cid = first["conversationId"].clone();
    // another conversation in between: its own prompt is what the cache read last
    let other = t.post("/api/v1/chat", &owner, json!({"message": "How long does delivery abroad take?"})).await;
    other.assert_status(200);
    let follow = t
        .post(
            "/api/v1/chat",
            &owner,
            json!({"message": "And how long does delivery in the country take?", "conversationId": cid}),
        )
        .await;
    follow.assert_status(200);
    let follow = follow.json();
    let (prompt, cached) = usage(&follow);
    assert!(prompt > first_prompt, "the follow-up's prompt holds the first turn: {prompt} vs {first_prompt}");
    // the first turn's prompt comes from the cache, down to the cache's 16-token granularity and
    // but for the tokens that opened the model's answer (the model is not shown its own earlier
    // answers): only the new question and its sources are read
    assert!(
        cached + 16 + 4 > first_prompt,
        "{cached} of {prompt} prompt tokens restored; the first turn had {first_prompt}"
    );
    assert!(!follow["answer"].as_str().unwrap().trim().is_empty(), "{follow}");
}
