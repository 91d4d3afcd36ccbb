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
    let db_path = from.join("steward.db");
    if !db_path.is_file() {
        return Err(Error::invalid(format!("{} has no Steward database (steward.db) to move", from.display())));
    }
    let _server = super::lock::server_stopped(from, "moving its data")?;
    let _hold = super::lock::backup(from)?;
    if let Some(st) = snapshot::peek_status(&db_path)?
        && !st.unknown.is_empty()
    {
        return Err(Error::invalid(migrations::newer_message(&st)));
    }
    let mut pg = postgres::connect(to)?;
    let applied = postgres::migrate(&mut pg)?;
    if !applied.is_empty() {
        progress(&format!("created the PostgreSQL schema (version {})", postgres::latest()));
    }
    copy::check_empty(&mut pg)?;

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
        std::fs::read(&path)
            .map(|bytes| (sha, bytes))
            .map_err(|e| Error::internal_msg(format!("cannot read {}: {e}", path.display())))
    });
    let copied = copy::copy(&src, &mut pg, nul, &mut originals, progress)?;
    drop(src);
    let _ = work.close();
    Ok(Moved { copied, missing_originals: missing, has_session_key: from.join(super::archive::SESSION_KEY).is_file() })
}
