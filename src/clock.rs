//! Time, behind a trait so tests can move it (token expiry, job backoff, rate-limit windows).

use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};

pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;

    fn now_ms(&self) -> i64 {
        self.now().timestamp_millis()
    }
}

/// The wall clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to.
pub struct FakeClock {
    ms: AtomicI64,
}

impl FakeClock {
    pub fn new(start: DateTime<Utc>) -> Self {
        FakeClock { ms: AtomicI64::new(start.timestamp_millis()) }
    }
    pub fn advance_ms(&self, ms: i64) {
        self.ms.fetch_add(ms, Ordering::SeqCst);
    }
    pub fn advance_secs(&self, secs: i64) {
        self.advance_ms(secs * 1000);
    }
}

impl Clock for FakeClock {
    fn now(&self) -> DateTime<Utc> {
        ms_to_datetime(self.ms.load(Ordering::SeqCst))
    }
}

pub fn ms_to_datetime(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_else(Utc::now)
}

/// The one textual timestamp format stored and returned: RFC 3339, UTC, milliseconds, `Z`.
/// It sorts lexicographically in time order, which the SQL relies on.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

pub fn parse_rfc3339(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s).ok().map(|t| t.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_clock_moves_only_when_told() {
        let c = FakeClock::new(parse_rfc3339("2026-01-01T00:00:00Z").unwrap());
        let a = c.now();
        c.advance_secs(90);
        assert_eq!((c.now() - a).num_seconds(), 90);
        assert_eq!(rfc3339(a), "2026-01-01T00:00:00.000Z");
    }
}
