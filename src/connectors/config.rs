//! The connectors' deployment settings, from the environment: where the WhatsApp Graph API is
//! (`STEWARD_WHATSAPP_GRAPH_BASE_URL`: tests point it at a local server, some sites reach Meta
//! through a proxy) and how long a burst of messages is gathered into one turn
//! (`STEWARD_WHATSAPP_BURST_MS`).

use std::time::Duration;

use crate::config::ConfigError;

/// The Graph API version Steward speaks.
pub const DEFAULT_GRAPH_BASE_URL: &str = "https://graph.facebook.com/v21.0";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectorsConfig {
    /// The Graph API base, without a trailing slash; messages go to `{base}/{phone_number_id}/messages`.
    pub graph_base_url: String,
    /// Text messages from one sender arriving within this window of the first are answered as one
    /// turn (the turn runs this long after the first message).
    pub burst: Duration,
}

impl Default for ConnectorsConfig {
    fn default() -> Self {
        ConnectorsConfig { graph_base_url: DEFAULT_GRAPH_BASE_URL.to_string(), burst: Duration::from_millis(2000) }
    }
}

fn invalid(name: &str, message: &str) -> ConfigError {
    ConfigError::Invalid { name: name.to_string(), message: message.to_string() }
}

/// The defaults with the environment over them.
pub fn load(env: &impl Fn(&str) -> Option<String>) -> Result<ConnectorsConfig, ConfigError> {
    let mut c = ConnectorsConfig::default();
    let get = |name: &str| env(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    if let Some(v) = get("STEWARD_WHATSAPP_GRAPH_BASE_URL") {
        let name = "STEWARD_WHATSAPP_GRAPH_BASE_URL";
        let u = url::Url::parse(&v).map_err(|_| invalid(name, "must be an http(s) URL"))?;
        if !matches!(u.scheme(), "http" | "https") || u.query().is_some() {
            return Err(invalid(name, "must be an http(s) URL without a query"));
        }
        c.graph_base_url = v.trim_end_matches('/').to_string();
    }
    if let Some(v) = get("STEWARD_WHATSAPP_BURST_MS") {
        let ms: u64 = v
            .parse()
            .ok()
            .filter(|n| *n <= 60_000)
            .ok_or_else(|| invalid("STEWARD_WHATSAPP_BURST_MS", "must be 0 to 60000 milliseconds"))?;
        c.burst = Duration::from_millis(ms);
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_moves_the_graph_api_and_the_burst_window() {
        let env = |k: &str| match k {
            "STEWARD_WHATSAPP_GRAPH_BASE_URL" => Some("https://127.0.0.1:8443/v21.0/".to_string()),
            "STEWARD_WHATSAPP_BURST_MS" => Some("500".to_string()),
            _ => None,
        };
        let c = load(&env).unwrap();
        assert_eq!(c.graph_base_url, "https://127.0.0.1:8443/v21.0");
        assert_eq!(c.burst, Duration::from_millis(500));
        assert_eq!(load(&|_: &str| None).unwrap(), ConnectorsConfig::default());
        assert!(load(&|k: &str| (k == "STEWARD_WHATSAPP_GRAPH_BASE_URL").then(|| "ftp://x".to_string())).is_err());
        assert!(load(&|k: &str| (k == "STEWARD_WHATSAPP_BURST_MS").then(|| "x".to_string())).is_err());
    }
}
