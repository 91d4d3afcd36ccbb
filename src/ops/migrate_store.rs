//! `steward migrate-store --from DATA_DIR --to postgres://…`: moves a single-node install into
//! PostgreSQL, for a team that outgrows one VM. The server must be stopped (no write may land
//! after the copy is taken). The database is copied as a consistent snapshot, brought to this
//! binary's schema version, and handed with the stored originals to `storage::postgres::copy`,
//! which refuses a target that holds any row and verifies counts and checksums per table before
//! its one commit. The search indexes are not copied: each node builds its own from the database.

use std::path::Path;

use crate::documents::blobs;
use crate::error::{Error, Result};
use crate::storage::postgres::{self, copy};
use crate::storage::{migrations, snapshot};

/// What a migration moved, and what the operator must carry over by hand.
#[derive(Debug)]
pub struct Moved {
    pub copied: copy::Copied,
    /// Originals documents name that the data directory lacked (already lost before the move).
    pub missing_originals: Vec<String>,
    /// The data directory signs public chat sessions with its own key file: every node needs it.
    pub has_session_key: bool,
}

/// Copies the install at `from` into the database at `to`; `progress` hears each step.
pub fn run(from: &Path, to: &str, nul: copy::Nul, progress: &mut dyn FnMut(&str)) -> Result<Moved> {
    if !from.is_dir() {
        return Err(Error::invalid(format!("{} does not exist or is not a directory", from.display())));
    }
    let db_path = from.join("steward.db");
    if !db_path.is_file() {
        return Err(Error::invalid(format!("{} has no Steward database (steward.db) to move", from.display())));
    }
    let _server = super::lock::server_stopped(from, "moving its data")?;
    let _hold = super::lock::backup(from)?;
    let status = snapshot::peek_status(&db_path).map_err(|e| {
        let why = e.source.as_ref().map_or_else(|| e.message.clone(), |s| s.to_string());
        Error::invalid(format!("cannot read {}: {why}", db_path.display()))
    })?;
    match status {
        Some(st) if !st.unknown.is_empty() => return Err(Error::invalid(migrations::newer_message(&st))),
        Some(st) if !st.applied.is_empty() => {}
        _ => {
            return Err(Error::invalid(format!(
                "{} is not a Steward database (no migration is recorded in it); nothing was copied",
                db_path.display()
            )));
        }
    }
    let mut pg = postgres::connect(to)?;
    // before anything is created there: empty, or Steward's schema without rows
    copy::check_target(&mut pg)?;
    let applied = postgres::migrate(&mut pg)?;
    if !applied.is_empty() {
        progress(&format!("created the PostgreSQL schema (version {})", postgres::latest()));
    }

    let work = tempfile::Builder::new()
        .prefix(".migrate-store-")
        .tempdir_in(from)
        .map_err(|e| Error::internal_msg(format!("cannot make a work directory in {}: {e}", from.display())))?;
    let copy_path = work.path().join("steward.db");
    snapshot::copy_into(&db_path, &copy_path)?;
    let (src, brought) = snapshot::open_copy_migrated(&copy_path)?;
    let broken = snapshot::foreign_key_problems(&src)?;
    if broken > 0 {
        return Err(Error::invalid(format!(
            "the database has {broken} rows that break a foreign key (steward verify says more); nothing was copied"
        )));
    }
    if !brought.is_empty() {
        progress(&format!("brought the copy to schema version {}", migrations::latest()));
    }

    let mut shas: Vec<String> = crate::documents::blob_references(&crate::storage::Conn::sqlite(&src))?
        .into_iter()
        .map(|(_, sha)| sha)
        .collect();
    shas.dedup();
    let (present, missing): (Vec<String>, Vec<String>) =
        shas.into_iter().partition(|sha| blobs::is_sha256(sha) && blobs::path(from, sha).is_file());
    let mut originals = present.into_iter().map(|sha| {
        let path = blobs::path(from, &sha);
        let bytes =
            std::fs::read(&path).map_err(|e| Error::internal_msg(format!("cannot read {}: {e}", path.display())))?;
        if blobs::sha256_hex(&bytes) != sha {
            return Err(Error::invalid(format!(
                "the stored original {} is damaged (its content no longer has the SHA-256 its name says); nothing was committed. `steward verify` lists the documents it belongs to; restore it from a backup, or delete those documents, then run this again",
                path.display()
            )));
        }
        Ok((sha, bytes))
    });
    let copied = copy::copy(&src, &mut pg, nul, &mut originals, progress)?;
    drop(src);
    let _ = work.close();
    Ok(Moved { copied, missing_originals: missing, has_session_key: from.join(super::archive::SESSION_KEY).is_file() })
}
