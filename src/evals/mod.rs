//! Evals: operators freeze a real conversation up to one answer as a *snapshot*, turn it into a
//! *case* with assertions, and *run* it again against the current corpus and settings (or a
//! candidate revision, or overrides) to see whether the answer still holds.
//!
//! Typed commands in, typed records out: snapshots and cases here, replaying one case in
//! `replay.rs`, suites (a run over many cases, repeats, comparisons of two revisions, the
//! `eval.suite` job) in `suite.rs`, the nine assertion types in `assertions.rs`, the `llm_judge`
//! call in `judge.rs`, the CI gate's client in `gate.rs`; SQL in the private `store.rs`, wire
//! shapes in `api.rs`.

pub mod api;
pub mod assertions;
pub mod gate;

pub mod judge;
pub mod portable;
pub mod replay;
mod store;
pub mod suite;

use serde_json::{Value, json};

use crate::agents::config::AgentConfig;
use crate::agents::revisions;
use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::conversations::{self, Role};
use crate::error::{Error, Result};
use crate::ids::WorkspaceId;
use crate::storage::{Conn, Tx};
pub use api::{OriginalAgent, SnapChunk, SnapMessage, SnapshotBody};
pub use assertions::Assertion;

pub const MODES: [&str; 2] = ["retrieval_only", "full_assistant"];
const MAX_NAME: usize = 200;
/// Messages a snapshot keeps at most (the latest, up to the answer).
const MAX_SNAPSHOT_MESSAGES: usize = 200;

/// A frozen conversation and what stood behind one answer.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub id: String,
    pub workspace_id: String,
    pub agent_id: String,
    pub source_conversation_id: String,
    pub source_message_id: Option<String>,
    /// `full` when the instruction block, model, retrieval settings, agent configuration and
    /// retrieval result were all captured; else `messages_only`.
    pub fidelity: String,
    pub body: SnapshotBody,
    pub captured_at: String,
    pub captured_by: Option<String>,
}

impl Snapshot {
    pub fn is_full(&self) -> bool {
        self.fidelity == "full"
    }

    /// The question a replay asks (the last user message) and the history before it.
    pub fn question(&self) -> Option<(String, Vec<(String, String)>)> {
        let msgs = &self.body.messages;
        let at = msgs.iter().rposition(|m| m.role == "user")?;
        let history = msgs[..at]
            .iter()
            .filter(|m| !m.content.trim().is_empty())
            .map(|m| (m.role.clone(), m.content.clone()))
            .collect();
        Some((msgs[at].content.clone(), history))
    }
}

/// A case: a snapshot, a name, and what must hold when it runs again.
#[derive(Debug, Clone)]
pub struct Case {
    pub id: String,
    pub workspace_id: String,
    pub snapshot_id: String,
    pub agent_id: String,
    pub source_message_id: Option<String>,
    pub name: String,
    pub assertions: Vec<Assertion>,
    /// `pending` (never scored), `passing`, `failing` or `error`.
    pub status: String,
    pub last_run_id: Option<String>,
    /// The question the snapshot replays (for lists).
    pub question: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// One run of a case.
#[derive(Debug, Clone)]
pub struct Run {
    pub id: String,
    pub workspace_id: String,
    pub snapshot_id: String,
    pub case_id: Option<String>,
    pub suite_id: Option<String>,
    pub mode: String,
    pub revision_id: Option<String>,
    pub overrides: Value,
    pub resolved_config: Value,
    pub observed_output: Value,
    pub assertions: Value,
    /// `pass`, `fail`, `error` or `recorded` (no assertions).
    pub status: String,
    pub outcome_reason: Option<String>,
    pub verdicts: Value,
    pub started_at: String,
    pub completed_at: Option<String>,
}

/// A run over many cases.
#[derive(Debug, Clone)]
pub struct Suite {
    pub id: String,
    pub workspace_id: String,
    pub agent_id: Option<String>,
    pub comparison_id: Option<String>,
    /// In a comparison: `candidate` or `published`.
    pub side: Option<String>,
    pub revision_id: Option<String>,
    pub mode: String,
    pub repeat: u32,
    pub pass_threshold: u32,
    pub case_ids: Vec<String>,
    /// `queued`, `running`, `completed` or `failed`.
    pub status: String,
    pub done: i64,
    pub total: i64,
    /// Per case: `{caseId, name, status, runIds, passes, repeats, flaky, reason}`.
    pub results: Vec<Value>,
    /// The workspace summary when the suite finished.
    pub summary: Option<Value>,
    pub error: Option<String>,
    pub created_at: String,
    pub completed_at: Option<String>,
}

impl Suite {
    pub fn active(&self) -> bool {
        matches!(self.status.as_str(), "queued" | "running")
    }

