//! Idle runs (docs/ARCHITECTURE.md §"Idle runs") and turns re-sent: hibernating after
//! `hibernate_after_secs` or for the slot of a queued or `--no-queue` run, waking in the
//! same provider session, money following activity, follow-ups kept across a restart, and a
//! turn the model API failed held with a growing bound and sent again.

use super::*;
use crate::dispatch::core::run::IDLE_DETAIL;
use crate::dispatch::core::{
    FOLLOW_UP_QUEUED, FOLLOW_UP_SENT, HIBERNATED_DETAIL, ROOM_DETAIL, WAKING_DETAIL,
};

/// A sim run idle after its first turn, its provider session `sess-<n>` reported.
fn idle_in_session(h: &mut Harness, n: u32) -> String {
    let id = h.running();
    h.provider(
        &id,
        ProviderEvent::Session {
            session_id: format!("sess-{n}"),
            model: None,
        },
    );
    h.provider(&id, turn_done("## Result\nstatus: done\nsummary: did it\n"));
    assert_eq!(h.state(&id), RunState::Idle);
    id
}

fn follow_up(h: &mut Harness, run_id: &str, text: &str) -> Out {
    h.request(Request::FollowUp {
        run_id: run_id.into(),
        text: text.into(),
    })
}

fn transient_failure() -> ProviderEvent {
    ProviderEvent::TurnCompleted(TurnEnd {
        is_error: true,
        subtype: "error_during_execution".into(),
        text: Some("API Error: 429 rate_limit_error".into()),
        api_error_status: Some(429),
        transient: true,
        ..TurnEnd::default()
    })
}

#[test]
fn an_idle_run_hibernates_after_hibernate_after_secs_and_its_idle_timeout_still_ends_it() {
    let mut h = Harness::new("[limits]\nhibernate_after_secs = 120\n");
    let id = idle_in_session(&mut h, 1);
    assert_eq!(h.next_deadline(), Some(h.now + 2 * MIN));
    let out = h.advance(2 * MIN - 1);
    assert!(out.sends.is_empty(), "not a millisecond early");
    let out = h.advance(1);
    assert_eq!(out.sent(&id), [&ProviderCommand::Shutdown]);
    assert!(h.core.runs[&id].holds_slot(), "until its child has exited");
    h.exit(&id);
    let run = &h.core.runs[&id];
    assert_eq!(run.state(), RunState::Idle, "still idle, its session kept");
    assert!(run.hibernated && run.child.is_none());
    assert!(!run.holds_slot() && !run.reserves());
    assert_eq!(h.live(&id).1.as_deref(), Some(HIBERNATED_DETAIL));
    // Its idle timeout (20 min by default) still ends it, with no child to stop.
    assert_eq!(h.next_deadline(), Some(h.now + 18 * MIN));
    let out = h.advance(18 * MIN);
    assert!(out.sends.is_empty() && out.launches.is_empty());
    assert_eq!(h.state(&id), RunState::Completed);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("idle_timeout"));
}

#[test]
fn hibernate_after_secs_0_keeps_idle_runs_warm() {
    let mut h = Harness::new("[limits]\nhibernate_after_secs = 0\n");
    let id = idle_in_session(&mut h, 1);
    assert_eq!(
        h.next_deadline(),
        Some(h.now + 20 * MIN),
        "the idle timeout only"
    );
    let out = h.advance(19 * MIN);
    assert!(out.sends.is_empty());
    assert!(!h.core.runs[&id].hibernated);
}

#[test]
fn a_run_without_a_provider_session_does_not_hibernate() {
    let mut h = Harness::new("");
    let id = h.idle();
    let out = h.advance(5 * MIN);
    assert!(out.sends.is_empty(), "nothing to wake it in");
    assert!(!h.core.runs[&id].hibernating);
}

