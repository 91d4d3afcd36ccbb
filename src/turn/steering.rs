//! Directive matching and the binding winner (spec: Directive bindings rules 2–6; reference
//! turn-engine §2).
//!
//! * `always` directives match with confidence 1.0.
//! * `contextual` directives are judged by the workspace chat model (one call, temperature 0,
//!   kept at confidence ≥ 0.5) — or, when only the built-in answerer is available, by the cosine
//!   similarity of the question and the condition in the local embedding model, kept at
//!   ≥ [`EMBEDDING_THRESHOLD`] (the similarity is the confidence). A failed matcher matches no
//!   contextual directive and the turn goes on.
//! * Directives scoped to a routine or step (`routine:…`, `step:…` tags) do not apply outside
//!   routine turns; directives with `coverageCriteria` are matched after the answer's coverage is
//!   known (see [`coverage_gated`]).
//! * Relationships: `excludes` (the higher priority wins), `dependsOn` (every dependency must
//!   apply, cascading). Contextual matches are bounded: best confidence × priority first, at most
//!   8 and about 2,400 tokens (the first is always kept).
//! * Among matched directives with a binding, one wins: higher priority (null counts as 50), then
//!   higher confidence, then name ascending. A binding whose skill is missing, disabled, not
//!   `agent_selectable`, not available at runtime (MCP tools need a connection) or blocked (a
//!   retrieval binding on an agent without retrieval) is skipped; the action still applies.

use super::kinds::RouteKind;
use serde_json::{Value, json};

use crate::agents::config::{AgentConfig, AuthoredDirective};
use crate::app::App;
use crate::models::chat::{Cancel, ChatRequest, Message, OutputSchema, chat_json};
use crate::models::resolve::Resolved;

/// Cosine similarity (all-MiniLM-L6-v2) from which a contextual condition counts as matching
/// when no chat model can judge it. Chosen on paraphrase/unrelated pairs: paraphrases of a
/// condition score 0.5–0.8, unrelated questions below 0.25.
pub const EMBEDDING_THRESHOLD: f32 = 0.45;
pub const MODEL_THRESHOLD: f32 = 0.5;
const MAX_CONTEXTUAL: usize = 8;
const TOKEN_BUDGET: usize = 2400;
pub const DEFAULT_PRIORITY: i64 = 50;

#[derive(Debug, Clone)]
pub struct Matched {
    pub directive: AuthoredDirective,
    pub confidence: f32,
}

impl Matched {
    pub fn priority(&self) -> i64 {
        self.directive.body.priority.unwrap_or(DEFAULT_PRIORITY)
    }
    pub fn name(&self) -> &str {
        &self.directive.name
    }
}

/// The outcome of matching, with its trace.
pub struct Steering {
    pub matched: Vec<Matched>,
    /// Directives waiting for the coverage verdict.
    pub gated: Vec<AuthoredDirective>,
    pub trace: Value,
}

fn scoped_to_routine(d: &AuthoredDirective) -> bool {
    d.body.tags.iter().any(|t| t.starts_with("routine:") || t.starts_with("step:"))
}

/// Matches the agent's directives against the question.
pub fn match_directives(
    app: &App,
    agent: &AgentConfig,
    question: &str,
    route: RouteKind,
    matcher: &Resolved,
    cancel: &Cancel,
) -> Steering {
    let Sorted { mut skipped, always, contextual, gated } = sort_directives(agent);
    let (mut judged, method, failure) = if contextual.is_empty() {
        (Vec::new(), "none", None)
    } else {
        judge(app, matcher, &contextual, question, route, cancel)
    };
    let scores: Vec<Value> = contextual
        .iter()
        .map(|d| {
            let c = judged.iter().find(|m| m.directive.id == d.id).map(|m| m.confidence);
            json!({"id": d.id, "confidence": c.map(|c| (c * 1000.0).round() / 1000.0)})
        })
        .collect();
    let threshold = if method == "model" { MODEL_THRESHOLD } else { EMBEDDING_THRESHOLD };
    judged.retain(|m| m.confidence >= threshold);
    let kept = bound(judged, &mut skipped);
    let mut matched: Vec<Matched> = always.into_iter().chain(kept).collect();
    resolve_relationships(&mut matched, &mut skipped);
    // survivors in authored order
    let order = |id: &str| agent.directives.iter().position(|d| d.id == id).unwrap_or(usize::MAX);
    matched.sort_by_key(|m| order(&m.directive.id));
    let trace = json!({
        "method": method,
        "failure": failure,
        "threshold": if contextual.is_empty() { Value::Null } else { json!(threshold) },
        "contextual": scores,
        "matched": matched.iter().map(|m| json!({"id": m.directive.id, "confidence": (m.confidence * 1000.0).round() / 1000.0})).collect::<Vec<_>>(),
        "coverageGated": gated.iter().map(|d| d.id.clone()).collect::<Vec<_>>(),
        "skipped": skipped,
    });
    Steering { matched, gated, trace }
}

