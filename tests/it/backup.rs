//! Backups in process: the owner's streamed archive restores into a data directory that verifies
//! clean and answers as the source did; who may download one; a tampered, extended or cut archive
//! is refused before anything is written; an original a running backup may need is kept until the
//! next start; the pre-migration snapshots keep the newest three; the connectors' tables and
//! sealed secrets come back whole.

use std::io::{Read, Write};

use serde_json::json;
use steward::ops::{archive, backup, restore, verify};

use crate::support::{Auth, TestApp, test_config};

/// A workspace with typed and uploaded documents and a conversation.
async fn filled() -> (TestApp, Auth) {
    let t = TestApp::new();
    let owner = t.owner().await;
    t.doc(&owner, "Opening hours", "We are open from 9:00 to 17:00 on weekdays.", json!({})).await;
    t.doc(&owner, "Returns", "Items can be returned within 30 days with the receipt.", json!({})).await;
    t.upload(&owner, "parking.md", b"# Parking\n\nVisitors park in the blue garage on Elm Street.\n", &[])
        .await
        .assert_status(202);
    t.drain();
    t.post("/api/v1/chat", &owner, json!({"message": "When are you open?"})).await.assert_status(200);
    (t, owner)
}

fn count(m: &archive::Manifest, table: &str) -> i64 {
    m.tables.get(table).copied().unwrap_or(-1)
}

