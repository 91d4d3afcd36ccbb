//! Portable routine markdown, grammar 1: a routine as a plain-text document that survives copy
//! and paste, version control and review. ../shared/reference/routines.md §1–§13 is the grammar;
//! this module is pure (no database, no HTTP).
//!
//! The API:
//! - [`parse`]`(content) -> Result<`[`Document`]`, Vec<`[`Diagnostic`]`>>`: the document (frontmatter
//!   values, body lines as tokens), or every diagnostic (1-based `line`, `code`, `message`).
//! - [`canonicalize`]`(content) -> Result<String, Vec<Diagnostic>>`: grammar and formatting only;
//!   [`serialize`] prints a parsed [`Document`] in the canonical form.
//! - [`compile`]`(&Document) -> Definition` for a create; [`compile_onto`]`(&existing, &Document)`
//!   for an update (PUT): it keeps the existing completion export when the document has no
//!   `export`, the existing primary completion and handoff terminals (ids and messages) when it
//!   has no `end`/`handoff`, and always the activation gate; also what markdown cannot say at
//!   all (`enabled`, `exposure`, terminal operator notices, slot ids and descriptions by key).
//! - [`project`]`(&Definition) -> Result<String, `[`NotPortable`]`>`: a definition as canonical
//!   markdown, or `routine_not_portable` with the reason. A projection is only returned when
//!   reading it back onto the same definition ([`compile_onto`]) changes nothing, so GET then
//!   PUT of the same text never alters a routine.
//! - [`check_grammar_version`]: the envelope's `grammarVersion` (anything but 1 is
//!   `unsupported_grammar_version` at line 1).
//!
//! Round trip: for a canonical document D that markdown produced, `project(compile(parse(D)))`
//! is D. Where the compiled definition does not keep what the text said, the projection is the
//! nearest canonical text instead: blank lines; declared `vars` nothing reads (they are not
//! slots); prose on a `(max N)` line; a bare `[if ref]` (its line's prose is the LLM guard); a
//! skill or action chip written mid-line (it moves to the end of its line) or beside prose equal
//! to its name; body lines after branch lines (they move up); a body line repeating its heading;
//! `-> end:<primary id>` (printed `-> end`); a named ending whose message differs between lines
//! (the first one wins); `handoff: handoff ("Bringing in a teammate.")` (the default, omitted);
//! literal `{{slot.x}}` prose (printed `@x`).
//!
//! Where this grammar departs from the product it was read from (mostly to keep canonicalize
//! idempotent, which the product was not in every case): a lone `\r` is a line break, as `\r\n`
//! is; an empty body canonicalizes without a trailing blank line; a target may be followed
//! directly by the next `->` (and its id does not swallow that `-`); `(max N)` takes any
//! whitespace after `max`; `export` kinds are de-duplicated; a no-value operator (`is true`, `is
//! present`, …) followed by more text, a `@`/`ctx.` binding that is not a key, and a binding key
//! given twice are errors; a bracket left open before a `->` does not hide a bad target; a ref
//! with a dot (`[if out.status = ok]`, a skill output path) is not a variable; a variable becomes
//! a slot only when the compiled routine reads it (an instruction, a guard, an input binding), so
//! a token the compiler drops (a guard on a line without a target, a bare `[if ref]`) declares
//! nothing; an untitled line with both a skill and an action chip is an action step. At most
//! [`MAX_DIAGNOSTICS`] diagnostics are returned.

mod compile;
mod front;
mod lex;
mod print;
mod project;
mod scan;
#[cfg(test)]
mod tests;

use serde::Serialize;
use serde_json::Value;

use super::definition::{DateUnit, FieldOp, ReentryMode, SlotType, TerminalKind};

pub use compile::{DEFAULT_HANDOFF_MESSAGE, UNTITLED_NAME, UNTITLED_TRIGGER, compile, compile_onto};
pub use front::parse;
pub use print::serialize;
pub use project::{NotPortable, project};
pub use scan::{brace_refs, is_ident, is_slot_key, slot_refs, split_slot_refs};

