//! Test executions: private test chats against an agent's draft (frozen when the execution
//! starts, so a later edit does not move it) or its candidate/published revisions, one side per
//! revision (`compare` runs two). Their conversations are `test` conversations: never in visitor
//! history or the quality report, no handoffs or outward effects. A `seedConversationId` copies a
//! visitor conversation's messages and state into the side, leaving the source untouched.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{Reply, StreamEvent, Surface, TurnInput};
use crate::agents::config::{self as agent, AgentConfig};
use crate::agents::revisions::Snapshot;
use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::conversations::{self, Channel, NewConversation, NewMessage, Role, Visibility};
use crate::documents::{decode_cursor, encode_cursor};
use crate::error::{Error, ErrorCode, Result};
use crate::storage::{Conn, Tx};

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

/// A test execution as stored.
#[derive(Debug, Clone)]
pub struct Execution {
    pub id: String,
    pub agent_id: String,
    pub mode: String,
    pub sides: Vec<Side>,
    pub frozen_draft: Option<Snapshot>,
    pub draft_generation: i64,
    pub seed_conversation_id: Option<String>,
    /// The frozen test values: `[{contextVariableId, value | sealed}]`.
    pub test_values: Value,
    pub skill_effects: String,
    pub created_at: String,
}

fn find(c: &Conn, ws: &str, agent_id: &str, id: &str) -> Result<Execution> {
    super::store::execution(c, ws, agent_id, id)?.ok_or_else(|| Error::not_found("test execution"))
}

/// An execution with, per side, its conversation's messages (when asked for).
#[derive(Debug, Clone)]
pub struct ExecutionDetail {
    pub execution: Execution,
    pub transcripts: Option<Vec<Vec<conversations::Message>>>,
}

