//! `/tasks/queue/{id}/artifacts/{artifact}`: one file a worker stored for a job, read on the
//! server. A patch reads as a diff (its files with their added and removed line counts,
//! then every line marked and coloured); any other text as text. The start of a large
//! file is shown, with the whole file a download away.

use leptos::prelude::*;

use crate::error::AppError;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;
use serde::{Deserialize, Serialize};

/// The most of a file the page shows; the download has it all.
pub const SHOWN_BYTES: u64 = 1024 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LineKind {
    /// `diff --git`, `index`, `---`, `+++` and the other lines that name a file.
    File,
    /// `@@ -1,3 +1,4 @@`.
    Hunk,
    Added,
    Removed,
    Context,
}

impl LineKind {
    fn class(self) -> &'static str {
        match self {
            LineKind::File => "file",
            LineKind::Hunk => "hunk",
            LineKind::Added => "add",
            LineKind::Removed => "del",
            LineKind::Context => "ctx",
        }
    }
}

/// One file of a patch: its path and how many lines it adds and removes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffFile {
    pub path: String,
    pub added: usize,
    pub removed: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Content {
    Diff {
        files: Vec<DiffFile>,
        lines: Vec<(LineKind, String)>,
    },
    Text(String),
    /// Not UTF-8 text: only the download makes sense.
    Binary,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArtifactPage {
    pub job_id: String,
    pub name: String,
    pub size: u64,
    pub download: String,
    pub content: Content,
    /// Only the first [`SHOWN_BYTES`] are shown.
    pub truncated: bool,
}

/// Reads a unified diff (`git diff` output) line by line: which lines name files, start
/// hunks, add or remove, and each file's counts.
#[cfg(feature = "ssr")]
pub fn parse_diff(text: &str) -> (Vec<DiffFile>, Vec<(LineKind, String)>) {
    let mut files: Vec<DiffFile> = Vec::new();
    let mut lines = Vec::new();
    let mut in_hunk = false;
    for line in text.lines() {
        let kind = if let Some(rest) = line.strip_prefix("diff --git ") {
            in_hunk = false;
            // `a/path b/path`: the new side names the file.
            let path = rest.rsplit_once(" b/").map_or(rest, |(_, b)| b).to_string();
            files.push(DiffFile {
                path,
                added: 0,
                removed: 0,
            });
            LineKind::File
        } else if line.starts_with("@@") {
            in_hunk = true;
            LineKind::Hunk
        } else if !in_hunk {
            LineKind::File
        } else if line.starts_with('+') {
            if let Some(file) = files.last_mut() {
                file.added += 1;
            }
            LineKind::Added
        } else if line.starts_with('-') {
            if let Some(file) = files.last_mut() {
                file.removed += 1;
            }
            LineKind::Removed
        } else {
            LineKind::Context
        };
        lines.push((kind, line.to_string()));
    }
    (files, lines)
}

#[server]
pub async fn load_artifact(id: String, artifact: String) -> Result<ArtifactPage, AppError> {
    use crate::ssr;
    ssr::user()?;
    let queue = ssr::queue()?;
    let id = ssr::job_id(&id)?;
    let (found, bytes, truncated) = queue
        .read_artifact(&id, &artifact, SHOWN_BYTES)
        .await
        .map_err(ssr::refused)?;
    let text = match String::from_utf8(bytes) {
        Ok(text) => Some(text),
        // Cut inside a character: keep what is whole.
        Err(e) if truncated && e.utf8_error().error_len().is_none() => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).ok()
        }
        Err(_) => None,
    };
    let is_patch = found.name.ends_with(".patch") || found.name.ends_with(".diff");
    let content = match text {
        Some(text) if is_patch => {
            let (files, lines) = parse_diff(&text);
            Content::Diff { files, lines }
        }
        Some(text) => Content::Text(text),
        None => Content::Binary,
    };
    Ok(ArtifactPage {
        download: format!("/api/queue/jobs/{id}/artifacts/{}/download", found.id),
        job_id: id.to_string(),
        name: found.name,
        size: found.size,
        content,
        truncated,
    })
}

