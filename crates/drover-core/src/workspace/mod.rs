//! Workspaces (docs/ARCHITECTURE.md §"Workspaces"): where a run works — its own git
//! worktree on a `drover/…` branch made from the user's HEAD, or the shared directory it
//! was given — and what it changed there, with merge, keep and discard.
//!
//! Owns the workspace's data (the [`WorkspaceView`] the ledger keeps and the API shows,
//! the change and diff shapes), the pure helpers that name branches and directories, and
//! the git work itself ([`ops`]: create, check, measure, diff, merge, keep, discard,
//! release, prune), every git command going through [`git`]. The dispatcher's core decides when
//! each runs (as an effect); its driver runs them off the dispatcher's task.
//!
//! What must stay true:
//! - the user's checkout is changed only by [`ops::merge`], and a merge that cannot finish
//!   changes nothing in it (everything that can refuse is checked before the first ref
//!   moves);
//! - nothing with unmerged work is deleted: keep commits what is uncommitted onto the
//!   run's branch before the worktree goes; only discard deletes work, and only when asked;
//!   a branch is deleted without asking only when it holds no commits beyond its base
//!   (release), so no empty `drover/…` branch or stale worktree entry is left behind;
//! - the diff is git's own (`git diff`), never one computed here;
//! - what git prints is bounded (file lists, patches) and untrusted.

pub mod forge;
pub mod git;
pub mod open;
pub mod ops;
pub mod place;
pub mod scripts;

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

use crate::{DroverError, ErrorCode};

/// A commit as shown to the user: its first ten characters, `?` when unknown.
pub fn short_commit(commit: Option<&str>) -> String {
    commit.map_or_else(|| "?".to_string(), |c| c.chars().take(10).collect())
}

/// How a run's directory is set up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkspaceMode {
    /// A git worktree of its own on a new `drover/…` branch.
    Worktree,
    /// The directory it was given, as is.
    #[default]
    Shared,
}

impl WorkspaceMode {
    /// Both modes.
    pub const ALL: [WorkspaceMode; 2] = [WorkspaceMode::Worktree, WorkspaceMode::Shared];

    /// The mode as specs and the config write it (`worktree`, `shared`).
    pub fn as_str(self) -> &'static str {
        match self {
            WorkspaceMode::Worktree => "worktree",
            WorkspaceMode::Shared => "shared",
        }
    }

    /// The word as a user types it, case-insensitive.
    pub fn from_word(word: &str) -> Option<WorkspaceMode> {
        let word = word.trim();
        Self::ALL
            .into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(word))
    }
}

/// Where a run's worktree stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceStatus {
    /// Being created (or checked, for a resumed run).
    Preparing,
    /// The worktree is there: the run works in it, or its work waits for review.
    Ready,
    /// Merged into its base branch; the worktree and branch of a finished run are gone.
    Merged,
    /// The worktree is gone; the branch keeps the work (uncommitted work was committed).
    Kept,
    /// The worktree and the branch were deleted.
    Discarded,
    /// The worktree vanished outside drover.
    Missing,
    /// It could not be made.
    Failed,
}

impl WorkspaceStatus {
    /// The status as the ledger and the API write it (`ready`, `merged`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            WorkspaceStatus::Preparing => "preparing",
            WorkspaceStatus::Ready => "ready",
            WorkspaceStatus::Merged => "merged",
            WorkspaceStatus::Kept => "kept",
            WorkspaceStatus::Discarded => "discarded",
            WorkspaceStatus::Missing => "missing",
            WorkspaceStatus::Failed => "failed",
        }
    }
}

/// Lines and files a run changed against its base commit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChangeStat {
    /// How many files changed.
    pub files: u32,
    /// Lines added.
    pub added: u64,
    /// Lines removed.
    pub removed: u64,
}

impl ChangeStat {
    /// Whether no file changed.
    pub fn is_empty(&self) -> bool {
        self.files == 0
    }

    /// `+12 −3 · 4 files` (the run line's words).
    pub fn words(&self) -> String {
        format!(
            "+{} −{} · {} file{}",
            self.added,
            self.removed,
            self.files,
            crate::text::plural(self.files as usize)
        )
    }
}