#[test]
fn a_follow_up_wakes_a_hibernated_run_in_its_provider_session() {
    let mut h = Harness::new("");
    let id = idle_in_session(&mut h, 7);
    h.advance(2 * MIN);
    h.exit(&id);
    let out = follow_up(&mut h, &id, "now add the tests");
    assert_eq!(out.launches.len(), 1, "one child, started again");
    assert_eq!(out.launches[0].resume_session.as_deref(), Some("sess-7"));
    assert!(out.sends.is_empty(), "the turn waits for the handshake");
    assert_eq!(h.state(&id), RunState::Starting);
    let out = h.provider(&id, ProviderEvent::Ready { version: None });
    assert_eq!(out.prompts(&id), ["now add the tests"]);
    let run = &h.core.runs[&id];
    assert_eq!(run.state(), RunState::Running);
    assert_eq!(
        run.turns.last().map(|t| t.origin),
        Some(TurnOrigin::FollowUp)
    );
    assert!(!run.hibernated && run.holds_slot() && run.reserves());
    h.provider(&id, turn_done("## Result\nstatus: done\nsummary: tests\n"));
    assert_eq!(h.state(&id), RunState::Idle);
    assert_eq!(h.view(&id).turns.len(), 2, "the turn is the run's own");
}

#[test]
fn a_follow_up_while_the_child_shuts_down_wakes_it_once_it_has_exited() {
    let mut h = Harness::new("");
    let id = idle_in_session(&mut h, 3);
    h.advance(2 * MIN);
    let out = follow_up(&mut h, &id, "one more thing");
    assert!(
        out.launches.is_empty(),
        "no second child while the first is up"
    );
    let out = follow_up(&mut h, &id, "and another");
    assert!(out.launches.is_empty());
    let out = h.exit(&id);
    assert_eq!(out.launches.len(), 1);
    assert_eq!(out.launches[0].resume_session.as_deref(), Some("sess-3"));
    let out = h.provider(&id, ProviderEvent::Ready { version: None });
    assert_eq!(out.prompts(&id), ["one more thing"]);
    let out = h.provider(&id, turn_done("## Result\nstatus: done\nsummary: a\n"));
    assert_eq!(out.prompts(&id), ["and another"], "queued behind it");
}

#[test]
fn resume_wakes_a_hibernated_run() {
    let mut h = Harness::new("");
    let id = idle_in_session(&mut h, 4);
    h.advance(2 * MIN);
    h.exit(&id);
    let out = h.request(Request::Resume {
        run_id: id.clone(),
        text: Some("go on".into()),
    });
    assert!(out.reply().is_ok(), "{:?}", out.reply());
    assert_eq!(out.launches[0].resume_session.as_deref(), Some("sess-4"));
    let out = h.provider(&id, ProviderEvent::Ready { version: None });
    assert_eq!(out.prompts(&id), ["go on"]);
}

/// A run idle in session `sess-<n>`, hibernated by its timer.
fn hibernated(h: &mut Harness, n: u32) -> String {
    let id = idle_in_session(h, n);
    h.advance(2 * MIN);
    h.exit(&id);
    assert!(h.core.runs[&id].hibernated);
    id
}

fn wake(h: &mut Harness, run_id: &str) -> Out {
    h.request(Request::Wake {
        run_id: run_id.into(),
    })
}

#[test]
fn waking_ahead_starts_the_child_with_no_turn_and_the_follow_up_then_goes_at_once() {
    let mut h = Harness::new("");
    let id = hibernated(&mut h, 5);
    let out = wake(&mut h, &id);
    assert!(out.reply().is_ok(), "{:?}", out.reply());
    assert_eq!(out.launches.len(), 1, "its child starts now");
    assert_eq!(out.launches[0].resume_session.as_deref(), Some("sess-5"));
    let run = &h.core.runs[&id];
    assert_eq!(run.state(), RunState::Idle, "idle while its child starts");
    assert!(run.holds_slot() && !run.reserves(), "a slot, no money");
    assert_eq!(h.live(&id).1.as_deref(), Some(WAKING_DETAIL));
    let out = h.provider(&id, ProviderEvent::Ready { version: None });
    assert!(out.prompts(&id).is_empty(), "no turn of its own");
    assert_eq!(h.state(&id), RunState::Idle);
    assert_eq!(h.live(&id).1.as_deref(), Some(IDLE_DETAIL));
    assert!(!h.core.runs[&id].asleep());
    // The follow-up finds a warm child: sent at once, nothing launched.
    let out = follow_up(&mut h, &id, "and the docs");
    assert!(out.launches.is_empty());
    assert_eq!(out.prompts(&id), ["and the docs"]);
    assert_eq!(h.state(&id), RunState::Running);
    assert_eq!(h.view(&id).turns.len(), 2);
}

