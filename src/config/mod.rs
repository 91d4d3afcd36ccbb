//! Configuration: built-in defaults < TOML file < environment < command-line flags, validated once
//! into [`Config`]. The CLI layer (clap) already merges flags with their `STEWARD_*` variables;
//! this module adds the file underneath and the product's own variables (`DOCUMENT_UPLOAD_MAX_BYTES`,
//! `CONNECTOR_ENCRYPTION_KEY`, `LLM_*`, provider keys) on top of it.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// A value that must never be printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret<T>(T);

impl<T> Secret<T> {
    pub fn new(v: T) -> Self {
        Secret(v)
    }
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

/// Sliding-window limit: at most `max` events per `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub max: u32,
    pub window: Duration,
}

#[derive(Debug, Clone, Default)]
pub struct LlmSlotDefault {
    pub provider: Option<String>,
    pub model: Option<String>,
}

/// Deployment-level model settings (the `LLM_*` variables and provider keys).
#[derive(Debug, Clone, Default)]
pub struct LlmConfig {
    pub chat: LlmSlotDefault,
    pub rewrite: LlmSlotDefault,
    pub rerank: LlmSlotDefault,
    /// Deployment keys by provider id (`openai`, `openai-compatible`, `claude`, `gemini`).
    pub env_keys: BTreeMap<String, Secret<String>>,
    /// Base URLs by provider id; the hosted defaults apply when absent. `openai-compatible` has no
    /// default (`OPENAI_COMPATIBLE_BASE_URL`).
    pub base_urls: BTreeMap<String, String>,
    /// GGUF file for the `local` provider; defaults to the SmolLM2 file in the models directory.
    pub local_model_path: Option<PathBuf>,
    /// llama.cpp threads per generation; 0 (the default) takes the idle cores at each generation.
    pub local_threads: usize,
    pub local_context: u32,
    /// Bytes of KV states the local model keeps for prompts that start like earlier ones.
    pub local_cache_bytes: usize,
    /// Local generations that run together, batched in one context.
    pub local_sequences: usize,
    /// Timeout of one hosted-provider call.
    pub request_timeout: Duration,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    /// Explicit models directory (`--models-dir`, `STEWARD_MODELS_DIR`); searched alone when set.
    pub models_dir: Option<PathBuf>,
    pub log_format: LogFormat,
    pub log_level: String,
    /// Background worker threads.
    pub workers: usize,
    /// Longest time a request may take before it answers 504 `timeout` (streams are exempt once
    /// their headers are sent).
    pub request_timeout: Duration,
    /// The address people use to reach this server; used for links and to decide `Secure` cookies.
    pub public_url: Option<String>,
    /// Force the `Secure` cookie flag on or off; by default it follows `public_url`'s scheme.
    pub secure_cookies: Option<bool>,
    /// Take the client address from `X-Forwarded-For` (only behind a proxy you control).
    pub trust_proxy: bool,
    pub session_ttl: Duration,
    pub login_limit_per_email: RateLimit,
    pub login_limit_per_ip: RateLimit,
    /// Registrations per client address per window (counted whatever their result).
    pub register_limit_per_ip: RateLimit,
    /// Password hashes (argon2id, 19 MiB each) computed at once, process-wide; a few more wait
    /// their turn, beyond that a sign-in or registration answers 503.
    pub password_hashes_concurrent: usize,
    pub upload_limit: RateLimit,
    /// Public chat messages per visitor session per minute (`max` 0: no limit).
    pub public_chat_limit_per_session: RateLimit,
    /// Public chat messages per client address per minute (`max` 0: no limit).
    pub public_chat_limit_per_ip: RateLimit,
    /// Converse asks (REST ask, `/mcp` tool calls that run a turn) per converse session per minute.
    pub converse_asks_per_session: RateLimit,
    /// Converse update reads (`messages`, `get_conversation_updates`) per session per minute.
    pub converse_reads_per_session: RateLimit,
    /// Converse update reads per client address per minute.
    pub converse_reads_per_source: RateLimit,
    /// Converse session exchanges (and `/mcp` initializations) per client address per minute.
    pub converse_exchanges_per_source: RateLimit,
    /// Long-lived requests (event streams, long polls) open at once per holder.
    pub streams: StreamLimits,
    /// How long a connection may take to send a request's headers before it is closed (a client
    /// that opens a connection and never finishes its headers holds nothing longer).
    pub header_read_timeout: Duration,
    /// How long an `/mcp` tool call waits for its turn before answering a pending envelope (the
    /// turn goes on; `get_conversation_updates` delivers its reply).
    pub mcp_turn_budget: Duration,
    /// Browser origins allowed to call `/mcp` (besides `public_url`'s); requests with another
    /// `Origin` are refused (DNS rebinding protection). Clients that send no `Origin` are not
    /// browsers and pass.
    pub mcp_allowed_origins: Vec<String>,
    /// Uploads whose bodies are read at once; more answer 429.
    pub uploads_concurrent: usize,
    /// `DOCUMENT_UPLOAD_MAX_BYTES`.
    pub upload_max_bytes: u64,
    pub job_lease: Duration,
    pub job_max_attempts: u32,
    pub shutdown_grace: Duration,
    /// `CONNECTOR_ENCRYPTION_KEY`, decoded.
    pub encryption_key: Option<Secret<[u8; 32]>>,
    /// Embedding sessions run in parallel (one thread each).
    pub embed_threads: usize,
    /// Longest input, in tokens, the English model (MiniLM) sees (longer text is truncated): its
    /// model card's 256 by default, which default chunks fit. The multilingual model uses its own
    /// limit (512).
    pub embed_max_tokens: usize,
    pub llm: LlmConfig,
    /// The `steward` executable that parses uploaded PDF/DOCX/XLSX files in a child process; `None`
    /// parses in-process (tests that run without the binary).
    pub extractor_exe: Option<PathBuf>,
    /// Outbound deliveries: the SSRF guard's allow-list, trust and timeouts (`[delivery]`).
    pub delivery: crate::delivery::config::DeliveryConfig,
    /// The SMTP server for email deliveries (`[smtp]`, `STEWARD_SMTP_*`); `None`: email is skipped.
    pub smtp: Option<crate::delivery::config::SmtpConfig>,
    /// The website crawler (`WEBSITE_CRAWLER_*`).
    pub crawler: crate::crawler::config::CrawlerConfig,
    /// The connectors (`STEWARD_WHATSAPP_*`).
    pub connectors: crate::connectors::config::ConnectorsConfig,
    /// `AGENT_BUNDLE_IMPORT_ORPHAN_AGE_MS`: an agent bundle import still active this long after it
    /// began is fenced and its agent removed.
    pub bundle_import_orphan_age: Duration,
    /// Usage limits (`EE_USAGE_ADMIN_TOKEN`, `EE_MAX_ORGS_PER_USER_PER_MONTH`, the reservation TTL).
    pub usage: crate::usage::config::UsageConfig,
    /// `STEWARD_PUBLIC_SESSION_SECRET`: signs public chat sessions; without it a key is generated
    /// once into the data dir (`public-session.key`).
    pub public_session_secret: Option<Secret<String>>,
    /// `--database` / `STEWARD_DATABASE_URL`: a PostgreSQL URL for the rows (docs/scale-out.md);
    /// `None` keeps them in SQLite in the data directory (the default).
    pub database: Option<Secret<String>>,
}

