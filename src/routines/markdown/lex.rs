//! One body line into tokens (reference §6), with its diagnostics. At each position, in order:
//! a target (`-> end…`, `-> handoff`, `-> step:…`), a bracket token, a `#skill` chip, an `@name`
//! mention; anything else is text. Every step consumes whole characters, so the line is only ever
//! sliced on char boundaries, and no position is scanned more than a bounded number of times
//! (brackets close through [`Closes`]), so a 1 MB line costs linear time.

use super::scan::{Closes, clip, ident_prefix, is_ident, is_ident_char, is_slot_key, literal, quoted, split_list};
use super::{Binding, Choice, Condition, Diagnostic, Gate, Segment, SkillCall, Target, Test};
use crate::routines::definition::{DateUnit, FieldOp};

/// What a position yielded: a token of this many bytes, or this many bytes of text (after a
/// diagnostic, so nothing inside a bad token is reported twice).
enum Lexed {
    Token(Segment, usize),
    Text(usize),
}

/// The tokens of `content` (a line, or a heading's text after `# `).
pub fn lex(content: &str, line: usize, diags: &mut Vec<Diagnostic>) -> Vec<Segment> {
    let closes = Closes::of(content);
    let last_close = content.rfind(']');
    let mut out: Vec<Segment> = Vec::new();
    let mut text = String::new();
    let mut i = 0;
    while let Some(rest) = content.get(i..).filter(|r| !r.is_empty()) {
        let lexed = match rest.as_bytes().first() {
            Some(b'-') if rest.starts_with("->") => arrow(rest, line, diags),
            Some(b'[') => {
                bracket(rest, content[..i].chars().next_back(), closes.of_open(i).map(|c| c - i), line, diags)
            }
            Some(b'#') => skill(rest, last_close.is_some_and(|c| c > i), line, diags),
            Some(b'@') => mention(rest).map(|(name, len)| Lexed::Token(Segment::Var(name), len)),
            _ => None,
        };
        match lexed {
            Some(Lexed::Token(seg, len)) => {
                if seg.is_target() && text.chars().all(char::is_whitespace) {
                    // Whitespace alone before a target is not prose.
                    text.clear();
                }
                if !text.is_empty() {
                    out.push(Segment::Text(std::mem::take(&mut text)));
                }
                out.push(seg);
                i += len;
            }
            Some(Lexed::Text(len)) => {
                text.push_str(&rest[..len]);
                i += len;
            }
            None => {
                let c = rest.chars().next().unwrap_or(' ');
                text.push(c);
                i += c.len_utf8();
            }
        }
    }
    if !text.is_empty() {
        out.push(Segment::Text(text));
    }
    let counter = out.iter().any(|s| matches!(s, Segment::Step { max: Some(_), .. }));
    let guarded =
        out.iter().any(|s| matches!(s, Segment::If(_) | Segment::Outcome(_) | Segment::Filled(_) | Segment::Gate(_)));
    if counter && guarded {
        diags.push(Diagnostic::new(
            line,
            "conflicting_guard_and_counter",
            "a `(max N)` loop cannot share its line with an `[if]`, `[outcome]`, `[filled]` or gate; write the bounded loop on its own line",
        ));
    }
    out
}

fn arrow(rest: &str, line: usize, diags: &mut Vec<Diagnostic>) -> Option<Lexed> {
    if let Some((seg, len)) = target(rest) {
        return Some(Lexed::Token(seg, len));
    }
    let len = bad_target(rest)?;
    diags.push(Diagnostic::new(
        line,
        "invalid_target_token",
        format!(
            "`{}` is not a target: write `-> end`, `-> end:<id>`, `-> handoff` or `-> step:<id>`",
            clip(&rest[..len])
        ),
    ));
    Some(Lexed::Text(len))
}

/// What may follow a target: end of line, whitespace, or the next arrow (so the space the
/// printer puts before an arrow never turns prose into a target).
fn delimited(s: &str) -> bool {
    s.chars().next().is_none_or(char::is_whitespace) || s.starts_with("->")
}

