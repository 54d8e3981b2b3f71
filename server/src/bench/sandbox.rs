//! `stepwise bench sandbox`: what the box costs a step, printed, never asserted. The same
//! command (`true`, so that nothing but the start is measured) is started through the
//! worker's process policy with the sandbox off and in the bubblewrap box the worker would
//! build on this machine, alternately, and each start is timed from spawn to exit.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use tokio_util::sync::CancellationToken;
use worker::process::{self, Ended, Limits};
use worker::runtime::{Binaries, Invocation};
use worker::sandbox::{AgentNetwork, HostView, Sandbox, SandboxMode};
use worker::workspace::Workspace;

use super::queue::percentile;
use crate::cli::error::CliError;

#[derive(Debug, Args)]
pub struct SandboxBenchArgs {
    /// Starts timed per mode.
    #[arg(long, default_value_t = 200)]
    runs: usize,
    /// The bubblewrap program.
    #[arg(long, default_value = "bwrap")]
    bwrap: PathBuf,
}

/// What one mode's starts took, in milliseconds, sorted.
struct Starts {
    name: &'static str,
    ms: Vec<f64>,
}

impl Starts {
    fn p(&self, p: f64) -> f64 {
        percentile(&self.ms, p)
    }
}

pub async fn run(args: SandboxBenchArgs) -> Result<(), CliError> {
    let bench = |e: String| CliError::Bench(e);
    let tmp = tempfile::tempdir().map_err(|e| bench(e.to_string()))?;
    let ws = Workspace::at(tmp.path().join("job"));
    for dir in [&ws.repo, &ws.home, &ws.skills_active, &ws.tmp()] {
        std::fs::create_dir_all(dir).map_err(|e| bench(e.to_string()))?;
    }
    let binaries = Binaries::default();
    let programs = [binaries.codex, binaries.claude, binaries.gemini];
    let view = HostView::new(
        &programs,
        std::env::var_os("PATH").as_deref(),
        &[],
        &[tmp.path().to_path_buf()],
    );
    let boxed = Sandbox::new(
        SandboxMode::Bwrap,
        AgentNetwork::On,
        args.bwrap.clone(),
        view,
        Vec::new(),
    )
    .map_err(|e| bench(e.to_string()))?;
    boxed
        .check(&tmp.path().join("check"))
        .await
        .map_err(|e| bench(e.to_string()))?;
    let modes = [("off", Sandbox::off()), ("bwrap", boxed)];
    let mut starts: Vec<Starts> = modes
        .iter()
        .map(|(name, _)| Starts {
            name,
            ms: Vec::with_capacity(args.runs),
        })
        .collect();
    let cancel = CancellationToken::new();
    let limits = Limits {
        timeout: Duration::from_secs(30),
        grace: Duration::from_secs(1),
    };
    for _ in 0..args.runs {
        for (i, (_, sandbox)) in modes.iter().enumerate() {
            let invocation = sandbox.wrap(
                Invocation::plain("true".into(), Vec::new(), ws.repo.clone()),
                &ws,
            );
            let began = Instant::now();
            let ended = process::run(&invocation, limits, &cancel, |_, _| {})
                .await
                .map_err(|e| bench(e.to_string()))?;
            if !matches!(ended, Ended::Exited(status) if status.success()) {
                return Err(bench(format!("`true` did not succeed: {ended:?}")));
            }
            starts[i].ms.push(began.elapsed().as_secs_f64() * 1000.0);
        }
    }
    for s in &mut starts {
        s.ms.sort_by(f64::total_cmp);
    }
    println!(
        "sandbox bench: {} starts of `true` per mode through the worker's process policy, alternating",
        args.runs
    );
    println!("{:<8} {:>10} {:>10}", "mode", "p50 ms", "p99 ms");
    for s in &starts {
        println!("{:<8} {:>10.2} {:>10.2}", s.name, s.p(50.0), s.p(99.0));
    }
    println!(
        "the box's own cost per step: p50 {:.2} ms, p99 {:.2} ms",
        starts[1].p(50.0) - starts[0].p(50.0),
        starts[1].p(99.0) - starts[0].p(99.0)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_small_run_times_both_modes() {
        let args = SandboxBenchArgs {
            runs: 3,
            bwrap: "bwrap".into(),
        };
        run(args).await.unwrap();
    }
}
