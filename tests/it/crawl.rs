//! The website crawler through the real binary against the fixture site (`site.rs`): which pages
//! are indexed and why the others are not, recrawls (304s, unchanged pages, one change, one
//! removal), `kill -9` in the middle of a crawl, pause/resume/delete while running, and the 409s.

use std::collections::{BTreeMap, BTreeSet};

use reqwest::Method;
use serde_json::{Value, json};

use crate::e2e::{Api, Server, bootstrap};
use crate::site::Site;

const ALLOW: (&str, &str) = ("STEWARD_DELIVERY_ALLOW", "127.0.0.1,localhost");
const NO_DELAY: (&str, &str) = ("WEBSITE_CRAWLER_MIN_DELAY_MS", "0");

/// Pages of the fixture site that must be indexed.
const INDEXED: [&str; 17] = [
    "/",
    "/about",
    "/products",
    "/contact",
    "/pricing",
    "/faq",
    "/shipping",
    "/returns",
    "/brewing-guide",
    "/wholesale",
    "/sitemap-only",
    "/sitemap-only-gz",
    "/noindex-child",
    "/hub-only-1",
    "/hub-only-2",
    "/hub-only-3",
    "/nofollow-page",
];

/// Patterns that keep the failing pages and the trap out (a faultless crawl).
fn clean_patterns() -> Value {
    json!(["/busy", "/forbidden", "/broken", "/calendar", "/metadata", "/away"])
}

struct Setup {
    _dir: tempfile::TempDir,
    data: std::path::PathBuf,
    server: Server,
    api: Api,
    token: String,
}

fn start(env: &[(&str, &str)]) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = bootstrap(&data);
    let server = Server::start(&data, env);
    let api = Api::new(&server.base, &token);
    Setup { _dir: dir, data, server, api, token }
}

async fn crawl(api: &Api, body: Value) -> (String, String) {
    let r = api.call(Method::POST, "/api/v1/document/crawl", Some(body)).await;
    assert_eq!(r["job"]["status"], "queued", "{r}");
    (r["job"]["id"].as_str().unwrap().to_string(), r["source"]["id"].as_str().unwrap().to_string())
}

/// Waits (server-side) for the job to end, then for its documents to be processed.
async fn finished(api: &Api, job: &str) -> Value {
    let j = loop {
        let j = api.call(Method::GET, &format!("/api/v1/document/crawl/jobs/{job}?waitMs=30000"), None).await["job"]
            .clone();
        if matches!(j["status"].as_str(), Some("completed" | "failed")) {
            break j;
        }
    };
    while api.call(Method::GET, "/api/v1/document/progress?waitMs=30000", None).await["idle"] != true {}
    j
}

/// The source's documents by their page path, with their metadata.
async fn documents(api: &Api, source: &str, site: &Site) -> BTreeMap<String, Value> {
    let v = api.call(Method::GET, &format!("/api/v1/document/sources/{source}/documents?limit=200"), None).await;
    let mut out = BTreeMap::new();
    for d in v["documents"].as_array().unwrap() {
        let id = d["id"].as_str().unwrap();
        let full = api.call(Method::GET, &format!("/api/v1/document/{id}"), None).await;
        let url = full["metadata"]["sourceUrl"].as_str().unwrap_or_else(|| panic!("{full}")).to_string();
        let path = url.strip_prefix(&site.base()).unwrap_or(&url).to_string();
        assert!(out.insert(path.clone(), full).is_none(), "two documents for {path}");
    }
    out
}