/// How many long-lived requests (event streams, long polls) one holder may have open at once; a
/// request over a cap answers 429 with `Retry-After`. `0` turns a cap off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    /// Visitor event streams per public session (`STEWARD_PUBLIC_STREAMS_PER_SESSION`).
    pub public_per_session: usize,
    /// Visitor event streams per client address (`STEWARD_PUBLIC_STREAMS_PER_IP`).
    pub public_per_ip: usize,
    /// Operator event streams (`GET /events`) per person (`STEWARD_EVENTS_STREAMS_PER_USER`).
    pub events_per_user: usize,
    /// Waiting converse update reads (REST long polls and `get_conversation_updates` with a wait)
    /// per channel credential (`STEWARD_CONVERSE_WAITS_PER_CREDENTIAL`).
    pub converse_waits_per_credential: usize,
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits {
            public_per_session: 4,
            public_per_ip: 64,
            events_per_user: 16,
            converse_waits_per_credential: 128,
        }
    }
}

/// MiniLM's sequence limit as its model card states it.
const fn embed_default_tokens() -> usize {
    crate::models::embed::MINILM.max_tokens
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
pub const DEFAULT_UPLOAD_MAX_BYTES: u64 = 25 * 1024 * 1024;

impl Config {
    /// Built-in defaults with the given data directory (what tests start from).
    pub fn with_data_dir(data_dir: impl Into<PathBuf>) -> Config {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
        Config {
            data_dir: data_dir.into(),
            #[allow(clippy::expect_used, reason = "the default address is a constant that parses")]
            listen: DEFAULT_LISTEN.parse().expect("default listen address"),
            models_dir: None,
            log_format: LogFormat::Text,
            log_level: "info".into(),
            workers: cores.clamp(2, 8),
            request_timeout: Duration::from_secs(120),
            public_url: None,
            secure_cookies: None,
            trust_proxy: false,
            session_ttl: Duration::from_secs(14 * 24 * 3600),
            login_limit_per_email: RateLimit { max: 10, window: Duration::from_secs(15 * 60) },
            login_limit_per_ip: RateLimit { max: 50, window: Duration::from_secs(15 * 60) },
            register_limit_per_ip: RateLimit { max: 20, window: Duration::from_secs(15 * 60) },
            password_hashes_concurrent: cores.clamp(1, 8),
            upload_limit: RateLimit { max: 120, window: Duration::from_secs(60) },
            public_chat_limit_per_session: RateLimit { max: 20, window: Duration::from_secs(60) },
            public_chat_limit_per_ip: RateLimit { max: 300, window: Duration::from_secs(60) },
            converse_asks_per_session: RateLimit { max: 30, window: Duration::from_secs(60) },
            converse_reads_per_session: RateLimit { max: 60, window: Duration::from_secs(60) },
            converse_reads_per_source: RateLimit { max: 600, window: Duration::from_secs(60) },
            converse_exchanges_per_source: RateLimit { max: 60, window: Duration::from_secs(60) },
            streams: StreamLimits::default(),
            header_read_timeout: Duration::from_secs(15),
            mcp_turn_budget: Duration::from_secs(45),
            mcp_allowed_origins: Vec::new(),
            uploads_concurrent: 4,
            upload_max_bytes: DEFAULT_UPLOAD_MAX_BYTES,
            job_lease: Duration::from_secs(300),
            job_max_attempts: 5,
            shutdown_grace: Duration::from_secs(20),
            encryption_key: None,
            embed_threads: cores.clamp(1, 4),
            embed_max_tokens: embed_default_tokens(),
            llm: LlmConfig {
                // chosen per generation from the idle cores: prompt reading scales with threads,
                // but llama.cpp's threads spin, and one that shares its core with ingestion or the
                // HTTP workers slows generation to a few tokens/s
                local_threads: 0,
                local_context: 4096,
                local_cache_bytes: 256 << 20,
                local_sequences: 4,
                request_timeout: Duration::from_secs(60),
                ..Default::default()
            },
            extractor_exe: std::env::current_exe()
                .ok()
                .filter(|p| p.file_stem().and_then(|s| s.to_str()).is_some_and(|s| s == "steward")),
            delivery: Default::default(),
            smtp: None,
            crawler: Default::default(),
            connectors: Default::default(),
            bundle_import_orphan_age: Duration::from_millis(900_000),
            usage: Default::default(),
            public_session_secret: None,
            database: None,
        }
    }

    /// The data directory used when none is given: `<XDG data dir>/steward/data`. Models live
    /// beside it in `<XDG data dir>/steward/models`, outside any one data directory.
    pub fn default_data_dir() -> PathBuf {
        match directories::ProjectDirs::from("", "", "steward") {
            Some(p) => p.data_dir().join("data"),
            None => PathBuf::from("steward-data"),
        }
    }

    /// Whether session cookies carry `Secure`.
    pub fn cookies_secure(&self) -> bool {
        self.secure_cookies.unwrap_or_else(|| self.public_url.as_deref().is_some_and(|u| u.starts_with("https://")))
    }

    pub fn db_path(&self) -> PathBuf {
        self.data_dir.join("steward.db")
    }
}

/// The TOML file. Every key is optional; unknown keys are an error so typos are caught.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub data_dir: Option<PathBuf>,
    pub listen: Option<String>,
    pub models_dir: Option<PathBuf>,
    pub log_format: Option<LogFormat>,
    pub log_level: Option<String>,
    pub workers: Option<usize>,
    pub request_timeout_secs: Option<u64>,
    pub public_url: Option<String>,
    pub secure_cookies: Option<bool>,
    pub trust_proxy: Option<bool>,
    pub session_ttl_hours: Option<u64>,
    pub login_attempts_per_email: Option<u32>,
    pub login_attempts_per_ip: Option<u32>,
    pub login_window_secs: Option<u64>,
    pub register_attempts_per_ip: Option<u32>,
    pub password_hashes_concurrent: Option<usize>,
    pub uploads_per_minute: Option<u32>,
    pub public_chat_messages_per_session_per_minute: Option<u32>,
    pub public_chat_messages_per_ip_per_minute: Option<u32>,
    pub uploads_concurrent: Option<usize>,
    pub upload_max_bytes: Option<u64>,
    pub job_lease_secs: Option<u64>,
    pub job_max_attempts: Option<u32>,
    pub shutdown_grace_secs: Option<u64>,
    pub embed_threads: Option<usize>,
    pub embed_max_tokens: Option<usize>,
    #[serde(default)]
    pub llm: FileLlm,
    #[serde(default)]
    pub delivery: crate::delivery::config::FileDelivery,
    #[serde(default)]
    pub smtp: crate::delivery::config::FileSmtp,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileLlm {
    pub chat_provider: Option<String>,
    pub chat_model: Option<String>,
    pub rewrite_provider: Option<String>,
    pub rewrite_model: Option<String>,
    pub rerank_provider: Option<String>,
    pub rerank_model: Option<String>,
    pub local_model_path: Option<PathBuf>,
    pub local_threads: Option<usize>,
    pub local_context: Option<u32>,
    pub openai_compatible_base_url: Option<String>,
    pub request_timeout_secs: Option<u64>,
}

/// What the command line (flags merged with their `STEWARD_*` variables by clap) contributes.
#[derive(Debug, Default, Clone)]
pub struct CliOverrides {
    pub config_file: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub models_dir: Option<PathBuf>,
    pub log_format: Option<LogFormat>,
    pub log_level: Option<String>,
    pub listen: Option<SocketAddr>,
    pub workers: Option<usize>,
    /// `--database` (a PostgreSQL URL).
    pub database: Option<Secret<String>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("the config file {path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{name} is not valid: {message}")]
    Invalid { name: String, message: String },
}

