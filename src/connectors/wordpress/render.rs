//! A WordPress post's rendered HTML as clean text for the knowledge base: the crawler's renderer
//! (headings, paragraphs, lists, tables), embedded media kept as a line naming what is embedded,
//! and the leftovers of shortcodes whose plugin is gone (`[gallery ids="1,2"]`, `[/column]`)
//! removed with the text between them kept. Titles are decoded (entities, stray tags). Pure.

use std::sync::LazyLock;

use regex::Regex;

/// `<iframe|video|audio|embed|object … src|data="…">…</…>`: replaced by a line with the address.
static EMBED: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used, reason = "a constant pattern")]
    Regex::new(r#"(?is)<(iframe|video|audio|embed|object)\b[^>]*?\b(?:src|data)\s*=\s*["']([^"']+)["'][^>]*>(?:.*?</(?:iframe|video|audio|object)>)?"#)
        .expect("embed pattern")
});

/// A shortcode tag: `[name …]`, `[name/]`, `[/name]`.
static SHORTCODE: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used, reason = "a constant pattern")]
    Regex::new(r#"\[(/?)([a-zA-Z_][a-zA-Z0-9_-]{0,40})((?:\s[^\[\]]{0,500})?)(/?)\]"#).expect("shortcode pattern")
});

/// The text of a post's `content.rendered`.
pub fn content_text(html: &str) -> String {
    let html = EMBED.replace_all(html, |c: &regex::Captures| {
        let kind = if c[1].eq_ignore_ascii_case("iframe") { "content" } else { &c[1] };
        format!("<p>Embedded {}: {}</p>", kind.to_ascii_lowercase(), &c[2])
    });
    let page = crate::crawler::extract_page(&format!("<html><body><main>{html}</main></body></html>"), true);
    strip_shortcodes(&page.text)
}

/// A rendered title as plain text (entities decoded, tags dropped, whitespace collapsed).
pub fn title_text(html: &str) -> String {
    let frag = scraper::Html::parse_fragment(html);
    let text: String = frag.root_element().text().collect();
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Removes shortcode tags a site left in its text: closing tags, tags with attributes, and an
/// opening tag whose closing tag follows. `[1]`, `[sic]` and `[see note]` stay: they are text.
pub fn strip_shortcodes(text: &str) -> String {
    // removing a tag can join the pieces of another (`[a[/x] b=1]`): repeat until nothing changes;
    // each round that changes something removes a `[`, so this ends
    let mut cur = strip_once(text);
    loop {
        let next = strip_once(&cur);
        if next == cur {
            return cur;
        }
        cur = next;
    }
}

fn strip_once(text: &str) -> String {
    let closing: std::collections::HashSet<String> =
        SHORTCODE.captures_iter(text).filter(|c| &c[1] == "/").map(|c| c[2].to_ascii_lowercase()).collect();
    let out = SHORTCODE.replace_all(text, |c: &regex::Captures| {
        let attrs = &c[3];
        let is_shortcode =
            &c[1] == "/" || &c[4] == "/" || attrs.contains('=') || closing.contains(&c[2].to_ascii_lowercase());
        if is_shortcode { String::new() } else { c[0].to_string() }
    });
    tidy(&out)
}

/// Collapses the spaces a removed tag leaves and drops lines it emptied.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        let l = line.split(' ').filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ");
        let keep_indent = line.starts_with("    ") || line.starts_with('\t');
        if l.is_empty() {
            blank += 1;
            if blank == 1 && !out.is_empty() {
                out.push('\n');
            }
            continue;
        }
        blank = 0;
        out.push_str(if keep_indent { line } else { &l });
        out.push('\n');
    }
    out.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn blocks_render_as_structured_text() {
        let html = "\n<h2 class=\"wp-block-heading\">Opening hours</h2>\n<p>We are open <strong>Monday</strong> to Friday.</p>\n\
            <ul><li>9:00 to 17:00</li><li>Closed on holidays</li></ul>\n<!-- wp:paragraph --><p>Welcome!</p><!-- /wp:paragraph -->";
        let t = content_text(html);
        assert!(t.contains("## Opening hours"), "{t}");
        assert!(t.contains("We are open Monday to Friday."), "{t}");
        assert!(t.contains("- 9:00 to 17:00"), "{t}");
        assert!(t.contains("Welcome!") && !t.contains("wp:paragraph"), "{t}");
    }

    #[test]
    fn embeds_become_a_line_and_shortcodes_go() {
        let html = "<p>Watch this:</p><figure class=\"wp-block-embed\"><div class=\"wp-block-embed__wrapper\">\
            <iframe title=\"Tour\" src=\"https://www.youtube.com/embed/abc\" width=\"500\"></iframe></div></figure>\
            <p>[gallery ids=\"1,2,3\"] Our shop [vc_row][vc_column]sells bread[/vc_column][/vc_row] daily [1].</p>";
        let t = content_text(html);
        assert!(t.contains("Embedded content: https://www.youtube.com/embed/abc"), "{t}");
        assert!(t.contains("Our shop sells bread daily [1]."), "{t}");
        assert!(!t.contains("gallery") && !t.contains("vc_"), "{t}");
    }

    #[test]
    fn plain_brackets_stay() {
        assert_eq!(strip_shortcodes("He said [sic] and [see note] twice."), "He said [sic] and [see note] twice.");
        assert_eq!(strip_shortcodes("[caption id=\"a\" align=\"left\"]A cat[/caption]"), "A cat");
        assert_eq!(strip_shortcodes("x [contact-form-7 id=\"5\" /] y"), "x y");
    }

    #[test]
    fn titles_decode_entities() {
        assert_eq!(title_text("Caf&eacute; &#8220;Ünïcode&#8221; &amp; <em>more</em>"), "Café “Ünïcode” & more");
    }

    proptest! {
        #[test]
        fn stripping_never_panics_and_is_stable(s in crate::testkit::hostile_text(8)) {
            let once = strip_shortcodes(&s);
            prop_assert_eq!(strip_shortcodes(&once), once.clone());
            let _ = content_text(&s);
        }

        #[test]
        fn bracket_soup_is_stable(parts in proptest::collection::vec(
            proptest::sample::select(vec!["[", "]", "/", "a", "b", "=", " ", "\"x\"", "é", "\n", "<p>", "</p>"]), 0..60)) {
            let s: String = parts.concat();
            let once = strip_shortcodes(&s);
            prop_assert_eq!(strip_shortcodes(&once), once.clone());
            prop_assert!(once.chars().count() <= s.chars().count());
        }
    }
}
