//! The WordPress connector against a real WordPress (`wordpress_site.rs`): backfill, a post
//! searchable after a push, an edit re-embedded once, a trashed post gone after the sync, a custom
//! post type, drafts and private posts never indexed, the webhook secret, and the connector in the
//! sources list.

use serde_json::{Value, json};

use crate::support::{Auth, TestApp};
use crate::wordpress_site::{USER, WordPress};

async fn connector(t: &TestApp, a: &Auth) -> Value {
    t.get("/api/v1/connectors/wordpress", a).await.json()["connector"].clone()
}

/// The connector's documents: external id → document.
async fn documents(t: &TestApp, a: &Auth) -> Vec<Value> {
    let c = connector(t, a).await;
    let source = c["sourceId"].as_str().unwrap().to_string();
    let page = t.get(&format!("/api/v1/document/sources/{source}/documents?limit=200"), a).await.json();
    page["documents"].as_array().unwrap().clone()
}

async fn doc_titled(t: &TestApp, a: &Auth, title: &str) -> Option<Value> {
    documents(t, a).await.into_iter().find(|d| d["title"] == title)
}

const BLOCKS: &str = "<!-- wp:heading --><h2 class=\"wp-block-heading\">Sourdough schedule</h2><!-- /wp:heading -->\n\
<!-- wp:paragraph --><p>Our sourdough loaves come out of the oven at 7 am. [gallery ids=\"1,2\"] Ask for the rye.</p><!-- /wp:paragraph -->\n\
<!-- wp:list --><ul><li>Monday: country loaf</li><li>Friday: seeded rye</li></ul><!-- /wp:list -->";

