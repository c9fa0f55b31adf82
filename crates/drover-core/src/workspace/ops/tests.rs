//! The git work against real repositories in temporary directories (git's identity is
//! set in each repository's own config, never globally).

use super::*;
use std::process::Command;

/// A repository on `main` with `app.txt` and `src/lib.txt` committed.
struct Repo {
    _dir: tempfile::TempDir,
    checkout: PathBuf,
    root: PathBuf,
}

fn sh_git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl Repo {
    fn new() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        let checkout = dir.path().join("app");
        std::fs::create_dir_all(checkout.join("src")).unwrap();
        sh_git(&checkout, &["init", "-q", "-b", "main"]);
        sh_git(&checkout, &["config", "user.name", "Test User"]);
        sh_git(&checkout, &["config", "user.email", "test@example.invalid"]);
        std::fs::write(checkout.join("app.txt"), "one\ntwo\nthree\n").unwrap();
        std::fs::write(checkout.join("src/lib.txt"), "lib\n").unwrap();
        sh_git(&checkout, &["add", "-A"]);
        sh_git(&checkout, &["commit", "-q", "-m", "first"]);
        let root = dir.path().join("worktrees");
        Repo {
            _dir: dir,
            checkout,
            root,
        }
    }

    fn plan(&self, run_id: &str, cwd: &Path) -> CreatePlan {
        CreatePlan {
            run_id: run_id.into(),
            cwd: cwd.to_path_buf(),
            root: self.root.clone(),
            branch: super::super::branch_name(run_id, "Fix it"),
            carry_changes: false,
            from: None,
            link: Vec::new(),
            host: None,
        }
    }

    fn head(&self, rev: &str) -> String {
        sh_git(&self.checkout, &["rev-parse", rev])
    }

    fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.checkout.join(path)).unwrap()
    }
}

fn wt(ws: &WorkspaceView) -> PathBuf {
    ws.worktree_path().unwrap()
}

async fn created(repo: &Repo, run_id: &str) -> WorkspaceView {
    create(&repo.plan(run_id, &repo.checkout))
        .await
        .unwrap()
        .workspace
}

fn ask(run_id: &str, squash: bool, clean_up: bool) -> MergeAsk {
    MergeAsk {
        run_id: run_id.into(),
        title: "Fix it".into(),
        message: "Fixed it".into(),
        squash,
        clean_up,
    }
}

#[tokio::test]
async fn a_worktree_is_a_new_branch_at_head_with_the_run_at_the_same_place() {
    let repo = Repo::new();
    let made = create(&repo.plan("r1", &repo.checkout.join("src")))
        .await
        .unwrap();
    let ws = made.workspace;
    assert_eq!(ws.status, WorkspaceStatus::Ready);
    assert_eq!(ws.branch.as_deref(), Some("drover/r1-fix-it"));
    assert_eq!(ws.base_branch.as_deref(), Some("main"));
    assert_eq!(ws.base_commit.as_deref(), Some(repo.head("HEAD").as_str()));
    assert_eq!(wt(&ws), repo.root.join("app").join("r1"));
    assert_eq!(
        ws.dir.as_deref(),
        Some(repo.root.join("app/r1/src").to_str().unwrap())
    );
    assert_eq!(
        std::fs::read_to_string(wt(&ws).join("src/lib.txt")).unwrap(),
        "lib\n"
    );
    assert_eq!(
        sh_git(&wt(&ws), &["branch", "--show-current"]),
        "drover/r1-fix-it"
    );
    // The user's checkout is where it was.
    assert_eq!(
        sh_git(&repo.checkout, &["branch", "--show-current"]),
        "main"
    );
    assert_eq!(sh_git(&repo.checkout, &["status", "--porcelain"]), "");
    check(&ws).await.unwrap();
}

