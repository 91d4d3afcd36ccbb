//! Directives: authored rules that steer an agent ("when …, do …"). A directive may bind a skill
//! through a `#skill_name` chip in its action text (spec: Directive bindings rule 7):
//!
//! * a chip is `#` followed by a skill-name run (`[A-Za-z0-9_.-]`); trailing `.` `,` `;` `:` `!`
//!   `?` are prose, not part of the name;
//! * the binding (`{kind: "skill", skillName}`) is what makes a chip: in a directive whose binding
//!   is null every `#name` stays prose and saving keeps the binding null;
//! * the action text is stored verbatim, so reopening shows the same chip and text;
//! * a binding to a skill that is later disabled or renamed keeps its chip, marked unknown.
//!
//! Saving a binding checks rule 1: the skill exists on the agent, is enabled, is
//! `agent_selectable`, and is a `retrieve` or `mcp_tool` (external MCP) skill — else 400 naming it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::{get_in, skills, store, touch};
use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, Result};
use crate::storage::Conn;

/// Built-in answer directives (reserved names).
pub const BUILT_IN_NAMES: [&str; 3] =
    ["inline-supported-links", "represent-organization", "concise-readable-formatting"];
pub const COVERAGE: [&str; 4] = ["answered", "partial", "unanswered", "unclear"];
pub const REASONS: [&str; 5] = [
    "sufficient_evidence",
    "insufficient_evidence",
    "conflicting_evidence",
    "ambiguous_request",
    "intentional_scope_boundary",
];

/// The legal (coverage, reason) pairs.
pub fn legal_pair(coverage: &str, reason: &str) -> bool {
    matches!(
        (coverage, reason),
        ("answered", "sufficient_evidence")
            | (
                "partial" | "unanswered",
                "insufficient_evidence" | "conflicting_evidence" | "intentional_scope_boundary"
            )
            | ("unclear", "ambiguous_request")
    )
}

/// A `#name` token found in action text: byte range of the whole chip and the name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChipToken {
    pub start: usize,
    pub end: usize,
    pub name: String,
}

