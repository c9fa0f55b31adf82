//! A restart of drover (docs/ARCHITECTURE.md §"A restart"): each run a dead owner left is
//! put back where it was by the next one, with no new turn; only a turn in flight is
//! interrupted, and it waits for the user; answers to requests shown again reach the
//! run's session; `resume` with no words never speaks for the user; a stopping owner
//! leaves every run but those in a turn for the next one.

use super::*;
use crate::dispatch::api::Need;
use crate::dispatch::core::HIBERNATED_DETAIL;

fn session(h: &mut Harness, run_id: &str, n: u32) {
    h.provider(
        run_id,
        ProviderEvent::Session {
            session_id: format!("sess-{n}"),
            model: None,
        },
    );
}

fn resume(h: &mut Harness, run_id: &str, text: Option<&str>) -> Out {
    h.request(Request::Resume {
        run_id: run_id.into(),
        text: text.map(str::to_string),
    })
}

fn respond(h: &mut Harness, run_id: &str, request_id: &str, answer: PermissionAnswer) -> Out {
    h.request(Request::Respond {
        run_id: run_id.into(),
        request_id: request_id.into(),
        answer,
    })
}

fn need(h: &Harness, run_id: &str) -> Option<Need> {
    h.core.runs[run_id].summary().needs_you()
}

/// Every state a run can be in when its owner dies, and where the next owner puts it.
#[test]
fn a_restart_puts_every_run_back_where_it_was_without_a_turn() {
    let mut h = Harness::new("[limits.per_provider]\nsim = 5\n");
    // Idle and warm, in session 1.
    let idle = h.running();
    session(&mut h, &idle, 1);
    h.provider(&idle, turn_done("## Result\nstatus: done\nsummary: a\n"));
    // Idle, its result asking a question.
    let asking = h.running();
    session(&mut h, &asking, 2);
    h.provider(
        &asking,
        turn_done("## Result\nstatus: needs_input\nsummary: b\nquestion: which target?\n"),
    );
    // Waiting on a permission.
    let waiting = h.running();
    session(&mut h, &waiting, 3);
    h.provider(&waiting, permission("p1", "ls -la"));
    // In a turn.
    let busy = h.running();
    session(&mut h, &busy, 4);
    // Started, its first turn not sent yet.
    let starting = h.dispatch();
    assert_eq!(h.state(&starting), RunState::Starting);
    // Held on a route card.
    let held = h
        .dispatch_with(|s| s.model = Some("auto".into()))
        .run()
        .head
        .run_id;
    assert_eq!(h.state(&held), RunState::AwaitingRoute);
    let turns_before: Vec<usize> = [&idle, &asking, &waiting, &busy]
        .iter()
        .map(|id| h.core.runs[*id].turns.len())
        .collect();

    let out = h.restart_after(5 * MIN);

    // No turn is sent; only the run that had not started yet starts again (queued).
    assert!(out.sends.is_empty(), "{:?}", out.sends);
    assert_eq!(
        out.launches
            .iter()
            .map(|l| l.run_id.as_str())
            .collect::<Vec<_>>(),
        [starting.as_str()]
    );
    assert_eq!(out.launches[0].resume_session, None, "its first start");
    let turns_after: Vec<usize> = [&idle, &asking, &waiting, &busy]
        .iter()
        .map(|id| h.core.runs[*id].turns.len())
        .collect();
    assert_eq!(turns_after, turns_before);
    // Idle: hibernated in its session, nothing to do.
    assert_eq!(h.state(&idle), RunState::Idle);
    assert!(h.core.runs[&idle].hibernated && h.core.runs[&idle].child.is_none());
    assert_eq!(h.live(&idle).1.as_deref(), Some(HIBERNATED_DETAIL));
    assert_eq!(need(&h, &idle), None);
    // Its result asked a question: in Needs you still.
    assert_eq!(h.state(&asking), RunState::Idle);
    assert_eq!(need(&h, &asking), Some(Need::Input));
    // Waiting on a permission: the same request shown again, no CLI behind it.
    assert_eq!(h.state(&waiting), RunState::AwaitingPermission);
    let pending = h.view(&waiting).pending;
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].request_id, "p1");
    assert_eq!(
        pending[0].expires_at,
        h.now + 600_000,
        "its time to answer counts from the restart"
    );
    assert_eq!(need(&h, &waiting), Some(Need::Permission));
    assert!(!h.core.runs[&waiting].holds_slot() && !h.core.runs[&waiting].reserves());
    // On its card again.
    assert_eq!(h.state(&held), RunState::AwaitingRoute);
    assert_eq!(need(&h, &held), Some(Need::Route));
    let card = h.core.runs[&held].route.clone().expect("its card");
    assert_eq!(card.status, "open");
    assert!(card.expires_at > h.now);
    // In a turn: interrupted, in Needs you, not finished, its turn ended.
    assert_eq!(h.state(&busy), RunState::Interrupted);
    assert!(h.core.runs[&busy].turn_cut);
    assert_eq!(need(&h, &busy), Some(Need::Interrupted));
    assert_eq!(h.core.runs[&busy].finished_at, None);
    assert!(
        h.core.runs[&busy]
            .turns
            .iter()
            .all(|t| t.ended_at.is_some())
    );
    assert_eq!(
        h.live(&busy),
        (
            LiveStateKind::Ended,
            Some(super::super::INTERRUPTED_DETAIL.to_string())
        )
    );
    assert_eq!(cause_of(&h, &busy), Some(Cause::ResidentReplaced));
    // None holds a slot or money but the run starting again.
    for id in [&idle, &asking, &waiting, &busy, &held] {
        assert!(!h.core.runs[id].holds_slot(), "{id}");
    }
    // A second restart finds them as they are (the interrupted one still turn-cut).
    let out = h.restart_after(MIN);
    assert!(out.sends.is_empty());
    assert_eq!(h.state(&busy), RunState::Interrupted);
    assert!(h.core.runs[&busy].turn_cut);
    assert_eq!(h.state(&waiting), RunState::AwaitingPermission);
    assert_eq!(h.state(&idle), RunState::Idle);
}