/// A run's workspace, as the ledger keeps it (`runs.workspace_json`) and every view shows
/// it (`workspace` in `runs --json` and `show --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceView {
    /// Worktree or shared.
    pub mode: WorkspaceMode,
    /// Where the worktree stands (a shared workspace is always `ready`).
    pub status: WorkspaceStatus,
    /// Where the run works: the worktree's counterpart of the directory it was given, or
    /// that directory itself (shared). Unknown while the worktree is being made.
    #[serde(default)]
    pub dir: Option<String>,
    /// The user's checkout (the top of the work tree the run was dispatched in).
    #[serde(default)]
    pub checkout: Option<String>,
    /// The run's own worktree.
    #[serde(default)]
    pub worktree: Option<String>,
    /// `drover/<run>-<slug>`.
    #[serde(default)]
    pub branch: Option<String>,
    /// The branch the user's checkout was on (none for a detached HEAD).
    #[serde(default)]
    pub base_branch: Option<String>,
    /// The commit the run's branch started from; its change is counted against it.
    #[serde(default)]
    pub base_commit: Option<String>,
    /// The run's change, as last worked out.
    #[serde(default)]
    pub change: Option<ChangeStat>,
    /// The pull request opened from the run's branch (`drover pr`), as last read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr: Option<forge::PrView>,
    /// The host the worktree (and its checkout) is on (docs/ARCHITECTURE.md §"Hosts"):
    /// every path above is the host's, and its git work runs there. `None`: this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

impl WorkspaceView {
    /// A shared run's workspace: the directory it was given.
    pub fn shared(dir: &Path) -> WorkspaceView {
        WorkspaceView {
            mode: WorkspaceMode::Shared,
            status: WorkspaceStatus::Ready,
            dir: Some(dir.display().to_string()),
            checkout: None,
            worktree: None,
            branch: None,
            base_branch: None,
            base_commit: None,
            change: None,
            pr: None,
            host: None,
        }
    }

    /// A worktree that is being made.
    pub fn preparing() -> WorkspaceView {
        WorkspaceView {
            mode: WorkspaceMode::Worktree,
            status: WorkspaceStatus::Preparing,
            ..WorkspaceView::shared(Path::new(""))
        }
        .without_dir()
    }

    fn without_dir(mut self) -> WorkspaceView {
        self.dir = None;
        self
    }

    /// Whether the run has (or had) a worktree of its own.
    pub fn is_worktree(&self) -> bool {
        self.mode == WorkspaceMode::Worktree
    }

    /// The worktree is on disk (as far as drover knows).
    pub fn has_worktree(&self) -> bool {
        self.is_worktree() && self.status == WorkspaceStatus::Ready && self.worktree.is_some()
    }

    /// Whether removing the worktree could lose work: it is there and its change is not
    /// known to be empty.
    pub fn unmerged(&self) -> bool {
        self.has_worktree() && self.change.is_none_or(|c| !c.is_empty())
    }

    /// The run's worktree, as a path.
    pub fn worktree_path(&self) -> Option<PathBuf> {
        self.worktree.as_deref().map(PathBuf::from)
    }

    /// The user's checkout, as a path.
    pub fn checkout_path(&self) -> Option<PathBuf> {
        self.checkout.as_deref().map(PathBuf::from)
    }
}

/// One changed file of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStat {
    /// The file's path, relative to the top of the worktree.
    pub path: String,
    /// Where a renamed (or copied) file came from.
    #[serde(default)]
    pub old_path: Option<String>,
    /// `added`, `modified`, `deleted`, `renamed`, `copied`, `type_changed`.
    pub status: String,
    /// Lines added (0 for a binary file).
    pub added: u64,
    /// Lines removed (0 for a binary file).
    pub removed: u64,
    /// git counts no lines for a binary file.
    #[serde(default)]
    pub binary: bool,
}

