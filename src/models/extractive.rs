//! The built-in offline answerer: no model, no network. It picks the sentences of the retrieved
//! passages that cover the question best, keeps them in reading order, cites each, and says
//! plainly when the passages do not cover the question. Deterministic and fast; it is what a
//! fresh install answers with until a chat model is configured.

use std::collections::{HashMap, HashSet};

use crate::search::text::Terms;
use serde::Serialize;

/// The provider id reported for answers composed this way.
pub const PROVIDER: &str = "builtin";
pub const MODEL: &str = "extractive-v1";

/// Most sentences in an answer, and most characters.
const MAX_SENTENCES: usize = 4;
const MAX_CHARS: usize = 700;
/// How the answerer chooses: what share of the question's weight one sentence (or the answer as
/// a whole) must cover for the passages to count as answering it, and how much a passage's
/// retrieval rank weighs against a sentence's own term coverage.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    pub sentence_coverage: f32,
    pub answer_coverage: f32,
    /// A sentence of the passage at rank r (0-based) scores `coverage / (1 + rank_decay * r)`.
    pub rank_decay: f32,
    /// Most sentences in one answer, and most from any one passage.
    pub max_sentences: usize,
    pub per_passage: usize,
    /// Most characters in one answer.
    pub max_chars: usize,
    /// A further sentence must cover at least this share of the best sentence's coverage.
    pub min_relative: f32,
    /// A further sentence must add a question term the answer does not have yet: always when
    /// true; when false, only a sentence from a passage the answer already quotes (another
    /// source is worth citing on its own).
    pub require_new_terms: bool,
}

impl Default for Params {
    fn default() -> Self {
        // chosen with `steward bench tune` (TUNE_ANSWER=1) on Cranfield: the passages retrieval
        // ranks first are more often relevant than the sentence with the most question terms, so
        // an answer quotes several of them rather than several sentences of one
        Params {
            sentence_coverage: 0.2,
            answer_coverage: 0.3,
            rank_decay: 0.15,
            max_sentences: MAX_SENTENCES,
            per_passage: 2,
            max_chars: MAX_CHARS,
            min_relative: 0.25,
            require_new_terms: false,
        }
    }
}

pub const NOT_COVERED: &str = "I couldn't find an answer to that in the available documents.";

const STOP_WORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "by", "can", "could", "did", "do", "does", "for", "from",
    "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "our",
    "please", "should", "so", "tell", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this",
    "those", "to", "us", "was", "we", "were", "what", "when", "where", "which", "who", "whom", "why", "will", "with",
    "would", "you", "your", "know", "explain", "give", "any", "some", "many", "much",
];

/// One retrieved passage, best first.
#[derive(Debug, Clone)]
pub struct Passage {
    pub document_id: String,
    pub chunk_id: String,
    pub title: String,
    pub content: String,
    /// Where the reader can check it (a crawled page's address).
    pub url: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Segment {
    pub text: String,
    /// Indexes into `Composed::citations`.
    pub citation_indices: Vec<usize>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Citation {
    pub document_id: String,
    pub chunk_id: String,
    pub title: String,
    /// The page a crawled document came from (its `sourceUrl`), for a link.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Composed {
    pub text: String,
    pub segments: Vec<Segment>,
    pub citations: Vec<Citation>,
    /// Whether the passages answer the question.
    pub covered: bool,
    /// The share of the question's weight the chosen sentences cover (0–1).
    pub coverage: f32,
}

fn analyzer() -> Terms {
    Terms::default()
}

fn terms(a: &mut Terms, text: &str, stop: bool) -> Vec<String> {
    let mut out = a.of(text);
    if stop {
        let stops: HashSet<String> = STOP_WORDS.iter().flat_map(|w| terms(a, w, false)).collect();
        out.retain(|t| !stops.contains(t));
    }
    out
}

/// Splits text into sentences at `.`, `!`, `?` followed by a space, and at line breaks.
pub fn sentences(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let end = if b == b'\n' {
            Some(i)
        } else if matches!(b, b'.' | b'!' | b'?') && bytes.get(i + 1).is_none_or(|n| n.is_ascii_whitespace()) {
            Some(i + 1)
        } else {
            None
        };
        if let Some(e) = end {
            push_sentence(&mut out, text, start, e);
            start = e.min(text.len());
        }
        i += 1;
    }
    push_sentence(&mut out, text, start, text.len());
    out
}

/// Adds `text[start..end]`, trimmed, with the offset where the trimmed sentence starts, when it
/// has enough letters to be a sentence.
fn push_sentence<'a>(out: &mut Vec<(usize, &'a str)>, text: &'a str, start: usize, end: usize) {
    let raw = &text[start..end];
    let s = raw.trim();
    if s.chars().filter(|c| c.is_alphanumeric()).count() >= 12 {
        out.push((start + (raw.len() - raw.trim_start().len()), s));
    }
}

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let cut: String = s.chars().take(max).collect();
    let at = cut.rfind(' ').unwrap_or(cut.len());
    format!("{}…", cut[..at].trim_end())
}

