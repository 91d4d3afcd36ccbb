//! `steward bench crawl`: a generated local website (realistic pages of 5–20 KB with navigation,
//! a cookie banner and a footer around prose from Cranfield's abstracts) served on 127.0.0.1 and
//! crawled through the HTTP API: pages/s fetched and extracted, time until searchable, peak
//! memory; then a recrawl of the unchanged site (time, pages re-embedded, monthly bytes added);
//! and extraction quality: the share of boilerplate lines that reach the text and of content
//! lines kept, on the generated pages and on a fixture set with a manifest.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use super::cranfield::Collection;
use super::server::ChildServer;
use crate::crawler::extract_page;

/// One generated page with the lines it was built from.
pub struct GenPage {
    pub path: String,
    pub html: String,
    pub content_lines: Vec<String>,
    pub boilerplate_lines: Vec<String>,
}

const NAV: [&str; 8] =
    ["Home", "Research", "Publications", "Laboratories", "People", "Events", "Careers", "Contact us"];
const FOOTER: [&str; 3] = [
    "Copyright 2026 Aero Research Institute. All rights reserved.",
    "12 Wind Tunnel Road, Cranfield, United Kingdom",
    "Privacy policy and terms of use",
];
const BANNER: &str = "We use cookies to improve your experience on our website and for analytics.";

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The sentences of a text (split at ". "), trimmed, long enough to check for.
fn sentences(text: &str) -> Vec<String> {
    text.split(". ")
        .map(|s| s.trim().trim_end_matches('.').to_string())
        .filter(|s| s.split_whitespace().count() >= 6)
        .collect()
}

/// `n` pages: page `i` holds 4–16 abstracts (about 5–20 KB with its boilerplate), links to its
/// neighbours and to five pages further on, so every page is reachable from the home page.
pub fn generate(c: &Collection, n: usize) -> Vec<GenPage> {
    let docs: Vec<&super::cranfield::Doc> = c.docs.iter().filter(|d| d.body.len() > 200).collect();
    let mut next = super::xorshift(0x9E37_79B9_7F4A_7C15);
    let path = |i: usize| if i == 0 { "/".to_string() } else { format!("/papers/{i}/") };
    (0..n)
        .map(|i| {
            let parts = 4 + (next() % 13) as usize;
            let mut body = String::new();
            let mut content = Vec::new();
            let title = format!("Paper {i}: {}", docs[i % docs.len()].title.trim());
            for k in 0..parts {
                let d = docs[(i * 7 + k * 13) % docs.len()];
                let text = d.body.split_whitespace().collect::<Vec<_>>().join(" ");
                body.push_str(&format!("<h2>{}</h2>\n<p>{}</p>\n", escape(d.title.trim()), escape(&text)));
                content.extend(sentences(&text));
            }
            let links: Vec<usize> = [i + 1, i.saturating_sub(1), i * 2 + 1, i * 2 + 2, i * 3 + 7, (next() % n as u64) as usize]
                .into_iter()
                .filter(|&j| j < n && j != i)
                .collect();
            let related: String = links.iter().map(|j| format!("<li><a href=\"{}\">Related paper {j}</a></li>", path(*j))).collect();
            let nav: String =
                NAV.iter().enumerate().map(|(k, t)| format!("<li><a href=\"{}\">{t}</a></li>", path(k % n))).collect();
            let footer: String = FOOTER.iter().map(|l| format!("<p>{l}</p>")).collect();
            let html = format!(
                "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\
                 <link rel=\"stylesheet\" href=\"/site.css\"><script src=\"/site.js\"></script></head><body>\
                 <div class=\"cookie-banner\" id=\"cookie-consent\"><p>{BANNER}</p><button>Accept</button><button>Reject</button></div>\
                 <header><a href=\"/\" class=\"logo\">Aero Research Institute</a><nav><ul>{nav}</ul></nav>\
                 <form role=\"search\"><input name=\"q\" placeholder=\"Search\"></form></header>\
                 <main><article><h1>{t}</h1>\n{body}<aside><h3>Related</h3><ul>{related}</ul></aside></article></main>\
                 <footer>{footer}</footer></body></html>",
                t = escape(&title),
            );
            let mut boilerplate: Vec<String> = NAV.iter().map(|s| s.to_string()).collect();
            boilerplate.extend(FOOTER.iter().map(|s| s.to_string()));
            boilerplate.push(BANNER.to_string());
            GenPage { path: path(i), html, content_lines: content, boilerplate_lines: boilerplate }
        })
        .collect()
}

/// Whether `line` reaches `text` (whitespace-insensitive).
fn contains(text: &str, line: &str) -> bool {
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    norm(text).contains(&norm(line))
}