/// Every `#name` token in `text` (trailing sentence punctuation excluded).
pub fn chip_tokens(text: &str) -> Vec<ChipToken> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        // a chip starts at `#` at the start or after a non-word character
        if b[i] == b'#' && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) {
            let mut j = i + 1;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || matches!(b[j], b'_' | b'.' | b'-')) {
                j += 1;
            }
            let mut end = j;
            while end > i + 1 && matches!(b[end - 1], b'.' | b',' | b';' | b':' | b'!' | b'?' | b'-') {
                end -= 1;
            }
            if end > i + 1 && b[i + 1].is_ascii_alphabetic() {
                out.push(ChipToken { start: i, end, name: text[i + 1..end].to_lowercase() });
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Binding {
    pub kind: String,
    pub skill_name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Condition {
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CoverageCriteria {
    pub coverage: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasons: Option<Vec<String>>,
}

/// The stored directive body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Body {
    pub condition: Condition,
    pub action: String,
    pub priority: Option<i64>,
    pub binding: Option<Binding>,
    pub coverage_criteria: Option<CoverageCriteria>,
    pub tags: Vec<String>,
    pub description: Option<String>,
    pub enabled: bool,
    pub depends_on: Vec<String>,
    pub excludes: Vec<String>,
    pub surfaces: Vec<String>,
    pub metadata: Map<String, Value>,
}

pub fn check_coverage(c: &CoverageCriteria) -> Result<()> {
    let f = "coverageCriteria";
    if c.coverage.is_empty() {
        return Err(Error::invalid_field(
            &format!("{f}.coverage"),
            "coverageCriteria needs at least one coverage value",
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for v in &c.coverage {
        if !COVERAGE.contains(&v.as_str()) {
            return Err(Error::invalid_field(
                &format!("{f}.coverage"),
                format!("`{v}` is not a coverage value ({})", COVERAGE.join(", ")),
            ));
        }
        if !seen.insert(v) {
            return Err(Error::invalid_field(&format!("{f}.coverage"), format!("`{v}` appears twice")));
        }
    }
    if let Some(reasons) = &c.reasons {
        let mut seen = std::collections::HashSet::new();
        for r in reasons {
            if !REASONS.contains(&r.as_str()) {
                return Err(Error::invalid_field(
                    &format!("{f}.reasons"),
                    format!("`{r}` is not a coverage reason ({})", REASONS.join(", ")),
                ));
            }
            if !seen.insert(r) {
                return Err(Error::invalid_field(&format!("{f}.reasons"), format!("`{r}` appears twice")));
            }
            if !c.coverage.iter().any(|cv| legal_pair(cv, r)) {
                return Err(Error::invalid_field(
                    &format!("{f}.reasons"),
                    format!("`{r}` does not go with coverage {}", c.coverage.join(", ")),
                ));
            }
        }
    }
    Ok(())
}

/// Rule 1: the skill a binding names must be bindable on this agent.
pub fn check_binding(c: &Conn, agent_id: &str, b: &Binding, action: &str) -> Result<()> {
    if b.kind != "skill" {
        return Err(Error::invalid_field("binding.kind", "the only binding kind is skill"));
    }
    let name = b.skill_name.trim().to_lowercase();
    let bad = |why: &str| {
        Error::invalid_field("binding.skillName", format!("cannot bind skill `{name}`: {why}"))
            .with_details(json!({"field": "binding.skillName", "skillName": name}))
    };
    if !chip_tokens(action).iter().any(|t| t.name == name) {
        return Err(bad(&format!("the action text must contain the chip #{name}")));
    }
    let Some(s) = skills::by_name(c, agent_id, &name)? else {
        return Err(bad("the agent has no skill with that name"));
    };
    if !s.enabled {
        return Err(bad("the skill is disabled"));
    }
    if s.invocation_mode != "agent_selectable" {
        return Err(bad("the skill's invocation mode must be agent_selectable"));
    }
    if !matches!(s.capability.as_str(), "retrieve" | "mcp_tool") {
        return Err(bad(&format!(
            "{} skills are actions and cannot be bound; bind a retrieve or MCP tool skill",
            s.capability
        )));
    }
    Ok(())
}

#[derive(Debug, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Input {
    pub name: Option<String>,
    pub condition: Option<Condition>,
    pub action: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub priority: Option<Option<i64>>,
    #[serde(default, deserialize_with = "present")]
    pub binding: Option<Option<Binding>>,
    #[serde(default, deserialize_with = "present")]
    pub coverage_criteria: Option<Option<CoverageCriteria>>,
    pub tags: Option<Vec<String>>,
    #[serde(default, deserialize_with = "present")]
    pub description: Option<Option<String>>,
    pub enabled: Option<bool>,
    pub depends_on: Option<Vec<String>>,
    pub excludes: Option<Vec<String>>,
    pub surfaces: Option<Vec<String>>,
    pub metadata: Option<Map<String, Value>>,
}

/// Distinguishes a key sent as `null` (`Some(None)`) from a key left out (`None`).
fn present<'de, D, T>(d: D) -> std::result::Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

fn dedup(v: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in v.into_iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()) {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

pub(super) fn clean_name(n: &str) -> Result<String> {
    let n = n.trim().to_string();
    if n.is_empty() || n.chars().count() > 200 {
        return Err(Error::invalid_field("name", "name must be 1 to 200 characters"));
    }
    if BUILT_IN_NAMES.contains(&n.as_str()) {
        return Err(Error::invalid_field("name", format!("`{n}` is the name of a built-in directive")));
    }
    Ok(n)
}

/// Applies `input` over `cur` (or defaults) and validates the result.
pub(super) fn build(c: &Conn, agent_id: &str, cur: Option<&Body>, mut i: Input) -> Result<Body> {
    let mut b = cur.cloned().unwrap_or_else(default_body);
    if let Some(cond) = i.condition.take() {
        b.condition = cond;
    }
    check_condition(&mut b.condition)?;
    apply_content(&mut b, &mut i)?;
    if let Some(t) = i.tags.take() {
        b.tags = dedup(t);
    }
    check_tags(&b.tags)?;
    apply_details(&mut b, &mut i)?;
    // the binding: sent → validated; left out → kept (and re-checked only if the action changed)
    let action_changed = cur.is_some_and(|c| c.action != b.action);
    apply_binding(c, agent_id, &mut b, i.binding, action_changed)?;
    Ok(b)
}

/// A new directive's body before its input is applied.
fn default_body() -> Body {
    Body {
        condition: Condition { kind: "always".into(), description: None },
        action: String::new(),
        priority: None,
        binding: None,
        coverage_criteria: None,
        tags: vec![],
        description: None,
        enabled: true,
        depends_on: vec![],
        excludes: vec![],
        surfaces: vec![],
        metadata: Map::new(),
    }
}

/// Checks the condition's kind and normalizes its description.
fn check_condition(cond: &mut Condition) -> Result<()> {
    match cond.kind.as_str() {
        "always" => cond.description = cond.description.take().filter(|d| !d.trim().is_empty()),
        "contextual" => {
            let d = cond.description.as_deref().unwrap_or("").trim().to_string();
            if d.is_empty() || d.chars().count() > 2000 {
                return Err(Error::invalid_field(
                    "condition.description",
                    "a contextual condition needs a description of 1 to 2000 characters",
                ));
            }
            cond.description = Some(d);
        }
        k => {
            return Err(Error::invalid_field(
                "condition.kind",
                format!("unknown condition kind `{k}` (always or contextual)"),
            ));
        }
    }
    Ok(())
}

/// The action, priority and coverage criteria.
fn apply_content(b: &mut Body, i: &mut Input) -> Result<()> {
    if let Some(a) = i.action.take() {
        b.action = a;
    }
    if b.action.trim().is_empty() || b.action.chars().count() > 4000 {
        return Err(Error::invalid_field("action", "action must be 1 to 4000 characters"));
    }
    if let Some(p) = i.priority.take() {
        b.priority = p;
    }
    if b.priority.is_some_and(|p| !(0..=100).contains(&p)) {
        return Err(Error::invalid_field("priority", "priority is an integer from 0 to 100 (or null)"));
    }
    if let Some(cc) = i.coverage_criteria.take() {
        b.coverage_criteria = cc;
    }
    if let Some(cc) = &b.coverage_criteria {
        check_coverage(cc)?;
    }
    Ok(())
}

/// Each tag is `routine:<id>`, `step:<routineId>:<stepId>` or a plain word.
fn check_tags(tags: &[String]) -> Result<()> {
    for t in tags {
        let ok = t.len() <= 200
            && match t.split(':').collect::<Vec<_>>().as_slice() {
                ["routine", id] => !id.is_empty(),
                ["step", r, s] => !r.is_empty() && !s.is_empty(),
                [_] => true,
                _ => false,
            };
        if !ok {
            return Err(Error::invalid_field(
                "tags",
                format!("`{t}` is not a tag (routine:<id>, step:<routineId>:<stepId> or a plain word)"),
            ));
        }
    }
    Ok(())
}

/// The description, enabled flag, dependency lists, surfaces and metadata.
fn apply_details(b: &mut Body, i: &mut Input) -> Result<()> {
    if let Some(d) = i.description.take() {
        b.description = d.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    }
    if b.description.as_ref().is_some_and(|d| d.chars().count() > 1000) {
        return Err(Error::invalid_field("description", "description must be at most 1000 characters"));
    }
    if let Some(e) = i.enabled.take() {
        b.enabled = e;
    }
    if let Some(v) = i.depends_on.take() {
        b.depends_on = dedup(v);
    }
    if let Some(v) = i.excludes.take() {
        b.excludes = dedup(v);
    }
    if let Some(v) = i.surfaces.take() {
        b.surfaces = dedup(v);
    }
    if let Some(s) = b.surfaces.iter().find(|s| !["answer", "suggested_questions"].contains(&s.as_str())) {
        return Err(Error::invalid_field("surfaces", format!("`{s}` is not a surface (answer, suggested_questions)")));
    }
    if let Some(m) = i.metadata.take() {
        b.metadata = m;
    }
    Ok(())
}

/// A sent binding is validated; a binding left out is dropped when the action lost its chip.
fn apply_binding(
    c: &Conn,
    agent_id: &str,
    b: &mut Body,
    binding: Option<Option<Binding>>,
    action_changed: bool,
) -> Result<()> {
    match binding {
        Some(Some(mut bind)) => {
            bind.skill_name = bind.skill_name.trim().to_lowercase();
            check_binding(c, agent_id, &bind, &b.action)?;
            b.binding = Some(bind);
        }
        Some(None) => b.binding = None,
        None => {
            if action_changed
                && let Some(bind) = &b.binding
                && !chip_tokens(&b.action).iter().any(|t| t.name == bind.skill_name)
            {
                // the chip was removed from the text: so is the binding
                b.binding = None;
            }
        }
    }
    Ok(())
}

#[derive(Debug, Clone)]
pub struct Directive {
    pub id: String,
    pub agent_id: String,
    pub name: String,
    pub body: Body,
    pub created_at: String,
    pub updated_at: String,
}

pub fn of_agent(c: &Conn, agent_id: &str) -> Result<Vec<Directive>> {
    store::directives_of(c, agent_id)
}

fn by_id(c: &Conn, agent_id: &str, id: &str) -> Result<Directive> {
    store::directive_by_id(c, agent_id, id)?.ok_or_else(|| Error::not_found("directive"))
}

/// A `#skill` chip of a bound directive: where it is in the action text and whether the skill
/// it names is there.
#[derive(Debug, Clone)]
pub struct Chip {
    pub skill_name: String,
    pub start: usize,
    pub end: usize,
    pub text: String,
    /// `bound` or `unknown_skill`.
    pub status: &'static str,
}

/// A directive with its chips located.
#[derive(Debug, Clone)]
pub struct DirectiveRecord {
    pub directive: Directive,
    pub chips: Vec<Chip>,
}

impl Directive {
    /// The chip (if bound) located in the action text, with its status against `skills`.
    pub fn chips(&self, skills: &[skills::Skill]) -> Vec<Chip> {
        let Some(b) = &self.body.binding else { return vec![] };
        chip_tokens(&self.body.action)
            .into_iter()
            .filter(|t| t.name == b.skill_name)
            .map(|t| {
                let known = skills.iter().any(|s| s.name == t.name && s.enabled);
                Chip {
                    text: self.body.action[t.start..t.end].to_string(),
                    skill_name: t.name,
                    start: t.start,
                    end: t.end,
                    status: if known { "bound" } else { "unknown_skill" },
                }
            })
            .collect()
    }

    fn record(self, skills: &[skills::Skill]) -> DirectiveRecord {
        DirectiveRecord { chips: self.chips(skills), directive: self }
    }
}

fn record_of(c: &Conn, agent_id: &str, id: &str) -> Result<DirectiveRecord> {
    Ok(by_id(c, agent_id, id)?.record(&skills::of_agent(c, agent_id)?))
}

pub fn list(app: &App, p: &Principal, agent_id: &str) -> Result<Vec<DirectiveRecord>> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| {
        get_in(c, &p.workspace_id, agent_id)?;
        let sk = skills::of_agent(c, agent_id)?;
        Ok(of_agent(c, agent_id)?.into_iter().map(|d| d.record(&sk)).collect())
    })
}

pub fn create(app: &App, p: &Principal, actor: &Actor, agent_id: &str, i: Input) -> Result<DirectiveRecord> {
    p.require(Perm::AgentsManage)?;
    let name = clean_name(i.name.as_deref().ok_or_else(|| Error::invalid_field("name", "name is required"))?)?;
    if i.action.is_none() {
        return Err(Error::invalid_field("action", "action is required"));
    }
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        get_in(tx, &p.workspace_id, agent_id)?;
        let body = build(tx, agent_id, None, i)?;
        if store::directive_named(tx, agent_id, &name)? {
            return Err(Error::conflict(format!("the agent already has a directive named `{name}`"))
                .with_details(json!({"field": "name"})));
        }
        let id = crate::ids::new_id();
        store::insert_directive(
            tx,
            &p.workspace_id,
            &Directive {
                id: id.clone(),
                agent_id: agent_id.to_string(),
                name: name.clone(),
                body,
                created_at: now.clone(),
                updated_at: now.clone(),
            },
        )?;
        touch(tx, agent_id, &now)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("agent.directive.created")
                .workspace(&p.workspace_id)
                .target("directive", &id)
                .meta(json!({"agentId": agent_id})),
        )?;
        record_of(tx, agent_id, &id)
    })
}

