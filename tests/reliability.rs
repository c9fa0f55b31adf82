//! Reliability end to end, on the real binary: nothing a run's CLI starts outlives drover
//! (stop, a crash — ended by the owner's warden — and a crash followed by a new owner), the control socket bounds what one
//! request may cost, and a crash loop under load loses nothing.
//!
//! Every process these tests signal is one they started (`drover serve`, by its pid, and
//! once the warden that serve started, found by its parent's pid); the processes a run's
//! CLI leaves are ended by drover itself.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::{Home, str_at};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

/// `(state, start time)` of a process, from /proc.
fn stat_of(pid: i32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some((
        fields.first()?.chars().next()?,
        fields.get(19)?.parse().ok()?,
    ))
}

/// Whether the process `pid` that started at `start` is still running (a zombie is not).
fn running(pid: i32, start: u64) -> bool {
    stat_of(pid).is_some_and(|(state, s)| s == start && state != 'Z' && state != 'X')
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        thread::sleep(Duration::from_millis(50));
    }
}

/// A home whose `claude-code` provider is the simulated agent behind a wrapper that
/// first starts a `sleep` in a session of its own (as a CLI's Bash tool may) and writes
/// its pid to `sleeper.pid`.
fn home_with_escaping_cli() -> (Home, PathBuf) {
    let home = Home::new();
    let wrapper = home.path().join("escaping-cli.sh");
    let pidfile = home.path().join("sleeper.pid");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nsetsid sleep 300 </dev/null >/dev/null 2>&1 &\necho $! > {}\nexec {} \"$@\"\n",
            pidfile.display(),
            common::drover_bin()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[providers.claude-code]\ncommand = \"{}\"\nargs = [\"sim-agent\", \"--scenario\", \"hang\"]\n",
            wrapper.display()
        ),
    )
    .unwrap();
    (home, pidfile)
}

/// The sleeper's pid and start time, once the wrapper wrote it.
fn sleeper(pidfile: &Path) -> (i32, u64) {
    let mut found = None;
    wait_until(
        "the CLI starts its escaping tool",
        Duration::from_secs(30),
        || {
            found = std::fs::read_to_string(pidfile)
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
                .and_then(|pid| stat_of(pid).map(|(_, start)| (pid, start)));
            found.is_some()
        },
    );
    found.unwrap()
}

fn dispatch_claude(home: &Home) -> String {
    let run = home.json(&["dispatch", "--provider", "claude-code", "Fix the greeting"]);
    str_at(&run, "run_id").to_string()
}

