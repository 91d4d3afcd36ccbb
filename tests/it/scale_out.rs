//! PostgreSQL (issue 37, first part), on a real server (`pg_server`): the schema is SQLite's,
//! table by table and column by column; nodes starting together migrate once; `steward
//! migrate-store` copies a data directory with every kind of record into an empty database with
//! ids, timestamps and bytes preserved, and refuses what it must.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use postgres::types::Type;
use serde_json::json;

use crate::e2e::BIN;
use crate::pg_server::PgServer;
use crate::support::{Auth, TestApp};

fn pg(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap()
}

/// A fresh SQLite database at this binary's schema version.
fn fresh_sqlite() -> (tempfile::TempDir, rusqlite::Connection) {
    let dir = tempfile::tempdir().unwrap();
    drop(steward::storage::Db::open(&dir.path().join("steward.db"), 1).unwrap());
    let c = rusqlite::Connection::open(dir.path().join("steward.db")).unwrap();
    (dir, c)
}

fn sqlite_type(declared: &str) -> &'static str {
    match declared {
        "INTEGER" => "bigint",
        "REAL" => "double precision",
        "BLOB" => "bytea",
        "TEXT" => "text",
        other => panic!("unexpected SQLite type {other}"),
    }
}

#[test]
fn the_postgresql_schema_is_sqlites_table_by_table() {
    let (_dir, lite) = fresh_sqlite();
    let url = PgServer::get().fresh_db();
    let mut c = steward::storage::postgres::connect(&url).unwrap();
    assert_eq!(steward::storage::postgres::migrate(&mut c).unwrap(), vec![17, 18]);
    assert_eq!(steward::storage::postgres::schema_version(&mut c).unwrap(), steward::storage::migrations::latest());

    let tables: Vec<String> = lite
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(tables.len() > 50, "{tables:?}");
    for t in &tables {
        // name, type, not null, in column order
        let want: Vec<(String, String, bool)> = lite
            .prepare(&format!("SELECT name, type, \"notnull\" OR pk FROM pragma_table_info('{t}') ORDER BY cid"))
            .unwrap()
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, bool>(2)?)))
            .unwrap()
            .map(|r| {
                let (n, ty, nn) = r.unwrap();
                (n, sqlite_type(&ty).to_string(), nn)
            })
            .collect();
        let got: Vec<(String, String, bool)> = c
            .query(
                "SELECT column_name::text, data_type::text, is_nullable = 'NO' FROM information_schema.columns
                 WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
                &[t],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        assert_eq!(got, want, "table {t}");
    }
    for t in &tables {
        // defaults, as SQLite wrote them (PostgreSQL adds a cast)
        let want: Vec<(String, Option<String>)> = lite
            .prepare(&format!("SELECT name, dflt_value FROM pragma_table_info('{t}') ORDER BY cid"))
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let got: Vec<(String, Option<String>)> = c
            .query(
                "SELECT column_name::text, CASE WHEN is_identity = 'YES' THEN NULL ELSE column_default::text END
                 FROM information_schema.columns
                 WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
                &[t],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get::<_, Option<String>>(1).map(|d| d.replace("::text", "").replace("::bigint", ""))))
            .collect();
        assert_eq!(got, want, "defaults of {t}");
        // foreign keys, with their actions, as PostgreSQL states them
        // parent, from columns, to columns, on update, on delete
        type Fk = (String, Vec<String>, Vec<String>, String, String);
        let mut fks: BTreeMap<i64, Fk> = BTreeMap::new();
        let mut stmt = lite
            .prepare(&format!(
                "SELECT id, \"table\", \"from\", \"to\", on_update, on_delete FROM pragma_foreign_key_list('{t}') ORDER BY id, seq"
            ))
            .unwrap();
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            })
            .unwrap();
        for row in rows {
            let (id, parent, from, to, upd, del) = row.unwrap();
            let e = fks.entry(id).or_insert((parent, vec![], vec![], upd, del));
            e.1.push(from);
            e.2.push(to);
        }
        let mut want: Vec<String> = fks
            .values()
            .map(|(parent, from, to, upd, del)| {
                let mut d = format!("FOREIGN KEY ({}) REFERENCES {parent}({})", from.join(", "), to.join(", "));
                for (word, action) in [("UPDATE", upd), ("DELETE", del)] {
                    if action != "NO ACTION" {
                        d.push_str(&format!(" ON {word} {action}"));
                    }
                }
                d
            })
            .collect();
        want.sort();
        let mut got: Vec<String> = c
            .query(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE contype = 'f' AND conrelid = $1::text::regclass",
                &[t],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        got.sort();
        assert_eq!(got, want, "foreign keys of {t}");
    }
    // every named SQLite index exists on PostgreSQL, unique and partial alike
    let indexes: Vec<(String, String)> = lite
        .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (name, sql) in &indexes {
        let def: String = c.query_one("SELECT indexdef FROM pg_indexes WHERE indexname = $1", &[name]).unwrap().get(0);
        assert_eq!(def.contains("UNIQUE"), sql.contains("UNIQUE"), "{name}: {def} / {sql}");
        assert_eq!(def.contains(" WHERE "), sql.contains(" WHERE "), "{name}: {def} / {sql}");
    }
    // text compares and sorts bytewise, as on SQLite, whatever the database's locale
    let other: Vec<String> = c
        .query(
            "SELECT table_name || '.' || column_name FROM information_schema.columns
             WHERE table_schema = current_schema() AND data_type = 'text' AND collation_name IS DISTINCT FROM 'C'",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(other.is_empty(), "{other:?}");
    // the triggers behave as SQLite's: audit events are append-only, a deleted chunk is queued
    // for the search indexes
    c.batch_execute(
        "INSERT INTO audit_events (event_id, actor_type, action, created_at) VALUES ('e1', 'system', 'x', 't')",
    )
    .unwrap();
    let err = c.batch_execute("DELETE FROM audit_events").unwrap_err();
    assert!(steward::storage::postgres::plain(&err).contains("append-only"), "{err:?}");
    c.batch_execute(
        "INSERT INTO organizations (id, name, created_at) VALUES ('o', 'O', 't');
         INSERT INTO workspaces (id, organization_id, name, created_at, updated_at) VALUES ('w', 'o', 'W', 't', 't');
         INSERT INTO sources (id, workspace_id, kind, name, created_at, updated_at) VALUES ('s', 'w', 'api', 'S', 't', 't');
         INSERT INTO documents (id, workspace_id, source_id, title, status, source_kind, created_at, updated_at)
             VALUES ('d', 'w', 's', 'D', 'ready', 'inline_text', 't', 't');
         INSERT INTO chunks (id, document_id, workspace_id, revision, chunk_index, content, start_offset, end_offset,
                             content_hash, created_at)
             VALUES ('c', 'd', 'w', 1, 0, 'x', 0, 1, 'h', 't');
         DELETE FROM documents WHERE id = 'd';",
    )
    .unwrap_or_else(|e| panic!("{}", steward::storage::postgres::plain(&e)));
    let op = c.query_one("SELECT op, chunk_rowid, workspace_id FROM index_ops", &[]).unwrap();
    assert_eq!((op.get::<_, String>(0), op.get::<_, i64>(1), op.get::<_, String>(2)), ("del".into(), 1, "w".into()));
}

