//! `/tasks/queue/new`: the task form. Every task-level field (repository, runtime, model,
//! effort, skill, branches, publish) and the steps editor (add, remove, reorder, a title,
//! instructions and skill per step, a pasted markdown checklist). It validates as you type,
//! in the browser, with the same contract crate the server uses; the server checks again on
//! submit, its field errors show beside their fields, and the browser goes to the new job.

use contract::{Defaults, FieldError, PublishMode, RuntimeMode};
use leptos::either::{Either, EitherOf3};
use leptos::prelude::*;

use crate::error::AppError;
use leptos_meta::Title;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::settings::{ServerSettings, SkillInfo};

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
        Ok(job) => Ok(SubmitOutcome::Created { id: job.id }),
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

/// A step's skill choice that sends no `skill`: the step inherits the task's.
const INHERIT: &str = "";

/// One step of the draft; `key` stays with the step when others move or go.
#[derive(Clone, Debug, Default, PartialEq)]
struct StepDraft {
    key: u32,
    title: String,
    instructions: String,
    /// [`INHERIT`], `auto` or a skill id.
    skill: String,
}

impl StepDraft {
    fn is_blank(&self) -> bool {
        self.title.trim().is_empty() && self.instructions.trim().is_empty() && self.skill == INHERIT
    }
}

/// The task-level fields as typed. An empty text means "not given": the server's
/// default applies (an empty runtime or publish mode too).
#[derive(Clone, Debug, Default, PartialEq)]
struct TaskDraft {
    repository: String,
    objective: String,
    runtime: String,
    model: String,
    effort: String,
    skill: String,
    starting_branch: String,
    new_branch: String,
    publish: String,
    pr_base_branch: String,
    commit_message: String,
    pr_title: String,
    pr_body: String,
}

/// `{"id": …}`, with the skill's manifest capabilities so the server derives them.
fn skill_json(id: &str, skills: &[SkillInfo]) -> Value {
    let mut skill = json!({ "id": id });
    if let Some(known) = skills
        .iter()
        .find(|s| s.id == id && !s.required_capabilities.is_empty())
    {
        skill["requiredCapabilities"] = json!(known.required_capabilities);
    }
    skill
}

/// Puts `value` under `key` when it is not blank (trimmed); a blank field is left out.
fn put_text(map: &mut Map<String, Value>, key: &str, value: &str) {
    let value = value.trim();
    if !value.is_empty() {
        map.insert(key.into(), Value::String(value.into()));
    }
}

/// The draft as the JSON a client would submit, so the contract judges exactly that.
fn draft_json(task: &TaskDraft, steps: &[StepDraft], skills: &[SkillInfo]) -> Value {
    let steps: Vec<Value> = steps
        .iter()
        .map(|s| {
            let mut step = Map::new();
            put_text(&mut step, "title", &s.title);
            put_text(&mut step, "instructions", &s.instructions);
            if s.skill != INHERIT {
                step.insert("skill".into(), skill_json(&s.skill, skills));
            }
            Value::Object(step)
        })
        .collect();
    let mut runtime = Map::new();
    put_text(&mut runtime, "mode", &task.runtime);
    put_text(&mut runtime, "model", &task.model);
    put_text(&mut runtime, "effort", &task.effort);
    let mut git = Map::new();
    put_text(&mut git, "startingBranch", &task.starting_branch);
    put_text(&mut git, "newBranch", &task.new_branch);
    let mut publish = Map::new();
    put_text(&mut publish, "mode", &task.publish);
    put_text(&mut publish, "prBaseBranch", &task.pr_base_branch);
    put_text(&mut publish, "commitMessage", &task.commit_message);
    put_text(&mut publish, "prTitle", &task.pr_title);
    put_text(&mut publish, "prBody", &task.pr_body);
    let mut spec = Map::new();
    spec.insert("instructions".into(), Value::String(task.objective.clone()));
    for (key, value) in [("runtime", runtime), ("git", git), ("publish", publish)] {
        if !value.is_empty() {
            spec.insert(key.into(), Value::Object(value));
        }
    }
    if !task.skill.trim().is_empty() {
        spec.insert("skill".into(), skill_json(task.skill.trim(), skills));
    }
    spec.insert("steps".into(), Value::Array(steps));
    json!({
        "type": "task",
        "payload": { "repository": task.repository, "task": spec },
    })
}

