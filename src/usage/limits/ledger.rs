//! The capacity answers in flight hold, kept in memory.
//!
//! Only the process holding the data-directory lock serves answers, so it alone can reserve:
//! a reservation needs no row and no write transaction. The check reads the meter's settled value
//! and adds what live reservations hold, all under one lock; a reservation stops holding only after
//! the transaction that moved the meter committed ([`Ledger::release`] is called after the commit),
//! so between that commit and the release the amount counts twice (a refusal at most, never an
//! overshoot). A process that dies takes its reservations with it: nothing is held after a
//! restart, and its work never committed.

use std::collections::HashMap;

use parking_lot::Mutex;

/// What one meter of one account holds in one period.
type Key = (String, &'static str, String);

#[derive(Default)]
pub struct Ledger {
    held: Mutex<HashMap<Key, i64>>,
}

impl Ledger {
    /// Runs `check` with what the meter holds now; when it returns `Ok(amount)` with `amount > 0`,
    /// that amount is held until [`Ledger::release`]. The lock is held across `check` (which reads
    /// the settled meter), so no two reservations of the whole process interleave.
    pub fn reserve<E>(
        &self,
        (org, meter, period): (&str, &'static str, &str),
        check: impl FnOnce(i64) -> Result<i64, E>,
    ) -> Result<i64, E> {
        let mut held = self.held.lock();
        let key = (org.to_string(), meter, period.to_string());
        let now = held.get(&key).copied().unwrap_or(0);
        let amount = check(now)?;
        if amount > 0 {
            *held.entry(key).or_insert(0) += amount;
        }
        Ok(amount)
    }

    /// Gives back `amount` (the work committed its meter, or failed before committing).
    pub fn release(&self, (org, meter, period): (&str, &'static str, &str), amount: i64) {
        if amount <= 0 {
            return;
        }
        let mut held = self.held.lock();
        let key = (org.to_string(), meter, period.to_string());
        if let Some(v) = held.get_mut(&key) {
            *v -= amount;
            if *v <= 0 {
                held.remove(&key);
            }
        }
    }

    /// Reservations' total amount an account holds now, over its meters and periods.
    pub fn held(&self, org: &str) -> i64 {
        self.held.lock().iter().filter(|((o, _, _), _)| o == org).map(|(_, v)| *v).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_until_released_and_refuses_past_the_cap() {
        let l = Ledger::default();
        let key = ("org", "monthly_answers", "2026-11");
        let cap = 3;
        let check = |settled: i64| move |held: i64| if settled + held + 1 > cap { Err("full") } else { Ok(1) };
        assert_eq!(l.reserve(key, check(1)), Ok(1));
        assert_eq!(l.reserve(key, check(1)), Ok(1));
        assert_eq!(l.reserve(key, check(1)), Err("full"));
        assert_eq!(l.held("org"), 2);
        l.release(key, 1);
        assert_eq!(l.reserve(key, check(1)), Ok(1));
        l.release(key, 1);
        l.release(key, 1);
        assert_eq!(l.held("org"), 0);
        // another period, another account: separate
        assert_eq!(l.reserve(("org", "monthly_answers", "2026-12"), check(0)), Ok(1));
        assert_eq!(l.reserve(("other", "monthly_answers", "2026-11"), check(0)), Ok(1));
        assert_eq!(l.held("org"), 1);
    }

    #[test]
    fn a_zero_amount_holds_nothing() {
        let l = Ledger::default();
        assert_eq!(l.reserve::<()>(("o", "m", "p"), |_| Ok(0)), Ok(0));
        assert_eq!(l.held("o"), 0);
        l.release(("o", "m", "p"), 5);
        assert_eq!(l.held("o"), 0);
    }
}
