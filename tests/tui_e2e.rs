//! End to end in a real terminal: `drover demo` runs in tmux (a private tmux server), a
//! permission prompt is answered with keys, the run is completed with a key, and
//! `drover show --json` from another process (through the control socket) finds it
//! completed; quitting stops the rest and records them as interrupted. And `drover`
//! attached to a background owner: it starts one, leaving keeps the runs going, two
//! dashboards share one owner, and a dashboard outlives a killed owner and reattaches.
//! And the attention line: a sim run asks permission, the line shows its command, `y`
//! on the dashboard answers exactly that request; a double-pressed `y` (150 ms apart)
//! answers one request, not the next run's that took its place. And the bytes the
//! dashboard writes: every frame inside the terminal's synchronized update.
//!
//! Needs `tmux` (`apt-get install tmux`); without it this test fails and says so. Every
//! wait is bounded and watches for a condition (the pane's text or the dispatcher's
//! answer), never a fixed sleep. The one pause is the user's: before a key that answers
//! a request the test looks at the screen for [`READ`], longer than the answer guard.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(100);
/// How long the user looks at a request before answering it (longer than the default
/// `[dashboard] answer_guard_ms`, 400 ms).
const READ: Duration = Duration::from_millis(700);

/// The user reads the request on screen before a key answers it.
fn read() {
    std::thread::sleep(READ);
}

struct Tmux {
    socket: String,
    /// The session keys go to and the pane is read from.
    target: String,
}

/// A data directory where only the simulated agent is enabled (so the form dispatches to
/// it), for a test that drives the dashboard in tmux (which must be installed).
fn sim_only_home() -> tempfile::TempDir {
    let probe = Command::new("tmux").arg("-V").output();
    assert!(
        probe.is_ok_and(|o| o.status.success()),
        "this test needs tmux; install it (apt-get install tmux)"
    );
    let home = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        home.path().join("config.toml"),
        "[providers.claude-code]\nenabled = false\n[providers.codex]\nenabled = false\n\
         [providers.opencode]\nenabled = false\n",
    )
    .expect("config");
    home
}

impl Tmux {
    /// Session `target` on this test's own tmux server (`tag` names the server).
    fn new(tag: &str, target: &str) -> Tmux {
        Tmux {
            socket: format!("drover-e2e-{tag}-{}", std::process::id()),
            target: target.to_string(),
        }
    }

    /// Starts the session, `width`×`height`, running the dashboard on `home` after `env`
    /// (words such as `env -u TMUX SHELL=…`, or none); when the dashboard exits the pane
    /// says `DASHBOARD-EXIT=code` and stays.
    fn start_dashboard(&self, home: &Path, env: &str, (width, height): (u16, u16)) {
        let command = format!(
            "cd '{}'; {env} DROVER_HOME='{}' '{}'; echo DASHBOARD-EXIT=$?; sleep 600",
            home.display(),
            home.display(),
            env!("CARGO_BIN_EXE_drover")
        );
        let (width, height) = (width.to_string(), height.to_string());
        let started = self.run(&[
            "new-session",
            "-d",
            "-s",
            &self.target,
            "-x",
            &width,
            "-y",
            &height,
            &command,
        ]);
        assert!(started.status.success(), "{started:?}");
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs (install it: apt-get install tmux)")
    }

    /// The session's pane, named exactly (a bare name can resolve to another session).
    fn pane_target(&self) -> String {
        format!("={}:", self.target)
    }

