//! A converse ask: a message or a routine tool call, checked and turned into a turn on the
//! target's conversation. A tool call is checked against the agent release the conversation is
//! pinned to (a new conversation: the session's) before anything is recorded.

use serde_json::{Map, Value};

use super::session::{self, Caller, Target};
use super::tools;
use crate::app::App;
use crate::error::Result;
use crate::ids::WorkspaceId;
use crate::routines::runtime::exposed;
use crate::turn::context::ContextScope;
use crate::turn::routine::Invocation;
use crate::turn::{self, MAX_MESSAGE_CHARS, Surface, TurnInput};

/// What a calling agent asks.
#[derive(Debug, Clone)]
pub enum Ask {
    Message(String),
    Routine { tool_name: String, input: Value },
}

/// The conversation's record of a tool call: `tool(key: value, …)`, within the message limit.
fn call_text(tool_name: &str, input: &Map<String, Value>) -> String {
    let args: Vec<String> = input
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}: {s}"),
            other => format!("{k}: {other}"),
        })
        .collect();
    let text = format!("{tool_name}({})", args.join(", "));
    if text.chars().count() <= MAX_MESSAGE_CHARS {
        return text;
    }
    let mut cut: String = text.chars().take(MAX_MESSAGE_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// Checks `ask` and prepares its turn on `target`'s conversation (started when there is none).
pub fn prepare(app: &App, caller: &Caller, target: &Target, ask: Ask, request_id: Option<String>) -> Result<TurnInput> {
    let existing = session::existing(app, caller, target)?;
    let cfg = match &existing {
        Some((_, cfg)) => cfg.clone(),
        None => session::release(app, caller, target)?,
    };
    let (message, invocation) = match ask {
        Ask::Message(m) => (turn::check_message(&m)?, None),
        Ask::Routine { tool_name, input } => {
            let tool_name = tool_name.trim().to_string();
            let snap = exposed(&cfg, &tool_name).ok_or_else(tools::unknown_tool)?;
            let vars = tools::validate(&snap.definition, &input).map_err(|e| tools::invalid(&e))?;
            (call_text(&tool_name, &vars), Some(Invocation { tool_name, input: vars }))
        }
    };
    let conversation_id = match existing {
        Some((cid, _)) => cid,
        None => session::conversation(app, caller, target, &cfg)?,
    };
    let session_id = match target {
        Target::Session(s) => Some(s.id.clone()),
        Target::Sessionless(_) => None,
    };
    Ok(TurnInput {
        workspace: WorkspaceId(caller.workspace_id.clone()),
        conversation_id,
        agent: cfg,
        message,
        filter: None,
        request_id,
        surface: Surface::Chat,
        turn_id: crate::ids::new_id(),
        include_debug: false,
        actor: crate::audit::Actor::system(),
        context_scope: ContextScope { session_id, customer_id: None },
        test_values: Vec::new(),
        invocation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_call_reads_as_the_tool_and_its_arguments() {
        let mut m = Map::new();
        m.insert("order_ref".into(), Value::String("A-1".into()));
        m.insert("amount".into(), serde_json::json!(12.5));
        assert_eq!(call_text("refund", &m), "refund(amount: 12.5, order_ref: A-1)");
    }

    proptest! {
        #[test]
        fn the_record_stays_within_the_message_limit(vals in proptest::collection::vec(".{0,3000}", 0..12)) {
            let mut m = Map::new();
            for (i, v) in vals.into_iter().enumerate() {
                m.insert(format!("k{i}"), Value::String(v));
            }
            let t = call_text("tool", &m);
            prop_assert!(t.chars().count() <= MAX_MESSAGE_CHARS);
            prop_assert!(t.starts_with("tool("));
        }
    }
}
