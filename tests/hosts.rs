//! Runs on another host end to end (docs/ARCHITECTURE.md §"Hosts"): the real `drover`
//! binary, a real OpenSSH server on 127.0.0.1 on a free port (`common::sshd`, throwaway
//! keys), OpenSSH's own client, the simulated agent running on the "host" (this machine,
//! in another directory) over `ssh -T`.
//!
//! - a run on a host asks for permissions, does its work in its directory there (not in
//!   the caller's), takes a follow-up in the same session and the same connection, and
//!   stop leaves nothing of its process group on the host;
//! - the owner killed with SIGKILL, the next owner wakes the run in the same provider
//!   session on the host;
//! - a dropped connection (the run's ssh client killed, the host's control master gone)
//!   holds the run in `waiting_host` until the owner reconnects, ends what the old CLI
//!   left there, and the run goes on in the same session;
//! - `drover attach` of a host run opens the CLI's interface on the host (`ssh -t`) in
//!   the run's directory there, the turns typed there are read back from the session's
//!   record there, and the run is handed back in the same session;
//! - a run with `--workspace worktree` on a host gets its worktree made there (under the
//!   host's `worktrees`), its change measured there, its diff read there, `drover merge`
//!   lands it in the host's repository and `drover discard` removes it there — all with
//!   no `git` on the owner's PATH, and the checkout on this side untouched;
//! - `drover hosts` lists the config's hosts; `drover doctor --host` finds git and the
//!   directory there, and says HOST_UNREACHABLE for a host that does not answer;
//! - a dispatch to a host the config does not name is HOST_UNKNOWN, one asking for what
//!   runs only here (a sandbox) HOST_UNSUPPORTED, one without an absolute
//!   directory CWD_INVALID; a bad `[hosts.NAME]` table is refused naming its line.
//!
//! sshd needs root: as another user the tests that start one say why and return.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::sshd::Sshd;
use common::{GREETING, Home, array, assert_group_gone, git, group_alive, notes_of, str_at};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A home whose config names the server as `[hosts.loop]`, and the directory on the
/// "host" a run works in (with the greeting the scenarios edit).
fn host_home(sshd: &Sshd) -> (Home, PathBuf) {
    let home = Home::with_config(&sshd.host_table("loop"));
    let remote = home.path().join("remote");
    std::fs::create_dir_all(remote.join("src")).unwrap();
    std::fs::write(remote.join("src/main.rs"), GREETING).unwrap();
    (home, remote)
}

/// Dispatches a sim run of `scenario` to the host, working in `remote` there.
fn dispatch_there(home: &Home, scenario: &str, remote: &Path) -> Value {
    home.dispatch_json(
        scenario,
        "Fix the greeting",
        &["--host", "loop", "--cwd", remote.to_str().unwrap()],
    )
}

/// The id of the run's process group on the host, as its remote shell wrote it.
fn remote_group(run: &str) -> u32 {
    let file = pid_file(run);
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("the run's pid file {}: {e}", file.display()));
    text.trim().parse().unwrap()
}

