//! The `document.process` job: extract (uploads), chunk, store the chunks of one revision. The
//! embedding pipeline takes it from there.

use std::time::Duration;

use serde_json::json;

use super::chunking;
use super::extract::{self, Extracted, Format};
use super::pipeline::embedding_text;
use super::{blobs, service::content_hash, store};
use crate::app::App;
use crate::clock::rfc3339;
use crate::error::Result;
use crate::jobs::{JobCtx, Outcome};
use crate::settings::{self, ingestion::IngestionSettings};
use crate::storage::Tx;

/// Longest text one document may have once extracted (about 2 million tokens).
pub const MAX_TEXT_BYTES: usize = 8 * 1024 * 1024;

/// How long a parser may take on one file.
pub const EXTRACT_TIMEOUT: Duration = Duration::from_secs(120);

pub fn run(app: &App, ctx: &JobCtx, payload: &crate::jobs::JobPayload) -> Outcome {
    let (Some(id), Some(rev)) = (payload["documentId"].as_str(), payload["revision"].as_i64()) else {
        return Outcome::Fail(format!("malformed payload: {payload}"));
    };
    let over = payload["documentEnrichmentOverride"].as_str();
    match process(app, ctx, id, rev, over) {
        Ok(()) => Outcome::Done,
        Err(e) => Outcome::retry(e.to_string()),
    }
}

fn fail(app: &App, id: &str, rev: i64, reason: &str) -> Result<()> {
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        store::delete_unlive_chunks(tx, id)?;
        store::mark_failed(tx, id, rev, reason, &now)
    })?;
    app.documents_changed();
    tracing::info!(document = id, revision = rev, reason, "document failed");
    Ok(())
}

fn process(app: &App, ctx: &JobCtx, id: &str, rev: i64, enrichment_override: Option<&str>) -> Result<()> {
    let Some(doc) = app.db.read(|c| store::document_any(c, id))? else { return Ok(()) }; // deleted
    if doc.revision != rev || (doc.indexed_revision == Some(rev) && doc.status == "ready") {
        return Ok(()); // a newer revision exists, or this one is already done
    }
    let now = rfc3339(app.clock.now());
    if !app.db.write(|tx| store::mark_processing(tx, id, rev, &now))? {
        return Ok(());
    }
    let (extracted, format) = match read_text(app, &doc)? {
        Ok(x) => x,
        Err(reason) => return fail(app, id, rev, &reason),
    };
    if extracted.text.len() > MAX_TEXT_BYTES {
        return fail(
            app,
            id,
            rev,
            &format!(
                "the document's text is {:.1} MB; the limit is {} MB per document; split it into smaller documents",
                extracted.text.len() as f64 / 1_048_576.0,
                MAX_TEXT_BYTES / 1_048_576
            ),
        );
    }
    ctx.heartbeat();
    let settings: IngestionSettings =
        app.db.read(|c| settings::load(c, &doc.workspace_id, settings::ingestion::NAMESPACE))?;
    let drafts = chunking::chunk(&extracted, &format, &settings);
    if drafts.is_empty() {
        return fail(app, id, rev, "the document has no text to index");
    }
    let now = rfc3339(app.clock.now());
    let stored = app.db.write(|tx| {
        let current = store::current_revision(tx, id).ok();
        if current != Some(rev) {
            return Ok(false);
        }
        store::delete_unlive_chunks(tx, id)?;
        // enrichment: the request's override, else the source's, else the workspace setting
        let source_override = store::source_override(tx, &doc.source_id).unwrap_or_else(|_| "inherit".into());
        let enrich = match (enrichment_override, source_override.as_str()) {
            (Some("on"), _) | (None, "on") => true,
            (Some("off"), _) | (None, "off") => false,
            _ => settings.document_enrichment_enabled,
        };
        super::enrich::mark_pending(tx, id, rev, enrich)?;
        if doc.source_kind == "uploaded_file" {
            store::set_extracted(tx, id, &extracted.text, &content_hash(&extracted.text), &format.name())?;
        }
        let space = crate::search::spaces::live_space_tx(app, tx, &doc.workspace_id.0)?;
        store_chunks(tx, &doc, rev, &drafts, &space, &now)?;
        Ok(true)
    })?;
    if stored {
        app.pipeline.wake();
    }
    Ok(())
}

/// The document's text: its stored text, or what its uploaded original extracts to. The inner
/// `Err` is the reason the document fails.
fn read_text(app: &App, doc: &super::Document) -> Result<std::result::Result<(Extracted, Format), String>> {
    if doc.source_kind != "uploaded_file" {
        let content = app.db.read(|c| store::content(c, &doc.id))?.unwrap_or_default();
        return Ok(Ok((Extracted::plain(content), Format::Markdown)));
    }
    let missing = || Ok(Err("the uploaded original is missing; upload the file again".to_string()));
    let Some(sha) = doc.blob_sha256.as_deref() else { return missing() };
    let Some(path) = blobs::local(&app.config.data_dir, &app.db, sha)? else { return missing() };
    let format = doc.detected_format.as_deref().and_then(Format::parse).unwrap_or(Format::Text);
    let result = if format.is_binary() {
        extract::extract_isolated(app.config.extractor_exe.as_deref(), &path, &format, EXTRACT_TIMEOUT)
    } else {
        std::fs::read(&path)
            .map_err(|e| extract::ExtractError(format!("the uploaded original cannot be read ({e})")))
            .and_then(|b| extract::extract_in_process(&b, &format))
    };
    Ok(result.map(|x| (x, format)).map_err(|e| e.0))
}

/// Stores the chunks of `doc`'s revision `rev`, without embeddings.
fn store_chunks(
    tx: &Tx,
    doc: &super::Document,
    rev: i64,
    drafts: &[chunking::ChunkDraft],
    space: &str,
    now: &str,
) -> Result<()> {
    for (i, d) in drafts.iter().enumerate() {
        let chunk_id = crate::ids::new_id();
        let meta = match &d.language {
            Some(l) => json!({"language": l}),
            None => json!({}),
        };
        let hash = content_hash(&embedding_text(&doc.title, &d.content));
        store::insert_chunk(
            tx,
            &doc.workspace_id,
            &doc.id,
            rev,
            &store::NewChunk {
                id: &chunk_id,
                chunk_index: i as i64,
                content: &d.content,
                start: d.start as i64,
                end: d.end as i64,
                heading_path: d.heading_path.as_deref(),
                page: d.page.map(|p| p as i64),
                sheet: d.sheet.as_deref(),
                kind: d.kind.as_str(),
                metadata: &meta,
                content_hash: &hash,
            },
            space,
            now,
        )?;
    }
    Ok(())
}
