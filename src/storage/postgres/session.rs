//! What the store seam (`storage::Conn`) runs on when the database is PostgreSQL: a pooled
//! connection with its prepared statements, a session on it (inside a transaction or not), and the
//! two conversions between SQLite's five storage classes, which the stores' parameters and column
//! types speak, and PostgreSQL's types.
//!
//! A parameter is converted to the type PostgreSQL inferred for its placeholder (an integer for a
//! `text` placeholder is written as its digits, a 0/1 for a `boolean` as the boolean), and a column
//! comes back as the storage class SQLite would have given (every integer width and `boolean` as
//! an integer, `numeric` as an integer or a real, `jsonb` as its text), so the stores' own
//! `FromSql` conversions apply unchanged.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use super::wire::Wire;

use bytes::{BufMut, BytesMut};
use parking_lot::Mutex;
use postgres::Statement;
use postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};
use rusqlite::types::Value;

use super::super::dialect::{self, Translated};

/// A PostgreSQL error as a store sees it (inside rusqlite's error type): its message is the
/// server's, not the driver's "db error".
#[derive(Debug)]
pub struct PgError(pub postgres::Error, pub Option<String>);

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PostgreSQL: {}", super::plain(&self.0))?;
        // the statement (its text, never its values), for the operator who reads the log
        match &self.1 {
            Some(sql) => write!(f, " in: {}", sql.split_whitespace().collect::<Vec<_>>().join(" ")),
            None => Ok(()),
        }
    }
}

impl std::error::Error for PgError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// The round trips to PostgreSQL this process has waited for (statements, preparations and
/// transaction control; `steward_db_round_trips_total`).
pub static ROUND_TRIPS: AtomicU64 = AtomicU64::new(0);

/// A pooled PostgreSQL connection and the statements prepared on it (by translated text). Its
/// requests are run by the thread that holds it (`wire`).
pub struct PgClient {
    pub(crate) client: tokio_postgres::Client,
    wire: RefCell<Wire>,
    pub(crate) statements: RefCell<HashMap<String, Statement>>,
    lock: RefCell<Option<Statement>>,
    /// [`RELEASE_PREPARE`], prepared with the first statement prepared in a transaction.
    release: RefCell<Option<Statement>>,
}

/// Ends the savepoint a statement's first preparation in a transaction is made under.
const RELEASE_PREPARE: &str = "RELEASE SAVEPOINT steward_prepare";

impl PgClient {
    /// Runs `f`, one round trip on this connection, on the calling thread (counted).
    pub(crate) fn trip<F: std::future::Future>(&self, f: F) -> F::Output {
        ROUND_TRIPS.fetch_add(1, Ordering::Relaxed);
        self.wire.borrow_mut().run(f)
    }

    /// `SELECT pg_advisory_xact_lock($1)`, prepared once per connection (outside any transaction:
    /// it is asked for before a transaction's first round trip).
    fn lock_statement(&self) -> Result<Statement, postgres::Error> {
        if let Some(st) = self.lock.borrow().as_ref() {
            return Ok(st.clone());
        }
        let st = self.trip(self.client.prepare_typed("SELECT pg_advisory_xact_lock($1)", &[Type::INT8]))?;
        *self.lock.borrow_mut() = Some(st.clone());
        Ok(st)
    }
}

/// The statements a connection keeps prepared at most (then it starts over).
const KEPT_STATEMENTS: usize = 512;

/// Opens pooled connections (`r2d2`), all with one configuration and TLS connector (read from
/// the URL once: the root file, and TLS sessions resumed across connections).
pub struct Manager {
    config: tokio_postgres::Config,
    tls: super::tls::Tls,
}

impl Manager {
    pub fn new(url: &str) -> crate::error::Result<Manager> {
        let (mut config, tls) = super::config_of(url)?;
        // the durability of the SQLite mode (WAL, synchronous=NORMAL: a crash may lose the last
        // commits, never consistency), without a disk flush per commit under the write lock;
        // `?options=-c%20synchronous_commit%3Don` in the URL asks for a flush per commit
        if config.get_options().is_none() {
            config.options("-c synchronous_commit=off");
        }
        Ok(Manager { config, tls })
    }
}