#[test]
fn nodes_starting_together_migrate_once() {
    let url = PgServer::get().fresh_db();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let (url, barrier) = (url.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mut c = steward::storage::postgres::connect(&url).unwrap();
                barrier.wait();
                steward::storage::postgres::migrate(&mut c).unwrap()
            })
        })
        .collect();
    let applied: Vec<Vec<u32>> = runs.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(applied.iter().filter(|a| !a.is_empty()).count(), 1, "{applied:?}");
    let mut c = pg(&url);
    let n: i64 = c.query_one("SELECT count(*) FROM schema_migrations", &[]).unwrap().get(0);
    assert_eq!(n, steward::storage::postgres::MIGRATIONS.len() as i64);
}

/// Every row of every table, rendered with its type, sorted: SQLite's side.
fn sqlite_rows(db: &Path) -> BTreeMap<String, Vec<String>> {
    let c = rusqlite::Connection::open(db).unwrap();
    let tables: Vec<String> = c
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
             AND name <> 'schema_migrations' ORDER BY name",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut out = BTreeMap::new();
    for t in tables {
        let mut stmt = c.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
        let n = stmt.column_count();
        let mut rows: Vec<String> = stmt
            .query_map([], |r| {
                Ok((0..n)
                    .map(|i| match r.get_ref(i).unwrap() {
                        rusqlite::types::ValueRef::Null => "null".to_string(),
                        rusqlite::types::ValueRef::Integer(v) => format!("i{v}"),
                        rusqlite::types::ValueRef::Real(v) => format!("r{v:?}"),
                        // as migrate-store writes it: U+0000 as U+FFFD
                        rusqlite::types::ValueRef::Text(v) => {
                            format!("t{:?}", String::from_utf8_lossy(v).replace('\0', "\u{FFFD}"))
                        }
                        rusqlite::types::ValueRef::Blob(v) => format!("b{}", hex_of(v)),
                    })
                    .collect::<Vec<_>>()
                    .join("|"))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        rows.sort();
        out.insert(t, rows);
    }
    out
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The same, read from PostgreSQL, columns in SQLite's order.
fn pg_rows(url: &str, tables: &BTreeMap<String, Vec<String>>, lite: &Path) -> BTreeMap<String, Vec<String>> {
    let lc = rusqlite::Connection::open(lite).unwrap();
    let mut c = pg(url);
    let mut out = BTreeMap::new();
    for t in tables.keys() {
        let cols: Vec<String> = lc
            .prepare(&format!("SELECT name FROM pragma_table_info('{t}') ORDER BY cid"))
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let list = cols.iter().map(|c| format!("\"{c}\"")).collect::<Vec<_>>().join(", ");
        let mut rows: Vec<String> = c
            .query(&format!("SELECT {list} FROM \"{t}\""), &[])
            .unwrap()
            .iter()
            .map(|r| {
                (0..cols.len())
                    .map(|i| {
                        let ty = r.columns()[i].type_().clone();
                        let v = if ty == Type::INT8 {
                            r.get::<_, Option<i64>>(i).map(|v| format!("i{v}"))
                        } else if ty == Type::FLOAT8 {
                            r.get::<_, Option<f64>>(i).map(|v| format!("r{v:?}"))
                        } else if ty == Type::BYTEA {
                            r.get::<_, Option<Vec<u8>>>(i).map(|v| format!("b{}", hex_of(&v)))
                        } else {
                            r.get::<_, Option<String>>(i).map(|v| format!("t{v:?}"))
                        };
                        v.unwrap_or_else(|| "null".into())
                    })
                    .collect::<Vec<_>>()
                    .join("|")
            })
            .collect();
        rows.sort();
        out.insert(t.clone(), rows);
    }
    out
}

/// A data directory with records of every kind the API makes here (documents inline and
/// uploaded with their chunks, a search, a conversation with its turn trace, an eval case, an
/// agent, an API token, a configured connector with a sealed secret, audit events, jobs), its
/// server stopped; returns how many tables hold rows.
async fn filled_data_dir() -> (tempfile::TempDir, usize) {
    // (the data directory is `<dir>/data`)
    let key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    let t = TestApp::with_config(|c| {
        // the data directory to copy is a SQLite one, whatever backend the suite runs on
        c.database = None;
        c.encryption_key = Some(steward::config::Secret::new(steward::config::parse_encryption_key(key).unwrap()));
    });
    let owner = t.owner().await;
    t.doc(&owner, "Opening hours", "We are open from 9:00 to 17:00 on weekdays.", json!({"team": "front"})).await;
    t.upload(&owner, "parking.md", b"# Parking\n\nVisitors park in the blue garage on Elm Street.\n", &[])
        .await
        .assert_status(202);
    t.drain();
    t.search(&owner, json!({"query": "parking garage"})).await;
    let chat = t.post("/api/v1/chat", &owner, json!({"message": "When are you open?"})).await;
    chat.assert_status(200);
    let mid = chat.json()["messageId"].as_str().unwrap().to_string();
    // a visitor may type U+0000, which SQLite text holds and PostgreSQL text cannot
    t.post("/api/v1/chat", &owner, json!({"message": "Where do I park?\u{0}"})).await.assert_status(200);
    t.put(&format!("/api/v1/evals/cases/by-source-message/{mid}"), &owner, json!({})).await.assert_status(201);
    t.post("/api/v1/agents", &owner, json!({"name": "Sales"})).await.assert_status(201);
    t.post("/api/v1/account/tokens", &owner, json!({"name": "ci", "expiresInDays": 3})).await.assert_status(201);
    t.put(
        "/api/v1/connectors/wordpress",
        &owner,
        json!({"config": {"site_url": "https://blog.example.com", "wp_username": "editor", "wp_application_password": "abcd efgh ijkl"}}),
    )
    .await
    .assert_status(200);
    t.drain();
    let TestApp { app, router, dir, .. } = t;
    drop(router);
    drop(app);
    let data = dir.path().join("data");
    assert!(data.join("steward.db").is_file());
    let c = rusqlite::Connection::open(data.join("steward.db")).unwrap();
    // the newest job pruned, as the daily cleanup does: its id is never handed out again
    c.execute("DELETE FROM jobs WHERE id = (SELECT max(id) FROM jobs)", []).unwrap();
    let tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let non_empty = tables
        .iter()
        .filter(|t| c.query_row(&format!("SELECT count(*) > 0 FROM \"{t}\""), [], |r| r.get::<_, bool>(0)).unwrap())
        .count();
    (dir, non_empty)
}

fn migrate_store(from: &Path, to: &str, extra: &[&str]) -> std::process::Output {
    Command::new(BIN).args(["migrate-store", "--from"]).arg(from).args(["--to", to]).args(extra).output().unwrap()
}

/// The fixture holds a NUL character in a message: PostgreSQL text cannot store it.
const REPLACE_NUL: &[&str] = &["--replace-nul"];

fn filled() -> (tempfile::TempDir, std::path::PathBuf, usize) {
    let (dir, n) = tokio::runtime::Runtime::new().unwrap().block_on(filled_data_dir());
    let data = dir.path().join("data");
    (dir, data, n)
}

#[test]
fn migrate_store_copies_every_record_with_ids_timestamps_and_bytes_preserved() {
    let (_dir, data, non_empty) = filled();
    assert!(non_empty >= 20, "the fixture fills {non_empty} tables");
    let url = PgServer::get().fresh_db();
    let out = migrate_store(&data, &url, REPLACE_NUL);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("row counts and checksums verified for every table"), "{stdout}");
    assert!(stdout.contains("1 original ("), "{stdout}");
    assert!(stdout.contains(" of messages.content held a NUL character"), "{stdout}");

    let lite = data.join("steward.db");
    let want = sqlite_rows(&lite);
    let got = pg_rows(&url, &want, &lite);
    for (t, rows) in &want {
        assert_eq!(&got[t], rows, "table {t}");
    }
    // the original is in PostgreSQL, byte for byte
    let mut c = pg(&url);
    let row = c
        .query_one("SELECT d.blob_sha256, b.bytes FROM documents d JOIN blobs b ON b.sha256 = d.blob_sha256", &[])
        .unwrap();
    let (sha, bytes): (String, Vec<u8>) = (row.get(0), row.get(1));
    assert_eq!(std::fs::read(data.join("blobs").join(&sha[..2]).join(&sha)).unwrap(), bytes);
    // identities continue after SQLite's high-water mark, past the ids of deleted rows too
    let mark: i64 = rusqlite::Connection::open(&lite)
        .unwrap()
        .query_row("SELECT seq FROM sqlite_sequence WHERE name = 'jobs'", [], |r| r.get(0))
        .unwrap();
    let max: i64 = c.query_one("SELECT max(id) FROM jobs", &[]).unwrap().get(0);
    assert!(mark > max, "the fixture deleted its newest job ({mark} > {max})");
    let next: i64 = c
        .query_one(
            "INSERT INTO jobs (kind, payload, state, max_attempts, run_at, created_at, updated_at)
             VALUES ('x', '{}', 'done', 1, 0, 0, 0) RETURNING id",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(next, mark + 1);
}

#[test]
fn text_with_a_nul_character_stops_the_copy_unless_replacing_is_asked_for() {
    let (_dir, data, _) = filled();
    let url = PgServer::get().fresh_db();
    let out = migrate_store(&data, &url, &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("messages.content of the row id = ") && err.contains("--replace-nul"), "{err}");
    let rows: i64 = pg(&url).query_one("SELECT count(*) FROM messages", &[]).unwrap().get(0);
    assert_eq!(rows, 0, "nothing was committed");
    assert!(migrate_store(&data, &url, REPLACE_NUL).status.success(), "the same target takes a second run");
}

/// The read-back check is real: a target that changes a value as it is written (a trigger here)
/// fails the copy, which leaves no row behind; a damaged original stops it too.
#[test]
fn a_copy_that_reads_back_differently_or_a_damaged_original_commits_nothing() {
    let (_dir, data, _) = filled();
    let url = PgServer::get().fresh_db();
    let mut c = pg(&url);
    steward::storage::postgres::migrate(&mut steward::storage::postgres::connect(&url).unwrap()).unwrap();
    c.batch_execute(
        "CREATE FUNCTION tamper() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN NEW.content := NEW.content || '!'; RETURN NEW; END $$;
         CREATE TRIGGER tamper BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION tamper();",
    )
    .unwrap();
    let out = migrate_store(&data, &url, REPLACE_NUL);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("messages did not copy whole") && err.contains("nothing was committed"), "{err}");
    for t in ["documents", "messages", "chunks", "jobs", "blobs"] {
        let n: i64 = c.query_one(&format!("SELECT count(*) FROM {t}"), &[]).unwrap().get(0);
        assert_eq!(n, 0, "{t}");
    }
    c.batch_execute("DROP TRIGGER tamper ON messages").unwrap();

    // an original whose bytes no longer match its name
    let blobs: Vec<_> = walk(&data.join("blobs"));
    assert_eq!(blobs.len(), 1);
    let good = std::fs::read(&blobs[0]).unwrap();
    std::fs::write(&blobs[0], b"not what it was").unwrap();
    let out = migrate_store(&data, &url, REPLACE_NUL);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is damaged"), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(&blobs[0], good).unwrap();
    assert!(migrate_store(&data, &url, REPLACE_NUL).status.success());
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

#[test]
fn migrate_store_refuses_a_target_with_rows_a_running_server_and_a_bad_url() {
    let (_dir, data, _) = filled();
    let url = PgServer::get().fresh_db();
    assert!(migrate_store(&data, &url, REPLACE_NUL).status.success());
    let before: i64 = pg(&url).query_one("SELECT count(*) FROM documents", &[]).unwrap().get(0);
    let again = migrate_store(&data, &url, REPLACE_NUL);
    assert!(!again.status.success());
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("not empty"), "{err}");
    let after: i64 = pg(&url).query_one("SELECT count(*) FROM documents", &[]).unwrap().get(0);
    assert_eq!(before, after);

    // a password never appears in what it prints
    let bad = migrate_store(&data, "postgres://steward:hunter2@127.0.0.1:1/nowhere", REPLACE_NUL);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("cannot connect") && !err.contains("hunter2"), "{err}");

    // a database with tables that are not Steward's: refused before anything is created in it
    let other = PgServer::get().fresh_db();
    pg(&other).batch_execute("CREATE TABLE customers (id integer); INSERT INTO customers VALUES (1)").unwrap();
    let refused = migrate_store(&data, &other, REPLACE_NUL);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("tables that are not Steward's (public.customers)"), "{err}");
    let tables: i64 = pg(&other)
        .query_one("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'", &[])
        .unwrap()
        .get(0);
    assert_eq!(tables, 1, "nothing was created");
    // a database that is not UTF8
    let latin = format!("t{}_latin1", std::process::id());
    pg(&PgServer::get().url("postgres"))
        .batch_execute(&format!(
            "CREATE DATABASE {latin} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
        ))
        .unwrap();
    let refused = migrate_store(&data, &PgServer::get().url(&latin), REPLACE_NUL);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && err.contains("uses the LATIN1 encoding; Steward needs UTF8"), "{err}");
    // a SQLite file that is not Steward's
    let foreign = tempfile::tempdir().unwrap();
    rusqlite::Connection::open(foreign.path().join("steward.db"))
        .unwrap()
        .execute_batch("CREATE TABLE foo (x)")
        .unwrap();
    let refused = migrate_store(foreign.path(), &PgServer::get().fresh_db(), REPLACE_NUL);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && err.contains("is not a Steward database"), "{err}");

    // a server using the data directory: refused before anything is read
    let url2 = PgServer::get().fresh_db();
    let server = crate::e2e::Server::start(&data, &[]);
    let busy = migrate_store(&data, &url2, REPLACE_NUL);
    drop(server);
    assert!(!busy.status.success());
    assert!(
        String::from_utf8_lossy(&busy.stderr).contains("stop it before"),
        "{}",
        String::from_utf8_lossy(&busy.stderr)
    );
}