/// Boilerplate lines found in the extracted text, and content lines kept, over `pages`.
pub fn quality<'a>(pages: impl Iterator<Item = (&'a str, &'a [String], &'a [String])>) -> Value {
    let (mut bp, mut bp_found, mut ct, mut ct_kept, mut n) = (0usize, 0usize, 0usize, 0usize, 0usize);
    let mut leaks = Vec::new();
    for (html, content, boilerplate) in pages {
        let text = extract_page(html, true).text;
        n += 1;
        for b in boilerplate {
            bp += 1;
            if contains(&text, b) {
                bp_found += 1;
                if leaks.len() < 5 {
                    leaks.push(b.clone());
                }
            }
        }
        ct += content.len();
        ct_kept += content.iter().filter(|l| contains(&text, l)).count();
    }
    let share = |a: usize, b: usize| if b == 0 { 0.0 } else { (a as f64 / b as f64 * 10_000.0).round() / 100.0 };
    json!({"pages": n, "boilerplateLines": bp, "boilerplateReachingIndexPct": share(bp_found, bp),
           "contentLines": ct, "contentKeptPct": share(ct_kept, ct), "boilerplateExamples": leaks})
}

/// The fixture set of `dir` (`manifest.json` with `path`, `contentLines`, `boilerplateLines`, and
/// the page files named after their path).
pub fn fixture_quality(dir: &Path) -> anyhow::Result<Value> {
    let manifest: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json"))?)?;
    let entries = manifest.as_array().or(manifest["pages"].as_array()).cloned().unwrap_or_default();
    let mut pages = Vec::new();
    for e in entries {
        let lines = |k: &str| -> Vec<String> {
            e[k].as_array()
                .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
                .unwrap_or_default()
        };
        let (content, boilerplate) = (lines("contentLines"), lines("boilerplateLines"));
        if content.is_empty() || e["expect"] != "indexed" {
            continue;
        }
        let Some(file) = e["file"].as_str().map(str::to_string).or_else(|| fixture_file(dir, e["path"].as_str()?))
        else {
            continue;
        };
        let html = std::fs::read_to_string(dir.join(file))?;
        pages.push((html, content, boilerplate));
    }
    Ok(quality(pages.iter().map(|(h, c, b)| (h.as_str(), c.as_slice(), b.as_slice()))))
}

/// `/about` → `about.html` or `about/index.html`; `/` → `index.html`.
fn fixture_file(dir: &Path, path: &str) -> Option<String> {
    let p = path.trim_matches('/');
    let candidates = if p.is_empty() {
        vec!["index.html".to_string()]
    } else {
        vec![format!("{p}.html"), format!("{p}/index.html"), p.to_string()]
    };
    candidates.into_iter().find(|c| dir.join(c).is_file())
}

/// Serves `pages` on 127.0.0.1 (with an ETag each, answering `If-None-Match` with 304).
async fn serve(pages: Vec<GenPage>) -> anyhow::Result<SocketAddr> {
    let site: Arc<HashMap<String, (Bytes, String)>> = Arc::new(
        pages
            .into_iter()
            .map(|p| {
                let etag = format!("\"{}\"", &crate::documents::blobs::sha256_hex(p.html.as_bytes())[..16]);
                (p.path, (Bytes::from(p.html), etag))
            })
            .collect(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let site = site.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let site = site.clone();
                    async move {
                        let b = hyper::Response::builder();
                        match site.get(req.uri().path()) {
                            Some((body, etag)) => {
                                let same =
                                    req.headers().get("if-none-match").is_some_and(|v| v.as_bytes() == etag.as_bytes());
                                let b =
                                    b.header("etag", etag.as_str()).header("content-type", "text/html; charset=utf-8");
                                if same {
                                    b.status(304).body(Full::new(Bytes::new()))
                                } else {
                                    b.body(Full::new(body.clone()))
                                }
                            }
                            None => b
                                .status(404)
                                .header("content-type", "text/html")
                                .body(Full::new(Bytes::from_static(b"<h1>Not found</h1>"))),
                        }
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tcp), svc).await;
            });
        }
    });
    Ok(addr)
}

