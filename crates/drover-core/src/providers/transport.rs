//! How a command reaches another host (docs/ARCHITECTURE.md §"Hosts"): one [`Transport`]
//! per `[hosts.<name>]`, turning a remote argv, directory and environment into the local
//! argv that runs it there over OpenSSH (`ssh -T`), a container engine (`podman|docker
//! exec -i`) or `kubectl exec -i`. Nothing of drover's own runs on the other side.
//!
//! What must stay true:
//! - every word of the remote command is quoted once for the remote shell
//!   (`shell_words::quote`), and every user word put on the local command line was
//!   checked by `config::hosts::check` not to start with `-`, and follows a `--`
//!   where the tool takes one: no value can become an option or a shell word;
//! - a run's command runs on the host in a session (and process group) of its own
//!   (`setsid`), whose id its shell writes first to the run's pid file on the host
//!   ([`pid_file`]); stopping the run signals that group there ([`Transport::signal_group`]),
//!   so nothing it started outlives it on the host either;
//! - ssh multiplexes through one control master per host, started by the owner
//!   ([`Transport::ensure_master`]), never by a run's own `ssh` (`ControlMaster=no`): the
//!   sweep that ends a run's processes (`providers::sweep`) can then never end a master
//!   other runs share.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::config::HostConfig;
use crate::error::{DroverError, ErrorCode};

/// How long an owner-made ssh control master lives after its last user.
pub const CONTROL_PERSIST_SECS: u64 = 600;
/// How long a one-shot command on a host (a probe, a signal) may take by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);
/// How much of a one-shot command's output is kept.
const OUTPUT_LIMIT: usize = 256 * 1024;

/// A container engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// `podman exec`.
    Podman,
    /// `docker exec`.
    Docker,
}

impl Engine {
    /// The engine's command.
    pub fn program(self) -> &'static str {
        match self {
            Engine::Podman => "podman",
            Engine::Docker => "docker",
        }
    }
}

/// How one host is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// OpenSSH's own client; everything not set here comes from `~/.ssh/config`.
    Ssh {
        /// `user@host` or a `Host` alias.
        destination: String,
        /// `-p PORT`.
        port: Option<u16>,
        /// `-i FILE`.
        identity: Option<String>,
        /// More `-o Key=Value`.
        options: Vec<String>,
        /// Where the host's control master listens (`ControlPath`).
        control_path: PathBuf,
    },
    /// `ENGINE exec -i CONTAINER`.
    Container {
        /// Podman or Docker.
        engine: Engine,
        /// The running container's name.
        container: String,
    },
    /// `kubectl exec -i POD`.
    Kubectl {
        /// The pod.
        pod: String,
        /// `-n NAMESPACE`.
        namespace: Option<String>,
        /// `--context CONTEXT`.
        context: Option<String>,
    },
}

/// A host and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transport {
    /// The host's name in config (`@name` on screen).
    pub name: String,
    /// How it is reached.
    pub via: Via,
}

/// What a one-shot command on a host printed and how it ended (OpenSSH exits 255 when it
/// could not connect).
pub use crate::one_shot::Output as RemoteOutput;

/// The file on the host where a run's remote shell writes its process group's id: in
/// the host's temporary directory, named by the run (a shell expression, expanded there).
pub fn pid_file(run_id: &str) -> String {
    let safe: String = run_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    format!("\"${{TMPDIR:-/tmp}}\"/drover-run-{safe}.pgid")
}

/// `cd DIR && exec setsid -w sh -c 'echo $$ > PIDFILE; exec env K=V… "$@"' sh PROGRAM
/// ARGS…`: the command a host's shell runs for a run, quoted for that shell. `setsid -w`
/// puts it in a session of its own and passes its exit status back.
pub fn remote_script(
    program: &Path,
    args: &[String],
    cwd: &Path,
    env: &BTreeMap<String, String>,
    pid_file: Option<&str>,
) -> String {
    let mut inner = pid_file.map_or_else(String::new, |file| format!("echo $$ > {file}; "));
    inner.push_str(&exec_words(env).join(" "));
    inner.push_str(" \"$@\"");
    let mut words: Vec<String> = ["exec", "setsid", "-w", "sh", "-c"]
        .map(String::from)
        .to_vec();
    words.push(shell_words::quote(&inner).into_owned());
    words.push("sh".to_string());
    in_dir(cwd, words, program, args)
}