#[test]
fn a_follow_up_before_the_woken_child_is_ready_goes_once_it_is() {
    let mut h = Harness::new("");
    let id = hibernated(&mut h, 6);
    wake(&mut h, &id);
    let out = follow_up(&mut h, &id, "quick one");
    assert!(out.launches.is_empty(), "no second child");
    assert!(out.sends.is_empty(), "the turn waits for the handshake");
    assert!(h.core.runs[&id].reserves(), "its cap is held for the turn");
    let out = wake(&mut h, &id);
    assert!(out.launches.is_empty() && out.sends.is_empty());
    let out = h.provider(&id, ProviderEvent::Ready { version: None });
    assert_eq!(out.prompts(&id), ["quick one"], "exactly once");
    assert_eq!(h.state(&id), RunState::Running);
    assert!(!h.core.runs[&id].asleep());
}

#[test]
fn a_run_woken_ahead_with_no_follow_up_hibernates_again_its_idle_timeout_unchanged() {
    let mut h = Harness::new("[limits]\nhibernate_after_secs = 120\n");
    let id = idle_in_session(&mut h, 2);
    let idle_since = h.now;
    h.advance(2 * MIN);
    h.exit(&id);
    h.advance(MIN);
    let woken_at = h.now;
    wake(&mut h, &id);
    h.provider(&id, ProviderEvent::Ready { version: None });
    // Hibernates 120 s after the wake, not after the turn ended.
    assert_eq!(h.next_deadline(), Some(woken_at + 2 * MIN));
    let out = h.advance(2 * MIN);
    assert_eq!(out.sent(&id), [&ProviderCommand::Shutdown]);
    h.exit(&id);
    assert!(h.core.runs[&id].hibernated);
    // Its idle timeout (20 min) still counts from the end of its turn.
    assert_eq!(h.next_deadline(), Some(idle_since + 20 * MIN));
}

#[test]
fn waking_ahead_leaves_warm_runs_and_waits_for_no_slot() {
    let mut h = Harness::new("[limits]\nper_provider = { sim = 1 }\n");
    let warm = idle_in_session(&mut h, 1);
    let out = wake(&mut h, &warm);
    assert!(
        out.reply().is_ok() && out.launches.is_empty(),
        "already warm"
    );
    h.advance(2 * MIN);
    h.exit(&warm);
    // Another run takes the sim's one slot: the hibernated run is not woken ahead (nor
    // queued); its follow-up would wait for the slot.
    let busy = h.running();
    let out = wake(&mut h, &warm);
    assert!(out.reply().is_ok(), "{:?}", out.reply());
    assert!(out.launches.is_empty());
    assert!(h.core.runs[&warm].hibernated && !h.core.runs[&warm].warming);
    assert!(!h.core.queue.iter().any(|q| q == &warm));
    assert_eq!(h.state(&busy), RunState::Running);
    // A run that is not active is refused.
    h.request(Request::Stop {
        run_id: busy.clone(),
    });
    h.exit(&busy);
    let out = wake(&mut h, &busy);
    assert_eq!(out.refusal().code, ErrorCode::RunNotActive);
}

#[test]
fn a_woken_child_that_exits_before_it_is_ready_leaves_the_run_hibernated() {
    let mut h = Harness::new("");
    let id = hibernated(&mut h, 8);
    wake(&mut h, &id);
    let out = h.exit(&id);
    let run = &h.core.runs[&id];
    assert_eq!(run.state(), RunState::Idle, "not failed: {:?}", run.state());
    assert!(run.hibernated && !run.warming && run.child.is_none());
    assert!(!run.holds_slot());
    assert!(
        out.notes()
            .iter()
            .any(|n| n.contains("waking ahead failed")),
        "{:?}",
        out.notes()
    );
    // A launch that fails outright leaves it hibernated too.
    h.fail_launch = Some("no such file".into());
    wake(&mut h, &id);
    assert!(h.core.runs[&id].hibernated && h.state(&id) == RunState::Idle);
    // The follow-up tries again.
    let out = follow_up(&mut h, &id, "try again");
    assert_eq!(out.launches.len(), 1);
    let out = h.provider(&id, ProviderEvent::Ready { version: None });
    assert_eq!(out.prompts(&id), ["try again"]);
}

