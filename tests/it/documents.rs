//! Documents: 202 then ready, revisions, upserts, deletes, lists, sources, settings, isolation.

use axum::http::Method;
use serde_json::{Value, json};

use crate::support::{Auth, TestApp};

#[tokio::test]
async fn a_document_is_accepted_then_ready_and_searchable() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let r = t
        .post("/api/v1/document/", &owner, json!({"title": "Refund policy", "content": "# Refunds\n\nCustomers get a full refund within 30 days with the receipt.", "metadata": {"lang": "en"}}))
        .await;
    r.assert_status(202);
    let d = r.json();
    assert_eq!(d["status"], "queued");
    assert_eq!(d["revision"], 1);
    assert_eq!(d["ragStatus"], "pending");
    assert_eq!(d["source"]["kind"], "api");
    let id = d["id"].as_str().unwrap().to_string();
    // not searchable before processing
    assert!(t.titles(&owner, "refund receipt").await.is_empty());

    t.drain();
    let d = t.document(&owner, &id).await;
    assert_eq!(d["status"], "ready", "{d}");
    assert_eq!(d["ragStatus"], "processed");
    assert!(d["chunkCount"].as_i64().unwrap() >= 1);
    assert!(d["content"].as_str().unwrap().contains("full refund"));
    assert!(d["processedAt"].is_string());

    let s = t.search(&owner, json!({"query": "refund receipt"})).await;
    let hit = &s["results"][0];
    assert_eq!(hit["documentId"], id.as_str());
    assert_eq!(hit["title"], "Refund policy");
    assert!(hit["chunkId"].is_string());
    assert_eq!(hit["metadata"]["lang"], "en");
    assert!(hit["snippet"].as_str().unwrap().contains("<mark>receipt</mark>"), "{hit}");
    assert!(hit["score"].as_f64().unwrap() > 0.0);

    // the progress endpoint agrees and the indexes match SQLite
    let p = t.get("/api/v1/document/progress", &owner).await.json();
    assert_eq!(p["idle"], true);
    assert_eq!(p["ready"], 1);
    assert_eq!(p["index"]["liveChunks"], p["index"]["textDocuments"]);
    assert_eq!(p["index"]["liveChunks"].as_i64().unwrap() as usize, p["index"]["vectors"].as_u64().unwrap() as usize);
}

#[tokio::test]
async fn updates_and_reprocessing_bump_revisions_and_stale_jobs_do_nothing() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let id = t.doc(&owner, "Shipping", "Parcels ship with the zebracorn courier in two days.", json!({})).await;
    // a newer revision arrives before the first job ran: the first job must not win
    let r = t
        .put(
            &format!("/api/v1/document/{id}"),
            &owner,
            json!({"content": "Parcels ship with the quokkaline courier overnight."}),
        )
        .await;
    r.assert_status(202);
    assert_eq!(r.json()["revision"], 2);
    assert_eq!(r.json()["status"], "queued");
    t.drain();
    let d = t.document(&owner, &id).await;
    assert_eq!((d["status"].as_str(), d["revision"].as_i64()), (Some("ready"), Some(2)));
    assert!(t.titles_bm25(&owner, "zebracorn").await.is_empty());
    assert_eq!(t.titles_bm25(&owner, "quokkaline").await, vec!["Shipping"]);

    // reprocess bumps the revision too, and keeps the document searchable meanwhile
    let r = t.post(&format!("/api/v1/document/{id}/reprocess"), &owner, json!({})).await;
    r.assert_status(202);
    assert_eq!(r.json()["revision"], 3);
    assert_eq!(
        t.titles_bm25(&owner, "quokkaline").await,
        vec!["Shipping"],
        "the old revision stays searchable until the new one is live"
    );
    t.drain();
    let d = t.send(Method::GET, &format!("/api/v1/document/{id}?includeChunks=true"), &owner, None, &[]).await.json();
    assert_eq!(d["revision"], 3);
    let chunks = d["chunks"].as_array().unwrap();
    assert!(!chunks.is_empty());
    for (i, c) in chunks.iter().enumerate() {
        assert_eq!(c["chunkIndex"], i as i64);
    }
    // metadata-only and title changes are revisions as well
    let r = t
        .put(
            &format!("/api/v1/document/{id}"),
            &owner,
            json!({"title": "Shipping times", "metadata": {"region": "eu"}}),
        )
        .await;
    assert_eq!(r.json()["revision"], 4);
    t.drain();
    let s = t.search(&owner, json!({"query": "quokkaline", "metadataFilter": {"region": "eu"}})).await;
    assert_eq!(s["results"][0]["title"], "Shipping times");
    // bad updates
    t.put(&format!("/api/v1/document/{id}"), &owner, json!({})).await.assert_status(400);
    t.put(&format!("/api/v1/document/{id}"), &owner, json!({"content": "   "})).await.assert_status(400);
    t.post(&format!("/api/v1/document/{id}/reprocess"), &owner, json!({"documentEnrichmentOverride": "maybe"}))
        .await
        .assert_status(400);
}

