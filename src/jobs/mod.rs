//! The durable job queue: rows in SQLite drained by a pool of worker threads.
//!
//! - A job is enqueued with a kind, a JSON payload, an optional dedupe key (a second enqueue with
//!   the same key returns the first job), a priority and an earliest run time. [`enqueue_tx`]
//!   writes it inside the caller's transaction, so a state change and the work it needs commit
//!   together; the transaction notes it, and its commit wakes the idle workers at once
//!   ([`Jobs::waker`]).
//! - A worker claims the highest-priority due job and holds a lease on it. A job whose lease
//!   expires (the process was killed) is claimed again, after a restart or by another worker.
//! - A handler returns [`Outcome`]: done, retry (exponential backoff with jitter), fail (dead,
//!   with its reason), or release (put back untouched, used at shutdown).
//! - Handlers are plain functions registered by kind; they must be idempotent. A job of a kind
//!   with no handler in this build (its feature arrives later, or after a downgrade) waits in the
//!   queue untouched.

mod store;

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use rand::Rng;
use serde_json::Value;

use crate::app::App;
use crate::error::Result;
use crate::storage::{Db, Tx};

pub use store::{JobRow, QueueDepth};

/// What a handler decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Done,
    /// Try again later (after `after`, or the standard backoff when `None`).
    Retry {
        after: Option<Duration>,
        error: String,
    },
    /// Give up: the job goes dead with this reason.
    Fail(String),
    /// Put the job back as it was (shutdown in progress); the attempt is not counted.
    Release,
}

impl Outcome {
    pub fn retry(error: impl Into<String>) -> Outcome {
        Outcome::Retry { after: None, error: error.into() }
    }
}

/// A job's payload: free-form JSON its handler reads.
pub type JobPayload = Value;

/// A job handler. Runs on a worker thread; may block.
pub type Handler = fn(&App, &JobCtx, &JobPayload) -> Outcome;

/// A job to enqueue.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub kind: String,
    pub payload: JobPayload,
    pub dedupe_key: Option<String>,
    pub priority: i32,
    /// Earliest run time, epoch milliseconds; `None` = now.
    pub run_at: Option<i64>,
    pub max_attempts: Option<u32>,
    pub workspace_id: Option<String>,
}

impl NewJob {
    pub fn new(kind: &str, payload: JobPayload) -> NewJob {
        NewJob {
            kind: kind.to_string(),
            payload,
            dedupe_key: None,
            priority: 0,
            run_at: None,
            max_attempts: None,
            workspace_id: None,
        }
    }
    pub fn dedupe(mut self, key: impl Into<String>) -> Self {
        self.dedupe_key = Some(key.into());
        self
    }
    pub fn priority(mut self, p: i32) -> Self {
        self.priority = p;
        self
    }
    pub fn workspace(mut self, ws: impl Into<String>) -> Self {
        self.workspace_id = Some(ws.into());
        self
    }
    pub fn run_at(mut self, ms: i64) -> Self {
        self.run_at = Some(ms);
        self
    }
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n);
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enqueued {
    pub id: i64,
    /// False when a job with the same dedupe key already existed.
    pub created: bool,
}

/// Enqueues `job` inside the caller's transaction; its commit wakes the workers, here and on the
/// other nodes ([`Jobs::waker`]).
pub fn enqueue_tx(tx: &Tx, now_ms: i64, default_max_attempts: u32, job: &NewJob) -> Result<Enqueued> {
    let e = store::insert(tx, now_ms, default_max_attempts, job)?;
    // one already queued under its dedupe key woke them when it was
    if e.created {
        tx.note_job_queued();
    }
    Ok(e)
}

/// [`enqueue_tx`] when the caller needs neither the job's id nor whether it was new: on
/// PostgreSQL the insert goes with the transaction's next statement or its commit.
pub fn enqueue_tx_deferred(tx: &Tx, now_ms: i64, default_max_attempts: u32, job: &NewJob) -> Result<()> {
    tx.note_job_queued();
    store::insert_deferred(tx, now_ms, default_max_attempts, job)
}

