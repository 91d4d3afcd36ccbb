//! Context variables: a workspace catalog of facts about the visitor or the situation (plan,
//! order id, …), enabled per agent (pushed by the caller, or resolved by one of the agent's
//! skills), with values set per scope and resolved most specific first: session → customer →
//! agent → workspace. Sensitive values are sealed at rest (AES-256-GCM with
//! `CONNECTOR_ENCRYPTION_KEY`, bound to workspace, variable and scope; without the key they cannot
//! be stored: 503 `encryption_not_configured`), never returned by the values API, traced or logged.

use rusqlite::{Connection, OptionalExtension, params};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{get_in, touch};
use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::crypto::{self, Sealed};
use crate::error::{Error, Result};
use crate::ids::WorkspaceId;

pub const SURFACING: [&str; 3] = ["always", "on_reference", "operator_only"];
pub const SCOPES: [&str; 4] = ["session", "customer", "agent", "workspace"];
const MAX_VALUE_BYTES: usize = 16 * 1024;

#[derive(Debug, Clone)]
pub struct Variable {
    pub id: String,
    pub name: String,
    pub description: String,
    pub value_type: String,
    pub trust_tier: String,
    pub sensitivity: String,
    pub default_surfacing: String,
    pub created_at: String,
    pub updated_at: String,
}

impl Variable {
    pub fn view(&self) -> Value {
        json!({"id": self.id, "name": self.name, "description": self.description, "valueType": self.value_type,
               "trustTier": self.trust_tier, "sensitivity": self.sensitivity, "defaultSurfacing": self.default_surfacing,
               "createdAt": self.created_at, "updatedAt": self.updated_at})
    }
    pub fn sensitive(&self) -> bool {
        self.sensitivity == "sensitive"
    }
}

const COLS: &str =
    "id, name, description, value_type, trust_tier, sensitivity, default_surfacing, created_at, updated_at";

fn row(r: &rusqlite::Row) -> rusqlite::Result<Variable> {
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

pub fn find(c: &Connection, ws: &WorkspaceId, id: &str) -> Result<Variable> {
    c.query_row(
        &format!("SELECT {COLS} FROM context_variables WHERE id = ?1 AND workspace_id = ?2"),
        params![id, ws.0],
        row,
    )
    .optional()?
    .ok_or_else(|| Error::not_found("context variable"))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VariableInput {
    pub name: Option<String>,
    pub description: Option<String>,
    pub value_type: Option<String>,
    pub trust_tier: Option<String>,
    pub sensitivity: Option<String>,
    pub default_surfacing: Option<String>,
}

fn one_of(field: &str, v: &str, allowed: &[&str]) -> Result<()> {
    if allowed.contains(&v) {
        Ok(())
    } else {
        Err(Error::invalid_field(field, format!("{field} must be one of {}", allowed.join(", "))))
    }
}

fn apply(cur: Option<&Variable>, i: VariableInput) -> Result<Variable> {
    let mut v = cur.cloned().unwrap_or(Variable {
        id: String::new(),
        name: String::new(),
        description: String::new(),
        value_type: "string".into(),
        trust_tier: "unverified".into(),
        sensitivity: "normal".into(),
        default_surfacing: "on_reference".into(),
        created_at: String::new(),
        updated_at: String::new(),
    });
    if let Some(n) = i.name {
        v.name = n.trim().to_string();
    }
    let n = &v.name;
    let ok = !n.is_empty()
        && n.len() <= 64
        && n.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !ok {
        return Err(Error::invalid_field(
            "name",
            "name is a lowercase identifier (letters, digits, _), at most 64 characters",
        ));
    }
    if let Some(d) = i.description {
        v.description = d.trim().to_string();
    }
    if v.description.chars().count() > 500 {
        return Err(Error::invalid_field("description", "description must be at most 500 characters"));
    }
    if let Some(x) = i.value_type {
        v.value_type = x;
    }
    one_of("valueType", &v.value_type, &["string", "json"])?;
    if let Some(x) = i.trust_tier {
        v.trust_tier = x;
    }
    one_of("trustTier", &v.trust_tier, &["unverified", "signed"])?;
    if let Some(x) = i.sensitivity {
        v.sensitivity = x;
    }
    one_of("sensitivity", &v.sensitivity, &["normal", "sensitive"])?;
    if let Some(x) = i.default_surfacing {
        v.default_surfacing = x;
    }
    one_of("defaultSurfacing", &v.default_surfacing, &SURFACING)?;
    Ok(v)
}

/// Every agent with this variable enabled: their drafts change when it does.
fn touch_agents(tx: &crate::storage::Tx, variable_id: &str, now: &str) -> Result<()> {
    let agents: Vec<String> = {
        let mut st = tx.prepare("SELECT agent_id FROM agent_context_variables WHERE variable_id = ?1")?;
        st.query_map([variable_id], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?
    };
    for a in agents {
        touch(tx, &a, now)?;
    }
    Ok(())
}

pub fn list(app: &App, p: &Principal) -> Result<Value> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| {
        let mut st =
            c.prepare(&format!("SELECT {COLS} FROM context_variables WHERE workspace_id = ?1 ORDER BY name"))?;
        let vs: Vec<Variable> = st.query_map([&p.workspace_id.0], row)?.collect::<rusqlite::Result<_>>()?;
        Ok(json!({"contextVariables": vs.iter().map(Variable::view).collect::<Vec<_>>()}))
    })
}

pub fn get(app: &App, p: &Principal, id: &str) -> Result<Value> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| Ok(find(c, &p.workspace_id, id)?.view()))
}

