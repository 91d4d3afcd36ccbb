//! Hybrid search: modes, metadata filters, history and exact replay, and the embedding model itself.

use serde_json::{Value, json};

use crate::support::TestApp;

#[tokio::test]
async fn hybrid_search_with_metadata_filters() {
    let t = TestApp::new();
    let owner = t.owner().await;
    t.doc(
        &owner,
        "Berlin office",
        "Our Berlin office hosts the support team.",
        json!({"city": "berlin", "staff": 40, "opened": "2019-05-01", "tags": ["eu", "support"]}),
    )
    .await;
    t.doc(
        &owner,
        "Paris office",
        "Our Paris office hosts the sales team.",
        json!({"city": "paris", "staff": 12, "opened": "2023-02-10", "tags": ["eu"]}),
    )
    .await;
    t.doc(
        &owner,
        "Austin office",
        "Our Austin office hosts the engineering team.",
        json!({"city": "austin", "staff": 80, "opened": "2021-09-15", "remote": true}),
    )
    .await;
    t.drain();
    let titles = |v: &serde_json::Value| -> Vec<String> {
        let mut t: Vec<String> =
            v["results"].as_array().unwrap().iter().map(|h| h["title"].as_str().unwrap().to_string()).collect();
        t.sort();
        t
    };
    let q = |f: serde_json::Value| json!({"query": "office team", "metadataFilter": f, "limit": 10});
    assert_eq!(titles(&t.search(&owner, q(json!({"city": "paris"}))).await), ["Paris office"]);
    assert_eq!(
        titles(&t.search(&owner, q(json!({"city": {"$in": ["paris", "austin"]}}))).await),
        ["Austin office", "Paris office"]
    );
    assert_eq!(titles(&t.search(&owner, q(json!({"staff": {"$gte": 40}}))).await), ["Austin office", "Berlin office"]);
    assert_eq!(
        titles(&t.search(&owner, q(json!({"opened": {"$gt": "2020-01-01", "$lt": "2022-12-31"}}))).await),
        ["Austin office"]
    );
    assert_eq!(titles(&t.search(&owner, q(json!({"remote": {"$exists": true}}))).await), ["Austin office"]);
    assert_eq!(titles(&t.search(&owner, q(json!({"tags": "support"}))).await), ["Berlin office"]);
    assert_eq!(
        titles(&t.search(&owner, q(json!({"$or": [{"city": "berlin"}, {"staff": {"$lt": 20}}]}))).await),
        ["Berlin office", "Paris office"]
    );
    assert_eq!(titles(&t.search(&owner, q(json!({"$not": {"tags": "eu"}}))).await), ["Austin office"]);
    assert!(titles(&t.search(&owner, q(json!({"city": "tokyo"}))).await).is_empty());
    // filters apply to both retrievers
    for mode in ["bm25", "vector", "hybrid"] {
        let v = t
            .search(&owner, json!({"query": "engineering team", "mode": mode, "metadataFilter": {"city": "paris"}}))
            .await;
        assert_eq!(titles(&v), ["Paris office"], "{mode}");
    }
    // the best match comes first
    let v = t.search(&owner, json!({"query": "who does engineering?"})).await;
    assert_eq!(v["results"][0]["title"], "Austin office");

    // malformed filters are a 400 that names the problem
    for (f, needle) in [
        (json!({"staff": {"$between": [1, 2]}}), "$between"),
        (json!({"opened": {"$gt": "someday"}}), "date"),
        (json!("city=paris"), "object"),
    ] {
        let r = t.post("/api/v1/document/search", &owner, json!({"query": "office", "metadataFilter": f})).await;
        r.assert_status(400);
        let e = r.json()["error"].clone();
        assert!(e["message"].as_str().unwrap().contains(needle), "{e}");
        assert_eq!(e["details"]["field"], "metadataFilter");
    }
}

