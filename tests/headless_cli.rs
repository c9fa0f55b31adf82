//! The headless CLI end to end: the real `drover` binary, a real `drover serve` owner on a
//! real control socket, real `sim` children, and a private `DROVER_HOME` per test.
//!
//! Each test asserts what a user of the CLI sees: run and live states, results, money,
//! transcript lines, pending requests, refusals (`error[CODE]: sentence`, exit 1) and exit
//! codes. Nothing sleeps and hopes: runs are awaited with `drover wait`, and the few
//! conditions the CLI cannot wait for (a stall flag, a process group going away) are
//! polled with a bound (see `common`).
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::*;
use nix::sys::signal::Signal;
use serde_json::Value;
use std::time::Duration;

/// The window between a permission request's creation and its expiry (docs/ARCHITECTURE.md
/// §"Permission prompts").
const PERMISSION_WINDOW_MS: i64 = 600_000;
/// The same for a question.
const QUESTION_WINDOW_MS: i64 = 1_800_000;

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|v| v.as_str().expect("a string").to_string())
        .collect()
}

fn has_line(lines: &[String], prefix: &str) -> bool {
    lines.iter().any(|l| l.starts_with(prefix))
}

/// The pending request's shape (docs/ARCHITECTURE.md §"Permission prompts") and its expiry window.
fn assert_pending_shape(pending: &Value, kind: &str, tool: &str, window_ms: i64) {
    for key in [
        "request_id",
        "kind",
        "tool",
        "input",
        "created_at",
        "expires_at",
    ] {
        assert!(pending.get(key).is_some(), "{key} missing in {pending}");
    }
    assert!(!str_at(pending, "request_id").is_empty(), "{pending}");
    assert_eq!(pending["kind"], kind, "{pending}");
    assert_eq!(pending["tool"], tool, "{pending}");
    let created = pending["created_at"].as_i64().expect("created_at");
    let expires = pending["expires_at"].as_i64().expect("expires_at");
    assert_eq!(expires - created, window_ms, "{pending}");
}

/// The `permission_resolved` events of a run: (request id, who, decision).
fn resolutions(home: &Home, run: &str) -> Vec<(String, String, String)> {
    home.events(run)
        .iter()
        .filter(|e| e["kind"] == "permission_resolved")
        .map(|e| {
            let b = &e["body"];
            (
                str_at(b, "request_id").to_string(),
                str_at(b, "who").to_string(),
                str_at(b, "decision").to_string(),
            )
        })
        .collect()
}

/// The tools of a run's `permission_requested` events, in order.
fn requested_tools(home: &Home, run: &str) -> Vec<String> {
    home.events(run)
        .iter()
        .filter(|e| e["kind"] == "permission_requested")
        .map(|e| str_at(&e["body"], "tool").to_string())
        .collect()
}

// ---------------------------------------------------------------------------------------
// One scenario at a time
// ---------------------------------------------------------------------------------------

#[test]
fn quick_success_goes_idle_with_its_result_then_completes_on_request() {
    let home = Home::new();
    let _serve = home.serve();
    let answer = home.dispatch_json("quick-success", "Say hello", &[]);
    assert_eq!(answer["provider"], "sim", "{answer}");
    assert_eq!(answer["title"], "Say hello", "{answer}");
    let run = str_at(&answer, "run_id").to_string();

    let view = home.wait_idle(&run);
    assert_eq!(view["state"], "idle", "{view}");
    assert_eq!(view["completion_reason"], Value::Null, "{view}");
    assert_eq!(view["cwd"], home.work().display().to_string(), "{view}");
    assert_eq!(view["live_state"]["state"], "working", "{view}");
    assert_eq!(
        view["live_state"]["detail"], "idle: waiting for a follow-up",
        "{view}"
    );
    let result = &view["last_result"];
    assert_eq!(result["status"], "done", "{view}");
    assert_eq!(
        result["summary"], "Read the task and answered it directly; nothing needed changing.",
        "{view}"
    );
    assert!(same_usd(&view["cost_usd"], 0.01), "{view}");
    assert_eq!(view["cost_basis"], "reported", "{view}");
    let turns = view["turns"].as_array().expect("turns");
    assert_eq!(turns.len(), 1, "{view}");
    assert_eq!(turns[0]["origin"], "dispatch");
    assert!(same_usd(&turns[0]["cost_usd"], 0.01), "{view}");
    assert!(
        view["pid"].as_u64().is_some(),
        "a warm run has a child: {view}"
    );
    let tail = home.tail(&run);
    assert_eq!(tail.first().map(String::as_str), Some("ready"), "{tail:?}");
    assert_eq!(
        tail.last().map(String::as_str),
        Some("turn done (session $0.0100)"),
        "{tail:?}"
    );

    let completing = home.json(&["complete", &run]);
    assert_eq!(completing["run_id"], run.as_str(), "{completing}");
    let view = home.wait_terminal(&run);
    assert_eq!(view["state"], "completed", "{view}");
    assert_eq!(view["completion_reason"], "complete", "{view}");
    assert_eq!(view["live_state"]["state"], "ended", "{view}");
    assert_eq!(view["live_state"]["cause"], "completed", "{view}");
    assert_eq!(view["pid"], Value::Null, "{view}");
    assert!(view["finished_at"].as_i64().is_some(), "{view}");
    assert!(same_usd(&view["cost_usd"], 0.01), "{view}");

    let states = home.live_states(&run);
    assert_eq!(
        &states[..3],
        ["admitted", "preparing", "working"],
        "{states:?}"
    );
    assert_eq!(
        &states[states.len() - 2..],
        ["wrapping_up", "ended"],
        "{states:?}"
    );
    assert!(
        states[2..states.len() - 2].iter().all(|s| s == "working"),
        "{states:?}"
    );
    let row = home.row(&run);
    assert_eq!(row["state"], "completed", "{row}");
    assert!(same_usd(&row["cost_usd"], 0.01), "{row}");
}

#[test]
fn tool_permission_allow_then_deny_with_a_message() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("tool-permission", "Fix greeting", &[]);

    let view = home.wait_idle(&run);
    assert_eq!(view["state"], "awaiting_permission", "{view}");
    assert_eq!(view["policy"], "ask", "{view}");
    assert_eq!(
        view["live_state"]["detail"], "waiting for your answer: Bash",
        "{view}"
    );
    let pending = view["pending"].as_array().expect("pending");
    assert_eq!(pending.len(), 1, "{view}");
    let bash = pending[0].clone();
    assert_pending_shape(&bash, "permission", "Bash", PERMISSION_WINDOW_MS);
    assert_eq!(bash["input"]["command"], "ls -la", "{bash}");
    assert_eq!(home.row(&run)["pending"], 1);
    let bash_id = str_at(&bash, "request_id").to_string();

    let answer = home.json(&["respond", &run, &bash_id, "allow"]);
    assert_eq!(answer["run_id"], run.as_str(), "{answer}");
    let edit = home.wait_for_pending(&run, "Edit");
    assert_pending_shape(&edit, "permission", "Edit", PERMISSION_WINDOW_MS);
    assert_eq!(edit["input"]["file_path"], "src/main.rs", "{edit}");
    let edit_id = str_at(&edit, "request_id").to_string();
    assert_ne!(edit_id, bash_id);
    let tail = home.tail(&run);
    let asked = tail
        .iter()
        .position(|l| l == "asks permission for Bash: ls -la")
        .unwrap_or_else(|| panic!("{tail:?}"));
    assert!(
        tail[asked + 1].starts_with("tool done: total 16"),
        "the allowed command ran: {tail:?}"
    );

    // An answer lands on its request or nowhere.
    let again = home.refused(
        &["respond", &run, &bash_id, "allow"],
        "PERMISSION_ALREADY_RESOLVED",
    );
    assert!(again.contains(&bash_id), "{again}");
    let made_up = home.refused(
        &["respond", &run, "req-made-up", "allow"],
        "NO_PENDING_REQUEST",
    );
    assert!(made_up.contains("req-made-up"), "{made_up}");
    // A question's answer does not fit a permission request; the request stays pending.
    home.refused(
        &["respond", &run, &edit_id, "--answer", "x=y"],
        "INVALID_SPEC",
    );
    assert_eq!(
        home.show(&run)["pending"][0]["request_id"],
        edit_id.as_str()
    );

    home.json(&[
        "respond",
        &run,
        &edit_id,
        "deny",
        "--message",
        "not in this repo",
    ]);
    let view = home.wait_idle(&run);
    assert_eq!(
        view["state"], "idle",
        "the run went on after the denial: {view}"
    );
    assert_eq!(view["pending"], Value::Array(vec![]), "{view}");
    assert_eq!(view["last_result"]["status"], "done", "{view}");
    assert!(same_usd(&view["cost_usd"], 0.02), "{view}");
    let tail = home.tail(&run);
    assert!(
        tail.contains(&"tool failed: not in this repo".to_string()),
        "{tail:?}"
    );
    assert!(
        tail.contains(&"text: The edit was declined, so src/main.rs is unchanged.".to_string()),
        "{tail:?}"
    );
    assert_eq!(
        resolutions(&home, &run),
        [
            (bash_id, "user".to_string(), "allow".to_string()),
            (
                edit_id,
                "user".to_string(),
                "deny: not in this repo".to_string()
            ),
        ]
    );
}

#[test]
fn a_question_is_answered_by_key_and_the_answer_reaches_the_result() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("question", "Set up the cache", &[]);
    let view = home.wait_idle(&run);
    assert_eq!(view["state"], "awaiting_permission", "{view}");
    assert_eq!(
        view["live_state"]["detail"], "waiting for your answer to a question",
        "{view}"
    );
    let question = view["pending"][0].clone();
    assert_pending_shape(&question, "question", "AskUserQuestion", QUESTION_WINDOW_MS);
    assert_eq!(
        question["input"]["questions"][0]["question"], "Which database should the cache use?",
        "{question}"
    );
    let id = str_at(&question, "request_id");

    let answer = home.drover(&[
        "respond",
        &run,
        id,
        "--answer",
        "Which database should the cache use?=Postgres",
    ]);
    assert_eq!(answer.status.code(), Some(0), "{}", describe(&answer));
    assert_eq!(stdout(&answer), format!("answered request {id} of {run}\n"));

    let view = home.wait_idle(&run);
    assert_eq!(view["state"], "idle", "{view}");
    let result = &view["last_result"];
    assert_eq!(result["status"], "done", "{view}");
    assert_eq!(
        result["summary"], "Set the cache up on Postgres, as chosen.",
        "{view}"
    );
    assert_eq!(strings(&result["files"]), ["src/cache.rs"], "{view}");
    assert!(same_usd(&view["cost_usd"], 0.015), "{view}");
    let tail = home.tail(&run);
    assert!(
        tail.contains(&"text: Going with Postgres for the cache.".to_string()),
        "{tail:?}"
    );
    let decided = resolutions(&home, &run);
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(
        decided[0].2, "answer: Which database should the cache use?=Postgres",
        "{decided:?}"
    );
}

