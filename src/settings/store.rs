//! SQL for workspace settings and provider credentials (private to `settings`).

use rusqlite::{OptionalExtension, params};

use crate::error::Result;
use crate::ids::WorkspaceId;
use crate::storage::{Conn, Tx};

/// The stored JSON text of `namespace`, if any.
pub(super) fn value(c: &Conn, ws: &WorkspaceId, namespace: &str) -> Result<Option<String>> {
    Ok(c.query_row(
        "SELECT value FROM workspace_settings WHERE workspace_id = ?1 AND namespace = ?2",
        params![ws, namespace],
        |r| r.get(0),
    )
    .optional()?)
}

/// The workspace whose general settings hold `token` as the launch token of `field`
/// (`anonymousChatToken` or `websiteEmbedToken`).
pub(super) fn workspace_by_launch_token(c: &Conn, field: &str, token: &str) -> Result<Option<(WorkspaceId, String)>> {
    let path = match field {
        "anonymousChatToken" => "$.anonymousChatToken",
        _ => "$.websiteEmbedToken",
    };
    Ok(c.query_row(
        "SELECT workspace_id, value FROM workspace_settings WHERE namespace = 'general' AND json_extract(value, ?1) = ?2",
        params![path, token],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()?)
}

/// Replaces the JSON text of `namespace`.
pub(super) fn put_value(tx: &Tx, ws: &WorkspaceId, namespace: &str, json: &str, now: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO workspace_settings (workspace_id, namespace, value, updated_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (workspace_id, namespace) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        params![ws, namespace, json, now],
    )?;
    Ok(())
}

/// `(provider, updated_at)` of the workspace's stored credentials, by provider.
pub(super) fn credentials(c: &Conn, ws: &WorkspaceId) -> Result<Vec<(String, String)>> {
    let mut st =
        c.prepare("SELECT provider, updated_at FROM provider_credentials WHERE workspace_id = ?1 ORDER BY provider")?;
    let rows = st.query_map([&ws.0], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<_>>()?;
    Ok(rows)
}

/// Stores (or replaces) a sealed credential.
pub(super) fn put_credential(
    tx: &Tx,
    ws: &WorkspaceId,
    provider: &str,
    key_id: &str,
    nonce: &[u8],
    ciphertext: &[u8],
    now: &str,
) -> Result<()> {
    tx.execute(
        "INSERT INTO provider_credentials (workspace_id, provider, key_id, nonce, ciphertext, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
         ON CONFLICT (workspace_id, provider) DO UPDATE SET key_id = excluded.key_id, nonce = excluded.nonce,
            ciphertext = excluded.ciphertext, updated_at = excluded.updated_at",
        params![ws.0, provider, key_id, nonce, ciphertext, now],
    )?;
    Ok(())
}

/// Deletes a credential; returns whether there was one.
pub(super) fn delete_credential(tx: &Tx, ws: &WorkspaceId, provider: &str) -> Result<bool> {
    Ok(tx.execute(
        "DELETE FROM provider_credentials WHERE workspace_id = ?1 AND provider = ?2",
        params![ws.0, provider],
    )? > 0)
}

/// `(nonce, ciphertext)` of a stored credential.
pub(super) fn sealed_credential(c: &Conn, ws: &WorkspaceId, provider: &str) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
    Ok(c.query_row(
        "SELECT nonce, ciphertext FROM provider_credentials WHERE workspace_id = ?1 AND provider = ?2",
        params![ws.0, provider],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()?)
}

pub(super) fn has_credential(c: &Conn, ws: &WorkspaceId, provider: &str) -> Result<bool> {
    Ok(c.query_row(
        "SELECT 1 FROM provider_credentials WHERE workspace_id = ?1 AND provider = ?2",
        params![ws.0, provider],
        |_| Ok(()),
    )
    .optional()?
    .is_some())
}

/// Keys of the workspace's ready documents' metadata: `(key, JSON type, a text sample)` (the
/// sample only when the smallest value is text), at most 500.
pub(super) fn metadata_keys(c: &Conn, ws: &str) -> Result<Vec<(String, String, Option<String>)>> {
    let sql = if c.is_postgres() {
        // json_each's key, type (SQLite's names) and atom, from jsonb_each
        "SELECT j.key, CASE jsonb_typeof(j.value) WHEN 'string' THEN 'text'
                WHEN 'number' THEN CASE WHEN j.value::text ~ '^-?[0-9]+$' THEN 'integer' ELSE 'real' END
                WHEN 'boolean' THEN j.value::text ELSE jsonb_typeof(j.value) END,
                min(j.value #>> '{}') FILTER (WHERE jsonb_typeof(j.value) = 'string')
         FROM documents d, jsonb_each(d.metadata::jsonb) j
         WHERE d.workspace_id = ?1 AND d.status = 'ready'
         GROUP BY 1, 2 LIMIT 500"
    } else {
        "SELECT j.key, j.type, min(j.atom) FROM documents d, json_each(d.metadata) j
         WHERE d.workspace_id = ?1 AND d.status = 'ready'
         GROUP BY j.key, j.type LIMIT 500"
    };
    let mut st = c.prepare(sql)?;
    let rows = st.query_map([ws], |r| {
        let sample = match r.get::<_, Option<rusqlite::types::Value>>(2)? {
            Some(rusqlite::types::Value::Text(s)) => Some(s),
            _ => None,
        };
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, sample))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}
