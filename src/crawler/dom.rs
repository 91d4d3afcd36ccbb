//! DOM helpers shared by the content extractor: an iterative tree walk
//! (pages can nest elements arbitrarily deep, so no recursion), the
//! boilerplate/consent/invisibility predicates, and text measures.

use std::collections::HashSet;

use scraper::{ElementRef, Node};

/// Receives a depth-first walk of an element subtree.
pub(crate) trait Visitor<'a> {
    /// Called when an element starts; returning false skips its subtree
    /// (and its `close`).
    fn open(&mut self, el: ElementRef<'a>) -> bool;
    /// Called when an element whose `open` returned true ends.
    fn close(&mut self, _el: ElementRef<'a>) {}
    /// Called for each text node inside opened elements.
    fn text(&mut self, _text: &'a str) {}
}

/// Walks `root` and its descendants in document order with an explicit
/// stack, so hostile nesting depth cannot overflow the call stack.
pub(crate) fn walk<'a, V: Visitor<'a>>(root: ElementRef<'a>, v: &mut V) {
    if !v.open(root) {
        return;
    }
    let mut stack = vec![(root, root.children())];
    while let Some((_, children)) = stack.last_mut() {
        match children.next() {
            Some(child) => match child.value() {
                Node::Text(t) => v.text(&t.text),
                Node::Element(_) => {
                    if let Some(el) = ElementRef::wrap(child)
                        && v.open(el)
                    {
                        stack.push((el, el.children()));
                    }
                }
                _ => {}
            },
            None => {
                if let Some((el, _)) = stack.pop() {
                    v.close(el);
                }
            }
        }
    }
}

const DROP_TAGS: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "nav", "header", "footer", "aside", "form", "button", "select",
    "input", "textarea", "iframe",
];
const DROP_ROLES: &[&str] = &["navigation", "banner", "contentinfo", "search", "dialog", "alertdialog"];
const CONSENT_MARKERS: &[&str] =
    &["cookie", "consent", "gdpr", "cmp-", "onetrust", "cookiebot", "usercentrics", "didomi", "truste", "qc-cmp"];
const HEADINGS: &[&str] = &["h1", "h2", "h3", "h4", "h5", "h6"];

pub(crate) fn name<'a>(el: &ElementRef<'a>) -> &'a str {
    el.value().name()
}

pub(crate) fn is_heading(tag: &str) -> bool {
    HEADINGS.contains(&tag)
}

fn attr_is(el: &ElementRef<'_>, attr: &str, want: &str) -> bool {
    el.value().attr(attr).is_some_and(|v| v.trim().eq_ignore_ascii_case(want))
}

/// Never rendered by a browser (or explicitly hidden from readers).
pub(crate) fn is_invisible(el: &ElementRef<'_>) -> bool {
    matches!(name(el), "script" | "style" | "noscript" | "template" | "svg" | "head")
        || el.value().attr("hidden").is_some()
        || attr_is(el, "aria-hidden", "true")
}

/// A cookie/consent banner by its id or class. Page-level wrappers are
/// exempt: sites put classes like `cookie-consent-given` on `<body>`.
pub(crate) fn is_consent(el: &ElementRef<'_>) -> bool {
    if matches!(name(el), "html" | "body" | "main" | "article") {
        return false;
    }
    let v = el.value();
    [v.attr("id"), v.attr("class")].into_iter().flatten().any(|s| {
        let s = s.to_ascii_lowercase();
        CONSENT_MARKERS.iter().any(|m| s.contains(m))
    })
}

/// Whether `el` is boilerplate to leave out of the main content.
///
/// `in_article` says an `<article>` or `<main>` is open around `el`: a
/// `<header>` there that holds a heading is the article's own title block,
/// not site chrome, so it is kept. A `<form>` holding prose is a page-wide
/// wrapper (ASP.NET WebForms wraps whole pages in one) and is kept too.
pub(crate) fn is_dropped(el: &ElementRef<'_>, in_article: bool, facts: &Facts) -> bool {
    let tag = name(el);
    if DROP_TAGS.contains(&tag) {
        return match tag {
            "header" => !(in_article && facts.keep.contains(&key(el))),
            "form" => !facts.keep.contains(&key(el)),
            _ => true,
        };
    }
    if let Some(role) = el.value().attr("role") {
        let role = role.trim().to_ascii_lowercase();
        if DROP_ROLES.contains(&role.as_str()) {
            return true;
        }
    }
    el.value().attr("hidden").is_some() || attr_is(el, "aria-hidden", "true") || is_consent(el)
}

/// Facts about elements that depend on their whole subtree, gathered in one
/// post-order pass so that per-element checks stay O(1) however deeply a
/// hostile page nests headers, forms or tables.
#[derive(Debug, Default)]
pub(crate) struct Facts {
    /// Headers holding a heading and forms holding prose.
    keep: HashSet<usize>,
    /// Tables holding nested tables or document structure.
    layout_tables: HashSet<usize>,
}

const HAS_HEADING: u8 = 1;
const HAS_PROSE: u8 = 2;
const HAS_STRUCTURE: u8 = 4;

