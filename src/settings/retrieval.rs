//! Retrieval defaults (read-only): the system defaults a retrieval-only call and a new agent's
//! `retrieval.answer` skill start from, plus metadata field suggestions for metadata rules.

use std::collections::BTreeMap;

use crate::app::App;
use crate::auth::{Perm, Principal};
use crate::error::Result;

/// The defaults record. Its JSON shape is also the `retrieval.answer` skill's stored
/// configuration, so it is defined with the wire shapes.
pub use super::api::RetrievalDefaults;

/// Where a metadata field suggestion comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuggestionSource {
    /// Seen on the workspace's ready documents.
    Observed,
    /// Declared by the document type catalog.
    Catalog,
}

impl SuggestionSource {
    pub const fn as_str(self) -> &'static str {
        match self {
            SuggestionSource::Observed => "observed",
            SuggestionSource::Catalog => "catalog",
        }
    }
}

/// A metadata key a metadata rule may name, with the type of its values.
#[derive(Debug, Clone)]
pub struct FieldSuggestion {
    pub key: String,
    pub value_type: String,
    pub source: SuggestionSource,
}

/// What `GET /settings/retrieval-defaults` reports.
#[derive(Debug, Clone)]
pub struct DefaultsView {
    pub defaults: RetrievalDefaults,
    /// By key.
    pub metadata_field_suggestions: Vec<FieldSuggestion>,
}

/// Keys seen on this workspace's document metadata, with the type their values suggest.
fn observed_keys(c: &crate::storage::Conn, ws: &str) -> Result<BTreeMap<String, String>> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for (key, ty, sample) in super::store::metadata_keys(c, ws)? {
        let vt = match ty.as_str() {
            "integer" | "real" => "number",
            "true" | "false" => "boolean",
            "text" => match sample {
                Some(s) if crate::search::filter::parse_date(&s).is_some() => "date",
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
pub fn get(app: &App, p: &Principal) -> Result<DefaultsView> {
    p.require(Perm::SettingsRead)?;
    let (catalog, observed) = app.db.read(|c| {
        let s = super::document_types::load(c, &p.workspace_id)?;
        Ok((super::document_types::declared_fields(&s), observed_keys(c, &p.workspace_id.0)?))
    })?;
    let mut suggestions: BTreeMap<String, (String, SuggestionSource)> = BTreeMap::new();
    for (k, t) in observed {
        suggestions.insert(k, (t, SuggestionSource::Observed));
    }
    for (k, t) in catalog {
        // a declared field wins the value type
        suggestions.insert(k, (t, SuggestionSource::Catalog));
    }
    Ok(DefaultsView {
        defaults: RetrievalDefaults::default(),
        metadata_field_suggestions: suggestions
            .into_iter()
            .map(|(key, (value_type, source))| FieldSuggestion { key, value_type, source })
            .collect(),
    })
}
