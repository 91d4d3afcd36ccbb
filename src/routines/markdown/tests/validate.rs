//! Routine validation (src/routines/validate.rs): the examples are valid; one failing definition
//! per code, most written as markdown, with the finding's location.

use super::examples::{A_OUT, B_OUT, C_OUT};
use super::{compiled, doc};
use crate::routines::definition::{
    CompletionExport, Definition, Exposure, GuardKind, Slot, SlotType, StepKind, TerminalKind,
};
use crate::routines::validate::{ContextVariableInfo, InputType, SkillInfo, SkillInput, ValidationContext, validate};

fn input(name: &str, input_type: InputType, required: bool) -> SkillInput {
    SkillInput { name: name.into(), input_type, required }
}

/// An agent with the examples' skills, variables and destination.
fn agent() -> ValidationContext {
    ValidationContext {
        skills: Some(vec![
            SkillInfo {
                name: "warranty_lookup".into(),
                inputs: vec![input("serial_no", InputType::Text, true), input("region", InputType::Text, false)],
                outputs: Some(vec!["eligible".into()]),
                open_inputs: false,
            },
            SkillInfo {
                name: "sms_send".into(),
                inputs: vec![input("to", InputType::Text, true)],
                outputs: None,
                open_inputs: false,
            },
            SkillInfo {
                name: "s".into(),
                inputs: vec![
                    input("to", InputType::Text, true),
                    input("n", InputType::Number, false),
                    input("kind", InputType::Enum(vec!["a".into()]), false),
                ],
                outputs: Some(vec!["result".into()]),
                open_inputs: false,
            },
        ]),
        context_variables: Some(vec![
            ContextVariableInfo { name: "store_region".into(), json: false },
            ContextVariableInfo { name: "profile".into(), json: true },
        ]),
        destinations: Some(vec!["3f0c8d2e-1111-4aaa-8bbb-0123456789ab".into()]),
    }
}

fn findings(d: &Definition) -> Vec<(&'static str, String)> {
    validate(d, &agent()).into_iter().map(|f| (f.code, f.location)).collect()
}

/// `code` is found at `location`.
#[track_caller]
fn finds(d: &Definition, code: &str, location: &str) {
    let all = findings(d);
    assert!(all.iter().any(|(c, l)| *c == code && l == location), "expected {code} at {location}, found {all:?}");
}

#[test]
fn the_examples_are_valid() {
    for text in [A_OUT, B_OUT, C_OUT] {
        assert_eq!(findings(&compiled(text)), [], "{text}");
    }
    // Structure only: nothing about the agent is checked.
    assert_eq!(validate(&compiled(&doc("#unknown_skill\n")), &ValidationContext::default()), []);
}

#[test]
fn graph_rules() {
    finds(&compiled(&doc("# Done\nHello\n")), "node_id_collision", "step:done");
    let mut d = compiled(&doc("A\n"));
    d.terminals.clear();
    finds(&d, "missing_terminal", "routine");
    let mut d = compiled(&doc("A\n"));
    d.transitions.clear();
    finds(&d, "missing_terminal", "routine");
    finds(&compiled(&doc("[approval k: y=\"Y\" -> end, n=\"N\" -> end]\nOrphan\n")), "unreachable_step", "step:step_2");
    finds(&compiled(&doc("A\n-> step:nowhere\n")), "dangling_step_reference", "transition:step_1->nowhere");
    let mut d = compiled(&doc("A\n"));
    d.transitions[0].from_step = "ghost".into();
    finds(&d, "dangling_step_reference", "transition:ghost->done");
    finds(&compiled(&doc("# A\nx\n# B\ny\n-> step:a\n")), "unbounded_back_edge", "transition:b->a");
    finds(&compiled(&doc("# A\nx\n-> step:a\n")), "unbounded_back_edge", "transition:a->a");
    // A bounded loop validates only where the step's default leads to a terminal.
    finds(&compiled(&doc("# A\nx\n-> step:a (max 2)\n# B\ny\n")), "attempt_limit_without_fallback", "transition:a->a");
    assert_eq!(findings(&compiled(&doc("# A\nx\n# B\ny\n-> step:a (max 2)\n"))), []);
}

#[test]
fn step_rules() {
    let mut d = compiled(&doc("#lookup\n[action notify.team]\n"));
    d.steps[0].tool_ref = None;
    finds(&d, "dangling_action_reference", "step:step_1");
    d.steps[1].action_type = None;
    finds(&d, "dangling_action_reference", "step:step_2");
    finds(&compiled(&doc("#mystery\n")), "unknown_skill", "step:step_1");
    let mut d = compiled(&doc("[action notify.team]\n"));
    d.transitions.clear();
    finds(&d, "missing_action_follow_up", "step:step_1");
    finds(
        &compiled(&doc("Read {{context.ghost}} and {{ctx.store_region}}\n")),
        "unknown_context_variable",
        "step:step_1",
    );
    assert_eq!(findings(&compiled(&doc("Read {{ctx.store_region}}\n"))), []);
}

