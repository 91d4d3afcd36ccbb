//! Replaying one case: the frozen conversation's last question, asked again against the current
//! corpus and the agent's published revision (or a chosen revision, or the configuration the
//! snapshot captured), with the run's overrides laid over it. `retrieval_only` runs retrieval as
//! the turn would; `full_assistant` runs the whole turn in a private test conversation seeded with
//! the frozen history. The assertions are scored, the run stored with what it ran with and what it
//! saw, and the case's status follows its latest run.

use serde_json::{Map, Value, json};

use super::api::{Overrides, RunBodyIn};
use super::assertions::{self, Chunk, Judge, NoJudge, Observed};
use super::{Case, Run, Snapshot, check_mode, instruction_block, store};
use crate::agents::config::{self as agent, AgentConfig};
use crate::app::App;
use crate::audit::Actor;
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::conversations::{self, Channel, NewConversation, NewMessage, Role, Source, Visibility};
use crate::error::{Error, Result};
use crate::ids::WorkspaceId;
use crate::models::chat::Cancel;
use crate::models::resolve::{self, Resolved, Slot};
use crate::search::query::Hit;
use crate::turn::retrieval::Settings;
use crate::turn::{Surface, TurnInput};

const MAX_INSTRUCTION: usize = 2000;

/// One run to make.
#[derive(Debug, Clone)]
pub struct Plan {
    pub mode: String,
    pub overrides: Overrides,
    pub revision_id: Option<String>,
    pub suite_id: Option<String>,
}

/// The retrieval settings as a run records them.
pub fn settings_json(s: &Settings) -> Value {
    json!({
        "retrievalStrategy": s.strategy, "vectorTopK": s.vector_top_k, "rerankEnabled": s.rerank_enabled,
        "rerankTopK": s.rerank_top_k, "queryRewriteEnabled": s.query_rewrite_enabled,
        "similarityThreshold": s.similarity_threshold, "sourceIds": s.source_ids,
    })
}

/// Checks a run's overrides on their own (what needs the snapshot is checked when it runs).
pub fn check_overrides(mode: &str, o: &Overrides) -> Result<()> {
    if let Some(m) = &o.model_override {
        if !crate::models::PROVIDERS.contains(&m.provider.as_str()) {
            return Err(Error::invalid_field(
                "overrides.modelOverride.provider",
                format!("provider must be one of {}", crate::models::PROVIDERS.join(", ")),
            ));
        }
        if m.model.trim().is_empty() || m.model.chars().count() > 200 {
            return Err(Error::invalid_field("overrides.modelOverride.model", "model must be 1 to 200 characters"));
        }
    }
    if let Some(i) = &o.assistant_instructions_override
        && i.custom_instruction.chars().count() > MAX_INSTRUCTION
    {
        return Err(Error::invalid_field(
            "overrides.assistantInstructionsOverride.customInstruction",
            format!("customInstruction is at most {MAX_INSTRUCTION} characters"),
        ));
    }
    if let Some(r) = &o.retrieval_settings_override {
        crate::agents::skills::check_retrieval_config(
            &Value::Object(r.clone()),
            "overrides.retrievalSettingsOverride",
        )?;
    }
    for (set, field) in [
        (o.agent_config_override.is_some(), "overrides.agentConfigOverride"),
        (o.routine_start_state.is_some(), "overrides.routineStartState"),
    ] {
        if set && mode != "full_assistant" {
            return Err(Error::invalid_field(field, format!("{} needs mode full_assistant", &field[10..])));
        }
    }
    Ok(())
}

/// `POST /evals/cases/{id}/runs`.
pub fn run_case(app: &App, p: &Principal, _actor: &Actor, case_id: &str, b: RunBodyIn) -> Result<Run> {
    p.require(Perm::AgentsManage)?;
    let mode = check_mode(&b.mode)?;
    let overrides = b.overrides.unwrap_or_default();
    check_overrides(&mode, &overrides)?;
    let ws = p.workspace_id.clone();
    let (case, snap) = app.db.read(|c| {
        let case = store::case(c, &ws.0, case_id)?.ok_or_else(|| Error::not_found("eval case"))?;
        let snap = store::snapshot(c, &ws.0, &case.snapshot_id)?.ok_or_else(|| Error::not_found("eval snapshot"))?;
        if let Some(rid) = &b.revision_id {
            crate::agents::revisions::snapshot_with_version(c, &case.agent_id, rid)?
                .ok_or_else(|| Error::not_found("revision"))?;
        }
        Ok((case, snap))
    })?;
    check_fidelity(&snap, &overrides)?;
    let plan = Plan { mode, overrides, revision_id: b.revision_id, suite_id: None };
    execute(app, &ws, p.user_id.as_ref().map(|u| u.0.as_str()), Some(&case), &snap, &plan)
}

