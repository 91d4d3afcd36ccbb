//! One page of a crawl: robots.txt's word on it, the request (conditional when the page is
//! indexed, 429/503 retried within bounds, a redirect to the same page followed), and what its
//! answer means — indexed, unchanged, skipped with a reason, or failed.

use std::time::Duration;

use reqwest::header::{self, HeaderMap, HeaderName};
use serde_json::json;
use url::Url;

use super::canonical::{canonicalize, resolve_link, same_site};
use super::extract::{PageKind, extract};
use super::hash::normalized_content_hash;
use super::run::{Crawl, PageResult, Verdict};
use super::{MAX_PAGE_CHARS, PageRecord, Pending, store};
use crate::delivery::Failure;
use crate::delivery::client::PageAnswer;
use crate::documents::NewDocument;
use crate::documents::website;

/// Bytes read of one page: enough for [`MAX_PAGE_CHARS`] characters of any UTF-8.
const MAX_PAGE_BYTES: usize = 4 * MAX_PAGE_CHARS;
/// Links taken from one page.
const MAX_LINKS: usize = 1000;

pub(super) fn header_str(h: &HeaderMap, name: HeaderName) -> Option<String> {
    h.get(name).and_then(|v| v.to_str().ok()).map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

impl Crawl<'_> {
    /// Fetches and judges one page (no database writes). `None`: the crawl stopped before the
    /// request went out (the page stays pending).
    pub(super) fn page(&self, entry: Pending) -> Option<PageResult> {
        let mut r = PageResult {
            entry,
            verdict: Verdict::Failed { reason: String::new(), gone: false },
            links: vec![],
            fetched: false,
            dropped: false,
        };
        let Ok(url) = Url::parse(&r.entry.url) else {
            r.verdict = Verdict::Failed { reason: "not a valid URL".into(), gone: false };
            return Some(r);
        };
        let path = &url[url::Position::BeforePath..url::Position::AfterQuery];
        if !self.robots.allowed(path) {
            r.verdict = skip("robots_disallowed", "Blocked by robots.txt");
            return Some(r);
        }
        let (ws, source) = (&self.job.workspace_id, &self.job.source_id);
        let mut known = self.app.db.read(|c| store::page(c, source, &r.entry.key)).ok().flatten();
        // a document someone deleted is indexed again, not taken as unchanged
        if let Some(k) = known.as_mut()
            && let Some(doc) = k.document_id.clone()
            && !self.app.db.read(|c| website::document_exists(c, ws, &doc)).unwrap_or(true)
        {
            k.document_id = None;
            k.content_hash = None;
        }
        let mut headers = vec![(header::USER_AGENT, self.app.config.crawler.user_agent.clone())];
        if let Some(k) = known.as_ref().filter(|k| k.document_id.is_some()) {
            if let Some(e) = &k.etag {
                headers.push((header::IF_NONE_MATCH, e.clone()));
            }
            if let Some(m) = &k.last_modified {
                headers.push((header::IF_MODIFIED_SINCE, m.clone()));
            }
        }
        r.fetched = true;
        let mut url = url;
        // a redirect to the same page under another spelling (`/a` to `/a/`) is followed here:
        // as a frontier entry it would be taken for the page already seen
        for hop in 0..=3 {
            let answer = match self.fetch(&url, &headers)? {
                Ok(a) => a,
                Err(reason) => {
                    r.verdict = Verdict::Failed { reason, gone: false };
                    return Some(r);
                }
            };
            let same_page = matches!(answer.status, 301 | 302 | 303 | 307 | 308)
                .then(|| header_str(&answer.headers, header::LOCATION).and_then(|l| url.join(&l).ok()))
                .flatten()
                .filter(|t| same_site(t, &self.base) && canonicalize(t).as_str() == r.entry.key && *t != url);
            match same_page {
                Some(t) if hop < 3 => url = t,
                _ => {
                    self.judge(&mut r, &url, answer, known);
                    return Some(r);
                }
            }
        }
        Some(r)
    }

    /// One request with bounded retries of 429 and 503 (their `Retry-After` honoured up to the
    /// configured wait). `None`: the crawl stopped while this waited its turn.
    fn fetch(&self, url: &Url, headers: &[(HeaderName, String)]) -> Option<std::result::Result<PageAnswer, String>> {
        let cfg = &self.app.config.crawler;
        let mut attempt = 0;
        loop {
            if !self.wait_turn() {
                return None;
            }
            let a = match self.app.outbound.get_page(url, headers, MAX_PAGE_BYTES) {
                Ok(a) => a,
                Err(Failure::Refused(m)) => return Some(Err(format!("Refused: {m}"))),
                Err(f) => return Some(Err(f.to_string())),
            };
            if !matches!(a.status, 429 | 503) {
                return Some(Ok(a));
            }
            let asked = header_str(&a.headers, header::RETRY_AFTER)
                .and_then(|v| crate::delivery::client::parse_retry_after(&v));
            let wait = asked.unwrap_or(Duration::from_secs(1 << attempt));
            let status = if a.status == 429 { "HTTP 429 Too Many Requests" } else { "HTTP 503 Service Unavailable" };
            let said = asked.map(|d| format!(" (Retry-After {} s)", d.as_secs())).unwrap_or_default();
            if attempt >= cfg.retries || wait > cfg.max_retry_wait {
                return Some(Err(format!("{status}{said}")));
            }
            attempt += 1;
            self.sleep(wait);
            if self.state.lock().stop.is_some() {
                return None;
            }
        }
    }

    /// Decides what a page's answer means.
    fn judge(&self, r: &mut PageResult, url: &Url, a: PageAnswer, known: Option<PageRecord>) {
        let etag = header_str(&a.headers, header::ETAG);
        let last_modified = header_str(&a.headers, header::LAST_MODIFIED);
        let mut record = PageRecord {
            key: r.entry.key.clone(),
            url: url.to_string(),
            etag: etag.clone(),
            last_modified: last_modified.clone(),
            last_job_id: self.job.id.clone(),
            ..PageRecord::default()
        };
        match a.status {
            304 => {
                let Some(k) = known.filter(|k| k.document_id.is_some()) else {
                    r.verdict = Verdict::Failed {
                        reason: "HTTP 304 to a request that was not conditional".into(),
                        gone: false,
                    };
                    return;
                };
                r.links = k
                    .links
                    .iter()
                    .filter_map(|l| Url::parse(l).ok())
                    .filter_map(|u| self.admit(u, r.entry.depth + 1, false))
                    .collect();
                record = PageRecord {
                    etag: etag.or(k.etag.clone()),
                    last_modified: last_modified.or(k.last_modified.clone()),
                    last_job_id: self.job.id.clone(),
                    ..k
                };
                r.verdict = Verdict::Unchanged { record };
                return;
            }
            301 | 302 | 303 | 307 | 308 => {
                let target = header_str(&a.headers, header::LOCATION).and_then(|l| url.join(&l).ok());
                r.verdict = match target {
                    None => Verdict::Failed { reason: format!("HTTP {} without a Location", a.status), gone: false },
                    Some(t) if same_site(&t, &self.base) => {
                        r.links.extend(self.admit(t.clone(), r.entry.depth, false));
                        skip("redirect", &format!("Redirects to {t}"))
                    }
                    // off the site: never followed; a private or metadata address is named as such
                    Some(t) => match self.app.outbound.check_public(&{
                        let mut probe = t.clone();
                        let _ = probe.set_scheme("https");
                        probe
                    }) {
                        Err(m) => skip("redirect_refused", &format!("Redirect refused: {m}")),
                        Ok(()) => skip(
                            "redirect_outside_site",
                            &format!("Redirected outside the site, to {}", t.origin().ascii_serialization()),
                        ),
                    },
                };
                return;
            }
            200..=299 => {}
            s => {
                let reason = reqwest::StatusCode::from_u16(s)
                    .ok()
                    .and_then(|c| c.canonical_reason().map(|t| format!("HTTP {s} {t}")))
                    .unwrap_or_else(|| format!("HTTP {s}"));
                r.verdict = Verdict::Failed { reason, gone: matches!(s, 404 | 410) };
                return;
            }
        }
        let ctype = header_str(&a.headers, header::CONTENT_TYPE).unwrap_or_default().to_lowercase();
        let html = if ctype.is_empty() {
            a.body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'<')
        } else {
            ctype.contains("html")
        };
        if !html {
            r.verdict = skip_with(
                "not_html",
                &format!("Not an HTML page ({})", ctype.split(';').next().unwrap_or("unknown type")),
                record,
            );
            return;
        }
        let text = decode(&a.body, &ctype);
        if a.truncated || text.chars().count() > MAX_PAGE_CHARS {
            r.verdict = skip_with("too_large", "Larger than 500,000 characters", record);
            return;
        }
        let x_robots: String = a
            .headers
            .get_all("x-robots-tag")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect::<Vec<_>>()
            .join(",")
            .to_lowercase();
        let header_noindex = x_robots.contains("noindex") || x_robots.contains("none");
        let header_nofollow = x_robots.contains("nofollow") || x_robots.contains("none");
        let page = extract(&text, self.site.preserve_links);
        if !(page.robots_nofollow || header_nofollow) {
            r.links = page
                .links
                .iter()
                .filter(|l| !l.nofollow)
                .filter_map(|l| resolve_link(url, &l.href))
                .filter_map(|u| self.admit(u, r.entry.depth + 1, false))
                .collect();
            if r.links.len() > MAX_LINKS {
                r.links.truncate(MAX_LINKS);
                r.dropped = true;
            }
            record.links = r.links.iter().map(|p| p.url.clone()).collect();
        }
        let canonical =
            page.canonical.as_deref().and_then(|c| resolve_link(url, c)).filter(|c| same_site(c, &self.base));
        if let Some(c) = canonical.as_ref().filter(|c| canonicalize(c).as_str() != r.entry.key) {
            r.links.extend(self.admit(c.clone(), r.entry.depth, false));
            r.verdict = skip_with("canonical_elsewhere", &format!("Its canonical URL is another page: {c}"), record);
            return;
        }
        let verdict = if header_noindex {
            Some(("noindex_header", "noindex in the X-Robots-Tag header"))
        } else if page.robots_noindex {
            Some(("noindex", "noindex in a meta robots tag"))
        } else {
            match page.kind {
                PageKind::Content => None,
                PageKind::Empty => Some(("empty", "No content")),
                PageKind::ConsentOnly => Some(("consent_only", "Only a cookie or consent notice")),
                PageKind::JsShell => Some(("js_shell", "A JavaScript shell with no content")),
                PageKind::Hub => Some(("link_hub", "A link hub: used for discovery only")),
            }
        };
        if let Some((code, reason)) = verdict {
            r.verdict = skip_with(code, reason, record);
            return;
        }
        if r.entry.discovery {
            r.verdict =
                skip_with("discovery_only", "Does not match the include patterns: used for discovery only", record);
            return;
        }
        let hash = normalized_content_hash(&page.text);
        record.content_hash = Some(hash.clone());
        if let Some(k) =
            known.as_ref().filter(|k| k.document_id.is_some() && k.content_hash.as_deref() == Some(hash.as_str()))
        {
            record.document_id = k.document_id.clone();
            r.verdict = Verdict::Unchanged { record };
            return;
        }
        let title: String = if page.title.trim().is_empty() {
            url.path().chars().take(480).collect()
        } else {
            page.title.chars().take(480).collect()
        };
        let mut meta = json!({
            "sourceUrl": url.as_str(), "canonicalUrl": r.entry.key, "httpStatus": a.status, "pageType": "page",
            "qualityScore": (page.quality * 100.0).round() / 100.0, "extractedContainer": page.container,
            "normalizedContentHash": hash,
        });
        let clip = |v: Option<String>, n: usize| v.map(|v| v.chars().take(n).collect::<String>());
        for (k, v) in
            [("etag", clip(etag, 200)), ("lastModified", clip(last_modified, 100)), ("language", clip(page.lang, 35))]
        {
            if let Some(v) = v {
                meta[k] = json!(v);
            }
        }
        let doc = NewDocument {
            title,
            content: page.text,
            metadata: Some(meta),
            external_document_id: Some(r.entry.key.clone()),
            enrichment_override: None,
            source_id: Some(self.job.source_id.clone()),
        };
        r.verdict = Verdict::Indexed { record, doc };
    }
}

