//! A visitor's message on a public session (`POST /api/v1/public/chat/{token}`): the body's rules,
//! the conversation it belongs to (only ever one of the session's own), bootstrap greetings, and
//! the turn it becomes. The turn itself is the same as REST chat's (`crate::turn`), on the
//! `public` surface.
//!
//! A bootstrap greeting (`startConversation`) is not a conversation: it waits in
//! `public_greetings` until the visitor's first message carries its id, and is then saved as the
//! conversation's first message, before the visitor's. An Exact words greeting is the operator's
//! text verbatim (no model call); otherwise a chat model writes one line following the greeting
//! instruction, and without a model a fixed line names the assistant.

use super::session::Session;
use super::store;
use crate::agents::config::AgentConfig;
use crate::app::App;
use crate::clock::rfc3339;
use crate::conversations::{self, Channel, NewConversation, NewMessage, Role, Source, Visibility};
use crate::error::{Error, ErrorCode, Result};
use crate::ids::WorkspaceId;
use crate::names::names;
use crate::turn::{self, Surface, TurnInput, context::ContextScope};

/// Longest `userExpectedLocale`, page locale or browser locale.
const MAX_LOCALE: usize = 35;
/// How long an unanswered greeting waits for the first message.
const GREETING_TTL_SECS: i64 = 24 * 3600;

names! {
    /// How the visitor produced the message.
    pub InputMethod { Typed = "typed", SuggestionClick = "suggestion_click", IntentClick = "intent_click" }
}

names! {
    /// Where a greeting's text came from.
    pub GreetingKind { Exact = "exact", Generated = "generated" }
}

/// What the page told us about itself (used for the greeting's language; never stored).
#[derive(Debug, Clone, Default)]
pub struct PageContext {
    pub page_locale: Option<String>,
    pub browser_locale: Option<String>,
}

/// The intent of an action chip, sent back verbatim.
#[derive(Debug, Clone)]
pub struct Intent {
    pub skill_name: String,
    pub intent_name: Option<String>,
}

/// How the message was produced.
#[derive(Debug, Clone)]
pub struct InputMetadata {
    pub method: InputMethod,
    pub suggestion_source_message_id: Option<String>,
    pub intent: Option<Intent>,
}

/// A message as the edge checked its shape (lengths and types); [`send`] checks the rest.
#[derive(Debug, Clone, Default)]
pub struct MessageCommand {
    pub message: Option<String>,
    pub conversation_id: Option<String>,
    pub bootstrap_greeting_id: Option<String>,
    pub start_conversation: bool,
    pub user_expected_locale: Option<String>,
    pub page: PageContext,
    pub input_metadata: Option<InputMetadata>,
}

/// An authored chip of a greeting.
#[derive(Debug, Clone)]
pub struct GreetingChip {
    pub id: String,
    pub text: String,
}

/// A bootstrap greeting.
#[derive(Debug, Clone)]
pub struct Greeting {
    pub id: String,
    pub text: String,
    pub chips: Vec<GreetingChip>,
    pub kind: GreetingKind,
    pub locale: Option<String>,
}

/// What a message becomes.
pub enum Prepared {
    /// `startConversation`: the greeting to show (nothing saved as a conversation).
    Greeting(Greeting),
    /// A turn to run.
    Turn(Box<TurnInput>),
}

fn field(name: &str, message: impl Into<String>) -> Error {
    Error::invalid_field(name, message)
}

