//! Workspaces end to end (issue 13): the real `drover` binary and real git repositories
//! in temp dirs, the simulated agent writing real files.
//!
//! - a worktree run gets a new `drover/…` branch at the user's HEAD, works in it, and its
//!   change (committed, uncommitted and untracked) is worked out after its turn; two runs
//!   edit the same file side by side and the user's checkout stays untouched;
//! - `drover merge` by fast-forward, by merge commit and squashed; a conflict and a dirty
//!   checkout are refused with nothing changed; `keep` leaves the branch, `discard`
//!   deletes it;
//! - a shared run waits (`waiting_repository`) for a writing run in its directory;
//! - a restart keeps the worktree and a resumed run goes on in it; an escalation starts on
//!   its parent's branch.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::{Home, array, git, git_output, notes_of, repo_home, str_at};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn read(dir: &Path, path: &str) -> String {
    std::fs::read_to_string(dir.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Commits `path` = `content` in the user's checkout.
fn commit_file(dir: &Path, path: &str, content: &str, message: &str) -> String {
    std::fs::write(dir.join(path), content).unwrap();
    git(dir, &["add", path]);
    git(dir, &["commit", "-q", "-m", message]);
    git(dir, &["rev-parse", "HEAD"])
}

/// A scenario file in the home: one turn per entry, each writing `(path, content)` with
/// the Write tool and ending with `status`.
fn scenario(home: &Home, name: &str, turns: &[(&str, &str, &str)]) -> String {
    let mut text = String::from(
        "description = \"Writes files for the workspace tests.\"\nmodel = \"claude-sonnet-4-5\"\nsession_cost_per_turn = 0.01\n",
    );
    for (path, content, status) in turns {
        text.push_str(&format!(
            "\n[[turns]]\nstatus = \"{status}\"\nsummary = \"Wrote {path}.\"\nfiles = [\"{path}\"]\n\n\
             [[turns.steps]]\ntool = \"Write\"\ninput = {{ file_path = \"{path}\", content = {content:?} }}\nduration_ms = 50\n\n\
             [[turns.steps]]\ntext = \"{path} is written.\"\n"
        ));
    }
    let file = home.path().join(format!("{name}.toml"));
    std::fs::write(&file, text).unwrap();
    file.display().to_string()
}

/// The run's workspace, from `show`.
fn workspace(home: &Home, run: &str) -> Value {
    home.show(run)["workspace"].clone()
}

/// Waits until the run's change has been worked out to `files` files; returns the
/// workspace.
fn wait_change(home: &Home, run: &str, files: u64) -> Value {
    let view = home.wait_for(run, &format!("a change of {files} files"), |v| {
        v["workspace"]["change"]["files"].as_u64() == Some(files)
    });
    view["workspace"].clone()
}

fn worktree(ws: &Value) -> PathBuf {
    PathBuf::from(str_at(ws, "worktree"))
}

/// Dispatches `scenario` in a worktree and waits until its turn is over and its change
/// counted (`files` files).
fn worktree_run(home: &Home, scenario: &str, task: &str, files: u64) -> (String, Value) {
    let run = home.dispatch(scenario, task, &["--workspace", "worktree"]);
    home.wait_idle(&run);
    let ws = wait_change(home, &run, files);
    (run, ws)
}

/// `git status --porcelain` of the user's checkout, and its HEAD.
fn checkout_state(dir: &Path) -> (String, String) {
    (
        git(dir, &["status", "--porcelain", "--untracked-files=all"]),
        git(dir, &["rev-parse", "HEAD"]),
    )
}

#[test]
fn a_worktree_run_works_on_its_own_branch_at_head_and_its_change_counts_untracked_files() {
    let home = repo_home();
    let work = home.work();
    let head = git(work, &["rev-parse", "HEAD"]);
    // An uncommitted change in the checkout stays behind (a note says so).
    std::fs::write(work.join("scratch.txt"), "mine\n").unwrap();
    let _serve = home.serve();
    // The default for a writing run inside a work tree: a worktree.
    let run = home.dispatch("worktree-change", "Add a cache", &[]);
    let view = home.wait_idle(&run);
    let ws = wait_change(&home, &run, 2);
    assert_eq!(ws["mode"], "worktree", "{ws}");
    assert_eq!(ws["status"], "ready", "{ws}");
    assert_eq!(ws["base_branch"], "main", "{ws}");
    assert_eq!(ws["base_commit"], head.as_str(), "{ws}");
    let branch = str_at(&ws, "branch").to_string();
    assert_eq!(branch, format!("drover/{run}-add-a-cache"));
    // Dispatched at the top of the checkout, it works at the top of its worktree.
    assert_eq!(ws["dir"], ws["worktree"], "{ws}");
    let tree = worktree(&ws);
    assert!(
        tree.starts_with(home.path().join("worktrees").join("work")),
        "the worktree is under the data directory: {}",
        tree.display()
    );
    // The worktree is at HEAD on the run's branch; the run's files landed there only.
    assert_eq!(git(&tree, &["rev-parse", "--abbrev-ref", "HEAD"]), branch);
    assert_eq!(git(&tree, &["rev-parse", "HEAD"]), head);
    assert!(read(&tree, "src/cache.rs").contains("pub struct Cache"));
    assert!(read(&tree, "src/main.rs").contains("hello, cache"));
    assert!(
        !tree.join("scratch.txt").exists(),
        "uncommitted work is not carried"
    );
    assert!(!work.join("src/cache.rs").exists());
    assert_eq!(read(work, "src/main.rs"), common::GREETING);
    assert_eq!(
        checkout_state(work),
        ("?? scratch.txt".to_string(), head.clone())
    );
    assert!(
        notes_of(&view)
            .iter()
            .chain(home.notes(&run).iter())
            .any(|n| n.contains("not in the worktree")),
        "{:?}",
        home.notes(&run)
    );
    // The change: the untracked new file and the edit, against the base commit.
    assert_eq!(ws["change"]["files"], 2, "{ws}");
    assert!(ws["change"]["added"].as_u64().unwrap() > 15, "{ws}");
    assert_eq!(ws["change"]["removed"], 1, "{ws}");
    let stat = home.json(&["diff", &run, "--stat"]);
    let files: Vec<(String, String)> = array(stat["files"].clone())
        .iter()
        .map(|f| {
            (
                str_at(f, "path").to_string(),
                str_at(f, "status").to_string(),
            )
        })
        .collect();
    assert_eq!(
        files,
        [
            ("src/cache.rs".to_string(), "added".to_string()),
            ("src/main.rs".to_string(), "modified".to_string())
        ],
        "{stat}"
    );
    let out = home.drover(&["diff", &run, "--file", "src/main.rs"]);
    assert_eq!(out.status.code(), Some(0), "{}", common::describe(&out));
    let patch = common::stdout(&out);
    assert!(patch.contains("-    println!(\"hello\");"), "{patch}");
    assert!(
        patch.contains("+    let mut cache = cache::Cache::new();"),
        "{patch}"
    );
    // The run line shows it too.
    assert_eq!(home.row(&run)["workspace"]["change"], ws["change"]);
}

#[test]
fn two_worktree_runs_edit_the_same_file_side_by_side_and_the_checkout_stays_untouched() {
    let home = repo_home();
    let work = home.work();
    let before = checkout_state(work);
    let _serve = home.serve();
    let one = home.dispatch("worktree-change", "First cache", &[]);
    let two = home.dispatch("worktree-change", "Second cache", &[]);
    // Neither waits for the other: each has a directory of its own.
    for run in [&one, &two] {
        home.wait_idle(run);
        assert!(
            !home
                .live_states(run)
                .iter()
                .any(|s| s == "waiting_repository"),
            "{run}: {:?}",
            home.live_states(run)
        );
    }
    let (a, b) = (wait_change(&home, &one, 2), wait_change(&home, &two, 2));
    assert_ne!(a["worktree"], b["worktree"]);
    assert_ne!(a["branch"], b["branch"]);
    for ws in [&a, &b] {
        assert!(read(&worktree(ws), "src/main.rs").contains("hello, cache"));
    }
    assert_eq!(checkout_state(work), before);
    assert_eq!(read(work, "src/main.rs"), common::GREETING);
}

#[test]
fn merge_fast_forwards_when_the_base_has_not_moved() {
    let home = repo_home();
    let work = home.work();
    let _serve = home.serve();
    let (run, ws) = worktree_run(&home, "worktree-change", "Add a cache", 2);
    let answer = home.json(&["merge", &run, "--message", "Add the cache"]);
    let merge = &answer["merge"];
    assert_eq!(merge["how"], "fast_forward", "{answer}");
    assert_eq!(merge["into"], "main", "{answer}");
    assert_eq!(merge["checkout_updated"], true, "{answer}");
    let head = git(work, &["rev-parse", "HEAD"]);
    assert_eq!(merge["commit"], head.as_str(), "{answer}");
    assert_eq!(git(work, &["log", "-1", "--format=%s"]), "Add the cache");
    // One parent: a fast-forward to the run's commit of its work.
    assert_eq!(
        git(work, &["rev-list", "--parents", "-1", "HEAD"])
            .split(' ')
            .count(),
        2
    );
    assert!(read(work, "src/cache.rs").contains("pub struct Cache"));
    assert!(read(work, "src/main.rs").contains("hello, cache"));
    assert_eq!(
        checkout_state(work).0,
        "",
        "the checkout is clean after the merge"
    );
    // An idle run keeps its worktree (it may go on); its branch is at the merged commit.
    assert!(worktree(&ws).is_dir());
    assert_eq!(git(work, &["rev-parse", str_at(&ws, "branch")]), head);
}

#[test]
fn merge_makes_a_merge_commit_when_the_base_moved_on_or_one_squashed_commit() {
    for squash in [false, true] {
        let home = repo_home();
        let work = home.work();
        let _serve = home.serve();
        let (run, _) = worktree_run(&home, "worktree-change", "Add a cache", 2);
        let moved = commit_file(work, "NOTES.md", "notes\n", "notes meanwhile");
        let mut args = vec!["merge", run.as_str()];
        if squash {
            args.push("--squash");
        }
        let answer = home.json(&args);
        let merge = &answer["merge"];
        let head = git(work, &["rev-parse", "HEAD"]);
        assert_eq!(merge["commit"], head.as_str(), "{answer}");
        let parents: Vec<String> = git(work, &["rev-list", "--parents", "-1", "HEAD"])
            .split(' ')
            .skip(1)
            .map(str::to_string)
            .collect();
        assert_eq!(parents[0], moved, "the user's commit comes first");
        if squash {
            assert_eq!(merge["how"], "squash", "{answer}");
            assert_eq!(parents.len(), 1, "one squashed commit");
        } else {
            assert_eq!(merge["how"], "merge_commit", "{answer}");
            assert_eq!(parents.len(), 2, "a merge commit");
        }
        // The summary of the run's result is the message of the commit of its work.
        assert!(
            git(work, &["log", "-3", "--format=%B"]).contains("Added a small cache module"),
            "{}",
            git(work, &["log", "-3", "--format=%B"])
        );
        assert_eq!(read(work, "NOTES.md"), "notes\n");
        assert!(read(work, "src/cache.rs").contains("pub struct Cache"));
        assert_eq!(checkout_state(work).0, "");
    }
}

#[test]
fn a_conflict_or_a_dirty_checkout_is_refused_with_nothing_changed() {
    let home = repo_home();
    let work = home.work();
    let _serve = home.serve();
    let (run, ws) = worktree_run(&home, "worktree-change", "Add a cache", 2);

    // The user changed src/main.rs (uncommitted): the merge would touch it.
    std::fs::write(work.join("src/main.rs"), "fn main() {}\n").unwrap();
    let before = checkout_state(work);
    let refusal = home.refused(&["merge", &run], "CHECKOUT_DIRTY");
    assert!(refusal.contains("src/main.rs"), "{refusal}");
    assert_eq!(checkout_state(work), before);
    assert_eq!(read(work, "src/main.rs"), "fn main() {}\n");

    // Committed, it conflicts with the run's edit of the same line.
    git(work, &["commit", "-q", "-am", "my own main"]);
    let before = checkout_state(work);
    let branch_before = git(work, &["rev-parse", str_at(&ws, "branch")]);
    let tree_status = git(&worktree(&ws), &["status", "--porcelain"]);
    let refusal = home.refused(&["merge", &run, "--json"], "MERGE_CONFLICT");
    assert!(refusal.contains("src/main.rs"), "{refusal}");
    assert_eq!(checkout_state(work), before, "the checkout is untouched");
    assert_eq!(read(work, "src/main.rs"), "fn main() {}\n");
    assert_eq!(
        git(work, &["rev-parse", str_at(&ws, "branch")]),
        branch_before
    );
    assert_eq!(git(&worktree(&ws), &["status", "--porcelain"]), tree_status);
    assert_eq!(workspace(&home, &run)["status"], "ready");

    // While a turn runs, merging waits for it.
    let busy = home.dispatch("hang", "Hang around", &["--workspace", "worktree"]);
    home.wait_for(&busy, "its turn to run", |v| v["state"] == "running");
    let refusal = home.refused(&["merge", &busy], "RUN_ACTIVE");
    assert!(refusal.contains("a turn is running"), "{refusal}");
}

#[test]
fn keep_leaves_the_branch_and_discard_deletes_it() {
    let home = repo_home();
    let work = home.work();
    let before = checkout_state(work);
    let _serve = home.serve();
    let (kept, kept_ws) = worktree_run(&home, "worktree-change", "Keep me", 2);
    let (gone, gone_ws) = worktree_run(&home, "worktree-change", "Discard me", 2);

    // Neither while the run may still work in its worktree.
    home.refused(&["keep", &kept], "RUN_ACTIVE");
    home.refused(&["discard", &gone], "RUN_ACTIVE");
    for run in [&kept, &gone] {
        home.json(&["complete", run]);
        home.wait_terminal(run);
    }

    let answer = home.json(&["keep", &kept]);
    assert_eq!(answer["workspace"]["status"], "kept", "{answer}");
    let branch = str_at(&kept_ws, "branch");
    assert!(!worktree(&kept_ws).exists(), "the worktree is removed");
    // The work, uncommitted in the worktree, is committed onto the branch.
    assert!(git(work, &["show", &format!("{branch}:src/cache.rs")]).contains("pub struct Cache"));
    assert_eq!(
        git(work, &["rev-parse", &format!("{branch}~1")]),
        str_at(&kept_ws, "base_commit")
    );

    let answer = home.json(&["discard", &gone]);
    assert_eq!(answer["workspace"]["status"], "discarded", "{answer}");
    assert!(!worktree(&gone_ws).exists(), "the worktree is removed");
    let branch = format!("refs/heads/{}", str_at(&gone_ws, "branch"));
    let out = git_output(work, &["rev-parse", "--verify", "-q", &branch]);
    assert!(!out.status.success(), "the branch is deleted");
    // Nothing is left to act on.
    home.refused(&["discard", &gone], "NO_WORKTREE");
    assert_eq!(checkout_state(work), before, "neither touched the checkout");
    assert!(!git(work, &["worktree", "list"]).contains(&gone));
}

#[test]
fn a_shared_run_waits_for_a_writing_run_in_its_directory() {
    let home = repo_home();
    let _serve = home.serve();
    let holder = home.dispatch(
        "tool-permission",
        "Hold the directory",
        &["--workspace", "shared"],
    );
    home.wait_for_pending(&holder, "Bash");
    let waiter = home.dispatch("quick-success", "Wait for it", &["--workspace", "shared"]);
    let row = home.wait_for(&waiter, "waiting_repository", |v| {
        v["live_state"]["state"] == "waiting_repository"
    });
    assert_eq!(row["state"], "queued", "{row}");
    assert!(
        str_at(&row["live_state"], "detail").contains(&holder),
        "{row}"
    );
    // A worktree run does not wait.
    let beside = home.dispatch("quick-success", "Beside it", &["--workspace", "worktree"]);
    assert_eq!(home.wait_idle(&beside)["state"], "idle");
    assert_eq!(home.show(&waiter)["state"], "queued", "still waiting");

    home.json(&["stop", &holder]);
    assert_eq!(home.wait_idle(&waiter)["state"], "idle");
    let states = home.live_states(&waiter);
    assert!(
        states.iter().any(|s| s == "waiting_repository"),
        "{states:?}"
    );
}

#[test]
fn a_restart_keeps_the_worktree_and_the_woken_run_goes_on_in_it() {
    let home = repo_home();
    let work = home.work();
    let file = scenario(
        &home,
        "two-files",
        &[("one.txt", "one\n", "done"), ("two.txt", "two\n", "done")],
    );
    let serve = home.serve();
    let (run, ws) = worktree_run(&home, &file, "Write two files", 1);
    // Stopping drover leaves the idle run as it is; its worktree stays.
    serve.stop();
    assert_eq!(home.show(&run)["state"], "idle");
    assert!(worktree(&ws).is_dir(), "the worktree survives the restart");

    let _serve = home.serve();
    assert_eq!(
        home.show(&run)["live_state"]["detail"],
        "idle · hibernated",
        "back hibernated"
    );
    home.json(&["follow-up", &run, "Write the second file"]);
    home.wait_for(&run, "its second turn done", |v| {
        v["state"] == "idle" && v["turns"].as_array().is_some_and(|t| t.len() == 2)
    });
    let after = wait_change(&home, &run, 2);
    assert_eq!(after["worktree"], ws["worktree"], "the same worktree");
    assert_eq!(after["branch"], ws["branch"]);
    assert_eq!(read(&worktree(&ws), "one.txt"), "one\n");
    assert_eq!(
        read(&worktree(&ws), "two.txt"),
        "two\n",
        "the resumed turn wrote there"
    );
    assert!(!work.join("one.txt").exists() && !work.join("two.txt").exists());
}

#[test]
fn an_escalation_of_a_worktree_run_starts_on_its_parents_branch() {
    let home = repo_home();
    let work = home.work();
    let file = scenario(
        &home,
        "blocked-writer",
        &[("half.txt", "half done\n", "blocked")],
    );
    let _serve = home.serve();
    let parent = home.dispatch(
        &file,
        "Half a job",
        &["--workspace", "worktree", "--model", "sim-standard"],
    );
    home.wait_idle(&parent);
    let parent_ws = wait_change(&home, &parent, 1);
    home.json(&["complete", &parent]);
    home.wait_terminal(&parent);
    let child = home.json(&["escalate", &parent]);
    let child = str_at(&child, "run_id").to_string();
    home.wait_idle(&child);
    let ws = workspace(&home, &child);
    assert_eq!(ws["mode"], "worktree", "{ws}");
    assert_ne!(ws["worktree"], parent_ws["worktree"]);
    let tree = worktree(&ws);
    assert_eq!(
        read(&tree, "half.txt"),
        "half done\n",
        "the parent's work carried over"
    );
    assert!(
        home.notes(&child)
            .iter()
            .any(|n| n.contains(&format!("started from run {parent}'s branch"))),
        "{:?}",
        home.notes(&child)
    );
    assert!(!work.join("half.txt").exists());
}

#[test]
fn removing_a_run_with_unmerged_work_needs_force_and_keeps_the_work_on_its_branch() {
    let home = repo_home();
    let work = home.work();
    let _serve = home.serve();
    let (run, ws) = worktree_run(&home, "worktree-change", "Unmerged work", 2);
    home.json(&["complete", &run]);
    home.wait_terminal(&run);
    let refusal = home.refused(&["remove", &run], "UNMERGED_WORK");
    assert!(refusal.contains("--force"), "{refusal}");
    assert!(worktree(&ws).is_dir(), "refused: nothing changed");
    let branch = str_at(&ws, "branch").to_string();
    let out = home.drover(&["remove", &run, "--force"]);
    let said = common::stdout(&out);
    assert!(
        out.status.success() && said.contains(&format!("kept on branch {branch}")),
        "it says where the work is: {}",
        common::describe(&out)
    );
    home.wait_for(&run, "its worktree to go", |_| !worktree(&ws).exists());
    assert!(git(work, &["show", &format!("{branch}:src/cache.rs")]).contains("pub struct Cache"));
}

#[test]
fn a_run_whose_worktree_vanished_fails_with_that_cause() {
    let home = repo_home();
    let file = scenario(
        &home,
        "two-turns",
        &[("one.txt", "one\n", "done"), ("two.txt", "two\n", "done")],
    );
    let _serve = home.serve();
    let (run, ws) = worktree_run(&home, &file, "Lose the worktree", 1);
    std::fs::remove_dir_all(worktree(&ws)).unwrap();
    home.json(&["follow-up", &run, "go on"]);
    let view = home.wait_terminal(&run);
    assert_eq!(view["state"], "failed", "{view}");
    assert_eq!(view["completion_reason"], "workspace_missing", "{view}");
    assert_eq!(view["workspace"]["status"], "missing", "{view}");
    assert!(
        notes_of(&view).iter().any(|n| n.contains("is gone")),
        "{:?}",
        notes_of(&view)
    );
}

/// The `drover/…` branches of the repository at `dir`.
fn drover_branches(dir: &Path) -> Vec<String> {
    git(
        dir,
        &["branch", "--list", "drover/*", "--format=%(refname:short)"],
    )
    .lines()
    .map(str::to_string)
    .collect()
}

/// How many worktrees git lists for the repository at `dir` (its own checkout included).
fn worktree_count(dir: &Path) -> usize {
    git(dir, &["worktree", "list", "--porcelain"])
        .lines()
        .filter(|l| l.starts_with("worktree "))
        .count()
}

#[test]
fn a_dispatch_that_cannot_start_is_refused_before_anything_is_made() {
    let home = repo_home();
    // claude-code's CLI is not found: its command names no file.
    std::fs::write(
        home.path().join("config.toml"),
        "[providers.claude-code]\ncommand = \"/nonexistent/drover-test/claude\"\n",
    )
    .unwrap();
    let sim = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["dispatch".to_string(), "--provider".into(), "sim".into()];
        args.extend(extra.iter().map(|s| s.to_string()));
        args.push("--capability".into());
        args.push("workspace".into());
        args.push("Fix the greeting".into());
        args
    };
    let cases: Vec<(Vec<String>, &str, &str)> = vec![
        (
            [
                "dispatch",
                "--provider",
                "claude-code",
                "--capability",
                "workspace",
                "Fix the greeting",
            ]
            .map(String::from)
            .to_vec(),
            "PROVIDER_UNAVAILABLE",
            "drover doctor",
        ),
        (sim(&["--scenario", "nope"]), "SCENARIO_UNKNOWN", "\"nope\""),
        (
            sim(&["--scenario", "tool-permision"]),
            "SCENARIO_UNKNOWN",
            "did you mean tool-permission?",
        ),
        (
            sim(&["--cwd", "/nonexistent/drover-test"]),
            "CWD_INVALID",
            "/nonexistent/drover-test",
        ),
    ];
    // With an owner running, and with none (the dispatch would have owned its run).
    for owner in [true, false] {
        let serve = owner.then(|| home.serve());
        for (args, code, mentions) in &cases {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let line = home.refused(&args, code);
            assert!(line.contains(mentions), "owner {owner}: {line}");
        }
        drop(serve);
        assert_eq!(
            home.json(&["runs", "--all"]),
            Value::Array(vec![]),
            "no run in the ledger"
        );
        assert_eq!(drover_branches(home.work()), Vec::<String>::new());
        assert_eq!(worktree_count(home.work()), 1, "no worktree");
        assert!(
            !home.path().join("worktrees").exists()
                || std::fs::read_dir(home.path().join("worktrees"))
                    .unwrap()
                    .next()
                    .is_none(),
            "no worktree directory"
        );
    }
}

