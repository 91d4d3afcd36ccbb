//! Workspace settings: one JSON value per (workspace, namespace), defaults in code. Typed
//! settings live in submodules; each validates its own ranges.

pub mod credentials;
pub mod document_types;
pub mod ingestion;
pub mod llm_models;
pub mod retrieval;

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::Result;
use crate::ids::WorkspaceId;
use crate::storage::Tx;

/// The stored value of `namespace`, or `T::default()` when none is stored (or it no longer parses,
/// which is logged).
pub fn load<T: DeserializeOwned + Default>(c: &Connection, ws: &WorkspaceId, namespace: &str) -> Result<T> {
    let raw: Option<String> = c
        .query_row(
            "SELECT value FROM workspace_settings WHERE workspace_id = ?1 AND namespace = ?2",
            params![ws, namespace],
            |r| r.get(0),
        )
        .optional()?;
    Ok(match raw {
        None => T::default(),
        Some(s) => serde_json::from_str(&s).unwrap_or_else(|e| {
            tracing::warn!(namespace, error = %e, "stored settings do not parse; using defaults");
            T::default()
        }),
    })
}

pub fn store<T: Serialize>(tx: &Tx, ws: &WorkspaceId, namespace: &str, value: &T, now: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO workspace_settings (workspace_id, namespace, value, updated_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (workspace_id, namespace) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        params![ws, namespace, serde_json::to_string(value)?, now],
    )?;
    Ok(())
}
