//! Document enrichment: after a document is searchable, one model call classifies it against the
//! workspace's document type catalog and extracts the declared fields into its metadata (and dated
//! facts onto the chunks they come from). It runs as its own low-priority job; whatever happens to
//! it, the document stays `ready` and searchable. The document's `enrichment` object reports what
//! happened — never source text, prompts or completions.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde_json::{Map, Value, json};

use crate::app::App;
use crate::clock::rfc3339;
use crate::error::Result;
use crate::jobs::{JobCtx, NewJob, Outcome};
use crate::models::chat::{self, Cancel, ChatRequest, Message, OutputSchema};
use crate::models::resolve::{self, Resolved, Slot};
use crate::settings::document_types;
use crate::storage::Tx;

use super::store;

pub const JOB: &str = "document.enrich";
/// Characters of the document the model reads.
pub const MAX_INPUT_CHARS: usize = 48_000;
/// Below this confidence the document is `generic`.
pub const MIN_CONFIDENCE: f64 = 0.5;
const MAX_ATTEMPTS: u32 = 3;

/// Records whether revision `rev` is to be enriched (called when its chunks are stored).
pub fn mark_pending(tx: &Tx, id: &str, rev: i64, enrich: bool) -> Result<()> {
    let prior = store::enrichment(tx, id)?;
    let prior: Value = prior.and_then(|s| serde_json::from_str(&s).ok()).unwrap_or(Value::Null);
    let next = if enrich {
        // keep what the last run reported (and which metadata keys it owns) until this one finishes
        let mut v = if prior.is_object() { prior } else { json!({}) };
        v["pendingRevision"] = json!(rev);
        v
    } else if prior.is_object() {
        let mut v = prior;
        v.as_object_mut().map(|m| m.remove("pendingRevision"));
        v
    } else {
        return Ok(());
    };
    store::set_enrichment(tx, id, &next.to_string())
}

/// Queues the enrichment of a revision that just went live, if it asked for one.
pub fn enqueue_if_pending(tx: &Tx, app: &App, id: &str, rev: i64) -> Result<()> {
    let raw = store::enrichment(tx, id)?;
    let pending = raw.and_then(|s| serde_json::from_str::<Value>(&s).ok()).and_then(|v| v["pendingRevision"].as_i64());
    if pending != Some(rev) {
        return Ok(());
    }
    let job = NewJob::new(JOB, json!({"documentId": id, "revision": rev}))
        .dedupe(format!("enrich:{id}:{rev}"))
        .priority(-10)
        .max_attempts(MAX_ATTEMPTS);
    crate::jobs::enqueue_tx(tx, app.clock.now_ms(), app.config.job_max_attempts, &job)?;
    Ok(())
}

pub fn run(app: &App, ctx: &JobCtx, payload: &crate::jobs::JobPayload) -> Outcome {
    let (Some(id), Some(rev)) = (payload["documentId"].as_str(), payload["revision"].as_i64()) else {
        return Outcome::Fail(format!("malformed payload: {payload}"));
    };
    match enrich(app, id, rev, ctx.attempt >= MAX_ATTEMPTS) {
        Ok(Step::Done) => Outcome::Done,
        Ok(Step::Retry(e)) => Outcome::retry(e),
        Err(e) => Outcome::retry(e.to_string()),
    }
}

enum Step {
    Done,
    Retry(String),
}

/// What enrichment reads of a document.
pub(super) struct EnrichDoc {
    pub(super) workspace_id: crate::ids::WorkspaceId,
    pub(super) title: String,
    pub(super) content: String,
    pub(super) metadata: Value,
    pub(super) enrichment: Value,
    pub(super) created_at: String,
}

