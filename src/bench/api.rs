//! The report shapes the benchmarks write (JSON files and stdout lines read by people and by
//! `docs/performance.md`): camelCase, like every other wire shape of Steward.

/// Quality of one way of ranking, over all judged queries and over the odd and even halves (a
/// choice fitted to one half shows as a gap).
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Quality {
    pub ndcg10: f64,
    pub ndcg10_odd: f64,
    pub ndcg10_even: f64,
    pub recall100: f64,
    pub mrr10: f64,
    pub queries: usize,
}

/// A mode's figures.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModeFigures {
    pub mode: String,
    #[serde(flatten)]
    pub quality: Quality,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub server_p50_ms: f64,
    pub server_p95_ms: f64,
    #[serde(skip)]
    pub per_query: Vec<f64>,
}