fn invalid(name: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { name: name.to_string(), message: message.into() }
}

/// Loads the configuration from the process environment and the CLI overrides.
pub fn load(cli: &CliOverrides) -> Result<Config, ConfigError> {
    load_with_env(cli, |k| std::env::var(k).ok())
}

/// [`load`] with an injectable environment (for tests of the precedence rules).
pub fn load_with_env(cli: &CliOverrides, env: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
    let file = match &cli.config_file {
        Some(path) => read_file(path)?,
        None => FileConfig::default(),
    };
    let data_dir = cli.data_dir.clone().or(file.data_dir.clone()).unwrap_or_else(Config::default_data_dir);
    let mut c = Config::with_data_dir(data_dir);
    // 1. the file
    apply_file(&mut c, &file)?;
    apply_file_llm(&mut c, &file.llm);
    // 2. the environment (the product's own variable names; STEWARD_* flags come through clap)
    apply_env(&mut c, &env)?;
    apply_env_llm(&mut c, &env)?;
    (c.delivery, c.smtp) = crate::delivery::config::load(&file.delivery, &file.smtp, &env)?;
    c.crawler = crate::crawler::config::load(&env)?;
    c.connectors = crate::connectors::config::load(&env)?;
    c.usage = crate::usage::config::load(&env)?;
    if let Some(v) = env("STEWARD_PUBLIC_SESSION_SECRET").filter(|v| !v.is_empty()) {
        crate::public_chat::token::Secret::from_env_value(&v)
            .map_err(|m| invalid("STEWARD_PUBLIC_SESSION_SECRET", m))?;
        c.public_session_secret = Some(Secret::new(v));
    }
    for (var, limit) in [
        ("STEWARD_PUBLIC_CHAT_PER_SESSION_PER_MINUTE", &mut c.public_chat_limit_per_session),
        ("STEWARD_PUBLIC_CHAT_PER_IP_PER_MINUTE", &mut c.public_chat_limit_per_ip),
        ("STEWARD_CONVERSE_ASKS_PER_SESSION_PER_MINUTE", &mut c.converse_asks_per_session),
        ("STEWARD_CONVERSE_READS_PER_SESSION_PER_MINUTE", &mut c.converse_reads_per_session),
        ("STEWARD_CONVERSE_READS_PER_SOURCE_PER_MINUTE", &mut c.converse_reads_per_source),
        ("STEWARD_CONVERSE_EXCHANGES_PER_SOURCE_PER_MINUTE", &mut c.converse_exchanges_per_source),
    ] {
        if let Some(v) = env(var).filter(|v| !v.is_empty()) {
            limit.max = v.trim().parse().map_err(|_| invalid(var, "must be a whole number (0: no limit)"))?;
        }
    }
    for (var, cap) in [
        ("STEWARD_PUBLIC_STREAMS_PER_SESSION", &mut c.streams.public_per_session),
        ("STEWARD_PUBLIC_STREAMS_PER_IP", &mut c.streams.public_per_ip),
        ("STEWARD_EVENTS_STREAMS_PER_USER", &mut c.streams.events_per_user),
        ("STEWARD_CONVERSE_WAITS_PER_CREDENTIAL", &mut c.streams.converse_waits_per_credential),
    ] {
        if let Some(v) = env(var).filter(|v| !v.is_empty()) {
            *cap = v.trim().parse().map_err(|_| invalid(var, "must be a whole number (0: no cap)"))?;
        }
    }
    if let Some(v) = env("STEWARD_HEADER_READ_TIMEOUT_SECS").filter(|v| !v.is_empty()) {
        let secs: u64 = v
            .trim()
            .parse()
            .ok()
            .filter(|s| (1..=300).contains(s))
            .ok_or_else(|| invalid("STEWARD_HEADER_READ_TIMEOUT_SECS", "must be 1 to 300 seconds"))?;
        c.header_read_timeout = Duration::from_secs(secs);
    }
    if let Some(v) = env("STEWARD_MCP_TURN_BUDGET_SECS").filter(|v| !v.is_empty()) {
        let secs: u64 =
            v.trim().parse().map_err(|_| invalid("STEWARD_MCP_TURN_BUDGET_SECS", "must be whole seconds"))?;
        c.mcp_turn_budget = Duration::from_secs(secs);
    }
    if let Some(v) = env("STEWARD_MCP_ALLOWED_ORIGINS").filter(|v| !v.is_empty()) {
        c.mcp_allowed_origins =
            v.split(',').map(|o| o.trim().trim_end_matches('/').to_string()).filter(|o| !o.is_empty()).collect();
    }
    // 3. flags (already merged with their STEWARD_* variables by clap)
    apply_flags(&mut c, cli);
    validate(&c)?;
    Ok(c)
}