/// A target's id: an identifier, without a final `-` that begins the next arrow.
fn target_id(s: &str) -> &str {
    let id = ident_prefix(s);
    match id.strip_suffix('-') {
        Some(short) if !short.is_empty() && s[id.len()..].starts_with('>') => short,
        _ => id,
    }
}

/// A target written as the grammar reads it (`-> ` with one space).
fn target(rest: &str) -> Option<(Segment, usize)> {
    let r = rest.strip_prefix("-> ")?;
    let head = rest.len() - r.len();
    if let Some(after_end) = r.strip_prefix("end") {
        if let Some(named) = after_end.strip_prefix(':') {
            let id = target_id(named);
            if !id.is_empty() {
                let after_id = &named[id.len()..];
                let used = head + 4 + id.len();
                let tail = after_id.trim_start();
                if let Some(q) = tail.strip_prefix('(')
                    && let Some((message, qlen)) = quoted(q)
                    && let Some(after) = q[qlen..].strip_prefix(')')
                    && delimited(after)
                {
                    let message = Some(message.trim().to_string()).filter(|m| !m.is_empty());
                    let len = rest.len() - after.len();
                    return Some((end(id, message), len));
                }
                if delimited(after_id) {
                    return Some((end(id, None), used));
                }
            }
        }
        if delimited(after_end) {
            return Some((Segment::End { id: None, message: None }, head + 3));
        }
    }
    if let Some(after) = r.strip_prefix("handoff")
        && delimited(after)
    {
        return Some((Segment::Handoff, head + 7));
    }
    let named = r.strip_prefix("step:")?;
    let id = target_id(named);
    if id.is_empty() {
        return None;
    }
    let after_id = &named[id.len()..];
    let step_delim = |s: &str| delimited(s) || s.starts_with('(');
    if let Some((max, after)) = max_suffix(after_id)
        && step_delim(after)
    {
        return Some((Segment::Step { id: id.to_string(), max: Some(max) }, rest.len() - after.len()));
    }
    step_delim(after_id).then(|| (Segment::Step { id: id.to_string(), max: None }, head + 5 + id.len()))
}

fn end(id: &str, message: Option<String>) -> Segment {
    // `end:done` is the primary completion, as `end` is.
    if id == "done" {
        Segment::End { id: None, message: None }
    } else {
        Segment::End { id: Some(id.to_string()), message }
    }
}

/// `\s*(max\s+N)` at the start of `s`: N (saturating) and what follows the `)`.
fn max_suffix(s: &str) -> Option<(i64, &str)> {
    let r = s.trim_start().strip_prefix("(max")?;
    let digits_at = r.trim_start();
    if digits_at.len() == r.len() {
        return None;
    }
    let n = digits_at.bytes().take_while(u8::is_ascii_digit).count();
    if n == 0 {
        return None;
    }
    let after = digits_at[n..].strip_prefix(')')?;
    let max = digits_at[..n].bytes().fold(0i64, |acc, d| acc.saturating_mul(10).saturating_add(i64::from(d - b'0')));
    Some((max, after))
}

/// A target-looking `->` that is malformed (`-> handoffs`, `-> step:x)`): the bytes it spans.
/// Well-formed but unrecognized spellings (`->end`, `->  handoff`) are prose, as the reference says.
fn bad_target(rest: &str) -> Option<usize> {
    let r = rest.strip_prefix("->")?.trim_start();
    let head = rest.len() - r.len();
    let tail_of = |s: &str| {
        s.char_indices()
            .find(|&(i, c)| c.is_whitespace() || c == '(' || s[i..].starts_with("->"))
            .map_or(s.len(), |(i, _)| i)
    };
    if let Some(after) = r.strip_prefix("end") {
        let named = after.strip_prefix(':')?;
        let n = tail_of(named);
        return (n > 0 && !is_ident(&named[..n])).then_some(head + 4 + n);
    }
    if let Some(after) = r.strip_prefix("handoff") {
        let n = tail_of(after);
        return (n > 0).then_some(head + 7 + n);
    }
    let named = r.strip_prefix("step:")?;
    let n = tail_of(named);
    (n > 0 && !is_ident(&named[..n])).then_some(head + 5 + n)
}

