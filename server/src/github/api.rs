//! The GitHub REST API as the server calls it: for pull request feedback, a pull request,
//! its head's check runs (and a failed one's log, which GitHub Actions serves by a
//! redirect), its reviews and a review's line comments; for jobs from issues, whether a
//! person is a collaborator, and the comment the server writes and edits on an issue.
//! Called over HTTPS at a configurable base URL (GitHub Enterprise's is
//! `https://HOST/api/v3`), with the server's own credential (`--github-token`).

use std::time::Duration;

use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::Value;

/// `owner/repo#number`, read from a pull request's address
/// (`https://github.com/OWNER/REPO/pull/NUMBER`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRef {
    pub owner: String,
    pub repo: String,
    pub number: u64,
}

impl PullRef {
    pub fn parse(url: &str) -> Option<PullRef> {
        let rest = url.trim().split_once("://")?.1;
        let mut parts = rest.split('/').skip(1);
        let owner = parts.next()?.to_string();
        let repo = parts.next()?.to_string();
        (parts.next()? == "pull").then_some(())?;
        let number = parts.next()?.split(['#', '?']).next()?.parse().ok()?;
        let plain = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                && s != "."
                && s != ".."
        };
        (plain(&owner) && plain(&repo)).then_some(PullRef {
            owner,
            repo,
            number,
        })
    }

    /// An issue's or a pull request's page (`…/issues/N` or `…/pull/N`): both take
    /// comments at the issues API.
    pub fn parse_thread(url: &str) -> Option<PullRef> {
        let rest = url.trim().split_once("://")?;
        PullRef::parse(&format!(
            "{}://{}",
            rest.0,
            rest.1.replacen("/issues/", "/pull/", 1)
        ))
    }

    /// It is a pull request of `repository` as a task names it (`owner/repo`, a URL, or a
    /// path whose last two parts are they), GitHub's names being of any case.
    pub fn is_of(&self, repository: &str) -> bool {
        let trimmed = repository.trim().trim_end_matches('/');
        let trimmed = trimmed.strip_suffix(".git").unwrap_or(trimmed);
        let mut parts = trimmed.rsplit(['/', ':']);
        let (Some(repo), Some(owner)) = (parts.next(), parts.next()) else {
            return false;
        };
        owner.eq_ignore_ascii_case(&self.owner) && repo.eq_ignore_ascii_case(&self.repo)
    }
}

/// Where repositories are cloned from, for the API at `api_url`: `https://github.com/` for
/// `https://api.github.com`, `https://HOST/` for a GitHub Enterprise's `https://HOST/api/v3`.
pub fn clone_base(api_url: &str) -> String {
    let trimmed = api_url.trim().trim_end_matches('/');
    let base = trimmed.strip_suffix("/api/v3").unwrap_or(trimmed);
    let base = base.replacen("://api.", "://", 1);
    format!("{base}/")
}

/// Why a call gave nothing to go on.
#[derive(Debug, thiserror::Error)]
pub enum GitHubError {
    /// The credential is refused, or cannot see the repository: a person must act.
    #[error("GitHub answered {status} to {what}: {message}")]
    Refused {
        status: u16,
        what: String,
        message: String,
    },
    /// Anything that may pass: the network, a 5xx, a rate limit.
    #[error("GitHub could not be asked {what}: {message}")]
    Passing { what: String, message: String },
}

/// The pull request, as far as watching it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pull {
    pub open: bool,
    pub head_sha: String,
}

/// A check run of the head.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CheckRun {
    pub id: u64,
    pub name: String,
    pub status: String,
    pub conclusion: Option<String>,
    #[serde(default)]
    pub output: Option<CheckOutput>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CheckOutput {
    pub title: Option<String>,
    pub summary: Option<String>,
}

impl CheckRun {
    pub fn completed(&self) -> bool {
        self.status == "completed"
    }

    /// A conclusion that asks for a fix (a cancelled or skipped run does not).
    pub fn failed(&self) -> bool {
        matches!(
            self.conclusion.as_deref(),
            Some("failure" | "timed_out" | "startup_failure")
        )
    }
}

/// A review, as the REST API spells it (`CHANGES_REQUESTED`, `APPROVED`, …).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Review {
    pub id: u64,
    #[serde(default)]
    pub user: Option<User>,
    #[serde(default)]
    pub body: Option<String>,
    pub state: String,
    /// The reviewer's relation to the repository (`OWNER`, `MEMBER`, `COLLABORATOR`,
    /// `CONTRIBUTOR`, `NONE`, …).
    #[serde(default)]
    pub author_association: Option<String>,
}

