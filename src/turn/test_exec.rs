//! Test executions: private test chats against an agent's draft (frozen when the execution
//! starts, so a later edit does not move it) or its candidate/published revisions, one side per
//! revision (`compare` runs two). Their conversations are `test` conversations: never in visitor
//! history or the quality report, no handoffs or outward effects. A `seedConversationId` copies a
//! visitor conversation's messages and state into the side, leaving the source untouched.

use std::sync::Arc;

use rusqlite::{OptionalExtension, params};
use serde::Deserialize;
use serde_json::{Value, json};

use super::agent::{self, AgentConfig};
use super::{Reply, Surface, TurnInput};
use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::conversations::{self, Channel, NewConversation, NewMessage, Role, Visibility};
use crate::documents::{decode_cursor, encode_cursor};
use crate::error::{Error, ErrorCode, Result};
use crate::storage::Tx;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestValue {
    pub context_variable_id: String,
    pub value: Value,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartInput {
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub revision_ids: Option<Vec<String>>,
    #[serde(default)]
    pub seed_conversation_id: Option<String>,
    #[serde(default)]
    pub test_values: Option<Vec<TestValue>>,
    #[serde(default)]
    pub expected_draft_generation: Option<i64>,
    #[serde(default)]
    pub idempotency_key: Option<String>,
    #[serde(default)]
    pub skill_effects: Option<String>,
}

/// One side of an execution.
#[derive(Debug, Clone, serde::Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Side {
    pub label: String,
    pub revision_id: Option<String>,
    pub conversation_id: String,
}

struct Execution {
    id: String,
    agent_id: String,
    mode: String,
    sides: Vec<Side>,
    frozen_draft: Option<Value>,
    draft_generation: i64,
    seed_conversation_id: Option<String>,
    test_values: Value,
    skill_effects: String,
    created_at: String,
}

const COLS: &str = "id, agent_id, mode, sides, frozen_draft, draft_generation, seed_conversation_id, test_values, skill_effects, created_at";

fn row(r: &rusqlite::Row) -> rusqlite::Result<Execution> {
    Ok(Execution {
        id: r.get(0)?,
        agent_id: r.get(1)?,
        mode: r.get(2)?,
        sides: serde_json::from_str(&r.get::<_, String>(3)?).unwrap_or_default(),
        frozen_draft: r.get::<_, Option<String>>(4)?.and_then(|s| serde_json::from_str(&s).ok()),
        draft_generation: r.get(5)?,
        seed_conversation_id: r.get(6)?,
        test_values: serde_json::from_str(&r.get::<_, String>(7)?).unwrap_or(json!([])),
        skill_effects: r.get(8)?,
        created_at: r.get(9)?,
    })
}

fn find(c: &rusqlite::Connection, ws: &str, agent_id: &str, id: &str) -> Result<Execution> {
    c.query_row(
        &format!("SELECT {COLS} FROM test_executions WHERE id = ?1 AND agent_id = ?2 AND workspace_id = ?3"),
        params![id, agent_id, ws],
        row,
    )
    .optional()?
    .ok_or_else(|| Error::not_found("test execution"))
}

/// The view of an execution; with `transcripts`, each side's messages.
fn view(c: &rusqlite::Connection, e: &Execution, transcripts: bool) -> Result<Value> {
    let mut sides = Vec::new();
    for s in &e.sides {
        let mut v = json!({"label": s.label, "revisionId": s.revision_id, "conversationId": s.conversation_id});
        if transcripts {
            let msgs = conversations::messages_after(c, &s.conversation_id, 0, 500)?;
            v["messages"] = json!(conversations::api::messages(&msgs));
        }
        sides.push(v);
    }
    // values are frozen inputs: only their variable ids are shown (a sensitive value never leaves)
    let values: Vec<Value> = e
        .test_values
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| json!({"contextVariableId": v["contextVariableId"]}))
        .collect();
    Ok(json!({
        "id": e.id, "agentId": e.agent_id, "mode": e.mode, "sides": sides, "draftGeneration": e.draft_generation,
        "seedConversationId": e.seed_conversation_id, "testValues": values, "skillEffects": e.skill_effects,
        "createdAt": e.created_at,
    }))
}