#[derive(Clone, Copy)]
enum Family {
    If,
    Outcome,
    Filled,
    Action,
    Decision,
    Approval,
}

/// A `[` token. `close` is the offset of its quote-aware `]` in `rest`. A bracket glued to a
/// word (`x[1]`, `#skill[...]`'s own suffix aside) is prose unless it is a well-formed token.
fn bracket(
    rest: &str,
    before: Option<char>,
    close: Option<usize>,
    line: usize,
    diags: &mut Vec<Diagnostic>,
) -> Option<Lexed> {
    let glued = before.is_some_and(is_ident_char);
    let inner = &rest[1..];
    let kw_len = inner.bytes().take_while(u8::is_ascii_alphabetic).count();
    let separated = inner[kw_len..].chars().next().is_some_and(|c| c.is_whitespace() || c == ']');
    let family = if separated {
        match &inner[..kw_len] {
            "if" => Some(Family::If),
            "outcome" => Some(Family::Outcome),
            "filled" => Some(Family::Filled),
            "action" => Some(Family::Action),
            "decision" => Some(Family::Decision),
            "approval" => Some(Family::Approval),
            _ => None,
        }
    } else {
        None
    };
    if glued && family.is_none() {
        return None;
    }
    let close = close?;
    let token = rest.get(..=close).unwrap_or(rest);
    let args = rest.get(1 + kw_len..close).unwrap_or("");
    let Some(family) = family else {
        diags.push(Diagnostic::new(
            line,
            "unknown_bracket_token",
            format!("`{}` is not a routine token (brackets open `[if`, `[outcome`, `[filled`, `[action`, `[decision` or `[approval`)", clip(token)),
        ));
        return Some(Lexed::Text(close + 1));
    };
    let parsed = match family {
        Family::If => condition(args)
            .map(Segment::If)
            .ok_or(("invalid_guard_token", "expected `[if <ref>]` or `[if <ref> <operator> <value>]`")),
        Family::Outcome => {
            let status = args.trim();
            if status.is_empty() {
                Err(("invalid_guard_token", "expected `[outcome <status>]`"))
            } else {
                Ok(Segment::Outcome(status.to_string()))
            }
        }
        Family::Filled => {
            filled(args).map(Segment::Filled).ok_or(("invalid_guard_token", "expected `[filled @slot, …]`"))
        }
        Family::Action => action(args)
            .map(Segment::Action)
            .ok_or(("invalid_action_token", "expected `[action <id>]` or `[action \"<id>\"]`")),
        Family::Decision => gate(args, false)
            .map(Segment::Gate)
            .ok_or(("invalid_gate_token", "expected `[decision <key>: <id>=\"<label>\", …]`")),
        Family::Approval => gate(args, true).map(Segment::Gate).ok_or((
            "invalid_gate_token",
            "expected `[approval <key>: <id>=\"<label>\" -> <target>, …]` with a target on every option",
        )),
    };
    match parsed {
        Ok(seg) => Some(Lexed::Token(seg, close + 1)),
        Err(_) if glued => None,
        Err((code, expected)) => {
            diags.push(Diagnostic::new(line, code, format!("`{}`: {expected}", clip(token))));
            Some(Lexed::Text(close + 1))
        }
    }
}

/// Operators, longest first (each must be followed by a space or the end).
const OPS: [(&str, FieldOp); 13] = [
    ("is present", FieldOp::IsPresent),
    ("older than", FieldOp::OlderThan),
    ("is absent", FieldOp::IsAbsent),
    ("is false", FieldOp::IsFalse),
    ("is true", FieldOp::IsTrue),
    ("within", FieldOp::Within),
    ("!=", FieldOp::NotEquals),
    ("in", FieldOp::In),
    (">=", FieldOp::Gte),
    ("<=", FieldOp::Lte),
    ("=", FieldOp::Equals),
    (">", FieldOp::Gt),
    ("<", FieldOp::Lt),
];

/// How an operator is written.
pub fn op_token(op: FieldOp) -> &'static str {
    OPS.iter().find(|(_, o)| *o == op).map_or("=", |(t, _)| t)
}

