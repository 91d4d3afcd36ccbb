//! Turning uploaded bytes into text: format detection from content (and, for text, the name),
//! then extraction. PDF, DOCX and XLSX are parsed in a separate `steward` process with a time and
//! memory limit, so a hostile or broken file can fail only its own document, never the server.

mod docx;
mod isolate;
mod pdf;
mod text;
mod xlsx;
mod zipguard;

use serde::{Deserialize, Serialize};

pub use isolate::{extract_isolated, run_child};
pub use text::{decode_text, looks_binary};

use crate::error::{Error, ErrorCode};

/// A detected document format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "language")]
pub enum Format {
    Pdf,
    Docx,
    Xlsx,
    Markdown,
    Text,
    /// Source code in a language with a grammar (see `documents::chunking::code`).
    Code(String),
}

impl Format {
    pub fn name(&self) -> String {
        match self {
            Format::Pdf => "pdf".into(),
            Format::Docx => "docx".into(),
            Format::Xlsx => "xlsx".into(),
            Format::Markdown => "markdown".into(),
            Format::Text => "text".into(),
            Format::Code(l) => format!("code:{l}"),
        }
    }
    pub fn parse(s: &str) -> Option<Format> {
        Some(match s {
            "pdf" => Format::Pdf,
            "docx" => Format::Docx,
            "xlsx" => Format::Xlsx,
            "markdown" => Format::Markdown,
            "text" => Format::Text,
            other => Format::Code(other.strip_prefix("code:")?.to_string()),
        })
    }
    pub fn mime(&self) -> &'static str {
        match self {
            Format::Pdf => "application/pdf",
            Format::Docx => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            Format::Xlsx => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            Format::Markdown => "text/markdown",
            Format::Text | Format::Code(_) => "text/plain",
        }
    }
    /// Binary formats are parsed out of process.
    pub fn is_binary(&self) -> bool {
        matches!(self, Format::Pdf | Format::Docx | Format::Xlsx)
    }
}

/// Extracted text with the page or sheet each part came from.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Extracted {
    /// Markdown-flavoured text (headings and tables as Markdown).
    pub text: String,
    /// Where pages (PDF) or sheets (XLSX) start, as byte offsets into `text`, in order.
    pub segments: Vec<Segment>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Segment {
    pub start: usize,
    pub page: Option<u32>,
    pub sheet: Option<String>,
}

impl Extracted {
    pub fn plain(text: String) -> Extracted {
        Extracted { text, segments: Vec::new() }
    }
    /// The segment containing byte `offset`.
    pub fn segment_at(&self, offset: usize) -> Option<&Segment> {
        self.segments.iter().rev().find(|s| s.start <= offset)
    }
}

/// Why a file could not be read, in words for the person who uploaded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractError(pub String);

impl std::fmt::Display for ExtractError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn unsupported(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::UnsupportedMediaType, message)
        .with_details(serde_json::json!({"supported": ["pdf", "markdown", "text", "docx", "xlsx", "source code"]}))
}

/// Source-code extensions and their languages (code-aware chunking).
pub fn code_language(ext: &str) -> Option<&'static str> {
    Some(match ext {
        "sh" | "bash" => "bash",
        "zsh" => "zsh",
        "fish" => "fish",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => "cpp",
        "cs" => "csharp",
        "css" => "css",
        "scss" => "scss",
        "less" => "less",
        "go" => "go",
        "java" => "java",
        "js" | "mjs" | "cjs" => "javascript",
        "jsx" => "jsx",
        "json" => "json",
        "ts" | "mts" | "cts" => "typescript",
        "tsx" => "tsx",
        "kt" | "kts" => "kotlin",
        "php" => "php",
        "py" => "python",
        "rb" => "ruby",
        "rs" => "rust",
        "scala" | "sc" => "scala",
        "sql" => "sql",
        "swift" => "swift",
        "toml" => "toml",
        "xml" => "xml",
        "yaml" => "yaml",
        "yml" => "yml",
        _ => return None,
    })
}