#[test]
fn needs_input_shows_the_question_and_a_follow_up_answers_it() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("needs-input", "Deploy to staging", &[]);
    let view = home.wait_idle(&run);
    assert_eq!(view["state"], "idle", "{view}");
    let result = &view["last_result"];
    assert_eq!(result["status"], "needs_input", "{view}");
    assert_eq!(
        result["question"], "Should I deploy to staging-eu or staging-us?",
        "{view}"
    );
    assert_eq!(
        view["live_state"]["detail"], "needs your input: answer with a follow-up",
        "{view}"
    );
    assert!(same_usd(&view["cost_usd"], 0.012), "{view}");
    let row = home.row(&run);
    assert_eq!(row["needs_input"], true, "{row}");

    home.json(&["follow-up", &run, "staging-eu"]);
    let view = home.wait_idle(&run);
    assert_eq!(view["last_result"]["status"], "done", "{view}");
    assert_eq!(
        view["last_result"]["summary"], "Deployed to the target named in the answer: staging-eu",
        "{view}"
    );
    assert_eq!(home.row(&run)["needs_input"], false);
}

#[test]
fn blocked_reports_status_blocked_with_its_follow_ups() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("blocked", "Run the tests", &[]);
    let view = home.wait_idle(&run);
    assert_eq!(view["state"], "idle", "{view}");
    let result = &view["last_result"];
    assert_eq!(result["status"], "blocked", "{view}");
    assert_eq!(
        result["summary"],
        "Cannot run the test suite: the package registry is unreachable from this machine.",
        "{view}"
    );
    assert_eq!(
        strings(&result["follow_ups"]),
        ["Give the machine network access to the registry, or vendor the dependencies."],
        "{view}"
    );
    assert!(
        notes_of(&view).contains(&"the run reports it is blocked".to_string()),
        "{view}"
    );
    // Still warm, it is offered an escalation now, and says why it needs you.
    assert_eq!(view["escalation"]["kind"], "escalate", "{view}");
    assert_eq!(view["needs_you"]["reason"], "escalation", "{view}");
    assert!(view["needs_you"]["since"].as_i64().is_some(), "{view}");
    assert!(has_line(
        &home.tail(&run),
        "tool failed: error: failed to download"
    ));
}

#[test]
fn a_follow_up_starts_turn_two_and_the_cost_grows() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("multi-turn", "Write a parser", &[]);
    let view = home.wait_idle(&run);
    assert!(same_usd(&view["cost_usd"], 0.01), "{view}");
    assert_eq!(
        view["last_result"]["summary"], "Wrote the first version of the parser.",
        "{view}"
    );

    let answer = home.json(&["follow-up", &run, "accept", "a", "&str"]);
    assert_eq!(answer["run_id"], run.as_str(), "{answer}");
    let view = home.wait_idle(&run);
    assert_eq!(view["state"], "idle", "{view}");
    let turns = view["turns"].as_array().expect("turns");
    assert_eq!(turns.len(), 2, "{view}");
    assert_eq!(turns[0]["origin"], "dispatch");
    assert_eq!(turns[1]["origin"], "follow_up");
    assert_eq!(turns[1]["number"], 2);
    assert_eq!(turns[1]["prompt_preview"], "accept a &str", "{view}");
    assert!(same_usd(&turns[1]["cost_usd"], 0.01), "{view}");
    assert!(same_usd(&view["cost_usd"], 0.02), "{view}");
    assert_eq!(
        view["last_result"]["summary"], "Handled the first follow-up: accept a &str",
        "{view}"
    );
    let starts: Vec<Value> = home
        .events(&run)
        .into_iter()
        .filter(|e| e["kind"] == "turn_started")
        .map(|e| e["body"]["origin"].clone())
        .collect();
    assert_eq!(starts, ["dispatch", "follow_up"]);
}

#[test]
fn max_turns_one_completes_after_the_turn_and_refuses_follow_ups() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("quick-success", "One turn only", &["--max-turns", "1"]);
    let view = home.wait_terminal(&run);
    assert_eq!(view["state"], "completed", "{view}");
    assert_eq!(view["completion_reason"], "max_turns", "{view}");
    assert_eq!(view["max_turns"], 1, "{view}");
    assert_eq!(view["live_state"]["state"], "ended", "{view}");
    assert_eq!(view["live_state"]["cause"], "completed", "{view}");
    assert_eq!(view["last_result"]["status"], "done", "{view}");
    let refusal = home.refused(&["follow-up", &run, "one more"], "RUN_NOT_ACTIVE");
    assert!(refusal.contains(&run), "{refusal}");
}

#[test]
fn a_follow_up_during_a_turn_is_queued_and_allow_always_covers_the_next_turn() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("tool-permission", "Fix greeting", &["--max-turns", "2"]);
    let bash = home.wait_for_pending(&run, "Bash");

    // Turn 1 is still running (it waits for an answer): the follow-up waits its turn.
    let queued = home.json(&["follow-up", &run, "and the README"]);
    assert_eq!(queued["state"], "awaiting_permission", "{queued}");
    let view = home.show(&run);
    assert_eq!(view["queued_follow_ups"], 1, "{view}");
    assert!(
        notes_of(&view).contains(&"follow-up queued until the current turn ends".to_string()),
        "{view}"
    );
    // One turn running plus one queued is every turn the run may take.
    let refusal = home.refused(&["follow-up", &run, "and the docs"], "MAX_TURNS");
    assert!(refusal.contains('2'), "{refusal}");

    home.json(&["respond", &run, str_at(&bash, "request_id"), "always"]);
    let edit = home.wait_for_pending(&run, "Edit");
    home.json(&["respond", &run, str_at(&edit, "request_id"), "always"]);

    // Turn 2 repeats the same tool uses: they run without asking, then max turns ends it.
    let view = home.wait_terminal(&run);
    assert_eq!(view["state"], "completed", "{view}");
    assert_eq!(view["completion_reason"], "max_turns", "{view}");
    let origins: Vec<&Value> = view["turns"]
        .as_array()
        .expect("turns")
        .iter()
        .map(|t| &t["origin"])
        .collect();
    assert_eq!(origins, ["dispatch", "follow_up"], "{view}");
    assert_eq!(view["turns"][1]["prompt_preview"], "and the README");
    assert!(same_usd(&view["cost_usd"], 0.04), "{view}");
    assert_eq!(
        requested_tools(&home, &run),
        ["Bash", "Edit"],
        "only turn 1 asked"
    );
    let decided: Vec<(String, String)> = resolutions(&home, &run)
        .into_iter()
        .map(|(_, who, how)| (who, how))
        .collect();
    let by_user = ("user".to_string(), "allow always".to_string());
    assert_eq!(decided, [by_user.clone(), by_user]);
    let tail = home.tail(&run);
    let turn_two = tail
        .iter()
        .position(|l| l == "turn done (session $0.0200)")
        .map(|i| &tail[i + 1..])
        .unwrap_or_else(|| panic!("{tail:?}"));
    let tools: Vec<&str> = turn_two
        .iter()
        .filter(|l| l.starts_with("tool ") || l.starts_with("asks "))
        .map(String::as_str)
        .collect();
    assert_eq!(
        tools,
        [
            "tool Bash: ls -la",
            "tool done: total 16 (+3 lines)",
            "tool Edit: src/main.rs",
            // The edit runs for real: turn 1 already made it, so the text it replaces is
            // gone and the tool says so.
            "tool failed: String to replace not found in file. (+1 line)",
        ],
        "{tail:?}"
    );
}

#[test]
fn no_result_block_gets_one_retry_turn() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("no-result-block", "Rename the helper", &[]);
    let view = home.wait_idle(&run);
    assert_eq!(view["state"], "idle", "{view}");
    let turns = view["turns"].as_array().expect("turns");
    assert_eq!(turns.len(), 2, "{view}");
    assert_eq!(turns[0]["origin"], "dispatch");
    assert_eq!(turns[0]["result"], Value::Null, "{view}");
    assert_eq!(turns[1]["origin"], "result_retry");
    let result = &view["last_result"];
    assert_eq!(result["status"], "done", "{view}");
    assert_eq!(
        result["summary"], "Renamed the helper and updated its two callers.",
        "{view}"
    );
    assert_eq!(
        strings(&result["files"]),
        ["src/util.rs", "src/main.rs"],
        "{view}"
    );
    assert!(
        notes_of(&view).contains(&"no ## Result block; asking once more for it".to_string()),
        "{view}"
    );
    assert!(same_usd(&view["cost_usd"], 0.02), "{view}");
}

#[test]
fn garbage_lines_are_noted_and_the_run_still_gets_its_result() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("garbage-lines", "Work through the noise", &[]);
    let view = home.wait_idle(&run);
    assert_eq!(view["state"], "idle", "{view}");
    assert_eq!(view["last_result"]["status"], "done", "{view}");
    assert_eq!(
        view["last_result"]["summary"], "Finished despite noise on the output stream.",
        "{view}"
    );
    let tail = home.tail(&run);
    for skipped in [
        "note: skipped a line that is not JSON: Debugger attached.",
        "note: skipped a JSON line that is not an object: [1, 2, 3]",
        "note: skipped a JSON line that is not an object: 42",
        "note: skipped a line that is not JSON: warning: something printed this to stdout",
    ] {
        assert!(tail.contains(&skipped.to_string()), "{skipped}: {tail:?}");
    }
    assert!(
        has_line(
            &tail,
            "note: skipped a line that is not JSON: {\"type\":\"assistant\""
        ),
        "the cut-off object: {tail:?}"
    );
}

#[test]
fn rate_limited_waits_for_the_provider_then_works() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("rate-limited", "Wait out the limit", &[]);
    let view = home.wait_idle(&run);
    assert_eq!(view["state"], "idle", "{view}");
    assert_eq!(view["last_result"]["status"], "done", "{view}");
    let states = home.live_states(&run);
    let at = states
        .iter()
        .position(|s| s == "waiting_provider")
        .unwrap_or_else(|| panic!("never waited for the provider: {states:?}"));
    assert_eq!(
        states.get(at + 1).map(String::as_str),
        Some("working"),
        "{states:?}"
    );
    let tail = home.tail(&run);
    assert!(has_line(&tail, "rate limited: "), "{tail:?}");
    assert!(tail.contains(&"rate limit cleared".to_string()), "{tail:?}");
}

