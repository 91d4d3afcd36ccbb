//! The indexes are caches of SQLite: how each is judged at start, and how it is rebuilt from the
//! live chunks in the background while the server answers.
//!
//! Each index saves a [`Position`] with what it holds: the last op it applied, its schema version,
//! the database's id and its *generation*. SQLite records each index's generation
//! (`store::generations`) when a rebuild of it completes; a rebuild picks a new one. At start an
//! index is current only when its files are whole (Tantivy's checksums, the vector files' CRCs),
//! its position names this database, this schema and the generation SQLite has, is not ahead of
//! the database, and every op after it is still in the log to be replayed. Anything else —
//! missing, corrupt, from another database, an unfinished rebuild, or files older than the
//! database (restored from an earlier copy, the ops they miss already pruned) — is rebuilt.
//!
//! A rebuild clears the index, then reads the live chunks in rowid batches, each batch under the
//! sync lock (so an op committed after the batch was read is applied after it: a chunk deleted
//! meanwhile cannot come back), committing the text index every few seconds: search answers from
//! what is rebuilt so far, and ops keep being applied as they come. Only when the last batch is in
//! and both indexes are durably saved does SQLite get the new generation; a crash before that
//! rebuilds again at the next start.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::text::{TextDoc, TextIndex};
use super::vectors::VectorIndex;
use super::{SearchIndex, store, tantivy_err};
use crate::error::{Error, Result};
use crate::storage::Db;

/// Chunks read and indexed per batch (the sync lock is held for one batch).
const BATCH: usize = 500;
/// How often a running rebuild commits the text index (search sees what is committed).
const COMMIT_EVERY: Duration = Duration::from_secs(2);
/// How often a running rebuild logs how far it is.
const REPORT_EVERY: Duration = Duration::from_secs(10);

/// What an index saved with its contents.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(super) struct Position {
    pub seq: i64,
    pub schema: u32,
    pub db: i64,
    /// The index's generation; absent (0) in positions saved before generations were recorded,
    /// when SQLite has none either.
    #[serde(default)]
    pub generation: i64,
}

/// What an index's saved position is checked against.
pub(super) struct Validity {
    pub db_id: i64,
    pub max_seq: i64,
    pub min_seq: Option<i64>,
}

impl Validity {
    /// The position's op sequence number when the index is current, else why it is not.
    pub fn check(&self, p: Option<Position>, schema: u32, generation: i64) -> std::result::Result<i64, &'static str> {
        let p = p.ok_or("missing")?;
        if p.schema != schema {
            return Err("of another schema version");
        }
        if p.db != self.db_id {
            return Err("built for another database");
        }
        if p.generation != generation {
            return Err("of another generation (a copy from before a rebuild, or an unfinished rebuild)");
        }
        if p.seq > self.max_seq {
            return Err("ahead of the database (the database is an older copy)");
        }
        // every op after the position must still be in the log to be replayed
        let first_kept = self.min_seq.unwrap_or(self.max_seq + 1);
        if p.seq < first_kept - 1 {
            return Err("older than the database (an earlier copy; the changes it lacks are no longer in the log)");
        }
        Ok(p.seq)
    }
}

/// The text index under `dir` (emptied when damaged or not current) and its position when current.
pub(super) fn open_text(dir: &Path, valid: &Validity, generation: i64) -> Result<(TextIndex, Option<i64>)> {
    let text_dir = dir.join("text");
    let opened = TextIndex::open(&text_dir).and_then(|t| t.damaged().map(|d| (t, d)));
    let mut text = match opened {
        Ok((t, damaged)) if damaged.is_empty() => t,
        Ok((t, damaged)) => {
            tracing::warn!(files = damaged.len(), "the text index is corrupt; rebuilding it from SQLite");
            drop(t);
            discard(&text_dir)?;
            TextIndex::open(&text_dir).map_err(tantivy_err)?
        }
        Err(e) => {
            tracing::warn!(error = %e, "the text index cannot be opened; rebuilding it from SQLite");
            let _ = discard(&text_dir);
            TextIndex::open(&text_dir).map_err(tantivy_err)?
        }
    };
    let pos = valid.check(
        text.payload().and_then(|p| serde_json::from_str(&p).ok()),
        super::text::SCHEMA_VERSION,
        generation,
    );
    if let Err(why) = pos
        && text.num_docs() > 0
    {
        tracing::warn!(reason = why, "the text index is not current; rebuilding it from SQLite");
        drop(text);
        discard(&text_dir)?;
        text = TextIndex::open(&text_dir).map_err(tantivy_err)?;
    }
    Ok((text, pos.ok()))
}

