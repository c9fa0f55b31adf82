//! Money (docs/ARCHITECTURE.md §"Money"): a run out of money is stopped mid-turn, the
//! warning is given once, the hard cap stops every run of the session and refuses new ones,
//! a config change takes effect at once; money is reserved for a turn, and a dispatch that
//! does not fit waits for it in the queue, in order (refused only with `--no-queue`).

use super::*;

/// Output tokens of the sim's standard model ($15 per million) costing `usd`.
fn tokens_for(usd: f64) -> u64 {
    (usd / 15.0 * 1_000_000.0).round() as u64
}

#[test]
fn a_run_out_of_money_is_stopped_mid_turn() {
    let mut h = Harness::new("");
    let id = h
        .dispatch_with(|s| s.budget_usd = Some(0.10))
        .run()
        .head
        .run_id;
    h.provider(&id, ProviderEvent::Ready { version: None });
    let out = h.provider(&id, usage(tokens_for(0.05)));
    assert!(out.sends.is_empty(), "within its cap");
    let cost = h.core.runs[&id].summary().head.cost_usd;
    assert!((cost - 0.05).abs() < 1e-4, "booked as it streams: {cost}");
    let out = h.provider(&id, usage(tokens_for(0.06)));
    assert!(out.sent(&id).contains(&&ProviderCommand::Shutdown));
    assert!(
        out.notes()
            .iter()
            .any(|n| n.contains("of its $0.10 budget"))
    );
    h.exit(&id);
    assert_eq!(h.state(&id), RunState::Stopped);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("budget_cap"));
    // Its streamed usage is booked (estimated), never $0.
    let usage = &h.view(&id).usage;
    assert_eq!(usage.len(), 1);
    assert_eq!(usage[0].basis, "estimated");
}

