//! A tool step: the agent's skill called by name with the step's bound inputs (literals, slot
//! values, context values), its outputs assigned to slots, and its result kept for the guards.

use serde_json::{Map, json};

use super::Walk;
use crate::error::Result;
use crate::routines::definition::{InputBinding, Step};

impl Walk<'_> {
    /// Calls a tool step's skill with its bound inputs and assigns its outputs.
    pub(super) fn run_tool(&mut self, step: &Step) -> Result<()> {
        let name = step.tool_ref.clone().unwrap_or_default();
        if self.outcome.is_none() {
            // a routine tool call reports its own tool name
            self.tool_name = Some(name.clone());
        }
        let mut inputs = Map::new();
        for b in &step.metadata.input_bindings {
            match b {
                InputBinding::Literal { name, value } => {
                    inputs.insert(name.clone(), value.clone());
                }
                InputBinding::VariableRef { name, variable } => {
                    if let Some(v) = self.run.variables.get(variable) {
                        inputs.insert(name.clone(), v.clone());
                    }
                }
                InputBinding::ContextVariableRef { name, context_variable } => {
                    // the turn's context value of that name (a test execution's frozen value,
                    // else the stored one for the session, customer, agent or workspace)
                    let ctx = crate::turn::context::TurnContext::resolve(
                        self.app,
                        &self.input.workspace,
                        &self.input.agent,
                        &self.input.context_scope,
                        &self.input.test_values,
                    )?;
                    if let Some(v) = ctx.values.into_iter().find(|v| v.name == *context_variable) {
                        inputs.insert(name.clone(), v.value);
                    }
                }
            }
        }
        let attempt = self.run.attempts.get(&step.stable_step_id).copied().unwrap_or(1);
        let key = format!("routine-tool:{}:{}:{attempt}", self.run.execution_id, step.stable_step_id);
        let result = crate::skills::run(self.app, &self.input.skill_call(&key), &name, &inputs)?;
        for a in &step.metadata.output_assignments {
            if let Some(v) = result["outputs"].get(&a.output).filter(|v| !v.is_null()) {
                self.run.variables.insert(a.variable.clone(), v.clone());
            }
        }
        self.trace
            .push(json!({"event": "tool", "step": step.stable_step_id, "skill": name, "status": result["status"]}));
        self.run.last_result = Some(result);
        Ok(())
    }
}
