//! `POST /retrieval/answer`: a retrieval-only grounded answer, outside any conversation — on the
//! system retrieval defaults, or as an agent (its source scope, instruction and retrieval skill
//! settings). It never asks a clarifying question and keeps no conversation; its turn is traced
//! and appears in the quality report.

use serde::Deserialize;
use serde_json::{Value, json};

use super::compose::{self, Composed, NoSink};
use super::kinds::{Availability, RouteKind, StageStatus, TraceStage};
use super::trace::{self, TraceBuilder, TurnRecord};
use super::{AnswerCoverage, TraceJson, TurnModels, as_model, retrieval};
use crate::agents::config::{self as agent, AgentConfig};
use crate::app::App;
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, Result};
use crate::models::chat::Cancel;
use crate::models::resolve::Resolved;
use crate::search::query::Hit;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnswerInput {
    pub query: String,
    #[serde(default)]
    pub metadata_filter: Option<Value>,
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(default)]
    pub include_debug: bool,
}

/// A stand-in agent for calls on the system defaults.
fn system_agent() -> AgentConfig {
    AgentConfig {
        agent_id: String::new(),
        revision_id: None,
        version: None,
        name: "Assistant".into(),
        settings: Default::default(),
        directives: vec![],
        skills: vec![],
        context_variables: vec![],
        routines: vec![],
    }
}

/// A retrieval-only answer and what it was made of (`turn::api::answer` renders it).
#[derive(Debug)]
pub struct Answered {
    pub composed: Composed,
    pub coverage: AnswerCoverage,
    /// The agent the answer was scoped to, if any.
    pub scoped: Option<AgentConfig>,
    pub hits: Vec<Hit>,
    pub trace_id: String,
    /// The turn trace, when `includeDebug` asked for it.
    pub debug_trace: Option<TraceJson>,
}

pub fn answer(app: &App, p: &Principal, request_id: Option<&str>, i: AnswerInput) -> Result<Answered> {
    p.require(Perm::RetrievalQuery)?;
    let query = super::check_message(&i.query)
        .map_err(|_| Error::invalid_field("query", "query must be 1 to 20000 characters"))?;
    let filter = super::parse_filter(i.metadata_filter.as_ref())?;
    let ws = p.workspace_id.clone();
    let scoped = match &i.agent_id {
        Some(id) => {
            // scoping to an agent needs agent read access as well
            p.require(Perm::AgentsRead)?;
            Some(app.db.read(|c| agent::published(c, &ws, id))?)
        }
        None => None,
    };
    let (cfg, settings) = match &scoped {
        Some(a) => (a.clone(), retrieval::Settings::for_agent(a)),
        None => (system_agent(), retrieval::Settings::system()),
    };
    let mut tr = TraceBuilder::new(app);
    // a standalone answer counts one conversation, reserved before any model call
    let work = crate::usage::limits::AnswerWork {
        workspace: &ws.0,
        agent: scoped.as_ref().map(|a| a.agent_id.as_str()).unwrap_or("system"),
        conversation: None,
        kind: crate::usage::limits::AnswerKind::Standalone,
    };
    let mut hold = crate::usage::limits::reserve_answer(app, &work)?;
    let models = TurnModels::resolve(app, &ws, &cfg)?;
    let cancel = Cancel::new();
    let r = retrieval::run(app, &ws, &settings, &models.helpers, &query, &[], filter.as_ref(), &cancel)?;
    tr.stage(app, TraceStage::RetrievalFanout, StageStatus::Applied, r.trace);
    let hits = r.hits;
    let composed = compose_answer(&models, &cfg, &query, &hits, &cancel)?;
    tr.stage(
        app,
        TraceStage::Compose,
        StageStatus::Applied,
        json!({"provider": composed.provider, "model": composed.model, "outcome": composed.outcome, "usage": composed.usage,
               "citations": composed.citations.iter().map(|c| c.chunk_id.clone()).collect::<Vec<_>>()}),
    );
    let (coverage, reason) = composed.coverage.clone().unzip();
    let availability = if coverage.is_some() { Availability::Assessed } else { Availability::NotRecorded };
    let trace_id = tr.trace_id.clone();
    let mut trace_json = tr.finish(app);
    trace_json["outcome"] = json!(composed.outcome);
    let record = TurnRecord {
        trace_id: &trace_id,
        workspace_id: &ws.0,
        conversation_id: None,
        agent_id: scoped.as_ref().map(|a| a.agent_id.as_str()),
        revision_id: scoped.as_ref().and_then(|a| a.revision_id.as_deref()),
        user_message_id: None,
        message_id: None,
        request_id,
        surface: "retrieval_answer",
        route: Some(RouteKind::Retrieval),
        outcome: composed.outcome,
        availability,
        coverage: coverage.as_deref(),
        reason: reason.as_deref(),
        grounding: composed.grounding,
        trace: &trace_json,
    };
    app.db.write(|tx| {
        trace::insert(tx, &record, &rfc3339(app.clock.now()))?;
        hold.settle(app, tx, composed.usage)
    })?;
    hold.committed();
    let coverage = AnswerCoverage {
        availability,
        coverage,
        reason,
        originating_turn_id: trace_id.clone(),
        originating_request_id: request_id.map(str::to_string),
    };
    let debug_trace = i.include_debug.then_some(trace_json);
    Ok(Answered { composed, coverage, scoped, hits, trace_id, debug_trace })
}

/// The decline when nothing was found, else the built-in answerer's or the chat model's answer.
pub(crate) fn compose_answer(
    models: &TurnModels,
    cfg: &AgentConfig,
    query: &str,
    hits: &[Hit],
    cancel: &Cancel,
) -> Result<Composed> {
    if hits.is_empty() {
        compose::decline(as_model(&models.workspace_chat), query, &mut NoSink, cancel)
    } else {
        match &models.chat {
            Resolved::Builtin => compose::builtin_grounded(query, hits, &mut NoSink),
            Resolved::Model(m) => compose::model_grounded(
                m.as_ref(),
                cfg,
                &[],
                &[],
                "",
                query,
                compose::History::default(),
                hits,
                &mut NoSink,
                cancel,
            )
            .map_err(compose::llm_error)?,
        }
    }
    .ok_or_else(|| Error::internal_msg("composition was cancelled"))
}

/// The turn's retrieval and composition as a retrieval skill runs them (`skills::Retrieval`):
/// the agent's retrieval settings and models, the answer composed from the hits.
pub struct SkillRetrieval;

impl crate::skills::Retrieval for SkillRetrieval {
    fn answer(
        &self,
        app: &App,
        ws: &crate::ids::WorkspaceId,
        agent: &AgentConfig,
        query: &str,
    ) -> Result<crate::skills::Found> {
        let settings = retrieval::Settings::for_agent(agent);
        let models = TurnModels::resolve(app, ws, agent)?;
        let cancel = Cancel::new();
        let r = retrieval::run(app, ws, &settings, &models.helpers, query, &[], None, &cancel)?;
        let Some(top) = r.hits.first() else { return Ok(crate::skills::Found::default()) };
        let composed = compose_answer(&models, agent, query, &r.hits, &cancel)?;
        Ok(crate::skills::Found {
            answer: Some(composed.text),
            result_count: r.hits.len(),
            top_title: Some(top.title.clone()),
        })
    }
}
