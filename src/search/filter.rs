//! The `metadataFilter` grammar (documented in docs/api.md):
//!
//! ```text
//! filter  := { clause, ... }                 all clauses must hold
//! clause  := "$and": [filter, ...]           every filter holds
//!          | "$or":  [filter, ...]           at least one holds
//!          | "$not": filter                  the filter does not hold
//!          | <field>: <scalar>               equality
//!          | <field>: { <op>: <value>, ... } every operator holds
//! op      := $eq $ne (scalar) | $in $nin (non-empty array of scalars, at most 100)
//!          | $gt $gte $lt $lte (number, or date "YYYY-MM-DD" / RFC 3339)
//!          | $exists (boolean)
//! field   := a metadata key; dots reach into nested objects ("address.city")
//! ```
//!
//! Range operators compare numbers with numbers and dates with dates; a value of another type
//! does not match. A malformed filter is a 400 naming the problem and its path. A filter holds at
//! most [`MAX_CLAUSES`] clauses in all (every `$and`/`$or`/`$not`, field operator and `$in`
//! value counts one) and nests at most 16 levels.

use chrono::{DateTime, NaiveDate, Utc};
use serde_json::{Map, Value};

use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    And(Vec<Filter>),
    Or(Vec<Filter>),
    Not(Box<Filter>),
    Field { path: Vec<String>, op: Op },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Eq(Value),
    Ne(Value),
    In(Vec<Value>),
    Nin(Vec<Value>),
    Range(RangeOp, Bound),
    Exists(bool),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RangeOp {
    Gt,
    Gte,
    Lt,
    Lte,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Bound {
    Number(f64),
    Date(DateTime<Utc>),
}

fn bad(path: &str, message: impl Into<String>) -> Error {
    let message = message.into();
    Error::invalid_field("metadataFilter", format!("metadataFilter is not valid at {path}: {message}"))
        .with_details(serde_json::json!({"field": "metadataFilter", "path": path, "problem": message}))
}

pub fn parse_date(s: &str) -> Option<DateTime<Utc>> {
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return d.and_hms_opt(0, 0, 0).map(|t| t.and_utc());
    }
    DateTime::parse_from_rfc3339(s).ok().map(|t| t.with_timezone(&Utc))
}

fn is_scalar(v: &Value) -> bool {
    matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null)
}

fn valid_field(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !name.starts_with('.')
        && !name.ends_with('.')
        && !name.contains("..")
}

/// The most clauses one filter may hold, counted over the whole tree.
pub const MAX_CLAUSES: usize = 500;

/// A `metadataFilter` as clients write it: JSON in the filter grammar, parsed by [`parse`].
pub type FilterJson = Value;
/// A document's metadata object, as the filter reads it: free-form JSON.
pub type MetadataObject = Map<String, Value>;

/// Parses and validates a filter.
pub fn parse(v: &FilterJson) -> Result<Filter> {
    let mut budget = MAX_CLAUSES;
    parse_at(v, "$", 0, &mut budget)
}

/// Takes `n` clauses from the budget, or fails naming the limit.
fn spend(budget: &mut usize, n: usize, path: &str) -> Result<()> {
    if n > *budget {
        return Err(bad(path, format!("the filter has too many clauses (at most {MAX_CLAUSES} in all)")));
    }
    *budget -= n;
    Ok(())
}