/// Writes the enrichment report (and, when applied, metadata and chunk facts) if the revision is
/// still the live one.
fn finish(
    app: &App,
    id: &str,
    rev: i64,
    report: Value,
    metadata: Option<Value>,
    chunk_facts: &[(i64, Value)],
) -> Result<()> {
    app.db.write(|tx| {
        if store::live_revision(tx, id)? != Some(rev) {
            return Ok(()); // a newer revision took over; its own run will report
        }
        match &metadata {
            Some(m) => store::set_enrichment_and_metadata(tx, id, &report.to_string(), &m.to_string())?,
            None => store::set_enrichment(tx, id, &report.to_string())?,
        }
        for (rowid, facts) in chunk_facts {
            store::add_chunk_facts(tx, *rowid, facts)?;
        }
        Ok(())
    })
}

/// Dated facts go onto the chunks their source range overlaps: `(chunk rowid, {dateFrom, dateTo})`.
fn facts_by_chunk(facts: &[Value], chunks: Vec<(i64, i64, i64)>) -> Vec<(i64, Value)> {
    let mut chunk_facts: Vec<(i64, Value)> = Vec::new();
    for (rowid, start, end) in chunks {
        let hit = facts.iter().find(|f| {
            f.get("sourceRange")
                .is_some_and(|r| r["start"].as_i64().unwrap_or(-1) < end && r["end"].as_i64().unwrap_or(-1) > start)
        });
        if let Some(f) = hit {
            let mut m = json!({});
            for k in ["dateFrom", "dateTo"] {
                if let Some(d) = f.get(k) {
                    m[k] = d.clone();
                }
            }
            if m.as_object().is_some_and(|m| !m.is_empty()) {
                chunk_facts.push((rowid, m));
            }
        }
    }
    chunk_facts
}

fn report_base(status: &str, doc: &EnrichDoc, sel: Option<&resolve::Selection>, now: &str) -> Value {
    json!({
        "status": status,
        "shape": null,
        "provider": sel.map(|s| s.provider.clone()),
        "model": sel.map(|s| s.model.clone()),
        "enrichedAt": now,
        "anchorDate": doc.created_at.get(..10),
        "anchorSource": "document_created_at",
        "factCount": 0,
        "fieldCount": 0,
        "appliedChunkCount": 0,
        "failureReason": null,
        "generatedKeys": doc.enrichment.get("generatedKeys").cloned().unwrap_or(json!([])),
    })
}

fn enrich(app: &App, id: &str, rev: i64, last_attempt: bool) -> Result<Step> {
    let Some(doc) = app.db.read(|c| store::enrich_doc(c, id, rev))? else { return Ok(Step::Done) };
    let now = rfc3339(app.clock.now());
    let (sel, model) = match resolve::resolve(app, &doc.workspace_id, Slot::Chat, None) {
        Ok((sel, Resolved::Model(m))) => (sel, m),
        Ok((sel, Resolved::Builtin)) => {
            let mut r = report_base("skipped", &doc, Some(&sel), &now);
            r["failureReason"] = json!("no chat model is configured; enrichment needs one (Settings → Models)");
            finish(app, id, rev, r, None, &[])?;
            return Ok(Step::Done);
        }
        Err(e) => {
            let mut r = report_base("failed", &doc, None, &now);
            r["failureReason"] = json!(e.message);
            finish(app, id, rev, r, None, &[])?;
            return Ok(Step::Done);
        }
    };
    let catalog = app.db.read(|c| document_types::load(c, &doc.workspace_id))?;
    let types = document_types::enabled_types(&catalog);
    let schema = output_schema(&types);
    let text: String = doc.content.chars().take(MAX_INPUT_CHARS).collect();
    let system = format!(
        "You classify a document into one of these types and extract what the type declares.\n{}\n\
         Answer with: shape (the type key), confidence (0 to 1), fields (for operator types: the declared \
         fields you can find, by key, typed as declared; dates as YYYY-MM-DD), facts (for event and article: \
         dated facts with kind event_date or article_date, label, dateFrom/dateTo as YYYY-MM-DD or \
         unresolvedText when the date is vague, and sourceRange {{start, end}} as character offsets in the \
         document). Today is {}; resolve relative dates against {}.",
        document_types::render(&catalog),
        &now[..10],
        doc.created_at.get(..10).unwrap_or(&now[..10]),
    );
    let req =
        ChatRequest::new(vec![Message::system(system), Message::user(format!("Title: {}\n\n{}", doc.title, text))])
            .max_tokens(800);
    let out = chat::chat_json(
        model.as_ref(),
        req,
        OutputSchema { name: "document_enrichment".into(), schema },
        &Cancel::new(),
    );
    let (v, _usage) = match out {
        Ok(x) => x,
        Err(e) if e.retryable() && !last_attempt => return Ok(Step::Retry(e.message)),
        Err(e) => {
            let mut r = report_base("failed", &doc, Some(&sel), &now);
            r["failureReason"] = json!(e.message);
            finish(app, id, rev, r, None, &[])?;
            return Ok(Step::Done);
        }
    };
    let applied = apply(&doc, &types, &v);
    let chunks = app.db.read(|c| store::chunk_ranges(c, id, rev))?;
    let chunk_facts = facts_by_chunk(&applied.facts, chunks);
    let mut r = report_base("applied", &doc, Some(&sel), &now);
    r["shape"] = json!(applied.shape);
    r["factCount"] = json!(applied.facts.len());
    r["fieldCount"] = json!(applied.fields.len());
    r["appliedChunkCount"] = json!(chunk_facts.len());
    r["generatedKeys"] = json!(applied.generated_keys);
    finish(app, id, rev, r, Some(applied.metadata), &chunk_facts)?;
    Ok(Step::Done)
}

