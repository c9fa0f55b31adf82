//! The dispatcher in-process on the simulated agent: timeouts under paused time,
//! commit-then-publish, the live state rebuilt from the ledger, shutdown.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

use drover_core::config::Config;
use drover_core::dispatch::api::{DispatchEvent, RunView, WaitUntil};
use drover_core::dispatch::{self, DispatcherHandle, DispatcherOptions, Request};
use drover_core::ledger::{Gate, LedgerReader, kind};
use drover_core::live_state::{self, Cause, LiveStateEvent, LiveStateKind};
use drover_core::paths::Paths;
use drover_core::providers::PermissionAnswer;
use drover_core::run_state::RunState;
use drover_core::spec::SpecInput;
use serde_json::Value;
use std::time::Duration;
use tempfile::TempDir;

struct Harness {
    home: TempDir,
    paths: Paths,
    handle: DispatcherHandle,
    join: tokio::task::JoinHandle<()>,
}

impl Harness {
    async fn start(config: &str) -> Harness {
        Harness::start_gated(config, None).await
    }

    /// A dispatcher whose every ledger commit passes `gate` first (held or failed by the
    /// test).
    async fn start_gated(config: &str, gate: Option<Gate>) -> Harness {
        let home = tempfile::tempdir().unwrap();
        let paths = Paths::under(home.path());
        paths.ensure_dirs().unwrap();
        std::fs::write(&paths.config_file, config).unwrap();
        let config = Config::load(&paths.config_file).unwrap();
        let (handle, join) = dispatch::start(DispatcherOptions {
            paths: paths.clone(),
            config,
            self_exe: env!("CARGO_BIN_EXE_drover").into(),
            warden: false,
            ledger_gate: gate,
        })
        .await
        .unwrap();
        Harness {
            home,
            paths,
            handle,
            join,
        }
    }

    async fn request(&self, request: Request) -> Value {
        tokio::time::timeout(Duration::from_secs(60), self.handle.request(request))
            .await
            .expect("the dispatcher answers")
            .expect("the request is accepted")
            .to_json()
    }

    async fn dispatch(&self, scenario: &str) -> String {
        let spec = SpecInput {
            provider: Some("sim".into()),
            scenario: Some(scenario.into()),
            task: format!("run the {scenario} scenario"),
            cwd: Some(self.home.path().to_path_buf()),
            ..SpecInput::default()
        };
        let run = self
            .request(Request::Dispatch {
                spec: Box::new(spec),
            })
            .await;
        run["run_id"].as_str().unwrap().to_string()
    }

    /// Dispatches a sim run with `--model auto` (held behind a route card); returns the
    /// answer.
    async fn dispatch_auto(&self, scenario: &str, task: &str) -> Value {
        let spec = SpecInput {
            provider: Some("sim".into()),
            model: Some("auto".into()),
            scenario: Some(scenario.into()),
            task: task.into(),
            cwd: Some(self.home.path().to_path_buf()),
            ..SpecInput::default()
        };
        self.request(Request::Dispatch {
            spec: Box::new(spec),
        })
        .await
    }

    async fn show(&self, run_id: &str) -> RunView {
        serde_json::from_value(
            self.request(Request::Show {
                run_id: run_id.into(),
            })
            .await,
        )
        .unwrap()
    }

    async fn wait(&self, run_id: &str, until: WaitUntil) -> RunView {
        let outcome = self
            .request(Request::Wait {
                run_ids: vec![run_id.into()],
                workflow: None,
                until,
                any: false,
                timeout_secs: Some(30),
            })
            .await;
        assert_eq!(outcome["timed_out"], false, "{outcome}");
        self.show(run_id).await
    }

    fn reader(&self) -> LedgerReader {
        LedgerReader::open(&self.paths.ledger_file).unwrap()
    }

    async fn stop(self) {
        self.handle.shutdown().await;
        let _ = tokio::time::timeout(Duration::from_secs(30), self.join).await;
    }
}

