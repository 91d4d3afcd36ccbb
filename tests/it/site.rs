//! A small real website on 127.0.0.1 for the crawler's tests: Larkspur Coffee Roasters, served
//! from tests/it/fixtures/site (HTML pages with shared header, nav, cookie banner and footer,
//! robots.txt, a sitemap index with a plain and a gzip sitemap) plus a few answers made here:
//! redirects (one to a second listener, another origin; one to the cloud metadata address),
//! 429/403/500, a calendar crawl trap, a page of 500,001 characters and a PDF. Content pages carry
//! an ETag and Last-Modified and answer conditional requests with 304. Every request is counted.
//! `manifest.json` beside the pages says what a crawl should make of each path.
//!
//! The server runs on its own thread and runtime, so a test that blocks its own thread (running
//! jobs until idle) still gets answers.

#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Method, Response, Uri, header};
use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;

const HTML: &str = "text/html; charset=utf-8";
/// Fixture files served gzip-compressed, under their name plus `.gz` (not served plain).
const GZIPPED: &[&str] = &["sitemap-more.xml"];
/// The length of `/huge`, in characters (ASCII, so also bytes).
pub const HUGE_CHARS: usize = 500_001;
/// Where `/metadata` redirects.
pub const METADATA_URL: &str = "http://169.254.169.254/latest/meta-data/";

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/site")
}

/// The Last-Modified of every page until `set_page` replaces it.
fn fixture_time() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 6, 2, 10, 0, 0).unwrap()
}

fn http_date(t: DateTime<Utc>) -> String {
    t.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

#[derive(Clone)]
struct Page {
    body: String,
    etag: String,
    modified: DateTime<Utc>,
}

impl Page {
    fn new(body: String, modified: DateTime<Utc>) -> Page {
        let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(body.as_bytes()));
        Page { etag: format!("\"{}\"", &digest[..16]), body, modified }
    }

    /// Whether the request's validators say the client's copy is current.
    fn fresh(&self, req: &HeaderMap) -> bool {
        if let Some(v) = req.get(header::IF_NONE_MATCH) {
            let v = v.to_str().unwrap_or_default();
            return v.split(',').map(str::trim).any(|t| t == "*" || t.trim_start_matches("W/") == self.etag);
        }
        let since = req
            .get(header::IF_MODIFIED_SINCE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| DateTime::parse_from_rfc2822(v).ok());
        since.is_some_and(|s| self.modified <= s.with_timezone(&Utc))
    }
}

/// One answer, before it becomes a response.
struct Answer {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    /// An answer about an HTML page (held back by `set_delay`).
    html: bool,
}

impl Answer {
    fn typed(status: u16, content_type: &str, body: Vec<u8>) -> Answer {
        Answer { status, headers: vec![("content-type", content_type.to_string())], body, html: false }
    }

    fn html(status: u16, body: &str) -> Answer {
        Answer { html: true, ..Answer::typed(status, HTML, body.as_bytes().to_vec()) }
    }

    fn redirect(to: &str) -> Answer {
        Answer { status: 302, headers: vec![("location", to.to_string())], body: Vec::new(), html: false }
    }

    fn into_response(self) -> Response<Body> {
        let mut b = Response::builder().status(self.status);
        for (k, v) in self.headers {
            b = b.header(k, v);
        }
        b.body(Body::from(self.body)).unwrap()
    }
}

struct Shared {
    base: String,
    base_www: String,
    offsite: String,
    pages: Mutex<HashMap<String, Page>>,
    removed: Mutex<HashSet<String>>,
    /// Non-HTML files by path: (content type, bytes).
    files: HashMap<String, (&'static str, Vec<u8>)>,
    calendar: String,
    not_found: String,
    landing: String,
    huge: Page,
    pdf: Vec<u8>,
    hits: Mutex<HashMap<String, usize>>,
    hits_query: Mutex<HashMap<String, usize>>,
    log: Mutex<Vec<String>>,
    total: AtomicUsize,
    not_modified: AtomicUsize,
    offsite_hits: AtomicUsize,
    delay: Mutex<Duration>,
}

impl Shared {
    fn expand(&self, s: &str) -> String {
        s.replace("{{BASE_WWW}}", &self.base_www).replace("{{BASE}}", &self.base).replace("{{OFFSITE}}", &self.offsite)
    }

