//! A run on a host whose connection dropped (docs/ARCHITECTURE.md §"Hosts",
//! `host_drop.rs`): it waits in `waiting_host` while the owner reconnects after 1, 2, 4 …
//! seconds (at most a minute), fails as `host_unreachable` after the last try, and once
//! reconnected goes on in its provider session there as a restart puts a run back.

use super::*;
use crate::dispatch::core::host_drop::{
    HOST_DROPPED_DETAIL, HOST_TRIES_MAX, HOST_TRY_TIMEOUT_MS, ReconnectJob,
};

const HOSTS: &str = "[hosts.buildbox]\nssh = \"me@buildbox\"\n";

/// A sim run on `buildbox`, ready, with its provider session reported: its first turn is
/// in flight.
fn running_there(h: &mut Harness) -> String {
    let id = h
        .dispatch_with(|s| {
            s.host = Some("buildbox".into());
            s.cwd = Some("/srv/project".into());
            s.max_minutes = Some(120);
            s.idle_timeout_secs = Some(3_600);
        })
        .run()
        .head
        .run_id;
    assert_eq!(h.core.runs[&id].spec.host.as_deref(), Some("buildbox"));
    h.provider(&id, ProviderEvent::Ready { version: None });
    h.provider(
        &id,
        ProviderEvent::Session {
            session_id: "sess-1".into(),
            model: None,
        },
    );
    id
}

/// The same, its first turn over: idle between turns.
fn idle_there(h: &mut Harness) -> String {
    let id = running_there(h);
    h.provider(&id, turn_done("## Result\nstatus: done\nsummary: did it\n"));
    assert_eq!(h.state(&id), RunState::Idle);
    id
}

/// The transport's local `ssh` exits: 255 when it lost the connection.
fn ssh_exits(h: &mut Harness, id: &str, code: Option<i32>, signal: Option<i32>) -> Out {
    h.provider(
        id,
        ProviderEvent::Exited {
            code,
            signal,
            stderr_tail: "Connection to buildbox closed by remote host.".into(),
        },
    )
}

/// The bound of the run's live state, after `now`.
fn bound_in(h: &Harness, id: &str) -> i64 {
    let live = h.core.runs[id].live.clone().expect("live");
    live.bound.expect("a bound") - h.now
}

/// Moves the clock to the next try and returns its job (none before it).
fn next_try(h: &mut Harness, id: &str, wait: i64) -> ReconnectJob {
    let early = h.advance(wait - 1);
    assert!(early.reconnects.is_empty(), "no try before {wait} ms");
    let mut out = h.advance(1);
    assert_eq!(out.reconnects.len(), 1, "one try at {wait} ms");
    let job = out.reconnects.remove(0);
    assert_eq!(job.run_id, id);
    job
}

#[test]
fn a_dropped_host_waits_longer_each_try_and_fails_after_the_last() {
    let mut h = Harness::new(HOSTS);
    let id = idle_there(&mut h);
    let out = ssh_exits(&mut h, &id, Some(255), None);
    assert!(out.launches.is_empty() && out.reconnects.is_empty());
    assert_eq!(h.state(&id), RunState::Idle, "not failed");
    assert_eq!(
        h.live(&id),
        (LiveStateKind::WaitingHost, Some("buildbox".into()))
    );
    assert!(
        out.notes()
            .iter()
            .any(|n| n.contains("connection to host buildbox dropped")),
        "{:?}",
        out.notes()
    );

    let mut waits = Vec::new();
    for tries in 1..=HOST_TRIES_MAX {
        let wait = bound_in(&h, &id);
        waits.push(wait);
        let job = next_try(&mut h, &id, wait);
        assert_eq!(job.transport.name, "buildbox");
        assert_eq!(job.pid_file, crate::providers::transport::pid_file(&id));
        // While a try is under way, no other one starts.
        assert!(h.advance(HOST_TRY_TIMEOUT_MS).reconnects.is_empty());
        let out = h.feed(Input::Reconnected {
            run_id: id.clone(),
            outcome: Err("exited 255: Connection refused".into()),
        });
        if tries < HOST_TRIES_MAX {
            assert_eq!(h.live(&id).0, LiveStateKind::WaitingHost, "try {tries}");
            assert!(h.state(&id).is_active());
        } else {
            assert!(
                out.notes()
                    .iter()
                    .any(|n| n.contains("did not answer after 10 tries")
                        && n.contains("drover doctor --host buildbox")),
                "{:?}",
                out.notes()
            );
        }
    }
    assert_eq!(
        waits,
        [
            1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000, 60_000
        ]
    );
    assert_eq!(h.state(&id), RunState::Failed);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("host_unreachable"));
    assert!(
        h.advance(600_000).reconnects.is_empty(),
        "no try after the end"
    );
}

