//! `steward bench routines`: what a routine adds to a turn, with the built-in answerer, on a real
//! server. The same small corpus answers plain questions (the routine pass runs and engages
//! nothing) and drives a routine (activation, then typed slot answers); reported is the server
//! time of each kind of turn (`diagnostics.durationMs`, p50/p95) and, as a baseline, turns of an
//! agent with no routines at all.

use serde_json::{Value, json};

use super::server::ChildServer;
use super::{median, percentile};

const DOCS: [(&str, &str); 3] = [
    (
        "Returns policy",
        "Items can be returned within 30 days of delivery for a full refund. Refunds are paid to the original payment method within five working days.",
    ),
    (
        "Shipping",
        "Standard shipping takes two to four working days. Express delivery arrives the next working day when ordered before 14:00.",
    ),
    ("Care guide", "Wash cotton shirts at 30 degrees and hang them to dry. Wool sweaters should be washed by hand."),
];

const QUESTIONS: [&str; 5] = [
    "How long does standard shipping take?",
    "Can I return an item after two weeks?",
    "How should I wash a wool sweater?",
    "When do refunds arrive?",
    "Is there express delivery?",
];

fn routine() -> Value {
    let slot =
        |k: &str, t: &str, o: i64| json!({"stableSlotId": k, "key": k, "type": t, "required": true, "ordinal": o});
    json!({"definition": {
        "name": "Warranty claim",
        "activation": {"triggerDescription": "customer wants to file a warranty claim for a broken appliance"},
        "slots": [slot("serial", "text", 1), slot("email", "email", 2), slot("bought", "date", 3)],
        "steps": [{"stableStepId": "collect", "kind": "chat", "ordinal": 1,
                   "instruction": "Tell me the {{slot.serial}}, your {{slot.email}} and when it was {{slot.bought}}."}],
        "transitions": [{"fromStep": "collect", "toRef": "done", "guardKind": "default", "ordinal": 1}],
        "terminals": [{"stableStepId": "done", "kind": "complete", "ordinal": 1, "instruction": "Your claim for {{slot.serial}} is filed."}],
    }})
}

async fn turn(s: &ChildServer, message: &str, cid: Option<&str>) -> anyhow::Result<Value> {
    let mut body = json!({"message": message});
    if let Some(c) = cid {
        body["conversationId"] = json!(c);
    }
    s.send(reqwest::Method::POST, "/api/v1/chat", &body).await
}

fn ms(v: &Value) -> f64 {
    v["diagnostics"]["durationMs"].as_f64().unwrap_or(f64::NAN)
}

fn summary(xs: &[f64]) -> Value {
    json!({"turns": xs.len(), "p50Ms": median(xs), "p95Ms": percentile(xs, 95.0)})
}

/// `n` plain questions, each a new conversation; their server times.
async fn plain(s: &ChildServer, n: usize) -> anyhow::Result<Vec<f64>> {
    let mut xs = Vec::new();
    for k in 0..n {
        xs.push(ms(&turn(s, QUESTIONS[k % QUESTIONS.len()], None).await?));
    }
    Ok(xs)
}

/// Plain turns (`n`), then with the routine published: plain turns again and routine turns.
pub async fn run(n: usize) -> anyhow::Result<Value> {
    let s = ChildServer::start(&[])?;
    for (title, content) in DOCS {
        s.send(reqwest::Method::POST, "/api/v1/document/", &json!({"title": title, "content": content})).await?;
    }
    s.wait_idle().await?;
    // warm-up
    for q in QUESTIONS {
        turn(&s, q, None).await?;
    }
    let baseline = plain(&s, n).await?;
    let agents = s.get("/api/v1/agents").await?;
    let agent = agents["agents"][0]["id"].as_str().unwrap_or_default().to_string();
    s.send(reqwest::Method::POST, &format!("/api/v1/agents/{agent}/routines"), &routine()).await?;
    let state = s.get(&format!("/api/v1/agents/{agent}/revision-state")).await?;
    let g = state["draft"]["generation"].as_i64().unwrap_or(0);
    let cand = s
        .send(
            reqwest::Method::POST,
            &format!("/api/v1/agents/{agent}/revisions/candidates"),
            &json!({"expectedDraftGeneration": g}),
        )
        .await?;
    let publish = json!({"expectedDraftGeneration": g, "expectedPublishedRevisionId": state["publishedRevision"]["id"],
        "idempotencyKey": "bench-routines"});
    let cid = cand["id"].as_str().unwrap_or_default();
    s.send(reqwest::Method::POST, &format!("/api/v1/agents/{agent}/revisions/{cid}/publish"), &publish).await?;
    let with_pass = plain(&s, n).await?;
    // routine turns: activation, then the three answers in two turns
    let (mut activate, mut answer) = (Vec::new(), Vec::new());
    for k in 0..n.div_ceil(3) {
        let v = turn(&s, "My blender broke and I want to file a warranty claim", None).await?;
        anyhow::ensure!(v["routine"]["name"] == "Warranty claim", "the routine did not start: {v}");
        activate.push(ms(&v));
        let c = v["conversationId"].as_str().unwrap_or_default().to_string();
        let v = turn(&s, &format!("serial SN-{k} and my email is a{k}@example.com"), Some(&c)).await?;
        answer.push(ms(&v));
        let v = turn(&s, "bought 2026-01-15", Some(&c)).await?;
        anyhow::ensure!(v["routine"]["status"] == "completed", "the routine did not complete: {v}");
        answer.push(ms(&v));
    }
    s.stop();
    Ok(json!({
        "machine": {"cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)},
        "plainTurnNoRoutines": summary(&baseline),
        "plainTurnWithARoutinePublished": summary(&with_pass),
        "routineActivationTurn": summary(&activate),
        "routineAnswerTurn": summary(&answer),
        "addedByTheRoutinePassP50Ms": median(&with_pass) - median(&baseline),
    }))
}
