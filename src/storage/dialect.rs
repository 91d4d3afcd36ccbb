//! A store's SQL, written for SQLite, as PostgreSQL reads it (docs/scale-out.md, section 2):
//! placeholders `?N` and `?` become `$N` (a bare `?` takes the next number after the largest so
//! far, as in SQLite), and the few SQLite spellings the stores use get PostgreSQL's. String
//! literals, quoted identifiers and comments are never rewritten.

use std::sync::LazyLock;

use regex::Regex;

/// A statement in PostgreSQL's dialect, how many parameters it takes, and whether it writes a
/// row of an identity table (which authentication caches depend on: `Db::identity_generation`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Translated {
    pub sql: String,
    pub params: usize,
    pub writes_identity: bool,
}

/// Marks a masked literal in the text the rewrites see (never in SQL: a control character).
const MASK: char = '\u{1}';

/// Translates `sql`.
pub fn to_postgres(sql: &str) -> Translated {
    let (masked, literals, params) = mask(sql);
    let mut text = rewrite(&masked);
    // put the literals back, in order
    let mut out = String::with_capacity(text.len() + literals.iter().map(String::len).sum::<usize>());
    let mut lits = literals.into_iter();
    for ch in text.drain(..) {
        if ch == MASK {
            out.push_str(&lits.next().unwrap_or_default());
        } else {
            out.push(ch);
        }
    }
    let writes_identity =
        WRITE_TARGET.captures_iter(&masked).any(|c| super::IDENTITY_TABLES.contains(&c[1].to_lowercase().as_str()));
    Translated { sql: out, params, writes_identity }
}

/// Numbers the placeholders and takes every literal, quoted identifier and comment out of the
/// text (each leaves one `MASK`).
fn mask(sql: &str) -> (String, Vec<String>, usize) {
    let chars: Vec<char> = sql.chars().collect();
    let (mut out, mut literals, mut max) = (String::with_capacity(sql.len()), Vec::new(), 0usize);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\'' | '"' => {
                let start = i;
                i += 1;
                while i < chars.len() {
                    if chars[i] == c {
                        // a doubled quote is an escaped one
                        if chars.get(i + 1) == Some(&c) {
                            i += 2;
                            continue;
                        }
                        break;
                    }
                    i += 1;
                }
                let end = (i + 1).min(chars.len());
                literals.push(chars[start..end].iter().collect());
                out.push(MASK);
                i = end;
            }
            '-' if chars.get(i + 1) == Some(&'-') => {
                let start = i;
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                literals.push(chars[start..i].iter().collect());
                out.push(MASK);
            }
            '/' if chars.get(i + 1) == Some(&'*') => {
                let start = i;
                i += 2;
                while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                    i += 1;
                }
                let end = (i + 2).min(chars.len());
                literals.push(chars[start..end].iter().collect());
                out.push(MASK);
                i = end;
            }
            '?' => {
                let mut j = i + 1;
                while j < chars.len() && chars[j].is_ascii_digit() {
                    j += 1;
                }
                let n = if j > i + 1 {
                    chars[i + 1..j].iter().collect::<String>().parse().unwrap_or(max + 1)
                } else {
                    max + 1
                };
                max = max.max(n);
                out.push('$');
                out.push_str(&n.to_string());
                i = j;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    (out, literals, max)
}

fn re(pattern: &str) -> Regex {
    // the patterns are constants of this file, checked by its tests
    #[allow(clippy::unwrap_used, reason = "constant patterns, compiled by the tests")]
    Regex::new(pattern).unwrap()
}

