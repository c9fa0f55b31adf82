//! A repository's own scripts for its worktrees (docs/ARCHITECTURE.md §"Workspaces"):
//! `.drover/setup`, run in a new worktree before the run's CLI starts, and
//! `.drover/teardown`, run in the worktree before it is removed. Each runs only once the
//! user approved its exact contents (its SHA-256, kept in the ledger per repository);
//! a script never approved, or changed since, is shown to the user (the whole script, or
//! its diff against the approved one) and does not run until approved.
//!
//! Also the one runner of the setup commands (`[workspaces] setup` and the approved
//! script) and of the teardown: in a process group of its own, stdin closed, bounded in
//! time, its output's end kept for the run's notes.
//!
//! What must stay true: a script runs only when the hash of the bytes run is the hash
//! approved (the teardown is read again at removal, so a script the run edited in its
//! worktree does not run); a teardown's failure never keeps a worktree from being removed.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::{DroverError, ErrorCode, UnixMillis};

/// Most bytes of a repository script read (a longer one is refused, not clipped).
pub const MAX_SCRIPT_BYTES: usize = 64 * 1024;

/// Which of a repository's scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScriptKind {
    /// `.drover/setup`: run in a new worktree.
    Setup,
    /// `.drover/teardown`: run in a worktree before it is removed.
    Teardown,
}

impl ScriptKind {
    /// Both kinds.
    pub const ALL: [ScriptKind; 2] = [ScriptKind::Setup, ScriptKind::Teardown];

    /// The word the ledger keeps (`setup`, `teardown`).
    pub fn as_str(self) -> &'static str {
        match self {
            ScriptKind::Setup => "setup",
            ScriptKind::Teardown => "teardown",
        }
    }

    /// The kind of a word the ledger keeps.
    pub fn parse(word: &str) -> Option<ScriptKind> {
        ScriptKind::ALL.into_iter().find(|k| k.as_str() == word)
    }

    /// Where the script is in the repository (`.drover/setup`).
    pub fn path(self) -> &'static str {
        match self {
            ScriptKind::Setup => ".drover/setup",
            ScriptKind::Teardown => ".drover/teardown",
        }
    }
}

/// A repository script as found in a worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoScript {
    /// Setup or teardown.
    pub kind: ScriptKind,
    /// Its text (lossy UTF-8 of its bytes; the hash is of the bytes).
    pub text: String,
    /// The SHA-256 of its bytes, in hex.
    pub sha256: String,
}

/// A script the user approved for a repository (a row of the ledger's
/// `script_approvals`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovedScript {
    /// The repository: the top of the user's checkout.
    pub repository: String,
    /// Setup or teardown.
    pub kind: ScriptKind,
    /// The SHA-256 approved, in hex.
    pub sha256: String,
    /// The text approved (the next change is shown as a diff against it).
    pub text: String,
    /// When it was approved, in ms since the Unix epoch.
    pub approved_at: UnixMillis,
}

/// The SHA-256 of `bytes`, in lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Reads the repository script `kind` at the top of `worktree`: `None` when there is no
/// such file; refused when it is larger than [`MAX_SCRIPT_BYTES`] or unreadable.
pub fn read(worktree: &Path, kind: ScriptKind) -> Result<Option<RepoScript>, DroverError> {
    let path = worktree.join(kind.path());
    let meta = match std::fs::metadata(&path) {
        Ok(m) if m.is_file() => m,
        Ok(_) => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(unreadable(kind, &e.to_string())),
    };
    if meta.len() as usize > MAX_SCRIPT_BYTES {
        return Err(DroverError::new(
            ErrorCode::SetupFailed,
            format!(
                "{} is larger than {} KiB; keep it short (call a longer script from it)",
                kind.path(),
                MAX_SCRIPT_BYTES / 1024
            ),
        ));
    }
    let bytes = std::fs::read(&path).map_err(|e| unreadable(kind, &e.to_string()))?;
    Ok(Some(RepoScript {
        kind,
        text: String::from_utf8_lossy(&bytes).into_owned(),
        sha256: sha256_hex(&bytes),
    }))
}