/// The body's rules that need no database.
pub fn check(cmd: &MessageCommand) -> Result<()> {
    if cmd.start_conversation {
        if cmd.conversation_id.is_some() || cmd.bootstrap_greeting_id.is_some() {
            return Err(field(
                "startConversation",
                "startConversation starts a new conversation: send it without conversationId or bootstrapGreetingId",
            ));
        }
    } else {
        match &cmd.message {
            None => return Err(field("message", "message is required (unless startConversation is true)")),
            Some(m) => {
                turn::check_message(m)?;
            }
        }
        if cmd.conversation_id.is_some() && cmd.bootstrap_greeting_id.is_some() {
            return Err(field(
                "bootstrapGreetingId",
                "bootstrapGreetingId belongs to the first message of a new conversation: send it without conversationId",
            ));
        }
    }
    for (name, v) in [("conversationId", &cmd.conversation_id), ("bootstrapGreetingId", &cmd.bootstrap_greeting_id)] {
        if let Some(v) = v
            && !crate::ids::is_uuid(v)
        {
            return Err(field(name, format!("{name} must be an id from an earlier response")));
        }
    }
    for (name, v) in [
        ("userExpectedLocale", &cmd.user_expected_locale),
        ("pageContext.pageLocale", &cmd.page.page_locale),
        ("pageContext.browserLocale", &cmd.page.browser_locale),
    ] {
        if let Some(v) = v
            && (v.chars().count() > MAX_LOCALE || v.trim().is_empty())
        {
            return Err(field(name, format!("{name} is a language tag of at most {MAX_LOCALE} characters")));
        }
    }
    if let Some(m) = &cmd.input_metadata {
        let source = m.suggestion_source_message_id.as_deref();
        if source.is_some_and(|s| s.is_empty() || s.chars().count() > 100) {
            return Err(field(
                "inputMetadata.suggestionSourceMessageId",
                "suggestionSourceMessageId is 1 to 100 characters",
            ));
        }
        match m.method {
            InputMethod::Typed => {}
            InputMethod::SuggestionClick if source.is_none() => {
                return Err(field(
                    "inputMetadata.suggestionSourceMessageId",
                    "a suggestion_click names the message the chip came from (suggestionSourceMessageId)",
                ));
            }
            InputMethod::SuggestionClick => {}
            InputMethod::IntentClick => {
                let Some(i) = &m.intent else {
                    return Err(field("inputMetadata.intent", "an intent_click sends the chip's intent back"));
                };
                let n = i.skill_name.trim().chars().count();
                if n == 0 || n > 120 {
                    return Err(field("inputMetadata.intent.skillName", "skillName is 1 to 120 characters"));
                }
                if i.intent_name.as_ref().is_some_and(|s| s.chars().count() > 120) {
                    return Err(field("inputMetadata.intent.intentName", "intentName is at most 120 characters"));
                }
            }
        }
    }
    Ok(())
}

fn not_found() -> Error {
    Error::new(ErrorCode::NotFound, "Not found")
}

/// The published agent a session talks to.
fn agent_of(app: &App, s: &Session) -> Result<AgentConfig> {
    let ws = WorkspaceId(s.workspace_id.clone());
    app.db.read(|c| crate::agents::config::published(c, &ws, &s.agent_id))
}

