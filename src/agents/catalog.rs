//! The read-only catalog of built-in skills (`GET /skills`): what each is, the contracts it is
//! reached by (an HTTP route or an MCP tool) and its outcomes.

use crate::auth::{Perm, Principal};
use crate::error::{Error, Result};

/// A contract a built-in skill is reached by: an HTTP route (`method` set) or an MCP tool.
#[derive(Debug)]
pub struct ContractRef {
    pub kind: &'static str,
    pub label: &'static str,
    pub method: Option<&'static str>,
    pub path: &'static str,
}

/// A built-in skill of the read-only catalog.
#[derive(Debug)]
pub struct BuiltInSkill {
    pub name: &'static str,
    pub display_name: &'static str,
    pub description: &'static str,
    pub required_capabilities: &'static [&'static str],
    pub contract_references: &'static [ContractRef],
    /// (name, status, grounded answer)
    pub outcomes: &'static [(&'static str, &'static str, Option<bool>)],
}

const fn http(label: &'static str, method: &'static str, path: &'static str) -> ContractRef {
    ContractRef { kind: "http", label, method: Some(method), path }
}

const fn mcp_tool(label: &'static str) -> ContractRef {
    ContractRef { kind: "mcp_tool", label, method: None, path: "/mcp" }
}

const fn built_in(
    name: &'static str,
    display_name: &'static str,
    description: &'static str,
    required_capabilities: &'static [&'static str],
    contract_references: &'static [ContractRef],
    outcomes: &'static [(&'static str, &'static str, Option<bool>)],
) -> BuiltInSkill {
    BuiltInSkill { name, display_name, description, required_capabilities, contract_references, outcomes }
}

const COMPLETED: &[(&str, &str, Option<bool>)] = &[("completed", "completed", None)];
const SEARCH: ContractRef = http("Search", "POST", "/api/v1/document/search");

/// The read-only catalog of built-in skills.
pub const CATALOG: &[BuiltInSkill] = &[
    built_in(
        "assistant.chat",
        "Chat",
        "Answers a conversation turn as the agent.",
        &["assistant.chat"],
        &[http("Chat", "POST", "/api/v1/chat")],
        COMPLETED,
    ),
    built_in(
        "assistant_identity",
        "Assistant identity",
        "Answers questions about who the assistant is.",
        &[],
        &[],
        COMPLETED,
    ),
    built_in(
        "clarification.answer",
        "Clarification",
        "Asks one clarifying question when a request is ambiguous.",
        &[],
        &[],
        &[("clarification_needed", "paused", None)],
    ),
    built_in(
        "direct.answer",
        "Direct answer",
        "Answers without retrieval.",
        &[],
        &[],
        &[("direct", "completed", Some(false))],
    ),
    built_in(
        "documents.delete",
        "Delete documents",
        "Deletes workspace documents.",
        &["workspace.documents.manage"],
        &[http("Delete a document", "DELETE", "/api/v1/document/{documentId}")],
        COMPLETED,
    ),
    built_in(
        "documents.ingest",
        "Ingest documents",
        "Adds documents to the workspace knowledge.",
        &["workspace.documents.manage"],
        &[http("Create a document", "POST", "/api/v1/document")],
        COMPLETED,
    ),
    built_in(
        "documents.search",
        "Search documents",
        "Hybrid search over workspace documents.",
        &["workspace.retrieval.query"],
        &[SEARCH],
        COMPLETED,
    ),
    built_in(
        "mcp.describe_capabilities",
        "Describe capabilities",
        "Lists what the MCP server offers.",
        &[],
        &[mcp_tool("describe_capabilities")],
        COMPLETED,
    ),
    built_in(
        "retrieval.answer",
        "Grounded answer",
        "Answers from the workspace's documents with citations.",
        &["workspace.retrieval.query"],
        &[http("Retrieval-only answer", "POST", "/api/v1/retrieval/answer"), mcp_tool("answer_grounded")],
        &[
            ("grounded", "completed", Some(true)),
            ("grounded_degraded", "completed", Some(true)),
            ("no_context", "completed", Some(false)),
            ("clarification_needed", "paused", None),
        ],
    ),
    built_in(
        "retrieval.context",
        "Retrieval context",
        "Returns the passages an answer would use.",
        &["workspace.retrieval.query"],
        &[],
        COMPLETED,
    ),
    built_in(
        "retrieval.search",
        "Retrieval search",
        "Searches and returns ranked passages.",
        &["workspace.retrieval.query"],
        &[SEARCH],
        COMPLETED,
    ),
    built_in("social_only", "Social reply", "Replies to greetings and thanks without retrieval.", &[], &[], COMPLETED),
];

/// The built-in skills catalog (`GET /skills`).
pub fn catalog_list(p: &Principal) -> Result<&'static [BuiltInSkill]> {
    p.require(Perm::AgentsRead)?;
    Ok(CATALOG)
}

/// One built-in skill of the catalog, by name.
pub fn catalog_get(p: &Principal, name: &str) -> Result<&'static BuiltInSkill> {
    p.require(Perm::AgentsRead)?;
    CATALOG.iter().find(|s| s.name == name).ok_or_else(|| Error::not_found("skill"))
}