#[tokio::test]
async fn uncommitted_changes_stay_behind_unless_carried() {
    let repo = Repo::new();
    std::fs::write(repo.checkout.join("app.txt"), "changed\n").unwrap();
    std::fs::write(repo.checkout.join("new.txt"), "untracked\n").unwrap();
    let left = create(&repo.plan("r1", &repo.checkout)).await.unwrap();
    assert_eq!(left.left_behind, 2);
    assert_eq!(left.carried, 0);
    assert_eq!(
        std::fs::read_to_string(wt(&left.workspace).join("app.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    assert!(!wt(&left.workspace).join("new.txt").exists());

    let mut plan = repo.plan("r2", &repo.checkout);
    plan.carry_changes = true;
    let carried = create(&plan).await.unwrap();
    assert_eq!(carried.carried, 2);
    assert_eq!(carried.left_behind, 0);
    let w = wt(&carried.workspace);
    assert_eq!(
        std::fs::read_to_string(w.join("app.txt")).unwrap(),
        "changed\n"
    );
    assert_eq!(
        std::fs::read_to_string(w.join("new.txt")).unwrap(),
        "untracked\n"
    );
    // Carrying copies: the checkout keeps its changes, and its index is untouched.
    assert_eq!(repo.read("app.txt"), "changed\n");
    assert_eq!(
        sh_git(&repo.checkout, &["status", "--porcelain"]),
        "M app.txt\n?? new.txt"
    );
    // The carried changes are the run's change until it commits them.
    let change = measure(&carried.workspace).await.unwrap();
    assert_eq!(change.files, 2);
}

#[tokio::test]
async fn outside_a_work_tree_or_before_the_first_commit_there_is_no_worktree() {
    let dir = tempfile::tempdir().unwrap();
    let plan = CreatePlan {
        run_id: "r1".into(),
        cwd: dir.path().to_path_buf(),
        root: dir.path().join("wt"),
        branch: "drover/r1".into(),
        carry_changes: false,
        from: None,
        link: Vec::new(),
        host: None,
    };
    let e = create(&plan).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::WorkspaceUnavailable, "{e:?}");
    assert!(e.message.contains("not inside a git work tree"), "{e:?}");
    sh_git(dir.path(), &["init", "-q"]);
    let e = create(&plan).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::WorkspaceUnavailable, "{e:?}");
    assert!(e.message.contains("no commit yet"), "{e:?}");
}

#[tokio::test]
async fn the_change_counts_committed_uncommitted_untracked_and_deleted_work() {
    let repo = Repo::new();
    let ws = created(&repo, "r1").await;
    let w = wt(&ws);
    assert_eq!(measure(&ws).await.unwrap(), ChangeStat::default());
    // Committed on the branch.
    std::fs::write(w.join("app.txt"), "one\n2\nthree\nfour\n").unwrap();
    sh_git(&w, &["commit", "-q", "-am", "edit"]);
    // Uncommitted, untracked and deleted.
    std::fs::write(w.join("notes.md"), "a\nb\n").unwrap();
    std::fs::remove_file(w.join("src/lib.txt")).unwrap();
    std::fs::write(w.join("image.bin"), [0u8, 159, 146, 150, 0, 1]).unwrap();
    let change = measure(&ws).await.unwrap();
    assert_eq!(
        change,
        ChangeStat {
            files: 4,
            added: 2 + 2,
            removed: 1 + 1
        }
    );
    // Reading changed nothing in the worktree's own index.
    assert_eq!(
        sh_git(&w, &["status", "--porcelain"]),
        "D src/lib.txt\n?? image.bin\n?? notes.md"
    );
    let view = diff("r1", &ws, None, false).await.unwrap();
    let by_path: HashMap<&str, &FileStat> =
        view.files.iter().map(|f| (f.path.as_str(), f)).collect();
    assert_eq!(by_path["app.txt"].status, "modified");
    assert_eq!(
        (by_path["app.txt"].added, by_path["app.txt"].removed),
        (2, 1)
    );
    assert_eq!(by_path["notes.md"].status, "added");
    assert_eq!(by_path["src/lib.txt"].status, "deleted");
    assert!(by_path["image.bin"].binary);
    let patch = view.patch.unwrap();
    assert!(patch.contains("diff --git a/app.txt b/app.txt"), "{patch}");
    assert!(patch.contains("+four"), "{patch}");
    assert!(patch.contains("+++ b/notes.md"), "{patch}");
    assert_eq!(view.change, change);

    let one = diff("r1", &ws, Some("notes.md"), false).await.unwrap();
    assert_eq!(one.file.as_deref(), Some("notes.md"));
    let patch = one.patch.unwrap();
    assert!(patch.contains("+a\n+b"), "{patch}");
    assert!(!patch.contains("app.txt"), "{patch}");
    let stat = diff("r1", &ws, None, true).await.unwrap();
    assert_eq!(stat.patch, None);
    assert_eq!(stat.files.len(), 4);
    let e = diff("r1", &ws, Some("nope.txt"), false).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::FileNotChanged);
}

