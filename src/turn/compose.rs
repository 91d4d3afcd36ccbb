//! Composing the reply: a grounded answer from the retrieved chunks (the built-in extractive
//! answerer, or a chat model citing numbered sources), a direct reply, the brief decline of a
//! grounding gap, the waiting line of a human-owned conversation, and follow-up suggestions.
//!
//! A model's grounded reply starts with one line `COVERAGE: <coverage> <reason>` (its own
//! assessment, parsed before any answer text is released) and cites sources as `[n]`. Citation
//! markers are stripped from the text the visitor sees — streamed and final alike — and kept as
//! segments (`{text, citationIndices}`). A marker naming a source that was not retrieved is an
//! invalid source; a sentence without a valid marker is an unsourced claim.

use serde::Serialize;
use serde_json::{Value, json};

use super::kinds::Outcome;
use super::markers::{MarkerStripper, claims, is_claim, parse_head, strip_markers};
use super::steering::Matched;
use super::trace::Grounding;
use super::transcript;
use crate::agents::config::AgentConfig;
use crate::models::chat::{
    Cancel, ChatModel, ChatOutput, ChatRequest, ErrorKind, LlmError, Message, OutputSchema, Usage, chat_json,
};
use crate::models::extractive::{self, Citation, Passage, Segment};
use crate::search::query::Hit;

/// Passages the built-in answerer reads.
pub const BUILTIN_PASSAGES: usize = 4;
/// Characters of each source in a model prompt.
const SOURCE_CHARS: usize = 900;
/// Sources a local (llama.cpp) model reads.
const LOCAL_SOURCES: usize = 6;
/// The most tokens of sources a local model reads per turn (an eighth of a smaller context).
const LOCAL_SOURCE_TOKENS: usize = 200;
/// Within that, what the local model reads in this long on the cores it has now (its own recent
/// speed: ~270 tokens/s on two idle cores of a small CPU, ~150 on one), so that a turn's first
/// word comes within about a second whatever else the machine runs...
const LOCAL_READ_SECONDS: f64 = 0.8;
/// ...less what the turn reads besides its sources (the question, ~30; the chat template's turn
/// markers, ~16; on average 8 tokens the prompt cache gives back for reading again, see its batch
/// granularity), and never fewer than a sentence's worth.
const LOCAL_OTHER_TOKENS: usize = 54;
const LOCAL_MIN_SOURCE_TOKENS: usize = 48;
/// History messages in a model prompt.
const PROMPT_HISTORY: usize = 4;
const ANSWER_MAX_TOKENS: u32 = 1024;
/// A local model's answer: small models tend to run on until the limit, and each token costs
/// tens of milliseconds on a CPU.
const LOCAL_ANSWER_MAX_TOKENS: u32 = 384;
/// The built-in answerer's coverage (share of the question it covers) from which an answer
/// counts as `answered` rather than `partial`.
const ANSWERED_COVERAGE: f32 = 0.8;

pub const WAITING_LINE: &str =
    "Thanks for your message. A member of our team has been asked to join and will reply here.";
pub const DIRECT_NO_MODEL: &str = "I can help with questions about our documents, but this assistant has document search switched off, so I can't look that up.";

/// What composing produced.
#[derive(Debug, Clone)]
pub struct Composed {
    pub text: String,
    pub citations: Vec<Citation>,
    pub segments: Vec<Segment>,
    /// `(coverage, reason)` when assessed; `None` when not recorded.
    pub coverage: Option<(String, String)>,
    pub outcome: Outcome,
    pub grounding: Option<Grounding>,
    pub usage: Usage,
    pub provider: String,
    pub model: String,
}

impl Composed {
    /// A reply with no citations, segments or coverage.
    fn plain(text: String, outcome: Outcome, usage: Usage, provider: String, model: String) -> Composed {
        Composed {
            text,
            citations: vec![],
            segments: vec![],
            coverage: None,
            outcome,
            grounding: None,
            usage,
            provider,
            model,
        }
    }
}

/// Where answer text goes as it is produced. `chunk` returns false when the turn may not emit
/// (it was superseded before its first chunk).
pub trait Sink {
    fn chunk(&mut self, text: &str) -> bool;
    /// The model is busy with `ahead` other answers (0: it is this one's turn now).
    fn waiting(&mut self, ahead: usize) {
        let _ = ahead;
    }
}

