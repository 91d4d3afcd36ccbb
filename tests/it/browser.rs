//! The operator dashboard in a real browser (headless Debian Chromium through chromedriver),
//! against the real binary: the first-run flow end to end, every page checked by axe-core for
//! serious or critical accessibility violations and by the console for CSP violations and errors,
//! and a screenshot of each page (under `target/dashboard-shots/`, looked at by people).

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::e2e::Server;
use crate::fixtures;
use crate::webdriver::{Browser, Driver, ENTER, ESCAPE, TAB};

const AXE: &str = include_str!("../vendor/axe.min.js");

pub(crate) fn shots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("../dashboard-shots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub(crate) fn tid(id: &str) -> String {
    format!("[data-testid={id}]")
}

/// Serious or critical axe-core violations on the current page, as `rule: targets`.
pub(crate) async fn axe(b: &Browser) -> Vec<String> {
    if b.js("return typeof window.axe", json!([])).await != "object" {
        b.js(AXE, json!([])).await;
    }
    let r = b
        .js_async("const r = await axe.run(document, {resultTypes: ['violations']}); return r.violations;", json!([]))
        .await;
    r.as_array()
        .unwrap()
        .iter()
        .filter(|v| matches!(v["impact"].as_str(), Some("serious" | "critical")))
        .map(|v| {
            let targets: Vec<String> = v["nodes"].as_array().unwrap().iter().map(|n| n["target"].to_string()).collect();
            format!("{}: {}", v["id"], targets.join(" "))
        })
        .collect()
}

/// CSP violations and script errors in the console since the last check. A resource the API
/// answered with a 4xx on purpose is not an error of the page.
pub(crate) async fn console_problems(b: &Browser) -> Vec<String> {
    b.console()
        .await
        .into_iter()
        .filter(|l| {
            l.contains("Content Security Policy") || (l.contains("SEVERE") && !l.contains("Failed to load resource"))
        })
        .collect()
}

/// Clicks the first element matching `css` after scrolling it to the middle of the window (the
/// sticky top bar and save bars cover the edges).
pub(crate) async fn click_at(b: &Browser, css: &str) {
    let el = b.find(css).await;
    b.js("document.querySelector(arguments[0]).scrollIntoView({block: 'center'})", json!([css])).await;
    el.click().await;
}

/// Clicks the element with `data-testid` `testid` (see [`click_at`]).
pub(crate) async fn click(b: &Browser, testid: &str) {
    click_at(b, &tid(testid)).await;
}

/// Signs in on the dashboard at `base` as the bootstrapped owner and waits for the home page.
pub(crate) async fn sign_in_as_root(b: &Browser, base: &str) {
    b.go(&format!("{base}/")).await;
    b.tid("signin-email").await.send("root@example.com").await;
    b.tid("signin-password").await.send("root-password").await;
    click(b, "signin-submit").await;
    b.tid("documents-card").await;
}