#[tokio::test]
async fn a_merge_fast_forwards_when_it_can_and_commits_the_uncommitted_work() {
    let repo = Repo::new();
    let base = repo.head("main");
    let ws = created(&repo, "r1").await;
    std::fs::write(wt(&ws).join("app.txt"), "one\ntwo\nthree\nfour\n").unwrap();
    let (after, merged) = merge(&ws, &ask("r1", false, true)).await.unwrap();
    assert_eq!(merged.how, MergeHow::FastForward);
    assert!(merged.checkout_updated);
    assert_eq!(merged.files, vec!["app.txt".to_string()]);
    assert_eq!(repo.head("main"), merged.commit);
    assert_eq!(repo.head("main^"), base, "one commit on top");
    assert_eq!(
        sh_git(&repo.checkout, &["log", "-1", "--format=%s"]),
        "Fixed it"
    );
    assert_eq!(repo.read("app.txt"), "one\ntwo\nthree\nfour\n");
    assert_eq!(sh_git(&repo.checkout, &["status", "--porcelain"]), "");
    // A finished run's worktree and branch go once its work is merged.
    assert_eq!(after.status, WorkspaceStatus::Merged);
    assert!(!wt(&ws).exists());
    assert_eq!(
        sh_git(&repo.checkout, &["branch", "--list", "drover/*"]),
        ""
    );
}

#[tokio::test]
async fn a_base_that_moved_on_gets_a_merge_commit_or_one_squashed_commit() {
    for squash in [false, true] {
        let repo = Repo::new();
        let ws = created(&repo, "r1").await;
        std::fs::write(wt(&ws).join("app.txt"), "one\ntwo\nthree\nfour\n").unwrap();
        // The user goes on meanwhile, in another file.
        std::fs::write(repo.checkout.join("src/lib.txt"), "lib\nmore\n").unwrap();
        sh_git(&repo.checkout, &["commit", "-q", "-am", "user work"]);
        let user_tip = repo.head("main");
        let (_, merged) = merge(&ws, &ask("r1", squash, false)).await.unwrap();
        let parents = sh_git(&repo.checkout, &["log", "-1", "--format=%P"]);
        if squash {
            assert_eq!(merged.how, MergeHow::Squash);
            assert_eq!(parents, user_tip);
            assert!(sh_git(&repo.checkout, &["log", "-1", "--format=%B"]).starts_with("Fixed it"));
        } else {
            assert_eq!(merged.how, MergeHow::MergeCommit);
            assert_eq!(parents.split(' ').count(), 2, "{parents}");
            assert!(parents.starts_with(&user_tip));
        }
        assert_eq!(repo.read("app.txt"), "one\ntwo\nthree\nfour\n");
        assert_eq!(repo.read("src/lib.txt"), "lib\nmore\n");
        // An idle run goes on in its worktree; its change counts from the merge.
        assert!(wt(&ws).is_dir());
        assert_eq!(sh_git(&wt(&ws), &["status", "--porcelain"]), "");
    }
}