/// `cd DIR && exec env K=V… PROGRAM ARGS…`, quoted for the host's shell: a command run
/// there in its directory with the run's environment, in the session the transport
/// gives it (no `setsid`, no pid file).
pub fn remote_command(
    program: &Path,
    args: &[String],
    cwd: &Path,
    env: &BTreeMap<String, String>,
) -> String {
    in_dir(cwd, exec_words(env), program, args)
}

/// `exec` or `exec env K=V…`, each pair quoted for the host's shell.
fn exec_words(env: &BTreeMap<String, String>) -> Vec<String> {
    let mut words = vec!["exec".to_string()];
    if !env.is_empty() {
        words.push("env".to_string());
        words.extend(
            env.iter()
                .map(|(k, v)| shell_words::quote(&format!("{k}={v}")).into_owned()),
        );
    }
    words
}

/// `cd DIR && WORDS… PROGRAM ARGS…`, the directory, program and arguments quoted.
fn in_dir(cwd: &Path, mut words: Vec<String>, program: &Path, args: &[String]) -> String {
    words.push(shell_words::quote(&program.to_string_lossy()).into_owned());
    words.extend(args.iter().map(|a| shell_words::quote(a).into_owned()));
    format!(
        "cd {} && {}",
        shell_words::quote(&cwd.to_string_lossy()),
        words.join(" ")
    )
}

impl Transport {
    /// The transport of `[hosts.<name>]` (checked at load); ssh's control master listens
    /// under `control_dir` (the data directory's `ssh/`).
    pub fn of(name: &str, host: &HostConfig, control_dir: &Path) -> Transport {
        let via = if let Some(destination) = &host.ssh {
            Via::Ssh {
                destination: destination.clone(),
                port: host.port,
                identity: host.identity.clone(),
                options: host.ssh_options.clone(),
                control_path: control_dir.join(name),
            }
        } else if let Some(container) = &host.container {
            Via::Container {
                engine: if host.engine.as_deref() == Some("docker") {
                    Engine::Docker
                } else {
                    Engine::Podman
                },
                container: container.clone(),
            }
        } else {
            Via::Kubectl {
                pod: host.kubectl.clone().unwrap_or_default(),
                namespace: host.namespace.clone(),
                context: host.context.clone(),
            }
        };
        Transport {
            name: name.to_string(),
            via,
        }
    }

    /// The transport of the host named `name` in `hosts`, or `HOST_UNKNOWN` naming the
    /// hosts there are.
    pub fn named(
        name: &str,
        hosts: &BTreeMap<String, HostConfig>,
        control_dir: &Path,
    ) -> Result<Transport, DroverError> {
        match hosts.get(name) {
            Some(host) => Ok(Transport::of(name, host, control_dir)),
            None => Err(unknown_host(name, hosts)),
        }
    }

    /// The local argv (program, arguments) that runs `script` with the host's shell, its
    /// stdin, stdout and stderr those of the local process.
    pub fn command(&self, script: &str) -> (PathBuf, Vec<String>) {
        self.command_on(script, false)
    }

    /// The local argv that opens `program args…` in a terminal on the host, in `cwd` with
    /// `env` added (`ssh -t`, `exec -it`): a run's CLI in its own interface there
    /// (`drover attach`). No `setsid` and no pid file: the terminal the transport makes
    /// there is the interface's session, and it is hung up when the transport goes
    /// (docs/ARCHITECTURE.md §"Hosts").
    pub fn interactive(
        &self,
        program: &Path,
        args: &[String],
        cwd: &Path,
        env: &BTreeMap<String, String>,
    ) -> (PathBuf, Vec<String>) {
        self.command_on(&remote_command(program, args, cwd, env), true)
    }

