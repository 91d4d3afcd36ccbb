//! Result snippets: the ~180-character window of a chunk with the most query terms, HTML-escaped,
//! with the matching words wrapped in `<mark>…</mark>`.

/// Longest snippet, in characters (the original product's evidence excerpt length).
pub const SNIPPET_CHARS: usize = 180;

fn escape(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\r' | '\t' => out.push(' '),
            c => out.push(c),
        }
    }
}

fn matches_term(word: &str, terms: &[String], lower: &mut String) -> bool {
    lower.clear();
    lower.extend(word.chars().flat_map(char::to_lowercase));
    let w: &str = lower;
    terms.iter().any(|t| w == t || (t.len() >= 3 && w.starts_with(t.as_str())) || (w.len() >= 4 && t.starts_with(w)))
}

/// The snippet of `content` for analyzed query `terms` (lowercase stems).
pub fn snippet(content: &str, terms: &[String]) -> String {
    // words: (byte start, byte end, matched), and the character offsets of their ends
    let mut words: Vec<(usize, usize, bool)> = Vec::new();
    let mut chars: Vec<(usize, usize)> = Vec::new();
    let mut start: Option<(usize, usize)> = None;
    let mut lower = String::new();
    let ends = content.char_indices().chain(std::iter::once((content.len(), ' ')));
    for (n, (i, c)) in ends.enumerate() {
        if c.is_alphanumeric() {
            start.get_or_insert((i, n));
        } else if let Some((s, sn)) = start.take() {
            words.push((s, i, matches_term(&content[s..i], terms, &mut lower)));
            chars.push((sn, n));
        }
    }
    // characters from the start of word a to the end of word b
    let char_len = |a: usize, b: usize| chars[b].1 - chars[a].0;
    // the window (in words) with the most matches that fits SNIPPET_CHARS
    let (mut best_a, mut best_b, mut best_hits) = (0usize, 0usize, 0usize);
    let mut b = 0;
    let mut hits = 0;
    for a in 0..words.len() {
        if b < a {
            b = a;
            hits = 0;
        }
        while b < words.len() && char_len(a, b) <= SNIPPET_CHARS {
            if words[b].2 {
                hits += 1;
            }
            b += 1;
        }
        if hits > best_hits || (best_hits == 0 && a == 0) {
            (best_a, best_b, best_hits) = (a, b, hits);
        }
        if words[a].2 && hits > 0 {
            hits -= 1;
        }
        if b == words.len() && best_hits > 0 {
            break;
        }
    }
    if words.is_empty() {
        let mut out = String::new();
        escape(&content.chars().take(SNIPPET_CHARS).collect::<String>(), &mut out);
        return out;
    }
    let from = if best_a == 0 { 0 } else { words[best_a].0 };
    let to = if best_b >= words.len() { content.len() } else { words[best_b.max(best_a + 1) - 1].1 };
    let mut out = String::new();
    if from > 0 {
        out.push('…');
    }
    let mut pos = from;
    for &(s, e, m) in &words[best_a..best_b.max(best_a + 1).min(words.len())] {
        if s < pos || e > to {
            continue;
        }
        escape(&content[pos..s], &mut out);
        if m {
            out.push_str("<mark>");
            escape(&content[s..e], &mut out);
            out.push_str("</mark>");
        } else {
            escape(&content[s..e], &mut out);
        }
        pos = e;
    }
    escape(&content[pos..to], &mut out);
    if to < content.len() {
        out.push('…');
    }
    out.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_terms_in_the_densest_window() {
        let text = format!(
            "{} The wing in a propeller slipstream shows lift increase. {}",
            "filler words here. ".repeat(20),
            "more filler. ".repeat(20)
        );
        let s = snippet(&text, &["slipstream".into(), "wing".into(), "lift".into()]);
        assert!(
            s.contains("<mark>wing</mark>") && s.contains("<mark>slipstream</mark>") && s.contains("<mark>lift</mark>"),
            "{s}"
        );
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.replace("<mark>", "").replace("</mark>", "").chars().count() <= SNIPPET_CHARS + 2);
    }

    #[test]
    fn escapes_html_and_matches_stems() {
        let s = snippet("Refunds <b>apply</b> to aerodynamics & more", &["aerodynam".into(), "refund".into()]);
        assert_eq!(s, "<mark>Refunds</mark> &lt;b&gt;apply&lt;/b&gt; to <mark>aerodynamics</mark> &amp; more");
        assert_eq!(snippet("", &["x".into()]), "");
    }

    proptest::proptest! {
        /// Snippets of arbitrary Unicode with arbitrary terms never panic and stay escaped.
        #[test]
        fn snippets_never_panic_on_arbitrary_unicode(
            content in crate::testkit::hostile_text(600),
            terms in proptest::collection::vec(crate::testkit::hostile_text(3), 0..4),
        ) {
            let s = snippet(&content, &terms);
            let unmarked = s.replace("<mark>", "").replace("</mark>", "");
            proptest::prop_assert!(!unmarked.contains('<'));
        }
    }
}
