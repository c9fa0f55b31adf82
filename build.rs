//! Names the commit drover is built from (`DROVER_COMMIT`, in `VERSION` of src/lib.rs, shown
//! by `--version`): git's short hash, or `unknown` outside a git checkout. It lives in this
//! crate, the smallest one, so moving HEAD rebuilds it alone.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    let commit = git(&["rev-parse", "--short=10", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=DROVER_COMMIT={commit}");
    // Built again when HEAD moves: a commit, a checkout (worktrees keep HEAD apart from
    // the refs).
    // A path that does not exist would make every build run this again: only existing
    // files are named.
    let mut watch = Vec::new();
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        watch.push(format!("{dir}/HEAD"));
    }
    if let Some(common) = git(&["rev-parse", "--git-common-dir"]) {
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch.push(format!("{common}/{head}"));
        }
        watch.push(format!("{common}/packed-refs"));
    }
    for path in watch.iter().filter(|p| std::path::Path::new(p).exists()) {
        println!("cargo:rerun-if-changed={path}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
