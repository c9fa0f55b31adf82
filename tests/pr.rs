//! A pull request from a run (issue 30, item 3) end to end: the real `drover` binary, real
//! git, a bare repository on disk as the remote.
//!
//! GitHub itself is out of reach of these tests: the forge's CLI is a stand-in `gh` put
//! first on PATH, which records its arguments (and the body it was given on stdin) and
//! answers as the real `gh` does — `gh pr create` prints the pull request's URL, `gh pr
//! view N --json number,state,url,isDraft,statusCheckRollup` prints JSON of the shape
//! gh's manual gives for those fields (`statusCheckRollup`: check runs with a
//! `conclusion`, commit statuses with a `state`).
//!
//! - `drover pr` pushes the run's branch (uncommitted work committed onto it first) and
//!   opens the pull request with `gh`; the run keeps it (`PR #7 · open · checks 2/4`);
//!   `--refresh` reads it again (merged); the user's checkout never changes;
//! - without `gh`, the push alone, and the address the remote printed (or that none was);
//! - no remote, and a push the remote refuses: the code and sentence, nothing changed;
//! - a GitLab remote: the merge request opened and read with a stand-in `glab`.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::{Home, git, repo_home, str_at};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A bare repository under the home, added to the checkout as `origin` with `main`
/// pushed.
fn bare_remote(home: &Home) -> PathBuf {
    let remote = home.path().join("remote.git");
    git(
        home.path(),
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            remote.to_str().unwrap(),
        ],
    );
    git(
        home.work(),
        &["remote", "add", "origin", remote.to_str().unwrap()],
    );
    git(home.work(), &["push", "-q", "origin", "main"]);
    remote
}

fn write_script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A stand-in `gh` in `<home>/bin`: each call's arguments go to `gh.log` (one line), the
/// body read on stdin to `gh.body`; `pr view` answers with the state in `gh.state`.
fn stand_in_gh(home: &Home) -> PathBuf {
    let bin = home.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let dir = home.path().display().to_string();
    std::fs::write(home.path().join("gh.state"), "OPEN").unwrap();
    write_script(
        &bin.join("gh"),
        &format!(
            r#"#!/bin/sh
echo "$*" >> "{dir}/gh.log"
if [ "$1 $2" = "pr create" ]; then
  cat > "{dir}/gh.body"
  echo "https://github.com/test/repo/pull/7"
  exit 0
fi
if [ "$1 $2" = "pr view" ]; then
  state=$(cat "{dir}/gh.state")
  printf '{{"isDraft":false,"number":%s,"state":"%s","url":"https://github.com/test/repo/pull/%s","statusCheckRollup":[{{"__typename":"CheckRun","name":"build","status":"COMPLETED","conclusion":"SUCCESS"}},{{"__typename":"CheckRun","name":"test","status":"IN_PROGRESS","conclusion":""}},{{"__typename":"CheckRun","name":"lint","status":"COMPLETED","conclusion":"FAILURE"}},{{"__typename":"StatusContext","context":"ci/external","state":"SUCCESS"}}]}}\n' "$3" "$state" "$3"
  exit 0
fi
echo "unknown command $*" >&2
exit 1
"#
        ),
    );
    bin
}

/// PATH as the tests were given it, less any directory holding a `gh` (so "no gh" holds
/// on a machine that has one), with `first` in front when given.
fn path_with(first: Option<&Path>) -> String {
    let mut dirs: Vec<String> = first.map(|f| f.display().to_string()).into_iter().collect();
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        if !dir.join("gh").exists() {
            dirs.push(dir.display().to_string());
        }
    }
    dirs.join(":")
}

/// `git status` and HEAD of the user's checkout.
fn checkout_state(dir: &Path) -> (String, String) {
    (
        git(dir, &["status", "--porcelain", "--untracked-files=all"]),
        git(dir, &["rev-parse", "HEAD"]),
    )
}

