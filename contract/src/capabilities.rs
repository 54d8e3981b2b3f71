//! Which worker capabilities a task needs (FR-013), so the queue only hands it to a
//! worker that can run it.

use crate::error::FieldError;
use crate::model::Payload;
use crate::modes::PublishMode;
use crate::rules;

/// In order: the runtime (`codex`/`claude`/`gemini`), `git`, `gh` when publishing a PR,
/// `docker` when the container is enabled, then `payload.requiredCapabilities`, the task
/// skill's, and each step skill's in step order. Items are trimmed and lowercased;
/// duplicates keep their first position, so the list is stable across re-normalization
/// (where `payload.requiredCapabilities` is this function's own earlier output).
/// Invalid items are reported at their path, relative to the payload.
pub fn derive_capabilities(payload: &Payload) -> Result<Vec<String>, Vec<FieldError>> {
    let task = &payload.task;
    let mut derived = Derived::default();
    derived.add_known(task.runtime.mode.as_str());
    derived.add_known("git");
    if task.publish.mode == PublishMode::Pr {
        derived.add_known("gh");
    }
    if task.container.enabled {
        derived.add_known("docker");
    }
    derived.add_all(&payload.required_capabilities, "requiredCapabilities");
    derived.add_all(
        &task.skill.required_capabilities,
        "task.skill.requiredCapabilities",
    );
    for (i, step) in task.steps.iter().enumerate() {
        if let Some(skill) = &step.skill {
            derived.add_all(
                &skill.required_capabilities,
                &format!("task.steps[{i}].skill.requiredCapabilities"),
            );
        }
    }
    if derived.errors.is_empty() {
        Ok(derived.caps)
    } else {
        Err(derived.errors)
    }
}

#[derive(Default)]
struct Derived {
    caps: Vec<String>,
    errors: Vec<FieldError>,
}

impl Derived {
    fn add_known(&mut self, cap: &str) {
        if !self.caps.iter().any(|c| c == cap) {
            self.caps.push(cap.to_string());
        }
    }

    fn add_all(&mut self, items: &[String], path: &str) {
        for (i, item) in items.iter().enumerate() {
            match rules::capability(item) {
                Ok(cap) => self.add_known(&cap),
                Err(message) => self
                    .errors
                    .push(FieldError::new(format!("{path}[{i}]"), message)),
            }
        }
    }
}
