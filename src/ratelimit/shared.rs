//! Limits counted in the database: sign-in attempts per email and per client address,
//! registrations per address, and a visitor's messages per day. Each counted event is a row, so a
//! limit holds across every node behind a balancer and across restarts (an attacker who spreads
//! guesses over the nodes, or waits for a restart, gains nothing). Check and count are one write
//! transaction: on SQLite the one writer, on PostgreSQL the write lock every node takes, so
//! concurrent attempts on any node cannot all pass a check before one counts.
//!
//! Keys are stored as SHA-256 digests, so the table shows no email or address in clear (a digest
//! of an address could be found by trying them all; the rows live about one window). Each count
//! forgets a batch of its scope's events that are an hour past any window (the margin covers
//! nodes whose clocks differ a little), so the table holds about a window's worth of events.
//! Every node must run with the same limits (the same configuration), as for everything else.

use sha2::{Digest, Sha256};

use super::{refusal, refusal_saying, store};
use crate::config::RateLimit;
use crate::error::{Error, Result};
use crate::storage::{Conn, Db, Tx};

const DAY_MS: i64 = 86_400_000;
/// How long past its window an event is kept before it is forgotten.
const FORGET_MARGIN_MS: i64 = 3_600_000;

/// What is limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Sign-in attempts for one email.
    SignInEmail,
    /// Sign-in attempts from one client address.
    SignInAddress,
    /// Registrations from one client address.
    Registration,
    /// Messages of one public chat visitor session in a UTC day.
    VisitorDay,
}

impl Scope {
    fn as_str(self) -> &'static str {
        match self {
            Scope::SignInEmail => "sign_in_email",
            Scope::SignInAddress => "sign_in_address",
            Scope::Registration => "registration",
            Scope::VisitorDay => "visitor_day",
        }
    }
}

/// How many events a key may have, and over what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowance {
    /// At most `max` in any window of `window` (the last `window` before now).
    Sliding(RateLimit),
    /// At most this many in a UTC day; the count starts again at midnight UTC.
    PerUtcDay(u32),
}

impl Allowance {
    fn max(self) -> u32 {
        match self {
            Allowance::Sliding(l) => l.max,
            Allowance::PerUtcDay(max) => max,
        }
    }

    /// Events at or before this instant no longer count.
    fn horizon(self, now_ms: i64) -> i64 {
        match self {
            Allowance::Sliding(l) => now_ms - l.window.as_millis() as i64,
            Allowance::PerUtcDay(_) => now_ms.div_euclid(DAY_MS) * DAY_MS - 1,
        }
    }

    /// The 429 when `oldest` is the oldest event still counting.
    fn refused(self, now_ms: i64, oldest: i64) -> Error {
        match self {
            Allowance::Sliding(l) => refusal(l, oldest + l.window.as_millis() as i64 - now_ms),
            Allowance::PerUtcDay(max) => refusal_saying(
                "the allowance for today is used up",
                RateLimit { max, window: std::time::Duration::from_millis(DAY_MS as u64) },
                (now_ms.div_euclid(DAY_MS) + 1) * DAY_MS - now_ms,
            ),
        }
    }
}

fn hashed(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// Counts one event of `key` at `now_ms`, or fails with 429 `rate_limit_exceeded` (with when to
/// try again) when `key` has used its allowance; the error fails `tx`, so nothing it counted
/// stays. An allowance of 0 counts nothing and refuses nothing.
pub fn hit(tx: &Tx, scope: Scope, key: &str, now_ms: i64, allowance: Allowance) -> Result<()> {
    if allowance.max() == 0 {
        return Ok(());
    }
    let key = hashed(key);
    let horizon = allowance.horizon(now_ms);
    within(tx, scope, &key, now_ms, allowance)?;
    store::insert(tx, scope.as_str(), &key, now_ms, horizon - FORGET_MARGIN_MS)
}

/// What one event is counted under: its scope, its key and the key's allowance.
pub type Limit<'a> = (Scope, &'a str, Allowance);

