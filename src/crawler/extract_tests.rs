//! Tests of `extract` on realistic inline page fixtures, plus proptests that
//! it never panics on hostile input.

use super::*;
use proptest::prelude::*;

const BLOG: &str = r#"<!DOCTYPE html>
<html lang="en-GB">
<head>
  <meta charset="utf-8">
  <title>  Why Rust Ownership Matters
     | Dev Blog </title>
  <link rel="stylesheet" href="/site.css">
  <link rel="Canonical" href=" https://blog.example.com/rust-ownership ">
  <script>window.dataLayer = [];</script>
  <style>.cookie-notice { position: fixed }</style>
</head>
<body class="cookie-consent-pending">
  <div id="cookie-banner" class="cookie-notice">
    <p>We use cookies to improve your experience and for marketing.</p>
    <button>Accept all</button> <a href="/privacy">Read our privacy policy</a>
  </div>
  <header class="site-header">
    <a href="/" class="logo">Dev Blog Logo</a>
    <nav><ul><li><a href="/">Home</a></li><li><a href="/archive">Archive</a></li><li><a href="/about">About us</a></li></ul></nav>
  </header>
  <div class="layout">
    <aside class="sidebar">
      <h3>Popular posts</h3>
      <ul><li><a href="/p1">Ten tips for faster builds</a></li><li><a href="/p2">Async in depth</a></li></ul>
      <form action="/subscribe"><input name="email" placeholder="Your email"><button>Subscribe now</button></form>
    </aside>
    <article class="post">
      <header>
        <h1>Why Rust Ownership Matters</h1>
        <p class="byline">By Jane Doe, 3 March 2024</p>
      </header>
      <p>Ownership is the feature that lets Rust guarantee memory safety without a garbage collector.
         Every value has exactly one owner, and the value is dropped when its owner goes out of scope.</p>
      <h2>Moves and borrows</h2>
      <p>Assigning a heap value to another variable <em>moves</em> it; the old binding can no longer be used.
         Borrowing with <code>&amp;</code> gives temporary access without taking ownership.</p>
      <ul>
        <li>Each value has one owner.</li>
        <li>There can be many shared borrows or one mutable borrow.</li>
        <li>References must always be valid.</li>
      </ul>
      <pre><code>fn main() {
    let s = String::from("hi");
    takes(s);
}</code></pre>
      <h2>Further reading</h2>
      <p>The rules feel strict at first, but <a href="https://doc.rust-lang.org/book/">the book</a> explains
         them with many small examples that build real intuition.</p>
      <div class="share" role="navigation">Share on Twitter</div>
      <div hidden>Hidden promo text</div>
      <span aria-hidden="true">Decorative glyph text</span>
    </article>
  </div>
  <footer><p>© 2024 Dev Blog. All rights reserved.</p><a href="/terms">Terms of service</a></footer>
  <script src="/app.js"></script>
</body>
</html>"#;

const BLOG_CONTENT_LINES: &[&str] = &[
    "# Why Rust Ownership Matters",
    "By Jane Doe, 3 March 2024",
    "Ownership is the feature that lets Rust guarantee memory safety without a garbage collector. Every value has exactly one owner, and the value is dropped when its owner goes out of scope.",
    "## Moves and borrows",
    "Assigning a heap value to another variable moves it; the old binding can no longer be used. Borrowing with & gives temporary access without taking ownership.",
    "- Each value has one owner.",
    "- There can be many shared borrows or one mutable borrow.",
    "- References must always be valid.",
    "```\nfn main() {\n    let s = String::from(\"hi\");\n    takes(s);\n}\n```",
    "## Further reading",
    "The rules feel strict at first, but the book explains them with many small examples that build real intuition.",
];

const BLOG_BOILERPLATE: &[&str] = &[
    "We use cookies",
    "Accept all",
    "privacy policy",
    "Dev Blog Logo",
    "Home",
    "Archive",
    "About us",
    "Popular posts",
    "Ten tips",
    "Async in depth",
    "Subscribe now",
    "Your email",
    "Share on Twitter",
    "Hidden promo",
    "Decorative glyph",
    "All rights reserved",
    "Terms of service",
    "dataLayer",
    "position: fixed",
];

