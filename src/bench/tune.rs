//! `steward bench tune`: ingests Cranfield in-process once and scores retrieval settings
//! (fusion weights, candidate depth, field boosts) on all queries and on two halves, so a choice
//! that only fits one half shows. Used to pick the defaults in `search::Tuning`.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

use super::cranfield::{Collection, ndcg_at, recall_at};
use crate::app::{App, Options};
use crate::auth::accounts::{ClientInfo, RegisterInput};
use crate::config::Config;
use crate::documents::{self, NewDocument};
use crate::search::query::{Retrieve, retrieve_tuned};
use crate::search::{Mode, Tuning};

pub struct Scored {
    pub ndcg10: f64,
    pub recall100: f64,
}

/// Loads Cranfield into a fresh app in `dir` with `ingestion` settings; returns the app and the
/// principal's workspace.
pub fn ingest(
    dir: &std::path::Path,
    c: &Collection,
    ingestion: serde_json::Value,
    config: Option<Config>,
) -> anyhow::Result<(Arc<App>, crate::auth::Principal)> {
    let mut config = config.unwrap_or_else(|| Config::with_data_dir(dir));
    config.data_dir = dir.to_path_buf();
    let app = App::build(config, Options::default()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let reg = RegisterInput {
        email: "bench@example.com".into(),
        password: "bench-password".into(),
        name: None,
        invitation_token: None,
        organization_name: None,
    };
    let signed =
        crate::auth::accounts::register(&app, reg, &ClientInfo::default()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let creds = crate::auth::Credentials { bearer: None, session: Some(signed.session_token) };
    let p = crate::auth::authenticate(&app, &creds, None).map_err(|e| anyhow::anyhow!("{e}"))?;
    let actor = p.actor(None);
    let patch: crate::settings::ingestion::IngestionPatch = serde_json::from_value(ingestion)?;
    documents::update_ingestion_settings(&app, &p, &actor, patch).map_err(|e| anyhow::anyhow!("{e}"))?;
    for d in c.docs.iter().filter(|d| !d.body.trim().is_empty()) {
        documents::create(
            &app,
            &p,
            &actor,
            NewDocument {
                title: if d.title.trim().is_empty() { format!("Cranfield {}", d.id) } else { d.title.clone() },
                content: d.body.clone(),
                metadata: Some(json!({"cranfieldId": d.id})),
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

/// Ranked Cranfield doc ids for `query`.
pub fn ranked(
    app: &App,
    p: &crate::auth::Principal,
    query: &str,
    mode: Mode,
    t: &Tuning,
    k: usize,
) -> anyhow::Result<Vec<u32>> {
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
    Ok(hits.iter().filter_map(|h| h.metadata["cranfieldId"].as_u64().map(|x| x as u32)).collect())
}

/// Mean nDCG@10 and recall@100 over the queries selected by `keep` (queries with judgments).
pub fn score(
    app: &App,
    p: &crate::auth::Principal,
    c: &Collection,
    mode: Mode,
    t: &Tuning,
    keep: impl Fn(usize) -> bool,
) -> anyhow::Result<Scored> {
    let (mut n, mut r, mut count) = (0.0, 0.0, 0usize);
    for (i, q) in c.queries.iter().enumerate() {
        let Some(judged) = c.qrels.get(&q.id) else { continue };
        if !keep(i) {
            continue;
        }
        let ranked = ranked(app, p, &q.text, mode, t, 100)?;
        n += ndcg_at(&ranked, judged, 10);
        r += recall_at(&ranked, judged, 100);
        count += 1;
    }
    Ok(Scored { ndcg10: n / count.max(1) as f64, recall100: r / count.max(1) as f64 })
}

pub fn run(c: &Collection, ingestion: serde_json::Value, config: Config) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let started = std::time::Instant::now();
    let (app, p) = ingest(dir.path(), c, ingestion, Some(config))?;
    println!("ingested {} docs in {:.1} s", c.docs.len(), started.elapsed().as_secs_f64());
    use crate::search::{Feedback, FeedbackSource, Fusion};
    let base = Tuning::default();
    let mut variants: Vec<(String, Tuning)> = vec![
        ("default".into(), base),
        ("no feedback".into(), Tuning { feedback: None, ..base }),
        ("rrf k60, no feedback".into(), Tuning { feedback: None, fusion: Fusion::Rrf, ..base }),
    ];
    for (docs, terms, tw, vw, alpha) in [(3, 10, 0.5, 0.5, 0.5), (3, 10, 0.7, 0.5, 0.5), (5, 10, 0.5, 0.5, 0.5)] {
        for src in [FeedbackSource::Fused, FeedbackSource::Lexical] {
            let fb = Some(Feedback { docs, terms, term_weight: tw, vector_weight: vw, lexical_source: src });
            variants.push((
                format!("fb d{docs} t{terms} w{tw} v{vw} a{alpha} {src:?}"),
                Tuning { feedback: fb, fusion: Fusion::Convex { alpha }, ..base },
            ));
        }
    }
    if std::env::var("TUNE_ANSWER").is_ok() {
        answer_sweep(&app, &p, c)?;
        app.shutdown();
        return Ok(());
    }
    if std::env::var("TUNE_LATENCY").is_ok() {
        // Latency per mode, interleaved over several rounds; medians of per-query times.
        let embedder = app.models.embedder().map_err(|e| anyhow::anyhow!("{e}"))?;
        println!("text segments: {}", app.search().map(|s| s.text_segments()).unwrap_or(0));
        let mut times: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
        for _round in 0..3 {
            for q in &c.queries {
                let t0 = Instant::now();
                embedder.embed_query(&q.text)?;
                times.entry("query embedding".into()).or_default().push(t0.elapsed().as_secs_f64() * 1000.0);
                for (name, t) in [("default", base), ("no feedback", Tuning { feedback: None, ..base })] {
                    for mode in [Mode::Bm25, Mode::Vector, Mode::Hybrid] {
                        let t0 = Instant::now();
                        ranked(&app, &p, &q.text, mode, &t, 10)?;
                        times.entry(format!("{name} {mode:?}")).or_default().push(t0.elapsed().as_secs_f64() * 1000.0);
                    }
                }
            }
        }
        for (k, v) in &times {
            println!("{k:<24} p50 {:.3} ms  p95 {:.3} ms", crate::bench::median(v), crate::bench::percentile(v, 95.0));
        }
        return Ok(());
    }
    println!(
        "{:<28} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "variant", "bm25", "vector", "hybrid", "hyb-odd", "hyb-even", "hyb-R100"
    );
    for (name, t) in variants {
        let b = score(&app, &p, c, Mode::Bm25, &t, |_| true)?;
        let v = score(&app, &p, c, Mode::Vector, &t, |_| true)?;
        let h = score(&app, &p, c, Mode::Hybrid, &t, |_| true)?;
        let odd = score(&app, &p, c, Mode::Hybrid, &t, |i| i % 2 == 1)?;
        let even = score(&app, &p, c, Mode::Hybrid, &t, |i| i % 2 == 0)?;
        println!(
            "{name:<28} {:>8.4} {:>8.4} {:>8.4} {:>8.4} {:>8.4} {:>8.4}",
            b.ndcg10, v.ndcg10, h.ndcg10, odd.ndcg10, even.ndcg10, h.recall100
        );
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
        let ids: std::collections::HashMap<String, u32> = r
            .hits
            .iter()
            .filter_map(|h| h.metadata["cranfieldId"].as_u64().map(|x| (h.chunk_id.clone(), x as u32)))
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
