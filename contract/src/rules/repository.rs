//! Repository addresses: which forms a task may name (a GitHub `owner/name`, an https or
//! ssh URL, an scp-like address, a local path) and the one key that form counts under.

use super::{has_space_or_control, is_alnum};
use crate::limits;

pub fn repository(v: &str) -> Result<(), String> {
    if v.chars().count() > limits::REPOSITORY_CHARS {
        return Err(format!("at most {} characters", limits::REPOSITORY_CHARS));
    }
    if has_space_or_control(v) {
        return Err("must not contain spaces or control characters".into());
    }
    if let Some(result) = url_repository(v) {
        return result;
    }
    if v.starts_with('/') || is_scp_address(v) || is_github_slug(v) {
        return Ok(());
    }
    Err(
        "expected a GitHub `owner/name`, an https://, http://, ssh:// or file:// URL, \
         a git@host:path address, or an absolute path"
            .into(),
    )
}

/// What the queue compares repositories by (the limit of running jobs per repository, a
/// worker token's repositories): one form for the ways one repository is written. A GitHub
/// `owner/name`, its https, ssh and `git@github.com:` addresses, with or without `.git`,
/// are `github.com/owner/name` (lowercased: GitHub's names ignore case); another host's
/// address is `host/path` with the host lowercased and `.git` and a trailing `/` dropped;
/// a path (and a `file://` URL's path) is itself, less a trailing `/`.
pub fn repository_key(repository: &str) -> String {
    let v = repository.trim();
    let lower = v.to_ascii_lowercase();
    let strip = |rest: &str| -> String {
        let rest = rest.trim_end_matches('/');
        rest.strip_suffix(".git").unwrap_or(rest).to_string()
    };
    let keyed = |host: &str, path: &str| -> String {
        // A user (`git@`) and a port (`:22`) do not change the repository.
        let host = host.rsplit('@').next().unwrap_or(host);
        let host = host.split(':').next().unwrap_or(host).to_ascii_lowercase();
        let path = strip(path.trim_start_matches('/'));
        if host == "github.com" || host == "www.github.com" {
            format!("github.com/{}", path.to_ascii_lowercase())
        } else {
            format!("{host}/{path}")
        }
    };
    for scheme in ["https://", "http://", "ssh://", "git://"] {
        if lower.starts_with(scheme) {
            let rest = &v[scheme.len()..];
            let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
            return keyed(host, path);
        }
    }
    if lower.starts_with("file://") {
        return v["file://".len()..].trim_end_matches('/').to_string();
    }
    if v.starts_with('/') {
        let trimmed = v.trim_end_matches('/');
        return if trimmed.is_empty() {
            "/".into()
        } else {
            trimmed.into()
        };
    }
    if is_scp_address(v)
        && let Some((host, path)) = v.split_once(':')
    {
        return keyed(host, path);
    }
    if is_github_slug(v) {
        return format!("github.com/{}", strip(&lower));
    }
    v.to_string()
}

/// `None` when `v` is not a URL with one of the accepted schemes.
fn url_repository(v: &str) -> Option<Result<(), String>> {
    let lower = v.to_ascii_lowercase();
    let scheme = ["https://", "http://", "ssh://", "file://"]
        .into_iter()
        .find(|s| lower.starts_with(s))?;
    // ASCII lowercasing keeps byte offsets, so the scheme length is a boundary in `v` too.
    let rest = &v[scheme.len()..];
    if rest.is_empty() {
        return Some(Err(format!("`{scheme}` must be followed by a location")));
    }
    let authority = rest.split('/').next().unwrap_or_default();
    let userinfo = authority.rsplit_once('@').map(|(user, _)| user);
    // A credential in the URL would be stored in the queue and shown in the UI; the
    // auth refs exist so that never has to happen.
    let embeds_secret = match (scheme, userinfo) {
        ("https://" | "http://", Some(_)) => true,
        (_, Some(user)) => user.contains(':'),
        _ => false,
    };
    if embeds_secret {
        return Some(Err(
            "must not embed credentials in the URL; remove the `user@` part and \
                         set auth.repoAuthRef instead"
                .into(),
        ));
    }
    Some(Ok(()))
}

fn is_scp_address(v: &str) -> bool {
    let Some((user, rest)) = v.split_once('@') else {
        return false;
    };
    let Some((host, path)) = rest.split_once(':') else {
        return false;
    };
    !user.is_empty()
        && !user.contains('/')
        && !host.is_empty()
        && !host.contains('/')
        && !path.is_empty()
}

fn is_github_slug(v: &str) -> bool {
    let Some((owner, name)) = v.split_once('/') else {
        return false;
    };
    let part_ok = |p: &str| {
        !p.is_empty()
            && p != "."
            && p != ".."
            && p.chars()
                .all(|c| is_alnum(c) || matches!(c, '-' | '_' | '.'))
    };
    part_ok(owner) && part_ok(name) && !owner.starts_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_repository_written_in_its_several_ways_has_one_key() {
        for written in [
            "octo/a",
            "Octo/A",
            "octo/a.git",
            "https://github.com/octo/a",
            "https://github.com/octo/a.git",
            "https://github.com/octo/a/",
            "HTTPS://GitHub.com/Octo/A",
            "git@github.com:octo/a.git",
            "ssh://git@github.com/octo/a.git",
            "ssh://git@github.com:22/octo/a",
        ] {
            assert_eq!(repository_key(written), "github.com/octo/a", "{written}");
        }
        assert_eq!(
            repository_key("https://GitLab.example.com/Team/App.git"),
            "gitlab.example.com/Team/App"
        );
        assert_eq!(
            repository_key("git@gitlab.example.com:Team/App"),
            "gitlab.example.com/Team/App"
        );
        assert_eq!(repository_key("/srv/repos/app/"), "/srv/repos/app");
        assert_eq!(repository_key("file:///srv/repos/app"), "/srv/repos/app");
        assert_ne!(repository_key("octo/a"), repository_key("octo/b"));
        assert_ne!(repository_key("octo/a"), repository_key("other/a"));
    }

    #[test]
    fn accepted_repository_forms() {
        for ok in [
            "octo/repo",
            "Moon.Ladder_Studios/Moon-Mind",
            "https://github.com/o/r.git",
            "http://gitea.local/o/r",
            "ssh://git@github.com/o/r.git",
            "git@github.com:o/r.git",
            "file:///srv/git/r",
            "/srv/git/r",
        ] {
            assert_eq!(repository(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn rejected_repository_forms() {
        for bad in [
            "octo",
            "o/r/x",
            "../r",
            "ftp://x/y",
            "https://",
            "o /r",
            "-o/r",
            "./r",
        ] {
            assert!(repository(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn repository_urls_with_credentials_are_rejected_without_echo() {
        let msg = repository("https://x:ghp_abcdef@github.com/o/r").unwrap_err();
        assert!(
            msg.contains("credentials") && !msg.contains("ghp_"),
            "{msg}"
        );
        assert!(repository("https://ghp_abcdef@github.com/o/r").is_err());
        assert_eq!(repository("ssh://git@github.com/o/r"), Ok(()));
    }
}
