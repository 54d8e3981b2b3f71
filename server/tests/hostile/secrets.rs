//! Secrets never leave the worker in clear. Three of them, each known to the worker a
//! different way (a configured secret variable, a task's `repoAuthRef`, and a GitHub token
//! that nothing names and only its shape gives away), are made to travel every path out of
//! a run: agent messages, plain stdout, stderr, a failing step's result (the job's
//! errorMessage), a file edit (the patches), a push a remote refuses, and a failing `gh`.
//! Then every API answer, every page and the database itself are searched for each secret
//! and for its first and last 12 characters (a cut before redaction leaks a part).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use contract::job::task;
use contract::limits::{EVENT_MESSAGE_BYTES, REPORTED_TEXT_BYTES};
use contract::{Job, JobState};
use serde_json::{Value, json};
use worker::runner::WorkerConfig;

use super::live::LiveSite;
use stepwise::testing::site::Backend;

/// Named by the worker's `--secret-env`: known by value, shaped like nothing.
const CONFIGURED: &str = "deploy-key-Q7v9mZ2xLp4rT8wKc3Hn";
/// What the tasks' `repoAuthRef` file holds: known by value once the ref is resolved.
const REPO_REF: &str = "repo-pass-H3nB6cY1uJ5sD0fGx8Vb";
/// A GitHub token shape (`ghp_` and 36 more) nobody configured: caught by its shape alone.
const UNNAMED: &str = "ghp_Zr8Kq2Wm5Tn7Yb1Xc4Vd6Fs9Gh3Jk0LpAeMq";
const SECRET_ENV: &str = "HOSTILE_DEPLOY_KEY";
const REDACTED: &str = worker::redact::REDACTED;
/// How much of a step's summary the worker keeps (a failed step's is its errorMessage).
const SUMMARY_CHARS: usize = 500;
/// How the errorMessage of a failed `gh` begins, up to what gh said.
const GH_FAILED: &str = "moonmind.task.publish: gh pr create failed (exit status: 1): ";

#[tokio::test]
async fn no_secret_reaches_the_api_pages_artifacts_or_database_on_sqlite() {
    no_secret_leaves_the_worker(Backend::Sqlite).await;
}

#[tokio::test]
async fn no_secret_reaches_the_api_pages_artifacts_or_database_on_postgres() {
    no_secret_leaves_the_worker(Backend::Postgres).await;
}

/// What a secret may not show up as: whole, or its first or last 12 characters.
fn needles() -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    for (secret, name) in [
        (CONFIGURED, "the configured secret"),
        (REPO_REF, "the repoAuthRef secret"),
        (UNNAMED, "the unnamed ghp_ token"),
    ] {
        out.push((secret.to_string(), name));
        out.push((secret[..12].to_string(), name));
        out.push((secret[secret.len() - 12..].to_string(), name));
    }
    out
}

/// Where the worker, its remotes and the secrets' files live: outside the site's data
/// directory, which is searched.
struct Rig {
    tmp: tempfile::TempDir,
    /// A plain bare remote, and one whose pre-receive hook refuses every push, echoing
    /// the secrets on stderr the way a host that prints credentials back would.
    plain: String,
    hooked: String,
    /// `file://…` of the repoAuthRef secret.
    repo_ref: String,
}

