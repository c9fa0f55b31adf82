//! The one place drover runs the `git` CLI: how a command is built, what environment it
//! gets, how long it may take and how much of its output is read.
//!
//! What must stay true:
//! - every git process drover starts is started here, with `-C <dir>`, no pager, no
//!   colour, no editor, no terminal prompt, `LC_ALL=C` (so messages read the same
//!   everywhere), and none of the caller's `GIT_DIR`-like variables (a drover started
//!   from a git hook must not act on the hook's repository);
//! - a command that runs past its time is killed (`kill_on_drop`), and at most `limit`
//!   bytes of its stdout are kept: what git prints is untrusted and may be huge;
//! - a failure is a [`GitError`] carrying git's own first line of complaint, never a panic;
//! - a command runs where its run's workspace is ([`Where`]): here, or on the run's host
//!   through its transport (docs/ARCHITECTURE.md §"Hosts"), built, bounded and read the
//!   same way — only the process started here differs (`git …`, or the transport's
//!   client running `cd / && exec env … git …` there).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::providers::transport::Transport;

/// Where a workspace's git commands (and the few file operations beside them) run: on
/// this machine, or on a run's host through its transport (docs/ARCHITECTURE.md
/// §"Hosts").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Where {
    /// This machine.
    #[default]
    Here,
    /// The run's host.
    Host(Box<Transport>),
}

impl Where {
    /// The host's transport, `None` here.
    pub fn host(&self) -> Option<&Transport> {
        match self {
            Where::Here => None,
            Where::Host(t) => Some(t),
        }
    }
}

tokio::task_local! {
    /// Where the workspace task under way runs ([`within`]); here outside one.
    static WHERE: Where;
}

/// Runs `work` with every [`Git`] made in it (and every file operation of
/// `super::place`) acting `at` that place: one code path for a workspace here and one on
/// a host. An ssh host's control master is made sure of first.
pub async fn within<F: std::future::Future>(at: Where, work: F) -> F::Output {
    if let Where::Host(t) = &at {
        t.ensure_master().await;
    }
    WHERE.scope(at, work).await
}

/// Where the task under way runs ([`within`]), here outside one.
pub fn current() -> Where {
    WHERE.try_with(Clone::clone).unwrap_or_default()
}

/// How long one git command may take unless the caller says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// How much of a command's stdout is kept unless the caller says otherwise.
pub const DEFAULT_LIMIT: usize = 1024 * 1024;
/// How much of a command's stderr is kept (its last words are what matter).
const STDERR_LIMIT: usize = 8 * 1024;

/// Variables a caller's environment may carry that would point git somewhere else.
const FOREIGN_VARS: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_QUARANTINE_PATH",
];

/// Why a git command did not give what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GitError {
    /// No `git` on PATH.
    #[error("git is not installed (no `git` on PATH)")]
    NotInstalled,
    /// It ran and exited with a failure.
    #[error("`git {command}` failed: {message}")]
    Failed {
        /// The command's arguments, after `git`.
        command: String,
        /// Its exit code; `None` when a signal ended it.
        code: Option<i32>,
        /// git's own first line of complaint (`fatal: …`), or its exit code.
        message: String,
    },
    /// It ran past its time and was killed.
    #[error("`git {command}` took longer than {secs} s and was stopped")]
    Timeout {
        /// The command's arguments, after `git`.
        command: String,
        /// How long it was given, in seconds.
        secs: u64,
    },
    /// It could not be started or talked to.
    #[error("cannot run `git {command}`: {message}")]
    Io {
        /// The command's arguments, after `git`.
        command: String,
        /// What went wrong, in the system's words.
        message: String,
    },
}

/// What a git command printed and how it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitOutput {
    /// The exit code; `None` when a signal ended the command.
    pub code: Option<i32>,
    /// What it printed on stdout (at most the command's limit).
    pub stdout: Vec<u8>,
    /// More than `limit` bytes were printed; `stdout` holds the first `limit`.
    pub truncated: bool,
    /// The end of what it printed on stderr (lossy UTF-8).
    pub stderr: String,
}

impl GitOutput {
    /// Whether it exited with 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// stdout as text, trailing newlines cut (lossy: paths may not be UTF-8).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout)
            .trim_end_matches('\n')
            .to_string()
    }
}

/// One git command, built up and then run with [`Git::run`] or [`Git::ok`].
#[derive(Debug, Clone)]
pub struct Git {
    at: Where,
    dir: PathBuf,
    index_file: Option<PathBuf>,
    input: Option<Vec<u8>>,
    timeout: Duration,
    limit: usize,
}

