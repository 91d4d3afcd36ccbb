//! Agent bundles: export → import into another workspace → export again gives the same document;
//! no secret is ever in an exported bundle; every unresolved kind comes from a fixture; unread
//! versions and bad shapes write nothing; idempotency keys (replay, concurrent attempts); the
//! cleanup of interrupted imports (a stale key, the scheduled sweep, a restart, and a real
//! `kill -9` of the binary); audit events carry counts only.

use std::collections::BTreeSet;

use axum::http::Method;
use serde_json::{Value, json};
use steward::clock::Clock;

use crate::support::{Auth, Resp, TestApp};

const DEST_SECRET_URL: &str = "https://127.0.0.1:9/hooks/books";
const WEBHOOK_URL: &str = "https://hooks.example.com/t/ping-7c1f9e2b-secret-path";
const SLACK_URL: &str = "https://hooks.slack.com/services/T0001/B0001/slack9f8e7d6c5b4a";
const MCP_URL: &str = "https://mcp.example.com/v1/mcp-4b5a6c";
const MCP_CREDENTIAL: &str = "mcp-cred-3f2e1d0c9b8a";
const CONTACT_EMAIL: &str = "escalations-5d4c@example.com";
const CONTACT_HOOK: &str = "https://hooks.example.com/contact-2b3c4d5e";
const NOTIFY_EMAIL: &str = "sales-desk-6e5f@example.com";
const CC_EMAIL: &str = "audit-cc-7a8b@example.com";
const PROVIDER_KEY: &str = "sk-test-provider-key-1a2b3c4d5e6f7a8b";
const SENSITIVE_VALUE: &str = "NL91ABNA0417164300-sensitive";
const LOGO_MARKER: &str = "logo-marker-e8d7c6";

fn keyed() -> TestApp {
    TestApp::with_config(|c| {
        c.encryption_key = Some(steward::config::Secret::new([7u8; 32]));
        c.delivery.allow = vec!["127.0.0.1/32".into()];
    })
}

/// A request in workspace `ws`.
async fn call(t: &TestApp, method: Method, path: &str, a: &Auth, body: Option<Value>, ws: &str) -> Resp {
    t.send(method, path, a, body, &[("x-workspace-id", ws)]).await
}

async fn ok(t: &TestApp, method: Method, path: &str, a: &Auth, body: Value, ws: &str) -> Value {
    let body = if body.is_null() { None } else { Some(body) };
    let r = call(t, method.clone(), path, a, body, ws).await;
    assert!(r.status.is_success(), "{method} {path}: {} {}", r.status, r.text());
    if r.body.is_empty() { Value::Null } else { r.json() }
}

async fn export(t: &TestApp, a: &Auth, ws: &str, agent: &str) -> Resp {
    let r = call(t, Method::GET, &format!("/api/v1/agents/{agent}/bundle"), a, None, ws).await;
    r.assert_status(200);
    r
}

async fn import(t: &TestApp, a: &Auth, ws: &str, bundle: &Value) -> Resp {
    call(t, Method::POST, "/api/v1/agents/bundle", a, Some(bundle.clone()), ws).await
}

async fn agent_count(t: &TestApp, a: &Auth, ws: &str) -> usize {
    call(t, Method::GET, "/api/v1/agents", a, None, ws).await.json()["agents"].as_array().unwrap().len()
}

fn kinds(r: &Value) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = r["unresolved"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| (u["kind"].as_str().unwrap().to_string(), u["element"].as_str().unwrap().to_string()))
        .collect();
    v.sort();
    v
}

fn skill_named<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["skills"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("no skill {name}"))
}

/// What the source and destination workspaces both need: a webhook destination named Books and the
/// context variables `plan` and `tier`.
async fn workspace_basics(t: &TestApp, owner: &Auth, ws: &str) -> String {
    let d = ok(
        t,
        Method::POST,
        "/api/v1/settings/webhook-destinations",
        owner,
        json!({"name": "Books", "url": DEST_SECRET_URL}),
        ws,
    )
    .await;
    for name in ["plan", "tier"] {
        ok(t, Method::POST, "/api/v1/context-variables", owner, json!({"name": name}), ws).await;
    }
    d["destination"]["id"].as_str().unwrap().to_string()
}

fn svg_logo() -> Vec<u8> {
    format!("<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"{LOGO_MARKER}\" width=\"8\" height=\"8\"><rect width=\"8\" height=\"8\" fill=\"#123456\"/></svg>").into_bytes()
}

/// Uploads the SVG logo to an agent of workspace `ws`.
async fn upload_logo(t: &TestApp, owner: &Auth, ws: &str, agent: &str) {
    use axum::body::Body;
    use axum::http::{Request, header};
    let Auth::Cookie(c) = owner else { panic!("a session") };
    let req = Request::builder()
        .method(Method::POST)
        .uri(format!("/api/v1/agents/{agent}/assistant-logo"))
        .header(header::CONTENT_TYPE, "image/svg+xml")
        .header(header::COOKIE, c)
        .header("sec-fetch-site", "same-origin")
        .header("x-workspace-id", ws)
        .body(Body::from(svg_logo()))
        .unwrap();
    t.raw(req).await.assert_status(201);
}

struct Source {
    agent: String,
    routine_ids: Vec<String>,
    skill_ids: Vec<String>,
    destination: String,
    destination_secret: String,
}

