//! Typed slot values: the checks a value must pass to be stored, and deterministic extraction of
//! values from a visitor's message (emails, numbers, dates in common formats, yes/no), so routines
//! work with no chat model at all.
//!
//! Extraction is deliberately conservative: it takes what the message plainly says. A text slot
//! takes the words after its own name ("order ref A-123") or, when it is the only thing the step
//! still needs, the whole message.

use chrono::{Datelike, NaiveDate};
use serde_json::Value;

use super::definition::SlotType;

/// A slot's value: a JSON scalar (string, number or boolean), as the routine's variables, guards
/// and exports carry it.
pub type SlotValue = Value;

/// Why a value was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// An object or array.
    NotScalar,
    /// Not a value of the slot's type.
    TypeMismatch,
}

/// `^[^\s@]+@[^\s@.]+(\.[^\s@.]+)+$`
pub fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else { return false };
    let clean = |p: &str| !p.is_empty() && !p.chars().any(|c| c.is_whitespace() || c == '@');
    if !clean(local) || !clean(domain) {
        return false;
    }
    let labels: Vec<&str> = domain.split('.').collect();
    labels.len() >= 2 && labels.iter().all(|l| !l.is_empty())
}

/// A value checked against a slot type and stored as the reference says: text → trimmed string,
/// number → number, boolean → bool, email → string, date → `YYYY-MM-DD`. Blank is `Ok(None)` (not
/// given).
pub fn check(t: SlotType, v: &SlotValue) -> Result<Option<SlotValue>, Refusal> {
    match v {
        Value::Null => return Ok(None),
        Value::Object(_) | Value::Array(_) => return Err(Refusal::NotScalar),
        Value::String(s) if s.trim().is_empty() => return Ok(None),
        _ => {}
    }
    let text = match v {
        Value::String(s) => s.trim().to_string(),
        other => other.to_string(),
    };
    match t {
        SlotType::Text => Ok(Some(Value::String(text))),
        SlotType::Number => match v {
            Value::Number(_) => Ok(Some(v.clone())),
            _ if is_number(&text) => text.parse::<f64>().ok().and_then(number).map(Some).ok_or(Refusal::TypeMismatch),
            _ => Err(Refusal::TypeMismatch),
        },
        SlotType::Boolean => match v {
            Value::Bool(_) => Ok(Some(v.clone())),
            _ => match text.to_lowercase().as_str() {
                "true" => Ok(Some(Value::Bool(true))),
                "false" => Ok(Some(Value::Bool(false))),
                _ => Err(Refusal::TypeMismatch),
            },
        },
        SlotType::Email if is_email(&text) => Ok(Some(Value::String(text))),
        SlotType::Date if NaiveDate::parse_from_str(&text, "%Y-%m-%d").is_ok() && text.len() == 10 => {
            Ok(Some(Value::String(text)))
        }
        SlotType::Email | SlotType::Date => Err(Refusal::TypeMismatch),
    }
}

/// `^-?\d+(\.\d+)?$`
fn is_number(s: &str) -> bool {
    let s = s.strip_prefix('-').unwrap_or(s);
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (s, None),
    };
    !int.is_empty()
        && int.chars().all(|c| c.is_ascii_digit())
        && frac.is_none_or(|f| !f.is_empty() && f.chars().all(|c| c.is_ascii_digit()))
}

fn number(f: f64) -> Option<Value> {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        Some(Value::from(f as i64))
    } else {
        serde_json::Number::from_f64(f).map(Value::Number)
    }
}

/// Words of a message with their byte ranges (split on whitespace; surrounding punctuation kept
/// out of the word).
fn words(text: &str) -> Vec<&str> {
    text.split_whitespace()
        .map(|w| w.trim_matches(|c: char| matches!(c, ',' | ';' | '!' | '?' | '(' | ')' | '"' | '\'' | '“' | '”')))
        .map(|w| w.trim_end_matches(['.', ':']))
        .filter(|w| !w.is_empty())
        .collect()
}

