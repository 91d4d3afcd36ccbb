use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = steward::cli::Cli::parse();
    match steward::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("steward: {e:#}");
            ExitCode::FAILURE
        }
    }
}
