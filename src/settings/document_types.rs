//! The document type catalog: built-in types (code-owned, read-only) plus the workspace's own
//! types with the fields enrichment extracts. Saved conditionally on `expectedRevision`; fields
//! that disappear are retired and keep their value type forever.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, ErrorCode, Result};
use crate::ids::WorkspaceId;

pub const NAMESPACE: &str = "document_types";

pub const MAX_TYPES: usize = 20;
pub const MAX_FIELDS: usize = 10;
pub const MAX_DESCRIPTION: usize = 500;
pub const MAX_INSTRUCTION: usize = 240;
pub const MAX_LABEL: usize = 80;
pub const MAX_KEY: usize = 64;
pub const MAX_RENDERED: usize = 12_000;
pub const VALUE_TYPES: [&str; 4] = ["string", "number", "date", "boolean"];
pub const RESERVED_FIELDS: [&str; 2] = ["dateFrom", "dateTo"];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OperatorType {
    pub key: String,
    pub label: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default)]
    pub fields: Vec<FieldInput>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FieldInput {
    pub key: String,
    pub label: String,
    pub value_type: String,
    #[serde(default)]
    pub instruction: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retired {
    pub key: String,
    pub value_type: String,
}

/// What is stored per workspace (absent = revision 1, built-ins only).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stored {
    pub revision: u64,
    pub types: Vec<OperatorType>,
    pub disabled_built_in_type_keys: Vec<String>,
    pub retired_fields: Vec<Retired>,
}