fn detail(c: &Conn, e: Execution, transcripts: bool) -> Result<ExecutionDetail> {
    let transcripts = if transcripts {
        let per_side = e.sides.iter().map(|s| conversations::messages_after(c, &s.conversation_id, 0, 500));
        Some(per_side.collect::<Result<Vec<_>>>()?)
    } else {
        None
    };
    Ok(ExecutionDetail { execution: e, transcripts })
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

/// A start request, checked.
struct Plan {
    mode: String,
    revision_ids: Vec<String>,
    skill_effects: String,
    values: Vec<TestValue>,
    seed_conversation_id: Option<String>,
    expected_draft_generation: Option<i64>,
    idempotency_key: Option<String>,
}

fn plan(i: StartInput) -> Result<Plan> {
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
    Ok(Plan {
        mode,
        revision_ids,
        skill_effects,
        values,
        seed_conversation_id: i.seed_conversation_id,
        expected_draft_generation: i.expected_draft_generation,
        idempotency_key: i.idempotency_key,
    })
}

/// The sides a plan runs: `(label, revision)`, where no revision is the frozen draft.
fn side_revisions(plan: &Plan, published: Option<String>) -> Vec<(String, Option<String>)> {
    match (plan.mode.as_str(), plan.revision_ids.as_slice()) {
        ("single", []) => vec![("draft".into(), None)],
        ("single", [r]) => vec![("revision".into(), Some(r.clone()))],
        ("compare", []) => vec![("draft".into(), None), ("published".into(), published)],
        ("compare", [r]) => vec![("draft".into(), None), ("revision".into(), Some(r.clone()))],
        (_, rs) => rs.iter().enumerate().map(|(k, r)| (format!("revision {}", k + 1), Some(r.clone()))).collect(),
    }
}

/// Opens one test conversation per side, seeded when asked.
fn open_sides(
    tx: &Tx,
    p: &Principal,
    agent_id: &str,
    execution_id: &str,
    side_revisions: Vec<(String, Option<String>)>,
    seed: Option<&conversations::Conversation>,
    now: &str,
) -> Result<Vec<Side>> {
    let ws = &p.workspace_id.0;
    let mut sides = Vec::new();
    for (label, rid) in side_revisions {
        let conversation = NewConversation {
            workspace_id: ws,
            agent_id,
            revision_id: rid.as_deref(),
            channel: Channel::Test,
            visibility: Visibility::Test,
            test_execution_id: Some(execution_id),
            started_by: p.user_id.as_ref().map(|u| u.0.as_str()),
            public_session_id: None,
        };
        let cid = conversations::start(tx, &conversation, now)?;
        if let Some(s) = seed {
            copy_seed(tx, ws, s, &cid, now)?;
        }
        sides.push(Side { label, revision_id: rid, conversation_id: cid });
    }
    Ok(sides)
}

/// The seed conversation, which must be one of this agent's.
fn seed_of(tx: &Tx, ws: &str, agent_id: &str, plan: &Plan) -> Result<Option<conversations::Conversation>> {
    let Some(id) = &plan.seed_conversation_id else { return Ok(None) };
    let c = conversations::find_in(tx, ws, id, false)?;
    if c.agent_id != agent_id {
        return Err(Error::not_found("conversation"));
    }
    Ok(Some(c))
}

/// `POST /agents/{agentId}/test-executions`: 201 with the new execution, or 200 with the one a
/// repeated `idempotencyKey` made.
pub fn start(
    app: &App,
    p: &Principal,
    actor: &Actor,
    agent_id: &str,
    i: StartInput,
) -> Result<(bool, ExecutionDetail)> {
    p.require(Perm::AgentsManage)?;
    let plan = plan(i)?;
    let ws = p.workspace_id.clone();
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let a = crate::agents::get_in(tx, &ws, agent_id)?;
        if let Some(k) = &plan.idempotency_key
            && let Some(e) = super::store::execution_by_key(tx, agent_id, k)?
        {
            return Ok((false, detail(tx, e, true)?));
        }
        if let Some(g) = plan.expected_draft_generation
            && g != a.draft_generation
        {
            return Err(Error::new(
                ErrorCode::RevisionConflict,
                format!("the draft is at generation {}, not {g}", a.draft_generation),
            )
            .with_details(json!({"currentDraftGeneration": a.draft_generation})));
        }
        for rid in &plan.revision_ids {
            crate::agents::revisions::snapshot_with_version(tx, agent_id, rid)?
                .ok_or_else(|| Error::not_found("revision"))?;
        }
        let id = crate::ids::new_id();
        let mut stored_values: Vec<Value> = Vec::new();
        for v in &plan.values {
            let var = crate::agents::context::find(tx, &ws, &v.context_variable_id)?;
            stored_values.push(freeze_value(app, &ws.0, &id, &var, &v.value)?);
        }
        let seed = seed_of(tx, &ws.0, agent_id, &plan)?;
        let sides = side_revisions(&plan, a.published_revision_id.clone());
        let needs_draft = sides.iter().any(|(_, r)| r.is_none());
        let frozen = if needs_draft { Some(agent::draft_snapshot(tx, &ws, agent_id)?.1) } else { None };
        let sides = open_sides(tx, p, agent_id, &id, sides, seed.as_ref(), &now)?;
        let e = Execution {
            id: id.clone(),
            agent_id: agent_id.to_string(),
            mode: plan.mode.clone(),
            sides,
            frozen_draft: frozen,
            draft_generation: a.draft_generation,
            seed_conversation_id: plan.seed_conversation_id.clone(),
            test_values: Value::Array(stored_values),
            skill_effects: plan.skill_effects.clone(),
            created_at: now.clone(),
        };
        let by = p.user_id.as_ref().map(|u| u.0.as_str());
        super::store::insert_execution(tx, &ws, &e, plan.idempotency_key.as_deref(), by)?;
        let meta = json!({"agentId": agent_id, "mode": plan.mode, "seeded": seed.is_some()});
        let ev = Event::new("agent.test_execution.started").workspace(&ws).target("test_execution", &id);
        audit::record(tx, &now, actor, ev.meta(meta))?;
        Ok((true, detail(tx, find(tx, &ws.0, agent_id, &id)?, true)?))
    })
}

