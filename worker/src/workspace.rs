//! A job's workspace, `{workdir}/{jobId}/`: `repo/` (the checkout), `home/` (the agent's
//! HOME), `skills_active/` (the skills this task uses), `artifacts/` (what is uploaded)
//! and `tmp/` (the sandbox's `/tmp`).
//! Also the prepare stage's file work: skills copied in and linked where each CLI looks.

use std::io;
use std::path::{Path, PathBuf};

use contract::JobId;
use serde::Deserialize;

/// Where each CLI looks for skills, relative to the checkout: codex and gemini read
/// `.agents/skills`, gemini also `.gemini/skills`, Claude Code only `.claude/skills`.
pub const SKILL_LINKS: [&str; 3] = [".agents/skills", ".gemini/skills", ".claude/skills"];

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("skill {id:?} is not installed on this worker: {path} does not exist")]
    MissingSkill { id: String, path: String },
    #[error("skill {id:?} has an unreadable manifest {path}: {reason}")]
    BadManifest {
        id: String,
        path: String,
        reason: String,
    },
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
    #[error(
        "{path} in the checkout leads out of it (a link): skills are linked only inside the checkout, so the task stops; make it a folder of the repository"
    )]
    OutsideCheckout { path: String },
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> WorkspaceError + '_ {
    move |source| WorkspaceError::Io {
        path: path.display().to_string(),
        source,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    pub root: PathBuf,
    pub repo: PathBuf,
    pub home: PathBuf,
    pub skills_active: PathBuf,
    pub artifacts: PathBuf,
}

/// A skill copied into the workspace, with what its manifest says it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveSkill {
    pub id: String,
    pub required_capabilities: Vec<String>,
}

/// `manifest.json` beside a skill's SKILL.md; optional.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Manifest {
    #[serde(default)]
    required_capabilities: Vec<String>,
    #[serde(default)]
    description: Option<String>,
}

/// The manifest of the skill in `dir`; no file is an empty one.
fn read_manifest(id: &str, dir: &Path) -> Result<Manifest, WorkspaceError> {
    let path = dir.join("manifest.json");
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| WorkspaceError::BadManifest {
            id: id.to_string(),
            path: path.display().to_string(),
            reason: e.to_string(),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Manifest::default()),
        Err(e) => Err(io_error(&path)(e)),
    }
}

/// A skill installed in a skills directory, as a task form offers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstalledSkill {
    pub id: String,
    pub description: Option<String>,
    pub required_capabilities: Vec<String>,
}

/// The skills in `skills_dir` (each a folder with a SKILL.md), by id. A missing directory
/// has none; a skill whose manifest cannot be read is left out with a warning, since a
/// task naming it would fail in prepare anyway, saying why.
pub fn installed_skills(skills_dir: &Path) -> Vec<InstalledSkill> {
    let Ok(entries) = std::fs::read_dir(skills_dir) else {
        return Vec::new();
    };
    let mut skills: Vec<InstalledSkill> = entries
        .filter_map(Result::ok)
        .filter(|entry| entry.path().join("SKILL.md").is_file())
        .filter_map(|entry| {
            let id = entry.file_name().to_str()?.to_string();
            match read_manifest(&id, &entry.path()) {
                Ok(manifest) => Some(InstalledSkill {
                    id,
                    description: manifest.description,
                    required_capabilities: manifest.required_capabilities,
                }),
                Err(e) => {
                    tracing::warn!("{e}");
                    None
                }
            }
        })
        .collect();
    skills.sort_by(|a, b| a.id.cmp(&b.id));
    skills
}

impl Workspace {
    /// The layout under `root`, as paths only.
    pub fn at(root: PathBuf) -> Workspace {
        Workspace {
            repo: root.join("repo"),
            home: root.join("home"),
            skills_active: root.join("skills_active"),
            artifacts: root.join("artifacts"),
            root,
        }
    }

    /// The job's `/tmp` in the sandbox: on disk with the rest of the workspace, not in
    /// memory, and gone with it.
    pub fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// Where job `job_id`'s workspace lives under `workdir`.
    pub fn root_of(workdir: &Path, job_id: &JobId) -> PathBuf {
        workdir.join(job_id.to_string())
    }