/// Why a pooled connection could not be made.
#[derive(Debug)]
pub struct ConnectError(String);

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConnectError {}

impl r2d2::ManageConnection for Manager {
    type Connection = PgClient;
    type Error = ConnectError;

    fn connect(&self) -> Result<PgClient, ConnectError> {
        let (client, wire) = super::wire::connect(&self.config, &self.tls).map_err(ConnectError)?;
        Ok(PgClient {
            client,
            wire: RefCell::new(wire),
            statements: RefCell::new(HashMap::new()),
            lock: RefCell::new(None),
            release: RefCell::new(None),
        })
    }

    fn is_valid(&self, conn: &mut PgClient) -> Result<(), ConnectError> {
        conn.trip(conn.client.simple_query("")).map(|_| ()).map_err(|e| ConnectError(super::plain(&e)))
    }

    fn has_broken(&self, conn: &mut PgClient) -> bool {
        conn.client.is_closed()
    }
}

/// What `storage::Conn` asks of PostgreSQL.
pub trait PgExec {
    /// The prepared statement of `sql` (in PostgreSQL's dialect), prepared once per connection;
    /// with `types`, its parameters have those types (for a statement whose parameters PostgreSQL
    /// cannot type by itself, as in `?1 IS NULL OR x = ?1`).
    fn statement(&self, sql: &str, types: &[Type]) -> Result<Statement, postgres::Error>;
    fn query(&self, st: &Statement, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<postgres::Row>, postgres::Error>;
    fn execute(&self, st: &Statement, params: &[&(dyn ToSql + Sync)]) -> Result<u64, postgres::Error>;
    fn batch_execute(&self, sql: &str) -> Result<(), postgres::Error>;
    /// True inside a transaction (`Db::write`).
    fn in_transaction(&self) -> bool;
    /// Starts a transaction with `begin` (its `BEGIN …`), sent together with the transaction's
    /// first statement: one round trip for both.
    fn begin(&self, begin: &'static str);
    /// Ends the transaction with `end` (`COMMIT` or `ROLLBACK`), after what is deferred (a
    /// `ROLLBACK` drops that); nothing to send when it never ran or deferred a statement.
    fn end(&self, end: &str) -> Result<(), postgres::Error>;
    /// Notes that a statement of the session writes an identity table.
    fn note_identity_write(&self);
    /// Runs `st` in the transaction without waiting for it: it is written with the transaction's
    /// next request (a statement, or its `COMMIT`), in the same round trip. For statements whose
    /// result the caller does not read, whose arguments were checked ([`convertible`]); should
    /// one fail, that next request fails with its error (the transaction is then aborted, and
    /// rolled back).
    ///
    /// With `rows`, a query: its rows are put there once it has run.
    fn defer(&self, st: Statement, args: Vec<Arg>, sql: &str, rows: Option<RowsSlot>) -> Result<(), postgres::Error>;
    /// The text of the deferred statement whose failure the last request returned, if that is
    /// what failed (taken: asked once).
    fn deferred_failure(&self) -> Option<String>;
}

/// A statement sent with the transaction's next request ([`PgExec::defer`]).
struct Deferred {
    st: Statement,
    args: Vec<Arg>,
    sql: String,
    rows: Option<RowsSlot>,
}

/// Where a deferred query's rows are put when it has run.
pub type RowsSlot = std::rc::Rc<RefCell<Option<Vec<postgres::Row>>>>;

/// Deferred statements are written with the next request; past this many they go at once (one
/// round trip for all of them).
const MAX_DEFERRED: usize = 16;
// `join_all` polls (so writes) its futures in order only up to 30 of them: a start, its lock and
// the deferred statements must stay below
const _: () = assert!(MAX_DEFERRED + 2 <= 30);

/// Converts `args` for `st` as they will be sent, so a value that cannot be (text for an integer
/// placeholder, say) fails when its statement is deferred: once deferred, such a statement would
/// not be sent at all while the transaction went on.
pub fn convertible(st: &Statement, args: &[Arg]) -> Result<(), BoxError> {
    if st.params().len() != args.len() {
        return Err(format!("{} parameters expected, {} given", st.params().len(), args.len()).into());
    }
    let mut scratch = BytesMut::new();
    for (arg, ty) in args.iter().zip(st.params()) {
        arg.to_sql_checked(ty, &mut scratch)?;
        scratch.clear();
    }
    Ok(())
}

/// A session on one pooled connection, inside a transaction (writes) or not (reads).
pub struct Session<'a> {
    client: &'a PgClient,
    in_transaction: bool,
    /// A transaction's start, not sent yet ([`PgExec::begin`]), and the advisory lock it takes
    /// first.
    opening: RefCell<Option<(&'static str, Option<i64>)>>,
    /// Whether a statement wrote an identity table ([`PgExec::note_identity_write`]).
    wrote_identity: std::cell::Cell<bool>,
    /// Statements waiting for the next request ([`PgExec::defer`]).
    deferred: RefCell<Vec<Deferred>>,
    /// The text of the deferred statement that failed ([`PgExec::deferred_failure`]).
    failed: RefCell<Option<String>>,
    /// The first error PostgreSQL returned in the transaction (which it aborted), kept even when
    /// its caller went on: a `COMMIT` would then roll back without saying so, so the commit
    /// refuses ([`Transaction::commit`]).
    aborted: RefCell<Option<String>>,
}

impl<'a> Session<'a> {
    pub fn new(client: &'a PgClient, in_transaction: bool) -> Self {
        Session {
            client,
            in_transaction,
            opening: RefCell::new(None),
            wrote_identity: Default::default(),
            deferred: RefCell::new(Vec::new()),
            failed: RefCell::new(None),
            aborted: RefCell::new(None),
        }
    }

    /// True once a statement of the session wrote an identity table.
    pub fn wrote_identity(&self) -> bool {
        self.wrote_identity.get()
    }

    /// Runs `f`, one request, in one round trip with what is not sent yet: the transaction's
    /// start (`BEGIN`, then its lock) and the deferred statements, written in that order before
    /// the request. If one of them fails the request fails too, inside the aborted transaction,
    /// never outside it, and the first failure is returned. An error from the server inside a
    /// transaction is noted ([`Session::aborted`]).
    fn send<T>(&self, f: impl std::future::Future<Output = Result<T, postgres::Error>>) -> Result<T, postgres::Error> {
        let out = self.send_pipelined(f);
        if let Err(e) = &out
            && self.in_transaction
            && e.as_db_error().is_some()
        {
            self.aborted.borrow_mut().get_or_insert_with(|| super::plain(e));
        }
        out
    }

    /// True when the transaction sent nothing and has nothing deferred: its end needs no round
    /// trip (its pending start is dropped).
    fn ends_empty(&self) -> bool {
        self.deferred.borrow().is_empty() && self.opening.borrow_mut().take().is_some()
    }

    fn send_pipelined<T>(
        &self,
        f: impl std::future::Future<Output = Result<T, postgres::Error>>,
    ) -> Result<T, postgres::Error> {
        use futures::FutureExt;
        type Ahead<'f> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), postgres::Error>> + 'f>>;
        // the lock's statement first: should preparing it fail, the start is still to be sent
        let lock = match *self.opening.borrow() {
            Some((_, Some(key))) => Some((self.client.lock_statement()?, key)),
            _ => None,
        };
        let opening = self.opening.borrow_mut().take();
        let deferred = std::mem::take(&mut *self.deferred.borrow_mut());
        if opening.is_none() && deferred.is_empty() {
            return self.client.trip(f);
        }
        let pg = &self.client.client;
        let lock_key: Vec<&(dyn ToSql + Sync)> = lock.iter().map(|(_, key)| key as _).collect();
        let params: Vec<Vec<&(dyn ToSql + Sync)>> =
            deferred.iter().map(|d| d.args.iter().map(|a| a as _).collect()).collect();
        let mut ahead: Vec<Ahead<'_>> = Vec::with_capacity(deferred.len() + 2);
        if let Some((begin, _)) = opening {
            ahead.push(Box::pin(pg.batch_execute(begin)));
            if let Some((st, _)) = &lock {
                ahead.push(Box::pin(pg.execute(st, &lock_key).map(|r| r.map(drop))));
            }
        }
        let starts = ahead.len();
        for (d, p) in deferred.iter().zip(&params) {
            match &d.rows {
                None => ahead.push(Box::pin(pg.execute(&d.st, p).map(|r| r.map(drop)))),
                Some(slot) => {
                    ahead.push(Box::pin(pg.query(&d.st, p).map(|r| r.map(|rows| *slot.borrow_mut() = Some(rows)))))
                }
            }
        }
        // joined in order: each is written when first polled, so they go out as listed
        let (sent, out) = self.client.trip(futures::future::join(futures::future::join_all(ahead), f));
        for (i, r) in sent.into_iter().enumerate() {
            if let Err(e) = r {
                if let Some(d) = i.checked_sub(starts).and_then(|i| deferred.get(i)) {
                    *self.failed.borrow_mut() = Some(d.sql.clone());
                }
                return Err(e);
            }
        }
        out
    }
}

impl PgExec for Session<'_> {
    fn statement(&self, sql: &str, types: &[Type]) -> Result<Statement, postgres::Error> {
        let key = if types.is_empty() {
            sql.to_string()
        } else {
            format!("{sql}\u{0}{}", types.iter().map(Type::name).collect::<Vec<_>>().join(","))
        };
        if let Some(st) = self.client.statements.borrow().get(&key) {
            return Ok(st.clone());
        }
        // in a transaction, a statement PostgreSQL refuses to prepare would end it: the first
        // preparation (then kept) happens under a savepoint, set in the same round trip; its
        // release goes with the next request (sent now, it would fail, and be logged as an error,
        // each time a preparation fails)
        let st = if self.in_transaction {
            let pg = &self.client.client;
            let savepoint = std::cell::Cell::new(false);
            let kept = self.client.release.borrow().clone();
            let under_savepoint = async {
                let release = async {
                    match kept {
                        Some(st) => Ok(st),
                        None => pg.prepare(RELEASE_PREPARE).await,
                    }
                };
                let (release, set, st) = futures::future::join3(
                    release,
                    pg.batch_execute("SAVEPOINT steward_prepare"),
                    pg.prepare_typed(sql, types),
                )
                .await;
                set?;
                savepoint.set(true);
                Ok((st?, release?))
            };
            match self.send(under_savepoint) {
                Ok((st, release)) => {
                    *self.client.release.borrow_mut() = Some(release.clone());
                    self.defer(release, Vec::new(), RELEASE_PREPARE, None)?;
                    st
                }
                // the transaction was aborted before (a deferred statement, the start): as it is
                Err(e) if !savepoint.get() => return Err(e),
                Err(e) => {
                    self.batch_execute("ROLLBACK TO SAVEPOINT steward_prepare")?;
                    // undone: the transaction goes on (it was not aborted before, or the
                    // savepoint would have failed)
                    self.aborted.borrow_mut().take();
                    return Err(e);
                }
            }
        } else {
            self.send(self.client.client.prepare_typed(sql, types))?
        };
        let mut kept = self.client.statements.borrow_mut();
        if kept.len() >= KEPT_STATEMENTS {
            kept.clear();
        }
        kept.insert(key, st.clone());
        Ok(st)
    }

    fn query(&self, st: &Statement, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<postgres::Row>, postgres::Error> {
        self.send(self.client.client.query(st, params))
    }

    fn execute(&self, st: &Statement, params: &[&(dyn ToSql + Sync)]) -> Result<u64, postgres::Error> {
        self.send(self.client.client.execute(st, params))
    }

    fn batch_execute(&self, sql: &str) -> Result<(), postgres::Error> {
        self.send(self.client.client.batch_execute(sql))
    }

    fn in_transaction(&self) -> bool {
        self.in_transaction
    }

    fn begin(&self, begin: &'static str) {
        *self.opening.borrow_mut() = Some((begin, None));
    }

    fn end(&self, end: &str) -> Result<(), postgres::Error> {
        let commit = end == "COMMIT";
        if !commit {
            self.deferred.borrow_mut().clear();
        }
        if self.ends_empty() {
            return Ok(());
        }
        self.send(self.client.client.batch_execute(end))
    }

    fn note_identity_write(&self) {
        self.wrote_identity.set(true);
    }

    fn defer(&self, st: Statement, args: Vec<Arg>, sql: &str, rows: Option<RowsSlot>) -> Result<(), postgres::Error> {
        let full = {
            let mut deferred = self.deferred.borrow_mut();
            deferred.push(Deferred { st, args, sql: sql.to_string(), rows });
            deferred.len() >= MAX_DEFERRED
        };
        if full {
            self.send(async { Ok(()) })?;
        }
        Ok(())
    }

    fn deferred_failure(&self) -> Option<String> {
        self.failed.borrow_mut().take()
    }
}

/// A write transaction on a session: rolled back when dropped uncommitted (an error or a panic
/// in the store), so the connection goes back to the pool clean.
pub struct Transaction<'a> {
    session: Session<'a>,
    done: bool,
}

impl<'a> Transaction<'a> {
    /// `BEGIN`, then `lock` (an advisory lock key) taken for the transaction: both sent with its
    /// first statement.
    pub fn begin(client: &'a PgClient, lock: i64) -> Transaction<'a> {
        let session = Session::new(client, true);
        *session.opening.borrow_mut() = Some(("BEGIN", Some(lock)));
        Transaction { session, done: false }
    }

    pub fn session(&self) -> &Session<'a> {
        &self.session
    }

