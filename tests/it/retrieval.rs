//! Retrieval that holds on unseen data: a workspace's knowledge index (language, embedding model)
//! and its background re-embedding, search history kept compact and within its retention, and
//! retrieval in German, French and Spanish and across languages with the multilingual model.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use steward::clock::Clock;

use crate::support::TestApp;

/// A text well past 128 tokens, so its tail reaches the vectors only at 256.
fn long_text(topic: &str) -> String {
    let filler = "The committee reviewed the quarterly figures and the operating notes in detail. ".repeat(12);
    format!("{filler}In the final section the report explains {topic}.")
}

fn search_body(query: &str, mode: &str) -> Value {
    json!({"query": query, "mode": mode, "includeDebug": true, "limit": 5})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_data_dir_answers_reembeds_in_the_background_and_switches_over_whole() {
    // a data dir written with MiniLM truncating at 128 tokens (the settings before this change)
    let t = TestApp::with_config(|c| c.embed_max_tokens = 128);
    let owner = t.owner().await;
    t.doc(&owner, "Pump maintenance", &long_text("how to bleed the hydraulic pump after service"), json!({})).await;
    t.doc(&owner, "Holiday rota", "Staff holidays are booked through the rota two weeks ahead.", json!({})).await;
    t.drain();
    let k = t.get("/api/v1/settings/knowledge", &owner).await.json();
    assert_eq!(k["index"]["space"], "all-minilm-l6-v2@128", "{k}");
    assert_eq!(k["index"]["state"], "ready");

    // the upgrade: the model's own limit (256)
    let mut config = t.app.config.clone();
    config.embed_max_tokens = 256;
    let (dir, clock_ms) = (t.dir, t.clock.now_ms());
    drop(t.router);
    drop(t.app);
    let t = TestApp::open(dir, config, vec![]);
    t.clock.advance_ms((clock_ms - t.clock.now_ms()).max(0));
    let queued = steward::search::spaces::reconcile_all(&t.app).unwrap();
    assert_eq!(queued, 1, "the workspace in the older space is queued for re-embedding");
    let k = t.get("/api/v1/settings/knowledge", &owner).await.json();
    assert_eq!(k["index"]["state"], "reembedding", "{k}");
    assert_eq!(k["index"]["reembedding"]["toSpace"], "all-minilm-l6-v2@256");
    assert_eq!(k["index"]["reembedding"]["total"], k["index"]["chunks"]);

    // it keeps answering, from the old index, while the job runs
    let v = t.search(&owner, search_body("hydraulic pump bleeding", "hybrid")).await;
    assert_eq!(v["debug"]["embeddingSpace"], "all-minilm-l6-v2@128");
    assert_eq!(v["results"][0]["title"], "Pump maintenance");

    // searches during the switch answer from one complete index: every one names one space and
    // finds the document
    let done = Arc::new(AtomicBool::new(false));
    let runner = {
        let (app, done) = (t.app.clone(), done.clone());
        std::thread::spawn(move || {
            let n = steward::jobs::run_until_idle(&app).unwrap();
            done.store(true, Ordering::SeqCst);
            n
        })
    };
    let mut spaces_seen = std::collections::BTreeSet::new();
    loop {
        let finished = done.load(Ordering::SeqCst);
        let v = t.search(&owner, search_body("hydraulic pump bleeding", "vector")).await;
        let space = v["debug"]["embeddingSpace"].as_str().unwrap().to_string();
        assert!(space == "all-minilm-l6-v2@128" || space == "all-minilm-l6-v2@256", "{v}");
        assert_eq!(v["results"][0]["title"], "Pump maintenance", "{v}");
        spaces_seen.insert(space);
        if finished {
            break;
        }
    }
    assert!(runner.join().unwrap() >= 1);
    let k = t.get("/api/v1/settings/knowledge", &owner).await.json();
    assert_eq!(
        (k["index"]["state"].as_str(), k["index"]["space"].as_str()),
        (Some("ready"), Some("all-minilm-l6-v2@256")),
        "{k}"
    );
    let v = t.search(&owner, search_body("hydraulic pump bleeding", "hybrid")).await;
    assert_eq!(v["debug"]["embeddingSpace"], "all-minilm-l6-v2@256");
    assert!(spaces_seen.contains("all-minilm-l6-v2@256"));

    // new documents go straight into the new space, and the switch survives a restart
    t.doc(&owner, "Boiler", "The boiler is serviced every spring by the facilities team.", json!({})).await;
    t.drain();
    let t = t.restart(vec![]);
    let v = t.search(&owner, search_body("when is the boiler serviced", "vector")).await;
    assert_eq!(v["debug"]["embeddingSpace"], "all-minilm-l6-v2@256");
    assert_eq!(v["results"][0]["title"], "Boiler");
    assert_eq!(steward::search::spaces::reconcile_all(&t.app).unwrap(), 0, "nothing left to re-embed");
}

#[tokio::test]
async fn knowledge_settings_validate_and_a_model_change_reembeds() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let k = t.get("/api/v1/settings/knowledge", &owner).await.json();
    assert_eq!(k["language"], "en");
    assert_eq!(k["embeddingModel"], Value::Null);
    assert_eq!(k["effectiveModel"], "all-minilm-l6-v2");
    assert_eq!(k["searchHistory"], json!({"retentionDays": 90, "maxEntries": 10000}));
    assert!(k["models"].as_array().unwrap().iter().any(|m| m["id"] == "multilingual-e5-small"), "{k}");
    for (body, field) in [
        (json!({"language": "klingon"}), "language"),
        (json!({"embeddingModel": "gpt-embed"}), "embeddingModel"),
        (json!({"searchHistory": {"retentionDays": 0}}), "searchHistory.retentionDays"),
        (json!({"searchHistory": {"maxEntries": 0}}), "searchHistory.maxEntries"),
        (json!({"bogus": 1}), "bogus"),
    ] {
        let r = t.put("/api/v1/settings/knowledge", &owner, body.clone()).await;
        r.assert_status(400);
        assert!(r.text().contains(field), "{body}: {}", r.text());
    }
    let token = t.token(&owner).await;
    t.put("/api/v1/settings/knowledge", &token, json!({"language": "de"})).await.assert_status(401);

    t.doc(&owner, "Opening hours", "We are open from nine to five on weekdays.", json!({})).await;
    t.drain();
    // the multilingual model for this workspace: queued, with its cost named before it runs
    let k = t.put("/api/v1/settings/knowledge", &owner, json!({"embeddingModel": "multilingual-e5-small"})).await;
    k.assert_status(200);
    let k = k.json();
    assert_eq!(k["index"]["state"], "reembedding", "{k}");
    let e5 = k["models"].as_array().unwrap().iter().find(|m| m["id"] == "multilingual-e5-small").unwrap().clone();
    assert!(e5["reembedEstimateSeconds"].as_f64().unwrap() > 0.0, "{e5}");
    t.drain();
    let k = t.get("/api/v1/settings/knowledge", &owner).await.json();
    assert_eq!(k["index"]["space"], "multilingual-e5-small@512", "{k}");
    let v = t.search(&owner, search_body("when are you open", "vector")).await;
    assert_eq!(v["results"][0]["title"], "Opening hours");
    // back to the default: re-embedded again
    t.put("/api/v1/settings/knowledge", &owner, json!({"embeddingModel": null})).await.assert_status(200);
    t.drain();
    assert_eq!(t.get("/api/v1/settings/knowledge", &owner).await.json()["index"]["space"], "all-minilm-l6-v2@256");
    let audit = t.get("/api/v1/audit-events?action=settings.knowledge.updated", &owner).await.json().to_string();
    assert!(audit.contains("multilingual-e5-small"), "{audit}");
}

