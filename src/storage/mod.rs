//! SQLite storage: one writer connection (every write is a `BEGIN IMMEDIATE` transaction) and a
//! pool of read connections, all in WAL mode. Migrations are numbered, append-only `.sql` files in
//! `migrations/`, embedded in the binary and applied at start.
//!
//! Nothing here is async: callers run these functions on a blocking thread (see `App::blocking`).

mod conn;
pub mod dialect;
pub mod migrations;
mod nodes;
pub mod postgres;
pub mod snapshot;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::types::{FromSql, FromSqlResult, ToSql, ToSqlOutput, ValueRef};
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::error::{Error, Result};
use crate::ids::{OrgId, UserId, WorkspaceId};

pub use rusqlite::{OptionalExtension, params, params_from_iter};
impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Error::internal(e)
    }
}

impl From<r2d2::Error> for Error {
    fn from(e: r2d2::Error) -> Self {
        Error::unavailable("the database is busy; try again").with_source(e)
    }
}

pub use conn::{Conn, Later, MappedRows, Row, Rows, Statement, Tx};
pub use nodes::{Notifier, keys as lock_keys};
pub type SqlValue = rusqlite::types::Value;

pub struct Db {
    backend: Backend,
    identity: Arc<IdentityWatch>,
    /// Calls and the wall time spent in them (`steward_db_*` metrics; the scale-out benchmark
    /// reads the database time per request from them).
    busy: Busy,
    /// Called after the commit of a write that queued a job (the job queue's wake-up).
    jobs_queued: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
}

#[derive(Default)]
struct Busy {
    calls: AtomicU64,
    nanos: AtomicU64,
}

impl Busy {
    fn add(&self, started: std::time::Instant) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.nanos.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}

#[allow(clippy::large_enum_variant, reason = "one per process, never moved")]
enum Backend {
    Sqlite {
        path: PathBuf,
        writer: Mutex<Connection>,
        readers: r2d2::Pool<SqliteConnectionManager>,
    },
    /// PostgreSQL (docs/scale-out.md): a pool; every write transaction takes [`WRITE_LOCK`].
    Postgres {
        pool: r2d2::Pool<postgres::session::Manager>,
        url: String,
    },
}

/// The advisory lock every PostgreSQL write transaction takes first: one write at a time across
/// all nodes, the guarantee the stores were written for ("STEWRITE" in ASCII).
const WRITE_LOCK: i64 = 0x5354_4557_5249_5445;

/// The tables whose rows decide who a caller is and what it may do: organizations, users,
/// memberships, workspaces, sessions and API tokens. A write to any of them bumps the identity
/// generation, which in-memory caches of authentication results compare against.
const IDENTITY_TABLES: [&str; 6] = ["organizations", "users", "memberships", "workspaces", "sessions", "api_tokens"];

/// Set by the writer connection's update hook when a statement changes a row of an identity
/// table; turned into a generation bump once that write's transaction has ended. On PostgreSQL a
/// write is seen by its statements' text, and another node's by its announcement, which only
/// counts while the listening line is up (`heard`).
#[derive(Default)]
struct IdentityWatch {
    touched: AtomicBool,
    generation: AtomicU64,
    heard: AtomicBool,
    /// This `Db`'s name in its identity announcements (PostgreSQL), so it skips its own.
    origin: String,
}

const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

fn apply_pragmas(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // room for every statement of the request paths (authentication, search), so they stay parsed
    conn.set_prepared_statement_cache_capacity(128);
    conn.execute_batch(
        "PRAGMA synchronous = NORMAL;
         PRAGMA foreign_keys = ON;
         PRAGMA temp_store = MEMORY;
         PRAGMA cache_size = -16000;",
    )
}

impl Db {
    /// Opens (creating if needed) the database at `path` and applies pending migrations.
    pub fn open(path: &Path, read_pool_size: u32) -> Result<Db> {
        let db = Self::open_without_migrating(path, read_pool_size)?;
        db.migrate(None)?;
        Ok(db)
    }