    /// Commits; with `notify`, a `NOTIFY` on `channel` sent in the same round trip, before the
    /// `COMMIT` (delivered by PostgreSQL once the commit is done). Should the `NOTIFY` fail, the
    /// `COMMIT` still ends the transaction (rolling it back) and the error is returned.
    ///
    /// A transaction in which PostgreSQL returned an error (which aborts it), even one its caller
    /// went on from, is rolled back and the commit fails; so does one whose deferred statements
    /// fail with the `COMMIT`, naming the statement.
    pub fn commit(mut self, notify: Option<(&str, &str)>) -> crate::error::Result<()> {
        let session = &self.session;
        let aborted = session.aborted.borrow_mut().take();
        if let Some(why) = aborted {
            return Err(crate::Error::internal_msg(format!(
                "PostgreSQL: the transaction was rolled back: a statement in it failed ({why})"
            )));
        }
        self.done = true;
        self.commit_sent(notify).map_err(|e| match self.session.deferred_failure() {
            Some(sql) => crate::Error::internal_msg(format!(
                "PostgreSQL: {} in: {}",
                super::plain(&e),
                sql.split_whitespace().collect::<Vec<_>>().join(" ")
            )),
            None => e.into(),
        })
    }

    fn commit_sent(&self, notify: Option<(&str, &str)>) -> Result<(), postgres::Error> {
        let Some((channel, payload)) = notify else { return self.session.end("COMMIT") };
        if self.session.ends_empty() {
            return Ok(());
        }
        // two simple queries, written in this order after anything deferred (channel and payload
        // are the code's constants and ids: no quote to escape)
        let pg = &self.session.client.client;
        let notify = format!("SELECT pg_notify('{channel}', '{payload}')");
        self.session.send(async {
            let (notified, committed) =
                futures::future::join(pg.batch_execute(&notify), pg.batch_execute("COMMIT")).await;
            notified?;
            committed
        })
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.session.end("ROLLBACK");
        }
    }
}

