//! Revisions: immutable snapshots of what an agent is (settings, directives, skills,
//! context-variable enablements; routines when they exist). One candidate per draft generation;
//! publishing a candidate gives it the next version (v1, v2, …) and makes it what new
//! conversations use on every channel. Running conversations keep the revision they started with.

use rusqlite::{Connection, OptionalExtension, params};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Agent, context, directives, get_in, skills};
use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, ErrorCode, Result};
use crate::ids::WorkspaceId;
use crate::storage::Tx;

pub const SNAPSHOT_FORMAT: u32 = 1;

#[derive(Debug, Clone)]
pub struct Revision {
    pub id: String,
    pub agent_id: String,
    pub generation: i64,
    pub kind: String,
    pub version_number: Option<i64>,
    pub snapshot: Value,
    pub base_published_revision_id: Option<String>,
    pub created_at: String,
    pub published_at: Option<String>,
}

const COLS: &str =
    "id, agent_id, generation, kind, version_number, snapshot, base_published_revision_id, created_at, published_at";

fn row(r: &rusqlite::Row) -> rusqlite::Result<Revision> {
    Ok(Revision {
        id: r.get(0)?,
        agent_id: r.get(1)?,
        generation: r.get(2)?,
        kind: r.get(3)?,
        version_number: r.get(4)?,
        snapshot: serde_json::from_str(&r.get::<_, String>(5)?).unwrap_or(Value::Null),
        base_published_revision_id: r.get(6)?,
        created_at: r.get(7)?,
        published_at: r.get(8)?,
    })
}

fn by_id(c: &Connection, agent_id: &str, id: &str) -> Result<Option<Revision>> {
    Ok(c.query_row(
        &format!("SELECT {COLS} FROM agent_revisions WHERE agent_id = ?1 AND id = ?2"),
        params![agent_id, id],
        row,
    )
    .optional()?)
}

fn by_generation(c: &Connection, agent_id: &str, generation: i64) -> Result<Option<Revision>> {
    Ok(c.query_row(
        &format!("SELECT {COLS} FROM agent_revisions WHERE agent_id = ?1 AND generation = ?2"),
        params![agent_id, generation],
        row,
    )
    .optional()?)
}

impl Revision {
    pub fn summary(&self) -> Value {
        let label = match self.version_number {
            Some(v) => format!("v{v}"),
            None => format!("Draft · {}", self.created_at),
        };
        json!({"id": self.id, "agentId": self.agent_id, "label": label, "kind": self.kind, "versionNumber": self.version_number,
               "generation": self.generation, "createdAt": self.created_at, "publishedAt": self.published_at})
    }
}

/// What the agent is right now (the draft), as a snapshot.
pub fn snapshot(c: &Connection, a: &Agent) -> Result<Value> {
    let settings = serde_json::to_value(&a.settings)?;
    let mut enabled_vars: Vec<String> = context::enablements(c, &a.id)?
        .iter()
        .filter(|e| e["enabled"] == true)
        .filter_map(|e| e["contextVariableId"].as_str().map(str::to_string))
        .collect();
    enabled_vars.sort();
    Ok(json!({
        "snapshotFormatVersion": SNAPSHOT_FORMAT,
        "name": a.name,
        "customInstruction": a.settings.custom_instruction,
        "greeting": {"instruction": a.settings.greeting_instruction, "proactive": a.settings.proactive_greeting_enabled},
        "settings": settings,
        "directives": directives::snapshot(c, &a.id)?,
        "routines": [],
        "skills": skills::snapshot(c, &a.id)?,
        "contextVariableEnablements": context::enablements(c, &a.id)?.into_iter().map(|mut e| { e.as_object_mut().map(|m| m.remove("updatedAt")); e }).collect::<Vec<_>>(),
        "enabledContextVariableIds": enabled_vars,
    }))
}

fn insert(tx: &Tx, a: &Agent, kind: &str, version: Option<i64>, snap: &Value, now: &str) -> Result<String> {
    let id = crate::ids::new_id();
    tx.execute(
        &format!("INSERT INTO agent_revisions ({COLS}, workspace_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"),
        params![
            id,
            a.id,
            a.draft_generation,
            kind,
            version,
            snap.to_string(),
            a.published_revision_id,
            now,
            version.map(|_| now),
            a.workspace_id.0
        ],
    )?;
    Ok(id)
}

/// A new agent's initial configuration, published as v1.
pub fn publish_initial(tx: &Tx, agent_id: &str, ws: &WorkspaceId, now: &str) -> Result<()> {
    let a = get_in(tx, ws, agent_id)?;
    let snap = snapshot(tx, &a)?;
    let id = insert(tx, &a, "published", Some(1), &snap, now)?;
    tx.execute("UPDATE agents SET published_revision_id = ?2 WHERE id = ?1", params![agent_id, id])?;
    Ok(())
}

