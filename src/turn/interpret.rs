//! Interpretation: does this turn need evidence from the documents (`retrieval`) or a direct
//! reply (`direct`: greetings, thanks, questions about the assistant itself, or an agent with
//! retrieval off)? Deterministic and instant, so it costs no model call; the reasons are the
//! original product's route reasons.

use super::kinds::RouteKind;

/// The route of a turn and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub kind: RouteKind,
    pub reason: &'static str,
}

const SOCIAL: &[&str] = &[
    "hi",
    "hello",
    "hey",
    "hiya",
    "howdy",
    "yo",
    "greetings",
    "morning",
    "afternoon",
    "evening",
    "good",
    "thanks",
    "thank",
    "you",
    "thx",
    "ty",
    "cheers",
    "bye",
    "goodbye",
    "ok",
    "okay",
    "great",
    "cool",
    "nice",
    "awesome",
    "perfect",
    "appreciate",
    "it",
    "much",
    "so",
    "very",
    "there",
    "all",
    "a",
    "lot",
    "bonjour",
    "hola",
    "hallo",
    "ciao",
    "merci",
    "gracias",
    "danke",
];

const IDENTITY: &[&str] = &[
    "who are you",
    "what are you",
    "are you a bot",
    "are you human",
    "are you a human",
    "are you real",
    "are you an ai",
    "what is your name",
    "what's your name",
    "whats your name",
    "who am i talking to",
    "who am i speaking",
];

pub fn route(message: &str, history_len: usize, retrieval_enabled: bool) -> Route {
    if !retrieval_enabled {
        return Route { kind: RouteKind::Direct, reason: "retrieval_disabled" };
    }
    let lower = message.to_lowercase();
    let words: Vec<&str> = lower.split(|c: char| !c.is_alphanumeric() && c != '\'').filter(|w| !w.is_empty()).collect();
    if !words.is_empty() && words.len() <= 6 && words.iter().all(|w| SOCIAL.contains(w)) {
        let reason = if history_len == 0 { "conversation_start" } else { "social_only" };
        return Route { kind: RouteKind::Direct, reason };
    }
    let normalized = words.join(" ");
    if words.len() <= 8 && IDENTITY.iter().any(|p| normalized.contains(p)) {
        return Route { kind: RouteKind::Direct, reason: "assistant_identity" };
    }
    Route { kind: RouteKind::Retrieval, reason: "evidence_required" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(route("Hi there!", 0, true).reason, "conversation_start");
        assert_eq!(route("thanks a lot", 4, true).reason, "social_only");
        assert_eq!(route("Who are you?", 2, true).reason, "assistant_identity");
        assert_eq!(
            route("How long do refunds take?", 0, true),
            Route { kind: RouteKind::Retrieval, reason: "evidence_required" }
        );
        assert_eq!(route("Hi, how long do refunds take?", 0, true).kind, RouteKind::Retrieval);
        assert_eq!(route("How long do refunds take?", 0, false).reason, "retrieval_disabled");
    }
}