/// The vector index under `dir` (empty when damaged or not current) and its position when current.
pub(super) fn open_vectors(
    dir: &Path,
    valid: &Validity,
    generation: i64,
    db: &Db,
) -> Result<(VectorIndex, Option<i64>)> {
    let vec_dir = dir.join("vectors");
    let saved = std::fs::read_to_string(vec_dir.join("vectors.json")).ok().and_then(|s| serde_json::from_str(&s).ok());
    let had_files = saved.is_some();
    let pos = valid.check(saved, super::vectors::SCHEMA_VERSION, generation);
    let empty = || -> Result<VectorIndex> {
        let v = VectorIndex::open_empty(&vec_dir);
        v.clear().map_err(Error::internal_msg)?;
        Ok(v)
    };
    let (vectors, pos) = match pos {
        Ok(seq) => match VectorIndex::open(&vec_dir) {
            Ok(v) => (v, Some(seq)),
            Err(e) => {
                tracing::warn!(error = %e, "the vector index is corrupt; rebuilding it from SQLite");
                (empty()?, None)
            }
        },
        Err(why) => {
            if had_files {
                tracing::warn!(reason = why, "the vector index is not current; rebuilding it from SQLite");
            }
            (empty()?, None)
        }
    };
    // vectors lost while the database has live chunks
    let pos = if pos.is_some() && vectors.is_empty() && db.read(store::live_count)? > 0 { None } else { pos };
    Ok((vectors, pos))
}

/// A rebuild from SQLite, running or due.
pub(super) struct Rebuild {
    pub text: bool,
    pub vectors: bool,
    generation: i64,
    /// The last chunk key indexed.
    after: u64,
    /// Each batch's last key and the last op issued when it was read (it holds every op up to it).
    batches: Vec<(u64, i64)>,
    done: u64,
    total: u64,
    /// Chunks the op log added before a batch reached them: the batch leaves them (a second copy
    /// would stay in Tantivy as a deleted document, which still counts in BM25's statistics).
    touched: HashSet<u64>,
    started: Instant,
}

impl Rebuild {
    /// Whether the sync should add chunk `key` (for its add op `seq`) to the text index: not when
    /// a batch read it as of that op already; when no batch has reached it, yes, and the batch
    /// will leave it.
    pub fn sync_adds(&mut self, key: u64, seq: i64) -> bool {
        if key > self.after {
            self.touched.insert(key);
            return true;
        }
        let i = self.batches.partition_point(|(last, _)| *last < key);
        seq > self.batches.get(i).map_or(i64::MAX, |b| b.1)
    }
}

/// How far a rebuild is.
#[derive(Debug, Clone, PartialEq)]
pub struct RebuildStatus {
    pub text: bool,
    pub vectors: bool,
    /// Chunks indexed so far, and how many were live when it began.
    pub done: u64,
    pub total: u64,
    pub elapsed: Duration,
}

impl RebuildStatus {
    /// "the text and vector indexes: 1200 of 5000 chunks".
    pub fn describe(&self) -> String {
        let which = match (self.text, self.vectors) {
            (true, true) => "the text and vector indexes",
            (true, false) => "the text index",
            _ => "the vector index",
        };
        format!("rebuilding {which} from the database: {} of {} chunks", self.done.min(self.total), self.total)
    }
}

pub(super) fn new_generation() -> i64 {
    rand::random::<i64>().abs().max(1)
}

