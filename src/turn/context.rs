//! Context variables in a turn: the values of the agent's enabled variables (as its revision has
//! them), resolved for the turn's subject, and what the composing model may see of them.
//!
//! Surfacing (per enablement, defaulting to the variable's own):
//! * `always`: in the instructions the composer sees, every turn;
//! * `on_reference`: only when authored text of this turn (the agent's instruction, or the action
//!   of a directive that applies) references the variable as `ctx.<name>` or `{{name}}`;
//! * `operator_only`: never shown to a model.
//!
//! A test execution's `testValues` take the place of stored values. Sensitive values may reach
//! the model when surfaced, but never a trace or a log: the trace names variables, scopes and
//! decisions, never values.

use serde_json::{Value, json};

use super::trace::StageOutputs;
use crate::agents::config::AgentConfig;
use crate::agents::context::{self, Subject, VariableValue};
use crate::app::App;
use crate::error::Result;
use crate::ids::WorkspaceId;

/// Who a turn is about, for the session and customer scopes of context values.
#[derive(Debug, Clone, Default)]
pub struct ContextScope {
    pub session_id: Option<String>,
    pub customer_id: Option<String>,
}

/// How a value may reach the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surfacing {
    Always,
    OnReference,
    OperatorOnly,
}

impl Surfacing {
    fn parse(s: &str) -> Surfacing {
        match s {
            "always" => Surfacing::Always,
            "operator_only" => Surfacing::OperatorOnly,
            _ => Surfacing::OnReference,
        }
    }
    fn as_str(self) -> &'static str {
        match self {
            Surfacing::Always => "always",
            Surfacing::OnReference => "on_reference",
            Surfacing::OperatorOnly => "operator_only",
        }
    }
}

/// One resolved value of the turn.
#[derive(Debug, Clone)]
pub struct TurnValue {
    pub variable_id: String,
    pub name: String,
    pub surfacing: Surfacing,
    pub sensitive: bool,
    /// `session`, `customer`, `agent`, `workspace`, or `test` (a test execution's value).
    pub scope: &'static str,
    pub value: Value,
}

/// The turn's context values: every enabled, pushed variable of the agent's revision that has a
/// value for the subject. Resolver-sourced variables need their skill to run; they are skipped
/// (and traced as such) until skills execute in turns.
pub struct TurnContext {
    pub values: Vec<TurnValue>,
    skipped: Vec<(String, &'static str)>,
}

impl TurnContext {
    pub fn empty() -> TurnContext {
        TurnContext { values: Vec::new(), skipped: Vec::new() }
    }

