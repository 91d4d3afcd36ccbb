//! Sources: where documents come from. Every workspace gets an `api` source (documents created
//! through the API) and an `upload` source (imported files) on first use; website crawls and
//! connectors add their own sources with their config.

use serde_json::json;

use super::service::{DocumentPage, ReprocessOutcome, decode_cursor, delete_in_tx, reprocess_scope};
use super::{API_SOURCE, Source, SourceView, UPLOAD_SOURCE, blobs, store};
use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, Result};
use crate::ids::{WorkspaceId, new_id};
use crate::storage::Tx;

/// The id of the workspace's built-in source of `kind` (`api` or `upload`), created when missing.
pub fn ensure_builtin_source(tx: &Tx, ws: &WorkspaceId, kind: &str, now: &str) -> Result<String> {
    if let Some(id) = store::builtin_source_id(tx, ws, kind)? {
        return Ok(id);
    }
    let name = match kind {
        API_SOURCE => "Added through the API",
        UPLOAD_SOURCE => "Uploaded files",
        _ => "Documents",
    };
    let s = Source {
        id: new_id(),
        workspace_id: ws.clone(),
        kind: kind.to_string(),
        name: name.to_string(),
        external_id: None,
        builtin: true,
        config: json!({}),
        metadata: json!({}),
        enrichment_override: "inherit".into(),
        created_at: now.to_string(),
        updated_at: now.to_string(),
        document_count: 0,
    };
    store::insert_source(tx, &s)?;
    Ok(s.id)
}

pub fn list_sources(app: &App, p: &Principal) -> Result<Vec<SourceView>> {
    p.require(Perm::DocumentsRead)?;
    Ok(app.db.read(|c| store::sources(c, &p.workspace_id))?.iter().map(SourceView::from).collect())
}

pub fn get_source(app: &App, p: &Principal, id: &str) -> Result<SourceView> {
    p.require(Perm::DocumentsRead)?;
    Ok(SourceView::from(&load_source(app, &p.workspace_id, id)?))
}

fn load_source(app: &App, ws: &WorkspaceId, id: &str) -> Result<Source> {
    app.db.read(|c| store::source(c, ws, id))?.ok_or_else(|| Error::not_found("source"))
}

pub fn source_documents(
    app: &App,
    p: &Principal,
    id: &str,
    cursor: Option<String>,
    limit: usize,
) -> Result<DocumentPage> {
    p.require(Perm::DocumentsRead)?;
    load_source(app, &p.workspace_id, id)?;
    let before = cursor.as_deref().map(decode_cursor).transpose()?;
    super::service::list(
        app,
        p,
        store::ListFilter { source_id: Some(id.to_string()), status: None, title: None, before, limit },
    )
}

/// Sets the source's enrichment override (`inherit`, `on`, `off`).
pub fn patch_source(
    app: &App,
    p: &Principal,
    actor: &Actor,
    id: &str,
    enrichment_override: &str,
) -> Result<SourceView> {
    p.require(Perm::DocumentsManage)?;
    if !["inherit", "on", "off"].contains(&enrichment_override) {
        return Err(Error::invalid_field(
            "documentEnrichmentOverride",
            "documentEnrichmentOverride must be inherit, on or off",
        ));
    }
    let now = rfc3339(app.clock.now());
    let ws = p.workspace_id.clone();
    app.db.write(|tx| {
        store::source(tx, &ws, id)?.ok_or_else(|| Error::not_found("source"))?;
        store::set_source_override(tx, id, enrichment_override, &now)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("source.updated")
                .workspace(&ws)
                .target("source", id)
                .meta(json!({"documentEnrichmentOverride": enrichment_override})),
        )
    })?;
    Ok(SourceView::from(&load_source(app, &ws, id)?))
}

/// Deletes a source with its documents; they leave search before this returns.
pub fn delete_source(app: &App, p: &Principal, actor: &Actor, id: &str) -> Result<()> {
    p.require(Perm::DocumentsManage)?;
    let now = rfc3339(app.clock.now());
    let ws = p.workspace_id.clone();
    let blobs_used = app.db.write(|tx| {
        store::source(tx, &ws, id)?.ok_or_else(|| Error::not_found("source"))?;
        let docs = store::list_documents(
            tx,
            &ws,
            &store::ListFilter {
                source_id: Some(id.to_string()),
                status: None,
                title: None,
                before: None,
                limit: 1 << 40,
            },
        )?
        .0;
        let mut shas = Vec::new();
        for d in &docs {
            delete_in_tx(tx, d)?;
            if let Some(s) = &d.blob_sha256 {
                shas.push(s.clone());
            }
        }
        store::delete_source(tx, id)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("source.deleted").workspace(&ws).target("source", id).meta(json!({"documents": docs.len()})),
        )?;
        Ok(shas)
    })?;
    app.search()?.sync(&app.db)?;
    for sha in blobs_used {
        if !app.db.read(|c| store::blob_in_use(c, &sha))? {
            blobs::remove(&app.config.data_dir, &app.db, &sha);
        }
    }
    Ok(())
}

pub fn reprocess_source(
    app: &App,
    p: &Principal,
    actor: &Actor,
    id: &str,
    over: Option<String>,
) -> Result<ReprocessOutcome> {
    p.require(Perm::DocumentsManage)?;
    load_source(app, &p.workspace_id, id)?;
    reprocess_scope(app, &p.workspace_id, actor, Some(id), over, "source.reprocess")
}
