//! Workspace settings: one JSON value per (workspace, namespace), defaults in code. Typed
//! settings live in submodules; each validates its own ranges. Typed records in and out; all SQL
//! is in the private `store.rs`; the wire shapes are in `api.rs` (owned by the HTTP edge).

pub mod api;
pub mod credentials;
pub mod document_types;
pub mod general;
pub mod ingestion;
pub mod llm_models;
pub mod retrieval;
mod store;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::Result;
use crate::ids::WorkspaceId;
use crate::storage::{Conn, Tx};

/// The stored value of `namespace`, or `T::default()` when none is stored (or it no longer parses,
/// which is logged).
pub fn load<T: DeserializeOwned + Default>(c: &Conn, ws: &WorkspaceId, namespace: &str) -> Result<T> {
    Ok(match store::value(c, ws, namespace)? {
        None => T::default(),
        Some(s) => serde_json::from_str(&s).unwrap_or_else(|e| {
            tracing::warn!(namespace, error = %e, "stored settings do not parse; using defaults");
            T::default()
        }),
    })
}

pub fn store<T: Serialize>(tx: &Tx, ws: &WorkspaceId, namespace: &str, value: &T, now: &str) -> Result<()> {
    store::put_value(tx, ws, namespace, &serde_json::to_string(value)?, now)
}
