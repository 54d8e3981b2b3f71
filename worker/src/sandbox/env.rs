//! The environment a step runs with: built from an allowlist, never inherited. What a
//! step needs of the worker's environment is its search path, its locale, its terminal
//! and time zone, and the way out to the network (proxies, extra CA certificates); the
//! runtime adds its own endpoint and key, and the operator names the rest
//! (`--agent-env`). Everything else, the publish credential first, stays with the worker.

/// The worker's variables a step always gets (besides every `LC_*`).
const PASSED: [&str; 19] = [
    "PATH",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "USER",
    "LOGNAME",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
];

/// Whether the worker's variable `name` reaches a step without being named.
pub(super) fn passes(name: &str) -> bool {
    PASSED.contains(&name) || name.starts_with("LC_")
}

/// Why `name` may never be passed to a step, even when an operator names it: the
/// publish credential, the database, and the worker's own settings (its token among them).
pub fn refused(name: &str) -> Option<&'static str> {
    match name {
        "GH_TOKEN" | "GITHUB_TOKEN" | "GH_ENTERPRISE_TOKEN" | "GITHUB_ENTERPRISE_TOKEN" => Some(
            "it is the publish credential, which only the publish stage uses, outside the sandbox",
        ),
        "DATABASE_URL" => Some("it reaches the queue's database"),
        "HOME" | "TMPDIR" => Some("the sandbox sets it to the job's own"),
        _ if name.starts_with("STEPWISE_") => Some("it is the worker's own setting"),
        _ if name.is_empty() || name.contains('=') || name.contains('\0') => {
            Some("it is not a variable name")
        }
        _ => None,
    }
}

/// The environment of one step: the worker's variables that pass (`worker_env`), those
/// the operator named (`named`), then `set` (HOME, the runtime's endpoint and key),
/// which win. Sorted by name, each once.
pub(super) fn build(
    worker_env: impl Iterator<Item = (String, String)>,
    named: &[String],
    set: &[(String, String)],
) -> Vec<(String, String)> {
    let mut env: std::collections::BTreeMap<String, String> = worker_env
        .filter(|(name, _)| passes(name) || named.contains(name))
        .collect();
    for (name, value) in set {
        env.insert(name.clone(), value.clone());
    }
    env.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker_env() -> impl Iterator<Item = (String, String)> {
        [
            ("PATH", "/usr/bin"),
            ("LC_ALL", "C.UTF-8"),
            ("GH_TOKEN", "ghp_secret"),
            ("AWS_SECRET_ACCESS_KEY", "aws"),
            ("DATABASE_URL", "postgres://x"),
            ("STEPWISE_WORKER_TOKEN", "sww_x"),
            ("HOME", "/root"),
            ("CODEX_HOME", "/root/.codex"),
            ("NPM_TOKEN", "npm_x"),
            ("HTTPS_PROXY", "http://proxy:3128"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
    }

    #[test]
    fn only_the_allowlist_and_the_named_pass_and_what_is_set_wins() {
        let env = build(
            worker_env(),
            &["NPM_TOKEN".into()],
            &[("HOME".into(), "/w/job/home".into())],
        );
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            ["HOME", "HTTPS_PROXY", "LC_ALL", "NPM_TOKEN", "PATH"]
        );
        assert!(env.contains(&("HOME".into(), "/w/job/home".into())));
    }

    #[test]
    fn the_publish_credential_the_database_and_the_worker_s_settings_can_never_be_named() {
        for name in [
            "GH_TOKEN",
            "GITHUB_TOKEN",
            "DATABASE_URL",
            "STEPWISE_WORKER_TOKEN",
            "HOME",
            "A=B",
            "",
        ] {
            assert!(refused(name).is_some(), "{name}");
        }
        for name in ["NPM_TOKEN", "CARGO_HOME", "OPENAI_ORG"] {
            assert_eq!(refused(name), None, "{name}");
        }
    }
}
