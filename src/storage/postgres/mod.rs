//! PostgreSQL: connecting, and the schema's append-only migrations (`migrations/postgres/`), run
//! once under an advisory lock however many nodes start together. `copy` moves a single-node
//! SQLite install into an empty PostgreSQL database (`steward migrate-store`).
//!
//! The PostgreSQL schema starts at version 17 with one baseline (the tables SQLite's migrations
//! 0001–0017 leave); from 18 on each version has a file in both lists, with the same number and
//! name. Like everything in `storage`, nothing here is async: the sync `postgres` client runs on
//! the calling (blocking) thread.

pub mod copy;
pub mod listen;
pub mod session;
mod tls;
mod wire;

use postgres::Client;

use super::migrations::{MIGRATIONS as SQLITE_MIGRATIONS, Migration, checksum, status_of};
use crate::error::{Error, Result};

macro_rules! migration {
    ($v:expr, $name:expr) => {
        Migration {
            version: $v,
            name: $name,
            sql: include_str!(concat!("../../../migrations/postgres/", $name, ".sql")),
        }
    };
}

/// Every PostgreSQL migration, in order. Append only, like SQLite's.
pub const MIGRATIONS: &[Migration] = &[migration!(17, "0017_baseline"), migration!(18, "0018_shared_limits")];

/// The advisory lock key migrations take (`pg_advisory_xact_lock`): "STEWMIGR" in ASCII.
pub(crate) const MIGRATE_LOCK: i64 = 0x5354_4557_4d49_4752;

/// A URL is for this backend when it starts `postgres://` or `postgresql://`.
pub fn is_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

/// More than one `@` before the query: part of a password would be read as the host.
fn unescaped_at(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split('?').next().unwrap_or("").matches('@').count() > 1
}

/// What a message may say of `url`: rebuilt from the parsed URL with user, hosts, ports and
/// database only, so a password (in the authority or as `?password=`) never appears.
pub fn redacted(url: &str) -> String {
    if unescaped_at(url) {
        return "(a PostgreSQL URL with an unescaped @)".into();
    }
    let Ok(config) = tls::strip(url).bare.parse::<postgres::Config>() else {
        return "(an unreadable PostgreSQL URL)".into();
    };
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let host = match h {
                postgres::config::Host::Tcp(name) if name.contains(':') => format!("[{name}]"),
                postgres::config::Host::Tcp(name) => name.clone(),
                postgres::config::Host::Unix(path) => path.display().to_string(),
            };
            match config.get_ports().get(i).or(config.get_ports().first()) {
                Some(port) => format!("{host}:{port}"),
                None => host,
            }
        })
        .collect();
    let user = config.get_user().map(|u| format!("{u}@")).unwrap_or_default();
    let password = if config.get_password().is_some() { " (password hidden)" } else { "" };
    format!("postgres://{user}{}/{}{password}", hosts.join(","), config.get_dbname().unwrap_or(""))
}

/// Connects to the database at `url` (plain TCP or a Unix socket directory as `host`); without a
/// password in the URL, `PGPASSWORD` is used when set.
pub fn connect(url: &str) -> Result<Client> {
    if !is_url(url) {
        return Err(Error::invalid(
            "the database must be given as a PostgreSQL URL: postgres://user@host:5432/database (the password in it, percent-encoded, or in PGPASSWORD)",
        ));
    }
    if unescaped_at(url) {
        return Err(Error::invalid(
            "the PostgreSQL URL has more than one @: write an @ in the user name or password as %40",
        ));
    }
    let (config, tls) = config_of(url)?;
    postgres::Config::from(config)
        .connect(tls)
        .map_err(|e| Error::unavailable(format!("cannot connect to PostgreSQL at {}: {}", redacted(url), plain(&e))))
}

/// `url` read for a connection: the settings tokio-postgres reads, the password from
/// `PGPASSWORD` when the URL has none (so it may stay out of `ps`, as with libpq), and the TLS
/// connector its `sslmode` and `sslrootcert` ask for (`tls.rs`).
pub(crate) fn config_of(url: &str) -> Result<(tokio_postgres::Config, tls::Tls)> {
    let (bare, mode, tls) = tls::settings(url)?;
    let mut config: tokio_postgres::Config = bare
        .parse()
        .map_err(|_| Error::invalid("the PostgreSQL URL cannot be read (postgres://user@host:port/database)"))?;
    // addresses alone: each is its host too (the name TLS needs; tokio-postgres has none then)
    if config.get_hosts().is_empty() {
        for ip in config.get_hostaddrs().to_vec() {
            config.host(ip.to_string());
        }
    }
    // PostgreSQL offers no TLS on a Unix socket (libpq ignores `sslmode` there); a Unix host
    // reached by `hostaddr` is TCP
    let unix = |h: &tokio_postgres::config::Host| matches!(h, tokio_postgres::config::Host::Unix(_));
    let all_unix =
        config.get_hostaddrs().is_empty() && !config.get_hosts().is_empty() && config.get_hosts().iter().all(unix);
    config.ssl_mode(if all_unix { tokio_postgres::config::SslMode::Disable } else { mode });
    if config.get_password().is_none()
        && let Ok(pw) = std::env::var("PGPASSWORD")
    {
        config.password(pw);
    }
    Ok((config, tls))
}

