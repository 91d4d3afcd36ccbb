//! Retrieval defaults (read-only): the system defaults a retrieval-only call and a new agent's
//! `retrieval.answer` skill start from, plus metadata field suggestions for metadata rules.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use crate::app::App;
use crate::auth::{Perm, Principal};
use crate::error::Result;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetrievalDefaults {
    pub query_rewrite_enabled: bool,
    pub semantic_rewrite_instructions: String,
    pub lexical_rewrite_instructions: String,
    pub rerank_enabled: bool,
    pub vector_top_k: u32,
    pub rerank_top_k: u32,
    pub similarity_threshold: f32,
    pub retrieval_strategy: String,
    pub metadata_rules: Vec<Value>,
    pub custom_instruction: String,
    pub temporal_structured_lookup_enabled: bool,
    pub temporal_boost_upcoming_enabled: bool,
    pub temporal_deterministic_sort_enabled: bool,
}

impl Default for RetrievalDefaults {
    fn default() -> Self {
        RetrievalDefaults {
            query_rewrite_enabled: true,
            semantic_rewrite_instructions: String::new(),
            lexical_rewrite_instructions: String::new(),
            // the spec: reranking is off by default
            rerank_enabled: false,
            vector_top_k: 15,
            rerank_top_k: 5,
            similarity_threshold: 0.2,
            retrieval_strategy: "fixed".into(),
            metadata_rules: vec![],
            custom_instruction: String::new(),
            temporal_structured_lookup_enabled: true,
            temporal_boost_upcoming_enabled: true,
            temporal_deterministic_sort_enabled: true,
        }
    }
}

/// Keys seen on this workspace's document metadata, with the type their values suggest.
fn observed_keys(c: &rusqlite::Connection, ws: &str) -> Result<BTreeMap<String, String>> {
    let mut st = c.prepare(
        "SELECT j.key, j.type, min(j.atom) FROM documents d, json_each(d.metadata) j
         WHERE d.workspace_id = ?1 AND d.status = 'ready'
         GROUP BY j.key, j.type LIMIT 500",
    )?;
    let rows = st.query_map([ws], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, Option<rusqlite::types::Value>>(2)?))
    })?;
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for row in rows {
        let (key, ty, sample) = row?;
        let vt = match ty.as_str() {
            "integer" | "real" => "number",
            "true" | "false" => "boolean",
            "text" => match sample {
                Some(rusqlite::types::Value::Text(s)) if crate::search::filter::parse_date(&s).is_some() => "date",
                _ => "string",
            },
            _ => continue, // objects, arrays, null
        };
        // a key seen with several types is a string
        out.entry(key)
            .and_modify(|t| {
                if t != vt {
                    *t = "string".into()
                }
            })
            .or_insert_with(|| vt.to_string());
    }
    Ok(out)
}

/// `GET /settings/retrieval-defaults`.
pub fn get(app: &App, p: &Principal) -> Result<Value> {
    p.require(Perm::SettingsRead)?;
    let (catalog, observed) = app.db.read(|c| {
        let s = super::document_types::load(c, &p.workspace_id)?;
        Ok((super::document_types::declared_fields(&s), observed_keys(c, &p.workspace_id.0)?))
    })?;
    let mut suggestions: BTreeMap<String, (String, &str)> = BTreeMap::new();
    for (k, t) in observed {
        suggestions.insert(k, (t, "observed"));
    }
    for (k, t) in catalog {
        // a declared field wins the value type
        suggestions.insert(k, (t, "catalog"));
    }
    let mut v = serde_json::to_value(RetrievalDefaults::default())?;
    v["metadataFieldSuggestions"] = json!(
        suggestions
            .into_iter()
            .map(|(k, (t, src))| json!({"key": k, "valueType": t, "source": src}))
            .collect::<Vec<_>>()
    );
    Ok(v)
}
