//! The store seam: `Conn`, `Tx`, `Statement`, `Rows` and `Row`, the types every store's SQL runs
//! through. They keep rusqlite's method names, its parameters (`Params`: `params![…]`, arrays,
//! `params_from_iter`), its column conversions (`FromSql`) and its error type, so a store reads
//! the same whatever engine runs it. On PostgreSQL (docs/scale-out.md, section 2) the text is
//! translated (`dialect`), the parameters' values are read out and converted to the placeholders'
//! types, and each column comes back as the storage class SQLite would have given, through the
//! store's own `FromSql` (`postgres::session`).

use std::ops::Deref;
use std::sync::Arc;

use rusqlite::types::{FromSql, FromSqlError, Value, ValueRef};
use rusqlite::{Params, RowIndex};

use super::postgres::session::{self, Arg, PgExec};

/// A connection (or the connection of a transaction) a store reads and writes through.
#[derive(Clone, Copy)]
pub struct Conn<'c> {
    inner: Inner<'c>,
}

#[derive(Clone, Copy)]
enum Inner<'c> {
    Lite(&'c rusqlite::Connection),
    Pg(&'c dyn PgExec),
}

/// A PostgreSQL error, carried in rusqlite's error type (the stores' closures return it).
pub(crate) fn pg_error(e: postgres::Error) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(Box::new(session::PgError(e, None)))
}

/// [`pg_error`] for a request of the session, naming its statement: `sql`, or the deferred
/// statement written before it when that is what failed ([`Tx::execute_deferred`]).
fn pg_failure<'a>(pg: &'a dyn PgExec, sql: &'a str) -> impl Fn(postgres::Error) -> rusqlite::Error + 'a {
    move |e| {
        let sql = pg.deferred_failure().unwrap_or_else(|| sql.to_string());
        rusqlite::Error::ToSqlConversionFailure(Box::new(session::PgError(e, Some(sql))))
    }
}

fn conversion(e: Box<dyn std::error::Error + Send + Sync>) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(e)
}

/// Runs `sql` with `params` on PostgreSQL: the statement and its arguments.
fn pg_prepare<P: Params>(pg: &dyn PgExec, sql: &str, params: P) -> rusqlite::Result<(postgres::Statement, Vec<Arg>)> {
    let t = session::translate(sql);
    if t.writes_identity {
        pg.note_identity_write();
    }
    let values = session::values(params, t.params)?;
    let st = match pg.statement(&t.sql, &[]) {
        Ok(st) => Ok(st),
        // a parameter PostgreSQL cannot type from the text: typed from its value
        Err(e)
            if e.code().is_some_and(|c| {
                *c == postgres::error::SqlState::INDETERMINATE_DATATYPE
                    || *c == postgres::error::SqlState::AMBIGUOUS_PARAMETER
            }) =>
        {
            pg.statement(&t.sql, &session::types_of(&values, &t.sql))
        }
        Err(e) => Err(e),
    }
    .map_err(pg_failure(pg, &t.sql))?;
    Ok((st, values.into_iter().map(Arg).collect()))
}

fn pg_query<P: Params>(pg: &dyn PgExec, sql: &str, params: P) -> rusqlite::Result<PgRows> {
    let (st, args) = pg_prepare(pg, sql, params)?;
    let refs: Vec<&(dyn postgres::types::ToSql + Sync)> = args.iter().map(|a| a as _).collect();
    let rows = pg.query(&st, &refs).map_err(pg_failure(pg, sql))?;
    let names: Arc<[String]> = st.columns().iter().map(|c| c.name().to_string()).collect();
    Ok(PgRows { rows: rows.into_iter(), names })
}

fn pg_execute<P: Params>(pg: &dyn PgExec, sql: &str, params: P) -> rusqlite::Result<usize> {
    let (st, args) = pg_prepare(pg, sql, params)?;
    let refs: Vec<&(dyn postgres::types::ToSql + Sync)> = args.iter().map(|a| a as _).collect();
    Ok(pg.execute(&st, &refs).map_err(pg_failure(pg, sql))? as usize)
}