/// Counts one event at `now_ms` under each of `limits`, all or none, or the 429 of the first one
/// used up. A read refuses a flood past a limit first, without the write lock; then one write
/// transaction checks and counts ([`hit`]).
pub fn count(db: &Db, now_ms: i64, limits: &[Limit]) -> Result<()> {
    db.read(|c| limits.iter().try_for_each(|&(scope, key, a)| check(c, scope, key, now_ms, a)))?;
    db.write(|tx| limits.iter().try_for_each(|&(scope, key, a)| hit(tx, scope, key, now_ms, a)))
}

/// The 429 `key` would get now, read without counting anything.
fn check(c: &Conn, scope: Scope, key: &str, now_ms: i64, allowance: Allowance) -> Result<()> {
    if allowance.max() == 0 {
        return Ok(());
    }
    within(c, scope, &hashed(key), now_ms, allowance)
}

fn within(c: &Conn, scope: Scope, hashed_key: &str, now_ms: i64, allowance: Allowance) -> Result<()> {
    let (count, oldest) = store::window(c, scope.as_str(), hashed_key, allowance.horizon(now_ms))?;
    if count >= i64::from(allowance.max()) {
        return Err(allowance.refused(now_ms, oldest.unwrap_or(now_ms)));
    }
    Ok(())
}

/// Takes back one event of `key` counted at `at_ms` (an attempt that succeeded, or that the server
/// could not check).
pub fn refund(tx: &Tx, scope: Scope, key: &str, at_ms: i64) -> Result<()> {
    store::remove_one(tx, scope.as_str(), &hashed(key), at_ms)
}

