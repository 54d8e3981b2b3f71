use contract::{ChecklistItem, FieldError, parse_checklist, render_checklist};
use serde_json::json;

use crate::common::{ok, task_with};

fn item(checked: bool, text: &str) -> ChecklistItem {
    ChecklistItem {
        checked,
        text: text.into(),
    }
}

#[test]
fn parse_accepts_dash_and_star_bullets_and_both_checks() {
    let text = "# Plan\n- [ ] one\r\n* [ ] two\n\n- [x] three\n  * [X] four  \n";
    assert_eq!(
        parse_checklist(text),
        Ok(vec![
            item(false, "one"),
            item(false, "two"),
            item(true, "three"),
            item(true, "four")
        ])
    );
}

#[test]
fn parse_reports_every_stray_line_by_number() {
    let text = "- [ ] ok\nplain text\n- [] missing space\n-[ ] no space\n+ [ ] plus\n- [ ]glued";
    let errors = parse_checklist(text).unwrap_err();
    let lines: Vec<_> = errors
        .iter()
        .map(|e| e.message.split(':').next().unwrap().to_string())
        .collect();
    assert_eq!(lines, ["line 2", "line 3", "line 4", "line 5", "line 6"]);
    assert!(errors.iter().all(|e| e.path.is_empty()));
    assert_eq!(
        errors[0],
        FieldError::new(
            "",
            "line 2: not a checklist item; write each step as `- [ ] text` (blank lines and # headings are ignored)"
        )
    );
}

#[test]
fn render_marks_the_first_done_steps() {
    let raw = task_with(
        "steps",
        json!([
            { "title": "Research", "instructions": "Look things up" },
            { "instructions": "Send the list\nwith a greeting" },
            { "id": "deploy", "skill": { "id": "ship" } }
        ]),
    );
    let steps = ok(&raw).resolved_steps();
    assert_eq!(
        render_checklist(&steps, 1),
        "- [x] Research\n- [ ] Send the list\n- [ ] deploy"
    );
    assert_eq!(
        render_checklist(&steps, 0),
        "- [ ] Research\n- [ ] Send the list\n- [ ] deploy"
    );
    assert_eq!(
        render_checklist(&steps, 9),
        "- [x] Research\n- [x] Send the list\n- [x] deploy"
    );
    let stored = ok(&raw).payload.task.steps;
    assert_eq!(render_checklist(&stored, 3), render_checklist(&steps, 3));
}

#[test]
fn render_then_parse_round_trips_single_line_steps() {
    let raw = task_with(
        "steps",
        json!("- [ ] Research kid-friendly places\n- [ ] Send the list on WhatsApp"),
    );
    let steps = ok(&raw).resolved_steps();
    assert_eq!(
        parse_checklist(&render_checklist(&steps, 1)),
        Ok(vec![
            item(true, "Research kid-friendly places"),
            item(false, "Send the list on WhatsApp")
        ])
    );
}
