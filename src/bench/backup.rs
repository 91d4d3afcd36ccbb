//! `steward bench backup`: backups, restores and index rebuilds, in process on the real code.
//!
//! A data directory is made with Cranfield ingested (as `bench tune` does) and `conversations`
//! conversations of four messages each written straight through the conversations module (in
//! transactions of 500); then `runs` times: `ops::backup::write_file` (time, archive size),
//! `ops::restore::restore` into a fresh directory (time) and `ops::verify::verify` of the copy.
//! Separately, a data directory with a synthetic corpus of about `chunks` chunks (the knowledge
//! bench's recombined Cranfield sentences) has both search indexes rebuilt from SQLite `runs`
//! times (`SearchIndex::rebuild`, the code the background rebuild runs). Medians are reported.

use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

use super::median;
use crate::app::{App, Options};
use crate::config::Config;
use crate::conversations::{self, Channel, NewConversation, NewMessage, Role, Source, Visibility};

fn size_of_dir(p: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(p) else { return 0 };
    entries
        .filter_map(|e| e.ok())
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => size_of_dir(&e.path()),
            _ => e.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}

/// Writes `n` conversations of four messages on the workspace's default agent.
fn conversations(app: &App, ws: &crate::ids::WorkspaceId, n: usize) -> anyhow::Result<()> {
    let agent =
        app.db.read(|c| crate::agents::default_id(c, ws))?.ok_or_else(|| anyhow::anyhow!("no default agent"))?;
    let revision = app.db.read(|c| crate::agents::revisions::published(c, &agent))?.map(|(id, _, _)| id);
    let now = crate::clock::rfc3339(app.clock.now());
    let mut done = 0;
    while done < n {
        let batch = (n - done).min(500);
        app.db.write(|tx| {
            for k in done..done + batch {
                let id = conversations::start(
                    tx,
                    &NewConversation {
                        workspace_id: &ws.0,
                        agent_id: &agent,
                        revision_id: revision.as_deref(),
                        channel: Channel::Api,
                        visibility: Visibility::Visitor,
                        test_execution_id: None,
                        started_by: None,
                        public_session_id: None,
                    },
                    &now,
                )?;
                for (m, (role, source)) in
                    [(Role::User, Source::Visitor), (Role::Assistant, Source::Agent)].iter().cycle().take(4).enumerate()
                {
                    let content = if *role == Role::User {
                        format!("Question {m} of conversation {k}: what is the pressure distribution on a flat plate at Mach {}?", k % 7)
                    } else {
                        format!("Answer {m} of conversation {k}: the measured pressure rises towards the leading edge, as the cited reports show for Mach {}.", k % 7)
                    };
                    conversations::append_message(
                        tx,
                        &ws.0,
                        &NewMessage {
                            conversation_id: &id,
                            role: *role,
                            source: *source,
                            content: &content,
                            citations: json!([]),
                            metadata: json!({}),
                            trace_id: None,
                            request_id: None,
                        },
                        &now,
                    )?;
                }
            }
            Ok(())
        })?;
        done += batch;
    }
    Ok(())
}

/// How much `run` makes and how often it measures.
pub struct Sizes {
    /// Conversations of four messages added to the data directory.
    pub conversations: usize,
    /// Chunks in the corpus whose indexes are rebuilt (0 skips it).
    pub chunks: usize,
    pub runs: usize,
}

/// Backup, restore and verify of Cranfield + conversations; index rebuilds of about `chunks`;
/// with `postgres`, `migrate-store` of the same data directory into a new database per run.
pub fn run(config: &Config, cranfield: &Path, sizes: Sizes, postgres: Option<&str>) -> anyhow::Result<Value> {
    let Sizes { conversations: conversations_n, chunks, runs } = sizes;
    let work = tempfile::tempdir()?;
    let data = work.path().join("data");
    let collection = super::collection::Collection::load(cranfield)?;
    let started = Instant::now();
    let (app, p) = super::tune::ingest(&data, &collection, json!({}), Some(config.clone()))?;
    let ingest_s = started.elapsed().as_secs_f64();
    let started = Instant::now();
    conversations(&app, &p.workspace_id, conversations_n)?;
    let conversations_s = started.elapsed().as_secs_f64();
    app.shutdown();
    drop(app);
    let data_bytes = size_of_dir(&data);
    eprintln!("data directory ready ({ingest_s:.0} s ingest, {conversations_s:.1} s conversations)");

    let (mut backup_s, mut restore_s, mut verify_s, mut sizes) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut manifest = None;
    for i in 0..runs {
        let archive = work.path().join(format!("b{i}.tar.zst"));
        let t = Instant::now();
        let m = crate::ops::backup::write_file(&data, &archive).map_err(|e| anyhow::anyhow!("{e}"))?;
        backup_s.push(t.elapsed().as_secs_f64());
        sizes.push(std::fs::metadata(&archive)?.len() as f64);
        let target = work.path().join(format!("r{i}"));
        let t = Instant::now();
        crate::ops::restore::restore(&archive, &target, false).map_err(|e| anyhow::anyhow!("{e}"))?;
        restore_s.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let report = crate::ops::verify::verify(&target).map_err(|e| anyhow::anyhow!("{e}"))?;
        verify_s.push(t.elapsed().as_secs_f64());
        anyhow::ensure!(report.problems() == 0, "the restored copy does not verify: {:?}", report.findings);
        std::fs::remove_file(&archive)?;
        std::fs::remove_dir_all(&target)?;
        manifest = Some(m);
        eprintln!("run {i}: backup {:.2} s, restore {:.2} s", backup_s[i], restore_s[i]);
    }
    let m = manifest.ok_or_else(|| anyhow::anyhow!("no run"))?;
    let rows = |t: &str| m.tables.get(t).copied().unwrap_or(0);
    let mut report = json!({
        "dataDirectoryMb": data_bytes as f64 / 1e6,
        "documents": rows("documents"),
        "chunks": rows("chunks"),
        "conversations": rows("conversations"),
        "messages": rows("messages"),
        "backupSeconds": median(&backup_s),
        "backupRuns": backup_s,
        "archiveMb": median(&sizes) / 1e6,
        "restoreSeconds": median(&restore_s),
        "restoreRuns": restore_s,
        "verifySeconds": median(&verify_s),
    });
    if let Some(url) = postgres {
        report["migrateStore"] = migrate_store(&data, url, runs)?;
    }
    if chunks > 0 {
        report["rebuild"] = rebuild(config, cranfield, chunks, runs, &work.path().join("synthetic"))?;
    }
    Ok(report)
}

