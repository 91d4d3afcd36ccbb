//! The durable job queue: runs once, retries with backoff, goes dead, survives a crash, dedupes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::Duration;

use serde_json::{Value, json};
use steward::app::App;
use steward::clock::Clock;
use steward::jobs::{self, JobCtx, NewJob, Outcome};

use crate::support::TestApp;

static ONCE_RUNS: AtomicUsize = AtomicUsize::new(0);
fn count_once(_: &App, _: &JobCtx, _: &Value) -> Outcome {
    ONCE_RUNS.fetch_add(1, Ordering::SeqCst);
    Outcome::Done
}

#[test]
fn a_job_runs_once() {
    let t = TestApp::with_handlers(vec![("test.once", count_once)]);
    let e = jobs::enqueue(&t.app, NewJob::new("test.once", json!({}))).unwrap();
    assert!(e.created);
    assert_eq!(t.run_jobs(), 1);
    assert_eq!(t.run_jobs(), 0);
    assert_eq!(ONCE_RUNS.load(Ordering::SeqCst), 1);
    let row = jobs::get(&t.app, e.id).unwrap().unwrap();
    assert_eq!(row.state, "done");
    assert_eq!(row.attempts, 1);
}

fn always_fails(_: &App, ctx: &JobCtx, _: &Value) -> Outcome {
    Outcome::retry(format!("upstream refused (attempt {})", ctx.attempt))
}

#[test]
fn a_failing_job_retries_with_backoff_then_goes_dead() {
    let t = TestApp::with_handlers(vec![("test.fails", always_fails)]);
    let e = jobs::enqueue(&t.app, NewJob::new("test.fails", json!({})).max_attempts(3)).unwrap();
    assert_eq!(t.run_jobs(), 1);
    let row = jobs::get(&t.app, e.id).unwrap().unwrap();
    assert_eq!(row.state, "queued");
    assert_eq!(row.attempts, 1);
    let wait = row.run_at - t.clock.now_ms();
    assert!((1_500..=2_500).contains(&wait), "first backoff ~2 s, got {wait} ms");
    // not due yet
    assert_eq!(t.run_jobs(), 0);
    t.clock.advance_ms(jobs::max_backoff(1).as_millis() as i64);
    assert_eq!(t.run_jobs(), 1);
    let row = jobs::get(&t.app, e.id).unwrap().unwrap();
    let wait2 = row.run_at - t.clock.now_ms();
    assert!((3_000..=5_000).contains(&wait2), "second backoff ~4 s, got {wait2} ms");
    t.clock.advance_ms(jobs::max_backoff(2).as_millis() as i64);
    assert_eq!(t.run_jobs(), 1);
    let row = jobs::get(&t.app, e.id).unwrap().unwrap();
    assert_eq!(row.state, "dead");
    assert_eq!(row.attempts, 3);
    assert_eq!(row.last_error.as_deref(), Some("upstream refused (attempt 3)"));
    t.clock.advance_secs(3600);
    assert_eq!(t.run_jobs(), 0);
}

fn fails_for_good(_: &App, _: &JobCtx, _: &Value) -> Outcome {
    Outcome::Fail("the input can never work".into())
}

#[test]
fn a_permanent_failure_goes_dead_at_once() {
    let t = TestApp::with_handlers(vec![("test.fatal", fails_for_good)]);
    let e = jobs::enqueue(&t.app, NewJob::new("test.fatal", json!({}))).unwrap();
    t.run_jobs();
    let row = jobs::get(&t.app, e.id).unwrap().unwrap();
    assert_eq!((row.state.as_str(), row.attempts), ("dead", 1));
    assert_eq!(row.last_error.as_deref(), Some("the input can never work"));
}

static CRASH_RUNS: AtomicUsize = AtomicUsize::new(0);
fn after_crash(_: &App, _: &JobCtx, _: &Value) -> Outcome {
    CRASH_RUNS.fetch_add(1, Ordering::SeqCst);
    Outcome::Done
}

