//! URL canonicalization for crawl dedupe: one spelling per page, so the
//! frontier and the index never hold the same document twice under
//! cosmetic URL variants (www alias, trailing slash, tracking params, ...).

use url::Url;

/// Canonical form of `url` used as the dedupe key of a page.
///
/// Lower-cased scheme and host (the `url` crate already does it), no default
/// port, no fragment, no userinfo, no leading `www.`, no trailing slash on the
/// path (except the root `/`), no tracking query params, the remaining
/// params sorted by key then value, and no empty `?`.
pub fn canonicalize(url: &Url) -> Url {
    let mut out = url.clone();
    out.set_fragment(None);
    if out.cannot_be_a_base() {
        // mailto:, data: and friends have no host/path/userinfo to normalize.
        return out;
    }
    // Errors here only mean "this scheme has no such component": nothing to drop.
    let _ = out.set_username("");
    let _ = out.set_password(None);
    if out.port().is_some() && out.port() == default_port(out.scheme()) {
        let _ = out.set_port(None);
    }
    if let Some(host) = out.host_str() {
        let stripped = site_host(host);
        if stripped.len() != host.len() {
            let stripped = stripped.to_owned();
            let _ = out.set_host(Some(&stripped));
        }
    }
    let path = out.path();
    if path.len() > 1 && path.ends_with('/') {
        let trimmed = path.trim_end_matches('/');
        let trimmed = if trimmed.is_empty() { "/" } else { trimmed }.to_owned();
        out.set_path(&trimmed);
    }
    let query = out.query().map(clean_query);
    match query {
        Some(q) if !q.is_empty() => out.set_query(Some(&q)),
        _ => out.set_query(None),
    }
    out
}

/// The URL to fetch for a link: as written, without its fragment and tracking parameters (the
/// path is kept as the site spells it: a server may redirect `/a` to `/a/`).
pub fn fetchable(url: &Url) -> Url {
    let mut out = url.clone();
    out.set_fragment(None);
    if let Some(q) = out.query().map(clean_query) {
        out.set_query(if q.is_empty() { None } else { Some(&q) });
    }
    out
}

/// Whether two URLs belong to the same crawl site: same scheme, same host
/// ignoring a `www.` prefix, same effective port.
pub fn same_site(a: &Url, b: &Url) -> bool {
    match (a.host_str(), b.host_str()) {
        (Some(ha), Some(hb)) => {
            a.scheme() == b.scheme()
                && site_host(ha) == site_host(hb)
                && a.port_or_known_default() == b.port_or_known_default()
        }
        _ => false,
    }
}

/// Resolves an `href` found on `base` into a crawlable absolute URL.
///
/// Only `http`/`https` results are kept, so `javascript:`, `mailto:`,
/// `tel:`, `data:` (and any other scheme) yield `None`. The fragment is
/// dropped because it never names a different document.
pub fn resolve_link(base: &Url, href: &str) -> Option<Url> {
    let mut url = base.join(href).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    if url.host_str().is_none_or(str::is_empty) {
        return None;
    }
    url.set_fragment(None);
    Some(url)
}

/// The host with leading `www.` labels removed, unless that would leave a
/// bare TLD-like label (`www.com` stays as is, it is a different site from
/// `com`). Repeated prefixes are all removed so canonicalization is idempotent.
fn site_host(host: &str) -> &str {
    let mut host = host;
    while let Some(rest) = host.strip_prefix("www.") {
        if !rest.contains('.') || rest.starts_with('.') {
            break;
        }
        host = rest;
    }
    host
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" | "ws" => Some(80),
        "https" | "wss" => Some(443),
        "ftp" => Some(21),
        _ => None,
    }
}

/// Query without tracking params, the rest sorted by decoded key then value.
///
/// Segments are kept in their raw (already percent-encoded) spelling: re-
/// serializing through form encoding would change what the server receives
/// for non-form queries such as `?a/b`.
fn clean_query(query: &str) -> String {
    let mut kept: Vec<(String, String, &str)> = query
        .split('&')
        .filter(|seg| !seg.is_empty())
        .filter_map(|seg| {
            let (key, value) = url::form_urlencoded::parse(seg.as_bytes())
                .next()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .unwrap_or_default();
            if is_tracking_param(&key) { None } else { Some((key, value, seg)) }
        })
        .collect();
    // Stable, so identical key/value pairs keep their relative raw order.
    kept.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    let mut out = String::with_capacity(query.len());
    for (i, (_, _, raw)) in kept.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        out.push_str(raw);
    }
    out
}

