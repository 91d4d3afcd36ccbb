//! Chunking: extracted text → chunks with their byte range, heading path, page or sheet.
//!
//! - `fixed_window`: overlapping character windows (ending at whitespace when one is near),
//!   blind to structure.
//! - `structured_semantic`: sections never cross a heading; paragraphs are packed up to the
//!   maximum, long ones split at sentences; tables split by rows with the header repeated; code
//!   split at syntax boundaries.
//! - `recursive_text`: the same table and code handling, but prose is packed across headings and
//!   split recursively (paragraphs, then sentences, then words).
//!
//! Structured sizes are model tokens, estimated fast (see [`approx_tokens`]).

mod blocks;
pub mod code;

use text_splitter::{ChunkConfig, ChunkSizer, CodeSplitter, TextSplitter};

use super::extract::{Extracted, Format};
use crate::settings::ingestion::{ChunkingStrategy, IngestionSettings};
use blocks::{Block, BlockKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkKind {
    Text,
    Table,
    Code,
}

impl ChunkKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChunkKind::Text => "text",
            ChunkKind::Table => "table",
            ChunkKind::Code => "code",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChunkDraft {
    pub content: String,
    /// Byte range in the extracted text.
    pub start: usize,
    pub end: usize,
    /// "Heading > Subheading", when inside a section.
    pub heading_path: Option<String>,
    pub page: Option<u32>,
    pub sheet: Option<String>,
    pub kind: ChunkKind,
    pub language: Option<String>,
}

/// A fast estimate of WordPiece tokens: one per word or punctuation mark, plus one per 6
/// characters beyond the first 6 of long words (which split into several pieces).
pub fn approx_tokens(s: &str) -> usize {
    let mut n = 0usize;
    let mut word = 0usize;
    for c in s.chars() {
        if c.is_alphanumeric() {
            word += 1;
        } else {
            if word > 0 {
                n += 1 + word.saturating_sub(6) / 6;
                word = 0;
            }
            if !c.is_whitespace() {
                n += 1;
            }
        }
    }
    if word > 0 {
        n += 1 + word.saturating_sub(6) / 6;
    }
    n
}

/// Splits prose longer than `max` tokens in linear time: into sentences (or lines), sentences
/// too long into words, words too long into character runs; then packs the pieces back up to
/// `max` tokens. Returns (byte offset, piece) pairs, trimmed.
pub fn split_prose(text: &str, max: usize) -> Vec<(usize, &str)> {
    let max = max.max(1);
    // 1. sentences; 2. too-long sentences into words, too-long words into character runs
    let mut pieces: Vec<(usize, usize, usize)> = Vec::new(); // (start, end, tokens)
    for (a, b) in sentence_spans(text) {
        let t = approx_tokens(&text[a..b]);
        if t <= max {
            pieces.push((a, b, t));
            continue;
        }
        let mut w = a;
        for (i, c) in text[a..b].char_indices() {
            if c.is_whitespace() {
                let end = a + i + c.len_utf8();
                push_word(text, w, end, max, &mut pieces);
                w = end;
            }
        }
        if w < b {
            push_word(text, w, b, max, &mut pieces);
        }
    }
    // 3. pack
    pack(pieces, max)
        .into_iter()
        .filter_map(|(a, b)| {
            let raw = &text[a..b];
            let lead = raw.len() - raw.trim_start().len();
            let piece = raw.trim();
            (!piece.is_empty()).then_some((a + lead, piece))
        })
        .collect()
}

/// Sentence spans: each ends at a line break, or at whitespace after `.`, `!`, `?` (and their
/// full-width forms).
fn sentence_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut begin = 0;
    let mut prev_end_mark = false;
    for (i, c) in text.char_indices() {
        if c == '\n' || (prev_end_mark && c.is_whitespace()) {
            let end = i + c.len_utf8();
            if end > begin {
                spans.push((begin, end));
            }
            begin = end;
            prev_end_mark = false;
            continue;
        }
        prev_end_mark = matches!(c, '.' | '!' | '?' | '。' | '！' | '？');
    }
    if begin < text.len() {
        spans.push((begin, text.len()));
    }
    spans
}

