//! A whole document: line handling, the frontmatter (reference §1–§2, §4) and the body, with
//! every diagnostic collected.

use std::collections::{HashMap, HashSet};

use super::lex::lex;
use super::scan::{MAX_ID, clip, ident_prefix, integer, is_slot_key, quoted, split_list};
use super::{Diagnostic, Document, Export, Line, MAX_DIAGNOSTICS, TerminalSpec, VarDecl};
use crate::routines::definition::{ReentryMode, SlotType, TerminalKind};

/// Reads `content` into a [`Document`], or returns all its diagnostics (by line).
pub fn parse(content: &str) -> Result<Document, Vec<Diagnostic>> {
    // `\r\n` is a line break; so is a lone `\r` (printed before a `\n` it would read back as one).
    let text = content.replace("\r\n", "\n").replace('\r', "\n");
    let lines: Vec<&str> = text.split('\n').collect();
    let mut doc = Document::default();
    let mut diags = Vec::new();
    let mut body = 0;
    if lines.first().is_some_and(|l| l.trim() == "---") {
        let mut k = 1;
        while let Some(line) = lines.get(k).filter(|l| l.trim() != "---") {
            frontmatter_line(&mut doc, line, k + 1, &mut diags);
            k += 1;
        }
        // Without a closing fence everything after line 1 is frontmatter.
        body = (k + 1).min(lines.len());
    }
    for (k, raw) in lines.iter().enumerate().skip(body) {
        let (heading, content) = match raw.strip_prefix("# ") {
            Some(c) => (true, c),
            None => (false, *raw),
        };
        let segments = lex(content, k + 1, &mut diags);
        doc.lines.push(Line { number: k + 1, heading, segments });
    }
    while doc.lines.last().is_some_and(|l| !l.heading && l.segments.is_empty()) {
        doc.lines.pop();
    }
    if diags.is_empty() {
        return Ok(doc);
    }
    diags.sort_by_key(|d| d.line);
    diags.truncate(MAX_DIAGNOSTICS);
    Err(diags)
}

fn frontmatter_line(doc: &mut Document, line: &str, no: usize, diags: &mut Vec<Diagnostic>) {
    let Some((key, value)) = line.split_once(':') else { return };
    let (key, value) = (key.trim(), value.trim());
    match key {
        "grammar" => {
            if integer(value) != Some(1) {
                diags.push(Diagnostic::new(
                    no,
                    "unsupported_grammar_version",
                    format!("unsupported routine grammar version `{}` (only 1)", clip(value)),
                ));
            }
        }
        "name" => doc.name = value.to_string(),
        "trigger" => doc.trigger = value.to_string(),
        "reentry" => match value {
            "once" | "once_per_conversation" => doc.reentry = ReentryMode::OncePerConversation,
            "always" => doc.reentry = ReentryMode::Always,
            "semantic" => doc.reentry = ReentryMode::Semantic,
            _ => diags.push(Diagnostic::new(
                no,
                "invalid_reentry",
                format!("unknown reentry `{}` (once_per_conversation, always or semantic)", clip(value)),
            )),
        },
        "priority" => match integer(value) {
            Some(p) => doc.priority = p,
            None => diags.push(Diagnostic::new(
                no,
                "invalid_priority",
                format!("priority `{}` is not an integer", clip(value)),
            )),
        },
        "export" => match export(value) {
            Some(e) => doc.export = Some(e),
            None => diags.push(Diagnostic::new(
                no,
                "invalid_export",
                "export is `<complete|handoff|complete,handoff> -> <destinationRef>`",
            )),
        },
        "end" | "handoff" => match terminal(value) {
            Some(t) if key == "end" => doc.end = Some(t),
            Some(t) => doc.handoff = Some(t),
            None => diags.push(Diagnostic::new(
                no,
                "invalid_frontmatter",
                format!("`{key}` is `<id>` or `<id> (\"message\")`"),
            )),
        },
        "vars" => vars(doc, value, no, diags),
        _ => diags.push(Diagnostic::new(
            no,
            "unknown_frontmatter_key",
            format!(
                "unknown frontmatter key `{}` (grammar, name, trigger, reentry, priority, export, end, handoff, vars)",
                clip(key)
            ),
        )),
    }
}

