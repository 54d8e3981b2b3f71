//! What the job published: the branch it pushed (its real name, which the facts can only
//! guess before publish), the commit and a link to the pull request, read from the
//! worker's `publish_result.json`. Rendered on the server outside the live island, so it
//! costs the browser bundle nothing; it appears once the job has published.

use contract::job::PublishResult;
use leptos::prelude::*;

use crate::error::AppError;

/// The job's publish result, when its worker wrote one (and it reads as one).
#[server]
pub async fn load_published(id: String) -> Result<Option<PublishResult>, AppError> {
    use contract::job::task;

    use crate::ssr;
    /// A publish result is a few hundred bytes; anything longer is not one.
    const MAX_BYTES: u64 = 64 * 1024;
    ssr::user()?;
    let queue = ssr::queue()?;
    let id = ssr::job_id(&id)?;
    let artifacts = queue.list_artifacts(&id).await.map_err(ssr::refused)?;
    let Some(found) = artifacts.iter().find(|a| a.name == task::PUBLISH_RESULT) else {
        return Ok(None);
    };
    let (_, bytes, _) = queue
        .read_artifact(&id, &found.id, MAX_BYTES)
        .await
        .map_err(ssr::refused)?;
    // Written by a worker: one that does not read is left unshown, not an error page.
    Ok(serde_json::from_slice(&bytes).ok())
}

/// The "Published" card of a job that has published.
#[component]
pub fn PublishedSection(id: String) -> impl IntoView {
    let published = Resource::new(move || id.clone(), load_published);
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                published.await.ok().flatten().map(|result| view! { <Published result/> })
            })}
        </Suspense>
    }
}

#[component]
fn Published(result: PublishResult) -> impl IntoView {
    let link = result.pull_request_link().map(str::to_string);
    // A pull request address that is no web address stays text.
    let unlinked = match (&link, &result.pr_url) {
        (None, Some(text)) => Some(text.clone()),
        _ => None,
    };
    view! {
        <section class="card" aria-labelledby="published-title">
            <h2 id="published-title">"Published"</h2>
            <dl class="facts">
                <dt>"Outcome"</dt><dd data-testid="published-outcome">{result.outcome().to_string()}</dd>
                {result.branch.map(|branch| view! {
                    <dt>"Branch"</dt><dd><code data-testid="published-branch">{branch}</code></dd>
                })}
                {result.commit.map(|commit| view! {
                    <dt>"Commit"</dt><dd><code>{commit}</code></dd>
                })}
                {link.map(|url| view! {
                    <dt>"Pull request"</dt>
                    <dd><a href=url.clone() data-testid="pull-request" rel="noopener noreferrer">{url.clone()}</a></dd>
                })}
                {unlinked.map(|text| view! {
                    <dt>"Pull request"</dt><dd>{text}</dd>
                })}
            </dl>
        </section>
    }
}
