//! The agent's Connections tab in a real browser against the real binary: channel credentials for
//! other agents (MCP) and backends (REST) — created with the secret shown once beside a client
//! configuration that carries it, gone after the dialog and a reload, rotated and revoked after a
//! confirmation, and an API refusal shown on the page.

use reqwest::Method;
use serde_json::{Value, json};

use crate::browser::{check_page, click, click_at, shots, sign_in_as_root};
use crate::e2e::{Api, Server, bootstrap};
use crate::webdriver::{Browser, Driver};

/// The CSS of the credential row labelled `label` (waiting for it).
async fn row(b: &Browser, label: &str) -> String {
    let n = b
        .until(&format!(
            "Array.from(document.querySelectorAll('[data-testid=cc-row]'))
               .findIndex(r => r.querySelector('[data-testid=cc-label]').textContent === {}) + 1",
            serde_json::to_string(label).unwrap()
        ))
        .await;
    format!("[data-testid=cc-row]:nth-child({})", n.as_u64().unwrap())
}

/// The question of the confirmation dialog, once it shows.
async fn confirm_text(b: &Browser) -> String {
    let v = b.until("document.querySelector('[data-testid=confirm-dialog][open]')?.textContent").await;
    v.as_str().unwrap().to_string()
}

async fn text_of(b: &Browser, css: &str) -> String {
    b.find(css).await.text().await
}

/// Everything the page shows or holds in a field: its text and the values of its inputs.
async fn page_text(b: &Browser) -> String {
    let v = b
        .js(
            "return document.body.innerText + '\\n' + Array.from(document.querySelectorAll('input, textarea'))
               .map(e => e.value).join('\\n')",
            json!([]),
        )
        .await;
    v.as_str().unwrap().to_string()
}

/// What the page's next Copy put on the clipboard.
async fn copied_by(b: &Browser, testid: &str) -> String {
    b.js("window.__copied = null; navigator.clipboard.writeText = async (t) => { window.__copied = t; };", json!([]))
        .await;
    click(b, testid).await;
    b.until("window.__copied").await.as_str().unwrap().to_string()
}

/// A call with the browser's dashboard session (these routes refuse API tokens); the JSON answer.
async fn session_call(b: &Browser, method: &str, path: &str) -> Value {
    let v = b
        .js_async(
            "const r = await fetch(args[1], {method: args[0], credentials: 'same-origin',
               headers: {'Content-Type': 'application/json'}, body: args[0] === 'GET' ? undefined : '{}'});
             return {status: r.status, body: await r.json()};",
            json!([method, path]),
        )
        .await;
    assert!(v["status"].as_u64().is_some_and(|s| s < 300), "{method} {path}: {v}");
    v["body"].clone()
}

