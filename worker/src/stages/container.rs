//! A container task's one step: the task's command in its image, as the seed system runs
//! it (see [`crate::container`]). The image is pulled first when the task's `pull` says so;
//! the run's output is the step's log and live tail; what it wrote under `$ARTIFACT_DIR`
//! (a folder of the workspace's own, `container-out/`) becomes the job's artifacts under
//! `artifactsSubdir`, with `metadata/run.json`; and the container is removed when the run
//! ends, however it ends.

use std::path::{Path, PathBuf};
use std::time::Instant;

use contract::container::{ARTIFACT_DIR, ContainerRun, PullPolicy};
use contract::{ResolvedStep, StepUsage};

use super::invoke::Invoked;
use super::{Log, Run, send_tail};
use crate::container::{Engine, RunSpec, env_file};
use crate::process::{self, Ended, Limits};
use crate::runtime::Invocation;
use crate::sandbox::AgentNetwork;
use crate::workspace::Workspace;

/// At most this many files of `$ARTIFACT_DIR` are uploaded; the rest are named in the log.
const MAX_ARTIFACTS: usize = 500;

impl Run<'_> {
    /// Runs the task's container as step `step`. `Err` says why it could not start.
    pub(super) async fn run_container(
        &mut self,
        ws: &Workspace,
        step: &ResolvedStep,
        stage_log: &mut Log,
    ) -> Result<Invoked, String> {
        let Some(engine) = self.config.engine.clone() else {
            return Err(
                "this worker has no container engine (docker or podman) that answers: \
                 it should not have claimed a container task"
                    .into(),
            );
        };
        let spec = self.task.payload.task.container.clone();
        let image = spec.image.clone().unwrap_or_default();
        let job = ws
            .root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut log = Log::open(ws, contract::job::task::step_log(step.index));
        let started_at = chrono::Utc::now();
        let began = Instant::now();

        let pull = match spec.pull() {
            PullPolicy::Always => true,
            PullPolicy::IfMissing => !engine.has_image(&image).await,
        };
        if pull {
            let pulled = self
                .engine_run(
                    engine.invocation(Engine::pull_args(&image), ws),
                    self.config.limits,
                    step,
                    &mut log,
                    stage_log,
                )
                .await;
            if !matches!(pulled, Ok(Ended::Exited(status)) if status.success()) {
                self.artifact(log);
                return Err(match pulled {
                    Ok(Ended::Stopped {
                        cancelled: true, ..
                    }) => "the image's pull was stopped: the job was cancelled".into(),
                    Ok(Ended::Stopped { .. }) => format!(
                        "pulling {image} took longer than {} s (--step-timeout-seconds)",
                        self.config.limits.timeout.as_secs()
                    ),
                    Ok(Ended::Exited(status)) => format!(
                        "could not pull {image} ({status}): check the image's name and that \
                         the engine reaches its registry (the step's log has the engine's words)"
                    ),
                    Err(e) => e.to_string(),
                });
            }
        }

        // The container writes into a folder of its own, not into the job's artifacts: the
        // worker writes there (its logs, run.json) and must not meet the container's links.
        let artifacts = ws.root.join("container-out");
        let env_path = ws.root.join("container.env");
        let prepared = std::fs::create_dir_all(&artifacts)
            .and_then(|()| write_private(&env_path, &env_file(&spec)));
        if let Err(e) = prepared {
            self.artifact(log);
            return Err(format!("could not prepare the container's folders: {e}"));
        }
        let args = engine.run_args(&RunSpec {
            spec: &spec,
            job: &job,
            ws,
            artifacts: &artifacts,
            env_file: &env_path,
            repository: &self.task.payload.repository,
            network: self.config.sandbox.network == AgentNetwork::On,
        });
        let limits = Limits {
            timeout: std::time::Duration::from_secs(spec.timeout_seconds()),
            grace: self.config.limits.grace,
        };
        log.line(
            self.redactor,
            &format!("$ {} {}", engine.program.display(), args.join(" ")),
        );
        let ended = self
            .engine_run(
                engine.invocation(args, ws),
                limits,
                step,
                &mut log,
                stage_log,
            )
            .await;
        // Gone whatever happened: a stopped `run` leaves its container running.
        engine.remove(&job).await;
        let _ = std::fs::remove_file(&env_path);

        let (exit_code, timed_out) = match &ended {
            Ok(Ended::Exited(status)) => (status.code(), false),
            Ok(Ended::Stopped { cancelled, .. }) => (None, !cancelled),
            Err(_) => (None, false),
        };
        let succeeded = matches!(&ended, Ok(Ended::Exited(status)) if status.success());
        let error = match &ended {
            Ok(Ended::Exited(status)) if !status.success() => {
                Some(format!("container command failed ({status})"))
            }
            Ok(Ended::Exited(_)) => None,
            Ok(Ended::Stopped {
                cancelled: true, ..
            }) => Some("cancelled".into()),
            Ok(Ended::Stopped { .. }) => Some(format!(
                "container execution timed out after {} s",
                spec.timeout_seconds()
            )),
            Err(e) => Some(e.to_string()),
        };
        let subdir = spec.artifacts_subdir().to_string();
        self.collect(&artifacts, &subdir, &mut log);
        let run = ContainerRun {
            job_id: job.clone(),
            repository: self.task.payload.repository.clone(),
            container_name: Engine::name(&job),
            image,
            command: spec.command.clone(),
            pull_mode: spec.pull(),
            workdir: spec.workdir().to_string(),
            artifact_dir: ARTIFACT_DIR.into(),
            timeout_seconds: spec.timeout_seconds(),
            timed_out,
            exit_code,
            started_at,
            finished_at: chrono::Utc::now(),
            duration_seconds: began.elapsed().as_secs_f64(),
            error: error.clone(),
        };
        if let Ok(body) = serde_json::to_string_pretty(&run) {
            let _ = self.write_artifact(ws, &format!("{subdir}/metadata/run.json"), &body);
        }
        self.artifact(log);
        Ok(Invoked {
            ended,
            succeeded,
            usage: StepUsage::default(),
            summary: Some(error.unwrap_or_else(|| "container task execution completed".into())),
        })
    }

    /// Runs the engine's `invocation` under the process policy, its output the step's.
    async fn engine_run(
        &self,
        invocation: Invocation,
        limits: Limits,
        step: &ResolvedStep,
        log: &mut Log,
        stage_log: &mut Log,
    ) -> Result<Ended, process::RunError> {
        let redactor = self.redactor;
        let reports = self.reports.clone();
        process::run(&invocation, limits, self.cancel, |_, line| {
            log.line(redactor, line);
            stage_log.line(redactor, line);
            send_tail(&reports, redactor, step.index, line);
        })
        .await
    }

    /// Reports each regular file under `dir` as artifact `<subdir>/<its path>`. Links are
    /// not followed: the container wrote them, and one may point anywhere on the host.
    fn collect(&self, dir: &Path, subdir: &str, log: &mut Log) {
        let mut files = Vec::new();
        walk(dir, &mut files);
        files.sort();
        if files.len() > MAX_ARTIFACTS {
            log.line(
                self.redactor,
                &format!(
                    "{} files under $ARTIFACT_DIR; the first {MAX_ARTIFACTS} are kept",
                    files.len()
                ),
            );
            files.truncate(MAX_ARTIFACTS);
        }
        for path in files {
            let Ok(rel) = path.strip_prefix(dir) else {
                continue;
            };
            let name = format!("{subdir}/{}", rel.to_string_lossy());
            let _ = self.reports.send(super::Report::Artifact { name, path });
        }
    }
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            walk(&entry.path(), files);
        } else if kind.is_file() {
            files.push(entry.path());
        }
    }
}

/// Written readable by the worker's user only: it holds the task's variables.
fn write_private(path: &Path, body: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(body.as_bytes())
}
