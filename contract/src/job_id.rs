//! [`JobId`]: a job's id, a UUID. Text becomes one where it comes in (a REST path, a server
//! function's argument, a CLI argument), so everything past those edges holds an id that
//! reads, and a malformed one is refused once, in one place, with one answer.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use uuid::Uuid;

/// A job's id. On the wire it is the UUID's hyphenated text, such as
/// `0190a000-0000-7000-8000-000000000000`; the queue issues time-ordered ones (v7).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(value_type = String, format = "uuid", example = "0190a000-0000-7000-8000-000000000000"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(Uuid);

impl JobId {
    pub const fn uuid(&self) -> Uuid {
        self.0
    }
}

impl From<Uuid> for JobId {
    fn from(uuid: Uuid) -> JobId {
        JobId(uuid)
    }
}

impl From<JobId> for Uuid {
    fn from(id: JobId) -> Uuid {
        id.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.hyphenated(), f)
    }
}

/// Text that is not a job id. It keeps (the start of) the text, so whoever answers can
/// say which id no job has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseJobIdError {
    text: String,
}

impl ParseJobIdError {
    /// The text that was refused, cut to its first 80 characters.
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for ParseJobIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not a job id: a job id is a UUID such as 0190a000-0000-7000-8000-000000000000",
            self.text
        )
    }
}

impl std::error::Error for ParseJobIdError {}

/// Only the hyphenated form: a job id has one spelling, the one the queue writes, so
/// the braced, URN and bare-hex forms `uuid` would also read are refused.
const HYPHENATED_LEN: usize = 36;

impl FromStr for JobId {
    type Err = ParseJobIdError;

    fn from_str(text: &str) -> Result<JobId, ParseJobIdError> {
        if text.len() == HYPHENATED_LEN
            && let Ok(uuid) = Uuid::try_parse(text)
        {
            return Ok(JobId(uuid));
        }
        Err(ParseJobIdError {
            text: text.chars().take(80).collect(),
        })
    }
}

impl Serialize for JobId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for JobId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<JobId, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0190a000-0000-7000-8000-00000000002a";

    #[test]
    fn a_job_id_reads_and_writes_its_hyphenated_text() {
        let id: JobId = ID.parse().unwrap();
        assert_eq!(id.to_string(), ID);
        assert_eq!(serde_json::to_string(&id).unwrap(), format!("\"{ID}\""));
        assert_eq!(
            serde_json::from_str::<JobId>(&format!("\"{ID}\"")).unwrap(),
            id
        );
        // Upper-case hex is the same id, written back in the queue's lower case.
        assert_eq!(ID.to_uppercase().parse::<JobId>().unwrap(), id);
    }

    #[test]
    fn text_that_is_not_a_hyphenated_uuid_is_refused_naming_it() {
        let simple = ID.replace('-', "");
        let braced = format!("{{{ID}}}");
        let urn = format!("urn:uuid:{ID}");
        let long = "x".repeat(500);
        for text in [
            "",
            "not-a-job",
            "0190a000-0000-7000-8000-00000000002g",
            "0190a000-0000-7000-8000-00000000002a ",
            "\u{0}",
            simple.as_str(),
            braced.as_str(),
            urn.as_str(),
            long.as_str(),
        ] {
            let error = text.parse::<JobId>().unwrap_err();
            assert!(text.starts_with(error.text()), "{text:?}");
            assert!(error.text().chars().count() <= 80);
            assert!(error.to_string().contains("is not a job id"), "{error}");
        }
        // A 36-byte string of multi-byte characters is refused, not sliced mid-character.
        let wide = "é".repeat(18);
        assert!(wide.parse::<JobId>().is_err());
        let error = serde_json::from_str::<JobId>("\"nope\"").unwrap_err();
        assert!(
            error.to_string().contains("`nope` is not a job id"),
            "{error}"
        );
        assert!(serde_json::from_str::<JobId>("42").is_err());
    }
}
