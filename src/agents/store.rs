//! SQL for agents, their logos, skills, directives, context variables and revisions. Private to
//! `agents`: other modules call the agents functions.

use rusqlite::{OptionalExtension, params};

use super::context::{Enablement, Stored, Variable};
use super::directives::Directive;
use super::revisions::{Revision, Snapshot};
use super::skills::Skill;
use super::{Agent, Logo, Settings};
use crate::error::Result;
use crate::ids::WorkspaceId;
use crate::storage::{Conn, Row, Tx};

// -- agents

const COLS: &str = "id, workspace_id, name, is_default, settings, draft_generation, draft_updated_at, published_revision_id, created_at, updated_at";

fn row(r: &Row) -> rusqlite::Result<Agent> {
    let raw: String = r.get(4)?;
    Ok(Agent {
        id: r.get(0)?,
        workspace_id: WorkspaceId(r.get(1)?),
        name: r.get(2)?,
        is_default: r.get::<_, i64>(3)? == 1,
        settings: serde_json::from_str(&raw).unwrap_or_default(),
        draft_generation: r.get(5)?,
        draft_updated_at: r.get(6)?,
        published_revision_id: r.get(7)?,
        created_at: r.get(8)?,
        updated_at: r.get(9)?,
    })
}

pub(super) fn find(c: &Conn, ws: &WorkspaceId, id: &str) -> Result<Option<Agent>> {
    Ok(c.query_row(&format!("SELECT {COLS} FROM agents WHERE id = ?1 AND workspace_id = ?2"), params![id, ws.0], row)
        .optional()?)
}

pub(super) fn default_agent(c: &Conn, ws: &WorkspaceId) -> Result<Option<Agent>> {
    Ok(c.query_row(&format!("SELECT {COLS} FROM agents WHERE workspace_id = ?1 AND is_default = 1"), [&ws.0], row)
        .optional()?)
}

pub(super) fn list(c: &Conn, ws: &WorkspaceId) -> Result<Vec<Agent>> {
    let mut st = c.prepare(&format!("SELECT {COLS} FROM agents WHERE workspace_id = ?1 ORDER BY created_at, id"))?;
    Ok(st.query_map([&ws.0], row)?.collect::<rusqlite::Result<_>>()?)
}

pub(super) fn insert(
    tx: &Tx,
    id: &str,
    ws: &WorkspaceId,
    name: &str,
    settings: &Settings,
    is_default: bool,
    now: &str,
) -> Result<()> {
    tx.execute(
        "INSERT INTO agents (id, workspace_id, name, is_default, settings, draft_generation, draft_updated_at, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6, ?6, ?6)",
        params![id, ws.0, name, is_default as i64, serde_json::to_string(settings)?, now],
    )?;
    Ok(())
}

pub(super) fn update(tx: &Tx, id: &str, name: &str, settings: &Settings, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE agents SET name = ?2, settings = ?3, updated_at = ?4 WHERE id = ?1",
        params![id, name, serde_json::to_string(settings)?, now],
    )?;
    Ok(())
}

pub(super) fn touch(tx: &Tx, agent_id: &str, now: &str) -> Result<i64> {
    tx.execute(
        "UPDATE agents SET draft_generation = draft_generation + 1, draft_updated_at = ?2, updated_at = ?2 WHERE id = ?1",
        params![agent_id, now],
    )?;
    Ok(tx.query_row("SELECT draft_generation FROM agents WHERE id = ?1", [agent_id], |r| r.get(0))?)
}

/// Deletes an agent with everything under it (skills, directives, enablements, routines,
/// revisions, logo: by foreign key); whether there was one.
pub(super) fn delete_agent(tx: &Tx, ws: &WorkspaceId, id: &str) -> Result<bool> {
    Ok(tx.execute("DELETE FROM agents WHERE id = ?1 AND workspace_id = ?2 AND is_default = 0", params![id, ws.0])? > 0)
}

