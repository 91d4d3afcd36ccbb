//! Revisions: immutable snapshots of what an agent is (settings, directives, skills,
//! context-variable enablements; routines when they exist). One candidate per draft generation;
//! publishing a candidate gives it the next version (v1, v2, …) and makes it what new
//! conversations use on every channel. Running conversations keep the revision they started with.

use serde::Deserialize;
use serde_json::{Value, json};

use super::api::EnablementView;
use super::{Agent, context, directives, get_in, skills, store};
use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, ErrorCode, Result};
use crate::ids::WorkspaceId;
use crate::storage::{Conn, Tx};

pub const SNAPSHOT_FORMAT: u32 = 1;

/// A revision's snapshot: the agent's settings, directives, skills and enablements as one JSON
/// document in the wire shape (stored as it is; `SNAPSHOT_FORMAT` versions it).
pub type Snapshot = Value;
/// One skill, directive or enablement of a [`Snapshot`]: free-form JSON in the wire shape.
pub type SnapshotEntry = Value;

#[derive(Debug, Clone)]
pub struct Revision {
    pub id: String,
    pub agent_id: String,
    pub generation: i64,
    pub kind: String,
    pub version_number: Option<i64>,
    pub snapshot: Snapshot,
    pub base_published_revision_id: Option<String>,
    pub created_at: String,
    pub published_at: Option<String>,
}

fn by_id(c: &Conn, agent_id: &str, id: &str) -> Result<Option<Revision>> {
    store::revision(c, agent_id, id)
}

fn by_generation(c: &Conn, agent_id: &str, generation: i64) -> Result<Option<Revision>> {
    store::revision_of_generation(c, agent_id, generation)
}

impl Revision {
    /// `v3`, or `Draft · <time>` for a candidate.
    pub fn label(&self) -> String {
        match self.version_number {
            Some(v) => format!("v{v}"),
            None => format!("Draft · {}", self.created_at),
        }
    }
}

/// A revision with the published snapshot it was based on (what its changes are measured
/// against; empty for the first).
#[derive(Debug, Clone)]
pub struct RevisionDetail {
    pub revision: Revision,
    pub base: Snapshot,
}

/// Where an agent's draft stands against its published revision.
#[derive(Debug, Clone)]
pub struct RevisionState {
    pub agent: Agent,
    pub published: Option<Revision>,
    /// The revision of the current draft generation, if one was made.
    pub current: Option<Revision>,
}

impl RevisionState {
    /// Whether the draft is what is published.
    pub fn draft_is_published(&self) -> bool {
        self.current.as_ref().is_some_and(|r| r.kind == "published")
    }
}

/// What the agent is right now (the draft), as a snapshot.
pub fn snapshot(c: &Conn, a: &Agent) -> Result<Snapshot> {
    let settings = serde_json::to_value(&a.settings)?;
    let enablements = context::enablements(c, &a.id)?;
    let mut enabled_vars: Vec<String> =
        enablements.iter().filter(|e| e.enabled).map(|e| e.variable_id.clone()).collect();
    enabled_vars.sort();
    Ok(json!({
        "snapshotFormatVersion": SNAPSHOT_FORMAT,
        "name": a.name,
        "customInstruction": a.settings.custom_instruction,
        "greeting": {"instruction": a.settings.greeting_instruction, "proactive": a.settings.proactive_greeting_enabled, "exactWords": a.settings.greeting_exact_words},
        "settings": settings,
        "directives": directives::snapshot(c, &a.id)?,
        "routines": crate::routines::snapshot(c, &a.id)?,
        "skills": skills::snapshot(c, &a.id)?,
        "contextVariableEnablements": enablements.iter().map(EnablementView::snapshot).collect::<Vec<_>>(),
        "enabledContextVariableIds": enabled_vars,
    }))
}

fn insert(tx: &Tx, a: &Agent, kind: &str, version: Option<i64>, snap: &Snapshot, now: &str) -> Result<String> {
    let id = crate::ids::new_id();
    let r = Revision {
        id: id.clone(),
        agent_id: a.id.clone(),
        generation: a.draft_generation,
        kind: kind.to_string(),
        version_number: version,
        snapshot: snap.clone(),
        base_published_revision_id: a.published_revision_id.clone(),
        created_at: now.to_string(),
        published_at: version.map(|_| now.to_string()),
    };
    store::insert_revision(tx, &a.workspace_id, &r)?;
    Ok(id)
}

