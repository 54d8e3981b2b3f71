//! `--github-rules FILE`: which GitHub deliveries become jobs, and the task each becomes.
//!
//! ```json
//! { "rules": [ {
//!     "repositories": ["octo/hello", "octo/*"],
//!     "label": "stepwise",
//!     "mention": "@stepwise",
//!     "authors": "collaborators",
//!     "job": { "payload": { "task": { "runtime": { "mode": "claude" },
//!                                     "publish": { "mode": "pr" }, "steps": [] } } }
//! } ] }
//! ```
//!
//! A rule is about an issue labeled `label`, or a comment that mentions `mention` (on an
//! issue or a pull request), in one of `repositories`. `authors` says whose mentions are
//! heard: `collaborators` (asked of GitHub's API, the default), `anyone`, or a list of
//! logins. `job` is a job request as `POST /api/queue/jobs` takes it, without the
//! repository and the objective: those come from the delivery. The file is read again
//! at a delivery when it changed; a file that no longer reads keeps the rules it had.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::Deserialize;
use serde_json::Value;

/// Whose mentions a rule hears.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authors {
    /// Those who may push to the repository, as GitHub's API says.
    Collaborators,
    Anyone,
    /// These logins only (GitHub's logins are of any case).
    Logins(Vec<String>),
}

/// One rule, checked.
#[derive(Debug, Clone)]
pub struct Rule {
    pub repositories: Vec<String>,
    pub label: Option<String>,
    pub mention: Option<String>,
    pub authors: Authors,
    /// The job request the delivery completes.
    pub job: Value,
}

#[derive(Debug, Clone, Default)]
pub struct Rules {
    pub rules: Vec<Rule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileShape {
    rules: Vec<RuleShape>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleShape {
    repositories: Vec<String>,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    mention: Option<String>,
    #[serde(default)]
    authors: Option<Value>,
    job: Value,
}

/// What the delivery fills in, refused in a rule's job.
const FILLED: &[&str] = &[
    "/payload/repository",
    "/payload/repo",
    "/payload/task/instructions",
    "/payload/source",
];

impl Rules {
    /// Reads the rules in `text`; the first problem, named by its place in the file.
    pub fn parse(text: &str) -> Result<Rules, String> {
        let shape: FileShape = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let mut rules = Vec::new();
        for (i, rule) in shape.rules.into_iter().enumerate() {
            rules.push(check(rule).map_err(|(field, why)| format!("rules[{i}].{field}: {why}"))?);
        }
        Ok(Rules { rules })
    }

    /// The first rule about a label `label` on an issue of `repository` (`owner/name`).
    pub fn for_label(&self, repository: &str, label: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| {
            r.names(repository)
                && r.label
                    .as_deref()
                    .is_some_and(|l| l.eq_ignore_ascii_case(label.trim()))
        })
    }

    /// The first rule whose mention `body` makes, on `repository`.
    pub fn for_mention(&self, repository: &str, body: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| {
            r.names(repository) && r.mention.as_deref().is_some_and(|m| mentions(body, m))
        })
    }
}

impl Rule {
    /// `repository` (`owner/name`) is one this rule names, or is under an `owner/*` it
    /// names.
    pub fn names(&self, repository: &str) -> bool {
        let Some((owner, _)) = repository.split_once('/') else {
            return false;
        };
        self.repositories.iter().any(|named| {
            named.eq_ignore_ascii_case(repository)
                || named
                    .strip_suffix("/*")
                    .is_some_and(|o| o.eq_ignore_ascii_case(owner))
        })
    }
}

/// `body` holds `mention` as a word of its own: not inside a longer name, an address or
/// a quoted line.
pub fn mentions(body: &str, mention: &str) -> bool {
    mention_at(body, mention).is_some()
}

/// Where in `body` the first mention of `mention` as a word of its own starts.
fn mention_at(body: &str, mention: &str) -> Option<usize> {
    let mention = mention.to_ascii_lowercase();
    let lower = body.to_ascii_lowercase();
    let mut line_start = 0;
    for line in lower.split_inclusive('\n') {
        let start = line_start;
        line_start += line.len();
        if line.trim_start().starts_with('>') {
            continue;
        }
        let found = line.match_indices(&mention).find(|(at, _)| {
            let before = line[..*at].chars().next_back();
            let after = line[at + mention.len()..].chars().next();
            let apart = |c: Option<char>| {
                c.is_none_or(|c| !(c.is_alphanumeric() || matches!(c, '-' | '_' | '/' | '@')))
            };
            apart(before) && apart(after)
        });
        if let Some((at, _)) = found {
            return Some(start + at);
        }
    }
    None
}

/// The text of a comment that mentions `mention`, without that mention.
pub fn without_mention(body: &str, mention: &str) -> String {
    match mention_at(body, mention) {
        Some(at) => format!("{}{}", &body[..at], &body[at + mention.len()..])
            .trim()
            .to_string(),
        None => body.trim().to_string(),
    }
}