impl Git {
    /// A command run as if in `dir` (`git -C dir …`), where the task under way runs
    /// ([`current`]).
    pub fn at(dir: &Path) -> Git {
        Git {
            at: current(),
            dir: dir.to_path_buf(),
            index_file: None,
            input: None,
            timeout: DEFAULT_TIMEOUT,
            limit: DEFAULT_LIMIT,
        }
    }

    /// Uses this index file instead of the work tree's own (`GIT_INDEX_FILE`).
    pub fn index(mut self, file: &Path) -> Git {
        self.index_file = Some(file.to_path_buf());
        self
    }

    /// Writes `bytes` to the command's stdin.
    pub fn input(mut self, bytes: Vec<u8>) -> Git {
        self.input = Some(bytes);
        self
    }

    /// Gives the command this long before it is killed (default [`DEFAULT_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Git {
        self.timeout = timeout;
        self
    }

    /// Keeps at most `bytes` of stdout (the rest is not read; the command is stopped).
    pub fn limit(mut self, bytes: usize) -> Git {
        self.limit = bytes;
        self
    }

    /// Runs `git args…` and returns how it ended, success or not.
    pub async fn run(&self, args: &[&str]) -> Result<GitOutput, GitError> {
        let shown = shown(args);
        let mut git_args: Vec<std::ffi::OsString> = vec!["-C".into(), self.dir.clone().into()];
        git_args.extend(
            [
                "-c",
                "color.ui=false",
                "-c",
                "core.quotepath=false",
                "-c",
                "advice.detachedHead=false",
            ]
            .map(Into::into),
        );
        git_args.extend(args.iter().map(Into::into));
        let mut env: Vec<(&str, std::ffi::OsString)> = vec![
            ("LC_ALL", "C".into()),
            ("GIT_TERMINAL_PROMPT", "0".into()),
            ("GIT_PAGER", "cat".into()),
            ("PAGER", "cat".into()),
            ("GIT_EDITOR", "true".into()),
            ("GIT_OPTIONAL_LOCKS", "0".into()),
        ];
        if let Some(index) = &self.index_file {
            env.push(("GIT_INDEX_FILE", index.clone().into()));
        }
        let mut command = match &self.at {
            Where::Here => {
                let mut command = tokio::process::Command::new("git");
                command.args(&git_args);
                for var in FOREIGN_VARS {
                    command.env_remove(var);
                }
                command.envs(env);
                command
            }
            Where::Host(transport) => {
                let words: Vec<String> = git_args
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect();
                let env: std::collections::BTreeMap<String, String> = env
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string_lossy().into_owned()))
                    .collect();
                // The host's login environment may carry the same foreign variables.
                let unset = FOREIGN_VARS
                    .iter()
                    .filter(|v| !env.contains_key(**v))
                    .copied()
                    .collect::<Vec<_>>()
                    .join(" ");
                let script = format!(
                    "unset {unset}; {}",
                    crate::providers::transport::remote_command(
                        Path::new("git"),
                        &words,
                        Path::new("/"),
                        &env
                    )
                );
                let (program, args) = transport.command(&script);
                let mut command = tokio::process::Command::new(program);
                command.args(args).process_group(0);
                command
            }
        };
        command
            .stdin(if self.input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let here = self.at == Where::Here;
        let mut child = command.spawn().map_err(|e| {
            if here && e.kind() == std::io::ErrorKind::NotFound {
                GitError::NotInstalled
            } else {
                GitError::Io {
                    command: shown.clone(),
                    message: e.to_string(),
                }
            }
        })?;
        let io = |e: std::io::Error| GitError::Io {
            command: shown.clone(),
            message: e.to_string(),
        };
        let stdin = child.stdin.take();
        let input = self.input.clone();
        let feed = async move {
            if let (Some(mut stdin), Some(bytes)) = (stdin, input) {
                // A command that stops reading early (an error) closes the pipe: fine.
                let _ = stdin.write_all(&bytes).await;
                let _ = stdin.shutdown().await;
            }
        };
        let mut stdout = child.stdout.take().ok_or_else(|| io(missing_pipe()))?;
        let mut stderr = child.stderr.take().ok_or_else(|| io(missing_pipe()))?;
        let limit = self.limit;
        let read_out = async move {
            let mut kept = Vec::new();
            (&mut stdout)
                .take(limit as u64 + 1)
                .read_to_end(&mut kept)
                .await?;
            let truncated = kept.len() > limit;
            kept.truncate(limit);
            Ok::<_, std::io::Error>((kept, truncated))
        };
        let read_err = async move {
            let mut all = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                let n = stderr.read(&mut chunk).await?;
                if n == 0 {
                    break;
                }
                all.extend_from_slice(&chunk[..n]);
                if all.len() > STDERR_LIMIT * 2 {
                    all.drain(..all.len() - STDERR_LIMIT);
                }
            }
            Ok::<_, std::io::Error>(all)
        };
        let work = async {
            let ((), out, err) = tokio::join!(feed, read_out, read_err);
            let (stdout, truncated) = out?;
            if truncated {
                // The rest is not wanted: stop the command rather than drain it.
                let _ = child.start_kill();
            }
            let status = child.wait().await?;
            let stderr = String::from_utf8_lossy(&err?).into_owned();
            Ok::<_, std::io::Error>(GitOutput {
                code: if truncated { Some(0) } else { status.code() },
                stdout,
                truncated,
                stderr,
            })
        };
        match tokio::time::timeout(self.timeout, work).await {
            Ok(result) => result.map_err(io),
            Err(_) => Err(GitError::Timeout {
                command: shown,
                secs: self.timeout.as_secs(),
            }),
        }
    }

    /// Runs `git args…`, which must succeed; returns its stdout as text.
    pub async fn ok(&self, args: &[&str]) -> Result<String, GitError> {
        let out = self.run(args).await?;
        if out.success() {
            Ok(out.text())
        } else {
            Err(failed(args, &out))
        }
    }
}

