//! Restoring an archive into a data directory. Nothing is written into the target until the
//! archive has been read whole into a work directory beside it and checked: every member named in
//! the manifest with its size and SHA-256 and nothing else, every original matching its name, a
//! schema this binary knows, `PRAGMA integrity_check`, and the row count of every table. Only then
//! are the files moved in (a non-empty target only with `force`, and never one a server holds).
//! The search indexes are not in the archive: the server rebuilds them at its next start, and the
//! restored database gets new index generations so no index file from before can pass for current.

use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use super::archive::{self, Kind, Manifest};
use crate::error::{Error, Result};
use crate::storage::{Db, migrations, snapshot};

/// What a restore put in place.
#[derive(Debug)]
pub struct Restored {
    pub manifest: Manifest,
    pub blobs: usize,
}

fn refuse(msg: impl Into<String>) -> Error {
    Error::invalid(msg.into())
}

/// What a data directory holds that a restore replaces.
const REPLACED: [&str; 6] = ["steward.db", "steward.db-wal", "steward.db-shm", "blobs", "index", archive::SESSION_KEY];

/// Restores the archive at `file` into `target`.
pub fn restore(file: &Path, target: &Path, force: bool) -> Result<Restored> {
    let input = std::fs::File::open(file).map_err(|e| refuse(format!("cannot read {}: {e}", file.display())))?;
    // a directory holding nothing but a lock file counts as empty
    let non_empty = std::fs::read_dir(target)
        .map(|d| d.filter_map(|e| e.ok()).any(|e| e.file_name() != "steward.lock"))
        .unwrap_or(false);
    if non_empty && !force {
        return Err(refuse(format!(
            "{} is not empty; restore into a new directory, or pass --force to replace its database, originals and indexes",
            target.display()
        )));
    }
    // a target a server holds is never touched
    let _lock = if non_empty { Some(lock_target(target)?) } else { None };
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| refuse(format!("cannot create {}: {e}", parent.display())))?;
    let work = tempfile::Builder::new()
        .prefix(".steward-restore-")
        .tempdir_in(&parent)
        .map_err(|e| refuse(format!("cannot make a work directory in {}: {e}", parent.display())))?;
    let (manifest, found) = unpack(input, work.path())?;
    check(&manifest, &found, work.path())?;
    // new index generations: index files from before this restore are never taken as current
    {
        let db = Db::open_without_migrating(&work.path().join(archive::DATABASE), 1)?;
        crate::search::forget_indexes(&db)?;
        db.checkpoint()?;
    }
    std::fs::create_dir_all(target).map_err(|e| refuse(format!("cannot create {}: {e}", target.display())))?;
    for name in REPLACED {
        let p = target.join(name);
        let gone = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
        if let Err(e) = gone
            && e.kind() != std::io::ErrorKind::NotFound
        {
            return Err(Error::internal_msg(format!("cannot remove {}: {e}", p.display())));
        }
    }
    for name in [archive::DATABASE, "steward.db-wal", "steward.db-shm", "blobs", archive::SESSION_KEY] {
        let from = work.path().join(name);
        if from.exists() {
            std::fs::rename(&from, target.join(name))
                .map_err(|e| Error::internal_msg(format!("cannot move {name} into {}: {e}", target.display())))?;
        }
    }
    let blobs = found.keys().filter(|n| matches!(archive::classify(n), Some(Kind::Blob(_)))).count();
    Ok(Restored { manifest, blobs })
}

fn lock_target(target: &Path) -> Result<std::fs::File> {
    let path = target.join("steward.lock");
    let f = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| refuse(format!("cannot open {}: {e}", path.display())))?;
    f.try_lock().map_err(|_| {
        refuse(format!("a steward server is using {}; stop it before restoring into it", target.display()))
    })?;
    Ok(f)
}

/// The size and SHA-256 of each member read, by name.
type Found = BTreeMap<String, (u64, String)>;

