//! What a local model was shown for a conversation's earlier questions, so that a follow-up's
//! prompt repeats them word for word: the follow-up then starts like the prompt the model has just
//! read, and the model's prompt cache restores that state instead of reading the conversation
//! again. A turn is stored with only the visitor's question; this memory adds the sources its
//! prompt carried.
//!
//! Entries are keyed by conversation and by the exact stored question and answer, so a history
//! that changed (an operator's reply, an edited answer) simply finds nothing and is shown as
//! stored. In memory only, bounded by bytes (oldest out first): after a restart a follow-up reads
//! its history once more, which costs time, never correctness.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, OnceLock};

use crate::models::chat::Message;

/// At most this many bytes of remembered turns (some thousands of conversations' last turns).
const BOUND: usize = 8 << 20;

type Key = (String, String, String);

#[derive(Default)]
struct Memory {
    entries: HashMap<Key, String>,
    order: VecDeque<Key>,
    bytes: usize,
    bound: usize,
}

/// Bytes an entry holds: its key twice (the map and the order), its text.
fn size(k: &Key, shown: &str) -> usize {
    2 * (k.0.len() + k.1.len() + k.2.len()) + shown.len()
}

impl Memory {
    fn new(bound: usize) -> Memory {
        Memory { bound, ..Memory::default() }
    }

    fn put(&mut self, key: Key, shown: String) {
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

    fn get(&self, key: &Key) -> Option<String> {
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

/// Remembers the message the model was shown (`shown`: the question with its sources) for the turn
/// stored as `question` and `answer` in `conversation`.
pub fn remember(conversation: &str, question: &str, answer: &str, shown: &str) {
    let mut m = memory().lock().unwrap_or_else(|p| p.into_inner());
    m.put(key(conversation, question, answer), shown.to_string());
}

/// What the model was shown for that stored turn, if this process remembers it.
pub fn recall(conversation: &str, question: &str, answer: &str) -> Option<String> {
    let m = memory().lock().unwrap_or_else(|p| p.into_inner());
    m.get(&key(conversation, question, answer))
}

/// A conversation's earlier messages (role, text; oldest first) as a local model is shown them: the
/// visitor's messages each as the model read it when it answered (with its sources, when
/// remembered), so the prompt starts like the one it read last and the prompt cache restores that
/// reading; not its own earlier answers — small models copy an earlier answer instead of answering
/// the new question; replies of people (operators) as they are.
pub fn history(conversation: Option<&str>, msgs: &[(String, String)]) -> Vec<Message> {
    let mut out = Vec::with_capacity(msgs.len());
    for (i, m @ (role, text)) in msgs.iter().enumerate() {
        match role.as_str() {
            "assistant" => {}
            "user" => {
                let answer = msgs.get(i + 1).filter(|(r, _)| r == "assistant").map(|(_, a)| a.as_str());
                let shown = conversation.zip(answer).and_then(|(c, a)| recall(c, text, a));
                out.push(shown.map_or_else(|| super::compose::message(m), Message::user));
            }
            _ => out.push(super::compose::message(m)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_found_only_by_its_conversation_question_and_answer() {
        remember("c-memo-1", "What is lift?", "Lift is a force.", "Sources: …\nQuestion: What is lift?");
        let got = recall("c-memo-1", "What is lift?", "Lift is a force.").unwrap();
        assert_eq!(got, "Sources: …\nQuestion: What is lift?");
        assert!(recall("c-memo-2", "What is lift?", "Lift is a force.").is_none(), "another conversation");
        assert!(recall("c-memo-1", "What is lift?", "Lift is a force!").is_none(), "an answer stored otherwise");
    }

    #[test]
    fn the_model_sees_the_visitors_messages_as_it_read_them_and_not_its_own_answers() {
        let pair = |r: &str, t: &str| (r.to_string(), t.to_string());
        let msgs = vec![
            pair("user", "What is lift?"),
            pair("assistant", "Lift is a force."),
            pair("user", "And drag?"),
            pair("assistant", "Drag slows it."),
            pair("operator", "I am Ann from the crew, happy to help."),
            pair("user", "Thanks"),
        ];
        remember("c-hist", "What is lift?", "Lift is a force.", "Sources:\n[1] Lift …\nQuestion: What is lift?");
        let shown = history(Some("c-hist"), &msgs);
        let texts: Vec<(&str, &str)> = shown.iter().map(|m| (m.role.as_str(), m.content.as_str())).collect();
        assert_eq!(
            texts,
            vec![
                ("user", "Sources:\n[1] Lift …\nQuestion: What is lift?"),
                ("user", "And drag?"),
                ("assistant", "I am Ann from the crew, happy to help."),
                ("user", "Thanks"),
            ]
        );
        // without the memory (another process, another conversation): the messages as stored
        assert_eq!(history(Some("c-other"), &msgs[..2])[0].content, "What is lift?");
        assert_eq!(history(None, &msgs[..2]).len(), 1);
    }

    #[test]
    fn the_memory_never_holds_more_than_its_bound_and_drops_the_oldest() {
        let mut m = Memory::new(200);
        for i in 0..50 {
            m.put(key("c", &format!("q{i}"), "a"), "u".repeat(60));
            assert!(m.bytes <= 200, "{} bytes", m.bytes);
        }
        assert!(m.get(&key("c", "q49", "a")).is_some(), "the newest is kept");
        assert!(m.get(&key("c", "q0", "a")).is_none(), "the oldest went first");
        // a turn larger than the whole bound is not kept, and changes nothing
        let before = m.bytes;
        m.put(key("c", "big", "a"), "u".repeat(300));
        assert_eq!(m.bytes, before);
        // remembering a turn again replaces it
        m.put(key("c", "q49", "a"), "xy".into());
        assert_eq!(m.get(&key("c", "q49", "a")).as_deref(), Some("xy"));
        assert_eq!(m.entries.len(), m.order.len());
    }
}