/// The rows of a PostgreSQL query, decoded one at a time.
struct PgRows {
    rows: std::vec::IntoIter<postgres::Row>,
    names: Arc<[String]>,
}

impl PgRows {
    fn next_row(&mut self) -> Option<rusqlite::Result<PgRow>> {
        let row = self.rows.next()?;
        let values: Result<Vec<Value>, _> = (0..row.len()).map(|i| session::column(&row, i)).collect();
        Some(values.map(|values| PgRow { values, names: self.names.clone() }).map_err(conversion))
    }
}

/// A decoded PostgreSQL row.
struct PgRow {
    values: Vec<Value>,
    names: Arc<[String]>,
}

impl<'c> Conn<'c> {
    /// A SQLite connection (the database, or a copy `ops` works on).
    pub fn sqlite(c: &'c rusqlite::Connection) -> Conn<'c> {
        Conn { inner: Inner::Lite(c) }
    }

    /// A PostgreSQL session (`Db` on PostgreSQL).
    pub(crate) fn pg(s: &'c dyn PgExec) -> Conn<'c> {
        Conn { inner: Inner::Pg(s) }
    }

    /// True on PostgreSQL (for the rare statement that must differ).
    pub fn is_postgres(&self) -> bool {
        matches!(self.inner, Inner::Pg(_))
    }

    pub fn execute<P: Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        match self.inner {
            Inner::Lite(c) => c.execute(sql, params),
            Inner::Pg(pg) => pg_execute(pg, sql, params),
        }
    }

    pub fn execute_batch(&self, sql: &str) -> rusqlite::Result<()> {
        match self.inner {
            Inner::Lite(c) => c.execute_batch(sql),
            Inner::Pg(pg) => {
                let t = session::translate(sql);
                if t.writes_identity {
                    pg.note_identity_write();
                }
                pg.batch_execute(&t.sql).map_err(pg_failure(pg, sql))
            }
        }
    }

    pub fn query_row<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: Params,
        F: FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    {
        match self.inner {
            Inner::Lite(c) => c.query_row(sql, params, |r| f(&Row::lite(r))),
            Inner::Pg(pg) => match pg_query(pg, sql, params)?.next_row() {
                Some(row) => f(&Row::pg(&row?)),
                None => Err(rusqlite::Error::QueryReturnedNoRows),
            },
        }
    }

    pub fn prepare(&self, sql: &str) -> rusqlite::Result<Statement<'c>> {
        match self.inner {
            Inner::Lite(c) => Ok(Statement { inner: StmtInner::Lite(c.prepare(sql)?) }),
            Inner::Pg(pg) => Ok(Statement { inner: StmtInner::Pg(pg, sql.to_string()) }),
        }
    }

    /// [`prepare`](Self::prepare), kept parsed for the next call with the same text (on
    /// PostgreSQL every statement is).
    pub fn prepare_cached(&self, sql: &str) -> rusqlite::Result<Statement<'c>> {
        match self.inner {
            Inner::Lite(c) => Ok(Statement { inner: StmtInner::LiteCached(c.prepare_cached(sql)?) }),
            Inner::Pg(pg) => Ok(Statement { inner: StmtInner::Pg(pg, sql.to_string()) }),
        }
    }

    /// Runs `f` inside one read transaction: everything it reads is the database as of one
    /// moment.
    pub fn snapshot<T>(&self, f: impl FnOnce(&Conn<'_>) -> crate::error::Result<T>) -> crate::error::Result<T> {
        match self.inner {
            Inner::Lite(c) => {
                let tx = c.unchecked_transaction()?;
                let out = f(&Conn::sqlite(&tx))?;
                tx.commit()?;
                Ok(out)
            }
            // a write transaction runs alone (`Db::write`): what it reads does not move
            Inner::Pg(pg) if pg.in_transaction() => f(self),
            Inner::Pg(pg) => {
                pg.begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
                let out = f(self);
                pg.end(if out.is_ok() { "COMMIT" } else { "ROLLBACK" }).map_err(pg_error)?;
                out
            }
        }
    }
}