fn live_events(reader: &LedgerReader, run_id: &str) -> Vec<LiveStateEvent> {
    reader
        .events(run_id, 0)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == kind::LIVE_STATE)
        .map(|e| serde_json::from_value(e.body).unwrap())
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn an_unanswered_permission_is_denied_when_its_time_is_up() {
    let h = Harness::start("").await;
    let run = h.dispatch("tool-permission").await;
    let view = h.wait(&run, WaitUntil::NeedsYou).await;
    assert_eq!(view.head.state, RunState::AwaitingPermission);
    let first = view.pending[0].clone();
    assert_eq!(first.tool, "Bash");
    assert_eq!(first.expires_at - first.created_at, 600_000);

    // Ten minutes pass with nobody answering.
    tokio::time::pause();
    tokio::time::advance(Duration::from_secs(601)).await;
    tokio::time::resume();

    // The Bash request was denied by the timeout; the run goes on to its Edit request.
    let mut view = h.show(&run).await;
    for _ in 0..200 {
        if view.pending.first().is_some_and(|p| p.tool == "Edit") {
            break;
        }
        h.request(Request::Wait {
            run_ids: vec![run.clone()],
            workflow: None,
            until: WaitUntil::Event,
            any: false,
            timeout_secs: Some(5),
        })
        .await;
        view = h.show(&run).await;
    }
    assert_eq!(view.pending[0].tool, "Edit", "{view:?}");
    let decisions = h.reader().decisions(&run).unwrap();
    assert_eq!(
        decisions[0].request_id.as_deref(),
        Some(first.request_id.as_str())
    );
    assert_eq!(decisions[0].who, "timeout");
    assert!(
        decisions[0].decision.starts_with("deny"),
        "{:?}",
        decisions[0]
    );
    h.stop().await;
}

/// Polls `ready` every millisecond until it holds; panics naming `what` after 30 s.
async fn until(what: &str, mut ready: impl FnMut() -> bool) {
    for _ in 0..30_000 {
        if ready() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("{what}: not within 30 s");
}

/// Whether what `event` says is in the ledger already: a live state at its seq, a run's
/// state as a row or a recorded move, a pending request as an event.
fn in_ledger(reader: &LedgerReader, event: &DispatchEvent) -> Result<(), String> {
    match event {
        DispatchEvent::LiveState { run_id, live_state } => {
            let stored = reader
                .run(run_id)
                .unwrap()
                .and_then(|r| r.live_state)
                .map_or(0, |l| l.seq);
            if stored < live_state.seq {
                return Err(format!(
                    "live state at seq {} published; the ledger holds seq {stored}",
                    live_state.seq
                ));
            }
        }
        DispatchEvent::RunChanged { run } => {
            let id = &run.head.run_id;
            let Some(row) = reader.run(id).unwrap() else {
                return Err(format!("run {id} published before its row was committed"));
            };
            let state = run.head.state.as_str();
            let moved = reader
                .events_of_kind(id, kind::RUN_STATE)
                .unwrap()
                .iter()
                .any(|e| e.body["to"] == state);
            if row.state != run.head.state && !moved {
                return Err(format!(
                    "run {id} published as {state}; the ledger has it {} and never {state}",
                    row.state
                ));
            }
        }
        DispatchEvent::PermissionRequested { run_id, pending } => {
            let asked = reader
                .events(run_id, 0)
                .unwrap()
                .iter()
                .any(|e| e.body.to_string().contains(&pending.request_id));
            if !asked {
                return Err(format!(
                    "request {} of {run_id} published before the ledger held it",
                    pending.request_id
                ));
            }
        }
        _ => {}
    }
    Ok(())
}

/// Opens the gate when dropped, so that a failing test does not leave the ledger's writer
/// held (and the dispatcher's end waiting for it).
struct OpenOnDrop(Gate);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.heal();
        self.0.release();
        self.0.release_syncs();
    }
}

/// What a subscriber heard, each event checked against the ledger as it is heard.
#[derive(Default)]
struct Heard {
    states: Vec<RunState>,
    count: usize,
    answered: usize,
    idle: bool,
}

