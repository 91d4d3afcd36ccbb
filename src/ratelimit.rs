//! In-memory sliding-window rate limits (login attempts, uploads). Per process: a restart forgets
//! them, which is acceptable for a single-binary appliance.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;

use crate::config::RateLimit;
use crate::error::{Error, ErrorCode};

pub struct RateLimiter {
    limit: RateLimit,
    hits: Mutex<HashMap<String, VecDeque<i64>>>,
}

impl RateLimiter {
    pub fn new(limit: RateLimit) -> Self {
        RateLimiter { limit, hits: Mutex::new(HashMap::new()) }
    }

    fn window_ms(&self) -> i64 {
        self.limit.window.as_millis() as i64
    }

    /// Fails with 429 `rate_limit_exceeded` when `key` has used its allowance, without recording.
    pub fn check(&self, key: &str, now_ms: i64) -> Result<(), Error> {
        let mut hits = self.hits.lock();
        let Some(q) = hits.get_mut(key) else {
            return Ok(());
        };
        while q.front().is_some_and(|t| *t <= now_ms - self.window_ms()) {
            q.pop_front();
        }
        if q.len() as u32 >= self.limit.max {
            let retry_after_ms = q.front().map(|t| t + self.window_ms() - now_ms).unwrap_or(0);
            return Err(self.error(retry_after_ms));
        }
        Ok(())
    }

    /// Records one event for `key`.
    pub fn record(&self, key: &str, now_ms: i64) {
        let mut hits = self.hits.lock();
        if hits.len() > 10_000 {
            let cutoff = now_ms - self.window_ms();
            hits.retain(|_, q| q.back().is_some_and(|t| *t > cutoff));
        }
        hits.entry(key.to_string()).or_default().push_back(now_ms);
    }

    /// Checks and records in one step.
    pub fn hit(&self, key: &str, now_ms: i64) -> Result<(), Error> {
        self.check(key, now_ms)?;
        self.record(key, now_ms);
        Ok(())
    }

    pub fn reset(&self, key: &str) {
        self.hits.lock().remove(key);
    }

    fn error(&self, retry_after_ms: i64) -> Error {
        let secs = (retry_after_ms.max(0) + 999) / 1000;
        Error::new(ErrorCode::RateLimitExceeded, format!("too many attempts; try again in {secs} seconds"))
            .with_details(serde_json::json!({
                "limit": self.limit.max,
                "windowSeconds": self.limit.window.as_secs(),
                "retryAfterSeconds": secs,
            }))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn allows_max_per_window_then_refuses_until_it_slides() {
        let rl = RateLimiter::new(RateLimit { max: 3, window: Duration::from_secs(60) });
        for i in 0..3 {
            rl.hit("k", 1000 + i).unwrap();
        }
        let err = rl.hit("k", 2000).unwrap_err();
        assert_eq!(err.code, ErrorCode::RateLimitExceeded);
        rl.hit("other", 2000).unwrap();
        rl.hit("k", 61_001).unwrap();
    }
}
