//! The server's comment on the issue a job came from: written when the job is queued (with
//! its link), and edited when it ends (its pull request, or why it did not finish). Every
//! replica runs the service over the queue's reply rows, leased fenced by the attempt, so
//! one comment is written however many replicas there are; a write GitHub did not take
//! is tried again later, a few times.

use std::sync::Arc;
use std::time::Duration;

use contract::{Job, JobState};
use queue::{Replied, Reply};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::api::{GitHubApi, GitHubError, PullRef};

/// Opens every comment the server writes: a comment that holds it is never a request.
pub const REPLY_MARK: &str = "<!-- stepwise:reply -->";

/// Writes in a row GitHub did not take before the reply is given up.
const MAX_FAILURES: u32 = 8;
/// Replies one replica writes in one pass.
const AT_ONCE: u32 = 8;

#[derive(Clone)]
pub struct ReplyConfig {
    pub api_url: String,
    pub token: String,
    /// Where people reach the dashboard: the job's link.
    pub public_url: String,
    /// The wait after a write that failed, doubled each time after.
    pub retry: Duration,
    pub timeout: Duration,
}

impl std::fmt::Debug for ReplyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplyConfig")
            .field("api_url", &self.api_url)
            .field("public_url", &self.public_url)
            .finish_non_exhaustive()
    }
}

/// The River shape: `new`, then `start`; `run_once` is one pass.
pub struct ReplyService {
    config: ReplyConfig,
    queue: queue::Queue,
    api: GitHubApi,
    owner: String,
    wake: Arc<Notify>,
}

impl ReplyService {
    pub fn new(config: ReplyConfig, queue: queue::Queue, wake: Arc<Notify>) -> ReplyService {
        let api = GitHubApi::new(&config.api_url, config.timeout);
        let mut nonce = [0u8; 6];
        getrandom::fill(&mut nonce).unwrap_or_default();
        let owner = format!("replies-{}-{}", std::process::id(), hex::encode(nonce));
        ReplyService {
            config,
            queue,
            api,
            owner,
            wake,
        }
    }

    /// Writes every reply due now; how many.
    pub async fn run_once(&self) -> usize {
        let lease = self.config.timeout.saturating_mul(3) + Duration::from_secs(5);
        let mut written = 0;
        loop {
            let due = match self.queue.claim_replies(&self.owner, lease, AT_ONCE).await {
                Ok(due) => due,
                Err(error) => {
                    tracing::warn!(%error, "the issue replies could not be read");
                    return written;
                }
            };
            if due.is_empty() {
                return written;
            }
            written += due.len();
            futures_util::future::join_all(due.into_iter().map(|reply| self.write(reply))).await;
        }
    }

    pub fn start(self, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                self.run_once().await;
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = self.wake.notified() => {}
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        })
    }

    async fn write(&self, reply: Reply) {
        let replied = self.replied(&reply).await;
        if let Err(error) = self.queue.settle_reply(&reply, &self.owner, &replied).await {
            tracing::warn!(%error, job = %reply.job_id, "an issue reply could not be settled");
        }
    }

    async fn replied(&self, reply: &Reply) -> Replied {
        let Some(thread) = PullRef::parse_thread(&reply.issue) else {
            return Replied::GaveUp;
        };
        let job = match self.queue.get_job(&reply.job_id).await {
            Ok(job) => job,
            Err(error) => {
                tracing::warn!(%error, "the job of an issue reply could not be read");
                return self.later(reply);
            }
        };
        let published = self.queue.publish_result(&job.id).await;
        let pull = published
            .as_ref()
            .and_then(|p| p.pull_request_link())
            .filter(|pr| contract::source::url_problem(pr).is_none())
            .map(str::to_string);
        let text = reply_text(&job, &self.config.public_url, published.as_ref());
        let token = &self.config.token;
        let written = match reply.comment_id {
            Some(id) => self
                .api
                .edit_comment(token, &thread, id, &text)
                .await
                .map(|()| id),
            None => self.api.post_comment(token, &thread, &text).await,
        };
        match written {
            Ok(comment_id) if job.status.has_ended() => Replied::Done { comment_id, pull },
            Ok(comment_id) => Replied::Posted { comment_id, pull },
            Err(error) => {
                let lasting = matches!(error, GitHubError::Refused { .. });
                tracing::warn!(%error, job = %job.id, lasting, "GitHub did not take an issue reply");
                self.later(reply)
            }
        }
    }

    fn later(&self, reply: &Reply) -> Replied {
        if reply.failures + 1 >= MAX_FAILURES {
            return Replied::GaveUp;
        }
        let wait = self
            .config
            .retry
            .saturating_mul(1 << reply.failures.min(10));
        let wait = chrono::Duration::from_std(wait.min(Duration::from_secs(600)))
            .unwrap_or(chrono::Duration::MAX);
        Replied::Retry {
            next_at: chrono::Utc::now() + wait,
        }
    }
}

