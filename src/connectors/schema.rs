//! The built-in connectors' config schemas and the validation of a save: which keys exist, their
//! field types, defaults and rules. Pure: no I/O (the outbound guard's verdict on a site URL is
//! passed in).

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// A config field's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    Text,
    /// Written, never read back.
    Secret,
    /// A secret the service makes when none is given, shown once.
    GeneratedSecret,
}

impl FieldType {
    pub fn as_str(self) -> &'static str {
        match self {
            FieldType::Text => "text",
            FieldType::Secret => "secret",
            FieldType::GeneratedSecret => "generated_secret",
        }
    }
    pub fn is_secret(self) -> bool {
        self != FieldType::Text
    }
}

/// One config key.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub key: &'static str,
    pub label: &'static str,
    pub kind: FieldType,
    pub required: bool,
    pub default: Option<&'static str>,
    pub help: &'static str,
}

const fn field(key: &'static str, label: &'static str, kind: FieldType, required: bool, help: &'static str) -> Field {
    Field { key, label, kind, required, default: None, help }
}

const fn with_default(f: Field, d: &'static str) -> Field {
    Field { default: Some(d), ..f }
}

use FieldType::{GeneratedSecret, Secret, Text};

pub const WORDPRESS: &[Field] = &[
    field("site_url", "Site URL", Text, true, "The WordPress site's address, starting with https:// (or http://)."),
    field(
        "webhook_shared_secret",
        "Webhook shared secret",
        GeneratedSecret,
        true,
        "Sent by the site with each push (header X-Webhook-Secret). Generated for you and shown once.",
    ),
    field(
        "wp_username",
        "WordPress user name",
        Text,
        false,
        "Set with an Application Password to read the REST API as this user.",
    ),
    field(
        "wp_application_password",
        "Application Password",
        Secret,
        false,
        "Users → Profile → Application Passwords in WordPress. Needed with the user name for polling.",
    ),
    with_default(
        field("post_types", "Post types", Text, false, "Comma-separated post type slugs to keep (custom types too)."),
        "page,post",
    ),
    with_default(
        field(
            "poll_interval_sec",
            "Poll interval (seconds)",
            Text,
            false,
            "0 (the default) relies on pushes; otherwise 60 to 86400 seconds between checks for changes.",
        ),
        "0",
    ),
];

pub const WHATSAPP: &[Field] = &[
    field("phone_number_id", "Phone number ID", Text, true, "WhatsApp Manager → API setup: the number's ID (digits)."),
    field(
        "access_token",
        "Access token",
        Secret,
        true,
        "A system user's permanent token with whatsapp_business_messaging.",
    ),
    field(
        "app_secret",
        "App secret",
        Secret,
        true,
        "App settings → Basic: signs every delivery (X-Hub-Signature-256).",
    ),
    field("business_account_id", "Business account ID", Text, true, "The WhatsApp Business Account ID (digits)."),
    field(
        "webhook_verify_token",
        "Webhook verify token",
        GeneratedSecret,
        true,
        "Paste it as the Verify token of the webhook in Meta's app dashboard. Generated for you and shown once.",
    ),
    with_default(
        field(
            "conversation_timeout_hours",
            "Conversation timeout (hours)",
            Text,
            false,
            "After this long without a message from a customer, their next message starts a new conversation.",
        ),
        "24",
    ),
    field(
        "unsupported_message_reply",
        "Reply to unsupported messages",
        Text,
        false,
        "Sent verbatim when a customer sends something other than text. Empty: such messages are recorded as skipped.",
    ),
    field("agent_id", "Agent", Text, false, "The agent that answers (default: the workspace's default agent)."),
];

/// What a save changes: new plain values, new secret values, secrets to generate, keys cleared.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub plain: BTreeMap<String, String>,
    pub secrets: BTreeMap<String, String>,
    /// Generated secrets to make (missing at the first save, or asked for with `rotate`).
    pub generate: Vec<&'static str>,
    /// Keys set to the empty string: an optional plain value back to its default, or a secret
    /// removed.
    pub cleared: Vec<&'static str>,
}

fn bad(key: &str, msg: impl Into<String>) -> Error {
    Error::invalid_field(&format!("config.{key}"), msg)
}

pub fn field_of(schema: &[Field], key: &str) -> Option<Field> {
    schema.iter().copied().find(|f| f.key == key)
}

