//! The git work of a workspace: make a run's worktree, check it is still there, work out
//! its change, show its diff, merge it into its base branch, keep its branch, discard it,
//! prune stale worktree entries. Each is an async function the dispatcher's driver runs
//! off its task (and the offline CLI runs for `diff`); every git command goes through
//! [`super::git`].
//!
//! What must stay true:
//! - the run's change is counted from a snapshot of its worktree in an index file of
//!   drover's own (a copy of the worktree's index with `git add -A` applied), so
//!   untracked files count and the worktree's own index is never touched by a read;
//! - [`merge`] checks everything that can refuse (a conflict, a dirty checkout, a missing
//!   branch) before it moves any ref; its commits are made with `git commit-tree` and the
//!   checkout only ever fast-forwards to the result, so git itself refuses to overwrite a
//!   local change;
//! - commands on one repository run one at a time (a lock per checkout), so two runs'
//!   worktree commands never race on the repository's locks;
//! - every list and patch read from git is bounded.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::git::{self, Git, GitError};
use super::place;
use super::{
    ChangeStat, DiffView, FileStat, MergeHow, MergeView, UpdateHow, UpdateView, WorkspaceMode,
    WorkspaceStatus, WorkspaceView, subject,
};
use crate::{DroverError, ErrorCode};

/// How long making a worktree (a checkout of the whole tree) may take.
pub const CREATE_TIMEOUT: Duration = Duration::from_secs(300);
/// How long snapshotting a worktree (`git add -A` of everything in it) may take.
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(300);
/// Most files a diff lists.
pub const MAX_FILES: usize = 5_000;
/// Most bytes of a patch kept.
pub const MAX_PATCH_BYTES: usize = 4 * 1024 * 1024;
/// Most bytes of uncommitted changes carried into a new worktree.
const MAX_CARRY_BYTES: usize = 64 * 1024 * 1024;
/// Most files a merge's answer names.
const MAX_NAMED_FILES: usize = 200;

/// What making a run's worktree needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatePlan {
    /// The run the worktree is for.
    pub run_id: String,
    /// The directory the run was dispatched in (inside the user's checkout).
    pub cwd: PathBuf,
    /// Where worktrees go (`<root>/<repository>/<run>`).
    pub root: PathBuf,
    /// The new branch.
    pub branch: String,
    /// Bring the checkout's uncommitted changes (untracked files included) along.
    pub carry_changes: bool,
    /// Start on another run's branch instead of the user's HEAD (an escalation or retry).
    pub from: Option<ParentStart>,
    /// Directories of the checkout linked into the worktree (`[workspaces] link`).
    pub link: Vec<String>,
    /// The run's host: `cwd` and `root` are its paths, and the worktree is made there
    /// (docs/ARCHITECTURE.md §"Hosts"); a relative `root` is under the home there.
    pub host: Option<String>,
}

/// A run whose work a new run starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentStart {
    /// The run started from.
    pub run_id: String,
    /// Its workspace, whose branch (and uncommitted work) the new run starts from.
    pub workspace: WorkspaceView,
}

/// A new worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    /// The new run's workspace, `ready`.
    pub workspace: WorkspaceView,
    /// Files with uncommitted changes in the checkout that were not carried over.
    pub left_behind: usize,
    /// Files whose uncommitted changes were brought along (from the checkout, or from the
    /// parent's worktree).
    pub carried: usize,
    /// The run it started from, when it did.
    pub from_run: Option<String>,
    /// What made it ready to build: files copied by `.worktreeinclude`, directories
    /// linked, the setup command's end.
    pub ready: Readied,
}

/// What was done to make a new worktree ready to build.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Readied {
    /// Git-ignored files `.worktreeinclude` lists, copied from the checkout.
    pub included: usize,
    /// `[workspaces] link` directories linked from the checkout.
    pub linked: Vec<String>,
    /// The repository's own scripts found in the worktree (`.drover/setup`,
    /// `.drover/teardown`): they run only once approved, which the dispatcher decides.
    pub scripts: Vec<super::scripts::RepoScript>,
}

/// What a merge is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeAsk {
    /// The run whose work is merged.
    pub run_id: String,
    /// The run's title, put in the merge commit's message.
    pub title: String,
    /// The message of the commit of what is uncommitted in the worktree (and of the
    /// squashed commit).
    pub message: String,
    /// Merge as one squashed commit instead of fast-forward or a merge commit.
    pub squash: bool,
    /// Remove the worktree and the branch once merged (the run has finished).
    pub clean_up: bool,
}

fn unavailable(message: impl Into<String>) -> DroverError {
    DroverError::new(ErrorCode::WorkspaceUnavailable, message)
}

/// A git failure as a refusal: git missing is `WORKSPACE_UNAVAILABLE`, anything else
/// `GIT_FAILED` with what drover was doing and git's own words.
pub fn git_error(doing: &str, e: GitError) -> DroverError {
    match e {
        GitError::NotInstalled => unavailable(
            "git is not installed; install git (2.38 or newer), or dispatch with --workspace shared",
        ),
        other => {
            let hint = match &other {
                GitError::Failed { message, .. }
                    if message.contains("identity") || message.contains("user.email") =>
                {
                    "; tell git who you are: git config --global user.name \"…\" and user.email \"…\""
                }
                _ => "",
            };
            DroverError::new(ErrorCode::GitFailed, format!("{doing}: {other}{hint}"))
        }
    }
}

fn missing(ws: &WorkspaceView) -> DroverError {
    DroverError::new(
        ErrorCode::WorktreeMissing,
        format!(
            "the run's worktree {} is gone (deleted outside drover){}",
            ws.worktree.as_deref().unwrap_or("?"),
            ws.branch
                .as_deref()
                .map(|b| format!("; its branch {b} may still hold its commits"))
                .unwrap_or_default()
        ),
    )
}

/// The run's worktree, which must be on disk.
async fn worktree_of(ws: &WorkspaceView) -> Result<PathBuf, DroverError> {
    match ws.worktree_path() {
        Some(path) if place::is_dir(&path).await => Ok(path),
        Some(_) => Err(missing(ws)),
        None => Err(DroverError::new(
            ErrorCode::NoWorktree,
            "the run has no worktree of its own",
        )),
    }
}

async fn checkout_of(ws: &WorkspaceView) -> Result<PathBuf, DroverError> {
    match ws.checkout_path() {
        Some(path) if place::is_dir(&path).await => Ok(path),
        _ => Err(unavailable(format!(
            "the repository {} the run was made from is gone",
            ws.checkout.as_deref().unwrap_or("?")
        ))),
    }
}

