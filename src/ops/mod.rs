//! Operations on a data directory as a whole: backups taken while the server runs (`backup`,
//! into the archive format of `archive`), restores that check everything before they write
//! (`restore`), `steward verify` (`verify`), the pre-migration snapshots, and the refusal of a data
//! directory a newer Steward wrote, and `steward migrate-store` into PostgreSQL (`migrate_store`).
//! The backup lock (`lock`) keeps the originals a running backup needs from being removed.

pub mod archive;
pub mod backup;
pub mod lock;
pub mod migrate_store;
pub mod restore;
pub mod verify;

use std::path::Path;

use crate::app::App;
use crate::auth::{Principal, Via};
use crate::error::{Error, Result};
use crate::storage::{migrations, snapshot};

/// The exit status of a command refused because a newer Steward wrote the data directory
/// (sysexits' `EX_DATAERR`), so a service manager can tell it from a crash.
pub const EXIT_NEWER_DATA_DIR: u8 = 65;

/// The refusal message when the database at `db_path` was written by a newer Steward, read
/// without changing the file.
pub fn written_by_newer(db_path: &Path) -> Result<Option<String>> {
    Ok(snapshot::peek_status(db_path)?.filter(|st| !st.unknown.is_empty()).map(|st| migrations::newer_message(&st)))
}

/// Before a backup is streamed over HTTP: the caller may (see [`authorize_backup`]), and the
/// download is in the audit log (`organization.backup_downloaded`).
pub fn begin_download(app: &App, p: &Principal, actor: &crate::audit::Actor) -> Result<()> {
    authorize_backup(app, p)?;
    let now = crate::clock::rfc3339(app.clock.now());
    app.db.write(|tx| {
        crate::audit::record(tx, &now, actor, crate::audit::Event::new("organization.backup_downloaded").org(&p.org_id))
    })
}

/// Who may download a backup over HTTP: a person (signed in, or with their personal token) who
/// owns the server's organization (the first one). A backup holds every organization's data, so
/// the owner of an organization created later may not, nor may any service credential.
pub fn authorize_backup(app: &App, p: &Principal) -> Result<()> {
    let person = matches!(p.via, Via::Session | Via::PersonalToken) && p.user_id.is_some();
    let owner = p.role == Some(crate::auth::Role::Owner);
    let first = crate::auth::accounts::server_organization(app)?.is_some_and(|o| o.id == p.org_id);
    if person && owner && first {
        Ok(())
    } else {
        Err(Error::forbidden("only the owner of the server's organization can download a backup"))
    }
}
