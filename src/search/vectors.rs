//! The vector index: one usearch HNSW index (cosine, 384 dimensions) per workspace, keyed by chunk
//! rowid, saved under `index/vectors/<workspace>.usearch`. Each workspace's index is in one
//! embedding space (`spaces.json` beside them says which): a search names the space its query was
//! embedded in and is refused by an index of another, and a re-embedding replaces a workspace's
//! index whole ([`VectorIndex::replace`]), so no search ever sees a mix of spaces. `spaces.json`
//! also holds each file's CRC-32 as saved: a file that is missing or differs makes the whole index
//! unreadable, and it is rebuilt from SQLite.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use crate::models::embed::DIMENSIONS;

/// Bump when options change: a mismatch rebuilds the index.
pub const SCHEMA_VERSION: u32 = 1;

fn options() -> IndexOptions {
    IndexOptions {
        dimensions: DIMENSIONS,
        metric: MetricKind::Cos,
        quantization: ScalarKind::F32,
        connectivity: 16,
        expansion_add: 128,
        expansion_search: 96,
        multi: false,
    }
}

pub struct WorkspaceVectors {
    index: Index,
    /// The embedding space of its vectors.
    space: String,
}

// The usearch index is internally synchronized for concurrent searches and additions; we still
// take a write lock for add/remove/reserve to keep capacity changes simple.
unsafe impl Send for WorkspaceVectors {}
unsafe impl Sync for WorkspaceVectors {}

/// Searches one index serves at once. usearch keeps a context per concurrent search and refuses
/// a search when none is free ("Reserve capacity ahead of searches!"), so each index reserves
/// this many and [`VectorIndex::search`] waits for a free one.
const SEARCH_CONTEXTS: usize = 64;

pub struct VectorIndex {
    dir: PathBuf,
    workspaces: RwLock<HashMap<String, Arc<RwLock<WorkspaceVectors>>>>,
    /// Searches running now (at most [`SEARCH_CONTEXTS`]).
    searching: parking_lot::Mutex<usize>,
    freed: parking_lot::Condvar,
}

/// A search slot, given back on drop.
struct SearchSlot<'a>(&'a VectorIndex);

impl Drop for SearchSlot<'_> {
    fn drop(&mut self) {
        *self.0.searching.lock() -= 1;
        self.0.freed.notify_one();
    }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Why a search got no answer from the vector index.
#[derive(Debug)]
pub enum VectorError {
    /// The workspace's index is in another space than the query's (it was just re-embedded).
    OtherSpace {
        index: String,
    },
    Failed(String),
}

impl std::fmt::Display for VectorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VectorError::OtherSpace { index } => write!(f, "the vector index is in the space {index}"),
            VectorError::Failed(m) => f.write_str(m),
        }
    }
}

/// `spaces.json`: each workspace's space and its file's CRC-32 (format 2). Format 1 was the map of
/// spaces alone.
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Saved {
    format: u32,
    spaces: std::collections::BTreeMap<String, String>,
    crc32: std::collections::BTreeMap<String, u32>,
}

const SAVED_FORMAT: u32 = 2;

impl Saved {
    /// What `dir` recorded (nothing when it has no `spaces.json`); an unreadable record is an error.
    fn read(dir: &Path) -> Result<Saved, String> {
        let path = dir.join("spaces.json");
        let Ok(text) = std::fs::read_to_string(&path) else { return Ok(Saved::default()) };
        let damaged = |_| format!("{} is damaged", path.display());
        let v: serde_json::Value = serde_json::from_str(&text).map_err(damaged)?;
        if v.get("format").is_some() {
            serde_json::from_value(v).map_err(damaged)
        } else {
            Ok(Saved { spaces: serde_json::from_value(v).map_err(damaged)?, ..Default::default() })
        }
    }
}

fn new_index(capacity: usize) -> Result<Index, String> {
    let index = Index::new(&options()).map_err(err)?;
    index.reserve_capacity_and_threads(capacity.max(1024), SEARCH_CONTEXTS).map_err(err)?;
    Ok(index)
}

