//! Eval assertions: the nine types, read from their JSON with the reference's schema (a 400
//! naming the assertion's index and field), evaluated against what a run observed, and the
//! run's status aggregated from the verdicts. Pure: no I/O; `llm_judge` verdicts come from the
//! caller through [`Judge`].

use regex::RegexBuilder;
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};

/// Assertions per case, at most.
pub const MAX_ASSERTIONS: usize = 20;
const MAX_K: i64 = 100;
const MAX_DOCUMENT_IDS: usize = 100;
const MAX_PATTERN: usize = 4000;
const MAX_EXPECTED_ANSWER: usize = 8000;
const MAX_CRITERIA: usize = 2000;
/// The compiled size a regex pattern may reach (a pattern is at most 4,000 characters, but
/// repetition can blow it up).
const REGEX_SIZE_LIMIT: usize = 1 << 20;

pub const TYPES: [&str; 9] = [
    "retrieval_includes_document",
    "retrieval_excludes_document",
    "retrieval_top_k_includes_document",
    "retrieval_document_order",
    "retrieval_chunk_metadata",
    "answer_cites_document",
    "answer_contains",
    "answer_does_not_contain",
    "llm_judge",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchMode {
    Substring,
    Regex,
}

/// One assertion.
#[derive(Debug, Clone, PartialEq)]
pub enum Assertion {
    IncludesDocument { document_id: String },
    ExcludesDocument { document_id: String },
    TopKIncludesDocument { document_id: String, k: i64 },
    DocumentOrder { document_ids: Vec<String> },
    ChunkMetadata { document_id: String, metadata: Map<String, Value> },
    CitesDocument { document_id: String },
    Contains { pattern: String, mode: MatchMode, case_sensitive: bool },
    DoesNotContain { pattern: String, mode: MatchMode, case_sensitive: bool },
    Judge { expected_answer: String, criteria: Option<String> },
}

impl Assertion {
    pub fn kind(&self) -> &'static str {
        match self {
            Assertion::IncludesDocument { .. } => TYPES[0],
            Assertion::ExcludesDocument { .. } => TYPES[1],
            Assertion::TopKIncludesDocument { .. } => TYPES[2],
            Assertion::DocumentOrder { .. } => TYPES[3],
            Assertion::ChunkMetadata { .. } => TYPES[4],
            Assertion::CitesDocument { .. } => TYPES[5],
            Assertion::Contains { .. } => TYPES[6],
            Assertion::DoesNotContain { .. } => TYPES[7],
            Assertion::Judge { .. } => TYPES[8],
        }
    }

    /// Whether it needs an answer (scored only in `full_assistant`).
    pub fn needs_answer(&self) -> bool {
        matches!(
            self,
            Assertion::CitesDocument { .. }
                | Assertion::Contains { .. }
                | Assertion::DoesNotContain { .. }
                | Assertion::Judge { .. }
        )
    }

    /// The stored and wire JSON (the same shape it was read from, defaults filled in).
    pub fn to_json(&self) -> Value {
        let t = self.kind();
        let mode = |m: &MatchMode| if *m == MatchMode::Regex { "regex" } else { "substring" };
        match self {
            Assertion::IncludesDocument { document_id }
            | Assertion::ExcludesDocument { document_id }
            | Assertion::CitesDocument { document_id } => json!({"type": t, "documentId": document_id}),
            Assertion::TopKIncludesDocument { document_id, k } => json!({"type": t, "documentId": document_id, "k": k}),
            Assertion::DocumentOrder { document_ids } => json!({"type": t, "documentIds": document_ids}),
            Assertion::ChunkMetadata { document_id, metadata } => {
                json!({"type": t, "documentId": document_id, "metadata": metadata})
            }
            Assertion::Contains { pattern, mode: m, case_sensitive }
            | Assertion::DoesNotContain { pattern, mode: m, case_sensitive } => {
                json!({"type": t, "pattern": pattern, "matchMode": mode(m), "caseSensitive": case_sensitive})
            }
            Assertion::Judge { expected_answer, criteria } => {
                json!({"type": t, "expectedAnswer": expected_answer, "criteria": criteria})
            }
        }
    }
}

