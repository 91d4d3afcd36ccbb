//! Deterministic guards: field operators (on the last tool result's outputs, then the routine's
//! variables), a tool's outcome, filled slots and bounded loops; and a decision's content hash.

use chrono::NaiveDate;
use serde_json::{Value, json};

use super::Walk;
use crate::routines::definition::{DateUnit, FieldOp, GateOption, GuardKind, Transition};

impl Walk<'_> {
    /// The value a guard refers to: the last tool result's outputs first (dotted paths), then the
    /// routine's variables.
    pub(super) fn resolve_ref(&self, r: &str) -> Option<Value> {
        let path = |root: &Value| -> Option<Value> {
            let mut cur = root;
            for part in r.split('.') {
                cur = cur.get(part)?;
            }
            (!cur.is_null()).then(|| cur.clone())
        };
        if let Some(out) = self.run.last_result.as_ref().map(|l| &l["outputs"])
            && let Some(v) = path(out)
        {
            return Some(v);
        }
        path(&Value::Object(self.run.variables.clone()))
    }

    pub(super) fn field_holds(&self, t: &Transition) -> bool {
        let Some(op) = t.field_op else { return false };
        let r = t.field_ref.as_deref().unwrap_or_default();
        let v = self.resolve_ref(r);
        let num = |x: &Value| x.as_f64().or_else(|| x.as_str().and_then(|s| s.parse::<f64>().ok()));
        let cmp = |f: fn(f64, f64) -> bool| match (v.as_ref().and_then(num), t.field_value.as_ref().and_then(num)) {
            (Some(a), Some(b)) => f(a, b),
            _ => false,
        };
        match op {
            FieldOp::Equals => v.as_ref().zip(t.field_value.as_ref()).is_some_and(|(a, b)| loose_eq(a, b)),
            FieldOp::NotEquals => !v.as_ref().zip(t.field_value.as_ref()).is_some_and(|(a, b)| loose_eq(a, b)),
            FieldOp::In => v.as_ref().is_some_and(|a| t.field_values.iter().flatten().any(|b| loose_eq(a, b))),
            FieldOp::Gt => cmp(|a, b| a > b),
            FieldOp::Gte => cmp(|a, b| a >= b),
            FieldOp::Lt => cmp(|a, b| a < b),
            FieldOp::Lte => cmp(|a, b| a <= b),
            FieldOp::IsTrue => v == Some(Value::Bool(true)),
            FieldOp::IsFalse => v == Some(Value::Bool(false)),
            FieldOp::IsPresent => v.is_some(),
            FieldOp::IsAbsent => v.is_none(),
            FieldOp::OlderThan | FieldOp::Within => {
                let date =
                    v.as_ref().and_then(Value::as_str).and_then(|s| NaiveDate::parse_from_str(s, "%Y-%m-%d").ok());
                let n = t.field_value.as_ref().and_then(num).unwrap_or(0.0) as i64;
                let threshold = match t.field_unit {
                    // out-of-range amounts hold no date (never a panic)
                    Some(DateUnit::Days) | None => {
                        chrono::Duration::try_days(n).and_then(|d| self.today.checked_sub_signed(d))
                    }
                    Some(DateUnit::Weeks) => {
                        chrono::Duration::try_weeks(n).and_then(|d| self.today.checked_sub_signed(d))
                    }
                    Some(DateUnit::Months) => {
                        u32::try_from(n).ok().and_then(|m| self.today.checked_sub_months(chrono::Months::new(m)))
                    }
                    Some(DateUnit::Years) => u32::try_from(n)
                        .ok()
                        .and_then(|y| y.checked_mul(12))
                        .and_then(|m| self.today.checked_sub_months(chrono::Months::new(m))),
                };
                match (date, threshold) {
                    (Some(d), Some(th)) if op == FieldOp::OlderThan => d < th,
                    (Some(d), Some(th)) => d >= th,
                    _ => false,
                }
            }
        }
    }

    /// Whether a deterministic guard holds.
    pub(super) fn deterministic(&self, t: &Transition) -> bool {
        match t.guard_kind {
            GuardKind::Field => self.field_holds(t),
            GuardKind::Outcome => self
                .run
                .last_result
                .as_ref()
                .and_then(|r| r["status"].as_str())
                .is_some_and(|s| Some(s) == t.outcome_status.as_deref()),
            GuardKind::SlotFilled => {
                let text = t.guard_text.as_deref().unwrap_or_default();
                let keys: Vec<&str> = text.split("{{slot.").skip(1).filter_map(|p| p.split("}}").next()).collect();
                !keys.is_empty() && keys.iter().all(|k| self.run.variables.contains_key(*k))
            }
            GuardKind::Counter => {
                self.run.attempts.get(&t.from_step).copied().unwrap_or(0) < t.counter_limit.unwrap_or(0)
            }
            GuardKind::Llm | GuardKind::Default => false,
        }
    }
}

fn loose_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(o), _) => o.get("id").is_some_and(|id| loose_eq(id, b)),
        _ => a == b,
    }
}

/// Lowercase hex SHA-256 of the canonical JSON (keys sorted, no spaces) of
/// `{routineId, stepId, captureKey, options: [{id, label}]}`.
pub fn content_hash(routine_id: &str, step_id: &str, capture_key: &str, options: &[GateOption]) -> String {
    use sha2::{Digest, Sha256};
    let options: Vec<Value> = options.iter().map(|o| json!({"id": o.id, "label": o.label})).collect();
    // serde_json's map is ordered by key (no preserve_order feature), so this is canonical
    let v = json!({"routineId": routine_id, "stepId": step_id, "captureKey": capture_key, "options": options});
    hex::encode(Sha256::digest(v.to_string().as_bytes()))
}
