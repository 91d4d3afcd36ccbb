//! Webhook destinations: where routines export their results. Each has a name, an HTTPS URL that
//! passes the delivery SSRF guard, and a signing secret (shown once when created or rotated,
//! sealed at rest). `webhook.send` deliveries sign every attempt:
//! `X-Service-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<raw body>")>` with the
//! timestamp in `X-Service-Timestamp`.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::{Destination, store};
use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, Result};

fn key(app: &App) -> Option<&[u8; 32]> {
    app.config.encryption_key.as_ref().map(|k| k.expose())
}

fn aad(ws: &str, id: &str) -> String {
    format!("webhook-destination:{ws}:{id}")
}

/// `sha256=<hex>` over `<timestamp>.<body>`.
pub fn signature(secret: &str, timestamp: &str, body: &str) -> String {
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(m) => m,
        Err(_) => return String::new(),
    };
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Where a destination's deliveries go now and its signing secret (`None`: the destination is
/// gone). Read at send time, so a retry follows a changed URL or a rotated secret.
pub fn target(app: &App, ws: &str, id: &str) -> Result<Option<(String, String)>> {
    let Some(d) = app.db.read(|c| store::destination(c, ws, id))? else { return Ok(None) };
    let secret = crate::crypto::open_text(key(app), &d.secret_sealed, &aad(ws, id))?;
    Ok(Some((d.url, secret)))
}

/// Records the outcome of an attempt on the destination (`success`, `retry`, `failed`,
/// `skipped`).
pub fn record_delivery(app: &App, id: &str, status: &str) {
    let now = rfc3339(app.clock.now());
    if let Err(e) = app.db.write(|tx| store::record_delivery(tx, id, status, &now)) {
        tracing::warn!(destination = id, error = %e, "could not record a destination's delivery");
    }
}

fn check_name(name: &str) -> Result<String> {
    let n = name.trim();
    if n.is_empty() || n.chars().count() > 200 {
        return Err(Error::invalid_field("name", "name is 1 to 200 characters"));
    }
    Ok(n.to_string())
}

/// 409 `conflict` when another destination of the workspace (other than `except`) already has
/// `name`, compared case-insensitively (Unicode lower case); checked inside the writing
/// transaction, so two concurrent creates cannot both pass.
fn check_name_free(tx: &crate::storage::Tx, ws: &str, name: &str, except: Option<&str>) -> Result<()> {
    let wanted = name.to_lowercase();
    let taken = store::destinations(tx, ws)?
        .into_iter()
        .any(|d| Some(d.id.as_str()) != except && d.name.to_lowercase() == wanted);
    if taken {
        return Err(Error::conflict(format!("a webhook destination named `{name}` already exists"))
            .with_details(serde_json::json!({"field": "name"})));
    }
    Ok(())
}

/// HTTPS (unless the operator's allow-list admits the host) and a public address.
fn check_url(app: &App, url: &str) -> Result<String> {
    let u = url.trim();
    if u.len() > 2048 {
        return Err(Error::invalid_field("url", "url is at most 2048 characters"));
    }
    let parsed = reqwest::Url::parse(u).map_err(|_| Error::invalid_field("url", "url is not a valid URL"))?;
    app.outbound
        .guard()
        .check_url(&parsed)
        .map_err(|e| Error::invalid_field("url", format!("this URL cannot receive webhooks: {e}")))?;
    Ok(u.to_string())
}

/// A destination with the secret shown this once.
pub struct Created {
    pub destination: Destination,
    pub secret: String,
}

pub fn list(app: &App, p: &Principal) -> Result<Vec<Destination>> {
    p.require(Perm::SettingsRead)?;
    app.db.read(|c| store::destinations(c, &p.workspace_id.0))
}

pub fn get(app: &App, p: &Principal, id: &str) -> Result<Destination> {
    p.require(Perm::SettingsRead)?;
    app.db
        .read(|c| store::destination(c, &p.workspace_id.0, id))?
        .ok_or_else(|| Error::not_found("webhook destination"))
}

fn new_secret() -> String {
    crate::auth::password::new_secret("whsec_")
}

