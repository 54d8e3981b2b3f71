//! One look at one watched pull request: what GitHub says of it now, and what that makes
//! of the job: a round that takes the new feedback, a person asked to look, or another
//! look later.

use chrono::Utc;
use contract::events::NeedsAttention;
use contract::{JobState, NormalizedTask};
use queue::{Looked, Watch};
use worker::redact::Redactor;

use super::FeedbackService;
use super::text::{Said, instructions};
use crate::github::api::{self as github, GitHubError, PullRef};

/// How a look ended, before it is written.
enum Verdict {
    Later {
        after: std::time::Duration,
        quiet: u32,
    },
    Closed,
    Attention {
        reason: String,
        waiting: Vec<String>,
    },
}

impl FeedbackService {
    /// Looks at `watch` and writes what came of it under its lease.
    pub(super) async fn look(&self, watch: Watch) {
        let (verdict, pull) = match self.judge(&watch).await {
            Ok(judged) => judged,
            Err(error) => {
                tracing::warn!(job = %watch.job_id, %error, "a pull request's feedback could not be read");
                (self.backoff(&watch), watch.pull.clone())
            }
        };
        let written = match verdict {
            Verdict::Later { after, quiet } => {
                let next_at = Utc::now() + chrono::Duration::from_std(after).unwrap_or_default();
                let looked = Looked::Later {
                    next_at,
                    quiet,
                    pull,
                };
                self.queue
                    .settle_watch(&watch, &self.owner, &looked)
                    .await
                    .map(|_| ())
            }
            Verdict::Closed => self
                .queue
                .settle_watch(&watch, &self.owner, &Looked::Closed)
                .await
                .map(|_| ()),
            Verdict::Attention { reason, waiting } => {
                let rounds = self
                    .queue
                    .get_job(&watch.job_id)
                    .await
                    .ok()
                    .and_then(|job| NormalizedTask::from_job(&job).ok())
                    .map_or(0, |task| task.payload.task.feedback_rounds());
                let asked = NeedsAttention {
                    reason,
                    pull_request: pull,
                    rounds,
                    waiting,
                };
                self.queue
                    .needs_attention(&watch, &self.owner, &asked)
                    .await
                    .map(|_| ())
            }
        };
        if let Err(error) = written {
            tracing::warn!(job = %watch.job_id, %error, "a pull request watch could not be written");
        }
    }

    /// The next look of a watch that found nothing new, later each time.
    fn backoff(&self, watch: &Watch) -> Verdict {
        let quiet = watch.quiet.saturating_add(1);
        let after = self
            .config
            .poll
            .saturating_mul(1u32 << quiet.min(10))
            .min(self.config.max_poll);
        Verdict::Later { after, quiet }
    }

    async fn judge(&self, watch: &Watch) -> Result<(Verdict, Option<String>), GitHubError> {
        let Ok(job) = self.queue.get_job(&watch.job_id).await else {
            return Ok((Verdict::Closed, watch.pull.clone()));
        };
        match job.status {
            JobState::Succeeded => {}
            // A round under way (or waiting on a person): its completion watches afresh.
            JobState::Queued
            | JobState::Running
            | JobState::Paused
            | JobState::AwaitingApproval => {
                return Ok((
                    Verdict::Later {
                        after: self.config.max_poll,
                        quiet: 0,
                    },
                    watch.pull.clone(),
                ));
            }
            JobState::Failed | JobState::Cancelled | JobState::DeadLetter => {
                return Ok((Verdict::Closed, watch.pull.clone()));
            }
        }
        let Ok(task) = NormalizedTask::from_job(&job) else {
            return Ok((Verdict::Closed, None));
        };
        let Some(feedback) = task.payload.task.publish.feedback else {
            return Ok((Verdict::Closed, None));
        };
        let url = match &watch.pull {
            Some(url) => url.clone(),
            None => match self
                .queue
                .publish_result(&job.id)
                .await
                .and_then(|p| p.pull_request_link().map(str::to_string))
            {
                Some(url) => url,
                // It opened no pull request (it changed nothing): nothing to watch.
                None => return Ok((Verdict::Closed, None)),
            },
        };
        let pull = Some(url.clone());
        // Only the task's own repository's pull request is read: the address came from
        // the worker, and the server's token may read more than the task should.
        let Some(pr) = PullRef::parse(&url).filter(|pr| pr.is_of(&task.payload.repository)) else {
            return Ok((Verdict::Closed, pull));
        };
        let Some(token) = self.token() else {
            let reason = "the server has no GitHub credential to read the pull request with: \
                          start it with --github-token (STEPWISE_GITHUB_TOKEN)"
                .to_string();
            return Ok((attention(reason, Vec::new()), pull));
        };
        let spec = &task.payload.task;
        let said = match self.read(&token, &pr, &feedback, spec).await {
            Ok(Some(said)) => said,
            Ok(None) => return Ok((Verdict::Closed, pull)),
            // A pull request GitHub does not show yet may be one it has not caught up with:
            // only a few looks in a row make it a person's business.
            Err(GitHubError::Refused { status: 404, .. }) if watch.quiet < 4 => {
                return Ok((self.backoff(watch), pull));
            }
            Err(GitHubError::Refused {
                status,
                what,
                message,
            }) => {
                let reason = format!(
                    "GitHub refused to show the pull request ({status} to {what}: {message}): \
                     check the credential's access to {}/{}",
                    pr.owner, pr.repo
                );
                return Ok((attention(reason, Vec::new()), pull));
            }
            Err(passing) => return Err(passing),
        };
        let fresh: Vec<Said> = said
            .into_iter()
            .filter(|s| !spec.took(&s.cause()))
            .collect();
        if fresh.is_empty() {
            return Ok((self.backoff(watch), pull));
        }
        let rounds = spec.feedback_rounds();
        if rounds >= feedback.max_rounds {
            let reason = format!(
                "its pull request still has feedback after {rounds} round(s) of its own, \
                 the most task.publish.feedback.maxRounds allows"
            );
            return Ok((
                attention(reason, fresh.iter().map(Said::short).collect()),
                pull,
            ));
        }
        let redactor = Redactor::new([token.as_str()]);
        let text = instructions(&url, &fresh, &redactor);
        let causes = fresh.iter().map(Said::cause).collect();
        match self.queue.feedback_round(&job.id, causes, &text).await {
            Ok(_) => Ok((
                Verdict::Later {
                    after: self.config.max_poll,
                    quiet: 0,
                },
                pull,
            )),
            // A budget spent, a history deleted, a task at its most steps: the round cannot
            // be made, and no later look will make it.
            // The job moved on meanwhile (a person's follow-up): look again once it ends.
            Err(queue::QueueError::StateConflict { .. })
                if self
                    .queue
                    .get_job(&job.id)
                    .await
                    .is_ok_and(|now| !now.status.is_terminal() || now.payload != job.payload) =>
            {
                Ok((self.backoff(watch), pull))
            }
            Err(e @ (queue::QueueError::StateConflict { .. } | queue::QueueError::Invalid(_))) => {
                let reason = format!("a round of its pull request's feedback cannot be made: {e}");
                Ok((
                    attention(reason, fresh.iter().map(Said::short).collect()),
                    pull,
                ))
            }
            Err(e) => {
                tracing::warn!(job = %job.id, error = %e, "a round of feedback could not be made");
                Ok((self.backoff(watch), pull))
            }
        }
    }