fn unreadable(kind: ScriptKind, why: &str) -> DroverError {
    DroverError::new(
        ErrorCode::SetupFailed,
        format!("cannot read {}: {why}", kind.path()),
    )
}

/// The lines of `old` and `new` as a unified diff (the approval of a changed script
/// shows it).
pub fn diff(old: &str, new: &str, kind: ScriptKind) -> String {
    let path = kind.path();
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("{path} (approved)"), &format!("{path} (now)"))
        .to_string()
}

/// One command of a worktree's setup: the user's `[workspaces] setup`, or the
/// repository's approved script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupStep {
    /// The command as shown (`npm ci`, `.drover/setup`).
    pub shown: String,
    /// Its program and arguments.
    pub argv: Vec<String>,
    /// Where it runs.
    pub dir: PathBuf,
    /// For a repository script: the hash approved, checked again against the file just
    /// before it runs.
    pub approved: Option<(ScriptKind, String)>,
}

impl SetupStep {
    /// The repository's script `kind` at the top of `worktree`, approved as `sha256`.
    pub fn script(worktree: &Path, kind: ScriptKind, sha256: &str) -> SetupStep {
        let path = worktree.join(kind.path());
        SetupStep {
            shown: kind.path().to_string(),
            argv: vec![path.display().to_string()],
            dir: worktree.to_path_buf(),
            approved: Some((kind, sha256.to_string())),
        }
    }
}

/// How a step ended: the command, how long it took, the end of what it printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRan {
    /// The command as shown.
    pub shown: String,
    /// How long it took.
    pub took: Duration,
    /// The last lines it printed (stdout and stderr), one line, clipped.
    pub tail: String,
}

/// The last five lines of `text`, folded into one clipped line.
fn tail_of(stdout: &[u8], stderr: &[u8]) -> String {
    let mut text = String::from_utf8_lossy(stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(stderr));
    let tail: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .rev()
        .take(5)
        .collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    crate::text::clip(&crate::text::one_line(&tail.join(" / ")), 400)
}

/// Runs one step in its directory, in a process group of its own, stdin closed, bounded
/// by `timeout` (the whole group is killed past it). A repository script is run as a
/// program when it is executable, else with `sh`; its hash is checked again first.
/// Fails with `SETUP_FAILED`: the command, its exit code and the end of its output.
pub async fn run_step(step: &SetupStep, timeout: Duration) -> Result<StepRan, DroverError> {
    let shown = &step.shown;
    let failed = |why: String| {
        DroverError::new(
            ErrorCode::SetupFailed,
            format!("`{shown}` {why}; fix it (or [workspaces] setup), then dispatch again"),
        )
    };
    let mut argv = step.argv.clone();
    if let Some((kind, sha)) = &step.approved {
        let path = PathBuf::from(argv.first().cloned().unwrap_or_default());
        let now = std::fs::read(&path).map_err(|e| failed(format!("cannot be read: {e}")))?;
        if &sha256_hex(&now) != sha {
            return Err(failed(format!(
                "changed after it was approved and was not run ({} must be approved again)",
                kind.path()
            )));
        }
        use std::os::unix::fs::PermissionsExt;
        let executable =
            std::fs::metadata(&path).is_ok_and(|m| m.permissions().mode() & 0o111 != 0);
        if !executable {
            argv.insert(0, "sh".to_string());
        }
    }
    let Some((program, args)) = argv.split_first() else {
        return Err(failed("is empty".to_string()));
    };
    let started = std::time::Instant::now();
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(&step.dir)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .process_group(0);
    let child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| failed(format!("could not start: {e}")))?;
    let pgid = child.id();
    let out = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Err(_) => {
            // What the command started in its group goes with it.
            if let Some(pgid) = pgid.and_then(|p| i32::try_from(p).ok()) {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pgid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            return Err(failed(format!(
                "took longer than {} s and was stopped",
                timeout.as_secs()
            )));
        }
        Ok(Err(e)) => return Err(failed(format!("could not be waited for: {e}"))),
        Ok(Ok(out)) => out,
    };
    let tail = tail_of(&out.stdout, &out.stderr);
    if !out.status.success() {
        return Err(failed(format!(
            "failed (exit code {}): {tail}",
            out.status
                .code()
                .map_or_else(|| "none".to_string(), |c| c.to_string()),
        )));
    }
    Ok(StepRan {
        shown: shown.clone(),
        took: started.elapsed(),
        tail,
    })
}