/// The config file's server, limit and embedding settings over the defaults.
fn apply_file(c: &mut Config, file: &FileConfig) -> Result<(), ConfigError> {
    if let Some(l) = &file.listen {
        c.listen = parse_listen("listen (config file)", l)?;
    }
    if file.models_dir.is_some() {
        c.models_dir = file.models_dir.clone();
    }
    if let Some(v) = file.log_format {
        c.log_format = v;
    }
    if let Some(v) = &file.log_level {
        c.log_level = v.clone();
    }
    if let Some(v) = file.workers {
        c.workers = v;
    }
    if let Some(v) = file.request_timeout_secs {
        c.request_timeout = Duration::from_secs(v);
    }
    if file.public_url.is_some() {
        c.public_url = file.public_url.clone();
    }
    if file.secure_cookies.is_some() {
        c.secure_cookies = file.secure_cookies;
    }
    if let Some(v) = file.trust_proxy {
        c.trust_proxy = v;
    }
    if let Some(v) = file.session_ttl_hours {
        c.session_ttl = Duration::from_secs(v * 3600);
    }
    if let Some(v) = file.login_attempts_per_email {
        c.login_limit_per_email.max = v;
    }
    if let Some(v) = file.login_attempts_per_ip {
        c.login_limit_per_ip.max = v;
    }
    if let Some(v) = file.login_window_secs {
        c.login_limit_per_email.window = Duration::from_secs(v);
        c.login_limit_per_ip.window = Duration::from_secs(v);
        c.register_limit_per_ip.window = Duration::from_secs(v);
    }
    if let Some(v) = file.register_attempts_per_ip {
        c.register_limit_per_ip.max = v;
    }
    if let Some(v) = file.password_hashes_concurrent {
        c.password_hashes_concurrent = v.max(1);
    }
    if let Some(v) = file.uploads_per_minute {
        c.upload_limit.max = v;
    }
    if let Some(v) = file.public_chat_messages_per_session_per_minute {
        c.public_chat_limit_per_session.max = v;
    }
    if let Some(v) = file.public_chat_messages_per_ip_per_minute {
        c.public_chat_limit_per_ip.max = v;
    }
    if let Some(v) = file.uploads_concurrent {
        c.uploads_concurrent = v.max(1);
    }
    if let Some(v) = file.upload_max_bytes {
        c.upload_max_bytes = v;
    }
    if let Some(v) = file.job_lease_secs {
        c.job_lease = Duration::from_secs(v);
    }
    if let Some(v) = file.job_max_attempts {
        c.job_max_attempts = v;
    }
    if let Some(v) = file.shutdown_grace_secs {
        c.shutdown_grace = Duration::from_secs(v);
    }
    if let Some(v) = file.embed_threads {
        c.embed_threads = v;
    }
    if let Some(v) = file.embed_max_tokens {
        c.embed_max_tokens = v;
    }
    Ok(())
}

