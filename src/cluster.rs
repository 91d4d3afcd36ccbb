//! Nodes on one PostgreSQL database (docs/scale-out.md, sections 4–6): what one node tells the
//! others, and what it does when told.
//!
//! The in-process wake-ups stay as they are (the bus's broadcast, the job workers' condition, the
//! document waiters, the index's sync after a write); on PostgreSQL each of them is also
//! announced with `NOTIFY` after its commit, and every other node's listening line turns the
//! announcement into the same local wake-up. A node ignores its own announcements (it woke its
//! own waiters already). Announcements carry kinds and ids only: `<node>|jobs`, `<node>|index`,
//! `<node>|documents`, `<node>|event|<kind>|<workspace>|<conversation or ->`.

use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::app::App;
use crate::bus::{BusEvent, BusKind};
use crate::error::Result;
use crate::storage::Notifier;
use crate::storage::postgres::listen::Listener;

/// What a node announces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// Jobs were queued: idle workers claim.
    Jobs,
    /// Index operations were logged: the indexes tail them.
    Index,
    /// A document's state changed: progress waiters re-read.
    Documents,
    /// A conversation event for the streams.
    Event(BusEvent),
}

fn kind_of(s: &str) -> Option<BusKind> {
    [BusKind::MessageCreated, BusKind::OwnershipChanged, BusKind::InboxChanged].into_iter().find(|k| k.as_str() == s)
}

/// The payload of `wake` sent by `node`.
pub fn encode(node: &str, wake: &Wake) -> String {
    match wake {
        Wake::Jobs => format!("{node}|jobs"),
        Wake::Index => format!("{node}|index"),
        Wake::Documents => format!("{node}|documents"),
        Wake::Event(e) => format!(
            "{node}|event|{}|{}|{}",
            e.kind.as_str(),
            e.workspace_id,
            e.conversation_id.as_deref().unwrap_or("-")
        ),
    }
}

/// The wake-up a payload asks of a node other than `own`: `None` for its own, or for anything it
/// does not understand (a newer node's announcement).
pub fn decode(own: &str, payload: &str) -> Option<Wake> {
    let mut parts = payload.split('|');
    let node = parts.next()?;
    if node == own {
        return None;
    }
    match (parts.next()?, parts.next(), parts.next(), parts.next(), parts.next()) {
        ("jobs", None, ..) => Some(Wake::Jobs),
        ("index", None, ..) => Some(Wake::Index),
        ("documents", None, ..) => Some(Wake::Documents),
        ("event", Some(kind), Some(ws), Some(conv), None) if !ws.is_empty() => Some(Wake::Event(BusEvent {
            workspace_id: ws.to_string(),
            conversation_id: (conv != "-").then(|| conv.to_string()),
            kind: kind_of(kind)?,
        })),
        _ => None,
    }
}

/// Sends this node's announcements (cheap to clone).
#[derive(Clone)]
pub struct Announce {
    node: Arc<str>,
    notifier: Notifier,
}

impl Announce {
    pub fn new(node: &str, notifier: Notifier) -> Announce {
        Announce { node: node.into(), notifier }
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// Announces `wake` to the other nodes; a failure is logged (their fallback polls pick the
    /// change up within a second).
    pub fn send(&self, wake: &Wake) {
        if let Err(e) = self.notifier.send(&encode(&self.node, wake)) {
            tracing::warn!(error = %e, "could not notify the other nodes");
        }
    }
}

/// This node's stable id: `<data-dir>/node-id`, made on first start (the index positions and
/// generations each node records are keyed by it).
pub fn node_id(data_dir: &Path) -> Result<String> {
    let path = data_dir.join("node-id");
    if let Ok(s) = std::fs::read_to_string(&path) {
        let s = s.trim();
        if !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            return Ok(s.to_string());
        }
    }
    let id = crate::ids::new_id();
    std::fs::write(&path, &id)?;
    Ok(id)
}

