//! The Cranfield collection: 1,400 aerodynamics abstracts, 225 queries, graded judgments; or any
//! BEIR-shaped collection (such as NFCorpus) with its string ids numbered in file order, for the
//! benchmarks written against Cranfield's numeric ids.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
pub struct Doc {
    pub id: u32,
    pub title: String,
    #[serde(default)]
    pub author: String,
    pub body: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Query {
    pub id: u32,
    pub text: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Qrel {
    query_id: u32,
    doc_id: u32,
    relevance: u32,
}

pub struct Collection {
    pub docs: Vec<Doc>,
    pub queries: Vec<Query>,
    /// query id → (doc id → graded relevance 1–4)
    pub qrels: HashMap<u32, HashMap<u32, u32>>,
}

impl Collection {
    pub fn load(dir: &Path) -> anyhow::Result<Collection> {
        if !dir.join("cranfield-docs.json").exists() {
            return Ok(Collection::numbered(&super::collection::Collection::load(dir)?));
        }
        let read = |name: &str| -> anyhow::Result<String> {
            std::fs::read_to_string(dir.join(name))
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", dir.join(name).display()))
        };
        let docs: Vec<Doc> = serde_json::from_str(&read("cranfield-docs.json")?)?;
        let queries: Vec<Query> = serde_json::from_str(&read("cranfield-queries.json")?)?;
        let rels: Vec<Qrel> = serde_json::from_str(&read("cranfield-qrels.json")?)?;
        let mut qrels: HashMap<u32, HashMap<u32, u32>> = HashMap::new();
        for r in rels {
            qrels.entry(r.query_id).or_default().insert(r.doc_id, r.relevance);
        }
        Ok(Collection { docs, queries, qrels })
    }
}

impl Collection {
    /// `c` with its documents and queries numbered from 1 in file order (judgments follow them).
    pub fn numbered(c: &super::collection::Collection) -> Collection {
        let doc_ids: HashMap<&str, u32> = c.docs.iter().zip(1..).map(|(d, n)| (d.id.as_str(), n)).collect();
        let docs = c
            .docs
            .iter()
            .zip(1..)
            .map(|(d, id)| Doc { id, title: d.title.clone(), author: String::new(), body: d.text.clone() })
            .collect();
        let queries: Vec<Query> = c.queries.iter().zip(1..).map(|(q, id)| Query { id, text: q.text.clone() }).collect();
        let mut qrels: HashMap<u32, HashMap<u32, u32>> = HashMap::new();
        for (q, id) in c.queries.iter().zip(1..) {
            for (d, rel) in c.qrels.get(&q.id).into_iter().flatten() {
                if let Some(&doc) = doc_ids.get(d.as_str()) {
                    qrels.entry(id).or_default().insert(doc, *rel);
                }
            }
        }
        Collection { docs, queries, qrels }
    }
}

/// nDCG@k with graded gains (2^rel − 1) over a ranked list of document ids.
pub fn ndcg_at(ranked: &[u32], judged: &HashMap<u32, u32>, k: usize) -> f64 {
    let gain = |rel: u32| (2f64.powi(rel as i32)) - 1.0;
    let dcg: f64 = ranked
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, d)| gain(*judged.get(d).unwrap_or(&0)) / ((i + 2) as f64).log2())
        .sum();
    let mut ideal: Vec<u32> = judged.values().copied().collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal.iter().take(k).enumerate().map(|(i, r)| gain(*r) / ((i + 2) as f64).log2()).sum();
    if idcg == 0.0 { 0.0 } else { dcg / idcg }
}

/// Share of the judged documents found in the first `k`.
pub fn recall_at(ranked: &[u32], judged: &HashMap<u32, u32>, k: usize) -> f64 {
    if judged.is_empty() {
        return 0.0;
    }
    let found = ranked.iter().take(k).filter(|d| judged.contains_key(d)).count();
    found as f64 / judged.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_beir_collection_is_numbered_in_file_order() {
        let dir = tempfile::tempdir().unwrap();
        let write = |n: &str, v: serde_json::Value| std::fs::write(dir.path().join(n), v.to_string()).unwrap();
        write(
            "docs.json",
            serde_json::json!([{"id": "MED-1", "title": "Statins", "text": "Statins lower cholesterol."},
                               {"id": "MED-2", "title": "Fibre", "text": "Fibre helps digestion."}]),
        );
        write("queries.json", serde_json::json!([{"id": "PLAIN-9", "text": "do statins work"}]));
        write("qrels.json", serde_json::json!([{"queryId": "PLAIN-9", "docId": "MED-2", "rel": 2}]));
        let c = Collection::load(dir.path()).unwrap();
        assert_eq!(c.docs.iter().map(|d| (d.id, d.title.as_str())).collect::<Vec<_>>(), [(1, "Statins"), (2, "Fibre")]);
        assert_eq!(c.docs[1].body, "Fibre helps digestion.");
        assert_eq!(c.queries[0].id, 1);
        assert_eq!(c.qrels[&1][&2], 2);
    }

    #[test]
    fn ndcg_of_the_ideal_ranking_is_one() {
        let judged: HashMap<u32, u32> = [(1, 3), (2, 1), (3, 2)].into_iter().collect();
        assert!((ndcg_at(&[1, 3, 2], &judged, 10) - 1.0).abs() < 1e-9);
        assert!(ndcg_at(&[2, 3, 1], &judged, 10) < 1.0);
        assert_eq!(ndcg_at(&[9, 8], &judged, 10), 0.0);
        assert!((recall_at(&[1, 9, 3], &judged, 2) - 1.0 / 3.0).abs() < 1e-9);
    }
}
