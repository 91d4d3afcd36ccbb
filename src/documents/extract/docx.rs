//! Word documents: `word/document.xml` to Markdown (headings from paragraph styles, list items,
//! tables with their first row as header).

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

use super::{ExtractError, Extracted, zipguard};

pub fn extract(bytes: &[u8]) -> Result<Extracted, ExtractError> {
    let mut archive = zipguard::open_checked(bytes)?;
    let xml = zipguard::read_entry(&mut archive, "word/document.xml")?
        .ok_or_else(|| ExtractError("the Word document has no body (word/document.xml is missing)".into()))?;
    let text = to_markdown(&xml)?;
    if text.trim().is_empty() {
        return Err(ExtractError("the Word document contains no text".into()));
    }
    Ok(Extracted::plain(text))
}

#[derive(Default)]
struct Para {
    text: String,
    heading: Option<usize>,
    list: bool,
}

fn heading_level(style: &str) -> Option<usize> {
    let s = style.to_ascii_lowercase();
    if s == "title" {
        return Some(1);
    }
    s.strip_prefix("heading").and_then(|n| n.trim().parse::<usize>().ok()).map(|n| n.clamp(1, 6))
}

fn to_markdown(xml: &[u8]) -> Result<String, ExtractError> {
    let mut reader = Reader::from_reader(xml);
    let mut buf = Vec::new();
    let mut w = Markdown::default();
    loop {
        let ev = reader
            .read_event_into(&mut buf)
            .map_err(|e| ExtractError(format!("the Word document is damaged ({e})")))?;
        match ev {
            Event::Eof => break,
            Event::Start(e) | Event::Empty(e) => w.start(&e),
            Event::Text(t) if w.in_text => {
                let s = t.decode().map_err(|e| ExtractError(format!("the Word document is damaged ({e})")))?;
                let s = quick_xml::escape::unescape(&s).map(|c| c.into_owned()).unwrap_or_else(|_| s.into_owned());
                push(&mut w.para, &mut w.cell, &s);
            }
            Event::GeneralRef(r) if w.in_text => {
                let name = String::from_utf8_lossy(r.as_ref()).to_string();
                let s = match name.as_str() {
                    "amp" => "&",
                    "lt" => "<",
                    "gt" => ">",
                    "quot" => "\"",
                    "apos" => "'",
                    _ => "",
                };
                push(&mut w.para, &mut w.cell, s);
            }
            Event::End(e) => w.end(e.local_name().as_ref()),
            _ => {}
        }
        buf.clear();
    }
    Ok(w.out.trim_end().to_string() + "\n")
}

/// The Markdown written so far and where the reader is in the body.
#[derive(Default)]
struct Markdown {
    out: String,
    para: Option<Para>,
    /// tables: rows of cells of text; nesting flattens into the outer table
    table_depth: usize,
    rows: Vec<Vec<String>>,
    cell: Option<String>,
    in_text: bool,
}

impl Markdown {
    /// An opening (or empty) element.
    fn start(&mut self, e: &BytesStart) {
        let name = e.local_name();
        match name.as_ref() {
            b"p" => self.para = Some(Para::default()),
            b"pStyle" => {
                if let Some(p) = self.para.as_mut() {
                    for a in e.attributes().flatten() {
                        if a.key.local_name().as_ref() == b"val" {
                            p.heading = heading_level(&String::from_utf8_lossy(&a.value));
                        }
                    }
                }
            }
            b"numPr" => {
                if let Some(p) = self.para.as_mut() {
                    p.list = true;
                }
            }
            b"t" => self.in_text = true,
            b"tab" => push(&mut self.para, &mut self.cell, "\t"),
            b"br" | b"cr" => push(&mut self.para, &mut self.cell, "\n"),
            b"tbl" => {
                self.table_depth += 1;
                if self.table_depth == 1 {
                    self.rows.clear();
                }
            }
            b"tr" if self.table_depth == 1 => self.rows.push(Vec::new()),
            b"tc" if self.table_depth == 1 => self.cell = Some(String::new()),
            _ => {}
        }
    }

    /// A closing element.
    fn end(&mut self, name: &[u8]) {
        match name {
            b"t" => self.in_text = false,
            b"p" => self.end_paragraph(),
            b"tc" if self.table_depth == 1 => {
                if let (Some(c), Some(row)) = (self.cell.take(), self.rows.last_mut()) {
                    row.push(c.replace('|', "\\|").replace('\n', " "));
                }
            }
            b"tbl" => {
                self.table_depth = self.table_depth.saturating_sub(1);
                if self.table_depth == 0 {
                    self.out.push_str(&markdown_table(&self.rows));
                    self.rows.clear();
                }
            }
            _ => {}
        }
    }

    /// A paragraph goes into the open table cell, else out as a heading, list item or paragraph.
    fn end_paragraph(&mut self) {
        let Some(p) = self.para.take() else { return };
        let line = p.text.trim().to_string();
        if let Some(c) = self.cell.as_mut() {
            if !line.is_empty() {
                if !c.is_empty() {
                    c.push(' ');
                }
                c.push_str(&line);
            }
        } else if !line.is_empty() {
            match (p.heading, p.list) {
                (Some(h), _) => self.out.push_str(&format!("{} {}\n\n", "#".repeat(h), line)),
                (None, true) => self.out.push_str(&format!("- {line}\n")),
                (None, false) => self.out.push_str(&format!("{line}\n\n")),
            }
        }
    }
}

fn push(para: &mut Option<Para>, cell: &mut Option<String>, s: &str) {
    match para.as_mut() {
        Some(p) => p.text.push_str(s),
        None => {
            if let Some(c) = cell.as_mut() {
                c.push_str(s)
            }
        }
    }
}

/// A Markdown table with the first row as header.
pub fn markdown_table(rows: &[Vec<String>]) -> String {
    let rows: Vec<&Vec<String>> = rows.iter().filter(|r| r.iter().any(|c| !c.trim().is_empty())).collect();
    let Some(first) = rows.first() else { return String::new() };
    let width = rows.iter().map(|r| r.len()).max().unwrap_or(0).max(1);
    let line = |r: &Vec<String>| {
        let mut cells: Vec<String> = r.iter().map(|c| c.trim().to_string()).collect();
        cells.resize(width, String::new());
        format!("| {} |\n", cells.join(" | "))
    };
    let mut s = line(first);
    s.push_str(&format!("|{}\n", " --- |".repeat(width)));
    for r in &rows[1..] {
        s.push_str(&line(r));
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_lists_and_tables_become_markdown() {
        let xml = br#"<w:document xmlns:w="x"><w:body>
            <w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Refunds</w:t></w:r></w:p>
            <w:p><w:r><w:t xml:space="preserve">Within 30 days &amp; with receipt.</w:t></w:r></w:p>
            <w:p><w:pPr><w:numPr/></w:pPr><w:r><w:t>Item one</w:t></w:r></w:p>
            <w:tbl><w:tr><w:tc><w:p><w:r><w:t>Plan</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>Price</w:t></w:r></w:p></w:tc></w:tr>
                   <w:tr><w:tc><w:p><w:r><w:t>Basic</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>10</w:t></w:r></w:p></w:tc></w:tr></w:tbl>
        </w:body></w:document>"#;
        let md = to_markdown(xml).unwrap();
        assert!(md.contains("# Refunds\n"), "{md}");
        assert!(md.contains("Within 30 days & with receipt."), "{md}");
        assert!(md.contains("- Item one"), "{md}");
        assert!(md.contains("| Plan | Price |\n| --- | --- |\n| Basic | 10 |"), "{md}");
    }
}