/// Checks the page that is showing: axe, console, screenshot.
pub(crate) async fn check_page(b: &Browser, name: &str, problems: &mut Vec<String>) {
    b.until("document.getElementById('page-title') && !document.querySelector('[aria-busy=true]')").await;
    for v in axe(b).await {
        problems.push(format!("{name}: axe {v}"));
    }
    for c in console_problems(b).await {
        problems.push(format!("{name}: console {c}"));
    }
    b.screenshot(&shots().join(format!("{name}.png"))).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dashboard_first_run_flow_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    let base = server.base.clone();
    let files = dir.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let pdf = files.join("returns.pdf");
    std::fs::write(
        &pdf,
        fixtures::pdf(&["Returns policy. Items can be returned within 30 days of delivery for a full refund."]),
    )
    .unwrap();
    let docx = files.join("shipping.docx");
    std::fs::write(
        &docx,
        fixtures::docx("Shipping", &["Orders ship within two business days by tracked courier."], &[] as &[&[&str]]),
    )
    .unwrap();
    let broken = files.join("broken.pdf");
    std::fs::write(&broken, b"%PDF-1.7 this is not really a pdf").unwrap();

    let driver = Driver::start();
    let b = driver.session().await;
    let mut problems = Vec::new();

    // first-run registration: the first person becomes the owner
    b.go(&format!("{base}/")).await;
    check_page(&b, "signin", &mut problems).await;
    b.tid("show-register").await.click().await;
    b.tid("register-email").await.send("owner@example.com").await;
    b.tid("register-password").await.send("a long password").await;
    b.tid("register-name").await.send("Olivia Owner").await;
    b.tid("register-submit").await.click().await;
    b.tid("upload-input").await;

    // upload a PDF and a DOCX; watch each file's status and the ingestion progress move
    b.js(
        "window.__seen = new Set(); new MutationObserver(() => {
           document.querySelectorAll('[data-testid=upload-item]').forEach(e => window.__seen.add(e.dataset.status));
           if (document.querySelector('[data-testid=ingestion-progress]')) window.__seen.add('progress-shown');
         }).observe(document.body, {subtree: true, childList: true, attributes: true});",
        json!([]),
    )
    .await;
    let paths = format!("{}\n{}", pdf.display(), docx.display());
    b.tid("upload-input").await.send(&paths).await;
    b.until("document.querySelectorAll('[data-testid=upload-item][data-status=ready]').length === 2").await;
    let seen = b.js("return Array.from(window.__seen)", json!([])).await;
    let seen: Vec<&str> = seen.as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(seen.iter().any(|s| matches!(*s, "uploading" | "queued" | "processing")), "no progress seen: {seen:?}");
    assert!(seen.contains(&"progress-shown"), "the ingestion progress was never shown: {seen:?}");
    b.until("document.querySelectorAll('[data-testid=doc-row]').length >= 2").await;
    check_page(&b, "documents", &mut problems).await;

    // a failing upload shows its reason
    b.tid("upload-input").await.send(&broken.display().to_string()).await;
    let reason = b.tid("upload-failure").await.text().await;
    assert!(reason.to_lowercase().contains("pdf"), "failure reason: {reason}");

    // search and open a result
    b.go(&format!("{base}/app/search")).await;
    b.tid("search-query").await.send("refund returned items").await;
    b.tid("search-submit").await.click().await;
    b.tid("search-result").await;
    assert!(b.count(&format!("{} mark", tid("search-result"))).await > 0, "no highlighted terms");
    check_page(&b, "search", &mut problems).await;
    b.tid("search-result-link").await.click().await;
    b.tid("document-page").await;
    check_page(&b, "document", &mut problems).await;

    // create an agent, add a skill and a directive with a #chip, publish
    b.go(&format!("{base}/app/agents")).await;
    b.tid("agent-name").await.send("Support").await;
    b.tid("agent-create").await.click().await;
    b.tid("agent-page").await;
    let agent_url = b.current_url().await;
    check_page(&b, "agent-settings", &mut problems).await;
    b.tid("agent-tab-skills").await.click().await;
    b.tid("skill-new").await.click().await;
    b.tid("skill-name").await.send("policy_lookup").await;
    b.tid("skill-invocation").await.select("agent_selectable").await;
    b.tid("skill-save").await.click().await;
    b.tid("skill-row").await;
    check_page(&b, "agent-skills", &mut problems).await;
    b.tid("agent-tab-directives").await.click().await;
    b.tid("directive-new").await.click().await;
    b.tid("directive-name").await.send("returns").await;
    b.tid("directive-condition").await.send("questions about returns and refunds").await;
    let action = b.tid("directive-action").await;
    action.send("Use #pol").await;
    b.tid("chip-option").await;
    action.send("\u{E007}").await; // Enter picks the highlighted skill
    action.send(" for returns.").await;
    assert!(action.value().await.contains("#policy_lookup"), "autocomplete: {}", action.value().await);
    let binding = b.tid("binding-result").await.text().await;
    assert!(binding.contains("policy_lookup"), "binding result: {binding}");
    b.tid("directive-save").await.click().await;
    b.find(&format!("{}[data-status=bound]", tid("directive-chip"))).await;
    check_page(&b, "agent-directives", &mut problems).await;
    b.tid("agent-tab-revisions").await.click().await;
    b.tid("revision-review").await.click().await;
    b.tid("revision-changes").await;
    check_page(&b, "agent-revisions", &mut problems).await;
    b.tid("revision-publish").await.click().await;
    b.until("document.querySelector('[data-testid=agent-revision-status]')?.textContent.trim() === 'published'").await;

    // test chat streams an answer through its stages; the citation opens the document
    b.tid("agent-test-chat").await.click().await;
    b.js(
        "window.__stages = new Set(); window.__waited = false; new MutationObserver(() => {
           document.querySelectorAll('[data-testid=chat-stage]').forEach(e => window.__stages.add(e.dataset.stage));
           if (document.querySelector('[data-testid=chat-stage-waiting]')) window.__waited = true;
         }).observe(document.body, {subtree: true, childList: true, attributes: true});",
        json!([]),
    )
    .await;
    b.tid("chat-input").await.send("How long do I have to return items?").await;
    b.tid("chat-send").await.click().await;
    b.tid("citation").await;
    let stages = b.js("return Array.from(window.__stages)", json!([])).await;
    assert!(stages.as_array().unwrap().len() >= 2, "streamed stages: {stages}");
    // "waiting for the model" is for a turn queued behind another local generation, never a
    // turn just sent (the built-in answerer has no model to wait for)
    assert_eq!(b.js("return window.__waited", json!([])).await, json!(false));
    let answer = b.tid("chat-answer").await.text().await;
    assert!(answer.contains("30 days"), "answer: {answer}");
    b.tid("coverage-badge").await;
    b.tid("grounding-badge").await;
    check_page(&b, "chat", &mut problems).await;
    // the draft answers in a private test execution, streamed through the same stages
    b.tid("chat-target").await.select("draft").await;
    b.until("!document.querySelector('[data-testid=chat-assistant-message]')").await;
    b.js("window.__stages.clear()", json!([])).await;
    b.tid("chat-input").await.send("How long do I have to return items?").await;
    b.tid("chat-send").await.click().await;
    b.tid("citation").await;
    let stages = b.js("return Array.from(window.__stages)", json!([])).await;
    assert!(stages.as_array().unwrap().len() >= 2, "the draft's streamed stages: {stages}");
    b.tid("citation").await.click().await;
    b.tid("document-page").await;

    // every other page: axe, console, screenshot
    for (name, path) in [
        ("sources", "/app/sources"),
        ("agents", "/app/agents"),
        ("context-variables", "/app/context-variables"),
        ("conversations", "/app/conversations"),
        ("quality", "/app/quality"),
        ("inbox", "/app/inbox"),
        ("notifications", "/app/settings/notifications"),
        ("channels", "/app/settings/channels"),
        ("deliveries", "/app/settings/deliveries"),
        ("ingestion", "/app/settings/ingestion"),
        ("document-types", "/app/settings/document-types"),
        ("models", "/app/settings/models"),
        ("retrieval", "/app/settings/retrieval"),
        ("usage", "/app/settings/usage"),
        ("members", "/app/org/members"),
        ("workspaces", "/app/org/workspaces"),
        ("service-credentials", "/app/org/service-credentials"),
        ("audit", "/app/org/audit"),
        ("profile", "/app/profile"),
    ] {
        b.go(&format!("{base}{path}")).await;
        check_page(&b, name, &mut problems).await;
    }

    // a member sees no manage controls, and a direct manage request is refused
    let invitation = b
        .js_async(
            "const r = await fetch('/api/v1/account/invitations', {method: 'POST', headers: {'content-type': 'application/json'},
               body: JSON.stringify({role: 'member'})}); return await r.json();",
            json!([]),
        )
        .await;
    let token = invitation["token"].as_str().unwrap_or_else(|| panic!("invitation: {invitation}")).to_string();
    b.tid("user-menu").await.click().await;
    b.tid("sign-out").await.click().await;
    b.tid("signin-email").await;
    b.delete_cookies().await;
    b.go(&format!("{base}/app/join#token={token}")).await;
    b.tid("register-email").await.send("member@example.com").await;
    b.tid("register-password").await.send("a long password").await;
    b.tid("register-submit").await.click().await;
    b.tid("doc-row").await;
    // members manage documents but not agents
    b.go(&format!("{base}/app/agents")).await;
    b.tid("agent-row").await;
    assert_eq!(b.count(&tid("agent-create")).await, 0, "a member sees the create-agent control");
    b.go(&format!("{agent_url}/directives")).await;
    b.tid("directive-row").await;
    assert_eq!(b.count(&tid("directive-new")).await, 0, "a member sees the new-directive control");
    check_page(&b, "member-directives", &mut problems).await;
    let status = b
        .js_async(
            "const r = await fetch('/api/v1/agents', {method: 'POST', headers: {'content-type': 'application/json'},
               body: JSON.stringify({name: 'Sneaky'})}); return r.status;",
            json!([]),
        )
        .await;
    assert_eq!(status, 403, "a member's manage request");

    b.quit().await;
    assert!(problems.is_empty(), "dashboard problems:\n{}", problems.join("\n"));
    server.terminate();
}

