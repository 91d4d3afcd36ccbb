//! One WordPress sync run (`connector.wordpress.sync`): the items to write (all of them, or those
//! modified since the cursor), each upserted in its own transaction with its post record, then the
//! id lists of every configured post type and the removal of the documents of posts no longer
//! published. Only the run the connector names works; a disabled connector stops it between pages.

use std::collections::HashSet;

use chrono::NaiveDateTime;

use super::client::{self, Failure, Item, Site};
use super::{Mode, id, site_name, store};
use crate::app::App;
use crate::audit::Actor;
use crate::clock::rfc3339;
use crate::connectors::Progress;
use crate::connectors::store::{self as cstore, Finish};
use crate::documents::NewDocument;
use crate::documents::connector::{self as docs, Upserted};
use crate::error::Result;
use crate::ids::WorkspaceId;
use crate::jobs::{JobCtx, JobPayload, Outcome};

pub fn handle(app: &App, ctx: &JobCtx, payload: &JobPayload) -> Outcome {
    let (Some(ws), Some(run)) = (payload["workspaceId"].as_str(), payload["runId"].as_str()) else {
        return Outcome::Fail("malformed sync job".into());
    };
    let ws = WorkspaceId(ws.to_string());
    match execute(app, ctx, &ws, run) {
        Ok(o) => o,
        Err(e) => Outcome::retry(e.to_string()),
    }
}

/// How a run ended before its end.
enum Stop {
    /// The connector was disabled or another run replaced this one.
    Gone,
    Failed(Failure),
}

impl From<Failure> for Stop {
    fn from(f: Failure) -> Stop {
        Stop::Failed(f)
    }
}

impl From<crate::Error> for Stop {
    fn from(e: crate::Error) -> Stop {
        // a usage limit, a database error: said in operator-safe words, retried when transient
        let retry = e.code.status() >= 500;
        Stop::Failed(Failure { message: e.message, retry })
    }
}

struct Run<'a> {
    app: &'a App,
    ctx: &'a JobCtx<'a>,
    ws: &'a WorkspaceId,
    run: &'a str,
    source: String,
    prefix: String,
    progress: Progress,
    cursor: Option<String>,
    ingested: i64,
}

fn execute(app: &App, ctx: &JobCtx, ws: &WorkspaceId, run: &str) -> Result<Outcome> {
    let now = rfc3339(app.clock.now());
    if !app.db.write(|tx| cstore::start_run(tx, ws, id(), run, &now))? {
        return Ok(Outcome::Done);
    }
    let c = super::super::load(app, ws, id())?;
    let mode = Mode::parse(c.sync.mode.as_deref().unwrap_or("incremental"));
    let site_url = c.value("site_url").unwrap_or_default().to_string();
    let auth = match (c.value("wp_username"), c.secret(app, "wp_application_password")?) {
        (Some(u), Some(p)) => Some(client::basic(u, &p)),
        _ => None,
    };
    let types = crate::connectors::schema::post_types(c.value("post_types").unwrap_or("page,post"))?;
    let Some(source) = c.source_id.clone() else {
        return finish(app, ws, run, None, 0, Some("the connector has no source: disable and enable it again"));
    };
    let site = Site { app, url: &site_url, auth };
    let mut r = Run {
        app,
        ctx,
        ws,
        run,
        source,
        prefix: site_name(&site_url),
        progress: Progress::default(),
        cursor: c.sync.modified_cursor.clone(),
        ingested: 0,
    };
    let after = match mode {
        Mode::Incremental => c.sync.modified_cursor.as_deref().and_then(one_second_before),
        Mode::Backfill | Mode::Full => None,
    };
    match r.work(&site, &types, after.as_deref()) {
        Ok(()) => {
            let complete = mode != Mode::Incremental;
            let again = app.db.write(|tx| {
                let f = Finish { complete, cursor: r.cursor.as_deref(), ingested: r.ingested, error: None };
                cstore::finish_run(tx, ws, id(), run, &f, &rfc3339(app.clock.now()))
            })?;
            if again == Some(true) {
                let now = rfc3339(app.clock.now());
                app.db.write(|tx| super::request_run(app, tx, ws, &now))?;
            }
            Ok(Outcome::Done)
        }
        Err(Stop::Gone) => Ok(Outcome::Done),
        Err(Stop::Failed(f)) if f.retry && ctx.attempt < ctx.max_attempts => {
            let now = rfc3339(app.clock.now());
            app.db.write(|tx| cstore::set_error(tx, ws, id(), run, &f.message, &now))?;
            Ok(Outcome::retry(f.message))
        }
        Err(Stop::Failed(f)) => finish(app, ws, run, r.cursor.as_deref(), r.ingested, Some(&f.message)),
    }
}

