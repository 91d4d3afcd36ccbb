//! The embedded web pages: the operator dashboard at `/` (sign-in) and `/app/…` (one page app),
//! and the files under `assets/` (the dashboard's modules and styles, vendored libraries).
//!
//! Files are embedded in the binary (rust-embed; debug builds read them from the checkout, so a
//! page can be changed without rebuilding). Every file is served under `/assets/<build>/…`, where
//! `<build>` is a hash of all of them: the HTML names that prefix, so a browser may cache any file
//! for a year, and an upgrade (a new prefix) is never served stale. Each file also has an ETag
//! (its SHA-256) and is sent gzipped when the browser accepts it (compressed once, then kept).
//!
//! Every response from here carries a strict Content-Security-Policy (scripts and styles only
//! from this origin, no inline script or `eval`, no framing), `X-Content-Type-Options: nosniff`
//! and `Referrer-Policy: same-origin`.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use rust_embed::RustEmbed;
use sha2::{Digest, Sha256};

use crate::error::Error;
use crate::http::openapi::{Op, Routes};

#[derive(RustEmbed)]
#[folder = "assets/"]
struct Assets;

/// The policy of every page and file served here.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; \
    font-src 'self'; connect-src 'self'; manifest-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// The dashboard's HTML shell: `{{ASSETS}}` becomes the asset prefix.
const SHELL: &str = "dashboard/index.html";
/// The widget's loader and the anonymous link's page: `{{ASSETS}}` becomes the asset prefix.
const LOADER: &str = "widget/embed.js";
const CHAT_PAGE: &str = "widget/page.html";

/// What the dashboard serves, with the gzipped copies it has made so far.
#[derive(Default)]
pub struct Dashboard {
    gzipped: Mutex<HashMap<[u8; 32], Arc<Vec<u8>>>>,
    /// The build hash, computed once in release builds (debug builds recompute it: files change).
    build: std::sync::OnceLock<String>,
}

impl Dashboard {
    /// The hash of every embedded file (12 hex characters).
    fn build(&self) -> String {
        let compute = || {
            let mut names: Vec<String> = Assets::iter().map(|n| n.to_string()).collect();
            names.sort();
            let mut h = Sha256::new();
            for n in &names {
                if let Some(f) = Assets::get(n) {
                    h.update(n.as_bytes());
                    h.update(f.metadata.sha256_hash());
                }
            }
            hex::encode(h.finalize())[..12].to_string()
        };
        if cfg!(debug_assertions) { compute() } else { self.build.get_or_init(compute).clone() }
    }

    fn gzip(&self, key: [u8; 32], data: &[u8]) -> Arc<Vec<u8>> {
        if let Some(g) = self.gzipped.lock().get(&key) {
            return g.clone();
        }
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let g = Arc::new(enc.write_all(data).and_then(|()| enc.finish()).unwrap_or_default());
        self.gzipped.lock().insert(key, g.clone());
        g
    }
}

/// The routes of the web pages.
pub fn routes() -> Routes {
    let d = Arc::new(Dashboard::default());
    let (d1, d2, d3, d4, d5) = (d.clone(), d.clone(), d.clone(), d.clone(), d.clone());
    let page = |summary| Op::new(summary).public().media(200, "text/html", "The page");
    Routes::new("Web pages")
        .get("/", move |h: HeaderMap| shell(d1.clone(), h), page("The dashboard's sign-in page"))
        .get("/app", move |h: HeaderMap| shell(d2.clone(), h), page("The dashboard"))
        .get("/app/{*rest}", move |h: HeaderMap| shell(d.clone(), h), page("A dashboard page"))
        .get(
            "/assets/{build}/{*path}",
            move |p: Path<(String, String)>, h: HeaderMap| file(d3.clone(), p, h),
            Op::new("An embedded file (scripts, styles, images), cached for a year under its build prefix")
                .public()
                .media(200, "*/*", "The file")
                .errors(&[404]),
        )
        .get(
            "/embed.js",
            move |h: HeaderMap| loader(d4.clone(), h),
            Op::new("The website widget's loader").public().media(200, "text/javascript", "The script"),
        )
        .get("/chat/{token}", move |h: HeaderMap| chat_page(d5.clone(), h), page("The anonymous chat link's page"))
}