/// A page of executions, newest first.
#[derive(Debug, Clone)]
pub struct ExecutionPage {
    pub executions: Vec<ExecutionDetail>,
    pub next_cursor: Option<String>,
    pub has_more: bool,
}

pub fn list(app: &App, p: &Principal, agent_id: &str, cursor: Option<&str>, limit: usize) -> Result<ExecutionPage> {
    p.require(Perm::AgentsManage)?;
    let limit = limit.clamp(1, 100);
    let after = cursor.map(decode_cursor).transpose()?;
    app.db.read(|c| {
        crate::agents::get_in(c, &p.workspace_id, agent_id)?;
        let mut rows = super::store::executions(c, &p.workspace_id, agent_id, after.as_ref(), limit + 1)?;
        let has_more = rows.len() > limit;
        rows.truncate(limit);
        let next_cursor = if has_more { rows.last().map(|e| encode_cursor(&e.created_at, &e.id)) } else { None };
        let executions = rows.into_iter().map(|e| ExecutionDetail { execution: e, transcripts: None }).collect();
        Ok(ExecutionPage { executions, next_cursor, has_more })
    })
}

pub fn get(app: &App, p: &Principal, agent_id: &str, id: &str) -> Result<ExecutionDetail> {
    p.require(Perm::AgentsManage)?;
    app.db.read(|c| {
        crate::agents::get_in(c, &p.workspace_id, agent_id)?;
        detail(c, find(c, &p.workspace_id.0, agent_id, id)?, true)
    })
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MessageInput {
    pub message: String,
    #[serde(default)]
    pub include_debug: bool,
    /// Stream each side's turn as server-sent events (the route decides the wire form).
    #[serde(default)]
    pub stream: bool,
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
                    invocation: None,
                },
            ));
        }
        Ok(out)
    })
}

/// What a streamed test message emits, side after side, ending with `Finished` or `Failed`.
#[derive(Debug)]
pub enum TestEvent {
    /// A side starts its turn.
    Side(Side),
    /// The current side's turn progressed (status or chunk).
    Turn(StreamEvent),
    /// The current side's turn finished.
    Replied(Side, Box<Reply>),
    /// Every side replied.
    Finished(Vec<(Side, Reply)>),
    /// A side's turn failed or was superseded; later sides did not run.
    Failed(super::TurnError),
}

/// Sends a message to every side of an execution, one after another, streaming each turn's
/// progress down `tx` and ending with `Finished` or `Failed`.
pub async fn send_streaming(
    app: Arc<App>,
    turns: Vec<(Side, TurnInput)>,
    tx: tokio::sync::mpsc::UnboundedSender<TestEvent>,
) {
    let mut results = Vec::new();
    for (side, input) in turns {
        let _ = tx.send(TestEvent::Side(side.clone()));
        let (turn_tx, mut turn_rx) = tokio::sync::mpsc::unbounded_channel();
        let run = tokio::spawn(super::execute(app.clone(), input, Some(turn_tx)));
        while let Some(ev) = turn_rx.recv().await {
            let _ = tx.send(TestEvent::Turn(ev));
        }
        let reply = match run.await {
            Ok(Ok(reply)) => reply,
            Ok(Err(e)) => {
                let _ = tx.send(TestEvent::Failed(e));
                return;
            }
            Err(e) => {
                let _ = tx.send(TestEvent::Failed(Error::internal_msg(format!("test turn task failed: {e}")).into()));
                return;
            }
        };
        let _ = tx.send(TestEvent::Replied(side.clone(), Box::new(reply.clone())));
        results.push((side, reply));
    }
    let _ = tx.send(TestEvent::Finished(results));
}

/// Sends a message to every side of an execution, one after another.
pub async fn send(app: Arc<App>, turns: Vec<(Side, TurnInput)>) -> Result<Vec<(Side, Reply)>> {
    let mut results = Vec::new();
    for (side, input) in turns {
        let reply: Reply = super::execute(app.clone(), input, None).await?;
        results.push((side, reply));
    }
    Ok(results)
}
