//! Small real files made by the tests: PDF, DOCX, XLSX, and hostile variants.

#![allow(dead_code)]

use std::io::Write;

use zip::write::SimpleFileOptions;

fn pdf_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('(', "\\(").replace(')', "\\)")
}

/// A PDF with one page per entry (Helvetica text), built with a correct cross-reference table.
/// `encrypt` adds an /Encrypt dictionary that no empty password opens.
pub fn pdf_with(pages: &[&str], encrypt: bool) -> Vec<u8> {
    let mut objs: Vec<String> = Vec::new();
    let n = pages.len();
    // 1 catalog, 2 pages, 3 font, then (page, content) pairs
    objs.push("<< /Type /Catalog /Pages 2 0 R >>".into());
    let kids: Vec<String> = (0..n).map(|i| format!("{} 0 R", 4 + 2 * i)).collect();
    objs.push(format!("<< /Type /Pages /Kids [{}] /Count {n} >>", kids.join(" ")));
    objs.push("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".into());
    for (i, text) in pages.iter().enumerate() {
        let mut stream = String::from("BT /F1 12 Tf 72 720 Td 14 TL\n");
        for line in text.lines() {
            stream.push_str(&format!("({}) Tj T*\n", pdf_escape(line)));
        }
        stream.push_str("ET");
        objs.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
            5 + 2 * i
        ));
        objs.push(format!("<< /Length {} >>\nstream\n{stream}\nendstream", stream.len()));
    }
    if encrypt {
        objs.push("<< /Filter /Standard /V 1 /R 2 /O <0011223344556677889900112233445566778899001122334455667788990011> /U <8899001122334455667788990011223344556677889900112233445566778899> /P -44 >>".into());
    }
    let mut out = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut offsets = Vec::new();
    for (i, o) in objs.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{o}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(format!("xref\n0 {}\n0000000000 65535 f \n", objs.len() + 1).as_bytes());
    for off in offsets {
        out.extend_from_slice(format!("{off:010} 00000 n \n").as_bytes());
    }
    let enc = if encrypt {
        format!(
            " /Encrypt {} 0 R /ID [<0123456789abcdef0123456789abcdef> <0123456789abcdef0123456789abcdef>]",
            objs.len()
        )
    } else {
        String::new()
    };
    out.extend_from_slice(
        format!("trailer\n<< /Size {} /Root 1 0 R{enc} >>\nstartxref\n{xref}\n%%EOF\n", objs.len() + 1).as_bytes(),
    );
    out
}

pub fn pdf(pages: &[&str]) -> Vec<u8> {
    pdf_with(pages, false)
}

fn zip_of(files: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut buf);
        let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (name, data) in files {
            z.start_file(*name, opts).unwrap();
            z.write_all(data).unwrap();
        }
        z.finish().unwrap();
    }
    buf.into_inner()
}

