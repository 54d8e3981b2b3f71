//! What the job published: the branch it pushed (its real name, which the facts can only
//! guess before publish), the commit and a link to the pull request, read from the
//! worker's `publish_result.json` through the artifact page's own loader. Rendered on the
//! server outside the live island, so it costs the browser bundle nothing; it appears once
//! the job has published.

use contract::job::PublishResult;
use leptos::prelude::*;

use crate::pages::artifact::{Content, load_artifact};

/// The "Published" card of a job whose artifact `artifact` is its publish result.
#[component]
pub fn PublishedSection(id: String, artifact: String) -> impl IntoView {
    let page = Resource::new(
        move || (id.clone(), artifact.clone()),
        |(id, artifact)| load_artifact(id, artifact),
    );
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                // Written by a worker: one that does not read is left unshown.
                let result = match page.await.map(|p| p.content) {
                    Ok(Content::Text(text)) => serde_json::from_str::<PublishResult>(&text).ok(),
                    _ => None,
                };
                result.map(|result| view! { <Published result/> })
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