fn finish(
    app: &App,
    ws: &WorkspaceId,
    run: &str,
    cursor: Option<&str>,
    ingested: i64,
    error: Option<&str>,
) -> Result<Outcome> {
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let f = Finish { complete: false, cursor, ingested, error };
        cstore::finish_run(tx, ws, id(), run, &f, &now)
    })?;
    if let Some(e) = error {
        tracing::warn!(error = e, "a WordPress sync ended with an error");
    }
    Ok(Outcome::Done)
}

/// `modified_after` is exclusive: ask from one second before the newest change seen, so another
/// change in that same second is not missed (an item read twice is unchanged and writes nothing).
fn one_second_before(cursor: &str) -> Option<String> {
    let t = NaiveDateTime::parse_from_str(cursor, "%Y-%m-%dT%H:%M:%S").ok()?;
    Some((t - chrono::Duration::seconds(1)).format("%Y-%m-%dT%H:%M:%S").to_string())
}

impl Run<'_> {
    fn still_current(&self) -> std::result::Result<(), Stop> {
        self.ctx.heartbeat();
        match self.app.db.read(|c| cstore::owns_run(c, self.ws, id(), self.run)) {
            Ok(true) => Ok(()),
            Ok(false) => Err(Stop::Gone),
            Err(e) => Err(e.into()),
        }
    }

    fn save_progress(&self) -> std::result::Result<(), Stop> {
        self.app.db.write(|tx| cstore::set_progress(tx, self.ws, id(), self.run, &self.progress))?;
        Ok(())
    }

    /// For each configured type: every published id (the diff's list), then the items to write —
    /// all of them, or those modified since the cursor — fetched by id in batches; then the
    /// documents of posts no longer listed go.
    fn work(&mut self, site: &Site, types: &[String], after: Option<&str>) -> std::result::Result<(), Stop> {
        site.check_credentials()?;
        let routes = site.types()?;
        let mut missing = Vec::new();
        let mut listed = HashSet::new();
        for t in types {
            let Some(route) = routes.get(t) else {
                missing.push(t.clone());
                continue;
            };
            let all = self.list_ids(site, route, None)?;
            listed.extend(all.iter().map(|i| self.key(t, *i)));
            let wanted = match after {
                None => all,
                Some(a) => self.list_ids(site, route, Some(a))?,
            };
            for batch in wanted.chunks(client::PER_PAGE) {
                self.still_current()?;
                for item in &site.items(route, batch)? {
                    self.write(t, item)?;
                }
                self.save_progress()?;
            }
        }
        self.remove_unlisted(&listed)?;
        if !missing.is_empty() {
            return Err(Stop::Failed(Failure {
                message: format!(
                    "post types not in the site's REST API (not registered, or without show_in_rest): {}",
                    missing.join(", ")
                ),
                retry: false,
            }));
        }
        Ok(())
    }

    /// Every published id at `route` (modified after `after` when given), page by page.
    fn list_ids(&self, site: &Site, route: &str, after: Option<&str>) -> std::result::Result<Vec<i64>, Stop> {
        let mut out = Vec::new();
        let mut page = 1;
        loop {
            self.still_current()?;
            let p = site.ids(route, page, after)?;
            let last = p.items.is_empty();
            out.extend(p.items);
            if page >= p.total_pages || last {
                return Ok(out);
            }
            page += 1;
        }
    }

    fn key(&self, post_type: &str, wp_id: i64) -> String {
        format!("{}/{post_type}/{wp_id}", self.prefix)
    }

    /// Upserts one item with its post record, in one transaction.
    fn write(&mut self, post_type: &str, item: &Item) -> std::result::Result<(), Stop> {
        self.progress.seen += 1;
        if let Some(m) = &item.modified
            && self.cursor.as_ref().is_none_or(|c| m > c)
        {
            self.cursor = Some(m.clone());
        }
        let key = self.key(post_type, item.id);
        if item.status.as_deref().is_some_and(|s| s != "publish") || item.content.protected {
            // not public: leaves with the id diff
            return Ok(());
        }
        let doc = document(&key, post_type, item);
        let (app, ws, source) = (self.app, self.ws, self.source.clone());
        let now = rfc3339(app.clock.now());
        let done = app.db.write(|tx| {
            if !docs::source_exists(tx, ws, &source)? {
                return Ok(None);
            }
            let u = docs::upsert(tx, app, &Actor::system(), ws, &source, doc, &now)?;
            store::put_post(tx, ws, &key, u.id(), item.modified.as_deref(), &now)?;
            Ok(Some(u))
        })?;
        match done {
            None => {
                return Err(Stop::Failed(Failure {
                    message:
                        "the connector's source was deleted: disable and enable the connector to register it again"
                            .into(),
                    retry: false,
                }));
            }
            Some(Upserted::Unchanged(_)) => self.progress.unchanged += 1,
            Some(_) => {
                self.progress.indexed += 1;
                self.ingested += 1;
            }
        }
        Ok(())
    }

    /// Removes the documents of known posts that are not `listed` (trashed, drafted, made
    /// private, deleted, or of a type no longer configured).
    fn remove_unlisted(&mut self, listed: &HashSet<String>) -> std::result::Result<(), Stop> {
        let (app, ws) = (self.app, self.ws);
        let gone: Vec<(String, String)> =
            app.db.read(|c| store::posts(c, ws))?.into_iter().filter(|(k, _)| !listed.contains(k)).collect();
        if gone.is_empty() {
            return Ok(());
        }
        for chunk in gone.chunks(100) {
            let removed = app.db.write(|tx| {
                let mut n = 0;
                for (key, doc) in chunk {
                    n += i64::from(docs::remove(tx, ws, doc)?);
                    store::delete_post(tx, ws, key)?;
                }
                Ok(n)
            })?;
            self.progress.removed += removed;
        }
        self.save_progress()?;
        app.search()?.sync(&app.db)?;
        Ok(())
    }
}

