//! The wire shapes of search (owned by the HTTP edge): a search's response and a saved search's
//! replay.

use serde_json::{Value, json};

use super::query::Searched;
use super::store::StoredSearch;

/// The `POST /document/search` response.
pub fn search(s: &Searched) -> Value {
    let mut out = json!({
        "searchId": s.search_id,
        "query": s.query,
        "mode": s.mode,
        "metadataFilter": s.metadata_filter,
        "results": s.results,
        "resultCount": s.result_count,
        "tookMs": (s.took_ms * 100.0).round() / 100.0,
        "createdAt": s.created_at,
    });
    if let Some(trace) = &s.debug {
        out["debug"] = json!({
            "lexicalCandidates": trace.lexical_candidates,
            "vectorCandidates": trace.vector_candidates,
            "feedbackDocuments": trace.feedback_documents,
            "expansionTerms": trace.expansion_terms,
            "filteredDocuments": trace.filtered_documents,
            "embeddingSpace": (!trace.space.is_empty()).then_some(&trace.space),
            "indexLag": trace.index_lag,
            "timingsMs": trace.timings_ms.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
        });
    }
    out
}

/// A saved search `id` with exactly the results it returned then.
pub fn replay(id: &str, s: &StoredSearch) -> Value {
    let count = s.results.as_array().map(|a| a.len()).unwrap_or(0);
    json!({
        "searchId": id,
        "query": s.query,
        "mode": s.mode,
        "metadataFilter": s.metadata_filter,
        "results": s.results,
        "resultCount": count,
        "tookMs": (s.took_ms * 100.0).round() / 100.0,
        "createdAt": s.created_at,
    })
}

/// `GET`/`PUT /settings/knowledge`: the workspace's language and embedding model, the models this
/// server has (with the cost of a switch), and a re-embedding's progress.
pub fn knowledge(app: &crate::app::App, k: &super::spaces::KnowledgeIndex) -> Value {
    use crate::models::embed::{MODELS, Space};
    let live = Space::parse(&k.space);
    let reembedding = k.target.as_ref().map(|t| {
        json!({
            "toModel": Space::parse(t).map(|s| s.model.id),
            "toSpace": t,
            "done": k.done,
            "total": k.total,
            "startedAt": k.started_at,
        })
    });
    let models: Vec<Value> = MODELS
        .iter()
        .map(|m| {
            // seconds to embed the workspace's chunks with this model, from the measured rate of the
            // English model on this hardware class (docs/performance.md) times the model's cost
            let seconds = (k.chunks as f64 / super::spaces::CHUNKS_PER_SECOND * m.relative_cost as f64).ceil();
            json!({
                "id": m.id, "name": m.name, "languages": m.languages, "maxTokens": app.models.space_of(m).max_tokens,
                "installed": app.models.installed(m), "relativeCost": m.relative_cost,
                "reembedEstimateSeconds": seconds,
            })
        })
        .collect();
    json!({
        "language": k.language.code(),
        "embeddingModel": k.chosen_model.map(|m| m.id),
        "effectiveModel": k.desired.model.id,
        "index": {
            "model": live.map(|s| s.model.id),
            "space": k.space,
            "maxTokens": live.map(|s| s.max_tokens),
            "chunks": k.chunks,
            "state": if k.target.is_some() { "reembedding" } else { "ready" },
            "reembedding": reembedding,
        },
        "models": models,
        "languages": super::text::Lang::ALL.iter().map(|l| l.code()).collect::<Vec<_>>(),
        "searchHistory": {"retentionDays": k.history_days, "maxEntries": k.history_max},
    })
}