#[test]
fn a_reconnected_run_between_turns_wakes_in_its_session_for_a_follow_up_sent_meanwhile() {
    let mut h = Harness::new(HOSTS);
    let id = idle_there(&mut h);
    // A killed ssh client dies of a signal.
    ssh_exits(&mut h, &id, None, Some(9));
    assert_eq!(h.live(&id).0, LiveStateKind::WaitingHost);
    // A follow-up while it waits is kept: nothing starts before the host answers.
    let out = h.request(Request::FollowUp {
        run_id: id.clone(),
        text: "and the tests".into(),
    });
    assert!(out.reply().is_ok(), "{:?}", out.reply());
    assert!(
        out.launches.is_empty(),
        "nothing launched before the reconnect"
    );
    let job = next_try(&mut h, &id, 1_000);
    let out = h.feed(Input::Reconnected {
        run_id: job.run_id,
        outcome: Ok(()),
    });
    assert_eq!(out.launches.len(), 1, "woken for the follow-up");
    let launch = &out.launches[0];
    assert_eq!(launch.resume_session.as_deref(), Some("sess-1"));
    assert_eq!(
        launch.transport.as_ref().map(|t| t.name.as_str()),
        Some("buildbox")
    );
    h.provider(&id, ProviderEvent::Ready { version: None });
    assert_eq!(
        h.core.runs[&id].last_prompt.as_deref(),
        Some("and the tests")
    );
    assert_eq!(h.live(&id).0, LiveStateKind::Working);
}

#[test]
fn a_reconnected_run_whose_turn_was_cut_is_interrupted_and_resumes_in_its_session() {
    let mut h = Harness::new(HOSTS);
    let id = running_there(&mut h);
    ssh_exits(&mut h, &id, Some(255), None);
    assert_eq!(h.state(&id), RunState::Running);
    let job = next_try(&mut h, &id, 1_000);
    h.feed(Input::Reconnected {
        run_id: job.run_id,
        outcome: Ok(()),
    });
    assert_eq!(h.state(&id), RunState::Interrupted);
    assert_eq!(
        h.live(&id),
        (LiveStateKind::Ended, Some(HOST_DROPPED_DETAIL.into()))
    );
    assert!(h.core.runs[&id].turn_cut, "drover's resume turn may go");
    let out = h.request(Request::Resume {
        run_id: id.clone(),
        text: None,
    });
    assert!(out.reply().is_ok(), "{:?}", out.reply());
    assert_eq!(out.launches.len(), 1);
    assert_eq!(out.launches[0].resume_session.as_deref(), Some("sess-1"));
}

#[test]
fn only_a_host_runs_lost_connection_waits_for_its_host() {
    // The CLI there exited by itself (status 1): the run fails as before.
    let mut h = Harness::new(HOSTS);
    let id = idle_there(&mut h);
    ssh_exits(&mut h, &id, Some(1), None);
    assert_eq!(h.state(&id), RunState::Failed);
    // A run on this machine whose CLI exits 255 fails too, its session known or not.
    let id = h.idle();
    h.provider(
        &id,
        ProviderEvent::Session {
            session_id: "sess-local".into(),
            model: None,
        },
    );
    ssh_exits(&mut h, &id, Some(255), None);
    assert_eq!(h.state(&id), RunState::Failed);
}

#[test]
fn a_run_stopped_while_it_waits_ends_and_its_group_there_is_ended_once() {
    let mut h = Harness::new(HOSTS);
    let id = idle_there(&mut h);
    ssh_exits(&mut h, &id, Some(255), None);
    let out = h.request(Request::Stop { run_id: id.clone() });
    assert_eq!(h.state(&id), RunState::Stopped);
    // What the old CLI left there is ended all the same (one job, its outcome ignored).
    assert_eq!(out.reconnects.len(), 1);
    assert_eq!(out.reconnects[0].run_id, id);
    assert!(
        h.advance(5_000).reconnects.is_empty(),
        "no try after the end"
    );
    h.feed(Input::Reconnected {
        run_id: id.clone(),
        outcome: Ok(()),
    });
    assert_eq!(h.state(&id), RunState::Stopped);
}

/// A host that answers the reconnect but drops every CLI before it is ready: the tries
/// go on counting across the drops, and the run is given up on.
#[test]
fn a_run_that_drops_again_before_it_is_ready_goes_on_counting_its_tries() {
    let mut h = Harness::new(HOSTS);
    let id = idle_there(&mut h);
    ssh_exits(&mut h, &id, Some(255), None);
    for _ in 0..3 {
        let wait = bound_in(&h, &id);
        next_try(&mut h, &id, wait);
        h.feed(Input::Reconnected {
            run_id: id.clone(),
            outcome: Err("exited 255".into()),
        });
    }
    let wait = bound_in(&h, &id);
    assert_eq!(wait, 8_000);
    next_try(&mut h, &id, wait);
    h.feed(Input::Reconnected {
        run_id: id.clone(),
        outcome: Ok(()),
    });
    // A follow-up wakes it; its CLI drops before it is ready.
    let out = h.request(Request::FollowUp {
        run_id: id.clone(),
        text: "go on".into(),
    });
    assert_eq!(out.launches.len(), 1);
    ssh_exits(&mut h, &id, Some(255), None);
    assert_eq!(h.live(&id).0, LiveStateKind::WaitingHost);
    assert_eq!(bound_in(&h, &id), 16_000, "the fifth try, not the first");
    // Once a CLI got ready, a later drop counts from the start.
    let wait = bound_in(&h, &id);
    next_try(&mut h, &id, wait);
    h.feed(Input::Reconnected {
        run_id: id.clone(),
        outcome: Ok(()),
    });
    h.provider(&id, ProviderEvent::Ready { version: None });
    ssh_exits(&mut h, &id, Some(255), None);
    assert_eq!(bound_in(&h, &id), 1_000);
}