pub fn update(
    app: &App,
    p: &Principal,
    actor: &Actor,
    agent_id: &str,
    id: &str,
    mut i: Input,
) -> Result<DirectiveRecord> {
    p.require(Perm::AgentsManage)?;
    let now = rfc3339(app.clock.now());
    let new_name = i.name.take().map(|n| clean_name(&n)).transpose()?;
    app.db.write(|tx| {
        get_in(tx, &p.workspace_id, agent_id)?;
        let cur = by_id(tx, agent_id, id)?;
        let body = build(tx, agent_id, Some(&cur.body), i)?;
        let name = new_name.clone().unwrap_or(cur.name.clone());
        if name != cur.name && store::directive_named(tx, agent_id, &name)? {
            return Err(Error::conflict(format!("the agent already has a directive named `{name}`"))
                .with_details(json!({"field": "name"})));
        }
        store::update_directive(tx, &Directive { name, body, updated_at: now.clone(), ..cur })?;
        touch(tx, agent_id, &now)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("agent.directive.updated")
                .workspace(&p.workspace_id)
                .target("directive", id)
                .meta(json!({"agentId": agent_id})),
        )?;
        record_of(tx, agent_id, id)
    })
}

pub fn delete(app: &App, p: &Principal, actor: &Actor, agent_id: &str, id: &str) -> Result<()> {
    p.require(Perm::AgentsManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        get_in(tx, &p.workspace_id, agent_id)?;
        by_id(tx, agent_id, id)?;
        store::delete_directive(tx, id)?;
        touch(tx, agent_id, &now)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("agent.directive.deleted")
                .workspace(&p.workspace_id)
                .target("directive", id)
                .meta(json!({"agentId": agent_id})),
        )
    })
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DraftInput {
    /// What the operator wants, in their words.
    pub prompt: String,
}

