//! The dashboard's API reference page in a real browser: the OpenAPI document rendered as
//! operations grouped by tag, each with its method, path, summary, parameters and request and
//! response schemas; the search; axe-core and the console; a screenshot.

use serde_json::json;

use crate::browser::{axe, check_page, click, sign_in_as_root};
use crate::e2e::{Server, bootstrap};
use crate::webdriver::{Browser, Driver};

/// Chooses a tag in the filter (its options' values are their labels, which Preact leaves as
/// the text: no `value` attribute to select by).
async fn choose_tag(b: &Browser, tag: &str) {
    b.js(
        "const s = document.querySelector('[data-testid=api-tag]'); s.value = arguments[0];
         s.dispatchEvent(new Event('change', {bubbles: true}));",
        json!([tag]),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_page_renders_the_openapi_document_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    bootstrap(&data);
    let server = Server::start(&data, &[]);
    let base = server.base.clone();

    let driver = Driver::start();
    let b = driver.session().await;
    let mut problems = Vec::new();
    sign_in_as_root(&b, &base).await;

    // the page is in the Organization section of the sidebar
    click(&b, "nav-api").await;
    b.tid("api-filters").await;
    let groups = b
        .js(
            "return Array.from(document.querySelectorAll('[data-testid=api-tag-group] h2')).map(h => h.textContent)",
            json!([]),
        )
        .await;
    let groups: Vec<&str> = groups.as_array().unwrap().iter().map(|g| g.as_str().unwrap()).collect();
    for tag in
        ["Operations", "Accounts", "Documents", "Search", "Agents", "Chat", "Evals", "Usage", "Public chat", "MCP"]
    {
        assert!(groups.contains(&tag), "no {tag} group: {groups:?}");
    }
    let ops = b.count("[data-testid=api-operation]").await;
    assert!(ops > 200, "{ops} operations shown");
    let count = b.tid("api-count").await.text().await;
    assert!(count.starts_with(&format!("{ops} operations")) && count.contains("OpenAPI 3.1.0"), "{count}");
    b.tid("api-json-link").await;
    let href =
        b.js("return document.querySelector('[data-testid=api-json-link]').getAttribute('href')", json!([])).await;
    assert_eq!(href, "/api/v1/openapi.json");

    // the search narrows to the matching operations
    b.tid("api-search").await.send("/api/v1/document/{id}").await;
    b.until("document.querySelectorAll('[data-testid=api-operation]').length < 10").await;
    let paths = b
        .js("return Array.from(document.querySelectorAll('[data-testid=api-path]')).map(p => p.textContent)", json!([]))
        .await;
    assert!(paths.as_array().unwrap().iter().all(|p| p.as_str().unwrap().contains("/api/v1/document/{id}")), "{paths}");

    // an operation opens to its credentials, parameters, request body and responses
    let expand = |method: &'static str, path: &'static str| {
        format!(
            "const ops = Array.from(document.querySelectorAll('[data-testid=api-operation]'));
             const op = ops.find(o => o.querySelector('.badge').textContent === '{method}' && o.querySelector('[data-testid=api-path]').textContent === '{path}');
             op.querySelector('summary').scrollIntoView({{block: 'center'}}); op.querySelector('summary').click();"
        )
    };
    b.js(&expand("PUT", "/api/v1/document/{id}"), json!([])).await;
    b.tid("api-operation-body").await;
    let body = b.tid("api-operation-body").await.text().await;
    for part in [
        "Credentials:",
        "session",
        "apiToken",
        "workspace.documents.manage",
        "Parameters",
        "id",
        "path",
        "x-workspace-id",
        "Request body",
        "application/json",
        "title",
        "content",
        "Responses",
        "202",
        "DocumentView",
        "404",
        "not_found",
        "default",
    ] {
        assert!(body.contains(part), "no {part:?} in the operation:\n{body}");
    }
    // a derived schema is listed field by field
    let fields = b.js("return Array.from(document.querySelectorAll('[data-testid=api-operation-body] .api-field')).map(f => f.textContent)", json!([])).await;
    let fields: Vec<&str> = fields.as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    for f in ["id", "title", "status", "ragStatus", "chunkCount"] {
        assert!(fields.contains(&f), "no field {f}: {fields:?}");
    }

    // clear the search; the tag filter shows one group
    b.js("const e = document.querySelector('[data-testid=api-search]'); e.value = ''; e.dispatchEvent(new Event('input', {bubbles: true}));", json!([])).await;
    b.until("document.querySelectorAll('[data-testid=api-operation]').length > 200").await;
    choose_tag(&b, "Chat").await;
    b.until("document.querySelectorAll('[data-testid=api-tag-group]').length === 1").await;
    b.js(&expand("POST", "/api/v1/chat"), json!([])).await;
    let body = b.tid("api-operation-body").await.text().await;
    for part in
        ["workspace.chat", "message", "conversationId", "stream", "text/event-stream", "answer", "citations", "429"]
    {
        assert!(body.contains(part), "no {part:?} in POST /chat:\n{body}");
    }
    // axe, the console and the screenshots: the page's top, and the open operation
    b.js("window.scrollTo(0, 0)", json!([])).await;
    check_page(&b, "api", &mut problems).await;
    b.js("document.querySelector('[data-testid=api-operation-body]').scrollIntoView({block: 'start'})", json!([]))
        .await;
    b.screenshot(&crate::browser::shots().join("api-operation.png")).await;
    choose_tag(&b, "").await;
    b.until("document.querySelectorAll('[data-testid=api-tag-group]').length > 10").await;
    for v in axe(&b).await {
        problems.push(format!("api (every group): axe {v}"));
    }
    assert!(problems.is_empty(), "{problems:#?}");
    b.quit().await;
}
