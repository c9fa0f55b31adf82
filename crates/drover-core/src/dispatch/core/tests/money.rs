//! Money (docs/ARCHITECTURE.md §"Money"): a run out of money is stopped mid-turn, the
//! warning is given once, the hard cap stops every run of the session and refuses new ones,
//! a config change takes effect at once.

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
    let b = h.dispatch_with(|s| s.budget_usd = Some(0.6)).run();
    assert_eq!(
        b.head.budget_usd, 0.4,
        "fitted into what the hard cap leaves"
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
                DispatchEvent::Health { config_refused } => Some(config_refused.clone()),
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