/// Checks a save's `config` and `rotate` against `schema`. `secrets_set` are the secret keys that
/// already hold a value. Values are trimmed; an empty one clears the key.
pub fn changes(
    schema: &[Field],
    config: BTreeMap<String, String>,
    rotate: &[String],
    secrets_set: &[String],
) -> Result<Changes> {
    let mut out = Changes::default();
    for (key, value) in config {
        let Some(f) = field_of(schema, &key) else {
            let known: Vec<&str> = schema.iter().map(|f| f.key).collect();
            return Err(bad(&key, format!("unknown config key {key:?}; the keys are {}", known.join(", "))));
        };
        let v = value.trim().to_string();
        if v.chars().count() > 4096 || v.chars().any(|c| c.is_control() && c != '\n') {
            return Err(bad(f.key, format!("{} must be at most 4096 characters, without control characters", f.key)));
        }
        if v.is_empty() {
            if f.required {
                return Err(bad(f.key, format!("{} is required and cannot be cleared", f.key)));
            }
            out.cleared.push(f.key);
            continue;
        }
        match f.kind {
            Text => {
                out.plain.insert(f.key.to_string(), v);
            }
            Secret => {
                out.secrets.insert(f.key.to_string(), v);
            }
            GeneratedSecret => {
                if !(16..=256).contains(&v.chars().count()) || v.chars().any(char::is_whitespace) {
                    return Err(bad(f.key, format!("{} must be 16 to 256 characters without spaces", f.key)));
                }
                out.secrets.insert(f.key.to_string(), v);
            }
        }
    }
    for key in rotate {
        match field_of(schema, key) {
            Some(f) if f.kind == GeneratedSecret => {
                if out.secrets.contains_key(f.key) {
                    return Err(bad(f.key, format!("{} is both given and asked to rotate", f.key)));
                }
                out.generate.push(f.key);
            }
            _ => {
                return Err(Error::invalid_field(
                    "rotate",
                    format!("{key:?} is not a generated secret of this connector; only those can be rotated"),
                ));
            }
        }
    }
    for f in schema.iter().filter(|f| f.kind == GeneratedSecret) {
        let has = secrets_set.iter().any(|s| s == f.key) || out.secrets.contains_key(f.key);
        if !has && !out.generate.contains(&f.key) {
            out.generate.push(f.key);
        }
    }
    Ok(out)
}

/// The plain value of `key` (the stored value, else the default).
pub fn value<'a>(schema: &[Field], plain: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    plain.get(key).map(String::as_str).or_else(|| field_of(schema, key).and_then(|f| f.default))
}

/// The first required key without a value (for enable: "incomplete connector config").
pub fn first_missing(
    schema: &[Field],
    plain: &BTreeMap<String, String>,
    secrets_set: &[String],
) -> Option<&'static str> {
    schema.iter().find_map(|f| {
        let set = if f.kind.is_secret() {
            secrets_set.iter().any(|s| s == f.key)
        } else {
            plain.get(f.key).is_some_and(|v| !v.is_empty())
        };
        (f.required && !set).then_some(f.key)
    })
}

/// The post types of `post_types`: trimmed, lowercase slugs, deduplicated.
pub fn post_types(raw: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for t in raw.split(',').map(|t| t.trim().to_ascii_lowercase()).filter(|t| !t.is_empty()) {
        if t.len() > 40 || !t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(bad("post_types", format!("{t:?} is not a post type slug (letters, digits, '_' and '-')")));
        }
        if !out.contains(&t) {
            out.push(t);
        }
    }
    if out.is_empty() || out.len() > 20 {
        return Err(bad("post_types", "post_types lists 1 to 20 post type slugs, comma-separated"));
    }
    Ok(out)
}

fn number(key: &str, v: &str) -> Result<u64> {
    v.parse::<u64>().map_err(|_| bad(key, format!("{key} must be a whole number")))
}

/// The poll interval in seconds (0: push only).
pub fn poll_interval(v: &str) -> Result<u64> {
    let n = number("poll_interval_sec", v)?;
    if n != 0 && !(60..=86_400).contains(&n) {
        return Err(bad("poll_interval_sec", "poll_interval_sec is 0 (push only) or 60 to 86400 seconds"));
    }
    Ok(n)
}

pub fn timeout_hours(v: &str) -> Result<u64> {
    let n = number("conversation_timeout_hours", v)?;
    if !(1..=8760).contains(&n) {
        return Err(bad("conversation_timeout_hours", "conversation_timeout_hours is 1 to 8760"));
    }
    Ok(n)
}

/// A Meta id: digits only.
pub fn meta_id(key: &str, v: &str) -> Result<()> {
    if v.is_empty() || v.len() > 40 || !v.chars().all(|c| c.is_ascii_digit()) {
        return Err(bad(key, format!("{key} is the numeric ID Meta shows (digits only)")));
    }
    Ok(())
}

