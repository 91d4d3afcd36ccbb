//! The reference's examples A, B and C (§13): canonical forms byte for byte, their compiled
//! definitions (steps, kinds, edges in order, terminals), and the projection back; updates (PUT)
//! and what cannot be projected.

use super::super::{canonicalize, compile_onto, parse, project};
use super::{compiled, doc};
use crate::routines::definition::{
    Activation, CompletionExport, Definition, Exposure, FieldOp, GuardKind, InputBinding, ReentryMode, SlotType,
    StepKind, TerminalKind,
};

pub const A_IN: &str = r#"---
name: Warranty claim intake
trigger: customer wants to file a warranty claim for a broken appliance
priority: 15
vars: serial:text, purchase_date:date, photos_ok:boolean:optional
export: handoff , complete -> 3f0c8d2e-1111-4aaa-8bbb-0123456789ab
grammar: 1
---
Ask for the appliance @serial and when it was bought (@purchase_date).
[if purchase_date older than 2 years]-> end:expired ("Sorry, the warranty has lapsed.")
# Lookup
Check the unit: #warranty_lookup[out eligible=@is_eligible; in serial_no=@serial, region=ctx.store_region]
[outcome failed] -> handoff
# Confirm
Tell the customer the claim is registered and ask if they can upload photos (@photos_ok).
The customer wants a human -> handoff
"#;

pub const A_OUT: &str = r#"---
grammar: 1
name: Warranty claim intake
trigger: customer wants to file a warranty claim for a broken appliance
priority: 15
export: handoff,complete -> 3f0c8d2e-1111-4aaa-8bbb-0123456789ab
vars: purchase_date:date, photos_ok:boolean:optional
---
Ask for the appliance @serial and when it was bought (@purchase_date).
[if purchase_date older than 2 years] -> end:expired ("Sorry, the warranty has lapsed.")
# Lookup
Check the unit: #warranty_lookup[in serial_no=@serial, region=ctx.store_region; out eligible=@is_eligible]
[outcome failed] -> handoff
# Confirm
Tell the customer the claim is registered and ask if they can upload photos (@photos_ok).
The customer wants a human -> handoff
"#;

pub const B_IN: &str = r#"---
name: Refund over threshold
vars: order_ref:text:mutable, amount:number, contact:email
trigger: shopper asks for money back on an order
end: done ("Your refund request is closed.")
reentry: always
---
# Collect
Ask for the @order_ref, the refund @amount and a @contact address.
[if amount < 50]-> step:pay
# Review
Say a manager must check the refund. [decision refund_call: approve="Approve refund", deny="Decline" ("Explain why")]
[if refund_call = approve] -> step:pay
[if refund_call = deny] -> end:declined ("We could not approve this refund.")
# Pay
[action "contact.send"]
"#;

pub const B_OUT: &str = r#"---
grammar: 1
name: Refund over threshold
trigger: shopper asks for money back on an order
reentry: always
end: done ("Your refund request is closed.")
vars: order_ref:text:mutable, amount:number, contact:email
---
# Collect
Ask for the @order_ref, the refund @amount and a @contact address.
[if amount < 50] -> step:pay
# Review
Say a manager must check the refund. [decision refund_call: approve="Approve refund", deny="Decline" ("Explain why")]
[if refund_call = approve] -> step:pay
[if refund_call = deny] -> end:declined ("We could not approve this refund.")
# Pay
[action contact.send]
"#;

pub const C_IN: &str = r#"---
name: Account unlock
trigger: user is locked out of their account
reentry: once
handoff: desk ("Our support desk will contact you.")
vars: mobile:text, otp_code:text, reason:text:optional
---
Ask for the @mobile number on the account and, if they like, the @reason for the lockout.
The user refuses to share a number -> handoff
Tell the user a teammate is reviewing the request. [approval unlock_ok: grant="Unlock" -> step:send_code, refuse="Keep locked" ("Suspicious request") -> handoff]
# Send code
Text a code to @mobile. #sms_send[mode untyped; in to=@mobile]
# Verify
Ask for the six-digit @otp_code.
[filled otp_code] -> end:unlocked ("Your account is unlocked.")
-> step:send_code (max 2)
"#;