/// `<kinds> -> <destinationRef>`: kinds from {complete, handoff} (first spelling of each kept,
/// in order), the destination one run of non-space characters.
fn export(value: &str) -> Option<Export> {
    let (left, right) = value.split_once("->")?;
    if !left.chars().all(|c| c.is_ascii_alphabetic() || c == '_' || c == ',' || c.is_whitespace()) {
        return None;
    }
    let destination = right.trim_start();
    if destination.is_empty() || destination.chars().any(char::is_whitespace) {
        return None;
    }
    let mut kinds = Vec::new();
    for k in split_list(left) {
        let kind = TerminalKind::parse(k)?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    (!kinds.is_empty()).then(|| Export { kinds, destination: destination.to_string() })
}

/// `<id>` or `<id> ("message")`; a blank message is no message.
pub fn terminal(value: &str) -> Option<TerminalSpec> {
    let id = ident_prefix(value);
    if id.is_empty() {
        return None;
    }
    let rest = &value[id.len()..];
    let mut message = None;
    if !rest.is_empty() {
        let q = rest.trim_start().strip_prefix('(')?;
        let (m, n) = quoted(q)?;
        if q.get(n..) != Some(")") {
            return None;
        }
        message = Some(m.trim().to_string()).filter(|m| !m.is_empty());
    }
    Some(TerminalSpec { id: id.to_string(), message })
}

/// `key:type[:flag]*, …`. A later `vars` line may declare a key again; the later declaration wins
/// (in the first one's place).
fn vars(doc: &mut Document, value: &str, no: usize, diags: &mut Vec<Diagnostic>) {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut at: HashMap<String, usize> = doc.vars.iter().enumerate().map(|(i, v)| (v.key.clone(), i)).collect();
    for decl in split_list(value) {
        let bad = |why: String| Diagnostic::new(no, "invalid_var_declaration", format!("`{}`: {why}", clip(decl)));
        let mut parts = decl.split(':').map(str::trim);
        let key = parts.next().unwrap_or("");
        if !is_slot_key(key) || key.len() > MAX_ID {
            diags.push(bad(format!("`{}` is not a slot key", clip(key))));
            continue;
        }
        if !seen.insert(key) {
            diags.push(Diagnostic::new(no, "duplicate_var_declaration", format!("`{key}` is declared twice")));
            continue;
        }
        let Some(slot_type) = parts.next().and_then(SlotType::parse) else {
            diags.push(bad("the type is one of text, number, boolean, email, date".into()));
            continue;
        };
        let (mut optional, mut mutable) = (false, false);
        let mut flags_ok = true;
        for flag in parts {
            match flag {
                "optional" => optional = true,
                "mutable" => mutable = true,
                other => {
                    diags.push(bad(format!("unknown flag `{}` (optional, mutable)", clip(other))));
                    flags_ok = false;
                    break;
                }
            }
        }
        if !flags_ok {
            continue;
        }
        let decl = VarDecl { key: key.to_string(), slot_type, optional, mutable };
        match at.get(&decl.key).and_then(|&i| doc.vars.get_mut(i)) {
            Some(v) => *v = decl,
            None => {
                at.insert(decl.key.clone(), doc.vars.len());
                doc.vars.push(decl);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminals_read_id_and_message() {
        let t = |s: &str| terminal(s).map(|t| (t.id, t.message));
        assert_eq!(t("done"), Some(("done".into(), None)));
        assert_eq!(
            t(r#"desk ("Our desk \"calls\" you.")"#),
            Some(("desk".into(), Some(r#"Our desk "calls" you."#.into())))
        );
        assert_eq!(t(r#"x("  ")"#), Some(("x".into(), None)));
        for bad in ["", "9x", "x y", r#"x ("m""#, r#"x ("m") tail"#, "x (m)"] {
            assert_eq!(t(bad), None, "{bad}");
        }
    }

    #[test]
    fn export_kinds_are_a_set_in_written_order() {
        let e = export("handoff , complete,handoff -> abc").map(|e| (e.kinds, e.destination));
        assert_eq!(e, Some((vec![TerminalKind::Handoff, TerminalKind::Complete], "abc".into())));
        for bad in ["complete", "complete -> ", "complete -> a b", "done -> x", " , -> x", "complete2 -> x"] {
            assert!(export(bad).is_none(), "{bad}");
        }
    }
}
