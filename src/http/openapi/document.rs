//! Builds the OpenAPI 3.1 document from the routes' [`Operation`]s: paths and their parameters,
//! request and response schemas (derived types land in `components/schemas`), credentials, and
//! the error envelope for every error status an operation can answer.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use schemars::SchemaGenerator;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::{Auth, Operation, Shape};
use crate::error::ErrorCode;

/// The document of one router, built the first time it is asked for.
pub struct ApiDocument {
    ops: Vec<Operation>,
    built: OnceLock<(Value, axum::body::Bytes)>,
}

impl ApiDocument {
    pub fn new(ops: Vec<Operation>) -> ApiDocument {
        ApiDocument { ops, built: OnceLock::new() }
    }
    fn built(&self) -> &(Value, axum::body::Bytes) {
        self.built.get_or_init(|| {
            let doc = document(&self.ops);
            let bytes = serde_json::to_vec(&doc).unwrap_or_default();
            (doc, bytes.into())
        })
    }
    /// The document.
    pub fn json(&self) -> &Value {
        &self.built().0
    }
    /// The document, serialized.
    pub fn bytes(&self) -> axum::body::Bytes {
        self.built().1.clone()
    }
    /// The operations it documents.
    pub fn operations(&self) -> &[Operation] {
        &self.ops
    }
}

/// What each tag holds, in the order the document lists them (a tag not listed here follows).
const TAGS: &[(&str, &str)] = &[
    ("Operations", "Liveness, readiness, metrics and this document"),
    ("Accounts", "Registration, sign-in, members, invitations, tokens, workspaces, service credentials, the audit log"),
    ("Documents", "Documents, sources, uploads and progress"),
    ("Search", "Search, search history and the knowledge index settings"),
    ("Crawls", "Website crawls"),
    ("Settings", "Workspace settings: ingestion, providers, models, document types, retrieval, general"),
    ("Agents", "Agents, revisions, directives, skills, context variables"),
    ("Bundles", "Agent bundles: export and import"),
    ("Chat", "The answer turn: chat, retrieval-only answers, history, traces, quality, test executions"),
    ("Inbox", "Human takeover, answer feedback, the inbox and the operator event stream"),
    ("Delivery", "Outbound deliveries, notifications, contact requests"),
    ("Routines", "Routines, decisions and webhook destinations"),
    ("Evals", "Eval cases, runs, suites and comparisons"),
    ("Public chat", "Anonymous visitors: sessions, messages, history, the widget"),
    ("Converse", "Other AI agents: channel credentials and converse sessions over REST"),
    ("MCP", "The converse surface over the Model Context Protocol"),
    ("Usage", "Usage, plans and usage limits"),
    ("Web pages", "The dashboard, the widget loader and their files"),
];

/// The OpenAPI path of an axum path: a catch-all `{*rest}` becomes `{rest}`.
pub fn openapi_path(axum_path: &str) -> String {
    axum_path.replace("{*", "{")
}

/// The names of a path's parameters, in order.
pub fn path_params(path: &str) -> Vec<String> {
    path.split('{')
        .skip(1)
        .filter_map(|s| s.split_once('}'))
        .map(|(n, _)| n.trim_start_matches('*').to_string())
        .collect()
}

fn operation_id(method: &str, path: &str) -> String {
    let rest = path.strip_prefix("/api/v1").unwrap_or(path);
    let mut id = method.to_ascii_lowercase();
    for seg in rest.split('/').filter(|s| !s.is_empty()) {
        id.push('_');
        id.extend(seg.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_lowercase()));
    }
    if rest.ends_with('/') && rest.len() > 1 {
        id.push_str("_slash");
    }
    id
}

fn security(auth: Auth) -> Value {
    let req = |names: &[&str]| Value::Array(names.iter().map(|n| json!({ *n: [] })).collect());
    match auth {
        Auth::Public => json!([]),
        Auth::Member => req(&["session", "apiToken"]),
        Auth::Session => req(&["session"]),
        Auth::MemberOrChannel => req(&["session", "apiToken", "channelCredential"]),
        Auth::Channel => req(&["channelCredential"]),
        Auth::Converse => req(&["converseSession"]),
        Auth::UsageAdmin => req(&["usageAdmin"]),
        Auth::Visitor => req(&["visitorSession"]),
    }
}

