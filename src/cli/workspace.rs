//! A worktree run's work from the command line: `drover diff RUN [--stat] [--file PATH]`,
//! `drover merge RUN [--squash] [--message M]`, `drover keep RUN`, `drover discard RUN`,
//! `drover pr RUN [--draft] [--title T] [--force-with-lease] [--refresh]`,
//! and `drover open RUN [--shell|--editor|--print]` into the run's directory.
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
use drover_core::workspace::open::{self as into, Program};

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
    /// Bring a worktree run's branch up to date with its base branch, in its worktree
    /// (uncommitted work is committed onto the branch first): the base merged in, or
    /// with --rebase the branch rebased on it. A conflict changes nothing: drover prints
    /// the files and the follow-up that hands the conflict to the run, and exits with
    /// MERGE_CONFLICT.
    Update {
        run: String,
        /// Rebase the run's commits on the base instead of merging the base in.
        #[arg(long)]
        rebase: bool,
        #[command(flatten)]
        output: JsonFlag,
    },
    /// Push a worktree run's branch to the repository's remote (`git push -u REMOTE
    /// BRANCH`, from the run's worktree; what is uncommitted there is committed onto the
    /// branch first) and open a pull request with `gh` (`glab` for a GitLab remote) when
    /// it is on PATH, its body made of the run's result and task. Without that CLI, only
    /// the push, and the address the remote gave for opening one. On a run whose pull
    /// request is open, the push brings its new commits there. Refusals: NO_REMOTE,
    /// PUSH_REFUSED, AUTH_FAILED, FORGE_FAILED, RUN_ACTIVE; your checkout is never
    /// changed.
    Pr {
        run: String,
        /// Open it as a draft.
        #[arg(long)]
        draft: bool,
        /// Its title (default: the run's title).
        #[arg(long, value_name = "T")]
        title: Option<String>,
        /// Push with --force-with-lease (replaces the remote branch's commits if it has
        /// not moved since drover last saw it; never --force).
        #[arg(long)]
        force_with_lease: bool,
        /// Only read the run's pull request again (its state and checks): no push.
        #[arg(long, conflicts_with_all = ["draft", "title", "force_with_lease"])]
        refresh: bool,
        #[command(flatten)]
        output: JsonFlag,
    },
    /// A run whose new worktree holds repository scripts (`.drover/setup`,
    /// `.drover/teardown`) never approved for the repository, or changed since, waits to
    /// start: this prints them (the whole script, or its diff against the one approved);
    /// --yes approves them (their SHA-256 is kept; the setup runs and the run starts),
    /// --refuse starts the run without them. NO_PENDING_REQUEST when the run waits for no
    /// approval.
    ApproveScripts {
        run: String,
        /// Approve the scripts shown.
        #[arg(long, conflicts_with = "refuse")]
        yes: bool,
        /// Refuse them: the run starts without them (asked again next time).
        #[arg(long)]
        refuse: bool,
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
    /// Into a run's directory (its worktree, or the directory a shared run was given):
    /// your shell ($SHELL) by default, your editor ($VISUAL, $EDITOR, else vi) with
    /// --editor, or only its path with --print. Inside tmux the shell or editor opens in
    /// a new window named after the run (`[dashboard] open_in = "split"`: a split).
    Open {
        run: String,
        /// Open your shell there (the default).
        #[arg(long, conflicts_with_all = ["editor", "print"])]
        shell: bool,
        /// Open your editor on it.
        #[arg(long, conflicts_with = "print")]
        editor: bool,
        /// Print the directory and open nothing (`cd "$(drover open RUN --print)"`).
        #[arg(long)]
        print: bool,
    },
    /// Take an idle run over in its CLI's own interactive interface (Claude Code's,
    /// Codex's, the simulated agent's), in its session and directory: drover shuts the
    /// run's supervised CLI down and sends it nothing meanwhile. When you leave that
    /// interface the run is handed back: the turns you had there (their usage and cost)
    /// are read into the ledger, marked `interactive`, and its next follow-up goes on in
    /// the same session.
    Attach {
        run: String,
        /// Only hand the run back (after the interface ended without drover noticing,
        /// e.g. its terminal was closed).
        #[arg(long)]
        hand_back: bool,
    },
}

impl WorkspaceCommand {
    /// Whether the command only reads (`diff`, `open`).
    pub fn read_only(&self) -> bool {
        matches!(
            self,
            WorkspaceCommand::Diff { .. } | WorkspaceCommand::Open { .. }
        )
    }

