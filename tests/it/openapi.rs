//! The OpenAPI 3.1 document at `/api/v1/openapi.json`: complete (every operation has a summary,
//! tags, credentials, its path parameters and an error envelope; every `$ref` resolves; every
//! schema is valid JSON Schema 2020-12), the same routes the router serves (each documented method
//! reaches its route, no undocumented method does), and true: real responses of a sample of
//! routes, successes and error envelopes, validate against the schemas it states.

use std::collections::BTreeSet;

use axum::http::Method;
use serde_json::{Value, json};

use crate::support::{Auth, Resp, TestApp};

/// Operations whose request and success bodies all have schemas, at least (docs/api.md).
const MIN_SCHEMA_COMPLETE: usize = 158;

const METHODS: [&str; 6] = ["get", "post", "put", "patch", "delete", "options"];

async fn document(t: &TestApp) -> Value {
    let r = t.get("/api/v1/openapi.json", &Auth::None).await;
    r.assert_status(200);
    assert!(r.headers["content-type"].to_str().unwrap().starts_with("application/json"));
    r.json()
}

/// Every operation of the document: (path, method, operation).
fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (m, op) in item.as_object().unwrap() {
            assert!(METHODS.contains(&m.as_str()), "{path}: unexpected key {m}");
            out.push((path.clone(), m.clone(), op.clone()));
        }
    }
    out
}

/// The value a local `$ref` points at.
fn resolve<'a>(doc: &'a Value, r: &str) -> &'a Value {
    let pointer = r.strip_prefix('#').unwrap_or_else(|| panic!("not a local ref: {r}"));
    doc.pointer(pointer).unwrap_or_else(|| panic!("dangling $ref {r}"))
}

fn refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                out.push(r.clone());
            }
            m.values().for_each(|x| refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

fn path_params(path: &str) -> Vec<String> {
    path.split('{').skip(1).filter_map(|s| s.split_once('}')).map(|(n, _)| n.to_string()).collect()
}

#[tokio::test]
async fn the_document_is_openapi_3_1_and_every_operation_is_complete() {
    let t = TestApp::new();
    let doc = document(&t).await;
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["jsonSchemaDialect"], "https://json-schema.org/draft/2020-12/schema");
    let ops = operations(&doc);
    assert!(ops.len() > 200, "only {} operations", ops.len());
    let tags: BTreeSet<&str> = doc["tags"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    let schemes = doc["components"]["securitySchemes"].as_object().unwrap();
    let mut ids = BTreeSet::new();
    for (path, m, op) in &ops {
        let at = format!("{} {path}", m.to_uppercase());
        assert!(op["summary"].as_str().is_some_and(|s| !s.is_empty()), "{at}: no summary");
        assert!(ids.insert(op["operationId"].as_str().unwrap().to_string()), "{at}: operationId repeats");
        let op_tags = op["tags"].as_array().unwrap_or_else(|| panic!("{at}: no tags"));
        assert!(!op_tags.is_empty() && op_tags.iter().all(|t| tags.contains(t.as_str().unwrap())), "{at}: tags");
        // credentials: [] (public) or requirements naming declared schemes
        let security = op["security"].as_array().unwrap_or_else(|| panic!("{at}: no security"));
        for req in security {
            for name in req.as_object().unwrap().keys() {
                assert!(schemes.contains_key(name), "{at}: unknown scheme {name}");
            }
        }
        // every path parameter is declared
        let declared: Vec<&str> = op["parameters"]
            .as_array()
            .map(|ps| ps.iter().filter(|p| p["in"] == "path").map(|p| p["name"].as_str().unwrap()).collect())
            .unwrap_or_default();
        for p in path_params(path) {
            assert!(declared.contains(&p.as_str()), "{at}: path parameter {p} undeclared");
        }
        // a success and the error envelope for everything else
        let responses = op["responses"].as_object().unwrap();
        assert!(responses.keys().any(|s| s.starts_with('2')), "{at}: no success response");
        assert_eq!(responses["default"]["$ref"], "#/components/responses/Error", "{at}");
        if !security.is_empty() {
            assert!(responses.contains_key("401"), "{at}: a credential but no 401");
        }
        for (status, r) in responses {
            if status.starts_with('4') || status.starts_with('5') {
                let r = resolve(&doc, r["$ref"].as_str().unwrap_or_else(|| panic!("{at} {status}: not the envelope")));
                let schema = &r["content"]["application/json"]["schema"];
                assert_eq!(schema["allOf"][0]["$ref"], "#/components/schemas/ErrorEnvelope", "{at} {status}");
            }
        }
    }
    // every reference resolves, and every schema is valid JSON Schema 2020-12
    let mut all = Vec::new();
    refs(&doc, &mut all);
    for r in &all {
        resolve(&doc, r);
    }
    for (name, s) in doc["components"]["schemas"].as_object().unwrap() {
        assert!(jsonschema::draft202012::meta::is_valid(s), "components/schemas/{name} is not valid JSON Schema");
    }
    // how much is described by schemas (docs/api.md states the figure; it only grows)
    let complete = ops.iter().filter(|(_, _, op)| op["x-schema-complete"] == true).count();
    println!("schema-complete operations: {complete} of {}", ops.len());
    assert!(complete >= MIN_SCHEMA_COMPLETE, "{complete} schema-complete operations, fewer than {MIN_SCHEMA_COMPLETE}");
    // the error codes of each status response are the error table's
    let e404 = &doc["components"]["responses"]["Error404"]["content"]["application/json"]["schema"];
    assert_eq!(e404["properties"]["error"]["properties"]["code"]["enum"], json!(["not_found"]));
}

/// A concrete request path for a documented path (each parameter a placeholder).
fn concrete(path: &str) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let j = rest[i..].find('}').unwrap() + i;
        out.push_str("probe");
        rest = &rest[j + 1..];
    }
    out.push_str(rest);
    out
}

