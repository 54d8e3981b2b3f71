use leptos::prelude::*;

/// A table that scrolls sideways on a narrow screen rather than squeezing its columns;
/// `headers` name the columns, the children are its rows. The children keep their type
/// (no `AnyView`): erasing it would carry hydration code for every table into the bundle.
#[component]
pub fn Table<T: IntoView + 'static>(
    class: &'static str,
    headers: &'static [&'static str],
    children: TypedChildren<T>,
) -> impl IntoView {
    let headers = headers
        .iter()
        .map(|h| view! { <th scope="col">{*h}</th> })
        .collect_view();
    view! {
        <div class="table-wrap">
            <table class=class>
                <thead><tr>{headers}</tr></thead>
                <tbody>{children.into_inner()()}</tbody>
            </table>
        </div>
    }
}