/// A sink that keeps nothing (non-streaming callers).
pub struct NoSink;
impl Sink for NoSink {
    fn chunk(&mut self, _: &str) -> bool {
        true
    }
}

/// The index of `h` in `citations`, adding it the first time it is cited.
fn cite(citations: &mut Vec<Citation>, h: &Hit) -> usize {
    if let Some(at) = citations.iter().position(|c| c.chunk_id == h.chunk_id) {
        return at;
    }
    citations.push(Citation {
        document_id: h.document_id.clone(),
        chunk_id: h.chunk_id.clone(),
        title: h.title.clone(),
        url: h.page_url(),
    });
    citations.len() - 1
}

/// The first `n` hits as the built-in answerer's passages.
pub fn passages(hits: &[Hit], n: usize) -> Vec<Passage> {
    hits.iter()
        .take(n)
        .map(|h| Passage {
            document_id: h.document_id.clone(),
            chunk_id: h.chunk_id.clone(),
            title: h.title.clone(),
            content: h.content.clone(),
            url: h.page_url(),
        })
        .collect()
}

/// The built-in answerer's grounded answer. Streams the answer (sentence by sentence) once it is
/// composed.
pub fn builtin_grounded(question: &str, hits: &[Hit], sink: &mut dyn Sink) -> Option<Composed> {
    let c = extractive::compose(question, &passages(hits, BUILTIN_PASSAGES));
    let (coverage, reason, outcome) = if !c.covered {
        ("unanswered", "insufficient_evidence", Outcome::NoContext)
    } else if c.coverage >= ANSWERED_COVERAGE {
        ("answered", "sufficient_evidence", Outcome::Grounded)
    } else {
        ("partial", "insufficient_evidence", Outcome::Grounded)
    };
    let n = c.segments.len() as i64;
    let chunks: Vec<String> = if c.segments.is_empty() {
        vec![c.text.clone()]
    } else {
        c.segments
            .iter()
            .enumerate()
            .map(|(i, s)| if i == 0 { s.text.clone() } else { format!(" {}", s.text) })
            .collect()
    };
    for ch in &chunks {
        if !sink.chunk(ch) {
            return None;
        }
    }
    Some(Composed {
        text: c.text,
        citations: c.citations,
        segments: c.segments,
        coverage: Some((coverage.into(), reason.into())),
        outcome,
        grounding: Some(Grounding::from_counts(n, n, 0)),
        usage: Usage::default(),
        provider: extractive::PROVIDER.into(),
        model: extractive::MODEL.into(),
    })
}

/// The system prompt of a model turn: who the agent is, its instruction and the directives that
/// apply (earlier ones win conflicts).
fn persona(
    agent: &AgentConfig,
    directives: &[Matched],
    gated: &[crate::agents::config::AuthoredDirective],
    context: &str,
) -> String {
    let mut s = format!("You are {}, an assistant answering a website visitor.", agent.name);
    let ci = agent.settings.custom_instruction.trim();
    if !ci.is_empty() {
        s.push_str("\nOperator's instructions: ");
        s.push_str(ci);
    }
    if !directives.is_empty() {
        s.push_str("\nRules for this reply (earlier rules win when they conflict):");
        for d in directives {
            s.push_str(&format!("\n- {}", d.directive.body.action.trim()));
        }
    }
    for d in gated {
        if let Some(cc) = &d.body.coverage_criteria {
            s.push_str(&format!("\n- Only if your coverage is {}: {}", cc.coverage.join(" or "), d.body.action.trim()));
        }
    }
    s.push_str(context);
    s
}

fn history_messages(history: &[(String, String)]) -> Vec<Message> {
    recent(history).iter().map(message).collect()
}

/// The earlier messages a prompt carries.
fn recent(history: &[(String, String)]) -> &[(String, String)] {
    &history[history.len().saturating_sub(PROMPT_HISTORY)..]
}

pub(super) fn message((role, text): &(String, String)) -> Message {
    if role == "user" { Message::user(text.clone()) } else { Message::assistant(text.clone()) }
}

/// A conversation's earlier messages (role, text; oldest first) and the conversation they are from.
#[derive(Clone, Copy, Default)]
pub struct History<'a> {
    pub conversation: Option<&'a str>,
    pub messages: &'a [(String, String)],
}

