//! The search indexes are caches of SQLite: an index that is deleted, corrupt (a segment that fails
//! its checksum, a vector file that fails its CRC) or stale (files older than the database, put
//! back from an earlier copy) is found at start and rebuilt; until the rebuild ends the server
//! answers, `/readyz` says it is degraded and progress is not idle; afterwards every search mode
//! finds everything. In process, then once with the real binary.

use std::path::Path;

use serde_json::{Value, json};

use crate::e2e::{BIN, Server, bootstrap};
use crate::support::{Auth, TestApp};

const ZEBRAS: (&str, &str) = ("Zebras", "Zebras graze on the open savanna in large herds and flee from lions at dusk.");

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// Removes the index directory; a merge thread of the writer just closed may still be finishing
/// a file in it, so it is tried again until it goes (with a deadline).
fn remove_index(data: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        match std::fs::remove_dir_all(data.join("index")) {
            Ok(()) => return,
            Err(e) if std::time::Instant::now() > deadline => panic!("cannot remove the index: {e}"),
            Err(_) => std::thread::yield_now(),
        }
    }
}

/// Stops the app as the server does at shutdown (indexes saved, ops pruned), lets `between`
/// change the data directory with nothing open, and starts it again.
fn reopen(t: TestApp, between: impl FnOnce(&Path)) -> TestApp {
    let config = t.app.config.clone();
    let TestApp { app, router, dir, .. } = t;
    app.shutdown();
    drop(router);
    drop(app);
    between(&config.data_dir);
    TestApp::open_with_rebuild_due(dir, config, vec![])
}

/// A workspace with two documents, its indexes saved (ops pruned) as at a clean shutdown.
async fn seeded() -> (TestApp, Auth) {
    let t = TestApp::new();
    let owner = t.owner().await;
    t.doc(&owner, "Owls", "Owls hunt at night with silent feathers.", json!({})).await;
    t.doc(&owner, "Bees", "Bees dance to share where the flowers are.", json!({})).await;
    t.drain();
    (t, owner)
}

async fn first_title(t: &TestApp, owner: &Auth, query: &str, mode: &str) -> Option<String> {
    let v = t.search(owner, json!({"query": query, "mode": mode})).await;
    v["results"][0]["title"].as_str().map(str::to_string)
}

/// After a restart that found the indexes not current: the rebuild is due, the server degraded but
/// answering; then, rebuilt, every mode finds `expect` for its query and the indexes match SQLite.
async fn rebuilt(t: &TestApp, owner: &Auth, expect: &[(&str, &str)]) {
    let status = t.app.search().unwrap().rebuild_status().expect("a rebuild is due");
    assert!(status.text && status.vectors, "{status:?}");
    let check = steward::readiness::check(&t.app, steward::readiness::index_lag(&t.app));
    let search = check.iter().find(|c| c.name == "search").unwrap();
    assert!(search.ok && search.degraded, "{}", search.message);
    assert!(search.message.contains("rebuilding"), "{}", search.message);
    let metrics = t.get("/metrics", &Auth::None).await.text();
    let total = format!("steward_search_rebuild_chunks{{state=\"total\"}} {}", status.total);
    assert!(status.total > 0 && metrics.contains(&total), "{metrics}");
    let p = t.get("/api/v1/document/progress", owner).await.json();
    assert_eq!(p["idle"], false, "{p}");
    assert_eq!(p["index"]["rebuilding"], true, "{p}");
    // the server answers meanwhile (from what is rebuilt so far: nothing yet)
    t.search(owner, json!({"query": "owls", "mode": "bm25"})).await;

    t.app.finish_search_rebuild().unwrap();
    assert!(t.app.search().unwrap().rebuild_status().is_none());
    let p = t.get("/api/v1/document/progress", owner).await.json();
    assert_eq!(p["idle"], true, "{p}");
    assert_eq!(p["index"]["liveChunks"], p["index"]["textDocuments"], "{p}");
    assert_eq!(p["index"]["liveChunks"].as_u64().unwrap() as usize, p["index"]["vectors"].as_u64().unwrap() as usize);
    for (query, title) in expect {
        for mode in ["bm25", "vector", "hybrid"] {
            assert_eq!(first_title(t, owner, query, mode).await.as_deref(), Some(*title), "{mode}: {query}");
        }
    }
}

#[tokio::test]
async fn a_stale_index_is_rebuilt_and_finds_what_came_after_its_copy() {
    let (t, owner) = seeded().await;
    let earlier = tempfile::tempdir().unwrap();
    let t = reopen(t, |data| copy_dir(&data.join("index"), earlier.path()));
    assert!(t.app.search().unwrap().rebuild_status().is_none(), "a clean restart rebuilds nothing");
    t.doc(&owner, ZEBRAS.0, ZEBRAS.1, json!({})).await;
    t.drain();
    // the index files are put back from the earlier copy; the database moved on since
    let t = reopen(t, |data| {
        remove_index(data);
        copy_dir(earlier.path(), &data.join("index"));
    });
    rebuilt(&t, &owner, &[("zebras on the savanna", "Zebras"), ("silent night hunters", "Owls")]).await;
}

