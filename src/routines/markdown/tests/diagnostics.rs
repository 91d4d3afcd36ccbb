//! Every parse diagnostic the reference lists, each with its line; what stays prose; and that a
//! document with many problems reports them all.

use super::super::{Diagnostic, canonicalize, check_grammar_version, parse};

/// The `(line, code)` pairs of `text`'s diagnostics (empty when it parses).
fn codes(text: &str) -> Vec<(usize, &'static str)> {
    parse(text).err().unwrap_or_default().iter().map(|d| (d.line, d.code)).collect()
}

fn front(lines: &str) -> String {
    format!("---\nname: N\ntrigger: T\n{lines}\n---\nAsk for @x.\n")
}

fn body(lines: &str) -> String {
    format!("---\nname: N\ntrigger: T\n---\nAsk for @x.\n{lines}\n")
}

#[test]
fn frontmatter_diagnostics_name_their_line() {
    let cases: &[(&str, &str)] = &[
        ("grammar: 2", "unsupported_grammar_version"),
        ("grammar: one", "unsupported_grammar_version"),
        ("grammar:", "unsupported_grammar_version"),
        ("reentry: sometimes", "invalid_reentry"),
        ("priority: high", "invalid_priority"),
        ("priority: 1.5", "invalid_priority"),
        ("title: Refunds", "unknown_frontmatter_key"),
        ("export: done -> 3f0c", "invalid_export"),
        ("export: complete", "invalid_export"),
        ("export: complete -> a b", "invalid_export"),
        ("end: (\"Bye\")", "invalid_frontmatter"),
        ("handoff: desk \"Bye\"", "invalid_frontmatter"),
        ("vars: 1st:text", "invalid_var_declaration"),
        ("vars: a:colour", "invalid_var_declaration"),
        ("vars: a:text:secret", "invalid_var_declaration"),
        ("vars: a", "invalid_var_declaration"),
        ("vars: a:text, a:number", "duplicate_var_declaration"),
    ];
    for (line, code) in cases {
        assert_eq!(codes(&front(line)), [(4, *code)], "{line}");
    }
    // Accepted spellings.
    for line in [
        "grammar: 1",
        "grammar: 1.0",
        "reentry: once",
        "priority: -7",
        "priority:",
        "export: complete,handoff -> x",
        "end: done",
        "vars: a:text:optional:mutable",
        "no colon here",
    ] {
        assert_eq!(codes(&front(line)), [], "{line}");
    }
}

#[test]
fn the_envelope_version_is_checked_at_line_1() {
    assert_eq!(check_grammar_version(1), Ok(()));
    let d = check_grammar_version(2).err();
    assert_eq!(d.as_ref().map(|d| (d.line, d.code)), Some((1, "unsupported_grammar_version")));
}

#[test]
fn body_diagnostics_name_their_line() {
    let cases: &[(&str, &str)] = &[
        ("See the [FAQ] first.", "unknown_bracket_token"),
        ("[1] footnote", "unknown_bracket_token"),
        ("[If x = 1] -> end", "unknown_bracket_token"),
        ("[if x == 1] -> end", "invalid_guard_token"),
        ("[if] -> end", "invalid_guard_token"),
        ("[if x is true soon] -> end", "invalid_guard_token"),
        ("[if d older than two years] -> end", "invalid_guard_token"),
        ("[if d within 2 fortnights] -> end", "invalid_guard_token"),
        ("[outcome ] -> end", "invalid_guard_token"),
        ("[filled @1a] -> end", "invalid_guard_token"),
        ("[action two words]", "invalid_action_token"),
        ("[action \"\"]", "invalid_action_token"),
        ("[decision k:]", "invalid_gate_token"),
        ("[decision k a=\"A\"]", "invalid_gate_token"),
        ("[decision k: a=\"A\",]", "invalid_gate_token"),
        ("[decision k: a=A]", "invalid_gate_token"),
        ("[approval k: a=\"A\" -> end, b=\"B\"]", "invalid_gate_token"),
        ("[approval k: a=\"A\" -> end:named]", "invalid_gate_token"),
        ("Stop -> handoffs", "invalid_target_token"),
        ("(see -> step:next)", "invalid_target_token"),
        ("Done -> end:bad!", "invalid_target_token"),
        ("Use #lookup[] now", "invalid_skill_binding_suffix"),
        ("Use #lookup[with a=1] now", "invalid_skill_binding_suffix"),
        ("Use #lookup[in a] now", "invalid_skill_binding_suffix"),
        ("Use #lookup[in a=@] now", "invalid_skill_binding_suffix"),
        ("Use #lookup[in a=1, a=2] now", "invalid_skill_binding_suffix"),
        ("Use #lookup[out a=b] now", "invalid_skill_binding_suffix"),
        ("Use #lookup[mode loose] now", "invalid_skill_binding_suffix"),
        ("[if a = 1] -> step:x (max 2)", "conflicting_guard_and_counter"),
        ("[filled a] -> step:x (max 2)", "conflicting_guard_and_counter"),
        ("[outcome failed] -> step:x (max 2)", "conflicting_guard_and_counter"),
    ];
    for (line, code) in cases {
        assert_eq!(codes(&body(line)), [(6, *code)], "{line}");
    }
    // A heading's tokens are read too.
    assert_eq!(codes("# See [FAQ]\n"), [(1, "unknown_bracket_token")]);
}

#[test]
fn prose_that_looks_like_tokens_is_prose() {
    for line in [
        "Glued brackets x[1] and y[if a ==] are prose",
        "An unclosed [bracket stays prose",
        "->end and ->  handoff are prose, as is -> endless and -> step:",
        "#1 priority, issue # 5, mail me @ home",
    ] {
        assert_eq!(codes(&body(line)), [], "{line}");
    }
    // A bracket inside quotes in prose is still a bracket.
    assert_eq!(codes(&body("Say \"[x]\"")), [(6, "unknown_bracket_token")]);
}

#[test]
fn all_diagnostics_are_collected_in_line_order() {
    let text = "---\nreentry: x\npriority: y\nfoo: bar\nvars: a:b, c:text, c:text\n---\nok\n[nope]\n-> handoffs [if] #s[]\n[if a = 1] -> step:x (max 2)\n";
    let found = codes(text);
    assert_eq!(
        found,
        [
            (2, "invalid_reentry"),
            (3, "invalid_priority"),
            (4, "unknown_frontmatter_key"),
            (5, "invalid_var_declaration"),
            (5, "duplicate_var_declaration"),
            (8, "unknown_bracket_token"),
            (9, "invalid_target_token"),
            (9, "invalid_guard_token"),
            (9, "invalid_skill_binding_suffix"),
            (10, "conflicting_guard_and_counter"),
        ]
    );
    let diags: Vec<Diagnostic> = parse(text).err().unwrap_or_default();
    assert!(diags.iter().all(|d| !d.message.is_empty()));
    let json = serde_json::to_value(&diags[0]).unwrap_or_default();
    assert_eq!(json, serde_json::json!({"line": 2, "code": "invalid_reentry", "message": diags[0].message}));
    assert!(canonicalize(text).is_err());
}

#[test]
fn lines_count_from_the_document_start_with_crlf_too() {
    assert_eq!(codes("a\r\nb\r\n[x]\r\n"), [(3, "unknown_bracket_token")]);
    assert_eq!(codes("---\r\nname: n\r\n---\r\n\r\n\r\n-> handoffs\r\n"), [(6, "invalid_target_token")]);
}