/// One lock per repository (by its host and checkout), held for a whole operation.
async fn lock(checkout: &Path) -> tokio::sync::OwnedMutexGuard<()> {
    type Locks = HashMap<(Option<String>, PathBuf), Arc<tokio::sync::Mutex<()>>>;
    static LOCKS: OnceLock<std::sync::Mutex<Locks>> = OnceLock::new();
    let host = git::current().host().map(|t| t.name.clone());
    let mutex = {
        let mut locks = LOCKS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // Locks nobody holds or waits for are dropped, so the map stays as small as the
        // set of repositories in use.
        locks.retain(|_, m| Arc::strong_count(m) > 1);
        locks
            .entry((host, checkout.to_path_buf()))
            .or_default()
            .clone()
    };
    mutex.lock_owned().await
}

/// `rev-parse --verify -q REV^{commit}`: the commit, or `None` when there is none.
async fn commit_of(dir: &Path, rev: &str) -> Result<Option<String>, DroverError> {
    let spec = format!("{rev}^{{commit}}");
    let out = Git::at(dir)
        .run(&["rev-parse", "--verify", "-q", &spec])
        .await
        .map_err(|e| git_error("reading a commit", e))?;
    Ok(out.success().then(|| out.text()).filter(|t| !t.is_empty()))
}

async fn tree_of(dir: &Path, commit: &str) -> Result<String, DroverError> {
    let spec = format!("{commit}^{{tree}}");
    Git::at(dir)
        .ok(&["rev-parse", "--verify", &spec])
        .await
        .map_err(|e| git_error("reading a tree", e))
}

/// Whether `a` is an ancestor of (or equal to) `b`.
async fn is_ancestor(dir: &Path, a: &str, b: &str) -> Result<bool, DroverError> {
    let args = ["merge-base", "--is-ancestor", a, b];
    let out = Git::at(dir)
        .run(&args)
        .await
        .map_err(|e| git_error("comparing commits", e))?;
    match out.code {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => Err(git_error("comparing commits", git::failed(&args, &out))),
    }
}

async fn branch_exists(dir: &Path, branch: &str) -> Result<Option<String>, DroverError> {
    commit_of(dir, &format!("refs/heads/{branch}")).await
}

/// A snapshot of a worktree: an index file of drover's own holding everything in it
/// (untracked files included, ignored ones not). Removed when dropped.
struct Snapshot {
    at: git::Where,
    dir: PathBuf,
    index: PathBuf,
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        match &self.at {
            git::Where::Here => {
                let _ = std::fs::remove_file(&self.index);
            }
            // On a host the file goes with one more command there, off this drop.
            at @ git::Where::Host(_) => {
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    let (at, index) = (at.clone(), self.index.clone());
                    runtime.spawn(async move { place::remove_file_at(&at, &index).await });
                }
            }
        }
    }
}