/// Forgets every event of `key` (a sign-in that succeeded clears its email's failures).
pub fn reset(tx: &Tx, scope: Scope, key: &str) -> Result<()> {
    store::remove_all(tx, scope.as_str(), &hashed(key))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::error::ErrorCode;
    use crate::storage::Db;

    fn db() -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("steward.db"), 1).unwrap();
        (dir, db)
    }

    fn rows(db: &Db) -> i64 {
        db.read(|c| Ok(store::keys(c)?.len() as i64)).unwrap()
    }

    #[test]
    fn a_sliding_window_refuses_past_its_max_until_the_oldest_leaves_it() {
        let (_d, db) = db();
        let three = Allowance::Sliding(RateLimit { max: 3, window: Duration::from_secs(60) });
        for t in [1_000, 2_000, 3_000] {
            db.write(|tx| hit(tx, Scope::SignInEmail, "a@x", t, three)).unwrap();
        }
        let e = db.write(|tx| hit(tx, Scope::SignInEmail, "a@x", 4_000, three)).unwrap_err();
        assert_eq!(e.code, ErrorCode::RateLimitExceeded);
        assert_eq!(e.details.unwrap()["retryAfterSeconds"], 57);
        // another key, another scope: their own allowance
        db.write(|tx| hit(tx, Scope::SignInEmail, "b@x", 4_000, three)).unwrap();
        db.write(|tx| hit(tx, Scope::SignInAddress, "a@x", 4_000, three)).unwrap();
        // the first event leaves the window at 61 s; a check reads what a hit would say
        db.read(|c| check(c, Scope::SignInEmail, "a@x", 61_001, three)).unwrap();
        db.write(|tx| hit(tx, Scope::SignInEmail, "a@x", 61_001, three)).unwrap();
        assert_eq!(rows(&db), 6);
        let e = db.read(|c| check(c, Scope::SignInEmail, "a@x", 61_002, three)).unwrap_err();
        assert_eq!(e.code, ErrorCode::RateLimitExceeded);
        assert_eq!(rows(&db), 6, "a check counts nothing");
        // an hour past the window, a count forgets the scope's old events (here all but its own)
        db.write(|tx| hit(tx, Scope::SignInEmail, "b@x", 3_700_000, three)).unwrap();
        assert_eq!(rows(&db), 3, "a@x's old three and b@x's old one are forgotten; the address's stays");
        // keys are kept hashed
        let keys = db.read(store::keys).unwrap();
        assert!(keys.iter().all(|k| k.len() == 64 && !k.contains('@')), "{keys:?}");
    }

    #[test]
    fn a_refused_hit_counts_nothing_and_fails_its_transaction() {
        let (_d, db) = db();
        let one = Allowance::Sliding(RateLimit { max: 1, window: Duration::from_secs(60) });
        db.write(|tx| hit(tx, Scope::SignInAddress, "10.0.0.1", 0, one)).unwrap();
        let r = db.write(|tx| {
            hit(tx, Scope::SignInEmail, "a@x", 10, one)?;
            hit(tx, Scope::SignInAddress, "10.0.0.1", 10, one)
        });
        assert!(r.is_err());
        assert_eq!(rows(&db), 1, "the email's count went with the refused transaction");
    }

    #[test]
    fn refund_and_reset_give_events_back() {
        let (_d, db) = db();
        let two = Allowance::Sliding(RateLimit { max: 2, window: Duration::from_secs(60) });
        db.write(|tx| hit(tx, Scope::Registration, "k", 10, two)).unwrap();
        db.write(|tx| hit(tx, Scope::Registration, "k", 11, two)).unwrap();
        assert!(db.write(|tx| hit(tx, Scope::Registration, "k", 12, two)).is_err());
        db.write(|tx| refund(tx, Scope::Registration, "k", 11)).unwrap();
        db.write(|tx| hit(tx, Scope::Registration, "k", 13, two)).unwrap();
        assert_eq!(rows(&db), 2, "one refund takes back one event");
        db.write(|tx| reset(tx, Scope::Registration, "k")).unwrap();
        assert_eq!(rows(&db), 0);
        // no allowance: nothing counted
        let none = Allowance::Sliding(RateLimit { max: 0, window: Duration::from_secs(60) });
        db.write(|tx| hit(tx, Scope::Registration, "k", 14, none)).unwrap();
        assert_eq!(rows(&db), 0);
    }

    #[test]
    fn a_count_forgets_a_bounded_batch_of_old_events() {
        let (_d, db) = db();
        let many = Allowance::Sliding(RateLimit { max: 1_000, window: Duration::from_secs(60) });
        for t in 0..(store::FORGET_AT_ONCE + 10) {
            db.write(|tx| hit(tx, Scope::Registration, "k", t, many)).unwrap();
        }
        let later = 60_000 + FORGET_MARGIN_MS + 100;
        db.write(|tx| hit(tx, Scope::Registration, "k", later, many)).unwrap();
        assert_eq!(rows(&db), 11, "one batch forgotten, the rest by the next counts");
        db.write(|tx| hit(tx, Scope::Registration, "k", later + 1, many)).unwrap();
        assert_eq!(rows(&db), 2);
    }

    #[test]
    fn a_daily_allowance_refuses_until_midnight_utc_then_starts_again() {
        let (_d, db) = db();
        let noon = 20_000 * DAY_MS + DAY_MS / 2;
        let two = Allowance::PerUtcDay(2);
        db.write(|tx| hit(tx, Scope::VisitorDay, "v", noon, two)).unwrap();
        db.write(|tx| hit(tx, Scope::VisitorDay, "v", noon + 1, two)).unwrap();
        let e = db.write(|tx| hit(tx, Scope::VisitorDay, "v", noon + 2, two)).unwrap_err();
        let d = e.details.unwrap();
        assert_eq!((d["limit"].as_u64(), d["retryAfterSeconds"].as_i64()), (Some(2), Some(43_200)));
        db.write(|tx| hit(tx, Scope::VisitorDay, "other", noon + 3, two)).unwrap();
        db.write(|tx| hit(tx, Scope::VisitorDay, "late", 20_001 * DAY_MS - 600_000, two)).unwrap();
        // a new day starts afresh, and forgets yesterday's events but the last hour's
        db.write(|tx| hit(tx, Scope::VisitorDay, "v", 20_001 * DAY_MS, two)).unwrap();
        assert_eq!(rows(&db), 2, "23:50's event and today's");
        db.write(|tx| hit(tx, Scope::VisitorDay, "v", 20_001 * DAY_MS + 1, two)).unwrap();
        assert!(db.write(|tx| hit(tx, Scope::VisitorDay, "v", 20_001 * DAY_MS + 2, two)).is_err());
        db.write(|tx| hit(tx, Scope::VisitorDay, "v", 20_001 * DAY_MS, Allowance::PerUtcDay(0))).unwrap();
    }
}
