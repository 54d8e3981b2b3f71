//! GitHub as a source of work, end to end on SQLite and on PostgreSQL: deliveries shaped
//! and signed as GitHub's documentation shows them, the server's rules file, the scripted
//! GitHub API of testkit (collaborators, issue comments), the real worker with the
//! scripted agent, a bare remote and the recorded gh. A labeled issue becomes one job,
//! answered on the issue and told how it ended; mentions are heard from collaborators
//! only; a mention on the job's own pull request is its next round.

use std::sync::Arc;
use std::time::{Duration, Instant};

use contract::api::DeliveryOutcome;
use contract::{Job, JobId, JobState};
use queue::Role;
use serde_json::{Value, json};
use stepwise::github::api::GitHubApi;
use stepwise::github::intake::Intake;
use stepwise::github::replies::{ReplyConfig, ReplyService};
use stepwise::github::rules::RulesFile;
use stepwise::testing::GITHUB_WEBHOOK_SECRET;
use stepwise::testing::server::{TestServer, start_with};
use stepwise::testing::site::{Backend, TestDb};
use testkit::github::{Comment, GitHub, Issue, delivery};
use tokio_util::sync::CancellationToken;
use worker::client::QueueClient;
use worker::runner::{Shutdown, WorkerConfig, run};
use worker::testing::{named_remote, stage_config};

const TOKEN: &str = "ghs_sourceTokenForTheTests0123456789";
const PUBLIC: &str = "https://stepwise.example";
/// The pull request the recorded gh opens.
const PULL: &str = "https://github.com/octo/hello/pull/7";

struct Setup {
    server: TestServer,
    user: QueueClient,
    github: GitHub,
    remote: String,
    stop: CancellationToken,
    shutdown: Shutdown,
    _db: TestDb,
    _tmp: tempfile::TempDir,
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.stop.cancel();
        self.shutdown.stop.cancel();
        self.shutdown.hand_back.cancel();
    }
}

async fn setup(backend: Backend) -> Setup {
    let db = TestDb::new(backend).await;
    let github = GitHub::start(TOKEN).await;
    github.add_collaborator("maintainer");
    let tmp = tempfile::tempdir().unwrap();
    let rules = tmp.path().join("rules.json");
    let job = json!({ "payload": { "task": {
        "runtime": { "mode": "claude" },
        "publish": { "mode": "pr", "prTitle": "From an issue" },
        "steps": [{ "instructions": "@fake write greeting.txt hello" }],
    } } });
    let file = json!({ "rules": [{
        "repositories": ["octo/hello"],
        "label": "stepwise",
        "mention": "@stepwise",
        "job": job,
    }] });
    std::fs::write(&rules, file.to_string()).unwrap();
    let replies = Arc::new(tokio::sync::Notify::new());
    let api = GitHubApi::new(&github.url(), Duration::from_secs(5));
    // Repositories are cloned from where the bare remote is made (octo/hello.git below).
    let clone_base = format!("{}/", tmp.path().display());
    let intake = Intake::new(
        RulesFile::open(&rules).unwrap(),
        api,
        TOKEN.into(),
        clone_base,
        replies.clone(),
    );
    let wake = Arc::new(tokio::sync::Notify::new());
    let server = start_with(db.url.as_deref(), wake, |_| Some(Arc::new(intake))).await;
    let stop = CancellationToken::new();
    let config = ReplyConfig {
        api_url: github.url(),
        token: TOKEN.into(),
        public_url: PUBLIC.into(),
        retry: Duration::from_millis(100),
        timeout: Duration::from_secs(5),
    };
    ReplyService::new(config, server.queue().clone(), replies).start(stop.clone());
    // The repository the issues are of (octo/hello), where the intake clones it from.
    let remote = named_remote(tmp.path(), "octo/hello");
    let mut worker_config = WorkerConfig::new(stage_config(tmp.path()));
    worker_config.claim_wait = Duration::from_secs(2);
    let shutdown = Shutdown::default();
    tokio::spawn(run(
        server.worker("source-worker").await,
        worker_config,
        shutdown.clone(),
    ));
    let user = server.user(Role::Operator).await;
    Setup {
        server,
        user,
        github,
        remote,
        stop,
        shutdown,
        _db: db,
        _tmp: tmp,
    }
}

