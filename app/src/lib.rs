//! The dashboard room: the pages an operator reads and submits tasks with, and the server
//! functions behind them, which call the queue service and nothing else.
//!
//! Compiled twice: with `ssr` into the server (rendering, server functions) and with
//! `hydrate` into the browser bundle. Pages are islands: the server renders them whole,
//! and only the `#[island]` parts run in the browser (the task form, which validates with
//! the same contract crate the server uses; the live jobs table; the live job), so the
//! bundle carries those and nothing else. A page is `pages/<page>.rs` (or a folder when it
//! outgrows a file), shared pieces are in `components/`, the data the job pages are drawn
//! from is in `views.rs`, and `format.rs` shapes it on the server.

mod codec;
mod components;
pub mod error;
#[cfg(feature = "ssr")]
mod format;
mod pages;
mod settings;
#[cfg(feature = "ssr")]
mod ssr;
#[cfg(feature = "hydrate")]
mod stream;
mod views;

use leptos::prelude::*;
use leptos_meta::{MetaTags, Stylesheet, Title, provide_meta_context};
use leptos_router::SsrMode;
use leptos_router::components::{Route, Router, Routes};
use leptos_router::path;

#[cfg(feature = "ssr")]
pub use settings::SkillCatalog;
pub use settings::{RuntimeStatus, ServerSettings, SkillInfo};

/// Where leptos serves the server functions (its default): `/api/<name><hash>`.
pub const SERVER_FN_PREFIX: &str = "/api/";

/// `text` made safe inside `<title>` (RCDATA: only `&` and `<` matter there; `>` and quotes
/// go too, so the result is safe in any text position).
fn escape_title(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Counts on every duration of something still running (an element with `data-since`, its
/// start in ms since the epoch), once a second, in the format `format::duration` writes.
/// Plain JavaScript in the page rather than wasm: it costs the bundle nothing and works
/// before the islands hydrate. It writes into the element's text node, the one an island
/// keeps, so a later render still lands. `stepwise-now` is the server's clock at render,
/// so a browser whose clock is off counts from the right start.
const TICK: &str = r#"(()=>{
const m=document.querySelector('meta[name=stepwise-now]');
const skew=m?Date.now()-Number(m.content):0;
const two=n=>String(Math.floor(n)).padStart(2,'0');
const f=ms=>ms<1e3?ms+'ms':ms<6e4?(ms/1e3).toFixed(1)+'s':ms<36e5?Math.floor(ms/6e4)+'m '+two(ms/1e3%60)+'s':Math.floor(ms/36e5)+'h '+two(ms/6e4%60)+'m';
setInterval(()=>{for(const e of document.querySelectorAll('[data-since]')){
const v=f(Math.max(0,Math.round(Date.now()-skew-Number(e.dataset.since))));
const t=[...e.childNodes].find(n=>n.nodeType===3);
if(t){if(t.data!==v)t.data=v}else e.append(v)}},1000)})()"#;

/// The server's clock now, in ms since the epoch (the shell is only rendered there).
fn server_now() -> i64 {
    #[cfg(feature = "ssr")]
    return chrono::Utc::now().timestamp_millis();
    #[cfg(not(feature = "ssr"))]
    return 0;
}

/// The HTML document around every page, rendered by the server.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <meta name="color-scheme" content="light dark"/>
                <link rel="icon" type="image/svg+xml" href="/favicon.svg"/>
                <AutoReload options=options.clone()/>
                <HydrationScripts options islands=true/>
                <MetaTags/>
                <meta name="stepwise-now" content=server_now()/>
                <script inner_html=TICK></script>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    view! {
        <Stylesheet id="leptos" href="/pkg/stepwise.css"/>
        // Every page's title passes through here. leptos_meta 0.8.7 writes the title into
        // the head as raw HTML during SSR, so a title made of a user's or a worker's text
        // (an artifact's name, an objective) must be escaped first. Only the server runs
        // it: the shell is not an island, so the browser never sets the title again.
        <Title formatter=|page: String| format!("{} · stepwise", escape_title(&page))/>
        <Router>
            <header class="topbar">
                <a class="brand" href="/tasks/queue">"stepwise"</a>
                <nav aria-label="Main">
                    <a href="/tasks/queue">"Queue"</a>
                    <a href="/tasks/workers">"Workers"</a>
                    <a href="/tasks/schedules">"Schedules"</a>
                </nav>
                <LogoutButton/>
            </header>
            <main>
                <Routes fallback=pages::not_found::NotFound>
                    // Async: each page is sent whole, its data in place, so it reads the
                    // same with scripts off (streamed pages fill themselves in by script).
                    <Route path=path!("/tasks/queue") view=pages::queue::QueuePage ssr=SsrMode::Async/>
                    <Route path=path!("/tasks/queue/new") view=pages::new_task::NewTaskPage ssr=SsrMode::Async/>
                    <Route path=path!("/tasks/queue/:id") view=pages::job::JobPage ssr=SsrMode::Async/>
                    <Route path=path!("/tasks/queue/:id/artifacts/:artifact") view=pages::artifact::ArtifactPage ssr=SsrMode::Async/>
                    <Route path=path!("/tasks/workers") view=pages::workers::WorkersPage ssr=SsrMode::Async/>
                    <Route path=path!("/tasks/schedules") view=pages::schedules::SchedulesPage ssr=SsrMode::Async/>
                    <Route path=path!("/login") view=pages::login::LoginPage/>
                </Routes>
            </main>
        </Router>
    }
}

/// Loads another page, as a link would: with islands there is no client-side router.
pub(crate) fn go_to(path: &str) {
    #[cfg(feature = "hydrate")]
    {
        let _ = window().location().set_href(path);
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = path;
}

/// Shown on every page but the login page, where there is nobody to log out yet.
#[component]
fn LogoutButton() -> impl IntoView {
    let location = leptos_router::hooks::use_location();
    move || {
        (location.pathname.get() != "/login").then(|| {
            view! {
                <form method="post" action="/logout" class="logout">
                    <button type="submit" class="link">"Log out"</button>
                </form>
            }
        })
    }
}
