//! Upgrading: a data directory an older Steward wrote (the committed fixture
//! `fixtures/upgrade-0013`, schema version 13; its README says which commit made it and how) opens
//! with this code: the migrations since run in one transaction after a snapshot of the directory
//! as it was, and every workspace, document, agent, conversation and the sealed provider key are
//! readable; search finds the documents once the indexes are rebuilt.

use std::path::Path;

use serde_json::json;

use crate::support::{Auth, TestApp, test_config};

/// The key the fixture's provider credential was sealed with (see its make.sh).
const KEY: &str = "5f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0";

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[tokio::test]
async fn a_data_dir_written_by_schema_13_opens_with_everything_readable() {
    if crate::support::sqlite_mode_only("an old SQLite data directory; PostgreSQL starts at schema 17") {
        return;
    }
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/upgrade-0013/data");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    copy_dir(&fixture, &data);
    let old = steward::storage::snapshot::peek_status(&data.join("steward.db")).unwrap().unwrap();
    assert_eq!(steward::storage::migrations::schema_version(&old), 13);

    let mut config = test_config(dir.path());
    config.encryption_key = Some(steward::config::Secret::new(hex::decode(KEY).unwrap().try_into().unwrap()));
    let t = TestApp::open_with_rebuild_due(dir, config, vec![]);
    let st = t.app.db.migration_status().unwrap();
    assert!(st.is_current(), "{st:?}");
    // the directory as it was is kept beside it, and restores
    let snapshots: Vec<_> = std::fs::read_dir(data.join("snapshots")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(snapshots.len(), 1, "{snapshots:?}");
    let name = snapshots[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("pre-migration-") && name.contains("-v13-to-v"), "{name}");
    let back = tempfile::tempdir().unwrap();
    let r = steward::ops::restore::restore(&snapshots[0], &back.path().join("d"), false).unwrap();
    assert_eq!(r.manifest.schema_version, 13);

    t.app.finish_search_rebuild().unwrap();
    t.drain();
    let login = t
        .post(
            "/api/v1/auth/login",
            &Auth::None,
            json!({"email": "owner@example.com", "password": "fixture password 13"}),
        )
        .await;
    login.assert_status(200);
    let owner = Auth::Cookie(login.cookie().unwrap());

    let workspaces = t.get("/api/v1/workspaces", &owner).await.json();
    let names: Vec<&str> =
        workspaces["workspaces"].as_array().unwrap().iter().map(|w| w["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 2, "{workspaces}");
    assert!(names.contains(&"Second workspace"), "{names:?}");
    let second = workspaces["workspaces"].as_array().unwrap().iter().find(|w| w["name"] == "Second workspace").unwrap()
        ["id"]
        .as_str()
        .unwrap()
        .to_string();

    let docs = t.get("/api/v1/document/", &owner).await.json();
    let mut titles: Vec<&str> =
        docs["documents"].as_array().unwrap().iter().map(|d| d["title"].as_str().unwrap()).collect();
    titles.sort();
    assert_eq!(titles, ["Opening hours", "Parking", "Returns"], "{docs}");
    for d in docs["documents"].as_array().unwrap() {
        assert_eq!(d["status"], "ready", "{d}");
        let full = t.document(&owner, d["id"].as_str().unwrap()).await;
        assert!(!full["content"].as_str().unwrap().is_empty(), "{full}");
    }
    let theirs = t.get_in(&second, "/api/v1/document/", &owner).await.json();
    assert_eq!(theirs["documents"][0]["title"], "Warranty", "{theirs}");
    // the uploaded original is still there to reprocess from
    let parking = docs["documents"].as_array().unwrap().iter().find(|d| d["title"] == "Parking").unwrap();
    let id = parking["id"].as_str().unwrap();
    t.post(&format!("/api/v1/document/{id}/reprocess"), &owner, json!({})).await.assert_status(202);
    t.drain();
    assert_eq!(t.document(&owner, id).await["status"], "ready");

    assert_eq!(t.titles(&owner, "where do visitors park").await[0], "Parking");
    assert_eq!(t.titles_bm25(&owner, "refunds receipt").await[0], "Returns");

    let agents = t.get("/api/v1/agents", &owner).await.json();
    assert!(agents["agents"].as_array().unwrap().iter().any(|a| a["name"] == "Fixture agent"), "{agents}");

    let history = t.get("/api/v1/history/chat", &owner).await.json();
    let conv = history["conversations"][0]["id"].as_str().expect("the conversation").to_string();
    let c = t.get(&format!("/api/v1/history/chat/{conv}"), &owner).await.json();
    let texts: Vec<&str> = c["messages"].as_array().unwrap().iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(texts[0], "When are you open on Saturdays?", "{c}");
    assert!(texts.len() >= 2, "{c}");

    let ws = steward::ids::WorkspaceId(t.get_ws());
    let key = steward::settings::credentials::workspace_key(&t.app, &ws, "openai").unwrap().expect("the sealed key");
    assert_eq!(key.expose(), "sk-fixture-0123456789");
    // and it answers
    t.post("/api/v1/chat", &owner, json!({"message": "When are you open?"})).await.assert_status(200);
}