impl Heard {
    /// Takes every event waiting: each must be in the ledger already; a permission
    /// request is answered (the answer, which waits for its own commit, not awaited).
    fn drain(
        &mut self,
        events: &mut tokio::sync::broadcast::Receiver<drover_core::dispatch::Published>,
        reader: &LedgerReader,
        handle: &DispatcherHandle,
    ) {
        loop {
            let event = match events.try_recv() {
                Ok(event) => event,
                Err(tokio::sync::broadcast::error::TryRecvError::Empty) => return,
                Err(e) => panic!("the subscription broke: {e}"),
            };
            self.count += 1;
            if let Err(e) = in_ledger(reader, &event) {
                panic!("published before its batch was committed: {e}");
            }
            match &*event {
                DispatchEvent::RunChanged { run } => {
                    if self.states.last() != Some(&run.head.state) {
                        self.states.push(run.head.state);
                    }
                    self.idle |= run.head.state == RunState::Idle;
                }
                DispatchEvent::PermissionRequested { run_id, pending } => {
                    self.answered += 1;
                    let handle = handle.clone();
                    let (run_id, request_id) = (run_id.clone(), pending.request_id.clone());
                    tokio::spawn(async move {
                        handle
                            .request(Request::Respond {
                                run_id,
                                request_id,
                                answer: PermissionAnswer::Allow { always: false },
                            })
                            .await
                    });
                }
                _ => {}
            }
        }
    }
}

/// Commit-then-publish, race-free: every commit is held at the ledger's gate, and while a
/// batch waits there, everything any subscriber has heard is in the ledger already —
/// every state of the run, `awaiting_permission` included, each live state and each
/// permission request. Released, the held events arrive, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_only_hear_what_the_ledger_already_holds() {
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    let h = Harness::start_gated("", Some(gate.clone())).await;
    let mut events = h.handle.subscribe();
    let reader = h.reader();
    gate.hold();
    let spec = SpecInput {
        provider: Some("sim".into()),
        scenario: Some("tool-permission".into()),
        task: "run the tool-permission scenario".into(),
        cwd: Some(h.home.path().to_path_buf()),
        ..SpecInput::default()
    };
    let handle = h.handle.clone();
    let dispatched = tokio::spawn(async move {
        handle
            .request(Request::Dispatch {
                spec: Box::new(spec),
            })
            .await
    });
    let mut heard = Heard::default();
    // Bounded: each step lets at least one batch through; the scenario takes a few dozen.
    for _ in 0..2_000 {
        // Until a batch waits at the gate, hearing (and checking) what comes meanwhile.
        let mut polls = 0;
        while !heard.idle && !gate.waiting() {
            heard.drain(&mut events, &reader, &h.handle);
            polls += 1;
            assert!(polls < 30_000, "no batch came to the gate within 30 s");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // A publisher that did not wait for the commit would have published it by now.
        tokio::time::sleep(Duration::from_millis(5)).await;
        heard.drain(&mut events, &reader, &h.handle);
        if heard.idle {
            break;
        }
        let passed = gate.passed();
        gate.release();
        until("the batch is committed", || gate.passed() > passed).await;
        gate.hold();
    }
    let Heard {
        states,
        count: heard,
        answered,
        idle,
    } = heard;
    gate.release();
    assert!(idle, "the run reached idle; states heard: {states:?}");
    assert!(heard > 10, "only {heard} events heard");
    assert_eq!(answered, 2, "both tool calls were asked for and answered");
    assert!(
        states.contains(&RunState::AwaitingPermission) && states.contains(&RunState::Running),
        "{states:?}"
    );
    let run = dispatched.await.unwrap().unwrap().to_json();
    let view = h.show(run["run_id"].as_str().unwrap()).await;
    assert_eq!(view.head.state, RunState::Idle);
    h.stop().await;
}

