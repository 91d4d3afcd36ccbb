//! Context variables: a workspace catalog of facts about the visitor or the situation (plan,
//! order id, …), enabled per agent (pushed by the caller, or resolved by one of the agent's
//! skills), with values set per scope and resolved most specific first: session → customer →
//! agent → workspace. Sensitive values are sealed at rest (AES-256-GCM with
//! `CONNECTOR_ENCRYPTION_KEY`, bound to workspace, variable and scope; without the key they cannot
//! be stored: 503 `encryption_not_configured`), never returned by the values API, traced or logged.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{get_in, store, touch};
use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::crypto::{self, Sealed};
use crate::error::{Error, Result};
use crate::ids::WorkspaceId;
use crate::storage::{Conn, Tx};

/// A context variable's value: free-form JSON of the variable's declared type.
pub type VariableValue = Value;

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
    pub fn sensitive(&self) -> bool {
        self.sensitivity == "sensitive"
    }
}

pub fn find(c: &Conn, ws: &WorkspaceId, id: &str) -> Result<Variable> {
    variable(c, ws, id)?.ok_or_else(|| Error::not_found("context variable"))
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
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
fn touch_agents(tx: &Tx, variable_id: &str, now: &str) -> Result<()> {
    for a in store::agents_enabling(tx, variable_id)? {
        touch(tx, &a, now)?;
    }
    Ok(())
}

pub fn list(app: &App, p: &Principal) -> Result<Vec<Variable>> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| store::variables(c, &p.workspace_id))
}

pub fn get(app: &App, p: &Principal, id: &str) -> Result<Variable> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| find(c, &p.workspace_id, id))
}

pub fn create(app: &App, p: &Principal, actor: &Actor, i: VariableInput) -> Result<Variable> {
    p.require(Perm::AgentsManage)?;
    if i.name.is_none() {
        return Err(Error::invalid_field("name", "name is required"));
    }
    let v = apply(None, i)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let id = crate::ids::new_id();
        let v = Variable { id: id.clone(), created_at: now.clone(), updated_at: now.clone(), ..v.clone() };
        if !store::insert_variable(tx, &p.workspace_id, &v)? {
            return Err(Error::conflict(format!("a context variable named `{}` exists", v.name))
                .with_details(json!({"field": "name"})));
        }
        audit::record(
            tx,
            &now,
            actor,
            Event::new("context_variable.created").workspace(&p.workspace_id).target("context_variable", &id),
        )?;
        find(tx, &p.workspace_id, &id)
    })
}

pub fn update(app: &App, p: &Principal, actor: &Actor, id: &str, i: VariableInput) -> Result<Variable> {
    p.require(Perm::AgentsManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let cur = find(tx, &p.workspace_id, id)?;
        let v = apply(Some(&cur), i)?;
        if store::variable_named_other(tx, &p.workspace_id, &v.name, id)? {
            return Err(Error::conflict(format!("a context variable named `{}` exists", v.name))
                .with_details(json!({"field": "name"})));
        }
        store::update_variable(tx, &Variable { id: id.to_string(), updated_at: now.clone(), ..v.clone() })?;
        if cur.sensitive() != v.sensitive() {
            restore_values(tx, key(app), &p.workspace_id, id, v.sensitive())?;
        }
        touch_agents(tx, id, &now)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("context_variable.updated").workspace(&p.workspace_id).target("context_variable", id),
        )?;
        find(tx, &p.workspace_id, id)
    })
}

pub fn delete(app: &App, p: &Principal, actor: &Actor, id: &str) -> Result<()> {
    p.require(Perm::AgentsManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        find(tx, &p.workspace_id, id)?;
        touch_agents(tx, id, &now)?;
        store::delete_variable(tx, id)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("context_variable.deleted").workspace(&p.workspace_id).target("context_variable", id),
        )
    })
}

// ---- per-agent enablement ----

/// A variable enabled on an agent.
#[derive(Debug, Clone)]
pub struct Enablement {
    pub variable_id: String,
    pub name: String,
    /// `pushed` or `resolver`.
    pub source: String,
    pub surfacing: String,
    pub enabled: bool,
    pub resolver_skill_id: Option<String>,
    pub updated_at: String,
}

pub fn enablements(c: &Conn, agent_id: &str) -> Result<Vec<Enablement>> {
    store::enablements(c, agent_id)
}

pub fn list_enablements(app: &App, p: &Principal, agent_id: &str) -> Result<Vec<Enablement>> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| {
        get_in(c, &p.workspace_id, agent_id)?;
        enablements(c, agent_id)
    })
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
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
) -> Result<Enablement> {
    p.require(Perm::AgentsManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        get_in(tx, &p.workspace_id, agent_id)?;
        let var = find(tx, &p.workspace_id, variable_id)?;
        let cur = enablements(tx, agent_id)?.into_iter().find(|e| e.variable_id == variable_id);
        let source = i.source.or(cur.as_ref().map(|c| c.source.clone())).unwrap_or_else(|| "pushed".into());
        one_of("source", &source, &["pushed", "resolver"])?;
        let surfacing =
            i.surfacing.or(cur.as_ref().map(|c| c.surfacing.clone())).unwrap_or(var.default_surfacing.clone());
        one_of("surfacing", &surfacing, &SURFACING)?;
        let enabled = i.enabled.unwrap_or(cur.as_ref().is_none_or(|c| c.enabled));
        let resolver = if source == "resolver" {
            i.resolver_skill_id.or(cur.as_ref().and_then(|c| c.resolver_skill_id.clone()))
        } else {
            None
        };
        if source == "resolver" {
            let Some(sid) = &resolver else {
                return Err(Error::invalid_field(
                    "resolverSkillId",
                    "a resolver variable needs resolverSkillId naming an enabled skill of this agent",
                ));
            };
            match store::skill_by_id(tx, agent_id, sid)? {
                None => {
                    return Err(Error::invalid_field(
                        "resolverSkillId",
                        "resolverSkillId must name a skill of this agent",
                    ));
                }
                Some(s) if !s.enabled && enabled => {
                    return Err(Error::invalid_field("resolverSkillId", "the resolver skill is disabled"));
                }
                _ => {}
            }
        }
        let e = Enablement {
            variable_id: variable_id.to_string(),
            name: var.name.clone(),
            source: source.clone(),
            surfacing,
            enabled,
            resolver_skill_id: resolver,
            updated_at: now.clone(),
        };
        store::put_enablement(tx, agent_id, &e)?;
        touch(tx, agent_id, &now)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("agent.context_variable.enabled")
                .workspace(&p.workspace_id)
                .target("context_variable", variable_id)
                .meta(json!({"agentId": agent_id, "source": source, "enabled": enabled})),
        )?;
        enablements(tx, agent_id)?
            .into_iter()
            .find(|e| e.variable_id == variable_id)
            .ok_or_else(|| Error::internal_msg("enablement vanished"))
    })
}

