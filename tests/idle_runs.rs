//! Idle runs through the real binary on the simulated agent (docs/ARCHITECTURE.md
//! §"Idle runs"): the demo's queued runs start once the idle runs holding the sim's rail
//! hibernate, and a hibernated run wakes for a follow-up, in its session and where its
//! session was (also when the follow-up comes while it hibernates); a `--no-queue`
//! dispatch starts in the slot an idle run gives as it hibernates.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::Home;
use serde_json::Value;

/// The demo's own config and runs (`assets/demo.toml`).
const DEMO_TOML: &str = include_str!("../assets/demo.toml");

/// `drover dispatch` flags for one of the demo's runs.
fn dispatch_args(run: &toml::Table) -> Vec<String> {
    let mut args = vec!["dispatch".to_string(), "--provider".into(), "sim".into()];
    for (key, flag) in [
        ("title", "--title"),
        ("scenario", "--scenario"),
        ("model", "--model"),
        ("class", "--class"),
        ("policy", "--policy"),
    ] {
        if let Some(value) = run.get(key).and_then(|v| v.as_str()) {
            args.extend([flag.to_string(), value.to_string()]);
        }
    }
    if let Some(turns) = run.get("max_turns").and_then(|v| v.as_integer()) {
        args.extend(["--max-turns".to_string(), turns.to_string()]);
    }
    if let Some(budget) = run.get("budget_usd").and_then(|v| v.as_float()) {
        args.extend(["--budget".to_string(), budget.to_string()]);
    }
    args.push(run["task"].as_str().expect("a task").to_string());
    args
}

fn detail(view: &Value) -> &str {
    view["live_state"]["detail"].as_str().unwrap_or_default()
}

#[test]
fn the_demos_queued_runs_start_once_idle_runs_hibernate() {
    let demo: toml::Table = toml::from_str(DEMO_TOML).expect("the demo file");
    let config = toml::to_string(&demo["config"]).expect("the demo config");
    let home = Home::with_config(&config);
    let _serve = home.serve();
    let runs: Vec<String> = demo["runs"]
        .as_array()
        .expect("the demo's runs")
        .iter()
        .map(|run| {
            let args = dispatch_args(run.as_table().expect("a run"));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            home.json(&args)["run_id"]
                .as_str()
                .expect("a run id")
                .to_string()
        })
        .collect();
    let rail = demo["config"]["limits"]["per_provider"]["sim"]
        .as_integer()
        .expect("the demo's sim rail") as usize;
    assert!(
        runs.len() > rail,
        "the demo queues runs behind its sim rail"
    );
    // Every queued run starts: the idle runs holding the rail hibernate for them.
    for run in &runs {
        home.wait_for(run, "out of the queue", |v| v["state"] != "queued");
    }
    let hibernated: Vec<&String> = runs
        .iter()
        .filter(|run| detail(&home.show(run)).starts_with("idle · hibernat"))
        .collect();
    assert!(
        !hibernated.is_empty(),
        "an idle run gave its slot: {:#?}",
        runs.iter().map(|r| home.show(r)).collect::<Vec<_>>()
    );
}

