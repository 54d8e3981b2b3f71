//! Runtime adapters: the command line each agent CLI needs to run one step unattended, and
//! how to read the streaming JSON it prints. The facts behind every flag were measured
//! against the real CLIs (../shared/AGENT_CLIS.md); the CLIs change often, so each adapter
//! keeps its flags in one place, tested as a whole argv.

mod claude;
mod codex;
mod gemini;
mod session;

pub use session::{SessionArg, reports_session_totals};

use std::path::{Path, PathBuf};

use contract::{RuntimeMode, RuntimeSettings, StepUsage};

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

/// How the worker reaches one runtime's model API beyond the CLI's own defaults: for a
/// proxy, Azure OpenAI, a gateway such as LiteLLM or a local OpenAI-compatible server.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Endpoint {
    /// Where the CLI sends its model requests; its own default when unset.
    pub base_url: Option<String>,
    /// The API key, passed on in the one variable the CLI reads (`CODEX_API_KEY`,
    /// `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`), whatever variable the worker found it in.
    pub api_key: Option<String>,
    /// gemini only: `security.auth.selectedType` in the job's settings; `gemini-api-key`
    /// when unset (a shared login names its own, say `oauth-personal`).
    pub auth_type: Option<String>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .field("auth_type", &self.auth_type)
            .finish()
    }
}

/// Each runtime's [`Endpoint`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoints {
    pub codex: Endpoint,
    pub claude: Endpoint,
    pub gemini: Endpoint,
}

impl Endpoints {
    pub fn get(&self, mode: RuntimeMode) -> &Endpoint {
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
    /// The whole prompt (the contract's step prompt), sent on stdin.
    pub prompt: &'a str,
    /// The job's checkout: the agent's working directory. Absolute.
    pub repo: &'a Path,
    /// The job's own HOME, outside the checkout: the CLI's config, credentials and per-job
    /// settings stay there. Absolute.
    pub home: &'a Path,
    pub endpoint: &'a Endpoint,
    /// The step runs in the worker's sandbox, which replaces the CLI's own (codex's).
    pub sandboxed: bool,
    /// The agent session it begins or continues.
    pub session: &'a SessionArg,
}

/// A command ready to spawn: `program` with `args` in `cwd`, `stdin` written to its
/// standard input and then closed (/dev/null when there is none), with `env` alone when
/// `clear_env` (as the sandbox builds it), else the worker's environment less `env_remove`
/// and changed by `env`, after writing `files` (per-job settings inside `home`).
#[derive(Clone, PartialEq, Eq)]
pub struct Invocation {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    pub stdin: Option<String>,
    pub env_remove: Vec<String>,
    pub env: Vec<(String, String)>,
    pub clear_env: bool,
    /// `program` supervises what it starts (bubblewrap): a stop signals the rest first.
    pub supervised: bool,
    pub files: Vec<(PathBuf, String)>,
    /// What the adapter could not honour, for the step's log (say, an effort that this
    /// CLI can only take for a named model).
    pub notes: Vec<String>,
}

/// Values of `env` are left out: an API key travels there.
impl std::fmt::Debug for Invocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Invocation")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("cwd", &self.cwd)
            .field("stdin_bytes", &self.stdin.as_ref().map(String::len))
            .field("env_remove", &self.env_remove)
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("clear_env", &self.clear_env)
            .field("supervised", &self.supervised)
            .field(
                "files",
                &self.files.iter().map(|(p, _)| p).collect::<Vec<_>>(),
            )
            .field("notes", &self.notes)
            .finish()
    }
}