pub fn create(app: &App, p: &Principal, actor: &Actor, i: VariableInput) -> Result<Value> {
    p.require(Perm::AgentsManage)?;
    if i.name.is_none() {
        return Err(Error::invalid_field("name", "name is required"));
    }
    let v = apply(None, i)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let id = crate::ids::new_id();
        let n = tx.execute(
            "INSERT INTO context_variables (id, workspace_id, name, description, value_type, trust_tier, sensitivity, default_surfacing, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9) ON CONFLICT (workspace_id, name) DO NOTHING",
            params![id, p.workspace_id.0, v.name, v.description, v.value_type, v.trust_tier, v.sensitivity, v.default_surfacing, now],
        )?;
        if n == 0 {
            return Err(Error::conflict(format!("a context variable named `{}` exists", v.name)).with_details(json!({"field": "name"})));
        }
        audit::record(tx, &now, actor, Event::new("context_variable.created").workspace(&p.workspace_id).target("context_variable", &id))?;
        Ok(find(tx, &p.workspace_id, &id)?.view())
    })
}

pub fn update(app: &App, p: &Principal, actor: &Actor, id: &str, i: VariableInput) -> Result<Value> {
    p.require(Perm::AgentsManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let cur = find(tx, &p.workspace_id, id)?;
        let v = apply(Some(&cur), i)?;
        let taken: Option<String> = tx
            .query_row("SELECT id FROM context_variables WHERE workspace_id = ?1 AND name = ?2 AND id <> ?3", params![p.workspace_id.0, v.name, id], |r| r.get(0))
            .optional()?;
        if taken.is_some() {
            return Err(Error::conflict(format!("a context variable named `{}` exists", v.name)).with_details(json!({"field": "name"})));
        }
        tx.execute(
            "UPDATE context_variables SET name = ?2, description = ?3, value_type = ?4, trust_tier = ?5, sensitivity = ?6, default_surfacing = ?7, updated_at = ?8 WHERE id = ?1",
            params![id, v.name, v.description, v.value_type, v.trust_tier, v.sensitivity, v.default_surfacing, now],
        )?;
        if cur.sensitive() != v.sensitive() {
            restore_values(tx, key(app), &p.workspace_id, id, v.sensitive())?;
        }
        touch_agents(tx, id, &now)?;
        audit::record(tx, &now, actor, Event::new("context_variable.updated").workspace(&p.workspace_id).target("context_variable", id))?;
        Ok(find(tx, &p.workspace_id, id)?.view())
    })
}

pub fn delete(app: &App, p: &Principal, actor: &Actor, id: &str) -> Result<()> {
    p.require(Perm::AgentsManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        find(tx, &p.workspace_id, id)?;
        touch_agents(tx, id, &now)?;
        tx.execute("DELETE FROM context_variables WHERE id = ?1", [id])?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("context_variable.deleted").workspace(&p.workspace_id).target("context_variable", id),
        )
    })
}

// ---- per-agent enablement ----

