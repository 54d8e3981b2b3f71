//! Labelled form controls with their errors below them, wired for screen readers: the
//! control names its error list (`aria-describedby`) and says when it is invalid, and the
//! list announces changes.

use leptos::either::Either;
use leptos::prelude::*;

/// A labelled text input (or a textarea, given `rows`) with its errors below it.
#[component]
pub fn TextInput(
    #[prop(into)] id: String,
    #[prop(into)] label: Signal<String>,
    /// Read out before the label but not shown (`Step 2 ` before `Title`).
    #[prop(optional)]
    context: Option<Signal<String>>,
    errors: Signal<Vec<String>>,
    #[prop(into, optional)] placeholder: Signal<String>,
    /// Lines of a textarea; `None` for a one-line input.
    #[prop(optional_no_strip)]
    rows: Option<u32>,
    value: Signal<String>,
    on_input: Callback<String>,
) -> impl IntoView {
    let error_id = format!("{id}-error");
    let invalid = move || (!errors.with(Vec::is_empty)).to_string();
    let input = match rows {
        Some(rows) => Either::Left(view! {
            <textarea id=id.clone() rows=rows placeholder=move || placeholder.get()
                aria-describedby=error_id.clone() aria-invalid=invalid
                prop:value=move || value.get()
                on:input=move |ev| on_input.run(event_target_value(&ev))>
            </textarea>
        }),
        None => Either::Right(view! {
            <input id=id.clone() type="text" autocomplete="off" placeholder=move || placeholder.get()
                aria-describedby=error_id.clone() aria-invalid=invalid
                prop:value=move || value.get()
                on:input=move |ev| on_input.run(event_target_value(&ev))/>
        }),
    };
    labelled(id, label, context, errors, error_id, input)
}

/// A labelled select of `(value, label)` options with its errors below it.
#[component]
pub fn Choice(
    #[prop(into)] id: String,
    #[prop(into)] label: Signal<String>,
    #[prop(optional)] context: Option<Signal<String>>,
    errors: Signal<Vec<String>>,
    options: Signal<Vec<(String, String)>>,
    value: Signal<String>,
    on_change: Callback<String>,
) -> impl IntoView {
    let error_id = format!("{id}-error");
    let select = view! {
        <select id=id.clone() aria-describedby=error_id.clone()
            on:change=move |ev| on_change.run(event_target_value(&ev))>
            {move || options.get().into_iter().map(|(option, text)| {
                let selected = value.with(|v| *v == option);
                view! { <option value=option selected=selected>{text}</option> }
            }).collect_view()}
        </select>
    };
    labelled(id, label, context, errors, error_id, select)
}

/// Errors as a list that announces its changes; `id` lets a control name it.
#[component]
pub fn ErrorList(
    #[prop(optional, into)] id: Option<String>,
    errors: Signal<Vec<String>>,
) -> impl IntoView {
    view! {
        <ul class="field-errors" id=id aria-live="polite">
            {move || errors.get().into_iter().map(|e| view! { <li>{e}</li> }).collect_view()}
        </ul>
    }
}

/// The frame every control shares: its label, then the control, then its errors.
fn labelled(
    id: String,
    label: Signal<String>,
    context: Option<Signal<String>>,
    errors: Signal<Vec<String>>,
    error_id: String,
    control: impl IntoView,
) -> impl IntoView {
    view! {
        <div class="field" class:invalid=move || !errors.with(Vec::is_empty)>
            <label for=id>
                {context.map(|c| view! { <span class="visually-hidden">{move || c.get()}</span> })}
                {move || label.get()}
            </label>
            {control}
            <ErrorList id=error_id errors/>
        </div>
    }
}