    fn pane(&self) -> String {
        String::from_utf8_lossy(
            &self
                .run(&["capture-pane", "-p", "-t", &self.pane_target()])
                .stdout,
        )
        .into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let target = self.pane_target();
        let mut args = vec!["send-keys", "-t", target.as_str()];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// Waits until the pane shows `text`; `retry` keys are sent every second meanwhile.
    fn wait_for(&self, text: &str, retry: &[&str]) -> String {
        let start = Instant::now();
        let mut last_retry = Instant::now();
        loop {
            let pane = self.pane();
            if pane.contains(text) {
                return pane;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "the dashboard never showed {text:?}; the pane:\n{pane}"
            );
            if !retry.is_empty() && last_retry.elapsed() > Duration::from_secs(1) {
                self.keys(retry);
                last_retry = Instant::now();
            }
            std::thread::sleep(POLL);
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

fn drover(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_drover"))
        .env("DROVER_HOME", home)
        .args(args)
        .output()
        .expect("drover runs")
}

fn json(output: Output) -> Value {
    assert!(
        output.status.success(),
        "drover failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON answer")
}

/// The demo's run with this title, once the dashboard owns the directory and listed it.
fn run_titled(home: &Path, title: &str) -> Value {
    let start = Instant::now();
    loop {
        let out = drover(home, &["runs", "--json"]);
        if out.status.success()
            && let Ok(Value::Array(runs)) = serde_json::from_slice::<Value>(&out.stdout)
            && let Some(run) = runs.into_iter().find(|r| r["title"] == title)
        {
            return run;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "the demo never dispatched {title:?}"
        );
        std::thread::sleep(POLL);
    }
}

fn show(home: &Path, run_id: &str) -> Value {
    json(drover(home, &["show", run_id, "--json"]))
}

#[test]
fn the_demo_answers_a_permission_by_keys_and_another_terminal_sees_the_run_completed() {
    let probe = Command::new("tmux").arg("-V").output();
    assert!(
        probe.is_ok_and(|o| o.status.success()),
        "this test needs tmux; install it (apt-get install tmux)"
    );
    let home = tempfile::tempdir().expect("temp dir");
    let tmux = Tmux {
        socket: format!("drover-e2e-{}", std::process::id()),
        target: "demo".into(),
    };
    let command = format!(
        "DROVER_HOME='{}' '{}' demo; echo DEMO-EXIT=$?; sleep 600",
        home.path().display(),
        env!("CARGO_BIN_EXE_drover")
    );
    let started = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "demo",
        "-x",
        "120",
        "-y",
        "36",
        &command,
    ]);
    assert!(started.status.success(), "{:?}", started);

    let run = run_titled(home.path(), "Update the greeting in src/main.rs");
    let run_id = run["run_id"].as_str().expect("run id").to_string();
    let waited = drover(
        home.path(),
        &[
            "wait",
            &run_id,
            "--until",
            "needs-you",
            "--timeout",
            "30",
            "--json",
        ],
    );
    assert_eq!(
        waited.status.code(),
        Some(5),
        "the run never asked for permission"
    );

    // `p` opens the oldest request of any run; tab walks to this run's Bash.
    tmux.keys(&["p"]);
    let pane = tmux.wait_for("Bash wants to run", &["p", "Tab"]);
    assert!(
        pane.contains("ls -la"),
        "the command is shown whole:\n{pane}"
    );
    read();
    tmux.keys(&["y"]);

    // The run goes on and asks for the Edit; answer it "always".
    let start = Instant::now();
    loop {
        let view = show(home.path(), &run_id);
        if view["pending"][0]["tool"] == "Edit" {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "no Edit request: {view}");
        std::thread::sleep(POLL);
    }
    // Tab walks every waiting item (requests and route cards, oldest first) in turn.
    tmux.wait_for("Edit wants to run", &["Tab"]);
    read();
    tmux.keys(&["A"]);
    let waited = json(drover(
        home.path(),
        &[
            "wait",
            &run_id,
            "--until",
            "idle",
            "--timeout",
            "30",
            "--json",
        ],
    ));
    assert_eq!(waited["runs"][0]["state"], "idle", "{waited}");

    // The run held on a route card: walk to its card and pick option 2 by key.
    let held = run_titled(home.path(), "Review the payments refactor");
    let held_id = held["run_id"].as_str().expect("run id").to_string();
    let second = show(home.path(), &held_id)["route"]["options"][1]["model"]
        .as_str()
        .expect("a second option")
        .to_string();
    tmux.keys(&["Escape", "p"]);
    tmux.wait_for("Route card ·", &["Tab"]);
    tmux.keys(&["2"]);
    let start = Instant::now();
    let view = loop {
        let view = show(home.path(), &held_id);
        if view["state"] != "awaiting_route" {
            break view;
        }
        assert!(start.elapsed() < DEADLINE, "the pick never landed: {view}");
        std::thread::sleep(POLL);
    };
    assert_eq!(view["model"], second.as_str(), "{view}");
    assert_eq!(view["route"]["decided_by"], "user", "{view}");

    // Back on the dashboard, filter down to the run and complete it with `c`.
    tmux.keys(&["Escape"]);
    tmux.wait_for("? help", &["Escape"]);
    // (`src/main`: the demo's cache run has "greeting" in its title too.)
    tmux.keys(&["/", "src/main", "Enter"]);
    tmux.wait_for("filter: src/main", &[]);
    tmux.wait_for("Looked at the project", &[]);
    tmux.keys(&["c"]);
    let waited = json(drover(
        home.path(),
        &[
            "wait",
            &run_id,
            "--until",
            "terminal",
            "--timeout",
            "30",
            "--json",
        ],
    ));
    assert_eq!(waited["runs"][0]["state"], "completed", "{waited}");
    let view = show(home.path(), &run_id);
    assert_eq!(view["state"], "completed");
    assert_eq!(view["completion_reason"], "complete");
    assert_eq!(view["last_result"]["status"], "done");

    // Quit (it asks, runs are active), which stops the owner: the runs in a turn are
    // interrupted, the others left as they are for the next one.
    tmux.keys(&["q"]);
    tmux.wait_for("Are you sure?", &[]);
    tmux.keys(&["y"]);
    tmux.wait_for("DEMO-EXIT=0", &[]);
    let runs = json(drover(home.path(), &["runs", "--json"]));
    for run in runs.as_array().expect("runs") {
        let state = run["state"].as_str().unwrap_or("");
        assert!(
            !["starting", "running"].contains(&state),
            "nothing is left in a turn: {run}"
        );
    }
}

#[test]
fn closing_the_terminal_stops_the_runs_and_releases_the_directory() {
    let probe = Command::new("tmux").arg("-V").output();
    assert!(
        probe.is_ok_and(|o| o.status.success()),
        "this test needs tmux; install it (apt-get install tmux)"
    );
    let home = tempfile::tempdir().expect("temp dir");
    let tmux = Tmux {
        socket: format!("drover-e2e-close-{}", std::process::id()),
        target: "demo".into(),
    };
    let command = format!(
        "exec env DROVER_HOME='{}' '{}' demo",
        home.path().display(),
        env!("CARGO_BIN_EXE_drover")
    );
    let started = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "demo",
        "-x",
        "100",
        "-y",
        "30",
        &command,
    ]);
    assert!(started.status.success(), "{:?}", started);
    let run = run_titled(home.path(), "Investigate the flaky integration test");
    // The dashboard is up with the demo's runs: some need you; this one is in its turn.
    tmux.wait_for("Needs you (", &[]);
    let run_id = run["run_id"].as_str().expect("run id");
    wait_state(home.path(), run_id, "in its turn", |s| s == "running");