fn is_tracking_param(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    key.starts_with("utm_")
        || key.starts_with("mc_")
        || key.starts_with("_hs")
        || matches!(
            key.as_str(),
            "gclid" | "fbclid" | "ref" | "msclkid" | "dclid" | "gbraid" | "wbraid" | "yclid" | "igshid"
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn canon(s: &str) -> String {
        canonicalize(&Url::parse(s).unwrap()).to_string()
    }

    #[test]
    fn canonicalization_table() {
        let cases = [
            ("http://www.example.com/", "http://example.com/"),
            ("https://WWW.Example.COM/a/", "https://example.com/a"),
            ("https://example.com/a/b//", "https://example.com/a/b"),
            ("https://example.com//", "https://example.com/"),
            ("https://example.com", "https://example.com/"),
            ("https://example.com/a#section-2", "https://example.com/a"),
            ("https://example.com:443/a", "https://example.com/a"),
            ("http://example.com:80/a", "http://example.com/a"),
            ("http://example.com:8080/a", "http://example.com:8080/a"),
            ("https://user:pw@example.com/a", "https://example.com/a"),
            ("https://example.com/a?", "https://example.com/a"),
            ("https://example.com/a?utm_source=x&utm_medium=y", "https://example.com/a"),
            ("https://example.com/a?b=2&a=1", "https://example.com/a?a=1&b=2"),
            ("https://example.com/a?a=2&a=1&a=10", "https://example.com/a?a=1&a=10&a=2"),
            (
                "https://example.com/p?id=7&gclid=1&fbclid=2&mc_cid=3&mc_eid=4&mc_tc=5&_hsenc=6&_hsmi=7&ref=hn&UTM_Campaign=z",
                "https://example.com/p?id=7",
            ),
            ("https://example.com/p?q=a+b&&x", "https://example.com/p?q=a+b&x"),
            ("https://example.com/p?reference=1", "https://example.com/p?reference=1"),
            ("https://www.com/", "https://www.com/"),
            ("https://www.example.com/a/?z=1#f", "https://example.com/a?z=1"),
            ("https://example.com/caf%C3%A9/", "https://example.com/caf%C3%A9"),
            ("https://bücher.example/x/", "https://xn--bcher-kva.example/x"),
        ];
        for (input, want) in cases {
            assert_eq!(canon(input), want, "input {input}");
        }
    }

    #[test]
    fn canonicalize_is_idempotent_on_table() {
        for s in
            ["https://www.example.com/a/?b=1&a=2#x", "http://example.com:80/?utm_x=1", "mailto:someone@example.com"]
        {
            let once = canonicalize(&Url::parse(s).unwrap());
            assert_eq!(canonicalize(&once), once);
        }
    }

    #[test]
    fn non_hierarchical_urls_survive() {
        assert_eq!(canon("mailto:a@example.com#x"), "mailto:a@example.com");
    }

    #[test]
    fn same_site_table() {
        let cases = [
            ("https://example.com/a", "https://www.example.com/b", true),
            ("https://example.com/a", "https://example.com:443/b", true),
            ("https://example.com/a", "http://example.com/a", false),
            ("https://example.com/a", "https://example.com:8443/a", false),
            ("https://example.com/a", "https://blog.example.com/a", false),
            ("https://EXAMPLE.com/a", "https://example.com/a", true),
            ("mailto:a@example.com", "mailto:a@example.com", false),
        ];
        for (a, b, want) in cases {
            let (a, b) = (Url::parse(a).unwrap(), Url::parse(b).unwrap());
            assert_eq!(same_site(&a, &b), want, "{a} vs {b}");
        }
    }

    #[test]
    fn resolve_link_table() {
        let base = Url::parse("https://example.com/blog/post/?p=1#top").unwrap();
        let cases: [(&str, Option<&str>); 14] = [
            ("../other", Some("https://example.com/blog/other")),
            ("/root#frag", Some("https://example.com/root")),
            ("next?page=2", Some("https://example.com/blog/post/next?page=2")),
            ("//cdn.example.org/x", Some("https://cdn.example.org/x")),
            ("http://other.test/a", Some("http://other.test/a")),
            ("  /spaced  ", Some("https://example.com/spaced")),
            ("#only-fragment", Some("https://example.com/blog/post/?p=1")),
            ("javascript:void(0)", None),
            ("JavaScript:alert(1)", None),
            ("java\tscript:alert(1)", None),
            ("mailto:a@example.com", None),
            ("tel:+15551234", None),
            ("data:text/html,hi", None),
            ("ftp://example.com/file", None),
        ];
        for (href, want) in cases {
            let got = resolve_link(&base, href).map(|u| u.to_string());
            assert_eq!(got.as_deref(), want, "href {href:?}");
        }
    }

    fn hostile() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            "[a-z:/?#&=.%@\\[\\]\u{200f}\u{202e}\u{0301}\u{1F600}\u{0}\\\\ ]{0,64}",
            ("[a-z/?=&#]{0,8}", "[\u{0300}-\u{036f}\u{200e}\u{200f}\u{1F300}-\u{1F64F}]{0,4}", 0usize..2000)
                .prop_map(|(a, b, n)| format!("{a}{}", b.repeat(n))),
        ]
    }

    proptest! {
        #[test]
        fn resolve_and_canonicalize_never_panic(href in hostile()) {
            let base = Url::parse("https://www.example.com/a/b/?utm_source=x#f").unwrap();
            if let Some(u) = resolve_link(&base, &href) {
                prop_assert!(u.fragment().is_none());
                prop_assert!(matches!(u.scheme(), "http" | "https"));
                let c = canonicalize(&u);
                prop_assert_eq!(canonicalize(&c), c.clone());
                let _ = same_site(&u, &c);
            }
            if let Ok(u) = Url::parse(&href) {
                let c = canonicalize(&u);
                prop_assert!(c.fragment().is_none());
            }
        }

        #[test]
        fn query_order_does_not_matter(
            pairs in proptest::collection::vec(("[a-z]{1,3}", "[a-z0-9]{0,3}"), 0..6)
        ) {
            let fwd: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let rev: Vec<String> = fwd.iter().rev().cloned().collect();
            let a = canon(&format!("https://example.com/x?{}", fwd.join("&")));
            let b = canon(&format!("https://example.com/x?{}", rev.join("&")));
            prop_assert_eq!(a, b);
        }
    }
}
