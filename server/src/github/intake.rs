//! A GitHub delivery made into work by the rules (`rules.rs`): an issue labeled, or a
//! comment that mentions stepwise, becomes a job whose objective is the issue's title and
//! body (and the comment); a mention on a job's own pull request becomes that job's next
//! round. A mention's author is heard only as the rule's `authors` say, collaborators by
//! default, asked of GitHub's API. The reply on the issue is the reply service's
//! (`replies.rs`): the job's `job.created` makes it due.

use std::sync::Arc;

use contract::api::DeliveryOutcome;
use contract::source::JobSource;
use contract::{Job, JobId};
use queue::{Queue, QueueError};
use serde_json::Value;
use tokio::sync::Notify;

use super::api::{GitHubApi, PullRef};
use super::replies::REPLY_MARK;
use super::rules::{Authors, Rule, RulesFile, fill, without_mention};

/// What the intake made of one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    pub outcome: DeliveryOutcome,
    pub job: Option<JobId>,
    pub reason: Option<String>,
}

impl Taken {
    fn ignored(reason: impl Into<String>) -> Taken {
        Taken {
            outcome: DeliveryOutcome::Ignored,
            job: None,
            reason: Some(reason.into()),
        }
    }

    fn refused(reason: impl Into<String>) -> Taken {
        Taken {
            outcome: DeliveryOutcome::Refused,
            job: None,
            reason: Some(reason.into()),
        }
    }

    fn made(outcome: DeliveryOutcome, job: &Job) -> Taken {
        Taken {
            outcome,
            job: Some(job.id),
            reason: None,
        }
    }
}

/// The rules, the API they ask of authors, and the reply service to wake.
pub struct Intake {
    rules: RulesFile,
    api: GitHubApi,
    token: String,
    /// Where a repository is cloned from, its `owner/name` after it: `https://github.com/`,
    /// or a GitHub Enterprise's `https://HOST/`. Never the payload's own `clone_url`.
    clone_base: String,
    /// The reply service: a job made or a round started has a reply due.
    pub replies: Arc<Notify>,
}

impl std::fmt::Debug for Intake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Intake([REDACTED])")
    }
}

/// The delivery as far as a rule reads it.
struct Asked<'a> {
    repository: &'a str,
    /// What asked, the job's key (`JobSource::Github::event`).
    key: String,
    /// The page of the issue or pull request.
    thread: &'a str,
    title: &'a str,
    body: &'a str,
    pull_request: bool,
}

impl Intake {
    pub fn new(
        rules: RulesFile,
        api: GitHubApi,
        token: String,
        clone_base: String,
        replies: Arc<Notify>,
    ) -> Intake {
        Intake {
            rules,
            api,
            token,
            clone_base,
            replies,
        }
    }