fn pid_file(run: &str) -> PathBuf {
    PathBuf::from(format!("/tmp/drover-run-{run}.pgid"))
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

fn allow(home: &Home, run: &str, tool: &str) {
    let pending = home.wait_for_pending(run, tool);
    home.json(&["respond", run, str_at(&pending, "request_id"), "allow"]);
}

#[test]
fn a_run_on_a_host_asks_works_there_follows_up_and_stop_leaves_nothing_there() {
    let Some(sshd) = Sshd::start("a_run_on_a_host_asks_works_there") else {
        return;
    };
    let (home, remote) = host_home(&sshd);
    let _serve = home.serve();
    let answer = dispatch_there(&home, "tool-permission", &remote);
    assert_eq!(answer["host"], "loop", "{answer}");
    let run = str_at(&answer, "run_id").to_string();

    allow(&home, &run, "Bash");
    allow(&home, &run, "Edit");
    let view = home.wait_idle(&run);
    assert_eq!(view["state"], "idle", "{view}");
    assert_eq!(view["host"], "loop", "{view}");
    assert_eq!(view["cwd"], remote.to_str().unwrap(), "{view}");
    assert!(
        std::fs::read_to_string(remote.join("src/main.rs"))
            .unwrap()
            .contains("hello, drover"),
        "the allowed edit landed in the run's directory on the host"
    );
    assert_eq!(
        std::fs::read_to_string(home.work().join("src/main.rs")).unwrap(),
        GREETING,
        "the caller's directory is untouched"
    );
    // The local child is ssh; the CLI runs on the host in a session of its own.
    let pid = view["pid"].as_u64().expect("a pid while idle") as u32;
    assert!(cmdline(pid).starts_with("ssh "), "{}", cmdline(pid));
    let pgid = remote_group(&run);
    assert_ne!(pgid, pid);
    assert!(group_alive(pgid));
    assert!(cmdline(pgid).contains("sim-agent"), "{}", cmdline(pgid));
    let session = str_at(&view, "provider_session_id").to_string();

    // A follow-up goes to the same CLI over the same connection, in the same session.
    home.json(&["follow-up", &run, "and once more"]);
    allow(&home, &run, "Bash");
    allow(&home, &run, "Edit");
    let view = home.wait_idle(&run);
    assert_eq!(view["provider_session_id"], session.as_str(), "{view}");
    assert_eq!(view["pid"], pid, "the same ssh child: {view}");
    assert_eq!(remote_group(&run), pgid);

    home.json(&["stop", &run]);
    let view = home.wait_terminal(&run);
    assert_eq!(view["state"], "stopped", "{view}");
    assert_group_gone(pgid);
    assert!(
        !pid_file(&run).exists(),
        "the pid file on the host is removed"
    );
}

/// A scenario whose one turn leaves `sleep 1000` running in the background in the run's
/// directory (its pid in `left.pid` there): what a CLI's own end leaves behind.
fn leaves_a_command_running(home: &Home) -> String {
    let scenario = home.path().join("background.toml");
    std::fs::write(
        &scenario,
        "description = \"Leaves a command running.\"\nmodel = \"claude-sonnet-4-5\"\n\
         [[turns]]\nstatus = \"done\"\nsummary = \"Started it.\"\n\
         [[turns.steps]]\ntool = \"Bash\"\ninput = { command = \"sleep 1000 > /dev/null 2>&1 & echo $! > left.pid\" }\nrun = true\n\
         [[turns.steps]]\ntext = \"Started.\"\n",
    )
    .unwrap();
    scenario.display().to_string()
}

/// The pid of the command the run left running on the host, checked to be it.
fn left_running(remote: &Path) -> u32 {
    let left: u32 = std::fs::read_to_string(remote.join("left.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(cmdline(left).starts_with("sleep 1000"), "{}", cmdline(left));
    left
}

/// Stop ends the run's whole process group on the host: a command the run left running
/// in the background there (which its CLI's end alone would leave behind) is gone too.
#[test]
fn stop_ends_what_a_host_run_left_running_there() {
    let Some(sshd) = Sshd::start("stop_ends_what_a_host_run_left_running_there") else {
        return;
    };
    let (home, remote) = host_home(&sshd);
    let _serve = home.serve();
    let answer = dispatch_there(&home, &leaves_a_command_running(&home), &remote);
    let run = str_at(&answer, "run_id").to_string();
    let view = home.wait_idle(&run);
    assert_eq!(view["state"], "idle", "{view}");
    let pgid = remote_group(&run);
    let left = left_running(&remote);
    home.json(&["stop", &run]);
    home.wait_terminal(&run);
    assert_group_gone(pgid);
    assert!(
        cmdline(left).is_empty(),
        "the background command on the host is gone"
    );
    assert!(
        !pid_file(&run).exists(),
        "the pid file on the host is removed"
    );
}

/// After a crash of the owner (SIGKILL), the next owner ends what the run left running
/// on its host before anything starts again there.
#[test]
fn the_next_owner_ends_what_a_crashed_owners_host_run_left_there() {
    let Some(sshd) = Sshd::start("the_next_owner_ends_what_a_crashed_owners_host_run_left") else {
        return;
    };
    let (home, remote) = host_home(&sshd);
    let serve = home.serve();
    let answer = dispatch_there(&home, &leaves_a_command_running(&home), &remote);
    let run = str_at(&answer, "run_id").to_string();
    home.wait_idle(&run);
    let pgid = remote_group(&run);
    let left = left_running(&remote);
    serve.kill9();
    // The CLI there ends with its input; what it left in its group does not.
    assert!(
        group_alive(pgid),
        "the command it left is still in its group"
    );
    let _serve = home.serve();
    assert_group_gone(pgid);
    assert!(cmdline(left).is_empty(), "{}", cmdline(left));
    assert!(!pid_file(&run).exists());
    // The run itself is put back (idle, hibernated), its session kept.
    assert_eq!(home.show(&run)["state"], "idle");
}

#[test]
fn an_owner_killed_during_a_host_run_is_followed_by_a_resume_in_the_same_session_there() {
    let Some(sshd) = Sshd::start("an_owner_killed_during_a_host_run") else {
        return;
    };
    let (home, remote) = host_home(&sshd);
    let serve = home.serve();
    let run = str_at(&dispatch_there(&home, "multi-turn", &remote), "run_id").to_string();
    let view = home.wait_idle(&run);
    assert_eq!(view["state"], "idle", "{view}");
    let session = str_at(&view, "provider_session_id").to_string();
    let pgid = remote_group(&run);
    assert!(
        remote.join("src/parser.rs").is_file(),
        "the first turn wrote there"
    );

    serve.kill9();
    // The connection went with the owner: the CLI on the host read the end of its input.
    assert_group_gone(pgid);

    let _serve = home.serve();
    let view = home.show(&run);
    assert_eq!(view["state"], "idle", "put back hibernated: {view}");
    home.json(&["follow-up", &run, "tighten the parser"]);
    let view = home.wait_idle(&run);
    assert_eq!(view["state"], "idle", "{view}");
    assert_eq!(
        view["provider_session_id"],
        session.as_str(),
        "woken in the same session on the host: {view}"
    );
    let woken = remote_group(&run);
    assert_ne!(woken, pgid, "a new CLI on the host");
    assert!(group_alive(woken));
    let tail = home.tail(&run).join("\n");
    assert!(tail.contains("tighten the parser"), "{tail}");
    home.json(&["stop", &run]);
    home.wait_terminal(&run);
    assert_group_gone(woken);
}

/// The children of process `pid` (every thread's).
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// `drover attach RUN`: `first` typed, and once the interface answered it, the command
/// line of what attach runs; then `rest` typed and its input closed. What it printed
/// (all of stdout) and that command line.
fn attach(home: &Home, run: &str, first: &str, rest: &str) -> (std::process::Output, String) {
    use std::io::{BufRead, Read, Write};
    let mut child = home
        .command(&["attach", run])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = std::io::BufReader::new(stdout);
        let mut all = String::new();
        let mut line = String::new();
        while lines.read_line(&mut line).unwrap_or(0) > 0 {
            let _ = tx.send(line.clone());
            all.push_str(&line);
            line.clear();
        }
        all
    });
    stdin.write_all(first.as_bytes()).unwrap();
    let answered = std::iter::from_fn(|| rx.recv_timeout(std::time::Duration::from_secs(60)).ok())
        .any(|line| line.contains("Heard you"));
    assert!(answered, "the interface did not answer the first line");
    let ran = children(child.id())
        .into_iter()
        .map(cmdline)
        .collect::<Vec<_>>()
        .join(" | ");
    stdin.write_all(rest.as_bytes()).unwrap();
    drop(stdin);
    let ended = common::wait_child(&mut child, std::time::Duration::from_secs(60));
    assert!(ended.is_some(), "drover attach did not end");
    let printed = reader.join().unwrap();
    let mut stderr = Vec::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut stderr)
        .unwrap();
    let mut out = child.wait_with_output().unwrap();
    out.stdout = printed.into_bytes();
    out.stderr = stderr;
    (out, ran)
}