/// Every dashboard response carries the security headers; assets are cached by hash.
/// Every action of the core flow works from the keyboard alone: sign in, open a dialog, fill it and
/// submit, close a dialog with Escape (focus returns to its opener), move between pages from the
/// sidebar, create an agent. Nothing here clicks.
#[tokio::test(flavor = "multi_thread")]
async fn dashboard_works_from_the_keyboard() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    crate::e2e::bootstrap(&data);
    let server = Server::start(&data, &[]);
    let base = server.base.clone();
    let driver = Driver::start();
    let b = driver.session().await;
    b.go(&format!("{base}/")).await;
    b.tab_to("signin-email").await;
    b.keys(&format!("root@example.com{TAB}root-password{ENTER}")).await;
    b.tid("documents-card").await;

    // a dialog: opened with Enter, filled with Tab, submitted with Enter; focus moves into it
    b.tab_to("create-text-open").await;
    b.keys(ENTER).await;
    b.tid("create-text-dialog").await;
    b.until("document.querySelector('[data-testid=create-text-dialog]').contains(document.activeElement)").await;
    b.tab_to("create-text-title").await;
    b.keys(&format!("Opening hours{TAB}We are open from nine to five on weekdays.")).await;
    b.tab_to("create-text-submit").await;
    b.keys(ENTER).await;
    b.until("!document.querySelector('dialog[open]')").await;
    b.tid("document-page").await;
    b.until("document.getElementById('page-title').textContent === 'Opening hours'").await;
    b.tab_to("nav-documents").await;
    b.keys(ENTER).await;
    b.until(
        "Array.from(document.querySelectorAll('[data-testid=doc-link]')).some(a => a.textContent === 'Opening hours')",
    )
    .await;

    // Escape closes a dialog and gives focus back to what opened it
    b.tab_to("create-text-open").await;
    b.keys(ENTER).await;
    b.until("!!document.querySelector('dialog[open]')").await;
    b.keys(ESCAPE).await;
    b.until("!document.querySelector('dialog[open]')").await;
    assert_eq!(b.focused().await, "create-text-open", "focus returns to the opener");

    // the sidebar, then a form submitted with Enter
    b.tab_to("nav-agents").await;
    b.keys(ENTER).await;
    b.tid("agent-name").await;
    b.tab_to("agent-name").await;
    b.keys(&format!("Keyboard agent{ENTER}")).await;
    b.tid("agent-page").await;
    assert!(b.current_url().await.contains("/app/agents/"), "the new agent opens");
    b.quit().await;
    server.terminate();
}

