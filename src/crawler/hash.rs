//! Content fingerprint for near-exact duplicate detection: pages whose text
//! differs only in whitespace or letter case hash the same.

use sha2::{Digest, Sha256};

/// Hex SHA-256 of `text` after case folding and whitespace normalization
/// (every whitespace run becomes one space, none at either end).
///
/// Case is folded per character as lower(upper(c)), repeated until stable,
/// rather than a plain `to_lowercase`: that makes `ß`/`SS`/`ss`, `ς`/`σ`/`Σ`
/// and similar pairs agree, so the hash is invariant under both
/// `to_uppercase` and `to_lowercase` of the input. Punctuation is kept.
pub fn normalized_content_hash(text: &str) -> String {
    let mut hasher = Sha256::new();
    let mut buf = [0u8; 4];
    let mut first = true;
    for word in text.split_whitespace() {
        if !first {
            hasher.update(b" ");
        }
        first = false;
        for c in word.chars() {
            for folded in fold(c) {
                hasher.update(folded.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    hex::encode(hasher.finalize())
}

/// Simple full case folding of one char, without context rules (so the
/// Greek final sigma folds like any sigma).
fn fold(c: char) -> Vec<char> {
    if c.is_ascii() {
        return vec![c.to_ascii_lowercase()];
    }
    let mut cur = vec![c];
    // Three rounds reach a fixed point for every Unicode mapping in practice
    // (e.g. ẞ → ß → ss); the bound keeps hostile input linear.
    for _ in 0..3 {
        let next: Vec<char> = cur.iter().flat_map(|ch| ch.to_uppercase()).flat_map(|ch| ch.to_lowercase()).collect();
        if next == cur {
            break;
        }
        cur = next;
    }
    cur
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values() {
        // SHA-256("hello world")
        assert_eq!(
            normalized_content_hash("  Hello \t\n  WORLD \u{a0}"),
            "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"
        );
        // SHA-256("")
        assert_eq!(
            normalized_content_hash(" \n\t "),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn invariance_table() {
        let same = [
            ("Straße", "STRASSE"),
            ("ΣΟΦΟΣ", "σοφος"),
            ("σοφοσ", "σοφος"),
            ("İstanbul", "i\u{307}stanbul"),
            ("a\r\nb", "a b"),
            ("x\u{2003}\u{3000}y", "X Y"),
        ];
        for (a, b) in same {
            assert_eq!(normalized_content_hash(a), normalized_content_hash(b), "{a} vs {b}");
        }
        let different = [("a b", "ab"), ("a.b", "a b"), ("résumé", "resume")];
        for (a, b) in different {
            assert_ne!(normalized_content_hash(a), normalized_content_hash(b), "{a} vs {b}");
        }
    }

    fn respace(s: &str, seps: &[&str]) -> String {
        let mut out = String::from(seps[0]);
        for (i, w) in s.split_whitespace().enumerate() {
            out.push_str(w);
            out.push_str(seps[(i + 1) % seps.len()]);
        }
        out
    }

    proptest! {
        #[test]
        fn invariant_to_case_and_whitespace(
            s in "(\\PC|[ \t\n\u{a0}\u{2028}ßẞςΣİı\u{1F600}\u{200f}\u{0301}]){0,64}",
            sep_idx in proptest::collection::vec(0usize..5, 1..4),
        ) {
            let pool = [" ", "  ", "\n\t", "\u{3000}", "\r\n \u{a0}"];
            let seps: Vec<&str> = sep_idx.iter().map(|i| pool[*i]).collect();
            let h = normalized_content_hash(&s);
            prop_assert_eq!(&h, &normalized_content_hash(&s.to_uppercase()));
            prop_assert_eq!(&h, &normalized_content_hash(&s.to_lowercase()));
            prop_assert_eq!(&h, &normalized_content_hash(&respace(&s, &seps)));
            prop_assert_eq!(h.len(), 64);
        }

        #[test]
        fn arbitrary_strings_hash(s in any::<String>()) {
            prop_assert_eq!(normalized_content_hash(&s).len(), 64);
        }
    }
}