#[test]
fn a_tool_in_a_session_of_its_own_is_ended_when_its_claude_run_is_stopped() {
    let (home, pidfile) = home_with_escaping_cli();
    let serve = home.serve();
    let run = dispatch_claude(&home);
    let (pid, start) = sleeper(&pidfile);
    assert!(running(pid, start));
    let out = home.drover(&["stop", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", common::describe(&out));
    home.wait_terminal(&run);
    wait_until(
        "the escaped tool is ended with its run",
        Duration::from_secs(15),
        || !running(pid, start),
    );
    serve.stop();
}

#[test]
fn a_cli_that_refuses_its_handshake_fails_with_launch_error_and_its_last_stderr_line() {
    let home = Home::new();
    // A CLI that will not talk: it says why on stderr (with a key in it) and exits.
    let script = home.path().join("refusing-cli.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\necho 'checking the account' >&2\n\
         echo 'Invalid API key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKlMnOpQrStAA · Please run /login' >&2\n\
         exit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[providers.claude-code]\ncommand = \"{}\"\n",
            script.display()
        ),
    )
    .unwrap();
    let _serve = home.serve();
    let run = dispatch_claude(&home);
    let view = home.wait_terminal(&run);
    assert_eq!(view["state"], "failed", "{view}");
    assert_eq!(view["completion_reason"], "launch_error", "{view}");
    assert_eq!(view["live_state"]["cause"], "failed", "{view}");
    let notes = common::notes_of(&view);
    assert!(
        notes.contains(
            &"the provider did not start (exit code 1); its last stderr line: \
              \"Invalid API key [redacted] · Please run /login\""
                .to_string()
        ),
        "the note quotes the CLI's last stderr line, redacted: {notes:?}"
    );
    let shown = home.drover(&["show", &run]);
    assert!(
        !common::stdout(&shown).contains("sk-ant-api03"),
        "{}",
        common::describe(&shown)
    );
    // A refusal quoting what it was given is redacted too.
    let key = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKlMnOpQrStAA";
    for json in [false, true] {
        let mut args = vec!["show", key];
        if json {
            args.push("--json");
        }
        let out = common::run_bounded(home.command(&args), common::COMMAND_LIMIT, "show");
        let err = common::stderr(&out);
        assert!(
            err.contains("RUN_NOT_FOUND") && err.contains("[redacted]"),
            "{err}"
        );
        assert!(!err.contains("sk-ant-api03"), "{err}");
    }
}

/// Starts an owner and a claude run whose CLI leaves a tool in a session of its own;
/// returns once the ledger notes the tool: `(home, owner, run, tool pid, tool start)`.
fn crash_rig() -> (Home, common::Serve, String, i32, u64) {
    let (home, pidfile) = home_with_escaping_cli();
    let serve = home.serve();
    let run = dispatch_claude(&home);
    let (pid, start) = sleeper(&pidfile);
    // The owner notes the run's processes in the ledger (about once a second).
    let ledger = home.path().join("ledger.sqlite3");
    wait_until(
        "the tool is noted in the ledger",
        Duration::from_secs(15),
        || {
            rusqlite::Connection::open_with_flags(
                &ledger,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .and_then(|c| {
                c.query_row(
                    "SELECT count(*) FROM processes WHERE pid = ?1 AND start_ticks = ?2",
                    rusqlite::params![pid, start as i64],
                    |r| r.get::<_, i64>(0),
                )
            })
            .is_ok_and(|n| n == 1)
        },
    );
    (home, serve, run, pid, start)
}

/// The owner's warden: its child whose command line is `drover warden`.
fn warden_of(owner: u32) -> i32 {
    let found: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
            ppid == Some(owner)
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.split(|b| *b == 0).nth(1) == Some(&b"warden"[..]))
        })
        .collect();
    assert_eq!(found.len(), 1, "one warden under the owner: {found:?}");
    found[0]
}

#[test]
fn a_crashed_owners_runs_leave_nothing_running_even_with_no_new_owner() {
    let (home, serve, run, pid, start) = crash_rig();
    serve.kill9();
    // The crash ended the CLI (parent-death signal); its warden ends the tool in its own
    // session, with no new owner started.
    wait_until(
        "the warden ends the tool the crashed owner's run left",
        Duration::from_secs(10),
        || !running(pid, start),
    );
    let serve = home.serve();
    let row = home.row(&run);
    assert_eq!(str_at(&row, "state"), "interrupted", "{row}");
    serve.stop();
}

#[test]
fn after_a_crash_that_took_the_warden_too_the_next_owner_ends_what_the_runs_left() {
    let (home, serve, run, pid, start) = crash_rig();
    // The warden is the owner's child (started by drover, found by its parent's pid).
    let warden = warden_of(serve.pid());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(warden),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    serve.kill9();
    thread::sleep(Duration::from_millis(300));
    assert!(
        running(pid, start),
        "with no warden, the tool outlives the crashed owner"
    );
    let serve = home.serve();
    wait_until("recovery ends the tool", Duration::from_secs(10), || {
        !running(pid, start)
    });
    let row = home.row(&run);
    assert_eq!(str_at(&row, "state"), "interrupted", "{row}");
    serve.stop();
}

/// One request line on the socket; the answer line.
fn ask(stream: &mut UnixStream, reader: &mut BufReader<UnixStream>, line: &str) -> Value {
    stream.write_all(line.as_bytes()).unwrap();
    stream.write_all(b"\n").unwrap();
    let mut answer = String::new();
    reader.read_line(&mut answer).unwrap();
    serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{answer:?}: {e}"))
}