    // The terminal goes away (as when its window is closed).
    tmux.run(&["kill-server"]);
    let socket = home.path().join("drover.sock");
    let start = Instant::now();
    while socket.exists() {
        assert!(
            start.elapsed() < DEADLINE,
            "the dashboard did not shut down after its terminal went away"
        );
        std::thread::sleep(POLL);
    }
    let view = show(home.path(), run_id);
    assert_eq!(view["state"], "interrupted", "{view}");
    assert!(view["completion_reason"].is_null(), "not an end: {view}");
    assert_eq!(view["needs_you"]["reason"], "interrupted", "{view}");
}

const SYNC_BEGIN: &[u8] = b"\x1b[?2026h";
const SYNC_END: &[u8] = b"\x1b[?2026l";

fn find(bytes: &[u8], needle: &[u8]) -> Option<usize> {
    bytes.windows(needle.len()).position(|w| w == needle)
}

/// `bytes` cut into what was written inside synchronized updates (the frames) and what
/// was written outside them, or what is wrong: a begin inside a frame, or an end outside
/// one. A frame still being written when the bytes were read is left out of both.
fn frames_and_rest(mut bytes: &[u8]) -> Result<(Vec<&[u8]>, Vec<u8>), &'static str> {
    let (mut frames, mut rest) = (Vec::new(), Vec::new());
    loop {
        let Some(begin) = find(bytes, SYNC_BEGIN) else {
            rest.extend_from_slice(bytes);
            break;
        };
        rest.extend_from_slice(&bytes[..begin]);
        let inside = &bytes[begin + SYNC_BEGIN.len()..];
        let Some(end) = find(inside, SYNC_END) else {
            break;
        };
        let frame = &inside[..end];
        if find(frame, SYNC_BEGIN).is_some() {
            return Err("a synchronized update began inside another");
        }
        frames.push(frame);
        bytes = &inside[end + SYNC_END.len()..];
    }
    if find(&rest, SYNC_END).is_some() {
        return Err("a synchronized update ended that never began");
    }
    Ok((frames, rest))
}

/// The end of what the dashboard wrote, for a failure message.
fn tail(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(800)..]).into_owned()
}

#[test]
fn every_frame_reaches_the_terminal_inside_a_synchronized_update() {
    let probe = Command::new("tmux").arg("-V").output();
    assert!(
        probe.is_ok_and(|o| o.status.success()),
        "this test needs tmux; install it (apt-get install tmux)"
    );
    let home = tempfile::tempdir().expect("temp dir");
    let socket = format!("drover-e2e-sync-{}", std::process::id());
    let tmux = Tmux {
        socket: socket.clone(),
        target: "sync".into(),
    };
    // The dashboard starts once its output is piped to a file (tmux's wait-for gate).
    let command = format!(
        "tmux -L '{socket}' wait-for sync-go; exec env DROVER_HOME='{}' '{}' demo",
        home.path().display(),
        env!("CARGO_BIN_EXE_drover")
    );
    let started = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "sync",
        "-x",
        "100",
        "-y",
        "30",
        &command,
    ]);
    assert!(started.status.success(), "{started:?}");
    let written = home.path().join("pane.bytes");
    let piped = tmux.run(&[
        "pipe-pane",
        "-O",
        "-t",
        &tmux.pane_target(),
        &format!("cat >> '{}'", written.display()),
    ]);
    assert!(piped.status.success(), "{piped:?}");
    tmux.run(&["wait-for", "-S", "sync-go"]);
    tmux.wait_for("Needs you (", &[]);
    // The help view, drawn over the dashboard: a frame of its own.
    tmux.keys(&["?"]);
    tmux.wait_for("Keys", &[]);

    let start = Instant::now();
    let (frames, rest) = loop {
        let bytes = std::fs::read(&written).unwrap_or_default();
        let (frames, rest) = match frames_and_rest(&bytes) {
            Ok(cut) => cut,
            Err(wrong) => panic!("{wrong}; the dashboard wrote …{:?}", tail(&bytes)),
        };
        if frames.iter().any(|f| find(f, b"Keys").is_some()) {
            break (frames.len(), rest);
        }
        assert!(
            start.elapsed() < DEADLINE,
            "no frame with the help view in …{:?}",
            tail(&bytes)
        );
        std::thread::sleep(POLL);
    };
    assert!(frames >= 2, "the dashboard's frame, then help's: {frames}");
    // What the dashboard draws is only ever inside a frame.
    for text in ["Needs you (", "Keys", "? help"] {
        assert!(
            find(&rest, text.as_bytes()).is_none(),
            "{text:?} was written outside a synchronized update: …{:?}",
            tail(&rest)
        );
    }

    tmux.run(&["kill-server"]);
    let socket = home.path().join("drover.sock");
    let start = Instant::now();
    while socket.exists() {
        assert!(
            start.elapsed() < DEADLINE,
            "the dashboard did not shut down after its terminal went away"
        );
        std::thread::sleep(POLL);
    }
}

