//! The in-process event bus: what happened to a workspace's conversations, for the streams that
//! wait on it (the operator events stream; later the visitor and converse streams). Events are
//! published after their transaction commits and carry ids, never message text: a listener reads
//! what changed through the API it serves. A slow listener that falls behind skips ahead.

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
#[derive(Debug, Clone)]
pub struct BusEvent {
    pub workspace_id: String,
    pub conversation_id: Option<String>,
    pub kind: BusKind,
}

/// The bus: a broadcast channel.
pub struct Bus {
    tx: broadcast::Sender<BusEvent>,
}

impl Default for Bus {
    fn default() -> Self {
        Bus { tx: broadcast::channel(1024).0 }
    }
}

impl Bus {
    /// Publishes an event (nobody listening is fine).
    pub fn publish(&self, workspace_id: &str, conversation_id: Option<&str>, kind: BusKind) {
        let _ = self.tx.send(BusEvent {
            workspace_id: workspace_id.to_string(),
            conversation_id: conversation_id.map(str::to_string),
            kind,
        });
    }

    pub fn subscribe(&self) -> broadcast::Receiver<BusEvent> {
        self.tx.subscribe()
    }
}
