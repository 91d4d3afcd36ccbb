//! One integration-test binary (one link step), a module per area.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "test code: a failure should panic")]

mod fake_llm;
mod fixtures;
mod receiver;
mod site;
mod support;

mod accounts;
mod agents;
mod api_page;
mod browser;
mod bundles;
mod bundles_page;
mod channel_credentials_page;
mod channels_page;
mod chat;
mod converse;
mod crawl;
mod delivery;
mod documents;
pub mod e2e;
mod errors;
mod evals;
mod evals_page;
mod formats;
mod hardening;
mod hardening3;
mod jobs;
mod knowledge_page;
mod mcp;
mod migrations;
mod models;
mod openapi;
mod public_chat;
mod readme;
mod recovery;
mod retrieval;
mod routines;
mod routines_page;
mod search;
mod sources_page;
mod takeover;
mod tidy;
mod tokens;
mod usage_limits;
mod webdriver;
mod widget;
