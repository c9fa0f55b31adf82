//! Workspaces (docs/ARCHITECTURE.md §"Workspaces", issue 13): where a run works and what it
//! changed there.
//!
//! - Admission decides the workspace: `worktree` when the dispatch says so, or by default
//!   (`[workspaces] default`) when the run can write and its directory is inside a git
//!   work tree; `shared` otherwise. An escalation or retry of a worktree run gets a
//!   worktree that starts on the parent's branch.
//! - A shared run whose directory a writing run is working in (in a turn, or queued to
//!   start one) waits for it (live state `waiting_repository`, bounded by the run's time
//!   box) unless `shared_conflict = "allow"`; it is let go when that run's turn or the run
//!   ends. An idle run holds nothing: a follow-up to it is the user's own call.
//! - Before a worktree run is launched its worktree is made (live `preparing`, "creating
//!   the worktree", bounded by [`PREPARE_WORKTREE_BOUND_MS`]); a resumed run's worktree is
//!   checked instead. The launch waits for the outcome; a failure fails the run with its
//!   cause. A new worktree's repository scripts wait for the user's approval, then its
//!   setup runs (`scripts.rs`).
//! - The run's change is worked out after every turn, when a tool that may change files
//!   finishes, and when the run ends — one at a time per run, once more if something
//!   happened meanwhile.
//! - `diff`, `merge`, `keep`, `discard` act on the run's worktree (read from the ledger
//!   when the run is not in memory); removing a finished run whose worktree holds
//!   unmerged work is refused unless forced, and then keeps the work on its branch (the
//!   answer names it); one whose worktree is clean is discarded; one whose worktree is
//!   already gone (kept, or vanished) is released: its worktree entry pruned, its branch
//!   deleted when it holds no commits beyond its base (git decides, off this task).
//!
//! What must stay true: every git call is an [`Effect::Workspace`] whose outcome comes
//! back as an input; nothing here touches the file system or git; a merge, keep or
//! discard of one run is never under way twice; a worktree made for a run that ended
//! meanwhile is discarded (nothing ran in it).

use std::path::PathBuf;

mod pulls;
mod scripts;
pub use pulls::{PrRefresh, PrWish};
pub use scripts::RUNNING_SETUP;

use super::run::{Batch, Run};
use super::{Core, Effect, Fetch, ReplyTo, Then, WorkspaceDone, WorkspaceJob};
use crate::dispatch::api::{DispatchEvent, Response, RunSummary, RunView, WorkspaceActionView};
use crate::ledger::{RunPatch, WriteOp};
use crate::live_state::{Cause, LiveStateKind};
use crate::run_state::RunState;
use crate::spec::{Capability, Spec};
use crate::text::{clip, duration_words};
use crate::workspace::ops::{CreatePlan, MergeAsk, ParentStart};
use crate::workspace::{
    Outcome, Task, UpdateHow, WorkspaceMode, WorkspaceStatus, WorkspaceView, branch_name,
    dirs_overlap, no_worktree,
};
use crate::{DroverError, ErrorCode};

/// How long making (or checking) a worktree may take before the run fails.
pub const PREPARE_WORKTREE_BOUND_MS: i64 = 300_000;

/// A workspace request, carried over a ledger read for a run that is not in memory.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// `diff`.
    Diff {
        /// Only this file's patch.
        file: Option<String>,
        /// Only the file list and counts.
        stat: bool,
    },
    /// `merge`.
    Merge {
        /// As one squashed commit.
        squash: bool,
        /// The message of the commit of uncommitted work.
        message: Option<String>,
    },
    /// `update`: the run's branch brought up to date with its base.
    Update {
        /// Rebase instead of merging the base in.
        rebase: bool,
    },
    /// `keep`.
    Keep,
    /// `discard`.
    Discard,
    /// `pr`.
    Pr(PrWish),
}

impl Action {
    fn word(&self) -> &'static str {
        match self {
            Action::Diff { .. } => "diff",
            Action::Merge { .. } => "merge",
            Action::Update { .. } => "update",
            Action::Keep => "keep",
            Action::Discard => "discard",
            Action::Pr(_) => "pr",
        }
    }
}

/// The note an update leaves on the run.
fn update_note(u: &crate::workspace::UpdateView) -> String {
    let short = crate::workspace::short_commit(Some(&u.commit));
    match u.how {
        UpdateHow::UpToDate => format!("its branch already has everything of {}", u.base),
        UpdateHow::Merged => format!("{} merged into its branch as {short}", u.base),
        UpdateHow::Rebased => format!("its branch rebased on {} (now {short})", u.base),
        UpdateHow::Conflict => format!(
            "updating its branch from {} conflicts in {}; nothing was changed",
            u.base,
            u.files.join(", ")
        ),
    }
}

