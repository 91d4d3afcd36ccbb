//! `steward bench tune`: ingests a collection in-process once (or reuses a data dir ingested
//! before, `--data`) and scores retrieval settings on all judged queries and on the odd and even
//! halves, so a choice that only fits one half (or one collection) shows. Used to pick the defaults
//! in `search::Tuning`. Variants come from a JSON file: `[{"name", "tuning": {…}}]` with the keys
//! of [`patch`].

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};

use super::collection::{Collection, Quality, Scorer};
use crate::app::{App, Options};
use crate::auth::accounts::{ClientInfo, RegisterInput};
use crate::config::Config;
use crate::documents::{self, NewDocument};
use crate::search::query::{Retrieve, retrieve_tuned};
use crate::search::{Feedback, FeedbackSource, Fusion, Mode, Tuning};

/// The metadata key that carries a document's collection id.
const ID_KEY: &str = "benchId";

fn principal(app: &App) -> anyhow::Result<crate::auth::Principal> {
    let signed = crate::auth::accounts::login(app, "bench@example.com", "bench-password", &ClientInfo::default())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let creds = crate::auth::Credentials { bearer: None, session: Some(signed.session_token) };
    crate::auth::authenticate(app, &creds, None).map_err(|e| anyhow::anyhow!("{e}"))
}