#[test]
fn a_host_run_taken_over_opens_its_interface_on_the_host_in_its_directory_there() {
    let Some(sshd) = Sshd::start("a_host_run_taken_over") else {
        return;
    };
    let (home, remote) = host_home(&sshd);
    let _serve = home.serve();
    let run = str_at(&dispatch_there(&home, "quick-success", &remote), "run_id").to_string();
    let view = home.wait_idle(&run);
    let session = str_at(&view, "provider_session_id").to_string();

    let (out, ran) = attach(
        &home,
        &run,
        "hello from the interface\n",
        "write notes.txt typed on the host\n/exit\n",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    // What attach runs here is ssh asking for a terminal, with the CLI's command there.
    assert!(ran.starts_with("ssh -t "), "{ran}");
    assert!(
        ran.contains("sim-agent") && ran.contains("--interactive"),
        "{ran}"
    );
    assert!(
        stdout.contains("Heard you: hello from the interface"),
        "{stdout}"
    );
    // The interface ran through ssh in the run's directory on the host, not here.
    assert_eq!(
        std::fs::read_to_string(remote.join("notes.txt")).unwrap(),
        "typed on the host\n"
    );
    assert!(!home.work().join("notes.txt").exists());
    // The turns typed there are read from the session's record on the host.
    assert!(
        stdout.contains("handed back to drover") && stdout.contains("2 interactive turns"),
        "{stdout}"
    );
    let view = home.show(&run);
    assert_eq!(view["state"], "idle", "{view}");
    let origins: Vec<&str> = view["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["origin"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        origins,
        ["dispatch", "interactive", "interactive"],
        "{view}"
    );
    assert_eq!(
        view["turns"][1]["text"],
        "Heard you: hello from the interface"
    );

    // Supervised again, over ssh, in the same session there.
    home.json(&["follow-up", &run, "Say it once more"]);
    let view = home.wait_idle(&run);
    assert_eq!(view["provider_session_id"], session.as_str(), "{view}");
    let pid = view["pid"].as_u64().expect("a pid while idle") as u32;
    assert!(cmdline(pid).starts_with("ssh "), "{}", cmdline(pid));
    home.json(&["stop", &run]);
    home.wait_terminal(&run);
}

#[test]
fn hosts_are_listed_and_the_doctor_looks_at_one() {
    let Some(sshd) = Sshd::start("hosts_are_listed_and_the_doctor_looks_at_one") else {
        return;
    };
    let (home, remote) = host_home(&sshd);
    let listed = home.json(&["hosts"]);
    assert_eq!(
        listed,
        serde_json::json!([{
            "name": "loop",
            "kind": "ssh",
            "target": format!("{}@127.0.0.1:{}", sshd.user, sshd.port),
        }])
    );
    let report = home.json(&[
        "doctor",
        "--host",
        "loop",
        "--cwd",
        remote.to_str().unwrap(),
    ]);
    assert_eq!(report["reachable"], true, "{report}");
    assert_eq!(report["cwd_exists"], true, "{report}");
    assert_eq!(report["git"]["status"], "ok", "{report}");
    assert!(
        str_at(&report["git"], "version").starts_with("git version"),
        "{report}"
    );
    let missing = home.json(&["doctor", "--host", "loop", "--cwd", "/no/such/dir"]);
    assert_eq!(missing["cwd_exists"], false, "{missing}");
    // The doctor only looks: no control master, nothing in the data directory.
    assert!(!home.path().join("ssh").exists());
}

#[test]
fn a_host_that_does_not_answer_is_unreachable_for_the_doctor() {
    // A port nothing listens on: ssh cannot connect.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let home = Home::with_config(&format!(
        "[hosts.gone]\nssh = \"nobody@127.0.0.1\"\nport = {port}\nssh_options = [\"ConnectTimeout=5\", \"StrictHostKeyChecking=no\", \"UserKnownHostsFile=/dev/null\"]\n"
    ));
    let line = home.refused(&["doctor", "--host", "gone"], "HOST_UNREACHABLE");
    assert!(
        line.contains(&format!("`ssh -p {port} nobody@127.0.0.1 true`")),
        "{line}"
    );
    assert!(line.contains("Connection refused"), "{line}");
}