/// The config file's `[llm]` table over the defaults.
fn apply_file_llm(c: &mut Config, fl: &FileLlm) {
    c.llm.chat = LlmSlotDefault { provider: fl.chat_provider.clone(), model: fl.chat_model.clone() };
    c.llm.rewrite = LlmSlotDefault { provider: fl.rewrite_provider.clone(), model: fl.rewrite_model.clone() };
    c.llm.rerank = LlmSlotDefault { provider: fl.rerank_provider.clone(), model: fl.rerank_model.clone() };
    if fl.local_model_path.is_some() {
        c.llm.local_model_path = fl.local_model_path.clone();
    }
    if let Some(v) = fl.local_threads {
        c.llm.local_threads = v;
    }
    if let Some(v) = fl.local_context {
        c.llm.local_context = v;
    }
    if let Some(v) = &fl.openai_compatible_base_url {
        c.llm.base_urls.insert("openai-compatible".into(), v.clone());
    }
    if let Some(v) = fl.request_timeout_secs {
        c.llm.request_timeout = Duration::from_secs(v);
    }
}

/// A whole-number environment variable; empty or unset is `None`.
fn env_num(env: &impl Fn(&str) -> Option<String>, name: &str) -> Result<Option<u64>, ConfigError> {
    match env(name) {
        Some(v) if !v.trim().is_empty() => {
            v.trim().parse::<u64>().map(Some).map_err(|_| invalid(name, format!("expected a whole number, got {v:?}")))
        }
        _ => Ok(None),
    }
}

