//! Backups with the real binary: `steward backup` (and the owner's `POST /api/v1/admin/backup`)
//! while uploads and chats are in flight, `steward restore` into a new directory, `steward verify`
//! clean, every document and conversation committed before the backup present, and the same top-10
//! for 20 queries as the source; a tampered archive refused by the command; a data directory a
//! newer Steward wrote refused by every command with its exit status, the file unchanged.

use std::collections::{BTreeMap, HashSet};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;

use crate::e2e::{BIN, Server, bootstrap};

const WORDS: [&str; 48] = [
    "harbor", "lantern", "granite", "meadow", "copper", "falcon", "orchard", "glacier", "velvet", "canyon", "ember",
    "tundra", "willow", "quartz", "saffron", "beacon", "cobalt", "marble", "thistle", "summit", "lagoon", "cedar",
    "prairie", "juniper", "basalt", "heron", "walnut", "monsoon", "pebble", "trellis", "anchor", "bramble", "cinder",
    "dune", "fjord", "garnet", "hollow", "island", "jasper", "kelp", "larch", "moss", "nectar", "opal", "plume",
    "quill", "reef", "sorrel",
];

/// Deterministic text for document `i`: a few sentences over a small vocabulary.
fn text(i: usize) -> String {
    let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        WORDS[(x % WORDS.len() as u64) as usize]
    };
    (0..4)
        .map(|_| format!("The {} near the {} keeps the {} and the {}.", next(), next(), next(), next()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
    /// The workspace acted in (none: the default one).
    ws: Option<String>,
}

impl Client {
    async fn json(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut r = self.http.request(method, format!("{}{path}", self.base)).bearer_auth(&self.token);
        if let Some(ws) = &self.ws {
            r = r.header("x-workspace-id", ws);
        }
        if let Some(b) = body {
            r = r.json(&b);
        }
        let r = r.send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn add(&self, title: &str, content: &str) -> String {
        let (s, v) = self
            .json(reqwest::Method::POST, "/api/v1/document/", Some(json!({"title": title, "content": content})))
            .await;
        assert_eq!(s, 202, "{v}");
        v["id"].as_str().unwrap().to_string()
    }

    async fn upload(&self, title: &str, content: &str) -> String {
        let boundary = "stewardbackupboundary42";
        let body = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\n{title}\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"note.txt\"\r\nContent-Type: text/plain\r\n\r\n{content}\r\n--{boundary}--\r\n"
        );
        let r = self
            .http
            .post(format!("{}/api/v1/document/import", self.base))
            .bearer_auth(&self.token)
            .header("x-workspace-id", self.ws.clone().unwrap_or_default())
            .header("content-type", format!("multipart/form-data; boundary={boundary}"))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
        r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string()
    }

    async fn chat(&self, message: &str) -> String {
        let (s, v) = self.json(reqwest::Method::POST, "/api/v1/chat", Some(json!({"message": message}))).await;
        assert_eq!(s, 200, "{v}");
        v["conversationId"].as_str().unwrap().to_string()
    }

    async fn wait_idle(&self) -> Value {
        for _ in 0..40 {
            let (_, p) = self.json(reqwest::Method::GET, "/api/v1/document/progress?waitMs=30000", None).await;
            if p["idle"] == true {
                return p;
            }
        }
        panic!("not idle");
    }

    /// Every document: title → content.
    async fn documents(&self) -> BTreeMap<String, (String, String)> {
        let mut out = BTreeMap::new();
        let mut cursor: Option<String> = None;
        loop {
            let path = match &cursor {
                Some(c) => format!("/api/v1/document/?limit=200&cursor={c}"),
                None => "/api/v1/document/?limit=200".to_string(),
            };
            let (_, page) = self.json(reqwest::Method::GET, &path, None).await;
            for d in page["documents"].as_array().unwrap() {
                let id = d["id"].as_str().unwrap().to_string();
                let (_, full) = self.json(reqwest::Method::GET, &format!("/api/v1/document/{id}"), None).await;
                let content = full["content"].as_str().unwrap_or_default().to_string();
                out.insert(d["title"].as_str().unwrap().to_string(), (id, content));
            }
            match page["nextCursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => return out,
            }
        }
    }

    async fn top10(&self, query: &str) -> Vec<String> {
        let (_, v) = self
            .json(reqwest::Method::POST, "/api/v1/document/search", Some(json!({"query": query, "limit": 10})))
            .await;
        v["results"].as_array().unwrap().iter().map(|h| h["title"].as_str().unwrap().to_string()).collect()
    }
}

fn steward(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).env("STEWARD_LOG", "warn").output().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_backup_under_load_restores_whole_and_answers_like_the_source() {
    if crate::support::sqlite_mode_only(
        "steward backup and restore are the SQLite mode's; PostgreSQL backs up with pg_dump",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = bootstrap(&data);
    let server = Server::start(&data, &[]);
    let src = Client { http: reqwest::Client::new(), base: server.base.clone(), token: token.clone(), ws: None };
    // the queries run in the default workspace, filled before the backup; the load goes to a
    // second one (search statistics are index-wide: both copies end with the same texts there)
    let (_, second) = src.json(reqwest::Method::POST, "/api/v1/workspaces", Some(json!({"name": "Load"}))).await;
    let second = second["workspace"]["id"].as_str().unwrap().to_string();
    let load_src = Arc::new(Client { ws: Some(second.clone()), ..src.clone() });
    for i in 0..24 {
        if i % 4 == 0 {
            src.upload(&format!("Note {i}"), &text(i)).await;
        } else {
            src.add(&format!("Doc {i}"), &text(i)).await;
        }
    }
    src.wait_idle().await;

    // uploads and chats keep coming while the backups run; what was confirmed before is recorded
    let stop = Arc::new(AtomicBool::new(false));
    let confirmed_docs = Arc::new(Mutex::new(Vec::<String>::new()));
    let confirmed_chats = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut load = Vec::new();
    for worker in 0..2 {
        let (c, stop, docs, chats) = (load_src.clone(), stop.clone(), confirmed_docs.clone(), confirmed_chats.clone());
        load.push(tokio::spawn(async move {
            let mut i = 100 + worker * 1000;
            while !stop.load(Ordering::SeqCst) {
                let id = if i % 3 == 0 {
                    c.upload(&format!("Note {i}"), &text(i)).await
                } else {
                    c.add(&format!("Doc {i}"), &text(i)).await
                };
                docs.lock().await.push(id);
                let conv = c.chat(&format!("What keeps the {}?", WORDS[i % WORDS.len()])).await;
                chats.lock().await.push(conv);
                i += 1;
            }
        }));
    }
    // let the load get going, then note what is committed and back up (the command, then HTTP)
    while confirmed_chats.lock().await.len() < 2 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let committed_docs = confirmed_docs.lock().await.clone();
    let committed_chats = confirmed_chats.lock().await.clone();
    let archive = dir.path().join("backup.tar.zst");
    let (d, a) = (data.clone(), archive.clone());
    let out = tokio::task::spawn_blocking(move || {
        steward(&["--data-dir", d.to_str().unwrap(), "backup", "--out", a.to_str().unwrap()])
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("backed up"), "{}", String::from_utf8_lossy(&out.stdout));
    let streamed = src.http.post(format!("{}/api/v1/admin/backup", src.base)).bearer_auth(&token).send().await.unwrap();
    assert_eq!(streamed.status(), 200);
    let streamed_file = dir.path().join("streamed.tar.zst");
    std::fs::write(&streamed_file, streamed.bytes().await.unwrap()).unwrap();
    stop.store(true, Ordering::SeqCst);
    for l in load {
        l.await.unwrap();
    }
    assert!(confirmed_docs.lock().await.len() > committed_docs.len(), "writes went on during the backup");
    src.wait_idle().await;
    load_src.wait_idle().await;

    // restore both archives into new directories; both verify clean
    for (file, name) in [(&archive, "restored"), (&streamed_file, "streamed")] {
        let target = dir.path().join(name);
        let out = steward(&["--data-dir", target.to_str().unwrap(), "restore", file.to_str().unwrap()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let out = steward(&["--data-dir", target.to_str().unwrap(), "verify"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    }
    let restored = dir.path().join("restored");
    let copy = Server::start(&restored, &[]);
    let dst = Client { http: reqwest::Client::new(), base: copy.base.clone(), token: token.clone(), ws: None };
    let load_dst = Client { ws: Some(second.clone()), ..dst.clone() };
    dst.wait_idle().await;
    load_dst.wait_idle().await;
    for id in &committed_docs {
        let (s, _) = load_dst.json(reqwest::Method::GET, &format!("/api/v1/document/{id}"), None).await;
        assert_eq!(s, 200, "document {id} committed before the backup");
    }
    for id in &committed_chats {
        let (s, v) = load_dst.json(reqwest::Method::GET, &format!("/api/v1/history/chat/{id}"), None).await;
        assert_eq!(s, 200, "conversation {id}: {v}");
        assert!(v["messages"].as_array().unwrap().len() >= 2, "{v}");
    }

    // the default workspace is as it was; what the source committed in the other one after the
    // backup is added to the copy, so both hold the same texts; then 20 queries answer the same
    // top 10
    assert_eq!(dst.documents().await, src.documents().await);
    let source_docs = load_src.documents().await;
    let copy_docs = load_dst.documents().await;
    for (title, (_, content)) in &source_docs {
        if !copy_docs.contains_key(title) {
            load_dst.add(title, content).await;
        }
    }
    load_dst.wait_idle().await;
    let copy_titles: HashSet<String> = load_dst.documents().await.into_keys().collect();
    assert_eq!(copy_titles, source_docs.keys().cloned().collect::<HashSet<_>>());
    for q in 0..20 {
        let query = format!("{} {}", WORDS[q], WORDS[(q * 7 + 3) % WORDS.len()]);
        assert_eq!(dst.top10(&query).await, src.top10(&query).await, "{query}");
    }
    assert!(copy.terminate().success());
    let out = steward(&["--data-dir", restored.to_str().unwrap(), "verify"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("holds every live chunk"), "{text}");
    server.terminate();
}

#[test]
fn the_restore_command_refuses_a_tampered_archive() {
    if crate::support::sqlite_mode_only(
        "steward backup and restore are the SQLite mode's; PostgreSQL backs up with pg_dump",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    bootstrap(&data);
    let archive = dir.path().join("b.tar.zst");
    let out = steward(&["--data-dir", data.to_str().unwrap(), "backup", "--out", archive.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // rewrite the database member with one byte changed, the manifest as it was
    let bytes = std::fs::read(&archive).unwrap();
    let mut members = Vec::new();
    for e in steward::ops::archive::reader(bytes.as_slice()).unwrap().entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().to_string_lossy().into_owned();
        let mut body = Vec::new();
        std::io::Read::read_to_end(&mut e, &mut body).unwrap();
        members.push((name, body));
    }
    let at = members[0].1.len() - 100;
    members[0].1[at] ^= 0xff;
    let mut tar = tar::Builder::new(zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap());
    for (name, body) in &members {
        let mut h = tar::Header::new_gnu();
        h.set_size(body.len() as u64);
        h.set_mode(0o600);
        tar.append_data(&mut h, name, body.as_slice()).unwrap();
    }
    std::fs::write(&archive, tar.into_inner().unwrap().finish().unwrap()).unwrap();
    let target = dir.path().join("target");
    let out = steward(&["--data-dir", target.to_str().unwrap(), "restore", archive.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nothing was restored") && err.contains("does not match the manifest"), "{err}");
    assert!(!target.exists());
}

fn sha256_file(p: &std::path::Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(p).unwrap()))
}

#[test]
fn a_data_dir_from_a_newer_steward_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    bootstrap(&data);
    {
        let db = steward::storage::Db::open(&data.join("steward.db"), 1).unwrap();
        db.write(|tx| {
            tx.execute(
                "INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (9999, '9999_future', 'x', 'then')",
                [],
            )?;
            Ok(())
        })
        .unwrap();
        db.checkpoint().unwrap();
    }
    let db_file = data.join("steward.db");
    let before = sha256_file(&db_file);
    let d = data.to_str().unwrap();
    let out_file = dir.path().join("b.tar.zst");
    for args in [
        vec!["--data-dir", d, "serve", "--listen", "127.0.0.1:0"],
        vec!["--data-dir", d, "admin", "bootstrap", "--email", "x@example.com", "--password", "long enough"],
        vec!["--data-dir", d, "reindex"],
        vec!["--data-dir", d, "verify"],
        vec!["--data-dir", d, "backup", "--out", out_file.to_str().unwrap()],
    ] {
        let out = steward(&args);
        assert_eq!(out.status.code(), Some(i32::from(steward::ops::EXIT_NEWER_DATA_DIR)), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("written by a newer Steward") && err.contains("9999"), "{args:?}: {err}");
        assert_eq!(sha256_file(&db_file), before, "{args:?} changed the database file");
    }
    assert!(!out_file.exists());
    // doctor explains it too
    let out = steward(&["--data-dir", d, "doctor"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("newer version"));
}
