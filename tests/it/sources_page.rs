//! The Sources page crawling a real (tiny, slow) website in a real browser against the real
//! binary: a refused start address explained next to the form, a crawl whose counters move while
//! the page polls, the indexed pages and a noindex page listed as skipped with its reason, the
//! recrawl interval changed, a recrawl paused and resumed (a second crawl of the site refused
//! meanwhile), and the source deleted after a confirmation that names its documents.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{StatusCode, Uri, header};
use axum::response::{Html, IntoResponse, Response};
use reqwest::Method;
use serde_json::{Value, json};

use crate::browser::{axe, check_page, click, click_at, shots, sign_in_as_root};
use crate::e2e::{Api, Server, bootstrap};
use crate::webdriver::{Browser, Driver};

/// How long the site takes to answer a page: slow enough that a crawl takes a few seconds and the
/// page's counters visibly move between two polls.
const PAGE_DELAY: Duration = Duration::from_millis(600);

/// One page of the bakery's website: its path, title, text and the links in its text.
struct Page {
    path: &'static str,
    title: &'static str,
    text: &'static [&'static str],
    links: &'static [(&'static str, &'static str)],
    noindex: bool,
}

/// The pages form a chain (each page links to the next), so the crawl discovers them one after
/// another however many fetches it runs at once. `/private` says noindex; `/gone` is linked but
/// answers 404.
const PAGES: &[Page] = &[
    Page {
        path: "/",
        title: "Harbour Lane Bakery",
        text: &[
            "Harbour Lane Bakery has baked bread by the old fish market since 1987. Every loaf is shaped by hand in the early morning and baked in a stone-floored oven that we fire with beech wood.",
            "We sell our bread, pastries and celebration cakes from the shop on Harbour Lane and deliver to cafés and restaurants across the old town six days a week.",
        ],
        links: &[("/breads", "Our breads"), ("/private", "Staff rota"), ("/gone", "Summer menu")],
        noindex: false,
    },
    Page {
        path: "/breads",
        title: "Our breads",
        text: &[
            "Our sourdough starter is older than the shop itself: it came from the founder's grandmother and is fed twice a day with rye flour from the mill at Elmstead.",
            "The country loaf rests for thirty-six hours before baking. The seeded rye is dense and keeps for a week; the white tin loaf is soft, made with milk and butter, and sliced on request.",
        ],
        links: &[("/pastries", "Pastries")],
        noindex: false,
    },
    Page {
        path: "/pastries",
        title: "Pastries",
        text: &[
            "Croissants and pains au chocolat are laminated by hand with cultured butter over two days. Cardamom buns are our bestseller on Saturday mornings and usually sell out by ten.",
            "Fruit danishes change with the season: rhubarb in spring, apricot in summer and spiced apple from October until the end of winter.",
        ],
        links: &[("/cakes", "Celebration cakes")],
        noindex: false,
    },
    Page {
        path: "/cakes",
        title: "Celebration cakes",
        text: &[
            "We make celebration cakes to order for birthdays, weddings and christenings. Please order at least five working days ahead; wedding cakes need a tasting appointment and four weeks' notice.",
            "A deposit of twenty percent secures the date. Cakes can be collected from the shop or delivered within the town for a flat fee of eight pounds.",
        ],
        links: &[("/hours", "Opening hours")],
        noindex: false,
    },
    Page {
        path: "/hours",
        title: "Opening hours",
        text: &[
            "The shop on Harbour Lane opens at seven in the morning from Tuesday to Saturday and closes at four in the afternoon. On Sundays we open from eight until noon. We are closed on Mondays.",
            "On public holidays the shop keeps Sunday hours, and between Christmas and New Year we close for a week to clean and repair the oven.",
        ],
        links: &[("/delivery", "Delivery")],
        noindex: false,
    },
    Page {
        path: "/delivery",
        title: "Delivery to cafés and restaurants",
        text: &[
            "Trade customers receive their bread before half past six each morning by electric van. Orders for the next day must reach us by two in the afternoon.",
            "We deliver within three miles of the harbour. There is no minimum order, but orders under twenty pounds carry a small delivery charge.",
        ],
        links: &[("/allergens", "Allergens")],
        noindex: false,
    },
    Page {
        path: "/allergens",
        title: "Allergens",
        text: &[
            "All our products are made in one kitchen that handles wheat, rye, eggs, milk, sesame and nuts, so we cannot promise that any product is free of traces of them.",
            "Each shelf label lists the allergens of that product, and the staff can show you the full recipe sheet of anything we bake on request.",
        ],
        links: &[("/contact", "Contact us")],
        noindex: false,
    },
    Page {
        path: "/contact",
        title: "Contact us",
        text: &[
            "Write to hello@harbourlane.example or call the shop during opening hours. For trade accounts ask for Marta, who plans the delivery rounds and the weekly invoices.",
            "You will find us at 14 Harbour Lane, opposite the lifeboat station. Bicycle racks are by the door; the nearest car park is on Quay Street.",
        ],
        links: &[],
        noindex: false,
    },
    Page {
        path: "/private",
        title: "Staff rota",
        text: &[
            "The rota for the bakery team: early shift from four to noon, late shift from noon to eight, with the oven cleaned every Monday morning.",
            "Swaps must be agreed with the head baker at least two days ahead and written into the book by the ovens.",
        ],
        links: &[],
        noindex: true,
    },
];