#[tokio::test]
async fn every_search_is_saved_and_replays_exactly() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let id = t
        .doc(&owner, "Tea guide", "Green tea steeps at eighty degrees for two minutes.", json!({"kind": "guide"}))
        .await;
    t.doc(&owner, "Coffee guide", "Espresso extracts in twenty five seconds.", json!({"kind": "guide"})).await;
    t.drain();
    let first =
        t.search(&owner, json!({"query": "how long does green tea steep", "metadataFilter": {"kind": "guide"}})).await;
    assert_eq!(first["results"][0]["documentId"], id.as_str());
    let search_id = first["searchId"].as_str().unwrap().to_string();
    for q in ["espresso", "milk"] {
        t.search(&owner, json!({"query": q})).await;
    }

    // history pages, newest first
    let h = t.get("/api/v1/document/search/history?limit=2", &owner).await.json();
    assert_eq!(h["total"], 3);
    assert_eq!(h["hasMore"], true);
    assert_eq!(h["searches"][0]["query"], "milk");
    let next = h["nextCursor"].as_str().unwrap();
    let h2 = t.get(&format!("/api/v1/document/search/history?limit=2&cursor={next}"), &owner).await.json();
    assert_eq!(h2["searches"][0]["query"], "how long does green tea steep");
    assert_eq!(h2["searches"][0]["resultCount"], first["resultCount"]);
    assert_eq!(h2["searches"][0]["previewTopTitles"][0], "Tea guide");

    // the corpus changes; the replay still shows what was returned then
    t.delete(&format!("/api/v1/document/{id}"), &owner).await.assert_status(204);
    let replay = t.get(&format!("/api/v1/document/search/history/{search_id}"), &owner).await.json();
    // the same hits in the same order with the same scores; the deleted document is marked, not
    // shown (its text is gone), the others carry their current text
    let key = |v: &Value| {
        v["results"].as_array().unwrap().iter().map(|h| (h["chunkId"].clone(), h["score"].clone())).collect::<Vec<_>>()
    };
    assert_eq!(key(&replay), key(&first));
    assert_eq!(replay["results"][0]["note"], "deleted");
    assert_eq!(replay["results"][0]["snippet"], "");
    assert_eq!(replay["results"][1], first["results"][1]);
    assert_eq!(replay["query"], first["query"]);
    assert_eq!(replay["metadataFilter"], first["metadataFilter"]);
    assert_eq!(replay["createdAt"], first["createdAt"]);
    let now =
        t.search(&owner, json!({"query": "how long does green tea steep", "metadataFilter": {"kind": "guide"}})).await;
    assert_ne!(now["results"], first["results"]);
    t.get("/api/v1/document/search/history/0191ee1e-0000-7000-8000-000000000000", &owner).await.assert_status(404);
}

/// One result per document, however many of a document's chunks rank first: the best chunks of
/// one long document fill several hydration batches before the other documents are reached.
#[tokio::test]
async fn results_collapse_to_one_chunk_per_document() {
    let t = TestApp::new();
    let owner = t.owner().await;
    t.put("/api/v1/settings/ingestion", &owner, json!({"fixedWindowChunkSize": 100, "fixedWindowChunkOverlap": 0}))
        .await
        .assert_status(200);
    let long = (0..70)
        .map(|i| format!("Lighthouse keeper log {i}: the lighthouse lamp burned all night by the lighthouse."))
        .collect::<Vec<_>>()
        .join(" ");
    let manual = t.doc(&owner, "Lighthouse keeper log", &long, json!({})).await;
    let others = [
        t.doc(&owner, "Harbour notes", "A lighthouse stands at the harbour entrance.", json!({})).await,
        t.doc(&owner, "Coast guide", "Walk the coast path past the old lighthouse.", json!({})).await,
    ];
    t.drain();
    let chunks = t.document(&owner, &manual).await["chunkCount"].as_i64().unwrap();
    assert!((55..95).contains(&chunks), "{chunks} chunks");
    for mode in ["bm25", "vector", "hybrid"] {
        let v = t.search(&owner, json!({"query": "lighthouse", "mode": mode, "limit": 3})).await;
        let ids: Vec<&str> =
            v["results"].as_array().unwrap().iter().map(|h| h["documentId"].as_str().unwrap()).collect();
        assert_eq!(ids.len(), 3, "{mode}: {v}");
        assert_eq!(ids.iter().filter(|d| **d == manual).count(), 1, "{mode}: {ids:?}");
        for o in &others {
            assert!(ids.contains(&o.as_str()), "{mode}: {ids:?}");
        }
    }
}

#[test]
fn the_local_embedding_model_gives_meaningful_vectors() {
    let t = TestApp::new();
    let e = t.app.models.embedder().expect("the embedding model is installed (scripts/fetch-models.sh)");
    let out = e
        .embed(&["A man is eating food.", "A man is eating a piece of bread.", "The stock market fell sharply today."])
        .unwrap();
    assert_eq!(out.vectors.len(), 3);
    assert!(out.vectors.iter().all(|v| v.len() == steward::models::embed::DIMENSIONS));
    let norm: f32 = out.vectors[0].iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-3);
    let related = steward::models::embed::cosine(&out.vectors[0], &out.vectors[1]);
    let unrelated = steward::models::embed::cosine(&out.vectors[0], &out.vectors[2]);
    assert!(related > 0.6, "related {related}");
    assert!(unrelated < 0.25, "unrelated {unrelated}");
    // batching and ordering do not change a vector
    let alone = e.embed(&["The stock market fell sharply today."]).unwrap();
    // (dynamic int8 quantization scales activations per batch: companions shift a vector slightly)
    let same = steward::models::embed::cosine(&alone.vectors[0], &out.vectors[2]);
    assert!(same > 0.98, "{same}");
    let q = e.embed_query("A man is eating food.").unwrap();
    let q_same = steward::models::embed::cosine(&q, &out.vectors[0]);
    assert!(q_same > 0.98, "{q_same}");
    // A longer query: the query session (two threads) splits the rows of its element-wise
    // kernels between its threads; the result matches the single-threaded ingestion session.
    let long = "What similarity laws must be obeyed when constructing aeroelastic models of heated high \
                speed aircraft, and how do the boundary layer and the heat transfer scale with them?";
    let q = e.embed_query(long).unwrap();
    let alone = e.embed(&[long]).unwrap();
    let same = steward::models::embed::cosine(&q, &alone.vectors[0]);
    assert!(same > 0.9999, "{same}");
}
