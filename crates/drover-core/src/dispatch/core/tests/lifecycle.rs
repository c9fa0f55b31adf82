//! Turns and ends (docs/ARCHITECTURE.md §"Run lifecycle", §"Result contract"): the first
//! turn, result retry, queued follow-ups, max turns, needs_input, provider errors, stop
//! with pending requests, complete, kill-all, a child that dies, resume of an interrupted
//! run.

use super::*;

#[test]
fn ready_sends_the_first_turn_with_the_task_and_the_result_request() {
    let mut h = Harness::new("");
    let id = h.dispatch();
    let out = h.provider(&id, ProviderEvent::Ready { version: None });
    let turns = out.prompts(&id);
    assert_eq!(turns.len(), 1);
    assert!(turns[0].starts_with("do the thing"));
    assert!(turns[0].contains("## Result"));
    assert_eq!(h.state(&id), RunState::Running);
    assert_eq!(
        h.live(&id),
        (LiveStateKind::Working, Some("model turn".into()))
    );
}

#[test]
fn a_turn_without_a_result_block_is_asked_once_more() {
    let mut h = Harness::new("");
    let id = h.running();
    let out = h.provider(&id, turn_done("all done, I think"));
    assert_eq!(out.prompts(&id).len(), 1, "one retry turn");
    assert!(out.notes().iter().any(|n| n.contains("asking once more")));
    assert_eq!(h.core.runs[&id].turns.len(), 2);
    assert_eq!(h.core.runs[&id].turns[1].origin, TurnOrigin::ResultRetry);
    // Still none: the run goes idle with no usable result, no third turn.
    let out = h.provider(&id, turn_done("still nothing"));
    assert!(out.prompts(&id).is_empty());
    assert!(out.notes().iter().any(|n| n.contains("no usable result")));
    assert_eq!(h.state(&id), RunState::Idle);
    // Result retries do not count against max turns.
    assert_eq!(h.core.runs[&id].user_turns(), 1);
}

#[test]
fn a_follow_up_during_a_turn_waits_for_its_end_then_goes() {
    let mut h = Harness::new("");
    let id = h.running();
    let out = h.request(Request::FollowUp {
        run_id: id.clone(),
        text: "and the tests too".into(),
    });
    assert!(out.prompts(&id).is_empty(), "not while a turn runs");
    assert!(out.notes().iter().any(|n| n.contains("follow-up queued")));
    assert_eq!(h.view(&id).queued_follow_ups, 1);
    let out = h.provider(&id, turn_done("## Result\nstatus: done\nsummary: ok\n"));
    assert_eq!(out.prompts(&id), ["and the tests too"]);
    assert_eq!(h.state(&id), RunState::Running);
    assert_eq!(h.view(&id).queued_follow_ups, 0);
}

#[test]
fn a_follow_up_to_an_idle_run_starts_its_next_turn() {
    let mut h = Harness::new("");
    let id = h.idle();
    let out = h.request(Request::FollowUp {
        run_id: id.clone(),
        text: "next".into(),
    });
    assert_eq!(out.prompts(&id), ["next"]);
    assert_eq!(out.run().head.state, RunState::Running);
}

#[test]
fn max_turns_ends_the_run_and_refuses_more_follow_ups() {
    let mut h = Harness::new("");
    let id = h.dispatch_with(|s| s.max_turns = Some(2)).run().head.run_id;
    h.provider(&id, ProviderEvent::Ready { version: None });
    h.provider(&id, turn_done("## Result\nstatus: done\nsummary: one\n"));
    h.request(Request::FollowUp {
        run_id: id.clone(),
        text: "two".into(),
    });
    let out = h.request(Request::FollowUp {
        run_id: id.clone(),
        text: "three".into(),
    });
    assert_eq!(out.refusal().code, ErrorCode::MaxTurns);
    let out = h.provider(&id, turn_done("## Result\nstatus: done\nsummary: two\n"));
    assert!(
        out.notes()
            .iter()
            .any(|n| n == "reached its limit of 2 turns")
    );
    assert!(out.sent(&id).contains(&&ProviderCommand::Shutdown));
    h.exit(&id);
    assert_eq!(h.state(&id), RunState::Completed);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("max_turns"));
}