#[tokio::test]
async fn the_owner_streams_a_backup_that_restores_verifies_and_answers() {
    if crate::support::sqlite_mode_only(
        "steward backup copies the SQLite file; PostgreSQL backs up with pg_dump (scale_out::a_pg_dump…)",
    ) {
        return;
    }
    let (t, owner) = filled().await;
    let r = t.post("/api/v1/admin/backup", &owner, json!({})).await;
    r.assert_status(200);
    assert_eq!(r.headers["content-type"], "application/zstd");
    assert!(r.headers["content-disposition"].to_str().unwrap().contains(".tar.zst"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("b.tar.zst");
    std::fs::write(&file, &r.body).unwrap();

    let target = tempfile::tempdir().unwrap();
    let data = target.path().join("data");
    let restored = restore::restore(&file, &data, false).unwrap();
    let m = &restored.manifest;
    assert_eq!(m.format_version, archive::FORMAT_VERSION);
    assert_eq!(m.schema_version, steward::storage::migrations::latest());
    assert_eq!(count(m, "documents"), 3);
    assert_eq!(count(m, "conversations"), 1);
    assert_eq!(restored.blobs, 1, "the uploaded original");
    assert!(m.members.iter().all(|x| x.sha256.len() == 64));
    let report = verify::verify(&data).unwrap();
    assert_eq!(report.problems(), 0, "{:?}", report.findings);
    assert!(!data.join("index").exists(), "the indexes are not in the archive");

    // the restored directory answers like the source
    let before = t.titles(&owner, "when can visitors park").await;
    let copy = TestApp::open(target, test_config_at(&data), vec![]);
    let owner2 = login(&copy).await;
    assert_eq!(copy.titles(&owner2, "when can visitors park").await, before);
    let history = copy.get("/api/v1/history/chat", &owner2).await.json();
    assert_eq!(history["conversations"].as_array().unwrap().len(), 1, "{history}");
    drop(copy);

    // the download is audited
    let audit = t.get("/api/v1/audit-events?action=organization.backup_downloaded", &owner).await.json();
    assert_eq!(audit["events"].as_array().unwrap().len(), 1, "{audit}");
}

/// The connector tables travel in the archive: a restored server given the same
/// `CONNECTOR_ENCRYPTION_KEY` opens the sealed secrets (the handshake and a signature check
/// pass), knows the messages already received (a redelivery is ignored) and shows the log.
#[tokio::test(flavor = "multi_thread")]
async fn connectors_and_their_sealed_secrets_survive_a_backup_and_restore() {
    if crate::support::sqlite_mode_only(
        "steward backup copies the SQLite file; PostgreSQL backs up with pg_dump (scale_out::a_pg_dump…)",
    ) {
        return;
    }
    use crate::whatsapp::{PHONE, Wa, say_to};
    let w = Wa::start().await;
    w.say("16505551234", "wamid.before-backup", Some("Are you open on Sunday?")).await.assert_status(200);
    w.settle().await;
    let r = w.t.post("/api/v1/admin/backup", &w.owner, json!({})).await;
    r.assert_status(200);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("b.tar.zst");
    std::fs::write(&file, &r.body).unwrap();
    let target = tempfile::tempdir().unwrap();
    let data = target.path().join("data");
    let m = restore::restore(&file, &data, false).unwrap().manifest;
    assert_eq!(count(&m, "connectors"), 1);
    assert_eq!(count(&m, "whatsapp_contacts"), 1);
    assert_eq!(count(&m, "whatsapp_messages"), 2, "the message and its reply");
    assert_eq!(verify::verify(&data).unwrap().problems(), 0);

    let mut config = test_config_at(&data);
    config.encryption_key = Some(steward::config::Secret::new([7u8; 32]));
    let copy = TestApp::open(target, config, vec![]);
    let owner = login(&copy).await;
    let c = copy.get("/api/v1/connectors/whatsapp", &owner).await.json()["connector"].clone();
    assert_eq!(c["enabled"], true);
    assert_eq!(c["config"]["phone_number_id"], PHONE);
    assert_eq!(c["messages"]["inbound"], 1, "{c}");
    let hook = format!("/api/connectors/whatsapp/{}/webhook", w.ws);
    let q = format!("{hook}?hub.mode=subscribe&hub.verify_token={}&hub.challenge=42", w.verify_token);
    assert_eq!(copy.get(&q, &Auth::None).await.assert_status(200).text(), "42");
    let r = say_to(&copy, &w.ws, "16505551234", "wamid.before-backup", Some("Are you open on Sunday?")).await;
    r.assert_status(200);
    assert_eq!(r.json()["received"], 0, "the restored log knows the message");
}

/// The config of a TestApp whose data directory is `data`.
fn test_config_at(data: &std::path::Path) -> steward::config::Config {
    let mut c = test_config(data.parent().unwrap());
    c.data_dir = data.to_path_buf();
    c
}

async fn login(t: &TestApp) -> Auth {
    let r = t
        .post("/api/v1/auth/login", &Auth::None, json!({"email": "owner@example.com", "password": "owner-password"}))
        .await;
    r.assert_status(200);
    Auth::Cookie(r.cookie().unwrap())
}

#[tokio::test]
async fn only_the_owner_of_the_server_organization_may_download_a_backup() {
    if crate::support::sqlite_mode_only(
        "steward backup copies the SQLite file; PostgreSQL backs up with pg_dump (scale_out::a_pg_dump…)",
    ) {
        return;
    }
    let t = TestApp::new();
    let owner = t.owner().await;
    t.post("/api/v1/admin/backup", &Auth::None, json!({})).await.assert_status(401);
    let admin = t.member(&owner, "admin@example.com", "admin").await;
    let r = t.post("/api/v1/admin/backup", &admin, json!({})).await;
    r.assert_status(403);
    assert_eq!(r.code(), "forbidden");
    let svc = t
        .post("/api/v1/service-credentials", &owner, json!({"name": "ci", "permissions": ["workspace.documents.read"]}))
        .await;
    svc.assert_status(201);
    let svc = Auth::Bearer(svc.json()["secret"].as_str().unwrap().to_string());
    t.post("/api/v1/admin/backup", &svc, json!({})).await.assert_status(403);
    // the owner of an organization created later owns none of the others' data (a session acts
    // in its first organization, so the principal is made here)
    let other = t.post("/api/v1/account/accounts", &admin, json!({"name": "Side project"})).await;
    other.assert_status(201);
    let other = other.json();
    let me = t.get("/api/v1/auth/me", &admin).await.json();
    let p = steward::auth::Principal {
        via: steward::auth::Via::Session,
        org_id: steward::ids::OrgId(other["organization"]["id"].as_str().unwrap().to_string()),
        user_id: Some(steward::ids::UserId(me["user"]["id"].as_str().unwrap().to_string())),
        role: Some(steward::auth::Role::Owner),
        credential_id: None,
        session_hash: None,
        workspace_id: steward::ids::WorkspaceId(other["workspace"]["id"].as_str().unwrap().to_string()),
        permissions: steward::auth::Role::Owner.permissions(),
    };
    let err = steward::ops::authorize_backup(&t.app, &p).unwrap_err();
    assert_eq!(err.code.as_str(), "forbidden");
    // the owner's personal token may
    let token = t.token(&owner).await;
    t.post("/api/v1/admin/backup", &token, json!({})).await.assert_status(200);
}

/// The members of an archive, in order.
fn members(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for e in archive::reader(bytes).unwrap().entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().to_string_lossy().into_owned();
        let mut body = Vec::new();
        e.read_to_end(&mut body).unwrap();
        out.push((name, body));
    }
    out
}

/// An archive of `members`, as `steward backup` lays it out.
fn pack(members: &[(String, Vec<u8>)]) -> Vec<u8> {
    let enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    let mut tar = tar::Builder::new(enc);
    for (name, body) in members {
        let mut h = tar::Header::new_gnu();
        h.set_size(body.len() as u64);
        h.set_mode(0o600);
        h.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut h, name, body.as_slice()).unwrap();
    }
    let mut out = tar.into_inner().unwrap().finish().unwrap();
    out.flush().unwrap();
    out
}