pub(super) fn make_default(tx: &Tx, ws: &WorkspaceId, id: &str, now: &str) -> Result<()> {
    tx.execute("UPDATE agents SET is_default = 0 WHERE workspace_id = ?1 AND is_default = 1", [&ws.0])?;
    tx.execute("UPDATE agents SET is_default = 1, updated_at = ?2 WHERE id = ?1", params![id, now])?;
    Ok(())
}

// -- logos

pub(super) fn logo_info(c: &Conn, id: &str) -> Result<Option<Logo>> {
    Ok(c.query_row(
        "SELECT mime_type, filename, length(bytes), updated_at FROM agent_logos WHERE agent_id = ?1",
        [id],
        |r| Ok(Logo { mime_type: r.get(0)?, filename: r.get(1)?, size_bytes: r.get(2)?, updated_at: r.get(3)? }),
    )
    .optional()?)
}

pub(super) fn logo_bytes(c: &Conn, id: &str) -> Result<Option<(String, Vec<u8>)>> {
    Ok(c.query_row("SELECT mime_type, bytes FROM agent_logos WHERE agent_id = ?1", [id], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })
    .optional()?)
}

pub(super) fn put_logo(
    tx: &Tx,
    id: &str,
    mime: &str,
    filename: Option<&str>,
    bytes: &[u8],
    sha: &str,
    now: &str,
) -> Result<()> {
    tx.execute(
        "INSERT INTO agent_logos (agent_id, mime_type, filename, bytes, sha256, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (agent_id) DO UPDATE SET mime_type = excluded.mime_type, filename = excluded.filename, bytes = excluded.bytes, sha256 = excluded.sha256, updated_at = excluded.updated_at",
        params![id, mime, filename, bytes, sha, now],
    )?;
    tx.execute("UPDATE agents SET updated_at = ?2 WHERE id = ?1", params![id, now])?;
    Ok(())
}

/// Whether there was a logo to delete.
pub(super) fn delete_logo(tx: &Tx, id: &str) -> Result<bool> {
    Ok(tx.execute("DELETE FROM agent_logos WHERE agent_id = ?1", [id])? > 0)
}

// -- skills

const SKILL_COLS: &str =
    "id, agent_id, name, capability, target, config, invocation_mode, enabled, created_at, updated_at";

fn skill_row(r: &Row) -> rusqlite::Result<Skill> {
    Ok(Skill {
        id: r.get(0)?,
        agent_id: r.get(1)?,
        name: r.get(2)?,
        capability: r.get(3)?,
        target: r.get::<_, Option<String>>(4)?.and_then(|s| serde_json::from_str(&s).ok()),
        config: serde_json::from_str(&r.get::<_, String>(5)?).unwrap_or_default(),
        invocation_mode: r.get(6)?,
        enabled: r.get::<_, i64>(7)? == 1,
        created_at: r.get(8)?,
        updated_at: r.get(9)?,
    })
}

pub(super) fn skills_of(c: &Conn, agent_id: &str) -> Result<Vec<Skill>> {
    let mut st = c.prepare(&format!("SELECT {SKILL_COLS} FROM agent_skills WHERE agent_id = ?1 ORDER BY name"))?;
    Ok(st.query_map([agent_id], skill_row)?.collect::<rusqlite::Result<_>>()?)
}

pub(super) fn skill_by_name(c: &Conn, agent_id: &str, name: &str) -> Result<Option<Skill>> {
    let sql = format!("SELECT {SKILL_COLS} FROM agent_skills WHERE agent_id = ?1 AND name = ?2");
    Ok(c.query_row(&sql, params![agent_id, name], skill_row).optional()?)
}

pub(super) fn skill_by_id(c: &Conn, agent_id: &str, id: &str) -> Result<Option<Skill>> {
    let sql = format!("SELECT {SKILL_COLS} FROM agent_skills WHERE agent_id = ?1 AND id = ?2");
    Ok(c.query_row(&sql, params![agent_id, id], skill_row).optional()?)
}

fn json_text(v: &impl serde::Serialize) -> Result<String> {
    Ok(serde_json::to_string(v)?)
}

