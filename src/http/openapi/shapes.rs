//! Small builders for schemas written by hand next to a handler that answers with `json!`
//! (JSON Schema 2020-12). Inside `Op::ok_with(|g| …)` a derived type is `of::<T>(g)`.

use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

/// A reference to `T`'s derived schema (registered in `components/schemas`).
pub fn of<T: JsonSchema>(g: &mut SchemaGenerator) -> Value {
    g.subschema_for::<T>().to_value()
}

/// An object whose listed properties are all present.
pub fn obj(properties: Value) -> Value {
    let required: Vec<String> = properties.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
    json!({"type": "object", "required": required, "properties": properties})
}

/// An object of which only the `required` properties are always present.
pub fn obj_some(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "required": required, "properties": properties})
}

/// An object with any properties whose values are `values`.
pub fn map_of(values: Value) -> Value {
    json!({"type": "object", "additionalProperties": values})
}

pub fn array(items: Value) -> Value {
    json!({"type": "array", "items": items})
}

/// `s` or `null`.
pub fn nullable(s: Value) -> Value {
    json!({"anyOf": [s, {"type": "null"}]})
}

pub fn string() -> Value {
    json!({"type": "string"})
}

/// One of the listed strings.
pub fn one_of(values: &[&str]) -> Value {
    json!({"type": "string", "enum": values})
}

pub fn string_or_null() -> Value {
    json!({"type": ["string", "null"]})
}

pub fn integer() -> Value {
    json!({"type": "integer"})
}

pub fn number() -> Value {
    json!({"type": "number"})
}

pub fn boolean() -> Value {
    json!({"type": "boolean"})
}

/// An RFC 3339 timestamp.
pub fn timestamp() -> Value {
    json!({"type": "string", "format": "date-time"})
}

/// Any JSON object.
pub fn any_object() -> Value {
    json!({"type": "object"})
}

/// A page of a list: `{<key>: [items], nextCursor, hasMore}`.
pub fn page(key: &str, items: Value) -> Value {
    let mut props = Map::new();
    props.insert(key.to_string(), array(items));
    props.insert("nextCursor".into(), string_or_null());
    props.insert("hasMore".into(), boolean());
    obj(Value::Object(props))
}
