//! The closed sets of names a turn records: its route, its outcome, a stage's status, whether
//! coverage was assessed, the phase a turn is in (for supersede) and the progress a stream shows.
//! Each name is written once, here; everything else compares enums.

use crate::names::names;

names! {
    /// Does the turn need evidence from the documents, or a direct reply?
    pub RouteKind { Retrieval = "retrieval", Direct = "direct" }
}

names! {
    /// How a turn ended.
    pub Outcome {
        /// Answered from the documents, every claim sourced.
        Grounded = "grounded",
        /// Answered from the documents, some claims unsourced.
        GroundedDegraded = "grounded_degraded",
        /// The documents hold nothing that answers it.
        NoContext = "no_context",
        /// The agent's instructions put the question out of scope.
        OutOfScope = "out_of_scope",
        /// The question needs clarifying first.
        ClarificationNeeded = "clarification_needed",
        /// A direct reply (greeting, thanks, identity, or retrieval off).
        Direct = "direct",
        /// A person owns the conversation: the AI said nothing (or a waiting line).
        Suppressed = "suppressed",
        /// The waiting line a visitor gets before the operator's first reply.
        Waiting = "waiting",
    }
}

impl Outcome {
    /// An answer drawn from the documents.
    pub fn is_grounded(self) -> bool {
        matches!(self, Outcome::Grounded | Outcome::GroundedDegraded)
    }
}

names! {
    /// Whether a trace stage ran.
    pub StageStatus { Applied = "applied", Skipped = "skipped" }
}

names! {
    /// Whether the reply's coverage was assessed.
    pub Availability { Assessed = "assessed", NotRecorded = "not_recorded" }
}

names! {
    /// Where a turn is, for supersede: a newer message cancels a turn before `Persisting` (and
    /// before its first streamed chunk).
    pub Phase {
        Waiting = "waiting",
        Preparing = "preparing",
        Routing = "routing",
        Rendering = "rendering",
        Persisting = "persisting",
    }
}

names! {
    /// The progress a streaming client sees (`status` events).
    pub Progress {
        Interpreting = "interpreting",
        Searching = "searching",
        Composing = "composing",
        // the local model is busy with other visitors' answers; `composing` follows when it is ours
        Waiting = "waiting",
    }
}

names! {
    /// The stages a trace records, in the order a turn runs them.
    pub TraceStage {
        Message = "message",
        Gather = "gather",
        OwnershipGate = "ownership_gate",
        RoutinePass = "routine_pass",
        TurnInterpretation = "turn_interpretation",
        DirectiveSteering = "directive_steering",
        RetrievalFanout = "retrieval_fanout",
        ContextVariables = "context_variables",
        SkillSelection = "skill_selection",
        Compose = "compose",
        CoverageAssessment = "coverage_assessment",
        Persist = "persist",
    }
}