#[test]
fn dispatches_a_host_cannot_take_are_refused_with_nothing_made() {
    let home = Home::with_config("[hosts.box]\nssh = \"me@box.invalid\"\n");
    let _serve = home.serve();
    let dispatch = |extra: &[&str], code: &str| {
        let mut args = vec![
            "dispatch",
            "--provider",
            "sim",
            "--scenario",
            "quick-success",
        ];
        args.extend_from_slice(extra);
        args.push("task");
        home.refused(&args, code)
    };
    let unknown = dispatch(&["--host", "bx", "--cwd", "/srv"], "HOST_UNKNOWN");
    assert!(unknown.contains("the hosts are box"), "{unknown}");
    let relative = dispatch(&["--host", "box", "--cwd", "srv"], "CWD_INVALID");
    assert!(relative.contains("absolute directory"), "{relative}");
    dispatch(&["--host", "box"], "CWD_INVALID");
    let sandbox = dispatch(
        &["--host", "box", "--cwd", "/srv", "--sandbox"],
        "HOST_UNSUPPORTED",
    );
    assert!(sandbox.contains("without --sandbox"), "{sandbox}");
    assert_eq!(home.runs().len(), 0, "nothing was made");
}

#[test]
fn a_bad_host_table_is_refused_naming_its_line() {
    let home = Home::with_config("[hosts.box]\nssh = \"-oProxyCommand=sh\"\n");
    let line = home.refused(&["hosts"], "CONFIG_INVALID");
    assert!(line.contains("line 2"), "{line}");
    assert!(line.contains("hosts.box.ssh"), "{line}");
}

