//! One reply per conversation at a time, and the newest message wins (spec: "a newer message for
//! the same conversation before the current reply starts cancels it").
//!
//! Every turn of a conversation takes a slot here. Taking a slot cancels the conversation's other
//! slots that are still cancellable — waiting for their turn, or running but not yet *pinned*. A
//! turn pins itself when it streams its first answer chunk or starts persisting its reply; from
//! then on it finishes and the newer turn waits for it. Turns run one after another in arrival
//! order (a fair async mutex per conversation). Coordination is per process, like the original.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::kinds::Phase;
use crate::models::chat::Cancel;

/// Why a turn stopped: a newer message took over at `stage`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superseded {
    pub stage: Phase,
}

#[derive(Debug)]
struct SlotState {
    stage: Phase,
    pinned: bool,
    cancelled_at: Option<Phase>,
}

/// One turn's place in its conversation.
#[derive(Debug)]
pub struct Slot {
    pub cancel: Cancel,
    state: Mutex<SlotState>,
    notify: tokio::sync::Notify,
}

impl Slot {
    /// A slot outside any conversation (retrieval-only answers): never cancelled by others.
    pub fn detached() -> Arc<Slot> {
        Arc::new(Slot {
            cancel: Cancel::new(),
            state: Mutex::new(SlotState { stage: Phase::Preparing, pinned: false, cancelled_at: None }),
            notify: tokio::sync::Notify::new(),
        })
    }

    /// Records the stage the turn is in; fails when the turn was superseded.
    pub fn stage(&self, stage: Phase) -> Result<(), Superseded> {
        let mut s = self.state.lock();
        if let Some(at) = s.cancelled_at {
            return Err(Superseded { stage: at });
        }
        s.stage = stage;
        Ok(())
    }

    /// Fails when the turn was superseded.
    pub fn check(&self) -> Result<(), Superseded> {
        match self.state.lock().cancelled_at {
            Some(at) => Err(Superseded { stage: at }),
            None => Ok(()),
        }
    }

    /// Makes the turn uncancellable (first chunk streamed, or persisting), unless it was already
    /// superseded.
    pub fn pin(&self) -> Result<(), Superseded> {
        let mut s = self.state.lock();
        if let Some(at) = s.cancelled_at {
            return Err(Superseded { stage: at });
        }
        s.pinned = true;
        Ok(())
    }

    pub fn current_stage(&self) -> Phase {
        self.state.lock().stage
    }

    /// Cancels the turn if it is not pinned. True when it was cancelled (now or before).
    fn try_cancel(&self) -> bool {
        let mut s = self.state.lock();
        if s.cancelled_at.is_some() {
            return true;
        }
        if s.pinned {
            return false;
        }
        s.cancelled_at = Some(s.stage);
        drop(s);
        self.cancel.cancel();
        self.notify.notify_one();
        true
    }

    /// Resolves when the turn is superseded.
    pub async fn cancelled(&self) {
        loop {
            if self.state.lock().cancelled_at.is_some() {
                return;
            }
            self.notify.notified().await;
        }
    }
}

struct Conv {
    order: Arc<tokio::sync::Mutex<()>>,
    slots: Vec<Arc<Slot>>,
}

/// The per-process registry of running turns.
#[derive(Default)]
pub struct Turns {
    convs: Mutex<HashMap<String, Conv>>,
}

