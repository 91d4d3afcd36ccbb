//! SQL for usage limits: profiles, account assignments and credits, reservations, notices and the
//! organization creation cap (private to `usage::limits`).

use rusqlite::{OptionalExtension, params};

use super::Profile;
use crate::error::Result;
use crate::storage::{Conn, Later, Row, Tx};

const PROFILE_COLS: &str = "key, display_name, monthly_answer_limit, stored_document_limit, stored_indexed_byte_limit,
    monthly_indexed_byte_limit, monthly_conversation_limit, replies_per_conversation, created_at, updated_at";

fn profile_row(r: &Row) -> rusqlite::Result<Profile> {
    profile_row_at(r, 0)
}

/// A profile from its [`PROFILE_COLS`] at `at` on.
fn profile_row_at(r: &Row, at: usize) -> rusqlite::Result<Profile> {
    Ok(Profile {
        key: r.get(at)?,
        display_name: r.get(at + 1)?,
        monthly_answer_limit: r.get(at + 2)?,
        stored_document_limit: r.get(at + 3)?,
        stored_indexed_byte_limit: r.get(at + 4)?,
        monthly_indexed_byte_limit: r.get(at + 5)?,
        monthly_conversation_limit: r.get(at + 6)?,
        replies_per_conversation: r.get(at + 7)?,
        created_at: r.get(at + 8)?,
        updated_at: r.get(at + 9)?,
    })
}

/// Inserts the profile unless one with its key exists; returns whether it was new.
pub(super) fn insert_profile_if_missing(tx: &Tx, p: &Profile) -> Result<bool> {
    Ok(tx.execute(
        "INSERT INTO usage_profiles (key, display_name, monthly_answer_limit, stored_document_limit, stored_indexed_byte_limit,
            monthly_indexed_byte_limit, monthly_conversation_limit, replies_per_conversation, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9) ON CONFLICT (key) DO NOTHING",
        params![
            p.key,
            p.display_name,
            p.monthly_answer_limit,
            p.stored_document_limit,
            p.stored_indexed_byte_limit,
            p.monthly_indexed_byte_limit,
            p.monthly_conversation_limit,
            p.replies_per_conversation,
            p.created_at
        ],
    )? == 1)
}

/// Creates or replaces the profile `p.key` (keeping its creation time).
pub(super) fn upsert_profile(tx: &Tx, p: &Profile) -> Result<()> {
    tx.execute(
        "INSERT INTO usage_profiles (key, display_name, monthly_answer_limit, stored_document_limit, stored_indexed_byte_limit,
            monthly_indexed_byte_limit, monthly_conversation_limit, replies_per_conversation, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT (key) DO UPDATE SET display_name = excluded.display_name,
            monthly_answer_limit = excluded.monthly_answer_limit, stored_document_limit = excluded.stored_document_limit,
            stored_indexed_byte_limit = excluded.stored_indexed_byte_limit,
            monthly_indexed_byte_limit = excluded.monthly_indexed_byte_limit,
            monthly_conversation_limit = excluded.monthly_conversation_limit,
            replies_per_conversation = excluded.replies_per_conversation, updated_at = excluded.updated_at",
        params![
            p.key,
            p.display_name,
            p.monthly_answer_limit,
            p.stored_document_limit,
            p.stored_indexed_byte_limit,
            p.monthly_indexed_byte_limit,
            p.monthly_conversation_limit,
            p.replies_per_conversation,
            p.created_at,
            p.updated_at
        ],
    )?;
    Ok(())
}

pub(super) fn profile(c: &Conn, key: &str) -> Result<Option<Profile>> {
    Ok(c.query_row(&format!("SELECT {PROFILE_COLS} FROM usage_profiles WHERE key = ?1"), [key], profile_row)
        .optional()?)
}