impl Default for Stored {
    fn default() -> Self {
        Stored { revision: 1, types: vec![], disabled_built_in_type_keys: vec![], retired_fields: vec![] }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PutBody {
    pub expected_revision: String,
    pub types: Vec<OperatorType>,
    #[serde(default)]
    pub disabled_built_in_type_keys: Vec<String>,
}

struct BuiltIn {
    key: &'static str,
    label: &'static str,
    description: &'static str,
    payload: &'static str,
}

const BUILT_INS: [BuiltIn; 5] = [
    BuiltIn {
        key: "event",
        label: "Event",
        description: "Something that happens on a date or over a period: a meeting, a class, a release, a closure.",
        payload: "facts",
    },
    BuiltIn {
        key: "article",
        label: "Article",
        description: "A dated piece of writing: news, a post, an announcement.",
        payload: "facts",
    },
    BuiltIn {
        key: "profile",
        label: "Profile",
        description: "A description of a person, team, product or organization.",
        payload: "none",
    },
    BuiltIn {
        key: "reference",
        label: "Reference",
        description: "Lasting reference material: a policy, a manual, an FAQ, a price list.",
        payload: "none",
    },
    BuiltIn { key: "generic", label: "Generic", description: "Anything that fits no other type.", payload: "none" },
];

fn date_fields() -> Value {
    json!([
        {"key": "dateFrom", "label": "Date from", "valueType": "date", "instruction": "The first day the fact applies to."},
        {"key": "dateTo", "label": "Date to", "valueType": "date", "instruction": "The last day the fact applies to."}
    ])
}

pub fn load(c: &rusqlite::Connection, ws: &WorkspaceId) -> Result<Stored> {
    super::load(c, ws, NAMESPACE)
}

/// The catalog as the API shows it.
pub fn view(ws: &WorkspaceId, s: &Stored, referenced: Vec<String>) -> Value {
    let mut types: Vec<Value> = BUILT_INS
        .iter()
        .map(|b| {
            json!({
                "key": b.key, "label": b.label, "description": b.description,
                "enabled": !s.disabled_built_in_type_keys.iter().any(|k| k == b.key),
                "origin": "built_in", "payload": b.payload, "disableable": b.key != "generic",
                "fields": if b.payload == "facts" { date_fields() } else { json!([]) },
            })
        })
        .collect();
    for t in &s.types {
        types.push(json!({
            "key": t.key, "label": t.label, "description": t.description, "enabled": t.enabled,
            "origin": "operator", "payload": "fields", "disableable": true, "fields": t.fields,
        }));
    }
    json!({
        "workspaceId": ws.0,
        "revision": s.revision.to_string(),
        "types": types,
        "retiredFields": s.retired_fields,
        "referencedFieldKeys": referenced,
    })
}

/// The catalog as the enrichment prompt renders it (its length is limited at save).
pub fn render(s: &Stored) -> String {
    let mut out = String::new();
    for b in BUILT_INS.iter().filter(|b| !s.disabled_built_in_type_keys.iter().any(|k| k == b.key)) {
        out.push_str(&format!("- {}: {}\n", b.key, b.description));
    }
    for t in s.types.iter().filter(|t| t.enabled) {
        out.push_str(&format!("- {}: {} {}\n", t.key, t.label, t.description));
        for f in &t.fields {
            out.push_str(&format!("  - field {} ({}): {} {}\n", f.key, f.value_type, f.label, f.instruction));
        }
    }
    out
}

fn key_ok(k: &str) -> bool {
    let mut chars = k.chars();
    k.len() <= MAX_KEY
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn limit(name: &str, path: String, message: String) -> Error {
    Error::invalid(message).with_details(json!({"limit": name, "path": path}))
}

/// Validates a PUT and computes the next stored catalog.
pub fn apply(cur: &Stored, body: PutBody) -> Result<Stored> {
    if body.expected_revision.trim() != cur.revision.to_string() {
        return Err(Error::new(
            ErrorCode::RevisionConflict,
            format!(
                "the catalog changed: expectedRevision is {}, the current revision is {}",
                body.expected_revision, cur.revision
            ),
        )
        .with_details(json!({"currentRevision": cur.revision.to_string()})));
    }
    if body.types.len() > MAX_TYPES {
        return Err(limit(
            "types",
            "types".into(),
            format!("at most {MAX_TYPES} operator document types per workspace"),
        ));
    }
    let builtin_keys: HashSet<&str> = BUILT_INS.iter().map(|b| b.key).collect();
    let mut disabled = Vec::new();
    for k in &body.disabled_built_in_type_keys {
        if k == "generic" {
            return Err(Error::invalid_field("disabledBuiltInTypeKeys", "the generic type cannot be disabled"));
        }
        if !builtin_keys.contains(k.as_str()) {
            return Err(Error::invalid_field("disabledBuiltInTypeKeys", format!("`{k}` is not a built-in type")));
        }
        if !disabled.contains(k) {
            disabled.push(k.clone());
        }
    }
    // one value type per field key: retired keys and earlier declarations fix it
    let mut field_types: BTreeMap<String, String> =
        cur.retired_fields.iter().map(|r| (r.key.clone(), r.value_type.clone())).collect();
    for f in RESERVED_FIELDS {
        field_types.insert(f.into(), "date".into());
    }
    let mut type_keys = HashSet::new();
    let mut types = Vec::new();
    for (i, t) in body.types.into_iter().enumerate() {
        let at = format!("types[{i}]");
        let key = t.key.trim().to_string();
        if !key_ok(&key) {
            return Err(limit(
                "key",
                format!("{at}.key"),
                format!("{at}.key must match ^[A-Za-z][A-Za-z0-9_]{{0,63}}$"),
            ));
        }
        if builtin_keys.contains(key.as_str()) {
            return Err(Error::invalid_field(&format!("{at}.key"), format!("`{key}` is a built-in type key")));
        }
        if !type_keys.insert(key.clone()) {
            return Err(Error::invalid_field(&format!("{at}.key"), format!("type `{key}` appears twice")));
        }
        let label = t.label.trim().to_string();
        if label.is_empty() || label.chars().count() > MAX_LABEL {
            return Err(limit(
                "label",
                format!("{at}.label"),
                format!("{at}.label must be 1 to {MAX_LABEL} characters"),
            ));
        }
        if t.description.chars().count() > MAX_DESCRIPTION {
            return Err(limit(
                "description",
                format!("{at}.description"),
                format!("{at}.description must be at most {MAX_DESCRIPTION} characters"),
            ));
        }
        if t.fields.len() > MAX_FIELDS {
            return Err(limit(
                "fields",
                format!("{at}.fields"),
                format!("at most {MAX_FIELDS} fields per operator type"),
            ));
        }
        let mut seen = HashSet::new();
        let mut fields = Vec::new();
        for (j, f) in t.fields.into_iter().enumerate() {
            let fat = format!("{at}.fields[{j}]");
            let fkey = f.key.trim().to_string();
            if !key_ok(&fkey) {
                return Err(limit(
                    "key",
                    format!("{fat}.key"),
                    format!("{fat}.key must match ^[A-Za-z][A-Za-z0-9_]{{0,63}}$"),
                ));
            }
            if RESERVED_FIELDS.contains(&fkey.as_str()) {
                return Err(Error::invalid_field(
                    &format!("{fat}.key"),
                    format!("`{fkey}` is reserved by the built-in dated types"),
                ));
            }
            if !seen.insert(fkey.clone()) {
                return Err(Error::invalid_field(
                    &format!("{fat}.key"),
                    format!("field `{fkey}` appears twice in `{key}`"),
                ));
            }
            let flabel = f.label.trim().to_string();
            if flabel.is_empty() || flabel.chars().count() > MAX_LABEL {
                return Err(limit(
                    "label",
                    format!("{fat}.label"),
                    format!("{fat}.label must be 1 to {MAX_LABEL} characters"),
                ));
            }
            if !VALUE_TYPES.contains(&f.value_type.as_str()) {
                return Err(Error::invalid_field(
                    &format!("{fat}.valueType"),
                    "valueType must be string, number, date or boolean",
                ));
            }
            if f.instruction.chars().count() > MAX_INSTRUCTION {
                return Err(limit(
                    "instruction",
                    format!("{fat}.instruction"),
                    format!("{fat}.instruction must be at most {MAX_INSTRUCTION} characters"),
                ));
            }
            match field_types.get(&fkey) {
                Some(vt) if *vt != f.value_type => {
                    return Err(Error::invalid_field(
                        &format!("{fat}.valueType"),
                        format!(
                            "field `{fkey}` is already a {vt} field (one value type per key, retired keys included)"
                        ),
                    ));
                }
                _ => {
                    field_types.insert(fkey.clone(), f.value_type.clone());
                }
            }
            fields.push(FieldInput {
                key: fkey,
                label: flabel,
                value_type: f.value_type,
                instruction: f.instruction.trim().to_string(),
            });
        }
        types.push(OperatorType {
            key,
            label,
            description: t.description.trim().to_string(),
            enabled: t.enabled,
            fields,
        });
    }
    // fields that disappear are retired; a retired key declared again leaves the retired list
    let declared: HashSet<&str> = types.iter().flat_map(|t| t.fields.iter().map(|f| f.key.as_str())).collect();
    let mut retired: Vec<Retired> =
        cur.retired_fields.iter().filter(|r| !declared.contains(r.key.as_str())).cloned().collect();
    for t in &cur.types {
        for f in &t.fields {
            if !declared.contains(f.key.as_str()) && !retired.iter().any(|r| r.key == f.key) {
                retired.push(Retired { key: f.key.clone(), value_type: f.value_type.clone() });
            }
        }
    }
    let next =
        Stored { revision: cur.revision + 1, types, disabled_built_in_type_keys: disabled, retired_fields: retired };
    let rendered = render(&next).chars().count();
    if rendered > MAX_RENDERED {
        return Err(limit(
            "renderedCatalog",
            "types".into(),
            format!("the catalog renders to {rendered} prompt characters; the limit is {MAX_RENDERED}"),
        ));
    }
    Ok(next)
}

pub fn get(app: &App, p: &Principal) -> Result<Value> {
    p.require(Perm::SettingsRead)?;
    let s = app.db.read(|c| load(c, &p.workspace_id))?;
    Ok(view(&p.workspace_id, &s, vec![]))
}

pub fn put(app: &App, p: &Principal, actor: &Actor, body: PutBody) -> Result<Value> {
    p.require(Perm::SettingsManage)?;
    let now = rfc3339(app.clock.now());
    let next = app.db.write(|tx| {
        let cur = load(tx, &p.workspace_id)?;
        let next = apply(&cur, body)?;
        super::store(tx, &p.workspace_id, NAMESPACE, &next, &now)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("document_type_catalog.update").workspace(&p.workspace_id).meta(json!({
                "revision": next.revision,
                "typeCount": next.types.len(),
                "fieldCount": next.types.iter().map(|t| t.fields.len()).sum::<usize>(),
                "retiredFieldCount": next.retired_fields.len(),
            })),
        )?;
        Ok(next)
    })?;
    Ok(view(&p.workspace_id, &next, vec![]))
}

/// Field keys the catalog declares, with their value types (built-in dates included).
pub fn declared_fields(s: &Stored) -> BTreeMap<String, String> {
    let mut m: BTreeMap<String, String> = RESERVED_FIELDS.iter().map(|k| (k.to_string(), "date".to_string())).collect();
    for t in &s.types {
        for f in &t.fields {
            m.insert(f.key.clone(), f.value_type.clone());
        }
    }
    m
}

/// Enabled types the enrichment may answer with: `(key, payload, fields)`.
pub fn enabled_types(s: &Stored) -> Vec<(String, &'static str, Vec<FieldInput>)> {
    let mut out: Vec<(String, &'static str, Vec<FieldInput>)> = BUILT_INS
        .iter()
        .filter(|b| !s.disabled_built_in_type_keys.iter().any(|k| k == b.key))
        .map(|b| (b.key.to_string(), b.payload, vec![]))
        .collect();
    for t in s.types.iter().filter(|t| t.enabled) {
        out.push((t.key.clone(), "fields", t.fields.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(rev: &str, types: Value) -> PutBody {
        serde_json::from_value(json!({"expectedRevision": rev, "types": types})).unwrap()
    }

    #[test]
    fn save_retire_and_conflict() {
        let cur = Stored::default();
        let next = apply(&cur, body("1", json!([{"key": "course", "label": "Course", "fields": [{"key": "level", "label": "Level", "valueType": "string"}, {"key": "price", "label": "Price", "valueType": "number"}]}]))).unwrap();
        assert_eq!(next.revision, 2);
        let e = apply(&next, body("1", json!([]))).unwrap_err();
        assert_eq!(e.code, ErrorCode::RevisionConflict);
        assert!(e.message.contains("current revision is 2"));
        // dropping `price` retires it; declaring it again with another type is refused
        let n3 = apply(&next, body("2", json!([{"key": "course", "label": "Course", "fields": [{"key": "level", "label": "Level", "valueType": "string"}]}]))).unwrap();
        assert_eq!(n3.retired_fields, vec![Retired { key: "price".into(), value_type: "number".into() }]);
        let e = apply(&n3, body("3", json!([{"key": "shop", "label": "Shop", "fields": [{"key": "price", "label": "Price", "valueType": "string"}]}]))).unwrap_err();
        assert!(e.message.contains("already a number field"), "{}", e.message);
        // same key, different types across two types in one save
        let e = apply(&n3, body("3", json!([{"key": "a", "label": "A", "fields": [{"key": "x", "label": "X", "valueType": "string"}]}, {"key": "b", "label": "B", "fields": [{"key": "x", "label": "X", "valueType": "date"}]}]))).unwrap_err();
        assert!(e.message.contains("already a string field"));
    }

    #[test]
    fn limits_name_themselves() {
        let cur = Stored::default();
        let many: Vec<Value> = (0..21).map(|i| json!({"key": format!("t{i}"), "label": "T"})).collect();
        assert_eq!(apply(&cur, body("1", json!(many))).unwrap_err().details.unwrap()["limit"], "types");
        let fields: Vec<Value> =
            (0..11).map(|i| json!({"key": format!("f{i}"), "label": "F", "valueType": "string"})).collect();
        assert_eq!(
            apply(&cur, body("1", json!([{"key": "t", "label": "T", "fields": fields}]))).unwrap_err().details.unwrap()
                ["limit"],
            "fields"
        );
        assert_eq!(
            apply(&cur, body("1", json!([{"key": "t", "label": "T", "description": "d".repeat(501)}])))
                .unwrap_err()
                .details
                .unwrap()["limit"],
            "description"
        );
        assert_eq!(
            apply(&cur, body("1", json!([{"key": "9t", "label": "T"}]))).unwrap_err().details.unwrap()["limit"],
            "key"
        );
        assert_eq!(
            apply(&cur, body("1", json!([{"key": "t", "label": "L".repeat(81)}]))).unwrap_err().details.unwrap()["limit"],
            "label"
        );
        assert_eq!(apply(&cur, body("1", json!([{"key": "t", "label": "T", "fields": [{"key": "f", "label": "F", "valueType": "string", "instruction": "i".repeat(241)}]}]))).unwrap_err().details.unwrap()["limit"], "instruction");
        assert!(apply(&cur, body("1", json!([{"key": "t", "label": "T", "fields": [{"key": "dateFrom", "label": "F", "valueType": "date"}]}]))).unwrap_err().message.contains("reserved"));
        assert!(apply(&cur, body("1", json!([{"key": "event", "label": "T"}]))).is_err());
        let mut b = body("1", json!([]));
        b.disabled_built_in_type_keys = vec!["generic".into()];
        assert!(apply(&cur, b).is_err());
        // 20 types x 10 fields with long instructions exceed the rendered budget
        let big: Vec<Value> = (0..20).map(|i| json!({"key": format!("t{i}"), "label": "T", "description": "d".repeat(400), "fields": (0..10).map(|j| json!({"key": format!("f{i}_{j}"), "label": "F", "valueType": "string", "instruction": "x".repeat(200)})).collect::<Vec<_>>()})).collect();
        assert_eq!(apply(&cur, body("1", json!(big))).unwrap_err().details.unwrap()["limit"], "renderedCatalog");
    }
}