/// The pid `drover status` reports for the owner of `home`, once one answers.
fn owner_pid(home: &Path) -> u64 {
    let start = Instant::now();
    loop {
        let status = json(drover(home, &["status", "--json"]));
        if status["running"] == true {
            return status["pid"].as_u64().expect("a pid");
        }
        assert!(start.elapsed() < DEADLINE, "no owner came up: {status}");
        std::thread::sleep(POLL);
    }
}

fn wait_state(home: &Path, run_id: &str, what: &str, ok: impl Fn(&str) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let view = show(home, run_id);
        if ok(view["state"].as_str().unwrap_or("")) {
            return view;
        }
        assert!(start.elapsed() < DEADLINE, "never {what}: {view}");
        std::thread::sleep(POLL);
    }
}

/// Ends the background owner of a data directory when the test ends, passed or failed
/// (declared after the directory, so it is dropped first).
struct ShutdownOnDrop<'a>(&'a Path);

impl Drop for ShutdownOnDrop<'_> {
    fn drop(&mut self) {
        let _ = drover(self.0, &["shutdown", "--wait"]);
    }
}

#[test]
fn dashboards_attach_to_a_background_owner_that_outlives_them() {
    let home = sim_only_home();
    let _owner = ShutdownOnDrop(home.path());
    // Both views are of one tmux server (dropping either ends it: at the end of the test).
    let a = Tmux::new("attach", "a");
    let b = Tmux::new("attach", "b");
    let open = |tmux: &Tmux| tmux.start_dashboard(home.path(), "", (120, 36));

    // `drover` with no owner starts one in the background and attaches to it.
    open(&a);
    a.wait_for("q leave", &[]);
    let first_owner = owner_pid(home.path());

    // Dispatch a run that will wait for a permission, from the form.
    a.keys(&["n"]);
    a.wait_for("what should the agent do?", &[]);
    a.keys(&["-l", "Slow work from the form"]);
    // Task, provider, model, policy, budget, directory, workspace, sandbox, class, max
    // turns, tags, workflow, context: then the scenario.
    for _ in 0..13 {
        a.keys(&["Tab"]);
    }
    a.wait_for("tool-permission", &["Right"]);
    a.keys(&["Enter"]);
    let run = run_titled(home.path(), "Slow work from the form");
    let run_id = run["run_id"].as_str().expect("run id").to_string();
    let waited = drover(
        home.path(),
        &["wait", &run_id, "--until", "needs-you", "--timeout", "30"],
    );
    assert_eq!(waited.status.code(), Some(5), "the run needs you");

    // `q` leaves the dashboard; the run goes on.
    a.keys(&["q"]);
    a.wait_for("DASHBOARD-EXIT=0", &[]);
    assert_eq!(show(home.path(), &run_id)["state"], "awaiting_permission");
    assert_eq!(owner_pid(home.path()), first_owner, "the same owner");

    // Two dashboards on the owner: a permission answered in one is gone from the other.
    // (b first: with no session left the tmux server would exit.)
    open(&b);
    a.run(&["kill-session", "-t", "=a"]);
    open(&a);
    a.wait_for("Slow work from the form", &[]);
    b.wait_for("Slow work from the form", &[]);
    b.keys(&["p"]);
    b.wait_for("Bash wants to run", &["p"]);
    a.keys(&["p"]);
    a.wait_for("Bash wants to run", &["p"]);
    read();
    a.keys(&["y"]);
    b.wait_for("This request is no longer", &[]);
    b.keys(&["Escape"]);

    // The owner is killed under the attached dashboard: it says so, and reattaches by
    // itself to the one `drover serve --detach` brings back, where the run waits on the
    // same request.
    let asking = wait_state(home.path(), &run_id, "asking again", |s| {
        s == "awaiting_permission"
    });
    let request_id = asking["pending"][0]["request_id"].clone();
    let killed = Command::new("kill")
        .args(["-KILL", &first_owner.to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    a.wait_for("drover is not running", &[]);
    let detached = drover(home.path(), &["serve", "--detach"]);
    assert!(
        detached.status.success(),
        "{}",
        String::from_utf8_lossy(&detached.stderr)
    );
    let start = Instant::now();
    loop {
        let pane = a.pane();
        if !pane.contains("drover is not running") && pane.contains("Needs you (1)") {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "never reattached:\n{pane}");
        std::thread::sleep(POLL);
    }
    let view = show(home.path(), &run_id);
    assert_eq!(view["state"], "awaiting_permission", "{view}");
    assert_eq!(view["pending"][0]["request_id"], request_id, "{view}");
    // `y` answers it: the run wakes in its session and is told.
    std::thread::sleep(Duration::from_millis(600));
    a.keys(&["y"]);
    let start = Instant::now();
    loop {
        let view = show(home.path(), &run_id);
        if view["turns"].as_array().is_some_and(|t| t.len() == 2) {
            assert_eq!(view["turns"][1]["origin"], "resume", "{view}");
            break;
        }
        assert!(start.elapsed() < DEADLINE, "never told the answer: {view}");
        std::thread::sleep(POLL);
    }

    let stopped = drover(home.path(), &["shutdown", "--wait"]);
    assert!(
        stopped.status.success(),
        "{}",
        String::from_utf8_lossy(&stopped.stderr)
    );
}

#[test]
fn the_attention_line_shows_a_runs_permission_and_y_answers_it() {
    let home = sim_only_home();
    let _owner = ShutdownOnDrop(home.path());
    let tmux = Tmux::new("attention", "attention");
    tmux.start_dashboard(home.path(), "", (100, 30));
    tmux.wait_for("nothing waits for you", &[]);

    // A run from another terminal asks to run `ls -la`.
    let dir = home.path().to_str().expect("a UTF-8 temp path");
    let run = json(drover(
        home.path(),
        &[
            "dispatch",
            "--provider",
            "sim",
            "--scenario",
            "tool-permission",
            "--cwd",
            dir,
            "--json",
            "List the files",
        ],
    ));
    let run_id = run["run_id"].as_str().expect("run id").to_string();
    let pane = tmux.wait_for("Bash ls -la", &[]);
    let line = pane
        .lines()
        .find(|l| l.contains("Bash ls -la"))
        .expect("the attention line");
    assert!(
        line.contains("y allow") && line.contains("d deny"),
        "{line}"
    );
    let asked = wait_state(home.path(), &run_id, "asking", |s| {
        s == "awaiting_permission"
    });
    let first = asked["pending"][0]["request_id"]
        .as_str()
        .expect("a pending request")
        .to_string();

    // One key on the dashboard answers it: the run goes on to its next request.
    read();
    tmux.keys(&["y"]);
    tmux.wait_for("Edit src/main.rs", &[]);
    let view = show(home.path(), &run_id);
    let pending: Vec<&str> = view["pending"]
        .as_array()
        .expect("pending")
        .iter()
        .filter_map(|p| p["request_id"].as_str())
        .collect();
    assert!(!pending.contains(&first.as_str()), "{view}");
    assert_eq!(view["pending"][0]["tool"], "Edit", "{view}");
    // `d` denies the Edit the line now shows; the run ends its turn.
    read();
    tmux.keys(&["d"]);
    wait_state(home.path(), &run_id, "its turn over", |s| s == "idle");
    tmux.wait_for("nothing waits for you", &[]);
    tmux.keys(&["q"]);
    tmux.wait_for("DASHBOARD-EXIT=0", &[]);
}

/// `git ARGS` in `dir`, which must succeed; its stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_demo_leaves_nothing_in_repositories_it_was_only_shown() {
    let probe = Command::new("tmux").arg("-V").output();
    assert!(
        probe.is_ok_and(|o| o.status.success()),
        "this test needs tmux; install it (apt-get install tmux)"
    );
    // The demo's throwaway directory goes under this TMPDIR; the shell it starts from sits
    // in a repository of the user's.
    let tmp = tempfile::tempdir().expect("temp dir");
    let mine = tempfile::tempdir().expect("temp dir");
    let repo = mine.path();
    git(repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "mine\n").unwrap();
    git(repo, &["add", "-A"]);
    git(
        repo,
        &[
            "-c",
            "user.name=Me",
            "-c",
            "user.email=me@example.invalid",
            "-c",
            "commit.gpgsign=false",
            "commit",
            "-q",
            "-m",
            "mine",
        ],
    );
    let tmux = Tmux {
        socket: format!("drover-e2e-shown-{}", std::process::id()),
        target: "demo".into(),
    };
    let command = format!(
        "cd '{}' && env -u DROVER_HOME TMPDIR='{}' '{}' demo; echo DEMO-EXIT=$?; sleep 600",
        repo.display(),
        tmp.path().display(),
        env!("CARGO_BIN_EXE_drover")
    );
    let started = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "demo",
        "-x",
        "120",
        "-y",
        "36",
        &command,
    ]);
    assert!(started.status.success(), "{:?}", started);
    let start = Instant::now();
    let home = loop {
        let found = std::fs::read_dir(tmp.path())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.join("drover.sock").exists());
        if let Some(home) = found {
            break home;
        }
        assert!(start.elapsed() < DEADLINE, "the demo never started");
        std::thread::sleep(POLL);
    };
    tmux.wait_for("Needs you (", &[]);
    // The form starts in the demo's own repository, not in the shell's.
    tmux.keys(&["n"]);
    let pane = tmux.wait_for("New dispatch", &[]);
    let directory = pane
        .lines()
        .find(|l| l.contains("Directory"))
        .unwrap_or_else(|| panic!("the form's directory:\n{pane}"));
    assert!(directory.contains("greeter-"), "{pane}");
    tmux.keys(&["Escape"]);
    // A run dispatched into the user's repository anyway gets its worktree and branch
    // there.
    let out = drover(
        &home,
        &[
            "dispatch",
            "--provider",
            "sim",
            "--scenario",
            "quick-success",
            "--capability",
            "workspace",
            "--workspace",
            "worktree",
            "--cwd",
            &repo.display().to_string(),
            "--json",
            "Look at my repository",
        ],
    );
    let run = json(out);
    let run_id = run["run_id"].as_str().expect("run id").to_string();
    let waited = drover(
        &home,
        &["wait", &run_id, "--until", "idle", "--timeout", "30"],
    );
    assert_eq!(waited.status.code(), Some(0), "{waited:?}");
    assert!(git(repo, &["branch", "--list", "drover/*"]).contains("drover/"));
    // Leaving the demo removes it all.
    tmux.keys(&["q"]);
    tmux.wait_for("Are you sure?", &[]);
    tmux.keys(&["y"]);
    tmux.wait_for("DEMO-EXIT=0", &[]);
    assert!(!home.exists(), "the throwaway directory is gone");
    assert_eq!(git(repo, &["branch", "--list", "drover/*"]), "");
    let worktrees = git(repo, &["worktree", "list", "--porcelain"]);
    assert_eq!(
        worktrees
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count(),
        1,
        "no worktree entry is left: {worktrees}"
    );
}