/// The answer to `diff`: what a run changed against its base commit — committed on its
/// branch, uncommitted in the worktree, untracked files included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffView {
    /// The run whose change this is.
    pub run_id: String,
    /// The run's branch (`drover/<run>-<slug>`).
    pub branch: Option<String>,
    /// The branch the run started from, and merges into; `None` for a detached HEAD.
    pub base_branch: Option<String>,
    /// The commit the change is counted against.
    pub base_commit: Option<String>,
    /// Totals over `files`.
    pub change: ChangeStat,
    /// The changed files (at most [`ops::MAX_FILES`]).
    pub files: Vec<FileStat>,
    /// The file the patch is of (`--file`), when one was asked for.
    #[serde(default)]
    pub file: Option<String>,
    /// git's unified diff (of `file`, or of every file); absent for `--stat`.
    #[serde(default)]
    pub patch: Option<String>,
    /// The file list or the patch was cut at its bound.
    #[serde(default)]
    pub truncated: bool,
}

/// How a merge went in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MergeHow {
    /// The base branch moved forward to the run's branch tip.
    FastForward,
    /// A merge commit joins the base branch and the run's branch.
    MergeCommit,
    /// The whole change went in as one new commit on the base branch.
    Squash,
    /// The base branch already had everything.
    UpToDate,
}

impl MergeHow {
    /// How the merge went in, in words (`fast-forward`, `merge commit`, …).
    pub fn words(self) -> &'static str {
        match self {
            MergeHow::FastForward => "fast-forward",
            MergeHow::MergeCommit => "merge commit",
            MergeHow::Squash => "one squashed commit",
            MergeHow::UpToDate => "nothing new",
        }
    }
}

/// How an update of a run's branch from its base went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpdateHow {
    /// The branch already had everything of its base.
    UpToDate,
    /// The base was merged into the branch (a merge commit).
    Merged,
    /// The branch's commits were replayed on the base.
    Rebased,
    /// The base and the branch conflict: nothing was changed (the attempt was aborted);
    /// the follow-up that hands the conflict to the run is offered.
    Conflict,
}

/// What an update of a run's branch from its base did (`drover update`, `u`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateView {
    /// How it went.
    pub how: UpdateHow,
    /// The base branch.
    pub base: String,
    /// The run's branch's tip after it (unchanged on a conflict).
    pub commit: String,
    /// The files the base changed on the branch, or the files that conflict.
    pub files: Vec<String>,
    /// On a conflict: the follow-up that asks the run to merge its base and resolve the
    /// conflicts (drover never sends it unasked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_up: Option<String>,
}

/// What a merge did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeView {
    /// How the merge went in.
    pub how: MergeHow,
    /// The base branch's new tip.
    pub commit: String,
    /// The base branch.
    pub into: String,
    /// The files the merge changed in the base branch.
    pub files: Vec<String>,
    /// The base branch was checked out, and its work tree was brought along; otherwise
    /// only the branch moved.
    pub checkout_updated: bool,
    /// The run's worktree and branch were removed (a finished run's work is merged).
    pub cleaned_up: bool,
}

/// What `merge`, `keep` and `discard` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceActionView {
    /// The run whose workspace it is.
    pub run_id: String,
    /// `merge`, `keep` or `discard`.
    pub action: String,
    /// The workspace after the action.
    pub workspace: WorkspaceView,
    /// What the merge did (only for `merge`).
    #[serde(default)]
    pub merge: Option<MergeView>,
    /// What the update did (only for `update`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<UpdateView>,
}