/// The node's side of the cluster: its listening line and the index tail's wake-up.
#[derive(Default)]
pub struct Cluster {
    listener: Mutex<Option<Listener>>,
    tail: Mutex<u64>,
    tail_cv: Condvar,
}

impl Cluster {
    fn wake_tail(&self) {
        *self.tail.lock() += 1;
        self.tail_cv.notify_all();
    }

    /// Stops listening and wakes the index tail so it sees the shutdown.
    pub fn stop(&self) {
        self.listener.lock().take();
        self.wake_tail();
    }
}

/// Joins the cluster (PostgreSQL only): starts the listening line and the thread that keeps this
/// node's search indexes following the database.
pub fn start(app: &Arc<App>) {
    let Some(announce) = app.announce.clone() else { return };
    let weak: Weak<App> = Arc::downgrade(app);
    let own = announce.node().to_string();
    let listener = app.db.listen(move |payload| {
        let Some(app) = weak.upgrade() else { return };
        match payload {
            // the line is (re)established: anything may have been missed
            None => {
                app.jobs.wake_local();
                app.cluster.wake_tail();
                app.document_events.notify_waiters();
            }
            Some(p) => match decode(&own, p) {
                Some(Wake::Jobs) => app.jobs.wake_local(),
                Some(Wake::Index) => app.cluster.wake_tail(),
                Some(Wake::Documents) => app.document_events.notify_waiters(),
                Some(Wake::Event(e)) => app.bus.deliver(e),
                None => {}
            },
        }
    });
    *app.cluster.listener.lock() = listener;
    let app = app.clone();
    let spawned = std::thread::Builder::new().name("steward-index-tail".into()).spawn(move || tail(&app));
    if let Err(e) = spawned {
        tracing::error!(error = %e, "could not start the index tail");
    }
}

/// Applies the index operations other nodes log, when told and at least every second (a missed
/// notification costs a second, never a change).
fn tail(app: &App) {
    let Ok(index) = app.search() else { return };
    loop {
        let seen = *app.cluster.tail.lock();
        if app.jobs.is_stopping() || app.closing.is_cancelled() {
            return;
        }
        if let Err(e) = index.tail(&app.db) {
            tracing::warn!(error = %e, "could not apply the index operations of other nodes");
        }
        if let Err(e) = index.save_vectors_if_due(&app.db, false) {
            tracing::warn!(error = %e, "could not save the vector index");
        }
        let mut g = app.cluster.tail.lock();
        if *g == seen {
            app.cluster.tail_cv.wait_for(&mut g, Duration::from_secs(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_keeps_its_id_across_starts() {
        let dir = tempfile::tempdir().unwrap();
        let first = node_id(dir.path()).unwrap();
        assert_eq!(node_id(dir.path()).unwrap(), first);
        std::fs::write(dir.path().join("node-id"), "not/an id").unwrap();
        assert_ne!(node_id(dir.path()).unwrap(), "not/an id");
    }

    #[test]
    fn announcements_round_trip_and_a_node_ignores_its_own() {
        let ev = BusEvent {
            workspace_id: "ws1".into(),
            conversation_id: Some("c9".into()),
            kind: BusKind::OwnershipChanged,
        };
        for w in [Wake::Jobs, Wake::Index, Wake::Documents, Wake::Event(ev.clone())] {
            let p = encode("nodeA", &w);
            assert_eq!(decode("nodeB", &p), Some(w.clone()), "{p}");
            assert_eq!(decode("nodeA", &p), None, "own announcement: {p}");
        }
        let none = BusEvent { conversation_id: None, ..ev };
        assert_eq!(decode("b", &encode("a", &Wake::Event(none.clone()))), Some(Wake::Event(none)));
        for bad in
            ["", "a", "a|", "a|jobs|x", "a|event|message.created|ws", "a|event|nope|ws|-", "a|event|inbox.changed||-"]
        {
            assert_eq!(decode("b", bad), None, "{bad:?}");
        }
    }
}