/// The revision new conversations of `agent_id` use: `(revision id, version, snapshot)`.
pub fn published(c: &Connection, agent_id: &str) -> Result<Option<(String, i64, Value)>> {
    Ok(c.query_row(
        "SELECT r.id, r.version_number, r.snapshot FROM agents a JOIN agent_revisions r ON r.id = a.published_revision_id WHERE a.id = ?1",
        [agent_id],
        |r| Ok((r.get(0)?, r.get::<_, Option<i64>>(1)?.unwrap_or(0), serde_json::from_str(&r.get::<_, String>(2)?).unwrap_or(Value::Null))),
    )
    .optional()?)
}

/// A revision's snapshot by id (for conversations that started on it).
pub fn snapshot_of(c: &Connection, revision_id: &str) -> Result<Option<Value>> {
    Ok(c.query_row("SELECT snapshot FROM agent_revisions WHERE id = ?1", [revision_id], |r| r.get::<_, String>(0))
        .optional()?
        .and_then(|s| serde_json::from_str(&s).ok()))
}

/// A revision of `agent_id` by id: `(version number, snapshot)`.
pub fn snapshot_with_version(
    c: &Connection,
    agent_id: &str,
    revision_id: &str,
) -> Result<Option<(Option<i64>, Value)>> {
    Ok(by_id(c, agent_id, revision_id)?.map(|r| (r.version_number, r.snapshot)))
}

fn conflict(message: String, details: Value) -> Error {
    Error::new(ErrorCode::RevisionConflict, message).with_details(details)
}

pub fn state(app: &App, p: &Principal, agent_id: &str) -> Result<Value> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| {
        let a = get_in(c, &p.workspace_id, agent_id)?;
        let published = match &a.published_revision_id {
            Some(id) => by_id(c, &a.id, id)?,
            None => None,
        };
        let current = by_generation(c, &a.id, a.draft_generation)?;
        let draft_is_published = current.as_ref().is_some_and(|r| r.kind == "published");
        let status = if draft_is_published { "published" } else { "draft_changes" };
        Ok(json!({
            "agentId": a.id,
            "status": status,
            "draft": {"generation": a.draft_generation, "basePublishedRevisionId": a.published_revision_id, "updatedAt": a.draft_updated_at,
                      "candidateRevisionId": current.as_ref().filter(|r| r.kind == "candidate").map(|r| r.id.clone())},
            "publishedRevision": published.map(|r| r.summary()),
            "canPublish": !draft_is_published,
            "proactiveGreetingEnabled": a.settings.proactive_greeting_enabled,
        }))
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
pub fn candidate(app: &App, p: &Principal, actor: &Actor, agent_id: &str, i: CandidateInput) -> Result<(bool, Value)> {
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
fn validate(app: &App, c: &Connection, ws: &WorkspaceId, snap: &Value) -> Result<(Vec<Value>, Vec<Value>)> {
    let (mut errors, mut warnings) = (Vec::new(), Vec::new());
    if let Some(m) = snap.pointer("/settings/chatModelOverride").filter(|v| !v.is_null())
        && let Some(why) = crate::models::resolve::unusable(app, ws, m["provider"].as_str().unwrap_or(""))?
    {
        errors.push(json!({"code": "chat_model_unavailable", "message": why}));
    }
    if let Some(ids) = snap.pointer("/settings/sourceScope/sourceIds").and_then(Value::as_array) {
        for id in ids.iter().filter_map(Value::as_str) {
            let exists: Option<i64> = c
                .query_row("SELECT 1 FROM sources WHERE id = ?1 AND workspace_id = ?2", params![id, ws.0], |r| r.get(0))
                .optional()?;
            if exists.is_none() {
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
) -> Result<Value> {
    p.require(Perm::AgentsManage)?;
    let key = i.idempotency_key.trim().to_string();
    if key.is_empty() || key.chars().count() > 200 {
        return Err(Error::invalid_field("idempotencyKey", "idempotencyKey must be 1 to 200 characters"));
    }
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let a = get_in(tx, &p.workspace_id, agent_id)?;
        let done: Option<String> = tx
            .query_row("SELECT revision_id FROM agent_publish_commands WHERE agent_id = ?1 AND idempotency_key = ?2", params![a.id, key], |r| r.get(0))
            .optional()?;
        if let Some(rid) = done {
            if rid != revision_id {
                return Err(Error::conflict("this idempotencyKey was used to publish another revision").with_details(json!({"revisionId": rid})));
            }
            let r = by_id(tx, &a.id, &rid)?.ok_or_else(|| Error::not_found("revision"))?;
            return detail(tx, &r);
        }
        let r = by_id(tx, &a.id, revision_id)?.ok_or_else(|| Error::not_found("revision"))?;
        let current = json!({"currentDraftGeneration": a.draft_generation, "currentPublishedRevisionId": a.published_revision_id});
        if r.kind == "published" {
            return Err(conflict(format!("revision {} is already published", r.summary()["label"].as_str().unwrap_or("")), current));
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
        let version: i64 = tx.query_row("SELECT coalesce(max(version_number), 0) + 1 FROM agent_revisions WHERE agent_id = ?1", [&a.id], |r| r.get(0))?;
        tx.execute("UPDATE agent_revisions SET kind = 'published', version_number = ?2, published_at = ?3 WHERE id = ?1", params![r.id, version, now])?;
        tx.execute("UPDATE agents SET published_revision_id = ?2, updated_at = ?3 WHERE id = ?1", params![a.id, r.id, now])?;
        tx.execute("INSERT INTO agent_publish_commands (agent_id, idempotency_key, revision_id, created_at) VALUES (?1, ?2, ?3, ?4)", params![a.id, key, r.id, now])?;
        audit::record(tx, &now, actor, Event::new("agent.revision.published").workspace(&p.workspace_id).target("agent_revision", &r.id).meta(json!({"agentId": a.id, "version": version})))?;
        let r = by_id(tx, &a.id, &r.id)?.ok_or_else(|| Error::internal_msg("revision vanished"))?;
        detail(tx, &r)
    })
}

pub fn list(app: &App, p: &Principal, agent_id: &str, include_published: bool) -> Result<Value> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| {
        let a = get_in(c, &p.workspace_id, agent_id)?;
        let sql = if include_published {
            format!("SELECT {COLS} FROM agent_revisions WHERE agent_id = ?1 ORDER BY generation DESC")
        } else {
            format!(
                "SELECT {COLS} FROM agent_revisions WHERE agent_id = ?1 AND kind = 'candidate' ORDER BY generation DESC"
            )
        };
        let mut st = c.prepare(&sql)?;
        let rs: Vec<Revision> = st.query_map([&a.id], row)?.collect::<rusqlite::Result<_>>()?;
        Ok(json!({"revisions": rs.iter().map(Revision::summary).collect::<Vec<_>>()}))
    })
}

pub fn get(app: &App, p: &Principal, agent_id: &str, revision_id: &str) -> Result<Value> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| {
        let a = get_in(c, &p.workspace_id, agent_id)?;
        let r = by_id(c, &a.id, revision_id)?.ok_or_else(|| Error::not_found("revision"))?;
        detail(c, &r)
    })
}

