//! A small block parser for Markdown-flavoured text: ATX headings, fenced code, Markdown and HTML
//! tables, and paragraphs, each with its byte range in the source.

#[derive(Debug, Clone, PartialEq)]
pub enum BlockKind {
    Heading {
        level: usize,
        text: String,
    },
    Paragraph,
    Code {
        language: Option<String>,
    },
    /// A table: the header line(s) and the body rows, as Markdown lines.
    Table {
        header: Vec<String>,
        rows: Vec<(usize, usize, String)>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub kind: BlockKind,
    /// The block's text (for code: the code without the fences).
    pub text: String,
    pub start: usize,
    pub end: usize,
}

fn heading(line: &str) -> Option<(usize, String)> {
    let t = line.trim_start();
    if line.len() - t.len() > 3 {
        return None;
    }
    let level = t.bytes().take_while(|b| *b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &t[level..];
    if !rest.is_empty() && !rest.starts_with(' ') && !rest.starts_with('\t') {
        return None;
    }
    Some((level, rest.trim().trim_end_matches('#').trim().to_string()))
}

fn fence(line: &str) -> Option<(String, Option<String>)> {
    let t = line.trim_start();
    for marker in ["```", "~~~"] {
        if let Some(rest) = t.strip_prefix(marker) {
            let n = marker.len() + rest.bytes().take_while(|b| *b == marker.as_bytes()[0]).count();
            let info = t[n..].trim();
            let lang = info
                .split_whitespace()
                .next()
                .map(|s| s.trim_matches('{').trim_matches('}').trim_start_matches('.').to_ascii_lowercase());
            return Some((t[..n].to_string(), lang.filter(|l| !l.is_empty())));
        }
    }
    None
}

fn is_table_separator(line: &str) -> bool {
    let t = line.trim();
    t.contains('-') && t.contains('|') && t.chars().all(|c| matches!(c, '|' | '-' | ':' | ' ' | '\t'))
}

fn is_table_row(line: &str) -> bool {
    let t = line.trim();
    t.starts_with('|') || (t.contains('|') && t.matches('|').count() >= 2)
}

/// Lines with their byte offsets (without the newline).
fn lines(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut pos = 0;
    for l in text.split_inclusive('\n') {
        out.push((pos, l.strip_suffix('\n').unwrap_or(l)));
        pos += l.len();
    }
    out
}

pub fn parse(text: &str) -> Vec<Block> {
    let mut p = Parser { text, ls: lines(text), blocks: Vec::new(), para: None };
    let mut i = 0;
    while i < p.ls.len() {
        let (off, line) = p.ls[i];
        if line.trim().is_empty() {
            p.flush();
            i += 1;
            continue;
        }
        if let Some((level, htext)) = heading(line) {
            p.flush();
            // The block is the trimmed line, and its offsets are the trimmed line's.
            let lead = line.len() - line.trim_start().len();
            p.blocks.push(Block {
                kind: BlockKind::Heading { level, text: htext },
                text: line.trim().to_string(),
                start: off + lead,
                end: off + line.trim_end().len(),
            });
            i += 1;
            continue;
        }
        if let Some((marker, language)) = fence(line) {
            p.flush();
            i = p.code(i, &marker, language);
            continue;
        }
        if is_table_row(line) && i + 1 < p.ls.len() && is_table_separator(p.ls[i + 1].1) {
            p.flush();
            i = p.markdown_table(i);
            continue;
        }
        if line.trim_start().to_ascii_lowercase().starts_with("<table") {
            p.flush();
            i = p.html_table(i);
            continue;
        }
        match p.para.as_mut() {
            Some((_, b)) => *b = i + 1,
            None => p.para = Some((i, i + 1)),
        }
        i += 1;
    }
    p.flush();
    p.blocks
}

/// The block parser's state: the source's lines, the blocks so far and the open paragraph.
struct Parser<'t> {
    text: &'t str,
    ls: Vec<(usize, &'t str)>,
    blocks: Vec<Block>,
    /// (start line, end line exclusive)
    para: Option<(usize, usize)>,
}

impl Parser<'_> {
    /// Closes the open paragraph.
    fn flush(&mut self) {
        let ls = &self.ls;
        if let Some((a, b)) = self.para.take() {
            let start = ls[a].0;
            let end = ls[b - 1].0 + ls[b - 1].1.len();
            let t = text_of(text_range(ls, a, b));
            if !t.trim().is_empty() {
                self.blocks.push(Block { kind: BlockKind::Paragraph, text: t, start, end });
            }
        }
    }

    /// The fenced code block opening at line `i`; returns the line after it.
    fn code(&mut self, i: usize, marker: &str, language: Option<String>) -> usize {
        let (ls, text) = (&self.ls, self.text);
        let (off, line) = ls[i];
        let mut j = i + 1;
        while j < ls.len() && !ls[j].1.trim_start().starts_with(marker) {
            j += 1;
        }
        let body_start = if i + 1 < ls.len() { ls[i + 1].0 } else { off + line.len() };
        let body_end = if j > i + 1 { ls[j - 1].0 + ls[j - 1].1.len() } else { body_start };
        let end = if j < ls.len() { ls[j].0 + ls[j].1.len() } else { body_end };
        let body = if body_end > body_start { text[body_start..body_end].to_string() } else { String::new() };
        if !body.trim().is_empty() {
            self.blocks.push(Block { kind: BlockKind::Code { language }, text: body, start: body_start, end });
        }
        (j + 1).min(ls.len())
    }

    /// The Markdown table whose header is line `i`; returns the line after it.
    fn markdown_table(&mut self, i: usize) -> usize {
        let ls = &self.ls;
        let (off, line) = ls[i];
        let header = vec![line.trim().to_string(), ls[i + 1].1.trim().to_string()];
        let mut rows = Vec::new();
        let mut j = i + 2;
        while j < ls.len() && is_table_row(ls[j].1) && !ls[j].1.trim().is_empty() {
            rows.push((ls[j].0, ls[j].0 + ls[j].1.len(), ls[j].1.trim().to_string()));
            j += 1;
        }
        let end = if j > i + 2 { ls[j - 1].0 + ls[j - 1].1.len() } else { ls[i + 1].0 + ls[i + 1].1.len() };
        let t = self.text[off..end].to_string();
        self.blocks.push(Block { kind: BlockKind::Table { header, rows }, text: t, start: off, end });
        j
    }

    /// The HTML table opening at line `i` (a paragraph if it does not parse); returns the line
    /// after it.
    fn html_table(&mut self, i: usize) -> usize {
        let ls = &self.ls;
        let off = ls[i].0;
        let mut j = i;
        while j < ls.len() && !ls[j].1.to_ascii_lowercase().contains("</table>") {
            j += 1;
        }
        let last = j.min(ls.len() - 1);
        let end = ls[last].0 + ls[last].1.len();
        let html = &self.text[off..end];
        match html_table(html, off) {
            Some(kind) => self.blocks.push(Block { kind, text: html.to_string(), start: off, end }),
            None => self.blocks.push(Block { kind: BlockKind::Paragraph, text: html.to_string(), start: off, end }),
        }
        last + 1
    }
}

fn text_range<'a>(ls: &'a [(usize, &'a str)], a: usize, b: usize) -> &'a [(usize, &'a str)] {
    &ls[a..b]
}

fn text_of(ls: &[(usize, &str)]) -> String {
    ls.iter().map(|(_, l)| *l).collect::<Vec<_>>().join("\n")
}

fn strip_tags(s: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in s.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", " ")
        .replace("&quot;", "\"")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// An HTML table as a Markdown table block (rows keep the byte range of their `<tr>`).
fn html_table(html: &str, base: usize) -> Option<BlockKind> {
    let lower = html.to_ascii_lowercase();
    let mut rows: Vec<(usize, usize, Vec<String>)> = Vec::new();
    let mut pos = 0;
    while let Some(s) = lower[pos..].find("<tr") {
        let start = pos + s;
        let end = lower[start..].find("</tr>").map(|e| start + e + 5).unwrap_or(lower.len());
        let row_html = &html[start..end];
        let row_lower = &lower[start..end];
        let mut cells = Vec::new();
        let mut cpos = 0;
        loop {
            let td = row_lower[cpos..].find("<td");
            let th = row_lower[cpos..].find("<th");
            let next = match (td, th) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) | (None, Some(a)) => a,
                (None, None) => break,
            };
            let cstart = cpos + next;
            let open_end = row_lower[cstart..].find('>').map(|e| cstart + e + 1).unwrap_or(row_lower.len());
            let close = ["</td>", "</th>", "<td", "<th"]
                .iter()
                .filter_map(|m| row_lower[open_end..].find(m).map(|e| open_end + e))
                .min()
                .unwrap_or(row_lower.len());
            cells.push(strip_tags(&row_html[open_end..close]).replace('|', "\\|"));
            cpos = close.max(open_end);
            if cpos >= row_lower.len() {
                break;
            }
        }
        if !cells.is_empty() {
            rows.push((base + start, base + end, cells));
        }
        pos = end;
        if pos >= lower.len() {
            break;
        }
    }
    let (first, rest) = rows.split_first()?;
    let width = rows.iter().map(|r| r.2.len()).max().unwrap_or(1);
    let fmt = |cells: &Vec<String>| {
        let mut c = cells.clone();
        c.resize(width, String::new());
        format!("| {} |", c.join(" | "))
    };
    Some(BlockKind::Table {
        header: vec![fmt(&first.2), format!("|{}", " --- |".repeat(width))],
        rows: rest.iter().map(|(s, e, c)| (*s, *e, fmt(c))).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_indented_heading_has_the_offsets_of_its_trimmed_text() {
        let text = "intro\n\r  # Title \u{2028}\nbody";
        let h = parse(text).into_iter().find(|b| matches!(b.kind, BlockKind::Heading { .. })).unwrap();
        assert_eq!(&text[h.start..h.end], h.text);
    }

    #[test]
    fn parses_headings_code_tables_and_paragraphs() {
        let text = "# Title\n\nFirst para\nstill first.\n\n```rust\nfn main() {}\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n\nLast.\n";
        let b = parse(text);
        assert!(matches!(&b[0].kind, BlockKind::Heading { level: 1, text } if text == "Title"));
        assert_eq!(b[1].kind, BlockKind::Paragraph);
        assert_eq!(b[1].text, "First para\nstill first.");
        assert_eq!(&text[b[1].start..b[1].end], "First para\nstill first.");
        assert!(matches!(&b[2].kind, BlockKind::Code { language: Some(l) } if l == "rust"));
        assert_eq!(b[2].text, "fn main() {}");
        match &b[3].kind {
            BlockKind::Table { header, rows } => {
                assert_eq!(header[0], "| a | b |");
                assert_eq!(rows.len(), 2);
                assert_eq!(&text[rows[1].0..rows[1].1], "| 3 | 4 |");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(b[4].text, "Last.");
    }

    #[test]
    fn html_tables_become_rows() {
        let text = "<table><tr><th>Plan</th><th>Price</th></tr>\n<tr><td>Basic</td><td>10 &amp; up</td></tr></table>\n";
        let b = parse(text);
        match &b[0].kind {
            BlockKind::Table { header, rows } => {
                assert_eq!(header[0], "| Plan | Price |");
                assert_eq!(rows[0].2, "| Basic | 10 & up |");
            }
            other => panic!("{other:?}"),
        }
    }
}