fn check(rule: RuleShape) -> Result<Rule, (&'static str, String)> {
    if rule.repositories.is_empty() {
        return Err((
            "repositories",
            "name at least one: owner/name or owner/*".into(),
        ));
    }
    for named in &rule.repositories {
        let parts: Vec<&str> = named.split('/').collect();
        let plain = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        let fine = parts.len() == 2 && plain(parts[0]) && (parts[1] == "*" || plain(parts[1]));
        if !fine {
            return Err((
                "repositories",
                format!("{named:?} is not owner/name or owner/*"),
            ));
        }
    }
    let text = |v: Option<String>,
                field: &'static str|
     -> Result<Option<String>, (&'static str, String)> {
        match v.map(|s| s.trim().to_string()) {
            Some(s) if s.is_empty() || s.chars().count() > 100 || s.contains(char::is_control) => {
                Err((field, "1 to 100 characters, on one line".into()))
            }
            other => Ok(other),
        }
    };
    let label = text(rule.label, "label")?;
    let mention = text(rule.mention, "mention")?;
    if label.is_none() && mention.is_none() {
        return Err(("label", "a rule needs a label, a mention, or both".into()));
    }
    if mention
        .as_deref()
        .is_some_and(|m| m.contains(char::is_whitespace))
    {
        return Err(("mention", "one word, such as @stepwise".into()));
    }
    let authors = match rule.authors {
        None => Authors::Collaborators,
        Some(Value::String(s)) if s == "collaborators" => Authors::Collaborators,
        Some(Value::String(s)) if s == "anyone" => Authors::Anyone,
        Some(Value::Array(list)) => {
            let logins: Option<Vec<String>> = list
                .iter()
                .map(|v| v.as_str().map(|s| s.trim_start_matches('@').to_string()))
                .collect();
            match logins {
                Some(logins) if !logins.is_empty() => Authors::Logins(logins),
                _ => return Err(("authors", "a list of GitHub logins".into())),
            }
        }
        Some(_) => {
            return Err((
                "authors",
                "\"collaborators\", \"anyone\" or a list of GitHub logins".into(),
            ));
        }
    };
    if !rule.job.is_object() {
        return Err((
            "job",
            "a job request, as POST /api/queue/jobs takes it".into(),
        ));
    }
    if let Some(filled) = FILLED.iter().find(|p| rule.job.pointer(p).is_some()) {
        return Err((
            "job",
            format!("leave out {filled}: the delivery gives the repository and the objective"),
        ));
    }
    let mut trial = rule.job.clone();
    fill(&mut trial, "octo/hello", "the objective").map_err(|why| ("job", why.to_string()))?;
    if let Err(errors) = contract::normalize(&trial, &contract::Defaults::default()) {
        let first = errors
            .first()
            .map(|e| format!("{}: {}", e.path, e.message))
            .unwrap_or_default();
        return Err(("job", first));
    }
    Ok(Rule {
        repositories: rule.repositories,
        label,
        mention,
        authors,
        job: rule.job,
    })
}

/// `job` with `repository` and `objective` in their places.
pub fn fill(job: &mut Value, repository: &str, objective: &str) -> Result<(), &'static str> {
    let root = job.as_object_mut().ok_or("not an object")?;
    let payload = root
        .entry("payload")
        .or_insert_with(|| Value::Object(Default::default()))
        .as_object_mut()
        .ok_or("payload is not an object")?;
    payload.insert("repository".into(), Value::String(repository.into()));
    let task = payload
        .entry("task")
        .or_insert_with(|| Value::Object(Default::default()))
        .as_object_mut()
        .ok_or("payload.task is not an object")?;
    task.insert("instructions".into(), Value::String(objective.into()));
    Ok(())
}

/// The rules as last read, with the file's modification time and length then.
type Read = (Option<SystemTime>, u64, Arc<Rules>);

/// The rules file, read again when it changed.
pub struct RulesFile {
    path: PathBuf,
    read: Mutex<Option<Read>>,
}

impl RulesFile {
    /// The file at `path`, read now: a file that does not read is an error here.
    pub fn open(path: &Path) -> Result<RulesFile, String> {
        let file = RulesFile {
            path: path.to_path_buf(),
            read: Mutex::new(None),
        };
        file.current()?;
        Ok(file)
    }