    fn record(&self, method: &Method, path: &str, query: Option<&str>) {
        self.total.fetch_add(1, Ordering::SeqCst);
        if method != Method::GET {
            return;
        }
        let key = query.map_or_else(|| path.to_string(), |q| format!("{path}?{q}"));
        *self.hits.lock().unwrap().entry(path.to_string()).or_default() += 1;
        *self.hits_query.lock().unwrap().entry(key.clone()).or_default() += 1;
        self.log.lock().unwrap().push(key);
    }

    /// The page at `path`, or at `path` without its trailing slash (`/about/` is `/about`).
    fn page(&self, path: &str) -> Option<(String, Page)> {
        let removed = self.removed.lock().unwrap();
        let pages = self.pages.lock().unwrap();
        let alias = path.strip_suffix('/').filter(|p| !p.is_empty());
        [Some(path), alias]
            .into_iter()
            .flatten()
            .filter(|p| !removed.contains(*p))
            .find_map(|p| pages.get(p).map(|page| (p.to_string(), page.clone())))
    }

    fn page_answer(&self, path: &str, page: &Page, req: &HeaderMap) -> Answer {
        let mut headers = vec![("etag", page.etag.clone()), ("last-modified", http_date(page.modified))];
        if path == "/x-robots" {
            headers.push(("x-robots-tag", "noindex".to_string()));
        }
        if page.fresh(req) {
            self.not_modified.fetch_add(1, Ordering::SeqCst);
            return Answer { status: 304, headers, body: Vec::new(), html: true };
        }
        let mut a = Answer::html(200, &page.body);
        a.headers.extend(headers);
        a
    }

    fn answer(&self, path: &str, query: Option<&str>, req: &HeaderMap) -> Answer {
        if self.removed.lock().unwrap().contains(path) {
            return Answer::html(404, &self.not_found);
        }
        if let Some((key, page)) = self.page(path) {
            return self.page_answer(&key, &page, req);
        }
        if let Some((content_type, bytes)) = self.files.get(path) {
            return Answer::typed(200, content_type, bytes.clone());
        }
        match path {
            "/away" => Answer::redirect("/away-2"),
            "/away-2" => Answer::redirect(&format!("{}/landing", self.offsite)),
            "/metadata" => Answer::redirect(METADATA_URL),
            "/busy" => {
                let mut a = Answer::html(429, &error_page("Too many requests", "Please slow down and try again."));
                a.headers.push(("retry-after", "1".to_string()));
                a
            }
            "/forbidden" => Answer::html(403, &error_page("Forbidden", "The trade portal is for signed-in customers.")),
            "/broken" => Answer::html(500, &error_page("Something went wrong", "Order tracking is unavailable.")),
            "/calendar" => {
                let month = query
                    .into_iter()
                    .flat_map(|q| q.split('&'))
                    .find_map(|kv| kv.strip_prefix("month="))
                    .and_then(|m| m.parse::<i64>().ok())
                    .unwrap_or(1);
                let body = self
                    .calendar
                    .replace("{{MONTH}}", &month.to_string())
                    .replace("{{PREV}}", &month.saturating_sub(1).to_string())
                    .replace("{{NEXT}}", &month.saturating_add(1).to_string());
                self.page_answer(path, &Page::new(body, fixture_time()), req)
            }
            "/huge" => self.page_answer(path, &self.huge, req),
            "/report.pdf" => Answer::typed(200, "application/pdf", self.pdf.clone()),
            _ => Answer::html(404, &self.not_found),
        }
    }
}

fn error_page(title: &str, message: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en-GB\">\n<head>\n<meta charset=\"utf-8\">\n<title>{title}</title>\n</head>\n\
         <body>\n<h1>{title}</h1>\n<p>{message}</p>\n</body>\n</html>\n"
    )
}

