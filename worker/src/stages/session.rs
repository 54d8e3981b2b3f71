//! The job's agent session across its runs: the first agent run of a job begins one, every
//! later step, iteration and round continues it. After each run the CLI's session file is
//! kept (redacted) as the artifact `session/agent.json`, which a later attempt or round
//! puts back in its HOME, on whichever machine claims it. Where the session cannot be
//! continued, the run says so (`task.session.restarted`) and its prompt tells the new
//! session the job's history.

use contract::events::SessionRestarted;
use contract::session::{AGENT_SESSION, KEPT_SESSION_BYTES, KeptSession, SessionLoss};
use contract::{EventLevel, ResolvedStep, RuntimeMode, StepUsage};

use super::{Log, Report, Run};
use crate::runtime::{SessionArg, reports_session_totals, session_file};
use crate::workspace::Workspace;

/// The session the job's agent is in, as this run knows it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Session {
    pub runtime: RuntimeMode,
    pub id: String,
    /// What its CLI last reported as the session's totals, where it reports those.
    pub totals: Option<StepUsage>,
}

/// What the job's session is to this run before its first agent run.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) enum Known {
    /// Nothing ran before: the first run begins the session.
    #[default]
    Nothing,
    /// The session to continue.
    Session(Session),
    /// Runs came before, and their session cannot be continued.
    Lost {
        loss: SessionLoss,
        previous: Option<String>,
    },
}

/// How one agent run goes about the session: the argument its CLI gets, and why it begins
/// a new session where one was meant to go on.
pub(super) struct Plan {
    pub arg: SessionArg,
    pub loss: Option<(SessionLoss, Option<String>)>,
    /// The continued session's totals before this run.
    pub totals: Option<StepUsage>,
}

