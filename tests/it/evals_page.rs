//! The Evals page in a real browser against the real binary: an answer saved as an eval case from
//! the conversation page (which then offers "Open eval case", as the inbox's conversation view
//! does), an assertion on a document the answer retrieved added and saved, a bad assertion's field
//! error shown on its row, the case run (pass, with each verdict's reason and the retrieved
//! chunks), and every case run as a suite with its progress, the summary tiles and the pass-rate
//! chart; axe on each page.

use reqwest::Method;
use serde_json::{Value, json};

use crate::browser::{check_page, click, click_at, shots, sign_in_as_root};
use crate::e2e::{Api, Server, bootstrap};
use crate::webdriver::{Browser, Driver};

/// Replaces the value of the element matching `css` (an `input` event, as typing fires).
async fn set_value(b: &Browser, css: &str, text: &str) {
    b.find(css).await;
    b.js(
        "const e = document.querySelector(arguments[0]); e.focus(); e.value = arguments[1];
         e.dispatchEvent(new Event('input', {bubbles: true}));",
        json!([css, text]),
    )
    .await;
}

/// Chooses `value` in the select matching `css` (a `change` event, as a choice fires).
async fn choose(b: &Browser, css: &str, value: &str) {
    b.find(css).await;
    b.js(
        "const e = document.querySelector(arguments[0]); e.value = arguments[1];
         e.dispatchEvent(new Event('change', {bubbles: true}));",
        json!([css, value]),
    )
    .await;
}

/// A screenshot with the element matching `css` at the top of the window.
async fn scroll_shot(b: &Browser, css: &str, name: &str) {
    b.find(css).await;
    // (the toasts would cover the bottom right)
    b.js("document.querySelectorAll('[data-testid=toasts] .toast-close').forEach(x => x.click())", json!([])).await;
    b.js(
        "document.querySelector(arguments[0]).scrollIntoView({block: 'start'}); window.scrollBy(0, -70)",
        json!([css]),
    )
    .await;
    b.screenshot(&shots().join(format!("{name}.png"))).await;
}