/// An agent configuration override and a routine start state need a snapshot that captured the
/// full agent configuration.
pub fn check_fidelity(snap: &Snapshot, o: &Overrides) -> Result<()> {
    if snap.is_full() {
        return Ok(());
    }
    for (set, field) in [
        (o.agent_config_override.is_some(), "overrides.agentConfigOverride"),
        (o.routine_start_state.is_some(), "overrides.routineStartState"),
    ] {
        if set {
            return Err(Error::invalid_field(
                field,
                "this snapshot did not capture the full agent configuration (fidelity messages_only)",
            ));
        }
    }
    Ok(())
}

/// The configuration a run replays against, and where it came from.
fn configuration(app: &App, ws: &WorkspaceId, snap: &Snapshot, plan: &Plan) -> Result<(AgentConfig, &'static str)> {
    let (mut cfg, source) = if let Some(patch) = &plan.overrides.agent_config_override {
        let orig = snap.body.original_agent.as_ref().ok_or_else(|| {
            Error::invalid_field("overrides.agentConfigOverride", "the snapshot has no agent configuration")
        })?;
        let mut s = orig.snapshot.clone();
        let settings = s["settings"].as_object_mut().ok_or_else(|| Error::internal_msg("snapshot without settings"))?;
        for (k, v) in patch {
            if !settings.contains_key(k) {
                return Err(Error::invalid_field(
                    &format!("overrides.agentConfigOverride.{k}"),
                    format!("{k} is not an agent setting"),
                ));
            }
            settings.insert(k.clone(), v.clone());
        }
        serde_json::from_value::<crate::agents::Settings>(s["settings"].clone()).map_err(|e| {
            Error::invalid_field("overrides.agentConfigOverride", format!("not a valid agent configuration: {e}"))
        })?;
        (AgentConfig::from_snapshot(&orig.agent_id, Some(orig.revision_id.clone()), orig.version, &s)?, "snapshot")
    } else {
        app.db.read(|c| match &plan.revision_id {
            Some(rid) => {
                crate::agents::get_in(c, ws, &snap.agent_id)?;
                Ok((agent::revision(c, &snap.agent_id, rid)?, "revision"))
            }
            None => Ok((agent::published(c, ws, &snap.agent_id)?, "published")),
        })?
    };
    let o = &plan.overrides;
    if let Some(m) = &o.model_override {
        cfg.settings.chat_model_override =
            Some(crate::agents::ModelChoice { provider: m.provider.clone(), model: m.model.clone() });
    }
    if let Some(i) = &o.assistant_instructions_override {
        cfg.settings.custom_instruction = i.custom_instruction.clone();
    }
    if let Some(delta) = &o.retrieval_settings_override {
        lay_over(&mut cfg, delta);
    }
    Ok((cfg, source))
}

/// Lays a retrieval settings delta over the agent's `retrieval.answer` settings and over its
/// default-answer retrieve skill (whose config wins over the agent's settings).
fn lay_over(cfg: &mut AgentConfig, delta: &Map<String, Value>) {
    let entry = cfg.settings.skill_settings.entry("retrieval.answer").or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    if let Some(m) = entry.as_object_mut() {
        m.extend(delta.clone());
    }
    for s in cfg
        .skills
        .iter_mut()
        .filter(|k| k.enabled && k.capability == "retrieve" && k.invocation_mode == "default_answer")
    {
        s.config.extend(delta.clone());
    }
}

fn chunks(hits: &[Hit]) -> Vec<Chunk> {
    hits.iter()
        .enumerate()
        .map(|(i, h)| Chunk {
            chunk_id: h.chunk_id.clone(),
            document_id: h.document_id.clone(),
            title: h.title.clone(),
            rank: i + 1,
            similarity: Some(h.score),
            metadata: h.metadata.clone(),
        })
        .collect()
}

