//! A test collection in BEIR's shape, from a directory: documents `{id, title, text}`, queries
//! `{id, text}` and graded judgments `{queryId, docId, rel}` as JSON arrays. Two layouts are read:
//! `docs.json`, `queries.json`, `qrels.json` (BEIR exports such as `../shared/bench/nfcorpus`), and
//! Cranfield's `cranfield-docs.json` (`body` for `text`), `cranfield-queries.json` and
//! `cranfield-qrels.json` (`relevance` for `rel`). Ids may be strings or numbers.
//!
//! The metrics are trec_eval's (as BEIR reports them): nDCG@k with linear gains (the judgment's
//! grade), recall@k over the judged-relevant documents (grade > 0), MRR@k of the first relevant.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

pub use super::api::Quality;

#[derive(Debug, Clone)]
pub struct Doc {
    pub id: String,
    pub title: String,
    pub text: String,
}

#[derive(Debug, Clone)]
pub struct Query {
    pub id: String,
    pub text: String,
}

pub struct Collection {
    /// The directory's name (`nfcorpus`, `cranfield`).
    pub name: String,
    pub docs: Vec<Doc>,
    pub queries: Vec<Query>,
    /// query id → (doc id → grade > 0)
    pub qrels: HashMap<String, HashMap<String, u32>>,
}

fn id_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn text_of(v: &Value, keys: &[&str]) -> String {
    keys.iter().find_map(|k| v.get(*k).and_then(Value::as_str)).unwrap_or_default().to_string()
}

#[derive(Deserialize)]
struct Raw(Vec<Value>);

impl Collection {
    pub fn load(dir: &Path) -> anyhow::Result<Collection> {
        let read = |names: &[&str]| -> anyhow::Result<Vec<Value>> {
            for n in names {
                let p = dir.join(n);
                if p.exists() {
                    let s =
                        std::fs::read_to_string(&p).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?;
                    let Raw(v) = serde_json::from_str(&s).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
                    return Ok(v);
                }
            }
            anyhow::bail!("{} has none of {}", dir.display(), names.join(", "))
        };
        let docs: Vec<Doc> = read(&["docs.json", "corpus.json", "cranfield-docs.json"])?
            .iter()
            .filter_map(|d| {
                Some(Doc {
                    id: id_of(d.get("id")?)?,
                    title: text_of(d, &["title"]),
                    text: text_of(d, &["text", "body"]),
                })
            })
            .collect();
        let queries: Vec<Query> = read(&["queries.json", "cranfield-queries.json"])?
            .iter()
            .filter_map(|q| Some(Query { id: id_of(q.get("id")?)?, text: text_of(q, &["text", "query"]) }))
            .collect();
        let mut qrels: HashMap<String, HashMap<String, u32>> = HashMap::new();
        for r in read(&["qrels.json", "cranfield-qrels.json"])? {
            let (Some(q), Some(d)) = (r.get("queryId").and_then(id_of), r.get("docId").and_then(id_of)) else {
                continue;
            };
            let rel = r.get("rel").or_else(|| r.get("relevance")).and_then(Value::as_i64).unwrap_or(0);
            if rel > 0 {
                qrels.entry(q).or_default().insert(d, rel as u32);
            }
        }
        anyhow::ensure!(!docs.is_empty() && !queries.is_empty(), "{}: no documents or no queries", dir.display());
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("collection").to_string();
        Ok(Collection { name, docs, queries, qrels })
    }

    /// The queries that have judgments, in file order.
    pub fn judged_queries(&self) -> impl Iterator<Item = (usize, &Query, &HashMap<String, u32>)> {
        self.queries
            .iter()
            .filter_map(|q| self.qrels.get(&q.id).map(|j| (q, j)))
            .enumerate()
            .map(|(i, (q, j))| (i, q, j))
    }
}

/// nDCG@k with linear gains over a ranked list of document ids (trec_eval's `ndcg_cut`).
pub fn ndcg_at(ranked: &[String], judged: &HashMap<String, u32>, k: usize) -> f64 {
    let dcg: f64 = ranked
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, d)| *judged.get(d).unwrap_or(&0) as f64 / ((i + 2) as f64).log2())
        .sum();
    let mut ideal: Vec<u32> = judged.values().copied().collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal.iter().take(k).enumerate().map(|(i, r)| *r as f64 / ((i + 2) as f64).log2()).sum();
    if idcg == 0.0 { 0.0 } else { dcg / idcg }
}

/// Share of the judged-relevant documents in the first `k`.
pub fn recall_at(ranked: &[String], judged: &HashMap<String, u32>, k: usize) -> f64 {
    if judged.is_empty() {
        return 0.0;
    }
    ranked.iter().take(k).filter(|d| judged.contains_key(*d)).count() as f64 / judged.len() as f64
}