#[test]
fn a_crash_mid_turn_fails_the_run_with_provider_error() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("crash-midturn", "Read the config", &[]);
    let view = home.wait_terminal(&run);
    assert_eq!(view["state"], "failed", "{view}");
    assert_eq!(view["completion_reason"], "provider_error", "{view}");
    assert_eq!(view["live_state"]["state"], "ended", "{view}");
    assert_eq!(view["live_state"]["cause"], "runner_gone", "{view}");
    assert_eq!(view["last_result"], Value::Null, "{view}");
    assert_eq!(view["pid"], Value::Null, "{view}");
    assert!(
        notes_of(&view).contains(
            &"the provider process ended unexpectedly (exit code 1); its last stderr line: \
              \"Error: simulated crash: the agent process died in the middle of a turn\""
                .to_string()
        ),
        "{view}"
    );
    let tail = home.tail(&run);
    assert_eq!(
        tail.last().map(String::as_str),
        Some(
            "process ended (exit code 1): Error: simulated crash: the agent process died in the middle of a turn"
        ),
        "{tail:?}"
    );
    home.live_states(&run);
    home.refused(&["follow-up", &run, "try again"], "RUN_NOT_ACTIVE");
}

#[test]
fn a_hung_run_is_flagged_stalled_and_stop_ends_its_process_group() {
    let home = Home::with_config("[limits]\nstalled_after_secs = 1\n");
    let _serve = home.serve();
    let run = home.dispatch("hang", "Look into it", &[]);
    let view = home.wait_for(&run, "the stall flag", |v| v["stalled"] == true);
    assert_eq!(view["state"], "running", "flagged, not killed: {view}");
    assert!(
        notes_of(&view).iter().any(|n| n.starts_with("stalled")),
        "{view}"
    );
    assert_eq!(home.row(&run)["stalled"], true);
    let pid = view["pid"].as_u64().expect("a running child has a pid") as u32;
    assert!(group_alive(pid), "the child's group is alive while it runs");

    let stopping = home.json(&["stop", &run]);
    assert_eq!(stopping["run_id"], run.as_str(), "{stopping}");
    let view = home.wait_terminal(&run);
    assert_eq!(view["state"], "stopped", "{view}");
    assert_eq!(view["completion_reason"], "user", "{view}");
    assert_eq!(view["live_state"]["state"], "ended", "{view}");
    assert_eq!(view["live_state"]["cause"], "stopped", "{view}");
    assert_eq!(view["pid"], Value::Null, "{view}");
    assert_group_gone(pid);
    home.refused(&["stop", &run], "RUN_NOT_ACTIVE");
}

#[test]
fn a_child_killed_mid_turn_fails_the_run_and_leaves_no_process() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("hang", "Look into it", &[]);
    let view = home.wait_for(&run, "the turn to start", |v| {
        v["turns"].as_array().is_some_and(|t| !t.is_empty()) && v["pid"].is_u64()
    });
    let pid = view["pid"].as_u64().expect("a running child has a pid") as u32;
    // Someone outside drover kills the agent (by its pid, which drover started).
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let view = home.wait_terminal(&run);
    assert_eq!(view["state"], "failed", "{view}");
    assert_eq!(view["completion_reason"], "provider_error", "{view}");
    assert_eq!(view["live_state"]["cause"], "runner_gone", "{view}");
    assert!(
        notes_of(&view)
            .iter()
            .any(|n| n.contains("ended unexpectedly")),
        "{view}"
    );
    assert_group_gone(pid);
}

