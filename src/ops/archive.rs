//! The backup archive: a tar stream compressed with zstd (`.tar.zst`), written in one pass so the
//! HTTP route can stream it as it is made. Members, in order:
//!
//! - `steward.db`: a consistent copy of the database;
//! - `blobs/<2 hex>/<sha256>`: every stored original a document of that copy refers to;
//! - `public-session.key`: the public chat signing key, when the data directory has one;
//! - `manifest.json`, last (it holds the SHA-256 of every member before it): the [`Manifest`].
//!
//! Reading accepts exactly these names (nothing else, no links or directories), so an archive
//! cannot write outside the place it is restored to.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

pub const DATABASE: &str = "steward.db";
pub const SESSION_KEY: &str = "public-session.key";
pub const MANIFEST: &str = "manifest.json";
/// Bump when the layout or the manifest changes incompatibly.
pub const FORMAT_VERSION: u32 = 1;
/// The zstd level: fast (the database's vectors hardly compress; its text does).
const LEVEL: i32 = 3;

/// What an archive holds, written last into it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub format_version: u32,
    pub steward_version: String,
    /// The database's schema version (its last migration).
    pub schema_version: u32,
    pub created_at: String,
    /// Rows per table of the database copy.
    pub tables: BTreeMap<String, i64>,
    /// Every member but the manifest, in archive order.
    pub members: Vec<Member>,
    /// Originals documents refer to that the data directory lacked when the backup was made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_blobs: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Member {
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
}

/// What a member's name says it is.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Database,
    SessionKey,
    Manifest,
    /// A stored original, by its SHA-256.
    Blob(String),
}

/// The member name of a stored original.
pub fn blob_name(sha: &str) -> String {
    format!("blobs/{}/{sha}", &sha[..2])
}

/// What a member name is, or `None` for a name an archive may not have.
pub fn classify(name: &str) -> Option<Kind> {
    match name {
        DATABASE => Some(Kind::Database),
        SESSION_KEY => Some(Kind::SessionKey),
        MANIFEST => Some(Kind::Manifest),
        _ => {
            let rest = name.strip_prefix("blobs/")?;
            let (prefix, sha) = rest.split_once('/')?;
            (crate::documents::blobs::is_sha256(sha) && sha.starts_with(prefix) && prefix.len() == 2)
                .then(|| Kind::Blob(sha.to_string()))
        }
    }
}

/// A reader that hashes and counts what passes through it.
pub struct Hashing<R> {
    inner: R,
    hasher: Sha256,
    pub bytes: u64,
}

impl<R> Hashing<R> {
    pub fn new(inner: R) -> Self {
        Hashing { inner, hasher: Sha256::new(), bytes: 0 }
    }

    pub fn hex(self) -> String {
        hex::encode(self.hasher.finalize())
    }
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

fn io(e: std::io::Error) -> Error {
    Error::internal_msg(format!("cannot write the archive: {e}"))
}

/// Writes an archive member by member.
pub struct ArchiveWriter<W: Write> {
    tar: tar::Builder<zstd::stream::write::Encoder<'static, W>>,
    members: Vec<Member>,
    mtime: u64,
}

impl<W: Write> ArchiveWriter<W> {
    pub fn new(out: W) -> Result<Self> {
        let encoder = zstd::stream::write::Encoder::new(out, LEVEL).map_err(io)?;
        let mtime = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Ok(ArchiveWriter { tar: tar::Builder::new(encoder), members: Vec::new(), mtime })
    }

    fn append(&mut self, name: &str, len: u64, data: impl Read) -> Result<()> {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(len);
        header.set_mode(0o600);
        header.set_mtime(self.mtime);
        let mut reader = Hashing::new(data.take(len));
        self.tar.append_data(&mut header, name, &mut reader).map_err(io)?;
        if reader.bytes != len {
            return Err(Error::internal_msg(format!("{name} changed while it was archived")));
        }
        self.members.push(Member { path: name.to_string(), bytes: len, sha256: reader.hex() });
        Ok(())
    }

    /// Adds the file at `path` as `name`.
    pub fn add_file(&mut self, name: &str, path: &Path) -> Result<()> {
        let f = std::fs::File::open(path)
            .map_err(|e| Error::internal_msg(format!("cannot read {}: {e}", path.display())))?;
        let len = f.metadata().map_err(io)?.len();
        self.append(name, len, std::io::BufReader::with_capacity(256 * 1024, f))
    }

    /// Adds the manifest (with the members written) and ends the archive; returns the manifest
    /// and the output.
    pub fn finish(mut self, mut manifest: Manifest) -> Result<(Manifest, W)> {
        manifest.members = std::mem::take(&mut self.members);
        let json = serde_json::to_vec_pretty(&manifest).map_err(|e| Error::internal_msg(e.to_string()))?;
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(json.len() as u64);
        header.set_mode(0o600);
        header.set_mtime(self.mtime);
        self.tar.append_data(&mut header, MANIFEST, json.as_slice()).map_err(io)?;
        let encoder = self.tar.into_inner().map_err(io)?;
        let mut out = encoder.finish().map_err(io)?;
        out.flush().map_err(io)?;
        Ok((manifest, out))
    }
}

/// Opens an archive for reading, member by member.
pub fn reader<R: Read>(input: R) -> Result<tar::Archive<zstd::stream::read::Decoder<'static, std::io::BufReader<R>>>> {
    let decoder = zstd::stream::read::Decoder::new(input)
        .map_err(|e| Error::invalid(format!("not a Steward backup (zstd): {e}")))?;
    Ok(tar::Archive::new(decoder))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_names_are_a_closed_set() {
        let sha = "ab".to_string() + &"0".repeat(62);
        assert_eq!(classify(&blob_name(&sha)), Some(Kind::Blob(sha.clone())));
        assert_eq!(classify("steward.db"), Some(Kind::Database));
        assert_eq!(classify("manifest.json"), Some(Kind::Manifest));
        for bad in [
            "../steward.db",
            "/etc/passwd",
            "blobs/../../x",
            "blobs/cd/ab00",
            &format!("blobs/cd/{sha}"),
            &format!("blobs/ab/{sha}/x"),
            "index/text/meta.json",
            "steward.db-wal",
        ] {
            assert_eq!(classify(bad), None, "{bad}");
        }
    }

    #[test]
    fn an_archive_reads_back_with_its_hashes() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x");
        std::fs::write(&f, b"hello").unwrap();
        let mut w = ArchiveWriter::new(Vec::new()).unwrap();
        w.add_file(DATABASE, &f).unwrap();
        let m = Manifest {
            format_version: FORMAT_VERSION,
            steward_version: "t".into(),
            schema_version: 1,
            created_at: "now".into(),
            tables: BTreeMap::new(),
            members: vec![],
            missing_blobs: vec![],
        };
        let (m, bytes) = w.finish(m).unwrap();
        assert_eq!(m.members[0].sha256, hex::encode(Sha256::digest(b"hello")));
        let mut names = Vec::new();
        for e in reader(bytes.as_slice()).unwrap().entries().unwrap() {
            let mut e = e.unwrap();
            let name = e.path().unwrap().to_string_lossy().into_owned();
            let mut body = Vec::new();
            e.read_to_end(&mut body).unwrap();
            names.push((name, body.len()));
        }
        assert_eq!(names[0], ("steward.db".to_string(), 5));
        assert_eq!(names[1].0, "manifest.json");
    }
}