impl Invocation {
    /// `program` with `args` in `cwd`, stdin from /dev/null, nothing else set.
    pub fn plain(program: PathBuf, args: Vec<String>, cwd: PathBuf) -> Invocation {
        Invocation {
            program,
            args,
            cwd,
            stdin: None,
            env_remove: Vec::new(),
            env: Vec::new(),
            clear_env: false,
            supervised: false,
            files: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// The value this invocation sets for `name`, if any.
    pub fn env_value(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The invocation of `run`'s runtime for one step. The prompt goes on stdin for every
/// runtime: as one argument, 128 KiB or more cannot start (E2BIG), and a task may hold
/// 100k-character objectives and instructions.
pub fn invocation(binaries: &Binaries, run: &StepRun<'_>) -> Invocation {
    let mode = run.runtime.mode;
    let mut invocation = Invocation {
        stdin: Some(run.prompt.to_string()),
        env: vec![("HOME".into(), run.home.display().to_string())],
        ..Invocation::plain(
            binaries.get(mode).to_path_buf(),
            Vec::new(),
            run.repo.to_path_buf(),
        )
    };
    match mode {
        RuntimeMode::Codex => codex::build(run, &mut invocation),
        RuntimeMode::Claude => claude::build(run, &mut invocation),
        RuntimeMode::Gemini => gemini::build(run, &mut invocation),
    }
    invocation
}

/// The file of session `id` of `mode` under `home`, when the CLI left one.
pub fn session_file(mode: RuntimeMode, home: &Path, id: &str) -> Option<PathBuf> {
    if id.is_empty() || id.contains(['/', '\\', '.']) {
        return None;
    }
    match mode {
        RuntimeMode::Codex => codex::session_file(home, id),
        RuntimeMode::Claude => claude::session_file(home, id),
        RuntimeMode::Gemini => gemini::session_file(home, id),
    }
}

/// What one line of a CLI's streaming output says.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// Text the agent wrote, whole.
    Message(String),
    /// A piece of a message that arrives in parts (gemini's `delta: true`), exactly as it
    /// came: [`Reader`] joins the pieces into one [`Progress::Message`].
    Piece(String),
    /// The agent ran a tool: a command, an edit, a search; named for the live log.
    Action(String),
    /// The CLI reported an error; it may still retry or go on.
    Error(String),
    /// What the invocation used, as the CLI counted it.
    Usage(StepUsage),
    /// The id of the agent session the run is in, as the CLI said it when it began.
    Session(String),
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
            Progress::Piece(_)
            | Progress::Usage(_)
            | Progress::Session(_)
            | Progress::Finished { .. } => None,
        }
    }
}

/// Reads one invocation's output line by line, joining a message that arrives in pieces:
/// the pieces are kept as they are (no trimming, a piece may be "." or " done") and the
/// message ends at the next event that is not a piece, or at [`Reader::finish`].
#[derive(Debug)]
pub struct Reader {
    mode: RuntimeMode,
    pending: String,
}

impl Reader {
    pub fn new(mode: RuntimeMode) -> Reader {
        Reader {
            mode,
            pending: String::new(),
        }
    }

    /// What `line` says, with any message it completes first.
    pub fn line(&mut self, line: &str) -> Vec<Progress> {
        let mut out = Vec::new();
        for progress in parse_line(self.mode, line) {
            match progress {
                Progress::Piece(piece) => self.pending.push_str(&piece),
                other => {
                    out.extend(self.flush());
                    out.push(other);
                }
            }
        }
        out
    }

    /// The message still being pieced together when the output ended.
    pub fn finish(&mut self) -> Vec<Progress> {
        self.flush().into_iter().collect()
    }

    fn flush(&mut self) -> Option<Progress> {
        let text = std::mem::take(&mut self.pending);
        let text = text.trim();
        (!text.is_empty()).then(|| Progress::Message(text.to_string()))
    }