/// What a workspace request needs to know of its run.
struct Target {
    workspace: Option<WorkspaceView>,
    state: RunState,
    /// A turn is running, or the run is about to start one.
    in_turn: bool,
    title: String,
    summary: Option<String>,
    /// The run's task (a pull request's body quotes it).
    task: String,
    /// The run's last result (a pull request's body is made of it).
    result: Option<crate::dispatch::api::ResultView>,
    /// The run's row, for a run not in memory.
    row: Option<Box<RunSummary>>,
}

impl Target {
    /// What a run in memory tells a workspace request.
    fn of(run: &Run) -> Target {
        Target {
            workspace: Some(run.workspace.clone()),
            state: run.state(),
            in_turn: in_turn(run),
            title: run.spec.title.clone(),
            summary: run.last_result.as_ref().and_then(|r| r.summary.clone()),
            task: run.spec.task.clone(),
            result: run.last_result.clone(),
            row: None,
        }
    }
}

fn run_active(run_id: &str, state: RunState, what: &str) -> DroverError {
    DroverError::new(
        ErrorCode::RunActive,
        format!("run {run_id} is {state}: {what}"),
    )
}

impl Core {
    /// Where worktrees go now.
    fn worktree_root(&self) -> PathBuf {
        self.config.workspaces.root_in(&self.data_dir)
    }

    fn job(
        &mut self,
        run_id: &str,
        task: Task,
        reply: Option<ReplyTo>,
        row: Option<Box<RunSummary>>,
    ) {
        self.jobs_in_flight += 1;
        let teardown = self.teardown_for(&task);
        // A run on a host has its workspace there: its git work runs through the host's
        // transport (docs/ARCHITECTURE.md §"Hosts").
        let at = match task.host() {
            Some(host) => crate::workspace::git::Where::Host(Box::new(
                crate::providers::transport::Transport::of(
                    host,
                    &self.config.hosts.get(host).cloned().unwrap_or_default(),
                    &crate::paths::Paths::under(&self.data_dir).ssh_dir(),
                ),
            )),
            None => crate::workspace::git::Where::Here,
        };
        self.out.push(Effect::Workspace(Box::new(WorkspaceJob {
            run_id: run_id.to_string(),
            at,
            task,
            reply,
            row,
            teardown,
        })));
    }

    /// The workspace of a new run (the dispatch's word, else the default), or the reason
    /// a worktree cannot be had.
    pub(super) fn workspace_mode(
        &self,
        spec: &Spec,
        from: Option<&ParentStart>,
    ) -> Result<WorkspaceMode, DroverError> {
        let git = self.facts.cli_found("git");
        let in_repo = self.facts.in_git_work_tree(&spec.cwd);
        let dir = spec.cwd.display();
        match spec.workspace {
            Some(WorkspaceMode::Shared) => Ok(WorkspaceMode::Shared),
            // git and the repository are the host's, looked at when the worktree is made
            // there (docs/ARCHITECTURE.md §"Hosts").
            Some(WorkspaceMode::Worktree) if spec.host.is_some() => Ok(WorkspaceMode::Worktree),
            Some(WorkspaceMode::Worktree) if !git => Err(DroverError::new(
                ErrorCode::WorkspaceUnavailable,
                "git is not installed, so the run cannot have a worktree; install git, or dispatch with --workspace shared",
            )),
            Some(WorkspaceMode::Worktree) if !in_repo => Err(DroverError::new(
                ErrorCode::WorkspaceUnavailable,
                format!(
                    "{dir} is not inside a git work tree, so the run cannot have a worktree; dispatch with --workspace shared, or `git init` there"
                ),
            )),
            Some(WorkspaceMode::Worktree) => Ok(WorkspaceMode::Worktree),
            None if from.is_some_and(|p| p.workspace.is_worktree()) && git && in_repo => {
                Ok(WorkspaceMode::Worktree)
            }
            None => Ok(
                if self.config.workspaces.default == WorkspaceMode::Worktree
                    && spec.capability != Capability::ReadOnly
                    && git
                    && in_repo
                {
                    WorkspaceMode::Worktree
                } else {
                    WorkspaceMode::Shared
                },
            ),
        }
    }

    /// The active run that works in a directory overlapping `run_id`'s and can write, when
    /// `run_id` is a shared run that must wait for it (`shared_conflict = "wait"`).
    pub(super) fn dir_holder(&self, run_id: &str) -> Option<String> {
        if self.config.workspaces.shared_conflict == crate::config::SharedConflict::Allow {
            return None;
        }
        let run = self.runs.get(run_id)?;
        if run.workspace.is_worktree() {
            return None;
        }
        // A sub-run never waits for its own parents: they wait for it.
        let ancestors = self.ancestors(run_id);
        self.order
            .iter()
            .filter(|id| id.as_str() != run_id && !ancestors.contains(id))
            .filter_map(|id| self.runs.get(id))
            .find(|other| {
                writes_now(other)
                    && !other.waiting_for_dir
                    && !other.workspace.is_worktree()
                    && other.spec.capability != Capability::ReadOnly
                    && dirs_overlap(&other.spec.cwd, &run.spec.cwd)
            })
            .map(|other| other.id.clone())
    }

