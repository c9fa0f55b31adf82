//! Wrap up, then stop (docs/ARCHITECTURE.md §"Wrap up, then stop"): the wrap-up falls due
//! `wrap_up_secs` before the time box, once; a turn in flight goes on and the wrap-up is
//! sent when it ends; the wrap-up's result completes the run (`stopped_soft`); an overrun
//! is the hard stop; the dollar cap's reserve and the last allowed turn wrap up too; a
//! soft stop asks for it.

use super::*;

const DONE: &str = "## Result\nstatus: done\nsummary: wrapped it up\n";

/// A run with a 10-minute time box whose first turn is in flight.
fn boxed(h: &mut Harness) -> String {
    let id = h
        .dispatch_with(|s| s.max_minutes = Some(10))
        .run()
        .head
        .run_id;
    h.provider(&id, ProviderEvent::Ready { version: None });
    id
}

fn ended_with(text: &str, cost: f64) -> ProviderEvent {
    ProviderEvent::TurnCompleted(TurnEnd {
        subtype: "success".into(),
        text: Some(text.into()),
        total_cost_usd: Some(cost),
        ..TurnEnd::default()
    })
}

fn origins(h: &Harness, id: &str) -> Vec<TurnOrigin> {
    h.core.runs[id].turns.iter().map(|t| t.origin).collect()
}

/// Keeps a turn talking for `minutes` (neither the stalled flag nor silence matters).
fn talk(h: &mut Harness, id: &str, minutes: i64) {
    for _ in 0..minutes {
        h.advance(MIN);
        h.provider(id, usage(1));
    }
}

#[test]
fn the_time_box_wrap_up_falls_due_once_and_waits_for_the_turn_in_flight() {
    let mut h = Harness::new("");
    let id = boxed(&mut h);
    let deadline = h.core.runs[&id].deadline;
    talk(&mut h, &id, 7);
    assert_eq!(h.next_deadline(), Some(deadline - 2 * MIN));
    let out = h.advance(MIN - 1);
    assert!(out.notes().is_empty(), "not a millisecond early");
    let out = h.advance(1);
    assert_eq!(
        out.notes(),
        ["wrapping up once its turn ends: its time box is near (the turn goes on)"]
    );
    assert!(out.sends.is_empty(), "the turn in flight is not cut");
    // Once: the next deadline is the time box itself, not the wrap-up again.
    assert_eq!(h.next_deadline(), Some(deadline));
    let out = h.advance(30_000);
    assert!(out.notes().is_empty());
    // The turn ends with no result: the wrap-up goes instead of the result retry.
    let out = h.provider(&id, turn_done("still working on it"));
    let prompts = out.prompts(&id);
    assert_eq!(prompts.len(), 1, "{prompts:?}");
    assert!(
        prompts[0].starts_with("drover is ending this run soon: its time box is near."),
        "{}",
        prompts[0]
    );
    assert!(prompts[0].contains("## Result"));
    assert_eq!(origins(&h, &id), [TurnOrigin::Dispatch, TurnOrigin::WrapUp]);
    assert_eq!(
        h.core.runs[&id].user_turns(),
        1,
        "not counted against max turns"
    );
    assert_eq!(
        h.live(&id),
        (
            LiveStateKind::WrappingUp,
            Some("writing the final answer".into())
        )
    );
    // Its tools do not move the live line back to working.
    h.provider(
        &id,
        ProviderEvent::ToolStarted {
            tool_use_id: "t9".into(),
            name: "Bash".into(),
            ask: Ask::command("git status", None, None),
        },
    );
    assert_eq!(h.live(&id).0, LiveStateKind::WrappingUp);
    let out = h.provider(&id, turn_done(DONE));
    assert!(out.sent(&id).contains(&&ProviderCommand::Shutdown));
    h.exit(&id);
    assert_eq!(h.state(&id), RunState::Completed);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("stopped_soft"));
    assert_eq!(cause_of(&h, &id), Some(Cause::Completed));
    let result = h.view(&id).last_result.expect("the wrap-up's result");
    assert_eq!(result.summary.as_deref(), Some("wrapped it up"));
}

