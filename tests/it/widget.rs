//! The website widget and the anonymous link page in a real browser, on two origins: the test
//! serves a shop's page itself (another port is another origin) under a strict nonce CSP
//! (`script-src 'nonce-…' 'strict-dynamic'; style-src 'nonce-…'`) with a hostile
//! `button{border-radius:50px!important}` rule, and the one-tag snippet loads the widget from the
//! real binary. Screenshots go to `target/dashboard-shots/widget-*.png`.

use std::collections::HashMap;

use axum::extract::{Query, RawQuery};
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use reqwest::Method;
use serde_json::{Value, json};

use crate::browser::{axe, console_problems, shots};
use crate::e2e::{Api, Server, bootstrap};
use crate::webdriver::{Browser, Driver, ENTER, ESCAPE};

/// The widget's shadow root, in page scripts.
const W: &str = "document.querySelector('steward-chat').shadowRoot";

/// `querySelector` inside the widget's shadow root.
fn w(sel: &str) -> String {
    format!("{W}.querySelector('{sel}')")
}

fn wt(testid: &str) -> String {
    w(&format!("[data-testid={testid}]"))
}

const QUESTION: &str = "How long do I have to return items?";

/// A shop's website on its own origin.
struct Host {
    base: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Host {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Host {
    async fn start(steward: &str) -> Host {
        let steward = steward.to_string();
        let app = axum::Router::new()
            .route(
                "/",
                axum::routing::get(move |Query(q): Query<HashMap<String, String>>| {
                    let steward = steward.clone();
                    async move { shop_page(&steward, &q) }
                }),
            )
            .route(
                "/phone",
                axum::routing::get(|RawQuery(q): RawQuery| async move { phone_page(q.unwrap_or_default()) }),
            );
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", l.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(l, app).await.unwrap();
        });
        Host { base, task }
    }

    /// The shop's page with the snippet for launch token `t`; `extra` is more query (`plain=1`:
    /// without the hostile rules; `proactive=1`; `left=1`; `locale=de`).
    fn page(&self, t: &str, extra: &str) -> String {
        format!("{}/?t={t}&{extra}", self.base)
    }
}

fn nonce() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

fn strict(nonce: &str, html: String) -> Response {
    let csp = format!("script-src 'nonce-{nonce}' 'strict-dynamic'; style-src 'nonce-{nonce}'");
    ([(header::CONTENT_SECURITY_POLICY, csp)], Html(html)).into_response()
}