/// Waits (bounded) until `done` holds of the repository at `dir`.
fn wait_repo(dir: &Path, what: &str, done: impl Fn(&Path) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(common::RUN_LIMIT_SECS);
    while !done(dir) {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} did not happen"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn removing_a_run_whose_worktree_is_gone_deletes_its_branch_unless_it_holds_commits() {
    let home = repo_home();
    let work = home.work();
    let file = scenario(
        &home,
        "two-turns",
        &[("one.txt", "one\n", "done"), ("two.txt", "two\n", "done")],
    );
    let _serve = home.serve();
    // Two runs whose worktrees vanish (as a throwaway data directory's do); the second's
    // branch got a commit first.
    let (empty, empty_ws) = worktree_run(&home, &file, "Lose the worktree", 1);
    let (committed, committed_ws) = worktree_run(&home, &file, "Commit, then lose it", 1);
    let committed_branch = str_at(&committed_ws, "branch").to_string();
    let wt = worktree(&committed_ws);
    git(&wt, &["config", "user.name", "Test User"]);
    git(&wt, &["config", "user.email", "test@example.invalid"]);
    git(&wt, &["add", "-A"]);
    git(
        &wt,
        &["commit", "-q", "--no-gpg-sign", "-m", "the agent's commit"],
    );
    for (run, ws) in [(&empty, &empty_ws), (&committed, &committed_ws)] {
        std::fs::remove_dir_all(worktree(ws)).unwrap();
        home.json(&["follow-up", run, "go on"]);
        assert_eq!(home.wait_terminal(run)["workspace"]["status"], "missing");
    }
    assert_eq!(drover_branches(work).len(), 2);
    home.json(&["remove", &empty]);
    home.json(&["remove", &committed]);
    // The empty branch goes, the worktree entries are pruned; the commit stays on its
    // branch.
    wait_repo(work, "the empty branch to go", |dir| {
        drover_branches(dir) == vec![committed_branch.clone()]
    });
    wait_repo(work, "the worktree entries to be pruned", |dir| {
        worktree_count(dir) == 1
    });
    assert!(git(work, &["log", "--oneline", &committed_branch]).contains("the agent's commit"));
    assert_eq!(home.show(&empty)["workspace"]["status"], "discarded");
}