/// The first email address in the message.
pub fn find_email(text: &str) -> Option<String> {
    words(text).into_iter().find(|w| is_email(w)).map(str::to_string)
}

/// The first plain number in the message (`60`, `-2`, `12.5`, `1,200`, `€60`, `60€`); numbers
/// glued to letters (`A123`) are not amounts.
pub fn find_number(text: &str) -> Option<SlotValue> {
    for w in words(text) {
        let w = w.trim_start_matches(['$', '€', '£', '¥']).trim_end_matches(['$', '€', '£', '¥', '%']);
        let digits = w.replace(',', "");
        if is_number(&digits) && (!w.contains(',') || w.split(',').skip(1).all(|g| g.len() == 3)) {
            return digits.parse::<f64>().ok().and_then(number);
        }
    }
    None
}

/// Yes or no, when the message says one of them plainly (and not both).
pub fn find_boolean(text: &str) -> Option<bool> {
    const YES: &[&str] = &["yes", "yeah", "yep", "yup", "sure", "correct", "true", "ok", "okay", "affirmative", "y"];
    const NO: &[&str] = &["no", "nope", "nah", "false", "negative", "n", "not", "don't", "dont", "cannot", "can't"];
    let ws: Vec<String> = words(text).into_iter().map(str::to_lowercase).collect();
    let yes = ws.iter().any(|w| YES.contains(&w.as_str()));
    let no = ws.iter().any(|w| NO.contains(&w.as_str()));
    match (yes, no) {
        (true, false) => Some(true),
        (false, true) => Some(false),
        _ => None,
    }
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

fn month(w: &str) -> Option<u32> {
    let w = w.to_lowercase();
    let w = w.trim_end_matches('.');
    if w.chars().count() < 3 {
        return None;
    }
    MONTHS.iter().position(|m| m.starts_with(w) || w == *m).map(|i| i as u32 + 1)
}

fn day(w: &str) -> Option<u32> {
    let w = w.to_lowercase();
    let digits = w.trim_end_matches("st").trim_end_matches("nd").trim_end_matches("rd").trim_end_matches("th");
    digits.parse::<u32>().ok().filter(|d| (1..=31).contains(d))
}

fn year(w: &str) -> Option<i32> {
    (w.len() == 4).then(|| w.parse::<i32>().ok()).flatten().filter(|y| (1900..=2200).contains(y))
}

/// The first date in the message, as `YYYY-MM-DD`. Understood: `2026-11-24`, `24/11/2026` and
/// `24.11.2026` (day first), `November 24, 2026`, `24 November 2026`, `Nov 24 2026`, `today`,
/// `yesterday`, `tomorrow` and `N days/weeks ago` (relative to `today`).
pub fn find_date(text: &str, today: NaiveDate) -> Option<String> {
    let ws = words(text);
    let fmt = |d: NaiveDate| d.format("%Y-%m-%d").to_string();
    for (i, w) in ws.iter().enumerate() {
        if let Ok(d) = NaiveDate::parse_from_str(w, "%Y-%m-%d") {
            return Some(fmt(d));
        }
        for sep in ['/', '.'] {
            let parts: Vec<&str> = w.split(sep).collect();
            if parts.len() == 3
                && let (Some(d), Ok(m), Some(y)) = (day(parts[0]), parts[1].parse::<u32>(), year(parts[2]))
                && let Some(date) = NaiveDate::from_ymd_opt(y, m, d)
            {
                return Some(fmt(date));
            }
        }
        if let Some(m) = month(w) {
            // Month D, YYYY
            if let (Some(d), Some(y)) = (ws.get(i + 1).and_then(|x| day(x)), ws.get(i + 2).and_then(|x| year(x)))
                && let Some(date) = NaiveDate::from_ymd_opt(y, m, d)
            {
                return Some(fmt(date));
            }
            // D Month YYYY
            if let (Some(d), Some(y)) =
                (i.checked_sub(1).and_then(|k| ws.get(k)).and_then(|x| day(x)), ws.get(i + 1).and_then(|x| year(x)))
                && let Some(date) = NaiveDate::from_ymd_opt(y, m, d)
            {
                return Some(fmt(date));
            }
        }
        let lw = w.to_lowercase();
        match lw.as_str() {
            "today" => return Some(fmt(today)),
            "yesterday" => return today.pred_opt().map(fmt),
            "tomorrow" => return today.succ_opt().map(fmt),
            "ago" if i >= 2 => {
                let n = ws[i - 2].parse::<i64>().ok()?;
                let unit = ws[i - 1].to_lowercase();
                let days = match unit.trim_end_matches('s') {
                    "day" => n,
                    "week" => n.checked_mul(7)?,
                    _ => continue,
                };
                return today.checked_sub_signed(chrono::Duration::try_days(days)?).map(fmt);
            }
            _ => {}
        }
    }
    let _ = today.year();
    None
}

/// Words that introduce a value rather than being one.
const FILLERS: &[&str] = &[
    "is", "are", "was", "number", "no", "nr", "#", "=", "-", "my", "the", "a", "an", "of", "it's", "its", "id", "code",
    "it",
];

/// A text value named after the slot: the word after the slot key's last word (`order ref
/// A-123`, `ref: A-123`, `serial is SN-9`), skipping filler words.
pub fn find_named_text(text: &str, key: &str) -> Option<String> {
    let ws = words(text);
    let parts: Vec<String> = key.split('_').filter(|p| p.len() > 1).map(str::to_lowercase).collect();
    let at = ws.iter().rposition(|w| {
        let lw = w.to_lowercase();
        parts.iter().any(|p| lw == *p || lw == format!("{p}s"))
    })?;
    ws.iter()
        .skip(at + 1)
        .find(|w| !FILLERS.contains(&w.to_lowercase().as_str()) && !parts.contains(&w.to_lowercase()))
        .map(|w| w.to_string())
}

/// What a message says for a slot of type `t` (text slots: only when named, see
/// [`find_named_text`]).
pub fn extract(t: SlotType, key: &str, text: &str, today: NaiveDate) -> Option<SlotValue> {
    match t {
        SlotType::Email => find_email(text).map(Value::String),
        SlotType::Number => find_number(text),
        SlotType::Boolean => find_boolean(text).map(Value::Bool),
        SlotType::Date => find_date(text, today).map(Value::String),
        SlotType::Text => find_named_text(text, key).map(Value::String),
    }
}

/// Whether a message reads as a question (a digression when it gives nothing the step needs).
pub fn is_question(text: &str) -> bool {
    const Q: &[&str] = &[
        "what", "why", "how", "when", "where", "who", "which", "can", "could", "do", "does", "is", "are", "will",
        "would", "should", "may",
    ];
    let t = text.trim();
    t.ends_with('?') || t.split_whitespace().next().is_some_and(|w| Q.contains(&w.to_lowercase().as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn today() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 11, 24).unwrap()
    }

    #[test]
    fn checks_follow_the_reference() {
        assert_eq!(check(SlotType::Text, &json!("  hi ")), Ok(Some(json!("hi"))));
        assert_eq!(check(SlotType::Text, &json!(5)), Ok(Some(json!("5"))));
        assert_eq!(check(SlotType::Number, &json!("12.5")), Ok(Some(json!(12.5))));
        assert_eq!(check(SlotType::Number, &json!("12")), Ok(Some(json!(12))));
        assert_eq!(check(SlotType::Number, &json!("twelve")), Err(Refusal::TypeMismatch));
        assert_eq!(check(SlotType::Boolean, &json!("TRUE")), Ok(Some(json!(true))));
        assert_eq!(check(SlotType::Boolean, &json!("yes")), Err(Refusal::TypeMismatch));
        assert_eq!(check(SlotType::Email, &json!("a@b.co")), Ok(Some(json!("a@b.co"))));
        assert_eq!(check(SlotType::Email, &json!("a@b")), Err(Refusal::TypeMismatch));
        assert_eq!(check(SlotType::Date, &json!("2026-02-30")), Err(Refusal::TypeMismatch));
        assert_eq!(check(SlotType::Date, &json!("2026-02-28")), Ok(Some(json!("2026-02-28"))));
        assert_eq!(check(SlotType::Text, &json!({"a": 1})), Err(Refusal::NotScalar));
        assert_eq!(check(SlotType::Text, &json!("   ")), Ok(None));
        assert_eq!(check(SlotType::Text, &Value::Null), Ok(None));
    }

    #[test]
    fn extraction_in_common_forms() {
        assert_eq!(find_email("reach me at jo.doe@shop.example.com, thanks"), Some("jo.doe@shop.example.com".into()));
        assert_eq!(find_email("my mail is jo@localhost"), None);
        assert_eq!(find_number("order A123 for €60 please"), Some(json!(60)));
        assert_eq!(find_number("about 1,200 units"), Some(json!(1200)));
        assert_eq!(find_number("it costs 12.50"), Some(json!(12.5)));
        assert_eq!(find_number("no amount here A1"), None);
        assert_eq!(find_boolean("Yes, please"), Some(true));
        assert_eq!(find_boolean("nope"), Some(false));
        assert_eq!(find_boolean("yes and no"), None);
        let d = |s: &str| find_date(s, today());
        assert_eq!(d("bought on 2025-03-01"), Some("2025-03-01".into()));
        assert_eq!(d("bought on 1/3/2025"), Some("2025-03-01".into()));
        assert_eq!(d("on March 1, 2025"), Some("2025-03-01".into()));
        assert_eq!(d("on 1st March 2025"), Some("2025-03-01".into()));
        assert_eq!(d("Mar 1 2025"), Some("2025-03-01".into()));
        assert_eq!(d("yesterday"), Some("2026-11-23".into()));
        assert_eq!(d("2 weeks ago"), Some("2026-11-10".into()));
        assert_eq!(d("31/02/2025"), None);
        assert_eq!(d("200000000000 days ago"), None, "out of range, not a panic");
        assert_eq!(d("9223372036854775807 weeks ago"), None);
        assert_eq!(d("may I ask something"), None);
        assert_eq!(find_named_text("my order ref is A-123.", "order_ref"), Some("A-123".into()));
        assert_eq!(find_named_text("Serial: SN-99", "serial"), Some("SN-99".into()));
        assert_eq!(find_named_text("nothing here", "serial"), None);
        assert!(is_question("What are your opening hours?"));
        assert!(is_question("how do I pay"));
        assert!(!is_question("A-123"));
    }

    proptest! {
        #[test]
        fn extraction_never_panics(text in "\\PC{0,80}") {
            let _ = find_email(&text);
            let _ = find_number(&text);
            let _ = find_boolean(&text);
            let _ = find_date(&text, today());
            let _ = find_named_text(&text, "order_ref");
            let _ = is_question(&text);
            let _ = check(SlotType::Number, &Value::String(text.clone()));
            let _ = check(SlotType::Date, &Value::String(text.clone()));
        }

        #[test]
        fn an_extracted_value_passes_its_check(text in "[a-zA-Z0-9 @.,/€$-]{0,60}") {
            for t in [SlotType::Email, SlotType::Number, SlotType::Boolean, SlotType::Date] {
                if let Some(v) = extract(t, "x", &text, today()) {
                    prop_assert!(check(t, &v).is_ok_and(|x| x.is_some()), "{t:?} {v}");
                }
            }
        }
    }
}
