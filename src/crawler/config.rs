//! The crawler's deployment settings, from the environment (`WEBSITE_CRAWLER_*`).

use std::time::Duration;

use crate::config::ConfigError;

/// How the crawler behaves towards the sites it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrawlerConfig {
    /// Pages a crawl fetches when its request names no limit (`WEBSITE_CRAWLER_DEFAULT_LIMIT`).
    pub default_limit: u32,
    /// The most pages one crawl may fetch (`WEBSITE_CRAWLER_MAX_LIMIT`).
    pub max_limit: u32,
    /// The `User-Agent` sent, and whose product token robots.txt groups are matched against
    /// (`WEBSITE_CRAWLER_USER_AGENT`).
    pub user_agent: String,
    /// Requests in flight to one site at once (`WEBSITE_CRAWLER_CONCURRENCY`, 1–8).
    pub concurrency: usize,
    /// The least time between two requests to one site (`WEBSITE_CRAWLER_MIN_DELAY_MS`); a
    /// robots.txt `Crawl-delay` longer than this wins.
    pub min_delay: Duration,
    /// The longest `Retry-After` the crawler waits for (a 429 or 503 asking for longer is
    /// recorded as a failure), and how many times it asks again.
    pub max_retry_wait: Duration,
    pub retries: u32,
}

pub const DEFAULT_USER_AGENT: &str =
    concat!("StewardCrawler/", env!("CARGO_PKG_VERSION"), " (+self-hosted; robots.txt)");

impl Default for CrawlerConfig {
    fn default() -> Self {
        CrawlerConfig {
            default_limit: 1000,
            max_limit: 1000,
            user_agent: DEFAULT_USER_AGENT.to_string(),
            concurrency: 2,
            min_delay: Duration::from_millis(250),
            max_retry_wait: Duration::from_secs(30),
            retries: 2,
        }
    }
}

fn invalid(name: &str, message: &str) -> ConfigError {
    ConfigError::Invalid { name: name.to_string(), message: message.to_string() }
}

/// The defaults with the environment's `WEBSITE_CRAWLER_*` over them.
pub fn load(env: &impl Fn(&str) -> Option<String>) -> Result<CrawlerConfig, ConfigError> {
    let mut c = CrawlerConfig::default();
    let get = |name: &str| env(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let number = |name: &str, range: std::ops::RangeInclusive<u64>, what: &str| -> Result<Option<u64>, ConfigError> {
        match get(name) {
            None => Ok(None),
            Some(v) => v.parse::<u64>().ok().filter(|n| range.contains(n)).map(Some).ok_or_else(|| invalid(name, what)),
        }
    };
    if let Some(n) = number("WEBSITE_CRAWLER_MAX_LIMIT", 1..=1_000_000, "must be 1 to 1,000,000 pages")? {
        c.max_limit = n as u32;
    }
    if let Some(n) = number("WEBSITE_CRAWLER_DEFAULT_LIMIT", 1..=1_000_000, "must be 1 to 1,000,000 pages")? {
        c.default_limit = n as u32;
    }
    c.default_limit = c.default_limit.min(c.max_limit);
    if let Some(ua) = get("WEBSITE_CRAWLER_USER_AGENT") {
        if ua.len() > 300 || ua.chars().any(|ch| ch.is_control()) {
            return Err(invalid("WEBSITE_CRAWLER_USER_AGENT", "must be one line of at most 300 characters"));
        }
        c.user_agent = ua;
    }
    if let Some(n) = number("WEBSITE_CRAWLER_CONCURRENCY", 1..=8, "must be 1 to 8")? {
        c.concurrency = n as usize;
    }
    if let Some(n) = number("WEBSITE_CRAWLER_MIN_DELAY_MS", 0..=60_000, "must be 0 to 60000 milliseconds")? {
        c.min_delay = Duration::from_millis(n);
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_sets_limits_and_bad_values_are_refused() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        let c = load(&env(&[("WEBSITE_CRAWLER_MAX_LIMIT", "50"), ("WEBSITE_CRAWLER_MIN_DELAY_MS", "0")])).unwrap();
        assert_eq!((c.max_limit, c.default_limit, c.min_delay), (50, 50, Duration::ZERO));
        assert_eq!(load(&env(&[])).unwrap(), CrawlerConfig::default());
        for bad in [
            ("WEBSITE_CRAWLER_MAX_LIMIT", "0"),
            ("WEBSITE_CRAWLER_CONCURRENCY", "99"),
            ("WEBSITE_CRAWLER_USER_AGENT", "a\nb"),
        ] {
            let pairs: &'static [(&'static str, &'static str)] = Box::leak(Box::new([bad]));
            assert!(load(&env(pairs)).is_err(), "{bad:?}");
        }
    }
}