    /// What a person watching the step should read for `line`: the agent's messages (whole),
    /// actions and errors as text; a line that is not JSON (a CLI's plain warning) as it
    /// is; a JSON line with nothing to show, nothing. Also returns what the line says.
    pub fn readable(&mut self, line: &str) -> (Vec<Progress>, Vec<String>) {
        let progress = self.line(line);
        if !line.trim_start().starts_with('{') {
            return (progress, vec![line.to_string()]);
        }
        let shown = progress.iter().filter_map(Progress::display).collect();
        (progress, shown)
    }
}

/// What a person watching the step should read for one line of `mode`'s output, for CLIs
/// whose messages come whole; [`Reader::readable`] joins pieces too.
pub fn readable(mode: RuntimeMode, line: &str) -> Vec<String> {
    Reader::new(mode).readable(line).1
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

/// A count at `pointer` in `value`.
fn count(value: &serde_json::Value, pointer: &str) -> Option<u64> {
    value.pointer(pointer).and_then(serde_json::Value::as_u64)
}

/// An API error as people read it: APIs answer with JSON (`{"error":{"message":…}}`), and
/// some CLIs pass that body on as their message.
fn api_error(message: &str) -> String {
    let Ok(body) = serde_json::from_str::<serde_json::Value>(message.trim()) else {
        return message.to_string();
    };
    ["/error/message", "/message", "/error", "/detail"]
        .iter()
        .find_map(|p| body.pointer(p).and_then(|v| v.as_str()))
        .map(str::to_string)
        .unwrap_or_else(|| message.to_string())
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
    build_with(runtime, &Endpoint::default())
}

#[cfg(test)]
fn build_with(runtime: &RuntimeSettings, endpoint: &Endpoint) -> Invocation {
    invocation(
        &Binaries::default(),
        &StepRun {
            runtime,
            prompt: "Fix the build",
            repo: Path::new("/w/job/repo"),
            home: Path::new("/w/job/home"),
            endpoint,
            sandboxed: true,
            session: &SessionArg::Begin(None),
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
            endpoint: &Endpoint::default(),
            sandboxed: true,
            session: &SessionArg::Begin(None),
        };
        let built = invocation(&binaries, &run);
        assert_eq!(built.program, PathBuf::from("/opt/agents/claude"));
        assert_eq!(built.cwd, PathBuf::from("/r"));
        assert!(built.env.contains(&("HOME".into(), "/h".into())));
    }

    #[test]
    fn every_runtime_reads_its_prompt_from_stdin_never_from_an_argument() {
        let prompt = "y".repeat(200 * 1024);
        for mode in RuntimeMode::ALL {
            let runtime = settings(mode, Some("m"), None);
            let built = invocation(
                &Binaries::default(),
                &StepRun {
                    runtime: &runtime,
                    prompt: &prompt,
                    repo: Path::new("/r"),
                    home: Path::new("/h"),
                    endpoint: &Endpoint::default(),
                    sandboxed: true,
                    session: &SessionArg::Begin(None),
                },
            );
            assert_eq!(built.stdin.as_deref(), Some(prompt.as_str()), "{mode}");
            let longest = built.args.iter().map(String::len).max().unwrap_or(0);
            assert!(longest < 1024, "{mode}: an argument of {longest} bytes");
        }
    }

    #[test]
    fn an_api_key_never_shows_in_debug_output() {
        let endpoint = Endpoint {
            api_key: Some("sk-very-secret-key-123".into()),
            ..Endpoint::default()
        };
        let built = build_with(&settings(RuntimeMode::Claude, None, None), &endpoint);
        assert_eq!(
            built.env_value("ANTHROPIC_API_KEY"),
            Some("sk-very-secret-key-123")
        );
        for shown in [format!("{built:?}"), format!("{endpoint:?}")] {
            assert!(!shown.contains("sk-very-secret"), "{shown}");
        }
    }

    #[test]
    fn pieces_of_a_message_are_joined_as_they_came_and_end_at_the_next_event() {
        let mut reader = Reader::new(RuntimeMode::Gemini);
        let piece = |t: &str| {
            serde_json::json!({ "type": "message", "role": "assistant", "content": t, "delta": true })
                .to_string()
        };
        let mut shown = Vec::new();
        for line in [
            piece("All"),
            piece(" done"),
            piece("."),
            r#"{"type":"tool_use","tool_name":"run_shell_command","tool_id":"t1"}"#.into(),
            piece("Second"),
            piece(" one"),
        ] {
            shown.extend(reader.readable(&line).1);
        }
        assert_eq!(shown, ["All done.", "▸ run_shell_command"]);
        assert_eq!(reader.finish(), [Progress::Message("Second one".into())]);
        assert!(reader.finish().is_empty());
    }

    #[test]
    fn an_api_error_passed_on_as_json_reads_as_its_message() {
        assert_eq!(
            api_error(r#"{"error":{"message":"Rate limit reached","type":"rate_limit"}}"#),
            "Rate limit reached"
        );
        assert_eq!(api_error("plain words"), "plain words");
        assert_eq!(api_error(r#"{"code":7}"#), r#"{"code":7}"#);
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
