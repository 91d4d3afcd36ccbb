//! Rate limits. [`RateLimiter`] is an in-memory sliding window for the per-minute flood limits
//! (public chat, uploads, converse) and [`Slots`] caps how many long-lived requests (event streams,
//! long polls) one holder has open at once: both per process, so behind a balancer a limit of N is
//! N per node, and a restart forgets them. The limits that guard accounts or that an operator sets
//! for a day (sign-in, registration, a visitor's daily messages) are [`shared`]: counted in the
//! database, so they hold across nodes and restarts.
//!
//! Keys are bounded: a key longer than [`MAX_KEY_BYTES`] is replaced by its SHA-256, and the table
//! holds at most [`MAX_KEYS`] keys (expired ones are pruned first, then the least recently hit are
//! dropped), so a flood of distinct keys cannot grow memory without bound.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use crate::config::RateLimit;
use crate::error::{Error, ErrorCode};

pub mod shared;
mod store;

/// Longest key kept as given; longer ones are hashed.
pub const MAX_KEY_BYTES: usize = 64;
/// Most keys one limiter tracks.
pub const MAX_KEYS: usize = 10_000;

pub struct RateLimiter {
    limit: RateLimit,
    hits: Mutex<HashMap<String, VecDeque<i64>>>,
}

fn bounded(key: &str) -> std::borrow::Cow<'_, str> {
    if key.len() <= MAX_KEY_BYTES {
        std::borrow::Cow::Borrowed(key)
    } else {
        std::borrow::Cow::Owned(format!("sha256:{}", hex::encode(Sha256::digest(key.as_bytes()))))
    }
}

impl RateLimiter {
    pub fn new(limit: RateLimit) -> Self {
        RateLimiter { limit, hits: Mutex::new(HashMap::new()) }
    }

    /// Counts one event for `key`, or fails with 429 `rate_limit_exceeded` (counting nothing) when
    /// the key has used its allowance. Check and count are one step, so concurrent callers cannot
    /// all pass a check before any of them counts.
    /// A limit of 0 counts nothing and refuses nothing.
    pub fn hit(&self, key: &str, now_ms: i64) -> Result<(), Error> {
        self.hit_as(key, now_ms, self.limit)
    }

    /// [`RateLimiter::hit`] under another limit for this key (a workspace's own setting). Use one
    /// window per limiter: the table prunes by the window each call passes.
    pub fn hit_as(&self, key: &str, now_ms: i64, limit: RateLimit) -> Result<(), Error> {
        if limit.max == 0 {
            return Ok(());
        }
        let window_ms = limit.window.as_millis() as i64;
        let key = bounded(key);
        let cutoff = now_ms - window_ms;
        let mut hits = self.hits.lock();
        if let Some(q) = hits.get_mut(key.as_ref()) {
            while q.front().is_some_and(|t| *t <= cutoff) {
                q.pop_front();
            }
            if q.len() as u32 >= limit.max {
                let retry_after_ms = q.front().map(|t| t + window_ms - now_ms).unwrap_or(0);
                return Err(refusal(limit, retry_after_ms));
            }
            q.push_back(now_ms);
            return Ok(());
        }
        if hits.len() >= MAX_KEYS {
            evict(&mut hits, cutoff);
        }
        hits.insert(key.into_owned(), VecDeque::from([now_ms]));
        Ok(())
    }

    /// Takes back one event counted at `at` (an attempt that succeeded, or that never ran).
    pub fn refund(&self, key: &str, at: i64) {
        let key = bounded(key);
        let mut hits = self.hits.lock();
        if let Some(q) = hits.get_mut(key.as_ref()) {
            if let Some(i) = q.iter().rposition(|t| *t == at) {
                q.remove(i);
            }
            if q.is_empty() {
                hits.remove(key.as_ref());
            }
        }
    }