    /// [`Transport::command`], with a terminal there when `tty`.
    fn command_on(&self, script: &str, tty: bool) -> (PathBuf, Vec<String>) {
        let (ssh_tty, exec_flags) = if tty { ("-t", "-it") } else { ("-T", "-i") };
        match &self.via {
            Via::Ssh {
                destination,
                port,
                identity,
                options,
                control_path,
            } => {
                let mut args = vec![
                    ssh_tty.to_string(),
                    "-o".to_string(),
                    "BatchMode=yes".to_string(),
                    "-o".to_string(),
                    "ControlMaster=no".to_string(),
                    "-o".to_string(),
                    format!("ControlPath={}", control_path.display()),
                ];
                ssh_common(&mut args, *port, identity.as_deref(), options);
                args.push("--".to_string());
                args.push(destination.clone());
                args.push(script.to_string());
                (PathBuf::from("ssh"), args)
            }
            Via::Container { engine, container } => (
                PathBuf::from(engine.program()),
                vec![
                    "exec".to_string(),
                    exec_flags.to_string(),
                    container.clone(),
                    "sh".to_string(),
                    "-c".to_string(),
                    script.to_string(),
                ],
            ),
            Via::Kubectl {
                pod,
                namespace,
                context,
            } => {
                let mut args = Vec::new();
                if let Some(context) = context {
                    args.extend(["--context".to_string(), context.clone()]);
                }
                if let Some(namespace) = namespace {
                    args.extend(["-n".to_string(), namespace.clone()]);
                }
                args.extend([
                    "exec".to_string(),
                    exec_flags.to_string(),
                    pod.clone(),
                    "--".to_string(),
                    "sh".to_string(),
                    "-c".to_string(),
                    script.to_string(),
                ]);
                (PathBuf::from("kubectl"), args)
            }
        }
    }

    /// The local argv that runs `program args…` on the host in `cwd` with `env` added,
    /// in a session of its own whose id goes to `pid_file` there ([`remote_script`]).
    pub fn wrap(
        &self,
        program: &Path,
        args: &[String],
        cwd: &Path,
        env: &BTreeMap<String, String>,
        pid_file: Option<&str>,
    ) -> (PathBuf, Vec<String>) {
        self.command(&remote_script(program, args, cwd, env, pid_file))
    }

    /// The script that sends `signal` (`TERM`, `KILL`, `0` to probe) to the process group
    /// whose id is in `pid_file` on the host; it exits 0 only when the group was there.
    pub fn signal_script(pid_file: &str, signal: &str) -> String {
        format!(
            "pg=$(cat {pid_file} 2>/dev/null) && [ -n \"$pg\" ] && kill -{signal} -\"$pg\" 2>/dev/null"
        )
    }

    /// Sends `signal` to the run's process group on the host (its id read from
    /// `pid_file` there); `true` when the group was there.
    pub async fn signal_group(&self, pid_file: &str, signal: &str) -> bool {
        self.run(&Self::signal_script(pid_file, signal), DEFAULT_TIMEOUT)
            .await
            .is_ok_and(|out| out.success())
    }

    /// Ends what is left of the run's group on the host and removes its pid file: the
    /// remote half of a shutdown's last sweep.
    pub async fn end_group(&self, pid_file: &str) {
        if let Err(e) = self.try_end_group(pid_file, DEFAULT_TIMEOUT).await {
            tracing::warn!(host = %self.name, error = %e, "could not end a run's group on its host");
        }
    }

    /// [`Transport::end_group`], saying whether the host answered: the reconnect of a run
    /// whose connection dropped (docs/ARCHITECTURE.md §"Hosts"). The control master is
    /// opened again first if it died ([`Transport::ensure_master`]); `Err` says why the
    /// host did not answer (OpenSSH exits 255 when it could not connect).
    pub async fn try_end_group(&self, pid_file: &str, timeout: Duration) -> Result<(), String> {
        let script = format!(
            "{}; rm -f {pid_file}",
            Self::signal_script(pid_file, "KILL")
        );
        let out = self.run(&script, timeout).await?;
        if out.success() {
            return Ok(());
        }
        let said = crate::text::one_line(out.stderr.trim());
        Err(match out.code {
            Some(code) if said.is_empty() => format!("exited {code}"),
            Some(code) => format!("exited {code}: {}", crate::text::clip(&said, 200)),
            None => "ended by a signal".to_string(),
        })
    }