/// Does an error at `error` belong to the field at `path` (`task.steps[1]` covers
/// `task.steps[1].instructions`, but not `task.steps[10]`)?
fn belongs(error: &str, path: &str) -> bool {
    error == path
        || error
            .strip_prefix(path)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

/// The messages of the errors at `path` or inside it.
fn errors_at(errors: &[FieldError], path: &str) -> Vec<String> {
    errors
        .iter()
        .filter(|e| belongs(&e.path, path))
        .map(|e| e.message.clone())
        .collect()
}

/// Where the form shows errors; one the server reports elsewhere is listed above the
/// buttons instead, so none is lost.
const FIELD_PATHS: &[&str] = &[
    "repository",
    "task.instructions",
    "task.runtime",
    "task.skill",
    "task.git.startingBranch",
    "task.git.newBranch",
    "task.publish.mode",
    "task.publish.prBaseBranch",
    "task.publish.commitMessage",
    "task.publish.prTitle",
    "task.publish.prBody",
    "task.steps",
];

fn unplaced(errors: &[FieldError]) -> Vec<FieldError> {
    errors
        .iter()
        .filter(|e| !FIELD_PATHS.iter().any(|p| belongs(&e.path, p)))
        .cloned()
        .collect()
}

/// Turns pasted `- [ ]` lines into steps, after the steps that have something in them
/// (a blank first step is replaced, not kept).
fn add_checklist(
    steps: &mut Vec<StepDraft>,
    text: &str,
    next_key: &mut u32,
) -> Result<usize, Vec<String>> {
    let items = contract::parse_checklist(text)
        .map_err(|errors| errors.into_iter().map(|e| e.message).collect::<Vec<_>>())?;
    if items.is_empty() {
        return Err(vec![
            "no `- [ ] step` lines found; paste one line per step".into(),
        ]);
    }
    steps.retain(|s| !s.is_blank());
    let added = items.len();
    for item in items {
        steps.push(StepDraft {
            key: *next_key,
            instructions: item.text,
            ..StepDraft::default()
        });
        *next_key += 1;
    }
    Ok(added)
}

/// The form: an island, the one part of this page that runs in the browser.
#[island]
fn DraftForm(settings: ServerSettings) -> impl IntoView {
    let defaults: Defaults = settings.defaults.clone();
    let skills = StoredValue::new(settings.skills.clone());
    let task = RwSignal::new(TaskDraft::default());
    let steps = RwSignal::new(vec![StepDraft::default()]);
    let next_key = StoredValue::new(1u32);
    // Errors show for a field once it has been typed in, or for all after a submit.
    let touched = RwSignal::new(Vec::<String>::new());
    // The server's errors of the last submit or check; any edit makes them stale.
    let server_errors = RwSignal::new(Vec::<FieldError>::new());
    let edited = move || server_errors.update(|e| e.clear());
    let touch = move |path: &str| {
        edited();
        touched.update(|t| {
            if !t.iter().any(|p| p == path) {
                t.push(path.to_string())
            }
        })
    };

    let draft = move || steps.with(|s| task.with(|t| skills.with_value(|k| draft_json(t, s, k))));
    let errors = Memo::new({
        let defaults = defaults.clone();
        move |_| match contract::normalize(&draft(), &defaults) {
            Ok(_) => Vec::new(),
            Err(errors) => errors,
        }
    });
    let shown = move |path: String| {
        Signal::derive(move || {
            let mut shown = if touched.with(|t| {
                t.iter()
                    .any(|p| p == "*" || belongs(p, &path) || belongs(&path, p))
            }) {
                errors.with(|e| errors_at(e, &path))
            } else {
                Vec::new()
            };
            for e in server_errors.with(|e| errors_at(e, &path)) {
                if !shown.contains(&e) {
                    shown.push(e);
                }
            }
            shown
        })
    };

    // Effects run only in the browser: this turns true once the island has hydrated.
    let ready = RwSignal::new(false);
    Effect::new(move |_| ready.set(true));
    let check = Action::new(|payload: &String| check_task(payload.clone()));
    let submit = Action::new(|payload: &String| submit_task(payload.clone()));
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        touch("*");
        submit.dispatch(draft().to_string());
    };
    let on_check = move |_| {
        touch("*");
        check.dispatch(draft().to_string());
    };
    // Each answer replaces the errors shown; a later edit clears them.
    Effect::new(move |_| {
        if let Some(Ok(SubmitOutcome::Invalid { errors })) = submit.value().get() {
            server_errors.set(errors);
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(CheckOutcome::Invalid { errors })) = check.value().get() {
            server_errors.set(errors);
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

    let text = move |get: fn(&TaskDraft) -> &String,
                     set: fn(&mut TaskDraft, String),
                     path: &'static str| {
        (
            Signal::derive(move || task.with(|t| get(t).clone())),
            Callback::new(move |value: String| {
                task.update(|t| set(t, value));
                touch(path);
            }),
        )
    };
    let (repository, set_repository) =
        text(|t| &t.repository, |t, v| t.repository = v, "repository");
    let (objective, set_objective) = text(
        |t| &t.objective,
        |t, v| t.objective = v,
        "task.instructions",
    );
    let (model, set_model) = text(|t| &t.model, |t, v| t.model = v, "task.runtime.model");
    let (starting, set_starting) = text(
        |t| &t.starting_branch,
        |t, v| t.starting_branch = v,
        "task.git.startingBranch",
    );
    let (new_branch, set_new_branch) = text(
        |t| &t.new_branch,
        |t, v| t.new_branch = v,
        "task.git.newBranch",
    );
    let (pr_base, set_pr_base) = text(
        |t| &t.pr_base_branch,
        |t, v| t.pr_base_branch = v,
        "task.publish.prBaseBranch",
    );
    let (commit, set_commit) = text(
        |t| &t.commit_message,
        |t, v| t.commit_message = v,
        "task.publish.commitMessage",
    );
    let (pr_title, set_pr_title) = text(
        |t| &t.pr_title,
        |t, v| t.pr_title = v,
        "task.publish.prTitle",
    );
    let (pr_body, set_pr_body) = text(|t| &t.pr_body, |t, v| t.pr_body = v, "task.publish.prBody");
    let (runtime_choice, set_runtime) = text(
        |t| &t.runtime,
        // An effort of the old runtime may not exist on the new one.
        |t, v| {
            t.runtime = v;
            t.effort.clear();
        },
        "task.runtime.mode",
    );
    let (effort, set_effort) = text(|t| &t.effort, |t, v| t.effort = v, "task.runtime.effort");
    let (skill, set_skill) = text(|t| &t.skill, |t, v| t.skill = v, "task.skill");
    let (publish, set_publish) = text(|t| &t.publish, |t, v| t.publish = v, "task.publish.mode");

    let runtime_options = Signal::derive(move || {
        let mut options = vec![(String::new(), runtime_default.clone())];
        options.extend(
            RuntimeMode::ALL
                .iter()
                .map(|m| (m.as_str().to_string(), m.as_str().to_string())),
        );
        options
    });
    let effort_options = Signal::derive(move || {
        let mut options = vec![(String::new(), effort_default())];
        options.extend(
            runtime
                .get()
                .efforts()
                .iter()
                .map(|e| (e.to_string(), e.to_string())),
        );
        options
    });
    let skill_options = move |first: Vec<(String, String)>| {
        Signal::derive(move || {
            let mut options = first.clone();
            skills.with_value(|known| {
                options.extend(known.iter().map(|s| {
                    let label = match &s.description {
                        Some(d) => format!("{} — {d}", s.id),
                        None => s.id.clone(),
                    };
                    (s.id.clone(), label)
                }))
            });
            options
        })
    };
    let task_skill_options =
        skill_options(vec![(String::new(), "auto (the agent decides)".into())]);
    let publish_options = Signal::derive(move || {
        let mut options = vec![(String::new(), publish_default.clone())];
        options.extend(
            PublishMode::ALL
                .iter()
                .map(|m| (m.as_str().to_string(), m.as_str().to_string())),
        );
        options
    });

    let add_step = move |_| {
        let key = next_key.get_value();
        next_key.set_value(key + 1);
        steps.update(|s| {
            s.push(StepDraft {
                key,
                ..StepDraft::default()
            })
        });
        edited();
    };
    let checklist = RwSignal::new(String::new());
    let checklist_note = RwSignal::new(Err::<String, Vec<String>>(Vec::new()));
    let paste = move |_| {
        let mut key = next_key.get_value();
        let result = steps
            .try_update(|s| checklist.with(|text| add_checklist(s, text, &mut key)))
            .unwrap_or(Ok(0));
        next_key.set_value(key);
        checklist_note.set(match result {
            Ok(n) => {
                checklist.set(String::new());
                edited();
                Ok(format!("Added {n} step{}.", if n == 1 { "" } else { "s" }))
            }
            Err(errors) => Err(errors),
        });
    };

    view! {
        <section class="card" aria-labelledby="draft-title">
            <h2 id="draft-title">"Task"</h2>
            <p class="muted">"Checked as you type, in your browser, by the same rules the server applies."</p>
            // Disabled until the form runs in the browser: typed before that, text would be
            // lost when it starts.
            <form on:submit=on_submit novalidate>
                <fieldset class="form-body" disabled=move || !ready.get()>
                <TextInput id="repository" label="Repository" errors=shown("repository".into())
                    placeholder="owner/name, a git URL or a local path"
                    value=repository on_input=set_repository/>
                <TextInput id="objective" label="Objective" errors=shown("task.instructions".into())
                    placeholder="What the whole task should achieve" rows=3
                    value=objective on_input=set_objective/>
                <fieldset class="group">
                    <legend>"Agent"</legend>
                    <div class="grid">
                        <Choice id="runtime" label="Runtime" errors=shown("task.runtime.mode".into())
                            options=runtime_options value=runtime_choice on_change=set_runtime/>
                        <TextInput id="model" label="Model" errors=shown("task.runtime.model".into())
                            placeholder=Signal::derive(model_hint) value=model on_input=set_model/>
                        <Choice id="effort" label="Effort" errors=shown("task.runtime.effort".into())
                            options=effort_options value=effort on_change=set_effort/>
                        <Choice id="task-skill" label="Skill" errors=shown("task.skill".into())
                            options=task_skill_options value=skill on_change=set_skill/>
                    </div>
                </fieldset>
                <fieldset class="steps" aria-describedby="steps-hint steps-errors">
                    <legend>"Steps"</legend>
                    <p class="hint" id="steps-hint">"Each step is one run of the agent, in order, in the same checkout. A step with no instructions continues from the objective."</p>
                    <ul class="field-errors" id="steps-errors" aria-live="polite">
                        {move || {
                            let own: Vec<String> = errors.with(|e| e.iter().filter(|e| e.path == "task.steps").map(|e| e.message.clone()).collect());
                            let touched_steps = touched.with(|t| t.iter().any(|p| p == "*" || p == "task.steps"));
                            let mut all = if touched_steps { own } else { Vec::new() };
                            all.extend(server_errors.with(|e| e.iter().filter(|e| e.path == "task.steps").map(|e| e.message.clone()).collect::<Vec<_>>()));
                            all.dedup();
                            all.into_iter().map(|e| view! { <li>{e}</li> }).collect_view()
                        }}
                    </ul>
                    <ol class="step-list">
                        <For each=move || steps.get() key=|s| s.key let:step>
                            <StepEditor key=step.key steps shown=shown
                                touch=Callback::new(move |p: String| touch(&p)) edited=Callback::new(move |_: ()| edited())
                                skill_options=skill_options(vec![
                                    (INHERIT.to_string(), "Inherit the task's skill".into()),
                                    ("auto".to_string(), "auto (the agent decides)".into()),
                                ])/>
                        </For>
                    </ol>
                    <div class="actions">
                        <button type="button" class="secondary" on:click=add_step>"Add step"</button>
                    </div>
                    <details class="checklist">
                        <summary>"Paste a markdown checklist"</summary>
                        <label for="checklist">"Markdown checklist"</label>
                        <textarea id="checklist" rows="4" placeholder="- [ ] Research the API\n- [ ] Write the client"
                            prop:value=move || checklist.get()
                            on:input=move |ev| checklist.set(event_target_value(&ev))>
                        </textarea>
                        <button type="button" class="secondary" on:click=paste>"Add these steps"</button>
                        <div aria-live="polite">
                            {move || match checklist_note.get() {
                                Ok(note) => Either::Left(view! { <p class="hint">{note}</p> }),
                                Err(errors) => Either::Right(view! {
                                    <ul class="field-errors">{errors.into_iter().map(|e| view! { <li>{e}</li> }).collect_view()}</ul>
                                }),
                            }}
                        </div>
                    </details>
                </fieldset>
                <fieldset class="group">
                    <legend>"Branches and publishing"</legend>
                    <div class="grid">
                        <TextInput id="starting-branch" label="Starting branch" errors=shown("task.git.startingBranch".into())
                            placeholder="the repository's default branch" value=starting on_input=set_starting/>
                        <TextInput id="new-branch" label="New branch" errors=shown("task.git.newBranch".into())
                            placeholder="a generated task/… branch" value=new_branch on_input=set_new_branch/>
                        <Choice id="publish-mode" label="Publish" errors=shown("task.publish.mode".into())
                            options=publish_options value=publish on_change=set_publish/>
                        <TextInput id="pr-base-branch" label="Pull request base" errors=shown("task.publish.prBaseBranch".into())
                            placeholder="the starting branch" value=pr_base on_input=set_pr_base/>
                        <TextInput id="commit-message" label="Commit message" errors=shown("task.publish.commitMessage".into())
                            placeholder="generated from the objective" value=commit on_input=set_commit/>
                        <TextInput id="pr-title" label="Pull request title" errors=shown("task.publish.prTitle".into())
                            placeholder="generated from the objective" value=pr_title on_input=set_pr_title/>
                    </div>
                    <TextInput id="pr-body" label="Pull request body" errors=shown("task.publish.prBody".into())
                        placeholder="generated from the steps" rows=3 value=pr_body on_input=set_pr_body/>
                </fieldset>
                <Unplaced server_errors/>
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

/// One step's fields and its buttons (move up, move down, remove).
#[component]
fn StepEditor(
    key: u32,
    steps: RwSignal<Vec<StepDraft>>,
    shown: impl Fn(String) -> Signal<Vec<String>> + Copy + Send + Sync + 'static,
    touch: Callback<String>,
    /// Moving or removing a step renumbers the others: the server's errors no longer fit.
    edited: Callback<()>,
    skill_options: Signal<Vec<(String, String)>>,
) -> impl IntoView {
    let index =
        Memo::new(move |_| steps.with(|s| s.iter().position(|d| d.key == key).unwrap_or(0)));
    let count = Memo::new(move |_| steps.with(Vec::len));
    let path = move || format!("task.steps[{}]", index.get());
    let field = move |get: fn(&StepDraft) -> &String,
                      set: fn(&mut StepDraft, String),
                      name: &'static str| {
        (
            Signal::derive(move || {
                steps.with(|s| {
                    s.iter()
                        .find(|d| d.key == key)
                        .map(|d| get(d).clone())
                        .unwrap_or_default()
                })
            }),
            Callback::new(move |value: String| {
                steps.update(|s| {
                    if let Some(d) = s.iter_mut().find(|d| d.key == key) {
                        set(d, value)
                    }
                });
                touch.run(format!("{}.{name}", path()));
            }),
        )
    };
    let (title, set_title) = field(|d| &d.title, |d, v| d.title = v, "title");
    let (instructions, set_instructions) = field(
        |d| &d.instructions,
        |d, v| d.instructions = v,
        "instructions",
    );
    let (skill, set_skill) = field(|d| &d.skill, |d, v| d.skill = v, "skill");
    let step_errors = Signal::derive(move || {
        // Errors of the step as a whole (blank, duplicate id); each field shows its own.
        let own = shown(path()).get();
        let fields: Vec<String> = ["title", "instructions", "skill"]
            .iter()
            .flat_map(|f| shown(format!("{}.{f}", path())).get())
            .collect();
        own.into_iter()
            .filter(|e| !fields.contains(e))
            .collect::<Vec<_>>()
    });
    let move_by = move |delta: isize| {
        steps.update(|s| {
            let i = index.get_untracked();
            let j = i as isize + delta;
            if j >= 0 && (j as usize) < s.len() {
                s.swap(i, j as usize);
            }
        });
        edited.run(());
    };
    let number = move || index.get() + 1;
    let context = Signal::derive(move || format!("Step {} ", number()));
    let id = move |field: &str| format!("step-{key}-{field}");
    view! {
        <li class="step">
            <div class="step-head">
                <h3>{move || format!("Step {}", number())}</h3>
                <div class="step-buttons">
                    <button type="button" class="secondary small" disabled=move || index.get() == 0
                        aria-label=move || format!("Move step {} up", number())
                        on:click=move |_| move_by(-1)>"↑"</button>
                    <button type="button" class="secondary small" disabled=move || { index.get() + 1 >= count.get() }
                        aria-label=move || format!("Move step {} down", number())
                        on:click=move |_| move_by(1)>"↓"</button>
                    <button type="button" class="secondary small"
                        aria-label=move || format!("Remove step {}", number())
                        on:click=move |_| {
                            steps.update(|s| s.retain(|d| d.key != key));
                            edited.run(());
                        }>"Remove"</button>
                </div>
            </div>
            <ul class="field-errors" aria-live="polite">
                {move || step_errors.get().into_iter().map(|e| view! { <li>{e}</li> }).collect_view()}
            </ul>
            <div class="grid">
                <TextInput id=id("title") label="Title" context
                    errors=Signal::derive(move || shown(format!("{}.title", path())).get())
                    placeholder="optional short label" value=title on_input=set_title/>
                <Choice id=id("skill") label="Skill" context
                    errors=Signal::derive(move || shown(format!("{}.skill", path())).get())
                    options=skill_options value=skill on_change=set_skill/>
            </div>
            <TextInput id=id("instructions") label="Instructions" context
                errors=Signal::derive(move || shown(format!("{}.instructions", path())).get())
                placeholder="What this step should do (optional)" rows=2
                value=instructions on_input=set_instructions/>
        </li>
    }
}

/// A labelled text input (or a textarea, given `rows`) with its errors below it.
#[component]
fn TextInput(
    #[prop(into)] id: String,
    #[prop(into)] label: Signal<String>,
    /// Read out before the label but not shown (`Step 2 ` before `Title`).
    #[prop(optional)]
    context: Option<Signal<String>>,
    errors: Signal<Vec<String>>,
    #[prop(into, optional)] placeholder: Signal<String>,
    #[prop(optional)] rows: Option<u32>,
    value: Signal<String>,
    on_input: Callback<String>,
) -> impl IntoView {
    let error_id = format!("{id}-error");
    let input = match rows {
        Some(rows) => Either::Left(view! {
            <textarea id=id.clone() rows=rows placeholder=move || placeholder.get()
                aria-describedby=error_id.clone() aria-invalid=move || (!errors.with(Vec::is_empty)).to_string()
                prop:value=move || value.get()
                on:input=move |ev| on_input.run(event_target_value(&ev))>
            </textarea>
        }),
        None => Either::Right(view! {
            <input id=id.clone() type="text" autocomplete="off" placeholder=move || placeholder.get()
                aria-describedby=error_id.clone() aria-invalid=move || (!errors.with(Vec::is_empty)).to_string()
                prop:value=move || value.get()
                on:input=move |ev| on_input.run(event_target_value(&ev))/>
        }),
    };
    view! {
        <div class="field" class:invalid=move || !errors.with(Vec::is_empty)>
            <label for=id>
                {context.map(|c| view! { <span class="visually-hidden">{move || c.get()}</span> })}
                {move || label.get()}
            </label>
            {input}
            <ul class="field-errors" id=error_id aria-live="polite">
                {move || errors.get().into_iter().map(|e| view! { <li>{e}</li> }).collect_view()}
            </ul>
        </div>
    }
}

/// A labelled select of `(value, label)` options with its errors below it.
#[component]
fn Choice(
    #[prop(into)] id: String,
    #[prop(into)] label: Signal<String>,
    #[prop(optional)] context: Option<Signal<String>>,
    errors: Signal<Vec<String>>,
    options: Signal<Vec<(String, String)>>,
    value: Signal<String>,
    on_change: Callback<String>,
) -> impl IntoView {
    let error_id = format!("{id}-error");
    view! {
        <div class="field" class:invalid=move || !errors.with(Vec::is_empty)>
            <label for=id.clone()>
                {context.map(|c| view! { <span class="visually-hidden">{move || c.get()}</span> })}
                {move || label.get()}
            </label>
            <select id=id aria-describedby=error_id.clone()
                on:change=move |ev| on_change.run(event_target_value(&ev))>
                {move || options.get().into_iter().map(|(option, text)| {
                    let selected = value.with(|v| *v == option);
                    view! { <option value=option selected=selected>{text}</option> }
                }).collect_view()}
            </select>
            <ul class="field-errors" id=error_id aria-live="polite">
                {move || errors.get().into_iter().map(|e| view! { <li>{e}</li> }).collect_view()}
            </ul>
        </div>
    }
}

/// The server's errors that belong to no field of the form (an auth ref, say).
#[component]
fn Unplaced(server_errors: RwSignal<Vec<FieldError>>) -> impl IntoView {
    move || {
        let errors = server_errors.with(|e| unplaced(e));
        (!errors.is_empty()).then(|| {
            view! {
                <div class="result error" role="alert">
                    <ul>{errors.into_iter().map(|e| view! { <li>{e.to_string()}</li> }).collect_view()}</ul>
                </div>
            }
        })
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
                <div class="result error" role="alert">
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

#[cfg(test)]
mod tests {
    use super::*;

    fn err(path: &str) -> FieldError {
        FieldError {
            path: path.into(),
            message: path.into(),
        }
    }

    fn step(key: u32, instructions: &str) -> StepDraft {
        StepDraft {
            key,
            instructions: instructions.into(),
            ..StepDraft::default()
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
    fn errors_no_field_shows_are_listed_apart() {
        let errors = vec![err("task.runtime.effort"), err("auth.repoAuthRef"), err("")];
        let left: Vec<String> = unplaced(&errors).into_iter().map(|e| e.path).collect();
        assert_eq!(left, ["auth.repoAuthRef", ""]);
    }

    #[test]
    fn a_blank_step_is_sent_as_one_so_the_contract_can_refuse_it() {
        let steps = [step(0, "  "), step(1, " a ")];
        let json = draft_json(&TaskDraft::default(), &steps, &[]);
        assert_eq!(
            json["payload"]["task"]["steps"],
            json!([{}, { "instructions": "a" }])
        );
    }

    #[test]
    fn only_given_fields_are_sent_so_the_server_defaults_apply() {
        let task = TaskDraft {
            repository: "octo/hello".into(),
            objective: "Do it".into(),
            ..TaskDraft::default()
        };
        let json = draft_json(&task, &[], &[]);
        assert_eq!(
            json,
            json!({ "type": "task", "payload": { "repository": "octo/hello",
                "task": { "instructions": "Do it", "steps": [] } } })
        );
    }

    #[test]
    fn every_field_and_a_known_skill_s_capabilities_reach_the_payload() {
        let skills = [SkillInfo {
            id: "speckit".into(),
            description: None,
            required_capabilities: vec!["docker".into()],
        }];
        let task = TaskDraft {
            repository: "octo/hello".into(),
            objective: "Ship".into(),
            runtime: "claude".into(),
            model: "opus".into(),
            effort: "high".into(),
            skill: "speckit".into(),
            starting_branch: "main".into(),
            new_branch: "feature/x".into(),
            publish: "branch".into(),
            pr_base_branch: "develop".into(),
            commit_message: "Ship it".into(),
            pr_title: "Ship".into(),
            pr_body: "Body".into(),
        };
        let steps = [
            StepDraft {
                key: 3,
                title: "Spec".into(),
                skill: "speckit".into(),
                ..StepDraft::default()
            },
            StepDraft {
                key: 1,
                skill: "auto".into(),
                instructions: "Code".into(),
                ..StepDraft::default()
            },
        ];
        let json = draft_json(&task, &steps, &skills);
        let spec = &json["payload"]["task"];
        assert_eq!(
            spec["runtime"],
            json!({ "mode": "claude", "model": "opus", "effort": "high" })
        );
        assert_eq!(
            spec["skill"],
            json!({ "id": "speckit", "requiredCapabilities": ["docker"] })
        );
        assert_eq!(
            spec["git"],
            json!({ "startingBranch": "main", "newBranch": "feature/x" })
        );
        assert_eq!(
            spec["publish"],
            json!({ "mode": "branch", "prBaseBranch": "develop", "commitMessage": "Ship it", "prTitle": "Ship", "prBody": "Body" })
        );
        assert_eq!(
            spec["steps"],
            json!([
                { "title": "Spec", "skill": { "id": "speckit", "requiredCapabilities": ["docker"] } },
                { "instructions": "Code", "skill": { "id": "auto" } },
            ])
        );
        let task = contract::normalize(&json, &Defaults::default()).unwrap();
        assert!(
            task.payload
                .required_capabilities
                .contains(&"docker".to_string())
        );
    }

    #[test]
    fn a_pasted_checklist_replaces_blank_steps_and_keeps_the_others() {
        let mut steps = vec![step(0, ""), step(1, "keep me")];
        let mut next = 2;
        let added = add_checklist(&mut steps, "## Steps\n- [ ] one\n- [x] two\n", &mut next);
        assert_eq!(added, Ok(2));
        let texts: Vec<(u32, &str)> = steps
            .iter()
            .map(|s| (s.key, s.instructions.as_str()))
            .collect();
        assert_eq!(texts, [(1, "keep me"), (2, "one"), (3, "two")]);
        assert_eq!(next, 4);
    }

    #[test]
    fn a_pasted_checklist_with_a_stray_line_names_the_line_and_adds_nothing() {
        let mut steps = vec![step(0, "")];
        let mut next = 1;
        let errors = add_checklist(&mut steps, "- [ ] one\nsend it\n", &mut next).unwrap_err();
        assert!(errors[0].starts_with("line 2:"), "{errors:?}");
        assert_eq!(steps.len(), 1);
        assert!(add_checklist(&mut steps, "\n\n", &mut next).is_err());
    }
}
