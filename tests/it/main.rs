//! One integration-test binary (one link step), a module per area.

mod support;

mod accounts;
mod e2e;
mod errors;
mod jobs;
mod migrations;
mod tokens;
