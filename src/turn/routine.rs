//! The routine pass: the stage where a workspace's routines may take a turn before the agent
//! answers it. Routines (multi-step flows with slots, approvals and handoffs) plug in here by
//! implementing [`RoutinePass`]; until they exist, [`NoRoutines`] lets every turn through.

use crate::app::App;
use crate::conversations::Conversation;
use crate::error::Result;

use super::TurnInput;

/// What the routine pass sees of a turn.
pub struct RoutineTurn<'a> {
    pub input: &'a TurnInput,
    pub conversation: &'a Conversation,
}

/// What the routine pass decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoutineDecision {
    /// No routine takes this turn; the agent answers it (`reason` goes in the trace).
    NotEngaged { reason: &'static str },
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
