//! Retrieval for a turn: the agent's retrieval settings over the system defaults, the strategy
//! (`fixed`: one search; `reasoning`: up to [`MAX_PLANNED_SEARCHES`] planned searches; `auto`:
//! reasoning for multi-part questions, else fixed), the query rewrite into a semantic and a
//! lexical query, optional reranking, source scope and metadata filters.
//!
//! With a model in the `rewrite` slot the rewrite and the search plan are model calls; without one
//! they are deterministic (follow-ups borrow the previous question; multi-part questions split at
//! their joints). Reranking uses the `rerank` slot's model, or, with none, a lexical-coverage
//! reranker of our own (no cross-encoder model is available offline).

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};

use crate::agents::config::AgentConfig;
use crate::agents::skills::SkillConfig;
use crate::app::App;
use crate::error::Result;
use crate::ids::WorkspaceId;
use crate::models::chat::{Cancel, ChatModel, ChatRequest, Message, OutputSchema, chat_json};
use crate::models::resolve::Resolved;
use crate::search::query::{Hit, Retrieve, retrieve_traced};
use crate::search::{Mode, Tuning, filter::Filter};
use crate::settings::retrieval::RetrievalDefaults;

/// Most searches a reasoning plan runs.
pub const MAX_PLANNED_SEARCHES: usize = 3;
/// Chunks handed to the composer.
pub const FINAL_CONTEXT: usize = 12;
/// Candidates reranked at most, and per model call.
const RERANK_CANDIDATES: usize = 50;
const RERANK_BATCH: usize = 20;
const RERANK_CHARS: usize = 220;
/// Messages of history the rewrite sees.
const REWRITE_HISTORY: usize = 10;
/// Reciprocal-rank-fusion constant for merging several searches.
const RRF_K: f32 = 60.0;

/// The retrieval settings a turn runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub strategy: String,
    pub vector_top_k: usize,
    pub rerank_enabled: bool,
    pub rerank_top_k: usize,
    pub query_rewrite_enabled: bool,
    pub semantic_rewrite_instructions: String,
    pub lexical_rewrite_instructions: String,
    pub suggested_questions_enabled: bool,
    pub suggested_questions_count: usize,
    pub similarity_threshold: f32,
    /// Sources to search (`None`: all).
    pub source_ids: Option<Vec<String>>,
}

impl Settings {
    /// The system defaults (what a retrieval-only call without an agent runs on).
    pub fn system() -> Settings {
        let d = RetrievalDefaults::default();
        Settings {
            strategy: d.retrieval_strategy,
            vector_top_k: d.vector_top_k as usize,
            rerank_enabled: d.rerank_enabled,
            rerank_top_k: d.rerank_top_k as usize,
            query_rewrite_enabled: d.query_rewrite_enabled,
            semantic_rewrite_instructions: d.semantic_rewrite_instructions,
            lexical_rewrite_instructions: d.lexical_rewrite_instructions,
            suggested_questions_enabled: true,
            suggested_questions_count: 3,
            similarity_threshold: d.similarity_threshold,
            source_ids: None,
        }
    }

    fn apply(&mut self, m: &Map<String, Value>) {
        let int = |k: &str| m.get(k).and_then(Value::as_u64).map(|n| n as usize);
        let boolean = |k: &str| m.get(k).and_then(Value::as_bool);
        let text = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
        if let Some(s) = text("retrievalStrategy") {
            self.strategy = s;
        }
        if let Some(n) = int("vectorTopK") {
            self.vector_top_k = n;
        }
        if let Some(b) = boolean("rerankEnabled") {
            self.rerank_enabled = b;
        }
        if let Some(n) = int("rerankTopK") {
            self.rerank_top_k = n;
        }
        if let Some(b) = boolean("queryRewriteEnabled") {
            self.query_rewrite_enabled = b;
        }
        // a non-empty instruction replaces the default; an empty one keeps it
        if let Some(s) = text("semanticRewriteInstructions").filter(|s| !s.trim().is_empty()) {
            self.semantic_rewrite_instructions = s;
        }
        if let Some(s) = text("lexicalRewriteInstructions").filter(|s| !s.trim().is_empty()) {
            self.lexical_rewrite_instructions = s;
        }
        if let Some(b) = boolean("suggestedQuestionsEnabled") {
            self.suggested_questions_enabled = b;
        }
        if let Some(n) = int("suggestedQuestionsCount") {
            self.suggested_questions_count = n;
        }
        if let Some(scope) = m.get("sourceScope") {
            self.source_ids = scope_ids(scope);
        }
    }

