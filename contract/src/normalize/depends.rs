//! `dependsOn`: the jobs a job waits for, read from the request's envelope. Apart from
//! [`normalize`](super::normalize), which only lets the field through: whether each one
//! exists, and how it ended, is the queue's to say.

use serde_json::Value;

use crate::error::FieldError;
use crate::job_id::JobId;

/// The most jobs one job may wait for.
pub const MAX_DEPENDS_ON: usize = 50;

/// The request's `dependsOn`: job ids, each once; empty when it gives none.
pub fn depends_on(raw: &Value) -> Result<Vec<JobId>, Vec<FieldError>> {
    let list = match raw.get("dependsOn") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(_) => {
            return Err(vec![FieldError::new(
                "dependsOn",
                "a list of job ids, as [\"0190…\"]",
            )]);
        }
    };
    if list.len() > MAX_DEPENDS_ON {
        return Err(vec![FieldError::new(
            "dependsOn",
            format!("at most {MAX_DEPENDS_ON} jobs"),
        )]);
    }
    let mut ids: Vec<JobId> = Vec::new();
    let mut errors = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let path = format!("dependsOn[{i}]");
        match item.as_str().map(|s| s.trim().parse::<JobId>()) {
            Some(Ok(id)) if ids.contains(&id) => errors.push(FieldError::new(path, "named twice")),
            Some(Ok(id)) => ids.push(id),
            _ => errors.push(FieldError::new(path, "not a job id")),
        }
    }
    if errors.is_empty() {
        Ok(ids)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn depends_on_takes_job_ids_once_each_and_names_each_bad_one() {
        let id = "0190a000-0000-7000-8000-000000000001";
        assert_eq!(depends_on(&json!({})), Ok(Vec::new()));
        assert_eq!(depends_on(&json!({ "dependsOn": [id] })).unwrap().len(), 1);
        let errors = depends_on(&json!({ "dependsOn": [id, 7, id, "x"] })).unwrap_err();
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["dependsOn[1]", "dependsOn[2]", "dependsOn[3]"]);
        assert_eq!(
            depends_on(&json!({ "dependsOn": id })).unwrap_err()[0].path,
            "dependsOn"
        );
    }
}