    /// Makes sure the host's ssh control master is up (docs/ARCHITECTURE.md §"Hosts"):
    /// `ssh -O check`, else a master started by the owner (it backgrounds itself after
    /// connecting and lives [`CONTROL_PERSIST_SECS`] after its last user). Nothing for a
    /// container or a pod. A host that cannot be reached is no error here: the command
    /// that needs it says so.
    pub async fn ensure_master(&self) {
        let Via::Ssh {
            destination,
            port,
            identity,
            options,
            control_path,
        } = &self.via
        else {
            return;
        };
        if let Some(dir) = control_path.parent() {
            let _ = std::fs::create_dir_all(dir);
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
            }
        }
        let mut base = vec![
            "-o".to_string(),
            "BatchMode=yes".to_string(),
            "-o".to_string(),
            format!("ControlPath={}", control_path.display()),
        ];
        ssh_common(&mut base, *port, identity.as_deref(), options);
        let mut check = base.clone();
        check.extend([
            "-O".to_string(),
            "check".to_string(),
            "--".to_string(),
            destination.clone(),
        ]);
        if quiet_status(Path::new("ssh"), &check).await == Some(0) {
            return;
        }
        let mut master = base;
        master.extend([
            "-o".to_string(),
            "ControlMaster=yes".to_string(),
            "-o".to_string(),
            format!("ControlPersist={CONTROL_PERSIST_SECS}"),
            "-N".to_string(),
            "-f".to_string(),
            "--".to_string(),
            destination.clone(),
        ]);
        if quiet_status(Path::new("ssh"), &master).await != Some(0) {
            tracing::info!(host = %self.name, "no ssh control master: each command connects on its own");
        }
    }

    /// Runs `script` on the host once, stdin closed, bounded by `timeout`, through the
    /// host's control master ([`Transport::ensure_master`]).
    pub async fn run(&self, script: &str, timeout: Duration) -> Result<RemoteOutput, String> {
        self.ensure_master().await;
        self.probe(script, timeout).await
    }

    /// As [`Transport::run`], but makes no control master (it still uses one that is
    /// up): writes nothing on this machine (`drover doctor --host`).
    pub async fn probe(&self, script: &str, timeout: Duration) -> Result<RemoteOutput, String> {
        let (program, args) = self.command(script);
        run_bounded(&program, &args, timeout).await
    }
}

/// `-p`, `-i` and the `-o` options a host sets, for every ssh command.
fn ssh_common(
    args: &mut Vec<String>,
    port: Option<u16>,
    identity: Option<&str>,
    options: &[String],
) {
    if let Some(port) = port {
        args.extend(["-p".to_string(), port.to_string()]);
    }
    if let Some(identity) = identity {
        args.extend(["-i".to_string(), identity.to_string()]);
    }
    for option in options {
        args.extend(["-o".to_string(), option.clone()]);
    }
}

/// `HOST_UNKNOWN`: no `[hosts.<name>]` of that name.
pub fn unknown_host(name: &str, hosts: &BTreeMap<String, HostConfig>) -> DroverError {
    let known: Vec<&str> = hosts.keys().map(String::as_str).collect();
    let which = if known.is_empty() {
        "no host is configured; add a `[hosts.NAME]` table with `ssh = \"user@host\"` to config.toml".to_string()
    } else {
        format!(
            "the hosts are {}; `drover hosts` lists them",
            known.join(", ")
        )
    };
    DroverError::new(
        ErrorCode::HostUnknown,
        format!(
            "there is no host {:?} in config: {which}",
            crate::text::clip(name, 40)
        ),
    )
}

/// The exit status of `program args…` with no input or output, bounded.
async fn quiet_status(program: &Path, args: &[String]) -> Option<i32> {
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .process_group(0);
    let mut child = command.spawn().ok()?;
    match tokio::time::timeout(DEFAULT_TIMEOUT, child.wait()).await {
        Ok(Ok(status)) => status.code(),
        _ => None,
    }
}

