//! The `steward` binary: parses the command line and hands it to `steward::cli::run`.
#![allow(clippy::print_stdout, reason = "the command line prints its results")]

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // Two malloc arenas instead of eight per core: the many short-lived threads (HTTP, blocking
    // pool, embedding) otherwise each keep freed memory in an arena of their own (~80 MB on
    // Cranfield ingestion).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
    let cli = steward::cli::Cli::parse();
    match steward::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("steward: {e:#}");
            ExitCode::FAILURE
        }
    }
}