#[test]
fn a_one_turn_run_says_its_limit_in_the_singular() {
    let mut h = Harness::new("");
    let id = h.dispatch_with(|s| s.max_turns = Some(1)).run().head.run_id;
    h.provider(&id, ProviderEvent::Ready { version: None });
    let out = h.provider(&id, turn_done("## Result\nstatus: done\nsummary: one\n"));
    let notes = out.notes();
    assert!(
        notes.iter().any(|n| n == "reached its limit of 1 turn"),
        "{notes:?}"
    );
}

#[test]
fn needs_input_is_kept_and_shown_on_the_live_line() {
    let mut h = Harness::new("");
    let id = h.running();
    h.provider(
        &id,
        turn_done(
            "## Result\nstatus: needs_input\nsummary: which db?\nquestion: Postgres or SQLite?\n",
        ),
    );
    assert_eq!(h.state(&id), RunState::Idle);
    assert!(h.core.runs[&id].summary().needs_input);
    assert_eq!(
        h.live(&id).1.as_deref(),
        Some("needs your input: answer with a follow-up")
    );
    let result = h.view(&id).last_result.unwrap();
    assert_eq!(result.question.as_deref(), Some("Postgres or SQLite?"));
}

#[test]
fn a_transient_provider_error_fails_the_run_with_a_retry_offered() {
    // Not sent again (`resend.rs`): failed at once.
    let mut h = Harness::new("[limits]\nresend_turns_max = 0\n");
    let id = h.running();
    let out = h.provider(
        &id,
        ProviderEvent::TurnCompleted(TurnEnd {
            is_error: true,
            subtype: "success".into(),
            text: Some(r#"API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#.into()),
            api_error_status: Some(529),
            api_message: Some("Overloaded".into()),
            transient: true,
            ..TurnEnd::default()
        }),
    );
    assert!(
        out.notes()
            .contains(&"the model API failed with HTTP 529: Overloaded".to_string()),
        "the status and the API's words, not the subtype: {:?}",
        out.notes()
    );
    assert!(out.notes().iter().any(|n| n.contains("may pass")));
    h.exit(&id);
    assert_eq!(h.state(&id), RunState::Failed);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("provider_unavailable"));
    let offer = h.view(&id).escalation.expect("an offer");
    assert_eq!(offer.kind, crate::route::EscalationKind::Retry);
}

#[test]
fn stop_denies_what_is_pending_and_ends_once_the_child_exits() {
    let mut h = Harness::new("");
    let id = h.running();
    h.provider(&id, permission("p1", "ls -la"));
    h.provider(&id, question("q1"));
    assert_eq!(h.state(&id), RunState::AwaitingPermission);
    let out = h.request(Request::Stop { run_id: id.clone() });
    let decisions = out.decisions();
    assert_eq!(decisions.len(), 2, "{decisions:?}");
    assert!(
        decisions
            .iter()
            .all(|(who, d)| who == "system" && d.starts_with("deny"))
    );
    assert!(out.sent(&id).contains(&&ProviderCommand::Shutdown));
    // Not ended until the child has gone.
    assert_eq!(h.state(&id), RunState::AwaitingPermission);
    assert!(h.view(&id).pending.is_empty());
    let out = h.request(Request::Stop { run_id: id.clone() });
    assert_eq!(
        out.refusal().code,
        ErrorCode::RunNotActive,
        "already ending"
    );
    h.exit(&id);
    assert_eq!(h.state(&id), RunState::Stopped);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("user"));
    assert_eq!(cause_of(&h, &id), Some(Cause::Stopped));
}

#[test]
fn complete_needs_an_idle_run_and_wraps_it_up() {
    let mut h = Harness::new("");
    let id = h.running();
    let out = h.request(Request::Complete { run_id: id.clone() });
    assert_eq!(out.refusal().code, ErrorCode::RunNotIdle);
    h.provider(&id, turn_done("## Result\nstatus: done\nsummary: ok\n"));
    let out = h.request(Request::Complete { run_id: id.clone() });
    assert!(out.reply().is_ok());
    assert_eq!(h.live(&id).0, LiveStateKind::WrappingUp);
    h.exit(&id);
    assert_eq!(h.state(&id), RunState::Completed);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("complete"));
}

