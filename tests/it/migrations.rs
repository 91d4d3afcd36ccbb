use steward::storage::Db;
use steward::storage::migrations::MIGRATIONS;

#[test]
fn a_database_from_the_first_migration_upgrades_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let db = Db::open_without_migrating(&path, 1).unwrap();
    assert_eq!(db.migrate(Some(1)).unwrap(), vec![1]);
    // data written by the first version
    db.write(|tx| {
        tx.execute("INSERT INTO organizations (id, name, created_at) VALUES ('o1', 'Old Org', '2026-01-01T00:00:00.000Z')", [])?;
        tx.execute("INSERT INTO workspaces (id, organization_id, name, is_default, created_at, updated_at) VALUES ('w1', 'o1', 'Old WS', 1, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')", [])?;
        Ok(())
    })
    .unwrap();
    drop(db);

    let db = Db::open(&path, 1).unwrap();
    let st = db.migration_status().unwrap();
    assert!(st.is_current(), "{st:?}");
    assert_eq!(st.applied.len(), MIGRATIONS.len());
    let name: String =
        db.read(|c| Ok(c.query_row("SELECT name FROM workspaces WHERE id = 'w1'", [], |r| r.get(0))?)).unwrap();
    assert_eq!(name, "Old WS");
    // applying again is a no-op
    assert!(db.migrate(None).unwrap().is_empty());
    let fk: i64 =
        db.read(|c| Ok(c.query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| r.get(0))?)).unwrap();
    assert_eq!(fk, 0);
}