    /// Opens the database without touching its schema (for `steward doctor` and migration tests).
    pub fn open_without_migrating(path: &Path, read_pool_size: u32) -> Result<Db> {
        let writer = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| Error::internal_msg(format!("cannot open the database {}: {e}", path.display())))?;
        writer.pragma_update(None, "journal_mode", "WAL")?;
        apply_pragmas(&writer)?;
        // Every write goes through this connection (the read pool is query_only), and the hook
        // sees each changed row of a rowid table, whichever code path wrote it. (SQLite skips it
        // for WITHOUT ROWID tables and for an unconditional DELETE's truncation: the identity
        // tables are rowid tables and are only deleted from with a WHERE clause.)
        let identity = Arc::new(IdentityWatch::default());
        let watch = identity.clone();
        writer.update_hook(Some(move |_: rusqlite::hooks::Action, _: &str, table: &str, _: i64| {
            if IDENTITY_TABLES.contains(&table) {
                watch.touched.store(true, Ordering::SeqCst);
            }
        }))?;
        let manager = SqliteConnectionManager::file(path)
            .with_flags(OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)
            .with_init(|c| {
                apply_pragmas(c)?;
                // Every write (a saved search, a usage event) invalidates the readers' page
                // caches; mapped pages make the re-read a memory access instead of a read(2) per
                // page. Only touched pages become resident, and they are the OS's file cache.
                c.execute_batch("PRAGMA query_only = ON; PRAGMA mmap_size = 268435456;")
            });
        let readers = r2d2::Pool::builder()
            .max_size(read_pool_size.max(1))
            .min_idle(Some(1))
            // a SQLite file connection does not go stale: no test query before each use
            .test_on_check_out(false)
            .connection_timeout(Duration::from_secs(10))
            .build(manager)
            .map_err(|e| Error::internal_msg(format!("cannot open read connections: {e}")))?;
        Ok(Db {
            backend: Backend::Sqlite { path: path.to_path_buf(), writer: Mutex::new(writer), readers },
            identity,
            busy: Busy::default(),
            jobs_queued: Default::default(),
        })
    }

    /// Applies pending migrations to the PostgreSQL database at `url` (once, under an advisory
    /// lock, however many nodes start together) and opens a pool of `pool_size` connections.
    pub fn open_postgres(url: &str, pool_size: u32) -> Result<Db> {
        // migrated first, on a connection of its own: a bad URL or an unreachable server gets a
        // plain message before any pool is made
        postgres::off_runtime(url, postgres::migrate)?;
        let pool = r2d2::Pool::builder()
            .max_size(pool_size.max(2))
            .min_idle(Some(1))
            .test_on_check_out(false)
            .connection_timeout(Duration::from_secs(10))
            .build(postgres::session::Manager::new(url)?)
            .map_err(|e| Error::unavailable(format!("cannot open PostgreSQL connections: {e}")))?;
        Ok(Db {
            backend: Backend::Postgres { pool, url: url.to_string() },
            identity: Arc::new(IdentityWatch { origin: crate::ids::new_id(), ..IdentityWatch::default() }),
            busy: Busy::default(),
            jobs_queued: Default::default(),
        })
    }

    /// The SQLite file (`None` on PostgreSQL).
    pub fn path(&self) -> Option<&Path> {
        match &self.backend {
            Backend::Sqlite { path, .. } => Some(path),
            Backend::Postgres { .. } => None,
        }
    }

    /// True on PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        matches!(self.backend, Backend::Postgres { .. })
    }

    /// Runs `f` on a pooled read-only connection.
    pub fn read<T>(&self, f: impl FnOnce(&Conn) -> Result<T>) -> Result<T> {
        let started = std::time::Instant::now();
        let out = self.read_inner(f);
        self.busy.add(started);
        out
    }

    /// Database calls so far and the seconds spent in them (pool waits and locks included).
    pub fn busy(&self) -> (u64, f64) {
        (self.busy.calls.load(Ordering::Relaxed), self.busy.nanos.load(Ordering::Relaxed) as f64 / 1e9)
    }

    /// The round trips to the database server so far (`None` on SQLite, which has none).
    pub fn round_trips(&self) -> Option<u64> {
        match self.backend {
            Backend::Sqlite { .. } => None,
            Backend::Postgres { .. } => Some(postgres::session::ROUND_TRIPS.load(Ordering::Relaxed)),
        }
    }

    fn read_inner<T>(&self, f: impl FnOnce(&Conn) -> Result<T>) -> Result<T> {
        match &self.backend {
            Backend::Sqlite { readers, .. } => {
                let conn = readers.get()?;
                f(&Conn::sqlite(&conn))
            }
            Backend::Postgres { pool, .. } => {
                let pooled = pool.get()?;
                let session = postgres::session::Session::new(&pooled, false);
                f(&Conn::pg(&session))
            }
        }
    }

    /// Runs `f` inside a write transaction, alone (SQLite: `BEGIN IMMEDIATE` on the single writer
    /// connection; PostgreSQL: [`WRITE_LOCK`] first); commits when `f` returns `Ok`, rolls back
    /// otherwise.
    pub fn write<T>(&self, f: impl FnOnce(&Tx) -> Result<T>) -> Result<T> {
        let started = std::time::Instant::now();
        let out = self.write_inner(f);
        self.busy.add(started);
        out
    }

    /// Sets what runs after the commit of every write that queued a job
    /// ([`Tx::note_job_queued`]): the job queue's wake-up, set once when the app starts.
    pub fn on_jobs_queued(&self, wake: impl Fn() + Send + Sync + 'static) {
        let _ = self.jobs_queued.set(Box::new(wake));
    }

    fn write_inner<T>(&self, f: impl FnOnce(&Tx) -> Result<T>) -> Result<T> {
        let (out, queued) = match &self.backend {
            Backend::Sqlite { writer, .. } => {
                let mut conn = writer.lock();
                let result = (|| {
                    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                    let t = Tx::sqlite(&tx);
                    let out = f(&t)?;
                    let queued = t.queued_jobs();
                    tx.commit()?;
                    Ok((out, queued))
                })();
                self.end_of_write();
                result
            }
            Backend::Postgres { pool, .. } => {
                let pooled = pool.get()?;
                let tx = postgres::session::Transaction::begin(&pooled, WRITE_LOCK);
                let t = Tx::pg(tx.session());
                let out = f(&t);
                let queued = t.queued_jobs();
                let touched = tx.session().wrote_identity();
                // the other nodes drop their cached authentications when this commits
                let result = out.and_then(|v| {
                    let announce = touched.then(|| nodes::identity_changed(&self.identity.origin));
                    tx.commit(announce.as_deref().map(|a| (postgres::listen::CHANNEL, a)))?;
                    Ok((v, queued))
                });
                if touched {
                    self.identity.generation.fetch_add(1, Ordering::SeqCst);
                }
                result
            }
        }?;
        // committed, the lock released: the workers find the job when they look
        if queued && let Some(wake) = self.jobs_queued.get() {
            wake();
        }
        Ok(out)
    }

    /// Bumps the identity generation if the write that just ended (committed or rolled back)
    /// changed an identity table. Runs with the writer lock held and after the commit, so a
    /// reader that sees the old generation can only have read the rows as they were before.
    fn end_of_write(&self) {
        if self.identity.touched.swap(false, Ordering::SeqCst) {
            self.identity.generation.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Changes whenever a write to one of the identity tables (organizations, users, memberships,
    /// workspaces, sessions, API tokens) ends. Read it before reading those
    /// tables; a result derived from them stays valid while the generation is unchanged.
    ///
    /// On PostgreSQL another node's write moves it when that node's announcement arrives
    /// (docs/scale-out.md, section 5); while this node's listening line is down (or was never
    /// started) it moves on every read, so nothing derived from those tables is kept.
    pub fn identity_generation(&self) -> u64 {
        match self.backend {
            Backend::Postgres { .. } if !self.identity.heard.load(Ordering::SeqCst) => {
                self.identity.generation.fetch_add(1, Ordering::SeqCst)
            }
            _ => self.identity.generation.load(Ordering::SeqCst),
        }
    }

    /// True when results derived from the identity tables may be kept: always on SQLite; on
    /// PostgreSQL while this node hears the other nodes' identity changes (its listening line is
    /// up).
    pub fn caches_identity(&self) -> bool {
        match self.backend {
            Backend::Sqlite { .. } => true,
            Backend::Postgres { .. } => self.identity.heard.load(Ordering::SeqCst),
        }
    }

    /// Applies pending migrations (at open, and in tests that open without migrating; `up_to`
    /// applies to SQLite only).
    pub fn migrate(&self, up_to: Option<u32>) -> Result<Vec<u32>> {
        match &self.backend {
            Backend::Sqlite { writer, .. } => {
                let mut w = writer.lock();
                let applied = migrations::apply(&mut w, up_to);
                self.end_of_write();
                applied
            }
            Backend::Postgres { url, .. } => postgres::off_runtime(url, postgres::migrate),
        }
    }

    pub fn migration_status(&self) -> Result<migrations::Status> {
        match &self.backend {
            Backend::Sqlite { readers, .. } => migrations::status(&*readers.get()?),
            // on a pooled connection: readiness asks on every probe
            Backend::Postgres { .. } => {
                let rows = self.read(|c| {
                    Ok(c.prepare_cached("SELECT version, checksum FROM schema_migrations ORDER BY version")?
                        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                        .collect::<rusqlite::Result<Vec<(u32, String)>>>()?)
                })?;
                Ok(migrations::status_of(postgres::MIGRATIONS, &rows))
            }
        }
    }

    /// A cheap liveness check of the read path.
    pub fn ping(&self) -> Result<()> {
        self.read(|c| Ok(c.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))?)).map(|_| ())
    }

    /// Checkpoints the WAL into the main file (at shutdown).
    pub fn checkpoint(&self) -> Result<()> {
        if let Backend::Sqlite { writer, .. } = &self.backend {
            writer.lock().execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
        }
        Ok(())
    }
}