fn render(p: &Page) -> String {
    let robots = if p.noindex { r#"<meta name="robots" content="noindex">"# } else { "" };
    let text: String = p.text.iter().map(|t| format!("<p>{t}</p>")).collect();
    let links: String =
        p.links.iter().map(|(href, label)| format!(r#"<li><a href="{href}">{label}</a></li>"#)).collect();
    let links = if links.is_empty() { String::new() } else { format!("<h2>Read on</h2><ul>{links}</ul>") };
    format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title} · Harbour Lane Bakery</title>{robots}</head>
<body><header><a href="/">Harbour Lane Bakery</a></header><main><article><h1>{title}</h1>{text}{links}</article></main>
<footer>Harbour Lane Bakery, 14 Harbour Lane</footer></body></html>"#,
        title = p.title
    )
}

/// The website: slow pages, and a gate on the home page the test can close (a site that hangs).
struct Site {
    open: tokio::sync::watch::Sender<bool>,
}

async fn answer(State(site): State<Arc<Site>>, uri: Uri) -> Response {
    let path = uri.path();
    if path == "/robots.txt" {
        return ([(header::CONTENT_TYPE, "text/plain")], "User-agent: *\nAllow: /\n").into_response();
    }
    let Some(page) = PAGES.iter().find(|p| p.path == path) else {
        return (StatusCode::NOT_FOUND, Html("<!doctype html><title>Not found</title><p>No such page.</p>"))
            .into_response();
    };
    tokio::time::sleep(PAGE_DELAY).await;
    if path == "/" {
        let mut open = site.open.subscribe();
        let _ = open.wait_for(|o| *o).await;
    }
    Html(render(page)).into_response()
}

/// Serves the site on a free loopback port; `http://127.0.0.1:PORT/`.
async fn start_site() -> (String, Arc<Site>, tokio::task::JoinHandle<()>) {
    let site = Arc::new(Site { open: tokio::sync::watch::Sender::new(true) });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let router = axum::Router::new().fallback(answer).with_state(site.clone());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (base, site, task)
}

/// Replaces the value of the field with this `data-testid` (an `input` event, as typing fires).
async fn set_value(b: &Browser, testid: &str, text: &str) {
    b.js(
        "const e = document.querySelector(`[data-testid=${arguments[0]}]`); e.focus(); e.value = arguments[1];
         e.dispatchEvent(new Event('input', {bubbles: true}));",
        json!([testid, text]),
    )
    .await;
}

/// The text of the first element matching `css` (waiting for it).
async fn text_of(b: &Browser, css: &str) -> String {
    b.find(css).await.text().await
}

/// A counter of the crawl card as a number.
async fn counter(b: &Browser, name: &str) -> u64 {
    let t = text_of(b, &format!("[data-testid=crawl-{name}]")).await;
    t.replace([',', '.', '\u{a0}', ' '], "").parse().unwrap_or_else(|_| panic!("crawl-{name}: {t:?}"))
}

/// Waits until the crawl card's status is one of `states`; returns it.
async fn wait_status(b: &Browser, states: &[&str]) -> String {
    let v = b
        .until(&format!(
            "(() => {{ const s = document.querySelector('[data-testid=crawl-status]'); return s && {states}.includes(s.textContent) ? s.textContent : null; }})()",
            states = serde_json::to_string(states).unwrap()
        ))
        .await;
    v.as_str().unwrap().to_string()
}

async fn disabled(b: &Browser, testid: &str) -> bool {
    b.js("return document.querySelector(`[data-testid=${arguments[0]}]`).disabled", json!([testid])).await == true
}

async fn website_sources(api: &Api) -> Vec<Value> {
    let v = api.call(Method::GET, "/api/v1/document/sources", None).await;
    v["sources"].as_array().unwrap().iter().filter(|s| s["kind"] == "website").cloned().collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sources_page_crawls_a_website_and_controls_the_crawl() {
    let (site_url, site, site_task) = start_site().await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = bootstrap(&data);
    let server =
        Server::start(&data, &[("STEWARD_DELIVERY_ALLOW", "127.0.0.1"), ("WEBSITE_CRAWLER_MIN_DELAY_MS", "0")]);
    let base = server.base.clone();
    let api = Api::new(&base, &token);

    let driver = Driver::start();
    let b = driver.session().await;
    let mut problems = Vec::new();
    sign_in_as_root(&b, &base).await;
    click(&b, "nav-sources").await;
    b.tid("crawl-form").await;
    b.tid("sources-card").await;
    check_page(&b, "sources-empty", &mut problems).await;

    // an address the API refuses: its message next to the form, and no source
    set_value(&b, "crawl-url", "ftp://example.com/files").await;
    click(&b, "crawl-start").await;
    let refused = text_of(&b, "[data-testid=crawl-form] [role=alert]").await;
    println!("refused start address: {refused}");
    assert!(refused.contains("http"), "{refused}");
    assert!(website_sources(&api).await.is_empty());
    check_page(&b, "sources-refused", &mut problems).await;

    // the crawl: the fetched counter moves up while the page polls, until the crawl completes
    b.js(
        "window.__fetched = [];
         const note = () => {
           const e = document.querySelector('[data-testid=crawl-fetched]');
           if (!e) return;
           const v = Number(e.textContent.replace(/[^0-9]/g, ''));
           if (window.__fetched[window.__fetched.length - 1] !== v) window.__fetched.push(v);
         };
         new MutationObserver(note).observe(document.body, {subtree: true, childList: true, characterData: true});",
        json!([]),
    )
    .await;
    set_value(&b, "crawl-url", &site_url).await;
    set_value(&b, "crawl-limit", "50").await;
    click(&b, "crawl-start").await;
    b.tid("crawl-card").await;
    b.until("!document.querySelector('[data-testid=crawl-form] [role=alert]')").await;
    b.until("Number((document.querySelector('[data-testid=crawl-fetched]') || {}).textContent) > 0").await;
    b.screenshot(&shots().join("sources-crawling.png")).await;
    let end = wait_status(&b, &["completed", "failed"]).await;
    let job = &website_sources(&api).await[0]["lastCrawl"];
    assert_eq!(end, "completed", "{job:#}");
    let fetched = counter(&b, "fetched").await;
    let seen: Vec<u64> = serde_json::from_value(b.js("return window.__fetched", json!([])).await).unwrap();
    println!("fetched counter seen: {seen:?}; progress: {}", job["progress"]);
    assert!(
        seen.iter().any(|v| *v > 0 && *v < fetched),
        "the counter never showed a value between 0 and {fetched}: {seen:?}"
    );
    assert_eq!(counter(&b, "indexed").await, 8, "{job:#}");
    assert_eq!(counter(&b, "skipped").await, 1, "{job:#}");
    // the noindex page is listed with its reason, and counted under it
    let skipped = text_of(&b, "[data-testid=crawl-skipped-page]").await;
    assert!(skipped.contains("/private") && skipped.contains("noindex"), "{skipped}");
    let reason = text_of(&b, "[data-testid=crawl-skipped-reason][data-code=noindex]").await;
    assert!(reason.contains("noindex") && reason.contains('1'), "{reason}");
    // the page that answers 404 is a failure with its reason
    let failed = text_of(&b, "[data-testid=crawl-failed-page]").await;
    assert!(failed.contains("/gone") && failed.contains("404"), "{failed}");
    // the document counts agree with the API
    let source = website_sources(&api).await.remove(0);
    let docs = source["documentCount"].as_u64().unwrap();
    assert_eq!(docs, 8, "{source:#}");
    assert_eq!(text_of(&b, "[data-testid=crawl-documents]").await, docs.to_string());
    assert_eq!(text_of(&b, "[data-testid=source-row] [data-testid=source-documents]").await, docs.to_string());
    assert!(
        !disabled(&b, "crawl-recrawl").await && disabled(&b, "crawl-pause").await && disabled(&b, "crawl-resume").await
    );
    // (the screenshot shows the crawl's card: counters, reasons, failed and skipped pages)
    b.js(
        "document.querySelector('[data-testid=crawl-card]').scrollIntoView({block: 'start'}); window.scrollBy(0, -70)",
        json!([]),
    )
    .await;
    check_page(&b, "sources-crawled", &mut problems).await;

    // the recrawl interval (PATCH)
    b.js(
        "const s = document.querySelector('[data-testid=source-recrawl-interval]'); s.value = '24';
         s.dispatchEvent(new Event('change', {bubbles: true}));",
        json!([]),
    )
    .await;
    b.until("document.querySelector('[data-testid=toasts]').textContent.includes('daily')").await;
    let source = website_sources(&api).await.remove(0);
    assert_eq!(source["config"]["recrawlIntervalHours"], 24, "{source:#}");

    // a recrawl while the site hangs on its home page: pause it, a second crawl is refused, resume
    site.open.send_replace(false);
    click(&b, "crawl-recrawl").await;
    b.until("!document.querySelector('[data-testid=crawl-pause]').disabled").await;
    assert!(text_of(&b, "[data-testid=crawl-when]").await.starts_with("Recrawl"));
    assert!(disabled(&b, "crawl-recrawl").await && disabled(&b, "crawl-resume").await);
    click(&b, "crawl-pause").await;
    wait_status(&b, &["paused"]).await;
    // (the site answers again; the paused job waits for the resume)
    site.open.send_replace(true);
    b.until("!document.querySelector('[data-testid=crawl-resume]').disabled").await;
    assert!(disabled(&b, "crawl-recrawl").await && disabled(&b, "crawl-pause").await);
    set_value(&b, "crawl-url", &site_url).await;
    click(&b, "crawl-start").await;
    let conflict = text_of(&b, "[data-testid=crawl-form] [role=alert]").await;
    println!("second crawl while paused: {conflict}");
    assert!(conflict.contains("Conflict") && conflict.contains("paused"), "{conflict}");
    check_page(&b, "sources-paused", &mut problems).await;
    click(&b, "crawl-resume").await;
    // (the refusal was about the paused crawl: it goes with the resume)
    b.until("!document.querySelector('[data-testid=crawl-form] [role=alert]')").await;
    let end = wait_status(&b, &["completed", "failed"]).await;
    let job = &website_sources(&api).await[0]["lastCrawl"];
    println!("recrawl progress: {}", job["progress"]);
    assert_eq!(end, "completed", "{job:#}");
    assert_eq!(job["kind"], "recrawl");
    // the same pages again: unchanged, nothing new, and the documents kept
    assert_eq!((counter(&b, "unchanged").await, counter(&b, "indexed").await), (8, 0), "{job:#}");
    assert_eq!(text_of(&b, "[data-testid=crawl-documents]").await, "8");

    // delete: the confirmation names the documents
    let source = website_sources(&api).await.remove(0);
    let docs = source["documentCount"].as_u64().unwrap();
    click_at(&b, "[data-testid=crawl-card] [data-testid=source-delete]").await;
    // the dialog appears, then its text renders: wait for the text, not just the element
    let dialog = b
        .until("(() => { const d = document.querySelector('[data-testid=confirm-dialog]'); return d && d.textContent.trim() ? d.textContent : null; })()")
        .await;
    let dialog = dialog.as_str().unwrap().to_string();
    assert!(dialog.contains(&format!("{docs} documents")), "{dialog}");
    for v in axe(&b).await {
        problems.push(format!("sources-delete-confirm: axe {v}"));
    }
    b.screenshot(&shots().join("sources-delete-confirm.png")).await;
    click(&b, "confirm-ok").await;
    b.until("!document.querySelector('[data-testid=crawl-card]')").await;
    assert!(website_sources(&api).await.is_empty());
    check_page(&b, "sources-deleted", &mut problems).await;

    assert!(problems.is_empty(), "{problems:#?}");
    server.terminate();
    site_task.abort();
}
