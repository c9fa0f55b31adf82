//! Take-over through the real binary on the simulated agent (docs/ARCHITECTURE.md
//! §"Take-over"): `drover attach RUN` hands an idle run to the user in its CLI's own
//! interface (the sim's interactive mode, reading typed lines), and when the user leaves
//! it the run is handed back — the turns typed there in its ledger as `interactive`, with
//! their cost and the worktree's change, its next follow-up in the same session; drover
//! sends a taken-over run nothing.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::{Home, repo_home, wait_child};
use serde_json::Value;
use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

fn strings(view: &Value, list: &str, field: &str) -> Vec<String> {
    view[list]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t[field].as_str().unwrap_or_default().to_string())
        .collect()
}

fn detail(view: &Value) -> String {
    view["live_state"]["detail"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// `drover attach RUN` with `typed` on its stdin; what it printed.
fn attach(home: &Home, run: &str, typed: &str) -> std::process::Output {
    let mut child = home
        .command(&["attach", run])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(typed.as_bytes())
        .unwrap();
    let status = wait_child(&mut child, LIMIT);
    assert!(status.is_some(), "drover attach did not end");
    child.wait_with_output().unwrap()
}

#[test]
fn a_run_taken_over_is_handed_back_with_its_turns_their_cost_and_its_change() {
    let home = repo_home();
    let _serve = home.serve();
    let run = home.dispatch(
        "quick-success",
        "Say hello",
        &["--workspace", "worktree", "--max-turns", "4"],
    );
    let first = home.wait_idle(&run);
    let session = first["provider_session_id"].clone();
    assert!(session.is_string(), "{first}");
    let spent = first["cost_usd"].as_f64().unwrap();

    let out = attach(
        &home,
        &run,
        "hello from the interface\nwrite notes.txt typed by hand\n/exit\n",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("Heard you: hello from the interface"),
        "{stdout}"
    );
    assert!(
        stdout.contains("handed back to drover") && stdout.contains("2 interactive turns"),
        "{stdout}"
    );

    let view = home.show(&run);
    assert_eq!(
        strings(&view, "turns", "origin"),
        ["dispatch", "interactive", "interactive"],
        "{view}"
    );
    assert_eq!(
        view["turns"][1]["prompt_preview"],
        "hello from the interface"
    );
    assert_eq!(
        view["turns"][1]["text"],
        "Heard you: hello from the interface"
    );
    assert!(
        view["turns"][2]["cost_usd"].as_f64().unwrap() > 0.0,
        "{view}"
    );
    assert!(view["cost_usd"].as_f64().unwrap() > spent, "{view}");
    // What the agent said in its own interface is searchable as any turn's text is,
    // read back from the ledger with the match.
    let found = home.json(&["search", "heard"]);
    let texts: Vec<(u64, String)> = found["hits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["source"] == "text")
        .map(|h| {
            (
                h["turn"].as_u64().unwrap(),
                h["line"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        texts,
        [(2, "Heard you: hello from the interface".to_string())],
        "{found}"
    );
    assert_eq!(view["state"], "idle");
    assert_eq!(detail(&view), "idle · hibernated");
    let notes = strings(&view, "notes", "text");
    assert!(
        notes.contains(&"taken over in sim's own interface".to_string()),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("handed back from sim's own interface: 2 turns")),
        "{notes:?}"
    );
    // The file written in the interface is the run's change, in its worktree.
    let dir = view["workspace"]["dir"].as_str().unwrap();
    assert_eq!(
        std::fs::read_to_string(std::path::Path::new(dir).join("notes.txt")).unwrap(),
        "typed by hand\n"
    );
    let changed = home.wait_for(&run, "the change measured", |v| {
        v["workspace"]["change"]["files"].as_u64().unwrap_or(0) >= 1
    });
    assert_eq!(changed["workspace"]["change"]["files"], 1, "{changed}");

    // Supervised again: a follow-up goes on in the same session.
    let out = home.drover(&["follow-up", &run, "Say it once more"]);
    assert!(out.status.success(), "{out:?}");
    let after = home.wait_for(&run, "idle after its follow-up", |v| {
        v["state"] == "idle" && v["turns"].as_array().is_some_and(|t| t.len() == 4)
    });
    assert_eq!(after["turns"][3]["origin"], "follow_up", "{after}");
    assert_eq!(after["provider_session_id"], session, "{after}");
}

#[test]
fn drover_sends_a_taken_over_run_nothing_until_it_is_handed_back() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("quick-success", "Say hello", &["--max-turns", "4"]);
    home.wait_idle(&run);
    // The interface stays open while its stdin does.
    let mut child = home
        .command(&["attach", &run])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its supervised CLI is shut down before the interface opens.
    let taken = home.wait_for(&run, "taken over, its CLI shut down", |v| {
        detail(v).starts_with("taken over · in sim's own interface") && v["pid"].is_null()
    });
    assert_eq!(taken["state"], "idle", "{taken}");
    home.refused(&["follow-up", &run, "Anything"], "RUN_TAKEN_OVER");
    home.refused(&["attach", &run], "RUN_TAKEN_OVER");
    // Leaving the interface (end of input) hands it back.
    drop(child.stdin.take());
    let status = wait_child(&mut child, LIMIT).expect("attach ends");
    assert!(status.success());
    let view = home.show(&run);
    assert_eq!(detail(&view), "idle · hibernated", "{view}");
    assert_eq!(strings(&view, "turns", "origin"), ["dispatch"], "{view}");
    home.refused(&["attach", &run, "--hand-back"], "RUN_NOT_TAKEN_OVER");
    let out = home.drover(&["follow-up", &run, "Go on"]);
    assert!(out.status.success(), "{out:?}");
    home.wait_for(&run, "its follow-up done", |v| {
        v["state"] == "idle" && v["turns"].as_array().is_some_and(|t| t.len() == 2)
    });
}

#[test]
fn a_run_of_a_provider_without_an_interface_or_not_idle_is_refused() {
    let home = Home::new();
    let _serve = home.serve();
    let busy = home.dispatch("hang", "Hang around", &[]);
    home.wait_for(&busy, "running", |v| v["state"] == "running");
    home.refused(&["attach", &busy], "RUN_NOT_IDLE");
    home.refused(&["attach", "r-no-such-run"], "RUN_NOT_FOUND");
}