/// `drover update` brings a run's branch up to date with its base inside its worktree: a
/// clean update merges the base in (the base's file is there, the run's change still
/// counts only its own files), a rebase replays the run's work on the base; the user's
/// checkout is never touched.
#[test]
fn update_merges_or_rebases_the_base_into_the_runs_branch() {
    for rebase in [false, true] {
        let home = repo_home();
        let work = home.work();
        let _serve = home.serve();
        let (run, ws) = worktree_run(&home, "worktree-change", "Add a cache", 2);
        let tree = worktree(&ws);
        let up_to_date = home.json(&["update", &run]);
        assert_eq!(up_to_date["update"]["how"], "up_to_date", "{up_to_date}");

        let base_tip = commit_file(work, "NOTES.md", "notes\n", "notes on main");
        let before = checkout_state(work);
        let mut args = vec!["update", run.as_str()];
        if rebase {
            args.push("--rebase");
        }
        let answer = home.json(&args);
        let how = if rebase { "rebased" } else { "merged" };
        assert_eq!(answer["update"]["how"], how, "{answer}");
        assert_eq!(answer["update"]["files"], serde_json::json!(["NOTES.md"]));
        assert_eq!(
            read(&tree, "NOTES.md"),
            "notes\n",
            "the base's file is in the worktree"
        );
        assert!(read(&tree, "src/cache.rs").contains("pub struct Cache"));
        let branch = str_at(&ws, "branch");
        assert!(
            git_output(work, &["merge-base", "--is-ancestor", &base_tip, branch])
                .status
                .success(),
            "the branch has the base's commit"
        );
        assert_eq!(checkout_state(work), before, "the checkout is untouched");
        // The run's change still counts its own two files only.
        let after = wait_change(&home, &run, 2);
        assert_eq!(after["base_commit"], base_tip.as_str(), "{after}");
        assert!(
            git(&tree, &["status", "--porcelain"]).is_empty(),
            "the run's work is committed on its branch"
        );
    }
}