    /// Keys tracked now (tests).
    pub fn len(&self) -> usize {
        self.hits.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The 429 of a limit, with when to try again (`Retry-After`).
pub(crate) fn refusal(limit: RateLimit, retry_after_ms: i64) -> Error {
    refusal_saying("too many attempts", limit, retry_after_ms)
}

/// [`refusal`] with its own words for what was exceeded.
pub(crate) fn refusal_saying(what: &str, limit: RateLimit, retry_after_ms: i64) -> Error {
    let secs = (retry_after_ms.max(0) + 999) / 1000;
    Error::new(ErrorCode::RateLimitExceeded, format!("{what}; try again in {secs} seconds")).with_details(
        serde_json::json!({
            "limit": limit.max,
            "windowSeconds": limit.window.as_secs(),
            "retryAfterSeconds": secs,
        }),
    )
}

/// Makes room in a full table: drops keys with no event inside the window, then, if that freed
/// less than an eighth, the least recently hit keys down to seven eighths of [`MAX_KEYS`].
fn evict(hits: &mut HashMap<String, VecDeque<i64>>, cutoff: i64) {
    hits.retain(|_, q| q.back().is_some_and(|t| *t > cutoff));
    let target = MAX_KEYS - MAX_KEYS / 8;
    if hits.len() <= target {
        return;
    }
    let mut last: Vec<i64> = hits.values().map(|q| q.back().copied().unwrap_or(i64::MIN)).collect();
    let drop = hits.len() - target;
    let (_, nth, _) = last.select_nth_unstable(drop - 1);
    let threshold = *nth;
    let mut dropped = 0;
    hits.retain(|_, q| {
        let keep = dropped >= drop || q.back().copied().unwrap_or(i64::MIN) > threshold;
        if !keep {
            dropped += 1;
        }
        keep
    });
}

/// How long a refused stream is told to wait before trying again.
pub const SLOT_RETRY_SECS: u64 = 10;

/// Places for long-lived requests per key (a visitor session, an address, a person, a credential):
/// at most `max` held at once per key. A place is held by a [`Slot`] and freed when it is dropped
/// (the stream ended or its client went away), so nothing leaks when a request dies early.
pub struct Slots {
    what: &'static str,
    max: usize,
    held: Mutex<HashMap<String, usize>>,
}

/// One held place; dropping it frees the place.
pub struct Slot {
    slots: std::sync::Arc<Slots>,
    key: String,
}

impl Slots {
    /// Caps `what` (named in the refusal: "event streams for this session") at `max` per key; `0`
    /// is no cap.
    pub fn new(what: &'static str, max: usize) -> std::sync::Arc<Slots> {
        std::sync::Arc::new(Slots { what, max, held: Mutex::new(HashMap::new()) })
    }

    /// Takes a place for `key`, or 429 `rate_limit_exceeded` with `Retry-After` when `key` holds
    /// its `max` already. Check and take are one step.
    pub fn acquire(self: &std::sync::Arc<Self>, key: &str) -> Result<Slot, Error> {
        let key = bounded(key).into_owned();
        if self.max > 0 {
            let mut held = self.held.lock();
            let n = held.entry(key.clone()).or_insert(0);
            if *n >= self.max {
                return Err(Error::new(
                    ErrorCode::RateLimitExceeded,
                    format!("too many open {}; close one or try again in {SLOT_RETRY_SECS} seconds", self.what),
                )
                .with_details(serde_json::json!({
                    "limit": self.max,
                    "retryAfterSeconds": SLOT_RETRY_SECS,
                })));
            }
            *n += 1;
        }
        Ok(Slot { slots: self.clone(), key })
    }

    /// Places held now for `key`.
    pub fn held(&self, key: &str) -> usize {
        self.held.lock().get(bounded(key).as_ref()).copied().unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.slots.max == 0 {
            return;
        }
        let mut held = self.slots.held.lock();
        if let Some(n) = held.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn limiter(max: u32) -> RateLimiter {
        RateLimiter::new(RateLimit { max, window: Duration::from_secs(60) })
    }

    #[test]
    fn allows_max_per_window_then_refuses_until_it_slides() {
        let rl = limiter(3);
        for i in 0..3 {
            rl.hit("k", 1000 + i).unwrap();
        }
        let err = rl.hit("k", 2000).unwrap_err();
        assert_eq!(err.code, ErrorCode::RateLimitExceeded);
        rl.hit("other", 2000).unwrap();
        rl.hit("k", 61_001).unwrap();
    }

    #[test]
    fn concurrent_hits_never_pass_more_than_the_limit() {
        let rl = std::sync::Arc::new(limiter(50));
        let passed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (rl, passed) = (rl.clone(), passed.clone());
                std::thread::spawn(move || {
                    for _ in 0..25 {
                        if rl.hit("addr", 1000).is_ok() {
                            passed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(passed.load(std::sync::atomic::Ordering::Relaxed), 50);
    }

    #[test]
    fn a_refund_gives_the_attempt_back() {
        let rl = limiter(2);
        rl.hit("k", 10).unwrap();
        rl.hit("k", 11).unwrap();
        assert!(rl.hit("k", 12).is_err());
        rl.refund("k", 11);
        rl.hit("k", 13).unwrap();
        rl.refund("k", 10);
        rl.refund("k", 13);
        assert!(rl.is_empty(), "an empty key is dropped");
    }

    #[test]
    fn slots_cap_what_is_held_and_free_on_drop() {
        let s = Slots::new("event streams", 2);
        let a = s.acquire("v1").unwrap();
        let b = s.acquire("v1").unwrap();
        let e = s.acquire("v1").err().unwrap();
        assert_eq!(e.code, ErrorCode::RateLimitExceeded);
        assert_eq!(e.details.as_ref().unwrap()["retryAfterSeconds"], SLOT_RETRY_SECS);
        let _other = s.acquire("v2").unwrap();
        drop(a);
        let _c = s.acquire("v1").unwrap();
        drop(b);
        assert_eq!(s.held("v1"), 1);
        drop(_c);
        assert_eq!(s.held("v1"), 0);
        assert_eq!(s.held.lock().len(), 1, "a key holding nothing is dropped");
        // no cap
        let open = Slots::new("streams", 0);
        let all: Vec<_> = (0..100).map(|_| open.acquire("k").unwrap()).collect();
        assert_eq!(all.len(), 100);
    }

    #[test]
    fn keys_and_the_table_are_bounded() {
        let rl = limiter(1);
        let long = "x".repeat(10_000);
        rl.hit(&long, 1).unwrap();
        assert!(rl.hit(&long, 2).is_err(), "a long key still counts");
        assert!(rl.hits.lock().keys().all(|k| k.len() <= MAX_KEY_BYTES + 8));
        for i in 0..(MAX_KEYS as i64 * 2) {
            rl.hit(&format!("k{i}"), 100 + i).unwrap();
        }
        assert!(rl.len() <= MAX_KEYS, "{}", rl.len());
        // the most recent keys are the ones kept
        let last = MAX_KEYS as i64 * 2 - 1;
        assert!(rl.hit(&format!("k{last}"), 100 + last + 1).is_err());
    }

    #[test]
    fn a_per_call_limit_overrides_the_limiters_own() {
        let rl = limiter(1);
        let three = RateLimit { max: 3, window: Duration::from_secs(60) };
        for t in 0..3 {
            rl.hit_as("v", t, three).unwrap();
        }
        let e = rl.hit_as("v", 3, three).unwrap_err();
        assert_eq!(e.details.unwrap()["limit"], 3);
        // no limit at all: nothing counted
        rl.hit_as("w", 0, RateLimit { max: 0, window: Duration::from_secs(60) }).unwrap();
        assert_eq!(rl.len(), 1);
    }
}
