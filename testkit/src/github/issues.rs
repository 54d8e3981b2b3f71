//! Issues as the scripted API holds them: the repository's collaborators (`GET
//! …/collaborators/{user}/permission`, or 404), the comments written on an issue or pull request
//! (`POST …/issues/{n}/comments`, `PATCH …/issues/comments/{id}`), and the `issues` and
//! `issue_comment` webhook payloads, in the shapes GitHub's documentation gives.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::routes::{not_found, refused};
use super::{GitHub, Shared};

/// A comment the API was asked to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    pub id: u64,
    /// `owner/repo#number`.
    pub on: String,
    pub body: String,
    /// How many times it was edited.
    pub edits: u32,
}

/// An issue (or a pull request, as the issues API sees one) for a webhook payload.
#[derive(Debug, Clone)]
pub struct Issue {
    pub owner: String,
    pub repo: String,
    pub number: u64,
    pub title: String,
    pub body: String,
    pub author: String,
    pub pull_request: bool,
    /// What the repository's `clone_url` says (a local bare repository in tests).
    pub clone_url: String,
}

impl Issue {
    pub fn new(
        owner: &str,
        repo: &str,
        number: u64,
        title: &str,
        body: &str,
        clone_url: &str,
    ) -> Issue {
        Issue {
            owner: owner.into(),
            repo: repo.into(),
            number,
            title: title.into(),
            body: body.into(),
            author: "octocat".into(),
            pull_request: false,
            clone_url: clone_url.into(),
        }
    }

    /// The same number as a pull request.
    pub fn pull_request(mut self) -> Issue {
        self.pull_request = true;
        self
    }

    pub fn html_url(&self) -> String {
        let kind = if self.pull_request { "pull" } else { "issues" };
        format!(
            "https://github.com/{}/{}/{kind}/{}",
            self.owner, self.repo, self.number
        )
    }

    fn repository(&self) -> Value {
        json!({
            "id": 1296269,
            "node_id": "MDEwOlJlcG9zaXRvcnkxMjk2MjY5",
            "name": self.repo,
            "full_name": format!("{}/{}", self.owner, self.repo),
            "private": false,
            "owner": { "login": self.owner, "id": 1, "type": "User" },
            "html_url": format!("https://github.com/{}/{}", self.owner, self.repo),
            "clone_url": self.clone_url,
            "default_branch": "main",
        })
    }

    fn issue(&self) -> Value {
        let api = format!("https://api.github.com/repos/{}/{}", self.owner, self.repo);
        let mut issue = json!({
            "url": format!("{api}/issues/{}", self.number),
            "repository_url": api,
            "html_url": self.html_url(),
            "id": 1_000_000 + self.number,
            "node_id": "I_kwDOABCD",
            "number": self.number,
            "title": self.title,
            "user": { "login": self.author, "id": 583231, "type": "User" },
            "labels": [],
            "state": "open",
            "locked": false,
            "comments": 0,
            "created_at": "2026-11-28T08:00:00Z",
            "updated_at": "2026-11-28T08:00:00Z",
            "author_association": "OWNER",
            "body": self.body,
        });
        if self.pull_request {
            issue["pull_request"] = json!({
                "url": format!("{api}/pulls/{}", self.number),
                "html_url": self.html_url(),
                "diff_url": format!("{}.diff", self.html_url()),
                "patch_url": format!("{}.patch", self.html_url()),
            });
        }
        issue
    }

    /// The `issues` webhook's payload when `sender` labels the issue `label`.
    pub fn labeled(&self, label: &str, sender: &str) -> Value {
        let mut issue = self.issue();
        let label = json!({
            "id": 208045946,
            "node_id": "MDU6TGFiZWwyMDgwNDU5NDY=",
            "url": format!("https://api.github.com/repos/{}/{}/labels/{label}", self.owner, self.repo),
            "name": label,
            "color": "f29513",
            "default": false,
            "description": null,
        });
        issue["labels"] = json!([label]);
        json!({
            "action": "labeled",
            "issue": issue,
            "label": label,
            "repository": self.repository(),
            "sender": { "login": sender, "id": 2, "type": "User" },
        })
    }

