//! The form: an island, the one part of the new-task page that runs in the browser. It
//! keeps the draft, checks it with the contract as it changes, and submits it (or has the
//! server check it) through the page's server functions.

use contract::{Defaults, PublishMode, RuntimeMode};
use leptos::either::{Either, EitherOf3};
use leptos::prelude::*;

use super::draft::{StepDraft, TaskDraft, TaskField, draft_json, skill_choices};
use super::field_errors::{FieldErrors, Unplaced};
use super::steps::StepsEditor;
use super::{CheckOutcome, SubmitOutcome, check_task, submit_task};
use crate::components::field::{Choice, TextInput};
use crate::error::AppError;
use crate::settings::ServerSettings;

/// What every field of the task needs: the draft it edits and the errors it shows.
#[derive(Clone, Copy)]
struct TaskForm {
    task: RwSignal<TaskDraft>,
    errors: FieldErrors,
}

#[island]
pub fn DraftForm(settings: ServerSettings) -> impl IntoView {
    let defaults: Defaults = settings.defaults.clone();
    let skills = StoredValue::new(settings.skills.clone());
    let task = RwSignal::new(TaskDraft::default());
    let steps = RwSignal::new(vec![StepDraft::default()]);
    // The browser checks exactly the JSON the server is sent.
    let draft = move || steps.with(|s| task.with(|t| skills.with_value(|k| draft_json(t, s, k))));
    let draft_errors = Memo::new({
        let defaults = defaults.clone();
        move |_| match contract::normalize(&draft(), &defaults) {
            Ok(_) => Vec::new(),
            Err(errors) => errors,
        }
    });
    let errors = FieldErrors::new(draft_errors);
    let form = TaskForm { task, errors };

    // Effects run only in the browser: this turns true once the island has hydrated.
    let ready = RwSignal::new(false);
    Effect::new(move |_| ready.set(true));
    let check = Action::new(|payload: &String| check_task(payload.clone()));
    let submit = Action::new(|payload: &String| submit_task(payload.clone()));
    // One answer shows at a time: the latest request's, not a refusal above an acceptance.
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        errors.touch_all();
        check.value().set(None);
        submit.dispatch(draft().to_string());
    };
    let on_check = move |_| {
        errors.touch_all();
        submit.value().set(None);
        check.dispatch(draft().to_string());
    };
    // Each answer replaces the errors shown; a later edit clears them.
    Effect::new(move |_| {
        if let Some(Ok(SubmitOutcome::Invalid { errors: found })) = submit.value().get() {
            errors.set_server(found);
            // Once they are drawn: the first field with an error is far above the button
            // on a long form, so the refusal takes the reader there.
            request_animation_frame(focus_first_problem);
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(CheckOutcome::Invalid { errors: found })) = check.value().get() {
            errors.set_server(found);
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(SubmitOutcome::Created { id })) = submit.value().get() {
            crate::go_to(&format!("/tasks/queue/{id}"));
        }
    });

    // The runtime the task will run on: the chosen one, else the server's default.
    let runtime = Memo::new({
        let default = defaults.runtime;
        move |_| task.with(|t| t.runtime.parse::<RuntimeMode>().unwrap_or(default))
    });
    let model_hint = {
        let defaults = defaults.clone();
        move || match defaults.for_runtime(runtime.get()).model.clone() {
            Some(model) => format!("server default: {model}"),
            None => "the CLI's default model".to_string(),
        }
    };
    let effort_default = {
        let defaults = defaults.clone();
        move || match defaults.for_runtime(runtime.get()).effort.clone() {
            Some(effort) => format!("Default ({effort})"),
            None => "Default (the CLI's)".to_string(),
        }
    };
    let runtime_default = format!("Server default ({})", defaults.runtime.as_str());
    let publish_default = format!("Server default ({})", defaults.publish_mode.as_str());
    let runtime_options = Signal::derive(move || {
        choices(
            runtime_default.clone(),
            RuntimeMode::ALL.iter().map(|m| m.as_str()),
        )
    });
    let effort_options =
        Signal::derive(move || choices(effort_default(), runtime.get().efforts().iter().copied()));
    let publish_options = Signal::derive(move || {
        choices(
            publish_default.clone(),
            PublishMode::ALL.iter().map(|m| m.as_str()),
        )
    });
    let approval_default = format!(
        "Server default ({})",
        if defaults.approval_required {
            "required"
        } else {
            "none"
        }
    );
    let approval_options =
        Signal::derive(move || choices(approval_default.clone(), ["required", "none"].into_iter()));
    let skill_options = Signal::derive(move || {
        skills.with_value(|known| skill_choices(&[("", "auto (the agent decides)")], known))
    });

    view! {
        <section class="card" aria-labelledby="draft-title">
            <h2 id="draft-title">"Task"</h2>
            <p class="muted">"Checked as you type, in your browser, by the same rules the server applies."</p>
            // Disabled until the form runs in the browser: typed before that, text would be
            // lost when it starts.
            <form on:submit=on_submit novalidate>
                <fieldset class="form-body" disabled=move || !ready.get()>
                <TaskInput form field=TaskField::Repository id="repository" label="Repository"
                    placeholder="owner/name, a git URL or a local path"/>
                <TaskInput form field=TaskField::Objective id="objective" label="Objective"
                    placeholder="What the whole task should achieve" rows=3/>
                <fieldset class="group">
                    <legend>"Agent"</legend>
                    <div class="grid">
                        <TaskInput form field=TaskField::Runtime id="runtime" label="Runtime" options=runtime_options/>
                        <TaskInput form field=TaskField::Model id="model" label="Model"
                            placeholder=Signal::derive(model_hint)/>
                        <TaskInput form field=TaskField::Effort id="effort" label="Effort" options=effort_options/>
                        <TaskInput form field=TaskField::Skill id="task-skill" label="Skill" options=skill_options/>
                    </div>
                </fieldset>
                <StepsEditor steps skills errors/>
                <TaskInput form field=TaskField::DependsOn id="depends-on" label="Waits for jobs (optional)"
                    placeholder="job ids, comma separated: it starts once they all succeeded"/>
                <fieldset class="group">
                    <legend>"Branches and publishing"</legend>
                    <div class="grid">
                        <TaskInput form field=TaskField::StartingBranch id="starting-branch" label="Starting branch"
                            placeholder="the repository's default branch"/>
                        <TaskInput form field=TaskField::NewBranch id="new-branch" label="New branch"
                            placeholder="a generated task/… branch"/>
                        <TaskInput form field=TaskField::Publish id="publish-mode" label="Publish" options=publish_options/>
                        <TaskInput form field=TaskField::Approval id="approval" label="Approval before publishing" options=approval_options/>
                        <TaskInput form field=TaskField::PrBaseBranch id="pr-base-branch" label="Pull request base"
                            placeholder="the starting branch"/>
                        <TaskInput form field=TaskField::CommitMessage id="commit-message" label="Commit message"
                            placeholder="generated from the objective"/>
                        <TaskInput form field=TaskField::PrTitle id="pr-title" label="Pull request title"
                            placeholder="generated from the objective"/>
                    </div>
                    <TaskInput form field=TaskField::PrBody id="pr-body" label="Pull request body"
                        placeholder="generated from the steps" rows=3/>
                </fieldset>
                <fieldset class="group">
                    <legend>"Completion check (optional)"</legend>
                    <p class="muted">"After the steps, the check runs in the repository. While it fails, the agent runs again with its output, up to the iterations given."</p>
                    <TaskInput form field=TaskField::CheckCommand id="check-command" label="Check command"
                        placeholder="e.g. cargo test (blank: no check)"/>
                    <div class="grid">
                        <TaskInput form field=TaskField::OutputPattern id="output-pattern" label="Output must match"
                            placeholder="a regular expression (optional)"/>
                        <TaskInput form field=TaskField::MaxIterations id="max-iterations" label="Iterations at most"
                            placeholder="10"/>
                        <TaskInput form field=TaskField::CheckTimeout id="check-timeout" label="Check timeout (seconds)"
                            placeholder="600"/>
                    </div>
                    <TaskInput form field=TaskField::Criteria id="criteria" label="Done when"
                        placeholder="what done means, in words" rows=2/>
                </fieldset>
                <Unplaced errors/>
                <div class="actions">
                    <button type="submit" disabled=move || submit.pending().get()>"Submit task"</button>
                    <button type="button" class="secondary" on:click=on_check>"Check on the server"</button>
                </div>
                </fieldset>
            </form>
            <SubmitResult submit/>
            <CheckResult check/>
        </section>
    }
}