/// Git work the dispatcher's core asks for (as an effect), carried out by [`perform`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Task {
    /// Make a new run's worktree.
    Create(ops::CreatePlan),
    /// Run a new worktree's setup commands (`[workspaces] setup`, the repository's approved
    /// `.drover/setup`), in order, each bounded by `timeout`.
    Setup {
        /// The commands.
        steps: Vec<scripts::SetupStep>,
        /// How long each may take.
        timeout: std::time::Duration,
    },
    /// Check that a resumed run's worktree is still there.
    Check(WorkspaceView),
    /// Work out the run's change.
    Measure(WorkspaceView),
    /// Read the run's diff.
    Diff {
        /// The run's workspace.
        workspace: WorkspaceView,
        /// Only this file's patch (`--file`).
        file: Option<String>,
        /// Only the file list and counts, no patch (`--stat`).
        stat: bool,
    },
    /// Merge the run's work into its base branch.
    Merge {
        /// The run's workspace.
        workspace: WorkspaceView,
        /// How to merge.
        ask: ops::MergeAsk,
    },
    /// Bring the run's branch up to date with its base branch, in its worktree.
    Update {
        /// The run's workspace.
        workspace: WorkspaceView,
        /// The message of the commit of what is uncommitted in the worktree.
        message: String,
        /// Rebase the branch's commits on the base instead of merging the base in.
        rebase: bool,
    },
    /// Keep the run's branch: commit what is uncommitted onto it, then remove the
    /// worktree.
    Keep {
        /// The run's workspace.
        workspace: WorkspaceView,
        /// The message of the commit of what is uncommitted.
        message: String,
    },
    /// Delete the run's worktree and its branch, work and all.
    Discard {
        /// The run's workspace.
        workspace: WorkspaceView,
        /// The worktree root: with the repository gone, only a directory under it is
        /// removed.
        root: PathBuf,
    },
    /// A run whose worktree is gone leaves the trays: prune its worktree entry, and delete
    /// its branch when it holds no commits beyond its base.
    Release(WorkspaceView),
    /// Push the run's branch and open (or read) its pull request.
    Pr {
        /// The run's workspace.
        workspace: WorkspaceView,
        /// What the pull request is asked to be.
        ask: forge::PrAsk,
    },
    /// `git worktree prune` in these repositories (at start).
    Prune {
        /// The user's checkouts of the repositories.
        checkouts: Vec<PathBuf>,
    },
}

impl Task {
    /// The host whose workspace it acts on (docs/ARCHITECTURE.md §"Hosts"); `None` for
    /// this machine.
    pub fn host(&self) -> Option<&str> {
        match self {
            Task::Create(plan) => plan.host.as_deref(),
            Task::Check(ws) | Task::Measure(ws) | Task::Release(ws) => ws.host.as_deref(),
            Task::Diff { workspace, .. }
            | Task::Merge { workspace, .. }
            | Task::Update { workspace, .. }
            | Task::Keep { workspace, .. }
            | Task::Discard { workspace, .. }
            | Task::Pr { workspace, .. } => workspace.host.as_deref(),
            Task::Setup { .. } | Task::Prune { .. } => None,
        }
    }

    /// What it does, in a few words (for logs and notes).
    pub fn words(&self) -> &'static str {
        match self {
            Task::Create(_) => "creating the worktree",
            Task::Setup { .. } => "running the worktree's setup",
            Task::Check(_) => "checking the worktree",
            Task::Measure(_) => "working out the change",
            Task::Diff { .. } => "reading the diff",
            Task::Merge { .. } => "merging",
            Task::Update { .. } => "updating the branch from its base",
            Task::Keep { .. } => "keeping the branch",
            Task::Discard { .. } => "discarding the worktree",
            Task::Release(_) => "releasing the branch",
            Task::Pr { ask, .. } if ask.refresh => "reading the pull request",
            Task::Pr { .. } => "pushing the branch and opening its pull request",
            Task::Prune { .. } => "pruning stale worktrees",
        }
    }
}

/// What a [`Task`] came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The worktree was made.
    Created(ops::Created),
    /// The setup commands ran, each with how long it took and the end of its output.
    SetupRan(Vec<scripts::StepRan>),
    /// The worktree is still there.
    Checked,
    /// The run's change, worked out.
    Measured(ChangeStat),
    /// The run's diff.
    Diff(Box<DiffView>),
    /// The merge went in: the workspace after it, and what it did.
    Merged(WorkspaceView, MergeView),
    /// The run's branch was brought up to date with its base (or a conflict found and
    /// nothing changed): the workspace after it, and what it did.
    Updated(WorkspaceView, UpdateView),
    /// The merge was refused because the run's branch conflicts with its base: the
    /// refusal, and the conflict with the follow-up that hands it to the run.
    MergeConflict(DroverError, UpdateView),
    /// The branch was kept: the workspace after it.
    Kept(WorkspaceView),
    /// The worktree and branch were deleted: the workspace after it.
    Discarded(WorkspaceView),
    /// A gone worktree's entry was pruned, its branch deleted if it held no commits: the
    /// workspace after it.
    Released(WorkspaceView),
    /// The branch was pushed, its pull request opened or read.
    Pr(Box<forge::PrDone>),
    /// Stale worktree entries were pruned.
    Pruned,
}