pub const C_OUT: &str = r#"---
grammar: 1
name: Account unlock
trigger: user is locked out of their account
handoff: desk ("Our support desk will contact you.")
vars: reason:text:optional
---
Ask for the @mobile number on the account and, if they like, the @reason for the lockout.
The user refuses to share a number -> handoff
Tell the user a teammate is reviewing the request. [approval unlock_ok: grant="Unlock" -> step:send_code, refuse="Keep locked" ("Suspicious request") -> handoff]
# Send code
Text a code to @mobile. #sms_send[in to=@mobile; mode untyped]
# Verify
Ask for the six-digit @otp_code.
[filled @otp_code] -> end:unlocked ("Your account is unlocked.")
-> step:send_code (max 2)
"#;

pub const EXAMPLES: [(&str, &str); 3] = [(A_IN, A_OUT), (B_IN, B_OUT), (C_IN, C_OUT)];

/// `(from, to, guard)` of every transition, in ordinal order.
fn edges(d: &Definition) -> Vec<(String, String, GuardKind)> {
    let mut t: Vec<_> = d.transitions.iter().collect();
    t.sort_by_key(|t| t.ordinal);
    t.iter().map(|t| (t.from_step.clone(), t.to_ref.clone(), t.guard_kind)).collect()
}

fn e(from: &str, to: &str, g: GuardKind) -> (String, String, GuardKind) {
    (from.into(), to.into(), g)
}

fn steps(d: &Definition) -> Vec<(&str, StepKind)> {
    d.steps.iter().map(|s| (s.stable_step_id.as_str(), s.kind)).collect()
}

fn terminals(d: &Definition) -> Vec<(&str, TerminalKind, Option<&str>)> {
    d.terminals.iter().map(|t| (t.stable_step_id.as_str(), t.kind, t.instruction.as_deref())).collect()
}

#[test]
fn examples_canonicalize_byte_for_byte_and_idempotently() {
    for (input, canonical) in EXAMPLES {
        assert_eq!(canonicalize(input).as_deref(), Ok(canonical));
        assert_eq!(canonicalize(canonical).as_deref(), Ok(canonical));
        // CRLF input reads the same.
        assert_eq!(canonicalize(&input.replace('\n', "\r\n")).as_deref(), Ok(canonical));
    }
}

#[test]
fn example_a_compiles() {
    use GuardKind::*;
    for text in [A_IN, A_OUT] {
        let d = compiled(text);
        assert_eq!(d.name, "Warranty claim intake");
        assert_eq!(d.activation.priority, 15);
        assert_eq!(steps(&d), [("step_1", StepKind::Chat), ("lookup", StepKind::Tool), ("confirm", StepKind::Chat)]);
        assert_eq!(
            edges(&d),
            [
                e("step_1", "expired", Field),
                e("step_1", "lookup", Default),
                e("lookup", "handoff", Outcome),
                e("lookup", "confirm", Default),
                e("confirm", "handoff", Llm),
                e("confirm", "done", Default),
            ]
        );
        assert_eq!(
            terminals(&d),
            [
                ("done", TerminalKind::Complete, None),
                ("handoff", TerminalKind::Handoff, Some("Bringing in a teammate.")),
                ("expired", TerminalKind::Complete, Some("Sorry, the warranty has lapsed.")),
            ]
        );
        let s1 = &d.steps[0];
        assert_eq!(
            s1.instruction,
            "Ask for the appliance {{slot.serial}} and when it was bought ({{slot.purchase_date}})."
        );
        let field = &d.transitions[0];
        assert_eq!((field.field_ref.as_deref(), field.field_op), (Some("purchase_date"), Some(FieldOp::OlderThan)));
        assert_eq!((field.field_value.clone(), field.field_unit.map(|u| u.as_str())), (Some(2.into()), Some("years")));
        let lookup = &d.steps[1];
        assert_eq!(
            (lookup.tool_ref.as_deref(), lookup.instruction.as_str()),
            (Some("warranty_lookup"), "Check the unit:")
        );
        assert_eq!(lookup.metadata.outline_label.as_deref(), Some("Lookup"));
        assert_eq!(lookup.metadata.mode.as_deref(), Some("typed"));
        assert_eq!(
            lookup.metadata.input_bindings,
            [
                InputBinding::VariableRef { name: "serial_no".into(), variable: "serial".into() },
                InputBinding::ContextVariableRef { name: "region".into(), context_variable: "store_region".into() },
            ]
        );
        assert_eq!(lookup.metadata.output_assignments[0].variable, "is_eligible");
        assert_eq!(d.transitions[2].outcome_status.as_deref(), Some("failed"));
        assert_eq!(d.transitions[4].guard_text.as_deref(), Some("The customer wants a human"));
        let mut slots: Vec<(&str, SlotType, bool)> =
            d.slots.iter().map(|s| (s.key.as_str(), s.slot_type, s.required)).collect();
        slots.sort_by_key(|s| s.0);
        // The output-assignment target alone is not a slot.
        assert_eq!(
            slots,
            [
                ("photos_ok", SlotType::Boolean, false),
                ("purchase_date", SlotType::Date, true),
                ("serial", SlotType::Text, true)
            ]
        );
        let export = d.completion_export.as_ref().map(|x| (x.trigger_kinds.clone(), x.destination_ref.as_str()));
        assert_eq!(
            export,
            Some((vec![TerminalKind::Handoff, TerminalKind::Complete], "3f0c8d2e-1111-4aaa-8bbb-0123456789ab"))
        );
    }
}