#[test]
fn kill_all_stops_running_queued_and_held_runs() {
    let mut h = Harness::new("[limits.per_provider]\nsim = 1\n");
    let running = h.running();
    let queued = h.dispatch();
    let held = h
        .dispatch_with(|s| s.model = Some("auto".into()))
        .run()
        .head
        .run_id;
    let out = h.request(Request::KillAll { workflow: None });
    match out.reply() {
        Ok(Response::Stopped(s)) => {
            assert_eq!(s.stopped, [running.clone(), queued.clone(), held.clone()])
        }
        other => panic!("{other:?}"),
    }
    // Without a child they end at once; the held run's card closes.
    assert_eq!(h.state(&queued), RunState::Stopped);
    assert_eq!(h.state(&held), RunState::Stopped);
    assert_eq!(h.view(&held).route.unwrap().status, "closed");
    let out = h.exit(&running);
    assert_eq!(h.state(&running), RunState::Stopped);
    assert!(
        out.launches.is_empty(),
        "the stopped queued run never starts"
    );
}

#[test]
fn a_child_that_dies_fails_its_run() {
    let mut h = Harness::new("");
    let before_ready = h.dispatch();
    h.exit(&before_ready);
    assert_eq!(
        reason_of(&h, &before_ready).as_deref(),
        Some("launch_error")
    );
    assert_eq!(cause_of(&h, &before_ready), Some(Cause::Failed));
    let id = h.running();
    let out = h.exit(&id);
    assert!(out.notes().iter().any(|n| n.contains("ended unexpectedly")));
    assert_eq!(h.state(&id), RunState::Failed);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("provider_error"));
    assert_eq!(cause_of(&h, &id), Some(Cause::RunnerGone));
}

#[test]
fn shutdown_interrupts_the_run_in_a_turn_leaves_the_others_and_waits_for_the_children() {
    let mut h = Harness::new("");
    let a = h.running();
    let b = h.running();
    h.provider(
        &b,
        ProviderEvent::Session {
            session_id: "sess-b".into(),
            model: None,
        },
    );
    h.provider(&b, turn_done("## Result\nstatus: done\nsummary: did it\n"));
    let out = h.feed(Input::Shutdown);
    assert!(out.sent(&a).contains(&&ProviderCommand::Shutdown));
    assert!(out.sent(&b).contains(&&ProviderCommand::Shutdown));
    assert!(!h.core.shutdown_finished(h.now), "children still up");
    let out = h.request(Request::Ping);
    assert!(out.reply().is_ok(), "ping is still answered");
    let out = h.request(Request::Runs {
        state: None,
        include_removed: false,
        workflow: None,
        limit: None,
        before: None,
        search: None,
    });
    assert!(out.refusal().message.contains("shutting down"));
    h.exit(&a);
    let out = h.exit(&b);
    assert!(h.core.shutdown_finished(h.now));
    assert_eq!(h.state(&a), RunState::Interrupted);
    assert!(h.core.runs[&a].turn_cut);
    assert_eq!(
        h.live(&a),
        (
            LiveStateKind::Ended,
            Some(super::super::INTERRUPTED_DETAIL.into())
        )
    );
    // The idle run is left as it is, for the next owner to put back.
    assert_eq!(h.state(&b), RunState::Idle);
    // (Only its CLI's exit is in its transcript.)
    let changed = out.ops.iter().any(|op| match op {
        WriteOp::UpdateRun { patch, .. } => patch.state.is_some() || patch.live_state.is_some(),
        WriteOp::AppendEvent(e) => e.kind != "transcript",
        _ => true,
    });
    assert!(!changed, "nothing of it changed: {:?}", out.ops);
}

/// A run whose turn was in flight when drover died, in session `sess-1`: interrupted
/// once the next owner starts.
pub(super) fn interrupted_run(h: &mut Harness) -> String {
    let id = h.running();
    h.provider(
        &id,
        ProviderEvent::Session {
            session_id: "sess-1".into(),
            model: None,
        },
    );
    h.restart_after(MIN);
    assert_eq!(h.state(&id), RunState::Interrupted);
    id
}