fn paths(docs: &BTreeMap<String, Value>) -> BTreeSet<String> {
    docs.keys().map(|p| if p.len() > 1 { p.trim_end_matches('/').to_string() } else { p.clone() }).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_site_is_crawled_once_per_page_with_every_skip_reason_recorded() {
    let site = Site::start().await;
    let s = start(&[ALLOW, NO_DELAY]);
    let limit = 60;
    let (job, source) = crawl(&s.api, json!({"url": site.url("/"), "limit": limit})).await;
    let j = finished(&s.api, &job).await;
    assert_eq!(j["status"], "completed", "{j}");
    let p = &j["progress"];

    // exactly the content pages are indexed, one document each (and the calendar's months, each
    // a small page of its own, as far as the limit let the crawl go into the trap)
    let docs = documents(&s.api, &source, &site).await;
    let want: BTreeSet<String> = INDEXED.iter().map(|p| p.to_string()).collect();
    let (months, pages): (BTreeSet<String>, BTreeSet<String>) =
        paths(&docs).into_iter().partition(|p| p.starts_with("/calendar?month="));
    assert_eq!(pages, want);
    assert_eq!(p["indexed"].as_u64().unwrap() as usize, INDEXED.len() + months.len());
    assert_eq!(j["documentCount"], p["indexed"]);

    // every skip with its code, the failures with their reasons
    let skipped: BTreeMap<String, String> = j["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["sourceUrl"].as_str().unwrap().replace(&site.base(), ""), n["code"].as_str().unwrap().to_string()))
        .collect();
    for (path, code) in [
        ("/old-pricing", "canonical_elsewhere"),
        ("/dup", "duplicate_content"),
        ("/private/secret", "robots_disallowed"),
        ("/noindex", "noindex"),
        ("/x-robots", "noindex_header"),
        ("/consent", "consent_only"),
        ("/app", "js_shell"),
        ("/hub", "link_hub"),
        ("/huge", "too_large"),
        ("/report.pdf", "not_html"),
        ("/away", "redirect"),
    ] {
        assert_eq!(skipped.get(path).map(String::as_str), Some(code), "{path}: {skipped:?}");
    }
    let robots = j["skipped"].as_array().unwrap().iter().find(|n| n["code"] == "robots_disallowed").unwrap();
    assert_eq!(robots["reason"], "Blocked by robots.txt");
    let failures: BTreeMap<String, String> = j["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (n["sourceUrl"].as_str().unwrap().replace(&site.base(), ""), n["reason"].as_str().unwrap().to_string())
        })
        .collect();
    assert!(failures["/busy"].starts_with("HTTP 429") && failures["/busy"].contains("Retry-After 1 s"), "{failures:?}");
    assert!(failures["/forbidden"].starts_with("HTTP 403"), "{failures:?}");
    assert!(failures["/broken"].starts_with("HTTP 500"), "{failures:?}");
    assert_eq!(skipped.get("/metadata").map(String::as_str), Some("redirect_refused"), "{skipped:?}");
    assert_eq!(skipped.get("/away-2").map(String::as_str), Some("redirect_refused"), "{skipped:?}");
    let refused = |path: &str| {
        j["skipped"].as_array().unwrap().iter().find(|n| n["sourceUrl"] == site.url(path)).unwrap()["reason"].clone()
    };
    assert!(refused("/metadata").as_str().unwrap().contains("169.254.169.254"), "{j}");
    assert!(refused("/away-2").as_str().unwrap().starts_with("Redirect refused"), "{j}");
    assert_eq!(j["failedPageCount"], failures.len());
    assert_eq!(p["skippedByReason"]["robots_disallowed"], 1);

    // politeness and scope: nothing disallowed, nofollow, off-site or tracking-tagged was asked for,
    // each page once, and the trap bounded by the limit
    assert_eq!(site.hits("/private/secret"), 0);
    assert_eq!(site.hits("/secret-nofollow"), 0);
    assert_eq!(site.offsite_hits(), 0);
    assert!(site.requests().iter().all(|r| !r.contains("utm_") && !r.contains("gclid")), "{:?}", site.requests());
    for path in INDEXED {
        let hits = if path == "/about" {
            site.hits_with_query("/about") + site.hits_with_query("/about/")
        } else {
            site.hits_with_query(path)
        };
        assert_eq!(hits, 1, "{path} fetched {hits} times");
    }
    assert_eq!(site.hits("/busy"), 3, "a 429 is asked twice more (Retry-After honoured), then recorded");
    assert_eq!(p["fetched"], limit);
    assert_eq!(p["limitReached"], true);
    assert!(site.hits("/calendar") > 0 && site.hits("/calendar") < limit as usize);

    // page metadata, filterable in search, and citations link to the page
    let about = &docs.iter().find(|(p, _)| p.starts_with("/about")).unwrap().1;
    let m = &about["metadata"];
    assert_eq!(m["canonicalUrl"], site.url("/about"));
    assert_eq!(m["httpStatus"], 200);
    assert!(m["etag"].is_string() && m["lastModified"].is_string() && m["normalizedContentHash"].is_string(), "{m}");
    assert!(m["qualityScore"].as_f64().unwrap() > 0.0);
    let hits = s
        .api
        .call(
            Method::POST,
            "/api/v1/document/search",
            Some(json!({"query": "roastery", "metadataFilter": {"canonicalUrl": site.url("/about")}})),
        )
        .await;
    let results = hits["results"].as_array().unwrap();
    assert!(!results.is_empty() && results.iter().all(|h| h["documentId"] == about["id"]), "{hits}");
    // no boilerplate in the indexed text, the content whole
    let manifest = Site::manifest();
    for page in manifest["pages"].as_array().unwrap().iter().filter(|p| p["expect"] == "indexed") {
        let path = page["path"].as_str().unwrap();
        let (_, doc) = docs
            .iter()
            .find(|(p, _)| p.trim_end_matches('/') == path.trim_end_matches('/') || (path == "/" && p.as_str() == "/"))
            .unwrap();
        let text = s
            .api
            .call(Method::GET, &format!("/api/v1/document/{}?includeContent=true", doc["id"].as_str().unwrap()), None)
            .await;
        let text = text["content"]
            .as_str()
            .unwrap_or_else(|| panic!("{text}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        for line in page["contentLines"].as_array().unwrap() {
            let line = line.as_str().unwrap().split_whitespace().collect::<Vec<_>>().join(" ");
            assert!(text.contains(&line), "{path}: lost {line:?}");
        }
        for line in page["boilerplateLines"].as_array().unwrap() {
            assert!(!text.contains(line.as_str().unwrap()), "{path}: boilerplate {line}");
        }
    }
    s.server.terminate();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recrawl_reembeds_only_what_changed_and_removes_what_is_gone() {
    let site = Site::start().await;
    let s = start(&[ALLOW, NO_DELAY]);
    let (job, source) =
        crawl(&s.api, json!({"url": site.url("/"), "excludeUrlPatterns": clean_patterns(), "limit": 200})).await;
    let j = finished(&s.api, &job).await;
    assert_eq!((j["status"].as_str(), j["failedPageCount"].as_i64()), (Some("completed"), Some(0)), "{j}");
    let before = documents(&s.api, &source, &site).await;
    assert_eq!(before.len(), INDEXED.len());
    let usage = s.api.call(Method::GET, "/api/v1/usage", None).await;

    // someone deletes /about's document: the recrawl indexes the page again
    let about_id = before["/about"]["id"].as_str().unwrap().to_string();
    s.api.call(Method::DELETE, &format!("/api/v1/document/{about_id}"), None).await;
    // /shipping changes, /returns is gone (404)
    let shipping = std::fs::read_to_string("tests/it/fixtures/site/shipping.html").unwrap();
    assert!(shipping.contains("</h1>"));
    site.set_page(
        "/shipping",
        &shipping.replacen(
            "</h1>",
            "</h1><p>New: we now ship to Norway and Iceland every Tuesday morning by courier.</p>",
            1,
        ),
    );
    site.remove_page("/returns");
    let r = s.api.call(Method::POST, &format!("/api/v1/document/sources/{source}/recrawl"), None).await;
    let again = finished(&s.api, r["job"]["id"].as_str().unwrap()).await;
    let p = &again["progress"];
    assert_eq!(again["status"], "completed", "{again}");
    assert_eq!(again["kind"], "recrawl");
    assert_eq!(p["indexed"], 2, "only /shipping is written again, and /about indexed anew: {again}");
    assert_eq!(p["removed"], 1, "{again}");
    assert_eq!(p["unchanged"], INDEXED.len() - 3);
    assert!(site.not_modified_served() >= INDEXED.len() - 3, "conditional requests answered 304");
    let after = documents(&s.api, &source, &site).await;
    assert!(!paths(&after).contains("/returns"));
    assert!(paths(&after).contains("/about"));
    let changed = after.iter().find(|(p, _)| p.starts_with("/shipping")).unwrap().1;
    assert_eq!(
        changed["id"],
        before.iter().find(|(p, _)| p.starts_with("/shipping")).unwrap().1["id"],
        "updated in place"
    );
    assert!(changed["content"].is_null() || changed["content"].as_str().unwrap().contains("Norway"));
    // the month's indexed bytes grew by the changed page alone
    let usage2 = s.api.call(Method::GET, "/api/v1/usage", None).await;
    let added = usage2["monthlyIndexedBytes"]["used"].as_i64().unwrap()
        - usage["monthlyIndexedBytes"]["used"].as_i64().unwrap();
    let about_bytes = after["/about"]["contentSizeBytes"].as_i64().unwrap();
    let limit = (changed["contentSizeBytes"].as_i64().unwrap() + about_bytes) * 2;
    assert!(added > 0 && added <= limit, "{added}");
    let vectors = usage2["embeddingsThisMonth"]["vectors"].as_i64().unwrap()
        - usage["embeddingsThisMonth"]["vectors"].as_i64().unwrap();
    let chunks = changed["chunkCount"].as_i64().unwrap() + after["/about"]["chunkCount"].as_i64().unwrap();
    assert!(vectors > 0 && vectors <= chunks, "{vectors} vectors for {chunks} chunks");

    // a page no longer linked from anywhere goes after a fresh, faultless crawl (not after a
    // resumed one)
    let hub = std::fs::read_to_string("tests/it/fixtures/site/hub.html").unwrap();
    assert!(hub.contains(r#"<li><a href="/hub-only-1">Kochere, Ethiopia</a></li>"#));
    site.set_page("/hub", &hub.replace(r#"<li><a href="/hub-only-1">Kochere, Ethiopia</a></li>"#, ""));
    let r = s.api.call(Method::POST, &format!("/api/v1/document/sources/{source}/recrawl"), None).await;
    let third = finished(&s.api, r["job"]["id"].as_str().unwrap()).await;
    assert_eq!(third["progress"]["removed"], 1, "{third}");
    let last = documents(&s.api, &source, &site).await;
    assert!(!paths(&last).contains("/hub-only-1"));
    assert_eq!(last.len(), INDEXED.len() - 2);
    s.server.terminate();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crawl_killed_mid_way_continues_from_its_checkpoint_after_a_restart() {
    let site = Site::start().await;
    site.set_delay(std::time::Duration::from_millis(150));
    let s = start(&[ALLOW, NO_DELAY]);
    let (job, source) =
        crawl(&s.api, json!({"url": site.url("/"), "excludeUrlPatterns": clean_patterns(), "limit": 200})).await;
    // kill -9 once several pages are done
    loop {
        let j = s.api.call(Method::GET, &format!("/api/v1/document/crawl/jobs/{job}"), None).await["job"].clone();
        if j["progress"]["fetched"].as_i64().unwrap() >= 6 {
            break;
        }
        assert!(matches!(j["status"].as_str(), Some("queued" | "processing")), "{j}");
        tokio::task::yield_now().await;
    }
    s.server.kill();
    site.set_delay(std::time::Duration::ZERO);
    let server = Server::start(&s.data, &[ALLOW, NO_DELAY]);
    let api = Api::new(&server.base, &s.token);
    let j = finished(&api, &job).await;
    assert_eq!(j["status"], "completed", "{j}");
    let docs = documents(&api, &source, &site).await;
    assert_eq!(paths(&docs), INDEXED.iter().map(|p| p.to_string()).collect::<BTreeSet<_>>());
    // a page done before the kill is not fetched again; at most the pages in hand (two threads) are
    let twice: Vec<&str> = INDEXED
        .iter()
        .copied()
        .filter(|p| {
            let n = site.hits_with_query(p) + if *p == "/about" { site.hits_with_query("/about/") } else { 0 };
            n > 1
        })
        .collect();
    assert!(twice.len() <= 2, "fetched again after the restart: {twice:?} of {:?}", site.requests());
    server.terminate();
}

#[tokio::test(flavor = "multi_thread")]
async fn pause_resume_and_delete_while_running_and_the_409s() {
    let site = Site::start().await;
    site.set_delay(std::time::Duration::from_millis(100));
    let s = start(&[ALLOW, NO_DELAY]);
    let url = site.url("/");
    let (job, source) = crawl(&s.api, json!({"url": url, "excludeUrlPatterns": clean_patterns()})).await;
    let http = reqwest::Client::new();
    let call = |m: Method, path: String, body: Option<Value>| {
        let mut r = http.request(m, format!("{}{path}", s.server.base)).bearer_auth(&s.token);
        if let Some(b) = body {
            r = r.json(&b);
        }
        r.send()
    };
    // a second crawl of the same site while this one runs: 409
    let r = call(Method::POST, "/api/v1/document/crawl".into(), Some(json!({"url": url}))).await.unwrap();
    assert_eq!(r.status(), 409);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["details"]["code"], "crawl_in_progress");
    // an active job cannot be deleted
    assert_eq!(call(Method::DELETE, format!("/api/v1/document/crawl/jobs/{job}"), None).await.unwrap().status(), 409);

    let paused = s.api.call(Method::POST, &format!("/api/v1/document/sources/{source}/pause-crawl"), None).await;
    assert_eq!(paused["job"]["status"], "paused");
    assert_eq!(
        call(Method::POST, format!("/api/v1/document/sources/{source}/pause-crawl"), None).await.unwrap().status(),
        409
    );
    let resumed = call(Method::POST, format!("/api/v1/document/sources/{source}/resume-crawl"), None).await.unwrap();
    assert_eq!(resumed.status(), 202);
    site.set_delay(std::time::Duration::ZERO);
    let j = finished(&s.api, &job).await;
    assert_eq!(j["status"], "completed", "{j}");
    assert_eq!(documents(&s.api, &source, &site).await.len(), INDEXED.len());
    assert_eq!(
        call(Method::POST, format!("/api/v1/document/sources/{source}/resume-crawl"), None).await.unwrap().status(),
        409
    );

    // the listing, its filters, and deleting a finished job
    let list =
        s.api.call(Method::GET, &format!("/api/v1/document/crawl/jobs?status=completed&sourceId={source}"), None).await;
    assert_eq!(list["jobs"][0]["id"], job.as_str());
    assert_eq!(
        call(Method::GET, "/api/v1/document/crawl/jobs?sinceMinutes=0".into(), None).await.unwrap().status(),
        400
    );
    assert_eq!(call(Method::GET, "/api/v1/document/crawl/jobs?status=done".into(), None).await.unwrap().status(), 400);

    // recrawl, then delete the source while it runs: its jobs and documents go
    site.set_delay(std::time::Duration::from_millis(100));
    let r = s.api.call(Method::POST, &format!("/api/v1/document/sources/{source}/recrawl"), None).await;
    let again = r["job"]["id"].as_str().unwrap().to_string();
    assert_eq!(call(Method::DELETE, format!("/api/v1/document/sources/{source}"), None).await.unwrap().status(), 204);
    assert_eq!(call(Method::GET, format!("/api/v1/document/crawl/jobs/{again}"), None).await.unwrap().status(), 404);
    let all = s.api.call(Method::GET, "/api/v1/document/?limit=200", None).await;
    assert_eq!(all["total"], 0, "{all}");
    site.set_delay(std::time::Duration::ZERO);

    // recrawl of a source that is not a website: 409; bad requests: 400
    s.api.call(Method::POST, "/api/v1/document/", Some(json!({"title": "Note", "content": "Hello there."}))).await;
    let sources = s.api.call(Method::GET, "/api/v1/document/sources", None).await;
    let api_source = sources["sources"].as_array().unwrap().iter().find(|s| s["kind"] == "api").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    for action in ["recrawl", "pause-crawl", "resume-crawl"] {
        let r = call(Method::POST, format!("/api/v1/document/sources/{api_source}/{action}"), None).await.unwrap();
        assert_eq!(r.status(), 409, "{action}");
        assert_eq!(r.json::<Value>().await.unwrap()["error"]["details"]["code"], "not_a_crawl_source");
    }
    for bad in [
        json!({"url": "ftp://example.com/"}),
        json!({"url": "not a url"}),
        json!({"url": "http://169.254.169.254/latest/"}),
        json!({"url": url, "limit": 0}),
        json!({"url": url, "limit": 100000}),
        json!({"url": url, "recrawlIntervalHours": 9999}),
        json!({"url": url, "excludeUrlPatterns": ["localhost"]}),
    ] {
        let r = call(Method::POST, "/api/v1/document/crawl".into(), Some(bad.clone())).await.unwrap();
        assert_eq!(r.status(), 400, "{bad}");
    }
    s.server.terminate();
}
