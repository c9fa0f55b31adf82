//! The sandbox end to end (docs/ARCHITECTURE.md §"The sandbox"): the real `drover`
//! binary, real bubblewrap, real git, the simulated agent running real shell commands.
//!
//! - a sandboxed run's commands cannot write outside its worktree (the user's checkout,
//!   the home directory, anywhere else), cannot read `~/.ssh` or another run's worktree,
//!   cannot plant a hook in the repository, and still does its work: its files, a commit
//!   on its branch, its change counted;
//! - stopping a sandboxed run leaves none of its processes running, those it started in
//!   sessions of their own included;
//! - `[limits] sandbox_network = false` gives the run a network namespace of its own;
//! - with bubblewrap absent from `PATH`, `--sandbox` (and `sandbox_auto` for an `auto`
//!   run) is refused with `SANDBOX_UNAVAILABLE` and the install command, nothing made;
//!   `drover doctor` says bubblewrap is missing, or found with its version.
//!
//! bubblewrap needs namespaces: CI runs as root with `bwrap` installed (`.ci/run`); as
//! another user the tests that start a sandbox say why and return.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::{Home, git, git_output, repo_home, str_at};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Whether this process may make the namespaces bubblewrap needs; says why not.
fn can_sandbox(test: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    eprintln!("{test}: skipped: not root, and bubblewrap's namespaces need root on CI");
    false
}

/// A directory outside /tmp (the sandbox has a /tmp of its own, so what is under the
/// real one is hidden anyway and would prove nothing): the user's home and a place
/// anyone could write, both visible, read-only, in the sandbox.
fn outside_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("sandbox-outside")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

/// A scenario file in the home: one turn, which writes `src/cache.rs` with the Write tool
/// and then runs `command` (a shell script) for real in the run's directory.
fn scenario(home: &Home, name: &str, command: &str) -> String {
    let text = format!(
        "description = \"Sandbox test.\"\nmodel = \"claude-sonnet-4-5\"\nsession_cost_per_turn = 0.01\n\n\
         [[turns]]\nstatus = \"done\"\nsummary = \"Tried.\"\n\n\
         [[turns.steps]]\ntool = \"Write\"\ninput = {{ file_path = \"src/cache.rs\", content = \"pub struct Cache;\\n\" }}\n\n\
         [[turns.steps]]\ntool = \"Bash\"\ninput = {{ command = '''{command}''' }}\nrun = true\n\n\
         [[turns.steps]]\ntext = \"Done.\"\n"
    );
    let file = home.path().join(format!("{name}.toml"));
    std::fs::write(&file, text).unwrap();
    file.display().to_string()
}

fn worktree_of(view: &Value) -> PathBuf {
    PathBuf::from(str_at(&view["workspace"], "worktree"))
}

