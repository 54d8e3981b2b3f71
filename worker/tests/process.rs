//! The process runner against a real child: the scripted agent in tests/fixtures, which
//! prints claude-shaped stream-json, sleeps, fails, ignores SIGTERM and leaves grandchildren
//! (orphaned ones too) on demand.

use std::path::{Path, PathBuf};
use std::time::Duration;

use contract::RuntimeMode;
use tokio_util::sync::CancellationToken;
use worker::process::{Ended, Limits, Pipe, run};
use worker::runtime::{Invocation, Progress, parse_line};
use worker::testing::{alive, group_members};

fn fake_agent() -> PathBuf {
    worker::testing::fixture("fake-agent")
}

fn invocation(dir: &Path, prompt: &str) -> Invocation {
    Invocation {
        env: vec![("HOME".into(), dir.display().to_string())],
        ..Invocation::plain(
            fake_agent(),
            vec!["-p".into(), prompt.into(), "--verbose".into()],
            dir.to_path_buf(),
        )
    }
}

async fn pid_in(file: &Path) -> u32 {
    for _ in 0..500 {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|text| text.trim().parse().ok())
        {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{} never appeared", file.display());
}

#[tokio::test]
async fn a_prompt_too_large_for_an_argument_reaches_the_cli_whole_on_stdin() {
    let dir = tempfile::tempdir().unwrap();
    // 200 KB: one argument of 128 KiB or more fails to start (E2BIG).
    let mut prompt = "x".repeat(200 * 1024);
    prompt.push_str("\n@fake write tail.txt the end\n");
    let mut call = invocation(dir.path(), "");
    call.args = vec!["-p".into(), "--verbose".into()];
    call.stdin = Some(prompt.clone());
    let ended = run(
        &call,
        Limits::default(),
        &CancellationToken::new(),
        |_, _| {},
    )
    .await
    .unwrap();
    assert!(
        matches!(ended, Ended::Exited(s) if s.success()),
        "{ended:?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("tail.txt")).unwrap(),
        "the end\n"
    );

    let mut as_argument = invocation(dir.path(), &prompt);
    as_argument.args[1] = prompt;
    let refused = run(
        &as_argument,
        Limits::default(),
        &CancellationToken::new(),
        |_, _| {},
    )
    .await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("Argument list too long")),
        "the same prompt as an argument: {:?}",
        refused.map(|_| ())
    );
}

#[tokio::test]
async fn a_variable_the_invocation_removes_does_not_reach_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("env.log");
    let mut call = invocation(dir.path(), "@fake say hi");
    call.program = "/bin/sh".into();
    call.args = vec![
        "-c".into(),
        format!(
            "echo \"${{PATH:+path}} ${{HOME:-no home}}\" > '{}'",
            log.display()
        ),
    ];
    call.env_remove = vec!["HOME".into()];
    call.env.clear();
    run(
        &call,
        Limits::default(),
        &CancellationToken::new(),
        |_, _| {},
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "path no home\n");
}

#[tokio::test]
async fn output_streams_line_by_line_and_the_exit_status_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut call = invocation(
        dir.path(),
        "Do it\n@fake say hello\n@fake write notes.txt hi\n@fake fail 3",
    );
    let settings = dir.path().join("home/.gemini/settings.json");
    call.files.push((settings.clone(), "{}\n".into()));
    let mut lines = Vec::new();
    let ended = run(
        &call,
        Limits::default(),
        &CancellationToken::new(),
        |pipe, line| lines.push((pipe, line.to_string())),
    )
    .await
    .unwrap();
    let Ended::Exited(status) = ended else {
        panic!("{ended:?}")
    };
    assert_eq!(status.code(), Some(3));
    assert!(
        lines.iter().all(|(pipe, _)| *pipe == Pipe::Stdout),
        "{lines:?}"
    );
    let progress: Vec<Progress> = lines
        .iter()
        .flat_map(|(_, line)| parse_line(RuntimeMode::Claude, line))
        .collect();
    assert_eq!(
        progress,
        [
            Progress::Message("hello".into()),
            Progress::Action("Edit".into()),
            Progress::Finished {
                ok: false,
                summary: Some("failed on purpose".into())
            },
        ]
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
        "hi\n"
    );
    assert_eq!(std::fs::read_to_string(settings).unwrap(), "{}\n");
}