impl Facts {
    pub(crate) fn of(root: ElementRef<'_>) -> Facts {
        let mut scan = FactScan::default();
        walk(root, &mut scan);
        scan.facts
    }

    /// Tables used for page layout (old sites, e-mail style pages) hold
    /// whole documents; rendering them as pipe tables would bury the prose.
    pub(crate) fn is_layout_table(&self, el: &ElementRef<'_>) -> bool {
        let role = el.value().attr("role").map(|r| r.trim().to_ascii_lowercase());
        matches!(role.as_deref(), Some("presentation" | "none")) || self.layout_tables.contains(&key(el))
    }
}

/// Identity of an element within its (immutable, borrowed) document.
fn key(el: &ElementRef<'_>) -> usize {
    std::ptr::from_ref(el.value()).addr()
}

#[derive(Default)]
struct FactScan {
    facts: Facts,
    /// Per open element: what its descendants seen so far contain.
    stack: Vec<u8>,
}

impl<'a> Visitor<'a> for FactScan {
    fn open(&mut self, _el: ElementRef<'a>) -> bool {
        self.stack.push(0);
        true
    }

    fn close(&mut self, el: ElementRef<'a>) {
        let inside = self.stack.pop().unwrap_or(0);
        let tag = name(&el);
        match tag {
            "header" if inside & HAS_HEADING != 0 => {
                self.facts.keep.insert(key(&el));
            }
            "form" if inside & HAS_PROSE != 0 => {
                self.facts.keep.insert(key(&el));
            }
            "table" if inside & HAS_STRUCTURE != 0 => {
                self.facts.layout_tables.insert(key(&el));
            }
            _ => {}
        }
        let own = if is_heading(tag) {
            HAS_HEADING | HAS_PROSE | HAS_STRUCTURE
        } else {
            match tag {
                "p" => HAS_PROSE,
                "article" | "main" => HAS_PROSE | HAS_STRUCTURE,
                "table" | "section" | "pre" | "blockquote" => HAS_STRUCTURE,
                _ => 0,
            }
        };
        if let Some(parent) = self.stack.last_mut() {
            *parent |= inside | own;
        }
    }
}

/// Text of an element with whitespace runs collapsed to single spaces.
pub(crate) fn collapsed_text(el: &ElementRef<'_>) -> String {
    let mut out = String::new();
    for chunk in el.text() {
        push_collapsed(&mut out, chunk);
    }
    let trimmed_len = out.trim_end().len();
    out.truncate(trimmed_len);
    out
}

/// Appends `s` to `out`, turning whitespace runs into one space and never
/// starting `out` with a space.
pub(crate) fn push_collapsed(out: &mut String, s: &str) {
    for c in s.chars() {
        if c.is_whitespace() {
            if !out.is_empty() && !out.ends_with(' ') {
                out.push(' ');
            }
        } else {
            out.push(c);
        }
    }
}

pub(crate) fn non_space_chars(s: &str) -> usize {
    s.chars().filter(|c| !c.is_whitespace()).count()
}

/// Word count that ignores markup-only tokens (`#`, `-`, `|`, `---`) and
/// counts each CJK ideograph or kana as a word, since those scripts do not
/// separate words with spaces.
pub(crate) fn count_words(s: &str) -> usize {
    s.split_whitespace()
        .map(|tok| {
            let cjk = tok.chars().filter(|c| is_cjk(*c)).count();
            let other = tok.chars().any(|c| c.is_alphanumeric() && !is_cjk(c));
            cjk + usize::from(other)
        })
        .sum()
}

fn is_cjk(c: char) -> bool {
    matches!(
        u32::from(c),
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x2FA1F
    )
}

/// `s` cut to at most `max` bytes, on a char boundary.
pub(crate) fn truncate_at_char(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    &s[..cut]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn word_counts() {
        let cases = [
            ("", 0),
            ("one two  three", 3),
            ("# Heading\n\n- item | --- |", 2),
            ("日本語のテキスト", 8),
            ("mixed 中文 text", 4),
            ("emoji 😀 ok", 2),
        ];
        for (s, want) in cases {
            assert_eq!(count_words(s), want, "{s:?}");
        }
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let html = format!("<body>{}deep{}</body>", "<div><span>".repeat(20_000), "</span></div>".repeat(20_000));
        let doc = scraper::Html::parse_document(&html);
        struct Count(usize, usize);
        impl<'a> Visitor<'a> for Count {
            fn open(&mut self, _el: ElementRef<'a>) -> bool {
                self.0 += 1;
                true
            }
            fn text(&mut self, t: &'a str) {
                self.1 += t.len();
            }
        }
        let mut c = Count(0, 0);
        walk(doc.root_element(), &mut c);
        assert!(c.0 > 1000);
        assert_eq!(c.1, 4);
    }

    proptest! {
        #[test]
        fn truncation_is_on_char_boundaries(s in "\\PC{0,40}", max in 0usize..200) {
            let t = truncate_at_char(&s, max);
            prop_assert!(t.len() <= max && s.starts_with(t));
            prop_assert!(s.len() <= max || t.len() + 4 > max);
        }
    }
}
