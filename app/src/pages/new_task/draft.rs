//! The draft: the form's fields as typed, and the job request they make. An empty text
//! means "not given", so the server's default applies (an empty runtime or publish mode
//! too); the request carries only what was given, and the contract judges exactly that.

use std::str::FromStr;

use contract::{GitSettings, JobRequest, PublishInput, RuntimeInput, SkillSelection, StepInput};
use serde_json::Value;

use crate::settings::SkillInfo;

/// A step's skill choice that sends no `skill`: the step inherits the task's.
pub const INHERIT: &str = "";

/// One step of the draft; `key` stays with the step when others move or go.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepDraft {
    pub key: u32,
    pub title: String,
    pub instructions: String,
    /// [`INHERIT`], `auto` or a skill id.
    pub skill: String,
}

impl StepDraft {
    fn is_blank(&self) -> bool {
        self.title.trim().is_empty() && self.instructions.trim().is_empty() && self.skill == INHERIT
    }
}

/// Declares the task-level fields once: each one's name, where the draft keeps it, and
/// the path the contract reports its errors at.
macro_rules! task_fields {
    ($($field:ident: $slot:ident at $path:literal,)*) => {
        /// The task-level fields as typed.
        #[derive(Clone, Debug, Default, PartialEq)]
        pub struct TaskDraft {
            $(pub $slot: String,)*
        }

        /// A task-level field of the form.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum TaskField {
            $($field,)*
        }

        impl TaskField {
            /// Where the contract reports this field's errors (and what typing in it
            /// marks as touched).
            pub fn path(self) -> &'static str {
                match self {
                    $(TaskField::$field => $path,)*
                }
            }

            pub fn get(self, draft: &TaskDraft) -> &String {
                match self {
                    $(TaskField::$field => &draft.$slot,)*
                }
            }

            fn slot(self, draft: &mut TaskDraft) -> &mut String {
                match self {
                    $(TaskField::$field => &mut draft.$slot,)*
                }
            }
        }
    };
}

task_fields! {
    Repository: repository at "repository",
    Objective: objective at "task.instructions",
    Runtime: runtime at "task.runtime.mode",
    Model: model at "task.runtime.model",
    Effort: effort at "task.runtime.effort",
    Skill: skill at "task.skill",
    StartingBranch: starting_branch at "task.git.startingBranch",
    NewBranch: new_branch at "task.git.newBranch",
    Publish: publish at "task.publish.mode",
    PrBaseBranch: pr_base_branch at "task.publish.prBaseBranch",
    CommitMessage: commit_message at "task.publish.commitMessage",
    PrTitle: pr_title at "task.publish.prTitle",
    PrBody: pr_body at "task.publish.prBody",
    Approval: approval at "task.publish.approval",
    CheckCommand: check_command at "task.completion.command",
    OutputPattern: output_pattern at "task.completion.outputPattern",
    CheckTimeout: check_timeout at "task.completion.timeoutSeconds",
    MaxIterations: max_iterations at "task.completion.maxIterations",
    Criteria: criteria at "task.completion.criteria",
    DependsOn: depends_on at "dependsOn",
}

impl TaskField {
    pub fn set(self, draft: &mut TaskDraft, value: String) {
        // An effort of the old runtime may not exist on the new one.
        if self == TaskField::Runtime {
            draft.effort.clear();
        }
        *self.slot(draft) = value;
    }
}

/// The text when it is not blank, trimmed; a blank field is left out.
fn given(text: &str) -> Option<String> {
    Some(text.trim().to_string()).filter(|t| !t.is_empty())
}

/// A choice's value. The form offers only names the contract knows, and blank for the
/// server's default, so nothing else is ever dropped here.
fn chosen<T: FromStr>(value: &str) -> Option<T> {
    value.trim().parse().ok()
}

/// The skill `id`, with its manifest's capabilities so the server derives them.
fn skill(id: &str, skills: &[SkillInfo]) -> SkillSelection {
    let mut skill = SkillSelection::named(id);
    if let Some(known) = skills.iter().find(|s| s.id == id) {
        skill.required_capabilities = known.required_capabilities.clone();
    }
    skill
}