#[test]
fn a_job_whose_lease_expired_runs_again_after_restart() {
    let t = TestApp::with_handlers(vec![("test.crash", after_crash)]);
    let e = jobs::enqueue(&t.app, NewJob::new("test.crash", json!({"n": 1}))).unwrap();
    // A worker of a process that then died claimed it: running, with a lease in the future.
    let lease = t.clock.now_ms() + t.app.config.job_lease.as_millis() as i64;
    // (on PostgreSQL, a process of this data directory's node: `<node>/<process>:<worker>`)
    let owner = match std::fs::read_to_string(t.app.config.data_dir.join("index/node-id")) {
        Ok(node) => format!("{}/dead-process:0", node.trim()),
        Err(_) => "dead-process:0".to_string(),
    };
    t.app
        .db
        .write(|tx| {
            Ok(tx.execute(
                "UPDATE jobs SET state = 'running', attempts = 1, lease_owner = ?3, lease_until = ?2 WHERE id = ?1",
                steward::storage::params![e.id, lease, owner],
            )?)
        })
        .unwrap();
    assert_eq!(t.run_jobs(), 0, "the lease is still held");

    // After a restart (the data dir is locked, so no live process can hold a lease) it runs at once.
    let t = t.restart(vec![("test.crash", after_crash)]);
    assert_eq!(t.run_jobs(), 1);
    assert_eq!(CRASH_RUNS.load(Ordering::SeqCst), 1);
    let row = jobs::get(&t.app, e.id).unwrap().unwrap();
    assert_eq!((row.state.as_str(), row.attempts), ("done", 2));
}

#[test]
fn an_expired_lease_is_taken_over_without_a_restart() {
    let t = TestApp::with_handlers(vec![("test.noop", noop)]);
    let e = jobs::enqueue(&t.app, NewJob::new("test.noop", json!({}))).unwrap();
    let lease = t.clock.now_ms() + 60_000;
    t.app
        .db
        .write(|tx| Ok(tx.execute("UPDATE jobs SET state = 'running', attempts = 1, lease_owner = 'stuck:0', lease_until = ?2 WHERE id = ?1", steward::storage::params![e.id, lease])?))
        .unwrap();
    assert_eq!(t.run_jobs(), 0);
    t.clock.advance_ms(60_001);
    assert_eq!(t.run_jobs(), 1);
    assert_eq!(jobs::get(&t.app, e.id).unwrap().unwrap().state, "done");
}

fn noop(_: &App, _: &JobCtx, _: &Value) -> Outcome {
    Outcome::Done
}

#[test]
fn dedupe_keys_prevent_double_enqueue() {
    let t = TestApp::with_handlers(vec![("test.noop", noop)]);
    let a = jobs::enqueue(&t.app, NewJob::new("test.noop", json!({"v": 1})).dedupe("doc:1:rev:1")).unwrap();
    let b = jobs::enqueue(&t.app, NewJob::new("test.noop", json!({"v": 2})).dedupe("doc:1:rev:1")).unwrap();
    assert!(a.created && !b.created);
    assert_eq!(a.id, b.id);
    assert_eq!(t.run_jobs(), 1);
    // still deduped once done
    let c = jobs::enqueue(&t.app, NewJob::new("test.noop", json!({})).dedupe("doc:1:rev:1")).unwrap();
    assert!(!c.created);
    assert_eq!(t.run_jobs(), 0);
}

static ORDER: Mutex<Vec<i64>> = Mutex::new(Vec::new());
fn record_order(_: &App, _: &JobCtx, p: &Value) -> Outcome {
    ORDER.lock().unwrap().push(p["n"].as_i64().unwrap());
    Outcome::Done
}

#[test]
fn higher_priority_runs_first_and_enqueue_joins_the_callers_transaction() {
    let t = TestApp::with_handlers(vec![("test.order", record_order)]);
    jobs::enqueue(&t.app, NewJob::new("test.order", json!({"n": 1})).priority(0)).unwrap();
    jobs::enqueue(&t.app, NewJob::new("test.order", json!({"n": 2})).priority(10)).unwrap();
    // enqueued inside a transaction that rolls back: the job never existed
    let now = t.clock.now_ms();
    let r: steward::Result<()> = t.app.db.write(|tx| {
        jobs::enqueue_tx(tx, now, 5, &NewJob::new("test.order", json!({"n": 3})))?;
        Err(steward::Error::invalid("the state change failed"))
    });
    assert!(r.is_err());
    t.run_jobs();
    assert_eq!(*ORDER.lock().unwrap(), vec![2, 1]);
}

#[test]
fn idle_workers_know_when_the_next_job_is_due_on_both_backends() {
    let t = TestApp::with_handlers(vec![("test.noop", noop)]);
    assert_eq!(t.app.jobs.next_due(&t.app.db).unwrap(), None, "nothing queued");
    let now = t.clock.now_ms();
    jobs::enqueue(&t.app, NewJob::new("test.noop", json!({"n": 1})).run_at(now + 40_000)).unwrap();
    jobs::enqueue(&t.app, NewJob::new("test.noop", json!({"n": 2})).run_at(now + 30_000)).unwrap();
    // a kind this process has no handler for does not count
    jobs::enqueue(&t.app, NewJob::new("future.feature", json!({})).run_at(now + 1_000)).unwrap();
    assert_eq!(t.app.jobs.next_due(&t.app.db).unwrap(), Some(now + 30_000));
    // a running job's lease end counts when it is earlier
    let e = jobs::enqueue(&t.app, NewJob::new("test.noop", json!({"n": 3})).run_at(now + 50_000)).unwrap();
    t.app
        .db
        .write(|tx| {
            Ok(tx.execute(
                "UPDATE jobs SET state = 'running', attempts = 1, lease_owner = 'stuck:0', lease_until = ?2 WHERE id = ?1",
                steward::storage::params![e.id, now + 20_000],
            )?)
        })
        .unwrap();
    assert_eq!(t.app.jobs.next_due(&t.app.db).unwrap(), Some(now + 20_000));
}

