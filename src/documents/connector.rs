//! What content connectors ask of documents: their source (kind `connector`, one per connector of
//! a workspace, found by its external id) and items upserted by external id inside the
//! connector's own transaction — an item whose title, metadata and content hash are unchanged
//! writes nothing, so nothing is re-embedded.

use serde_json::{Value, json};

use super::service::{CleanDoc, DocWrite, NewDocument, insert_inline, update_inline};
use super::{Source, store};
use crate::app::App;
use crate::audit::Actor;
use crate::error::{Error, Result};
use crate::ids::{WorkspaceId, new_id};
use crate::storage::Tx;

pub const CONNECTOR_SOURCE: &str = "connector";

/// The source of a connector: found by `external_id` (the connector id), its name and config
/// replaced; created when missing.
pub fn connector_source(
    tx: &Tx,
    ws: &WorkspaceId,
    external_id: &str,
    name: &str,
    config: &Value,
    now: &str,
) -> Result<Source> {
    if let Some(s) = store::source_by_external_id(tx, ws, CONNECTOR_SOURCE, external_id)? {
        store::set_source_config(tx, &s.id, config, now)?;
        return store::source(tx, ws, &s.id)?.ok_or_else(|| Error::not_found("source"));
    }
    let s = Source {
        id: new_id(),
        workspace_id: ws.clone(),
        kind: CONNECTOR_SOURCE.to_string(),
        name: name.to_string(),
        external_id: Some(external_id.to_string()),
        builtin: false,
        config: config.clone(),
        metadata: json!({"provider": external_id}),
        enrichment_override: "inherit".into(),
        created_at: now.to_string(),
        updated_at: now.to_string(),
        document_count: 0,
    };
    store::insert_source(tx, &s)?;
    Ok(s)
}

/// Whether the source still exists (an operator may delete it).
pub fn source_exists(tx: &Tx, ws: &WorkspaceId, id: &str) -> Result<bool> {
    Ok(store::source(tx, ws, id)?.is_some())
}

/// What an upsert did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upserted {
    Created(String),
    Updated(String),
    /// The document already held exactly this: nothing written.
    Unchanged(String),
}

impl Upserted {
    pub fn id(&self) -> &str {
        match self {
            Upserted::Created(id) | Upserted::Updated(id) | Upserted::Unchanged(id) => id,
        }
    }
}

/// Writes `item` (which must carry its external id) as a document of `source_id`: new, a new
/// revision queued for processing, or nothing when unchanged.
pub fn upsert(
    tx: &Tx,
    app: &App,
    actor: &Actor,
    ws: &WorkspaceId,
    source_id: &str,
    item: NewDocument,
    now: &str,
) -> Result<Upserted> {
    let d = CleanDoc::of(item)?;
    let w = DocWrite { app, actor, ws, now, account: None };
    let external = d.external.clone().ok_or_else(|| Error::internal_msg("a connector item needs its external id"))?;
    if let Some(existing) = store::by_external_id(tx, ws, source_id, &external)? {
        if d.same_as(&existing) {
            return Ok(Upserted::Unchanged(existing.id));
        }
        update_inline(tx, &w, &existing, &d)?;
        return Ok(Upserted::Updated(existing.id));
    }
    Ok(Upserted::Created(insert_inline(tx, &w, source_id, &d)?))
}

/// Deletes an item's document (gone upstream); one already gone is not an error. Call
/// `SearchIndex::sync` after the commit so it leaves search at once.
pub fn remove(tx: &Tx, ws: &WorkspaceId, document_id: &str) -> Result<bool> {
    super::website::remove_page(tx, ws, document_id)
}
