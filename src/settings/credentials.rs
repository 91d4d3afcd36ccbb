//! Workspace provider credentials: API keys for hosted model providers, encrypted at rest
//! (`crate::crypto`), never returned, logged or traced. Reads report which providers have a key
//! and which have a deployment-level key in the environment.

use rusqlite::{OptionalExtension, params};
use serde_json::{Value, json};

use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::config::Secret;
use crate::crypto::{self, Sealed};
use crate::error::{Error, Result};
use crate::ids::WorkspaceId;

/// Providers that take an API key (the `local` provider does not).
pub const KEY_PROVIDERS: [&str; 4] = ["openai", "openai-compatible", "claude", "gemini"];

/// The longest API key accepted.
const MAX_KEY_CHARS: usize = 4096;

fn aad(ws: &WorkspaceId, provider: &str) -> String {
    format!("credential:{}:{provider}", ws.0)
}

fn check_provider(provider: &str) -> Result<&'static str> {
    KEY_PROVIDERS.iter().find(|p| **p == provider).copied().ok_or_else(|| {
        Error::invalid_field("provider", format!("unknown provider `{provider}`; one of {}", KEY_PROVIDERS.join(", ")))
    })
}

/// `GET /settings/credentials`.
pub fn list(app: &App, p: &Principal) -> Result<Value> {
    p.require(Perm::SettingsRead)?;
    let rows: Vec<(String, String)> = app.db.read(|c| {
        let mut st = c.prepare(
            "SELECT provider, updated_at FROM provider_credentials WHERE workspace_id = ?1 ORDER BY provider",
        )?;
        let rows =
            st.query_map([&p.workspace_id.0], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    })?;
    let env: serde_json::Map<String, Value> =
        KEY_PROVIDERS.iter().map(|k| (k.to_string(), json!(app.config.llm.env_keys.contains_key(*k)))).collect();
    Ok(json!({
        "encryptionConfigured": app.config.encryption_key.is_some(),
        "credentials": rows.into_iter().map(|(provider, updated)| json!({"provider": provider, "updatedAt": updated})).collect::<Vec<_>>(),
        "envProviderAvailability": env,
    }))
}

/// `PUT /settings/credentials/{provider}` `{apiKey}`.
pub fn put(app: &App, p: &Principal, actor: &Actor, provider: &str, api_key: &str) -> Result<()> {
    p.require(Perm::SettingsManage)?;
    let provider = check_provider(provider)?;
    let key = api_key.trim();
    if key.is_empty() {
        return Err(Error::invalid_field("apiKey", "apiKey must not be empty"));
    }
    if key.chars().count() > MAX_KEY_CHARS || key.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::invalid_field(
            "apiKey",
            "apiKey must be one line of at most 4096 characters without spaces",
        ));
    }
    let sealed = crypto::seal(
        app.config.encryption_key.as_ref().map(|k| k.expose()),
        key.as_bytes(),
        &aad(&p.workspace_id, provider),
    )?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        tx.execute(
            "INSERT INTO provider_credentials (workspace_id, provider, key_id, nonce, ciphertext, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
             ON CONFLICT (workspace_id, provider) DO UPDATE SET key_id = excluded.key_id, nonce = excluded.nonce,
                ciphertext = excluded.ciphertext, updated_at = excluded.updated_at",
            params![p.workspace_id.0, provider, crypto::KEY_ID, sealed.nonce, sealed.ciphertext, now],
        )?;
        audit::record(tx, &now, actor, Event::new("settings.credential.stored").workspace(&p.workspace_id).target("provider_credential", provider))
    })
}

/// `DELETE /settings/credentials/{provider}`: 404 when none is stored.
pub fn delete(app: &App, p: &Principal, actor: &Actor, provider: &str) -> Result<()> {
    p.require(Perm::SettingsManage)?;
    let provider = check_provider(provider)?;
    if app.config.encryption_key.is_none() {
        return Err(crypto::not_configured());
    }
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let n = tx.execute(
            "DELETE FROM provider_credentials WHERE workspace_id = ?1 AND provider = ?2",
            params![p.workspace_id.0, provider],
        )?;
        if n == 0 {
            return Err(Error::not_found("credential"));
        }
        audit::record(
            tx,
            &now,
            actor,
            Event::new("settings.credential.deleted")
                .workspace(&p.workspace_id)
                .target("provider_credential", provider),
        )
    })
}

/// The workspace's decrypted key for `provider`, if one is stored.
pub fn workspace_key(app: &App, ws: &WorkspaceId, provider: &str) -> Result<Option<Secret<String>>> {
    let row: Option<(Vec<u8>, Vec<u8>)> = app.db.read(|c| {
        Ok(c.query_row(
            "SELECT nonce, ciphertext FROM provider_credentials WHERE workspace_id = ?1 AND provider = ?2",
            params![ws.0, provider],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?)
    })?;
    let Some((nonce, ciphertext)) = row else { return Ok(None) };
    let plain = crypto::open(
        app.config.encryption_key.as_ref().map(|k| k.expose()),
        &Sealed { nonce, ciphertext },
        &aad(ws, provider),
    )?;
    let s = String::from_utf8(plain).map_err(|_| Error::internal_msg("a stored credential is not text"))?;
    Ok(Some(Secret::new(s)))
}

/// Whether the workspace has a stored credential for `provider` (without decrypting it).
pub fn has_workspace_key(app: &App, ws: &WorkspaceId, provider: &str) -> Result<bool> {
    app.db.read(|c| {
        Ok(c.query_row(
            "SELECT 1 FROM provider_credentials WHERE workspace_id = ?1 AND provider = ?2",
            params![ws.0, provider],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
    })
}