#[tokio::test]
async fn search_history_is_compact_replays_current_text_and_keeps_its_retention() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let id = t.doc(&owner, "Returns", "Returns are accepted within thirty days of delivery.", json!({})).await;
    t.drain();
    let first = t.search(&owner, json!({"query": "returns within thirty days"})).await;
    let sid = first["searchId"].as_str().unwrap().to_string();
    // stored without the documents' text
    let stored: String = t
        .app
        .db
        .read(|c| Ok(c.query_row("SELECT results FROM searches WHERE id = ?1", [&sid], |r| r.get(0))?))
        .unwrap();
    assert!(!stored.contains("thirty") && !stored.contains("Returns"), "{stored}");
    let replay = t.get(&format!("/api/v1/document/search/history/{sid}"), &owner).await.json();
    assert_eq!(replay["results"][0]["chunkId"], first["results"][0]["chunkId"]);
    assert_eq!(replay["results"][0]["title"], "Returns");
    assert!(replay["results"][0]["snippet"].as_str().unwrap().contains("thirty"), "{replay}");
    assert!(replay["results"][0].get("note").is_none());
    let hist = t.get("/api/v1/document/search/history", &owner).await.json();
    assert_eq!(hist["searches"][0]["previewTopTitles"], json!(["Returns"]), "{hist}");

    // the document is edited: the replay reads its new text and says it changed
    t.put(
        &format!("/api/v1/document/{id}"),
        &owner,
        json!({"title": "Returns", "content": "Returns are accepted within sixty days of delivery."}),
    )
    .await
    .assert_status(202);
    t.drain();
    let replay = t.get(&format!("/api/v1/document/search/history/{sid}"), &owner).await.json();
    assert_eq!(replay["results"][0]["note"], "changed", "{replay}");
    assert!(replay["results"][0]["snippet"].as_str().unwrap().contains("sixty"), "{replay}");
    // and deleted
    t.delete(&format!("/api/v1/document/{id}"), &owner).await;
    let replay = t.get(&format!("/api/v1/document/search/history/{sid}"), &owner).await.json();
    assert_eq!(replay["results"][0]["note"], "deleted", "{replay}");
    assert_eq!(replay["resultCount"], 1);

    // retention: a day and three entries
    t.put("/api/v1/settings/knowledge", &owner, json!({"searchHistory": {"retentionDays": 1, "maxEntries": 3}}))
        .await
        .assert_status(200);
    // from noon UTC, so "tomorrow" (the cleanup runs at 00:05) is a day ahead whatever the real
    // time of day
    let day = 86_400_000;
    let now = t.clock.now_ms();
    t.clock.advance_ms((now / day + 1) * day + day / 2 - now);
    for q in ["a", "b"] {
        t.search(&owner, json!({"query": format!("old search {q}")})).await;
    }
    t.clock.advance_ms(2 * 24 * 3600 * 1000);
    for q in ["c", "d", "e", "f"] {
        t.search(&owner, json!({"query": format!("new search {q}")})).await;
    }
    steward::search::history::schedule_today(&t.app).unwrap();
    t.run_jobs();
    let hist = t.get("/api/v1/document/search/history", &owner).await.json();
    let queries: Vec<&str> =
        hist["searches"].as_array().unwrap().iter().map(|s| s["query"].as_str().unwrap()).collect();
    assert_eq!(queries, vec!["new search f", "new search e", "new search d"], "{hist}");
    assert_eq!(hist["total"], 3);
    // tomorrow's run is queued
    t.clock.advance_ms(24 * 3600 * 1000);
    t.search(&owner, json!({"query": "one more"})).await;
    assert_eq!(t.run_jobs(), 1, "the next day's cleanup ran");
    assert_eq!(t.get("/api/v1/document/search/history", &owner).await.json()["total"], 3);
}