#[test]
fn each_run_put_back_goes_on_after_one_command() {
    let mut h = Harness::new("[limits.per_provider]\nsim = 5\n");
    let idle = h.running();
    session(&mut h, &idle, 1);
    h.provider(&idle, turn_done("## Result\nstatus: done\nsummary: a\n"));
    let waiting = h.running();
    session(&mut h, &waiting, 2);
    h.provider(&waiting, permission("p1", "ls -la"));
    let busy = h.running();
    session(&mut h, &busy, 3);
    h.restart_after(MIN);

    // The hibernated run: a follow-up wakes it in its session.
    let out = h.request(Request::FollowUp {
        run_id: idle.clone(),
        text: "next".into(),
    });
    assert_eq!(out.launches[0].resume_session.as_deref(), Some("sess-1"));
    let out = h.provider(&idle, ProviderEvent::Ready { version: None });
    assert_eq!(out.prompts(&idle), ["next"]);

    // The run waiting on a permission: the answer wakes it in its session and tells it.
    let out = respond(&mut h, &waiting, "p1", allow());
    assert!(out.reply().is_ok(), "{:?}", out.reply());
    assert_eq!(out.decisions(), [("user".to_string(), "allow".to_string())]);
    assert_eq!(out.launches.len(), 1);
    assert_eq!(out.launches[0].resume_session.as_deref(), Some("sess-2"));
    let out = h.provider(&waiting, ProviderEvent::Ready { version: None });
    let prompts = out.prompts(&waiting);
    assert_eq!(prompts.len(), 1);
    assert!(
        prompts[0].starts_with("- You asked to use Bash: `ls -la` — the user allowed it."),
        "{}",
        prompts[0]
    );
    assert_eq!(
        h.core.runs[&waiting].turns.last().unwrap().origin,
        TurnOrigin::Resume
    );
    // The resumed session asks for the same command again: the user's answer allows it.
    let out = h.provider(&waiting, permission("p2", "ls -la"));
    assert_eq!(
        out.sent(&waiting),
        [&ProviderCommand::Answer {
            request_id: "p2".into(),
            answer: allow()
        }]
    );
    assert_eq!(
        out.decisions(),
        [(
            "user".to_string(),
            super::super::answers::CARRIED_ALLOW.to_string()
        )]
    );
    // Once: asked again, it is the user's to answer.
    h.provider(&waiting, permission("p3", "ls -la"));
    assert_eq!(h.state(&waiting), RunState::AwaitingPermission);
    assert_eq!(h.view(&waiting).pending[0].request_id, "p3");

    // The interrupted run: R (resume with no words) sends drover's turn, saying why.
    let out = resume(&mut h, &busy, None);
    assert!(out.reply().is_ok(), "{:?}", out.reply());
    assert_eq!(out.launches[0].resume_session.as_deref(), Some("sess-3"));
    let out = h.provider(&busy, ProviderEvent::Ready { version: None });
    let prompts = out.prompts(&busy);
    assert!(
        prompts[0].starts_with("drover was restarted during your last turn; continue it"),
        "{prompts:?}"
    );
    h.provider(&busy, turn_done("## Result\nstatus: done\nsummary: c\n"));
    assert_eq!(h.state(&busy), RunState::Idle);
    assert_eq!(need(&h, &busy), None);
}

