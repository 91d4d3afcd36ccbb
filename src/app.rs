//! `App`: everything a request or a job needs, built once and shared as `Arc<App>`.

use std::collections::HashMap;
use std::fs::File;
use std::sync::Arc;
use std::time::Instant;

use crate::auth::AuthState;
use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::documents::pipeline::Pipeline;
use crate::error::{Error, Result};
use crate::jobs::{Handler, Jobs};
use crate::metrics::Metrics;
use crate::models::Models;
use crate::ratelimit::{RateLimiter, Slots};
use crate::search::SearchIndex;
use crate::storage::Db;

pub struct App {
    pub config: Config,
    pub db: Db,
    pub clock: Arc<dyn Clock>,
    pub jobs: Jobs,
    pub auth: AuthState,
    pub metrics: Metrics,
    pub models: Models,
    pub pipeline: Pipeline,
    pub upload_limiter: RateLimiter,
    /// Public chat messages per visitor session and per client address.
    pub public_by_session: RateLimiter,
    pub public_by_addr: RateLimiter,
    pub converse_asks: RateLimiter,
    pub converse_reads_by_session: RateLimiter,
    pub converse_reads_by_source: RateLimiter,
    pub converse_exchanges: RateLimiter,
    /// Caps on long-lived requests held at once (config `streams`).
    pub streams: StreamSlots,
    /// Places for uploads being read at once (`uploads_concurrent`).
    pub uploads: Arc<tokio::sync::Semaphore>,
    /// Signalled whenever documents finish processing (ready or failed), for long-polls.
    pub document_events: tokio::sync::Notify,
    /// The running answer turns, one per conversation at a time (supersede coordination).
    pub turns: crate::turn::supersede::Turns,
    /// The usage capacity answers in flight hold (`usage::limits`).
    pub usage_ledger: crate::usage::limits::Ledger,
    /// Cancelled when the server begins to shut down: long-lived streams (the MCP sessions'
    /// event streams) end so the graceful shutdown does not wait on them.
    pub closing: tokio_util::sync::CancellationToken,
    /// Conversation events for the streams that wait on them (operator events; later visitor and
    /// converse streams).
    pub bus: crate::bus::Bus,
    /// On PostgreSQL: what this node tells the other nodes (`cluster`); `None` on SQLite.
    pub announce: Option<crate::cluster::Announce>,
    /// On PostgreSQL: this node's listening line and index tail.
    pub cluster: crate::cluster::Cluster,
    /// The public chat session secret, loaded (or generated into the data dir) on first use.
    pub public_secret: std::sync::OnceLock<crate::public_chat::token::Secret>,
    /// The SSRF-guarded outbound client deliveries use.
    pub outbound: crate::delivery::Outbound,
    /// The turn's routine stage (`turn::routine`).
    pub routine_pass: Box<dyn crate::turn::routine::RoutinePass>,
    /// How a retrieval skill answers (`skills::Retrieval`): the turn's retrieval and composition.
    pub skill_retrieval: Box<dyn crate::skills::Retrieval>,
    /// Open only in the process that holds the data directory (the server, tests, tools).
    search: Option<SearchIndex>,
    pub started_at: Instant,
    _data_dir_lock: Option<File>,
}

/// The places for long-lived requests: visitor event streams per session and per address,
/// operator event streams per person, waiting converse reads per credential.
pub struct StreamSlots {
    pub public_session: Arc<Slots>,
    pub public_addr: Arc<Slots>,
    pub events_user: Arc<Slots>,
    pub converse_credential: Arc<Slots>,
}

impl StreamSlots {
    fn new(l: &crate::config::StreamLimits) -> StreamSlots {
        StreamSlots {
            public_session: Slots::new("event streams for this chat session", l.public_per_session),
            public_addr: Slots::new("chat event streams from this address", l.public_per_ip),
            events_user: Slots::new("event streams for this account", l.events_per_user),
            converse_credential: Slots::new(
                "waiting update reads for this credential",
                l.converse_waits_per_credential,
            ),
        }
    }
}

/// How to build an [`App`].
pub struct Options {
    pub clock: Arc<dyn Clock>,
    /// Extra job handlers (tests).
    pub extra_handlers: Vec<(&'static str, Handler)>,
    /// Take the data directory's exclusive lock (the server does; `admin` commands do not).
    pub lock_data_dir: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { clock: Arc::new(SystemClock), extra_handlers: Vec::new(), lock_data_dir: true }
    }
}

