//! The connectors' SQL: one row per workspace and connector (config, sealed secrets, the unique
//! channel field, the registered source and the sync state).

use std::collections::BTreeMap;

use rusqlite::{OptionalExtension, params};

use super::{Connector, ConnectorId, Progress, SyncState, SyncStatus};
use crate::crypto::SealedJson;
use crate::error::Result;
use crate::ids::WorkspaceId;
use crate::storage::{Conn, Row, Tx};

const COLS: &str = "workspace_id, connector_id, enabled, config, secrets, source_id, sync_status, sync_run_id, \
     sync_mode, sync_again, sync_progress, backfill_completed_at, last_sync_at, last_sync_finished_at, \
     modified_cursor, last_ingested_count, last_error, created_at, updated_at";

fn row(r: &Row) -> rusqlite::Result<Connector> {
    let id: String = r.get(1)?;
    let config: String = r.get(3)?;
    let secrets: String = r.get(4)?;
    let status: String = r.get(6)?;
    let progress: Option<String> = r.get(10)?;
    Ok(Connector {
        workspace_id: r.get(0)?,
        id: ConnectorId::parse(&id).unwrap_or(ConnectorId::Wordpress),
        enabled: r.get(2)?,
        plain: serde_json::from_str(&config).unwrap_or_default(),
        sealed: serde_json::from_str::<BTreeMap<String, SealedJson>>(&secrets).unwrap_or_default(),
        source_id: r.get(5)?,
        sync: SyncState {
            status: SyncStatus::parse(&status),
            run_id: r.get(7)?,
            mode: r.get(8)?,
            again: r.get(9)?,
            progress: progress.and_then(|p| serde_json::from_str(&p).ok()),
            backfill_completed_at: r.get(11)?,
            last_sync_at: r.get(12)?,
            last_sync_finished_at: r.get(13)?,
            modified_cursor: r.get(14)?,
            last_ingested_count: r.get(15)?,
            last_error: r.get(16)?,
        },
        created_at: r.get(17)?,
        updated_at: r.get(18)?,
    })
}

pub fn get(c: &Conn, ws: &WorkspaceId, id: ConnectorId) -> Result<Option<Connector>> {
    Ok(c.query_row(
        &format!("SELECT {COLS} FROM connectors WHERE workspace_id = ?1 AND connector_id = ?2"),
        params![ws, id.as_str()],
        row,
    )
    .optional()?)
}

pub fn by_channel(c: &Conn, id: ConnectorId, key: &str) -> Result<Option<Connector>> {
    Ok(c.query_row(
        &format!("SELECT {COLS} FROM connectors WHERE connector_id = ?1 AND channel_key = ?2"),
        params![id.as_str(), key],
        row,
    )
    .optional()?)
}

/// The workspace whose connector holds `key` as its channel field.
pub fn channel_owner(c: &Conn, id: ConnectorId, key: &str) -> Result<Option<WorkspaceId>> {
    Ok(c.query_row(
        "SELECT workspace_id FROM connectors WHERE connector_id = ?1 AND channel_key = ?2",
        params![id.as_str(), key],
        |r| r.get(0),
    )
    .optional()?)
}

pub fn put_config(
    tx: &Tx,
    ws: &WorkspaceId,
    id: ConnectorId,
    plain: &BTreeMap<String, String>,
    sealed: &BTreeMap<String, SealedJson>,
    channel_key: Option<&str>,
    now: &str,
) -> Result<()> {
    let config = serde_json::to_string(plain)?;
    let secrets = serde_json::to_string(sealed)?;
    tx.execute(
        "INSERT INTO connectors (workspace_id, connector_id, config, secrets, channel_key, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
         ON CONFLICT (workspace_id, connector_id) DO UPDATE SET
            config = excluded.config, secrets = excluded.secrets, channel_key = excluded.channel_key,
            updated_at = excluded.updated_at",
        params![ws, id.as_str(), config, secrets, channel_key, now],
    )?;
    Ok(())
}

pub fn set_enabled(tx: &Tx, ws: &WorkspaceId, id: ConnectorId, on: bool, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE connectors SET enabled = ?3, updated_at = ?4 WHERE workspace_id = ?1 AND connector_id = ?2",
        params![ws, id.as_str(), on, now],
    )?;
    Ok(())
}

pub fn set_source(tx: &Tx, ws: &WorkspaceId, id: ConnectorId, source_id: &str) -> Result<()> {
    tx.execute(
        "UPDATE connectors SET source_id = ?3 WHERE workspace_id = ?1 AND connector_id = ?2",
        params![ws, id.as_str(), source_id],
    )?;
    Ok(())
}

/// Forgets the backfill and the cursor: the next sync reads everything.
pub fn reset_cursor(tx: &Tx, ws: &WorkspaceId, id: ConnectorId, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE connectors SET backfill_completed_at = NULL, modified_cursor = NULL, updated_at = ?3
         WHERE workspace_id = ?1 AND connector_id = ?2",
        params![ws, id.as_str(), now],
    )?;
    Ok(())
}

