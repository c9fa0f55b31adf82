//! `drover demo`: the dashboard on the simulated provider with a handful of runs already
//! dispatched (`assets/demo.toml`), so a new user sees every tray, a permission prompt, a
//! question, a queued run and a moving budget gauge with no CLI and no API key.
//!
//! What must stay true: without `DROVER_HOME` the demo never touches the user's real
//! data — it runs in a throwaway directory that is deleted when it ends, and before that
//! every worktree its runs made is removed (`git worktree remove`) and its branch deleted,
//! whatever repository it was in. With
//! `DROVER_HOME` set, that directory is used (and kept); the demo's config is written
//! there only when it has no config file yet. The runs work in a git repository the
//! demo makes in its data directory ([`project`]), never in the directory it was started
//! from — the dispatch form starts there too — so their diffs are real and a merge lands
//! in the demo's own repository.

use clap::Args;
use serde::Deserialize;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;

use super::headless::{dispatcher_options, runtime};
use drover_core::error::{DroverError, ErrorCode};
use drover_core::paths::{HOME_ENV, Paths};
use drover_core::spec::SpecInput;

/// The demo's config and runs.
pub const DEMO_TOML: &str = include_str!("../../assets/demo.toml");

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Open the dashboard without dispatching the demo runs.
    #[arg(long)]
    pub no_runs: bool,
}

#[derive(Debug, Deserialize)]
struct Demo {
    config: toml::Table,
    runs: Vec<SpecInput>,
}

fn demo() -> Result<Demo, DroverError> {
    toml::from_str(DEMO_TOML).map_err(|e| {
        DroverError::new(
            ErrorCode::Internal,
            format!("the embedded demo file is not valid: {e}"),
        )
    })
}

/// Where the demo keeps its files; a throwaway directory is removed on drop.
pub struct DemoHome {
    pub paths: Paths,
    throwaway: Option<PathBuf>,
}