/// A scenario of three turns, each leaving `sleep 1000` running in the background in the
/// run's directory (its pid in `left.pid` there): what the CLI's end alone leaves behind.
fn three_turns_each_leaving_a_command(home: &Home) -> String {
    let scenario = home.path().join("three-background.toml");
    let turn = "[[turns]]\nstatus = \"done\"\nsummary = \"Started it.\"\n\
         [[turns.steps]]\ntool = \"Bash\"\ninput = { command = \"sleep 1000 > /dev/null 2>&1 & echo $! > left.pid\" }\nrun = true\n\
         [[turns.steps]]\ntext = \"Started.\"\n";
    std::fs::write(
        &scenario,
        format!(
            "description = \"Leaves a command running, three times.\"\nmodel = \"claude-sonnet-4-5\"\n{}",
            turn.repeat(3)
        ),
    )
    .unwrap();
    scenario.display().to_string()
}

/// Waits until the run has said it reconnected `times` times; returns its view.
fn wait_reconnected(home: &Home, run: &str, times: usize) -> Value {
    home.wait_for(run, &format!("reconnect {times}"), |v| {
        common::notes_of(v)
            .iter()
            .filter(|n| n.starts_with("reconnected to host loop"))
            .count()
            >= times
    })
}

/// The connection of an idle host run drops, first by its local `ssh` client killed,
/// then by the host's control master told to exit: each time the run waits in
/// `waiting_host` (not failed), the owner reconnects, ends what the old CLI left in its
/// group there, and a follow-up then completes in the same provider session there.
#[test]
fn a_dropped_host_connection_waits_for_the_host_and_goes_on_in_the_same_session() {
    let Some(sshd) = Sshd::start("a_dropped_host_connection_waits_for_the_host") else {
        return;
    };
    let (home, remote) = host_home(&sshd);
    let _serve = home.serve();
    let answer = dispatch_there(&home, &three_turns_each_leaving_a_command(&home), &remote);
    let run = str_at(&answer, "run_id").to_string();
    let view = home.wait_idle(&run);
    let session = str_at(&view, "provider_session_id").to_string();
    let pgid = remote_group(&run);
    let left = left_running(&remote);

    // 1. The run's local ssh client, the owner's child, killed.
    let ssh = view["pid"].as_u64().expect("a pid while idle") as u32;
    assert!(cmdline(ssh).starts_with("ssh "), "{}", cmdline(ssh));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(ssh as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let view = wait_reconnected(&home, &run, 1);
    assert_eq!(view["state"], "idle", "not failed: {view}");
    let states = home.live_states(&run);
    let waited = states.iter().rposition(|s| s == "waiting_host");
    assert!(
        waited.is_some_and(|i| states[i + 1..].iter().any(|s| s == "working")),
        "waiting_host, then back: {states:?}"
    );
    assert!(
        notes_of(&view)
            .iter()
            .any(|n| n.contains("connection to host loop dropped")),
        "{view}"
    );
    // What the old CLI left in its group there is gone, its pid file with it.
    assert_group_gone(pgid);
    assert!(cmdline(left).is_empty(), "{}", cmdline(left));
    assert!(!pid_file(&run).exists());

    home.json(&["follow-up", &run, "and once more"]);
    let view = home.wait_for(&run, "the follow-up's turn", |v| {
        v["state"] == "idle" && v["turns"].as_array().is_some_and(|t| t.len() >= 2)
    });
    assert_eq!(
        view["provider_session_id"],
        session.as_str(),
        "the same session on the host: {view}"
    );
    let woken = remote_group(&run);
    assert_ne!(woken, pgid, "a new CLI on the host");
    let left = left_running(&remote);

    // 2. The host's control master told to exit: every connection through it drops.
    let master = home.path().join("ssh/loop");
    let exit = std::process::Command::new("ssh")
        .arg("-o")
        .arg(format!("ControlPath={}", master.display()))
        .args(["-O", "exit", "--", "127.0.0.1"])
        .output()
        .unwrap();
    assert!(exit.status.success(), "ssh -O exit: {exit:?}");
    let view = wait_reconnected(&home, &run, 2);
    assert_eq!(view["state"], "idle", "not failed: {view}");
    assert_group_gone(woken);
    assert!(cmdline(left).is_empty(), "{}", cmdline(left));

    home.json(&["follow-up", &run, "and the last one"]);
    let view = home.wait_for(&run, "the third turn", |v| {
        v["state"] == "idle" && v["turns"].as_array().is_some_and(|t| t.len() >= 3)
    });
    assert_eq!(view["provider_session_id"], session.as_str(), "{view}");
    let prompts: Vec<&str> = view["turns"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["prompt_preview"].as_str())
        .collect();
    assert!(
        prompts.iter().any(|p| p.contains("and the last one")),
        "{prompts:?}"
    );
    home.json(&["stop", &run]);
    let view = home.wait_terminal(&run);
    assert_eq!(view["state"], "stopped", "{view}");
}

/// A host run whose connection drops in the middle of a turn (its CLI there in a long
/// command): the run waits for its host, the owner reconnects and ends the old CLI's group
/// there (the command with it), and the turn is handled as a restart handles one — the
/// run is `interrupted`, and `drover resume` goes on with it in the same session there.
#[test]
fn a_connection_dropped_mid_turn_interrupts_the_run_and_resume_goes_on_in_its_session() {
    let Some(sshd) = Sshd::start("a_connection_dropped_mid_turn") else {
        return;
    };
    let (home, remote) = host_home(&sshd);
    let scenario = home.path().join("long-command.toml");
    std::fs::write(
        &scenario,
        "description = \"A long command, then a second turn.\"\nmodel = \"claude-sonnet-4-5\"\n\
         [[turns]]\nstatus = \"done\"\nsummary = \"Waited.\"\n\
         [[turns.steps]]\ntool = \"Bash\"\ninput = { command = \"echo $$ > long.pid; exec sleep 1000\" }\nrun = true\n\
         [[turns]]\nstatus = \"done\"\nsummary = \"Went on.\"\n\
         [[turns.steps]]\ntext = \"Went on.\"\n",
    )
    .unwrap();
    let _serve = home.serve();
    let answer = dispatch_there(&home, &scenario.display().to_string(), &remote);
    let run = str_at(&answer, "run_id").to_string();
    let view = home.wait_for(&run, "the long command", |v| {
        v["live_state"]["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("running a tool"))
            && remote.join("long.pid").is_file()
    });
    let session = str_at(&view, "provider_session_id").to_string();
    let pgid = remote_group(&run);
    let ssh = view["pid"].as_u64().expect("a pid in a turn") as u32;
    assert!(cmdline(ssh).starts_with("ssh "), "{}", cmdline(ssh));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(ssh as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let view = home.wait_for(&run, "interrupted", |v| v["state"] == "interrupted");
    assert_eq!(
        view["live_state"]["detail"], "interrupted: the connection to its host dropped · R resumes",
        "{view}"
    );
    let states = home.live_states(&run);
    assert!(states.iter().any(|s| s == "waiting_host"), "{states:?}");
    // The old CLI's group there, its long command with it, is gone.
    assert_group_gone(pgid);

    home.json(&["resume", &run]);
    let view = home.wait_for(&run, "the resumed turn", |v| {
        v["state"] == "idle" && v["turns"].as_array().is_some_and(|t| t.len() >= 2)
    });
    assert_eq!(
        view["provider_session_id"],
        session.as_str(),
        "resumed in the same session on the host: {view}"
    );
    home.json(&["stop", &run]);
    home.wait_terminal(&run);
}

/// A git repository on `main` with the greeting committed, and its own identity for the
/// commits drover makes in it.
fn git_repo(dir: &Path) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/main.rs"), GREETING).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "Host User"]);
    git(dir, &["config", "user.email", "host@example.invalid"]);
    git(dir, &["config", "commit.gpgsign", "false"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "the greeting"]);
}

/// `git status --porcelain` and HEAD of a checkout.
fn checkout_state(dir: &Path) -> (String, String) {
    (
        git(dir, &["status", "--porcelain"]),
        git(dir, &["rev-parse", "HEAD"]),
    )
}

/// A directory holding only `ssh` (a link to the client): as the owner's PATH, nothing of
/// a workspace's git work can run on this machine; only through the transport.
fn path_with_only_ssh(home: &Home) -> PathBuf {
    let bin = home.path().join("only-ssh");
    std::fs::create_dir_all(&bin).unwrap();
    let ssh = std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("ssh"))
                .find(|f| f.is_file())
        })
        .expect("ssh on PATH");
    std::os::unix::fs::symlink(ssh, bin.join("ssh")).unwrap();
    bin
}