impl VectorIndex {
    /// Opens every saved workspace index in `dir`, each in the space `spaces.json` records (an
    /// index saved before spaces were recorded is in the legacy space). A file whose CRC differs
    /// from the one recorded, or a recorded file that is missing, is an error.
    pub fn open(dir: &Path) -> Result<VectorIndex, String> {
        std::fs::create_dir_all(dir).map_err(err)?;
        let saved = Saved::read(dir)?;
        for (ws, crc) in &saved.crc32 {
            let path = dir.join(format!("{ws}.usearch"));
            let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            if crc32fast::hash(&bytes) != *crc {
                return Err(format!("{} is damaged (its checksum differs from the one saved)", path.display()));
            }
        }
        let recorded = saved.spaces;
        let mut spaces = HashMap::new();
        for entry in std::fs::read_dir(dir).map_err(err)? {
            let path = entry.map_err(err)?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("usearch") {
                continue;
            }
            let Some(ws) = path.file_stem().and_then(|s| s.to_str()).map(|s| s.to_string()) else { continue };
            if saved.format >= SAVED_FORMAT && !saved.crc32.contains_key(&ws) {
                continue; // not part of the last save
            }
            let index = Index::new(&options()).map_err(err)?;
            index
                .load(path.to_str().ok_or("non-UTF-8 path")?)
                .map_err(|e| format!("cannot load {}: {e}", path.display()))?;
            index.reserve_capacity_and_threads(index.capacity().max(index.size()), SEARCH_CONTEXTS).map_err(err)?;
            let space = recorded.get(&ws).cloned().unwrap_or_else(|| crate::models::embed::LEGACY_SPACE.to_string());
            spaces.insert(ws, Arc::new(RwLock::new(WorkspaceVectors { index, space })));
        }
        Ok(VectorIndex { workspaces: RwLock::new(spaces), ..VectorIndex::open_empty(dir) })
    }

    /// An empty index set over `dir` (nothing loaded).
    pub fn open_empty(dir: &Path) -> VectorIndex {
        let _ = std::fs::create_dir_all(dir);
        VectorIndex {
            dir: dir.to_path_buf(),
            workspaces: RwLock::new(HashMap::new()),
            searching: parking_lot::Mutex::new(0),
            freed: parking_lot::Condvar::new(),
        }
    }

