//! The steps editor: the ordered steps of the draft (add, remove, reorder; a title,
//! instructions and skill each) and a pasted markdown checklist turned into steps.

use leptos::either::Either;
use leptos::prelude::*;

use super::draft::{INHERIT, StepDraft, add_checklist, skill_choices};
use super::field_errors::FieldErrors;
use crate::components::field::{Choice, ErrorList, TextInput};
use crate::settings::SkillInfo;

/// The steps fieldset of the form.
#[component]
pub fn StepsEditor(
    steps: RwSignal<Vec<StepDraft>>,
    skills: StoredValue<Vec<SkillInfo>>,
    errors: FieldErrors,
) -> impl IntoView {
    // The form starts with one step, keyed 0.
    let next_key = StoredValue::new(1u32);
    let add_step = move |_| {
        let key = next_key.get_value();
        next_key.set_value(key + 1);
        steps.update(|s| {
            s.push(StepDraft {
                key,
                ..StepDraft::default()
            })
        });
        errors.edited();
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
                errors.edited();
                Ok(format!("Added {n} step{}.", if n == 1 { "" } else { "s" }))
            }
            Err(errors) => Err(errors),
        });
    };
    let skill_options = Signal::derive(move || {
        let first = [
            (INHERIT, "Inherit the task's skill"),
            ("auto", "auto (the agent decides)"),
        ];
        skills.with_value(|known| skill_choices(&first, known))
    });
    view! {
        <fieldset class="steps" aria-describedby="steps-hint steps-errors">
            <legend>"Steps"</legend>
            <p class="hint" id="steps-hint">"Each step is one run of the agent, in order, in the same checkout. A step with no instructions continues from the objective."</p>
            <ErrorList id="steps-errors" errors=Signal::derive(move || errors.of_step_list())/>
            <ol class="step-list">
                <For each=move || steps.get() key=|s| s.key let:step>
                    <StepEditor key=step.key steps errors skill_options/>
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
    }
}

/// One step's fields and its buttons (move up, move down, remove).
#[component]
fn StepEditor(
    key: u32,
    steps: RwSignal<Vec<StepDraft>>,
    errors: FieldErrors,
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
                errors.touch(&format!("{}.{name}", path()));
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
    let shown = move |name: &'static str| {
        Signal::derive(move || errors.shown(format!("{}.{name}", path())).get())
    };
    let step_errors = Signal::derive(move || {
        // Errors of the step as a whole (blank, duplicate id); each field shows its own.
        let own = errors.shown(path()).get();
        let fields: Vec<String> = ["title", "instructions", "skill"]
            .iter()
            .flat_map(|f| errors.shown(format!("{}.{f}", path())).get())
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
        errors.edited();
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
                            errors.edited();
                        }>"Remove"</button>
                </div>
            </div>
            <ErrorList errors=step_errors/>
            <div class="grid">
                <TextInput id=id("title") label="Title" context errors=shown("title")
                    placeholder="optional short label" value=title on_input=set_title/>
                <Choice id=id("skill") label="Skill" context errors=shown("skill")
                    options=skill_options value=skill on_change=set_skill/>
            </div>
            <TextInput id=id("instructions") label="Instructions" context errors=shown("instructions")
                placeholder="What this step should do (optional)" rows=Some(2)
                value=instructions on_input=set_instructions/>
        </li>
    }
}
