//! `mcp_tool` skills: the skill's tool called on its external MCP server
//! (`delivery::mcp_client`, behind the SSRF guard) with its fixed parameters and the caller's
//! inputs. In a test execution nothing is sent.

use serde_json::{Value, json};

use super::{Call, SkillInputs, ToolResult, failed};
use crate::agents::skills::Skill;
use crate::app::App;
use crate::error::Result;

/// An `mcp_tool` skill: calls its tool on its MCP server with the bound inputs; outputs the
/// tool's text (`answer`) and structured content (`result`). In a test execution nothing is sent.
pub(super) fn call(app: &App, c: &Call, skill: &Skill, inputs: &SkillInputs) -> Result<ToolResult> {
    let name = skill.name.as_str();
    if c.simulate {
        return Ok(json!({"status": "completed", "outputs": {"skill": name, "simulated": true}}));
    }
    let Some(tool) = skill.config.get("toolName").and_then(Value::as_str) else {
        return Ok(failed(name, "no_tool"));
    };
    let Some((url, credential)) = crate::agents::skills::open_mcp_server(app, &skill.agent_id, &skill.config)? else {
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
