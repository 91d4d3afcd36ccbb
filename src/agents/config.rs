//! The agent as it runs (in a turn, a notice, a routine, a replay): read from an immutable
//! revision snapshot (the published revision a conversation started on, a candidate, or a test
//! execution's frozen draft), never from the live draft — so drafts never leak into visitor
//! conversations.

use crate::storage::Conn as Connection;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::agents::directives::Body;
use crate::agents::{self, Settings, revisions};
use crate::error::{Error, Result};
use crate::ids::WorkspaceId;

#[derive(Debug, Clone)]
pub struct AuthoredDirective {
    pub id: String,
    pub name: String,
    pub body: Body,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillSnap {
    pub id: String,
    pub name: String,
    pub capability: String,
    #[serde(default)]
    pub target: Option<Value>,
    #[serde(default)]
    pub config: Map<String, Value>,
    pub invocation_mode: String,
    pub enabled: bool,
}

impl SkillSnap {
    /// The skill as the agents domain describes it, for running it (`skills::run`).
    pub fn to_skill(&self, agent_id: &str) -> crate::agents::skills::Skill {
        crate::agents::skills::Skill {
            id: self.id.clone(),
            agent_id: agent_id.to_string(),
            name: self.name.clone(),
            capability: self.capability.clone(),
            target: self.target.clone(),
            config: self.config.clone(),
            invocation_mode: self.invocation_mode.clone(),
            enabled: self.enabled,
            created_at: String::new(),
            updated_at: String::new(),
        }
    }
}

/// A context-variable enablement as the revision holds it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnablementSnap {
    #[serde(rename = "contextVariableId")]
    pub variable_id: String,
    pub source: String,
    pub surfacing: String,
    pub enabled: bool,
}

/// A routine as the revision holds it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutineSnap {
    pub id: String,
    pub name: String,
    pub version: i64,
    pub definition: crate::routines::definition::Definition,
}

#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub agent_id: String,
    /// The revision this configuration comes from (`None`: a frozen draft).
    pub revision_id: Option<String>,
    pub version: Option<i64>,
    pub name: String,
    pub settings: Settings,
    pub directives: Vec<AuthoredDirective>,
    pub skills: Vec<SkillSnap>,
    pub context_variables: Vec<EnablementSnap>,
    pub routines: Vec<RoutineSnap>,
}

impl AgentConfig {
    pub fn from_snapshot(
        agent_id: &str,
        revision_id: Option<String>,
        version: Option<i64>,
        snap: &revisions::Snapshot,
    ) -> Result<AgentConfig> {
        let bad = |what: &str, e: serde_json::Error| Error::internal_msg(format!("agent snapshot: {what}: {e}"));
        let settings: Settings = serde_json::from_value(snap["settings"].clone()).map_err(|e| bad("settings", e))?;
        let mut directives = Vec::new();
        for d in snap["directives"].as_array().into_iter().flatten() {
            let body: Body = serde_json::from_value(d.clone()).map_err(|e| bad("directive", e))?;
            directives.push(AuthoredDirective {
                id: d["id"].as_str().unwrap_or_default().to_string(),
                name: d["name"].as_str().unwrap_or_default().to_string(),
                body,
            });
        }
        let skills: Vec<SkillSnap> = match snap.get("skills") {
            Some(v) if !v.is_null() => serde_json::from_value(v.clone()).map_err(|e| bad("skills", e))?,
            _ => Vec::new(),
        };
        let context_variables: Vec<EnablementSnap> = match snap.get("contextVariableEnablements") {
            Some(v) if !v.is_null() => serde_json::from_value(v.clone()).map_err(|e| bad("context variables", e))?,
            _ => Vec::new(),
        };
        let routines: Vec<RoutineSnap> = match snap.get("routines") {
            Some(v) if !v.is_null() => serde_json::from_value(v.clone()).map_err(|e| bad("routines", e))?,
            _ => Vec::new(),
        };
        Ok(AgentConfig {
            routines,
            agent_id: agent_id.to_string(),
            revision_id,
            version,
            name: snap["name"].as_str().unwrap_or("Assistant").to_string(),
            settings,
            directives,
            skills,
            context_variables,
        })
    }

    pub fn routine(&self, id: &str) -> Option<&RoutineSnap> {
        self.routines.iter().find(|r| r.id == id)
    }

    pub fn skill(&self, name: &str) -> Option<&SkillSnap> {
        self.skills.iter().find(|s| s.name == name)
    }
}

/// The published revision of an agent (what a new conversation starts on).
pub fn published(c: &Connection, ws: &WorkspaceId, agent_id: &str) -> Result<AgentConfig> {
    let (agent, published) =
        agents::store::with_published(c, ws, Some(agent_id))?.ok_or_else(|| Error::not_found("agent"))?;
    of_published(&agent, published)
}

/// An agent of the workspace (by id; `None`: its default agent, created when it has none) with its
/// published configuration, read in one statement when the agent exists (a turn that starts a
/// conversation).
pub fn agent_published(
    tx: &crate::storage::Tx,
    ws: &WorkspaceId,
    agent_id: Option<&str>,
    now: &str,
) -> Result<(agents::Agent, AgentConfig)> {
    let (agent, published) = match agents::store::with_published(tx, ws, agent_id)? {
        Some(found) => found,
        None if agent_id.is_some() => return Err(Error::not_found("agent")),
        None => {
            let agent = agents::ensure_default_agent(tx, ws, now)?;
            let published = revisions::published(tx, &agent.id)?;
            (agent, published)
        }
    };
    let config = of_published(&agent, published)?;
    Ok((agent, config))
}

fn of_published(agent: &agents::Agent, published: Option<agents::store::Published>) -> Result<AgentConfig> {
    let (rid, version, snap) = published.ok_or_else(|| Error::internal_msg("the agent has no published revision"))?;
    AgentConfig::from_snapshot(&agent.id, Some(rid), Some(version), &snap)
}

/// A revision of an agent by id (404 when it is not this agent's).
pub fn revision(c: &Connection, agent_id: &str, revision_id: &str) -> Result<AgentConfig> {
    let (version, snap) =
        revisions::snapshot_with_version(c, agent_id, revision_id)?.ok_or_else(|| Error::not_found("revision"))?;
    AgentConfig::from_snapshot(agent_id, Some(revision_id.to_string()), version, &snap)
}

/// The draft as it is now, as a snapshot (test executions freeze it).
pub fn draft_snapshot(c: &Connection, ws: &WorkspaceId, agent_id: &str) -> Result<(i64, revisions::Snapshot)> {
    let a = agents::get_in(c, ws, agent_id)?;
    Ok((a.draft_generation, revisions::snapshot(c, &a)?))
}