fn wait_change(home: &Home, run: &str, files: u64) -> Value {
    let view = home.wait_for(run, &format!("a change of {files} files"), |v| {
        v["workspace"]["change"]["files"].as_u64() == Some(files)
    });
    view["workspace"].clone()
}

#[test]
fn a_worktree_run_on_a_host_is_made_measured_diffed_merged_and_discarded_there() {
    let Some(sshd) = Sshd::start("a_worktree_run_on_a_host") else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("host-worktrees");
    let home = Home::with_config(&format!(
        "{}worktrees = \"{}\"\n",
        sshd.host_table("loop"),
        root.display()
    ));
    // This machine's checkout (the caller's cwd) and the host's repository, apart.
    git_repo(home.work());
    let local_before = checkout_state(home.work());
    let repo = scratch.path().join("host-repo");
    git_repo(&repo);
    let base = git(&repo, &["rev-parse", "HEAD"]);
    let bin = path_with_only_ssh(&home);
    let _serve = home.serve_with_env(&[("PATH", bin.to_str().unwrap())]);

    let dispatched = |title: &str| {
        let answer = home.dispatch_json(
            "worktree-change",
            title,
            &[
                "--host",
                "loop",
                "--cwd",
                repo.to_str().unwrap(),
                "--workspace",
                "worktree",
            ],
        );
        assert_eq!(answer["host"], "loop", "{answer}");
        let run = str_at(&answer, "run_id").to_string();
        let view = home.wait_idle(&run);
        assert_eq!(view["state"], "idle", "{view}");
        let ws = wait_change(&home, &run, 2);
        (run, view, ws)
    };
    let (run, view, ws) = dispatched("Add a cache");
    // A second run from the same base, to be discarded once the first is merged.
    let (second, _, second_ws) = dispatched("Another cache");
    assert_eq!(ws["host"], "loop", "{ws}");
    assert_eq!(ws["checkout"], repo.to_str().unwrap(), "{ws}");
    assert_eq!(ws["base_commit"], base.as_str(), "{ws}");
    let worktree = PathBuf::from(str_at(&ws, "worktree"));
    assert!(worktree.starts_with(&root), "{ws}");
    assert_eq!(view["cwd"], repo.to_str().unwrap(), "{view}");
    let pid = view["pid"].as_u64().expect("a pid while idle") as u32;
    assert!(cmdline(pid).starts_with("ssh "), "{}", cmdline(pid));
    // The run worked in its worktree there: not in the repository, not here.
    assert!(
        std::fs::read_to_string(worktree.join("src/main.rs"))
            .unwrap()
            .contains("hello, cache")
    );
    assert!(!repo.join("src/cache.rs").exists());
    let branch = str_at(&ws, "branch").to_string();
    assert_eq!(
        git(&worktree, &["rev-parse", "--abbrev-ref", "HEAD"]),
        branch
    );
    // The change measured there: a new file and an edit.
    assert_eq!(ws["change"]["removed"], 1, "{ws}");
    let stat = home.json(&["diff", &run, "--stat"]);
    let files: Vec<(String, String)> = array(stat["files"].clone())
        .iter()
        .map(|f| (str_at(f, "path").into(), str_at(f, "status").into()))
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

    // Merged into the host's repository's main, which is checked out there.
    let answer = home.json(&["merge", &run, "--message", "Add the cache"]);
    let merge = &answer["merge"];
    assert_eq!(merge["how"], "fast_forward", "{answer}");
    assert_eq!(merge["into"], "main", "{answer}");
    assert_eq!(merge["checkout_updated"], true, "{answer}");
    assert_eq!(git(&repo, &["rev-parse", "HEAD"]), str_at(merge, "commit"));
    assert_eq!(git(&repo, &["log", "-1", "--format=%s"]), "Add the cache");
    assert!(repo.join("src/cache.rs").is_file());
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    // This machine's checkout saw none of it.
    assert_eq!(checkout_state(home.work()), local_before);
    assert!(!home.work().join("src/cache.rs").exists());
    assert_eq!(
        std::fs::read_to_string(home.work().join("src/main.rs")).unwrap(),
        GREETING
    );
    home.json(&["stop", &run]);
    home.wait_terminal(&run);

    // The second run, stopped and discarded: its worktree and branch go, there.
    let worktree = PathBuf::from(str_at(&second_ws, "worktree"));
    let branch = str_at(&second_ws, "branch").to_string();
    assert!(worktree.is_dir());
    home.json(&["stop", &second]);
    home.wait_terminal(&second);
    let answer = home.json(&["discard", &second]);
    assert_eq!(answer["workspace"]["status"], "discarded", "{answer}");
    assert!(!worktree.exists(), "the worktree on the host is removed");
    assert_eq!(git(&repo, &["branch", "--list", &branch]), "");
    assert_eq!(
        git(&repo, &["worktree", "list", "--porcelain"])
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count(),
        2,
        "the repository and the first run's worktree (its run is stopped, not removed)"
    );
    assert_eq!(checkout_state(home.work()), local_before);
}