/// The agent's directives sorted by how they are matched.
struct Sorted {
    /// Trace entries of directives that do not apply.
    skipped: Vec<Value>,
    always: Vec<Matched>,
    contextual: Vec<AuthoredDirective>,
    /// Waiting for the coverage verdict.
    gated: Vec<AuthoredDirective>,
}

fn sort_directives(agent: &AgentConfig) -> Sorted {
    let mut skipped: Vec<Value> = Vec::new();
    let mut always = Vec::new();
    let mut contextual = Vec::new();
    let mut gated = Vec::new();
    for d in &agent.directives {
        if !d.body.enabled {
            skipped.push(json!({"id": d.id, "reason": "disabled"}));
        } else if scoped_to_routine(d) {
            skipped.push(json!({"id": d.id, "reason": "routine_scoped"}));
        } else if d.body.coverage_criteria.is_some() {
            gated.push(d.clone());
        } else if d.body.condition.kind == "always" {
            always.push(Matched { directive: d.clone(), confidence: 1.0 });
        } else {
            contextual.push(d.clone());
        }
    }
    Sorted { skipped, always, contextual, gated }
}

/// The contextual directives judged by the chat model, or by embeddings when only the built-in
/// answerer is available: the matches, the method and a failure (no matches) if the matcher failed.
fn judge(
    app: &App,
    matcher: &Resolved,
    contextual: &[AuthoredDirective],
    question: &str,
    route: RouteKind,
    cancel: &Cancel,
) -> (Vec<Matched>, &'static str, Option<&'static str>) {
    match matcher {
        Resolved::Model(m) => match judge_with_model(m.as_ref(), contextual, question, route, cancel) {
            Ok(v) => (v, "model", None),
            Err(e) => {
                tracing::warn!(error = %e, "directive_contextual_match_unavailable");
                (Vec::new(), "model", Some("matcher_failed"))
            }
        },
        Resolved::Builtin => match judge_with_embeddings(app, contextual, question) {
            Ok(v) => (v, "embedding", None),
            Err(e) => {
                tracing::warn!(error = %e, "directive_contextual_match_unavailable");
                (Vec::new(), "embedding", Some("matcher_failed"))
            }
        },
    }
}

/// Bounded: best confidence × priority first, at most 8, within the token budget (the first is
/// always kept).
fn bound(mut judged: Vec<Matched>, skipped: &mut Vec<Value>) -> Vec<Matched> {
    judged.sort_by(|a, b| {
        (b.confidence * b.priority() as f32)
            .total_cmp(&(a.confidence * a.priority() as f32))
            .then(a.name().cmp(b.name()))
    });
    let mut kept = Vec::new();
    let mut tokens = 0;
    for m in judged {
        let t = m.directive.body.action.chars().count() / 4 + 1;
        if kept.len() >= MAX_CONTEXTUAL {
            skipped.push(json!({"id": m.directive.id, "reason": "top_k"}));
        } else if !kept.is_empty() && tokens + t > TOKEN_BUDGET {
            skipped.push(json!({"id": m.directive.id, "reason": "token_budget"}));
        } else {
            tokens += t;
            kept.push(m);
        }
    }
    kept
}