#[tokio::test]
async fn a_corrupt_index_is_rebuilt() {
    let (t, owner) = seeded().await;
    let t = reopen(t, |data| damage(&data.join("index")));
    rebuilt(&t, &owner, &[("silent night hunters", "Owls"), ("dance flowers", "Bees")]).await;
}

fn damage(index: &Path) {
    // damage the middle of every segment file and vector file; their headers and Tantivy's
    // meta.json stay intact, so only the checksums can tell
    let mut damaged = 0;
    for dir in [index.join("text"), index.join("vectors")] {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let segment = dir.ends_with("text") && (name.ends_with(".idx") || name.ends_with(".store"));
            if !(segment || name.ends_with(".usearch")) {
                continue;
            }
            let mut bytes = std::fs::read(&p).unwrap();
            let (mid, end) = (bytes.len() / 2, (bytes.len() / 2 + 16).min(bytes.len()));
            for b in &mut bytes[mid..end] {
                *b ^= 0x5a;
            }
            std::fs::write(&p, bytes).unwrap();
            damaged += 1;
        }
    }
    assert!(damaged >= 2, "{damaged}");
}

#[tokio::test]
async fn a_deleted_index_is_rebuilt() {
    let (t, owner) = seeded().await;
    let t = reopen(t, remove_index);
    rebuilt(&t, &owner, &[("silent night hunters", "Owls"), ("dance flowers", "Bees")]).await;
}

async fn wait_idle(http: &reqwest::Client, base: &str, token: &str) -> Value {
    for _ in 0..20 {
        let p: Value = http
            .get(format!("{base}/api/v1/document/progress?waitMs=30000"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if p["idle"] == true {
            return p;
        }
    }
    panic!("the server did not become idle");
}

async fn add(http: &reqwest::Client, base: &str, token: &str, title: &str, content: &str) {
    let r = http
        .post(format!("{base}/api/v1/document/"))
        .bearer_auth(token)
        .json(&json!({"title": title, "content": content}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
}

async fn top(http: &reqwest::Client, base: &str, token: &str, query: &str, mode: &str) -> String {
    let v: Value = http
        .post(format!("{base}/api/v1/document/search"))
        .bearer_auth(token)
        .json(&json!({"query": query, "mode": mode}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["results"][0]["title"].as_str().unwrap_or_default().to_string()
}

/// The outside test's case with the real binary: index files restored from an earlier copy of
/// the data directory are rebuilt in the background at start, and a document added after that
/// copy is found by every mode; `steward verify` is clean before the start and after the stop.
#[tokio::test(flavor = "multi_thread")]
async fn the_binary_rebuilds_index_files_older_than_the_database() {
    if crate::support::sqlite_mode_only("steward verify reads the SQLite file") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = bootstrap(&data);
    let http = reqwest::Client::new();
    let server = Server::start(&data, &[]);
    add(&http, &server.base, &token, "Owls", "Owls hunt at night with silent feathers.").await;
    wait_idle(&http, &server.base, &token).await;
    assert!(server.terminate().success());
    let earlier = dir.path().join("index-copy");
    copy_dir(&data.join("index"), &earlier);

    let server = Server::start(&data, &[]);
    add(&http, &server.base, &token, ZEBRAS.0, ZEBRAS.1).await;
    let before = wait_idle(&http, &server.base, &token).await;
    assert!(server.terminate().success());
    std::fs::remove_dir_all(data.join("index")).unwrap();
    copy_dir(&earlier, &data.join("index"));

    let verify = || {
        let out =
            std::process::Command::new(BIN).args(["--data-dir", data.to_str().unwrap(), "verify"]).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (ok, text) = verify();
    assert!(ok, "a stale index is no problem, only rebuilt: {text}");
    assert!(text.contains("not current"), "{text}");

    let server = Server::start(&data, &[]);
    let ready: Value = http.get(format!("{}/readyz", server.base)).send().await.unwrap().json().await.unwrap();
    assert!(ready["status"] == "ready" || ready["status"] == "degraded", "{ready}");
    let after = wait_idle(&http, &server.base, &token).await;
    assert_eq!(after["index"], before["index"], "{after}");
    let ready: Value = http.get(format!("{}/readyz", server.base)).send().await.unwrap().json().await.unwrap();
    assert_eq!(ready["status"], "ready", "{ready}");
    for mode in ["bm25", "vector", "hybrid"] {
        assert_eq!(top(&http, &server.base, &token, "zebras on the savanna", mode).await, "Zebras", "{mode}");
        assert_eq!(top(&http, &server.base, &token, "silent night hunters", mode).await, "Owls", "{mode}");
    }
    assert!(server.terminate().success());
    let (ok, text) = verify();
    assert!(ok && text.contains("holds every live chunk"), "{text}");
}
