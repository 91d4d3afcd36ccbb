//! Crash safety with the real binary: kill -9 during ingestion, restart, and everything ends
//! processed exactly once with indexes matching SQLite; indexes rebuilt from SQLite when deleted.

use serde_json::{Value, json};

use crate::e2e::{BIN, Server, bootstrap};

async fn progress(http: &reqwest::Client, base: &str, token: &str, wait_ms: u64) -> Value {
    http.get(format!("{base}/api/v1/document/progress?waitMs={wait_ms}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn all_docs(http: &reqwest::Client, base: &str, token: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            Some(c) => format!("{base}/api/v1/document/?limit=200&cursor={c}"),
            None => format!("{base}/api/v1/document/?limit=200"),
        };
        let page: Value = http.get(url).bearer_auth(token).send().await.unwrap().json().await.unwrap();
        out.extend(page["documents"].as_array().unwrap().iter().cloned());
        match page["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return out,
        }
    }
}

/// Waits (server-side long poll) until nothing is queued or processing.
async fn wait_idle(http: &reqwest::Client, base: &str, token: &str) -> Value {
    for _ in 0..10 {
        let p = progress(http, base, token, 30_000).await;
        if p["idle"] == true {
            return p;
        }
    }
    panic!("ingestion did not finish");
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_during_ingestion_then_restart_processes_everything_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = bootstrap(&data);
    let server = Server::start(&data, &[]);
    let http = reqwest::Client::new();
    let n = 120;
    for i in 0..n {
        let body = json!({"title": format!("Doc {i}"), "content": format!("Document number {i} talks about the subject {} in detail. {}", i * 7, "More words follow here. ".repeat(30))});
        let r = http
            .post(format!("{}/api/v1/document/", server.base))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
    }
    // the moment the last document is accepted, the process dies
    let before = progress(&http, &server.base, &token, 0).await;
    server.kill();
    assert_ne!(before["idle"], true, "the crash should happen mid-ingestion: {before}");

    let server = Server::start(&data, &[]);
    let p = wait_idle(&http, &server.base, &token).await;
    assert_eq!(p["ready"], n, "{p}");
    assert_eq!(p["failed"], 0);
    assert_eq!(p["pendingChunks"], 0);
    // indexes agree with SQLite
    assert_eq!(p["index"]["liveChunks"], p["index"]["textDocuments"], "{p}");
    assert_eq!(p["index"]["liveChunks"].as_u64(), p["index"]["vectors"].as_u64(), "{p}");
    // every document processed exactly once: still its first revision, one set of chunks
    let docs = all_docs(&http, &server.base, &token).await;
    assert_eq!(docs.len(), n as usize);
    let mut chunk_total = 0;
    for d in &docs {
        assert_eq!(d["revision"], 1);
        assert_eq!(d["status"], "ready");
        chunk_total += d["chunkCount"].as_i64().unwrap();
    }
    assert_eq!(Some(chunk_total as u64), p["index"]["liveChunks"].as_u64());
    let usage: Value = http
        .get(format!("{}/api/v1/usage", server.base))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(usage["embeddingsThisMonth"]["events"], n, "one embedding event per document revision: {usage}");
    // search works on what was recovered
    let s: Value = http
        .post(format!("{}/api/v1/document/search", server.base))
        .bearer_auth(&token)
        .json(&json!({"query": "document number 77", "mode": "bm25"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(s["results"][0]["title"], "Doc 77");
    server.terminate();
}

#[tokio::test(flavor = "multi_thread")]
async fn indexes_are_rebuilt_from_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = bootstrap(&data);
    let server = Server::start(&data, &[]);
    let http = reqwest::Client::new();
    for (title, content) in
        [("Owls", "Owls hunt at night with silent feathers."), ("Bees", "Bees dance to share where flowers are.")]
    {
        http.post(format!("{}/api/v1/document/", server.base))
            .bearer_auth(&token)
            .json(&json!({"title": title, "content": content}))
            .send()
            .await
            .unwrap();
    }
    let before = wait_idle(&http, &server.base, &token).await;
    assert!(server.terminate().success());

    // the index directory is lost: the next start rebuilds it from SQLite (in the background:
    // progress is not idle until it is done)
    std::fs::remove_dir_all(data.join("index")).unwrap();
    let server = Server::start(&data, &[]);
    let after = wait_idle(&http, &server.base, &token).await;
    assert_eq!(after["index"], before["index"], "{after}");
    let s: Value = http
        .post(format!("{}/api/v1/document/search", server.base))
        .bearer_auth(&token)
        .json(&json!({"query": "silent night hunters"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(s["results"][0]["title"], "Owls");
    assert!(server.terminate().success());

    // and `steward reindex` rebuilds on demand
    let out = std::process::Command::new(BIN)
        .args(["--data-dir", data.to_str().unwrap(), "reindex"])
        .envs(crate::support::database_for(&data).map(|u| ("STEWARD_DATABASE_URL", u)))
        .env("STEWARD_LOG", "warn")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("2 chunks"), "{}", String::from_utf8_lossy(&out.stdout));
    let server = Server::start(&data, &[]);
    let again = wait_idle(&http, &server.base, &token).await;
    assert_eq!(again["index"], before["index"]);
    server.terminate();
}