/// `excludes`: of two matched directives where one excludes the other, the higher priority stays
/// (ties: the one that excludes). `dependsOn`: a directive whose dependencies did not all apply is
/// dropped, repeatedly until stable.
fn resolve_relationships(matched: &mut Vec<Matched>, skipped: &mut Vec<Value>) {
    let mut dropped: Vec<String> = Vec::new();
    for a in matched.iter() {
        for b in matched.iter() {
            if a.directive.id != b.directive.id
                && a.directive.body.excludes.iter().any(|x| *x == b.directive.name || *x == b.directive.id)
                && a.priority() >= b.priority()
            {
                dropped.push(b.directive.id.clone());
            }
        }
    }
    matched.retain(|m| {
        let keep = !dropped.contains(&m.directive.id);
        if !keep {
            skipped.push(json!({"id": m.directive.id, "reason": "excluded"}));
        }
        keep
    });
    loop {
        let names: Vec<(String, String)> =
            matched.iter().map(|m| (m.directive.id.clone(), m.directive.name.clone())).collect();
        let before = matched.len();
        matched.retain(|m| {
            let ok =
                m.directive.body.depends_on.iter().all(|dep| names.iter().any(|(id, name)| id == dep || name == dep));
            if !ok {
                skipped.push(json!({"id": m.directive.id, "reason": "unmet_dependency"}));
            }
            ok
        });
        if matched.len() == before {
            break;
        }
    }
}

fn judge_with_model(
    m: &dyn crate::models::chat::ChatModel,
    ds: &[AuthoredDirective],
    question: &str,
    route: RouteKind,
    cancel: &Cancel,
) -> Result<Vec<Matched>, String> {
    let listing: String = ds
        .iter()
        .map(|d| format!("- {}: {}\n", d.name, d.body.condition.description.as_deref().unwrap_or("")))
        .collect();
    let schema = json!({"type": "object", "required": ["matches"], "properties": {"matches": {"type": "array", "items": {
        "type": "object", "required": ["name", "confidence"],
        "properties": {"name": {"type": "string"}, "confidence": {"type": "number", "minimum": 0, "maximum": 1}, "reason": {"type": "string"}}}}}});
    let req = ChatRequest::new(vec![
        Message::system("For each condition, judge whether it applies to the visitor's message. Return every condition by name with a confidence from 0 to 1 and a short reason."),
        Message::user(format!("Conditions:\n{listing}\nTurn route: {route}\nVisitor's message: {question}")),
    ])
    .max_tokens(400);
    let (v, _) = chat_json(
        m,
        ChatRequest { temperature: 0.0, ..req },
        OutputSchema { name: "directive_matches".into(), schema },
        cancel,
    )
    .map_err(|e| e.message)?;
    Ok(v["matches"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| {
            let name = x["name"].as_str()?;
            let d = ds.iter().find(|d| d.name == name)?;
            Some(Matched { directive: d.clone(), confidence: x["confidence"].as_f64()? as f32 })
        })
        .collect())
}

fn judge_with_embeddings(app: &App, ds: &[AuthoredDirective], question: &str) -> Result<Vec<Matched>, String> {
    let e = app.models.embedder().map_err(|e| e.message)?;
    let mut texts: Vec<&str> = vec![question];
    texts.extend(ds.iter().map(|d| d.body.condition.description.as_deref().unwrap_or("")));
    let q = e.embed_query(question).map_err(|e| e.to_string())?;
    let conds = e.embed(&texts[1..]).map_err(|e| e.to_string())?;
    Ok(ds
        .iter()
        .zip(conds.vectors.iter())
        .map(|(d, v)| Matched { directive: d.clone(), confidence: crate::models::embed::cosine(&q, v).max(0.0) })
        .collect())
}

/// Directives whose `coverageCriteria` accept the answer's verdict.
pub fn coverage_gated(
    gated: &[AuthoredDirective],
    coverage: Option<&str>,
    reason: Option<&str>,
) -> Vec<AuthoredDirective> {
    let (Some(c), Some(r)) = (coverage, reason) else { return Vec::new() };
    gated
        .iter()
        .filter(|d| {
            d.body.coverage_criteria.as_ref().is_some_and(|cc| {
                cc.coverage.iter().any(|x| x == c) && cc.reasons.as_ref().is_none_or(|rs| rs.iter().any(|x| x == r))
            })
        })
        .cloned()
        .collect()
}

