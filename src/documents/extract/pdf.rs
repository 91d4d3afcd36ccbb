//! PDF text by page. Password-protected PDFs and PDFs without a text layer fail with a reason.

use super::{ExtractError, Extracted, Segment};

fn is_encrypted(bytes: &[u8]) -> bool {
    bytes.windows(8).any(|w| w == b"/Encrypt")
}

pub fn extract(bytes: &[u8]) -> Result<Extracted, ExtractError> {
    let pages = match pdf_extract::extract_text_from_mem_by_pages(bytes) {
        Ok(p) => p,
        Err(e) => {
            if is_encrypted(bytes) {
                // An owner password alone (no user password) still lets the text be read.
                match pdf_extract::extract_text_from_mem_by_pages_encrypted(bytes, "") {
                    Ok(p) => p,
                    Err(_) => {
                        return Err(ExtractError("the PDF is password-protected; upload an unprotected copy".into()));
                    }
                }
            } else {
                return Err(ExtractError(format!("the PDF cannot be read; it may be damaged ({e})")));
            }
        }
    };
    let mut text = String::new();
    let mut segments = Vec::new();
    for (i, page) in pages.iter().enumerate() {
        let page = page.replace('\r', "\n");
        let page = page.trim();
        if page.is_empty() {
            continue;
        }
        segments.push(Segment { start: text.len(), page: Some(i as u32 + 1), sheet: None });
        text.push_str(page);
        text.push_str("\n\n");
    }
    if text.trim().is_empty() {
        if is_encrypted(bytes) {
            return Err(ExtractError("the PDF is password-protected; upload an unprotected copy".into()));
        }
        return Err(ExtractError(
            "the PDF has no text layer (it may be scanned images); no text could be extracted".into(),
        ));
    }
    Ok(Extracted { text, segments })
}
