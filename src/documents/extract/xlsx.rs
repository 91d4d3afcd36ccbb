//! Excel workbooks: each sheet becomes a Markdown table whose header is the sheet's first
//! non-empty row, under a `## <sheet>` heading; segments record where each sheet starts.

use std::io::Cursor;

use calamine::{Data, Reader, Xlsx};

use super::{ExtractError, Extracted, Segment, docx::markdown_table, zipguard};

/// Cells read per workbook; beyond it the rest is dropped (and said so in the text).
const MAX_CELLS: usize = 2_000_000;

pub fn extract(bytes: &[u8]) -> Result<Extracted, ExtractError> {
    zipguard::open_checked(bytes)?;
    let mut wb: Xlsx<_> =
        Xlsx::new(Cursor::new(bytes)).map_err(|e| ExtractError(format!("the Excel file cannot be read ({e})")))?;
    let mut text = String::new();
    let mut segments = Vec::new();
    let mut cells = 0usize;
    for name in wb.sheet_names() {
        let range = match wb.worksheet_range(&name) {
            Ok(r) => r,
            Err(e) => return Err(ExtractError(format!("the sheet {name:?} cannot be read ({e})"))),
        };
        let mut rows: Vec<Vec<String>> = Vec::new();
        for row in range.rows() {
            if cells >= MAX_CELLS {
                break;
            }
            cells += row.len();
            rows.push(row.iter().map(cell_text).collect());
        }
        let first = rows.iter().position(|r| r.iter().any(|c| !c.is_empty()));
        let Some(first) = first else { continue };
        segments.push(Segment { start: text.len(), page: None, sheet: Some(name.clone()) });
        text.push_str(&format!("## {name}\n\n"));
        let rows: Vec<Vec<String>> = rows[first..]
            .iter()
            .map(|r| r.iter().map(|c| c.replace('|', "\\|").replace('\n', " ")).collect())
            .collect();
        text.push_str(&markdown_table(&rows));
    }
    if cells >= MAX_CELLS {
        text.push_str(&format!("\n(The workbook has more than {MAX_CELLS} cells; the rest was not read.)\n"));
    }
    if text.trim().is_empty() {
        return Err(ExtractError("the Excel file contains no data".into()));
    }
    Ok(Extracted { text, segments })
}

fn cell_text(c: &Data) -> String {
    match c {
        Data::Empty => String::new(),
        Data::Float(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", *f as i64),
        Data::DateTime(d) => excel_date(d.as_f64()).unwrap_or_else(|| c.to_string()),
        other => other.to_string(),
    }
}

/// An Excel serial date (days since 1899-12-30) as ISO 8601.
fn excel_date(serial: f64) -> Option<String> {
    let base = chrono::NaiveDate::from_ymd_opt(1899, 12, 30)?.and_hms_opt(0, 0, 0)?;
    let t = base + chrono::Duration::milliseconds((serial * 86_400_000.0).round() as i64);
    Some(if serial.fract() == 0.0 { t.date().to_string() } else { t.format("%Y-%m-%dT%H:%M:%S").to_string() })
}