/// The table an `INSERT`, `UPDATE` or `DELETE` writes.
static WRITE_TARGET: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)\b(?:INSERT(?:\s+OR\s+\w+)?\s+INTO|REPLACE\s+INTO|UPDATE(?:\s+OR\s+\w+)?|DELETE\s+FROM)\s+(\w+)")
});
static INSERT_OR_IGNORE: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\bINSERT\s+OR\s+IGNORE\s+INTO\b"));
static RETURNING: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\bRETURNING\b"));
static JSON_EACH: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\bjson_each\(\s*([^()]+?)\s*\)"));
static LENGTH_AS_BLOB: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\blength\(\s*CAST\(\s*([^()]+?)\s+AS\s+BLOB\s*\)\s*\)"));
/// A top-level comparison in an argument: the argument is a condition (SQLite sums them as 0/1).
static CONDITION: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)(=|<|>|\bIN\b|\bIS\b|\bLIKE\b|\bNOT\b|\bEXISTS\b)"));
static INSTR: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\binstr\("));
static AS_REAL: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\bAS\s+REAL\)"));
/// `IS [NOT] x` where x is not NULL, TRUE or FALSE: SQLite's null-safe comparison.
static IS_VALUE: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\bIS(\s+NOT)?\s+([A-Za-z_][A-Za-z_0-9.]*|\$\d+|\(|\x01|-?\d)"));
/// SQLite's unary `+` before a column (it keeps the planner off that column's index).
static UNARY_PLUS: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)(\bWHERE|\bAND|\bOR|\bON|\()\s*\+([A-Za-z_][A-Za-z_0-9]*(\.[A-Za-z_][A-Za-z_0-9]*)?)"));
/// A parameter used as a condition (`CASE WHEN ?3 THEN`): SQLite takes 0/1.
static WHEN_PARAM: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\bWHEN\s+(\$\d+)\s+THEN\b"));
static LIMIT_ALL: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\bLIMIT\s+-1\b"));

/// SQLite's spellings, PostgreSQL's way, on text with its literals masked.
fn rewrite(text: &str) -> String {
    let mut s = text.to_string();
    if INSERT_OR_IGNORE.is_match(&s) {
        s = INSERT_OR_IGNORE.replace_all(&s, "INSERT INTO").into_owned();
        let body = s.trim_end().trim_end_matches(';').trim_end().to_string();
        s = match RETURNING.find(&body) {
            Some(m) => format!("{} ON CONFLICT DO NOTHING {}", body[..m.start()].trim_end(), &body[m.start()..]),
            None => format!("{body} ON CONFLICT DO NOTHING"),
        };
    }
    s = JSON_EACH.replace_all(&s, "json_array_elements_text(($1)::json)").into_owned();
    s = LENGTH_AS_BLOB.replace_all(&s, "octet_length($1)").into_owned();
    s = calls(&s, &|name, args| {
        let lower = name.to_ascii_lowercase();
        match (lower.as_str(), args) {
            // the scalar max/min of SQLite (two or more arguments)
            ("max", [_, _, ..]) => Some(format!("GREATEST({})", args.join(","))),
            ("min", [_, _, ..]) => Some(format!("LEAST({})", args.join(","))),
            ("sum", [arg]) if is_condition(arg) => Some(format!("sum(CASE WHEN {} THEN 1 ELSE 0 END)", arg.trim())),
            ("json_extract", [doc, path]) => Some(format!(
                "(jsonb_path_query_first(({})::jsonb, ({})::jsonpath) #>> '{{}}')",
                doc.trim(),
                path.trim()
            )),
            ("json_patch", [doc, patch]) => {
                Some(format!("(jsonb_strip_nulls(({})::jsonb || ({})::jsonb)::text)", doc.trim(), patch.trim()))
            }
            _ => None,
        }
    });
    s = INSTR.replace_all(&s, "strpos(").into_owned();
    s = AS_REAL.replace_all(&s, "AS DOUBLE PRECISION)").into_owned();
    s = IS_VALUE
        .replace_all(&s, |c: &regex::Captures<'_>| {
            let next = &c[2];
            if ["NULL", "TRUE", "FALSE", "DISTINCT", "NOT"].iter().any(|w| next.eq_ignore_ascii_case(w)) {
                return c[0].to_string();
            }
            let op = if c.get(1).is_some() { "IS DISTINCT FROM" } else { "IS NOT DISTINCT FROM" };
            format!("{op} {next}")
        })
        .into_owned();
    s = LIMIT_ALL.replace_all(&s, "LIMIT ALL").into_owned();
    s = WHEN_PARAM.replace_all(&s, "WHEN ($1)::bigint <> 0 THEN").into_owned();
    s = UNARY_PLUS.replace_all(&s, "$1 $2").into_owned();
    s
}