/// A worktree run of `worktree-change` (two files, left uncommitted), idle with its
/// change counted; returns the run and its workspace.
fn worktree_run(home: &Home) -> (String, Value) {
    let run = home.dispatch(
        "worktree-change",
        "Add a cache",
        &["--workspace", "worktree"],
    );
    home.wait_idle(&run);
    let view = home.wait_for(&run, "its change counted", |v| {
        v["workspace"]["change"]["files"].as_u64() == Some(2)
    });
    (run, view["workspace"].clone())
}

#[test]
fn pr_pushes_the_branch_opens_the_pull_request_with_gh_and_refresh_reads_it_again() {
    let home = repo_home();
    let remote = bare_remote(&home);
    let bin = stand_in_gh(&home);
    let path = path_with(Some(&bin));
    let _serve = home.serve_with_env(&[("PATH", &path)]);
    let (run, ws) = worktree_run(&home);
    let branch = str_at(&ws, "branch").to_string();
    let before = checkout_state(home.work());

    let answer = home.json(&["pr", &run, "--title", "Add a cache to the app"]);
    assert_eq!(answer["created"], true, "{answer}");
    assert_eq!(answer["push"]["remote"], "origin", "{answer}");
    assert_eq!(answer["push"]["branch"], branch.as_str(), "{answer}");
    let pr = &answer["pr"];
    assert_eq!(pr["number"], 7, "{answer}");
    assert_eq!(pr["state"], "open", "{answer}");
    assert_eq!(pr["url"], "https://github.com/test/repo/pull/7", "{answer}");
    assert_eq!(pr["checks"]["passed"], 2, "{answer}");
    assert_eq!(pr["checks"]["failed"], 1, "{answer}");
    assert_eq!(pr["checks"]["total"], 4, "{answer}");

    // The remote has the run's branch, with the work that was uncommitted in the worktree.
    let pushed = git(&remote, &["rev-parse", &format!("refs/heads/{branch}")]);
    assert_eq!(pushed, str_at(&answer["push"], "commit"));
    let files = git(&remote, &["ls-tree", "-r", "--name-only", &pushed]);
    assert!(files.contains("src/cache.rs"), "{files}");
    let tree = PathBuf::from(str_at(&ws, "worktree"));
    assert_eq!(git(&tree, &["rev-parse", "HEAD"]), pushed);
    assert_eq!(
        git(&tree, &["rev-parse", "--abbrev-ref", "@{upstream}"]),
        format!("origin/{branch}"),
        "pushed with -u"
    );

    // gh was asked as documented; the body holds the run's task.
    let log = std::fs::read_to_string(home.path().join("gh.log")).unwrap();
    assert!(
        log.contains(&format!(
            "pr create --head {branch} --title Add a cache to the app --body-file - --base main"
        )),
        "{log}"
    );
    assert!(
        log.contains("pr view 7 --json number,state,url,isDraft,statusCheckRollup"),
        "{log}"
    );
    let body = std::fs::read_to_string(home.path().join("gh.body")).unwrap();
    assert!(body.contains("## Task\n\n> Add a cache"), "{body}");
    assert!(body.contains(&format!("drover run {run}")), "{body}");

    // The run keeps it; the user's checkout did not change.
    assert_eq!(home.show(&run)["workspace"]["pr"]["number"], 7);
    assert_eq!(checkout_state(home.work()), before);

    // Merged on the forge: --refresh reads it again, and pushes nothing.
    std::fs::write(home.path().join("gh.state"), "MERGED").unwrap();
    let read = home.json(&["pr", &run, "--refresh"]);
    assert_eq!(read["pr"]["state"], "merged", "{read}");
    assert!(read["push"].is_null(), "{read}");
    assert_eq!(home.show(&run)["workspace"]["pr"]["state"], "merged");
    let text = home.drover(&["pr", &run, "--refresh"]);
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("PR #7 · merged · checks 2/4 (1 failed)"),
        "{}",
        common::describe(&text)
    );
}