/// A conflicting update changes nothing: the branch, the worktree's files and status are
/// as they were; drover prints the follow-up that hands the conflict to the run and exits
/// with MERGE_CONFLICT; sending that follow-up is the user's call.
#[test]
fn a_conflicting_update_changes_nothing_and_offers_the_follow_up() {
    for rebase in [false, true] {
        let home = repo_home();
        let work = home.work();
        let _serve = home.serve();
        let (run, ws) = worktree_run(&home, "worktree-change", "Add a cache", 2);
        let tree = worktree(&ws);
        commit_file(
            work,
            "src/main.rs",
            "fn main() { /* mine */ }\n",
            "my own main",
        );
        let branch = str_at(&ws, "branch");
        let branch_before = git(work, &["rev-parse", branch]);
        let status_before = git(&tree, &["status", "--porcelain", "--untracked-files=all"]);
        let main_before = read(&tree, "src/main.rs");
        let mut args = vec!["update", run.as_str()];
        if rebase {
            args.push("--rebase");
        }
        let out = home.drover(&args);
        assert!(!out.status.success(), "{out:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("MERGE_CONFLICT"), "{stderr}");
        assert!(
            stdout.contains("src/main.rs") && stdout.contains(&format!("drover follow-up {run} ")),
            "{stdout}"
        );
        assert_eq!(git(work, &["rev-parse", branch]), branch_before);
        assert_eq!(
            git(&tree, &["status", "--porcelain", "--untracked-files=all"]),
            status_before
        );
        assert_eq!(read(&tree, "src/main.rs"), main_before);
        let notes = notes_of(&home.show(&run));
        assert!(
            notes.iter().any(|n| n.contains("conflicts in src/main.rs")),
            "{notes:?}"
        );
    }
}

/// `drover gc` cleans up in bulk: a finished run whose worktree holds no change leaves
/// the trays with its worktree and branch, without asking; one with unmerged work is
/// listed and kept, worktree and branch, until `remove --finished --force`.
#[test]
fn gc_removes_what_holds_nothing_and_lists_what_it_keeps() {
    let home = repo_home();
    let work = home.work();
    let _serve = home.serve();
    let (changed, ws) = worktree_run(&home, "worktree-change", "Add a cache", 2);
    let empty = home.dispatch("quick-success", "Look around", &["--workspace", "worktree"]);
    home.wait_idle(&empty);
    let empty_ws = wait_change(&home, &empty, 0);
    for run in [&changed, &empty] {
        home.json(&["complete", run]);
        home.wait_terminal(run);
    }
    let out = home.drover(&["gc"]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("removed 1 finished run"), "{stdout}");
    assert!(
        stdout.contains("kept 1 with unmerged work") && stdout.contains(&changed),
        "{stdout}"
    );
    let listed: Vec<String> = home
        .runs()
        .iter()
        .map(|r| str_at(r, "run_id").to_string())
        .collect();
    assert_eq!(listed, std::slice::from_ref(&changed));
    // Its worktree and branch go once the owner's git work is done.
    let gone = worktree(&empty_ws);
    let branch = str_at(&empty_ws, "branch").to_string();
    wait_repo(work, "the empty worktree and its branch gone", |dir| {
        !gone.exists() && !drover_branches(dir).contains(&branch)
    });
    assert!(worktree(&ws).exists(), "unmerged work stays");
    let forced = home.json(&["remove", "--finished", "--force"]);
    assert_eq!(forced["removed"], serde_json::json!([changed]), "{forced}");
    assert!(drover_branches(work).contains(&str_at(&ws, "branch").to_string()));
}

/// A new worktree is made ready to build: the git-ignored files `.worktreeinclude` lists
/// are copied from the checkout, `[workspaces] link` directories are linked, and the
/// setup command runs in the run's directory before its CLI starts — a failing setup
/// fails the run's start with its exit code and the end of its output.
#[test]
fn a_new_worktree_gets_its_included_files_linked_directories_and_setup() {
    let home = repo_home();
    let work = home.work();
    std::fs::write(
        work.join(".gitignore"),
        ".env\nnode_modules/\nscratch.txt\n",
    )
    .unwrap();
    std::fs::write(work.join(".worktreeinclude"), ".env\n").unwrap();
    git(work, &["add", ".gitignore", ".worktreeinclude"]);
    git(work, &["commit", "-q", "-m", "ignore files"]);
    std::fs::write(work.join(".env"), "TOKEN=local\n").unwrap();
    std::fs::write(work.join("scratch.txt"), "not listed\n").unwrap();
    std::fs::create_dir_all(work.join("node_modules/left-pad")).unwrap();
    std::fs::write(work.join("node_modules/left-pad/index.js"), "//\n").unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[workspaces]\nlink = [\"node_modules\", \"target\"]\nsetup = [\"sh\", \"-c\", \"ls node_modules > setup.txt; echo installed 1 package\"]\n",
    )
    .unwrap();
    let _serve = home.serve();
    let run = home.dispatch("quick-success", "Build it", &["--workspace", "worktree"]);
    let view = home.wait_idle(&run);
    let tree = worktree(&view["workspace"]);
    assert_eq!(read(&tree, ".env"), "TOKEN=local\n");
    assert!(!tree.join(".env").is_symlink(), ".env is a copy");
    assert!(!tree.join("scratch.txt").exists(), "only what it lists");
    assert!(tree.join("node_modules").is_symlink());
    assert_eq!(
        std::fs::read_link(tree.join("node_modules")).unwrap(),
        work.join("node_modules")
    );
    assert!(
        !tree.join("target").exists(),
        "a directory the checkout lacks is not made"
    );
    assert_eq!(
        read(&tree, "setup.txt"),
        "left-pad\n",
        "setup ran with the links in place"
    );
    let notes = notes_of(&view);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("copied 1 file .worktreeinclude lists")
                && n.contains("linked node_modules")),
        "{notes:?}"
    );
    assert!(
        notes.iter().any(|n| n.contains("ran its setup `sh -c")),
        "{notes:?}"
    );
    // Its output is in the run's transcript.
    let transcript: Vec<String> = home
        .events(&run)
        .iter()
        .filter(|e| e["kind"] == "transcript")
        .filter_map(|e| Some(e["body"]["line"].as_str()?.to_string()))
        .collect();
    assert!(
        transcript
            .iter()
            .any(|l| l.starts_with("setup `sh -c") && l.contains("installed 1 package")),
        "{transcript:?}"
    );
    // The live line names the step (`preparing: running setup · 12s`; its clock starts
    // with the step: `live_state` tests).
    let details: Vec<String> = home
        .events(&run)
        .iter()
        .filter(|e| e["kind"] == "live_state")
        .filter_map(|e| Some(e["body"]["assignment"]["detail"].as_str()?.to_string()))
        .collect();
    assert!(
        details
            .windows(2)
            .any(|w| w[0] == "creating the worktree" && w[1] == "running setup"),
        "{details:?}"
    );
}