macro_rules! sql_newtype {
    ($t:ty) => {
        impl ToSql for $t {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(ToSqlOutput::Borrowed(ValueRef::Text(self.0.as_bytes())))
            }
        }
        impl FromSql for $t {
            fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
                String::column_result(value).map(Self)
            }
        }
    };
}
sql_newtype!(OrgId);
sql_newtype!(WorkspaceId);
sql_newtype!(UserId);

/// A JSON text column's value: free-form JSON (its reader knows the shape).
pub type JsonColumn = serde_json::Value;

/// Reads a JSON text column.
pub fn json_col(row: &Row, idx: &str) -> rusqlite::Result<JsonColumn> {
    let s: Option<String> = row.get(idx)?;
    Ok(s.and_then(|s| serde_json::from_str(&s).ok()).unwrap_or(serde_json::Value::Null))
}

/// True when the error is a UNIQUE (or primary key) constraint violation, on either engine.
pub fn is_unique_violation(e: &rusqlite::Error) -> bool {
    match e {
        rusqlite::Error::SqliteFailure(f, _) => {
            f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
        }
        rusqlite::Error::ToSqlConversionFailure(inner) => inner
            .downcast_ref::<postgres::session::PgError>()
            .and_then(|pg| pg.0.code())
            .is_some_and(|code| *code == ::postgres::error::SqlState::UNIQUE_VIOLATION),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_generation_moves_only_with_writes_to_identity_tables() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("t.db"), 2).unwrap();
        let g0 = db.identity_generation();
        db.write(|tx| {
            tx.execute(
                "INSERT INTO organizations (id, name, created_at) VALUES ('org_1', 'Acme', '2026-01-01T00:00:00Z')",
                [],
            )?;
            tx.execute("UPDATE organizations SET name = 'Acme 2' WHERE id = 'org_1'", [])?;
            Ok(())
        })
        .unwrap();
        let g1 = db.identity_generation();
        assert_eq!(g1, g0 + 1, "one bump per write, however many rows it changed");
        db.write(|tx| Ok(tx.execute("CREATE TABLE other (a)", []).map(|_| ())?)).unwrap();
        db.write(|tx| Ok(tx.execute("INSERT INTO other VALUES (1)", []).map(|_| ())?)).unwrap();
        assert_eq!(db.identity_generation(), g1, "other tables leave it alone");
        // a write that fails after touching an identity table still bumps (a spurious miss, never a stale hit)
        let _ = db.write(|tx| {
            tx.execute("DELETE FROM organizations WHERE id = 'org_1'", [])?;
            Err::<(), _>(Error::internal_msg("abandoned"))
        });
        assert_eq!(db.identity_generation(), g1 + 1);
        assert!(
            db.read(|c| Ok(c.query_row("SELECT count(*) FROM organizations", [], |r| r.get::<_, i64>(0))?)).unwrap()
                == 1
        );
    }

    #[test]
    fn pragmas_are_applied_on_both_paths() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("t.db"), 2).unwrap();
        let (mode, fk, sync): (String, i64, i64) = db
            .read(|c| {
                Ok(c.query_row(
                    "SELECT (SELECT journal_mode FROM pragma_journal_mode), (SELECT foreign_keys FROM pragma_foreign_keys), (SELECT synchronous FROM pragma_synchronous)",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )?)
            })
            .unwrap();
        assert_eq!(mode, "wal");
        assert_eq!(fk, 1);
        assert_eq!(sync, 1); // NORMAL
        let mmap: i64 = db.read(|c| Ok(c.query_row("PRAGMA mmap_size", [], |r| r.get(0))?)).unwrap();
        assert_eq!(mmap, 268_435_456, "readers map the file");
        // readers cannot write
        let err = db.read(|c| Ok(c.execute("CREATE TABLE x (a)", [])?)).unwrap_err();
        assert!(
            err.to_string().contains("readonly")
                || err.to_string().contains("read-only")
                || err.to_string().contains("query_only"),
            "{err}"
        );
    }

    #[test]
    fn failed_write_rolls_back() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("t.db"), 1).unwrap();
        db.write(|tx| {
            tx.execute("CREATE TABLE t (a INTEGER)", [])?;
            Ok(())
        })
        .unwrap();
        let r: Result<()> = db.write(|tx| {
            tx.execute("INSERT INTO t VALUES (1)", [])?;
            Err(Error::invalid("nope"))
        });
        assert!(r.is_err());
        let n: i64 = db.read(|c| Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?)).unwrap();
        assert_eq!(n, 0);
    }
}