/// The word `text[ws..we]` as a piece, or, too long, as character runs.
fn push_word(text: &str, ws: usize, we: usize, max: usize, pieces: &mut Vec<(usize, usize, usize)>) {
    let wt = approx_tokens(&text[ws..we]);
    if wt <= max {
        pieces.push((ws, we, wt));
        return;
    }
    // a run with no spaces: cut every `max * 4` bytes (on character boundaries)
    let mut s = ws;
    while s < we {
        let mut e = (s + max * 4).min(we);
        while !text.is_char_boundary(e) {
            e += 1;
        }
        pieces.push((s, e, approx_tokens(&text[s..e])));
        s = e;
    }
}

/// Packs consecutive pieces joined while they fit in `max` tokens.
fn pack(pieces: Vec<(usize, usize, usize)>, max: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut cur: Option<(usize, usize, usize)> = None;
    for (a, b, t) in pieces {
        match cur.as_mut() {
            Some((_, ce, ct)) if *ct + t <= max => {
                *ce = b;
                *ct += t;
            }
            _ => {
                if let Some((ca, ce, _)) = cur.take() {
                    out.push((ca, ce));
                }
                cur = Some((a, b, t));
            }
        }
    }
    if let Some((ca, ce, _)) = cur {
        out.push((ca, ce));
    }
    out
}

/// Cuts very long text into windows of at most `max_bytes` (at a newline, else whitespace, else a
/// character boundary) before the recursive splitter sees it: its sizing is linear in the text it
/// measures, so whole megabyte paragraphs would make it quadratic.
fn presplit(text: &str, max_bytes: usize) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut off = 0;
    while text.len() - off > max_bytes {
        let window = &text[off..];
        let limit = window.floor_char_boundary(max_bytes);
        let head = &window[..limit];
        let half = head.floor_char_boundary(limit / 2);
        // the cut goes after the last newline (else whitespace) of the window's second half
        let tail = &head[half..];
        let after = |i: usize| half + i + tail[i..].chars().next().map_or(1, char::len_utf8);
        let cut = tail.rfind('\n').or_else(|| tail.rfind(char::is_whitespace)).map(after).unwrap_or(limit);
        out.push((off, &window[..cut]));
        off += cut;
    }
    if off < text.len() {
        out.push((off, &text[off..]));
    }
    out
}

/// Window size for [`presplit`]: generous against the chunk size (about 16 chunks).
fn presplit_bytes(max_tokens: usize) -> usize {
    (max_tokens * 16 * 8).max(4096)
}

struct Tokens;

impl ChunkSizer for Tokens {
    fn size(&self, chunk: &str) -> usize {
        approx_tokens(chunk)
    }
}

/// Chunks `doc` with `settings`.
pub fn chunk(doc: &Extracted, format: &Format, settings: &IngestionSettings) -> Vec<ChunkDraft> {
    let mut out = match settings.chunking_strategy {
        ChunkingStrategy::FixedWindow => fixed_window(
            &doc.text,
            settings.fixed_window_chunk_size as usize,
            settings.fixed_window_chunk_overlap as usize,
        ),
        strategy => {
            let min = settings.structured_min_chunk_size as usize;
            let max = settings.structured_max_chunk_size.max(1) as usize;
            let boundaries: Vec<usize> = doc.segments.iter().map(|s| s.start).collect();
            structured(&doc.text, format, strategy == ChunkingStrategy::StructuredSemantic, min, max, &boundaries)
        }
    };
    out.retain(|c| !c.content.trim().is_empty());
    for c in out.iter_mut() {
        if let Some(seg) = doc.segment_at(c.start) {
            c.page = seg.page;
            c.sheet = seg.sheet.clone();
        }
    }
    out
}