fn extension(filename: &str) -> String {
    std::path::Path::new(filename)
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
        .unwrap_or_default()
}

/// Detects the format from the content first and the name second. An empty file, an unsupported
/// binary, a ZIP that is neither DOCX nor XLSX, or a name that contradicts the content is a 4xx
/// with a plain reason.
pub fn detect(bytes: &[u8], filename: &str) -> Result<Format, Error> {
    if bytes.is_empty() {
        return Err(Error::invalid_field("file", "the file is empty"));
    }
    let ext = extension(filename);
    if bytes.starts_with(b"%PDF-") {
        return Ok(Format::Pdf);
    }
    if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
        return match zipguard::office_kind(bytes) {
            Some(zipguard::OfficeKind::Docx) => Ok(Format::Docx),
            Some(zipguard::OfficeKind::Xlsx) => Ok(Format::Xlsx),
            None => {
                Err(unsupported(format!("{filename} is a ZIP archive but not a Word (.docx) or Excel (.xlsx) file")))
            }
        };
    }
    if bytes.starts_with(b"\xD0\xCF\x11\xE0") {
        return Err(unsupported("legacy Office files (.doc, .xls) are not supported; save the file as .docx or .xlsx"));
    }
    match ext.as_str() {
        "pdf" => return Err(unsupported(format!("{filename} is named .pdf but is not a PDF file"))),
        "docx" | "xlsx" => return Err(unsupported(format!("{filename} is named .{ext} but is not an Office file"))),
        _ => {}
    }
    if looks_binary(bytes) {
        return Err(unsupported(format!("{filename} looks like binary data, not text")));
    }
    if matches!(ext.as_str(), "md" | "markdown" | "mdown" | "mkd") {
        return Ok(Format::Markdown);
    }
    if let Some(lang) = code_language(&ext) {
        return Ok(Format::Code(lang.to_string()));
    }
    Ok(Format::Text)
}

/// Extracts text in this process. Binary formats should go through [`extract_isolated`].
pub fn extract_in_process(bytes: &[u8], format: &Format) -> Result<Extracted, ExtractError> {
    match format {
        Format::Pdf => pdf::extract(bytes),
        Format::Docx => docx::extract(bytes),
        Format::Xlsx => xlsx::extract(bytes),
        Format::Markdown | Format::Text | Format::Code(_) => {
            let text = decode_text(bytes)?;
            if text.trim().is_empty() {
                return Err(ExtractError("the file contains no text".into()));
            }
            Ok(Extracted::plain(text))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_uses_content_first() {
        assert_eq!(detect(b"%PDF-1.7\n...", "x.txt").unwrap(), Format::Pdf);
        assert_eq!(detect(b"# Title\n\ntext", "notes.md").unwrap(), Format::Markdown);
        assert_eq!(detect(b"fn main() {}", "main.rs").unwrap(), Format::Code("rust".into()));
        assert_eq!(detect(b"plain words", "readme").unwrap(), Format::Text);
        assert_eq!(detect(b"", "x.txt").unwrap_err().code, ErrorCode::InvalidRequest);
        assert_eq!(detect(b"hello", "report.pdf").unwrap_err().code, ErrorCode::UnsupportedMediaType);
        let garbage: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        assert_eq!(detect(&garbage, "notes.txt").unwrap_err().code, ErrorCode::UnsupportedMediaType);
        assert_eq!(detect(b"PK\x03\x04garbage", "a.zip").unwrap_err().code, ErrorCode::UnsupportedMediaType);
    }

    #[test]
    fn format_names_round_trip() {
        for f in [Format::Pdf, Format::Docx, Format::Xlsx, Format::Markdown, Format::Text, Format::Code("rust".into())]
        {
            assert_eq!(Format::parse(&f.name()), Some(f));
        }
    }
}
