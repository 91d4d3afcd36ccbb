//! The WordPress connector: a site's posts, pages and custom post types as documents of one
//! source.
//!
//! - Enabling registers the source (kind `connector`) and, when no backfill ever completed,
//!   queues one; otherwise an incremental sync catches up with what changed while it was off.
//! - A run (`connector.wordpress.sync`, `sync.rs`) reads the configured post types through the
//!   REST API (`client.rs`), renders each item to clean text (`render.rs`) and upserts it by
//!   external id (unchanged content writes nothing); then lists every id and removes the documents
//!   of posts no longer published. Runs are one at a time per connector; a push during a run asks
//!   for another when it ends.
//! - Pushes (`push`) and polling (`connector.wordpress.poll`) queue incremental runs.

mod client;
pub mod render;
mod store;
mod sync;

use serde_json::json;

use super::{Connector, ConnectorId, SyncStatus};
use crate::app::App;
use crate::error::{Error, Result};
use crate::ids::WorkspaceId;
use crate::jobs::{self, JobCtx, JobPayload, NewJob, Outcome};
use crate::storage::Tx;

pub use client::basic;

/// The queue job that runs a sync.
pub const RUN_JOB: &str = "connector.wordpress.sync";
/// The queue job that polls for changes.
pub const POLL_JOB: &str = "connector.wordpress.poll";

pub fn jobs() -> Vec<(&'static str, jobs::Handler)> {
    vec![(RUN_JOB, sync::handle), (POLL_JOB, poll)]
}

/// What a run reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Everything, the first time.
    Backfill,
    /// Everything again ("sync now").
    Full,
    /// What changed since the cursor, and the id lists.
    Incremental,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Backfill => "backfill",
            Mode::Full => "full",
            Mode::Incremental => "incremental",
        }
    }
    fn parse(s: &str) -> Mode {
        match s {
            "backfill" => Mode::Backfill,
            "full" => Mode::Full,
            _ => Mode::Incremental,
        }
    }
}

fn id() -> ConnectorId {
    ConnectorId::Wordpress
}

/// Queues a run in the caller's transaction (the caller checked none is active).
pub fn queue_run(app: &App, tx: &Tx, c: &Connector, mode: Mode, now: &str) -> Result<()> {
    let run = crate::ids::new_id();
    super::store::queue_run(tx, &c.workspace_id, id(), &run, mode.as_str(), now)?;
    let job = NewJob::new(RUN_JOB, json!({"workspaceId": c.workspace_id.0, "runId": run}))
        .dedupe(format!("wp-sync:{run}"))
        .workspace(c.workspace_id.0.clone())
        .max_attempts(8);
    jobs::enqueue_tx(tx, app.clock.now_ms(), app.jobs.default_max_attempts(), &job)?;
    Ok(())
}

/// The site's host (and path) as it names the source and prefixes external ids.
fn site_name(site: &str) -> String {
    site.split_once("://").map(|(_, rest)| rest).unwrap_or(site).to_string()
}

fn source_config(c: &Connector) -> serde_json::Value {
    json!({"connector": "wordpress", "siteUrl": c.value("site_url"), "postTypes": c.value("post_types")})
}

/// Enabling: the source (registered once), the backfill or a catch-up run, the first poll.
pub(super) fn on_enable(app: &App, tx: &Tx, c: &Connector, now: &str) -> Result<()> {
    let site = c.value("site_url").unwrap_or_default();
    let source = crate::documents::connector::connector_source(
        tx,
        &c.workspace_id,
        "wordpress",
        &site_name(site),
        &source_config(c),
        now,
    )?;
    super::store::set_source(tx, &c.workspace_id, id(), &source.id)?;
    if c.sync.status.is_none_or(|s| s == SyncStatus::Idle) {
        let mode = if c.sync.backfill_completed_at.is_none() { Mode::Backfill } else { Mode::Incremental };
        queue_run(app, tx, c, mode, now)?;
    }
    schedule_poll(app, tx, c, &crate::ids::new_id())
}

