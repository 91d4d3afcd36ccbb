//! The structured routine definition. Its types are the stored and wire shape (camelCase JSON,
//! in `api.rs`): routines are stored in it, travel in revision snapshots and bundles in it, and
//! the structured routes take and return it.

mod api;

pub use api::*;