/// An agent with skills of every capability the spec names, routines written in portable
/// markdown, directives (bound ones among them), context-variable enablements, a custom
/// instruction, surfaces on, contact requests with their delivery and a logo.
async fn build_source(t: &TestApp, owner: &Auth, ws: &str) -> Source {
    let d = ok(
        t,
        Method::POST,
        "/api/v1/settings/webhook-destinations",
        owner,
        json!({"name": "Books", "url": DEST_SECRET_URL}),
        ws,
    )
    .await;
    let destination = d["destination"]["id"].as_str().unwrap().to_string();
    let destination_secret = d["secret"].as_str().unwrap().to_string();
    for name in ["plan", "tier"] {
        ok(t, Method::POST, "/api/v1/context-variables", owner, json!({"name": name}), ws).await;
    }
    let a = ok(t, Method::POST, "/api/v1/agents", owner, json!({
        "name": "Support desk",
        "customInstruction": "Answer as the Acme support desk, briefly.",
        "greetingInstruction": "Greet returning customers by plan.",
        "suggestedQuestionsEnabled": false,
        "webhookExportsEnabled": true,
        "contactRequestsEnabled": true,
        "contactRequestDelivery": {"recipientEmails": [CONTACT_EMAIL], "webhook": {"url": CONTACT_HOOK}},
        "theme": {"brand": "#112233", "brandText": "#ffffff", "surface": "#fafafa", "text": "#111111"},
        "surfaceSettings": {"authenticatedChat": {"enabled": true}, "anonymousChat": {"enabled": true},
            "websiteEmbed": {"enabled": true, "allowedOrigins": ["https://www.example.com"], "launcherLabel": "Ask us", "launcherPosition": "bottom-left"}},
        "sourceScope": {"mode": "selected", "sourceIds": []},
        "skillSettings": {"retrieval.answer": {"vectorTopK": 50, "rerankEnabled": false}},
    }), ws).await;
    let agent = a["id"].as_str().unwrap().to_string();
    let base = format!("/api/v1/agents/{agent}");
    let skills = [
        json!({"name": "faq", "capability": "retrieve", "invocationMode": "agent_selectable",
               "config": {"vectorTopK": 30, "sourceScope": {"mode": "all"}, "instruction": "Prefer the FAQ."}}),
        json!({"name": "crm", "capability": "mcp_tool", "invocationMode": "agent_selectable",
               "target": {"kind": "mcp_connection", "id": "conn-1"},
               "config": {"toolName": "lookup_customer", "serverUrl": MCP_URL, "credential": MCP_CREDENTIAL,
                          "boundParams": {"tenant": "acme"}, "declaredOutcomes": ["found", "missing"]}}),
        json!({"name": "mailer", "capability": "email",
               "config": {"mode": "draft", "boundInputs": {"cc": CC_EMAIL}, "exposedInputs": {"to": true, "subject": true, "bodyText": true}}}),
        json!({"name": "ping", "capability": "webhook_call",
               "target": {"kind": "webhook_destination", "id": destination},
               "config": {"url": WEBHOOK_URL, "boundPayload": {"source": "steward"}, "exposedPayload": {"note": true}}}),
        json!({"name": "contact_human", "capability": "notify",
               "config": {"delivery": {"recipientEmails": [NOTIFY_EMAIL]}, "exposedInputs": {"message": true, "email": true}}}),
    ];
    let mut skill_ids = Vec::new();
    for s in skills {
        skill_ids.push(
            ok(t, Method::POST, &format!("{base}/skills"), owner, s, ws).await["id"].as_str().unwrap().to_string(),
        );
    }
    let crm = skill_ids[1].clone();
    let vars = ok(t, Method::GET, "/api/v1/context-variables", owner, json!(null), ws).await;
    let var = |n: &str| {
        vars["contextVariables"].as_array().unwrap().iter().find(|v| v["name"] == n).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    ok(
        t,
        Method::PUT,
        &format!("{base}/context-variables/{}", var("plan")),
        owner,
        json!({"source": "pushed", "surfacing": "always"}),
        ws,
    )
    .await;
    ok(
        t,
        Method::PUT,
        &format!("{base}/context-variables/{}", var("tier")),
        owner,
        json!({"source": "resolver", "resolverSkillId": crm}),
        ws,
    )
    .await;
    let refund = format!(
        "---\nname: Refund\ntrigger: shopper asks for money back on an order\nexport: complete -> {destination}\nvars: contact:email\n---\n# Collect\nAsk for a @contact address.\n# Lookup\nLook the customer up #crm[in email=@contact]\n"
    );
    let newsletter = "---\nname: Newsletter\ntrigger: visitor wants the newsletter\nvars: email:email\n---\n# Ask\nAsk for the @email address to subscribe.\n";
    let mut routine_ids = Vec::new();
    for md in [refund.as_str(), newsletter] {
        let r = ok(
            t,
            Method::POST,
            &format!("{base}/routines/portable"),
            owner,
            json!({"grammarVersion": 1, "content": md}),
            ws,
        )
        .await;
        routine_ids.push(r["routineId"].as_str().unwrap().to_string());
    }
    let directives = [
        json!({"name": "faq-first", "action": "Use #faq for product questions.", "binding": {"kind": "skill", "skillName": "faq"}, "priority": 10}),
        json!({"name": "crm-lookup", "condition": {"kind": "contextual", "description": "the customer gives an email"},
               "action": "Look them up with #crm.", "binding": {"kind": "skill", "skillName": "crm"}}),
        json!({"name": "in-refund", "action": "Keep refund replies short.", "tags": [format!("routine:{}", routine_ids[0]), "billing"]}),
        json!({"name": "tone", "action": "Be warm.", "coverageCriteria": {"coverage": ["answered"]}, "surfaces": ["answer"], "enabled": false}),
    ];
    for d in directives {
        ok(t, Method::POST, &format!("{base}/directives"), owner, d, ws).await;
    }
    upload_logo(t, owner, ws, &agent).await;
    Source { agent, routine_ids, skill_ids, destination, destination_secret }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bundle_round_trips_through_a_second_workspace_unchanged_apart_from_ids() {
    let t = keyed();
    let owner = t.owner().await;
    let ws1 = t.get_ws();
    let ws2 = t.workspace(&owner, "Second").await;
    let src = build_source(&t, &owner, &ws1).await;
    let first = export(&t, &owner, &ws1, &src.agent).await;
    let disposition = first.headers["content-disposition"].to_str().unwrap().to_string();
    assert_eq!(disposition, "attachment; filename=\"support-desk.bundle.json\"");
    let bundle = first.json();
    // exporting twice gives the same bytes (canonical)
    assert_eq!(export(&t, &owner, &ws1, &src.agent).await.body, first.body);
    assert_eq!(bundle["bundleVersion"], 1);
    assert_eq!(bundle["agent"]["schemaVersion"], 4);
    assert_eq!(bundle["agent"]["logo"], json!({"__ref": "agentLogo"}));
    assert!(bundle["agent"].get("contactRequestDelivery").is_none(), "redacted entirely");
    let skills = json!({"skills": bundle["agentSkills"]});
    assert_eq!(skill_named(&skills, "crm")["omittedConfigKeys"], json!(["credential", "serverUrl"]));
    assert_eq!(
        skill_named(&skills, "crm")["target"],
        json!({"kind": "mcp_connection", "id": {"__ref": "agentSkillTarget"}})
    );
    assert_eq!(
        skill_named(&skills, "crm")["config"],
        json!({"boundParams": {"tenant": "acme"}, "declaredOutcomes": ["found", "missing"], "toolName": "lookup_customer"})
    );
    assert_eq!(skill_named(&skills, "ping")["omittedConfigKeys"], json!(["url"]));
    assert_eq!(skill_named(&skills, "contact_human")["omittedConfigKeys"], json!(["delivery"]));
    assert_eq!(skill_named(&skills, "contact_human")["target"], json!({"kind": "notify_delivery", "id": null}));
    assert_eq!(skill_named(&skills, "faq")["omittedConfigKeys"], json!(["sourceScope"]));
    assert_eq!(skill_named(&skills, "mailer")["omittedConfigKeys"], json!(["boundInputs"]));
    let names: Vec<&str> =
        bundle["agentSkills"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["contact_human", "crm", "faq", "mailer", "ping"], "sorted by name");
    let rnames: Vec<&str> =
        bundle["routines"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(rnames, ["Newsletter", "Refund"], "sorted by name");
    assert_eq!(bundle["routines"][1]["definition"]["completionExport"]["destinationRef"], "Books", "by name");
    assert!(bundle["routines"][1]["definition"]["enabled"].as_bool().unwrap());
    let refund_directive = bundle["directives"].as_array().unwrap().iter().find(|d| d["name"] == "in-refund").unwrap();
    assert_eq!(refund_directive["tags"], json!(["routine:#1", "billing"]));
    assert_eq!(
        bundle["contextVariables"][1],
        json!({"variableName": "tier", "source": "resolver", "resolverSkillName": "crm", "enabled": true, "surfacing": "on_reference"})
    );
    let text = first.text();
    for id in [&src.agent, &ws1, &src.destination].into_iter().chain(&src.routine_ids).chain(&src.skill_ids) {
        assert!(!text.contains(id.as_str()), "an id of the source workspace is in the bundle: {id}");
    }

    // the destination workspace has a destination named Books and the same variables
    let dest2 = workspace_basics(&t, &owner, &ws2).await;
    let before = agent_count(&t, &owner, &ws2).await;
    let r = import(&t, &owner, &ws2, &bundle).await;
    r.assert_status(201);
    let res = r.json();
    assert_eq!((res["status"].as_str(), res["replayed"].as_bool()), (Some("applied"), Some(false)));
    assert_eq!(agent_count(&t, &owner, &ws2).await, before + 1);
    let want: Vec<(String, String)> = [
        ("asset_not_portable", "agent.logo"),
        ("contact_delivery_unbound", "agent.contactRequestDelivery"),
        ("document_source_unresolved", "agent.sourceScope"),
        ("document_source_unresolved", "agentSkills.faq.config.sourceScope"),
        ("mcp_connection_unbound", "agentSkills.crm"),
        ("skill_config_not_portable", "agentSkills.contact_human"),
        ("skill_config_not_portable", "agentSkills.mailer"),
        ("skill_target_unbound", "agentSkills.ping"),
        ("surface_credential_unbound", "agent.surfaceSettings.anonymousChat"),
        ("surface_credential_unbound", "agent.surfaceSettings.websiteEmbed"),
    ]
    .iter()
    .map(|(k, e)| (k.to_string(), e.to_string()))
    .collect();
    assert_eq!(kinds(&res), want, "{res}");
    assert_eq!(
        res["counts"],
        json!({"routines": 2, "skills": 5, "contextVariables": 2, "directives": 4, "evalCases": 0, "unresolved": 10})
    );
    let agent2 = res["agentId"].as_str().unwrap().to_string();
    let job = call(
        &t,
        Method::GET,
        &format!("/api/v1/agents/bundle/imports/{}", res["importId"].as_str().unwrap()),
        &owner,
        None,
        &ws2,
    )
    .await;
    job.assert_status(200);
    assert_eq!(job.json()["status"], "applied");
    assert_eq!(job.json()["agentId"], agent2.as_str());
    // another workspace cannot read the job
    call(
        &t,
        Method::GET,
        &format!("/api/v1/agents/bundle/imports/{}", res["importId"].as_str().unwrap()),
        &owner,
        None,
        &ws1,
    )
    .await
    .assert_status(404);

    // what rule 5 held back: connection-bound skills disabled, surfaces off, no sources, no logo
    let base2 = format!("/api/v1/agents/{agent2}");
    let a2 = call(&t, Method::GET, &base2, &owner, None, &ws2).await.json();
    assert_eq!(a2["surfaceSettings"]["anonymousChat"]["enabled"], false);
    assert_eq!(a2["surfaceSettings"]["websiteEmbed"]["enabled"], false);
    assert_eq!(a2["surfaceSettings"]["authenticatedChat"]["enabled"], true);
    assert_eq!(a2["sourceScope"], json!({"mode": "selected", "sourceIds": []}));
    assert_eq!(a2["contactRequestDelivery"], json!({"recipientEmails": [], "webhook": null}));
    assert_eq!(a2["logo"], Value::Null);
    assert_eq!(a2["isDefault"], false);
    assert_eq!(a2["customInstruction"], "Answer as the Acme support desk, briefly.");
    let state = call(&t, Method::GET, &format!("{base2}/revision-state"), &owner, None, &ws2).await.json();
    assert_eq!(state["status"], "draft_changes", "the import is the draft, to review and publish");
    let sk = call(&t, Method::GET, &format!("{base2}/skills"), &owner, None, &ws2).await.json();
    assert_eq!(skill_named(&sk, "crm")["enabled"], false);
    assert_eq!(skill_named(&sk, "ping")["enabled"], false);
    assert_eq!(skill_named(&sk, "faq")["enabled"], true);
    assert_eq!(skill_named(&sk, "faq")["config"]["sourceScope"], json!({"mode": "selected", "sourceIds": []}));
    let vars = call(&t, Method::GET, &format!("{base2}/context-variables"), &owner, None, &ws2).await.json();
    let tier = vars["contextVariables"].as_array().unwrap().iter().find(|v| v["name"] == "tier").unwrap().clone();
    assert_eq!(tier["enabled"], false, "its resolver skill came across disabled");
    let routines = call(&t, Method::GET, &format!("{base2}/routines"), &owner, None, &ws2).await.json();
    let refund2 = routines["routines"].as_array().unwrap().iter().find(|r| r["name"] == "Refund").unwrap().clone();
    assert_eq!(refund2["definition"]["completionExport"]["destinationRef"], dest2.as_str());
    let ds = call(&t, Method::GET, &format!("{base2}/directives"), &owner, None, &ws2).await.json();
    let tagged = ds["directives"].as_array().unwrap().iter().find(|d| d["name"] == "in-refund").unwrap().clone();
    assert_eq!(tagged["tags"], json!([format!("routine:{}", refund2["id"].as_str().unwrap()), "billing"]));

    // exported at once, the copy differs from the source by exactly what rule 5 held back
    let mut expected = bundle.clone();
    expected["agent"].as_object_mut().unwrap().remove("logo");
    expected["agent"]["surfaceSettings"]["anonymousChat"]["enabled"] = json!(false);
    expected["agent"]["surfaceSettings"]["websiteEmbed"]["enabled"] = json!(false);
    for s in expected["agentSkills"].as_array_mut().unwrap() {
        if s["name"] == "crm" || s["name"] == "ping" {
            s["enabled"] = json!(false);
            s["target"] = Value::Null;
        }
        // the copy does not have the settings that stayed behind, so it names none (the sourceScope
        // of faq is there: set to none selected)
        if s["name"] != "faq" {
            s["omittedConfigKeys"] = json!([]);
        }
    }
    expected["contextVariables"][1]["enabled"] = json!(false);
    assert_eq!(export(&t, &owner, &ws2, &agent2).await.json(), expected);

    // the operator does what each unresolved entry says; the export is then the same document
    let crm2 = skill_named(&sk, "crm")["id"].as_str().unwrap().to_string();
    ok(&t, Method::PATCH, &format!("{base2}/skills/{crm2}"), &owner, json!({"enabled": true,
        "target": {"kind": "mcp_connection", "id": "conn-9"}, "config": {"serverUrl": MCP_URL, "credential": "another"}}), &ws2).await;
    ok(
        &t,
        Method::PUT,
        &format!("{base2}/context-variables/{}", tier["contextVariableId"].as_str().unwrap()),
        &owner,
        json!({"enabled": true}),
        &ws2,
    )
    .await;
    let ping2 = skill_named(&sk, "ping")["id"].as_str().unwrap().to_string();
    ok(
        &t,
        Method::PATCH,
        &format!("{base2}/skills/{ping2}"),
        &owner,
        json!({"enabled": true,
        "target": {"kind": "webhook_destination", "id": dest2}, "config": {"url": "https://hooks.example.com/other"}}),
        &ws2,
    )
    .await;
    let notify2 = skill_named(&sk, "contact_human")["id"].as_str().unwrap().to_string();
    ok(
        &t,
        Method::PATCH,
        &format!("{base2}/skills/{notify2}"),
        &owner,
        json!({"config": {"delivery": {"recipientEmails": ["x@example.com"]}}}),
        &ws2,
    )
    .await;
    let mailer2 = skill_named(&sk, "mailer")["id"].as_str().unwrap().to_string();
    ok(
        &t,
        Method::PATCH,
        &format!("{base2}/skills/{mailer2}"),
        &owner,
        json!({"config": {"boundInputs": {"cc": "y@example.com"}}}),
        &ws2,
    )
    .await;
    ok(&t, Method::PUT, &base2, &owner, json!({
        "surfaceSettings": {"authenticatedChat": {"enabled": true}, "anonymousChat": {"enabled": true},
            "websiteEmbed": {"enabled": true, "allowedOrigins": ["https://www.example.com"], "launcherLabel": "Ask us", "launcherPosition": "bottom-left"}},
        "contactRequestDelivery": {"recipientEmails": ["z@example.com"], "webhook": null},
    }), &ws2).await;
    upload_logo(&t, &owner, &ws2, &agent2).await;
    let again = export(&t, &owner, &ws2, &agent2).await;
    assert_eq!(again.json(), bundle, "export → import → fix → export is the same document");
    assert_eq!(again.body, first.body, "byte for byte");
}

/// A bundle that produces every unresolved kind in a workspace without the source's variables
/// and destinations.
fn every_kind_bundle() -> Value {
    let chat =
        |id: &str| json!({"stableStepId": id, "kind": "chat", "ordinal": 1, "instruction": "Ask for the order."});
    json!({
        "bundleVersion": 1,
        "agent": {
            "schemaVersion": 4, "name": "Everything unresolved",
            "logo": {"__ref": "agentLogo"},
            "contactRequestsEnabled": true,
            "sourceScope": {"mode": "selected", "sourceIds": []},
            "surfaceSettings": {"anonymousChat": {"enabled": true}},
        },
        "agentSkills": [
            {"name": "ping", "capability": "webhook_call", "invocationMode": "routine_named", "enabled": true,
             "config": {"boundPayload": {"a": 1}}, "omittedConfigKeys": [],
             "target": {"kind": "webhook_destination", "id": {"__ref": "agentSkillTarget"}}},
            {"name": "teleport", "capability": "teleport", "config": {"to": "mars"}},
            {"name": "crm", "capability": "mcp_tool", "invocationMode": "agent_selectable", "enabled": true,
             "config": {"toolName": "lookup"}, "omittedConfigKeys": ["credential", "serverUrl"],
             "target": {"kind": "mcp_connection", "id": {"__ref": "agentSkillTarget"}}},
            {"name": "hook_only", "capability": "webhook_call", "config": {}, "omittedConfigKeys": ["url"]},
            {"name": "faq", "capability": "retrieve", "invocationMode": "agent_selectable", "config": {"vectorTopK": 20}},
        ],
        "contextVariables": [
            {"variableName": "nowhere", "source": "pushed", "enabled": true},
            {"variableName": "plan", "source": "resolver", "resolverSkillName": "teleport", "enabled": true},
        ],
        "routines": [
            {"name": "Export", "version": 1, "definition": {
                "name": "Export", "activation": {"triggerDescription": "customer wants an export"},
                "steps": [chat("ask")],
                "transitions": [{"fromStep": "ask", "toRef": "done", "guardKind": "default", "ordinal": 1}],
                "terminals": [{"stableStepId": "done", "kind": "complete", "ordinal": 1}],
                "completionExport": {"enabled": true, "triggerKinds": ["complete"], "destinationRef": "Only in the source"}}},
        ],
        "directives": [
            {"name": "beam", "action": "Use #teleport to move.", "binding": {"kind": "skill", "skillName": "teleport"}},
            {"name": "lookup", "action": "Use #faq first.", "binding": {"kind": "skill", "skillName": "faq"}},
        ],
    })
}

#[tokio::test]
async fn every_unresolved_kind_comes_from_a_fixture_and_nothing_grants_more_access() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let ws = t.get_ws();
    ok(&t, Method::POST, "/api/v1/context-variables", &owner, json!({"name": "plan"}), &ws).await;
    let r = import(&t, &owner, &ws, &every_kind_bundle()).await;
    r.assert_status(201);
    let res = r.json();
    let got: BTreeSet<String> = kinds(&res).into_iter().map(|(k, _)| k).collect();
    let all: BTreeSet<String> = [
        "skill_target_unbound",
        "skill_capability_unknown",
        "context_variable_missing",
        "resolver_skill_missing",
        "routine_invalid",
        "document_source_unresolved",
        "surface_credential_unbound",
        "mcp_connection_unbound",
        "asset_not_portable",
        "contact_delivery_unbound",
        "directive_binding_unbound",
        "skill_config_not_portable",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(got, all, "{res}");
    for u in res["unresolved"].as_array().unwrap() {
        assert!(u["detail"].as_str().is_some_and(|d| d.len() > 20), "{u}");
    }
    let at =
        |kind: &str| -> Vec<String> { kinds(&res).into_iter().filter(|(k, _)| k == kind).map(|(_, e)| e).collect() };
    assert_eq!(at("skill_capability_unknown"), ["agentSkills.teleport"]);
    assert_eq!(at("skill_config_not_portable"), ["agentSkills.hook_only"]);
    assert_eq!(at("routine_invalid"), ["routines.Export@1"]);
    assert_eq!(at("directive_binding_unbound"), ["directives.beam"]);
    assert_eq!(at("context_variable_missing"), ["contextVariables.nowhere"]);
    assert_eq!(at("resolver_skill_missing"), ["contextVariables.plan"]);
    assert_eq!(res["counts"]["skills"], 3, "teleport and hook_only were not created");
    assert_eq!(res["counts"]["routines"], 0);
    assert_eq!(res["counts"]["contextVariables"], 0);

    let agent = res["agentId"].as_str().unwrap();
    let base = format!("/api/v1/agents/{agent}");
    let a = t.get(&base, &owner).await.json();
    assert_eq!(a["surfaceSettings"]["anonymousChat"]["enabled"], false);
    assert_eq!(a["sourceScope"], json!({"mode": "selected", "sourceIds": []}));
    assert_eq!(a["contactRequestsEnabled"], true);
    let sk = t.get(&format!("{base}/skills"), &owner).await.json();
    let names: Vec<&str> = sk["skills"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["crm", "faq", "ping"]);
    assert_eq!(skill_named(&sk, "crm")["enabled"], false);
    assert_eq!(skill_named(&sk, "crm")["target"], Value::Null);
    assert_eq!(skill_named(&sk, "ping")["enabled"], false);
    assert_eq!(skill_named(&sk, "faq")["enabled"], true);
    let ds = t.get(&format!("{base}/directives"), &owner).await.json();
    let d = |n: &str| ds["directives"].as_array().unwrap().iter().find(|d| d["name"] == n).unwrap().clone();
    assert_eq!(d("beam")["enabled"], false, "its bound skill did not come across");
    assert_eq!(d("beam")["binding"]["skillName"], "teleport", "the binding is kept by name");
    assert_eq!(d("lookup")["enabled"], true);
    assert_eq!(d("lookup")["chips"][0]["status"], "bound");
    assert_eq!(t.get(&format!("{base}/routines"), &owner).await.json()["routines"], json!([]));
    assert_eq!(t.get(&format!("{base}/context-variables"), &owner).await.json()["contextVariables"], json!([]));
}

/// An agent with a real selected source exports no source id, and a resolver variable, logo and
/// retrieval override scope come across as the rules say.
#[tokio::test]
async fn selected_sources_are_dropped_on_export() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let ws = t.get_ws();
    let doc = t.doc(&owner, "Returns", "Items can be returned within 30 days.", json!({})).await;
    let source_id = t.document(&owner, &doc).await["sourceId"].as_str().unwrap().to_string();
    let agent = t
        .post(
            "/api/v1/agents",
            &owner,
            json!({"name": "Scoped",
        "sourceScope": {"mode": "selected", "sourceIds": [source_id]},
        "skillSettings": {"retrieval.answer": {"sourceScope": {"mode": "selected", "sourceIds": [source_id]}}}}),
        )
        .await
        .json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = export(&t, &owner, &ws, &agent).await;
    assert!(!r.text().contains(&source_id), "{}", r.text());
    let b = r.json();
    assert_eq!(b["agent"]["sourceScope"], json!({"mode": "selected", "sourceIds": []}));
    assert_eq!(
        b["agent"]["skillSettings"]["retrieval.answer"]["sourceScope"],
        json!({"mode": "selected", "sourceIds": []})
    );
    let res = import(&t, &owner, &ws, &b).await.json();
    assert_eq!(
        kinds(&res),
        [
            ("document_source_unresolved".to_string(), "agent.skillSettings.retrieval.answer.sourceScope".to_string()),
            ("document_source_unresolved".to_string(), "agent.sourceScope".to_string()),
        ]
    );
    // the imported agent searches nothing until sources are chosen, and stays editable
    let base = format!("/api/v1/agents/{}", res["agentId"].as_str().unwrap());
    t.put(&base, &owner, json!({"name": "Scoped copy"})).await.assert_status(200);
}

#[tokio::test]
async fn unread_versions_and_bad_shapes_are_refused_with_nothing_written() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let ws = t.get_ws();
    let agent = t.default_agent(&owner).await;
    let good = export(&t, &owner, &ws, &agent).await.json();
    let before = agent_count(&t, &owner, &ws).await;
    let jobs = || -> i64 {
        t.app.db.read(|c| Ok(c.query_row("SELECT count(*) FROM agent_bundle_imports", [], |r| r.get(0))?)).unwrap()
    };
    let mut cases: Vec<(Value, &str, &str)> = Vec::new();
    let with = |f: &dyn Fn(&mut Value)| {
        let mut b = good.clone();
        f(&mut b);
        b
    };
    cases.push((with(&|b| b["bundleVersion"] = json!(2)), "unsupported_bundle_version", "bundleVersion"));
    cases.push((
        with(&|b| b["agent"]["schemaVersion"] = json!(3)),
        "unsupported_bundle_version",
        "agent.schemaVersion",
    ));
    cases.push((
        with(&|b| b["agent"]["schemaVersion"] = json!(5)),
        "unsupported_bundle_version",
        "agent.schemaVersion",
    ));
    // the version is checked before anything else is looked at
    cases.push((
        with(&|b| {
            b["bundleVersion"] = json!("one");
            b["agentSkills"] = json!("nope");
        }),
        "unsupported_bundle_version",
        "bundleVersion",
    ));
    cases.push((
        with(&|b| {
            b.as_object_mut().unwrap().remove("bundleVersion");
        }),
        "invalid_request",
        "bundleVersion",
    ));
    cases.push((
        with(&|b| {
            b["agent"].as_object_mut().unwrap().remove("schemaVersion");
        }),
        "invalid_request",
        "agent.schemaVersion",
    ));
    cases.push((with(&|b| b["extra"] = json!(1)), "invalid_request", "extra"));
    cases.push((
        with(&|b| b["agent"]["contactRequestDelivery"] = json!({"recipientEmails": []})),
        "invalid_request",
        "agent.contactRequestDelivery",
    ));
    cases.push((with(&|b| b["agent"]["colour"] = json!("red")), "invalid_request", "agent.colour"));
    cases.push((with(&|b| b["agent"]["theme"] = json!({"brand": "red"})), "invalid_request", "agent.theme"));
    cases.push((with(&|b| b["agent"]["name"] = json!("")), "invalid_request", "agent.name"));
    cases.push((with(&|b| b["agentSkills"] = json!({})), "invalid_request", "agentSkills"));
    cases.push((
        with(&|b| {
            b["agentSkills"] =
                json!([{"name": "ping", "capability": "webhook_call", "config": {"url": "https://x.example.com"}}])
        }),
        "invalid_request",
        "agentSkills[0].config.url",
    ));
    cases.push((with(&|b| b["agentSkills"] = json!([{"name": "crm", "capability": "mcp_tool", "config": {"toolName": "x", "mcpServerSealed": "AAAA"}}])), "invalid_request", "agentSkills[0].config.mcpServerSealed"));
    cases.push((
        with(&|b| b["agentSkills"] = json!([{"name": "crm", "capability": "mcp_tool", "config": {}}, ])),
        "invalid_request",
        "agentSkills[0].config.toolName",
    ));
    cases.push((with(&|b| b["agentSkills"] = json!([{"name": "crm", "capability": "mcp_tool", "config": {"toolName": "x"}, "target": {"kind": "mcp_connection", "id": "conn-1"}}])), "invalid_request", "agentSkills[0].target.id"));
    cases.push((
        with(&|b| b["agentSkills"] = json!([{"name": "Bad Name!", "capability": "retrieve"}])),
        "invalid_request",
        "agentSkills[0].name",
    ));
    cases.push((
        with(&|b| {
            b["agentSkills"] = json!([{"name": "a", "capability": "retrieve"}, {"name": "a", "capability": "retrieve"}])
        }),
        "invalid_request",
        "agentSkills[1].name",
    ));
    cases.push((
        with(&|b| b["agentSkills"] = json!([{"name": "a", "capability": "retrieve", "surprise": true}])),
        "invalid_request",
        "agentSkills[0]",
    ));
    cases.push((
        with(&|b| b["contextVariables"] = json!([{"variableName": "plan", "source": "magic"}])),
        "invalid_request",
        "contextVariables[0].source",
    ));
    cases.push((
        with(&|b| b["routines"] = json!([{"name": "x", "version": 1, "definition": {"name": "x"}}])),
        "invalid_request",
        "routines[0]",
    ));
    cases.push((
        with(&|b| b["directives"] = json!([{"name": "d", "action": ""}])),
        "invalid_request",
        "directives[0].action",
    ));
    cases.push((
        with(&|b| {
            b["directives"] =
                json!([{"name": "d", "action": "no chip", "binding": {"kind": "skill", "skillName": "faq"}}])
        }),
        "invalid_request",
        "directives[0].binding.skillName",
    ));
    cases.push((with(&|b| b["idempotencyKey"] = json!("")), "invalid_request", "idempotencyKey"));
    for (bundle, code, field) in cases {
        let r = import(&t, &owner, &ws, &bundle).await;
        assert_eq!(r.status, 400, "{field}: {}", r.text());
        let e = r.json();
        assert_eq!(
            (e["error"]["code"].as_str(), e["error"]["details"]["field"].as_str()),
            (Some(code), Some(field)),
            "{e}"
        );
    }
    let r = import(&t, &owner, &ws, &with(&|b| b["bundleVersion"] = json!(2))).await;
    assert_eq!(r.json()["error"]["details"]["accepted"], json!([1]));
    assert_eq!(agent_count(&t, &owner, &ws).await, before, "nothing was written");
    assert_eq!(jobs(), 0, "no job was recorded");
    // not JSON at all, and not an object
    let r = t.send_bytes(Method::POST, "/api/v1/agents/bundle", &owner, b"{nope".to_vec(), "application/json").await;
    assert_eq!((r.status.as_u16(), r.code()), (400, "malformed_json".to_string()));
    assert_eq!(import(&t, &owner, &ws, &json!([1])).await.status, 400);
    // over 1 MB: 413 with the envelope
    let big = json!({"bundleVersion": 1, "agent": {"schemaVersion": 4, "name": "x", "customInstruction": "a".repeat(1_100_000)}});
    let r = import(&t, &owner, &ws, &big).await;
    assert_eq!((r.status.as_u16(), r.code()), (413, "payload_too_large".to_string()));
    // evalCases are read like the rest (tests/it/evals.rs carries real ones across): a case
    // without messages is refused by its field
    let r = import(&t, &owner, &ws, &with(&|b| b["evalCases"] = json!([{"name": "anything"}]))).await;
    r.assert_status(400);
    assert_eq!(r.json()["error"]["details"]["field"], "evalCases[0].messages");
    // permissions: reading exports, managing imports
    let reader = t.token_with(&owner, &["workspace.agents.read"]).await;
    export(&t, &reader, &ws, &agent).await;
    assert_eq!(import(&t, &reader, &ws, &good).await.status, 403);
    let nobody = t.token_with(&owner, &["workspace.documents.read"]).await;
    assert_eq!(call(&t, Method::GET, &format!("/api/v1/agents/{agent}/bundle"), &nobody, None, &ws).await.status, 403);
    assert_eq!(call(&t, Method::GET, "/api/v1/agents/no-such-agent/bundle", &owner, None, &ws).await.status, 404);
    assert_eq!(call(&t, Method::GET, "/api/v1/agents/bundle/imports/nope", &owner, None, &ws).await.status, 404);
}

fn keyed_bundle(bundle: &Value, key: &str) -> Value {
    let mut b = bundle.clone();
    b["idempotencyKey"] = json!(key);
    b
}

#[tokio::test(flavor = "multi_thread")]
async fn a_repeated_key_replays_and_concurrent_attempts_apply_once() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let ws = t.get_ws();
    let agent = t.default_agent(&owner).await;
    t.put(&format!("/api/v1/agents/{agent}"), &owner, json!({"contactRequestsEnabled": true})).await.assert_status(200);
    let bundle = export(&t, &owner, &ws, &agent).await.json();
    let before = agent_count(&t, &owner, &ws).await;

    let first = import(&t, &owner, &ws, &keyed_bundle(&bundle, "deploy-42")).await;
    first.assert_status(201);
    let first = first.json();
    assert_eq!(first["replayed"], false);
    assert_eq!(first["idempotencyKey"], "deploy-42");
    let again = import(&t, &owner, &ws, &keyed_bundle(&bundle, "deploy-42")).await;
    again.assert_status(200);
    let again = again.json();
    assert_eq!(again["replayed"], true);
    for k in ["importId", "agentId", "unresolved", "status"] {
        assert_eq!(again[k], first[k], "{k}");
    }
    assert_eq!(agent_count(&t, &owner, &ws).await, before + 1);
    // the key is the workspace's: another workspace imports afresh
    let ws2 = t.workspace(&owner, "Other").await;
    let other = import(&t, &owner, &ws2, &keyed_bundle(&bundle, "deploy-42")).await;
    other.assert_status(201);
    assert_ne!(other.json()["importId"], first["importId"]);
    // the same key with another bundle is refused
    let mut changed = keyed_bundle(&bundle, "deploy-42");
    changed["agent"]["name"] = json!("Something else");
    let r = import(&t, &owner, &ws, &changed).await;
    assert_eq!((r.status.as_u16(), r.code()), (409, "conflict".to_string()));
    assert_eq!(r.json()["error"]["details"]["importId"], first["importId"]);
    // formatting and key order do not make another bundle
    let reordered: Value =
        serde_json::from_str(&serde_json::to_string_pretty(&keyed_bundle(&bundle, "deploy-42")).unwrap()).unwrap();
    import(&t, &owner, &ws, &reordered).await.assert_status(200);

    // eight attempts at once with one key: one applies, the others are told it is in progress or
    // get its result
    let key = keyed_bundle(&bundle, "race-1");
    let before = agent_count(&t, &owner, &ws).await;
    let attempts: Vec<_> = (0..8)
        .map(|_| {
            let router = t.router.clone();
            let owner = owner.clone();
            let body = key.to_string();
            tokio::spawn(async move {
                use axum::body::Body;
                use axum::http::{Request, header};
                use http_body_util::BodyExt;
                use tower::ServiceExt;
                let Auth::Cookie(c) = owner else { panic!() };
                let req = Request::builder()
                    .method(Method::POST)
                    .uri("/api/v1/agents/bundle")
                    .header(header::CONTENT_TYPE, "application/json")
                    .header(header::COOKIE, c)
                    .header("sec-fetch-site", "same-origin")
                    .body(Body::from(body))
                    .unwrap();
                let resp = router.oneshot(req).await.unwrap();
                let status = resp.status().as_u16();
                let body = resp.into_body().collect().await.unwrap().to_bytes();
                (status, serde_json::from_slice::<Value>(&body).unwrap())
            })
        })
        .collect();
    let mut created = 0;
    let mut ids = BTreeSet::new();
    for a in attempts {
        let (status, v) = a.await.unwrap();
        match status {
            201 => {
                created += 1;
                ids.insert(v["importId"].as_str().unwrap().to_string());
            }
            200 => {
                assert_eq!(v["replayed"], true);
                ids.insert(v["importId"].as_str().unwrap().to_string());
            }
            409 => {
                assert_eq!(v["error"]["code"], "agent_bundle_import_in_progress", "{v}");
                ids.insert(v["error"]["details"]["importId"].as_str().unwrap().to_string());
            }
            s => panic!("unexpected {s}: {v}"),
        }
    }
    assert_eq!(created, 1, "exactly one attempt applies");
    assert_eq!(ids.len(), 1, "every answer names the one import: {ids:?}");
    assert_eq!(agent_count(&t, &owner, &ws).await, before + 1, "exactly one agent was created");
}