    /// The command's name, for the log (never its arguments).
    pub fn name(&self) -> &'static str {
        match self {
            WorkspaceCommand::Diff { .. } => "diff",
            WorkspaceCommand::Merge { .. } => "merge",
            WorkspaceCommand::Update { .. } => "update",
            WorkspaceCommand::ApproveScripts { .. } => "approve-scripts",
            WorkspaceCommand::Keep { .. } => "keep",
            WorkspaceCommand::Discard { .. } => "discard",
            WorkspaceCommand::Pr { .. } => "pr",
            WorkspaceCommand::Open { .. } => "open",
            WorkspaceCommand::Attach { .. } => "attach",
        }
    }
}

pub fn run(command: WorkspaceCommand, paths: &Paths) -> Result<(), DroverError> {
    let (request, json) = match command {
        WorkspaceCommand::Open {
            run,
            editor,
            print,
            shell: _,
        } => {
            let program = if editor {
                Program::Editor
            } else {
                Program::Shell
            };
            return open(paths, &run, (!print).then_some(program));
        }
        WorkspaceCommand::Attach { run, hand_back } => return attach(paths, &run, hand_back),
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
        WorkspaceCommand::Update {
            run,
            rebase,
            output,
        } => (
            Request::Update {
                run_id: run,
                rebase,
            },
            output.json,
        ),
        WorkspaceCommand::Pr {
            run,
            draft,
            title,
            force_with_lease,
            refresh,
            output,
        } => (
            Request::Pr {
                run_id: run,
                draft,
                title,
                force_with_lease,
                refresh,
            },
            output.json,
        ),
        WorkspaceCommand::ApproveScripts {
            run,
            yes,
            refuse,
            output,
        } => {
            if !yes && !refuse {
                return show_scripts(paths, &run, output.json);
            }
            (
                Request::ApproveScripts {
                    run_id: run,
                    approve: yes,
                },
                output.json,
            )
        }
        WorkspaceCommand::Keep { run, output } => (Request::Keep { run_id: run }, output.json),
        WorkspaceCommand::Discard { run, output } => {
            (Request::Discard { run_id: run }, output.json)
        }
    };
    let answer = runtime()?.block_on(ask_or_own(paths, request))?;
    let conflict = match &answer {
        Response::Workspace(view) => view
            .update
            .as_ref()
            .filter(|u| u.how == drover_core::workspace::UpdateHow::Conflict),
        _ => None,
    }
    .map(|u| {
        DroverError::new(
            drover_core::ErrorCode::MergeConflict,
            format!(
                "{} conflicts with its branch in {}; nothing was changed",
                u.base,
                u.files.join(", ")
            ),
        )
    });
    if json {
        print_json(&answer)?;
    } else {
        let text = match &answer {
            Response::Diff(view) => render::diff(view),
            Response::Workspace(view) => render::workspace_action(view),
            Response::Pr(view) => render::pr_action(view),
            Response::Run(run) => format!(
                "{}: {}\n",
                run.head.run_id,
                run.head
                    .live_state
                    .as_ref()
                    .and_then(|l| l.detail.clone())
                    .unwrap_or_else(|| run.head.state.as_str().to_string())
            ),
            other => render::pretty_json(other),
        };
        write_stdout(&text)?;
    }
    conflict.map_or(Ok(()), Err)
}

