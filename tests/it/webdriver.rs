//! A small W3C WebDriver client over reqwest, driving Debian's `chromedriver` and headless
//! `chromium` (installed by `scripts/install-deps.sh test`). Waiting happens in the browser: an
//! element lookup uses the session's implicit wait, and `until` runs a predicate on each animation
//! frame inside the page until it holds.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A running `chromedriver` on a free loopback port.
pub struct Driver {
    child: Child,
    base: String,
}

impl Driver {
    pub fn start() -> Driver {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let mut child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (scripts/install-deps.sh test installs Debian's chromium-driver)");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        // it prints a banner, then "ChromeDriver was started successfully on port N."
        while !line.contains("started successfully") {
            line.clear();
            assert!(out.read_line(&mut line).unwrap() > 0, "chromedriver exited");
        }
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        Driver { child, base: format!("http://127.0.0.1:{port}") }
    }

    /// A new headless browser session.
    pub async fn session(&self) -> Browser {
        let http = reqwest::Client::new();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1360,900"],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let r: Value =
            http.post(format!("{}/session", self.base)).json(&caps).send().await.unwrap().json().await.unwrap();
        let id = r["value"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {r}")).to_string();
        let b = Browser { http, url: format!("{}/session/{id}", self.base) };
        b.cmd("POST", "/timeouts", json!({"implicit": 30_000, "script": 90_000, "pageLoad": 30_000})).await;
        b
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Tab key, for [`Browser::keys`].
pub const TAB: &str = "\u{E004}";
/// The Enter key.
pub const ENTER: &str = "\u{E007}";
/// The Escape key.
pub const ESCAPE: &str = "\u{E00C}";

/// One browser session.
pub struct Browser {
    http: reqwest::Client,
    url: String,
}

/// An element of the page.
pub struct El<'a> {
    b: &'a Browser,
    id: String,
}

impl Browser {
    async fn cmd(&self, method: &str, path: &str, body: Value) -> Value {
        let url = format!("{}{path}", self.url);
        let req = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body),
        };
        let r: Value = req.send().await.unwrap().json().await.unwrap();
        if let Some(e) = r["value"]["error"].as_str() {
            panic!("webdriver {method} {path}: {e}: {}", r["value"]["message"]);
        }
        r["value"].clone()
    }

    /// Types on the keyboard into whatever has focus (W3C key actions): [`TAB`], [`ENTER`] and
    /// [`ESCAPE`] are keys, anything else is typed as text.
    pub async fn keys(&self, text: &str) {
        let mut actions = Vec::new();
        for c in text.chars() {
            actions.push(json!({"type": "keyDown", "value": c.to_string()}));
            actions.push(json!({"type": "keyUp", "value": c.to_string()}));
        }
        self.cmd("POST", "/actions", json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]})).await;
    }

    /// The focused element's `data-testid`, or its tag and text when it has none.
    pub async fn focused(&self) -> String {
        let v = self
            .js(
                "const e = document.activeElement; return e ? (e.dataset.testid || (e.tagName + ':' + e.textContent.trim().slice(0, 40))) : ''",
                json!([]),
            )
            .await;
        v.as_str().unwrap_or("").to_string()
    }

    /// Presses Tab until the element with this `data-testid` has focus (at most 80 presses).
    pub async fn tab_to(&self, testid: &str) {
        let mut path = Vec::new();
        for _ in 0..80 {
            let f = self.focused().await;
            if f == testid {
                return;
            }
            path.push(f);
            self.keys(TAB).await;
        }
        panic!("Tab never reached {testid}; focus went through {path:?}");
    }

    pub async fn go(&self, url: &str) {
        self.cmd("POST", "/url", json!({"url": url})).await;
    }

    pub async fn current_url(&self) -> String {
        self.cmd("GET", "/url", Value::Null).await.as_str().unwrap().to_string()
    }

    /// The first element matching `css`, waiting (implicitly) for it to appear.
    pub async fn find(&self, css: &str) -> El<'_> {
        let v = self.cmd("POST", "/element", json!({"using": "css selector", "value": css})).await;
        El { b: self, id: v[ELEMENT].as_str().unwrap().to_string() }
    }

    /// `[data-testid=…]`, waiting for it.
    pub async fn tid(&self, id: &str) -> El<'_> {
        self.find(&format!("[data-testid={id}]")).await
    }

    /// How many elements match `css` now (no waiting).
    pub async fn count(&self, css: &str) -> usize {
        self.js("return document.querySelectorAll(arguments[0]).length", json!([css])).await.as_u64().unwrap() as usize
    }

    pub async fn js(&self, script: &str, args: Value) -> Value {
        self.cmd("POST", "/execute/sync", json!({"script": script, "args": args})).await
    }

    /// Runs `body` as an async function in the page; its resolved value comes back.
    pub async fn js_async(&self, body: &str, args: Value) -> Value {
        let script = format!(
            "const done = arguments[arguments.length - 1]; const args = Array.from(arguments).slice(0, -1);
             (async (...args) => {{ {body} }})(...args).then(done, e => done({{__error: String(e)}}));"
        );
        let v = self.cmd("POST", "/execute/async", json!({"script": script, "args": args})).await;
        assert!(v.get("__error").is_none(), "page script failed: {v}");
        v
    }

    /// Waits in the page until `predicate` (a JS expression) is truthy; returns its value.
    pub async fn until(&self, predicate: &str) -> Value {
        let body = format!(
            "const deadline = performance.now() + 60000;
             for (;;) {{
               const v = (() => {{ try {{ return {predicate}; }} catch (e) {{ return null; }} }})();
               if (v) return v;
               if (performance.now() > deadline) throw new Error('timed out waiting for: ' + {p});
               await new Promise(r => requestAnimationFrame(r));
             }}",
            p = serde_json::to_string(predicate).unwrap()
        );
        self.js_async(&body, json!([])).await
    }

    pub async fn screenshot(&self, path: &std::path::Path) {
        use base64::Engine;
        let v = self.cmd("GET", "/screenshot", Value::Null).await;
        let png = base64::engine::general_purpose::STANDARD.decode(v.as_str().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }

    /// The browser console entries since the last call.
    pub async fn console(&self) -> Vec<String> {
        let v = self.cmd("POST", "/se/log", json!({"type": "browser"})).await;
        v.as_array().into_iter().flatten().map(|e| format!("{} {}", e["level"], e["message"])).collect()
    }

    pub async fn delete_cookies(&self) {
        self.cmd("DELETE", "/cookie", Value::Null).await;
    }

    pub async fn quit(self) {
        self.cmd("DELETE", "", Value::Null).await;
    }
}