impl Drop for DemoHome {
    fn drop(&mut self) {
        if let Some(dir) = &self.throwaway {
            leave_no_branches(&self.paths);
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Before a throwaway demo directory goes: every worktree its runs made is removed with
/// `git worktree remove` and its `drover/…` branch deleted, in whatever repository it was
/// made (the demo's own, or one a run was dispatched into), so no branch or stale worktree
/// entry is left pointing at what is thrown away.
fn leave_no_branches(paths: &Paths) {
    let request = drover_core::dispatch::Request::Runs {
        state: None,
        include_removed: true,
        workflow: None,
        limit: None,
        before: None,
        search: None,
    };
    let Ok(drover_core::dispatch::Response::Runs(runs)) =
        drover_core::control::offline::answer(paths, &request)
    else {
        return;
    };
    let root = drover_core::config::Config::load(&paths.config_file).map_or_else(
        |_| paths.data_dir.join("worktrees"),
        |c| c.workspaces.root_in(&paths.data_dir),
    );
    let Ok(rt) = runtime() else {
        return;
    };
    rt.block_on(async {
        let worktrees = runs
            .into_iter()
            .filter_map(|r| r.workspace)
            .filter(|w| w.is_worktree() && w.branch.is_some());
        for ws in worktrees {
            if let Err(e) = drover_core::workspace::ops::discard(&ws, &root).await {
                tracing::warn!(code = %e.code, "leaving the demo: {}", e.message);
            }
        }
    });
}

/// `$DROVER_HOME` when set, else a new private directory under the system's temp dir.
pub fn home() -> Result<DemoHome, DroverError> {
    if std::env::var_os(HOME_ENV).is_some_and(|h| !h.is_empty()) {
        return Ok(DemoHome {
            paths: Paths::resolve()?,
            throwaway: None,
        });
    }
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!("drover-demo-{}-{stamp}", std::process::id()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| {
            DroverError::new(
                ErrorCode::Internal,
                format!(
                    "cannot create the demo's directory {}: {e}; set {HOME_ENV} to a writable directory",
                    dir.display()
                ),
            )
        })?;
    Ok(DemoHome {
        paths: Paths::under(&dir),
        throwaway: Some(dir),
    })
}

pub fn run(args: DemoArgs, paths: &Paths) -> Result<(), DroverError> {
    let demo = demo()?;
    if !paths.config_file.exists() {
        let text = toml::to_string(&demo.config).map_err(|e| {
            DroverError::new(
                ErrorCode::Internal,
                format!("cannot write the demo config: {e}"),
            )
        })?;
        std::fs::write(&paths.config_file, text).map_err(|e| {
            DroverError::new(
                ErrorCode::Internal,
                format!("cannot write {}: {e}", paths.config_file.display()),
            )
        })?;
    }
    // The runs work in a project of the demo's own, never in the directory the demo was
    // started from: the simulated agent really edits files.
    let cwd = project(paths)?;
    let runs = if args.no_runs {
        Vec::new()
    } else {
        demo.runs
            .into_iter()
            .map(|spec| SpecInput {
                provider: Some(drover_core::config::SIM_PROVIDER.to_string()),
                cwd: Some(cwd.clone()),
                ..spec
            })
            .collect()
    };
    // The demo's owner is its own, thrown away with it: leaving the demo ends its runs.
    // The form starts in the demo's project too: a run dispatched from it never lands in
    // the directory the demo was started from.
    runtime()?.block_on(super::dashboard::open(
        dispatcher_options(paths)?,
        runs,
        Some(drover_core::config::SIM_PROVIDER),
        cwd,
        drover_core::config::DashboardOwner::InProcess,
    ))
}

/// The demo's files: a small project the runs work on.
const PROJECT_FILES: &[(&str, &str)] = &[
    (
        "README.md",
        "# greeter\n\nThe demo project of `drover demo`: a program that says hello.\n",
    ),
    (
        "Cargo.toml",
        "[package]\nname = \"greeter\"\nversion = \"0.1.0\"\nedition = \"2024\"\n",
    ),
    ("src/main.rs", "fn main() {\n    println!(\"hello\");\n}\n"),
];

/// Makes the demo's project in the data directory: a git repository with one commit (so
/// the runs get worktrees, and their diffs and merges are real), or — without git — a
/// plain directory the runs share.
pub fn project(paths: &Paths) -> Result<PathBuf, DroverError> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let dir = paths.data_dir.join("demo").join(format!("greeter-{stamp}"));
    let fail = |e: std::io::Error| {
        DroverError::new(
            ErrorCode::Internal,
            format!(
                "cannot create the demo project {}: {e}; set {HOME_ENV} to a writable directory",
                dir.display()
            ),
        )
    };
    for (path, text) in PROJECT_FILES {
        let file = dir.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).map_err(fail)?;
        }
        std::fs::write(&file, text).map_err(fail)?;
    }
    let made = runtime()?.block_on(async {
        use drover_core::workspace::git::Git;
        let git = Git::at(&dir);
        git.ok(&["init", "-q", "-b", "main"]).await?;
        // The demo's own identity, in its own repository's config (never the user's).
        git.ok(&["config", "user.name", "drover demo"]).await?;
        git.ok(&["config", "user.email", "demo@drover.invalid"])
            .await?;
        git.ok(&["add", "-A"]).await?;
        git.ok(&[
            "-c",
            "commit.gpgsign=false",
            "commit",
            "-q",
            "--no-verify",
            "-m",
            "The greeter project",
        ])
        .await
    });
    if let Err(e) = made {
        tracing::warn!(error = %e, "the demo project is not a git repository; its runs share it");
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_file_holds_a_valid_config_and_known_scenarios() {
        let demo = demo().unwrap();
        let text = toml::to_string(&demo.config).unwrap();
        let config =
            drover_core::config::Config::parse(&text, std::path::Path::new("demo.toml")).unwrap();
        assert!(
            config.limits.per_provider["sim"] < demo.runs.len() as u32,
            "some runs queue"
        );
        let known = drover_core::sim::scenario::builtin_names();
        for run in &demo.runs {
            let scenario = run.scenario.as_deref().unwrap();
            assert!(known.contains(&scenario), "{scenario}");
            assert!(!run.task.is_empty());
        }
    }
}