#[test]
fn a_queued_run_hibernates_the_idle_run_whose_slot_it_needs() {
    let mut h = Harness::new("[limits.per_provider]\nsim = 2\n");
    let older = idle_in_session(&mut h, 1);
    h.now += 1_000;
    let newer = idle_in_session(&mut h, 2);
    let out = h.dispatch_with(|_| {});
    let queued = out.run().head.run_id;
    assert_eq!(h.state(&queued), RunState::Queued);
    assert_eq!(
        out.sent(&older),
        [&ProviderCommand::Shutdown],
        "the run idle longest goes"
    );
    assert!(out.sent(&newer).is_empty(), "one slot is enough");
    let out = h.exit(&older);
    assert_eq!(out.launches.len(), 1, "the queued run starts");
    assert_eq!(out.launches[0].run_id, queued);
    assert!(h.core.runs[&older].hibernated);
    // Waking the hibernated run now needs a slot: it waits in the queue, and makes room
    // by hibernating the other idle run.
    let out = follow_up(&mut h, &older, "wake up");
    assert!(out.launches.is_empty());
    assert_eq!(out.sent(&newer), [&ProviderCommand::Shutdown]);
    let out = h.exit(&newer);
    assert_eq!(out.launches.len(), 1);
    assert_eq!(out.launches[0].run_id, older);
    assert_eq!(out.launches[0].resume_session.as_deref(), Some("sess-1"));
}

#[test]
fn a_queued_run_starts_when_a_run_goes_idle_after_the_queue_formed() {
    let mut h = Harness::new("[limits.per_provider]\nsim = 1\n");
    let busy = h.running();
    h.provider(
        &busy,
        ProviderEvent::Session {
            session_id: "sess-1".into(),
            model: None,
        },
    );
    let out = h.dispatch_with(|_| {});
    let queued = out.run().head.run_id;
    assert_eq!(h.state(&queued), RunState::Queued);
    assert!(out.sends.is_empty(), "the run in the slot is working");
    // Streamed events change no slot: nothing hibernates.
    assert!(h.provider(&busy, usage(10)).sent(&busy).is_empty());
    // Its turn ends: idle, it gives its slot to the queued run.
    let out = h.provider(&busy, turn_done("## Result\nstatus: done\nsummary: ok\n"));
    assert_eq!(h.state(&busy), RunState::Idle);
    assert_eq!(out.sent(&busy), [&ProviderCommand::Shutdown]);
    assert!(out.launches.is_empty(), "not before its child has exited");
    let out = h.exit(&busy);
    assert_eq!(out.launches.len(), 1);
    assert_eq!(out.launches[0].run_id, queued);
    assert!(h.core.runs[&busy].hibernated);
}

fn no_queue(h: &mut Harness) -> Out {
    h.dispatch_with(|s| s.queue_if_busy = Some(false))
}