fn bad(index: usize, field: &str, message: impl Into<String>) -> Error {
    let path = if field.is_empty() { format!("assertions[{index}]") } else { format!("assertions[{index}].{field}") };
    Error::invalid_field(&path, message).with_details(json!({"field": path, "index": index}))
}

fn is_uuid(s: &str) -> bool {
    uuid::Uuid::parse_str(s).is_ok() && s.len() == 36
}

/// Reads a list of assertions (at most [`MAX_ASSERTIONS`]).
pub fn parse_list(v: &Value) -> Result<Vec<Assertion>> {
    let Some(items) = v.as_array() else {
        return Err(Error::invalid_field("assertions", "assertions must be an array"));
    };
    if items.len() > MAX_ASSERTIONS {
        return Err(Error::invalid_field(
            "assertions",
            format!("a case has at most {MAX_ASSERTIONS} assertions, not {}", items.len()),
        ));
    }
    items.iter().enumerate().map(|(i, a)| parse(a, i)).collect()
}

/// Reads one assertion; `index` names it in errors.
pub fn parse(v: &Value, index: usize) -> Result<Assertion> {
    let Some(o) = v.as_object() else {
        return Err(bad(index, "", "an assertion is an object"));
    };
    let t = o.get("type").and_then(Value::as_str).ok_or_else(|| bad(index, "type", "type is required"))?;
    let allowed: &[&str] = match t {
        "retrieval_includes_document" | "retrieval_excludes_document" | "answer_cites_document" => &["documentId"],
        "retrieval_top_k_includes_document" => &["documentId", "k"],
        "retrieval_document_order" => &["documentIds"],
        "retrieval_chunk_metadata" => &["documentId", "metadata"],
        "answer_contains" | "answer_does_not_contain" => &["pattern", "matchMode", "caseSensitive"],
        "llm_judge" => &["expectedAnswer", "criteria"],
        other => {
            return Err(bad(index, "type", format!("unknown assertion type {other:?}; known: {}", TYPES.join(", "))));
        }
    };
    if let Some(k) = o.keys().find(|k| *k != "type" && !allowed.contains(&k.as_str())) {
        return Err(bad(index, k, format!("{t} takes no field {k:?} (it takes {})", allowed.join(", "))));
    }
    let document_id = || -> Result<String> {
        let d = o
            .get("documentId")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(index, "documentId", "documentId is required"))?;
        if !is_uuid(d) {
            return Err(bad(index, "documentId", "documentId must be a document id (a UUID)"));
        }
        Ok(d.to_string())
    };
    let text = |field: &str, max: usize, required: bool| -> Result<Option<String>> {
        match o.get(field) {
            None | Some(Value::Null) if !required => Ok(None),
            None | Some(Value::Null) => Err(bad(index, field, format!("{field} is required"))),
            Some(Value::String(s)) => {
                let n = s.chars().count();
                if required && n == 0 {
                    return Err(bad(index, field, format!("{field} must not be empty")));
                }
                if n > max {
                    return Err(bad(index, field, format!("{field} is at most {max} characters, not {n}")));
                }
                Ok(Some(s.clone()))
            }
            Some(_) => Err(bad(index, field, format!("{field} must be a string"))),
        }
    };
    let a = match t {
        "retrieval_includes_document" => Assertion::IncludesDocument { document_id: document_id()? },
        "retrieval_excludes_document" => Assertion::ExcludesDocument { document_id: document_id()? },
        "answer_cites_document" => Assertion::CitesDocument { document_id: document_id()? },
        "retrieval_top_k_includes_document" => {
            let k = o.get("k").and_then(Value::as_i64).ok_or_else(|| bad(index, "k", "k is required (an integer)"))?;
            if !(1..=MAX_K).contains(&k) {
                return Err(bad(index, "k", format!("k must be 1 to {MAX_K}, not {k}")));
            }
            Assertion::TopKIncludesDocument { document_id: document_id()?, k }
        }
        "retrieval_document_order" => {
            let ids = o
                .get("documentIds")
                .and_then(Value::as_array)
                .ok_or_else(|| bad(index, "documentIds", "documentIds is required (an array)"))?;
            if ids.is_empty() || ids.len() > MAX_DOCUMENT_IDS {
                return Err(bad(index, "documentIds", format!("documentIds takes 1 to {MAX_DOCUMENT_IDS} ids")));
            }
            let mut out = Vec::new();
            for (j, d) in ids.iter().enumerate() {
                match d.as_str() {
                    Some(s) if is_uuid(s) => out.push(s.to_string()),
                    _ => {
                        return Err(bad(
                            index,
                            &format!("documentIds[{j}]"),
                            "each entry must be a document id (a UUID)",
                        ));
                    }
                }
            }
            Assertion::DocumentOrder { document_ids: out }
        }
        "retrieval_chunk_metadata" => {
            let m = o
                .get("metadata")
                .and_then(Value::as_object)
                .ok_or_else(|| bad(index, "metadata", "metadata is required (an object)"))?;
            if m.is_empty() {
                return Err(bad(index, "metadata", "metadata must name at least one field"));
            }
            if let Some((k, _)) = m.iter().find(|(_, v)| v.is_array() || v.is_object()) {
                return Err(bad(index, &format!("metadata.{k}"), "values are strings, numbers, booleans or null"));
            }
            Assertion::ChunkMetadata { document_id: document_id()?, metadata: m.clone() }
        }
        "answer_contains" | "answer_does_not_contain" => {
            let pattern = text("pattern", MAX_PATTERN, true)?.unwrap_or_default();
            let mode = match o.get("matchMode").map(|v| v.as_str()) {
                None | Some(Some("substring")) => MatchMode::Substring,
                Some(Some("regex")) => MatchMode::Regex,
                _ => return Err(bad(index, "matchMode", "matchMode is substring or regex")),
            };
            let case_sensitive = match o.get("caseSensitive") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err(bad(index, "caseSensitive", "caseSensitive must be a boolean")),
            };
            if t == "answer_contains" {
                Assertion::Contains { pattern, mode, case_sensitive }
            } else {
                Assertion::DoesNotContain { pattern, mode, case_sensitive }
            }
        }
        _ => Assertion::Judge {
            expected_answer: text("expectedAnswer", MAX_EXPECTED_ANSWER, true)?.unwrap_or_default(),
            criteria: text("criteria", MAX_CRITERIA, false)?.filter(|c| !c.trim().is_empty()),
        },
    };
    Ok(a)
}

