//! Agent bundles in the dashboard, in a real browser against the real binary: "Export bundle" on
//! an agent's page downloads its bundle (nothing secret in it), "Import bundle" on the agents list
//! turns that file into a new agent and shows the import's state and what did not come across,
//! each with what to do; a file that is not a bundle is explained. Every state is axe-checked.

use reqwest::Method;
use serde_json::{Value, json};

use crate::browser::{check_page, click, shots, sign_in_as_root};
use crate::e2e::{Api, Server, bootstrap};
use crate::webdriver::Driver;

const MCP_URL: &str = "https://mcp.example.com/secret-path-91ab";
const CONTACT: &str = "escalate-4411@example.com";

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_is_exported_and_imported_through_the_pages_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = bootstrap(&data);
    let key = "5f4dcc3b5aa765d61d8327deb882cf995f4dcc3b5aa765d61d8327deb882cf99";
    let server = Server::start(&data, &[("CONNECTOR_ENCRYPTION_KEY", key)]);
    let base = server.base.clone();
    let api = Api::new(&base, &token);
    let agent = api
        .call(
            Method::POST,
            "/api/v1/agents",
            Some(json!({"name": "Support desk", "customInstruction": "Answer briefly.",
                "contactRequestsEnabled": true, "contactRequestDelivery": {"recipientEmails": [CONTACT]},
                "surfaceSettings": {"anonymousChat": {"enabled": true}}})),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let skills = format!("/api/v1/agents/{agent}/skills");
    api.call(Method::POST, &skills, Some(json!({"name": "crm", "capability": "mcp_tool", "invocationMode": "agent_selectable",
        "target": {"kind": "mcp_connection", "id": "conn-1"}, "config": {"toolName": "lookup", "serverUrl": MCP_URL, "credential": "tok-5566"}})))
        .await;
    api.call(
        Method::POST,
        &format!("/api/v1/agents/{agent}/directives"),
        Some(json!({"name": "lookups",
        "action": "Look customers up with #crm.", "binding": {"kind": "skill", "skillName": "crm"}})),
    )
    .await;
    let files = dir.path().join("files");
    std::fs::create_dir_all(&files).unwrap();

    let driver = Driver::start();
    let b = driver.session().await;
    let mut problems = Vec::new();
    sign_in_as_root(&b, &base).await;

    // ---- export from the agent's page: the file is the API's bundle
    b.go(&format!("{base}/app/agents/{agent}")).await;
    b.tid("bundle-export").await;
    check_page(&b, "agent-bundle-export", &mut problems).await;
    // the page hands the file to the browser as a blob: keep a hold of it to read it back
    b.js(
        "window.__blobs = []; const make = URL.createObjectURL.bind(URL);
         URL.createObjectURL = (blob) => { window.__blobs.push(blob); return make(blob); };",
        json!([]),
    )
    .await;
    click(&b, "bundle-export").await;
    let name = b.until("document.querySelector('[data-testid=bundle-download]')?.getAttribute('download')").await;
    assert_eq!(name, "support-desk.bundle.json");
    let text = b.js_async("return await window.__blobs[window.__blobs.length - 1].text();", json!([])).await;
    let text = text.as_str().unwrap().to_string();
    let bundle: Value = serde_json::from_str(&text).unwrap();
    let from_api = api.call(Method::GET, &format!("/api/v1/agents/{agent}/bundle"), None).await;
    assert_eq!(bundle, from_api, "the download is the bundle");
    for secret in [MCP_URL, "tok-5566", CONTACT, agent.as_str()] {
        assert!(!text.contains(secret), "{secret} in the downloaded bundle");
    }
    let file = files.join("support-desk.bundle.json");
    std::fs::write(&file, &text).unwrap();

    // ---- import it on the agents list
    b.go(&format!("{base}/app/agents")).await;
    b.tid("bundle-import").await;
    check_page(&b, "agents-bundle-import", &mut problems).await;
    b.tid("bundle-import-input").await.send(&file.display().to_string()).await;
    let status = b.until("document.querySelector('[data-testid=bundle-import-result]')?.dataset.status").await;
    assert_eq!(status, "applied");
    assert_eq!(b.tid("bundle-import-status").await.text().await, "applied");
    let items = b
        .js(
            "return Array.from(document.querySelectorAll('[data-testid=bundle-unresolved]'))
               .map(li => [li.dataset.kind, li.querySelector('[data-testid=bundle-todo]').textContent]);",
            json!([]),
        )
        .await;
    let items: Vec<(String, String)> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_str().unwrap().to_string(), p[1].as_str().unwrap().to_string()))
        .collect();
    let todo = |kind: &str| items.iter().find(|(k, _)| k == kind).map(|(_, t)| t.clone()).unwrap_or_default();
    assert!(todo("mcp_connection_unbound").contains("Reconnect the MCP server"), "{items:?}");
    assert!(todo("surface_credential_unbound").contains("Turn the surface back on"), "{items:?}");
    assert!(todo("contact_delivery_unbound").contains("receives contact requests"), "{items:?}");
    assert_eq!(items.len(), 3, "{items:?}");
    check_page(&b, "agents-bundle-imported", &mut problems).await;
    b.screenshot(&shots().join("agents-bundle-imported.png")).await;
    // the list shows the new agent; its page opens from the result
    b.until("document.querySelectorAll('[data-testid=agent-row]').length === 3").await;
    click(&b, "bundle-import-agent").await;
    b.until("document.querySelector('[data-testid=agent-page]') && document.getElementById('page-title').textContent === 'Support desk' && location.pathname !== '/app/agents'").await;
    let imported = b.js("return location.pathname.split('/')[3]", json!([])).await;
    let imported = imported.as_str().unwrap().to_string();
    assert_ne!(imported, agent);
    let sk = api.call(Method::GET, &format!("/api/v1/agents/{imported}/skills"), None).await;
    assert_eq!(sk["skills"][0]["enabled"], false, "the MCP skill came across disabled");

    // ---- a file that is not a bundle is explained; an unread version is the server's refusal
    let bad = files.join("notes.json");
    std::fs::write(&bad, "not json at all").unwrap();
    b.go(&format!("{base}/app/agents")).await;
    b.tid("bundle-import-input").await.send(&bad.display().to_string()).await;
    let msg = b.until("document.querySelector('[data-testid=bundle-import-error] [role=alert]')?.textContent").await;
    assert!(msg.as_str().unwrap().contains("is not a JSON bundle"), "{msg}");
    let mut future = bundle.clone();
    future["bundleVersion"] = json!(2);
    let v2 = files.join("future.bundle.json");
    std::fs::write(&v2, future.to_string()).unwrap();
    b.tid("bundle-import-input").await.send(&v2.display().to_string()).await;
    let msg = b
        .until("(t => t && t.includes('bundleVersion 2') && t)(document.querySelector('[data-testid=bundle-import-error] [role=alert]')?.textContent)")
        .await;
    assert!(msg.as_str().unwrap().contains("not supported"), "{msg}");
    check_page(&b, "agents-bundle-refused", &mut problems).await;
    assert_eq!(api.call(Method::GET, "/api/v1/agents", None).await["agents"].as_array().unwrap().len(), 3);

    assert!(problems.is_empty(), "{problems:#?}");
    b.quit().await;
    assert!(server.terminate().success());
}
