//! What Meta's webhook sends (the documented `whatsapp_business_account` shape) and how its
//! signature is checked: `X-Hub-Signature-256: sha256=<hex>`, HMAC-SHA256 of the raw body with the
//! app secret, compared in constant time. Pure: no I/O.

use hmac::{KeyInit, Mac};
use serde::Deserialize;
use sha2::Sha256;

/// Whether `header` is the signature of `body` under `app_secret` (fails closed: a missing,
/// malformed or wrong header is false).
pub fn signature_ok(app_secret: &str, header: Option<&str>, body: &[u8]) -> bool {
    let Some(h) = header.map(str::trim) else { return false };
    let Some(hex_sig) = h.strip_prefix("sha256=").or_else(|| h.strip_prefix("SHA256=")) else { return false };
    let Ok(sig) = hex::decode(hex_sig) else { return false };
    let Ok(mut mac) = <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(app_secret.as_bytes()) else { return false };
    mac.update(body);
    mac.verify_slice(&sig).is_ok()
}

/// The signature header value for `body` (tests and benchmarks sign with it).
pub fn sign(app_secret: &str, body: &[u8]) -> String {
    #[allow(clippy::expect_used, reason = "HMAC takes a key of any length")]
    let mut mac = <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(app_secret.as_bytes()).expect("hmac key");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

#[derive(Debug, Deserialize)]
struct Delivery {
    #[serde(default)]
    entry: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
struct Entry {
    #[serde(default)]
    changes: Vec<Change>,
}

#[derive(Debug, Deserialize)]
struct Change {
    #[serde(default)]
    field: Option<String>,
    value: Option<ChangeValue>,
}

#[derive(Debug, Deserialize)]
struct ChangeValue {
    metadata: Option<Metadata>,
    #[serde(default)]
    contacts: Vec<Contact>,
    #[serde(default)]
    messages: Vec<RawMessage>,
}

#[derive(Debug, Deserialize)]
struct Metadata {
    phone_number_id: String,
}

#[derive(Debug, Deserialize)]
struct Contact {
    wa_id: String,
    profile: Option<Profile>,
}

#[derive(Debug, Deserialize)]
struct Profile {
    name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct RawMessage {
    from: String,
    id: String,
    #[serde(rename = "type")]
    kind: String,
    text: Option<Text>,
}

#[derive(Debug, Deserialize)]
struct Text {
    body: String,
}

/// One customer message of a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inbound {
    /// The business number it was sent to (routing).
    pub phone_number_id: String,
    /// The customer's WhatsApp id (their number).
    pub from: String,
    pub profile_name: Option<String>,
    /// Meta's message id (`wamid.…`): duplicates are ignored by it.
    pub id: String,
    /// `text`, `image`, `audio`, `sticker`, `location`, …
    pub kind: String,
    /// The text of a text message.
    pub text: Option<String>,
}

/// Why a signed body was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

fn clip(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// The customer messages of a delivery, in order. Status updates and other fields are left out.
pub fn messages(body: &[u8]) -> Result<Vec<Inbound>, Malformed> {
    let d: Delivery = serde_json::from_slice(body)
        .map_err(|e| Malformed(format!("the body is not a WhatsApp webhook delivery: {e}")))?;
    let mut out = Vec::new();
    for change in d.entry.into_iter().flat_map(|e| e.changes) {
        if change.field.as_deref().is_some_and(|f| f != "messages") {
            continue;
        }
        let Some(v) = change.value else { continue };
        if v.messages.is_empty() {
            continue;
        }
        let Some(meta) = v.metadata else {
            return Err(Malformed("a change with messages has no metadata.phone_number_id".into()));
        };
        for m in v.messages {
            let valid_from = !m.from.is_empty() && m.from.len() <= 32 && m.from.chars().all(|c| c.is_ascii_digit());
            if !valid_from || m.id.is_empty() || m.id.len() > 256 || m.kind.is_empty() || m.kind.len() > 40 {
                return Err(Malformed("a message lacks a valid from, id or type".into()));
            }
            let profile_name = v
                .contacts
                .iter()
                .find(|c| c.wa_id == m.from)
                .and_then(|c| c.profile.as_ref())
                .and_then(|p| p.name.as_deref())
                .map(|n| clip(n, 200));
            let text = if m.kind == "text" { m.text.map(|t| t.body) } else { None };
            out.push(Inbound {
                phone_number_id: meta.phone_number_id.clone(),
                from: m.from,
                profile_name,
                id: m.id,
                kind: m.kind,
                text,
            });
        }
    }
    Ok(out)
}

/// A delivery carrying `messages` (tests and benchmarks build theirs with it): one entry, one
/// change, in the documented shape. Each message is `(from, id, text)`; `None` text makes an
/// image message.
pub fn delivery_json(phone_number_id: &str, messages: &[(&str, &str, Option<&str>)]) -> serde_json::Value {
    let msgs: Vec<serde_json::Value> = messages
        .iter()
        .map(|(from, id, text)| match text {
            Some(t) => serde_json::json!({"from": from, "id": id, "timestamp": "1700000000", "type": "text", "text": {"body": t}}),
            None => serde_json::json!({"from": from, "id": id, "timestamp": "1700000000", "type": "image",
                                        "image": {"mime_type": "image/jpeg", "sha256": "x", "id": "media-1"}}),
        })
        .collect();
    let contacts: Vec<serde_json::Value> = messages
        .iter()
        .map(|(from, _, _)| serde_json::json!({"profile": {"name": "Customer"}, "wa_id": from}))
        .collect();
    serde_json::json!({
        "object": "whatsapp_business_account",
        "entry": [{
            "id": "102290129340398",
            "changes": [{
                "value": {
                    "messaging_product": "whatsapp",
                    "metadata": {"display_phone_number": "15550783881", "phone_number_id": phone_number_id},
                    "contacts": contacts,
                    "messages": msgs,
                },
                "field": "messages"
            }]
        }]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn signatures_are_over_the_raw_bytes() {
        let body = "{\"text\":\"héllo 👋\"}".as_bytes();
        let sig = sign("app-secret", body);
        assert!(signature_ok("app-secret", Some(&sig), body));
        assert!(signature_ok("app-secret", Some(&sig.to_uppercase().replace("SHA256=", "sha256=")), body));
        assert!(!signature_ok("other", Some(&sig), body));
        assert!(!signature_ok("app-secret", None, body));
        assert!(!signature_ok("app-secret", Some("sha256=zz"), body));
        assert!(!signature_ok("app-secret", Some(&sig[7..]), body));
        // the same text with the emoji escaped is another body
        let escaped = b"{\"text\":\"h\\u00e9llo \\ud83d\\udc4b\"}";
        assert!(!signature_ok("app-secret", Some(&sig), escaped));
    }

    #[test]
    fn messages_of_the_documented_shape() {
        let v = delivery_json(
            "106540352242922",
            &[("16505551234", "wamid.A", Some("Hi ✨")), ("16505551234", "wamid.B", None)],
        );
        let m = messages(v.to_string().as_bytes()).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].text.as_deref(), Some("Hi ✨"));
        assert_eq!(m[0].profile_name.as_deref(), Some("Customer"));
        assert_eq!((m[1].kind.as_str(), m[1].text.as_deref()), ("image", None));
        // status updates carry no messages
        let statuses = serde_json::json!({"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "messages",
            "value": {"metadata": {"phone_number_id": "1"}, "statuses": [{"id": "wamid.X", "status": "read"}]}}]}]});
        assert!(messages(statuses.to_string().as_bytes()).unwrap().is_empty());
        assert!(messages(b"not json").is_err());
        let bad_from = delivery_json("1", &[("+1 555", "wamid.C", Some("x"))]);
        assert!(messages(bad_from.to_string().as_bytes()).is_err());
    }

    proptest! {
        #[test]
        fn any_bytes_parse_or_are_refused_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = messages(&bytes);
            prop_assert!(!signature_ok("k", Some("sha256=00"), &bytes));
        }

        #[test]
        fn a_signature_verifies_exactly_its_body(text in crate::testkit::hostile_text(6), flip in 0usize..64) {
            let body = delivery_json("1", &[("1", "wamid.P", Some(&text))]).to_string().into_bytes();
            let sig = sign("s3cret", &body);
            prop_assert!(signature_ok("s3cret", Some(&sig), &body));
            let mut tampered = body.clone();
            let i = flip % tampered.len();
            tampered[i] ^= 0x01;
            prop_assert!(!signature_ok("s3cret", Some(&sig), &tampered));
        }
    }
}