#[test]
fn guard_rules() {
    finds(
        &compiled(&doc("A\n[outcome failed] -> handoff\n")),
        "outcome_guard_on_non_tool_step",
        "transition:step_1->handoff",
    );
    let mut d = compiled(&doc("#s[in to=ok]\n[outcome failed] -> handoff\n"));
    d.transitions[0].outcome_status = None;
    finds(&d, "structured_guard_missing_parameter", "transition:step_1->handoff");
    finds(
        &compiled(&doc("# A\nx\n# B\ny\n-> step:a (max 0)\n")),
        "structured_guard_missing_parameter",
        "transition:b->a",
    );
    let mut d = compiled(&doc("Ask @x\n[if x = 1] -> end\n"));
    d.transitions[0].field_value = None;
    finds(&d, "structured_guard_missing_parameter", "transition:step_1->done");
    let mut d = compiled(&doc("Ask @d\n[if d within 2 days] -> end\n"));
    d.transitions[0].field_unit = None;
    finds(&d, "structured_guard_missing_parameter", "transition:step_1->done");
    let mut d = compiled(&doc("Ask @x\n[filled x] -> end\n"));
    d.transitions[0].guard_text = Some("nothing".into());
    finds(&d, "structured_guard_missing_parameter", "transition:step_1->done");
    finds(
        &compiled(&doc("A\n[if out.status = ok] -> end\n")),
        "field_guard_unknown_reference",
        "transition:step_1->done",
    );
    // A tool step's own outputs (and paths into them) may be tested.
    assert_eq!(findings(&compiled(&doc("#s[in to=x]\n[if result.code = 1] -> handoff\n"))), []);
    let numeric = "---\nname: R\ntrigger: t\nvars: n:number, b:boolean, d:date\n---\nAsk @n @b @d\n";
    for (guard, ok) in [
        ("[if n older than 2 days]", false),
        ("[if d > 3]", false),
        ("[if n is true]", false),
        ("[if b is true]", true),
        ("[if n >= 3]", true),
        ("[if d within 1 weeks]", true),
        ("[if b is present]", true),
    ] {
        let d = compiled(&format!("{numeric}{guard} -> end\n"));
        let found = findings(&d).into_iter().any(|(c, _)| c == "field_guard_incompatible_type");
        assert_eq!(found, !ok, "{guard}");
    }
}

#[test]
fn slot_rules() {
    let mut d = compiled(&doc("Ask @x\n"));
    d.steps[0].instruction.push_str(" and {{slot.ghost}}");
    finds(&d, "referenced_undeclared_slot", "slot:ghost");
    let mut d = compiled(&doc("Ask @x\n"));
    d.slots.push(Slot { key: "spare".into(), stable_slot_id: "spare".into(), ordinal: 1, ..d.slots[0].clone() });
    finds(&d, "declared_unused_slot", "slot:spare");
    // A slot only bound as a skill input is used.
    assert_eq!(findings(&compiled(&doc("Ask @to first\n#s[in to=@to]\n"))), []);
    // The reference's quirk: an output target that is also asked for is a slot too.
    finds(&compiled(&doc("Ask @x\n#s[in to=@x; out result=@x]\n")), "variable_name_collision", "step:step_2");
    finds(
        &compiled(&doc("#s[in to=a; out result=@y]\n#s[in to=b; out result=@y]\n")),
        "variable_name_collision",
        "step:step_1",
    );
    let mut d = compiled(&doc("A\n"));
    d.slots.push(Slot {
        key: "x".into(),
        stable_slot_id: "x".into(),
        slot_type: SlotType::Text,
        required: true,
        description: None,
        ordinal: 0,
        mutable: false,
    });
    d.slots.push(Slot { ordinal: 1, ..d.slots[0].clone() });
    finds(&d, "duplicate_slot_key", "slot:x");
}

#[test]
fn binding_rules() {
    finds(&compiled(&doc("#s[in to=a, colour=red]\n")), "unknown_input_binding", "step:step_1");
    finds(&compiled(&doc("#s[in to=a, n=lots]\n")), "input_type_mismatch", "step:step_1");
    finds(&compiled(&doc("#s[in to=a, kind=b]\n")), "input_type_mismatch", "step:step_1");
    finds(
        &compiled("---\nvars: when:date\n---\nAsk @when\n#s[in to=a, n=@when]\n"),
        "input_type_mismatch",
        "step:step_2",
    );
    finds(&compiled(&doc("#s[in to=a, n=ctx.store_region]\n")), "input_type_mismatch", "step:step_1");
    assert_eq!(findings(&compiled(&doc("#s[in to=a, n=ctx.profile, kind=a]\n"))), []);
    let mut d = compiled(&doc("Ask @x\n#s[in to=@x]\n"));
    d.slots.clear();
    d.steps[0].instruction = "Ask".into();
    finds(&d, "unknown_variable_ref", "step:step_2");
    finds(&compiled(&doc("#s[in to=ctx.ghost]\n")), "unknown_context_variable", "step:step_1");
    finds(&compiled(&doc("#s\n")), "unsatisfiable_required_input", "step:step_1");
    finds(&compiled(&doc("#s[in to=ctx.store_region]\n")), "unsatisfiable_required_input", "step:step_1");
    finds(&compiled(&doc("#s[in to=@m]\nAsk for @m\n")), "unsatisfiable_required_input", "step:step_1");
    // Filled on every path before the step: fine; on one path only: not.
    assert_eq!(findings(&compiled(&doc("Ask for @m\n#s[in to=@m]\n"))), []);
    finds(
        &compiled(&doc("Hi\n[if v is present] -> step:send\n# Ask\nAsk for @m and @v\n# Send\n#s[in to=@m]\n")),
        "unsatisfiable_required_input",
        "step:send",
    );
    finds(&compiled(&doc("#s[in to=a; out nothing=@y]\n")), "unknown_output_assignment", "step:step_1");
}

