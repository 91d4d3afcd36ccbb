//! WhatsApp's SQL: customers (`whatsapp_contacts`), which customer a conversation is with
//! (`whatsapp_threads`), bursts answered as one turn (`whatsapp_batches`) and the message log
//! (`whatsapp_messages`).

use rusqlite::{OptionalExtension, params};

use super::{Batch, Contact, Counts, LogEntry};
use crate::error::Result;
use crate::storage::{Conn, Row, Tx};

pub fn contact(c: &Conn, ws: &str, wa_id: &str) -> Result<Option<Contact>> {
    Ok(c.query_row(
        "SELECT wa_id, profile_name, conversation_id, conversation_last_at, last_inbound_at
         FROM whatsapp_contacts WHERE workspace_id = ?1 AND wa_id = ?2",
        params![ws, wa_id],
        |r| {
            Ok(Contact {
                wa_id: r.get(0)?,
                profile_name: r.get(1)?,
                conversation_id: r.get(2)?,
                conversation_last_at: r.get(3)?,
                last_inbound_at: r.get(4)?,
            })
        },
    )
    .optional()?)
}

/// The customer wrote now (opens the 24-hour window).
pub fn touch_contact(tx: &Tx, ws: &str, wa_id: &str, profile_name: Option<&str>, now: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO whatsapp_contacts (workspace_id, wa_id, profile_name, last_inbound_at, created_at)
         VALUES (?1, ?2, ?3, ?4, ?4)
         ON CONFLICT (workspace_id, wa_id) DO UPDATE SET
            last_inbound_at = MAX(whatsapp_contacts.last_inbound_at, excluded.last_inbound_at),
            profile_name = COALESCE(excluded.profile_name, whatsapp_contacts.profile_name)",
        params![ws, wa_id, profile_name, now],
    )?;
    Ok(())
}

pub fn set_contact_conversation(tx: &Tx, ws: &str, wa_id: &str, conversation: &str, at: &str) -> Result<()> {
    tx.execute(
        "UPDATE whatsapp_contacts SET conversation_id = ?3, conversation_last_at = ?4 WHERE workspace_id = ?1 AND wa_id = ?2",
        params![ws, wa_id, conversation, at],
    )?;
    Ok(())
}

pub fn insert_thread(tx: &Tx, conversation: &str, ws: &str, wa_id: &str, now: &str) -> Result<()> {
    tx.execute(
        "INSERT OR IGNORE INTO whatsapp_threads (conversation_id, workspace_id, wa_id, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![conversation, ws, wa_id, now],
    )?;
    Ok(())
}

/// The customer of a WhatsApp conversation.
pub fn thread(c: &Conn, conversation: &str) -> Result<Option<(String, String)>> {
    Ok(c.query_row(
        "SELECT workspace_id, wa_id FROM whatsapp_threads WHERE conversation_id = ?1",
        params![conversation],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()?)
}

/// A log row to write.
pub struct NewRow<'a> {
    pub id: &'a str,
    pub ws: &'a str,
    pub direction: &'a str,
    pub wa_message_id: Option<&'a str>,
    pub wa_id: &'a str,
    pub kind: &'a str,
    pub body: Option<&'a str>,
    pub status: &'a str,
    pub error: Option<&'a str>,
    pub conversation_id: Option<&'a str>,
    pub message_id: Option<&'a str>,
    pub part: Option<i64>,
}

/// Writes a log row; false when it is a duplicate (the same inbound message id, or the same part
/// of the same outbound message).
pub fn insert_row(tx: &Tx, r: &NewRow, now: &str) -> Result<bool> {
    let n = tx.execute(
        "INSERT OR IGNORE INTO whatsapp_messages (id, workspace_id, direction, wa_message_id, wa_id, kind, body, status,
            error, conversation_id, message_id, part, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13)",
        params![
            r.id,
            r.ws,
            r.direction,
            r.wa_message_id,
            r.wa_id,
            r.kind,
            r.body,
            r.status,
            r.error,
            r.conversation_id,
            r.message_id,
            r.part,
            now
        ],
    )?;
    Ok(n == 1)
}

pub fn set_delivery(tx: &Tx, row: &str, delivery: &str) -> Result<()> {
    tx.execute("UPDATE whatsapp_messages SET delivery_id = ?2 WHERE id = ?1", params![row, delivery])?;
    Ok(())
}

const LOG_COLS: &str =
    "id, direction, wa_id, kind, body, status, error, conversation_id, delivery_id, batch_id, created_at, updated_at";

fn log_row(r: &Row) -> rusqlite::Result<LogEntry> {
    Ok(LogEntry {
        id: r.get(0)?,
        direction: r.get(1)?,
        wa_id: r.get(2)?,
        kind: r.get(3)?,
        body: r.get(4)?,
        status: r.get(5)?,
        error: r.get(6)?,
        conversation_id: r.get(7)?,
        delivery_id: r.get(8)?,
        batch_id: r.get(9)?,
        delivery_status: None,
        created_at: r.get(10)?,
        updated_at: r.get(11)?,
    })
}

pub fn row(c: &Conn, id: &str) -> Result<Option<LogEntry>> {
    Ok(c.query_row(&format!("SELECT {LOG_COLS} FROM whatsapp_messages WHERE id = ?1"), params![id], log_row)
        .optional()?)
}