/// What a test value's aad binds it to: its workspace, execution and variable.
fn test_value_aad(ws: &str, execution_id: &str, variable_id: &str) -> String {
    format!("test_value:{ws}:{execution_id}:{variable_id}")
}

/// A test value as the execution stores it: a sensitive variable's value sealed with the
/// deployment key (503 `encryption_not_configured` without it), others as given.
fn freeze_value(
    app: &App,
    ws: &str,
    execution_id: &str,
    var: &crate::agents::context::Variable,
    value: &Value,
) -> Result<Value> {
    if !var.sensitive() {
        return Ok(json!({"contextVariableId": var.id, "value": value}));
    }
    let key = app.config.encryption_key.as_ref().map(|k| k.expose());
    let sealed = crate::crypto::seal(key, value.to_string().as_bytes(), &test_value_aad(ws, execution_id, &var.id))?;
    Ok(
        json!({"contextVariableId": var.id, "sealed": {"nonce": hex::encode(sealed.nonce), "ciphertext": hex::encode(sealed.ciphertext)}}),
    )
}

/// The execution's test values for a turn (variable id → value), sealed ones opened.
fn thaw_values(app: &App, ws: &str, e: &Execution) -> Result<Vec<(String, Value)>> {
    let key = app.config.encryption_key.as_ref().map(|k| k.expose());
    let mut out = Vec::new();
    for v in e.test_values.as_array().into_iter().flatten() {
        let Some(id) = v["contextVariableId"].as_str() else { continue };
        let value = match v.get("sealed") {
            Some(s) => {
                let bytes = |k: &str| hex::decode(s[k].as_str().unwrap_or_default()).unwrap_or_default();
                let sealed = crate::crypto::Sealed { nonce: bytes("nonce"), ciphertext: bytes("ciphertext") };
                let plain = crate::crypto::open(key, &sealed, &test_value_aad(ws, &e.id, id))?;
                serde_json::from_slice(&plain).unwrap_or(Value::Null)
            }
            None => v["value"].clone(),
        };
        out.push((id.to_string(), value));
    }
    Ok(out)
}

fn copy_seed(tx: &Tx, ws: &str, seed: &conversations::Conversation, side_cid: &str, now: &str) -> Result<usize> {
    let msgs = conversations::messages_after(tx, &seed.id, 0, 10_000)?;
    let mut n = 0;
    for m in msgs.iter().filter(|m| matches!(m.role, Role::User | Role::Assistant)) {
        let mut meta = m.metadata.clone();
        if let Some(o) = meta.as_object_mut() {
            o.remove("turnFailure");
            o.insert("seededFrom".into(), json!(m.id));
        }
        conversations::append_message(
            tx,
            ws,
            &NewMessage {
                conversation_id: side_cid,
                role: m.role,
                source: m.source,
                content: &m.content,
                citations: m.citations.clone(),
                metadata: meta,
                trace_id: None,
                request_id: None,
            },
            now,
        )?;
        n += 1;
    }
    conversations::set_state(tx, side_cid, &seed.state, now)?;
    Ok(n)
}

