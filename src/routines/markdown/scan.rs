//! Character-safe scanning for the routine grammar: identifiers, quoted strings, literals and the
//! quote-aware bracket matcher. Every offset returned here is a char boundary of the string it was
//! computed on (the length of a matched prefix, or a position from `char_indices`), so callers
//! slice with it safely; nothing indexes by an arbitrary byte offset.

use serde_json::{Number, Value};

/// Identifiers and refs: `[A-Za-z_][A-Za-z0-9_.-]*`, at most this many characters.
pub const MAX_ID: usize = 120;

pub fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

pub fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

/// The longest prefix of `s` that is an identifier (empty when `s` does not start with one).
pub fn ident_prefix(s: &str) -> &str {
    match s.chars().next() {
        Some(c) if is_ident_start(c) => {}
        _ => return "",
    }
    let end = s.char_indices().find(|&(_, c)| !is_ident_char(c)).map_or(s.len(), |(i, _)| i);
    &s[..end]
}

/// Whether all of `s` is an identifier (the pattern only; lengths are the validator's).
pub fn is_ident(s: &str) -> bool {
    !s.is_empty() && ident_prefix(s).len() == s.len()
}

/// Slot keys, capture keys, binding keys: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_slot_key(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(is_ident_start) && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A double-quoted string at the start of `s` (`\` escapes the next character): its unescaped
/// content and the bytes it spans, both quotes included.
pub fn quoted(s: &str) -> Option<(String, usize)> {
    let mut chars = s.char_indices();
    if chars.next()?.1 != '"' {
        return None;
    }
    let mut out = String::new();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => out.push(chars.next()?.1),
            '"' => return Some((out, i + 1)),
            c => out.push(c),
        }
    }
    None
}

/// `s` as the inside of a double-quoted string.
pub fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Comma-separated parts, trimmed, empty ones dropped.
pub fn split_list(s: &str) -> impl Iterator<Item = &str> {
    s.split(',').map(str::trim).filter(|p| !p.is_empty())
}

/// A decimal number as the grammar reads one: `[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?`, finite.
/// Integers (and integral values within ±2^53) become integer JSON numbers, so a value prints the
/// same way every time it is read back.
pub fn number(s: &str) -> Option<Number> {
    if !decimal_shape(s) {
        return None;
    }
    if s.trim_start_matches(['+', '-']).bytes().all(|b| b.is_ascii_digit())
        && let Ok(i) = s.parse::<i64>()
    {
        return Some(Number::from(i));
    }
    let f = s.parse::<f64>().ok().filter(|f| f.is_finite())?;
    const SAFE: f64 = 9_007_199_254_740_992.0;
    if f.fract() == 0.0 && f.abs() <= SAFE {
        // Exact: integral and within the safe range.
        return Some(Number::from(f as i64));
    }
    Number::from_f64(f)
}

fn decimal_shape(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let int_start = i;
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    let mut digits = i - int_start;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let frac = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        digits += i - frac;
    }
    if digits == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == exp {
            return false;
        }
    }
    i == b.len()
}

/// An integer frontmatter value (`priority`, `grammar`); empty reads as 0, as the product's
/// `Number("")` does.
pub fn integer(s: &str) -> Option<i64> {
    if s.is_empty() {
        return Some(0);
    }
    number(s)?.as_i64()
}

/// A literal as written in a guard or binding: `true`/`false`, a number, else the trimmed text.
pub fn literal(s: &str) -> Value {
    let t = s.trim();
    match t {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => number(t).map_or_else(|| Value::String(t.to_string()), Value::Number),
    }
}

/// How a literal is written back.
pub fn literal_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => number_text(n),
        Value::Bool(b) => b.to_string(),
        other => other.to_string(),
    }
}

pub fn number_text(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else if let Some(u) = n.as_u64() {
        u.to_string()
    } else {
        // Display of f64 is the shortest text that reads back to the same value.
        n.as_f64().map_or_else(|| n.to_string(), |f| f.to_string())
    }
}

/// For every `[` of `line`, the byte position of the `]` that closes it, quote-aware (inside
/// `"…"` a `]` does not close and `\` escapes the next character), or `None`. Computed right to
/// left in one pass, so a line full of brackets costs linear time.
pub struct Closes {
    opens: Vec<(usize, Option<usize>)>,
}