fn parse_at(v: &Value, path: &str, depth: usize, budget: &mut usize) -> Result<Filter> {
    if depth > 16 {
        return Err(bad(path, "the filter is nested too deeply (more than 16 levels)"));
    }
    let Value::Object(map) = v else { return Err(bad(path, "expected an object")) };
    if map.is_empty() {
        return Ok(Filter::And(vec![]));
    }
    let mut clauses = Vec::new();
    for (k, val) in map {
        let p = format!("{path}.{k}");
        spend(budget, 1, &p)?;
        match k.as_str() {
            "$and" | "$or" => {
                let Value::Array(items) = val else { return Err(bad(&p, "expected an array of filters")) };
                if items.is_empty() {
                    return Err(bad(&p, "expected at least one filter"));
                }
                let fs = items
                    .iter()
                    .enumerate()
                    .map(|(i, f)| parse_at(f, &format!("{p}[{i}]"), depth + 1, budget))
                    .collect::<Result<Vec<_>>>()?;
                clauses.push(if k == "$and" { Filter::And(fs) } else { Filter::Or(fs) });
            }
            "$not" => clauses.push(Filter::Not(Box::new(parse_at(val, &p, depth + 1, budget)?))),
            other if other.starts_with('$') => {
                return Err(bad(&p, format!("unknown operator {other}; use $and, $or, $not or a field name")));
            }
            field => {
                if !valid_field(field) {
                    return Err(bad(&p, "field names use letters, digits, '_', '-' and '.'"));
                }
                let fpath: Vec<String> = field.split('.').map(|s| s.to_string()).collect();
                match val {
                    Value::Object(ops) => {
                        if ops.is_empty() {
                            return Err(bad(&p, "expected at least one operator"));
                        }
                        for (op, arg) in ops {
                            let op_path = format!("{p}.{op}");
                            spend(budget, 1 + arg.as_array().map_or(0, Vec::len), &op_path)?;
                            clauses.push(Filter::Field { path: fpath.clone(), op: parse_op(op, arg, &op_path)? });
                        }
                    }
                    Value::Array(_) => return Err(bad(&p, "use {\"$in\": [...]} to match one of several values")),
                    scalar => clauses.push(Filter::Field { path: fpath, op: Op::Eq(scalar.clone()) }),
                }
            }
        }
    }
    if clauses.len() == 1
        && let Some(only) = clauses.pop()
    {
        return Ok(only);
    }
    Ok(Filter::And(clauses))
}

fn parse_op(op: &str, arg: &Value, p: &str) -> Result<Op> {
    Ok(match op {
        "$eq" | "$ne" => {
            if !is_scalar(arg) {
                return Err(bad(p, "expected a string, number, boolean or null"));
            }
            if op == "$eq" { Op::Eq(arg.clone()) } else { Op::Ne(arg.clone()) }
        }
        "$in" | "$nin" => {
            let Value::Array(items) = arg else { return Err(bad(p, "expected an array")) };
            if items.is_empty() || items.len() > 100 {
                return Err(bad(p, "expected 1 to 100 values"));
            }
            if !items.iter().all(is_scalar) {
                return Err(bad(p, "values must be strings, numbers, booleans or null"));
            }
            if op == "$in" { Op::In(items.clone()) } else { Op::Nin(items.clone()) }
        }
        "$gt" | "$gte" | "$lt" | "$lte" => {
            let r = match op {
                "$gt" => RangeOp::Gt,
                "$gte" => RangeOp::Gte,
                "$lt" => RangeOp::Lt,
                _ => RangeOp::Lte,
            };
            let b = match arg {
                Value::Number(n) => Bound::Number(n.as_f64().unwrap_or(f64::NAN)),
                Value::String(s) => Bound::Date(
                    parse_date(s).ok_or_else(|| bad(p, "expected a number or a date (YYYY-MM-DD or RFC 3339)"))?,
                ),
                _ => return Err(bad(p, "expected a number or a date (YYYY-MM-DD or RFC 3339)")),
            };
            Op::Range(r, b)
        }
        "$exists" => match arg {
            Value::Bool(b) => Op::Exists(*b),
            _ => return Err(bad(p, "expected true or false")),
        },
        other => {
            return Err(bad(
                p,
                format!("unknown operator {other}; use $eq, $ne, $in, $nin, $gt, $gte, $lt, $lte or $exists"),
            ));
        }
    })
}

fn lookup<'a>(meta: &'a Map<String, Value>, path: &[String]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    // a literal key with dots wins over nesting
    if let Some(v) = meta.get(&path.join(".")) {
        return Some(v);
    }
    let mut cur = meta.get(first)?;
    for k in rest {
        cur = cur.as_object()?.get(k)?;
    }
    Some(cur)
}

fn scalar_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(items), b) => items.iter().any(|i| scalar_eq(i, b)),
        _ => a == b,
    }
}

fn compare(v: &Value, r: RangeOp, b: &Bound) -> bool {
    let ord = match (v, b) {
        (Value::Number(n), Bound::Number(x)) => n.as_f64().and_then(|n| n.partial_cmp(x)),
        (Value::String(s), Bound::Date(d)) => parse_date(s).map(|t| t.cmp(d)),
        _ => None,
    };
    use std::cmp::Ordering::*;
    match (ord, r) {
        (Some(o), RangeOp::Gt) => o == Greater,
        (Some(o), RangeOp::Gte) => o != Less,
        (Some(o), RangeOp::Lt) => o == Less,
        (Some(o), RangeOp::Lte) => o != Greater,
        (None, _) => false,
    }
}

impl Filter {
    /// True when the filter matches nothing but the empty conjunction (every document matches).
    pub fn is_empty(&self) -> bool {
        matches!(self, Filter::And(v) if v.is_empty())
    }