impl Rig {
    fn new() -> Rig {
        let tmp = tempfile::tempdir().unwrap();
        let secrets = tmp.path().join("secrets");
        std::fs::create_dir_all(&secrets).unwrap();
        for (name, value) in [
            ("configured", CONFIGURED),
            ("repo", REPO_REF),
            ("unnamed", UNNAMED),
            ("all", &format!("{CONFIGURED} {REPO_REF} {UNNAMED}")),
        ] {
            std::fs::write(secrets.join(name), format!("{value}\n")).unwrap();
        }
        let all = secrets.join("all");
        let plain = worker::testing::remote(&tmp.path().join("plain"));
        let hooked = worker::testing::remote(&tmp.path().join("hooked"));
        executable(
            &Path::new(&hooked).join("hooks/pre-receive"),
            &format!(
                "#!/usr/bin/env bash\necho \"refused: credentials $(cat '{}') are not allowed here\" >&2\nexit 1\n",
                all.display()
            ),
        );
        // gh gets the task's token in GH_TOKEN (the repoAuthRef's, as no publishAuthRef
        // is given), and says it back like gh's "Bad credentials" does; for the pull
        // request titled "Long" it says so much that the errorMessage's cut falls in a
        // secret.
        let pad = ".".repeat(REPORTED_TEXT_BYTES - GH_FAILED.len() - 12);
        std::fs::write(secrets.join("pad"), pad).unwrap();
        executable(
            &tmp.path().join("failing-gh"),
            &format!(
                "#!/usr/bin/env bash\nif [[ \" $* \" == *' --title Long '* ]]; then\n  \
                 cat '{pad}' '{all}' >&2\nelse\n  \
                 echo \"GraphQL: Bad credentials for token $GH_TOKEN ($(cat '{all}'))\" >&2\nfi\nexit 1\n",
                pad = secrets.join("pad").display(),
                all = all.display()
            ),
        );
        let repo_ref = format!("file://{}", secrets.join("repo").display());
        Rig {
            tmp,
            plain,
            hooked,
            repo_ref,
        }
    }

    fn secret_file(&self, name: &str) -> PathBuf {
        self.tmp.path().join("secrets").join(name)
    }

    fn worker_config(&self) -> WorkerConfig {
        let mut stages = worker::testing::stage_config(self.tmp.path());
        stages.gh = self.tmp.path().join("failing-gh");
        let mut config = WorkerConfig::new(stages);
        config.claim_wait = Duration::from_secs(2);
        config.concurrency = 4;
        // How `stepwise worker --secret-env HOSTILE_DEPLOY_KEY` fills the list.
        config.secrets = worker::redact::secrets_from_env(&[SECRET_ENV.into()], |name| {
            (name == SECRET_ENV).then(|| CONFIGURED.to_string())
        });
        config
    }

    /// A step whose agent puts every secret on every output it has, and in a file.
    fn leaking_step(&self) -> Value {
        let mut script = String::new();
        for (i, name) in ["configured", "repo", "unnamed"].iter().enumerate() {
            script += &format!(
                "@fake secret {}\n@fake say the agent says @SECRET@\n@fake print stdout @SECRET@\n\
                 @fake warn stderr @SECRET@\n@fake write leak-{i}.txt @SECRET@\n",
                self.secret_file(name).display()
            );
        }
        json!({ "title": "Leak", "instructions": script })
    }

    /// A step that puts all three secrets, after `pad` dots, as the agent's `directive`.
    fn padded_step(&self, pad: usize, directive: &str) -> Value {
        json!({ "title": "Pad", "instructions": format!(
            "@fake secret {}\n@fake {directive} {}@SECRET@",
            self.secret_file("all").display(),
            ".".repeat(pad)
        ) })
    }

    fn job(&self, repository: &str, publish: Value, steps: Vec<Value>) -> Value {
        json!({ "payload": {
            "repository": repository,
            "task": {
                "instructions": "Handle the credentials",
                "runtime": { "mode": "claude" },
                "publish": publish,
                "steps": steps,
            },
            "auth": { "repoAuthRef": self.repo_ref },
        } })
    }
}