/// An item as a document: clean text, the title, and the metadata the reference names.
fn document(key: &str, post_type: &str, item: &Item) -> NewDocument {
    let title = super::render::title_text(&item.title.rendered);
    let title = if title.is_empty() { format!("Untitled {post_type} {}", item.id) } else { title };
    let text = super::render::content_text(&item.content.rendered);
    let content = if text.trim().is_empty() { title.clone() } else { text };
    let mut meta = serde_json::Map::new();
    let author = item.embedded.as_ref().and_then(|e| e.author.first()).and_then(|a| a.name.clone());
    if let Some(a) = author.filter(|a| !a.trim().is_empty()) {
        meta.insert("author".into(), a.into());
    }
    if let Some(d) = item.date_gmt.as_deref().filter(|d| d.len() >= 10) {
        let at = if d.ends_with('Z') { d.to_string() } else { format!("{d}Z") };
        meta.insert("published_at".into(), at.into());
        meta.insert("dateFrom".into(), d[..10].to_string().into());
    }
    if let Some(l) = &item.link {
        meta.insert("sourceUrl".into(), l.clone().into());
    }
    meta.insert("postType".into(), post_type.into());
    meta.insert("wordpressId".into(), item.id.into());
    NewDocument {
        title,
        content,
        metadata: Some(serde_json::Value::Object(meta)),
        external_document_id: Some(key.to_string()),
        enrichment_override: None,
        source_id: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cursor_steps_back_one_second() {
        assert_eq!(one_second_before("2026-01-01T00:00:00").as_deref(), Some("2025-12-31T23:59:59"));
        assert_eq!(one_second_before("garbage"), None);
    }

    #[test]
    fn an_item_becomes_a_document_with_its_metadata() {
        let item: Item = serde_json::from_str(
            r#"{"id":7,"date_gmt":"2026-03-04T05:06:07","modified":"2026-03-04T06:00:00","link":"https://b.example/?p=7",
                "status":"publish","title":{"rendered":"Caf&eacute;"},"content":{"rendered":"<p>Open daily.</p>"},
                "_embedded":{"author":[{"name":"Ada"}]}}"#,
        )
        .unwrap();
        let d = document("b.example/post/7", "post", &item);
        assert_eq!(d.title, "Café");
        assert_eq!(d.content, "Open daily.");
        let m = d.metadata.unwrap();
        assert_eq!(m["author"], "Ada");
        assert_eq!(m["published_at"], "2026-03-04T05:06:07Z");
        assert_eq!(m["dateFrom"], "2026-03-04");
        assert_eq!(m["sourceUrl"], "https://b.example/?p=7");
        assert_eq!(d.external_document_id.as_deref(), Some("b.example/post/7"));
    }
}