#[test]
fn resume_starts_an_interrupted_run_in_its_provider_session() {
    let mut h = Harness::new("");
    let id = interrupted_run(&mut h);
    let next_seq = h.core.runs[&id].next_seq;
    let out = h.request(Request::Resume {
        run_id: id.clone(),
        text: Some("go on please".into()),
    });
    assert_eq!(out.run().head.state, RunState::Starting);
    assert_eq!(out.launches[0].resume_session.as_deref(), Some("sess-1"));
    let first_seq = out.ops.iter().find_map(|op| match op {
        WriteOp::AppendEvent(e) if e.run_id == id => Some(e.seq),
        _ => None,
    });
    assert_eq!(first_seq, Some(next_seq), "seqs go on from the ledger's");
    let out = h.provider(&id, ProviderEvent::Ready { version: None });
    assert_eq!(out.prompts(&id), ["go on please"]);
    assert_eq!(
        h.core.runs[&id].turns.last().unwrap().origin,
        TurnOrigin::Resume
    );
    // A run in a turn is not resumed.
    let out = h.request(Request::Resume {
        run_id: id,
        text: None,
    });
    assert_eq!(out.refusal().code, ErrorCode::RunNotResumable);
}

#[test]
fn only_an_interrupted_run_with_a_session_on_a_provider_drover_runs_is_resumed() {
    // No session: the provider never reported one before drover died.
    let mut h = Harness::new("");
    let id = h.running();
    h.restart_after(MIN);
    assert_eq!(h.state(&id), RunState::Interrupted);
    let out = h.request(Request::Resume {
        run_id: id.clone(),
        text: None,
    });
    assert_eq!(out.refusal().code, ErrorCode::RunNotResumable);
    assert!(
        out.refusal().message.contains("drover retry"),
        "{}",
        out.refusal().message
    );
    assert!(
        out.ops.is_empty() && out.launches.is_empty(),
        "nothing written"
    );
    // Its provider disabled since.
    let id = interrupted_run(&mut h);
    if let Some(sim) = h.core.config.providers.get_mut("sim") {
        sim.enabled = false;
    }
    let out = h.request(Request::Resume {
        run_id: id.clone(),
        text: None,
    });
    assert_eq!(out.refusal().code, ErrorCode::InvalidProvider);
    assert!(
        out.ops.is_empty() && out.launches.is_empty(),
        "nothing written"
    );
    assert_eq!(h.state(&id), RunState::Interrupted);
    // A run not in memory (finished, or none): the ledger answers.
    let out = h.request(Request::Resume {
        run_id: "r-gone".into(),
        text: None,
    });
    assert!(
        matches!(&out.answers[..], [(_, Query::NotActive { run_id })] if run_id == "r-gone"),
        "{:?}",
        out.answers
    );
}

#[test]
fn a_blocked_run_offers_escalation_and_the_new_run_carries_its_result() {
    let mut h = Harness::new("");
    let id = h.running();
    h.provider(
        &id,
        turn_done("## Result\nstatus: blocked\nsummary: no access to the db\n"),
    );
    // The turn ended blocked: the run is idle, still warm, and the offer is made now.
    assert_eq!(h.state(&id), RunState::Idle);
    let offer = h
        .view(&id)
        .escalation
        .expect("an escalation offer while warm");
    assert_eq!(offer.kind, crate::route::EscalationKind::Escalate);
    let row = h.core.runs[&id].summary();
    assert_eq!(
        row.needs_you(),
        Some(crate::dispatch::api::Need::Escalation)
    );
    let need = h.view(&id).needs_you.expect("show carries needs_you");
    assert_eq!(need.reason, crate::dispatch::api::Need::Escalation);
    // `e` on the idle run: the new run carries the result, the old one completes.
    let out = h.request(Request::Escalate {
        run_id: id.clone(),
        provider: None,
        model: None,
    });
    let child = out.run();
    assert_eq!(child.head.model.as_deref(), Some(offer.to_model.as_str()));
    let view = h.view(&child.head.run_id);
    assert_eq!(view.parent_run.as_deref(), Some(id.as_str()));
    assert_eq!(view.depth, 1);
    let spec = &h.core.runs[&child.head.run_id].spec;
    assert!(
        spec.context
            .as_deref()
            .is_some_and(|c| c.contains("no access to the db")),
        "{:?}",
        spec.context
    );
    h.exit(&id);
    assert_eq!(h.state(&id), RunState::Completed);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("escalated"));
    let old = h.view(&id);
    assert!(old.escalation.is_none(), "the offer was taken: {old:?}");
    assert!(old.needs_you.is_none(), "{:?}", old.needs_you);
}

