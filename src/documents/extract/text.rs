//! Text decoding: UTF-8, UTF-16 with a byte-order mark, else Windows-1252 (what "non-UTF-8 text"
//! almost always is). Binary data is refused.

use super::ExtractError;

/// True when the bytes are not text: NUL bytes, or many control characters in the first 8 KiB.
pub fn looks_binary(bytes: &[u8]) -> bool {
    if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
        return false; // UTF-16 with BOM
    }
    let head = &bytes[..bytes.len().min(8192)];
    if head.contains(&0) {
        return true;
    }
    let control = head.iter().filter(|&&b| b < 0x20 && !matches!(b, b'\n' | b'\r' | b'\t' | 0x0C)).count();
    control * 100 > head.len() * 2
}

pub fn decode_text(bytes: &[u8]) -> Result<String, ExtractError> {
    if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
        let (text, _, had_errors) = encoding_rs::UTF_16LE.decode(bytes);
        if had_errors {
            return Err(ExtractError("the file says it is UTF-16 text but is not valid UTF-16".into()));
        }
        return Ok(normalize(&text));
    }
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if looks_binary(body) {
        return Err(ExtractError("the file is binary data, not text".into()));
    }
    match std::str::from_utf8(body) {
        Ok(s) => Ok(normalize(s)),
        Err(_) => {
            let (text, _, _) = encoding_rs::WINDOWS_1252.decode(body);
            Ok(normalize(&text))
        }
    }
}

/// Unix newlines, no NULs.
fn normalize(s: &str) -> String {
    s.replace("\r\n", "\n").replace('\r', "\n").replace('\0', "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_common_encodings() {
        assert_eq!(decode_text("héllo\r\nworld".as_bytes()).unwrap(), "héllo\nworld");
        // Windows-1252 "café"
        assert_eq!(decode_text(b"caf\xe9").unwrap(), "café");
        // UTF-16LE with BOM
        let mut utf16 = vec![0xFF, 0xFE];
        for u in "hi".encode_utf16() {
            utf16.extend_from_slice(&u.to_le_bytes());
        }
        assert_eq!(decode_text(&utf16).unwrap(), "hi");
        assert!(decode_text(b"\x00\x01\x02binary").is_err());
    }
}