/// A new run is queued (the caller checked none is active).
pub fn queue_run(tx: &Tx, ws: &WorkspaceId, id: ConnectorId, run: &str, mode: &str, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE connectors SET sync_status = 'queued', sync_run_id = ?3, sync_mode = ?4, sync_again = 0,
            sync_progress = NULL, updated_at = ?5
         WHERE workspace_id = ?1 AND connector_id = ?2",
        params![ws, id.as_str(), run, mode, now],
    )?;
    Ok(())
}

/// Marks the run `run` running; false when the connector's current run is another (or none).
pub fn start_run(tx: &Tx, ws: &WorkspaceId, id: ConnectorId, run: &str, now: &str) -> Result<bool> {
    let n = tx.execute(
        "UPDATE connectors SET sync_status = 'running', last_sync_at = ?4, updated_at = ?4
         WHERE workspace_id = ?1 AND connector_id = ?2 AND sync_run_id = ?3 AND sync_status != 'idle' AND enabled = 1",
        params![ws, id.as_str(), run, now],
    )?;
    Ok(n == 1)
}

/// Whether `run` is still the connector's active run.
pub fn owns_run(c: &Conn, ws: &WorkspaceId, id: ConnectorId, run: &str) -> Result<bool> {
    Ok(c.query_row(
        "SELECT 1 FROM connectors WHERE workspace_id = ?1 AND connector_id = ?2 AND sync_run_id = ?3
           AND sync_status != 'idle' AND enabled = 1",
        params![ws, id.as_str(), run],
        |_| Ok(()),
    )
    .optional()?
    .is_some())
}

pub fn set_progress(tx: &Tx, ws: &WorkspaceId, id: ConnectorId, run: &str, p: &Progress) -> Result<()> {
    tx.execute(
        "UPDATE connectors SET sync_progress = ?4 WHERE workspace_id = ?1 AND connector_id = ?2 AND sync_run_id = ?3",
        params![ws, id.as_str(), run, serde_json::to_string(p)?],
    )?;
    Ok(())
}

/// Records a failed attempt's error (the run stays queued for its retry).
pub fn set_error(tx: &Tx, ws: &WorkspaceId, id: ConnectorId, run: &str, error: &str, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE connectors SET last_error = ?4, sync_status = 'queued', updated_at = ?5
         WHERE workspace_id = ?1 AND connector_id = ?2 AND sync_run_id = ?3",
        params![ws, id.as_str(), run, error, now],
    )?;
    Ok(())
}

/// How a run ended.
pub struct Finish<'a> {
    /// A full read completed: the backfill is done.
    pub complete: bool,
    pub cursor: Option<&'a str>,
    pub ingested: i64,
    /// `None`: success (clears the last error).
    pub error: Option<&'a str>,
}

/// Ends the run `run`; returns whether a push asked for another run meanwhile (false when the
/// run was no longer current).
pub fn finish_run(
    tx: &Tx,
    ws: &WorkspaceId,
    id: ConnectorId,
    run: &str,
    f: &Finish,
    now: &str,
) -> Result<Option<bool>> {
    let again: Option<bool> = tx
        .query_row(
            "UPDATE connectors SET sync_status = 'idle', last_sync_finished_at = ?4, updated_at = ?4,
                backfill_completed_at = CASE WHEN ?5 THEN ?4 ELSE backfill_completed_at END,
                modified_cursor = COALESCE(?6, modified_cursor),
                last_ingested_count = CASE WHEN ?8 IS NULL THEN ?7 ELSE last_ingested_count END,
                last_error = ?8
             WHERE workspace_id = ?1 AND connector_id = ?2 AND sync_run_id = ?3
             RETURNING sync_again",
            params![ws, id.as_str(), run, now, f.complete, f.cursor, f.ingested, f.error],
            |r| r.get(0),
        )
        .optional()?;
    Ok(again)
}

/// Stops whatever run is active (the connector was disabled).
pub fn end_run(tx: &Tx, ws: &WorkspaceId, id: ConnectorId, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE connectors SET sync_status = 'idle', sync_run_id = NULL, sync_again = 0, updated_at = ?3
         WHERE workspace_id = ?1 AND connector_id = ?2",
        params![ws, id.as_str(), now],
    )?;
    Ok(())
}

/// A push arrived while a run is active: run again when it ends.
pub fn set_again(tx: &Tx, ws: &WorkspaceId, id: ConnectorId) -> Result<()> {
    tx.execute(
        "UPDATE connectors SET sync_again = 1 WHERE workspace_id = ?1 AND connector_id = ?2",
        params![ws, id.as_str()],
    )?;
    Ok(())
}

/// Starts a new chain of polls (older poll jobs see another token and stop).
pub fn set_poll_token(tx: &Tx, ws: &WorkspaceId, id: ConnectorId, token: &str) -> Result<()> {
    tx.execute(
        "UPDATE connectors SET poll_token = ?3 WHERE workspace_id = ?1 AND connector_id = ?2",
        params![ws, id.as_str(), token],
    )?;
    Ok(())
}

/// Whether `token` is the connector's current chain of polls.
pub fn poll_token_is(c: &Conn, ws: &WorkspaceId, id: ConnectorId, token: &str) -> Result<bool> {
    Ok(c.query_row(
        "SELECT 1 FROM connectors WHERE workspace_id = ?1 AND connector_id = ?2 AND poll_token = ?3",
        params![ws, id.as_str(), token],
        |_| Ok(()),
    )
    .optional()?
    .is_some())
}