/// Checks a message and turns it into a greeting or a turn on the session's conversation.
pub fn send(app: &App, s: &Session, cmd: MessageCommand) -> Result<Prepared> {
    check(&cmd)?;
    if cmd.start_conversation {
        return greet(app, s, &cmd).map(Prepared::Greeting);
    }
    let message = turn::check_message(cmd.message.as_deref().unwrap_or_default())?;
    let ws = WorkspaceId(s.workspace_id.clone());
    let channel = if s.channel == "website_embed" { Channel::WebsiteEmbed } else { Channel::AnonymousLink };
    let (cid, agent) = app.db.write(|tx| {
        let now = rfc3339(app.clock.now());
        if let Some(cid) = &cmd.conversation_id {
            let conv = conversations::find_in(tx, &ws.0, cid, false).map_err(|_| not_found())?;
            if conv.public_session_id.as_deref() != Some(s.public_session_id.as_str()) || conv.agent_id != s.agent_id {
                return Err(not_found());
            }
            let agent = match &conv.revision_id {
                Some(rid) => crate::agents::config::revision(tx, &conv.agent_id, rid)?,
                None => crate::agents::config::published(tx, &ws, &conv.agent_id)?,
            };
            return Ok((conv.id, agent));
        }
        let greeting = match &cmd.bootstrap_greeting_id {
            Some(id) => Some(store::take_greeting(tx, &ws.0, &s.public_session_id, id)?.ok_or_else(|| {
                field("bootstrapGreetingId", "this greeting is unknown, expired or already used: start without it")
            })?),
            None => None,
        };
        let agent = crate::agents::config::published(tx, &ws, &s.agent_id)?;
        let cid = conversations::start(
            tx,
            &NewConversation {
                workspace_id: &ws.0,
                agent_id: &s.agent_id,
                revision_id: agent.revision_id.as_deref(),
                channel,
                visibility: Visibility::Visitor,
                test_execution_id: None,
                started_by: None,
                public_session_id: Some(&s.public_session_id),
            },
            &now,
        )?;
        if let Some(g) = greeting {
            let chips: Vec<serde_json::Value> = g.chips.iter().map(chip_json).collect();
            conversations::append_message(
                tx,
                &ws.0,
                &NewMessage {
                    conversation_id: &cid,
                    role: Role::Assistant,
                    source: Source::Agent,
                    content: &g.text,
                    citations: serde_json::json!([]),
                    metadata: serde_json::json!({
                        "greeting": {"bootstrapGreetingId": g.id, "kind": g.kind.as_str(), "locale": g.locale},
                        "suggestions": chips,
                    }),
                    trace_id: None,
                    request_id: None,
                },
                &now,
            )?;
        }
        Ok((cid, agent))
    })?;
    Ok(Prepared::Turn(Box::new(TurnInput {
        workspace: ws,
        conversation_id: cid,
        agent,
        message,
        filter: None,
        request_id: None,
        surface: Surface::Public,
        turn_id: crate::ids::new_id(),
        include_debug: false,
        actor: crate::audit::Actor::system(),
        context_scope: ContextScope { session_id: Some(s.public_session_id.clone()), customer_id: None },
        test_values: Vec::new(),
        invocation: None,
    })))
}

/// An authored chip on the wire: `{id, text, kind: "authored", action: {kind: "ask_followup"}}`.
pub fn chip_json(c: &GreetingChip) -> serde_json::Value {
    serde_json::json!({"id": c.id, "text": c.text, "kind": "authored", "action": {"kind": "ask_followup"}})
}

/// The greeting's language: the visitor's explicit choice, else the page's, else the browser's,
/// else the default; each matched exactly, then by base language (`pt-BR` → `pt`).
pub fn pick_locale<'a>(available: &[&'a str], wanted: &[Option<&str>], default: &'a str) -> &'a str {
    for w in wanted.iter().flatten() {
        if let Some(a) = available.iter().find(|a| a.eq_ignore_ascii_case(w)) {
            return a;
        }
        let base = w.split('-').next().unwrap_or(w);
        if let Some(a) = available.iter().find(|a| a.eq_ignore_ascii_case(base)) {
            return a;
        }
    }
    default
}

