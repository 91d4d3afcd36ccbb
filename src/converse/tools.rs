//! Routine tools: the typed tools a calling agent sees for an agent's exposed routines, and the
//! check of a call's input against them (before anything is recorded).
//!
//! A descriptor's `inputSchema` is a JSON Schema object built from the routine's slots (its
//! `required` list in the slots' order; `properties` is a JSON object, which has no order): text → string, number → number, boolean → boolean, email → string with format email,
//! date → string with format date; the slot's description is copied; required slots are
//! `required`; nothing else is allowed.

use chrono::NaiveDate;
use serde_json::{Map, Value, json};

use crate::agents::config::AgentConfig;
use crate::error::Error;
use crate::routines::definition::{Definition, Slot, SlotType};
use crate::routines::slots;

/// Longest string a routine tool accepts for one field (after trimming).
pub const MAX_INPUT_CHARS: usize = 2000;

/// One exposed routine as a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Descriptor {
    pub tool_name: String,
    /// The operator's description of the tool.
    pub description: String,
    /// JSON Schema of the tool's arguments.
    pub input_schema: Value,
    /// The routine's id (the same across its versions).
    pub routine_lineage_id: String,
    pub routine_name: String,
}

/// The tools of an agent release: its enabled routines with exposure on, by tool name.
pub fn descriptors(agent: &AgentConfig) -> Vec<Descriptor> {
    let mut v: Vec<Descriptor> = agent
        .routines
        .iter()
        .filter(|r| r.definition.enabled)
        .filter_map(|r| {
            let e = r.definition.exposure.as_ref().filter(|e| e.enabled)?;
            Some(Descriptor {
                tool_name: e.tool_name.clone(),
                description: if e.description.trim().is_empty() { r.name.clone() } else { e.description.clone() },
                input_schema: input_schema(&r.definition),
                routine_lineage_id: r.id.clone(),
                routine_name: r.name.clone(),
            })
        })
        .collect();
    v.sort_by(|a, b| a.tool_name.cmp(&b.tool_name));
    v
}

fn ordered(def: &Definition) -> Vec<&Slot> {
    let mut slots: Vec<&Slot> = def.slots.iter().collect();
    slots.sort_by_key(|s| s.ordinal);
    slots
}

/// The JSON Schema of a routine's slots.
pub fn input_schema(def: &Definition) -> Value {
    let mut properties = Map::new();
    let mut required = vec![];
    for s in ordered(def) {
        let mut p = match s.slot_type {
            SlotType::Text => json!({"type": "string"}),
            SlotType::Number => json!({"type": "number"}),
            SlotType::Boolean => json!({"type": "boolean"}),
            SlotType::Email => json!({"type": "string", "format": "email"}),
            SlotType::Date => json!({"type": "string", "format": "date"}),
        };
        if let Some(d) = s.description.as_deref().filter(|d| !d.trim().is_empty()) {
            p["description"] = json!(d);
        }
        properties.insert(s.key.clone(), p);
        if s.required {
            required.push(s.key.clone());
        }
    }
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// One field a call got wrong: `required`, `type`, `format`, `unknown_field` or `too_long`. The
/// value is never repeated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub code: &'static str,
}

/// The 400 of a call whose input does not match the tool (every field at once).
pub fn invalid(errors: &[FieldError]) -> Error {
    let list: Vec<Value> = errors.iter().map(|e| json!({"path": e.path, "code": e.code})).collect();
    Error::invalid("the routine tool's input does not match its schema")
        .with_details(json!({"code": "routine_invocation_invalid", "errors": list}))
}

/// The 404 of a tool this conversation's agent release does not have.
pub fn unknown_tool() -> Error {
    Error::new(crate::error::ErrorCode::NotFound, "no such routine tool for this conversation")
        .with_details(json!({"code": "routine_tool_unknown"}))
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b.iter().enumerate().all(|(i, c)| if i == 4 || i == 7 { *c == b'-' } else { c.is_ascii_digit() })
        && NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok()
}

