//! The local model's prompt cache: KV states of sequences it has already read, kept by their
//! tokens, so a prompt that starts like an earlier one (the agent's fixed prefix — system prompt,
//! persona, rules — or a conversation's earlier turns) reads only what follows. Entries are found
//! by the longest shared token prefix, so a changed prompt (a revision published, other
//! directives) simply shares less: nothing needs invalidating. Bounded by bytes, least recently
//! used first out. One cache per loaded model: a state never meets another model.

use std::sync::Arc;

/// One cached sequence: its tokens and the state after reading them.
struct Entry<S> {
    tokens: Vec<i32>,
    state: Arc<S>,
    bytes: usize,
    used_at: u64,
}

/// KV states by token sequence, at most `bound` bytes of them.
pub struct PrefixCache<S> {
    entries: Vec<Entry<S>>,
    bound: usize,
    used: usize,
    tick: u64,
}

/// How many leading tokens `a` and `b` share.
pub fn shared_prefix(a: &[i32], b: &[i32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl<S> PrefixCache<S> {
    pub fn new(bound: usize) -> PrefixCache<S> {
        PrefixCache { entries: Vec::new(), bound, used: 0, tick: 0 }
    }

    /// Bytes held now (never more than the bound).
    pub fn bytes(&self) -> usize {
        self.used
    }

    #[allow(clippy::len_without_is_empty, reason = "a count of entries for reports")]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The entry sharing the longest prefix with `tokens`, if it shares at least `min` tokens:
    /// how many it shares, and its state. The entry counts as used.
    pub fn best(&mut self, tokens: &[i32], min: usize) -> Option<(usize, Arc<S>)> {
        self.tick += 1;
        let (at, shared) = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| (i, shared_prefix(&e.tokens, tokens)))
            .max_by_key(|&(i, n)| (n, std::cmp::Reverse(i)))?;
        if shared < min.max(1) {
            return None;
        }
        let e = &mut self.entries[at];
        e.used_at = self.tick;
        Some((shared, e.state.clone()))
    }

    /// Keeps `state` as the state after `tokens`, dropping entries it makes redundant (whose
    /// tokens are a prefix of these) and then the least recently used until it fits. A state
    /// larger than the whole bound is not kept.
    pub fn put(&mut self, tokens: Vec<i32>, state: S, bytes: usize) {
        if bytes > self.bound || tokens.is_empty() {
            return;
        }
        self.tick += 1;
        let mut i = 0;
        while i < self.entries.len() {
            let e = &self.entries[i];
            if e.tokens.len() <= tokens.len() && tokens.starts_with(&e.tokens) {
                self.used -= e.bytes;
                self.entries.swap_remove(i);
            } else {
                i += 1;
            }
        }
        while self.used + bytes > self.bound {
            let Some(oldest) = self.entries.iter().enumerate().min_by_key(|(_, e)| e.used_at).map(|(i, _)| i) else {
                break;
            };
            self.used -= self.entries[oldest].bytes;
            self.entries.swap_remove(oldest);
        }
        self.used += bytes;
        self.entries.push(Entry { tokens, state: Arc::new(state), bytes, used_at: self.tick });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_longest_shared_prefix_wins_and_short_matches_are_ignored() {
        let mut c = PrefixCache::new(1000);
        c.put(vec![1, 2, 3, 4], "a", 10);
        c.put(vec![1, 2, 9], "b", 10);
        assert_eq!(c.best(&[1, 2, 3, 4, 5], 1).map(|(n, s)| (n, *s)), Some((4, "a")));
        assert_eq!(c.best(&[1, 2, 9, 9], 1).map(|(n, s)| (n, *s)), Some((3, "b")));
        assert_eq!(c.best(&[1, 2, 7], 3), None, "two shared tokens are below the minimum");
        assert_eq!(c.best(&[5], 1), None);
    }

    #[test]
    fn a_longer_sequence_replaces_its_prefixes() {
        let mut c = PrefixCache::new(1000);
        c.put(vec![1, 2], "short", 10);
        c.put(vec![1, 2, 3], "long", 30);
        assert_eq!(c.len(), 1);
        assert_eq!(c.bytes(), 30);
        assert_eq!(c.best(&[1, 2], 1).map(|(n, s)| (n, *s)), Some((2, "long")));
    }

    #[test]
    fn the_least_recently_used_goes_first_and_oversized_states_are_not_kept() {
        let mut c = PrefixCache::new(100);
        c.put(vec![1], "one", 40);
        c.put(vec![2], "two", 40);
        assert!(c.best(&[1], 1).is_some(), "touch one");
        c.put(vec![3], "three", 40);
        assert!(c.best(&[2], 1).is_none(), "two was the least recently used");
        assert!(c.best(&[1], 1).is_some() && c.best(&[3], 1).is_some());
        c.put(vec![4], "huge", 101);
        assert!(c.best(&[4], 1).is_none());
        assert_eq!(c.bytes(), 80);
    }

    proptest! {
        #[test]
        fn never_holds_more_than_its_bound(ops in proptest::collection::vec((proptest::collection::vec(0i32..4, 1..6), 1usize..60), 1..60)) {
            let mut c = PrefixCache::new(100);
            for (tokens, bytes) in ops {
                let probe = tokens.clone();
                c.put(tokens, (), bytes);
                prop_assert!(c.bytes() <= 100);
                let sum: usize = c.entries.iter().map(|e| e.bytes).sum();
                prop_assert_eq!(sum, c.bytes());
                if let Some((n, _)) = c.best(&probe, 1) {
                    prop_assert!(n <= probe.len());
                }
            }
        }
    }
}