#[test]
fn a_no_queue_dispatch_starts_once_the_idle_run_whose_slot_it_needs_has_hibernated() {
    let mut h = Harness::new("[limits.per_provider]\nsim = 2\n");
    let older = idle_in_session(&mut h, 1);
    h.now += 1_000;
    let newer = idle_in_session(&mut h, 2);
    let out = no_queue(&mut h);
    let run = out.run();
    let id = run.head.run_id.clone();
    // Admitted, not queued: the reply shows it starting, and what it waits for.
    assert_eq!(run.head.state, RunState::Starting);
    let live = run.head.live_state.clone().expect("a live state");
    assert_eq!(live.state, LiveStateKind::Admitted);
    assert_eq!(live.detail.as_deref(), Some(ROOM_DETAIL));
    let notes = out.notes();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("--no-queue") && n.contains(&older) && !n.contains(&newer)),
        "{notes:?}"
    );
    assert!(!notes.iter().any(|n| n.starts_with("queued")), "{notes:?}");
    assert_eq!(
        out.sent(&older),
        [&ProviderCommand::Shutdown],
        "the longest idle"
    );
    assert!(out.sent(&newer).is_empty(), "only as many as needed");
    assert!(out.launches.is_empty(), "the slot is not free yet");
    assert!(!h.core.runs[&id].holds_slot());
    assert_eq!(h.core.queued_in("default"), 0, "not counted as queued");
    // The rail never holds more than its limit: a second --no-queue run takes the other
    // idle run's slot, a third is refused.
    let second = no_queue(&mut h).run().head.run_id;
    assert_eq!(h.state(&second), RunState::Starting);
    assert!(h.core.runs[&newer].hibernating);
    let out = no_queue(&mut h);
    assert_eq!(out.refusal().code, ErrorCode::MaxConcurrent);
    let out = h.exit(&older);
    assert_eq!(out.launches.len(), 1);
    assert_eq!(out.launches[0].run_id, id, "in the slot made for it");
    assert_eq!(out.launches[0].resume_session, None, "a new session");
    let out = h.exit(&newer);
    assert_eq!(out.launches.len(), 1);
    assert_eq!(out.launches[0].run_id, second);
    h.provider(&id, ProviderEvent::Ready { version: None });
    assert_eq!(h.state(&id), RunState::Running);
    assert!(h.core.runs[&id].holds_slot());
}

#[test]
fn a_no_queue_dispatch_is_refused_when_hibernating_gives_it_no_slot() {
    struct Case {
        name: &'static str,
        config: &'static str,
        /// Runs holding the sim's rail of 1 (or 2): a working run, an idle run with a
        /// session, an idle run without one.
        fill: fn(&mut Harness),
    }
    let cases = [
        Case {
            name: "a running run holds the slot",
            config: "[limits.per_provider]\nsim = 1\n",
            fill: |h| {
                h.running();
            },
        },
        Case {
            name: "hibernation is off",
            config: "[limits]\nhibernate_after_secs = 0\n[limits.per_provider]\nsim = 1\n",
            fill: |h| {
                idle_in_session(h, 1);
            },
        },
        Case {
            name: "the idle run has no session to wake in",
            config: "[limits.per_provider]\nsim = 1\n",
            fill: |h| {
                h.idle();
            },
        },
        Case {
            name: "the idle run's slot goes to the run queued before",
            config: "[limits.per_provider]\nsim = 1\n",
            fill: |h| {
                idle_in_session(h, 1);
                let queued = h.dispatch_with(|_| {}).run().head.run_id;
                assert_eq!(h.state(&queued), RunState::Queued);
            },
        },
    ];
    for case in cases {
        let mut h = Harness::new(case.config);
        (case.fill)(&mut h);
        let runs = h.core.runs.len();
        let out = no_queue(&mut h);
        let e = out.refusal();
        assert_eq!(e.code, ErrorCode::MaxConcurrent, "{}", case.name);
        assert!(
            e.message.contains("--no-queue"),
            "{}: {}",
            case.name,
            e.message
        );
        assert!(out.ops.is_empty() && out.sends.is_empty(), "{}", case.name);
        assert_eq!(h.core.runs.len(), runs, "{}: nothing created", case.name);
    }
}

#[test]
fn a_follow_up_to_a_run_hibernating_for_a_queued_run_wakes_after_it() {
    let mut h = Harness::new("[limits.per_provider]\nsim = 1\n");
    let idle = idle_in_session(&mut h, 1);
    let queued = h.dispatch_with(|_| {}).run().head.run_id;
    assert!(h.core.runs[&idle].hibernating);
    assert!(follow_up(&mut h, &idle, "more").reply().is_ok());
    let out = h.exit(&idle);
    assert_eq!(out.launches.len(), 1);
    assert_eq!(out.launches[0].run_id, queued, "the slot was freed for it");
    assert!(
        h.core.queue.iter().any(|id| id == &idle),
        "woken when a slot frees"
    );
}