fn output_schema(types: &[(String, &'static str, Vec<document_types::FieldInput>)]) -> Value {
    let keys: Vec<&str> = types.iter().map(|t| t.0.as_str()).collect();
    json!({
        "type": "object",
        "required": ["shape", "confidence"],
        "properties": {
            "shape": {"type": "string", "enum": keys},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "fields": {"type": "object"},
            "facts": {"type": "array", "items": {
                "type": "object",
                "required": ["kind"],
                "properties": {
                    "kind": {"type": "string", "enum": ["event_date", "article_date"]},
                    "label": {"type": "string"},
                    "dateFrom": {"type": ["string", "null"]},
                    "dateTo": {"type": ["string", "null"]},
                    "unresolvedText": {"type": ["string", "null"]},
                    "sourceRange": {"type": "object"}
                }
            }}
        }
    })
}

struct Applied {
    shape: String,
    facts: Vec<Value>,
    fields: BTreeMap<String, Value>,
    metadata: Value,
    generated_keys: Vec<String>,
}

fn real_date(v: Option<&Value>) -> Option<NaiveDate> {
    v.and_then(Value::as_str).and_then(|s| NaiveDate::parse_from_str(s.get(..10)?, "%Y-%m-%d").ok())
}

/// Turns the model's answer into metadata: checks the shape, keeps only declared fields of the
/// declared type and facts with real dates, and never overwrites a key the operator owns.
fn apply(doc: &EnrichDoc, types: &[(String, &'static str, Vec<document_types::FieldInput>)], v: &Value) -> Applied {
    let confidence = v["confidence"].as_f64().unwrap_or(0.0);
    let mut shape = v["shape"].as_str().unwrap_or("generic").to_string();
    if confidence < MIN_CONFIDENCE || !types.iter().any(|t| t.0 == shape) {
        shape = "generic".into();
    }
    let ty = types.iter().find(|t| t.0 == shape);
    let mut fields: BTreeMap<String, Value> = BTreeMap::new();
    let mut facts = Vec::new();
    if let Some((_, payload, declared)) = ty {
        if *payload == "fields" {
            declared_fields(declared, v, &mut fields);
        }
        if *payload == "facts" {
            facts = v["facts"].as_array().into_iter().flatten().filter_map(date_fact).collect();
            if let Some(first) = facts.iter().find(|f| f.get("dateFrom").is_some()) {
                fields.insert("dateFrom".into(), first["dateFrom"].clone());
                fields.insert("dateTo".into(), first["dateTo"].clone());
            }
        }
    }
    let (metadata, generated) = merge_metadata(doc, &fields);
    Applied { shape, facts, fields, metadata, generated_keys: generated }
}

/// The model's `fields` that are declared, as the declared type.
fn declared_fields(declared: &[document_types::FieldInput], v: &Value, fields: &mut BTreeMap<String, Value>) {
    for f in declared {
        let Some(raw) = v["fields"].get(&f.key) else { continue };
        let val = match f.value_type.as_str() {
            "number" => raw.as_f64().or_else(|| raw.as_str().and_then(|s| s.trim().parse().ok())).map(|n| json!(n)),
            "boolean" => raw.as_bool().map(Value::Bool),
            "date" => real_date(Some(raw)).map(|d| json!(d.format("%Y-%m-%d").to_string())),
            _ => raw
                .as_str()
                .map(|s| s.trim())
                .filter(|s| !s.is_empty())
                .map(|s| json!(s.chars().take(500).collect::<String>())),
        };
        if let Some(val) = val {
            fields.insert(f.key.clone(), val);
        }
    }
}

/// One of the model's `facts`, kept when it has a real date (or unresolved text) and its range
/// is in order.
fn date_fact(f: &Value) -> Option<Value> {
    let from = real_date(f.get("dateFrom"));
    let to = real_date(f.get("dateTo"));
    let unresolved = f["unresolvedText"].as_str().filter(|s| !s.trim().is_empty());
    if from.is_none() && unresolved.is_none() {
        return None;
    }
    if let (Some(a), Some(b)) = (from, to)
        && a > b
    {
        return None;
    }
    let mut fact = Map::new();
    fact.insert("kind".into(), f["kind"].clone());
    fact.insert("label".into(), json!(f["label"].as_str().unwrap_or("").chars().take(200).collect::<String>()));
    if let Some(a) = from {
        fact.insert("dateFrom".into(), json!(a.format("%Y-%m-%d").to_string()));
    }
    if let Some(b) = to.or(from) {
        fact.insert("dateTo".into(), json!(b.format("%Y-%m-%d").to_string()));
    }
    if let Some(u) = unresolved {
        fact.insert("unresolvedText".into(), json!(u.chars().take(200).collect::<String>()));
    }
    if let Some(r) = f.get("sourceRange").filter(|r| r["start"].is_u64() && r["end"].is_u64()) {
        fact.insert("sourceRange".into(), json!({"start": r["start"], "end": r["end"]}));
    }
    Some(Value::Object(fact))
}

/// The document's metadata with the enrichment's `fields` merged in, and the keys it generated.
fn merge_metadata(doc: &EnrichDoc, fields: &BTreeMap<String, Value>) -> (Value, Vec<String>) {
    // keys this enrichment generated before may be replaced; keys the operator set may not
    let previous: Vec<String> = doc.enrichment["generatedKeys"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|k| k.as_str().map(str::to_string))
        .collect();
    let mut metadata = if doc.metadata.is_object() { doc.metadata.clone() } else { json!({}) };
    #[allow(clippy::expect_used, reason = "metadata is always an object here")]
    let m = metadata.as_object_mut().expect("object");
    for k in &previous {
        if !fields.contains_key(k) {
            m.remove(k);
        }
    }
    let mut generated = Vec::new();
    for (k, val) in fields {
        if m.contains_key(k) && !previous.contains(k) {
            continue; // the operator's
        }
        m.insert(k.clone(), val.clone());
        generated.push(k.clone());
    }
    (metadata, generated)
}

/// After an operator edits metadata, keys whose value they changed become theirs.
pub fn transfer_ownership(
    enrichment: Option<&str>,
    old: &super::DocumentMeta,
    new: &super::DocumentMeta,
) -> Option<String> {
    let mut e: Value = serde_json::from_str(enrichment?).ok()?;
    let keys = e["generatedKeys"].as_array()?.clone();
    let kept: Vec<Value> = keys.into_iter().filter(|k| k.as_str().is_some_and(|k| old.get(k) == new.get(k))).collect();
    e["generatedKeys"] = Value::Array(kept);
    Some(e.to_string())
}