#[tokio::test]
async fn a_conflict_is_refused_with_its_files_and_nothing_changes() {
    let repo = Repo::new();
    let ws = created(&repo, "r1").await;
    // Not the size the file had: git's stat check cannot take it for unchanged when it
    // is written within the same timestamp tick as the worktree's index.
    std::fs::write(wt(&ws).join("app.txt"), "one\nTWO, said the run\nthree\n").unwrap();
    std::fs::write(repo.checkout.join("app.txt"), "one\n2\nthree\n").unwrap();
    sh_git(&repo.checkout, &["commit", "-q", "-am", "user edit"]);
    let main_before = repo.head("main");
    let branch_before = repo.head("drover/r1-fix-it");
    let e = merge(&ws, &ask("r1", false, true)).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::MergeConflict, "{e:?}");
    assert!(e.message.contains("app.txt"), "{e:?}");
    assert_eq!(repo.head("main"), main_before);
    assert_eq!(repo.head("drover/r1-fix-it"), branch_before);
    assert_eq!(repo.read("app.txt"), "one\n2\nthree\n");
    assert_eq!(sh_git(&repo.checkout, &["status", "--porcelain"]), "");
    assert_eq!(sh_git(&wt(&ws), &["status", "--porcelain"]), "M app.txt");
}

