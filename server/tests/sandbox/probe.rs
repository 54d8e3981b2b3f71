//! A hostile step's probe, shared by the sandbox tests and the real-CLI test: the machine
//! around a worker planted with what a step must not reach (secrets in the worker's
//! environment, a key in the worker user's `~/.ssh`, a file beside the server, another
//! job's workspace), `sandbox-probe.sh` committed to the task's repository, and what the
//! probe reported read back.

#![allow(dead_code)] // each test binary uses its own part of this

use std::path::{Path, PathBuf};

/// The worker's environment: every one of these must stay out of a step.
pub const SECRETS: [(&str, &str); 5] = [
    ("GH_TOKEN", "ghp_probeProbeProbeProbeProbeProbe0001"),
    ("GITHUB_TOKEN", "ghp_probeProbeProbeProbeProbeProbe0002"),
    ("AWS_SECRET_ACCESS_KEY", "probe/aws/secret/key/value/0003"),
    ("DATABASE_URL", "postgres://probe:secret@127.0.0.1:1/probe"),
    ("STEPWISE_PROBE_SETTING", "probe-setting-value-0004"),
];

/// Another job's id, whose workspace is planted beside the probed job's.
pub const OTHER_JOB: &str = "0190a000-0000-7000-8000-00000000beef";

/// What is planted around a worker under `root`.
pub struct Planted {
    /// The worker user's HOME, with `.ssh/id_ed25519` in it.
    pub user_home: PathBuf,
    /// A file beside the server's data dir.
    pub beside: PathBuf,
    /// Where the worker keeps job workspaces (`<workdir>/jobs`).
    pub jobs: PathBuf,
    /// Paths a step must not create; none may exist after the probe.
    pub writes: Vec<PathBuf>,
    /// The name of what the probe writes in /tmp, which must stay the step's own: unique,
    /// as tests run side by side.
    pub tmp_name: String,
}

/// Plants the machine under `root`, for a worker whose workspaces are in `jobs`.
pub fn plant(root: &Path, jobs: &Path) -> Planted {
    let user_home = root.join("user-home");
    std::fs::create_dir_all(user_home.join(".ssh")).unwrap();
    std::fs::write(
        user_home.join(".ssh/id_ed25519"),
        "-----BEGIN OPENSSH PRIVATE KEY-----\nprobe\n-----END OPENSSH PRIVATE KEY-----\n",
    )
    .unwrap();
    let beside = root.join("server-secret.txt");
    std::fs::write(&beside, "the server's own secret\n").unwrap();
    let other = jobs.join(OTHER_JOB).join("repo");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("secret.txt"), "another job's work\n").unwrap();
    let unique = root.file_name().unwrap().to_string_lossy().into_owned();
    Planted {
        writes: vec![
            root.join("written-by-a-step"),
            user_home.join("written-by-a-step"),
            jobs.join(OTHER_JOB).join("written-by-a-step"),
            PathBuf::from(format!("/etc/written-by-a-step{unique}")),
        ],
        tmp_name: format!("/tmp/written-by-the-step{unique}"),
        user_home,
        beside,
        jobs: jobs.to_path_buf(),
    }
}

/// Commits `sandbox-probe.sh` to the main branch of `remote` (made by
/// `worker::testing::remote(root)`, whose working copy is `root/seed`).
pub fn add_probe(root: &Path, remote: &str) {
    let seed = root.join("seed");
    let probe = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sandbox-probe.sh");
    std::fs::copy(probe, seed.join("sandbox-probe.sh")).unwrap();
    worker::testing::run(&seed, &["checkout", "--quiet", "main"]);
    worker::testing::run(&seed, &["add", "."]);
    worker::testing::run(&seed, &["commit", "--quiet", "-m", "the probe"]);
    worker::testing::run(&seed, &["push", "--quiet", remote, "main"]);
}

impl Planted {
    /// The probe's arguments, on a machine where `data` is the server's data dir and
    /// `pids` the server's and worker's processes. The job's own paths are relative (the
    /// checkout) or under `~` (the job's HOME), as its id is not known yet.
    pub fn reaches(&self, data: &Path, pids: &[u32]) -> Vec<String> {
        let mut reaches: Vec<String> = SECRETS.iter().map(|(k, _)| format!("env:{k}")).collect();
        reaches.push("env:STEPWISE_WORKER_TOKEN".into());
        for path in [
            data.join("stepwise.db"),
            self.user_home.join(".ssh/id_ed25519"),
            self.beside.clone(),
            self.jobs.join(OTHER_JOB).join("repo/secret.txt"),
            PathBuf::from("/etc/shadow"),
        ] {
            reaches.push(format!("read:{}", path.display()));
        }
        // The folders on the way to the job's own are there, empty but for that way.
        reaches.push(format!("list:{}:stepwise.db", data.display()));
        reaches.push(format!("list:{}:.ssh", self.user_home.display()));
        reaches.push(format!("list:{}:{OTHER_JOB}", self.jobs.display()));
        for path in &self.writes {
            reaches.push(format!("write:{}", path.display()));
        }
        // The publish stage's git runs here outside the box: no hook, no config of a step's.
        reaches.push("write:.git/hooks/pre-commit".into());
        reaches.push("write:.git/config".into());
        for name in ["stepwise", "postgres"] {
            reaches.push(format!("process:{name}"));
        }
        for pid in pids {
            reaches.push(format!("signal:{pid}"));
        }
        reaches.push("writable:written-by-the-step".into());
        reaches.push("writable:~/written-by-the-step".into());
        reaches.push(format!("writable:{}", self.tmp_name));
        reaches
    }

    /// The probe's command line.
    pub fn command(&self, data: &Path, pids: &[u32]) -> String {
        let quoted: Vec<String> = self
            .reaches(data, pids)
            .iter()
            .map(|r| format!("'{r}'"))
            .collect();
        format!("bash sandbox-probe.sh {}", quoted.join(" "))
    }

    /// Removes what a probe without the box wrote on the host.
    pub fn clean_up(&self) {
        for path in self.writes.iter().chain([&PathBuf::from(&self.tmp_name)]) {
            let _ = std::fs::remove_file(path);
        }
    }

    /// What the probe reported in job `job`'s checkout, a line per reach.
    pub fn result(&self, job: &str) -> String {
        let result = self.jobs.join(job).join("repo/probe-result.txt");
        std::fs::read_to_string(&result)
            .unwrap_or_else(|e| panic!("the probe left no {}: {e}", result.display()))
    }

    /// Checks what the probe wrote in the job's checkout: every reach held, all of them
    /// reported, and nothing written where the step must not write.
    pub fn assert_held(&self, job: &str, data: &Path, pids: &[u32]) {
        let text = self.result(job);
        let leaks: Vec<&str> = text.lines().filter(|l| l.starts_with("LEAK")).collect();
        assert!(
            leaks.is_empty(),
            "the sandbox leaked:\n{}",
            leaks.join("\n")
        );
        let held = text.lines().filter(|l| l.starts_with("held ")).count();
        assert_eq!(held, self.reaches(data, pids).len(), "{text}");
        let ws = self.jobs.join(job);
        for written in ["repo/written-by-the-step", "home/written-by-the-step"] {
            assert!(ws.join(written).is_file(), "no {written}");
        }
        assert!(text.ends_with("probe done\n"), "{text}");
        for path in &self.writes {
            assert!(!path.exists(), "a step wrote {}", path.display());
        }
        assert!(
            !Path::new(&self.tmp_name).exists(),
            "the step's /tmp is the host's"
        );
    }
}