fn enablement_view(r: &rusqlite::Row) -> rusqlite::Result<Value> {
    Ok(
        json!({"contextVariableId": r.get::<_, String>(0)?, "name": r.get::<_, String>(1)?, "source": r.get::<_, String>(2)?,
              "surfacing": r.get::<_, String>(3)?, "enabled": r.get::<_, i64>(4)? == 1, "resolverSkillId": r.get::<_, Option<String>>(5)?,
              "updatedAt": r.get::<_, String>(6)?}),
    )
}

pub fn enablements(c: &Connection, agent_id: &str) -> Result<Vec<Value>> {
    let mut st = c.prepare(
        "SELECT e.variable_id, v.name, e.source, e.surfacing, e.enabled, e.resolver_skill_id, e.updated_at
         FROM agent_context_variables e JOIN context_variables v ON v.id = e.variable_id WHERE e.agent_id = ?1 ORDER BY v.name",
    )?;
    Ok(st.query_map([agent_id], enablement_view)?.collect::<rusqlite::Result<_>>()?)
}

pub fn list_enablements(app: &App, p: &Principal, agent_id: &str) -> Result<Value> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| {
        get_in(c, &p.workspace_id, agent_id)?;
        Ok(json!({"contextVariables": enablements(c, agent_id)?}))
    })
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnablementInput {
    pub source: Option<String>,
    pub surfacing: Option<String>,
    pub enabled: Option<bool>,
    pub resolver_skill_id: Option<String>,
}

pub fn put_enablement(
    app: &App,
    p: &Principal,
    actor: &Actor,
    agent_id: &str,
    variable_id: &str,
    i: EnablementInput,
) -> Result<Value> {
    p.require(Perm::AgentsManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        get_in(tx, &p.workspace_id, agent_id)?;
        let var = find(tx, &p.workspace_id, variable_id)?;
        let cur: Option<(String, String, i64, Option<String>)> = tx
            .query_row(
                "SELECT source, surfacing, enabled, resolver_skill_id FROM agent_context_variables WHERE agent_id = ?1 AND variable_id = ?2",
                params![agent_id, variable_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()?;
        let source = i.source.or(cur.as_ref().map(|c| c.0.clone())).unwrap_or_else(|| "pushed".into());
        one_of("source", &source, &["pushed", "resolver"])?;
        let surfacing = i.surfacing.or(cur.as_ref().map(|c| c.1.clone())).unwrap_or(var.default_surfacing.clone());
        one_of("surfacing", &surfacing, &SURFACING)?;
        let enabled = i.enabled.unwrap_or(cur.as_ref().is_none_or(|c| c.2 == 1));
        let resolver = if source == "resolver" { i.resolver_skill_id.or(cur.as_ref().and_then(|c| c.3.clone())) } else { None };
        if source == "resolver" {
            let Some(sid) = &resolver else {
                return Err(Error::invalid_field("resolverSkillId", "a resolver variable needs resolverSkillId naming an enabled skill of this agent"));
            };
            let skill_enabled: Option<i64> =
                tx.query_row("SELECT enabled FROM agent_skills WHERE id = ?1 AND agent_id = ?2", params![sid, agent_id], |r| r.get(0)).optional()?;
            match skill_enabled {
                None => return Err(Error::invalid_field("resolverSkillId", "resolverSkillId must name a skill of this agent")),
                Some(0) if enabled => return Err(Error::invalid_field("resolverSkillId", "the resolver skill is disabled")),
                _ => {}
            }
        }
        tx.execute(
            "INSERT INTO agent_context_variables (agent_id, variable_id, source, surfacing, enabled, resolver_skill_id, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (agent_id, variable_id) DO UPDATE SET source = excluded.source, surfacing = excluded.surfacing, enabled = excluded.enabled,
                resolver_skill_id = excluded.resolver_skill_id, updated_at = excluded.updated_at",
            params![agent_id, variable_id, source, surfacing, enabled as i64, resolver, now],
        )?;
        touch(tx, agent_id, &now)?;
        audit::record(tx, &now, actor, Event::new("agent.context_variable.enabled").workspace(&p.workspace_id).target("context_variable", variable_id).meta(json!({"agentId": agent_id, "source": source, "enabled": enabled})))?;
        enablements(tx, agent_id)?.into_iter().find(|e| e["contextVariableId"] == variable_id).ok_or_else(|| Error::internal_msg("enablement vanished"))
    })
}

pub fn delete_enablement(app: &App, p: &Principal, actor: &Actor, agent_id: &str, variable_id: &str) -> Result<()> {
    p.require(Perm::AgentsManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        get_in(tx, &p.workspace_id, agent_id)?;
        if tx.execute(
            "DELETE FROM agent_context_variables WHERE agent_id = ?1 AND variable_id = ?2",
            params![agent_id, variable_id],
        )? == 0
        {
            return Err(Error::not_found("context variable enablement"));
        }
        touch(tx, agent_id, &now)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("agent.context_variable.removed")
                .workspace(&p.workspace_id)
                .target("context_variable", variable_id)
                .meta(json!({"agentId": agent_id})),
        )
    })
}