/// 1 / rank of the first relevant document in the first `k` (0 when none).
pub fn mrr_at(ranked: &[String], judged: &HashMap<String, u32>, k: usize) -> f64 {
    ranked.iter().take(k).position(|d| judged.contains_key(d)).map_or(0.0, |i| 1.0 / (i + 1) as f64)
}

/// Accumulates per-query scores into [`Quality`].
#[derive(Default)]
pub struct Scorer {
    all: Vec<f64>,
    odd: Vec<f64>,
    even: Vec<f64>,
    recall: Vec<f64>,
    mrr: Vec<f64>,
    /// Per-query nDCG@10 in order (for paired comparisons).
    pub per_query: Vec<f64>,
}

impl Scorer {
    pub fn add(&mut self, i: usize, ranked: &[String], judged: &HashMap<String, u32>) {
        let n = ndcg_at(ranked, judged, 10);
        self.all.push(n);
        self.per_query.push(n);
        if i % 2 == 1 {
            self.odd.push(n)
        } else {
            self.even.push(n)
        }
        self.recall.push(recall_at(ranked, judged, 100));
        self.mrr.push(mrr_at(ranked, judged, 10));
    }

    pub fn quality(&self) -> Quality {
        let mean = |x: &[f64]| if x.is_empty() { 0.0 } else { x.iter().sum::<f64>() / x.len() as f64 };
        // (+ 0.0: never a negative zero in a report)
        let r4 = |x: f64| (x * 10_000.0).round() / 10_000.0 + 0.0;
        Quality {
            ndcg10: r4(mean(&self.all)),
            ndcg10_odd: r4(mean(&self.odd)),
            ndcg10_even: r4(mean(&self.even)),
            recall100: r4(mean(&self.recall)),
            mrr10: r4(mean(&self.mrr)),
            queries: self.all.len(),
        }
    }
}

/// A 95 % bootstrap interval of the mean paired difference `a − b` (per-query scores in the same
/// order), with a fixed seed so a report is reproducible.
pub fn paired_interval(a: &[f64], b: &[f64]) -> (f64, f64, f64) {
    let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
    if d.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    let mean = d.iter().sum::<f64>() / d.len() as f64;
    let mut next = super::xorshift(0x2545F4914F6CDD1D);
    let mut means: Vec<f64> = (0..2000)
        .map(|_| (0..d.len()).map(|_| d[(next() % d.len() as u64) as usize]).sum::<f64>() / d.len() as f64)
        .collect();
    means.sort_by(|x, y| x.partial_cmp(y).unwrap_or(std::cmp::Ordering::Equal));
    (mean, means[50], means[1949])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(pairs: &[(&str, u32)]) -> HashMap<String, u32> {
        pairs.iter().map(|(d, r)| (d.to_string(), *r)).collect()
    }

    fn ids(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn metrics_follow_trec_eval() {
        let j = judged(&[("a", 2), ("b", 1)]);
        assert!((ndcg_at(&ids(&["a", "b"]), &j, 10) - 1.0).abs() < 1e-12);
        // b first: dcg = 1 + 2/log2(3); idcg = 2 + 1/log2(3)
        let want = (1.0 + 2.0 / 3f64.log2()) / (2.0 + 1.0 / 3f64.log2());
        assert!((ndcg_at(&ids(&["b", "a"]), &j, 10) - want).abs() < 1e-12);
        assert_eq!(ndcg_at(&ids(&["x"]), &j, 10), 0.0);
        assert_eq!(recall_at(&ids(&["x", "a"]), &j, 100), 0.5);
        assert_eq!(mrr_at(&ids(&["x", "y", "b"]), &j, 10), 1.0 / 3.0);
        assert_eq!(mrr_at(&ids(&["x"]), &j, 10), 0.0);
    }

    #[test]
    fn both_layouts_load() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("docs.json"), r#"[{"id":"D1","title":"T","text":"x"}]"#).unwrap();
        std::fs::write(dir.path().join("queries.json"), r#"[{"id":"Q1","text":"q"}]"#).unwrap();
        std::fs::write(
            dir.path().join("qrels.json"),
            r#"[{"queryId":"Q1","docId":"D1","rel":2},{"queryId":"Q1","docId":"D2","rel":0}]"#,
        )
        .unwrap();
        let c = Collection::load(dir.path()).unwrap();
        assert_eq!(c.qrels["Q1"].len(), 1, "grade 0 is not relevant");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cranfield-docs.json"), r#"[{"id":1,"title":"t","author":"a","body":"b"}]"#)
            .unwrap();
        std::fs::write(dir.path().join("cranfield-queries.json"), r#"[{"id":3,"text":"q"}]"#).unwrap();
        std::fs::write(dir.path().join("cranfield-qrels.json"), r#"[{"queryId":3,"docId":1,"relevance":4}]"#).unwrap();
        let c = Collection::load(dir.path()).unwrap();
        assert_eq!((c.docs[0].id.as_str(), c.docs[0].text.as_str()), ("1", "b"));
        assert_eq!(c.qrels["3"]["1"], 4);
    }
}
