//! Ingestion settings (`GET/PUT /api/v1/settings/ingestion`): how documents are chunked, and
//! whether they are enriched.
//!
//! Units: `fixedWindowChunkSize`/`fixedWindowChunkOverlap` are characters; the structured sizes
//! are tokens of the embedding model's tokenizer, so structured chunks are sized for the model.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

pub const NAMESPACE: &str = "ingestion";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChunkingStrategy {
    FixedWindow,
    StructuredSemantic,
    RecursiveText,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IngestionSettings {
    pub chunking_strategy: ChunkingStrategy,
    pub fixed_window_chunk_size: u32,
    pub fixed_window_chunk_overlap: u32,
    pub structured_min_chunk_size: u32,
    pub structured_max_chunk_size: u32,
    pub document_enrichment_enabled: bool,
}

impl Default for IngestionSettings {
    fn default() -> Self {
        IngestionSettings {
            chunking_strategy: ChunkingStrategy::FixedWindow,
            // about 250 tokens with the title: what the English model sees whole (its limit is
            // 256), chosen on two collections (docs/performance.md, "Retrieval")
            fixed_window_chunk_size: 1200,
            fixed_window_chunk_overlap: 150,
            structured_min_chunk_size: 24,
            structured_max_chunk_size: 220,
            document_enrichment_enabled: false,
        }
    }
}

/// A PUT body: every field optional; omitted fields keep their value.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IngestionPatch {
    pub chunking_strategy: Option<ChunkingStrategy>,
    pub fixed_window_chunk_size: Option<u32>,
    pub fixed_window_chunk_overlap: Option<u32>,
    pub structured_min_chunk_size: Option<u32>,
    pub structured_max_chunk_size: Option<u32>,
    pub document_enrichment_enabled: Option<bool>,
}

impl IngestionSettings {
    pub fn apply(&self, p: IngestionPatch) -> Result<IngestionSettings> {
        let s = IngestionSettings {
            chunking_strategy: p.chunking_strategy.unwrap_or(self.chunking_strategy),
            fixed_window_chunk_size: p.fixed_window_chunk_size.unwrap_or(self.fixed_window_chunk_size),
            fixed_window_chunk_overlap: p.fixed_window_chunk_overlap.unwrap_or(self.fixed_window_chunk_overlap),
            structured_min_chunk_size: p.structured_min_chunk_size.unwrap_or(self.structured_min_chunk_size),
            structured_max_chunk_size: p.structured_max_chunk_size.unwrap_or(self.structured_max_chunk_size),
            document_enrichment_enabled: p.document_enrichment_enabled.unwrap_or(self.document_enrichment_enabled),
        };
        s.validate()?;
        Ok(s)
    }

    pub fn validate(&self) -> Result<()> {
        let range = |field: &str, v: u32, lo: u32, hi: u32| -> Result<()> {
            if v < lo || v > hi {
                return Err(Error::invalid_field(field, format!("{field} must be between {lo} and {hi}")));
            }
            Ok(())
        };
        range("fixedWindowChunkSize", self.fixed_window_chunk_size, 100, 4000)?;
        range("fixedWindowChunkOverlap", self.fixed_window_chunk_overlap, 0, 2000)?;
        if self.fixed_window_chunk_overlap >= self.fixed_window_chunk_size {
            return Err(Error::invalid_field(
                "fixedWindowChunkOverlap",
                "fixedWindowChunkOverlap must be smaller than fixedWindowChunkSize",
            ));
        }
        range("structuredMinChunkSize", self.structured_min_chunk_size, 1, 1000)?;
        range("structuredMaxChunkSize", self.structured_max_chunk_size, 1, 2000)?;
        if self.structured_min_chunk_size > self.structured_max_chunk_size {
            return Err(Error::invalid_field(
                "structuredMinChunkSize",
                "structuredMinChunkSize must not be larger than structuredMaxChunkSize",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_patches_validate() {
        let d = IngestionSettings::default();
        d.validate().unwrap();
        let p: IngestionPatch = serde_json::from_str(r#"{"fixedWindowChunkSize": 50}"#).unwrap();
        assert!(d.apply(p).unwrap_err().message.contains("fixedWindowChunkSize"));
        let p: IngestionPatch =
            serde_json::from_str(r#"{"fixedWindowChunkSize": 200, "fixedWindowChunkOverlap": 200}"#).unwrap();
        assert!(d.apply(p).is_err());
        let p: IngestionPatch = serde_json::from_str(r#"{"structuredMinChunkSize": 300}"#).unwrap();
        assert!(d.apply(p).is_err());
        let p: IngestionPatch = serde_json::from_str(r#"{"chunkingStrategy": "recursive_text"}"#).unwrap();
        assert_eq!(d.apply(p).unwrap().chunking_strategy, ChunkingStrategy::RecursiveText);
        assert!(serde_json::from_str::<IngestionPatch>(r#"{"chunkingStrategy": "magic"}"#).is_err());
    }
}