/// One retrieved chunk as a run observed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub chunk_id: String,
    pub document_id: String,
    pub title: String,
    /// From 1.
    pub rank: usize,
    pub similarity: Option<f32>,
    pub metadata: Value,
}

/// What a run saw: the retrieved chunks in order and, in `full_assistant`, the answer.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub chunks: Vec<Chunk>,
    pub answer: Option<String>,
    /// Documents the answer cites.
    pub cited_documents: Vec<String>,
    /// The run failed: every assertion is an `error` with this reason.
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Pass,
    Fail,
    Error,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Error => "error",
        }
    }
}

/// One assertion's verdict; `extra` holds what a judge adds (its model, prompt hash, usage).
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub status: Status,
    pub reason: Option<String>,
    pub extra: Option<Value>,
}

fn verdict(status: Status, reason: impl Into<String>) -> Verdict {
    Verdict { status, reason: Some(reason.into()), extra: None }
}

/// Grades an answer against an expected one (the `llm_judge` call).
pub trait Judge {
    fn judge(&mut self, index: usize, expected: &str, criteria: Option<&str>, answer: &str) -> Verdict;
}

/// Judges nothing: every `llm_judge` is an error (no model to judge with).
pub struct NoJudge(pub String);

impl Judge for NoJudge {
    fn judge(&mut self, _: usize, _: &str, _: Option<&str>, _: &str) -> Verdict {
        verdict(Status::Error, self.0.clone())
    }
}

const NEEDS_ANSWER: &str = "this assertion needs an answer: run the case in full_assistant mode";

/// Evaluates every assertion against what the run observed.
pub fn evaluate(assertions: &[Assertion], o: &Observed, judge: &mut dyn Judge) -> Vec<Verdict> {
    assertions.iter().enumerate().map(|(i, a)| evaluate_one(i, a, o, judge)).collect()
}

fn retrieved(o: &Observed, doc: &str) -> bool {
    o.chunks.iter().any(|c| c.document_id == doc)
}