/// The passage (index) that holds most of `claim`'s content terms, if one holds at least half of
/// them; earlier passages win ties. A claim of fewer than three content terms is not attributed.
pub fn attribute(claim: &str, passages: &[Passage]) -> Option<usize> {
    let mut a = analyzer();
    let claim: HashSet<String> = terms(&mut a, claim, true).into_iter().collect();
    if claim.len() < 3 {
        return None;
    }
    let mut best: Option<(usize, usize)> = None;
    for (i, p) in passages.iter().enumerate() {
        let have: HashSet<String> = terms(&mut a, &p.content, false).into_iter().collect();
        let n = claim.iter().filter(|t| have.contains(*t)).count();
        if best.is_none_or(|(_, m)| n > m) {
            best = Some((i, n));
        }
    }
    best.filter(|&(_, n)| n * 2 >= claim.len()).map(|(i, _)| i)
}

/// Composes an answer to `question` from `passages` (best first).
pub fn compose(question: &str, passages: &[Passage]) -> Composed {
    compose_with(question, passages, &Params::default())
}

/// [`compose`] with explicit parameters (the benchmark sweeps them).
pub fn compose_with(question: &str, passages: &[Passage], params: &Params) -> Composed {
    let mut a = analyzer();
    let q = question_terms(&mut a, question);
    if q.is_empty() || passages.is_empty() {
        return not_covered();
    }
    let cands = candidates(&mut a, passages);
    if cands.is_empty() {
        return not_covered();
    }
    let w = Weights::of(&q, &cands);
    let scored = score(&cands, &w, params);
    let best_cov = scored[0].1;
    let (mut chosen, union) = choose(&cands, &scored, &q, params);
    let union_cov = w.cover(&union);
    if best_cov < params.sentence_coverage && union_cov < params.answer_coverage {
        return not_covered();
    }
    chosen.sort_by_key(|&i| (cands[i].passage, cands[i].offset));
    let (citations, segments) = cite(&cands, chosen, passages);
    let text = segments.iter().map(|s| s.text.as_str()).collect::<Vec<_>>().join(" ");
    Composed { text, segments, citations, covered: true, coverage: union_cov.min(1.0) }
}