/// Every job kind the product runs, with its handler: one line per area that has jobs.
fn handlers() -> HashMap<&'static str, Handler> {
    [
        crate::documents::jobs(),
        crate::search::spaces::jobs(),
        crate::delivery::jobs(),
        crate::routines::jobs(),
        crate::crawler::jobs(),
        crate::evals::suite::jobs(),
        crate::bundles::jobs(),
        crate::connectors::jobs(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

impl App {
    /// Opens the data directory (creating it), applies migrations and wires the modules. Starts no
    /// threads: see [`App::start_background`]. A data directory a newer Steward wrote is refused
    /// before anything in it changes.
    pub fn build(config: Config, opts: Options) -> Result<Arc<App>> {
        if config.database.is_none()
            && let Some(msg) = crate::ops::written_by_newer(&config.db_path())?
        {
            return Err(Error::internal_msg(msg));
        }
        std::fs::create_dir_all(&config.data_dir).map_err(|e| {
            Error::internal_msg(format!("cannot create the data directory {}: {e}", config.data_dir.display()))
        })?;
        let lock = if opts.lock_data_dir { Some(lock_data_dir(&config)?) } else { None };
        let read_pool = (config.workers as u32 + 8).min(32);
        let db = match &config.database {
            // PostgreSQL (docs/scale-out.md): migrated once under an advisory lock as it opens
            Some(url) => Db::open_postgres(url.expose(), read_pool)?,
            None => {
                let db = Db::open_without_migrating(&config.db_path(), read_pool)?;
                migrate(&config, &db, lock.is_some())?;
                db
            }
        };
        // on PostgreSQL, the node this data directory is (docs/scale-out.md)
        let node = match db.is_postgres() {
            true => {
                let index_dir = config.data_dir.join("index");
                std::fs::create_dir_all(&index_dir)?;
                Some(crate::cluster::node_id(&index_dir)?)
            }
            false => None,
        };
        if lock.is_some() {
            sweep_unused_blobs(&config, &db);
            // the data directory's lock makes this the only process on it: what its earlier
            // processes left running is orphaned (on PostgreSQL, only this node's jobs: other
            // nodes' leases expire on their own)
            let n = crate::jobs::recover_orphans(&db, opts.clock.now_ms(), node.as_deref())?;
            if n > 0 {
                tracing::info!(jobs = n, "requeued jobs left running by a previous process");
            }
            // nodes starting together on PostgreSQL do this one after another
            db.one_at_a_time(crate::storage::lock_keys::STARTUP, || -> Result<()> {
                // reservation rows of an older version: reservations are held in memory now
                crate::usage::limits::sweep(&db)?;
                crate::usage::limits::profiles::seed(&db, &crate::clock::rfc3339(opts.clock.now())).map(|_| ())
            })??;
        }
        let announce =
            node.as_deref().zip(db.notifier()).map(|(n, notifier)| crate::cluster::Announce::new(n, notifier));
        let mut registry = handlers();
        for (kind, h) in opts.extra_handlers {
            registry.insert(kind, h);
        }
        let jobs = Jobs::new(registry, config.job_lease, config.job_max_attempts).announcing(announce.clone());
        // a write that queues a job wakes the workers when it commits
        db.on_jobs_queued(jobs.waker());
        let auth = AuthState::new(&config);
        let search = match &lock {
            Some(_) => Some(SearchIndex::open(&config.data_dir.join("index"), &db)?),
            None => None,
        };
        if let (Some(s), Some(a)) = (&search, &announce) {
            s.announce_with(a.clone());
        }
        let app = Arc::new(App {
            models: Models::new(&config),
            upload_limiter: RateLimiter::new(config.upload_limit),
            public_by_session: RateLimiter::new(config.public_chat_limit_per_session),
            public_by_addr: RateLimiter::new(config.public_chat_limit_per_ip),
            converse_asks: RateLimiter::new(config.converse_asks_per_session),
            converse_reads_by_session: RateLimiter::new(config.converse_reads_per_session),
            converse_reads_by_source: RateLimiter::new(config.converse_reads_per_source),
            converse_exchanges: RateLimiter::new(config.converse_exchanges_per_source),
            streams: StreamSlots::new(&config.streams),
            uploads: Arc::new(tokio::sync::Semaphore::new(config.uploads_concurrent)),
            document_events: tokio::sync::Notify::new(),
            turns: Default::default(),
            usage_ledger: Default::default(),
            closing: Default::default(),
            bus: crate::bus::Bus::new(announce.clone()),
            announce,
            cluster: Default::default(),
            public_secret: std::sync::OnceLock::new(),
            outbound: crate::delivery::Outbound::new(&config.delivery)?,
            routine_pass: Box::new(crate::routines::runtime::Engine),
            skill_retrieval: Box::new(crate::turn::answer::SkillRetrieval),
            config,
            db,
            clock: opts.clock,
            jobs,
            auth,
            metrics: Metrics::default(),
            pipeline: Pipeline::new(),
            search,
            started_at: Instant::now(),
            _data_dir_lock: lock,
        });
        if app._data_dir_lock.is_some() {
            app.db.one_at_a_time(crate::storage::lock_keys::STARTUP, || app.seal_stored_secrets())??;
        }
        // bundle imports run within their request: one still active now was cut off by a crash
        // (on PostgreSQL another node may be running it: the orphan-age sweep fences it instead)
        if app._data_dir_lock.is_some() && !app.db.is_postgres() {
            let n = crate::bundles::recover(&app)?;
            if n > 0 {
                tracing::warn!(imports = n, "compensated agent bundle imports left applying by a previous process");
            }
        }
        Ok(app)
    }

    /// Seals secrets an older version stored in clear (sensitive context values). Without the
    /// encryption key it can only say how many are left.
    fn seal_stored_secrets(&self) -> Result<()> {
        let (sealed, left) = crate::agents::context::seal_stored_values(self)?;
        if sealed > 0 {
            tracing::info!(values = sealed, "sealed sensitive context values stored in clear by an older version");
        }
        if left > 0 {
            tracing::warn!(
                values = left,
                "sensitive context values are stored in clear: set CONNECTOR_ENCRYPTION_KEY and restart to seal them"
            );
        }
        Ok(())
    }

    /// Loads the embedding model, then starts the embedding pipeline and the worker threads.
    pub fn start_background(self: &Arc<Self>) {
        if let Err(e) = self.models.embedder() {
            tracing::error!("{}", e.message);
        }
        // workspaces whose vectors are not in the space they should be in are re-embedded
        match crate::search::spaces::reconcile_all(self) {
            Ok(n) if n > 0 => {
                tracing::info!(workspaces = n, "re-embedding queued for workspaces in an older embedding space")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "could not check the workspaces' embedding spaces"),
        }
        if let Err(e) = crate::search::history::schedule_today(self) {
            tracing::warn!(error = %e, "could not queue the search history cleanup");
        }
        if let Err(e) = crate::connectors::whatsapp::schedule_cleanup(self) {
            tracing::warn!(error = %e, "could not queue the WhatsApp message log cleanup");
        }
        Pipeline::start(self);
        Jobs::start(self, self.config.workers);
        crate::cluster::start(self);
        self.rebuild_search_in_background();
    }

    /// Runs a planned rebuild of the search indexes on a thread of its own: the server answers
    /// meanwhile (search from what is rebuilt so far; `/readyz` says it is degraded).
    fn rebuild_search_in_background(self: &Arc<Self>) {
        let Some(status) = self.search.as_ref().and_then(|s| s.rebuild_status()) else { return };
        tracing::info!(chunks = status.total, "{}: in the background", status.describe());
        let app = self.clone();
        let spawned = std::thread::Builder::new().name("steward-reindex".into()).spawn(move || {
            if let Err(e) = app.finish_search_rebuild() {
                tracing::error!(error = %e, "the search index rebuild failed; it is retried at the next start");
            }
        });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "could not start the search index rebuild");
        }
    }

    /// Runs a planned rebuild of the search indexes to its end on this thread (the server runs it
    /// in the background; tests and commands that need complete indexes call this).
    pub fn finish_search_rebuild(&self) -> Result<()> {
        if let Some(s) = &self.search {
            s.run_rebuild(&self.db)?;
        }
        // waiting progress reads see the indexes complete
        self.document_events.notify_waiters();
        Ok(())
    }

    /// Wakes whoever waits on a document's progress, here and on the other nodes.
    pub fn documents_changed(&self) {
        if let Some(a) = &self.announce {
            a.send(&crate::cluster::Wake::Documents);
        }
        self.document_events.notify_waiters();
    }

    /// The search indexes (503 in a process that does not hold the data directory).
    pub fn search(&self) -> Result<&SearchIndex> {
        self.search.as_ref().ok_or_else(|| Error::unavailable("search is not open in this process"))
    }

    /// Stops background work: workers finish or release their jobs, the pipeline stops, the vector
    /// index is saved, the WAL is checkpointed.
    pub fn shutdown(&self) {
        self.jobs.shutdown(&self.db, self.config.shutdown_grace);
        self.cluster.stop();
        self.pipeline.shutdown();
        if let Some(s) = &self.search {
            s.stop_rebuild();
            if let Err(e) = s.save_vectors_if_due(&self.db, true) {
                tracing::warn!(error = %e, "could not save the vector index at shutdown");
            }
        }
        if let Err(e) = self.db.checkpoint() {
            tracing::warn!(error = %e, "WAL checkpoint at shutdown failed");
        }
    }

    /// Runs `f` on a blocking thread (database and CPU work never run on the async runtime).
    pub async fn blocking<T, F>(self: &Arc<Self>, f: F) -> Result<T>
    where
        F: FnOnce(&App) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let app = self.clone();
        // the caller's span (a request's, with its id) goes along, so logs there carry it
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || span.in_scope(|| f(&app))).await?
    }

    /// Like [`App::blocking`], for short CPU-bound request work that is on the latency path (a
    /// search): on the multi-threaded runtime it runs on the current worker thread, which hands its
    /// other tasks to another thread meanwhile, instead of waking a blocking-pool thread and
    /// waiting to be woken back (about 0.1 ms per request on 2 cores, measured). Elsewhere (a
    /// current-thread runtime, as in tests) it is `blocking`. The request timeout cannot stop such
    /// work midway; it is only for work that is bounded by its input.
    pub async fn compute<T, F>(self: &Arc<Self>, f: F) -> Result<T>
    where
        F: FnOnce(&App) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        if tokio::runtime::Handle::current().runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread {
            return tokio::task::block_in_place(|| f(self));
        }
        self.blocking(f).await
    }
}

