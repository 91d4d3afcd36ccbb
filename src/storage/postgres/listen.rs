//! A node's line to the others (docs/scale-out.md, section 5): one connection of its own doing
//! `LISTEN steward`, whose notifications are handed to a callback, and the `NOTIFY` that the
//! other side sends. PostgreSQL delivers a notification to every listening session after the
//! sender's commit, in commit order; payloads carry ids and kinds, never user text.
//!
//! A lost connection is made again every second; each time the line is (re)established the
//! callback gets `None`, so the node wakes whatever waits once (a notification sent while the
//! line was down is lost, and a spurious wake-up is harmless: waiters re-read the database).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use tokio_postgres::AsyncMessage;

/// Where the listening connections run: one background thread of its own (the pooled
/// connections are run by the threads that use them: `wire`).
static RUNTIME: std::sync::LazyLock<Option<tokio::runtime::Runtime>> = std::sync::LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).thread_name("steward-pg").enable_all().build().ok()
});

/// The one channel every node listens on.
pub const CHANNEL: &str = "steward";

/// The listening task; stopped when dropped (the callback then hears [`Line::Down`]).
pub struct Listener {
    stop: Arc<AtomicBool>,
    task: Option<tokio::task::JoinHandle<()>>,
    down: Box<dyn Fn() + Send + Sync>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.task.take() {
            t.abort();
        }
        (self.down)();
    }
}

/// How often a listening connection is asked to answer: one that does not within
/// [`HEARTBEAT_WAIT`] (a peer gone without closing the connection) is given up, so the node
/// stops trusting what it has not heard within seconds, not at TCP's keepalive hours later.
const HEARTBEAT: Duration = Duration::from_secs(5);
const HEARTBEAT_WAIT: Duration = Duration::from_secs(5);

/// What the listening line reports.
pub enum Line<'a> {
    /// Listening (again): anything sent while the line was down is lost.
    Up,
    /// The connection ended; made again within a second.
    Down,
    /// A notification's payload.
    Heard(&'a str),
}

/// Starts listening on [`CHANNEL`] at `url`. `deliver` runs on the PostgreSQL I/O thread: it must
/// return at once and must not use the database (hand the work to another thread).
pub fn start(url: &str, deliver: impl Fn(Line<'_>) + Send + Sync + 'static) -> Option<Listener> {
    let rt = RUNTIME.as_ref()?;
    let stop = Arc::new(AtomicBool::new(false));
    let (url, stopping) = (url.to_string(), stop.clone());
    let deliver = Arc::new(deliver);
    let on_drop = deliver.clone();
    let down = Box::new(move || on_drop(Line::Down));
    let task = rt.spawn(async move {
        let mut failures = 0u32;
        while !stopping.load(Ordering::SeqCst) {
            let ended = listen_once(&url, &*deliver).await;
            deliver(Line::Down);
            match ended {
                Ok(()) => failures = 0,
                Err(e) => {
                    failures += 1;
                    // said once per outage, not every second
                    if failures == 1 {
                        tracing::warn!(error = %e, "the PostgreSQL notification line is down; retrying every second");
                    }
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    Some(Listener { stop, task: Some(task), down })
}

/// One connection's life: `LISTEN`, then every notification until the connection ends.
async fn listen_once(url: &str, deliver: &(impl Fn(Line<'_>) + Send + Sync)) -> Result<(), String> {
    let (mut config, tls) = super::config_of(url).map_err(|e| e.message)?;
    config.application_name("steward-listen");
    let (client, mut connection) = config.connect(tls).await.map_err(|e| super::plain(&e))?;
    let (tx, mut rx) = futures::channel::mpsc::unbounded::<AsyncMessage>();
    let driver = tokio::spawn(async move {
        while let Some(Ok(msg)) = futures::future::poll_fn(|cx| connection.poll_message(cx)).await {
            if tx.unbounded_send(msg).is_err() {
                break;
            }
        }
    });
    let listened = client.batch_execute(&format!("LISTEN {CHANNEL}")).await;
    if let Err(e) = listened {
        driver.abort();
        return Err(super::plain(&e));
    }
    deliver(Line::Up);
    let mut beat = tokio::time::interval(HEARTBEAT);
    beat.tick().await;
    loop {
        tokio::select! {
            msg = rx.next() => match msg {
                Some(AsyncMessage::Notification(n)) if n.channel() == CHANNEL => deliver(Line::Heard(n.payload())),
                Some(_) => {}
                None => break,
            },
            _ = beat.tick() => {
                if !matches!(tokio::time::timeout(HEARTBEAT_WAIT, client.simple_query("")).await, Ok(Ok(_))) {
                    driver.abort();
                    return Err("the PostgreSQL notification line stopped answering".into());
                }
            }
        }
    }
    drop(client);
    tracing::warn!("the PostgreSQL notification line was lost; reconnecting");
    Ok(())
}