/// `text` with every function call `f` rewrites replaced, innermost first (`f` gets the name as
/// written and the arguments, already rewritten; `None` keeps the call). The text has its
/// literals masked, so parentheses balance.
fn calls(text: &str, f: &dyn Fn(&str, &[String]) -> Option<String>) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let starts_word = c.is_ascii_alphabetic() && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == '_'));
        if starts_word {
            let mut j = i;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == '_') {
                j += 1;
            }
            let name: String = b[i..j].iter().collect();
            if j < b.len() && b[j] == '(' {
                // the matching parenthesis
                let (mut depth, mut k) = (0i32, j);
                while k < b.len() {
                    match b[k] {
                        '(' => depth += 1,
                        ')' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    k += 1;
                }
                if k < b.len() {
                    let inner: String = b[j + 1..k].iter().collect();
                    let args: Vec<String> = split_args(&inner).iter().map(|a| calls(a, f)).collect();
                    match f(&name, &args) {
                        Some(r) => out.push_str(&r),
                        None => {
                            out.push_str(&name);
                            out.push('(');
                            out.push_str(&args.join(","));
                            out.push(')');
                        }
                    }
                    i = k + 1;
                    continue;
                }
            }
            out.push_str(&name);
            i = j;
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

/// The arguments of a call, split at its top-level commas.
fn split_args(inner: &str) -> Vec<String> {
    let (mut args, mut cur, mut depth) = (Vec::new(), String::new(), 0i32);
    for c in inner.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                args.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() || !args.is_empty() {
        args.push(cur);
    }
    args
}

/// True when a call's argument is a condition (a comparison at its top level, not a CASE).
fn is_condition(arg: &str) -> bool {
    let t = arg.trim_start();
    !t.get(..4).is_some_and(|w| w.eq_ignore_ascii_case("case")) && CONDITION.is_match(&top_level(arg))
}

/// `text` without what is inside its parentheses (to look at its top level only).
fn top_level(text: &str) -> String {
    let mut depth = 0i32;
    text.chars()
        .filter(|c| {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    return false;
                }
                _ => {}
            }
            depth == 0
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn pg(sql: &str) -> String {
        to_postgres(sql).sql
    }

    #[test]
    fn placeholders_are_numbered_as_sqlite_numbers_them() {
        assert_eq!(
            to_postgres("SELECT a FROM t WHERE b = ?1 AND c = ?2 OR d = ?1"),
            Translated {
                sql: "SELECT a FROM t WHERE b = $1 AND c = $2 OR d = $1".into(),
                params: 2,
                writes_identity: false
            }
        );
        assert_eq!(
            to_postgres("WHERE a = ? AND b = ? AND c = ?"),
            Translated { sql: "WHERE a = $1 AND b = $2 AND c = $3".into(), params: 3, writes_identity: false }
        );
        assert_eq!(to_postgres("WHERE a = ?3 AND b = ?").sql, "WHERE a = $3 AND b = $4");
        assert_eq!(to_postgres("SELECT 1").params, 0);
    }

    #[test]
    fn literals_identifiers_and_comments_are_left_alone() {
        assert_eq!(
            pg("SELECT '?1', \"a?b\", 'it''s ?' FROM t WHERE x = ?1"),
            "SELECT '?1', \"a?b\", 'it''s ?' FROM t WHERE x = $1"
        );
        assert_eq!(
            pg("SELECT 'INSERT OR IGNORE INTO x' -- json_each(?)\n, ?"),
            "SELECT 'INSERT OR IGNORE INTO x' -- json_each(?)\n, $1"
        );
        assert_eq!(pg("SELECT /* max(a, b) ? */ max(a, b)"), "SELECT /* max(a, b) ? */ GREATEST(a, b)");
        assert_eq!(pg("SELECT 'unterminated"), "SELECT 'unterminated");
    }

    #[test]
    fn sqlite_spellings_become_postgresql_ones() {
        assert_eq!(
            pg("INSERT OR IGNORE INTO t (a) VALUES (?1)"),
            "INSERT INTO t (a) VALUES ($1) ON CONFLICT DO NOTHING"
        );
        assert_eq!(
            pg("INSERT OR IGNORE INTO t (a) VALUES (?1) RETURNING a;"),
            "INSERT INTO t (a) VALUES ($1) ON CONFLICT DO NOTHING RETURNING a"
        );
        assert_eq!(
            pg("WHERE kind IN (SELECT value FROM json_each(?2))"),
            "WHERE kind IN (SELECT value FROM json_array_elements_text(($2)::json))"
        );
        assert_eq!(
            pg("SET attempts = max(attempts - 1, 0), n = max(n)"),
            "SET attempts = GREATEST(attempts - 1, 0), n = max(n)"
        );
        assert_eq!(pg("WHERE instr(lower(t), lower(?)) > 0"), "WHERE strpos(lower(t), lower($1)) > 0");
        assert_eq!(pg("CAST(x AS REAL)"), "CAST(x AS DOUBLE PRECISION)");
        assert_eq!(
            pg("WHERE a IS ?2 AND b IS NOT ?3 AND c IS NULL"),
            "WHERE a IS NOT DISTINCT FROM $2 AND b IS DISTINCT FROM $3 AND c IS NULL"
        );
        assert_eq!(pg("ORDER BY id LIMIT -1 OFFSET ?2"), "ORDER BY id LIMIT ALL OFFSET $2");
        assert_eq!(pg("x = CASE WHEN ?3 THEN ?4 ELSE x END"), "x = CASE WHEN ($3)::bigint <> 0 THEN $4 ELSE x END");
        assert_eq!(
            pg("WHERE +c.workspace_id = ?1 AND +kind = 'a' AND n = a + b"),
            "WHERE c.workspace_id = $1 AND kind = 'a' AND n = a + b"
        );
    }

    #[test]
    fn writes_to_identity_tables_are_told_apart() {
        for sql in [
            "UPDATE api_tokens SET last_used_at = ?2 WHERE id = ?1",
            "INSERT INTO sessions (id, user_id) VALUES (?1, ?2)",
            "delete from Memberships where user_id = ?1",
            "INSERT OR REPLACE INTO users (id) VALUES (?1)",
            "WITH gone AS (DELETE FROM workspaces WHERE id = ?1 RETURNING id) SELECT count(*) FROM gone",
        ] {
            assert!(to_postgres(sql).writes_identity, "{sql}");
        }
        for sql in [
            "SELECT * FROM users WHERE id = ?1",
            "UPDATE user_settings SET v = ?2",
            "INSERT INTO audit_events (kind) VALUES ('UPDATE users')",
            "INSERT INTO t (a) VALUES (?1) ON CONFLICT (a) DO UPDATE SET a = excluded.a",
        ] {
            assert!(!to_postgres(sql).writes_identity, "{sql}");
        }
    }

    proptest! {
        #[test]
        fn any_text_translates_without_panicking_and_keeps_its_literals(
            sql in "[a-zA-Z0-9 ?'\"(),;*/\\-\n$]{0,80}",
            lit in "[a-z ?()]{0,12}",
        ) {
            let out = to_postgres(&sql);
            prop_assert!(!out.sql.contains(MASK));
            let quoted = format!("SELECT '{lit}' , ?");
            let t = to_postgres(&quoted);
            prop_assert_eq!(t.sql, format!("SELECT '{lit}' , $1"));
            prop_assert_eq!(t.params, 1);
        }
    }
}