#[test]
fn migrate_store_brings_an_older_data_dir_to_the_current_schema_on_the_way() {
    // the committed schema-13 fixture (see upgrade.rs), copied so the original stays as it is
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/upgrade-0013/data");
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    let status = Command::new("cp").arg("-a").arg(format!("{}/.", fixture.display())).arg(data).status().unwrap();
    assert!(status.success());
    let url = PgServer::get().fresh_db();
    let out = migrate_store(data, &url, REPLACE_NUL);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("brought the copy to schema version"), "{stdout}");
    // the data directory itself is untouched: still at 13
    let c = rusqlite::Connection::open(data.join("steward.db")).unwrap();
    let v: i64 = c.query_row("SELECT max(version) FROM schema_migrations", [], |r| r.get(0)).unwrap();
    assert_eq!(v, 13);
    let docs: i64 = c.query_row("SELECT count(*) FROM documents", [], |r| r.get(0)).unwrap();
    let pg_docs: i64 = pg(&url).query_one("SELECT count(*) FROM documents", &[]).unwrap().get(0);
    assert_eq!(docs, pg_docs);
    assert!(docs > 0);
}

/// Backups on PostgreSQL are PostgreSQL's own: a migrated database dumped with `pg_dump` and
/// restored with `pg_restore` into a new database holds every row, and is at the schema version
/// with nothing left to migrate.
#[test]
fn a_pg_dump_of_a_migrated_database_restores_whole() {
    let (_dir, data, _) = filled();
    let server = PgServer::get();
    let url = server.fresh_db();
    assert!(migrate_store(&data, &url, REPLACE_NUL).status.success());
    let dump = tempfile::tempdir().unwrap();
    let file = dump.path().join("steward.dump");
    let out = server.tool("pg_dump").args(["-Fc", "-d", PgServer::db_name(&url), "-f"]).arg(&file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let restored = server.fresh_db();
    let out = server
        .tool("pg_restore")
        .args(["--no-owner", "--exit-on-error", "-d", PgServer::db_name(&restored)])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lite = data.join("steward.db");
    let want = sqlite_rows(&lite);
    let got = pg_rows(&restored, &want, &lite);
    for (t, rows) in &want {
        assert_eq!(&got[t], rows, "table {t}");
    }
    let mut c = steward::storage::postgres::connect(&restored).unwrap();
    assert_eq!(steward::storage::postgres::migrate(&mut c).unwrap(), Vec::<u32>::new());
    let originals: i64 = c.query_one("SELECT count(*) FROM blobs", &[]).unwrap().get(0);
    assert_eq!(originals, 1);
    drop(c);
    // a node with an empty data directory on the restored database builds its indexes and serves
    let dir = tempfile::tempdir().unwrap();
    let mut config = crate::support::test_config(dir.path());
    config.database = Some(steward::config::Secret::new(restored.clone()));
    let t = TestApp::open(dir, config, vec![]);
    assert!(t.app.search().unwrap().counts().0 >= 2, "{:?}", t.app.search().unwrap().counts());
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let login = t
            .post(
                "/api/v1/auth/login",
                &Auth::None,
                json!({"email": "owner@example.com", "password": "owner-password"}),
            )
            .await;
        login.assert_status(200);
        let owner = Auth::Cookie(login.cookie().unwrap());
        assert_eq!(t.titles(&owner, "parking garage").await.first().map(String::as_str), Some("parking"));
        let r = t.post("/api/v1/chat", &owner, json!({"message": "When are you open?"})).await;
        r.assert_status(200);
        assert!(r.json()["answer"].as_str().unwrap().contains("9:00"), "{}", r.text());
    });
}

