//! The `stepwise` binary: parses the command line and hands over to the command.

// Leptos view types nest deeply; computing their layout needs more than the default 128.
#![recursion_limit = "256"]

mod api;
mod auth;
mod bench;
mod bench_worker;
mod cli;
mod config;
#[cfg(test)]
mod hostile;
#[cfg(test)]
mod html_check;
mod jobs_cli;
mod serve;
mod session;
#[cfg(test)]
mod testing;
mod tokens;
mod worker_cli;
#[cfg(test)]
mod worker_e2e;

use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    cli::init_tracing();
    match cli.run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stepwise: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