fn skip(code: &'static str, reason: &str) -> Verdict {
    Verdict::Skipped { code, reason: reason.to_string(), record: None }
}

fn skip_with(code: &'static str, reason: &str, record: PageRecord) -> Verdict {
    Verdict::Skipped { code, reason: reason.to_string(), record: Some(record) }
}

/// A page's text in its declared encoding: a byte-order mark, else the `Content-Type` charset,
/// else a `<meta charset>` near the top, else UTF-8 (invalid bytes replaced).
fn decode(body: &[u8], content_type: &str) -> String {
    let label_after = |s: &str| -> Option<String> {
        let at = s.find("charset=")? + "charset=".len();
        let v: String = s[at..]
            .trim_start_matches(['"', '\''])
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'))
            .collect();
        (!v.is_empty()).then_some(v)
    };
    let head = String::from_utf8_lossy(&body[..body.len().min(2048)]).to_ascii_lowercase();
    let label = label_after(&content_type.to_ascii_lowercase()).or_else(|| label_after(&head));
    let encoding = label.and_then(|l| encoding_rs::Encoding::for_label(l.as_bytes())).unwrap_or(encoding_rs::UTF_8);
    // `decode` honours a byte-order mark over the label
    encoding.decode(body).0.into_owned()
}

#[cfg(test)]
mod tests {
    use super::decode;

    #[test]
    fn pages_are_read_in_their_declared_encoding() {
        let latin1 = b"<p>Caf\xe9 cr\xe8me</p>";
        assert_eq!(decode(latin1, "text/html; charset=ISO-8859-1"), "<p>Café crème</p>");
        let meta = b"<html><head><meta charset=\"windows-1252\"></head><p>\x93quoted\x94</p>";
        assert!(decode(meta, "text/html").contains("\u{201c}quoted\u{201d}"));
        assert_eq!(decode("<p>naïve</p>".as_bytes(), "text/html"), "<p>naïve</p>");
        assert_eq!(decode(b"\xef\xbb\xbf<p>bom</p>", "text/html; charset=iso-8859-1"), "<p>bom</p>");
        // the cut at 2,048 bytes may split a character: no panic
        let long = "é".repeat(3000);
        assert_eq!(decode(long.as_bytes(), ""), long);
    }
}