#[tokio::test]
async fn german_french_and_spanish_workspaces_search_in_their_language_and_across_languages() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let cases = [
        (
            "de",
            [
                (
                    "Rücksendungen",
                    "Artikel können innerhalb von dreißig Tagen nach der Lieferung zurückgeschickt werden.",
                ),
                ("Öffnungszeiten", "Unser Geschäft ist werktags von neun bis siebzehn Uhr geöffnet."),
                ("Versand", "Der Versand ins Ausland dauert fünf bis sieben Werktage."),
            ],
            "Innerhalb wie vieler Tage kann ich Artikel zurückschicken?",
            "Rücksendungen",
            "When is the shop open?",
            "Öffnungszeiten",
        ),
        (
            "fr",
            [
                ("Retours", "Les articles peuvent être retournés dans les trente jours suivant la livraison."),
                ("Horaires", "Notre magasin est ouvert en semaine de neuf heures à dix-sept heures."),
                ("Livraison", "La livraison à l'étranger prend de cinq à sept jours ouvrables."),
            ],
            "Combien de temps pour livrer un colis à l'étranger ?",
            "Livraison",
            "How long can I return an item?",
            "Retours",
        ),
        (
            "es",
            [
                (
                    "Devoluciones",
                    "Los artículos se pueden devolver dentro de los treinta días posteriores a la entrega.",
                ),
                ("Horario", "Nuestra tienda abre de lunes a viernes de nueve a cinco."),
                ("Envíos", "Los envíos internacionales tardan de cinco a siete días hábiles."),
            ],
            "¿A qué hora abre la tienda?",
            "Horario",
            "How long does international shipping take?",
            "Envíos",
        ),
    ];
    for (lang, docs, query, want, cross, cross_want) in cases {
        let ws = t.workspace(&owner, &format!("Shop {lang}")).await;
        let h = [("x-workspace-id", ws.as_str())];
        let r = t
            .send(axum::http::Method::PUT, "/api/v1/settings/knowledge", &owner, Some(json!({"language": lang})), &h)
            .await;
        r.assert_status(200);
        assert_eq!(r.json()["effectiveModel"], "multilingual-e5-small", "{lang}: {}", r.text());
        for (title, content) in docs {
            t.send(
                axum::http::Method::POST,
                "/api/v1/document/",
                &owner,
                Some(json!({"title": title, "content": content})),
                &h,
            )
            .await
            .assert_status(202);
        }
        t.drain();
        let k = t.send(axum::http::Method::GET, "/api/v1/settings/knowledge", &owner, None, &h).await.json();
        assert_eq!(k["index"]["space"], "multilingual-e5-small@512", "{lang}: {k}");
        for (q, expected, mode) in [(query, want, "hybrid"), (query, want, "bm25"), (cross, cross_want, "vector")] {
            let v = t
                .send(axum::http::Method::POST, "/api/v1/document/search", &owner, Some(search_body(q, mode)), &h)
                .await
                .json();
            assert_eq!(v["results"][0]["title"], expected, "{lang} {mode}: {q} → {v}");
        }
    }
}