#[test]
fn a_failing_setup_fails_the_runs_start_with_its_exit_code_and_output() {
    let home = repo_home();
    std::fs::write(
        home.path().join("config.toml"),
        "[workspaces]\nsetup = [\"sh\", \"-c\", \"echo npm ERR missing lockfile >&2; exit 3\"]\n",
    )
    .unwrap();
    let _serve = home.serve();
    let run = home.dispatch("quick-success", "Build it", &["--workspace", "worktree"]);
    let view = home.wait_terminal(&run);
    assert_eq!(view["state"], "failed", "{view}");
    let notes = notes_of(&view).join("\n");
    assert!(
        notes.contains("exit code 3") && notes.contains("npm ERR missing lockfile"),
        "{notes}"
    );
    assert!(
        home.events(&run).iter().any(|e| e["kind"] == "transcript"
            && e["body"]["line"]
                .as_str()
                .is_some_and(|l| l.starts_with("setup failed") && l.contains("npm ERR"))),
        "the setup's output is in the transcript"
    );
}

/// Writes an executable script at `path` in the checkout and commits it.
fn commit_script(dir: &Path, path: &str, content: &str) {
    use std::os::unix::fs::PermissionsExt;
    let file = dir.join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, content).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    git(dir, &["add", path]);
    git(dir, &["commit", "-q", "-m", &format!("add {path}")]);
}