/// Runs `program args…` with stdin closed, keeping at most 256 KiB of each output, killed
/// past `timeout`.
async fn run_bounded(
    program: &Path,
    args: &[String],
    timeout: Duration,
) -> Result<RemoteOutput, String> {
    let mut command = tokio::process::Command::new(program);
    command.args(args).process_group(0);
    crate::one_shot::run(&mut command, None, OUTPUT_LIMIT, OUTPUT_LIMIT, timeout)
        .await
        .map_err(|failed| match failed {
            crate::one_shot::Failed::Start(e) => format!("cannot run {}: {e}", program.display()),
            crate::one_shot::Failed::Wait(e) => format!("{}: {e}", program.display()),
            crate::one_shot::Failed::TimedOut => format!(
                "{} took longer than {} s and was stopped",
                program.display(),
                timeout.as_secs()
            ),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(edit: impl FnOnce(&mut HostConfig)) -> HostConfig {
        let mut h = HostConfig::default();
        edit(&mut h);
        h
    }

    fn env() -> BTreeMap<String, String> {
        [("DROVER_RUN_ID".to_string(), "r 1".to_string())].into()
    }

    /// A take-over opens the CLI in a terminal there: `ssh -t`, `exec -it`, in the run's
    /// directory with its environment, with no `setsid` (the terminal is its session).
    #[test]
    fn a_take_over_on_a_host_asks_each_transport_for_a_terminal() {
        let dir = Path::new("/data/ssh");
        let script = "cd '/srv/my repo' && exec env 'DROVER_RUN_ID=r 1' claude --resume 's 1'";
        let args = ["--resume".to_string(), "s 1".to_string()];
        let cases: Vec<(HostConfig, &str, Vec<&str>)> = vec![
            (
                host(|h| h.ssh = Some("me@box".into())),
                "ssh",
                vec![
                    "-t",
                    "-o",
                    "BatchMode=yes",
                    "-o",
                    "ControlMaster=no",
                    "-o",
                    "ControlPath=/data/ssh/box",
                    "--",
                    "me@box",
                    script,
                ],
            ),
            (
                host(|h| h.container = Some("dev".into())),
                "podman",
                vec!["exec", "-it", "dev", "sh", "-c", script],
            ),
            (
                host(|h| h.kubectl = Some("agent-0".into())),
                "kubectl",
                vec!["exec", "-it", "agent-0", "--", "sh", "-c", script],
            ),
        ];
        for (config, program, want) in cases {
            let t = Transport::of("box", &config, dir);
            let (got_program, got_args) = t.interactive(
                Path::new("claude"),
                &args,
                Path::new("/srv/my repo"),
                &env(),
            );
            assert_eq!(got_program, PathBuf::from(program));
            assert_eq!(got_args, want, "{program}");
        }
    }

    /// The local argv of each transport for one remote command (a table: what `ssh`,
    /// `podman`, `docker` and `kubectl` are given).
    #[test]
    fn each_transport_turns_a_remote_command_into_its_local_argv() {
        let dir = Path::new("/data/ssh");
        let script = remote_script(
            Path::new("claude"),
            &["-p".to_string(), "it's".to_string()],
            Path::new("/srv/my repo"),
            &env(),
            Some(&pid_file("r1")),
        );
        assert_eq!(
            script,
            "cd '/srv/my repo' && exec setsid -w sh -c 'echo $$ > \"${TMPDIR:-/tmp}\"/drover-run-r1.pgid; exec env '\\''DROVER_RUN_ID=r 1'\\'' \"$@\"' sh claude -p 'it'\\''s'"
        );
        let cases: Vec<(HostConfig, &str, Vec<String>)> = vec![
            (
                host(|h| {
                    h.ssh = Some("me@box".into());
                    h.port = Some(2222);
                    h.identity = Some("/k/id".into());
                    h.ssh_options = vec!["StrictHostKeyChecking=accept-new".into()];
                }),
                "ssh",
                [
                    "-T",
                    "-o",
                    "BatchMode=yes",
                    "-o",
                    "ControlMaster=no",
                    "-o",
                    "ControlPath=/data/ssh/box",
                    "-p",
                    "2222",
                    "-i",
                    "/k/id",
                    "-o",
                    "StrictHostKeyChecking=accept-new",
                    "--",
                    "me@box",
                    &script,
                ]
                .map(String::from)
                .to_vec(),
            ),
            (
                host(|h| h.container = Some("dev".into())),
                "podman",
                ["exec", "-i", "dev", "sh", "-c", &script]
                    .map(String::from)
                    .to_vec(),
            ),
            (
                host(|h| {
                    h.container = Some("dev".into());
                    h.engine = Some("docker".into());
                }),
                "docker",
                ["exec", "-i", "dev", "sh", "-c", &script]
                    .map(String::from)
                    .to_vec(),
            ),
            (
                host(|h| {
                    h.kubectl = Some("agent-0".into());
                    h.namespace = Some("ci".into());
                    h.context = Some("prod".into());
                }),
                "kubectl",
                [
                    "--context",
                    "prod",
                    "-n",
                    "ci",
                    "exec",
                    "-i",
                    "agent-0",
                    "--",
                    "sh",
                    "-c",
                    &script,
                ]
                .map(String::from)
                .to_vec(),
            ),
        ];
        for (config, program, args) in cases {
            let t = Transport::of("box", &config, dir);
            let (got_program, got_args) = t.wrap(
                Path::new("claude"),
                &["-p".to_string(), "it's".to_string()],
                Path::new("/srv/my repo"),
                &env(),
                Some(&pid_file("r1")),
            );
            assert_eq!(got_program, PathBuf::from(program));
            assert_eq!(got_args, args, "{program}");
        }
    }

    /// The remote script, run by a real `sh` here, runs the command in the directory with
    /// the environment, in a session of its own whose id it wrote to the pid file.
    #[tokio::test]
    async fn the_remote_script_runs_in_its_directory_and_session_and_writes_its_group() {
        let dir = tempfile::tempdir().expect("tempdir");
        let work = dir.path().join("a dir");
        std::fs::create_dir(&work).expect("mkdir");
        let pids = dir.path().join("pids");
        std::fs::create_dir(&pids).expect("mkdir");
        let mut env = env();
        env.insert("TMPDIR".into(), pids.display().to_string());
        let script = remote_script(
            Path::new("/bin/sh"),
            &[
                "-c".to_string(),
                "pwd; echo \"$DROVER_RUN_ID\"; cut -d' ' -f5,6 /proc/$$/stat".to_string(),
            ],
            &work,
            &BTreeMap::from([("DROVER_RUN_ID".to_string(), "r 1".to_string())]),
            Some(&pid_file("r1")),
        );
        let out = run_bounded(
            Path::new("/bin/sh"),
            &[
                "-c".to_string(),
                format!(
                    "export TMPDIR={}; {script}",
                    shell_words::quote(&pids.display().to_string())
                ),
            ],
            DEFAULT_TIMEOUT,
        )
        .await
        .expect("sh runs");
        assert!(out.success(), "{out:?}");
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(lines[0], work.display().to_string());
        assert_eq!(lines[1], "r 1");
        let written = std::fs::read_to_string(pids.join("drover-run-r1.pgid")).expect("pid file");
        // Its process group and its session are both the id the shell wrote.
        let pgid = written.trim();
        assert_eq!(lines[2], format!("{pgid} {pgid}"));
    }

    #[test]
    fn an_unknown_host_names_the_known_ones() {
        let hosts = BTreeMap::from([("box".to_string(), host(|h| h.ssh = Some("a@b".into())))]);
        let e = Transport::named("bx", &hosts, Path::new("/d")).expect_err("unknown");
        assert_eq!(e.code, ErrorCode::HostUnknown);
        assert!(e.message.contains("the hosts are box"), "{}", e.message);
        let e = unknown_host("bx", &BTreeMap::new());
        assert!(e.message.contains("[hosts.NAME]"), "{}", e.message);
    }
}
