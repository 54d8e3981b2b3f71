//! `moonmind.task.publish`: once, after every step succeeded; none, a branch or a pull
//! request, and only while the run still holds its job.

use std::time::{Duration, Instant};

use contract::events::Warning;
use contract::job::task;
use contract::{EventLevel, StageState};

use super::prepare::Prepared;
use super::{Log, Run, TaskOutcome};
use crate::publish::{self, PublishRequest};

impl Run<'_> {
    pub(super) async fn publish(&mut self, prepared: &Prepared) -> TaskOutcome {
        const STAGE: &str = task::STAGE_PUBLISH;
        let ws = self.ws.clone().expect("prepare made the workspace");
        let started = Instant::now();
        if self.cancel.is_cancelled() {
            return TaskOutcome::Cancelled {
                stage: STAGE,
                stop: Duration::ZERO,
            };
        }
        self.stage_started(STAGE);
        let mut log = Log::open(&ws, task::stage_log(STAGE));
        let checkout = &prepared.checkout;
        let budget = self.publish_budget(true);
        match publish::stray_commits(&ws.repo, &checkout.base_commit, &budget).await {
            Ok(stray) if !stray.is_empty() => {
                let message = format!("the agent committed on its own: {}", stray.join("; "));
                log.line(self.redactor, &message);
                let warning = Warning {
                    commits: stray,
                    ..Warning::default()
                };
                self.event(EventLevel::Warn, &message, &warning);
            }
            _ => {}
        }
        self.patch_artifact(&ws, task::CHANGES_PATCH, &checkout.base_commit, &budget)
            .await;
        let settings = &self.task.payload.task.publish;
        let objective_line = self
            .task
            .payload
            .task
            .instructions
            .lines()
            .next()
            .unwrap_or_default();
        // What leaves for the git host is redacted like everything else the worker sends,
        // and cut only after that.
        let redact = |text: &str| self.redactor.redact(text).into_owned();
        let title = match &settings.pr_title {
            Some(title) => redact(title),
            None => redact(objective_line).chars().take(72).collect(),
        };
        let message = settings
            .commit_message
            .as_deref()
            .map_or_else(|| title.clone(), redact);
        let body = redact(
            settings
                .pr_body
                .as_deref()
                .unwrap_or(&self.task.payload.task.instructions),
        );
        let base = settings
            .pr_base_branch
            .clone()
            .unwrap_or_else(|| checkout.starting_branch.clone());
        let request = PublishRequest {
            mode: settings.mode,
            working_branch: &checkout.working_branch,
            base_branch: &base,
            commit_message: &message,
            pr_title: &title,
            pr_body: &body,
            identity: &self.config.identity,
            gh: &self.config.gh,
            token: self
                .credentials
                .publish
                .as_deref()
                .or(self.credentials.repo.as_deref()),
            own_branch: self.task.payload.task.git.new_branch.is_none(),
        };
        if request.mode != contract::PublishMode::None
            && let Err(why) = self.hold.confirm().await
        {
            let message = format!("nothing was published: {why}");
            log.line(self.redactor, &message);
            self.artifact(log);
            self.stage_finished(STAGE, StageState::Failed, started);
            return TaskOutcome::Failed {
                stage: STAGE,
                message,
            };
        }
        let result = publish::publish(&ws.repo, &request, &budget).await;
        match result {
            Ok(result) => {
                let json = serde_json::to_value(&result).unwrap_or_default();
                log.line(self.redactor, &format!("publish {}", result.status));
                let _ = self.write_artifact(&ws, task::PUBLISH_RESULT, &format!("{json:#}\n"));
                self.artifact(log);
                let outcome = if result.status == "skipped" {
                    StageState::Skipped
                } else {
                    StageState::Succeeded
                };
                self.stage_finished(STAGE, outcome, started);
                TaskOutcome::Succeeded {
                    summary: match &result.pr_url {
                        Some(url) => format!("pull request {url}"),
                        None => format!("publish {}", result.status),
                    },
                }
            }
            Err(e) if e.is_cancelled() => {
                log.line(self.redactor, &e.to_string());
                self.artifact(log);
                self.stage_finished(STAGE, StageState::Cancelled, started);
                TaskOutcome::Cancelled {
                    stage: STAGE,
                    stop: Duration::ZERO,
                }
            }
            Err(e) => {
                log.line(self.redactor, &e.to_string());
                self.artifact(log);
                self.stage_finished(STAGE, StageState::Failed, started);
                TaskOutcome::Failed {
                    stage: STAGE,
                    message: self.redactor.redact(&e.to_string()).into_owned(),
                }
            }
        }
    }
}