#[test]
fn a_question_shown_again_is_answered_in_words_and_a_denial_carried_too() {
    let mut h = Harness::new("");
    let id = h.running();
    session(&mut h, &id, 1);
    h.provider(&id, question("q1"));
    h.provider(&id, permission("p1", "rm -rf build"));
    h.restart_after(MIN);
    assert_eq!(h.view(&id).pending.len(), 2);
    let answers = [("Which database?".to_string(), "SQLite".to_string())]
        .into_iter()
        .collect();
    let out = respond(&mut h, &id, "q1", PermissionAnswer::Answer { answers });
    assert!(out.launches.is_empty(), "one request is still pending");
    assert_eq!(h.state(&id), RunState::AwaitingPermission);
    let out = respond(
        &mut h,
        &id,
        "p1",
        PermissionAnswer::Deny {
            message: Some("not that".into()),
        },
    );
    assert_eq!(out.launches.len(), 1, "woken once both are answered");
    let out = h.provider(&id, ProviderEvent::Ready { version: None });
    let prompt = out.prompts(&id).remove(0);
    assert!(
        prompt.starts_with(
            "- You asked the user: Which database? — the user answered: SQLite.\n\
             - You asked to use Bash: `rm -rf build` — the user denied it: not that.\n"
        ),
        "{prompt}"
    );
    // A denial allows nothing when asked again.
    h.provider(&id, permission("p2", "rm -rf build"));
    assert_eq!(h.view(&id).pending[0].request_id, "p2");
}

#[test]
fn a_request_shown_again_is_denied_when_its_time_runs_out_and_the_run_is_told() {
    let mut h = Harness::new("");
    let id = h.running();
    session(&mut h, &id, 1);
    h.provider(&id, permission("p1", "ls"));
    h.restart_after(MIN);
    assert!(h.advance(10 * MIN - 1).launches.is_empty());
    let out = h.advance(1);
    assert_eq!(
        out.decisions(),
        [(
            "timeout".to_string(),
            "deny: no answer within 10 min".to_string()
        )]
    );
    assert_eq!(out.launches.len(), 1);
    let out = h.provider(&id, ProviderEvent::Ready { version: None });
    assert!(
        out.prompts(&id)[0].starts_with(
            "- You asked to use Bash: `ls` — no answer came in time, so it is denied."
        ),
        "{:?}",
        out.prompts(&id)
    );
}