/// A valid HTML page of exactly `HUGE_CHARS` characters: the roastery's batch log.
fn huge_page() -> String {
    let head = "<!DOCTYPE html>\n<html lang=\"en-GB\">\n<head>\n<meta charset=\"utf-8\">\n\
                <title>Complete roasting log | Larkspur Coffee Roasters</title>\n</head>\n<body>\n<main>\n\
                <h1>Complete roasting log</h1>\n\
                <p>This log lists every batch roasted at Mill Lane since the first roast in March 2014.</p>\n";
    let tail = "</main>\n</body>\n</html>\n";
    let origins =
        ["Kochere, Ethiopia", "La Esperanza, Colombia", "Fazenda Pinhal, Brazil", "Finca El Roble, Guatemala"];
    let mut s = String::from(head);
    for n in 1.. {
        let p = format!(
            "<p>Batch {n}: {} roasted for {} minutes and rested for {} days before packing.</p>\n",
            origins[n % origins.len()],
            9 + n % 5,
            2 + n % 4
        );
        // room for the closing paragraph (at least one character of text) and the tail
        if s.len() + p.len() + "<p>x</p>\n".len() + tail.len() > HUGE_CHARS {
            break;
        }
        s.push_str(&p);
    }
    let room = HUGE_CHARS - s.len() - "<p></p>\n".len() - tail.len();
    let filler = "More notes follow in the next volume of the log. ".repeat(room / 49 + 1);
    s.push_str("<p>");
    s.push_str(&filler[..room]);
    s.push_str("</p>\n");
    s.push_str(tail);
    assert_eq!(s.chars().count(), HUGE_CHARS);
    s
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

fn content_type(name: &str) -> &'static str {
    match name.rsplit('.').next().unwrap_or_default() {
        "txt" => "text/plain; charset=utf-8",
        "xml" => "application/xml; charset=utf-8",
        "js" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "gz" => "application/gzip",
        "json" => "application/json",
        _ => "application/octet-stream",
    }
}

/// Every file under `dir`, as paths relative to it with `/` separators.
fn walk(dir: &Path, prefix: &str, out: &mut Vec<(String, PathBuf)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
        if entry.path().is_dir() {
            walk(&entry.path(), &rel, out);
        } else {
            out.push((rel, entry.path()));
        }
    }
}