#[tokio::test]
async fn a_dirty_checkout_refuses_only_for_files_the_merge_touches() {
    let repo = Repo::new();
    let ws = created(&repo, "r1").await;
    std::fs::write(wt(&ws).join("app.txt"), "one\ntwo\nthree\nfour\n").unwrap();
    std::fs::write(repo.checkout.join("app.txt"), "mine\n").unwrap();
    let main_before = repo.head("main");
    let e = merge(&ws, &ask("r1", false, true)).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::CheckoutDirty, "{e:?}");
    assert!(e.message.contains("app.txt"), "{e:?}");
    assert_eq!(repo.head("main"), main_before);
    assert_eq!(repo.read("app.txt"), "mine\n");
    // A change to another file does not stand in the way, and survives the merge.
    std::fs::write(repo.checkout.join("app.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(repo.checkout.join("src/lib.txt"), "my own edit\n").unwrap();
    let (_, merged) = merge(&ws, &ask("r1", false, true)).await.unwrap();
    assert_eq!(merged.how, MergeHow::FastForward);
    assert_eq!(repo.read("app.txt"), "one\ntwo\nthree\nfour\n");
    assert_eq!(repo.read("src/lib.txt"), "my own edit\n");
}

#[tokio::test]
async fn a_base_branch_not_checked_out_moves_without_touching_the_checkout() {
    let repo = Repo::new();
    let ws = created(&repo, "r1").await;
    std::fs::write(wt(&ws).join("app.txt"), "changed by the run\n").unwrap();
    sh_git(&repo.checkout, &["switch", "-q", "-c", "elsewhere"]);
    let (_, merged) = merge(&ws, &ask("r1", false, true)).await.unwrap();
    assert!(!merged.checkout_updated);
    assert_eq!(repo.read("app.txt"), "one\ntwo\nthree\n");
    assert_eq!(
        sh_git(&repo.checkout, &["show", "main:app.txt"]),
        "changed by the run"
    );
    assert_eq!(
        sh_git(&repo.checkout, &["branch", "--show-current"]),
        "elsewhere"
    );
}

#[tokio::test]
async fn keep_commits_the_work_onto_the_branch_and_discard_deletes_both() {
    let repo = Repo::new();
    let kept = created(&repo, "r1").await;
    std::fs::write(wt(&kept).join("kept.txt"), "work\n").unwrap();
    let after = keep(&kept, "Kept work").await.unwrap();
    assert_eq!(after.status, WorkspaceStatus::Kept);
    assert!(!wt(&kept).exists());
    assert_eq!(
        sh_git(&repo.checkout, &["show", "drover/r1-fix-it:kept.txt"]),
        "work"
    );
    assert_eq!(
        sh_git(
            &repo.checkout,
            &["log", "-1", "--format=%s", "drover/r1-fix-it"]
        ),
        "Kept work"
    );

    let gone = created(&repo, "r2").await;
    std::fs::write(wt(&gone).join("junk.txt"), "junk\n").unwrap();
    let after = discard(&gone, &repo.root).await.unwrap();
    assert_eq!(after.status, WorkspaceStatus::Discarded);
    assert!(!wt(&gone).exists());
    assert_eq!(
        sh_git(&repo.checkout, &["branch", "--list", "drover/r2*"]),
        ""
    );
    assert_eq!(sh_git(&repo.checkout, &["status", "--porcelain"]), "");
    assert_eq!(
        sh_git(&repo.checkout, &["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
}

#[tokio::test]
async fn a_run_from_a_parent_starts_on_its_branch_with_its_uncommitted_work() {
    let repo = Repo::new();
    let parent = created(&repo, "r1").await;
    let pw = wt(&parent);
    std::fs::write(pw.join("app.txt"), "committed by the parent\n").unwrap();
    sh_git(&pw, &["commit", "-q", "-am", "parent commit"]);
    std::fs::write(pw.join("wip.txt"), "not committed yet\n").unwrap();
    let mut plan = repo.plan("r2", &repo.checkout);
    plan.from = Some(ParentStart {
        run_id: "r1".into(),
        workspace: parent.clone(),
    });
    let child = create(&plan).await.unwrap();
    assert_eq!(child.from_run.as_deref(), Some("r1"));
    assert_eq!(child.carried, 1);
    let cw = wt(&child.workspace);
    assert_eq!(
        std::fs::read_to_string(cw.join("app.txt")).unwrap(),
        "committed by the parent\n"
    );
    assert_eq!(
        std::fs::read_to_string(cw.join("wip.txt")).unwrap(),
        "not committed yet\n"
    );
    assert_eq!(child.workspace.base_commit, parent.base_commit);
    assert_eq!(child.workspace.base_branch.as_deref(), Some("main"));
    // The parent's work counts as the child's change: merging the child brings it all.
    assert_eq!(measure(&child.workspace).await.unwrap().files, 2);
    // The parent keeps its own.
    assert!(pw.join("wip.txt").exists());
}

#[tokio::test]
async fn a_vanished_worktree_is_reported_as_missing() {
    let repo = Repo::new();
    let ws = created(&repo, "r1").await;
    std::fs::remove_dir_all(wt(&ws)).unwrap();
    assert_eq!(
        check(&ws).await.unwrap_err().code,
        ErrorCode::WorktreeMissing
    );
    assert_eq!(
        measure(&ws).await.unwrap_err().code,
        ErrorCode::WorktreeMissing
    );
    prune(std::slice::from_ref(&repo.checkout)).await;
    assert_eq!(
        sh_git(&repo.checkout, &["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1,
        "the stale entry is pruned"
    );
    // Discarding a vanished worktree still deletes its branch.
    discard(&ws, &repo.root).await.unwrap();
    assert_eq!(
        sh_git(&repo.checkout, &["branch", "--list", "drover/*"]),
        ""
    );
}

#[test]
fn numstat_and_name_status_read_renames_and_binaries() {
    let names = b"M\0a.txt\0R087\0old.txt\0new.txt\0A\0bin.dat\0";
    let files = parse_name_status(names);
    assert_eq!(files.len(), 3);
    assert_eq!(files[1].status, "renamed");
    assert_eq!(files[1].old_path.as_deref(), Some("old.txt"));
    assert_eq!(files[1].path, "new.txt");
    let counts = parse_numstat(b"3\t1\ta.txt\x002\t0\t\0old.txt\0new.txt\0-\t-\tbin.dat\0");
    assert_eq!(counts["a.txt"], (Some(3), Some(1)));
    assert_eq!(counts["new.txt"], (Some(2), Some(0)));
    assert_eq!(counts["bin.dat"], (None, None));
}
