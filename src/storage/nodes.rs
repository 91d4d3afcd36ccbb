//! What several nodes on one PostgreSQL database share beyond rows (docs/scale-out.md): the
//! notifications that wake the other nodes, and the advisory locks under which one-time and
//! singleton work runs on one node at a time. On SQLite there is one process per data directory
//! (its lock says so): nothing to notify, and every lock is already held.

use super::postgres::listen::{self, Listener};
use super::postgres::session::{Manager, Session};
use super::{Backend, Conn, Db, params};
use crate::error::Result;

/// Sends notifications to every node listening on the database (PostgreSQL only).
#[derive(Clone)]
pub struct Notifier {
    pool: r2d2::Pool<Manager>,
}

impl Notifier {
    /// `NOTIFY steward, payload` on a pooled connection, outside any transaction: callers send
    /// after their write committed. Payloads are kinds and ids, never user text.
    pub fn send(&self, payload: &str) -> Result<()> {
        let pooled = self.pool.get()?;
        let session = Session::new(&pooled, false);
        Conn::pg(&session).query_row(
            "SELECT 1 FROM (SELECT pg_notify(?1, ?2)) AS sent",
            params![listen::CHANNEL, payload],
            |r| r.get::<_, i64>(0),
        )?;
        Ok(())
    }
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
    /// The notifier of a PostgreSQL database (`None` on SQLite).
    pub fn notifier(&self) -> Option<Notifier> {
        match &self.backend {
            Backend::Postgres { pool, .. } => Some(Notifier { pool: pool.clone() }),
            Backend::Sqlite { .. } => None,
        }
    }

    /// Starts this node's listening line (`None` on SQLite); see [`listen::start`].
    pub fn listen(&self, deliver: impl Fn(Option<&str>) + Send + Sync + 'static) -> Option<Listener> {
        match &self.backend {
            Backend::Postgres { url, .. } => listen::start(url, deliver),
            Backend::Sqlite { .. } => None,
        }
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