#[test]
fn idle_and_hibernated_runs_reserve_nothing() {
    let mut h = Harness::new("[limits]\nsession_hard_cap_usd = 10.0\nsession_warning_usd = 9.0\n");
    let a = idle_in_session(&mut h, 1);
    h.advance(2 * MIN);
    h.exit(&a);
    let b = idle_in_session(&mut h, 2);
    assert!(h.core.runs[&a].hibernated && !h.core.runs[&b].hibernated);
    // Both idle: a $5 dispatch and another get their whole caps ($10 hard cap).
    let c = h.dispatch_with(|s| s.budget_usd = Some(5.0)).run();
    assert_eq!(c.head.budget_usd, 5.0);
    let d = h.dispatch_with(|s| s.budget_usd = Some(5.0)).run();
    assert_eq!(d.head.budget_usd, 5.0);
    // The session is now fully reserved by the two working runs: a follow-up on an idle
    // run does not fit; it is accepted and waits for the money, the run idle meanwhile.
    let out = follow_up(&mut h, &b, "more");
    assert!(out.reply().is_ok(), "{:?}", out.reply());
    assert!(out.sends.is_empty());
    assert_eq!(h.state(&b), RunState::Idle);
    let out = follow_up(&mut h, &a, "more");
    assert!(out.reply().is_ok(), "{:?}", out.reply());
    assert!(out.launches.is_empty(), "not woken yet");
    assert!(h.core.runs[&a].hibernated);
    // c's turn ends: b's follow-up goes out; d's ends: a wakes for its own.
    let out = h.provider(&c.head.run_id, ProviderEvent::Ready { version: None });
    assert!(out.prompts(&b).is_empty(), "c's turn is still in flight");
    let out = h.provider(
        &c.head.run_id,
        turn_done("## Result\nstatus: done\nsummary: did it\n"),
    );
    assert_eq!(out.prompts(&b), ["more"]);
    let out = h.provider(&d.head.run_id, ProviderEvent::Ready { version: None });
    assert!(out.launches.is_empty());
    let out = h.provider(
        &d.head.run_id,
        turn_done("## Result\nstatus: done\nsummary: did it\n"),
    );
    assert_eq!(out.launches.len(), 1, "a wakes");
    assert_eq!(out.launches[0].run_id, a);
}

#[test]
fn a_follow_up_lowers_the_runs_cap_to_what_the_hard_cap_leaves() {
    let mut h = Harness::new("");
    let a = idle_in_session(&mut h, 1);
    // The hard cap comes down to $4 while the run is idle.
    h.request(Request::BudgetSet {
        warning_usd: Some(3.0),
        hard_cap_usd: Some(4.0),
    });
    let out = follow_up(&mut h, &a, "more");
    assert!(out.reply().is_ok(), "{:?}", out.reply());
    assert_eq!(
        h.core.runs[&a].spec.budget_usd, 4.0,
        "what the session's hard cap leaves"
    );
    assert!(out.notes().iter().any(|n| n.contains("budget lowered")));
    assert_eq!(out.prompts(&a), ["more"]);
}

#[test]
fn default_limits_fit_a_full_session_rail_under_the_hard_cap() {
    let mut h = Harness::new("");
    let limits = h.core.config.limits.clone();
    assert!(
        limits.budget_usd_default * f64::from(limits.per_session_running)
            <= limits.session_hard_cap_usd
    );
    let caps: Vec<f64> = (0..limits.per_session_running)
        .map(|_| h.dispatch_with(|_| {}).run().head.budget_usd)
        .collect();
    assert!(
        caps.iter().all(|c| *c == limits.budget_usd_default),
        "{caps:?}"
    );
}

