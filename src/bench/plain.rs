//! The plain reference a retrieval figure is compared with, computed in the benchmark's own
//! process on the same collection in the same run:
//!
//! - **BM25**: Okapi BM25 (k1 0.9, b 0.4, Lucene's idf) over `title + " " + text` of each whole
//!   document, analyzed with Steward's own document analysis (the same tokenizer, stop words and
//!   stemmer), the query analyzed the same way, each occurrence of a term counted (as Lucene's
//!   query parser and bm25s do).
//! - **Vectors**: the same embedding model as the server's, one vector per document (its title and
//!   text, truncated at the model's sequence limit), ranked by cosine.
//! - **RRF**: reciprocal rank fusion (k 60) of the two top-100 lists.
//!
//! Nothing here is tuned: it is what a plain BM25 + sentence-embedding + RRF stack does.

use std::collections::HashMap;
use std::time::Instant;

use super::collection::Collection;
use crate::models::embed::Embedder;

pub const K1: f32 = 0.9;
pub const B: f32 = 0.4;
pub const RRF_K: f32 = 60.0;
pub const DEPTH: usize = 100;

/// An in-memory Okapi BM25 index over whole documents.
pub struct Bm25 {
    postings: HashMap<String, Vec<(u32, u32)>>,
    lengths: Vec<u32>,
    avg_len: f32,
}

impl Bm25 {
    pub fn build(c: &Collection) -> Bm25 {
        let mut postings: HashMap<String, Vec<(u32, u32)>> = HashMap::new();
        let mut lengths = Vec::with_capacity(c.docs.len());
        for (i, d) in c.docs.iter().enumerate() {
            let terms = crate::search::text::document_analysis(&format!("{} {}", d.title, d.text));
            lengths.push(terms.len() as u32);
            let mut tf: HashMap<String, u32> = HashMap::new();
            for t in terms {
                *tf.entry(t).or_default() += 1;
            }
            for (t, n) in tf {
                postings.entry(t).or_default().push((i as u32, n));
            }
        }
        let avg_len = lengths.iter().map(|l| *l as f32).sum::<f32>() / lengths.len().max(1) as f32;
        Bm25 { postings, lengths, avg_len }
    }

    /// The best `k` documents (indexes into the collection) for `query`.
    pub fn search(&self, query: &str, k: usize) -> Vec<(usize, f32)> {
        let terms = crate::search::text::document_analysis(query);
        let n = self.lengths.len() as f32;
        let mut scores: HashMap<u32, f32> = HashMap::new();
        for t in &terms {
            let Some(list) = self.postings.get(t) else { continue };
            let df = list.len() as f32;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for &(d, tf) in list {
                let tf = tf as f32;
                let norm = K1 * (1.0 - B + B * self.lengths[d as usize] as f32 / self.avg_len);
                *scores.entry(d).or_default() += idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
        top(scores.into_iter().map(|(d, s)| (d as usize, s)).collect(), k)
    }
}

fn top(mut v: Vec<(usize, f32)>, k: usize) -> Vec<(usize, f32)> {
    v.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or(std::cmp::Ordering::Equal).then(a.0.cmp(&b.0)));
    v.truncate(k);
    v
}

/// One vector per document.
pub struct Dense {
    vectors: Vec<Vec<f32>>,
    pub seconds: f64,
    pub tokens: usize,
}

impl Dense {
    pub fn build(c: &Collection, embedder: &Embedder) -> anyhow::Result<Dense> {
        let started = Instant::now();
        let texts: Vec<String> = c.docs.iter().map(|d| format!("{} {}", d.title, d.text)).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let e = embedder.embed_passages(&refs).map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(Dense { vectors: e.vectors, seconds: started.elapsed().as_secs_f64(), tokens: e.tokens })
    }

    pub fn search(&self, query: &[f32], k: usize) -> Vec<(usize, f32)> {
        let scored = self
            .vectors
            .iter()
            .enumerate()
            .map(|(i, v)| (i, v.iter().zip(query).map(|(a, b)| a * b).sum::<f32>()))
            .collect();
        top(scored, k)
    }
}

/// Reciprocal rank fusion of rankings (best first).
pub fn rrf(lists: &[&[(usize, f32)]]) -> Vec<usize> {
    let mut score: HashMap<usize, f32> = HashMap::new();
    for list in lists {
        for (rank, (d, _)) in list.iter().enumerate() {
            *score.entry(*d).or_default() += 1.0 / (RRF_K + rank as f32 + 1.0);
        }
    }
    top(score.into_iter().collect(), usize::MAX).into_iter().map(|(d, _)| d).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::collection::{Doc, Query};

    #[test]
    fn bm25_prefers_the_rarer_term_and_the_shorter_document() {
        let doc = |id: &str, text: &str| Doc { id: id.into(), title: String::new(), text: text.into() };
        let c = Collection {
            name: "t".into(),
            docs: vec![
                doc("a", "supersonic wing flutter flutter"),
                doc("b", "wing lift wing drag wing body wing tail wing"),
                doc("c", "boundary layer"),
            ],
            queries: vec![Query { id: "q".into(), text: "wing flutter".into() }],
            qrels: HashMap::new(),
        };
        let idx = Bm25::build(&c);
        let r = idx.search("wing flutter", 10);
        assert_eq!(r[0].0, 0, "{r:?}");
        assert_eq!(r.len(), 2, "the document with neither term is not returned");
        let fused = rrf(&[&[(1, 1.0), (0, 0.5)], &[(0, 0.9), (2, 0.1)]]);
        assert_eq!(fused[0], 0);
    }
}