// ---- values ----

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scope {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValueInput {
    pub scope: Scope,
    pub data: Value,
}

fn scope_id(ws: &WorkspaceId, s: &Scope) -> Result<String> {
    one_of("scope.type", &s.kind, &SCOPES)?;
    match (s.kind.as_str(), s.id.as_deref().map(str::trim)) {
        ("workspace", None | Some("")) => Ok(ws.0.clone()),
        ("workspace", Some(id)) if id == ws.0 => Ok(id.to_string()),
        ("workspace", Some(_)) => {
            Err(Error::invalid_field("scope.id", "a workspace scope is this workspace (omit the id)"))
        }
        (_, Some(id)) if !id.is_empty() && id.len() <= 200 => Ok(id.to_string()),
        _ => Err(Error::invalid_field("scope.id", "scope.id is required (at most 200 characters)")),
    }
}

fn check_data(v: &Variable, data: &Value) -> Result<()> {
    let Value::Object(m) = data else { return Err(Error::invalid_field("data", "data must be an object")) };
    if v.value_type == "string" && !m.get("value").is_some_and(Value::is_string) {
        return Err(Error::invalid_field("data.value", "a string variable's data is {\"value\": \"…\"}"));
    }
    if data.to_string().len() > MAX_VALUE_BYTES {
        return Err(Error::invalid_field("data", "data must be at most 16 KB"));
    }
    Ok(())
}

pub fn put_value(app: &App, p: &Principal, actor: &Actor, id: &str, i: ValueInput) -> Result<Value> {
    p.require(Perm::AgentsManage)?;
    let sid = scope_id(&p.workspace_id, &i.scope)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let v = find(tx, &p.workspace_id, id)?;
        check_data(&v, &i.data)?;
        if i.scope.kind == "agent" {
            get_in(tx, &p.workspace_id, &sid)?;
        }
        let stored = Stored::of(key(app), &p.workspace_id, id, &i.scope.kind, &sid, &i.data, v.sensitive())?;
        tx.execute(
            "INSERT INTO context_values (variable_id, scope_type, scope_id, data, nonce, ciphertext, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (variable_id, scope_type, scope_id) DO UPDATE SET data = excluded.data, nonce = excluded.nonce,
                ciphertext = excluded.ciphertext, updated_at = excluded.updated_at",
            params![id, i.scope.kind, sid, stored.data, stored.nonce, stored.ciphertext, now],
        )?;
        // the audit trail names the scope, never the value
        audit::record(tx, &now, actor, Event::new("context_variable.value_set").workspace(&p.workspace_id).target("context_variable", id).meta(json!({"scopeType": i.scope.kind})))?;
        Ok(json!({"contextVariableId": id, "scope": {"type": i.scope.kind, "id": sid}, "data": if v.sensitive() { Value::Null } else { i.data.clone() }, "redacted": v.sensitive(), "updatedAt": now}))
    })
}

pub fn list_values(app: &App, p: &Principal, id: &str) -> Result<Value> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| {
        let v = find(c, &p.workspace_id, id)?;
        let mut st = c.prepare("SELECT scope_type, scope_id, data, updated_at FROM context_values WHERE variable_id = ?1 ORDER BY scope_type, scope_id")?;
        let rows: Vec<Value> = st
            .query_map([id], |r| {
                let data: String = r.get(2)?;
                Ok(json!({"scope": {"type": r.get::<_, String>(0)?, "id": r.get::<_, String>(1)?},
                          "data": if v.sensitive() { Value::Null } else { serde_json::from_str(&data).unwrap_or(Value::Null) },
                          "redacted": v.sensitive(), "updatedAt": r.get::<_, String>(3)?}))
            })?
            .collect::<rusqlite::Result<_>>()?;
        Ok(json!({"contextVariableId": id, "values": rows}))
    })
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValueSelector {
    pub scope_type: String,
    pub scope_id: Option<String>,
}