/// A new agent's initial configuration, published as v1.
pub fn publish_initial(tx: &Tx, agent_id: &str, ws: &WorkspaceId, now: &str) -> Result<()> {
    let a = get_in(tx, ws, agent_id)?;
    let snap = snapshot(tx, &a)?;
    let id = insert(tx, &a, "published", Some(1), &snap, now)?;
    store::set_published(tx, agent_id, &id, None)
}

/// The revision new conversations of `agent_id` use: `(revision id, version, snapshot)`.
pub fn published(c: &Conn, agent_id: &str) -> Result<Option<(String, i64, Snapshot)>> {
    store::published(c, agent_id)
}

/// A revision's snapshot by id (for conversations that started on it).
pub fn snapshot_of(c: &Conn, revision_id: &str) -> Result<Option<Snapshot>> {
    store::snapshot_of(c, revision_id)
}

/// A revision of `agent_id` by id: `(version number, snapshot)`.
pub fn snapshot_with_version(c: &Conn, agent_id: &str, revision_id: &str) -> Result<Option<(Option<i64>, Snapshot)>> {
    Ok(by_id(c, agent_id, revision_id)?.map(|r| (r.version_number, r.snapshot)))
}

fn conflict(message: String, details: Value) -> Error {
    Error::new(ErrorCode::RevisionConflict, message).with_details(details)
}

pub fn state(app: &App, p: &Principal, agent_id: &str) -> Result<RevisionState> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| {
        let agent = get_in(c, &p.workspace_id, agent_id)?;
        let published = match &agent.published_revision_id {
            Some(id) => by_id(c, &agent.id, id)?,
            None => None,
        };
        let current = by_generation(c, &agent.id, agent.draft_generation)?;
        Ok(RevisionState { agent, published, current })
    })
}

/// The candidate body: optional; `expectedDraftGeneration`, when given, guards against a draft that
/// moved since the caller read it (409).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CandidateInput {
    #[serde(default)]
    pub expected_draft_generation: Option<i64>,
}

/// `POST …/revisions/candidates`: the candidate of the current draft generation (made once).
/// Returns `(created, revision)`.
pub fn candidate(
    app: &App,
    p: &Principal,
    actor: &Actor,
    agent_id: &str,
    i: CandidateInput,
) -> Result<(bool, RevisionDetail)> {
    p.require(Perm::AgentsManage)?;
    if i.expected_draft_generation.is_some_and(|g| g < 1) {
        return Err(Error::invalid_field("expectedDraftGeneration", "expectedDraftGeneration is a positive integer"));
    }
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let a = get_in(tx, &p.workspace_id, agent_id)?;
        if let Some(expected) = i.expected_draft_generation
            && a.draft_generation != expected
        {
            return Err(conflict(
                format!("the draft changed: it is at generation {}, not {expected}", a.draft_generation),
                json!({"currentDraftGeneration": a.draft_generation}),
            ));
        }
        if let Some(r) = by_generation(tx, &a.id, a.draft_generation)? {
            return Ok((false, detail(tx, &r)?));
        }
        let snap = snapshot(tx, &a)?;
        let id = insert(tx, &a, "candidate", None, &snap, &now)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("agent.revision.candidate")
                .workspace(&p.workspace_id)
                .target("agent_revision", &id)
                .meta(json!({"agentId": a.id, "generation": a.draft_generation})),
        )?;
        let r = by_id(tx, &a.id, &id)?.ok_or_else(|| Error::internal_msg("candidate vanished"))?;
        Ok((true, detail(tx, &r)?))
    })
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PublishInput {
    pub expected_draft_generation: i64,
    pub expected_published_revision_id: Option<String>,
    pub idempotency_key: String,
}

