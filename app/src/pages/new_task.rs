//! `/tasks/queue/new`: the server's defaults and the task form, which validates as you
//! type, in the browser, with the same contract crate the server uses; the server checks
//! again when the task is submitted and the browser goes to the new job's page.

use contract::{Defaults, FieldError};
use leptos::prelude::*;
use leptos_meta::Title;
use serde::{Deserialize, Serialize};

use crate::settings::ServerSettings;

#[server]
pub async fn get_settings() -> Result<ServerSettings, ServerFnError> {
    use_context::<ServerSettings>()
        .ok_or_else(|| ServerFnError::new("server settings are missing from the context"))
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
pub async fn check_task(payload: String) -> Result<CheckOutcome, ServerFnError> {
    let settings = get_settings().await?;
    let raw: serde_json::Value = serde_json::from_str(&payload)
        .map_err(|e| ServerFnError::new(format!("the draft is not JSON: {e}")))?;
    Ok(match contract::normalize(&raw, &settings.defaults) {
        Ok(task) => CheckOutcome::Valid {
            required_capabilities: task.payload.required_capabilities.clone(),
            canonical: serde_json::to_string_pretty(&task)?,
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
pub async fn submit_task(payload: String) -> Result<SubmitOutcome, ServerFnError> {
    use crate::ssr;
    let user = ssr::operator()?;
    let queue = ssr::queue()?;
    let raw: serde_json::Value = serde_json::from_str(&payload)
        .map_err(|e| ServerFnError::new(format!("the task is not JSON: {e}")))?;
    match queue.create_job(&raw, Some(&user.name)).await {
        Ok(job) => Ok(SubmitOutcome::Created { id: job.id }),
        Err(queue::QueueError::Invalid(errors)) => Ok(SubmitOutcome::Invalid { errors }),
        Err(e) => Err(ssr::shown(e)),
    }
}

#[component]
pub fn NewTaskPage() -> impl IntoView {
    let settings = Resource::new(|| (), |_| get_settings());
    view! {
        <Title text="New task"/>
        <h1>"New task"</h1>
        <Suspense fallback=|| view! { <p class="muted">"Loading the server's settings…"</p> }>
            {move || Suspend::new(async move {
                match settings.await {
                    Ok(settings) => view! {
                        <SettingsCard settings=settings.clone()/>
                        <DraftForm defaults=settings.defaults/>
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
            view! { <li>{r.mode.as_str()} " " <span class=class>{state}</span></li> }
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

/// One step of the draft; `key` stays with the step when others are removed.
#[derive(Clone, Debug, PartialEq)]
struct StepDraft {
    key: u32,
    instructions: String,
}

/// The draft as the JSON a client would submit, so the contract judges exactly that.
fn draft_json(repository: &str, objective: &str, steps: &[StepDraft]) -> serde_json::Value {
    let steps: Vec<_> = steps
        .iter()
        .map(|s| match s.instructions.trim() {
            "" => serde_json::json!({}),
            text => serde_json::json!({ "instructions": text }),
        })
        .collect();
    serde_json::json!({
        "type": "task",
        "payload": {
            "repository": repository,
            "task": { "instructions": objective, "steps": steps },
        },
    })
}

/// The messages of the errors at `path` or inside it (`task.steps[1]` covers
/// `task.steps[1].instructions`), but not `task.steps[10]` for `task.steps[1]`.
fn errors_at(errors: &[FieldError], path: &str) -> Vec<String> {
    errors
        .iter()
        .filter(|e| {
            e.path == path
                || e.path
                    .strip_prefix(path)
                    .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
        })
        .map(|e| e.message.clone())
        .collect()
}

#[component]
fn DraftForm(defaults: Defaults) -> impl IntoView {
    let repository = RwSignal::new(String::new());
    let objective = RwSignal::new(String::new());
    let steps = RwSignal::new(vec![StepDraft {
        key: 0,
        instructions: String::new(),
    }]);
    let next_key = StoredValue::new(1u32);
    // Errors show for a field once it has been typed in, or for all after a check.
    let touched = RwSignal::new(Vec::<String>::new());
    let touch = move |path: String| {
        touched.update(|t| {
            if !t.contains(&path) {
                t.push(path)
            }
        })
    };

    let errors = Memo::new(move |_| {
        let draft = steps.with(|s| draft_json(&repository.get(), &objective.get(), s));
        match contract::normalize(&draft, &defaults) {
            Ok(_) => Vec::new(),
            Err(errors) => errors,
        }
    });
    let shown = move |path: &str| {
        let path = path.to_string();
        move || {
            if !touched.with(|t| t.iter().any(|p| p == &path || p == "*")) {
                return Vec::new();
            }
            errors.with(|e| errors_at(e, &path))
        }
    };

    let check = Action::new(|payload: &String| check_task(payload.clone()));
    let submit = Action::new(|payload: &String| submit_task(payload.clone()));
    let draft = move || {
        steps
            .with(|s| draft_json(&repository.get(), &objective.get(), s))
            .to_string()
    };
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        touch("*".into());
        submit.dispatch(draft());
    };
    let on_check = move |_| {
        touch("*".into());
        check.dispatch(draft());
    };
    let navigate = leptos_router::hooks::use_navigate();
    Effect::new(move |_| {
        if let Some(Ok(SubmitOutcome::Created { id })) = submit.value().get() {
            navigate(&format!("/tasks/queue/{id}"), Default::default());
        }
    });
    let add_step = move |_| {
        let key = next_key.get_value();
        next_key.set_value(key + 1);
        steps.update(|s| {
            s.push(StepDraft {
                key,
                instructions: String::new(),
            })
        });
    };

    view! {
        <section class="card" aria-labelledby="draft-title">
            <h2 id="draft-title">"Task"</h2>
            <p class="muted">"Checked as you type, in your browser, by the same rules the server applies."</p>
            <form on:submit=on_submit novalidate>
                <Field id="repository" label="Repository" errors=Signal::derive(shown("repository"))>
                    <input id="repository" name="repository" type="text" autocomplete="off"
                        placeholder="owner/name, a git URL or a local path"
                        prop:value=move || repository.get()
                        on:input=move |ev| { repository.set(event_target_value(&ev)); touch("repository".into()); }/>
                </Field>
                <Field id="objective" label="Objective" errors=Signal::derive(shown("task.instructions"))>
                    <textarea id="objective" name="objective" rows="3"
                        placeholder="What the whole task should achieve"
                        prop:value=move || objective.get()
                        on:input=move |ev| { objective.set(event_target_value(&ev)); touch("task.instructions".into()); }>
                    </textarea>
                </Field>
                <fieldset class="steps">
                    <legend>"Steps"</legend>
                    <For each=move || steps.get() key=|s| s.key let:step>
                        {
                            let key = step.key;
                            let index = Memo::new(move |_| steps.with(|s| s.iter().position(|d| d.key == key).unwrap_or(0)));
                            let path = move || format!("task.steps[{}]", index.get());
                            let step_errors = Signal::derive(move || shown(&path())());
                            let id = format!("step-{key}");
                            view! {
                                <div class="step">
                                    <Field id=id.clone() label=format!("Step {}", index.get() + 1) errors=step_errors>
                                        <textarea id=id.clone() rows="2"
                                            placeholder="What this step should do"
                                            prop:value=move || steps.with(|s| s.iter().find(|d| d.key == key).map(|d| d.instructions.clone()).unwrap_or_default())
                                            on:input=move |ev| {
                                                let value = event_target_value(&ev);
                                                steps.update(|s| if let Some(d) = s.iter_mut().find(|d| d.key == key) { d.instructions = value });
                                                touch(path());
                                            }>
                                        </textarea>
                                    </Field>
                                    <button type="button" class="secondary"
                                        aria-label=move || format!("Remove step {}", index.get() + 1)
                                        on:click=move |_| steps.update(|s| s.retain(|d| d.key != key))>
                                        "Remove"
                                    </button>
                                </div>
                            }
                        }
                    </For>
                    <button type="button" class="secondary" on:click=add_step>"Add step"</button>
                </fieldset>
                <div class="actions">
                    <button type="submit" disabled=move || submit.pending().get()>"Submit task"</button>
                    <button type="button" class="secondary" on:click=on_check>"Check on the server"</button>
                </div>
            </form>
            <SubmitResult submit/>
            <CheckResult check/>
        </section>
    }
}

#[component]
fn Field(
    #[prop(into)] id: String,
    #[prop(into)] label: String,
    errors: Signal<Vec<String>>,
    children: Children,
) -> impl IntoView {
    let error_id = format!("{id}-error");
    view! {
        <div class="field" class:invalid=move || !errors.with(Vec::is_empty)>
            <label for=id>{label}</label>
            {children()}
            <ul class="field-errors" id=error_id aria-live="polite">
                {move || errors.get().into_iter().map(|e| view! { <li>{e}</li> }).collect_view()}
            </ul>
        </div>
    }
}

#[component]
fn SubmitResult(submit: Action<String, Result<SubmitOutcome, ServerFnError>>) -> impl IntoView {
    move || {
        submit.value().get().and_then(|result| match result {
            Ok(SubmitOutcome::Created { .. }) => None,
            Ok(SubmitOutcome::Invalid { errors }) => Some(view! {
                <div class="result error" role="alert">
                    <p>"The server refused the task:"</p>
                    <ul>{errors.into_iter().map(|e| view! { <li>{e.to_string()}</li> }).collect_view()}</ul>
                </div>
            }.into_any()),
            Err(e) => Some(view! {
                <div class="result error" role="alert">
                    <p>"The task was not submitted: " {e.to_string()}</p>
                </div>
            }.into_any()),
        })
    }
}

#[component]
fn CheckResult(check: Action<String, Result<CheckOutcome, ServerFnError>>) -> impl IntoView {
    move || {
        check.value().get().map(|result| match result {
            Ok(CheckOutcome::Valid { canonical, required_capabilities }) => view! {
                <div class="result ok" role="status">
                    <p>"The server accepted this task. It needs: "
                        <strong data-testid="required-capabilities">{required_capabilities.join(", ")}</strong>
                    </p>
                    <details>
                        <summary>"Canonical payload"</summary>
                        <pre>{canonical}</pre>
                    </details>
                </div>
            }.into_any(),
            Ok(CheckOutcome::Invalid { errors }) => view! {
                <div class="result error" role="alert">
                    <p>"The server found problems:"</p>
                    <ul>{errors.into_iter().map(|e| view! { <li>{e.to_string()}</li> }).collect_view()}</ul>
                </div>
            }.into_any(),
            Err(e) => view! {
                <div class="result error" role="alert">
                    <p>"The server could not check the task: " {e.to_string()} ". Try again; if it persists, check the server log."</p>
                </div>
            }.into_any(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(path: &str) -> FieldError {
        FieldError {
            path: path.into(),
            message: path.into(),
        }
    }

    #[test]
    fn errors_inside_a_step_belong_to_that_step_only() {
        let errors = vec![
            err("task.steps[1]"),
            err("task.steps[1].skill.id"),
            err("task.steps[10]"),
        ];
        assert_eq!(
            errors_at(&errors, "task.steps[1]"),
            vec!["task.steps[1]", "task.steps[1].skill.id"]
        );
        assert_eq!(errors_at(&errors, "task.steps[10]"), vec!["task.steps[10]"]);
    }

    #[test]
    fn empty_step_text_is_sent_as_a_blank_step() {
        let steps = [
            StepDraft {
                key: 0,
                instructions: "  ".into(),
            },
            StepDraft {
                key: 1,
                instructions: " a ".into(),
            },
        ];
        let json = draft_json("o/r", "goal", &steps);
        assert_eq!(
            json["payload"]["task"]["steps"],
            serde_json::json!([{}, { "instructions": "a" }])
        );
    }
}
