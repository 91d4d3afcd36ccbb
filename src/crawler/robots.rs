//! robots.txt parsing and matching (RFC 9309 semantics plus the widely used
//! `Crawl-delay` extension): picks the group for our user agent and answers
//! whether a path may be fetched.

use std::time::Duration;

/// Google and RFC 9309 both cap the parsed size at 500 KiB; anything past it
/// is ignored rather than rejected so a huge file still yields its head.
const MAX_ROBOTS_BYTES: usize = 500 * 1024;

/// Delays beyond a day are treated as "a day": the crawler should just be
/// very slow there, and absurd values must not overflow `Duration`.
const MAX_CRAWL_DELAY_SECS: f64 = 86_400.0;

/// The rules of one robots.txt that apply to one user agent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Robots {
    rules: Vec<Rule>,
    crawl_delay: Option<Duration>,
    sitemaps: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    /// Percent-normalized pattern, possibly with `*` and a trailing `$`.
    pattern: String,
    allow: bool,
}

#[derive(Default)]
struct Group {
    agents: Vec<String>,
    rules: Vec<Rule>,
    crawl_delay: Option<Duration>,
}

/// Parses `text` and keeps the group that applies to `user_agent`.
///
/// `user_agent` may be a full header value (`StewardBot/1.0 (+https://…)`);
/// only its product token (`stewardbot`) is matched, case-insensitively.
/// The most specific group (longest agent name that our token starts with)
/// wins, groups naming the same agent are merged, and `*` is the fallback.
pub fn parse(text: &str, user_agent: &str) -> Robots {
    let text = bounded(text);
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);

    let mut groups: Vec<Group> = Vec::new();
    let mut sitemaps: Vec<String> = Vec::new();
    // Consecutive User-agent lines share one group; any rule line closes it.
    let mut collecting_agents = false;

    for line in text.split(['\n', '\r']) {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim().to_ascii_lowercase();
        let value = value.trim();
        match key.as_str() {
            "user-agent" | "useragent" | "user agent" => {
                if !collecting_agents || groups.is_empty() {
                    groups.push(Group::default());
                }
                collecting_agents = true;
                if let Some(g) = groups.last_mut() {
                    g.agents.push(agent_token(value));
                }
            }
            "allow" | "disallow" | "dissallow" | "disalow" => {
                collecting_agents = false;
                // An empty Disallow means "allow everything", which is the default.
                if let (Some(g), false) = (groups.last_mut(), value.is_empty()) {
                    g.rules.push(Rule { pattern: normalize_percent(value), allow: key == "allow" });
                }
            }
            "crawl-delay" => {
                collecting_agents = false;
                if let Some(g) = groups.last_mut() {
                    g.crawl_delay = g.crawl_delay.or_else(|| parse_delay(value));
                }
            }
            "sitemap" | "site-map" if !value.is_empty() && !sitemaps.iter().any(|s| s == value) => {
                sitemaps.push(value.to_owned());
            }
            _ => {}
        }
    }

    let ours = agent_token(user_agent);
    let specific = groups
        .iter()
        .flat_map(|g| g.agents.iter())
        .filter(|a| a.as_str() != "*" && !a.is_empty() && ours.starts_with(a.as_str()))
        .max_by_key(|a| a.len())
        .cloned();
    let chosen = specific.unwrap_or_else(|| "*".to_owned());

    let mut robots = Robots { sitemaps, ..Robots::default() };
    for g in groups.into_iter().filter(|g| g.agents.contains(&chosen)) {
        robots.crawl_delay = robots.crawl_delay.or(g.crawl_delay);
        robots.rules.extend(g.rules);
    }
    robots
}

impl Robots {
    /// Whether `path_and_query` (e.g. `/a/b?c=d`) may be fetched.
    ///
    /// The longest matching pattern decides; on equal length `Allow` wins;
    /// no matching rule means allowed. `/robots.txt` itself is always allowed.
    pub fn allowed(&self, path_and_query: &str) -> bool {
        let path = if path_and_query.is_empty() { "/" } else { path_and_query };
        if path == "/robots.txt" {
            return true;
        }
        let path = normalize_percent(path);
        let mut best: Option<(usize, bool)> = None;
        for rule in &self.rules {
            if !pattern_matches(rule.pattern.as_bytes(), path.as_bytes()) {
                continue;
            }
            let len = rule.pattern.len();
            best = match best {
                Some((l, a)) if l > len || (l == len && a) => Some((l, a)),
                _ => Some((len, rule.allow)),
            };
        }
        best.is_none_or(|(_, allow)| allow)
    }

    /// The `Crawl-delay` of the chosen group, if it gave a valid one.
    pub fn crawl_delay(&self) -> Option<Duration> {
        self.crawl_delay
    }

    /// Every `Sitemap:` URL in the file, whatever group it appeared in.
    pub fn sitemaps(&self) -> &[String] {
        &self.sitemaps
    }
}

