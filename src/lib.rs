//! Steward: a self-hosted AI agent appliance in one binary. See docs/ARCHITECTURE.md for the map.

pub mod app;
pub mod audit;
pub mod auth;
pub mod cli;
pub mod clock;
pub mod config;
pub mod error;
pub mod http;
pub mod ids;
pub mod jobs;
pub mod metrics;
pub mod models;
pub mod ratelimit;
pub mod readiness;
pub mod storage;
pub mod workspace_init;

pub use app::App;
pub use error::{Error, ErrorCode, Result};
