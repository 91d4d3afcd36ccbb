//! Eval cases as an agent bundle carries them (beyond the spec): each case's name, assertions and
//! its snapshot's messages (role and text only: no ids, citations or retrieval result), so an
//! imported agent can be checked at once. Assertions keep the document ids they name; documents
//! do not carry across workspaces, so a case naming documents the destination lacks is reported
//! and its assertions kept for the operator to point at this workspace's documents.

use serde_json::{Value, json};

use super::assertions::{self, Assertion};
use super::{MAX_SNAPSHOT_MESSAGES, SnapMessage, Snapshot, SnapshotBody, store};
use crate::error::{Error, Result};
use crate::ids::WorkspaceId;
use crate::storage::{Conn, Tx};

/// Cases a bundle carries at most.
pub const MAX_CASES: usize = 500;
const MAX_MESSAGE_CHARS: usize = 20_000;

/// One case as a bundle carries it.
#[derive(Debug, Clone, PartialEq)]
pub struct PortableCase {
    pub name: String,
    pub assertions: Vec<Assertion>,
    /// `(role, content)`, oldest first.
    pub messages: Vec<(String, String)>,
}

/// The agent's cases as bundle entries, in creation order.
pub fn export(c: &Conn, ws: &WorkspaceId, agent_id: &str) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for case in store::cases(c, &ws.0, Some(agent_id), MAX_CASES)? {
        let Some(s) = store::snapshot(c, &ws.0, &case.snapshot_id)? else { continue };
        let messages: Vec<Value> =
            s.body.messages.iter().map(|m| json!({"role": m.role, "content": m.content})).collect();
        out.push(json!({
            "name": case.name,
            "assertions": case.assertions.iter().map(Assertion::to_json).collect::<Vec<_>>(),
            "messages": messages,
        }));
    }
    Ok(out)
}

fn bad(field: &str, message: impl Into<String>) -> Error {
    Error::invalid_field(field, message)
}

/// Reads a bundle's `evalCases` (400 naming the field for anything it cannot read).
pub fn parse(v: Option<&Value>) -> Result<Vec<PortableCase>> {
    let items = match v {
        None | Some(Value::Null) => return Ok(vec![]),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(bad("evalCases", "evalCases must be an array")),
    };
    if items.len() > MAX_CASES {
        return Err(bad("evalCases", format!("a bundle carries at most {MAX_CASES} eval cases")));
    }
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("evalCases[{i}]");
        let o = item.as_object().ok_or_else(|| bad(&at, "an eval case is an object"))?;
        if let Some(k) = o.keys().find(|k| !["name", "assertions", "messages"].contains(&k.as_str())) {
            return Err(bad(&format!("{at}.{k}"), format!("`{k}` is not a field of an eval case")));
        }
        let name = o.get("name").and_then(Value::as_str).map(str::trim).unwrap_or_default();
        if name.is_empty() || name.chars().count() > 200 {
            return Err(bad(&format!("{at}.name"), "name must be 1 to 200 characters"));
        }
        let assertions = assertions::parse_list(o.get("assertions").unwrap_or(&json!([]))).map_err(|e| {
            let field = e.details.as_ref().and_then(|d| d["field"].as_str()).unwrap_or("assertions").to_string();
            bad(&format!("{at}.{field}"), e.message)
        })?;
        let raw = o
            .get("messages")
            .and_then(Value::as_array)
            .ok_or_else(|| bad(&format!("{at}.messages"), "messages is required (an array)"))?;
        if raw.is_empty() || raw.len() > MAX_SNAPSHOT_MESSAGES {
            return Err(bad(&format!("{at}.messages"), format!("messages takes 1 to {MAX_SNAPSHOT_MESSAGES} entries")));
        }
        let mut messages = Vec::new();
        for (j, m) in raw.iter().enumerate() {
            let field = format!("{at}.messages[{j}]");
            let role = m["role"].as_str().filter(|r| *r == "user" || *r == "assistant");
            let content = m["content"].as_str();
            match (role, content) {
                (Some(r), Some(c)) if c.chars().count() <= MAX_MESSAGE_CHARS => {
                    messages.push((r.to_string(), c.to_string()))
                }
                (None, _) => return Err(bad(&format!("{field}.role"), "role is user or assistant")),
                _ => {
                    return Err(bad(
                        &format!("{field}.content"),
                        format!("content is a string of at most {MAX_MESSAGE_CHARS} characters"),
                    ));
                }
            }
        }
        if !messages.iter().any(|(r, _)| r == "user") {
            return Err(bad(&format!("{at}.messages"), "an eval case needs a user message to replay"));
        }
        out.push(PortableCase { name: name.to_string(), assertions, messages });
    }
    Ok(out)
}