/// The model's (or the template's) proposal: `{name, condition, action, priority}`, checked
/// against the draft schema when a model wrote it.
pub type DraftDoc = Value;

/// A proposed directive and the model that wrote it (none: the template did).
#[derive(Debug, Clone)]
pub struct Draft {
    pub draft: DraftDoc,
    pub generated_by: Option<crate::settings::llm_models::Choice>,
}

/// `POST …/directives/draft`: proposes a directive from a plain-language request (not saved).
/// With a chat model configured, the model writes it; otherwise a faithful template does.
pub fn draft(app: &App, p: &Principal, agent_id: &str, i: DraftInput) -> Result<Draft> {
    p.require(Perm::AgentsManage)?;
    let prompt = i.prompt.trim();
    if prompt.is_empty() || prompt.chars().count() > 2000 {
        return Err(Error::invalid_field("prompt", "prompt must be 1 to 2000 characters"));
    }
    let agent = app.db.read(|c| get_in(c, &p.workspace_id, agent_id))?;
    let override_choice = agent
        .settings
        .chat_model_override
        .as_ref()
        .map(|m| crate::settings::llm_models::Choice { provider: m.provider.clone(), model: m.model.clone() });
    let resolved = crate::models::resolve::resolve(
        app,
        &p.workspace_id,
        crate::models::resolve::Slot::Chat,
        override_choice.as_ref(),
    );
    if let Ok((sel, crate::models::resolve::Resolved::Model(m))) = resolved {
        use crate::models::chat::{Cancel, ChatRequest, Message, OutputSchema, chat_json};
        let schema = json!({"type": "object", "required": ["name", "condition", "action"], "properties": {
            "name": {"type": "string"},
            "condition": {"type": "object", "required": ["kind"], "properties": {"kind": {"type": "string", "enum": ["always", "contextual"]}, "description": {"type": "string"}}},
            "action": {"type": "string"},
            "priority": {"type": ["integer", "null"], "minimum": 0, "maximum": 100}
        }});
        let req = ChatRequest::new(vec![
            Message::system(
                "You turn an operator's request into one directive for a customer-facing assistant: a short kebab-case name, a condition (always, or contextual with a one-sentence description of when it applies), and an action (what the assistant should do, in the second person).",
            ),
            Message::user(prompt.to_string()),
        ]);
        match chat_json(m.as_ref(), req, OutputSchema { name: "directive_draft".into(), schema }, &Cancel::new()) {
            Ok((v, _)) => {
                let by = crate::settings::llm_models::Choice { provider: sel.provider, model: sel.model };
                return Ok(Draft { draft: v, generated_by: Some(by) });
            }
            Err(e) => tracing::warn!(error = %e.message, "directive draft model call failed; using the template"),
        }
    }
    let words: Vec<String> = prompt
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(5)
        .map(|w| w.to_lowercase())
        .collect();
    let lower = prompt.to_lowercase();
    let (condition, action) = match lower.strip_prefix("when ").or_else(|| lower.strip_prefix("if ")) {
        Some(_) => {
            let (when, then) = prompt.split_once(',').unwrap_or((prompt, prompt));
            (json!({"kind": "contextual", "description": when.trim()}), then.trim().to_string())
        }
        None => (json!({"kind": "always"}), prompt.to_string()),
    };
    let draft = json!({"name": words.join("-"), "condition": condition, "action": action, "priority": null});
    Ok(Draft { draft, generated_by: None })
}