    /// Creates the workspace directories (`repo/` is left for the clone to create). What an
    /// earlier attempt of the same job left here is removed first: every attempt starts
    /// from a fresh checkout. The paths are absolute whatever `workdir` is: the CLIs run
    /// inside the checkout, where a relative HOME or `-C` would resolve somewhere else
    /// (HOME files inside the repository, where a publish would commit them).
    pub fn create(workdir: &Path, job_id: &JobId) -> Result<Workspace, WorkspaceError> {
        std::fs::create_dir_all(workdir).map_err(io_error(workdir))?;
        let absolute = workdir.canonicalize().map_err(io_error(workdir))?;
        let root = Workspace::root_of(&absolute, job_id);
        if root.exists() {
            std::fs::remove_dir_all(&root).map_err(io_error(&root))?;
        }
        let ws = Workspace::at(root);
        for dir in [&ws.home, &ws.skills_active, &ws.artifacts, &ws.tmp()] {
            std::fs::create_dir_all(dir).map_err(io_error(dir))?;
        }
        Ok(ws)
    }

    /// Copies each skill `ids` names from `skills_dir` into `skills_active/`. A copy, not a
    /// link: an agent that edits a skill's files changes this job's copy, not the worker's.
    pub fn materialize_skills(
        &self,
        skills_dir: &Path,
        ids: &[String],
    ) -> Result<Vec<ActiveSkill>, WorkspaceError> {
        let mut active = Vec::with_capacity(ids.len());
        for id in ids {
            let source = skills_dir.join(id);
            let skill_md = source.join("SKILL.md");
            if !skill_md.is_file() {
                return Err(WorkspaceError::MissingSkill {
                    id: id.clone(),
                    path: skill_md.display().to_string(),
                });
            }
            let manifest = read_manifest(id, &source)?;
            // Whatever a step left under this name (a link out of the workspace, say) goes
            // first: the copy makes its folders anew and never writes through a link.
            let target = self.skills_active.join(id);
            match std::fs::symlink_metadata(&target) {
                Ok(meta) if meta.is_dir() => {
                    std::fs::remove_dir_all(&target).map_err(io_error(&target))?
                }
                Ok(_) => std::fs::remove_file(&target).map_err(io_error(&target))?,
                Err(_) => {}
            }
            copy_dir(&source, &target)?;
            active.push(ActiveSkill {
                id: id.clone(),
                required_capabilities: manifest.required_capabilities,
            });
        }
        Ok(active)
    }

    /// Makes `skills_active/` visible where each CLI looks, inside the checkout, and keeps
    /// the links out of what a publish commits. Where the repository already has such a
    /// directory of its own, each active skill is linked inside it instead, and a skill of
    /// the repository's with the same name is left alone.
    pub fn link_skills(&self) -> Result<(), WorkspaceError> {
        let mut excluded = Vec::new();
        let checkout = self.repo.canonicalize().map_err(io_error(&self.repo))?;
        for link in SKILL_LINKS {
            let at = self.repo.join(link);
            // `.claude` may be a link (the repository's, or a step's): the worker writes
            // here outside the sandbox, so only where it stays inside the checkout.
            let parent = at.parent().unwrap_or(&self.repo);
            if parent.exists()
                && !parent
                    .canonicalize()
                    .is_ok_and(|real| real.starts_with(&checkout))
            {
                return Err(WorkspaceError::OutsideCheckout {
                    path: link.to_string(),
                });
            }
            if at.is_dir() && !at.is_symlink() {
                for entry in
                    std::fs::read_dir(&self.skills_active).map_err(io_error(&self.skills_active))?
                {
                    let entry = entry.map_err(io_error(&self.skills_active))?;
                    let inside = at.join(entry.file_name());
                    if !inside.exists() {
                        symlink(&entry.path(), &inside)?;
                        excluded.push(format!("/{link}/{}", entry.file_name().to_string_lossy()));
                    }
                }
                continue;
            }
            if at.is_symlink() {
                std::fs::remove_file(&at).map_err(io_error(&at))?;
            }
            if let Some(parent) = at.parent() {
                std::fs::create_dir_all(parent).map_err(io_error(parent))?;
            }
            symlink(&self.skills_active, &at)?;
            excluded.push(format!("/{link}"));
        }
        let exclude = self.repo.join(".git/info/exclude");
        if let Some(parent) = exclude.parent() {
            std::fs::create_dir_all(parent).map_err(io_error(parent))?;
        }
        let mut text = std::fs::read_to_string(&exclude).unwrap_or_default();
        for line in excluded {
            if !text.lines().any(|l| l == line) {
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&line);
                text.push('\n');
            }
        }
        std::fs::write(&exclude, text).map_err(io_error(&exclude))
    }
}