/// The environment's server settings and encryption key.
fn apply_env(c: &mut Config, env: &impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
    if let Some(v) = env_num(env, "DOCUMENT_UPLOAD_MAX_BYTES")? {
        c.upload_max_bytes = v;
    }
    if let Some(v) = env("STEWARD_DATABASE_URL").filter(|v| !v.trim().is_empty()) {
        if !crate::storage::postgres::is_url(v.trim()) {
            return Err(invalid(
                "STEWARD_DATABASE_URL",
                "must be a PostgreSQL URL (postgres://user@host:5432/database), or unset for SQLite",
            ));
        }
        c.database = Some(Secret::new(v.trim().to_string()));
    }
    if let Some(v) = env("STEWARD_PUBLIC_URL").filter(|v| !v.is_empty()) {
        c.public_url = Some(v);
    }
    if let Some(v) = env_num(env, "STEWARD_REQUEST_TIMEOUT_SECS")? {
        c.request_timeout = Duration::from_secs(v);
    }
    if let Some(v) = env_num(env, "STEWARD_EMBED_THREADS")? {
        c.embed_threads = v as usize;
    }
    if let Some(v) = env_num(env, "STEWARD_EMBED_MAX_TOKENS")? {
        c.embed_max_tokens = v as usize;
    }
    if let Some(v) = env_num(env, "AGENT_BUNDLE_IMPORT_ORPHAN_AGE_MS")? {
        if v == 0 {
            return Err(invalid("AGENT_BUNDLE_IMPORT_ORPHAN_AGE_MS", "must be at least 1 millisecond"));
        }
        c.bundle_import_orphan_age = Duration::from_millis(v);
    }
    if let Some(v) = env("CONNECTOR_ENCRYPTION_KEY").filter(|v| !v.trim().is_empty()) {
        c.encryption_key = Some(Secret::new(parse_encryption_key(&v)?));
    }
    Ok(())
}