fn chunks_json(c: &[Chunk]) -> Value {
    Value::Array(
        c.iter()
            .map(|c| {
                json!({"chunkId": c.chunk_id, "documentId": c.document_id, "title": c.title, "rank": c.rank,
                "similarity": c.similarity, "metadata": c.metadata})
            })
            .collect(),
    )
}

/// Opens the replay's test conversation with the frozen history (and a running routine when
/// asked), on the configuration's revision.
fn open_conversation(
    app: &App,
    ws: &WorkspaceId,
    cfg: &AgentConfig,
    history: &[(String, String)],
    state: Option<&Value>,
    by: Option<&str>,
) -> Result<String> {
    app.db.write(|tx| {
        let now = rfc3339(app.clock.now());
        let conversation = NewConversation {
            workspace_id: &ws.0,
            agent_id: &cfg.agent_id,
            revision_id: cfg.revision_id.as_deref(),
            channel: Channel::Test,
            visibility: Visibility::Test,
            test_execution_id: None,
            started_by: by,
            public_session_id: None,
        };
        let cid = conversations::start(tx, &conversation, &now)?;
        for (role, content) in history {
            let (role, source) =
                if role == "user" { (Role::User, Source::Tester) } else { (Role::Assistant, Source::Agent) };
            let m = NewMessage {
                conversation_id: &cid,
                role,
                source,
                content,
                citations: json!([]),
                metadata: json!({"evalReplay": true}),
                trace_id: None,
                request_id: None,
            };
            conversations::append_message(tx, &ws.0, &m, &now)?;
        }
        if let Some(s) = state {
            conversations::set_state(tx, &cid, s, &now)?;
        }
        Ok(cid)
    })
}

/// What the run saw, and the model that composed (full_assistant).
struct Seen {
    observed: Observed,
    extra: Map<String, Value>,
    composer: Option<(String, String)>,
    /// The composing model's tokens.
    usage: crate::models::chat::Usage,
}

/// The conversation state a routine start override asks for (400 when the routine or step is not
/// in the configuration).
fn routine_state(app: &App, cfg: &AgentConfig, plan: &Plan) -> Result<Option<Value>> {
    let Some(r) = &plan.overrides.routine_start_state else { return Ok(None) };
    let now = app.clock.now().timestamp();
    crate::routines::runtime::start_state(cfg, &r.routine_name, r.step_id.as_deref(), &r.slots, now)
        .map(Some)
        .map_err(|e| Error::invalid_field("overrides.routineStartState", e))
}

fn observe(
    app: &App,
    ws: &WorkspaceId,
    (cfg, state): (&AgentConfig, Option<Value>),
    snap: &Snapshot,
    plan: &Plan,
    by: Option<&str>,
) -> Result<Seen> {
    let (question, history) = snap
        .question()
        .ok_or_else(|| Error::invalid_field("snapshotId", "the snapshot has no user message to replay"))?;
    let mut extra = Map::new();
    if plan.mode == "retrieval_only" {
        let r = crate::turn::replay_retrieval(app, ws, cfg, &question, &history)?;
        extra.insert("retrievalInvoked".into(), json!(r.retrieval_invoked));
        let observed = Observed { chunks: chunks(&r.hits), ..Default::default() };
        return Ok(Seen { observed, extra, composer: None, usage: Default::default() });
    }
    let cid = open_conversation(app, ws, cfg, &history, state.as_ref(), by)?;
    extra.insert("conversationId".into(), json!(cid));
    let input = TurnInput {
        workspace: ws.clone(),
        conversation_id: cid,
        agent: cfg.clone(),
        message: question,
        filter: None,
        request_id: None,
        surface: Surface::Test,
        turn_id: crate::ids::new_id(),
        include_debug: false,
        actor: Actor::system(),
        context_scope: Default::default(),
        test_values: vec![],
        invocation: None,
    };
    let reply = crate::turn::run_detached(app, &input).map_err(Error::from)?;
    let cited: Vec<String> = reply.citations.iter().map(|c| c.document_id.clone()).collect();
    extra.insert("citations".into(), serde_json::to_value(&reply.citations).unwrap_or_default());
    extra.insert("answerSegments".into(), serde_json::to_value(&reply.segments).unwrap_or_default());
    extra.insert("outcome".into(), json!(reply.outcome));
    extra.insert("retrievalInvoked".into(), reply.diagnostics["retrievalInvoked"].clone());
    if let Some(r) = &reply.routine {
        extra.insert("routine".into(), crate::turn::api::routine(r));
    }
    let composer =
        match (reply.diagnostics["composer"]["provider"].as_str(), reply.diagnostics["composer"]["model"].as_str()) {
            (Some(p), Some(m)) => Some((p.to_string(), m.to_string())),
            _ => Some(("builtin".to_string(), "extractive".to_string())),
        };
    let observed =
        Observed { chunks: chunks(&reply.retrieved), answer: Some(reply.text), cited_documents: cited, error: None };
    Ok(Seen { observed, extra, composer, usage: reply.usage })
}

