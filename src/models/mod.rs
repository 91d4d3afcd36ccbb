//! Models: where their files are, the local sentence embedder (ONNX Runtime) and, in later
//! modules, chat models behind one trait.

pub mod locate;

/// Chat-model provider ids, as the API writes them.
pub const PROVIDERS: &[&str] = &["openai", "openai-compatible", "claude", "gemini", "local"];
