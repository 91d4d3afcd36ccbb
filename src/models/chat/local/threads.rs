//! How many threads a generation takes: the cores not already busy with other work, at most the
//! configured number.

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