/// The only grammar version.
pub const GRAMMAR_VERSION: i64 = 1;

/// Diagnostics beyond this many are dropped (a 1 MB document of stray brackets would otherwise
/// answer with a response many times its size).
pub const MAX_DIAGNOSTICS: usize = 1000;

/// Why a document did not parse: where (1-based line), a stable code, and a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub line: usize,
    pub code: &'static str,
    pub message: String,
}

impl Diagnostic {
    pub(crate) fn new(line: usize, code: &'static str, message: impl Into<String>) -> Diagnostic {
        Diagnostic { line, code, message: message.into() }
    }
}

/// The envelope's `grammarVersion`: only 1 is read.
pub fn check_grammar_version(version: i64) -> Result<(), Diagnostic> {
    if version == GRAMMAR_VERSION {
        Ok(())
    } else {
        Err(Diagnostic::new(1, "unsupported_grammar_version", format!("unsupported routine grammar version {version}")))
    }
}

/// Grammar and formatting only: the canonical text of `content`, or its diagnostics.
pub fn canonicalize(content: &str) -> Result<String, Vec<Diagnostic>> {
    parse(content).map(|doc| serialize(&doc))
}

/// A parsed document. `name`/`trigger` are empty when absent; the optional frontmatter keys are
/// `None` when the document did not write them (an update keeps the routine's own values then).
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub name: String,
    pub trigger: String,
    pub reentry: ReentryMode,
    pub priority: i64,
    pub export: Option<Export>,
    pub end: Option<TerminalSpec>,
    pub handoff: Option<TerminalSpec>,
    /// The `vars` declarations, in order.
    pub vars: Vec<VarDecl>,
    /// The body, one entry per line (trailing empty lines dropped).
    pub lines: Vec<Line>,
}

impl Default for Document {
    fn default() -> Document {
        Document {
            name: String::new(),
            trigger: String::new(),
            reentry: ReentryMode::OncePerConversation,
            priority: 0,
            export: None,
            end: None,
            handoff: None,
            vars: Vec::new(),
            lines: Vec::new(),
        }
    }
}

/// `export: <kinds> -> <destinationRef>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    pub kinds: Vec<TerminalKind>,
    pub destination: String,
}

/// `end:`/`handoff:` — `<id>` or `<id> ("message")`.
#[derive(Debug, Clone, PartialEq)]
pub struct TerminalSpec {
    pub id: String,
    pub message: Option<String>,
}

/// One `key:type[:optional][:mutable]` of `vars`.
#[derive(Debug, Clone, PartialEq)]
pub struct VarDecl {
    pub key: String,
    pub slot_type: SlotType,
    pub optional: bool,
    pub mutable: bool,
}

/// A body line: a heading (`# ` then its content) or not, and its tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// 1-based, in the document as sent.
    pub number: usize,
    pub heading: bool,
    pub segments: Vec<Segment>,
}

/// A token of a body line.
#[derive(Debug, Clone, PartialEq)]
pub enum Segment {
    Text(String),
    /// `@name`
    Var(String),
    /// `#name[...]`
    Skill(SkillCall),
    /// `[action id]`
    Action(String),
    /// `[if ref …]`
    If(Condition),
    /// `[outcome status]`
    Outcome(String),
    /// `[filled @a, @b]`
    Filled(Vec<String>),
    /// `[decision …]` / `[approval …]`
    Gate(Gate),
    /// `-> end` (`id: None`, the primary completion) or `-> end:<id> ("message")`.
    End {
        id: Option<String>,
        message: Option<String>,
    },
    /// `-> handoff`
    Handoff,
    /// `-> step:<id>` or `-> step:<id> (max N)`.
    Step {
        id: String,
        max: Option<i64>,
    },
}