#[test]
fn queued_follow_ups_are_in_the_ledger_and_marked_when_sent() {
    let mut h = Harness::new("");
    let id = h.running();
    let out = follow_up(&mut h, &id, "first");
    let queued: Vec<_> = out
        .ops
        .iter()
        .filter_map(|op| match op {
            WriteOp::AppendEvent(e) if e.kind == FOLLOW_UP_QUEUED => Some(e.body_json.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(queued.len(), 1);
    assert!(queued[0].contains("first"), "{}", queued[0]);
    let out = h.provider(&id, turn_done("## Result\nstatus: done\nsummary: a\n"));
    assert_eq!(out.prompts(&id), ["first"]);
    assert!(
        out.ops
            .iter()
            .any(|op| matches!(op, WriteOp::AppendEvent(e) if e.kind == FOLLOW_UP_SENT))
    );
}

#[test]
fn a_turn_the_model_api_failed_is_held_with_a_growing_bound_and_sent_again() {
    let mut h = Harness::new("[limits]\nresend_turns_max = 3\nresend_wait_max_secs = 180\n");
    let id = h
        .dispatch_with(|s| s.max_minutes = Some(60))
        .run()
        .head
        .run_id;
    h.provider(&id, ProviderEvent::Ready { version: None });
    let first = h.core.runs[&id]
        .last_prompt
        .clone()
        .expect("the first prompt");
    // 1, 2, then 3 minutes (the cap): each failure holds the turn, then sends it again.
    for wait in [MIN, 2 * MIN, 3 * MIN] {
        let out = h.provider(&id, transient_failure());
        assert!(out.sends.is_empty(), "held, not failed");
        assert_eq!(h.state(&id), RunState::Running);
        let (kind, detail) = h.live(&id);
        assert_eq!(kind, LiveStateKind::WaitingProvider);
        assert!(detail.unwrap_or_default().contains("sent again"));
        let bound = h.core.runs[&id].live.as_ref().and_then(|l| l.bound);
        assert_eq!(bound, Some(h.now + wait));
        assert_eq!(h.next_deadline(), Some(h.now + wait));
        assert!(h.advance(wait - 1).sends.is_empty());
        let out = h.advance(1);
        assert_eq!(
            out.prompts(&id),
            std::slice::from_ref(&first),
            "the same turn"
        );
        assert_eq!(h.live(&id).0, LiveStateKind::Working);
    }
    let resends = h
        .view(&id)
        .turns
        .iter()
        .filter(|t| t.origin == "resend")
        .count();
    assert_eq!(resends, 3);
    // Sent again 3 times: the fourth failure fails the run.
    let out = h.provider(&id, transient_failure());
    assert!(out.sent(&id).contains(&&ProviderCommand::Shutdown));
    h.exit(&id);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("provider_unavailable"));
}

#[test]
fn a_held_turn_is_sent_again_now_on_resume_and_a_success_forgets_the_count() {
    let mut h = Harness::new("");
    let id = h.running();
    let first = h.core.runs[&id]
        .last_prompt
        .clone()
        .expect("the first prompt");
    h.provider(&id, transient_failure());
    let out = h.request(Request::Resume {
        run_id: id.clone(),
        text: None,
    });
    assert!(out.reply().is_ok(), "{:?}", out.reply());
    assert_eq!(out.prompts(&id), [first]);
    assert_eq!(h.core.runs[&id].resend_at, None, "the timer is gone");
    h.provider(&id, turn_done("## Result\nstatus: done\nsummary: ok\n"));
    assert_eq!(h.state(&id), RunState::Idle);
    assert_eq!(h.core.runs[&id].resends, 0);
    assert_eq!(
        h.core.runs[&id].user_turns(),
        1,
        "a re-send is not a turn of the user's"
    );
}

#[test]
fn a_held_turn_can_be_stopped() {
    let mut h = Harness::new("");
    let id = h.running();
    h.provider(&id, transient_failure());
    let out = h.request(Request::Stop { run_id: id.clone() });
    assert!(out.sent(&id).contains(&&ProviderCommand::Shutdown));
    h.exit(&id);
    assert_eq!(h.state(&id), RunState::Stopped);
    assert!(h.advance(10 * MIN).sends.is_empty());
}

#[test]
fn resend_turns_max_0_fails_the_turn_at_once() {
    let mut h = Harness::new("[limits]\nresend_turns_max = 0\n");
    let id = h.running();
    let out = h.provider(&id, transient_failure());
    assert!(out.sent(&id).contains(&&ProviderCommand::Shutdown));
    h.exit(&id);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("provider_unavailable"));
}

#[test]
fn follow_ups_queued_before_a_restart_go_out_after_the_resume_turn_in_order_once() {
    let mut h = Harness::new("");
    let id = h.running();
    h.provider(
        &id,
        ProviderEvent::Session {
            session_id: "sess-1".into(),
            model: None,
        },
    );
    for text in ["first", "second"] {
        let out = follow_up(&mut h, &id, text);
        assert!(out.prompts(&id).is_empty(), "queued behind the turn");
    }
    h.restart_after(MIN);
    assert_eq!(h.state(&id), RunState::Interrupted);
    let out = h.request(Request::Resume {
        run_id: id.clone(),
        text: Some("go on".into()),
    });
    assert!(out.reply().is_ok(), "{:?}", out.reply());
    let out = h.provider(&id, ProviderEvent::Ready { version: None });
    assert_eq!(out.prompts(&id), ["go on"]);
    let mut sent = Vec::new();
    for _ in 0..3 {
        let out = h.provider(&id, turn_done("## Result\nstatus: done\nsummary: a\n"));
        sent.extend(out.prompts(&id));
    }
    assert_eq!(sent, ["first", "second"]);
    assert_eq!(h.state(&id), RunState::Idle);
}

#[test]
fn a_cli_that_exits_with_its_failed_turn_is_started_again_in_its_session_to_send_it() {
    let mut h = Harness::new("");
    let id = h.running();
    h.provider(
        &id,
        ProviderEvent::Session {
            session_id: "sess-9".into(),
            model: None,
        },
    );
    let first = h.core.runs[&id]
        .last_prompt
        .clone()
        .expect("the first prompt");
    h.provider(&id, transient_failure());
    h.exit(&id);
    let run = &h.core.runs[&id];
    assert_eq!(run.state(), RunState::Running, "held, not failed");
    assert!(run.child.is_none() && !run.holds_slot());
    let out = h.advance(MIN);
    assert_eq!(out.launches.len(), 1);
    assert_eq!(out.launches[0].resume_session.as_deref(), Some("sess-9"));
    assert_eq!(h.live(&id).0, LiveStateKind::WaitingProvider);
    let out = h.provider(&id, ProviderEvent::Ready { version: None });
    assert_eq!(out.prompts(&id), [first]);
    assert_eq!(h.live(&id).0, LiveStateKind::Working);
    assert_eq!(
        h.core.runs[&id].turns.last().map(|t| t.origin),
        Some(TurnOrigin::Resend)
    );
}

#[test]
fn a_cli_that_exits_with_its_failed_turn_and_no_session_fails_the_run() {
    let mut h = Harness::new("");
    let id = h.running();
    h.provider(&id, transient_failure());
    h.exit(&id);
    assert_eq!(h.state(&id), RunState::Failed);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("provider_unavailable"));
}

