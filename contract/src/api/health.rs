//! What `GET /healthz` and `GET /readyz` answer, on the server and on a worker's health
//! port: for load balancers and container orchestrators, so it says whether, and why not,
//! and nothing else.

use serde::{Deserialize, Serialize};

/// `ok`, or `unavailable` with the reason and what to do about it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    pub status: HealthStatus,
    /// Why it is unavailable; absent when it is ok.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Health {
    pub fn ok() -> Health {
        Health {
            status: HealthStatus::Ok,
            reason: None,
        }
    }

    pub fn unavailable(reason: impl Into<String>) -> Health {
        Health {
            status: HealthStatus::Unavailable,
            reason: Some(reason.into()),
        }
    }

    /// The HTTP status it is answered with: 200, or 503 for a probe to act on.
    pub fn http_status(&self) -> u16 {
        match self.status {
            HealthStatus::Ok => 200,
            HealthStatus::Unavailable => 503,
        }
    }
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthStatus {
    Ok,
    Unavailable,
}

crate::wire_names!(HealthStatus, "health status", exact {
    Ok = "ok",
    Unavailable = "unavailable",
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_reads_as_a_probe_expects() {
        assert_eq!(
            serde_json::to_value(Health::ok()).unwrap(),
            serde_json::json!({ "status": "ok" })
        );
        let down = Health::unavailable("the database does not answer");
        assert_eq!(
            serde_json::to_value(&down).unwrap(),
            serde_json::json!({ "status": "unavailable", "reason": "the database does not answer" })
        );
        assert_eq!(down.http_status(), 503);
        assert_eq!(Health::ok().http_status(), 200);
        let back: Health = serde_json::from_value(serde_json::to_value(&down).unwrap()).unwrap();
        assert_eq!(back, down);
    }
}
