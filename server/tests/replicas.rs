//! Several `stepwise serve` replicas on one PostgreSQL database, with `stepwise worker`
//! processes on them, for real: replicas started together make one admin token; a job
//! submitted on one is watched and cancelled through another; every artifact downloads
//! through every replica; and a replica killed mid-step strands nothing: its worker stops
//! the step and publishes nothing, and the job is finished once, elsewhere, with one pull
//! request.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use contract::JobState;
use futures_util::StreamExt;
use serde_json::json;
use worker::client::QueueClient;
use worker::testing::alive;

use common::{BIN, Process, Served, pid_in, wait_for, wait_up_to};

mod common;

fn serve(database: &str, data: &Path, site: &Path) -> Served {
    std::fs::create_dir_all(site.join("pkg")).unwrap();
    let mut command = Command::new(BIN);
    command
        .args([
            "serve",
            "--port",
            "0",
            "--no-worker",
            "--database-url",
            database,
        ])
        .arg("--data-dir")
        .arg(data)
        .arg("--site-root")
        .arg(site)
        .env("RUST_LOG", "warn")
        .stderr(Stdio::inherit());
    common::serve(command)
}

/// An artifact's page as a browser logged in on `url` with `token` gets it.
async fn artifact_page(url: &str, token: &str, job: &str, artifact: &str) -> String {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let login = http
        .post(format!("{url}/login"))
        .header("origin", url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={token}&next=%2F"))
        .send()
        .await
        .unwrap();
    let cookie = login
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.split(';').next().filter(|c| !c.ends_with('=')))
        .unwrap_or_else(|| panic!("no session from logging in on {url}: {login:?}"))
        .to_string();
    let page = http
        .get(format!("{url}/tasks/queue/{job}/artifacts/{artifact}"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200, "{url}");
    page.text().await.unwrap()
}

fn worker_token(database: &str, name: &str) -> String {
    common::worker_token(&["--database-url".as_ref(), database.as_ref()], name)
}

/// A worker on `server` alone, with a 3 s lease and the recorded gh shim logging to
/// `dir/gh.log`.
fn worker(server: &str, token: &str, dir: &Path) -> Process {
    let child = Command::new(BIN)
        .args(["worker", "--server", server, "--token", token])
        .args([
            "--capability",
            "claude",
            "--capability",
            "git",
            "--capability",
            "gh",
        ])
        .args(["--lease-seconds", "3", "--grace-seconds", "1"])
        // The test reads the agent's host pid from a file it writes outside its workspace;
        // the sandbox's own tests (`sandbox.rs`) kill a worker whose steps are boxed.
        .args(["--sandbox", "off"])
        .arg("--claude-bin")
        .arg(worker::testing::fixture("fake-agent"))
        .arg("--gh-bin")
        .arg(worker::testing::fixture("gh"))
        .arg("--workdir")
        .arg(dir.join("work"))
        .env("GH_SHIM_LOG", dir.join("gh.log"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    Process(child)
}

fn task(remote: &str, publish: &str, steps: serde_json::Value) -> serde_json::Value {
    json!({ "payload": {
        "repository": remote,
        "task": {
            "instructions": "Replicated work",
            "runtime": { "mode": "claude" },
            "publish": { "mode": publish },
            "steps": steps,
        },
    }})
}

fn pull_requests(gh_log: &Path) -> usize {
    std::fs::read_to_string(gh_log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("pr create"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_one_database_serve_watch_cancel_and_finish_each_others_jobs() {
    let admin_url = std::env::var("STEPWISE_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string());
    let scratch = queue::ScratchPostgres::create(&admin_url, "stepwise_replicas")
        .await
        .expect("PostgreSQL at STEPWISE_TEST_PG_URL");
    let database = scratch.url().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let dir = |name: &str| -> PathBuf { tmp.path().join(name) };
    let site = dir("site");

    // Three replicas started at once on an empty database: one first admin token.
    let starting: Vec<_> = ["a", "b", "c"]
        .into_iter()
        .map(|name| {
            let (database, data, site) = (database.clone(), dir(name), site.clone());
            std::thread::spawn(move || serve(&database, &data, &site))
        })
        .collect();
    let mut replicas: Vec<Served> = starting.into_iter().map(|t| t.join().unwrap()).collect();
    let admins: Vec<String> = replicas.iter().filter_map(|r| r.admin.clone()).collect();
    assert_eq!(
        admins.len(),
        1,
        "replicas made {} first admin tokens",
        admins.len()
    );
    let listed = Command::new(BIN)
        .args(["token", "list", "--database-url", &database])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    let tokens = listed.lines().filter(|l| l.contains("swu_")).count();
    assert_eq!(tokens, 1, "{listed}");
    drop(replicas.pop());
    let (b, a) = (replicas.pop().unwrap(), replicas.pop().unwrap());
    let on_a = QueueClient::new(&a.url, &admins[0]).unwrap();
    let on_b = QueueClient::new(&b.url, &admins[0]).unwrap();
    let remote = worker::testing::remote(tmp.path());
    let w1_dir = dir("w1");
    std::fs::create_dir_all(&w1_dir).unwrap();
    let _w1 = worker(&a.url, &worker_token(&database, "w1"), &w1_dir);

    // Submitted on B, watched live through A, cancelled through B: A's worker stops it.
    let pid = dir("cancel.pid");
    let job = on_b
        .create_job(&task(
            &remote,
            "none",
            json!([{ "instructions": format!("@fake pid {}\n@fake sleep 30", pid.display()) }]),
        ))
        .await
        .unwrap();
    let mut watched = on_a.stream_events(&job.id, None);
    let started = wait_for("the step starting, seen through A", async || {
        let event = tokio::time::timeout(Duration::from_secs(1), watched.next())
            .await
            .ok()??
            .ok()?;
        (event.kind == contract::job::task::STEP_STARTED).then_some(event)
    })
    .await;
    assert_eq!(started.job_id, job.id);
    let agent = wait_for("the agent's pid", async || pid_in(&pid)).await;
    let asked = Instant::now();
    on_b.cancel_job(&job.id, Some("changed my mind"))
        .await
        .unwrap();
    let cancelled = wait_for("the job cancelled", async || {
        let job = on_a.get_job(&job.id).await.ok()?;
        (job.status == JobState::Cancelled).then_some(job)
    })
    .await;
    eprintln!(
        "cancel through B → cancelled by A's worker in {} ms",
        asked.elapsed().as_millis()
    );
    assert!(!alive(agent));
    assert_eq!(cancelled.cancel_reason.as_deref(), Some("changed my mind"));

    // Every artifact downloads the same through both replicas.
    let job = on_a
        .create_job(&task(
            &remote,
            "none",
            json!([{ "instructions": "@fake write notes.txt hello from a replica\n@fake say done" }]),
        ))
        .await
        .unwrap();
    wait_for("the job succeeding", async || {
        let job = on_b.get_job(&job.id).await.ok()?;
        (job.status == JobState::Succeeded).then_some(())
    })
    .await;
    let artifacts = on_b.list_artifacts(&job.id).await.unwrap();
    assert!(artifacts.len() >= 4, "{artifacts:?}");
    for artifact in &artifacts {
        let through_a = on_a.download_artifact(&job.id, &artifact.id).await.unwrap();
        let through_b = on_b.download_artifact(&job.id, &artifact.id).await.unwrap();
        assert_eq!(through_a, through_b, "{}", artifact.name);
        assert_eq!(through_a.len() as u64, artifact.size, "{}", artifact.name);
    }
    // And the artifact page shows it through both: the page reads the bytes from the
    // database, not from the disk of the replica that took the upload.
    let patch = artifacts
        .iter()
        .find(|a| a.name.ends_with("changes.patch"))
        .unwrap_or_else(|| panic!("a changes.patch among {artifacts:?}"));
    for replica in [&a, &b] {
        let html = artifact_page(&replica.url, &admins[0], &job.id.to_string(), &patch.id).await;
        assert!(
            html.contains("hello from a replica") && !html.contains("Could not show"),
            "the artifact page through {}: {html}",
            replica.url
        );
    }

    // Replica A killed mid-step: its worker loses its lease and publishes nothing; B
    // requeues the job, and B's worker finishes it once, with one pull request.
    let pid = dir("failover.pid");
    let job = on_b
        .create_job(&task(
            &remote,
            "pr",
            json!([{ "instructions": format!(
                "@fake pid {}\n@fake write work.txt done\n@fake sleep 15",
                pid.display()
            ) }]),
        ))
        .await
        .unwrap();
    let first = wait_for("the agent's pid", async || pid_in(&pid)).await;
    let w2_dir = dir("w2");
    std::fs::create_dir_all(&w2_dir).unwrap();
    let _w2 = worker(&b.url, &worker_token(&database, "w2"), &w2_dir);
    let mut a = a;
    a.process.0.kill().unwrap();
    a.process.0.wait().unwrap();
    let killed = Instant::now();
    // Its lease is 3 s, renewed last at most a heartbeat before the kill, and the step is
    // stopped a margin before the lease ends, with a 1 s grace: well within 6 s, where the
    // agent would sleep on for 15 s had nothing stopped it.
    wait_up_to(
        Duration::from_secs(6),
        "w1 stopping the step it can no longer report, within its lease",
        async || (!alive(first)).then_some(()),
    )
    .await;
    eprintln!(
        "replica killed → w1 stopped its step in {} ms",
        killed.elapsed().as_millis()
    );
    let done = wait_for("the job finished by w2", async || {
        let job = on_b.get_job(&job.id).await.ok()?;
        job.status.is_terminal().then_some(job)
    })
    .await;
    assert_eq!(done.status, JobState::Succeeded, "{done:?}");
    assert_eq!(done.attempt, 2);
    assert_eq!(done.claimed_by.as_deref(), Some("w2"));
    assert_eq!(pull_requests(&w1_dir.join("gh.log")), 0, "w1 published");
    assert_eq!(pull_requests(&w2_dir.join("gh.log")), 1);
    let branches = worker::testing::run(Path::new(&remote), &["branch", "--list", "task/*"]);
    assert_eq!(branches.lines().count(), 1, "{branches}");
    assert!(
        done.result_summary
            .as_deref()
            .is_some_and(|s| s.contains("pull request")),
        "{done:?}"
    );

    drop((b, _w1, _w2));
    scratch.drop_database().await.unwrap();
}