pub(super) fn insert_skill(tx: &Tx, ws: &WorkspaceId, s: &Skill) -> Result<()> {
    let target = s.target.as_ref().map(json_text).transpose()?;
    tx.execute(
        "INSERT INTO agent_skills (id, agent_id, workspace_id, name, capability, target, config, invocation_mode, enabled, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10)",
        params![s.id, s.agent_id, ws.0, s.name, s.capability, target, json_text(&s.config)?, s.invocation_mode, s.enabled as i64, s.created_at],
    )?;
    Ok(())
}

pub(super) fn update_skill(tx: &Tx, s: &Skill) -> Result<()> {
    let target = s.target.as_ref().map(json_text).transpose()?;
    tx.execute(
        "UPDATE agent_skills SET name = ?3, target = ?4, config = ?5, invocation_mode = ?6, enabled = ?7, updated_at = ?8 WHERE agent_id = ?1 AND id = ?2",
        params![s.agent_id, s.id, s.name, target, json_text(&s.config)?, s.invocation_mode, s.enabled as i64, s.updated_at],
    )?;
    Ok(())
}

/// Disables the context-variable enablements a skill resolves.
pub(super) fn disable_resolved_variables(tx: &Tx, skill_id: &str, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE agent_context_variables SET enabled = 0, updated_at = ?2 WHERE resolver_skill_id = ?1",
        params![skill_id, now],
    )?;
    Ok(())
}

/// Deletes a skill with the enablements it resolves.
pub(super) fn delete_skill(tx: &Tx, skill_id: &str) -> Result<()> {
    tx.execute("DELETE FROM agent_context_variables WHERE resolver_skill_id = ?1", [skill_id])?;
    tx.execute("DELETE FROM agent_skills WHERE id = ?1", [skill_id])?;
    Ok(())
}

// -- directives

const DIRECTIVE_COLS: &str = "id, agent_id, name, body, created_at, updated_at";

fn directive_row(r: &Row) -> rusqlite::Result<Directive> {
    let raw: String = r.get(3)?;
    Ok(Directive {
        id: r.get(0)?,
        agent_id: r.get(1)?,
        name: r.get(2)?,
        body: serde_json::from_str(&raw)
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(3, rusqlite::types::Type::Text, Box::new(e)))?,
        created_at: r.get(4)?,
        updated_at: r.get(5)?,
    })
}

pub(super) fn directives_of(c: &Conn, agent_id: &str) -> Result<Vec<Directive>> {
    let sql = format!("SELECT {DIRECTIVE_COLS} FROM directives WHERE agent_id = ?1 ORDER BY created_at, id");
    let mut st = c.prepare(&sql)?;
    Ok(st.query_map([agent_id], directive_row)?.collect::<rusqlite::Result<_>>()?)
}

pub(super) fn directive_by_id(c: &Conn, agent_id: &str, id: &str) -> Result<Option<Directive>> {
    let sql = format!("SELECT {DIRECTIVE_COLS} FROM directives WHERE agent_id = ?1 AND id = ?2");
    Ok(c.query_row(&sql, params![agent_id, id], directive_row).optional()?)
}

/// Whether the agent has a directive of that name.
pub(super) fn directive_named(c: &Conn, agent_id: &str, name: &str) -> Result<bool> {
    Ok(c.query_row("SELECT 1 FROM directives WHERE agent_id = ?1 AND name = ?2", params![agent_id, name], |_| Ok(()))
        .optional()?
        .is_some())
}

pub(super) fn insert_directive(tx: &Tx, ws: &WorkspaceId, d: &Directive) -> Result<()> {
    tx.execute(
        "INSERT INTO directives (id, agent_id, workspace_id, name, body, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
        params![d.id, d.agent_id, ws.0, d.name, json_text(&d.body)?, d.created_at],
    )?;
    Ok(())
}

