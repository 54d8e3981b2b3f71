//! Every page rendered around hostile text, read as a browser reads it (html5ever). Each
//! hostile job has a harmless twin built by the same steps; the two pages must have the
//! same elements in the same order, so no text, wherever it lands, became markup, even
//! markup this file does not know to look for.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use contract::job::NewEvent;
use serde_json::json;

use super::garbage::Garbage;
use super::{Answer, Site, cases};
use stepwise::testing::html::{elements, smuggled};
use stepwise::testing::site::{Backend, claimed_job};

/// Every hostile text carries it, so a smuggled element or attribute is found by name.
const MARKER: &str = "pwn";

#[tokio::test]
async fn pages_keep_hostile_text_as_text_on_sqlite() {
    pages(Backend::Sqlite).await;
}

#[tokio::test]
async fn pages_keep_hostile_text_as_text_on_postgres() {
    pages(Backend::Postgres).await;
}

/// The texts one job is built from; a hostile set and a harmless one of the same shape.
struct Texts {
    repository: String,
    objective: String,
    title: String,
    step: String,
    worker: String,
    event: String,
    summary: String,
    artifact: String,
    content_type: String,
    error: String,
    reason: String,
}

impl Texts {
    fn hostile(garbage: &mut Garbage) -> Texts {
        // Within every length limit: what is refused for its length never reaches a page.
        let mut text = |max: usize| {
            let mut text = format!("{MARKER} {} {}", garbage.text(), garbage.text());
            if let Some((cut, _)) = text.char_indices().nth(max) {
                text.truncate(cut);
            }
            text
        };
        // A task's texts hold no NUL (refused, as the contract tests show); a title is
        // one line.
        let no_nul = |text: String| text.replace('\0', "\u{fffd}");
        Texts {
            // A local path is a repository too, and may hold anything but spaces and
            // control characters. (Skill and step ids are slugs: hostile text cannot be one.)
            repository: format!(
                "/srv/{}",
                text(100)
                    .chars()
                    .filter(|c| !c.is_whitespace() && !c.is_control())
                    .collect::<String>()
            ),
            objective: no_nul(text(4000)),
            title: text(80)
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect(),
            step: no_nul(text(4000)),
            worker: no_nul(text(120)),
            event: text(4000),
            summary: text(400),
            // A name part is a file name: no control characters, at most 255 bytes.
            artifact: text(60)
                .chars()
                .filter(|c| !c.is_control())
                .map(|c| if matches!(c, '/' | '\\') { '_' } else { c })
                .collect(),
            // A media type is one line of visible text; the rest is refused on upload.
            content_type: text(60).chars().filter(|c| !c.is_control()).collect(),
            error: text(4000),
            reason: no_nul(text(400)),
        }
    }

    fn harmless() -> Texts {
        let text = |what: &str| format!("a harmless {what}");
        Texts {
            repository: "/srv/harmless".into(),
            objective: text("objective"),
            title: text("title"),
            step: text("step"),
            worker: text("worker"),
            event: text("event"),
            summary: text("summary"),
            artifact: text("artifact"),
            content_type: text("type"),
            error: text("error"),
            reason: text("reason"),
        }
    }
}

/// The pages of one job: its own and its artifact's; and a second job, cancelled.
struct Built {
    job: String,
    artifact: String,
    cancelled: String,
    sourced: String,
}

async fn build(site: &Site, texts: &Texts) -> Built {
    let raw = json!({
        "payload": {
            "repository": texts.repository,
            "task": {
                "instructions": texts.objective,
                "steps": [
                    { "title": texts.title, "instructions": texts.step },
                    { "instructions": texts.step },
                ],
            },
        },
    });
    let queue = &site.queue;
    let (job, fence) = claimed_job(queue, &raw, &texts.worker).await;
    // The workers page shows what a worker says of itself: its version and its sandbox.
    let offers = vec!["git".to_string()];
    let sighting = queue::Sighting {
        capabilities: Some(&offers),
        version: Some(&texts.reason),
        sandbox: Some(&texts.reason),
    };
    queue.worker_seen(&texts.worker, &sighting).await.unwrap();
    let events = [
        (
            "task.step.started",
            json!({ "stepIndex": 0, "title": texts.step }),
        ),
        (
            "task.step.log",
            json!({ "stepIndex": 0, "line": texts.event }),
        ),
        (
            "task.step.finished",
            json!({
                "stepIndex": 0, "summary": texts.summary,
                "usage": { "inputTokens": 10, "outputTokens": 2 },
            }),
        ),
        ("task.step.started", json!({ "stepIndex": 1 })),
        (
            "task.step.failed",
            json!({ "stepIndex": 1, "error": texts.error }),
        ),
    ];
    for (kind, payload) in events {
        let event = NewEvent {
            kind: kind.into(),
            level: Default::default(),
            message: texts.event.clone(),
            payload: payload.as_object().unwrap().clone(),
        };
        queue.append_event(&job.id, &fence, event).await.unwrap();
    }
    // Slashes split a name into parts; each part is kept, whatever else it holds.
    let name = format!("logs/{}.log", texts.artifact);
    let artifact = queue
        .add_artifact(
            &job.id,
            &fence,
            &name,
            &texts.content_type,
            texts.event.as_bytes(),
        )
        .await
        .unwrap_or_else(|e| panic!("the artifact {name:?} is stored: {e}"));
    queue
        .fail(&job.id, &fence, texts.error.clone(), false)
        .await
        .unwrap();
    let other = queue.create_job(&raw, Some("admin")).await.unwrap();
    queue
        .request_cancel(&other.id, Some("admin"), Some(texts.reason.clone()))
        .await
        .unwrap();
    // A job from GitHub (its Source card), and a schedule of the task.
    static BUILT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nth = BUILT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let delivery = format!("hostile-{}-{nth}", std::process::id());
    let source = contract::source::JobSource::Github {
        issue: "https://github.com/octo/repo/issues/1".into(),
        delivery: delivery.clone(),
        event: format!("comment:{delivery}"),
        comment: Some("https://github.com/octo/repo/issues/1#issuecomment-2".into()),
    };
    let (sourced, _) = queue
        .create_sourced_job(&raw, Some("github:octocat"), &source)
        .await
        .unwrap();
    // Not left queued: the next build claims its own job.
    queue
        .request_cancel(&sourced.id, Some("admin"), None)
        .await
        .unwrap();
    let schedule = json!({
        "name": format!("{} {nth}", texts.title.chars().take(90).collect::<String>()),
        "cron": "0 6 * * 1",
        "timezone": "Europe/Berlin",
        "task": raw,
    });
    queue
        .create_schedule(&schedule, Some("admin"))
        .await
        .unwrap();
    Built {
        job: job.id.to_string(),
        artifact: artifact.id,
        cancelled: other.id.to_string(),
        sourced: sourced.id.to_string(),
    }
}

