//! `stepwise schedules …`: recurring tasks on a running server, over its HTTP API like the
//! `jobs` commands: create, list, show, pause, resume, delete.

use std::io::Write;

use clap::{Args, Subcommand};
use contract::api::{Overlap, Schedule};
use serde_json::json;

use super::jobs::{ClientArgs, JobsCliError};

type Result<T, E = JobsCliError> = std::result::Result<T, E>;

#[derive(Debug, Subcommand)]
pub enum SchedulesCommand {
    /// Make a schedule: each slot of --cron, read in --timezone, queues the job request
    /// of --task (a JSON file, or - for standard input).
    Create(CreateArgs),
    /// List the schedules, by name: their next slot, and the latest job each made.
    List(ListArgs),
    /// Show one schedule, whole, as JSON.
    Show(IdArgs),
    /// Pause a schedule: no slot makes a job until it is resumed.
    Pause(IdArgs),
    /// Resume a schedule from its next slot after now.
    Resume(IdArgs),
    /// Delete a schedule; the jobs it made stay.
    Delete(IdArgs),
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    #[command(flatten)]
    client: ClientArgs,
    /// Unique; 1 to 100 characters.
    #[arg(long)]
    name: String,
    /// Five fields (minute hour day-of-month month day-of-week), as "0 6 * * 1", or
    /// @daily, @weekly…
    #[arg(long)]
    cron: String,
    /// The IANA time zone the cron is read in.
    #[arg(long, default_value = "UTC")]
    timezone: String,
    /// The job request each slot queues (as `stepwise submit` takes it): a file, or -.
    #[arg(long, value_name = "FILE")]
    task: String,
    /// What a slot does while the previous job is still queued or running.
    #[arg(long, default_value = "skip", value_parser = ["skip", "queue"])]
    overlap: String,
    /// After downtime, run the latest slot that was missed (only that one).
    #[arg(long)]
    catch_up: bool,
    /// Print the schedule as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    client: ClientArgs,
    /// Print the list as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct IdArgs {
    #[command(flatten)]
    client: ClientArgs,
    /// The schedule's id (`stepwise schedules list` shows them).
    id: String,
}

impl SchedulesCommand {
    pub async fn run(self, out: &mut impl Write) -> Result<()> {
        match self {
            SchedulesCommand::Create(args) => {
                let task = super::jobs::read_request(std::path::Path::new(&args.task))?;
                let overlap: Overlap = args.overlap.parse().unwrap_or_default();
                let request = json!({
                    "name": args.name, "cron": args.cron, "timezone": args.timezone,
                    "task": task, "overlap": overlap, "catchUp": args.catch_up,
                });
                let made = args.client.client()?.create_schedule(&request).await?;
                if args.json {
                    writeln!(out, "{}", pretty(&made))?;
                } else {
                    writeln!(out, "{}", line(&made))?;
                }
            }
            SchedulesCommand::List(args) => {
                let all = args.client.client()?.list_schedules().await?;
                if args.json {
                    writeln!(out, "{}", pretty(&all))?;
                } else if all.is_empty() {
                    writeln!(
                        out,
                        "no schedules; make one with `stepwise schedules create`"
                    )?;
                } else {
                    for schedule in &all {
                        writeln!(out, "{}", line(schedule))?;
                    }
                }
            }
            SchedulesCommand::Show(args) => {
                let schedule = args.client.client()?.get_schedule(&args.id).await?;
                writeln!(out, "{}", pretty(&schedule))?;
            }
            SchedulesCommand::Pause(args) => {
                let schedule = args.client.client()?.pause_schedule(&args.id).await?;
                writeln!(out, "{}", line(&schedule))?;
            }
            SchedulesCommand::Resume(args) => {
                let schedule = args.client.client()?.resume_schedule(&args.id).await?;
                writeln!(out, "{}", line(&schedule))?;
            }
            SchedulesCommand::Delete(args) => {
                args.client.client()?.delete_schedule(&args.id).await?;
                writeln!(out, "deleted schedule {}; the jobs it made stay", args.id)?;
            }
        }
        Ok(())
    }
}

fn pretty<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// One line of a schedule: id, name, cadence, state, next slot, latest job.
fn line(s: &Schedule) -> String {
    let state = if s.paused { "paused" } else { "active" };
    let last = s
        .last_job_id
        .map(|id| format!(", latest job {id}"))
        .unwrap_or_default();
    format!(
        "{}  {}  \"{}\" in {}  {state}, next {}{last}",
        s.id,
        s.name,
        s.cron,
        s.timezone,
        s.next_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    )
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use queue::Role;

    use super::*;
    use crate::testing::server::start;

    #[derive(Debug, Parser)]
    struct Schedules {
        #[command(subcommand)]
        command: SchedulesCommand,
    }

    async fn run(args: &[&str]) -> String {
        let command = Schedules::try_parse_from(["schedules"].iter().chain(args))
            .unwrap()
            .command;
        let mut out = Vec::new();
        command.run(&mut out).await.unwrap();
        String::from_utf8(out).unwrap()
    }

    #[tokio::test]
    async fn the_commands_make_list_pause_resume_and_delete_a_schedule() {
        let server = start().await;
        let token = server
            .token("ops", queue::TokenKind::User, Some(Role::Operator))
            .await;
        let dir = tempfile::tempdir().unwrap();
        let task = dir.path().join("task.json");
        let request = json!({ "payload": { "repository": "octo/hello", "task": { "instructions": "Update the dependencies" } } });
        std::fs::write(&task, request.to_string()).unwrap();
        let url = server.url();
        let client = ["--server", url.as_str(), "--token", token.as_str()];
        let made = run(&[
            &["create"][..],
            &client,
            &[
                "--name",
                "deps",
                "--cron",
                "0 6 * * 1",
                "--timezone",
                "Europe/Berlin",
                "--task",
                task.to_str().unwrap(),
                "--json",
            ],
        ]
        .concat())
        .await;
        let made: Schedule = serde_json::from_str(&made).unwrap();
        assert_eq!(
            (made.name.as_str(), made.timezone.as_str(), made.overlap),
            ("deps", "Europe/Berlin", Overlap::Skip)
        );
        let listed = run(&[&["list"][..], &client].concat()).await;
        assert!(
            listed.contains(&made.id) && listed.contains("\"0 6 * * 1\" in Europe/Berlin  active"),
            "{listed}"
        );
        let paused = run(&[&["pause"][..], &client, &[made.id.as_str()]].concat()).await;
        assert!(paused.contains("paused"), "{paused}");
        let resumed = run(&[&["resume"][..], &client, &[made.id.as_str()]].concat()).await;
        assert!(resumed.contains("active"), "{resumed}");
        let shown = run(&[&["show"][..], &client, &[made.id.as_str()]].concat()).await;
        assert!(shown.contains("\"cron\": \"0 6 * * 1\""), "{shown}");
        let deleted = run(&[&["delete"][..], &client, &[made.id.as_str()]].concat()).await;
        assert!(deleted.starts_with("deleted schedule"), "{deleted}");
        assert!(
            run(&[&["list"][..], &client].concat())
                .await
                .starts_with("no schedules")
        );
        // A bad cron is refused with the field named.
        let bad = Schedules::try_parse_from([
            "schedules",
            "create",
            "--server",
            url.as_str(),
            "--token",
            token.as_str(),
            "--name",
            "x",
            "--cron",
            "0 6 *",
            "--task",
            task.to_str().unwrap(),
        ])
        .unwrap()
        .command;
        let error = bad.run(&mut Vec::new()).await.unwrap_err().to_string();
        assert!(error.contains("cron"), "{error}");
    }
}