impl Setup {
    fn issue(&self, number: u64, title: &str, body: &str) -> Issue {
        Issue::new("octo", "hello", number, title, body, &self.remote)
    }

    /// GitHub posts `event` with `payload` as delivery `id`, signed with `secret`.
    async fn deliver(&self, event: &str, id: &str, payload: &Value, secret: &str) -> (u16, Value) {
        let delivered = delivery(event, id, payload, secret);
        let mut request =
            reqwest::Client::new().post(format!("{}/api/integrations/github", self.server.url()));
        for (name, value) in &delivered.headers {
            request = request.header(name, value);
        }
        let response = request.body(delivered.body).send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// A delivery signed right, taken: what the rules made of it.
    async fn taken(
        &self,
        event: &str,
        id: &str,
        payload: &Value,
    ) -> (DeliveryOutcome, Option<JobId>) {
        let (status, answer) = self
            .deliver(event, id, payload, GITHUB_WEBHOOK_SECRET)
            .await;
        assert_eq!(status, 202, "{answer}");
        let outcome = serde_json::from_value(answer["outcome"].clone()).unwrap();
        let job = answer["job"].as_str().map(|id| id.parse().unwrap());
        (outcome, job)
    }

    async fn jobs(&self) -> Vec<Job> {
        self.user
            .list_jobs(None, None, Some(100), None)
            .await
            .unwrap()
            .0
    }

    async fn until<T>(&self, what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(40);
        loop {
            if let Some(found) = check().await {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "{what} never happened: comments {:#?}, requests {:#?}",
                self.github.comments(),
                self.github.requests()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The comments on `owner/repo#number`.
    fn comments_on(&self, on: &str) -> Vec<Comment> {
        self.github
            .comments()
            .into_iter()
            .filter(|c| c.on == on)
            .collect()
    }
}

async fn a_labeled_issue_becomes_one_job_answered_on_the_issue(backend: Backend) {
    let s = setup(backend).await;
    let issue = s.issue(
        12,
        "Greet the world",
        "The greeting file is missing.\n@fake history",
    );

    // Signed with another secret: refused, nothing stored.
    let labeled = issue.labeled("stepwise", "maintainer");
    let (status, answer) = s
        .deliver(
            "issues",
            "a8c1f0e0-0001",
            &labeled,
            "not-the-webhook-secret-at-all",
        )
        .await;
    assert_eq!(status, 401, "{answer}");
    // A repository no rule names, and a label no rule names: nothing.
    let elsewhere = Issue::new("octo", "world", 3, "Elsewhere", "", &s.remote);
    let (outcome, job) = s
        .taken(
            "issues",
            "a8c1f0e0-0002",
            &elsewhere.labeled("stepwise", "maintainer"),
        )
        .await;
    assert_eq!((outcome, job), (DeliveryOutcome::Ignored, None));
    let (outcome, _) = s
        .taken(
            "issues",
            "a8c1f0e0-0003",
            &issue.labeled("bug", "maintainer"),
        )
        .await;
    assert_eq!(outcome, DeliveryOutcome::Ignored);
    assert!(s.jobs().await.is_empty());

    // A label set by someone who may not push (an issue template labels for anyone).
    let (outcome, _) = s
        .taken(
            "issues",
            "a8c1f0e0-0005",
            &issue.labeled("stepwise", "passer-by"),
        )
        .await;
    assert_eq!(outcome, DeliveryOutcome::Refused);
    assert!(s.jobs().await.is_empty());
    // A body whose issue is another repository's, or whose repository is no plain name.
    let mut elsewhere = labeled.clone();
    elsewhere["issue"]["html_url"] = json!("https://github.com/victim/other/issues/1");
    let (outcome, _) = s.taken("issues", "a8c1f0e0-0006", &elsewhere).await;
    assert_eq!(outcome, DeliveryOutcome::Ignored);
    let mut traversal = labeled.clone();
    traversal["repository"]["full_name"] = json!("octo/../victim");
    let (outcome, _) = s.taken("issues", "a8c1f0e0-0007", &traversal).await;
    assert_eq!(outcome, DeliveryOutcome::Ignored);

    // The label a rule names: one job, however often GitHub sends it.
    let (outcome, made) = s.taken("issues", "a8c1f0e0-0004", &labeled).await;
    assert_eq!(outcome, DeliveryOutcome::Queued);
    let made = made.unwrap();
    let (again, same) = s.taken("issues", "a8c1f0e0-0004", &labeled).await;
    assert_eq!(
        (again, same.as_ref()),
        (DeliveryOutcome::Repeat, Some(&made))
    );
    // The same signed body under another delivery id (a replay): the same job.
    let (again, same) = s.taken("issues", "a8c1f0e0-0099", &labeled).await;
    assert_eq!(
        (again, same.as_ref()),
        (DeliveryOutcome::Repeat, Some(&made))
    );
    let jobs = s.jobs().await;
    assert_eq!(jobs.len(), 1);
    let job = &jobs[0];
    assert_eq!(job.id, made);
    assert_eq!(
        job.payload["source"],
        json!({ "kind": "github", "issue": "https://github.com/octo/hello/issues/12", "delivery": "a8c1f0e0-0004",
                "event": "label:1000012:stepwise:2026-11-28T08:00:00Z" })
    );
    assert_eq!(job.payload["repository"], json!(s.remote));
    let objective = job.payload["task"]["instructions"].as_str().unwrap();
    assert!(
        objective.starts_with("Greet the world\n\nThe greeting file is missing."),
        "{objective}"
    );
    assert_eq!(job.created_by_user_id.as_deref(), Some("github:maintainer"));
    // A client may not say where a job came from.
    let forged = s
        .user
        .create_job(&json!({ "payload": { "repository": s.remote, "source": job.payload["source"], "task": { "instructions": "x" } } }))
        .await
        .unwrap_err();
    assert!(forged.to_string().contains("source"), "{forged}");

    // Answered on the issue with the job's link, then told how it ended.
    let link = format!("{PUBLIC}/tasks/queue/{made}");
    let first = s
        .until("the reply", async || {
            s.comments_on("octo/hello#12").into_iter().next()
        })
        .await;
    assert!(first.body.contains(&link), "{}", first.body);
    let ended = s
        .until("the reply's end", async || {
            s.comments_on("octo/hello#12")
                .into_iter()
                .find(|c| c.body.contains("succeeded"))
        })
        .await;
    assert_eq!(ended.id, first.id, "the same comment, edited");
    assert!(ended.body.contains(PULL), "{}", ended.body);
    assert!(ended.body.contains(&link), "{}", ended.body);
    assert_eq!(s.comments_on("octo/hello#12").len(), 1);
    assert_eq!(s.github.comments().len(), 1);
    let done = s.user.get_job(&made).await.unwrap();
    assert_eq!(done.status, JobState::Succeeded);
}

async fn mentions_are_heard_from_collaborators_and_on_the_pull_request(backend: Backend) {
    let s = setup(backend).await;
    let issue = s.issue(13, "Greeting", "Write the greeting.");

    // One who may only read (every member of an organization may): not heard either.
    s.github.add_collaborator_with("reader", "read");
    let reader = issue.comment("created", 900, "reader", "@stepwise please do it");
    let (outcome, _) = s.taken("issue_comment", "b1-0000", &reader).await;
    assert_eq!(outcome, DeliveryOutcome::Refused);
    // A stranger, and an edited comment: no job, no answer.
    let stranger = issue.comment("created", 901, "passer-by", "@stepwise please do it");
    let (outcome, job) = s.taken("issue_comment", "b1-0001", &stranger).await;
    assert_eq!((outcome, job), (DeliveryOutcome::Refused, None));
    let edited = issue.comment("edited", 902, "maintainer", "@stepwise please do it");
    let (outcome, _) = s.taken("issue_comment", "b1-0002", &edited).await;
    assert_eq!(outcome, DeliveryOutcome::Ignored);
    assert!(s.jobs().await.is_empty());
    assert!(
        s.github
            .requests()
            .iter()
            .any(|r| r.ends_with("/collaborators/passer-by/permission")),
        "asked of GitHub: {:?}",
        s.github.requests()
    );

    // A collaborator's mention: a job whose objective holds what the comment asked.
    let asked = issue.comment(
        "created",
        903,
        "maintainer",
        "@stepwise write it in English",
    );
    let (outcome, made) = s.taken("issue_comment", "b1-0003", &asked).await;
    assert_eq!(outcome, DeliveryOutcome::Queued);
    let made = made.unwrap();
    let job = s.user.get_job(&made).await.unwrap();
    let objective = job.payload["task"]["instructions"].as_str().unwrap();
    assert!(
        objective.contains("Asked in a comment by @maintainer:\nwrite it in English"),
        "{objective}"
    );
    assert_eq!(
        job.payload["source"]["comment"],
        json!("https://github.com/octo/hello/issues/13#issuecomment-903")
    );
    // Its reply is done once the job succeeded: the pull request is known to be its own.
    s.until("the reply's end", async || {
        let state = s.server.queue().reply_state(&made).await.unwrap();
        (state.as_ref().map(|(st, _)| st.as_str()) == Some("done")).then_some(())
    })
    .await;

    // A mention on the job's pull request: the job's next round, answered there.
    let pull = Issue::new("octo", "hello", 7, "From an issue", "", &s.remote).pull_request();
    let again = pull.comment(
        "created",
        904,
        "maintainer",
        "@stepwise also say goodbye\n@fake write bye.txt bye",
    );
    let (outcome, round) = s.taken("issue_comment", "b1-0004", &again).await;
    assert_eq!(
        (outcome, round.as_ref()),
        (DeliveryOutcome::FollowedUp, Some(&made))
    );
    // The same comment again, even as another delivery: no second round.
    let (outcome, _) = s.taken("issue_comment", "b1-0005", &again).await;
    assert_eq!(outcome, DeliveryOutcome::Repeat);
    let round2 = s
        .until("round 2's success", async || {
            let job = s.user.get_job(&made).await.unwrap();
            (job.round == 2 && job.status == JobState::Succeeded).then_some(job)
        })
        .await;
    let last = round2.payload["task"]["steps"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        last["instructions"]
            .as_str()
            .unwrap()
            .starts_with("also say goodbye"),
        "{last}"
    );
    assert_eq!(
        round2.payload["task"]["rounds"][0]["causes"],
        json!(["comment:904"])
    );
    let on_pull = s
        .until("the reply on the pull request", async || {
            s.comments_on("octo/hello#7")
                .into_iter()
                .find(|c| c.body.contains("succeeded"))
        })
        .await;
    assert!(on_pull.body.contains("(round 2)"), "{}", on_pull.body);
    assert_eq!(s.jobs().await.len(), 1, "no new job");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_labeled_issue_becomes_one_job_answered_on_the_issue_on_sqlite() {
    a_labeled_issue_becomes_one_job_answered_on_the_issue(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_labeled_issue_becomes_one_job_answered_on_the_issue_on_postgres() {
    a_labeled_issue_becomes_one_job_answered_on_the_issue(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mentions_are_heard_from_collaborators_and_on_the_pull_request_on_sqlite() {
    mentions_are_heard_from_collaborators_and_on_the_pull_request(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mentions_are_heard_from_collaborators_and_on_the_pull_request_on_postgres() {
    mentions_are_heard_from_collaborators_and_on_the_pull_request(Backend::Postgres).await;
}