/// The connection of a write transaction (`Db::write`); everything a `Conn` does, plus the
/// knowledge that it writes.
pub struct Tx<'c> {
    conn: Conn<'c>,
    /// A job was queued in it: its commit wakes the workers ([`super::Db::on_jobs_queued`]).
    queued_jobs: std::cell::Cell<bool>,
}

impl<'c> Tx<'c> {
    pub(super) fn sqlite(tx: &'c rusqlite::Transaction<'_>) -> Tx<'c> {
        Tx { conn: Conn::sqlite(tx), queued_jobs: Default::default() }
    }

    pub(super) fn pg(s: &'c dyn PgExec) -> Tx<'c> {
        Tx { conn: Conn::pg(s), queued_jobs: Default::default() }
    }

    /// Notes that this transaction queued a job (the job queue calls it): once it commits, the
    /// workers are woken, here and on the other nodes.
    pub fn note_job_queued(&self) {
        self.queued_jobs.set(true);
    }

    pub(super) fn queued_jobs(&self) -> bool {
        self.queued_jobs.get()
    }

    /// [`Conn::execute`] for a write whose result the caller does not read (an insert of a record,
    /// an audit event, a meter): on PostgreSQL it is written with the transaction's next statement
    /// or its `COMMIT`, a round trip fewer; should it fail, that statement or the commit fails
    /// with its error and the transaction rolls back (its values are converted first, so one that
    /// cannot be fails here). On SQLite it runs at once.
    pub fn execute_deferred<P: Params>(&self, sql: &str, params: P) -> rusqlite::Result<()> {
        match self.conn.inner {
            Inner::Lite(c) => c.execute(sql, params).map(drop),
            Inner::Pg(pg) => {
                let (st, args) = pg_prepare(pg, sql, params)?;
                session::convertible(&st, &args).map_err(conversion)?;
                pg.defer(st, args, sql, None).map_err(pg_failure(pg, sql))
            }
        }
    }

    /// A query whose rows are read after the transaction's next request: on PostgreSQL it is
    /// written with that request (a statement, or the `COMMIT`), a round trip fewer, as
    /// [`execute_deferred`](Self::execute_deferred); on SQLite it runs at once. It reads the
    /// database as it stands at that point of the transaction (not what later statements
    /// write). A read the server refuses fails that request, and the transaction, on both engines.
    /// [`Later::get`] has the rows once that request has run (after the commit, for one returned
    /// out of `Db::write`); on PostgreSQL it fails before that (on SQLite the rows are there at
    /// once: the PostgreSQL tests are the check that a caller asks late enough), and it converts
    /// the rows then (with `f`): a row that does not convert fails `get`, after the commit.
    pub fn query_later<T, P, F>(&self, sql: &str, params: P, mut f: F) -> rusqlite::Result<Later<Vec<T>>>
    where
        T: 'static,
        P: Params,
        F: FnMut(&Row<'_>) -> rusqlite::Result<T> + 'static,
    {
        match self.conn.inner {
            Inner::Lite(c) => {
                // a failing read fails here, in its transaction, as it does on PostgreSQL
                let mut st = c.prepare_cached(sql)?;
                let rows = st.query_map(params, |r| f(&Row::lite(r)))?.collect::<rusqlite::Result<Vec<T>>>()?;
                Ok(Later { get: Box::new(move || Ok(rows)) })
            }
            Inner::Pg(pg) => {
                let (st, args) = pg_prepare(pg, sql, params)?;
                session::convertible(&st, &args).map_err(conversion)?;
                let names: Arc<[String]> = st.columns().iter().map(|c| c.name().to_string()).collect();
                let slot = session::RowsSlot::default();
                pg.defer(st, args, sql, Some(slot.clone())).map_err(pg_failure(pg, sql))?;
                Ok(Later {
                    get: Box::new(move || {
                        let rows = slot.borrow_mut().take().ok_or_else(|| {
                            crate::error::Error::internal_msg("a later query was read before its transaction sent it")
                        })?;
                        let mut rows = PgRows { rows: rows.into_iter(), names };
                        let mapped = std::iter::from_fn(|| rows.next_row()).map(|row| f(&Row::pg(&row?)));
                        Ok(mapped.collect::<rusqlite::Result<Vec<T>>>()?)
                    }),
                })
            }
        }
    }
}

/// What [`Tx::query_later`] reads, there once the transaction's next request has run.
pub struct Later<T> {
    get: Box<dyn FnOnce() -> crate::error::Result<T>>,
}

impl<T: 'static> Later<T> {
    /// A value known already (a path of the caller's that read nothing later).
    pub fn ready(value: T) -> Later<T> {
        Later { get: Box::new(move || Ok(value)) }
    }

    /// The rows (or what [`map`](Self::map) made of them).
    pub fn get(self) -> crate::error::Result<T> {
        (self.get)()
    }

    /// `f` applied to the rows once they are there.
    pub fn map<U: 'static>(self, f: impl FnOnce(T) -> U + 'static) -> Later<U> {
        Later { get: Box::new(move || (self.get)().map(f)) }
    }

    /// [`map`](Self::map) with a step that may fail (a row that had to be there).
    pub fn and_then<U: 'static>(self, f: impl FnOnce(T) -> crate::error::Result<U> + 'static) -> Later<U> {
        Later { get: Box::new(move || (self.get)().and_then(f)) }
    }
}