fn evaluate_one(index: usize, a: &Assertion, o: &Observed, judge: &mut dyn Judge) -> Verdict {
    if let Some(e) = &o.error {
        return verdict(Status::Error, format!("the run failed: {e}"));
    }
    if a.needs_answer() && o.answer.is_none() {
        return verdict(Status::Error, NEEDS_ANSWER);
    }
    let answer = o.answer.as_deref().unwrap_or_default();
    match a {
        Assertion::IncludesDocument { document_id } => {
            if retrieved(o, document_id) {
                verdict(Status::Pass, format!("Document {document_id} was retrieved."))
            } else {
                verdict(Status::Fail, format!("Document {document_id} was not retrieved."))
            }
        }
        Assertion::ExcludesDocument { document_id } => {
            if retrieved(o, document_id) {
                verdict(Status::Fail, format!("Document {document_id} was retrieved but should not be."))
            } else {
                verdict(Status::Pass, format!("Document {document_id} was not retrieved."))
            }
        }
        Assertion::TopKIncludesDocument { document_id, k } => {
            if *k <= 0 {
                return verdict(Status::Error, format!("k must be positive, not {k}"));
            }
            let found = o.chunks.iter().take(*k as usize).position(|c| &c.document_id == document_id);
            match found {
                Some(p) => {
                    verdict(Status::Pass, format!("Document {document_id} is at chunk rank {} (top {k}).", p + 1))
                }
                None => verdict(Status::Fail, format!("Document {document_id} is not among the top {k} chunks.")),
            }
        }
        Assertion::DocumentOrder { document_ids } => {
            let mut order: Vec<&str> = Vec::new();
            for c in &o.chunks {
                if !order.contains(&c.document_id.as_str()) {
                    order.push(&c.document_id);
                }
            }
            let positions: Vec<Option<usize>> =
                document_ids.iter().map(|d| order.iter().position(|x| x == d)).collect();
            if let Some(missing) = document_ids.iter().zip(&positions).find(|(_, p)| p.is_none()) {
                return verdict(Status::Fail, format!("Document {} was not retrieved.", missing.0));
            }
            let p: Vec<usize> = positions.into_iter().flatten().collect();
            match p.windows(2).position(|w| w[0] >= w[1]) {
                None => verdict(Status::Pass, "The documents were retrieved in the expected order."),
                Some(i) => verdict(
                    Status::Fail,
                    format!("Document {} was retrieved before {}.", document_ids[i + 1], document_ids[i]),
                ),
            }
        }
        Assertion::ChunkMetadata { document_id, metadata } => {
            let chunks: Vec<&Chunk> = o.chunks.iter().filter(|c| &c.document_id == document_id).collect();
            if chunks.is_empty() {
                return verdict(Status::Fail, format!("Document {document_id} was not retrieved."));
            }
            let matches = |c: &Chunk| metadata.iter().all(|(k, v)| c.metadata.get(k).unwrap_or(&Value::Null) == v);
            if chunks.iter().any(|c| matches(c)) {
                verdict(Status::Pass, format!("A retrieved chunk of {document_id} carries the expected metadata."))
            } else {
                let keys: Vec<&str> = metadata.keys().map(String::as_str).collect();
                verdict(
                    Status::Fail,
                    format!("No retrieved chunk of {document_id} carries the expected values of {}.", keys.join(", ")),
                )
            }
        }
        Assertion::CitesDocument { document_id } => {
            if o.cited_documents.iter().any(|d| d == document_id) {
                verdict(Status::Pass, format!("The answer cites document {document_id}."))
            } else {
                verdict(Status::Fail, format!("The answer does not cite document {document_id}."))
            }
        }
        Assertion::Contains { pattern, mode, case_sensitive } => match found(answer, pattern, *mode, *case_sensitive) {
            Err(e) => verdict(Status::Error, e),
            Ok(true) => verdict(Status::Pass, format!("The answer contains {}.", shown(pattern, *mode))),
            Ok(false) => verdict(Status::Fail, format!("The answer does not contain {}.", shown(pattern, *mode))),
        },
        Assertion::DoesNotContain { pattern, mode, case_sensitive } => {
            match found(answer, pattern, *mode, *case_sensitive) {
                Err(e) => verdict(Status::Error, e),
                Ok(true) => verdict(Status::Fail, format!("The answer contains {}.", shown(pattern, *mode))),
                Ok(false) => verdict(Status::Pass, format!("The answer does not contain {}.", shown(pattern, *mode))),
            }
        }
        Assertion::Judge { expected_answer, criteria } => {
            judge.judge(index, expected_answer, criteria.as_deref(), answer)
        }
    }
}

