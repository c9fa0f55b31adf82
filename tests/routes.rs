//! Route cards and escalation through the headless CLI on the simulated agent.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::Home;
use serde_json::Value;

fn notes(view: &Value) -> Vec<String> {
    view["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["text"].as_str().map(str::to_string))
        .collect()
}

fn dispatch_auto(home: &Home, scenario: &str, task: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "dispatch",
        "--provider",
        "sim",
        "--model",
        "auto",
        "--scenario",
        scenario,
    ];
    args.extend_from_slice(extra);
    args.push(task);
    home.json(&args)
}

#[test]
fn an_auto_model_dispatch_is_held_behind_a_card_and_option_two_starts_it() {
    let home = Home::new();
    let _serve = home.serve();
    let held = dispatch_auto(&home, "quick-success", "Fix the login bug", &[]);
    assert_eq!(held["state"], "awaiting_route", "{held}");
    let run = held["run_id"].as_str().unwrap().to_string();
    let cards = home.json(&["routes"]);
    let card = &cards.as_array().unwrap()[0]["card"];
    assert_eq!(card["status"], "open");
    assert_eq!(card["class"], "code");
    let options = card["options"].as_array().unwrap();
    assert!(options.len() >= 2, "{card}");
    assert_eq!(options[0]["recommended"], true);
    assert_eq!(options[1]["recommended"], false);
    for key in [
        "provider",
        "model",
        "tier",
        "context_window",
        "vision",
        "reason",
    ] {
        assert!(!options[0][key].is_null(), "option lacks {key}: {card}");
    }
    let expires = card["expires_at"].as_i64().unwrap() - card["created_at"].as_i64().unwrap();
    assert_eq!(expires, 1_800_000);
    let second = options[1]["model"].as_str().unwrap().to_string();

    home.json(&["route", &run, "2"]);
    let view = home.wait_idle(&run);
    assert_eq!(view["model"], second.as_str(), "{view}");
    assert_eq!(view["route"]["status"], "decided");
    assert_eq!(view["route"]["decided_by"], "user");
    assert!(
        notes(&view)
            .iter()
            .any(|n| n == &format!("route decided by user: sim/{second}")),
        "{view}"
    );
    assert_eq!(home.json(&["routes"]), Value::Array(vec![]));
}