/// Carries out one task of run `run_id`'s workspace `at` its place (here, or the run's
/// host: every git command and file operation of it runs there, [`git::within`]); a
/// worktree it removes gets `teardown` run first (when given). Returns the outcome and
/// what the teardown came to (for the run's notes; `None` when none ran or was due).
pub async fn perform_with(
    run_id: &str,
    task: Task,
    teardown: Option<scripts::Teardown>,
    at: git::Where,
) -> (Result<Outcome, DroverError>, Option<String>) {
    git::within(at, perform_here(run_id, task, teardown)).await
}

async fn perform_here(
    run_id: &str,
    task: Task,
    teardown: Option<scripts::Teardown>,
) -> (Result<Outcome, DroverError>, Option<String>) {
    if teardown.is_none() {
        return (perform(run_id, task).await, None);
    }
    scripts::TEARDOWN
        .scope(std::cell::RefCell::new((teardown, None)), async {
            let outcome = perform(run_id, task).await;
            let note = scripts::TEARDOWN
                .try_with(|t| t.borrow_mut().1.take())
                .ok()
                .flatten();
            (outcome, note)
        })
        .await
}

/// Carries out one task of run `run_id`'s workspace.
pub async fn perform(run_id: &str, task: Task) -> Result<Outcome, DroverError> {
    Ok(match task {
        Task::Create(plan) => Outcome::Created(ops::create(&plan).await?),
        Task::Setup { steps, timeout } => {
            Outcome::SetupRan(scripts::run_steps(&steps, timeout).await?)
        }
        Task::Check(ws) => {
            ops::check(&ws).await?;
            Outcome::Checked
        }
        Task::Measure(ws) => Outcome::Measured(ops::measure(&ws).await?),
        Task::Diff {
            workspace,
            file,
            stat,
        } => Outcome::Diff(Box::new(
            ops::diff(run_id, &workspace, file.as_deref(), stat).await?,
        )),
        Task::Merge { workspace, ask } => match ops::merge(&workspace, &ask).await {
            Ok((after, merged)) => Outcome::Merged(after, merged),
            Err(e) if e.code == ErrorCode::MergeConflict => {
                match ops::conflict_of(&workspace).await {
                    Ok(conflict) => Outcome::MergeConflict(e, conflict),
                    Err(_) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        },
        Task::Update {
            workspace,
            message,
            rebase,
        } => {
            let (after, updated) = ops::update(&workspace, &message, rebase).await?;
            Outcome::Updated(after, updated)
        }
        Task::Keep { workspace, message } => Outcome::Kept(ops::keep(&workspace, &message).await?),
        Task::Discard { workspace, root } => {
            Outcome::Discarded(ops::discard(&workspace, &root).await?)
        }
        Task::Release(ws) => Outcome::Released(ops::release(&ws).await?),
        Task::Pr { workspace, ask } => Outcome::Pr(Box::new(forge::pr(&workspace, &ask).await?)),
        Task::Prune { checkouts } => {
            ops::prune(&checkouts).await;
            Outcome::Pruned
        }
    })
}

/// Whether `dir` is inside a git work tree, as far as the file system tells at a glance:
/// it or a directory above it holds `.git` — a directory with a `HEAD`, or a linked
/// worktree's file that points to one (`gitdir: …`). git itself has the last word when
/// the worktree is made.
pub fn in_work_tree(dir: &Path) -> bool {
    dir.ancestors().any(|d| {
        let dot_git = d.join(".git");
        if dot_git.is_dir() {
            return dot_git.join("HEAD").is_file();
        }
        use std::io::Read;
        let mut head = [0u8; 8];
        std::fs::File::open(&dot_git)
            .and_then(|mut f| f.read_exact(&mut head))
            .is_ok_and(|()| &head == b"gitdir: ")
    })
}

/// The git common directory of the repository `dir` is in (its main checkout's `.git`,
/// for `dir` in any of its worktrees too), read from the `.git` files, without git.
/// `None` outside a git work tree.
pub fn git_common_dir(dir: &Path) -> Option<PathBuf> {
    crate::providers::sandbox::git_dirs(dir).map(|g| g.common_dir)
}

/// `NO_WORKTREE`: why a run has no worktree to act on (shared, merged, kept, discarded,
/// missing, never made).
pub fn no_worktree(run_id: &str, ws: Option<&WorkspaceView>) -> DroverError {
    let why = match ws {
        None => "has no workspace on record (it ran before workspaces)".to_string(),
        Some(ws) if !ws.is_worktree() => format!(
            "works in the shared directory {}; it has no worktree or branch of its own",
            ws.dir.as_deref().unwrap_or("?")
        ),
        Some(ws) => match ws.status {
            WorkspaceStatus::Merged => "was merged; its worktree and branch are gone".into(),
            WorkspaceStatus::Kept => format!(
                "has no worktree any more: its branch {} was kept (git merge it, or `drover discard {run_id}` deletes it)",
                ws.branch.as_deref().unwrap_or("?")
            ),
            WorkspaceStatus::Discarded => "was discarded: its worktree and branch are gone".into(),
            WorkspaceStatus::Missing => format!(
                "has lost its worktree (deleted outside drover); `drover discard {run_id}` deletes its branch"
            ),
            WorkspaceStatus::Failed => "never got its worktree: it could not be made".into(),
            WorkspaceStatus::Preparing | WorkspaceStatus::Ready => "has no worktree yet".into(),
        },
    };
    DroverError::new(ErrorCode::NoWorktree, format!("run {run_id} {why}"))
}

/// The workspace of a run whose diff can be read: a worktree that is there
/// (`NO_WORKTREE` otherwise).
pub fn diffable(run_id: &str, ws: Option<&WorkspaceView>) -> Result<WorkspaceView, DroverError> {
    match ws {
        Some(ws) if ws.has_worktree() => Ok(ws.clone()),
        other => Err(no_worktree(run_id, other)),
    }
}

/// The longest slug of a title in a branch name.
const SLUG_MAX: usize = 40;

/// `Fix the login redirect!` → `fix-the-login-redirect`: lower-case ASCII letters and
/// digits, anything else one `-`, at most [`SLUG_MAX`] characters, never a `-` at either
/// end. Always a valid part of a git ref name.
pub fn slug(title: &str) -> String {
    let mut out = String::new();
    for c in title.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
        if out.len() >= SLUG_MAX {
            break;
        }
    }
    out.trim_end_matches('-').to_string()
}

/// The run's branch: `drover/<run id>-<slug of the title>` (`drover/<run id>` when the
/// title has nothing to slug).
pub fn branch_name(run_id: &str, title: &str) -> String {
    let slug = slug(title);
    if slug.is_empty() {
        format!("drover/{run_id}")
    } else {
        format!("drover/{run_id}-{slug}")
    }
}

/// Where a run's worktree goes: `<root>/<name of the checkout's directory>/<run id>`.
pub fn worktree_dir(root: &Path, checkout: &Path, run_id: &str) -> PathBuf {
    let repo = checkout
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty() && n != "." && n != "..")
        .unwrap_or_else(|| "repository".to_string());
    root.join(repo).join(run_id)
}

