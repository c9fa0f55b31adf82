//! `[hosts.<name>]`: other machines, containers and pods a run's CLI can be sent to
//! (docs/ARCHITECTURE.md §"Hosts"). One table per host, exactly one of `ssh`,
//! `container` or `kubectl` naming how it is reached; everything else about an ssh host
//! comes from the user's own `~/.ssh/config`, read by OpenSSH's own `ssh`.
//!
//! What must stay true: a host that [`check`] passes can be turned into a transport
//! (`providers::transport::Transport::of`) that never puts a user's word where `ssh`,
//! `podman`/`docker` or `kubectl` would read it as an option.

use serde::{Deserialize, Serialize};

/// `[hosts.<name>]`: how one host is reached.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// `ssh = "user@host"` (or a `Host` alias of `~/.ssh/config`): reached with OpenSSH.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh: Option<String>,
    /// With `ssh`: the port (else `~/.ssh/config`'s, else 22).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// With `ssh`: the private key to use (`ssh -i`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// With `ssh`: more `-o` options, each `Key=Value` (`UserKnownHostsFile=…`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_options: Vec<String>,
    /// `container = "<name>"`: a running container, entered with `engine exec -i`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// With `container`: `podman` (the default) or `docker`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// `kubectl = "<pod>"`: a running pod, entered with `kubectl exec -i`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubectl: Option<String>,
    /// With `kubectl`: the pod's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// With `kubectl`: the kubeconfig context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Where a run's worktree is made on the host (an absolute directory there);
    /// default [`DEFAULT_WORKTREES`] under the home there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktrees: Option<String>,
}

/// Where worktrees go on a host without `worktrees`: relative, so under the home of the
/// user the transport logs in as (docs/ARCHITECTURE.md §"Hosts").
pub const DEFAULT_WORKTREES: &str = ".local/share/drover/worktrees";

/// The worktree root on a host (its `worktrees`, else [`DEFAULT_WORKTREES`], relative to
/// the home there).
pub fn worktrees_root(host: Option<&HostConfig>) -> std::path::PathBuf {
    std::path::PathBuf::from(
        host.and_then(|h| h.worktrees.as_deref())
            .unwrap_or(DEFAULT_WORKTREES),
    )
}

/// How a host is reached, in one word (`ssh`, `podman`, `docker`, `kubectl`).
impl HostConfig {
    /// `ssh`, `podman`, `docker` or `kubectl`; `none` for a table that names none (which
    /// [`check`] refuses).
    pub fn kind(&self) -> &'static str {
        if self.ssh.is_some() {
            "ssh"
        } else if self.container.is_some() {
            match self.engine.as_deref() {
                Some("docker") => "docker",
                _ => "podman",
            }
        } else if self.kubectl.is_some() {
            "kubectl"
        } else {
            "none"
        }
    }

    /// Where it is: `user@host[:port]`, the container's or the pod's name.
    pub fn target(&self) -> String {
        match (&self.ssh, &self.container, &self.kubectl) {
            (Some(ssh), _, _) => match self.port {
                Some(port) => format!("{ssh}:{port}"),
                None => ssh.clone(),
            },
            (None, Some(container), _) => container.clone(),
            (None, None, Some(pod)) => pod.clone(),
            (None, None, None) => String::new(),
        }
    }
}