    /// What delivery `delivery` of `event` makes.
    pub async fn take(
        &self,
        queue: &Queue,
        event: &str,
        delivery: &str,
        payload: &Value,
    ) -> Result<Taken, QueueError> {
        let action = payload["action"].as_str().unwrap_or_default();
        let str_at = |pointer: &str| payload.pointer(pointer).and_then(Value::as_str);
        let (Some(repository), Some(thread)) =
            (str_at("/repository/full_name"), str_at("/issue/html_url"))
        else {
            return Ok(Taken::ignored(format!("{event} is not about an issue")));
        };
        // A delivery is signed, but its fields are checked against each other all the same:
        // a job works on the repository it names, and its answers go to that repository's
        // own issue, whatever else the body says.
        if !plain_repository(repository) {
            return Ok(Taken::ignored("the repository's name is not owner/name"));
        }
        let (owner, name) = repository.split_once('/').unwrap_or_default();
        let of_repository = PullRef::parse_thread(thread).is_some_and(|t| {
            t.owner.eq_ignore_ascii_case(owner) && t.repo.eq_ignore_ascii_case(name)
        });
        if contract::source::url_problem(thread).is_some() || !of_repository {
            return Ok(Taken::ignored(
                "the issue's address is not one of the repository's",
            ));
        }
        let key = match (event, &payload["comment"]["id"]) {
            ("issue_comment", id) => format!("comment:{}", id.as_u64().unwrap_or_default()),
            _ => format!(
                "label:{}:{}:{}",
                payload["issue"]["id"].as_u64().unwrap_or_default(),
                str_at("/label/name")
                    .unwrap_or_default()
                    .chars()
                    .take(100)
                    .collect::<String>(),
                str_at("/issue/updated_at")
                    .unwrap_or_default()
                    .chars()
                    .take(40)
                    .collect::<String>()
            ),
        };
        let asked = Asked {
            repository,
            key,
            thread,
            title: str_at("/issue/title").unwrap_or_default(),
            body: str_at("/issue/body").unwrap_or_default(),
            pull_request: payload["issue"]["pull_request"].is_object(),
        };
        let rules = match self.rules.current() {
            Ok(rules) => rules,
            Err(why) => return Ok(Taken::ignored(format!("the rules do not read: {why}"))),
        };
        match (event, action) {
            ("issues", "labeled") => {
                let label = str_at("/label/name").unwrap_or_default();
                let Some(rule) = rules.for_label(repository, label) else {
                    return Ok(Taken::ignored(format!(
                        "no rule is about the label {label:?} on {repository}"
                    )));
                };
                if asked.pull_request {
                    return Ok(Taken::ignored("a label on a pull request makes no job"));
                }
                // Whoever set the label must be heard as a commenter would: an issue
                // template or a workflow labels for anyone who opens an issue.
                let by = str_at("/sender/login").unwrap_or_default();
                if !self.may_ask(rule, repository, by).await? {
                    return Ok(Taken::refused(format!(
                        "{by} may not ask: {}",
                        rule_hears(rule)
                    )));
                }
                let objective = objective(&asked, None);
                self.queue(queue, rule, &asked, delivery, None, by, &objective)
                    .await
            }
            ("issue_comment", "created") => {
                let comment = &payload["comment"];
                let text = comment["body"].as_str().unwrap_or_default();
                let login = comment["user"]["login"].as_str().unwrap_or_default();
                if comment["user"]["type"] == "Bot" || text.contains(REPLY_MARK) {
                    return Ok(Taken::ignored("a bot's comment, or the server's own"));
                }
                let Some(rule) = rules.for_mention(repository, text) else {
                    return Ok(Taken::ignored(format!(
                        "no rule's mention is in the comment on {repository}"
                    )));
                };
                if !self.may_ask(rule, repository, login).await? {
                    return Ok(Taken::refused(format!(
                        "{login} may not ask: {}",
                        rule_hears(rule)
                    )));
                }
                let mention = rule.mention.as_deref().unwrap_or_default();
                let request = without_mention(text, mention);
                let comment_url = comment["html_url"].as_str();
                if asked.pull_request
                    && let Some(job) = queue.job_of_pull(thread).await?
                {
                    let id = comment["id"].as_u64().unwrap_or_default();
                    return self.round(queue, &job, login, id, thread, &request).await;
                }
                let objective = objective(&asked, Some((login, &request)));
                self.queue(
                    queue,
                    rule,
                    &asked,
                    delivery,
                    comment_url,
                    login,
                    &objective,
                )
                .await
            }
            ("issue_comment", _) => Ok(Taken::ignored(format!(
                "a comment {action}: only a new comment asks"
            ))),
            _ => Ok(Taken::ignored(format!("no rule is about {event} {action}"))),
        }
    }