#[test]
fn example_b_compiles() {
    use GuardKind::*;
    let d = compiled(B_OUT);
    assert_eq!(d.activation.reentry_mode, ReentryMode::Always);
    assert_eq!(steps(&d), [("collect", StepKind::Chat), ("review", StepKind::Approval), ("pay", StepKind::Action)]);
    assert_eq!(
        edges(&d),
        [
            e("collect", "pay", Field),
            e("collect", "review", Default),
            e("review", "pay", Field),
            e("review", "declined", Field),
            e("pay", "done", Default)
        ]
    );
    let review = &d.steps[1];
    assert_eq!(review.capture_key.as_deref(), Some("refund_call"));
    assert_eq!(review.instruction, "Say a manager must check the refund.");
    assert!(review.metadata.decision);
    let options: Vec<_> =
        review.options.iter().map(|o| (o.id.as_str(), o.label.as_str(), o.description.as_deref())).collect();
    assert_eq!(options, [("approve", "Approve refund", None), ("deny", "Decline", Some("Explain why"))]);
    let decision = &d.transitions[2];
    assert_eq!(
        (decision.field_ref.as_deref(), decision.field_op, decision.field_value.clone()),
        (Some("refund_call.id"), Some(FieldOp::Equals), Some("approve".into()))
    );
    let pay = &d.steps[2];
    assert_eq!((pay.instruction.as_str(), pay.action_type.as_deref()), ("Pay", Some("contact.send")));
    assert_eq!(
        terminals(&d),
        [
            ("done", TerminalKind::Complete, Some("Your refund request is closed.")),
            ("declined", TerminalKind::Complete, Some("We could not approve this refund."))
        ]
    );
    let slots: Vec<_> = d.slots.iter().map(|s| (s.key.as_str(), s.slot_type, s.mutable)).collect();
    assert_eq!(
        slots,
        [("order_ref", SlotType::Text, true), ("amount", SlotType::Number, false), ("contact", SlotType::Email, false)]
    );
    assert_eq!(compiled(B_IN), d);
}

#[test]
fn example_c_compiles() {
    use GuardKind::*;
    let d = compiled(C_OUT);
    assert_eq!(d.activation.reentry_mode, ReentryMode::OncePerConversation);
    assert_eq!(
        steps(&d),
        [
            ("step_1", StepKind::Chat),
            ("step_2", StepKind::Approval),
            ("send_code", StepKind::Tool),
            ("verify", StepKind::Chat)
        ]
    );
    assert_eq!(
        edges(&d),
        [
            e("step_1", "desk", Llm),
            e("step_1", "step_2", Default),
            e("step_2", "send_code", Field),
            e("step_2", "desk", Field),
            e("send_code", "verify", Default),
            e("verify", "unlocked", SlotFilled),
            e("verify", "send_code", Counter),
            e("verify", "done", Default),
        ]
    );
    assert!(!d.steps[1].metadata.decision);
    assert_eq!(d.steps[1].instruction, "Tell the user a teammate is reviewing the request.");
    assert_eq!(d.transitions[5].guard_text.as_deref(), Some("{{slot.otp_code}}"));
    assert_eq!(d.transitions[6].counter_limit, Some(2));
    assert_eq!(d.steps[2].metadata.mode.as_deref(), Some("untyped"));
    assert_eq!(
        terminals(&d),
        [
            ("done", TerminalKind::Complete, None),
            ("desk", TerminalKind::Handoff, Some("Our support desk will contact you.")),
            ("unlocked", TerminalKind::Complete, Some("Your account is unlocked.")),
        ]
    );
    let mut input = compiled(C_IN);
    // Only the slot order differs: the input declares mobile and otp_code first.
    input.slots.sort_by(|a, b| a.key.cmp(&b.key));
    let mut canonical = d.clone();
    canonical.slots.sort_by(|a, b| a.key.cmp(&b.key));
    for s in input.slots.iter_mut().chain(canonical.slots.iter_mut()) {
        s.ordinal = 0;
    }
    assert_eq!(input, canonical);
}