impl Snapshot {
    async fn take(dir: &Path) -> Result<Snapshot, DroverError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let git_dir = Git::at(dir)
            .ok(&["rev-parse", "--absolute-git-dir"])
            .await
            .map_err(|e| git_error("finding the worktree's git directory", e))?;
        let git_dir = PathBuf::from(git_dir);
        let index = git_dir.join(format!(
            "drover-snapshot-{}-{}.index",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let snapshot = Snapshot {
            at: git::current(),
            dir: dir.to_path_buf(),
            index,
        };
        let own = git_dir.join("index");
        if place::is_file(&own).await {
            place::copy(&own, &snapshot.index).await.map_err(|e| {
                DroverError::new(
                    ErrorCode::GitFailed,
                    format!("cannot copy the worktree's index {}: {e}", own.display()),
                )
            })?;
        } else {
            snapshot
                .git()
                .ok(&["read-tree", "HEAD"])
                .await
                .map_err(|e| git_error("reading the worktree's HEAD", e))?;
        }
        snapshot
            .git()
            .timeout(SNAPSHOT_TIMEOUT)
            .ok(&["add", "-A", "--", ":/"])
            .await
            .map_err(|e| git_error("looking at the worktree's files", e))?;
        Ok(snapshot)
    }

    fn git(&self) -> Git {
        Git::at(&self.dir).index(&self.index)
    }

    /// The tree of everything in the worktree.
    async fn tree(&self) -> Result<String, DroverError> {
        self.git()
            .ok(&["write-tree"])
            .await
            .map_err(|e| git_error("writing the worktree's tree", e))
    }
}

/// Paths with uncommitted changes in a work tree (untracked files included), and whether
/// it is in the middle of a merge (an unmerged path).
async fn dirty_paths(dir: &Path) -> Result<(Vec<String>, bool), DroverError> {
    let out = Git::at(dir)
        .limit(16 * 1024 * 1024)
        .ok_bytes(&["status", "--porcelain=v1", "-z", "--untracked-files=all"])
        .await
        .map_err(|e| git_error("reading the checkout's status", e))?;
    let fields = git::nul_fields(&out);
    let mut paths = Vec::new();
    let mut unmerged = false;
    let mut i = 0;
    while i < fields.len() {
        let record = &fields[i];
        i += 1;
        if record.len() < 4 {
            continue;
        }
        let (xy, path) = record.split_at(3);
        let xy = xy.trim_end();
        if matches!(xy, "DD" | "AU" | "UD" | "UA" | "DU" | "AA" | "UU") {
            unmerged = true;
        }
        paths.push(path.to_string());
        if xy.starts_with('R') || xy.starts_with('C') {
            // The next field is where it came from: changed too.
            if let Some(from) = fields.get(i) {
                paths.push(from.clone());
            }
            i += 1;
        }
    }
    Ok((paths, unmerged))
}

impl Git {
    /// Like [`Git::ok`], with stdout as bytes (NUL-separated lists).
    async fn ok_bytes(&self, args: &[&str]) -> Result<Vec<u8>, GitError> {
        let out = self.run(args).await?;
        if out.success() {
            Ok(out.stdout)
        } else {
            Err(git::failed(args, &out))
        }
    }
}

/// Makes a run's worktree: a new branch at the user's HEAD (or at the parent run's
/// branch), checked out under the root, the run's directory at the same place inside it.
pub async fn create(plan: &CreatePlan) -> Result<Created, DroverError> {
    let top = Git::at(&plan.cwd)
        .ok(&["rev-parse", "--show-toplevel"])
        .await
        .map_err(|e| match e {
            GitError::Failed { .. } => unavailable(format!(
                "{} is not inside a git work tree; dispatch with --workspace shared, or `git init` there",
                plan.cwd.display()
            )),
            other => git_error("finding the repository", other),
        })?;
    let top = PathBuf::from(top);
    let prefix = Git::at(&plan.cwd)
        .ok(&["rev-parse", "--show-prefix"])
        .await
        .map_err(|e| git_error("finding the directory in the repository", e))?;
    let _lock = lock(&top).await;

    // Where the branch starts, what it is counted against, whose changes come along.
    let parent = match &plan.from {
        Some(p) => match p.workspace.branch.as_deref() {
            Some(branch) => branch_exists(&top, branch)
                .await?
                .map(|tip| (p, branch.to_string(), tip)),
            None => None,
        },
        None => None,
    };
    let (start, base_branch, base_commit, carry_from, from_run) = match parent {
        Some((p, _branch, tip)) => {
            let carry = p
                .workspace
                .worktree_path()
                .filter(|_| p.workspace.has_worktree());
            let carry = match carry {
                Some(w) if place::is_dir(&w).await => Some(w),
                _ => None,
            };
            let base_commit = p.workspace.base_commit.clone().unwrap_or(tip.clone());
            (
                tip,
                p.workspace.base_branch.clone(),
                base_commit,
                carry,
                Some(p.run_id.clone()),
            )
        }
        None => {
            let head = commit_of(&top, "HEAD").await?.ok_or_else(|| {
                unavailable(format!(
                    "the repository {} has no commit yet; commit something first, or dispatch with --workspace shared",
                    top.display()
                ))
            })?;
            let branch = Git::at(&top)
                .run(&["symbolic-ref", "--short", "-q", "HEAD"])
                .await
                .map_err(|e| git_error("reading the checkout's branch", e))?;
            let branch = branch.success().then(|| branch.text());
            let carry = plan.carry_changes.then(|| top.clone());
            (head.clone(), branch, head, carry, None)
        }
    };
    let left_behind = if carry_from.as_deref() == Some(top.as_path()) {
        0
    } else {
        dirty_paths(&top).await.map(|(p, _)| p.len()).unwrap_or(0)
    };

    let root = place::root(&plan.root)
        .await
        .map_err(|e| unavailable(format!("cannot place the worktree: {e}")))?;
    let worktree = super::worktree_dir(&root, &top, &plan.run_id);
    if place::exists(&worktree).await {
        return Err(unavailable(format!(
            "{} already exists; remove it, or set [workspaces] root elsewhere",
            worktree.display()
        )));
    }
    if let Some(parent_dir) = worktree.parent() {
        place::create_dir_all(parent_dir).await.map_err(|e| {
            unavailable(format!(
                "cannot create {}: {e}; set [workspaces] root to a writable directory",
                parent_dir.display()
            ))
        })?;
    }
    let path_text = worktree.to_string_lossy().into_owned();
    Git::at(&top)
        .timeout(CREATE_TIMEOUT)
        .ok(&[
            "worktree",
            "add",
            "--quiet",
            "-b",
            &plan.branch,
            &path_text,
            &start,
        ])
        .await
        .map_err(|e| git_error("creating the worktree", e))?;

    let made = async {
        let carried = match &carry_from {
            Some(source) => carry(source, &worktree).await?,
            None => 0,
        };
        // At the top of the checkout the run works in the worktree itself (no trailing
        // `/` from joining an empty path).
        let rel = prefix.trim_end_matches('/');
        let dir = if rel.is_empty() {
            worktree.clone()
        } else {
            worktree.join(rel)
        };
        place::create_dir_all(&dir).await.map_err(|e| {
            unavailable(format!(
                "cannot create {} in the worktree: {e}",
                dir.display()
            ))
        })?;
        let ready = make_ready(&top, &worktree, plan).await?;
        Ok::<_, DroverError>((carried, dir, ready))
    }
    .await;
    match made {
        Ok((carried, dir, ready)) => Ok(Created {
            workspace: WorkspaceView {
                mode: WorkspaceMode::Worktree,
                status: WorkspaceStatus::Ready,
                dir: Some(dir.display().to_string()),
                checkout: Some(top.display().to_string()),
                worktree: Some(path_text),
                branch: Some(plan.branch.clone()),
                base_branch,
                base_commit: Some(base_commit),
                change: None,
                pr: None,
                host: plan.host.clone(),
            },
            left_behind,
            carried,
            from_run,
            ready,
        }),
        Err(e) => {
            // Leave nothing half made.
            remove_worktree(&top, &worktree).await;
            let _ = Git::at(&top).run(&["branch", "-D", &plan.branch]).await;
            Err(e)
        }
    }
}

/// Makes a new worktree ready to build (docs/ARCHITECTURE.md §"Workspaces"): the
/// git-ignored files the repository's `.worktreeinclude` lists are copied from the
/// checkout `top` (bounded like carried changes), the `[workspaces] link` directories that
/// exist in the checkout are linked, and the repository's own scripts are read (the
/// setup commands run afterwards, once the dispatcher has them approved:
/// [`super::scripts`]). A worktree on a host gets none of these: they read and run
/// files on this machine (docs/ARCHITECTURE.md §"Hosts").
async fn make_ready(
    top: &Path,
    worktree: &Path,
    plan: &CreatePlan,
) -> Result<Readied, DroverError> {
    let mut ready = Readied::default();
    if git::current().host().is_some() {
        return Ok(ready);
    }
    let include = top.join(".worktreeinclude");
    if include.is_file() {
        // Files matching its patterns that git ignores (both asked of git itself).
        let listed = Git::at(top)
            .limit(16 * 1024 * 1024)
            .ok_bytes(&[
                "ls-files",
                "--others",
                "--ignored",
                "--exclude-from=.worktreeinclude",
                "-z",
            ])
            .await
            .map_err(|e| git_error("reading .worktreeinclude", e))?;
        let candidates = git::nul_fields(&listed);
        let mut ignored = Vec::new();
        for path in candidates {
            let out = Git::at(top)
                .run(&["check-ignore", "-q", "--", &path])
                .await
                .map_err(|e| git_error("reading .worktreeinclude", e))?;
            if out.code == Some(0) {
                ignored.push(path);
            }
        }
        let mut bytes = 0usize;
        for path in ignored {
            let from = top.join(&path);
            let to = worktree.join(&path);
            let size = std::fs::symlink_metadata(&from).map_or(0, |m| m.len() as usize);
            if !from.is_file() || to.exists() {
                continue;
            }
            bytes += size;
            if bytes > MAX_CARRY_BYTES {
                return Err(unavailable(format!(
                    "the files .worktreeinclude lists come to more than {} MiB; list fewer, or link their directory with [workspaces] link",
                    MAX_CARRY_BYTES / (1024 * 1024)
                )));
            }
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| unavailable(format!("cannot copy {path}: {e}")))?;
            }
            std::fs::copy(&from, &to)
                .map_err(|e| unavailable(format!("cannot copy {path} into the worktree: {e}")))?;
            ready.included += 1;
        }
    }
    for name in &plan.link {
        let from = top.join(name);
        let to = worktree.join(name);
        if !from.is_dir() || to.exists() {
            continue;
        }
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| unavailable(format!("cannot link {name}: {e}")))?;
        }
        std::os::unix::fs::symlink(&from, &to)
            .map_err(|e| unavailable(format!("cannot link {name} into the worktree: {e}")))?;
        ready.linked.push(name.clone());
    }
    for kind in super::scripts::ScriptKind::ALL {
        if let Some(script) = super::scripts::read(worktree, kind)? {
            ready.scripts.push(script);
        }
    }
    Ok(ready)
}