#[test]
fn after_a_kill_9_the_dashboard_shows_each_run_back_in_its_tray() {
    let probe = Command::new("tmux").arg("-V").output();
    assert!(
        probe.is_ok_and(|o| o.status.success()),
        "this test needs tmux; install it (apt-get install tmux)"
    );
    let home = tempfile::tempdir().expect("temp dir");
    let _owner = ShutdownOnDrop(home.path());
    std::fs::write(
        home.path().join("config.toml"),
        "[limits]\nhibernate_after_secs = 1\n[workspaces]\nshared_conflict = \"allow\"\n",
    )
    .expect("config");
    let owner = drover(home.path(), &["serve", "--detach"]);
    assert!(owner.status.success(), "{owner:?}");
    let dispatch = |scenario: &str, task: &str| -> String {
        let run = json(drover(
            home.path(),
            &[
                "dispatch",
                "--provider",
                "sim",
                "--scenario",
                scenario,
                "--cwd",
                &home.path().display().to_string(),
                "--json",
                task,
            ],
        ));
        run["run_id"].as_str().expect("run id").to_string()
    };
    // One hibernated, one waiting on a permission, one in its turn.
    let asleep = dispatch("multi-turn", "Write the parser");
    let asking = dispatch("tool-permission", "Fix the greeting");
    let busy = dispatch("hang", "Look into the flaky test");
    let start = Instant::now();
    while show(home.path(), &asleep)["live_state"]["detail"] != "idle · hibernated" {
        assert!(start.elapsed() < DEADLINE, "never hibernated");
        std::thread::sleep(POLL);
    }
    wait_state(home.path(), &asking, "asking", |s| {
        s == "awaiting_permission"
    });
    wait_state(home.path(), &busy, "in its turn", |s| s == "running");

    let pid = owner_pid(home.path());
    let killed = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let start = Instant::now();
    while owner_pid_alive(pid) {
        assert!(start.elapsed() < DEADLINE, "the owner outlived kill -9");
        std::thread::sleep(POLL);
    }

    // Reopened (the dashboard starts a new owner): each run in its tray.
    let tmux = Tmux {
        socket: format!("drover-e2e-restart-{}", std::process::id()),
        target: "restart".into(),
    };
    let command = format!(
        "cd '{}'; DROVER_HOME='{}' '{}'; sleep 600",
        home.path().display(),
        home.path().display(),
        env!("CARGO_BIN_EXE_drover")
    );
    let started = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "restart",
        "-x",
        "120",
        "-y",
        "30",
        &command,
    ]);
    assert!(started.status.success(), "{started:?}");
    let pane = tmux.wait_for("Needs you (2)", &[]);
    assert!(pane.contains("2 need you"), "{pane}");
    assert!(
        pane.contains("Idle (1)"),
        "the hibernated run is idle:\n{pane}"
    );
    assert!(!pane.contains("Finished ("), "nothing finished:\n{pane}");
    assert!(
        pane.contains("interrupted by a restart of drover"),
        "the interrupted run's line in words:\n{pane}"
    );
    assert!(!pane.contains("resident_replaced"), "{pane}");
    assert_eq!(show(home.path(), &asleep)["state"], "idle");
    assert_eq!(show(home.path(), &asking)["state"], "awaiting_permission");
    assert_eq!(show(home.path(), &busy)["state"], "interrupted");
    // R on the interrupted run resumes it: its turn goes on.
    tmux.keys(&["/", "flaky", "Enter"]);
    tmux.wait_for("filter: flaky", &[]);
    tmux.keys(&["R"]);
    wait_state(home.path(), &busy, "resumed", |s| s == "running");
}