    /// Counts over this suite's own results.
    pub fn run_summary(&self) -> Value {
        let n = |s: &str| self.results.iter().filter(|r| r["status"] == s).count();
        let (pass, fail, error) = (n("pass"), n("fail"), n("error"));
        let flaky = self.results.iter().filter(|r| r["flaky"] == true).count();
        let scored = pass + fail + error;
        let rate = if scored == 0 { Value::Null } else { json!(pass as f64 / scored as f64) };
        json!({"cases": self.results.len(), "pass": pass, "fail": fail, "error": error, "flaky": flaky, "passRate": rate})
    }
}

/// The workspace's eval summary: cases without assertions are `unscored` and left out of the
/// pass rate; `pending` cases have assertions but no run yet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub total: i64,
    pub scored: i64,
    pub passing: i64,
    pub failing: i64,
    pub error: i64,
    pub pending: i64,
    pub unscored: i64,
}

impl Summary {
    /// passing / scored, or none when nothing is scored.
    pub fn pass_rate(&self) -> Option<f64> {
        (self.scored > 0).then(|| self.passing as f64 / self.scored as f64)
    }
}

pub fn summary_in(c: &Conn, ws: &str, agent_id: Option<&str>) -> Result<Summary> {
    store::summary(c, ws, agent_id)
}

/// `GET /evals/summary`.
pub fn summary(app: &App, p: &Principal, agent_id: Option<&str>) -> Result<Summary> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| summary_in(c, &p.workspace_id.0, agent_id))
}

/// The instruction block an agent configuration composes: its custom instruction, then each
/// enabled directive as "when … then …".
pub fn instruction_block(agent: &AgentConfig) -> String {
    let mut out = agent.settings.custom_instruction.trim().to_string();
    for d in agent.directives.iter().filter(|d| d.body.enabled) {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!(
            "- {}: when {} then {}",
            d.name,
            d.body.condition.description.as_deref().unwrap_or(&d.body.condition.kind).trim(),
            d.body.action.trim()
        ));
    }
    out
}

