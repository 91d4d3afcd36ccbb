//! Uploaded originals, content-addressed under `<data-dir>/blobs/<2 hex>/<sha256>`, kept for
//! reprocessing and removed when no document refers to them. On PostgreSQL (docs/scale-out.md,
//! section 7) the original lives in the `blobs` table, committed before the document that names
//! it, and each node's directory is a cache of it: a node that processes a document uploaded on
//! another reads the original from the table once.

mod store;

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::storage::Db;

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

pub fn path(data_dir: &Path, sha: &str) -> PathBuf {
    data_dir.join("blobs").join(&sha[..2]).join(sha)
}

/// Stores `bytes` (atomically; a no-op when already stored); returns its SHA-256.
pub fn store(data_dir: &Path, db: &Db, bytes: &[u8], now: &str) -> Result<String> {
    let sha = sha256_hex(bytes);
    if db.is_postgres() {
        db.write(|tx| store::put_blob(tx, &sha, bytes, now))?;
    }
    write_file(data_dir, &sha, bytes)?;
    Ok(sha)
}

/// The path of an original on this node: the stored file, or on PostgreSQL the `blobs` row written
/// to this node's cache first. `None` when it is missing.
pub fn local(data_dir: &Path, db: &Db, sha: &str) -> Result<Option<PathBuf>> {
    if !is_sha256(sha) {
        return Ok(None);
    }
    let p = path(data_dir, sha);
    if p.is_file() {
        return Ok(Some(p));
    }
    if !db.is_postgres() {
        return Ok(None);
    }
    let Some(bytes) = db.read(|c| store::blob_bytes(c, sha))? else { return Ok(None) };
    if sha256_hex(&bytes) != sha {
        return Err(Error::internal_msg("a stored original does not match its SHA-256"));
    }
    write_file(data_dir, sha, &bytes)?;
    Ok(Some(p))
}

fn write_file(data_dir: &Path, sha: &str, bytes: &[u8]) -> Result<()> {
    let p = path(data_dir, sha);
    if p.is_file() {
        return Ok(());
    }
    let dir = p.parent().ok_or_else(|| Error::internal_msg("blob path has no parent"))?;
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!("{sha}.{}.tmp", crate::ids::new_id()));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, &p)?;
    Ok(())
}

/// Removes an original no document refers to any more; while a backup copies originals it is
/// kept (a backup's database copy may still name it), and the next start removes it. On
/// PostgreSQL the `blobs` row goes unless a document names it again meanwhile; other nodes'
/// cached copies go at their next start.
pub fn remove(data_dir: &Path, db: &Db, sha: &str) {
    if db.is_postgres()
        && let Err(e) = db.write(|tx| store::delete_blob_if_unused(tx, sha))
    {
        tracing::warn!(error = %e, "could not remove an unused original from the database");
    }
    let Some(_guard) = crate::ops::lock::removal(data_dir) else {
        tracing::info!("a backup is running: an unused original is kept until the next start");
        return;
    };
    let p = path(data_dir, sha);
    if let Err(e) = std::fs::remove_file(&p)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(error = %e, "could not remove an unused blob");
    }
}

/// Every file under `<data-dir>/blobs`: (path, the SHA-256 its name claims when it is a stored
/// original, else `None` for anything else, such as a write cut off by a crash).
pub fn files(data_dir: &Path) -> Result<Vec<(PathBuf, Option<String>)>> {
    let root = data_dir.join("blobs");
    let mut out = Vec::new();
    let Ok(prefixes) = std::fs::read_dir(&root) else { return Ok(out) };
    for prefix in prefixes {
        let prefix = prefix?.path();
        if !prefix.is_dir() {
            out.push((prefix, None));
            continue;
        }
        let parent = prefix.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        for f in std::fs::read_dir(&prefix)? {
            let f = f?.path();
            let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            let sha = (is_sha256(name) && name.starts_with(&parent) && f.is_file()).then(|| name.to_string());
            out.push((f, sha));
        }
    }
    Ok(out)
}

/// 64 lowercase hex digits.
pub fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Removes files under `blobs/` that no document refers to (kept by a backup, or left by a crash);
/// at start, holding the data directory, and not while a backup runs. Returns how many.
pub fn sweep_unused(data_dir: &Path, referenced: &std::collections::HashSet<String>) -> Result<usize> {
    let Some(_guard) = crate::ops::lock::removal(data_dir) else { return Ok(0) };
    let mut n = 0;
    for (p, sha) in files(data_dir)? {
        if sha.as_ref().is_some_and(|s| referenced.contains(s)) || p.is_dir() {
            continue;
        }
        std::fs::remove_file(&p)?;
        n += 1;
    }
    Ok(n)
}