#[test]
fn a_warm_offer_is_made_once_and_withdrawn_by_a_turn_that_is_not_blocked() {
    let mut h = Harness::new("");
    let id = h.running();
    h.provider(
        &id,
        turn_done("## Result\nstatus: blocked\nsummary: no db\n"),
    );
    assert!(h.view(&id).escalation.is_some());
    // A follow-up while an offer stands; it ends blocked again: no second offer.
    h.request(Request::FollowUp {
        run_id: id.clone(),
        text: "try again".into(),
    });
    let out = h.provider(
        &id,
        turn_done("## Result\nstatus: blocked\nsummary: no db\n"),
    );
    assert!(
        !out.notes().iter().any(|n| n.contains("escalation offered")),
        "{:?}",
        out.notes()
    );
    // A turn that is done withdraws it: the run waits for nothing.
    h.request(Request::FollowUp {
        run_id: id.clone(),
        text: "use the fixture".into(),
    });
    h.provider(&id, turn_done("## Result\nstatus: done\nsummary: ok\n"));
    let view = h.view(&id);
    assert!(view.escalation.is_none());
    assert!(view.needs_you.is_none());
    assert_eq!(h.core.runs[&id].summary().needs_you(), None);
    // A run still in a turn is refused.
    h.request(Request::FollowUp {
        run_id: id.clone(),
        text: "more".into(),
    });
    let out = h.request(Request::Escalate {
        run_id: id.clone(),
        provider: None,
        model: None,
    });
    assert_eq!(out.refusal().code, ErrorCode::RunNotActive);
}

#[test]
fn a_cli_that_refuses_or_never_answers_its_handshake_fails_with_its_own_words() {
    let exited = |code, signal, tail: &str| ProviderEvent::Exited {
        code,
        signal,
        stderr_tail: tail.into(),
    };
    // It refuses: it says why on stderr and exits.
    let mut h = Harness::new("");
    let id = h.dispatch();
    let out = h.provider(
        &id,
        exited(
            Some(1),
            None,
            "Loading\nInvalid API key · Please run /login\n",
        ),
    );
    assert_eq!(h.state(&id), RunState::Failed);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("launch_error"));
    assert_eq!(
        out.notes(),
        [
            "the provider did not start (exit code 1); its last stderr line: \"Invalid API key · Please run /login\""
        ]
    );
    // It never answers: the adapter says so, ends it, and the note keeps both.
    let id = h.dispatch();
    h.provider(
        &id,
        ProviderEvent::Notice {
            text: "the CLI did not answer the handshake within 60.0 s".into(),
        },
    );
    let out = h.provider(&id, exited(None, Some(15), "waiting for MCP server github"));
    assert_eq!(reason_of(&h, &id).as_deref(), Some("launch_error"));
    assert_eq!(
        out.notes(),
        [
            "the provider did not start: the CLI did not answer the handshake within 60.0 s (signal 15); its last stderr line: \"waiting for MCP server github\""
        ]
    );
    // A notice after the handshake is no reason for a later exit.
    let id = h.running();
    h.provider(
        &id,
        ProviderEvent::Notice {
            text: "the conversation was compacted".into(),
        },
    );
    let out = h.provider(&id, exited(Some(1), None, "panic: boom"));
    assert_eq!(reason_of(&h, &id).as_deref(), Some("provider_error"));
    assert_eq!(
        out.notes().first().map(String::as_str),
        Some(
            "the provider process ended unexpectedly (exit code 1); its last stderr line: \"panic: boom\""
        )
    );
}

