//! `steward verify`'s look at the indexes, read only: whether each is current (as the server would
//! judge it at start, see `rebuild`), and when it is, whether every live chunk is in it. A chunk
//! whose change is still in the op log after the index's position is not missing: the next start
//! applies it.

use std::collections::HashSet;
use std::path::Path;

use super::rebuild::{Position, Validity};
use super::text::TextIndex;
use super::vectors::VectorIndex;
use super::{store, text, vectors};
use crate::error::Result;
use crate::storage::Conn;

/// The state of one index.
#[derive(Debug, Clone, PartialEq)]
pub enum Health {
    /// No index: the next start builds it.
    Missing,
    /// Not usable as it is (why): the next start rebuilds it.
    NotCurrent(String),
    /// Current as of this op.
    Current(i64),
}

#[derive(Debug)]
pub struct Inspection {
    pub text: Health,
    pub vectors: Health,
    /// Live chunks: (key, workspace).
    pub live: usize,
    /// Live chunks a current index lacks (their change is not in the log either).
    pub missing_text: Vec<u64>,
    pub missing_vectors: Vec<u64>,
    /// Changes in the log after an index's position: applied at the next start.
    pub pending: usize,
}

/// Inspects the indexes under `dir` against the database `c`.
pub fn inspect(dir: &Path, c: &Conn) -> Result<Inspection> {
    let valid = Validity {
        db_id: store::database_id_of(c)?.unwrap_or(0),
        max_seq: store::max_seq(c)?,
        min_seq: store::min_seq(c)?,
    };
    let (text_gen, vec_gen) = store::generations(c, "")?;
    let live = store::live_keys(c)?;
    let mut out = Inspection {
        text: Health::Missing,
        vectors: Health::Missing,
        live: live.len(),
        missing_text: Vec::new(),
        missing_vectors: Vec::new(),
        pending: 0,
    };
    let mut text_keys = None;
    match TextIndex::read_keys(&dir.join("text")) {
        Ok(None) => {}
        Ok(Some((payload, keys))) => {
            let pos = payload.and_then(|p| serde_json::from_str::<Position>(&p).ok());
            out.text = health(valid.check(pos, text::SCHEMA_VERSION, text_gen));
            text_keys = Some(keys);
        }
        Err(why) => out.text = Health::NotCurrent(why),
    }
    let vec_dir = dir.join("vectors");
    let mut vector_index = None;
    if let Ok(saved) = std::fs::read_to_string(vec_dir.join("vectors.json")) {
        let pos = serde_json::from_str::<Position>(&saved).ok();
        out.vectors = health(valid.check(pos, vectors::SCHEMA_VERSION, vec_gen));
        if matches!(out.vectors, Health::Current(_)) {
            match VectorIndex::open(&vec_dir) {
                Ok(v) => vector_index = Some(v),
                Err(why) => out.vectors = Health::NotCurrent(format!("corrupt ({why})")),
            }
        }
    }
    let from =
        [&out.text, &out.vectors].iter().filter_map(|h| if let Health::Current(s) = h { Some(*s) } else { None }).min();
    let mut pending_keys = HashSet::new();
    if let Some(from) = from {
        let ops = store::ops_after(c, from, usize::MAX >> 1)?;
        out.pending = ops.len();
        pending_keys.extend(ops.iter().filter(|o| o.add).map(|o| o.key));
    }
    for (key, ws) in &live {
        if pending_keys.contains(key) {
            continue;
        }
        if let (Health::Current(_), Some(keys)) = (&out.text, &text_keys)
            && !keys.contains(key)
        {
            out.missing_text.push(*key);
        }
        if let Some(v) = &vector_index
            && !v.contains(ws, *key)
        {
            out.missing_vectors.push(*key);
        }
    }
    Ok(out)
}

fn health(r: std::result::Result<i64, &'static str>) -> Health {
    match r {
        Ok(seq) => Health::Current(seq),
        Err(why) => Health::NotCurrent(why.to_string()),
    }
}
