//! The embedding pipeline: one thread that embeds pending chunks of all documents together (sorted
//! by length, in parallel sessions; see `models::embed`), then makes finished revisions live:
//! old chunks out, new chunks logged for the indexes, indexes synced, documents `ready`.
//!
//! All its state is in SQLite (chunks without an embedding; documents in `processing`), so a crash
//! at any point resumes where it stopped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::store;
use crate::app::App;
use crate::clock::rfc3339;
use crate::error::Result;
use crate::models::embed;
use crate::search::encode_vector;
use crate::usage;

/// Chunks embedded per step (they are sorted by length inside).
const STEP_CHUNKS: usize = 256;

pub struct Pipeline {
    generation: Mutex<u64>,
    cv: Condvar,
    stop: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Default for Pipeline {
    fn default() -> Self {
        Self::new()
    }
}

impl Pipeline {
    pub fn new() -> Pipeline {
        Pipeline {
            generation: Mutex::new(0),
            cv: Condvar::new(),
            stop: AtomicBool::new(false),
            thread: Mutex::new(None),
        }
    }

    pub fn wake(&self) {
        let mut g = self.generation.lock();
        *g += 1;
        self.cv.notify_all();
    }

    pub fn start(app: &Arc<App>) {
        let a = app.clone();
        #[allow(clippy::expect_used, reason = "a process that cannot start its pipeline thread cannot serve")]
        let t = std::thread::Builder::new()
            .name("steward-embed".into())
            .spawn(move || run(&a))
            .expect("spawn the embedding pipeline");
        *app.pipeline.thread.lock() = Some(t);
    }

    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake();
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }

    pub fn is_running(&self) -> bool {
        self.thread.lock().as_ref().is_some_and(|t| !t.is_finished())
    }
}

/// The text a chunk is embedded as: the document title first, unless the chunk already opens
/// with it (so the vector knows what the chunk is about).
pub fn embedding_text(title: &str, content: &str) -> String {
    let head: String = content.chars().take(title.chars().count() + 200).collect::<String>().to_lowercase();
    if title.trim().is_empty() || head.contains(&title.trim().to_lowercase()) {
        content.to_string()
    } else {
        format!("{title}\n{content}")
    }
}

fn run(app: &App) {
    loop {
        if app.pipeline.stop.load(Ordering::SeqCst) {
            break;
        }
        let seen = *app.pipeline.generation.lock();
        let progressed = match step(app) {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(error = %e, "embedding pipeline step failed");
                false
            }
        };
        if let Ok(search) = app.search()
            && let Err(e) = search.save_vectors_if_due(&app.db, false)
        {
            tracing::warn!(error = %e, "could not save the vector index");
        }
        if progressed {
            continue;
        }
        let mut g = app.pipeline.generation.lock();
        if *g == seen && !app.pipeline.stop.load(Ordering::SeqCst) {
            app.pipeline.cv.wait_for(&mut g, Duration::from_secs(2));
        }
    }
}

/// Runs steps on this thread until there is nothing to do (tests, tools). Returns the steps taken.
pub fn run_until_idle(app: &App) -> Result<usize> {
    let mut n = 0;
    while step(app)? {
        n += 1;
    }
    Ok(n)
}