#[test]
fn examples_project_back_byte_for_byte() {
    for (_, canonical) in EXAMPLES {
        assert_eq!(project(&compiled(canonical)).as_deref(), Ok(canonical));
    }
}

#[test]
fn empty_and_untitled_documents() {
    let d = compiled("");
    assert_eq!(
        (d.name.as_str(), d.activation.trigger_description.as_str()),
        ("Untitled routine", "When this routine applies.")
    );
    assert!(d.steps.is_empty());
    assert_eq!(terminals(&d), [("done", TerminalKind::Complete, None)]);
    assert_eq!(canonicalize("").as_deref(), Ok("---\ngrammar: 1\nname: \ntrigger: \n---\n"));
    assert_eq!(canonicalize("---\n---\n\n\n").as_deref(), Ok("---\ngrammar: 1\nname: \ntrigger: \n---\n"));
    // Interior blank lines stay; a trailing heading stays.
    assert_eq!(
        canonicalize("a\n\nb\n# T\n\n").as_deref(),
        Ok("---\ngrammar: 1\nname: \ntrigger: \n---\na\n\nb\n# T\n")
    );
    // No closing fence: everything is frontmatter.
    assert_eq!(canonicalize("---\nname: x\nhello").as_deref(), Ok("---\ngrammar: 1\nname: x\ntrigger: \n---\n"));
}

#[test]
fn compile_rules() {
    // A heading's body lines join; a branch line between them does not split the body.
    let d = compiled(&doc("# Ask\nFirst @a.\n-> handoff\nThen more.\n# 2nd try\n#look\n"));
    assert_eq!(d.steps[0].instruction, "First {{slot.a}}.\nThen more.");
    assert_eq!(steps(&d), [("ask", StepKind::Chat), ("_2nd_try", StepKind::Tool)]);
    assert_eq!(d.steps[1].instruction, "2nd try");
    // A chip alone names the step; branch lines before any step are dropped.
    let d = compiled(&doc("-> handoff\n#lookup\n[action notify.team]\n"));
    assert_eq!(steps(&d), [("step_1", StepKind::Tool), ("step_2", StepKind::Action)]);
    assert_eq!((d.steps[0].instruction.as_str(), d.steps[1].instruction.as_str()), ("lookup", "notify.team"));
    assert!(d.terminals.iter().all(|t| t.kind == TerminalKind::Complete));
    // Branch lines after an approval block gate are dropped; nothing chains out of it.
    let d = compiled(&doc("[approval ok: y=\"Y\" -> end, n=\"N\" -> handoff]\n-> end:never\nNext\n"));
    assert_eq!(
        edges(&d),
        [
            e("step_1", "done", GuardKind::Field),
            e("step_1", "handoff", GuardKind::Field),
            e("step_2", "done", GuardKind::Default)
        ]
    );
    assert_eq!(d.steps[0].instruction, "ok");
    // `end:<primary>` is the primary; a named ending's first message wins.
    let d = compiled("---\nend: fin\n---\nA\n-> end:fin\n-> end:x\n-> end:x (\"m\")\n-> end:x (\"n\")\n");
    assert_eq!(terminals(&d), [("fin", TerminalKind::Complete, None), ("x", TerminalKind::Complete, Some("m"))]);
    // Step precedence on a line with several targets; a dotted field ref is not a slot.
    let d = compiled(&doc("A\n[if out.status = ok] -> handoff -> step:a\n"));
    assert_eq!(edges(&d)[0], e("step_1", "a", GuardKind::Field));
    assert!(d.slots.is_empty());
    // A bare `[if ref]` is an LLM guard on the line's prose; the routine never reads the ref, so it
    // is no slot (nor is a guard on a line without a target).
    let d = compiled(&doc("A\n[if stray = 1] here\nIf they @mention a refund [if wants_refund] -> handoff\n"));
    let t = &d.transitions[1];
    assert_eq!((t.guard_kind, t.guard_text.as_deref()), (GuardKind::Llm, Some("If they {{slot.mention}} a refund")));
    assert_eq!(d.slots.iter().map(|s| s.key.as_str()).collect::<Vec<_>>(), ["mention"]);
}

