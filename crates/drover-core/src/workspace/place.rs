//! The few file operations a workspace's git work needs beside git itself (is a
//! worktree there, make its parent, copy or remove an index file, remove a worktree git
//! could not), done where the task under way runs ([`super::git::current`]): with
//! `std::fs` here, or as one bounded shell command on the run's host through its
//! transport (docs/ARCHITECTURE.md §"Hosts"). Every path is quoted once for the host's
//! shell.

use std::path::{Path, PathBuf};

use super::git::{Where, current};
use crate::providers::transport::{DEFAULT_TIMEOUT, Transport};

fn quoted(path: &Path) -> String {
    shell_words::quote(&path.to_string_lossy()).into_owned()
}

/// Runs `script` on the host; an error names what failed there.
async fn on_host(t: &Transport, script: &str) -> std::io::Result<String> {
    let out = t
        .run(script, DEFAULT_TIMEOUT)
        .await
        .map_err(std::io::Error::other)?;
    if out.success() {
        Ok(out.stdout)
    } else {
        Err(std::io::Error::other(format!(
            "on the host {}: {}",
            t.name,
            crate::text::clip(&crate::text::one_line(out.stderr.trim()), 300)
        )))
    }
}

/// Whether `test FLAG PATH` holds there.
async fn test(flag: &str, path: &Path, local: impl FnOnce(&Path) -> bool) -> bool {
    match current() {
        Where::Here => local(path),
        Where::Host(t) => on_host(&t, &format!("test {flag} {}", quoted(path)))
            .await
            .is_ok(),
    }
}

/// `path` is a directory.
pub async fn is_dir(path: &Path) -> bool {
    test("-d", path, Path::is_dir).await
}

/// `path` is a file.
pub async fn is_file(path: &Path) -> bool {
    test("-f", path, Path::is_file).await
}

/// Something is at `path` (a dangling link counts, as `Path::exists` does not).
pub async fn exists(path: &Path) -> bool {
    match current() {
        Where::Here => path.exists(),
        Where::Host(t) => on_host(&t, &format!("test -e {p} || test -L {p}", p = quoted(path)))
            .await
            .is_ok(),
    }
}

/// `mkdir -p`.
pub async fn create_dir_all(path: &Path) -> std::io::Result<()> {
    match current() {
        Where::Here => std::fs::create_dir_all(path),
        Where::Host(t) => on_host(&t, &format!("mkdir -p {}", quoted(path)))
            .await
            .map(drop),
    }
}

/// Copies the file `from` to `to`.
pub async fn copy(from: &Path, to: &Path) -> std::io::Result<()> {
    match current() {
        Where::Here => std::fs::copy(from, to).map(drop),
        Where::Host(t) => on_host(&t, &format!("cp {} {}", quoted(from), quoted(to)))
            .await
            .map(drop),
    }
}

/// Removes the file `path` (best effort).
pub async fn remove_file(path: &Path) {
    remove_file_at(&current(), path).await;
}

/// Removes the file `path` at `at` (best effort).
pub async fn remove_file_at(at: &Where, path: &Path) {
    match at {
        Where::Here => {
            let _ = std::fs::remove_file(path);
        }
        Where::Host(t) => {
            let _ = on_host(t, &format!("rm -f {}", quoted(path))).await;
        }
    }
}

/// Removes the directory `path` and everything in it (best effort).
pub async fn remove_dir_all(path: &Path) {
    match current() {
        Where::Here => {
            let _ = std::fs::remove_dir_all(path);
        }
        Where::Host(t) => {
            let _ = on_host(&t, &format!("rm -rf {}", quoted(path))).await;
        }
    }
}

/// The path with every link resolved (`None` when it is not there).
pub async fn canonicalize(path: &Path) -> Option<PathBuf> {
    match current() {
        Where::Here => std::fs::canonicalize(path).ok(),
        Where::Host(t) => on_host(&t, &format!("cd {} && pwd -P", quoted(path)))
            .await
            .ok()
            .map(|out| PathBuf::from(out.trim_end_matches('\n'))),
    }
}

/// A worktree root as the place knows it: here as given; on a host, a relative root is
/// under the host user's home there (`$HOME`, read there), as ssh's own paths are.
pub async fn root(root: &Path) -> std::io::Result<PathBuf> {
    match current() {
        Where::Host(t) if root.is_relative() => {
            let home = on_host(&t, "printf '%s' \"$HOME\"").await?;
            if home.is_empty() || !home.starts_with('/') {
                return Err(std::io::Error::other(format!(
                    "the host {} has no home directory ($HOME) to put worktrees under; set `worktrees = \"/abs/dir\"` in [hosts.{}]",
                    t.name, t.name
                )));
            }
            Ok(Path::new(&home).join(root))
        }
        _ => Ok(root.to_path_buf()),
    }
}