/// The shop: a CSP violation listener, the hostile rules, the one tag.
fn shop_page(steward: &str, q: &HashMap<String, String>) -> Response {
    let n = nonce();
    let t = q.get("t").map(String::as_str).unwrap_or("");
    let hostile = if q.contains_key("plain") {
        ""
    } else {
        "button{border-radius:50px!important} *{letter-spacing:1px!important} div{display:none}"
    };
    let mut attrs = String::new();
    if q.contains_key("proactive") {
        attrs.push_str(" data-proactive");
    }
    if q.contains_key("left") {
        attrs.push_str(r#" data-position="bottom-left""#);
    }
    if let Some(l) = q.get("locale").filter(|l| l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')) {
        attrs.push_str(&format!(r#" data-locale="{l}""#));
    }
    let html = format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Shop</title>
<script nonce="{n}">window.__csp = []; document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI + ' ' + e.sourceFile + ':' + e.lineNumber), true);</script>
<style nonce="{n}">body{{font:20px Georgia,serif;color:#7c2d12;background:#fff7ed;margin:0;padding:24px 40px}} {hostile}</style>
</head><body><main><h1>The shop</h1><p>Handmade things, shipped within two days.</p>
<button id="host-button" type="button">Add to basket</button></main>
<script nonce="{n}" src="{steward}/embed.js" data-token="{t}" data-label="Ask us" async{attrs}></script>
</body></html>"#
    );
    strict(&n, html)
}

/// The shop's page in a 390 × 740 frame: a phone's viewport (media queries see the frame; the
/// frame fits the test browser's window, so the screenshot shows all of it).
fn phone_page(query: String) -> Response {
    let n = nonce();
    let html = format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Shop on a phone</title>
<style nonce="{n}">body{{margin:0;background:#334155}} iframe{{display:block;border:0;background:#fff}}</style>
</head><body><iframe src="/?{query}" width="390" height="740" title="The shop on a phone"></iframe></body></html>"#
    );
    strict(&n, html)
}

/// A server with one document, the owner's dashboard session, the channels switched on for the
/// shop's origin, and two shops: one admitted, one not.
struct Setup {
    server: Server,
    api: Api,
    http: reqwest::Client,
    cookie: String,
    embed: String,
    anon: String,
    shop: Host,
    other: Host,
    _dir: tempfile::TempDir,
}

impl Setup {
    async fn start() -> Setup {
        Setup::start_with(&[]).await
    }

    async fn start_with(env: &[(&str, &str)]) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let token = bootstrap(&data);
        let server = Server::start(&data, env);
        let base = server.base.clone();
        let api = Api::new(&base, &token);
        let http = reqwest::Client::new();
        let r = http
            .post(format!("{base}/api/v1/auth/login"))
            .json(&json!({"email": "root@example.com", "password": "root-password"}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "login: {}", r.status());
        let cookie = r
            .headers()
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok()?.split(';').next().map(str::to_string))
            .collect::<Vec<_>>()
            .join("; ");
        let (shop, other) = (Host::start(&base).await, Host::start(&base).await);
        let s = Setup { server, api, http, cookie, embed: String::new(), anon: String::new(), shop, other, _dir: dir };
        let g = s
            .settings(json!({"websiteEmbedEnabled": true, "anonymousChatEnabled": true,
                "websiteEmbedAllowedOrigins": [s.shop.base.clone()]}))
            .await;
        let doc = json!({"title": "Returns policy",
            "content": "Returns policy. Items can be returned within 30 days of delivery for a full refund. \
                        Refunds reach your card within five business days.",
            // as a crawled page carries it: the citation links to the page
            "metadata": {"sourceUrl": "https://shop.example/returns"}});
        s.api.call(Method::POST, "/api/v1/document/", Some(doc)).await;
        loop {
            let p = s.api.call(Method::GET, "/api/v1/document/progress?waitMs=30000", None).await;
            if p["idle"] == true {
                break;
            }
        }
        Setup {
            embed: g["websiteEmbedToken"].as_str().unwrap().to_string(),
            anon: g["anonymousChatToken"].as_str().unwrap().to_string(),
            ..s
        }
    }

    /// `PUT /settings/general`; the settings after.
    async fn settings(&self, body: Value) -> Value {
        self.dashboard(Method::PUT, "/api/v1/settings/general", body).await
    }

    /// A call with the owner's dashboard session (takeover, reply and settings need one); panics
    /// unless it succeeds.
    async fn dashboard(&self, method: Method, path: &str, body: Value) -> Value {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.server.base))
            .header(header::COOKIE, &self.cookie)
            .header(header::ORIGIN, &self.server.base);
        if !body.is_null() {
            req = req.json(&body);
        }
        let r = req.send().await.unwrap();
        let status = r.status();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "{path}: {status} {v}");
        v
    }

    fn stop(self) {
        self.server.terminate();
    }
}

/// The widget's launcher is on the page.
async fn launcher(b: &Browser) {
    b.until(&format!("document.querySelector('steward-chat') && {}", wt("steward-launcher"))).await;
}

/// Opens the widget and waits until it is ready for a message.
async fn open(b: &Browser) {
    b.js(&format!("{}.click()", wt("steward-launcher")), json!([])).await;
    b.until(&format!("!{p}.hidden && {p}.getAttribute('aria-busy') === 'false'", p = wt("steward-panel"))).await;
}

/// Types `text` into the widget's input as a person does and presses Enter.
async fn say(b: &Browser, text: &str) {
    b.js(&format!("{}.focus()", wt("steward-input")), json!([])).await;
    b.keys(text).await;
    b.keys(ENTER).await;
}

/// The number of answers with text, and waits for the `n`th.
async fn answer(b: &Browser, n: usize) -> String {
    let sel = "[data-testid=steward-message].answer";
    b.until(&format!("{W}.querySelectorAll('{sel}').length >= {n}")).await;
    b.js(&format!("return Array.from({W}.querySelectorAll('{sel}'))[{}].textContent", n - 1), json!([]))
        .await
        .as_str()
        .unwrap()
        .to_string()
}