/// An enabled connector was saved: its source follows the config; polling restarts from now.
pub(super) fn after_save(app: &App, tx: &Tx, c: &Connector) -> Result<()> {
    if c.source_id.is_some() {
        let now = crate::clock::rfc3339(app.clock.now());
        let name = site_name(c.value("site_url").unwrap_or_default());
        crate::documents::connector::connector_source(
            tx,
            &c.workspace_id,
            "wordpress",
            &name,
            &source_config(c),
            &now,
        )?;
    }
    schedule_poll(app, tx, c, &crate::ids::new_id())
}

fn interval(c: &Connector) -> u64 {
    c.value("poll_interval_sec").and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Plans the next poll of the chain `token`, `poll_interval_sec` from now (nothing when polling
/// is off). A new token ends the chain before it.
fn schedule_poll(app: &App, tx: &Tx, c: &Connector, token: &str) -> Result<()> {
    super::store::set_poll_token(tx, &c.workspace_id, id(), token)?;
    let secs = interval(c);
    if secs == 0 {
        return Ok(());
    }
    let at = app.clock.now_ms() + secs as i64 * 1000;
    let job = NewJob::new(POLL_JOB, json!({"workspaceId": c.workspace_id.0, "token": token}))
        .dedupe(format!("wp-poll:{}:{at}", c.workspace_id.0))
        .workspace(c.workspace_id.0.clone())
        .run_at(at)
        .priority(-1);
    jobs::enqueue_tx(tx, app.clock.now_ms(), app.jobs.default_max_attempts(), &job)?;
    Ok(())
}

/// Queues an incremental run, or asks the active one to run again when it ends.
fn request_run(app: &App, tx: &Tx, ws: &WorkspaceId, now: &str) -> Result<bool> {
    let Some(c) = super::store::get(tx, ws, id())?.filter(|c| c.enabled) else { return Ok(false) };
    if c.sync.status.is_some_and(|s| s != SyncStatus::Idle) {
        super::store::set_again(tx, ws, id())?;
    } else {
        queue_run(app, tx, &c, Mode::Incremental, now)?;
    }
    Ok(true)
}

/// A push from the site (`POST /api/connectors/wordpress/{workspaceId}/webhook`): 401 unless
/// `secret` is the connector's shared secret (constant-time), 404 when the connector is off.
pub fn push(app: &App, ws: &str, secret: Option<&str>) -> Result<()> {
    let wsid = WorkspaceId(ws.to_string());
    let c = super::load(app, &wsid, id())?;
    let stored = c.secret(app, "webhook_shared_secret")?;
    let ok = matches!((secret, stored.as_deref()), (Some(given), Some(s)) if super::secret_eq(given, s));
    if !ok {
        return Err(Error::unauthorized("the webhook secret is missing or wrong"));
    }
    if !c.enabled {
        return Err(Error::not_found("connector"));
    }
    let now = crate::clock::rfc3339(app.clock.now());
    app.db.write(|tx| request_run(app, tx, &wsid, &now))?;
    Ok(())
}

/// A poll is due: queues an incremental run (unless one is active) and plans the next poll of
/// its chain; a chain that a save or an enable replaced stops.
fn poll(app: &App, _ctx: &JobCtx, payload: &JobPayload) -> Outcome {
    let (Some(ws), Some(token)) = (payload["workspaceId"].as_str(), payload["token"].as_str()) else {
        return Outcome::Fail("malformed poll job".into());
    };
    let ws = WorkspaceId(ws.to_string());
    let now = crate::clock::rfc3339(app.clock.now());
    let r = app.db.write(|tx| {
        if !super::store::poll_token_is(tx, &ws, id(), token)? {
            return Ok(());
        }
        let Some(c) = super::store::get(tx, &ws, id())?.filter(|c| c.enabled) else { return Ok(()) };
        if c.sync.status.is_none_or(|s| s == SyncStatus::Idle) {
            queue_run(app, tx, &c, Mode::Incremental, &now)?;
        }
        schedule_poll(app, tx, &c, token)
    });
    match r {
        Ok(()) => Outcome::Done,
        Err(e) => Outcome::retry(e.to_string()),
    }
}
