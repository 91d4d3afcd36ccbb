//! Each workspace's knowledge index: the language its text is analyzed in (lexical search) and the
//! embedding space its vectors are in (one model at one sequence limit). Workspaces choose by
//! language: English keeps the faster English model, any other language defaults to the
//! multilingual one when it is installed; an operator may choose the model (`GET`/`PUT
//! /settings/knowledge`).
//!
//! When the space a workspace should be in is not the one its vectors are in (a model change, an
//! upgrade that raised the sequence limit), the `search.reembed` job re-embeds its chunks in the
//! background into `chunks.next_embedding`, with progress; search goes on in the old space until
//! every chunk has its new vector, then one transaction swaps them and the workspace's vector
//! index is replaced whole (`SearchIndex::switch_space`).

use serde_json::json;

use super::store::{self, SpaceRow};
use super::text::Lang;
use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, Result};
use crate::jobs::{JobCtx, JobPayload, NewJob, Outcome};
use crate::models::embed::{self, ModelSpec, Space};

pub const REEMBED_JOB: &str = "search.reembed";
/// Chunks the English model embeds per second on the reference machine (2 cores; about 250 tokens
/// each), what the dashboard's cost estimate of a model switch starts from.
pub const CHUNKS_PER_SECOND: f64 = 60.0;
/// Chunks embedded per batch of a re-embedding.
const BATCH: usize = 128;

/// A workspace's knowledge index as the API shows it.
#[derive(Debug, Clone)]
pub struct KnowledgeIndex {
    pub language: Lang,
    /// The operator's choice; `None`: the default for the language.
    pub chosen_model: Option<&'static ModelSpec>,
    /// The space the workspace's vectors are in now.
    pub space: String,
    /// The space they should be in (the chosen or default model at its limit).
    pub desired: Space,
    /// While re-embedding: the space it moves to and how far it is.
    pub target: Option<String>,
    pub done: i64,
    pub total: i64,
    pub started_at: Option<String>,
    /// Chunks in the workspace (what a model change re-embeds).
    pub chunks: i64,
    /// Search history kept: days and entries.
    pub history_days: i64,
    pub history_max: i64,
}

/// The model a workspace of `lang` uses unless the operator chose: English keeps MiniLM; any other
/// language takes the multilingual model when it is installed.
pub fn default_model(app: &App, lang: Lang) -> &'static ModelSpec {
    if lang != Lang::English && app.models.installed(&embed::E5_SMALL) { &embed::E5_SMALL } else { &embed::MINILM }
}

fn lang_of(row: &SpaceRow) -> Lang {
    Lang::of_locale(&row.language)
}

/// The space a workspace's vectors should be in.
pub fn desired_space(app: &App, row: &SpaceRow) -> Space {
    let model = row.model.as_deref().and_then(embed::spec).unwrap_or_else(|| default_model(app, lang_of(row)));
    app.models.space_of(model)
}

/// The workspace's row, created on first use in the space it should be in (a workspace with no row
/// has no vectors yet).
pub fn row_tx(app: &App, tx: &crate::storage::Tx, ws: &str) -> Result<SpaceRow> {
    if let Some(r) = store::space_row_of(tx, ws)? {
        return Ok(r);
    }
    let now = rfc3339(app.clock.now());
    store::ensure_space_row(tx, ws, &app.models.default_space().id(), &now)
}

/// The live space of a workspace's vectors (the space new chunks are embedded in).
pub fn live_space(app: &App, ws: &str) -> Result<String> {
    if let Some(s) = app.search().ok().and_then(|i| i.cached_space(ws)) {
        return Ok(s);
    }
    let row = match app.db.read(|c| store::space_row_of(c, ws))? {
        Some(r) => r,
        None => app.db.write(|tx| row_tx(app, tx, ws))?,
    };
    if let Ok(index) = app.search() {
        index.set_conf(ws, lang_of(&row), &row.space);
    }
    Ok(row.space)
}

/// The live space of a workspace, read inside a writing transaction (the embedding pipeline checks
/// a vector's space against it before storing it).
pub fn live_space_tx(app: &App, tx: &crate::storage::Tx, ws: &str) -> Result<String> {
    Ok(row_tx(app, tx, ws)?.space)
}

