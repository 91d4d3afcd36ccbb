//! The routine pass: the stage where the agent's routines may take a turn before the agent
//! answers it. The engine is `crate::routines::runtime::Engine` (`App::routine_pass`); tests may
//! plug in another [`RoutinePass`].

use serde_json::Value;

use crate::app::App;
use crate::conversations::{Conversation, ConversationState};
use crate::error::Result;

use super::TurnInput;

/// A routine tool call (the converse surface): the routine exposed as `tool_name` starts with
/// `input` (validated against its slots) as its variables, without reading the message.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    pub tool_name: String,
    /// Slot key → value, already checked and trimmed.
    pub input: serde_json::Map<String, Value>,
}

/// How a routine tool call went: `started`, `reentered`, `declined`, `not_started` or
/// `unknown_tool`.
#[derive(Debug, Clone, PartialEq)]
pub struct InvocationReport {
    pub tool_name: String,
    pub outcome: &'static str,
}

/// What the routine pass sees of a turn.
pub struct RoutineTurn<'a> {
    pub input: &'a TurnInput,
    pub conversation: &'a Conversation,
}

/// The envelope's `routine`: where the routine the turn touched stands.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutineReport {
    pub name: String,
    /// `active`, `waiting_for_input`, `waiting_for_approval`, `completed` or `abandoned`.
    pub status: &'static str,
    pub pending_input: Vec<PendingInput>,
    /// The tool the routine called this turn, if any.
    pub tool_name: Option<String>,
}

/// A slot the routine still needs.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingInput {
    pub key: String,
    pub slot_type: &'static str,
    pub required: bool,
    pub description: Option<String>,
}

/// What a routine turn leaves behind, applied in the turn's own transaction.
pub trait Effects: Send + Sync + std::fmt::Debug {
    /// Writes the effects (ownership change, notices, exports, actions, decisions); returns
    /// whether the conversation is now human-owned.
    fn apply(&self, app: &App, tx: &crate::storage::Tx, input: &TurnInput, now: &str) -> Result<bool>;
}

/// A routine's answer to the turn.
#[derive(Debug)]
pub struct RoutineAnswer {
    pub text: String,
    pub report: RoutineReport,
    /// The conversation's state after the turn.
    pub state: ConversationState,
    pub effects: Box<dyn Effects>,
    /// What the routine did (for the trace).
    pub trace: Value,
    /// On a routine tool call: `started`, `reentered` or `not_started`.
    pub invocation: Option<&'static str>,
}

/// What the routine pass decided.
#[derive(Debug)]
pub enum RoutineDecision {
    /// No routine takes this turn; the agent answers it (`reason` goes in the trace).
    NotEngaged { reason: &'static str },
    /// A routine answers the turn.
    Answered(Box<RoutineAnswer>),
    /// The visitor asked something else mid-routine: the agent answers normally, then the
    /// routine asks again (`lead_back`).
    Digression { lead_back: String, report: RoutineReport, trace: Value },
    /// A routine tool call for a routine already completed here under `once_per_conversation`:
    /// the agent answers normally and the reply reports the routine completed.
    Declined { report: RoutineReport, trace: Value },
    /// The running routine was abandoned (left idle too long): the agent answers normally, the
    /// reply reports the routine `abandoned`, and the conversation's state becomes `state`.
    Abandoned { report: RoutineReport, state: ConversationState, trace: Value },
}

/// A routine engine, run once per turn after the ownership gate.
pub trait RoutinePass: Send + Sync {
    fn run(&self, app: &App, turn: &RoutineTurn) -> Result<RoutineDecision>;
}

/// No routines: every turn goes to the agent.
pub struct NoRoutines;

impl RoutinePass for NoRoutines {
    fn run(&self, _: &App, _: &RoutineTurn) -> Result<RoutineDecision> {
        Ok(RoutineDecision::NotEngaged { reason: "no_routines" })
    }
}
