//! The vector index: one usearch HNSW index (cosine, 384 dimensions) per workspace, keyed by chunk
//! rowid, saved under `index/vectors/<workspace>.usearch`.

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
    spaces: RwLock<HashMap<String, Arc<RwLock<WorkspaceVectors>>>>,
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

impl VectorIndex {
    /// Opens every saved workspace index in `dir`.
    pub fn open(dir: &Path) -> Result<VectorIndex, String> {
        std::fs::create_dir_all(dir).map_err(err)?;
        let mut spaces = HashMap::new();
        for entry in std::fs::read_dir(dir).map_err(err)? {
            let path = entry.map_err(err)?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("usearch") {
                continue;
            }
            let Some(ws) = path.file_stem().and_then(|s| s.to_str()).map(|s| s.to_string()) else { continue };
            let index = Index::new(&options()).map_err(err)?;
            index
                .load(path.to_str().ok_or("non-UTF-8 path")?)
                .map_err(|e| format!("cannot load {}: {e}", path.display()))?;
            index.reserve_capacity_and_threads(index.capacity().max(index.size()), SEARCH_CONTEXTS).map_err(err)?;
            spaces.insert(ws, Arc::new(RwLock::new(WorkspaceVectors { index })));
        }
        Ok(VectorIndex { spaces: RwLock::new(spaces), ..VectorIndex::open_empty(dir) })
    }

    /// An empty index set over `dir` (nothing loaded).
    pub fn open_empty(dir: &Path) -> VectorIndex {
        let _ = std::fs::create_dir_all(dir);
        VectorIndex {
            dir: dir.to_path_buf(),
            spaces: RwLock::new(HashMap::new()),
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

    fn space(&self, ws: &str) -> Result<Arc<RwLock<WorkspaceVectors>>, String> {
        if let Some(s) = self.spaces.read().get(ws) {
            return Ok(s.clone());
        }
        let mut spaces = self.spaces.write();
        if let Some(s) = spaces.get(ws) {
            return Ok(s.clone());
        }
        let index = Index::new(&options()).map_err(err)?;
        index.reserve_capacity_and_threads(1024, SEARCH_CONTEXTS).map_err(err)?;
        let s = Arc::new(RwLock::new(WorkspaceVectors { index }));
        spaces.insert(ws.to_string(), s.clone());
        Ok(s)
    }

    pub fn add(&self, ws: &str, key: u64, vector: &[f32]) -> Result<(), String> {
        let space = self.space(ws)?;
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
        let Some(space) = self.spaces.read().get(ws).cloned() else { return Ok(()) };
        let s = space.write();
        if s.index.contains(key) {
            s.index.remove(key).map_err(err)?;
        }
        Ok(())
    }

    /// The stored vector of a chunk, if indexed.
    pub fn get(&self, ws: &str, key: u64) -> Option<Vec<f32>> {
        let space = self.spaces.read().get(ws).cloned()?;
        let s = space.read();
        let mut v = vec![0f32; DIMENSIONS];
        match s.index.get(key, &mut v) {
            Ok(n) if n > 0 => Some(v),
            _ => None,
        }
    }

    /// Nearest `k` chunk keys with cosine similarity, limited to `allowed` when given.
    pub fn search(
        &self,
        ws: &str,
        query: &[f32],
        k: usize,
        allowed: Option<&HashSet<u64>>,
    ) -> Result<Vec<(u64, f32)>, String> {
        let Some(space) = self.spaces.read().get(ws).cloned() else { return Ok(Vec::new()) };
        let _slot = self.slot();
        let s = space.read();
        if s.index.size() == 0 || k == 0 {
            return Ok(Vec::new());
        }
        let m = match allowed {
            None => s.index.search(query, k).map_err(err)?,
            Some(set) => {
                if set.is_empty() {
                    return Ok(Vec::new());
                }
                s.index.filtered_search(query, k, |key| set.contains(&key)).map_err(err)?
            }
        };
        Ok(m.keys.into_iter().zip(m.distances).map(|(key, d)| (key, 1.0 - d)).collect())
    }

    /// Saves every workspace index (to a temporary file, then renamed).
    pub fn save(&self) -> Result<(), String> {
        let spaces: Vec<(String, Arc<RwLock<WorkspaceVectors>>)> =
            self.spaces.read().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for (ws, space) in spaces {
            let path = self.dir.join(format!("{ws}.usearch"));
            let tmp = self.dir.join(format!("{ws}.usearch.tmp"));
            let s = space.read();
            s.index.save(tmp.to_str().ok_or("non-UTF-8 path")?).map_err(err)?;
            std::fs::rename(&tmp, &path).map_err(err)?;
        }
        Ok(())
    }

    /// Drops everything in memory and on disk.
    pub fn clear(&self) -> Result<(), String> {
        self.spaces.write().clear();
        for entry in std::fs::read_dir(&self.dir).map_err(err)? {
            let p = entry.map_err(err)?.path();
            if p.extension().and_then(|e| e.to_str()).is_some_and(|e| e == "usearch" || e == "tmp") {
                std::fs::remove_file(p).map_err(err)?;
            }
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.spaces.read().values().map(|s| s.read().index.size()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Vectors of one workspace.
    pub fn len_of(&self, ws: &str) -> usize {
        self.spaces.read().get(ws).map_or(0, |s| s.read().index.size())
    }

    pub fn memory_bytes(&self) -> usize {
        self.spaces.read().values().map(|s| s.read().index.memory_usage()).sum()
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
        index.add("ws_a", 42, &v).unwrap();
        assert_eq!(index.get("ws_a", 42), Some(v));
        assert_eq!(index.get("ws_a", 43), None);
        assert_eq!(index.get("ws_b", 42), None, "another workspace's vectors are not visible");
        index.remove("ws_a", 42).unwrap();
        assert_eq!(index.get("ws_a", 42), None);
    }
}