/// A turn's hold on its conversation; dropping it lets the next turn run.
pub struct TurnGuard<'a> {
    turns: &'a Turns,
    conversation: String,
    pub slot: Arc<Slot>,
    _order: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Turns {
    /// Takes the conversation's next turn: cancels the cancellable turns before it, then waits for
    /// the ones that are pinned. Fails if an even newer message supersedes this one while it waits.
    pub async fn enter(&self, conversation: &str) -> Result<TurnGuard<'_>, Superseded> {
        let slot = Slot::detached();
        slot.state.lock().stage = Phase::Waiting;
        let order = {
            let mut convs = self.convs.lock();
            let conv = convs
                .entry(conversation.to_string())
                .or_insert_with(|| Conv { order: Arc::new(tokio::sync::Mutex::new(())), slots: Vec::new() });
            for s in &conv.slots {
                s.try_cancel();
            }
            conv.slots.push(slot.clone());
            conv.order.clone()
        };
        let mut guard =
            TurnGuard { turns: self, conversation: conversation.to_string(), slot: slot.clone(), _order: None };
        tokio::select! {
            g = order.lock_owned() => guard._order = Some(g),
            _ = slot.cancelled() => return Err(Superseded { stage: Phase::Waiting }),
        }
        slot.stage(Phase::Preparing)?;
        Ok(guard)
    }

    /// Turns currently registered (running or waiting) for a conversation.
    pub fn active(&self, conversation: &str) -> usize {
        self.convs.lock().get(conversation).map(|c| c.slots.len()).unwrap_or(0)
    }
}

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        // release the order lock before unregistering, so a waiter can proceed
        self._order.take();
        let mut convs = self.turns.convs.lock();
        if let Some(conv) = convs.get_mut(&self.conversation) {
            conv.slots.retain(|s| !Arc::ptr_eq(s, &self.slot));
            if conv.slots.is_empty() {
                convs.remove(&self.conversation);
            }
        }
    }
}

/// Passes answer text to the event stream; a streaming turn's first chunk pins it (no supersede).
pub(super) struct StreamSink<'a> {
    pub slot: &'a Slot,
    pub events: &'a mut dyn super::Events,
    pub streaming: bool,
    pub pinned: bool,
}

impl super::compose::Sink for StreamSink<'_> {
    fn chunk(&mut self, text: &str) -> bool {
        if !self.streaming {
            return self.slot.check().is_ok();
        }
        if !self.pinned {
            if self.slot.pin().is_err() {
                return false;
            }
            self.pinned = true;
        }
        self.events.chunk(text);
        true
    }

    fn waiting(&mut self, ahead: usize) {
        if self.streaming {
            self.events.status(if ahead > 0 {
                super::kinds::Progress::Waiting
            } else {
                super::kinds::Progress::Composing
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_newer_turn_cancels_an_unpinned_one_and_waits_for_a_pinned_one() {
        let turns = Turns::default();
        let first = turns.enter("c").await.unwrap();
        first.slot.stage(Phase::Routing).unwrap();
        // the second turn cancels the first (not pinned) and then waits for its guard
        let second = {
            let turns = &turns;
            async move { turns.enter("c").await.map(|g| g.slot.current_stage()) }
        };
        let (r, _) = tokio::join!(second, async {
            first.slot.cancelled().await;
            assert_eq!(first.slot.check(), Err(Superseded { stage: Phase::Routing }));
            assert!(first.slot.cancel.is_cancelled());
            drop(first);
        });
        assert_eq!(r.unwrap(), Phase::Preparing);
        assert_eq!(turns.active("c"), 0);

        // a pinned turn is not cancelled
        let pinned = turns.enter("c").await.unwrap();
        pinned.slot.pin().unwrap();
        let (r, _) = tokio::join!(async { turns.enter("c").await.map(|_| ()) }, async {
            tokio::task::yield_now().await;
            assert!(pinned.slot.check().is_ok());
            drop(pinned);
        });
        assert!(r.is_ok());
    }

    #[tokio::test]
    async fn a_waiting_turn_superseded_by_a_newer_one_fails_at_waiting() {
        let turns = Turns::default();
        let running = turns.enter("c").await.unwrap();
        running.slot.pin().unwrap();
        let waiting = turns.enter("c");
        let newest = turns.enter("c");
        let (w, n, _) = tokio::join!(waiting, newest, async {
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            drop(running);
        });
        // whichever registered first was cancelled by the other while it waited
        let results = [w.is_ok(), n.is_ok()];
        assert_eq!(results.iter().filter(|ok| **ok).count(), 1, "one of the two newer turns runs");
        let failed = if w.is_err() { w.err() } else { n.err() };
        assert_eq!(failed.map(|s| s.stage), Some(Phase::Waiting));
    }
}