#[test]
fn resume_with_no_words_never_speaks_for_the_user() {
    let mut h = Harness::new("");
    // Hibernated after a turn whose result asks a question.
    let asking = h.running();
    session(&mut h, &asking, 1);
    h.provider(
        &asking,
        turn_done(
            "## Result\nstatus: needs_input\nsummary: b\nquestion: staging-eu or staging-us?\n",
        ),
    );
    // Hibernated after a turn that ended blocked.
    let blocked = h.running();
    session(&mut h, &blocked, 2);
    h.provider(
        &blocked,
        turn_done("## Result\nstatus: blocked\nsummary: no access\n"),
    );
    h.restart_after(MIN);
    for id in [&asking, &blocked] {
        let out = resume(&mut h, id, None);
        assert_eq!(out.refusal().code, ErrorCode::FollowUpNeeded, "{id}");
        assert!(out.refusal().message.contains("nothing was sent"));
        assert!(
            out.ops.is_empty() && out.launches.is_empty() && out.sends.is_empty(),
            "{id}: nothing written, nothing started"
        );
    }
    let out = resume(&mut h, &asking, None);
    assert!(
        out.refusal().message.contains("staging-eu or staging-us?"),
        "{}",
        out.refusal().message
    );
    // The user's words go.
    let out = resume(&mut h, &asking, Some("staging-eu"));
    assert_eq!(out.launches[0].resume_session.as_deref(), Some("sess-1"));
    let out = h.provider(&asking, ProviderEvent::Ready { version: None });
    assert_eq!(out.prompts(&asking), ["staging-eu"]);
}

#[test]
fn an_interrupted_run_not_in_a_turn_waits_for_the_users_words_too() {
    // Written by a drover before this one: every active run became interrupted, this one
    // while it waited for a follow-up (its last move came from `idle`).
    let mut h = Harness::new("");
    let id = h.running();
    session(&mut h, &id, 1);
    h.provider(
        &id,
        turn_done("## Result\nstatus: needs_input\nsummary: b\nquestion: which?\n"),
    );
    let mut data = h.ledger_copy(&id);
    data.record.state = RunState::Interrupted;
    data.record.finished_at = Some(h.now);
    data.record.completion_reason = Some("interrupted".into());
    data.turn_cut = false;
    h.startup.restored = vec![data];
    h.core.runs.clear();
    h.core.order.clear();
    let facts = FakeFacts {
        clis: BTreeSet::new(),
        bwrap: true,
    };
    h.core = Core::new(h.config.clone(), h.startup.clone(), Box::new(facts), h.now).unwrap();
    h.startup.restored.clear();
    let (effects, _) = h.core.due(h.now);
    let mut out = Out::default();
    h.carry(effects, &mut out);
    // Its old end is forgotten on its row: it waits for the user.
    assert!(out.ops.iter().any(|op| matches!(
        op,
        WriteOp::UpdateRun { run_id, patch } if run_id == &id && patch.reopened
    )));
    assert_eq!(h.state(&id), RunState::Interrupted);
    assert_eq!(h.core.runs[&id].finished_at, None);
    assert_eq!(need(&h, &id), Some(Need::Interrupted));
    let out = resume(&mut h, &id, None);
    assert_eq!(out.refusal().code, ErrorCode::FollowUpNeeded);
    assert!(out.ops.is_empty() && out.launches.is_empty());
    // A follow-up on it goes as the resumed turn.
    let out = h.request(Request::FollowUp {
        run_id: id.clone(),
        text: "the first one".into(),
    });
    assert!(out.reply().is_ok(), "{:?}", out.reply());
    assert_eq!(out.launches[0].resume_session.as_deref(), Some("sess-1"));
    let out = h.provider(&id, ProviderEvent::Ready { version: None });
    assert_eq!(out.prompts(&id), ["the first one"]);
}