/// Shown at the commit, acknowledged at the sync: with every sync of the WAL held at the
/// ledger's gate, a subscriber hears the dispatched run — each event in the ledger already —
/// while the dispatch's reply does not come; once the syncs go on, it does
/// (docs/ARCHITECTURE.md §"Commit, then publish").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_heard_at_their_commit_and_replies_wait_for_its_sync() {
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    let h = Harness::start_gated("", Some(gate.clone())).await;
    let mut events = h.handle.subscribe();
    let reader = h.reader();
    gate.hold_syncs();
    let spec = SpecInput {
        provider: Some("sim".into()),
        scenario: Some("quick-success".into()),
        task: "run the quick-success scenario".into(),
        cwd: Some(h.home.path().to_path_buf()),
        ..SpecInput::default()
    };
    let handle = h.handle.clone();
    let mut dispatched = tokio::spawn(async move {
        handle
            .request(Request::Dispatch {
                spec: Box::new(spec),
            })
            .await
    });
    let run_id = loop {
        let event = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .expect("the run is heard while its commit's sync is held")
            .unwrap();
        in_ledger(&reader, &event).unwrap_or_else(|e| panic!("heard before its commit: {e}"));
        if let DispatchEvent::RunChanged { run } = &*event {
            break run.head.run_id.clone();
        }
    };
    assert!(
        tokio::time::timeout(Duration::from_millis(200), &mut dispatched)
            .await
            .is_err(),
        "the reply came before its commit was synced"
    );
    until("the sync waits at the gate", || gate.sync_waiting()).await;
    gate.release_syncs();
    let reply = tokio::time::timeout(Duration::from_secs(30), dispatched)
        .await
        .expect("the reply comes once the sync goes on")
        .unwrap()
        .expect("the dispatch is accepted")
        .to_json();
    assert_eq!(reply["run_id"].as_str(), Some(run_id.as_str()));
    h.stop().await;
}