/// `steward bench retrieval` on a small collection of our own, through the real binary: every mode
/// beside the plain reference, and reranking through the `rerank` slot on an OpenAI-compatible
/// server (here a scripted one that knows which passage is right).
#[test]
fn the_retrieval_benchmark_scores_any_collection_and_a_reranker() {
    use crate::fake_llm::{FakeProvider, openai_stream};
    let dir = tempfile::tempdir().unwrap();
    let docs = json!([
        {"id": "d1", "title": "Shipping", "text": "Standard shipping takes three to five working days."},
        {"id": "d2", "title": "Express shipping", "text": "Express shipping arrives the next working day (zebra)."},
        {"id": "d3", "title": "Returns", "text": "Returns are accepted within thirty days of delivery."},
        {"id": "d4", "title": "Refunds", "text": "Refunds reach your card within five days of the return (zebra)."},
        {"id": "d5", "title": "Opening hours", "text": "The shop is open from nine to five on weekdays."},
        {"id": "d6", "title": "Gift cards", "text": "Gift cards never expire and can be used online."}
    ]);
    let queries =
        json!([{"id": "q1", "text": "how fast is shipping"}, {"id": "q2", "text": "when do I get my money back"}]);
    let qrels = json!([{"queryId": "q1", "docId": "d2", "rel": 1}, {"queryId": "q2", "docId": "d4", "rel": 2}]);
    for (f, v) in [("docs.json", docs), ("queries.json", queries), ("qrels.json", qrels)] {
        std::fs::write(dir.path().join(f), v.to_string()).unwrap();
    }
    // the reranker: 10 for a passage with the marker, 0 for the others
    let fake = FakeProvider::start(|r| {
        let user =
            r.body["messages"].as_array().and_then(|m| m.last()).map(|m| m["content"].to_string()).unwrap_or_default();
        let scores: Vec<u32> = user.split("\\n[").skip(1).map(|p| if p.contains("zebra") { 10 } else { 0 }).collect();
        openai_stream(&json!({"scores": scores}).to_string())
    });
    let out = dir.path().join("report.json");
    let run = std::process::Command::new(crate::e2e::BIN)
        .args(["bench", "retrieval", "--collection", dir.path().to_str().unwrap(), "--rerank-model", "judge"])
        .args(["--rerank-base-url", &format!("{}/v1", fake.url), "--out", out.to_str().unwrap()])
        .env("OPENAI_COMPATIBLE_API_KEY", "test-key")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let r: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!((r["documents"].as_u64(), r["judgedQueries"].as_u64()), (Some(6), Some(2)), "{r}");
    let modes: Vec<&str> = r["modes"].as_array().unwrap().iter().map(|m| m["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, vec!["bm25", "vector", "hybrid"]);
    for m in r["modes"].as_array().unwrap() {
        for k in ["ndcg10", "ndcg10Odd", "ndcg10Even", "recall100", "mrr10", "p50Ms", "serverP50Ms"] {
            assert!(m[k].as_f64().is_some(), "{k} in {m}");
        }
    }
    for k in ["bm25", "vectors", "rrf"] {
        assert!(r["reference"][k]["ndcg10"].as_f64().is_some(), "{r}");
    }
    assert!(r["pairedVsReference"]["hybridVsPlainRrf"]["difference"].as_f64().is_some());
    assert_eq!(r["rerank"]["reranked"]["ndcg10"], 1.0, "the reranker put the marked passages first: {}", r["rerank"]);
    assert!(fake.requests.lock().iter().any(|q| q.body.to_string().contains("Score how well each passage")));
}