const CONTENT_TYPES: &str = r#"<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/><Override PartName="/xl/worksheets/sheet2.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>"#;

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A Word document: a heading, paragraphs and a table.
pub fn docx(heading: &str, paragraphs: &[&str], table: &[&[&str]]) -> Vec<u8> {
    let mut body = format!(
        r#"<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>{}</w:t></w:r></w:p>"#,
        xml_escape(heading)
    );
    for p in paragraphs {
        body.push_str(&format!(r#"<w:p><w:r><w:t xml:space="preserve">{}</w:t></w:r></w:p>"#, xml_escape(p)));
    }
    if !table.is_empty() {
        body.push_str("<w:tbl>");
        for row in table {
            body.push_str("<w:tr>");
            for cell in row.iter() {
                body.push_str(&format!("<w:tc><w:p><w:r><w:t>{}</w:t></w:r></w:p></w:tc>", xml_escape(cell)));
            }
            body.push_str("</w:tr>");
        }
        body.push_str("</w:tbl>");
    }
    let doc = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>{body}</w:body></w:document>"#
    );
    zip_of(&[("[Content_Types].xml", CONTENT_TYPES.as_bytes().to_vec()), ("word/document.xml", doc.into_bytes())])
}

/// A DOCX whose document part inflates far beyond its size (a zip bomb).
pub fn docx_bomb() -> Vec<u8> {
    let mut doc = br#"<?xml version="1.0"?><w:document xmlns:w="x"><w:body><w:p><w:r><w:t>"#.to_vec();
    doc.extend(std::iter::repeat_n(b'a', 40 * 1024 * 1024));
    doc.extend_from_slice(b"</w:t></w:r></w:p></w:body></w:document>");
    zip_of(&[("[Content_Types].xml", CONTENT_TYPES.as_bytes().to_vec()), ("word/document.xml", doc)])
}

fn col(i: usize) -> String {
    let mut s = String::new();
    let mut n = i + 1;
    while n > 0 {
        s.insert(0, (b'A' + ((n - 1) % 26) as u8) as char);
        n = (n - 1) / 26;
    }
    s
}

/// An Excel workbook with the given sheets (rows of inline-string cells).
pub fn xlsx(sheets: &[(&str, Vec<Vec<String>>)]) -> Vec<u8> {
    let mut files: Vec<(String, Vec<u8>)> = vec![
        ("[Content_Types].xml".into(), CONTENT_TYPES.as_bytes().to_vec()),
        (
            "_rels/.rels".into(),
            br#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>"#.to_vec(),
        ),
    ];
    let mut wb_sheets = String::new();
    let mut rels = String::new();
    for (i, (name, rows)) in sheets.iter().enumerate() {
        wb_sheets.push_str(&format!(r#"<sheet name="{}" sheetId="{}" r:id="rId{}"/>"#, xml_escape(name), i + 1, i + 1));
        rels.push_str(&format!(
            r#"<Relationship Id="rId{}" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet{}.xml"/>"#,
            i + 1,
            i + 1
        ));
        let mut data = String::new();
        for (r, row) in rows.iter().enumerate() {
            data.push_str(&format!(r#"<row r="{}">"#, r + 1));
            for (c, cell) in row.iter().enumerate() {
                if let Ok(n) = cell.parse::<f64>() {
                    data.push_str(&format!(r#"<c r="{}{}"><v>{n}</v></c>"#, col(c), r + 1));
                } else {
                    data.push_str(&format!(
                        r#"<c r="{}{}" t="inlineStr"><is><t>{}</t></is></c>"#,
                        col(c),
                        r + 1,
                        xml_escape(cell)
                    ));
                }
            }
            data.push_str("</row>");
        }
        files.push((
            format!("xl/worksheets/sheet{}.xml", i + 1),
            format!(r#"<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>{data}</sheetData></worksheet>"#).into_bytes(),
        ));
    }
    files.push((
        "xl/workbook.xml".into(),
        format!(r#"<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets>{wb_sheets}</sheets></workbook>"#).into_bytes(),
    ));
    files.push((
        "xl/_rels/workbook.xml.rels".into(),
        format!(r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">{rels}</Relationships>"#).into_bytes(),
    ));
    let refs: Vec<(&str, Vec<u8>)> = files.iter().map(|(n, d)| (n.as_str(), d.clone())).collect();
    zip_of(&refs)
}

/// An XLSX whose sheet inflates far beyond its size.
pub fn xlsx_bomb() -> Vec<u8> {
    let mut sheet = br#"<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>"#.to_vec();
    sheet.extend(std::iter::repeat_n(b' ', 40 * 1024 * 1024));
    sheet.extend_from_slice(b"</sheetData></worksheet>");
    let mut files = vec![("[Content_Types].xml", CONTENT_TYPES.as_bytes().to_vec()), ("xl/workbook.xml", br#"<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheets><sheet name="S" sheetId="1"/></sheets></workbook>"#.to_vec())];
    files.push(("xl/worksheets/sheet1.xml", sheet));
    zip_of(&files)
}
