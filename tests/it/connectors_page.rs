//! The dashboard's connector pages in a real browser, against the real binary: set up WhatsApp
//! (the verify token shown once), enable it, watch signed deliveries and their replies arrive in
//! the message log; set up WordPress against a site that cannot be reached and see the sync's
//! error. axe-core on every state, screenshots under `target/dashboard-shots/`.

use serde_json::json;

use crate::browser::{axe, check_page, click, sign_in_as_root};
use crate::e2e::{Server, bootstrap};
use crate::receiver::Receiver;
use crate::webdriver::{Browser, Driver};
use crate::whatsapp::{APP_SECRET, PHONE, TOKEN, sent_ok};

async fn fill(b: &Browser, testid: &str, text: &str) {
    b.js(
        "const e = document.querySelector(`[data-testid=${arguments[0]}]`); e.value = '';
         e.dispatchEvent(new Event('input', {bubbles: true}));",
        json!([testid]),
    )
    .await;
    b.tid(testid).await.send(text).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_connector_pages_set_up_whatsapp_and_wordpress_in_a_real_browser() {
    let graph = Receiver::start().await;
    graph.set_default(sent_ok());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    bootstrap(&data);
    let (ca, graph_url, key) =
        (graph.ca_file.to_str().unwrap().to_string(), format!("{}/v21.0", graph.base), "05".repeat(32));
    let env = [
        ("CONNECTOR_ENCRYPTION_KEY", key.as_str()),
        ("STEWARD_DELIVERY_ALLOW", "127.0.0.1/32"),
        ("STEWARD_DELIVERY_CA_FILE", ca.as_str()),
        ("STEWARD_WHATSAPP_GRAPH_BASE_URL", graph_url.as_str()),
        ("STEWARD_WHATSAPP_BURST_MS", "0"),
    ];
    let server = Server::start(&data, &env);
    let base = server.base.clone();

    let driver = Driver::start();
    let b = driver.session().await;
    let mut problems = Vec::new();
    sign_in_as_root(&b, &base).await;

    // the list, in the Settings section
    click(&b, "nav-connectors").await;
    b.until("document.querySelectorAll('[data-testid=connector-card]').length === 2").await;
    check_page(&b, "connectors", &mut problems).await;

    // WhatsApp: the settings, then the verify token shown once
    click(&b, "connector-open-whatsapp").await;
    b.tid("settings-card").await;
    fill(&b, "input-phone_number_id", PHONE).await;
    fill(&b, "input-access_token", TOKEN).await;
    fill(&b, "input-app_secret", APP_SECRET).await;
    fill(&b, "input-business_account_id", "102290129340398").await;
    fill(&b, "input-conversation_timeout_hours", "0").await;
    click(&b, "connector-save").await;
    // a refused value is shown on its field
    let err = b.find("[data-testid=settings-card] [data-testid=field-error]").await.text().await;
    assert!(err.contains("conversation_timeout_hours"), "{err}");
    fill(&b, "input-conversation_timeout_hours", "24").await;
    click(&b, "connector-save").await;
    b.tid("generated-webhook_verify_token").await;
    let verify = b
        .js("return document.querySelector('[data-testid=generated-webhook_verify_token] input').value", json!([]))
        .await;
    assert!(verify.as_str().unwrap().len() >= 32, "{verify}");
    for v in axe(&b).await {
        problems.push(format!("whatsapp secret dialog: axe {v}"));
    }
    b.screenshot(&crate::browser::shots().join("connector-whatsapp-secret.png")).await;
    click(&b, "generated-secret-done").await;
    // the secret fields are empty again: secrets are never shown back
    assert_eq!(b.tid("input-access_token").await.value().await, "");
    click(&b, "connector-toggle").await;
    b.until("document.querySelector('[data-testid=connector-enabled]').textContent === 'enabled'").await;
    let url = b.tid("webhook-url").await.text().await;
    assert!(url.starts_with(&base) && url.ends_with("/webhook"), "{url}");

    // a customer writes (a text, a picture): both in the log with the reply
    let ws = url.split('/').rev().nth(1).unwrap().to_string();
    for (id, text) in [("wamid.page1", Some("Hello! Are you open today? 👋")), ("wamid.page2", None)] {
        crate::whatsapp_crash::deliver(&base, &ws, id, text).await;
    }
    graph.wait_for(1).await;
    b.until("document.querySelectorAll('[data-testid=message-row]').length >= 3").await;
    let log = b.find("[data-testid=message-log]").await.text().await;
    assert!(log.contains("Hello! Are you open today? 👋") && log.contains("(image)"), "{log}");
    check_page(&b, "connector-whatsapp", &mut problems).await;

    // WordPress: a site that cannot be reached; its sync error is shown
    b.go(&format!("{base}/app/settings/connectors/wordpress")).await;
    b.tid("settings-card").await;
    fill(&b, "input-site_url", "https://wordpress.invalid").await;
    click(&b, "connector-save").await;
    b.tid("generated-webhook_shared_secret").await;
    click(&b, "generated-secret-done").await;
    click(&b, "connector-toggle").await;
    b.until("document.querySelector('[data-testid=connector-enabled]').textContent === 'enabled'").await;
    b.tid("sync-error").await;
    let e = b.tid("sync-error").await.text().await;
    assert!(e.contains("could not be reached"), "{e}");
    b.screenshot(&crate::browser::shots().join("connector-wordpress-retrying.png")).await;
    // disabling stops the retries; the error stays shown
    click(&b, "connector-toggle").await;
    click(&b, "confirm-ok").await;
    b.until("document.querySelector('[data-testid=connector-enabled]').textContent === 'disabled'").await;
    b.tid("sync-error").await;
    check_page(&b, "connector-wordpress", &mut problems).await;

    // the sources page lists both connectors
    b.go(&format!("{base}/app/sources")).await;
    b.until("document.querySelectorAll('[data-testid=source-connector]').length === 2").await;
    check_page(&b, "sources-with-connectors", &mut problems).await;

    assert!(problems.is_empty(), "{problems:#?}");
    b.quit().await;
    server.terminate();
}