#[tokio::test]
async fn external_document_ids_upsert_within_their_source() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let body = json!({"title": "FAQ", "content": "Opening hours are nine to five.", "externalDocumentId": "faq-1"});
    let a = t.post("/api/v1/document/", &owner, body.clone()).await.json();
    t.drain();
    // the same content again changes nothing and queues nothing
    let b = t.post("/api/v1/document/", &owner, body).await;
    b.assert_status(202);
    let b = b.json();
    assert_eq!(a["id"], b["id"]);
    assert_eq!(b["revision"], 1);
    assert_eq!(b["status"], "ready");
    assert_eq!(t.run_jobs(), 0);
    // new content updates the same document
    let c = t
        .post(
            "/api/v1/document/",
            &owner,
            json!({"title": "FAQ", "content": "Opening hours are eight to six.", "externalDocumentId": "faq-1"}),
        )
        .await
        .json();
    assert_eq!(c["id"], a["id"]);
    assert_eq!(c["revision"], 2);
    t.drain();
    let list = t.get("/api/v1/document/", &owner).await.json();
    assert_eq!(list["total"], 1);
}

#[tokio::test]
async fn a_deleted_document_leaves_search_before_delete_returns() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let id = t.doc(&owner, "Secret plan", "The flamingo protocol starts at dawn.", json!({})).await;
    let keep = t.doc(&owner, "Other", "Flamingo sightings are common in spring.", json!({})).await;
    t.drain();
    assert_eq!(t.titles(&owner, "flamingo protocol").await.len(), 2);
    t.delete(&format!("/api/v1/document/{id}"), &owner).await.assert_status(204);
    // no draining: gone at once, from both retrievers
    assert_eq!(t.titles(&owner, "flamingo protocol").await, vec!["Other"]);
    let v = t.search(&owner, json!({"query": "the flamingo protocol starts at dawn", "mode": "vector"})).await;
    assert!(v["results"].as_array().unwrap().iter().all(|h| h["title"] != "Secret plan"));
    t.get(&format!("/api/v1/document/{id}"), &owner).await.assert_status(404);
    t.delete(&format!("/api/v1/document/{id}"), &owner).await.assert_status(404);
    let p = t.get("/api/v1/document/progress", &owner).await.json();
    assert_eq!(p["index"]["liveChunks"], p["index"]["textDocuments"]);
    assert_eq!(p["index"]["vectors"], p["index"]["textDocuments"]);
    assert_eq!(t.document(&owner, &keep).await["status"], "ready");
}

