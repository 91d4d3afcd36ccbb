//! The SQL of public chat: bootstrap greetings waiting for the visitor's first message.

use rusqlite::{OptionalExtension, params};

use super::chat::{Greeting, GreetingChip};
use crate::error::Result;
use crate::storage::Tx;

/// Keeps a greeting until the first message that carries its id (or until it expires).
pub fn insert_greeting(tx: &Tx, ws: &str, agent: &str, session: &str, g: &Greeting, now: &str) -> Result<()> {
    let chips: Vec<serde_json::Value> =
        g.chips.iter().map(|c| serde_json::json!({"id": c.id, "text": c.text})).collect();
    tx.execute(
        "INSERT INTO public_greetings (id, workspace_id, agent_id, public_session_id, text, suggestions, kind, locale, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![g.id, ws, agent, session, g.text, serde_json::Value::from(chips).to_string(), g.kind.as_str(), g.locale, now],
    )?;
    Ok(())
}

/// Takes (reads and deletes) the session's greeting `id`, if it is still waiting.
pub fn take_greeting(tx: &Tx, ws: &str, session: &str, id: &str) -> Result<Option<Greeting>> {
    let g = tx
        .query_row(
            "SELECT id, text, suggestions, kind, locale FROM public_greetings
             WHERE id = ?1 AND workspace_id = ?2 AND public_session_id = ?3",
            params![id, ws, session],
            |r| {
                let chips: String = r.get(2)?;
                let kind: String = r.get(3)?;
                Ok(Greeting {
                    id: r.get(0)?,
                    text: r.get(1)?,
                    chips: serde_json::from_str::<Vec<serde_json::Value>>(&chips)
                        .unwrap_or_default()
                        .iter()
                        .map(|c| GreetingChip {
                            id: c["id"].as_str().unwrap_or_default().to_string(),
                            text: c["text"].as_str().unwrap_or_default().to_string(),
                        })
                        .collect(),
                    kind: super::chat::GreetingKind::parse(&kind).unwrap_or(super::chat::GreetingKind::Generated),
                    locale: r.get(4)?,
                })
            },
        )
        .optional()?;
    if g.is_some() {
        tx.execute("DELETE FROM public_greetings WHERE id = ?1", params![id])?;
    }
    Ok(g)
}

/// Forgets greetings nobody answered before `cutoff`.
pub fn prune_greetings(tx: &Tx, cutoff: &str) -> Result<usize> {
    Ok(tx.execute("DELETE FROM public_greetings WHERE created_at < ?1", params![cutoff])?)
}