    /// `login` may ask by `rule` on `repository`.
    async fn may_ask(
        &self,
        rule: &Rule,
        repository: &str,
        login: &str,
    ) -> Result<bool, QueueError> {
        match &rule.authors {
            Authors::Anyone => Ok(true),
            Authors::Logins(list) => Ok(list.iter().any(|l| l.eq_ignore_ascii_case(login))),
            Authors::Collaborators => {
                let (owner, repo) = repository.split_once('/').unwrap_or_default();
                match self.api.may_push(&self.token, owner, repo, login).await {
                    Ok(yes) => Ok(yes),
                    // Not heard is the safe side: the person may ask again.
                    Err(error) => {
                        tracing::warn!(%error, "could not ask GitHub whether a commenter is a collaborator");
                        Ok(false)
                    }
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn queue(
        &self,
        queue: &Queue,
        rule: &Rule,
        asked: &Asked<'_>,
        delivery: &str,
        comment: Option<&str>,
        by: &str,
        objective: &str,
    ) -> Result<Taken, QueueError> {
        let mut request = rule.job.clone();
        let repository = format!("{}{}.git", self.clone_base, asked.repository);
        if fill(&mut request, &repository, objective).is_err() {
            return Ok(Taken::refused("the rule's job is not a job request"));
        }
        let source = JobSource::Github {
            issue: asked.thread.to_string(),
            delivery: delivery.to_string(),
            event: asked.key.clone(),
            comment: comment.map(str::to_string),
        };
        let by = format!("github:{by}");
        match queue.create_sourced_job(&request, Some(&by), &source).await {
            Ok((job, repeat)) => {
                self.replies.notify_one();
                let outcome = if repeat {
                    DeliveryOutcome::Repeat
                } else {
                    DeliveryOutcome::Queued
                };
                Ok(Taken::made(outcome, &job))
            }
            // The issue's own text can make the task invalid (too long, say): the delivery
            // is taken, and the reason told.
            Err(QueueError::Invalid(errors)) => {
                let why: Vec<String> = errors.iter().map(ToString::to_string).collect();
                Ok(Taken::refused(format!(
                    "the task would not be valid: {}",
                    why.join("; ")
                )))
            }
            Err(other) => Err(other),
        }
    }

    /// A mention on job `job`'s pull request: its next round.
    async fn round(
        &self,
        queue: &Queue,
        job: &JobId,
        login: &str,
        comment: u64,
        thread: &str,
        request: &str,
    ) -> Result<Taken, QueueError> {
        let instructions = if request.is_empty() {
            "Address the pull request's latest comment.".to_string()
        } else {
            request.to_string()
        };
        match queue
            .mention_round(job, &format!("github:{login}"), comment, &instructions)
            .await
        {
            Ok(Some(made)) => {
                queue.reply_on(job, thread).await?;
                self.replies.notify_one();
                Ok(Taken::made(DeliveryOutcome::FollowedUp, &made))
            }
            // The same comment again (GitHub redelivers it): the queue takes each cause
            // once, whatever the job does now, and the round it made is the answer.
            Ok(None) => Ok(Taken::made(
                DeliveryOutcome::Repeat,
                &queue.get_job(job).await?,
            )),
            // What the comment asked is no step the job can take (too long, say).
            Err(QueueError::Invalid(errors)) => {
                let why: Vec<String> = errors.iter().map(ToString::to_string).collect();
                Ok(Taken {
                    outcome: DeliveryOutcome::Refused,
                    job: Some(*job),
                    reason: Some(format!("the round would not be valid: {}", why.join("; "))),
                })
            }
            Err(QueueError::StateConflict { current, .. }) => {
                let why = format!(
                    "job {job} is {current}: a follow-up waits until it ends; mention again then"
                );
                if let Some(pull) = PullRef::parse_thread(thread) {
                    let text = format!("{REPLY_MARK}\n{why}");
                    if let Err(error) = self.api.post_comment(&self.token, &pull, &text).await {
                        tracing::warn!(%error, "could not say on the pull request why no round was made");
                    }
                }
                Ok(Taken {
                    outcome: DeliveryOutcome::Refused,
                    job: Some(*job),
                    reason: Some(why),
                })
            }
            Err(other) => Err(other),
        }
    }
}

/// Whom a rule hears, for the reason of a refusal.
fn rule_hears(rule: &Rule) -> String {
    match &rule.authors {
        Authors::Collaborators => "the rule hears those who may push to the repository".into(),
        Authors::Anyone => "the rule hears anyone".into(),
        Authors::Logins(list) => format!("the rule hears {}", list.join(", ")),
    }
}

/// `owner/name` with nothing else in it: no other slash, no `..`, no `#` or `?`.
fn plain_repository(repository: &str) -> bool {
    let plain = |s: &str| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    matches!(repository.split_once('/'), Some((o, n)) if plain(o) && plain(n))
}

/// The task's objective: the issue's title and body, and what a comment asked.
fn objective(asked: &Asked<'_>, comment: Option<(&str, &str)>) -> String {
    let mut text = format!("{}\n\n{}", asked.title.trim(), asked.body.trim());
    text = text.trim().to_string();
    if let Some((login, request)) = comment {
        text.push_str(&format!("\n\nAsked in a comment by @{login}:\n{request}"));
    }
    text.push_str(&format!("\n\n(From {})", asked.thread));
    text
}