/// The store seam on PostgreSQL: a store's SQLite text, its `params!`, its closures and its
/// column types run unchanged (placeholders, `INSERT OR IGNORE`, `json_each`, null-safe `IS ?`,
/// two-argument `max`, booleans and sums read as SQLite gives them), a UNIQUE violation is
/// recognised, a failed write rolls back, and two nodes' writes never interleave.
#[test]
fn the_store_seam_runs_a_stores_sql_on_postgresql() {
    use rusqlite::{OptionalExtension, params};
    use steward::storage::Db;

    let url = PgServer::get().fresh_db();
    let db = Db::open_postgres(&url, 4).unwrap();
    assert!(db.is_postgres() && db.path().is_none());
    assert_eq!(db.migration_status().unwrap().applied, vec![17, 18]);
    db.write(|tx| {
        tx.execute("INSERT INTO organizations (id, name, created_at) VALUES (?1, ?2, ?3)", params!["o1", "Acme", "t0"])?;
        tx.execute(
            "INSERT INTO workspaces (id, organization_id, name, is_default, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
            params!["w1", "o1", "Main", true, "t0", "t0"],
        )?;
        // SQLite's INSERT OR IGNORE: the second is skipped, not an error
        for _ in 0..2 {
            tx.execute("INSERT OR IGNORE INTO organizations (id, name, created_at) VALUES (?1, 'Again', 't1')", ["o1"])?;
        }
        let id: i64 = tx.query_row(
            "INSERT INTO jobs (kind, payload, state, max_attempts, run_at, created_at, updated_at)
             VALUES (?1, '{}', 'queued', 3, ?2, ?2, ?2) RETURNING id",
            params!["k", 5i64],
            |r| r.get(0),
        )?;
        assert_eq!(id, 1);
        Ok(())
    })
    .unwrap();
    db.read(|c| {
        let (name, default, missing): (String, bool, Option<String>) = c.query_row(
            "SELECT o.name, w.is_default, w.id FROM organizations o LEFT JOIN workspaces w ON w.id = ?2 WHERE o.id = ?1",
            params!["o1", "w1"],
            |r| Ok((r.get("name")?, r.get(1)?, r.get::<_, Option<String>>(2)?.filter(|_| false))),
        )?;
        assert_eq!((name.as_str(), default, missing), ("Acme", true, None));
        let none: Option<String> =
            c.query_row("SELECT name FROM organizations WHERE id = ?1", ["nope"], |r| r.get(0)).optional()?;
        assert_eq!(none, None);
        // booleans and sums come back as SQLite gives them
        let (any, total): (bool, i64) =
            c.query_row("SELECT count(*) > 0, sum(attempts + 2) FROM jobs", [], |r| Ok((r.get(0)?, r.get(1)?)))?;
        assert_eq!((any, total), (true, 2));
        let biggest: i64 = c.query_row("SELECT max(max_attempts, 7) FROM jobs", [], |r| r.get(0))?;
        assert_eq!(biggest, 7);
        let kinds: Vec<String> = c
            .prepare("SELECT kind FROM jobs WHERE kind IN (SELECT value FROM json_each(?1)) AND workspace_id IS ?2")?
            .query_map(params![r#"["k","x"]"#, Option::<String>::None], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        assert_eq!(kinds, vec!["k".to_string()]);
        // a parameter PostgreSQL cannot type from the text alone
        for (kind, want) in [(None, 1), (Some("k"), 1), (Some("x"), 0)] {
            let n: i64 = c.query_row("SELECT count(*) FROM jobs WHERE (?1 IS NULL OR kind = ?1)", [kind], |r| r.get(0))?;
            assert_eq!(n, want, "{kind:?}");
        }
        let mut st = c.prepare_cached("SELECT id FROM workspaces WHERE organization_id = ?1 ORDER BY id")?;
        assert!(st.exists(["o1"])?);
        let mut rows = st.query(["o1"])?;
        let mut ids = Vec::new();
        while let Some(r) = rows.next()? {
            ids.push(r.get::<_, String>(0)?);
        }
        assert_eq!(ids, vec!["w1".to_string()]);
        Ok(())
    })
    .unwrap();

    // a UNIQUE violation is recognised as one; a failed write leaves nothing
    let dup = db
        .write(|tx| {
            tx.execute("INSERT INTO sources (id, workspace_id, kind, name, created_at, updated_at) VALUES ('s1', 'w1', 'api', 'S', 't', 't')", [])?;
            match tx.execute("INSERT INTO organizations (id, name, created_at) VALUES ('o1', 'Dup', 't')", []) {
                Err(e) if steward::storage::is_unique_violation(&e) => Err::<(), _>(steward::error::Error::conflict("dup")),
                other => panic!("{other:?}"),
            }
        })
        .unwrap_err();
    assert_eq!(dup.message, "dup");
    let sources: i64 = db.read(|c| Ok(c.query_row("SELECT count(*) FROM sources", [], |r| r.get(0))?)).unwrap();
    assert_eq!(sources, 0, "rolled back");

    // two nodes, four writers each, read-modify-write: no update is lost
    db.write(|tx| {
        tx.execute("INSERT INTO index_state (name, applied_seq, updated_at) VALUES ('counter', 0, 't')", [])?;
        Ok(())
    })
    .unwrap();
    let nodes = [std::sync::Arc::new(db), std::sync::Arc::new(Db::open_postgres(&url, 4).unwrap())];
    let writers: Vec<_> = (0..8)
        .map(|i| {
            let db = nodes[i % 2].clone();
            std::thread::spawn(move || {
                for _ in 0..25 {
                    db.write(|tx| {
                        let n: i64 =
                            tx.query_row("SELECT applied_seq FROM index_state WHERE name = 'counter'", [], |r| {
                                r.get(0)
                            })?;
                        tx.execute("UPDATE index_state SET applied_seq = ?1 WHERE name = 'counter'", [n + 1])?;
                        Ok(())
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    writers.into_iter().for_each(|w| w.join().unwrap());
    let n: i64 = nodes[1]
        .read(|c| Ok(c.query_row("SELECT applied_seq FROM index_state WHERE name = 'counter'", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(n, 200);
    // a PostgreSQL `Db` with no listening line caches nothing derived from the identity tables
    assert_ne!(nodes[0].identity_generation(), nodes[0].identity_generation());
}

/// Writes whose result is not read (`Tx::execute_deferred`) go with the transaction's next
/// statement or its commit on PostgreSQL: they are seen by what follows them in the transaction,
/// committed with it, and a failing one fails the statement after it (naming itself) or the
/// commit, with nothing of the transaction left.
#[test]
fn deferred_writes_go_with_the_next_statement_or_the_commit() {
    use rusqlite::params;
    use steward::storage::Db;

    let url = PgServer::get().fresh_db();
    let db = Db::open_postgres(&url, 2).unwrap();
    let count = |db: &Db, table: &str| -> i64 {
        db.read(|c| Ok(c.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?)).unwrap()
    };
    // only deferred writes: all sent with the commit
    db.write(|tx| {
        tx.execute_deferred("INSERT INTO organizations (id, name, created_at) VALUES (?1, ?2, ?3)", params!["o1", "Acme", "t0"])?;
        tx.execute_deferred(
            "INSERT INTO workspaces (id, organization_id, name, is_default, created_at, updated_at) VALUES (?1, ?2, ?3, 1, ?4, ?4)",
            params!["w1", "o1", "Main", "t0"],
        )?;
        Ok(())
    })
    .unwrap();
    assert_eq!((count(&db, "organizations"), count(&db, "workspaces")), (1, 1));
    // seen by the statement after it, in order
    let seen: String = db
        .write(|tx| {
            tx.execute_deferred("INSERT INTO organizations (id, name, created_at) VALUES ('o2', 'Beta', 't1')", [])?;
            tx.execute_deferred("UPDATE organizations SET name = 'Beta 2' WHERE id = 'o2'", [])?;
            Ok(tx.query_row("SELECT name FROM organizations WHERE id = 'o2'", [], |r| r.get(0))?)
        })
        .unwrap();
    assert_eq!(seen, "Beta 2");
    // a failing one fails the next statement, which names it; nothing of the transaction stays
    let mut named = String::new();
    let r: steward::Result<()> = db.write(|tx| {
        tx.execute_deferred("INSERT INTO organizations (id, name, created_at) VALUES ('o3', 'Gamma', 't2')", [])?;
        tx.execute_deferred("INSERT INTO organizations (id, name, created_at) VALUES ('o1', 'Dup', 't2')", [])?;
        match tx.query_row("SELECT count(*) FROM workspaces", [], |r| r.get::<_, i64>(0)) {
            Err(e) => {
                named = format!("{e}");
                Err(e.into())
            }
            Ok(n) => panic!("the duplicate went unnoticed ({n})"),
        }
    });
    assert!(r.is_err());
    assert!(named.contains("duplicate key") && named.contains("INSERT INTO organizations"), "{named}");
    assert_eq!(count(&db, "organizations"), 2, "the transaction's insert before the failure is gone");
    // as the last write, it fails the commit
    let r = db.write(|tx| {
        tx.execute_deferred("INSERT INTO organizations (id, name, created_at) VALUES ('o4', 'Delta', 't3')", [])?;
        tx.execute_deferred("INSERT INTO organizations (id, name, created_at) VALUES ('o1', 'Dup', 't3')", [])?;
        Ok(())
    });
    assert!(r.is_err(), "a commit after a failed deferred write is an error");
    assert_eq!(count(&db, "organizations"), 2);
    // a transaction given up after deferred writes sends none of them
    let r: steward::Result<()> = db.write(|tx| {
        tx.execute_deferred("INSERT INTO organizations (id, name, created_at) VALUES ('o5', 'Eps', 't4')", [])?;
        Err(steward::error::Error::invalid("changed my mind"))
    });
    assert!(r.is_err());
    assert_eq!(count(&db, "organizations"), 2);
    // more than a pipeline's worth in one transaction
    db.write(|tx| {
        for i in 0..40 {
            tx.execute_deferred(
                "INSERT INTO organizations (id, name, created_at) VALUES (?1, 'Many', 't5')",
                [format!("m{i}")],
            )?;
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(count(&db, "organizations"), 42);

    // a value that cannot be converted fails when deferred, not silently later
    let r: steward::Result<()> = db.write(|tx| {
        let e = tx
            .execute_deferred("INSERT INTO index_state (name, applied_seq, updated_at) VALUES ('x', ?1, 't')", ["many"])
            .unwrap_err();
        Err(e.into())
    });
    assert!(r.is_err());
    // a failure at the commit names the deferred statement (no announcement goes with this one)
    db.write(|tx| {
        tx.execute("INSERT INTO index_state (name, applied_seq, updated_at) VALUES ('y', 1, 't')", [])?;
        Ok(())
    })
    .unwrap();
    let e = db
        .write(|tx| {
            tx.execute_deferred("INSERT INTO index_state (name, applied_seq, updated_at) VALUES ('y', 2, 't')", [])?;
            Ok(())
        })
        .unwrap_err();
    let why = format!("{e:?}");
    assert!(why.contains("duplicate key") && why.contains("INSERT INTO index_state"), "{why}");
    // an error its caller went on from still fails the commit (PostgreSQL would roll back quietly)
    let e = db
        .write(|tx| {
            tx.execute("INSERT INTO index_state (name, applied_seq, updated_at) VALUES ('z', 1, 't')", [])?;
            let swallowed =
                tx.execute("INSERT INTO index_state (name, applied_seq, updated_at) VALUES ('y', 3, 't')", []);
            assert!(swallowed.is_err());
            Ok(())
        })
        .unwrap_err();
    assert!(format!("{e:?}").contains("rolled back"), "{e:?}");
    let z: i64 =
        db.read(|c| Ok(c.query_row("SELECT count(*) FROM index_state WHERE name = 'z'", [], |r| r.get(0))?)).unwrap();
    assert_eq!(z, 0, "nothing of the failed transaction stays");
}

/// A later read (`Tx::query_later`) reads the transaction as it stands where it is asked for: the
/// writes before it, not those after; returned out of the transaction, its rows are there after
/// the commit it went with. On PostgreSQL it is sent with the next statement or the commit (asked
/// for before that, it says so); on SQLite it runs at once.
#[test]
fn later_reads_see_the_transaction_where_they_are_asked_for_on_both_backends() {
    use rusqlite::params;
    use steward::storage::Db;
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Db::open(&dir.path().join("steward.db"), 1).unwrap();
    let postgres = Db::open_postgres(&PgServer::get().fresh_db(), 2).unwrap();
    for db in [&sqlite, &postgres] {
        let org = "INSERT INTO organizations (id, name, created_at) VALUES (?1, ?2, 't0')";
        let names = "SELECT name FROM organizations WHERE name LIKE 'L%' ORDER BY name";
        let (before, last) = db
            .write(|tx| {
                tx.execute_deferred(org, params!["l1", "L one"])?;
                let before = tx.query_later(names, [], |r| r.get::<_, String>(0))?;
                tx.execute(org, params!["l2", "L two"])?;
                // a later read with nothing after it goes with the commit
                let last = tx.query_later(names, [], |r| r.get::<_, String>(0))?.map(|v| v.len());
                Ok((before.get()?, last))
            })
            .unwrap();
        assert_eq!(before, ["L one"], "the write after it is not seen ({})", db.round_trips().is_some());
        assert_eq!(last.get().unwrap(), 2);
    }
    // on PostgreSQL, asked for before anything carried it: an error that says so
    let e = postgres
        .write(|tx| {
            let early = tx.query_later("SELECT count(*) FROM organizations", [], |r| r.get::<_, i64>(0))?;
            early.get()
        })
        .unwrap_err();
    assert!(format!("{e:?}").contains("before its transaction sent it"), "{e:?}");
    // one that fails at the server fails the commit it went with, naming it; nothing stays
    let e = postgres
        .write(|tx| {
            tx.execute("INSERT INTO organizations (id, name, created_at) VALUES ('l3', 'L three', 't0')", [])?;
            let bad = tx.query_later("SELECT CAST(name AS INTEGER) FROM organizations WHERE id = 'l3'", [], |r| {
                r.get::<_, i64>(0)
            })?;
            Ok(bad)
        })
        .map(|_| ())
        .unwrap_err();
    assert!(format!("{e:?}").contains("CAST(name AS INTEGER)"), "{e:?}");
    let n: i64 = postgres
        .read(|c| Ok(c.query_row("SELECT count(*) FROM organizations WHERE id = 'l3'", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(n, 0);
}

/// A statement seen for the first time inside a write transaction is prepared under a savepoint
/// (sent with the savepoint and its release in one round trip): one PostgreSQL refuses fails
/// alone and the transaction goes on with what came before it, deferred writes included; a
/// deferred write that fails ahead of such a preparation fails it, naming the write, and nothing
/// of the transaction stays.
#[test]
fn a_statement_refused_at_its_preparation_leaves_the_transaction_going() {
    use steward::storage::Db;
    let url = PgServer::get().fresh_db();
    let db = Db::open_postgres(&url, 2).unwrap();
    let bad = format!("SELECT count(*) FROM {}", crate::pg_server::EXPECTED_FAULT);
    let names = |db: &Db| -> Vec<String> {
        db.read(|c| {
            let mut st = c.prepare("SELECT name FROM organizations ORDER BY name")?;
            Ok(st.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<Vec<String>>>()?)
        })
        .unwrap()
    };
    let fresh = db
        .write(|tx| {
            tx.execute_deferred("INSERT INTO organizations (id, name, created_at) VALUES ('o1', 'Acme', 't0')", [])?;
            let refused = tx.query_row(&bad, [], |r| r.get::<_, i64>(0)).unwrap_err();
            assert!(format!("{refused}").contains(crate::pg_server::EXPECTED_FAULT), "{refused}");
            // a text never prepared on this connection, after the refusal: prepared and run
            tx.execute("INSERT INTO organizations (id, name, created_at) VALUES ('o2', 'After refusal', 't0')", [])?;
            Ok(tx.query_row(
                "SELECT count(*) FROM organizations WHERE created_at = 't0' AND id <> 'none'",
                [],
                |r| r.get::<_, i64>(0),
            )?)
        })
        .unwrap();
    assert_eq!(fresh, 2);
    assert_eq!(names(&db), ["Acme", "After refusal"]);
    // the deferred write fails first: the preparation fails with its error, the transaction ends
    let mut why = String::new();
    let r: steward::Result<()> = db.write(|tx| {
        tx.execute_deferred("INSERT INTO organizations (id, name, created_at) VALUES ('o3', 'Gamma', 't1')", [])?;
        tx.execute_deferred("INSERT INTO organizations (id, name, created_at) VALUES ('o1', 'Dup', 't1')", [])?;
        let e = tx.query_row("SELECT count(*) FROM organizations WHERE created_at = 't1' AND id <> 'x'", [], |r| {
            r.get::<_, i64>(0)
        });
        why = format!("{:?}", e.as_ref().err());
        e?;
        Ok(())
    });
    assert!(r.is_err());
    assert!(why.contains("duplicate key") && why.contains("INSERT INTO organizations"), "{why}");
    assert_eq!(names(&db), ["Acme", "After refusal"], "nothing of the failed transaction stays");
}

/// Waits for `db`'s listening line to come up (`how` says what it came up with).
fn listening_line_comes_up(db: &steward::storage::Db, how: &str) {
    let (up, heard) = std::sync::mpsc::channel();
    let line = db.listen(move |payload| {
        if payload.is_none() {
            let _ = up.send(());
        }
    });
    heard
        .recv_timeout(std::time::Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("the listening line came up {how}"));
    drop(line);
}

/// A TCP front for the test server's Unix socket whose sessions take no writes (it adds
/// `-c default_transaction_read_only=on` to each startup message; it offers no TLS): what a
/// standby looks like to a client. Returns its port and how many connections it has taken.
fn read_only_front(server: &PgServer) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let taken = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (socket, counted) = (server.socket(), taken.clone());
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { break };
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let socket = socket.clone();
            std::thread::spawn(move || -> std::io::Result<()> {
                loop {
                    // a message with no type byte: its length (itself included), a protocol code
                    let mut len = [0u8; 4];
                    client.read_exact(&mut len)?;
                    let mut body = vec![0u8; (u32::from_be_bytes(len) as usize).saturating_sub(4)];
                    client.read_exact(&mut body)?;
                    // a request for TLS or GSS encryption: refused, the client goes on in plain
                    if body.len() == 4 {
                        client.write_all(b"N")?;
                        continue;
                    }
                    // the startup message: `name\0value\0` pairs, then `\0`
                    body.pop();
                    body.extend_from_slice(b"options\0-c default_transaction_read_only=on\0\0");
                    let mut server = std::os::unix::net::UnixStream::connect(&socket)?;
                    server.write_all(&(body.len() as u32 + 4).to_be_bytes())?;
                    server.write_all(&body)?;
                    let (mut up_from, mut up_to) = (client.try_clone()?, server.try_clone()?);
                    std::thread::spawn(move || std::io::copy(&mut up_from, &mut up_to));
                    std::io::copy(&mut server, &mut client)?;
                    return Ok(());
                }
            });
        }
    });
    (port, taken)
}

/// `target_session_attrs=read-write` with two hosts, the first of which takes no writes (a
/// standby, say): every connection a node makes, its pooled ones included, passes over it for the
/// second; asked of it alone, the node does not start (its sessions do refuse writes).
#[test]
fn a_node_asking_for_read_write_passes_over_a_server_that_takes_no_writes() {
    use std::sync::atomic::Ordering;
    use steward::storage::Db;
    let server = PgServer::get();
    let url = server.fresh_db();
    let name = PgServer::db_name(&url);
    let (front, taken) = read_only_front(server);
    let insert = |db: &Db, id: &str| {
        db.write(|tx| {
            tx.execute("INSERT INTO organizations (id, name, created_at) VALUES (?1, 'Writes', 't0')", [id])?;
            Ok(())
        })
    };
    let both = format!(
        "postgres://steward@127.0.0.1:{front},{}/{name}?target_session_attrs=read-write",
        server.socket_host_port()
    );
    let db = Db::open_postgres(&both, 2).unwrap();
    for i in 0..4 {
        insert(&db, &format!("rw{i}")).unwrap();
    }
    assert!(taken.load(Ordering::SeqCst) >= 2, "the first host was asked first (the migrating client, the pool)");
    drop(db);
    // the first host alone: nothing that takes writes, the node does not start
    let alone = format!("postgres://steward@127.0.0.1:{front}/{name}?target_session_attrs=read-write");
    assert!(Db::open_postgres(&alone, 2).is_err());
    // its sessions take no writes indeed
    let mut direct = pg(&format!("postgres://steward@127.0.0.1:{front}/{name}"));
    let e = direct.execute("INSERT INTO organizations (id, name, created_at) VALUES ('ro', 'No', 't0')", &[]);
    assert!(format!("{e:?}").contains("read-only"), "{e:?}");
}

/// A client certificate (`sslcert`, `sslkey`) signs a node in where the server asks for one
/// (`pg_hba.conf`'s `cert` for the test certificate's role): every connection a node makes, the
/// migrating client, the pool and the listening line; without it the server refuses, and a key
/// that is not the certificate's is refused before any connection.
#[test]
fn a_client_certificate_signs_a_node_in_where_the_server_asks_for_one() {
    use steward::storage::Db;
    let server = PgServer::get();
    let url = server.fresh_db();
    let name = PgServer::db_name(&url);
    let role = crate::receiver::CLIENT_NAME;
    pg(&url)
        .batch_execute(&format!(
            "DO $$ BEGIN CREATE ROLE {role} LOGIN SUPERUSER; EXCEPTION WHEN duplicate_object THEN NULL; END $$"
        ))
        .unwrap();
    let enc = |p: &Path| -> String { url::form_urlencoded::byte_serialize(p.to_string_lossy().as_bytes()).collect() };
    let (cert, key) = server.client_cert();
    let base = format!(
        "postgres://{role}@127.0.0.1:{}/{name}?sslmode=verify-full&sslrootcert={}",
        server.port(),
        enc(server.ca_file())
    );
    let signed = format!("{base}&sslcert={}&sslkey={}", enc(&cert), enc(&key));
    let db = Db::open_postgres(&signed, 2).unwrap();
    db.write(|tx| {
        tx.execute("INSERT INTO organizations (id, name, created_at) VALUES ('cert', 'Signed in', 't0')", [])?;
        Ok(())
    })
    .unwrap();
    let who: String = db.read(|c| Ok(c.query_row("SELECT current_user", [], |r| r.get(0))?)).unwrap();
    assert_eq!(who, role);
    // the listening line signs in with it too
    listening_line_comes_up(&db, "with the certificate");
    // no certificate: refused by the server
    let e = Db::open_postgres(&base, 2).err().expect("no certificate, no entry");
    assert!(format!("{e:?}").contains("certificate"), "{e:?}");
    // a key that is not the certificate's: refused at once
    let server_key = server.ca_file().with_file_name("server.key");
    let wrong = format!("{base}&sslcert={}&sslkey={}", enc(&cert), enc(&server_key));
    assert!(Db::open_postgres(&wrong, 2).is_err());
}

/// TLS to PostgreSQL as the URL's `sslmode` and `sslrootcert` say, on the test server's TCP
/// listener (TLS on, a certificate for 127.0.0.1 and localhost from a test CA): every kind of
/// connection Steward makes (the migrating client, the pool, the listening line) is encrypted and
/// the server checked; a server whose certificate does not chain to the given root, or does not
/// name the host under `verify-full`, is refused; `disable` and a Unix socket stay plain.
#[test]
fn connections_are_encrypted_and_the_server_checked_as_the_url_says() {
    use steward::storage::Db;

    let server = PgServer::get();
    let name = PgServer::db_name(&server.fresh_db()).to_string();
    let ca = url::form_urlencoded::byte_serialize(server.ca_file().to_string_lossy().as_bytes()).collect::<String>();
    let encrypted = |db: &Db| -> bool {
        db.read(|c| Ok(c.query_row("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", [], |r| r.get(0))?))
            .unwrap()
    };
    // verified, in full: migrations, the pool and the listening line all connect
    let db = Db::open_postgres(&server.tcp_url(&name, &format!("sslmode=verify-full&sslrootcert={ca}")), 2).unwrap();
    assert!(encrypted(&db), "verify-full");
    listening_line_comes_up(&db, "over TLS");
    // encrypted without checking the server (libpq's `require` and the default `prefer`)
    for query in ["sslmode=require", "application_name=t"] {
        let db = Db::open_postgres(&server.tcp_url(&name, query), 2).unwrap();
        assert!(encrypted(&db), "{query}");
    }
    // plain when asked, and over a Unix socket whatever the mode
    assert!(!encrypted(&Db::open_postgres(&server.tcp_url(&name, "sslmode=disable"), 2).unwrap()));
    let unix = format!("{}?sslmode=require", server.url(&name));
    assert!(!encrypted(&Db::open_postgres(&unix, 2).unwrap()), "no TLS on a Unix socket");
    // a host the certificate does not name: refused in full, accepted for its chain only
    let other_name = |mode: &str| {
        server.tcp_url_at("db.invalid", &name, &format!("hostaddr=127.0.0.1&sslmode={mode}&sslrootcert={ca}"))
    };
    let refused = Db::open_postgres(&other_name("verify-full"), 2).err().expect("a certificate for another name");
    assert!(format!("{refused:?}").contains("certificate"), "{refused:?}");
    assert!(encrypted(&Db::open_postgres(&other_name("verify-ca"), 2).unwrap()));
    // a root that did not sign the server's certificate
    let stranger = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(stranger.path(), crate::receiver::test_pki(&[]).ca_pem).unwrap();
    let stranger_ca: String =
        url::form_urlencoded::byte_serialize(stranger.path().to_string_lossy().as_bytes()).collect();
    let refused = Db::open_postgres(&server.tcp_url(&name, &format!("sslmode=verify-ca&sslrootcert={stranger_ca}")), 2)
        .err()
        .expect("a server that does not chain to the root");
    assert!(format!("{refused:?}").contains("certificate"), "{refused:?}");
    // a password is asked over TCP: without it, refused (the socket's trust does not reach here)
    let mut no_password = url::Url::parse(&server.tcp_url(&name, "sslmode=require")).unwrap();
    no_password.set_password(None).unwrap();
    assert!(Db::open_postgres(no_password.as_str(), 2).is_err());
    // a mode or a root file that cannot be used: said before connecting
    let bad = Db::open_postgres(&server.tcp_url(&name, "sslmode=sometimes"), 2).err().unwrap();
    assert!(bad.message.contains("sslmode=sometimes"), "{}", bad.message);
    let bad =
        Db::open_postgres(&server.tcp_url(&name, "sslmode=verify-full&sslrootcert=%2Fno%2Fsuch.pem"), 2).err().unwrap();
    assert!(bad.message.contains("/no/such.pem"), "{}", bad.message);
}