/// Overlapping windows of `size` characters, `overlap` shared with the previous window. A window
/// ends at the last whitespace in its final fifth when there is one, so words are not cut.
pub fn fixed_window(text: &str, size: usize, overlap: usize) -> Vec<ChunkDraft> {
    let size = size.max(1);
    let overlap = overlap.min(size - 1);
    let idx: Vec<usize> = text.char_indices().map(|(i, _)| i).chain(std::iter::once(text.len())).collect();
    let nchars = idx.len() - 1;
    let mut out = Vec::new();
    let mut start = 0usize; // in chars
    while start < nchars {
        let mut end = (start + size).min(nchars);
        if end < nchars {
            let floor = end - size / 5;
            if let Some(ws) =
                (floor.max(start + 1)..end).rev().find(|&k| text[idx[k]..idx[k + 1]].chars().all(char::is_whitespace))
            {
                end = ws;
            }
        }
        let (a, b) = (idx[start], idx[end]);
        out.push(ChunkDraft {
            content: text[a..b].trim().to_string(),
            start: a,
            end: b,
            heading_path: None,
            page: None,
            sheet: None,
            kind: ChunkKind::Text,
            language: None,
        });
        if end >= nchars {
            break;
        }
        start = if end - start > overlap { end - overlap } else { end };
    }
    out
}

struct Packer {
    out: Vec<ChunkDraft>,
    cur: Option<(String, usize, usize, Option<String>)>,
    min: usize,
    max: usize,
}

impl Packer {
    /// Before a table or code block: a pending chunk that is only heading lines is dropped (the
    /// heading travels in the block's heading path instead of as a chunk of its own).
    fn flush_before_block(&mut self) {
        if self
            .cur
            .as_ref()
            .is_some_and(|(c, ..)| c.lines().all(|l| l.trim().is_empty() || l.trim_start().starts_with('#')))
        {
            self.cur = None;
        }
        self.flush();
    }

    fn flush(&mut self) {
        if let Some((content, start, end, heading_path)) = self.cur.take() {
            self.out.push(ChunkDraft {
                content,
                start,
                end,
                heading_path,
                page: None,
                sheet: None,
                kind: ChunkKind::Text,
                language: None,
            });
        }
    }

    fn push_prose(&mut self, text: &str, start: usize, end: usize, heading: &Option<String>) {
        let t = approx_tokens(text);
        if let Some((content, _, cend, _)) = self.cur.as_mut()
            && approx_tokens(content) + t <= self.max
        {
            content.push_str("\n\n");
            content.push_str(text);
            *cend = end;
            return;
        }
        self.flush();
        if t <= self.max {
            self.cur = Some((text.to_string(), start, end, heading.clone()));
            return;
        }
        // Too long alone: split at sentences, then words, then characters.
        for (off, piece) in split_prose(text, self.max) {
            let a = start + off;
            self.out.push(ChunkDraft {
                content: piece.to_string(),
                start: a,
                end: a + piece.len(),
                heading_path: heading.clone(),
                page: None,
                sheet: None,
                kind: ChunkKind::Text,
                language: None,
            });
        }
    }

    fn push_table(
        &mut self,
        header: &[String],
        rows: &[(usize, usize, String)],
        start: usize,
        end: usize,
        heading: &Option<String>,
    ) {
        self.flush_before_block();
        let head = header.join("\n");
        let head_tokens = approx_tokens(&head);
        if rows.is_empty() {
            self.out.push(self.table_chunk(head, start, end, heading));
            return;
        }
        let mut group: Vec<&(usize, usize, String)> = Vec::new();
        let mut tokens = head_tokens;
        for row in rows {
            let t = approx_tokens(&row.2);
            if !group.is_empty() && tokens + t > self.max {
                self.emit_rows(&head, &group, heading);
                group.clear();
                tokens = head_tokens;
            }
            group.push(row);
            tokens += t;
        }
        if !group.is_empty() {
            self.emit_rows(&head, &group, heading);
        }
    }