#[tokio::test]
async fn output_without_newlines_comes_in_bounded_pieces_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let call = Invocation {
        program: "bash".into(),
        args: vec!["-c".into(), "head -c 300000 /dev/zero | tr '\\0' x".into()],
        ..invocation(dir.path(), "")
    };
    let mut pieces = Vec::new();
    let ended = run(
        &call,
        Limits::default(),
        &CancellationToken::new(),
        |_, line| pieces.push(line.len()),
    )
    .await
    .unwrap();
    assert!(
        matches!(ended, Ended::Exited(status) if status.success()),
        "{ended:?}"
    );
    assert!(pieces.iter().all(|&n| n <= 64 * 1024), "{pieces:?}");
    assert_eq!(pieces.iter().sum::<usize>(), 300_000, "{pieces:?}");
}

#[tokio::test]
async fn cancel_stops_the_whole_group_even_when_it_ignores_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("child.pid");
    let call = invocation(
        dir.path(),
        &format!(
            "@fake ignore-term\n@fake spawn-child {}\n@fake sleep 60",
            pidfile.display()
        ),
    );
    let cancel = CancellationToken::new();
    let limits = Limits {
        timeout: Duration::from_secs(120),
        grace: Duration::from_millis(300),
    };
    let stopper = cancel.clone();
    let running_run = tokio::spawn(async move { run(&call, limits, &stopper, |_, _| {}).await });
    let grandchild = pid_in(&pidfile).await;
    assert!(alive(grandchild));
    cancel.cancel();
    let ended = tokio::time::timeout(Duration::from_secs(20), running_run)
        .await
        .expect("the run stopped")
        .unwrap()
        .unwrap();
    let Ended::Stopped {
        cancelled,
        stop,
        killed,
    } = ended
    else {
        panic!("{ended:?}")
    };
    assert!(cancelled);
    assert!(killed, "SIGTERM was ignored, so only SIGKILL could stop it");
    assert!(stop >= limits.grace, "{stop:?}");
    assert!(!alive(grandchild), "the grandchild {grandchild} survived");
}

#[tokio::test]
async fn cancel_also_stops_what_the_cli_started_in_a_session_of_its_own() {
    // As gemini runs a shell command: in a pseudo-terminal's session, so outside the
    // CLI's process group.
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("session.pid");
    let mut call = invocation(dir.path(), "");
    call.program = "/bin/sh".into();
    call.args = vec![
        "-c".into(),
        format!(
            "setsid sleep 60 & echo $! > '{}'; sleep 60",
            pidfile.display()
        ),
    ];
    let cancel = CancellationToken::new();
    let limits = Limits {
        timeout: Duration::from_secs(120),
        grace: Duration::from_millis(300),
    };
    let stopper = cancel.clone();
    let running_run = tokio::spawn(async move { run(&call, limits, &stopper, |_, _| {}).await });
    let escaped = pid_in(&pidfile).await;
    let session = || {
        let stat = std::fs::read_to_string(format!("/proc/{escaped}/stat")).unwrap_or_default();
        let fields: Vec<String> = stat
            .rsplit(')')
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .map(String::from)
            .collect();
        fields.get(3).and_then(|s| s.parse::<i64>().ok())
    };
    // `$!` is known before setsid has run.
    for _ in 0..200 {
        if session() == Some(i64::from(escaped)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        session(),
        Some(i64::from(escaped)),
        "it leads a session of its own"
    );
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(20), running_run)
        .await
        .expect("the run stopped")
        .unwrap()
        .unwrap();
    assert!(
        !alive(escaped),
        "{escaped}, in its own session, survived the cancel"
    );
}

#[tokio::test]
async fn a_cli_that_honours_sigterm_stops_without_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let call = invocation(dir.path(), "@fake say started\n@fake sleep 60");
    let cancel = CancellationToken::new();
    let limits = Limits {
        timeout: Duration::from_secs(120),
        grace: Duration::from_secs(30),
    };
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let stopper = cancel.clone();
    let running_run = tokio::spawn(async move {
        let mut started_tx = Some(started_tx);
        run(&call, limits, &stopper, |_, line| {
            if let Some(tx) = started_tx.take_if(|_| line.contains("started")) {
                let _ = tx.send(());
            }
        })
        .await
    });
    started.await.unwrap();
    cancel.cancel();
    let ended = running_run.await.unwrap().unwrap();
    let Ended::Stopped { killed, stop, .. } = ended else {
        panic!("{ended:?}")
    };
    assert!(!killed);
    assert!(stop < limits.grace, "{stop:?}");
}

