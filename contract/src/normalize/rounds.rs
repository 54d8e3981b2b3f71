//! `task.rounds`: the follow-up rounds the queue recorded on a job's task (see
//! [`crate::Round`]), read back when a stored task is normalized again. Each round is the
//! one after the last, from 2, and starts at a step of the task after the last's.

use serde_json::Value;

use super::walk::{Walker, at, field, join};
use crate::model::Round;

pub(super) fn rounds(w: &mut Walker, v: Option<&Value>, steps: usize) -> Vec<Round> {
    const PATH: &str = "task.rounds";
    let Some(v) = v else { return Vec::new() };
    let Some(items) = v.as_array() else {
        w.expected(PATH, "an array", v);
        return Vec::new();
    };
    let mut read: Vec<Round> = Vec::new();
    for (n, item) in items.iter().enumerate() {
        let path = at(PATH, n);
        let Some(map) = w.object(item, &path) else {
            continue;
        };
        w.reject_unknown(map, &path, &["round", "fromStep", "causes"]);
        let number = |w: &mut Walker, key: &str| {
            field(map, key).and_then(|v| w.integer(v, &join(&path, key)).ok())
        };
        let (Some(round), Some(from)) = (number(w, "round"), number(w, "fromStep")) else {
            w.error(path, "needs round and fromStep, whole numbers");
            continue;
        };
        let expected = read.last().map_or(2, |r| i64::from(r.round) + 1);
        let after = read.last().map_or(0, |r| r.from_step as i64);
        if round != expected {
            w.error(
                join(&path, "round"),
                format!("must be {expected}: rounds count up from 2"),
            );
            continue;
        }
        if from <= after || from >= steps as i64 {
            w.error(
                join(&path, "fromStep"),
                format!("must be a step after the last round's, below {steps}"),
            );
            continue;
        }
        // Read by hand: a typed read would bring serde's Vec<String> code into the bundle.
        let causes: Option<Vec<String>> = match field(map, "causes") {
            None => Some(Vec::new()),
            Some(v) => v.as_array().and_then(|items| {
                items
                    .iter()
                    .map(|c| c.as_str().filter(|c| is_cause(c)).map(str::to_string))
                    .collect()
            }),
        };
        let Some(causes) = causes else {
            w.error(
                join(&path, "causes"),
                "must be a list of check_run:ID and review:ID",
            );
            continue;
        };
        read.push(Round {
            round: round as u32,
            from_step: from as usize,
            causes,
        });
    }
    read
}

/// `check_run:123` or `review:456`: what of a pull request made a round.
pub fn is_cause(cause: &str) -> bool {
    let Some((kind, id)) = cause.split_once(':') else {
        return false;
    };
    matches!(kind, "check_run" | "review")
        && !id.is_empty()
        && id.len() <= 20
        && id.bytes().all(|b| b.is_ascii_digit())
}
