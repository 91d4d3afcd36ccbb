//! The HTTP handlers by area; each area module registers its own routes (`routes()`).

pub mod account;
pub mod admin;
pub mod agents;
pub mod bundles;
pub mod chat;
pub mod connectors;
pub mod converse;
pub mod crawl;
pub mod delivery;
pub mod documents;
pub mod evals;
pub mod inbox;
pub mod ops;
pub mod public_chat;
pub mod routines;
pub mod settings;
pub mod usage;