#[test]
fn a_pick_refused_for_vision_keeps_the_card_open_with_the_reason() {
    let home = Home::new();
    let _serve = home.serve();
    let held = dispatch_auto(
        &home,
        "quick-success",
        "Design the settings page",
        &["--class", "design"],
    );
    let run = held["run_id"].as_str().unwrap().to_string();
    let card = &home.show(&run)["route"];
    let frontier = card["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["model"] == "sim-frontier")
        .expect("the frontier model is offered for design");
    let number = frontier["number"].as_u64().unwrap().to_string();
    // Meanwhile the catalog says the model cannot read images any more.
    std::fs::write(
        home.path().join("config.toml"),
        "[[catalog.models]]\nprovider = \"sim\"\nid = \"sim-frontier\"\nvision = false\n",
    )
    .unwrap();
    let refusal = home.refused(&["route", &run, &number], "ROUTE_PICK_REFUSED");
    assert!(
        refusal.contains("vision") || refusal.contains("images"),
        "{refusal}"
    );
    assert!(refusal.contains("stays open"), "{refusal}");
    let view = home.show(&run);
    assert_eq!(view["state"], "awaiting_route");
    assert_eq!(view["route"]["status"], "open");
    assert!(
        view["route"]["refused"]
            .as_str()
            .unwrap()
            .contains(&format!("option {number}"))
    );
}

#[test]
fn declining_stops_the_run_and_remembering_skips_the_next_card() {
    let home = Home::new();
    let _serve = home.serve();
    let held = dispatch_auto(
        &home,
        "quick-success",
        "Document the API",
        &["--class", "docs"],
    );
    let run = held["run_id"].as_str().unwrap().to_string();
    home.json(&["route", &run, "--decline"]);
    let view = home.wait_terminal(&run);
    assert_eq!(view["state"], "stopped");
    assert_eq!(view["completion_reason"], "route_declined");
    assert_eq!(view["route"]["status"], "declined");

    let held = dispatch_auto(
        &home,
        "quick-success",
        "Document the CLI",
        &["--class", "docs"],
    );
    let run = held["run_id"].as_str().unwrap().to_string();
    home.json(&["route", &run, "1", "--remember"]);
    let chosen = home.wait_idle(&run)["model"].as_str().unwrap().to_string();

    let next = dispatch_auto(
        &home,
        "quick-success",
        "Document the config",
        &["--class", "docs"],
    );
    assert_ne!(next["state"], "awaiting_route", "{next}");
    let next = next["run_id"].as_str().unwrap().to_string();
    let view = home.wait_idle(&next);
    assert_eq!(view["model"], chosen.as_str());
    assert!(
        notes(&view)
            .iter()
            .any(|n| n.starts_with("route remembered for docs tasks")),
        "{view}"
    );
}

#[test]
fn a_blocked_run_offers_escalation_and_escalate_starts_the_child_run() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch(
        "blocked",
        "Migrate the database",
        &["--model", "sim-standard"],
    );
    home.wait_idle(&run);
    home.json(&["complete", &run]);
    let view = home.wait_terminal(&run);
    assert_eq!(view["escalation"]["kind"], "escalate", "{view}");
    assert_eq!(view["escalation"]["to_model"], "sim-frontier", "{view}");
    assert_eq!(home.row(&run)["escalation_offered"], true);

    let child = home.json(&["escalate", &run]);
    let child_id = child["run_id"].as_str().unwrap().to_string();
    assert_eq!(child["model"], "sim-frontier", "{child}");
    let view = home.show(&child_id);
    assert_eq!(view["parent_run"], run.as_str(), "{view}");
    assert_eq!(view["depth"], 1, "{view}");
    assert!(
        view["task"]
            .as_str()
            .unwrap()
            .contains("Migrate the database")
    );
}

#[test]
fn a_crash_offers_a_retry_on_the_same_model() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch(
        "crash-midturn",
        "Read the config",
        &["--model", "sim-small"],
    );
    let view = home.wait_terminal(&run);
    assert_eq!(view["state"], "failed");
    assert_eq!(view["escalation"]["kind"], "retry", "{view}");
    assert_eq!(view["escalation"]["to_model"], "sim-small", "{view}");
    let retry = home.json(&["retry", &run]);
    assert_eq!(retry["model"], "sim-small", "{retry}");
    let view = home.show(retry["run_id"].as_str().unwrap());
    assert_eq!(view["parent_run"], run.as_str());
    assert_eq!(view["depth"], 1);
}

#[test]
fn an_api_error_that_outlasts_the_retries_is_transient_and_offers_a_retry() {
    // The turn is not sent again (`resend_turns_max = 0`): the run fails at once.
    let home = Home::with_config("[limits]\nresend_turns_max = 0\n");
    let _serve = home.serve();
    let run = home.dispatch("api-error", "Read the config", &["--model", "sim-small"]);
    let view = home.wait_terminal(&run);
    assert_eq!(view["state"], "failed", "{view}");
    assert_eq!(view["completion_reason"], "provider_unavailable", "{view}");
    assert_eq!(view["escalation"]["kind"], "retry", "{view}");
    assert_eq!(view["escalation"]["to_model"], "sim-small", "{view}");
    let notes: Vec<&str> = view["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .filter_map(|n| n["text"].as_str())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("the model API failed with HTTP 529: Overloaded.")),
        "the status and the API's message: {notes:?}"
    );
    assert!(notes.iter().any(|n| n.contains("may pass")), "{notes:?}");
}