/// `migrate-store` of `data` into a new database on the server of `url`, `runs` times.
fn migrate_store(data: &Path, url: &str, runs: usize) -> anyhow::Result<Value> {
    use crate::storage::postgres;
    let (mut seconds, mut rows, mut originals_mb) = (Vec::new(), 0, 0.0);
    for i in 0..runs {
        let name = format!("steward_bench_{}_{i}", std::process::id());
        let target = postgres::create_database(url, &name).map_err(|e| anyhow::anyhow!("{e}"))?;
        let t = Instant::now();
        let moved =
            crate::ops::migrate_store::run(data, &target, crate::storage::postgres::copy::Nul::Refuse, &mut |_| {});
        seconds.push(t.elapsed().as_secs_f64());
        postgres::drop_database(url, &name).map_err(|e| anyhow::anyhow!("{e}"))?;
        let moved = moved.map_err(|e| anyhow::anyhow!("{e}"))?;
        rows = moved.copied.tables.iter().map(|t| t.rows).sum::<i64>();
        originals_mb = moved.copied.original_bytes as f64 / 1e6;
        eprintln!("run {i}: migrate-store {:.2} s ({rows} rows)", seconds[i]);
    }
    let s = median(&seconds);
    Ok(json!({
        "seconds": s,
        "runs": seconds,
        "rows": rows,
        "rowsPerSecond": rows as f64 / s,
        "originalsMb": originals_mb,
    }))
}

/// Both indexes rebuilt from SQLite `runs` times over a synthetic corpus of about `chunks` chunks.
fn rebuild(config: &Config, cranfield: &Path, chunks: usize, runs: usize, dir: &Path) -> anyhow::Result<Value> {
    let c = super::cranfield::Collection::load(cranfield)?;
    // generous: documents are added in rounds until the corpus has `chunks` live chunks
    let mut docs = super::knowledge::synthetic_docs(&c, chunks * 2).into_iter();
    let empty = super::collection::Collection {
        name: "synthetic".into(),
        docs: Vec::new(),
        queries: Vec::new(),
        qrels: Default::default(),
    };
    let (app, p) = super::tune::ingest(dir, &empty, json!({}), Some(config.clone()))?;
    app.start_background();
    let actor = p.actor(None);
    let started = Instant::now();
    loop {
        let live = crate::documents::progress(&app, &p).map_err(|e| anyhow::anyhow!("{e}"))?.index.live_chunks;
        if live as usize >= chunks {
            break;
        }
        // about a round's worth of documents (six chunks each at the default chunk size), then
        // wait for them
        let round = ((chunks - live as usize) / 6).clamp(1, 1000);
        let batch: Vec<Value> = docs.by_ref().take(round).collect();
        anyhow::ensure!(!batch.is_empty(), "the synthetic corpus ran out at {live} chunks");
        for d in batch {
            crate::documents::create(
                &app,
                &p,
                &actor,
                crate::documents::NewDocument {
                    title: d["title"].as_str().unwrap_or_default().to_string(),
                    content: d["content"].as_str().unwrap_or_default().to_string(),
                    metadata: Some(d["metadata"].clone()),
                    external_document_id: None,
                    enrichment_override: None,
                    source_id: None,
                },
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        while !crate::documents::progress(&app, &p).map_err(|e| anyhow::anyhow!("{e}"))?.idle {
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    }
    eprintln!("synthetic corpus ingested in {:.0} s", started.elapsed().as_secs_f64());
    let search = app.search().map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut seconds = Vec::new();
    let mut live = 0;
    for _ in 0..runs {
        let t = Instant::now();
        live = search.rebuild(&app.db).map_err(|e| anyhow::anyhow!("{e}"))?;
        seconds.push(t.elapsed().as_secs_f64());
    }
    let (text, vectors) = search.counts();
    anyhow::ensure!(text as usize == live && vectors == live, "rebuilt {text} text and {vectors} vectors of {live}");
    let index_bytes = size_of_dir(&dir.join("index"));
    app.shutdown();
    drop(app);
    // a start that finds the indexes gone: opening does not wait for the rebuild
    std::fs::remove_dir_all(dir.join("index"))?;
    let config = Config { data_dir: dir.to_path_buf(), ..config.clone() };
    let t = Instant::now();
    let app = App::build(config, Options::default()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let open_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    app.finish_search_rebuild().map_err(|e| anyhow::anyhow!("{e}"))?;
    let background_s = t.elapsed().as_secs_f64();
    app.shutdown();
    Ok(json!({
        "chunks": live,
        "seconds": median(&seconds),
        "runs": seconds,
        "chunksPerSecond": live as f64 / median(&seconds),
        "indexMb": index_bytes as f64 / 1e6,
        "openSecondsWithRebuildDue": open_s,
        "rebuildAfterOpenSeconds": background_s,
    }))
}