/// `POST /agents/{agentId}/test-executions`: 201 with the new execution, or 200 with the one a
/// repeated `idempotencyKey` made.
pub fn start(app: &App, p: &Principal, actor: &Actor, agent_id: &str, i: StartInput) -> Result<(bool, Value)> {
    p.require(Perm::AgentsManage)?;
    let mode = i.mode.clone().unwrap_or_else(|| "single".into());
    if !["single", "compare"].contains(&mode.as_str()) {
        return Err(Error::invalid_field("mode", "mode is single or compare"));
    }
    if mode == "compare" && i.seed_conversation_id.is_some() {
        return Err(Error::invalid_field(
            "seedConversationId",
            "a compare execution cannot start from a seed conversation",
        ));
    }
    let revision_ids = i.revision_ids.clone().unwrap_or_default();
    let max = if mode == "compare" { 2 } else { 1 };
    if revision_ids.len() > max {
        return Err(Error::invalid_field(
            "revisionIds",
            format!("a {mode} execution takes at most {max} revision ids"),
        ));
    }
    let skill_effects = i.skill_effects.clone().unwrap_or_else(|| "suppressed".into());
    if !["suppressed", "allowed"].contains(&skill_effects.as_str()) {
        return Err(Error::invalid_field("skillEffects", "skillEffects is suppressed or allowed"));
    }
    let values = i.test_values.unwrap_or_default();
    if values.len() > 100 {
        return Err(Error::invalid_field("testValues", "at most 100 test values"));
    }
    if let Some(k) = &i.idempotency_key
        && (k.trim().is_empty() || k.chars().count() > 200)
    {
        return Err(Error::invalid_field("idempotencyKey", "idempotencyKey must be 1 to 200 characters"));
    }
    let ws = p.workspace_id.clone();
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let a = crate::agents::get_in(tx, &ws, agent_id)?;
        if let Some(k) = &i.idempotency_key
            && let Some(e) = tx
                .query_row(&format!("SELECT {COLS} FROM test_executions WHERE agent_id = ?1 AND idempotency_key = ?2"), params![agent_id, k], row)
                .optional()?
        {
            return Ok((false, view(tx, &e, true)?));
        }
        if let Some(g) = i.expected_draft_generation
            && g != a.draft_generation
        {
            return Err(Error::new(ErrorCode::RevisionConflict, format!("the draft is at generation {}, not {g}", a.draft_generation))
                .with_details(json!({"currentDraftGeneration": a.draft_generation})));
        }
        for rid in &revision_ids {
            crate::agents::revisions::snapshot_with_version(tx, agent_id, rid)?.ok_or_else(|| Error::not_found("revision"))?;
        }
        let id = crate::ids::new_id();
        let mut stored_values: Vec<Value> = Vec::new();
        for v in &values {
            let var = crate::agents::context::find(tx, &ws, &v.context_variable_id)?;
            stored_values.push(freeze_value(app, &ws.0, &id, &var, &v.value)?);
        }
        let seed = match &i.seed_conversation_id {
            Some(id) => {
                let c = conversations::find_in(tx, &ws.0, id, false)?;
                if c.agent_id != agent_id {
                    return Err(Error::not_found("conversation"));
                }
                Some(c)
            }
            None => None,
        };
        let published = a.published_revision_id.clone();
        let side_revisions: Vec<(String, Option<String>)> = match (mode.as_str(), revision_ids.as_slice()) {
            ("single", []) => vec![("draft".into(), None)],
            ("single", [r]) => vec![("revision".into(), Some(r.clone()))],
            ("compare", []) => vec![("draft".into(), None), ("published".into(), published)],
            ("compare", [r]) => vec![("draft".into(), None), ("revision".into(), Some(r.clone()))],
            (_, rs) => rs.iter().enumerate().map(|(k, r)| (format!("revision {}", k + 1), Some(r.clone()))).collect(),
        };
        let needs_draft = side_revisions.iter().any(|(_, r)| r.is_none());
        let frozen = if needs_draft { Some(agent::draft_snapshot(tx, &ws, agent_id)?.1) } else { None };
        let mut sides = Vec::new();
        for (label, rid) in side_revisions {
            let cid = conversations::start(
                tx,
                &NewConversation {
                    workspace_id: &ws.0,
                    agent_id,
                    revision_id: rid.as_deref(),
                    channel: Channel::Test,
                    visibility: Visibility::Test,
                    test_execution_id: Some(&id),
                    started_by: p.user_id.as_ref().map(|u| u.0.as_str()),
                },
                &now,
            )?;
            if let Some(s) = &seed {
                copy_seed(tx, &ws.0, s, &cid, &now)?;
            }
            sides.push(Side { label, revision_id: rid, conversation_id: cid });
        }
        tx.execute(
            "INSERT INTO test_executions (id, workspace_id, agent_id, mode, sides, frozen_draft, draft_generation, seed_conversation_id, test_values,
                skill_effects, idempotency_key, created_by, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13)",
            params![
                id,
                ws.0,
                agent_id,
                mode,
                serde_json::to_string(&sides)?,
                frozen.as_ref().map(|f| f.to_string()),
                a.draft_generation,
                i.seed_conversation_id,
                Value::Array(stored_values).to_string(),
                skill_effects,
                i.idempotency_key,
                p.user_id.as_ref().map(|u| u.0.clone()),
                now
            ],
        )?;
        audit::record(tx, &now, actor, Event::new("agent.test_execution.started").workspace(&ws).target("test_execution", &id).meta(json!({"agentId": agent_id, "mode": mode, "seeded": seed.is_some()})))?;
        let e = find(tx, &ws.0, agent_id, &id)?;
        Ok((true, view(tx, &e, true)?))
    })
}

