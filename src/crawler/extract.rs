//! Main-content extraction from an HTML page: picks the element holding the
//! page's prose, renders it as structured text, collects metadata and links
//! for discovery, and classifies the page (content, empty, consent wall,
//! JavaScript shell, link hub) so the crawler knows whether to index it.

use scraper::{ElementRef, Html};

use super::dom::{self, Visitor};
use super::render;

/// Bigger inputs are cut (on a char boundary) before parsing, to bound work.
const MAX_HTML_BYTES: usize = 5 * 1024 * 1024;
/// Below this many words a page has nothing worth indexing.
const MIN_WORDS: usize = 20;
const HUB_LINK_DENSITY: f32 = 0.6;
const HUB_MIN_LINKS: usize = 15;
/// Mount points of client-rendered apps (React, Next, Nuxt, Gatsby, ...).
const APP_ROOT_IDS: &[&str] = &["root", "app", "__next", "__nuxt", "___gatsby", "svelte"];

/// What was extracted from one HTML page.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// `<title>`, else the first `<h1>`; whitespace collapsed.
    pub title: String,
    /// `<link rel=canonical href>`, as written in the page.
    pub canonical: Option<String>,
    /// `<meta name=robots|googlebot>` says `noindex` (or `none`).
    pub robots_noindex: bool,
    /// `<meta name=robots|googlebot>` says `nofollow` (or `none`).
    pub robots_nofollow: bool,
    /// `<html lang>`.
    pub lang: Option<String>,
    /// The main content as structured Markdown-like text.
    pub text: String,
    /// Every `<a href>` of the whole page, in document order.
    pub links: Vec<Link>,
    /// Words in `text` (markup tokens not counted, CJK characters counted singly).
    pub word_count: usize,
    /// Share of the main content's characters that are link text.
    pub link_density: f32,
    pub kind: PageKind,
    /// 0..1, from length, link density and structure; 0 for pages without content.
    pub quality: f32,
    /// Which element the content came from (`main`, `[role=main]`,
    /// `article`, `div#content`, `body`, ...).
    pub container: String,
}

/// One `<a href>` of the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The href as written (trimmed), not resolved.
    pub href: String,
    /// Anchor text, else `aria-label`, `title` or an image's `alt`.
    pub text: String,
    /// `rel` contains `nofollow`.
    pub nofollow: bool,
}

/// Why a page would be skipped, or `Content` when it should be indexed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageKind {
    Content,
    Empty,
    ConsentOnly,
    JsShell,
    Hub,
}

/// Extracts the main content and metadata of `html`. When `preserve_links`
/// is set, links inside the content are rendered as `text (href)`.
pub fn extract(html: &str, preserve_links: bool) -> Page {
    let html = dom::truncate_at_char(html, MAX_HTML_BYTES);
    let doc = Html::parse_document(html);
    let root = doc.root_element();
    let facts = dom::Facts::of(root);
    let mut meta = MetaScan { facts: Some(&facts), ..MetaScan::default() };
    dom::walk(root, &mut meta);
    let body = meta.body.unwrap_or(root);

    let (container, container_name) = choose_container(&meta, body, &facts);
    let in_article =
        container.ancestors().filter_map(ElementRef::wrap).any(|a| matches!(dom::name(&a), "article" | "main"));
    let r = render::render(container, &facts, preserve_links, in_article);
    let word_count = dom::count_words(&r.text);
    let link_density = if r.total_chars == 0 { 0.0 } else { r.link_chars as f32 / r.total_chars as f32 };

    let visible = Visible::of(body);
    let empty_app_root = meta.app_roots.iter().any(|el| Visible::of(*el).words == 0);
    let kind = if visible.words > 0
        && visible.consent_words * 2 > visible.words
        && visible.words - visible.consent_words < MIN_WORDS
    {
        PageKind::ConsentOnly
    } else if visible.words < MIN_WORDS && (meta.scripts > 0 || empty_app_root) {
        PageKind::JsShell
    } else if link_density > HUB_LINK_DENSITY && r.links >= HUB_MIN_LINKS {
        PageKind::Hub
    } else if word_count < MIN_WORDS {
        PageKind::Empty
    } else {
        PageKind::Content
    };
    let quality = match kind {
        PageKind::Content | PageKind::Hub => quality(word_count, link_density, &r),
        PageKind::Empty | PageKind::ConsentOnly | PageKind::JsShell => 0.0,
    };

    let title = meta
        .title
        .filter(|t| !t.is_empty())
        .or_else(|| meta.first_h1.map(|h| dom::collapsed_text(&h)))
        .unwrap_or_default();
    let lang = root.value().attr("lang").map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned);

    Page {
        title,
        canonical: meta.canonical,
        robots_noindex: meta.noindex,
        robots_nofollow: meta.nofollow,
        lang,
        text: r.text,
        links: meta.links,
        word_count,
        link_density,
        kind,
        quality,
        container: container_name,
    }
}