/// The sentences of `passages` (best first) that bear on `question`, given back per passage in
/// reading order: what a small model needs to read to answer. First each passage's best sentence
/// (so every passage that bears on the question is seen) within `cap` bytes, then, best first,
/// only sentences that bring a question term the chosen ones lack, while all fits in `more` bytes
/// (at most `cap`). A long sentence is cut to the words around its question terms: [`WINDOW_WORDS`]
/// when `more` has room for that many per passage, fewer (down to [`MIN_WINDOW_WORDS`]) when it has
/// not; a passage's title (and numbering) counts with its first sentence unless the sentence says
/// it. A passage with no such sentence is `None`.
pub fn relevant(question: &str, passages: &[Passage], cap: usize, more: usize) -> Vec<Option<String>> {
    let mut out = vec![None; passages.len()];
    let mut a = analyzer();
    let q = question_terms(&mut a, question);
    let cands = candidates(&mut a, passages);
    if q.is_empty() || cands.is_empty() {
        return out;
    }
    let w = Weights::of(&q, &cands);
    let scored: Vec<(f32, f32, usize)> =
        score(&cands, &w, &Params::default()).into_iter().filter(|&(_, cov, _)| cov > 0.0).collect();
    // the words each passage's sentence may keep: what the budget leaves after the titles
    let titles: usize = passages.iter().map(|p| short_title(&p.title).len() + 6).sum();
    let room = more.min(cap).saturating_sub(titles);
    let words = (room / passages.len() / BYTES_PER_WORD).clamp(MIN_WINDOW_WORDS, WINDOW_WORDS);
    let mut pick =
        Picked { chosen: Vec::new(), seen: vec![false; passages.len()], covered: HashSet::new(), used: 0, words };
    for pi in 0..passages.len() {
        if let Some(&(_, _, i)) = scored.iter().find(|&&(_, _, i)| cands[i].passage == pi) {
            pick.take(&mut a, i, &cands, passages, &q, cap);
        }
    }
    for &(_, _, i) in &scored {
        let adds = q.iter().any(|t| cands[i].terms.contains(t) && !pick.covered.contains(t.as_str()));
        if adds && !pick.chosen.iter().any(|(c, _)| *c == i) {
            pick.take(&mut a, i, &cands, passages, &q, more.min(cap));
        }
    }
    let mut chosen = pick.chosen;
    chosen.sort_by_key(|(i, _)| (cands[*i].passage, cands[*i].offset));
    for (i, text) in chosen {
        let slot: &mut Option<String> = &mut out[cands[i].passage];
        match slot {
            Some(t) => {
                t.push(' ');
                t.push_str(&text);
            }
            None => *slot = Some(text),
        }
    }
    out
}

/// Whether a passage's piece `text` already says its `title` (or all of the title says it): many
/// documents open by repeating their title, and a small model's prompt need not carry it twice.
pub fn title_repeated(title: &str, text: &str) -> bool {
    let (t, x) = (plain_words(title), plain_words(text));
    // whole words only: "art" is not said by "artists", nor "30 days" by "130 days"
    let (t, x) = (format!(" {t} "), format!(" {x} "));
    !t.trim().is_empty() && !x.trim().is_empty() && (x.starts_with(&t) || t.contains(&x))
}

/// A text's words, lower case, without the punctuation around them and without citation markers
/// (`[2]`), joined by single spaces: what two texts are compared by when their wording is what
/// matters, not their form.
pub fn plain_words(text: &str) -> String {
    let words: Vec<String> = text
        .split_whitespace()
        .filter(|w| !(w.starts_with('[') && w.trim_end_matches(['.', ',']).ends_with(']')))
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase())
        .filter(|w| !w.is_empty())
        .collect();
    words.join(" ")
}

/// A passage's title as a small model is given it: at most [`TITLE_WORDS`] words, marked `…` where
/// it was cut.
pub fn short_title(title: &str) -> String {
    let words: Vec<&str> = title.split_whitespace().collect();
    if words.len() <= TITLE_WORDS {
        return words.join(" ");
    }
    format!("{} …", words[..TITLE_WORDS].join(" "))
}

/// The most words of a title a small model is given (a long title costs reading time and says
/// less about the question than the passage's own sentence).
pub const TITLE_WORDS: usize = 10;

/// The most words of one sentence a small model is given.
pub const WINDOW_WORDS: usize = 20;
/// The fewest words of one sentence a small model is given (when it has little time to read).
pub const MIN_WINDOW_WORDS: usize = 12;
/// Bytes a word takes in a prompt, its space included (English prose averages a little over 6).
const BYTES_PER_WORD: usize = 7;

