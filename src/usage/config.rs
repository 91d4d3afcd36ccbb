//! Usage limits' deployment settings, from the environment (`EE_USAGE_ADMIN_TOKEN`,
//! `EE_MAX_ORGS_PER_USER_PER_MONTH`).

use crate::config::{ConfigError, Secret};

#[derive(Debug, Clone)]
pub struct UsageConfig {
    /// The bearer token of the `/api/v1/ee/usage-limits` admin routes; unset: they answer 503.
    pub admin_token: Option<Secret<String>>,
    /// Organizations a user may create through `POST /api/v1/account/accounts` per UTC month
    /// (a per-user override wins).
    pub max_orgs_per_user_per_month: u32,
}

impl Default for UsageConfig {
    fn default() -> Self {
        UsageConfig { admin_token: None, max_orgs_per_user_per_month: 10 }
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
    Ok(c)
}
