//! Routines in the dashboard, in a real browser against the real binary: the agent's Routines tab
//! (markdown with live grammar diagnostics, Format, save, the server's refusals, the drawn
//! diagram, the switch, a routine markdown cannot express, delete), webhook destinations (the
//! secret shown once, rotation, a delete refused while a routine exports to it), a routine's status
//! in test chat, and an approval decided from the Inbox (a stale proposal explained first).

use reqwest::Method;
use serde_json::{Value, json};

use crate::browser::{check_page, click, click_at, shots, sign_in_as_root, tid};
use crate::e2e::{Api, Server, bootstrap};
use crate::webdriver::{Browser, Driver};

const KEY: &str = "5f4dcc3b5aa765d61d8327deb882cf995f4dcc3b5aa765d61d8327deb882cf99";
const RIGHT: &str = "\u{E014}";
const DELETE: &str = "\u{E017}";

/// A routine with a typo on line 8 (`[iff`) and a line that is not canonical (`]->`).
const NEWSLETTER_TYPO: &str = "---
name: Newsletter signup
trigger: visitor wants to subscribe to the newsletter
vars: email:email, confirmed:boolean
---
# Ask
Ask for the @email address to subscribe.
[iff email is present]-> step:check
The visitor wants a person -> handoff
# Check
Ask the visitor to confirm the subscription to @email with yes or no (@confirmed).
[if confirmed is false] -> end:cancelled (\"No problem, nothing was changed.\")
# Verify
Say the address @email will get a confirmation link.
-> step:check (max 2)
";

/// Replaces the value of the field with this `data-testid` at once (an `input` event, as typing
/// would fire).
async fn set_value(b: &Browser, testid: &str, text: &str) {
    b.js(
        "const e = document.querySelector(`[data-testid=${arguments[0]}]`); e.focus(); e.value = arguments[1];
         e.dispatchEvent(new Event('input', {bubbles: true}));",
        json!([testid, text]),
    )
    .await;
}

/// Clicks the button with this `data-testid` in the routine row named `name`.
async fn click_row(b: &Browser, name: &str, testid: &str) {
    let n = b
        .js(
            "const rows = Array.from(document.querySelectorAll('[data-testid=routine-row]'));
             const i = rows.findIndex(r => r.querySelector('[data-testid=routine-name]').textContent === arguments[0]);
             return i + 1;",
            json!([name]),
        )
        .await;
    let n = n.as_u64().unwrap();
    assert!(n > 0, "no routine row named {name}");
    click_at(b, &format!("[data-testid=routine-row]:nth-child({n}) [data-testid={testid}]")).await;
}

async fn publish(api: &Api, agent: &str) {
    let state = api.call(Method::GET, &format!("/api/v1/agents/{agent}/revision-state"), None).await;
    let g = state["draft"]["generation"].as_i64().unwrap();
    let cand = api
        .call(
            Method::POST,
            &format!("/api/v1/agents/{agent}/revisions/candidates"),
            Some(json!({"expectedDraftGeneration": g})),
        )
        .await;
    let body = json!({"expectedDraftGeneration": g, "expectedPublishedRevisionId": state["publishedRevision"]["id"],
        "idempotencyKey": format!("routines-page-{g}")});
    let path = format!("/api/v1/agents/{agent}/revisions/{}/publish", cand["id"].as_str().unwrap());
    api.call(Method::POST, &path, Some(body)).await;
}

fn edge(from: &str, to: &str, kind: &str, ordinal: i64, extra: Value) -> Value {
    let mut v = json!({"fromStep": from, "toRef": to, "guardKind": kind, "ordinal": ordinal});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

/// A refund of at least 50 waits for a manager's approval (tests/it/routines.rs has its twin).
fn refund_routine(destination: &str) -> Value {
    json!({
        "name": "Refund",
        "activation": {"triggerDescription": "shopper asks for a refund of money on an order"},
        "slots": [
            {"stableSlotId": "amount", "key": "amount", "type": "number", "required": true, "ordinal": 1},
            {"stableSlotId": "contact", "key": "contact", "type": "email", "required": true, "ordinal": 2},
        ],
        "steps": [
            {"stableStepId": "collect", "kind": "chat", "ordinal": 1,
             "instruction": "Tell me the refund {{slot.amount}} and a {{slot.contact}} address."},
            {"stableStepId": "review", "kind": "approval", "ordinal": 2, "captureKey": "refund_call",
             "instruction": "A manager must check this refund; you will hear back here.",
             "options": [{"id": "approve", "label": "Approve refund"}, {"id": "deny", "label": "Decline", "description": "Explain why"}]},
            {"stableStepId": "pay", "kind": "action", "ordinal": 3, "actionType": "refund.pay", "instruction": "Pay"},
        ],
        "transitions": [
            edge("collect", "pay", "field", 1, json!({"fieldRef": "amount", "fieldOp": "lt", "fieldValue": 50})),
            edge("collect", "review", "default", 2, json!({})),
            edge("review", "pay", "field", 1, json!({"fieldRef": "refund_call.id", "fieldOp": "equals", "fieldValue": "approve"})),
            edge("review", "declined", "field", 2, json!({"fieldRef": "refund_call.id", "fieldOp": "equals", "fieldValue": "deny"})),
            edge("pay", "done", "default", 1, json!({})),
        ],
        "terminals": [
            {"stableStepId": "done", "kind": "complete", "ordinal": 1, "instruction": "Your refund of {{slot.amount}} is on its way."},
            {"stableStepId": "declined", "kind": "complete", "ordinal": 2, "instruction": "We could not approve this refund."},
        ],
        "completionExport": {"enabled": true, "triggerKinds": ["complete"], "destinationRef": destination},
    })
}

/// Nine steps of every kind, skips, a loop and three endings: the diagram stays readable.
fn large_routine() -> Value {
    let tool = |id: &str, ordinal: i64, instruction: &str| {
        json!({"stableStepId": id, "kind": "tool", "ordinal": ordinal, "instruction": instruction, "toolRef": "order_lookup",
               "metadata": {"inputBindings": [{"kind": "literal", "name": "query", "value": "Where is my order?"}]}})
    };
    let slot = |key: &str, t: &str, required: bool, ordinal: i64| json!({"stableSlotId": key, "key": key, "type": t, "required": required, "ordinal": ordinal});
    let option = |value: &str| json!({"fieldRef": "decision.id", "fieldOp": "equals", "fieldValue": value});
    json!({
        "name": "Damaged or late order",
        "enabled": false,
        "activation": {"triggerDescription": "customer reports a damaged or late parcel and wants compensation"},
        "slots": [slot("order_ref", "text", true, 1), slot("issue", "text", true, 2), slot("photos_ok", "boolean", false, 3), slot("code", "text", false, 4)],
        "steps": [
            {"stableStepId": "greet", "kind": "chat", "ordinal": 1, "instruction": "Ask for the {{slot.order_ref}} of the parcel.", "metadata": {"outlineLabel": "Greet"}},
            tool("lookup", 2, "Look up the order"),
            {"stableStepId": "classify", "kind": "chat", "ordinal": 3, "instruction": "Ask whether the parcel arrived damaged or late ({{slot.issue}})."},
            {"stableStepId": "photos", "kind": "chat", "ordinal": 4, "instruction": "Ask if they can send photos of the damage ({{slot.photos_ok}})."},
            tool("track", 5, "Track the parcel"),
            {"stableStepId": "explain", "kind": "chat", "ordinal": 6, "instruction": "Explain the delay and ask whether that is acceptable."},
            {"stableStepId": "review", "kind": "approval", "ordinal": 7, "captureKey": "decision", "instruction": "A teammate reviews the compensation.",
             "options": [{"id": "approve", "label": "Refund"}, {"id": "deny", "label": "Refuse"}, {"id": "escalate", "label": "Escalate"}]},
            {"stableStepId": "refund", "kind": "action", "ordinal": 8, "actionType": "refund.pay", "instruction": "Pay the refund"},
            {"stableStepId": "confirm", "kind": "chat", "ordinal": 9, "instruction": "Ask for the six letter {{slot.code}} from the confirmation email."},
        ],
        "transitions": [
            edge("greet", "handoff", "llm", 1, json!({"guardText": "The customer wants to talk to a person"})),
            edge("greet", "lookup", "default", 2, json!({})),
            edge("lookup", "handoff", "outcome", 1, json!({"outcomeStatus": "failed"})),
            edge("lookup", "classify", "default", 2, json!({})),
            edge("classify", "photos", "field", 1, json!({"fieldRef": "issue", "fieldOp": "equals", "fieldValue": "damaged"})),
            edge("classify", "track", "field", 2, json!({"fieldRef": "issue", "fieldOp": "equals", "fieldValue": "late"})),
            edge("classify", "review", "default", 3, json!({})),
            edge("photos", "review", "default", 1, json!({})),
            edge("track", "explain", "default", 1, json!({})),
            edge("explain", "done", "llm", 1, json!({"guardText": "The customer accepts the explanation"})),
            edge("explain", "review", "default", 2, json!({})),
            edge("review", "refund", "field", 1, option("approve")),
            edge("review", "declined", "field", 2, option("deny")),
            edge("review", "handoff", "field", 3, option("escalate")),
            edge("refund", "confirm", "default", 1, json!({})),
            edge("confirm", "done", "slot_filled", 1, json!({"guardText": "{{slot.code}}"})),
            edge("confirm", "confirm", "counter", 2, json!({"counterLimit": 3})),
            edge("confirm", "handoff", "default", 3, json!({})),
        ],
        "terminals": [
            {"stableStepId": "done", "kind": "complete", "ordinal": 1, "instruction": "Thanks, all sorted."},
            {"stableStepId": "declined", "kind": "complete", "ordinal": 2, "instruction": "We cannot compensate this order."},
            {"stableStepId": "handoff", "kind": "handoff", "ordinal": 3},
        ],
    })
}

async fn text_of(b: &Browser, css: &str) -> String {
    b.find(css).await.text().await
}

#[tokio::test(flavor = "multi_thread")]
async fn routines_destinations_and_approvals_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = bootstrap(&data);
    let server = Server::start(&data, &[("CONNECTOR_ENCRYPTION_KEY", KEY), ("STEWARD_DELIVERY_ALLOW", "127.0.0.1/32")]);
    let base = server.base.clone();
    let api = Api::new(&base, &token);
    let agents = api.call(Method::GET, "/api/v1/agents", None).await;
    let agent = agents["agents"][0]["id"].as_str().unwrap().to_string();

    let driver = Driver::start();
    let b = driver.session().await;
    let mut problems = Vec::new();
    sign_in_as_root(&b, &base).await;

    // ---- the Routines tab: a new routine from markdown, with a typo
    b.go(&format!("{base}/app/agents/{agent}")).await;
    click(&b, "agent-tab-routines").await;
    b.tid("routines-card").await;
    b.tid("empty-state").await;
    let note = b.tid("routines-draft-note").await.text().await;
    assert!(note.contains("draft") && note.contains("publish"), "{note}");
    check_page(&b, "agent-routines-empty", &mut problems).await;
    click(&b, "routine-new").await;
    b.tid("routine-editor").await;
    // the template is a valid routine, and the editor has focus
    b.until("document.querySelector('[data-testid=routine-check]')?.dataset.state === 'ok'").await;
    assert_eq!(b.focused().await, "routine-markdown");
    set_value(&b, "routine-markdown", NEWSLETTER_TYPO).await;
    b.find("[data-testid=routine-diagnostic][data-line='8']").await;
    let diag = text_of(&b, "[data-testid=routine-diagnostic][data-line='8']").await;
    assert!(diag.starts_with("Line 8 — unknown_bracket_token — "), "{diag}");
    assert_eq!(b.count(&tid("routine-diagnostic")).await, 1);
    check_page(&b, "routines-editor", &mut problems).await;
    // clicking the diagnostic puts the caret on its line
    click_at(&b, "[data-testid=routine-diagnostic][data-line='8']").await;
    let at = b
        .js(
            "const t = document.activeElement; return t.dataset.testid === 'routine-markdown'
               ? t.value.slice(0, t.selectionStart).split('\\n').length : 0",
            json!([]),
        )
        .await;
    assert_eq!(at, 8, "the caret goes to line 8");
    // fix it as the operator would type: `[iff` → `[if`; the diagnostic goes away live
    b.keys(&format!("{RIGHT}{RIGHT}{RIGHT}{DELETE}")).await;
    b.until("document.querySelector('[data-testid=routine-check]')?.dataset.state === 'ok'").await;
    assert_eq!(b.count(&tid("routine-diagnostic")).await, 0);
    // Format writes the canonical text (grammar line, ` -> ` spacing)
    click(&b, "routine-format").await;
    b.until("document.querySelector('[data-testid=routine-markdown]').value.startsWith('---\\ngrammar: 1\\n')").await;
    let md = b.tid("routine-markdown").await.value().await;
    assert!(md.contains("[if email is present] -> step:check\n"), "{md}");
    click(&b, "routine-save").await;
    b.until("!document.querySelector('[data-testid=routine-editor]')").await;
    b.tid("routine-row").await;
    assert_eq!(b.tid("routine-name").await.text().await, "Newsletter signup");

    // the diagram: three step boxes, three endings, seven transitions (also as a table)
    b.tid("rt-diagram-svg").await;
    assert_eq!(b.count("[data-testid=rt-diagram-svg] [data-testid=rt-step]").await, 3);
    assert_eq!(b.count("[data-testid=rt-diagram-svg] [data-testid=rt-terminal]").await, 3);
    assert_eq!(b.count("[data-testid=rt-diagram-svg] [data-testid=rt-edge]").await, 7);
    assert_eq!(b.count(&tid("rt-transition")).await, 7);
    let svg_label =
        b.js("return document.querySelector('[data-testid=rt-diagram-svg] > title').textContent", json!([])).await;
    assert!(svg_label.as_str().unwrap().contains("3 steps"), "{svg_label}");
    let table = b.tid("rt-transitions").await.text().await;
    assert!(table.contains("max 2") && table.contains("confirmed is false"), "{table}");
    b.js("document.querySelector('[data-testid=routine-diagram-card]').scrollIntoView({block: 'start'}); window.scrollBy(0, -70)", json!([])).await;
    check_page(&b, "routine-diagram", &mut problems).await;

    // the same name and version again: 409, explained; an invalid graph: the server's findings
    click(&b, "routine-new").await;
    b.tid("routine-editor").await;
    set_value(&b, "routine-markdown", &md).await;
    click(&b, "routine-save").await;
    let conflict = b.tid("routine-conflict").await.text().await;
    assert!(conflict.contains("already exists"), "{conflict}");
    let broken =
        md.replace("name: Newsletter signup", "name: Broken").replace("-> step:check (max 2)", "-> step:nowhere");
    set_value(&b, "routine-markdown", &broken).await;
    b.until("document.querySelector('[data-testid=routine-check]')?.dataset.state === 'ok'").await;
    click(&b, "routine-save").await;
    let finding = text_of(&b, "[data-testid=routine-finding][data-code=dangling_step_reference]").await;
    assert!(finding.contains("transition:verify->nowhere"), "{finding}");
    check_page(&b, "routines-editor-refused", &mut problems).await;
    // closing with unsaved text asks first
    click(&b, "routine-cancel").await;
    click(&b, "confirm-ok").await;
    b.until("!document.querySelector('dialog[open]')").await;

    // the switch disables it in the draft
    click(&b, "routine-enabled").await;
    b.until("document.querySelector('[data-testid=routine-enabled]')?.checked === false && !document.querySelector('[data-testid=routine-enabled]').disabled").await;
    let list = api.call(Method::GET, &format!("/api/v1/agents/{agent}/routines"), None).await;
    assert_eq!(list["routines"][0]["enabled"], false, "{list}");

    // a routine markdown cannot express opens read-only, as JSON; Delete asks first
    let mut gated = list["routines"][0]["definition"].clone();
    gated["name"] = json!("Gated");
    gated["activation"]["gateRef"] = json!("manager_gate");
    api.call(Method::POST, &format!("/api/v1/agents/{agent}/routines"), Some(json!({"definition": gated}))).await;
    b.go(&format!("{base}/app/agents/{agent}/routines")).await;
    b.until("document.querySelectorAll('[data-testid=routine-row]').length === 2").await;
    click_row(&b, "Gated", "routine-edit").await;
    let ro = b.tid("routine-readonly").await.text().await;
    assert!(ro.contains("cannot express") && ro.contains("manager_gate"), "{ro}");
    check_page(&b, "routine-readonly", &mut problems).await;
    click(&b, "routine-readonly-close").await;
    b.until("!document.querySelector('dialog[open]')").await;
    click_row(&b, "Gated", "routine-delete").await;
    click(&b, "confirm-ok").await;
    b.until("document.querySelectorAll('[data-testid=routine-row]').length === 1").await;

    // a large routine (disabled, so it never starts) is still readable
    let skill = json!({"name": "order_lookup", "capability": "retrieve", "invocationMode": "routine_named"});
    api.call(Method::POST, &format!("/api/v1/agents/{agent}/skills"), Some(skill)).await;
    api.call(Method::POST, &format!("/api/v1/agents/{agent}/routines"), Some(json!({"definition": large_routine()})))
        .await;
    b.go(&format!("{base}/app/agents/{agent}/routines")).await;
    b.until("document.querySelectorAll('[data-testid=routine-row]').length === 2").await;
    click_row(&b, "Damaged or late order", "routine-show").await;
    b.until("document.querySelectorAll('[data-testid=rt-diagram-svg] [data-testid=rt-step]').length === 9").await;
    assert_eq!(b.count("[data-testid=rt-diagram-svg] [data-testid=rt-edge]").await, 18);
    b.js("document.querySelector('[data-testid=routine-diagram-card]').scrollIntoView({block: 'start'}); window.scrollBy(0, -70)", json!([]))
        .await;
    check_page(&b, "routine-diagram-large", &mut problems).await;
    b.js("window.scrollBy(0, 640)", json!([])).await;
    b.screenshot(&shots().join("routine-diagram-large-2.png")).await;

    // ---- webhook destinations: create (the secret once), rotate, edit
    click(&b, "nav-webhook-destinations").await;
    b.tid("destinations-card").await;
    b.tid("signature-help").await;
    click(&b, "destination-new").await;
    b.tid("destination-dialog").await;
    b.tid("destination-name-input").await.send("Refund desk").await;
    b.tid("destination-url-input").await.send("http://hooks.example.com/refunds").await;
    click(&b, "destination-save").await;
    let err = b.find("[data-testid=destination-dialog] [data-testid=field-error]").await.text().await;
    assert!(err.contains("https"), "{err}");
    set_value(&b, "destination-url-input", "https://hooks.example.com/refunds").await;
    click(&b, "destination-save").await;
    b.tid("destination-secret-dialog").await;
    let warning = b.tid("destination-secret-warning").await.text().await;
    assert!(warning.contains("won't see it again"), "{warning}");
    let secret = b.tid("secret-value").await.value().await;
    assert!(secret.len() >= 32, "{secret}");
    assert_eq!(b.focused().await, "secret-value", "focus goes to the secret");
    check_page(&b, "destination-secret", &mut problems).await;
    click(&b, "destination-secret-done").await;
    b.until("!document.querySelector('dialog[open]')").await;
    b.tid("destination-row").await;
    let page = b.js("return document.body.innerText", json!([])).await;
    assert!(!page.as_str().unwrap().contains(&secret), "the secret is shown only once");
    assert_eq!(b.tid("destination-status").await.text().await, "never");
    // rotating asks first, then shows the new secret once
    click(&b, "destination-rotate").await;
    click(&b, "confirm-ok").await;
    b.tid("destination-secret-dialog").await;
    let rotated = b.tid("secret-value").await.value().await;
    assert!(rotated.len() >= 32 && rotated != secret, "a new secret");
    click(&b, "destination-secret-done").await;
    b.until("!document.querySelector('dialog[open]')").await;
    click(&b, "destination-edit").await;
    set_value(&b, "destination-name-input", "Refund desk (CRM)").await;
    click(&b, "destination-save").await;
    b.until("document.querySelector('[data-testid=destination-name]')?.textContent === 'Refund desk (CRM)'").await;
    check_page(&b, "webhook-destinations", &mut problems).await;

    // a routine exports to it: deleting is refused, naming the routine
    let dests = api.call(Method::GET, "/api/v1/settings/webhook-destinations", None).await;
    let dest = dests["destinations"][0]["id"].as_str().unwrap().to_string();
    api.call(
        Method::POST,
        &format!("/api/v1/agents/{agent}/routines"),
        Some(json!({"definition": refund_routine(&dest)})),
    )
    .await;
    publish(&api, &agent).await;
    click(&b, "destination-delete").await;
    click(&b, "confirm-ok").await;
    assert_eq!(b.tid("destination-user").await.text().await, "Refund");
    check_page(&b, "destination-in-use", &mut problems).await;

    // ---- test chat shows the routine's status
    b.go(&format!("{base}/app/chat?agent={agent}")).await;
    b.tid("chat-input").await.send("I want a refund for my order").await;
    click(&b, "chat-send").await;
    b.find("[data-testid=chat-routine][data-status=waiting_for_input]").await;
    assert_eq!(b.tid("chat-routine-name").await.text().await, "Refund");
    assert_eq!(b.tid("chat-routine-pending").await.text().await, "Waiting for: amount, contact");
    b.tid("chat-input").await.send("It is 120, my email is bo@example.com").await;
    click(&b, "chat-send").await;
    b.find("[data-testid=chat-routine][data-status=waiting_for_approval]").await;
    let status =
        text_of(&b, "[data-testid=chat-routine][data-status=waiting_for_approval] [data-testid=chat-routine-status]")
            .await;
    assert_eq!(status, "waiting for approval");
    check_page(&b, "chat-routine", &mut problems).await;

    // ---- the approval in the Inbox: a stale proposal is explained, then the decision resumes the routine
    click(&b, "nav-inbox").await;
    b.until("document.querySelector('[data-testid=inbox-live]')?.textContent === 'Live'").await;
    let item = "[data-testid=inbox-item][data-kind=approval]";
    b.find(item).await;
    assert_eq!(
        text_of(&b, &format!("{item} [data-testid=approval-reason]")).await,
        "A manager must check this refund; you will hear back here."
    );
    assert_eq!(b.count(&format!("{item} [data-testid=approval-option]")).await, 2);
    let conv_link = format!("{item} [data-testid=approval-conversation]");
    b.find(&conv_link).await;
    let link = b.js("return document.querySelector(arguments[0]).getAttribute('href')", json!([conv_link])).await;
    let cid = link.as_str().unwrap().trim_start_matches("/app/inbox/").to_string();
    click_at(&b, &conv_link).await;
    b.tid("inbox-approval").await;
    b.until("document.querySelectorAll('[data-testid=inbox-message]').length === 4").await;
    check_page(&b, "inbox-approval", &mut problems).await;
    // the next resolve goes out with an outdated content hash (as if the proposal changed meanwhile)
    b.js(
        "const real = window.fetch; window.fetch = (u, o) => {
           if (String(u).includes('/resolve') && o && o.body) {
             window.fetch = real;
             const body = JSON.parse(o.body); body.contentHash = '0'.repeat(64);
             o = {...o, body: JSON.stringify(body)};
           }
           return real(u, o);
         };",
        json!([]),
    )
    .await;
    click_at(&b, &format!("{item} [data-testid=approval-option][data-option=approve]")).await;
    let stale = text_of(&b, &format!("{item} [data-testid=approval-note]")).await;
    assert!(stale.contains("changed"), "{stale}");
    click_at(&b, &format!("{item} [data-testid=approval-option][data-option=approve]")).await;
    b.until(&format!("!document.querySelector('{item}')")).await;
    let h = api.call(Method::GET, &format!("/api/v1/history/chat/{cid}"), None).await;
    let last = h["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["text"], "Your refund of 120 is on its way.", "{h}");

    // another one arrives live (no reload) and is declined
    let v = api
        .call(
            Method::POST,
            "/api/v1/chat",
            Some(json!({"message": "I need a refund of 300 on my order, email cy@example.com"})),
        )
        .await;
    assert_eq!(v["routine"]["status"], "waiting_for_approval", "{v}");
    click_at(&b, &format!("{item} [data-testid=approval-option][data-option=deny]")).await;
    b.until(&format!("!document.querySelector('{item}')")).await;
    let cid = v["conversationId"].as_str().unwrap();
    let h = api.call(Method::GET, &format!("/api/v1/history/chat/{cid}"), None).await;
    assert_eq!(h["messages"].as_array().unwrap().last().unwrap()["text"], "We could not approve this refund.");
    b.screenshot(&shots().join("inbox-approval-done.png")).await;

    // the Routines tab warns that the Refund routine's export is skipped while the agent's exports are off
    b.go(&format!("{base}/app/agents/{agent}/routines")).await;
    b.until("document.querySelectorAll('[data-testid=routine-row]').length === 3").await;
    let warn = b.tid("routines-exports-off").await.text().await;
    assert!(warn.contains("skipped"), "{warn}");
    check_page(&b, "agent-routines", &mut problems).await;
    click_at(&b, "[data-testid=routines-exports-off] button").await;
    b.until("!document.querySelector('[data-testid=routines-exports-off]')").await;
    let a = api.call(Method::GET, &format!("/api/v1/agents/{agent}"), None).await;
    assert_eq!(a["webhookExportsEnabled"], true);

    b.quit().await;
    assert!(problems.is_empty(), "dashboard problems:\n{}", problems.join("\n"));
    server.terminate();
}

/// Without CONNECTOR_ENCRYPTION_KEY a destination cannot be created: the page says why and how to fix it.
#[tokio::test(flavor = "multi_thread")]
async fn destinations_explain_a_missing_encryption_key() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    bootstrap(&data);
    let server = Server::start(&data, &[]);
    let base = server.base.clone();
    let driver = Driver::start();
    let b = driver.session().await;
    let mut problems = Vec::new();
    sign_in_as_root(&b, &base).await;
    b.go(&format!("{base}/app/settings/webhook-destinations")).await;
    b.tid("empty-state").await;
    click(&b, "destination-new").await;
    b.tid("destination-name-input").await.send("CRM").await;
    b.tid("destination-url-input").await.send("https://crm.example.com/hooks/steward").await;
    click(&b, "destination-save").await;
    let why = b.tid("encryption-not-configured").await.text().await;
    assert!(why.contains("CONNECTOR_ENCRYPTION_KEY") && why.contains("restart"), "{why}");
    check_page(&b, "destination-no-key", &mut problems).await;
    b.quit().await;
    assert!(problems.is_empty(), "dashboard problems:\n{}", problems.join("\n"));
    server.terminate();
}
