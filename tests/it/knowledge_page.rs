//! The dashboard's knowledge index page in a real browser: switching the embedding model names the
//! cost before it is confirmed, then shows the re-embedding until the index is ready in the new
//! model.

use reqwest::Method;
use serde_json::json;

use crate::browser::{check_page, click, sign_in_as_root};
use crate::e2e::{Api, Server, bootstrap};
use crate::webdriver::Driver;

#[tokio::test(flavor = "multi_thread")]
async fn the_knowledge_page_names_the_cost_of_a_model_switch_and_shows_the_reembedding() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = bootstrap(&data);
    let server = Server::start(&data, &[]);
    let base = server.base.clone();
    let api = Api::new(&base, &token);
    for (title, content) in [
        ("Opening hours", "We are open from nine to five on weekdays, and ten to two on Saturdays."),
        ("Returns", "Items can be returned within thirty days of delivery for a full refund."),
    ] {
        api.call(Method::POST, "/api/v1/document/", Some(json!({"title": title, "content": content}))).await;
    }
    while api.call(Method::GET, "/api/v1/document/progress?waitMs=30000", None).await["idle"] != true {}

    let driver = Driver::start();
    let b = driver.session().await;
    let mut problems = Vec::new();
    sign_in_as_root(&b, &base).await;
    click(&b, "nav-knowledge").await;
    b.tid("knowledge-index").await;
    assert_eq!(b.tid("knowledge-state").await.text().await, "ready");
    check_page(&b, "knowledge", &mut problems).await;

    // the multilingual model: the confirmation names the chunks and the time it takes
    b.js(
        "const s = document.querySelector('[data-testid=knowledge-model]'); s.value = 'multilingual-e5-small';
         s.dispatchEvent(new Event('change', {bubbles: true}));",
        json!([]),
    )
    .await;
    click(&b, "knowledge-save").await;
    let dialog = b.tid("confirm-dialog").await.text().await;
    assert!(dialog.contains("multilingual-e5-small") && dialog.contains("(2)") && dialog.contains("about"), "{dialog}");
    // (the save button stays busy while the dialog asks: axe alone here)
    for v in crate::browser::axe(&b).await {
        problems.push(format!("knowledge-confirm: axe {v}"));
    }
    b.screenshot(&crate::browser::shots().join("knowledge-confirm.png")).await;
    click(&b, "confirm-ok").await;
    // re-embedding, then ready in the new model (the page polls)
    b.until("document.querySelector('[data-testid=knowledge-state]').textContent === 'ready' && document.querySelector('[data-testid=knowledge-index]').textContent.includes('multilingual-e5-small')").await;
    let k = api.call(Method::GET, "/api/v1/settings/knowledge", None).await;
    assert_eq!(k["index"]["space"], "multilingual-e5-small@512", "{k}");
    assert_eq!(k["embeddingModel"], "multilingual-e5-small");
    check_page(&b, "knowledge-after", &mut problems).await;
    assert!(problems.is_empty(), "{problems:#?}");
    server.terminate();
}
