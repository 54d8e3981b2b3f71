//! The `stepwise` binary: parses the command line and hands over to the command.

use clap::Parser;
use stepwise::cli;

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
