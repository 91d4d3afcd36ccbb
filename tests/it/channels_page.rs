//! The dashboard's public chat channel settings page in a real browser.

use reqwest::Method;
use serde_json::{Value, json};

use crate::browser::{axe, check_page, click, click_at, sign_in_as_root, tid};
use crate::e2e::{Api, Server, bootstrap};
use crate::webdriver::{Browser, Driver};

/// Replaces the text of the field with this `data-testid` (as typed, so the page sees each key).
async fn fill(b: &Browser, testid: &str, text: &str) {
    b.js(
        "const e = document.querySelector(`[data-testid=${arguments[0]}]`); e.value = '';
         e.dispatchEvent(new Event('input', {bubbles: true}));",
        json!([testid]),
    )
    .await;
    b.tid(testid).await.send(text).await;
}

async fn settings(api: &Api) -> Value {
    api.call(Method::GET, "/api/v1/settings/general", None).await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_channels_page_edits_previews_saves_and_rotates_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = bootstrap(&data);
    let server = Server::start(&data, &[]);
    let base = server.base.clone();
    let api = Api::new(&base, &token);
    let before = settings(&api).await;
    let link_token = before["anonymousChatToken"].as_str().unwrap().to_string();
    let old_token = before["websiteEmbedToken"].as_str().unwrap().to_string();

    let driver = Driver::start();
    let b = driver.session().await;
    let mut problems = Vec::new();
    sign_in_as_root(&b, &base).await;

    // the page is in the Settings section of the sidebar
    click(&b, "nav-channels").await;
    b.tid("channels-form").await;
    assert_eq!(b.tid("ch-link").await.value().await, format!("{base}/chat/{link_token}"));
    assert_eq!(b.tid("ch-dirty").await.text().await, "All changes saved");
    // the preview is a picture: named once, nothing in it read out or reachable with Tab
    let preview = b
        .js(
            "const s = document.querySelector('[data-testid=ch-preview-stage]');
             return [s.getAttribute('role'), s.getAttribute('aria-label'),
                     s.querySelectorAll('a, button, input, select, textarea, [tabindex]').length,
                     s.firstElementChild.getAttribute('aria-hidden')];",
            json!([]),
        )
        .await;
    assert_eq!(preview[0], "img", "{preview}");
    assert!(preview[1].as_str().unwrap().starts_with("Widget preview"), "{preview}");
    assert_eq!(preview[2], 0, "focusable elements in the preview: {preview}");
    assert_eq!(preview[3], "true", "{preview}");

    // turning the widget on without origins warns that it is refused everywhere
    click(&b, "ch-widget-enabled").await;
    b.tid("ch-no-origins").await;
    b.until("document.querySelector('[data-testid=ch-dirty]').textContent === 'Unsaved changes'").await;

    // an origin the server normalizes and one it refuses: the refusal shows on that entry
    b.tid("ch-origin-input").await.send("HTTPS://Shop.Example.com:443").await;
    click(&b, "ch-origin-add").await;
    b.tid("ch-origin-input").await.send("shop.example.com/returns").await;
    click(&b, "ch-origin-add").await;
    b.until("document.querySelectorAll('[data-testid=ch-origin]').length === 2").await;
    assert_eq!(b.count(&tid("ch-no-origins")).await, 0, "the warning stays with an origin");
    click(&b, "ch-save").await;
    let refused = b.find("[data-testid=ch-origin].has-error [data-testid=field-error]").await.text().await;
    assert!(refused.contains("shop.example.com/returns"), "refusal: {refused}");
    for v in axe(&b).await {
        problems.push(format!("channels with a refused origin: axe {v}"));
    }
    click_at(&b, "[data-testid=ch-origin].has-error [data-testid=ch-origin-remove]").await;
    b.until("document.querySelectorAll('[data-testid=ch-origin]').length === 1").await;
    assert_eq!(b.count(&format!("{} {}", tid("ch-origins"), tid("field-error"))).await, 0, "a stale origin error");

    // the preview follows the form before anything is saved
    fill(&b, "ch-label", "Ask Acme").await;
    b.until("document.querySelector('[data-testid=ch-preview-launcher]').textContent.trim() === 'Ask Acme'").await;
    fill(&b, "ch-color-brand", "#1d4ed8").await;
    b.until("getComputedStyle(document.querySelector('[data-testid=ch-preview-launcher]')).backgroundColor === 'rgb(29, 78, 216)'")
        .await;
    // text on the brand colour below 4.5:1 is flagged, and the flag goes with a readable colour
    fill(&b, "ch-color-brandText", "#3b82f6").await;
    b.tid("ch-contrast-brand").await;
    for v in axe(&b).await {
        problems.push(format!("channels with a contrast warning: axe {v}"));
    }
    fill(&b, "ch-color-brandText", "#ffffff").await;
    b.until("!document.querySelector('[data-testid=ch-contrast-brand]')").await;
    b.tid("ch-position").await.select("bottom-left").await;
    b.until(
        "(() => { const s = document.querySelector('[data-testid=ch-preview-stage]').getBoundingClientRect();
                  const l = document.querySelector('[data-testid=ch-preview-launcher]').getBoundingClientRect();
                  return l.left - s.left < s.right - l.right; })()",
    )
    .await;
    // the title is the assistant's name (the default agent's until one is set) unless the text is set
    b.until("document.querySelector('[data-testid=ch-preview-title]').textContent === 'Assistant'").await;
    fill(&b, "ch-assistant-name", "Ada").await;
    b.until("document.querySelector('[data-testid=ch-preview-title]').textContent === 'Ada'").await;
    fill(&b, "ch-copy-title", "Acme help desk").await;
    b.until("document.querySelector('[data-testid=ch-preview-title]').textContent === 'Acme help desk'").await;
    click(&b, "ch-proactive").await;
    // visitor limits: an out-of-range number is flagged on its field before saving
    fill(&b, "ch-limit-day", "0").await;
    b.until("document.querySelector('[data-testid=ch-limits-card] [data-testid=field-error]') !== null").await;
    fill(&b, "ch-limit-day", "50").await;
    b.until("document.querySelector('[data-testid=ch-limits-card] [data-testid=field-error]') === null").await;
    fill(&b, "ch-limit-minute", "5").await;

    // an in-app link with unsaved changes asks first; staying keeps the edits
    click(&b, "nav-documents").await;
    b.tid("confirm-dialog").await;
    b.find("[data-testid=confirm-dialog] .modal-foot .btn:first-child").await.click().await;
    b.until("!document.querySelector('dialog[open]')").await;
    assert_eq!(b.tid("ch-label").await.value().await, "Ask Acme");

    click(&b, "ch-save").await;
    b.until("document.querySelector('[data-testid=ch-dirty]').textContent === 'All changes saved'").await;
    b.until("document.querySelector('[data-testid=toasts]').textContent.includes('saved')").await;
    let s = settings(&api).await;
    assert_eq!(s["websiteEmbedEnabled"], true);
    assert_eq!(s["websiteEmbedAllowedOrigins"], json!(["https://shop.example.com"]));
    assert_eq!(s["websiteEmbedLauncherLabel"], "Ask Acme");
    assert_eq!(s["websiteEmbedLauncherPosition"], "bottom-left");
    assert_eq!(s["websiteEmbedTheme"]["brand"], "#1d4ed8");
    assert_eq!(s["websiteEmbedTheme"]["brandText"], "#ffffff");
    assert_eq!(s["websiteEmbedCopy"], json!({"en": {"title": "Acme help desk"}}));
    assert_eq!(s["assistantName"], "Ada");
    assert_eq!(s["proactiveGreetingEnabled"], true);
    assert_eq!(
        (&s["publicChatVisitorMessagesPerMinute"], &s["publicChatVisitorMessagesPerDay"]),
        (&json!(5), &json!(50))
    );
    b.js("document.querySelector('[data-testid=ch-limits-card]').scrollIntoView({block: 'center'});", json!([])).await;
    b.screenshot(&crate::browser::shots().join("channels-limits.png")).await;

    // after a reload the form shows what was saved, the origin as the server normalized it
    b.go(&format!("{base}/app/settings/channels")).await;
    b.tid("channels-form").await;
    assert_eq!(b.tid("ch-label").await.value().await, "Ask Acme");
    assert_eq!(b.tid("ch-color-brand").await.value().await, "#1d4ed8");
    assert_eq!(b.tid("ch-copy-title").await.value().await, "Acme help desk");
    assert_eq!(b.tid("ch-origin").await.text().await.lines().next().unwrap().trim(), "https://shop.example.com");
    assert_eq!(b.tid("ch-widget-status").await.text().await, "on");
    assert_eq!(b.tid("ch-preview-title").await.text().await, "Acme help desk");

    // discarding an edit puts the saved value back
    fill(&b, "ch-label", "Something else").await;
    click(&b, "ch-discard").await;
    b.until("document.querySelector('[data-testid=ch-label]').value === 'Ask Acme'").await;

    // the snippet copied carries the token and the launcher's look
    b.js("window.__copied = null; navigator.clipboard.writeText = async (t) => { window.__copied = t; };", json!([]))
        .await;
    click(&b, "ch-snippet-copy").await;
    let copied = b.until("window.__copied").await.as_str().unwrap().to_string();
    for part in [
        format!("src=\"{base}/embed.js\""),
        format!("data-token=\"{old_token}\""),
        "data-label=\"Ask Acme\"".into(),
        "data-position=\"bottom-left\"".into(),
        "data-brand=\"#1d4ed8\"".into(),
        "data-brand-text=\"#ffffff\"".into(),
        "data-proactive=\"true\"".into(),
        "async></script>".into(),
    ] {
        assert!(copied.contains(&part), "{part} not in {copied}");
    }
    assert_eq!(b.tid("ch-snippet").await.value().await, copied);
    b.find("[data-testid=ch-snippet-copy][data-copied=true]").await;

    // rotating asks first (cancel keeps the token), then replaces it at once
    click(&b, "ch-widget-rotate").await;
    b.until("document.querySelector('[data-testid=confirm-dialog]')?.textContent.includes('stops working at once')")
        .await;
    let message = b.tid("confirm-dialog").await.text().await;
    assert!(message.contains("stops working at once") && message.contains("end now"), "{message}");
    b.find("[data-testid=confirm-dialog] .modal-foot .btn:first-child").await.click().await;
    b.until("!document.querySelector('dialog[open]')").await;
    assert_eq!(settings(&api).await["websiteEmbedToken"], old_token.as_str());
    click(&b, "ch-widget-rotate").await;
    click(&b, "confirm-ok").await;
    b.until(&format!(
        "!document.querySelector('[data-testid=ch-snippet]').value.includes({})",
        serde_json::to_string(&old_token).unwrap()
    ))
    .await;
    let new_token = settings(&api).await["websiteEmbedToken"].as_str().unwrap().to_string();
    assert_ne!(new_token, old_token);
    assert!(new_token.starts_with("we_"), "{new_token}");
    assert!(b.tid("ch-snippet").await.value().await.contains(&new_token));

    // the chat link rotates the same way
    click(&b, "ch-link-rotate").await;
    b.until("document.querySelector('[data-testid=confirm-dialog]')?.textContent.includes('stops working at once')")
        .await;
    let message = b.tid("confirm-dialog").await.text().await;
    assert!(message.contains("stops working at once") && message.contains("end now"), "{message}");
    click(&b, "confirm-ok").await;
    b.until(&format!(
        "!document.querySelector('[data-testid=ch-link]').value.endsWith({})",
        serde_json::to_string(&link_token).unwrap()
    ))
    .await;
    let new_link = settings(&api).await["anonymousChatToken"].as_str().unwrap().to_string();
    assert_ne!(new_link, link_token);
    assert_eq!(b.tid("ch-link").await.value().await, format!("{base}/chat/{new_link}"));

    // the screenshot: the top of the page, without the toasts
    b.js("document.querySelectorAll('.toast-close').forEach((x) => x.click()); window.scrollTo(0, 0);", json!([]))
        .await;
    b.until("!document.querySelector('.toast')").await;
    check_page(&b, "channels", &mut problems).await;
    b.quit().await;
    assert!(problems.is_empty(), "{problems:#?}");
    server.terminate();
}