#[test]
fn stop_while_a_permission_is_pending_ends_the_run_and_its_child() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("tool-permission", "Fix greeting", &[]);
    let bash = home.wait_for_pending(&run, "Bash");
    let pid = home.show(&run)["pid"].as_u64().expect("pid") as u32;

    let out = home.drover(&["stop", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(stdout(&out), format!("stopping {run}\n"));
    let view = home.wait_terminal(&run);
    assert_eq!(view["state"], "stopped", "{view}");
    assert_eq!(view["completion_reason"], "user", "{view}");
    assert_eq!(view["pending"], Value::Array(vec![]), "{view}");
    assert_eq!(view["live_state"]["cause"], "stopped", "{view}");
    assert_eq!(home.row(&run)["pending"], 0);
    assert_group_gone(pid);
    // The request went with the run.
    home.refused(
        &["respond", &run, str_at(&bash, "request_id"), "allow"],
        "RUN_NOT_ACTIVE",
    );
}

#[test]
fn an_unanswered_permission_is_denied_by_timeout_and_the_run_goes_on() {
    let home = Home::with_config("[limits]\npermission_timeout_secs = 1\n");
    let _serve = home.serve();
    let run = home.dispatch("tool-permission", "Fix greeting", &[]);
    // Each request lives 1 s, so the run is only awaited once both have timed out.
    let view = home.wait_for(&run, "both requests timing out", |v| v["state"] == "idle");
    assert_eq!(view["pending"], Value::Array(vec![]), "{view}");
    assert_eq!(view["last_result"]["status"], "done", "{view}");
    let asked: Vec<Value> = home
        .events(&run)
        .into_iter()
        .filter(|e| e["kind"] == "permission_requested")
        .map(|e| e["body"].clone())
        .collect();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_pending_shape(&asked[0], "permission", "Bash", 1_000);
    assert_pending_shape(&asked[1], "permission", "Edit", 1_000);
    let decided = resolutions(&home, &run);
    let ids: Vec<&str> = decided.iter().map(|(id, _, _)| id.as_str()).collect();
    let asked_ids: Vec<&str> = asked.iter().map(|a| str_at(a, "request_id")).collect();
    assert_eq!(ids, asked_ids, "each request was resolved, in order");
    for (_, who, how) in &decided {
        assert_eq!(who, "timeout", "{decided:?}");
        assert!(how.starts_with("deny"), "{decided:?}");
    }
    let tail = home.tail(&run);
    let failed = tail
        .iter()
        .filter(|l| l.starts_with("tool failed: "))
        .count();
    assert_eq!(failed, 2, "both tools failed: {tail:?}");
    assert!(
        tail.contains(
            &"text: Understood, I won't run commands. I'll go by the file names in the task instead."
                .to_string()
        ),
        "{tail:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Owners: restart, no owner, foreground dispatch
// ---------------------------------------------------------------------------------------

/// A sim scenario file whose first turn never ends and whose next one is done at once
/// (a session resumed after its first turn was cut goes on with the second).
fn slow_then_done(home: &Home) -> String {
    let path = home.path().join("slow-then-done.toml");
    std::fs::write(
        &path,
        r#"
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
"#,
    )
    .expect("the scenario file");
    path.display().to_string()
}

#[test]
fn a_run_in_flight_when_the_owner_dies_is_interrupted_on_the_next_start() {
    let home = Home::new();
    let serve = home.serve();
    let run = home.dispatch("hang", "Look into it", &[]);
    let view = home.wait_for(&run, "the turn to start", |v| {
        v["state"] == "running" && v["pid"].is_u64()
    });
    let pid = view["pid"].as_u64().expect("pid") as u32;

    serve.kill9();
    // The child does not outlive its owner.
    assert_group_gone(pid);
    // Nobody owns the directory: the ledger still says what it last knew.
    assert_eq!(home.show(&run)["state"], "running");
    home.refused(&["stop", &run], "NO_OWNER");
    home.refused(&["wait", &run, "--timeout", "1"], "NO_OWNER");

    let _serve = home.serve();
    let view = home.show(&run);
    assert_eq!(view["state"], "interrupted", "{view}");
    assert_eq!(view["needs_you"]["reason"], "interrupted", "{view}");
    assert_eq!(view["live_state"]["state"], "ended", "{view}");
    assert_eq!(view["live_state"]["cause"], "resident_replaced", "{view}");
    assert!(view["finished_at"].is_null(), "not finished: {view}");
    let events = home.events(&run); // checks seqs are 1..n
    assert_eq!(events.last().expect("events")["kind"], "run_state");
    assert_eq!(events.last().expect("events")["body"]["to"], "interrupted");
    assert_eq!(events.last().expect("events")["body"]["turn_cut"], true);
    assert_eq!(
        home.live_states(&run).last().map(String::as_str),
        Some("ended")
    );
    // It waits for the user, who may end it.
    home.json(&["stop", &run]);
    let view = home.wait_terminal(&run);
    assert_eq!(view["state"], "stopped", "{view}");
    home.refused(&["follow-up", &run, "go on"], "RUN_NOT_ACTIVE");
}

#[test]
fn an_interrupted_run_resumes_in_its_provider_session_with_the_turn_on_the_same_run() {
    let home = Home::new();
    let slow = slow_then_done(&home);
    let serve = home.serve();
    let run = home.dispatch(&slow, "Write a parser", &[]);
    let before = home.wait_for(&run, "its turn to start", |v| {
        v["state"] == "running" && v["pid"].is_u64() && v["provider_session_id"].is_string()
    });
    let session = before["provider_session_id"]
        .as_str()
        .expect("the sim reports its session")
        .to_string();
    let pid = before["pid"].as_u64().expect("pid") as u32;
    home.refused(&["resume", &run], "RUN_NOT_RESUMABLE"); // it is still running here
    serve.kill9();
    assert_group_gone(pid);

    let _serve = home.serve();
    assert_eq!(home.show(&run)["state"], "interrupted");
    let answer = home.json(&["resume", &run, "go on with the tests"]);
    assert_eq!(answer["run_id"], run.as_str(), "{answer}");
    let view = home.wait_idle(&run);
    // The same run, the same provider session, one more turn.
    assert_eq!(view["provider_session_id"], session.as_str(), "{view}");
    let turns = view["turns"].as_array().expect("turns");
    assert_eq!(turns.len(), 2, "{view}");
    assert_eq!(turns[1]["origin"], "resume", "{view}");
    assert_eq!(turns[1]["prompt_preview"], "go on with the tests", "{view}");
    assert!(view["finished_at"].is_null(), "the end is cleared: {view}");
    assert!(view["completion_reason"].is_null(), "{view}");
    let notes: Vec<String> = view["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .filter_map(|n| n["text"].as_str().map(str::to_string))
        .collect();
    assert!(
        notes.contains(&format!("resumed in provider session {session}")),
        "{notes:?}"
    );
    // The live state ended, then a new segment began: a reopened admitted (+) → preparing → working.
    let states = home.live_states(&run);
    let ended = states
        .iter()
        .position(|s| s == "ended")
        .expect("ended once");
    assert_eq!(
        states[ended + 1..].first().map(String::as_str),
        Some("+admitted"),
        "{states:?}"
    );
    assert!(
        states[ended + 1..].iter().any(|s| s == "working"),
        "{states:?}"
    );
    let events = home.events(&run); // seqs still contiguous across the restart
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "run_state" && e["body"]["reason"] == "resume"),
        "{events:?}"
    );
    // It goes on as any run does.
    home.json(&["complete", &run]);
    let done = home.wait_terminal(&run);
    assert_eq!(done["state"], "completed", "{done}");
    home.refused(&["resume", &run], "RUN_NOT_RESUMABLE");
    home.refused(&["resume", "r-nope"], "RUN_NOT_FOUND");
}

#[test]
fn a_run_a_shutdown_interrupted_in_a_turn_is_resumed_with_drovers_turn_saying_so() {
    let home = Home::new();
    let slow = slow_then_done(&home);
    let serve = home.serve();
    let run = home.dispatch(&slow, "Write a parser", &[]);
    home.wait_for(&run, "its turn to start", |v| {
        v["state"] == "running" && v["provider_session_id"].is_string()
    });
    assert_eq!(serve.stop().code(), Some(0));

    let serve = home.serve();
    let view = home.show(&run);
    assert_eq!(view["state"], "interrupted", "{view}");
    assert!(view["completion_reason"].is_null(), "not an end: {view}");
    assert!(view["escalation"].is_null(), "resumed, not retried: {view}");
    home.json(&["resume", &run]);
    let view = home.wait_idle(&run);
    // Without a prompt of its own, the resume turn says the restart cut the last turn.
    assert!(
        view["turns"][1]["prompt_preview"].as_str().is_some_and(
            |p| p.starts_with("drover was restarted during your last turn; continue it")
        ),
        "{view}"
    );
    home.json(&["complete", &run]);
    home.wait_terminal(&run);
    assert_eq!(serve.stop().code(), Some(0));
    // Read back from the ledger alone: completed, two turns, no stale offer.
    let view = home.show(&run);
    assert_eq!(view["state"], "completed", "{view}");
    assert_eq!(view["turns"].as_array().map(Vec::len), Some(2), "{view}");
    assert!(view["escalation"].is_null(), "{view}");
}

#[test]
fn read_only_commands_answer_from_the_ledger_without_an_owner() {
    let home = Home::new();
    let serve = home.serve();
    let done = home.dispatch("multi-turn", "Write a parser", &[]);
    home.wait_idle(&done);
    home.json(&["follow-up", &done, "add tests"]);
    home.wait_idle(&done);
    home.json(&["complete", &done]);
    home.wait_terminal(&done);
    let asking = home.dispatch("tool-permission", "Fix greeting", &[]);
    let request = home.wait_for_pending(&asking, "Bash");

    let live_view = home.show(&done);
    let live_tail = home.tail(&done);
    let live_result = home.json(&["transcript", &done, "--format", "result"]);
    let status = serve.stop();
    assert_eq!(status.code(), Some(0), "serve exits 0 on SIGTERM");
    assert!(!home.socket().exists(), "the socket file is removed");
    let before = files_under(home.path());

    // The same answers, from the ledger.
    assert_eq!(home.show(&done), live_view);
    assert_eq!(home.tail(&done), live_tail);
    assert_eq!(
        home.json(&["transcript", &done, "--format", "result"]),
        live_result
    );
    let text = home.json(&["transcript", &done, "--format", "text"]);
    let lines = strings(&text["lines"]);
    assert!(
        lines.contains(&"## turn 1 (dispatch)".to_string()),
        "{lines:?}"
    );
    assert!(
        lines.contains(&"## turn 2 (follow_up)".to_string()),
        "{lines:?}"
    );
    let runs = home.runs();
    let ids: Vec<&Value> = runs.iter().map(|r| &r["run_id"]).collect();
    assert_eq!(ids, [&asking, &done], "newest first");
    // The run that waited on its request when the owner stopped waits for the next one.
    let view = home.show(&asking);
    assert_eq!(view["state"], "awaiting_permission", "{view}");
    assert!(view["completion_reason"].is_null(), "{view}");
    let waited = home.waited(&[&done, &asking, "--until", "needs-you"]);
    assert_eq!(waited["timed_out"], false, "{waited}");
    let queued = home.json(&["runs", "--state", "queued"]);
    assert_eq!(queued, Value::Array(vec![]));
    home.refused(&["show", "r-nope"], "RUN_NOT_FOUND");

    // Reading wrote nothing: no file was made, removed or changed. (SQLite's wal-index,
    // `-shm`, is the exception: every reader of a WAL database marks its reads there.)
    let unshm = |files: Vec<(std::path::PathBuf, u64, std::time::SystemTime)>| {
        files
            .into_iter()
            .map(|(path, len, at)| {
                let shm = path.to_string_lossy().ends_with("-shm");
                (path, len, (!shm).then_some(at))
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(unshm(files_under(home.path())), unshm(before));

    // Whatever changes runs needs an owner.
    let id = str_at(&request, "request_id");
    for args in [
        vec!["stop", &asking],
        vec!["follow-up", &done, "more"],
        vec!["respond", &asking, id, "allow"],
        vec!["complete", &done],
        vec!["remove", &done],
        vec!["kill-all"],
    ] {
        let line = home.refused(&args, "NO_OWNER");
        assert!(line.contains("drover serve"), "{line}");
    }
}

#[test]
fn a_foreground_dispatch_owns_the_home_until_another_terminal_completes_its_run() {
    let home = Home::new();
    let fg = Foreground::start(
        &home,
        &[
            "dispatch",
            "--provider",
            "sim",
            "--scenario",
            "quick-success",
            "--json",
            "Say hello",
        ],
    );
    let first: Value =
        serde_json::from_str(&fg.next_line(Duration::from_secs(RUN_LIMIT_SECS))).expect("JSON");
    let run = str_at(&first, "run_id").to_string();
    // Other terminals reach the foreground owner through the socket.
    let view = home.wait_idle(&run);
    assert_eq!(view["state"], "idle", "{view}");
    home.refused(&["serve"], "OWNER_RUNNING");
    home.json(&["complete", &run]);

    let (status, lines, stderr) = fg.finish(Duration::from_secs(RUN_LIMIT_SECS));
    assert_eq!(status.code(), Some(0), "stderr: {stderr}");
    let events: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect();
    for e in &events {
        assert!(e["event"].is_string(), "one event per line: {e}");
    }
    let last = events.last().expect("events were printed");
    assert_eq!(last["event"], "run_changed", "{last}");
    assert_eq!(last["run"]["state"], "completed", "{last}");
    assert_eq!(last["run"]["completion_reason"], "complete", "{last}");
    let live: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "live_state")
        .map(|e| &e["live_state"]["state"])
        .collect();
    assert_eq!(live.first(), Some(&&Value::from("admitted")), "{live:?}");
    assert_eq!(live.last(), Some(&&Value::from("ended")), "{live:?}");
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "transcript" && e["line"] == "turn done (session $0.0100)"),
        "{lines:?}"
    );
    // It gave the home up when it ended.
    assert!(!home.socket().exists());
    assert_eq!(home.show(&run)["state"], "completed");
}

#[test]
fn a_foreground_dispatch_ends_when_its_run_times_out_idle() {
    // The idle timeout's floor is lowered so the run ends within the test.
    let home = Home::with_config("[limits]\nidle_timeout_secs_min = 1\n");
    let fg = Foreground::start(
        &home,
        &[
            "dispatch",
            "--provider",
            "sim",
            "--scenario",
            "quick-success",
            "--idle-timeout",
            "1",
            "Say hello",
        ],
    );
    let run = fg.next_line(Duration::from_secs(RUN_LIMIT_SECS));
    let (status, lines, stderr) = fg.finish(Duration::from_secs(RUN_LIMIT_SECS));
    assert_eq!(status.code(), Some(0), "stderr: {stderr}");
    assert!(
        stderr.contains(&format!("this terminal owns {}", home.path().display())),
        "{stderr}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("live      ended (completed)")),
        "{lines:?}"
    );
    assert_eq!(
        lines
            .last()
            .map(|l| l.starts_with("state     completed (idle_timeout)")),
        Some(true),
        "{lines:?}"
    );
    let view = home.show(&run);
    assert_eq!(view["state"], "completed", "{view}");
    assert_eq!(view["completion_reason"], "idle_timeout", "{view}");
}

#[test]
fn ctrl_c_on_a_foreground_dispatch_interrupts_its_run_and_exits_130() {
    let home = Home::new();
    let mut fg = Foreground::start(
        &home,
        &[
            "dispatch",
            "--provider",
            "sim",
            "--scenario",
            "hang",
            "--json",
            "Look into it",
        ],
    );
    let first: Value =
        serde_json::from_str(&fg.next_line(Duration::from_secs(RUN_LIMIT_SECS))).expect("JSON");
    let run = str_at(&first, "run_id").to_string();
    let view = home.wait_for(&run, "the turn to start", |v| {
        v["state"] == "running" && v["pid"].is_u64()
    });
    let pid = view["pid"].as_u64().expect("pid") as u32;

    fg.signal(Signal::SIGINT);
    let (status, _, stderr) = fg.finish(Duration::from_secs(RUN_LIMIT_SECS));
    assert_eq!(status.code(), Some(130), "stderr: {stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    let (code, message) = refusal_of(last).unwrap_or_default();
    assert_eq!(code, "INTERRUPTED", "{stderr}");
    assert!(message.starts_with("SIGINT"), "{stderr}");
    assert!(message.contains(&run), "{stderr}");
    assert_group_gone(pid);
    let view = home.show(&run);
    assert_eq!(view["state"], "interrupted", "{view}");
    assert!(view["completion_reason"].is_null(), "not an end: {view}");
    assert_eq!(view["live_state"]["state"], "ended", "{view}");
}

#[test]
fn a_refused_foreground_dispatch_exits_1_and_leaves_nothing_behind() {
    let home = Home::new();
    let out = home.drover(&["dispatch", "--provider", "nope", "--json", "x"]);
    assert_refused(&out, "INVALID_PROVIDER", "dispatch --provider nope");
    assert_eq!(home.runs(), Vec::<Value>::new());
    assert!(!home.socket().exists());
    // The home is free again.
    let _serve = home.serve();
}

#[test]
fn dispatch_wait_prints_the_run_then_the_runs_once_it_ended() {
    let home = Home::new();
    let _serve = home.serve();
    let out = home.drover(&[
        "dispatch",
        "--provider",
        "sim",
        "--scenario",
        "crash-midturn",
        "--wait",
        "--json",
        "Read the config",
    ]);
    // The run failed: exit 4 (a script can tell it from one that went well).
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    let text = stdout(&out);
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    let run = str_at(&lines[0], "run_id");
    assert_eq!(lines[1]["timed_out"], false, "{text}");
    assert_eq!(lines[1]["runs"][0]["run_id"], run, "{text}");
    assert_eq!(lines[1]["runs"][0]["state"], "failed", "{text}");
}

// ---------------------------------------------------------------------------------------
// Refusals and exit codes
// ---------------------------------------------------------------------------------------

#[test]
fn refused_dispatches_say_why_and_create_nothing() {
    let home = Home::new();
    let _serve = home.serve();
    let sim = |extra: &[&str], task: &str| -> Vec<String> {
        let mut args: Vec<String> = [
            "dispatch",
            "--provider",
            "sim",
            "--scenario",
            "quick-success",
        ]
        .map(String::from)
        .to_vec();
        args.extend(extra.iter().map(|s| s.to_string()));
        args.push(task.to_string());
        args
    };
    let too_long = "a".repeat(20_001);
    let cases: Vec<(Vec<String>, &str, &str)> = vec![
        (
            vec![
                "dispatch".into(),
                "--provider".into(),
                "nope".into(),
                "x".into(),
            ],
            "INVALID_PROVIDER",
            "\"nope\"",
        ),
        (sim(&[], ""), "TASK_REQUIRED", "empty"),
        (sim(&[], "   "), "TASK_REQUIRED", "empty"),
        (sim(&[], &too_long), "TASK_TOO_LONG", "20001"),
        (
            sim(&["--cwd", "/nonexistent/drover-test"], "x"),
            "CWD_INVALID",
            "/nonexistent/drover-test",
        ),
        (
            sim(&["--policy", "sometimes"], "x"),
            "PERMISSION_POLICY_UNSUPPORTED",
            "sometimes",
        ),
        (sim(&["--capability", "root"], "x"), "INVALID_SPEC", "root"),
        (
            sim(&["--effort", "extreme"], "x"),
            "INVALID_SPEC",
            "extreme",
        ),
    ];
    for (args, code, mentions) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        for json in [false, true] {
            let mut args = args.clone();
            if json {
                args.push("--json");
            }
            let line = home.refused(&args, code);
            assert!(line.contains(mentions), "{line}");
        }
    }
    assert_eq!(home.runs(), Vec::<Value>::new(), "nothing was created");

    // The limit itself is accepted.
    let run = home.dispatch("quick-success", &"a".repeat(20_000), &[]);
    assert_eq!(home.wait_idle(&run)["state"], "idle");
}

#[test]
fn commands_on_unknown_or_finished_runs_are_refused() {
    let home = Home::new();
    let _serve = home.serve();
    for args in [
        vec!["show", "r-nope"],
        vec!["transcript", "r-nope"],
        vec!["stop", "r-nope"],
        vec!["complete", "r-nope"],
        vec!["follow-up", "r-nope", "hi"],
        vec!["respond", "r-nope", "q1", "allow"],
        vec!["wait", "r-nope", "--timeout", "1"],
        vec!["remove", "r-nope"],
    ] {
        let line = home.refused(&args, "RUN_NOT_FOUND");
        assert!(line.contains("r-nope"), "{line}");
    }

    let run = home.dispatch("quick-success", "Say hello", &[]);
    home.wait_idle(&run);
    home.refused(&["follow-up", &run, "   "], "TASK_REQUIRED");
    home.refused(&["follow-up", &run, &"a".repeat(20_001)], "TASK_TOO_LONG");
    home.refused(&["remove", &run], "RUN_NOT_ACTIVE");
    home.json(&["stop", &run]);
    home.wait_terminal(&run);
    for args in [
        vec!["stop", &run],
        vec!["complete", &run],
        vec!["follow-up", &run, "hi"],
        vec!["respond", &run, "q1", "allow"],
    ] {
        let line = home.refused(&args, "RUN_NOT_ACTIVE");
        assert!(line.contains(&run), "{line}");
    }
}

/// The commands a refusal suggests (`` `drover …` `` in its sentence), with RUN for the run.
fn suggested(line: &str, run: &str) -> Vec<String> {
    line.split('`')
        .skip(1)
        .step_by(2)
        .filter(|c| c.starts_with("drover "))
        .map(|c| c.replace(run, "RUN"))
        .collect()
}

#[test]
fn a_removed_run_is_refused_with_advice_that_works() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("quick-success", "Say hello", &[]);
    home.wait_idle(&run);
    home.json(&["complete", &run]);
    home.wait_terminal(&run);
    home.json(&["remove", &run]);
    for args in [
        vec!["follow-up", &run, "more"],
        vec!["retry", &run],
        vec!["escalate", &run],
    ] {
        let line = home.refused(&args, "RUN_NOT_ACTIVE");
        assert!(line.contains("removed from the trays"), "{line}");
        let suggested = suggested(&line, &run);
        assert!(!suggested.is_empty(), "{line}");
        for command in suggested {
            assert!(
                !command.contains("retry") && !command.contains("escalate"),
                "{args:?} suggests {command}, which this run does not take: {line}"
            );
        }
        // What it suggests works.
        assert_eq!(home.show(&run)["state"], "completed");
    }
}

#[test]
fn numbers_out_of_range_are_clamped_with_a_note_not_refused() {
    let home = Home::new();
    let _serve = home.serve();
    let view = home.show(&home.dispatch(
        "quick-success",
        "Clamp me",
        &[
            "--max-turns",
            "99",
            "--budget",
            "100",
            "--max-minutes",
            "0",
            "--idle-timeout",
            "5",
        ],
    ));
    assert_eq!(view["max_turns"], 20, "{view}");
    assert!(same_usd(&view["budget_usd"], 25.0), "{view}");
    let notes = notes_of(&view);
    for note in [
        "clamped: max_turns: asked for 99, using 20",
        "clamped: budget_usd: asked for 100, using 25.00",
        "clamped: max_minutes: asked for 0, using 1",
        "clamped: idle_timeout_secs: asked for 5, using 30",
    ] {
        assert!(notes.contains(&note.to_string()), "{note}: {notes:?}");
    }
}

#[test]
fn a_second_owner_is_refused_with_owner_running() {
    let home = Home::new();
    let serve = home.serve();
    let line = home.refused(&["serve"], "OWNER_RUNNING");
    assert!(line.contains(&format!("pid {}", serve.pid())), "{line}");
    let line = home.refused(&["serve", "--json"], "OWNER_RUNNING");
    assert!(line.contains(&home.path().display().to_string()), "{line}");
    // The first owner is unharmed.
    assert_eq!(home.runs(), Vec::<Value>::new());
    assert_eq!(serve.stop().code(), Some(0));
}

/// The owner's runtime keeps at most two worker threads, whatever the machine's cores or
/// `TOKIO_WORKER_THREADS` say: each worker costs a stack and a malloc arena
/// (docs/ARCHITECTURE.md §"Memory"). With no cap, tokio takes the variable's 16.
#[test]
fn the_owner_keeps_two_worker_threads_whatever_the_machine() {
    let home = Home::new();
    let serve = home.serve_with_env(&[("TOKIO_WORKER_THREADS", "16")]);
    let names: Vec<String> = std::fs::read_dir(format!("/proc/{}/task", serve.pid()))
        .expect("the owner's threads")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_string())
        .collect();
    // Workers and blocking threads share tokio's name (`tokio-rt-worker`); at rest the
    // owner has two workers and at most a few blocking threads.
    let tokio = names.iter().filter(|n| n.starts_with("tokio-r")).count();
    assert!(
        (1..=6).contains(&tokio),
        "{tokio} tokio threads in the owner: {names:?}"
    );
    assert_eq!(serve.stop().code(), Some(0));
}