/// Polls the job until it ends; returns it.
async fn wait_job(s: &ChildServer, id: &str) -> anyhow::Result<Value> {
    loop {
        let j = s.get(&format!("/api/v1/document/crawl/jobs/{id}")).await?["job"].clone();
        if matches!(j["status"].as_str(), Some("completed" | "failed")) {
            return Ok(j);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn secs_between(a: &Value, b: &Value) -> f64 {
    let t = |v: &Value| v.as_str().and_then(crate::clock::parse_rfc3339).map(|d| d.timestamp_millis() as f64 / 1000.0);
    match (t(a), t(b)) {
        (Some(a), Some(b)) => b - a,
        _ => f64::NAN,
    }
}

fn monthly_bytes(u: &Value) -> f64 {
    u["monthlyIndexedBytes"]["used"].as_f64().unwrap_or(f64::NAN)
}

fn vectors(u: &Value) -> f64 {
    u["embeddingsThisMonth"]["vectors"].as_f64().unwrap_or(f64::NAN)
}

pub async fn run(c: &Collection, pages: usize, fixtures: Option<&Path>, concurrency: usize) -> anyhow::Result<Value> {
    let site = generate(c, pages);
    let sizes: Vec<f64> = site.iter().map(|p| p.html.len() as f64 / 1024.0).collect();
    // extraction alone, one thread
    let t = Instant::now();
    let words: usize = site.iter().map(|p| extract_page(&p.html, true).word_count).sum();
    let extract_rate = site.len() as f64 / t.elapsed().as_secs_f64();
    let generated_quality =
        quality(site.iter().map(|p| (p.html.as_str(), p.content_lines.as_slice(), p.boilerplate_lines.as_slice())));
    let fixture_q = match fixtures {
        Some(d) => fixture_quality(d)?,
        None => Value::Null,
    };
    println!("extraction alone: {extract_rate:.0} pages/s ({words} words); quality {generated_quality}");

    let addr = serve(site).await?;
    let env = [
        ("STEWARD_DELIVERY_ALLOW", "127.0.0.1".to_string()),
        ("WEBSITE_CRAWLER_MIN_DELAY_MS", "0".to_string()),
        ("WEBSITE_CRAWLER_MAX_LIMIT", (pages + 100).to_string()),
        ("WEBSITE_CRAWLER_CONCURRENCY", concurrency.to_string()),
    ];
    let s = ChildServer::start(&env)?;
    // the embedding model in memory first: what the crawl adds is measured from there
    let warm = json!({"title": "Warm-up", "content": "A first document loads the embedding model."});
    s.send(reqwest::Method::POST, "/api/v1/document/", &warm).await?;
    s.wait_idle().await?;
    let (_, rss_before) = s.rss();
    let started = Instant::now();
    let body = json!({"url": format!("http://{addr}/"), "limit": pages + 100});
    let r = s.send(reqwest::Method::POST, "/api/v1/document/crawl", &body).await?;
    let id = r["job"]["id"].as_str().unwrap_or_default().to_string();
    let source = r["source"]["id"].as_str().unwrap_or_default().to_string();
    let job = wait_job(&s, &id).await?;
    let crawl_wall = started.elapsed().as_secs_f64();
    let (_, rss_crawled) = s.rss();
    s.wait_idle().await?;
    let searchable = started.elapsed().as_secs_f64();
    let (peak, _) = s.rss();
    let crawl_secs = secs_between(&job["startedAt"], &job["completedAt"]);
    let fetched = job["progress"]["fetched"].as_f64().unwrap_or(0.0);
    println!(
        "crawl: {fetched} pages fetched in {crawl_secs:.2} s ({:.0} pages/s), indexed {}, searchable after {searchable:.1} s; RSS {rss_before:.0} → {rss_crawled:.0} at the crawl's end, peak {peak:.0} MiB",
        fetched / crawl_secs,
        job["progress"]["indexed"]
    );

    let usage_before = s.get("/api/v1/usage").await?;
    let t = Instant::now();
    let r = s.send(reqwest::Method::POST, &format!("/api/v1/document/sources/{source}/recrawl"), &json!({})).await?;
    let again = wait_job(&s, r["job"]["id"].as_str().unwrap_or_default()).await?;
    let recrawl_wall = t.elapsed().as_secs_f64();
    s.wait_idle().await?;
    let usage_after = s.get("/api/v1/usage").await?;
    let recrawl_secs = secs_between(&again["startedAt"], &again["completedAt"]);
    println!(
        "recrawl: {recrawl_secs:.2} s, {} pages rewritten, {} vectors embedded, {} unchanged, monthly indexed bytes +{}",
        again["progress"]["indexed"],
        vectors(&usage_after) - vectors(&usage_before),
        again["progress"]["unchanged"],
        monthly_bytes(&usage_after) - monthly_bytes(&usage_before)
    );
    s.stop();
    Ok(json!({
        "pages": pages,
        "pageKiB": {"p50": super::median(&sizes), "min": sizes.iter().cloned().fold(f64::INFINITY, f64::min), "max": sizes.iter().cloned().fold(0.0, f64::max)},
        "extractOnlyPagesPerSecond": extract_rate.round(),
        "crawl": {"fetched": fetched, "seconds": crawl_secs, "wallSeconds": crawl_wall, "pagesPerSecond": (fetched / crawl_secs).round(),
                  "indexed": job["progress"]["indexed"], "skippedByReason": job["progress"]["skippedByReason"], "failed": job["progress"]["failed"],
                  "searchableAfterSeconds": searchable},
        "concurrency": concurrency,
        "rssMiB": {"beforeCrawl": rss_before, "atCrawlEnd": rss_crawled, "crawlGrowth": rss_crawled - rss_before,
                   "peakWhileEmbedding": peak, "peakGrowth": peak - rss_before},
        "recrawl": {"seconds": recrawl_secs, "wallSeconds": recrawl_wall, "pagesRewritten": again["progress"]["indexed"],
                    "vectorsEmbedded": vectors(&usage_after) - vectors(&usage_before),
                    "unchanged": again["progress"]["unchanged"], "speedup": crawl_secs / recrawl_secs,
                    "monthlyIndexedBytesAdded": monthly_bytes(&usage_after) - monthly_bytes(&usage_before)},
        "extractionQuality": {"generated": generated_quality, "fixtures": fixture_q},
    }))
}