/// Makes the session's bootstrap greeting and keeps it until the first message.
fn greet(app: &App, s: &Session, cmd: &MessageCommand) -> Result<Greeting> {
    let agent = agent_of(app, s)?;
    let general = crate::settings::general::of_workspace(app, &WorkspaceId(s.workspace_id.clone()))?;
    let wanted =
        [cmd.user_expected_locale.as_deref(), cmd.page.page_locale.as_deref(), cmd.page.browser_locale.as_deref()];
    let default_locale = agent
        .settings
        .assistant_default_locale
        .clone()
        .or(general.assistant_default_locale.clone())
        .unwrap_or_else(|| "en".into());
    let id = crate::ids::new_id();
    let g = match &agent.settings.greeting_exact_words {
        Some(x) => {
            let keys: Vec<&str> = x.variants.keys().map(String::as_str).collect();
            let fallback = keys.iter().find(|k| k.eq_ignore_ascii_case(&default_locale)).copied().unwrap_or(keys[0]);
            let locale = pick_locale(&keys, &wanted, fallback);
            let v = &x.variants[locale];
            Greeting {
                chips: v
                    .chips
                    .iter()
                    .enumerate()
                    .map(|(k, t)| GreetingChip { id: format!("{id}:{}", k + 1), text: t.clone() })
                    .collect(),
                id,
                text: v.text.clone(),
                kind: GreetingKind::Exact,
                locale: Some(locale.to_string()),
            }
        }
        None => {
            let name =
                if general.assistant_name.is_empty() { agent.name.clone() } else { general.assistant_name.clone() };
            let instruction = if agent.settings.greeting_instruction.is_empty() {
                general.greeting_instruction.clone()
            } else {
                agent.settings.greeting_instruction.clone()
            };
            let locale = wanted.iter().flatten().next().map(|l| l.to_string()).unwrap_or(default_locale);
            let models = crate::turn::TurnModels::resolve(app, &WorkspaceId(s.workspace_id.clone()), &agent)?;
            let text = crate::turn::compose::greeting_line(
                crate::turn::as_model(&models.chat),
                &name,
                &instruction,
                &locale,
                &crate::models::chat::Cancel::new(),
            );
            Greeting { id, text, chips: vec![], kind: GreetingKind::Generated, locale: Some(locale) }
        }
    };
    let now = app.clock.now();
    let cutoff = rfc3339(now - chrono::Duration::seconds(GREETING_TTL_SECS));
    app.db.write(|tx| {
        store::prune_greetings(tx, &cutoff)?;
        store::insert_greeting(tx, &s.workspace_id, &s.agent_id, &s.public_session_id, &g, &rfc3339(now))
    })?;
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed() -> MessageCommand {
        MessageCommand { message: Some("hello".into()), ..Default::default() }
    }

    #[test]
    fn locale_choice_follows_the_reference_order() {
        let av = ["en", "pt", "fr-CA"];
        assert_eq!(pick_locale(&av, &[Some("fr-CA"), Some("pt")], "en"), "fr-CA");
        assert_eq!(pick_locale(&av, &[Some("pt-BR")], "en"), "pt");
        assert_eq!(pick_locale(&av, &[None, Some("de"), Some("PT")], "en"), "pt");
        assert_eq!(pick_locale(&av, &[Some("de")], "en"), "en");
        assert_eq!(pick_locale(&av, &[None, None, None], "fr-CA"), "fr-CA");
    }

    #[test]
    fn body_rules() {
        assert!(check(&typed()).is_ok());
        let no_message = MessageCommand { message: None, ..Default::default() };
        assert_eq!(check(&no_message).unwrap_err().details.unwrap()["field"], "message");
        let start = MessageCommand { start_conversation: true, message: None, ..Default::default() };
        assert!(check(&start).is_ok());
        let start_with_cid = MessageCommand { conversation_id: Some(crate::ids::new_id()), ..start.clone() };
        assert!(check(&start_with_cid).is_err());
        let both = MessageCommand {
            conversation_id: Some(crate::ids::new_id()),
            bootstrap_greeting_id: Some(crate::ids::new_id()),
            ..typed()
        };
        assert_eq!(check(&both).unwrap_err().details.unwrap()["field"], "bootstrapGreetingId");
        let bad_id = MessageCommand { conversation_id: Some("nope".into()), ..typed() };
        assert!(check(&bad_id).is_err());
        let click = |method, source: Option<&str>, intent: Option<Intent>| MessageCommand {
            input_metadata: Some(InputMetadata {
                method,
                suggestion_source_message_id: source.map(str::to_string),
                intent,
            }),
            ..typed()
        };
        assert!(check(&click(InputMethod::SuggestionClick, None, None)).is_err());
        assert!(check(&click(InputMethod::SuggestionClick, Some("m1"), None)).is_ok());
        assert!(check(&click(InputMethod::IntentClick, Some("m1"), None)).is_err());
        let intent = Intent { skill_name: "contact_human".into(), intent_name: None };
        assert!(check(&click(InputMethod::IntentClick, Some("m1"), Some(intent))).is_ok());
        let long = Intent { skill_name: "x".repeat(121), intent_name: None };
        assert!(check(&click(InputMethod::IntentClick, Some("m1"), Some(long))).is_err());
        let locale = MessageCommand { user_expected_locale: Some("x".repeat(36)), ..typed() };
        assert!(check(&locale).is_err());
    }
}