#[test]
fn remove_finished_goes_through_a_long_history_a_page_at_a_time() {
    let mut h = Harness::new("");
    let then = h.remove_finished();
    let page = super::super::REMOVE_PAGE as usize;
    let full: Vec<RunSummary> = (0..page)
        .map(|i| RunSummary::example(&format!("old-{i:04}"), RunState::Completed))
        .collect();
    let out = h.feed(Input::Loaded {
        then,
        answer: Ok(Fetched::Summaries(full)),
    });
    assert!(out.replies.is_empty(), "a full page asks for the next one");
    let removed = |out: &Out| {
        out.events
            .iter()
            .filter(|e| matches!(e, DispatchEvent::RunRemoved { .. }))
            .count()
    };
    assert_eq!(
        removed(&out),
        page,
        "the page's runs are removed as it comes"
    );
    let last = format!("old-{:04}", page - 1);
    let [
        (
            Fetch::FinishedRuns {
                before: Some(before),
            },
            then,
        ),
    ] = &out.loads[..]
    else {
        panic!("{:?}", out.loads)
    };
    assert_eq!(
        before, &last,
        "the next page starts after the last run of this one"
    );
    // The last page is short: the answer counts every page's runs.
    let out = h.feed(Input::Loaded {
        then: then.clone(),
        answer: Ok(Fetched::Summaries(vec![
            RunSummary::example("older", RunState::Failed),
            RunSummary::example("running", RunState::Running),
        ])),
    });
    assert!(out.loads.is_empty(), "{:?}", out.loads);
    assert_eq!(removed(&out), 1, "an active run is never removed");
    match out.reply() {
        Ok(Response::Removed(r)) => {
            assert_eq!(r.removed.len(), page + 1);
            assert_eq!(r.removed.first().map(String::as_str), Some("old-0000"));
            assert_eq!(r.removed.last().map(String::as_str), Some("older"));
            assert!(r.unmerged.is_empty());
        }
        other => panic!("{other:?}"),
    }
}

/// The turn's end is handed to the writer with every piece of the agent's text the turn
/// brought, one per line, for the search index (docs/ARCHITECTURE.md §"Ledger") — not the
/// provider's closing answer alone, which the turn's row keeps; a turn cut short too.
#[test]
fn a_turns_end_hands_the_writer_all_its_agent_text() {
    let ended_text = |out: &Out| -> Vec<Option<String>> {
        out.ops
            .iter()
            .filter_map(|op| match op {
                WriteOp::EndTurn { text, .. } => Some(text.clone()),
                _ => None,
            })
            .collect()
    };
    let mut h = Harness::new("");
    let id = h.running();
    for words in ["Looking at the zeppelin first.", "Then the hangar."] {
        let out = h.provider(&id, ProviderEvent::AssistantText { text: words.into() });
        assert!(ended_text(&out).is_empty(), "a turn in flight is not ended");
    }
    let out = h.provider(
        &id,
        turn_done("All set.\n\n## Result\nstatus: done\nsummary: tidied"),
    );
    assert_eq!(
        ended_text(&out),
        [Some(
            "Looking at the zeppelin first.\nThen the hangar.".to_string()
        )]
    );
    let row = out.ops.iter().find_map(|op| match op {
        WriteOp::EndTurn { turn, .. } => Some(turn.text.clone()),
        _ => None,
    });
    assert!(
        row.flatten().is_some_and(|t| t.starts_with("All set.")),
        "the row keeps the provider's answer"
    );
    // A turn cut short by its CLI's death: what it said so far.
    let out = h.request(Request::FollowUp {
        run_id: id.clone(),
        text: "and the blimp".into(),
    });
    assert_eq!(out.prompts(&id).len(), 1);
    h.provider(
        &id,
        ProviderEvent::AssistantText {
            text: "The blimp".into(),
        },
    );
    let out = h.provider(
        &id,
        ProviderEvent::Exited {
            code: Some(1),
            signal: None,
            stderr_tail: String::new(),
        },
    );
    assert_eq!(ended_text(&out), [Some("The blimp".to_string())]);
}