async fn get(site: &Site, uri: &str) -> Answer {
    let request = Request::get(uri)
        .header(header::COOKIE, &site.admin_cookie)
        .body(Body::empty())
        .unwrap();
    site.send(request).await
}

/// The page's elements, by tag, in document order: its shape, whatever its text.
fn shape(html: &str) -> Vec<String> {
    elements(html)
        .into_iter()
        .map(|e| {
            let mut names: Vec<_> = e.attrs.into_iter().map(|(name, _)| name).collect();
            names.sort();
            format!("<{} {}>", e.tag, names.join(" "))
        })
        .collect()
}

fn check_page(backend: Backend, answer: &Answer) {
    assert_eq!(answer.status, StatusCode::OK, "{backend:?}: {answer}");
    let found = smuggled(&answer.body, MARKER);
    assert!(
        found.is_empty(),
        "{backend:?}: {found:?} in {}",
        answer.what
    );
}

async fn pages(backend: Backend) {
    let site = Site::start(backend).await;
    let mut garbage = Garbage::new(0x5eed_0003);
    for _ in 0..(cases() / 6).max(3) {
        let hostile = build(&site, &Texts::hostile(&mut garbage)).await;
        let harmless = build(&site, &Texts::harmless()).await;
        let page_pairs = [
            (
                format!("/tasks/queue/{}", hostile.job),
                format!("/tasks/queue/{}", harmless.job),
            ),
            (
                format!(
                    "/tasks/queue/{}/artifacts/{}",
                    hostile.job, hostile.artifact
                ),
                format!(
                    "/tasks/queue/{}/artifacts/{}",
                    harmless.job, harmless.artifact
                ),
            ),
            (
                format!("/tasks/queue/{}", hostile.cancelled),
                format!("/tasks/queue/{}", harmless.cancelled),
            ),
            (
                format!("/tasks/queue/{}", hostile.sourced),
                format!("/tasks/queue/{}", harmless.sourced),
            ),
        ];
        for (bad, good) in page_pairs {
            let bad = get(&site, &bad).await;
            let good = get(&site, &good).await;
            check_page(backend, &bad);
            check_page(backend, &good);
            assert!(
                bad.body.contains(MARKER),
                "{backend:?}: the hostile text is shown at all: {bad}"
            );
            let (bad_shape, good_shape) = (shape(&bad.body), shape(&good.body));
            if bad_shape != good_shape {
                let at = bad_shape
                    .iter()
                    .zip(&good_shape)
                    .position(|(a, b)| a != b)
                    .unwrap_or(bad_shape.len().min(good_shape.len()));
                panic!(
                    "{backend:?}: {} has another shape than its harmless twin from element \
                     {at}: {:?} where the twin has {:?}",
                    bad.what,
                    bad_shape.get(at..at + 3),
                    good_shape.get(at..at + 3),
                );
            }
        }
    }
    // The lists show every one of those jobs and workers at once.
    for page in [
        "/tasks/queue",
        "/tasks/workers",
        "/tasks/queue/new",
        "/tasks/schedules",
    ] {
        check_page(backend, &get(&site, page).await);
    }
    // Garbage in every page's address: ids, filters, cursors and the login's `next`.
    let ids = [site.job_id.clone(), site.artifact_id.clone()];
    for _ in 0..cases() {
        let id = if garbage.chance(30) {
            garbage.pick(&ids)
        } else {
            garbage.url_text()
        };
        let page = match garbage.below(6) {
            0 => format!(
                "/tasks/queue?status={}&after={}",
                garbage.url_text(),
                garbage.url_text()
            ),
            1 => format!("/tasks/queue/{id}"),
            2 => format!("/tasks/queue/{}/artifacts/{id}", site.job_id),
            3 => format!("/tasks/queue/{id}/artifacts/{}", garbage.url_text()),
            4 => format!(
                "/login?next={}&error={}",
                garbage.url_text(),
                garbage.url_text()
            ),
            _ => format!(
                "/tasks/queue/new?{}={}",
                garbage.url_text(),
                garbage.url_text()
            ),
        };
        if page.contains("/%20") || page.ends_with('/') {
            continue;
        }
        let answer = get(&site, &page).await;
        assert!(
            !answer.status.is_server_error(),
            "{backend:?}: a server error for a page address: {answer}"
        );
        let found = smuggled(&answer.body, MARKER);
        assert!(
            found.is_empty(),
            "{backend:?}: {found:?} in {}",
            answer.what
        );
    }
    site.assert_alive().await;
    drop(site);
}