pub fn delete_value(app: &App, p: &Principal, actor: &Actor, id: &str, s: ValueSelector) -> Result<()> {
    p.require(Perm::AgentsManage)?;
    let sid = scope_id(&p.workspace_id, &Scope { kind: s.scope_type.clone(), id: s.scope_id })?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        find(tx, &p.workspace_id, id)?;
        if tx.execute(
            "DELETE FROM context_values WHERE variable_id = ?1 AND scope_type = ?2 AND scope_id = ?3",
            params![id, s.scope_type, sid],
        )? == 0
        {
            return Err(Error::not_found("value"));
        }
        audit::record(
            tx,
            &now,
            actor,
            Event::new("context_variable.value_deleted")
                .workspace(&p.workspace_id)
                .target("context_variable", id)
                .meta(json!({"scopeType": s.scope_type})),
        )
    })
}

/// Who a turn is about, for resolving values.
#[derive(Debug, Clone, Default)]
pub struct Subject<'a> {
    pub session_id: Option<&'a str>,
    pub customer_id: Option<&'a str>,
    pub agent_id: Option<&'a str>,
}

/// The deployment key that seals sensitive values.
fn key(app: &App) -> Option<&[u8; 32]> {
    app.config.encryption_key.as_ref().map(|k| k.expose())
}

/// What a sealed value is bound to: its workspace, variable and scope, so a row copied elsewhere
/// does not open.
fn value_aad(ws: &WorkspaceId, variable_id: &str, scope_type: &str, scope_id: &str) -> String {
    format!("context_value:{}:{variable_id}:{scope_type}:{scope_id}", ws.0)
}

/// A value as its row stores it: clear JSON in `data`, or (sensitive variables) sealed with the
/// deployment key in `nonce`/`ciphertext` and `data` empty.
struct Stored {
    data: String,
    nonce: Option<Vec<u8>>,
    ciphertext: Option<Vec<u8>>,
}

impl Stored {
    /// Without `CONNECTOR_ENCRYPTION_KEY` a sensitive value cannot be stored: 503
    /// `encryption_not_configured`.
    fn of(
        key: Option<&[u8; 32]>,
        ws: &WorkspaceId,
        variable_id: &str,
        scope_type: &str,
        scope_id: &str,
        data: &Value,
        sensitive: bool,
    ) -> Result<Stored> {
        if !sensitive {
            return Ok(Stored { data: data.to_string(), nonce: None, ciphertext: None });
        }
        let aad = value_aad(ws, variable_id, scope_type, scope_id);
        let sealed = crypto::seal(key, data.to_string().as_bytes(), &aad)?;
        Ok(Stored { data: String::new(), nonce: Some(sealed.nonce), ciphertext: Some(sealed.ciphertext) })
    }

    fn open(
        &self,
        key: Option<&[u8; 32]>,
        ws: &WorkspaceId,
        variable_id: &str,
        scope_type: &str,
        scope_id: &str,
    ) -> Result<Value> {
        match (&self.nonce, &self.ciphertext) {
            (Some(nonce), Some(ciphertext)) => {
                let aad = value_aad(ws, variable_id, scope_type, scope_id);
                let plain = crypto::open(key, &Sealed { nonce: nonce.clone(), ciphertext: ciphertext.clone() }, &aad)?;
                Ok(serde_json::from_slice(&plain).unwrap_or(Value::Null))
            }
            _ => Ok(serde_json::from_str(&self.data).unwrap_or(Value::Null)),
        }
    }
}

/// Re-stores every value of a variable whose sensitivity changed: sealed when it became
/// sensitive, in clear when it stopped being. Needs the key either way (503 without).
fn restore_values(
    tx: &crate::storage::Tx,
    key: Option<&[u8; 32]>,
    ws: &WorkspaceId,
    variable_id: &str,
    sensitive: bool,
) -> Result<()> {
    let rows: Vec<(String, String, Stored)> = {
        let mut st = tx.prepare(
            "SELECT scope_type, scope_id, data, nonce, ciphertext FROM context_values WHERE variable_id = ?1",
        )?;
        st.query_map([variable_id], |r| {
            Ok((r.get(0)?, r.get(1)?, Stored { data: r.get(2)?, nonce: r.get(3)?, ciphertext: r.get(4)? }))
        })?
        .collect::<rusqlite::Result<_>>()?
    };
    if !rows.is_empty() && key.is_none() {
        return Err(crypto::not_configured());
    }
    for (scope_type, scope_id, stored) in rows {
        let value = stored.open(key, ws, variable_id, &scope_type, &scope_id)?;
        let next = Stored::of(key, ws, variable_id, &scope_type, &scope_id, &value, sensitive)?;
        tx.execute(
            "UPDATE context_values SET data = ?4, nonce = ?5, ciphertext = ?6 WHERE variable_id = ?1 AND scope_type = ?2 AND scope_id = ?3",
            params![variable_id, scope_type, scope_id, next.data, next.nonce, next.ciphertext],
        )?;
    }
    Ok(())
}