/// Directives for a snapshot (sorted by name so diffs are stable).
pub fn snapshot(c: &Conn, agent_id: &str) -> Result<Vec<super::revisions::SnapshotEntry>> {
    let mut ds = of_agent(c, agent_id)?;
    ds.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(ds
        .iter()
        .map(|d| {
            let mut v = serde_json::to_value(&d.body).unwrap_or(json!({}));
            v["id"] = json!(d.id);
            v["name"] = json!(d.name);
            v
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(s: &str) -> Vec<String> {
        chip_tokens(s).into_iter().map(|t| t.name).collect()
    }

    #[test]
    fn chip_grammar() {
        let cases: &[(&str, &[&str])] = &[
            ("Use #faq_lookup.", &["faq_lookup"]),
            ("Use #faq_lookup, then answer", &["faq_lookup"]),
            ("Try #faq_lookup; or not", &["faq_lookup"]),
            ("Call #faq_lookup: now", &["faq_lookup"]),
            ("Really #faq_lookup!", &["faq_lookup"]),
            ("Maybe #faq_lookup?", &["faq_lookup"]),
            ("Ends with #faq_lookup...", &["faq_lookup"]),
            ("#start of text", &["start"]),
            ("dotted #docs.search works", &["docs.search"]),
            ("dotted end #docs.search.", &["docs.search"]),
            ("no chip in issue#12 or a#b", &[]),
            ("lone # sign and #1number", &[]),
            ("two #a_one and #b_two.", &["a_one", "b_two"]),
            ("Upper #FAQ_Lookup.", &["faq_lookup"]),
        ];
        for (text, want) in cases {
            assert_eq!(names(text), want.iter().map(|s| s.to_string()).collect::<Vec<_>>(), "{text}");
        }
        // the chip's range covers `#name` without the trailing punctuation
        let t = &chip_tokens("Use #faq_lookup.")[0];
        assert_eq!(&"Use #faq_lookup."[t.start..t.end], "#faq_lookup");
    }

    #[test]
    fn coverage_pairs() {
        let ok = |c: &[&str], r: Option<&[&str]>| {
            check_coverage(&CoverageCriteria {
                coverage: c.iter().map(|s| s.to_string()).collect(),
                reasons: r.map(|r| r.iter().map(|s| s.to_string()).collect()),
            })
            .is_ok()
        };
        assert!(ok(&["answered"], None));
        assert!(ok(&["answered"], Some(&["sufficient_evidence"])));
        assert!(ok(&["partial", "unanswered"], Some(&["insufficient_evidence", "intentional_scope_boundary"])));
        assert!(ok(&["unclear"], Some(&["ambiguous_request"])));
        assert!(!ok(&[], None));
        assert!(!ok(&["answered", "answered"], None));
        assert!(!ok(&["answered"], Some(&["insufficient_evidence"])));
        assert!(!ok(&["unclear"], Some(&["sufficient_evidence"])));
        assert!(!ok(&["partial"], Some(&["ambiguous_request"])));
        assert!(!ok(&["maybe"], None));
        assert!(!ok(&["partial"], Some(&["conflicting_evidence", "conflicting_evidence"])));
        let pairs =
            COVERAGE.iter().flat_map(|c| REASONS.iter().map(move |r| (c, r))).filter(|(c, r)| legal_pair(c, r)).count();
        assert_eq!(pairs, 8);
    }
}