/// The translations made so far, by SQLite text (statements are a fixed set, plus the few built
/// with a variable number of placeholders).
static TRANSLATED: LazyLock<Mutex<HashMap<String, Arc<Translated>>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// `sql` in PostgreSQL's dialect (cached).
pub fn translate(sql: &str) -> Arc<Translated> {
    if let Some(t) = TRANSLATED.lock().get(sql) {
        return t.clone();
    }
    let t = Arc::new(dialect::to_postgres(sql));
    let mut all = TRANSLATED.lock();
    if all.len() >= 4096 {
        all.clear();
    }
    all.insert(sql.to_string(), t.clone());
    t
}

thread_local! {
    /// Reads the values out of a store's parameters: they are bound to `SELECT ?1, …, ?N` on an
    /// in-memory SQLite connection, exactly as SQLite would bind them, and read back.
    static BINDER: Option<rusqlite::Connection> = rusqlite::Connection::open_in_memory().ok();
}

/// The values of `params` (rusqlite's `Params`: `params![…]`, arrays, iterators), `n` of them.
pub fn values<P: rusqlite::Params>(params: P, n: usize) -> rusqlite::Result<Vec<Value>> {
    BINDER.with(|b| {
        let Some(b) = b else {
            return Err(rusqlite::Error::InvalidQuery);
        };
        let sql = if n == 0 {
            "SELECT 0".to_string()
        } else {
            format!("SELECT {}", (1..=n).map(|i| format!("?{i}")).collect::<Vec<_>>().join(", "))
        };
        let mut st = b.prepare_cached(&sql)?;
        let mut rows = st.query(params)?;
        let Some(row) = rows.next()? else {
            return Ok(Vec::new());
        };
        if n == 0 {
            return Ok(Vec::new());
        }
        (0..n).map(|i| row.get::<_, Value>(i)).collect()
    })
}

