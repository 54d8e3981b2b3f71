//! Where the job came from when no person submitted it: the GitHub issue or pull request
//! (and the comment) whose label or mention made it, linked. Rendered on the server
//! outside the live island, so it costs the browser bundle nothing.

use contract::source::JobSource;
use leptos::prelude::*;

use crate::error::AppError;

#[server]
pub async fn load_source(id: String) -> Result<Option<JobSource>, AppError> {
    use crate::ssr;
    ssr::user()?;
    let queue = ssr::queue()?;
    let id = ssr::job_id(&id)?;
    let job = queue.get_job(&id).await.map_err(ssr::refused)?;
    Ok(job
        .payload
        .get("source")
        .and_then(|s| serde_json::from_value(s.clone()).ok()))
}

/// `octo/hello#12` of `https://github.com/octo/hello/issues/12`; the address itself when
/// it is not one.
fn thread_name(url: &str) -> String {
    let parts: Vec<&str> = url.split('/').collect();
    match parts.as_slice() {
        [.., owner, repo, "issues" | "pull", number] => {
            let number = number.split(['#', '?']).next().unwrap_or_default();
            format!("{owner}/{repo}#{number}")
        }
        _ => url.to_string(),
    }
}

/// The "Source" card of job `id`, when something other than a person made it.
#[component]
pub fn SourceSection(id: String) -> impl IntoView {
    let source = Resource::new(move || id.clone(), load_source);
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                source.await.ok().flatten().map(|source| view! {
                    <section class="card" aria-labelledby="source-title">
                        <h2 id="source-title">"Source"</h2>
                        <dl class="facts">{facts(source)}</dl>
                    </section>
                })
            })}
        </Suspense>
    }
}

fn facts(source: JobSource) -> AnyView {
    match source {
        JobSource::Github {
            issue,
            delivery,
            comment,
            ..
        } => {
            let kind = if issue.contains("/pull/") { "pull request" } else { "issue" };
            let name = thread_name(&issue);
            view! {
                <dt>"From"</dt>
                <dd>"GitHub " {kind} " "
                    <a href=issue data-testid="source-issue" rel="noopener noreferrer">{name}</a>
                </dd>
                {comment.map(|comment| view! {
                    <dt>"Asked in"</dt>
                    <dd><a href=comment rel="noopener noreferrer">"a comment"</a></dd>
                })}
                <dt>"Delivery"</dt><dd><code>{delivery}</code></dd>
            }
            .into_any()
        }
        JobSource::Schedule {
            schedule,
            name,
            slot,
        } => view! {
            <dt>"From"</dt>
            <dd>"The schedule "
                <a href=format!("/tasks/schedules#schedule-{schedule}") data-testid="source-schedule">{name}</a>
            </dd>
            <dt>"Slot"</dt><dd>{slot}</dd>
        }
        .into_any(),
    }
}

#[cfg(test)]
mod tests {
    use super::thread_name;

    #[test]
    fn an_issue_is_named_by_its_repository_and_number() {
        assert_eq!(
            thread_name("https://github.com/octo/hello/issues/12"),
            "octo/hello#12"
        );
        assert_eq!(
            thread_name("https://github.com/octo/hello/pull/7#x"),
            "octo/hello#7"
        );
        assert_eq!(
            thread_name("https://example.com/x"),
            "https://example.com/x"
        );
    }
}
