//! Runtime adapters: the command line each agent CLI needs to run one step unattended, and
//! how to read the streaming JSON it prints. The facts behind every flag were measured
//! against the real CLIs (../shared/AGENT_CLIS.md); the CLIs change often, so each adapter
//! keeps its flags in one place, tested as a whole argv.

mod claude;
mod codex;
mod gemini;

use std::path::{Path, PathBuf};

use contract::{RuntimeMode, RuntimeSettings};

/// Where each CLI lives. By default its bare name, looked up on `PATH` when spawned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    pub codex: PathBuf,
    pub claude: PathBuf,
    pub gemini: PathBuf,
}

impl Default for Binaries {
    fn default() -> Self {
        Binaries {
            codex: "codex".into(),
            claude: "claude".into(),
            gemini: "gemini".into(),
        }
    }
}

impl Binaries {
    pub fn get(&self, mode: RuntimeMode) -> &Path {
        match mode {
            RuntimeMode::Codex => &self.codex,
            RuntimeMode::Claude => &self.claude,
            RuntimeMode::Gemini => &self.gemini,
        }
    }
}

/// One step, as an adapter needs it.
#[derive(Debug, Clone, Copy)]
pub struct StepRun<'a> {
    pub runtime: &'a RuntimeSettings,
    /// The whole prompt (the contract's step prompt), passed as one argument.
    pub prompt: &'a str,
    /// The job's checkout: the agent's working directory.
    pub repo: &'a Path,
    /// The job's own HOME: the CLI's config, credentials and per-job settings stay there.
    pub home: &'a Path,
}

/// A command ready to spawn: `program` with `args` in `cwd`, stdin from /dev/null (codex
/// waits for an open stdin to close), the environment changed by `env`, after writing
/// `files` (per-job settings inside `home`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    pub files: Vec<(PathBuf, String)>,
    /// What the adapter could not honour, for the step's log (say, an effort that this
    /// CLI can only take for a named model).
    pub notes: Vec<String>,
}

/// The invocation of `run`'s runtime for one step.
pub fn invocation(binaries: &Binaries, run: &StepRun<'_>) -> Invocation {
    let mode = run.runtime.mode;
    let mut invocation = Invocation {
        program: binaries.get(mode).to_path_buf(),
        args: Vec::new(),
        cwd: run.repo.to_path_buf(),
        env: vec![("HOME".into(), run.home.display().to_string())],
        files: Vec::new(),
        notes: Vec::new(),
    };
    match mode {
        RuntimeMode::Codex => codex::build(run, &mut invocation),
        RuntimeMode::Claude => claude::build(run, &mut invocation),
        RuntimeMode::Gemini => gemini::build(run, &mut invocation),
    }
    invocation
}

/// What one line of a CLI's streaming output says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Text the agent wrote.
    Message(String),
    /// The agent ran a tool: a command, an edit, a search; named for the live log.
    Action(String),
    /// The CLI reported an error; it may still retry or go on.
    Error(String),
    /// The run is over, by the CLI's own verdict, with its final text when it gave one.
    Finished { ok: bool, summary: Option<String> },
}

impl Progress {
    /// How it reads in a live tail; the end of a run has its own step event instead.
    pub fn display(&self) -> Option<String> {
        match self {
            Progress::Message(text) => Some(text.clone()),
            Progress::Action(action) => Some(format!("▸ {action}")),
            Progress::Error(error) => Some(format!("error: {error}")),
            Progress::Finished { .. } => None,
        }
    }
}

/// What a person watching the step should read for one line of `mode`'s output: the
/// agent's messages, actions and errors as text; a line that is not JSON (a CLI's plain
/// warning) as it is; a JSON line with nothing to show, nothing. The step's log artifact
/// keeps every line as the CLI wrote it.
pub fn readable(mode: RuntimeMode, line: &str) -> Vec<String> {
    if !line.trim_start().starts_with('{') {
        return vec![line.to_string()];
    }
    parse_line(mode, line)
        .iter()
        .filter_map(Progress::display)
        .collect()
}

/// Reads one line of `mode`'s streaming output. Lines that are not JSON (a CLI's plain
/// warnings) or that carry nothing to show give nothing; they still go to the step's log.
pub fn parse_line(mode: RuntimeMode, line: &str) -> Vec<Progress> {
    let Ok(event) = serde_json::from_str::<serde_json::Value>(line.trim()) else {
        return Vec::new();
    };
    match mode {
        RuntimeMode::Codex => codex::parse(&event),
        RuntimeMode::Claude => claude::parse(&event),
        RuntimeMode::Gemini => gemini::parse(&event),
    }
}

/// A string field of a JSON object, when present and not blank.
fn text(value: &serde_json::Value, key: &str) -> Option<String> {
    value
        .get(key)
        .and_then(|v| v.as_str())
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

#[cfg(test)]
fn settings(mode: RuntimeMode, model: Option<&str>, effort: Option<&str>) -> RuntimeSettings {
    RuntimeSettings {
        mode,
        model: model.map(str::to_string),
        effort: effort.map(str::to_string),
    }
}

#[cfg(test)]
fn build_for(runtime: &RuntimeSettings) -> Invocation {
    invocation(
        &Binaries::default(),
        &StepRun {
            runtime,
            prompt: "Fix the build",
            repo: Path::new("/w/job/repo"),
            home: Path::new("/w/job/home"),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_binaries_are_used() {
        let binaries = Binaries {
            claude: "/opt/agents/claude".into(),
            ..Binaries::default()
        };
        let runtime = settings(RuntimeMode::Claude, None, None);
        let run = StepRun {
            runtime: &runtime,
            prompt: "p",
            repo: Path::new("/r"),
            home: Path::new("/h"),
        };
        let built = invocation(&binaries, &run);
        assert_eq!(built.program, PathBuf::from("/opt/agents/claude"));
        assert_eq!(built.cwd, PathBuf::from("/r"));
        assert!(built.env.contains(&("HOME".into(), "/h".into())));
    }

    #[test]
    fn a_live_tail_reads_the_agent_s_words_not_its_json() {
        let said = r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Reading the code"}]}}"#;
        assert_eq!(readable(RuntimeMode::Claude, said), ["Reading the code"]);
        let init = r#"{"type":"system","subtype":"init","cwd":"/w"}"#;
        assert!(readable(RuntimeMode::Claude, init).is_empty());
        let done = r#"{"type":"result","subtype":"success","is_error":false,"result":"done"}"#;
        assert!(
            readable(RuntimeMode::Claude, done).is_empty(),
            "the step event says it"
        );
        assert_eq!(
            readable(RuntimeMode::Codex, "warning: slow"),
            ["warning: slow"]
        );
        assert_eq!(
            Progress::Action("edit a.rs".into()).display().as_deref(),
            Some("▸ edit a.rs")
        );
    }

    #[test]
    fn lines_that_are_not_json_say_nothing() {
        for mode in RuntimeMode::ALL {
            assert!(parse_line(mode, "warning: something").is_empty());
            assert!(parse_line(mode, "").is_empty());
        }
    }
}