/// Runs one case (or a bare snapshot) and stores the run.
pub fn execute(
    app: &App,
    ws: &WorkspaceId,
    by: Option<&str>,
    case: Option<&Case>,
    snap: &Snapshot,
    plan: &Plan,
) -> Result<Run> {
    // an eval run is a test run: half a conversation and one answer, reserved before any model call
    let work = crate::usage::limits::AnswerWork {
        workspace: &ws.0,
        agent: &snap.agent_id,
        conversation: None,
        kind: crate::usage::limits::AnswerKind::TestRun,
    };
    let mut hold = crate::usage::limits::reserve_answer(app, &work)?;
    let started_at = rfc3339(app.clock.now());
    let assertions_list = case.map(|c| c.assertions.clone()).unwrap_or_default();
    let mut resolved = json!({"agentId": snap.agent_id});
    let seen = match configuration(app, ws, snap, plan) {
        Err(e) if (400..500).contains(&e.status()) && e.status() != 404 => return Err(e),
        Err(e) => Err(e),
        Ok((cfg, source)) => {
            let state = routine_state(app, &cfg, plan)?;
            resolved["source"] = json!(source);
            resolved["revisionId"] = json!(cfg.revision_id);
            resolved["revisionVersion"] = json!(cfg.version);
            resolved["retrievalSettings"] = settings_json(&Settings::for_agent(&cfg));
            resolved["composedInstructions"] = json!(instruction_block(&cfg));
            observe(app, ws, (&cfg, state), snap, plan, by)
        }
    };
    let mut tokens = crate::models::chat::Usage::default();
    let (observed, mut output) = match seen {
        Ok(s) => {
            tokens = s.usage;
            if let Some((p, m)) = &s.composer {
                resolved["modelProvider"] = json!(p);
                resolved["modelId"] = json!(m);
            }
            let mut out = s.extra;
            out.insert("retrievedChunks".into(), chunks_json(&s.observed.chunks));
            if let Some(a) = &s.observed.answer {
                out.insert("answer".into(), json!(a));
            }
            (s.observed, out)
        }
        Err(e) => {
            let mut out = Map::new();
            out.insert("retrievedChunks".into(), json!([]));
            out.insert("error".into(), json!({"message": e.message, "code": e.code.as_str()}));
            (Observed { error: Some(e.message.clone()), ..Default::default() }, out)
        }
    };
    let verdicts = score(app, ws, snap, &assertions_list, &observed);
    // the agent's tokens: the answer's and the judge's
    for u in verdicts.iter().filter_map(|v| v.extra.as_ref()).map(|x| &x["usage"]) {
        tokens.prompt_tokens += u["promptTokens"].as_u64().unwrap_or(0);
        tokens.completion_tokens += u["completionTokens"].as_u64().unwrap_or(0);
    }
    let (status, reason) = assertions::aggregate(&verdicts);
    if observed.error.is_some() && assertions_list.is_empty() {
        output.insert("recordedWithError".into(), json!(true));
    }
    let verdicts_json: Vec<Value> = assertions_list
        .iter()
        .zip(&verdicts)
        .map(|(a, v)| {
            let mut j = json!({"assertion": a.to_json(), "status": v.status.as_str(), "reason": v.reason});
            if let Some(x) = &v.extra {
                j["judge"] = x.clone();
            }
            j
        })
        .collect();
    let assertions_json = Value::Array(assertions_list.iter().map(|a| a.to_json()).collect());
    let run = Run {
        id: crate::ids::new_id(),
        workspace_id: ws.0.clone(),
        snapshot_id: snap.id.clone(),
        case_id: case.map(|c| c.id.clone()),
        suite_id: plan.suite_id.clone(),
        mode: plan.mode.clone(),
        revision_id: resolved["revisionId"].as_str().map(str::to_string),
        overrides: serde_json::to_value(&plan.overrides).unwrap_or_default(),
        resolved_config: resolved,
        observed_output: Value::Object(output),
        assertions: assertions_json.clone(),
        status: status.to_string(),
        outcome_reason: reason,
        verdicts: Value::Array(verdicts_json),
        started_at,
        completed_at: Some(rfc3339(app.clock.now())),
    };
    app.db.write(|tx| {
        store::insert_run(tx, &run)?;
        if let Some(c) = case {
            let case_status = match status {
                "pass" => "passing",
                "fail" => "failing",
                "error" => "error",
                _ => "pending",
            };
            // a comparison side or a run of another revision does not move the case's status
            if plan.suite_id.is_none()
                && plan.revision_id.is_none()
                && plan.overrides == Overrides::default()
                && super::suite::moves_case(&plan.mode, c)
            {
                store::set_case_result(
                    tx,
                    &c.id,
                    &assertions_json.to_string(),
                    case_status,
                    &run.id,
                    run.completed_at.as_deref().unwrap_or_default(),
                )?;
            }
        }
        hold.settle(app, tx, tokens)
    })?;
    hold.committed();
    Ok(run)
}