/// A model's grounded answer over `hits`, streamed through `sink` after its head line.
#[allow(clippy::too_many_arguments)]
pub fn model_grounded(
    m: &dyn ChatModel,
    agent: &AgentConfig,
    directives: &[Matched],
    gated: &[crate::agents::config::AuthoredDirective],
    context: &str,
    question: &str,
    history: History<'_>,
    hits: &[Hit],
    sink: &mut dyn Sink,
    cancel: &Cancel,
) -> Result<Option<Composed>, LlmError> {
    let persona = persona(agent, directives, gated, context);
    let local = m.provider() == "local";
    let (local_hits, known_coverage);
    let (hits, messages) = if local {
        // a local model reads slowly on a CPU: the fixed instructions first (their reading is
        // cached from the agent's earlier turns), then the history, then only the sentences of the
        // best sources that bear on the question, and the question last. Coverage is decided
        // before generation, so the small model is not asked to judge it.
        let budget = local_source_tokens(m.context_window(), m.prompt_tokens_within(LOCAL_READ_SECONDS));
        (local_hits, known_coverage) = match local_sources(question, hits, budget) {
            Some((h, c)) => (h, Some(c)),
            None => return Ok(decline(None, question, sink, cancel)),
        };
        let mut messages = vec![Message::system(grounded_system(&persona, &[], false))];
        messages.extend(transcript::history(history.conversation, recent(history.messages)));
        messages.push(Message::user(format!("Sources:\n{}Question: {question}", numbered_sources(&local_hits, true))));
        (local_hits.as_slice(), messages)
    } else {
        known_coverage = None;
        let mut messages = vec![Message::system(grounded_system(&persona, hits, true))];
        messages.extend(history_messages(history.messages));
        messages.push(Message::user(question.to_string()));
        (hits, messages)
    };
    let max_tokens = if local { LOCAL_ANSWER_MAX_TOKENS } else { ANSWER_MAX_TOKENS };
    let req = ChatRequest {
        temperature: 0.2,
        cache_scope: Some(agent.agent_id.clone()),
        ..ChatRequest::new(messages).max_tokens(max_tokens)
    };
    let Some(out) = stream_grounded(m, &req, sink, cancel)? else { return Ok(None) };
    let (head, body) = split_head(&out.text);
    let (mut citations, segments, grounding) = cite_claims(&body, hits);
    if known_coverage.is_some() {
        // cite, then write: the local model was given only the sentences chosen as covering the
        // question, and wrote from those; they are where a reader checks the answer (besides any
        // source its own markers or claims point at)
        for h in hits {
            cite(&mut citations, h);
        }
    }
    let head = head.or(known_coverage);
    let outcome = grounded_outcome(head.as_ref(), &grounding);
    let text = strip_markers(&body).trim().to_string();
    if let (true, Some(c), Some(Message { content: shown, .. })) = (local, history.conversation, req.messages.last()) {
        transcript::remember(c, question, &text, shown);
    }
    Ok(Some(Composed {
        text,
        citations,
        segments,
        coverage: head,
        outcome,
        grounding: Some(grounding),
        usage: out.usage,
        provider: m.provider().to_string(),
        model: m.model().to_string(),
    }))
}

/// For a local model, cite then write: the passages the built-in answerer cites for the question,
/// each cut to its sentences that bear on it within the share of the context window sources may
/// take, and the coverage it finds; `None` when it finds the passages do not cover the question
/// (its own decision, taken before generation).
fn local_sources(question: &str, hits: &[Hit], (cap, timely): (usize, usize)) -> Option<(Vec<Hit>, (String, String))> {
    let c = extractive::compose(question, &passages(hits, BUILTIN_PASSAGES));
    if !c.covered {
        return None;
    }
    let coverage = if c.coverage >= ANSWERED_COVERAGE {
        ("answered", "sufficient_evidence")
    } else {
        ("partial", "insufficient_evidence")
    };
    let own: Vec<Hit> = c
        .citations
        .iter()
        .filter_map(|ci| hits.iter().find(|h| h.chunk_id == ci.chunk_id).cloned())
        .take(LOCAL_SOURCES)
        .collect();
    let cut = extractive::relevant(question, &passages(&own, own.len()), cap * 4, timely * 4);
    let kept: Vec<Hit> = own.into_iter().zip(cut).filter_map(|(h, c)| c.map(|content| Hit { content, ..h })).collect();
    (!kept.is_empty()).then(|| (kept, (coverage.0.to_string(), coverage.1.to_string())))
}