/// Whether two directories are the same or one holds the other (lexically, on absolute
/// paths).
pub fn dirs_overlap(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// The first line of a message, for a commit subject.
pub fn subject(text: &str) -> String {
    crate::text::clip(&crate::text::one_line(text), 72)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_repository_of_a_worktree_is_its_main_checkouts_git_dir() {
        let top = tempfile::tempdir().unwrap();
        let main = top.path().join("main");
        std::fs::create_dir_all(main.join(".git/worktrees/w1")).unwrap();
        // A `.git` with no HEAD is no repository.
        assert_eq!(git_common_dir(&main), None);
        std::fs::write(main.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        let common = std::fs::canonicalize(main.join(".git")).unwrap();
        std::fs::create_dir_all(main.join("src/deep")).unwrap();
        assert_eq!(git_common_dir(&main.join("src/deep")), Some(common.clone()));
        // A worktree: `.git` names its gitdir, whose `commondir` leads back.
        let wt = top.path().join("wt");
        std::fs::create_dir_all(&wt).unwrap();
        let gitdir = main.join(".git/worktrees/w1");
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", gitdir.display())).unwrap();
        std::fs::write(gitdir.join("commondir"), "../..\n").unwrap();
        assert_eq!(git_common_dir(&wt), Some(common));
        assert_eq!(git_common_dir(&top.path().join("elsewhere")), None);
    }

    use super::*;

    #[test]
    fn slugs_and_branch_names_are_valid_ref_names() {
        assert_eq!(slug("Fix the login redirect!"), "fix-the-login-redirect");
        assert_eq!(slug("  --Über  café__v2.0  "), "ber-caf-v2-0");
        assert_eq!(slug("!!!"), "");
        assert!(slug(&"a very long title ".repeat(10)).len() <= SLUG_MAX);
        assert!(!slug(&"ab ".repeat(30)).ends_with('-'));
        assert_eq!(
            branch_name("rmc7x1k2a01", "Update the greeting"),
            "drover/rmc7x1k2a01-update-the-greeting"
        );
        assert_eq!(branch_name("r1", "…"), "drover/r1");
    }

    #[test]
    fn worktrees_go_under_the_root_by_repository_and_run() {
        assert_eq!(
            worktree_dir(Path::new("/data/worktrees"), Path::new("/src/app"), "r1"),
            PathBuf::from("/data/worktrees/app/r1")
        );
        assert_eq!(
            worktree_dir(Path::new("/w"), Path::new("/"), "r2"),
            PathBuf::from("/w/repository/r2")
        );
    }

    #[test]
    fn a_work_tree_is_a_dot_git_with_a_head_or_a_worktrees_gitdir_file() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("src/deep")).unwrap();
        assert!(
            !in_work_tree(&repo.join("src")),
            "an empty .git is no repository"
        );
        std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        assert!(in_work_tree(&repo.join("src/deep")));
        let linked = dir.path().join("linked");
        std::fs::create_dir_all(&linked).unwrap();
        std::fs::write(linked.join(".git"), "gitdir: /elsewhere/.git/worktrees/x\n").unwrap();
        assert!(in_work_tree(&linked));
        let odd = dir.path().join("odd");
        std::fs::create_dir_all(&odd).unwrap();
        std::fs::write(odd.join(".git"), "not git").unwrap();
        assert!(!in_work_tree(&odd));
    }

    #[test]
    fn overlapping_directories_hold_one_another() {
        assert!(dirs_overlap(Path::new("/a/b"), Path::new("/a")));
        assert!(dirs_overlap(Path::new("/a"), Path::new("/a/b/c")));
        assert!(dirs_overlap(Path::new("/a"), Path::new("/a")));
        assert!(!dirs_overlap(Path::new("/a/b"), Path::new("/a/bc")));
    }

    #[test]
    fn unmerged_work_is_a_worktree_whose_change_is_not_known_empty() {
        let mut ws = WorkspaceView {
            worktree: Some("/w/app/r1".into()),
            ..WorkspaceView::preparing()
        };
        ws.status = WorkspaceStatus::Ready;
        assert!(ws.unmerged(), "not measured yet: assume work");
        ws.change = Some(ChangeStat::default());
        assert!(!ws.unmerged());
        ws.change = Some(ChangeStat {
            files: 1,
            added: 2,
            removed: 0,
        });
        assert!(ws.unmerged());
        ws.status = WorkspaceStatus::Kept;
        assert!(!ws.unmerged(), "the branch keeps it");
        assert_eq!(
            ChangeStat {
                files: 4,
                added: 12,
                removed: 3
            }
            .words(),
            "+12 −3 · 4 files"
        );
    }
}
