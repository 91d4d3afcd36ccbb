//! SQL for conversations and messages (private to `conversations`).

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ValueRef};
use rusqlite::{OptionalExtension, params};
use serde_json::Value;

use super::feedback::Rating;
use super::{
    Channel, Conversation, ConversationState, Message, NewConversation, NewMessage, Ownership, OwnershipState, Role,
    Source, Visibility,
};
use crate::error::Result;
use crate::storage::{Conn, Later, Row, Tx};

/// Reads a stored name into its enum (an unknown name is a conversion error, never a guess).
macro_rules! from_sql_names {
    ($($t:ident),+) => {
        $(impl FromSql for $t {
            fn column_result(v: ValueRef<'_>) -> FromSqlResult<Self> {
                let s = v.as_str()?;
                $t::parse(s).ok_or_else(|| FromSqlError::Other(format!("unknown {} `{s}`", stringify!($t)).into()))
            }
        })+
    };
}
from_sql_names!(OwnershipState, Visibility, Channel, Role, Source, Rating);

const CONV_COLS: &str = "id, workspace_id, agent_id, revision_id, channel, visibility, test_execution_id, ownership_state, \
    ownership_version, ownership_reason, owner_user_id, taken_over_at, operator_replied, state, started_by, message_count, \
    last_message_at, created_at, updated_at, \
    (SELECT coalesce(nullif(trim(u.name), ''), u.email) FROM users u WHERE u.id = owner_user_id), public_session_id";

fn conv_row(r: &Row) -> rusqlite::Result<Conversation> {
    Ok(Conversation {
        id: r.get(0)?,
        workspace_id: r.get(1)?,
        agent_id: r.get(2)?,
        revision_id: r.get(3)?,
        channel: r.get(4)?,
        visibility: r.get(5)?,
        test_execution_id: r.get(6)?,
        ownership: Ownership {
            state: r.get(7)?,
            version: r.get(8)?,
            reason: r.get(9)?,
            owner_user_id: r.get(10)?,
            taken_over_at: r.get(11)?,
            owner_display_name: r.get(19)?,
        },
        operator_replied: r.get::<_, i64>(12)? == 1,
        state: serde_json::from_str(&r.get::<_, String>(13)?).unwrap_or(Value::Object(Default::default())),
        started_by: r.get(14)?,
        public_session_id: r.get(20)?,
        message_count: r.get(15)?,
        last_message_at: r.get(16)?,
        created_at: r.get(17)?,
        updated_at: r.get(18)?,
    })
}

pub fn insert(tx: &Tx, id: &str, c: &NewConversation, now: &str) -> Result<()> {
    tx.execute_deferred(
        "INSERT INTO conversations (id, workspace_id, agent_id, revision_id, channel, visibility, test_execution_id, state, started_by, public_session_id, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, '{}', ?8, ?10, ?9, ?9)",
        params![id, c.workspace_id, c.agent_id, c.revision_id, c.channel.as_str(), c.visibility.as_str(), c.test_execution_id, c.started_by, now, c.public_session_id],
    )?;
    Ok(())
}

pub fn find(c: &Conn, ws: &str, id: &str) -> Result<Option<Conversation>> {
    Ok(c.query_row(
        &format!("SELECT {CONV_COLS} FROM conversations WHERE id = ?1 AND workspace_id = ?2"),
        params![id, ws],
        conv_row,
    )
    .optional()?)
}