/// Queues a job that runs once per period (a daily cleanup): `key` names the period, so however
/// often this is called for it, one job is queued; it runs at `run_at_ms` (at once when that has
/// passed).
pub fn schedule_once(app: &App, kind: &str, key: &str, run_at_ms: i64) -> Result<()> {
    let job = NewJob::new(kind, serde_json::json!({})).dedupe(key).run_at(run_at_ms).priority(-2);
    app.db.write(|tx| enqueue_tx(tx, app.clock.now_ms(), app.jobs.default_max_attempts(), &job))?;
    Ok(())
}

/// What a running handler can see and do.
pub struct JobCtx<'a> {
    pub id: i64,
    pub kind: String,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// The last attempt: a retry after it fails the job.
    pub max_attempts: u32,
    jobs: &'a Jobs,
    db: &'a Db,
    owner: String,
    clock: &'a dyn crate::clock::Clock,
}

impl JobCtx<'_> {
    /// Extends the lease; call between long steps so a slow job is not taken for a dead one.
    pub fn heartbeat(&self) {
        let until = self.clock.now_ms() + self.jobs.lease.as_millis() as i64;
        if let Err(e) = self.db.write(|tx| store::extend_lease(tx, self.id, &self.owner, until)) {
            tracing::warn!(job = self.id, error = %e, "could not extend a job lease");
        }
    }
    /// True once shutdown has begun: long handlers should stop at a safe point and return
    /// [`Outcome::Release`].
    pub fn stopping(&self) -> bool {
        self.jobs.stop.load(Ordering::SeqCst)
    }
}

struct Signal {
    generation: Mutex<u64>,
    cv: Condvar,
}

/// The queue's in-process side: handler registry, worker threads, wake-ups.
pub struct Jobs {
    handlers: HashMap<&'static str, Handler>,
    /// The registered kinds as a JSON array: only these are claimed. A job of a kind this build
    /// has no handler for (yet) stays queued instead of failing.
    kinds: String,
    signal: Arc<Signal>,
    done_signal: Signal,
    stop: AtomicBool,
    busy: AtomicUsize,
    threads: Mutex<Vec<JoinHandle<()>>>,
    process_id: String,
    lease: Duration,
    max_attempts: u32,
    /// On PostgreSQL: tells the other nodes' workers when jobs are queued.
    announce: Option<crate::cluster::Announce>,
}

/// Wakes the workers waiting on `signal`, and with `announce` the other nodes'.
fn wake(signal: &Signal, announce: Option<&crate::cluster::Announce>) {
    if let Some(a) = announce {
        a.send(&crate::cluster::Wake::Jobs);
    }
    let mut g = signal.generation.lock();
    *g += 1;
    signal.cv.notify_all();
}

/// Backoff before attempt `attempt + 1`: 2 s doubling to at most 15 minutes, ±25 % jitter.
pub fn backoff(attempt: u32) -> Duration {
    let base_ms = 2_000u64.saturating_mul(1u64 << attempt.saturating_sub(1).min(20));
    let capped = base_ms.min(15 * 60 * 1000);
    let jitter = rand::rng().random_range(0.75..1.25);
    Duration::from_millis((capped as f64 * jitter) as u64)
}

/// The longest [`backoff`] can be for `attempt`, jitter included (tests advance a fake clock by it).
pub fn max_backoff(attempt: u32) -> Duration {
    let base_ms = 2_000u64.saturating_mul(1u64 << attempt.saturating_sub(1).min(20));
    Duration::from_millis((base_ms.min(15 * 60 * 1000) as f64 * 1.25) as u64 + 1)
}

impl Jobs {
    pub fn new(handlers: HashMap<&'static str, Handler>, lease: Duration, max_attempts: u32) -> Jobs {
        let mut kinds: Vec<&str> = handlers.keys().copied().collect();
        kinds.sort();
        Jobs {
            kinds: serde_json::to_string(&kinds).unwrap_or_else(|_| "[]".into()),
            handlers,
            signal: Arc::new(Signal { generation: Mutex::new(0), cv: Condvar::new() }),
            done_signal: Signal { generation: Mutex::new(0), cv: Condvar::new() },
            stop: AtomicBool::new(false),
            busy: AtomicUsize::new(0),
            threads: Mutex::new(Vec::new()),
            process_id: crate::ids::new_id(),
            lease,
            max_attempts,
            announce: None,
        }
    }