/// The comment, in GitHub's markdown: the job's link and state, and at its end the pull
/// request or the error. The error is a worker's text: it goes in a fence it cannot close.
pub fn reply_text(
    job: &Job,
    public_url: &str,
    published: Option<&contract::job::PublishResult>,
) -> String {
    let link = format!(
        "[{}]({}/tasks/queue/{})",
        job.id,
        public_url.trim_end_matches('/'),
        job.id
    );
    let round = if job.round > 1 {
        format!(" (round {})", job.round)
    } else {
        String::new()
    };
    let state = match job.status {
        JobState::Queued => {
            format!("stepwise queued job {link}{round}. This comment will say how it ends.")
        }
        JobState::Running | JobState::Paused | JobState::AwaitingApproval => {
            format!(
                "stepwise job {link}{round} is {}. This comment will say how it ends.",
                job.status
            )
        }
        JobState::Succeeded => {
            // The worker wrote these: a link must be an address and nothing more, and a
            // branch's name stays inside its backticks.
            let pr_link = published
                .and_then(|p| p.pull_request_link())
                .filter(|pr| contract::source::url_problem(pr).is_none());
            let outcome = match published {
                Some(p) => match (pr_link, &p.branch) {
                    (Some(pr), _) => format!("Pull request: {pr}"),
                    (None, Some(branch)) if p.commit.is_some() => {
                        let branch: String = branch
                            .chars()
                            .filter(|c| !c.is_control() && *c != '`')
                            .take(200)
                            .collect();
                        format!("Pushed to the branch `{branch}`.")
                    }
                    _ => "Nothing was published (no changes, or a task that publishes nothing)."
                        .into(),
                },
                None => "Nothing was published.".into(),
            };
            format!("stepwise job {link}{round} succeeded. {outcome}")
        }
        JobState::Cancelled => format!("stepwise job {link}{round} was cancelled."),
        JobState::Failed | JobState::DeadLetter => {
            let error: String = job
                .error_message
                .as_deref()
                .unwrap_or("no reason given")
                .chars()
                .take(1500)
                .collect();
            format!(
                "stepwise job {link}{round} failed. See the job's page; it can be retried there.\n\n~~~~text\n{}\n~~~~",
                error.replace("~~~~", "~ ~ ~ ~")
            )
        }
    };
    format!("{REPLY_MARK}\n{state}")
}

#[cfg(test)]
mod tests {
    use contract::job::PublishResult;
    use contract::{Job, JobState, PublishMode};

    use super::{REPLY_MARK, reply_text};

    fn job(status: JobState, error: Option<&str>) -> Job {
        let mut job = Job::queued(
            "0190b1a4-0000-7000-8000-000000000001".parse().unwrap(),
            serde_json::json!({}),
            chrono::Utc::now(),
        );
        job.status = status;
        job.error_message = error.map(str::to_string);
        job
    }

    #[test]
    fn a_reply_links_the_job_and_says_how_it_ended() {
        let queued = job(JobState::Queued, None);
        let text = reply_text(&queued, "https://stepwise.example/", None);
        assert!(text.starts_with(REPLY_MARK));
        assert!(
            text.contains(&format!(
                "(https://stepwise.example/tasks/queue/{})",
                queued.id
            )),
            "{text}"
        );
        let published = PublishResult {
            mode: PublishMode::Pr,
            status: "pr_created".into(),
            branch: Some("task/x".into()),
            commit: Some("abc".into()),
            pr_url: Some("https://github.com/octo/hello/pull/7".into()),
        };
        let done = reply_text(
            &job(JobState::Succeeded, None),
            "http://h",
            Some(&published),
        );
        assert!(
            done.contains("succeeded. Pull request: https://github.com/octo/hello/pull/7"),
            "{done}"
        );
    }

    #[test]
    fn a_worker_s_error_stays_inside_its_fence() {
        let hostile =
            "boom\n~~~~\n@everyone <script>alert(1)</script> [x](javascript:alert(1))\n~~~~~";
        let text = reply_text(&job(JobState::Failed, Some(hostile)), "http://h", None);
        let fence_lines = text
            .lines()
            .filter(|l| l.trim_start().starts_with("~~~~"))
            .count();
        assert_eq!(fence_lines, 2, "only the reply's own fence: {text}");
        assert!(text.trim_end().ends_with("~~~~"));
        let inside = text.split("~~~~text\n").nth(1).unwrap();
        assert!(
            inside.contains("@everyone"),
            "a mention stays inside the fence, where it pings no one"
        );
    }
}