#[test]
fn a_megabyte_wait_naming_one_run_68000_times_costs_one_run() {
    let home = Home::new();
    let serve = home.serve();
    let run = home.dispatch("quick-success", "Say hello", &[]);
    home.wait_idle(&run);
    let mut stream = UnixStream::connect(home.socket()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    // The amplification of the report: 68,000 copies of one id in under 1 MB.
    let ids = vec![format!("\"{run}\""); 68_000].join(",");
    let line = format!(
        "{{\"id\": 1, \"request\": {{\"method\": \"wait\", \"params\": {{\"run_ids\": [{ids}], \"until\": \"terminal\"}}}}}}"
    );
    assert!(line.len() < 1024 * 1024, "{} bytes", line.len());
    let answer = ask(&mut stream, &mut reader, &line);
    assert_eq!(answer["error"]["code"], "REQUEST_TOO_LARGE", "{answer}");
    // Within the bound, duplicates are collapsed: the answer names the run once.
    let ids = vec![format!("\"{run}\""); 200].join(",");
    let line = format!(
        "{{\"id\": 2, \"request\": {{\"method\": \"wait\", \"params\": {{\"run_ids\": [{ids}], \"until\": \"idle\"}}}}}}"
    );
    let answer = ask(&mut stream, &mut reader, &line);
    let text = answer.to_string();
    assert!(answer.get("ok").is_some(), "{answer}");
    assert_eq!(text.matches(run.as_str()).count(), 1, "{text}");
    assert!(text.len() < 8 * 1024, "{} bytes", text.len());
    // Params default alike: `runs` without params, `kill_all` with empty ones.
    let answer = ask(
        &mut stream,
        &mut reader,
        "{\"id\": 3, \"request\": {\"method\": \"runs\"}}",
    );
    assert!(answer["ok"].is_array(), "{answer}");
    let answer = ask(
        &mut stream,
        &mut reader,
        "{\"id\": 4, \"request\": {\"method\": \"kill_all\", \"params\": {}}}",
    );
    assert!(answer.get("ok").is_some(), "{answer}");
    // The owner serves on.
    assert_eq!(home.json(&["runs"]).as_array().map(Vec::len), Some(1));
    serve.stop();
}

#[test]
fn pending_waits_per_connection_are_capped() {
    let home = Home::new();
    let serve = home.serve();
    let run = home.dispatch("hang", "Wait for me", &[]);
    let mut stream = UnixStream::connect(home.socket()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    for id in 0..16 {
        let line = format!(
            "{{\"id\": {id}, \"request\": {{\"method\": \"wait\", \"params\": {{\"run_ids\": [\"{run}\"], \"until\": \"terminal\", \"timeout_secs\": 60}}}}}}\n"
        );
        stream.write_all(line.as_bytes()).unwrap();
    }
    let answer = ask(
        &mut stream,
        &mut reader,
        &format!(
            "{{\"id\": 99, \"request\": {{\"method\": \"wait\", \"params\": {{\"run_ids\": [\"{run}\"]}}}}}}"
        ),
    );
    assert_eq!(answer["id"], 99, "{answer}");
    assert_eq!(answer["error"]["code"], "TOO_MANY_WAITS", "{answer}");
    // A ping still gets through.
    let answer = ask(
        &mut stream,
        &mut reader,
        "{\"id\": 100, \"request\": {\"method\": \"ping\"}}",
    );
    assert_eq!(answer["ok"]["pong"], true, "{answer}");
    drop(stream);
    home.drover(&["stop", &run]);
    serve.stop();
}

/// A small xorshift, seeded from the clock or `DROVER_CRASH_SEED` (the seed is printed
/// to replay a failure).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Live processes whose environment names this home (a drover, a CLI, a tool).
fn processes_of(home: &Path) -> Vec<i32> {
    let needle = format!("DROVER_HOME={}", home.display());
    let me = std::process::id() as i32;
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
                .filter(|pid| *pid != me)
                .filter(|pid| stat_of(*pid).is_some_and(|(s, _)| s != 'Z' && s != 'X'))
                .filter(|pid| {
                    std::fs::read(format!("/proc/{pid}/environ"))
                        .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == needle.as_bytes()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A subscriber of the owner's live feed, as a dashboard is, until the owner goes: each
/// run it heard of, with the number of the furthest live-state assignment it heard (0
/// for a run heard of only by its row).
fn live_feed(home: &Home) -> thread::JoinHandle<std::collections::BTreeMap<String, u64>> {
    let mut stream = UnixStream::connect(home.socket()).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let ack = ask(
        &mut stream,
        &mut reader,
        r#"{"id": 1, "request": {"method": "subscribe"}}"#,
    );
    assert_eq!(ack["ok"]["subscribed"], true, "{ack}");
    thread::spawn(move || {
        let mut heard = std::collections::BTreeMap::new();
        let mut line = String::new();
        // Ends at EOF: the owner was killed. Bounded by what the owner sent.
        while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
            if let Ok(value) = serde_json::from_str::<Value>(&line) {
                let event = &value["event"];
                let run = event["run_id"]
                    .as_str()
                    .or_else(|| event["run"]["run_id"].as_str());
                if let Some(run) = run {
                    let seq = event["live_state"]["seq"].as_u64().unwrap_or(0);
                    let seen: &mut u64 = heard.entry(run.to_string()).or_insert(0);
                    *seen = (*seen).max(seq);
                }
            }
            line.clear();
        }
        drop(stream);
        heard
    })
}

#[test]
fn twenty_crashes_under_load_lose_nothing_shown_and_leave_nothing_running() {
    // DROVER_CRASH_SEED replays a failed loop's timings (its seed is printed).
    let seed = match std::env::var("DROVER_CRASH_SEED") {
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .expect("DROVER_CRASH_SEED is a number"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(7, |d| d.as_nanos() as u64),
    } | 1;
    eprintln!("crash loop seed {seed} (DROVER_CRASH_SEED={seed} replays it)");
    let mut rng = Rng(seed);
    let home = Home::new();
    // What was shown: each run's id and the furthest event seq the live feed (a
    // subscriber of the test's own, as a dashboard) or a read showed of it before a crash.
    let mut shown: std::collections::BTreeMap<String, u64> = Default::default();
    let mut live_shown: std::collections::BTreeMap<String, u64> = Default::default();
    let scenarios = [
        "multi-turn",
        "slow-spender",
        "tool-permission",
        "quick-success",
        "flood",
    ];
    for round in 0..20 {
        let serve = home.serve();
        let feed = live_feed(&home);
        for _ in 0..3 {
            let scenario = scenarios[(rng.next() % scenarios.len() as u64) as usize];
            let run = home.json(&[
                "dispatch",
                "--provider",
                "sim",
                "--scenario",
                scenario,
                "Load",
            ]);
            shown.entry(str_at(&run, "run_id").to_string()).or_insert(0);
        }
        // Some of what is shown: a run's events, read back through the owner.
        let (run, _) = shown
            .iter()
            .nth((rng.next() % shown.len() as u64) as usize)
            .unwrap();
        let run = run.clone();
        let events = home.events(&run).len() as u64;
        let seen = shown.entry(run).or_insert(0);
        *seen = (*seen).max(events);
        thread::sleep(Duration::from_millis(rng.next() % 400));
        eprintln!("round {round}: SIGKILL");
        serve.kill9();
        // What the feed showed until the crash.
        let heard = feed.join().expect("the feed reader");
        assert!(
            !heard.is_empty(),
            "round {round}: the live feed showed nothing"
        );
        for (run, seq) in heard {
            shown.entry(run.clone()).or_insert(0);
            let seen = live_shown.entry(run).or_insert(0);
            *seen = (*seen).max(seq);
        }
    }
    // The owner after the last crash recovers; nothing is active, nothing shown is lost.
    let serve = home.serve();
    let runs = home.json(&["runs", "--all"]);
    let runs = runs.as_array().unwrap();
    for (run, seen) in &shown {
        let row = runs
            .iter()
            .find(|r| str_at(r, "run_id") == run)
            .unwrap_or_else(|| panic!("run {run} was shown and then lost"));
        let state = str_at(row, "state");
        assert!(
            drover_core::run_state::RunState::parse(state).is_some(),
            "{run} is {state} after recovery"
        );
        let events = home.events(run);
        assert!(
            events.len() as u64 >= *seen,
            "{run} lost events it had shown (up to seq {seen})"
        );
        // The feed's live states: the k-th assignment it showed is in the ledger.
        let live = events.iter().filter(|e| e["kind"] == "live_state").count() as u64;
        let heard = live_shown.get(run).copied().unwrap_or(0);
        assert!(
            live >= heard,
            "{run}: the feed showed live state {heard}; the ledger holds {live}"
        );
    }
    serve.stop();
    // The ledger: whole, and every run's events numbered 1, 2, 3, … with no gap.
    let conn = rusqlite::Connection::open_with_flags(
        home.path().join("ledger.sqlite3"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    let gaps: i64 = conn
        .query_row(
            "SELECT count(*) FROM (SELECT run_id, count(*) AS n, min(seq) AS lo, max(seq) AS hi
                FROM events GROUP BY run_id) WHERE lo != 1 OR hi != n",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(gaps, 0, "runs with a gap in their event seqs");
    // The last owner stopped: no run is left in a turn (those were interrupted); the
    // others wait, as they were, for the next owner (docs/ARCHITECTURE.md §"A restart").
    let in_a_turn: i64 = conn
        .query_row(
            "SELECT count(*) FROM runs WHERE state IN ('starting', 'running')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        in_a_turn, 0,
        "runs left in a turn after the last owner stopped"
    );
    // No drover, CLI or tool of this home is left.
    wait_until(
        "every process of the home is gone",
        Duration::from_secs(15),
        || processes_of(home.path()).is_empty(),
    );
}

#[test]
fn after_a_crash_the_pending_request_is_shown_again_and_the_turn_ends() {
    let home = Home::new();
    let serve = home.serve();
    let run = home.dispatch("tool-permission", "Fix the greeting", &[]);
    let request = home.wait_for_pending(&run, "Bash");
    serve.kill9();
    // No owner yet: the reads say the run's drover is gone, not that it runs.
    let row = home.row(&run);
    assert_eq!(row["state"], "awaiting_permission", "{row}");
    assert_eq!(row["owner_gone"], true, "{row}");
    assert_eq!(home.show(&run)["owner_gone"], true);
    let table = common::stdout(&home.drover(&["runs"]));
    assert!(
        table
            .lines()
            .any(|l| l.starts_with(&run) && l.contains("awaiting_permission · owner gone")),
        "{table}"
    );
    let shown = common::stdout(&home.drover(&["show", &run]));
    assert!(shown.contains("its drover is gone (a crash)"), "{shown}");
    let status = home.json(&["status"]);
    assert_eq!(status["running"], false, "{status}");
    assert_eq!(status["owner_gone"], 1, "{status}");
    let serve = home.serve();
    // Back where it was: the same request, undecided; the cut turn has an end.
    let row = home.row(&run);
    assert_eq!(row["state"], "awaiting_permission", "{row}");
    assert!(row.get("owner_gone").is_none(), "{row}");
    let view = home.show(&run);
    assert_eq!(
        view["pending"][0]["request_id"], request["request_id"],
        "{view}"
    );
    let conn = rusqlite::Connection::open_with_flags(
        home.path().join("ledger.sqlite3"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let open_turns: i64 = conn
        .query_row(
            "SELECT count(*) FROM turns WHERE run_id = ?1 AND ended_at IS NULL",
            [&run],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(open_turns, 0, "the cut turn has an end");
    let decisions: i64 = conn
        .query_row(
            "SELECT count(*) FROM decisions WHERE run_id = ?1",
            [&run],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(decisions, 0, "nobody answered it for the user");
    serve.stop();
}

#[test]
fn a_refused_config_reload_shows_in_status_until_the_file_is_fixed() {
    let home = Home::new();
    let _serve = home.serve();
    let status = home.json(&["status"]);
    assert_eq!(status["running"], true, "{status}");
    assert_eq!(status["config_refused"], Value::Null, "{status}");
    std::fs::write(
        home.path().join("config.toml"),
        "[limits]\nper_session_running = 0\n",
    )
    .unwrap();
    let mut status = Value::Null;
    wait_until(
        "status to show the refused reload",
        Duration::from_secs(20),
        || {
            status = home.json(&["status"]);
            status["config_refused"].is_string()
        },
    );
    let refused = str_at(&status, "config_refused");
    assert!(
        refused.starts_with("config not reloaded: ")
            && refused.contains("limits.per_session_running")
            && refused.ends_with("(the config in force is kept)"),
        "{refused}"
    );
    let text = common::stdout(&home.drover(&["status"]));
    assert!(
        text.lines()
            .any(|l| l.starts_with("config    config not reloaded: ")),
        "{text}"
    );
    // Fixed: the owner takes it and status says nothing more.
    std::fs::write(
        home.path().join("config.toml"),
        "[limits]\nper_session_running = 2\n",
    )
    .unwrap();
    wait_until("status to clear", Duration::from_secs(20), || {
        home.json(&["status"])["config_refused"].is_null()
    });
}

/// Every byte under `dir` (files only, one level of subdirectories), lossily as text.
fn text_under(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            text.push_str(&text_under(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            text.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    text
}

#[test]
fn a_secret_in_the_task_context_follow_up_and_agent_text_is_stored_and_shown_nowhere() {
    let home = Home::new();
    // Three shapes of gitleaks' rules: Anthropic, GitHub, AWS.
    let keys = [
        "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0EdCbA-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0EdCbA-Zx9Yw8Vu7Ts6Rq5Po4NmAA",
        "ghp_R4nd0mT0k3nF0rT3st1ngDr0v3rXyZ123456",
        "AKIAQ3EXAMPLEZ7KEY5P",
    ];
    let serve = home.serve();
    // The live feed, as a dashboard gets it.
    let mut stream = UnixStream::connect(home.socket()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let ack = ask(
        &mut stream,
        &mut reader,
        r#"{"id": 1, "request": {"method": "subscribe"}}"#,
    );
    assert_eq!(ack["ok"]["subscribed"], true, "{ack}");

    let task = format!("Write a parser; the key is {}", keys[0]);
    let context = format!("deploy with {}", keys[1]);
    let run = home.dispatch("multi-turn", &task, &["--context", &context]);
    home.wait_idle(&run);
    // The sim echoes the follow-up in its text and its result.
    home.json(&["follow-up", &run, &format!("also rotate {}", keys[2])]);
    home.wait_idle(&run);
    let view = home.show(&run);
    let result = str_at(&view["last_result"], "summary").to_string();
    assert!(
        result.starts_with("Handled the first follow-up: also rotate [redacted]"),
        "the echo is there, without the key: {result}"
    );
    home.json(&["complete", &run]);
    home.wait_terminal(&run);

    let mut shown = String::new();
    for args in [
        vec!["show", run.as_str()],
        vec!["show", run.as_str(), "--json"],
        vec!["runs", "--json"],
        vec!["runs"],
        vec!["status"],
        vec!["transcript", run.as_str(), "--format", "result"],
        vec!["transcript", run.as_str(), "--format", "text"],
        vec!["transcript", run.as_str(), "--format", "tail"],
        vec!["transcript", run.as_str(), "--format", "events", "--json"],
    ] {
        let out = common::run_bounded(home.command(&args), common::COMMAND_LIMIT, "a read");
        assert_eq!(out.status.code(), Some(0), "{}", common::describe(&out));
        shown.push_str(&common::stdout(&out));
        shown.push_str(&common::stderr(&out));
    }
    assert!(shown.contains("[redacted]"), "{shown}");
    let mut feed = String::new();
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
        feed.push_str(&line);
        line.clear();
    }
    assert!(feed.contains(&run), "the feed carried the run's events");
    drop(stream);
    serve.stop();
    // The ledger (and its WAL), the logs: what is stored.
    let stored = text_under(home.path());
    assert!(
        stored.contains("the key is [redacted]"),
        "the task is stored, redacted"
    );
    // At INFO (the default) the logs of the owner and of each command hold no content:
    // neither the task nor the follow-up, redacted or not.
    let logs = text_under(&home.path().join("logs"));
    assert!(logs.contains("drover started"), "{logs}");
    for content in ["Write a parser", "also rotate", "deploy with"] {
        assert!(!logs.contains(content), "{content:?} logged: {logs}");
    }
    for key in keys {
        assert!(!shown.contains(key), "{key} shown: {shown}");
        assert!(!feed.contains(key), "{key} on the feed");
        assert!(
            !stored.contains(key),
            "{key} stored under the data directory"
        );
    }
}

// ---------------------------------------------------------------------------------------
// A restart puts every run back where it was (docs/ARCHITECTURE.md §"A restart")
// ---------------------------------------------------------------------------------------

/// One permission in one turn: a resumed session replays the turn, so the same command
/// is asked for again (as a real CLI asked to go on does).
const ONE_PERMISSION: &str = r#"
description = "Asks to run one command, then is done."
model = "claude-sonnet-4-5"
session_cost_per_turn = 0.01

[[turns]]
status = "done"
summary = "Listed the files."

[[turns.steps]]
text = "Let me list the files."

[[turns.steps]]
tool = "Bash"
input = { command = "ls -la", description = "List the files" }
needs_permission = true
output = "total 0"
on_deny = "Not allowed; I will go without the listing."

[[turns.steps]]
text = "Listed."
"#;

/// A first turn that never ends; resumed, the session goes on with the second.
const SLOW_THEN_DONE: &str = r#"
description = "Starts a turn and goes silent; the next turn is done at once."
model = "claude-sonnet-4-5"
session_cost_per_turn = 0.01

[[turns]]

[[turns.steps]]
text = "Working on it…"

[[turns.steps]]
hang = true

[[turns]]
status = "done"
summary = "Carried on: {prompt}"

[[turns.steps]]
text = "Carrying on."
"#;

fn scenario_file(home: &Home, name: &str, text: &str) -> String {
    let path = home.path().join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn live_detail(view: &Value) -> String {
    view["live_state"]["detail"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn turns_of(view: &Value) -> usize {
    view["turns"].as_array().map_or(0, Vec::len)
}

#[test]
fn after_a_crash_every_run_is_back_where_it_was_and_only_the_turn_in_flight_needs_you() {
    // The runs share the work directory (it is not a git repository).
    let home = Home::with_config(
        "[limits]\nhibernate_after_secs = 1\n[workspaces]\nshared_conflict = \"allow\"\n",
    );
    let one_permission = scenario_file(&home, "one-permission", ONE_PERMISSION);
    let slow = scenario_file(&home, "slow-then-done", SLOW_THEN_DONE);
    let serve = home.serve();
    // Hibernated: its first turn done, its CLI shut down, its session kept.
    let asleep = home.dispatch("multi-turn", "Write the parser", &[]);
    home.wait_for(&asleep, "hibernated", |v| {
        live_detail(v) == "idle · hibernated" && v["pid"].is_null()
    });
    let asleep_session = home.show(&asleep)["provider_session_id"].clone();
    // Asking a question in its result, hibernated too.
    let question = home.dispatch("needs-input", "Deploy to staging", &[]);
    home.wait_for(&question, "hibernated", |v| {
        live_detail(v) == "idle · hibernated" && v["pid"].is_null()
    });
    // Waiting on a permission.
    let asking = home.dispatch(&one_permission, "List the files", &[]);
    let request = home.wait_for_pending(&asking, "Bash");
    // In a turn.
    let busy = home.dispatch(&slow, "Take your time", &[]);
    home.wait_for(&busy, "its turn to start", |v| {
        v["state"] == "running" && v["pid"].is_u64() && v["provider_session_id"].is_string()
    });
    // Held on a route card.
    let held = home.json(&[
        "dispatch",
        "--provider",
        "sim",
        "--model",
        "auto",
        "--scenario",
        "quick-success",
        "Fix the login bug",
    ]);
    assert_eq!(held["state"], "awaiting_route", "{held}");
    let held = str_at(&held, "run_id").to_string();

    serve.kill9();
    let serve = home.serve();

    // Back where they were, without a new turn.
    let view = home.show(&asleep);
    assert_eq!(view["state"], "idle", "{view}");
    assert_eq!(live_detail(&view), "idle · hibernated", "{view}");
    assert_eq!(view["provider_session_id"], asleep_session, "{view}");
    assert_eq!(turns_of(&view), 1, "{view}");
    let view = home.show(&question);
    assert_eq!(view["state"], "idle", "{view}");
    assert_eq!(view["needs_you"]["reason"], "input", "{view}");
    assert_eq!(turns_of(&view), 1, "{view}");
    let view = home.show(&asking);
    assert_eq!(view["state"], "awaiting_permission", "{view}");
    assert_eq!(
        view["pending"][0]["request_id"], request["request_id"],
        "{view}"
    );
    assert_eq!(view["pending"][0]["tool"], "Bash", "{view}");
    assert!(view["pid"].is_null(), "no CLI waits for the answer: {view}");
    let view = home.show(&held);
    assert_eq!(view["state"], "awaiting_route", "{view}");
    assert_eq!(view["route"]["status"], "open", "{view}");
    assert_eq!(
        home.json(&["routes"]).as_array().map(Vec::len),
        Some(1),
        "the card again"
    );
    // Only the turn in flight is interrupted; it needs the user, it has not finished.
    let view = home.show(&busy);
    assert_eq!(view["state"], "interrupted", "{view}");
    assert_eq!(view["needs_you"]["reason"], "interrupted", "{view}");
    assert!(view["finished_at"].is_null(), "{view}");
    let detail = live_detail(&view);
    assert!(
        detail.contains("interrupted by a restart of drover"),
        "{view}"
    );
    for run in [&asleep, &question, &asking, &busy, &held] {
        assert!(home.show(run)["pid"].is_null(), "{run} has no CLI yet");
    }
    let shown = common::stdout(&home.drover(&["show", &busy]));
    assert!(!shown.contains("resident_replaced"), "{shown}");

    // Each goes on after one command.
    home.json(&["follow-up", &asleep, "Take a str"]);
    let view = home.wait_for(&asleep, "its follow-up done", |v| {
        v["state"] == "idle" && turns_of(v) == 2
    });
    assert_eq!(view["provider_session_id"], asleep_session, "{view}");

    home.json(&["follow-up", &question, "staging-eu"]);
    let view = home.wait_for(&question, "the answer used", |v| {
        v["state"] == "idle" && turns_of(v) == 2
    });
    assert_eq!(view["last_result"]["status"], "done", "{view}");

    let request_id = str_at(&request, "request_id").to_string();
    home.json(&["respond", &asking, &request_id, "allow"]);
    let view = home.wait_for(&asking, "the allowed command run", |v| {
        v["state"] == "idle" && v["last_result"]["status"] == "done"
    });
    assert!(
        view["pending"].as_array().is_none_or(Vec::is_empty),
        "{view}"
    );
    let turns = view["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2, "{view}");
    let carried = turns[1]["prompt_preview"].as_str().unwrap_or_default();
    assert!(
        carried.contains("ls -la") && carried.contains("allowed"),
        "the resumed turn says what was asked and answered: {carried}"
    );
    // The command asked again by the resumed session was the one the user allowed.
    let decisions: Vec<(String, String)> = view["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                str_at(d, "who").to_string(),
                str_at(d, "decision").to_string(),
            )
        })
        .collect();
    assert_eq!(decisions.len(), 2, "{decisions:?}");
    assert!(
        decisions.iter().all(|(who, _)| who == "user"),
        "{decisions:?}"
    );

    home.json(&["resume", &busy]);
    let view = home.wait_for(&busy, "its resumed turn done", |v| {
        v["state"] == "idle" && v["last_result"]["status"] == "done"
    });
    let turns = view["turns"].as_array().unwrap();
    assert_eq!(turns.last().unwrap()["origin"], "resume", "{view}");
    assert!(
        turns.last().unwrap()["prompt_preview"]
            .as_str()
            .unwrap_or_default()
            .starts_with("drover was restarted during your last turn; continue it"),
        "{view}"
    );

    home.json(&["route", &held, "1"]);
    home.wait_idle(&held);
    serve.stop();
}

#[test]
fn resume_with_no_words_never_speaks_for_the_user() {
    let home = Home::with_config("[limits]\nhibernate_after_secs = 1\n");
    let _serve = home.serve();
    let run = home.dispatch("needs-input", "Deploy to staging", &[]);
    home.wait_for(&run, "hibernated", |v| {
        live_detail(v) == "idle · hibernated" && v["pid"].is_null()
    });
    let refusal = home.refused(&["resume", &run], "FOLLOW_UP_NEEDED");
    assert!(refusal.contains("follow-up"), "{refusal}");
    let view = home.show(&run);
    assert_eq!(turns_of(&view), 1, "nothing was sent: {view}");
    assert!(view["pid"].is_null(), "{view}");
    // Its words go as the next turn.
    home.json(&["resume", &run, "staging-eu"]);
    let view = home.wait_for(&run, "the answer used", |v| {
        v["state"] == "idle" && turns_of(v) == 2
    });
    assert_eq!(view["last_result"]["status"], "done", "{view}");
    assert!(
        view["last_result"]["summary"]
            .as_str()
            .unwrap_or_default()
            .contains("staging-eu"),
        "{view}"
    );
}