/// `members` with a member named `name` (as given, unchecked) before the manifest.
fn pack_raw(members: &[(String, Vec<u8>)], name: &str) -> Vec<u8> {
    let enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    let mut tar = tar::Builder::new(enc);
    for (i, (n, body)) in members.iter().enumerate() {
        if i == members.len() - 1 {
            let mut h = tar::Header::new_old();
            h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
            h.set_size(1);
            h.set_mode(0o600);
            h.set_cksum();
            tar.append(&h, b"x".as_slice()).unwrap();
        }
        let mut h = tar::Header::new_gnu();
        h.set_size(body.len() as u64);
        h.set_mode(0o600);
        tar.append_data(&mut h, n, body.as_slice()).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

#[tokio::test]
async fn a_tampered_extended_or_cut_archive_is_refused_before_anything_is_written() {
    if crate::support::sqlite_mode_only(
        "steward backup copies the SQLite file; PostgreSQL backs up with pg_dump (scale_out::a_pg_dump…)",
    ) {
        return;
    }
    let (t, _owner) = filled().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("b.tar.zst");
    backup::write_file(&t.app.config.data_dir, &file).unwrap();
    let good = std::fs::read(&file).unwrap();
    let original = members(&good);
    assert_eq!(original.last().unwrap().0, "manifest.json", "the manifest comes last");

    let refused = |bytes: Vec<u8>, needle: &str| {
        let f = dir.path().join("bad.tar.zst");
        std::fs::write(&f, bytes).unwrap();
        let target = dir.path().join("target");
        let err = restore::restore(&f, &target, false).unwrap_err().message;
        assert!(err.contains(needle), "{needle:?} not in {err:?}");
        assert!(!target.exists(), "nothing written for {needle:?}");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(".steward-restore-"))
            .collect();
        assert!(leftovers.is_empty(), "the work directory is removed");
    };
    // one byte of the stored original changed
    let mut tampered = original.clone();
    let blob = tampered.iter_mut().find(|(n, _)| n.starts_with("blobs/")).unwrap();
    blob.1[3] ^= 0x20;
    refused(pack(&tampered), "does not match the manifest");
    // one byte of the database changed
    let mut tampered = original.clone();
    let db = &mut tampered[0].1;
    let at = db.len() / 2;
    db[at] ^= 1;
    refused(pack(&tampered), "steward.db does not match the manifest");
    // a member the manifest does not list
    let mut extended = original.clone();
    let sha = "ab".to_string() + &"c".repeat(62);
    extended.insert(1, (archive::blob_name(&sha), b"x".to_vec()));
    refused(pack(&extended), "not in the manifest");
    // a name outside the archive's layout (written raw: the tar crate refuses to make one)
    refused(pack_raw(&original, "../../etc/x"), "unknown member");
    // cut short: the manifest is missing, or the stream ends midway
    refused(pack(&original[..original.len() - 1]), "no manifest");
    refused(good[..good.len() / 2].to_vec(), "damaged or incomplete");

    // a target that is not empty needs --force, and is left alone without it
    let target = dir.path().join("full");
    std::fs::create_dir_all(&target).unwrap();
    std::fs::write(target.join("keep.txt"), b"mine").unwrap();
    let err = restore::restore(&file, &target, false).unwrap_err().message;
    assert!(err.contains("--force"), "{err}");
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 1);
    restore::restore(&file, &target, true).unwrap();
    assert!(target.join("steward.db").is_file());
    assert!(target.join("keep.txt").is_file(), "files a restore does not own stay");
    // a target a server holds is never touched
    let err = restore::restore(&file, &t.app.config.data_dir, true).unwrap_err().message;
    assert!(err.contains("stop it"), "{err}");
}