/// Connects to `url` and runs `f` on a thread of its own: the synchronous client must not be
/// used from inside an async runtime (`Db` opens and migrates from one, in tests).
pub fn off_runtime<T: Send>(url: &str, f: impl FnOnce(&mut Client) -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| f(&mut connect(url)?))
            .join()
            .unwrap_or_else(|_| Err(Error::internal_msg("the PostgreSQL migration thread panicked")))
    })
}

/// `url` with its database replaced by `name`.
pub fn with_database(url: &str, name: &str) -> String {
    // a `dbname=` parameter would override the path: it goes
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => {
            let kept: Vec<&str> = q.split('&').filter(|p| !p.starts_with("dbname=")).collect();
            (b, if kept.is_empty() { String::new() } else { format!("?{}", kept.join("&")) })
        }
        None => (url, String::new()),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    match base[scheme_end..].find('/') {
        Some(i) => format!("{}/{name}{query}", &base[..scheme_end + i]),
        None => format!("{base}/{name}{query}"),
    }
}

fn database_name(name: &str) -> Result<&str> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        return Err(Error::invalid(format!("{name:?} is not a database name Steward makes (a-z, 0-9, _)")));
    }
    Ok(name)
}

/// Creates database `name` on the server of `url` (benchmarks and tests); returns its URL.
pub fn create_database(url: &str, name: &str) -> Result<String> {
    let name = database_name(name)?;
    off_runtime(url, |c| Ok(c.batch_execute(&format!("CREATE DATABASE {name}"))?))?;
    Ok(with_database(url, name))
}

/// Drops database `name` on the server of `url`, if it exists.
pub fn drop_database(url: &str, name: &str) -> Result<()> {
    let name = database_name(name)?;
    off_runtime(url, |c| Ok(c.batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))?))?;
    Ok(())
}

/// A PostgreSQL error as one line: the server's message when there is one.
pub fn plain(e: &postgres::Error) -> String {
    use std::error::Error as _;
    match e.as_db_error() {
        Some(db) => db.message().to_string(),
        // the driver's own words ("error connecting to server") and the cause under them
        None => match e.source() {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    }
}

impl From<postgres::Error> for Error {
    fn from(e: postgres::Error) -> Self {
        Error::internal_msg(format!("PostgreSQL: {}", plain(&e)))
    }
}

/// The versions recorded in the database (empty when it has no schema yet).
pub fn applied(c: &mut Client) -> Result<Vec<(u32, String)>> {
    let exists: bool = c.query_one("SELECT to_regclass('schema_migrations') IS NOT NULL", &[])?.get(0);
    if !exists {
        return Ok(Vec::new());
    }
    let rows = c.query("SELECT version, checksum FROM schema_migrations ORDER BY version", &[])?;
    Ok(rows.iter().map(|r| (r.get::<_, i64>(0) as u32, r.get(1))).collect())
}

/// The schema version of the database: its highest applied migration (0 for none).
pub fn schema_version(c: &mut Client) -> Result<u32> {
    Ok(applied(c)?.iter().map(|(v, _)| *v).max().unwrap_or(0))
}

/// The migration status, in SQLite's terms (`doctor`, readiness).
/// The tables Steward's PostgreSQL schema makes (and its migrations' own).
pub fn table_names() -> std::collections::BTreeSet<&'static str> {
    let mut names = std::collections::BTreeSet::from(["schema_migrations"]);
    for m in MIGRATIONS {
        for part in m.sql.split("CREATE TABLE ").skip(1) {
            if let Some(name) = part.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).next() {
                names.insert(name);
            }
        }
    }
    names
}

/// The schema version this binary brings.
pub fn latest() -> u32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// Applies the pending migrations in one transaction under the migration lock; returns the
/// versions applied (empty when another node applied them first).
pub fn migrate(c: &mut Client) -> Result<Vec<u32>> {
    let (name, encoding): (String, String) = {
        let r = c.query_one(
            "SELECT current_database()::text, pg_encoding_to_char(encoding)::text FROM pg_database WHERE datname = current_database()",
            &[],
        )?;
        (r.get(0), r.get(1))
    };
    if encoding != "UTF8" {
        return Err(Error::invalid(format!(
            "the database {name} uses the {encoding} encoding; Steward needs UTF8 (CREATE DATABASE {name} ENCODING 'UTF8' TEMPLATE template0)"
        )));
    }
    let mut tx = c.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATE_LOCK])?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version BIGINT PRIMARY KEY,
            name TEXT COLLATE \"C\" NOT NULL,
            checksum TEXT COLLATE \"C\" NOT NULL,
            applied_at TEXT COLLATE \"C\" NOT NULL
        )",
    )?;
    // read under the lock: a node that migrated meanwhile is seen here
    let rows = tx.query("SELECT version, checksum FROM schema_migrations ORDER BY version", &[])?;
    let done: Vec<(u32, String)> = rows.iter().map(|r| (r.get::<_, i64>(0) as u32, r.get(1))).collect();
    let st = status_of(MIGRATIONS, &done);
    if let Some(v) = st.unknown.first() {
        return Err(Error::internal_msg(format!(
            "this database was written by a newer Steward (schema version {v}, this steward knows up to {}); nothing was changed",
            latest()
        )));
    }
    if let Some(v) = st.modified.first() {
        return Err(Error::internal_msg(format!(
            "migration {v} changed after it was applied to this database; migrations are append-only"
        )));
    }
    let now = crate::clock::rfc3339(chrono::Utc::now());
    let mut applied = Vec::new();
    for m in MIGRATIONS.iter().filter(|m| st.pending.contains(&m.version)) {
        tx.batch_execute(m.sql).map_err(|e| {
            Error::internal_msg(format!("PostgreSQL migration {} ({}) failed: {}", m.version, m.name, plain(&e)))
        })?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES ($1, $2, $3, $4)",
            &[&i64::from(m.version), &m.name, &checksum(m.sql), &now],
        )?;
        applied.push(m.version);
    }
    tx.commit()?;
    Ok(applied)
}

