//! How a task's token reaches git: through the environment, to a credential helper set for
//! the remote's own scheme and host only.

/// The environment variable the credential helper reads the token from.
pub(super) const TOKEN_ENV: &str = "STEPWISE_GIT_TOKEN";

/// The credential helper that answers a request with the token in [`TOKEN_ENV`]. The token
/// travels in the environment, never in argv (which any local user can read in /proc).
/// `x-access-token` is the user name GitHub expects with a token; other hosts ignore it or
/// accept any name.
const TOKEN_HELPER: &str = "!f() { test \"$1\" = get && echo username=x-access-token && echo \"password=$STEPWISE_GIT_TOKEN\"; }; f";

/// `git -c` settings that give the token to `url`'s own scheme and host, and to no other:
/// the empty helper first drops the user's own helpers (so the token is neither stored by
/// them nor mixed with their answers), then the helper is set for that address only, so
/// a redirect or a submodule pointing elsewhere is not handed the token. `None` for an
/// address that is not http(s) (ssh, a path), which takes no token.
pub(super) fn credential_helper(url: &str) -> Option<[String; 4]> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "https" && scheme != "http" {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?;
    if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return None;
    }
    Some([
        "-c".into(),
        "credential.helper=".into(),
        "-c".into(),
        format!("credential.{scheme}://{host}.helper={TOKEN_HELPER}"),
    ])
}

#[cfg(test)]
mod tests {
    use std::process::Stdio;

    use super::*;

    /// What `git credential fill` answers for `host` with the helper for `url`.
    fn filled(url: &str, host: &str) -> (bool, String) {
        use std::io::Write;
        let mut child = std::process::Command::new("git")
            .args(credential_helper(url).unwrap())
            .args(["credential", "fill"])
            .env(TOKEN_ENV, "tok-from-env-42")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_ASKPASS", "")
            .env("SSH_ASKPASS", "")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(format!("protocol=https\nhost={host}\n\n").as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    #[test]
    fn the_credential_helper_gives_the_token_to_its_remote_s_host_only() {
        let url = "https://git.example.com/octo/repo.git";
        let (ok, answer) = filled(url, "git.example.com");
        assert!(ok, "{answer}");
        assert!(answer.contains("username=x-access-token\n"), "{answer}");
        assert!(answer.contains("password=tok-from-env-42\n"), "{answer}");
        // A redirect or a submodule elsewhere gets nothing.
        let (_, elsewhere) = filled(url, "evil.example.net");
        assert!(!elsewhere.contains("tok-from-env-42"), "{elsewhere}");
        assert!(
            !credential_helper(url)
                .unwrap()
                .concat()
                .contains("tok-from-env"),
            "the token must travel in the environment, not argv"
        );
        // An address that takes no token gets no helper.
        assert_eq!(credential_helper("git@github.com:octo/repo.git"), None);
        assert_eq!(credential_helper("/srv/repo.git"), None);
        assert_eq!(
            credential_helper("https://user@Host.example:8443/x").unwrap()[3],
            format!("credential.https://Host.example:8443.helper={TOKEN_HELPER}")
        );
    }
}
