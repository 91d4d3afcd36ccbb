//! The in-process event bus: what happened to a workspace's conversations, for the streams that
//! wait on it (the operator events stream; later the visitor and converse streams). Events are
//! published after their transaction commits and carry ids, never message text: a listener reads
//! what changed through the API it serves. A slow listener that falls behind skips ahead. On
//! PostgreSQL each event is also announced to the other nodes, whose listening line delivers it
//! to their own streams (`cluster`).

use tokio::sync::broadcast;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusKind {
    /// A message was added to the conversation (visitor, agent or operator).
    MessageCreated,
    /// The conversation's ownership changed (handoff, takeover, transfer, handback).
    OwnershipChanged,
    /// An inbox item other than a handoff changed (answer feedback).
    InboxChanged,
}

impl BusKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BusKind::MessageCreated => "message.created",
            BusKind::OwnershipChanged => "ownership.changed",
            BusKind::InboxChanged => "inbox.changed",
        }
    }
}

/// One event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusEvent {
    pub workspace_id: String,
    pub conversation_id: Option<String>,
    pub kind: BusKind,
}

/// The bus: a broadcast channel.
pub struct Bus {
    tx: broadcast::Sender<BusEvent>,
    announce: Option<crate::cluster::Announce>,
}

impl Default for Bus {
    fn default() -> Self {
        Bus::new(None)
    }
}

impl Bus {
    /// A bus; with `announce`, events are also sent to the other nodes.
    pub fn new(announce: Option<crate::cluster::Announce>) -> Bus {
        Bus { tx: broadcast::channel(1024).0, announce }
    }

    /// Publishes an event (nobody listening is fine), here and on the other nodes.
    pub fn publish(&self, workspace_id: &str, conversation_id: Option<&str>, kind: BusKind) {
        let ev = BusEvent {
            workspace_id: workspace_id.to_string(),
            conversation_id: conversation_id.map(str::to_string),
            kind,
        };
        if let Some(a) = &self.announce {
            a.send(&crate::cluster::Wake::Event(ev.clone()));
        }
        self.deliver(ev);
    }

    /// Delivers an event to this node's listeners only (one another node announced).
    pub fn deliver(&self, ev: BusEvent) {
        let _ = self.tx.send(ev);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<BusEvent> {
        self.tx.subscribe()
    }
}
