//! What the simulated agent's tools really do once allowed: `Write` and `Edit` change the
//! file in the agent's working directory, and a `Bash` step the scenario marks `run =
//! true` runs its command there. Every other tool stays scripted (its `output` is said).
//!
//! What must stay true: nothing is written outside the working directory — a path that
//! leaves it (by `..`, an absolute path elsewhere, or a symbolic link) is refused as the
//! tool's error, the way the real CLI reports a failed tool; a command runs only when the
//! scenario says so, in the working directory, bounded in time and in the output kept;
//! failures are the tool's error text, never a panic.

use serde_json::Value;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// The longest a `run = true` command may take.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// The most of a command's output kept as the tool's result.
const OUTPUT_MAX: usize = 64 * 1024;
/// The largest file an `Edit` reads.
const EDIT_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// What a tool did: its result text, and whether it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acted {
    /// The tool's result text.
    pub output: String,
    /// Whether the tool failed.
    pub is_error: bool,
}

fn ok(output: String) -> Option<Acted> {
    Some(Acted {
        output,
        is_error: false,
    })
}

fn failed(output: String) -> Option<Acted> {
    Some(Acted {
        output,
        is_error: true,
    })
}

/// Carries out an allowed call of `tool` with `input` in `cwd`. `None`: the tool is only
/// scripted (the scenario's `output` stands). `scripted` is the scenario's output, said
/// on success instead of the default words when it has any.
pub async fn perform(
    tool: &str,
    input: &Value,
    run: bool,
    cwd: &Path,
    scripted: &str,
) -> Option<Acted> {
    let said = |default: String| {
        if scripted.trim().is_empty() {
            default
        } else {
            scripted.to_string()
        }
    };
    match tool {
        "Write" => {
            let (path, shown) = match target(input, cwd) {
                Ok(found) => found,
                Err(e) => return failed(e),
            };
            let content = input["content"].as_str().unwrap_or_default();
            if let Some(parent) = path.parent()
                && let Err(e) = std::fs::create_dir_all(parent)
            {
                return failed(format!("Cannot create the directory of {shown}: {e}"));
            }
            match std::fs::write(&path, content) {
                Ok(()) => ok(said(format!("File created successfully at: {shown}"))),
                Err(e) => failed(format!("Cannot write {shown}: {e}")),
            }
        }
        "Edit" => {
            let (path, shown) = match target(input, cwd) {
                Ok(found) => found,
                Err(e) => return failed(e),
            };
            let old = input["old_string"].as_str().unwrap_or_default();
            let new = input["new_string"].as_str().unwrap_or_default();
            let all = input["replace_all"].as_bool().unwrap_or(false);
            match edit(&path, old, new, all) {
                Ok(()) => ok(said(format!("The file {shown} has been updated."))),
                Err(e) => failed(e),
            }
        }
        "Bash" if run => {
            let command = input["command"].as_str().unwrap_or_default();
            Some(command_output(command, cwd).await)
        }
        _ => None,
    }
}

/// The file a `Write` or `Edit` names (`file_path`, relative to `cwd` or absolute inside
/// it), and how to name it in words. Refused when it is outside `cwd`.
fn target(input: &Value, cwd: &Path) -> Result<(PathBuf, String), String> {
    let Some(named) = input["file_path"].as_str().filter(|p| !p.trim().is_empty()) else {
        return Err("The required parameter `file_path` is missing".to_string());
    };
    let cwd = normalized(cwd);
    let path = normalized(&cwd.join(named));
    let outside = || {
        format!(
            "{named} is outside the working directory {}; this agent only changes files inside it",
            cwd.display()
        )
    };
    if !path.starts_with(&cwd) || path == cwd {
        return Err(outside());
    }
    // A symbolic link on the way must not lead out either.
    let real_cwd = std::fs::canonicalize(&cwd).unwrap_or_else(|_| cwd.clone());
    let existing = path
        .ancestors()
        .find(|a| a.exists())
        .and_then(|a| std::fs::canonicalize(a).ok());
    if existing.is_some_and(|real| !real.starts_with(&real_cwd)) {
        return Err(outside());
    }
    Ok((path, named.to_string()))
}

