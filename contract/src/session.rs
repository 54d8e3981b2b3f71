//! The agent's own session, kept beside the job: each agent CLI keeps its conversation in
//! a file under the job's HOME, and a later step, iteration or round continues it by id.
//! The worker keeps that file as the artifact [`AGENT_SESSION`], so a round or a retry
//! claimed by another machine continues it too.

use serde::{Deserialize, Serialize};

use crate::RuntimeMode;

/// The artifact that holds the job's [`KeptSession`].
pub const AGENT_SESSION: &str = "session/agent.json";

/// The most bytes of a session file the worker keeps: past it the session goes on where it
/// runs, and a machine that claims the job later starts afresh with its history told.
pub const KEPT_SESSION_BYTES: usize = 16 << 20;

/// Where each CLI keeps its sessions, under HOME: a kept file must lie below one of them.
const SESSION_DIRS: [(RuntimeMode, &str); 3] = [
    (RuntimeMode::Codex, ".codex/sessions/"),
    (RuntimeMode::Claude, ".claude/projects/"),
    (RuntimeMode::Gemini, ".gemini/tmp/"),
];

/// The session of the job's agent as the worker kept it (redacted): which CLI, its id, and
/// its file, at `path` relative to the job's HOME.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeptSession {
    pub runtime: RuntimeMode,
    pub session_id: String,
    pub path: String,
    pub content: String,
    /// The session's totals as its CLI last reported them, for a CLI that reports a
    /// continued session's totals rather than the run's (codex, claude): what the next run's
    /// report is counted from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub totals: Option<crate::StepUsage>,
}

impl KeptSession {
    /// Reads a kept session, refusing one whose file would land anywhere but under its
    /// CLI's session folder in the job's HOME (the artifact is read back from storage).
    pub fn read(bytes: &[u8]) -> Result<KeptSession, String> {
        let kept: KeptSession =
            serde_json::from_slice(bytes).map_err(|e| format!("not a kept session: {e}"))?;
        let (_, dir) = SESSION_DIRS
            .iter()
            .find(|(mode, _)| *mode == kept.runtime)
            .ok_or("no runtime")?;
        let plain = kept
            .path
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != ".." && !part.contains('\\'));
        if !kept.path.starts_with(dir) || !plain {
            return Err(format!(
                "the session file {:?} is not under ~/{dir}",
                kept.path
            ));
        }
        if !is_session_id(&kept.session_id) {
            return Err(format!("the session id {:?} is not an id", kept.session_id));
        }
        Ok(kept)
    }
}

/// A session id as every CLI makes them, a UUID: it goes on a CLI's command line, where
/// anything else (a `-` first) could read as a flag.
pub fn is_session_id(id: &str) -> bool {
    uuid::Uuid::try_parse(id).is_ok() && id.len() == 36
}

/// Why a run starts a new session where it meant to continue one.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionLoss {
    /// The session was another runtime's.
    RuntimeChanged,
    /// Nothing of it was kept (an earlier version, a file too large, an artifact deleted)
    /// or its file is gone.
    Lost,
    /// The CLI was asked to continue it and began another.
    NotResumed,
}

crate::wire_names!(SessionLoss, "session loss", exact {
    RuntimeChanged = "runtime_changed",
    Lost = "lost",
    NotResumed = "not_resumed",
});

impl SessionLoss {
    /// How the agent and the timeline read it.
    pub fn reason(self) -> &'static str {
        match self {
            SessionLoss::RuntimeChanged => "the job's runtime changed since it began",
            SessionLoss::Lost => "its session was not kept",
            SessionLoss::NotResumed => "the agent CLI did not continue it",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(runtime: RuntimeMode, path: &str, id: &str) -> Vec<u8> {
        serde_json::to_vec(&KeptSession {
            runtime,
            session_id: id.into(),
            path: path.into(),
            content: "{}\n".into(),
            totals: None,
        })
        .unwrap()
    }

    #[test]
    fn a_kept_session_lands_only_under_its_cli_s_session_folder() {
        let id = "0b7c9a44-1e0f-4d5e-9a8b-2c3d4e5f6a7b";
        for (mode, path) in [
            (
                RuntimeMode::Codex,
                ".codex/sessions/2026/11/28/rollout-x.jsonl",
            ),
            (RuntimeMode::Claude, ".claude/projects/-w-repo/a.jsonl"),
            (
                RuntimeMode::Gemini,
                ".gemini/tmp/repo/chats/session-1.jsonl",
            ),
        ] {
            assert!(KeptSession::read(&kept(mode, path, id)).is_ok(), "{path}");
        }
        for (mode, path) in [
            (RuntimeMode::Claude, ".codex/sessions/a.jsonl"),
            (
                RuntimeMode::Claude,
                ".claude/projects/../../.ssh/authorized_keys",
            ),
            (RuntimeMode::Claude, "/etc/passwd"),
            (RuntimeMode::Claude, ".claude/projects//a.jsonl"),
            (RuntimeMode::Gemini, ".gemini/tmp/./x"),
        ] {
            let error = KeptSession::read(&kept(mode, path, id)).unwrap_err();
            assert!(error.contains("is not under"), "{path}: {error}");
        }
        for bad in [
            "a b",
            "--dangerously-bypass-approvals-and-sandbox",
            "0b7c9a441e0f4d5e9a8b2c3d4e5f6a7b",
        ] {
            let error =
                KeptSession::read(&kept(RuntimeMode::Codex, ".codex/sessions/a", bad)).unwrap_err();
            assert!(error.contains("not an id"), "{error}");
        }
        assert!(KeptSession::read(b"{\"runtime\":\"claude\"}").is_err());
    }

    #[test]
    fn a_loss_has_its_wire_name_and_a_reason() {
        assert_eq!(
            serde_json::to_value(SessionLoss::RuntimeChanged).unwrap(),
            "runtime_changed"
        );
        assert_eq!(SessionLoss::NotResumed.to_string(), "not_resumed");
        assert!(SessionLoss::Lost.reason().contains("not kept"));
    }
}
