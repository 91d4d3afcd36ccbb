//! DOCX and XLSX are ZIP archives. Before anything inflates one, its directory is checked against
//! zip bombs: total uncompressed size, entry count and compression ratio are capped, and entries
//! are read through a size limit so a lying header cannot inflate past it.

use std::io::{Cursor, Read};

use zip::ZipArchive;

use super::ExtractError;

pub const MAX_TOTAL_UNCOMPRESSED: u64 = 256 * 1024 * 1024;
pub const MAX_ENTRY_UNCOMPRESSED: u64 = 128 * 1024 * 1024;
pub const MAX_ENTRIES: usize = 20_000;
/// Larger entries may not be compressed more than this (ordinary XML is 10–30x).
pub const MAX_RATIO: u64 = 200;

pub enum OfficeKind {
    Docx,
    Xlsx,
}

pub fn office_kind(bytes: &[u8]) -> Option<OfficeKind> {
    let archive = ZipArchive::new(Cursor::new(bytes)).ok()?;
    let names: Vec<&str> = archive.file_names().collect();
    if names.contains(&"word/document.xml") {
        Some(OfficeKind::Docx)
    } else if names.contains(&"xl/workbook.xml") {
        Some(OfficeKind::Xlsx)
    } else {
        None
    }
}

/// Checks the archive's directory; returns it opened.
pub fn open_checked(bytes: &[u8]) -> Result<ZipArchive<Cursor<&[u8]>>, ExtractError> {
    let mut archive = ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| ExtractError(format!("the file is not a valid Office document ({e})")))?;
    if archive.len() > MAX_ENTRIES {
        return Err(ExtractError(format!("the document has {} parts; the limit is {MAX_ENTRIES}", archive.len())));
    }
    let mut total: u64 = 0;
    for i in 0..archive.len() {
        let f = archive.by_index_raw(i).map_err(|e| ExtractError(format!("the document is damaged ({e})")))?;
        let size = f.size();
        let packed = f.compressed_size().max(1);
        total = total.saturating_add(size);
        if size > MAX_ENTRY_UNCOMPRESSED || total > MAX_TOTAL_UNCOMPRESSED {
            return Err(ExtractError(format!(
                "the document expands to more than {} MB when unpacked; it looks like a zip bomb and was not opened",
                MAX_TOTAL_UNCOMPRESSED / (1024 * 1024)
            )));
        }
        if size > 1024 * 1024 && size / packed > MAX_RATIO {
            return Err(ExtractError(format!(
                "a part of the document is compressed {}:1, far beyond normal documents; it looks like a zip bomb and was not opened",
                size / packed
            )));
        }
    }
    Ok(archive)
}

/// Reads one entry, never inflating past [`MAX_ENTRY_UNCOMPRESSED`].
pub fn read_entry(archive: &mut ZipArchive<Cursor<&[u8]>>, name: &str) -> Result<Option<Vec<u8>>, ExtractError> {
    let f = match archive.by_name(name) {
        Ok(f) => f,
        Err(zip::result::ZipError::FileNotFound) => return Ok(None),
        Err(e) => return Err(ExtractError(format!("the document is damaged ({e})"))),
    };
    let mut out = Vec::new();
    f.take(MAX_ENTRY_UNCOMPRESSED + 1)
        .read_to_end(&mut out)
        .map_err(|e| ExtractError(format!("the document is damaged ({e})")))?;
    if out.len() as u64 > MAX_ENTRY_UNCOMPRESSED {
        return Err(ExtractError("a part of the document is larger than its header says; it was not opened".into()));
    }
    Ok(Some(out))
}