/// The inbox live: a retrieval-miss handoff appears without a reload, the operator replies, the
/// visitor's next message gets no AI reply (and shows up live), hand back, the next one does.
#[tokio::test(flavor = "multi_thread")]
async fn the_inbox_takes_over_a_handoff_live_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = crate::e2e::bootstrap(&data);
    let server = Server::start(&data, &[]);
    let base = server.base.clone();
    let api = crate::e2e::Api::new(&base, &token);
    let agent = api.configure_default_agent(json!({"handoffOnRetrievalMiss": true})).await;
    let chat = |body: Value| {
        let api = &api;
        async move { api.call(reqwest::Method::POST, "/api/v1/chat", Some(body)).await }
    };
    let driver = Driver::start();
    let b = driver.session().await;
    let mut problems = Vec::new();
    sign_in_as_root(&b, &base).await;
    b.tid("nav-inbox").await.click().await;
    b.until("document.querySelector('[data-testid=inbox-live]')?.textContent === 'Live'").await;

    // a visitor's question nothing answers: the handoff appears live
    let v = chat(json!({"message": "Do you repair vintage radios?"})).await;
    let cid = v["conversationId"].as_str().unwrap().to_string();
    b.find("[data-testid=inbox-item][data-kind=handoff][data-held=nobody]").await.click().await;
    b.tid("inbox-conversation").await;
    check_page(&b, "inbox-handoff", &mut problems).await;
    // the operator replies (and so takes the conversation over)
    b.tid("inbox-reply-input").await.send("Hello! Yes, we repair radios from the 1950s on.").await;
    b.tid("inbox-reply-send").await.click().await;
    b.find("[data-testid=inbox-message][data-source=human_agent]").await;
    b.find("[data-testid=inbox-item][data-held=me]").await;
    // the visitor answers: no AI reply, and the message appears live
    let v = chat(json!({"message": "Great, how much does it cost?", "conversationId": cid})).await;
    assert_eq!(v["ownership"], json!({"state": "human_owned", "suppressed": true}));
    assert_eq!(v["answer"], "");
    b.until("Array.from(document.querySelectorAll('[data-testid=inbox-message]')).some(m => m.textContent.includes('how much does it cost'))").await;
    b.screenshot(&shots().join("inbox.png")).await;
    // hand back: the item leaves the inbox, and the agent answers the next message
    b.tid("inbox-handback").await.click().await;
    b.until("!document.querySelector('[data-testid=inbox-item]')").await;
    let v = chat(json!({"message": "Are you open on Saturdays?", "conversationId": cid})).await;
    assert_eq!(v["ownership"]["suppressed"], false);

    // a delivering skill is tested from its page; the outcome is shown and the delivery logged
    let skill = json!({"name": "order_hook", "capability": "webhook_call",
        "config": {"url": "https://hooks.example/orders", "exposedPayload": ["orderId"]}});
    api.call(reqwest::Method::POST, &format!("/api/v1/agents/{agent}/skills"), Some(skill)).await;
    b.go(&format!("{base}/app/agents/{agent}/skills")).await;
    b.tid("skill-test").await.click().await;
    b.tid("skill-test-dialog").await;
    b.js("const t = document.querySelector('[data-testid=skill-test-inputs]'); t.value = ''; t.dispatchEvent(new Event('input', {bubbles: true}));", json!([])).await;
    b.tid("skill-test-inputs").await.send(r#"{"orderId": "A-17"}"#).await;
    b.tid("skill-test-send").await.click().await;
    let result = b.tid("skill-test-result").await.text().await;
    assert!(result.contains("delivered"), "{result}");
    check_page(&b, "skill-test", &mut problems).await;
    assert!(problems.is_empty(), "{problems:#?}");
    b.quit().await;
    server.terminate();
}