fn existing() -> Definition {
    let mut d = compiled(C_OUT);
    d.completion_export = Some(CompletionExport {
        enabled: false,
        trigger_kinds: vec![TerminalKind::Complete],
        destination_ref: "dest".into(),
    });
    d.enabled = false;
    d.exposure = Some(Exposure { enabled: true, tool_name: "unlock".into(), description: "d".into() });
    d.terminals[0].stable_step_id = "finished".into();
    d.terminals[0].instruction = Some("Bye.".into());
    for t in &mut d.transitions {
        if t.to_ref == "done" {
            t.to_ref = "finished".into();
        }
    }
    d.slots[0].description = Some("Why they are locked out".into());
    d
}

#[test]
fn an_update_keeps_what_the_document_leaves_out() {
    let old = existing();
    let text = "---\nname: N\ntrigger: t\n---\nAsk for @reason.\nNo -> handoff\n";
    let new = compile_onto(&old, &parse(text).unwrap_or_default());
    assert_eq!(new.completion_export, old.completion_export);
    assert_eq!((new.enabled, &new.exposure), (false, &old.exposure));
    assert_eq!(
        terminals(&new),
        [
            ("finished", TerminalKind::Complete, Some("Bye.")),
            ("desk", TerminalKind::Handoff, Some("Our support desk will contact you."))
        ]
    );
    assert_eq!(new.transitions.last().map(|t| t.to_ref.as_str()), Some("finished"));
    assert_eq!(new.slots[0].description.as_deref(), Some("Why they are locked out"));
    let mut gated = old.clone();
    gated.activation.gate_ref = Some("gate-1".into());
    assert_eq!(compile_onto(&gated, &parse(text).unwrap_or_default()).activation.gate_ref.as_deref(), Some("gate-1"));
    // What the document writes wins.
    let text = "---\nname: N\ntrigger: t\nexport: complete -> d2\nend: done\nhandoff: handoff\n---\nA\nNo -> handoff\n";
    let new = compile_onto(&old, &parse(text).unwrap_or_default());
    assert_eq!(new.completion_export.as_ref().map(|x| x.destination_ref.as_str()), Some("d2"));
    assert_eq!(
        terminals(&new),
        [("done", TerminalKind::Complete, None), ("handoff", TerminalKind::Handoff, Some("Bringing in a teammate."))]
    );
    // The projection of the changed routine reads back onto it unchanged.
    let text = project(&old).unwrap_or_default();
    assert!(text.contains("end: finished (\"Bye.\")"), "{text}");
    let doc = parse(&text).unwrap_or_default();
    assert!(doc.has_end() && doc.has_handoff() && !doc.has_export());
}

fn why(d: &Definition) -> String {
    project(d).err().map(|e| e.to_string()).unwrap_or_default()
}