/// OpenCode on a host runs in its ACP mode (`opencode-acp`), which speaks over the
/// transport's stdio like every other CLI; here an ACP agent (this drover's `sim-agent
/// --acp`) on the host asks, is answered and edits in its directory there. `opencode`
/// itself (its HTTP server) is refused for a host, naming `opencode-acp`.
#[test]
fn an_acp_agent_on_a_host_asks_and_works_there_and_opencodes_server_is_refused() {
    let Some(sshd) = Sshd::start("an_acp_agent_on_a_host") else {
        return;
    };
    let bin = common::drover_bin();
    let home = Home::with_config(&format!(
        "{}\n[providers.simacp]\nprotocol = \"acp\"\ncommand = \"{bin}\"\n\
         args = [\"sim-agent\", \"--acp\", \"--scenario\", \"tool-permission\"]\n",
        sshd.host_table("loop")
    ));
    let remote = home.path().join("remote");
    std::fs::create_dir_all(remote.join("src")).unwrap();
    std::fs::write(remote.join("src/main.rs"), GREETING).unwrap();
    let _serve = home.serve();
    let cwd = remote.to_str().unwrap();
    let answer = home.json(&[
        "dispatch",
        "--provider",
        "simacp",
        "--host",
        "loop",
        "--cwd",
        cwd,
        "update the greeting",
    ]);
    assert_eq!(answer["host"], "loop", "{answer}");
    let run = str_at(&answer, "run_id").to_string();
    allow(&home, &run, "Bash ls -la");
    allow(&home, &run, "Edit src/main.rs");
    let view = home.wait_idle(&run);
    assert_eq!(view["state"], "idle", "{view}");
    let pid = view["pid"].as_u64().expect("a pid while idle") as u32;
    assert!(cmdline(pid).starts_with("ssh "), "{}", cmdline(pid));
    let pgid = remote_group(&run);
    assert!(cmdline(pgid).contains("--acp"), "{}", cmdline(pgid));
    assert_ne!(
        std::fs::read_to_string(remote.join("src/main.rs")).unwrap(),
        GREETING,
        "the allowed edit landed in its directory on the host"
    );
    assert_eq!(
        std::fs::read_to_string(home.work().join("src/main.rs")).unwrap(),
        GREETING,
        "the caller's directory is untouched"
    );
    home.json(&["stop", &run]);
    home.wait_terminal(&run);
    assert_group_gone(pgid);

    let refused = home.refused(
        &[
            "dispatch",
            "--provider",
            "opencode",
            "--host",
            "loop",
            "--cwd",
            cwd,
            "task",
        ],
        "HOST_UNSUPPORTED",
    );
    assert!(refused.contains("--provider opencode-acp"), "{refused}");
}