/// Whether the process `pid` is still there (a zombie is gone for this purpose).
fn owner_pid_alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(str::to_string))
        })
        .is_some_and(|state| state != "Z" && state != "X")
}

/// The user decisions on a run's requests, from `drover show`.
fn user_decisions(home: &Path, run_id: &str) -> Vec<String> {
    show(home, run_id)["decisions"]
        .as_array()
        .map(|ds| {
            ds.iter()
                .filter(|d| d["who"] == "user")
                .filter_map(|d| d["decision"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_double_pressed_y_answers_only_the_request_that_was_read() {
    let home = sim_only_home();
    let _owner = ShutdownOnDrop(home.path());
    let tmux = Tmux::new("double", "double");
    tmux.start_dashboard(home.path(), "", (100, 30));
    tmux.wait_for("nothing waits for you", &[]);

    // Two runs, each in a directory of its own, ask to run `ls -la`.
    let dispatch = |title: &str| {
        let dir = tempfile::tempdir_in(home.path())
            .expect("a work dir")
            .keep();
        let run = json(drover(
            home.path(),
            &[
                "dispatch",
                "--provider",
                "sim",
                "--scenario",
                "tool-permission",
                "--cwd",
                dir.to_str().expect("a UTF-8 temp path"),
                "--json",
                title,
            ],
        ));
        let id = run["run_id"].as_str().expect("run id").to_string();
        wait_state(home.path(), &id, "asking", |s| s == "awaiting_permission");
        id
    };
    let first = dispatch("First listing");
    let second = dispatch("Second listing");
    tmux.wait_for("+1 waiting", &[]);

    // `y`, then `y` again 150 ms later: the first answers the request the user read; the
    // line moves to the second run's request, which the second `y` does not answer.
    read();
    tmux.keys(&["y"]);
    std::thread::sleep(Duration::from_millis(150));
    tmux.keys(&["y"]);
    // Keys are handled in order: once help opens, both were.
    tmux.keys(&["?"]);
    tmux.wait_for("Keys", &[]);
    tmux.keys(&["Escape"]);
    let start = Instant::now();
    while user_decisions(home.path(), &first).is_empty() {
        assert!(start.elapsed() < DEADLINE, "the first answer never landed");
        std::thread::sleep(POLL);
    }
    assert_eq!(user_decisions(home.path(), &first), ["allow"]);
    assert!(
        user_decisions(home.path(), &second).is_empty(),
        "the second y answered a request on screen for 150 ms: {}",
        show(home.path(), &second)
    );
    assert_eq!(show(home.path(), &second)["state"], "awaiting_permission");

    // Read, then `y`: now it answers the second run's request.
    read();
    tmux.keys(&["y"]);
    let start = Instant::now();
    while user_decisions(home.path(), &second).is_empty() {
        assert!(start.elapsed() < DEADLINE, "the second answer never landed");
        std::thread::sleep(POLL);
    }
    assert_eq!(user_decisions(home.path(), &second), ["allow"]);
    assert_eq!(user_decisions(home.path(), &first), ["allow"]);
    tmux.keys(&["q"]);
    tmux.wait_for("DASHBOARD-EXIT=0", &[]);
}

/// Into a run's directory from the dashboard: `!` opens `$SHELL` there. Outside tmux the
/// shell takes the terminal and the dashboard comes back, whole, when it exits; inside
/// tmux it opens in a new window named after the run and the dashboard stays.
#[test]
fn bang_opens_a_shell_in_the_runs_directory_and_the_dashboard_comes_back() {
    let home = sim_only_home();
    let _owner = ShutdownOnDrop(home.path());
    let work = home.path().join("work");
    std::fs::create_dir(&work).expect("the run's directory");
    // The "shell": says where it is, then waits for a line.
    let marker = home.path().join("shell-was-in");
    let shell = home.path().join("shell.sh");
    std::fs::write(
        &shell,
        format!(
            "#!/bin/sh\npwd >> '{}'\necho IN-THE-SHELL\nread line\n",
            marker.display()
        ),
    )
    .expect("the shell script");
    std::fs::set_permissions(&shell, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let tmux = Tmux::new("open", "open");
    // Outside tmux (its variable unset for the dashboard): the shell in the foreground.
    tmux.start_dashboard(
        home.path(),
        &format!("env -u TMUX SHELL='{}'", shell.display()),
        (100, 30),
    );
    tmux.wait_for("nothing waits for you", &[]);
    // A run dispatched from another terminal, working in `work`.
    let run = json(drover(
        home.path(),
        &[
            "dispatch",
            "--provider",
            "sim",
            "--scenario",
            "quick-success",
            "--cwd",
            work.to_str().expect("a UTF-8 path"),
            "--json",
            "Say hello",
        ],
    ));
    let run_id = run["run_id"].as_str().expect("run id").to_string();
    tmux.wait_for(&run_id, &[]);
    tmux.keys(&["!"]);
    tmux.wait_for("IN-THE-SHELL", &[]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("back from the shell", &[]);
    tmux.wait_for(&run_id, &[]);
    let was_in = std::fs::read_to_string(&marker).expect("the shell ran");
    assert_eq!(was_in.trim(), work.display().to_string());
    // Inside tmux: a new window named after the run; the dashboard stays on screen.
    tmux.keys(&["q"]);
    tmux.wait_for("DASHBOARD-EXIT=0", &[]);
    let command = format!(
        "cd '{}'; DROVER_HOME='{}' SHELL='{}' '{}'; sleep 600",
        home.path().display(),
        home.path().display(),
        shell.display(),
        env!("CARGO_BIN_EXE_drover")
    );
    let inside = Tmux {
        socket: format!("drover-e2e-open-in-{}", std::process::id()),
        target: "inside".into(),
    };
    let started = inside.run(&[
        "new-session",
        "-d",
        "-s",
        "inside",
        "-x",
        "100",
        "-y",
        "30",
        &command,
    ]);
    assert!(started.status.success(), "{started:?}");
    inside.wait_for(&run_id, &[]);
    inside.keys(&["!"]);
    let window = format!("{run_id} shell");
    let start = Instant::now();
    loop {
        let windows = String::from_utf8_lossy(
            &inside
                .run(&["list-windows", "-t", "=inside", "-F", "#{window_name}"])
                .stdout,
        )
        .into_owned();
        if windows.lines().any(|w| w == window)
            && std::fs::read_to_string(&marker).is_ok_and(|m| m.lines().count() == 2)
        {
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "no window {window:?} with the shell in it: {windows}"
        );
        std::thread::sleep(POLL);
    }
    let was_in = std::fs::read_to_string(&marker).expect("the shell ran");
    assert_eq!(
        was_in.lines().nth(1),
        Some(work.display().to_string().as_str())
    );
    // The new window is the one tmux shows; the dashboard goes on in its own.
    let dashboard = String::from_utf8_lossy(
        &inside
            .run(&["capture-pane", "-p", "-t", "=inside:0"])
            .stdout,
    )
    .into_owned();
    assert!(dashboard.contains(&run_id), "{dashboard}");
    assert!(dashboard.contains("a tmux window"), "{dashboard}");
}

/// `t` then `Y` in a real terminal: the dashboard writes the run's result block to the
/// terminal as OSC 52, and tmux (with `set-clipboard on`, as it takes OSC 52 from the
/// programs in its panes) puts exactly that text in its paste buffer; `g v j y` copies
/// the transcript's first two lines the same way
/// (docs/ARCHITECTURE.md §"Reading a transcript").
#[test]
fn the_transcript_copies_to_the_clipboard_through_the_terminal() {
    let home = sim_only_home();
    let _owner = ShutdownOnDrop(home.path());
    let tmux = Tmux::new("copy", "copy");
    tmux.start_dashboard(home.path(), "", (100, 30));
    let set = tmux.run(&["set-option", "-s", "set-clipboard", "on"]);
    assert!(set.status.success(), "{set:?}");
    tmux.wait_for("nothing waits for you", &[]);

    let dir = home.path().to_str().expect("a UTF-8 temp path");
    let run = json(drover(
        home.path(),
        &[
            "dispatch",
            "--provider",
            "sim",
            "--scenario",
            "multi-turn",
            "--cwd",
            dir,
            "--json",
            "Write the parser",
        ],
    ));
    let run_id = run["run_id"].as_str().expect("run id").to_string();
    wait_state(home.path(), &run_id, "its turn over", |s| s == "idle");
    // The detail pane shows the answer's lines as written.
    tmux.wait_for("│ ## Result", &[]);
    tmux.keys(&["t"]);
    tmux.wait_for("Transcript · Write the parser", &[]);
    tmux.keys(&["Y"]);
    tmux.wait_for("copied the result block (5 lines", &[]);
    let buffer = tmux.run(&["show-buffer"]);
    assert_eq!(
        String::from_utf8_lossy(&buffer.stdout),
        "## Result\nstatus: done\nsummary: Wrote the first version of the parser.\nfiles:\n- src/parser.rs",
        "{buffer:?}"
    );
    tmux.keys(&["g", "v", "j", "y"]);
    tmux.wait_for("copied 2 lines", &[]);
    let buffer = tmux.run(&["show-buffer"]);
    let copied = String::from_utf8_lossy(&buffer.stdout).into_owned();
    let lines: Vec<&str> = copied.lines().collect();
    assert_eq!(lines.len(), 2, "{copied:?}");
    assert_eq!(lines[0], "ready");
    assert!(lines[1].starts_with("session "), "{copied:?}");
    tmux.keys(&["q", "q"]);
    tmux.wait_for("DASHBOARD-EXIT=0", &[]);
}