/// `sentence` cut to the `max` words holding most of the question's terms (the earliest such
/// window), marked `…` where it was cut.
fn window(a: &mut Terms, sentence: &str, q: &[String], max: usize) -> String {
    let words: Vec<&str> = sentence.split_whitespace().collect();
    if words.len() <= max {
        return words.join(" ");
    }
    let hit: Vec<usize> = words.iter().map(|w| usize::from(terms(a, w, false).iter().any(|t| q.contains(t)))).collect();
    let mut counts = vec![hit[..max].iter().sum::<usize>()];
    for start in 1..=words.len() - max {
        counts.push(counts[start - 1] + hit[start + max - 1] - hit[start - 1]);
    }
    // the middle of the first run of windows holding the most: the terms centred in it
    let most = counts.iter().copied().max().unwrap_or(0);
    let first = counts.iter().position(|&n| n == most).unwrap_or(0);
    let run = counts[first..].iter().take_while(|&&n| n == most).count();
    let start = first + (run - 1) / 2;
    let end = start + max;
    let mut out = String::new();
    if start > 0 {
        out.push_str("… ");
    }
    out.push_str(&words[start..end].join(" "));
    if end < words.len() {
        out.push_str(" …");
    }
    out
}

/// The sentences [`relevant`] has chosen so far (as cut), the passages they come from, the
/// question terms they cover and the bytes they take.
struct Picked<'q> {
    chosen: Vec<(usize, String)>,
    seen: Vec<bool>,
    covered: HashSet<&'q str>,
    used: usize,
    /// The most words a chosen sentence keeps.
    words: usize,
}

impl<'q> Picked<'q> {
    /// Chooses candidate `i` if it fits in `budget` with its passage's title when it is the first.
    /// A passage's first sentence that does not fit with its words is tried with the fewest
    /// ([`MIN_WINDOW_WORDS`]) before it is left out.
    fn take(&mut self, a: &mut Terms, i: usize, cands: &[Cand], passages: &[Passage], q: &'q [String], budget: usize) {
        let c = &cands[i];
        let title = &passages[c.passage].title;
        let fit = |a: &mut Terms, words: usize| {
            let text = window(a, c.text.trim(), q, words);
            let title =
                if self.seen[c.passage] || title_repeated(title, &text) { 0 } else { short_title(title).len() + 6 };
            let len = text.len() + 1 + title;
            (self.used + len <= budget).then_some((text, len))
        };
        let first = !self.seen[c.passage];
        let Some((text, len)) = fit(a, self.words).or_else(|| if first { fit(a, MIN_WINDOW_WORDS) } else { None })
        else {
            return;
        };
        self.used += len;
        self.seen[c.passage] = true;
        // what the kept words cover (a cut sentence may have lost some of its terms)
        let kept: HashSet<String> = terms(a, &text, false).into_iter().collect();
        self.covered.extend(q.iter().filter(|t| kept.contains(*t)).map(String::as_str));
        self.chosen.push((i, text));
    }
}

fn not_covered() -> Composed {
    Composed { text: NOT_COVERED.into(), segments: vec![], citations: vec![], covered: false, coverage: 0.0 }
}

/// The question's content terms, each once, in order.
fn question_terms(a: &mut Terms, question: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    terms(a, question, true).into_iter().filter(|t| seen.insert(t.clone())).collect()
}

/// A candidate sentence of a passage.
struct Cand<'a> {
    passage: usize,
    offset: usize,
    text: &'a str,
    terms: HashSet<String>,
}

/// Every sentence of every passage, with its terms.
fn candidates<'p>(a: &mut Terms, passages: &'p [Passage]) -> Vec<Cand<'p>> {
    let mut cands: Vec<Cand> = Vec::new();
    for (pi, p) in passages.iter().enumerate() {
        for (offset, s) in sentences(&p.content) {
            let t: HashSet<String> = terms(a, s, false).into_iter().collect();
            cands.push(Cand { passage: pi, offset, text: s, terms: t });
        }
    }
    cands
}

/// The question's term weights: rarer among the candidate sentences = more telling.
struct Weights<'q> {
    q: &'q [String],
    weight: HashMap<&'q str, f32>,
    total: f32,
}

