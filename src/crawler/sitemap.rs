//! Sitemap parsing (`<urlset>` and `<sitemapindex>`, optionally gzipped).
//!
//! Sitemaps are machine-written XML with a tiny fixed vocabulary, so a
//! tolerant tag scanner is enough and avoids an XML dependency; all work is
//! capped (50 MB inflated, 50,000 entries) as the sitemap protocol itself is.

use std::borrow::Cow;
use std::io::Read;

/// The protocol's own limits: 50 MB uncompressed and 50,000 URLs per file.
const MAX_BYTES: usize = 50 * 1024 * 1024;
const MAX_ENTRIES: usize = 50_000;

/// Elements nested deeper than this are not tracked; real sitemaps use 3.
const MAX_DEPTH: usize = 64;

/// What a sitemap file lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sitemap {
    /// A `<urlset>`: page URLs.
    Urls(Vec<String>),
    /// A `<sitemapindex>`: URLs of further sitemaps.
    Index(Vec<String>),
}

/// Parses a sitemap body, inflating it first when it starts with the gzip
/// magic bytes. Errors name why the body is not a usable sitemap.
pub fn parse(bytes: &[u8]) -> Result<Sitemap, String> {
    let mut data: Cow<'_, [u8]> = Cow::Borrowed(bytes);
    // Servers sometimes gzip an already gzipped .xml.gz; unwrap one extra layer.
    for _ in 0..2 {
        if data.starts_with(&[0x1f, 0x8b]) {
            data = Cow::Owned(inflate(&data)?);
        }
    }
    if data.len() > MAX_BYTES {
        return Err(format!("sitemap larger than {MAX_BYTES} bytes"));
    }
    let text = String::from_utf8_lossy(&data);
    scan(&text)
}

fn inflate(gz: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let limit = u64::try_from(MAX_BYTES).unwrap_or(u64::MAX).saturating_add(1);
    flate2::read::MultiGzDecoder::new(gz)
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| format!("bad gzip sitemap: {e}"))?;
    if out.len() > MAX_BYTES {
        return Err(format!("gzip sitemap inflates past {MAX_BYTES} bytes"));
    }
    Ok(out)
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Urls,
    Index,
}

fn scan(text: &str) -> Result<Sitemap, String> {
    let mut pos = 0;
    // Root element's qualified name, its namespace prefix, and its kind.
    let mut root: Option<(&str, &str, Kind)> = None;
    let mut stack: Vec<&str> = Vec::new();
    let mut entries: Vec<String> = Vec::new();

    while let Some(off) = text[pos..].find('<') {
        let start = pos + off;
        let rest = &text[start..];
        let skip_to = |end: &str| rest.find(end).map(|i| start + i + end.len());
        let next = if rest.starts_with("<!--") {
            skip_to("-->")
        } else if rest.starts_with("<![CDATA[") {
            skip_to("]]>")
        } else if rest.starts_with("<?") {
            skip_to("?>")
        } else if rest.starts_with("<!") {
            skip_to(">")
        } else {
            None
        };
        if rest.starts_with("<!") || rest.starts_with("<?") {
            match next {
                Some(n) => {
                    pos = n;
                    continue;
                }
                None => break,
            }
        }
        let Some(gt) = tag_end(text, start + 1) else { break };
        let inner = &text[start + 1..gt];
        pos = gt + 1;
        let closing = inner.starts_with('/');
        let self_closing = inner.ends_with('/');
        let name = inner.trim_start_matches('/').split(|c: char| c.is_whitespace() || c == '/').next().unwrap_or("");
        if name.is_empty() {
            continue;
        }
        let (prefix, local) = split_qname(name);

        let Some((root_name, root_prefix, kind)) = root else {
            if closing {
                continue;
            }
            let kind = if local.eq_ignore_ascii_case("urlset") {
                Kind::Urls
            } else if local.eq_ignore_ascii_case("sitemapindex") {
                Kind::Index
            } else {
                return Err(format!("not a sitemap: root element <{}>", clip(name, 64)));
            };
            if self_closing {
                return Ok(wrap(kind, entries));
            }
            root = Some((name, prefix, kind));
            continue;
        };

        if closing {
            if name == root_name {
                break;
            }
            if let Some(i) = stack.iter().rposition(|n| *n == local) {
                stack.truncate(i);
            }
            continue;
        }
        if self_closing {
            continue;
        }
        let entry = if kind == Kind::Urls { "url" } else { "sitemap" };
        // Only `<loc>` of the sitemap namespace, directly in an entry (or,
        // tolerantly, in the root): `<image:loc>` and friends are not pages.
        let in_entry = stack.last().is_none_or(|p| p.eq_ignore_ascii_case(entry));
        if local.eq_ignore_ascii_case("loc") && prefix == root_prefix && in_entry {
            let (raw, after) = element_content(text, pos);
            pos = after;
            let loc = decode(raw);
            let loc = loc.trim();
            if !loc.is_empty() {
                entries.push(loc.to_owned());
                if entries.len() >= MAX_ENTRIES {
                    break;
                }
            }
            continue;
        }
        if stack.len() < MAX_DEPTH {
            stack.push(local);
        }
    }

    match root {
        Some((_, _, kind)) => Ok(wrap(kind, entries)),
        None => Err("not a sitemap: no XML root element".to_owned()),
    }
}