/// The fictional shop's website, on 127.0.0.1 (and a second listener for another origin).
pub struct Site {
    base: String,
    port: u16,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Site {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Site {
    /// Serves tests/it/fixtures/site; both listeners are bound before this returns.
    pub async fn start() -> Site {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let offsite_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let base = format!("http://localhost:{port}");
        let mut shared = Shared {
            base_www: format!("http://www.localhost:{port}"),
            offsite: format!("http://127.0.0.1:{}", offsite_listener.local_addr().unwrap().port()),
            base: base.clone(),
            pages: Mutex::default(),
            removed: Mutex::default(),
            files: HashMap::new(),
            calendar: String::new(),
            not_found: String::new(),
            landing: String::new(),
            huge: Page::new(huge_page(), fixture_time()),
            pdf: crate::fixtures::pdf_with(
                &[
                    "Larkspur Coffee Roasters: sourcing report 2024\nWe paid growers an average of 7.10 US dollars per kilo of green coffee.",
                ],
                false,
            ),
            hits: Mutex::default(),
            hits_query: Mutex::default(),
            log: Mutex::default(),
            total: AtomicUsize::new(0),
            not_modified: AtomicUsize::new(0),
            offsite_hits: AtomicUsize::new(0),
            delay: Mutex::new(Duration::ZERO),
        };
        let mut files = Vec::new();
        walk(&fixture_dir(), "", &mut files);
        let mut pages = HashMap::new();
        for (rel, file) in files {
            let bytes = std::fs::read(&file).unwrap();
            // every fixture but a binary one is UTF-8 text with placeholders
            let expanded = String::from_utf8(bytes.clone()).map(|t| shared.expand(&t)).unwrap_or_default();
            let text = || expanded.clone();
            match rel.as_str() {
                "manifest.json" => {}
                "templates/calendar.html" => shared.calendar = text(),
                "templates/404.html" => shared.not_found = text(),
                "offsite/landing.html" => shared.landing = text(),
                r if r.ends_with(".html") => {
                    let path = match r.trim_end_matches(".html") {
                        "index" => "/".to_string(),
                        p => format!("/{p}"),
                    };
                    pages.insert(path, Page::new(text(), fixture_time()));
                }
                r if GZIPPED.contains(&r) => {
                    let path = format!("/{r}.gz");
                    shared.files.insert(path, (content_type(".gz"), gzip(text().as_bytes())));
                }
                r => {
                    let body = if content_type(r).starts_with("text/") || r.ends_with(".xml") {
                        text().into_bytes()
                    } else {
                        bytes.clone()
                    };
                    shared.files.insert(format!("/{r}"), (content_type(r), body));
                }
            }
        }
        assert!(pages.len() > 20 && !shared.calendar.is_empty() && !shared.not_found.is_empty(), "fixtures missing");
        shared.pages = Mutex::new(pages);
        let shared = Arc::new(shared);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let s = shared.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let site = s.clone();
                let router = axum::Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap| {
                    let s = site.clone();
                    async move {
                        s.record(&method, uri.path(), uri.query());
                        let answer = s.answer(uri.path(), uri.query(), &headers);
                        let delay = *s.delay.lock().unwrap();
                        if answer.html && !delay.is_zero() {
                            tokio::time::sleep(delay).await;
                        }
                        answer.into_response()
                    }
                });
                let offsite = axum::Router::new().fallback(move |uri: Uri| {
                    let s = s.clone();
                    async move {
                        s.offsite_hits.fetch_add(1, Ordering::SeqCst);
                        match uri.path() {
                            "/landing" => Answer::html(200, &s.landing),
                            _ => Answer::html(404, &error_page("Not found", "Nothing here.")),
                        }
                        .into_response()
                    }
                });
                for (l, r) in [(listener, router), (offsite_listener, offsite)] {
                    l.set_nonblocking(true).unwrap();
                    let l = tokio::net::TcpListener::from_std(l).unwrap();
                    tokio::spawn(async move { axum::serve(l, r).await });
                }
                // the runtime (and every connection) ends with the Site
                let _ = stopped.await;
            });
        });
        Site { base, port, shared, stop: Some(stop), thread: Some(thread) }
    }

    /// `http://localhost:PORT`
    pub fn base(&self) -> String {
        self.base.clone()
    }

    /// `base()` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:OTHERPORT`: the second listener, another origin (`/away-2` redirects there).
    pub fn offsite_base(&self) -> String {
        self.shared.offsite.clone()
    }

    /// The URL of a manifest `path`: placeholders (`{{BASE}}`, `{{BASE_WWW}}`, `{{OFFSITE}}`)
    /// expanded, a plain path prefixed with `base()`.
    pub fn manifest_url(&self, path: &str) -> String {
        if path.starts_with("{{") { self.shared.expand(path) } else { self.url(path) }
    }

    /// Any text with the placeholders expanded.
    pub fn expand(&self, s: &str) -> String {
        self.shared.expand(s)
    }

    /// GET requests for exactly `path` (any query or none) so far, 304s included.
    pub fn hits(&self, path: &str) -> usize {
        self.shared.hits.lock().unwrap().get(path).copied().unwrap_or(0)
    }

    /// GET requests for exactly `path_and_query` (`/calendar?month=2`; a bare path counts only
    /// requests without a query).
    pub fn hits_with_query(&self, path_and_query: &str) -> usize {
        self.shared.hits_query.lock().unwrap().get(path_and_query).copied().unwrap_or(0)
    }

    /// Every GET so far, as path and query, in arrival order.
    pub fn requests(&self) -> Vec<String> {
        self.shared.log.lock().unwrap().clone()
    }

    /// All requests to the site so far (any method; the offsite listener not included).
    pub fn total_hits(&self) -> usize {
        self.shared.total.load(Ordering::SeqCst)
    }

    /// 304 answers so far.
    pub fn not_modified_served(&self) -> usize {
        self.shared.not_modified.load(Ordering::SeqCst)
    }

    /// Requests to the second listener (another origin) so far.
    pub fn offsite_hits(&self) -> usize {
        self.shared.offsite_hits.load(Ordering::SeqCst)
    }

    /// Replaces (or adds) the page at `path` (placeholders expanded): a new ETag and a
    /// Last-Modified later than the one before.
    pub fn set_page(&self, path: &str, html: &str) {
        let body = self.shared.expand(html);
        let mut pages = self.shared.pages.lock().unwrap();
        let before = pages.get(path).map_or(fixture_time(), |p| p.modified);
        let now = DateTime::from_timestamp(Utc::now().timestamp(), 0).unwrap();
        let modified = now.max(before + chrono::Duration::seconds(1));
        pages.insert(path.to_string(), Page::new(body, modified));
        self.shared.removed.lock().unwrap().remove(path);
    }

    /// The page at `path` answers 404 from now on (until `set_page`).
    pub fn remove_page(&self, path: &str) {
        self.shared.pages.lock().unwrap().remove(path);
        self.shared.removed.lock().unwrap().insert(path.to_string());
    }

    /// Every HTML answer (pages, 304s, error and 404 pages) waits `d` first; zero by default.
    pub fn set_delay(&self, d: Duration) {
        *self.shared.delay.lock().unwrap() = d;
    }

    /// tests/it/fixtures/site/manifest.json: what a crawl should make of each path.
    pub fn manifest() -> Value {
        serde_json::from_slice(&std::fs::read(fixture_dir().join("manifest.json")).unwrap()).unwrap()
    }
}