pub fn list(app: &App, p: &Principal, agent_id: &str, cursor: Option<&str>, limit: usize) -> Result<Value> {
    p.require(Perm::AgentsManage)?;
    let limit = limit.clamp(1, 100);
    let after = cursor.map(decode_cursor).transpose()?;
    let (au, ai) = after.unzip();
    app.db.read(|c| {
        crate::agents::get_in(c, &p.workspace_id, agent_id)?;
        let mut st = c.prepare(&format!(
            "SELECT {COLS} FROM test_executions WHERE agent_id = ?1 AND workspace_id = ?2
             AND (?3 IS NULL OR created_at < ?3 OR (created_at = ?3 AND id < ?4)) ORDER BY created_at DESC, id DESC LIMIT ?5"
        ))?;
        let mut rows: Vec<Execution> = st.query_map(params![agent_id, p.workspace_id.0, au, ai, (limit + 1) as i64], row)?.collect::<rusqlite::Result<_>>()?;
        let more = rows.len() > limit;
        rows.truncate(limit);
        let next = if more { rows.last().map(|e| encode_cursor(&e.created_at, &e.id)) } else { None };
        let views = rows.iter().map(|e| view(c, e, false)).collect::<Result<Vec<_>>>()?;
        Ok(json!({"testExecutions": views, "nextCursor": next, "hasMore": more}))
    })
}

pub fn get(app: &App, p: &Principal, agent_id: &str, id: &str) -> Result<Value> {
    p.require(Perm::AgentsManage)?;
    app.db.read(|c| {
        crate::agents::get_in(c, &p.workspace_id, agent_id)?;
        view(c, &find(c, &p.workspace_id.0, agent_id, id)?, true)
    })
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MessageInput {
    pub message: String,
    #[serde(default)]
    pub include_debug: bool,
}

/// The turns to run for a message: one per side, each on its own revision (or the frozen draft).
pub fn prepare_message(
    app: &App,
    p: &Principal,
    agent_id: &str,
    id: &str,
    i: &MessageInput,
) -> Result<Vec<(Side, TurnInput)>> {
    p.require(Perm::AgentsManage)?;
    let message = super::check_message(&i.message)?;
    let ws = p.workspace_id.clone();
    app.db.read(|c| {
        crate::agents::get_in(c, &ws, agent_id)?;
        let e = find(c, &ws.0, agent_id, id)?;
        let test_values = thaw_values(app, &ws.0, &e)?;
        let mut out = Vec::new();
        for s in &e.sides {
            let cfg = match &s.revision_id {
                Some(rid) => agent::revision(c, agent_id, rid)?,
                None => {
                    let snap = e
                        .frozen_draft
                        .as_ref()
                        .ok_or_else(|| Error::internal_msg("test execution has no frozen draft"))?;
                    AgentConfig::from_snapshot(agent_id, None, None, snap)?
                }
            };
            out.push((
                s.clone(),
                TurnInput {
                    workspace: ws.clone(),
                    conversation_id: s.conversation_id.clone(),
                    agent: cfg,
                    message: message.clone(),
                    filter: None,
                    request_id: None,
                    surface: Surface::Test,
                    turn_id: crate::ids::new_id(),
                    include_debug: i.include_debug,
                    actor: Actor::system(),
                    context_scope: Default::default(),
                    test_values: test_values.clone(),
                },
            ));
        }
        Ok(out)
    })
}

/// Sends a message to every side of an execution, one after another.
pub async fn send(app: Arc<App>, agent_id: &str, id: &str, turns: Vec<(Side, TurnInput)>) -> Result<Value> {
    let mut results = Vec::new();
    for (side, input) in turns {
        let reply: Reply = super::execute(app.clone(), input, None).await?;
        let reply = super::api::rest(&reply);
        results.push(json!({"label": side.label, "revisionId": side.revision_id, "conversationId": side.conversation_id, "reply": reply}));
    }
    Ok(json!({"executionId": id, "agentId": agent_id, "results": results}))
}
