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