/// Both backends bring the same schema version, and every SQLite migration after the baseline
/// has its PostgreSQL twin (checked by a test, so a migration added to one list only fails CI).
pub fn lists_agree() -> std::result::Result<(), String> {
    let base = MIGRATIONS.first().map_or(0, |m| m.version);
    for m in SQLITE_MIGRATIONS.iter().filter(|m| m.version > base) {
        if !MIGRATIONS.iter().any(|p| p.version == m.version && p.name == m.name) {
            return Err(format!("migration {} ({}) has no PostgreSQL twin in migrations/postgres/", m.version, m.name));
        }
    }
    for m in MIGRATIONS.iter().filter(|m| m.version > base) {
        if !SQLITE_MIGRATIONS.iter().any(|l| l.version == m.version && l.name == m.name) {
            return Err(format!("PostgreSQL migration {} ({}) has no SQLite twin in migrations/", m.version, m.name));
        }
    }
    if latest() != super::migrations::latest() {
        return Err(format!("PostgreSQL is at {} and SQLite at {}", latest(), super::migrations::latest()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_backends_have_the_same_migrations() {
        lists_agree().unwrap();
        let mut last = 0;
        for m in MIGRATIONS {
            assert!(m.version > last && m.name.starts_with(&format!("{:04}_", m.version)), "{}", m.name);
            last = m.version;
        }
    }

    #[test]
    fn a_url_names_another_database() {
        assert_eq!(with_database("postgres://u:p@h:5432/steward", "b1"), "postgres://u:p@h:5432/b1");
        assert_eq!(with_database("postgres://u@h/steward?sslmode=disable", "b1"), "postgres://u@h/b1?sslmode=disable");
        assert_eq!(with_database("postgres://u@h", "b1"), "postgres://u@h/b1");
        assert_eq!(
            with_database("postgres://u@h/postgres?dbname=postgres&sslmode=disable", "b1"),
            "postgres://u@h/b1?sslmode=disable"
        );
        assert_eq!(with_database("postgres://u@%2Ftmp%2Fpg/steward", "b1"), "postgres://u@%2Ftmp%2Fpg/b1");
        assert!(database_name("Robert'); DROP").is_err() && database_name("").is_err());
    }

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redacted("postgres://steward:s3cret@db.internal:5432/steward"),
            "postgres://steward@db.internal:5432/steward (password hidden)"
        );
        assert_eq!(redacted("postgresql://u@h/d?sslmode=disable"), "postgres://u@h:5432/d");
        assert_eq!(redacted("postgres://u@%2Ftmp%2Fpg/d"), "postgres://u@/tmp/pg:5432/d");
        for url in ["postgres://u:pa/ss@h/d", "postgres://u@h/d?password=s3cret", "postgres://u:s3cret@h:5432/d"] {
            let shown = redacted(url);
            assert!(!shown.contains("s3cret") && !shown.contains("pa/ss"), "{url} → {shown}");
        }
        assert_eq!(redacted("nonsense"), "(an unreadable PostgreSQL URL)");
        assert_eq!(redacted("postgres://u:Tr0ub@dor-SEKRET@h/d"), "(a PostgreSQL URL with an unescaped @)");
        assert_eq!(redacted("postgres://u@[::1]:5433/d"), "postgres://u@[::1]:5433/d");
        let e = connect("postgres://u:Tr0ub@dor-SEKRET@h/d").err().unwrap().to_string();
        assert!(e.contains("%40") && !e.contains("SEKRET"), "{e}");
        let e = connect("postgres://u:hunter2@127.0.0.1:1/d").err().unwrap().to_string();
        assert!(!e.contains("hunter2") && e.contains("cannot connect"), "{e}");
        for bad in ["mysql://x", "", "host=h password=p"] {
            let e = connect(bad).err().unwrap().to_string();
            assert!(e.contains("must be given as a PostgreSQL URL") && !e.contains("password=p"), "{e}");
        }
    }
}