impl Closes {
    pub fn of(line: &str) -> Closes {
        if !line.contains('[') {
            return Closes { opens: Vec::new() };
        }
        let chars: Vec<(usize, char)> = line.char_indices().collect();
        let n = chars.len();
        // plain[k] / quoted[k]: the close found scanning from char k in that state.
        let mut plain: Vec<Option<usize>> = vec![None; n + 2];
        let mut inside: Vec<Option<usize>> = vec![None; n + 2];
        for k in (0..n).rev() {
            let (at, c) = chars[k];
            plain[k] = match c {
                '"' => inside[k + 1],
                ']' => Some(at),
                _ => plain[k + 1],
            };
            inside[k] = match c {
                '\\' => inside[k + 2],
                '"' => plain[k + 1],
                _ => inside[k + 1],
            };
        }
        let opens =
            chars.iter().enumerate().filter(|(_, (_, c))| *c == '[').map(|(k, &(at, _))| (at, plain[k + 1])).collect();
        Closes { opens }
    }

    /// The close of the `[` at byte `at`.
    pub fn of_open(&self, at: usize) -> Option<usize> {
        let i = self.opens.binary_search_by_key(&at, |&(o, _)| o).ok()?;
        self.opens[i].1
    }
}

/// `s` shortened for a message (whole characters).
pub fn clip(s: &str) -> String {
    const MAX: usize = 80;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The `{{slot.<key>}}` references in `text` (spaces allowed inside the braces), in order.
pub fn slot_refs(text: &str) -> Vec<&str> {
    brace_refs(text, &["slot."])
}

/// The names in `{{<prefix><name>}}` references of `text`, for any of `prefixes` (spaces allowed
/// inside the braces; a name is a slot-key-shaped word), in order.
pub fn brace_refs<'a>(text: &'a str, prefixes: &[&str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("{{") {
        rest = &rest[i + 2..];
        let inner = rest.trim_start();
        let Some(after) = prefixes.iter().find_map(|p| inner.strip_prefix(p)) else { continue };
        let key_len = after
            .char_indices()
            .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(after.len(), |(j, _)| j);
        let key = &after[..key_len];
        if is_slot_key(key) && after[key_len..].trim_start().starts_with("}}") {
            out.push(key);
        }
    }
    out
}

/// Splits `text` at its `{{slot.<key>}}` references: `(prose before, Some(key))` pieces, the last
/// one with `None`. Spans are exact, so the pieces join back to `text`.
pub fn split_slot_refs(text: &str) -> Vec<(&str, Option<&str>)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut from = 0;
    while let Some(i) = text[from..].find("{{").map(|i| from + i) {
        let after_open = &text[i + 2..];
        let inner = after_open.trim_start();
        let matched = inner.strip_prefix("slot.").and_then(|after| {
            let key_len = after
                .char_indices()
                .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(after.len(), |(j, _)| j);
            let key = &after[..key_len];
            let tail = after[key_len..].trim_start();
            let close = tail.strip_prefix("}}")?;
            is_slot_key(key).then(|| (key, text.len() - close.len()))
        });
        match matched {
            Some((key, end)) => {
                out.push((&text[start..i], Some(key)));
                start = end;
                from = end;
            }
            None => from = i + 2,
        }
    }
    out.push((&text[start..], None));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_and_print_stably() {
        for (s, printed) in
            [("2", "2"), ("+5", "5"), ("-0", "0"), ("1.5e3", "1500"), ("0.5", "0.5"), ("5.", "5"), (".5", "0.5")]
        {
            assert_eq!(number(s).map(|n| number_text(&n)).as_deref(), Some(printed), "{s}");
        }
        for s in ["", "1e", "0x1F", "inf", "NaN", "1.2.3", "e5", "+", "1e400"] {
            assert_eq!(number(s), None, "{s}");
        }
        assert_eq!(integer(""), Some(0));
        assert_eq!(integer("1.0"), Some(1));
        assert_eq!(integer("1.5"), None);
    }

    #[test]
    fn brackets_close_outside_quotes() {
        let line = r#"a [x "]" y] [z "\""] [q"#;
        let c = Closes::of(line);
        assert_eq!(c.of_open(2), Some(10));
        assert_eq!(c.of_open(12), Some(19));
        assert_eq!(c.of_open(21), None);
        // Outside quotes a backslash is an ordinary character.
        assert_eq!(Closes::of(r#"[z \"] x"#).of_open(0), None);
    }

    #[test]
    fn slot_refs_split_exactly() {
        let t = "Hi {{slot.a}} and {{ slot.b }}{{slot.}} {{slot.c";
        assert_eq!(slot_refs(t), ["a", "b"]);
        let parts = split_slot_refs(t);
        assert_eq!(parts, [("Hi ", Some("a")), (" and ", Some("b")), ("{{slot.}} {{slot.c", None)]);
    }

    #[test]
    fn quoted_strings_unescape() {
        assert_eq!(quoted(r#""a\"b\\c" rest"#), Some((r#"a"b\c"#.to_string(), 9)));
        assert_eq!(quoted(r#""open"#), None);
        assert_eq!(escape(r#"a"b\c"#), r#"a\"b\\c"#);
    }
}
