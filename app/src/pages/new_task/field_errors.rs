//! Error routing: which of the contract's errors each field of the form shows, and when.
//! The browser's own check of the draft shows at a field once it has been typed in (at
//! every field after a submit or a check); the server's errors of the last submit or check
//! show until the next edit. An error no field shows is listed above the buttons, so none
//! is lost.

use contract::FieldError;
use leptos::prelude::*;

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

/// Where the form shows errors.
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

/// The form's errors and what has been typed in: copied into every part of the form.
#[derive(Clone, Copy)]
pub struct FieldErrors {
    /// The paths typed in; `*` once the whole draft was submitted or checked.
    touched: RwSignal<Vec<String>>,
    /// The browser's check of the draft as it stands.
    draft: Memo<Vec<FieldError>>,
    /// The server's errors of the last submit or check.
    server: RwSignal<Vec<FieldError>>,
}

impl FieldErrors {
    pub fn new(draft: Memo<Vec<FieldError>>) -> FieldErrors {
        FieldErrors {
            touched: RwSignal::new(Vec::new()),
            draft,
            server: RwSignal::new(Vec::new()),
        }
    }

    /// Any edit makes the server's errors stale. Moving or removing a step is one too: it
    /// renumbers the others, so the server's paths no longer fit.
    pub fn edited(self) {
        self.server.update(|e| e.clear());
    }

    /// The field at `path` was typed in: its errors show from now on.
    pub fn touch(self, path: &str) {
        self.edited();
        self.touched.update(|t| {
            if !t.iter().any(|p| p == path) {
                t.push(path.to_string())
            }
        })
    }

    /// The whole draft was submitted or checked: every field shows its errors.
    pub fn touch_all(self) {
        self.touch("*");
    }

    /// Each answer of the server replaces the errors it gave before.
    pub fn set_server(self, errors: Vec<FieldError>) {
        self.server.set(errors);
    }

    /// What the field at `path` shows: the browser's errors once it is touched, and the
    /// server's.
    pub fn shown(self, path: String) -> Signal<Vec<String>> {
        Signal::derive(move || {
            let mut shown = if self.touched.with(|t| {
                t.iter()
                    .any(|p| p == "*" || belongs(p, &path) || belongs(&path, p))
            }) {
                self.draft.with(|e| errors_at(e, &path))
            } else {
                Vec::new()
            };
            for e in self.server.with(|e| errors_at(e, &path)) {
                if !shown.contains(&e) {
                    shown.push(e);
                }
            }
            shown
        })
    }

    /// The errors of the step list as a whole (too many steps, say), not of one step.
    pub fn of_step_list(self) -> Vec<String> {
        const PATH: &str = "task.steps";
        let exactly = |errors: &Vec<FieldError>| -> Vec<String> {
            errors
                .iter()
                .filter(|e| e.path == PATH)
                .map(|e| e.message.clone())
                .collect()
        };
        let touched = self
            .touched
            .with(|t| t.iter().any(|p| p == "*" || p == PATH));
        let mut all = if touched {
            self.draft.with(exactly)
        } else {
            Vec::new()
        };
        all.extend(self.server.with(exactly));
        all.dedup();
        all
    }
}

/// The server's errors that belong to no field of the form (an auth ref, say).
#[component]
pub fn Unplaced(errors: FieldErrors) -> impl IntoView {
    move || {
        let errors = errors.server.with(|e| unplaced(e));
        (!errors.is_empty()).then(|| {
            view! {
                <div class="result error" role="alert">
                    <ul>{errors.into_iter().map(|e| view! { <li>{e.to_string()}</li> }).collect_view()}</ul>
                </div>
            }
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
    fn errors_no_field_shows_are_listed_apart() {
        let errors = vec![err("task.runtime.effort"), err("auth.repoAuthRef"), err("")];
        let left: Vec<String> = unplaced(&errors).into_iter().map(|e| e.path).collect();
        assert_eq!(left, ["auth.repoAuthRef", ""]);
    }
}