    fn emit_rows(&mut self, head: &str, group: &[&(usize, usize, String)], heading: &Option<String>) {
        let mut content = head.to_string();
        for r in group {
            content.push('\n');
            content.push_str(&r.2);
        }
        let start = group.first().map(|r| r.0).unwrap_or(0);
        let end = group.last().map(|r| r.1).unwrap_or(start);
        let c = self.table_chunk(content, start, end, heading);
        self.out.push(c);
    }

    fn table_chunk(&self, content: String, start: usize, end: usize, heading: &Option<String>) -> ChunkDraft {
        ChunkDraft {
            content,
            start,
            end,
            heading_path: heading.clone(),
            page: None,
            sheet: None,
            kind: ChunkKind::Table,
            language: None,
        }
    }

    fn push_code(&mut self, code: &str, start: usize, language: Option<&str>, heading: &Option<String>) {
        self.flush_before_block();
        // The same capacity `min..max` always gave, but never empty or zero-sized: text-splitter
        // subtracts a chunk's size (at least 1) from the capacity's maximum.
        let lo = self.min.clamp(1, self.max.max(1));
        let hi = self.max.saturating_sub(1).max(lo);
        let cfg = || ChunkConfig::new(lo..=hi).with_sizer(Tokens);
        let code_splitter = language.and_then(code::grammar).and_then(|g| CodeSplitter::new(g, cfg()).ok());
        let text_splitter = TextSplitter::new(cfg());
        let mut pieces: Vec<(usize, String)> = Vec::new();
        for (base, part) in presplit(code, presplit_bytes(self.max)) {
            match &code_splitter {
                Some(s) => pieces.extend(s.chunk_indices(part).map(|(o, p)| (base + o, p.to_string()))),
                None => pieces.extend(text_splitter.chunk_indices(part).map(|(o, p)| (base + o, p.to_string()))),
            }
        }
        for (off, piece) in pieces {
            self.out.push(ChunkDraft {
                start: start + off,
                end: start + off + piece.len(),
                content: piece,
                heading_path: heading.clone(),
                page: None,
                sheet: None,
                kind: ChunkKind::Code,
                language: language.map(|l| l.to_string()),
            });
        }
    }
}

/// Which segment (page, sheet) byte `pos` falls in.
fn segment_of(boundaries: &[usize], pos: usize) -> usize {
    boundaries.iter().filter(|b| **b <= pos).count()
}

fn structured(
    text: &str,
    format: &Format,
    respect_headings: bool,
    min: usize,
    max: usize,
    boundaries: &[usize],
) -> Vec<ChunkDraft> {
    let mut p = Packer { out: Vec::new(), cur: None, min, max };
    if let Format::Code(lang) = format {
        p.push_code(text, 0, Some(lang), &None);
        return p.out;
    }
    let mut stack: Vec<(usize, String)> = Vec::new();
    let path = |stack: &Vec<(usize, String)>| {
        if stack.is_empty() {
            None
        } else {
            Some(stack.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>().join(" > "))
        }
    };
    for Block { kind, text: btext, start, end } in blocks::parse(text) {
        // pages and sheets are hard boundaries: a chunk never spans two
        if p.cur.as_ref().is_some_and(|(_, cs, _, _)| segment_of(boundaries, *cs) != segment_of(boundaries, start)) {
            p.flush();
        }
        match kind {
            BlockKind::Heading { level, text: h } => {
                while stack.last().is_some_and(|(l, _)| *l >= level) {
                    stack.pop();
                }
                stack.push((level, h));
                if respect_headings {
                    p.flush();
                }
                // The heading line opens the next chunk so the section's text carries its title.
                let heading = path(&stack);
                p.push_prose(&btext, start, end, &heading);
            }
            BlockKind::Paragraph => {
                let heading = path(&stack);
                p.push_prose(&btext, start, end, &heading);
            }
            BlockKind::Table { header, rows } => {
                let heading = path(&stack);
                p.push_table(&header, &rows, start, end, &heading);
            }
            BlockKind::Code { language } => {
                let heading = path(&stack);
                p.push_code(&btext, start, language.as_deref(), &heading);
            }
        }
    }
    p.flush();
    merge_small(p.out, min, max, boundaries)
}