#[test]
fn approval_rules() {
    let gate = "[decision k: a=\"A\", b=\"B\"]\n";
    finds(&compiled(&doc(gate)), "approval_step_no_decision_edge", "step:step_1");
    finds(&compiled(&doc(&format!("{gate}[if k = a] -> end\n"))), "approval_step_unreachable_option", "step:step_1");
    let full = format!("{gate}[if k = a] -> end\n[if k = b] -> handoff\n");
    assert_eq!(findings(&compiled(&doc(&full))), []);
    finds(&compiled(&doc(&format!("{full}They hesitate -> handoff\n"))), "approval_step_llm_edge", "step:step_1");
    finds(
        &compiled(&doc(&format!("{full}[if k = c] -> end:other\n"))),
        "approval_step_unknown_option",
        "transition:step_1->other",
    );
    finds(&compiled(&doc("[decision k: a=\"A\"]\n[if k = a] -> end\n")), "invalid_approval_step", "step:step_1");
    finds(
        &compiled(&doc(&format!(
            "[decision k: a=\"{}\", b=\"B\"]\n[if k = a] -> end\n[if k = b] -> end\n",
            "x".repeat(121)
        ))),
        "invalid_text_length",
        "step:step_1",
    );
    let mut d = compiled(&doc(&full));
    d.steps[0].kind = StepKind::Chat;
    finds(&d, "invalid_approval_step", "step:step_1");
}

#[test]
fn routine_rules() {
    let mut d = compiled(A_OUT);
    d.completion_export = Some(CompletionExport {
        enabled: true,
        trigger_kinds: vec![TerminalKind::Complete],
        destination_ref: "gone".into(),
    });
    finds(&d, "completion_export_missing_destination", "routine");
    d.completion_export = Some(CompletionExport { enabled: true, trigger_kinds: vec![], destination_ref: " ".into() });
    finds(&d, "completion_export_missing_destination", "routine");
    finds(&d, "completion_export_missing_trigger", "routine");
    // A disabled export and exposure are not checked.
    d.completion_export =
        Some(CompletionExport { enabled: false, trigger_kinds: vec![], destination_ref: String::new() });
    d.exposure = Some(Exposure { enabled: false, tool_name: "X".into(), description: String::new() });
    assert_eq!(findings(&d), []);
    for (name, code) in [
        ("Bad-Name", "exposure_tool_name_invalid"),
        ("x", "exposure_tool_name_invalid"),
        ("ask_agent", "exposure_tool_name_reserved"),
        ("list_routines", "exposure_tool_name_reserved"),
    ] {
        d.exposure = Some(Exposure { enabled: true, tool_name: name.into(), description: String::new() });
        finds(&d, code, "routine");
    }
    d.exposure = Some(Exposure { enabled: true, tool_name: "file_claim".into(), description: String::new() });
    assert_eq!(findings(&d), []);
    d.activation.gate_ref = Some("gate".into());
    finds(&d, "exposure_requires_ungated_activation", "routine");
}

#[test]
fn schema_limits() {
    finds(&compiled(&format!("---\nname: {}\n---\nA\n", "n".repeat(201))), "invalid_name", "routine");
    let mut d = compiled(&doc("A\n"));
    d.activation.trigger_description = "  ".into();
    finds(&d, "invalid_trigger", "routine");
    finds(&compiled(&doc(&format!("{}\n", "w".repeat(4001)))), "invalid_instruction", "step:step_1");
    let mut d = compiled(&doc("A\n"));
    d.terminals[0].instruction = Some(String::new());
    finds(&d, "invalid_instruction", "step:done");
    let mut d = compiled(&doc("A\n"));
    d.steps[0].stable_step_id = "has space".into();
    finds(&d, "invalid_identifier", "step:has space");
    finds(
        &compiled(&doc(&format!("# {}\nA\n", "a".repeat(121)))),
        "invalid_identifier",
        &format!("step:{}", "a".repeat(121)),
    );
    finds(&compiled(&doc("")), "missing_step", "routine");
    let mut d = compiled(&doc("Ask @x\n[if x = 1] -> end\n"));
    d.transitions[0].field_value = Some(serde_json::Value::String(" ".into()));
    finds(&d, "invalid_text_length", "transition:step_1->done");
    assert!(d.transitions.iter().any(|t| t.guard_kind == GuardKind::Field));
}