/// Applies pending migrations, all in one transaction, holding the data directory (a process that
/// does not hold it takes it for the migration; a server of an older version holding it is
/// refused). Before the first migration of a database that has data, a snapshot is kept
/// (`ops::backup::snapshot_before_migrating`).
fn migrate(config: &Config, db: &Db, holding: bool) -> Result<()> {
    let st = db.migration_status()?;
    if st.pending.is_empty() {
        return db.migrate(None).map(|_| ());
    }
    let _held = if holding {
        None
    } else {
        Some(lock_data_dir(config).map_err(|_| {
            Error::internal_msg(format!(
                "the database in {} needs migrations, and another steward (an older version) is using it; stop it first",
                config.data_dir.display()
            ))
        })?)
    };
    let from = crate::storage::migrations::schema_version(&st);
    let to = crate::storage::migrations::latest();
    if !st.applied.is_empty() {
        let started = Instant::now();
        let path = crate::ops::backup::snapshot_before_migrating(&config.data_dir, from, to)?;
        tracing::info!(
            path = %path.display(),
            ms = started.elapsed().as_millis() as u64,
            "kept a snapshot of the data directory before migrating"
        );
    }
    let applied = db.migrate(None)?;
    if from > 0 {
        tracing::info!(from, to, migrations = applied.len(), "migrated the database");
    }
    Ok(())
}

/// Removes originals no document refers to (kept while a backup ran, or left by a crash), and the
/// work directories of backups a crash cut off.
fn sweep_unused_blobs(config: &Config, db: &Db) {
    let referenced = match db.read(crate::documents::blob_references) {
        Ok(refs) => refs.into_iter().map(|(_, sha)| sha).collect(),
        Err(e) => {
            tracing::warn!(error = %e, "could not list the originals documents refer to");
            return;
        }
    };
    let n = crate::ops::backup::sweep_leftovers(&config.data_dir);
    if n > 0 {
        tracing::info!(directories = n, "removed the work directories of backups a crash cut off");
    }
    match crate::documents::blobs::sweep_unused(&config.data_dir, &referenced) {
        Ok(0) => {}
        Ok(n) => tracing::info!(files = n, "removed stored originals no document refers to"),
        Err(e) => tracing::warn!(error = %e, "could not remove unused originals"),
    }
}

fn lock_data_dir(config: &Config) -> Result<File> {
    crate::ops::lock::try_server(&config.data_dir)?.ok_or_else(|| {
        Error::internal_msg(format!(
            "another steward server is already using the data directory {}",
            config.data_dir.display()
        ))
    })
}
