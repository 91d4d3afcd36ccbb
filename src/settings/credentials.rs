//! Workspace provider credentials: API keys for hosted model providers, encrypted at rest
//! (`crate::crypto`), never returned, logged or traced. Reads report which providers have a key
//! and which have a deployment-level key in the environment.

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

/// A stored credential (its key is never read back).
#[derive(Debug, Clone)]
pub struct StoredCredential {
    pub provider: String,
    pub updated_at: String,
}

/// What `GET /settings/credentials` reports.
#[derive(Debug, Clone)]
pub struct CredentialList {
    pub encryption_configured: bool,
    pub credentials: Vec<StoredCredential>,
    /// Each key provider, in [`KEY_PROVIDERS`] order, with whether the environment has a key.
    pub env_provider_availability: Vec<(&'static str, bool)>,
}

/// `GET /settings/credentials`.
pub fn list(app: &App, p: &Principal) -> Result<CredentialList> {
    p.require(Perm::SettingsRead)?;
    let rows = app.db.read(|c| super::store::credentials(c, &p.workspace_id))?;
    Ok(CredentialList {
        encryption_configured: app.config.encryption_key.is_some(),
        credentials: rows.into_iter().map(|(provider, updated_at)| StoredCredential { provider, updated_at }).collect(),
        env_provider_availability: KEY_PROVIDERS
            .iter()
            .map(|k| (*k, app.config.llm.env_keys.contains_key(*k)))
            .collect(),
    })
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
        super::store::put_credential(
            tx,
            &p.workspace_id,
            provider,
            crypto::KEY_ID,
            &sealed.nonce,
            &sealed.ciphertext,
            &now,
        )?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("settings.credential.stored").workspace(&p.workspace_id).target("provider_credential", provider),
        )
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
        if !super::store::delete_credential(tx, &p.workspace_id, provider)? {
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
    let row = app.db.read(|c| super::store::sealed_credential(c, ws, provider))?;
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
    app.db.read(|c| super::store::has_credential(c, ws, provider))
}
