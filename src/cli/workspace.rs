//! A worktree run's work from the command line: `drover diff RUN [--stat] [--file PATH]`,
//! `drover merge RUN [--squash] [--message M]`, `drover keep RUN`, `drover discard RUN`.
//!
//! What must stay true: `diff` only reads (with no owner it is answered from the ledger
//! and git, like `show`); `merge`, `keep` and `discard` go through the dispatcher — the
//! owner's when one is up, else one this process runs for as long as the request takes —
//! so they never race a run; the diff printed is git's own; `--json` prints the API's
//! answer exactly.

use clap::Subcommand;

use super::headless::{ask_or_own, runtime};
use super::output::{JsonFlag, print_json, write_stdout};
use super::render;
use drover_core::dispatch::{Request, Response};
use drover_core::error::DroverError;
use drover_core::paths::Paths;

#[derive(Debug, Subcommand)]
pub enum WorkspaceCommand {
    /// What a worktree run changed against its base commit (committed, uncommitted and
    /// untracked): git's unified diff, or with --stat its files and line counts.
    Diff {
        run: String,
        /// Only the files with their lines added and removed.
        #[arg(long)]
        stat: bool,
        /// Only this file's diff (a path as `--stat` lists it).
        #[arg(long, value_name = "PATH")]
        file: Option<String>,
        #[command(flatten)]
        output: JsonFlag,
    },
    /// Merge a worktree run's work into its base branch in your checkout: what is
    /// uncommitted in the worktree is committed first; fast-forward when possible, else a
    /// merge commit. Changes nothing when it cannot finish (MERGE_CONFLICT,
    /// CHECKOUT_DIRTY, RUN_ACTIVE). A finished run's worktree and branch go once merged.
    Merge {
        run: String,
        /// One commit of the whole change on your branch instead.
        #[arg(long)]
        squash: bool,
        /// The message of the commit of uncommitted work (default: the run's result
        /// summary).
        #[arg(long, short = 'm', value_name = "M")]
        message: Option<String>,
        #[command(flatten)]
        output: JsonFlag,
    },
    /// Remove a finished run's worktree and keep its branch (uncommitted work is
    /// committed onto it first).
    Keep {
        run: String,
        #[command(flatten)]
        output: JsonFlag,
    },
    /// Remove a finished run's worktree and delete its branch: its work is gone.
    Discard {
        run: String,
        #[command(flatten)]
        output: JsonFlag,
    },
}

impl WorkspaceCommand {
    /// Whether the command only reads (`diff`).
    pub fn read_only(&self) -> bool {
        matches!(self, WorkspaceCommand::Diff { .. })
    }

    /// The command's name, for the log (never its arguments).
    pub fn name(&self) -> &'static str {
        match self {
            WorkspaceCommand::Diff { .. } => "diff",
            WorkspaceCommand::Merge { .. } => "merge",
            WorkspaceCommand::Keep { .. } => "keep",
            WorkspaceCommand::Discard { .. } => "discard",
        }
    }
}

pub fn run(command: WorkspaceCommand, paths: &Paths) -> Result<(), DroverError> {
    let (request, json) = match command {
        WorkspaceCommand::Diff {
            run,
            stat,
            file,
            output,
        } => (
            Request::Diff {
                run_id: run,
                file,
                stat,
            },
            output.json,
        ),
        WorkspaceCommand::Merge {
            run,
            squash,
            message,
            output,
        } => (
            Request::Merge {
                run_id: run,
                squash,
                message,
            },
            output.json,
        ),
        WorkspaceCommand::Keep { run, output } => (Request::Keep { run_id: run }, output.json),
        WorkspaceCommand::Discard { run, output } => {
            (Request::Discard { run_id: run }, output.json)
        }
    };
    let answer = runtime()?.block_on(ask_or_own(paths, request))?;
    if json {
        return print_json(&answer);
    }
    let text = match &answer {
        Response::Diff(view) => render::diff(view),
        Response::Workspace(view) => render::workspace_action(view),
        other => render::pretty_json(other),
    };
    write_stdout(&text)
}