    /// Waits for a free search context.
    fn slot(&self) -> SearchSlot<'_> {
        let mut n = self.searching.lock();
        while *n >= SEARCH_CONTEXTS {
            self.freed.wait(&mut n);
        }
        *n += 1;
        SearchSlot(self)
    }

    /// The workspace's index, created empty in `space` when it has none.
    fn entry(&self, ws: &str, space: &str) -> Result<Arc<RwLock<WorkspaceVectors>>, String> {
        if let Some(s) = self.workspaces.read().get(ws) {
            return Ok(s.clone());
        }
        let mut all = self.workspaces.write();
        if let Some(s) = all.get(ws) {
            return Ok(s.clone());
        }
        let s = Arc::new(RwLock::new(WorkspaceVectors { index: new_index(1024)?, space: space.to_string() }));
        all.insert(ws.to_string(), s.clone());
        Ok(s)
    }

    /// The space of a workspace's index (none: it has no index yet).
    pub fn space_of(&self, ws: &str) -> Option<String> {
        self.workspaces.read().get(ws).map(|s| s.read().space.clone())
    }

    /// Replaces a workspace's index with `vectors` in `space`, built aside and swapped in at once:
    /// a search runs on the old index or the new one, never a mix.
    pub fn replace(&self, ws: &str, space: &str, vectors: &[(u64, Vec<f32>)]) -> Result<(), String> {
        let index = new_index(vectors.len() + vectors.len() / 4)?;
        for (key, v) in vectors {
            index.add(*key, v).map_err(err)?;
        }
        let fresh = Arc::new(RwLock::new(WorkspaceVectors { index, space: space.to_string() }));
        self.workspaces.write().insert(ws.to_string(), fresh);
        Ok(())
    }

    /// Adds (or replaces) a chunk's vector in the workspace's index; a workspace without an index
    /// gets one in `space`.
    pub fn add(&self, ws: &str, space: &str, key: u64, vector: &[f32]) -> Result<(), String> {
        let space = self.entry(ws, space)?;
        let s = space.write();
        if s.index.contains(key) {
            s.index.remove(key).map_err(err)?;
        }
        if s.index.size() + 1 > s.index.capacity() {
            let cap = (s.index.capacity() * 2).max(1024);
            s.index.reserve_capacity_and_threads(cap, SEARCH_CONTEXTS).map_err(err)?;
        }
        s.index.add(key, vector).map_err(err)
    }

    pub fn remove(&self, ws: &str, key: u64) -> Result<(), String> {
        let Some(space) = self.workspaces.read().get(ws).cloned() else { return Ok(()) };
        let s = space.write();
        if s.index.contains(key) {
            s.index.remove(key).map_err(err)?;
        }
        Ok(())
    }

    /// Whether the workspace's index has the chunk.
    pub fn contains(&self, ws: &str, key: u64) -> bool {
        self.workspaces.read().get(ws).is_some_and(|s| s.read().index.contains(key))
    }

    /// The stored vector of a chunk, if indexed.
    pub fn get(&self, ws: &str, key: u64) -> Option<Vec<f32>> {
        let space = self.workspaces.read().get(ws).cloned()?;
        let s = space.read();
        let mut v = vec![0f32; DIMENSIONS];
        match s.index.get(key, &mut v) {
            Ok(n) if n > 0 => Some(v),
            _ => None,
        }
    }

    /// Nearest `k` chunk keys with cosine similarity, limited to `allowed` when given. `space` is
    /// the space `query` was embedded in: an index in another one refuses ([`VectorError::OtherSpace`]).
    pub fn search(
        &self,
        ws: &str,
        space: &str,
        query: &[f32],
        k: usize,
        allowed: Option<&HashSet<u64>>,
    ) -> Result<Vec<(u64, f32)>, VectorError> {
        let Some(entry) = self.workspaces.read().get(ws).cloned() else { return Ok(Vec::new()) };
        let _slot = self.slot();
        let s = entry.read();
        if s.space != space {
            return Err(VectorError::OtherSpace { index: s.space.clone() });
        }
        if s.index.size() == 0 || k == 0 {
            return Ok(Vec::new());
        }
        let f = |e| VectorError::Failed(err(e));
        let m = match allowed {
            None => s.index.search(query, k).map_err(f)?,
            Some(set) => {
                if set.is_empty() {
                    return Ok(Vec::new());
                }
                s.index.filtered_search(query, k, |key| set.contains(&key)).map_err(f)?
            }
        };
        Ok(m.keys.into_iter().zip(m.distances).map(|(key, d)| (key, 1.0 - d)).collect())
    }

    /// Saves every workspace index (to a temporary file, then renamed) and the space and CRC of
    /// each.
    pub fn save(&self) -> Result<(), String> {
        let all: Vec<(String, Arc<RwLock<WorkspaceVectors>>)> =
            self.workspaces.read().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let mut saved = Saved { format: SAVED_FORMAT, ..Default::default() };
        for (ws, entry) in all {
            let path = self.dir.join(format!("{ws}.usearch"));
            let tmp = self.dir.join(format!("{ws}.usearch.tmp"));
            let s = entry.read();
            s.index.save(tmp.to_str().ok_or("non-UTF-8 path")?).map_err(err)?;
            // read back at once (from the page cache): what is on disk is what the CRC covers
            let crc = crc32fast::hash(&std::fs::read(&tmp).map_err(err)?);
            std::fs::rename(&tmp, &path).map_err(err)?;
            saved.spaces.insert(ws.clone(), s.space.clone());
            saved.crc32.insert(ws, crc);
        }
        let tmp = self.dir.join("spaces.json.tmp");
        std::fs::write(&tmp, serde_json::to_string(&saved).map_err(err)?).map_err(err)?;
        std::fs::rename(&tmp, self.dir.join("spaces.json")).map_err(err)?;
        Ok(())
    }

    /// The workspaces with an index, and the space of each.
    pub fn spaces(&self) -> Vec<(String, String)> {
        self.workspaces.read().iter().map(|(k, v)| (k.clone(), v.read().space.clone())).collect()
    }

    /// Drops everything in memory and on disk.
    pub fn clear(&self) -> Result<(), String> {
        self.workspaces.write().clear();
        for entry in std::fs::read_dir(&self.dir).map_err(err)? {
            let p = entry.map_err(err)?.path();
            if p.extension().and_then(|e| e.to_str()).is_some_and(|e| e == "usearch" || e == "tmp" || e == "json")
                && p.file_name().and_then(|n| n.to_str()) != Some("vectors.json")
            {
                std::fs::remove_file(p).map_err(err)?;
            }
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.workspaces.read().values().map(|s| s.read().index.size()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Vectors of one workspace.
    pub fn len_of(&self, ws: &str) -> usize {
        self.workspaces.read().get(ws).map_or(0, |s| s.read().index.size())
    }

    pub fn memory_bytes(&self) -> usize {
        self.workspaces.read().values().map(|s| s.read().index.memory_usage()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_vector_reads_back_per_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let index = VectorIndex::open(dir.path()).unwrap();
        let mut v = vec![0f32; DIMENSIONS];
        v[3] = 0.6;
        v[7] = 0.8;
        index.add("ws_a", "s1", 42, &v).unwrap();
        assert_eq!(index.get("ws_a", 42), Some(v.clone()));
        assert_eq!(index.get("ws_a", 43), None);
        assert_eq!(index.get("ws_b", 42), None, "another workspace's vectors are not visible");
        index.remove("ws_a", 42).unwrap();
        assert_eq!(index.get("ws_a", 42), None);
    }

    #[test]
    fn a_search_names_its_space_and_a_replacement_is_whole() {
        let dir = tempfile::tempdir().unwrap();
        let index = VectorIndex::open(dir.path()).unwrap();
        let unit = |i: usize| {
            let mut v = vec![0f32; DIMENSIONS];
            v[i] = 1.0;
            v
        };
        index.add("ws", "old@128", 1, &unit(0)).unwrap();
        index.add("ws", "old@128", 2, &unit(1)).unwrap();
        assert_eq!(index.search("ws", "old@128", &unit(0), 1, None).unwrap()[0].0, 1);
        assert!(matches!(index.search("ws", "new@256", &unit(0), 1, None), Err(VectorError::OtherSpace { .. })));
        index.replace("ws", "new@256", &[(1, unit(2)), (2, unit(0))]).unwrap();
        assert!(matches!(index.search("ws", "old@128", &unit(0), 1, None), Err(VectorError::OtherSpace { .. })));
        assert_eq!(index.search("ws", "new@256", &unit(0), 1, None).unwrap()[0].0, 2);
        index.save().unwrap();
        let again = VectorIndex::open(dir.path()).unwrap();
        assert_eq!(again.space_of("ws").as_deref(), Some("new@256"), "the space is saved with the index");
        assert_eq!(again.search("ws", "new@256", &unit(2), 1, None).unwrap()[0].0, 1);
    }

    #[test]
    fn a_file_that_differs_from_its_saved_crc_is_refused_and_a_legacy_record_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let index = VectorIndex::open(dir.path()).unwrap();
        let mut v = vec![0f32; DIMENSIONS];
        v[1] = 1.0;
        index.add("ws", "s", 7, &v).unwrap();
        index.save().unwrap();
        assert!(VectorIndex::open(dir.path()).unwrap().contains("ws", 7));
        let file = dir.path().join("ws.usearch");
        let mut bytes = std::fs::read(&file).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 1;
        std::fs::write(&file, &bytes).unwrap();
        let err = VectorIndex::open(dir.path()).err().unwrap();
        assert!(err.contains("damaged"), "{err}");
        bytes[mid] ^= 1;
        std::fs::write(&file, &bytes).unwrap();
        // spaces.json as saved before CRCs were: read, nothing to check
        std::fs::write(dir.path().join("spaces.json"), r#"{"ws":"s"}"#).unwrap();
        let legacy = VectorIndex::open(dir.path()).unwrap();
        assert_eq!(legacy.space_of("ws").as_deref(), Some("s"));
        std::fs::remove_file(&file).unwrap();
        std::fs::write(dir.path().join("spaces.json"), "not json").unwrap();
        assert!(VectorIndex::open(dir.path()).is_err(), "an unreadable record is damage");
    }
}
