//! Several nodes on one PostgreSQL database (docs/scale-out.md): two real `steward serve`
//! processes started together, and nodes made in this process or a child process for the job
//! queue's guarantees. Always on the real PostgreSQL test server, whatever backend the rest of the
//! suite runs on.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use reqwest::Method;
use serde_json::{Value, json};
use steward::app::{App, Options};
use steward::clock::SystemClock;
use steward::jobs::{self, JobCtx, JobPayload, Jobs, NewJob, Outcome};

use crate::e2e::{Api, Server, bootstrap_with};
use crate::pg_server::PgServer;

fn pg(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap()
}

/// Reads `GET path` on `base` until `done` says yes; the server answers long polls, so this loop
/// turns once per change, not per tick. Fails after 60 s.
async fn until(api: &Api, path: &str, mut done: impl FnMut(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v = api.call(Method::GET, path, None).await;
        if done(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "{path} never became what was expected: {v}");
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn two_nodes_migrate_once_and_share_documents_search_and_streams() {
    let url = PgServer::get().fresh_db();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    // visitors' sessions are signed with one secret on every node (docs/scale-out.md)
    let secret = "a-public-session-secret-shared-by-every-node".to_string();
    let env = [("STEWARD_DATABASE_URL", url.as_str()), ("STEWARD_PUBLIC_SESSION_SECRET", secret.as_str())];
    // two nodes start together on an empty database
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| Server::start(&dirs[0].path().join("data"), &env));
        let b = s.spawn(|| Server::start(&dirs[1].path().join("data"), &env));
        (a.join().unwrap(), b.join().unwrap())
    });
    // (the synchronous client on a thread of its own, outside this test's runtime)
    let versions: Vec<i64> = std::thread::scope(|s| {
        s.spawn(|| {
            pg(&url)
                .query("SELECT version::bigint FROM schema_migrations ORDER BY version", &[])
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect()
        })
        .join()
        .unwrap()
    });
    let expected: Vec<i64> = steward::storage::postgres::MIGRATIONS.iter().map(|m| i64::from(m.version)).collect();
    assert_eq!(versions, expected, "each migration applied once");

    // the owner is made with the command, on a third data directory: the database is shared
    let token = bootstrap_with(&dirs[2].path().join("data"), &env);
    let (on_a, on_b) = (Api::new(&a.base, &token), Api::new(&b.base, &token));
    let http = reqwest::Client::new();
    for node in [&a, &b] {
        let r = http.get(format!("{}/readyz", node.base)).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }

    // a document added on A is processed (by whichever node's worker claims it) and found on B
    let doc = on_a
        .call(
            Method::POST,
            "/api/v1/document/",
            Some(json!({"title": "Harbour ferry timetable",
                        "content": "The harbour ferry to Lindholm leaves every forty minutes from pier seven."})),
        )
        .await;
    let id = doc["id"].as_str().unwrap().to_string();
    until(&on_b, &format!("/api/v1/document/{id}"), |d| d["status"] == "ready").await;
    let ready = until(&on_b, "/api/v1/document/progress?waitMs=30000", |p| p["idle"] == true).await;
    assert_eq!(ready["idle"], true);
    // B's indexes follow the database: once its lag is 0, the search finds the document
    let _ = until(&on_b, "/readyz", |_| true).await;
    let mut found = Value::Null;
    for _ in 0..600 {
        let r = on_b
            .call(
                Method::POST,
                "/api/v1/document/search",
                Some(json!({"query": "ferry to Lindholm", "includeDebug": true})),
            )
            .await;
        if r["results"].as_array().is_some_and(|x| !x.is_empty()) {
            found = r;
            break;
        }
        // not yet applied: the answer says how far behind B is
        assert!(r["debug"]["indexLag"].as_i64().is_some(), "{r}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(found["results"][0]["documentId"], id.as_str(), "{found}");
    assert_eq!(found["debug"]["indexLag"], 0, "{found}");
    let readyz: Value = http.get(format!("{}/readyz", b.base)).send().await.unwrap().json().await.unwrap();
    assert_eq!(readyz["indexLag"], 0, "{readyz}");

    // a dashboard session signed in on B works on A
    let login = http
        .post(format!("{}/api/v1/auth/login", b.base))
        .json(&json!({"email": "root@example.com", "password": "root-password"}))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 200);
    let cookie = login.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string();
    let general: Value = http
        .put(format!("{}/api/v1/settings/general", a.base))
        .header("cookie", &cookie)
        .header("sec-fetch-site", "same-origin")
        .json(&json!({"anonymousChatEnabled": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();

    // a visitor's stream on B gets the operator's reply sent on A
    let anon = general["anonymousChatToken"].as_str().unwrap().to_string();
    let session: Value = http
        .post(format!("{}/api/v1/public/chat/{anon}/sessions", b.base))
        .json(&json!({"channel": "anonymous_link"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let visitor = session["publicSessionToken"].as_str().unwrap().to_string();
    let said: Value = http
        .post(format!("{}/api/v1/public/chat/{anon}", b.base))
        .header("x-service-public-session", &visitor)
        .json(&json!({"message": "When does the ferry leave?"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let cid = said["conversationId"].as_str().unwrap().to_string();
    let mut stream = http
        .get(format!("{}/api/v1/public/chat/{anon}/events/{cid}", b.base))
        .header("x-service-public-session", &visitor)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let mut seen = String::new();
    while !seen.contains("event: ready") {
        seen.push_str(&String::from_utf8_lossy(&stream.chunk().await.unwrap().unwrap()));
    }
    let operator = async |method: Method, path: String, body: Value| -> Value {
        let r = http
            .request(method, format!("{}{path}", a.base))
            .header("cookie", &cookie)
            .header("sec-fetch-site", "same-origin")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.status());
        r.json().await.unwrap()
    };
    operator(Method::POST, format!("/api/v1/conversations/{cid}/takeover"), json!({})).await;
    let h = on_a.call(Method::GET, &format!("/api/v1/history/chat/{cid}"), None).await;
    let version = h["ownership"]["version"].as_i64().unwrap();
    operator(
        Method::POST,
        format!("/api/v1/conversations/{cid}/reply"),
        json!({"message": "A person here: every forty minutes.", "expectedVersion": version}),
    )
    .await;
    let waited = tokio::time::timeout(Duration::from_secs(30), async {
        while !seen.contains("event: message.created") {
            seen.push_str(&String::from_utf8_lossy(&stream.chunk().await.unwrap().unwrap()));
        }
    })
    .await;
    assert!(waited.is_ok(), "B's stream did not hear A's reply: {seen}");
    assert!(seen.contains(&cid), "{seen}");
    // and B serves the reply
    let history: Value = http
        .get(format!("{}/api/v1/public/chat/{anon}/history/{cid}", b.base))
        .header("x-service-public-session", &visitor)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(history.to_string().contains("every forty minutes"), "{history}");

    // a visitor's daily allowance holds across the nodes (counted in the database): two messages
    // a day, sent through A, then B, then A
    operator(Method::PUT, "/api/v1/settings/general".into(), json!({"publicChatVisitorMessagesPerDay": 2})).await;
    let say = async |base: &str, text: &str| {
        let r = http
            .post(format!("{base}/api/v1/public/chat/{anon}"))
            .header("x-service-public-session", &visitor)
            .json(&json!({"message": text, "conversationId": cid}))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json::<Value>().await.unwrap())
    };
    assert_eq!(say(&a.base, "one").await.0, 200);
    assert_eq!(say(&b.base, "two").await.0, 200);
    let (status, refused) = say(&a.base, "three").await;
    assert_eq!(status, 429, "A let a visitor past the day's allowance used on B: {refused}");
    assert_eq!(refused["error"]["details"]["windowSeconds"], 86_400, "the day's allowance refused it: {refused}");
    // so do the sign-in limits (10 failures per email in 15 minutes): spread over both nodes
    let sign_in = async |base: &str| {
        http.post(format!("{base}/api/v1/auth/login"))
            .json(&json!({"email": "guess@example.com", "password": "not-the-password"}))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    for i in 0..10 {
        assert_eq!(sign_in(if i % 2 == 0 { &a.base } else { &b.base }).await, 401);
    }
    assert_eq!(sign_in(&a.base).await, 429, "the eleventh guess, on A, after five on each node");
    assert_eq!(sign_in(&b.base).await, 429);

    // authentications are cached on each node until an identity change is announced: a token
    // revoked on A is refused on A at once and on B once A's announcement arrives
    let made = operator(Method::POST, "/api/v1/account/tokens".into(), json!({"name": "nodes"})).await;
    let (tid, secret) = (made["token"]["id"].as_str().unwrap(), made["secret"].as_str().unwrap());
    // (the credential: the token, or the dashboard session's cookie)
    let status = async |base: &str, token: bool| {
        let r = http.get(format!("{base}/api/v1/workspaces"));
        let r = if token { r.bearer_auth(secret) } else { r.header("cookie", &cookie) };
        r.send().await.unwrap().status().as_u16()
    };
    let refused_soon = async |base: &str, token: bool, what: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while status(base, token).await != 401 {
            assert!(Instant::now() < deadline, "{what}");
            tokio::task::yield_now().await;
        }
    };
    let from_dashboard = |method: Method, url: String| {
        http.request(method, url).header("cookie", &cookie).header("sec-fetch-site", "same-origin")
    };
    for _ in 0..3 {
        assert_eq!(status(&a.base, true).await, 200);
        assert_eq!(status(&b.base, true).await, 200);
    }
    let revoked =
        from_dashboard(Method::DELETE, format!("{}/api/v1/account/tokens/{tid}", a.base)).send().await.unwrap();
    assert_eq!(revoked.status(), 204);
    assert_eq!(status(&a.base, true).await, 401, "the node that revoked it refuses it at once");
    refused_soon(&b.base, true, "B kept accepting a token revoked on A").await;
    // signing out on B ends the session on A too
    let out = from_dashboard(Method::POST, format!("{}/api/v1/auth/logout", b.base)).send().await.unwrap();
    assert!(out.status().is_success(), "{}", out.status());
    refused_soon(&a.base, false, "A kept a session signed out on B").await;
    assert!(a.terminate().success());
    assert!(b.terminate().success());
}

// ---- the job queue across nodes ----

static RUNS: std::sync::LazyLock<Mutex<HashMap<i64, u32>>> = std::sync::LazyLock::new(Default::default);
static RAN_HERE: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

fn count(ctx: &JobCtx) {
    *RUNS.lock().entry(ctx.id).or_default() += 1;
}

fn on_node_0(_: &App, ctx: &JobCtx, _: &JobPayload) -> Outcome {
    count(ctx);
    RAN_HERE[0].fetch_add(1, Ordering::SeqCst);
    Outcome::Done
}

fn on_node_1(_: &App, ctx: &JobCtx, _: &JobPayload) -> Outcome {
    count(ctx);
    RAN_HERE[1].fetch_add(1, Ordering::SeqCst);
    Outcome::Done
}

/// A node of this process on `url`, with its own data directory and `kind` run by `handler`.
fn node(url: &str, dir: &std::path::Path, kind: &'static str, handler: jobs::Handler, lease: Duration) -> Arc<App> {
    let mut config = crate::support::test_config(dir);
    config.database = Some(steward::config::Secret::new(url.to_string()));
    config.job_lease = lease;
    App::build(
        config,
        Options { clock: Arc::new(SystemClock), extra_handlers: vec![(kind, handler)], lock_data_dir: true },
    )
    .unwrap()
}

fn enqueue(app: &App, kind: &str, n: usize) {
    for i in 0..n {
        jobs::enqueue(app, NewJob::new(kind, json!({"i": i}))).unwrap();
    }
}

#[test]
fn a_thousand_jobs_queued_on_two_nodes_each_run_exactly_once() {
    const KIND: &str = "test.nodes.count";
    let url = PgServer::get().fresh_db();
    let (d0, d1) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let n0 = node(&url, d0.path(), KIND, on_node_0, Duration::from_secs(30));
    let n1 = node(&url, d1.path(), KIND, on_node_1, Duration::from_secs(30));
    Jobs::start(&n0, 4);
    Jobs::start(&n1, 4);
    std::thread::scope(|s| {
        s.spawn(|| enqueue(&n0, KIND, 500));
        s.spawn(|| enqueue(&n1, KIND, 500));
    });
    assert!(n0.jobs.wait_idle(&n0, Duration::from_secs(120)), "node 0 never idle");
    assert!(n1.jobs.wait_idle(&n1, Duration::from_secs(120)), "node 1 never idle");
    let runs = RUNS.lock().clone();
    let ids: Vec<i64> = pg(&url)
        .query("SELECT id FROM jobs WHERE kind = $1 AND state = 'done' AND attempts = 1", &[&KIND])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ids.len(), 1000, "every job done on its first attempt");
    assert!(ids.iter().all(|id| runs.get(id) == Some(&1)), "each job ran exactly once");
    assert_eq!(runs.values().sum::<u32>(), 1000);
    let (r0, r1) = (RAN_HERE[0].load(Ordering::SeqCst), RAN_HERE[1].load(Ordering::SeqCst));
    assert!(r0 > 0 && r1 > 0, "both nodes worked: {r0} and {r1}");
    n0.shutdown();
    n1.shutdown();
}

/// The child side of [`a_killed_node_loses_its_leases_and_the_other_completes_them`]: a node
/// whose handler never returns (a node that hangs, then is killed). Run only by that test.
#[test]
#[ignore = "a child process of a_killed_node_loses_its_leases_and_the_other_completes_them"]
fn node_that_hangs() {
    let Ok(url) = std::env::var("STEWARD_TEST_NODE_URL") else { return };
    let dir = tempfile::tempdir().unwrap();
    fn hang(_: &App, _: &JobCtx, _: &JobPayload) -> Outcome {
        loop {
            std::thread::park();
        }
    }
    let app = node(&url, dir.path(), "test.nodes.lease", hang, Duration::from_secs(3));
    Jobs::start(&app, 4);
    loop {
        std::thread::park();
    }
}

static LEASED: std::sync::LazyLock<Mutex<HashMap<i64, u32>>> = std::sync::LazyLock::new(Default::default);

fn complete(_: &App, ctx: &JobCtx, _: &JobPayload) -> Outcome {
    *LEASED.lock().entry(ctx.id).or_default() += 1;
    Outcome::Done
}

#[test]
fn a_killed_node_loses_its_leases_and_the_other_completes_them() {
    const KIND: &str = "test.nodes.lease";
    let url = PgServer::get().fresh_db();
    let dir = tempfile::tempdir().unwrap();
    // this node queues the jobs; it runs none until the other has been killed
    let survivor = node(&url, dir.path(), KIND, complete, Duration::from_secs(3));
    enqueue(&survivor, KIND, 12);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "nodes::node_that_hangs", "--ignored", "--nocapture", "--test-threads", "1"])
        .env("STEWARD_TEST_NODE_URL", &url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut c = pg(&url);
    let leased = |c: &mut postgres::Client| -> Vec<i64> {
        c.query("SELECT id FROM jobs WHERE kind = $1 AND state = 'running' ORDER BY id", &[&KIND])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    };
    // the child's four workers each hold a lease
    let deadline = Instant::now() + Duration::from_secs(60);
    let held = loop {
        let held = leased(&mut c);
        if held.len() == 4 {
            break held;
        }
        assert!(Instant::now() < deadline, "the child node never held four leases: {held:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    Jobs::start(&survivor, 2);
    assert!(survivor.jobs.wait_idle(&survivor, Duration::from_secs(60)), "the survivor never finished");
    let runs = LEASED.lock().clone();
    assert_eq!(runs.len(), 12, "{runs:?}");
    assert!(runs.values().all(|n| *n == 1), "none doubled: {runs:?}");
    let attempts: HashMap<i64, i64> = c
        .query("SELECT id, attempts FROM jobs WHERE kind = $1 AND state = 'done'", &[&KIND])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(attempts.len(), 12);
    for id in &held {
        assert_eq!(attempts[id], 2, "job {id}: the killed node's attempt counts, then the survivor's");
    }
    assert_eq!(attempts.values().filter(|a| **a == 1).count(), 8);
    survivor.shutdown();
}
