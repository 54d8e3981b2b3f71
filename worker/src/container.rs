//! The container engine a worker runs container tasks with (docker or podman): found at
//! start by asking it (`info`), not by finding its program, since a client without an
//! engine behind it cannot run anything; the command line of one task's run; and the
//! removal of what a run, or a worker killed before it could clean up, left behind.
//!
//! Every container is named for its job and labelled with its job and with the worker's
//! workdir, so that a worker starting again removes what its previous life left running.

use std::path::{Path, PathBuf};
use std::time::Duration;

use contract::container::{ARTIFACT_DIR, ContainerSpec};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use crate::process::{self, Budget};
use crate::runtime::Invocation;
use crate::workspace::Workspace;

/// The label that ties a container to the worker that started it.
const WORKDIR_LABEL: &str = "stepwise.workdir";
/// The label that names a container's job.
const JOB_LABEL: &str = "stepwise.job";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    Docker,
    Podman,
}

/// A container engine that answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Engine {
    pub program: PathBuf,
    pub kind: EngineKind,
    /// The worker's workdir, as the label its containers carry.
    pub workdir: String,
}

/// How long a question to the engine (`info`, `ps`, `rm`, `image inspect`) may take.
const ASK: Duration = Duration::from_secs(30);

fn budget(setting: &'static str, timeout: Duration) -> Budget {
    Budget::new(
        setting,
        timeout,
        Duration::from_secs(2),
        CancellationToken::new(),
    )
}

/// Runs the engine with `args` and says whether it succeeded, with its stdout.
async fn ask(program: &Path, args: &[&str], timeout: Duration) -> Result<String, String> {
    let mut command = Command::new(program);
    command.args(args);
    match process::output(&mut command, &budget("the container engine", timeout)).await {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        Ok(out) => Err(out.stderr_text()),
        Err(e) => Err(e.to_string()),
    }
}

impl Engine {
    /// The engine's client run with `args` in the job's checkout. It runs as the worker
    /// does, outside the box: it needs the worker's settings for its engine (DOCKER_HOST,
    /// CONTAINERS_CONF), never the task's.
    pub fn invocation(&self, args: Vec<String>, ws: &Workspace) -> Invocation {
        Invocation::plain(self.program.clone(), args, ws.repo.clone())
    }

    /// The engine that answers `info`: `program` when given, else docker, else podman.
    /// `Err` says what was asked and what each said.
    pub async fn find(program: Option<&Path>, workdir: &Path) -> Result<Engine, String> {
        let candidates: Vec<PathBuf> = match program {
            Some(p) => vec![p.to_path_buf()],
            None => vec!["docker".into(), "podman".into()],
        };
        let mut said = Vec::new();
        for program in candidates {
            match ask(&program, &["info"], ASK).await {
                Ok(_) => {
                    let version = ask(&program, &["--version"], ASK).await.unwrap_or_default();
                    let kind = if version.to_lowercase().contains("podman") {
                        EngineKind::Podman
                    } else {
                        EngineKind::Docker
                    };
                    return Ok(Engine {
                        program,
                        kind,
                        workdir: workdir.display().to_string(),
                    });
                }
                Err(why) => said.push(format!(
                    "`{} info`: {}",
                    program.display(),
                    why.lines().next().unwrap_or("no answer")
                )),
            }
        }
        Err(said.join("; "))
    }

    /// The container of job `job`.
    pub fn name(job: &str) -> String {
        format!("stepwise-{job}")
    }

    /// Removes, stopping them first, the containers this worker's workdir left: at start,
    /// after a worker was killed before it could remove its own. Returns how many.
    pub async fn sweep(&self) -> usize {
        let filter = format!("label={WORKDIR_LABEL}={}", self.workdir);
        let Ok(ids) = ask(&self.program, &["ps", "-a", "-q", "--filter", &filter], ASK).await
        else {
            return 0;
        };
        let ids: Vec<&str> = ids.split_whitespace().collect();
        for id in &ids {
            let _ = ask(&self.program, &["rm", "-f", id], ASK).await;
        }
        ids.len()
    }

    /// Stops and removes job `job`'s container, if it is still there.
    pub async fn remove(&self, job: &str) {
        let _ = ask(&self.program, &["rm", "-f", &Engine::name(job)], ASK).await;
    }

    /// Whether the engine has `image` already.
    pub async fn has_image(&self, image: &str) -> bool {
        ask(&self.program, &["image", "inspect", image], ASK)
            .await
            .is_ok()
    }

    /// The arguments of `engine pull IMAGE`.
    pub fn pull_args(image: &str) -> Vec<String> {
        vec!["pull".into(), image.into()]
    }