    /// Makes [`Jobs::waker`] wake the other nodes' workers too (PostgreSQL), and names this
    /// process's leases after its node (`<node>/<process>:<worker>`), so the node's next start
    /// knows which running jobs were its own.
    pub fn announcing(mut self, announce: Option<crate::cluster::Announce>) -> Jobs {
        if let Some(a) = &announce {
            self.process_id = format!("{}/{}", a.node(), self.process_id);
        }
        self.announce = announce;
        self
    }

    pub fn default_max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// What wakes the workers after a commit that queued a job ([`crate::storage::Db::on_jobs_queued`]).
    pub fn waker(&self) -> impl Fn() + Send + Sync + 'static {
        let (signal, announce) = (self.signal.clone(), self.announce.clone());
        move || wake(&signal, announce.as_ref())
    }

    /// Wakes this node's idle workers.
    pub fn wake_local(&self) {
        wake(&self.signal, None);
    }

    /// Workers currently running a job.
    pub fn busy(&self) -> usize {
        self.busy.load(Ordering::SeqCst)
    }

    /// Worker threads alive.
    pub fn workers_alive(&self) -> usize {
        self.threads.lock().iter().filter(|t| !t.is_finished()).count()
    }

    pub fn is_stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    pub fn has_handler(&self, kind: &str) -> bool {
        self.handlers.contains_key(kind)
    }

    /// Starts `n` worker threads.
    pub fn start(app: &Arc<App>, n: usize) {
        let mut threads = app.jobs.threads.lock();
        for i in 0..n {
            let app = app.clone();
            #[allow(clippy::expect_used, reason = "a process that cannot start its worker threads cannot serve")]
            let t = std::thread::Builder::new()
                .name(format!("steward-worker-{i}"))
                .spawn(move || worker_loop(&app, i))
                .expect("spawn worker thread");
            threads.push(t);
        }
    }

    /// Stops the workers: no new claims; waits up to `grace` for running jobs, then releases the
    /// leases of any still running so they are picked up at the next start.
    pub fn shutdown(&self, db: &Db, grace: Duration) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake_local();
        let deadline = std::time::Instant::now() + grace;
        loop {
            let alive: Vec<bool> = self.threads.lock().iter().map(|t| !t.is_finished()).collect();
            if !alive.iter().any(|a| *a) {
                break;
            }
            if std::time::Instant::now() >= deadline {
                break;
            }
            let mut g = self.done_signal.generation.lock();
            self.done_signal.cv.wait_for(&mut g, Duration::from_millis(100));
        }
        let handles: Vec<JoinHandle<()>> = self.threads.lock().drain(..).collect();
        for h in handles {
            if h.is_finished() {
                let _ = h.join();
            }
        }
        match db.write(|tx| store::release_owned(tx, &self.process_id)) {
            Ok(0) => {}
            Ok(n) => tracing::info!(released = n, "released leases of unfinished jobs"),
            Err(e) => tracing::warn!(error = %e, "could not release job leases"),
        }
    }

    /// When the next job of a kind this process runs is due, or the earliest lease of a running
    /// job ends (ms since the epoch); `None` when nothing is queued or running. Idle workers sleep
    /// until then (at most 1 s).
    pub fn next_due(&self, db: &Db) -> Result<Option<i64>> {
        db.read(|c| store::next_due(c, &self.kinds))
    }

    /// Blocks until no job is due or running, or `timeout` passes; returns whether it is idle.
    /// For tests and tools that run real worker threads.
    pub fn wait_idle(&self, app: &App, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let now = app.clock.now_ms();
            let pending = app.db.read(|c| store::pending_count(c, now, &self.kinds)).unwrap_or(1);
            if pending == 0 && self.busy() == 0 {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            let mut g = self.done_signal.generation.lock();
            self.done_signal.cv.wait_for(&mut g, Duration::from_millis(50));
        }
    }

    fn notify_done(&self) {
        let mut g = self.done_signal.generation.lock();
        *g += 1;
        self.done_signal.cv.notify_all();
    }
}

