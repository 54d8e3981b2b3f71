//! Steps written as a markdown checklist (seed 004): the form an LLM or a person writes
//! most naturally.
//!
//! ```text
//! ## Steps
//! - [ ] Research kid-friendly attractions
//! - [x] Send the list on WhatsApp
//! ```
//!
//! Blank lines and `#` headings are ignored. Any other line is an error naming its line
//! number rather than being skipped: a sentence that silently vanished would be a
//! requirement the agent never sees.

use serde::{Deserialize, Serialize};

use crate::error::FieldError;
use crate::model::Step;
use crate::steps::ResolvedStep;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChecklistItem {
    pub checked: bool,
    pub text: String,
}

/// Parses `- [ ] text` / `- [x] text` lines (also `*` bullets and `[X]`).
/// Errors have an empty path and a message starting with `line N:` (1-based).
pub fn parse_checklist(text: &str) -> Result<Vec<ChecklistItem>, Vec<FieldError>> {
    let mut items = Vec::new();
    let mut errors = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match parse_item(line) {
            Ok(item) => items.push(item),
            Err(reason) => errors.push(FieldError::new("", format!("line {}: {reason}", n + 1))),
        }
    }
    if errors.is_empty() {
        Ok(items)
    } else {
        Err(errors)
    }
}

fn parse_item(line: &str) -> Result<ChecklistItem, &'static str> {
    const NOT_AN_ITEM: &str = "not a checklist item; write each step as `- [ ] text` (blank lines and # headings are ignored)";
    let rest = line.strip_prefix(['-', '*']).ok_or(NOT_AN_ITEM)?;
    if !rest.starts_with(char::is_whitespace) {
        return Err(NOT_AN_ITEM);
    }
    let rest = rest.trim_start();
    let (checked, rest) = if let Some(r) = rest.strip_prefix("[ ]") {
        (false, r)
    } else if let Some(r) = rest
        .strip_prefix("[x]")
        .or_else(|| rest.strip_prefix("[X]"))
    {
        (true, r)
    } else {
        return Err(NOT_AN_ITEM);
    };
    if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
        return Err(NOT_AN_ITEM);
    }
    let text = rest.trim();
    if text.is_empty() {
        return Err(
            "the checklist item is empty; write what the step should do, or remove the line",
        );
    }
    Ok(ChecklistItem {
        checked,
        text: text.to_string(),
    })
}

/// The one-line text a step shows in a checklist.
pub trait ChecklistLabel {
    fn checklist_label(&self) -> String;
}

/// Title, else the first line of the instructions, else the id.
fn label(title: Option<&str>, instructions: Option<&str>, id: &str) -> String {
    let first_line = |s: &str| {
        s.lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_string)
    };
    title
        .and_then(first_line)
        .or_else(|| instructions.and_then(first_line))
        .unwrap_or_else(|| id.to_string())
}

impl ChecklistLabel for ResolvedStep {
    fn checklist_label(&self) -> String {
        label(
            self.title.as_deref(),
            self.instructions.as_deref(),
            &self.id,
        )
    }
}

impl ChecklistLabel for Step {
    fn checklist_label(&self) -> String {
        label(
            self.title.as_deref(),
            self.instructions.as_deref(),
            &self.id,
        )
    }
}

impl ChecklistLabel for ChecklistItem {
    fn checklist_label(&self) -> String {
        label(None, Some(&self.text), "")
    }
}

/// One `- [x]` line for each of the first `done` steps, `- [ ]` for the rest, joined
/// with `\n` (no trailing newline).
pub fn render_checklist<S: ChecklistLabel>(steps: &[S], done: usize) -> String {
    steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let mark = if i < done { 'x' } else { ' ' };
            format!("- [{mark}] {}", step.checklist_label())
        })
        .collect::<Vec<_>>()
        .join("\n")
}
