//! The document type catalog: built-in types (code-owned, read-only) plus the workspace's own
//! types with the fields enrichment extracts. Saved conditionally on `expectedRevision`; fields
//! that disappear are retired and keep their value type forever.

use std::collections::{BTreeMap, HashSet};

use serde_json::json;

use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, ErrorCode, Result};
use crate::ids::WorkspaceId;
use crate::storage::Conn;

use super::api::StoredJson;

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

/// A document type the workspace declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorType {
    pub key: String,
    pub label: String,
    pub description: String,
    pub enabled: bool,
    pub fields: Vec<FieldInput>,
}

/// A field an operator type's enrichment extracts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldInput {
    pub key: String,
    pub label: String,
    pub value_type: String,
    pub instruction: String,
}

/// A field key no type declares any more; it keeps its value type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retired {
    pub key: String,
    pub value_type: String,
}

/// What is stored per workspace (absent = revision 1, built-ins only).
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// A new catalog, saved only if the current one is still `expected_revision`.
#[derive(Debug, Clone)]
pub struct CatalogUpdate {
    pub expected_revision: String,
    pub types: Vec<OperatorType>,
    pub disabled_built_in_type_keys: Vec<String>,
}

/// Whether a type's enrichment extracts facts (the built-in dated types), fields (operator types)
/// or nothing.
pub type Payload = &'static str;

/// Where a type comes from: `built_in` or `operator`.
pub type Origin = &'static str;

/// A type as the catalog shows it.
#[derive(Debug, Clone)]
pub struct TypeView {
    pub key: String,
    pub label: String,
    pub description: String,
    pub enabled: bool,
    pub origin: Origin,
    pub payload: Payload,
    pub disableable: bool,
    pub fields: Vec<FieldInput>,
}

