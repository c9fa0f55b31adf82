//! Every timer: idle timeout, permission and question timeouts, route expiry, the time
//! box, the provider's silence, the stalled flag, waits — each fires at its moment, not a
//! millisecond before, and the next deadline names it.

use super::*;

#[test]
fn an_idle_run_completes_after_its_idle_timeout() {
    let mut h = Harness::new("");
    let id = h
        .dispatch_with(|s| s.idle_timeout_secs = Some(60))
        .run()
        .head
        .run_id;
    h.provider(&id, ProviderEvent::Ready { version: None });
    h.provider(&id, turn_done("## Result\nstatus: done\nsummary: ok\n"));
    assert_eq!(h.next_deadline(), Some(h.now + MIN));
    let out = h.advance(MIN - 1);
    assert!(out.sends.is_empty(), "not a millisecond early");
    let out = h.advance(1);
    assert!(out.sent(&id).contains(&&ProviderCommand::Shutdown));
    // While the child winds down, the idle timer does not fire again or wake the loop.
    let next = h.next_deadline();
    assert!(
        next.is_none_or(|at| at > h.now),
        "{next:?} is not in the past"
    );
    let out = h.advance(1_000);
    assert!(out.sends.is_empty());
    h.exit(&id);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("idle_timeout"));
    assert_eq!(h.state(&id), RunState::Completed);
}

#[test]
fn unanswered_requests_are_denied_after_their_own_timeouts() {
    let mut h = Harness::new("");
    let id = h.running();
    h.provider(&id, permission("p1", "ls"));
    h.provider(&id, question("q1"));
    assert_eq!(h.next_deadline(), Some(h.now + 10 * MIN));
    let out = h.advance(10 * MIN);
    assert_eq!(
        out.decisions(),
        [(
            "timeout".to_string(),
            "deny: no answer within 10 min".to_string()
        )]
    );
    assert_eq!(h.view(&id).pending.len(), 1, "the question waits on");
    assert_eq!(h.next_deadline(), Some(h.now + 20 * MIN));
    let out = h.advance(20 * MIN);
    assert_eq!(
        out.decisions(),
        [(
            "timeout".to_string(),
            "deny: no answer within 30 min".to_string()
        )]
    );
    assert_eq!(h.state(&id), RunState::Running);
}

#[test]
fn an_unanswered_route_card_expires_and_stops_its_run() {
    let mut h = Harness::new("");
    let id = h
        .dispatch_with(|s| s.model = Some("auto".into()))
        .run()
        .head
        .run_id;
    assert_eq!(h.next_deadline(), Some(h.now + 30 * MIN));
    h.advance(30 * MIN - 1);
    assert_eq!(h.state(&id), RunState::AwaitingRoute);
    let out = h.advance(1);
    assert_eq!(h.state(&id), RunState::Stopped);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("route_expired"));
    assert_eq!(
        out.decisions(),
        [("timeout".to_string(), "expired".to_string())]
    );
}

#[test]
fn a_run_past_its_time_box_fails() {
    let mut h = Harness::new("");
    let id = h
        .dispatch_with(|s| s.max_minutes = Some(5))
        .run()
        .head
        .run_id;
    h.provider(&id, ProviderEvent::Ready { version: None });
    // Keep it talking, so neither the stalled flag nor silence matters.
    for _ in 0..4 {
        h.advance(MIN);
        h.provider(&id, usage(1));
    }
    let out = h.advance(MIN);
    assert!(
        out.notes()
            .iter()
            .any(|n| n == "ran past its limit of 5 minutes")
    );
    h.exit(&id);
    assert_eq!(h.state(&id), RunState::Failed);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("timeout"));
}

#[test]
fn a_silent_provider_fails_the_turn_but_not_while_a_tool_runs_or_you_are_asked() {
    let mut h = Harness::new("[providers.sim]\nsilence_timeout_secs = 120\n");
    let id = h.running();
    // A tool running: its silence is not the model's.
    h.provider(
        &id,
        ProviderEvent::ToolStarted {
            tool_use_id: "t1".into(),
            name: "Bash".into(),
            ask: Ask::command("sleep 300", None, None),
        },
    );
    let out = h.advance(5 * MIN);
    assert!(out.sends.is_empty());
    h.provider(
        &id,
        ProviderEvent::ToolFinished {
            tool_use_id: "t1".into(),
            is_error: false,
            exit_code: Some(0),
            summary: "done".into(),
        },
    );
    let out = h.advance(2 * MIN);
    assert!(
        out.notes()
            .iter()
            .any(|n| n.starts_with("no word from sim for 2 min")),
        "{:?}",
        out.notes()
    );
    h.exit(&id);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("timeout"));
}

#[test]
fn a_quiet_turn_is_flagged_stalled_and_unflagged_when_it_speaks() {
    let mut h = Harness::new("");
    let id = h.running();
    h.advance(15 * MIN - 1);
    assert!(!h.view(&id).head.stalled);
    let out = h.advance(1);
    assert!(h.view(&id).head.stalled, "flagged");
    assert!(out.sends.is_empty(), "not stopped");
    assert!(out.notes()[0].starts_with("stalled: no provider event for 15 min"));
    let out = h.provider(&id, usage(1));
    assert!(!h.view(&id).head.stalled);
    assert!(
        out.notes()
            .iter()
            .any(|n| n == "the provider is active again")
    );
}

#[test]
fn a_wait_is_answered_when_met_or_when_its_time_is_up() {
    let mut h = Harness::new("");
    let id = h.running();
    let out = h.request(wait_request(&id, WaitUntil::Idle));
    assert!(out.replies.is_empty(), "not idle yet");
    let out = h.provider(&id, turn_done("## Result\nstatus: done\nsummary: ok\n"));
    match out.reply() {
        Ok(Response::Wait(w)) => {
            assert!(!w.timed_out);
            assert_eq!(w.runs[0].head.state, RunState::Idle);
        }
        other => panic!("{other:?}"),
    }
    let out = h.request(wait_request(&id, WaitUntil::Terminal));
    assert!(out.replies.is_empty());
    assert_eq!(h.next_deadline(), Some(h.now + MIN));
    let out = h.advance(MIN);
    match out.reply() {
        Ok(Response::Wait(w)) => assert!(w.timed_out),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_wait_on_a_run_not_in_memory_reads_it_first() {
    let mut h = Harness::new("");
    let out = h.request(wait_request("rold", WaitUntil::Terminal));
    let [(Fetch::Summaries { run_ids }, then)] = &out.loads[..] else {
        panic!("{:?}", out.loads);
    };
    assert_eq!(run_ids, &["rold"]);
    // Gone from the ledger too: refused at once.
    let out = h.feed(Input::Loaded {
        then: then.clone(),
        answer: Err(super::super::not_found("rold")),
    });
    assert_eq!(out.refusal().code, ErrorCode::RunNotFound);
}

#[test]
fn the_next_deadline_is_the_earliest_timer_of_all() {
    let mut h = Harness::new("");
    assert_eq!(h.next_deadline(), None, "nothing to wake for");
    let a = h.running();
    assert_eq!(
        h.next_deadline(),
        Some(h.now + 15 * MIN),
        "the stalled watchdog"
    );
    h.provider(&a, permission("p1", "ls"));
    assert_eq!(
        h.next_deadline(),
        Some(h.now + 10 * MIN),
        "the answer's expiry"
    );
    h.feed(Input::Shutdown);
    assert_eq!(
        h.next_deadline(),
        Some(h.now + 15_000),
        "the shutdown grace"
    );
}