fn security_schemes() -> Value {
    json!({
        "session": {"type": "apiKey", "in": "cookie", "name": "steward_session",
            "description": "The dashboard session (from POST /api/v1/auth/login). A state change must also carry Origin (this host) or Sec-Fetch-Site: same-origin."},
        "apiToken": {"type": "http", "scheme": "bearer",
            "description": "A personal access token (stw_pat_…) or a workspace service credential (stw_svc_…)."},
        "channelCredential": {"type": "http", "scheme": "bearer",
            "description": "An agent channel credential (scr_… for REST; an MCP credential for /mcp)."},
        "converseSession": {"type": "http", "scheme": "bearer",
            "description": "A converse session token from POST /api/v1/mcp/converse/session."},
        "usageAdmin": {"type": "http", "scheme": "bearer",
            "description": "The deployment's usage administration token (EE_USAGE_ADMIN_TOKEN)."},
        "visitorSession": {"type": "apiKey", "in": "header", "name": "x-service-public-session",
            "description": "A public chat visitor's session token (from POST …/sessions); the launch token is in the path."},
    })
}

fn error_response_name(status: u16) -> String {
    format!("Error{status}")
}

/// One reusable response per error status (its codes listed), and `Error` for any of them.
fn error_responses() -> Map<String, Value> {
    let mut by_status: BTreeMap<u16, Vec<&str>> = BTreeMap::new();
    for c in ErrorCode::ALL {
        by_status.entry(c.status()).or_default().push(c.as_str());
    }
    let mut out = Map::new();
    for (status, codes) in by_status {
        let list = codes.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ");
        out.insert(
            error_response_name(status),
            json!({
                "description": format!("The error envelope: {list}"),
                "content": {"application/json": {"schema": {
                    "allOf": [{"$ref": "#/components/schemas/ErrorEnvelope"}],
                    "properties": {"error": {"properties": {"code": {"enum": codes}}}},
                }}},
            }),
        );
    }
    out.insert(
        "Error".into(),
        json!({
            "description": "The error envelope (any code; see docs/api.md's table)",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}},
        }),
    );
    out
}

fn error_envelope() -> Value {
    let codes: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    json!({
        "type": "object",
        "description": "Every failure: a stable code, a message for people, and details (null or an object).",
        "required": ["error"],
        "properties": {"error": {
            "type": "object",
            "required": ["code", "message", "details"],
            "properties": {
                "code": {"type": "string", "enum": codes},
                "message": {"type": "string"},
                "details": {"type": ["object", "null"]},
            },
        }},
    })
}

fn shape(g: &mut SchemaGenerator, s: &Shape) -> Value {
    match s {
        Shape::Typed(f) => f(g),
        Shape::Json(v) => v.clone(),
        Shape::Undescribed => json!({"description": "Not described by a schema yet; docs/api.md has the shape."}),
    }
}

/// The query parameters of a query type's (inline) schema.
fn query_parameters(schema: &Value) -> Vec<Value> {
    let required: BTreeSet<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else { return Vec::new() };
    props
        .iter()
        .map(|(name, s)| {
            let mut p = json!({"name": name, "in": "query", "required": required.contains(name.as_str()), "schema": s});
            if let Some(d) = s.get("description") {
                p["description"] = d.clone();
            }
            p
        })
        .collect()
}

fn generator() -> SchemaGenerator {
    SchemaGenerator::new(SchemaSettings::draft2020_12().with(|s| {
        s.definitions_path = "/components/schemas".into();
        s.meta_schema = None;
    }))
}

/// The whole document.
pub fn document(ops: &[Operation]) -> Value {
    let mut g = generator();
    let mut paths: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    let mut used_tags: Vec<&str> = Vec::new();
    for o in ops {
        if !used_tags.contains(&o.tag) {
            used_tags.push(o.tag);
        }
        let path = openapi_path(&o.path);
        let method = o.method.as_str().to_ascii_lowercase();
        let op = operation(&mut g, o, &path, &method);
        paths.entry(path).or_default().insert(method, op);
    }
    let mut tags: Vec<Value> =
        TAGS.iter().filter(|(t, _)| used_tags.contains(t)).map(|(t, d)| json!({"name": t, "description": d})).collect();
    for t in used_tags.iter().filter(|t| !TAGS.iter().any(|(n, _)| n == *t)) {
        tags.push(json!({"name": t}));
    }
    let mut schemas = g.take_definitions(true);
    schemas.insert("ErrorEnvelope".into(), error_envelope());
    let schemas: BTreeMap<String, Value> = schemas.into_iter().collect();
    json!({
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "Steward API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The REST API of a Steward server, generated from its routes. Bodies are camelCase JSON; every failure is the error envelope. docs/api.md has the prose: conventions, limits and decisions.",
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "servers": [{"url": "/"}],
        "tags": tags,
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": error_responses(),
            "parameters": {"WorkspaceId": {
                "name": "x-workspace-id", "in": "header", "required": false,
                "description": "The workspace to act in; without it, the caller's default workspace. One the caller cannot see is a 404.",
                "schema": {"type": "string"},
            }},
            "securitySchemes": security_schemes(),
        },
    })
}