    /// The agent's settings: system defaults, then the agent's `retrieval.answer` overrides, then
    /// the config of its enabled default-answer `retrieve` skill; the agent's source scope applies
    /// unless a skill narrows it.
    pub fn for_agent(agent: &AgentConfig) -> Settings {
        let mut s = Settings::system();
        s.source_ids = scope_ids(&serde_json::to_value(&agent.settings.source_scope).unwrap_or(Value::Null));
        if let Some(Value::Object(m)) = agent.settings.skill_settings.get("retrieval.answer") {
            s.apply(m);
        }
        if let Some(skill) = agent
            .skills
            .iter()
            .find(|k| k.enabled && k.capability == "retrieve" && k.invocation_mode == "default_answer")
        {
            s.apply(&skill.config);
        }
        s.suggested_questions_enabled &= agent.settings.suggested_questions_enabled;
        s
    }

    /// The settings a bound `retrieve` skill's lookup runs with.
    pub fn for_skill(&self, config: &SkillConfig) -> Settings {
        let mut s = self.clone();
        s.apply(config);
        s
    }

    /// Which strategy runs for this question.
    pub fn effective_strategy(&self, question: &str) -> &'static str {
        match self.strategy.as_str() {
            "reasoning" => "reasoning",
            "auto" if split_question(question).len() > 1 => "reasoning",
            _ => "fixed",
        }
    }
}

fn scope_ids(scope: &Value) -> Option<Vec<String>> {
    match scope["mode"].as_str() {
        Some("selected") => Some(
            scope["sourceIds"].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect(),
        ),
        _ => None,
    }
}

/// The models retrieval may use (the `rewrite` and `rerank` slots).
pub struct Helpers {
    pub rewrite: Resolved,
    pub rerank: Resolved,
}

/// The two queries a rewrite produces.
#[derive(Debug, Clone, PartialEq)]
pub struct Queries {
    pub semantic: String,
    pub lexical: String,
    /// `model`, `follow_up` (borrowed the previous question) or `none`.
    pub method: &'static str,
}

const DEFAULT_SEMANTIC: &str = "Rewrite the user's latest message as one standalone question that keeps every detail needed to search a knowledge base by meaning. Resolve pronouns and references from the conversation.";
const DEFAULT_LEXICAL: &str = "Write a short keyword query (the distinctive nouns, names, numbers and terms, no filler words) for a full-text search that would find passages answering the user's latest message.";

const FOLLOW_UP_WORDS: &[&str] = &[
    "it", "its", "that", "this", "they", "them", "those", "these", "there", "he", "she", "his", "her", "one", "ones",
    "same", "else", "more",
];

/// True when a message looks like a follow-up that only makes sense with the previous question.
fn is_follow_up(question: &str) -> bool {
    let words: Vec<String> =
        question.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect();
    !words.is_empty()
        && (words.len() <= 3 || (words.len() <= 8 && words.iter().any(|w| FOLLOW_UP_WORDS.contains(&w.as_str()))))
}