/// Freezes a conversation up to one assistant answer (the given one, else the latest).
fn capture(app: &App, c: &Conn, ws: &WorkspaceId, conversation_id: &str, message_id: Option<&str>) -> Result<Snapshot> {
    let conv = conversations::find_in(c, &ws.0, conversation_id, true)?;
    // only the messages up to the answer, and at most the last MAX_SNAPSHOT_MESSAGES of them
    let msgs = match message_id {
        Some(id) => {
            let (cid, seq) =
                conversations::message_position(c, &ws.0, id)?.ok_or_else(|| Error::not_found("message"))?;
            if cid != conv.id {
                return Err(Error::not_found("message"));
            }
            let from = (seq - MAX_SNAPSHOT_MESSAGES as i64).max(0);
            conversations::messages_after(c, &conv.id, from, MAX_SNAPSHOT_MESSAGES)?
        }
        None => conversations::last_messages(c, &conv.id, MAX_SNAPSHOT_MESSAGES)?,
    };
    let target = match message_id {
        Some(id) => {
            let m = msgs.iter().position(|m| m.id == id).ok_or_else(|| Error::not_found("message"))?;
            if msgs[m].role != Role::Assistant {
                return Err(Error::invalid_field("messageId", "messageId must name an assistant message"));
            }
            m
        }
        None => msgs.iter().rposition(|m| m.role == Role::Assistant).ok_or_else(|| {
            Error::invalid_field("conversationId", "the conversation has no assistant answer to freeze")
        })?,
    };
    let answer = &msgs[target];
    let messages: Vec<SnapMessage> = msgs[..=target]
        .iter()
        .map(|m| {
            let assistant = m.role == Role::Assistant;
            SnapMessage {
                id: m.id.clone(),
                role: m.role.as_str().to_string(),
                content: m.content.clone(),
                created_at: m.created_at.clone(),
                citations: assistant.then(|| m.citations.clone()),
                answer_segments: assistant.then(|| m.metadata["segments"].clone()).filter(|s| !s.is_null()),
            }
        })
        .collect();
    let mut body = SnapshotBody { messages, ..Default::default() };
    let trace = match &answer.trace_id {
        Some(t) => crate::turn::trace::find(c, ws, t)?.and_then(|r| r.trace),
        None => None,
    };
    let stage = |id: &str| -> Option<&Value> { trace.as_ref()?["stages"].as_array()?.iter().find(|s| s["id"] == id) };
    if let Some(compose) = stage("compose") {
        let out = &compose["outputs"];
        body.original_model_id = match (out["provider"].as_str(), out["model"].as_str()) {
            (Some(p), Some(m)) => Some(format!("{p}/{m}")),
            (None, Some(m)) => Some(m.to_string()),
            _ => Some("builtin/extractive".to_string()),
        };
    }
    if let Some(r) = stage("retrieval_fanout") {
        let chunks = r["outputs"]["candidates"].as_array().cloned().unwrap_or_default();
        body.original_retrieval_result = Some(
            chunks
                .iter()
                .enumerate()
                .map(|(i, h)| SnapChunk {
                    chunk_id: h["chunkId"].as_str().unwrap_or_default().to_string(),
                    document_id: h["documentId"].as_str().unwrap_or_default().to_string(),
                    title: h["title"].as_str().unwrap_or_default().to_string(),
                    rank: i + 1,
                    similarity: h["score"].as_f64(),
                })
                .collect(),
        );
    }
    let revision = conv
        .revision_id
        .as_deref()
        .map(|rid| revisions::snapshot_with_version(c, &conv.agent_id, rid))
        .transpose()?
        .flatten();
    if let (Some(rid), Some((version, snap))) = (conv.revision_id.as_ref(), revision) {
        let cfg = AgentConfig::from_snapshot(&conv.agent_id, Some(rid.clone()), version, &snap)?;
        let settings = crate::turn::retrieval::Settings::for_agent(&cfg);
        body.original_instruction_block = Some(instruction_block(&cfg));
        body.original_retrieval_settings = Some(replay::settings_json(&settings));
        body.original_agent =
            Some(OriginalAgent { agent_id: conv.agent_id.clone(), revision_id: rid.clone(), version, snapshot: snap });
    }
    let has_question = body.messages.iter().any(|m| m.role == "user");
    let full = has_question
        && trace.is_some()
        && body.original_agent.is_some()
        && body.original_model_id.is_some()
        && body.original_retrieval_result.is_some();
    Ok(Snapshot {
        id: crate::ids::new_id(),
        workspace_id: ws.0.clone(),
        agent_id: conv.agent_id.clone(),
        source_conversation_id: conv.id.clone(),
        source_message_id: Some(answer.id.clone()),
        fidelity: if full { "full" } else { "messages_only" }.to_string(),
        body,
        captured_at: rfc3339(app.clock.now()),
        captured_by: None,
    })
}

fn write_snapshot(tx: &Tx, p: &Principal, actor: &Actor, mut s: Snapshot) -> Result<Snapshot> {
    s.captured_by = p.user_id.as_ref().map(|u| u.0.clone());
    store::insert_snapshot(tx, &s)?;
    let meta = json!({"fidelity": s.fidelity, "messages": s.body.messages.len()});
    let ev = Event::new("eval.snapshot.created").workspace(&p.workspace_id).target("eval_snapshot", &s.id);
    audit::record(tx, &s.captured_at, actor, ev.meta(meta))?;
    Ok(s)
}

/// `POST /evals/snapshots`.
pub fn create_snapshot(
    app: &App,
    p: &Principal,
    actor: &Actor,
    conversation_id: &str,
    message_id: Option<&str>,
) -> Result<Snapshot> {
    p.require(Perm::AgentsManage)?;
    p.require(Perm::ConversationsRead)?;
    let s = app.db.read(|c| capture(app, c, &p.workspace_id, conversation_id, message_id))?;
    app.db.write(|tx| write_snapshot(tx, p, actor, s))
}

pub fn get_snapshot(app: &App, p: &Principal, id: &str) -> Result<Snapshot> {
    p.require(Perm::AgentsRead)?;
    p.require(Perm::ConversationsRead)?;
    app.db.read(|c| store::snapshot(c, &p.workspace_id.0, id)?.ok_or_else(|| Error::not_found("eval snapshot")))
}

