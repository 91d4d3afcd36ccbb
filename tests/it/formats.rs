//! Import: every supported format, and every kind of bad input, through the real upload route and
//! the real child-process parser.

use serde_json::{Value, json};

use crate::fixtures;
use crate::support::{Auth, TestApp};

async fn upload_and_process(t: &TestApp, auth: &Auth, name: &str, bytes: &[u8]) -> Value {
    let r = t.upload(auth, name, bytes, &[]).await;
    r.assert_status(202);
    let d = r.json();
    assert_eq!(d["status"], "queued");
    assert_eq!(d["sourceKind"], "uploaded_file");
    t.drain();
    t.send(
        axum::http::Method::GET,
        &format!("/api/v1/document/{}?includeChunks=true", d["id"].as_str().unwrap()),
        auth,
        None,
        &[],
    )
    .await
    .json()
}

#[tokio::test]
async fn each_format_is_extracted_with_its_structure() {
    let t = TestApp::new();
    let owner = t.owner().await;
    t.put(
        "/api/v1/settings/ingestion",
        &owner,
        json!({"chunkingStrategy": "structured_semantic", "structuredMaxChunkSize": 60}),
    )
    .await
    .assert_status(200);

    // PDF: text by page
    let d = upload_and_process(
        &t,
        &owner,
        "manual.pdf",
        &fixtures::pdf(&["The ornithopter manual, page one.", "Landing gear maintenance (page two)."]),
    )
    .await;
    assert_eq!(d["status"], "ready", "{d}");
    assert_eq!(d["detectedFormat"], "pdf");
    assert_eq!(d["sourceMimeType"], "application/pdf");
    assert_eq!(d["title"], "manual");
    assert!(d["content"].as_str().unwrap().contains("ornithopter"), "{d}");
    let pages: Vec<i64> = d["chunks"].as_array().unwrap().iter().map(|c| c["page"].as_i64().unwrap()).collect();
    assert_eq!(pages, vec![1, 2]);
    assert_eq!(t.titles_bm25(&owner, "landing gear").await, vec!["manual"]);

    // DOCX: headings and tables become Markdown
    let d = upload_and_process(
        &t,
        &owner,
        "policy.docx",
        &fixtures::docx("Returns", &["Items can be returned within 14 days."], &[&["Item", "Days"], &["Shoes", "30"]]),
    )
    .await;
    assert_eq!(d["status"], "ready", "{d}");
    let content = d["content"].as_str().unwrap();
    assert!(
        content.contains("# Returns") && content.contains("| Item | Days |") && content.contains("| Shoes | 30 |"),
        "{content}"
    );
    assert!(d["chunks"].as_array().unwrap().iter().all(|c| c["headingPath"] == "Returns"));

    // XLSX: each sheet a table with its header row repeated in every chunk
    let mut rows = vec![vec!["Product".to_string(), "Price".to_string(), "Notes".to_string()]];
    for i in 0..40 {
        rows.push(vec![format!("widget-{i}"), format!("{}", 10 + i), format!("a useful note about widget number {i}")]);
    }
    let wb = fixtures::xlsx(&[
        ("Prices", rows),
        ("Contacts", vec![vec!["Name".into(), "Email".into()], vec!["Ada".into(), "ada@example.com".into()]]),
    ]);
    let d = upload_and_process(&t, &owner, "catalog.xlsx", &wb).await;
    assert_eq!(d["status"], "ready", "{d}");
    let chunks = d["chunks"].as_array().unwrap();
    let price_chunks: Vec<&Value> = chunks.iter().filter(|c| c["sheet"] == "Prices").collect();
    assert!(price_chunks.len() > 2, "{chunks:?}");
    assert!(price_chunks.iter().all(|c| c["kind"] == "table"));
    let detail = t.document(&owner, d["id"].as_str().unwrap()).await;
    assert!(detail["content"].as_str().unwrap().contains("## Contacts"));
    assert!(chunks.iter().any(|c| c["sheet"] == "Contacts"));
    let s = t.search(&owner, json!({"query": "widget-33", "mode": "bm25"})).await;
    let snippet = s["results"][0]["snippet"].as_str().unwrap();
    assert!(snippet.contains("Product") && snippet.contains("Price"), "the header travels with the rows: {snippet}");

    // Markdown, plain text, source code
    let d = upload_and_process(
        &t,
        &owner,
        "notes.md",
        b"# Setup\n\nRun the installer.\n\n```bash\n./install.sh --prefix /opt\n```\n",
    )
    .await;
    assert_eq!((d["status"].as_str(), d["detectedFormat"].as_str()), (Some("ready"), Some("markdown")));
    assert!(d["chunks"].as_array().unwrap().iter().any(|c| c["kind"] == "code"));
    let d = upload_and_process(&t, &owner, "readme.txt", b"Plain words about tea.").await;
    assert_eq!((d["status"].as_str(), d["detectedFormat"].as_str()), (Some("ready"), Some("text")));
    let mut py = String::new();
    for i in 0..20 {
        py.push_str(&format!("def handler_{i}(event):\n    value = event['x'] + {i}\n    return value * 2\n\n\n"));
    }
    let d = upload_and_process(&t, &owner, "handlers.py", py.as_bytes()).await;
    assert_eq!(d["detectedFormat"], "code:python");
    let chunks = d["chunks"].as_array().unwrap();
    assert!(
        chunks.len() > 1
            && chunks.iter().all(|c| c["kind"] == "code" && c["contentPreview"].as_str().unwrap().starts_with("def ")),
        "{chunks:?}"
    );

    // the original is kept: reprocessing an upload extracts it again
    let pdf_id = t.get("/api/v1/document/?limit=50", &owner).await.json()["documents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["title"] == "manual")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    t.post(&format!("/api/v1/document/{pdf_id}/reprocess"), &owner, json!({})).await.assert_status(202);
    t.drain();
    let d = t.document(&owner, &pdf_id).await;
    assert_eq!((d["status"].as_str(), d["revision"].as_i64()), (Some("ready"), Some(2)));
}

#[tokio::test]
async fn bad_files_fail_alone_with_reasons_a_person_understands() {
    let t = TestApp::new();
    let owner = t.owner().await;
    let good = t.doc(&owner, "Survivor", "This document must stay searchable through everything.", json!({})).await;

    // refused at upload (4xx)
    let r = t.upload(&owner, "empty.txt", b"", &[]).await;
    r.assert_status(400);
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("empty"));
    let garbage: Vec<u8> = (0..20_000u32).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8).collect();
    let r = t.upload(&owner, "notes.txt", &garbage, &[]).await;
    r.assert_status(415);
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("binary"));
    t.upload(&owner, "fake.pdf", b"this is not a pdf", &[]).await.assert_status(415);
    t.upload(&owner, "archive.zip", &fixtures::docx("x", &[], &[])[..30], &[]).await;
    t.upload(&owner, "old.doc", b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1rest", &[]).await.assert_status(415);
    let r = t.upload(&owner, "x.txt", b"hello", &[("colour", "red")]).await;
    r.assert_status(400);

    // accepted, then failed with a reason
    let mut failing = vec![
        ("corrupt.pdf", b"%PDF-1.4\n1 0 obj << /Type /Catalog >> garbage garbage\n%%EOF".to_vec(), "cannot be read"),
        ("locked.pdf", fixtures::pdf_with(&["secret text"], true), "password-protected"),
        ("scan.pdf", fixtures::pdf(&[""]), "no text layer"),
        ("bomb.docx", fixtures::docx_bomb(), "zip bomb"),
        ("bomb.xlsx", fixtures::xlsx_bomb(), "zip bomb"),
    ];
    failing.push(("huge.txt", vec![b'x'; 10 * 1024 * 1024], "limit is 8 MB"));
    let mut ids = Vec::new();
    for (name, bytes, _) in &failing {
        let r = t.upload(&owner, name, bytes, &[]).await;
        r.assert_status(202);
        ids.push(r.json()["id"].as_str().unwrap().to_string());
    }
    t.drain();
    for ((name, _, reason), id) in failing.iter().zip(&ids) {
        let d = t.document(&owner, id).await;
        assert_eq!(d["status"], "failed", "{name}: {d}");
        let why = d["failureReason"].as_str().unwrap();
        assert!(why.contains(reason), "{name}: {why}");
    }

    // non-UTF-8 text is decoded, not refused
    let d = upload_and_process(&t, &owner, "latin1.txt", b"Caf\xe9 cr\xe8me br\xfbl\xe9e recipe").await;
    assert_eq!(d["status"], "ready");
    assert!(d["content"].as_str().unwrap().contains("Café crème brûlée"));

    // nothing else was lost
    assert_eq!(t.document(&owner, &good).await["status"], "ready");
    assert_eq!(t.titles_bm25(&owner, "survivor searchable").await, vec!["Survivor"]);
    t.get("/healthz", &Auth::None).await.assert_status(200);
}

#[tokio::test]
async fn uploads_have_a_size_limit_and_their_own_rate_limit() {
    let t = TestApp::with_config(|c| {
        c.upload_max_bytes = 1000;
        c.upload_limit.max = 3;
    });
    let owner = t.owner().await;
    let r = t.upload(&owner, "big.txt", &vec![b'a'; 5000], &[]).await;
    r.assert_status(413);
    assert_eq!(r.code(), "payload_too_large");
    assert_eq!(r.json()["error"]["details"]["limit"], 1000);
    // every attempt counts, the refused one included (the limit is checked before the body is read)
    for i in 0..2 {
        t.upload(&owner, &format!("f{i}.txt"), b"small file", &[]).await.assert_status(202);
    }
    let r = t.upload(&owner, "f4.txt", b"small file", &[]).await;
    r.assert_status(429);
    assert_eq!(r.code(), "rate_limit_exceeded");
    // the rest of the API is not affected by the upload limit
    t.doc(&owner, "Inline", "Still fine.", json!({})).await;
    t.clock.advance_secs(61);
    t.upload(&owner, "f5.txt", b"small file", &[("title", "Later"), ("metadata", "{\"k\": 1}")])
        .await
        .assert_status(202);
}