#[tokio::test]
async fn the_timeout_stops_a_run_that_never_ends() {
    let dir = tempfile::tempdir().unwrap();
    let call = invocation(dir.path(), "@fake sleep 60");
    let limits = Limits {
        timeout: Duration::from_millis(300),
        grace: Duration::from_secs(5),
    };
    let ended = run(&call, limits, &CancellationToken::new(), |_, _| {})
        .await
        .unwrap();
    assert!(
        matches!(
            ended,
            Ended::Stopped {
                cancelled: false,
                ..
            }
        ),
        "{ended:?}"
    );
}

#[tokio::test]
async fn what_a_finished_cli_left_running_is_stopped_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("child.pid");
    let call = invocation(
        dir.path(),
        &format!("@fake spawn-child {}", pidfile.display()),
    );
    let ended = tokio::time::timeout(
        Duration::from_secs(20),
        run(
            &call,
            Limits::default(),
            &CancellationToken::new(),
            |_, _| {},
        ),
    )
    .await
    .expect("the run ended with its CLI")
    .unwrap();
    assert!(
        matches!(ended, Ended::Exited(status) if status.success()),
        "{ended:?}"
    );
    let grandchild = pid_in(&pidfile).await;
    for _ in 0..200 {
        if !alive(grandchild) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the grandchild {grandchild} outlived its CLI");
}

#[tokio::test]
async fn a_missing_cli_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut call = invocation(dir.path(), "x");
    call.program = dir.path().join("no-such-agent");
    let error = run(
        &call,
        Limits::default(),
        &CancellationToken::new(),
        |_, _| {},
    )
    .await
    .unwrap_err();
    assert!(error.to_string().contains("could not start"), "{error}");
    assert!(error.to_string().contains("no-such-agent"), "{error}");
}

/// The parent of process `pid`.
fn parent_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    rest.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test]
async fn after_a_cancel_nothing_of_the_group_is_left_not_even_a_zombie() {
    let dir = tempfile::tempdir().unwrap();
    let (agent_file, orphan_file, child_file) = (
        dir.path().join("agent.pid"),
        dir.path().join("orphan.pid"),
        dir.path().join("child.pid"),
    );
    let call = invocation(
        dir.path(),
        &format!(
            "@fake pid {}\n@fake ignore-term\n@fake orphan {}\n@fake spawn-child {}\n@fake sleep 60",
            agent_file.display(),
            orphan_file.display(),
            child_file.display()
        ),
    );
    let cancel = CancellationToken::new();
    let limits = Limits {
        timeout: Duration::from_secs(120),
        grace: Duration::from_millis(300),
    };
    let stopper = cancel.clone();
    let running_run = tokio::spawn(async move { run(&call, limits, &stopper, |_, _| {}).await });
    let agent = pid_in(&agent_file).await;
    let orphan = pid_in(&orphan_file).await;
    pid_in(&child_file).await;
    // The orphan's parent exited; it was handed to this process, not to PID 1.
    assert_eq!(parent_of(orphan), std::process::id());
    assert!(alive(orphan));

    cancel.cancel();
    let ended = running_run.await.unwrap().unwrap();
    assert!(
        matches!(
            ended,
            Ended::Stopped {
                cancelled: true,
                killed: true,
                ..
            }
        ),
        "{ended:?}"
    );
    // Checked at once: the run returns only once the group is gone and reaped.
    assert_eq!(group_members(agent), [], "left of the group (Z: a zombie)");
}

#[tokio::test]
async fn the_orphans_a_finished_cli_left_are_killed_and_reaped_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let (agent_file, orphan_file) = (dir.path().join("agent.pid"), dir.path().join("orphan.pid"));
    let call = invocation(
        dir.path(),
        &format!(
            "@fake pid {}\n@fake orphan {}",
            agent_file.display(),
            orphan_file.display()
        ),
    );
    let ended = tokio::time::timeout(
        Duration::from_secs(20),
        run(
            &call,
            Limits::default(),
            &CancellationToken::new(),
            |_, _| {},
        ),
    )
    .await
    .expect("the run ended with its CLI")
    .unwrap();
    assert!(
        matches!(ended, Ended::Exited(status) if status.success()),
        "{ended:?}"
    );
    let agent = pid_in(&agent_file).await;
    assert_eq!(group_members(agent), [], "left of the group (Z: a zombie)");
}
