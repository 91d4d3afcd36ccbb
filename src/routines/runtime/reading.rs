//! Reading a visitor's message for a routine's slots: the current step's slots (typed, checked,
//! refused values asked again) and corrections of `mutable` slots given earlier.

use serde_json::{Value, json};

use super::Walk;
use crate::routines::definition::{Slot, SlotType, Transition};
use crate::routines::slots;

impl Walk<'_> {
    /// A `mutable` slot given earlier that the message names again ("change the order ref to
    /// B-7") takes the new value; when a guard of a step already passed reads that slot, the
    /// routine goes back to that step so its guards decide again. Returns whether anything changed.
    pub(super) fn correct_mutable(&mut self) -> bool {
        let msg = self.input.message.clone();
        let lower = msg.to_lowercase();
        let current: Vec<String> = self.collected_by(&self.run.step).iter().map(|s| s.key.clone()).collect();
        let mut changed = Vec::new();
        for s in self.def().slots.iter().filter(|s| s.mutable && !current.contains(&s.key)) {
            if !self.run.variables.contains_key(&s.key) || !lower.contains(&s.key.replace('_', " ").to_lowercase()) {
                continue;
            }
            let v = match s.slot_type {
                SlotType::Text => slots::find_named_text(&msg, &s.key).map(Value::String),
                t => slots::extract(t, &s.key, &msg, self.today),
            };
            if let Some(Ok(Some(v))) = v.map(|v| slots::check(s.slot_type, &v)) {
                self.run.variables.insert(s.key.clone(), v);
                self.trace.push(json!({"event": "slot_corrected", "slot": s.key}));
                changed.push(s.key.clone());
            }
        }
        if changed.is_empty() {
            return false;
        }
        // back to the first step on the path whose guards read a changed slot
        let reads = |t: &Transition| {
            changed.iter().any(|k| {
                t.field_ref.as_deref().is_some_and(|r| r == k || r.starts_with(&format!("{k}.")))
                    || t.guard_text.as_deref().is_some_and(|g| g.contains(&format!("{{{{slot.{k}}}}}")))
            })
        };
        let back = self
            .run
            .path
            .iter()
            .take(self.run.path.len().saturating_sub(1))
            .find(|step| self.def().exits(step).iter().any(|t| reads(t)))
            .cloned();
        if let Some(step) = back {
            self.trace.push(json!({"event": "reevaluate", "step": step}));
            self.run.step = step.clone();
            self.run.path.push(step);
            self.run.asked = true;
        }
        true
    }

    /// Reads the message for the step's slots; returns refusals `(key, type)` of values that did
    /// not pass their check.
    pub(super) fn read_slots(&mut self, step_id: &str) -> Vec<(String, SlotType)> {
        if !self.reading || self.read.iter().any(|s| s == step_id) {
            return vec![];
        }
        self.read.push(step_id.to_string());
        let msg = self.input.message.clone();
        let collected = self.collected_by(step_id);
        let missing_text: Vec<&&Slot> = collected
            .iter()
            .filter(|s| s.slot_type == SlotType::Text && !self.run.variables.contains_key(&s.key))
            .collect();
        let lone_text = missing_text.len() == 1
            && collected.iter().filter(|s| !self.run.variables.contains_key(&s.key)).count() == 1;
        let mut refused = vec![];
        let mut found = vec![];
        for s in &collected {
            let filled = self.run.variables.contains_key(&s.key);
            if filled && !s.mutable {
                continue;
            }
            let v = match s.slot_type {
                // the whole message answers a lone text slot only when the step asked for it
                SlotType::Text if !filled && lone_text && self.run.asked && !slots::is_question(&msg) => {
                    slots::find_named_text(&msg, &s.key)
                        .or_else(|| Some(msg.trim().chars().take(500).collect()))
                        .map(Value::String)
                }
                t => slots::extract(t, &s.key, &msg, self.today),
            };
            // a mutable slot changes only when the message names it
            if filled && (v.is_none() || !msg.to_lowercase().contains(&s.key.replace('_', " ").to_lowercase())) {
                continue;
            }
            match v.map(|v| (slots::check(s.slot_type, &v), v)) {
                Some((Ok(Some(ok)), _)) => found.push((s.key.clone(), ok)),
                Some((Err(_), _)) => refused.push((s.key.clone(), s.slot_type)),
                _ => {}
            }
        }
        // a value that looks like an email or a date but is not a valid one is asked again
        for s in self.missing_for(step_id) {
            if found.iter().any(|(k, _)| *k == s.key) || refused.iter().any(|(k, _)| *k == s.key) {
                continue;
            }
            let looks_like = match s.slot_type {
                SlotType::Email => msg.contains('@'),
                SlotType::Date => {
                    found.is_empty() && msg.chars().any(|c| c.is_ascii_digit()) && !slots::is_question(&msg)
                }
                _ => false,
            };
            if looks_like {
                refused.push((s.key.clone(), s.slot_type));
            }
        }
        for (k, v) in found {
            self.trace.push(json!({"event": "slot_filled", "slot": k}));
            self.run.variables.insert(k, v);
        }
        refused
    }
}