/// The site URL in its stored form: http(s), a host, no credentials, query or fragment, no
/// trailing slash. `guard` says whether the outbound guard admits it.
pub fn site_url(v: &str, guard: impl Fn(&url::Url) -> std::result::Result<(), String>) -> Result<String> {
    let u = url::Url::parse(v).map_err(|e| bad("site_url", format!("site_url is not a valid URL: {e}")))?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none_or(str::is_empty) {
        return Err(bad("site_url", "site_url must start with http:// or https:// and name a host"));
    }
    if !u.username().is_empty() || u.password().is_some() || u.query().is_some() || u.fragment().is_some() {
        return Err(bad("site_url", "site_url must not carry a user name, password, query or fragment"));
    }
    guard(&u).map_err(|m| bad("site_url", format!("this site cannot be reached: {m}")))?;
    Ok(u.as_str().trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_first_save_generates_the_missing_generated_secrets_and_sorts_values() {
        let c = changes(
            WORDPRESS,
            cfg(&[("site_url", " https://a.example "), ("wp_application_password", "x y")]),
            &[],
            &[],
        )
        .unwrap();
        assert_eq!(c.plain["site_url"], "https://a.example");
        assert_eq!(c.secrets["wp_application_password"], "x y");
        assert_eq!(c.generate, vec!["webhook_shared_secret"]);
        // a later save keeps the stored one unless asked to rotate
        let set = vec!["webhook_shared_secret".to_string()];
        assert!(changes(WORDPRESS, cfg(&[]), &[], &set).unwrap().generate.is_empty());
        let r = changes(WORDPRESS, cfg(&[]), &["webhook_shared_secret".into()], &set).unwrap();
        assert_eq!(r.generate, vec!["webhook_shared_secret"]);
    }

    #[test]
    fn errors_name_the_field() {
        let field = |r: Result<Changes>| r.unwrap_err().details.unwrap()["field"].as_str().unwrap().to_string();
        assert_eq!(field(changes(WORDPRESS, cfg(&[("nope", "1")]), &[], &[])), "config.nope");
        assert_eq!(field(changes(WORDPRESS, cfg(&[("site_url", "")]), &[], &[])), "config.site_url");
        assert_eq!(
            field(changes(WHATSAPP, cfg(&[("webhook_verify_token", "short")]), &[], &[])),
            "config.webhook_verify_token"
        );
        let e = changes(WHATSAPP, cfg(&[]), &["access_token".into()], &[]).unwrap_err();
        assert_eq!(e.details.unwrap()["field"], "rotate");
        let c = changes(WORDPRESS, cfg(&[("post_types", "")]), &[], &[]).unwrap();
        assert_eq!(c.cleared, vec!["post_types"]);
    }

    #[test]
    fn values_rules() {
        assert_eq!(post_types(" Post, page,post ,book_review").unwrap(), vec!["post", "page", "book_review"]);
        assert!(post_types(" , ").is_err());
        assert!(post_types("a b").is_err());
        assert_eq!(poll_interval("0").unwrap(), 0);
        assert_eq!(poll_interval("300").unwrap(), 300);
        assert!(poll_interval("30").is_err() && poll_interval("-1").is_err() && poll_interval("x").is_err());
        assert!(timeout_hours("0").is_err());
        assert_eq!(timeout_hours("24").unwrap(), 24);
        assert!(meta_id("phone_number_id", "10654").is_ok() && meta_id("phone_number_id", "+1 555").is_err());
        let ok = |_: &url::Url| Ok(());
        assert_eq!(site_url("https://blog.example/news/", ok).unwrap(), "https://blog.example/news");
        assert!(site_url("ftp://blog.example", ok).is_err());
        assert!(site_url("https://u:p@blog.example", ok).is_err());
        assert!(site_url("https://blog.example", |_: &url::Url| Err("private".into())).is_err());
    }

    #[test]
    fn enable_needs_every_required_key() {
        let plain = cfg(&[("site_url", "https://a.example")]);
        assert_eq!(first_missing(WORDPRESS, &plain, &[]), Some("webhook_shared_secret"));
        assert_eq!(first_missing(WORDPRESS, &plain, &["webhook_shared_secret".into()]), None);
        assert_eq!(first_missing(WHATSAPP, &BTreeMap::new(), &[]), Some("phone_number_id"));
        assert_eq!(value(WORDPRESS, &plain, "post_types"), Some("page,post"));
    }
}