/// Scores the assertions; `llm_judge` goes to the workspace chat model (never the run's
/// overridden model).
fn score(
    app: &App,
    ws: &WorkspaceId,
    snap: &Snapshot,
    list: &[assertions::Assertion],
    o: &Observed,
) -> Vec<assertions::Verdict> {
    let needs_judge = o.answer.is_some()
        && o.error.is_none()
        && list.iter().any(|a| matches!(a, assertions::Assertion::Judge { .. }));
    let question = snap.question().map(|(q, _)| q).unwrap_or_default();
    let cancel = Cancel::new();
    let resolved = if needs_judge { Some(resolve::resolve(app, ws, Slot::Chat, None)) } else { None };
    let mut fallback;
    let mut model_judge;
    let judge: &mut dyn Judge = match &resolved {
        Some(Ok((_, Resolved::Model(m)))) => {
            model_judge = super::judge::ModelJudge { model: m.as_ref(), question: &question, cancel: &cancel };
            &mut model_judge
        }
        Some(Ok((_, Resolved::Builtin))) | None => {
            fallback = NoJudge("llm_judge needs a chat model, and none is configured for this workspace".into());
            &mut fallback
        }
        Some(Err(e)) => {
            fallback = NoJudge(format!("the judge model is unavailable: {}", e.message));
            &mut fallback
        }
    };
    assertions::evaluate(list, o, judge)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evals::api::{RoutineStart, SnapshotBody};

    fn snapshot(fidelity: &str) -> Snapshot {
        Snapshot {
            id: "s".into(),
            workspace_id: "w".into(),
            agent_id: "a".into(),
            source_conversation_id: "c".into(),
            source_message_id: None,
            fidelity: fidelity.into(),
            body: SnapshotBody::default(),
            captured_at: String::new(),
            captured_by: None,
        }
    }

    #[test]
    fn configuration_overrides_need_full_assistant_and_a_full_snapshot() {
        let agent = Overrides { agent_config_override: Some(Map::new()), ..Default::default() };
        let routine = Overrides {
            routine_start_state: Some(RoutineStart { routine_name: "r".into(), step_id: None, slots: Map::new() }),
            ..Default::default()
        };
        for o in [&agent, &routine] {
            assert!(check_overrides("retrieval_only", o).is_err());
            assert!(check_overrides("full_assistant", o).is_ok());
            assert!(check_fidelity(&snapshot("messages_only"), o).is_err());
            assert!(check_fidelity(&snapshot("full"), o).is_ok());
        }
        let plain = Overrides::default();
        assert!(check_fidelity(&snapshot("messages_only"), &plain).is_ok());
        let long = Overrides {
            assistant_instructions_override: Some(crate::evals::api::InstructionsOverride {
                custom_instruction: "x".repeat(2001),
            }),
            ..Default::default()
        };
        assert!(check_overrides("full_assistant", &long).is_err());
        let bad_model = Overrides {
            model_override: Some(crate::evals::api::ModelChoice { provider: "acme".into(), model: "m".into() }),
            ..Default::default()
        };
        assert!(check_overrides("full_assistant", &bad_model).is_err());
    }
}
