//! The README's Headless block, pasted into bash as it stands: the lines are read from
//! README.md (the first `sh` block under "## Headless"), run by bash in a directory whose
//! `target/release/drover` is the drover under test, and must end with the run completed
//! and no owner left.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The first fenced `sh` block after the heading `## Headless`.
fn headless_block(readme: &str) -> String {
    let section = readme
        .split_once("\n## Headless")
        .expect("the README has a Headless section")
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

#[test]
fn the_headless_block_works_pasted_into_bash() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let block = headless_block(&readme);
    assert!(block.contains("drover serve --detach"), "{block}");
    // A repository whose release build is the drover under test.
    let repo = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(repo.path().join("target/release")).expect("dirs");
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_drover"),
        repo.path().join("target/release/drover"),
    )
    .expect("symlink");
    // `mktemp -d` makes the throwaway home here, where the test can look at it after.
    let tmp = tempfile::tempdir().expect("temp dir");
    let _cleanup = Cleanup(tmp.path());
    let out = Command::new("bash")
        .arg("-c")
        .arg(&block)
        .current_dir(repo.path())
        .env("TMPDIR", tmp.path())
        .env_remove("DROVER_HOME")
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
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
    let homes: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("tmp")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(homes.len(), 1, "one throwaway home: {homes:?}");
    let home = &homes[0];
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
}