#[tokio::test]
async fn lists_page_with_cursors_and_totals() {
    let t = TestApp::new();
    let owner = t.owner().await;
    for i in 0..5 {
        t.doc(&owner, &format!("Doc {i}"), &format!("Content number {i}."), json!({})).await;
    }
    let p1 = t.get("/api/v1/document/?limit=2", &owner).await.json();
    assert_eq!(p1["documents"].as_array().unwrap().len(), 2);
    assert_eq!(p1["total"], 5);
    assert_eq!(p1["hasMore"], true);
    assert_eq!(p1["summary"]["pendingDocumentCount"], 5);
    assert_eq!(p1["documents"][0]["title"], "Doc 4", "newest first");
    let cur = p1["nextCursor"].as_str().unwrap();
    let p2 = t.get(&format!("/api/v1/document/?limit=2&cursor={cur}"), &owner).await.json();
    let p3 =
        t.get(&format!("/api/v1/document/?limit=2&cursor={}", p2["nextCursor"].as_str().unwrap()), &owner).await.json();
    assert_eq!(p3["documents"].as_array().unwrap().len(), 1);
    assert_eq!(p3["hasMore"], false);
    assert_eq!(p3["nextCursor"], Value::Null);
    t.drain();
    let ready = t.get("/api/v1/document/?status=ready", &owner).await.json();
    assert_eq!(ready["total"], 5);
    assert_eq!(ready["summary"]["readyDocumentCount"], 5);
    t.get("/api/v1/document/?status=bogus", &owner).await.assert_status(400);
    t.get("/api/v1/document/?cursor=nope", &owner).await.assert_status(400);
    t.get("/api/v1/document/?limit=0", &owner).await.assert_status(400);
    // title search: every page of the workspace, case-insensitive, pages like the full list
    t.doc(&owner, "Shipping policy", "How long shipping takes.", json!({})).await;
    let found = t.get("/api/v1/document/?q=SHIPPING", &owner).await.json();
    assert_eq!(found["total"], 1);
    assert_eq!(found["documents"][0]["title"], "Shipping policy");
    assert_eq!(found["summary"]["documentCount"], 6, "the summary stays the workspace's");
    let docs = t.get("/api/v1/document/?q=doc&limit=2", &owner).await.json();
    assert_eq!((docs["total"].as_i64(), docs["hasMore"].as_bool()), (Some(5), Some(true)));
    let cur = docs["nextCursor"].as_str().unwrap();
    let next = t.get(&format!("/api/v1/document/?q=doc&limit=2&cursor={cur}"), &owner).await.json();
    assert_eq!(next["documents"][0]["title"], "Doc 2");
    t.upload(&owner, "returns-faq.md", b"# FAQ\n\nReturns within 30 days.", &[]).await.assert_status(202);
    let by_file = t.get("/api/v1/document/?q=returns-faq", &owner).await.json();
    assert_eq!(by_file["total"], 1, "the source file name matches too: {by_file}");
    assert_eq!(t.get("/api/v1/document/?q=%25", &owner).await.json()["total"], 0, "no wildcards");
    t.get(&format!("/api/v1/document/?q={}", "x".repeat(201)), &owner).await.assert_status(400);
}