/// The draft as the request a client would submit.
fn draft_request(task: &TaskDraft, steps: &[StepDraft], skills: &[SkillInfo]) -> JobRequest {
    let mut request = JobRequest {
        depends_on: task
            .depends_on
            .split([',', ' ', '\n'])
            .filter(|id| !id.is_empty())
            .map(str::to_string)
            .collect(),
        ..JobRequest::default()
    };
    request.payload.repository = task.repository.clone();
    let spec = &mut request.payload.task;
    spec.instructions = task.objective.clone();
    spec.skill = given(&task.skill).map(|id| skill(&id, skills));
    spec.runtime = RuntimeInput {
        mode: chosen(&task.runtime),
        model: given(&task.model),
        effort: given(&task.effort),
    };
    spec.git = GitSettings {
        starting_branch: given(&task.starting_branch),
        new_branch: given(&task.new_branch),
    };
    spec.publish = PublishInput {
        mode: chosen(&task.publish),
        pr_base_branch: given(&task.pr_base_branch),
        commit_message: given(&task.commit_message),
        pr_title: given(&task.pr_title),
        pr_body: given(&task.pr_body),
        approval: given(&task.approval),
    };
    // A blank step is sent as one, so the contract can refuse it.
    spec.steps = steps
        .iter()
        .map(|s| StepInput {
            id: None,
            title: given(&s.title),
            instructions: given(&s.instructions),
            skill: (s.skill != INHERIT).then(|| skill(&s.skill, skills)),
        })
        .collect();
    request
}

/// The draft's request as JSON. A request is plain data, so it always serializes; the
/// form reads it through JSON alone, which keeps one serializer in the bundle.
pub fn draft_json(task: &TaskDraft, steps: &[StepDraft], skills: &[SkillInfo]) -> Value {
    let mut json = serde_json::to_value(draft_request(task, steps, skills)).unwrap_or_default();
    if let Some(completion) = completion_json(task) {
        json["payload"]["task"]["completion"] = completion;
    }
    json
}

/// The completion fields given, as JSON: a number typed in a number field is sent as a
/// number, anything else as typed, so the contract names the field that is not one.
fn completion_json(task: &TaskDraft) -> Option<Value> {
    let mut completion = serde_json::Map::new();
    let texts = [
        ("criteria", &task.criteria),
        ("command", &task.check_command),
        ("outputPattern", &task.output_pattern),
    ];
    for (key, text) in texts {
        if let Some(text) = given(text) {
            completion.insert(key.into(), Value::String(text));
        }
    }
    for (key, text) in [
        ("maxIterations", &task.max_iterations),
        ("timeoutSeconds", &task.check_timeout),
    ] {
        if let Some(text) = given(text) {
            let value = text.parse::<i64>().map_or(Value::String(text), Value::from);
            completion.insert(key.into(), value);
        }
    }
    (!completion.is_empty()).then_some(Value::Object(completion))
}

/// The `(value, label)` choices of a skill: `first`, then every skill the server knows.
pub fn skill_choices(first: &[(&str, &str)], skills: &[SkillInfo]) -> Vec<(String, String)> {
    let first = first.iter().map(|(v, l)| (v.to_string(), l.to_string()));
    let known = skills.iter().map(|s| {
        let label = match &s.description {
            Some(d) => format!("{} — {d}", s.id),
            None => s.id.clone(),
        };
        (s.id.clone(), label)
    });
    first.chain(known).collect()
}

/// Turns pasted `- [ ]` lines into steps, after the steps that have something in them
/// (a blank first step is replaced, not kept).
pub fn add_checklist(
    steps: &mut Vec<StepDraft>,
    text: &str,
    next_key: &mut u32,
) -> Result<usize, Vec<String>> {
    let items = contract::parse_checklist(text)
        .map_err(|errors| errors.into_iter().map(|e| e.message).collect::<Vec<_>>())?;
    if items.is_empty() {
        return Err(vec![
            "no `- [ ] step` lines found; paste one line per step".into(),
        ]);
    }
    steps.retain(|s| !s.is_blank());
    let added = items.len();
    for item in items {
        steps.push(StepDraft {
            key: *next_key,
            instructions: item.text,
            ..StepDraft::default()
        });
        *next_key += 1;
    }
    Ok(added)
}

#[cfg(test)]
mod tests {
    use contract::Defaults;
    use serde_json::json;

    use super::*;

    fn step(key: u32, instructions: &str) -> StepDraft {
        StepDraft {
            key,
            instructions: instructions.into(),
            ..StepDraft::default()
        }
    }

    #[test]
    fn a_blank_step_is_sent_as_one_so_the_contract_can_refuse_it() {
        let steps = [step(0, "  "), step(1, " a ")];
        let json = draft_json(&TaskDraft::default(), &steps, &[]);
        assert_eq!(
            json["payload"]["task"]["steps"],
            json!([{}, { "instructions": "a" }])
        );
    }

    #[test]
    fn only_given_fields_are_sent_so_the_server_defaults_apply() {
        let task = TaskDraft {
            repository: "octo/hello".into(),
            objective: "Do it".into(),
            ..TaskDraft::default()
        };
        let json = draft_json(&task, &[], &[]);
        assert_eq!(
            json,
            json!({ "type": "task", "payload": { "repository": "octo/hello",
                "task": { "instructions": "Do it", "steps": [] } } })
        );
    }

