//! What several nodes on one PostgreSQL database share beyond rows (docs/scale-out.md): the
//! notifications that wake the other nodes, and the advisory locks under which one-time and
//! singleton work runs on one node at a time. On SQLite there is one process per data directory
//! (its lock says so): nothing to notify, and every lock is already held.

use std::sync::atomic::Ordering;

use super::postgres::listen::{self, Line, Listener};
use super::postgres::session::{Manager, Session};
use super::{Backend, Conn, Db, params};
use crate::error::Result;

/// What a write transaction that changed an identity table announces with its commit, `origin`
/// naming the writing process (`<origin>|identity`): every other node then treats its cached
/// authentications as stale (the writer moved its own generation after the commit).
pub fn identity_changed(origin: &str) -> String {
    format!("{origin}{IDENTITY_SUFFIX}")
}

const IDENTITY_SUFFIX: &str = "|identity";

/// Sends notifications to every node listening on the database (PostgreSQL only), from a thread
/// of its own: the caller, a request whose write has committed, does not wait for the round trip,
/// and what is announced meanwhile goes in one.
#[derive(Clone)]
pub struct Notifier {
    queue: std::sync::mpsc::Sender<String>,
}

/// The announcements sent in one round trip at most.
const NOTIFY_BATCH: usize = 100;

impl Notifier {
    /// Starts the sending thread; it ends when every `Notifier` is dropped.
    fn start(pool: r2d2::Pool<Manager>) -> Result<Notifier> {
        let (queue, waiting) = std::sync::mpsc::channel::<String>();
        std::thread::Builder::new()
            .name("steward-notify".into())
            .spawn(move || {
                while let Ok(first) = waiting.recv() {
                    let mut batch = vec![first];
                    batch.extend(waiting.try_iter().take(NOTIFY_BATCH - 1));
                    if let Err(e) = notify(&pool, &batch) {
                        tracing::warn!(error = %e, "could not notify the other nodes");
                    }
                }
            })
            .map_err(|e| crate::error::Error::internal_msg(format!("cannot start the notification thread: {e}")))?;
        Ok(Notifier { queue })
    }

    /// Queues `NOTIFY steward, payload`, sent outside any transaction: callers send after their
    /// write committed. Payloads are kinds and ids, never user text.
    pub fn send(&self, payload: &str) -> Result<()> {
        self.queue
            .send(payload.to_string())
            .map_err(|_| crate::error::Error::unavailable("the notification thread has stopped"))
    }
}

/// Sends `payloads`, in order, in one statement on a pooled connection.
fn notify(pool: &r2d2::Pool<Manager>, payloads: &[String]) -> Result<()> {
    let pooled = pool.get()?;
    let session = Session::new(&pooled, false);
    let list = serde_json::to_string(payloads).map_err(|e| crate::error::Error::internal_msg(e.to_string()))?;
    Conn::pg(&session).query_row(
        "SELECT count(*) FROM (SELECT pg_notify(?1, value) FROM json_each(?2)) AS sent",
        params![listen::CHANNEL, list],
        |r| r.get::<_, i64>(0),
    )?;
    Ok(())
}

/// Holds an advisory lock on a pooled connection; unlocks when dropped (a panic included), so the
/// connection goes back to the pool free of it. A node that dies releases it with its connection.
struct Held<'a> {
    session: Session<'a>,
    key: i64,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let unlocked =
            Conn::pg(&self.session).query_row("SELECT pg_advisory_unlock(?1)", [self.key], |r| r.get::<_, bool>(0));
        if let Err(e) = unlocked {
            tracing::warn!(error = %e, "could not release an advisory lock");
        }
    }
}

impl Db {
    /// A notifier of a PostgreSQL database, with its sending thread (`None` on SQLite, or when
    /// the thread cannot start: the other nodes' fallback polls then pick changes up).
    pub fn notifier(&self) -> Option<Notifier> {
        match &self.backend {
            Backend::Postgres { pool, .. } => Notifier::start(pool.clone())
                .inspect_err(|e| tracing::error!(error = %e, "nodes will not be notified"))
                .ok(),
            Backend::Sqlite { .. } => None,
        }
    }

    /// Starts this node's listening line (`None` on SQLite); see [`listen::start`]. `deliver`
    /// gets `None` when the line is (re)established and every announcement but the identity
    /// changes, which the database keeps for itself: while the line is up, authentication
    /// results are cached until an identity change is announced; while it is down, not at all.
    pub fn listen(&self, deliver: impl Fn(Option<&str>) + Send + Sync + 'static) -> Option<Listener> {
        let Backend::Postgres { url, .. } = &self.backend else { return None };
        let identity = self.identity.clone();
        listen::start(url, move |line| match line {
            Line::Up => {
                identity.generation.fetch_add(1, Ordering::SeqCst);
                identity.heard.store(true, Ordering::SeqCst);
                deliver(None);
            }
            // nothing is cached from now on, and nothing cached before counts
            Line::Down => {
                identity.heard.store(false, Ordering::SeqCst);
                identity.generation.fetch_add(1, Ordering::SeqCst);
            }
            Line::Heard(payload) => match payload.strip_suffix(IDENTITY_SUFFIX) {
                Some(origin) if origin == identity.origin => {}
                Some(_) => {
                    identity.generation.fetch_add(1, Ordering::SeqCst);
                }
                None => deliver(Some(payload)),
            },
        })
    }

    /// Runs `f` unless another node is running the work named `key` right now (PostgreSQL:
    /// `pg_try_advisory_lock`, held until `f` returns); `None` when it was skipped. On SQLite the
    /// process is the only one and `f` always runs.
    pub fn singleton<T>(&self, key: i64, f: impl FnOnce() -> T) -> Result<Option<T>> {
        let Backend::Postgres { pool, .. } = &self.backend else { return Ok(Some(f())) };
        let pooled = pool.get()?;
        let session = Session::new(&pooled, false);
        let got: bool =
            Conn::pg(&session).query_row("SELECT pg_try_advisory_lock(?1)", [key], |r| r.get::<_, bool>(0))?;
        if !got {
            return Ok(None);
        }
        let _held = Held { session, key };
        Ok(Some(f()))
    }

    /// Runs `f` once every other node running the work named `key` is done (PostgreSQL:
    /// `pg_advisory_lock`): nodes starting together do their start-up upkeep one after another,
    /// each finding what the one before did.
    pub fn one_at_a_time<T>(&self, key: i64, f: impl FnOnce() -> T) -> Result<T> {
        let Backend::Postgres { pool, .. } = &self.backend else { return Ok(f()) };
        let pooled = pool.get()?;
        let session = Session::new(&pooled, false);
        Conn::pg(&session)
            .query_row("SELECT 1 FROM (SELECT pg_advisory_lock(?1)) AS locked", [key], |r| r.get::<_, i64>(0))?;
        let _held = Held { session, key };
        Ok(f())
    }
}

/// The advisory lock keys of singleton work (distinct from the write and migration locks).
pub mod keys {
    /// Start-up upkeep (sealing secrets, seeding profiles, queueing daily cleanups).
    pub const STARTUP: i64 = 0x5354_4557_0000_0001;
    /// Pruning finished jobs.
    pub const PRUNE_JOBS: i64 = 0x5354_4557_0000_0002;
}
