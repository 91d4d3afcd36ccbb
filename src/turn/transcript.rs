//! What a local model was shown and wrote in a conversation's earlier turns, so that a follow-up's
//! prompt repeats them word for word: the follow-up then starts like the prompt the model has just
//! read (and written after), and the model's prompt cache restores that state instead of reading
//! the conversation again. A turn is stored with only the visitor's question and the cleaned
//! answer; this memory adds the sources its prompt carried and the model's raw text.
//!
//! Entries are keyed by conversation and by the exact stored question and answer, so a history
//! that changed (an operator's reply, an edited answer) simply finds nothing and is shown as
//! stored. In memory only, bounded by bytes (oldest out first): after a restart a follow-up reads
//! its history once more, which costs time, never correctness.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, OnceLock};

/// At most this many bytes of remembered turns (some thousands of conversations' last turns).
const BOUND: usize = 8 << 20;

type Key = (String, String, String);

/// The prompt's user message and the model's raw reply for one earlier turn.
#[derive(Clone, Debug, PartialEq)]
pub struct Shown {
    pub user: String,
    pub assistant: String,
}

#[derive(Default)]
struct Memory {
    entries: HashMap<Key, Shown>,
    order: VecDeque<Key>,
    bytes: usize,
    bound: usize,
}

/// Bytes an entry holds: its key twice (the map and the order), its texts.
fn size(k: &Key, s: &Shown) -> usize {
    2 * (k.0.len() + k.1.len() + k.2.len()) + s.user.len() + s.assistant.len()
}

impl Memory {
    fn new(bound: usize) -> Memory {
        Memory { bound, ..Memory::default() }
    }

    fn put(&mut self, key: Key, shown: Shown) {
        let n = size(&key, &shown);
        if n > self.bound {
            return;
        }
        if let Some(old) = self.entries.remove(&key) {
            self.bytes -= size(&key, &old);
            self.order.retain(|k| k != &key);
        }
        while self.bytes + n > self.bound {
            let Some(k) = self.order.pop_front() else { break };
            if let Some(old) = self.entries.remove(&k) {
                self.bytes -= size(&k, &old);
            }
        }
        self.bytes += n;
        self.order.push_back(key.clone());
        self.entries.insert(key, shown);
    }

    fn get(&self, key: &Key) -> Option<Shown> {
        self.entries.get(key).cloned()
    }
}

fn memory() -> &'static Mutex<Memory> {
    static M: OnceLock<Mutex<Memory>> = OnceLock::new();
    M.get_or_init(|| Mutex::new(Memory::new(BOUND)))
}

fn key(conversation: &str, question: &str, answer: &str) -> Key {
    (conversation.to_string(), question.to_string(), answer.to_string())
}

/// Remembers what the model was shown (`shown.user`) and wrote (`shown.assistant`) for the turn
/// stored as `question` and `answer` in `conversation`.
pub fn remember(conversation: &str, question: &str, answer: &str, shown: Shown) {
    let mut m = memory().lock().unwrap_or_else(|p| p.into_inner());
    m.put(key(conversation, question, answer), shown);
}

/// What the model was shown and wrote for that stored turn, if this process remembers it.
pub fn recall(conversation: &str, question: &str, answer: &str) -> Option<Shown> {
    let m = memory().lock().unwrap_or_else(|p| p.into_inner());
    m.get(&key(conversation, question, answer))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(u: &str, a: &str) -> Shown {
        Shown { user: u.into(), assistant: a.into() }
    }

    #[test]
    fn a_turn_is_found_only_by_its_conversation_question_and_answer() {
        remember(
            "c-memo-1",
            "What is lift?",
            "Lift is a force.",
            shown("Sources: …\nQuestion: What is lift?", "Lift is a force [1]."),
        );
        let got = recall("c-memo-1", "What is lift?", "Lift is a force.").unwrap();
        assert_eq!(got.assistant, "Lift is a force [1].");
        assert!(recall("c-memo-2", "What is lift?", "Lift is a force.").is_none(), "another conversation");
        assert!(recall("c-memo-1", "What is lift?", "Lift is a force!").is_none(), "an answer stored otherwise");
    }

    #[test]
    fn the_memory_never_holds_more_than_its_bound_and_drops_the_oldest() {
        let mut m = Memory::new(200);
        for i in 0..50 {
            m.put(key("c", &format!("q{i}"), "a"), shown(&"u".repeat(30), &"w".repeat(30)));
            assert!(m.bytes <= 200, "{} bytes", m.bytes);
        }
        assert!(m.get(&key("c", "q49", "a")).is_some(), "the newest is kept");
        assert!(m.get(&key("c", "q0", "a")).is_none(), "the oldest went first");
        // a turn larger than the whole bound is not kept, and changes nothing
        let before = m.bytes;
        m.put(key("c", "big", "a"), shown(&"u".repeat(300), ""));
        assert_eq!(m.bytes, before);
        // remembering a turn again replaces it
        m.put(key("c", "q49", "a"), shown("x", "y"));
        assert_eq!(m.get(&key("c", "q49", "a")), Some(shown("x", "y")));
        assert_eq!(m.entries.len(), m.order.len());
    }
}