#[test]
fn a_wrap_up_that_overruns_its_bound_is_the_hard_stop() {
    let mut h = Harness::new("[limits]\nwrap_up_bound_secs = 45\n");
    let id = boxed(&mut h);
    talk(&mut h, &id, 8);
    h.provider(&id, turn_done("still working on it"));
    assert_eq!(h.live(&id).0, LiveStateKind::WrappingUp);
    assert_eq!(h.next_deadline(), Some(h.now + 45_000));
    let out = h.advance(45_000 - 1);
    assert!(out.sends.is_empty());
    let out = h.advance(1);
    assert!(out.sent(&id).contains(&&ProviderCommand::Shutdown));
    assert_eq!(out.notes(), ["the wrap-up took longer than 45 s; stopped"]);
    h.exit(&id);
    assert_eq!(h.state(&id), RunState::Failed);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("timeout"));
}

#[test]
fn a_wrap_up_with_no_result_ends_as_its_limit_would_have() {
    let mut h = Harness::new("");
    let id = boxed(&mut h);
    talk(&mut h, &id, 8);
    h.provider(&id, turn_done("still working on it"));
    let out = h.provider(&id, turn_done("I was about to run the tests"));
    assert!(
        out.prompts(&id).is_empty(),
        "no result retry after the wrap-up"
    );
    assert!(
        out.notes()
            .contains(&"the wrap-up turn gave no result block".to_string()),
        "{:?}",
        out.notes()
    );
    h.exit(&id);
    assert_eq!(h.state(&id), RunState::Failed);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("timeout"));
}

#[test]
fn an_idle_run_with_its_result_ends_soft_at_the_wrap_up_without_a_turn() {
    let mut h = Harness::new("");
    let id = boxed(&mut h);
    h.provider(&id, turn_done(DONE));
    assert_eq!(h.state(&id), RunState::Idle);
    let out = h.advance(8 * MIN);
    assert!(out.prompts(&id).is_empty(), "nothing more to ask");
    h.exit(&id);
    assert_eq!(h.state(&id), RunState::Completed);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("stopped_soft"));
}

#[test]
fn a_short_time_box_wraps_up_at_its_half_and_zero_turns_it_off() {
    let mut h = Harness::new("");
    let id = h
        .dispatch_with(|s| s.max_minutes = Some(2))
        .run()
        .head
        .run_id;
    h.provider(&id, ProviderEvent::Ready { version: None });
    assert_eq!(
        h.next_deadline(),
        Some(h.now + MIN),
        "half of 2 min, not 2 min"
    );

    let mut h = Harness::new("[limits]\nwrap_up_secs = 0\n");
    let id = boxed(&mut h);
    let deadline = h.core.runs[&id].deadline;
    talk(&mut h, &id, 9);
    assert_eq!(h.next_deadline(), Some(deadline));
    h.provider(&id, turn_done(DONE));
    assert_eq!(h.state(&id), RunState::Idle);
}

#[test]
fn spend_within_the_reserve_of_the_cap_wraps_up_a_turn_that_gave_no_result() {
    let mut h = Harness::new("[limits]\nwrap_up_usd = 0.5\n");
    let id = h
        .dispatch_with(|s| s.budget_usd = Some(2.0))
        .run()
        .head
        .run_id;
    h.provider(&id, ProviderEvent::Ready { version: None });
    // $1.40 spent: $0.60 left, more than the reserve: idle as usual.
    h.provider(&id, ended_with(DONE, 1.4));
    assert_eq!(h.state(&id), RunState::Idle);
    h.request(Request::FollowUp {
        run_id: id.clone(),
        text: "and the docs".into(),
    });
    // $1.55 spent, within $0.50 of the cap, but the turn gave its result: idle, for the
    // user to decide.
    let out = h.provider(&id, ended_with(DONE, 1.55));
    assert!(out.prompts(&id).is_empty());
    assert_eq!(h.state(&id), RunState::Idle);
    h.request(Request::FollowUp {
        run_id: id.clone(),
        text: "and the changelog".into(),
    });
    // $1.60 spent, and no result: the wrap-up goes instead of the result retry.
    let out = h.provider(&id, ended_with("editing the changelog", 1.6));
    let prompts = out.prompts(&id);
    assert_eq!(prompts.len(), 1);
    assert!(
        prompts[0].contains("its spend is near its dollar cap"),
        "{}",
        prompts[0]
    );
    h.provider(&id, ended_with(DONE, 1.7));
    h.exit(&id);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("stopped_soft"));
    assert_eq!(h.state(&id), RunState::Completed);
}