impl SearchIndex {
    /// Clears the chosen indexes and plans their rebuild under a new generation (run it with
    /// [`SearchIndex::run_rebuild`]). Call without the sync lock held.
    pub(super) fn begin_rebuild(&self, db: &Db, text: bool, vectors: bool) -> Result<()> {
        let st = self.state.lock();
        // a rebuild already planned is merged into this one, which starts over from the first chunk
        let (text, vectors) = match &*self.rebuild.lock() {
            Some(old) => (text || old.text, vectors || old.vectors),
            None => (text, vectors),
        };
        let generation = new_generation();
        {
            let mut g = self.gens.lock();
            if text {
                g.text = generation;
            }
            if vectors {
                g.vectors = generation;
            }
        }
        if text {
            let mut w = self.writer.lock();
            w.delete_all_documents().map_err(tantivy_err)?;
            let mut pc = w.prepare_commit().map_err(tantivy_err)?;
            pc.set_payload(&self.text_position(st.applied));
            pc.commit().map_err(tantivy_err)?;
            drop(w);
            self.text.reader.reload().map_err(tantivy_err)?;
        }
        if vectors {
            self.vectors.clear().map_err(Error::internal_msg)?;
            std::fs::write(self.dir.join("vectors/vectors.json"), self.vector_position(st.applied))?;
        }
        let total = db.read(store::live_count)? as u64;
        *self.rebuild.lock() = Some(Rebuild {
            text,
            vectors,
            generation,
            after: 0,
            batches: Vec::new(),
            done: 0,
            total,
            touched: HashSet::new(),
            started: Instant::now(),
        });
        Ok(())
    }

    /// Whether a rebuild is due or running, and how far it is.
    pub fn rebuild_status(&self) -> Option<RebuildStatus> {
        self.rebuild.lock().as_ref().map(|r| RebuildStatus {
            text: r.text,
            vectors: r.vectors,
            done: r.done,
            total: r.total,
            elapsed: r.started.elapsed(),
        })
    }

