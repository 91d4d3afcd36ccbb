//! Making a backup of a data directory while the server runs and takes writes: the backup lock
//! first (no original it may need is removed from then on), then a consistent copy of the
//! database, then the originals that copy refers to, the public chat key and the manifest, into one
//! archive (`archive`). The search indexes are left out: they are rebuilt from the database.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::archive::{self, ArchiveWriter, Manifest};
use crate::documents::blobs;
use crate::error::{Error, Result};
use crate::storage::{migrations, snapshot};

/// Where the pre-migration snapshots are kept, and how many.
pub const SNAPSHOTS_DIR: &str = "snapshots";
pub const SNAPSHOTS_KEPT: usize = 3;

/// Writes the backup of `data_dir` to `out`; returns the manifest and the output.
pub fn write<W: Write>(data_dir: &Path, out: W) -> Result<(Manifest, W)> {
    let db_path = data_dir.join("steward.db");
    if !db_path.is_file() {
        return Err(Error::invalid(format!("{} has no database to back up", data_dir.display())));
    }
    let _hold = super::lock::backup(data_dir)?;
    let work = tempfile::Builder::new()
        .prefix(".backup-")
        .tempdir_in(data_dir)
        .map_err(|e| Error::internal_msg(format!("cannot make a work directory in {}: {e}", data_dir.display())))?;
    let copy = work.path().join(archive::DATABASE);
    snapshot::copy_into(&db_path, &copy)?;
    let (schema_version, tables, shas) = {
        let c = snapshot::open_read_only(&copy)?;
        let st = migrations::status(&c)?;
        let shas: BTreeSet<String> = crate::documents::blob_references(&crate::storage::Conn::sqlite(&c))?
            .into_iter()
            .map(|(_, sha)| sha)
            .collect();
        (migrations::schema_version(&st), snapshot::table_counts(&c)?, shas)
    };
    let mut w = ArchiveWriter::new(out)?;
    w.add_file(archive::DATABASE, &copy)?;
    let _ = work.close();
    let mut missing = Vec::new();
    for sha in shas {
        if !blobs::is_sha256(&sha) {
            missing.push(sha);
            continue;
        }
        let p = blobs::path(data_dir, &sha);
        if p.is_file() {
            w.add_file(&archive::blob_name(&sha), &p)?;
        } else {
            missing.push(sha);
        }
    }
    if !missing.is_empty() {
        tracing::warn!(missing = missing.len(), "documents refer to originals the data directory lacks");
    }
    let key = data_dir.join(archive::SESSION_KEY);
    if key.is_file() {
        w.add_file(archive::SESSION_KEY, &key)?;
    }
    let manifest = Manifest {
        format_version: archive::FORMAT_VERSION,
        steward_version: env!("CARGO_PKG_VERSION").to_string(),
        schema_version,
        created_at: crate::clock::rfc3339(chrono::Utc::now()),
        tables,
        members: Vec::new(),
        missing_blobs: missing,
    };
    w.finish(manifest)
}

/// Removes the work directories of backups a crash cut off (`<data-dir>/.backup-*`); at start,
/// holding the data directory, and not while a backup runs. Returns how many.
pub fn sweep_leftovers(data_dir: &Path) -> usize {
    let Some(_guard) = super::lock::removal(data_dir) else { return 0 };
    let Ok(entries) = std::fs::read_dir(data_dir) else { return 0 };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".backup-"))
        .filter(|e| std::fs::remove_dir_all(e.path()).is_ok())
        .count()
}

/// Writes the backup of `data_dir` to the file `out` (through a temporary file beside it, renamed
/// when complete: a failed backup leaves no partial archive under that name).
pub fn write_file(data_dir: &Path, out: &Path) -> Result<Manifest> {
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp = tempfile::Builder::new()
        .prefix(".steward-backup-")
        .tempfile_in(parent)
        .map_err(|e| Error::internal_msg(format!("cannot write in {}: {e}", parent.display())))?;
    let (manifest, file) = write(data_dir, std::io::BufWriter::with_capacity(1 << 20, tmp))?;
    let tmp = file.into_inner().map_err(|e| Error::internal_msg(format!("cannot write the archive: {e}")))?;
    tmp.as_file().sync_all().map_err(|e| Error::internal_msg(format!("cannot write the archive: {e}")))?;
    tmp.persist(out).map_err(|e| Error::internal_msg(format!("cannot write {}: {e}", out.display())))?;
    Ok(manifest)
}

/// Before the first migration of a start: a backup of the data directory as it is, in
/// `<data-dir>/snapshots/`, keeping the newest [`SNAPSHOTS_KEPT`]. Returns its path.
pub fn snapshot_before_migrating(data_dir: &Path, from: u32, to: u32) -> Result<PathBuf> {
    let dir = data_dir.join(SNAPSHOTS_DIR);
    std::fs::create_dir_all(&dir).map_err(|e| Error::internal_msg(format!("cannot create {}: {e}", dir.display())))?;
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
    let path = dir.join(format!("pre-migration-{stamp}-v{from}-to-v{to}.tar.zst"));
    write_file(data_dir, &path)?;
    let mut kept: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| Error::internal_msg(format!("cannot read {}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("pre-migration-") && n.ends_with(".tar.zst"))
        })
        .collect();
    // the names sort by time
    kept.sort();
    let surplus = kept.len().saturating_sub(SNAPSHOTS_KEPT);
    for old in &kept[..surplus] {
        if let Err(e) = std::fs::remove_file(old) {
            tracing::warn!(error = %e, "could not remove an old pre-migration snapshot");
        }
    }
    Ok(path)
}
