//! The agent's own session: which one a run begins or continues, what each CLI reports of
//! a continued one, and the search for its file under the job's HOME (where each CLI
//! leaves it is its adapter's: measured in docs/notes/agent-sessions.md).

use std::path::{Path, PathBuf};

use contract::RuntimeMode;

/// The session a run begins or continues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionArg {
    /// A new session, under the id the worker chose when the CLI takes one (claude,
    /// gemini); codex names its own.
    Begin(Option<String>),
    /// The session of this id, which the CLI keeps under the job's HOME.
    Continue(String),
}

impl SessionArg {
    /// A new session of `mode`. Ids are random: gemini tells its sessions apart by the
    /// first 8 characters, which ids made from a job's time-ordered id would share.
    pub fn begin(mode: RuntimeMode) -> SessionArg {
        SessionArg::Begin(match mode {
            RuntimeMode::Codex => None,
            RuntimeMode::Claude | RuntimeMode::Gemini => Some(uuid::Uuid::new_v4().to_string()),
        })
    }

    /// The id the run is asked to use, when it is asked one.
    pub fn id(&self) -> Option<&str> {
        match self {
            SessionArg::Begin(id) => id.as_deref(),
            SessionArg::Continue(id) => Some(id),
        }
    }
}

/// Whether `mode` reports a continued session's totals so far where it reports a run's
/// usage: codex (`turn.completed`) and claude (`result`, its price too) do, measured with
/// the real CLIs; gemini reports the run's own.
pub fn reports_session_totals(mode: RuntimeMode) -> bool {
    matches!(mode, RuntimeMode::Codex | RuntimeMode::Claude)
}

/// The largest file under `dir`, at most `depth` folders down, whose name `wanted` takes:
/// the largest, since a CLI may leave a stub of the same session beside it (gemini).
pub(super) fn largest(dir: &Path, depth: usize, wanted: &dyn Fn(&str) -> bool) -> Option<PathBuf> {
    let mut best: Option<(u64, PathBuf)> = None;
    let mut folders = vec![(dir.to_path_buf(), 0)];
    while let Some((folder, level)) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() && level < depth {
                folders.push((path, level + 1));
            } else if kind.is_file() && entry.file_name().to_str().is_some_and(wanted) {
                let size = entry.metadata().map_or(0, |m| m.len());
                if best.as_ref().is_none_or(|(most, _)| size > *most) {
                    best = Some((size, path));
                }
            }
        }
    }
    best.map(|(_, path)| path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::session_file;

    fn touch(path: &Path, bytes: usize) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "x".repeat(bytes)).unwrap();
    }

    #[test]
    fn each_cli_s_session_file_is_found_where_it_leaves_it() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path();
        let id = "0b7c9a44-1e0f-4d5e-9a8b-2c3d4e5f6a7b";
        let codex = home.join(format!(
            ".codex/sessions/2026/11/28/rollout-2026-11-28T04-00-00-{id}.jsonl"
        ));
        let claude = home.join(format!(".claude/projects/-w-job-repo/{id}.jsonl"));
        let gemini = home.join(".gemini/tmp/repo/chats/session-2026-11-28T04-00-0b7c9a44.jsonl");
        let stub = home.join(".gemini/tmp/repo/chats/session-2026-11-28T04-02-0b7c9a44.jsonl");
        touch(&codex, 10);
        touch(&claude, 10);
        touch(&gemini, 100);
        touch(&stub, 3);
        touch(&home.join(".claude/projects/-w-job-repo/other.jsonl"), 500);
        assert_eq!(session_file(RuntimeMode::Codex, home, id), Some(codex));
        assert_eq!(session_file(RuntimeMode::Claude, home, id), Some(claude));
        assert_eq!(
            session_file(RuntimeMode::Gemini, home, id),
            Some(gemini),
            "not the stub"
        );
        assert_eq!(
            session_file(RuntimeMode::Claude, home, "0b7c9a44-0000"),
            None
        );
        assert_eq!(session_file(RuntimeMode::Claude, home, "../x"), None);
    }

    #[test]
    fn a_new_session_has_a_chosen_id_only_where_the_cli_takes_one() {
        assert_eq!(
            SessionArg::begin(RuntimeMode::Codex),
            SessionArg::Begin(None)
        );
        let (a, b) = (
            SessionArg::begin(RuntimeMode::Gemini),
            SessionArg::begin(RuntimeMode::Gemini),
        );
        assert_ne!(a.id().unwrap()[..8], b.id().unwrap()[..8]);
        assert_eq!(SessionArg::Continue("s".into()).id(), Some("s"));
    }

    #[test]
    fn a_session_is_begun_under_a_chosen_id_and_continued_by_id() {
        let args = |mode, session: &SessionArg| {
            let runtime = crate::runtime::settings(mode, Some("m"), Some("high"));
            crate::runtime::invocation(
                &crate::runtime::Binaries::default(),
                &crate::runtime::StepRun {
                    runtime: &runtime,
                    prompt: "p",
                    repo: Path::new("/r"),
                    home: Path::new("/h"),
                    endpoint: &crate::runtime::Endpoint::default(),
                    sandboxed: true,
                    session,
                },
            )
            .args
        };
        let pair = |args: &[String], flag: &str| {
            args.windows(2).find(|w| w[0] == flag).map(|w| w[1].clone())
        };
        let begin = SessionArg::Begin(Some("id-1".into()));
        let again = SessionArg::Continue("id-1".into());
        for mode in [RuntimeMode::Claude, RuntimeMode::Gemini] {
            let first = args(mode, &begin);
            assert_eq!(
                pair(&first, "--session-id").as_deref(),
                Some("id-1"),
                "{mode}"
            );
            assert_eq!(pair(&first, "--resume"), None, "{mode}");
            let later = args(mode, &again);
            assert_eq!(pair(&later, "--resume").as_deref(), Some("id-1"), "{mode}");
            assert_eq!(pair(&later, "--session-id"), None, "{mode}");
            // The last argument is never the id: a prompt argument would be read there.
            assert_ne!(later.last().map(String::as_str), Some("id-1"), "{mode}");
        }
        let first = args(RuntimeMode::Codex, &SessionArg::Begin(None));
        assert!(!first.contains(&"resume".to_string()), "{first:?}");
        let later = args(RuntimeMode::Codex, &again);
        assert_eq!(later[later.len() - 3..], ["resume", "id-1", "-"]);
        let at = |flag: &str| later.iter().position(|a| a == flag).unwrap();
        for option in ["-C", "--sandbox", "-m", "--json"] {
            assert!(
                at(option) < at("resume"),
                "{option} after resume: {later:?}"
            );
        }
    }
}