#[test]
fn the_hard_cap_stops_the_session_and_refuses_new_runs() {
    let mut h = Harness::new("[limits]\nsession_warning_usd = 0.5\nsession_hard_cap_usd = 1.0\n");
    let a = h
        .dispatch_with(|s| s.budget_usd = Some(0.6))
        .run()
        .head
        .run_id;
    let b = h.dispatch_with(|s| s.budget_usd = Some(0.4)).run();
    assert_eq!(
        b.head.state,
        RunState::Starting,
        "a's turn leaves $0.40 free"
    );
    let b = b.head.run_id;
    for id in [&a, &b] {
        h.provider(id, ProviderEvent::Ready { version: None });
    }
    let out = h.provider(&a, usage(tokens_for(0.55)));
    let budget_notes: Vec<_> = out
        .events
        .iter()
        .filter_map(|e| match e {
            DispatchEvent::Budget { note, .. } => Some(note.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(budget_notes.len(), 1, "the warning, once: {budget_notes:?}");
    assert!(budget_notes[0].contains("past its $0.50 warning"));
    let out = h.provider(&b, usage(tokens_for(0.45)));
    assert!(
        out.sent(&b).contains(&&ProviderCommand::Shutdown),
        "b is out of money"
    );
    assert!(
        out.sent(&a).contains(&&ProviderCommand::Shutdown),
        "and the session too"
    );
    h.exit(&a);
    h.exit(&b);
    assert_eq!(reason_of(&h, &b).as_deref(), Some("budget_cap"));
    assert_eq!(reason_of(&h, &a).as_deref(), Some("session_budget_cap"));
    let out = h.dispatch_with(|_| {});
    assert_eq!(out.refusal().code, ErrorCode::BudgetExceeded);
}

#[test]
fn a_changed_config_takes_effect_at_once() {
    let mut h = Harness::new("[limits.per_provider]\nsim = 1\n");
    h.running();
    let queued = h.dispatch();
    assert_eq!(h.state(&queued), RunState::Queued);
    let config = Config::parse("[limits.per_provider]\nsim = 2\n", Path::new("c.toml")).unwrap();
    let out = h.feed(Input::Config(Box::new(config)));
    assert_eq!(out.launches.len(), 1, "the room is used at once");
    assert_eq!(h.state(&queued), RunState::Starting);
}

#[test]
fn budget_set_lowering_the_hard_cap_to_the_spend_stops_the_session() {
    let mut h = Harness::with_session("", 3.0);
    let id = h.running();
    let out = h.request(Request::BudgetSet {
        warning_usd: Some(2.0),
        hard_cap_usd: Some(3.0),
    });
    assert!(matches!(&out.answers[..], [(_, Query::Budget { overlay })] if overlay.closed));
    assert!(out.sent(&id).contains(&&ProviderCommand::Shutdown));
    assert!(
        out.ops
            .iter()
            .any(|op| matches!(op, WriteOp::PutBudgetSession(r) if r.hard_cap_usd == Some(3.0)))
    );
    let out = h.request(Request::BudgetSet {
        warning_usd: Some(9.0),
        hard_cap_usd: Some(4.0),
    });
    assert_eq!(
        out.refusal().code,
        ErrorCode::InvalidSpec,
        "a warning above the cap"
    );
}

#[test]
fn a_refused_config_reload_is_kept_shown_in_the_budget_view_and_cleared_by_a_good_one() {
    let mut h = Harness::new("");
    let refusal = crate::DroverError::new(
        ErrorCode::ConfigInvalid,
        "/c.toml line 2: `limits.per_session_running` is 0",
    );
    let health = |out: &Out| -> Vec<Option<String>> {
        out.events
            .iter()
            .filter_map(|e| match e {
                DispatchEvent::Health { config_refused, .. } => Some(config_refused.clone()),
                _ => None,
            })
            .collect()
    };
    let out = h.feed(Input::ConfigRefused(refusal.clone()));
    let published = health(&out);
    assert_eq!(published.len(), 1, "{published:?}");
    let message = published[0].clone().expect("the refusal");
    assert!(
        message.contains("per_session_running") && message.contains("kept"),
        "{message}"
    );
    // The same refusal again is not news.
    assert!(health(&h.feed(Input::ConfigRefused(refusal))).is_empty());
    let out = h.request(Request::Budget);
    assert!(
        matches!(&out.answers[..], [(_, Query::Budget { overlay })] if overlay.config_refused.as_deref() == Some(message.as_str())),
        "{:?}",
        out.answers
    );
    let good = Config::parse("", Path::new("c.toml")).unwrap();
    assert_eq!(health(&h.feed(Input::Config(Box::new(good)))), vec![None]);
    let out = h.request(Request::Budget);
    assert!(
        matches!(&out.answers[..], [(_, Query::Budget { overlay })] if overlay.config_refused.is_none())
    );
}

/// Rails wide enough that only money holds runs back.
const WIDE: &str = "[limits]\nper_session_running = 20\n[limits.per_provider]\nsim = 20\n";

#[test]
fn runs_waiting_on_the_user_reserve_nothing() {
    let mut h = Harness::new(WIDE);
    // Four runs wait on the user (a permission, a question), one works: $5 is reserved,
    // not $25.
    for i in 0..4 {
        let id = h.running();
        let ask = if i % 2 == 0 {
            permission(&format!("p{i}"), "ls")
        } else {
            question(&format!("q{i}"))
        };
        h.provider(&id, ask);
        assert_eq!(h.state(&id), RunState::AwaitingPermission);
        assert!(!h.core.runs[&id].reserves(), "waiting on the user: nothing");
    }
    let working = h.running();
    assert!(h.core.runs[&working].reserves(), "its turn holds its cap");
    let out = h.request(Request::Budget);
    assert!(
        matches!(&out.answers[..], [(_, Query::Budget { overlay })] if overlay.reserved_usd == 5.0),
        "{:?}",
        out.answers
    );
    // Four more runs fit beside it, each with its whole cap.
    for _ in 0..4 {
        let run = h.dispatch_with(|_| {}).run();
        assert_eq!(run.head.state, RunState::Starting, "{run:?}");
        assert_eq!(run.head.budget_usd, 5.0);
    }
}

#[test]
fn a_dispatch_that_does_not_fit_waits_for_money_in_order() {
    let mut h = Harness::new(WIDE);
    // Turns in flight hold $21 of the $25 hard cap: four at $5, one at $1.
    let busy: Vec<String> = (0..4).map(|_| h.running()).collect();
    let small = h
        .dispatch_with(|s| s.budget_usd = Some(1.0))
        .run()
        .head
        .run_id;
    h.provider(&small, ProviderEvent::Ready { version: None });
    // $4.20 is not free ($4 is): the dispatch is accepted and waits, its reason on its
    // live line, with its whole cap.
    let out = h.dispatch_with(|s| s.budget_usd = Some(4.2));
    let first = out.run();
    assert_eq!(first.head.state, RunState::Queued);
    assert_eq!(first.head.budget_usd, 4.2, "not cut down for reservations");
    assert!(out.launches.is_empty());
    let first = first.head.run_id;
    assert_eq!(
        h.live(&first),
        (
            LiveStateKind::Admitted,
            Some("queued: waiting for $4.20 of budget".into())
        )
    );
    // A $1 dispatch would fit, but waits behind it: money goes in order.
    let second = h.dispatch_with(|s| s.budget_usd = Some(1.0)).run();
    assert_eq!(second.head.state, RunState::Queued);
    let second = second.head.run_id;
    assert_eq!(
        h.live(&second).1.as_deref(),
        Some("queued: waiting for $1.00 of budget")
    );
    // The $1 turn ends: $5 is free, the first starts and takes $4.20; $0.80 is not $1.
    let out = h.provider(
        &small,
        turn_done("## Result\nstatus: done\nsummary: did it\n"),
    );
    let started: Vec<&str> = out.launches.iter().map(|l| l.run_id.as_str()).collect();
    assert_eq!(started, [first.as_str()]);
    assert_eq!(h.state(&second), RunState::Queued);
    // A working run asks the user: its $5 is released, and the second starts.
    let out = h.provider(&busy[0], permission("p1", "ls"));
    let started: Vec<&str> = out.launches.iter().map(|l| l.run_id.as_str()).collect();
    assert_eq!(started, [second.as_str()]);
    assert_eq!(h.state(&second), RunState::Starting);
}

#[test]
fn no_queue_refuses_a_dispatch_that_does_not_fit_naming_the_turns_that_hold_the_money() {
    let mut h = Harness::new(WIDE);
    let busy: Vec<String> = (0..5).map(|_| h.running()).collect();
    let runs = h.core.runs.len();
    let out = h.dispatch_with(|s| s.queue_if_busy = Some(false));
    let e = out.refusal();
    assert_eq!(e.code, ErrorCode::BudgetExceeded);
    for id in &busy {
        assert!(e.message.contains(id.as_str()), "{}", e.message);
    }
    assert!(e.message.contains("without --no-queue"), "{}", e.message);
    assert!(
        out.ops.is_empty() && out.launches.is_empty(),
        "nothing made"
    );
    assert_eq!(h.core.runs.len(), runs);
    // Once a turn ends, the same dispatch starts at once.
    h.provider(
        &busy[0],
        turn_done("## Result\nstatus: done\nsummary: did it\n"),
    );
    let run = h.dispatch_with(|s| s.queue_if_busy = Some(false)).run();
    assert_eq!(run.head.state, RunState::Starting);
}

#[test]
fn a_follow_up_that_does_not_fit_waits_and_is_sent_when_money_is_free() {
    let mut h = Harness::new(WIDE);
    let idle = h.idle();
    let busy: Vec<String> = (0..5).map(|_| h.running()).collect();
    let out = h.request(Request::FollowUp {
        run_id: idle.clone(),
        text: "more".into(),
    });
    assert!(out.reply().is_ok(), "accepted: {:?}", out.reply());
    assert!(out.prompts(&idle).is_empty(), "not sent yet");
    assert_eq!(h.state(&idle), RunState::Idle);
    let (_, detail) = h.live(&idle);
    assert!(
        detail
            .as_deref()
            .is_some_and(|d| d.contains("waiting for $5.00 of budget")),
        "{detail:?}"
    );
    // A second follow-up waits behind the first.
    assert!(
        h.request(Request::FollowUp {
            run_id: idle.clone(),
            text: "and then this".into(),
        })
        .reply()
        .is_ok()
    );
    let out = h.provider(
        &busy[2],
        turn_done("## Result\nstatus: done\nsummary: did it\n"),
    );
    assert_eq!(out.prompts(&idle), ["more"]);
    assert_eq!(h.state(&idle), RunState::Running);
    let out = h.provider(
        &idle,
        turn_done("## Result\nstatus: done\nsummary: more done\n"),
    );
    assert_eq!(out.prompts(&idle), ["and then this"], "the next, in order");
}