/// The environment's model slots, provider keys and base URLs, and the local model.
fn apply_env_llm(c: &mut Config, env: &impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
    for (slot, target) in [("CHAT", &mut c.llm.chat), ("REWRITE", &mut c.llm.rewrite), ("RERANK", &mut c.llm.rerank)] {
        if let Some(p) = env(&format!("LLM_{slot}_PROVIDER")).filter(|v| !v.is_empty()) {
            target.provider = Some(p);
        }
        if let Some(m) = env(&format!("LLM_{slot}_MODEL")).filter(|v| !v.is_empty()) {
            target.model = Some(m);
        }
    }
    for (var, provider) in [
        ("OPENAI_API_KEY", "openai"),
        ("OPENAI_COMPATIBLE_API_KEY", "openai-compatible"),
        ("ANTHROPIC_API_KEY", "claude"),
        ("GEMINI_API_KEY", "gemini"),
    ] {
        if let Some(k) = env(var).filter(|v| !v.trim().is_empty()) {
            c.llm.env_keys.insert(provider.to_string(), Secret::new(k.trim().to_string()));
        }
    }
    for (var, provider) in [
        ("OPENAI_BASE_URL", "openai"),
        ("OPENAI_COMPATIBLE_BASE_URL", "openai-compatible"),
        ("ANTHROPIC_BASE_URL", "claude"),
        ("GEMINI_BASE_URL", "gemini"),
    ] {
        if let Some(u) = env(var).filter(|v| !v.trim().is_empty()) {
            c.llm.base_urls.insert(provider.to_string(), u.trim().trim_end_matches('/').to_string());
        }
    }
    if let Some(p) = env("STEWARD_LOCAL_MODEL").filter(|v| !v.is_empty()) {
        c.llm.local_model_path = Some(PathBuf::from(p));
    }
    if let Some(v) = env_num(env, "STEWARD_LOCAL_THREADS")? {
        c.llm.local_threads = v as usize;
    }
    if let Some(v) = env_num(env, "STEWARD_LOCAL_CONTEXT")? {
        c.llm.local_context = v as u32;
    }
    if let Some(v) = env_num(env, "STEWARD_LOCAL_CACHE_MB")? {
        c.llm.local_cache_bytes = (v as usize) << 20;
    }
    if let Some(v) = env_num(env, "STEWARD_LOCAL_SEQUENCES")? {
        c.llm.local_sequences = (v as usize).max(1);
    }
    Ok(())
}