/// An `applying` job row and the agent it was building, as a process that died mid-import leaves
/// them (seeded directly; the binary test below makes a real one).
async fn seed_interrupted(t: &TestApp, owner: &Auth, ws: &str, id: &str, key: &str) -> String {
    let agent = ok(t, Method::POST, "/api/v1/agents", owner, json!({"name": format!("Half imported {id}")}), ws).await;
    let agent = agent["id"].as_str().unwrap().to_string();
    let now = t.clock.now_ms();
    let (id, key, ws, a) = (id.to_string(), key.to_string(), ws.to_string(), agent.clone());
    t.app
        .db
        .write(move |tx| {
            tx.execute(
                "INSERT INTO agent_bundle_imports (id, workspace_id, idempotency_key, fingerprint, state, agent_id, created_at, created_at_ms, updated_at)
                 VALUES (?1, ?2, ?3, 'seeded', 'applying', ?4, '2026-01-01T00:00:00Z', ?5, '2026-01-01T00:00:00Z')",
                rusqlite::params![id, ws, key, a, now],
            )?;
            Ok(())
        })
        .unwrap();
    agent
}

async fn job(t: &TestApp, owner: &Auth, ws: &str, id: &str) -> Value {
    let r = call(t, Method::GET, &format!("/api/v1/agents/bundle/imports/{id}"), owner, None, ws).await;
    r.assert_status(200);
    r.json()
}