/// The visible text of an HTML document: no tags, scripts or styles; entities decoded;
/// whitespace collapsed.
pub fn visible_text(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(lt) = rest.find('<') {
        out.push_str(&rest[..lt]);
        let tail = &rest[lt..];
        let lower = tail.get(..7).unwrap_or_default().to_ascii_lowercase();
        let close = if lower.starts_with("<script") {
            "</script>"
        } else if lower.starts_with("<style") {
            "</style>"
        } else {
            ">"
        };
        rest = tail.find(close).map_or("", |i| &tail[i + close.len()..]);
    }
    out.push_str(rest);
    let decoded = out
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", " ")
        .replace("&amp;", "&");
    decoded.split_whitespace().collect::<Vec<_>>().join(" ")
}

async fn get(c: &reqwest::Client, url: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut r = c.get(url);
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    r.send().await.unwrap()
}

fn header(r: &reqwest::Response, name: &str) -> String {
    r.headers().get(name).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default()
}

#[tokio::test]
async fn site_serves_its_fixtures() {
    let site = Site::start().await;
    let base = site.base();
    assert_eq!(base, format!("http://localhost:{}", site.port()));
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", site.port()).parse().unwrap();
    let c = reqwest::Client::builder()
        .no_proxy()
        .resolve("localhost", addr)
        .resolve("www.localhost", addr)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();

    // robots.txt and the sitemaps
    let r = get(&c, &site.url("/robots.txt"), &[]).await;
    assert_eq!(r.status(), 200);
    assert!(header(&r, "content-type").starts_with("text/plain"));
    let robots = r.text().await.unwrap();
    assert!(robots.contains("User-agent: *\nDisallow: /private/\n"), "{robots}");
    assert!(robots.contains(&format!("Sitemap: {base}/sitemap_index.xml")), "{robots}");
    let index = get(&c, &site.url("/sitemap_index.xml"), &[]).await.text().await.unwrap();
    assert!(index.contains("<sitemapindex") && index.contains(&format!("<loc>{base}/sitemap-more.xml.gz</loc>")));
    let plain = get(&c, &site.url("/sitemap-pages.xml"), &[]).await.text().await.unwrap();
    assert!(plain.contains("<urlset") && plain.contains(&format!("<loc>{base}/sitemap-only</loc>")));
    let r = get(&c, &site.url("/sitemap-more.xml.gz"), &[]).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "content-type"), "application/gzip");
    let gz = r.bytes().await.unwrap();
    assert_eq!(&gz[..2], &[0x1f, 0x8b]);
    let mut xml = String::new();
    flate2::read::GzDecoder::new(&gz[..]).read_to_string(&mut xml).unwrap();
    assert!(xml.contains("<urlset") && xml.contains(&format!("<loc>{base}/sitemap-only-gz</loc>")), "{xml}");
    assert_eq!(get(&c, &site.url("/sitemap-more.xml"), &[]).await.status(), 404);

    // pages: HTML with validators, placeholders filled, conditional requests
    let r = get(&c, &site.url("/"), &[]).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "content-type"), HTML);
    let (etag, modified) = (header(&r, "etag"), header(&r, "last-modified"));
    assert!(etag.starts_with('"') && modified.ends_with("GMT"), "{etag} {modified}");
    let home = r.text().await.unwrap();
    assert!(home.contains(&format!("href=\"http://www.localhost:{}/contact\"", site.port())));
    assert!(home.contains("<div class=\"cookie-banner\" id=\"cookie-consent\">"));
    assert!(!home.contains("{{"));
    let r = get(&c, &site.url("/"), &[("if-none-match", &etag)]).await;
    assert_eq!(r.status(), 304);
    assert_eq!(header(&r, "etag"), etag);
    assert!(r.bytes().await.unwrap().is_empty());
    assert_eq!(get(&c, &site.url("/"), &[("if-modified-since", &modified)]).await.status(), 304);
    assert_eq!(get(&c, &site.url("/"), &[("if-none-match", "\"stale\"")]).await.status(), 200);
    assert_eq!(site.not_modified_served(), 2);
    let www = get(&c, &format!("http://www.localhost:{}/contact", site.port()), &[]).await;
    assert_eq!(www.text().await.unwrap(), get(&c, &site.url("/contact"), &[]).await.text().await.unwrap());
    let about = get(&c, &site.url("/about"), &[]).await.text().await.unwrap();
    assert_eq!(get(&c, &site.url("/about/"), &[]).await.text().await.unwrap(), about);
    let tracked = get(&c, &site.url("/products?utm_source=news&b=2&a=1&gclid=x"), &[]).await;
    assert_eq!(tracked.status(), 200);

    // the special pages
    let r = get(&c, &site.url("/x-robots"), &[]).await;
    assert_eq!((r.status().as_u16(), header(&r, "x-robots-tag")), (200, "noindex".to_string()));
    assert_eq!(header(&get(&c, &site.url("/noindex"), &[]).await, "x-robots-tag"), "");
    let r = get(&c, &site.url("/busy"), &[]).await;
    assert_eq!((r.status().as_u16(), header(&r, "retry-after")), (429, "1".to_string()));
    assert_eq!(get(&c, &site.url("/forbidden"), &[]).await.status(), 403);
    assert_eq!(get(&c, &site.url("/broken"), &[]).await.status(), 500);
    let r = get(&c, &site.url("/nowhere"), &[]).await;
    assert_eq!((r.status().as_u16(), header(&r, "content-type")), (404, HTML.to_string()));
    let r = get(&c, &site.url("/away"), &[]).await;
    assert_eq!((r.status().as_u16(), header(&r, "location")), (302, "/away-2".to_string()));
    let r = get(&c, &site.url("/away-2"), &[]).await;
    assert_eq!((r.status().as_u16(), header(&r, "location")), (302, format!("{}/landing", site.offsite_base())));
    let r = get(&c, &site.url("/metadata"), &[]).await;
    assert_eq!((r.status().as_u16(), header(&r, "location")), (302, METADATA_URL.to_string()));
    assert_eq!(site.offsite_hits(), 0);
    let landing = get(&c, &format!("{}/landing", site.offsite_base()), &[]).await;
    assert!(landing.text().await.unwrap().contains("The Harbour Kitchen"));
    assert_eq!((site.offsite_hits(), site.hits("/landing")), (1, 0));
    let huge = get(&c, &site.url("/huge"), &[]).await.text().await.unwrap();
    assert_eq!(huge.chars().count(), HUGE_CHARS);
    assert!(huge.ends_with("</html>\n"));
    let r = get(&c, &site.url("/report.pdf"), &[]).await;
    assert_eq!(header(&r, "content-type"), "application/pdf");
    assert!(r.bytes().await.unwrap().starts_with(b"%PDF-"));
    let app = get(&c, &site.url("/app"), &[]).await.text().await.unwrap();
    assert!(app.contains("<div id=\"root\"></div>") && visible_text(&app) == "Larkspur Coffee Club");
    let r = get(&c, &site.url("/static/app.js"), &[]).await;
    assert!(header(&r, "content-type").starts_with("text/javascript"));
    let cal = get(&c, &site.url("/calendar?month=7"), &[]).await.text().await.unwrap();
    assert!(cal.contains("href=\"/calendar?month=8\"") && cal.contains("href=\"/calendar?month=6\""));
    let faq = visible_text(&get(&c, &site.url("/faq"), &[]).await.text().await.unwrap());
    let dup = visible_text(&get(&c, &site.url("/dup"), &[]).await.text().await.unwrap());
    assert_ne!(faq, dup);
    assert_eq!(faq.to_lowercase(), dup.to_lowercase(), "/dup differs from /faq in more than case and spacing");
    let old = get(&c, &site.url("/old-pricing"), &[]).await.text().await.unwrap();
    assert!(old.contains("<link rel=\"canonical\" href=\"/pricing\">"));

    // hits
    let before = site.total_hits();
    assert_eq!((site.hits("/"), site.hits_with_query("/")), (4, 4));
    assert_eq!((site.hits("/products"), site.hits_with_query("/products")), (1, 0));
    assert_eq!(site.hits_with_query("/products?utm_source=news&b=2&a=1&gclid=x"), 1);
    assert_eq!((site.hits("/calendar"), site.hits_with_query("/calendar?month=7")), (1, 1));
    assert_eq!((site.hits("/about"), site.hits("/about/"), site.hits("/private/secret")), (1, 1, 0));
    get(&c, &site.url("/faq"), &[]).await;
    assert_eq!((site.hits("/faq"), site.total_hits()), (2, before + 1));
    assert_eq!(site.requests().last().unwrap(), "/faq");

    // set_page, remove_page, set_delay
    let r = get(&c, &site.url("/pricing"), &[]).await;
    let (old_etag, old_modified) = (header(&r, "etag"), header(&r, "last-modified"));
    site.set_page("/pricing", "<html><body><main><p>New prices from {{BASE}} soon.</p></main></body></html>");
    let r = get(&c, &site.url("/pricing"), &[("if-none-match", &old_etag)]).await;
    assert_eq!(r.status(), 200);
    let new_etag = header(&r, "etag");
    assert_ne!(new_etag, old_etag);
    assert_ne!(header(&r, "last-modified"), old_modified);
    assert!(r.text().await.unwrap().contains(&format!("New prices from {base} soon.")));
    assert_eq!(get(&c, &site.url("/pricing"), &[("if-modified-since", &old_modified)]).await.status(), 200);
    assert_eq!(get(&c, &site.url("/pricing"), &[("if-none-match", &new_etag)]).await.status(), 304);
    site.remove_page("/about");
    assert_eq!(get(&c, &site.url("/about"), &[]).await.status(), 404);
    assert_eq!(get(&c, &site.url("/about/"), &[]).await.status(), 404);
    site.set_page("/about", &about);
    assert_eq!(get(&c, &site.url("/about/"), &[]).await.status(), 200);
    site.set_delay(Duration::from_millis(200));
    let t = std::time::Instant::now();
    assert_eq!(get(&c, &site.url("/shipping"), &[]).await.status(), 200);
    assert!(t.elapsed() >= Duration::from_millis(200));
    site.set_delay(Duration::ZERO);

    // the manifest tells the truth about the pages, and no page links to a missing one
    let manifest = Site::manifest();
    let pages = manifest["pages"].as_array().unwrap();
    assert!(pages.len() > 40);
    let fresh = Site::start().await;
    let c2 = reqwest::Client::builder()
        .no_proxy()
        .resolve("localhost", format!("127.0.0.1:{}", fresh.port()).parse().unwrap())
        .resolve("www.localhost", format!("127.0.0.1:{}", fresh.port()).parse().unwrap())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut links = HashSet::new();
    for e in pages {
        let path = e["path"].as_str().unwrap();
        let lines = |k: &str| -> Vec<String> {
            e[k].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
        };
        let (content, absent, boiler) = (lines("contentLines"), lines("absentLines"), lines("boilerplateLines"));
        if e["expect"] == "indexed" {
            assert!(content.len() >= 5, "{path}: too few content lines");
        }
        if content.is_empty() && absent.is_empty() && boiler.is_empty() {
            continue;
        }
        let html = get(&c2, &fresh.manifest_url(path), &[]).await.text().await.unwrap();
        let text = visible_text(&html);
        for l in content.iter().chain(&absent) {
            assert!(text.contains(l.as_str()), "{path}: {l:?} is not in its text");
        }
        for l in &boiler {
            assert!(html.contains(l.as_str()), "{path}: boilerplate {l:?} is not on the page");
        }
        for part in html.split("href=\"").skip(1) {
            let href = part.split('"').next().unwrap().replace("&amp;", "&");
            let href = href.split('#').next().unwrap().to_string();
            let www = format!("http://www.localhost:{}", fresh.port());
            if let Some(p) = href.strip_prefix(&fresh.base()).or_else(|| href.strip_prefix(&www)) {
                links.insert(p.to_string());
            } else if href.starts_with('/') {
                links.insert(href);
            } else {
                assert!(href.starts_with("https://") && href.contains(".example/"), "{path}: link {href}");
            }
        }
    }
    assert!(links.len() > 30, "{links:?}");
    for l in &links {
        let status = get(&c2, &fresh.url(l), &[]).await.status();
        assert_ne!(status, 404, "{l} is linked but missing");
    }
    for e in pages {
        let path = e["path"].as_str().unwrap();
        if e["expect"] == "never_fetched" || e["code"] == "robots_disallowed" {
            continue;
        }
        if path.starts_with('/') && !path.contains('#') {
            assert!(
                links.contains(path)
                    || path.starts_with("/sitemap")
                    || ["/robots.txt", "/away-2", "/static/app.js"].contains(&path),
                "{path} is reached from no page"
            );
        }
    }
}