/// How many requests the router matched to `route` (as the `observe` middleware records it,
/// catch-alls spelled as in the document) with `method`, by status.
async fn matched(t: &TestApp, method: &str, route: &str) -> u64 {
    let text = t.get("/metrics", &Auth::None).await.text();
    text.lines()
        .filter(|l| l.starts_with("steward_http_requests_total{"))
        .filter(|l| l.contains(&format!("method=\"{method}\"")))
        .filter(|l| {
            let r = l.split("route=\"").nth(1).and_then(|x| x.split('"').next()).unwrap_or("");
            r.replace("{*", "{") == route
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test]
async fn the_router_serves_exactly_the_documented_operations() {
    let t = TestApp::new();
    let doc = document(&t).await;
    let ops = operations(&doc);
    let mut problems = Vec::new();
    for (path, m, _) in &ops {
        let method = Method::from_bytes(m.to_uppercase().as_bytes()).unwrap();
        let url = concrete(path);
        let before = matched(&t, method.as_str(), path).await;
        let r = t.send(method.clone(), &url, &Auth::None, None, &[]).await;
        if r.status.as_u16() == 405 {
            problems.push(format!("{method} {path}: documented, answered 405"));
        } else if matched(&t, method.as_str(), path).await <= before {
            problems.push(format!("{method} {path}: documented, but {url} did not reach that route ({})", r.status));
        }
    }
    // on every documented path, a method the document does not list is not served
    let paths: BTreeSet<&String> = ops.iter().map(|(p, _, _)| p).collect();
    for path in paths {
        if path == "/mcp" {
            continue; // the MCP transport answers its own methods behind the credential check
        }
        for m in ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
            if ops.iter().any(|(p, om, _)| p == path && om.eq_ignore_ascii_case(m)) {
                continue;
            }
            let r = t.send(Method::from_bytes(m.as_bytes()).unwrap(), &concrete(path), &Auth::None, None, &[]).await;
            if r.status.as_u16() != 405 {
                problems.push(format!("{m} {path}: not documented, answered {}", r.status));
            }
        }
    }
    assert!(problems.is_empty(), "the document and the router disagree:\n{}", problems.join("\n"));
}

/// Makes every object schema closed (`additionalProperties: false`) unless it says otherwise, so a
/// response field the document does not name fails validation.
fn closed(v: &mut Value) {
    match v {
        Value::Object(m) => {
            let plain_object = m.get("type") == Some(&json!("object"))
                && m.contains_key("properties")
                && !m.contains_key("additionalProperties")
                && !["allOf", "anyOf", "oneOf"].iter().any(|k| m.contains_key(*k));
            if plain_object {
                m.insert("additionalProperties".into(), json!(false));
            }
            m.values_mut().for_each(closed);
        }
        Value::Array(a) => a.iter_mut().for_each(closed),
        _ => {}
    }
}

/// Validates real responses against the document.
struct Checker {
    doc: Value,
    checked: Vec<String>,
}

impl Checker {
    fn new(doc: Value) -> Checker {
        let mut doc = doc;
        closed(&mut doc["components"]);
        Checker { doc, checked: Vec::new() }
    }

    /// `resp` (of `method path`, `path` as the document spells it) must be a documented status
    /// whose JSON body validates against the stated schema.
    #[track_caller]
    fn check(&mut self, method: &str, path: &str, resp: &Resp) {
        if let Err(e) = self.verify(method, path, resp) {
            panic!("{e}");
        }
    }

    fn verify(&mut self, method: &str, path: &str, resp: &Resp) -> Result<(), String> {
        let at = format!("{method} {path} → {}", resp.status.as_u16());
        let op = &self.doc["paths"][path][method.to_ascii_lowercase()];
        if !op.is_object() {
            return Err(format!("{at}: no such operation in the document"));
        }
        let status = resp.status.as_u16().to_string();
        let mut r = match op["responses"].get(&status) {
            Some(r) => r.clone(),
            None if resp.status.is_client_error() || resp.status.is_server_error() => {
                op["responses"]["default"].clone()
            }
            None => return Err(format!("{at}: a success the document does not list; body: {}", resp.text())),
        };
        if let Some(x) = r.get("$ref").and_then(Value::as_str) {
            r = resolve(&self.doc, x).clone();
        }
        let Some(mut schema) = r["content"]["application/json"].get("schema").cloned() else {
            return Err(format!("{at}: the document states no JSON schema for this response"));
        };
        closed(&mut schema);
        let root = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "allOf": [schema],
            "components": self.doc["components"],
        });
        let validator = jsonschema::draft202012::new(&root).map_err(|e| format!("{at}: bad schema: {e}"))?;
        let body: Value = serde_json::from_slice(&resp.body).map_err(|e| format!("{at}: not JSON: {e}"))?;
        let errors: Vec<String> =
            validator.iter_errors(&body).map(|e| format!("{} at {}", e, e.instance_path())).collect();
        if !errors.is_empty() {
            return Err(format!(
                "{at}: the response disagrees with the document:\n{}\nbody: {body}",
                errors.join("\n")
            ));
        }
        self.checked.push(at);
        Ok(())
    }
}