/// CSP violations the shop's page saw, and the console's problems.
async fn page_problems(b: &Browser, name: &str, problems: &mut Vec<String>) {
    let csp = b.js("return window.__csp || []", json!([])).await;
    for v in csp.as_array().unwrap() {
        problems.push(format!("{name}: CSP {v}"));
    }
    for c in console_problems(b).await {
        problems.push(format!("{name}: console {c}"));
    }
}

async fn border_radius(b: &Browser, testid: &str) -> String {
    let v = b.js(&format!("return getComputedStyle({}).borderTopLeftRadius", wt(testid)), json!([])).await;
    v.as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_widget_on_a_strict_csp_page_streams_resumes_and_shows_an_operator_live() {
    let s = Setup::start().await;
    let driver = Driver::start();
    let b = driver.session().await;
    let mut problems = Vec::new();

    // the reference: the widget on a page without the hostile rules
    b.go(&s.shop.page(&s.embed, "plain=1")).await;
    launcher(&b).await;
    let (plain_launcher, plain_send) = {
        open(&b).await;
        (border_radius(&b, "steward-launcher").await, border_radius(&b, "steward-send").await)
    };
    b.js("localStorage.clear()", json!([])).await;

    // the shop: only the loader loads, and the launcher is drawn under the strict CSP
    b.go(&s.shop.page(&s.embed, "")).await;
    launcher(&b).await;
    let requests = b.js("return performance.getEntriesByType('resource').map(e => e.name)", json!([])).await;
    assert_eq!(requests, json!([format!("{}/embed.js", s.server.base)]), "requests before the click");
    let host_radius =
        b.js("return getComputedStyle(document.getElementById('host-button')).borderTopLeftRadius", json!([])).await;
    assert_eq!(host_radius, "50px", "the shop's own rule applies to the shop's button");
    assert_eq!(border_radius(&b, "steward-launcher").await, plain_launcher, "the shop's rule reached the launcher");
    let label = b.js(&format!("return {}.textContent", wt("steward-launcher")), json!([])).await;
    assert_eq!(label, "Ask us");
    page_problems(&b, "launcher", &mut problems).await;

    // open: the panel takes focus; a question streams an answer with its sources
    open(&b).await;
    assert_eq!(border_radius(&b, "steward-send").await, plain_send, "the shop's rule reached the send button");
    let expanded = b.js(&format!("return {}.getAttribute('aria-expanded')", wt("steward-launcher")), json!([])).await;
    assert_eq!(expanded, "true");
    say(&b, QUESTION).await;
    let text = answer(&b, 1).await;
    assert!(text.contains("30 days"), "answer: {text}");
    let citation = b.js(&format!("return {}.textContent", wt("steward-citation")), json!([])).await;
    assert_eq!(citation, "Returns policy");
    let link = b
        .js(
            &format!("const a = {}.querySelector('a'); return [a.href, a.target, a.rel]", wt("steward-citation")),
            json!([]),
        )
        .await;
    assert_eq!(link, json!(["https://shop.example/returns", "_blank", "noopener noreferrer"]));
    let streamed = b.js(&format!("return {W}.querySelector('.answer').dataset.firstChunkMs"), json!([])).await;
    assert!(streamed.is_string(), "no streamed chunk was rendered before the answer finished");
    for v in axe(&b).await {
        problems.push(format!("open widget: axe {v}"));
    }
    page_problems(&b, "open widget", &mut problems).await;
    b.screenshot(&shots().join("widget-open.png")).await;

    // feedback on the answer
    b.js(&format!("{}.click()", wt("steward-feedback-up")), json!([])).await;
    b.until(&format!("{}.textContent.length > 0", wt("steward-feedback-thanks"))).await;
    let pressed = b.js(&format!("return {}.getAttribute('aria-pressed')", wt("steward-feedback-up")), json!([])).await;
    assert_eq!(pressed, "true");

    // a reload keeps the conversation
    b.go(&s.shop.page(&s.embed, "")).await;
    launcher(&b).await;
    open(&b).await;
    let text = answer(&b, 1).await;
    assert!(text.contains("30 days"), "after a reload: {text}");
    b.until(&format!("{W}.querySelectorAll('[data-source=visitor]').length === 1")).await;
    b.until(&wt("steward-citation")).await;

    // an operator takes over and replies: it shows up live, with their name
    let stored = b.js(&format!("return localStorage.getItem('steward:{}')", s.embed), json!([])).await;
    let stored: Value = serde_json::from_str(stored.as_str().unwrap()).unwrap();
    let cid = stored["conversationId"].as_str().unwrap().to_string();
    let t = s.dashboard(Method::POST, &format!("/api/v1/conversations/{cid}/takeover"), json!({})).await;
    let v = t["ownership"]["version"].as_i64().unwrap();
    let reply = json!({"message": "Hello, this is a person from the shop.", "expectedVersion": v});
    let r = s.dashboard(Method::POST, &format!("/api/v1/conversations/{cid}/reply"), reply).await;
    let v = r["ownership"]["version"].as_i64().unwrap();
    b.until(&format!("{W}.querySelector('[data-source=human_agent]')?.textContent.includes('a person from the shop')"))
        .await;
    let who = b.js(&format!("return {}.textContent", wt("steward-operator")), json!([])).await;
    assert!(who.as_str().unwrap().ends_with("(team)"), "operator label: {who}");

    // the visitor writes while a person holds the conversation: no AI answer, the notice says so
    say(&b, "Thank you, can you check my order?").await;
    b.until(&format!("!{n}.hidden && {n}.textContent === 'A person will reply here soon.'", n = wt("steward-handoff")))
        .await;
    assert_eq!(b.js(&format!("return {W}.querySelectorAll('.answer').length"), json!([])).await, 1);
    b.screenshot(&shots().join("widget-handoff.png")).await;

    // Escape closes the panel and gives focus back to the launcher
    b.js(&format!("{}.focus()", wt("steward-input")), json!([])).await;
    b.keys(ESCAPE).await;
    b.until(&format!("{}.hidden", wt("steward-panel"))).await;
    let focused = b.js(&format!("return {W}.activeElement?.dataset.testid"), json!([])).await;
    assert_eq!(focused, "steward-launcher", "focus after Escape");

    // closed: the next operator reply shows as an unread badge; opening clears it
    let reply = json!({"message": "Your order left our workshop this morning.", "expectedVersion": v});
    s.dashboard(Method::POST, &format!("/api/v1/conversations/{cid}/reply"), reply).await;
    b.until(&wt("steward-badge")).await;
    let badge = b.js(&format!("return {}.getAttribute('aria-label')", wt("steward-badge")), json!([])).await;
    assert_eq!(badge, "1 unread message");
    b.screenshot(&shots().join("widget-badge.png")).await;
    open(&b).await;
    b.until(&format!("!{}", wt("steward-badge"))).await;
    b.until(&format!("{W}.querySelectorAll('[data-source=human_agent]').length === 2")).await;
    page_problems(&b, "handoff", &mut problems).await;

    b.quit().await;
    assert!(problems.is_empty(), "widget problems:\n{}", problems.join("\n"));
    s.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_widget_says_it_is_unavailable_on_a_site_not_admitted() {
    let s = Setup::start().await;
    let driver = Driver::start();
    let b = driver.session().await;
    b.go(&s.other.page(&s.embed, "")).await;
    launcher(&b).await;
    b.js(&format!("{}.click()", wt("steward-launcher")), json!([])).await;
    b.until(&wt("steward-unavailable")).await;
    let text = b.js(&format!("return {}.textContent", wt("steward-unavailable")), json!([])).await;
    assert_eq!(text, "The chat is not available right now.");
    assert!(b.until(&format!("{}.hidden", wt("steward-composer"))).await.as_bool().unwrap());
    // nothing is retried: no request after the refusal settles
    let n = b.js("return performance.getEntriesByType('resource').length", json!([])).await;
    b.js_async("await new Promise(r => setTimeout(r, 1500));", json!([])).await;
    assert_eq!(b.js("return performance.getEntriesByType('resource').length", json!([])).await, n, "a retry loop");
    let csp = b.js("return window.__csp", json!([])).await;
    assert_eq!(csp, json!([]), "CSP violations");
    b.screenshot(&shots().join("widget-unavailable.png")).await;
    b.quit().await;
    s.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_anonymous_link_page_and_the_phone_viewport_work() {
    let s = Setup::start().await;
    let driver = Driver::start();
    let b = driver.session().await;
    let mut problems = Vec::new();

    // the full page on Steward's own origin, under the dashboard's CSP
    b.go(&format!("{}/chat/{}", s.server.base, s.anon)).await;
    b.until(&format!("document.querySelector('steward-chat') && {}", wt("steward-input"))).await;
    b.until(&format!("{}.getAttribute('aria-busy') === 'false'", wt("steward-panel"))).await;
    assert_eq!(b.count("[data-testid=steward-launcher]").await, 0);
    say(&b, QUESTION).await;
    let text = answer(&b, 1).await;
    assert!(text.contains("30 days"), "answer: {text}");
    b.until(&wt("steward-citation")).await;
    for v in axe(&b).await {
        problems.push(format!("chat page: axe {v}"));
    }
    for c in console_problems(&b).await {
        problems.push(format!("chat page: console {c}"));
    }
    b.screenshot(&shots().join("chat-page.png")).await;
    // a reload shows the conversation again
    b.go(&format!("{}/chat/{}", s.server.base, s.anon)).await;
    answer(&b, 1).await;

    // a phone: the panel fills the screen and the input's font is 16 px (no zoom on focus)
    b.go(&format!("{}/phone?t={}", s.shop.base, s.embed)).await;
    let f = "document.querySelector('iframe').contentDocument.querySelector('steward-chat')?.shadowRoot";
    b.until(&format!("!!{f}?.querySelector('[data-testid=steward-launcher]')")).await;
    b.js(&format!("{f}.querySelector('[data-testid=steward-launcher]').click()"), json!([])).await;
    b.until(&format!("{f}.querySelector('[data-testid=steward-panel]').getAttribute('aria-busy') === 'false'")).await;
    let m = b
        .js(
            &format!(
                "const r = {f}; const p = r.querySelector('[data-testid=steward-panel]').getBoundingClientRect();
                 return [getComputedStyle(r.querySelector('[data-testid=steward-input]')).fontSize, p.width, p.height,
                         getComputedStyle(r.querySelector('[data-testid=steward-launcher]')).display];"
            ),
            json!([]),
        )
        .await;
    assert_eq!(m, json!(["16px", 390, 740, "none"]), "[input font, panel width, height, launcher display]");
    b.js(
        &format!(
            "const r = {f}; r.querySelector('[data-testid=steward-input]').value = arguments[0];
             r.querySelector('[data-testid=steward-send]').click();"
        ),
        json!([QUESTION]),
    )
    .await;
    b.until(&format!("!!{f}.querySelector('[data-testid=steward-citation]')")).await;
    b.js(
        &format!(
            "const r = {f}; r.querySelector('[data-testid=steward-input]').value = 'And do you ship abroad?';
             r.querySelector('[data-testid=steward-input]').dispatchEvent(new Event('input'));"
        ),
        json!([]),
    )
    .await;
    b.screenshot(&shots().join("widget-mobile.png")).await;
    b.quit().await;
    assert!(problems.is_empty(), "chat page problems:\n{}", problems.join("\n"));
    s.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_proactive_greeting_offers_its_chips_and_a_chip_starts_the_conversation() {
    let s = Setup::start().await;
    let words = json!({"variants": {"en": {"text": "Welcome to the shop! Ask me anything.",
        "chips": [QUESTION, "Do you ship abroad?"]}}});
    s.api.configure_default_agent(json!({"proactiveGreetingEnabled": true, "greetingExactWords": words})).await;
    // the channel's copy per language, theme and branding come from embed-config once it opens
    s.settings(json!({
        "websiteEmbedCopy": {"en": {"title": "Shop help"}, "de": {"title": "Hilfe", "placeholder": "Ihre Frage …"}},
        "websiteEmbedTheme": {"brand": "#7c2d12", "brandText": "#ffffff", "surface": "#ffffff", "text": "#1c1917"},
        "websiteEmbedExpertOverrides": {"hidePoweredBy": true},
    }))
    .await;
    let driver = Driver::start();
    let b = driver.session().await;
    let mut problems = Vec::new();

    // data-proactive: the greeting is fetched without a click and offered beside the launcher
    b.go(&s.shop.page(&s.embed, "proactive=1&left=1&locale=de")).await;
    launcher(&b).await;
    b.until(&format!("{}?.textContent === 'Welcome to the shop! Ask me anything.'", wt("steward-teaser"))).await;
    b.screenshot(&shots().join("widget-teaser.png")).await;
    b.js(&format!("{}.click()", wt("steward-teaser")), json!([])).await;
    b.until(&format!("!{}.hidden", wt("steward-panel"))).await;
    let greeting = b.js(&format!("return {}.textContent", wt("steward-greeting")), json!([])).await;
    assert_eq!(greeting, "Welcome to the shop! Ask me anything.");
    let look = b
        .js(
            &format!(
                "return [{t}.textContent, {i}.placeholder, getComputedStyle({l}).backgroundColor,
                         {l}.getBoundingClientRect().left < 100, {p}.hidden];",
                t = wt("steward-title"),
                i = wt("steward-input"),
                l = wt("steward-launcher"),
                p = wt("steward-powered"),
            ),
            json!([]),
        )
        .await;
    assert_eq!(
        look,
        json!(["Hilfe", "Ihre Frage …", "rgb(124, 45, 18)", true, true]),
        "[title, placeholder, brand, left, no powered-by]"
    );
    let chips = b
        .js(
            &format!("return Array.from({W}.querySelectorAll('[data-testid=steward-chip]')).map(c => c.textContent)"),
            json!([]),
        )
        .await;
    assert_eq!(chips, json!([QUESTION, "Do you ship abroad?"]));
    for v in axe(&b).await {
        problems.push(format!("greeting: axe {v}"));
    }
    b.screenshot(&shots().join("widget-greeting.png")).await;

    // a chip is sent as the first message with the greeting's id; the greeting is saved before it
    b.js(&format!("{}.click()", wt("steward-chip")), json!([])).await;
    let text = answer(&b, 1).await;
    assert!(text.contains("30 days"), "answer: {text}");
    b.until(&format!("{}.dataset.messageId", wt("steward-greeting"))).await;
    assert_eq!(b.js(&format!("return {W}.querySelectorAll('[data-source=agent]').length"), json!([])).await, 2);
    let stored = b.js(&format!("return localStorage.getItem('steward:{}')", s.embed), json!([])).await;
    let stored: Value = serde_json::from_str(stored.as_str().unwrap()).unwrap();
    let cid = stored["conversationId"].as_str().unwrap();
    let history = s.api.call(Method::GET, &format!("/api/v1/history/chat/{cid}"), None).await;
    let texts: Vec<&str> = history["messages"].as_array().unwrap().iter().filter_map(|m| m["text"].as_str()).collect();
    assert_eq!(texts[..2], ["Welcome to the shop! Ask me anything.", QUESTION], "{history}");

    // thumbs down with a comment
    b.js(&format!("{}.click()", wt("steward-feedback-down")), json!([])).await;
    b.until(&wt("steward-feedback-comment")).await;
    b.keys("It did not say who pays for the return shipping.").await;
    b.js(&format!("{}.click()", wt("steward-feedback-send")), json!([])).await;
    b.until(&format!(
        "!{} && {}.textContent === 'Thanks for your feedback.'",
        wt("steward-feedback-comment"),
        wt("steward-feedback-thanks")
    ))
    .await;
    let inbox = s.dashboard(Method::GET, "/api/v1/inbox", Value::Null).await.to_string();
    assert!(inbox.contains("who pays for the return shipping"), "{inbox}");
    page_problems(&b, "greeting", &mut problems).await;
    b.quit().await;
    assert!(problems.is_empty(), "greeting problems:\n{}", problems.join("\n"));
    s.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_widget_explains_a_rate_limit_and_offers_a_retry_when_the_server_is_gone() {
    let s = Setup::start_with(&[("STEWARD_PUBLIC_CHAT_PER_SESSION_PER_MINUTE", "1")]).await;
    let driver = Driver::start();
    let b = driver.session().await;
    b.go(&s.shop.page(&s.embed, "")).await;
    launcher(&b).await;
    open(&b).await;
    say(&b, QUESTION).await;
    answer(&b, 1).await;
    // the second message in a minute is over the limit: the wait comes from Retry-After
    say(&b, "And exchanges?").await;
    b.until(&wt("steward-error")).await;
    let text = b.js(&format!("return {}.firstChild.textContent", wt("steward-error")), json!([])).await;
    let text = text.as_str().unwrap();
    let secs: u32 = text
        .strip_prefix("Too many messages, try again in ")
        .and_then(|t| t.strip_suffix(" s."))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("429 message: {text}"));
    assert!((1..=60).contains(&secs), "{text}");
    b.js(&format!("{}.remove()", wt("steward-error")), json!([])).await;

    // the server is gone: the message fails with a retry button, nothing crashes
    let Setup { server, .. } = s;
    server.kill();
    say(&b, "Are you there?").await;
    b.until(&wt("steward-retry")).await;
    let text = b.js(&format!("return {}.firstChild.textContent", wt("steward-error")), json!([])).await;
    assert_eq!(text, "Something went wrong. Your message was not answered.");
    b.screenshot(&shots().join("widget-error.png")).await;
    b.quit().await;
}

/// Figures for docs/performance.md (run against a release build:
/// `STEWARD_TEST_BIN=target/release/steward cargo test --test it -- --ignored widget_figures
/// --nocapture`): the loader's gzipped size, what a click costs until the widget is interactive,
/// and click → first streamed chunk over 50 messages with the built-in answerer.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "a benchmark: run by hand for docs/performance.md"]
async fn widget_figures() {
    // 50 messages in a minute: the per-session limit (20) is off for the measurement
    let s = Setup::start_with(&[("STEWARD_PUBLIC_CHAT_PER_SESSION_PER_MINUTE", "0")]).await;
    let r =
        s.http.get(format!("{}/embed.js", s.server.base)).header(header::ACCEPT_ENCODING, "gzip").send().await.unwrap();
    assert_eq!(r.headers()[header::CONTENT_ENCODING], "gzip");
    let loader_gz = r.bytes().await.unwrap().len();

    let driver = Driver::start();
    let b = driver.session().await;
    b.go(&s.shop.page(&s.embed, "plain=1")).await;
    launcher(&b).await;
    let before = b.js("return performance.getEntriesByType('resource').length", json!([])).await.as_u64().unwrap();
    let t0 = b.js(&format!("{}.click(); return performance.now()", wt("steward-launcher")), json!([])).await;
    let t1 = b
        .until(&format!(
            "!{p}.hidden && {p}.getAttribute('aria-busy') === 'false' && performance.now()",
            p = wt("steward-panel")
        ))
        .await;
    let after = b
        .js(
            "return performance.getEntriesByType('resource').slice(arguments[0])
               .map(e => [e.name, e.transferSize, e.encodedBodySize])",
            json!([before]),
        )
        .await;
    let entries = after.as_array().unwrap();
    let transfer: u64 = entries.iter().map(|e| e[1].as_u64().unwrap_or(0)).sum();
    // cross-origin entries report 0 bytes without Timing-Allow-Origin: the same requests again, as
    // served (gzipped where the server compresses), body bytes only
    let mut replayed = 0;
    for e in entries {
        let url = e[0].as_str().unwrap();
        let req = if url.ends_with("/sessions") {
            s.http.post(url).json(&json!({"channel": "website_embed"}))
        } else {
            s.http.get(url)
        };
        let r = req.header(header::ORIGIN, &s.shop.base).header(header::ACCEPT_ENCODING, "gzip").send().await.unwrap();
        assert!(r.status().is_success(), "{url}: {}", r.status());
        replayed += r.bytes().await.unwrap().len();
    }

    let mut times = Vec::new();
    for k in 0..50 {
        b.js(
            &format!(
                "const i = {}; i.value = arguments[0]; i.dispatchEvent(new Event('input')); {}.click();",
                wt("steward-input"),
                wt("steward-send")
            ),
            json!([format!("{QUESTION} ({k})")]),
        )
        .await;
        let n = k + 1;
        let ms = b
            .until(&format!(
                "{W}.querySelectorAll('.answer').length >= {n} && Array.from({W}.querySelectorAll('.answer'))[{k}].dataset.firstChunkMs"
            ))
            .await;
        times.push(ms.as_str().unwrap().parse::<f64>().unwrap());
    }
    times.sort_by(|a, c| a.partial_cmp(c).unwrap());
    println!("loader (embed.js): {loader_gz} bytes gzipped, as served");
    println!(
        "click → interactive: {:.0} ms, {} requests plus the session's CORS preflight ({}), {replayed} bytes of \
         bodies as served (Resource Timing: {transfer} bytes transferred, cross-origin)",
        t1.as_f64().unwrap() - t0.as_f64().unwrap(),
        entries.len(),
        entries
            .iter()
            .map(|e| e[0].as_str().unwrap().rsplit('/').next().unwrap().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "click → first streamed chunk over {} messages: p50 {:.0} ms, p95 {:.0} ms, min {:.0}, max {:.0}",
        times.len(),
        times[times.len() / 2],
        times[times.len() * 95 / 100],
        times[0],
        times[times.len() - 1]
    );
    b.quit().await;
    s.stop();
}

/// A routine in the widget: the visitor is told what is still needed, and that an approval is
/// pending.
#[tokio::test(flavor = "multi_thread")]
async fn the_widget_shows_what_a_routine_still_needs_and_an_approval_wait() {
    let s = Setup::start().await;
    let agents = s.api.call(Method::GET, "/api/v1/agents", None).await;
    let agent = agents["agents"][0]["id"].as_str().unwrap().to_string();
    let slot =
        |k: &str, t: &str, o: i64| json!({"stableSlotId": k, "key": k, "type": t, "required": true, "ordinal": o});
    let def = json!({
        "name": "Refund",
        "activation": {"triggerDescription": "shopper asks for a refund of money on an order"},
        "slots": [slot("amount", "number", 1), slot("contact", "email", 2)],
        "steps": [
            {"stableStepId": "collect", "kind": "chat", "ordinal": 1, "instruction": "Tell me the refund {{slot.amount}} and a {{slot.contact}} address."},
            {"stableStepId": "review", "kind": "approval", "ordinal": 2, "captureKey": "call",
             "instruction": "A manager must check this refund.", "options": [{"id": "ok", "label": "Approve"}, {"id": "no", "label": "Decline"}]},
        ],
        "transitions": [
            {"fromStep": "collect", "toRef": "review", "guardKind": "default", "ordinal": 1},
            {"fromStep": "review", "toRef": "done", "guardKind": "field", "fieldRef": "call.id", "fieldOp": "equals", "fieldValue": "ok", "ordinal": 1},
            {"fromStep": "review", "toRef": "done", "guardKind": "field", "fieldRef": "call.id", "fieldOp": "equals", "fieldValue": "no", "ordinal": 2},
        ],
        "terminals": [{"stableStepId": "done", "kind": "complete", "ordinal": 1}],
    });
    s.api.call(Method::POST, &format!("/api/v1/agents/{agent}/routines"), Some(json!({"definition": def}))).await;
    s.api.configure_default_agent(json!({})).await;
    let driver = Driver::start();
    let b = driver.session().await;
    b.go(&s.shop.page(&s.embed, "")).await;
    launcher(&b).await;
    open(&b).await;
    say(&b, "I would like a refund of money on my order").await;
    answer(&b, 1).await;
    let notice = wt("steward-handoff");
    b.until(&format!("{notice}.textContent.startsWith('Still needed')")).await;
    let text = b.js(&format!("return {notice}.textContent"), json!([])).await;
    assert_eq!(text, "Still needed: amount, contact");
    say(&b, "75 please, mail me at fay@example.com").await;
    answer(&b, 2).await;
    b.until(&format!("{notice}.textContent.includes('waiting for a review')")).await;
    b.screenshot(&shots().join("widget-routine.png")).await;
    let mut problems = vec![];
    page_problems(&b, "routine", &mut problems).await;
    assert!(problems.is_empty(), "{problems:?}");
    b.quit().await;
    s.stop();
}