    /// The arguments of `engine run` for `run`'s container: the checkout at the workdir
    /// (its `.git` read-only: the publish stage's git runs on it, outside the container),
    /// `$ARTIFACT_DIR` on its artifacts folder, the task's variables from its environment
    /// file (so no value is on a command line), its limits and cache volumes.
    pub fn run_args(&self, run: &RunSpec<'_>) -> Vec<String> {
        let RunSpec {
            spec,
            job,
            ws,
            artifacts,
            env_file,
            repository,
            network,
        } = *run;
        let workdir = spec.workdir().trim_end_matches('/');
        let bind = |src: &Path, dst: &str, readonly: bool| {
            format!(
                "type=bind,src={},dst={dst}{}",
                src.display(),
                if readonly { ",readonly" } else { "" }
            )
        };
        let mut args: Vec<String> = vec![
            "run".into(),
            "--rm".into(),
            "--name".into(),
            Engine::name(job),
            "--label".into(),
            format!("{JOB_LABEL}={job}"),
            "--label".into(),
            format!("{WORKDIR_LABEL}={}", self.workdir),
            // Pulled or not by the worker before, per the task's `pull`.
            "--pull".into(),
            "never".into(),
            "--mount".into(),
            bind(&ws.repo, workdir, false),
        ];
        let git = ws.repo.join(".git");
        if git.is_dir() {
            args.extend([
                "--mount".into(),
                bind(&git, &format!("{workdir}/.git"), true),
            ]);
        }
        args.extend([
            "--mount".into(),
            bind(artifacts, ARTIFACT_DIR, false),
            "--workdir".into(),
            workdir.into(),
            "--env-file".into(),
            env_file.display().to_string(),
            "--env".into(),
            format!("ARTIFACT_DIR={ARTIFACT_DIR}"),
            "--env".into(),
            format!("JOB_ID={job}"),
            "--env".into(),
            format!("REPOSITORY={repository}"),
        ]);
        for volume in &spec.cache_volumes {
            args.extend([
                "--mount".into(),
                format!(
                    "type=volume,src={},dst={}",
                    cache_volume(&volume.name),
                    volume.target
                ),
            ]);
        }
        // Root in the container gains nothing more from a setuid program.
        args.extend(["--security-opt".into(), "no-new-privileges".into()]);
        if let Some(resources) = &spec.resources {
            if let Some(cpus) = &resources.cpus {
                args.extend(["--cpus".into(), cpus.clone()]);
            }
            if let Some(memory) = &resources.memory {
                args.extend(["--memory".into(), memory.clone()]);
            }
        }
        if !network {
            args.extend(["--network".into(), "none".into()]);
        }
        if self.kind == EngineKind::Podman {
            // podman passes the host's proxy variables into the container by default.
            args.push("--http-proxy=false".into());
            // The container's own end, should the worker die before it can remove it.
            let grace = 30;
            args.extend([
                "--timeout".into(),
                (spec.timeout_seconds() + grace).to_string(),
            ]);
        }
        args.push("--".into());
        args.push(spec.image.clone().unwrap_or_default());
        args.extend(spec.command.iter().flatten().cloned());
        args
    }
}

/// The engine's name for a task's cache volume: prefixed, so that a task can only reach
/// volumes made for tasks, never another of the engine's (a database's data, say).
pub fn cache_volume(name: &str) -> String {
    format!("stepwise-cache-{name}")
}

/// One container run, as [`Engine::run_args`] needs it.
#[derive(Debug, Clone, Copy)]
pub struct RunSpec<'a> {
    pub spec: &'a ContainerSpec,
    pub job: &'a str,
    pub ws: &'a Workspace,
    /// The host folder mounted as `$ARTIFACT_DIR`.
    pub artifacts: &'a Path,
    /// The task's variables, one `NAME=value` a line.
    pub env_file: &'a Path,
    pub repository: &'a str,
    /// Whether the container has the engine's network (else `--network none`).
    pub network: bool,
}

/// The task's variables as an environment file: `NAME=value` a line (the contract refuses
/// line breaks in values).
pub fn env_file(spec: &ContainerSpec) -> String {
    spec.env
        .iter()
        .map(|(name, value)| format!("{name}={value}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use contract::container::{CacheVolume, ContainerResources};

    use super::*;

    #[test]
    fn a_run_mounts_the_checkout_with_its_git_read_only_and_keeps_values_off_the_command_line() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = Workspace::at(tmp.path().join("j1"));
        std::fs::create_dir_all(ws.repo.join(".git")).unwrap();
        let engine = Engine {
            program: "podman".into(),
            kind: EngineKind::Podman,
            workdir: "/w".into(),
        };
        let spec = ContainerSpec {
            enabled: true,
            image: Some("python:3.12-slim".into()),
            command: Some(vec!["python".into(), "-c".into(), "print(1)".into()]),
            env: [("TOKEN".to_string(), "s3cret".to_string())].into(),
            timeout_seconds: Some(60),
            resources: Some(ContainerResources {
                cpus: Some("1.5".into()),
                memory: Some("512m".into()),
            }),
            cache_volumes: vec![CacheVolume {
                name: "pip".into(),
                target: "/root/.cache/pip".into(),
            }],
            ..ContainerSpec::default()
        };
        let args = engine.run_args(&RunSpec {
            spec: &spec,
            job: "j1",
            ws: &ws,
            artifacts: Path::new("/a/container"),
            env_file: Path::new("/e/env"),
            repository: "octo/a",
            network: false,
        });
        let line = args.join(" ");
        let repo = ws.repo.display();
        for part in [
            "run --rm --name stepwise-j1 --label stepwise.job=j1 --label stepwise.workdir=/w",
            "--pull never",
            &format!("--mount type=bind,src={repo},dst=/workspace "),
            &format!("--mount type=bind,src={repo}/.git,dst=/workspace/.git,readonly"),
            "--mount type=bind,src=/a/container,dst=/stepwise/artifacts",
            "--workdir /workspace --env-file /e/env",
            "--env ARTIFACT_DIR=/stepwise/artifacts --env JOB_ID=j1 --env REPOSITORY=octo/a",
            "--mount type=volume,src=stepwise-cache-pip,dst=/root/.cache/pip",
            "--security-opt no-new-privileges",
            "--cpus 1.5 --memory 512m --network none --http-proxy=false --timeout 90",
            "-- python:3.12-slim python -c print(1)",
        ] {
            assert!(line.contains(part), "{part}\nnot in\n{line}");
        }
        assert!(!line.contains("s3cret"), "{line}");
        assert_eq!(env_file(&spec), "TOKEN=s3cret\n");
    }
}