/// Tokens of sources a local turn carries: each cited passage's best sentence within at most an
/// eighth of the context window and [`LOCAL_SOURCE_TOKENS`] (the cap), and more of them only within
/// what the model reads in [`LOCAL_READ_SECONDS`] now besides the question (but at least
/// [`LOCAL_MIN_SOURCE_TOKENS`]): `(cap, timely)`.
fn local_source_tokens(window: Option<usize>, readable: Option<usize>) -> (usize, usize) {
    let cap = window.map_or(LOCAL_SOURCE_TOKENS, |w| (w / 8).min(LOCAL_SOURCE_TOKENS));
    let timely = readable.map_or(cap, |n| n.saturating_sub(LOCAL_OTHER_TOKENS));
    (cap, cap.min(timely).max(LOCAL_MIN_SOURCE_TOKENS.min(cap)))
}

/// The sources as the prompt numbers them: each with its title (`short` for a small model: cut
/// to its first words), unless its text says the title already (then the one that says more).
fn numbered_sources(hits: &[Hit], short: bool) -> String {
    hits.iter()
        .enumerate()
        .map(|(i, h)| {
            let content: String = h.content.chars().take(SOURCE_CHARS).collect();
            let title = if short { extractive::short_title(&h.title) } else { h.title.clone() };
            if !extractive::title_repeated(&h.title, &content) {
                format!("[{}] {title}\n{content}\n\n", i + 1)
            } else if content.len() >= h.title.len() {
                format!("[{}] {content}\n\n", i + 1)
            } else {
                format!("[{}] {title}\n\n", i + 1)
            }
        })
        .collect()
}

/// The grounded answer's system prompt: the persona, the rules, the coverage head line when the
/// model is to judge coverage (`head`), and the numbered sources (none when they come with the
/// question).
fn grounded_system(persona: &str, hits: &[Hit], head: bool) -> String {
    let sources =
        if hits.is_empty() { String::new() } else { format!("\n\nSources:\n{}", numbered_sources(hits, false)) };
    let head = if head {
        "\nBegin your reply with exactly one line: COVERAGE: <answered|partial|unanswered|unclear> <sufficient_evidence|insufficient_evidence|conflicting_evidence|ambiguous_request|intentional_scope_boundary>\n\
         Allowed pairs: answered sufficient_evidence; partial or unanswered with insufficient_evidence, conflicting_evidence or intentional_scope_boundary; unclear ambiguous_request. Then write the answer on the next lines."
    } else {
        ""
    };
    format!(
        "{persona}\n\nAnswer only from the numbered sources; do not use outside knowledge. Cite every claim with its source number in brackets, like [1]. If the sources do not contain the answer, say so briefly instead of guessing. If the question is outside what you are here for, decline briefly.{head}{sources}"
    )
}

/// Runs the chat, streaming the answer through `sink` with the head line withheld and citation
/// markers stripped; `None` when the sink stopped or the turn was cancelled.
fn stream_grounded(
    m: &dyn ChatModel,
    req: &ChatRequest,
    sink: &mut dyn Sink,
    cancel: &Cancel,
) -> Result<Option<ChatOutput>, LlmError> {
    // the token and waiting callbacks both speak to the sink
    let sink = std::cell::RefCell::new(sink);
    let mut raw = String::new();
    let mut head_done = false;
    let mut stripper = MarkerStripper::default();
    let mut blocked = false;
    let local_cancel = cancel.clone();
    let mut on_token = |t: &str| {
        raw.push_str(t);
        if blocked {
            return;
        }
        let emit = if head_done {
            stripper.push(t)
        } else {
            // the head line is withheld; everything after it is answer text
            match raw.find('\n') {
                Some(nl) => {
                    head_done = true;
                    let line = &raw[..nl];
                    let body = if parse_head(line).is_some() || line.trim_start().starts_with("COVERAGE") {
                        raw[nl + 1..].to_string()
                    } else {
                        raw.clone()
                    };
                    stripper.push(body.trim_start_matches('\n'))
                }
                // text that can no longer become a head line is answer text at once
                None if !could_be_head(&raw) => {
                    head_done = true;
                    stripper.push(&raw.clone())
                }
                None => String::new(),
            }
        };
        if !emit.is_empty() && !sink.borrow_mut().chunk(&emit) {
            blocked = true;
            local_cancel.cancel();
        }
    };
    let out = m.chat_queued(req, &mut on_token, &mut |ahead| sink.borrow_mut().waiting(ahead), cancel)?;
    if blocked || cancel.is_cancelled() {
        return Ok(None);
    }
    let tail = stripper.finish();
    if !tail.is_empty() && !sink.borrow_mut().chunk(&tail) {
        return Ok(None);
    }
    Ok(Some(out))
}