impl El<'_> {
    pub async fn click(&self) {
        self.b.cmd("POST", &format!("/element/{}/click", self.id), json!({})).await;
    }

    pub async fn send(&self, text: &str) {
        self.b.cmd("POST", &format!("/element/{}/value", self.id), json!({"text": text})).await;
    }

    /// The text a user sees: waits (up to five seconds) for the element to be rendered, so a dialog
    /// between its render and its `showModal()` is not read as empty.
    pub async fn text(&self) -> String {
        let el = json!({ (ELEMENT): self.id });
        self.b
            .js_async(
                "const deadline = performance.now() + 5000;
                 while (!args[0].checkVisibility() && performance.now() < deadline)
                   await new Promise(r => requestAnimationFrame(r));
                 return true;",
                json!([el]),
            )
            .await;
        self.b.cmd("GET", &format!("/element/{}/text", self.id), Value::Null).await.as_str().unwrap_or("").to_string()
    }

    pub async fn value(&self) -> String {
        let v = self.b.cmd("GET", &format!("/element/{}/property/value", self.id), Value::Null).await;
        v.as_str().unwrap_or("").to_string()
    }

    /// Chooses the `<option>` with this value.
    pub async fn select(&self, value: &str) {
        let css = format!("option[value=\"{value}\"]");
        let v = self
            .b
            .cmd("POST", &format!("/element/{}/element", self.id), json!({"using": "css selector", "value": css}))
            .await;
        let opt = El { b: self.b, id: v[ELEMENT].as_str().unwrap().to_string() };
        opt.click().await;
    }
}
