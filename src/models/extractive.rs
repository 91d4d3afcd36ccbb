//! The built-in offline answerer: no model, no network. It picks the sentences of the retrieved
//! passages that cover the question best, keeps them in reading order, cites each, and says
//! plainly when the passages do not cover the question. Deterministic and fast; it is what a
//! fresh install answers with until a chat model is configured.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use tantivy::tokenizer::{Language, LowerCaser, SimpleTokenizer, Stemmer, TextAnalyzer};

/// The provider id reported for answers composed this way.
pub const PROVIDER: &str = "builtin";
pub const MODEL: &str = "extractive-v1";

/// Most sentences in an answer, and most characters.
const MAX_SENTENCES: usize = 3;
const MAX_CHARS: usize = 700;
/// The share of the question's weight one sentence (or the answer as a whole) must cover.
const SENTENCE_COVERAGE: f32 = 0.5;
const ANSWER_COVERAGE: f32 = 0.6;

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

fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default()).filter(LowerCaser).filter(Stemmer::new(Language::English)).build()
}

fn terms(a: &mut TextAnalyzer, text: &str, stop: bool) -> Vec<String> {
    let mut out = Vec::new();
    {
        let mut s = a.token_stream(text);
        while let Some(t) = s.next() {
            out.push(t.text.clone());
        }
    }
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
            let s = text[start..e].trim();
            if s.chars().filter(|c| c.is_alphanumeric()).count() >= 12 {
                out.push((start, s));
            }
            start = e.min(text.len());
        }
        i += 1;
    }
    let s = text[start..].trim();
    if s.chars().filter(|c| c.is_alphanumeric()).count() >= 12 {
        out.push((start, s));
    }
    out
}

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let cut: String = s.chars().take(max).collect();
    let at = cut.rfind(' ').unwrap_or(cut.len());
    format!("{}…", cut[..at].trim_end())
}

/// Composes an answer to `question` from `passages` (best first).
pub fn compose(question: &str, passages: &[Passage]) -> Composed {
    let mut a = analyzer();
    let q: Vec<String> = {
        let mut seen = HashSet::new();
        terms(&mut a, question, true).into_iter().filter(|t| seen.insert(t.clone())).collect()
    };
    let not_covered =
        || Composed { text: NOT_COVERED.into(), segments: vec![], citations: vec![], covered: false, coverage: 0.0 };
    if q.is_empty() || passages.is_empty() {
        return not_covered();
    }
    struct Cand<'a> {
        passage: usize,
        offset: usize,
        text: &'a str,
        terms: HashSet<String>,
    }
    let mut cands: Vec<Cand> = Vec::new();
    for (pi, p) in passages.iter().enumerate() {
        for (offset, s) in sentences(&p.content) {
            let t: HashSet<String> = terms(&mut a, s, false).into_iter().collect();
            cands.push(Cand { passage: pi, offset, text: s, terms: t });
        }
    }
    if cands.is_empty() {
        return not_covered();
    }
    // term weights: rarer among the candidate sentences = more telling
    let n = cands.len() as f32;
    let weight: HashMap<&str, f32> = q
        .iter()
        .map(|t| {
            let df = cands.iter().filter(|c| c.terms.contains(t)).count() as f32;
            (t.as_str(), (1.0 + n / (df + 1.0)).ln())
        })
        .collect();
    let total: f32 = weight.values().sum::<f32>().max(f32::EPSILON);
    let cover = |ts: &HashSet<String>| -> f32 {
        q.iter().filter(|t| ts.contains(*t)).map(|t| weight[t.as_str()]).sum::<f32>() / total
    };
    let mut scored: Vec<(f32, f32, usize)> = cands
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let cov = cover(&c.terms);
            let rank_prior = 1.0 / (1.0 + 0.15 * c.passage as f32);
            let length_penalty = if c.text.len() > 400 { 0.85 } else { 1.0 };
            (cov * rank_prior * length_penalty, cov, i)
        })
        .collect();
    scored.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.2.cmp(&y.2)));
    let best_cov = scored[0].1;
    let mut chosen: Vec<usize> = Vec::new();
    let mut union: HashSet<String> = HashSet::new();
    let mut chars = 0;
    for &(score, cov, i) in &scored {
        if chosen.len() >= MAX_SENTENCES || score <= 0.0 || cov < best_cov * 0.5 {
            break;
        }
        let c = &cands[i];
        let redundant = chosen.iter().any(|&j| {
            let o = &cands[j].terms;
            let inter = o.intersection(&c.terms).count() as f32;
            inter / (o.len().max(c.terms.len()).max(1) as f32) > 0.7
        });
        if redundant || (chars > 0 && chars + c.text.len() > MAX_CHARS) {
            continue;
        }
        // a later sentence must add something the question asked about
        let adds = q.iter().any(|t| c.terms.contains(t) && !union.contains(t));
        if !chosen.is_empty() && !adds {
            continue;
        }
        union.extend(c.terms.iter().filter(|t| q.contains(t)).cloned());
        chars += c.text.len();
        chosen.push(i);
    }
    let union_cov = cover(&union);
    if best_cov < SENTENCE_COVERAGE && union_cov < ANSWER_COVERAGE {
        return not_covered();
    }
    chosen.sort_by_key(|&i| (cands[i].passage, cands[i].offset));
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
                });
                citations.len() - 1
            }
        };
        segments.push(Segment { text: clip(c.text, 450), citation_indices: vec![idx] });
    }
    let text = segments.iter().map(|s| s.text.as_str()).collect::<Vec<_>>().join(" ");
    Composed { text, segments, citations, covered: true, coverage: union_cov.min(1.0) }
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