    #[test]
    fn every_field_and_a_known_skill_s_capabilities_reach_the_payload() {
        let skills = [SkillInfo {
            id: "speckit".into(),
            description: None,
            required_capabilities: vec!["docker".into()],
        }];
        let task = TaskDraft {
            repository: "octo/hello".into(),
            objective: "Ship".into(),
            runtime: "claude".into(),
            model: "opus".into(),
            effort: "high".into(),
            skill: "speckit".into(),
            starting_branch: "main".into(),
            new_branch: "feature/x".into(),
            publish: "branch".into(),
            pr_base_branch: "develop".into(),
            commit_message: "Ship it".into(),
            pr_title: "Ship".into(),
            pr_body: "Body".into(),
            approval: "required".into(),
            check_command: "make test".into(),
            output_pattern: "ok".into(),
            check_timeout: "60".into(),
            max_iterations: "2".into(),
            criteria: "green".into(),
            depends_on:
                "0190a000-0000-7000-8000-000000000001, 0190a000-0000-7000-8000-000000000002\n"
                    .into(),
        };
        let steps = [
            StepDraft {
                key: 3,
                title: "Spec".into(),
                skill: "speckit".into(),
                ..StepDraft::default()
            },
            StepDraft {
                key: 1,
                skill: "auto".into(),
                instructions: "Code".into(),
                ..StepDraft::default()
            },
        ];
        let json = draft_json(&task, &steps, &skills);
        assert_eq!(
            json["dependsOn"],
            json!([
                "0190a000-0000-7000-8000-000000000001",
                "0190a000-0000-7000-8000-000000000002"
            ])
        );
        let spec = &json["payload"]["task"];
        assert_eq!(
            spec["runtime"],
            json!({ "mode": "claude", "model": "opus", "effort": "high" })
        );
        assert_eq!(
            spec["skill"],
            json!({ "id": "speckit", "requiredCapabilities": ["docker"] })
        );
        assert_eq!(
            spec["git"],
            json!({ "startingBranch": "main", "newBranch": "feature/x" })
        );
        assert_eq!(
            spec["publish"],
            json!({ "mode": "branch", "prBaseBranch": "develop", "commitMessage": "Ship it", "prTitle": "Ship", "prBody": "Body", "approval": "required" })
        );
        assert_eq!(
            spec["steps"],
            json!([
                { "title": "Spec", "skill": { "id": "speckit", "requiredCapabilities": ["docker"] } },
                { "instructions": "Code", "skill": { "id": "auto" } },
            ])
        );
        assert_eq!(
            spec["completion"],
            json!({ "criteria": "green", "command": "make test", "outputPattern": "ok",
                    "maxIterations": 2, "timeoutSeconds": 60 })
        );
        let task = contract::normalize(&json, &Defaults::default()).unwrap();
        assert!(
            task.payload
                .required_capabilities
                .contains(&"docker".to_string())
        );
    }

    #[test]
    fn a_pasted_checklist_replaces_blank_steps_and_keeps_the_others() {
        let mut steps = vec![step(0, ""), step(1, "keep me")];
        let mut next = 2;
        let added = add_checklist(&mut steps, "## Steps\n- [ ] one\n- [x] two\n", &mut next);
        assert_eq!(added, Ok(2));
        let texts: Vec<(u32, &str)> = steps
            .iter()
            .map(|s| (s.key, s.instructions.as_str()))
            .collect();
        assert_eq!(texts, [(1, "keep me"), (2, "one"), (3, "two")]);
        assert_eq!(next, 4);
    }

    #[test]
    fn a_pasted_checklist_with_a_stray_line_names_the_line_and_adds_nothing() {
        let mut steps = vec![step(0, "")];
        let mut next = 1;
        let errors = add_checklist(&mut steps, "- [ ] one\nsend it\n", &mut next).unwrap_err();
        assert!(errors[0].starts_with("line 2:"), "{errors:?}");
        assert_eq!(steps.len(), 1);
        assert!(add_checklist(&mut steps, "\n\n", &mut next).is_err());
    }

    #[test]
    fn the_completion_fields_are_sent_as_given_and_judged_by_the_contract() {
        let mut task = TaskDraft {
            repository: "octo/hello".into(),
            objective: "Fix the tests".into(),
            ..TaskDraft::default()
        };
        let steps = [step(0, "Fix them")];
        let json = draft_json(&task, &steps, &[]);
        assert!(
            json["payload"]["task"].get("completion").is_none(),
            "{json}"
        );

        task.check_command = " cargo test ".into();
        task.max_iterations = "3".into();
        task.check_timeout = "soon".into();
        let json = draft_json(&task, &steps, &[]);
        assert_eq!(
            json["payload"]["task"]["completion"],
            json!({ "command": "cargo test", "maxIterations": 3, "timeoutSeconds": "soon" })
        );
        // What is not a number reaches the contract as typed, which names the field.
        let errors = contract::normalize(&json, &Defaults::default()).unwrap_err();
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["task.completion.timeoutSeconds"]);
    }
}