/// Merges prose chunks below `min` tokens into their neighbour in the same section when the
/// result stays within `max`.
fn merge_small(chunks: Vec<ChunkDraft>, min: usize, max: usize, boundaries: &[usize]) -> Vec<ChunkDraft> {
    let mut out: Vec<ChunkDraft> = Vec::new();
    for c in chunks {
        if let Some(prev) = out.last_mut() {
            let small = approx_tokens(&c.content) < min || approx_tokens(&prev.content) < min;
            if small
                && prev.kind == ChunkKind::Text
                && c.kind == ChunkKind::Text
                && prev.heading_path == c.heading_path
                && segment_of(boundaries, prev.start) == segment_of(boundaries, c.start)
                && approx_tokens(&prev.content) + approx_tokens(&c.content) <= max
            {
                prev.content.push_str("\n\n");
                prev.content.push_str(&c.content);
                prev.end = c.end;
                continue;
            }
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::documents::extract::Segment;

    fn settings(strategy: ChunkingStrategy, min: u32, max: u32) -> IngestionSettings {
        IngestionSettings {
            chunking_strategy: strategy,
            structured_min_chunk_size: min,
            structured_max_chunk_size: max,
            ..Default::default()
        }
    }

    #[test]
    fn fixed_windows_overlap_and_cover_everything() {
        let text = "word ".repeat(500);
        let chunks = fixed_window(&text, 200, 50);
        assert!(chunks.len() > 10);
        assert_eq!(chunks[0].start, 0);
        assert_eq!(chunks.last().unwrap().end, text.len());
        for w in chunks.windows(2) {
            assert!(w[1].start < w[0].end, "windows overlap");
            assert!(w[0].end - w[0].start <= 200);
        }
        // unicode is cut on character boundaries
        let chunks = fixed_window(&"é".repeat(1000), 100, 10);
        assert!(chunks.iter().all(|c| c.content.chars().count() <= 100));
    }

    #[test]
    fn a_single_ten_megabyte_line_is_chunked_quickly() {
        let line = "x".repeat(10 * 1024 * 1024);
        let t = std::time::Instant::now();
        let chunks = fixed_window(&line, 800, 120);
        assert!(chunks.len() > 10_000);
        eprintln!("fixed {:?}", t.elapsed());
        let t = std::time::Instant::now();
        let s = chunk(
            &Extracted::plain("abcdefgh ".repeat(1_200_000)),
            &Format::Text,
            &settings(ChunkingStrategy::RecursiveText, 24, 220),
        );
        assert!(s.len() > 1000);
        eprintln!("recursive {:?}", t.elapsed());
        let t = std::time::Instant::now();
        let s = chunk(&Extracted::plain(line), &Format::Text, &settings(ChunkingStrategy::StructuredSemantic, 24, 220));
        assert!(s.len() > 1000);
        eprintln!("structured one line {:?}", t.elapsed());
    }

    #[test]
    fn structured_sections_do_not_cross_headings_and_carry_their_path() {
        let text = "# Billing\n\nPay monthly.\n\n## Refunds\n\nWithin 30 days.\n\n# Shipping\n\nTwo days.\n";
        let chunks = chunk(
            &Extracted::plain(text.into()),
            &Format::Markdown,
            &settings(ChunkingStrategy::StructuredSemantic, 1, 200),
        );
        let paths: Vec<Option<&str>> = chunks.iter().map(|c| c.heading_path.as_deref()).collect();
        assert_eq!(paths, vec![Some("Billing"), Some("Billing > Refunds"), Some("Shipping")]);
        assert!(chunks[1].content.contains("## Refunds") && chunks[1].content.contains("Within 30 days."));
        assert_eq!(&text[chunks[2].start..chunks[2].end], "# Shipping\n\nTwo days.");
        // recursive_text packs across headings
        let chunks = chunk(
            &Extracted::plain(text.into()),
            &Format::Markdown,
            &settings(ChunkingStrategy::RecursiveText, 1, 200),
        );
        assert_eq!(chunks.len(), 1);
    }

    #[test]
    fn tables_split_by_rows_with_the_header_repeated() {
        let mut text = String::from("| Plan | Price | Notes |\n|---|---|---|\n");
        for i in 0..60 {
            text.push_str(&format!("| plan {i} | {i}0 EUR | includes feature number {i} and support |\n"));
        }
        let chunks = chunk(
            &Extracted::plain(text.clone()),
            &Format::Markdown,
            &settings(ChunkingStrategy::StructuredSemantic, 10, 80),
        );
        assert!(chunks.len() > 3);
        for c in &chunks {
            assert_eq!(c.kind, ChunkKind::Table);
            assert!(c.content.starts_with("| Plan | Price | Notes |\n|---|---|---|\n"), "{}", c.content);
            assert!(approx_tokens(&c.content) <= 80 + 30);
        }
        let all: String = chunks.iter().map(|c| c.content.clone()).collect();
        for i in 0..60 {
            assert!(all.contains(&format!("| plan {i} |")));
        }
        // fixed_window is not table-aware
        let fw = chunk(
            &Extracted::plain(text),
            &Format::Markdown,
            &IngestionSettings { fixed_window_chunk_size: 300, ..Default::default() },
        );
        assert!(fw.iter().skip(1).any(|c| !c.content.starts_with("| Plan")));
    }

    #[test]
    fn code_splits_at_syntax_boundaries() {
        let mut src = String::new();
        for i in 0..30 {
            src.push_str(&format!("fn function_{i}(x: u32) -> u32 {{\n    let y = x + {i};\n    y * 2\n}}\n\n"));
        }
        let chunks = chunk(
            &Extracted::plain(src.clone()),
            &Format::Code("rust".into()),
            &settings(ChunkingStrategy::StructuredSemantic, 10, 60),
        );
        assert!(chunks.len() > 3);
        for c in &chunks {
            assert_eq!(c.kind, ChunkKind::Code);
            assert!(c.content.trim_start().starts_with("fn "), "chunk starts mid-function: {}", c.content);
            assert!(c.content.trim_end().ends_with('}'), "chunk ends mid-function: {}", c.content);
        }
        // fenced code inside Markdown
        let md = format!("# API\n\nIntro text.\n\n```python\n{}```\n", "def f():\n    return 1\n\n".repeat(40));
        let chunks =
            chunk(&Extracted::plain(md), &Format::Markdown, &settings(ChunkingStrategy::StructuredSemantic, 5, 40));
        let code: Vec<_> = chunks.iter().filter(|c| c.kind == ChunkKind::Code).collect();
        assert!(code.len() > 1);
        assert!(
            code.iter().all(|c| c.language.as_deref() == Some("python") && c.content.trim_start().starts_with("def f"))
        );
        assert!(code.iter().all(|c| c.heading_path.as_deref() == Some("API")));
    }

    #[test]
    fn chunks_know_their_page_and_sheet() {
        let doc = Extracted {
            text: "Page one text.\n\nPage two text.\n\n".into(),
            segments: vec![
                Segment { start: 0, page: Some(1), sheet: None },
                Segment { start: 16, page: Some(2), sheet: None },
            ],
        };
        let chunks = chunk(&doc, &Format::Pdf, &settings(ChunkingStrategy::StructuredSemantic, 1, 4));
        assert_eq!(chunks.iter().map(|c| c.page).collect::<Vec<_>>(), vec![Some(1), Some(2)]);
    }

    #[test]
    fn prose_splits_at_sentences_first() {
        let text = "One short sentence. Another one here! A third? ".repeat(20);
        let parts = split_prose(&text, 20);
        assert!(parts.len() > 5);
        for (off, p) in &parts {
            assert_eq!(&text[*off..*off + p.len()], *p);
            assert!(approx_tokens(p) <= 20, "{p}");
            assert!(p.ends_with('.') || p.ends_with('!') || p.ends_with('?'), "cut mid-sentence: {p:?}");
        }
    }

    #[test]
    fn presplit_covers_the_text_in_order() {
        let text = "alpha beta\ngamma delta epsilon ".repeat(1000);
        let parts = presplit(&text, 500);
        assert!(parts.iter().all(|(_, p)| p.len() <= 500));
        let joined: String = parts.iter().map(|(_, p)| *p).collect();
        assert_eq!(joined, text);
        for (off, p) in &parts {
            assert_eq!(&text[*off..*off + p.len()], *p);
        }
    }

    #[test]
    fn token_estimate_is_in_the_right_range() {
        assert_eq!(approx_tokens("the cat sat."), 4);
        let t = approx_tokens("experimental investigation of the aerodynamics of a wing in a slipstream .");
        assert!((12..=20).contains(&t), "{t}");
    }

    fn hostile_settings(strategy: ChunkingStrategy, max: u32) -> IngestionSettings {
        IngestionSettings {
            chunking_strategy: strategy,
            fixed_window_chunk_size: max * 4,
            fixed_window_chunk_overlap: max,
            structured_min_chunk_size: max / 4,
            structured_max_chunk_size: max,
            ..Default::default()
        }
    }

    /// Chunks `text` every way the format allows and checks every chunk's offsets.
    fn chunk_all_ways(text: &str, formats: &[Format], max: u32) -> Result<(), proptest::test_runner::TestCaseError> {
        let doc =
            Extracted { text: text.to_string(), segments: vec![Segment { start: 0, page: Some(1), sheet: None }] };
        for format in formats {
            for strategy in
                [ChunkingStrategy::FixedWindow, ChunkingStrategy::StructuredSemantic, ChunkingStrategy::RecursiveText]
            {
                for c in chunk(&doc, format, &hostile_settings(strategy, max)) {
                    proptest::prop_assert!(text.is_char_boundary(c.start) && text.is_char_boundary(c.end));
                    proptest::prop_assert!(c.start <= c.end && c.end <= text.len());
                }
            }
        }
        Ok(())
    }

    #[test]
    fn a_window_whose_middle_falls_inside_a_character_is_presplit() {
        // one ASCII byte, then three-byte characters: the window's middle is not a boundary
        let text = format!("x{}", "名".repeat(20_000));
        let parts = presplit(&text, 28_160);
        assert!(parts.len() > 1);
        assert_eq!(parts.iter().map(|(_, p)| p.len()).sum::<usize>(), text.len());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Every strategy and format chunks short arbitrary Unicode without panicking, and every
        /// chunk's offsets are char boundaries.
        #[test]
        fn chunking_never_panics_on_arbitrary_unicode(text in crate::testkit::hostile_text(300), max in 1u32..120) {
            chunk_all_ways(&text, &[Format::Text, Format::Markdown, Format::Code("rust".into()), Format::Code("python".into())], max)?;
            for (off, piece) in split_prose(&text, max as usize) {
                proptest::prop_assert!(text.is_char_boundary(off));
                proptest::prop_assert!(text[off..].starts_with(piece));
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(12))]

        /// Long runs of multi-byte text (kilobytes): windows and their halves land inside
        /// characters.
        #[test]
        fn long_text_is_presplit_and_chunked_on_char_boundaries(text in crate::testkit::long_hostile_text()) {
            for (off, piece) in presplit(&text, 4096) {
                proptest::prop_assert!(text[off..].starts_with(piece));
            }
            chunk_all_ways(&text, &[Format::Text], 200)?;
        }
    }
}
