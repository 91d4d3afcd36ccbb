//! The canonical text of a [`Document`] (reference §2 emission rules and order, §4 `vars`, §6
//! token spellings): `\n` line ends, exactly one trailing newline, one space before `->` when
//! the text before it does not already end in whitespace.

use std::collections::HashSet;
use std::fmt::Write as _;

use super::lex::op_token;
use super::scan::{escape, is_ident, literal_text};
use super::{Binding, Choice, Condition, Document, Gate, Segment, SkillCall, Target, TerminalSpec, Test};
use crate::routines::definition::{ReentryMode, SlotType};

/// The canonical text of `doc`.
pub fn serialize(doc: &Document) -> String {
    let referenced: HashSet<String> = doc.referenced().into_iter().collect();
    let mut out = String::from("---\ngrammar: 1\n");
    let _ = writeln!(out, "name: {}", doc.name);
    let _ = writeln!(out, "trigger: {}", doc.trigger);
    if doc.reentry != ReentryMode::OncePerConversation {
        let _ = writeln!(out, "reentry: {}", doc.reentry);
    }
    if doc.priority != 0 {
        let _ = writeln!(out, "priority: {}", doc.priority);
    }
    if let Some(e) = &doc.export {
        let kinds: Vec<&str> = e.kinds.iter().map(|k| k.as_str()).collect();
        let _ = writeln!(out, "export: {} -> {}", kinds.join(","), e.destination);
    }
    terminal_line(&mut out, "end", "done", doc.end.as_ref());
    terminal_line(&mut out, "handoff", "handoff", doc.handoff.as_ref());
    let declared: Vec<String> = doc
        .vars
        .iter()
        .filter(|v| !referenced.contains(&v.key) || v.slot_type != SlotType::Text || v.optional || v.mutable)
        .map(|v| {
            let mut d = format!("{}:{}", v.key, v.slot_type);
            if v.optional {
                d.push_str(":optional");
            }
            if v.mutable {
                d.push_str(":mutable");
            }
            d
        })
        .collect();
    if !declared.is_empty() {
        let _ = writeln!(out, "vars: {}", declared.join(", "));
    }
    out.push_str("---\n");
    for line in &doc.lines {
        if line.heading {
            out.push_str("# ");
        }
        out.push_str(&line_text(&line.segments));
        out.push('\n');
    }
    out
}

fn terminal_line(out: &mut String, key: &str, default_id: &str, spec: Option<&TerminalSpec>) {
    let Some(t) = spec else { return };
    if t.id == default_id && t.message.is_none() {
        return;
    }
    let _ = write!(out, "{key}: {}", t.id);
    if let Some(m) = &t.message {
        let _ = write!(out, " (\"{}\")", escape(m));
    }
    out.push('\n');
}

/// A line's tokens as text.
pub fn line_text(segments: &[Segment]) -> String {
    let mut body = String::new();
    for seg in segments {
        let token = token(seg);
        if token.starts_with("->") && !body.is_empty() && !body.ends_with(char::is_whitespace) {
            body.push(' ');
        }
        body.push_str(&token);
    }
    body
}

fn token(seg: &Segment) -> String {
    match seg {
        Segment::Text(t) => t.clone(),
        Segment::Var(n) => format!("@{n}"),
        Segment::Skill(s) => skill(s),
        Segment::Action(id) if is_ident(id) => format!("[action {id}]"),
        Segment::Action(id) => format!("[action \"{}\"]", escape(id)),
        Segment::If(c) => condition(c),
        Segment::Outcome(s) => format!("[outcome {s}]"),
        Segment::Filled(keys) => {
            let keys: Vec<String> = keys.iter().map(|k| format!("@{k}")).collect();
            format!("[filled {}]", keys.join(", "))
        }
        Segment::Gate(g) => gate(g),
        Segment::End { id: None, .. } => "-> end".into(),
        Segment::End { id: Some(id), message } => match message {
            Some(m) => format!("-> end:{id} (\"{}\")", escape(m)),
            None => format!("-> end:{id}"),
        },
        Segment::Handoff => "-> handoff".into(),
        Segment::Step { id, max: Some(n) } => format!("-> step:{id} (max {n})"),
        Segment::Step { id, max: None } => format!("-> step:{id}"),
    }
}

fn skill(s: &SkillCall) -> String {
    let mut sections = Vec::new();
    if !s.inputs.is_empty() {
        let pairs: Vec<String> = s
            .inputs
            .iter()
            .map(|(k, b)| match b {
                Binding::Slot(n) => format!("{k}=@{n}"),
                Binding::Context(n) => format!("{k}=ctx.{n}"),
                Binding::Literal(v) => format!("{k}={}", literal_text(v)),
            })
            .collect();
        sections.push(format!("in {}", pairs.join(", ")));
    }
    if !s.outputs.is_empty() {
        let pairs: Vec<String> = s.outputs.iter().map(|(k, slot)| format!("{k}=@{slot}")).collect();
        sections.push(format!("out {}", pairs.join(", ")));
    }
    if s.untyped {
        sections.push("mode untyped".into());
    }
    if sections.is_empty() { format!("#{}", s.name) } else { format!("#{}[{}]", s.name, sections.join("; ")) }
}

fn condition(c: &Condition) -> String {
    match &c.test {
        None => format!("[if {}]", c.field),
        Some(Test::Is(op)) => format!("[if {} {}]", c.field, op_token(*op)),
        Some(Test::Compare(op, v)) => format!("[if {} {} {}]", c.field, op_token(*op), literal_text(v)),
        Some(Test::In(values)) => {
            let values: Vec<String> = values.iter().map(literal_text).collect();
            format!("[if {} in {}]", c.field, values.join(", "))
        }
        Some(Test::Age(op, v, unit)) => format!("[if {} {} {} {unit}]", c.field, op_token(*op), literal_text(v)),
    }
}

fn gate(g: &Gate) -> String {
    let options: Vec<String> = g.options.iter().map(|o| option(o, g.approval)).collect();
    format!("[{} {}: {}]", if g.approval { "approval" } else { "decision" }, g.key, options.join(", "))
}

fn option(o: &Choice, approval: bool) -> String {
    let mut s = format!("{}=\"{}\"", o.id, escape(&o.label));
    if let Some(d) = &o.description {
        let _ = write!(s, " (\"{}\")", escape(d));
    }
    if approval {
        match &o.target {
            Some(Target::End) => s.push_str(" -> end"),
            Some(Target::Handoff) => s.push_str(" -> handoff"),
            Some(Target::Step(id)) => {
                let _ = write!(s, " -> step:{id}");
            }
            None => {}
        }
    }
    s
}
