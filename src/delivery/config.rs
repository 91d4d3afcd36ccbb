//! Delivery's deployment settings: the SSRF guard's allow-list and trust, and the SMTP server.
//! From the config file's `[delivery]` and `[smtp]` tables, then `STEWARD_DELIVERY_*` and
//! `STEWARD_SMTP_*` variables.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::config::{ConfigError, Secret};

/// How outbound requests are made and what they may reach.
#[derive(Debug, Clone)]
pub struct DeliveryConfig {
    /// Networks (`10.0.0.0/8`, `fd00::/8`, one address) and host names admitted although the guard
    /// refuses them by default; plain `http://` is allowed to them too. Empty (the default): only
    /// public addresses over HTTPS.
    pub allow: Vec<String>,
    /// A PEM file of extra CA certificates trusted for HTTPS deliveries (an intranet CA).
    pub ca_file: Option<PathBuf>,
    pub connect_timeout: Duration,
    /// The whole request, redirects included.
    pub timeout: Duration,
    /// Most bytes of a webhook's response read (the rest is dropped unread: only a prefix is
    /// kept, for the delivery log).
    pub max_response_bytes: usize,
    /// Most bytes of one outbound MCP answer (a JSON body, or one event stream as a whole): MCP
    /// messages must arrive whole, so an answer over it is aborted, not truncated.
    pub mcp_max_response_bytes: usize,
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        DeliveryConfig {
            allow: Vec::new(),
            ca_file: None,
            connect_timeout: Duration::from_secs(5),
            timeout: Duration::from_secs(15),
            max_response_bytes: 64 * 1024,
            mcp_max_response_bytes: 1024 * 1024,
        }
    }
}

/// How the SMTP connection is secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SmtpSecurity {
    /// Plain connection upgraded with STARTTLS (required); port 587 by default.
    Starttls,
    /// TLS from the first byte; port 465 by default.
    Tls,
    /// No encryption (a relay on the same host or network); port 25 by default.
    None,
}

impl SmtpSecurity {
    pub fn as_str(self) -> &'static str {
        match self {
            SmtpSecurity::Starttls => "starttls",
            SmtpSecurity::Tls => "tls",
            SmtpSecurity::None => "none",
        }
    }
    fn default_port(self) -> u16 {
        match self {
            SmtpSecurity::Starttls => 587,
            SmtpSecurity::Tls => 465,
            SmtpSecurity::None => 25,
        }
    }
}

/// The SMTP server email deliveries go through.
#[derive(Debug, Clone)]
pub struct SmtpConfig {
    pub host: String,
    pub port: u16,
    pub security: SmtpSecurity,
    pub username: Option<String>,
    pub password: Option<Secret<String>>,
    /// The `From:` address (`Steward <steward@example.com>` or a bare address).
    pub from: String,
}

/// `[delivery]` in the config file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileDelivery {
    pub allow: Option<Vec<String>>,
    pub ca_file: Option<PathBuf>,
    pub connect_timeout_secs: Option<u64>,
    pub timeout_secs: Option<u64>,
    pub mcp_max_response_bytes: Option<usize>,
}

/// `[smtp]` in the config file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSmtp {
    pub host: Option<String>,
    pub port: Option<u16>,
    pub security: Option<SmtpSecurity>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub from: Option<String>,
}

fn invalid(name: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { name: name.to_string(), message: message.into() }
}

/// Builds the delivery and SMTP settings from the file and the environment (the environment wins).
pub fn load(
    fd: &FileDelivery,
    fs: &FileSmtp,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<(DeliveryConfig, Option<SmtpConfig>), ConfigError> {
    let mut d = DeliveryConfig::default();
    if let Some(a) = &fd.allow {
        d.allow = a.clone();
    }
    if let Some(v) = env("STEWARD_DELIVERY_ALLOW") {
        d.allow = v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
    }
    for rule in &d.allow {
        super::guard::AllowRule::parse(rule).map_err(|m| invalid("delivery.allow", m))?;
    }
    d.ca_file = env("STEWARD_DELIVERY_CA_FILE").map(PathBuf::from).or_else(|| fd.ca_file.clone());
    let secs = |name: &str, file: Option<u64>| -> Result<Option<u64>, ConfigError> {
        match env(name) {
            Some(v) => v.parse().map(Some).map_err(|_| invalid(name, "must be a whole number of seconds")),
            None => Ok(file),
        }
    };
    if let Some(s) = secs("STEWARD_DELIVERY_CONNECT_TIMEOUT_SECS", fd.connect_timeout_secs)? {
        d.connect_timeout = Duration::from_secs(s.clamp(1, 60));
    }
    if let Some(s) = secs("STEWARD_DELIVERY_TIMEOUT_SECS", fd.timeout_secs)? {
        d.timeout = Duration::from_secs(s.clamp(1, 300));
    }
    let mcp_max = match env("STEWARD_DELIVERY_MCP_MAX_RESPONSE_BYTES") {
        Some(v) => Some(
            v.parse::<usize>()
                .map_err(|_| invalid("STEWARD_DELIVERY_MCP_MAX_RESPONSE_BYTES", "must be a number of bytes"))?,
        ),
        None => fd.mcp_max_response_bytes,
    };
    if let Some(n) = mcp_max {
        d.mcp_max_response_bytes = n.clamp(4 * 1024, 64 * 1024 * 1024);
    }
    Ok((d, smtp(fs, env)?))
}

fn smtp(fs: &FileSmtp, env: &impl Fn(&str) -> Option<String>) -> Result<Option<SmtpConfig>, ConfigError> {
    let pick = |name: &str, file: &Option<String>| env(name).filter(|v| !v.is_empty()).or_else(|| file.clone());
    let Some(host) = pick("STEWARD_SMTP_HOST", &fs.host) else {
        return Ok(None);
    };
    let security = match env("STEWARD_SMTP_SECURITY") {
        Some(v) => match v.as_str() {
            "starttls" => SmtpSecurity::Starttls,
            "tls" => SmtpSecurity::Tls,
            "none" => SmtpSecurity::None,
            _ => return Err(invalid("STEWARD_SMTP_SECURITY", "must be starttls, tls or none")),
        },
        None => fs.security.unwrap_or(SmtpSecurity::Starttls),
    };
    let port = match env("STEWARD_SMTP_PORT") {
        Some(v) => v.parse().map_err(|_| invalid("STEWARD_SMTP_PORT", "must be a port number"))?,
        None => fs.port.unwrap_or(security.default_port()),
    };
    let from = pick("STEWARD_SMTP_FROM", &fs.from)
        .ok_or_else(|| invalid("smtp.from", "an SMTP host needs a from address (STEWARD_SMTP_FROM)"))?;
    if from.parse::<lettre::message::Mailbox>().is_err() {
        return Err(invalid("smtp.from", "must be an email address, optionally with a name"));
    }
    Ok(Some(SmtpConfig {
        host,
        port,
        security,
        username: pick("STEWARD_SMTP_USER", &fs.username),
        password: pick("STEWARD_SMTP_PASSWORD", &fs.password).map(Secret::new),
        from,
    }))
}
