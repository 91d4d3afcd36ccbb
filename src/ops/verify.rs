//! `steward verify`: checks a data directory without changing it (the server must be stopped):
//! the database's integrity and foreign keys, its schema, every original a document refers to
//! (present, and holding what its name says), files under `blobs/` no document refers to, and,
//! for an index that is current, that every live chunk is in it. An index that is missing or not
//! current is only noted: the next start rebuilds it.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::documents::blobs;
use crate::error::{Error, Result};
use crate::search::inspect::{self, Health};
use crate::storage::{Conn, migrations, snapshot};

/// One finding.
#[derive(Debug, Clone)]
pub struct Finding {
    /// A problem (the exit status is 1), or a note.
    pub problem: bool,
    pub message: String,
}

/// What `verify` found.
#[derive(Debug, Default)]
pub struct Report {
    pub findings: Vec<Finding>,
}

impl Report {
    fn ok(&mut self, message: impl Into<String>) {
        self.findings.push(Finding { problem: false, message: message.into() });
    }
    fn problem(&mut self, message: impl Into<String>) {
        self.findings.push(Finding { problem: true, message: message.into() });
    }
    pub fn problems(&self) -> usize {
        self.findings.iter().filter(|f| f.problem).count()
    }
}

/// Checks `data_dir`. An error means it could not be checked at all.
pub fn verify(data_dir: &Path) -> Result<Report> {
    let db_path = data_dir.join("steward.db");
    if !db_path.is_file() {
        return Err(Error::invalid(format!("{} has no database (steward.db)", data_dir.display())));
    }
    let _lock = super::lock::server_stopped(data_dir, "verifying")?;
    let mut r = Report::default();
    let c = snapshot::open_read_only(&db_path)?;
    let st = migrations::status(&c)?;
    if !st.unknown.is_empty() {
        return Err(Error::invalid(migrations::newer_message(&st)));
    }
    let problems = snapshot::integrity_problems(&c)?;
    if problems.is_empty() {
        r.ok("the database passes PRAGMA integrity_check");
    } else {
        r.problem(format!("the database fails PRAGMA integrity_check: {}", problems.join("; ")));
    }
    match snapshot::foreign_key_problems(&c)? {
        0 => r.ok("no row breaks a foreign key"),
        n => r.problem(format!("{n} rows break a foreign key (PRAGMA foreign_key_check)")),
    }
    if !st.modified.is_empty() {
        r.problem(format!("migrations {:?} changed after they were applied", st.modified));
    }
    if !st.pending.is_empty() {
        r.ok(format!(
            "schema version {}: migrations {:?} are applied at the next start (the indexes are checked after them)",
            migrations::schema_version(&st),
            st.pending
        ));
        originals(data_dir, &Conn::sqlite(&c), &mut r)?;
        return Ok(r);
    }
    r.ok(format!("schema version {}", migrations::schema_version(&st)));
    originals(data_dir, &Conn::sqlite(&c), &mut r)?;
    indexes(data_dir, &Conn::sqlite(&c), &mut r)?;
    Ok(r)
}

/// Every referenced original present and whole; files nothing refers to.
fn originals(data_dir: &Path, c: &Conn, r: &mut Report) -> Result<()> {
    let refs = crate::documents::blob_references(c)?;
    let mut by_sha: HashMap<String, Vec<String>> = HashMap::new();
    for (doc, sha) in refs {
        by_sha.entry(sha).or_default().push(doc);
    }
    let mut bad = 0;
    for (sha, docs) in &by_sha {
        let p = blobs::path(data_dir, sha);
        match std::fs::read(&p) {
            Err(_) => {
                bad += 1;
                r.problem(format!("the original of document {} is missing ({})", docs[0], p.display()));
            }
            Ok(bytes) if hex::encode(Sha256::digest(&bytes)) != *sha => {
                bad += 1;
                r.problem(format!("the original of document {} is damaged ({})", docs[0], p.display()));
            }
            Ok(_) => {}
        }
    }
    if bad == 0 {
        r.ok(format!("all {} stored originals documents refer to are present and whole", by_sha.len()));
    }
    let referenced: HashSet<&String> = by_sha.keys().collect();
    let orphans: Vec<_> = blobs::files(data_dir)
        .map_err(|e| Error::internal_msg(format!("cannot list the originals: {e}")))?
        .into_iter()
        .filter(|(p, sha)| !p.is_dir() && !sha.as_ref().is_some_and(|s| referenced.contains(s)))
        .collect();
    if orphans.is_empty() {
        r.ok("no orphan files under blobs/");
    } else {
        r.problem(format!(
            "{} files under blobs/ belong to no document (the next start removes them), e.g. {}",
            orphans.len(),
            orphans[0].0.display()
        ));
    }
    Ok(())
}

fn indexes(data_dir: &Path, c: &Conn, r: &mut Report) -> Result<()> {
    let i = inspect::inspect(&data_dir.join("index"), c)?;
    for (name, health, missing) in [("text", &i.text, &i.missing_text), ("vector", &i.vectors, &i.missing_vectors)] {
        match health {
            Health::Missing => r.ok(format!("the {name} index is not built yet: the next start builds it")),
            Health::NotCurrent(why) => {
                r.ok(format!("the {name} index is not current ({why}): the next start rebuilds it"))
            }
            Health::Current(_) if missing.is_empty() => {
                r.ok(format!("the {name} index holds every live chunk ({})", i.live))
            }
            Health::Current(_) => r.problem(format!(
                "the {name} index lacks {} of {} live chunks (first: chunk {}); `steward reindex` rebuilds it",
                missing.len(),
                i.live,
                missing[0]
            )),
        }
    }
    if i.pending > 0 {
        r.ok(format!("{} index changes are in the log, applied at the next start", i.pending));
    }
    Ok(())
}
