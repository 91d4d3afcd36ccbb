//! Tool steps: a routine step that calls one of the agent's skills by name. Retrieval skills
//! answer from the workspace's documents; `notify` and `webhook_call` deliver through the outbox
//! (idempotent per routine execution and step entry); `mcp_tool` calls its tool on an external MCP
//! server (`delivery::mcp_client`); other capabilities report `failed` with the reason
//! `no_executor` until their connectors exist. The result is `{status, outputs}`.

use serde_json::{Value, json};

use crate::delivery::skills::SkillInputs;

use crate::app::App;
use crate::error::Result;
use crate::models::chat::Cancel;
use crate::turn::{TurnInput, TurnModels, retrieval};

/// A tool step's result: `{status, outputs}`, free-form JSON (each skill has its own outputs).
pub type ToolResult = Value;

fn failed(skill: &str, reason: &str) -> ToolResult {
    json!({"status": "failed", "outputs": {"skill": skill, "reason": reason}})
}

/// Calls skill `name` with `inputs`; `key` makes its deliveries idempotent.
pub fn call(app: &App, input: &TurnInput, name: &str, inputs: &SkillInputs, key: &str) -> Result<ToolResult> {
    let Some(skill) = input.agent.skill(name).filter(|s| s.enabled) else {
        return Ok(failed(name, "unknown_skill"));
    };
    match skill.capability.as_str() {
        "retrieve" => retrieve(app, input, name, inputs),
        "notify" | "webhook_call" | "email" | "slack_post" => {
            if input.surface == crate::turn::Surface::Test {
                return Ok(json!({"status": "completed", "outputs": {"skill": name, "simulated": true}}));
            }
            let s = crate::agents::skills::Skill {
                id: skill.id.clone(),
                agent_id: input.agent.agent_id.clone(),
                name: skill.name.clone(),
                capability: skill.capability.clone(),
                target: skill.target.clone(),
                config: skill.config.clone(),
                invocation_mode: skill.invocation_mode.clone(),
                enabled: skill.enabled,
                created_at: String::new(),
                updated_at: String::new(),
            };
            let r = crate::delivery::skills::invoke(
                app,
                &input.workspace.0,
                &s,
                inputs,
                Some(&input.conversation_id),
                key,
            )?;
            let status = match r.outcome {
                "delivered" | "sent" | "posted" | "drafted" => "completed",
                _ => "failed",
            };
            Ok(json!({"status": status, "outputs": {"skill": name, "outcome": r.outcome, "deliveryIds": r.delivery_ids,
                       "missingInputs": r.missing_inputs, "reason": r.reason}}))
        }
        "mcp_tool" => mcp_tool(app, input, skill, inputs),
        _ => Ok(failed(name, "no_executor")),
    }
}

/// An `mcp_tool` skill: calls its tool on its MCP server with the bound inputs; outputs the
/// tool's text (`answer`) and structured content (`result`). In a test execution nothing is sent.
fn mcp_tool(
    app: &App,
    input: &TurnInput,
    skill: &crate::turn::agent::SkillSnap,
    inputs: &SkillInputs,
) -> Result<ToolResult> {
    let name = skill.name.as_str();
    if input.surface == crate::turn::Surface::Test {
        return Ok(json!({"status": "completed", "outputs": {"skill": name, "simulated": true}}));
    }
    let Some(tool) = skill.config.get("toolName").and_then(Value::as_str) else {
        return Ok(failed(name, "no_tool"));
    };
    let Some((url, credential)) = crate::agents::skills::open_mcp_server(app, &input.agent.agent_id, &skill.config)?
    else {
        return Ok(failed(name, "no_server"));
    };
    // the skill's fixed parameters, then the step's inputs
    let mut args: serde_json::Map<String, Value> =
        skill.config.get("boundParams").and_then(Value::as_object).cloned().unwrap_or_default();
    args.extend(inputs.iter().map(|(k, v)| (k.clone(), v.clone())));
    let called = tokio::runtime::Handle::current().block_on(crate::delivery::mcp_client::call_tool(
        app,
        &url,
        credential.as_deref(),
        tool,
        args,
    ));
    match called {
        Ok(r) if !r.is_error => Ok(json!({"status": "completed", "outputs": {"skill": name, "tool": tool,
            "answer": r.structured.as_ref().and_then(|s| s["answer"]["text"].as_str()).unwrap_or(&r.text),
            "result": r.structured}})),
        Ok(r) => Ok(json!({"status": "failed", "outputs": {"skill": name, "tool": tool, "reason": "tool_error",
            "error": r.structured}})),
        Err(e) => {
            tracing::warn!(skill = %name, code = e.code.as_str(), "mcp_tool call failed");
            Ok(failed(name, "server_unreachable"))
        }
    }
}

/// A retrieval skill: answers `query` (the input of that name, else the visitor's message) from
/// the documents; outputs `answer`, `resultCount`, `topTitle`.
fn retrieve(app: &App, input: &TurnInput, name: &str, inputs: &SkillInputs) -> Result<ToolResult> {
    let query =
        inputs.get("query").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| input.message.clone());
    let settings = retrieval::Settings::for_agent(&input.agent);
    let models = TurnModels::resolve(app, &input.workspace, &input.agent)?;
    let cancel = Cancel::new();
    let r = retrieval::run(app, &input.workspace, &settings, &models.helpers, &query, &[], None, &cancel)?;
    if r.hits.is_empty() {
        return Ok(json!({"status": "completed", "outputs": {"skill": name, "answer": null, "resultCount": 0}}));
    }
    let composed = crate::turn::answer::compose_answer(&models, &input.agent, &query, &r.hits, &cancel)?;
    Ok(json!({"status": "completed", "outputs": {
        "skill": name, "answer": composed.text, "resultCount": r.hits.len(), "topTitle": r.hits[0].title,
    }}))
}
