//! Public session and resume tokens: `base64url(JSON payload) "." base64url(HMAC-SHA256)`.
//!
//! A session token lives 12 hours from its creation (never refreshed); a resume token 30 days.
//! Both bind the workspace, the agent, the channel, the origin and the launch token they were
//! made under (as an HMAC of the launch token, so rotating it breaks the binding); each kind is
//! signed with its own key derived from the deployment's session secret, so one kind cannot pass
//! for the other. The converse surface signs its session tokens and conversation handles the same
//! way, each kind under its own key. The secret comes from `STEWARD_PUBLIC_SESSION_SECRET`, else from
//! `<data dir>/public-session.key`, generated (32 random bytes, mode 0600) the first time.

use std::path::Path;

use base64::Engine;
use hmac::{KeyInit, Mac};
use serde::{Deserialize, Serialize};

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// How long a session token is valid.
pub const SESSION_SECS: i64 = 12 * 3600;
/// How long a resume token is valid.
pub const RESUME_SECS: i64 = 30 * 24 * 3600;
/// Longest token accepted (anything longer is refused unread).
pub const MAX_TOKEN_LEN: usize = 4096;

/// Which token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Session,
    Resume,
    /// A converse session (`POST /mcp/converse/session`).
    Converse,
    /// A converse conversation handle (sessionless MCP clients continue with it).
    Handle,
}

impl Kind {
    fn label(self) -> &'static [u8] {
        match self {
            Kind::Session => b"steward public session v1",
            Kind::Resume => b"steward public resume v1",
            Kind::Converse => b"steward converse session v1",
            Kind::Handle => b"steward converse handle v1",
        }
    }
}

/// What a token carries (inside the token as JSON; not a wire shape of the API).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claims {
    pub workspace_id: String,
    pub agent_id: String,
    pub public_session_id: String,
    /// `anonymous_link` or `website_embed`.
    pub channel: String,
    /// The admitted origin a website-embed session was made from.
    pub origin: Option<String>,
    /// Unix seconds.
    pub expires_at: i64,
    /// HMAC of the launch token (see [`launch_binding`]).
    pub launch_binding: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visitor_key: Option<String>,
}

/// Claims with an expiry: what [`sign`] and [`verify`] carry.
pub trait Expiring: Serialize + serde::de::DeserializeOwned {
    /// Unix seconds.
    fn expires_at(&self) -> i64;
}

impl Expiring for Claims {
    fn expires_at(&self) -> i64 {
        self.expires_at
    }
}

/// Why a token was refused (the caller answers 404 or 400 without saying which).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("malformed token")]
    Malformed,
    #[error("bad signature")]
    BadSignature,
    #[error("expired")]
    Expired,
}

/// The deployment's session secret.
#[derive(Clone)]
pub struct Secret([u8; 32]);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl Secret {
    /// From the environment's value (any text of at least 32 characters; hashed to a key).
    pub fn from_env_value(v: &str) -> Result<Secret, String> {
        if v.trim().chars().count() < 32 {
            return Err("STEWARD_PUBLIC_SESSION_SECRET must be at least 32 characters".into());
        }
        use sha2::Digest;
        Ok(Secret(sha2::Sha256::digest(v.trim().as_bytes()).into()))
    }