/// A name `ssh`, an engine or `kubectl` reads as a word of its own: not empty, not an
/// option (`-…`), no whitespace or control characters.
fn a_word(value: &str) -> bool {
    !value.is_empty()
        && !value.starts_with('-')
        && !value.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// The first problem with `[hosts.<name>]`, as (the key to blame, the sentence).
pub(super) fn check(name: &str, host: &HostConfig) -> Result<(), (Option<&'static str>, String)> {
    if name.is_empty()
        || name.len() > 40
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err((
            None,
            format!(
                "the host name {name:?} must be 1 to 40 letters, digits, `-` or `_` (it is shown as @{name})"
            ),
        ));
    }
    let ways = [
        host.ssh.is_some(),
        host.container.is_some(),
        host.kubectl.is_some(),
    ];
    match ways.iter().filter(|w| **w).count() {
        1 => {}
        0 => {
            return Err((
                None,
                format!(
                    "`hosts.{name}` names no way to reach it: set one of `ssh = \"user@host\"`, `container = \"NAME\"` or `kubectl = \"POD\"`"
                ),
            ));
        }
        _ => {
            return Err((
                Some(if host.container.is_some() {
                    "container"
                } else {
                    "kubectl"
                }),
                format!(
                    "`hosts.{name}` names more than one of `ssh`, `container` and `kubectl`; keep one"
                ),
            ));
        }
    }
    let words: [(&'static str, Option<&String>); 7] = [
        ("ssh", host.ssh.as_ref()),
        ("identity", host.identity.as_ref()),
        ("container", host.container.as_ref()),
        ("engine", host.engine.as_ref()),
        ("kubectl", host.kubectl.as_ref()),
        ("namespace", host.namespace.as_ref()),
        ("context", host.context.as_ref()),
    ];
    for (key, value) in words {
        if let Some(value) = value
            && (!a_word(value) || value.len() > 255)
        {
            return Err((
                Some(key),
                format!(
                    "`hosts.{name}.{key}` must be one word of at most 255 bytes that does not start with `-`, found {:?}",
                    crate::text::clip(value, 60)
                ),
            ));
        }
    }
    let only: [(&'static str, bool, &str); 6] = [
        ("port", host.port.is_some() && host.ssh.is_none(), "ssh"),
        (
            "identity",
            host.identity.is_some() && host.ssh.is_none(),
            "ssh",
        ),
        (
            "ssh_options",
            !host.ssh_options.is_empty() && host.ssh.is_none(),
            "ssh",
        ),
        (
            "engine",
            host.engine.is_some() && host.container.is_none(),
            "container",
        ),
        (
            "namespace",
            host.namespace.is_some() && host.kubectl.is_none(),
            "kubectl",
        ),
        (
            "context",
            host.context.is_some() && host.kubectl.is_none(),
            "kubectl",
        ),
    ];
    for (key, stray, with) in only {
        if stray {
            return Err((
                Some(key),
                format!("`hosts.{name}.{key}` goes only with `{with}`; remove it or set `{with}`"),
            ));
        }
    }
    if let Some(engine) = &host.engine
        && engine != "podman"
        && engine != "docker"
    {
        return Err((
            Some("engine"),
            format!(
                "`hosts.{name}.engine` must be \"podman\" or \"docker\", found {:?}",
                crate::text::clip(engine, 40)
            ),
        ));
    }
    if let Some(dir) = &host.worktrees
        && (!dir.starts_with('/') || dir.chars().any(char::is_control) || dir.len() > 1024)
    {
        return Err((
            Some("worktrees"),
            format!(
                "`hosts.{name}.worktrees` must be an absolute directory on the host, found {:?}",
                crate::text::clip(dir, 60)
            ),
        ));
    }
    if host.port == Some(0) {
        return Err((
            Some("port"),
            format!("`hosts.{name}.port` must be from 1 to 65535"),
        ));
    }
    if host.ssh_options.len() > 32 {
        return Err((
            Some("ssh_options"),
            format!("`hosts.{name}.ssh_options` has more than 32 entries"),
        ));
    }
    for option in &host.ssh_options {
        let well_formed = option.split_once('=').is_some_and(|(k, v)| {
            a_word(k) && !v.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric())
        }) && !option.chars().any(char::is_control)
            && option.len() <= 1024;
        if !well_formed {
            return Err((
                Some("ssh_options"),
                format!(
                    "each of `hosts.{name}.ssh_options` must be `Key=Value` (like \"UserKnownHostsFile=/path\"), found {:?}",
                    crate::text::clip(option, 60)
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ssh(target: &str) -> HostConfig {
        HostConfig {
            ssh: Some(target.into()),
            ..HostConfig::default()
        }
    }

    #[test]
    fn each_way_of_reaching_a_host_passes_alone() {
        assert_eq!(check("box", &ssh("me@box")), Ok(()));
        let podman = HostConfig {
            container: Some("dev".into()),
            engine: Some("docker".into()),
            ..HostConfig::default()
        };
        assert_eq!(check("dev", &podman), Ok(()));
        assert_eq!(podman.kind(), "docker");
        let pod = HostConfig {
            kubectl: Some("agent-0".into()),
            namespace: Some("ci".into()),
            context: Some("prod".into()),
            ..HostConfig::default()
        };
        assert_eq!(check("pod", &pod), Ok(()));
        assert_eq!(pod.kind(), "kubectl");
    }

    /// Each bad table is refused with the key to blame and a sentence saying what to do.
    #[test]
    fn bad_tables_are_refused_naming_the_key() {
        let cases: Vec<(&str, HostConfig, Option<&str>, &str)> = vec![
            (
                "box",
                HostConfig::default(),
                None,
                "names no way to reach it",
            ),
            (
                "box",
                HostConfig {
                    ssh: Some("a@b".into()),
                    container: Some("c".into()),
                    ..HostConfig::default()
                },
                Some("container"),
                "more than one",
            ),
            (
                "box",
                ssh("-oProxyCommand=evil"),
                Some("ssh"),
                "does not start with `-`",
            ),
            ("box", ssh("me@box two"), Some("ssh"), "one word"),
            (
                "box",
                HostConfig {
                    worktrees: Some("srv/worktrees".into()),
                    ..ssh("me@box")
                },
                Some("worktrees"),
                "absolute directory on the host",
            ),
            ("bad name", ssh("me@box"), None, "letters, digits"),
            (
                "box",
                HostConfig {
                    container: Some("c".into()),
                    port: Some(22),
                    ..HostConfig::default()
                },
                Some("port"),
                "goes only with `ssh`",
            ),
            (
                "box",
                HostConfig {
                    container: Some("c".into()),
                    engine: Some("lxc".into()),
                    ..HostConfig::default()
                },
                Some("engine"),
                "\"podman\" or \"docker\"",
            ),
            (
                "box",
                HostConfig {
                    ssh: Some("a@b".into()),
                    ssh_options: vec!["-F /x".into()],
                    ..HostConfig::default()
                },
                Some("ssh_options"),
                "Key=Value",
            ),
            (
                "box",
                HostConfig {
                    ssh: Some("a@b".into()),
                    port: Some(0),
                    ..HostConfig::default()
                },
                Some("port"),
                "1 to 65535",
            ),
        ];
        for (name, host, key, words) in cases {
            let (blamed, message) = check(name, &host).expect_err(words);
            assert_eq!(blamed, key, "{message}");
            assert!(message.contains(words), "{message}");
        }
    }
}