fn symlink(target: &Path, link: &Path) -> Result<(), WorkspaceError> {
    std::os::unix::fs::symlink(target, link).map_err(io_error(link))
}

/// Copies a directory tree; symlinks inside a skill are not followed (a skill must not
/// smuggle in files from elsewhere on the worker), so they are skipped.
fn copy_dir(from: &Path, to: &Path) -> Result<(), WorkspaceError> {
    std::fs::create_dir_all(to).map_err(io_error(to))?;
    for entry in std::fs::read_dir(from).map_err(io_error(from))? {
        let entry = entry.map_err(io_error(from))?;
        let kind = entry.file_type().map_err(io_error(&entry.path()))?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).map_err(io_error(&target))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> JobId {
        "0190a000-0000-7000-8000-0000000000b1".parse().unwrap()
    }

    fn skill(dir: &Path, id: &str, manifest: Option<&str>) {
        let at = dir.join(id);
        std::fs::create_dir_all(at.join("scripts")).unwrap();
        std::fs::write(at.join("SKILL.md"), format!("# {id}\n")).unwrap();
        std::fs::write(at.join("scripts/run.sh"), "echo hi\n").unwrap();
        if let Some(m) = manifest {
            std::fs::write(at.join("manifest.json"), m).unwrap();
        }
    }

    #[test]
    fn links_a_step_or_the_repository_planted_never_lead_the_worker_s_writes_out() {
        let tmp = tempfile::tempdir().unwrap();
        let skills = tmp.path().join("skills");
        skill(&skills, "lint", None);
        let outside = tmp.path().join("worker-user");
        std::fs::create_dir_all(outside.join(".claude")).unwrap();
        let ws = Workspace::create(&tmp.path().join("work"), &job()).unwrap();
        std::fs::create_dir_all(ws.repo.join(".git/info")).unwrap();
        // A step made the skill's folder a link out of the workspace.
        std::os::unix::fs::symlink(&outside, ws.skills_active.join("lint")).unwrap();
        ws.materialize_skills(&skills, &["lint".to_string()])
            .unwrap();
        assert!(
            !outside.join("SKILL.md").exists(),
            "copied through the link"
        );
        assert!(ws.skills_active.join("lint/SKILL.md").is_file());
        // The checkout's .claude leads to the worker user's own.
        std::os::unix::fs::symlink(outside.join(".claude"), ws.repo.join(".claude")).unwrap();
        let refused = ws.link_skills().unwrap_err().to_string();
        assert!(
            refused.contains(".claude/skills in the checkout leads out"),
            "{refused}"
        );
        assert_eq!(
            std::fs::read_dir(outside.join(".claude")).unwrap().count(),
            0
        );
    }

    #[test]
    fn the_layout_is_created_under_the_job_id() {
        let tmp = tempfile::tempdir().unwrap();
        let id = job();
        let ws = Workspace::create(tmp.path(), &id).unwrap();
        assert_eq!(ws.root, tmp.path().join(id.to_string()));
        for dir in [&ws.home, &ws.skills_active, &ws.artifacts] {
            assert!(dir.is_dir(), "{}", dir.display());
        }
        assert_eq!(ws.repo, ws.root.join("repo"));
        // A second attempt of the job starts clean.
        std::fs::create_dir_all(ws.repo.join("left-over")).unwrap();
        let again = Workspace::create(tmp.path(), &id).unwrap();
        assert!(!again.repo.exists());
        assert!(again.home.is_dir());
    }

    #[test]
    fn a_relative_workdir_still_gives_absolute_paths() {
        let tmp = tempfile::tempdir().unwrap();
        // The temp dir, named from the current directory up: `../../tmp/…`.
        let cwd = std::env::current_dir().unwrap();
        let mut relative = PathBuf::new();
        for _ in cwd.components().skip(1) {
            relative.push("..");
        }
        relative.push(tmp.path().strip_prefix("/").unwrap());
        let ws = Workspace::create(&relative, &job()).unwrap();
        for path in [&ws.root, &ws.repo, &ws.home, &ws.artifacts] {
            assert!(path.is_absolute(), "{}", path.display());
        }
        assert_eq!(
            ws.home,
            tmp.path()
                .canonicalize()
                .unwrap()
                .join(format!("{}/home", job()))
        );
    }

    #[test]
    fn skills_are_copied_with_their_manifest_requirements() {
        let tmp = tempfile::tempdir().unwrap();
        let skills = tmp.path().join("skills");
        skill(
            &skills,
            "speckit",
            Some(r#"{"requiredCapabilities":["docker"]}"#),
        );
        skill(&skills, "plain", None);
        let ws = Workspace::create(&tmp.path().join("work"), &job()).unwrap();
        let active = ws
            .materialize_skills(&skills, &["speckit".into(), "plain".into()])
            .unwrap();
        assert_eq!(
            active,
            [
                ActiveSkill {
                    id: "speckit".into(),
                    required_capabilities: vec!["docker".into()]
                },
                ActiveSkill {
                    id: "plain".into(),
                    required_capabilities: vec![]
                },
            ]
        );
        assert!(ws.skills_active.join("speckit/scripts/run.sh").is_file());
        assert!(!ws.skills_active.join("speckit").is_symlink());
    }

    #[test]
    fn installed_skills_are_listed_by_id_with_their_manifest() {
        let tmp = tempfile::tempdir().unwrap();
        let skills = tmp.path().join("skills");
        skill(
            &skills,
            "speckit",
            Some(r#"{"requiredCapabilities":["docker"],"description":"Specs first"}"#),
        );
        skill(&skills, "lint", None);
        skill(&skills, "broken", Some("{"));
        std::fs::create_dir_all(skills.join("not-a-skill")).unwrap();
        let listed = installed_skills(&skills);
        assert_eq!(
            listed,
            [
                InstalledSkill {
                    id: "lint".into(),
                    description: None,
                    required_capabilities: vec![]
                },
                InstalledSkill {
                    id: "speckit".into(),
                    description: Some("Specs first".into()),
                    required_capabilities: vec!["docker".into()]
                },
            ]
        );
        assert!(installed_skills(&tmp.path().join("nowhere")).is_empty());
    }

    #[test]
    fn a_missing_skill_or_a_bad_manifest_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let skills = tmp.path().join("skills");
        skill(&skills, "broken", Some(r#"{"requiredCapabilites":["x"]}"#));
        let ws = Workspace::create(&tmp.path().join("work"), &job()).unwrap();
        let missing = ws
            .materialize_skills(&skills, &["nope".into()])
            .unwrap_err();
        assert!(
            missing
                .to_string()
                .contains("skill \"nope\" is not installed"),
            "{missing}"
        );
        let bad = ws
            .materialize_skills(&skills, &["broken".into()])
            .unwrap_err();
        assert!(bad.to_string().contains("requiredCapabilites"), "{bad}");
    }

    #[test]
    fn skills_are_linked_where_every_cli_looks_and_kept_out_of_commits() {
        let tmp = tempfile::tempdir().unwrap();
        let skills = tmp.path().join("skills");
        skill(&skills, "speckit", None);
        let ws = Workspace::create(&tmp.path().join("work"), &job()).unwrap();
        std::fs::create_dir_all(ws.repo.join(".git/info")).unwrap();
        // The repository ships a .claude/skills of its own, with a skill of the same name.
        std::fs::create_dir_all(ws.repo.join(".claude/skills/speckit")).unwrap();
        std::fs::create_dir_all(ws.repo.join(".claude/skills/other")).unwrap();
        ws.materialize_skills(&skills, &["speckit".into()]).unwrap();
        ws.link_skills().unwrap();
        ws.link_skills().unwrap(); // idempotent
        for link in [".agents/skills", ".gemini/skills"] {
            assert!(ws.repo.join(link).is_symlink());
            assert!(ws.repo.join(link).join("speckit/SKILL.md").is_file());
        }
        assert!(!ws.repo.join(".claude/skills").is_symlink());
        assert!(
            !ws.repo.join(".claude/skills/speckit").is_symlink(),
            "the repository's own wins"
        );
        let exclude = std::fs::read_to_string(ws.repo.join(".git/info/exclude")).unwrap();
        let lines: Vec<&str> = exclude.lines().collect();
        assert_eq!(lines, ["/.agents/skills", "/.gemini/skills"]);
    }

    #[test]
    fn with_no_skills_the_links_still_exist() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = Workspace::create(tmp.path(), &job()).unwrap();
        std::fs::create_dir_all(&ws.repo).unwrap();
        ws.link_skills().unwrap();
        for link in SKILL_LINKS {
            assert!(ws.repo.join(link).is_symlink(), "{link}");
        }
    }
}