/// Opens the app on `dir`; when it holds no workspace yet, registers the bench owner, applies
/// `ingestion` and loads the collection. Returns the app and the owner.
pub fn ingest(
    dir: &std::path::Path,
    c: &Collection,
    ingestion: Value,
    config: Option<Config>,
) -> anyhow::Result<(Arc<App>, crate::auth::Principal)> {
    let mut config = config.unwrap_or_else(|| Config::with_data_dir(dir));
    config.data_dir = dir.to_path_buf();
    let fresh = !dir.join("steward.db").exists();
    let app = App::build(config, Options::default()).map_err(|e| anyhow::anyhow!("{e}"))?;
    if !fresh {
        let p = principal(&app)?;
        return Ok((app, p));
    }
    let reg = RegisterInput {
        email: "bench@example.com".into(),
        password: "bench-password".into(),
        name: None,
        invitation_token: None,
        organization_name: None,
    };
    crate::auth::accounts::register(&app, reg, &ClientInfo::default()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let p = principal(&app)?;
    let actor = p.actor(None);
    let patch: crate::settings::ingestion::IngestionPatch = serde_json::from_value(ingestion)?;
    documents::update_ingestion_settings(&app, &p, &actor, patch).map_err(|e| anyhow::anyhow!("{e}"))?;
    // TUNE_MODEL=<id>: the workspace's embedding model (before anything is embedded)
    if let Ok(model) = std::env::var("TUNE_MODEL") {
        let patch = crate::search::spaces::KnowledgePatch { model: Some(Some(model)), ..Default::default() };
        crate::search::spaces::update(&app, &p, &actor, patch).map_err(|e| anyhow::anyhow!("{e}"))?;
        crate::jobs::run_until_idle(&app).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    for d in c.docs.iter().filter(|d| !(d.title.trim().is_empty() && d.text.trim().is_empty())) {
        documents::create(
            &app,
            &p,
            &actor,
            NewDocument {
                title: if d.title.trim().is_empty() { format!("Document {}", d.id) } else { d.title.clone() },
                content: if d.text.trim().is_empty() { d.title.clone() } else { d.text.clone() },
                metadata: Some(json!({ ID_KEY: d.id })),
                external_document_id: None,
                enrichment_override: None,
                source_id: None,
            },
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    loop {
        let a = crate::jobs::run_until_idle(&app).map_err(|e| anyhow::anyhow!("{e}"))?;
        let b = documents::pipeline::run_until_idle(&app).map_err(|e| anyhow::anyhow!("{e}"))?;
        if a == 0 && b == 0 {
            break;
        }
    }
    Ok((app, p))
}

/// Ranked collection ids for `query`.
pub fn ranked(
    app: &App,
    p: &crate::auth::Principal,
    query: &str,
    mode: Mode,
    t: &Tuning,
    k: usize,
) -> anyhow::Result<Vec<String>> {
    let hits = retrieve_tuned(
        app,
        &p.workspace_id,
        &Retrieve {
            query: query.to_string(),
            lexical_query: None,
            filter: None,
            source_ids: None,
            mode,
            limit: k,
            collapse: true,
        },
        t,
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(hits.iter().filter_map(|h| h.metadata[ID_KEY].as_str().map(str::to_string)).collect())
}

/// Quality of `mode` with `t` over the judged queries.
pub fn score(
    app: &App,
    p: &crate::auth::Principal,
    c: &Collection,
    mode: Mode,
    t: &Tuning,
) -> anyhow::Result<(Quality, Vec<f64>)> {
    let mut s = Scorer::default();
    for (i, q, judged) in c.judged_queries() {
        let r = ranked(app, p, &q.text, mode, t, 100)?;
        s.add(i, &r, judged);
    }
    Ok((s.quality(), s.per_query))
}

/// `base` with the keys of `patch` applied: `lexicalK`, `vectorK`, `rrfK`, `minSimilarity`,
/// `lexicalWeight`, `vectorWeight`, `fusion` (`"rrf"` or `{"convex": alpha}`), `feedback` (`null`
/// or `{docs, terms, termWeight, vectorWeight, source: "fused" | "lexical"}`), `questionWords`
/// (bool), `restWeight`.
pub fn patch(base: &Tuning, patch: &Value) -> anyhow::Result<Tuning> {
    let mut t = *base;
    let Some(obj) = patch.as_object() else { return Ok(t) };
    let f = |v: &Value| v.as_f64().map(|x| x as f32).ok_or_else(|| anyhow::anyhow!("not a number: {v}"));
    let u = |v: &Value| v.as_u64().map(|x| x as usize).ok_or_else(|| anyhow::anyhow!("not a count: {v}"));
    for (k, v) in obj {
        match k.as_str() {
            "lexicalK" => t.lexical_k = u(v)?,
            "vectorK" => t.vector_k = u(v)?,
            "rrfK" => t.rrf_k = f(v)?,
            "minSimilarity" => t.min_similarity = f(v)?,
            "lexicalWeight" => t.lexical_weight = f(v)?,
            "vectorWeight" => t.vector_weight = f(v)?,
            "fusion" => {
                t.fusion = match v {
                    Value::String(s) if s == "rrf" => Fusion::Rrf,
                    Value::Object(o) if o.contains_key("convex") => Fusion::Convex { alpha: f(&o["convex"])? },
                    _ => anyhow::bail!("fusion is \"rrf\" or {{\"convex\": alpha}}"),
                }
            }
            "feedback" => {
                t.feedback = match v {
                    Value::Null => None,
                    Value::Object(o) => {
                        let d = t.feedback.unwrap_or(Feedback {
                            docs: 3,
                            terms: 10,
                            term_weight: 0.5,
                            vector_weight: 0.5,
                            lexical_source: FeedbackSource::Fused,
                        });
                        Some(Feedback {
                            docs: o.get("docs").map(u).transpose()?.unwrap_or(d.docs),
                            terms: o.get("terms").map(u).transpose()?.unwrap_or(d.terms),
                            term_weight: o.get("termWeight").map(f).transpose()?.unwrap_or(d.term_weight),
                            vector_weight: o.get("vectorWeight").map(f).transpose()?.unwrap_or(d.vector_weight),
                            lexical_source: match o.get("source").and_then(Value::as_str) {
                                Some("lexical") => FeedbackSource::Lexical,
                                Some("fused") => FeedbackSource::Fused,
                                _ => d.lexical_source,
                            },
                        })
                    }
                    _ => anyhow::bail!("feedback is null or an object"),
                }
            }
            "questionWords" => {
                t.question_words = v.as_bool().ok_or_else(|| anyhow::anyhow!("questionWords is a boolean"))?
            }
            "restWeight" => t.rest_weight = f(v)?,
            other => anyhow::bail!("unknown tuning key {other}"),
        }
    }
    Ok(t)
}

pub struct TuneOptions {
    pub collection: std::path::PathBuf,
    pub ingestion: Value,
    /// A data dir kept between runs (ingested on the first).
    pub data: Option<std::path::PathBuf>,
    /// `[{"name", "tuning": {…}}]`; without it, the defaults alone.
    pub variants: Option<std::path::PathBuf>,
    pub modes: Vec<Mode>,
}

pub fn run(o: &TuneOptions, config: Config) -> anyhow::Result<()> {
    let c = Collection::load(&o.collection)?;
    let tmp = tempfile::tempdir()?;
    let dir = o.data.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir)?;
    let started = Instant::now();
    let (app, p) = ingest(&dir, &c, o.ingestion.clone(), Some(config))?;
    let (text_docs, vectors) = app.search().map(|s| s.counts()).unwrap_or((0, 0));
    eprintln!(
        "{}: {} documents ready in {:.1} s ({text_docs} chunks in the text index, {vectors} vectors)",
        c.name,
        c.docs.len(),
        started.elapsed().as_secs_f64()
    );
    if std::env::var("TUNE_ANSWER").is_ok() {
        answer_sweep(&app, &p, &c)?;
        app.shutdown();
        return Ok(());
    }
    let variants: Vec<(String, Tuning)> = match &o.variants {
        None => vec![("default".into(), Tuning::default())],
        Some(path) => {
            let list: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path)?)?;
            list.iter()
                .map(|v| {
                    let name = v["name"].as_str().unwrap_or("variant").to_string();
                    Ok((name, patch(&Tuning::default(), &v["tuning"])?))
                })
                .collect::<anyhow::Result<_>>()?
        }
    };
    println!(
        "{:<40} {:<7} {:>7} {:>7} {:>7} {:>7} {:>7}",
        "variant", "mode", "nDCG10", "odd", "even", "R@100", "MRR10"
    );
    for (name, t) in variants {
        for &mode in &o.modes {
            let (q, _) = score(&app, &p, &c, mode, &t)?;
            println!(
                "{name:<40} {:<7} {:>7.4} {:>7.4} {:>7.4} {:>7.4} {:>7.4}",
                format!("{mode:?}").to_lowercase(),
                q.ndcg10,
                q.ndcg10_odd,
                q.ndcg10_even,
                q.recall100,
                q.mrr10
            );
        }
    }
    app.shutdown();
    Ok(())
}

/// The built-in answerer's parameters against the turn's retrieval: for each setting, how many
/// judged queries get an answer and how many answers cite a judged-relevant document.
fn answer_sweep(app: &App, p: &crate::auth::Principal, c: &Collection) -> anyhow::Result<()> {
    use crate::models::extractive::{self, Params};
    use crate::models::resolve::Resolved;
    use crate::turn::compose::BUILTIN_PASSAGES;
    use crate::turn::retrieval::{self, Helpers, Settings};
    let settings = Settings::system();
    let helpers = Helpers { rewrite: Resolved::Builtin, rerank: Resolved::Builtin };
    let cancel = crate::models::chat::Cancel::new();
    let mut per_query = Vec::new();
    for q in &c.queries {
        let Some(judged) = c.qrels.get(&q.id) else { continue };
        let r = retrieval::run(app, &p.workspace_id, &settings, &helpers, &q.text, &[], None, &cancel)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let ids: std::collections::HashMap<String, String> = r
            .hits
            .iter()
            .filter_map(|h| h.metadata[ID_KEY].as_str().map(|x| (h.chunk_id.clone(), x.to_string())))
            .collect();
        let passages = crate::turn::compose::passages(&r.hits, r.hits.len());
        per_query.push((q.text.clone(), judged.clone(), ids, passages));
    }
    let n = per_query.len();
    println!("{n} judged queries");
    for k in 1..=8 {
        let any = per_query
            .iter()
            .filter(|(_, judged, ids, ps)| {
                ps.iter().take(k).any(|p| ids.get(&p.chunk_id).is_some_and(|id| judged.get(id).is_some_and(|r| *r > 0)))
            })
            .count();
        println!("a relevant passage in the top {k}: {any}");
    }
    for k in [1usize, 3, 5] {
        let mut any = 0;
        for q in &c.queries {
            let Some(judged) = c.qrels.get(&q.id) else { continue };
            let r = ranked(app, p, &q.text, Mode::Hybrid, &Tuning::default(), k)?;
            any += r.iter().any(|id| judged.get(id).is_some_and(|x| *x > 0)) as usize;
        }
        println!("search defaults, collapsed: a relevant document in the top {k}: {any}");
    }
    let base = Params::default();
    let variants: Vec<(String, usize, Params)> = vec![
        ("defaults".into(), BUILTIN_PASSAGES, base),
        ("3 passages".into(), 3, base),
        ("5 passages".into(), 5, base),
        ("coverage 0.3/0.4".into(), BUILTIN_PASSAGES, Params { sentence_coverage: 0.3, answer_coverage: 0.4, ..base }),
        ("coverage 0.5/0.6".into(), BUILTIN_PASSAGES, Params { sentence_coverage: 0.5, answer_coverage: 0.6, ..base }),
        ("one sentence per passage".into(), BUILTIN_PASSAGES, Params { per_passage: 1, ..base }),
        ("3 sentences".into(), BUILTIN_PASSAGES, Params { max_sentences: 3, ..base }),
        ("min relative 0.5".into(), BUILTIN_PASSAGES, Params { min_relative: 0.5, ..base }),
        ("always new terms".into(), BUILTIN_PASSAGES, Params { require_new_terms: true, ..base }),
    ];
    println!("{:<60} {:>9} {:>9} {:>9}", "answerer variant", "answered", "relevant", "rel/ans");
    for (name, keep, params) in variants {
        let (mut answered, mut relevant) = (0, 0);
        for (text, judged, ids, passages) in &per_query {
            let a = extractive::compose_with(text, &passages[..keep.min(passages.len())], &params);
            if !a.covered {
                continue;
            }
            answered += 1;
            let relevant_citation = a
                .citations
                .iter()
                .any(|ct| ids.get(&ct.chunk_id).is_some_and(|id| judged.get(id).is_some_and(|r| *r > 0)));
            relevant += relevant_citation as usize;
        }
        println!("{name:<60} {answered:>9} {relevant:>9} {:>9.3}", relevant as f64 / answered.max(1) as f64);
    }
    Ok(())
}
