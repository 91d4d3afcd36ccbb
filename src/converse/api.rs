//! The wire shapes of the converse surface (shared by the REST converse routes and `/mcp`).

use serde_json::{Value, json};

use super::tools::Descriptor;
use super::updates::UpdatePage;

/// A routine tool: `{toolName, description, inputSchema, routineLineageId}`.
pub fn descriptor(d: &Descriptor) -> Value {
    json!({"toolName": d.tool_name, "description": d.description, "inputSchema": d.input_schema,
        "routineLineageId": d.routine_lineage_id})
}

/// An update page: `{messages: [{id, author, createdAt, text}], cursor, ownership: {state}}`.
pub fn page(p: &UpdatePage) -> Value {
    let messages: Vec<Value> = p
        .messages
        .iter()
        .map(|m| json!({"id": m.id, "author": m.author, "createdAt": m.created_at, "text": m.text}))
        .collect();
    json!({"messages": messages, "cursor": p.cursor, "ownership": {"state": p.ownership.as_str()}})
}

/// The one-line summary of an update page (the MCP tool's text).
pub fn page_summary(p: &UpdatePage) -> String {
    let state = p.ownership.as_str();
    match p.messages.len() {
        0 => format!("No new messages; the conversation is {state}."),
        1 => format!("1 new message; the conversation is {state}."),
        n => format!("{n} new messages; the conversation is {state}."),
    }
}

/// `get_agent_profile`: `{agent: {id, name}, description, canAnswerFrom: {documentCount, titles},
/// retrievalEnabled, humanHandoff, routineTools}`.
pub fn profile(p: &super::Profile, routine_tools: &[&str]) -> Value {
    let description = if !p.retrieval_enabled {
        format!("{} answers from its instructions only (it does not search documents).", p.name)
    } else {
        format!("{} answers questions from {} document(s) of its workspace, with citations.", p.name, p.document_count)
    };
    json!({
        "agent": {"id": p.agent_id, "name": p.name},
        "description": description,
        "canAnswerFrom": {"documentCount": p.document_count, "titles": p.titles},
        "retrievalEnabled": p.retrieval_enabled,
        "humanHandoff": p.handoff_on_miss,
        "routineTools": routine_tools,
    })
}
