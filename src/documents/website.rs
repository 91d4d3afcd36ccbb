//! What the website crawler asks of documents: its website sources (one per site, found by the
//! canonical start URL) and crawled pages written as documents upserted by their canonical URL,
//! inside the crawler's own transaction so a page's document and its checkpoint commit together.

use serde_json::{Value, json};

use super::service::{CleanDoc, DocWrite, NewDocument, delete_in_tx, insert_inline, update_inline};
use super::{Source, store};
use crate::app::App;
use crate::audit::Actor;
use crate::error::{Error, Result};
use crate::ids::{WorkspaceId, new_id};
use crate::storage::{Conn, Tx};

pub const WEBSITE_SOURCE: &str = "website";

/// A website source to find or create.
pub struct WebsiteSource<'a> {
    /// The canonical start URL: one source per site and start page.
    pub external_id: &'a str,
    pub name: &'a str,
    pub config: Value,
    pub requested_url: &'a str,
}

/// The website source with this start URL, its config replaced; created when missing.
pub fn website_source(tx: &Tx, ws: &WorkspaceId, w: WebsiteSource, now: &str) -> Result<Source> {
    if let Some(s) = store::source_by_external_id(tx, ws, WEBSITE_SOURCE, w.external_id)? {
        store::set_source_config(tx, &s.id, &w.config, now)?;
        return store::source(tx, ws, &s.id)?.ok_or_else(|| Error::not_found("source"));
    }
    let s = Source {
        id: new_id(),
        workspace_id: ws.clone(),
        kind: WEBSITE_SOURCE.to_string(),
        name: w.name.to_string(),
        external_id: Some(w.external_id.to_string()),
        builtin: false,
        config: w.config,
        metadata: json!({"requestedUrl": w.requested_url, "provider": WEBSITE_SOURCE}),
        enrichment_override: "inherit".into(),
        created_at: now.to_string(),
        updated_at: now.to_string(),
        document_count: 0,
    };
    store::insert_source(tx, &s)?;
    Ok(s)
}

pub fn source(c: &Conn, ws: &WorkspaceId, id: &str) -> Result<Option<Source>> {
    store::source(c, ws, id)
}

pub fn set_config(tx: &Tx, id: &str, config: &Value, now: &str) -> Result<()> {
    store::set_source_config(tx, id, config, now)
}

/// Writes a crawled page as the document of `source_id` whose external id is the page's
/// canonical URL: a new document, or a new revision of the existing one (queued for processing
/// either way). The caller has already decided the page changed. Returns the document id.
pub fn write_page(
    tx: &Tx,
    app: &App,
    actor: &Actor,
    ws: &WorkspaceId,
    source_id: &str,
    page: NewDocument,
    now: &str,
) -> Result<String> {
    let d = CleanDoc::of(page)?;
    let w = DocWrite { app, actor, ws, now, account: None };
    let external = d.external.clone().ok_or_else(|| Error::internal_msg("a page needs its URL"))?;
    if let Some(existing) = store::by_external_id(tx, ws, source_id, &external)? {
        update_inline(tx, &w, &existing, &d)?;
        return Ok(existing.id);
    }
    insert_inline(tx, &w, source_id, &d)
}

/// Deletes a page's document (gone from the site, or no longer indexable); a document already
/// gone is not an error.
pub fn remove_page(tx: &Tx, ws: &WorkspaceId, document_id: &str) -> Result<bool> {
    match store::document(tx, ws, document_id)? {
        Some(d) => {
            delete_in_tx(tx, &d)?;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Whether the document is still there (someone may have deleted a crawled page's document).
pub fn document_exists(c: &Conn, ws: &WorkspaceId, id: &str) -> Result<bool> {
    Ok(store::document(c, ws, id)?.is_some())
}