#[test]
fn pr_without_gh_pushes_and_prints_the_address_the_remote_gave_or_says_there_was_none() {
    let home = repo_home();
    let remote = bare_remote(&home);
    // The remote prints what GitHub prints on a new branch's push.
    write_script(
        &remote.join("hooks/post-receive"),
        r#"#!/bin/sh
while read old new ref; do
  b=${ref#refs/heads/}
  echo "Create a pull request for '$b' on GitHub by visiting:"
  echo "     https://github.com/test/repo/pull/new/$b"
done
"#,
    );
    let path = path_with(None);
    let _serve = home.serve_with_env(&[("PATH", &path)]);
    let (run, ws) = worktree_run(&home);
    let branch = str_at(&ws, "branch").to_string();
    let out = home.drover(&["pr", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", common::describe(&out));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains(&format!("pushed {branch} to origin")),
        "{text}"
    );
    assert!(text.contains("`gh` is not on PATH"), "{text}");
    assert!(
        text.contains(&format!(
            "open a pull request at https://github.com/test/repo/pull/new/{branch}"
        )),
        "{text}"
    );
    assert!(git(&remote, &["rev-parse", &format!("refs/heads/{branch}")]).len() == 40);
    assert!(home.show(&run)["workspace"]["pr"].is_null());

    // A remote that prints nothing: drover says so.
    std::fs::remove_file(remote.join("hooks/post-receive")).unwrap();
    let answer = home.json(&["pr", &run]);
    assert!(answer["push"]["compare_url"].is_null(), "{answer}");
    let out = home.drover(&["pr", &run]);
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("the remote gave no address for opening a pull request"),
        "{}",
        common::describe(&out)
    );
}

#[test]
fn no_remote_and_a_refused_push_are_refused_with_their_code_and_nothing_changes() {
    let home = repo_home();
    let _serve = home.serve_with_env(&[("PATH", &path_with(None))]);
    let (run, ws) = worktree_run(&home);
    let tree = PathBuf::from(str_at(&ws, "worktree"));
    let before = checkout_state(home.work());
    let tree_before = checkout_state(&tree);

    let line = home.refused(&["pr", &run], "NO_REMOTE");
    assert!(line.contains("git remote add origin"), "{line}");
    // Not even a commit of the run's work was made.
    assert_eq!(checkout_state(&tree), tree_before);

    // A remote that is not there: git's own words, with the code.
    let gone = home.path().join("no-such-remote.git");
    git(
        home.work(),
        &["remote", "add", "origin", gone.to_str().unwrap()],
    );
    let line = home.refused(&["pr", &run], "PUSH_REFUSED");
    assert!(line.contains("git push -u origin"), "{line}");
    assert!(
        line.contains("does not appear to be a git repository"),
        "{line}"
    );
    assert_eq!(checkout_state(home.work()), before);
    assert!(home.show(&run)["workspace"]["pr"].is_null());
}

/// A scenario file in the home: one turn per entry, each writing `(path, content)` with
/// the Write tool.
fn two_turns(home: &Home) -> String {
    let mut text = String::from(
        "description = \"Writes a file each turn.\"\nmodel = \"claude-sonnet-4-5\"\nsession_cost_per_turn = 0.01\n",
    );
    for (path, content) in [("one.txt", "one\n"), ("two.txt", "two\n")] {
        text.push_str(&format!(
            "\n[[turns]]\nstatus = \"done\"\nsummary = \"Wrote {path}.\"\nfiles = [\"{path}\"]\n\n\
             [[turns.steps]]\ntool = \"Write\"\ninput = {{ file_path = \"{path}\", content = {content:?} }}\nduration_ms = 50\n\n\
             [[turns.steps]]\ntext = \"{path} is written.\"\n"
        ));
    }
    let file = home.path().join("two-turns.toml");
    std::fs::write(&file, text).unwrap();
    file.display().to_string()
}

#[test]
fn a_follow_up_on_a_run_with_an_open_pull_request_pushes_its_work_to_the_same_one() {
    let home = repo_home();
    let remote = bare_remote(&home);
    let bin = stand_in_gh(&home);
    let _serve = home.serve_with_env(&[("PATH", &path_with(Some(&bin)))]);
    let scenario = two_turns(&home);
    let run = home.dispatch(&scenario, "Write two files", &["--workspace", "worktree"]);
    home.wait_idle(&run);
    let ws = home.wait_for(&run, "its change counted", |v| {
        v["workspace"]["change"]["files"].as_u64() == Some(1)
    })["workspace"]
        .clone();
    let branch = str_at(&ws, "branch").to_string();
    let opened = home.json(&["pr", &run]);
    assert_eq!(opened["pr"]["number"], 7, "{opened}");
    let first = git(&remote, &["rev-parse", &format!("refs/heads/{branch}")]);

    home.json(&["follow-up", &run, "Write the second file"]);
    let view = home.wait_for(&run, "the second turn's work pushed", |v| {
        v["state"] == "idle"
            && notes_of_view(v)
                .iter()
                .any(|n| n.contains("after the turn"))
    });
    let note = notes_of_view(&view)
        .into_iter()
        .find(|n| n.contains("after the turn"))
        .unwrap();
    assert!(note.contains("PR #7 · open"), "{note}");
    let second = git(&remote, &["rev-parse", &format!("refs/heads/{branch}")]);
    assert_ne!(first, second, "the remote branch moved on");
    assert_eq!(
        git(&remote, &["rev-parse", &format!("{second}~1")]),
        first,
        "a fast-forward: the first push's commit is its parent"
    );
    let files = git(&remote, &["ls-tree", "-r", "--name-only", &second]);
    assert!(files.contains("two.txt"), "{files}");
    let log = std::fs::read_to_string(home.path().join("gh.log")).unwrap();
    assert_eq!(
        log.matches("pr create").count(),
        1,
        "the same pull request: {log}"
    );
    assert_eq!(
        log.matches("pr view 7").count(),
        2,
        "read again after the push: {log}"
    );
}

fn notes_of_view(view: &Value) -> Vec<String> {
    common::notes_of(view)
}

#[test]
fn a_forge_cli_refusing_for_credentials_is_auth_failed_with_its_words_and_no_token() {
    let home = repo_home();
    let remote = bare_remote(&home);
    let bin = home.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // What gh says when its token is refused, with the token in its words.
    write_script(
        &bin.join("gh"),
        "#!/bin/sh\necho 'HTTP 401: Bad credentials (https://api.github.com/graphql) for token ghp_R2d2C3poR2d2C3poR2d2C3poR2d2C3poR2d2' >&2\nexit 1\n",
    );
    let _serve = home.serve_with_env(&[("PATH", &path_with(Some(&bin)))]);
    let (run, ws) = worktree_run(&home);
    let branch = str_at(&ws, "branch").to_string();
    let before = checkout_state(home.work());
    let line = home.refused(&["pr", &run], "AUTH_FAILED");
    assert!(
        line.contains("Bad credentials"),
        "the CLI's own words: {line}"
    );
    assert!(!line.contains("ghp_R2d2"), "no token shown: {line}");
    assert!(line.contains("gh auth login"), "{line}");
    assert!(
        line.contains(&format!("the branch {branch} was pushed to origin")),
        "{line}"
    );
    assert_eq!(
        git(&remote, &["rev-parse", &format!("refs/heads/{branch}")]).len(),
        40
    );
    assert_eq!(checkout_state(home.work()), before);
    assert!(home.show(&run)["workspace"]["pr"].is_null());
}

/// A stand-in `glab` in `<home>/bin`: each call's arguments go to `glab.log`; `mr create`
/// prints what glab prints (the merge request's reference, title and address); `mr view
/// N --output json` prints the merge request as glab does — GitLab's merge request object
/// (`iid`, `state` `opened` / `merged` / `closed`, `web_url`, `draft`, `head_pipeline`
/// with its `status`) — with the state in `glab.state`.
fn stand_in_glab(home: &Home) -> PathBuf {
    let bin = home.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let dir = home.path().display().to_string();
    std::fs::write(home.path().join("glab.state"), "opened").unwrap();
    write_script(
        &bin.join("glab"),
        &format!(
            r#"#!/bin/sh
printf '%s\n' "$*" | head -c 4000 | tr '\n' ' ' >> "{dir}/glab.log"
echo >> "{dir}/glab.log"
if [ "$1 $2" = "mr create" ]; then
  echo "Creating merge request for $4 into main in test/repo"
  echo
  echo "!12 $6 ($4)"
  echo " https://gitlab.example.com/test/repo/-/merge_requests/12"
  exit 0
fi
if [ "$1 $2" = "mr view" ]; then
  state=$(cat "{dir}/glab.state")
  printf '{{"id":90112,"iid":%s,"project_id":41,"title":"Add a cache","state":"%s","draft":true,"work_in_progress":true,"source_branch":"b","target_branch":"main","web_url":"https://gitlab.example.com/test/repo/-/merge_requests/%s","head_pipeline":{{"id":5501,"status":"running","ref":"b"}}}}\n' "$3" "$state" "$3"
  exit 0
fi
echo "unknown command $*" >&2
exit 1
"#
        ),
    );
    bin
}

/// A GitLab remote (a bare repository on disk whose address names GitLab, which is how
/// drover tells the forge): `drover pr --draft` pushes and opens a merge request with
/// `glab mr create`, reads it with `glab mr view N --output json` (`MR !12 · open`, its
/// pipeline as its one check), and `--refresh` reads it merged.
#[test]
fn pr_on_a_gitlab_remote_opens_a_merge_request_with_glab_and_reads_it_again() {
    let home = repo_home();
    let remote = home.path().join("gitlab.example.com/test/repo.git");
    std::fs::create_dir_all(&remote).unwrap();
    git(
        home.path(),
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            remote.to_str().unwrap(),
        ],
    );
    git(
        home.work(),
        &["remote", "add", "origin", remote.to_str().unwrap()],
    );
    git(home.work(), &["push", "-q", "origin", "main"]);
    let bin = stand_in_glab(&home);
    let path = path_with(Some(&bin));
    let _serve = home.serve_with_env(&[("PATH", &path)]);
    let (run, ws) = worktree_run(&home);
    let branch = str_at(&ws, "branch").to_string();
    let before = checkout_state(home.work());

    let answer = home.json(&["pr", &run, "--draft", "--title", "Add a cache"]);
    assert_eq!(answer["created"], true, "{answer}");
    let pr = &answer["pr"];
    assert_eq!(pr["forge"], "gitlab", "{answer}");
    assert_eq!(pr["number"], 12, "{answer}");
    assert_eq!(pr["state"], "open", "{answer}");
    assert_eq!(pr["draft"], true, "{answer}");
    assert_eq!(
        pr["url"],
        "https://gitlab.example.com/test/repo/-/merge_requests/12"
    );
    assert_eq!(pr["checks"]["total"], 1, "the pipeline: {answer}");
    assert_eq!(pr["checks"]["passed"], 0, "still running: {answer}");
    let pushed = git(&remote, &["rev-parse", &format!("refs/heads/{branch}")]);
    assert_eq!(pushed, str_at(&answer["push"], "commit"));

    let log = std::fs::read_to_string(home.path().join("glab.log")).unwrap();
    assert!(
        log.contains(&format!(
            "mr create --source-branch {branch} --title Add a cache --description "
        )) && log.contains("--yes --target-branch main --draft"),
        "{log}"
    );
    assert!(log.contains("mr view 12 --output json"), "{log}");
    let text = home.drover(&["pr", &run, "--refresh"]);
    assert!(
        common::stdout(&text).contains("MR #12 · draft · checks 0/1"),
        "{}",
        common::describe(&text)
    );

    std::fs::write(home.path().join("glab.state"), "merged").unwrap();
    let read = home.json(&["pr", &run, "--refresh"]);
    assert_eq!(read["pr"]["state"], "merged", "{read}");
    assert!(read["push"].is_null(), "{read}");
    assert_eq!(checkout_state(home.work()), before);
}