/// Whether `raw` (the reply so far, no line break yet) may still turn out to be the head line.
fn could_be_head(raw: &str) -> bool {
    let t = raw.trim_start();
    t.starts_with("COVERAGE") || "COVERAGE".starts_with(t)
}

/// The reply's coverage head (when it starts with one) and the answer text after it.
fn split_head(text: &str) -> (Option<(String, String)>, String) {
    match text.trim_start().split_once('\n') {
        _ if !text.trim_start().starts_with("COVERAGE") => (None, text.trim().to_string()),
        Some((first, rest)) => (parse_head(first), rest.trim().to_string()),
        None => (parse_head(text), String::new()),
    }
}

/// The answer's claims as segments citing the `hits` their markers name, and its grounding.
fn cite_claims(body: &str, hits: &[Hit]) -> (Vec<Citation>, Vec<Segment>, Grounding) {
    let parts = claims(body, hits.len());
    let mut citations: Vec<Citation> = Vec::new();
    let mut segments = Vec::new();
    let (mut n_claims, mut sourced, mut invalid) = (0i64, 0i64, 0i64);
    for (t, valid, bad) in parts {
        invalid += bad as i64;
        let mut idx = Vec::new();
        for k in valid {
            idx.push(cite(&mut citations, &hits[k]));
        }
        if is_claim(&t) {
            n_claims += 1;
            if !idx.is_empty() {
                sourced += 1;
            }
        }
        segments.push(Segment { text: t, citation_indices: idx });
    }
    let grounding = Grounding::from_counts(n_claims, sourced, invalid);
    if citations.is_empty() {
        // A model that cites nothing at all (small local models do not keep to the marker
        // format): each claim points at the retrieved passage holding most of its terms, if one
        // holds at least half. The grounding above still counts these claims as unsourced by
        // the model; the citations show the reader where to check them.
        let sources = passages(hits, hits.len());
        for seg in segments.iter_mut().filter(|s| is_claim(&s.text)) {
            let Some(k) = extractive::attribute(&seg.text, &sources) else { continue };
            seg.citation_indices.push(cite(&mut citations, &hits[k]));
        }
    }
    (citations, segments, grounding)
}

/// The outcome of a model's grounded answer: its own coverage head first, then the grounding.
fn grounded_outcome(head: Option<&(String, String)>, grounding: &Grounding) -> Outcome {
    match head.map(|(c, r)| (c.as_str(), r.as_str())) {
        Some((_, "intentional_scope_boundary")) => Outcome::OutOfScope,
        Some(("unclear", _)) => Outcome::ClarificationNeeded,
        Some(("unanswered", _)) => Outcome::NoContext,
        _ if grounding.verdict == "grounded" => Outcome::Grounded,
        _ => Outcome::GroundedDegraded,
    }
}

/// A short decline when retrieval found nothing: written by the workspace chat model in the
/// visitor's language, or the fixed copy.
/// The reply of an external MCP skill that claimed the turn (a directive's `external_mcp`
/// binding): the tool's answer as it gave it, streamed as one chunk.
pub fn external(text: &str, skill: &str, sink: &mut dyn Sink) -> Option<Composed> {
    if !sink.chunk(text) {
        return None;
    }
    Some(Composed::plain(text.to_string(), Outcome::Direct, Usage::default(), "mcp".into(), skill.to_string()))
}