#[test]
fn wait_that_times_out_prints_the_runs_and_exits_3() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("quick-success", "Say hello", &[]);
    home.wait_idle(&run);
    let out = home.drover(&["wait", &run, "--timeout", "1", "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    let outcome = one_json_line(&out, "wait --timeout 1");
    assert_eq!(outcome["timed_out"], true, "{outcome}");
    assert_eq!(outcome["runs"][0]["run_id"], run.as_str(), "{outcome}");
    assert_eq!(outcome["runs"][0]["state"], "idle", "{outcome}");
    let err = stderr(&out);
    let (code, message) = refusal_of(&err).unwrap_or_default();
    assert_eq!(code, "WAIT_TIMEOUT", "{err}");
    assert!(
        message.starts_with("the runs were not finished within 1 s"),
        "{err}"
    );
    // Human output too: the table, then the refusal.
    let out = home.drover(&["wait", &run, "--timeout", "1"]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    assert!(stdout(&out).starts_with("RUN "), "{}", describe(&out));
    assert!(stderr(&out).starts_with("error[WAIT_TIMEOUT]: "));
}

#[test]
fn usage_mistakes_exit_2() {
    let home = Home::new();
    for args in [
        vec!["respond", "r1", "q1", "maybe"],
        vec!["respond", "r1", "q1", "allow", "--message", "why"],
        vec!["runs", "--state", "sleeping"],
        vec!["wait", "r1", "--until", "soon"],
        vec!["dispatch"],
    ] {
        let out = home.drover(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", describe(&out));
        assert!(
            stderr(&out).contains("error"),
            "{args:?}: {}",
            describe(&out)
        );
    }
}

// ---------------------------------------------------------------------------------------
// Rails, idempotency, kill-all and remove, human output
// ---------------------------------------------------------------------------------------

/// One sim slot, and idle runs kept warm (no hibernation): an idle run holds its slot.
const WARM_IDLE_SIM_RAIL_OF_1: &str =
    "[limits]\nhibernate_after_secs = 0\n[limits.per_provider]\nsim = 1\n";

#[test]
fn a_full_rail_queues_the_next_run_until_the_first_completes() {
    // Idle runs stay warm here (no hibernation), so the idle first run keeps its slot.
    let home = Home::with_config(WARM_IDLE_SIM_RAIL_OF_1);
    let _serve = home.serve();
    let first = home.dispatch("quick-success", "First", &[]);
    home.wait_idle(&first);
    let second = home.dispatch_json("quick-success", "Second", &[]);
    assert_eq!(second["state"], "queued", "{second}");
    assert_eq!(second["live_state"]["state"], "admitted", "{second}");
    let second = str_at(&second, "run_id").to_string();
    let notes = home.notes(&second);
    assert!(
        notes.contains(&"queued: sim already runs 1 run (its limit)".to_string()),
        "{notes:?}"
    );
    let queued = array(home.json(&["runs", "--state", "queued"]));
    assert_eq!(queued.len(), 1, "{queued:?}");
    assert_eq!(queued[0]["run_id"], second.as_str());

    home.json(&["complete", &first]);
    let view = home.wait_idle(&second);
    assert_eq!(view["state"], "idle", "{view}");
    assert_eq!(view["last_result"]["status"], "done", "{view}");
    assert_eq!(home.show(&first)["state"], "completed");
}

#[test]
fn a_full_rail_refuses_with_no_queue_and_a_full_queue_refuses() {
    let home = Home::with_config(
        "[limits]\nqueued_per_session = 1\nhibernate_after_secs = 0\n[limits.per_provider]\nsim = 1\n",
    );
    let _serve = home.serve();
    let first = home.dispatch("quick-success", "First", &[]);
    home.wait_idle(&first);
    let line = home.refused(
        &[
            "dispatch",
            "--provider",
            "sim",
            "--no-queue",
            "--json",
            "Second",
        ],
        "MAX_CONCURRENT",
    );
    assert!(line.contains("--no-queue"), "{line}");
    assert_eq!(home.runs().len(), 1);

    let queued = home.dispatch_json("quick-success", "Second", &[]);
    assert_eq!(queued["state"], "queued", "{queued}");
    let line = home.refused(
        &["dispatch", "--provider", "sim", "--json", "Third"],
        "QUEUE_FULL",
    );
    assert!(line.contains("queued"), "{line}");
    assert_eq!(home.runs().len(), 2);
}

#[test]
fn an_idempotency_key_returns_the_same_run() {
    let home = Home::new();
    let serve = home.serve();
    let key = ["--idempotency-key", "ticket-42"];
    let run = home.dispatch("quick-success", "Say hello", &key);
    let again = home.dispatch("quick-success", "Say hello again", &key);
    assert_eq!(again, run);
    assert_eq!(home.runs().len(), 1);
    home.wait_idle(&run);
    home.json(&["complete", &run]);
    home.wait_terminal(&run);
    assert_eq!(serve.stop().code(), Some(0));

    // From the ledger, after a restart …
    let serve = home.serve();
    let again = home.dispatch_json("quick-success", "Say hello", &key);
    assert_eq!(again["run_id"], run.as_str(), "{again}");
    assert_eq!(again["state"], "completed", "{again}");
    assert_eq!(serve.stop().code(), Some(0));
    // … and in the foreground, which returns at once since the run already ended.
    let out = home.drover(&[
        "dispatch",
        "--provider",
        "sim",
        "--idempotency-key",
        "ticket-42",
        "--json",
        "Say hello",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(one_json_line(&out, "dispatch")["run_id"], run.as_str());
    assert_eq!(home.runs().len(), 1);
}

#[test]
fn a_workflow_scopes_runs_wait_and_kill_all_and_a_sub_run_joins_its_parents() {
    let home = Home::new();
    let _serve = home.serve();
    let a = home.dispatch("quick-success", "A", &["--workflow", "wf-1"]);
    let b = home.dispatch("quick-success", "B", &["--workflow", "wf-1"]);
    let other = home.dispatch("quick-success", "C", &[]);
    // A sub-run of `other`: one deeper, in the parent's workflow (its id).
    let sub = home.dispatch_json("quick-success", "D", &["--parent", &other]);
    assert_eq!(sub["parent_run"], other.as_str(), "{sub}");
    assert_eq!(sub["depth"], 1, "{sub}");
    assert_eq!(sub["workflow_id"], other.as_str(), "{sub}");
    let sub = str_at(&sub, "run_id").to_string();

    let listed = |workflow: &str| -> Vec<String> {
        let mut ids: Vec<String> = array(home.json(&["runs", "--workflow", workflow]))
            .iter()
            .map(|r| str_at(r, "run_id").to_string())
            .collect();
        ids.sort();
        ids
    };
    let mut wf = vec![a.clone(), b.clone()];
    wf.sort();
    assert_eq!(listed("wf-1"), wf);
    assert_eq!(listed(&other), std::slice::from_ref(&sub));
    assert!(listed("wf-none").is_empty());

    let outcome = home.waited(&["--workflow", "wf-1", "--until", "idle", "--timeout", "30"]);
    assert_eq!(outcome["timed_out"], false, "{outcome}");
    let mut waited: Vec<String> = array(outcome["runs"].clone())
        .iter()
        .map(|r| str_at(r, "run_id").to_string())
        .collect();
    waited.sort();
    assert_eq!(waited, wf);
    home.refused(&["wait", "--workflow", "wf-none"], "WORKFLOW_NOT_FOUND");

    let stopped = home.json(&["kill-all", "--workflow", "wf-1"]);
    let mut ids = strings(&stopped["stopped"]);
    ids.sort();
    assert_eq!(ids, wf, "{stopped}");
    assert!(home.row(&other)["state"] != "stopped");
    assert!(home.row(&sub)["state"] != "stopped");
    home.json(&["kill-all"]);
}

#[test]
fn kill_all_stops_every_active_run_and_remove_hides_finished_ones() {
    let home = Home::new();
    let _serve = home.serve();
    let a = home.dispatch("quick-success", "A", &[]);
    let b = home.dispatch("tool-permission", "B", &[]);
    home.wait_idle(&a);
    home.wait_idle(&b);
    let stopped = home.json(&["kill-all"]);
    let mut ids = strings(&stopped["stopped"]);
    ids.sort();
    let mut expected = vec![a.clone(), b.clone()];
    expected.sort();
    assert_eq!(ids, expected, "{stopped}");
    let outcome = home.waited(&[&a, &b, "--timeout", "30"]);
    assert_eq!(outcome["timed_out"], false, "{outcome}");
    for row in array(outcome["runs"].clone()) {
        assert_eq!(row["state"], "stopped", "{row}");
        assert_eq!(row["completion_reason"], "user", "{row}");
    }

    let removed = home.json(&["remove", &a]);
    assert_eq!(strings(&removed["removed"]), [a.as_str()]);
    let listed: Vec<Value> = home.runs().iter().map(|r| r["run_id"].clone()).collect();
    assert_eq!(listed, [b.as_str()]);
    assert_eq!(array(home.json(&["runs", "--all"])).len(), 2);
    assert_eq!(
        home.show(&a)["state"],
        "stopped",
        "a removed run can still be shown"
    );
    let removed = home.json(&["remove", "--finished"]);
    assert_eq!(strings(&removed["removed"]), [b.as_str()]);
    assert_eq!(home.runs(), Vec::<Value>::new());
}

#[test]
fn human_output_is_short_lines_about_the_run() {
    let home = Home::new();
    let _serve = home.serve();
    let out = home.drover(&[
        "dispatch",
        "--provider",
        "sim",
        "--scenario",
        "tool-permission",
        "Fix",
        "the",
        "greeting",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let run = stdout(&out).trim_end().to_string();
    assert!(
        !run.contains(char::is_whitespace),
        "just the run id: {run:?}"
    );
    let pending = home.wait_for_pending(&run, "Bash");
    let id = str_at(&pending, "request_id");

    let runs = stdout(&home.drover(&["runs"]));
    let lines: Vec<&str> = runs.lines().collect();
    assert!(lines[0].starts_with("RUN "), "{runs}");
    assert!(lines[1].starts_with(&run), "{runs}");
    assert!(
        lines[1].contains("awaiting_permission · 1 pending"),
        "{runs}"
    );
    assert!(lines[1].ends_with("Fix the greeting"), "{runs}");

    let show = stdout(&home.drover(&["show", &run]));
    assert!(show.contains("state      awaiting_permission\n"), "{show}");
    assert!(show.contains("workspace  shared "), "{show}");
    assert!(
        show.contains(&format!(
            "pending    {id} permission for Bash: drover respond {run} {id} allow|always|deny\n"
        )),
        "{show}"
    );

    let out = home.drover(&["respond", &run, id, "deny"]);
    assert_eq!(stdout(&out), format!("denied request {id} of {run}\n"));
    let edit = home.wait_for_pending(&run, "Edit");
    let out = home.drover(&["respond", &run, str_at(&edit, "request_id"), "allow"]);
    assert_eq!(
        stdout(&out),
        format!("allowed request {} of {run}\n", str_at(&edit, "request_id"))
    );
    home.wait_idle(&run);
    let show = stdout(&home.drover(&["show", &run]));
    assert!(
        show.contains(
            "result     done: Looked at the project and updated the greeting in src/main.rs.\n"
        ),
        "{show}"
    );
    assert!(
        show.contains("spent      $0.02 of $5.00 (reported)\n"),
        "{show}"
    );
    let out = home.drover(&["transcript", &run]);
    assert!(
        stdout(&out).contains("\ntool failed: "),
        "{}",
        describe(&out)
    );
    let out = home.drover(&["complete", &run]);
    assert_eq!(stdout(&out), format!("completing {run}\n"));
}

// ---------------------------------------------------------------------------------------
// Defects found while writing these tests (they fail until fixed)
// ---------------------------------------------------------------------------------------

/// Stopping a run drains its pending requests (docs/ARCHITECTURE.md §"Permission prompts":
/// "Stopping the run denies what is pending"): the decision is written and subscribers hear
/// `permission_resolved`, but the run's own event stream never records it, so `transcript
/// --format events` (and any fold of the stream) shows a request that was asked and never
/// answered.
#[test]
fn a_request_denied_by_a_stop_is_resolved_in_the_runs_event_stream() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("tool-permission", "Fix greeting", &[]);
    let bash = home.wait_for_pending(&run, "Bash");
    home.json(&["stop", &run]);
    home.wait_terminal(&run);
    let decided = resolutions(&home, &run);
    assert_eq!(
        decided.len(),
        1,
        "the drained request {} has no permission_resolved event: {decided:?}",
        str_at(&bash, "request_id")
    );
    assert_eq!(decided[0].0, str_at(&bash, "request_id"));
    assert!(decided[0].2.starts_with("deny"), "{decided:?}");
}

/// Stopping a stalled run ends it `stopped` with its stall note; the child's exit, which
/// the stop caused, is not taken for a sign of life (no "the provider is active again").
#[test]
fn stopping_a_stalled_run_does_not_note_the_provider_active_again() {
    let home = Home::with_config("[limits]\nstalled_after_secs = 1\n");
    let _serve = home.serve();
    let run = home.dispatch("hang", "Look into it", &[]);
    home.wait_for(&run, "the stall flag", |v| v["stalled"] == true);
    home.json(&["stop", &run]);
    let view = home.wait_terminal(&run);
    assert_eq!(view["state"], "stopped", "{view}");
    let notes = notes_of(&view);
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("stalled: no provider event for 1 s")),
        "the stall is noted: {notes:?}"
    );
    assert!(
        !notes.iter().any(|n| n.contains("active again")),
        "the provider was stopped, not active again: {notes:?}"
    );
}

/// The stall note and the permission-timeout denial state a threshold under a minute in
/// seconds ("1 s"), never as "0 minutes".
#[test]
fn sub_minute_timeouts_are_not_described_as_0_minutes() {
    // The two runs share one directory at once.
    let home = Home::with_config(
        "[limits]\nstalled_after_secs = 1\npermission_timeout_secs = 1\n\
         [workspaces]\nshared_conflict = \"allow\"\n",
    );
    let _serve = home.serve();
    let hung = home.dispatch("hang", "Look into it", &[]);
    let asking = home.dispatch("tool-permission", "Fix greeting", &[]);
    let view = home.wait_for(&hung, "the stall flag", |v| v["stalled"] == true);
    home.wait_for(&asking, "both requests timing out", |v| {
        v["state"] == "idle"
    });
    let stall = notes_of(&view)
        .into_iter()
        .find(|n| n.starts_with("stalled"))
        .expect("a stall note");
    let denial = resolutions(&home, &asking)
        .into_iter()
        .map(|(_, _, how)| how)
        .next()
        .expect("a denial");
    assert!(
        stall.starts_with("stalled: no provider event for 1 s "),
        "{stall}"
    );
    assert_eq!(denial, "deny: no answer within 1 s");
}

/// A turn that dies before its result line has used tokens (the sim reported 2,500 input
/// tokens in usage events), but the run shows "$0.00 (free)" and 0 tokens: the usage is
/// dropped and the spend is booked as free. docs/ARCHITECTURE.md §"Money": usage that
/// cannot be priced is recorded and flagged (`unpriced`), never booked as $0.
#[test]
fn a_crashed_turn_keeps_its_usage_and_is_not_shown_as_free() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("crash-midturn", "Read the config", &[]);
    let view = home.wait_terminal(&run);
    assert_eq!(view["state"], "failed", "{view}");
    assert!(
        view["tokens"]["input"].as_u64().unwrap_or(0) > 0,
        "the crashed turn's tokens are lost: {}",
        view["tokens"]
    );
    assert_ne!(view["cost_basis"], "free", "{view}");
}

/// `complete` is documented as "End an idle run as complete", but any active run is
/// accepted: a run still waiting in the queue, which never started, ends as `completed`
/// (reason `complete`, live cause `completed`) with no turn and no result.
#[test]
fn complete_refuses_a_run_that_never_started() {
    let home = Home::with_config(WARM_IDLE_SIM_RAIL_OF_1);
    let _serve = home.serve();
    let first = home.dispatch("quick-success", "First", &[]);
    home.wait_idle(&first);
    let queued = home.dispatch("quick-success", "Second", &[]);
    assert_eq!(home.show(&queued)["state"], "queued");
    let out = home.drover(&["complete", &queued]);
    let view = home.show(&queued);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a queued run cannot be complete: {}; the run is now {} ({})",
        describe(&out),
        view["state"],
        view["completion_reason"]
    );
    assert!(stderr(&out).starts_with("error["), "{}", describe(&out));
    assert_eq!(view["state"], "queued", "{view}");
}

/// `drover show` tells the user how to answer what is pending. For a question it says
/// `drover respond RUN REQ allow|always|deny`; following it (`allow`) sends no answer at
/// all and the agent goes on with "(no answer)" (the run "succeeds" with "Set the cache
/// up on (no answer)"). A question's hint should name `--answer`.
#[test]
fn the_hint_for_a_pending_question_says_how_to_answer_it() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("question", "Set up the cache", &[]);
    let question = home.wait_for_pending(&run, "AskUserQuestion");
    let id = str_at(&question, "request_id");
    let show = stdout(&home.drover(&["show", &run]));
    let line = show
        .lines()
        .find(|l| l.starts_with("pending") && l.contains(id))
        .unwrap_or_else(|| panic!("{show}"));
    assert!(line.contains("--answer"), "{line}");
}

/// Every file under `dir` with its size and modification time, sorted by path.
fn files_under(dir: &std::path::Path) -> Vec<(std::path::PathBuf, u64, std::time::SystemTime)> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                dirs.push(entry.path());
            } else {
                files.push((entry.path(), meta.len(), meta.modified().unwrap()));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn runs_whose_events_retention_pruned_stay_listed_shown_and_counted() {
    let home = Home::new();
    let serve = home.serve();
    let mut ids = Vec::new();
    for task in ["First task", "Second task", "Third task"] {
        let run = home.dispatch("quick-success", task, &[]);
        home.wait_idle(&run);
        home.json(&["complete", &run]);
        home.wait_terminal(&run);
        ids.push(run);
    }
    serve.stop();
    // The first two finished two months ago (the default keeps events for 30 days).
    let ledger = drover_core::paths::Paths::under(home.path()).ledger_file;
    let conn = rusqlite::Connection::open(&ledger).expect("ledger");
    for (i, id) in ids[..2].iter().enumerate() {
        conn.execute(
            "UPDATE runs SET finished_at = finished_at - ?2 WHERE run_id = ?1",
            rusqlite::params![id, 60 * 86_400_000i64 - i as i64],
        )
        .expect("age the run");
    }
    drop(conn);
    let _serve = home.serve();
    // The owner's retention pass runs at its start, on a thread of its own.
    let pruned = |id: &str| home.json(&["transcript", id])["events_pruned_at"].is_i64();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !(pruned(&ids[0]) && pruned(&ids[1])) {
        assert!(
            std::time::Instant::now() < deadline,
            "retention never pruned the old runs"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!pruned(&ids[2]), "a recent run keeps its events");

    let all = array(home.json(&["runs", "--all"]));
    assert_eq!(all.len(), 3, "{all:?}");
    let view = home.show(&ids[0]);
    assert_eq!(view["turns"].as_array().map(Vec::len), Some(1), "{view}");
    assert_eq!(view["last_result"]["status"], "done", "{view}");
    assert!(same_usd(&view["cost_usd"], 0.01), "{view}");
    assert!(
        view["notes"]
            .as_array()
            .expect("notes")
            .iter()
            .any(|n| n["text"]
                .as_str()
                .is_some_and(|t| t.contains("retention pruned"))),
        "{view}"
    );
    let tail = home.drover(&["transcript", &ids[0]]);
    assert!(
        stdout(&tail).starts_with("[retention pruned this run's events"),
        "{}",
        stdout(&tail)
    );
    let text = home.json(&["transcript", &ids[0], "--format", "text"]);
    assert!(
        strings(&text["lines"])
            .iter()
            .any(|l| l.starts_with("## turn 1")),
        "{text}"
    );
    let budget = home.json(&["budget"]);
    assert!(same_usd(&budget["spent_usd"], 0.03), "{budget}");

    // Pages go by finish time: the third run finished last.
    let page = array(home.json(&["runs", "--limit", "1"]));
    assert_eq!(page.len(), 1);
    assert_eq!(page[0]["run_id"], ids[2].as_str());
    let next = array(home.json(&["runs", "--limit", "1", "--before", &ids[2]]));
    assert_eq!(next[0]["run_id"], ids[1].as_str(), "{next:?}");
    let human = stdout(&home.drover(&["runs", "--limit", "1"]));
    assert!(
        human.contains(&format!("drover runs --before {}", ids[2])),
        "{human}"
    );
    let found = array(home.json(&["runs", "--search", "FIRST"]));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["run_id"], ids[0].as_str());
    home.refused(&["runs", "--before", "no-such-run"], "RUN_NOT_FOUND");
}

#[test]
fn models_lists_the_catalog_per_provider_and_dispatch_help_lists_the_scenarios() {
    let home = Home::new();
    let models = home.json(&["models", "--provider", "sim"]);
    let rows = models.as_array().expect("a list");
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|m| m["provider"] == "sim"), "{models}");
    let standard = rows
        .iter()
        .find(|m| m["id"] == "sim-standard")
        .expect("sim-standard");
    assert_eq!(standard["tier"], "standard");
    assert!(standard["input_per_mtok"].as_f64().is_some(), "{standard}");
    assert!(standard["vision"].is_boolean());
    let text = home.drover(&["models"]);
    assert!(text.status.success());
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("claude-code") && l.contains("per Mtok")),
        "{text}"
    );
    let refused = home.drover(&["models", "--provider", "nope"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("error[INVALID_PROVIDER]"),
        "{refused:?}"
    );
    let help = home.drover(&["dispatch", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    for scenario in ["tool-permission", "blocked", "question", "worktree-change"] {
        assert!(help.contains(scenario), "{scenario} in:\n{help}");
    }
}

#[test]
fn approval_rules_are_kept_listed_applied_and_refused_with_codes() {
    let home = Home::new();
    // With no owner the list reads the ledger; a change needs an owner.
    assert_eq!(home.json(&["rules"]), serde_json::json!([]));
    let add = |scope: &str, kind: &str, pattern: &str, decision: &str| {
        vec![
            "rules".to_string(),
            "add".into(),
            "--scope".into(),
            scope.into(),
            "--kind".into(),
            kind.into(),
            "--pattern".into(),
            pattern.into(),
            decision.into(),
        ]
    };
    let refused = |args: Vec<String>, code: &str| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        home.refused(&args, code)
    };
    refused(add("everywhere", "command", "ls *", "allow"), "NO_OWNER");
    let serve = home.serve();
    let long = "x".repeat(201);
    for (args, code) in [
        (add("galaxy", "command", "ls *", "allow"), "RULE_INVALID"),
        (add("everywhere", "shell", "ls *", "allow"), "RULE_INVALID"),
        (add("everywhere", "command", "", "allow"), "RULE_INVALID"),
        (add("everywhere", "command", &long, "allow"), "RULE_INVALID"),
        (
            add("everywhere", "command", "ls 'open", "allow"),
            "RULE_INVALID",
        ),
        (
            add("everywhere", "file-edit", "/etc/**", "allow"),
            "RULE_INVALID",
        ),
        (
            add("everywhere", "command", "ls *", "maybe"),
            "RULE_INVALID",
        ),
        // The work directory is no git repository.
        (
            add("repository", "command", "ls *", "allow"),
            "RULE_INVALID",
        ),
        (add("run", "command", "ls *", "allow"), "RULE_INVALID"),
    ] {
        let line = refused(args.clone(), code);
        assert!(
            line.len() > 20,
            "{args:?}: a sentence says what to do: {line}"
        );
    }
    home.refused(&["rules", "rm", "99"], "RULE_NOT_FOUND");
    let args = [
        "rules",
        "add",
        "--scope",
        "run",
        "--run",
        "r-nope",
        "--kind",
        "command",
        "--pattern",
        "ls",
        "allow",
    ];
    home.refused(&args, "RUN_NOT_FOUND");

    let args = add("everywhere", "command", "ls *", "allow");
    let rule = home.json(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(rule["id"], 1, "{rule}");
    assert_eq!(rule["pattern"], "ls *", "{rule}");
    let text = String::from_utf8_lossy(&home.drover(&["rules"]).stdout).into_owned();
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        [
            "ID  DECISION  KIND     PATTERN  SCOPE",
            "1   allow     command  ls *     everywhere",
        ]
    );

    // The run's `ls -la` is answered by the rule; its Edit still asks.
    let run = home.dispatch("tool-permission", "List the files, then edit main.rs", &[]);
    home.wait_for_pending(&run, "Edit");
    let resolved = resolutions(&home, &run);
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(
        (resolved[0].1.as_str(), resolved[0].2.as_str()),
        ("rule:1", "allow by rule 1 (`ls *`, everywhere)")
    );
    let show = String::from_utf8_lossy(&home.drover(&["show", &run]).stdout).into_owned();
    assert!(
        show.lines()
            .any(|l| l.starts_with("decided") && l.contains("rule:1: allow by rule 1")),
        "{show}"
    );
    assert!(
        has_line(&home.tail(&run), "rule 1 allowed Bash: ls -la"),
        "{:?}",
        home.tail(&run)
    );

    let removed = home.json(&["rules", "rm", "1"]);
    assert_eq!(removed["id"], 1, "{removed}");
    assert_eq!(home.json(&["rules"]), serde_json::json!([]));

    // An id is never given twice, across a restart too: `rule:1` in the run's decisions
    // names the removed rule only.
    let args = add("everywhere", "command", "pwd", "allow");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(home.json(&args)["id"], 2);
    home.json(&["rules", "rm", "2"]);
    serve.stop();
    let _serve = home.serve();
    assert_eq!(home.json(&args)["id"], 3);
}

#[test]
fn status_counts_a_long_history_and_lists_only_the_active_runs() {
    let home = Home::new();
    // Nothing yet: no ledger, nothing counted, no money.
    let fresh = home.json(&["status"]);
    assert_eq!(fresh["runs"], serde_json::json!({}), "{fresh}");
    assert_eq!(fresh["active"], serde_json::json!([]), "{fresh}");
    assert_eq!(fresh["budget"], Value::Null, "{fresh}");

    let done = home.seed_history(60);
    let cost = home.row(&done)["cost_usd"].as_f64().expect("a cost");

    let serve = home.serve();
    home.json(&["remove", &format!("{done}-h060")]);
    let asking = home.dispatch("tool-permission", "Fix greeting", &[]);
    home.wait_for_pending(&asking, "Bash");
    let asking_cost = home.row(&asking)["cost_usd"].as_f64().expect("a cost");

    let status = home.json(&["status"]);
    assert_eq!(status["running"], true, "{status}");
    assert_eq!(
        status["runs"],
        serde_json::json!({"awaiting_permission": 1, "completed": 60}),
        "{status}"
    );
    assert_eq!(status["removed"], 1, "{status}");
    let active: Vec<&str> = status["active"]
        .as_array()
        .expect("active runs")
        .iter()
        .map(|r| str_at(r, "run_id"))
        .collect();
    assert_eq!(active, [asking.as_str()], "{status}");
    // The removed run's money still counts.
    let spent = 61.0 * cost + asking_cost;
    assert!(same_usd(&status["budget"]["spent_usd"], spent), "{status}");
    assert_eq!(
        status["budget"]["spent_usd"],
        home.json(&["budget"])["spent_usd"]
    );

    let text = stdout(&home.drover(&["status"]));
    assert!(
        text.contains(
            "\nruns      1 awaiting_permission · 60 completed (1 more removed from the trays)\n"
        ),
        "{text}"
    );
    assert!(text.contains("\nbudget    default: $"), "{text}");
    assert!(
        text.lines().any(|l| l.starts_with(asking.as_str())),
        "the active run is listed: {text}"
    );
    assert!(!text.contains(&done), "no finished run is listed: {text}");

    // With no owner the ledger says the same (the shutdown left the waiting run waiting,
    // for the next owner).
    serve.stop();
    let offline = home.json(&["status"]);
    assert_eq!(offline["running"], false, "{offline}");
    assert_eq!(
        offline["runs"],
        serde_json::json!({"completed": 60, "awaiting_permission": 1}),
        "{offline}"
    );
    assert_eq!(offline["removed"], 1, "{offline}");
    let active: Vec<&str> = offline["active"]
        .as_array()
        .expect("active runs")
        .iter()
        .map(|r| str_at(r, "run_id"))
        .collect();
    assert_eq!(active, [asking.as_str()], "{offline}");
    assert!(
        same_usd(&offline["budget"]["spent_usd"], spent),
        "{offline}"
    );
}

#[test]
fn remove_finished_empties_a_history_longer_than_a_page() {
    let home = Home::new();
    // Over two of the pages the owner reads and removes at a time (500).
    home.seed_history(1_100);

    let _serve = home.serve();
    let kept = home.dispatch("tool-permission", "Fix greeting", &[]);
    home.wait_for_pending(&kept, "Bash");
    let removed = home.json(&["remove", "--finished"]);
    let removed = strings(&removed["removed"]);
    assert_eq!(removed.len(), 1_101, "every finished run, each once");
    let distinct: std::collections::BTreeSet<&String> = removed.iter().collect();
    assert_eq!(distinct.len(), 1_101);
    assert!(!removed.contains(&kept), "the active run stays");
    let listed: Vec<Value> = home.runs().iter().map(|r| r["run_id"].clone()).collect();
    assert_eq!(listed, [kept.as_str()]);
    let status = home.json(&["status"]);
    assert_eq!(status["removed"], 1_101, "{status}");
    assert_eq!(
        home.json(&["remove", "--finished"])["removed"],
        serde_json::json!([]),
        "nothing is left to remove"
    );
}

/// `drover stop RUN --soft` on a run in a turn: the turn goes on, then drover's wrap-up
/// turn asks for the result, and the run ends completed (`stopped_soft`) with it
/// (docs/ARCHITECTURE.md §"Wrap up, then stop").
#[test]
fn a_soft_stop_lets_the_turn_end_then_completes_with_the_wrap_ups_result() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("wrap-up", "Migrate the tables", &[]);
    home.wait_for(&run, "its tool call", |v| {
        v["live_state"]["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("running a tool"))
    });
    let asked = home.json(&["stop", &run, "--soft"]);
    assert_eq!(asked["state"], "running", "the turn goes on: {asked}");
    home.refused(&["stop", &run, "--soft"], "RUN_NOT_ACTIVE");
    let view = home.wait_terminal(&run);
    assert_eq!(view["state"], "completed", "{view}");
    assert_eq!(view["completion_reason"], "stopped_soft", "{view}");
    assert_eq!(
        view["last_result"]["summary"], "Migrated three of five tables; users and orders are left.",
        "{view}"
    );
    let origins: Vec<&str> = view["turns"]
        .as_array()
        .expect("turns")
        .iter()
        .map(|t| t["origin"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(origins, ["dispatch", "wrap_up"], "{view}");
    let notes = notes_of(&view);
    assert!(
        notes.contains(
            &"wrapping up once its turn ends: you asked for a soft stop (the turn goes on)"
                .to_string()
        ),
        "{notes:?}"
    );
    let states = home.live_states(&run);
    assert_legal_live_sequence(&states);
    assert!(states.contains(&"wrapping_up".to_string()), "{states:?}");
    let wrapping = home
        .events(&run)
        .into_iter()
        .find(|e| e["kind"] == "live_state" && e["body"]["assignment"]["state"] == "wrapping_up")
        .expect("a wrapping_up live state");
    assert_eq!(
        wrapping["body"]["assignment"]["detail"], "writing the final answer",
        "{wrapping}"
    );
}

/// Evidence (docs/ARCHITECTURE.md §"Evidence"): the commands a run executed and the tests
/// among them, in `show --json`, `show` and from the ledger alone; a done whose test failed
/// is offered a retry.
#[test]
fn evidence_says_which_tests_ran_and_a_done_with_a_failing_test_is_offered_a_retry() {
    let home = Home::new();
    let serve = home.serve();
    let tested = home.dispatch("tested", "Fix the pager", &[]);
    let view = home.wait_idle(&tested);
    let evidence = &view["evidence"];
    assert_eq!(
        evidence["line"], "evidence: 2 commands · tests ran: cargo test (passed)",
        "{view}"
    );
    assert_eq!(evidence["warn"], false, "{view}");
    assert_eq!(evidence["tests"][0]["outcome"], "passed", "{view}");
    let commands = &view["turns"][0]["commands"];
    assert_eq!(commands[0]["command"], "cargo build", "{view}");
    assert_eq!(commands[0]["exit_code"], 0, "{view}");
    assert_eq!(commands[1]["test"], "cargo test", "{view}");
    let shown = stdout(&home.drover(&["show", &tested]));
    assert!(
        shown.lines().any(|l| l.starts_with("evidence")
            && l.ends_with("2 commands · tests ran: cargo test (passed)")),
        "{shown}"
    );
    assert_eq!(view["escalation"], Value::Null, "{view}");

    let failing = home.dispatch("tests-fail", "Fix the pager", &[]);
    let view = home.wait_for(&failing, "the retry offer", |v| !v["escalation"].is_null());
    assert_eq!(
        view["evidence"]["line"], "evidence: 1 command · tests ran: cargo test (failed)",
        "{view}"
    );
    assert_eq!(view["evidence"]["warn"], true, "{view}");
    assert_eq!(view["turns"][0]["commands"][0]["exit_code"], 101, "{view}");
    assert_eq!(view["escalation"]["kind"], "retry", "{view}");
    assert_eq!(view["needs_you"]["reason"], "escalation", "{view}");

    let quick = home.dispatch("quick-success", "Say hello", &[]);
    let view = home.wait_idle(&quick);
    assert_eq!(
        view["evidence"]["line"], "evidence: no command ran · done, but no test ran",
        "{view}"
    );
    assert_eq!(view["evidence"]["warn"], true, "{view}");

    // From the ledger alone, the same.
    let live = home.show(&tested);
    serve.stop();
    assert_eq!(home.show(&tested)["evidence"], live["evidence"]);
    assert_eq!(
        home.show(&tested)["turns"][0]["commands"],
        live["turns"][0]["commands"]
    );
}