#[tokio::test]
async fn real_responses_validate_against_the_document() {
    let t = TestApp::new();
    let mut c = Checker::new(document(&t).await);
    let owner = t.owner().await;

    // accounts
    let r = t.get("/api/v1/auth/me", &owner).await;
    c.check("GET", "/api/v1/auth/me", r.assert_status(200));
    c.check("GET", "/api/v1/auth/me", &t.get("/api/v1/auth/me", &Auth::None).await);
    c.check("GET", "/api/v1/auth/registration", &t.get("/api/v1/auth/registration", &Auth::None).await);
    c.check("GET", "/api/v1/workspaces", &t.get("/api/v1/workspaces", &owner).await);
    let r = t.post("/api/v1/account/tokens", &owner, json!({"name": "ci", "expiresInDays": 3})).await;
    c.check("POST", "/api/v1/account/tokens", r.assert_status(201));
    c.check("GET", "/api/v1/account/tokens", &t.get("/api/v1/account/tokens", &owner).await);
    let r = t.post("/api/v1/account/invitations", &owner, json!({"role": "member"})).await;
    c.check("POST", "/api/v1/account/invitations", r.assert_status(201));
    c.check("GET", "/api/v1/account/members", &t.get("/api/v1/account/members", &owner).await);
    c.check("GET", "/api/v1/audit-events", &t.get("/api/v1/audit-events", &owner).await);

    // documents and search
    let id = t.doc(&owner, "Shipping", "Standard shipping takes two to four working days.", json!({"a": 1})).await;
    let r = t.post("/api/v1/document", &owner, json!({"title": "Returns", "content": "Returns within 30 days."})).await;
    c.check("POST", "/api/v1/document", r.assert_status(202));
    t.drain();
    c.check("GET", "/api/v1/document", t.get("/api/v1/document", &owner).await.assert_status(200));
    let r = t.get(&format!("/api/v1/document/{id}?includeChunks=true"), &owner).await;
    c.check("GET", "/api/v1/document/{id}", r.assert_status(200));
    c.check("GET", "/api/v1/document/progress", &t.get("/api/v1/document/progress", &owner).await);
    c.check("GET", "/api/v1/document/sources", &t.get("/api/v1/document/sources", &owner).await);
    let r = t.post("/api/v1/document/search", &owner, json!({"query": "shipping days", "includeDebug": true})).await;
    c.check("POST", "/api/v1/document/search", r.assert_status(200));
    let sid = r.json()["searchId"].as_str().unwrap().to_string();
    let r = t.get(&format!("/api/v1/document/search/history/{sid}"), &owner).await;
    c.check("GET", "/api/v1/document/search/history/{id}", r.assert_status(200));
    c.check("GET", "/api/v1/document/crawl/jobs", &t.get("/api/v1/document/crawl/jobs", &owner).await);

    // chat
    let r = t.post("/api/v1/chat", &owner, json!({"message": "How long does shipping take?"})).await;
    c.check("POST", "/api/v1/chat", r.assert_status(200));

    // agents
    c.check("GET", "/api/v1/agents", t.get("/api/v1/agents", &owner).await.assert_status(200));
    let agent = t.default_agent(&owner).await;
    c.check("GET", "/api/v1/agents/{id}", t.get(&format!("/api/v1/agents/{agent}"), &owner).await.assert_status(200));
    let r = t.post("/api/v1/agents", &owner, json!({"name": "Second"})).await;
    c.check("POST", "/api/v1/agents", r.assert_status(201));

    // skills, directives, context variables
    let skills = format!("/api/v1/agents/{agent}/skills");
    let r = t
        .post(
            &skills,
            &owner,
            json!({"name": "faq_lookup", "capability": "retrieve", "invocationMode": "agent_selectable"}),
        )
        .await;
    c.check("POST", "/api/v1/agents/{id}/skills", r.assert_status(201));
    c.check("GET", "/api/v1/agents/{id}/skills", t.get(&skills, &owner).await.assert_status(200));
    let directives = format!("/api/v1/agents/{agent}/directives");
    let r = t.post(&directives, &owner, json!({"name": "greet", "action": "Say hello #faq_lookup"})).await;
    c.check("POST", "/api/v1/agents/{id}/directives", r.assert_status(201));
    c.check("GET", "/api/v1/agents/{id}/directives", t.get(&directives, &owner).await.assert_status(200));
    let body = json!({"name": "plan", "description": "The customer's plan", "valueType": "string"});
    let r = t.post("/api/v1/context-variables", &owner, body).await;
    c.check("POST", "/api/v1/context-variables", r.assert_status(201));
    let vid = r.json()["id"].as_str().unwrap().to_string();
    c.check("GET", "/api/v1/context-variables", t.get("/api/v1/context-variables", &owner).await.assert_status(200));
    let values = format!("/api/v1/context-variables/{vid}/values");
    let r = t.put(&values, &owner, json!({"scope": {"type": "workspace"}, "data": {"value": "pro"}})).await;
    c.check("PUT", "/api/v1/context-variables/{id}/values", r.assert_status(200));
    let r = t.get(&values, &owner).await;
    c.check("GET", "/api/v1/context-variables/{id}/values", r.assert_status(200));

    // settings, usage, evals, routines, inbox
    let r = t.get("/api/v1/settings/general", &owner).await;
    c.check("GET", "/api/v1/settings/general", r.assert_status(200));
    let r = t.put("/api/v1/settings/general", &owner, json!({"assistantName": "Ada"})).await;
    c.check("PUT", "/api/v1/settings/general", r.assert_status(200));
    let r = t.get("/api/v1/ee/usage-limits/me", &owner).await;
    c.check("GET", "/api/v1/ee/usage-limits/me", r.assert_status(200));
    c.check("GET", "/api/v1/evals/cases", t.get("/api/v1/evals/cases", &owner).await.assert_status(200));
    c.check("GET", "/api/v1/evals/summary", t.get("/api/v1/evals/summary", &owner).await.assert_status(200));
    let r = t.get("/api/v1/settings/webhook-destinations", &owner).await;
    c.check("GET", "/api/v1/settings/webhook-destinations", r.assert_status(200));
    c.check("GET", "/api/v1/decisions", t.get("/api/v1/decisions", &owner).await.assert_status(200));
    c.check("GET", "/api/v1/inbox", t.get("/api/v1/inbox", &owner).await.assert_status(200));
    c.check("GET", "/healthz", t.get("/healthz", &Auth::None).await.assert_status(200));

    // connectors (the detail of each: WhatsApp's adds its message counts), the log, the webhooks
    c.check("GET", "/api/v1/connectors", t.get("/api/v1/connectors", &owner).await.assert_status(200));
    for id in ["wordpress", "whatsapp"] {
        let r = t.get(&format!("/api/v1/connectors/{id}"), &owner).await;
        c.check("GET", "/api/v1/connectors/{id}", r.assert_status(200));
    }
    let r = t.get("/api/v1/connectors/whatsapp/messages", &owner).await;
    c.check("GET", "/api/v1/connectors/whatsapp/messages", r.assert_status(200));
    let r = t.post("/api/v1/connectors/whatsapp/sync", &owner, json!({})).await;
    c.check("POST", "/api/v1/connectors/{id}/sync", r.assert_status(409));
    let r = t.post("/api/connectors/wordpress/probe/webhook?secret=nope", &Auth::None, json!({})).await;
    c.check("POST", "/api/connectors/wordpress/{workspace_id}/webhook", &r);

    // error envelopes: 400, 401, 403, 404, 409, 415, 429
    let r = t.post("/api/v1/document", &owner, json!({"title": 5})).await;
    c.check("POST", "/api/v1/document", r.assert_status(400));
    let r = t.send_bytes(Method::POST, "/api/v1/document/search", &owner, b"query".to_vec(), "text/plain").await;
    c.check("POST", "/api/v1/document/search", r.assert_status(415));
    c.check("GET", "/api/v1/document/{id}", t.get("/api/v1/document/nope", &owner).await.assert_status(404));
    let r = t.get("/api/v1/agents", &Auth::Bearer("stw_pat_nope".into())).await;
    c.check("GET", "/api/v1/agents", r.assert_status(401));
    let token = t.token(&owner).await;
    let r = t.get("/api/v1/account/tokens", &token).await;
    c.check("GET", "/api/v1/account/tokens", r.assert_status(401));
    let member = t.member(&owner, "m@example.com", "member").await;
    let r = t.get("/api/v1/audit-events", &member).await;
    c.check("GET", "/api/v1/audit-events", r.assert_status(403));
    let r = t.post("/api/v1/workspaces", &owner, json!({"name": "Dup"})).await;
    c.check("POST", "/api/v1/workspaces", r.assert_status(201));
    let r = t.post("/api/v1/workspaces", &owner, json!({"name": "dup"})).await;
    c.check("POST", "/api/v1/workspaces", r.assert_status(409));
    let mut limited = None;
    for _ in 0..20 {
        let r = t
            .post("/api/v1/auth/login", &Auth::None, json!({"email": "x@example.com", "password": "wrong-pass"}))
            .await;
        if r.status.as_u16() == 429 {
            limited = Some(r);
            break;
        }
        c.check("POST", "/api/v1/auth/login", r.assert_status(401));
    }
    let r = limited.expect("sign-in is rate limited");
    c.check("POST", "/api/v1/auth/login", &r);
    assert!(r.json()["error"]["details"]["retryAfterSeconds"].is_u64());

    let routes: BTreeSet<&str> = c.checked.iter().map(|a| a.split(" → ").next().unwrap()).collect();
    assert!(routes.len() >= 15, "sampled {} routes: {routes:?}", routes.len());
}

#[tokio::test]
async fn a_response_that_disagrees_with_its_schema_fails_the_check() {
    let t = TestApp::new();
    let mut c = Checker::new(document(&t).await);
    let fake = |body: Value| Resp {
        status: axum::http::StatusCode::OK,
        headers: Default::default(),
        body: body.to_string().into_bytes(),
    };
    c.check("GET", "/healthz", &fake(json!({"status": "ok"})));
    for wrong in [json!({"status": "ok", "extra": 1}), json!({}), json!({"status": 3})] {
        assert!(c.verify("GET", "/healthz", &fake(wrong.clone())).is_err(), "{wrong} passed");
    }
    // a status the operation does not list
    let created = Resp { status: axum::http::StatusCode::CREATED, ..fake(json!({"status": "ok"})) };
    assert!(c.verify("GET", "/healthz", &created).is_err());
}