/// Documents an assertion names.
fn documents(a: &Assertion) -> Vec<&str> {
    match a {
        Assertion::IncludesDocument { document_id }
        | Assertion::ExcludesDocument { document_id }
        | Assertion::TopKIncludesDocument { document_id, .. }
        | Assertion::ChunkMetadata { document_id, .. }
        | Assertion::CitesDocument { document_id } => vec![document_id],
        Assertion::DocumentOrder { document_ids } => document_ids.iter().map(String::as_str).collect(),
        _ => vec![],
    }
}

/// Writes the cases for the imported agent (snapshots `messages_only`, cases `pending`); returns
/// the cases whose assertions name documents this workspace does not have, by index.
pub fn import(
    tx: &Tx,
    ws: &WorkspaceId,
    agent_id: &str,
    import_id: &str,
    cases: &[PortableCase],
    now: &str,
) -> Result<Vec<usize>> {
    let mut missing = Vec::new();
    for (i, p) in cases.iter().enumerate() {
        let stamp = |k: usize| format!("{now}#{k}");
        let messages = p
            .messages
            .iter()
            .enumerate()
            .map(|(k, (role, content))| SnapMessage {
                id: crate::ids::new_id(),
                role: role.clone(),
                content: content.clone(),
                created_at: stamp(k),
                citations: None,
                answer_segments: None,
            })
            .collect();
        let s = Snapshot {
            id: crate::ids::new_id(),
            workspace_id: ws.0.clone(),
            agent_id: agent_id.to_string(),
            source_conversation_id: format!("bundle-import:{import_id}"),
            source_message_id: None,
            fidelity: "messages_only".into(),
            body: SnapshotBody { messages, ..Default::default() },
            captured_at: now.to_string(),
            captured_by: None,
        };
        store::insert_snapshot(tx, &s)?;
        let mut c = super::new_case(&s, p.name.clone(), p.assertions.clone(), now);
        c.question = s.question().map(|(q, _)| q);
        store::insert_case(tx, &c)?;
        let mut absent = false;
        for d in p.assertions.iter().flat_map(documents) {
            if !crate::documents::website::document_exists(tx, ws, d)? {
                absent = true;
            }
        }
        if absent {
            missing.push(i);
        }
    }
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_reads_cases_and_names_what_is_wrong() {
        let ok = json!([{"name": "Hours", "assertions": [{"type": "answer_contains", "pattern": "nine"}],
            "messages": [{"role": "user", "content": "When?"}, {"role": "assistant", "content": "At nine."}]}]);
        let cases = parse(Some(&ok)).unwrap();
        assert_eq!(cases[0].messages.len(), 2);
        assert!(parse(None).unwrap().is_empty());
        let field = |v: Value| parse(Some(&v)).unwrap_err().details.unwrap()["field"].as_str().unwrap().to_string();
        assert_eq!(field(json!({})), "evalCases");
        assert_eq!(field(json!([{"name": "", "messages": []}])), "evalCases[0].name");
        assert_eq!(
            field(
                json!([{"name": "x", "assertions": [{"type": "retrieval_top_k_includes_document", "documentId": "0190a0b0-0000-7000-8000-000000000001", "k": 0}], "messages": [{"role": "user", "content": "q"}]}])
            ),
            "evalCases[0].assertions[0].k"
        );
        assert_eq!(
            field(json!([{"name": "x", "messages": [{"role": "system", "content": "q"}]}])),
            "evalCases[0].messages[0].role"
        );
        assert_eq!(
            field(json!([{"name": "x", "messages": [{"role": "assistant", "content": "a"}]}])),
            "evalCases[0].messages"
        );
        assert_eq!(
            field(json!([{"name": "x", "messages": [{"role": "user", "content": "q"}], "id": 1}])),
            "evalCases[0].id"
        );
    }
}
