//! The SQL of routines: authored routines (part of an agent's draft), pending decisions and
//! webhook destinations. Private to `routines`.

use rusqlite::{OptionalExtension, params};

use super::definition::Definition;
use super::{Decision, Destination, RoutineRecord};
use crate::error::Result;
use crate::storage::{Conn as Connection, Row, Tx};

// -- routines

const COLS: &str = "id, agent_id, workspace_id, name, version, definition, created_at, updated_at";

fn row(r: &Row) -> rusqlite::Result<RoutineRecord> {
    let raw: String = r.get(5)?;
    let definition: Definition = serde_json::from_str(&raw)
        .map_err(|e| rusqlite::types::FromSqlError::Other(format!("routine definition: {e}").into()))
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(5, rusqlite::types::Type::Text, Box::new(e)))?;
    Ok(RoutineRecord {
        id: r.get(0)?,
        agent_id: r.get(1)?,
        workspace_id: r.get(2)?,
        name: r.get(3)?,
        version: r.get(4)?,
        definition,
        created_at: r.get(6)?,
        updated_at: r.get(7)?,
    })
}

pub fn of_agent(c: &Connection, agent_id: &str) -> Result<Vec<RoutineRecord>> {
    let mut st = c.prepare(&format!("SELECT {COLS} FROM routines WHERE agent_id = ?1 ORDER BY name, version"))?;
    Ok(st.query_map(params![agent_id], row)?.collect::<rusqlite::Result<Vec<_>>>()?)
}

pub fn find(c: &Connection, agent_id: &str, id: &str) -> Result<Option<RoutineRecord>> {
    Ok(c.query_row(&format!("SELECT {COLS} FROM routines WHERE id = ?1 AND agent_id = ?2"), params![id, agent_id], row)
        .optional()?)
}

pub fn named(c: &Connection, agent_id: &str, name: &str, version: i64) -> Result<Option<String>> {
    Ok(c.query_row(
        "SELECT id FROM routines WHERE agent_id = ?1 AND name = ?2 AND version = ?3",
        params![agent_id, name, version],
        |r| r.get(0),
    )
    .optional()?)
}

pub fn insert(tx: &Tx, r: &RoutineRecord) -> Result<()> {
    tx.execute(
        "INSERT INTO routines (id, agent_id, workspace_id, name, version, definition, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            r.id,
            r.agent_id,
            r.workspace_id,
            r.name,
            r.version,
            serde_json::to_string(&r.definition)?,
            r.created_at,
            r.updated_at
        ],
    )?;
    Ok(())
}

pub fn update(tx: &Tx, r: &RoutineRecord) -> Result<()> {
    tx.execute(
        "UPDATE routines SET name = ?2, version = ?3, definition = ?4, updated_at = ?5 WHERE id = ?1",
        params![r.id, r.name, r.version, serde_json::to_string(&r.definition)?, r.updated_at],
    )?;
    Ok(())
}

pub fn delete(tx: &Tx, id: &str) -> Result<()> {
    tx.execute("DELETE FROM routines WHERE id = ?1", params![id])?;
    Ok(())
}

/// Routines of the workspace whose completion export names `destination` (for the delete check).
pub fn exporting_to(c: &Connection, ws: &str, destination: &str) -> Result<Vec<String>> {
    let mut st = c.prepare(
        "SELECT name FROM routines WHERE workspace_id = ?1
         AND json_extract(definition, '$.completionExport.destinationRef') = ?2 ORDER BY name",
    )?;
    Ok(st.query_map(params![ws, destination], |r| r.get(0))?.collect::<rusqlite::Result<Vec<_>>>()?)
}

// -- decisions

const DCOLS: &str = "handle, workspace_id, agent_id, conversation_id, routine_id, step_id, reason, options, content_hash, \
    deadline, timeout_option, status, chosen_option, resolved_by, resolved_at, created_at, routine_name";

fn drow(r: &Row) -> rusqlite::Result<Decision> {
    let options: String = r.get(7)?;
    Ok(Decision {
        handle: r.get(0)?,
        workspace_id: r.get(1)?,
        agent_id: r.get(2)?,
        conversation_id: r.get(3)?,
        routine_id: r.get(4)?,
        step_id: r.get(5)?,
        reason: r.get(6)?,
        options: serde_json::from_str(&options).unwrap_or_default(),
        content_hash: r.get(8)?,
        deadline: r.get(9)?,
        timeout_option: r.get(10)?,
        resolved: r.get::<_, String>(11)? == "resolved",
        chosen_option: r.get(12)?,
        resolved_by: r.get(13)?,
        resolved_at: r.get(14)?,
        created_at: r.get(15)?,
        routine_name: r.get(16)?,
    })
}