#[test]
fn blog_article_keeps_content_and_drops_boilerplate() {
    let page = extract(BLOG, false);
    assert_eq!(page.kind, PageKind::Content, "{page:#?}");
    assert_eq!(page.container, "article");
    assert_eq!(page.title, "Why Rust Ownership Matters | Dev Blog");
    assert_eq!(page.lang.as_deref(), Some("en-GB"));
    assert_eq!(page.canonical.as_deref(), Some("https://blog.example.com/rust-ownership"));
    assert!(!page.robots_noindex && !page.robots_nofollow);
    for b in BLOG_BOILERPLATE {
        assert!(!page.text.contains(b), "boilerplate {b:?} leaked into:\n{}", page.text);
    }
    let present = BLOG_CONTENT_LINES.iter().filter(|l| page.text.contains(*l)).count();
    assert!(
        present * 100 >= BLOG_CONTENT_LINES.len() * 95,
        "only {present}/{} content lines in:\n{}",
        BLOG_CONTENT_LINES.len(),
        page.text
    );
    assert!(page.word_count > 90 && page.word_count < 140, "{}", page.word_count);
    assert!(page.link_density < 0.1);
    assert!(page.quality > 0.5, "{}", page.quality);
    // Discovery sees every link of the page, boilerplate included, in order.
    let hrefs: Vec<&str> = page.links.iter().map(|l| l.href.as_str()).collect();
    assert_eq!(
        hrefs,
        ["/privacy", "/", "/", "/archive", "/about", "/p1", "/p2", "https://doc.rust-lang.org/book/", "/terms"]
    );
    assert_eq!(page.links[1].text, "Dev Blog Logo");
}

#[test]
fn preserve_links_renders_href() {
    let page = extract(BLOG, true);
    assert!(page.text.contains("but the book (https://doc.rust-lang.org/book/) explains"), "{}", page.text);
    let page = extract(BLOG, false);
    assert!(!page.text.contains("(https://doc.rust-lang.org/book/)"));
}

const DIV_SOUP: &str = r#"<html><head><title>Recipes</title></head><body>
<div id="wrapper">
  <div id="toplinks"><a href="/">Start</a> | <a href="/recipes">All recipes</a> | <a href="/login">Sign in</a></div>
  <div id="main-col">
    <div class="recipe">
      <p>This lentil soup is warming, cheap and ready in forty minutes on a weeknight.</p>
      <p>Rinse the lentils, soften onion and carrot in olive oil, then add cumin and stock.</p>
      <p>Simmer until the lentils collapse, blend half of the pot and season with lemon juice.</p>
    </div>
  </div>
  <div class="widget"><a href="/a">Cake</a> <a href="/b">Bread</a> <a href="/c">Pasta</a></div>
  <div id="legal">Copyright 2024 Soup Corp.</div>
</div>
</body></html>"#;

#[test]
fn density_heuristic_finds_prose_without_semantic_tags() {
    let page = extract(DIV_SOUP, false);
    assert_eq!(page.container, "div.recipe");
    assert_eq!(page.kind, PageKind::Content);
    assert!(page.text.starts_with("This lentil soup"), "{}", page.text);
    assert!(page.text.contains("warming, cheap and ready in forty minutes on a weeknight.\n\nRinse the lentils"));
    for b in ["Start", "All recipes", "Sign in", "Cake", "Copyright"] {
        assert!(!page.text.contains(b), "{b} leaked: {}", page.text);
    }
}

#[test]
fn consent_only_page() {
    let html = r#"<html><head><title>Before you continue</title><script src="/cmp.js"></script></head><body>
      <div id="onetrust-consent-sdk"><div class="ot-sdk-container" role="dialog">
        <h2>We value your privacy</h2>
        <p>We and our 842 partners store and access information on your device, such as cookies, and process
           personal data like unique identifiers and standard browsing information to personalise ads and
           content, measure performance and develop and improve products.</p>
        <button>Accept all</button><button>Reject all</button><a href="/vendors">Show vendors</a>
      </div></div>
      <p>Loading…</p>
    </body></html>"#;
    let page = extract(html, false);
    assert_eq!(page.kind, PageKind::ConsentOnly, "{page:#?}");
    assert_eq!(page.quality, 0.0);
    assert!(!page.text.contains("partners"));
}

