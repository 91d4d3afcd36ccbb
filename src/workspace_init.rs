//! What a new workspace starts with. Called inside the transaction that creates the workspace, so
//! a workspace never exists half set up.

use crate::auth::Workspace;
use crate::error::Result;
use crate::storage::Tx;

pub fn initialize(_tx: &Tx, _now: &str, _ws: &Workspace) -> Result<()> {
    Ok(())
}
