//! Usage limits' deployment settings, from the environment (`EE_USAGE_ADMIN_TOKEN`,
//! `EE_MAX_ORGS_PER_USER_PER_MONTH`, `STEWARD_USAGE_RESERVATION_TTL_SECS`).

use std::time::Duration;

use crate::config::{ConfigError, Secret};

#[derive(Debug, Clone)]
pub struct UsageConfig {
    /// The bearer token of the `/api/v1/ee/usage-limits` admin routes; unset: they answer 503.
    pub admin_token: Option<Secret<String>>,
    /// Organizations a user may create through `POST /api/v1/account/accounts` per UTC month
    /// (a per-user override wins).
    pub max_orgs_per_user_per_month: u32,
    /// How long a reservation holds capacity when its work never settles or releases it (a stuck
    /// thread); reservations of a dead process are swept at start whatever their age.
    pub reservation_ttl: Duration,
}

impl Default for UsageConfig {
    fn default() -> Self {
        UsageConfig { admin_token: None, max_orgs_per_user_per_month: 10, reservation_ttl: Duration::from_secs(900) }
    }
}

fn invalid(name: &str, message: &str) -> ConfigError {
    ConfigError::Invalid { name: name.to_string(), message: message.to_string() }
}

/// The defaults with the environment over them.
pub fn load(env: &impl Fn(&str) -> Option<String>) -> Result<UsageConfig, ConfigError> {
    let mut c = UsageConfig::default();
    let get = |name: &str| env(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    c.admin_token = get("EE_USAGE_ADMIN_TOKEN").map(Secret::new);
    if let Some(v) = get("EE_MAX_ORGS_PER_USER_PER_MONTH") {
        c.max_orgs_per_user_per_month = v
            .parse::<u32>()
            .ok()
            .filter(|n| *n <= 1_000_000)
            .ok_or_else(|| invalid("EE_MAX_ORGS_PER_USER_PER_MONTH", "must be a whole number, 0 to 1,000,000"))?;
    }
    if let Some(v) = get("STEWARD_USAGE_RESERVATION_TTL_SECS") {
        let n = v
            .parse::<u64>()
            .ok()
            .filter(|n| (60..=86_400).contains(n))
            .ok_or_else(|| invalid("STEWARD_USAGE_RESERVATION_TTL_SECS", "must be 60 to 86400 seconds"))?;
        c.reservation_ttl = Duration::from_secs(n);
    }
    Ok(c)
}
