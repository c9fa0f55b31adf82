//! The dispatcher in-process on the simulated agent: timeouts under paused time,
//! commit-then-publish, the live state rebuilt from the ledger, shutdown.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

use drover_core::config::Config;
use drover_core::dispatch::api::{DispatchEvent, RunView, WaitUntil};
use drover_core::dispatch::{self, DispatcherHandle, DispatcherOptions, Request};
use drover_core::ledger::{LedgerReader, kind};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_only_hear_what_the_ledger_already_holds() {
    let h = Harness::start("").await;
    let mut events = h.handle.subscribe();
    let run = h.dispatch("tool-permission").await;
    let reader = h.reader();
    let mut checked = 0;
    let mut answered = 0;
    while checked < 400 {
        let event = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .expect("events keep coming")
            .expect("no lag in this test");
        match &event {
            DispatchEvent::LiveState { run_id, live_state } => {
                let stored = reader.run(run_id).unwrap().unwrap().live_state.unwrap();
                assert!(
                    stored.seq >= live_state.seq,
                    "published live-state seq {} before the ledger held it ({})",
                    live_state.seq,
                    stored.seq
                );
            }
            DispatchEvent::RunChanged { run: summary } => {
                let stored = reader.run(&summary.head.run_id).unwrap().unwrap();
                let order = |s: RunState| RunState::ALL.iter().position(|x| *x == s);
                // The stored state is the published one or a later one, never an earlier.
                assert!(
                    stored.state == summary.head.state
                        || stored.state.is_terminal()
                        || order(stored.state) >= order(summary.head.state)
                        || summary.head.state == RunState::AwaitingPermission,
                    "published {} while the ledger says {}",
                    summary.head.state,
                    stored.state
                );
            }
            DispatchEvent::PermissionRequested { run_id, pending } => {
                answered += 1;
                h.request(Request::Respond {
                    run_id: run_id.clone(),
                    request_id: pending.request_id.clone(),
                    answer: PermissionAnswer::Allow { always: false },
                })
                .await;
            }
            _ => {}
        }
        checked += 1;
        if let DispatchEvent::RunChanged { run: s } = &event
            && s.head.state == RunState::Idle
        {
            break;
        }
    }
    assert_eq!(answered, 2, "both tool calls were asked for and answered");
    let view = h.show(&run).await;
    assert_eq!(view.head.state, RunState::Idle);
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