/// The types of `values` as PostgreSQL would take them, for a statement (`sql`, translated)
/// PostgreSQL cannot type by itself: a NULL is an integer where the statement compares its
/// placeholder with a number (`$3 = 1`), else text.
pub fn types_of(values: &[Value], sql: &str) -> Vec<Type> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::Integer(_) => Type::INT8,
            Value::Real(_) => Type::FLOAT8,
            Value::Blob(_) => Type::BYTEA,
            Value::Text(_) => Type::TEXT,
            Value::Null => {
                let compared = regex::Regex::new(&format!(r"\${}\s*(=|<>|<=|>=|<|>)\s*-?[0-9]", i + 1))
                    .is_ok_and(|re| re.is_match(sql));
                if compared { Type::INT8 } else { Type::TEXT }
            }
        })
        .collect()
}

/// A parameter on its way to PostgreSQL, converted to its placeholder's type.
#[derive(Debug)]
pub struct Arg(pub Value);

type BoxError = Box<dyn std::error::Error + Sync + Send>;

fn is_text(ty: &Type) -> bool {
    [Type::TEXT, Type::VARCHAR, Type::BPCHAR, Type::NAME, Type::UNKNOWN].contains(ty)
}

impl ToSql for Arg {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        match &self.0 {
            Value::Null => Ok(IsNull::Yes),
            Value::Integer(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*i)?.to_sql(ty, out),
                Type::FLOAT8 => (*i as f64).to_sql(ty, out),
                Type::FLOAT4 => (*i as f32).to_sql(ty, out),
                Type::BOOL => (*i != 0).to_sql(ty, out),
                Type::NUMERIC => numeric_to_sql(&i.to_string(), out),
                _ if is_text(ty) => i.to_string().to_sql(ty, out),
                _ => Err(format!("an integer cannot be passed as {ty}").into()),
            },
            Value::Real(f) => match *ty {
                Type::FLOAT8 => f.to_sql(ty, out),
                Type::FLOAT4 => (*f as f32).to_sql(ty, out),
                Type::INT8 if f.fract() == 0.0 => (*f as i64).to_sql(ty, out),
                Type::NUMERIC => numeric_to_sql(&f.to_string(), out),
                _ if is_text(ty) => f.to_string().to_sql(ty, out),
                _ => Err(format!("a real number cannot be passed as {ty}").into()),
            },
            // PostgreSQL text cannot hold U+0000 (SQLite's can; a visitor may type one): it is
            // written as U+FFFD, as `migrate-store --replace-nul` does
            Value::Text(s) if s.contains('\0') && is_text(ty) => s.replace('\0', "\u{FFFD}").to_sql(ty, out),
            Value::Text(s) => match *ty {
                Type::JSON => {
                    out.put_slice(s.as_bytes());
                    Ok(IsNull::No)
                }
                // binary jsonb and jsonpath: a version byte, then the text
                Type::JSONB | Type::JSONPATH => {
                    out.put_u8(1);
                    out.put_slice(s.as_bytes());
                    Ok(IsNull::No)
                }
                // SQLite's affinity: digits bound to an integer column are that integer
                Type::INT8 => s.trim().parse::<i64>()?.to_sql(ty, out),
                Type::INT4 => s.trim().parse::<i32>()?.to_sql(ty, out),
                Type::FLOAT8 => s.trim().parse::<f64>()?.to_sql(ty, out),
                Type::BYTEA => s.as_bytes().to_sql(ty, out),
                _ => s.to_sql(ty, out),
            },
            Value::Blob(b) => match *ty {
                Type::BYTEA => b.to_sql(ty, out),
                _ => Err(format!("bytes cannot be passed as {ty}").into()),
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// A decimal number in `numeric`'s binary form.
fn numeric_to_sql(decimal: &str, out: &mut BytesMut) -> Result<IsNull, BoxError> {
    let (neg, digits) = match decimal.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, decimal),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if !int.chars().chain(frac.chars()).all(|c| c.is_ascii_digit()) {
        return Err(format!("{decimal} is not a decimal number").into());
    }
    // groups of four digits around the point
    let pad_int = format!("{}{int}", "0".repeat((4 - int.len() % 4) % 4));
    let pad_frac = format!("{frac}{}", "0".repeat((4 - frac.len() % 4) % 4));
    let mut groups: Vec<i16> = Vec::new();
    for chunk in pad_int.as_bytes().chunks(4).chain(pad_frac.as_bytes().chunks(4)) {
        groups.push(std::str::from_utf8(chunk)?.parse()?);
    }
    let int_groups = (pad_int.len() / 4) as i16;
    let lead = groups.iter().take_while(|g| **g == 0).count();
    let groups = &groups[lead.min(groups.len())..];
    let weight = int_groups - 1 - lead as i16;
    out.put_i16(groups.len() as i16);
    out.put_i16(if groups.is_empty() { 0 } else { weight });
    out.put_u16(if neg { 0x4000 } else { 0 });
    out.put_u16(frac.len() as u16);
    for g in groups {
        out.put_i16(*g);
    }
    Ok(IsNull::No)
}

/// A column's raw bytes, whatever its type.
struct Raw<'a>(&'a [u8]);