impl<'q> Weights<'q> {
    fn of(q: &'q [String], cands: &[Cand]) -> Weights<'q> {
        let n = cands.len() as f32;
        let weight: HashMap<&str, f32> = q
            .iter()
            .map(|t| {
                let df = cands.iter().filter(|c| c.terms.contains(t)).count() as f32;
                (t.as_str(), (1.0 + n / (df + 1.0)).ln())
            })
            .collect();
        let total: f32 = weight.values().sum::<f32>().max(f32::EPSILON);
        Weights { q, weight, total }
    }

    /// The share of the question's weight `ts` covers.
    fn cover(&self, ts: &HashSet<String>) -> f32 {
        self.q.iter().filter(|t| ts.contains(*t)).map(|t| self.weight[t.as_str()]).sum::<f32>() / self.total
    }
}

/// (score, coverage, candidate) for every candidate, best first.
fn score(cands: &[Cand], w: &Weights, params: &Params) -> Vec<(f32, f32, usize)> {
    let mut scored: Vec<(f32, f32, usize)> = cands
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let cov = w.cover(&c.terms);
            let rank_prior = 1.0 / (1.0 + params.rank_decay * c.passage as f32);
            let length_penalty = if c.text.len() > 400 { 0.85 } else { 1.0 };
            (cov * rank_prior * length_penalty, cov, i)
        })
        .collect();
    scored.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.2.cmp(&y.2)));
    scored
}

/// The sentences chosen best first within the limits, and the question terms they cover.
fn choose(
    cands: &[Cand],
    scored: &[(f32, f32, usize)],
    q: &[String],
    params: &Params,
) -> (Vec<usize>, HashSet<String>) {
    let best_cov = scored[0].1;
    let mut chosen: Vec<usize> = Vec::new();
    let mut union: HashSet<String> = HashSet::new();
    let mut chars = 0;
    for &(score, cov, i) in scored {
        if chosen.len() >= params.max_sentences || score <= 0.0 || cov < best_cov * params.min_relative {
            break;
        }
        let c = &cands[i];
        if chosen.iter().filter(|&&j| cands[j].passage == c.passage).count() >= params.per_passage {
            continue;
        }
        let redundant = chosen.iter().any(|&j| {
            let o = &cands[j].terms;
            let inter = o.intersection(&c.terms).count() as f32;
            inter / (o.len().max(c.terms.len()).max(1) as f32) > 0.7
        });
        if redundant || (chars > 0 && chars + c.text.len() > params.max_chars) {
            continue;
        }
        // a later sentence must add something the question asked about
        let adds = q.iter().any(|t| c.terms.contains(t) && !union.contains(t));
        let same_source = chosen.iter().any(|&j| cands[j].passage == c.passage);
        if (params.require_new_terms || same_source) && !chosen.is_empty() && !adds {
            continue;
        }
        union.extend(c.terms.iter().filter(|t| q.contains(t)).cloned());
        chars += c.text.len();
        chosen.push(i);
    }
    (chosen, union)
}