impl<'c> Deref for Tx<'c> {
    type Target = Conn<'c>;
    fn deref(&self) -> &Conn<'c> {
        &self.conn
    }
}

/// A prepared statement.
pub struct Statement<'c> {
    inner: StmtInner<'c>,
}

enum StmtInner<'c> {
    Lite(rusqlite::Statement<'c>),
    LiteCached(rusqlite::CachedStatement<'c>),
    /// The session and the SQLite text (translated and prepared when it runs).
    Pg(&'c dyn PgExec, String),
}

/// The SQLite statement, or the PostgreSQL session and text.
enum Target<'a, 'c> {
    Lite(&'a mut rusqlite::Statement<'c>),
    Pg(&'c dyn PgExec, &'a str),
}

impl<'c> Statement<'c> {
    fn target(&mut self) -> Target<'_, 'c> {
        match &mut self.inner {
            StmtInner::Lite(s) => Target::Lite(s),
            StmtInner::LiteCached(s) => Target::Lite(s),
            StmtInner::Pg(pg, sql) => Target::Pg(*pg, sql),
        }
    }

    /// Each row through `f`, lazily.
    pub fn query_map<'s, T, P, F>(&'s mut self, params: P, mut f: F) -> rusqlite::Result<MappedRows<'s, T>>
    where
        P: Params,
        F: FnMut(&Row<'_>) -> rusqlite::Result<T> + 's,
        T: 's,
    {
        match self.target() {
            Target::Lite(st) => {
                let rows = st.query_map(params, move |r| f(&Row::lite(r)))?;
                Ok(MappedRows { inner: Box::new(rows) })
            }
            Target::Pg(pg, sql) => {
                let mut rows = pg_query(pg, sql, params)?;
                let mapped = std::iter::from_fn(move || rows.next_row()).map(move |row| f(&Row::pg(&row?)));
                Ok(MappedRows { inner: Box::new(mapped) })
            }
        }
    }

    /// The rows, one at a time (`while let Some(r) = rows.next()?`).
    pub fn query<P: Params>(&mut self, params: P) -> rusqlite::Result<Rows<'_>> {
        Ok(Rows {
            inner: match self.target() {
                Target::Lite(st) => RowsInner::Lite(st.query(params)?),
                Target::Pg(pg, sql) => RowsInner::Pg(pg_query(pg, sql, params)?, None),
            },
        })
    }

    pub fn query_row<T, P, F>(&mut self, params: P, f: F) -> rusqlite::Result<T>
    where
        P: Params,
        F: FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    {
        match self.target() {
            Target::Lite(st) => st.query_row(params, |r| f(&Row::lite(r))),
            Target::Pg(pg, sql) => match pg_query(pg, sql, params)?.next_row() {
                Some(row) => f(&Row::pg(&row?)),
                None => Err(rusqlite::Error::QueryReturnedNoRows),
            },
        }
    }

    /// True when the query returns a row.
    pub fn exists<P: Params>(&mut self, params: P) -> rusqlite::Result<bool> {
        match self.target() {
            Target::Lite(st) => st.exists(params),
            Target::Pg(pg, sql) => Ok(pg_query(pg, sql, params)?.rows.len() > 0),
        }
    }

    pub fn execute<P: Params>(&mut self, params: P) -> rusqlite::Result<usize> {
        match self.target() {
            Target::Lite(st) => st.execute(params),
            Target::Pg(pg, sql) => pg_execute(pg, sql, params),
        }
    }
}

/// The rows of [`Statement::query_map`], each already mapped.
pub struct MappedRows<'s, T> {
    inner: Box<dyn Iterator<Item = rusqlite::Result<T>> + 's>,
}