    /// The run's parent, its parent's parent, … as far as they are in memory (bounded by
    /// the number of runs, whatever the lineage says).
    fn ancestors(&self, run_id: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut at = run_id;
        while out.len() < self.runs.len() {
            let Some(parent) = self.runs.get(at).and_then(|r| r.spec.parent_run.as_deref()) else {
                break;
            };
            if parent == run_id || out.iter().any(|a| a == parent) {
                break;
            }
            out.push(parent.to_string());
            at = parent;
        }
        out
    }

    /// Puts a run in `waiting_repository` until `holder` has left its directory.
    pub(super) fn wait_for_dir(&mut self, run_id: &str, holder: &str) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.waiting_for_dir = true;
        let dir = run.spec.cwd.display().to_string();
        let mut batch = Batch::default();
        let deadline = run.deadline;
        run.set_live(
            &mut batch,
            LiveStateKind::WaitingRepository,
            Some(deadline),
            Some(&format!("run {holder} is working in {}", clip(&dir, 100))),
            None,
            now,
        );
        run.note(
            &mut batch,
            format!(
                "waits for run {holder}, which is working in {dir} (shared directory; [workspaces] shared_conflict = \"wait\")"
            ),
            now,
        );
        run.touch(&mut batch);
        self.commit(batch);
    }

    /// Lets go the runs waiting for a directory that is free now (oldest first: the first
    /// let go holds it for the next).
    pub(super) fn release_dir_waiters(&mut self) {
        if self.shutting_down() {
            return;
        }
        for id in self.order.clone() {
            let waiting = self
                .runs
                .get(&id)
                .is_some_and(|r| r.waiting_for_dir && r.state().is_active());
            if !waiting || self.dir_holder(&id).is_some() {
                continue;
            }
            let now = self.now;
            if let Some(run) = self.runs.get_mut(&id) {
                run.waiting_for_dir = false;
                let mut batch = Batch::default();
                let deadline = run.deadline;
                run.set_live(
                    &mut batch,
                    LiveStateKind::WaitingRepository,
                    Some(deadline),
                    Some("the directory is free; starting"),
                    None,
                    now,
                );
                run.note(&mut batch, "the directory is free now", now);
                self.commit(batch);
            }
            self.admit_existing(&id);
        }
    }

    /// Before a worktree run's launch: asks for its worktree to be made (or, resumed,
    /// checked). True when it did: the launch goes on once the outcome is in.
    pub(super) fn prepare_workspace(&mut self, run_id: &str) -> bool {
        let now = self.now;
        let root = self.worktree_root();
        let ws_config = self.config.workspaces.clone();
        let Some(run) = self.runs.get_mut(run_id) else {
            return false;
        };
        if !run.workspace.is_worktree() || run.workspace_ready {
            return false;
        }
        let bound_ms = PREPARE_WORKTREE_BOUND_MS;
        let (task, detail) = if run.workspace.status == WorkspaceStatus::Preparing {
            // On a host the worktree goes under its `worktrees` there (docs/ARCHITECTURE.md
            // §"Hosts").
            let root = match run.spec.host.as_deref() {
                Some(host) => crate::config::hosts::worktrees_root(self.config.hosts.get(host)),
                None => root,
            };
            let plan = CreatePlan {
                run_id: run.id.clone(),
                cwd: run.spec.cwd.clone(),
                host: run.spec.host.clone(),
                root,
                branch: branch_name(&run.id, &run.spec.title),
                carry_changes: run.spec.carry_changes,
                from: run.start_from.clone(),
                link: ws_config.link,
            };
            (Task::Create(plan), "creating the worktree")
        } else {
            (
                Task::Check(run.workspace.clone()),
                "checking the run's worktree",
            )
        };
        let bound = (now + bound_ms).min(run.deadline);
        run.preparing_until = Some(bound);
        let mut batch = Batch::default();
        if run.state() != RunState::Starting {
            run.set_state(&mut batch, RunState::Starting, None, now);
        }
        run.set_live(
            &mut batch,
            LiveStateKind::Preparing,
            Some(bound),
            Some(detail),
            None,
            now,
        );
        self.commit(batch);
        self.job(run_id, task, None, None);
        true
    }

    /// The worktree was not ready in time: the run fails (a late worktree is discarded).
    pub(super) fn prepare_timed_out(&mut self, run_id: &str) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.preparing_until = None;
        let mut batch = Batch::default();
        run.note(
            &mut batch,
            format!(
                "the worktree was not ready after {}; is the repository very large, or locked by another git command?",
                duration_words(PREPARE_WORKTREE_BOUND_MS)
            ),
            now,
        );
        self.commit(batch);
        self.finalize(run_id, RunState::Failed, "workspace_timeout", Cause::Failed);
    }

    /// A shared run waited its whole time box for a directory: it fails without starting.
    pub(super) fn dir_wait_timed_out(&mut self, run_id: &str) {
        let now = self.now;
        let holder = self.dir_holder(run_id);
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.waiting_for_dir = false;
        let minutes = run.spec.max_minutes;
        let mut batch = Batch::default();
        run.note(
            &mut batch,
            format!(
                "waited its {minutes} minutes for {} to be free{}; dispatch it with --workspace worktree to run alongside",
                run.spec.cwd.display(),
                holder
                    .map(|h| format!(" (run {h} is still working there)"))
                    .unwrap_or_default()
            ),
            now,
        );
        self.commit(batch);
        self.end_run(run_id, RunState::Failed, "repository_busy", Cause::Refused);
    }

    /// Works out the run's change (once at a time; again after, if asked meanwhile).
    pub(super) fn measure(&mut self, run_id: &str) {
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        if !run.workspace.has_worktree() || !run.workspace_ready {
            return;
        }
        if run.measuring {
            run.measure_again = true;
            return;
        }
        run.measuring = true;
        let task = Task::Measure(run.workspace.clone());
        self.job(run_id, task, None, None);
    }

    pub(super) fn on_workspace_done(&mut self, done: WorkspaceDone) {
        self.jobs_in_flight = self.jobs_in_flight.saturating_sub(1);
        let WorkspaceDone {
            run_id,
            reply,
            row,
            task,
            outcome,
            teardown,
        } = done;
        if let Some(note) = teardown {
            self.teardown_noted(&run_id, note);
        }
        match (task, outcome) {
            (Task::Prune { .. }, Err(e)) => {
                tracing::warn!(code = %e.code, "{}", e.message);
            }
            (Task::Prune { .. }, Ok(_)) => {}
            (Task::Create(_), outcome) => self.created(&run_id, outcome),
            (Task::Setup { .. }, outcome) => self.setup_done(&run_id, outcome),
            (Task::Check(_), outcome) => self.checked(&run_id, outcome),
            (Task::Measure(_), outcome) => self.measured(&run_id, outcome),
            (Task::Diff { .. }, outcome) => {
                if let Some(to) = reply {
                    let answer = outcome.and_then(|o| match o {
                        Outcome::Diff(view) => Ok(Response::Diff(view)),
                        other => Err(unexpected(&other)),
                    });
                    self.reply_now(to, answer);
                }
            }
            (Task::Release(_), Ok(Outcome::Released(after))) => {
                self.workspace_changed(&run_id, after, row, None);
            }
            (Task::Release(_), outcome) => {
                if let Err(e) = outcome {
                    tracing::warn!(run = %run_id, code = %e.code, "{}", e.message);
                }
            }
            (Task::Pr { .. }, outcome) => {
                self.workspace_busy.remove(&run_id);
                let timed = self.pr_refresh.done(&run_id, self.now);
                if timed && let Err(e) = &outcome {
                    // The timer's read failed: the last state read stays; it is asked
                    // again at its next turn.
                    tracing::warn!(run = %run_id, code = %e.code, "reading its pull request again: {}", e.message);
                    return;
                }
                self.pr_done(&run_id, reply, row, outcome);
            }
            (
                task @ (Task::Merge { .. }
                | Task::Update { .. }
                | Task::Keep { .. }
                | Task::Discard { .. }),
                outcome,
            ) => {
                self.workspace_busy.remove(&run_id);
                self.acted(&run_id, &task, reply, row, outcome);
            }
        }
    }

    fn created(&mut self, run_id: &str, outcome: Result<Outcome, DroverError>) {
        let now = self.now;
        let root = self.worktree_root();
        let created = outcome.and_then(|o| match o {
            Outcome::Created(c) => Ok(c),
            other => Err(unexpected(&other)),
        });
        // A run that left memory, or ended, while its worktree was made ran nothing in it.
        let gone = self
            .runs
            .get(run_id)
            .is_none_or(|run| run.state().is_terminal() || run.ending.is_some());
        if gone {
            if let Ok(c) = created {
                if let Some(run) = self.runs.get_mut(run_id) {
                    run.preparing_until = None;
                    run.workspace = c.workspace.clone();
                }
                self.job(
                    run_id,
                    Task::Discard {
                        workspace: c.workspace,
                        root,
                    },
                    None,
                    None,
                );
            } else if let Some(run) = self.runs.get_mut(run_id) {
                run.preparing_until = None;
            }
            return;
        }
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.preparing_until = None;
        let mut batch = Batch::default();
        match created {
            Ok(c) => {
                run.workspace = c.workspace;
                run.workspace_ready = true;
                let ws = &run.workspace;
                let mut words = format!(
                    "works in its own worktree {} on branch {}",
                    ws.worktree.as_deref().unwrap_or("?"),
                    ws.branch.as_deref().unwrap_or("?"),
                );
                match (&c.from_run, &ws.base_branch) {
                    (Some(parent), _) => {
                        words.push_str(&format!(", started from run {parent}'s branch"))
                    }
                    (None, Some(base)) => words.push_str(&format!(
                        ", made from {base} at {}",
                        crate::workspace::short_commit(ws.base_commit.as_deref())
                    )),
                    (None, None) => words.push_str(&format!(
                        ", made from a detached HEAD at {}",
                        crate::workspace::short_commit(ws.base_commit.as_deref())
                    )),
                }
                run.note(&mut batch, words, now);
                if run.start_from.is_some() && c.from_run.is_none() {
                    run.note(
                        &mut batch,
                        "the parent run's branch is gone (merged or discarded): started from your HEAD",
                        now,
                    );
                }
                if c.carried > 0 {
                    run.note(
                        &mut batch,
                        format!(
                            "brought {} uncommitted change{} along",
                            c.carried,
                            crate::text::plural(c.carried)
                        ),
                        now,
                    );
                }
                if c.left_behind > 0 {
                    run.note(
                        &mut batch,
                        format!(
                            "your checkout has {} uncommitted change{} that are not in the worktree (dispatch with --carry-changes to bring them)",
                            c.left_behind,
                            crate::text::plural(c.left_behind)
                        ),
                        now,
                    );
                }
                let ready = &c.ready;
                let mut made_ready = Vec::new();
                if ready.included > 0 {
                    made_ready.push(format!(
                        "copied {} file{} .worktreeinclude lists",
                        ready.included,
                        crate::text::plural(ready.included)
                    ));
                }
                if !ready.linked.is_empty() {
                    made_ready.push(format!("linked {}", ready.linked.join(", ")));
                }
                if !made_ready.is_empty() {
                    run.note(&mut batch, made_ready.join("; "), now);
                }
                run.save_workspace(&mut batch, now);
                self.commit(batch);
                self.after_made(run_id, c.ready.scripts);
            }
            Err(e) if !run.workspace_asked && e.code == ErrorCode::WorkspaceUnavailable => {
                self.commit(batch);
                self.fall_back_to_shared(run_id, &e.message);
            }
            Err(e) => {
                run.workspace.status = WorkspaceStatus::Failed;
                run.note(
                    &mut batch,
                    format!("could not make the worktree: {}", e.message),
                    now,
                );
                run.save_workspace(&mut batch, now);
                self.commit(batch);
                self.finalize(run_id, RunState::Failed, "workspace_error", Cause::Failed);
            }
        }
    }

    /// A worktree the default chose cannot be made (no commit yet, not a repository after
    /// all): the run shares its directory instead (live `falling_back`), or — when a
    /// writing run works there — waits for it like any shared run.
    fn fall_back_to_shared(&mut self, run_id: &str, why: &str) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let mut batch = Batch::default();
        run.workspace = WorkspaceView::shared(&run.spec.cwd);
        run.spec.workspace = Some(WorkspaceMode::Shared);
        run.note(
            &mut batch,
            format!("no worktree ({why}): the run shares its directory"),
            now,
        );
        run.save_workspace(&mut batch, now);
        self.commit(batch);
        if let Some(holder) = self.dir_holder(run_id) {
            if let Some(run) = self.runs.get_mut(run_id) {
                // Back to waiting, holding no slot, until the directory is free.
                let mut batch = Batch::default();
                run.set_state(
                    &mut batch,
                    RunState::Queued,
                    Some("waiting for its directory"),
                    now,
                );
                self.commit(batch);
            }
            return self.wait_for_dir(run_id, &holder);
        }
        if let Some(run) = self.runs.get_mut(run_id) {
            let mut batch = Batch::default();
            let bound = (now + super::lifecycle::PREPARE_BOUND_MS).min(run.deadline);
            run.set_live(
                &mut batch,
                LiveStateKind::FallingBack,
                Some(bound),
                Some("using the shared directory"),
                None,
                now,
            );
            self.commit(batch);
        }
        self.launch_now(run_id);
    }

    fn checked(&mut self, run_id: &str, outcome: Result<Outcome, DroverError>) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.preparing_until = None;
        if run.state().is_terminal() || run.ending.is_some() {
            return;
        }
        match outcome {
            Ok(_) => {
                run.workspace_ready = true;
                self.launch_now(run_id);
            }
            Err(e) => {
                let mut batch = Batch::default();
                if e.code == ErrorCode::WorktreeMissing {
                    run.workspace.status = WorkspaceStatus::Missing;
                }
                run.note(&mut batch, format!("cannot go on: {}", e.message), now);
                run.save_workspace(&mut batch, now);
                self.commit(batch);
                self.finalize(run_id, RunState::Failed, "workspace_missing", Cause::Failed);
            }
        }
    }

    fn measured(&mut self, run_id: &str, outcome: Result<Outcome, DroverError>) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.measuring = false;
        let mut batch = Batch::default();
        match outcome {
            Ok(Outcome::Measured(change)) if run.workspace.has_worktree() => {
                if run.workspace.change != Some(change) {
                    run.workspace.change = Some(change);
                    run.save_workspace(&mut batch, now);
                }
            }
            Ok(_) => {}
            Err(e) if e.code == ErrorCode::WorktreeMissing => {
                run.workspace.status = WorkspaceStatus::Missing;
                run.note(&mut batch, e.message.clone(), now);
                run.save_workspace(&mut batch, now);
                let active = run.state().is_active() && run.ending.is_none();
                self.commit(batch);
                if active {
                    self.end_run(run_id, RunState::Failed, "workspace_missing", Cause::Failed);
                }
                return;
            }
            Err(e) => {
                tracing::warn!(run = run_id, code = %e.code, "{}", e.message);
            }
        }
        let again = std::mem::take(&mut run.measure_again);
        self.commit(batch);
        if again {
            self.measure(run_id);
        }
    }

    /// A merge, keep or discard is done (or refused): the run's workspace as it is now,
    /// recorded and shown, and the answer.
    fn acted(
        &mut self,
        run_id: &str,
        task: &Task,
        reply: Option<ReplyTo>,
        row: Option<Box<RunSummary>>,
        outcome: Result<Outcome, DroverError>,
    ) {
        let mut update = None;
        let (action, after, merge) = match outcome {
            Ok(Outcome::Merged(after, merged)) => ("merge", after, Some(merged)),
            Ok(Outcome::Updated(after, updated)) => {
                update = Some(updated);
                ("update", after, None)
            }
            Ok(Outcome::MergeConflict(e, conflict)) => {
                self.offer_conflict(run_id, conflict);
                if let Some(to) = reply {
                    self.reply_now(to, Err(e));
                }
                return;
            }
            Ok(Outcome::Kept(after)) => ("keep", after, None),
            Ok(Outcome::Discarded(after)) => ("discard", after, None),
            Ok(other) => {
                if let Some(to) = reply {
                    self.reply_now(to, Err(unexpected(&other)));
                }
                return;
            }
            Err(e) => {
                if e.code == ErrorCode::WorktreeMissing
                    && let Task::Merge { workspace, .. }
                    | Task::Update { workspace, .. }
                    | Task::Keep { workspace, .. } = task
                {
                    let mut lost = workspace.clone();
                    lost.status = WorkspaceStatus::Missing;
                    self.workspace_changed(run_id, lost, row, None);
                }
                if let Some(to) = reply {
                    self.reply_now(to, Err(e));
                }
                return;
            }
        };
        let note = match (&merge, after.status) {
            _ if update.is_some() => update.as_ref().map(update_note),
            (Some(m), _) => Some(format!(
                "merged into {} ({}) as {}{}",
                m.into,
                m.how.words(),
                crate::workspace::short_commit(Some(&m.commit)),
                if m.cleaned_up {
                    "; its worktree and branch are removed"
                } else {
                    ""
                }
            )),
            (None, WorkspaceStatus::Kept) => Some(format!(
                "worktree removed; its work is kept on branch {}",
                after.branch.as_deref().unwrap_or("?")
            )),
            (None, WorkspaceStatus::Discarded) => (reply.is_some() || row.is_some())
                .then(|| "worktree and branch discarded".to_string()),
            (None, _) => None,
        };
        self.workspace_changed(run_id, after.clone(), row, note);
        if let Some(run) = self.runs.get_mut(run_id)
            && run.measuring
        {
            run.measure_again = true;
        }
        match &update {
            Some(u) if u.how == UpdateHow::Conflict => self.offer_conflict(run_id, u.clone()),
            Some(_) => self.withdraw_conflict(run_id),
            None => {}
        }
        if update
            .as_ref()
            .is_some_and(|u| !matches!(u.how, UpdateHow::Conflict | UpdateHow::UpToDate))
        {
            // Its change counts from the new base now.
            self.measure(run_id);
        }
        if let Some(to) = reply {
            self.reply(
                to,
                Ok(Response::Workspace(Box::new(WorkspaceActionView {
                    run_id: run_id.to_string(),
                    action: action.to_string(),
                    workspace: after,
                    merge,
                    update,
                }))),
            );
        }
    }

    /// Offers, in Needs you, the follow-up that hands a conflict of the run's branch with
    /// its base to the run (an active run, in memory: a finished one takes no follow-up).
    fn offer_conflict(&mut self, run_id: &str, conflict: crate::workspace::UpdateView) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        if !run.state().is_active() || run.ending.is_some() || conflict.follow_up.is_none() {
            return;
        }
        let mut batch = Batch::default();
        run.note(
            &mut batch,
            format!(
                "offered: a follow-up asking it to merge {} and resolve the conflicts in {} (enter on it in Needs you, or `drover follow-up {run_id}`)",
                conflict.base,
                conflict.files.join(", ")
            ),
            now,
        );
        run.conflict_offer = Some(conflict);
        run.touch(&mut batch);
        self.commit(batch);
    }

    /// A clean update: the conflict offered before is gone.
    fn withdraw_conflict(&mut self, run_id: &str) {
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        if run.conflict_offer.take().is_some() {
            let mut batch = Batch::default();
            run.touch(&mut batch);
            self.commit(batch);
        }
    }

    /// Records a run's workspace: in memory (with a note) and published, or — for a run
    /// not in memory — its ledger row, published again when its row came along.
    fn workspace_changed(
        &mut self,
        run_id: &str,
        after: WorkspaceView,
        row: Option<Box<RunSummary>>,
        note: Option<String>,
    ) {
        let now = self.now;
        let mut batch = Batch::default();
        if let Some(run) = self.runs.get_mut(run_id) {
            run.workspace = after;
            if let Some(note) = note {
                run.note(&mut batch, note, now);
            }
            run.save_workspace(&mut batch, now);
        } else {
            batch.ops.push(WriteOp::UpdateRun {
                run_id: run_id.to_string(),
                patch: Box::new(RunPatch {
                    updated_at: now,
                    workspace: serde_json::to_value(&after).ok(),
                    ..RunPatch::default()
                }),
            });
            if let Some(mut row) = row {
                row.workspace = Some(Box::new(after));
                batch.events.push(DispatchEvent::RunChanged { run: *row });
            }
        }
        self.commit(batch);
    }

    /// `diff`, `merge`, `keep`, `discard`: on a run in memory at once, else after reading
    /// it from the ledger.
    pub(super) fn workspace_request(&mut self, to: ReplyTo, run_id: &str, action: Action) {
        let Some(run) = self.runs.get(run_id) else {
            return self.load(
                Fetch::View {
                    run_id: run_id.to_string(),
                },
                Then::Workspace {
                    to,
                    run_id: run_id.to_string(),
                    action,
                },
            );
        };
        let target = Target::of(run);
        if let Err(e) = self.start_action(to, run_id, target, action) {
            self.reply_now(to, Err(e));
        }
    }

    /// The ledger's view of a run a workspace request named.
    pub(super) fn workspace_loaded(
        &mut self,
        to: ReplyTo,
        run_id: &str,
        action: Action,
        view: RunView,
    ) {
        if self.runs.contains_key(run_id) {
            // Back in memory meanwhile (resumed): ask again there.
            return self.workspace_request(to, run_id, action);
        }
        let row = RunSummary {
            head: view.head.clone(),
            pending: 0,
            needs_input: false,
            escalation_offered: view.escalation.is_some(),
            script_approval: view.script_approval.is_some(),
            conflict_offered: view.conflict_offer.is_some(),
            workspace: view.workspace.clone().map(Box::new),
            result_status: view.last_result.as_ref().and_then(|r| r.status.clone()),
            parent_run: view.parent_run.clone(),
            depth: view.depth,
            workflow_id: None,
            sandbox: view.sandbox,
        };
        let target = Target {
            workspace: view.workspace,
            state: view.head.state,
            in_turn: view.head.state.is_active(),
            title: view.head.title,
            summary: view.last_result.as_ref().and_then(|r| r.summary.clone()),
            task: view.task,
            result: view.last_result,
            row: Some(Box::new(row)),
        };
        if let Err(e) = self.start_action(to, run_id, target, action) {
            self.reply_now(to, Err(e));
        }
    }

    fn start_action(
        &mut self,
        to: ReplyTo,
        run_id: &str,
        target: Target,
        action: Action,
    ) -> Result<(), DroverError> {
        let ws = match &target.workspace {
            Some(ws) if ws.is_worktree() => ws.clone(),
            other => return Err(no_worktree(run_id, other.as_ref())),
        };
        let ready = ws.status == WorkspaceStatus::Ready;
        let word = action.word();
        if !matches!(action, Action::Diff { .. }) && self.workspace_busy.contains(run_id) {
            return Err(DroverError::new(
                ErrorCode::WorkspaceBusy,
                format!(
                    "a merge, keep or discard of run {run_id} is under way; try again when it is done"
                ),
            ));
        }
        let task = match action {
            Action::Diff { file, stat } => {
                if ws.status == WorkspaceStatus::Preparing {
                    return Err(run_active(
                        run_id,
                        target.state,
                        "its worktree is being made; try again in a moment",
                    ));
                }
                if !ready {
                    return Err(no_worktree(run_id, Some(&ws)));
                }
                Task::Diff {
                    workspace: ws,
                    file,
                    stat,
                }
            }
            Action::Merge { squash, message } => {
                if target.in_turn || ws.status == WorkspaceStatus::Preparing {
                    return Err(run_active(
                        run_id,
                        target.state,
                        &format!(
                            "a turn is running; merge when it is idle (`drover wait {run_id} --until idle`)"
                        ),
                    ));
                }
                if !ready {
                    return Err(no_worktree(run_id, Some(&ws)));
                }
                let text = message
                    .filter(|m| crate::text::has_visible_text(m))
                    .or(target.summary)
                    .unwrap_or_else(|| target.title.clone());
                Task::Merge {
                    workspace: ws,
                    ask: MergeAsk {
                        run_id: run_id.to_string(),
                        title: target.title.clone(),
                        message: commit_message(run_id, &text),
                        squash,
                        clean_up: target.state.is_terminal(),
                    },
                }
            }
            Action::Update { rebase } => {
                if target.in_turn || ws.status == WorkspaceStatus::Preparing {
                    return Err(run_active(
                        run_id,
                        target.state,
                        &format!(
                            "a turn is running; update its branch when it is idle (`drover wait {run_id} --until idle`)"
                        ),
                    ));
                }
                if !ready {
                    return Err(no_worktree(run_id, Some(&ws)));
                }
                let text = target.summary.unwrap_or_else(|| target.title.clone());
                Task::Update {
                    workspace: ws,
                    message: commit_message(run_id, &text),
                    rebase,
                }
            }
            Action::Keep | Action::Discard => {
                if target.state.is_active() {
                    return Err(run_active(
                        run_id,
                        target.state,
                        &format!(
                            "its worktree is in use; stop or complete it first, then {word} it"
                        ),
                    ));
                }
                match action {
                    Action::Keep if ready => {
                        let text = target.summary.unwrap_or_else(|| target.title.clone());
                        Task::Keep {
                            workspace: ws,
                            message: commit_message(run_id, &text),
                        }
                    }
                    Action::Discard
                        if matches!(
                            ws.status,
                            WorkspaceStatus::Ready
                                | WorkspaceStatus::Kept
                                | WorkspaceStatus::Missing
                        ) =>
                    {
                        Task::Discard {
                            workspace: ws,
                            root: self.worktree_root(),
                        }
                    }
                    _ => return Err(no_worktree(run_id, Some(&ws))),
                }
            }
            Action::Pr(wish) => self.pr_task(run_id, &target, ws, wish)?,
        };
        if !matches!(task, Task::Diff { .. }) {
            self.workspace_busy.insert(run_id.to_string());
        }
        self.job(run_id, task, Some(to), target.row);
        Ok(())
    }

    /// What becomes of a finished run's worktree when it leaves the trays: refused while
    /// it holds unmerged work (unless `force`, which keeps the work on its branch, and the
    /// answer says so: the second value, the branch); discarded when it holds none; when
    /// the worktree is already gone (kept, or vanished), released — its entry pruned, its
    /// branch deleted if it holds no commits beyond its base.
    pub(super) fn removal(
        &self,
        run_id: &str,
        ws: Option<&WorkspaceView>,
        force: bool,
    ) -> Result<(Option<Task>, Option<String>), DroverError> {
        let Some(ws) = ws.filter(|w| w.is_worktree() && w.branch.is_some()) else {
            return Ok((None, None));
        };
        if !ws.has_worktree() {
            return Ok(match ws.status {
                WorkspaceStatus::Merged | WorkspaceStatus::Discarded => (None, None),
                _ => (Some(Task::Release(ws.clone())), None),
            });
        }
        if !ws.unmerged() {
            return Ok((
                Some(Task::Discard {
                    workspace: ws.clone(),
                    root: self.worktree_root(),
                }),
                None,
            ));
        }
        if !force {
            let change = ws
                .change
                .map(|c| format!(" ({})", c.words()))
                .unwrap_or_default();
            return Err(DroverError::new(
                ErrorCode::UnmergedWork,
                format!(
                    "run {run_id} has unmerged work in its worktree{change} on {}: merge it (`drover merge {run_id}`), keep its branch (`drover keep {run_id}`) or discard it (`drover discard {run_id}`) first, or remove it with --force (its work stays on the branch)",
                    ws.branch.as_deref().unwrap_or("its branch")
                ),
            ));
        }
        Ok((
            Some(Task::Keep {
                workspace: ws.clone(),
                message: commit_message(run_id, "work kept when the run was removed"),
            }),
            ws.branch.clone(),
        ))
    }

    /// Runs the git work of a run that left the trays (nothing is published for it).
    pub(super) fn after_removal(&mut self, run_id: &str, task: Task) {
        self.job(run_id, task, None, None);
    }
}

/// Whether a run holds its shared directory: its agent may be writing now (a turn), or
/// it is queued to start one. An idle run does not (a follow-up to it is the user's own
/// call), nor does one held on a route card.
fn writes_now(run: &Run) -> bool {
    run.state().is_active() && (in_turn(run) || run.state() == RunState::Queued)
}

/// Whether a run is in a turn, or about to start one (its agent may be writing).
fn in_turn(run: &Run) -> bool {
    run.turn_in_flight
        || run.preparing_until.is_some()
        || run.launching
        || matches!(
            run.state(),
            RunState::Starting | RunState::Running | RunState::AwaitingPermission
        )
}

/// The message of the commit of a run's work: `text`, then a line naming the run.
fn commit_message(run_id: &str, text: &str) -> String {
    let text = clip(text.trim(), 2_000);
    format!("{text}\n\ndrover run {run_id}")
}

fn unexpected(outcome: &Outcome) -> DroverError {
    DroverError::new(
        ErrorCode::Internal,
        format!("git work came back in an unexpected shape ({outcome:?})"),
    )
}