/// A test hook for crash safety: with `STEWARD_TEST_FAILPOINT` set to `name`, the process aborts
/// here, as a `kill -9` would (the crash tests stop between a piece of work and its commit, or
/// between two commits). Without the variable it does nothing.
pub fn crash_point(name: &str) {
    if std::env::var("STEWARD_TEST_FAILPOINT").is_ok_and(|v| v == name) {
        tracing::error!(failpoint = name, "test failpoint: aborting");
        std::process::abort();
    }
}

/// Enqueues one job in its own transaction and wakes a worker.
pub fn enqueue(app: &App, job: NewJob) -> Result<Enqueued> {
    let now = app.clock.now_ms();
    let max = app.jobs.max_attempts;
    let r = app.db.write(|tx| enqueue_tx(tx, now, max, &job))?;
    Ok(r)
}

/// Runs due jobs on the calling thread until none is left (tests and CLI tools). Returns how many
/// ran.
pub fn run_until_idle(app: &App) -> Result<usize> {
    let owner = format!("{}:inline", app.jobs.process_id);
    let mut n = 0;
    while let Some(job) = claim(app, &owner)? {
        run_one(app, job, &owner);
        n += 1;
    }
    Ok(n)
}

/// Requeues jobs left running by a process that died (call only while holding the data-dir lock);
/// on PostgreSQL, those of this data directory's `node` only.
pub fn recover_orphans(db: &Db, now_ms: i64, node: Option<&str>) -> Result<usize> {
    db.write(|tx| store::recover_orphans(tx, now_ms, node))
}

pub fn get(app: &App, id: i64) -> Result<Option<JobRow>> {
    app.db.read(|c| store::get(c, id))
}

pub fn queue_depth(app: &App) -> Result<Vec<QueueDepth>> {
    app.db.read(store::depth)
}

fn claim(app: &App, owner: &str) -> Result<Option<JobRow>> {
    let now = app.clock.now_ms();
    let lease_until = now + app.jobs.lease.as_millis() as i64;
    app.db.write(|tx| store::claim(tx, now, lease_until, owner, &app.jobs.kinds))
}

fn worker_loop(app: &App, index: usize) {
    let owner = format!("{}:{index}", app.jobs.process_id);
    let mut idle_rounds = 0u32;
    loop {
        if app.jobs.stop.load(Ordering::SeqCst) {
            break;
        }
        let seen = *app.jobs.signal.generation.lock();
        match claim(app, &owner) {
            Ok(Some(job)) => {
                idle_rounds = 0;
                run_one(app, job, &owner);
                continue;
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "could not claim a job"),
        }
        idle_rounds = idle_rounds.saturating_add(1);
        if index == 0 && idle_rounds % 600 == 1 {
            let cutoff = app.clock.now_ms() - 7 * 24 * 3600 * 1000;
            // one node at a time prunes (PostgreSQL); the others skip this round
            let pruned = app
                .db
                .singleton(crate::storage::lock_keys::PRUNE_JOBS, || app.db.write(|tx| store::prune_done(tx, cutoff)));
            if let Err(e) = pruned.and_then(|r| r.transpose()) {
                tracing::warn!(error = %e, "could not prune finished jobs");
            }
        }
        // Sleep until woken, until the next scheduled job is due, or at most 1 s (leases of
        // crashed peers expire without anyone waking us).
        let now = app.clock.now_ms();
        let next_due = app.jobs.next_due(&app.db).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "could not read when the next job is due");
            None
        });
        let wait_ms = next_due.map(|t| (t - now).clamp(5, 1000)).unwrap_or(1000) as u64;
        let mut g = app.jobs.signal.generation.lock();
        if *g == seen && !app.jobs.stop.load(Ordering::SeqCst) {
            app.jobs.signal.cv.wait_for(&mut g, Duration::from_millis(wait_ms));
        }
    }
}

