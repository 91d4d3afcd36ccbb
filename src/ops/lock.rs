//! `<data-dir>/backup.lock`: a backup holds it shared while it runs (from before its database copy
//! until its last original is archived), and the removal of an unused original takes it exclusive
//! without waiting: while a backup runs, nothing it may still need disappears. It is a file lock,
//! so it holds between the server and a `steward backup` run as another process. `server_stopped`
//! takes the server's own lock, for commands that must not run beside it.

use std::fs::File;
use std::path::Path;

use crate::error::{Error, Result};

fn open(data_dir: &Path) -> std::io::Result<File> {
    File::options().create(true).truncate(false).write(true).open(data_dir.join("backup.lock"))
}

/// Held by a running backup (released on drop).
pub struct BackupHold {
    _file: File,
}

/// Marks a backup as running (waits for a removal in progress, which is brief).
pub fn backup(data_dir: &Path) -> Result<BackupHold> {
    let f = open(data_dir).map_err(|e| Error::internal_msg(format!("cannot open the backup lock: {e}")))?;
    f.lock_shared().map_err(|e| Error::internal_msg(format!("cannot take the backup lock: {e}")))?;
    Ok(BackupHold { _file: f })
}

/// The data directory's server lock (`steward.lock`), taken without waiting: `None` while a
/// server (or a command that needs the directory to itself) holds it.
pub fn try_server(data_dir: &Path) -> Result<Option<File>> {
    let path = data_dir.join("steward.lock");
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::internal_msg(format!("cannot open {}: {e}", path.display())))?;
    match f.try_lock() {
        Ok(()) => Ok(Some(f)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(Error::internal_msg(format!("cannot lock {}: {e}", path.display())))
        }
    }
}

/// [`try_server`] for commands that must run with the server stopped; `doing` completes "stop it
/// before …" in the refusal.
pub fn server_stopped(data_dir: &Path, doing: &str) -> Result<File> {
    try_server(data_dir)?.ok_or_else(|| {
        Error::invalid(format!(
            "a steward server (or another command that needs the directory to itself) is using {}; stop it before {doing}",
            data_dir.display()
        ))
    })
}

/// Permission to remove files a backup may read: `None` while a backup runs.
pub fn removal(data_dir: &Path) -> Option<File> {
    let f = open(data_dir).ok()?;
    f.try_lock().ok()?;
    Some(f)
}

#[cfg(test)]
mod tests {
    #[test]
    fn removals_wait_for_no_backup() {
        let dir = tempfile::tempdir().unwrap();
        let first = super::removal(dir.path());
        assert!(first.is_some());
        drop(first);
        let hold = super::backup(dir.path()).unwrap();
        let second = super::backup(dir.path()).unwrap();
        assert!(super::removal(dir.path()).is_none(), "a backup runs");
        drop(hold);
        assert!(super::removal(dir.path()).is_none(), "another still runs");
        drop(second);
        assert!(super::removal(dir.path()).is_some());
    }
}