fn operation(g: &mut SchemaGenerator, o: &Operation, path: &str, method: &str) -> Value {
    let op = &o.op;
    let mut params = Vec::new();
    let names = path_params(path);
    for n in &names {
        params.push(json!({"name": n, "in": "path", "required": true, "schema": {"type": "string"}}));
    }
    let mut query = Vec::new();
    if let Some(q) = op.query {
        query = query_parameters(&q(g));
        params.extend(query.iter().cloned());
    }
    let workspace = matches!(op.auth, Auth::Member | Auth::Session | Auth::MemberOrChannel);
    if workspace {
        params.push(json!({"$ref": "#/components/parameters/WorkspaceId"}));
    }
    for (name, required, description) in &op.headers {
        params.push(json!({"name": name, "in": "header", "required": required, "description": description, "schema": {"type": "string"}}));
    }

    let mut complete = true;
    let mut responses = Map::new();
    for r in &op.replies {
        // one status may answer in several media types (JSON, or an event stream when asked)
        let resp = responses.entry(r.status.to_string()).or_insert_with(|| json!({"description": r.description}));
        if !r.media.is_empty() {
            let schema = r.shape.as_ref().map(|s| shape(g, s));
            complete &= !matches!(r.shape, Some(Shape::Undescribed));
            let media = match schema {
                Some(s) => json!({"schema": s}),
                None => json!({}),
            };
            if !resp["content"].is_object() {
                resp["content"] = json!({});
            }
            resp["content"][r.media] = media;
        }
    }
    let mut errors: BTreeSet<u16> = op.errors.iter().copied().collect();
    if op.auth != Auth::Public {
        errors.insert(401);
    }
    if workspace {
        errors.extend([403, 404]);
    }
    if op.auth == Auth::UsageAdmin {
        errors.insert(503);
    }
    if !names.is_empty() {
        errors.insert(404);
    }
    if !names.is_empty() || !query.is_empty() || op.body.is_some() {
        errors.insert(400);
    }
    if let Some((media, _, _)) = &op.body
        && *media == "application/json"
    {
        errors.extend([413, 415]);
    }
    for s in errors {
        responses.insert(s.to_string(), json!({"$ref": format!("#/components/responses/{}", error_response_name(s))}));
    }
    responses.insert("default".into(), json!({"$ref": "#/components/responses/Error"}));

    let mut out = json!({
        "operationId": operation_id(method, path),
        "summary": op.summary,
        "tags": [o.tag],
        "security": security(op.auth),
        "responses": responses,
    });
    let mut description = op.description.unwrap_or_default().to_string();
    if let Some(p) = op.permission {
        if !description.is_empty() {
            description.push_str("\n\n");
        }
        description.push_str(&format!("Permission: `{p}`."));
        out["x-permission"] = json!(p);
    }
    if !description.is_empty() {
        out["description"] = json!(description);
    }
    if !params.is_empty() {
        out["parameters"] = Value::Array(params);
    }
    if let Some((media, s, required)) = &op.body {
        complete &= !matches!(s, Shape::Undescribed);
        out["requestBody"] = json!({"required": required, "content": {*media: {"schema": shape(g, s)}}});
    }
    out["x-schema-complete"] = json!(complete);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_ids() {
        assert_eq!(openapi_path("/assets/{build}/{*path}"), "/assets/{build}/{path}");
        assert_eq!(path_params("/api/v1/agents/{id}/skills/{sid}"), ["id", "sid"]);
        assert_eq!(path_params("/app/{*rest}"), ["rest"]);
        assert_eq!(operation_id("GET", "/api/v1/document/{id}"), "get_document_id");
        assert_eq!(operation_id("POST", "/api/v1/document/"), "post_document_slash");
        assert_eq!(operation_id("GET", "/healthz"), "get_healthz");
    }

    #[test]
    fn every_error_status_has_a_response() {
        let r = error_responses();
        for c in ErrorCode::ALL {
            assert!(r.contains_key(&error_response_name(c.status())), "{}", c.as_str());
        }
    }
}