fn missing_pipe() -> std::io::Error {
    std::io::Error::other("a pipe to git was not set up")
}

/// The command as a user would type it, shortened for messages.
fn shown(args: &[&str]) -> String {
    crate::text::clip(&args.join(" "), 120)
}

/// The failure of `args` as a [`GitError`], with git's own words.
pub fn failed(args: &[&str], out: &GitOutput) -> GitError {
    GitError::Failed {
        command: shown(args),
        code: out.code,
        message: complaint(&out.stderr)
            .unwrap_or_else(|| format!("exit code {}", out.code.unwrap_or(-1))),
    }
}

/// git's first line of complaint in `stderr` (`fatal:` or `error:` first), clipped.
pub fn complaint(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let pick = lines
        .iter()
        .find(|l| l.starts_with("fatal:") || l.starts_with("error:"))
        .or_else(|| lines.first())?;
    Some(crate::text::clip(&crate::text::one_line(pick), 300))
}

/// The installed git's version (`git version 2.47.3` → `2.47.3`).
pub async fn version() -> Result<String, GitError> {
    let out = Git::at(Path::new("/"))
        .timeout(Duration::from_secs(10))
        .ok(&["--version"])
        .await?;
    Ok(out
        .trim()
        .strip_prefix("git version ")
        .unwrap_or(out.trim())
        .to_string())
}

/// `2.47.3` (or `2.39.2.windows.1`) as numbers: (major, minor).
pub fn parse_version(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.trim().split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()?;
    Some((major, minor))
}

/// The oldest git drover works with: `merge-tree --write-tree` (a merge computed without
/// touching any work tree) came in 2.38.
pub const MIN_VERSION: (u32, u32) = (2, 38);

/// Splits NUL-separated output (`-z`) into its fields, lossily as text.
pub fn nul_fields(bytes: &[u8]) -> Vec<String> {
    bytes
        .split(|b| *b == 0)
        .filter(|f| !f.is_empty())
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_from_what_git_prints() {
        assert_eq!(parse_version("2.47.3"), Some((2, 47)));
        assert_eq!(parse_version("2.39.2.windows.1"), Some((2, 39)));
        assert_eq!(parse_version("2.38"), Some((2, 38)));
        assert_eq!(parse_version("garbage"), None);
        assert!(parse_version("2.37.1").unwrap() < MIN_VERSION);
        assert!(parse_version("2.38.0").unwrap() >= MIN_VERSION);
    }

    #[test]
    fn the_complaint_is_gits_first_fatal_or_error_line() {
        let stderr = "hint: something\nfatal: not a git repository (or any parent)\n";
        assert_eq!(
            complaint(stderr).as_deref(),
            Some("fatal: not a git repository (or any parent)")
        );
        assert_eq!(complaint("just words\n").as_deref(), Some("just words"));
        assert_eq!(complaint("\n\n"), None);
    }

    #[tokio::test]
    async fn a_command_outside_a_repository_fails_with_gits_words() {
        let dir = std::env::temp_dir();
        let err = Git::at(&dir)
            .ok(&["rev-parse", "--show-toplevel"])
            .await
            .unwrap_err();
        match err {
            GitError::Failed { message, .. } => {
                assert!(message.contains("not a git repository"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn output_past_the_limit_is_cut_and_flagged() {
        let out = Git::at(Path::new("/"))
            .limit(5)
            .run(&["--version"])
            .await
            .unwrap();
        assert!(out.truncated);
        assert_eq!(out.stdout, b"git v");
    }
}