/// `path` with `.` and `..` resolved by its words alone (no file system).
fn normalized(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn edit(path: &Path, old: &str, new: &str, all: bool) -> Result<(), String> {
    let shown = path.display();
    let size = std::fs::metadata(path)
        .map_err(|_| format!("File does not exist: {shown}"))?
        .len();
    if size > EDIT_MAX_BYTES {
        return Err(format!("{shown} is too large to edit"));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("Cannot read {shown}: {e}"))?;
    if old.is_empty() {
        return Err("old_string is empty; give the text to replace".to_string());
    }
    let found = text.matches(old).count();
    let changed = match (found, all) {
        (0, _) => {
            return Err(format!(
                "String to replace not found in file.\nString: {old}"
            ));
        }
        (1, _) | (_, true) => text.replace(old, new),
        (n, false) => {
            return Err(format!(
                "Found {n} matches of the string to replace, but replace_all is false. To replace all occurrences, set replace_all to true."
            ));
        }
    };
    std::fs::write(path, changed).map_err(|e| format!("Cannot write {shown}: {e}"))
}

/// Runs `command` with `sh -c` in `cwd`: its output (stdout then stderr), failed when it
/// exits non-zero or runs past [`COMMAND_TIMEOUT`].
async fn command_output(command: &str, cwd: &Path) -> Acted {
    use tokio::io::AsyncReadExt;
    let spawned = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            return Acted {
                output: format!("Cannot run the command: {e}"),
                is_error: true,
            };
        }
    };
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Acted {
            output: "Cannot read the command's output".into(),
            is_error: true,
        };
    };
    // Everything is read (so the command never blocks on a full pipe); the first
    // OUTPUT_MAX bytes of each stream are kept.
    async fn bounded(mut from: impl tokio::io::AsyncRead + Unpin) -> std::io::Result<Vec<u8>> {
        let mut kept = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            let n = from.read(&mut chunk).await?;
            if n == 0 {
                return Ok(kept);
            }
            let room = OUTPUT_MAX.saturating_sub(kept.len());
            kept.extend_from_slice(&chunk[..n.min(room)]);
        }
    }
    let read = async {
        let (out, err) = tokio::join!(bounded(stdout), bounded(stderr));
        let status = child.wait().await;
        match (out, err, status) {
            (Ok(out), Ok(err), Ok(status)) => (Ok(status), out, err),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => (Err(e), Vec::new(), Vec::new()),
        }
    };
    match tokio::time::timeout(COMMAND_TIMEOUT, read).await {
        Ok((Ok(status), out, err)) => {
            let mut text = String::from_utf8_lossy(&out).into_owned();
            let err = String::from_utf8_lossy(&err);
            if !err.trim().is_empty() {
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&err);
            }
            let text = text.trim_end().to_string();
            match status.code() {
                Some(0) => Acted {
                    output: text,
                    is_error: false,
                },
                code => Acted {
                    output: format!(
                        "{text}{}Exit code {}",
                        if text.is_empty() { "" } else { "\n" },
                        code.map_or_else(|| "none (killed by a signal)".into(), |c| c.to_string())
                    ),
                    is_error: true,
                },
            }
        }
        Ok((Err(e), _, _)) => Acted {
            output: format!("Cannot run the command: {e}"),
            is_error: true,
        },
        Err(_) => Acted {
            output: format!("Command timed out after {} s", COMMAND_TIMEOUT.as_secs()),
            is_error: true,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn write_and_edit_change_files_inside_the_working_directory() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let wrote = perform(
            "Write",
            &json!({"file_path": "src/new.rs", "content": "pub fn a() {}\n"}),
            false,
            cwd,
            "",
        )
        .await
        .unwrap();
        assert!(!wrote.is_error, "{wrote:?}");
        assert_eq!(wrote.output, "File created successfully at: src/new.rs");
        assert_eq!(
            std::fs::read_to_string(cwd.join("src/new.rs")).unwrap(),
            "pub fn a() {}\n"
        );
        let absolute = cwd.join("src/new.rs").display().to_string();
        let edited = perform(
            "Edit",
            &json!({"file_path": absolute, "old_string": "a()", "new_string": "b()"}),
            false,
            cwd,
            "The file has been updated.",
        )
        .await
        .unwrap();
        assert_eq!(
            edited,
            Acted {
                output: "The file has been updated.".into(),
                is_error: false
            }
        );
        assert_eq!(
            std::fs::read_to_string(cwd.join("src/new.rs")).unwrap(),
            "pub fn b() {}\n"
        );
        let missing = perform(
            "Edit",
            &json!({"file_path": "src/new.rs", "old_string": "zzz", "new_string": "y"}),
            false,
            cwd,
            "",
        )
        .await
        .unwrap();
        assert!(missing.is_error);
        assert!(missing.output.starts_with("String to replace not found"));
        let no_file = perform(
            "Edit",
            &json!({"file_path": "nope.rs", "old_string": "a", "new_string": "b"}),
            false,
            cwd,
            "",
        )
        .await
        .unwrap();
        assert!(no_file.is_error);
        assert!(no_file.output.contains("does not exist"));
    }

    #[tokio::test]
    async fn a_path_outside_the_working_directory_is_the_tools_error() {
        let outer = tempfile::tempdir().unwrap();
        let cwd = outer.path().join("work");
        let canary = outer.path().join("canary");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(&canary).unwrap();
        std::os::unix::fs::symlink(&canary, cwd.join("link")).unwrap();
        for path in [
            "../canary/escaped.txt".to_string(),
            canary.join("escaped.txt").display().to_string(),
            "link/escaped.txt".to_string(),
        ] {
            let acted = perform(
                "Write",
                &json!({"file_path": path, "content": "x"}),
                false,
                &cwd,
                "",
            )
            .await
            .unwrap();
            assert!(acted.is_error, "{path}: {acted:?}");
            assert!(
                acted.output.contains("outside the working directory"),
                "{acted:?}"
            );
        }
        assert_eq!(
            std::fs::read_dir(&canary).unwrap().count(),
            0,
            "nothing escaped"
        );
    }

    #[tokio::test]
    async fn a_command_runs_only_when_marked_and_reports_its_exit() {
        let dir = tempfile::tempdir().unwrap();
        let input = json!({"command": "echo hello > greeting.txt && cat greeting.txt"});
        assert_eq!(perform("Bash", &input, false, dir.path(), "").await, None);
        assert!(!dir.path().join("greeting.txt").exists());
        let acted = perform("Bash", &input, true, dir.path(), "").await.unwrap();
        assert_eq!(
            acted,
            Acted {
                output: "hello".into(),
                is_error: false
            }
        );
        let failing = perform(
            "Bash",
            &json!({"command": "echo oops >&2; exit 3"}),
            true,
            dir.path(),
            "",
        )
        .await
        .unwrap();
        assert!(failing.is_error);
        assert_eq!(failing.output, "oops\nExit code 3");
        // Other tools stay scripted.
        assert_eq!(
            perform("Read", &json!({}), true, dir.path(), "").await,
            None
        );
    }
}