/// The first 500 KiB of `text`, cut back to the last complete line so a
/// rule is never half-read.
fn bounded(text: &str) -> &str {
    if text.len() <= MAX_ROBOTS_BYTES {
        return text;
    }
    let mut cut = MAX_ROBOTS_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let head = &text[..cut];
    match head.rfind(['\n', '\r']) {
        Some(nl) => &head[..nl],
        None => "",
    }
}

/// Lower-cased product token: `Googlebot/2.1 (+http://…)` → `googlebot`.
fn agent_token(value: &str) -> String {
    let value = value.trim();
    if value.starts_with('*') {
        return "*".to_owned();
    }
    value
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect::<String>()
        .to_ascii_lowercase()
}

fn parse_delay(value: &str) -> Option<Duration> {
    let secs: f64 = value.parse().ok()?;
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    Duration::try_from_secs_f64(secs.min(MAX_CRAWL_DELAY_SECS)).ok()
}

/// Brings paths and patterns to one spelling before comparing: `%xx` hex in
/// upper case, escapes of unreserved characters decoded (`%7E` → `~`), and
/// raw non-ASCII bytes (UTF-8 in robots.txt) percent-encoded.
fn normalize_percent(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%'
            && let (Some(h), Some(l)) =
                (bytes.get(i + 1).and_then(|b| hex_val(*b)), bytes.get(i + 2).and_then(|b| hex_val(*b)))
        {
            let v = h * 16 + l;
            if v.is_ascii_alphanumeric() || matches!(v, b'-' | b'.' | b'_' | b'~') {
                out.push(char::from(v));
            } else {
                push_pct(&mut out, v);
            }
            i += 3;
            continue;
        }
        if b.is_ascii() {
            out.push(char::from(b));
        } else {
            push_pct(&mut out, b);
        }
        i += 1;
    }
    out
}