/// Applies `source`'s uncommitted changes (against its HEAD, untracked files included)
/// to the new worktree `target`, which starts at the same commit. Returns how many files.
async fn carry(source: &Path, target: &Path) -> Result<usize, DroverError> {
    let snapshot = Snapshot::take(source).await?;
    let tree = snapshot.tree().await?;
    let head = commit_of(source, "HEAD")
        .await?
        .ok_or_else(|| unavailable("the checkout has no commit to carry changes from"))?;
    let numstat = Git::at(source)
        .ok_bytes(&["diff", "--numstat", "-z", "--no-renames", &head, &tree])
        .await
        .map_err(|e| git_error("listing the uncommitted changes", e))?;
    let files = git::nul_fields(&numstat).len();
    if files == 0 {
        return Ok(0);
    }
    let patch = Git::at(source)
        .limit(MAX_CARRY_BYTES)
        .run(&[
            "diff",
            "--binary",
            "--no-ext-diff",
            "--no-color",
            "--no-renames",
            &head,
            &tree,
        ])
        .await
        .map_err(|e| git_error("reading the uncommitted changes", e))?;
    if patch.truncated {
        return Err(unavailable(format!(
            "the uncommitted changes are larger than {} MiB; commit them, or dispatch without --carry-changes",
            MAX_CARRY_BYTES / (1024 * 1024)
        )));
    }
    Git::at(target)
        .input(patch.stdout)
        .ok(&["apply", "--whitespace=nowarn", "--binary"])
        .await
        .map_err(|e| git_error("bringing the uncommitted changes along", e))?;
    Ok(files)
}

/// Removes a worktree (its files and git's entry for it); best effort. The removal's
/// teardown, when it has one, runs first (`super::scripts::before_removal`).
async fn remove_worktree(checkout: &Path, worktree: &Path) {
    // The repository's teardown runs on this machine only (docs/ARCHITECTURE.md §"Hosts").
    if git::current().host().is_none() {
        super::scripts::before_removal(worktree).await;
    }
    let path = worktree.to_string_lossy().into_owned();
    let removed = Git::at(checkout)
        .run(&["worktree", "remove", "--force", "--force", &path])
        .await;
    if !removed.is_ok_and(|o| o.success()) && place::exists(worktree).await {
        place::remove_dir_all(worktree).await;
    }
    let _ = Git::at(checkout).run(&["worktree", "prune"]).await;
}

/// Whether a resumed run's worktree is still there, on its branch.
pub async fn check(ws: &WorkspaceView) -> Result<(), DroverError> {
    let worktree = worktree_of(ws).await?;
    let top = Git::at(&worktree)
        .ok(&["rev-parse", "--show-toplevel"])
        .await
        .map_err(|_| missing(ws))?;
    let same = place::canonicalize(Path::new(&top)).await == place::canonicalize(&worktree).await;
    if !same {
        return Err(missing(ws));
    }
    Ok(())
}

/// The run's change against its base commit: committed, uncommitted and untracked.
pub async fn measure(ws: &WorkspaceView) -> Result<ChangeStat, DroverError> {
    let (_, files) = changed_files(ws).await?;
    Ok(total(&files))
}

fn total(files: &[FileStat]) -> ChangeStat {
    ChangeStat {
        files: files.len() as u32,
        added: files.iter().map(|f| f.added).sum(),
        removed: files.iter().map(|f| f.removed).sum(),
    }
}

fn base_of(ws: &WorkspaceView) -> Result<String, DroverError> {
    ws.base_commit.clone().ok_or_else(|| {
        DroverError::new(
            ErrorCode::NoWorktree,
            "the run's worktree has no base commit recorded",
        )
    })
}

/// The snapshot and every changed file (status and line counts), at most [`MAX_FILES`]
/// (the flag says when there were more).
async fn changed_files(ws: &WorkspaceView) -> Result<(Snapshot, Vec<FileStat>), DroverError> {
    let worktree = worktree_of(ws).await?;
    let base = base_of(ws)?;
    let snapshot = Snapshot::take(&worktree).await?;
    let names = snapshot
        .git()
        .limit(16 * 1024 * 1024)
        .ok_bytes(&["diff", "--cached", "--name-status", "-z", "-M", &base])
        .await
        .map_err(|e| git_error("listing the run's changes", e))?;
    let counts = snapshot
        .git()
        .limit(16 * 1024 * 1024)
        .ok_bytes(&["diff", "--cached", "--numstat", "-z", "-M", &base])
        .await
        .map_err(|e| git_error("counting the run's changes", e))?;
    let mut files = parse_name_status(&names);
    let counts = parse_numstat(&counts);
    for f in &mut files {
        if let Some((added, removed)) = counts.get(&f.path) {
            match (added, removed) {
                (Some(a), Some(r)) => {
                    f.added = *a;
                    f.removed = *r;
                }
                _ => f.binary = true,
            }
        }
    }
    Ok((snapshot, files))
}