impl<'a> FromSql<'a> for Raw<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Ok(Raw(raw))
    }
    fn accepts(_: &Type) -> bool {
        true
    }
}

/// Column `i` of `row` as the storage class SQLite would have given.
pub fn column(row: &postgres::Row, i: usize) -> Result<Value, BoxError> {
    let ty = row.columns()[i].type_().clone();
    let Some(Raw(raw)) = row.try_get::<_, Option<Raw<'_>>>(i)? else {
        return Ok(Value::Null);
    };
    Ok(match ty {
        Type::INT8 => Value::Integer(i64::from_sql(&ty, raw)?),
        Type::INT4 => Value::Integer(i32::from_sql(&ty, raw)?.into()),
        Type::INT2 => Value::Integer(i16::from_sql(&ty, raw)?.into()),
        Type::OID => Value::Integer(u32::from_sql(&ty, raw)?.into()),
        Type::BOOL => Value::Integer(bool::from_sql(&ty, raw)?.into()),
        Type::FLOAT8 => Value::Real(f64::from_sql(&ty, raw)?),
        Type::FLOAT4 => Value::Real(f32::from_sql(&ty, raw)?.into()),
        Type::NUMERIC => numeric_from_sql(raw)?,
        Type::BYTEA => Value::Blob(raw.to_vec()),
        Type::JSONB => Value::Text(String::from_utf8(raw.get(1..).unwrap_or_default().to_vec())?),
        _ => Value::Text(String::from_utf8(raw.to_vec())?),
    })
}