#[test]
fn an_interrupted_run_is_stopped_or_completed_by_the_user() {
    let mut h = Harness::new("");
    let a = h.running();
    session(&mut h, &a, 1);
    let b = h.running();
    session(&mut h, &b, 2);
    h.restart_after(MIN);
    let out = h.request(Request::Stop { run_id: a.clone() });
    assert!(out.reply().is_ok(), "{:?}", out.reply());
    assert_eq!(h.state(&a), RunState::Stopped);
    assert_eq!(reason_of(&h, &a).as_deref(), Some("user"));
    let out = h.request(Request::Complete { run_id: b.clone() });
    assert!(out.reply().is_ok(), "{:?}", out.reply());
    assert_eq!(h.state(&b), RunState::Completed);
    for id in [&a, &b] {
        assert!(h.core.runs[id].finished_at.is_some());
        assert_ne!(need(&h, id), Some(Need::Interrupted));
    }
}

#[test]
fn a_stopping_owner_leaves_each_run_for_the_next_one_to_put_back() {
    let mut h = Harness::new("[limits.per_provider]\nsim = 5\n");
    let idle = h.running();
    session(&mut h, &idle, 1);
    h.provider(&idle, turn_done("## Result\nstatus: done\nsummary: a\n"));
    let waiting = h.running();
    session(&mut h, &waiting, 2);
    h.provider(&waiting, permission("p1", "ls"));
    let busy = h.running();
    session(&mut h, &busy, 3);
    let out = h.feed(Input::Shutdown);
    for id in [&idle, &waiting, &busy] {
        assert!(out.sent(id).contains(&&ProviderCommand::Shutdown), "{id}");
    }
    // What a CLI says as it goes changes nothing of a run left for the next owner.
    h.provider(
        &waiting,
        ProviderEvent::PermissionWithdrawn {
            request_id: "p1".into(),
        },
    );
    h.provider(
        &waiting,
        ProviderEvent::TurnCompleted(TurnEnd {
            is_error: true,
            subtype: "error_during_execution".into(),
            ..TurnEnd::default()
        }),
    );
    for id in [&idle, &waiting, &busy] {
        h.exit(id);
    }
    assert!(h.core.shutdown_finished(h.now));
    assert_eq!(h.state(&idle), RunState::Idle);
    assert_eq!(h.state(&waiting), RunState::AwaitingPermission);
    assert_eq!(
        h.view(&waiting).pending.len(),
        1,
        "its request still pending"
    );
    assert_eq!(h.state(&busy), RunState::Interrupted);
    assert_eq!(reason_of(&h, &busy), None, "interrupted is not an end");

    let out = h.restart_after(MIN);
    assert!(out.sends.is_empty() && out.launches.is_empty());
    assert_eq!(h.state(&idle), RunState::Idle);
    assert!(h.core.runs[&idle].hibernated);
    assert_eq!(h.state(&waiting), RunState::AwaitingPermission);
    assert_eq!(h.view(&waiting).pending[0].request_id, "p1");
    assert_eq!(h.state(&busy), RunState::Interrupted);
    assert!(h.core.runs[&busy].turn_cut);
}

#[test]
fn an_idle_run_with_no_session_cannot_be_woken_and_is_interrupted() {
    let mut h = Harness::new("");
    let id = h.idle();
    assert!(h.core.runs[&id].provider_session_id.is_none());
    h.restart_after(MIN);
    assert_eq!(h.state(&id), RunState::Interrupted);
    assert!(!h.core.runs[&id].turn_cut);
    assert_eq!(
        h.live(&id).1.as_deref(),
        Some(super::super::INTERRUPTED_NO_SESSION_DETAIL)
    );
    let out = resume(&mut h, &id, Some("go on"));
    assert_eq!(out.refusal().code, ErrorCode::RunNotResumable);
    // Retry starts it again as a new run; the old one completes.
    let out = h.request(Request::Retry { run_id: id.clone() });
    assert!(out.reply().is_ok(), "{:?}", out.reply());
    assert_eq!(h.state(&id), RunState::Completed);
}
