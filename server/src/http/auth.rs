//! Tokens: how they are made, how a request proves one, and what each kind may do.
//! The database keeps only a token's SHA-256; the secret is shown once, at creation.

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use contract::FieldError;
use queue::{Fence, NewToken, Queue, Role, TokenKind, TokenRecord};

use super::error::ApiError;
pub use super::secret::{hash, random_secret};
use super::state::AppState;

/// What a token looks like: a kind marker, so a leaked one is recognisable (and redactable),
/// then 32 random bytes in hex.
const USER_PREFIX: &str = "swu_";
const WORKER_PREFIX: &str = "sww_";
/// How many characters of a token are stored in clear, to tell tokens apart in a list.
const SHOWN_PREFIX: usize = 12;
/// `last_used_at` is refreshed at most this often: a write per request would double the
/// load of a busy worker's heartbeats.
const TOUCH_EVERY: chrono::TimeDelta = chrono::TimeDelta::minutes(1);

/// A freshly minted token: the secret (shown once) and what to store.
pub struct Minted {
    pub secret: String,
    pub record: NewToken,
}

fn mint_secret(kind: TokenKind) -> Result<String, ApiError> {
    random_secret(match kind {
        TokenKind::User => USER_PREFIX,
        TokenKind::Worker => WORKER_PREFIX,
    })
}

/// What a new token may do: a role for a user, scope lists for a worker.
pub struct Scope {
    pub role: Option<Role>,
    pub capabilities: Option<Vec<String>>,
    pub allowed_repositories: Option<Vec<String>>,
    pub allowed_job_types: Option<Vec<String>>,
}

impl Scope {
    /// A user token with `role`.
    pub fn user(role: Role) -> Scope {
        Scope {
            role: Some(role),
            capabilities: None,
            allowed_repositories: None,
            allowed_job_types: None,
        }
    }

    /// A worker token with no limit on what it may claim.
    pub fn any_worker() -> Scope {
        Scope {
            role: None,
            capabilities: None,
            allowed_repositories: None,
            allowed_job_types: None,
        }
    }
}

pub fn mint(name: &str, kind: TokenKind, scope: Scope) -> Result<Minted, ApiError> {
    let secret = mint_secret(kind)?;
    let record = NewToken {
        name: name.to_string(),
        kind,
        role: scope.role,
        token_hash: hash(&secret),
        token_prefix: secret.chars().take(SHOWN_PREFIX).collect(),
        capabilities: scope.capabilities,
        allowed_repositories: scope.allowed_repositories,
        allowed_job_types: scope.allowed_job_types,
    };
    Ok(Minted { secret, record })
}

/// On a fresh installation there is no token, so nobody could log in: make the first admin.
/// Returns its secret when one was created.
/// Atomic across replicas: however many start at once on an empty database, one does.
pub async fn bootstrap_admin(queue: &Queue) -> Result<Option<String>, ApiError> {
    if queue.count_tokens().await? > 0 {
        return Ok(None);
    }
    let minted = mint("admin", TokenKind::User, Scope::user(Role::Admin))?;
    Ok(queue
        .create_first_token(minted.record)
        .await?
        .map(|_| minted.secret))
}

/// The token of a request, looked up: its bearer token, or else the user token behind its
/// dashboard session cookie (so the browser's own fetches and event streams need no token
/// in script reach). `None` when absent, unknown, expired or revoked.
async fn authenticate(parts: &Parts, queue: &Queue) -> Result<Option<TokenRecord>, ApiError> {
    if bearer_secret(&parts.headers).is_none() {
        return super::session::session_token(queue, &parts.method, &parts.headers).await;
    }
    bearer_token(&parts.headers, queue).await
}

fn bearer_secret(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
}

/// The header the seed system's worker sends its token in, instead of a bearer.
pub const SEED_WORKER_TOKEN_HEADER: &str = "x-moonmind-worker-token";