impl Review {
    /// The reviewer may change the repository: an owner, a member of its organization or
    /// a collaborator.
    pub fn may_write(&self) -> bool {
        matches!(
            self.author_association.as_deref(),
            Some("OWNER" | "MEMBER" | "COLLABORATOR")
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct User {
    pub login: String,
}

/// A review's comment on a line.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LineComment {
    pub path: String,
    #[serde(default)]
    pub line: Option<u64>,
    pub body: String,
}

/// The API at one base URL.
#[derive(Debug, Clone)]
pub struct GitHubApi {
    http: reqwest::Client,
    base: String,
}

/// The most of a log read: its end is what says why it failed.
const LOG_BYTES: usize = 2 << 20;

impl GitHubApi {
    pub fn new(base: &str, timeout: Duration) -> GitHubApi {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .user_agent(concat!("stepwise/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("an HTTP client with rustls builds");
        GitHubApi {
            http,
            base: base.trim_end_matches('/').to_string(),
        }
    }

    async fn get(&self, token: &str, path: &str) -> Result<reqwest::Response, GitHubError> {
        self.send(token, reqwest::Method::GET, path, None).await
    }

    async fn send(
        &self,
        token: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<reqwest::Response, GitHubError> {
        let what = format!("{method} {path}");
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request
            .bearer_auth(token)
            .header("Accept", "application/vnd.github+json")
            .header("X-GitHub-Api-Version", "2022-11-28")
            .send()
            .await
            .map_err(|e| GitHubError::Passing {
                what: what.clone(),
                message: e.without_url().to_string(),
            })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body: Value = response.json().await.unwrap_or(Value::Null);
        let message = body["message"]
            .as_str()
            .unwrap_or("no message")
            .chars()
            .take(300)
            .collect();
        // 403 with the rate limit spent passes; a 403 of permissions does not.
        let limited = status == StatusCode::TOO_MANY_REQUESTS
            || (status == StatusCode::FORBIDDEN
                && body["message"]
                    .as_str()
                    .is_some_and(|m| m.to_ascii_lowercase().contains("rate limit")));
        if status.is_server_error() || limited {
            return Err(GitHubError::Passing { what, message });
        }
        Err(GitHubError::Refused {
            status: status.as_u16(),
            what,
            message,
        })
    }

    async fn json<T: serde::de::DeserializeOwned>(
        &self,
        token: &str,
        path: &str,
    ) -> Result<T, GitHubError> {
        let response = self.get(token, path).await?;
        response.json().await.map_err(|e| GitHubError::Passing {
            what: format!("GET {path}"),
            message: format!("an answer that is not what GitHub documents: {e}"),
        })
    }

    pub async fn pull(&self, token: &str, pr: &PullRef) -> Result<Pull, GitHubError> {
        let path = format!("/repos/{}/{}/pulls/{}", pr.owner, pr.repo, pr.number);
        let body: Value = self.json(token, &path).await?;
        Ok(Pull {
            open: body["state"] == "open",
            head_sha: body["head"]["sha"].as_str().unwrap_or_default().to_string(),
        })
    }

    /// The check runs of commit `sha` (the first hundred).
    pub async fn check_runs(
        &self,
        token: &str,
        pr: &PullRef,
        sha: &str,
    ) -> Result<Vec<CheckRun>, GitHubError> {
        #[derive(Deserialize)]
        struct Runs {
            check_runs: Vec<CheckRun>,
        }
        let path = format!(
            "/repos/{}/{}/commits/{sha}/check-runs?per_page=100",
            pr.owner, pr.repo
        );
        Ok(self.json::<Runs>(token, &path).await?.check_runs)
    }

    /// The log of check run `id` when GitHub Actions ran it (its check run is its job),
    /// at most its last [`LOG_BYTES`]; `None` for another app's check, or a log gone.
    pub async fn job_log(&self, token: &str, pr: &PullRef, id: u64) -> Option<String> {
        let path = format!("/repos/{}/{}/actions/jobs/{id}/logs", pr.owner, pr.repo);
        let mut response = self.get(token, &path).await.ok()?;
        // Read as it comes, keeping its end only: a log may be far larger than is kept.
        let mut kept: Vec<u8> = Vec::new();
        while let Some(chunk) = response.chunk().await.ok()? {
            kept.extend_from_slice(&chunk);
            if kept.len() > 2 * LOG_BYTES {
                kept.drain(..kept.len() - LOG_BYTES);
            }
        }
        let start = kept.len().saturating_sub(LOG_BYTES);
        Some(String::from_utf8_lossy(&kept[start..]).into_owned())
    }

    /// `login` may push to the repository: GitHub's permission of the collaborator is
    /// `admin` or `write` (a maintainer's is `write`), not `read` (which every member of an
    /// organization may have) or `none`. Anyone who is no collaborator is a 404.
    pub async fn may_push(
        &self,
        token: &str,
        owner: &str,
        repo: &str,
        login: &str,
    ) -> Result<bool, GitHubError> {
        let plain = !login.is_empty()
            && login
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '[' | ']'));
        if !plain {
            return Ok(false);
        }
        let path = format!("/repos/{owner}/{repo}/collaborators/{login}/permission");
        match self.json::<Value>(token, &path).await {
            Ok(answer) => Ok(
                matches!(answer["permission"].as_str(), Some("admin" | "write"))
                    || matches!(
                        answer["role_name"].as_str(),
                        Some("admin" | "maintain" | "write")
                    ),
            ),
            Err(GitHubError::Refused { status: 404, .. }) => Ok(false),
            Err(other) => Err(other),
        }
    }

    /// Writes `body` as a new comment on issue or pull request `thread`; the comment's id.
    pub async fn post_comment(
        &self,
        token: &str,
        thread: &PullRef,
        body: &str,
    ) -> Result<u64, GitHubError> {
        let path = format!(
            "/repos/{}/{}/issues/{}/comments",
            thread.owner, thread.repo, thread.number
        );
        let sent = serde_json::json!({ "body": body });
        let response = self
            .send(token, reqwest::Method::POST, &path, Some(&sent))
            .await?;
        let made: Value = response.json().await.unwrap_or(Value::Null);
        made["id"].as_u64().ok_or_else(|| GitHubError::Passing {
            what: format!("POST {path}"),
            message: "the answer names no comment id".into(),
        })
    }

    /// Replaces comment `id`'s text with `body`.
    pub async fn edit_comment(
        &self,
        token: &str,
        thread: &PullRef,
        id: u64,
        body: &str,
    ) -> Result<(), GitHubError> {
        let path = format!(
            "/repos/{}/{}/issues/comments/{id}",
            thread.owner, thread.repo
        );
        let sent = serde_json::json!({ "body": body });
        self.send(token, reqwest::Method::PATCH, &path, Some(&sent))
            .await
            .map(drop)
    }

    pub async fn reviews(&self, token: &str, pr: &PullRef) -> Result<Vec<Review>, GitHubError> {
        let path = format!(
            "/repos/{}/{}/pulls/{}/reviews?per_page=100",
            pr.owner, pr.repo, pr.number
        );
        self.json(token, &path).await
    }

    pub async fn review_comments(
        &self,
        token: &str,
        pr: &PullRef,
        review: u64,
    ) -> Result<Vec<LineComment>, GitHubError> {
        let path = format!(
            "/repos/{}/{}/pulls/{}/reviews/{review}/comments?per_page=100",
            pr.owner, pr.repo, pr.number
        );
        self.json(token, &path).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repositories_are_cloned_from_the_api_s_own_host() {
        assert_eq!(clone_base("https://api.github.com"), "https://github.com/");
        assert_eq!(
            clone_base("https://ghe.example.com/api/v3/"),
            "https://ghe.example.com/"
        );
    }

    #[test]
    fn a_pull_request_address_reads_as_its_owner_repo_and_number() {
        assert_eq!(
            PullRef::parse("https://github.com/octo/hello/pull/7"),
            Some(PullRef {
                owner: "octo".into(),
                repo: "hello".into(),
                number: 7
            })
        );
        assert_eq!(
            PullRef::parse("https://ghe.example.com/team/app.rs/pull/12#discussion")
                .map(|p| p.number),
            Some(12)
        );
        let pr = PullRef::parse("https://github.com/Octo/Hello/pull/7").unwrap();
        for repository in [
            "octo/hello",
            "https://github.com/octo/hello.git",
            "git@github.com:octo/hello.git",
            "/tmp/t/octo/hello.git",
        ] {
            assert!(pr.is_of(repository), "{repository}");
        }
        for other in ["octo/world", "other/hello", "hello", "/tmp/remote.git"] {
            assert!(!pr.is_of(other), "{other}");
        }
        for bad in [
            "https://github.com/octo/hello/issues/7",
            "https://github.com/octo/pull/7",
            "https://github.com/../hello/pull/7",
            "https://github.com/octo/hello/pull/x",
            "not a url",
        ] {
            assert_eq!(PullRef::parse(bad), None, "{bad}");
        }
    }
}
