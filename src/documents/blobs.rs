//! Uploaded originals, content-addressed under `<data-dir>/blobs/<2 hex>/<sha256>`, kept for
//! reprocessing and removed when no document refers to them.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

pub fn path(data_dir: &Path, sha: &str) -> PathBuf {
    data_dir.join("blobs").join(&sha[..2]).join(sha)
}

/// Stores `bytes` (atomically; a no-op when already stored); returns its SHA-256.
pub fn store(data_dir: &Path, bytes: &[u8]) -> Result<String> {
    let sha = sha256_hex(bytes);
    let p = path(data_dir, &sha);
    if p.is_file() {
        return Ok(sha);
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
    Ok(sha)
}

pub fn remove(data_dir: &Path, sha: &str) {
    let p = path(data_dir, sha);
    if let Err(e) = std::fs::remove_file(&p)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(error = %e, "could not remove an unused blob");
    }
}
