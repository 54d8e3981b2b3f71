//! `publish_result.json`: what a job's publish stage did. The worker writes it as an
//! artifact; the job page reads it back for the branch it pushed and the pull request it
//! opened.

use serde::{Deserialize, Serialize};

use crate::PublishMode;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishResult {
    pub mode: PublishMode,
    /// `skipped` (mode none), `no_changes`, `pushed` (branch) or `pr_created`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr_url: Option<String>,
}

impl PublishResult {
    /// The pull request's address, when it is one a page may link to: http(s) only, so a
    /// worker's text can never become a `javascript:` link.
    pub fn pull_request_link(&self) -> Option<&str> {
        let url = self.pr_url.as_deref()?.trim();
        let scheme = url.split_once("://")?.0;
        (scheme.eq_ignore_ascii_case("https") || scheme.eq_ignore_ascii_case("http")).then_some(url)
    }

    /// What happened, in a few words.
    pub fn outcome(&self) -> &str {
        match self.status.as_str() {
            "skipped" => "nothing published (publish mode none)",
            "no_changes" => "nothing published: the steps changed nothing",
            "pushed" => "branch pushed",
            "pr_created" => "branch pushed and pull request opened",
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_publish_result_reads_back_and_links_only_web_addresses() {
        let written = json!({
            "mode": "pr", "status": "pr_created", "branch": "task/0190-fix",
            "commit": "abc123", "prUrl": "https://github.com/octo/hello/pull/7",
        });
        let result: PublishResult = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(serde_json::to_value(&result).unwrap(), written);
        assert_eq!(
            result.pull_request_link(),
            Some("https://github.com/octo/hello/pull/7")
        );
        assert_eq!(result.outcome(), "branch pushed and pull request opened");
        for hostile in [
            "javascript:alert(1)",
            "JaVaScRiPt://x",
            "data:text/html,x",
            "no scheme",
        ] {
            let result = PublishResult {
                pr_url: Some(hostile.into()),
                ..result.clone()
            };
            assert_eq!(result.pull_request_link(), None, "{hostile}");
        }
        let skipped: PublishResult =
            serde_json::from_value(json!({ "mode": "none", "status": "skipped" })).unwrap();
        assert_eq!((skipped.branch, skipped.pr_url), (None, None));
    }
}