pub fn insert_decision(tx: &Tx, d: &Decision) -> Result<()> {
    tx.execute(
        &format!("INSERT INTO decisions ({DCOLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'pending', NULL, NULL, NULL, ?12, ?13)"),
        params![
            d.handle,
            d.workspace_id,
            d.agent_id,
            d.conversation_id,
            d.routine_id,
            d.step_id,
            d.reason,
            serde_json::to_string(&d.options)?,
            d.content_hash,
            d.deadline,
            d.timeout_option,
            d.created_at,
            d.routine_name
        ],
    )?;
    Ok(())
}

pub fn decision(c: &Connection, ws: &str, handle: &str) -> Result<Option<Decision>> {
    Ok(c.query_row(
        &format!("SELECT {DCOLS} FROM decisions WHERE handle = ?1 AND workspace_id = ?2"),
        params![handle, ws],
        drow,
    )
    .optional()?)
}

pub fn open_decisions(c: &Connection, ws: &str, limit: usize) -> Result<Vec<Decision>> {
    let mut st = c.prepare(&format!(
        "SELECT {DCOLS} FROM decisions WHERE workspace_id = ?1 AND status = 'pending' ORDER BY created_at DESC, handle DESC LIMIT ?2"
    ))?;
    Ok(st.query_map(params![ws, limit as i64], drow)?.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// Flips a pending decision to resolved; false when it was no longer pending (someone else won).
pub fn resolve_decision(tx: &Tx, handle: &str, option: &str, by: Option<&str>, now: &str) -> Result<bool> {
    Ok(tx.execute(
        "UPDATE decisions SET status = 'resolved', chosen_option = ?2, resolved_by = ?3, resolved_at = ?4
         WHERE handle = ?1 AND status = 'pending'",
        params![handle, option, by, now],
    )? == 1)
}

// -- webhook destinations

const WCOLS: &str =
    "id, workspace_id, name, url, secret_sealed, last_delivery_status, last_delivery_at, created_at, updated_at";

fn wrow(r: &Row) -> rusqlite::Result<Destination> {
    let sealed: String = r.get(4)?;
    Ok(Destination {
        id: r.get(0)?,
        workspace_id: r.get(1)?,
        name: r.get(2)?,
        url: r.get(3)?,
        secret_sealed: serde_json::from_str(&sealed).unwrap_or_default(),
        last_delivery_status: r.get(5)?,
        last_delivery_at: r.get(6)?,
        created_at: r.get(7)?,
        updated_at: r.get(8)?,
    })
}

pub fn destinations(c: &Connection, ws: &str) -> Result<Vec<Destination>> {
    let mut st =
        c.prepare(&format!("SELECT {WCOLS} FROM webhook_destinations WHERE workspace_id = ?1 ORDER BY name, id"))?;
    Ok(st.query_map(params![ws], wrow)?.collect::<rusqlite::Result<Vec<_>>>()?)
}

pub fn destination(c: &Connection, ws: &str, id: &str) -> Result<Option<Destination>> {
    Ok(c.query_row(
        &format!("SELECT {WCOLS} FROM webhook_destinations WHERE id = ?1 AND workspace_id = ?2"),
        params![id, ws],
        wrow,
    )
    .optional()?)
}

pub fn insert_destination(tx: &Tx, d: &Destination) -> Result<()> {
    tx.execute(
        &format!("INSERT INTO webhook_destinations ({WCOLS}) VALUES (?1, ?2, ?3, ?4, ?5, NULL, NULL, ?6, ?7)"),
        params![d.id, d.workspace_id, d.name, d.url, d.secret_sealed.to_string(), d.created_at, d.updated_at],
    )?;
    Ok(())
}

pub fn update_destination(tx: &Tx, d: &Destination) -> Result<()> {
    tx.execute(
        "UPDATE webhook_destinations SET name = ?2, url = ?3, secret_sealed = ?4, updated_at = ?5 WHERE id = ?1",
        params![d.id, d.name, d.url, d.secret_sealed.to_string(), d.updated_at],
    )?;
    Ok(())
}

pub fn delete_destination(tx: &Tx, id: &str) -> Result<()> {
    tx.execute("DELETE FROM webhook_destinations WHERE id = ?1", params![id])?;
    Ok(())
}

pub fn record_delivery(tx: &Tx, id: &str, status: &str, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE webhook_destinations SET last_delivery_status = ?2, last_delivery_at = ?3 WHERE id = ?1",
        params![id, status, now],
    )?;
    Ok(())
}