fn clean_name(name: &str) -> Result<String> {
    let n = name.trim();
    if n.is_empty() || n.chars().count() > MAX_NAME {
        return Err(Error::invalid_field("name", format!("name must be 1 to {MAX_NAME} characters")));
    }
    Ok(n.to_string())
}

/// The name a case made from a message gets: its question, shortened.
fn default_name(s: &Snapshot) -> String {
    let q = s.question().map(|(q, _)| q).unwrap_or_else(|| "Saved answer".into());
    let one_line: String = q.split_whitespace().collect::<Vec<_>>().join(" ");
    let short: String = one_line.chars().take(80).collect();
    if short.chars().count() < one_line.chars().count() { format!("{short}…") } else { short }
}

fn new_case(s: &Snapshot, name: String, assertions: Vec<Assertion>, now: &str) -> Case {
    Case {
        id: crate::ids::new_id(),
        workspace_id: s.workspace_id.clone(),
        snapshot_id: s.id.clone(),
        agent_id: s.agent_id.clone(),
        source_message_id: None,
        name,
        assertions,
        status: "pending".into(),
        last_run_id: None,
        question: s.question().map(|(q, _)| q),
        created_at: now.to_string(),
        updated_at: now.to_string(),
    }
}

fn audit_case(tx: &Tx, p: &Principal, actor: &Actor, action: &str, c: &Case, now: &str) -> Result<()> {
    let meta = json!({"assertions": c.assertions.len(), "snapshotId": c.snapshot_id});
    let ev = Event::new(action).workspace(&p.workspace_id).target("eval_case", &c.id);
    audit::record(tx, now, actor, ev.meta(meta))
}

/// `POST /evals/cases`.
pub fn create_case(
    app: &App,
    p: &Principal,
    actor: &Actor,
    snapshot_id: &str,
    name: &str,
    assertions: Option<&Value>,
) -> Result<Case> {
    p.require(Perm::AgentsManage)?;
    let name = clean_name(name)?;
    let assertions = assertions.map(assertions::parse_list).transpose()?.unwrap_or_default();
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let s =
            store::snapshot(tx, &p.workspace_id.0, snapshot_id)?.ok_or_else(|| Error::not_found("eval snapshot"))?;
        let c = new_case(&s, name, assertions, &now);
        store::insert_case(tx, &c)?;
        audit_case(tx, p, actor, "eval.case.created", &c, &now)?;
        Ok(c)
    })
}

/// `PUT /evals/cases/by-source-message/{id}`: the case linked to that answer, created (with its
/// snapshot, no assertions) when there is none. `true` when it was created now. Concurrent calls
/// meet in the single writer and the unique source-message index: one creates, the rest read it.
pub fn case_for_message(app: &App, p: &Principal, actor: &Actor, message_id: &str) -> Result<(bool, Case, Snapshot)> {
    p.require(Perm::AgentsManage)?;
    p.require(Perm::ConversationsRead)?;
    let ws = p.workspace_id.clone();
    let now = rfc3339(app.clock.now());
    let existing = |c: &Conn| -> Result<Option<(Case, Snapshot)>> {
        let Some(case) = store::case_by_source(c, &ws.0, message_id)? else { return Ok(None) };
        let s = store::snapshot(c, &ws.0, &case.snapshot_id)?.ok_or_else(|| Error::not_found("eval snapshot"))?;
        Ok(Some((case, s)))
    };
    // the capture reads outside the writer; the write checks again, so concurrent calls make one
    let captured = app.db.read(|c| {
        if let Some(found) = existing(c)? {
            return Ok(Err(found));
        }
        let (conversation_id, _) =
            conversations::message_position(c, &ws.0, message_id)?.ok_or_else(|| Error::not_found("message"))?;
        Ok(Ok(capture(app, c, &ws, &conversation_id, Some(message_id))?))
    })?;
    let s = match captured {
        Err((c, s)) => return Ok((false, c, s)),
        Ok(s) => s,
    };
    app.db.write(|tx| {
        if let Some((c, s)) = existing(tx)? {
            return Ok((false, c, s));
        }
        let s = write_snapshot(tx, p, actor, s.clone())?;
        let mut c = new_case(&s, default_name(&s), Vec::new(), &now);
        c.source_message_id = Some(message_id.to_string());
        store::insert_case(tx, &c)?;
        audit_case(tx, p, actor, "eval.case.created", &c, &now)?;
        Ok((true, c, s))
    })
}