    /// The rules as the file says now; the last that read when it no longer does.
    pub fn current(&self) -> Result<Arc<Rules>, String> {
        let stamp = std::fs::metadata(&self.path)
            .map(|m| (m.modified().ok(), m.len()))
            .map_err(|e| format!("{}: {e}", self.path.display()));
        let mut read = self.read.lock().unwrap_or_else(|e| e.into_inner());
        if let (Ok((modified, len)), Some((was_modified, was_len, rules))) = (&stamp, read.as_ref())
            && modified == was_modified
            && len == was_len
        {
            return Ok(rules.clone());
        }
        let fresh = stamp.and_then(|(modified, len)| {
            let text = std::fs::read_to_string(&self.path)
                .map_err(|e| format!("{}: {e}", self.path.display()))?;
            let rules = Rules::parse(&text).map_err(|e| format!("{}: {e}", self.path.display()))?;
            Ok((modified, len, Arc::new(rules)))
        });
        match (fresh, read.as_ref()) {
            (Ok(fresh), _) => {
                let rules = fresh.2.clone();
                *read = Some(fresh);
                Ok(rules)
            }
            (Err(why), Some((_, _, kept))) => {
                tracing::warn!(%why, "the GitHub rules file no longer reads; the rules it had are kept");
                Ok(kept.clone())
            }
            (Err(why), None) => Err(why),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rules(rule: Value) -> Result<Rules, String> {
        Rules::parse(&json!({ "rules": [rule] }).to_string())
    }

    #[test]
    fn a_rule_names_its_repositories_label_and_mention() {
        let r = rules(json!({"repositories": ["octo/hello", "team/*"], "label": "Stepwise", "mention": "@stepwise", "job": {"payload": {"task": {"runtime": {"mode": "claude"}}}}})).unwrap();
        assert!(r.for_label("octo/hello", "stepwise").is_some());
        assert!(r.for_label("Team/anything", "STEPWISE").is_some());
        assert!(r.for_label("octo/world", "stepwise").is_none());
        assert!(r.for_label("octo/hello", "bug").is_none());
        assert!(
            r.for_mention("octo/hello", "please @stepwise fix it")
                .is_some()
        );
        assert!(r.for_mention("octo/hello", "@Stepwise, fix it").is_some());
        assert!(
            r.for_mention("octo/hello", "mail me at a@stepwise.dev")
                .is_none()
        );
        assert!(r.for_mention("octo/hello", "@stepwise-bot fix").is_none());
        assert!(
            r.for_mention("octo/hello", "> @stepwise fix\nquoted only")
                .is_none()
        );
        assert_eq!(r.rules[0].authors, Authors::Collaborators);
        assert_eq!(
            without_mention("@stepwise  fix the tests", "@stepwise"),
            "fix the tests"
        );
    }

    #[test]
    fn a_rule_that_cannot_make_a_job_is_refused_by_its_place() {
        let job = json!({"payload": {"task": {}}});
        for (rule, says) in [
            (
                json!({"repositories": [], "label": "x", "job": job}),
                "rules[0].repositories",
            ),
            (
                json!({"repositories": ["octo"], "label": "x", "job": job}),
                "rules[0].repositories",
            ),
            (
                json!({"repositories": ["octo/hello"], "job": job}),
                "rules[0].label",
            ),
            (
                json!({"repositories": ["octo/hello"], "mention": "@a b", "job": job}),
                "rules[0].mention",
            ),
            (
                json!({"repositories": ["octo/hello"], "label": "x", "authors": "some", "job": job}),
                "rules[0].authors",
            ),
            (
                json!({"repositories": ["octo/hello"], "label": "x", "job": {"payload": {"repository": "a/b"}}}),
                "/payload/repository",
            ),
            (
                json!({"repositories": ["octo/hello"], "label": "x", "job": {"payload": {"task": {"runtime": {"mode": "cobol"}}}}}),
                "task.runtime",
            ),
            (
                json!({"repositories": ["octo/hello"], "label": "x", "job": job, "extra": 1}),
                "unknown field",
            ),
        ] {
            let why = rules(rule.clone()).unwrap_err();
            assert!(why.contains(says), "{rule}: {why}");
        }
    }

    #[test]
    fn the_readme_s_example_reads() {
        let readme = include_str!("../../../README.md");
        let start = readme.find("```json\n{ \"rules\"").expect("the example") + 8;
        let end = start + readme[start..].find("```").unwrap();
        let rules = Rules::parse(&readme[start..end]).unwrap();
        assert!(rules.for_label("octo-org/any", "stepwise").is_some());
    }

    #[test]
    fn a_file_that_no_longer_reads_keeps_the_rules_it_had() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rules.json");
        let good = json!({"rules": [{"repositories": ["octo/hello"], "label": "go", "job": {"payload": {"task": {}}}}]});
        std::fs::write(&path, good.to_string()).unwrap();
        let file = RulesFile::open(&path).unwrap();
        std::fs::write(&path, "{ not json, and longer than before").unwrap();
        assert_eq!(file.current().unwrap().rules.len(), 1);
        let more = json!({"rules": [{"repositories": ["octo/hello"], "label": "go", "job": {"payload": {"task": {}}}}, {"repositories": ["octo/*"], "mention": "@stepwise", "authors": "anyone", "job": {"payload": {"task": {}}}}]});
        std::fs::write(&path, more.to_string()).unwrap();
        assert_eq!(file.current().unwrap().rules.len(), 2);
        assert!(RulesFile::open(&dir.path().join("absent.json")).is_err());
    }
}