fn wrap(kind: Kind, entries: Vec<String>) -> Sitemap {
    match kind {
        Kind::Urls => Sitemap::Urls(entries),
        Kind::Index => Sitemap::Index(entries),
    }
}

fn split_qname(name: &str) -> (&str, &str) {
    match name.split_once(':') {
        Some((p, l)) => (p, l),
        None => ("", name),
    }
}

/// Index of the `>` closing a tag that starts at `from`, skipping quoted
/// attribute values (which may legally contain `>`).
fn tag_end(text: &str, from: usize) -> Option<usize> {
    let mut quote: Option<u8> = None;
    for (i, &b) in text.as_bytes().iter().enumerate().skip(from) {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None if b == b'>' => return Some(i),
            None => {}
        }
    }
    None
}

/// Raw content of an element whose start tag ends just before `from`, up
/// to the next end tag (CDATA sections may contain `<`), and the position
/// after that end tag.
fn element_content(text: &str, from: usize) -> (&str, usize) {
    let mut i = from;
    loop {
        let Some(off) = text[i..].find('<') else {
            return (&text[from..], text.len());
        };
        let lt = i + off;
        let rest = &text[lt..];
        if rest.starts_with("<![CDATA[") {
            match rest.find("]]>") {
                Some(e) => i = lt + e + 3,
                None => return (&text[from..], text.len()),
            }
            continue;
        }
        let after = tag_end(text, lt + 1).map_or(text.len(), |g| g + 1);
        return (&text[from..lt], after);
    }
}

/// Element text with CDATA sections kept literally and entities decoded
/// elsewhere.
fn decode(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(i) = rest.find("<![CDATA[") {
        decode_entities(&rest[..i], &mut out);
        let body = &rest[i + 9..];
        match body.find("]]>") {
            Some(e) => {
                out.push_str(&body[..e]);
                rest = &body[e + 3..];
            }
            None => {
                out.push_str(body);
                rest = "";
            }
        }
    }
    decode_entities(rest, &mut out);
    out
}

fn decode_entities(mut s: &str, out: &mut String) {
    while let Some(amp) = s.find('&') {
        out.push_str(&s[..amp]);
        let after = &s[amp + 1..];
        // Entity names are short; looking further would make `&&&&…` quadratic.
        let semi = after.char_indices().take(12).find(|&(_, c)| c == ';').map(|(i, _)| i);
        let decoded = semi.and_then(|i| entity_char(&after[..i]).map(|c| (c, i)));
        match decoded {
            Some((c, i)) => {
                out.push(c);
                s = &after[i + 1..];
            }
            None => {
                out.push('&');
                s = after;
            }
        }
    }
    out.push_str(s);
}

fn entity_char(name: &str) -> Option<char> {
    match name {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        _ => {
            let num = name.strip_prefix('#')?;
            let code = match num.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => num.parse().ok()?,
            };
            char::from_u32(code).filter(|c| *c != '\0')
        }
    }
}