    /// Asks a running rebuild to stop after its batch (shutdown); the next start rebuilds again.
    pub fn stop_rebuild(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// Runs the planned rebuild to its end (true), or until [`SearchIndex::stop_rebuild`] (false).
    pub fn run_rebuild(&self, db: &Db) -> Result<bool> {
        let mut last_commit = Instant::now();
        let mut last_report = Instant::now();
        loop {
            if last_report.elapsed() >= REPORT_EVERY {
                if let Some(r) = self.rebuild_status() {
                    tracing::info!(done = r.done.min(r.total), total = r.total, "{}", r.describe());
                }
                last_report = Instant::now();
            }
            if self.stopping.load(Ordering::SeqCst) {
                return Ok(false);
            }
            let st = self.state.lock();
            let Some((text, vectors, after)) = self.rebuild.lock().as_ref().map(|r| (r.text, r.vectors, r.after))
            else {
                return Ok(true);
            };
            let (read_at, batch) = db.read(|c| store::live_batch(c, after, BATCH))?;
            if batch.is_empty() {
                drop(st);
                self.finish_rebuild(db)?;
                return Ok(true);
            }
            let touched: HashSet<u64> = match &*self.rebuild.lock() {
                Some(r) => batch.iter().map(|c| c.key).filter(|k| r.touched.contains(k)).collect(),
                None => HashSet::new(),
            };
            let w = self.writer.lock();
            for ch in batch.iter().filter(|c| !touched.contains(&c.key)) {
                if text {
                    self.text
                        .add(
                            &w,
                            &TextDoc {
                                key: ch.key,
                                workspace: &ch.workspace_id,
                                document: &ch.document_id,
                                lang: self.language(&ch.workspace_id),
                                title: &ch.title,
                                heading: &ch.heading,
                                body: &ch.content,
                            },
                        )
                        .map_err(tantivy_err)?;
                }
                if vectors && let Some(v) = &ch.embedding {
                    self.vectors
                        .add(&ch.workspace_id, &self.space_of_db(db, &ch.workspace_id), ch.key, v)
                        .map_err(Error::internal_msg)?;
                }
            }
            drop(w);
            if text && last_commit.elapsed() >= COMMIT_EVERY {
                self.commit_text(st.applied.max(st.text_applied))?;
                last_commit = Instant::now();
            }
            if let Some(r) = self.rebuild.lock().as_mut() {
                r.after = batch.last().map_or(after, |c| c.key);
                r.batches.push((r.after, read_at));
                r.done += batch.len() as u64;
            }
            drop(st);
        }
    }

    /// Commits the text index at `seq` (the sync lock held by the caller).
    pub(super) fn commit_text(&self, seq: i64) -> Result<()> {
        let mut w = self.writer.lock();
        let mut pc = w.prepare_commit().map_err(tantivy_err)?;
        pc.set_payload(&self.text_position(seq));
        pc.commit().map_err(tantivy_err)?;
        drop(w);
        self.text.reader.reload().map_err(tantivy_err)?;
        Ok(())
    }

    /// Saves what the rebuild made, then records its generation in SQLite: from then on the
    /// rebuilt indexes are current.
    fn finish_rebuild(&self, db: &Db) -> Result<()> {
        let mut st = self.state.lock();
        let Some((text, vectors, generation, done, started)) =
            self.rebuild.lock().as_ref().map(|r| (r.text, r.vectors, r.generation, r.done, r.started))
        else {
            return Ok(());
        };
        if text {
            self.commit_text(st.applied.max(st.text_applied))?;
        }
        if vectors {
            self.vectors.save().map_err(Error::internal_msg)?;
            std::fs::write(self.dir.join("vectors/vectors.json"), self.vector_position(st.applied))?;
            st.vectors_saved = st.applied;
            st.vectors_dirty = false;
        }
        let now = crate::clock::rfc3339(chrono::Utc::now());
        db.write(|tx| {
            if text {
                store::set_generation(tx, true, generation, &now, &self.scope)?;
            }
            if vectors {
                store::set_generation(tx, false, generation, &now, &self.scope)?;
            }
            Ok(())
        })?;
        *self.rebuild.lock() = None;
        drop(st);
        tracing::info!(
            chunks = done,
            text,
            vectors,
            ms = started.elapsed().as_millis() as u64,
            "rebuilt the search indexes from the database"
        );
        Ok(())
    }
}

/// Removes the index directory `dir`: first moved aside (one atomic rename), then deleted. A
/// thread of a closed index still finishing a file (a merge, a garbage collection) then writes into
/// the directory being deleted, not into the fresh one, and cannot make the removal fail with
/// "directory not empty"; what it leaves behind is deleted with the rest when it can be.
pub(super) fn discard(dir: &Path) -> std::io::Result<()> {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let aside = dir.with_file_name(format!(".{name}.discarded-{}-{nanos}", std::process::id()));
    match std::fs::rename(dir, &aside) {
        Ok(()) => {
            if let Err(e) = std::fs::remove_dir_all(&aside) {
                tracing::warn!(error = %e, dir = %aside.display(), "a discarded index directory is left to delete");
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seq: i64) -> Option<Position> {
        Some(Position { seq, schema: 3, db: 7, generation: 11 })
    }

    #[test]
    fn a_position_is_current_only_when_nothing_it_lacks_is_lost() {
        // ops 1..=110 were issued; 101..=110 are still in the log
        let v = Validity { db_id: 7, max_seq: 110, min_seq: Some(101) };
        assert_eq!(v.check(at(110), 3, 11), Ok(110));
        assert_eq!(v.check(at(100), 3, 11), Ok(100), "what it lacks is replayed from the log");
        assert!(v.check(at(99), 3, 11).unwrap_err().contains("older"), "op 100 is gone");
        assert!(v.check(at(111), 3, 11).unwrap_err().contains("ahead"));
        assert!(v.check(None, 3, 11).is_err());
        assert!(v.check(at(110), 2, 11).unwrap_err().contains("schema"));
        assert!(v.check(at(110), 3, 12).unwrap_err().contains("generation"));
        let other = Validity { db_id: 8, ..v };
        assert!(other.check(at(110), 3, 11).unwrap_err().contains("another database"));
        // the whole log pruned: only a position at the last op is current (the outside test's
        // case: index files from an earlier copy were taken as current)
        let pruned = Validity { db_id: 7, max_seq: 110, min_seq: None };
        assert_eq!(pruned.check(at(110), 3, 11), Ok(110));
        assert!(pruned.check(at(100), 3, 11).unwrap_err().contains("older"));
        // an index saved before generations were recorded, against a database without them
        let legacy: Option<Position> = serde_json::from_str(r#"{"seq":110,"schema":3,"db":7}"#).ok();
        assert_eq!(pruned.check(legacy, 3, 0), Ok(110));
    }

    #[test]
    fn a_discarded_directory_is_gone_and_its_place_free_at_once() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("text");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/segment.idx"), b"x").unwrap();
        // a late writer holding the directory open writes into the moved copy, not the new one
        let late = std::fs::File::open(&dir).unwrap();
        discard(&dir).unwrap();
        assert!(!dir.exists());
        std::fs::create_dir_all(&dir).unwrap();
        drop(late);
        let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("text")], "nothing else left beside it");
        assert!(discard(&root.path().join("missing")).is_ok(), "nothing to discard");
    }
}