/// Problems that make a candidate unpublishable (422), and warnings that do not.
fn validate(app: &App, c: &Conn, ws: &WorkspaceId, snap: &Snapshot) -> Result<(Vec<Value>, Vec<Value>)> {
    let (mut errors, mut warnings) = (Vec::new(), Vec::new());
    if let Some(m) = snap.pointer("/settings/chatModelOverride").filter(|v| !v.is_null())
        && let Some(why) = crate::models::resolve::unusable(app, ws, m["provider"].as_str().unwrap_or(""))?
    {
        errors.push(json!({"code": "chat_model_unavailable", "message": why}));
    }
    if let Some(ids) = snap.pointer("/settings/sourceScope/sourceIds").and_then(Value::as_array) {
        for id in ids.iter().filter_map(Value::as_str) {
            if !crate::documents::source_exists(c, ws, id)? {
                errors.push(json!({"code": "source_missing", "message": format!("the source scope names a source that no longer exists ({id})")}));
            }
        }
    }
    let skills: Vec<&Value> = snap["skills"].as_array().map(|a| a.iter().collect()).unwrap_or_default();
    let names: Vec<&str> =
        snap["directives"].as_array().into_iter().flatten().filter_map(|d| d["name"].as_str()).collect();
    for d in snap["directives"].as_array().into_iter().flatten() {
        if let Some(b) = d["binding"]["skillName"].as_str() {
            let ok = skills
                .iter()
                .any(|s| s["name"] == b && s["enabled"] == true && s["invocationMode"] == "agent_selectable");
            if !ok {
                warnings.push(json!({"code": "binding_unknown_skill", "directive": d["name"], "skillName": b, "message": format!("directive `{}` binds `#{b}`, which is missing or disabled; its action still applies", d["name"].as_str().unwrap_or(""))}));
            }
        }
        for dep in d["dependsOn"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            if !names.contains(&dep) {
                warnings.push(json!({"code": "unknown_dependency", "directive": d["name"], "message": format!("depends on `{dep}`, which does not exist")}));
            }
        }
    }
    Ok((errors, warnings))
}

pub fn publish(
    app: &App,
    p: &Principal,
    actor: &Actor,
    agent_id: &str,
    revision_id: &str,
    i: PublishInput,
) -> Result<RevisionDetail> {
    p.require(Perm::AgentsManage)?;
    let key = i.idempotency_key.trim().to_string();
    if key.is_empty() || key.chars().count() > 200 {
        return Err(Error::invalid_field("idempotencyKey", "idempotencyKey must be 1 to 200 characters"));
    }
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let a = get_in(tx, &p.workspace_id, agent_id)?;
        if let Some(rid) = store::published_by_key(tx, &a.id, &key)? {
            if rid != revision_id {
                return Err(Error::conflict("this idempotencyKey was used to publish another revision").with_details(json!({"revisionId": rid})));
            }
            let r = by_id(tx, &a.id, &rid)?.ok_or_else(|| Error::not_found("revision"))?;
            return detail(tx, &r);
        }
        let r = by_id(tx, &a.id, revision_id)?.ok_or_else(|| Error::not_found("revision"))?;
        let current = json!({"currentDraftGeneration": a.draft_generation, "currentPublishedRevisionId": a.published_revision_id});
        if r.kind == "published" {
            return Err(conflict(format!("revision {} is already published", r.label()), current));
        }
        if r.generation != i.expected_draft_generation || a.draft_generation != i.expected_draft_generation {
            return Err(conflict(
                format!("the draft changed: it is at generation {}, this candidate is generation {}", a.draft_generation, r.generation),
                current,
            ));
        }
        if a.published_revision_id != i.expected_published_revision_id {
            return Err(conflict("another revision was published meanwhile".into(), current));
        }
        let (errors, _) = validate(app, tx, &p.workspace_id, &r.snapshot)?;
        if !errors.is_empty() {
            return Err(Error::new(ErrorCode::RevisionInvalid, "this revision cannot be published").with_details(json!({"errors": errors})));
        }
        let version = store::publish_revision(tx, &a.id, &r.id, &key, &now)?;
        audit::record(tx, &now, actor, Event::new("agent.revision.published").workspace(&p.workspace_id).target("agent_revision", &r.id).meta(json!({"agentId": a.id, "version": version})))?;
        let r = by_id(tx, &a.id, &r.id)?.ok_or_else(|| Error::internal_msg("revision vanished"))?;
        detail(tx, &r)
    })
}

/// The agent's candidates, newest first (and its published revisions with `include_published`).
pub fn list(app: &App, p: &Principal, agent_id: &str, include_published: bool) -> Result<Vec<Revision>> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| {
        let a = get_in(c, &p.workspace_id, agent_id)?;
        store::revisions(c, &a.id, include_published)
    })
}

pub fn get(app: &App, p: &Principal, agent_id: &str, revision_id: &str) -> Result<RevisionDetail> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| {
        let a = get_in(c, &p.workspace_id, agent_id)?;
        let r = by_id(c, &a.id, revision_id)?.ok_or_else(|| Error::not_found("revision"))?;
        detail(c, &r)
    })
}

fn detail(c: &Conn, r: &Revision) -> Result<RevisionDetail> {
    let base = match &r.base_published_revision_id {
        Some(id) if *id != r.id => snapshot_of(c, id)?.unwrap_or(json!({})),
        _ => json!({}),
    };
    Ok(RevisionDetail { revision: r.clone(), base })
}