impl Run<'_> {
    /// Puts the session a kept artifact holds back into the job's HOME, at prepare: what
    /// the job's runs so far left for this one to continue.
    pub(super) fn restore_session(&mut self, ws: &Workspace, log: &mut Log) {
        let Some(restore) = self.restore else {
            return;
        };
        let runtime = self.task.payload.task.runtime.mode;
        self.session = match &restore.session {
            None => {
                log.line(
                    self.redactor,
                    "no agent session was kept: the steps begin a new one, told the job's history",
                );
                Known::Lost {
                    loss: SessionLoss::Lost,
                    previous: None,
                }
            }
            Some(kept) if kept.runtime != runtime => Known::Lost {
                loss: SessionLoss::RuntimeChanged,
                previous: Some(kept.session_id.clone()),
            },
            Some(kept) => {
                let path = ws.home.join(&kept.path);
                let written = path
                    .parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|()| std::fs::write(&path, kept.content.as_bytes()));
                match written {
                    Ok(()) => {
                        log.line(
                            self.redactor,
                            &format!("continues the {runtime} session {}", kept.session_id),
                        );
                        Known::Session(Session {
                            runtime,
                            id: kept.session_id.clone(),
                            totals: kept.totals,
                        })
                    }
                    Err(e) => {
                        log.line(
                            self.redactor,
                            &format!("cannot put the agent session back ({e}): a new one begins"),
                        );
                        Known::Lost {
                            loss: SessionLoss::Lost,
                            previous: Some(kept.session_id.clone()),
                        }
                    }
                }
            }
        };
    }

    /// How the next agent run goes about the session.
    pub(super) fn session_plan(&mut self, ws: &Workspace, runtime: RuntimeMode) -> Plan {
        let begin = |loss| Plan {
            arg: SessionArg::begin(runtime),
            loss,
            totals: None,
        };
        match std::mem::take(&mut self.session) {
            Known::Nothing => begin(None),
            Known::Lost { loss, previous } => begin(Some((loss, previous))),
            Known::Session(session) if session.runtime != runtime => {
                begin(Some((SessionLoss::RuntimeChanged, Some(session.id))))
            }
            Known::Session(session) => match session_file(runtime, &ws.home, &session.id) {
                Some(_) => Plan {
                    arg: SessionArg::Continue(session.id),
                    loss: None,
                    totals: session.totals,
                },
                None => begin(Some((SessionLoss::Lost, Some(session.id)))),
            },
        }
    }

    /// Says that the run of `step` (none for an iteration) begins a new session where it
    /// meant to continue one, and gives its prompt the job's history.
    pub(super) async fn session_restarted(
        &self,
        ws: &Workspace,
        step: Option<&ResolvedStep>,
        loss: SessionLoss,
        previous: Option<String>,
        prompt: &str,
    ) -> String {
        let runtime = self.task.payload.task.runtime.mode;
        let event = SessionRestarted {
            step: step.map(Into::into),
            runtime,
            reason: loss,
            previous,
        };
        self.event(
            EventLevel::Warn,
            &format!(
                "a new {runtime} session begins: {}; its prompt tells the job's history",
                loss.reason()
            ),
            &event,
        );
        let steps = self.task.resolved_steps();
        let earlier = match step {
            Some(step) => &steps[..step.index.min(steps.len())],
            None => &steps[..],
        };
        let commits = crate::git::git(
            &ws.repo,
            &["log", "--oneline", "--no-decorate", "-n", "10"],
            &self.publish_budget(true),
        )
        .await
        .unwrap_or_default();
        contract::prompt::with_history(
            earlier,
            steps.len(),
            loss,
            &self.redactor.redact(&commits),
            prompt,
        )
    }

    /// After an agent run: the session it was in (`said`, as its CLI said it, else what it
    /// was asked), kept for the runs after it; a CLI that began another where it was asked
    /// to continue one is said. Answers what the run used, of what its CLI `reported`: a
    /// continued session's totals less those before the run, where the CLI reports totals.
    pub(super) fn session_ran(
        &mut self,
        ws: &Workspace,
        step: Option<&ResolvedStep>,
        plan: &Plan,
        said: Option<String>,
        reported: StepUsage,
    ) -> StepUsage {
        let runtime = self.task.payload.task.runtime.mode;
        let totals = reports_session_totals(runtime).then_some(reported);
        let mut used = reported;
        if let SessionArg::Continue(asked) = &plan.arg
            && said.as_ref().is_none_or(|said| said == asked)
            && let (Some(before), Some(now)) = (&plan.totals, &totals)
        {
            used = now.since(before);
        }
        if let (SessionArg::Continue(asked), Some(said)) = (&plan.arg, &said)
            && asked != said
        {
            let event = SessionRestarted {
                step: step.map(Into::into),
                runtime,
                reason: SessionLoss::NotResumed,
                previous: Some(asked.clone()),
            };
            self.event(
                EventLevel::Warn,
                &format!("the {runtime} CLI began session {said} instead of continuing {asked}"),
                &event,
            );
        }
        // Only an id of the CLI's own shape is kept: it goes on a later command line.
        let Some(id) = said
            .or_else(|| plan.arg.id().map(str::to_string))
            .filter(|id| contract::session::is_session_id(id))
        else {
            return used;
        };
        // A CLI that keeps no file (a stand-in) has no session to continue.
        let Some(file) = session_file(runtime, &ws.home, &id) else {
            return used;
        };
        let session = Session {
            runtime,
            id,
            totals,
        };
        if let Err(why) = self.keep_session(ws, &session, &file) {
            tracing::warn!(%why, "the agent session is not kept");
        }
        self.session = Known::Session(session);
        used
    }

    /// The session file as the artifact a later attempt or round restores, written whole
    /// before it is reported: its upload may still be reading the one before.
    fn keep_session(
        &self,
        ws: &Workspace,
        session: &Session,
        file: &std::path::Path,
    ) -> Result<(), String> {
        // Its size first: the agent can write to it, and a huge one must not be read.
        let size = std::fs::symlink_metadata(file)
            .map_err(|e| format!("{}: {e}", file.display()))?
            .len();
        if size > KEPT_SESSION_BYTES as u64 {
            return Err(format!(
                "{size} bytes, more than the {KEPT_SESSION_BYTES} kept"
            ));
        }
        let bytes = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
        if bytes.len() > KEPT_SESSION_BYTES {
            return Err(format!("it grew past the {KEPT_SESSION_BYTES} bytes kept"));
        }
        let path = file
            .strip_prefix(&ws.home)
            .map_err(|_| "outside the job's HOME".to_string())?;
        let kept = KeptSession {
            runtime: session.runtime,
            session_id: session.id.clone(),
            totals: session.totals,
            path: path.to_string_lossy().into_owned(),
            content: self
                .redactor
                .redact(&String::from_utf8_lossy(&bytes))
                .into_owned(),
        };
        let body = serde_json::to_vec(&kept).map_err(|e| e.to_string())?;
        let target = ws.artifacts.join(AGENT_SESSION);
        let fresh = target.with_extension("json.new");
        if let Some(dir) = target.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::write(&fresh, body)
            .and_then(|()| std::fs::rename(&fresh, &target))
            .map_err(|e| format!("{}: {e}", target.display()))?;
        let _ = self.reports.send(Report::Artifact {
            name: AGENT_SESSION.into(),
            path: target,
        });
        Ok(())
    }
}
