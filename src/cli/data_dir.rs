//! The commands on a data directory as a whole: `backup`, `restore`, `verify` and
//! `migrate-store` (the work is in `crate::ops`; this prints what it did), and the refusal of a
//! data directory a newer Steward wrote.

use std::process::ExitCode;

use crate::config::Config;

/// A data directory a newer Steward wrote: the message on stderr and the exit status
/// `ops::EXIT_NEWER_DATA_DIR`, with nothing in it changed.
pub(super) fn newer_refusal(config: &Config) -> Option<ExitCode> {
    match crate::ops::written_by_newer(&config.db_path()) {
        Ok(Some(msg)) => {
            eprintln!("steward: {msg}");
            Some(ExitCode::from(crate::ops::EXIT_NEWER_DATA_DIR))
        }
        _ => None,
    }
}

pub(super) fn backup(config: &Config, out: &std::path::Path) -> anyhow::Result<ExitCode> {
    let started = std::time::Instant::now();
    let m = crate::ops::backup::write_file(&config.data_dir, out).map_err(|e| anyhow::anyhow!("{}", plain(&e)))?;
    let bytes = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    println!(
        "backed up {} to {}: {} in {:.1} s ({:.1} MB)",
        config.data_dir.display(),
        out.display(),
        contents(&m),
        started.elapsed().as_secs_f64(),
        bytes as f64 / 1e6
    );
    if !m.missing_blobs.is_empty() {
        eprintln!(
            "warning: {} stored originals documents refer to were missing from the data directory",
            m.missing_blobs.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn migrate_store(from: &std::path::Path, to: &str, replace_nul: bool) -> anyhow::Result<ExitCode> {
    use crate::storage::postgres::copy::Nul;
    let started = std::time::Instant::now();
    let nul = if replace_nul { Nul::Replace } else { Nul::Refuse };
    let moved = crate::ops::migrate_store::run(from, to, nul, &mut |step| println!("  {step}"))
        .map_err(|e| anyhow::anyhow!("{}", plain(&e)))?;
    use crate::storage::postgres::copy::plural;
    let rows: i64 = moved.copied.tables.iter().map(|t| t.rows).sum();
    println!(
        "moved {} into {}: {}, {}, {} ({:.1} MB) in {:.1} s; row counts and checksums verified for every table",
        from.display(),
        crate::storage::postgres::redacted(to),
        plural(moved.copied.tables.len() as i64, "table"),
        plural(rows, "row"),
        plural(moved.copied.originals as i64, "original"),
        moved.copied.original_bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    for (column, n) in &moved.copied.nul_texts {
        println!(
            "note: {} of {column} held a NUL character, which PostgreSQL cannot store; written with U+FFFD",
            plural(*n as i64, "value")
        );
    }
    if !moved.missing_originals.is_empty() {
        eprintln!(
            "warning: {} stored originals documents refer to were already missing from {}",
            moved.missing_originals.len(),
            from.display()
        );
    }
    println!("next: give every node the same CONNECTOR_ENCRYPTION_KEY as this install");
    if moved.has_session_key {
        println!(
            "      and a copy of {} in every node's data directory (visitors' sessions stay valid on every node)",
            from.join(crate::ops::archive::SESSION_KEY).display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// What went wrong, in words: an internal error's cause (the message alone says "internal error").
fn plain(e: &crate::error::Error) -> String {
    match &e.source {
        Some(source) if e.code == crate::error::ErrorCode::Internal => source.to_string(),
        _ => e.message.clone(),
    }
}

/// "12 documents, 3 conversations, 2 agents, 1 workspace" from a manifest's counts.
fn contents(m: &crate::ops::archive::Manifest) -> String {
    let n = |t: &str| m.tables.get(t).copied().unwrap_or(0);
    let originals = m.members.iter().filter(|x| x.path.starts_with("blobs/")).count();
    format!(
        "{} workspaces, {} documents ({originals} stored originals), {} agents, {} conversations",
        n("workspaces"),
        n("documents"),
        n("agents"),
        n("conversations")
    )
}

pub(super) fn restore(config: &Config, file: &std::path::Path, force: bool) -> anyhow::Result<ExitCode> {
    let started = std::time::Instant::now();
    match crate::ops::restore::restore(file, &config.data_dir, force) {
        Ok(r) => {
            println!(
                "restored {} (steward {}, schema version {}, made {}) into {}: {} in {:.1} s; the search indexes are rebuilt when the server starts",
                file.display(),
                r.manifest.steward_version,
                r.manifest.schema_version,
                r.manifest.created_at,
                config.data_dir.display(),
                contents(&r.manifest),
                started.elapsed().as_secs_f64()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("steward: nothing was restored: {}", plain(&e));
            Ok(ExitCode::FAILURE)
        }
    }
}

pub(super) fn verify(config: &Config) -> anyhow::Result<ExitCode> {
    let report = crate::ops::verify::verify(&config.data_dir).map_err(|e| anyhow::anyhow!("{}", plain(&e)))?;
    for f in &report.findings {
        println!("[{}] {}", if f.problem { "FAIL" } else { "ok  " }, f.message);
    }
    match report.problems() {
        0 => {
            println!("{} is consistent", config.data_dir.display());
            Ok(ExitCode::SUCCESS)
        }
        n => {
            println!("{n} problem(s) found");
            Ok(ExitCode::FAILURE)
        }
    }
}