fn clip(s: &str, max: usize) -> &str {
    let mut cut = s.len().min(max);
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    &s[..cut]
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::Compression;
    use flate2::write::GzEncoder;
    use proptest::prelude::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    const URLSET: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<!-- generated by a CMS; <loc>not-this</loc> -->
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
        xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
  <url>
    <loc>https://example.com/</loc>
    <lastmod>2024-01-01</lastmod>
  </url>
  <url>
    <loc>
      https://example.com/search?a=1&amp;b=2&#38;c=&#x33;
    </loc>
    <image:image><image:loc>https://example.com/img.png</image:loc></image:image>
  </url>
  <url><loc><![CDATA[https://example.com/raw?x=1&y=2]]></loc></url>
  <url><loc>https://example.com/caf&#xE9;/&lt;tag&gt;&quot;&apos;&bogus;</loc></url>
  <url><loc></loc></url>
</urlset>
<loc>https://example.com/after-root</loc>"#;

    #[test]
    fn urlset_with_entities_cdata_and_extensions() {
        let got = parse(URLSET.as_bytes()).unwrap();
        assert_eq!(
            got,
            Sitemap::Urls(vec![
                "https://example.com/".into(),
                "https://example.com/search?a=1&b=2&c=3".into(),
                "https://example.com/raw?x=1&y=2".into(),
                "https://example.com/café/<tag>\"'&bogus;".into(),
            ])
        );
    }

    #[test]
    fn sitemap_index() {
        let xml = r#"<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
            <sitemap><loc>https://example.com/s1.xml.gz</loc><lastmod>2024</lastmod></sitemap>
            <sitemap><loc attr='a>b'>https://example.com/s2.xml</loc></sitemap>
        </sitemapindex>"#;
        assert_eq!(
            parse(xml.as_bytes()).unwrap(),
            Sitemap::Index(vec!["https://example.com/s1.xml.gz".into(), "https://example.com/s2.xml".into()])
        );
    }

    #[test]
    fn prefixed_namespace_and_empty_root() {
        let xml = "<sm:urlset xmlns:sm='x'><sm:url><sm:loc>https://a.test/1</sm:loc></sm:url></sm:urlset>";
        assert_eq!(parse(xml.as_bytes()).unwrap(), Sitemap::Urls(vec!["https://a.test/1".into()]));
        assert_eq!(parse(b"<urlset/>").unwrap(), Sitemap::Urls(vec![]));
    }

    #[test]
    fn gzip_is_detected_and_inflated() {
        let gz = gzip(URLSET.as_bytes());
        assert_eq!(parse(&gz).unwrap(), parse(URLSET.as_bytes()).unwrap());
        let double = gzip(&gz);
        assert_eq!(parse(&double).unwrap(), parse(URLSET.as_bytes()).unwrap());
    }

    #[test]
    fn rejects_non_sitemaps() {
        assert!(parse(b"").is_err());
        assert!(parse(b"just text").is_err());
        assert!(parse(b"<html><body><loc>x</loc></body></html>").unwrap_err().contains("<html>"));
        assert!(parse(b"\x1f\x8bnot really gzip").is_err());
        assert!(parse(&[0xff, 0xfe, 0x00]).is_err());
    }

    #[test]
    fn gzip_bomb_is_refused() {
        // 51 MB of zeros compresses to ~50 KB: must be refused, not inflated fully.
        let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
        let chunk = vec![b' '; 1024 * 1024];
        for _ in 0..51 {
            enc.write_all(&chunk).unwrap();
        }
        let gz = enc.finish().unwrap();
        assert!(gz.len() < 1024 * 1024);
        let err = parse(&gz).unwrap_err();
        assert!(err.contains("inflates past"), "{err}");
    }

    #[test]
    fn entry_cap() {
        let mut xml = String::from("<urlset>");
        for i in 0..MAX_ENTRIES + 10 {
            xml.push_str(&format!("<url><loc>https://a.test/{i}</loc></url>"));
        }
        xml.push_str("</urlset>");
        match parse(xml.as_bytes()).unwrap() {
            Sitemap::Urls(v) => {
                assert_eq!(v.len(), MAX_ENTRIES);
                assert_eq!(v[0], "https://a.test/0");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn truncated_documents_keep_what_was_read() {
        let xml = "<urlset><url><loc>https://a.test/1</loc></url><url><loc>https://a.test/2";
        assert_eq!(
            parse(xml.as_bytes()).unwrap(),
            Sitemap::Urls(vec!["https://a.test/1".into(), "https://a.test/2".into()])
        );
    }

    #[test]
    fn entity_table() {
        let cases = [
            ("a&amp;b", "a&b"),
            ("&#65;&#x42;&#X43;", "ABC"),
            ("&#0;&#xD800;&#99999999;", "&#0;&#xD800;&#99999999;"),
            ("&&&;&amp", "&&&;&amp"),
            ("&\u{1F600};&amp;", "&\u{1F600};&"),
        ];
        for (input, want) in cases {
            let mut out = String::new();
            decode_entities(input, &mut out);
            assert_eq!(out, want, "input {input}");
        }
    }

    proptest! {
        #[test]
        fn never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn never_panics_on_xmlish(
            parts in proptest::collection::vec(
                "(<urlset>|<sitemapindex>|<url>|</url>|<loc>|</loc>|<![CDATA[|]]>|<!--|-->|<?|&amp;|&#x|;|<a b='>'|[a-z:/.]{0,6}|[\u{200f}\u{0301}\u{1F600}\u{0}]{0,3})",
                0..40,
            )
        ) {
            let xml: String = parts.concat();
            let _ = parse(xml.as_bytes());
            let _ = parse(&gzip(xml.as_bytes()));
        }

        #[test]
        fn loc_round_trips(locs in proptest::collection::vec("[a-zA-Z0-9/:.?=\u{e9}\u{1F600}\u{200f}-]{1,30}", 0..20)) {
            let mut xml = String::from("<urlset>");
            for l in &locs {
                xml.push_str(&format!("<url><loc>{}</loc></url>", l.replace('&', "&amp;")));
            }
            xml.push_str("</urlset>");
            prop_assert_eq!(parse(xml.as_bytes()).unwrap(), Sitemap::Urls(locs.clone()));
        }
    }
}