/// Seals the values of sensitive variables still stored in clear (written before values were
/// sealed). Runs at start; without the key it only counts them (and the server warns).
/// Returns `(sealed, left in clear)`.
pub fn seal_stored_values(app: &App) -> Result<(usize, usize)> {
    let pending: Vec<(String, String, String, String, String)> = app.db.read(|c| {
        let mut st = c.prepare(
            "SELECT v.workspace_id, cv.variable_id, cv.scope_type, cv.scope_id, cv.data FROM context_values cv
             JOIN context_variables v ON v.id = cv.variable_id WHERE v.sensitivity = 'sensitive' AND cv.ciphertext IS NULL",
        )?;
        Ok(st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))?.collect::<rusqlite::Result<_>>()?)
    })?;
    if pending.is_empty() {
        return Ok((0, 0));
    }
    let Some(k) = key(app) else { return Ok((0, pending.len())) };
    app.db.write(|tx| {
        for (ws, variable_id, scope_type, scope_id, data) in &pending {
            let value: Value = serde_json::from_str(data).unwrap_or(Value::Null);
            let next = Stored::of(Some(k), &WorkspaceId(ws.clone()), variable_id, scope_type, scope_id, &value, true)?;
            tx.execute(
                "UPDATE context_values SET data = ?4, nonce = ?5, ciphertext = ?6 WHERE variable_id = ?1 AND scope_type = ?2 AND scope_id = ?3",
                params![variable_id, scope_type, scope_id, next.data, next.nonce, next.ciphertext],
            )?;
        }
        Ok(())
    })?;
    Ok((pending.len(), 0))
}

/// A value resolved for a turn.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub variable: Variable,
    /// Where it came from: `session`, `customer`, `agent` or `workspace`.
    pub scope: &'static str,
    pub value: Value,
}

/// The value of `variable_id` for `subject`, most specific scope first (sealed values opened).
/// `None` when no scope has one.
pub fn resolve(
    app: &App,
    c: &Connection,
    ws: &WorkspaceId,
    variable_id: &str,
    s: &Subject,
) -> Result<Option<Resolved>> {
    let Some(variable) = c
        .query_row(
            &format!("SELECT {COLS} FROM context_variables WHERE id = ?1 AND workspace_id = ?2"),
            params![variable_id, ws.0],
            row,
        )
        .optional()?
    else {
        return Ok(None);
    };
    let order = [
        ("session", s.session_id),
        ("customer", s.customer_id),
        ("agent", s.agent_id),
        ("workspace", Some(ws.0.as_str())),
    ];
    for (kind, id) in order {
        let Some(id) = id else { continue };
        let stored = c
            .query_row(
                "SELECT data, nonce, ciphertext FROM context_values WHERE variable_id = ?1 AND scope_type = ?2 AND scope_id = ?3",
                params![variable_id, kind, id],
                |r| Ok(Stored { data: r.get(0)?, nonce: r.get(1)?, ciphertext: r.get(2)? }),
            )
            .optional()?;
        if let Some(stored) = stored {
            let value = stored.open(key(app), ws, variable_id, kind, id)?;
            return Ok(Some(Resolved { variable, scope: kind, value }));
        }
    }
    Ok(None)
}

/// A variable of the workspace by id, if it exists (for frozen test values).
pub fn variable(c: &Connection, ws: &WorkspaceId, id: &str) -> Result<Option<Variable>> {
    Ok(c.query_row(
        &format!("SELECT {COLS} FROM context_variables WHERE id = ?1 AND workspace_id = ?2"),
        params![id, ws.0],
        row,
    )
    .optional()?)
}
