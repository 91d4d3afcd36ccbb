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

use super::session::RUNTIME;

/// The one channel every node listens on.
pub const CHANNEL: &str = "steward";

/// The listening task; stopped when dropped.
pub struct Listener {
    stop: Arc<AtomicBool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// Starts listening on [`CHANNEL`] at `url`. `deliver` runs on the PostgreSQL I/O thread: it must
/// return at once and must not use the database (hand the work to another thread).
pub fn start(url: &str, deliver: impl Fn(Option<&str>) + Send + Sync + 'static) -> Option<Listener> {
    let rt = RUNTIME.as_ref()?;
    let stop = Arc::new(AtomicBool::new(false));
    let (url, stopping) = (url.to_string(), stop.clone());
    let task = rt.spawn(async move {
        let mut failures = 0u32;
        while !stopping.load(Ordering::SeqCst) {
            match listen_once(&url, &deliver).await {
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
    Some(Listener { stop, task: Some(task) })
}

/// One connection's life: `LISTEN`, then every notification until the connection ends.
async fn listen_once(url: &str, deliver: &(impl Fn(Option<&str>) + Send + Sync)) -> Result<(), String> {
    let mut config: tokio_postgres::Config = url.parse().map_err(|e| super::plain(&e))?;
    if config.get_password().is_none()
        && let Ok(pw) = std::env::var("PGPASSWORD")
    {
        config.password(pw);
    }
    config.application_name("steward-listen");
    let (client, mut connection) = config.connect(tokio_postgres::NoTls).await.map_err(|e| super::plain(&e))?;
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
    deliver(None);
    while let Some(msg) = rx.next().await {
        if let AsyncMessage::Notification(n) = msg
            && n.channel() == CHANNEL
        {
            deliver(Some(n.payload()));
        }
    }
    drop(client);
    tracing::warn!("the PostgreSQL notification line was lost; reconnecting");
    Ok(())
}
