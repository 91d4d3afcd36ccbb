//! Secrets at rest: AES-256-GCM with the deployment key (`CONNECTOR_ENCRYPTION_KEY`). Each value
//! gets a fresh 96-bit nonce; the associated data binds a ciphertext to what it belongs to (for
//! example `credential:<workspace>:<provider>`), so a row copied elsewhere does not decrypt.

use aes_gcm::aead::{Aead, Generate, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};

use crate::error::{Error, ErrorCode, Result};

/// A deployment key (`CONNECTOR_ENCRYPTION_KEY`): 32 random bytes written as 64 hex characters or
/// as base64 (standard or URL-safe alphabet, padding optional). Generate one with
/// `openssl rand -hex 32`.
pub fn parse_key(v: &str) -> std::result::Result<[u8; 32], String> {
    use base64::Engine as _;
    let v = v.trim();
    let bytes = if v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()) {
        hex::decode(v).ok()
    } else {
        let cleaned = v.trim_end_matches('=');
        base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(cleaned)
            .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(cleaned))
            .ok()
    };
    match bytes {
        Some(b) => <[u8; 32]>::try_from(b.as_slice()).map_err(|_| {
            format!("it decodes to {} bytes; it must be exactly 32 (generate one with `openssl rand -hex 32`)", b.len())
        }),
        None => {
            Err("it must be 32 bytes written as 64 hex characters or base64 (generate one with `openssl rand -hex 32`)"
                .into())
        }
    }
}

/// The label stored beside ciphertexts, naming the key that made them.
pub const KEY_ID: &str = "connector";

pub struct Sealed {
    pub nonce: Vec<u8>,
    pub ciphertext: Vec<u8>,
}

pub fn not_configured() -> Error {
    Error::new(
        ErrorCode::EncryptionNotConfigured,
        "secrets cannot be stored: set CONNECTOR_ENCRYPTION_KEY (32 bytes as 64 hex characters or base64) and restart",
    )
}

fn cipher(key: Option<&[u8; 32]>) -> Result<Aes256Gcm> {
    let key = key.ok_or_else(not_configured)?;
    Aes256Gcm::new_from_slice(key).map_err(|_| Error::internal_msg("bad encryption key length"))
}

pub fn seal(key: Option<&[u8; 32]>, plaintext: &[u8], aad: &str) -> Result<Sealed> {
    let c = cipher(key)?;
    let nonce = Nonce::generate();
    let ciphertext = c
        .encrypt(&nonce, Payload { msg: plaintext, aad: aad.as_bytes() })
        .map_err(|_| Error::internal_msg("encryption failed"))?;
    Ok(Sealed { nonce: nonce.to_vec(), ciphertext })
}

pub fn open(key: Option<&[u8; 32]>, sealed: &Sealed, aad: &str) -> Result<Vec<u8>> {
    let c = cipher(key)?;
    let nonce =
        Nonce::try_from(sealed.nonce.as_slice()).map_err(|_| Error::internal_msg("a stored nonce is malformed"))?;
    c.decrypt(&nonce, Payload { msg: &sealed.ciphertext, aad: aad.as_bytes() }).map_err(|_| {
        Error::unavailable(
            "a stored secret cannot be decrypted: CONNECTOR_ENCRYPTION_KEY differs from the key it was stored with",
        )
    })
}

/// A sealed text kept inside a JSON document (a skill's configuration, a job's payload):
/// `{nonce, ciphertext}` in base64. Free-form JSON by nature of where it lives.
pub type SealedJson = serde_json::Value;

/// Seals `plaintext` into a [`SealedJson`].
pub fn seal_text(key: Option<&[u8; 32]>, plaintext: &str, aad: &str) -> Result<SealedJson> {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let s = seal(key, plaintext.as_bytes(), aad)?;
    Ok(serde_json::json!({"nonce": b64.encode(&s.nonce), "ciphertext": b64.encode(&s.ciphertext)}))
}

/// Opens a [`SealedJson`] made by [`seal_text`] with the same associated data.
pub fn open_text(key: Option<&[u8; 32]>, v: &SealedJson, aad: &str) -> Result<String> {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let part = |k: &str| {
        b64.decode(v[k].as_str().unwrap_or_default()).map_err(|_| Error::internal_msg("a sealed value is malformed"))
    };
    let plain = open(key, &Sealed { nonce: part("nonce")?, ciphertext: part("ciphertext")? }, aad)?;
    String::from_utf8(plain).map_err(|_| Error::internal_msg("a sealed value is not text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_text_round_trips_inside_json() {
        let k = [3u8; 32];
        let v = seal_text(Some(&k), "https://hooks.example/secret", "skill:a").unwrap();
        assert!(!v.to_string().contains("secret"));
        assert_eq!(open_text(Some(&k), &v, "skill:a").unwrap(), "https://hooks.example/secret");
        assert!(open_text(Some(&k), &v, "skill:b").is_err());
        assert!(open_text(Some(&k), &serde_json::json!({"nonce": "!"}), "skill:a").is_err());
    }

    #[test]
    fn round_trip_binds_associated_data_and_key() {
        let k = [7u8; 32];
        let s = seal(Some(&k), b"sk-secret", "credential:w:openai").unwrap();
        assert!(!s.ciphertext.windows(9).any(|w| w == b"sk-secret"));
        assert_eq!(open(Some(&k), &s, "credential:w:openai").unwrap(), b"sk-secret");
        assert!(open(Some(&k), &s, "credential:w:claude").is_err());
        assert!(open(Some(&[8u8; 32]), &s, "credential:w:openai").is_err());
        assert_eq!(seal(None, b"x", "a").err().unwrap().code, ErrorCode::EncryptionNotConfigured);
        // fresh nonce each time
        assert_ne!(seal(Some(&k), b"sk-secret", "a").unwrap().nonce, seal(Some(&k), b"sk-secret", "a").unwrap().nonce);
    }
}
