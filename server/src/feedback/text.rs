//! What a round of feedback tells the agent: the pull request's failed checks (each name
//! and the end of its log) and the reviews that ask for changes (each body and its line
//! comments), redacted, within what a step's instructions may hold.

use contract::limits;
use worker::redact::Redactor;

/// The most of one check's log a round repeats: its end, where the failure is said.
const LOG_TAIL_CHARS: usize = 6000;
/// The most of one review (its body and comments).
const REVIEW_CHARS: usize = 20_000;

/// One thing the pull request says, and the cause it is recorded as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Said {
    FailedCheck {
        id: u64,
        name: String,
        conclusion: String,
        /// Its log (or, for a check that keeps none, its output's title and summary).
        log: String,
    },
    ChangesRequested {
        id: u64,
        user: String,
        body: String,
        /// `(path, line, comment)`.
        comments: Vec<(String, Option<u64>, String)>,
    },
}

impl Said {
    /// The cause a round records it as: `check_run:ID`, `review:ID`.
    pub fn cause(&self) -> String {
        match self {
            Said::FailedCheck { id, .. } => format!("check_run:{id}"),
            Said::ChangesRequested { id, .. } => format!("review:{id}"),
        }
    }

    /// In a few words, for a person asked to look.
    pub fn short(&self) -> String {
        match self {
            Said::FailedCheck {
                name, conclusion, ..
            } => format!("check run {name:?}: {conclusion}"),
            Said::ChangesRequested { id, user, .. } => {
                format!("review {id} by {user} requests changes")
            }
        }
    }
}

/// The end of `text`, at most `chars` characters, from a line's start when it can.
fn tail(text: &str, chars: usize) -> String {
    let count = text.chars().count();
    if count <= chars {
        return text.trim_end().to_string();
    }
    let cut: String = text.chars().skip(count - chars).collect();
    let from_line = cut.split_once('\n').map_or(cut.as_str(), |(_, rest)| rest);
    format!("…\n{}", from_line.trim_end())
}

fn head(text: &str, chars: usize) -> String {
    let mut out: String = text.chars().take(chars).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

/// The instructions of the round that takes `said` on pull request `pull`.
pub fn instructions(pull: &str, said: &[Said], redactor: &Redactor) -> String {
    let mut parts = vec![format!(
        "The pull request {pull} has feedback. Fix what it asks for, on top of the branch as \
         it is now; the checks run again on what is pushed."
    )];
    for item in said {
        parts.push(match item {
            Said::FailedCheck {
                name,
                conclusion,
                log,
                ..
            } => format!(
                "CHECK RUN {name:?} FAILED ({conclusion}). The end of its log:\n{}",
                tail(log, LOG_TAIL_CHARS)
            ),
            Said::ChangesRequested {
                user,
                body,
                comments,
                ..
            } => {
                let mut review = format!("REVIEW BY {user} REQUESTS CHANGES:\n{}", body.trim());
                for (path, line, comment) in comments {
                    let at = line.map(|l| format!(" line {l}")).unwrap_or_default();
                    review.push_str(&format!("\n- {path}{at}: {}", comment.trim()));
                }
                head(&review, REVIEW_CHARS)
            }
        });
    }
    let text = redactor.redact(&parts.join("\n\n")).into_owned();
    head(&text, limits::INSTRUCTIONS_CHARS - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_is_told_each_failed_check_s_log_end_and_each_review_redacted() {
        let token = "ghp_0123456789abcdefghijABCDEFGHIJ0123456789";
        let log = format!(
            "{}step 9\nerror: expected 2, got 3 (token {token})\n",
            "noise line\n".repeat(2000)
        );
        let said = [
            Said::FailedCheck {
                id: 41,
                name: "test".into(),
                conclusion: "failure".into(),
                log,
            },
            Said::ChangesRequested {
                id: 9,
                user: "mona".into(),
                body: "Please rename it.".into(),
                comments: vec![("src/lib.rs".into(), Some(12), "Call it `greet`.".into())],
            },
        ];
        let text = instructions(
            "https://github.com/octo/hello/pull/7",
            &said,
            &Redactor::new([token]),
        );
        assert!(
            text.starts_with("The pull request https://github.com/octo/hello/pull/7 has feedback.")
        );
        assert!(
            text.contains(
                "CHECK RUN \"test\" FAILED (failure). The end of its log:\n…\nnoise line\n"
            )
        );
        assert!(text.contains("error: expected 2, got 3"), "{text}");
        assert!(!text.contains(token), "redacted");
        assert!(text.ends_with(
            "REVIEW BY mona REQUESTS CHANGES:\nPlease rename it.\n- src/lib.rs line 12: Call it `greet`."
        ));
        assert!(text.chars().count() < 8000, "the log's end only");
        assert_eq!(said[0].cause(), "check_run:41");
        assert_eq!(said[1].cause(), "review:9");
        assert_eq!(said[1].short(), "review 9 by mona requests changes");
    }
}
