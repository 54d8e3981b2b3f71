//! `notBefore`: a job's scheduled start, read from the request's envelope. Apart from
//! [`normalize`](super::normalize), which only lets the field through, because the task
//! form never sends it and the browser bundle need not parse times.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::error::FieldError;

/// How far ahead a start may be scheduled: a typo in the year is refused, not kept.
pub const MAX_DAYS_AHEAD: i64 = 366;

const FORMAT: &str = "must be a time with its offset, such as 2026-11-27T09:00:00Z (RFC 3339)";

/// The request's `notBefore`, if it gives one: a time at most [`MAX_DAYS_AHEAD`] days
/// after `now`. A time already past starts the job at once.
pub fn not_before(raw: &Value, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, FieldError> {
    let given = match raw.get("notBefore") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(text)) => text,
        Some(_) => return Err(FieldError::new("notBefore", FORMAT)),
    };
    let at = DateTime::parse_from_rfc3339(given.trim())
        .map_err(|_| FieldError::new("notBefore", FORMAT))?
        .with_timezone(&Utc);
    if at > now + chrono::Duration::days(MAX_DAYS_AHEAD) {
        return Err(FieldError::new(
            "notBefore",
            format!("must be at most {MAX_DAYS_AHEAD} days from now"),
        ));
    }
    Ok(Some(at))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn not_before_takes_an_rfc_3339_time_and_names_the_field_otherwise() {
        let now = DateTime::parse_from_rfc3339("2026-11-26T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(not_before(&json!({}), now), Ok(None));
        assert_eq!(not_before(&json!({ "notBefore": null }), now), Ok(None));
        let at = not_before(&json!({ "notBefore": "2026-11-27T10:00:00+01:00" }), now).unwrap();
        assert_eq!(json!(at), json!("2026-11-27T09:00:00Z"));
        for bad in [
            json!("tomorrow"),
            json!("2026-11-27 09:00"),
            json!(1_800_000_000),
            json!("2026-11-27T09:00:00"),
        ] {
            let error = not_before(&json!({ "notBefore": bad }), now).unwrap_err();
            assert_eq!(error.path, "notBefore", "{bad}");
            assert!(error.message.contains("RFC 3339"), "{bad}: {error}");
        }
        let far = not_before(&json!({ "notBefore": "2099-01-01T00:00:00Z" }), now).unwrap_err();
        assert!(far.message.contains("366 days"), "{far}");
    }
}