/// Focuses (and so scrolls to) the first field marked invalid, else the refusal itself.
fn focus_first_problem() {
    #[cfg(feature = "hydrate")]
    {
        use leptos::wasm_bindgen::JsCast;
        let doc = document();
        let first = |selector| doc.query_selector(selector).ok().flatten();
        let target = first("[aria-invalid=true]").or_else(|| first("#submit-result"));
        if let Some(target) = target.and_then(|t| t.dyn_into::<leptos::web_sys::HtmlElement>().ok())
        {
            let _ = target.focus();
        }
    }
}

/// `(value, label)` choices: blank for the server's default (labelled `default`), then
/// each of `names`.
fn choices<'a>(default: String, names: impl Iterator<Item = &'a str>) -> Vec<(String, String)> {
    let named = names.map(|n| (n.to_string(), n.to_string()));
    std::iter::once((String::new(), default))
        .chain(named)
        .collect()
}

/// One task-level field: a text input, or a select given `options`, that edits its part
/// of the draft and shows its errors.
#[component]
fn TaskInput(
    form: TaskForm,
    field: TaskField,
    id: &'static str,
    label: &'static str,
    #[prop(into, optional)] placeholder: Signal<String>,
    #[prop(optional)] rows: Option<u32>,
    #[prop(optional)] options: Option<Signal<Vec<(String, String)>>>,
) -> impl IntoView {
    let TaskForm { task, errors } = form;
    let value = Signal::derive(move || task.with(|t| field.get(t).clone()));
    let edit = Callback::new(move |value: String| {
        task.update(|t| field.set(t, value));
        errors.touch(field.path());
    });
    let shown = errors.shown(field.path().to_string());
    match options {
        Some(options) => Either::Left(view! {
            <Choice id label errors=shown options value on_change=edit/>
        }),
        None => Either::Right(view! {
            <TextInput id label errors=shown placeholder rows value on_input=edit/>
        }),
    }
}

