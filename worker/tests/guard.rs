//! The guard each process group gets, seen from outside: while a run goes on it is there
//! (a child of the worker, which adopts it), it leaves when the run ends, and a run that is
//! abandoned midway (its future dropped) still leaves nothing of its group behind. One
//! test at a time in this file: they count this process's guards.

use std::path::Path;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use worker::process::{Limits, run};
use worker::runtime::Invocation;
use worker::testing::{alive, group_members};

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn invocation(dir: &Path, prompt: &str) -> Invocation {
    Invocation::plain(
        worker::testing::fixture("fake-agent"),
        vec!["-p".into(), prompt.into()],
        dir.to_path_buf(),
    )
}

/// This process's children named `stepwise-guard`, as (pid, state).
fn guards() -> Vec<(u32, char)> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let name = &stat[stat.find('(')? + 1..stat.rfind(')')?];
            let mut rest = stat[stat.rfind(')')? + 1..].split_whitespace();
            let state = rest.next()?.chars().next()?;
            let ppid: u32 = rest.next()?.parse().ok()?;
            (name == "stepwise-guard" && ppid == me).then_some((pid, state))
        })
        .collect()
}

async fn pid_in(file: &Path) -> u32 {
    until(Duration::from_secs(5), "a pid file", || {
        std::fs::read_to_string(file).ok()?.trim().parse().ok()
    })
    .await
}

async fn until<T>(limit: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(found) = check() {
            return found;
        }
        assert!(Instant::now() < deadline, "{what} never happened");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_run_has_a_guard_while_it_runs_and_none_once_it_ended() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("agent.pid");
    let call = invocation(
        dir.path(),
        &format!("@fake pid {}\n@fake sleep 1", ready.display()),
    );
    let running = tokio::spawn(async move {
        run(
            &call,
            Limits::default(),
            &CancellationToken::new(),
            |_, _| {},
        )
        .await
    });
    pid_in(&ready).await;
    let during = guards();
    assert_eq!(during.len(), 1, "{during:?}");
    running.await.unwrap().unwrap();
    // Released, it exits, and the worker reaps it: no zombie either.
    until(Duration::from_secs(1), "the guard leaving", || {
        guards().is_empty().then_some(())
    })
    .await;
}

#[tokio::test]
async fn an_abandoned_run_leaves_nothing_of_its_group_behind() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let (agent_file, child_file) = (dir.path().join("agent.pid"), dir.path().join("child.pid"));
    let call = invocation(
        dir.path(),
        &format!(
            "@fake pid {}\n@fake ignore-term\n@fake spawn-child {}\n@fake sleep 60",
            agent_file.display(),
            child_file.display()
        ),
    );
    let running = tokio::spawn(async move {
        run(
            &call,
            Limits::default(),
            &CancellationToken::new(),
            |_, _| {},
        )
        .await
    });
    let agent = pid_in(&agent_file).await;
    let child = pid_in(&child_file).await;
    assert!(alive(child));

    // Dropping the run's future runs no stop sequence: only the guard can end the group.
    running.abort();
    let abandoned = Instant::now();
    let _ = running.await;
    until(Duration::from_secs(1), "the group dying", || {
        group_members(agent)
            .iter()
            .all(|&(_, state)| state == 'Z')
            .then_some(())
    })
    .await;
    eprintln!("run abandoned → its group dead: {:?}", abandoned.elapsed());
    // Then reaped, zombies and guard alike.
    until(
        Duration::from_secs(2),
        "the group and its guard reaped",
        || (group_members(agent).is_empty() && guards().is_empty()).then_some(()),
    )
    .await;
    eprintln!("… and reaped: {:?}", abandoned.elapsed());
}

#[tokio::test]
async fn a_command_that_cannot_start_leaves_no_guard_behind() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut call = invocation(dir.path(), "x");
    call.program = dir.path().join("no-such-agent");
    for _ in 0..3 {
        let error = run(
            &call,
            Limits::default(),
            &CancellationToken::new(),
            |_, _| {},
        )
        .await
        .unwrap_err();
        assert!(error.to_string().contains("could not start"), "{error}");
    }
    until(Duration::from_secs(1), "the guards leaving", || {
        guards().is_empty().then_some(())
    })
    .await;
}