/// Waits until the run waits for its scripts' approval; returns its view.
fn wait_approval(home: &Home, run: &str) -> Value {
    home.wait_for(run, "its scripts' approval asked", |v| {
        v["needs_you"]["reason"] == "approval"
    })
}

/// The repository's own `.drover/setup` runs only once the user approved that exact
/// script: a new one makes the run wait in Needs you (not fail) with the script shown;
/// `approve-scripts --yes` keeps its hash and the setup runs; the next run of the same
/// repository does not ask; a changed script asks again with the diff, and `--refuse`
/// starts the run without it. `.drover/teardown` runs when the worktree is removed, only
/// while its hash is the approved one — edited in the worktree, it does not run, and the
/// worktree is removed all the same.
#[test]
fn a_repository_script_runs_only_once_approved_and_asks_again_when_changed() {
    let home = repo_home();
    let work = home.work();
    let log = home.path().join("teardown.log");
    commit_script(
        work,
        ".drover/setup",
        "#!/bin/sh\necho one > setup-ran.txt\necho set up\n",
    );
    commit_script(
        work,
        ".drover/teardown",
        &format!("#!/bin/sh\necho bye >> '{}'\n", log.display()),
    );
    let _serve = home.serve();

    // First time: the run waits, nothing of the script ran.
    let first = home.dispatch("quick-success", "Build it", &["--workspace", "worktree"]);
    let view = wait_approval(&home, &first);
    assert_eq!(view["state"], "starting", "{view}");
    let live = &view["live_state"];
    assert_eq!(live["state"], "preparing", "{view}");
    assert!(
        str_at(live, "detail").contains("approve .drover/setup and .drover/teardown"),
        "{live}"
    );
    let tree = worktree(&view["workspace"]);
    assert!(
        !tree.join("setup-ran.txt").exists(),
        "not run before approval"
    );
    let scripts = array(view["script_approval"]["scripts"].clone());
    assert_eq!(scripts.len(), 2, "{view}");
    assert!(str_at(&scripts[0], "text").contains("echo one"), "{view}");
    assert!(scripts[0]["diff"].is_null(), "first time: no diff");
    let shown = common::stdout(&home.drover(&["approve-scripts", &first]));
    assert!(
        shown.contains(".drover/setup") && shown.contains("echo one > setup-ran.txt"),
        "{shown}"
    );
    assert_eq!(home.row(&first)["script_approval"], true);

    home.json(&["approve-scripts", &first, "--yes"]);
    let view = home.wait_idle(&first);
    assert_eq!(read(&tree, "setup-ran.txt"), "one\n");
    let notes = notes_of(&view).join("\n");
    assert!(notes.contains("you approved .drover/setup"), "{notes}");
    assert!(notes.contains("ran its setup `.drover/setup`"), "{notes}");
    assert!(notes.contains("set up"), "its output's end: {notes}");
    assert!(view["script_approval"].is_null(), "{view}");

    // Approved and unchanged: the next run of the repository does not ask.
    let second = home.dispatch("quick-success", "Again", &["--workspace", "worktree"]);
    let view = home.wait_idle(&second);
    let second_tree = worktree(&view["workspace"]);
    assert_eq!(read(&second_tree, "setup-ran.txt"), "one\n");

    // Changed: asked again, with the diff against the approved one; refused, the run
    // starts without it.
    commit_script(
        work,
        ".drover/setup",
        "#!/bin/sh\necho one > setup-ran.txt\necho two >> setup-ran.txt\n",
    );
    let third = home.dispatch("quick-success", "Once more", &["--workspace", "worktree"]);
    let view = wait_approval(&home, &third);
    let scripts = array(view["script_approval"]["scripts"].clone());
    assert_eq!(scripts.len(), 1, "only the changed one: {view}");
    assert!(
        str_at(&scripts[0], "diff").contains("+echo two >> setup-ran.txt"),
        "{view}"
    );
    home.json(&["approve-scripts", &third, "--refuse"]);
    let view = home.wait_idle(&third);
    assert!(!worktree(&view["workspace"]).join("setup-ran.txt").exists());
    assert!(
        notes_of(&view)
            .join("\n")
            .contains("you refused .drover/setup")
    );
    home.refused(&["approve-scripts", &third, "--yes"], "NO_PENDING_REQUEST");

    // Teardown: the approved one runs when the worktree goes.
    home.json(&["complete", &second]);
    home.wait_terminal(&second);
    home.json(&["discard", &second]);
    let view = home.wait_for(&second, "its teardown noted", |v| {
        notes_of(v).iter().any(|n| n.contains(".drover/teardown"))
    });
    assert_eq!(read(home.path(), "teardown.log"), "bye\n");
    assert!(
        notes_of(&view)
            .iter()
            .any(|n| n.contains("ran .drover/teardown")),
        "{view}"
    );
    assert!(!second_tree.exists());

    // Edited in the worktree, it is not the approved script: not run, the worktree goes.
    std::fs::write(
        tree.join(".drover/teardown"),
        format!("#!/bin/sh\necho edited >> '{}'\n", log.display()),
    )
    .unwrap();
    home.json(&["complete", &first]);
    home.wait_terminal(&first);
    home.json(&["discard", &first]);
    let view = home.wait_for(&first, "its teardown noted", |v| {
        notes_of(v).iter().any(|n| n.contains(".drover/teardown"))
    });
    assert!(
        notes_of(&view)
            .iter()
            .any(|n| n.contains("changed since it was approved")),
        "{view}"
    );
    assert_eq!(read(home.path(), "teardown.log"), "bye\n", "not run");
    assert!(!tree.exists());
}

