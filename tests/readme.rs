//! The README's Headless and Workspaces blocks, pasted into bash as they stand: the lines
//! are read from README.md (the first `sh` block under "## Headless", and under "###
//! Workspaces"), run by bash under `set -euo pipefail` in a git checkout whose
//! `target/release/drover` is the drover under test, and must end with the run completed
//! (its edit made in its worktree; for Workspaces, its work merged into the throwaway
//! repository), no owner left, and nothing in the checkout they were run from.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The first fenced `sh` block after the heading `heading`.
fn block_under(readme: &str, heading: &str) -> String {
    let section = readme
        .split_once(&format!("\n{heading}"))
        .unwrap_or_else(|| panic!("the README has a section {heading}"))
        .1;
    let start = section.find("```sh\n").expect("a sh block") + "```sh\n".len();
    let end = start + section[start..].find("\n```").expect("the block ends");
    section[start..end].to_string()
}

fn drover(home: &Path, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_drover"))
        .env("DROVER_HOME", home)
        .args(args)
        .output()
        .expect("drover runs");
    assert!(
        out.status.success(),
        "drover {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// Ends whatever owner the block left in `tmp` (should it fail half-way).
struct Cleanup<'a>(&'a Path);

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        for home in std::fs::read_dir(self.0).into_iter().flatten().flatten() {
            let _ = Command::new(env!("CARGO_BIN_EXE_drover"))
                .env("DROVER_HOME", home.path())
                .args(["shutdown", "--wait"])
                .output();
        }
    }
}

/// What bash printed running a README block.
struct Ran {
    stdout: String,
    /// What `mktemp -d` made (the throwaway home, a throwaway repository).
    made: Vec<std::path::PathBuf>,
}

/// Runs `block` with bash under `set -euo pipefail` (every line must succeed, a pipe
/// included) in a git checkout whose `target/release/drover` is the drover under test,
/// with `TMPDIR` in `tmp`; it must succeed with no refusal on the way, and leave no
/// `drover/…` branch or worktree in that checkout.
fn run_block(block: &str, tmp: &Path) -> Ran {
    let repo = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(repo.path().join("target/release")).expect("dirs");
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_drover"),
        repo.path().join("target/release/drover"),
    )
    .expect("symlink");
    // The checkout the block is pasted in is a git repository, as drover's own is.
    std::fs::create_dir_all(repo.path().join("src")).expect("src");
    std::fs::write(
        repo.path().join("src/main.rs"),
        "fn main() {\n    println!(\"hello\");\n}\n",
    )
    .expect("src/main.rs");
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "src"],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "-c",
            "commit.gpgsign=false",
            "commit",
            "-q",
            "-m",
            "checkout",
        ],
    ] {
        git(repo.path(), args);
    }
    let script = format!("set -euo pipefail\n{block}");
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(repo.path())
        .env("TMPDIR", tmp)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("DROVER_HOME")
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the block failed ({}):\n{block}\n-- stdout:\n{stdout}\n-- stderr:\n{stderr}",
        out.status
    );
    assert!(
        !stderr.contains("error["),
        "no refusal on the way:\n{stderr}"
    );
    assert_eq!(
        git(repo.path(), &["branch", "--list", "drover/*"]),
        "",
        "no branch lands in the checkout the block ran in"
    );
    assert_eq!(
        git(repo.path(), &["worktree", "list", "--porcelain"])
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count(),
        1,
        "no worktree of the checkout the block ran in"
    );
    let mut made: Vec<_> = std::fs::read_dir(tmp)
        .expect("tmp")
        .flatten()
        .map(|e| e.path())
        .collect();
    made.sort();
    Ran { stdout, made }
}

/// `git ARGS` in `dir`, which must succeed; its stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README.md")
}

#[test]
fn the_headless_block_works_pasted_into_bash() {
    let block = block_under(&readme(), "## Headless");
    assert!(block.contains("drover serve --detach"), "{block}");
    // `mktemp -d` makes the throwaway home here, where the test can look at it after.
    let tmp = tempfile::tempdir().expect("temp dir");
    let _cleanup = Cleanup(tmp.path());
    let Ran { stdout, made } = run_block(&block, tmp.path());
    let (repos, homes): (Vec<_>, Vec<_>) = made.iter().partition(|d| d.join(".git").is_dir());
    assert_eq!(
        (repos.len(), homes.len()),
        (1, 1),
        "a throwaway home and repository: {made:?}"
    );
    let home = homes[0];
    let status = drover(home, &["status", "--json"]);
    assert_eq!(status["running"], false, "the owner is gone: {status}");
    let runs = drover(home, &["runs", "--json"]);
    let run = &runs.as_array().expect("runs")[0];
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(run["completion_reason"], "complete", "{run}");
    assert!(
        stdout.contains("tool Bash: ls -la"),
        "the transcript was printed:\n{stdout}"
    );
    // `drover search` found the word in the task, the agent's text and the result.
    for found in [
        "Fix the [greeting]",
        "The [greeting] in src/main.rs now says hello to drover.",
        "updated the [greeting] in src/main.rs",
    ] {
        assert!(
            stdout.contains(found),
            "search printed {found:?}:\n{stdout}"
        );
    }
    // The scenario edits what it says it edits: the greeting, in the run's worktree.
    assert!(
        !stdout.contains("String to replace not found"),
        "the edit found its text:\n{stdout}"
    );
    assert!(
        stdout.contains("+    println!(\"hello, drover\");"),
        "the diff shows the edit:\n{stdout}"
    );
    assert_eq!(run["workspace"]["mode"], "worktree", "{run}");
    assert_eq!(run["workspace"]["change"]["files"], 1, "{run}");
}

#[test]
fn the_workspaces_block_works_pasted_into_bash() {
    let block = block_under(&readme(), "### Workspaces");
    assert!(block.contains("drover merge"), "{block}");
    let tmp = tempfile::tempdir().expect("temp dir");
    let _cleanup = Cleanup(tmp.path());
    let Ran { stdout, made } = run_block(&block, tmp.path());
    let (repos, homes): (Vec<_>, Vec<_>) = made.iter().partition(|d| d.join(".git").is_dir());
    assert_eq!((repos.len(), homes.len()), (1, 1), "{made:?}");
    let (repo, home) = (repos[0], homes[0]);
    let status = drover(home, &["status", "--json"]);
    assert_eq!(status["running"], false, "the owner is gone: {status}");
    let runs = drover(home, &["runs", "--json"]);
    let run = &runs.as_array().expect("runs")[0];
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(run["workspace"]["mode"], "worktree", "{run}");
    // The run's work is in the repository, merged by a fast-forward.
    assert!(
        std::fs::read_to_string(repo.join("src/cache.rs"))
            .is_ok_and(|t| t.contains("pub struct Cache")),
        "{stdout}"
    );
    assert!(
        stdout.contains("src/cache.rs"),
        "diff --stat and ls showed it:\n{stdout}"
    );
    assert!(
        stdout.contains("+    let mut cache = cache::Cache::new();"),
        "the diff was printed:\n{stdout}"
    );
    assert!(stdout.contains("fast-forward"), "{stdout}");
}