/// Reads every member into `work` (the manifest into memory); returns the manifest and what was
/// found of every other member.
fn unpack(input: impl Read, work: &Path) -> Result<(Manifest, Found)> {
    let damaged = |e: std::io::Error| refuse(format!("the archive is damaged or incomplete: {e}"));
    let mut ar = archive::reader(std::io::BufReader::with_capacity(1 << 20, input))?;
    let mut found = BTreeMap::new();
    let mut manifest: Option<Manifest> = None;
    for entry in ar.entries().map_err(damaged)? {
        let mut entry = entry.map_err(damaged)?;
        let name = entry.path().map_err(damaged)?.to_string_lossy().into_owned();
        if entry.header().entry_type() != tar::EntryType::Regular {
            return Err(refuse(format!("the archive has {name:?}, which is not a plain file")));
        }
        let kind =
            archive::classify(&name).ok_or_else(|| refuse(format!("the archive has an unknown member {name:?}")))?;
        if found.contains_key(&name) || (kind == Kind::Manifest && manifest.is_some()) {
            return Err(refuse(format!("the archive has {name:?} twice")));
        }
        if kind == Kind::Manifest {
            let mut text = String::new();
            (&mut entry).take(16 << 20).read_to_string(&mut text).map_err(damaged)?;
            let m = serde_json::from_str::<serde_json::Value>(&text)
                .map_err(|e| refuse(format!("the manifest is not JSON: {e}")))?;
            let version = m.get("format_version").and_then(|v| v.as_u64()).unwrap_or(0);
            if version != u64::from(archive::FORMAT_VERSION) {
                return Err(refuse(format!(
                    "the archive is in format {version}; this steward reads format {}",
                    archive::FORMAT_VERSION
                )));
            }
            manifest = Some(serde_json::from_value(m).map_err(|e| refuse(format!("the manifest is malformed: {e}")))?);
            continue;
        }
        let dest = work.join(&name);
        if let Some(dir) = dest.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::internal_msg(format!("cannot write the work copy: {e}")))?;
        }
        let mut out = std::fs::File::create(&dest)
            .map_err(|e| Error::internal_msg(format!("cannot write the work copy: {e}")))?;
        let mut reader = archive::Hashing::new(&mut entry);
        std::io::copy(&mut reader, &mut out).map_err(damaged)?;
        found.insert(name, (reader.bytes, reader.hex()));
    }
    let manifest = manifest.ok_or_else(|| refuse("the archive has no manifest (it is incomplete)"))?;
    Ok((manifest, found))
}

/// Checks the unpacked members against the manifest and the database copy against itself.
fn check(m: &Manifest, found: &Found, work: &Path) -> Result<()> {
    let listed: HashSet<&str> = m.members.iter().map(|x| x.path.as_str()).collect();
    if listed.len() != m.members.len() {
        return Err(refuse("the manifest lists a member twice"));
    }
    for member in &m.members {
        match found.get(&member.path) {
            None => return Err(refuse(format!("{} is in the manifest but not in the archive", member.path))),
            Some((bytes, sha)) if *bytes != member.bytes || *sha != member.sha256 => {
                return Err(refuse(format!(
                    "{} does not match the manifest (the archive was changed or damaged)",
                    member.path
                )));
            }
            Some(_) => {}
        }
        if let Some(Kind::Blob(name_sha)) = archive::classify(&member.path)
            && name_sha != member.sha256
        {
            return Err(refuse(format!("{} does not hold the original its name says", member.path)));
        }
    }
    if let Some(extra) = found.keys().find(|n| !listed.contains(n.as_str())) {
        return Err(refuse(format!("{extra} is in the archive but not in the manifest")));
    }
    if !found.contains_key(archive::DATABASE) {
        return Err(refuse("the archive has no database"));
    }
    let c = snapshot::open_read_only(&work.join(archive::DATABASE))?;
    let st = migrations::status(&c)?;
    if !st.unknown.is_empty() || m.schema_version > migrations::latest() {
        return Err(refuse(format!(
            "the backup was made by a newer Steward (schema version {}, this steward knows up to {})",
            m.schema_version,
            migrations::latest()
        )));
    }
    if migrations::schema_version(&st) != m.schema_version {
        return Err(refuse("the database's schema version differs from the manifest's"));
    }
    let problems = snapshot::integrity_problems(&c)?;
    if !problems.is_empty() {
        return Err(refuse(format!("the database fails its integrity check: {}", problems.join("; "))));
    }
    if snapshot::table_counts(&c)? != m.tables {
        return Err(refuse("the database's row counts differ from the manifest's"));
    }
    Ok(())
}