    /// The `issue_comment` webhook's payload for comment `id` by `user` saying `body`:
    /// `action` is `created`, `edited` (with what it said before) or `deleted`.
    pub fn comment(&self, action: &str, id: u64, user: &str, body: &str) -> Value {
        let mut payload = json!({
            "action": action,
            "issue": self.issue(),
            "comment": {
                "url": format!("https://api.github.com/repos/{}/{}/issues/comments/{id}", self.owner, self.repo),
                "html_url": format!("{}#issuecomment-{id}", self.html_url()),
                "issue_url": format!("https://api.github.com/repos/{}/{}/issues/{}", self.owner, self.repo, self.number),
                "id": id,
                "node_id": "IC_kwDOABCD",
                "user": { "login": user, "id": 3, "type": "User" },
                "created_at": "2026-11-28T08:01:00Z",
                "updated_at": "2026-11-28T08:01:00Z",
                "author_association": "NONE",
                "body": body,
            },
            "repository": self.repository(),
            "sender": { "login": user, "id": 3, "type": "User" },
        });
        if action == "edited" {
            payload["changes"] = json!({ "body": { "from": "what it said before" } });
        }
        payload
    }
}

impl GitHub {
    /// `login` may push to every repository the API serves (GitHub's permission `write`).
    pub fn add_collaborator(&self, login: &str) {
        self.add_collaborator_with(login, "write");
    }

    /// `login` is a collaborator with `permission`: `admin`, `write`, `read` or `none`.
    pub fn add_collaborator_with(&self, login: &str, permission: &str) {
        self.with(|s| {
            s.collaborators
                .push((login.to_string(), permission.to_string()))
        });
    }

    /// The comments written so far, in order.
    pub fn comments(&self) -> Vec<Comment> {
        self.with(|s| s.comments.clone())
    }
}

pub(super) async fn permission(
    State(script): State<Shared>,
    Path((owner, repo, user)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let what = format!("GET /repos/{owner}/{repo}/collaborators/{user}/permission");
    if let Some(refused) = refused(&script, what, &headers) {
        return refused;
    }
    let s = script.lock().expect("not poisoned");
    match s
        .collaborators
        .iter()
        .find(|(c, _)| c.eq_ignore_ascii_case(&user))
    {
        Some((login, permission)) => axum::Json(json!({
            "permission": permission,
            "role_name": permission,
            "user": { "login": login, "type": "User" },
        }))
        .into_response(),
        None => not_found(),
    }
}

pub(super) async fn post_comment(
    State(script): State<Shared>,
    Path((owner, repo, number)): Path<(String, String, u64)>,
    headers: HeaderMap,
    axum::Json(sent): axum::Json<Value>,
) -> Response {
    let what = format!("POST /repos/{owner}/{repo}/issues/{number}/comments");
    if let Some(refused) = refused(&script, what, &headers) {
        return refused;
    }
    let Some(body) = sent["body"].as_str() else {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            axum::Json(json!({ "message": "Invalid request.\n\n\"body\" wasn't supplied." })),
        )
            .into_response();
    };
    let mut s = script.lock().expect("not poisoned");
    let id = s.id();
    s.comments.push(Comment {
        id,
        on: format!("{owner}/{repo}#{number}"),
        body: body.to_string(),
        edits: 0,
    });
    let url = format!("https://github.com/{owner}/{repo}/issues/{number}#issuecomment-{id}");
    (
        StatusCode::CREATED,
        axum::Json(json!({ "id": id, "html_url": url, "body": body, "user": { "login": "stepwise-bot", "type": "User" } })),
    )
        .into_response()
}

pub(super) async fn edit_comment(
    State(script): State<Shared>,
    Path((owner, repo, id)): Path<(String, String, u64)>,
    headers: HeaderMap,
    axum::Json(sent): axum::Json<Value>,
) -> Response {
    let what = format!("PATCH /repos/{owner}/{repo}/issues/comments/{id}");
    if let Some(refused) = refused(&script, what, &headers) {
        return refused;
    }
    let mut s = script.lock().expect("not poisoned");
    let prefix = format!("{owner}/{repo}#");
    let Some(comment) = s
        .comments
        .iter_mut()
        .find(|c| c.id == id && c.on.starts_with(&prefix))
    else {
        return not_found();
    };
    comment.body = sent["body"].as_str().unwrap_or_default().to_string();
    comment.edits += 1;
    axum::Json(json!({ "id": id, "body": comment.body })).into_response()
}