#[test]
fn waking_ahead_a_run_whose_child_is_on_its_way_out_wakes_it_once_the_child_has_exited() {
    let mut h = Harness::new("");
    let id = idle_in_session(&mut h, 7);
    h.advance(2 * MIN);
    assert!(
        h.core.runs[&id].hibernating,
        "its child is asked to shut down"
    );
    let out = wake(&mut h, &id);
    assert!(out.reply().is_ok(), "{:?}", out.reply());
    assert!(
        out.launches.is_empty(),
        "no second child while the first is up"
    );
    let out = h.exit(&id);
    assert_eq!(out.launches.len(), 1, "woken ahead once it has exited");
    assert_eq!(out.launches[0].resume_session.as_deref(), Some("sess-7"));
    assert_eq!(h.live(&id).1.as_deref(), Some(WAKING_DETAIL));
    let out = h.provider(&id, ProviderEvent::Ready { version: None });
    assert!(out.prompts(&id).is_empty(), "no turn of its own");
    let out = follow_up(&mut h, &id, "now the tests");
    assert!(out.launches.is_empty());
    assert_eq!(out.prompts(&id), ["now the tests"]);
    // Asked once: the next hibernation is not followed by a wake.
    h.provider(&id, turn_done("## Result\nstatus: done\nsummary: t\n"));
    h.advance(2 * MIN);
    let out = h.exit(&id);
    assert!(out.launches.is_empty(), "{:?}", out.launches);
    assert!(h.core.runs[&id].hibernated);
}