fn hex_val(b: u8) -> Option<u8> {
    char::from(b).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

fn push_pct(out: &mut String, v: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('%');
    out.push(char::from(HEX[usize::from(v >> 4)]));
    out.push(char::from(HEX[usize::from(v & 15)]));
}

/// robots.txt pattern match: `*` matches any run, a final `$` anchors the
/// end, otherwise the pattern only has to match a prefix of the path.
///
/// Greedy matching with backtracking to the last `*` only: each `*` can
/// only ever need to extend, so this is exact and needs no recursion.
fn pattern_matches(pattern: &[u8], path: &[u8]) -> bool {
    let (pat, anchored) = match pattern.strip_suffix(b"$") {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let (mut p, mut s) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    loop {
        if p < pat.len() && pat[p] == b'*' {
            p += 1;
            star = Some((p, s));
            continue;
        }
        if p == pat.len() && (!anchored || s == path.len()) {
            return true;
        }
        if p < pat.len() && s < path.len() && pat[p] == path[s] {
            p += 1;
            s += 1;
            continue;
        }
        match star {
            Some((sp, ss)) if ss < path.len() => {
                star = Some((sp, ss + 1));
                p = sp;
                s = ss + 1;
            }
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SAMPLE: &str = "\u{feff}# example robots.txt
User-agent: *
Disallow: /private/
Allow: /private/open/
Disallow: /*.pdf$
Disallow: /search
Crawl-delay: 2.5

User-agent: StewardBot
User-agent: otherbot
Disallow: /steward-only/
Disallow: /shop/*/cart
Allow: /shop/*/cart/view
Crawl-delay: 1

User-agent: Steward
Disallow: /too-generic/

Sitemap: https://example.com/sitemap.xml
Sitemap: https://example.com/news.xml
";

    #[test]
    fn most_specific_group_wins() {
        let r = parse(SAMPLE, "StewardBot/0.3 (+https://steward.local)");
        assert!(!r.allowed("/steward-only/x"));
        assert!(r.allowed("/private/x"), "star group must not apply");
        assert!(r.allowed("/too-generic/x"), "shorter agent name loses");
        assert_eq!(r.crawl_delay(), Some(Duration::from_secs(1)));
    }

    #[test]
    fn star_group_is_fallback() {
        let r = parse(SAMPLE, "SomeoneElse/1.0");
        assert!(!r.allowed("/private/secret"));
        assert!(r.allowed("/private/open/page"));
        assert!(!r.allowed("/search?q=x"));
        assert!(!r.allowed("/searching"));
        assert_eq!(r.crawl_delay(), Some(Duration::from_millis(2500)));
    }

    #[test]
    fn wildcards_and_anchor() {
        let r = parse(SAMPLE, "anyone");
        let cases = [
            ("/files/report.pdf", false),
            ("/files/report.pdf?download=1", true),
            ("/files/report.pdfx", true),
            ("/", true),
            ("", true),
            ("/robots.txt", true),
        ];
        for (path, want) in cases {
            assert_eq!(r.allowed(path), want, "path {path}");
        }
        let r = parse(SAMPLE, "stewardbot");
        assert!(!r.allowed("/shop/shoes/cart"));
        assert!(!r.allowed("/shop/a/b/cart/checkout"));
        assert!(r.allowed("/shop/shoes/cart/view"), "longer allow wins");
        assert!(r.allowed("/shop/shoes/basket"));
    }

    #[test]
    fn longest_match_and_allow_wins_ties() {
        let r = parse("User-agent: *\nDisallow: /a\nAllow: /a\nDisallow: /ab/\nAllow: /ab/c\n", "x");
        assert!(r.allowed("/a"), "tie goes to allow");
        assert!(!r.allowed("/ab/d"));
        assert!(r.allowed("/ab/cd"));
        let r = parse("User-agent: *\nAllow: /folder\nDisallow: /folder/\n", "x");
        assert!(!r.allowed("/folder/page"));
        let r = parse("User-agent: *\nDisallow: /\nAllow: /$\n", "x");
        assert!(r.allowed("/"));
        assert!(!r.allowed("/page"));
    }

    #[test]
    fn sitemaps_are_global_and_deduped() {
        let text = "Sitemap: https://a.test/1.xml\nUser-agent: x\nDisallow: /\nSitemap: https://a.test/2.xml\nsitemap:https://a.test/1.xml\n";
        let r = parse(text, "other");
        assert_eq!(r.sitemaps(), ["https://a.test/1.xml", "https://a.test/2.xml"]);
        assert!(r.allowed("/anything"), "no group for us and no star group");
    }

    #[test]
    fn odd_inputs() {
        let r = parse("", "bot");
        assert!(r.allowed("/x") && r.crawl_delay().is_none() && r.sitemaps().is_empty());
        let r = parse("<html><body>Not found</body></html>", "bot");
        assert!(r.allowed("/x"));
        let r = parse("User-agent: *\r\nDisallow: /x # comment\r\nCrawl-delay: -3\r\n", "bot");
        assert!(!r.allowed("/x/y") && r.crawl_delay().is_none());
        let r = parse("user-agent: *\ndisallow: /x\ncrawl-delay: 1e300\n", "bot");
        assert_eq!(r.crawl_delay(), Some(Duration::from_secs(86_400)));
        let r = parse("User-agent: *\nDisallow:\n", "bot");
        assert!(r.allowed("/anything"));
        let r = parse("Disallow: /orphan\nUser-agent: *\nAllow: /\n", "bot");
        assert!(r.allowed("/orphan"), "rules before any user-agent are ignored");
    }

    #[test]
    fn percent_and_unicode_paths() {
        let r = parse("User-agent: *\nDisallow: /café\nDisallow: /%7euser\n", "bot");
        assert!(!r.allowed("/caf%C3%A9/menu"));
        assert!(!r.allowed("/caf%c3%a9"));
        assert!(!r.allowed("/~user/x"));
        assert!(r.allowed("/cafe"));
    }

    #[test]
    fn lines_past_500_kib_are_ignored() {
        let mut text = String::from("User-agent: *\nDisallow: /early\n");
        while text.len() < MAX_ROBOTS_BYTES {
            text.push_str("# padding padding padding padding padding padding\n");
        }
        text.push_str("Disallow: /late\n");
        let r = parse(&text, "bot");
        assert!(!r.allowed("/early"));
        assert!(r.allowed("/late"));
    }

    #[test]
    fn matcher_table() {
        let cases = [
            ("/", "/anything", true),
            ("/a*b", "/a/x/b/c", true),
            ("/a*b$", "/a/x/b/c", false),
            ("/a*b$", "/a/x/bb", true),
            ("*", "/", true),
            ("/*.php$", "/index.php", true),
            ("/*.php$", "/index.php5", false),
            ("/x$", "/x", true),
            ("/x$", "/xy", false),
            ("/**a", "/a", true),
            ("/fish*.php", "/fishheads/catfish.php?parameters", true),
            ("/fish*.php", "/Fish.PHP", false),
        ];
        for (pat, path, want) in cases {
            assert_eq!(pattern_matches(pat.as_bytes(), path.as_bytes()), want, "{pat} vs {path}");
        }
    }

    proptest! {
        #[test]
        fn parse_and_match_never_panic(text in any::<String>(), path in any::<String>(), ua in any::<String>()) {
            let r = parse(&text, &ua);
            let _ = r.allowed(&path);
        }

        #[test]
        fn structured_robots_never_panic(
            lines in proptest::collection::vec(
                ("(User-agent|Allow|Disallow|Crawl-delay|Sitemap|x)", "[ */a-z$%0-9.\u{1F600}\u{200f}\u{0301}-]{0,12}"),
                0..30,
            ),
            path in "[/a-z*$%.\u{e9}\u{1F600}]{0,20}",
        ) {
            let text: String = lines.iter().map(|(k, v)| format!("{k}: {v}\n")).collect();
            let r = parse(&text, "bot");
            let _ = r.allowed(&path);
            let _ = r.crawl_delay();
        }

        #[test]
        fn star_matches_like_any_run(prefix in "/[a-z]{0,5}", mid in "[a-z/]{0,8}", suffix in "[a-z]{0,5}") {
            let path = format!("{prefix}{mid}{suffix}");
            let pat = format!("{prefix}*{suffix}$");
            prop_assert!(pattern_matches(pat.as_bytes(), path.as_bytes()));
        }
    }
}