/// The chosen sentences as segments, each citing its passage (one citation per chunk).
fn cite(cands: &[Cand], chosen: Vec<usize>, passages: &[Passage]) -> (Vec<Citation>, Vec<Segment>) {
    let mut citations: Vec<Citation> = Vec::new();
    let mut segments = Vec::new();
    for i in chosen {
        let c = &cands[i];
        let p = &passages[c.passage];
        let idx = match citations.iter().position(|x| x.chunk_id == p.chunk_id) {
            Some(k) => k,
            None => {
                citations.push(Citation {
                    document_id: p.document_id.clone(),
                    chunk_id: p.chunk_id.clone(),
                    title: p.title.clone(),
                    url: p.url.clone(),
                });
                citations.len() - 1
            }
        };
        segments.push(Segment { text: clip(c.text, 450), citation_indices: vec![idx] });
    }
    (citations, segments)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(id: &str, title: &str, content: &str) -> Passage {
        Passage {
            document_id: format!("d-{id}"),
            chunk_id: format!("c-{id}"),
            title: title.into(),
            content: content.into(),
            url: None,
        }
    }

    #[test]
    fn relevant_keeps_the_sentences_that_bear_on_the_question_in_reading_order() {
        let ps = vec![
            p(
                "1",
                "Wings",
                "Aircraft bodies are painted white. The cafeteria opens at noon. Wing flutter grows with speed.",
            ),
            p("2", "Menu", "Soup is served daily. Bread is baked fresh."),
            p("3", "Flutter", "Flutter of a wing is an aeroelastic instability."),
        ];
        let r = relevant("What causes wing flutter?", &ps, 10_000, 10_000);
        assert_eq!(r[0].as_deref(), Some("Wing flutter grows with speed."));
        assert_eq!(r[1], None, "nothing in the menu bears on the question");
        assert_eq!(r[2].as_deref(), Some("Flutter of a wing is an aeroelastic instability."));
        // a tight budget keeps the first passage's best sentence only (its title counted)
        let tight = relevant("What causes wing flutter?", &ps, 45, 45);
        assert_eq!(tight.iter().flatten().count(), 1);
        assert_eq!(tight[0].as_deref(), Some("Wing flutter grows with speed."));
        assert!(
            relevant("What causes wing flutter?", &ps, 35, 35).iter().all(Option::is_none),
            "no room with the title"
        );
        assert!(relevant("the of and", &ps, 10_000, 10_000).iter().all(Option::is_none));
    }

    #[test]
    fn a_long_title_is_cut_to_its_first_words() {
        assert_eq!(short_title("Shipping  policy"), "Shipping policy");
        let long = "a one-foot hypervelocity shock tunnel in which high-enthalpy real gas flows can be generated";
        assert_eq!(short_title(long), "a one-foot hypervelocity shock tunnel in which high-enthalpy real gas …");
        assert_eq!(short_title(""), "");
    }

    #[test]
    fn a_title_the_text_already_says_is_recognised() {
        let t = "conduction of heat in composite slabs .";
        assert!(title_repeated(t, "conduction of heat in composite slabs ."));
        assert!(title_repeated(t, "Conduction of heat in composite slabs: the linear case is solved."));
        assert!(title_repeated(t, "composite slabs"), "the title says all the text does");
        assert!(!title_repeated(t, "… solutions are presented for the transient heat conduction in composite slabs …"));
        assert!(!title_repeated("", "anything"));
        assert!(!title_repeated(t, " . "));
        assert!(!title_repeated("Art", "Artists may apply for a stall."), "whole words");
        assert!(!title_repeated("Refunds within 130 days", "30 days."), "whole words");
        assert!(title_repeated("Refunds within 30 days", "30 days."));
    }

    #[test]
    fn relevant_adds_sentences_only_for_question_terms_still_missing() {
        let ps = vec![p(
            "1",
            "Gliders",
            "Glider wings are long. Glider wings are light. Wings are long on gliders too. Gliders land on skids.",
        )];
        // the first sentence covers "glider" and "wing"; the others repeat them, except the last
        // one, which brings "land"
        let r = relevant("How do glider wings land?", &ps, 10_000, 10_000);
        assert_eq!(r[0].as_deref(), Some("Glider wings are long. Gliders land on skids."));
        // with no room for more, the best sentence only
        let r = relevant("How do glider wings land?", &ps, 10_000, 20);
        assert_eq!(r[0].as_deref(), Some("Gliders land on skids."));
    }

    #[test]
    fn a_long_sentence_keeps_fewer_words_when_there_is_little_time_to_read() {
        let long = "In the tests the glider wings of the new design were long and thin and light and they \
                    flexed in the gusts near the ridge while the crew watched from the hill below.";
        let ps = vec![p("1", "Gliders", long), p("2", "Ridges", long)];
        let words = |r: &[Option<String>]| r[0].as_deref().unwrap().split_whitespace().filter(|w| *w != "…").count();
        let roomy = relevant("How do glider wings flex?", &ps, 10_000, 10_000);
        assert_eq!(words(&roomy), WINDOW_WORDS);
        let hurried = relevant("How do glider wings flex?", &ps, 10_000, 120);
        assert_eq!(words(&hurried), MIN_WINDOW_WORDS);
        assert!(hurried[0].as_deref().unwrap().contains("wings"), "the words kept are around the terms");
        let titles = ("Gliders".len() + 6) + ("Ridges".len() + 6);
        let between = relevant("How do glider wings flex?", &ps, 10_000, titles + 2 * 16 * BYTES_PER_WORD);
        assert_eq!(words(&between), 16, "room for 16 words a passage besides the titles");
    }

    #[test]
    fn every_passage_keeps_its_best_sentence_cut_shorter_when_the_cap_is_tight() {
        // words of 15 letters: twice what the budget assumes a word takes
        let long =
            format!("{} gliderwingsflex {}.", ["abcdefghijklmno"; 12].join(" "), ["abcdefghijklmno"; 17].join(" "));
        let ps: Vec<Passage> =
            (1..=4).map(|i| p(&i.to_string(), "A rather long title about gliders and ridges", &long)).collect();
        // three passages with 20-word windows (378 bytes each with the title and the cut marks)
        // and the fourth only with a 12-word one (250)
        let r = relevant("gliderwingsflex", &ps, 1400, 10_000);
        assert!(r.iter().all(Option::is_some), "a passage was left out: {r:?}");
        assert_eq!(r[3].as_deref().unwrap().split_whitespace().filter(|w| *w != "…").count(), MIN_WINDOW_WORDS);
    }

    #[test]
    fn a_term_cut_out_of_a_long_sentence_is_still_looked_for() {
        let long = "Glider wings are long and thin and made of wood and cloth and they are carried \
                    by hand to the hill by the crew and gliders land on grass.";
        let ps = vec![p("1", "Gliders", &format!("{long} Gliders land on skids."))];
        let r = relevant("How do glider wings land?", &ps, 10_000, 10_000);
        let text = r[0].as_deref().unwrap();
        assert!(text.starts_with("Glider wings are long"), "{text}");
        assert!(text.ends_with("Gliders land on skids."), "the cut sentence lost 'land': {text}");
    }

    #[test]
    fn a_long_sentence_is_cut_to_the_words_around_the_question_terms() {
        let mut a = analyzer();
        let q = question_terms(&mut a, "wing flutter");
        let s = "one two three four five six seven wing flutter eight nine ten eleven twelve";
        assert_eq!(window(&mut a, s, &q, 4), "… seven wing flutter eight …");
        assert_eq!(window(&mut a, "wing flutter grows", &q, 4), "wing flutter grows");
        assert_eq!(window(&mut a, "a b c d e wing", &q, 3), "… d e wing");
        assert_eq!(window(&mut a, "wing a b c d e", &q, 3), "wing a b …");
    }

    proptest::proptest! {
        #[test]
        fn relevant_returns_pieces_of_the_passages_within_the_budget(
            texts in proptest::collection::vec("[a-zé .!?\n]{0,80}", 0..5),
            question in "[a-zé ?]{0,30}",
            budget in 0usize..200,
            more in 0usize..200,
        ) {
            let ps: Vec<Passage> = texts.iter().enumerate().map(|(i, t)| p(&i.to_string(), "t", t)).collect();
            let r = relevant(&question, &ps, budget, more);
            proptest::prop_assert_eq!(r.len(), ps.len());
            let total: usize = r.iter().flatten().map(|t| t.len()).sum();
            proptest::prop_assert!(total <= budget);
            for (piece, passage) in r.iter().zip(&ps) {
                if let Some(piece) = piece {
                    proptest::prop_assert!(!piece.trim().is_empty());
                    for word in piece.split_whitespace().filter(|w| *w != "…") {
                        proptest::prop_assert!(passage.content.contains(word));
                    }
                }
            }
        }
    }

    #[test]
    fn answers_from_the_best_sentences_with_citations() {
        let passages = vec![
            p(
                "1",
                "Returns",
                "Our shop is open daily. Items can be returned within 30 days of delivery for a full refund. Shipping is free over 50 euros.",
            ),
            p("2", "Refunds", "Refunds are paid to the original payment method within five business days."),
        ];
        let c = compose("How many days do I have to return an item?", &passages);
        assert!(c.covered, "{c:?}");
        assert!(c.text.contains("30 days"), "{}", c.text);
        assert!(!c.text.contains("open daily"));
        assert_eq!(c.citations[0].chunk_id, "c-1");
        assert_eq!(c.segments[0].citation_indices, vec![0]);
        // deterministic
        assert_eq!(compose("How many days do I have to return an item?", &passages).text, c.text);
    }

    #[test]
    fn quotes_each_top_passage_that_speaks_to_the_question() {
        // the second and third passages repeat the first one's question terms: each is still a
        // source worth citing, so the answer quotes one sentence of each
        let passages = vec![
            p("1", "Flutter", "Panel flutter at supersonic speeds depends on the dynamic pressure."),
            p("2", "Flutter tests", "Wind tunnel tests measured panel flutter at supersonic speeds for thin plates."),
            p("3", "Theory", "Piston theory predicts panel flutter boundaries well at supersonic speeds."),
            p("4", "Unrelated", "Boundary layer transition was observed on the cone."),
        ];
        let c = compose("panel flutter at supersonic speeds", &passages);
        assert!(c.covered);
        let cited: Vec<&str> = c.citations.iter().map(|x| x.chunk_id.as_str()).collect();
        assert_eq!(cited, vec!["c-1", "c-2", "c-3"], "{c:?}");
        // with the old rule (a further sentence must add a new question term) only one is quoted
        let strict = compose_with(
            "panel flutter at supersonic speeds",
            &passages,
            &Params { require_new_terms: true, ..Params::default() },
        );
        assert_eq!(strict.citations.len(), 1);
        // at most `per_passage` sentences of one passage, and only if they add a question term
        let one = vec![p(
            "1",
            "Flutter",
            "Panel flutter depends on dynamic pressure. Panel flutter was studied again here. Supersonic speeds make it worse.",
        )];
        let c = compose("panel flutter at supersonic speeds", &one);
        assert_eq!(c.segments.len(), 2, "{c:?}");
        assert!(!c.text.contains("studied again"));
    }

    #[test]
    fn a_claim_is_attributed_to_the_passage_holding_most_of_its_terms() {
        let passages = vec![
            p("1", "Hours", "The shop opens at nine on weekdays."),
            p("2", "Returns", "Items can be returned within 30 days of delivery for a full refund."),
        ];
        assert_eq!(attribute("You can return items within 30 days for a refund.", &passages), Some(1));
        assert_eq!(attribute("The shop opens at nine.", &passages), Some(0));
        // nothing holds half of its terms, or it is too short to say
        assert_eq!(attribute("Our warehouse ships parcels to Lisbon by train.", &passages), None);
        assert_eq!(attribute("Thanks!", &passages), None);
    }

    #[test]
    fn says_so_when_the_documents_do_not_cover_it() {
        let passages = vec![p("1", "Returns", "Items can be returned within 30 days of delivery for a full refund.")];
        let c = compose("Which airline flies to Lisbon on Sundays?", &passages);
        assert!(!c.covered);
        assert_eq!(c.text, NOT_COVERED);
        assert!(c.citations.is_empty());
        assert!(!compose("", &passages).covered);
        assert!(!compose("return policy", &[]).covered);
    }

    #[test]
    fn sentences_split_on_punctuation_and_lines() {
        let s: Vec<&str> = sentences("First sentence here. Second one is here!\nThird line without stop")
            .into_iter()
            .map(|x| x.1)
            .collect();
        assert_eq!(s, vec!["First sentence here.", "Second one is here!", "Third line without stop"]);
        // decimals do not split
        assert_eq!(sentences("The rate is 3.5 percent per year.").len(), 1);
    }
}