#[component]
pub fn ArtifactPage() -> impl IntoView {
    let params = use_params_map();
    let page = Resource::new(
        move || {
            let p = params.read();
            (
                p.get("id").unwrap_or_default(),
                p.get("artifact").unwrap_or_default(),
            )
        },
        |(id, artifact)| load_artifact(id, artifact),
    );
    view! {
        <Title text="Artifact"/>
        <Suspense fallback=|| view! { <p class="muted">"Loading the file…"</p> }>
            {move || Suspend::new(async move {
                match page.await {
                    Ok(page) => view! { <ArtifactView page/> }.into_any(),
                    Err(e) => view! {
                        <p class="error" role="alert">"Could not show this file: " {e.to_string()}</p>
                    }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn ArtifactView(page: ArtifactPage) -> impl IntoView {
    let back = format!("/tasks/queue/{}", page.job_id);
    let truncated = page.truncated.then(|| {
        view! {
            <p class="notice-text" role="status">{format!(
                "Only the first {} KiB of {} bytes are shown; download the file for the rest.",
                SHOWN_BYTES / 1024, page.size
            )}</p>
        }
    });
    let body = content_view(page.content);
    view! {
        <Title text=page.name.clone()/>
        <p><a href=back>"← The job"</a></p>
        <div class="page-head">
            <h1><code>{page.name}</code></h1>
            <a class="button" href=page.download>"Download"</a>
        </div>
        <p class="muted">{format!("{} bytes", page.size)}</p>
        {truncated}
        {body}
    }
}

/// A file's content as the page shows it: a patch as its files and marked lines, text as
/// text. The job page's approval card shows the changes with it too.
pub fn content_view(content: Content) -> AnyView {
    match content {
        Content::Diff { files, .. } if files.is_empty() => view! {
            <p class="card" data-testid="no-changes">"No changes: this patch is empty."</p>
        }
        .into_any(),
        Content::Diff { files, lines } => {
            let summary = files
                .into_iter()
                .map(|f| {
                    view! {
                        <li><code>{f.path}</code> " "
                            <span class="diff-count add">{format!("+{}", f.added)}</span> " "
                            <span class="diff-count del">{format!("−{}", f.removed)}</span>
                        </li>
                    }
                })
                .collect_view();
            let lines = lines
                .into_iter()
                .map(|(kind, text)| view! { <span class=kind.class()>{text}"\n"</span> })
                .collect_view();
            view! {
                <section class="card" aria-labelledby="files-title">
                    <h2 id="files-title">"Files changed"</h2>
                    <ul class="diff-files">{summary}</ul>
                </section>
                <div class="card diff-wrap">
                    <pre class="diff" data-testid="diff">{lines}</pre>
                </div>
            }
            .into_any()
        }
        Content::Text(text) => view! {
            <div class="card diff-wrap"><pre class="text" data-testid="text">{text}</pre></div>
        }
        .into_any(),
        Content::Binary => view! {
            <p class="muted">"This file is not text; download it to look inside."</p>
        }
        .into_any(),
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;

    #[test]
    fn a_patch_reads_as_files_hunks_and_marked_lines() {
        let patch = "diff --git a/README.md b/README.md\n\
                     index 1111111..2222222 100644\n\
                     --- a/README.md\n\
                     +++ b/README.md\n\
                     @@ -1,2 +1,2 @@\n\
                     \x20hello\n\
                     -old line\n\
                     +new line\n\
                     +another\n\
                     diff --git a/src/--x.rs b/src/--x.rs\n\
                     new file mode 100644\n\
                     --- /dev/null\n\
                     +++ b/src/--x.rs\n\
                     @@ -0,0 +1 @@\n\
                     +fn main() {}\n";
        let (files, lines) = parse_diff(patch);
        assert_eq!(
            files,
            [
                DiffFile {
                    path: "README.md".into(),
                    added: 2,
                    removed: 1
                },
                DiffFile {
                    path: "src/--x.rs".into(),
                    added: 1,
                    removed: 0
                },
            ]
        );
        let kinds: Vec<LineKind> = lines.iter().map(|(k, _)| *k).collect();
        use LineKind::*;
        assert_eq!(
            kinds,
            [
                File, File, File, File, Hunk, Context, Removed, Added, Added, File, File, File,
                File, Hunk, Added
            ]
        );
    }
}