fn run_one(app: &App, job: JobRow, owner: &str) {
    app.jobs.busy.fetch_add(1, Ordering::SeqCst);
    let started = std::time::Instant::now();
    let outcome = match app.jobs.handlers.get(job.kind.as_str()) {
        None => Outcome::Fail(format!("no handler for job kind {:?}", job.kind)),
        Some(handler) => {
            let ctx = JobCtx {
                id: job.id,
                kind: job.kind.clone(),
                attempt: job.attempts,
                max_attempts: job.max_attempts,
                jobs: &app.jobs,
                db: &app.db,
                owner: owner.to_string(),
                clock: app.clock.as_ref(),
            };
            let span = tracing::info_span!("job", id = job.id, kind = %job.kind, attempt = job.attempts);
            let _enter = span.enter();
            match std::panic::catch_unwind(AssertUnwindSafe(|| handler(app, &ctx, &job.payload))) {
                Ok(o) => o,
                // The panic's message can quote the document being processed: the panic hook
                // logged its location inside this span, and the stored error says no more.
                Err(_) => Outcome::retry("the job handler crashed; the server log has where (job id)"),
            }
        }
    };
    let now = app.clock.now_ms();
    let result = app.db.write(|tx| store::finish(tx, &job, owner, now, &outcome));
    match (&outcome, result) {
        (_, Err(e)) => tracing::error!(job = job.id, error = %e, "could not record a job outcome"),
        (Outcome::Done, Ok(_)) => {
            tracing::debug!(job = job.id, kind = %job.kind, ms = started.elapsed().as_millis() as u64, "job done")
        }
        (Outcome::Retry { error, .. }, Ok(dead)) => {
            if dead {
                tracing::warn!(job = job.id, kind = %job.kind, error = %error, "job failed for the last time; dead")
            } else {
                tracing::info!(job = job.id, kind = %job.kind, error = %error, "job failed; will retry")
            }
        }
        (Outcome::Fail(reason), Ok(_)) => {
            tracing::warn!(job = job.id, kind = %job.kind, reason = %reason, "job dead")
        }
        (Outcome::Release, Ok(_)) => tracing::info!(job = job.id, kind = %job.kind, "job released"),
    }
    app.jobs.busy.fetch_sub(1, Ordering::SeqCst);
    app.jobs.notify_done();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        for attempt in 1..30 {
            let b = backoff(attempt);
            assert!(b <= max_backoff(attempt));
            assert!(b >= Duration::from_millis((2_000u64 << (attempt - 1).min(20)).min(900_000) * 3 / 4 - 1));
        }
        assert!(max_backoff(40) <= Duration::from_secs(15 * 60 * 5 / 4 + 1));
    }

    #[test]
    fn a_commit_wakes_the_workers_only_when_it_queued_a_job() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("steward.db"), 1).unwrap();
        let jobs = Jobs::new(HashMap::new(), Duration::from_secs(30), 3);
        db.on_jobs_queued(jobs.waker());
        let woken = || *jobs.signal.generation.lock();
        let job = |key: &str| NewJob::new("test.kind", serde_json::json!({})).dedupe(key);
        let kinds = r#"["test.kind"]"#;
        // a write that queues nothing wakes nobody
        assert_eq!(db.write(|tx| store::pending_count(tx, i64::MAX, kinds)).unwrap(), 0);
        assert_eq!(woken(), 0);
        // a queued job wakes them once its transaction commits, without being asked to
        db.write(|tx| enqueue_tx(tx, 0, 3, &job("a"))).unwrap();
        assert_eq!(woken(), 1);
        db.write(|tx| enqueue_tx_deferred(tx, 0, 3, &job("b"))).unwrap();
        assert_eq!(woken(), 2);
        // one rolled back did not queue it: nobody is woken
        let failed = db.write(|tx| {
            enqueue_tx(tx, 0, 3, &job("c"))?;
            Err::<(), _>(crate::error::Error::invalid("changed its mind"))
        });
        assert!(failed.is_err());
        assert_eq!(woken(), 2);
        assert_eq!(db.read(|c| store::pending_count(c, i64::MAX, kinds)).unwrap(), 2);
    }
}