/// The command-line flags, last and strongest.
fn apply_flags(c: &mut Config, cli: &CliOverrides) {
    if let Some(v) = &cli.models_dir {
        c.models_dir = Some(v.clone());
    }
    if let Some(v) = cli.log_format {
        c.log_format = v;
    }
    if let Some(v) = &cli.log_level {
        c.log_level = v.clone();
    }
    if let Some(v) = cli.listen {
        c.listen = v;
    }
    if let Some(v) = cli.workers {
        c.workers = v;
    }
    if let Some(v) = &cli.database {
        c.database = Some(Secret::new(v.expose().clone()));
    }
}

fn read_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
    toml::from_str(&text).map_err(|e| ConfigError::Parse { path: path.to_path_buf(), message: e.to_string() })
}

fn parse_listen(name: &str, v: &str) -> Result<SocketAddr, ConfigError> {
    v.parse().map_err(|_| invalid(name, format!("expected host:port such as 127.0.0.1:8080, got {v:?}")))
}

/// `CONNECTOR_ENCRYPTION_KEY` (`crypto::parse_key`).
pub fn parse_encryption_key(v: &str) -> Result<[u8; 32], ConfigError> {
    crate::crypto::parse_key(v).map_err(|m| invalid("CONNECTOR_ENCRYPTION_KEY", m))
}

fn validate(c: &Config) -> Result<(), ConfigError> {
    if c.workers == 0 || c.workers > 64 {
        return Err(invalid("workers", "must be between 1 and 64"));
    }
    if c.upload_max_bytes == 0 {
        return Err(invalid("DOCUMENT_UPLOAD_MAX_BYTES", "must be greater than zero"));
    }
    if c.embed_threads == 0 || c.embed_threads > 64 {
        return Err(invalid("embed_threads", "must be between 1 and 64"));
    }
    if !(16..=512).contains(&c.embed_max_tokens) {
        return Err(invalid("embed_max_tokens", "must be between 16 and 512 (the model's limit)"));
    }
    if c.job_max_attempts == 0 {
        return Err(invalid("job_max_attempts", "must be at least 1"));
    }
    // a window of 0 would let every attempt through; the counts live in the database for a window
    if !(1..=7 * 86_400).contains(&c.login_limit_per_email.window.as_secs()) {
        return Err(invalid("login_window_secs", "must be between 1 and 604800 (a week)"));
    }
    if let Some(u) = &c.public_url
        && !(u.starts_with("http://") || u.starts_with("https://"))
    {
        return Err(invalid("public_url", "must start with http:// or https://"));
    }
    for (name, slot) in [("LLM_CHAT", &c.llm.chat), ("LLM_REWRITE", &c.llm.rewrite), ("LLM_RERANK", &c.llm.rerank)] {
        if let Some(p) = &slot.provider
            && !crate::models::PROVIDERS.contains(&p.as_str())
        {
            return Err(invalid(
                &format!("{name}_PROVIDER"),
                format!("unknown provider {p:?}; expected one of {}", crate::models::PROVIDERS.join(", ")),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