    pub fn matches(&self, meta: &MetadataObject) -> bool {
        match self {
            Filter::And(fs) => fs.iter().all(|f| f.matches(meta)),
            Filter::Or(fs) => fs.iter().any(|f| f.matches(meta)),
            Filter::Not(f) => !f.matches(meta),
            Filter::Field { path, op } => {
                let v = lookup(meta, path);
                match op {
                    Op::Exists(want) => v.is_some_and(|v| !v.is_null()) == *want,
                    Op::Eq(x) => v.is_some_and(|v| scalar_eq(v, x)) || (x.is_null() && v.is_none()),
                    Op::Ne(x) => !(v.is_some_and(|v| scalar_eq(v, x)) || (x.is_null() && v.is_none())),
                    Op::In(xs) => v.is_some_and(|v| xs.iter().any(|x| scalar_eq(v, x))),
                    Op::Nin(xs) => !v.is_some_and(|v| xs.iter().any(|x| scalar_eq(v, x))),
                    Op::Range(r, b) => v.is_some_and(|v| match v {
                        Value::Array(items) => items.iter().any(|i| compare(i, *r, b)),
                        v => compare(v, *r, b),
                    }),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn m(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn the_grammar_matches_as_documented() {
        let doc = m(
            json!({"lang": "en", "price": 12.5, "published": "2026-03-01", "tags": ["a", "b"], "author": {"name": "Ada"}, "draft": false}),
        );
        let yes = [
            json!({}),
            json!({"lang": "en"}),
            json!({"lang": {"$in": ["fr", "en"]}}),
            json!({"lang": {"$nin": ["fr"]}}),
            json!({"price": {"$gte": 10, "$lt": 20}}),
            json!({"published": {"$gte": "2026-01-01", "$lte": "2026-12-31T23:59:59Z"}}),
            json!({"tags": "a"}),
            json!({"author.name": "Ada"}),
            json!({"draft": false}),
            json!({"missing": {"$exists": false}}),
            json!({"lang": {"$exists": true}}),
            json!({"$or": [{"lang": "fr"}, {"price": {"$gt": 12}}]}),
            json!({"$not": {"lang": "fr"}}),
            json!({"missing": null}),
            json!({"lang": {"$ne": "fr"}}),
        ];
        for f in yes {
            assert!(parse(&f).unwrap().matches(&doc), "{f}");
        }
        let no = [
            json!({"lang": "fr"}),
            json!({"price": {"$gt": 20}}),
            json!({"published": {"$lt": "2026-01-01"}}),
            json!({"lang": {"$gt": 3}}),
            json!({"$and": [{"lang": "en"}, {"draft": true}]}),
            json!({"missing": {"$exists": true}}),
        ];
        for f in no {
            assert!(!parse(&f).unwrap().matches(&doc), "{f}");
        }
    }

    #[test]
    fn malformed_filters_name_the_problem() {
        for (f, needle) in [
            (json!([1]), "expected an object"),
            (json!({"$or": {}}), "array"),
            (json!({"$xor": []}), "unknown operator"),
            (json!({"price": {"$between": [1, 2]}}), "unknown operator $between"),
            (json!({"price": {"$gt": true}}), "number or a date"),
            (json!({"when": {"$gt": "last tuesday"}}), "number or a date"),
            (json!({"lang": {"$in": []}}), "1 to 100"),
            (json!({"lang": ["en"]}), "$in"),
            (json!({"bad field!": 1}), "field names"),
            (json!({"x": {"$exists": "yes"}}), "true or false"),
        ] {
            let e = parse(&f).unwrap_err();
            assert!(e.message.contains(needle), "{f}: {}", e.message);
            assert_eq!(e.details.as_ref().unwrap()["field"], "metadataFilter");
        }
    }

    #[test]
    fn the_whole_tree_has_a_clause_budget() {
        // wide, not deep: 40 × 20 `$in` values pass the depth and per-operator limits
        let wide = |n: usize| json!({"$or": (0..n).map(|i| json!({format!("f{i}"): {"$in": (0..20).collect::<Vec<_>>()}})).collect::<Vec<_>>()});
        assert!(parse(&wide(10)).is_ok());
        let e = parse(&wide(40)).unwrap_err();
        assert!(e.message.contains("too many clauses"), "{}", e.message);
        let fields: serde_json::Map<String, Value> =
            (0..MAX_CLAUSES + 1).map(|i| (format!("k{i}"), json!(1))).collect();
        assert!(parse(&Value::Object(fields)).unwrap_err().message.contains("at most 500"));
    }
}
