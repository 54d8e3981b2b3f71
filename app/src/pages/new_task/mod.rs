//! `/tasks/queue/new`: the task form. Every task-level field (repository, runtime, model,
//! effort, skill, branches, publish) and the steps editor (add, remove, reorder, a title,
//! instructions and skill per step, a pasted markdown checklist). It validates as you type,
//! in the browser, with the same contract crate the server uses; the server checks again on
//! submit, its field errors show beside their fields, and the browser goes to the new job.
//!
//! Here: the page and the server functions the form calls. The form's parts are beside
//! it: the draft and the request it makes (`draft.rs`), which errors show where
//! (`field_errors.rs`), the form island (`form.rs`) and the steps editor (`steps.rs`).

mod draft;
mod field_errors;
mod form;
mod steps;

use contract::FieldError;
use leptos::prelude::*;
use leptos_meta::Title;
use serde::{Deserialize, Serialize};

use crate::error::AppError;
use crate::settings::ServerSettings;
use form::DraftForm;

#[server]
pub async fn get_settings() -> Result<ServerSettings, AppError> {
    let mut settings = use_context::<ServerSettings>()
        .ok_or_else(|| crate::ssr::internal("server settings are missing from the context"))?;
    if let Some(catalog) = use_context::<crate::settings::SkillCatalog>() {
        settings.skills = (catalog.0)();
    }
    Ok(settings)
}

/// What the server made of a draft: the canonical payload, or every field error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum CheckOutcome {
    Valid {
        canonical: String,
        required_capabilities: Vec<String>,
    },
    Invalid {
        errors: Vec<FieldError>,
    },
}

/// Normalizes a draft on the server, with the server's defaults: the browser checked it
/// already, but only the server's answer counts.
#[server]
pub async fn check_task(payload: String) -> Result<CheckOutcome, AppError> {
    let settings = get_settings().await?;
    let raw: serde_json::Value = serde_json::from_str(&payload)
        .map_err(|e| crate::ssr::unreadable(format!("the draft is not JSON: {e}")))?;
    Ok(match contract::normalize(&raw, &settings.defaults) {
        Ok(task) => CheckOutcome::Valid {
            required_capabilities: task.payload.required_capabilities.clone(),
            canonical: serde_json::to_string_pretty(&task).map_err(crate::ssr::internal)?,
        },
        Err(errors) => CheckOutcome::Invalid { errors },
    })
}

/// What became of a submitted task: its job, or every field error the server found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum SubmitOutcome {
    Created { id: String },
    Invalid { errors: Vec<FieldError> },
}

/// Creates the job, as the logged-in operator.
#[server]
pub async fn submit_task(payload: String) -> Result<SubmitOutcome, AppError> {
    use crate::ssr;
    let user = ssr::operator()?;
    let queue = ssr::queue()?;
    let raw: serde_json::Value = serde_json::from_str(&payload)
        .map_err(|e| ssr::unreadable(format!("the task is not JSON: {e}")))?;
    match queue.create_job(&raw, Some(&user.name)).await {
        Ok(job) => Ok(SubmitOutcome::Created {
            id: job.id.to_string(),
        }),
        Err(queue::QueueError::Invalid(errors)) => Ok(SubmitOutcome::Invalid { errors }),
        Err(e) => Err(ssr::refused(e)),
    }
}

#[component]
pub fn NewTaskPage() -> impl IntoView {
    let settings = Resource::new(|| (), |_| get_settings());
    view! {
        <Title text="New task"/>
        <h1>"New task"</h1>
        // The form checks as you type, in the browser: without JavaScript it stays greyed
        // out, so say why and how else to submit.
        <noscript>
            <p class="card notice" role="status" data-testid="needs-javascript">
                "This form needs JavaScript, which is off in this browser. Turn it on, or submit the task from the command line ("
                <code>"stepwise submit"</code>") or over the API ("<code>"POST /api/queue/jobs"</code>")."
            </p>
        </noscript>
        <Suspense fallback=|| view! { <p class="muted">"Loading the server's settings…"</p> }>
            {move || Suspend::new(async move {
                match settings.await {
                    Ok(settings) => view! {
                        <SettingsCard settings=settings.clone()/>
                        <DraftForm settings/>
                    }.into_any(),
                    Err(e) => view! {
                        <p class="error" role="alert">
                            "Could not load the server's settings: " {e.to_string()}
                            ". Reload the page; if it persists, check the server log."
                        </p>
                    }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn SettingsCard(settings: ServerSettings) -> impl IntoView {
    let defaults = settings.defaults;
    let runtimes = settings
        .runtimes
        .into_iter()
        .map(|r| {
            let (class, state) = if r.installed {
                ("badge ok", "installed")
            } else {
                ("badge muted", "not installed")
            };
            // What to install, and where its key goes, right where it is missing.
            let hint = (!r.installed).then(|| {
                view! { <small class="muted" data-testid="install-hint">" " {r.mode.install_hint()}</small> }
            });
            view! { <li>{r.mode.as_str()} " " <span class=class>{state}</span>{hint}</li> }
        })
        .collect_view();
    view! {
        <section class="card" aria-labelledby="defaults-title">
            <h2 id="defaults-title">"Server defaults"</h2>
            <dl class="facts">
                <dt>"Publish mode"</dt>
                <dd data-testid="default-publish-mode">{defaults.publish_mode.as_str()}</dd>
                <dt>"Default runtime"</dt>
                <dd data-testid="default-runtime">{defaults.runtime.as_str()}</dd>
                <dt>"Runtimes on this machine"</dt>
                <dd><ul class="inline-list">{runtimes}</ul></dd>
            </dl>
        </section>
    }
}