pub fn decline(m: Option<&dyn ChatModel>, question: &str, sink: &mut dyn Sink, cancel: &Cancel) -> Option<Composed> {
    let mut text = String::new();
    let mut usage = Usage::default();
    // a small local model asked to phrase a decline tends to answer anyway (from what it
    // half-remembers): it gets the fixed copy
    let m = m.filter(|m| m.provider() != "local");
    if let Some(m) = m {
        let req = ChatRequest::new(vec![
            Message::system("The knowledge base has nothing that answers the visitor's message. In one or two short sentences, in the visitor's language, say that you could not find an answer in the available documents. Do not guess an answer."),
            Message::user(question.to_string()),
        ])
        .max_tokens(120);
        match m.chat(&req, &mut |_| {}, cancel) {
            Ok(o) => {
                text = o.text.trim().to_string();
                usage = o.usage;
            }
            Err(e) => tracing::warn!(error = %e.message, "no-context decline failed; using the fixed copy"),
        }
    }
    let (provider, model) = match (m, text.is_empty()) {
        (Some(m), false) => (m.provider().to_string(), m.model().to_string()),
        _ => (extractive::PROVIDER.to_string(), extractive::MODEL.to_string()),
    };
    if text.is_empty() {
        text = extractive::NOT_COVERED.to_string();
    }
    if !sink.chunk(&text) {
        return None;
    }
    Some(Composed {
        coverage: Some(("unanswered".into(), "insufficient_evidence".into())),
        grounding: Some(Grounding::from_counts(0, 0, 0)),
        ..Composed::plain(text, Outcome::NoContext, usage, provider, model)
    })
}

/// A direct (not retrieval-grounded) reply: greetings, thanks, who the assistant is, or anything
/// when the agent has retrieval off.
#[allow(clippy::too_many_arguments)]
pub fn direct(
    m: Option<&dyn ChatModel>,
    agent: &AgentConfig,
    directives: &[Matched],
    context: &str,
    reason: &str,
    question: &str,
    history: &[(String, String)],
    sink: &mut dyn Sink,
    cancel: &Cancel,
) -> Result<Option<Composed>, LlmError> {
    let (text, usage, provider, model) = match m {
        Some(m) => {
            let system = format!(
                "{}\n\nReply directly and briefly. You cannot look anything up right now: if the visitor asks for facts you were not given, say you cannot check that here.",
                persona(agent, directives, &[], context)
            );
            let mut messages = vec![Message::system(system)];
            if m.provider() == "local" {
                // as in a grounded local turn: not the small model's own earlier answers
                messages.extend(transcript::history(None, recent(history)));
            } else {
                messages.extend(history_messages(history));
            }
            messages.push(Message::user(question.to_string()));
            let mut streamed_ok = true;
            let local = cancel.clone();
            let out = m.chat(
                &ChatRequest::new(messages).max_tokens(400),
                &mut |t| {
                    if streamed_ok && !sink.chunk(t) {
                        streamed_ok = false;
                        local.cancel();
                    }
                },
                cancel,
            )?;
            if !streamed_ok || cancel.is_cancelled() {
                return Ok(None);
            }
            (out.text.trim().to_string(), out.usage, m.provider().to_string(), m.model().to_string())
        }
        None => {
            let t = match reason {
                "social_only" if is_thanks(question) => {
                    "You're welcome! Is there anything else I can help you with?".to_string()
                }
                "social_only" | "conversation_start" => "Hello! How can I help you today?".to_string(),
                "assistant_identity" => format!(
                    "I'm {}, an assistant that answers questions from this organization's documents.",
                    agent.name
                ),
                _ => DIRECT_NO_MODEL.to_string(),
            };
            if !sink.chunk(&t) {
                return Ok(None);
            }
            (t, Usage::default(), extractive::PROVIDER.to_string(), extractive::MODEL.to_string())
        }
    };
    Ok(Some(Composed::plain(text, Outcome::Direct, usage, provider, model)))
}

fn is_thanks(q: &str) -> bool {
    let l = q.to_lowercase();
    ["thank", "thanks", "thx", "cheers", "appreciate"].iter().any(|w| l.contains(w))
}

/// The short line a visitor gets while a person owns the conversation and has not replied yet.
pub fn waiting_line(m: Option<&dyn ChatModel>, question: &str, cancel: &Cancel) -> String {
    if let Some(m) = m {
        let req = ChatRequest::new(vec![
            Message::system("A member of the team has been asked to take over this conversation and has not replied yet. In one short sentence, in the visitor's language, tell the visitor their message was received and a person will reply here. Do not answer the message itself."),
            Message::user(question.to_string()),
        ])
        .max_tokens(60);
        match m.chat(&req, &mut |_| {}, cancel) {
            Ok(o) if !o.text.trim().is_empty() => return o.text.trim().to_string(),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e.message, "waiting line failed; using the fixed copy"),
        }
    }
    WAITING_LINE.to_string()
}