fn seed_worker_secret(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(SEED_WORKER_TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// The token of a request's `Authorization: Bearer` header only, looked up; `None` when
/// there is none or it is unknown, expired or revoked.
pub async fn bearer_token(
    headers: &HeaderMap,
    queue: &Queue,
) -> Result<Option<TokenRecord>, ApiError> {
    match bearer_secret(headers) {
        Some(secret) => token_of(secret, queue).await,
        None => Ok(None),
    }
}

/// The stored token whose secret is `secret`, marked used; `None` when it is unknown,
/// expired or revoked.
async fn token_of(secret: &str, queue: &Queue) -> Result<Option<TokenRecord>, ApiError> {
    let Some(record) = queue.find_token_by_hash(&hash(secret)).await? else {
        return Ok(None);
    };
    let stale = record
        .last_used_at
        .is_none_or(|at| queue.now() - at > TOUCH_EVERY);
    if stale {
        queue.touch_token(&record.id).await?;
    }
    Ok(Some(record))
}

/// A person calling the API with a user token.
#[derive(Debug, Clone)]
pub struct User {
    pub token: TokenRecord,
}

impl User {
    /// The rule of the routes people use, whichever door a token came through (REST or
    /// MCP): a user token with a role.
    pub fn from_token(token: TokenRecord) -> Result<User, ApiError> {
        match (token.kind, token.role) {
            (TokenKind::User, Some(_)) => Ok(User { token }),
            _ => Err(ApiError::forbidden(
                "this is a worker token; this needs a user token",
            )),
        }
    }

    /// The id recorded as `createdByUserId` / `cancelRequestedByUserId`: the token's name.
    pub fn user_id(&self) -> &str {
        &self.token.name
    }

    /// Submitting and cancelling need operator or admin; viewers only read.
    pub fn require_operator(&self) -> Result<(), ApiError> {
        Ok(self.token.require_operator()?)
    }
}

impl FromRequestParts<AppState> for User {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = authenticate(parts, &state.queue).await?.ok_or_else(|| {
            ApiError::unauthorized(
                "a valid user token is required: send `Authorization: Bearer <token>`",
            )
        })?;
        User::from_token(token)
    }
}

/// A worker calling the worker routes with a worker token. Its identity is the token's
/// name, so one worker cannot act for another's lease.
#[derive(Debug, Clone)]
pub struct Worker {
    pub token: TokenRecord,
}

impl Worker {
    /// The rule of the worker's routes and tools: a worker token, whose name is the
    /// worker's id.
    pub fn from_token(token: TokenRecord) -> Result<Worker, ApiError> {
        if token.kind != TokenKind::Worker {
            return Err(ApiError::worker_not_authorized(
                "this is a user token; the worker's routes and tools need a worker token",
            ));
        }
        Ok(Worker { token })
    }

    pub fn worker_id(&self) -> &str {
        &self.token.name
    }

    /// A worker may name itself in a body, but only as its own token's name.
    pub fn check_worker_id(&self, claimed: Option<&str>) -> Result<(), ApiError> {
        match claimed {
            Some(id) if id != self.worker_id() => Err(ApiError::worker_not_authorized(format!(
                "workerId `{id}` does not match this worker token (`{}`)",
                self.worker_id()
            ))),
            _ => Ok(()),
        }
    }

    /// The fence of a worker write: the job's lease must be this worker's, at `attempt`.
    pub fn fence(&self, claimed: Option<&str>, attempt: Option<u32>) -> Result<Fence, ApiError> {
        self.check_worker_id(claimed)?;
        let attempt = attempt.ok_or_else(|| {
            ApiError::invalid(vec![FieldError::new(
                "attempt",
                "required: the attempt number the job was claimed with",
            )])
        })?;
        Ok(Fence::new(self.worker_id(), attempt))
    }

    /// The token's lists narrow what the worker asks for; `None` in the token is no limit.
    pub fn narrow(
        requested: Option<Vec<String>>,
        allowed: &Option<Vec<String>>,
    ) -> Option<Vec<String>> {
        match (requested, allowed) {
            (Some(req), Some(allowed)) => {
                Some(req.into_iter().filter(|r| allowed.contains(r)).collect())
            }
            (None, Some(allowed)) => Some(allowed.clone()),
            (req, None) => req,
        }
    }
}

impl FromRequestParts<AppState> for Worker {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        // The seed system's worker sends its token in a header of its own: an alias of
        // the bearer, for worker tokens only (`from_token` refuses a user's).
        let token = match seed_worker_secret(&parts.headers) {
            Some(secret) if bearer_secret(&parts.headers).is_none() => {
                token_of(secret, &state.queue).await?
            }
            _ => authenticate(parts, &state.queue).await?,
        };
        let token = token.ok_or_else(|| {
            ApiError::worker_auth_failed(
                "a valid worker token is required: send `Authorization: Bearer <token>` (or `X-MoonMind-Worker-Token: <token>`)",
            )
        })?;
        Worker::from_token(token)
    }
}

/// Whoever may read a job's live timeline: a user, or the worker holding the job's lease
/// (it follows the stream to hear a cancel request at once).
#[derive(Debug, Clone)]
pub enum Reader {
    User,
    /// The worker's id (its token's name).
    Worker(String),
}

impl Reader {
    /// A worker may read only a job it holds; a user reads any.
    pub fn check_holds(&self, job: &contract::Job) -> Result<(), ApiError> {
        match self {
            Reader::User => Ok(()),
            Reader::Worker(id) if job.claimed_by.as_deref() == Some(id.as_str()) => Ok(()),
            Reader::Worker(_) => Err(ApiError::worker_not_authorized(
                "a worker token may follow only the jobs its worker holds",
            )),
        }
    }
}

impl FromRequestParts<AppState> for Reader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = authenticate(parts, &state.queue).await?.ok_or_else(|| {
            ApiError::unauthorized(
                "a valid token is required: send `Authorization: Bearer <token>`",
            )
        })?;
        match (token.kind, token.role) {
            (TokenKind::User, Some(_)) => Ok(Reader::User),
            (TokenKind::Worker, _) => Ok(Reader::Worker(token.name)),
            (TokenKind::User, None) => Err(ApiError::forbidden("this user token has no role")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_tokens_are_random_marked_and_stored_only_as_hashes() {
        let scope = || Scope {
            role: Some(Role::Viewer),
            capabilities: None,
            allowed_repositories: None,
            allowed_job_types: None,
        };
        let a = mint("a", TokenKind::User, scope()).unwrap();
        let b = mint("b", TokenKind::Worker, scope()).unwrap();
        assert!(a.secret.starts_with("swu_") && b.secret.starts_with("sww_"));
        assert_eq!(a.secret.len(), 4 + 64);
        assert_ne!(
            a.secret,
            mint("a", TokenKind::User, scope()).unwrap().secret
        );
        assert_eq!(a.record.token_hash, hash(&a.secret));
        assert!(!a.record.token_hash.contains(&a.secret[4..]));
        assert_eq!(a.record.token_prefix, &a.secret[..12]);
    }

    #[test]
    fn token_scope_narrows_what_a_worker_asks_for() {
        let allowed = Some(vec!["codex".to_string(), "git".to_string()]);
        assert_eq!(
            Worker::narrow(Some(vec!["git".into(), "docker".into()]), &allowed),
            Some(vec!["git".to_string()])
        );
        assert_eq!(Worker::narrow(None, &allowed), allowed);
        assert_eq!(
            Worker::narrow(Some(vec!["x".into()]), &None),
            Some(vec!["x".to_string()])
        );
    }
}
