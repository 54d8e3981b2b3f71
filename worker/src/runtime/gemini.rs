//! `gemini -p`: the prompt as its argument, in the process's working directory. It has no
//! effort flag (`--effort` is an unknown argument, exit 1): thinking is set per model in
//! `.gemini/settings.json` under the job's HOME. `--approval-mode yolo` runs tools without
//! asking, and `--skip-trust` spares the exit 55 of an untrusted directory.

use serde_json::{Value, json};

use super::{Invocation, Progress, StepRun, text};

/// Gemini 2.5 takes a token budget for thinking; these follow its low / medium / high.
const THINKING_BUDGETS: [(&str, u32); 3] = [("low", 1024), ("medium", 8192), ("high", 24576)];

pub(super) fn build(run: &StepRun<'_>, invocation: &mut Invocation) {
    let mut args: Vec<String> = vec!["-p".into(), run.prompt.to_string()];
    if let Some(model) = &run.runtime.model {
        args.extend(["-m".into(), model.clone()]);
    }
    args.extend([
        "--approval-mode".into(),
        "yolo".into(),
        "--output-format".into(),
        "stream-json".into(),
        "--skip-trust".into(),
    ]);
    invocation.args = args;
    if let Some(effort) = &run.runtime.effort {
        match thinking(run.runtime.model.as_deref(), effort) {
            Ok((config, note)) => {
                let settings = json!({
                    "modelConfigs": { "customOverrides": [{
                        "match": { "model": run.runtime.model },
                        "modelConfig": { "generateContentConfig": { "thinkingConfig": config } },
                    }]},
                });
                invocation.files.push((
                    run.home.join(".gemini").join("settings.json"),
                    format!("{settings:#}\n"),
                ));
                invocation.notes.extend(note);
            }
            Err(note) => invocation.notes.push(note),
        }
    }
}

/// The thinking config for `effort` on `model`, with a note when the effort is only
/// approximated; or why it cannot be set.
fn thinking(model: Option<&str>, effort: &str) -> Result<(Value, Option<String>), String> {
    let Some(model) = model else {
        return Err(format!(
            "effort {effort} not applied: gemini sets thinking per model, and the task names no model"
        ));
    };
    if model.starts_with("gemini-3") {
        // Gemini 3 has two thinking levels.
        let (level, note) = match effort {
            "low" => ("LOW", None),
            "high" => ("HIGH", None),
            _ => (
                "HIGH",
                Some(format!(
                    "{model} thinks at LOW or HIGH: effort {effort} runs as HIGH"
                )),
            ),
        };
        return Ok((json!({ "thinkingLevel": level }), note));
    }
    let budget = THINKING_BUDGETS.iter().find(|(e, _)| *e == effort);
    if let Some((_, budget)) = budget.filter(|_| model.starts_with("gemini-2.5")) {
        return Ok((json!({ "thinkingBudget": budget }), None));
    }
    Err(format!(
        "effort {effort} not applied: no thinking setting is known for model {model}"
    ))
}

pub(super) fn parse(event: &Value) -> Vec<Progress> {
    match event
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
    {
        "message" if event.get("role").and_then(Value::as_str) == Some("assistant") => {
            text(event, "content")
                .map(Progress::Message)
                .into_iter()
                .collect()
        }
        "tool_use" => text(event, "tool_name")
            .map(Progress::Action)
            .into_iter()
            .collect(),
        "error" => text(event, "message")
            .map(Progress::Error)
            .into_iter()
            .collect(),
        "result" => vec![Progress::Finished {
            ok: event.get("status").and_then(Value::as_str) == Some("success"),
            summary: event.get("error").and_then(|e| text(e, "message")),
        }],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use contract::RuntimeMode;

    use super::super::{build_for, parse_line, settings};
    use super::*;

    #[test]
    fn argv_never_carries_an_effort_flag() {
        let built = build_for(&settings(
            RuntimeMode::Gemini,
            Some("gemini-3-pro-preview"),
            Some("high"),
        ));
        assert_eq!(built.program.to_str(), Some("gemini"));
        assert_eq!(
            built.args,
            [
                "-p",
                "Fix the build",
                "-m",
                "gemini-3-pro-preview",
                "--approval-mode",
                "yolo",
                "--output-format",
                "stream-json",
                "--skip-trust",
            ]
        );
        assert!(!built.args.iter().any(|a| a.contains("effort") || a == "-y"));
    }

    #[test]
    fn effort_goes_to_the_jobs_settings_for_the_named_model() {
        let built = build_for(&settings(
            RuntimeMode::Gemini,
            Some("gemini-3-pro-preview"),
            Some("low"),
        ));
        let [(path, body)] = built.files.as_slice() else {
            panic!("one settings file: {:?}", built.files);
        };
        assert_eq!(path, &PathBuf::from("/w/job/home/.gemini/settings.json"));
        let written: Value = serde_json::from_str(body).unwrap();
        let overrides = &written["modelConfigs"]["customOverrides"][0];
        assert_eq!(overrides["match"]["model"], "gemini-3-pro-preview");
        assert_eq!(
            overrides["modelConfig"]["generateContentConfig"]["thinkingConfig"],
            json!({ "thinkingLevel": "LOW" })
        );
        assert!(built.notes.is_empty());

        let older = build_for(&settings(
            RuntimeMode::Gemini,
            Some("gemini-2.5-flash"),
            Some("medium"),
        ));
        assert!(
            older.files[0].1.contains("\"thinkingBudget\": 8192"),
            "{}",
            older.files[0].1
        );
    }

    #[test]
    fn an_effort_that_cannot_be_applied_is_said_not_dropped() {
        let no_model = build_for(&settings(RuntimeMode::Gemini, None, Some("high")));
        assert!(no_model.files.is_empty());
        assert!(
            no_model.notes[0].contains("names no model"),
            "{:?}",
            no_model.notes
        );
        let unknown = build_for(&settings(RuntimeMode::Gemini, Some("pro"), Some("high")));
        assert!(
            unknown.notes[0].contains("model pro"),
            "{:?}",
            unknown.notes
        );
        let medium = build_for(&settings(
            RuntimeMode::Gemini,
            Some("gemini-3-flash"),
            Some("medium"),
        ));
        assert!(medium.files[0].1.contains("HIGH"));
        assert!(
            medium.notes[0].contains("runs as HIGH"),
            "{:?}",
            medium.notes
        );
    }

    #[test]
    fn stream_json_becomes_progress() {
        let lines = [
            r#"{"type":"init","session_id":"s"}"#,
            r#"{"type":"message","role":"user","content":"Fix the build"}"#,
            r#"{"type":"message","role":"assistant","content":"Looking.","delta":true}"#,
            r#"{"type":"tool_use","tool_name":"run_shell_command","tool_id":"t1"}"#,
            r#"{"type":"result","status":"success","stats":{}}"#,
        ];
        let got: Vec<Progress> = lines
            .iter()
            .flat_map(|l| parse_line(RuntimeMode::Gemini, l))
            .collect();
        assert_eq!(
            got,
            [
                Progress::Message("Looking.".into()),
                Progress::Action("run_shell_command".into()),
                Progress::Finished {
                    ok: true,
                    summary: None
                },
            ]
        );
        assert_eq!(
            parse_line(
                RuntimeMode::Gemini,
                r#"{"type":"result","status":"error","error":{"message":"quota exceeded"}}"#
            ),
            [Progress::Finished {
                ok: false,
                summary: Some("quota exceeded".into())
            }]
        );
    }
}