/// `--name-status -z`: `M\0path\0`, `R087\0old\0new\0`.
fn parse_name_status(bytes: &[u8]) -> Vec<FileStat> {
    let fields = git::nul_fields(bytes);
    let mut files = Vec::new();
    let mut i = 0;
    while i < fields.len() {
        let code = fields[i].clone();
        i += 1;
        let letter = code.chars().next().unwrap_or('M');
        let two = matches!(letter, 'R' | 'C');
        let (old_path, path) = if two {
            let old = fields.get(i).cloned();
            let new = fields.get(i + 1).cloned().unwrap_or_default();
            i += 2;
            (old, new)
        } else {
            let path = fields.get(i).cloned().unwrap_or_default();
            i += 1;
            (None, path)
        };
        let status = match letter {
            'A' => "added",
            'D' => "deleted",
            'R' => "renamed",
            'C' => "copied",
            'T' => "type_changed",
            _ => "modified",
        };
        files.push(FileStat {
            path,
            old_path,
            status: status.to_string(),
            added: 0,
            removed: 0,
            binary: false,
        });
    }
    files
}

/// `--numstat -z`: `added\tremoved\tpath\0`, or for a rename `added\tremoved\t\0old\0new\0`;
/// `-` counts for a binary file. Keyed by the (new) path.
#[allow(clippy::type_complexity)]
fn parse_numstat(bytes: &[u8]) -> HashMap<String, (Option<u64>, Option<u64>)> {
    let fields = git::nul_fields(bytes);
    let mut out = HashMap::new();
    let mut i = 0;
    while i < fields.len() {
        let record = &fields[i];
        i += 1;
        let mut parts = record.splitn(3, '\t');
        let (Some(added), Some(removed), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let path = if path.is_empty() {
            // A rename: old, then new.
            let new = fields.get(i + 1).cloned().unwrap_or_default();
            i += 2;
            new
        } else {
            path.to_string()
        };
        out.insert(path, (added.parse().ok(), removed.parse().ok()));
    }
    out
}

/// The run's diff: its files with their counts and, unless `stat_only`, git's unified
/// diff of `file` (or of every file).
pub async fn diff(
    run_id: &str,
    ws: &WorkspaceView,
    file: Option<&str>,
    stat_only: bool,
) -> Result<DiffView, DroverError> {
    let base = base_of(ws)?;
    let (snapshot, mut files) = changed_files(ws).await?;
    let change = total(&files);
    let mut truncated = files.len() > MAX_FILES;
    let wanted = match file {
        Some(path) => {
            let found = files
                .iter()
                .find(|f| f.path == path || f.old_path.as_deref() == Some(path))
                .cloned();
            match found {
                Some(f) => Some(f),
                None => {
                    return Err(DroverError::new(
                        ErrorCode::FileNotChanged,
                        format!(
                            "run {run_id} did not change {}; `drover diff {run_id} --stat` lists what it changed",
                            crate::text::quoted(path)
                        ),
                    ));
                }
            }
        }
        None => None,
    };
    files.truncate(MAX_FILES);
    let patch = if stat_only {
        None
    } else {
        let mut args = vec![
            "--literal-pathspecs",
            "diff",
            "--cached",
            "-M",
            "--no-ext-diff",
            "--no-color",
            &base,
        ];
        if let Some(f) = &wanted {
            args.push("--");
            if let Some(old) = &f.old_path {
                args.push(old);
            }
            args.push(&f.path);
        }
        let out = snapshot
            .git()
            .limit(MAX_PATCH_BYTES)
            .run(&args)
            .await
            .map_err(|e| git_error("reading the run's diff", e))?;
        if !out.success() {
            return Err(git_error(
                "reading the run's diff",
                git::failed(&args, &out),
            ));
        }
        truncated |= out.truncated;
        Some(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    Ok(DiffView {
        run_id: run_id.to_string(),
        branch: ws.branch.clone(),
        base_branch: ws.base_branch.clone(),
        base_commit: ws.base_commit.clone(),
        change,
        files,
        file: wanted.map(|f| f.path),
        patch,
        truncated,
    })
}

/// The run's work as one commit on its branch: its tip when nothing is uncommitted, else a
/// new commit of everything in the worktree on top of it (made with `commit-tree`: no ref
/// moves yet). Returns (old tip, new tip).
async fn work_commit(worktree: &Path, message: &str) -> Result<(String, String), DroverError> {
    let head = commit_of(worktree, "HEAD")
        .await?
        .ok_or_else(|| unavailable("the run's branch has no commit"))?;
    let snapshot = Snapshot::take(worktree).await?;
    let tree = snapshot.tree().await?;
    if tree == tree_of(worktree, &head).await? {
        return Ok((head.clone(), head));
    }
    let commit = Git::at(worktree)
        .ok(&["commit-tree", &tree, "-p", &head, "-m", message])
        .await
        .map_err(|e| git_error("committing the run's work", e))?;
    Ok((head, commit))
}

/// Moves the run's branch to `new` (from `old`) and lines the worktree's index up with
/// it (its files already are).
async fn advance_branch(
    worktree: &Path,
    branch: &str,
    old: &str,
    new: &str,
) -> Result<(), DroverError> {
    if old == new {
        return Ok(());
    }
    let refname = format!("refs/heads/{branch}");
    Git::at(worktree)
        .ok(&[
            "update-ref",
            "-m",
            "drover: the run's work",
            &refname,
            new,
            old,
        ])
        .await
        .map_err(|e| git_error("moving the run's branch", e))?;
    Git::at(worktree)
        .ok(&["read-tree", "HEAD"])
        .await
        .map_err(|e| git_error("updating the worktree's index", e))?;
    Ok(())
}

/// The work tree where `branch` is checked out, if any (`worktree list --porcelain`).
async fn checked_out_at(checkout: &Path, branch: &str) -> Result<Option<PathBuf>, DroverError> {
    let out = Git::at(checkout)
        .ok_bytes(&["worktree", "list", "--porcelain", "-z"])
        .await
        .map_err(|e| git_error("listing the worktrees", e))?;
    let wanted = format!("branch refs/heads/{branch}");
    let mut current: Option<PathBuf> = None;
    for field in git::nul_fields(&out) {
        if let Some(path) = field.strip_prefix("worktree ") {
            current = Some(PathBuf::from(path));
        } else if field == wanted {
            return Ok(current);
        }
    }
    Ok(None)
}

fn named(mut files: Vec<String>) -> Vec<String> {
    files.truncate(MAX_NAMED_FILES);
    files
}

fn listed(files: &[String]) -> String {
    let shown: Vec<&str> = files.iter().take(10).map(String::as_str).collect();
    let more = files.len().saturating_sub(shown.len());
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// Merges the run's work into its base branch. Whatever is uncommitted in the worktree is
/// committed first (`ask.message`); then the base branch fast-forwards when it can, else
/// gets a merge commit (or, with `squash`, one commit of the whole change). Where the base
/// branch is checked out, that work tree is brought along. Refuses, changing nothing, with
/// `MERGE_CONFLICT` or `CHECKOUT_DIRTY` (and the files).
pub async fn merge(
    ws: &WorkspaceView,
    ask: &MergeAsk,
) -> Result<(WorkspaceView, MergeView), DroverError> {
    let worktree = worktree_of(ws).await?;
    let checkout = checkout_of(ws).await?;
    let run_id = &ask.run_id;
    let branch = ws.branch.clone().ok_or_else(|| {
        DroverError::new(ErrorCode::NoWorktree, "the run's worktree has no branch")
    })?;
    let Some(base_branch) = ws.base_branch.clone() else {
        return Err(DroverError::new(
            ErrorCode::NoBaseBranch,
            format!(
                "run {run_id} started from a detached HEAD, so it has no branch to merge into; merge {branch} yourself (git merge {branch})"
            ),
        ));
    };
    let _lock = lock(&checkout).await;
    let base_tip = branch_exists(&checkout, &base_branch).await?.ok_or_else(|| {
        DroverError::new(
            ErrorCode::NoBaseBranch,
            format!(
                "the branch {base_branch} run {run_id} started from is gone; merge {branch} yourself"
            ),
        )
    })?;
    let (old_tip, tip) = work_commit(&worktree, &ask.message).await?;

    let (how, result) = if is_ancestor(&checkout, &tip, &base_tip).await? {
        (MergeHow::UpToDate, base_tip.clone())
    } else if is_ancestor(&checkout, &base_tip, &tip).await? {
        if ask.squash {
            let tree = tree_of(&checkout, &tip).await?;
            let commit = commit_tree(&checkout, &tree, &[&base_tip], &ask.message).await?;
            (MergeHow::Squash, commit)
        } else {
            (MergeHow::FastForward, tip.clone())
        }
    } else {
        let tree = match merged_tree(&checkout, &base_tip, &tip, "trying the merge").await? {
            Ok(tree) => tree,
            Err(files) => {
                return Err(DroverError::new(
                    ErrorCode::MergeConflict,
                    format!(
                        "{branch} conflicts with {base_branch} in {}; nothing was changed. Hand it to the run (while it is active, the follow-up asking it to merge {base_branch} and resolve them is offered in Needs you; `drover show {run_id}` has it), or merge by hand",
                        listed(&files)
                    ),
                ));
            }
        };
        if ask.squash {
            let commit = commit_tree(&checkout, &tree, &[&base_tip], &ask.message).await?;
            (MergeHow::Squash, commit)
        } else {
            let message = format!(
                "Merge {branch} into {base_branch}\n\n{}\n\ndrover run {run_id}",
                subject(&ask.title)
            );
            let commit = commit_tree(&checkout, &tree, &[&base_tip, &tip], &message).await?;
            (MergeHow::MergeCommit, commit)
        }
    };

    let touched = if how == MergeHow::UpToDate {
        Vec::new()
    } else {
        let out = Git::at(&checkout)
            .limit(16 * 1024 * 1024)
            .ok_bytes(&[
                "diff",
                "--name-only",
                "-z",
                "--no-renames",
                &base_tip,
                &result,
            ])
            .await
            .map_err(|e| git_error("listing what the merge changes", e))?;
        git::nul_fields(&out)
    };
    let target = checked_out_at(&checkout, &base_branch).await?;
    if let Some(dir) = &target
        && how != MergeHow::UpToDate
    {
        let (dirty, unmerged) = dirty_paths(dir).await?;
        if unmerged {
            return Err(DroverError::new(
                ErrorCode::CheckoutDirty,
                format!(
                    "{} is in the middle of a merge; finish or abort it, then merge run {run_id}",
                    dir.display()
                ),
            ));
        }
        let clash: Vec<String> = touched
            .iter()
            .filter(|t| dirty.iter().any(|d| d == *t))
            .cloned()
            .collect();
        if !clash.is_empty() {
            return Err(DroverError::new(
                ErrorCode::CheckoutDirty,
                format!(
                    "{} has uncommitted changes to {}, which the merge would change; commit or stash them, then merge run {run_id}; nothing was changed",
                    dir.display(),
                    listed(&clash)
                ),
            ));
        }
    }

    // Nothing has moved yet. First the base branch (git refuses, changing nothing, if it
    // would overwrite a local change), then the run's own branch.
    if how != MergeHow::UpToDate {
        match &target {
            Some(dir) => {
                Git::at(dir)
                    .timeout(CREATE_TIMEOUT)
                    .ok(&["merge", "--ff-only", "--quiet", "--no-edit", &result])
                    .await
                    .map_err(|e| git_error(&format!("updating {base_branch}"), e))?;
            }
            None => {
                let refname = format!("refs/heads/{base_branch}");
                Git::at(&checkout)
                    .ok(&[
                        "update-ref",
                        "-m",
                        "drover: merge",
                        &refname,
                        &result,
                        &base_tip,
                    ])
                    .await
                    .map_err(|e| git_error(&format!("moving {base_branch}"), e))?;
            }
        }
    }
    advance_branch(&worktree, &branch, &old_tip, &tip).await?;

    let mut after = ws.clone();
    if ask.clean_up {
        remove_worktree(&checkout, &worktree).await;
        let _ = Git::at(&checkout).run(&["branch", "-D", &branch]).await;
        after.status = WorkspaceStatus::Merged;
    } else {
        // The run goes on from here: its change counts from what was merged.
        after.base_commit = Some(tip.clone());
        after.change = Some(ChangeStat::default());
    }
    Ok((
        after,
        MergeView {
            how,
            commit: result,
            into: base_branch,
            files: named(touched),
            checkout_updated: target.is_some() && how != MergeHow::UpToDate,
            cleaned_up: ask.clean_up,
        },
    ))
}

/// Brings a run's branch up to date with its base branch, in its worktree: what is
/// uncommitted there is committed onto the branch first (the run's work is never lost),
/// then the base is merged in (a merge commit), or with `rebase` the branch's commits are
/// replayed on it. A conflict changes nothing — a merge is tried in memory first
/// (`git merge-tree`), a rebase that stops is aborted and the worktree put back as it
/// was — and comes back as [`UpdateHow::Conflict`] with the files and the follow-up that
/// hands the conflict to the run. The user's checkout is never touched.
pub async fn update(
    ws: &WorkspaceView,
    message: &str,
    rebase: bool,
) -> Result<(WorkspaceView, UpdateView), DroverError> {
    let worktree = worktree_of(ws).await?;
    let checkout = checkout_of(ws).await?;
    let branch = ws.branch.clone().ok_or_else(|| {
        DroverError::new(ErrorCode::NoWorktree, "the run's worktree has no branch")
    })?;
    let Some(base) = ws.base_branch.clone() else {
        return Err(DroverError::new(
            ErrorCode::NoBaseBranch,
            format!(
                "{branch} started from a detached HEAD, so it has no base branch to update from; merge the commit you want into it yourself"
            ),
        ));
    };
    let _lock = lock(&checkout).await;
    let base_tip = branch_exists(&checkout, &base).await?.ok_or_else(|| {
        DroverError::new(
            ErrorCode::NoBaseBranch,
            format!("the branch {base} {branch} started from is gone; nothing to update from"),
        )
    })?;
    let (old_tip, tip) = work_commit(&worktree, message).await?;
    let view = |how, commit: &str, files: Vec<String>| UpdateView {
        how,
        base: base.clone(),
        commit: commit.to_string(),
        files,
        follow_up: None,
    };
    if is_ancestor(&checkout, &base_tip, &tip).await? {
        return Ok((ws.clone(), view(UpdateHow::UpToDate, &old_tip, Vec::new())));
    }
    let conflict = |files: Vec<String>| conflict_view(&base, &branch, &old_tip, files);
    let tree = match merged_tree(&checkout, &tip, &base_tip, "trying the update").await? {
        Ok(tree) => tree,
        Err(files) => return Ok((ws.clone(), conflict(files))),
    };
    let touched = {
        let out = Git::at(&checkout)
            .limit(16 * 1024 * 1024)
            .ok_bytes(&["diff", "--name-only", "-z", "--no-renames", &tip, &tree])
            .await
            .map_err(|e| git_error("listing what the update changes", e))?;
        named(git::nul_fields(&out))
    };
    // The run's work is on its branch from here.
    advance_branch(&worktree, &branch, &old_tip, &tip).await?;
    let (how, new_tip) = if rebase {
        let out = Git::at(&worktree)
            .timeout(CREATE_TIMEOUT)
            .run(&["rebase", "--quiet", &base_tip])
            .await
            .map_err(|e| git_error("rebasing the run's branch", e))?;
        if !out.success() {
            let unmerged = Git::at(&worktree)
                .limit(16 * 1024 * 1024)
                .ok_bytes(&["diff", "--name-only", "-z", "--diff-filter=U"])
                .await
                .map(|o| git::nul_fields(&o))
                .unwrap_or_default();
            // Put everything back: the branch at its old tip, the work uncommitted.
            let _ = Git::at(&worktree).run(&["rebase", "--abort"]).await;
            Git::at(&worktree)
                .ok(&["reset", "--quiet", "--mixed", &old_tip])
                .await
                .map_err(|e| git_error("putting the worktree back after the rebase", e))?;
            return Ok((ws.clone(), conflict(unmerged)));
        }
        let head = commit_of(&worktree, "HEAD")
            .await?
            .ok_or_else(|| unavailable("the rebased branch has no commit"))?;
        (UpdateHow::Rebased, head)
    } else {
        let message =
            format!("Merge {base} into {branch}\n\ndrover: the run's branch brought up to date");
        let commit = commit_tree(&checkout, &tree, &[&tip, &base_tip], &message).await?;
        // The branch moves to the merge, and the files the merge changed with it (they
        // were the branch's tip, so nothing of the run's is overwritten).
        Git::at(&worktree)
            .timeout(CREATE_TIMEOUT)
            .ok(&["reset", "--quiet", "--keep", &commit])
            .await
            .map_err(|e| git_error("updating the worktree's files", e))?;
        (UpdateHow::Merged, commit)
    };
    let mut after = ws.clone();
    // The run's change counts from its new base.
    after.base_commit = Some(base_tip.clone());
    Ok((after, view(how, &new_tip, touched)))
}

/// The tree of `ours` and `theirs` merged, made in memory (`git merge-tree`) so nothing
/// changes; or the files they conflict in.
async fn merged_tree(
    dir: &Path,
    ours: &str,
    theirs: &str,
    doing: &str,
) -> Result<Result<String, Vec<String>>, DroverError> {
    let args = [
        "merge-tree",
        "--write-tree",
        "--name-only",
        "--no-messages",
        "-z",
        ours,
        theirs,
    ];
    let out = Git::at(dir)
        .limit(16 * 1024 * 1024)
        .run(&args)
        .await
        .map_err(|e| git_error(doing, e))?;
    let fields = git::nul_fields(&out.stdout);
    match out.code {
        Some(0) => fields
            .first()
            .cloned()
            .map(Ok)
            .ok_or_else(|| unavailable("git merge-tree printed no tree")),
        Some(1) => Ok(Err(fields.into_iter().skip(1).collect())),
        _ => Err(git_error(doing, git::failed(&args, &out))),
    }
}

async fn commit_tree(
    dir: &Path,
    tree: &str,
    parents: &[&str],
    message: &str,
) -> Result<String, DroverError> {
    let mut args = vec!["commit-tree", tree];
    for p in parents {
        args.push("-p");
        args.push(p);
    }
    args.push("-m");
    args.push(message);
    Git::at(dir)
        .ok(&args)
        .await
        .map_err(|e| git_error("making the merge commit", e))
}

/// A conflict between the run's branch (at `tip`) and its base: the files, and the
/// follow-up that asks the run to merge its base and resolve them.
fn conflict_view(base: &str, branch: &str, tip: &str, files: Vec<String>) -> UpdateView {
    let files = named(files);
    let follow_up = format!(
        "The branch {base} moved on and conflicts with your branch {branch} in {}. Merge {base} into your branch (git merge {base}), resolve the conflicts keeping the intent of both sides, run the tests, and commit the merge.",
        listed(&files)
    );
    UpdateView {
        how: UpdateHow::Conflict,
        base: base.to_string(),
        commit: tip.to_string(),
        files,
        follow_up: Some(follow_up),
    }
}

/// After a merge refused with `MERGE_CONFLICT`: which files the run's work (its branch
/// with what is uncommitted in its worktree, as a merge takes it) and its base conflict in
/// (tried in memory; no ref moves), with the follow-up that hands the conflict to the run.
pub async fn conflict_of(ws: &WorkspaceView) -> Result<UpdateView, DroverError> {
    let worktree = worktree_of(ws).await?;
    let checkout = checkout_of(ws).await?;
    let (Some(branch), Some(base)) = (ws.branch.clone(), ws.base_branch.clone()) else {
        return Err(DroverError::new(
            ErrorCode::NoBaseBranch,
            "the run's worktree has no branch or base branch",
        ));
    };
    let _lock = lock(&checkout).await;
    let missing_branch = || {
        DroverError::new(
            ErrorCode::NoBaseBranch,
            format!("{branch} or {base} is gone"),
        )
    };
    let (_, tip) = work_commit(&worktree, "the run's work as it stands").await?;
    let base_tip = branch_exists(&checkout, &base)
        .await?
        .ok_or_else(missing_branch)?;
    match merged_tree(&checkout, &tip, &base_tip, "trying the merge").await? {
        Err(files) => Ok(conflict_view(&base, &branch, &tip, files)),
        Ok(_) => Err(DroverError::new(
            ErrorCode::MergeConflict,
            format!("{branch} and {base} no longer conflict"),
        )),
    }
}

/// Keeps the run's branch: what is uncommitted in the worktree is committed onto it
/// (`message`), then the worktree is removed.
pub async fn keep(ws: &WorkspaceView, message: &str) -> Result<WorkspaceView, DroverError> {
    let checkout = checkout_of(ws).await?;
    let branch = ws.branch.clone().ok_or_else(|| {
        DroverError::new(ErrorCode::NoWorktree, "the run's worktree has no branch")
    })?;
    let _lock = lock(&checkout).await;
    let mut after = ws.clone();
    let worktree = match ws.worktree_path() {
        Some(w) if place::is_dir(&w).await => Some(w),
        _ => None,
    };
    match worktree {
        Some(worktree) => {
            let (old, new) = work_commit(&worktree, message).await?;
            advance_branch(&worktree, &branch, &old, &new).await?;
            remove_worktree(&checkout, &worktree).await;
        }
        None => {
            let _ = Git::at(&checkout).run(&["worktree", "prune"]).await;
        }
    }
    after.status = if branch_exists(&checkout, &branch).await?.is_some() {
        WorkspaceStatus::Kept
    } else {
        WorkspaceStatus::Missing
    };
    Ok(after)
}

/// Deletes the run's worktree and its branch, work and all.
pub async fn discard(ws: &WorkspaceView, root: &Path) -> Result<WorkspaceView, DroverError> {
    let mut after = ws.clone();
    after.status = WorkspaceStatus::Discarded;
    let worktree = ws.worktree_path();
    let Some(checkout) = there(ws.checkout_path()).await else {
        // The repository is gone: only drover's own directory is left to remove.
        if let Some(w) = there(worktree.filter(|w| w.starts_with(root))).await {
            place::remove_dir_all(&w).await;
        }
        return Ok(after);
    };
    let _lock = lock(&checkout).await;
    let worktree = match worktree {
        Some(w) if place::exists(&w).await => Some(w),
        _ => None,
    };
    match worktree {
        Some(w) => remove_worktree(&checkout, &w).await,
        _ => {
            let _ = Git::at(&checkout).run(&["worktree", "prune"]).await;
        }
    }
    if let Some(branch) = &ws.branch
        && branch_exists(&checkout, branch).await?.is_some()
    {
        Git::at(&checkout)
            .ok(&["branch", "-D", branch])
            .await
            .map_err(|e| git_error(&format!("deleting {branch}"), e))?;
    }
    Ok(after)
}

/// A run whose worktree is already gone (kept, or vanished outside drover) leaves the
/// trays: its repository's worktree entry is pruned, and its branch deleted when it holds
/// no commits beyond the run's base (nothing to lose); a branch with commits is kept (the
/// workspace's status stays as it was). A repository that is gone leaves nothing to do.
pub async fn release(ws: &WorkspaceView) -> Result<WorkspaceView, DroverError> {
    let mut after = ws.clone();
    let Some(checkout) = there(ws.checkout_path()).await else {
        return Ok(after);
    };
    let _lock = lock(&checkout).await;
    let worktree = match ws.worktree_path() {
        Some(w) if place::exists(&w).await => Some(w),
        _ => None,
    };
    if let Some(w) = worktree {
        remove_worktree(&checkout, &w).await;
    } else {
        let _ = Git::at(&checkout).run(&["worktree", "prune"]).await;
    }
    let (Some(branch), Some(base)) = (&ws.branch, &ws.base_commit) else {
        return Ok(after);
    };
    if branch_exists(&checkout, branch).await?.is_none() {
        after.status = WorkspaceStatus::Discarded;
        return Ok(after);
    }
    let ahead = Git::at(&checkout)
        .ok(&[
            "rev-list",
            "--count",
            &format!("{base}..refs/heads/{branch}"),
        ])
        .await
        .map_err(|e| git_error(&format!("counting the commits of {branch}"), e))?;
    if ahead.trim() == "0" {
        Git::at(&checkout)
            .ok(&["branch", "-D", branch])
            .await
            .map_err(|e| git_error(&format!("deleting {branch}"), e))?;
        after.status = WorkspaceStatus::Discarded;
    }
    Ok(after)
}

/// Commits what is uncommitted in the run's worktree onto its branch (`message`), as a
/// merge does first, and returns the worktree (for a push of the branch from it).
pub(super) async fn commit_work(ws: &WorkspaceView, message: &str) -> Result<PathBuf, DroverError> {
    let worktree = worktree_of(ws).await?;
    let checkout = checkout_of(ws).await?;
    let branch = ws.branch.clone().ok_or_else(|| {
        DroverError::new(ErrorCode::NoWorktree, "the run's worktree has no branch")
    })?;
    let _lock = lock(&checkout).await;
    let (old, new) = work_commit(&worktree, message).await?;
    advance_branch(&worktree, &branch, &old, &new).await?;
    Ok(worktree)
}

/// The directory, when it is one where the task under way runs.
async fn there(dir: Option<PathBuf>) -> Option<PathBuf> {
    match dir {
        Some(d) if place::is_dir(&d).await => Some(d),
        _ => None,
    }
}

/// `git worktree prune` in each repository: entries of worktrees deleted outside git go.
pub async fn prune(checkouts: &[PathBuf]) {
    for checkout in checkouts {
        if !place::is_dir(checkout).await {
            continue;
        }
        let _lock = lock(checkout).await;
        if let Err(e) = Git::at(checkout).ok(&["worktree", "prune"]).await {
            tracing::warn!(checkout = %checkout.display(), error = %e, "worktree prune failed");
        }
    }
}

#[cfg(test)]
mod tests;