pub fn of_public_session(c: &Conn, ws: &str, session: &str, limit: usize) -> Result<Vec<Conversation>> {
    let mut st = c.prepare(&format!(
        "SELECT {CONV_COLS} FROM conversations WHERE workspace_id = ?1 AND public_session_id = ?2 AND visibility = 'visitor'
         ORDER BY updated_at DESC, id DESC LIMIT ?3"
    ))?;
    let rows = st.query_map(params![ws, session, limit as i64], conv_row)?.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

/// A page of visitor conversations, most recently active first. The cursor is
/// `(updated_at, id)` of the last row of the previous page.
pub fn list(
    c: &Conn,
    ws: &str,
    agent: Option<&str>,
    ownership: Option<OwnershipState>,
    after: Option<(&str, &str)>,
    limit: usize,
) -> Result<(Vec<Conversation>, i64)> {
    let filter = "workspace_id = ?1 AND visibility = 'visitor' AND (?2 IS NULL OR agent_id = ?2) AND (?3 IS NULL OR ownership_state = ?3)";
    let total: i64 = c.query_row(
        &format!("SELECT count(*) FROM conversations WHERE {filter}"),
        params![ws, agent, ownership.map(OwnershipState::as_str)],
        |r| r.get(0),
    )?;
    let (au, ai) = after.unzip();
    let mut st = c.prepare(&format!(
        "SELECT {CONV_COLS} FROM conversations WHERE {filter} AND (?4 IS NULL OR updated_at < ?4 OR (updated_at = ?4 AND id < ?5))
         ORDER BY updated_at DESC, id DESC LIMIT ?6"
    ))?;
    let rows = st
        .query_map(params![ws, agent, ownership.map(OwnershipState::as_str), au, ai, limit as i64], conv_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok((rows, total))
}

pub fn set_state(tx: &Tx, id: &str, state: &ConversationState, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE conversations SET state = ?2, updated_at = ?3 WHERE id = ?1",
        params![id, state.to_string(), now],
    )?;
    Ok(())
}

/// Replaces the state only if it is still `expected`; false when another writer changed it first.
pub fn set_state_if(
    tx: &Tx,
    id: &str,
    expected: &ConversationState,
    state: &ConversationState,
    now: &str,
) -> Result<bool> {
    Ok(tx.execute(
        "UPDATE conversations SET state = ?2, updated_at = ?3 WHERE id = ?1 AND state = ?4",
        params![id, state.to_string(), now, expected.to_string()],
    )? == 1)
}

/// Writes a whole ownership change (state, owner, reason, whether an operator replied), bumping
/// the version only when `bump`; returns the version after it.
pub fn write_ownership(tx: &Tx, id: &str, ch: &super::OwnershipChange, bump: bool, now: &str) -> Result<i64> {
    Ok(tx.query_row(
        "UPDATE conversations SET ownership_state = ?2, owner_user_id = ?3, ownership_reason = ?4,
            operator_replied = ?5, ownership_version = ownership_version + ?6,
            taken_over_at = CASE WHEN ?2 = 'ai_owned' THEN NULL WHEN ownership_state = 'human_owned' THEN taken_over_at ELSE ?7 END,
            updated_at = ?7
         WHERE id = ?1 RETURNING ownership_version",
        params![id, ch.state.as_str(), ch.owner_user_id, ch.reason, ch.operator_replied as i64, bump as i64, now],
        |r| r.get(0),
    )?)
}

/// Moves the conversation to `state`, bumping the version; returns the new version.
pub fn set_ownership(tx: &Tx, id: &str, state: OwnershipState, reason: Option<&str>, now: &str) -> Result<i64> {
    Ok(tx.query_row(
        "UPDATE conversations SET ownership_state = ?2, ownership_reason = ?3, ownership_version = ownership_version + 1,
            owner_user_id = NULL,
            taken_over_at = CASE WHEN ?2 = 'human_owned' THEN ?4 ELSE NULL END,
            operator_replied = CASE WHEN ?2 = 'human_owned' THEN operator_replied ELSE 0 END, updated_at = ?4
         WHERE id = ?1 RETURNING ownership_version",
        params![id, state.as_str(), reason, now],
        |r| r.get(0),
    )?)
}

const MSG_COLS: &str =
    "id, conversation_id, seq, role, source, content, citations, metadata, trace_id, request_id, created_at";

fn msg_row(r: &Row) -> rusqlite::Result<Message> {
    Ok(Message {
        id: r.get(0)?,
        conversation_id: r.get(1)?,
        seq: r.get(2)?,
        role: r.get(3)?,
        source: r.get(4)?,
        content: r.get(5)?,
        citations: serde_json::from_str(&r.get::<_, String>(6)?).unwrap_or(Value::Array(vec![])),
        metadata: serde_json::from_str(&r.get::<_, String>(7)?).unwrap_or(Value::Object(Default::default())),
        trace_id: r.get(8)?,
        request_id: r.get(9)?,
        created_at: r.get(10)?,
    })
}

/// Appends a message at the end of the conversation (of the workspace `ws`; none when it is not
/// there); returns it with the conversation as the message leaves it, in the statement that
/// moves its counter.
pub fn append(tx: &Tx, ws: &str, m: &NewMessage, now: &str) -> Result<Option<(Message, Conversation)>> {
    let conv = tx
        .query_row(
            &format!(
                "UPDATE conversations SET message_count = message_count + 1, last_message_at = ?2, updated_at = ?2
                 WHERE id = ?1 AND workspace_id = ?3 RETURNING {CONV_COLS}"
            ),
            params![m.conversation_id, now, ws],
            conv_row,
        )
        .optional()?;
    let Some(conv) = conv else { return Ok(None) };
    let seq = conv.message_count;
    let id = crate::ids::new_id();
    tx.execute_deferred(
        &format!(
            "INSERT INTO messages ({MSG_COLS}, workspace_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
        ),
        params![
            id,
            m.conversation_id,
            seq,
            m.role.as_str(),
            m.source.as_str(),
            m.content,
            m.citations.to_string(),
            m.metadata.to_string(),
            m.trace_id,
            m.request_id,
            now,
            ws
        ],
    )?;
    let message = Message {
        id,
        conversation_id: m.conversation_id.to_string(),
        seq,
        role: m.role,
        source: m.source,
        content: m.content.to_string(),
        citations: m.citations.clone(),
        metadata: m.metadata.clone(),
        trace_id: m.trace_id.map(str::to_string),
        request_id: m.request_id.map(str::to_string),
        created_at: now.to_string(),
    };
    Ok(Some((message, conv)))
}

/// Merges `patch` into the metadata of the user message a turn saved (found by its `turnId`).
pub fn patch_turn_message(tx: &Tx, conversation: &str, turn_id: &str, patch: &super::MessageMetadata) -> Result<()> {
    tx.execute(
        "UPDATE messages SET metadata = json_patch(metadata, ?3)
         WHERE conversation_id = ?1 AND role = 'user' AND json_extract(metadata, '$.turnId') = ?2",
        params![conversation, turn_id, patch.to_string()],
    )?;
    Ok(())
}

/// Messages after position `after_seq`, oldest first, at most `limit`.
pub fn messages_after(c: &Conn, conversation: &str, after_seq: i64, limit: usize) -> Result<Vec<Message>> {
    let mut st = c.prepare(&format!(
        "SELECT {MSG_COLS} FROM messages WHERE conversation_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3"
    ))?;
    Ok(st.query_map(params![conversation, after_seq, limit as i64], msg_row)?.collect::<rusqlite::Result<_>>()?)
}

pub fn message_position(c: &Conn, ws: &str, message_id: &str) -> Result<Option<(String, i64)>> {
    Ok(c.query_row(
        "SELECT conversation_id, seq FROM messages WHERE id = ?1 AND workspace_id = ?2",
        params![message_id, ws],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()?)
}

/// The last `limit` messages, oldest first.
const LAST_MESSAGES: &str = "FROM messages WHERE conversation_id = ?1 ORDER BY seq DESC LIMIT ?2";

pub fn last_messages(c: &Conn, conversation: &str, limit: usize) -> Result<Vec<Message>> {
    let mut st = c.prepare(&format!("SELECT {MSG_COLS} {LAST_MESSAGES}"))?;
    let mut v: Vec<Message> =
        st.query_map(params![conversation, limit as i64], msg_row)?.collect::<rusqlite::Result<_>>()?;
    v.reverse();
    Ok(v)
}

/// [`last_messages`], read with the transaction's next request ([`Tx::query_later`]).
pub fn last_messages_later(tx: &Tx, conversation: &str, limit: usize) -> Result<Later<Vec<Message>>> {
    let later =
        tx.query_later(&format!("SELECT {MSG_COLS} {LAST_MESSAGES}"), params![conversation, limit as i64], msg_row)?;
    Ok(later.map(|mut v| {
        v.reverse();
        v
    }))
}

/// Assistant-role messages (the agent's and operators' replies) after `after_seq` (none: the
/// last `limit`), oldest first, at most `limit`.
pub fn replies(c: &Conn, conversation: &str, after_seq: Option<i64>, limit: usize) -> Result<Vec<Message>> {
    let mut v: Vec<Message> = match after_seq {
        Some(after) => {
            let mut st = c.prepare(&format!(
                "SELECT {MSG_COLS} FROM messages WHERE conversation_id = ?1 AND role = 'assistant' AND seq > ?2
                 ORDER BY seq LIMIT ?3"
            ))?;
            st.query_map(params![conversation, after, limit as i64], msg_row)?.collect::<rusqlite::Result<_>>()?
        }
        None => {
            let mut st = c.prepare(&format!(
                "SELECT {MSG_COLS} FROM messages WHERE conversation_id = ?1 AND role = 'assistant'
                 ORDER BY seq DESC LIMIT ?2"
            ))?;
            let mut v: Vec<Message> =
                st.query_map(params![conversation, limit as i64], msg_row)?.collect::<rusqlite::Result<_>>()?;
            v.reverse();
            v
        }
    };
    v.truncate(limit);
    Ok(v)
}

/// One answer's feedback.
pub fn upsert_feedback(tx: &Tx, f: &super::feedback::Feedback) -> Result<()> {
    tx.execute(
        "INSERT INTO message_feedback (message_id, workspace_id, conversation_id, rating, comment, user_id, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)
         ON CONFLICT (message_id) DO UPDATE SET rating = ?4, comment = ?5, user_id = ?6, updated_at = ?7,
            resolved_at = NULL, resolved_by = NULL",
        params![f.message_id, f.workspace_id, f.conversation_id, f.rating.as_str(), f.comment, f.user_id, f.updated_at],
    )?;
    Ok(())
}

pub fn delete_feedback(tx: &Tx, ws: &str, conversation_id: &str, message_id: &str) -> Result<bool> {
    Ok(tx.execute(
        "DELETE FROM message_feedback WHERE workspace_id = ?1 AND conversation_id = ?2 AND message_id = ?3",
        params![ws, conversation_id, message_id],
    )? > 0)
}

pub fn resolve_feedback(tx: &Tx, ws: &str, message_id: &str, by: &str, now: &str) -> Result<bool> {
    Ok(tx.execute(
        "UPDATE message_feedback SET resolved_at = ?4, resolved_by = ?3
         WHERE workspace_id = ?1 AND message_id = ?2 AND resolved_at IS NULL",
        params![ws, message_id, by, now],
    )? > 0)
}

const FEEDBACK_COLS: &str = "f.message_id, f.workspace_id, f.conversation_id, f.rating, f.comment, f.user_id, f.created_at, f.updated_at, f.resolved_at";

fn feedback_row(r: &Row) -> rusqlite::Result<super::feedback::Feedback> {
    Ok(super::feedback::Feedback {
        message_id: r.get(0)?,
        workspace_id: r.get(1)?,
        conversation_id: r.get(2)?,
        rating: r.get(3)?,
        comment: r.get(4)?,
        user_id: r.get(5)?,
        created_at: r.get(6)?,
        updated_at: r.get(7)?,
        resolved_at: r.get(8)?,
    })
}

pub fn feedback_of(c: &Conn, ws: &str, message_id: &str) -> Result<Option<super::feedback::Feedback>> {
    Ok(c.query_row(
        &format!("SELECT {FEEDBACK_COLS} FROM message_feedback f WHERE f.workspace_id = ?1 AND f.message_id = ?2"),
        params![ws, message_id],
        feedback_row,
    )
    .optional()?)
}

/// Open negative feedback (thumbs down, not resolved), most recently written first, with the
/// answer it is about.
pub fn open_negative_feedback(c: &Conn, ws: &str, limit: usize) -> Result<Vec<(super::feedback::Feedback, Message)>> {
    let mut st = c.prepare(&format!(
        "SELECT {FEEDBACK_COLS}, {} FROM message_feedback f JOIN messages m ON m.id = f.message_id
         WHERE f.workspace_id = ?1 AND f.rating = 'down' AND f.resolved_at IS NULL
         ORDER BY f.updated_at DESC, f.message_id DESC LIMIT ?2",
        MSG_COLS.split(", ").map(|c| format!("m.{c}")).collect::<Vec<_>>().join(", ")
    ))?;
    let rows = st.query_map(params![ws, limit as i64], |r| {
        let f = feedback_row(r)?;
        let m = Message {
            id: r.get(9)?,
            conversation_id: r.get(10)?,
            seq: r.get(11)?,
            role: r.get(12)?,
            source: r.get(13)?,
            content: r.get(14)?,
            citations: serde_json::from_str(&r.get::<_, String>(15)?).unwrap_or(Value::Array(vec![])),
            metadata: serde_json::from_str(&r.get::<_, String>(16)?).unwrap_or(Value::Object(Default::default())),
            trace_id: r.get(17)?,
            request_id: r.get(18)?,
            created_at: r.get(19)?,
        };
        Ok((f, m))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Human-owned visitor conversations, most recently active first.
pub fn open_handoffs(c: &Conn, ws: &str, limit: usize) -> Result<Vec<Conversation>> {
    let mut st = c.prepare(&format!(
        "SELECT {CONV_COLS} FROM conversations WHERE workspace_id = ?1 AND visibility = 'visitor' AND ownership_state = 'human_owned'
         ORDER BY updated_at DESC, id DESC LIMIT ?2"
    ))?;
    let rows = st.query_map(params![ws, limit as i64], conv_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The message with this id in the workspace.
pub fn message(c: &Conn, ws: &str, id: &str) -> Result<Option<Message>> {
    Ok(c.query_row(
        &format!("SELECT {MSG_COLS} FROM messages WHERE workspace_id = ?1 AND id = ?2"),
        params![ws, id],
        msg_row,
    )
    .optional()?)
}

/// Whether the turn `turn_id` saved its user message, and its reply (the assistant message it
/// wrote, if any).
pub fn turn_messages(c: &Conn, conversation: &str, turn_id: &str) -> Result<(bool, Option<Message>)> {
    let user = c
        .query_row(
            "SELECT 1 FROM messages WHERE conversation_id = ?1 AND role = 'user' AND json_extract(metadata, '$.turnId') = ?2",
            params![conversation, turn_id],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    let reply = c
        .query_row(
            &format!(
                "SELECT {MSG_COLS} FROM messages WHERE conversation_id = ?1 AND role = 'assistant' AND trace_id = ?2"
            ),
            params![conversation, turn_id],
            msg_row,
        )
        .optional()?;
    Ok((user, reply))
}