#[test]
fn the_last_allowed_turn_without_done_gets_a_wrap_up_not_a_cut() {
    let mut h = Harness::new("");
    let id = h.dispatch_with(|s| s.max_turns = Some(1)).run().head.run_id;
    h.provider(&id, ProviderEvent::Ready { version: None });
    let out = h.provider(
        &id,
        turn_done("## Result\nstatus: blocked\nsummary: half way\n"),
    );
    assert_eq!(out.prompts(&id).len(), 1, "the wrap-up turn");
    assert_eq!(origins(&h, &id), [TurnOrigin::Dispatch, TurnOrigin::WrapUp]);
    h.provider(&id, turn_done(DONE));
    h.exit(&id);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("stopped_soft"));

    // A last turn that says done ends as before.
    let mut h = Harness::new("");
    let id = h.dispatch_with(|s| s.max_turns = Some(1)).run().head.run_id;
    h.provider(&id, ProviderEvent::Ready { version: None });
    let out = h.provider(&id, turn_done(DONE));
    assert!(out.prompts(&id).is_empty());
    h.exit(&id);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("max_turns"));
}

#[test]
fn a_soft_stop_waits_for_the_turn_then_wraps_up_and_its_own_bound_holds() {
    let mut h = Harness::new("[limits]\nwrap_up_secs = 90\n");
    let id = h.running();
    let out = h.request(Request::WrapUp { run_id: id.clone() });
    assert!(out.reply().is_ok());
    assert_eq!(
        out.notes(),
        ["wrapping up once its turn ends: you asked for a soft stop (the turn goes on)"]
    );
    let again = h.request(Request::WrapUp { run_id: id.clone() });
    assert_eq!(again.refusal().code, ErrorCode::RunNotActive);
    assert!(again.refusal().message.contains("already wrapping up"));
    let out = h.provider(&id, turn_done("half way"));
    assert_eq!(out.prompts(&id).len(), 1);
    h.provider(&id, turn_done(DONE));
    h.exit(&id);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("stopped_soft"));

    // A turn that does not end within the soft stop's bound is stopped.
    let mut h = Harness::new("[limits]\nwrap_up_secs = 90\n");
    let id = h.running();
    h.request(Request::WrapUp { run_id: id.clone() });
    let out = h.advance(90_000);
    assert!(out.sent(&id).contains(&&ProviderCommand::Shutdown));
    h.exit(&id);
    assert_eq!(h.state(&id), RunState::Stopped);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("user"));
}

#[test]
fn a_soft_stop_ends_an_idle_run_with_its_result_and_refuses_one_with_no_turn() {
    let mut h = Harness::new("");
    let id = h.idle();
    let out = h.request(Request::WrapUp { run_id: id.clone() });
    assert!(out.reply().is_ok());
    assert!(out.prompts(&id).is_empty());
    h.exit(&id);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("stopped_soft"));

    let mut h = Harness::new("");
    let id = h.dispatch();
    let out = h.request(Request::WrapUp { run_id: id.clone() });
    assert_eq!(out.refusal().code, ErrorCode::RunNotActive);
    assert_eq!(
        out.refusal().message,
        format!(
            "run {id} has not started a turn, so it has nothing to wrap up; stop it with \
             `drover stop {id}`"
        )
    );
}