pub(super) fn update_directive(tx: &Tx, d: &Directive) -> Result<()> {
    tx.execute(
        "UPDATE directives SET name = ?3, body = ?4, updated_at = ?5 WHERE agent_id = ?1 AND id = ?2",
        params![d.agent_id, d.id, d.name, json_text(&d.body)?, d.updated_at],
    )?;
    Ok(())
}

pub(super) fn delete_directive(tx: &Tx, id: &str) -> Result<()> {
    tx.execute("DELETE FROM directives WHERE id = ?1", [id])?;
    Ok(())
}

// -- context variables

const VARIABLE_COLS: &str =
    "id, name, description, value_type, trust_tier, sensitivity, default_surfacing, created_at, updated_at";

fn variable_row(r: &Row) -> rusqlite::Result<Variable> {
    Ok(Variable {
        id: r.get(0)?,
        name: r.get(1)?,
        description: r.get(2)?,
        value_type: r.get(3)?,
        trust_tier: r.get(4)?,
        sensitivity: r.get(5)?,
        default_surfacing: r.get(6)?,
        created_at: r.get(7)?,
        updated_at: r.get(8)?,
    })
}

pub(super) fn variable(c: &Conn, ws: &WorkspaceId, id: &str) -> Result<Option<Variable>> {
    let sql = format!("SELECT {VARIABLE_COLS} FROM context_variables WHERE id = ?1 AND workspace_id = ?2");
    Ok(c.query_row(&sql, params![id, ws.0], variable_row).optional()?)
}

pub(super) fn variables(c: &Conn, ws: &WorkspaceId) -> Result<Vec<Variable>> {
    let mut st =
        c.prepare(&format!("SELECT {VARIABLE_COLS} FROM context_variables WHERE workspace_id = ?1 ORDER BY name"))?;
    Ok(st.query_map([&ws.0], variable_row)?.collect::<rusqlite::Result<_>>()?)
}

/// Inserts the variable; false when the name is taken.
pub(super) fn insert_variable(tx: &Tx, ws: &WorkspaceId, v: &Variable) -> Result<bool> {
    let n = tx.execute(
        "INSERT INTO context_variables (id, workspace_id, name, description, value_type, trust_tier, sensitivity, default_surfacing, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9) ON CONFLICT (workspace_id, name) DO NOTHING",
        params![v.id, ws.0, v.name, v.description, v.value_type, v.trust_tier, v.sensitivity, v.default_surfacing, v.created_at],
    )?;
    Ok(n > 0)
}

/// Whether another variable of the workspace has this name.
pub(super) fn variable_named_other(c: &Conn, ws: &WorkspaceId, name: &str, id: &str) -> Result<bool> {
    Ok(c.query_row(
        "SELECT 1 FROM context_variables WHERE workspace_id = ?1 AND name = ?2 AND id <> ?3",
        params![ws.0, name, id],
        |_| Ok(()),
    )
    .optional()?
    .is_some())
}

pub(super) fn update_variable(tx: &Tx, v: &Variable) -> Result<()> {
    tx.execute(
        "UPDATE context_variables SET name = ?2, description = ?3, value_type = ?4, trust_tier = ?5, sensitivity = ?6, default_surfacing = ?7, updated_at = ?8 WHERE id = ?1",
        params![v.id, v.name, v.description, v.value_type, v.trust_tier, v.sensitivity, v.default_surfacing, v.updated_at],
    )?;
    Ok(())
}

pub(super) fn delete_variable(tx: &Tx, id: &str) -> Result<()> {
    tx.execute("DELETE FROM context_variables WHERE id = ?1", [id])?;
    Ok(())
}