#[tokio::test(flavor = "multi_thread")]
async fn interrupted_imports_are_fenced_by_a_repeated_key_the_sweep_and_a_restart() {
    if crate::support::sqlite_mode_only(
        "imports left applying are compensated at start only on SQLite; on PostgreSQL another node may be applying them and the orphan-age sweep fences them",
    ) {
        return;
    }
    let t = TestApp::new();
    let owner = t.owner().await;
    let ws = t.get_ws();
    let agent = t.default_agent(&owner).await;
    let bundle = export(&t, &owner, &ws, &agent).await.json();
    // an import that completes (it queues its orphan-deadline sweep)
    import(&t, &owner, &ws, &bundle).await.assert_status(201);

    // a job still applying holds its key: 409 in progress
    let half = seed_interrupted(&t, &owner, &ws, "stale-1", "k-stale").await;
    let r = import(&t, &owner, &ws, &keyed_bundle(&bundle, "k-stale")).await;
    assert_eq!((r.status.as_u16(), r.code()), (409, "agent_bundle_import_in_progress".to_string()));
    assert_eq!(r.json()["error"]["details"]["importId"], "stale-1");
    // past the orphan age, the request with its key fences it: a retryable 409
    t.clock.advance_ms(900_001);
    let r = import(&t, &owner, &ws, &keyed_bundle(&bundle, "k-stale")).await;
    assert_eq!((r.status.as_u16(), r.code()), (409, "agent_bundle_import_fenced".to_string()));
    assert_eq!(r.headers["retry-after"], "1");
    assert_eq!(r.json()["error"]["details"]["retryable"], true);
    let j = job(&t, &owner, &ws, "stale-1").await;
    assert_eq!(j["status"], "compensated");
    assert_eq!(j["agentId"], half.as_str(), "the original agent id is kept");
    assert_eq!(j["error"]["code"], "agent_bundle_import_fenced");
    assert_eq!(t.get(&format!("/api/v1/agents/{half}"), &owner).await.status, 404, "the partial agent is gone");
    // the key is free: the retry applies once
    let before = agent_count(&t, &owner, &ws).await;
    import(&t, &owner, &ws, &keyed_bundle(&bundle, "k-stale")).await.assert_status(201);
    import(&t, &owner, &ws, &keyed_bundle(&bundle, "k-stale")).await.assert_status(200);
    assert_eq!(agent_count(&t, &owner, &ws).await, before + 1);

    // the sweep queued with each import fences whatever is past the age, without a request
    let half2 = seed_interrupted(&t, &owner, &ws, "stale-2", "k-two").await;
    t.run_jobs();
    assert_eq!(job(&t, &owner, &ws, "stale-2").await["status"], "applying", "not yet past the age");
    t.clock.advance_ms(900_001);
    assert!(t.run_jobs() >= 1);
    assert_eq!(job(&t, &owner, &ws, "stale-2").await["status"], "compensated");
    assert_eq!(t.get(&format!("/api/v1/agents/{half2}"), &owner).await.status, 404);

    // a restart fences every job still active, whatever its age (imports run in their request)
    let half3 = seed_interrupted(&t, &owner, &ws, "stale-3", "k-three").await;
    let t = t.restart(vec![]);
    let j = job(&t, &owner, &ws, "stale-3").await;
    assert_eq!(j["status"], "compensated");
    assert_eq!(j["agentId"], half3.as_str());
    assert_eq!(t.get(&format!("/api/v1/agents/{half3}"), &owner).await.status, 404);
    let audit = t.get("/api/v1/audit-events?action=agent.bundle.import_compensated", &owner).await.json();
    let reasons: BTreeSet<String> = audit["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["metadata"]["reason"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(reasons, ["orphan_age".to_string(), "restart".to_string()].into_iter().collect());
    import(&t, &owner, &ws, &keyed_bundle(&bundle, "k-three")).await.assert_status(201);
}

#[tokio::test(flavor = "multi_thread")]
async fn audit_events_carry_counts_only() {
    let t = keyed();
    let owner = t.owner().await;
    let ws = t.get_ws();
    let src = build_source(&t, &owner, &ws).await;
    let bundle = export(&t, &owner, &ws, &src.agent).await.json();
    let res = import(&t, &owner, &ws, &bundle).await.json();
    let audit = t.get("/api/v1/audit-events?action=agent.bundle.exported", &owner).await.json();
    let e = &audit["events"][0];
    assert_eq!(e["target"]["id"], src.agent.as_str());
    assert_eq!(
        e["metadata"],
        json!({"agentId": src.agent, "routines": 2, "skills": 5, "contextVariables": 2, "directives": 4, "evalCases": 0, "unresolved": 0})
    );
    let audit = t.get("/api/v1/audit-events?action=agent.bundle.imported", &owner).await.json();
    let e = &audit["events"][0];
    assert_eq!(e["target"]["id"], res["agentId"]);
    assert_eq!(
        e["metadata"],
        json!({"agentId": res["agentId"], "importId": res["importId"], "routines": 2, "skills": 5,
               "contextVariables": 2, "directives": 4, "evalCases": 0, "unresolved": res["unresolved"].as_array().unwrap().len()})
    );
    let all = t.get("/api/v1/audit-events?limit=200", &owner).await.text();
    for content in ["Answer as the Acme support desk", "lookup_customer", "Keep refund replies short", "Prefer the FAQ"]
    {
        assert!(!all.contains(content), "bundle content in the audit log: {content}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn no_secret_is_ever_in_an_exported_bundle() {
    let t = keyed();
    let owner = t.owner().await;
    let ws = t.get_ws();
    let src = build_source(&t, &owner, &ws).await;
    let base = format!("/api/v1/agents/{}", src.agent);
    // a provider key, and the agent's model override on that provider
    t.put("/api/v1/settings/credentials/openai", &owner, json!({"apiKey": PROVIDER_KEY})).await.assert_status(204);
    t.put(&base, &owner, json!({"chatModelOverride": {"provider": "openai", "model": "gpt-4o-mini"}}))
        .await
        .assert_status(200);
    // a Slack skill, whose incoming-webhook URL is sealed
    ok(
        &t,
        Method::POST,
        &format!("{base}/skills"),
        &owner,
        json!({"name": "slack", "capability": "slack_post", "config": {"webhookUrl": SLACK_URL}}),
        &ws,
    )
    .await;
    // the public channels' launch tokens and an agent channel credential
    let general = t.get("/api/v1/settings/general", &owner).await.json();
    let tokens: Vec<String> = ["anonymousChatToken", "websiteEmbedToken"]
        .iter()
        .map(|k| general[*k].as_str().unwrap_or_else(|| panic!("{k} in {general}")).to_string())
        .collect();
    let cred =
        t.post(&format!("{base}/channel-credentials"), &owner, json!({"audience": "mcp", "label": "Claude"})).await;
    cred.assert_status(201);
    let channel_secret = cred.json()["secret"].as_str().unwrap().to_string();
    // a sensitive context value, on a variable the agent enables
    let v = ok(
        &t,
        Method::POST,
        "/api/v1/context-variables",
        &owner,
        json!({"name": "account_number", "sensitivity": "sensitive"}),
        &ws,
    )
    .await;
    let vid = v["id"].as_str().unwrap();
    ok(
        &t,
        Method::PUT,
        &format!("/api/v1/context-variables/{vid}/values"),
        &owner,
        json!({"scope": {"type": "workspace"}, "data": {"value": SENSITIVE_VALUE}}),
        &ws,
    )
    .await;
    ok(&t, Method::PUT, &format!("{base}/context-variables/{vid}"), &owner, json!({"source": "pushed"}), &ws).await;

    let r = export(&t, &owner, &ws, &src.agent).await;
    let bytes = r.body.clone();
    let secrets: Vec<(&str, String)> = vec![
        ("provider key", PROVIDER_KEY.into()),
        ("webhook skill URL", WEBHOOK_URL.into()),
        ("webhook URL's secret path", "ping-7c1f9e2b-secret-path".into()),
        ("sealed Slack URL", SLACK_URL.into()),
        ("Slack URL's secret part", "slack9f8e7d6c5b4a".into()),
        ("MCP server URL", MCP_URL.into()),
        ("MCP credential", MCP_CREDENTIAL.into()),
        ("contact recipient", CONTACT_EMAIL.into()),
        ("contact webhook", CONTACT_HOOK.into()),
        ("notify recipient", NOTIFY_EMAIL.into()),
        ("email bound cc", CC_EMAIL.into()),
        ("destination URL", DEST_SECRET_URL.into()),
        ("destination signing secret", src.destination_secret.clone()),
        ("anonymous chat token", tokens[0].clone()),
        ("website embed token", tokens[1].clone()),
        ("channel credential", channel_secret.clone()),
        ("sensitive context value", SENSITIVE_VALUE.into()),
        ("logo", LOGO_MARKER.into()),
    ];
    for (what, secret) in &secrets {
        assert!(secret.len() >= 12, "{what} is too short to scan for");
        assert!(!crate::support::contains_bytes(&bytes, secret.as_bytes()), "the bundle holds the {what}");
    }
    // no sealed value under any name
    let text = String::from_utf8(bytes).unwrap();
    for marker in ["Sealed", "ciphertext", "nonce", "webhookUrlConfigured", "mcpServerConfigured"] {
        assert!(!text.contains(marker), "{marker} in {text}");
    }
    let b: Value = serde_json::from_str(&text).unwrap();
    let skills = json!({"skills": b["agentSkills"]});
    assert_eq!(skill_named(&skills, "slack")["omittedConfigKeys"], json!(["webhookUrl"]));
    assert_eq!(skill_named(&skills, "slack")["config"], json!({}));
    assert_eq!(b["agent"]["chatModelOverride"], json!({"provider": "openai", "model": "gpt-4o-mini"}));
    // …and the import of it reads none back: the sealed Slack skill has nothing portable
    let res = import(&t, &owner, &ws, &b).await.json();
    assert!(kinds(&res).contains(&("skill_config_not_portable".into(), "agentSkills.slack".into())), "{res}");
}

/// The real binary: an import stalls in `applying` after creating its agent (the debug-build test
/// hook `STEWARD_TEST_BUNDLE_APPLY_PAUSE_MS`, which says so on the log), the process is killed with
/// SIGKILL, and the server is started again: the job ends compensated, the partial agent is gone,
/// the key is free and a retry applies exactly once.
#[tokio::test(flavor = "multi_thread")]
async fn a_kill_9_while_applying_ends_compensated_and_the_retry_applies_once() {
    if crate::support::sqlite_mode_only(
        "imports left applying are compensated at start only on SQLite; on PostgreSQL another node may be applying them and the orphan-age sweep fences them",
    ) {
        return;
    }
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = crate::e2e::bootstrap(&data);
    let mut child = Command::new(crate::e2e::bin())
        .args(["--data-dir", data.to_str().unwrap(), "serve", "--listen", "127.0.0.1:0"])
        .env("STEWARD_LOG", "warn")
        .env("STEWARD_TEST_BUNDLE_APPLY_PAUSE_MS", "600000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let base = line.trim().strip_prefix("steward listening on ").unwrap().to_string();
    let stderr = child.stderr.take().unwrap();
    let server = crate::e2e::Server { child, base: base.clone() };
    let api = crate::e2e::Api::new(&base, &token);
    let agents = api.call(reqwest::Method::GET, "/api/v1/agents", None).await;
    let agent = agents["agents"][0]["id"].as_str().unwrap().to_string();
    let bundle = api.call(reqwest::Method::GET, &format!("/api/v1/agents/{agent}/bundle"), None).await;
    let body = keyed_bundle(&bundle, "crash-key");
    let http = reqwest::Client::new();
    let post = |b: Value| {
        let req = http.post(format!("{base}/api/v1/agents/bundle")).bearer_auth(&token).json(&b);
        async move {
            let r = req.send().await.unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap())
        }
    };
    let stalled =
        tokio::spawn(http.post(format!("{base}/api/v1/agents/bundle")).bearer_auth(&token).json(&body).send());
    // the hook's log line says the import is applying (a blocking read of the log, no sleep)
    let log = tokio::task::spawn_blocking(move || {
        let mut r = BufReader::new(stderr);
        let mut line = String::new();
        loop {
            line.clear();
            assert!(r.read_line(&mut line).unwrap() > 0, "the server's log ended");
            if line.contains("test hook: bundle import paused while applying") {
                return r;
            }
        }
    })
    .await
    .unwrap();
    // meanwhile the key is held
    let (status, v) = post(body.clone()).await;
    assert_eq!((status, v["error"]["code"].as_str()), (409, Some("agent_bundle_import_in_progress")), "{v}");
    let import_id = v["error"]["details"]["importId"].as_str().unwrap().to_string();
    let job = api.call(reqwest::Method::GET, &format!("/api/v1/agents/bundle/imports/{import_id}"), None).await;
    assert_eq!(job["status"], "applying");
    let partial = job["agentId"].as_str().unwrap().to_string();
    api.call(reqwest::Method::GET, &format!("/api/v1/agents/{partial}"), None).await;

    server.kill();
    drop(log);
    assert!(stalled.await.unwrap().is_err(), "the stalled request died with the process");

    let server = crate::e2e::Server::start(&data, &[("AGENT_BUNDLE_IMPORT_ORPHAN_AGE_MS", "1000")]);
    let base = server.base.clone();
    let api = crate::e2e::Api::new(&base, &token);
    let job = api.call(reqwest::Method::GET, &format!("/api/v1/agents/bundle/imports/{import_id}"), None).await;
    assert_eq!(job["status"], "compensated", "{job}");
    assert_eq!(job["agentId"], partial.as_str(), "the original agent id is kept");
    let gone = http.get(format!("{base}/api/v1/agents/{partial}")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(gone.status(), 404, "the partial agent and everything under it are gone");
    assert_eq!(api.call(reqwest::Method::GET, "/api/v1/agents", None).await["agents"].as_array().unwrap().len(), 1);
    // the key is free again: the retry applies, once
    let post = |b: Value| {
        let req = http.post(format!("{base}/api/v1/agents/bundle")).bearer_auth(&token).json(&b);
        async move {
            let r = req.send().await.unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap())
        }
    };
    let (status, first) = post(body.clone()).await;
    assert_eq!((status, first["status"].as_str()), (201, Some("applied")), "{first}");
    assert_ne!(first["importId"], import_id.as_str());
    let (status, again) = post(body.clone()).await;
    assert_eq!((status, again["replayed"].as_bool()), (200, Some(true)));
    assert_eq!(again["importId"], first["importId"]);
    assert_eq!(api.call(reqwest::Method::GET, "/api/v1/agents", None).await["agents"].as_array().unwrap().len(), 2);
    assert!(server.terminate().success());
}
