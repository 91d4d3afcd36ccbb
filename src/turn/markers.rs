//! Citation markers and the coverage head in a model's text: stripping `[n]` markers from a
//! streamed answer, reading the `COVERAGE:` head line, and splitting an answer into claims with
//! the sources their markers name.

use crate::agents::directives::legal_pair;

/// Removes `[n]` / `[n, m]` citation markers (and the space before them) from text arriving in
/// pieces, holding back only what might still become a marker.
#[derive(Default)]
pub struct MarkerStripper {
    pending: String,
}

fn is_marker_prefix(s: &str) -> bool {
    // s starts with optional spaces then '['
    let t = s.trim_start_matches(' ');
    let Some(rest) = t.strip_prefix('[') else { return false };
    rest.len() <= 12 && rest.chars().all(|c| c.is_ascii_digit() || c == ',' || c == ' ')
}

fn is_marker(s: &str) -> bool {
    let t = s.trim_start_matches(' ');
    t.len() >= 3
        && t.starts_with('[')
        && t.ends_with(']')
        && t[1..t.len() - 1].split(',').all(|n| !n.trim().is_empty() && n.trim().chars().all(|c| c.is_ascii_digit()))
}

impl MarkerStripper {
    pub fn push(&mut self, piece: &str) -> String {
        let mut out = String::new();
        for ch in piece.chars() {
            self.pending.push(ch);
            loop {
                if self.pending.is_empty() {
                    break;
                }
                if is_marker(&self.pending) {
                    self.pending.clear();
                    break;
                }
                if is_marker_prefix(&self.pending) || self.pending.chars().all(|c| c == ' ') {
                    break;
                }
                // the first character cannot start a marker: release it
                let first = self.pending.remove(0);
                out.push(first);
            }
        }
        out
    }
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }
}

pub fn strip_markers(text: &str) -> String {
    let mut s = MarkerStripper::default();
    let mut out = s.push(text);
    out.push_str(&s.finish());
    out
}

/// Parses the `COVERAGE:` head line. `None` when absent or not a legal pair.
pub fn parse_head(line: &str) -> Option<(String, String)> {
    let rest = line.trim().strip_prefix("COVERAGE:").or_else(|| line.trim().strip_prefix("Coverage:"))?;
    let words: Vec<&str> =
        rest.split(|c: char| c.is_whitespace() || c == ',' || c == ';').filter(|w| !w.is_empty()).collect();
    let (c, r) = (words.first()?, words.get(1)?);
    legal_pair(c, r).then(|| (c.to_string(), r.to_string()))
}

/// Splits a model's answer (with markers) into claims: `(clean text, valid source indexes,
/// invalid marker count)`. Markers right after a sentence's end belong to that sentence.
pub fn claims(body: &str, sources: usize) -> Vec<(String, Vec<usize>, usize)> {
    let mut units: Vec<String> = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = body.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        cur.push(c);
        let end = c == '\n' || (matches!(c, '.' | '!' | '?') && chars.get(i + 1).is_none_or(|n| n.is_whitespace()));
        if end {
            // markers that follow the sentence end belong to it
            let mut j = i + 1;
            loop {
                let mut k = j;
                while k < chars.len() && chars[k] == ' ' {
                    k += 1;
                }
                if k < chars.len() && chars[k] == '[' {
                    let close = chars[k..].iter().position(|&x| x == ']').map(|p| k + p);
                    match close {
                        Some(e) if is_marker(&chars[k..=e].iter().collect::<String>()) => {
                            cur.extend(&chars[j..=e]);
                            j = e + 1;
                            continue;
                        }
                        _ => {}
                    }
                }
                break;
            }
            i = j;
            units.push(std::mem::take(&mut cur));
            continue;
        }
        i += 1;
    }
    if !cur.trim().is_empty() {
        units.push(cur);
    }
    let mut out = Vec::new();
    for u in units {
        let mut valid = Vec::new();
        let mut invalid = 0;
        let mut rest = u.as_str();
        while let Some(p) = rest.find('[') {
            let after = &rest[p..];
            match after.find(']') {
                Some(e) if is_marker(&after[..=e]) => {
                    for n in after[1..e].split(',') {
                        match n.trim().parse::<usize>() {
                            Ok(k) if k >= 1 && k <= sources => {
                                if !valid.contains(&(k - 1)) {
                                    valid.push(k - 1)
                                }
                            }
                            _ => invalid += 1,
                        }
                    }
                    rest = &after[e + 1..];
                }
                _ => rest = &after[1..],
            }
        }
        let text = strip_markers(&u).trim().to_string();
        if text.is_empty() {
            continue;
        }
        out.push((text, valid, invalid));
    }
    out
}

/// Whether a piece of an answer says enough to need a source.
pub fn is_claim(text: &str) -> bool {
    text.chars().filter(|c| c.is_alphanumeric()).count() >= 12
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_stripped_from_streamed_pieces() {
        let pieces = [
            "Returns are accepted",
            " within 30 days [",
            "1]. Refunds take",
            " five days [2, 3]",
            ". Cost is [about] 5.",
        ];
        let mut s = MarkerStripper::default();
        let mut out = String::new();
        for p in pieces {
            out.push_str(&s.push(p));
        }
        out.push_str(&s.finish());
        assert_eq!(out, "Returns are accepted within 30 days. Refunds take five days. Cost is [about] 5.");
        assert_eq!(strip_markers("A [1] b [x] c [12]"), "A b [x] c");
    }

    #[test]
    fn head_lines_take_only_legal_pairs() {
        assert_eq!(
            parse_head("COVERAGE: answered sufficient_evidence"),
            Some(("answered".into(), "sufficient_evidence".into()))
        );
        assert_eq!(
            parse_head("COVERAGE: partial, intentional_scope_boundary"),
            Some(("partial".into(), "intentional_scope_boundary".into()))
        );
        assert_eq!(parse_head("COVERAGE: answered insufficient_evidence"), None);
        assert_eq!(parse_head("The answer is"), None);
    }

    #[test]
    fn claims_count_sourced_unsourced_and_invalid() {
        let c = claims(
            "Items can be returned within 30 days. [1] Refunds are paid in five business days [2]. We also love cats. See [9].",
            2,
        );
        assert_eq!(c.len(), 4);
        assert_eq!(c[0], ("Items can be returned within 30 days.".to_string(), vec![0], 0));
        assert_eq!(c[1].1, vec![1]);
        assert!(c[2].1.is_empty());
        assert_eq!(c[3].2, 1, "a marker naming a source that was not retrieved");
    }
}
