use leptos::prelude::*;

/// A table that scrolls sideways on a narrow screen rather than squeezing its columns;
/// `headers` name the columns, the children are its rows.
#[component]
pub fn Table(
    class: &'static str,
    headers: &'static [&'static str],
    children: Children,
) -> impl IntoView {
    let headers = headers
        .iter()
        .map(|h| view! { <th scope="col">{*h}</th> })
        .collect_view();
    view! {
        <div class="table-wrap">
            <table class=class>
                <thead><tr>{headers}</tr></thead>
                <tbody>{children()}</tbody>
            </table>
        </div>
    }
}
