//! Who uses the local model next: one generation at a time (two would only halve each other's
//! speed on a small machine), first come first served, a waiting caller told how many are ahead
//! of it (the stream's `waiting` status), a cancelled caller leaving the line at once. And how
//! many threads a generation takes: the cores not already busy with other work, at most the
//! configured number.

use std::collections::VecDeque;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::super::Cancel;

/// How often a waiting caller looks at its cancellation (a superseded turn leaves the line
/// within this).
const CANCEL_CHECK: Duration = Duration::from_millis(50);

#[derive(Default)]
pub struct Queue {
    line: Mutex<Line>,
    moved: Condvar,
}

#[derive(Default)]
struct Line {
    next: u64,
    waiting: VecDeque<u64>,
}

/// The model, held: dropping it lets the next caller in.
pub struct Held<'q> {
    queue: &'q Queue,
    ticket: u64,
}

impl Queue {
    /// Waits for the caller's turn. `on_wait(ahead)` is called when the caller has to wait,
    /// whenever the number ahead of it changes, and with 0 when its turn comes after a wait;
    /// `None` when `cancel` fired while waiting.
    pub fn enter<'q>(&'q self, on_wait: &mut dyn FnMut(usize), cancel: &Cancel) -> Option<Held<'q>> {
        let mut line = self.line.lock();
        let ticket = line.next;
        line.next += 1;
        line.waiting.push_back(ticket);
        let mut told = None;
        loop {
            let ahead = line.waiting.iter().position(|&t| t == ticket).unwrap_or(0);
            if ahead == 0 {
                if told.is_some() {
                    drop(line);
                    on_wait(0);
                }
                return Some(Held { queue: self, ticket });
            }
            if cancel.is_cancelled() {
                line.waiting.retain(|&t| t != ticket);
                drop(line);
                self.moved.notify_all();
                return None;
            }
            if told != Some(ahead) {
                told = Some(ahead);
                // tell without holding the line: the callback may stream to a client
                parking_lot::MutexGuard::unlocked(&mut line, || on_wait(ahead));
                continue;
            }
            self.moved.wait_for(&mut line, CANCEL_CHECK);
        }
    }

    /// Nobody waits or runs.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.line.lock().waiting.is_empty()
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.queue.line.lock().waiting.retain(|&t| t != self.ticket);
        self.queue.moved.notify_all();
    }
}

/// Threads for one generation: `max` when set explicitly (`fixed`), else the cores not running
/// something else right now (the running count of `/proc/loadavg`, less this thread), between 1
/// and `max`. llama.cpp's threads spin while they wait for each other, so one that shares a core
/// with ingestion or HTTP work slows the whole generation down to a few tokens per second.
pub fn threads_now(max: usize, fixed: bool) -> usize {
    let max = max.max(1);
    if fixed {
        return max;
    }
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let running = std::fs::read_to_string("/proc/loadavg").ok().and_then(|s| running_tasks(&s)).unwrap_or(1);
    idle_cores(cores, running).clamp(1, max)
}

/// The running count in `/proc/loadavg` (`0.52 0.58 0.59 3/467 12345`: the `3`).
fn running_tasks(loadavg: &str) -> Option<usize> {
    loadavg.split_whitespace().nth(3)?.split('/').next()?.parse().ok()
}

/// Cores left when `running` tasks run, one of them the caller.
fn idle_cores(cores: usize, running: usize) -> usize {
    cores.saturating_sub(running.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::mpsc;

    #[test]
    fn callers_go_in_order_and_a_cancelled_one_leaves_the_line() {
        let q = Arc::new(Queue::default());
        let first = q.enter(&mut |_| panic!("the first caller never waits"), &Cancel::new()).unwrap();
        let (tx, rx) = mpsc::channel();
        // a second caller waits with one ahead, then is cancelled
        let cancel = Cancel::new();
        let (q2, c2, tx2) = (q.clone(), cancel.clone(), tx.clone());
        let second = std::thread::spawn(move || {
            let got = q2.enter(&mut |ahead| tx2.send(("second", ahead)).unwrap(), &c2);
            got.is_some()
        });
        assert_eq!(rx.recv().unwrap(), ("second", 1));
        // a third caller queues behind it
        let q3 = q.clone();
        let third = std::thread::spawn(move || {
            let _held = q3.enter(&mut |ahead| tx.send(("third", ahead)).unwrap(), &Cancel::new()).unwrap();
        });
        assert_eq!(rx.recv().unwrap(), ("third", 2));
        cancel.cancel();
        assert!(!second.join().unwrap(), "the cancelled caller got nothing");
        assert_eq!(rx.recv().unwrap(), ("third", 1), "the third moved up");
        drop(first);
        assert_eq!(rx.recv().unwrap(), ("third", 0), "told when its turn comes");
        third.join().unwrap();
        assert!(q.is_empty());
    }

    #[test]
    fn threads_follow_the_idle_cores() {
        assert_eq!(running_tasks("0.52 0.58 0.59 3/467 12345"), Some(3));
        assert_eq!(running_tasks("garbage"), None);
        assert_eq!(idle_cores(2, 1), 2, "only the caller runs");
        assert_eq!(idle_cores(2, 2), 1, "one core busy elsewhere");
        assert_eq!(idle_cores(2, 5), 0);
        assert_eq!(threads_now(3, true), 3);
        assert!((1..=2).contains(&threads_now(2, false)));
    }
}