    /// What the pull request says now that asks for a fix; `None` when it is closed. Check
    /// runs count once every one of the head's has completed, so one round takes them all.
    async fn read(
        &self,
        token: &str,
        pr: &PullRef,
        feedback: &contract::feedback::PrFeedback,
        spec: &contract::TaskSpec,
    ) -> Result<Option<Vec<Said>>, GitHubError> {
        let pull = self.api.pull(token, pr).await?;
        if !pull.open {
            return Ok(None);
        }
        let mut said = Vec::new();
        if feedback.ci {
            let runs = self.api.check_runs(token, pr, &pull.head_sha).await?;
            if runs.iter().all(|r| r.completed()) {
                // What a round took already is not read again (its log may be large).
                let fresh =
                    |r: &github::CheckRun| r.failed() && !spec.took(&format!("check_run:{}", r.id));
                for run in runs.into_iter().filter(fresh) {
                    let log = match self.api.job_log(token, pr, run.id).await {
                        Some(log) => log,
                        None => run
                            .output
                            .as_ref()
                            .map(|o| {
                                [o.title.as_deref(), o.summary.as_deref()]
                                    .into_iter()
                                    .flatten()
                                    .collect::<Vec<_>>()
                                    .join("\n")
                            })
                            .unwrap_or_default(),
                    };
                    said.push(Said::FailedCheck {
                        id: run.id,
                        name: run.name,
                        conclusion: run.conclusion.unwrap_or_default(),
                        log,
                    });
                }
            }
        }
        if feedback.reviews {
            let reviews = self.api.reviews(token, pr).await?;
            // Each reviewer's stand is their latest review that takes one; a comment
            // alone takes none.
            // Only those who may change the repository are heard: on a public one anyone
            // can review, and a review's words become the agent's instructions.
            let mut stands: Vec<&github::Review> = Vec::new();
            for review in reviews.iter().filter(|r| {
                r.may_write()
                    && matches!(
                        r.state.as_str(),
                        "APPROVED" | "CHANGES_REQUESTED" | "DISMISSED"
                    )
            }) {
                let user = review.user.as_ref().map(|u| u.login.as_str());
                stands.retain(|s| s.user.as_ref().map(|u| u.login.as_str()) != user);
                stands.push(review);
            }
            let asks = |r: &&github::Review| {
                r.state == "CHANGES_REQUESTED" && !spec.took(&format!("review:{}", r.id))
            };
            for review in stands.into_iter().filter(asks) {
                let comments = self
                    .api
                    .review_comments(token, pr, review.id)
                    .await?
                    .into_iter()
                    .map(|c| (c.path, c.line, c.body))
                    .collect();
                said.push(Said::ChangesRequested {
                    id: review.id,
                    user: review
                        .user
                        .as_ref()
                        .map_or_else(|| "someone".to_string(), |u| u.login.clone()),
                    body: review.body.clone().unwrap_or_default(),
                    comments,
                });
            }
        }
        Ok(Some(said))
    }

    /// The credential the pull request is read with: the server's own. A task's auth refs
    /// are resolved on its worker only: resolved here, a task could name any of the
    /// server's variables or files and have it sent to the API as a token.
    fn token(&self) -> Option<String> {
        self.config.token.clone().filter(|t| !t.is_empty())
    }
}

fn attention(reason: String, waiting: Vec<String>) -> Verdict {
    Verdict::Attention { reason, waiting }
}