fn diff_by_id(before: &Value, after: &Value, key: &str, id_field: &str) -> Vec<Value> {
    let index = |v: &Value| -> Vec<(String, Value)> {
        v[key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| (x[id_field].as_str().unwrap_or("").to_string(), x.clone()))
            .collect()
    };
    let (b, a) = (index(before), index(after));
    let mut out = Vec::new();
    for (id, av) in &a {
        match b.iter().find(|(i, _)| i == id) {
            None => out.push(json!({"id": id, "change": "added", "after": av})),
            Some((_, bv)) if bv != av => out.push(json!({"id": id, "change": "changed", "before": bv, "after": av})),
            _ => {}
        }
    }
    for (id, bv) in &b {
        if !a.iter().any(|(i, _)| i == id) {
            out.push(json!({"id": id, "change": "removed", "before": bv}));
        }
    }
    out
}

fn detail(c: &Connection, r: &Revision) -> Result<Value> {
    let base = match &r.base_published_revision_id {
        Some(id) if *id != r.id => snapshot_of(c, id)?.unwrap_or(json!({})),
        _ => json!({}),
    };
    let s = &r.snapshot;
    let text_change =
        |k: &str| json!({"before": base.pointer(k), "after": s.pointer(k), "changed": base.pointer(k) != s.pointer(k)});
    let mut v = r.summary();
    v["snapshotFormatVersion"] = json!(SNAPSHOT_FORMAT);
    v["scope"] = json!({"customInstructions": true, "directives": true, "routines": true, "contextVariableEnablements": true, "greeting": true, "skills": true, "settings": true});
    v["basePublishedRevisionId"] = json!(r.base_published_revision_id);
    v["snapshot"] = s.clone();
    v["enabledContextVariableIds"] = s["enabledContextVariableIds"].clone();
    v["scopedChanges"] = json!({
        "customInstruction": text_change("/customInstruction"),
        "greeting": text_change("/greeting"),
        "directives": diff_by_id(&base, s, "directives", "id"),
        "skills": diff_by_id(&base, s, "skills", "id"),
        "routines": [],
        "contextVariableEnablements": diff_by_id(&base, s, "contextVariableEnablements", "contextVariableId"),
    });
    let warnings: Vec<Value> = s["directives"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| {
            let b = d["binding"]["skillName"].as_str()?;
            let ok = s["skills"].as_array().into_iter().flatten().any(|k| k["name"] == b && k["enabled"] == true);
            (!ok).then(|| json!({"code": "binding_unknown_skill", "directive": d["name"], "skillName": b}))
        })
        .collect();
    v["dependencyWarnings"] = json!(warnings);
    Ok(v)
}