/// The binding selection of one turn.
#[derive(Debug, Default)]
pub struct Selection {
    /// The winning binding: `(directive id, skill name, capability)`.
    pub winner: Option<(String, String, String)>,
    pub trace: Value,
}

/// Picks the binding winner among matched directives (rule 4), skipping unusable bindings
/// (rule 5).
pub fn select_binding(agent: &AgentConfig, matched: &[Matched], route: RouteKind) -> Selection {
    let mut candidates: Vec<&Matched> = Vec::new();
    let mut skipped = Vec::new();
    for m in matched {
        let Some(b) = &m.directive.body.binding else { continue };
        let answers = m.directive.body.surfaces.is_empty() || m.directive.body.surfaces.iter().any(|s| s == "answer");
        let reason = match agent.skill(&b.skill_name) {
            _ if !answers => Some("not_answer_surface"),
            None => Some("skill_missing"),
            Some(s) if !s.enabled => Some("skill_disabled"),
            Some(s) if s.invocation_mode != "agent_selectable" => Some("not_turn_selectable"),
            // an external MCP skill claims the turn when its server is bound
            Some(s) if s.capability == "mcp_tool" && !s.config.contains_key(crate::agents::skills::MCP_SEALED) => {
                Some("not_registered")
            }
            Some(s) if s.capability == "mcp_tool" => None,
            Some(s) if s.capability == "retrieve" && !agent.settings.retrieval_enabled => Some("retrieval_unavailable"),
            Some(s) if s.capability == "retrieve" && route != RouteKind::Retrieval => Some("direct_route"),
            Some(s) if s.capability != "retrieve" => Some("not_bindable"),
            Some(_) => None,
        };
        match reason {
            Some(r) => skipped.push(json!({"directiveId": m.directive.id, "skillName": b.skill_name, "reason": r})),
            None => candidates.push(m),
        }
    }
    candidates.sort_by(|a, b| {
        b.priority().cmp(&a.priority()).then(b.confidence.total_cmp(&a.confidence)).then(a.name().cmp(b.name()))
    });
    let winner = candidates.first().map(|m| {
        #[allow(clippy::expect_used, reason = "only bound directives reach here")]
        let b = m.directive.body.binding.as_ref().expect("bound");
        let cap = agent.skill(&b.skill_name).map(|s| s.capability.clone()).unwrap_or_default();
        (m.directive.id.clone(), b.skill_name.clone(), cap)
    });
    let losing: Vec<Value> = candidates
        .iter()
        .skip(1)
        .map(|m| json!({"directiveId": m.directive.id, "skillName": m.directive.body.binding.as_ref().map(|b| b.skill_name.clone()), "reason": "outranked"}))
        .collect();
    let trace = json!({
        "selected": winner.as_ref().map(|(d, s, c)| json!({"directiveId": d, "skillName": s, "capability": c})),
        "losing": losing,
        "skipped": skipped,
    });
    Selection { winner, trace }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::config::SkillSnap;
    use crate::agents::directives::{Binding, Body, Condition};

    fn directive(name: &str, priority: Option<i64>, binding: Option<&str>) -> AuthoredDirective {
        AuthoredDirective {
            id: format!("id-{name}"),
            name: name.into(),
            body: Body {
                condition: Condition { kind: "always".into(), description: None },
                action: format!("do {name}"),
                priority,
                binding: binding.map(|s| Binding { kind: "skill".into(), skill_name: s.into() }),
                coverage_criteria: None,
                tags: vec![],
                description: None,
                enabled: true,
                depends_on: vec![],
                excludes: vec![],
                surfaces: vec![],
                metadata: Default::default(),
            },
        }
    }

    fn skill(name: &str, cap: &str, mode: &str, enabled: bool) -> SkillSnap {
        SkillSnap {
            id: format!("s-{name}"),
            name: name.into(),
            capability: cap.into(),
            target: None,
            config: Default::default(),
            invocation_mode: mode.into(),
            enabled,
        }
    }

    fn agent(skills: Vec<SkillSnap>) -> AgentConfig {
        AgentConfig {
            agent_id: "a".into(),
            revision_id: None,
            version: None,
            name: "A".into(),
            settings: Default::default(),
            directives: vec![],
            skills,
            context_variables: vec![],
            routines: vec![],
        }
    }

    fn m(d: AuthoredDirective, confidence: f32) -> Matched {
        Matched { directive: d, confidence }
    }

    #[test]
    fn binding_winner_by_priority_then_confidence_then_name() {
        let a = agent(vec![
            skill("faq", "retrieve", "agent_selectable", true),
            skill("kb", "retrieve", "agent_selectable", true),
        ]);
        // priority wins over confidence
        let s = select_binding(
            &a,
            &[m(directive("b", Some(60), Some("faq")), 0.6), m(directive("a", Some(40), Some("kb")), 1.0)],
            RouteKind::Retrieval,
        );
        assert_eq!(s.winner.unwrap().1, "faq");
        // equal priority: confidence
        let s = select_binding(
            &a,
            &[m(directive("b", None, Some("faq")), 0.6), m(directive("a", None, Some("kb")), 0.9)],
            RouteKind::Retrieval,
        );
        assert_eq!(s.winner.unwrap().1, "kb");
        // equal priority and confidence: name ascending
        let s = select_binding(
            &a,
            &[m(directive("zeta", Some(50), Some("faq")), 1.0), m(directive("alpha", None, Some("kb")), 1.0)],
            RouteKind::Retrieval,
        );
        assert_eq!(s.winner.unwrap().0, "id-alpha");
        assert_eq!(s.trace["losing"][0]["directiveId"], "id-zeta");
    }

    #[test]
    fn unusable_bindings_are_skipped_with_reasons() {
        let a = agent(vec![
            skill("off", "retrieve", "agent_selectable", false),
            skill("named", "retrieve", "routine_named", true),
            skill("mcp", "mcp_tool", "agent_selectable", true),
            skill("ok", "retrieve", "agent_selectable", true),
        ]);
        let ms = vec![
            m(directive("d1", Some(90), Some("off")), 1.0),
            m(directive("d2", Some(90), Some("named")), 1.0),
            m(directive("d3", Some(90), Some("mcp")), 1.0),
            m(directive("d4", Some(90), Some("gone")), 1.0),
            m(directive("d5", Some(10), Some("ok")), 1.0),
        ];
        let s = select_binding(&a, &ms, RouteKind::Retrieval);
        assert_eq!(s.winner.unwrap().1, "ok");
        let reasons: Vec<&str> =
            s.trace["skipped"].as_array().unwrap().iter().map(|x| x["reason"].as_str().unwrap()).collect();
        assert_eq!(reasons, vec!["skill_disabled", "not_turn_selectable", "not_registered", "skill_missing"]);
        // a direct-route turn stages no retrieval lookup
        assert!(select_binding(&a, &ms, RouteKind::Direct).winner.is_none());
    }

    #[test]
    fn excludes_and_depends_on() {
        let mut hi = directive("hi", Some(80), None);
        hi.body.excludes = vec!["lo".into()];
        let lo = directive("lo", Some(20), None);
        let mut dep = directive("dep", None, None);
        dep.body.depends_on = vec!["lo".into()];
        let mut ms = vec![m(hi, 1.0), m(lo, 1.0), m(dep, 1.0)];
        let mut skipped = vec![];
        resolve_relationships(&mut ms, &mut skipped);
        let names: Vec<&str> = ms.iter().map(|m| m.name()).collect();
        assert_eq!(names, vec!["hi"]);
        assert_eq!(skipped.len(), 2);
    }

    #[test]
    fn coverage_gated_directives_follow_the_verdict() {
        let mut d = directive("gap", None, None);
        d.body.coverage_criteria = Some(crate::agents::directives::CoverageCriteria {
            coverage: vec!["unanswered".into()],
            reasons: Some(vec!["insufficient_evidence".into()]),
        });
        let g = vec![d];
        assert_eq!(coverage_gated(&g, Some("unanswered"), Some("insufficient_evidence")).len(), 1);
        assert!(coverage_gated(&g, Some("unanswered"), Some("intentional_scope_boundary")).is_empty());
        assert!(coverage_gated(&g, Some("answered"), Some("sufficient_evidence")).is_empty());
        assert!(coverage_gated(&g, None, None).is_empty());
    }
}