/// A ledger whose commits fail (a full disk) changes nothing and loses nothing: the
/// failing batch is kept and committed again, in order, once the disk writes; meanwhile
/// nothing of it is published, every subscriber hears why, new work is refused with
/// `LEDGER_UNAVAILABLE` and reads answer at once; afterwards the run goes on, its events
/// have no gap, and work is taken again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_ledger_publishes_nothing_refuses_new_work_and_resumes_without_a_gap() {
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    let h = Harness::start_gated("", Some(gate.clone())).await;
    let mut events = h.handle.subscribe();
    let run = h.dispatch("tool-permission").await;
    // Wait for the run's first permission request, then fail every commit.
    let pending = loop {
        let event = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .unwrap()
            .map(std::sync::Arc::unwrap_or_clone)
            .unwrap();
        if let DispatchEvent::PermissionRequested { pending, .. } = event {
            break pending;
        }
    };
    // The run waits for its answer: nothing else is on the way to a subscriber.
    let _ = h.wait(&run, WaitUntil::NeedsYou).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    while events.try_recv().is_ok() {}
    let seq_before = h.reader().events(&run, 0).unwrap().len();
    // The answer is taken (the ledger has not failed yet) and its writes are held, then
    // fail: it is carried out, and acknowledged only once recorded.
    gate.hold();
    let handle = h.handle.clone();
    let (run_id, request_id) = (run.clone(), pending.request_id.clone());
    let answered = tokio::spawn(async move {
        handle
            .request(Request::Respond {
                run_id,
                request_id,
                answer: PermissionAnswer::Allow { always: false },
            })
            .await
    });
    until("the answer's batch waits at the gate", || gate.waiting()).await;
    gate.fail("database or disk is full");
    gate.release();
    // Everyone hears why, at once.
    let why = loop {
        let event = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .unwrap()
            .map(std::sync::Arc::unwrap_or_clone)
            .unwrap();
        match event {
            DispatchEvent::Health {
                ledger_unavailable: Some(why),
                ..
            } => break why,
            DispatchEvent::Health { .. } => {}
            other => panic!("published while the ledger could not write: {other:?}"),
        }
    };
    assert!(why.contains("disk is full"), "{why}");
    // New work: refused, with nothing changed.
    let refused = h
        .handle
        .request(Request::Dispatch {
            spec: Box::new(SpecInput {
                provider: Some("sim".into()),
                task: "more work".into(),
                cwd: Some(h.home.path().to_path_buf()),
                ..SpecInput::default()
            }),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code, drover_core::ErrorCode::LedgerUnavailable);
    assert!(refused.message.contains("Nothing was changed"), "{refused}");
    // Reads and ping answer at once, saying why.
    let pong = h.request(Request::Ping).await;
    assert!(
        pong["ledger_unavailable"]
            .as_str()
            .is_some_and(|w| w.contains("disk is full")),
        "{pong}"
    );
    let shown = h.show(&run).await;
    assert_eq!(shown.head.run_id, run);
    // Nothing of the failing batches reached the ledger or a subscriber.
    until("the failing batch is tried again", || gate.passed() > 3).await;
    assert_eq!(h.reader().events(&run, 0).unwrap().len(), seq_before);
    assert!(
        !answered.is_finished(),
        "the answer was acknowledged before it was recorded"
    );
    while let Ok(event) = events.try_recv() {
        assert!(
            matches!(*event, DispatchEvent::Health { .. }),
            "published while the ledger could not write: {event:?}"
        );
    }
    // The disk writes again: everything goes on by itself.
    gate.heal();
    answered
        .await
        .unwrap()
        .expect("the answer is acknowledged once recorded");
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .unwrap()
            .map(std::sync::Arc::unwrap_or_clone)
            .unwrap();
        if let DispatchEvent::Health {
            ledger_unavailable: None,
            ..
        } = event
        {
            break;
        }
    }
    // The run's second request, answered now that work is taken again.
    let second = loop {
        let event = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .unwrap()
            .map(std::sync::Arc::unwrap_or_clone)
            .unwrap();
        if let DispatchEvent::PermissionRequested { pending: p, .. } = event
            && p.request_id != pending.request_id
        {
            break p;
        }
    };
    h.request(Request::Respond {
        run_id: run.clone(),
        request_id: second.request_id,
        answer: PermissionAnswer::Allow { always: false },
    })
    .await;
    let view = h.wait(&run, WaitUntil::Idle).await;
    assert_eq!(view.head.state, RunState::Idle);
    let seqs: Vec<u64> = h
        .reader()
        .events(&run, 0)
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    let contiguous: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, contiguous, "the run's events have no gap");
    assert_eq!(h.reader().decisions(&run).unwrap().len(), 2);
    h.dispatch("quick-success").await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_state_folds_back_from_the_ledger() {
    let h = Harness::start("").await;
    let run = h.dispatch("quick-success").await;
    h.wait(&run, WaitUntil::Idle).await;
    h.request(Request::Complete {
        run_id: run.clone(),
    })
    .await;
    let view = h.wait(&run, WaitUntil::Terminal).await;
    assert_eq!(view.head.state, RunState::Completed);
    assert_eq!(view.head.completion_reason.as_deref(), Some("complete"));
    let live = view.head.live_state.clone().unwrap();
    assert_eq!(live.state, LiveStateKind::Ended);
    assert_eq!(live.cause, Some(Cause::Completed));

    let reader = h.reader();
    let events = live_events(&reader, &run);
    let folded = live_state::fold(&events);
    assert_eq!(folded.skipped, 0);
    assert_eq!(folded.state.as_ref(), Some(&live));
    let states: Vec<LiveStateKind> = events.iter().map(|e| e.assignment.state).collect();
    assert_eq!(states.first(), Some(&LiveStateKind::Admitted));
    assert!(states.contains(&LiveStateKind::Preparing));
    assert!(states.contains(&LiveStateKind::Working));
    assert_eq!(
        states[states.len() - 2..],
        [LiveStateKind::WrappingUp, LiveStateKind::Ended]
    );
    let all = reader.events(&run, 0).unwrap();
    assert!(all.iter().enumerate().all(|(i, e)| e.seq == i as u64 + 1));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_interrupts_a_run_in_a_turn_and_records_why() {
    let h = Harness::start("").await;
    let run = h.dispatch("hang").await;
    // The hang scenario starts its turn, says one thing, then goes silent.
    let mut view = h.show(&run).await;
    for _ in 0..100 {
        if !view.turns.is_empty() {
            break;
        }
        h.request(Request::Wait {
            run_ids: vec![run.clone()],
            workflow: None,
            until: WaitUntil::Event,
            any: false,
            timeout_secs: Some(1),
        })
        .await;
        view = h.show(&run).await;
    }
    assert_eq!(view.head.state, RunState::Running);
    h.handle.shutdown().await;
    let reader = h.reader();
    let record = reader.run(&run).unwrap().unwrap();
    assert_eq!(record.state, RunState::Interrupted);
    assert_eq!(record.completion_reason, None, "interrupted is not an end");
    let live = record.live_state.unwrap();
    assert_eq!(live.state, LiveStateKind::Ended);
    assert_eq!(live.cause, Some(Cause::ResidentReplaced));
    assert_eq!(
        live.detail.as_deref(),
        Some(drover_core::dispatch::core::INTERRUPTED_DETAIL)
    );
    let moved = reader
        .events(&run, 0)
        .unwrap()
        .into_iter()
        .rev()
        .find(|e| e.kind == "run_state")
        .expect("its move to interrupted");
    assert_eq!(moved.body["reason"], "shutdown");
    assert_eq!(moved.body["turn_cut"], true);
    drop(reader);
    h.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn an_unanswered_route_card_expires_and_stops_its_run() {
    let h = Harness::start("").await;
    let held = h.dispatch_auto("quick-success", "Fix the login bug").await;
    assert_eq!(held["state"], "awaiting_route", "{held}");
    let run = held["run_id"].as_str().unwrap().to_string();

    // Thirty minutes pass with nobody picking.
    tokio::time::pause();
    tokio::time::advance(Duration::from_secs(1_801)).await;
    tokio::time::resume();

    let view = h.wait(&run, WaitUntil::Terminal).await;
    assert_eq!(view.head.state, RunState::Stopped);
    assert_eq!(
        view.head.completion_reason.as_deref(),
        Some("route_expired")
    );
    let card = view.route.expect("the card is kept");
    assert_eq!(card.status, "expired");
    assert_eq!(card.decided_by.as_deref(), Some("timeout"));
    let decisions = h.reader().decisions(&run).unwrap();
    assert!(
        decisions
            .iter()
            .any(|d| d.kind == "route" && d.decision == "expired")
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn picking_a_route_option_starts_the_run_on_that_model() {
    let h = Harness::start("").await;
    let held = h.dispatch_auto("hang", "Look into the flaky test").await;
    let run = held["run_id"].as_str().unwrap().to_string();
    let view = h.show(&run).await;
    let second = view.route.expect("a card").options[1].clone();
    let picked = h
        .request(Request::Route {
            run_id: run.clone(),
            option: 2,
            remember: false,
        })
        .await;
    assert_eq!(picked["model"], second.model.as_str(), "{picked}");
    let view = h.show(&run).await;
    assert_ne!(view.head.state, RunState::AwaitingRoute);
    h.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_model_turn_silent_past_the_providers_timeout_fails_as_a_transient_timeout() {
    let h = Harness::start("[providers.sim]\nsilence_timeout_secs = 30\n").await;
    let run = h.dispatch("hang").await;
    // The sim says one thing, then nothing more.
    let mut view = h.show(&run).await;
    for _ in 0..200 {
        if view.turns.first().is_some_and(|t| t.text.is_some()) {
            break;
        }
        h.request(Request::Wait {
            run_ids: vec![run.clone()],
            workflow: None,
            until: WaitUntil::Event,
            any: false,
            timeout_secs: Some(5),
        })
        .await;
        view = h.show(&run).await;
    }
    assert_eq!(view.head.state, RunState::Running, "{view:?}");

    // Twenty seconds of silence are allowed; thirty are not.
    tokio::time::pause();
    tokio::time::advance(Duration::from_secs(20)).await;
    tokio::time::resume();
    assert_eq!(h.show(&run).await.head.state, RunState::Running);
    tokio::time::pause();
    tokio::time::advance(Duration::from_secs(11)).await;
    tokio::time::resume();

    let view = h.wait(&run, WaitUntil::Terminal).await;
    assert_eq!(view.head.state, RunState::Failed, "{view:?}");
    assert_eq!(view.head.completion_reason.as_deref(), Some("timeout"));
    assert!(
        view.notes
            .iter()
            .any(|n| n.text.starts_with("no word from sim for ")),
        "{:?}",
        view.notes
    );
    let offer = view.escalation.expect("a retry is offered");
    assert_eq!(
        offer.kind,
        drover_core::route::EscalationKind::Retry,
        "{offer:?}"
    );
    h.stop().await;
}

/// `wait` on a workflow of 300 runs: more than the 256 ids a client may list, yet the
/// wait names none of them (the owner looks the workflow's runs up), and every run is in
/// the answer. An unknown workflow is `WORKFLOW_NOT_FOUND`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_on_a_workflow_covers_every_run_however_many() {
    const RUNS: usize = 300;
    // Room for every run in the queue and the money; the rails stay as they ship.
    let h = Harness::start(
        "[limits]\nqueued_per_session = 300\nsession_hard_cap_usd = 1000.0\n\
         session_warning_usd = 900.0\nper_workflow = 8\n",
    )
    .await;
    // One turn with no delay: each run ends (max_turns 1) as soon as its CLI answers.
    let scenario = h.home.path().join("instant.toml");
    std::fs::write(
        &scenario,
        "description = \"one instant turn\"\nmodel = \"claude-sonnet-4-5\"\n\
         [[turns]]\nstatus = \"done\"\nsummary = \"done at once\"\n\
         [[turns.steps]]\ntext = \"done\"\n",
    )
    .unwrap();
    let mut dispatched = Vec::with_capacity(RUNS);
    for i in 0..RUNS {
        let spec = SpecInput {
            provider: Some("sim".into()),
            scenario: Some(scenario.display().to_string()),
            task: format!("instant run {i}"),
            cwd: Some(h.home.path().to_path_buf()),
            max_turns: Some(1),
            budget_usd: Some(0.1),
            workflow_id: Some("wf-big".into()),
            ..SpecInput::default()
        };
        let run = h
            .request(Request::Dispatch {
                spec: Box::new(spec),
            })
            .await;
        dispatched.push(run["run_id"].as_str().unwrap().to_string());
    }
    let wait = Request::Wait {
        run_ids: vec![],
        workflow: Some("wf-big".into()),
        until: WaitUntil::Terminal,
        any: false,
        timeout_secs: Some(600),
    };
    // The request as it goes on the wire names no run.
    let line = serde_json::to_value(&wait).unwrap();
    assert_eq!(line["params"]["run_ids"], serde_json::json!([]), "{line}");
    let outcome = tokio::time::timeout(Duration::from_secs(700), h.handle.request(wait))
        .await
        .expect("the dispatcher answers")
        .expect("a workflow wait of any size is accepted")
        .to_json();
    assert_eq!(outcome["timed_out"], false);
    let runs = outcome["runs"].as_array().unwrap();
    let mut waited: Vec<String> = runs
        .iter()
        .map(|r| r["run_id"].as_str().unwrap().to_string())
        .collect();
    waited.sort();
    dispatched.sort();
    assert_eq!(waited, dispatched);
    assert!(runs.iter().all(|r| r["state"] == "completed"), "{outcome}");

    let unknown = h
        .handle
        .request(Request::Wait {
            run_ids: vec![],
            workflow: Some("wf-none".into()),
            until: WaitUntil::Terminal,
            any: false,
            timeout_secs: Some(5),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code.as_str(), "WORKFLOW_NOT_FOUND", "{unknown}");
    assert!(unknown.message.contains("wf-none"), "{unknown}");
    h.stop().await;
}