static THREAD_RUNS: AtomicUsize = AtomicUsize::new(0);
fn on_thread(_: &App, _: &JobCtx, _: &Value) -> Outcome {
    THREAD_RUNS.fetch_add(1, Ordering::SeqCst);
    Outcome::Done
}

#[test]
fn worker_threads_wake_on_enqueue() {
    let t = TestApp::with_handlers(vec![("test.thread", on_thread)]);
    t.app.start_background();
    for i in 0..5 {
        jobs::enqueue(&t.app, NewJob::new("test.thread", json!({"i": i}))).unwrap();
    }
    assert!(t.app.jobs.wait_idle(&t.app, Duration::from_secs(10)));
    assert_eq!(THREAD_RUNS.load(Ordering::SeqCst), 5);
    t.app.shutdown();
}

static STARTED: OnceLock<Mutex<mpsc::Sender<()>>> = OnceLock::new();
fn long_running(_: &App, ctx: &JobCtx, _: &Value) -> Outcome {
    if let Some(tx) = STARTED.get() {
        let _ = tx.lock().unwrap().send(());
    }
    // a long job that stops at a safe point when shutdown begins
    while !ctx.stopping() {
        std::thread::park_timeout(Duration::from_millis(5));
    }
    Outcome::Release
}

#[test]
fn shutdown_releases_running_jobs() {
    let (tx, rx) = mpsc::channel();
    STARTED.set(Mutex::new(tx)).unwrap();
    let t = TestApp::with_handlers(vec![("test.long", long_running)]);
    t.app.start_background();
    let e = jobs::enqueue(&t.app, NewJob::new("test.long", json!({}))).unwrap();
    rx.recv_timeout(Duration::from_secs(10)).expect("the job started");
    t.app.shutdown();
    let row = jobs::get(&t.app, e.id).unwrap().unwrap();
    assert_eq!(row.state, "queued");
    assert_eq!(row.attempts, 0, "a released attempt does not count");
}

static LATE_RUNS: AtomicUsize = AtomicUsize::new(0);
fn count_late(_: &App, _: &JobCtx, _: &Value) -> Outcome {
    LATE_RUNS.fetch_add(1, Ordering::SeqCst);
    Outcome::Done
}

#[test]
fn a_job_of_a_kind_without_a_handler_waits_in_the_queue() {
    let t = TestApp::new();
    let e = jobs::enqueue(&t.app, NewJob::new("future.feature", json!({"x": 1}))).unwrap();
    // not claimed (so not failed), and not counted as pending work
    assert_eq!(t.run_jobs(), 0);
    let row = jobs::get(&t.app, e.id).unwrap().unwrap();
    assert_eq!((row.state.as_str(), row.attempts), ("queued", 0));
    assert!(t.app.jobs.wait_idle(&t.app, Duration::from_secs(5)));
    // a process that has the handler runs it
    let t = t.restart(vec![("future.feature", count_late)]);
    assert_eq!(t.run_jobs(), 1);
    assert_eq!(LATE_RUNS.load(Ordering::SeqCst), 1);
}

fn panics_with_text(_: &App, _: &JobCtx, _: &Value) -> Outcome {
    let doc = String::from("İ confidential paragraph");
    let cut = 1;
    Outcome::retry(doc[..cut].to_string())
}

#[test]
fn a_panicking_job_retries_and_its_stored_error_never_quotes_the_payload() {
    let t = TestApp::with_handlers(vec![("test.panics", panics_with_text)]);
    let e = jobs::enqueue(&t.app, NewJob::new("test.panics", json!({})).max_attempts(2)).unwrap();
    assert_eq!(t.run_jobs(), 1);
    let row = jobs::get(&t.app, e.id).unwrap().unwrap();
    assert_eq!(row.state, "queued", "a crash is retried");
    let err = row.last_error.unwrap();
    assert!(err.contains("crashed"), "{err}");
    assert!(!err.contains("confidential") && !err.contains('İ'), "{err}");
}