#[test]
fn js_shell_page() {
    let html = r#"<!doctype html><html><head><title>Dashboard</title>
      <script defer src="/static/js/main.8f3a.js"></script></head>
      <body><noscript>You need to enable JavaScript to run this app.</noscript>
      <div id="root"></div><script>window.__INITIAL_STATE__ = {"user": null};</script></body></html>"#;
    let page = extract(html, false);
    assert_eq!(page.kind, PageKind::JsShell);
    assert_eq!(page.title, "Dashboard");
    assert!(page.text.is_empty(), "{:?}", page.text);
    // An empty app root alone is enough, even without scripts.
    let page = extract(r#"<body><div id="__next"></div></body>"#, false);
    assert_eq!(page.kind, PageKind::JsShell);
    // No script and no app root: just an empty page.
    assert_eq!(extract("<body><p>Nothing here.</p></body>", false).kind, PageKind::Empty);
}

#[test]
fn hub_page() {
    let mut html = String::from("<html><body><nav><a href='/'>Home</a></nav><main><h1>Archive</h1><ul>");
    for i in 0..50 {
        html.push_str(&format!("<li><a href='/posts/{i}'>Post number {i} about something</a></li>"));
    }
    html.push_str("</ul><p>Older posts.</p></main></body></html>");
    let page = extract(&html, false);
    assert_eq!(page.kind, PageKind::Hub, "{page:#?}");
    assert_eq!(page.container, "main");
    assert!(page.link_density > 0.6);
    assert_eq!(page.links.len(), 51);
    assert!(page.text.contains("- Post number 49 about something"));
}

#[test]
fn table_and_headings() {
    let html = r#"<html><body><main>
      <h1>Pricing</h1>
      <p>Three plans, billed monthly, cancel any time without any fee or questions asked at all.</p>
      <h2>Compare   plans</h2>
      <table>
        <caption>Prices in USD</caption>
        <thead><tr><th>Plan</th><th>Price</th><th>Notes</th></tr></thead>
        <tbody>
          <tr><td>Basic</td><td>$5</td><td>a | b</td></tr>
          <tr><td>Pro</td><td>$10</td><td>multi<br>line
              text</td></tr>
          <tr><td>Team</td><td>$30</td></tr>
        </tbody>
      </table>
      <h3>FAQ</h3>
      <table><tr><td>Q</td><td>A</td></tr><tr><td>Refunds?</td><td>Yes</td></tr></table>
      <h4>Deep</h4><h5>Deeper</h5><h6>Deepest</h6>
    </main></body></html>"#;
    let page = extract(html, false);
    let want = "# Pricing\n\n\
        Three plans, billed monthly, cancel any time without any fee or questions asked at all.\n\n\
        ## Compare plans\n\n\
        Prices in USD\n\n\
        | Plan | Price | Notes |\n| --- | --- | --- |\n| Basic | $5 | a \\| b |\n| Pro | $10 | multi line text |\n| Team | $30 |  |\n\n\
        ### FAQ\n\n\
        | Q | A |\n| --- | --- |\n| Refunds? | Yes |\n\n\
        #### Deep\n\n##### Deeper\n\n###### Deepest";
    assert_eq!(page.text, want);
}

#[test]
fn structure_lists_quotes_pre_br() {
    let html = "<main><p>Line one<br>Line two</p>\
        <ol><li>First<ul><li>Nested <b>bold</b></li></ul>tail</li><li><p>Second</p><p>para</p></li></ol>\
        <blockquote><p>Quoted</p><p>twice</p></blockquote>\
        <pre>```inner```\n  indented\n</pre>\
        <p>Caf&eacute; &amp; cr&egrave;me &lt;3&nbsp;ok</p></main>";
    let page = extract(html, false);
    let want = "Line one\nLine two\n\n\
        - First\n  - Nested bold\n  tail\n- Second para\n\n\
        > Quoted\n\n> twice\n\n\
        ````\n```inner```\n  indented\n````\n\n\
        Café & crème <3 ok";
    assert_eq!(page.text, want);
}

#[test]
fn meta_robots_canonical_and_nofollow_links() {
    let html = r#"<html><head><meta name="ROBOTS" content="NoIndex, NoFollow">
      <link rel="canonical" href="/canonical-path"><link rel="canonical" href="/second"></head>
      <body><a href="/a" rel="nofollow ugc">A</a><a href="/b">B</a><a href=" /c " rel="noopener"><img alt="Logo"></a>
      <a name="anchor-only">no href</a><svg><a href="/svg-link"><title>icon</title></a></svg></body></html>"#;
    let page = extract(html, false);
    assert!(page.robots_noindex && page.robots_nofollow);
    assert_eq!(page.canonical.as_deref(), Some("/canonical-path"));
    assert_eq!(
        page.links,
        vec![
            Link { href: "/a".into(), text: "A".into(), nofollow: true },
            Link { href: "/b".into(), text: "B".into(), nofollow: false },
            Link { href: "/c".into(), text: "Logo".into(), nofollow: false },
        ]
    );
    let page = extract(r#"<meta name="googlebot" content="none"><p>x</p>"#, false);
    assert!(page.robots_noindex && page.robots_nofollow);
    let page = extract(r#"<meta name="robots" content="index, follow"><p>x</p>"#, false);
    assert!(!page.robots_noindex && !page.robots_nofollow);
}

#[test]
fn title_falls_back_to_h1_and_role_main_wins() {
    let html = r#"<body><div class="chrome">Site chrome text that is long enough to be noticed here</div>
      <div role="main"><h1>  Real   Title </h1><p>Body text.</p></div></body>"#;
    let page = extract(html, false);
    assert_eq!(page.title, "Real Title");
    assert_eq!(page.container, "[role=main]");
    assert_eq!(page.text, "# Real Title\n\nBody text.");
    assert_eq!(page.kind, PageKind::Empty);
    assert!(page.lang.is_none() && page.canonical.is_none());
}

#[test]
fn container_is_never_dropped_and_wrapping_forms_are_kept() {
    // `role=main` on a consent-looking class must still be rendered.
    let html = r#"<body><section role="main" class="gdpr-safe"><p>Kept paragraph.</p></section></body>"#;
    assert_eq!(extract(html, false).text, "Kept paragraph.");
    // ASP.NET WebForms wraps the whole page in one form.
    let html = r#"<body><form id="form1"><div id="content"><h2>Report</h2><p>Quarterly numbers went up.</p>
      <input type="submit" value="Go"></div></form><form><input name="q"><button>Search</button></form></body>"#;
    let page = extract(html, false);
    assert_eq!(page.text, "## Report\n\nQuarterly numbers went up.");
}

#[test]
fn multiple_articles_use_density() {
    let para = "Words of real prose that go on for a while to make this block heavy. ".repeat(4);
    let html = format!(
        "<body><article><p>Short teaser.</p></article><article class='full'><p>{para}</p><p>{para}</p></article></body>"
    );
    let page = extract(&html, false);
    assert_eq!(page.container, "article.full");
    assert!(!page.text.contains("Short teaser"));
}

#[test]
fn oversized_input_is_truncated_on_char_boundary() {
    let mut html = String::from("<body><p>");
    while html.len() < MAX_HTML_BYTES + 1000 {
        html.push_str("é漢😀 word ");
    }
    let page = extract(&html, false);
    assert!(page.word_count > 100_000);
    assert_eq!(page.kind, PageKind::Content);
}

#[test]
fn empty_and_garbage_inputs() {
    for input in ["", "   ", "<", "</p>", "<html", "<!--", "<table><td>x", "\u{0}\u{0}", "<pre></pre>"] {
        let page = extract(input, true);
        assert_eq!(page.kind, PageKind::Empty, "{input:?}");
        assert!(page.quality == 0.0);
    }
}

fn hostile_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[\u{200e}\u{200f}\u{202a}-\u{202e}\u{0300}-\u{036f}\u{1F600}-\u{1F64F}\u{0}\u{feff}a-z <>&;#/]{0,80}",
        ("[\u{202e}\u{0301}\u{1F9D1}\u{200d}\u{1F4BB}x]{1,4}", 1usize..5000).prop_map(|(s, n)| s.repeat(n)),
    ]
}

fn tag_soup() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "<(main|article|div|section|p|h[1-7]|ul|ol|li|table|tr|td|th|pre|br|blockquote|a href=x|a|nav|form|script|header|svg|title)( id=(root|cookie-x|app))?( class=(consent|x))?( role=(main|navigation))?( hidden)?>",
        "</(main|article|div|section|p|h[1-7]|ul|ol|li|table|tr|td|th|pre|blockquote|a|nav|form|script|header|svg|title)>",
        hostile_text(),
        Just("&amp;&lt;&#x1F600;&#0;&bogus;".to_owned()),
    ];
    proptest::collection::vec(piece, 0..60).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn extract_never_panics_on_hostile_text(s in hostile_text(), links in any::<bool>()) {
        let page = extract(&s, links);
        prop_assert!((0.0..=1.0).contains(&page.link_density));
        prop_assert!((0.0..=1.0).contains(&page.quality));
        prop_assert_eq!(page.text.trim(), page.text.as_str());
    }

    #[test]
    fn extract_never_panics_on_tag_soup(s in tag_soup(), links in any::<bool>()) {
        let page = extract(&s, links);
        prop_assert!((0.0..=1.0).contains(&page.link_density));
        prop_assert!((0.0..=1.0).contains(&page.quality));
        prop_assert_eq!(page.word_count, dom::count_words(&page.text));
    }
}

/// A hostile page of deep nesting or a wide table stays within the text cap instead of growing
/// quadratically (indentation, quote prefixes and padded columns are bounded).
#[test]
fn deep_nesting_and_wide_tables_stay_bounded() {
    let lists = format!("<main>{}</main>", "<ul><li>item ".repeat(40_000));
    let quotes = format!("<main>{}</main>", "<blockquote>q ".repeat(40_000));
    let wide: String = format!(
        "<main><table><tr>{}</tr>{}</table></main>",
        "<td>c</td>".repeat(20_000),
        "<tr><td>r</td></tr>".repeat(20_000)
    );
    for html in [lists, quotes, wide] {
        let page = extract(&html, true);
        assert!(page.text.len() <= 2 * 1024 * 1024 + 1024, "{} bytes", page.text.len());
    }
}
