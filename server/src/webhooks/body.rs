//! What a notification tells of a job: the body's `job` (the contract's `WebhookJob`) and,
//! for Slack, one line of text.

use contract::NormalizedTask;
use contract::api::webhook::{
    JOB_AWAITING_APPROVAL, JOB_BUDGET_EXCEEDED, JOB_NEEDS_ATTENTION, WebhookJob,
};

use super::target::Ended;

/// The job as a notification tells it, from the job and its `publish_result.json`.
pub async fn build(queue: &queue::Queue, ended: &Ended, public_url: Option<&str>) -> WebhookJob {
    let job = &ended.job;
    let task = NormalizedTask::from_job(job).ok();
    let published = queue.publish_result(&job.id).await;
    let end = job.finished_at.unwrap_or(job.updated_at);
    WebhookJob {
        id: job.id.to_string(),
        state: job.status,
        title: task
            .as_ref()
            .map(|t| contract::text::first_line(&t.payload.task.instructions, 200))
            .unwrap_or_else(|| job.job_type.clone()),
        repository: task
            .as_ref()
            .map(|t| t.payload.repository.clone())
            .unwrap_or_default(),
        runtime: task
            .as_ref()
            .map(|t| t.payload.task.runtime.mode.as_str().to_string())
            .unwrap_or_default(),
        model: task
            .as_ref()
            .and_then(|t| t.payload.task.runtime.model.clone()),
        summary: job.result_summary.clone(),
        error: job.error_message.clone(),
        pull_request: published
            .as_ref()
            .and_then(|p| p.pull_request_link().map(str::to_string)),
        branch: published.as_ref().and_then(|p| p.branch.clone()),
        duration_seconds: job
            .started_at
            .map(|start| (end - start).num_milliseconds().max(0) as f64 / 1000.0),
        cost_usd: job.usage.and_then(|u| u.cost_usd),
        usage: job.usage.filter(|u| !u.is_empty()),
        budget: job.budget(),
        url: public_url
            .map(|base| format!("{}/tasks/queue/{}", base.trim_end_matches('/'), job.id)),
    }
}

/// One line for Slack: what ended and how, with links. Slack reads `&`, `<` and `>` as
/// markup, so a task's own words have them escaped.
pub fn slack_text(event: &str, job: &WebhookJob) -> String {
    let escape = |text: &str| {
        text.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let what = match event {
        JOB_AWAITING_APPROVAL => "waits for approval".to_string(),
        JOB_BUDGET_EXCEEDED => "reached its budget and pauses".to_string(),
        JOB_NEEDS_ATTENTION => {
            "needs a person: its pull request has feedback it will not take".to_string()
        }
        _ => job.state.as_str().to_string(),
    };
    let mut text = format!("stepwise: *{}* {what}", escape(&job.title));
    if let Some(seconds) = job.duration_seconds {
        text.push_str(&format!(" after {}", duration(seconds)));
    }
    text.push_str(&format!(" ({})", escape(&job.repository)));
    if let Some(cost) = job.cost_usd {
        text.push_str(&format!(" · ${cost:.2}"));
    }
    if let Some(error) = &job.error {
        text.push_str(&format!(
            " · {}",
            escape(&contract::text::first_line(error, 200))
        ));
    }
    if let Some(pr) = &job.pull_request {
        text.push_str(&format!(" · <{}|pull request>", escape(pr)));
    }
    if let Some(url) = &job.url {
        text.push_str(&format!(" · <{}|the job>", escape(url)));
    }
    text
}

fn duration(seconds: f64) -> String {
    let s = seconds.round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s / 60 % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slack_text_escapes_the_task_s_words_and_links_what_it_made() {
        let job = WebhookJob {
            id: "j".into(),
            state: contract::JobState::Succeeded,
            title: "Fix <b> & ship".into(),
            repository: "octo/repo".into(),
            runtime: "codex".into(),
            model: None,
            summary: None,
            error: None,
            pull_request: Some("https://github.com/octo/repo/pull/7".into()),
            branch: None,
            duration_seconds: Some(187.2),
            cost_usd: Some(0.754),
            usage: None,
            budget: None,
            url: Some("http://127.0.0.1:3000/tasks/queue/j".into()),
        };
        assert_eq!(
            slack_text(contract::api::webhook::JOB_ENDED, &job),
            "stepwise: *Fix &lt;b&gt; &amp; ship* succeeded after 3m 07s (octo/repo) · $0.75 \
             · <https://github.com/octo/repo/pull/7|pull request> \
             · <http://127.0.0.1:3000/tasks/queue/j|the job>"
        );
    }
}