#[tokio::test(flavor = "multi_thread")]
async fn dashboard_responses_carry_strict_headers() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    let http = reqwest::Client::new();
    let page = http.get(format!("{}/app/documents", server.base)).send().await.unwrap();
    let h = page.headers().clone();
    let html = page.text().await.unwrap();
    let csp = h["content-security-policy"].to_str().unwrap();
    for part in ["default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"] {
        assert!(csp.contains(part), "{csp}");
    }
    assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"), "{csp}");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert!(h.contains_key("referrer-policy"));
    assert!(!html.contains("<script>") && !html.contains("style="), "inline script or style in the shell");
    let start = html.find("/assets/").unwrap();
    let asset = &html[start..html[start..].find('"').unwrap() + start];
    let r = http.get(format!("{}{asset}", server.base)).header("accept-encoding", "gzip").send().await.unwrap();
    assert_eq!(r.status(), 200, "{asset}");
    // the prefix names the build: /assets/<12 hex>/…, so a release build caches it for a year
    let build = asset.split('/').nth(2).unwrap();
    assert!(build.len() == 12 && build.chars().all(|c| c.is_ascii_hexdigit()), "{asset}");
    let etag = r.headers()["etag"].clone();
    let again = http.get(format!("{}{asset}", server.base)).header("if-none-match", etag).send().await.unwrap();
    assert_eq!(again.status(), 304, "{asset}");
    server.terminate();
}