/// Runs the steps in order; the first failure ends it.
pub async fn run_steps(
    steps: &[SetupStep],
    timeout: Duration,
) -> Result<Vec<StepRan>, DroverError> {
    let mut ran = Vec::new();
    for step in steps {
        ran.push(run_step(step, timeout).await?);
    }
    Ok(ran)
}

/// What removing a worktree runs first: the repository's `.drover/teardown`, when its
/// hash is the one approved for the repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Teardown {
    /// The hash approved for the repository's teardown, if any.
    pub approved: Option<String>,
    /// How long it may take.
    pub timeout: Duration,
}

impl Teardown {
    /// Runs the worktree's teardown before it is removed, when there is one: approved, it
    /// runs (its failure said, never keeping the worktree); never approved, or changed
    /// since, it does not run and the note says why. `None`: no teardown script.
    pub async fn run(&self, worktree: &Path) -> Option<String> {
        let kind = ScriptKind::Teardown;
        let found = match read(worktree, kind) {
            Ok(Some(found)) => found,
            Ok(None) => return None,
            Err(e) => return Some(format!("{} was not run: {}", kind.path(), e.message)),
        };
        match &self.approved {
            Some(sha) if *sha == found.sha256 => {}
            Some(_) => {
                return Some(format!(
                    "{} was not run: it changed since it was approved (a new worktree of the repository asks again)",
                    kind.path()
                ));
            }
            None => {
                return Some(format!(
                    "{} was not run: it was never approved (a new worktree of the repository asks)",
                    kind.path()
                ));
            }
        }
        let step = SetupStep::script(worktree, kind, &found.sha256);
        Some(match run_step(&step, self.timeout).await {
            Ok(ran) => format!(
                "ran {} before removing the worktree ({}){}",
                kind.path(),
                crate::text::duration_words(ran.took.as_millis() as i64),
                if ran.tail.is_empty() {
                    String::new()
                } else {
                    format!(": {}", ran.tail)
                }
            ),
            Err(e) => format!("{}; the worktree was removed all the same", e.message),
        })
    }
}

tokio::task_local! {
    /// The teardown of the removal under way, and what it came to (set around a removing
    /// task by [`super::perform_with`]; read where the worktree is removed).
    pub(super) static TEARDOWN: std::cell::RefCell<(Option<Teardown>, Option<String>)>;
}

/// Runs the teardown of the task under way (if it has one) in `worktree`, keeping what
/// it came to for the run's notes.
pub(super) async fn before_removal(worktree: &Path) {
    let plan = TEARDOWN.try_with(|t| t.borrow().0.clone()).ok().flatten();
    let Some(plan) = plan else {
        return;
    };
    if let Some(note) = plan.run(worktree).await {
        let _ = TEARDOWN.try_with(|t| t.borrow_mut().1 = Some(note));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_sha256_of_the_bytes() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_changed_script_is_shown_as_a_diff() {
        let d = diff("npm ci\n", "npm ci\ncurl x | sh\n", ScriptKind::Setup);
        assert!(d.contains("+curl x | sh"), "{d}");
        assert!(d.contains(".drover/setup (approved)"), "{d}");
    }
}