    /// The environment's secret when given, else the data directory's key file, created (32 random
    /// bytes, hex, mode 0600) when it does not exist yet.
    pub fn load_or_create(data_dir: &Path, env_value: Option<&str>) -> Result<Secret, String> {
        if let Some(v) = env_value.filter(|v| !v.is_empty()) {
            return Secret::from_env_value(v);
        }
        let path = data_dir.join("public-session.key");
        match std::fs::read_to_string(&path) {
            Ok(hexkey) => {
                let bytes = hex::decode(hexkey.trim()).map_err(|_| format!("{} is not a hex key", path.display()))?;
                let key: [u8; 32] = bytes.try_into().map_err(|_| format!("{} must hold 32 bytes", path.display()))?;
                Ok(Secret(key))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key: [u8; 32] = rand::random();
                write_private(&path, hex::encode(key).as_bytes()).map_err(|e| format!("{}: {e}", path.display()))?;
                Ok(Secret(key))
            }
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    fn derive(&self, label: &[u8]) -> [u8; 32] {
        let mut m = mac(&self.0);
        m.update(label);
        m.finalize().into_bytes().into()
    }
}

/// An HMAC-SHA256 keyed with `key`.
#[allow(clippy::expect_used, reason = "HMAC takes keys of any length, so new_from_slice cannot fail")]
fn mac(key: &[u8]) -> HmacSha256 {
    <HmacSha256 as KeyInit>::new_from_slice(key).expect("HMAC accepts any key length")
}

/// Writes a file only its owner can read, atomically (a temporary file renamed into place).
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    o.mode(0o600);
    let mut f = o.open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
}

/// The binding of a launch token: an HMAC under a key derived for bindings (the token itself is
/// never in a session token).
pub fn launch_binding(secret: &Secret, launch_token: &str) -> String {
    let mut m = mac(&secret.derive(b"steward launch binding v1"));
    m.update(launch_token.as_bytes());
    b64().encode(m.finalize().into_bytes())
}

/// Signs `claims` as a token of `kind`.
pub fn sign<C: Expiring>(secret: &Secret, kind: Kind, claims: &C) -> String {
    let payload = b64().encode(serde_json::to_vec(claims).unwrap_or_default());
    let mut m = mac(&secret.derive(kind.label()));
    m.update(payload.as_bytes());
    format!("{payload}.{}", b64().encode(m.finalize().into_bytes()))
}

/// Checks a token of `kind` and returns its claims: well-formed, signed by this deployment for
/// this kind (compared in constant time), and not expired at `now` (unix seconds).
pub fn verify<C: Expiring>(secret: &Secret, kind: Kind, token: &str, now: i64) -> Result<C, TokenError> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(TokenError::Malformed);
    }
    let (payload, tag) = token.split_once('.').ok_or(TokenError::Malformed)?;
    let tag = b64().decode(tag).map_err(|_| TokenError::Malformed)?;
    let mut m = mac(&secret.derive(kind.label()));
    m.update(payload.as_bytes());
    m.verify_slice(&tag).map_err(|_| TokenError::BadSignature)?;
    let json = b64().decode(payload).map_err(|_| TokenError::Malformed)?;
    let claims: C = serde_json::from_slice(&json).map_err(|_| TokenError::Malformed)?;
    if claims.expires_at() <= now {
        return Err(TokenError::Expired);
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn claims(exp: i64) -> Claims {
        Claims {
            workspace_id: "ws".into(),
            agent_id: "ag".into(),
            public_session_id: "ps".into(),
            channel: "website_embed".into(),
            origin: Some("https://shop.example".into()),
            expires_at: exp,
            launch_binding: "b".into(),
            visitor_key: None,
        }
    }

    #[test]
    fn tokens_round_trip_and_refuse_tampering_expiry_and_the_other_kind() {
        let s = Secret::from_env_value(&"x".repeat(40)).unwrap();
        let t = sign(&s, Kind::Session, &claims(1000));
        assert_eq!(verify(&s, Kind::Session, &t, 999), Ok(claims(1000)));
        assert_eq!(verify::<Claims>(&s, Kind::Session, &t, 1000), Err(TokenError::Expired));
        assert_eq!(
            verify::<Claims>(&s, Kind::Resume, &t, 0),
            Err(TokenError::BadSignature),
            "a session token is not a resume token"
        );
        let other = Secret::from_env_value(&"y".repeat(40)).unwrap();
        assert_eq!(verify::<Claims>(&other, Kind::Session, &t, 0), Err(TokenError::BadSignature));
        let (p, sig) = t.split_once('.').unwrap();
        let forged = format!("{}.{sig}", b64().encode(serde_json::to_vec(&claims(9_999_999)).unwrap()));
        assert_ne!(p, forged.split_once('.').unwrap().0);
        assert_eq!(verify::<Claims>(&s, Kind::Session, &forged, 0), Err(TokenError::BadSignature));
        assert!(Secret::from_env_value("short").is_err());
    }

    #[test]
    fn launch_bindings_change_with_the_token() {
        let s = Secret::from_env_value(&"k".repeat(32)).unwrap();
        assert_eq!(launch_binding(&s, "pc_one"), launch_binding(&s, "pc_one"));
        assert_ne!(launch_binding(&s, "pc_one"), launch_binding(&s, "pc_two"));
    }

    #[test]
    fn the_key_file_is_made_once_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let a = Secret::load_or_create(dir.path(), None).unwrap();
        let b = Secret::load_or_create(dir.path(), None).unwrap();
        assert_eq!(a.0, b.0);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join("public-session.key")).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "only the owner can read it");
        }
        let env = Secret::load_or_create(dir.path(), Some(&"e".repeat(32))).unwrap();
        assert_ne!(env.0, a.0, "the environment overrides the file");
        std::fs::write(dir.path().join("public-session.key"), "zz").unwrap();
        assert!(Secret::load_or_create(dir.path(), None).is_err());
    }

    proptest! {
        #[test]
        fn no_input_panics_or_verifies(token in ".{0,600}") {
            let s = Secret::from_env_value(&"p".repeat(32)).unwrap();
            prop_assert!(verify::<Claims>(&s, Kind::Session, &token, 0).is_err());
        }

        #[test]
        fn any_claims_round_trip(ws in "[a-z0-9-]{1,40}", origin in proptest::option::of("https://[a-z]{1,20}\\.example"), exp in 1i64..i64::MAX) {
            let s = Secret::from_env_value(&"q".repeat(32)).unwrap();
            let mut c = claims(exp);
            c.workspace_id = ws;
            c.origin = origin;
            let t = sign(&s, Kind::Resume, &c);
            prop_assert_eq!(verify(&s, Kind::Resume, &t, 0), Ok(c));
        }
    }
}