fn condition(args: &str) -> Option<Condition> {
    let t = args.trim();
    let field = ident_prefix(t);
    if field.is_empty() {
        return None;
    }
    let rest = t[field.len()..].trim();
    let field = field.to_string();
    if rest.is_empty() {
        return Some(Condition { field, test: None });
    }
    let (token, op) =
        OPS.iter().find(|(tok, _)| rest.strip_prefix(tok).is_some_and(|r| r.is_empty() || r.starts_with(' ')))?;
    let tail = rest[token.len()..].trim();
    let test = match op {
        FieldOp::IsTrue | FieldOp::IsFalse | FieldOp::IsPresent | FieldOp::IsAbsent => {
            if !tail.is_empty() {
                return None;
            }
            Test::Is(*op)
        }
        _ if tail.is_empty() => return None,
        FieldOp::In => {
            let values: Vec<_> = split_list(tail).map(literal).collect();
            if values.is_empty() {
                return None;
            }
            Test::In(values)
        }
        FieldOp::OlderThan | FieldOp::Within => {
            let (amount, unit) = tail.rsplit_once(char::is_whitespace)?;
            let unit = DateUnit::parse(unit)?;
            let amount = literal(amount);
            if !amount.is_number() {
                return None;
            }
            Test::Age(*op, amount, unit)
        }
        _ => Test::Compare(*op, literal(tail)),
    };
    Some(Condition { field, test: Some(test) })
}

fn filled(args: &str) -> Option<Vec<String>> {
    let mut keys = Vec::new();
    for part in split_list(args) {
        let key = part.strip_prefix('@').unwrap_or(part);
        if !is_slot_key(key) {
            return None;
        }
        keys.push(key.to_string());
    }
    (!keys.is_empty()).then_some(keys)
}

fn action(args: &str) -> Option<String> {
    let t = args.trim();
    if t.starts_with('"') {
        let (id, len) = quoted(t)?;
        return (len == t.len() && !id.is_empty()).then_some(id);
    }
    is_ident(t).then(|| t.to_string())
}

/// `<key>: <options>` of a gate. Options are `id="label"`, an optional `("description")` and,
/// for approvals, `-> end|handoff|step:<id>`; separated by whitespace or one comma. A decision
/// option's target is read and dropped (its routing is on branch lines).
fn gate(args: &str, approval: bool) -> Option<Gate> {
    let (key, mut rest) = args.split_once(':')?;
    let key = key.trim();
    if !is_ident(key) {
        return None;
    }
    let mut options = Vec::new();
    loop {
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix(',') {
            rest = r.trim_start();
        } else if rest.is_empty() {
            break;
        }
        let id = ident_prefix(rest);
        if id.is_empty() {
            return None;
        }
        let r = rest[id.len()..].trim_start().strip_prefix('=')?.trim_start();
        let (label, n) = quoted(r)?;
        rest = &r[n..];
        let mut description = None;
        if let Some(q) = rest.trim_start().strip_prefix('(')
            && let Some((d, n)) = quoted(q)
            && let Some(after) = q[n..].strip_prefix(')')
        {
            description = Some(d).filter(|d| !d.is_empty());
            rest = after;
        }
        let mut target = None;
        if let Some(r) = rest.trim_start().strip_prefix("->") {
            let r = r.trim_start();
            let (t, after) = if let Some(a) = r.strip_prefix("end") {
                (Target::End, a)
            } else if let Some(a) = r.strip_prefix("handoff") {
                (Target::Handoff, a)
            } else {
                let named = r.strip_prefix("step:")?;
                let id = ident_prefix(named);
                if id.is_empty() {
                    return None;
                }
                (Target::Step(id.to_string()), &named[id.len()..])
            };
            target = Some(t);
            rest = after;
        }
        if approval && target.is_none() {
            return None;
        }
        options.push(Choice { id: id.to_string(), label, description, target: target.filter(|_| approval) });
    }
    (!options.is_empty()).then(|| Gate { approval, key: key.to_string(), options })
}

/// `@name`: the name (trailing `.,;:!?` are prose unless a `[` follows) and the bytes used.
fn mention(rest: &str) -> Option<(String, usize)> {
    let name = mention_name(&rest[1..])?;
    Some((name.to_string(), 1 + name.len()))
}