impl Segment {
    pub fn is_target(&self) -> bool {
        matches!(self, Segment::End { .. } | Segment::Handoff | Segment::Step { .. })
    }
}

/// A skill chip with its bindings, in the order written.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SkillCall {
    pub name: String,
    pub inputs: Vec<(String, Binding)>,
    /// `(output, slot)` pairs.
    pub outputs: Vec<(String, String)>,
    /// `mode untyped` (typed is the default and is never printed).
    pub untyped: bool,
}

/// An input binding's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Binding {
    Slot(String),
    Context(String),
    Literal(Value),
}

/// `[if field]` (`test: None`, an LLM guard on the line's prose) or `[if field <op> …]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub field: String,
    pub test: Option<Test>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Test {
    /// `is true`, `is false`, `is present`, `is absent`.
    Is(FieldOp),
    /// `=`, `!=`, `>`, `>=`, `<`, `<=` and a value.
    Compare(FieldOp, Value),
    /// `in a, b`.
    In(Vec<Value>),
    /// `older than N unit`, `within N unit`.
    Age(FieldOp, Value, DateUnit),
}

/// A decision (inline; routed by following branch lines) or approval (block; each option routes).
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    pub approval: bool,
    pub key: String,
    pub options: Vec<Choice>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub id: String,
    pub label: String,
    pub description: Option<String>,
    /// Approval options only.
    pub target: Option<Target>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    End,
    Handoff,
    Step(String),
}

/// A routine variable as the document implies it.
#[derive(Debug, Clone, PartialEq)]
pub struct Variable {
    pub key: String,
    pub slot_type: SlotType,
    pub optional: bool,
    pub mutable: bool,
}

impl Document {
    pub fn has_export(&self) -> bool {
        self.export.is_some()
    }
    pub fn has_end(&self) -> bool {
        self.end.is_some()
    }
    pub fn has_handoff(&self) -> bool {
        self.handoff.is_some()
    }

    /// The variables: declared ones in `vars` order, then names the body references without
    /// declaring them (required text), in first-reference order.
    pub fn variables(&self) -> Vec<Variable> {
        let mut out: Vec<Variable> = self
            .vars
            .iter()
            .map(|v| Variable { key: v.key.clone(), slot_type: v.slot_type, optional: v.optional, mutable: v.mutable })
            .collect();
        let declared: std::collections::HashSet<&str> = self.vars.iter().map(|v| v.key.as_str()).collect();
        for key in self.referenced() {
            if !declared.contains(key.as_str()) {
                out.push(Variable { key, slot_type: SlotType::Text, optional: false, mutable: false });
            }
        }
        out
    }

    /// Names the body references as variables, in first-reference order: `@x`, `[if x …]` (not a
    /// gate's capture key, not a dotted output path), `[filled x]`, `@x` input bindings and
    /// `out …=@x` targets.
    pub fn referenced(&self) -> Vec<String> {
        let captures: Vec<&str> = self.gates().map(|g| g.key.as_str()).collect();
        let mut out: Vec<String> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut add = |name: &str| {
            if seen.insert(name.to_string()) {
                out.push(name.to_string());
            }
        };
        for seg in self.lines.iter().flat_map(|l| &l.segments) {
            match seg {
                Segment::Var(n) => add(n),
                Segment::If(c) if !captures.contains(&c.field.as_str()) && scan::is_slot_key(&c.field) => add(&c.field),
                Segment::Filled(keys) => keys.iter().for_each(|k| add(k)),
                Segment::Skill(s) => {
                    for (_, b) in &s.inputs {
                        if let Binding::Slot(n) = b {
                            add(n);
                        }
                    }
                    s.outputs.iter().for_each(|(_, slot)| add(slot));
                }
                _ => {}
            }
        }
        out
    }

    fn gates(&self) -> impl Iterator<Item = &Gate> {
        self.lines.iter().flat_map(|l| &l.segments).filter_map(|s| match s {
            Segment::Gate(g) => Some(g),
            _ => None,
        })
    }
}