pub fn create(app: &App, p: &Principal, actor: &Actor, name: &str, url: &str) -> Result<Created> {
    p.require(Perm::SettingsManage)?;
    let (name, url) = (check_name(name)?, check_url(app, url)?);
    let ws = p.workspace_id.0.clone();
    let id = crate::ids::new_id();
    let secret = new_secret();
    let sealed = crate::crypto::seal_text(key(app), &secret, &aad(&ws, &id))?;
    let now = rfc3339(app.clock.now());
    let d = Destination {
        id: id.clone(),
        workspace_id: ws.clone(),
        name,
        url,
        secret_sealed: sealed,
        last_delivery_status: None,
        last_delivery_at: None,
        created_at: now.clone(),
        updated_at: now.clone(),
    };
    app.db.write(|tx| {
        check_name_free(tx, &ws, &d.name, None)?;
        store::insert_destination(tx, &d)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("webhook_destination.created").workspace(&p.workspace_id).target("webhook_destination", &id),
        )
    })?;
    Ok(Created { destination: d, secret })
}

pub fn update(
    app: &App,
    p: &Principal,
    actor: &Actor,
    id: &str,
    name: Option<&str>,
    url: Option<&str>,
) -> Result<Destination> {
    p.require(Perm::SettingsManage)?;
    let name = name.map(check_name).transpose()?;
    let url = url.map(|u| check_url(app, u)).transpose()?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let cur =
            store::destination(tx, &p.workspace_id.0, id)?.ok_or_else(|| Error::not_found("webhook destination"))?;
        let d = Destination {
            name: name.clone().unwrap_or(cur.name.clone()),
            url: url.clone().unwrap_or(cur.url.clone()),
            updated_at: now.clone(),
            ..cur
        };
        if name.is_some() {
            check_name_free(tx, &p.workspace_id.0, &d.name, Some(id))?;
        }
        store::update_destination(tx, &d)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("webhook_destination.updated").workspace(&p.workspace_id).target("webhook_destination", id),
        )?;
        Ok(d)
    })
}

/// A new signing secret, shown once; the old one stops signing at once.
pub fn rotate(app: &App, p: &Principal, actor: &Actor, id: &str) -> Result<Created> {
    p.require(Perm::SettingsManage)?;
    let ws = p.workspace_id.0.clone();
    let secret = new_secret();
    let sealed = crate::crypto::seal_text(key(app), &secret, &aad(&ws, id))?;
    let now = rfc3339(app.clock.now());
    let d = app.db.write(|tx| {
        let cur = store::destination(tx, &ws, id)?.ok_or_else(|| Error::not_found("webhook destination"))?;
        let d = Destination { secret_sealed: sealed.clone(), updated_at: now.clone(), ..cur };
        store::update_destination(tx, &d)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("webhook_destination.secret_rotated")
                .workspace(&p.workspace_id)
                .target("webhook_destination", id),
        )?;
        Ok(d)
    })?;
    Ok(Created { destination: d, secret })
}

/// Deletes a destination; refused (409, naming them) while routines export to it.
pub fn delete(app: &App, p: &Principal, actor: &Actor, id: &str) -> Result<()> {
    p.require(Perm::SettingsManage)?;
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        store::destination(tx, &p.workspace_id.0, id)?.ok_or_else(|| Error::not_found("webhook destination"))?;
        let users = store::exporting_to(tx, &p.workspace_id.0, id)?;
        if !users.is_empty() {
            return Err(Error::conflict(format!(
                "routine `{}` exports to this destination; change its export first",
                users.join("`, `")
            ))
            .with_details(serde_json::json!({"code": "destination_in_use", "routines": users})));
        }
        store::delete_destination(tx, id)?;
        audit::record(
            tx,
            &now,
            actor,
            Event::new("webhook_destination.deleted").workspace(&p.workspace_id).target("webhook_destination", id),
        )
    })
}

/// The workspace's destinations as `(id, name)` (bundles name a routine's destination by name).
pub fn names(c: &crate::storage::Conn, ws: &str) -> Result<Vec<(String, String)>> {
    Ok(store::destinations(c, ws)?.into_iter().map(|d| (d.id, d.name)).collect())
}

/// Ids of the workspace's destinations (for routine validation).
pub fn ids(c: &crate::storage::Conn, ws: &str) -> Result<Vec<String>> {
    Ok(store::destinations(c, ws)?.into_iter().map(|d| d.id).collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn signature_is_hmac_over_timestamp_dot_body() {
        // HMAC-SHA256("secret", "1700000000.{}")
        let s = super::signature("secret", "1700000000", "{}");
        assert!(s.starts_with("sha256=") && s.len() == 7 + 64, "{s}");
        assert_eq!(s, super::signature("secret", "1700000000", "{}"));
        assert_ne!(s, super::signature("secret", "1700000001", "{}"));
    }
}