#[tokio::test]
async fn sources_list_patch_reprocess_and_delete() {
    let t = TestApp::new();
    let owner = t.owner().await;
    t.doc(&owner, "A", "Alpha text about kayaks.", json!({})).await;
    t.doc(&owner, "B", "Beta text about canoes.", json!({})).await;
    t.drain();
    t.upload(&owner, "notes.md", b"# Notes\n\nPaddles are made of carbon.", &[]).await.assert_status(202);
    let sources = t.get("/api/v1/document/sources", &owner).await.json();
    let list = sources["sources"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    let api = list.iter().find(|s| s["kind"] == "api").unwrap();
    let upload = list.iter().find(|s| s["kind"] == "upload").unwrap();
    assert_eq!(api["documentCount"], 2);
    assert_eq!(api["documentEnrichmentOverride"], "inherit");
    let api_id = api["id"].as_str().unwrap();
    let upload_id = upload["id"].as_str().unwrap();

    let docs = t.get(&format!("/api/v1/document/sources/{api_id}/documents"), &owner).await.json();
    assert_eq!(docs["total"], 2);

    let r = t
        .patch(&format!("/api/v1/document/sources/{api_id}"), &owner, json!({"documentEnrichmentOverride": "on"}))
        .await;
    r.assert_status(200);
    assert_eq!(r.json()["source"]["documentEnrichmentOverride"], "on");
    t.patch(&format!("/api/v1/document/sources/{api_id}"), &owner, json!({"documentEnrichmentOverride": "sometimes"}))
        .await
        .assert_status(400);

    // the upload is still queued: reprocessing the upload source skips it
    let r = t.post(&format!("/api/v1/document/sources/{upload_id}/reprocess"), &owner, json!({})).await.json();
    assert_eq!(r, json!({"queuedDocumentCount": 0, "skippedDocumentCount": 1, "status": "noop"}));
    let r = t
        .post(
            &format!("/api/v1/document/sources/{api_id}/reprocess"),
            &owner,
            json!({"documentEnrichmentOverride": "off"}),
        )
        .await
        .json();
    assert_eq!(r, json!({"queuedDocumentCount": 2, "skippedDocumentCount": 0, "status": "queued"}));
    // a second call while they are queued skips them
    let r = t.post(&format!("/api/v1/document/sources/{api_id}/reprocess"), &owner, json!({})).await.json();
    assert_eq!(r["skippedDocumentCount"], 2);
    assert_eq!(r["status"], "noop");
    t.drain();

    // crawl controls only apply to crawl sources
    for action in ["recrawl", "pause-crawl", "resume-crawl"] {
        let r = t.post(&format!("/api/v1/document/sources/{api_id}/{action}"), &owner, json!({})).await;
        r.assert_status(409);
        assert_eq!(r.json()["error"]["details"]["code"], "not_a_crawl_source");
    }
    // deleting a source removes its documents from everything
    assert_eq!(t.titles(&owner, "kayaks").await[0], "A");
    t.delete(&format!("/api/v1/document/sources/{api_id}"), &owner).await.assert_status(204);
    assert!(!t.titles(&owner, "kayaks").await.contains(&"A".to_string()));
    assert!(t.titles_bm25(&owner, "kayaks").await.is_empty());
    assert_eq!(t.get("/api/v1/document/", &owner).await.json()["total"], 1);
    t.delete(&format!("/api/v1/document/sources/{api_id}"), &owner).await.assert_status(404);
    // the built-in source comes back on the next API document
    t.doc(&owner, "C", "Gamma.", json!({})).await;
    assert_eq!(t.get("/api/v1/document/sources", &owner).await.json()["sources"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn ingestion_settings_validate_and_reprocess() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let s = t.get("/api/v1/settings/ingestion", &owner).await.json();
    assert_eq!(
        s,
        json!({"chunkingStrategy": "fixed_window", "fixedWindowChunkSize": 1200, "fixedWindowChunkOverlap": 150,
               "structuredMinChunkSize": 24, "structuredMaxChunkSize": 220, "documentEnrichmentEnabled": false})
    );
    let r = t.put("/api/v1/settings/ingestion", &owner, json!({"fixedWindowChunkSize": 99})).await;
    r.assert_status(400);
    assert_eq!(r.json()["error"]["details"]["field"], "fixedWindowChunkSize");
    t.put("/api/v1/settings/ingestion", &owner, json!({"chunkingStrategy": "clever"})).await.assert_status(400);
    t.put("/api/v1/settings/ingestion", &owner, json!({"structuredMinChunkSize": 500, "structuredMaxChunkSize": 100}))
        .await
        .assert_status(400);
    let r = t
        .put(
            "/api/v1/settings/ingestion",
            &owner,
            json!({"chunkingStrategy": "structured_semantic", "structuredMaxChunkSize": 40}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(r.json()["chunkingStrategy"], "structured_semantic");
    assert_eq!(r.json()["fixedWindowChunkSize"], 1200, "omitted fields keep their value");

    let long = (0..40)
        .map(|i| format!("Sentence number {i} talks about topic {i} in some detail."))
        .collect::<Vec<_>>()
        .join(" ");
    let id = t.doc(&owner, "Long", &format!("# Part one\n\n{long}\n\n# Part two\n\n{long}"), json!({})).await;
    t.drain();
    let before = t.document(&owner, &id).await["chunkCount"].as_i64().unwrap();
    assert!(before > 4, "small structured chunks: {before}");
    t.put("/api/v1/settings/ingestion", &owner, json!({"structuredMaxChunkSize": 2000})).await.assert_status(200);
    let r = t.post("/api/v1/settings/ingestion/reprocess", &owner, json!({})).await.json();
    assert_eq!(r, json!({"queuedDocumentCount": 1, "skippedDocumentCount": 0, "status": "queued"}));
    t.drain();
    let after = t.document(&owner, &id).await;
    assert_eq!(after["revision"], 2);
    assert_eq!(after["chunkCount"], 2, "one chunk per section");
    // members cannot change settings
    let member = t.member(&owner, "m@example.com", "member").await;
    t.put("/api/v1/settings/ingestion", &member, json!({"fixedWindowChunkSize": 500})).await.assert_status(403);
    t.get("/api/v1/settings/ingestion", &member).await.assert_status(200);
}

#[tokio::test]
async fn another_workspace_sees_nothing() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let id = t.doc(&owner, "Private", "The walrus budget is forty thousand.", json!({})).await;
    t.drain();
    let s = t.search(&owner, json!({"query": "walrus budget"})).await;
    let search_id = s["searchId"].as_str().unwrap().to_string();
    let ws_b = t.post("/api/v1/workspaces", &owner, json!({"name": "B"})).await.json()["workspace"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let in_b = |m: Method, p: &str| (m, p.to_string());
    for (m, p) in [
        in_b(Method::GET, &format!("/api/v1/document/{id}")),
        in_b(Method::DELETE, &format!("/api/v1/document/{id}")),
        in_b(Method::POST, &format!("/api/v1/document/{id}/reprocess")),
        in_b(Method::GET, &format!("/api/v1/document/search/history/{search_id}")),
    ] {
        let r = t
            .send(
                m.clone(),
                &p,
                &owner,
                if m == Method::POST { Some(json!({})) } else { None },
                &[("x-workspace-id", &ws_b)],
            )
            .await;
        r.assert_status(404);
        assert!(!r.text().contains("walrus"));
    }
    let r = t
        .send(
            Method::POST,
            "/api/v1/document/search",
            &owner,
            Some(json!({"query": "walrus budget"})),
            &[("x-workspace-id", &ws_b)],
        )
        .await
        .json();
    assert_eq!(r["results"], json!([]));
    let r = t.send(Method::GET, "/api/v1/document/", &owner, None, &[("x-workspace-id", &ws_b)]).await.json();
    assert_eq!(r["total"], 0);
    // a service credential of B cannot reach A's document either
    let svc = t
        .send(
            Method::POST,
            "/api/v1/service-credentials",
            &owner,
            Some(json!({"name": "b", "permissions": ["workspace.documents.read", "workspace.retrieval.query"]})),
            &[("x-workspace-id", &ws_b)],
        )
        .await
        .json();
    let svc = Auth::Bearer(svc["secret"].as_str().unwrap().into());
    t.get(&format!("/api/v1/document/{id}"), &svc).await.assert_status(404);
    assert_eq!(t.search(&svc, json!({"query": "walrus"})).await["results"], json!([]));
    // still there for A
    assert_eq!(t.document(&owner, &id).await["status"], "ready");
}

#[tokio::test]
async fn document_routes_enforce_permissions() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let reader = t.token_with(&owner, &["workspace.documents.read"]).await;
    let r = t.post("/api/v1/document/", &reader, json!({"title": "x", "content": "y"})).await;
    r.assert_status(403);
    assert_eq!(r.json()["error"]["details"]["permission"], "workspace.documents.manage");
    t.get("/api/v1/document/", &reader).await.assert_status(200);
    let r = t.post("/api/v1/document/search", &reader, json!({"query": "x"})).await;
    r.assert_status(403);
    assert_eq!(r.json()["error"]["details"]["permission"], "workspace.retrieval.query");
    t.get("/api/v1/document/", &Auth::None).await.assert_status(401);
    // validation
    t.post("/api/v1/document/", &owner, json!({"title": "", "content": "y"})).await.assert_status(400);
    t.post("/api/v1/document/", &owner, json!({"title": "t", "content": ""})).await.assert_status(400);
    t.post("/api/v1/document/", &owner, json!({"title": "t", "content": "c", "metadata": [1]}))
        .await
        .assert_status(400);
    t.post("/api/v1/document/", &owner, json!({"title": "t", "content": "c", "metadata": {"bad key": 1}}))
        .await
        .assert_status(400);
    t.post("/api/v1/document/", &owner, json!({"title": "t", "content": "c", "documentEnrichmentOverride": "inherit"}))
        .await
        .assert_status(400);
    t.post(
        "/api/v1/document/",
        &owner,
        json!({"title": "t", "content": "c", "sourceId": "0191ee1e-0000-7000-8000-000000000000"}),
    )
    .await
    .assert_status(404);
    t.post("/api/v1/document/search", &owner, json!({"query": "  "})).await.assert_status(400);
    t.post("/api/v1/document/search", &owner, json!({"query": "x", "limit": 500})).await.assert_status(400);
}

#[tokio::test]
async fn usage_is_recorded_once_per_revision() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let id = t.doc(&owner, "Meter", "Counting bytes of embedded content.", json!({})).await;
    t.drain();
    let u = t.get("/api/v1/usage", &owner).await.json();
    assert_eq!(u["embeddingsThisMonth"]["events"], 1);
    let stored = u["storedIndexedBytes"]["used"].as_i64().unwrap();
    assert_eq!(stored, "Counting bytes of embedded content.".len() as i64);
    assert_eq!(u["monthlyIndexedBytes"]["used"].as_i64().unwrap(), stored);
    assert!(u["embeddingsThisMonth"]["tokens"].as_i64().unwrap() > 5);

    // the same embedding call recorded again (a retried job) does not count twice
    let key: String =
        t.app.db.read(|c| Ok(c.query_row("SELECT idempotency_key FROM usage_events", [], |r| r.get(0))?)).unwrap();
    assert!(key.contains(&id) && key.contains(":1:local:"), "{key}");
    let again = t
        .app
        .db
        .write(|tx| {
            steward::usage::record_embedding(
                tx,
                &steward::usage::EmbeddingUsage {
                    organization_id: u["accountId"].as_str().unwrap(),
                    workspace_id: &t.get_ws(),
                    document_id: &id,
                    revision: 1,
                    provider: "local",
                    model: steward::models::embed::MINILM.id,
                    input_bytes: 35,
                    vector_count: 1,
                    tokens: 9,
                },
                "2026-11-21T00:00:00.000Z",
            )
        })
        .unwrap();
    assert!(!again);

    // reprocessing unchanged content reuses the embeddings: no new embedding event, no new bytes
    t.post(&format!("/api/v1/document/{id}/reprocess"), &owner, json!({})).await.assert_status(202);
    t.drain();
    let u2 = t.get("/api/v1/usage", &owner).await.json();
    assert_eq!(u2["embeddingsThisMonth"]["events"], 1);
    assert_eq!(u2["monthlyIndexedBytes"]["used"], u["monthlyIndexedBytes"]["used"]);
    // new content is a new event
    t.put(&format!("/api/v1/document/{id}"), &owner, json!({"content": "Different words now."})).await;
    t.drain();
    let u3 = t.get("/api/v1/usage", &owner).await.json();
    assert_eq!(u3["embeddingsThisMonth"]["events"], 2);
    assert_eq!(u3["storedIndexedBytes"]["used"], "Different words now.".len() as i64);
    t.delete(&format!("/api/v1/document/{id}"), &owner).await;
    assert_eq!(t.get("/api/v1/usage", &owner).await.json()["storedIndexedBytes"]["used"], 0);
}
