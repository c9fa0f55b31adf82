//! Money and rails through the headless CLI on the simulated agent: a run stopped within
//! one usage row of its cap, the session hard cap stopping everything and refusing
//! dispatches until it is raised, unpriced models, the provider rail and its queue, a
//! config change taking effect without a restart, and `drover budget` agreeing with the
//! ledger's usage rows.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::Home;
use serde_json::Value;

/// One slow-spender step costs this much (10,000 input + 1,333 output tokens at the
/// sim-standard price, and what the scenario reports).
const STEP_USD: f64 = 0.05;

fn cost(view: &Value) -> f64 {
    view["cost_usd"].as_f64().expect("cost_usd")
}

fn ledger_usage_sum(home: &Home) -> f64 {
    let conn = rusqlite::Connection::open_with_flags(
        home.path().join("ledger.sqlite3"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    conn.query_row(
        "SELECT COALESCE(SUM(cost_usd), 0) FROM usage WHERE budget_session = 'default'",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

fn budget_decisions(home: &Home, decision: &str) -> i64 {
    let conn = rusqlite::Connection::open_with_flags(
        home.path().join("ledger.sqlite3"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    conn.query_row(
        "SELECT COUNT(*) FROM decisions WHERE kind = 'budget' AND decision = ?1",
        [decision],
        |r| r.get(0),
    )
    .unwrap()
}

#[test]
fn a_run_is_stopped_mid_turn_within_one_usage_row_of_its_cap() {
    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("slow-spender", "Refactor everything", &["--budget", "0.30"]);
    let view = home.wait_terminal(&run);
    assert_eq!(view["state"], "stopped", "{view}");
    assert_eq!(view["completion_reason"], "budget_cap", "{view}");
    assert_eq!(view["live_state"]["cause"], "stopped", "{view}");
    let spent = cost(&view);
    assert!(spent >= 0.30 - 1e-9, "stopped before the cap: {spent}");
    assert!(
        spent <= 0.30 + STEP_USD + 1e-9,
        "overshot by more than one row: {spent}"
    );
    assert_eq!(view["budget"]["cap"], 0.3, "{view}");
    // The turn never finished (it was stopped mid-turn), so it is booked from its
    // streamed usage at catalog prices.
    assert_eq!(view["cost_basis"], "estimated", "{view}");
    let turns = view["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1, "{view}");
    assert!(turns[0]["ended_at"].is_i64(), "{view}");
    let budget = home.json(&["budget"]);
    assert!(
        (budget["spent_usd"].as_f64().unwrap() - spent).abs() < 1e-9,
        "{budget}"
    );
}

#[test]
fn the_session_hard_cap_stops_every_run_and_refuses_dispatch_until_raised() {
    let home =
        Home::with_config("[limits]\nsession_warning_usd = 0.2\nsession_hard_cap_usd = 1.0\n");
    let _serve = home.serve();
    let runs: Vec<String> = (0..3)
        .map(|i| {
            home.dispatch(
                "slow-spender",
                &format!("spender {i}"),
                &["--budget", "0.30"],
            )
        })
        .collect();
    // The caps fit (3 x $0.30 of $1.00); now the user lowers the hard cap under them.
    let lowered = home.json(&["budget", "set", "--hard", "0.5"]);
    assert_eq!(lowered["hard_cap_usd"], 0.5, "{lowered}");
    for run in &runs {
        let view = home.wait_terminal(run);
        assert_eq!(view["state"], "stopped", "{view}");
        let reason = view["completion_reason"].as_str().unwrap();
        assert!(
            reason == "session_budget_cap" || reason == "budget_cap",
            "{view}"
        );
    }
    let reasons: Vec<String> = runs
        .iter()
        .map(|r| {
            home.show(r)["completion_reason"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(
        reasons.iter().any(|r| r == "session_budget_cap"),
        "{reasons:?}"
    );
    let total: f64 = runs.iter().map(|r| cost(&home.show(r))).sum();
    assert!(
        total <= 0.5 + 3.0 * STEP_USD + 1e-9,
        "the session overshot: {total}"
    );
    assert_eq!(budget_decisions(&home, "warning"), 1, "warned exactly once");
    assert_eq!(budget_decisions(&home, "hard_cap"), 1);
    let budget = home.json(&["budget"]);
    assert_eq!(budget["closed"], true, "{budget}");

    let refusal = home.refused(
        &[
            "dispatch",
            "--provider",
            "sim",
            "--scenario",
            "quick-success",
            "one more",
        ],
        "BUDGET_EXCEEDED",
    );
    assert!(refusal.contains("budget set --hard"), "{refusal}");

    // Raising the cap reopens the session without a restart.
    let raised = home.json(&["budget", "set", "--hard", "5"]);
    assert_eq!(raised["closed"], false, "{raised}");
    let run = home.dispatch("quick-success", "one more", &[]);
    let view = home.wait_idle(&run);
    assert_eq!(view["state"], "idle", "{view}");
    assert_eq!(budget_decisions(&home, "reopened"), 1);
}

#[test]
fn an_unpriced_model_is_refused_when_pricing_is_enforced_and_flagged_otherwise() {
    let home = Home::with_config("[pricing]\nenforce = true\n");
    let serve = home.serve();
    let refusal = home.refused(
        &[
            "dispatch",
            "--provider",
            "sim",
            "--model",
            "sim-unpriced",
            "--scenario",
            "quick-success",
            "no price",
        ],
        "BUDGET_UNPRICED",
    );
    assert!(refusal.contains("sim-unpriced"), "{refusal}");
    drop(serve);

    let home = Home::new();
    let _serve = home.serve();
    let run = home.dispatch("quick-success", "no price", &["--model", "sim-unpriced"]);
    let view = home.wait_idle(&run);
    let notes: Vec<&str> = view["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["text"].as_str())
        .collect();
    assert!(
        notes.iter().any(|n| n.contains("has no price")),
        "{notes:?}"
    );
}

#[test]
fn unknown_and_hidden_models_are_refused_with_suggestions() {
    let home = Home::with_config(
        "[[catalog.models]]\nprovider = \"sim\"\nid = \"sim-small\"\nhidden = true\n",
    );
    let _serve = home.serve();
    let unknown = home.refused(
        &[
            "dispatch",
            "--provider",
            "sim",
            "--model",
            "sim-standrd",
            "x",
        ],
        "MODEL_UNKNOWN",
    );
    assert!(unknown.contains("sim-standard"), "{unknown}");
    home.refused(
        &["dispatch", "--provider", "sim", "--model", "sim-small", "x"],
        "MODEL_DISABLED",
    );
}

#[test]
fn the_fourth_claude_code_run_queues_and_starts_when_one_ends() {
    // claude-code runs drover's simulated agent here (same protocol), so the default
    // claude-code rail of 3 applies. The runs share one directory at once (rails are
    // under test here, not directories).
    let home = Home::with_config(&format!(
        "[providers.claude-code]\ncommand = \"{}\"\nargs = [\"sim-agent\"]\n\
         [providers.claude-code.env]\nDROVER_SIM_SCENARIO = \"hang\"\n\
         [workspaces]\nshared_conflict = \"allow\"\n",
        common::drover_bin()
    ));
    let _serve = home.serve();
    let dispatch = |task: &str, extra: &[&str]| -> Value {
        let mut args = vec!["dispatch", "--provider", "claude-code"];
        args.extend_from_slice(extra);
        args.push(task);
        home.json(&args)
    };
    let first: Vec<String> = (0..3)
        .map(|i| {
            dispatch(&format!("run {i}"), &[])["run_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let fourth = dispatch("run 4", &[]);
    assert_eq!(fourth["state"], "queued", "{fourth}");
    let fourth = fourth["run_id"].as_str().unwrap().to_string();
    let notes = home.notes(&fourth);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("claude-code already runs 3")),
        "{notes:?}"
    );
    home.refused(
        &[
            "dispatch",
            "--provider",
            "claude-code",
            "--no-queue",
            "run 5",
        ],
        "MAX_CONCURRENT",
    );
    home.json(&["stop", &first[0]]);
    let view = home.wait_for(&fourth, "the queued run to start", |v| {
        v["state"] != "queued"
    });
    assert!(view["state"].as_str().unwrap() != "queued", "{view}");
    home.json(&["kill-all"]);
}

#[test]
fn a_changed_limit_takes_effect_without_a_restart() {
    // The runs share one directory at once (rails are under test here, not directories).
    let allow = "[workspaces]\nshared_conflict = \"allow\"\n";
    let home = Home::with_config(&format!("[limits.per_provider]\nsim = 1\n{allow}"));
    let _serve = home.serve();
    let a = home.dispatch("hang", "a", &[]);
    let b = home.dispatch_json("hang", "b", &[]);
    assert_eq!(b["state"], "queued", "{b}");
    let b = b["run_id"].as_str().unwrap().to_string();
    // The user raises the rail in the config file; the next dispatch sees it.
    std::fs::write(
        home.path().join("config.toml"),
        format!("[limits.per_provider]\nsim = 3\n{allow}"),
    )
    .unwrap();
    let c = home.dispatch_json("hang", "c", &[]);
    assert_ne!(c["state"], "queued", "{c}");
    let view = home.wait_for(&b, "the queued run to start", |v| v["state"] != "queued");
    assert_ne!(view["state"], "queued");
    assert_ne!(home.show(&a)["state"], "queued");
    home.json(&["kill-all"]);
}

#[test]
fn budget_json_matches_the_sum_of_the_ledgers_usage_rows() {
    let home = Home::new();
    let _serve = home.serve();
    let runs = [
        home.dispatch("quick-success", "one", &[]),
        home.dispatch("tool-permission", "two", &["--policy", "auto"]),
        home.dispatch("slow-spender", "three", &["--budget", "0.20"]),
        home.dispatch("crash-midturn", "four", &[]),
    ];
    for run in &runs {
        home.wait_until(run, "idle");
    }
    home.wait_terminal(&runs[2]);
    let budget = home.json(&["budget"]);
    let sum = ledger_usage_sum(&home);
    assert!(
        (budget["spent_usd"].as_f64().unwrap() - sum).abs() < 1e-9,
        "budget says {budget}, the ledger's rows sum to {sum}"
    );
    let by_basis = &budget["runs_by_basis"];
    assert!(by_basis["reported"].as_u64().unwrap_or(0) >= 2, "{budget}");
    // Offline (no owner), the ledger gives the same spend.
    drop(_serve);
    let offline = home.json(&["budget"]);
    assert!(
        (offline["spent_usd"].as_f64().unwrap() - sum).abs() < 1e-9,
        "{offline}"
    );
}

#[test]
fn ten_dispatches_fired_at_once_under_the_default_limits_are_all_accepted_and_all_run() {
    // The default limits; the runs share one directory at once (money and rails are under
    // test here, not directories).
    let home = Home::with_config("[workspaces]\nshared_conflict = \"allow\"\n");
    let _serve = home.serve();
    // Each run asks the user twice: waiting on the user, it holds no money.
    let runs: Vec<String> = std::thread::scope(|scope| {
        let fired: Vec<_> = (0..10)
            .map(|i| {
                let home = &home;
                scope.spawn(move || {
                    let out = home.drover(&[
                        "dispatch",
                        "--provider",
                        "sim",
                        "--scenario",
                        "tool-permission",
                        &format!("run {i}"),
                    ]);
                    assert_eq!(
                        out.status.code(),
                        Some(0),
                        "dispatch {i} was accepted: {}",
                        common::describe(&out)
                    );
                    common::stdout(&out).trim().to_string()
                })
            })
            .collect();
        fired.into_iter().map(|t| t.join().unwrap()).collect()
    });
    // Every one runs: the user answers each request as it comes, until all ten are idle.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    loop {
        let mut idle = 0;
        for run in &runs {
            let view = home.show(run);
            match view["state"].as_str() {
                Some("idle") => idle += 1,
                Some("queued" | "starting" | "running" | "awaiting_permission") => {
                    if let Some(request) = view["pending"].as_array().and_then(|p| p.first()) {
                        let id = common::str_at(request, "request_id");
                        let out = home.drover(&["respond", run, id, "allow"]);
                        // Answered already, in the moment since it was read: fine.
                        let err = common::stderr(&out);
                        assert!(
                            out.status.success()
                                || err.contains("PERMISSION_ALREADY_RESOLVED")
                                || err.contains("NO_PENDING_REQUEST"),
                            "{}",
                            common::describe(&out)
                        );
                    }
                }
                other => panic!("{run} is {other:?}: {view}"),
            }
        }
        if idle == runs.len() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{idle} of {} runs are idle: {:?}",
            runs.len(),
            home.runs()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    for run in &runs {
        let view = home.show(run);
        assert_eq!(view["last_result"]["status"], "done", "{view}");
    }
    let budget = home.json(&["budget"]);
    assert_eq!(budget["closed"], false, "{budget}");
}

#[test]
fn a_dispatch_whose_money_is_held_by_a_turn_waits_for_it_and_no_queue_refuses() {
    let home = Home::with_config(
        "[limits]\nsession_warning_usd = 0.9\nsession_hard_cap_usd = 1.0\n\
         [workspaces]\nshared_conflict = \"allow\"\n",
    );
    let _serve = home.serve();
    // A turn that never ends holds $0.60 of the $1.00.
    let holder = home.dispatch("hang", "hold the money", &["--budget", "0.60"]);
    home.wait_for(&holder, "its turn", |v| v["state"] == "running");
    let waiting = home.dispatch_json("quick-success", "wait for it", &["--budget", "0.60"]);
    assert_eq!(waiting["state"], "queued", "{waiting}");
    let waiting = str_of(&waiting, "run_id");
    let view = home.show(&waiting);
    assert_eq!(
        view["live_state"]["detail"], "queued: waiting for $0.60 of budget",
        "{view}"
    );
    assert_eq!(view["budget"]["cap"], 0.6, "its whole cap: {view}");
    let refusal = home.refused(
        &[
            "dispatch",
            "--provider",
            "sim",
            "--scenario",
            "quick-success",
            "--budget",
            "0.60",
            "--no-queue",
            "may not wait",
        ],
        "BUDGET_EXCEEDED",
    );
    assert!(
        refusal.contains(&holder),
        "names the run holding it: {refusal}"
    );
    home.json(&["stop", &holder]);
    let view = home.wait_idle(&waiting);
    assert_eq!(view["state"], "idle", "{view}");
}

fn str_of(value: &Value, key: &str) -> String {
    common::str_at(value, key).to_string()
}