fn view(app: &App, row: &SpaceRow, chunks: i64) -> KnowledgeIndex {
    KnowledgeIndex {
        language: lang_of(row),
        chosen_model: row.model.as_deref().and_then(embed::spec),
        space: row.space.clone(),
        desired: desired_space(app, row),
        target: row.target_space.clone(),
        done: row.reembed_done,
        total: row.reembed_total,
        started_at: row.reembed_started_at.clone(),
        chunks,
        history_days: row.history_days,
        history_max: row.history_max,
    }
}

/// `GET /settings/knowledge`.
pub fn get(app: &App, p: &Principal) -> Result<KnowledgeIndex> {
    p.require(Perm::SettingsRead)?;
    let ws = &p.workspace_id.0;
    let row = match app.db.read(|c| store::space_row_of(c, ws))? {
        Some(r) => r,
        None => app.db.write(|tx| row_tx(app, tx, ws))?,
    };
    let (_, chunks) = app.db.read(|c| crate::documents::embeddings::reembed_counts(c, ws))?;
    Ok(view(app, &row, chunks))
}

/// What `PUT /settings/knowledge` may change.
#[derive(Debug, Clone, Default)]
pub struct KnowledgePatch {
    pub language: Option<String>,
    /// `Some(None)`: back to the default for the language.
    pub model: Option<Option<String>>,
    /// Search history kept: days (1 to 3650) and entries (1 to 1,000,000).
    pub history_days: Option<i64>,
    pub history_max: Option<i64>,
}

