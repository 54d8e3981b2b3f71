//! `stepwise jobs pause | resume | retry | approve | reject | budget | follow-up`: an
//! operator's hold on a job's course.

use std::io::Write;

use clap::Args;
use contract::{Job, JobId, JobState};

use super::{ClientArgs, Result, pretty};

#[derive(Debug, Args)]
pub struct PauseArgs {
    /// The job's id.
    id: JobId,
    /// Stop the running step now (its work since the last checkpoint is lost) rather than
    /// after it finishes.
    #[arg(long)]
    now: bool,
    /// Print the job as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The job's id.
    id: JobId,
    /// Resume from this checkpoint (`step-2`, `iteration-1`: `stepwise jobs checkpoints`
    /// lists them) rather than the one it paused at.
    #[arg(long)]
    checkpoint: Option<String>,
    /// Print the job as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Debug, Args)]
pub struct RetryArgs {
    /// The job's id.
    id: JobId,
    /// The step to run again first, numbered from 1 as `jobs show` numbers them; the work
    /// before it is restored from its checkpoint. By default the step that failed.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    from_step: Option<u32>,
    /// Print the job as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The job's id.
    id: JobId,
    /// Print the job as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Debug, Args)]
pub struct RejectArgs {
    /// The job's id.
    id: JobId,
    /// Why; it becomes the job's error.
    #[arg(long)]
    reason: Option<String>,
    /// Print the job as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Debug, Args)]
pub struct AppendArgs {
    /// The job's id.
    id: JobId,
    /// A step's instructions, in order; repeat for more.
    #[arg(long = "step", value_name = "INSTRUCTIONS", required = true)]
    steps: Vec<String>,
    /// Print the job as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Debug, Args)]
pub struct FollowUpArgs {
    /// The job's id.
    id: JobId,
    /// A step of the round's, its instructions, in order; repeat for more.
    #[arg(long = "step", value_name = "INSTRUCTIONS", required = true)]
    steps: Vec<String>,
    /// Print the job as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Debug, Args)]
pub struct BudgetArgs {
    /// The job's id.
    id: JobId,
    /// The most it may cost in all, in US dollars (claude reports prices; codex and
    /// gemini do not).
    #[arg(long, value_name = "USD")]
    usd: Option<f64>,
    /// The most input and output tokens it may use in all.
    #[arg(long, value_name = "N")]
    tokens: Option<u64>,
    /// The most minutes its agent may run in all (fractions allowed).
    #[arg(long, value_name = "N")]
    minutes: Option<f64>,
    /// Print the job as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: ClientArgs,
}

/// `--step` texts as the API's step objects.
fn step_objects(steps: &[String]) -> serde_json::Value {
    steps
        .iter()
        .map(|s| serde_json::json!({ "instructions": s }))
        .collect()
}

/// Where the job will start, in words.
fn start_of(job: &Job) -> String {
    match &job.resume_from {
        Some(saved) => format!("from the checkpoint {}", saved.label()),
        None => "from the start".to_string(),
    }
}

pub async fn pause(args: PauseArgs, out: &mut impl Write) -> Result<()> {
    let job = args.client.client()?.pause_job(&args.id, args.now).await?;
    if args.json {
        writeln!(out, "{}", pretty(&job))?;
    } else if job.status == JobState::Paused {
        writeln!(
            out,
            "paused {}; `stepwise jobs resume {}` continues it {}",
            job.id,
            job.id,
            start_of(&job)
        )?;
    } else {
        let when = if args.now {
            "stops the running step now"
        } else {
            "stops after the running step"
        };
        writeln!(
            out,
            "pause requested for {} ({}); its worker {when}",
            job.id, job.status
        )?;
    }
    Ok(())
}

pub async fn resume(args: ResumeArgs, out: &mut impl Write) -> Result<()> {
    let client = args.client.client()?;
    let job = client
        .resume_job(&args.id, args.checkpoint.as_deref())
        .await?;
    if args.json {
        writeln!(out, "{}", pretty(&job))?;
    } else if job.status == JobState::Queued {
        writeln!(
            out,
            "resumed {}: queued to continue {}",
            job.id,
            start_of(&job)
        )?;
    } else {
        writeln!(out, "{} is {}; nothing to resume", job.id, job.status)?;
    }
    Ok(())
}

pub async fn retry(args: RetryArgs, out: &mut impl Write) -> Result<()> {
    let client = args.client.client()?;
    let from = args.from_step.map(|n| n as usize - 1);
    let job = client.retry_job(&args.id, from).await?;
    if args.json {
        writeln!(out, "{}", pretty(&job))?;
    } else {
        writeln!(
            out,
            "retrying {}: queued for attempt {}, {}",
            job.id,
            job.attempt + 1,
            start_of(&job)
        )?;
    }
    Ok(())
}

pub async fn approve(args: ApproveArgs, out: &mut impl Write) -> Result<()> {
    let job = args.client.client()?.approve_job(&args.id).await?;
    if args.json {
        writeln!(out, "{}", pretty(&job))?;
    } else {
        writeln!(out, "approved {}: queued to publish its work", job.id)?;
    }
    Ok(())
}

pub async fn reject(args: RejectArgs, out: &mut impl Write) -> Result<()> {
    let client = args.client.client()?;
    let job = client.reject_job(&args.id, args.reason.as_deref()).await?;
    if args.json {
        writeln!(out, "{}", pretty(&job))?;
    } else {
        writeln!(out, "rejected {}: nothing is published", job.id)?;
    }
    Ok(())
}

pub async fn append(args: AppendArgs, out: &mut impl Write) -> Result<()> {
    let steps = step_objects(&args.steps);
    let client = args.client.client()?;
    let job = client.append_steps(&args.id, &steps).await?;
    if args.json {
        writeln!(out, "{}", pretty(&job))?;
    } else {
        let total = job.payload["task"]["steps"].as_array().map_or(0, Vec::len);
        writeln!(
            out,
            "appended {} step(s) to {}: {total} in all ({})",
            args.steps.len(),
            job.id,
            job.status
        )?;
    }
    Ok(())
}

pub async fn budget(args: BudgetArgs, out: &mut impl Write) -> Result<()> {
    let budget = contract::JobBudget {
        max_cost_usd: args.usd,
        max_tokens: args.tokens,
        max_minutes: args.minutes,
    };
    let job = args.client.client()?.set_budget(&args.id, &budget).await?;
    if args.json {
        writeln!(out, "{}", pretty(&job))?;
        return Ok(());
    }
    let set = job.budget().unwrap_or_default();
    let used = set.summary(&job.usage.unwrap_or_default());
    match job.budget_overrun() {
        Some(overrun) => writeln!(
            out,
            "budget of {} set, and still spent: {} ({}); raise that limit to go on",
            job.id,
            overrun.describe(),
            overrun.limit
        )?,
        None if job.status == JobState::Paused => writeln!(
            out,
            "budget of {} set: {used}; `stepwise jobs resume {}` continues it",
            job.id, job.id
        )?,
        None => writeln!(out, "budget of {} set: {used}", job.id)?,
    }
    Ok(())
}

pub async fn follow_up(args: FollowUpArgs, out: &mut impl Write) -> Result<()> {
    let steps = step_objects(&args.steps);
    let client = args.client.client()?;
    let job = client.follow_up(&args.id, &steps).await?;
    if args.json {
        writeln!(out, "{}", pretty(&job))?;
    } else {
        let branch = match &job.resume_from {
            Some(start) if start.branch.is_some() => {
                format!(
                    " from the tip of {}",
                    start.branch.as_deref().unwrap_or_default()
                )
            }
            Some(start) if !start.base_commit.is_empty() => " from its latest checkpoint".into(),
            _ => ", nothing kept from before".into(),
        };
        writeln!(
            out,
            "round {} of {}: queued to run {} new step(s){branch}",
            job.round,
            job.id,
            args.steps.len()
        )?;
    }
    Ok(())
}
