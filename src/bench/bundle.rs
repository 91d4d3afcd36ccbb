//! `steward bench bundle`: agent bundles on a real server. An agent with 20 routines (written in
//! portable markdown, some calling skills), 30 skills (every capability the spec names), 50
//! directives (some bound to skills) and context-variable enablements is built through the API;
//! then its export is timed, its bundle measured, and its import into the same workspace timed
//! (each import a new agent). Times are client wall time over loopback, medians of `runs`.

use std::time::Instant;

use reqwest::Method;
use serde_json::{Value, json};

use super::median;
use super::server::ChildServer;

const CAPABILITIES: [&str; 5] = ["retrieve", "mcp_tool", "email", "webhook_call", "notify"];

fn skill(k: usize) -> Value {
    let name = format!("skill_{k:02}");
    match CAPABILITIES[k % CAPABILITIES.len()] {
        "retrieve" => json!({"name": name, "capability": "retrieve", "invocationMode": "agent_selectable",
            "config": {"vectorTopK": 20 + k, "rerankEnabled": k.is_multiple_of(2), "instruction": format!("Prefer the handbook, section {k}.")}}),
        "mcp_tool" => json!({"name": name, "capability": "mcp_tool", "invocationMode": "agent_selectable",
            "target": {"kind": "mcp_connection", "id": format!("conn-{k}")},
            "config": {"toolName": format!("lookup_{k}"), "boundParams": {"tenant": "acme"}, "declaredOutcomes": ["found", "missing"]}}),
        "email" => json!({"name": name, "capability": "email",
            "config": {"mode": "draft", "boundInputs": {"cc": "audit@example.com"}, "exposedInputs": {"to": true, "subject": true, "bodyText": true}}}),
        "webhook_call" => json!({"name": name, "capability": "webhook_call",
            "config": {"url": format!("https://hooks.example.com/{k}"), "boundPayload": {"source": "steward"}}}),
        _ => json!({"name": name, "capability": "notify",
            "config": {"delivery": {"recipientEmails": ["desk@example.com"]}, "exposedInputs": {"message": true}}}),
    }
}

/// Routine `k` in portable markdown: three steps, the second calling an MCP or retrieve skill.
fn routine(k: usize) -> String {
    let callee = format!("skill_{:02}", (k * 5 + 1) % 30);
    format!(
        "---\nname: Flow {k:02}\ntrigger: customer asks about case number {k} and wants it handled\nvars: email:email, order_ref:text\n---\n# Collect\nAsk for the @order_ref and an @email address for case {k}.\n# Lookup\nCheck the order #{callee}[in email=@email]\n# Confirm\nTell the customer case {k} is registered for @order_ref.\n"
    )
}

fn directive(k: usize) -> Value {
    let mut d = json!({"name": format!("rule-{k:02}"), "action": format!("When case {k} comes up, answer with the steps from the handbook."),
        "priority": k % 100, "tags": [format!("topic{}", k % 7)]});
    if k.is_multiple_of(5) {
        // bound to an agent-selectable retrieve or MCP skill
        let bound = format!("skill_{:02}", (k / 5) % 6 * 5 + (k / 5) % 2);
        d["action"] = json!(format!("Look it up with #{bound} before answering about case {k}."));
        d["binding"] = json!({"kind": "skill", "skillName": bound});
    }
    if k.is_multiple_of(3) {
        d["condition"] = json!({"kind": "contextual", "description": format!("the customer mentions case {k}")});
    }
    d
}

/// Builds the agent, then times `runs` exports and imports.
pub async fn run(runs: usize) -> anyhow::Result<Value> {
    let s = ChildServer::start(&[])?;
    let agent = s
        .send(
            Method::POST,
            "/api/v1/agents",
            &json!({"name": "Bench bundle agent", "customInstruction": "Answer as the Acme desk.",
            "surfaceSettings": {"anonymousChat": {"enabled": true}}, "contactRequestsEnabled": true}),
        )
        .await?;
    let id = agent["id"].as_str().unwrap_or_default().to_string();
    let base = format!("/api/v1/agents/{id}");
    for k in 0..30 {
        s.send(Method::POST, &format!("{base}/skills"), &skill(k)).await?;
    }
    for k in 0..5 {
        let v = s.send(Method::POST, "/api/v1/context-variables", &json!({"name": format!("fact_{k}")})).await?;
        let vid = v["id"].as_str().unwrap_or_default();
        s.send(Method::PUT, &format!("{base}/context-variables/{vid}"), &json!({"source": "pushed"})).await?;
    }
    for k in 0..20 {
        let body = json!({"grammarVersion": 1, "content": routine(k)});
        s.send(Method::POST, &format!("{base}/routines/portable"), &body).await?;
    }
    for k in 0..50 {
        s.send(Method::POST, &format!("{base}/directives"), &directive(k)).await?;
    }
    let export = |path: String| {
        let req = s.http.get(format!("{}{path}", s.base)).bearer_auth(&s.token);
        async move {
            let t = Instant::now();
            let r = req.send().await?;
            anyhow::ensure!(r.status().is_success(), "export: {}", r.status());
            let bytes = r.bytes().await?;
            Ok::<_, anyhow::Error>((t.elapsed().as_secs_f64() * 1000.0, bytes))
        }
    };
    let path = format!("{base}/bundle");
    export(path.clone()).await?; // warm-up
    let (mut export_ms, mut import_ms) = (Vec::new(), Vec::new());
    let mut bundle = bytes::Bytes::new();
    for _ in 0..runs {
        let (ms, b) = export(path.clone()).await?;
        export_ms.push(ms);
        bundle = b;
    }
    let doc: Value = serde_json::from_slice(&bundle)?;
    let mut unresolved = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let r = s
            .http
            .post(format!("{}/api/v1/agents/bundle", s.base))
            .bearer_auth(&s.token)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(bundle.clone())
            .send()
            .await?;
        let status = r.status();
        let v: Value = r.json().await?;
        import_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        anyhow::ensure!(status.as_u16() == 201 && v["status"] == "applied", "import: {status} {v}");
        anyhow::ensure!(v["counts"]["routines"] == 20 && v["counts"]["directives"] == 50, "not all came across: {v}");
        unresolved = v["unresolved"].as_array().map(Vec::len).unwrap_or(0);
    }
    s.stop();
    let count = |k: &str| doc[k].as_array().map(Vec::len).unwrap_or(0);
    Ok(json!({
        "machine": {"cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)},
        "agent": {"routines": count("routines"), "skills": count("agentSkills"), "directives": count("directives"),
                  "contextVariables": count("contextVariables")},
        "bundleBytes": bundle.len(),
        "runs": runs,
        "exportMedianMs": median(&export_ms),
        "exportMs": export_ms,
        "importMedianMs": median(&import_ms),
        "importMs": import_ms,
        "unresolvedPerImport": unresolved,
    }))
}
