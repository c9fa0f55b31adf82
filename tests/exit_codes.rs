//! Exit codes a script can trust and the `--until` conditions, through the real binary
//! against a `drover serve` owner on the simulated agent: 0 idle or done, 1 refused,
//! 2 usage, 3 the wait timed out, 4 failed/stopped/blocked, 5 needs you; a foreground
//! dispatch whose launch fails says why and exits 4, one to a CLI that is not installed is
//! refused (1), and `serve --detach` with a config it refuses says so with its own code.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::{Home, describe, str_at};

fn code(home: &Home, args: &[&str]) -> i32 {
    let out = home.drover(args);
    out.status.code().unwrap_or_else(|| {
        panic!(
            "drover {}: no exit code: {}",
            args.join(" "),
            describe(&out)
        )
    })
}

/// `dispatch --wait` of `scenario`, in a directory of its own: the runs left waiting for
/// you would otherwise hold a shared directory for the next (`waiting_repository`).
fn dispatch_wait(home: &Home, scenario: &str) -> i32 {
    let dir = home.path().join(format!("work-{scenario}"));
    std::fs::create_dir_all(&dir).expect("a work dir");
    code(
        home,
        &[
            "dispatch",
            "--provider",
            "sim",
            "--scenario",
            scenario,
            "--cwd",
            dir.to_str().expect("a UTF-8 temp path"),
            // Small caps: all of them fit the session's hard cap at once.
            "--budget",
            "1",
            "--wait",
            "do it",
        ],
    )
}

#[test]
fn dispatch_wait_exits_by_how_the_run_settles() {
    let home = Home::new();
    let _serve = home.serve();
    let cases = [
        ("quick-success", 0, "idle with result done"),
        ("blocked", 4, "its result is blocked"),
        ("crash-midturn", 4, "it failed"),
        ("tool-permission", 5, "it asks for a permission"),
        ("question", 5, "it asks a question"),
        ("needs-input", 5, "its result asks for input"),
    ];
    for (scenario, expected, why) in cases {
        assert_eq!(
            dispatch_wait(&home, scenario),
            expected,
            "{scenario}: {why}"
        );
    }
    // An unknown scenario is refused before anything is made: 1, not 0.
    assert_eq!(dispatch_wait(&home, "no-such-scenario"), 1);
    let _ = home.drover(&["kill-all"]);
}

#[test]
fn each_until_waits_for_its_own_condition() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("tool-permission", "asks first", &[]);
    // Waiting on a permission is not idle: `--until idle` times out (3)…
    assert_eq!(
        code(&home, &["wait", &run, "--until", "idle", "--timeout", "2"]),
        3
    );
    // …while `needs-you` and `settled` return at once, saying it needs you (5).
    assert_eq!(
        code(
            &home,
            &["wait", &run, "--until", "needs-you", "--timeout", "30"]
        ),
        5
    );
    assert_eq!(
        code(
            &home,
            &["wait", &run, "--until", "settled", "--timeout", "30"]
        ),
        5
    );
    // `event` returns at the next event (the request's timeout is far off: the stop is
    // the event).
    let stop = home.command(&["stop", &run]).output().expect("stop");
    assert!(stop.status.success(), "{}", describe(&stop));
    assert_eq!(
        code(
            &home,
            &["wait", &run, "--until", "terminal", "--timeout", "30"]
        ),
        4,
        "stopped"
    );
    assert_eq!(
        code(
            &home,
            &["wait", &run, "--until", "event", "--timeout", "30"]
        ),
        4,
        "an ended run meets every condition"
    );

    let done = home.dispatch("quick-success", "just do it", &[]);
    assert_eq!(
        code(
            &home,
            &["wait", &done, "--until", "idle", "--timeout", "30"]
        ),
        0
    );
    assert_eq!(
        code(
            &home,
            &["wait", &done, "--until", "needs-you", "--timeout", "2"]
        ),
        3,
        "an idle run with its result done does not need you"
    );
    let complete = home.drover(&["complete", &done]);
    assert!(complete.status.success(), "{}", describe(&complete));
    assert_eq!(
        code(
            &home,
            &["wait", &done, "--until", "terminal", "--timeout", "30"]
        ),
        0,
        "completed with result done"
    );
}

#[test]
fn refusals_exit_1_usage_2_and_the_advice_names_a_command_that_helps() {
    let home = Home::new();
    let _serve = home.serve();
    assert_eq!(code(&home, &["show", "r-nope"]), 1);
    assert_eq!(code(&home, &["wait"]), 2);
    assert_eq!(code(&home, &["wait", "r1", "--until", "soon"]), 2);
    let run = home.dispatch("tool-permission", "asks first", &[]);
    home.wait_until(&run, "needs-you");
    let refusal = home.refused(&["complete", &run], "RUN_NOT_IDLE");
    assert!(
        refusal.contains(&format!("drover respond {run}")),
        "the advice is to answer it, not to wait: {refusal}"
    );
    let _ = home.drover(&["kill-all"]);
}

#[test]
fn a_foreground_dispatch_whose_launch_fails_says_why_and_exits_4() {
    // The CLI is there, but ends before it is ready.
    let home = Home::with_config("[providers.claude-code]\ncommand = \"/bin/false\"\n");
    let out = home.drover(&[
        "dispatch",
        "--provider",
        "claude-code",
        "--model",
        "claude-sonnet-4-5",
        "do it",
    ]);
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    let printed = describe(&out);
    assert!(
        printed.contains("launch_error") && printed.contains("the provider did not start"),
        "the cause is printed: {printed}"
    );
    // The same through an owner, waiting for the run to settle.
    let _serve = home.serve();
    let out = home.drover(&[
        "dispatch",
        "--provider",
        "claude-code",
        "--model",
        "claude-sonnet-4-5",
        "--wait",
        "--json",
        "do it",
    ]);
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    // The last line is the wait's outcome: the run as it settled.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    let answer: serde_json::Value = serde_json::from_str(last).expect("the outcome, as JSON");
    assert_eq!(str_at(&answer["runs"][0], "state"), "failed", "{stdout}");
    assert_eq!(
        str_at(&answer["runs"][0], "completion_reason"),
        "launch_error",
        "{stdout}"
    );
}

#[test]
fn a_dispatch_to_a_cli_that_is_not_installed_is_refused_and_exits_1() {
    let home = Home::with_config(
        "[providers.claude-code]\ncommand = \"/nonexistent/bin/claude-is-not-here\"\n",
    );
    for owner in [false, true] {
        let _serve = owner.then(|| home.serve());
        let line = home.refused(
            &["dispatch", "--provider", "claude-code", "do it"],
            "PROVIDER_UNAVAILABLE",
        );
        assert!(
            line.contains("claude-is-not-here") && line.contains("drover doctor"),
            "{line}"
        );
    }
    assert!(home.runs().is_empty(), "nothing was made");
}

#[test]
fn serve_detach_with_a_config_it_refuses_says_so_with_its_own_code() {
    let home = Home::with_config("[limits]\nper_session_running = 0\n");
    for json in [false, true] {
        let mut args = vec!["serve", "--detach"];
        if json {
            args.push("--json");
        }
        let line = home.refused(&args, "CONFIG_INVALID");
        assert!(line.contains("per_session_running"), "{line}");
        assert!(!line.contains("OWNER_UNRESPONSIVE"), "{line}");
    }
    let status = home.json(&["status"]);
    assert_eq!(status["running"], false, "{status}");
}