/// Checks a call's input against a routine's slots: strings are trimmed first and a blank string
/// counts as missing (an error when required, dropped when optional); unknown fields, wrong JSON
/// types, bad emails or dates and strings over [`MAX_INPUT_CHARS`] are errors. Returns the
/// variables the routine starts with.
pub fn validate(def: &Definition, input: &Value) -> Result<Map<String, Value>, Vec<FieldError>> {
    let empty = Map::new();
    let obj = match input {
        Value::Object(o) => o,
        Value::Null => &empty,
        _ => return Err(vec![FieldError { path: String::new(), code: "type" }]),
    };
    let slots = ordered(def);
    let mut errors = vec![];
    let mut out = Map::new();
    for key in obj.keys() {
        if !slots.iter().any(|s| &s.key == key) {
            errors.push(FieldError { path: key.clone(), code: "unknown_field" });
        }
    }
    for s in slots {
        let v = match obj.get(&s.key) {
            Some(Value::String(t)) if t.trim().is_empty() => None,
            Some(Value::Null) | None => None,
            Some(Value::String(t)) => Some(Value::String(t.trim().to_string())),
            Some(v) => Some(v.clone()),
        };
        let Some(v) = v else {
            if s.required {
                errors.push(FieldError { path: s.key.clone(), code: "required" });
            }
            continue;
        };
        let code = match (s.slot_type, &v) {
            (SlotType::Number, Value::Number(n)) if n.as_f64().is_some_and(f64::is_finite) => None,
            (SlotType::Boolean, Value::Bool(_)) => None,
            (SlotType::Text | SlotType::Email | SlotType::Date, Value::String(t))
                if t.chars().count() > MAX_INPUT_CHARS =>
            {
                Some("too_long")
            }
            (SlotType::Text, Value::String(_)) => None,
            (SlotType::Email, Value::String(t)) => (!slots::is_email(t)).then_some("format"),
            (SlotType::Date, Value::String(t)) => (!is_date(t)).then_some("format"),
            _ => Some("type"),
        };
        match code {
            Some(code) => errors.push(FieldError { path: s.key.clone(), code }),
            None => {
                out.insert(s.key.clone(), v);
            }
        }
    }
    if errors.is_empty() { Ok(out) } else { Err(errors) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn slot(key: &str, t: SlotType, required: bool, ordinal: i64) -> Slot {
        Slot {
            stable_slot_id: format!("s-{key}"),
            key: key.into(),
            slot_type: t,
            required,
            description: Some(format!("the {key}")),
            ordinal,
            mutable: false,
        }
    }

    fn def() -> Definition {
        let mut d: Definition = serde_json::from_value(json!({
            "name": "Refund", "activation": {"triggerDescription": "refund"}, "steps": [], "terminals": []
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        d.slots = vec![
            slot("email", SlotType::Email, true, 1),
            slot("order_ref", SlotType::Text, true, 0),
            slot("amount", SlotType::Number, false, 2),
            slot("urgent", SlotType::Boolean, false, 3),
            slot("since", SlotType::Date, false, 4),
        ];
        d
    }

    #[test]
    fn the_schema_follows_the_slots_in_order() {
        let s = input_schema(&def());
        // a JSON object has no order; `required` keeps the slots' order
        let mut keys: Vec<&String> = s["properties"].as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["amount", "email", "order_ref", "since", "urgent"]);
        assert_eq!(s["properties"]["email"], json!({"type": "string", "format": "email", "description": "the email"}));
        assert_eq!(s["properties"]["since"]["format"], "date");
        assert_eq!(s["properties"]["amount"]["type"], "number");
        assert_eq!(s["properties"]["urgent"]["type"], "boolean");
        assert_eq!(s["required"], json!(["order_ref", "email"]));
        assert_eq!(s["additionalProperties"], false);
    }

    #[test]
    fn every_error_code_is_reported_at_once_without_values() {
        let long = "x".repeat(MAX_INPUT_CHARS + 1);
        let input = json!({"order_ref": long, "email": "not-an-email", "amount": "12", "since": "2026-02-30",
            "extra": "secret-value"});
        let mut errs = validate(&def(), &input).unwrap_err();
        errs.sort_by(|a, b| a.path.cmp(&b.path));
        let got: Vec<(&str, &str)> = errs.iter().map(|e| (e.path.as_str(), e.code)).collect();
        assert_eq!(
            got,
            [
                ("amount", "type"),
                ("email", "format"),
                ("extra", "unknown_field"),
                ("order_ref", "too_long"),
                ("since", "format")
            ]
        );
        let e = invalid(&errs);
        assert!(!serde_json::to_string(&e.details).unwrap().contains("secret-value"));
        assert_eq!(validate(&def(), &json!({})).unwrap_err().len(), 2, "both required slots");
    }

    #[test]
    fn strings_are_trimmed_and_blank_counts_as_missing() {
        let ok = validate(&def(), &json!({"order_ref": "  A-1 ", "email": "a@b.co", "amount": 3.5, "since": "   "}))
            .unwrap();
        assert_eq!(ok["order_ref"], "A-1");
        assert!(!ok.contains_key("since"), "a blank optional is dropped");
        let errs = validate(&def(), &json!({"order_ref": "  ", "email": "a@b.co"})).unwrap_err();
        assert_eq!(errs, [FieldError { path: "order_ref".into(), code: "required" }]);
        let errs = validate(&def(), &json!({"order_ref": "A", "email": null})).unwrap_err();
        assert_eq!(errs[0].code, "required");
        assert_eq!(validate(&def(), &json!([1])).unwrap_err()[0].code, "type");
    }

    #[test]
    fn emails_and_dates_follow_the_reference_rules() {
        for good in ["a@b.co", "first.last+x@mail.example.org"] {
            assert!(slots::is_email(good), "{good}");
        }
        for bad in ["a@b", "a@@b.co", "a b@c.de", "@b.co", "a@b..co", "a@.b.co", "a@b.co."] {
            assert!(!slots::is_email(bad), "{bad}");
        }
        assert!(is_date("2024-02-29"));
        assert!(!is_date("2023-02-29"));
        assert!(!is_date("2024-2-9"));
        assert!(!is_date("2024- 2-09") && !is_date("+024-02-09"));
    }

    proptest! {
        #[test]
        fn any_input_is_checked_without_panicking(
            keys in proptest::collection::vec("[a-z_]{1,10}", 0..6),
            text in ".{0,40}",
            n in proptest::num::f64::ANY,
        ) {
            let mut m = Map::new();
            for (i, k) in keys.iter().enumerate() {
                let v = match i % 4 { 0 => json!(text), 1 => json!(n.is_finite().then_some(n)), 2 => json!(true), _ => json!([text]) };
                m.insert(k.clone(), v);
            }
            match validate(&def(), &Value::Object(m.clone())) {
                Ok(out) => {
                    for (k, v) in &out {
                        prop_assert!(m.contains_key(k));
                        if let Value::String(s) = v { prop_assert_eq!(s.trim(), s.as_str()); prop_assert!(!s.is_empty()); }
                    }
                }
                Err(errs) => {
                    prop_assert!(!errs.is_empty());
                    let body = serde_json::to_string(&invalid(&errs).details).unwrap();
                    if text.len() > 3 && !keys.iter().any(|k| text.contains(k.as_str())) && !"routine_invocation_invalid".contains(text.as_str()) {
                        prop_assert!(!body.contains(text.as_str()), "values are never echoed");
                    }
                }
            }
        }
    }
}