/// `numeric`'s binary form as an integer (no fraction, in range) or a real.
fn numeric_from_sql(raw: &[u8]) -> Result<Value, BoxError> {
    let word = |k: usize| -> Result<u16, BoxError> {
        Ok(u16::from_be_bytes([*raw.get(k).ok_or("short numeric")?, *raw.get(k + 1).ok_or("short numeric")?]))
    };
    let (ndigits, weight, sign, dscale) = (word(0)? as usize, word(2)? as i16, word(4)?, word(6)?);
    if sign == 0xC000 {
        return Ok(Value::Real(f64::NAN));
    }
    let mut int: i128 = 0;
    let mut real = 0f64;
    let mut whole = dscale == 0;
    for k in 0..ndigits {
        let d = i128::from(word(8 + 2 * k)?);
        let power = i32::from(weight) - k as i32;
        real += d as f64 * 10000f64.powi(power);
        if power >= 0 {
            int = int.checked_mul(10000).and_then(|v| v.checked_add(d)).ok_or("numeric out of range")?;
        } else if d != 0 {
            whole = false;
        }
    }
    // trailing zero groups the weight implies
    let last_power = i32::from(weight) - ndigits as i32 + 1;
    for _ in 0..last_power.max(0) {
        int = int.checked_mul(10000).ok_or("numeric out of range")?;
    }
    let neg = sign == 0x4000;
    if whole && let Ok(v) = i64::try_from(if neg { -int } else { int }) {
        return Ok(Value::Integer(v));
    }
    Ok(Value::Real(if neg { -real } else { real }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numerics_round_trip_through_the_binary_form() {
        for (text, want) in [
            ("0", Value::Integer(0)),
            ("42", Value::Integer(42)),
            ("-7", Value::Integer(-7)),
            ("10000", Value::Integer(10000)),
            ("123456789012", Value::Integer(123_456_789_012)),
            ("2.5", Value::Real(2.5)),
            ("-0.0625", Value::Real(-0.0625)),
        ] {
            let mut out = BytesMut::new();
            numeric_to_sql(text, &mut out).unwrap();
            assert_eq!(numeric_from_sql(&out).unwrap(), want, "{text}");
        }
    }

    #[test]
    fn parameters_are_read_back_with_their_storage_class() {
        let got = values(rusqlite::params![7i64, 2.5f64, "x", vec![1u8, 2], Option::<i64>::None, true], 6).unwrap();
        assert_eq!(
            got,
            vec![
                Value::Integer(7),
                Value::Real(2.5),
                Value::Text("x".into()),
                Value::Blob(vec![1, 2]),
                Value::Null,
                Value::Integer(1)
            ]
        );
        assert!(values(rusqlite::params![1i64], 2).is_err(), "a missing parameter is an error, as on SQLite");
        assert_eq!(values(rusqlite::params![], 0).unwrap(), Vec::<Value>::new());
    }
}