/// The agents that enable a variable.
pub(super) fn agents_enabling(c: &Conn, variable_id: &str) -> Result<Vec<String>> {
    let mut st = c.prepare("SELECT agent_id FROM agent_context_variables WHERE variable_id = ?1")?;
    Ok(st.query_map([variable_id], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?)
}

pub(super) fn enablements(c: &Conn, agent_id: &str) -> Result<Vec<Enablement>> {
    let mut st = c.prepare(
        "SELECT e.variable_id, v.name, e.source, e.surfacing, e.enabled, e.resolver_skill_id, e.updated_at
         FROM agent_context_variables e JOIN context_variables v ON v.id = e.variable_id WHERE e.agent_id = ?1 ORDER BY v.name",
    )?;
    let rows = st.query_map([agent_id], |r| {
        Ok(Enablement {
            variable_id: r.get(0)?,
            name: r.get(1)?,
            source: r.get(2)?,
            surfacing: r.get(3)?,
            enabled: r.get::<_, i64>(4)? == 1,
            resolver_skill_id: r.get(5)?,
            updated_at: r.get(6)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub(super) fn put_enablement(tx: &Tx, agent_id: &str, e: &Enablement) -> Result<()> {
    tx.execute(
        "INSERT INTO agent_context_variables (agent_id, variable_id, source, surfacing, enabled, resolver_skill_id, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (agent_id, variable_id) DO UPDATE SET source = excluded.source, surfacing = excluded.surfacing, enabled = excluded.enabled,
            resolver_skill_id = excluded.resolver_skill_id, updated_at = excluded.updated_at",
        params![agent_id, e.variable_id, e.source, e.surfacing, e.enabled as i64, e.resolver_skill_id, e.updated_at],
    )?;
    Ok(())
}

/// Whether there was an enablement to delete.
pub(super) fn delete_enablement(tx: &Tx, agent_id: &str, variable_id: &str) -> Result<bool> {
    let n = tx.execute(
        "DELETE FROM agent_context_variables WHERE agent_id = ?1 AND variable_id = ?2",
        params![agent_id, variable_id],
    )?;
    Ok(n > 0)
}

// -- context values

fn stored_row(r: &Row, at: usize) -> rusqlite::Result<Stored> {
    Ok(Stored { data: r.get(at)?, nonce: r.get(at + 1)?, ciphertext: r.get(at + 2)? })
}

/// A variable's values: `(scope type, scope id, stored value, updated at)`.
pub(super) fn values_of(c: &Conn, variable_id: &str) -> Result<Vec<(String, String, Stored, String)>> {
    let mut st = c.prepare(
        "SELECT scope_type, scope_id, data, nonce, ciphertext, updated_at FROM context_values WHERE variable_id = ?1 ORDER BY scope_type, scope_id",
    )?;
    let rows = st.query_map([variable_id], |r| Ok((r.get(0)?, r.get(1)?, stored_row(r, 2)?, r.get(5)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub(super) fn value_at(c: &Conn, variable_id: &str, scope_type: &str, scope_id: &str) -> Result<Option<Stored>> {
    Ok(c.query_row(
        "SELECT data, nonce, ciphertext FROM context_values WHERE variable_id = ?1 AND scope_type = ?2 AND scope_id = ?3",
        params![variable_id, scope_type, scope_id],
        |r| stored_row(r, 0),
    )
    .optional()?)
}

pub(super) fn put_value(
    tx: &Tx,
    variable_id: &str,
    scope_type: &str,
    scope_id: &str,
    v: &Stored,
    now: &str,
) -> Result<()> {
    tx.execute(
        "INSERT INTO context_values (variable_id, scope_type, scope_id, data, nonce, ciphertext, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (variable_id, scope_type, scope_id) DO UPDATE SET data = excluded.data, nonce = excluded.nonce,
            ciphertext = excluded.ciphertext, updated_at = excluded.updated_at",
        params![variable_id, scope_type, scope_id, v.data, v.nonce, v.ciphertext, now],
    )?;
    Ok(())
}

/// Rewrites a value's storage (sealed or clear) without touching its time.
pub(super) fn restore_value(tx: &Tx, variable_id: &str, scope_type: &str, scope_id: &str, v: &Stored) -> Result<()> {
    tx.execute(
        "UPDATE context_values SET data = ?4, nonce = ?5, ciphertext = ?6 WHERE variable_id = ?1 AND scope_type = ?2 AND scope_id = ?3",
        params![variable_id, scope_type, scope_id, v.data, v.nonce, v.ciphertext],
    )?;
    Ok(())
}

/// Whether there was a value to delete.
pub(super) fn delete_value(tx: &Tx, variable_id: &str, scope_type: &str, scope_id: &str) -> Result<bool> {
    let n = tx.execute(
        "DELETE FROM context_values WHERE variable_id = ?1 AND scope_type = ?2 AND scope_id = ?3",
        params![variable_id, scope_type, scope_id],
    )?;
    Ok(n > 0)
}

/// A value of a sensitive variable still stored in clear: `(workspace, variable, scope type,
/// scope id, data)`.
pub(super) type ClearValue = (String, String, String, String, String);

pub(super) fn sensitive_values_in_clear(c: &Conn) -> Result<Vec<ClearValue>> {
    let mut st = c.prepare(
        "SELECT v.workspace_id, cv.variable_id, cv.scope_type, cv.scope_id, cv.data FROM context_values cv
         JOIN context_variables v ON v.id = cv.variable_id WHERE v.sensitivity = 'sensitive' AND cv.ciphertext IS NULL",
    )?;
    let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

// -- revisions

const REVISION_COLS: &str =
    "id, agent_id, generation, kind, version_number, snapshot, base_published_revision_id, created_at, published_at";

fn revision_row(r: &Row) -> rusqlite::Result<Revision> {
    Ok(Revision {
        id: r.get(0)?,
        agent_id: r.get(1)?,
        generation: r.get(2)?,
        kind: r.get(3)?,
        version_number: r.get(4)?,
        snapshot: serde_json::from_str(&r.get::<_, String>(5)?).unwrap_or(Snapshot::Null),
        base_published_revision_id: r.get(6)?,
        created_at: r.get(7)?,
        published_at: r.get(8)?,
    })
}

pub(super) fn revision(c: &Conn, agent_id: &str, id: &str) -> Result<Option<Revision>> {
    let sql = format!("SELECT {REVISION_COLS} FROM agent_revisions WHERE agent_id = ?1 AND id = ?2");
    Ok(c.query_row(&sql, params![agent_id, id], revision_row).optional()?)
}

pub(super) fn revision_of_generation(c: &Conn, agent_id: &str, generation: i64) -> Result<Option<Revision>> {
    let sql = format!("SELECT {REVISION_COLS} FROM agent_revisions WHERE agent_id = ?1 AND generation = ?2");
    Ok(c.query_row(&sql, params![agent_id, generation], revision_row).optional()?)
}

/// Candidates newest first (with the published revisions too when `include_published`).
pub(super) fn revisions(c: &Conn, agent_id: &str, include_published: bool) -> Result<Vec<Revision>> {
    let only = if include_published { "" } else { " AND kind = 'candidate'" };
    let sql = format!("SELECT {REVISION_COLS} FROM agent_revisions WHERE agent_id = ?1{only} ORDER BY generation DESC");
    let mut st = c.prepare(&sql)?;
    Ok(st.query_map([agent_id], revision_row)?.collect::<rusqlite::Result<_>>()?)
}

pub(super) fn insert_revision(tx: &Tx, ws: &WorkspaceId, r: &Revision) -> Result<()> {
    tx.execute(
        &format!("INSERT INTO agent_revisions ({REVISION_COLS}, workspace_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"),
        params![
            r.id,
            r.agent_id,
            r.generation,
            r.kind,
            r.version_number,
            r.snapshot.to_string(),
            r.base_published_revision_id,
            r.created_at,
            r.published_at,
            ws.0
        ],
    )?;
    Ok(())
}

/// Points the agent at its published revision (and stamps `updated_at` when given).
pub(super) fn set_published(tx: &Tx, agent_id: &str, revision_id: &str, now: Option<&str>) -> Result<()> {
    match now {
        None => {
            tx.execute("UPDATE agents SET published_revision_id = ?2 WHERE id = ?1", params![agent_id, revision_id])?
        }
        Some(now) => tx.execute(
            "UPDATE agents SET published_revision_id = ?2, updated_at = ?3 WHERE id = ?1",
            params![agent_id, revision_id, now],
        )?,
    };
    Ok(())
}

/// Publishes a candidate as the agent's next version, remembering the idempotency key.
/// Returns the version number.
pub(super) fn publish_revision(tx: &Tx, agent_id: &str, revision_id: &str, key: &str, now: &str) -> Result<i64> {
    let version: i64 = tx.query_row(
        "SELECT coalesce(max(version_number), 0) + 1 FROM agent_revisions WHERE agent_id = ?1",
        [agent_id],
        |r| r.get(0),
    )?;
    tx.execute(
        "UPDATE agent_revisions SET kind = 'published', version_number = ?2, published_at = ?3 WHERE id = ?1",
        params![revision_id, version, now],
    )?;
    set_published(tx, agent_id, revision_id, Some(now))?;
    tx.execute(
        "INSERT INTO agent_publish_commands (agent_id, idempotency_key, revision_id, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![agent_id, key, revision_id, now],
    )?;
    Ok(version)
}

/// The revision a publish command with this key published, if any.
pub(super) fn published_by_key(c: &Conn, agent_id: &str, key: &str) -> Result<Option<String>> {
    Ok(c.query_row(
        "SELECT revision_id FROM agent_publish_commands WHERE agent_id = ?1 AND idempotency_key = ?2",
        params![agent_id, key],
        |r| r.get(0),
    )
    .optional()?)
}

/// The agent's published revision: `(id, version, snapshot)`.
/// A published revision: `(id, version number, snapshot)`.
pub(super) type Published = (String, i64, Snapshot);

/// A published revision's columns from `at` on (the revision's id null: none).
fn published_cols(r: &Row, at: usize) -> rusqlite::Result<Option<Published>> {
    let Some(id) = r.get::<_, Option<String>>(at)? else { return Ok(None) };
    let version = r.get::<_, Option<i64>>(at + 1)?.unwrap_or(0);
    let snap =
        r.get::<_, Option<String>>(at + 2)?.and_then(|s| serde_json::from_str(&s).ok()).unwrap_or(Snapshot::Null);
    Ok(Some((id, version, snap)))
}

pub(super) fn published(c: &Conn, agent_id: &str) -> Result<Option<Published>> {
    Ok(c.query_row(
        "SELECT r.id, r.version_number, r.snapshot FROM agents a JOIN agent_revisions r ON r.id = a.published_revision_id WHERE a.id = ?1",
        [agent_id],
        |r| published_cols(r, 0),
    )
    .optional()?
    .flatten())
}

/// An agent of the workspace (by id; `None`: its default agent) with its published revision, in
/// one statement.
pub(super) fn with_published(
    c: &Conn,
    ws: &WorkspaceId,
    id: Option<&str>,
) -> Result<Option<(Agent, Option<Published>)>> {
    const JOINED: &str =
        "SELECT a.id, a.workspace_id, a.name, a.is_default, a.settings, a.draft_generation, a.draft_updated_at,
        a.published_revision_id, a.created_at, a.updated_at, r.id, r.version_number, r.snapshot
        FROM agents a LEFT JOIN agent_revisions r ON r.id = a.published_revision_id";
    let map = |r: &Row| Ok((row(r)?, published_cols(r, 10)?));
    let found = match id {
        Some(id) => c.query_row(&format!("{JOINED} WHERE a.id = ?1 AND a.workspace_id = ?2"), params![id, ws.0], map),
        None => c.query_row(&format!("{JOINED} WHERE a.workspace_id = ?1 AND a.is_default = 1"), [&ws.0], map),
    };
    Ok(found.optional()?)
}

pub(super) fn snapshot_of(c: &Conn, revision_id: &str) -> Result<Option<Snapshot>> {
    Ok(c.query_row("SELECT snapshot FROM agent_revisions WHERE id = ?1", [revision_id], |r| r.get::<_, String>(0))
        .optional()?
        .and_then(|s| serde_json::from_str(&s).ok()))
}