#[test]
fn a_sandboxed_run_writes_only_its_worktree_reads_no_keys_and_still_commits_its_work() {
    if !can_sandbox("a_sandboxed_run_writes_only_its_worktree") {
        return;
    }
    let home = repo_home();
    let checkout = home.work().to_path_buf();
    let outside = outside_dir();
    let user_home = outside.path().join("home");
    std::fs::create_dir_all(user_home.join(".ssh")).unwrap();
    std::fs::write(user_home.join(".ssh/id_test"), "SECRET-KEY-MATERIAL\n").unwrap();
    let serve = home.serve_with_env(&[("HOME", user_home.to_str().unwrap())]);

    // Another run's worktree, with a file the sandboxed run must not read.
    let other_scenario = scenario(&home, "other", "echo OTHER-RUNS-WORK > other.txt");
    let other = home.dispatch(&other_scenario, "Other run", &["--workspace", "worktree"]);
    let other_view = home.wait_idle(&other);
    let other_worktree = worktree_of(&other_view);
    assert!(other_worktree.join("other.txt").is_file(), "{other_view}");

    let script = format!(
        "exec 2>>report.txt
echo out > '{checkout}/escaped.txt' && echo 'wrote the checkout' >> report.txt
echo out > '{outside}/escaped.txt' && echo 'wrote outside' >> report.txt
echo out > \"$HOME/escaped.txt\" && echo 'wrote home' >> report.txt
cat \"$HOME/.ssh/id_test\" >> report.txt
cat '{other}/other.txt' >> report.txt
echo hook > \"$(git rev-parse --git-common-dir)/hooks/post-checkout\" && echo 'wrote a hook' >> report.txt
readlink /proc/self/ns/net > net.txt
git add -A && git -c user.name=Sandboxed -c user.email=s@example.invalid commit -q -m sandboxed && echo committed > committed.txt
true",
        checkout = checkout.display(),
        outside = outside.path().display(),
        other = other_worktree.display(),
    );
    let sandboxed = scenario(&home, "escape", &script);
    let answer = home.dispatch_json(
        &sandboxed,
        "Try to leave the worktree",
        &["--workspace", "worktree", "--sandbox", "--policy", "auto"],
    );
    assert_eq!(answer["sandbox"], true, "{answer}");
    let run = str_at(&answer, "run_id").to_string();
    let view = home.wait_idle(&run);
    assert_eq!(view["sandbox"], true, "{view}");
    assert_eq!(home.row(&run)["sandbox"], true);
    let worktree = worktree_of(&view);

    // Nothing outside the worktree was written.
    for path in [
        checkout.join("escaped.txt"),
        outside.path().join("escaped.txt"),
        user_home.join("escaped.txt"),
        checkout.join(".git/hooks/post-checkout"),
    ] {
        assert!(
            !path.exists(),
            "{} was written from the sandbox",
            path.display()
        );
    }
    let report = std::fs::read_to_string(worktree.join("report.txt")).unwrap();
    assert!(!report.contains("wrote"), "{report}");
    assert!(
        report.matches("Read-only file system").count() >= 3,
        "each write outside failed as read-only: {report}"
    );
    assert!(!report.contains("SECRET-KEY"), "~/.ssh was read: {report}");
    assert!(
        !report.contains("OTHER-RUNS-WORK"),
        "another run's worktree was read: {report}"
    );
    // The network is the owner's by default (`sandbox_network = true`).
    let net = std::fs::read_to_string(worktree.join("net.txt")).unwrap();
    assert_eq!(
        net.trim(),
        std::fs::read_link("/proc/self/ns/net")
            .unwrap()
            .display()
            .to_string()
    );

    // Its own work is done: the Write, and a commit on its branch (git works inside).
    assert!(worktree.join("committed.txt").is_file(), "{report}");
    assert_eq!(
        std::fs::read_to_string(worktree.join("src/cache.rs")).unwrap(),
        "pub struct Cache;\n"
    );
    let branch = str_at(&view["workspace"], "branch").to_string();
    assert_eq!(
        git(&checkout, &["log", "-1", "--format=%s", &branch]),
        "sandboxed"
    );
    let view = home.wait_for(&run, "its change counted", |v| {
        v["workspace"]["change"]["files"].as_u64() >= Some(2)
    });
    assert!(
        view["workspace"]["change"]["added"].as_u64() >= Some(1),
        "{view}"
    );
    // The checkout is as it was.
    let status = git_output(&checkout, &["status", "--porcelain"]);
    assert_eq!(String::from_utf8_lossy(&status.stdout), "");
    drop(serve);
}

/// Pids of this machine's processes whose command line holds `marker`.
fn processes_with(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(marker) {
            found.push(pid);
        }
    }
    found
}