#[tokio::test]
async fn an_original_a_running_backup_may_need_is_kept_until_the_next_start() {
    if crate::support::sqlite_mode_only(
        "steward backup copies the SQLite file; PostgreSQL backs up with pg_dump (scale_out::a_pg_dump…)",
    ) {
        return;
    }
    let t = TestApp::new();
    let owner = t.owner().await;
    let r = t.upload(&owner, "note.txt", b"A note about the blue garage and its opening hours.", &[]).await;
    r.assert_status(202);
    let id = r.json()["id"].as_str().unwrap().to_string();
    t.drain();
    let data = t.app.config.data_dir.clone();
    let files = || steward::documents::blobs::files(&data).unwrap().len();
    assert_eq!(files(), 1);
    let hold = steward::ops::lock::backup(&data).unwrap();
    t.delete(&format!("/api/v1/document/{id}"), &owner).await.assert_status(204);
    assert_eq!(files(), 1, "kept while the backup runs");
    drop(hold);
    // and a backup a crash cut off leaves a work directory the next start removes
    std::fs::create_dir_all(data.join(".backup-cut").join("x")).unwrap();
    let TestApp { app, router, dir: _dir, .. } = t.restart(vec![]);
    assert_eq!(files(), 0, "removed at the next start");
    assert!(!data.join(".backup-cut").exists());
    drop(router);
    drop(app);
    let report = verify::verify(&data).unwrap();
    assert!(report.findings.iter().any(|f| f.message.contains("no orphan files")), "{:?}", report.findings);
}

#[test]
fn pre_migration_snapshots_keep_the_newest_three() {
    let dir = tempfile::tempdir().unwrap();
    let db = steward::storage::Db::open(&dir.path().join("steward.db"), 1).unwrap();
    drop(db);
    let mut made = Vec::new();
    for _ in 0..4 {
        made.push(backup::snapshot_before_migrating(dir.path(), 15, 16).unwrap());
    }
    let mut kept: Vec<_> =
        std::fs::read_dir(dir.path().join(backup::SNAPSHOTS_DIR)).unwrap().map(|e| e.unwrap().path()).collect();
    kept.sort();
    assert_eq!(kept, made[1..].to_vec(), "the oldest goes");
}