fn executable(path: &Path, script: &str) {
    std::fs::write(path, script).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

async fn no_secret_leaves_the_worker(backend: Backend) {
    let started = Instant::now();
    let rig = Rig::new();
    let mut site = LiveSite::start(backend).await;
    site.start_worker("hostile-secrets", rig.worker_config())
        .await;

    let (none, branch, pr) = (
        json!({ "mode": "none" }),
        json!({ "mode": "branch" }),
        json!({ "mode": "pr" }),
    );
    let requests = [
        rig.job(
            &rig.plain,
            none.clone(),
            vec![
                rig.leaking_step(),
                rig.padded_step(0, "fail-with 1 denied for"),
            ],
        ),
        rig.job(&rig.hooked, branch.clone(), vec![rig.leaking_step()]),
        rig.job(&rig.plain, pr, vec![rig.leaking_step()]),
        rig.job(&rig.plain, branch, vec![rig.leaking_step()]),
        // Output and a failure so long that each cut falls 12 characters into a secret.
        rig.job(
            &rig.plain,
            none,
            vec![
                rig.padded_step(EVENT_MESSAGE_BYTES - 12, "print"),
                rig.padded_step(SUMMARY_CHARS - 12, "fail-with 1"),
            ],
        ),
        rig.job(
            &rig.plain,
            json!({ "mode": "pr", "prTitle": "Long" }),
            vec![rig.leaking_step()],
        ),
    ];
    let mut jobs: Vec<Job> = Vec::new();
    for request in &requests {
        jobs.push(site.submit(request).await);
    }
    for job in &mut jobs {
        *job = site.ended(job, Duration::from_secs(45)).await;
    }
    let [
        step_failed,
        push_refused,
        gh_failed,
        pushed,
        long_step,
        long_gh,
    ] = &jobs[..]
    else {
        unreachable!()
    };

    // Everything that leaves the server, by where it came from.
    let mut seen: Vec<(String, String)> = vec![
        (
            "GET /api/queue/jobs".into(),
            site.api("/api/queue/jobs?limit=100").await,
        ),
        ("page /tasks/queue".into(), site.page("/tasks/queue").await),
    ];
    let names = [
        "a failing step",
        "a refused push",
        "a failing gh",
        "a pushed branch",
        "long output",
        "a long gh error",
    ];
    for (job, name) in jobs.iter().zip(names) {
        let id = &job.id.to_string();
        let at = |what: &str| format!("job {id} ({name}) {what}");
        seen.push((at("GET"), site.api(&format!("/api/queue/jobs/{id}")).await));
        seen.push((at("events"), site.events(id).await.join("\n")));
        let list = site.api(&format!("/api/queue/jobs/{id}/artifacts")).await;
        let artifacts: Value = serde_json::from_str(&list).unwrap();
        seen.push((at("artifacts"), list));
        for artifact in artifacts["items"].as_array().unwrap() {
            let (aid, name) = (
                artifact["id"].as_str().unwrap(),
                artifact["name"].as_str().unwrap(),
            );
            let body = site
                .api(&format!("/api/queue/jobs/{id}/artifacts/{aid}/download"))
                .await;
            seen.push((at(&format!("artifact {name}")), body));
            let page = site
                .page(&format!("/tasks/queue/{id}/artifacts/{aid}"))
                .await;
            seen.push((at(&format!("page of artifact {name}")), page));
        }
        seen.push((at("page"), site.page(&format!("/tasks/queue/{id}")).await));
    }
    // And everything the server keeps.
    let stored = site.stored();

    // First the finding that matters, named where it was made.
    let mut hits = Vec::new();
    for (secret, name) in needles() {
        for (at, body) in &seen {
            if body.contains(&secret) {
                hits.push(format!("{name} ({secret}) in {at}"));
            }
        }
        for (at, bytes) in &stored {
            if contains(bytes, secret.as_bytes()) {
                hits.push(format!("{name} ({secret}) stored in {at}"));
            }
        }
    }
    assert!(
        hits.is_empty(),
        "{backend:?}: secrets leaked:\n{}",
        hits.join("\n")
    );

    // The runs went the way they were written, so each path was really taken.
    let failed_in = |job: &Job, stage: &str| {
        assert_eq!(job.status, JobState::Failed, "{backend:?}: {job:?}");
        let message = job.error_message.clone().unwrap_or_default();
        assert!(
            message.starts_with(&format!("{stage}: ")),
            "{backend:?}: {job:?}"
        );
        message
    };
    let all = format!("{REDACTED} {REDACTED} {REDACTED}");
    let message = failed_in(step_failed, task::STAGE_EXECUTE);
    assert!(
        message.contains(&format!("denied for {all}")),
        "{backend:?}: {message}"
    );
    let message = failed_in(push_refused, task::STAGE_PUBLISH);
    assert!(message.contains("git push"), "{backend:?}: {message}");
    assert!(
        message.contains(&format!("refused: credentials {all}")),
        "{backend:?}: {message}"
    );
    let message = failed_in(gh_failed, task::STAGE_PUBLISH);
    assert!(
        message.contains(&format!("Bad credentials for token {REDACTED} ({all})")),
        "{backend:?}: {message}"
    );
    assert_eq!(
        pushed.status,
        JobState::Succeeded,
        "{backend:?}: {pushed:?}"
    );
    assert_eq!(pushed.result_summary.as_deref(), Some("publish pushed"));
    // Cut after redaction, a cut in a secret leaves part of the marker, never of it.
    let cut = |pad: usize| format!("{}{REDACTED} [", ".".repeat(pad));
    let message = failed_in(long_step, task::STAGE_EXECUTE);
    let expected = format!("{}: {}", task::STAGE_EXECUTE, cut(SUMMARY_CHARS - 12));
    assert_eq!(message, expected, "{backend:?}");
    let message = failed_in(long_gh, task::STAGE_PUBLISH);
    assert_eq!(
        message,
        format!(
            "{GH_FAILED}{}",
            cut(REPORTED_TEXT_BYTES - GH_FAILED.len() - 12)
        ),
        "{backend:?}"
    );
    // The agent really wrote the secrets: a failed job's checkout is kept to look into.
    let checkout = rig
        .tmp
        .path()
        .join("work")
        .join(step_failed.id.to_string())
        .join("repo");
    for (i, secret) in [CONFIGURED, REPO_REF, UNNAMED].iter().enumerate() {
        let written = std::fs::read_to_string(checkout.join(format!("leak-{i}.txt"))).unwrap();
        assert_eq!(written.trim(), *secret, "{backend:?}");
    }

    let found = |job: &Job, what: &str| {
        let at = format!("job {} ", job.id);
        seen.iter()
            .find(|(label, _)| label.starts_with(&at) && label.ends_with(&format!(") {what}")))
            .map(|(_, body)| body.as_str())
            .unwrap_or_else(|| panic!("{backend:?}: nothing seen at {at}"))
    };
    // Each output of a leaking step reached the timeline and the step's log, redacted.
    for job in [step_failed, push_refused, gh_failed, pushed, long_gh] {
        for what in [
            "events".to_string(),
            format!("artifact {}", task::step_log(0)),
        ] {
            let text = found(job, &what);
            for said in ["the agent says", "stdout", "stderr"] {
                let redacted = format!("{said} {REDACTED}");
                assert!(
                    text.matches(&redacted).count() >= 3,
                    "{backend:?} job {} {what}: {redacted:?} not 3 times",
                    job.id
                );
            }
        }
    }
    let long_line = format!("\"{}\"", cut(EVENT_MESSAGE_BYTES - 12));
    assert!(
        found(long_step, "events").contains(&long_line),
        "{backend:?}: no event message of the long line cut after its redaction"
    );
    // The edits reached the patches, redacted: the step's and the whole task's.
    for job in [push_refused, gh_failed, pushed, long_gh] {
        for name in [task::step_patch(0), task::CHANGES_PATCH.to_string()] {
            let patch = found(job, &format!("artifact {name}"));
            let lines = patch.matches(&format!("\n+{REDACTED}\n")).count();
            assert_eq!(lines, 3, "{backend:?} {name}: {patch}");
        }
    }

    // The patches' lines are stored (in files or in PostgreSQL's bytea), so the search
    // above was a search of the artifacts too.
    let marker = format!("\n+{REDACTED}\n");
    assert!(
        stored
            .iter()
            .any(|(_, bytes)| contains(bytes, marker.as_bytes())),
        "{backend:?}: no stored artifact found among {:?}",
        stored.iter().map(|(at, _)| at).collect::<Vec<_>>()
    );
    let redactions: usize = seen
        .iter()
        .map(|(_, body)| body.matches(REDACTED).count())
        .sum();
    assert!(
        redactions >= 100,
        "{backend:?}: only {redactions} redactions seen"
    );
    eprintln!(
        "{backend:?}: {} answers and {} stored files searched, {redactions} redactions, in {:?}",
        seen.len(),
        stored.len(),
        started.elapsed()
    );
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