fn wait_processes(marker: &str, want_any: bool) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(common::RUN_LIMIT_SECS);
    loop {
        let found = processes_with(marker);
        if found.is_empty() != want_any {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "processes with {marker:?}: {found:?}, wanted {}",
            if want_any { "some" } else { "none" }
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn stopping_a_sandboxed_run_leaves_none_of_its_processes_running() {
    if !can_sandbox("stopping_a_sandboxed_run") {
        return;
    }
    let home = Home::new();
    let _serve = home.serve();
    // Unique to this test process: `sleep` takes a fraction.
    let detached = format!("1001.{}", std::process::id());
    let in_turn = format!("1002.{}", std::process::id());
    let script = format!("setsid sleep {detached} >/dev/null 2>&1 & sleep {in_turn}");
    let hangs = scenario(&home, "hang", &script);
    let run = home.dispatch(
        &hangs,
        "Start things and hang",
        &["--workspace", "shared", "--sandbox", "--policy", "auto"],
    );
    let started = wait_processes(&format!("sleep {in_turn}"), true);
    let left = wait_processes(&format!("sleep {detached}"), true);
    // They run in the sandbox: a pid namespace other than ours.
    let ours = std::fs::read_link("/proc/self/ns/pid").unwrap();
    for pid in started.iter().chain(&left) {
        let theirs = std::fs::read_link(format!("/proc/{pid}/ns/pid")).unwrap();
        assert_ne!(theirs, ours, "pid {pid} is not in the sandbox");
    }
    let view = home.show(&run);
    assert_eq!(view["sandbox"], true, "{view}");
    let pgid = view["pid"].as_u64().expect("the run's child pid") as u32;

    let out = home.drover(&["stop", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", common::describe(&out));
    home.wait_terminal(&run);
    wait_processes(&format!("sleep {in_turn}"), false);
    wait_processes(&format!("sleep {detached}"), false);
    common::assert_group_gone(pgid);
}

#[test]
fn without_the_network_a_sandboxed_run_has_a_namespace_of_its_own() {
    if !can_sandbox("without_the_network") {
        return;
    }
    let home = Home::with_config("[limits]\nsandbox_network = false\n");
    let _serve = home.serve();
    let netns = scenario(&home, "netns", "readlink /proc/self/ns/net > net.txt");
    let run = home.dispatch(
        &netns,
        "Where is my network",
        &["--workspace", "shared", "--sandbox", "--policy", "auto"],
    );
    home.wait_idle(&run);
    let theirs = std::fs::read_to_string(home.work().join("net.txt")).unwrap();
    let ours = std::fs::read_link("/proc/self/ns/net").unwrap();
    assert!(theirs.starts_with("net:["), "{theirs}");
    assert_ne!(theirs.trim(), ours.display().to_string());
}

/// A `PATH` with git and a shell but no bubblewrap.
fn path_without_bwrap(dir: &Path) -> String {
    for tool in ["git", "sh"] {
        let found = which::which(tool).unwrap();
        std::os::unix::fs::symlink(found, dir.join(tool)).unwrap();
    }
    dir.display().to_string()
}

#[test]
fn without_bubblewrap_a_sandbox_is_refused_with_the_install_command_and_nothing_made() {
    let home = Home::with_config("[limits]\nsandbox_auto = true\n");
    let bin = tempfile::tempdir().unwrap();
    let path = path_without_bwrap(bin.path());
    let _serve = home.serve_with_env(&[("PATH", &path)]);
    let refusal = home.refused(
        &[
            "dispatch",
            "--provider",
            "sim",
            "--sandbox",
            "--workspace",
            "shared",
            "Do it in a box",
        ],
        "SANDBOX_UNAVAILABLE",
    );
    assert!(refusal.contains("apt install bubblewrap"), "{refusal}");
    assert!(refusal.contains("dnf install bubblewrap"), "{refusal}");
    // `sandbox_auto`: an auto run is refused the same way, never run unsandboxed.
    home.refused(
        &[
            "dispatch",
            "--provider",
            "sim",
            "--policy",
            "auto",
            "--workspace",
            "shared",
            "Do it alone",
        ],
        "SANDBOX_UNAVAILABLE",
    );
    assert!(home.runs().is_empty(), "nothing is made for a refusal");
    // A run that is not to be sandboxed still runs.
    let run = home.dispatch("quick-success", "Ask me", &["--workspace", "shared"]);
    assert_eq!(home.row(&run)["sandbox"], false);
    home.wait_idle(&run);

    // `drover doctor` says so, and says where bubblewrap is when it is there.
    let doctor = |path: Option<&str>| {
        let mut command = home.command(&["doctor", "--json"]);
        if let Some(path) = path {
            command.env("PATH", path);
        }
        let out = common::run_bounded(command, common::COMMAND_LIMIT, "doctor");
        common::one_json_line(&out, "doctor")
    };
    let missing = doctor(Some(&path));
    assert_eq!(missing["bubblewrap"]["status"], "missing", "{missing}");
    assert!(
        str_at(&missing["bubblewrap"], "fix").contains("apt install bubblewrap"),
        "{missing}"
    );
    if nix::unistd::geteuid().is_root() {
        let found = doctor(None);
        assert_eq!(found["bubblewrap"]["status"], "ok", "{found}");
        assert!(
            str_at(&found["bubblewrap"], "version").starts_with("bubblewrap "),
            "{found}"
        );
    }
}

#[test]
fn a_sandboxed_runs_processes_end_when_its_owner_is_killed() {
    if !can_sandbox("a_sandboxed_runs_processes_end_when_its_owner_is_killed") {
        return;
    }
    let home = Home::new();
    let serve = home.serve();
    let detached = format!("1003.{}", std::process::id());
    let in_turn = format!("1004.{}", std::process::id());
    let script = format!("setsid sleep {detached} >/dev/null 2>&1 & sleep {in_turn}");
    let hangs = scenario(&home, "hang", &script);
    home.dispatch(
        &hangs,
        "Start things and hang",
        &["--workspace", "shared", "--sandbox", "--policy", "auto"],
    );
    wait_processes(&format!("sleep {in_turn}"), true);
    wait_processes(&format!("sleep {detached}"), true);
    // The owner dies without ending anything: bubblewrap dies with it
    // (`--die-with-parent`), and with it everything in the sandbox's pid namespace.
    serve.kill9();
    wait_processes(&format!("sleep {in_turn}"), false);
    wait_processes(&format!("sleep {detached}"), false);
}

#[test]
fn a_sandboxed_run_is_taken_over_in_the_same_sandbox_and_handed_back() {
    use std::io::Write;
    if !can_sandbox("a_sandboxed_run_is_taken_over_in_the_same_sandbox") {
        return;
    }
    let home = repo_home();
    let _serve = home.serve();
    let run = home.dispatch(
        "quick-success",
        "Say hello",
        &["--workspace", "worktree", "--sandbox", "--max-turns", "4"],
    );
    home.wait_idle(&run);
    let mut attach = home
        .command(&["attach", &run])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // While the user is in the interface, it runs under bubblewrap.
    let boxed = wait_processes("--interactive", true);
    let in_bwrap = boxed.iter().any(|pid| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let words: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        words.first().is_some_and(|w| w.ends_with(b"bwrap"))
            && words.contains(&b"--unshare-pid".as_slice())
    });
    assert!(in_bwrap, "the interface is not in the sandbox: {boxed:?}");
    let mut stdin = attach.stdin.take().unwrap();
    stdin
        .write_all(b"write notes.txt typed in the box\n/exit\n")
        .unwrap();
    drop(stdin);
    let status = common::wait_child(&mut attach, common::COMMAND_LIMIT);
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    let view = home.show(&run);
    assert_eq!(view["state"], "idle", "{view}");
    assert_eq!(view["sandbox"], true, "{view}");
    let dir = PathBuf::from(str_at(&view["workspace"], "dir"));
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "typed in the box\n"
    );
    let origins: Vec<&str> = view["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["origin"].as_str().unwrap())
        .collect();
    assert_eq!(origins, ["dispatch", "interactive"], "{view}");
}
