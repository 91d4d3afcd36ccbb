//! Chunks' embeddings as another module may change them: a workspace's re-embedding into another
//! embedding space, driven by `search::spaces` (the chunks table stays documents' own; these are
//! its functions).

pub use super::store::{
    chunks_to_reembed, clear_next_embeddings, promote_next_embeddings, reembed_counts, set_next_embedding,
};

/// Every live chunk's text as the pipeline embedded it (the document's title and the chunk), with
/// its document's metadata JSON.
pub fn embedded_texts(db: &crate::storage::Db) -> crate::error::Result<Vec<(String, String)>> {
    let rows = db.read(super::store::embedded_texts)?;
    Ok(rows
        .into_iter()
        .map(|(meta, title, content)| (meta, super::pipeline::embedding_text(&title, &content)))
        .collect())
}