/// The semantic and lexical queries for `question`, given the earlier user messages.
pub fn rewrite(
    settings: &Settings,
    helpers: &Helpers,
    question: &str,
    history: &[(String, String)],
    cancel: &Cancel,
) -> Queries {
    let previous = history.iter().rev().find(|(role, _)| role == "user").map(|(_, t)| t.as_str());
    let plain = || match previous {
        Some(p) if is_follow_up(question) => {
            let q = format!("{p} {question}");
            Queries { semantic: q.clone(), lexical: q, method: "follow_up" }
        }
        _ => Queries { semantic: question.to_string(), lexical: question.to_string(), method: "none" },
    };
    if !settings.query_rewrite_enabled {
        return Queries { semantic: question.to_string(), lexical: question.to_string(), method: "disabled" };
    }
    let Resolved::Model(m) = &helpers.rewrite else { return plain() };
    let schema = json!({"type": "object", "required": ["semanticQuery", "lexicalQuery"], "additionalProperties": false,
        "properties": {"semanticQuery": {"type": "string"}, "lexicalQuery": {"type": "string"}}});
    let convo: String = history
        .iter()
        .rev()
        .take(REWRITE_HISTORY)
        .rev()
        .map(|(role, text)| format!("{role}: {}\n", text.chars().take(600).collect::<String>()))
        .collect();
    let req = ChatRequest::new(vec![
        Message::system(format!(
            "You prepare search queries.\nsemanticQuery: {}\nlexicalQuery: {}",
            settings.semantic_rewrite_instructions_or_default(),
            settings.lexical_rewrite_instructions_or_default()
        )),
        Message::user(format!("Conversation so far:\n{convo}\nLatest message: {question}")),
    ])
    .max_tokens(200);
    match chat_json(
        m.as_ref(),
        ChatRequest { temperature: 0.0, ..req },
        OutputSchema { name: "search_queries".into(), schema },
        cancel,
    ) {
        Ok((v, _)) => {
            let s = v["semanticQuery"].as_str().unwrap_or("").trim().to_string();
            let l = v["lexicalQuery"].as_str().unwrap_or("").trim().to_string();
            if s.is_empty() {
                return plain();
            }
            Queries { lexical: if l.is_empty() { s.clone() } else { l }, semantic: s, method: "model" }
        }
        Err(e) => {
            tracing::warn!(error = %e.message, "query rewrite failed; searching with the question as asked");
            plain()
        }
    }
}

impl Settings {
    fn semantic_rewrite_instructions_or_default(&self) -> &str {
        if self.semantic_rewrite_instructions.trim().is_empty() {
            DEFAULT_SEMANTIC
        } else {
            &self.semantic_rewrite_instructions
        }
    }
    fn lexical_rewrite_instructions_or_default(&self) -> &str {
        if self.lexical_rewrite_instructions.trim().is_empty() {
            DEFAULT_LEXICAL
        } else {
            &self.lexical_rewrite_instructions
        }
    }
}

/// Splits a multi-part question at its joints (`?`, `;`, "and also", "as well as", "and"
/// between two clauses that each carry at least two content words). At most
/// [`MAX_PLANNED_SEARCHES`] parts; a simple question is one part.
pub fn split_question(question: &str) -> Vec<String> {
    let content_words = |s: &str| s.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 3).count();
    let mut parts: Vec<String> = Vec::new();
    for piece in question.split(['?', ';']) {
        // ASCII folding keeps byte offsets: the joints are ASCII, so an offset found in `lower`
        // is a char boundary of `piece` (full Unicode lowercasing can change lengths: `İ`).
        let lower = piece.to_ascii_lowercase();
        let mut rest = piece.to_string();
        for joint in [" and also ", " as well as ", " and "] {
            if let Some(i) = lower.find(joint) {
                let (a, b) = (&piece[..i], &piece[i + joint.len()..]);
                if content_words(a) >= 2 && content_words(b) >= 2 {
                    parts.push(a.trim().to_string());
                    rest = b.to_string();
                }
                break;
            }
        }
        if content_words(&rest) >= 1 {
            parts.push(rest.trim().to_string());
        }
    }
    parts.retain(|p| !p.is_empty());
    if parts.len() <= 1 {
        return vec![question.trim().to_string()];
    }
    parts.truncate(MAX_PLANNED_SEARCHES);
    parts
}