async fn credentials(b: &Browser, agent: &str) -> Vec<Value> {
    let v = session_call(b, "GET", &format!("/api/v1/agents/{agent}/channel-credentials")).await;
    v["credentials"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn channel_credentials_are_made_shown_once_rotated_and_revoked_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = bootstrap(&data);
    let server = Server::start(&data, &[]);
    let base = server.base.clone();
    let api = Api::new(&base, &token);
    let agents = api.call(Method::GET, "/api/v1/agents", None).await;
    let agent = agents["agents"][0]["id"].as_str().unwrap().to_string();

    let driver = Driver::start();
    let b = driver.session().await;
    let mut problems = Vec::new();
    sign_in_as_root(&b, &base).await;

    // ---- the tab: what the credentials are for, nothing yet
    b.go(&format!("{base}/app/agents/{agent}")).await;
    click(&b, "agent-tab-connections").await;
    b.tid("cc-card").await;
    b.tid("empty-state").await;
    let intro = b.tid("cc-intro").await.text().await;
    for part in [format!("{base}/mcp"), "Claude Desktop".into(), "only this agent".into(), "REST".into()] {
        assert!(intro.contains(&part), "{part} not in {intro}");
    }
    b.tid("cc-setup-none").await;
    check_page(&b, "agent-connections-empty", &mut problems).await;

    // ---- create an MCP credential; a missing label is refused next to the field
    click(&b, "cc-new").await;
    b.tid("cc-create-dialog").await;
    click(&b, "cc-create").await;
    let err = text_of(&b, "[data-testid=cc-create-dialog] [data-testid=field-error]").await;
    assert!(err.contains("label"), "{err}");
    b.tid("cc-label-input").await.send("Claude Desktop (Ana)").await;
    click(&b, "cc-create").await;

    // the secret, this once, with the configuration that carries it
    b.tid("cc-secret-dialog").await;
    let warning = b.tid("cc-secret-warning").await.text().await;
    assert!(warning.contains("won't be shown again"), "{warning}");
    let secret = b.tid("cc-secret-value").await.value().await;
    assert!(secret.starts_with("scm_") && secret.len() > 30, "{secret}");
    b.until("document.activeElement?.dataset.testid === 'cc-secret-value'").await;
    let snippet = b.tid("cc-secret-snippet").await.value().await;
    assert!(snippet.contains(&format!("{base}/mcp")) && snippet.contains(&secret), "{snippet}");
    let config: Value = serde_json::from_str(&snippet).unwrap();
    let servers = config["mcpServers"].as_object().unwrap();
    assert_eq!(servers.len(), 1, "{config}");
    let (name, entry) = servers.iter().next().unwrap();
    assert!(
        !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
        "{name}"
    );
    assert_eq!(entry["type"], "http");
    assert_eq!(entry["url"], format!("{base}/mcp"));
    assert_eq!(entry["headers"]["Authorization"], format!("Bearer {secret}"));
    assert_eq!(copied_by(&b, "cc-secret-copy").await, secret);
    assert_eq!(copied_by(&b, "cc-secret-snippet-copy").await, snippet);
    check_page(&b, "agent-connections-secret", &mut problems).await;
    b.screenshot(std::path::Path::new("/tmp/channel-credentials-secret.png")).await;
    click(&b, "cc-secret-done").await;
    b.until("!document.querySelector('dialog[open]')").await;
    // focus goes back to what opened the dialogs
    b.until("document.activeElement?.dataset.testid === 'cc-new'").await;

    // dismissed: the secret is gone, the setup shows a placeholder naming the credential
    let prefix = &secret[..12];
    assert!(!page_text(&b).await.contains(&secret), "the secret is shown only once");
    let setup = b.tid("cc-snippet").await.value().await;
    assert!(
        setup.contains(&format!("{base}/mcp")) && setup.contains(&format!("Bearer <your {prefix}… secret>")),
        "{setup}"
    );

    // after a reload too; the list shows it active
    b.go(&format!("{base}/app/agents/{agent}/connections")).await;
    let ana = row(&b, "Claude Desktop (Ana)").await;
    assert_eq!(text_of(&b, &format!("{ana} [data-testid=cc-status]")).await, "active");
    assert_eq!(text_of(&b, &format!("{ana} [data-testid=cc-audience]")).await, "MCP");
    assert_eq!(text_of(&b, &format!("{ana} [data-testid=cc-prefix]")).await, format!("{prefix}…"));
    assert!(!page_text(&b).await.contains(&secret), "the secret is gone after a reload");
    let list = credentials(&b, &agent).await;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["status"], "active");

    // ---- rotate: asked first (cancelling keeps it), then a new secret, once
    click_at(&b, &format!("{ana} [data-testid=cc-rotate]")).await;
    let message = confirm_text(&b).await;
    assert!(message.contains("stops working at once") && message.contains("new conversation"), "{message}");
    b.find("[data-testid=confirm-dialog] .modal-foot .btn:first-child").await.click().await;
    b.until("!document.querySelector('dialog[open]')").await;
    assert_eq!(credentials(&b, &agent).await[0]["version"], 1);
    click_at(&b, &format!("{ana} [data-testid=cc-rotate]")).await;
    click(&b, "confirm-ok").await;
    b.tid("cc-secret-dialog").await;
    b.tid("cc-rotated-note").await;
    let rotated = b.tid("cc-secret-value").await.value().await;
    assert!(rotated.starts_with("scm_") && rotated != secret, "{rotated}");
    assert!(b.tid("cc-secret-snippet").await.value().await.contains(&rotated));
    click(&b, "cc-secret-done").await;
    b.until("!document.querySelector('dialog[open]')").await;
    assert!(!page_text(&b).await.contains(&rotated));
    assert_eq!(text_of(&b, &format!("{ana} [data-testid=cc-prefix]")).await, format!("{}…", &rotated[..12]));
    let list = credentials(&b, &agent).await;
    assert_eq!((list[0]["version"].as_i64(), list[0]["prefix"].as_str()), (Some(2), Some(&rotated[..12])));

    // ---- a REST credential with an expiry: the curl example
    click(&b, "cc-new").await;
    b.tid("cc-create-dialog").await;
    b.tid("cc-audience-input").await.select("rest").await;
    b.tid("cc-label-input").await.send("Order backend").await;
    b.js(
        "const e = document.querySelector('[data-testid=cc-expires-input]');
         const d = new Date(Date.now() + 30 * 864e5);
         e.value = `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
         e.dispatchEvent(new Event('input', {bubbles: true}));",
        json!([]),
    )
    .await;
    click(&b, "cc-create").await;
    b.tid("cc-secret-dialog").await;
    let rest = b.tid("cc-secret-value").await.value().await;
    assert!(rest.starts_with("scr_"), "{rest}");
    let curl = b.tid("cc-secret-snippet").await.value().await;
    for part in [
        format!("curl -X POST '{base}/api/v1/agents/{agent}/chat'"),
        format!("-H 'Authorization: Bearer {rest}'"),
        "-H 'Content-Type: application/json'".into(),
        r#"-d '{"message":"Hello"}'"#.into(),
    ] {
        assert!(curl.contains(&part), "{part} not in {curl}");
    }
    click(&b, "cc-secret-done").await;
    b.until("!document.querySelector('dialog[open]')").await;
    let backend = row(&b, "Order backend").await;
    assert_eq!(text_of(&b, &format!("{backend} [data-testid=cc-audience]")).await, "REST");
    let list = credentials(&b, &agent).await;
    let made = list.iter().find(|c| c["label"] == "Order backend").unwrap();
    assert!(made["expiresAt"].is_string(), "{made}");
    assert_ne!(text_of(&b, &format!("{backend} td:nth-child(7)")).await, "never");

    // ---- revoke the MCP credential: asked first, then revoked at once
    let ana = row(&b, "Claude Desktop (Ana)").await;
    click_at(&b, &format!("{ana} [data-testid=cc-revoke]")).await;
    let message = confirm_text(&b).await;
    assert!(message.contains("stops working at once") && message.contains("cannot be undone"), "{message}");
    click(&b, "confirm-ok").await;
    b.until(&format!("document.querySelector('{ana} [data-testid=cc-status]')?.textContent === 'revoked'")).await;
    assert_eq!(b.count(&format!("{ana} button")).await, 0, "a revoked credential has no actions");
    // its Revoke button is gone: focus stays in the row
    b.until(&format!("document.activeElement === document.querySelector('{ana} [data-testid=cc-label]')")).await;
    let list = credentials(&b, &agent).await;
    assert_eq!(list.iter().find(|c| c["label"] == "Claude Desktop (Ana)").unwrap()["status"], "revoked");
    // the setup now follows the one active credential, with its placeholder
    let setup = b.tid("cc-snippet").await.value().await;
    assert!(setup.contains(&format!("Bearer <your {}… secret>", &rest[..12])), "{setup}");
    b.js("document.querySelectorAll('.toast-close').forEach((x) => x.click()); window.scrollTo(0, 0);", json!([]))
        .await;
    b.until("!document.querySelector('.toast')").await;
    check_page(&b, "agent-connections", &mut problems).await;
    b.screenshot(std::path::Path::new("/tmp/channel-credentials.png")).await;
    b.js("document.querySelector('[data-testid=cc-setup-card]').scrollIntoView({block: 'end'})", json!([])).await;
    b.screenshot(&shots().join("agent-connections-setup.png")).await;

    // ---- the API refuses (revoked elsewhere meanwhile): the page says why
    let id = made["id"].as_str().unwrap();
    session_call(&b, "POST", &format!("/api/v1/agents/{agent}/channel-credentials/{id}/revoke")).await;
    click_at(&b, &format!("{backend} [data-testid=cc-rotate]")).await;
    click(&b, "confirm-ok").await;
    let problem = b.tid("cc-problem").await.text().await;
    assert!(problem.contains("Could not rotate") && problem.contains("revoked"), "{problem}");
    // and the list catches up with the server
    b.until(&format!("document.querySelector('{backend} [data-testid=cc-status]')?.textContent === 'revoked'")).await;
    check_page(&b, "agent-connections-refused", &mut problems).await;

    b.quit().await;
    assert!(problems.is_empty(), "dashboard problems:\n{}", problems.join("\n"));
    server.terminate();
}