/// "2 problems, shown beside their fields."
fn problems(n: usize) -> String {
    match n {
        1 => "1 problem, shown beside its field.".into(),
        n => format!("{n} problems, shown beside their fields."),
    }
}

#[component]
fn SubmitResult(submit: Action<String, Result<SubmitOutcome, AppError>>) -> impl IntoView {
    move || {
        submit.value().get().and_then(|result| match result {
            Ok(SubmitOutcome::Created { .. }) => None,
            Ok(SubmitOutcome::Invalid { errors }) => Some(Either::Left(view! {
                <div class="result error" role="alert" id="submit-result" tabindex="-1">
                    <p>{format!("The server refused the task: {}", problems(errors.len()))}</p>
                </div>
            })),
            Err(e) => Some(Either::Right(view! {
                <div class="result error" role="alert">
                    <p>"The task was not submitted: " {e.to_string()}</p>
                </div>
            })),
        })
    }
}

#[component]
fn CheckResult(check: Action<String, Result<CheckOutcome, AppError>>) -> impl IntoView {
    move || {
        check.value().get().map(|result| match result {
            Ok(CheckOutcome::Valid { canonical, required_capabilities }) => EitherOf3::A(view! {
                <div class="result ok" role="status">
                    <p>"The server accepted this task. It needs: "
                        <strong data-testid="required-capabilities">{required_capabilities.join(", ")}</strong>
                    </p>
                    <details>
                        <summary>"Canonical payload"</summary>
                        <pre>{canonical}</pre>
                    </details>
                </div>
            }),
            Ok(CheckOutcome::Invalid { errors }) => EitherOf3::B(view! {
                <div class="result error" role="alert">
                    <p>{format!("The server found {}", problems(errors.len()))}</p>
                </div>
            }),
            Err(e) => EitherOf3::C(view! {
                <div class="result error" role="alert">
                    <p>"The server could not check the task: " {e.to_string()} ". Try again; if it persists, check the server log."</p>
                </div>
            }),
        })
    }
}