#[test]
fn what_markdown_cannot_express() {
    let base = compiled(C_OUT);
    let mut d = base.clone();
    d.activation.gate_ref = Some("g".into());
    assert!(why(&d).contains("activation gate"), "{}", why(&d));
    let mut d = base.clone();
    let mut second = d.terminals[1].clone();
    second.stable_step_id = "desk2".into();
    d.terminals.push(second);
    assert!(why(&d).contains("more than one handoff"));
    let mut d = compiled(A_OUT);
    d.transitions.retain(|t| t.to_ref != "handoff");
    assert!(why(&d).contains("handoff terminal `handoff`"));
    let mut d = compiled(A_OUT);
    d.transitions.retain(|t| t.to_ref != "expired");
    assert!(why(&d).contains("terminal `expired`"));
    let mut d = compiled(B_OUT);
    for t in &mut d.transitions {
        for end in [&mut t.from_step, &mut t.to_ref] {
            if end == "pay" {
                *end = "Pay Now".into();
            }
        }
    }
    d.steps[2].stable_step_id = "Pay Now".into();
    d.steps[2].metadata.outline_label = None;
    assert!(why(&d).contains("no heading produces"), "{}", why(&d));
    // Prose that would read back as a token.
    let mut d = compiled(B_OUT);
    d.steps[0].instruction = "Ask about [FAQ]".into();
    assert!(why(&d).contains("does not read back"), "{}", why(&d));
    // A default branch somewhere markdown would not put it.
    let mut d = compiled(B_OUT);
    d.transitions[1].to_ref = "pay".into();
    assert!(why(&d).contains("default branch"), "{}", why(&d));
    assert_eq!(project(&d).err().map(|e| e.diagnostic().code), Some("routine_not_portable"));
}

#[test]
fn structured_routines_get_headings_where_needed() {
    let mut d = compiled(&doc("One\nTwo\n-> step:step_1 (max 3)\n"));
    // Ids that are not `step_<n>` get a heading made from the id; steps after it too.
    d.steps[0].stable_step_id = "greet_customer".into();
    for t in &mut d.transitions {
        for end in [&mut t.from_step, &mut t.to_ref] {
            if end == "step_1" {
                *end = "greet_customer".into();
            }
        }
    }
    d.activation = Activation {
        trigger_description: "t".into(),
        gate_ref: None,
        priority: -3,
        reentry_mode: ReentryMode::Semantic,
    };
    let text = project(&d).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        text,
        "---\ngrammar: 1\nname: R\ntrigger: t\nreentry: semantic\npriority: -3\n---\n# Greet Customer\nOne\n# Step 2\nTwo\n-> step:greet_customer (max 3)\n"
    );
}

#[test]
fn a_structured_routine_projects_and_reads_back_onto_itself() {
    let def: Definition = serde_json::from_value(serde_json::json!({
        "name": "Returns",
        "activation": {"triggerDescription": "the customer wants to return an item", "priority": 2},
        "slots": [{"stableSlotId": "s-email", "key": "email", "type": "email", "required": true, "description": "Customer email", "ordinal": 5}],
        "steps": [
            {"stableStepId": "ask", "kind": "chat", "instruction": "What is your {{slot.email}}?", "ordinal": 10},
            {"stableStepId": "lookup", "kind": "tool", "instruction": "Look the order up", "toolRef": "crm", "ordinal": 20,
             "metadata": {"inputBindings": [{"kind": "variableRef", "name": "email", "variable": "email"}]}}
        ],
        "transitions": [
            {"fromStep": "lookup", "toRef": "human", "guardKind": "outcome", "outcomeStatus": "failed", "ordinal": 1},
            {"fromStep": "ask", "toRef": "lookup", "guardKind": "default", "ordinal": 0},
            {"fromStep": "lookup", "toRef": "finished", "guardKind": "default", "ordinal": 2}
        ],
        "terminals": [
            {"stableStepId": "human", "kind": "handoff", "ordinal": 0},
            {"stableStepId": "finished", "kind": "complete", "instruction": "Thanks!", "ordinal": 1}
        ]
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    let text = project(&def).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        text,
        "---\ngrammar: 1\nname: Returns\ntrigger: the customer wants to return an item\npriority: 2\nend: finished (\"Thanks!\")\n\
         handoff: human\nvars: email:email\n---\n# Ask\nWhat is your @email?\n# Lookup\nLook the order up #crm[in email=@email]\n\
         [outcome failed] -> handoff\n"
    );
    // Read back onto the routine (a PUT of the same text): ids and descriptions stay.
    let again = compile_onto(&def, &parse(&text).unwrap_or_default());
    assert_eq!(again.slots[0].stable_slot_id, "s-email");
    assert_eq!(again.slots[0].description.as_deref(), Some("Customer email"));
    assert_eq!(again.terminal("human").and_then(|t| t.instruction.as_deref()), Some("Bringing in a teammate."));
}