/// `GET /evals/cases/by-source-message/{id}`: lookup only.
pub fn find_case_for_message(app: &App, p: &Principal, message_id: &str) -> Result<(Case, Snapshot)> {
    p.require(Perm::AgentsRead)?;
    p.require(Perm::ConversationsRead)?;
    app.db.read(|c| {
        let case =
            store::case_by_source(c, &p.workspace_id.0, message_id)?.ok_or_else(|| Error::not_found("eval case"))?;
        let s = store::snapshot(c, &p.workspace_id.0, &case.snapshot_id)?
            .ok_or_else(|| Error::not_found("eval snapshot"))?;
        Ok((case, s))
    })
}

pub fn get_case(app: &App, p: &Principal, id: &str) -> Result<Case> {
    p.require(Perm::AgentsRead)?;
    let mut case = app.db.read(|c| find_case(c, &p.workspace_id.0, id))?;
    if !p.has(Perm::ConversationsRead) {
        case.question = None;
    }
    Ok(case)
}

fn find_case(c: &Conn, ws: &str, id: &str) -> Result<Case> {
    store::case(c, ws, id)?.ok_or_else(|| Error::not_found("eval case"))
}

/// Cases a list shows at most.
pub const MAX_LIST: usize = 1000;

/// `GET /evals/cases`: the workspace's cases (or one agent's), oldest first, at most `limit`.
/// Without `workspace.conversations.read` a case's question (conversation text) is left out.
pub fn list_cases(app: &App, p: &Principal, agent_id: Option<&str>, limit: usize) -> Result<Vec<Case>> {
    p.require(Perm::AgentsRead)?;
    let mut cases = app.db.read(|c| store::cases(c, &p.workspace_id.0, agent_id, limit.clamp(1, MAX_LIST)))?;
    if !p.has(Perm::ConversationsRead) {
        cases.iter_mut().for_each(|c| c.question = None);
    }
    Ok(cases)
}

/// `PATCH /evals/cases/{id}`: a new name and/or a new assertion list (replacing the old; the
/// case is `pending` again when its assertions change).
pub fn update_case(
    app: &App,
    p: &Principal,
    actor: &Actor,
    id: &str,
    name: Option<&str>,
    assertions: Option<&Value>,
) -> Result<Case> {
    p.require(Perm::AgentsManage)?;
    let name = name.map(clean_name).transpose()?;
    let assertions = assertions.map(assertions::parse_list).transpose()?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let mut c = find_case(tx, &p.workspace_id.0, id)?;
        if let Some(n) = name {
            c.name = n;
        }
        if let Some(a) = assertions
            && a != c.assertions
        {
            c.assertions = a;
            c.status = "pending".into();
            c.last_run_id = None;
        }
        c.updated_at = now.clone();
        store::update_case(tx, &c)?;
        audit_case(tx, p, actor, "eval.case.updated", &c, &now)?;
        Ok(c)
    })
}

/// `DELETE /evals/cases/{id}`: the case and its runs (its snapshot too when no other case uses it).
pub fn delete_case(app: &App, p: &Principal, actor: &Actor, id: &str) -> Result<()> {
    p.require(Perm::AgentsManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let c = find_case(tx, &p.workspace_id.0, id)?;
        store::delete_case(tx, &c)?;
        audit_case(tx, p, actor, "eval.case.deleted", &c, &now)
    })
}

/// `GET /evals/cases/{id}/runs`: a case's runs, newest first.
pub fn case_runs(app: &App, p: &Principal, id: &str, limit: usize) -> Result<Vec<Run>> {
    p.require(Perm::AgentsRead)?;
    p.require(Perm::ConversationsRead)?;
    app.db.read(|c| {
        find_case(c, &p.workspace_id.0, id)?;
        store::runs_of_case(c, id, limit.clamp(1, 200))
    })
}

pub fn get_run(app: &App, p: &Principal, id: &str) -> Result<Run> {
    p.require(Perm::AgentsRead)?;
    p.require(Perm::ConversationsRead)?;
    app.db.read(|c| store::run(c, &p.workspace_id.0, id)?.ok_or_else(|| Error::not_found("eval run")))
}

/// The mode a body names (`retrieval_only` or `full_assistant`).
pub fn check_mode(mode: &str) -> Result<String> {
    if !MODES.contains(&mode) {
        return Err(Error::invalid_field("mode", format!("mode is retrieval_only or full_assistant, not {mode:?}")));
    }
    Ok(mode.to_string())
}
