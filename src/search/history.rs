//! Search history: what a search returned, stored compactly (each hit's chunk and document ids,
//! chunk index, content hash and score; no text), and read back on replay with the text as it is
//! now, a hit whose chunk has changed or gone since carrying a note. Kept per workspace for at most
//! a number of days and entries (`search_workspaces.history_days`, `history_max`), enforced by the
//! daily `search.history_cleanup` job.

use serde_json::{Value, json};

use super::store::{self, StoredSearch};
use crate::app::App;
use crate::error::Result;

/// The stored format's version (older rows hold the hits as returned).
const FORMAT: u64 = 2;

pub const CLEANUP_JOB: &str = "search.history_cleanup";
pub const DEFAULT_DAYS: i64 = 90;
pub const DEFAULT_MAX: i64 = 10_000;

/// The compact form of a search's hits (`hits` as the search returned them).
pub fn compact(app: &App, ws: &str, hits: &[super::query::Hit]) -> Result<Value> {
    let ids: Vec<&str> = hits.iter().map(|h| h.chunk_id.as_str()).collect();
    let known = app.db.read(|c| store::chunk_refs(c, ws, &ids))?;
    let list: Vec<Value> = hits
        .iter()
        .map(|h| {
            let (index, hash) = known.get(&h.chunk_id).cloned().unwrap_or((0, String::new()));
            json!({"c": h.chunk_id, "d": h.document_id, "i": index, "h": hash, "s": h.score})
        })
        .collect();
    Ok(json!({"v": FORMAT, "hits": list}))
}

/// The document ids of a stored result set, best first (both formats).
pub fn document_ids(results: &Value) -> Vec<String> {
    let list = match results.get("v").and_then(Value::as_u64) {
        Some(_) => results.get("hits").and_then(Value::as_array),
        None => results.as_array(),
    };
    list.into_iter()
        .flatten()
        .filter_map(|h| h.get("d").or_else(|| h.get("documentId")).and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// A stored search's hits with their text as it is now: a hit whose chunk was replaced (its
/// document edited since) is read from the document's chunk at the same position and carries
/// `note: "changed"`; a hit whose document is gone keeps its ids and score, with `note: "deleted"`
/// and no text. A search stored in the older, full format is returned as it was.
pub fn replay_hits(app: &App, ws: &str, s: &StoredSearch) -> Result<Value> {
    if s.results.get("v").and_then(Value::as_u64) != Some(FORMAT) {
        return Ok(s.results.clone());
    }
    let list = s.results.get("hits").and_then(Value::as_array).cloned().unwrap_or_default();
    let terms: Vec<String> = app
        .search()
        .map(|i| i.analyzed_terms(ws, &s.query, false).into_iter().map(|(t, _)| t).collect())
        .unwrap_or_default();
    let out = app.db.read(|c| {
        let mut out = Vec::with_capacity(list.len());
        for h in &list {
            let (chunk, doc) = (h["c"].as_str().unwrap_or_default(), h["d"].as_str().unwrap_or_default());
            let (index, hash) = (h["i"].as_i64().unwrap_or(0), h["h"].as_str().unwrap_or_default());
            let score = h["s"].clone();
            let current = match store::hydrate_chunk_id(c, ws, chunk)? {
                Some(x) => Some((x, None)),
                None => store::chunk_at(c, ws, doc, index)?.map(|x| {
                    let note = if x.content_hash == hash { None } else { Some("changed") };
                    (x, note)
                }),
            };
            out.push(match current {
                Some((x, note)) => {
                    let mut v = json!({
                        "documentId": x.hydrated.document_id, "chunkId": x.hydrated.chunk_id, "title": x.hydrated.title,
                        "snippet": super::snippet(&x.hydrated.content, &terms), "score": score,
                        "metadata": serde_json::from_str::<Value>(&x.hydrated.metadata).unwrap_or(json!({})),
                        "sourceId": x.hydrated.source_id, "headingPath": x.hydrated.heading_path,
                        "page": x.hydrated.page, "sheet": x.hydrated.sheet,
                    });
                    if let Some(n) = note {
                        v["note"] = json!(n);
                    }
                    v
                }
                None => json!({
                    "documentId": doc, "chunkId": chunk, "title": null, "snippet": "", "score": score,
                    "metadata": {}, "sourceId": null, "headingPath": null, "page": null, "sheet": null,
                    "note": "deleted",
                }),
            });
        }
        Ok(out)
    })?;
    Ok(Value::Array(out))
}

/// The `search.history_cleanup` job: every workspace's history past its retention is deleted;
/// then tomorrow's run is queued.
pub fn cleanup(app: &App, _ctx: &crate::jobs::JobCtx, _payload: &crate::jobs::JobPayload) -> crate::jobs::Outcome {
    match cleanup_now(app) {
        Ok(n) => {
            if n > 0 {
                tracing::info!(searches = n, "search history past its retention deleted");
            }
            if let Err(e) = schedule_next(app) {
                tracing::warn!(error = %e, "could not queue the next search history cleanup");
            }
            crate::jobs::Outcome::Done
        }
        Err(e) => crate::jobs::Outcome::retry(e.to_string()),
    }
}

/// Deletes what is past each workspace's retention; returns how many searches.
pub fn cleanup_now(app: &App) -> Result<usize> {
    let rows = app.db.read(store::space_rows)?;
    let mut deleted = 0;
    for r in rows {
        let cutoff = crate::clock::rfc3339(app.clock.now() - chrono::Duration::days(r.history_days.clamp(1, 3650)));
        deleted += app.db.write(|tx| store::delete_old_searches(tx, &r.workspace_id, &cutoff, r.history_max.max(1)))?;
    }
    Ok(deleted)
}

/// Queues the cleanup for the start of the next UTC day (one job per day: its key names the day).
pub fn schedule_next(app: &App) -> Result<()> {
    let now = app.clock.now();
    let tomorrow = (now + chrono::Duration::days(1)).date_naive();
    let at = tomorrow.and_hms_opt(0, 5, 0).map(|t| t.and_utc().timestamp_millis()).unwrap_or(app.clock.now_ms());
    crate::jobs::schedule_once(app, CLEANUP_JOB, &format!("{CLEANUP_JOB}:{tomorrow}"), at)
}

/// At start: today's cleanup is queued (it runs at once when the server was down at its time).
pub fn schedule_today(app: &App) -> Result<()> {
    let today = app.clock.now().date_naive();
    crate::jobs::schedule_once(app, CLEANUP_JOB, &format!("{CLEANUP_JOB}:{today}"), app.clock.now_ms())
}