impl<T> Iterator for MappedRows<'_, T> {
    type Item = rusqlite::Result<T>;
    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next()
    }
}

/// The rows of [`Statement::query`].
pub struct Rows<'s> {
    inner: RowsInner<'s>,
}

enum RowsInner<'s> {
    Lite(rusqlite::Rows<'s>),
    /// The rows, and the current one (a `Row` borrows it).
    Pg(PgRows, Option<PgRow>),
}

impl Rows<'_> {
    /// The next row, or `None` at the end.
    #[allow(clippy::should_implement_trait, reason = "a lending iterator, as rusqlite's: the row borrows the cursor")]
    pub fn next(&mut self) -> rusqlite::Result<Option<Row<'_>>> {
        match &mut self.inner {
            RowsInner::Lite(rows) => Ok(rows.next()?.map(Row::lite)),
            RowsInner::Pg(rows, current) => {
                *current = rows.next_row().transpose()?;
                Ok(current.as_ref().map(Row::pg))
            }
        }
    }
}

/// One row of a result.
pub struct Row<'r> {
    inner: RowInner<'r>,
}

enum RowInner<'r> {
    Lite(&'r rusqlite::Row<'r>),
    Pg(&'r PgRow),
}

/// A column position or name (what `Row::get` takes, as rusqlite's).
pub trait ColumnIndex: RowIndex {
    /// The position among `names`.
    fn position(&self, names: &[String]) -> Option<usize>;
}

impl ColumnIndex for usize {
    fn position(&self, names: &[String]) -> Option<usize> {
        (*self < names.len()).then_some(*self)
    }
}

impl ColumnIndex for &str {
    fn position(&self, names: &[String]) -> Option<usize> {
        names.iter().position(|n| n.eq_ignore_ascii_case(self))
    }
}

impl<'r> Row<'r> {
    fn lite(r: &'r rusqlite::Row<'r>) -> Row<'r> {
        Row { inner: RowInner::Lite(r) }
    }

    fn pg(r: &'r PgRow) -> Row<'r> {
        Row { inner: RowInner::Pg(r) }
    }

    /// Column `idx` (a position or a name) as `T`.
    pub fn get<I: ColumnIndex, T: FromSql>(&self, idx: I) -> rusqlite::Result<T> {
        match self.inner {
            RowInner::Lite(r) => r.get(idx),
            RowInner::Pg(r) => {
                let i = idx.position(&r.names).ok_or(rusqlite::Error::InvalidColumnIndex(r.values.len()))?;
                let value = ValueRef::from(&r.values[i]);
                T::column_result(value).map_err(|e| match e {
                    FromSqlError::InvalidType => {
                        rusqlite::Error::InvalidColumnType(i, r.names[i].clone(), value.data_type())
                    }
                    FromSqlError::OutOfRange(v) => rusqlite::Error::IntegralValueOutOfRange(i, v),
                    other => rusqlite::Error::FromSqlConversionFailure(i, value.data_type(), Box::new(other)),
                })
            }
        }
    }

    /// Column `idx` as it is stored.
    pub fn get_ref<I: ColumnIndex>(&self, idx: I) -> rusqlite::Result<ValueRef<'_>> {
        match self.inner {
            RowInner::Lite(r) => r.get_ref(idx),
            RowInner::Pg(r) => {
                let i = idx.position(&r.names).ok_or(rusqlite::Error::InvalidColumnIndex(r.values.len()))?;
                Ok(ValueRef::from(&r.values[i]))
            }
        }
    }
}