/// The widget's loader (`<script src="…/embed.js" data-token="…" async>` on any site): the one
/// file with a fixed address, so it is cached for five minutes only; it names the current build's
/// widget files. Any site may load it.
async fn loader(d: Arc<Dashboard>, h: HeaderMap) -> Response {
    let Some(f) = Assets::get(LOADER) else {
        return Error::not_found("file").into_response();
    };
    let js = String::from_utf8_lossy(&f.data).replace("{{ASSETS}}", &format!("/assets/{}", d.build()));
    let key: [u8; 32] = Sha256::digest(js.as_bytes()).into();
    let etag = format!("\"{}\"", hex::encode(&key[..16]));
    let mut resp = if h.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) == Some(etag.as_str()) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        body(&d, key, js.as_bytes(), content_type(LOADER), &h)
    };
    if let Ok(v) = HeaderValue::from_str(&etag) {
        resp.headers_mut().insert(header::ETAG, v);
    }
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300"));
    secure(&mut resp);
    resp.headers_mut().insert("cross-origin-resource-policy", HeaderValue::from_static("cross-origin"));
    resp.headers_mut().insert("timing-allow-origin", HeaderValue::from_static("*"));
    resp
}

/// The anonymous chat link's full-page chat (`/chat/{token}`): the widget's own code on this
/// origin; the page reads the launch token from its address.
async fn chat_page(d: Arc<Dashboard>, h: HeaderMap) -> Response {
    let Some(f) = Assets::get(CHAT_PAGE) else {
        return Error::not_found("page").into_response();
    };
    let html = String::from_utf8_lossy(&f.data).replace("{{ASSETS}}", &format!("/assets/{}", d.build()));
    let key: [u8; 32] = Sha256::digest(html.as_bytes()).into();
    let mut resp = body(&d, key, html.as_bytes(), content_type(CHAT_PAGE), &h);
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    secure(&mut resp);
    resp.headers_mut().insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    resp
}

/// The headers every page and file carries.
fn secure(resp: &mut Response) {
    let h = resp.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
}

fn accepts_gzip(h: &HeaderMap) -> bool {
    h.get_all(header::ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok()).any(|v| v.contains("gzip"))
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "json" => "application/json",
        "woff2" => "font/woff2",
        "txt" | "md" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// The HTML shell, never cached (it names the current build).
async fn shell(d: Arc<Dashboard>, h: HeaderMap) -> Response {
    let Some(f) = Assets::get(SHELL) else {
        return Error::not_found("dashboard").into_response();
    };
    let html = String::from_utf8_lossy(&f.data).replace("{{ASSETS}}", &format!("/assets/{}", d.build()));
    let key: [u8; 32] = Sha256::digest(html.as_bytes()).into();
    let mut resp = body(&d, key, html.as_bytes(), content_type(SHELL), &h);
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    secure(&mut resp);
    resp
}

/// A file under `assets/`: cached for a year when asked for under the current build, revalidated
/// otherwise; 304 when the browser's copy is current.
async fn file(d: Arc<Dashboard>, Path((build, path)): Path<(String, String)>, h: HeaderMap) -> Response {
    let Some(f) =
        Assets::get(&path).filter(|_| !path.ends_with(".md") && ![SHELL, LOADER, CHAT_PAGE].contains(&path.as_str()))
    else {
        let mut resp = Error::not_found("file").into_response();
        secure(&mut resp);
        return resp;
    };
    let key = f.metadata.sha256_hash();
    let etag = format!("\"{}\"", hex::encode(&key[..16]));
    let cache =
        if !cfg!(debug_assertions) && build == d.build() { "public, max-age=31536000, immutable" } else { "no-cache" };
    let mut resp = if h.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) == Some(etag.as_str()) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        body(&d, key, &f.data, content_type(&path), &h)
    };
    if let Ok(v) = HeaderValue::from_str(&etag) {
        resp.headers_mut().insert(header::ETAG, v);
    }
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    secure(&mut resp);
    if path.starts_with("widget/") {
        // the widget's files load into other sites' pages (which may time them)
        resp.headers_mut().insert("cross-origin-resource-policy", HeaderValue::from_static("cross-origin"));
        resp.headers_mut().insert("timing-allow-origin", HeaderValue::from_static("*"));
    }
    resp
}

/// `data` as the response body, gzipped when the client accepts it and it is worth it.
fn body(d: &Dashboard, key: [u8; 32], data: &[u8], ctype: &'static str, h: &HeaderMap) -> Response {
    let compressible = !ctype.starts_with("image/png") && !ctype.starts_with("font/") && data.len() > 512;
    let mut resp = if compressible && accepts_gzip(h) {
        let g = d.gzip(key, data);
        let mut r = Response::new(Body::from(g.as_ref().clone()));
        r.headers_mut().insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        r
    } else {
        Response::new(Body::from(data.to_vec()))
    };
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    resp.headers_mut().insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    resp
}