/// A bootstrap greeting: one short line by the chat model following the operator's instruction, in
/// the visitor's language; without a model (or when it fails), a fixed line naming the assistant.
pub fn greeting_line(
    m: Option<&dyn ChatModel>,
    name: &str,
    instruction: &str,
    locale: &str,
    cancel: &Cancel,
) -> String {
    if let Some(m) = m {
        let mut system = format!(
            "You greet a visitor who just opened a chat with {}. Write one or two short, friendly sentences in the language with the tag `{locale}` that greet them and invite their question. Do not make claims or promises about the business.",
            if name.is_empty() { "an assistant" } else { name }
        );
        if !instruction.is_empty() {
            system.push_str("\nThe operator's instruction for the greeting: ");
            system.push_str(instruction);
        }
        let req = ChatRequest::new(vec![Message::system(system), Message::user("(the visitor opened the chat)")])
            .max_tokens(80);
        match m.chat(&req, &mut |_| {}, cancel) {
            Ok(o) if !o.text.trim().is_empty() => return o.text.trim().to_string(),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e.message, "greeting failed; using the fixed line"),
        }
    }
    if name.is_empty() {
        "Hi! How can I help you today?".to_string()
    } else {
        format!("Hi! I'm {name}. How can I help you today?")
    }
}

/// A follow-up suggestion chip.
#[derive(Debug, Clone, Serialize)]
pub struct Suggestion {
    pub text: String,
    pub kind: &'static str,
    pub action: Value,
}

/// Follow-up questions: by the chat model when there is one, else from what was retrieved but not
/// used (its headings or titles).
pub fn suggestions(
    m: Option<&dyn ChatModel>,
    question: &str,
    answer: &Composed,
    hits: &[Hit],
    count: usize,
    cancel: &Cancel,
) -> Vec<Suggestion> {
    let chip = |text: String| Suggestion { text, kind: "deeper", action: json!({"kind": "ask_followup"}) };
    if count == 0 {
        return vec![];
    }
    if let Some(m) = m {
        let schema = json!({"type": "object", "required": ["questions"], "properties": {"questions": {"type": "array", "items": {"type": "string"}}}});
        let req = ChatRequest::new(vec![
            Message::system(format!("Suggest {count} short follow-up questions the visitor might ask next, answerable from the same documents. Same language as the visitor.")),
            Message::user(format!("Visitor asked: {question}\nAnswer given: {}", answer.text.chars().take(1200).collect::<String>())),
        ])
        .max_tokens(200);
        return match chat_json(m, req, OutputSchema { name: "suggestions".into(), schema }, cancel) {
            Ok((v, _)) => v["questions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .take(count)
                .map(chip)
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e.message, "suggestions failed");
                vec![]
            }
        };
    }
    let cited: Vec<&str> = answer.citations.iter().map(|c| c.chunk_id.as_str()).collect();
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for h in hits.iter().filter(|h| !cited.contains(&h.chunk_id.as_str())) {
        let topic = h
            .heading_path
            .as_deref()
            .and_then(|p| p.rsplit(" > ").next())
            .filter(|t| !t.trim().is_empty())
            .unwrap_or(&h.title)
            .trim()
            .to_string();
        let key = topic.to_lowercase();
        if topic.is_empty() || topic.chars().count() > 80 || seen.contains(&key) {
            continue;
        }
        seen.push(key);
        out.push(chip(format!("Tell me more about {topic}")));
        if out.len() >= count {
            break;
        }
    }
    out
}

/// Maps a model failure during composing to an error the caller reports.
pub fn llm_error(e: LlmError) -> crate::Error {
    if e.kind == ErrorKind::Cancelled {
        return crate::Error::new(crate::ErrorCode::ChatTurnSuperseded, "the turn was cancelled");
    }
    e.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_turn_carries_what_the_model_reads_in_time_within_its_context_share() {
        let cap = LOCAL_SOURCE_TOKENS;
        // a hosted model (no window, no speed): the fixed cap
        assert_eq!(local_source_tokens(None, None), (cap, cap));
        // a fast reader: the cap; a small context: an eighth of it
        assert_eq!(local_source_tokens(Some(4096), Some(1000)), (cap, cap));
        assert_eq!(local_source_tokens(Some(800), Some(1000)), (100, 100));
        // a slow one (a busy machine): more than the best sentences only as far as it reads in time
        assert_eq!(local_source_tokens(Some(4096), Some(120)), (cap, 120 - LOCAL_OTHER_TOKENS));
        // never less than a sentence's worth
        assert_eq!(local_source_tokens(Some(4096), Some(10)), (cap, LOCAL_MIN_SOURCE_TOKENS));
    }
}