/// `PUT /settings/knowledge`: a language change re-analyzes the workspace's text (and moves to its
/// default model unless one was chosen); a model change re-embeds it in the background. Both are
/// queued in the same transaction.
pub fn update(app: &App, p: &Principal, actor: &Actor, patch: KnowledgePatch) -> Result<KnowledgeIndex> {
    p.require(Perm::SettingsManage)?;
    let lang = match &patch.language {
        None => None,
        Some(l) => {
            let lang = Lang::of_locale(l.trim());
            if l.trim().is_empty() || (lang == Lang::Other && l.trim() != "other") {
                return Err(Error::invalid_field(
                    "language",
                    format!(
                        "language is one of {} (ISO 639-1), or other",
                        Lang::ALL
                            .iter()
                            .filter(|l| **l != Lang::Other)
                            .map(|l| l.code())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
            Some(lang)
        }
    };
    let model = match &patch.model {
        None => None,
        Some(None) => Some(None),
        Some(Some(id)) => {
            let spec = embed::spec(id).ok_or_else(|| {
                Error::invalid_field(
                    "embeddingModel",
                    format!(
                        "embeddingModel is one of {}",
                        embed::MODELS.iter().map(|m| m.id).collect::<Vec<_>>().join(", ")
                    ),
                )
            })?;
            if !app.models.installed(spec) {
                return Err(Error::new(
                    crate::error::ErrorCode::Unprocessable,
                    format!(
                        "the model {} is not installed on this server; {}",
                        spec.id,
                        crate::models::locate::FETCH_HINT
                    ),
                )
                .with_details(json!({"field": "embeddingModel", "code": "embedding_model_not_installed"})));
            }
            Some(Some(spec.id.to_string()))
        }
    };
    if patch.history_days.is_some_and(|d| !(1..=3650).contains(&d)) {
        return Err(Error::invalid_field("searchHistory.retentionDays", "retentionDays is 1 to 3650"));
    }
    if patch.history_max.is_some_and(|m| !(1..=1_000_000).contains(&m)) {
        return Err(Error::invalid_field("searchHistory.maxEntries", "maxEntries is 1 to 1000000"));
    }
    let ws = p.workspace_id.0.clone();
    let now = rfc3339(app.clock.now());
    let (row, reanalyze) = app.db.write(|tx| {
        let cur = row_tx(app, tx, &ws)?;
        let language = lang.map(|l| l.code().to_string()).unwrap_or(cur.language.clone());
        let chosen = match &model {
            Some(m) => m.clone(),
            None => cur.model.clone(),
        };
        store::set_language_and_model(tx, &ws, &language, chosen.as_deref(), &now)?;
        store::set_history_retention(
            tx,
            &ws,
            patch.history_days.unwrap_or(cur.history_days),
            patch.history_max.unwrap_or(cur.history_max),
            &now,
        )?;
        let row = store::space_row_of(tx, &ws)?.ok_or_else(|| Error::not_found("workspace"))?;
        reconcile_tx(app, tx, &row, &now)?;
        let reanalyze = language != cur.language;
        if reanalyze {
            crate::jobs::enqueue_tx(
                tx,
                app.clock.now_ms(),
                app.jobs.default_max_attempts(),
                &NewJob::new(REANALYZE_JOB, json!({"workspaceId": ws}))
                    .workspace(&ws)
                    .dedupe(format!("reanalyze:{ws}:{now}")),
            )?;
        }
        audit::record(
            tx,
            &now,
            actor,
            Event::new("settings.knowledge.updated").workspace(&p.workspace_id).meta(
                serde_json::from_value(json!({"language": language, "embeddingModel": chosen})).unwrap_or_default(),
            ),
        )?;
        Ok((store::space_row_of(tx, &ws)?.ok_or_else(|| Error::not_found("workspace"))?, reanalyze))
    })?;
    if let Ok(index) = app.search() {
        index.set_conf(&ws, lang_of(&row), &row.space);
    }
    if reanalyze {
        tracing::info!(workspace = %ws, language = %row.language, "workspace text re-analysis queued");
    }
    let (_, chunks) = app.db.read(|c| crate::documents::embeddings::reembed_counts(c, &ws))?;
    Ok(view(app, &row, chunks))
}

/// Starts, retargets or cancels the workspace's re-embedding so its vectors move to the space they
/// should be in (in the caller's transaction).
fn reconcile_tx(app: &App, tx: &crate::storage::Tx, row: &SpaceRow, now: &str) -> Result<()> {
    let desired = desired_space(app, row).id();
    let ws = &row.workspace_id;
    if desired == row.space {
        if row.target_space.is_some() {
            // back where it is: the re-embedding is not needed any more
            crate::documents::embeddings::clear_next_embeddings(tx, ws)?;
            store::set_target(tx, ws, None, 0, now)?;
        }
        return Ok(());
    }
    if row.target_space.as_deref() == Some(desired.as_str()) {
        return Ok(());
    }
    crate::documents::embeddings::clear_next_embeddings(tx, ws)?;
    let (_, total) = crate::documents::embeddings::reembed_counts(tx, ws)?;
    store::set_target(tx, ws, Some(&desired), total, now)?;
    enqueue_reembed(app, tx, ws, &desired, now)?;
    tracing::info!(workspace = %ws, from = %row.space, to = %desired, chunks = total, "re-embedding queued");
    Ok(())
}

/// Queues the re-embedding job of `ws` toward `target`, started at `started` (the key makes it one
/// job per re-embedding, however often this is called).
fn enqueue_reembed(app: &App, tx: &crate::storage::Tx, ws: &str, target: &str, started: &str) -> Result<()> {
    crate::jobs::enqueue_tx(
        tx,
        app.clock.now_ms(),
        app.jobs.default_max_attempts(),
        &NewJob::new(REEMBED_JOB, json!({"workspaceId": ws}))
            .workspace(ws)
            .priority(-1)
            .dedupe(format!("reembed:{ws}:{target}:{started}")),
    )?;
    Ok(())
}

/// At start: every workspace whose vectors are not in the space they should be in (an upgrade
/// that changed a model's limit, a model installed since) is queued for re-embedding.
pub fn reconcile_all(app: &App) -> Result<usize> {
    let rows = app.db.read(store::space_rows)?;
    let now = rfc3339(app.clock.now());
    let mut queued = 0;
    for row in rows {
        let desired = desired_space(app, &row).id();
        if desired != row.space && row.target_space.as_deref() != Some(desired.as_str()) {
            app.db.write(|tx| reconcile_tx(app, tx, &row, &now))?;
            queued += 1;
        } else if row.target_space.is_some() {
            // a re-embedding a previous run left going: its job is still there (same key)
            let started = row.reembed_started_at.clone().unwrap_or_default();
            let target = row.target_space.clone().unwrap_or_default();
            app.db.write(|tx| enqueue_reembed(app, tx, &row.workspace_id, &target, &started))?;
        }
    }
    Ok(queued)
}

/// The `search.reembed` job: embeds the workspace's chunks in the target space, batch by batch
/// with progress (a heartbeat after each), then switches the workspace over. At shutdown it stops
/// between batches and is released; the next run goes on where it stopped (the vectors are kept).
pub fn reembed(app: &App, ctx: &JobCtx, payload: &JobPayload) -> Outcome {
    let Some(ws) = payload["workspaceId"].as_str() else { return Outcome::Fail("no workspaceId".into()) };
    match reembed_all(app, ctx, ws) {
        Ok(true) => Outcome::Done,
        Ok(false) => Outcome::Release,
        Err(e) => Outcome::retry(e.to_string()),
    }
}

/// Returns false when it stopped for shutdown.
fn reembed_all(app: &App, ctx: &JobCtx, ws: &str) -> Result<bool> {
    loop {
        let Some(row) = app.db.read(|c| store::space_row_of(c, ws))? else { return Ok(true) };
        let Some(target_id) = row.target_space.clone() else { return Ok(true) };
        let Some(target) = Space::parse(&target_id) else {
            return Err(Error::internal_msg(format!("unknown embedding space {target_id}")));
        };
        if ctx.stopping() {
            return Ok(false);
        }
        let batch = app.db.read(|c| crate::documents::embeddings::chunks_to_reembed(c, ws, BATCH))?;
        if batch.is_empty() {
            if app.search()?.switch_space(app, ws, &target_id)? {
                tracing::info!(workspace = %ws, space = %target_id, "re-embedding complete; the workspace switched over");
                return Ok(true);
            }
            // a chunk was embedded in the old space meanwhile: go on
            continue;
        }
        let embedder = app.models.embedder_for(target)?;
        let texts: Vec<String> = batch
            .iter()
            .map(|(_, title, content)| crate::documents::pipeline::embedding_text(title, content))
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let out = embedder.embed_passages(&refs).map_err(Error::internal)?;
        let still = app.db.write(|tx| {
            let now = store::space_row_of(tx, ws)?;
            if now.as_ref().and_then(|r| r.target_space.as_deref()) != Some(target_id.as_str()) {
                return Ok(false); // retargeted or cancelled meanwhile: these vectors are of no use
            }
            for ((key, _, _), v) in batch.iter().zip(&out.vectors) {
                crate::documents::embeddings::set_next_embedding(tx, *key, &store::encode_vector(v))?;
            }
            let (done, total) = crate::documents::embeddings::reembed_counts(tx, ws)?;
            store::set_progress(tx, ws, done, total)?;
            Ok(true)
        })?;
        if !still {
            continue;
        }
        ctx.heartbeat();
    }
}

pub const REANALYZE_JOB: &str = "search.reanalyze";

/// The `search.reanalyze` job: the workspace's text is indexed again in its (new) language.
pub fn reanalyze(app: &App, _ctx: &JobCtx, payload: &JobPayload) -> Outcome {
    let Some(ws) = payload["workspaceId"].as_str() else { return Outcome::Fail("no workspaceId".into()) };
    let r = (|| -> Result<usize> {
        let row = app.db.read(|c| store::space_row_of(c, ws))?.ok_or_else(|| Error::not_found("workspace"))?;
        let index = app.search()?;
        index.set_conf(ws, lang_of(&row), &row.space);
        index.reanalyze(&app.db, ws)
    })();
    match r {
        Ok(n) => {
            tracing::info!(workspace = %ws, chunks = n, "workspace text re-analyzed");
            Outcome::Done
        }
        Err(e) => Outcome::retry(e.to_string()),
    }
}

/// The job kinds of search.
pub fn jobs() -> Vec<(&'static str, crate::jobs::Handler)> {
    vec![(REEMBED_JOB, reembed), (REANALYZE_JOB, reanalyze), (super::history::CLEANUP_JOB, super::history::cleanup)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spaces_round_trip_and_legacy_is_minilm_at_128() {
        let s = Space::parse(embed::LEGACY_SPACE).unwrap();
        assert_eq!((s.model.id, s.max_tokens), ("all-minilm-l6-v2", 128));
        assert_eq!(Space::of(&embed::E5_SMALL, 9999).id(), "multilingual-e5-small@512", "clamped to the model's limit");
        assert!(Space::parse("unknown-model@128").is_none());
    }
}