/// A reasoning plan: the searches to run.
fn plan(helpers: &Helpers, question: &str, queries: &Queries, cancel: &Cancel) -> (Vec<String>, &'static str) {
    if let Resolved::Model(m) = &helpers.rewrite {
        let schema = json!({"type": "object", "required": ["searches"], "properties": {"searches": {"type": "array", "items": {"type": "string"}}}});
        let req = ChatRequest::new(vec![
            Message::system(format!(
                "Plan the searches of a knowledge base needed to answer the question: between 1 and {MAX_PLANNED_SEARCHES} short, self-contained search queries, one per distinct thing to look up."
            )),
            Message::user(queries.semantic.clone()),
        ])
        .max_tokens(200);
        match chat_json(
            m.as_ref(),
            ChatRequest { temperature: 0.0, ..req },
            OutputSchema { name: "search_plan".into(), schema },
            cancel,
        ) {
            Ok((v, _)) => {
                let mut s: Vec<String> = v["searches"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect();
                s.truncate(MAX_PLANNED_SEARCHES);
                if !s.is_empty() {
                    return (s, "model");
                }
            }
            Err(e) => tracing::warn!(error = %e.message, "search planning failed; splitting the question instead"),
        }
    }
    let _ = question;
    (split_question(&queries.semantic), "split")
}

/// What retrieval found, and a content-free account of it for the trace.
pub struct Retrieved {
    pub hits: Vec<Hit>,
    pub trace: Value,
    pub queries: Queries,
}

fn tuning(s: &Settings) -> Tuning {
    Tuning { vector_k: s.vector_top_k.max(1), min_similarity: s.similarity_threshold, ..Tuning::default() }
}

/// One search, chunks not collapsed per document.
fn search(
    app: &App,
    ws: &WorkspaceId,
    s: &Settings,
    semantic: &str,
    lexical: Option<&str>,
    filter: Option<&Filter>,
    limit: usize,
) -> Result<(Vec<Hit>, Value)> {
    let r = Retrieve {
        query: semantic.to_string(),
        lexical_query: lexical.filter(|l| *l != semantic).map(str::to_string),
        filter: filter.cloned(),
        source_ids: s.source_ids.clone(),
        mode: Mode::Hybrid,
        limit,
        collapse: false,
    };
    let (hits, t) = retrieve_traced(app, ws, &r, &tuning(s))?;
    let trace = json!({"lexicalCandidates": t.lexical_candidates, "vectorCandidates": t.vector_candidates,
                       "filteredDocuments": t.filtered_documents, "results": hits.len(), "timingsMs": t.timings_ms});
    Ok((hits, trace))
}

/// Merges several rankings by reciprocal rank fusion, keeping the first copy of each chunk.
pub fn merge(lists: Vec<Vec<Hit>>, limit: usize) -> Vec<Hit> {
    let mut score: HashMap<String, f32> = HashMap::new();
    let mut first: HashMap<String, Hit> = HashMap::new();
    for list in lists {
        for (rank, h) in list.into_iter().enumerate() {
            *score.entry(h.chunk_id.clone()).or_default() += 1.0 / (RRF_K + rank as f32 + 1.0);
            first.entry(h.chunk_id.clone()).or_insert(h);
        }
    }
    let mut out: Vec<Hit> = first.into_values().collect();
    out.sort_by(|a, b| score[&b.chunk_id].total_cmp(&score[&a.chunk_id]).then(a.chunk_id.cmp(&b.chunk_id)));
    out.truncate(limit);
    out
}

/// Runs retrieval for a turn.
#[allow(clippy::too_many_arguments)]
pub fn run(
    app: &App,
    ws: &WorkspaceId,
    s: &Settings,
    helpers: &Helpers,
    question: &str,
    history: &[(String, String)],
    filter: Option<&Filter>,
    cancel: &Cancel,
) -> Result<Retrieved> {
    let queries = rewrite(s, helpers, question, history, cancel);
    let strategy = s.effective_strategy(question);
    let candidates =
        if s.rerank_enabled { RERANK_CANDIDATES.min(s.vector_top_k.max(FINAL_CONTEXT)) } else { FINAL_CONTEXT };
    let (hits, searches, plan_method) = if strategy == "reasoning" {
        let (searches, method) = plan(helpers, question, &queries, cancel);
        let mut lists = Vec::new();
        let mut traces = Vec::new();
        for q in &searches {
            let (h, t) = search(app, ws, s, q, None, filter, candidates)?;
            traces.push(t);
            lists.push(h);
        }
        (merge(lists, candidates), traces, Some(method))
    } else {
        let (h, t) = search(app, ws, s, &queries.semantic, Some(&queries.lexical), filter, candidates)?;
        (h, vec![t], None)
    };
    let before = hits.len();
    let (hits, rerank_trace) = if s.rerank_enabled && !hits.is_empty() {
        rerank(helpers, &queries.semantic, hits, s.rerank_top_k.max(1), cancel)
    } else {
        (hits, json!({"applied": false}))
    };
    let mut hits = hits;
    hits.truncate(FINAL_CONTEXT);
    let trace = json!({
        "strategy": {"configured": s.strategy, "effective": strategy, "plan": plan_method},
        "rewrite": {"enabled": s.query_rewrite_enabled, "method": queries.method, "semanticQueryLength": queries.semantic.chars().count(),
                    "lexicalQueryLength": queries.lexical.chars().count(), "separateLexical": queries.lexical != queries.semantic},
        "searches": searches,
        "vectorTopK": s.vector_top_k,
        "sourceScope": s.source_ids.as_ref().map(|v| v.len()),
        "metadataFilter": filter.is_some(),
        "candidatesBeforeRerank": before,
        "rerank": rerank_trace,
        "candidates": hits.iter().map(|h| json!({"chunkId": h.chunk_id, "documentId": h.document_id, "title": h.title, "score": h.score})).collect::<Vec<_>>(),
    });
    Ok(Retrieved { hits, trace, queries })
}

/// Reranks `hits` for `query` and keeps `keep`: with the `rerank` model when one is configured
/// (scores 0–10 per candidate, in batches), else by how much of the query each chunk covers.
fn rerank(helpers: &Helpers, query: &str, hits: Vec<Hit>, keep: usize, cancel: &Cancel) -> (Vec<Hit>, Value) {
    let scored: Vec<f32> = match &helpers.rerank {
        Resolved::Model(m) => match model_scores(m.as_ref(), query, &hits, cancel) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "reranking failed; keeping the retrieval order");
                let mut hits = hits;
                hits.truncate(keep);
                return (hits, json!({"applied": false, "error": "rerank_model_failed", "kept": keep}));
            }
        },
        Resolved::Builtin => coverage_scores(query, &hits),
    };
    let method = if matches!(helpers.rerank, Resolved::Model(_)) { "model" } else { "lexical_coverage" };
    let n = hits.len().max(1) as f32;
    let mut ranked: Vec<(f32, Hit)> = hits
        .into_iter()
        .zip(scored)
        .enumerate()
        // the reranker's score, with the retrieval order breaking ties and steadying it
        .map(|(i, (h, s))| (s + 0.25 * (1.0 - i as f32 / n), h))
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
    let out: Vec<Hit> = ranked.into_iter().take(keep).map(|(_, h)| h).collect();
    (out, json!({"applied": true, "method": method, "kept": keep}))
}