/// Length saturates at ~400 words, prose beats links, and headings,
/// several paragraphs and lists/tables signal a real document.
fn quality(words: usize, link_density: f32, r: &render::Rendered) -> f32 {
    let length = (words as f32 / 400.0).min(1.0);
    let prose = (1.0 - link_density).clamp(0.0, 1.0);
    let mut structure = 0.0;
    if r.headings > 0 {
        structure += 0.4;
    }
    if r.paragraphs >= 3 {
        structure += 0.4;
    }
    if r.lists > 0 || r.tables > 0 {
        structure += 0.2;
    }
    (0.5 * length + 0.3 * prose + 0.2 * structure).clamp(0.0, 1.0)
}

fn choose_container<'a>(meta: &MetaScan<'a, '_>, body: ElementRef<'a>, facts: &dom::Facts) -> (ElementRef<'a>, String) {
    if let Some(main) = meta.main {
        return (main, "main".to_owned());
    }
    if let Some(el) = meta.role_main {
        return (el, "[role=main]".to_owned());
    }
    if meta.article_count == 1
        && let Some(article) = meta.first_article
    {
        return (article, "article".to_owned());
    }
    let mut density = Density { body: Some(body), facts: Some(facts), ..Density::default() };
    dom::walk(body, &mut density);
    let mut best: Option<(ElementRef<'a>, usize)> = None;
    for (el, score) in density.candidates {
        if score > 0 && best.is_none_or(|(_, s)| score > s) {
            best = Some((el, score));
        }
    }
    match best {
        Some((el, _)) if el != body => (el, label(&el)),
        _ => (body, "body".to_owned()),
    }
}

/// `div#content`, `section.post`, or the bare tag name.
fn label(el: &ElementRef<'_>) -> String {
    let tag = dom::name(el);
    let v = el.value();
    if let Some(id) = v.id().filter(|i| !i.is_empty()) {
        format!("{tag}#{}", dom::truncate_at_char(id, 64))
    } else if let Some(class) = v.classes().next() {
        format!("{tag}.{}", dom::truncate_at_char(class, 64))
    } else {
        tag.to_owned()
    }
}

/// One pass over the whole document for metadata, links and the container
/// candidates named by markup.
#[derive(Default)]
struct MetaScan<'a, 'f> {
    /// Always set by `extract`; an `Option` only so the scan can derive `Default`.
    facts: Option<&'f dom::Facts>,
    title: Option<String>,
    first_h1: Option<ElementRef<'a>>,
    canonical: Option<String>,
    noindex: bool,
    nofollow: bool,
    links: Vec<Link>,
    body: Option<ElementRef<'a>>,
    main: Option<ElementRef<'a>>,
    role_main: Option<ElementRef<'a>>,
    first_article: Option<ElementRef<'a>>,
    article_count: usize,
    scripts: usize,
    app_roots: Vec<ElementRef<'a>>,
    /// Open `<svg>`/`<math>` elements: their `title`/`a` are not the page's.
    foreign_depth: usize,
    /// Open boilerplate elements: articles inside them are not candidates.
    dropped_depth: usize,
    /// Per open element: (entered foreign content, entered boilerplate).
    stack: Vec<(bool, bool)>,
}

impl<'a> Visitor<'a> for MetaScan<'a, '_> {
    fn open(&mut self, el: ElementRef<'a>) -> bool {
        let tag = dom::name(&el);
        let v = el.value();
        let foreign = matches!(tag, "svg" | "math");
        let dropped = self.dropped_depth == 0
            && tag != "body"
            && tag != "html"
            && self.facts.is_some_and(|f| dom::is_dropped(&el, true, f));
        // The container itself is exempt from the boilerplate rules (a
        // `role=main` with a consent-ish class is still the main content),
        // but not from being hidden or sitting inside boilerplate.
        let in_content = self.dropped_depth == 0
            && v.attr("hidden").is_none()
            && !v.attr("aria-hidden").is_some_and(|a| a.trim().eq_ignore_ascii_case("true"));
        if self.foreign_depth == 0 && !foreign {
            match tag {
                "title" if self.title.is_none() => self.title = Some(dom::collapsed_text(&el)),
                "body" => {
                    self.body.get_or_insert(el);
                }
                "h1" => {
                    self.first_h1.get_or_insert(el);
                }
                "link" if self.canonical.is_none() && has_token(v.attr("rel"), "canonical") => {
                    self.canonical = v.attr("href").map(str::trim).filter(|h| !h.is_empty()).map(str::to_owned);
                }
                "meta" => self.meta_robots(&el),
                "a" => {
                    if let Some(href) = v.attr("href") {
                        self.links.push(link_of(&el, href));
                    }
                }
                "main" if in_content && self.main.is_none() => self.main = Some(el),
                "article" if in_content => {
                    self.article_count += 1;
                    self.first_article.get_or_insert(el);
                }
                "script" => self.scripts += 1,
                _ => {}
            }
            if in_content
                && self.role_main.is_none()
                && v.attr("role").is_some_and(|r| r.trim().eq_ignore_ascii_case("main"))
            {
                self.role_main = Some(el);
            }
            if v.id().is_some_and(|id| APP_ROOT_IDS.contains(&id)) && self.app_roots.len() < 8 {
                self.app_roots.push(el);
            }
        }
        self.foreign_depth += usize::from(foreign);
        self.dropped_depth += usize::from(dropped);
        self.stack.push((foreign, dropped));
        // Links inside boilerplate still matter for discovery: always descend.
        true
    }

    fn close(&mut self, _el: ElementRef<'a>) {
        if let Some((foreign, dropped)) = self.stack.pop() {
            self.foreign_depth -= usize::from(foreign);
            self.dropped_depth -= usize::from(dropped);
        }
    }
}

impl MetaScan<'_, '_> {
    fn meta_robots(&mut self, el: &ElementRef<'_>) {
        let v = el.value();
        let is_robots =
            v.attr("name").map(|n| n.trim().to_ascii_lowercase()).is_some_and(|n| n == "robots" || n == "googlebot");
        if !is_robots {
            return;
        }
        let content = v.attr("content").unwrap_or("").to_ascii_lowercase();
        for token in content.split(|c: char| c == ',' || c.is_whitespace()) {
            match token {
                "noindex" => self.noindex = true,
                "nofollow" => self.nofollow = true,
                "none" => {
                    self.noindex = true;
                    self.nofollow = true;
                }
                _ => {}
            }
        }
    }
}

fn has_token(attr: Option<&str>, token: &str) -> bool {
    attr.is_some_and(|a| a.split_whitespace().any(|t| t.eq_ignore_ascii_case(token)))
}

fn link_of(el: &ElementRef<'_>, href: &str) -> Link {
    let v = el.value();
    let mut text = dom::collapsed_text(el);
    if text.is_empty() {
        let img_alt = || {
            el.descendent_elements().take(50).find(|d| dom::name(d) == "img").and_then(|img| img.value().attr("alt"))
        };
        let fallback = v.attr("aria-label").or_else(|| v.attr("title")).or_else(img_alt).unwrap_or("");
        dom::push_collapsed(&mut text, fallback.trim());
    }
    Link { href: href.trim().to_owned(), text, nofollow: has_token(v.attr("rel"), "nofollow") }
}

/// Text-density scan: each text run (outside links and boilerplate) credits
/// its nearest `div`/`section`/`article` ancestor in full and the next one up
/// by half, so the element that directly holds the prose scores highest
/// while a wrapper of several prose blocks can still beat each of them.
#[derive(Default)]
struct Density<'a, 'f> {
    body: Option<ElementRef<'a>>,
    /// Always set; an `Option` only so the scan can derive `Default`.
    facts: Option<&'f dom::Facts>,
    candidates: Vec<(ElementRef<'a>, usize)>,
    open_candidates: Vec<usize>,
    link_depth: usize,
    article_depth: usize,
    /// Per open element: (is candidate, is link, is article/main).
    stack: Vec<(bool, bool, bool)>,
}

impl<'a> Visitor<'a> for Density<'a, '_> {
    fn open(&mut self, el: ElementRef<'a>) -> bool {
        let is_body = self.body == Some(el);
        if !is_body && self.facts.is_some_and(|f| dom::is_dropped(&el, self.article_depth > 0, f)) {
            return false;
        }
        let tag = dom::name(&el);
        let candidate = is_body || matches!(tag, "div" | "section" | "article");
        if candidate {
            self.open_candidates.push(self.candidates.len());
            self.candidates.push((el, 0));
        }
        let link = tag == "a";
        let article = matches!(tag, "article" | "main");
        self.link_depth += usize::from(link);
        self.article_depth += usize::from(article);
        self.stack.push((candidate, link, article));
        true
    }

    fn close(&mut self, _el: ElementRef<'a>) {
        if let Some((candidate, link, article)) = self.stack.pop() {
            if candidate {
                self.open_candidates.pop();
            }
            self.link_depth -= usize::from(link);
            self.article_depth -= usize::from(article);
        }
    }

    fn text(&mut self, text: &'a str) {
        if self.link_depth > 0 {
            return;
        }
        let n = dom::non_space_chars(text);
        let mut open = self.open_candidates.iter().rev();
        if let Some(&i) = open.next()
            && let Some(c) = self.candidates.get_mut(i)
        {
            c.1 += n;
        }
        if let Some(&i) = open.next()
            && let Some(c) = self.candidates.get_mut(i)
        {
            c.1 += n / 2;
        }
    }
}

/// Word counts of what a reader would see (scripts, styles and hidden
/// elements excluded), split into consent-banner text and the rest.
#[derive(Default)]
struct Visible {
    words: usize,
    consent_words: usize,
    consent_depth: usize,
    stack: Vec<bool>,
}

impl Visible {
    fn of(el: ElementRef<'_>) -> Visible {
        let mut v = Visible::default();
        dom::walk(el, &mut v);
        v
    }
}

impl<'a> Visitor<'a> for Visible {
    fn open(&mut self, el: ElementRef<'a>) -> bool {
        if dom::is_invisible(&el) {
            return false;
        }
        let consent = dom::is_consent(&el);
        self.consent_depth += usize::from(consent);
        self.stack.push(consent);
        true
    }

    fn close(&mut self, _el: ElementRef<'a>) {
        if let Some(consent) = self.stack.pop() {
            self.consent_depth -= usize::from(consent);
        }
    }

    fn text(&mut self, text: &'a str) {
        let n = dom::count_words(text);
        self.words += n;
        if self.consent_depth > 0 {
            self.consent_words += n;
        }
    }
}

#[cfg(test)]
#[path = "extract_tests.rs"]
mod tests;