#[test]
fn a_hibernated_sim_run_wakes_for_a_follow_up_in_its_session() {
    let home = Home::with_config("[limits]\nhibernate_after_secs = 1\n");
    let _serve = home.serve();
    let run = home.dispatch("quick-success", "Say hello", &["--max-turns", "3"]);
    let first = home.wait_idle(&run);
    assert_eq!(first["state"], "idle", "{first}");
    let session = first["provider_session_id"].clone();
    let asleep = home.wait_for(&run, "hibernated", |v| {
        detail(v) == "idle · hibernated" && v["pid"].is_null()
    });
    assert_eq!(asleep["state"], "idle", "{asleep}");
    let out = home.drover(&["follow-up", &run, "Say it again"]);
    assert!(out.status.success(), "{out:?}");
    let view = home.wait_for(&run, "idle after its follow-up", |v| {
        v["state"] == "idle" && v["turns"].as_array().is_some_and(|t| t.len() == 2)
    });
    assert_eq!(view["turns"][1]["origin"], "follow_up", "{view}");
    assert_eq!(view["provider_session_id"], session, "{view}");
    let woken = view["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .any(|n| n["text"] == "waking in its provider session");
    assert!(woken, "{view}");
}

#[test]
fn a_woken_sim_run_goes_on_with_its_scenario_where_its_session_was() {
    let home = Home::with_config("[limits]\nhibernate_after_secs = 1\n");
    let _serve = home.serve();
    let run = home.dispatch("multi-turn", "Write the parser", &["--max-turns", "4"]);
    home.wait_idle(&run);
    let out = home.drover(&["follow-up", &run, "Take a str"]);
    assert!(out.status.success(), "{out:?}");
    home.wait_for(&run, "idle after its second turn", |v| {
        v["state"] == "idle" && v["turns"].as_array().is_some_and(|t| t.len() == 2)
    });
    home.wait_for(&run, "hibernated", |v| {
        detail(v) == "idle · hibernated" && v["pid"].is_null()
    });
    let out = home.drover(&["follow-up", &run, "Anything else"]);
    assert!(out.status.success(), "{out:?}");
    let view = home.wait_for(&run, "idle after its third turn", |v| {
        v["state"] == "idle" && v["turns"].as_array().is_some_and(|t| t.len() == 3)
    });
    let texts: Vec<&str> = view["turns"]
        .as_array()
        .expect("turns")
        .iter()
        .map(|t| t["text"].as_str().unwrap_or_default())
        .collect();
    assert!(
        texts[1].contains("Handled the first follow-up: Take a str"),
        "{texts:?}"
    );
    // Woken in its session, it plays the scenario's third turn, not its second again.
    assert!(
        texts[2].starts_with("Another follow-up: Anything else"),
        "{texts:?}"
    );
}

#[test]
fn a_no_queue_dispatch_starts_in_the_slot_an_idle_run_gives_as_it_hibernates() {
    let home = Home::with_config(
        "[limits]\nhibernate_after_secs = 3600\n[limits.per_provider]\nsim = 1\n",
    );
    let _serve = home.serve();
    let first = home.dispatch("quick-success", "First", &[]);
    assert_eq!(home.wait_idle(&first)["state"], "idle");
    let reply = home.json(&[
        "dispatch",
        "--provider",
        "sim",
        "--scenario",
        "quick-success",
        "--no-queue",
        "Second",
    ]);
    // Admitted, not queued and not refused: it waits for the idle run's slot.
    assert_eq!(reply["state"], "starting", "{reply}");
    assert_eq!(
        reply["live_state"]["detail"],
        drover_core::dispatch::core::ROOM_DETAIL,
        "{reply}"
    );
    let second = reply["run_id"].as_str().expect("a run id").to_string();
    let view = home.wait_idle(&second);
    assert_eq!(view["state"], "idle", "{view}");
    let asleep = home.show(&first);
    assert_eq!(asleep["state"], "idle", "{asleep}");
    assert_eq!(detail(&asleep), "idle · hibernated", "{asleep}");
    assert!(
        home.notes(&second)
            .iter()
            .any(|n| n.contains("--no-queue") && n.contains(&first)),
        "{:?}",
        home.notes(&second)
    );
    // Idle now, the second run gives its slot to a third the same way.
    let third = home.json(&[
        "dispatch",
        "--provider",
        "sim",
        "--scenario",
        "quick-success",
        "--no-queue",
        "Third",
    ]);
    assert_eq!(third["state"], "starting", "{third}");
}

#[test]
fn a_follow_up_sent_while_a_run_hibernates_wakes_it_once_its_cli_has_exited() {
    use std::os::unix::fs::PermissionsExt;
    // The CLI lingers a second after its stdin closes (as a real one may, writing its
    // session out): the follow-up lands while the run is hibernating.
    let home = Home::new();
    let wrapper = home.path().join("lingering-cli.sh");
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\n'{}' \"$@\"\nsleep 1\n", common::drover_bin()),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[limits]\nhibernate_after_secs = 1\n[providers.claude-code]\ncommand = \"{}\"\n\
             args = [\"sim-agent\", \"--scenario\", \"multi-turn\"]\n",
            wrapper.display()
        ),
    )
    .unwrap();
    let _serve = home.serve();
    let run = home.json(&["dispatch", "--provider", "claude-code", "Write the parser"]);
    let run = run["run_id"].as_str().unwrap().to_string();
    home.wait_idle(&run);
    home.wait_for(&run, "hibernating", |v| detail(v) == "idle · hibernating");
    let out = home.drover(&["follow-up", &run, "Take a str"]);
    assert!(out.status.success(), "{out:?}");
    // Woken once the old CLI has exited; the new one is not the one dropped with it.
    let view = home.wait_for(&run, "idle after its follow-up, or ended", |v| {
        !v["finished_at"].is_null()
            || (v["state"] == "idle" && v["turns"].as_array().is_some_and(|t| t.len() == 2))
    });
    assert_eq!(view["state"], "idle", "{view}");
    assert_eq!(view["turns"][1]["origin"], "follow_up", "{view}");
}
