//! The validation error shown to users next to the offending form field.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One problem with a task, located by a JSON path.
///
/// Envelope fields are named as is (`priority`); payload fields are relative to the
/// payload (`task.steps[2].runtime`), because that is what the submit form edits.
/// An empty path means the whole document.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

impl FieldError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for FieldError {}