/// `drover approve-scripts RUN` without --yes or --refuse: the scripts the run waits on,
/// each whole (first time) or as its diff against the one approved (changed), redacted.
fn show_scripts(paths: &Paths, run: &str, json: bool) -> Result<(), DroverError> {
    let answer = runtime()?.block_on(ask_or_own(
        paths,
        Request::Show {
            run_id: run.to_string(),
        },
    ))?;
    let Response::Show(view) = answer else {
        return Err(DroverError::new(
            drover_core::ErrorCode::Internal,
            "the owner answered `show` in another shape",
        ));
    };
    let Some(approval) = view.script_approval else {
        return Err(DroverError::new(
            drover_core::ErrorCode::NoPendingRequest,
            format!(
                "run {run} waits for no script approval; `drover show {run}` says what it waits for"
            ),
        ));
    };
    if json {
        return print_json(&approval);
    }
    let mut text = format!(
        "run {run} waits for your approval of {}'s scripts:\n",
        approval.repository
    );
    for script in &approval.scripts {
        let short: String = script.sha256.chars().take(12).collect();
        match &script.diff {
            Some(diff) => text.push_str(&format!(
                "\n{} changed since you approved it (sha256 {short}…):\n{diff}",
                script.path
            )),
            None => text.push_str(&format!(
                "\n{} (sha256 {short}…), never approved:\n{}",
                script.path, script.text
            )),
        }
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    text.push_str(&format!(
        "\napprove: drover approve-scripts {run} --yes · refuse (start without them): drover approve-scripts {run} --refuse\n"
    ));
    write_stdout(&text)
}

/// `drover open`: the run's directory printed, or `program` opened there — in a new tmux
/// window (or a split) inside tmux, else in the foreground until it exits.
fn open(paths: &Paths, run_id: &str, program: Option<Program>) -> Result<(), DroverError> {
    let view = runtime()?
        .block_on(super::headless::ask(
            paths,
            Request::Show {
                run_id: run_id.to_string(),
            },
        ))?
        .into_show()?;
    let Some(program) = program else {
        let dir = into::dir_of(run_id, view.workspace.as_ref())?;
        return write_stdout(&format!("{}\n", dir.display()));
    };
    let config = drover_core::config::Config::load(&paths.config_file)?;
    let into::Plan { dir, argv, .. } = into::plan(
        run_id,
        view.workspace.as_ref(),
        program,
        |name| std::env::var(name).ok(),
        config.dashboard.open_in,
    )?;
    let Some((first, rest)) = argv.split_first() else {
        return Ok(());
    };
    let status = std::process::Command::new(first)
        .args(rest)
        .current_dir(&dir)
        .status()
        .map_err(|e| {
            DroverError::new(
                drover_core::ErrorCode::InvalidSpec,
                format!(
                    "cannot start the {} `{first}`: {e}; set $VISUAL, $EDITOR or $SHELL to one that is installed",
                    program.word()
                ),
            )
        })?;
    if !status.success() {
        tracing::info!(%status, "the program opened in the run's directory ended");
    }
    Ok(())
}

/// `drover attach`: the run taken over, its CLI's interface run in the foreground, and
/// the run handed back once it exits — whatever it exits with, and through Ctrl-C, a
/// closed terminal or SIGTERM (they are the interface's: this process waits for it).
fn attach(paths: &Paths, run_id: &str, hand_back_only: bool) -> Result<(), DroverError> {
    use super::headless::ask;
    let runtime = runtime()?;
    let hand_back = || {
        runtime
            .block_on(ask(
                paths,
                Request::HandBack {
                    run_id: run_id.to_string(),
                },
            ))
            .and_then(Response::into_run)
    };
    if !hand_back_only {
        let plan = runtime
            .block_on(ask(
                paths,
                Request::TakeOver {
                    run_id: run_id.to_string(),
                },
            ))?
            .into_take_over()?;
        eprintln!(
            "drover: {run_id} is yours in {}'s own interface; leave it to hand the run back",
            drover_core::providers::registry::cli_name(&plan.provider)
        );
        let ran = runtime.block_on(async {
            use tokio::signal::unix::{SignalKind, signal};
            // Held while the interface runs: these signals are its, not this process's.
            let _held: Vec<_> = [
                SignalKind::interrupt(),
                SignalKind::terminate(),
                SignalKind::hangup(),
                SignalKind::quit(),
            ]
            .into_iter()
            .filter_map(|kind| signal(kind).ok())
            .collect();
            tokio::process::Command::new(&plan.program)
                .args(&plan.args)
                .envs(&plan.env)
                .current_dir(&plan.cwd)
                .status()
                .await
        });
        if let Err(e) = &ran {
            eprintln!(
                "drover: cannot start `{}`: {e}; the run is handed back",
                plan.program.display()
            );
        }
    }
    let run = hand_back()?;
    let turns = runtime
        .block_on(ask(
            paths,
            Request::Show {
                run_id: run_id.to_string(),
            },
        ))
        .and_then(Response::into_show)
        .map(|view| {
            view.turns
                .iter()
                .filter(|t| t.origin == "interactive")
                .count()
        })
        .unwrap_or(0);
    write_stdout(&format!(
        "{} handed back to drover: {} ({turns} interactive turn{} in its ledger)\n",
        run.head.run_id,
        run.head
            .live_state
            .as_ref()
            .and_then(|l| l.detail.clone())
            .unwrap_or_else(|| run.head.state.as_str().to_string()),
        if turns == 1 { "" } else { "s" }
    ))
}