fn mention_name(s: &str) -> Option<&str> {
    let raw = ident_prefix(s);
    if raw.is_empty() {
        return None;
    }
    if s[raw.len()..].starts_with('[') { Some(raw) } else { Some(raw.trim_end_matches(['.', ',', ';', ':', '!', '?'])) }
}

/// `#name` with an optional `[in …; out …; mode …]` suffix. `has_close` says whether a `]`
/// follows somewhere on the line (so a line of `#a[#a[…` is not searched again and again).
fn skill(rest: &str, has_close: bool, line: usize, diags: &mut Vec<Diagnostic>) -> Option<Lexed> {
    let name = mention_name(&rest[1..])?;
    let used = 1 + name.len();
    let bare = Lexed::Token(Segment::Skill(SkillCall { name: name.to_string(), ..SkillCall::default() }), used);
    let Some(after) = rest[used..].strip_prefix('[').filter(|_| has_close) else { return Some(bare) };
    let Some(close) = after.find(']') else { return Some(bare) };
    let total = used + 1 + close + 1;
    match suffix(&after[..close]) {
        Ok((inputs, outputs, untyped)) => {
            Some(Lexed::Token(Segment::Skill(SkillCall { name: name.to_string(), inputs, outputs, untyped }), total))
        }
        Err(why) => {
            diags.push(Diagnostic::new(
                line,
                "invalid_skill_binding_suffix",
                format!(
                    "`{}`: {why} (expected `[in key=value, …; out key=@slot, …; mode typed|untyped]`)",
                    clip(&rest[..total])
                ),
            ));
            Some(Lexed::Text(total))
        }
    }
}

type Bindings = (Vec<(String, Binding)>, Vec<(String, String)>, bool);

fn suffix(s: &str) -> Result<Bindings, String> {
    let (mut inputs, mut outputs, mut untyped) =
        (Vec::<(String, Binding)>::new(), Vec::<(String, String)>::new(), false);
    for section in s.split(';') {
        let t = section.trim();
        if t.is_empty() {
            return Err("an empty section".into());
        }
        if let Some(pairs) = t.strip_prefix("in ") {
            for pair in split_list(pairs) {
                let (key, value) = pair.split_once('=').map(|(k, v)| (k.trim(), v.trim())).unwrap_or(("", ""));
                if !is_slot_key(key) || value.is_empty() {
                    return Err(format!("`{}` is not `key=value`", clip(pair)));
                }
                if inputs.iter().any(|(k, _)| k == key) {
                    return Err(format!("input `{key}` is bound twice"));
                }
                let binding = if let Some(slot) = value.strip_prefix('@') {
                    Binding::Slot(slot.to_string())
                } else if let Some(var) = value.strip_prefix("ctx.") {
                    Binding::Context(var.to_string())
                } else {
                    Binding::Literal(literal(value))
                };
                if let Binding::Slot(n) | Binding::Context(n) = &binding
                    && !is_slot_key(n)
                {
                    return Err(format!("`{}` does not name a slot or context variable", clip(value)));
                }
                inputs.push((key.to_string(), binding));
            }
        } else if let Some(pairs) = t.strip_prefix("out ") {
            for pair in split_list(pairs) {
                let (key, value) = pair.split_once('=').map(|(k, v)| (k.trim(), v.trim())).unwrap_or(("", ""));
                match value.strip_prefix('@') {
                    Some(slot) if is_slot_key(key) && is_slot_key(slot) => {
                        if outputs.iter().any(|(k, _)| k == key) {
                            return Err(format!("output `{key}` is assigned twice"));
                        }
                        outputs.push((key.to_string(), slot.to_string()));
                    }
                    _ => return Err(format!("`{}` is not `output=@slot`", clip(pair))),
                }
            }
        } else if let Some(mode) = t.strip_prefix("mode ") {
            untyped = match mode.trim() {
                "typed" => false,
                "untyped" => true,
                other => return Err(format!("unknown mode `{}`", clip(other))),
            };
        } else {
            return Err(format!("`{}` does not start with `in `, `out ` or `mode `", clip(t)));
        }
    }
    Ok((inputs, outputs, untyped))
}
