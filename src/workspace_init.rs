//! What a new workspace starts with. Called inside the transaction that creates the workspace, so
//! a workspace never exists half set up.

use crate::auth::Workspace;
use crate::error::Result;
use crate::storage::Tx;

/// Every workspace starts with its default agent (published as v1).
pub fn initialize(tx: &Tx, now: &str, ws: &Workspace) -> Result<()> {
    crate::agents::ensure_default(tx, &ws.id, now)?;
    Ok(())
}