#[tokio::test(flavor = "multi_thread")]
async fn a_real_wordpress_site_is_kept_in_the_knowledge_base() {
    let wp = tokio::task::spawn_blocking(WordPress::start).await.unwrap();
    let schedule = wp.create("posts", "Bread schedule", BLOCKS, "publish").await;
    let croissants = wp
        .create("posts", "Croissant day", "<p>Croissants are baked every Saturday with French butter.</p>", "publish")
        .await;
    wp.create(
        "pages",
        "About the bakery",
        "<p>The Harbour Bakery was founded in 1952 by the Marsh family.</p>",
        "publish",
    )
    .await;
    wp.create("products", "Marzipan stollen", "<p>A marzipan stollen for the winter holidays, 750 g.</p>", "publish")
        .await;
    wp.create("posts", "Secret draft", "<p>unpublishedmarker draft text</p>", "draft").await;
    wp.create("posts", "Staff only", "<p>privatemarker staff rota</p>", "private").await;

    let t = TestApp::with_config(|c| {
        c.encryption_key = Some(steward::config::Secret::new([3u8; 32]));
        c.delivery.allow = vec!["127.0.0.1/32".into()];
    });
    let owner = t.owner().await;
    let ws = t.get_ws();
    let r = t
        .put(
            "/api/v1/connectors/wordpress",
            &owner,
            json!({"config": {"site_url": wp.base, "wp_username": USER, "wp_application_password": wp.app_password,
                              "post_types": "post, page, product"}}),
        )
        .await;
    r.assert_status(200);
    let secret = r.json()["generatedSecrets"]["webhook_shared_secret"].as_str().unwrap().to_string();
    let v = t.post("/api/v1/connectors/wordpress/enable", &owner, json!({})).await.json();
    assert_eq!(v["connector"]["syncState"]["status"], "queued", "the backfill is queued on enable");

    // backfill: every published item of the three types, nothing unpublished
    t.drain_blocking().await;
    let c = connector(&t, &owner).await;
    let s = &c["syncState"];
    assert!(s["backfillCompletedAt"].is_string(), "{c}");
    assert_eq!(s["lastError"], Value::Null, "{c}");
    assert_eq!(s["status"], "idle");
    let titles: Vec<String> =
        documents(&t, &owner).await.iter().map(|d| d["title"].as_str().unwrap().to_string()).collect();
    for want in
        ["Bread schedule", "Croissant day", "About the bakery", "Marzipan stollen", "Hello world!", "Sample Page"]
    {
        assert!(titles.iter().any(|x| x == want), "{want} missing from {titles:?}");
    }
    assert_eq!(s["lastIngestedCount"].as_i64().unwrap(), titles.len() as i64);
    assert!(!titles.iter().any(|x| x == "Secret draft" || x == "Staff only"), "{titles:?}");
    assert!(t.titles_bm25(&owner, "unpublishedmarker").await.is_empty());
    assert!(t.titles_bm25(&owner, "privatemarker").await.is_empty());

    // clean text and the metadata of the reference
    let doc = doc_titled(&t, &owner, "Bread schedule").await.unwrap();
    let full = t.document(&owner, doc["id"].as_str().unwrap()).await;
    let text = full["content"].as_str().unwrap();
    assert!(text.contains("## Sourdough schedule") && text.contains("- Friday: seeded rye"), "{text}");
    assert!(!text.contains("gallery") && !text.contains("wp:paragraph"), "{text}");
    let m = &full["metadata"];
    assert_eq!(m["author"], "Ada Baker");
    assert!(m["published_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(m["dateFrom"].as_str().unwrap().len(), 10);
    assert_eq!(m["sourceUrl"], format!("{}/?p={schedule}", wp.base));
    let stollen = doc_titled(&t, &owner, "Marzipan stollen").await.unwrap();
    assert_eq!(t.document(&owner, stollen["id"].as_str().unwrap()).await["metadata"]["postType"], "product");
    assert_eq!(t.titles_bm25(&owner, "marzipan stollen").await.first().map(String::as_str), Some("Marzipan stollen"));

    // the webhook: a wrong or missing secret is 401
    let hook = format!("/api/connectors/wordpress/{ws}/webhook");
    let r = t
        .send(
            axum::http::Method::POST,
            &hook,
            &Auth::None,
            Some(json!({"post_id": 1})),
            &[("x-webhook-secret", "wrong")],
        )
        .await;
    r.assert_status(401);
    t.post(&hook, &Auth::None, json!({})).await.assert_status(401);
    let push = || async {
        let r = t
            .send(
                axum::http::Method::POST,
                &hook,
                &Auth::None,
                Some(json!({"action": "save_post"})),
                &[("x-webhook-secret", &secret)],
            )
            .await;
        r.assert_status(202);
        assert_eq!(r.json(), json!({"accepted": true}));
        t.drain_blocking().await;
    };

    // a post published later is searchable after its push
    wp.create("posts", "Pumpkin bread", "<p>Pumpkin bread is back every October, spiced with cinnamon.</p>", "publish")
        .await;
    assert!(t.titles_bm25(&owner, "pumpkin cinnamon").await.is_empty());
    push().await;
    assert_eq!(t.titles_bm25(&owner, "pumpkin cinnamon").await.first().map(String::as_str), Some("Pumpkin bread"));

    // an edit is re-embedded once: later pushes and a full sync find it unchanged
    let before = doc_titled(&t, &owner, "Croissant day").await.unwrap();
    assert_eq!(before["revision"], 1);
    wp.update(
        "posts",
        croissants,
        json!({"content": "<p>Croissants are baked every Saturday and Sunday with French butter.</p>"}),
    )
    .await;
    push().await;
    push().await;
    t.post("/api/v1/connectors/wordpress/sync", &owner, json!({})).await.assert_status(202);
    t.drain_blocking().await;
    let after = doc_titled(&t, &owner, "Croissant day").await.unwrap();
    assert_eq!(after["revision"], 2, "one new revision for one edit: {after}");
    let c = connector(&t, &owner).await;
    assert_eq!(c["syncState"]["progress"]["indexed"], 0, "the full sync wrote nothing: {c}");
    assert!(c["syncState"]["progress"]["unchanged"].as_i64().unwrap() >= 7, "{c}");

    // a trashed post is gone after the next sync
    wp.trash("posts", croissants).await;
    push().await;
    assert!(doc_titled(&t, &owner, "Croissant day").await.is_none());
    assert!(t.titles_bm25(&owner, "croissants butter").await.is_empty());
    let c = connector(&t, &owner).await;
    assert_eq!(c["syncState"]["progress"]["removed"], 1, "{c}");

    // the sources list shows the connector's source and its count
    let sources = t.get("/api/v1/document/sources", &owner).await.json();
    let conn = &sources["connectors"][0];
    assert_eq!((conn["id"].as_str(), conn["enabled"].as_bool()), (Some("wordpress"), Some(true)));
    let count = documents(&t, &owner).await.len() as i64;
    assert_eq!(conn["documentCount"], count);
    let src = sources["sources"].as_array().unwrap().iter().find(|s| s["kind"] == "connector").unwrap();
    assert_eq!(src["connector"]["id"], "wordpress");
    assert_eq!(src["documentCount"], count);

    // a second sync request while one is queued is a 409
    t.post("/api/v1/connectors/wordpress/sync", &owner, json!({})).await.assert_status(202);
    let r = t.post("/api/v1/connectors/wordpress/sync", &owner, json!({})).await;
    r.assert_status(409);
    assert_eq!(r.json()["error"]["details"]["code"], "sync_running");
    t.drain_blocking().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_site_that_refuses_the_credentials_is_reported_not_retried_for_ever() {
    let wp = tokio::task::spawn_blocking(WordPress::start).await.unwrap();
    let t = TestApp::with_config(|c| {
        c.encryption_key = Some(steward::config::Secret::new([3u8; 32]));
        c.delivery.allow = vec!["127.0.0.1/32".into()];
    });
    let owner = t.owner().await;
    t.put(
        "/api/v1/connectors/wordpress",
        &owner,
        json!({"config": {"site_url": wp.base, "wp_username": USER, "wp_application_password": "wrong pass word xxxx yyyy"}}),
    )
    .await
    .assert_status(200);
    t.post("/api/v1/connectors/wordpress/enable", &owner, json!({})).await.assert_status(200);
    t.drain_blocking().await;
    let c = connector(&t, &owner).await;
    let err = c["syncState"]["lastError"].as_str().unwrap_or_default();
    assert!(err.contains("401") && err.contains("wp_application_password"), "{c}");
    assert_eq!(c["syncState"]["status"], "idle");
    assert!(c["syncState"]["backfillCompletedAt"].is_null());
}