/// Figures for docs/performance.md (run with `cargo test --release --test it -- --ignored
/// dashboard_figures --nocapture`): the bytes of a cold load of the documents page (gzipped, as
/// served) and the time from navigation to the first page of a 1,000-document list rendered.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "a benchmark: run by hand for docs/performance.md"]
async fn dashboard_figures() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = crate::e2e::bootstrap(&data);
    let server = Server::start(&data, &[]);
    let base = server.base.clone();
    let http = reqwest::Client::new();
    for k in 0..1000 {
        let body =
            json!({"title": format!("Document {k:04}"), "content": format!("Note {k}: opening hours and returns.")});
        let r = http.post(format!("{base}/api/v1/document/")).bearer_auth(&token).json(&body).send().await.unwrap();
        assert!(r.status().is_success(), "{}", r.status());
    }
    let driver = Driver::start();
    let b = driver.session().await;
    b.go(&format!("{base}/")).await;
    b.tid("signin-email").await.send("root@example.com").await;
    b.tid("signin-password").await.send("root-password").await;
    b.tid("signin-submit").await.click().await;
    b.tid("doc-row").await;
    // bytes: every resource of this cold load (the sign-in page, then the documents page in the
    // same document), as transferred (gzipped)
    let bytes = b
        .js(
            "return performance.getEntriesByType('resource').concat(performance.getEntriesByType('navigation'))
               .filter(e => !e.name.includes('/api/')).reduce((n, e) => n + (e.encodedBodySize || 0), 0)",
            json!([]),
        )
        .await;
    let mut times = Vec::new();
    for _ in 0..11 {
        b.go(&format!("{base}/app/documents")).await;
        let t = b.until("document.querySelectorAll('[data-testid=doc-row]').length >= 50 && performance.now()").await;
        times.push(t.as_f64().unwrap());
    }
    times.sort_by(|a, c| a.partial_cmp(c).unwrap());
    println!("cold load of sign-in + documents page: {bytes} bytes of HTML/JS/CSS/icons as transferred (gzipped)");
    println!(
        "navigation to 50 of 1,000 documents rendered: p50 {:.0} ms, min {:.0}, max {:.0}",
        times[5], times[0], times[10]
    );
    b.quit().await;
    server.terminate();
}