pub(super) fn profiles(c: &Conn) -> Result<Vec<Profile>> {
    let mut st = c.prepare(&format!("SELECT {PROFILE_COLS} FROM usage_profiles ORDER BY key"))?;
    let rows = st.query_map([], profile_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub(super) fn organization_exists(c: &Conn, org: &str) -> Result<bool> {
    Ok(c.query_row("SELECT 1 FROM organizations WHERE id = ?1", [org], |_| Ok(())).optional()?.is_some())
}

/// The account of a workspace and the agent replies in a conversation (`?2`, none: 0), with the
/// account's profile joined.
const WORKSPACE_ACCOUNT: &str = "SELECT w.organization_id, coalesce(a.credits, 0),
        (SELECT count(*) FROM messages m WHERE m.conversation_id = ?2 AND m.role = 'assistant' AND m.source = 'agent'),
        p.key, p.display_name, p.monthly_answer_limit, p.stored_document_limit, p.stored_indexed_byte_limit,
        p.monthly_indexed_byte_limit, p.monthly_conversation_limit, p.replies_per_conversation, p.created_at, p.updated_at
     FROM workspaces w LEFT JOIN usage_accounts a ON a.organization_id = w.organization_id
        LEFT JOIN usage_profiles p ON p.key = a.profile_key
     WHERE w.id = ?1";

fn account_row(r: &Row) -> rusqlite::Result<(super::Account, i64)> {
    let profile = match r.get::<_, Option<String>>(3)? {
        Some(_) => Some(profile_row_at(r, 3)?),
        None => None,
    };
    Ok((super::Account { organization_id: r.get(0)?, profile, credits: r.get(1)? }, r.get(2)?))
}

/// The account of a workspace in one statement: its organization, profile (if any) and credit
/// balance, and the agent replies already in `conversation` (0 without one); `None` when the
/// workspace does not exist.
pub(super) fn workspace_account(
    c: &Conn,
    ws: &str,
    conversation: Option<&str>,
) -> Result<Option<(super::Account, i64)>> {
    Ok(c.query_row(WORKSPACE_ACCOUNT, params![ws, conversation], account_row).optional()?)
}

/// [`workspace_account`] (without a conversation), read with the transaction's next statement.
pub(super) fn workspace_account_later(tx: &Tx, ws: &str) -> Result<Later<Option<super::Account>>> {
    let later = tx.query_later(WORKSPACE_ACCOUNT, params![ws, None::<&str>], account_row)?;
    Ok(later.map(|rows| rows.into_iter().next().map(|(account, _)| account)))
}

/// The account's profile (if any) and credit balance.
pub(super) fn account(c: &Conn, org: &str) -> Result<(Option<Profile>, i64)> {
    let row: Option<(Option<String>, i64)> = c
        .query_row("SELECT profile_key, credits FROM usage_accounts WHERE organization_id = ?1", [org], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?;
    let Some((key, credits)) = row else { return Ok((None, 0)) };
    Ok((key.map(|k| profile(c, &k)).transpose()?.flatten(), credits))
}

pub(super) fn set_account_profile(tx: &Tx, org: &str, key: Option<&str>, now: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO usage_accounts (organization_id, profile_key, credits, updated_at) VALUES (?1, ?2, 0, ?3)
         ON CONFLICT (organization_id) DO UPDATE SET profile_key = excluded.profile_key, updated_at = excluded.updated_at",
        params![org, key, now],
    )?;
    Ok(())
}

/// Records the grant once per reference and adds it to the balance; returns whether it was new.
pub(super) fn grant_credits(tx: &Tx, org: &str, reference: &str, conversations: i64, now: &str) -> Result<bool> {
    let new = tx.execute(
        "INSERT INTO usage_credit_grants (organization_id, reference, conversations, created_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (organization_id, reference) DO NOTHING",
        params![org, reference, conversations, now],
    )? == 1;
    if new {
        tx.execute(
            "INSERT INTO usage_accounts (organization_id, profile_key, credits, updated_at) VALUES (?1, NULL, ?2, ?3)
             ON CONFLICT (organization_id) DO UPDATE SET credits = usage_accounts.credits + excluded.credits, updated_at = excluded.updated_at",
            params![org, conversations, now],
        )?;
    }
    Ok(new)
}

/// Deletes every reservation row (an older version kept reservations in SQLite); returns how many.
pub(super) fn delete_all_reservations(tx: &Tx) -> Result<usize> {
    Ok(tx.execute("DELETE FROM usage_reservations", [])?)
}

/// The organization's documents and the bytes they will count once processed: live bytes plus the
/// growth of revisions still queued or processing (those are committed work whose bytes are not
/// yet on the meters), and the whole size of such revisions (their monthly indexing to come).
pub(super) fn document_totals(c: &Conn, org: &str) -> Result<(i64, i64, i64)> {
    Ok(c.query_row(
        "SELECT count(*),
            coalesce(sum(CASE WHEN d.status IN ('queued', 'processing')
                THEN max(CASE WHEN d.source_kind = 'inline_text' THEN d.content_size_bytes ELSE coalesce(d.source_size_bytes, 0) END - d.metered_bytes, 0)
                ELSE 0 END), 0),
            coalesce(sum(CASE WHEN d.status IN ('queued', 'processing')
                THEN CASE WHEN d.source_kind = 'inline_text' THEN d.content_size_bytes ELSE coalesce(d.source_size_bytes, 0) END
                ELSE 0 END), 0)
         FROM documents d JOIN workspaces w ON w.id = d.workspace_id WHERE w.organization_id = ?1",
        [org],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?)
}

/// Records a notice once per account, meter, period and threshold; returns whether it was new.
pub(super) fn insert_notice(tx: &Tx, org: &str, meter: &str, period: &str, threshold: i64, now: &str) -> Result<bool> {
    Ok(tx.execute(
        "INSERT INTO usage_notices (organization_id, meter, period, threshold, created_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT DO NOTHING",
        params![org, meter, period, threshold, now],
    )? == 1)
}

/// Adds one answer and its tokens to the agent's day.
pub(super) fn add_answer_day(tx: &Tx, org: &str, ws: &str, agent: &str, day: &str, tokens: (i64, i64)) -> Result<()> {
    tx.execute_deferred(
        "INSERT INTO usage_answer_daily (organization_id, workspace_id, agent_id, day, answers, input_tokens, output_tokens)
         VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6)
         ON CONFLICT (organization_id, day, workspace_id, agent_id) DO UPDATE SET answers = usage_answer_daily.answers + 1,
            input_tokens = usage_answer_daily.input_tokens + excluded.input_tokens,
            output_tokens = usage_answer_daily.output_tokens + excluded.output_tokens",
        params![org, ws, agent, day, tokens.0, tokens.1],
    )?;
    Ok(())
}

/// One agent's answers and tokens over a period (`YYYY-MM`).
pub(super) fn answers_by_agent(c: &Conn, org: &str, period: &str) -> Result<Vec<super::AgentAnswers>> {
    let mut st = c.prepare(
        "SELECT workspace_id, agent_id, sum(answers), sum(input_tokens), sum(output_tokens) FROM usage_answer_daily
         WHERE organization_id = ?1 AND substr(day, 1, 7) = ?2 GROUP BY workspace_id, agent_id ORDER BY sum(answers) DESC",
    )?;
    let rows = st.query_map(params![org, period], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The account's answers per day of a period.
pub(super) fn answers_by_day(c: &Conn, org: &str, period: &str) -> Result<Vec<(String, i64)>> {
    let mut st = c.prepare(
        "SELECT day, sum(answers) FROM usage_answer_daily WHERE organization_id = ?1 AND substr(day, 1, 7) = ?2
         GROUP BY day ORDER BY day",
    )?;
    let rows = st.query_map(params![org, period], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

// ---- the organization creation cap ----

pub(super) fn org_creations_since(c: &Conn, user: &str, since: &str) -> Result<i64> {
    Ok(c.query_row(
        "SELECT count(*) FROM org_creations WHERE user_id = ?1 AND created_at >= ?2",
        params![user, since],
        |r| r.get(0),
    )?)
}

pub(super) fn record_org_creation(tx: &Tx, user: &str, org: &str, now: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO org_creations (user_id, organization_id, created_at) VALUES (?1, ?2, ?3)",
        params![user, org, now],
    )?;
    Ok(())
}

/// The user's override: `None` none set, `Some(None)` unlimited, `Some(Some(n))` a cap.
pub(super) fn org_override(c: &Conn, user: &str) -> Result<Option<Option<i64>>> {
    Ok(c.query_row("SELECT monthly_limit FROM org_creation_overrides WHERE user_id = ?1", [user], |r| r.get(0))
        .optional()?)
}

pub(super) fn set_org_override(tx: &Tx, user: &str, limit: Option<i64>, now: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO org_creation_overrides (user_id, monthly_limit, updated_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (user_id) DO UPDATE SET monthly_limit = excluded.monthly_limit, updated_at = excluded.updated_at",
        params![user, limit, now],
    )?;
    Ok(())
}

pub(super) fn delete_org_override(tx: &Tx, user: &str) -> Result<bool> {
    Ok(tx.execute("DELETE FROM org_creation_overrides WHERE user_id = ?1", [user])? == 1)
}