pub fn delete_enablement(app: &App, p: &Principal, actor: &Actor, agent_id: &str, variable_id: &str) -> Result<()> {
    p.require(Perm::AgentsManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        get_in(tx, &p.workspace_id, agent_id)?;
        if !store::delete_enablement(tx, agent_id, variable_id)? {
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

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scope {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
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

/// A value of a variable at one scope; `data` is `None` when the variable is sensitive.
#[derive(Debug, Clone)]
pub struct ScopedValue {
    pub scope_type: String,
    pub scope_id: String,
    pub data: Option<Value>,
    pub redacted: bool,
    pub updated_at: String,
}

pub fn put_value(app: &App, p: &Principal, actor: &Actor, id: &str, i: ValueInput) -> Result<ScopedValue> {
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
        store::put_value(tx, id, &i.scope.kind, &sid, &stored, &now)?;
        // the audit trail names the scope, never the value
        audit::record(
            tx,
            &now,
            actor,
            Event::new("context_variable.value_set")
                .workspace(&p.workspace_id)
                .target("context_variable", id)
                .meta(json!({"scopeType": i.scope.kind})),
        )?;
        Ok(ScopedValue {
            scope_type: i.scope.kind.clone(),
            scope_id: sid.clone(),
            data: (!v.sensitive()).then(|| i.data.clone()),
            redacted: v.sensitive(),
            updated_at: now.clone(),
        })
    })
}

/// A variable's values by scope (sensitive ones redacted).
pub fn list_values(app: &App, p: &Principal, id: &str) -> Result<Vec<ScopedValue>> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| {
        let v = find(c, &p.workspace_id, id)?;
        Ok(store::values_of(c, id)?
            .into_iter()
            .map(|(scope_type, scope_id, stored, updated_at)| ScopedValue {
                scope_type,
                scope_id,
                data: (!v.sensitive()).then(|| serde_json::from_str(&stored.data).unwrap_or(Value::Null)),
                redacted: v.sensitive(),
                updated_at,
            })
            .collect())
    })
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
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
        if !store::delete_value(tx, id, &s.scope_type, &sid)? {
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
pub(super) struct Stored {
    pub(super) data: String,
    pub(super) nonce: Option<Vec<u8>>,
    pub(super) ciphertext: Option<Vec<u8>>,
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
fn restore_values(tx: &Tx, key: Option<&[u8; 32]>, ws: &WorkspaceId, variable_id: &str, sensitive: bool) -> Result<()> {
    let rows = store::values_of(tx, variable_id)?;
    if !rows.is_empty() && key.is_none() {
        return Err(crypto::not_configured());
    }
    for (scope_type, scope_id, stored, _) in rows {
        let value = stored.open(key, ws, variable_id, &scope_type, &scope_id)?;
        let next = Stored::of(key, ws, variable_id, &scope_type, &scope_id, &value, sensitive)?;
        store::restore_value(tx, variable_id, &scope_type, &scope_id, &next)?;
    }
    Ok(())
}

/// Seals the values of sensitive variables still stored in clear (written before values were
/// sealed). Runs at start; without the key it only counts them (and the server warns).
/// Returns `(sealed, left in clear)`.
pub fn seal_stored_values(app: &App) -> Result<(usize, usize)> {
    let pending = app.db.read(store::sensitive_values_in_clear)?;
    if pending.is_empty() {
        return Ok((0, 0));
    }
    let Some(k) = key(app) else { return Ok((0, pending.len())) };
    app.db.write(|tx| {
        for (ws, variable_id, scope_type, scope_id, data) in &pending {
            let value: Value = serde_json::from_str(data).unwrap_or(Value::Null);
            let next = Stored::of(Some(k), &WorkspaceId(ws.clone()), variable_id, scope_type, scope_id, &value, true)?;
            store::restore_value(tx, variable_id, scope_type, scope_id, &next)?;
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
pub fn resolve(app: &App, c: &Conn, ws: &WorkspaceId, variable_id: &str, s: &Subject) -> Result<Option<Resolved>> {
    let Some(variable) = variable(c, ws, variable_id)? else {
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
        if let Some(stored) = store::value_at(c, variable_id, kind, id)? {
            let value = stored.open(key(app), ws, variable_id, kind, id)?;
            return Ok(Some(Resolved { variable, scope: kind, value }));
        }
    }
    Ok(None)
}

/// A variable of the workspace by id, if it exists (for frozen test values).
pub fn variable(c: &Conn, ws: &WorkspaceId, id: &str) -> Result<Option<Variable>> {
    store::variable(c, ws, id)
}