fn model_scores(
    m: &dyn ChatModel,
    query: &str,
    hits: &[Hit],
    cancel: &Cancel,
) -> std::result::Result<Vec<f32>, String> {
    let mut out = Vec::with_capacity(hits.len());
    for batch in hits.chunks(RERANK_BATCH) {
        let listing: String = batch
            .iter()
            .enumerate()
            .map(|(i, h)| {
                format!(
                    "[{i}] {}: {}\n",
                    h.title,
                    h.content.chars().take(RERANK_CHARS).collect::<String>().replace('\n', " ")
                )
            })
            .collect();
        let schema = json!({"type": "object", "required": ["scores"], "properties": {"scores": {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 10}}}});
        let req = ChatRequest::new(vec![
            Message::system("Score how well each passage answers the question, 0 (unrelated) to 10 (answers it fully). Return one score per passage, in order."),
            Message::user(format!("Question: {query}\n\nPassages:\n{listing}")),
        ])
        .max_tokens(300);
        let (v, _) = chat_json(
            m,
            ChatRequest { temperature: 0.0, ..req },
            OutputSchema { name: "rerank".into(), schema },
            cancel,
        )
        .map_err(|e| e.message)?;
        let scores: Vec<f32> =
            v["scores"].as_array().into_iter().flatten().filter_map(Value::as_f64).map(|x| x as f32 / 10.0).collect();
        if scores.len() != batch.len() {
            return Err(format!("expected {} scores, got {}", batch.len(), scores.len()));
        }
        out.extend(scores);
    }
    Ok(out)
}