fn shown(pattern: &str, mode: MatchMode) -> String {
    let short: String = pattern.chars().take(80).collect();
    let more = if short.len() < pattern.len() { "…" } else { "" };
    match mode {
        MatchMode::Substring => format!("{short:?}{more}"),
        MatchMode::Regex => format!("a match for /{short}{more}/"),
    }
}

/// Whether `answer` contains `pattern`; an empty pattern or an invalid regex is an error.
fn found(answer: &str, pattern: &str, mode: MatchMode, case_sensitive: bool) -> std::result::Result<bool, String> {
    if pattern.is_empty() {
        return Err("the pattern is empty".into());
    }
    match mode {
        MatchMode::Substring if case_sensitive => Ok(answer.contains(pattern)),
        MatchMode::Substring => Ok(answer.to_lowercase().contains(&pattern.to_lowercase())),
        MatchMode::Regex => RegexBuilder::new(pattern)
            .case_insensitive(!case_sensitive)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map(|r| r.is_match(answer))
            .map_err(|e| format!("the pattern is not a valid regular expression: {}", first_line(&e.to_string()))),
    }
}

fn first_line(s: &str) -> String {
    s.lines().rfind(|l| !l.trim().is_empty()).unwrap_or(s).trim().to_string()
}

/// A run's status and reason from its verdicts: none ⇒ `recorded`; any error ⇒ `error`; any
/// failure ⇒ `fail` (the first failure's reason); else `pass`.
pub fn aggregate(verdicts: &[Verdict]) -> (&'static str, Option<String>) {
    if verdicts.is_empty() {
        return ("recorded", Some("The case has no assertions; the run was recorded.".into()));
    }
    if let Some(v) = verdicts.iter().find(|v| v.status == Status::Error) {
        return ("error", v.reason.clone());
    }
    if let Some(v) = verdicts.iter().find(|v| v.status == Status::Fail) {
        return ("fail", v.reason.clone());
    }
    if verdicts.len() == 1 {
        return ("pass", verdicts[0].reason.clone());
    }
    ("pass", Some(format!("All {} assertions passed.", verdicts.len())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const D1: &str = "0190a0b0-0000-7000-8000-000000000001";
    const D2: &str = "0190a0b0-0000-7000-8000-000000000002";
    const D3: &str = "0190a0b0-0000-7000-8000-000000000003";

    fn chunk(doc: &str, rank: usize, meta: Value) -> Chunk {
        Chunk {
            chunk_id: format!("c{rank}"),
            document_id: doc.into(),
            title: "t".into(),
            rank,
            similarity: None,
            metadata: meta,
        }
    }

    fn observed(answer: Option<&str>) -> Observed {
        Observed {
            chunks: vec![
                chunk(D1, 1, json!({"lang": "en"})),
                chunk(D2, 2, json!({"year": 2024})),
                chunk(D1, 3, json!({})),
            ],
            answer: answer.map(str::to_string),
            cited_documents: vec![D2.into()],
            error: None,
        }
    }

    fn one(a: Value, o: &Observed) -> Verdict {
        let a = parse(&a, 0).unwrap();
        evaluate(&[a], o, &mut NoJudge("no judge".into())).remove(0)
    }

    #[test]
    fn retrieval_assertions_pass_and_fail() {
        let o = observed(None);
        assert_eq!(one(json!({"type": "retrieval_includes_document", "documentId": D1}), &o).status, Status::Pass);
        assert_eq!(one(json!({"type": "retrieval_includes_document", "documentId": D3}), &o).status, Status::Fail);
        assert_eq!(one(json!({"type": "retrieval_excludes_document", "documentId": D3}), &o).status, Status::Pass);
        assert_eq!(one(json!({"type": "retrieval_excludes_document", "documentId": D2}), &o).status, Status::Fail);
        let top = |k: i64| json!({"type": "retrieval_top_k_includes_document", "documentId": D2, "k": k});
        assert_eq!(one(top(2), &o).status, Status::Pass);
        assert_eq!(one(top(1), &o).status, Status::Fail);
        let order = |ids: Vec<&str>| json!({"type": "retrieval_document_order", "documentIds": ids});
        assert_eq!(one(order(vec![D1, D2]), &o).status, Status::Pass);
        assert_eq!(one(order(vec![D2, D1]), &o).status, Status::Fail);
        assert_eq!(one(order(vec![D1, D3]), &o).status, Status::Fail);
        let meta = |m: Value| json!({"type": "retrieval_chunk_metadata", "documentId": D2, "metadata": m});
        assert_eq!(one(meta(json!({"year": 2024})), &o).status, Status::Pass);
        // strict: a string is not the number
        assert_eq!(one(meta(json!({"year": "2024"})), &o).status, Status::Fail);
        assert_eq!(one(meta(json!({"year": 2024, "lang": "en"})), &o).status, Status::Fail);
    }

    #[test]
    fn top_k_at_or_below_zero_is_an_error_when_evaluated() {
        let a = Assertion::TopKIncludesDocument { document_id: D1.into(), k: 0 };
        let v = evaluate(&[a], &observed(None), &mut NoJudge(String::new()));
        assert_eq!(v[0].status, Status::Error);
    }

    #[test]
    fn answer_assertions_need_an_answer() {
        let o = observed(None);
        for a in [
            json!({"type": "answer_cites_document", "documentId": D2}),
            json!({"type": "answer_contains", "pattern": "x"}),
            json!({"type": "answer_does_not_contain", "pattern": "x"}),
            json!({"type": "llm_judge", "expectedAnswer": "x"}),
        ] {
            let v = one(a, &o);
            assert_eq!(v.status, Status::Error);
            assert!(v.reason.unwrap().contains("full_assistant"));
        }
    }

    #[test]
    fn answer_assertions_pass_fail_and_error() {
        let o = observed(Some("Opening hours are 9 to 5, Monday to Friday."));
        assert_eq!(one(json!({"type": "answer_cites_document", "documentId": D2}), &o).status, Status::Pass);
        assert_eq!(one(json!({"type": "answer_cites_document", "documentId": D1}), &o).status, Status::Fail);
        let c = |p: &str, mode: &str, cs: bool| json!({"type": "answer_contains", "pattern": p, "matchMode": mode, "caseSensitive": cs});
        assert_eq!(one(c("opening HOURS", "substring", false), &o).status, Status::Pass);
        assert_eq!(one(c("opening HOURS", "substring", true), &o).status, Status::Fail);
        assert_eq!(one(c(r"\d to \d", "regex", false), &o).status, Status::Pass);
        assert_eq!(one(c("MONDAY", "regex", false), &o).status, Status::Pass);
        assert_eq!(one(c("MONDAY", "regex", true), &o).status, Status::Fail);
        let invalid = one(c("(unclosed", "regex", false), &o);
        assert_eq!(invalid.status, Status::Error);
        assert!(invalid.reason.unwrap().contains("not a valid regular expression"));
        let n = |p: &str| json!({"type": "answer_does_not_contain", "pattern": p});
        assert_eq!(one(n("closed"), &o).status, Status::Pass);
        assert_eq!(one(n("friday"), &o).status, Status::Fail);
        // an empty pattern cannot be stored, and is an error if met
        let empty = Assertion::Contains { pattern: String::new(), mode: MatchMode::Substring, case_sensitive: false };
        assert_eq!(evaluate(&[empty], &o, &mut NoJudge(String::new()))[0].status, Status::Error);
    }

    #[test]
    fn a_failed_run_makes_every_assertion_an_error() {
        let mut o = observed(Some("x"));
        o.error = Some("the model is unavailable".into());
        let v = one(json!({"type": "retrieval_includes_document", "documentId": D1}), &o);
        assert_eq!(v.status, Status::Error);
        assert!(v.reason.unwrap().contains("model is unavailable"));
    }

    #[test]
    fn aggregation_follows_the_rules() {
        let p = verdict(Status::Pass, "p");
        let f = verdict(Status::Fail, "first failure");
        let f2 = verdict(Status::Fail, "second failure");
        let e = verdict(Status::Error, "broken");
        assert_eq!(aggregate(&[]).0, "recorded");
        assert_eq!(aggregate(&[p.clone(), f.clone(), e.clone()]), ("error", Some("broken".into())));
        assert_eq!(aggregate(&[p.clone(), f.clone(), f2]), ("fail", Some("first failure".into())));
        assert_eq!(aggregate(std::slice::from_ref(&p)), ("pass", Some("p".into())));
        assert_eq!(aggregate(&[p.clone(), p]), ("pass", Some("All 2 assertions passed.".into())));
    }

    #[test]
    fn the_schema_names_index_and_field() {
        let list = json!([
            {"type": "retrieval_includes_document", "documentId": D1},
            {"type": "retrieval_top_k_includes_document", "documentId": D1, "k": 0}
        ]);
        let e = parse_list(&list).unwrap_err();
        assert_eq!(e.details.as_ref().unwrap()["field"], "assertions[1].k");
        assert_eq!(e.details.as_ref().unwrap()["index"], 1);
        let cases = [
            (json!({"type": "nope"}), "assertions[0].type"),
            (json!({"type": "retrieval_includes_document", "documentId": "doc-1"}), "assertions[0].documentId"),
            (json!({"type": "retrieval_top_k_includes_document", "documentId": D1, "k": 101}), "assertions[0].k"),
            (json!({"type": "retrieval_document_order", "documentIds": []}), "assertions[0].documentIds"),
            (json!({"type": "retrieval_document_order", "documentIds": [D1, "x"]}), "assertions[0].documentIds[1]"),
            (json!({"type": "retrieval_chunk_metadata", "documentId": D1, "metadata": {}}), "assertions[0].metadata"),
            (
                json!({"type": "retrieval_chunk_metadata", "documentId": D1, "metadata": {"a": [1]}}),
                "assertions[0].metadata.a",
            ),
            (json!({"type": "answer_contains", "pattern": ""}), "assertions[0].pattern"),
            (json!({"type": "answer_contains", "pattern": "a".repeat(4001)}), "assertions[0].pattern"),
            (json!({"type": "answer_contains", "pattern": "a", "matchMode": "glob"}), "assertions[0].matchMode"),
            (json!({"type": "answer_contains", "pattern": "a", "caseSensitive": "yes"}), "assertions[0].caseSensitive"),
            (json!({"type": "llm_judge", "expectedAnswer": ""}), "assertions[0].expectedAnswer"),
            (
                json!({"type": "llm_judge", "expectedAnswer": "a", "criteria": "c".repeat(2001)}),
                "assertions[0].criteria",
            ),
            (json!({"type": "llm_judge", "expectedAnswer": "a", "k": 3}), "assertions[0].k"),
        ];
        for (a, field) in cases {
            let e = parse(&a, 0).unwrap_err();
            assert_eq!(e.details.as_ref().unwrap()["field"], field, "{a}");
        }
        let many = Value::Array(vec![json!({"type": "llm_judge", "expectedAnswer": "a"}); 21]);
        assert_eq!(parse_list(&many).unwrap_err().details.unwrap()["field"], "assertions");
    }

    proptest! {
        #[test]
        fn parse_never_panics_and_round_trips(pattern in crate::testkit::hostile_text(12), k in -5i64..200, cs in any::<bool>()) {
            for a in [
                json!({"type": "answer_contains", "pattern": pattern, "matchMode": "regex", "caseSensitive": cs}),
                json!({"type": "answer_does_not_contain", "pattern": pattern}),
                json!({"type": "retrieval_top_k_includes_document", "documentId": D1, "k": k}),
                json!({"type": "llm_judge", "expectedAnswer": pattern, "criteria": pattern}),
            ] {
                if let Ok(parsed) = parse(&a, 0) {
                    prop_assert_eq!(parse(&parsed.to_json(), 0).unwrap(), parsed.clone());
                    // evaluating hostile text never panics
                    let o = Observed { answer: Some(pattern.clone()), ..Default::default() };
                    let _ = evaluate(&[parsed], &o, &mut NoJudge(String::new()));
                }
            }
        }
    }
}
