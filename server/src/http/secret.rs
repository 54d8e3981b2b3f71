//! Secrets (tokens, session cookies, login codes) and the one hash the database keeps of
//! each: shared by token auth and the login, which both look secrets up by hash.

use sha2::{Digest, Sha256};

use super::error::ApiError;

pub fn hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// 32 random bytes in hex behind `prefix`: a token, session or login-code secret. The
/// prefix makes a leaked one recognisable (and redactable).
pub fn random_secret(prefix: &str) -> Result<String, ApiError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| ApiError::internal(format!("no randomness for a secret: {e}")))?;
    Ok(format!("{prefix}{}", hex::encode(bytes)))
}
