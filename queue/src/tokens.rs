//! Storage of API tokens. What a token may do is decided by the server; the queue only
//! keeps the record. The secret itself is never stored: only its SHA-256, which the server
//! computes from the presented bearer token and looks up with
//! [`Queue::find_token_by_hash`](crate::Queue::find_token_by_hash).

use crate::error::QueueError;
use chrono::{DateTime, Utc};
use contract::FieldError;

/// Who holds a token: a person (through the UI, REST, CLI or MCP) or a worker process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenKind {
    User,
    Worker,
}

/// What a user token may do. Worker tokens have no role; their scope is the capability,
/// repository and job type lists instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Everything, including tokens.
    Admin,
    /// Submit and cancel jobs.
    Operator,
    /// Read only.
    Viewer,
}

contract::wire_names!(TokenKind, "token kind", exact {
    User = "user",
    Worker = "worker",
});

contract::wire_names!(Role, "role", exact {
    Admin = "admin",
    Operator = "operator",
    Viewer = "viewer",
});

/// A token to store. `None` lists mean unrestricted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewToken {
    pub name: String,
    pub kind: TokenKind,
    /// Required for user tokens, absent for worker tokens.
    pub role: Option<Role>,
    /// Lowercase hex SHA-256 of the secret.
    pub token_hash: String,
    /// The first characters of the secret, so a list can tell tokens apart.
    pub token_prefix: String,
    /// Worker tokens only: the most a worker with this token may claim with.
    pub capabilities: Option<Vec<String>>,
    pub allowed_repositories: Option<Vec<String>>,
    pub allowed_job_types: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    pub id: String,
    pub name: String,
    pub kind: TokenKind,
    pub role: Option<Role>,
    pub token_hash: String,
    pub token_prefix: String,
    pub capabilities: Option<Vec<String>>,
    pub allowed_repositories: Option<Vec<String>>,
    pub allowed_job_types: Option<Vec<String>>,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

impl TokenRecord {
    /// Submitting and cancelling need an operator or an admin; viewers only read. The one
    /// check behind the REST routes, the dashboard and MCP.
    pub fn require_operator(&self) -> Result<(), QueueError> {
        match self.role {
            Some(Role::Admin | Role::Operator) => Ok(()),
            Some(Role::Viewer) => Err(QueueError::Forbidden(
                "viewers can read jobs but not submit or cancel them".into(),
            )),
            None => Err(QueueError::Forbidden(
                "a worker token cannot submit or cancel jobs; use a user token".into(),
            )),
        }
    }
}

pub(crate) const PREFIX_CHARS: usize = 16;
const NAME_CHARS: usize = 200;

impl NewToken {
    /// Catches mistakes that would otherwise store a token nobody can use or reason about:
    /// a user without a role, a worker with one, a secret stored instead of its hash.
    pub(crate) fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        if self.name.trim().is_empty() || self.name.chars().count() > NAME_CHARS {
            errors.push(FieldError::new(
                "name",
                format!("must be 1 to {NAME_CHARS} characters"),
            ));
        }
        if self.name.contains('\0') {
            errors.push(FieldError::new("name", contract::text::NUL_MESSAGE));
        }
        for (path, list) in [
            ("capabilities", &self.capabilities),
            ("allowedRepositories", &self.allowed_repositories),
            ("allowedJobTypes", &self.allowed_job_types),
        ] {
            for (i, item) in list.iter().flatten().enumerate() {
                if let Err(error) = contract::text::refuse_nul(&format!("{path}[{i}]"), item) {
                    errors.push(error);
                }
            }
        }
        match (self.kind, self.role) {
            (TokenKind::User, None) => {
                errors.push(FieldError::new("role", "a user token needs a role"))
            }
            (TokenKind::Worker, Some(_)) => errors.push(FieldError::new(
                "role",
                "a worker token has no role; scope it with capabilities, repositories and job types",
            )),
            _ => {}
        }
        if self.kind == TokenKind::User {
            for (path, list) in [
                ("capabilities", &self.capabilities),
                ("allowedRepositories", &self.allowed_repositories),
                ("allowedJobTypes", &self.allowed_job_types),
            ] {
                if list.is_some() {
                    errors.push(FieldError::new(path, "only worker tokens have this scope"));
                }
            }
        }
        if !is_sha256_hex(&self.token_hash) {
            errors.push(FieldError::new(
                "tokenHash",
                "must be a lowercase hex SHA-256 (64 characters)",
            ));
        }
        if self.token_prefix.chars().count() > PREFIX_CHARS {
            errors.push(FieldError::new(
                "tokenPrefix",
                format!("at most {PREFIX_CHARS} characters"),
            ));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

pub(crate) fn is_sha256_hex(hash: &str) -> bool {
    let is_hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
    hash.len() == 64 && hash.chars().all(is_hex)
}

/// What a row of `sessions` is for. Both stand for a user token, by the SHA-256 of a
/// secret the browser (or the printed login URL) holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionPurpose {
    /// A dashboard session: the secret is the session cookie.
    Session,
    /// A one-time login code, traded once for a session.
    Login,
}

contract::wire_names!(SessionPurpose, "session purpose", exact {
    Session = "session",
    Login = "login",
});