/// The share of the query's distinct content words each chunk contains.
fn coverage_scores(query: &str, hits: &[Hit]) -> Vec<f32> {
    let words = |s: &str| -> HashSet<String> {
        s.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 2).map(str::to_lowercase).collect()
    };
    let q = words(query);
    hits.iter()
        .map(|h| if q.is_empty() { 0.0 } else { q.intersection(&words(&h.content)).count() as f32 / q.len() as f32 })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_part_questions_split_and_simple_ones_do_not() {
        assert_eq!(split_question("What is the return window?"), vec!["What is the return window?"]);
        assert_eq!(
            split_question("What is the return window and how are refunds paid?"),
            vec!["What is the return window", "how are refunds paid"]
        );
        assert_eq!(split_question("Opening hours? Parking options?").len(), 2);
        // "and" inside one thing is not a joint
        assert_eq!(split_question("Do you sell salt and pepper?").len(), 1);
        assert!(split_question("a? b? c? d? e? f?").len() <= MAX_PLANNED_SEARCHES);
    }

    #[test]
    fn follow_ups_borrow_the_previous_question_without_a_model() {
        let s = Settings::system();
        let h = Helpers { rewrite: Resolved::Builtin, rerank: Resolved::Builtin };
        let history = vec![("user".to_string(), "What is the return window for shoes?".to_string())];
        let q = rewrite(&s, &h, "and for jackets?", &history, &Cancel::new());
        assert_eq!(q.method, "follow_up");
        assert!(q.semantic.contains("return window") && q.semantic.contains("jackets"));
        let q = rewrite(&s, &h, "How do I reset my router password?", &history, &Cancel::new());
        assert_eq!((q.method, q.semantic.as_str()), ("none", "How do I reset my router password?"));
        let off = Settings { query_rewrite_enabled: false, ..Settings::system() };
        assert_eq!(rewrite(&off, &h, "and for jackets?", &history, &Cancel::new()).method, "disabled");
    }

    #[test]
    fn settings_layer_defaults_agent_overrides_and_skill_config() {
        let mut s = Settings::system();
        assert_eq!((s.strategy.as_str(), s.vector_top_k, s.rerank_enabled), ("fixed", 15, false));
        let m: Map<String, Value> = serde_json::from_value(json!({"vectorTopK": 40, "rerankEnabled": true, "semanticRewriteInstructions": "", "retrievalStrategy": "auto"})).unwrap();
        s.apply(&m);
        assert_eq!((s.vector_top_k, s.rerank_enabled, s.strategy.as_str()), (40, true, "auto"));
        assert!(s.semantic_rewrite_instructions.is_empty(), "an empty instruction keeps the default");
        assert_eq!(s.effective_strategy("Where is it?"), "fixed");
        assert_eq!(s.effective_strategy("What is the return window and how are refunds paid?"), "reasoning");
    }

    proptest::proptest! {
        /// What a turn does with a visitor's message before searching (routing, splitting a
        /// question, rewriting, references to context variables, the extractive answerer's
        /// sentence split, the model answer's parsing) never panics on arbitrary Unicode.
        #[test]
        fn query_handling_never_panics_on_arbitrary_unicode(q in crate::testkit::hostile_text(200)) {
            let parts = split_question(&q);
            proptest::prop_assert!(!parts.is_empty() && parts.len() <= MAX_PLANNED_SEARCHES);
            let _ = crate::turn::interpret::route(&q, 0, true);
            let _ = crate::turn::interpret::route(&q, 3, false);
            let s = Settings::system();
            let _ = s.effective_strategy(&q);
            let _ = crate::turn::context::references(&q, "plan");
            let _ = crate::agents::directives::chip_tokens(&q);
            for (off, sentence) in crate::models::extractive::sentences(&q) {
                proptest::prop_assert!(q[off..].starts_with(sentence));
            }
            let _ = crate::turn::markers::strip_markers(&q);
            let _ = crate::turn::markers::parse_head(&q);
            let _ = crate::turn::markers::claims(&q, 3);
            let passages = vec![crate::models::extractive::Passage {
                document_id: "d".into(), chunk_id: "c".into(), title: q.clone(), content: q.clone(), url: None,
            }];
            let _ = crate::models::extractive::compose(&q, &passages);
            let _ = crate::models::extractive::attribute(&q, &passages);
        }
    }
}