/// The workspace's log, newest first, before `(created_at, id)` when given.
pub fn log(
    c: &Conn,
    ws: &str,
    direction: Option<&str>,
    before: Option<(&str, &str)>,
    limit: usize,
) -> Result<Vec<LogEntry>> {
    let after_cursor = if before.is_some() { "AND (created_at < ?3 OR (created_at = ?3 AND id < ?4))" } else { "" };
    let mut st = c.prepare(&format!(
        "SELECT {LOG_COLS} FROM whatsapp_messages WHERE workspace_id = ?1 AND (?2 IS NULL OR direction = ?2) {after_cursor}
         ORDER BY created_at DESC, id DESC LIMIT ?5"
    ))?;
    let (at, id) = before.unwrap_or(("", ""));
    let rows =
        st.query_map(params![ws, direction, at, id, limit as i64], log_row)?.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

pub fn counts(c: &Conn, ws: &str) -> Result<Counts> {
    Ok(c.query_row(
        "SELECT COALESCE(SUM(direction = 'in'), 0), COALESCE(SUM(direction = 'out'), 0),
                COALESCE(SUM(status IN ('failed', 'not_sent')), 0), COALESCE(SUM(direction = 'in' AND status = 'pending'), 0)
         FROM whatsapp_messages WHERE workspace_id = ?1",
        params![ws],
        |r| Ok(Counts { inbound: r.get(0)?, outbound: r.get(1)?, failed: r.get(2)?, pending: r.get(3)? }),
    )?)
}

const BATCH_COLS: &str = "id, workspace_id, wa_id, conversation_id, turn_id, job_id, status";

fn batch_row(r: &Row) -> rusqlite::Result<Batch> {
    Ok(Batch {
        id: r.get(0)?,
        workspace_id: r.get(1)?,
        wa_id: r.get(2)?,
        conversation_id: r.get(3)?,
        turn_id: r.get(4)?,
        job_id: r.get(5)?,
        status: r.get(6)?,
    })
}

pub fn batch(c: &Conn, id: &str) -> Result<Option<Batch>> {
    Ok(c.query_row(&format!("SELECT {BATCH_COLS} FROM whatsapp_batches WHERE id = ?1"), params![id], batch_row)
        .optional()?)
}

/// The sender's batch being answered, if any.
pub fn running_batch(c: &Conn, ws: &str, wa_id: &str) -> Result<Option<Batch>> {
    Ok(c.query_row(
        &format!(
            "SELECT {BATCH_COLS} FROM whatsapp_batches WHERE workspace_id = ?1 AND wa_id = ?2 AND status = 'running'"
        ),
        params![ws, wa_id],
        batch_row,
    )
    .optional()?)
}

pub fn insert_batch(tx: &Tx, b: &Batch, now: &str) -> Result<()> {
    tx.execute(
        &format!("INSERT INTO whatsapp_batches ({BATCH_COLS}, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)"),
        params![b.id, b.workspace_id, b.wa_id, b.conversation_id, b.turn_id, b.job_id, b.status, now],
    )?;
    Ok(())
}

pub fn set_batch_turn(tx: &Tx, id: &str, turn_id: &str, now: &str) -> Result<()> {
    tx.execute("UPDATE whatsapp_batches SET turn_id = ?2, updated_at = ?3 WHERE id = ?1", params![id, turn_id, now])?;
    Ok(())
}

/// Ends a batch and marks its messages (`answered`, or `failed` with the reason).
pub fn end_batch(tx: &Tx, id: &str, status: &str, error: Option<&str>, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE whatsapp_batches SET status = ?2, error = ?3, updated_at = ?4 WHERE id = ?1",
        params![id, status, error, now],
    )?;
    tx.execute(
        "UPDATE whatsapp_messages SET status = ?2, error = ?3, updated_at = ?4 WHERE batch_id = ?1 AND direction = 'in'",
        params![id, status, error, now],
    )?;
    Ok(())
}

/// Puts the sender's pending text messages received up to `until` into the batch (and its
/// conversation); returns their texts, oldest first.
pub fn claim(
    tx: &Tx,
    ws: &str,
    wa_id: &str,
    batch: &str,
    conversation: Option<&str>,
    until: &str,
) -> Result<Vec<String>> {
    tx.execute(
        "UPDATE whatsapp_messages SET batch_id = ?3, conversation_id = ?5 WHERE workspace_id = ?1 AND wa_id = ?2
           AND direction = 'in' AND status = 'pending' AND batch_id IS NULL AND created_at <= ?4",
        params![ws, wa_id, batch, until, conversation],
    )?;
    texts(tx, batch)
}

/// The texts of a batch, oldest first.
pub fn texts(c: &Conn, batch: &str) -> Result<Vec<String>> {
    let mut st = c.prepare(
        "SELECT COALESCE(body, '') FROM whatsapp_messages WHERE batch_id = ?1 AND direction = 'in' ORDER BY created_at, id",
    )?;
    let rows = st.query_map(params![batch], |r| r.get(0))?.collect::<rusqlite::Result<Vec<String>>>()?;
    Ok(rows)
}

/// Deletes log rows and ended batches older than `cutoff` (pending messages stay until answered).
pub fn cleanup(tx: &Tx, cutoff: &str) -> Result<usize> {
    let n = tx.execute(
        "DELETE FROM whatsapp_messages WHERE created_at < ?1 AND NOT (direction = 'in' AND status = 'pending')",
        params![cutoff],
    )?;
    tx.execute("DELETE FROM whatsapp_batches WHERE updated_at < ?1 AND status != 'running'", params![cutoff])?;
    Ok(n)
}

/// The sender's oldest text still waiting for a batch.
pub fn oldest_pending(c: &Conn, ws: &str, wa_id: &str) -> Result<Option<String>> {
    Ok(c.query_row(
        "SELECT id FROM whatsapp_messages WHERE workspace_id = ?1 AND wa_id = ?2 AND direction = 'in'
           AND status = 'pending' AND batch_id IS NULL ORDER BY created_at, id LIMIT 1",
        params![ws, wa_id],
        |r| r.get(0),
    )
    .optional()?)
}