/// One step: embed up to [`STEP_CHUNKS`] pending chunks, then finalize what is complete. Returns
/// whether anything happened.
pub fn step(app: &App) -> Result<bool> {
    let pending = app.db.read(|c| store::pending_chunks(c, STEP_CHUNKS))?;
    let mut progressed = false;
    // each workspace's chunks in its own embedding space
    let mut by_space: Vec<(String, Vec<&store::PendingChunk>)> = Vec::new();
    for p in &pending {
        let space = crate::search::spaces::live_space(app, &p.workspace_id)?;
        match by_space.iter_mut().find(|(s, _)| *s == space) {
            Some((_, list)) => list.push(p),
            None => by_space.push((space, vec![p])),
        }
    }
    for (space_id, chunks) in by_space {
        let Some(space) = embed::Space::parse(&space_id) else {
            fail_waiting_refs(
                app,
                &chunks,
                &format!("the workspace's embedding space {space_id} is unknown to this build"),
            )?;
            progressed = true;
            continue;
        };
        let embedder = match app.models.embedder_for(space) {
            Ok(e) => e,
            Err(e) => {
                fail_waiting_refs(app, &chunks, &e.message)?;
                progressed = true;
                continue;
            }
        };
        let texts: Vec<String> = chunks.iter().map(|p| embedding_text(&p.title, &p.content)).collect();
        let refs: Vec<&str> = texts.iter().map(|s| s.as_str()).collect();
        let ids = embedder.tokenize_passages(&refs).map_err(crate::error::Error::internal)?;
        let out = match embedder.embed_tokenized(&ids, false) {
            Ok(o) => o,
            Err(e) => {
                fail_waiting_refs(app, &chunks, &format!("embedding failed: {e}"))?;
                progressed = true;
                continue;
            }
        };
        app.db.write(|tx| {
            for (i, p) in chunks.iter().enumerate() {
                // a workspace that switched space meanwhile gets its chunk embedded again
                if crate::search::spaces::live_space_tx(app, tx, &p.workspace_id)? != space_id {
                    continue;
                }
                store::set_embedding(tx, p.key, &encode_vector(&out.vectors[i]), ids[i].len() as i64, &space_id)?;
            }
            Ok(())
        })?;
        progressed = true;
    }
    progressed |= finalize(app)? > 0;
    Ok(progressed)
}

/// The documents of `pending` fail with `reason` (the embedding model is unavailable).
fn fail_waiting_refs(app: &App, pending: &[&store::PendingChunk], reason: &str) -> Result<()> {
    let now = rfc3339(app.clock.now());
    let mut docs: Vec<&str> = pending.iter().map(|p| p.document_id.as_str()).collect();
    docs.sort();
    docs.dedup();
    app.db.write(|tx| {
        for d in &docs {
            let rev = store::current_revision(tx, d)?;
            store::delete_unlive_chunks(tx, d)?;
            store::mark_failed(tx, d, rev, reason, &now)?;
        }
        Ok(())
    })?;
    app.documents_changed();
    tracing::warn!(documents = docs.len(), reason, "documents failed: cannot embed");
    Ok(())
}

/// Makes every complete revision live, syncs the indexes, marks the documents ready. Returns how
/// many documents became ready.
pub fn finalize(app: &App) -> Result<usize> {
    let mut total = 0;
    loop {
        let docs = app.db.read(|c| store::finalizable(c, 500))?;
        let stuck = app.db.read(store::live_but_processing)?;
        if docs.is_empty() && stuck.is_empty() {
            return Ok(total);
        }
        let now = rfc3339(app.clock.now());
        let mut live: Vec<(String, i64)> = stuck;
        app.db.write(|tx| {
            for (id, rev) in &docs {
                let Some(info) = store::finalize_info(tx, id, *rev)? else { continue };
                if info.indexed_revision == Some(*rev) {
                    live.push((id.clone(), *rev));
                    continue;
                }
                let metered = if info.source_kind == "inline_text" {
                    info.content_size_bytes
                } else {
                    info.source_size_bytes.unwrap_or(0)
                };
                store::go_live(tx, id, *rev, info.chunk_count, metered)?;
                super::enrich::enqueue_if_pending(tx, app, id, *rev)?;
                usage::add_meter(
                    tx,
                    &info.organization_id,
                    usage::STORED_INDEXED_BYTES,
                    "",
                    metered - info.metered_bytes,
                )?;
                if info.embedded_vectors > 0 {
                    usage::record_embedding(
                        tx,
                        &usage::EmbeddingUsage {
                            organization_id: &info.organization_id,
                            workspace_id: &info.workspace_id.0,
                            document_id: id,
                            revision: *rev,
                            provider: embed::PROVIDER,
                            model: &info.embedding_model,
                            input_bytes: info.embedded_bytes,
                            vector_count: info.embedded_vectors,
                            tokens: info.embedded_tokens,
                        },
                        &now,
                    )?;
                }
                live.push((id.clone(), *rev));
            }
            Ok(())
        })?;
        app.search()?.sync(&app.db)?;
        let now = rfc3339(app.clock.now());
        let n = app.db.write(|tx| store::mark_ready(tx, &live, &now))?;
        app.documents_changed();
        total += n;
        if n == 0 && docs.is_empty() {
            return Ok(total);
        }
    }
}
