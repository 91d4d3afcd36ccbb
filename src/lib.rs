//! Steward: a self-hosted AI agent appliance in one binary. See docs/ARCHITECTURE.md for the map.

pub mod agents;
pub mod app;
pub mod audit;
pub mod auth;
pub mod bench;
pub mod bundles;
pub mod bus;
pub mod cli;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod connectors;
pub mod conversations;
pub mod converse;
pub mod crawler;
pub mod crypto;
pub mod delivery;
pub mod documents;
pub mod error;
pub mod evals;
pub mod http;
pub mod ids;
pub mod jobs;
pub mod metrics;
pub mod models;
pub mod names;
pub mod ops;
pub mod public_chat;
pub mod ratelimit;
pub mod readiness;
pub mod routines;
pub mod search;
pub mod settings;
pub mod skills;
pub mod storage;
#[cfg(test)]
pub(crate) mod testkit;
pub mod turn;
pub mod usage;
pub mod workspace_init;

pub use app::App;
pub use error::{Error, ErrorCode, Result};