async fn wait_idle(api: &Api) {
    loop {
        let p = api.call(Method::GET, "/api/v1/document/progress?waitMs=30000", None).await;
        if p["idle"] == true {
            break;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_evals_page_saves_an_answer_edits_assertions_and_runs_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = bootstrap(&data);
    let server = Server::start(&data, &[]);
    let base = server.base.clone();
    let api = Api::new(&base, &token);
    for (title, content) in [
        (
            "Returns policy",
            "Returns policy. Items can be returned within 30 days of delivery for a full refund. Sale items can be returned for store credit only.",
        ),
        (
            "Shipping",
            "Shipping. Orders ship within two business days by tracked courier; express delivery takes one day.",
        ),
        (
            "Opening hours",
            "Opening hours. The shop is open from nine to five on weekdays and from ten to two on Saturdays.",
        ),
    ] {
        api.call(Method::POST, "/api/v1/document/", Some(json!({"title": title, "content": content}))).await;
    }
    wait_idle(&api).await;
    let chat =
        api.call(Method::POST, "/api/v1/chat", Some(json!({"message": "How long do I have to return items?"}))).await;
    let cid = chat["conversationId"].as_str().unwrap().to_string();
    let mid = chat["messageId"].as_str().unwrap().to_string();

    let driver = Driver::start();
    let b = driver.session().await;
    let mut problems = Vec::new();
    sign_in_as_root(&b, &base).await;

    // no cases yet: the empty state says where cases come from
    click(&b, "nav-evals").await;
    let empty = b.tid("empty-state").await.text().await;
    assert!(empty.contains("Save as eval case"), "{empty}");
    check_page(&b, "evals-empty", &mut problems).await;

    // the conversation page: save the answer, land on its case
    b.go(&format!("{base}/app/conversations/{cid}")).await;
    b.tid("history-message").await;
    assert_eq!(b.count("[data-testid=save-eval-case]").await, 1, "one assistant answer, one save button");
    check_page(&b, "evals-conversation", &mut problems).await;
    click(&b, "save-eval-case").await;
    b.tid("eval-case").await;
    let url = b.current_url().await;
    assert!(url.contains("/app/evals?case="), "{url}");
    let saved = api.call(Method::GET, &format!("/api/v1/evals/cases/by-source-message/{mid}"), None).await;
    let case_id = saved["case"]["id"].as_str().unwrap().to_string();
    assert!(url.ends_with(&case_id), "{url}");
    let retrieved: Vec<Value> = saved["snapshot"]["originalRetrievalResult"].as_array().unwrap().clone();
    let returns = retrieved
        .iter()
        .find(|c| c["title"] == "Returns policy")
        .unwrap_or_else(|| panic!("the answer retrieved no returns policy: {retrieved:?}"));
    let doc = returns["documentId"].as_str().unwrap().to_string();
    // the frozen conversation and what the answer retrieved
    b.until("document.querySelectorAll('[data-testid=snapshot-message]').length === 2").await;
    assert!(b.count("[data-testid=snapshot-chunk]").await >= 1);
    b.tid("assertions-empty").await;

    // an assertion on a document the answer retrieved, picked from the snapshot's documents first
    click(&b, "assertion-add").await;
    b.tid("assertion-row").await;
    let first_group =
        b.js("return document.querySelector('[data-testid=assertion-document] optgroup').label", json!([])).await;
    assert_eq!(first_group, "Retrieved for the saved answer");
    choose(&b, "[data-testid=assertion-row][data-index='0'] [data-testid=assertion-document]", &doc).await;
    b.tid("case-dirty").await;
    click(&b, "case-save").await;
    b.until("document.querySelector('[data-testid=case-editor]')?.dataset.dirty === 'false' && document.querySelectorAll('[data-testid=assertion-row]').length === 1").await;
    let c = api.call(Method::GET, &format!("/api/v1/evals/cases/{case_id}"), None).await;
    assert_eq!(c["assertions"], json!([{"type": "retrieval_includes_document", "documentId": doc}]), "{c}");

    // a bad assertion: k = 0 is refused, and the message sits on that row's k field
    click(&b, "assertion-add").await;
    let row = "[data-testid=assertion-row][data-index='1']";
    choose(&b, &format!("{row} [data-testid=assertion-type]"), "retrieval_top_k_includes_document").await;
    choose(&b, &format!("{row} [data-testid=assertion-document]"), &doc).await;
    set_value(&b, &format!("{row} [data-testid=assertion-k]"), "0").await;
    click(&b, "case-save").await;
    let err = b.find(&format!("{row} [data-testid=field-error]")).await.text().await;
    println!("k = 0: {err}");
    assert!(err.contains("k must be 1 to 100"), "{err}");
    assert_eq!(b.count("[data-testid=assertion-row][data-index='0'] [data-testid=field-error]").await, 0);
    let invalid = b
        .js(
            &format!("return document.querySelector(\"{row} [data-testid=assertion-k]\").getAttribute('aria-invalid')"),
            json!([]),
        )
        .await;
    assert_eq!(invalid, "true");
    b.js(
        "document.querySelector(\"[data-testid=assertion-row][data-index='1']\").scrollIntoView({block: 'center'})",
        json!([]),
    )
    .await;
    check_page(&b, "evals-case-error", &mut problems).await;
    // an empty pattern is refused on its row too
    choose(&b, &format!("{row} [data-testid=assertion-type]"), "answer_contains").await;
    click(&b, "case-save").await;
    b.until(&format!(
        "document.querySelector(\"{row} [data-testid=assertion-pattern]\")?.getAttribute('aria-invalid') === 'true'"
    ))
    .await;
    let err = b.find(&format!("{row} [data-testid=field-error]")).await.text().await;
    assert!(err.contains("pattern"), "{err}");
    click_at(&b, &format!("{row} [data-testid=assertion-remove]")).await;
    b.until("document.querySelector('[data-testid=case-editor]')?.dataset.dirty === 'false'").await;
    assert_eq!(b.count("[data-testid=field-error]").await, 0);

    // run it: retrieval only, a pass with the verdict's reason and the chunks it retrieved
    click(&b, "case-run").await;
    b.find("[data-testid=run-detail] [data-testid=run-summary][data-status=pass]").await;
    let reason = b.tid("verdict-reason").await.text().await;
    println!("verdict: {reason}");
    assert!(!reason.trim().is_empty());
    assert!(b.count("[data-testid=run-verdict][data-status=pass]").await == 1);
    assert!(b.count(&format!("[data-testid=run-chunk][data-document='{doc}']")).await >= 1);
    b.find("[data-testid=eval-case][data-status=passing]").await;
    b.find("[data-testid=case-run-item][data-status=pass]").await;
    check_page(&b, "evals-case", &mut problems).await;
    scroll_shot(&b, "[data-testid=run-detail]", "evals-case-run").await;
    scroll_shot(&b, "[data-testid=case-snapshot]", "evals-case-snapshot").await;

    // the conversation now opens the case instead of saving it again; so does the inbox's view
    b.go(&format!("{base}/app/conversations/{cid}")).await;
    b.tid("open-eval-case").await;
    assert_eq!(b.count("[data-testid=save-eval-case]").await, 0);
    b.go(&format!("{base}/app/inbox/{cid}")).await;
    b.find("[data-testid=inbox-conversation] [data-testid=open-eval-case]").await;
    b.screenshot(&shots().join("evals-inbox.png")).await;

    // the list: tiles, the case passing, every case run as a suite with its progress
    b.go(&format!("{base}/app/evals")).await;
    b.find("[data-testid=eval-case-row][data-status=passing]").await;
    assert_eq!(b.tid("eval-stat-pass-rate").await.text().await.lines().next().unwrap_or(""), "100%");
    b.tid("pass-rate-empty").await;
    b.js(
        "window.__progress = false; new MutationObserver(() => { if (document.querySelector('[data-testid=suite-status]')) window.__progress = true; })
           .observe(document.body, {subtree: true, childList: true});",
        json!([]),
    )
    .await;
    click(&b, "suite-run").await;
    let result = b.find("[data-testid=suite-result][data-status=completed]").await.text().await;
    println!("suite: {result}");
    assert!(result.contains("1 passed"), "{result}");
    assert_eq!(b.js("return window.__progress", json!([])).await, true, "the suite's progress was never shown");
    b.find("[data-testid=pass-rate-chart] svg[role=img]").await;
    let label = b
        .js("return document.querySelector('[data-testid=pass-rate-chart] svg').getAttribute('aria-label')", json!([]))
        .await;
    assert!(label.as_str().unwrap().contains("100%"), "{label}");
    check_page(&b, "evals-list", &mut problems).await;

    // the document goes: the next suite fails the case, which is marked regressed, and the chart
    // has a second point
    api.call(Method::DELETE, &format!("/api/v1/document/{doc}"), None).await;
    click(&b, "suite-run").await;
    // (the first suite's result shows until the second one starts)
    let result = b
        .until("(document.querySelector('[data-testid=suite-result][data-status=completed]')?.textContent || '').includes('1 failed') && document.querySelector('[data-testid=suite-result]').textContent")
        .await;
    println!("suite after the delete: {result}");
    b.find("[data-testid=suite-regressions]").await;
    b.find("[data-testid=eval-case-row][data-regressed=true][data-status=failing] [data-testid=case-regressed]").await;
    b.until("document.querySelectorAll('[data-testid=pass-rate-chart] circle').length === 2").await;
    assert_eq!(b.tid("eval-stat-failing").await.text().await.lines().next().unwrap_or(""), "1");
    check_page(&b, "evals-list-regressed", &mut problems).await;
    scroll_shot(&b, "[data-testid=cases-card]", "evals-list-cases").await;

    // the case page opened from the list shows the failing run first, with the verdict's reason
    click_at(&b, "[data-testid=eval-case-link]").await;
    b.until("document.querySelectorAll('[data-testid=case-run-item]').length === 3").await;
    b.find("[data-testid=run-summary][data-status=fail]").await;
    let reason = b.tid("verdict-reason").await.text().await;
    println!("failing verdict: {reason}");
    assert!(reason.contains(&doc), "{reason}");
    scroll_shot(&b, "[data-testid=case-runs]", "evals-case-failed").await;

    assert!(problems.is_empty(), "{problems:#?}");
    b.quit().await;
    server.terminate();
}