    /// Resolves the values of `agent`'s enabled variables for `scope`; `test_values` (variable
    /// id → value) take the place of stored ones.
    pub fn resolve(
        app: &App,
        ws: &WorkspaceId,
        agent: &AgentConfig,
        scope: &ContextScope,
        test_values: &[(String, VariableValue)],
    ) -> Result<TurnContext> {
        let mut out = TurnContext::empty();
        if agent.context_variables.is_empty() {
            return Ok(out);
        }
        let subject = Subject {
            session_id: scope.session_id.as_deref(),
            customer_id: scope.customer_id.as_deref(),
            agent_id: Some(&agent.agent_id),
        };
        app.db.read(|c| {
            for e in agent.context_variables.iter().filter(|e| e.enabled) {
                if e.source != "pushed" {
                    out.skipped.push((e.variable_id.clone(), "resolver_not_run"));
                    continue;
                }
                let surfacing = Surfacing::parse(&e.surfacing);
                if let Some((_, v)) = test_values.iter().find(|(id, _)| *id == e.variable_id) {
                    let Some(var) = context::variable(c, ws, &e.variable_id)? else {
                        out.skipped.push((e.variable_id.clone(), "variable_deleted"));
                        continue;
                    };
                    out.values.push(TurnValue {
                        variable_id: var.id.clone(),
                        sensitive: var.sensitive(),
                        name: var.name,
                        surfacing,
                        scope: "test",
                        value: v.clone(),
                    });
                    continue;
                }
                match context::resolve(app, c, ws, &e.variable_id, &subject) {
                    Ok(Some(r)) => out.values.push(TurnValue {
                        variable_id: r.variable.id.clone(),
                        sensitive: r.variable.sensitive(),
                        name: r.variable.name,
                        surfacing,
                        scope: r.scope,
                        value: r.value,
                    }),
                    Ok(None) => out.skipped.push((e.variable_id.clone(), "no_value")),
                    // a sealed value that cannot be opened (key missing or changed): the turn goes
                    // on without it
                    Err(err) => {
                        tracing::warn!(variable = %e.variable_id, error = %err.message, "a context value could not be read");
                        out.skipped.push((e.variable_id.clone(), "unreadable"));
                    }
                }
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// Whether the value reaches the model, given this turn's authored text.
    fn surfaced(v: &TurnValue, authored: &[&str]) -> bool {
        match v.surfacing {
            Surfacing::Always => true,
            Surfacing::OperatorOnly => false,
            Surfacing::OnReference => authored.iter().any(|t| references(t, &v.name)),
        }
    }

    /// The block of the composer's instructions that carries the surfaced values ("" when none).
    pub fn prompt_block(&self, authored: &[&str]) -> String {
        let lines: Vec<String> = self
            .values
            .iter()
            .filter(|v| Self::surfaced(v, authored))
            .map(|v| {
                let shown = match &v.value {
                    Value::Object(m) if m.len() == 1 && m.get("value").is_some_and(Value::is_string) => {
                        m["value"].as_str().unwrap_or_default().to_string()
                    }
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                format!("- ctx.{}: {}", v.name, shown)
            })
            .collect();
        if lines.is_empty() {
            return String::new();
        }
        format!(
            "\nFacts about this conversation (context variables; use them where they help, never recite them unasked):\n{}",
            lines.join("\n")
        )
    }

    /// The trace of what was resolved and surfaced: ids, names, scopes and decisions, no values.
    pub fn trace(&self, authored: &[&str]) -> StageOutputs {
        let resolved: Vec<Value> = self
            .values
            .iter()
            .map(|v| {
                json!({"variableId": v.variable_id, "name": v.name, "scope": v.scope, "surfacing": v.surfacing.as_str(),
                       "sensitive": v.sensitive, "surfaced": Self::surfaced(v, authored)})
            })
            .collect();
        let skipped: Vec<Value> =
            self.skipped.iter().map(|(id, why)| json!({"variableId": id, "reason": why})).collect();
        json!({"resolved": resolved, "skipped": skipped})
    }
}

/// Whether `text` references the variable `name`: `ctx.<name>` or `{{name}}` (spaces allowed inside
/// the braces), with `name` not continuing into a longer identifier.
pub fn references(text: &str, name: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let after_ok = |rest: &str| !rest.starts_with(ident);
    for (i, _) in text.match_indices("ctx.") {
        let rest = &text[i + 4..];
        if let Some(tail) = rest.strip_prefix(name)
            && after_ok(tail)
        {
            return true;
        }
    }
    for (i, _) in text.match_indices("{{") {
        let rest = text[i + 2..].trim_start();
        if let Some(tail) = rest.strip_prefix(name)
            && tail.trim_start().starts_with("}}")
        {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(name: &str, surfacing: Surfacing, v: Value) -> TurnValue {
        TurnValue {
            variable_id: format!("id-{name}"),
            name: name.into(),
            surfacing,
            sensitive: name == "secret",
            scope: "customer",
            value: v,
        }
    }

    #[test]
    fn references_need_the_whole_name() {
        assert!(references("Address them by ctx.first_name.", "first_name"));
        assert!(references("Plan: {{ plan }}", "plan"));
        assert!(references("{{plan}}", "plan"));
        assert!(!references("ctx.planet is not ctx.plan_b", "plan"));
        assert!(!references("{{ plans }}", "plan"));
        assert!(!references("the plan", "plan"));
        assert!(!references("İ ctx.", "plan"), "no panic at the end of text");
    }

    #[test]
    fn surfacing_decides_what_the_model_sees_and_the_trace_holds_no_values() {
        let ctx = TurnContext {
            values: vec![
                value("plan", Surfacing::Always, json!({"value": "Pro"})),
                value("first_name", Surfacing::OnReference, json!({"value": "Ada"})),
                value("tier", Surfacing::OnReference, json!({"value": "gold"})),
                value("notes", Surfacing::OperatorOnly, json!({"value": "difficult customer"})),
                value("secret", Surfacing::Always, json!({"value": "NL91ABNA"})),
            ],
            skipped: vec![("id-x".into(), "no_value")],
        };
        let block = ctx.prompt_block(&["Greet ctx.first_name by name."]);
        assert!(block.contains("ctx.plan: Pro"), "{block}");
        assert!(block.contains("ctx.first_name: Ada"), "{block}");
        assert!(!block.contains("gold"), "unreferenced on_reference stays out: {block}");
        assert!(!block.contains("difficult"), "operator_only never reaches the model: {block}");
        assert!(block.contains("NL91ABNA"), "a surfaced sensitive value reaches the model");
        let trace = ctx.trace(&["Greet ctx.first_name by name."]).to_string();
        for v in ["Pro", "Ada", "gold", "difficult", "NL91ABNA"] {
            assert!(!trace.contains(v), "no value in the trace: {trace}");
        }
        assert!(trace.contains("\"surfaced\":false") && trace.contains("no_value"), "{trace}");
        assert_eq!(TurnContext::empty().prompt_block(&[]), "");
    }
}
