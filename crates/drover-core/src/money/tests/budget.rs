use crate::config::Config;
use crate::error::ErrorCode;
use crate::ledger::BudgetSessionRecord;
use crate::money::budget::{
    BudgetAction, Fit, RunCap, RunMoney, SessionMoney, StopReason, TurnFit, after_usage,
    check_price, fit, no_queue_refusal, reserved, run_cap, session_caps, turn_fits, waiting_words,
};
use crate::money::catalog::Catalog;
use crate::money::pricing::Price;

fn session(spent: f64, reserved: f64) -> SessionMoney {
    SessionMoney::restore("default", spent, reserved, 8.0, 25.0)
}

fn refusal(f: Fit) -> crate::error::DroverError {
    match f {
        Fit::Refused(e) => e,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_run_is_fitted_into_what_the_hard_cap_leaves_after_spend() {
    // (requested, spent, reserved, expected)
    enum Want {
        Granted(f64),
        Lowered(f64),
        Refused,
    }
    let cases: &[(&str, f64, f64, f64, Want)] = &[
        ("plenty left", 5.0, 0.0, 0.0, Want::Granted(5.0)),
        ("exactly what is left", 5.0, 20.0, 0.0, Want::Granted(5.0)),
        ("less left than asked", 5.0, 21.79, 0.0, Want::Lowered(3.21)),
        // reservations are released as turns end: they never lower or refuse a cap
        (
            "reservations do not count",
            5.0,
            10.0,
            12.0,
            Want::Granted(5.0),
        ),
        (
            "reservations fill the rest",
            5.0,
            20.0,
            5.0,
            Want::Granted(5.0),
        ),
        // whole cents, rounded down: $0.019 left is one cent
        (
            "whole cents round down",
            5.0,
            24.981,
            0.0,
            Want::Lowered(0.01),
        ),
        (
            "float noise is not a lost cent",
            25.0,
            0.1 + 0.2,
            21.4,
            Want::Lowered(24.7),
        ),
        ("less than a cent left", 5.0, 24.995, 0.0, Want::Refused),
        ("nothing left", 5.0, 25.0, 0.0, Want::Refused),
        ("overspent", 5.0, 26.0, 0.0, Want::Refused),
    ];
    for (name, requested, spent, held, want) in cases {
        let s = SessionMoney {
            closed: false,
            ..session(*spent, *held)
        };
        let got = fit(*requested, &s);
        match (want, got) {
            (Want::Granted(cap), Fit::Granted { cap: got }) => assert_eq!(got, *cap, "{name}"),
            (Want::Lowered(cap), Fit::Lowered { cap: got, note }) => {
                assert_eq!(got, *cap, "{name}");
                assert!(
                    note.starts_with(&format!("budget lowered from ${requested:.2} to ${cap:.2}")),
                    "{name}: {note}"
                );
            }
            (Want::Refused, Fit::Refused(e)) => {
                assert_eq!(e.code, ErrorCode::BudgetExceeded, "{name}");
                assert!(
                    e.message.contains("drover budget set --hard"),
                    "{name}: {}",
                    e.message
                );
            }
            (_, got) => panic!("{name}: unexpected {got:?}"),
        }
    }
}

#[test]
fn the_lowered_note_and_the_refusal_say_where_the_money_went() {
    let Fit::Lowered { note, .. } = fit(5.0, &session(21.79, 3.0)) else {
        panic!("expected a lowered cap");
    };
    assert_eq!(
        note,
        "budget lowered from $5.00 to $3.21: that is what budget session default has left ($21.79 spent under its $25.00 hard cap)"
    );
    let e = refusal(fit(
        5.0,
        &SessionMoney {
            closed: false,
            ..session(24.999, 0.0)
        },
    ));
    assert_eq!(
        e.message,
        "Budget session default has nothing left for a new run ($25.00 spent under its $25.00 hard cap); raise the cap with `drover budget set --hard AMOUNT`, or start a new budget session with `drover budget new NAME`."
    );
}

#[test]
fn a_closed_session_refuses_until_its_cap_is_raised() {
    let mut s = session(25.3, 0.0);
    assert!(s.closed);
    let e = refusal(fit(1.0, &s));
    assert_eq!(e.code, ErrorCode::BudgetExceeded);
    assert!(
        e.message
            .starts_with("Budget session default reached its hard cap of $25.00 ($25.30 spent)")
    );

    // raising the cap reopens it
    let actions = s.set_caps(8.0, 40.0, 0.0);
    assert!(!s.closed);
    assert!(matches!(
        actions.as_slice(),
        [BudgetAction::Reopened { .. }]
    ));
    assert_eq!(fit(5.0, &s), Fit::Granted { cap: 5.0 });
    // a raise that still leaves the spend at the cap does not
    let mut s = session(25.3, 0.0);
    assert!(s.set_caps(8.0, 25.3, 0.0).is_empty());
    assert!(s.closed);
}

#[test]
fn lowering_the_hard_cap_to_the_spend_closes_the_session_and_stops_its_runs() {
    let mut s = session(12.0, 3.0);
    let actions = s.set_caps(8.0, 10.0, 0.0);
    assert!(s.closed);
    assert!(matches!(
        actions.as_slice(),
        [BudgetAction::StopSession { .. }]
    ));
    assert!(matches!(fit(1.0, &s), Fit::Refused(_)));
}

#[test]
fn the_warning_is_rearmed_or_given_when_it_moves() {
    let mut s = session(9.0, 0.0);
    assert!(s.warned);
    // raised above the spend: armed again, nothing said now
    assert!(s.set_caps(10.0, 25.0, 0.0).is_empty());
    assert!(!s.warned);
    // lowered to the spend: said now, once
    let actions = s.set_caps(9.0, 25.0, 0.0);
    assert!(matches!(actions.as_slice(), [BudgetAction::Warn { .. }]));
    assert!(s.set_caps(9.0, 25.0, 0.0).is_empty());
}

#[test]
fn a_warning_given_on_streamed_spend_is_not_armed_again_by_a_new_hard_cap() {
    // $0.15 booked and $0.10 streamed by a turn in flight: past the $0.20 warning, as the
    // usage check sees it (booked + streamed).
    let mut s = SessionMoney::new("default", 0.2, 1.0);
    s.spent = 0.15;
    let mut streamed = s.clone();
    streamed.spent += 0.10;
    let run = RunMoney {
        cap: 0.3,
        spent: 0.0,
    };
    assert_eq!(kinds(&after_usage(&run, &mut streamed)), ["warn"]);
    s.warned = streamed.warned;
    // The user lowers the hard cap: judged on the same spend, the warning stays given.
    assert!(s.set_caps(0.2, 0.5, 0.10).is_empty());
    assert!(s.warned);
    // Booked spend crossing the warning later says nothing again.
    s.spent = 0.3;
    assert!(kinds(&after_usage(&run, &mut s)).is_empty());
}

/// Books `cost` on `run` and `session` as the driver does, then asks.
fn book(cost: f64, run: &mut RunMoney, s: &mut SessionMoney) -> Vec<BudgetAction> {
    run.spent += cost;
    s.spent += cost;
    after_usage(run, s)
}

fn kinds(actions: &[BudgetAction]) -> Vec<&'static str> {
    actions
        .iter()
        .map(|a| match a {
            BudgetAction::StopRun {
                reason: StopReason::BudgetCap,
                ..
            } => "stop run (budget_cap)",
            BudgetAction::StopRun {
                reason: StopReason::SessionBudgetCap,
                ..
            } => "stop run (session_budget_cap)",
            BudgetAction::Warn { .. } => "warn",
            BudgetAction::StopSession { .. } => "stop session",
            BudgetAction::Reopened { .. } => "reopened",
        })
        .collect()
}

#[test]
fn a_run_is_stopped_by_the_row_that_reaches_its_cap() {
    let mut run = RunMoney {
        cap: 1.0,
        spent: 0.0,
    };
    let mut s = SessionMoney::new("default", 8.0, 25.0);
    let steps: &[(f64, &[&str])] = &[
        (0.4, &[]),
        (0.5, &[]),
        // 0.4 + 0.5 + 0.1 is 0.9999999999999999 in binary: still the cap
        (0.1, &["stop run (budget_cap)"]),
        // a late row of a stopping run asks again; the driver ignores a second stop
        (0.05, &["stop run (budget_cap)"]),
    ];
    for (cost, want) in steps {
        assert_eq!(
            kinds(&book(*cost, &mut run, &mut s)),
            *want,
            "after +{cost}"
        );
    }
    let Some(BudgetAction::StopRun { note, .. }) = after_usage(&run, &mut s).pop() else {
        panic!("expected a stop");
    };
    assert_eq!(note, "the run spent $1.05 of its $1.00 budget");
}

#[test]
fn the_session_warning_is_given_once() {
    let mut a = RunMoney {
        cap: 25.0,
        spent: 0.0,
    };
    let mut b = RunMoney {
        cap: 25.0,
        spent: 0.0,
    };
    let mut s = SessionMoney::new("default", 8.0, 25.0);
    assert!(book(4.0, &mut a, &mut s).is_empty());
    assert!(book(3.99, &mut b, &mut s).is_empty());
    let actions = book(0.02, &mut a, &mut s);
    assert_eq!(kinds(&actions), ["warn"]);
    let BudgetAction::Warn { note } = &actions[0] else {
        unreachable!()
    };
    assert_eq!(
        note,
        "budget session default has spent $8.01, past its $8.00 warning (hard cap $25.00)"
    );
    assert!(s.warned);
    for _ in 0..5 {
        assert!(book(0.5, &mut b, &mut s).is_empty());
    }
    // a restart past the warning does not warn again
    let mut again = SessionMoney::restore("default", s.spent, 0.0, 8.0, 25.0);
    assert!(book(0.1, &mut a, &mut again).is_empty());
}

#[test]
fn the_hard_cap_stops_every_run_and_closes_the_session() {
    let mut a = RunMoney {
        cap: 20.0,
        spent: 0.0,
    };
    let mut b = RunMoney {
        cap: 20.0,
        spent: 0.0,
    };
    let mut s = SessionMoney::new("default", 8.0, 25.0);
    assert_eq!(kinds(&book(12.0, &mut a, &mut s)), ["warn"]);
    assert!(book(12.0, &mut b, &mut s).is_empty());
    // the row that reaches $25: everything of the session stops, the session closes
    let actions = book(1.5, &mut a, &mut s);
    assert_eq!(kinds(&actions), ["stop session"]);
    assert!(s.closed);
    assert!(matches!(fit(1.0, &s), Fit::Refused(_)));
    // the other run's last row, overshooting by one step, is told to stop too
    assert_eq!(
        kinds(&book(0.7, &mut b, &mut s)),
        ["stop run (session_budget_cap)"]
    );

    // one row past both the warning and the cap, and past the run's own cap
    let mut c = RunMoney {
        cap: 5.0,
        spent: 0.0,
    };
    let mut s = SessionMoney::new("default", 8.0, 25.0);
    assert_eq!(
        kinds(&book(30.0, &mut c, &mut s)),
        ["warn", "stop run (budget_cap)", "stop session"]
    );
}

#[test]
fn a_raised_cap_reopens_the_session_for_new_runs() {
    let mut run = RunMoney {
        cap: 25.0,
        spent: 0.0,
    };
    let mut s = SessionMoney::new("default", 8.0, 25.0);
    book(25.0, &mut run, &mut s);
    assert!(s.closed);
    let actions = s.set_caps(8.0, 30.0, 0.0);
    assert_eq!(kinds(&actions), ["reopened"]);
    let BudgetAction::Reopened { note } = &actions[0] else {
        unreachable!()
    };
    assert_eq!(
        note,
        "budget session default is open again: its hard cap is now $30.00 ($25.00 spent)"
    );
    assert_eq!(fit(5.0, &s), Fit::Granted { cap: 5.0 });
    // and closes again at the new cap
    let mut next = RunMoney {
        cap: 5.0,
        spent: 0.0,
    };
    assert_eq!(
        kinds(&book(5.0, &mut next, &mut s)),
        ["stop run (budget_cap)", "stop session"]
    );
}

#[test]
fn live_runs_reserve_what_their_cap_has_left() {
    let live = [
        RunMoney {
            cap: 5.0,
            spent: 1.25,
        },
        RunMoney {
            cap: 2.0,
            spent: 2.5,
        },
        RunMoney {
            cap: 0.1,
            spent: 0.0,
        },
    ];
    assert_eq!(live[0].reservation(), 3.75);
    // an overspent run reserves nothing (never a negative reservation)
    assert_eq!(live[1].reservation(), 0.0);
    assert_eq!(reserved(&live), 3.85);
    assert_eq!(reserved(&[]), 0.0);
    let s = SessionMoney::restore("default", 20.0, reserved(&live), 8.0, 25.0);
    assert_eq!(s.available(), 1.15);
    // The cap is what the hard cap leaves after spend; the turn waits for the rest.
    assert_eq!(fit(5.0, &s), Fit::Granted { cap: 5.0 });
    assert_eq!(
        turn_fits(5.0, &s),
        TurnFit::Waits {
            need: 5.0,
            free: 1.15
        }
    );
}

#[test]
fn a_turn_starts_only_when_what_its_cap_has_left_is_free() {
    // (need, spent, reserved, waits)
    let cases: &[(&str, f64, f64, f64, bool)] = &[
        ("nothing held", 5.0, 0.0, 0.0, false),
        ("exactly what is free", 5.0, 10.0, 10.0, false),
        ("a cent short", 5.0, 10.0, 10.01, true),
        ("held by turns in flight", 4.2, 0.0, 24.2, true),
        (
            "float noise is not a lost cent",
            0.3,
            24.4,
            0.1 + 0.2,
            false,
        ),
        ("a spent-out run needs nothing", 0.0, 25.0, 0.0, false),
    ];
    for &(name, need, spent, held, waits) in cases {
        let s = SessionMoney {
            closed: false,
            ..session(spent, held)
        };
        let got = turn_fits(need, &s);
        assert_eq!(
            matches!(got, TurnFit::Waits { .. }),
            waits,
            "{name}: {got:?}"
        );
    }
    let TurnFit::Waits { need, free } = turn_fits(4.2, &session(0.0, 24.2)) else {
        panic!("it waits");
    };
    assert_eq!((need, free), (4.2, 0.8));
    assert_eq!(waiting_words(need), "waiting for $4.20 of budget");
    let e = no_queue_refusal(5.0, &session(3.0, 21.2), " Held by r1 ($5.00).");
    assert_eq!(e.code, ErrorCode::BudgetExceeded);
    assert_eq!(
        e.message,
        "Budget session default has $0.80 free and this run needs $5.00 ($3.00 spent, $21.20 held by turns in flight, $25.00 hard cap); dispatch it without --no-queue to let it wait for the money, or raise the cap with `drover budget set --hard AMOUNT`. Held by r1 ($5.00)."
    );
}

#[test]
fn caps_are_clamped_into_the_configured_range_in_whole_cents() {
    let limits = Config::defaults().limits;
    let cases: &[(Option<f64>, f64, Option<f64>)] = &[
        (None, 5.0, None),
        (Some(2.5), 2.5, None),
        (Some(0.01), 0.10, Some(0.01)),
        (Some(99.0), 25.0, Some(99.0)),
        (Some(4.567), 4.57, Some(4.567)),
        (Some(25.0), 25.0, None),
    ];
    for &(requested, cap, clamped_from) in cases {
        assert_eq!(
            run_cap(requested, &limits),
            RunCap { cap, clamped_from },
            "{requested:?}"
        );
    }
    let nan = run_cap(Some(f64::NAN), &limits);
    assert_eq!(nan.cap, 5.0);
    assert!(nan.clamped_from.is_some_and(f64::is_nan));

    // limits changed since the run was queued: the re-fit sees the new range
    let mut lowered = limits.clone();
    lowered.budget_usd_max = 3.0;
    assert_eq!(run_cap(Some(5.0), &lowered).cap, 3.0);
}

#[test]
fn session_caps_come_from_the_session_else_the_limits() {
    let limits = Config::defaults().limits;
    assert_eq!(session_caps(&limits, None), (8.0, 25.0));
    let record = BudgetSessionRecord {
        name: "big".into(),
        created_at: 0,
        warning_usd: None,
        hard_cap_usd: Some(100.0),
    };
    assert_eq!(session_caps(&limits, Some(&record)), (8.0, 100.0));
}

#[test]
fn unpriced_models_are_refused_when_pricing_is_enforced_and_flagged_otherwise() {
    let catalog = Catalog::embedded();
    let price = |m: &str| catalog.price("sim", m);
    // (enforce, model, refused, flagged)
    let cases: &[(bool, &str, bool, bool)] = &[
        (true, "sim-standard", false, false),
        (true, "sim-free", false, false),
        (true, "sim-unpriced", true, false),
        (true, "not-in-the-catalog", true, false),
        (false, "sim-standard", false, false),
        (false, "sim-unpriced", false, true),
    ];
    for &(enforce, model, refused, flagged) in cases {
        match check_price(enforce, "sim", model, &price(model)) {
            Err(e) => {
                assert!(refused, "{model} refused");
                assert_eq!(e.code, ErrorCode::BudgetUnpriced);
                assert!(
                    e.message.contains("pricing.enforce = false"),
                    "{}",
                    e.message
                );
            }
            Ok(note) => {
                assert!(!refused, "{model} accepted");
                assert_eq!(note.is_some(), flagged, "{model}");
            }
        }
    }
    assert_eq!(
        check_price(true, "codex", "gpt-x", &Price::Unpriced)
            .unwrap_err()
            .message,
        "Model gpt-x of provider codex has no price in the model catalog and pricing is enforced; add its prices under [[catalog.models]] in your config, pick a priced model, or set `pricing.enforce = false`."
    );
}

#[test]
fn stop_reasons_are_the_completion_reasons() {
    assert_eq!(StopReason::BudgetCap.as_str(), "budget_cap");
    assert_eq!(StopReason::SessionBudgetCap.as_str(), "session_budget_cap");
}