/// A conflict is offered to the run in Needs you: after `update` conflicts, the idle run
/// waits there (`needs_you.reason` `conflict`) with the follow-up that asks it to merge
/// its base and resolve the files; sending a follow-up withdraws the offer. `merge` on a
/// branch that conflicts is refused with MERGE_CONFLICT, changing nothing, and offers
/// the same.
#[test]
fn a_conflict_is_offered_in_needs_you_as_the_follow_up_that_hands_it_to_the_run() {
    let home = repo_home();
    let work = home.work();
    let _serve = home.serve();
    let (run, _ws) = worktree_run(&home, "worktree-change", "Add a cache", 2);
    assert!(home.show(&run)["needs_you"].is_null());
    commit_file(
        work,
        "src/main.rs",
        "fn main() { /* mine */ }\n",
        "my own main",
    );
    let out = home.drover(&["update", &run]);
    assert!(!out.status.success(), "{out:?}");
    let view = home.wait_for(&run, "the conflict offered", |v| {
        v["needs_you"]["reason"] == "conflict"
    });
    let offer = &view["conflict_offer"];
    assert_eq!(offer["base"], "main", "{view}");
    assert_eq!(offer["files"], serde_json::json!(["src/main.rs"]), "{view}");
    assert!(
        str_at(offer, "follow_up").contains("Merge main into your branch"),
        "{view}"
    );
    assert_eq!(home.row(&run)["conflict_offered"], true);

    // A follow-up (the offered one, as `enter` sends it) withdraws the offer.
    home.json(&["follow-up", &run, str_at(offer, "follow_up")]);
    let view = home.wait_for(&run, "the offer withdrawn", |v| {
        v["conflict_offer"].is_null() && v["state"] == "idle"
    });
    assert!(view["needs_you"].is_null(), "{view}");

    // `merge` refused on the conflict: nothing changed, and the same offer.
    let head_before = git(work, &["rev-parse", "HEAD"]);
    home.refused(&["merge", &run], "MERGE_CONFLICT");
    assert_eq!(git(work, &["rev-parse", "HEAD"]), head_before);
    let view = home.wait_for(&run, "the conflict offered again", |v| {
        v["needs_you"]["reason"] == "conflict"
    });
    assert_eq!(
        view["conflict_offer"]["files"],
        serde_json::json!(["src/main.rs"]),
        "{view}"
    );
}