/// The catalog as `GET/PUT /settings/document-types` report it.
#[derive(Debug, Clone)]
pub struct CatalogView {
    pub workspace_id: String,
    pub revision: u64,
    /// Built-ins first, then the workspace's own.
    pub types: Vec<TypeView>,
    pub retired_fields: Vec<Retired>,
    pub referenced_field_keys: Vec<String>,
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

fn date_fields() -> Vec<FieldInput> {
    let field = |key: &str, label: &str, instruction: &str| FieldInput {
        key: key.into(),
        label: label.into(),
        value_type: "date".into(),
        instruction: instruction.into(),
    };
    vec![
        field("dateFrom", "Date from", "The first day the fact applies to."),
        field("dateTo", "Date to", "The last day the fact applies to."),
    ]
}

pub fn load(c: &Conn, ws: &WorkspaceId) -> Result<Stored> {
    Ok(super::load::<StoredJson>(c, ws, NAMESPACE)?.into())
}

/// The catalog as the API shows it.
pub fn view(ws: &WorkspaceId, s: &Stored, referenced: Vec<String>) -> CatalogView {
    let mut types: Vec<TypeView> = BUILT_INS
        .iter()
        .map(|b| TypeView {
            key: b.key.into(),
            label: b.label.into(),
            description: b.description.into(),
            enabled: !s.disabled_built_in_type_keys.iter().any(|k| k == b.key),
            origin: "built_in",
            payload: b.payload,
            disableable: b.key != "generic",
            fields: if b.payload == "facts" { date_fields() } else { vec![] },
        })
        .collect();
    for t in &s.types {
        types.push(TypeView {
            key: t.key.clone(),
            label: t.label.clone(),
            description: t.description.clone(),
            enabled: t.enabled,
            origin: "operator",
            payload: "fields",
            disableable: true,
            fields: t.fields.clone(),
        });
    }
    CatalogView {
        workspace_id: ws.0.clone(),
        revision: s.revision,
        types,
        retired_fields: s.retired_fields.clone(),
        referenced_field_keys: referenced,
    }
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

fn check_revision(cur: &Stored, expected: &str) -> Result<()> {
    if expected.trim() != cur.revision.to_string() {
        return Err(Error::new(
            ErrorCode::RevisionConflict,
            format!("the catalog changed: expectedRevision is {expected}, the current revision is {}", cur.revision),
        )
        .with_details(json!({"currentRevision": cur.revision.to_string()})));
    }
    Ok(())
}

/// The built-in types to disable, each once; `generic` and unknown keys are refused.
fn disabled_built_ins(keys: &[String]) -> Result<Vec<String>> {
    let mut disabled = Vec::new();
    for k in keys {
        if k == "generic" {
            return Err(Error::invalid_field("disabledBuiltInTypeKeys", "the generic type cannot be disabled"));
        }
        if !BUILT_INS.iter().any(|b| b.key == k) {
            return Err(Error::invalid_field("disabledBuiltInTypeKeys", format!("`{k}` is not a built-in type")));
        }
        if !disabled.contains(k) {
            disabled.push(k.clone());
        }
    }
    Ok(disabled)
}

/// What a save checks across types: type keys seen so far, and one value type per field key
/// (retired keys and earlier declarations fix it).
struct Seen {
    type_keys: HashSet<String>,
    field_types: BTreeMap<String, String>,
}

impl Seen {
    fn new(cur: &Stored) -> Seen {
        let mut field_types: BTreeMap<String, String> =
            cur.retired_fields.iter().map(|r| (r.key.clone(), r.value_type.clone())).collect();
        for f in RESERVED_FIELDS {
            field_types.insert(f.into(), "date".into());
        }
        Seen { type_keys: HashSet::new(), field_types }
    }
}

fn check_key(key: &str, path: &str) -> Result<()> {
    if !key_ok(key) {
        return Err(limit(
            "key",
            format!("{path}.key"),
            format!("{path}.key must match ^[A-Za-z][A-Za-z0-9_]{{0,63}}$"),
        ));
    }
    Ok(())
}

fn check_label(label: &str, path: &str) -> Result<()> {
    if label.is_empty() || label.chars().count() > MAX_LABEL {
        return Err(limit(
            "label",
            format!("{path}.label"),
            format!("{path}.label must be 1 to {MAX_LABEL} characters"),
        ));
    }
    Ok(())
}

/// Checks type `i` and returns it cleaned (keys and labels trimmed).
fn clean_type(i: usize, t: OperatorType, seen: &mut Seen) -> Result<OperatorType> {
    let at = format!("types[{i}]");
    let key = t.key.trim().to_string();
    check_key(&key, &at)?;
    if BUILT_INS.iter().any(|b| b.key == key) {
        return Err(Error::invalid_field(&format!("{at}.key"), format!("`{key}` is a built-in type key")));
    }
    if !seen.type_keys.insert(key.clone()) {
        return Err(Error::invalid_field(&format!("{at}.key"), format!("type `{key}` appears twice")));
    }
    let label = t.label.trim().to_string();
    check_label(&label, &at)?;
    if t.description.chars().count() > MAX_DESCRIPTION {
        return Err(limit(
            "description",
            format!("{at}.description"),
            format!("{at}.description must be at most {MAX_DESCRIPTION} characters"),
        ));
    }
    if t.fields.len() > MAX_FIELDS {
        return Err(limit("fields", format!("{at}.fields"), format!("at most {MAX_FIELDS} fields per operator type")));
    }
    let mut in_type = HashSet::new();
    let mut fields = Vec::new();
    for (j, f) in t.fields.into_iter().enumerate() {
        fields.push(clean_field(&format!("{at}.fields[{j}]"), &key, f, &mut in_type, seen)?);
    }
    Ok(OperatorType { key, label, description: t.description.trim().to_string(), enabled: t.enabled, fields })
}

/// Checks field `fat` of type `type_key` and returns it cleaned.
fn clean_field(
    fat: &str,
    type_key: &str,
    f: FieldInput,
    in_type: &mut HashSet<String>,
    seen: &mut Seen,
) -> Result<FieldInput> {
    let fkey = f.key.trim().to_string();
    check_key(&fkey, fat)?;
    if RESERVED_FIELDS.contains(&fkey.as_str()) {
        return Err(Error::invalid_field(
            &format!("{fat}.key"),
            format!("`{fkey}` is reserved by the built-in dated types"),
        ));
    }
    if !in_type.insert(fkey.clone()) {
        return Err(Error::invalid_field(
            &format!("{fat}.key"),
            format!("field `{fkey}` appears twice in `{type_key}`"),
        ));
    }
    let flabel = f.label.trim().to_string();
    check_label(&flabel, fat)?;
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
    match seen.field_types.get(&fkey) {
        Some(vt) if *vt != f.value_type => {
            return Err(Error::invalid_field(
                &format!("{fat}.valueType"),
                format!("field `{fkey}` is already a {vt} field (one value type per key, retired keys included)"),
            ));
        }
        _ => {
            seen.field_types.insert(fkey.clone(), f.value_type.clone());
        }
    }
    Ok(FieldInput { key: fkey, label: flabel, value_type: f.value_type, instruction: f.instruction.trim().to_string() })
}

/// Fields that disappear are retired; a retired key declared again leaves the retired list.
fn retire(cur: &Stored, types: &[OperatorType]) -> Vec<Retired> {
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
    retired
}

/// Validates a PUT and computes the next stored catalog.
pub fn apply(cur: &Stored, body: CatalogUpdate) -> Result<Stored> {
    check_revision(cur, &body.expected_revision)?;
    if body.types.len() > MAX_TYPES {
        return Err(limit(
            "types",
            "types".into(),
            format!("at most {MAX_TYPES} operator document types per workspace"),
        ));
    }
    let disabled = disabled_built_ins(&body.disabled_built_in_type_keys)?;
    let mut seen = Seen::new(cur);
    let types =
        body.types.into_iter().enumerate().map(|(i, t)| clean_type(i, t, &mut seen)).collect::<Result<Vec<_>>>()?;
    let retired = retire(cur, &types);
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

pub fn get(app: &App, p: &Principal) -> Result<CatalogView> {
    p.require(Perm::SettingsRead)?;
    let s = app.db.read(|c| load(c, &p.workspace_id))?;
    Ok(view(&p.workspace_id, &s, vec![]))
}

pub fn put(app: &App, p: &Principal, actor: &Actor, body: CatalogUpdate) -> Result<CatalogView> {
    p.require(Perm::SettingsManage)?;
    let now = rfc3339(app.clock.now());
    let next = app.db.write(|tx| {
        let cur = load(tx, &p.workspace_id)?;
        let next = apply(&cur, body)?;
        super::store(tx, &p.workspace_id, NAMESPACE, &StoredJson::from(&next), &now)?;
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

    use serde_json::Value;

    fn body(rev: &str, types: Value) -> CatalogUpdate {
        serde_json::from_value::<super::super::api::DocumentTypesBody>(json!({"expectedRevision": rev, "types": types}))
            .unwrap()
            .into()
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
