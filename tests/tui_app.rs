//! The dashboard driven through key events against a real owner on the simulated agent
//! (`drover sim-agent`, the real Claude adapter, the real ledger, the real control
//! socket), with no terminal: the test plays the event loop — app events go into
//! `App::handle`; its requests reach the owner through the `RequestRunner`, and the owner's
//! events through the link's event pump, both over the socket, as the dashboard's do.
//!
//! Every wait is bounded and event-driven: the loop runs until a condition holds or
//! `STEP_TIMEOUT` passes (then the test fails saying what it waited for).
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod tui_common;

use crossterm::event::KeyCode;
use drover_core::config::Config;
use drover_core::control::Host;
use drover_core::dispatch::api::TranscriptView;
use drover_core::dispatch::api::{RunSummary, RunView, TranscriptFormat, WaitOutcome, WaitUntil};
use drover_core::dispatch::{DispatcherHandle, DispatcherOptions, Request};
use drover_core::paths::Paths;
use drover_core::providers::PermissionAnswer;
use drover_core::run_state::RunState;
use drover_core::spec::SpecInput;
use drover_tui::views::View;
use drover_tui::views::confirm::ConfirmView;
use drover_tui::views::form::DispatchForm;
use drover_tui::views::input::InputBox;
use drover_tui::views::prompt::{PromptState, PromptView};
use drover_tui::views::route::RouteView;
use drover_tui::{App, AppEvent, Effect, Link, RequestRunner, ViewModel};
use serde::de::DeserializeOwned;
use std::time::Duration;
use tokio::sync::mpsc;
use tui_common::{char_key, key, options};

/// Keys pressed since the last call (for the key counts the issue sets as targets).
fn counted(h: &mut Harness, events: Vec<AppEvent>) -> usize {
    let n = events.len();
    h.press(events);
    n
}

const STEP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the user looks at the screen before a key that answers a request (longer
/// than the default answer guard, `[dashboard] answer_guard_ms`).
const READ_MS: i64 = 1_000;

struct Harness {
    app: App,
    handle: DispatcherHandle,
    host: Option<Host>,
    pump: tokio::task::JoinHandle<()>,
    requests: RequestRunner,
    rx: mpsc::UnboundedReceiver<AppEvent>,
    notifications: Vec<String>,
    quit: bool,
    paths: Paths,
    home: tempfile::TempDir,
    /// How far the dashboard's clock is ahead of the wall clock (the user's reading time).
    skew: i64,
    /// A stopped clock, when the test sets the time of each key itself.
    frozen: Option<i64>,
}

impl Harness {
    async fn start() -> Harness {
        Harness::start_in(tempfile::tempdir().expect("temp dir")).await
    }

    /// A dashboard and dispatcher on an existing data directory (a restart).
    async fn start_in(home: tempfile::TempDir) -> Harness {
        let paths = Paths::under(home.path());
        paths.ensure_dirs().expect("dirs");
        let config = Config::load(&paths.config_file).expect("default config");
        let host = Host::start(DispatcherOptions {
            paths: paths.clone(),
            config,
            self_exe: env!("CARGO_BIN_EXE_drover").into(),
            warden: true,
            ledger_gate: None,
        })
        .await
        .expect("the owner starts");
        let handle = host.handle().clone();
        let (sender, rx) = drover_tui::runner::channel();
        let link = Link::new(paths.clone());
        let pump = link.spawn_events(sender.clone(), tokio::sync::watch::channel(true).1);
        let requests = RequestRunner::new(link, sender);
        let mut opts = options();
        opts.cwd = home.path().to_path_buf();
        // This process is the owner, as with `[dashboard] owner = "in-process"`.
        opts.owner = drover_core::config::DashboardOwner::InProcess;
        let app = App::new(
            opts,
            ViewModel::new(drover_core::clock::now_millis(), 120, 40),
        );
        let mut h = Harness {
            app,
            handle,
            host: Some(host),
            pump,
            requests,
            rx,
            notifications: Vec::new(),
            quit: false,
            paths,
            home,
            skew: 0,
            frozen: None,
        };
        let effects = h.app.start();
        h.carry_out(effects);
        h
    }

    fn carry_out(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            match self.requests.execute(effect) {
                Some(Effect::Notify(text)) => self.notifications.push(text),
                Some(Effect::Quit) => self.quit = true,
                _ => {}
            }
        }
    }

    /// Handles one event and draws a frame, as the event loop does (the attention line
    /// records what it drew, and its keys act on that).
    fn handle_event(&mut self, event: AppEvent) {
        self.app.model.now = self.now();
        let effects = self.app.handle(event);
        self.carry_out(effects);
        tui_common::render_app(&self.app);
    }

    /// The dashboard's clock.
    fn now(&self) -> i64 {
        self.frozen
            .unwrap_or_else(|| drover_core::clock::now_millis() + self.skew)
    }

    /// The user reads what is on screen before the next key: time passes.
    fn read(&mut self) {
        self.pass(READ_MS);
    }

    /// `ms` pass on the dashboard's clock.
    fn pass(&mut self, ms: i64) {
        match &mut self.frozen {
            Some(at) => *at += ms,
            None => self.skew += ms,
        }
    }

    /// Stops the dashboard's clock: from now on only `pass` moves it.
    fn freeze(&mut self) {
        self.frozen = Some(self.now());
    }

    /// Presses keys (each handled like the event loop does).
    fn press(&mut self, events: impl IntoIterator<Item = AppEvent>) {
        for event in events {
            self.handle_event(event);
        }
    }

    fn type_text(&mut self, text: &str) {
        self.press(text.chars().map(char_key).collect::<Vec<_>>());
    }

    /// Runs the event loop until `done` holds.
    async fn pump_until(&mut self, what: &str, done: impl Fn(&App) -> bool) {
        self.pump_until_harness(what, |h| done(&h.app)).await;
    }

    /// Like `pump_until`, for conditions on the harness (the notifications it saw).
    async fn pump_until_harness(&mut self, what: &str, done: impl Fn(&Harness) -> bool) {
        let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
        while !done(self) {
            let event = tokio::select! {
                Some(event) = self.rx.recv() => event,
                () = tokio::time::sleep_until(deadline) => panic!("timed out waiting for {what}"),
            };
            self.handle_event(event);
        }
    }

    async fn ask<T: DeserializeOwned>(&self, request: Request) -> T {
        let value = self
            .handle
            .request(request)
            .await
            .expect("request answered");
        serde_json::from_value(value.to_json()).expect("answer shape")
    }

    /// Dispatches a `sim` run of `scenario` in a work directory of its own (runs that can
    /// write into one shared directory take turns there).
    async fn dispatch(&self, scenario: &str, task: &str) -> String {
        let work = tempfile::tempdir_in(self.home.path()).expect("a work dir");
        let run: RunSummary = self
            .ask(Request::Dispatch {
                spec: Box::new(SpecInput {
                    provider: Some("sim".into()),
                    scenario: Some(scenario.into()),
                    task: task.into(),
                    cwd: Some(work.keep()),
                    ..SpecInput::default()
                }),
            })
            .await;
        run.head.run_id
    }

    async fn show(&self, run_id: &str) -> RunView {
        self.ask(Request::Show {
            run_id: run_id.into(),
        })
        .await
    }

    async fn wait(&self, run_id: &str, until: WaitUntil) -> RunSummary {
        let outcome: WaitOutcome = self
            .ask(Request::Wait {
                run_ids: vec![run_id.into()],
                workflow: None,
                until,
                any: false,
                timeout_secs: Some(STEP_TIMEOUT.as_secs()),
            })
            .await;
        assert!(!outcome.timed_out, "run {run_id} did not reach {until:?}");
        outcome.runs.into_iter().next().expect("the run")
    }

    async fn events_of(&self, run_id: &str) -> Vec<drover_core::ledger::EventRecord> {
        let view: TranscriptView = self
            .ask(Request::Transcript {
                run_id: run_id.into(),
                format: TranscriptFormat::Events,
            })
            .await;
        view.events
    }

    /// Shuts the dispatcher down (what the dashboard does on quit); returns the data
    /// directory so the ledger can still be read.
    async fn shutdown(mut self) -> tempfile::TempDir {
        self.pump.abort();
        if let Some(host) = self.host.take() {
            host.shutdown().await;
        }
        self.home
    }
}

/// The top view, when it is a `T`.
fn top<T: View>(app: &App) -> Option<&T> {
    app.views.top_as::<T>()
}

fn prompt_request(app: &App) -> Option<(String, String)> {
    top::<PromptView>(app).map(|p| (p.run_id.clone(), p.request.request_id.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispatch_from_the_form_with_an_inline_refusal_first() {
    let mut h = Harness::start().await;
    h.pump_until("the first list of runs", |app| app.model.budget.is_some())
        .await;

    // An empty task: the dispatcher refuses, the form says why and stays open.
    h.press([char_key('n'), key(KeyCode::Enter)]);
    h.pump_until("the refusal in the form", |app| {
        top::<DispatchForm>(app).is_some_and(|f| f.error.is_some())
    })
    .await;
    let Some(form) = top::<DispatchForm>(&h.app) else {
        panic!("the form is open")
    };
    assert_eq!(form.error.as_ref().unwrap().code, "TASK_REQUIRED");
    let runs: Vec<RunSummary> = h
        .ask(Request::Runs {
            state: None,
            include_removed: true,
            workflow: None,
            limit: None,
            before: None,
            search: None,
        })
        .await;
    assert!(runs.is_empty(), "nothing is created for a refused dispatch");

    // Type a task and send it: the sim's quick-success scenario (the form's default).
    h.type_text("Say hello from the form");
    h.press([key(KeyCode::Enter)]);
    h.pump_until("the form to close on the dispatch", |app| {
        app.views.is_empty() && app.model.run_count() == 1
    })
    .await;
    let run_id = h
        .app
        .model
        .selected()
        .expect("the new run is selected")
        .to_string();
    let run = h.wait(&run_id, WaitUntil::Idle).await;
    assert_eq!(run.head.state, RunState::Idle);
    assert_eq!(run.head.provider, "sim");
    assert_eq!(run.head.title, "Say hello from the form");
    let view = h.show(&run_id).await;
    assert_eq!(view.cwd, h.home.path().display().to_string());
    assert_eq!(view.policy, "ask");
    assert_eq!(
        view.last_result.and_then(|r| r.status).as_deref(),
        Some("done")
    );
    let _ = h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_is_answered_with_one_key_and_the_prompt_moves_on() {
    let mut h = Harness::start().await;
    let run_id = h
        .dispatch("tool-permission", "List the files, then edit main.rs")
        .await;
    h.pump_until("a pending request", |app| {
        app.model.oldest_pending(None).is_some()
    })
    .await;
    // The request may be seen through a refresh before its event: the notification
    // comes with the event.
    h.pump_until_harness("the notification", |h| {
        h.notifications
            .iter()
            .any(|n| n.contains("asks to use Bash"))
    })
    .await;
    assert!(
        h.notifications
            .iter()
            .any(|n| n.contains("asks to use Bash")),
        "a notification: {:?}",
        h.notifications
    );

    h.press([char_key('p')]);
    let (shown_run, first) = prompt_request(&h.app).expect("the prompt opens");
    assert_eq!(shown_run, run_id);
    // One key answers the request on screen. Nothing else is pending yet, so the prompt
    // closes; the run's next request (the Edit) is the next one `p` shows.
    h.read();
    h.press([char_key('y')]);
    h.pump_until("the answer taken and the Edit requested", |app| {
        app.views.is_empty()
            && app
                .model
                .oldest_pending(None)
                .is_some_and(|(_, p)| p.request_id != first)
    })
    .await;
    h.press([char_key('p')]);
    let (_, second) = prompt_request(&h.app).expect("the next request on screen");
    let Some(p) = top::<PromptView>(&h.app) else {
        unreachable!()
    };
    assert_eq!(p.request.tool, "Edit");

    // Allow the Edit "always"; with nothing left the prompt closes.
    h.read();
    h.press([char_key('A')]);
    h.pump_until("the prompt to close", |app| app.views.is_empty())
        .await;
    let run = h.wait(&run_id, WaitUntil::Idle).await;
    assert_eq!(run.head.state, RunState::Idle);
    assert_eq!(run.pending, 0);

    let events = h.events_of(&run_id).await;
    let decision = |id: &str| {
        events
            .iter()
            .filter(|e| e.kind == "permission_resolved" && e.body["request_id"] == id)
            .map(|e| e.body["decision"].as_str().unwrap_or("").to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        decision(&first),
        ["allow"],
        "the answer landed on the request shown"
    );
    assert_eq!(decision(&second), ["allow always"]);
    let view = h.show(&run_id).await;
    assert_eq!(
        view.last_result.and_then(|r| r.status).as_deref(),
        Some("done")
    );
    let _ = h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_is_answered_by_the_number_of_its_choice() {
    let mut h = Harness::start().await;
    let run_id = h.dispatch("question", "Set up the cache").await;
    h.pump_until("the question", |app| {
        app.model.oldest_pending(None).is_some()
    })
    .await;
    h.press([char_key('p')]);
    h.read();
    h.press([char_key('2')]);
    h.pump_until("the prompt to close", |app| app.views.is_empty())
        .await;
    h.wait(&run_id, WaitUntil::Idle).await;
    let view = h.show(&run_id).await;
    let summary = view.last_result.and_then(|r| r.summary).unwrap_or_default();
    assert!(summary.contains("Postgres"), "{summary}");
    let _ = h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_answered_elsewhere_is_shown_as_gone_and_nothing_is_sent() {
    let mut h = Harness::start().await;
    let run_id = h.dispatch("tool-permission", "List the files").await;
    h.pump_until("a pending request", |app| {
        app.model.oldest_pending(None).is_some()
    })
    .await;
    h.press([char_key('p')]);
    let (_, request_id) = prompt_request(&h.app).expect("the prompt opens");

    // Another terminal answers it first.
    let _: serde_json::Value = h
        .ask(Request::Respond {
            run_id: run_id.clone(),
            request_id: request_id.clone(),
            answer: PermissionAnswer::Deny {
                message: Some("answered from another terminal".into()),
            },
        })
        .await;
    h.pump_until("the prompt to say the request is gone", |app| {
        top::<PromptView>(app).is_some_and(|p| {
            p.request.request_id == request_id && matches!(p.state, PromptState::Gone(_))
        })
    })
    .await;
    // The key that would have allowed it sends nothing.
    let effects = h.app.handle(char_key('y'));
    assert!(effects.is_empty(), "{effects:?}");

    let events = h.events_of(&run_id).await;
    let resolved: Vec<_> = events
        .iter()
        .filter(|e| e.kind == "permission_resolved" && e.body["request_id"] == request_id.as_str())
        .collect();
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert!(
        resolved[0].body["decision"]
            .as_str()
            .unwrap_or("")
            .starts_with("deny"),
        "{resolved:?}"
    );
    let _ = h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_answers_a_run_that_needs_input() {
    let mut h = Harness::start().await;
    let run_id = h.dispatch("needs-input", "Deploy the release").await;
    h.pump_until("the run to need input", |app| {
        app.model
            .run(&run_id)
            .is_some_and(|e| e.summary.needs_input && e.summary.head.state == RunState::Idle)
    })
    .await;
    h.app.model.select(&run_id);
    h.press([char_key('f')]);
    assert!(top::<InputBox>(&h.app).is_some());
    h.type_text("staging-eu");
    h.press([key(KeyCode::Enter)]);
    h.pump_until("the follow-up box to close", |app| app.views.is_empty())
        .await;
    // The row says the follow-up turn is done (its result is no longer the question);
    // the turns are read from the owner below (the detail pane may be fetched later).
    h.pump_until("the follow-up turn to finish", |app| {
        app.model.run(&run_id).is_some_and(|e| {
            e.summary.head.state == RunState::Idle
                && !e.summary.needs_input
                && e.summary.result_status.as_deref() == Some("done")
        })
    })
    .await;
    let view = h.show(&run_id).await;
    assert_eq!(view.turns.len(), 2);
    assert_eq!(view.turns[1].origin, "follow_up");
    let result = view.last_result.expect("a result");
    assert_eq!(result.status.as_deref(), Some("done"));
    assert!(
        result.summary.unwrap_or_default().contains("staging-eu"),
        "the follow-up carried the answer"
    );
    let _ = h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_ends_the_selected_run() {
    let mut h = Harness::start().await;
    let run_id = h.dispatch("hang", "Look into it").await;
    h.pump_until("the run to be running", |app| {
        app.model
            .run(&run_id)
            .is_some_and(|e| e.summary.head.state == RunState::Running)
    })
    .await;
    h.app.model.select(&run_id);
    // A run in a turn asks first: `s` again stops it now (`y` would wrap it up).
    h.press([char_key('s'), char_key('s')]);
    let run = h.wait(&run_id, WaitUntil::Terminal).await;
    assert_eq!(run.head.state, RunState::Stopped);
    assert_eq!(run.head.completion_reason.as_deref(), Some("user"));
    h.pump_until("the run in the Finished tray", |app| {
        app.model
            .run(&run_id)
            .is_some_and(|e| e.summary.head.state == RunState::Stopped)
    })
    .await;
    let _ = h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_all_asks_first_then_stops_every_active_run() {
    let mut h = Harness::start().await;
    let a = h.dispatch("hang", "first").await;
    let b = h.dispatch("hang", "second").await;
    h.pump_until("both runs listed", |app| app.model.counts().active == 2)
        .await;
    h.press([char_key('K')]);
    assert!(top::<ConfirmView>(&h.app).is_some());
    h.press([char_key('n')]);
    assert!(h.app.views.is_empty(), "no closes the question");
    h.press([char_key('K'), char_key('y')]);
    for id in [&a, &b] {
        let run = h.wait(id, WaitUntil::Terminal).await;
        assert_eq!(run.head.state, RunState::Stopped, "{id}");
    }
    let _ = h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quitting_with_a_run_in_a_turn_asks_then_the_shutdown_records_it_interrupted() {
    let mut h = Harness::start().await;
    let run_id = h.dispatch("hang", "Keep going").await;
    h.pump_until("the run in its turn", |app| {
        app.model.counts().active == 1
            && app
                .model
                .run(&run_id)
                .is_some_and(|e| e.summary.head.state == RunState::Running)
    })
    .await;
    h.press([char_key('q')]);
    assert!(!h.quit, "not before the answer");
    h.press([char_key('y')]);
    assert!(h.quit, "quit after yes");
    // What the dashboard does on quit: shut the dispatcher down.
    let paths = h.paths.clone();
    let _home = h.shutdown().await;
    let view: RunView = drover_core::control::offline::answer(&paths, &Request::Show { run_id })
        .expect("the ledger answers")
        .into_show()
        .expect("a run view");
    assert_eq!(view.head.state, RunState::Interrupted);
    assert_eq!(
        view.head.completion_reason, None,
        "interrupted is not an end"
    );
    let live = view.head.live_state.expect("a live state");
    assert_eq!(
        live.detail.as_deref(),
        Some(drover_core::dispatch::core::INTERRUPTED_DETAIL)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answering_moves_to_the_oldest_request_of_another_run() {
    let mut h = Harness::start().await;
    let first = h.dispatch("tool-permission", "first").await;
    h.pump_until("the first run's request", |app| {
        requests_loaded(app, &[&first])
    })
    .await;
    let second = h.dispatch("tool-permission", "second").await;
    h.pump_until("both runs' requests, in full", |app| {
        requests_loaded(app, &[&first, &second])
    })
    .await;
    h.press([char_key('p')]);
    assert_eq!(
        prompt_request(&h.app).map(|(run, _)| run),
        Some(first.clone()),
        "the oldest request first"
    );
    h.read();
    h.press([char_key('y')]);
    h.pump_until("the other run's request on screen", |app| {
        prompt_request(app).is_some_and(|(run, _)| run == second)
    })
    .await;
    let (_, denied) = prompt_request(&h.app).unwrap();
    h.read();
    h.press([char_key('d')]);
    h.pump_until("the second run's request answered", |app| {
        prompt_request(app).is_none_or(|(_, id)| id != denied)
    })
    .await;
    let events = h.events_of(&second).await;
    assert!(
        events.iter().any(|e| e.kind == "permission_resolved"
            && e.body["request_id"] == denied.as_str()
            && e.body["decision"] == "deny"),
        "the deny landed on the second run's request"
    );
    let _ = h.shutdown().await;
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_run_is_routed_by_picking_option_two_on_its_card() {
    let mut h = Harness::start().await;
    let run: RunSummary = h
        .ask(Request::Dispatch {
            spec: Box::new(SpecInput {
                provider: Some("sim".into()),
                model: Some("auto".into()),
                scenario: Some("hang".into()),
                task: "Look into the flaky test".into(),
                cwd: Some(h.home.path().to_path_buf()),
                ..SpecInput::default()
            }),
        })
        .await;
    let run_id = run.head.run_id;
    h.pump_until("the run to be held on its card", |app| {
        app.model
            .run(&run_id)
            .is_some_and(|e| e.summary.head.state == RunState::AwaitingRoute)
    })
    .await;
    h.app.model.select(&run_id);
    h.press([char_key('p')]);
    h.pump_until("the card to be loaded", |app| {
        top::<RouteView>(app).is_some_and(|r| r.card.is_some())
    })
    .await;
    let Some(card) = top::<RouteView>(&h.app) else {
        unreachable!()
    };
    let second = card.card.as_ref().expect("card").options[1].clone();
    h.press([char_key('2')]);
    h.pump_until("the card to close", |app| app.views.is_empty())
        .await;
    let view = h.show(&run_id).await;
    assert_ne!(view.head.state, RunState::AwaitingRoute);
    assert_eq!(view.head.provider, second.provider);
    assert_eq!(view.head.model.as_deref(), Some(second.model.as_str()));
    let _ = h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_r_resumes_a_cut_turn_and_opens_the_follow_up_box_for_the_rest() {
    let h = Harness::start().await;
    let idle = h.dispatch("needs-input", "Deploy the release").await;
    h.wait(&idle, WaitUntil::Idle).await;
    let busy = h.dispatch("slow-spender", "Refactor the modules").await;
    // In its turn (a few seconds long) when drover stops.
    let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
    loop {
        let view = h.show(&busy).await;
        if view.head.state == RunState::Running && !view.turns.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the turn never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let home = h.shutdown().await;

    // drover starts again: the run in a turn was interrupted by the shutdown; the idle
    // one is back as it was, hibernated.
    let mut h = Harness::start_in(home).await;
    h.pump_until("both runs listed", |app| {
        app.model
            .run(&busy)
            .is_some_and(|e| e.summary.head.state == RunState::Interrupted)
            && app
                .model
                .run(&idle)
                .is_some_and(|e| e.summary.head.state == RunState::Idle)
    })
    .await;
    let entry = h.app.model.run(&busy).expect("the interrupted run");
    assert_eq!(
        drover_tui::model::Tray::of(&entry.summary),
        drover_tui::model::Tray::NeedsYou,
        "interrupted: it needs the user, it has not finished"
    );
    h.app.model.select(&busy);
    h.press([key(KeyCode::Enter)]);
    let hint = h.app.model.flash.as_ref().map(|f| f.text.clone());
    assert!(
        hint.as_deref()
            .is_some_and(|t| t.contains("press R to resume")),
        "{hint:?}"
    );
    h.press([char_key('R')]);
    h.pump_until("the resumed turn to end", |app| {
        app.model.run(&busy).is_some_and(|e| {
            e.summary.head.state == RunState::Idle
                && e.summary.result_status.as_deref() == Some("done")
        })
    })
    .await;
    let view = h.show(&busy).await;
    assert_eq!(view.turns.len(), 2, "{view:?}");
    assert_eq!(view.turns[1].origin, "resume");
    assert!(
        view.turns[1]
            .prompt_preview
            .starts_with("drover was restarted during your last turn; continue it"),
        "{view:?}"
    );

    // The idle run's result asks a question: R never answers it for the user, it opens
    // the follow-up box.
    h.app.model.select(&idle);
    h.press([char_key('R')]);
    h.pump_until("the follow-up box", |app| top::<InputBox>(app).is_some())
        .await;
    let view = h.show(&idle).await;
    assert_eq!(view.turns.len(), 1, "nothing was sent: {view:?}");
    h.type_text("staging-eu");
    h.press([key(KeyCode::Enter)]);
    h.pump_until("the answer used", |app| {
        app.model.run(&idle).is_some_and(|e| {
            e.summary.head.state == RunState::Idle
                && e.summary.result_status.as_deref() == Some("done")
        })
    })
    .await;
    let view = h.show(&idle).await;
    assert_eq!(view.turns[1].origin, "follow_up");
    assert!(
        view.last_result
            .and_then(|r| r.summary)
            .is_some_and(|s| s.contains("staging-eu")),
        "the user's words answered it"
    );
    let _ = h.shutdown().await;
}

/// A second dashboard on the same owner: its own app, request runner and event pump, all over the
/// control socket.
struct Viewer {
    app: App,
    requests: RequestRunner,
    rx: mpsc::UnboundedReceiver<AppEvent>,
    pump: tokio::task::JoinHandle<()>,
}

impl Viewer {
    fn attach(paths: &Paths) -> Viewer {
        let (sender, rx) = drover_tui::runner::channel();
        let link = Link::new(paths.clone());
        let pump = link.spawn_events(sender.clone(), tokio::sync::watch::channel(true).1);
        let requests = RequestRunner::new(link, sender);
        let mut app = App::new(
            options(),
            ViewModel::new(drover_core::clock::now_millis(), 120, 40),
        );
        for effect in app.start() {
            requests.execute(effect);
        }
        Viewer {
            app,
            requests,
            rx,
            pump,
        }
    }

    fn handle(&mut self, event: AppEvent) {
        self.app.model.now = drover_core::clock::now_millis();
        for effect in self.app.handle(event) {
            self.requests.execute(effect);
        }
    }

    async fn pump_until(&mut self, what: &str, done: impl Fn(&App) -> bool) {
        let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
        while !done(&self.app) {
            let event = tokio::select! {
                Some(event) = self.rx.recv() => event,
                () = tokio::time::sleep_until(deadline) => panic!("timed out waiting for {what}"),
            };
            self.handle(event);
        }
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        self.pump.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_answered_in_one_dashboard_closes_in_the_other() {
    let mut h = Harness::start().await;
    let mut other = Viewer::attach(&h.paths);
    h.dispatch("tool-permission", "List the files").await;
    other
        .pump_until("the request in the second dashboard", |app| {
            app.model.oldest_pending(None).is_some()
        })
        .await;
    other.handle(char_key('p'));
    let (_, request_id) = prompt_request(&other.app).expect("its prompt opens");
    h.pump_until("the request in the first dashboard", |app| {
        app.model.oldest_pending(None).is_some()
    })
    .await;
    h.press([char_key('p')]);
    h.read();
    h.press([char_key('y')]);
    // The second dashboard hears the resolution: the request leaves its model, and its
    // open prompt no longer offers to answer it.
    other
        .pump_until("the request gone from the second dashboard", |app| {
            app.model
                .oldest_pending(None)
                .is_none_or(|(_, p)| p.request_id != request_id)
        })
        .await;
    other.handle(char_key('y'));
    other
        .pump_until(
            "the second answer refused as gone, or the prompt closed",
            |app| match top::<PromptView>(app) {
                Some(p) if p.request.request_id == request_id => {
                    matches!(p.state, PromptState::Gone(_))
                }
                _ => true,
            },
        )
        .await;
    let events = h
        .events_of(
            &h.app
                .model
                .runs()
                .next()
                .unwrap()
                .summary
                .head
                .run_id
                .clone(),
        )
        .await;
    let answers = events
        .iter()
        .filter(|e| e.kind == "permission_resolved" && e.body["request_id"] == request_id.as_str())
        .count();
    assert_eq!(answers, 1, "answered once");
    drop(other);
    let _ = h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaving_a_background_owners_dashboard_leaves_the_runs_going() {
    let h = Harness::start().await;
    let run_id = h.dispatch("hang", "Keep working").await;
    let mut viewer = Viewer::attach(&h.paths);
    viewer
        .pump_until("the running run", |app| {
            app.model
                .run(&run_id)
                .is_some_and(|e| e.summary.head.state.is_active())
        })
        .await;
    viewer.handle(char_key('q'));
    assert!(
        viewer.app.quitting(),
        "q leaves at once: nothing to confirm"
    );
    drop(viewer);
    let view = h.show(&run_id).await;
    assert!(view.head.state.is_active(), "{:?}", view.head.state);
    let _ = h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_says_the_owner_is_gone_and_reattaches_to_a_new_one() {
    let mut h = Harness::start().await;
    let run_id = h.dispatch("hang", "Keep working").await;
    h.pump_until("the run in its turn", |app| {
        app.model
            .run(&run_id)
            .is_some_and(|e| e.summary.head.state == RunState::Running)
    })
    .await;
    // The owner goes away (as a crash or a shutdown would take it).
    h.host.take().expect("an owner").shutdown().await;
    h.pump_until("the owner seen gone", |app| {
        app.model.owner_gone_since.is_some()
    })
    .await;
    // A new owner on the same data directory: the dashboard reattaches by itself and
    // takes a fresh snapshot, where the run is interrupted.
    let config = Config::load(&h.paths.config_file).expect("config");
    let host = Host::start(DispatcherOptions {
        paths: h.paths.clone(),
        config,
        self_exe: env!("CARGO_BIN_EXE_drover").into(),
        warden: true,
        ledger_gate: None,
    })
    .await
    .expect("a new owner");
    h.handle = host.handle().clone();
    h.host = Some(host);
    h.pump_until("reattached, the run interrupted", |app| {
        app.model.owner_gone_since.is_none()
            && app
                .model
                .run(&run_id)
                .is_some_and(|e| e.summary.head.state == RunState::Interrupted)
    })
    .await;
    let _ = h.shutdown().await;
}

/// A run's view fetched before its request was answered arrives after the answer: the
/// request stays answered (it does not come back as a prompt to answer again).
#[test]
fn a_stale_view_does_not_bring_back_an_answered_request() {
    let run = tui_common::summary(1, "Fix the parser", RunState::AwaitingPermission);
    let run_id = run.head.run_id.clone();
    let request = tui_common::bash_request(1, "cargo test");
    let mut stale = tui_common::view_of(&run);
    stale.pending = vec![request.clone()];
    let mut app = tui_common::app_with(vec![run], 120, 40);
    app.model
        .apply(&drover_core::dispatch::DispatchEvent::PermissionRequested {
            run_id: run_id.clone(),
            pending: request.clone(),
        });
    assert!(app.model.oldest_pending(None).is_some());
    app.model
        .apply(&drover_core::dispatch::DispatchEvent::PermissionResolved {
            run_id: run_id.clone(),
            request_id: request.request_id.clone(),
            how: "allow".into(),
        });
    app.model.set_detail(stale);
    assert!(app.model.oldest_pending(None).is_none());
    assert!(app.model.run(&run_id).is_some_and(|e| e.pending.is_empty()));
}

/// A run's view fetched before its request was asked arrives after the request's event:
/// the request stays (the view does not drop it, leaving the run awaiting an answer
/// with nothing on screen to answer until the next refresh).
#[test]
fn a_view_fetched_before_a_request_does_not_drop_it() {
    let run = tui_common::summary(1, "Fix the parser", RunState::AwaitingPermission);
    let run_id = run.head.run_id.clone();
    let request = tui_common::bash_request(1, "cargo test");
    let before = tui_common::view_of(&run);
    assert!(before.pending.is_empty());
    let mut app = tui_common::app_with(vec![run], 120, 40);
    app.model
        .apply(&drover_core::dispatch::DispatchEvent::PermissionRequested {
            run_id: run_id.clone(),
            pending: request.clone(),
        });
    app.model.set_detail(before);
    assert_eq!(
        app.model
            .oldest_pending(None)
            .map(|(_, p)| p.request_id.clone()),
        Some(request.request_id.clone())
    );
    assert!(app.model.run(&run_id).is_some_and(|e| e.pending.len() == 1));
}

/// A ledger with `n` finished runs (the newest first: `old-0000` finished last), each
/// with a real spec, written before any owner starts; `old-{needle}` has a title of its
/// own.
fn fill_history(home: &std::path::Path, n: usize, needle: usize) {
    use drover_core::ledger::{Ledger, LedgerOptions, RunRecord, WriteOp};
    let paths = Paths::under(home);
    paths.ensure_dirs().expect("dirs");
    let now = drover_core::clock::now_millis();
    let (ledger, _) =
        Ledger::open(&paths.ledger_file, LedgerOptions::default(), now).expect("ledger");
    let spec = serde_json::to_value(drover_core::spec::Spec {
        provider: "sim".into(),
        model: Some("sim-standard".into()),
        effort: None,
        cwd: home.to_path_buf(),
        task: "an old task".into(),
        context: None,
        title: "an old task".into(),
        tags: vec![],
        capability: drover_core::spec::Capability::Workspace,
        policy: drover_core::spec::PermissionPolicy::Ask,
        max_minutes: 45,
        budget_usd: 5.0,
        idle_timeout_secs: 1200,
        max_turns: 6,
        output_schema: None,
        workflow_id: None,
        parent_run: None,
        idempotency_key: None,
        queue_if_busy: true,
        scenario: None,
        class: None,
        workspace: None,
        carry_changes: false,
        sandbox: false,
        host: None,
        clamps: vec![],
    })
    .expect("spec");
    let ops = (0..n)
        .map(|i| {
            let at = now - 60_000 - i as i64 * 1_000;
            WriteOp::InsertRun(Box::new(RunRecord {
                run_id: format!("old-{i:04}"),
                created_at: at - 500,
                updated_at: at,
                finished_at: Some(at),
                state: RunState::Completed,
                completion_reason: Some("complete".into()),
                provider: "sim".into(),
                model: Some("sim-standard".into()),
                title: if i == needle {
                    "Find the haystack needle".into()
                } else {
                    format!("old task {i}")
                },
                budget_session: "default".into(),
                workflow_id: None,
                parent_run: None,
                idempotency_key: None,
                provider_session_id: None,
                removed: false,
                spec: spec.clone(),
                live_state: None,
                result: None,
                workspace: None,
            }))
        })
        .collect();
    ledger
        .writer()
        .commit_blocking(ops)
        .expect("history written");
    ledger.close();
}

fn finished_held(app: &App) -> usize {
    app.model
        .runs()
        .filter(|e| e.summary.head.state.is_terminal())
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrolling_past_the_window_loads_the_next_page_and_the_filter_finds_an_old_run() {
    use drover_tui::model::FINISHED_PAGE;
    let home = tempfile::tempdir().expect("temp dir");
    let page = FINISHED_PAGE as usize;
    // Two and a half pages; the needle is on the last one.
    let dir = home.path().to_path_buf();
    tokio::task::spawn_blocking(move || fill_history(&dir, page * 5 / 2, page * 5 / 2 - 3))
        .await
        .expect("filled");
    let mut h = Harness::start_in(home).await;
    h.pump_until("the first window", |app| finished_held(app) > 0)
        .await;
    assert_eq!(
        finished_held(&h.app),
        page,
        "only the first window is loaded"
    );
    assert!(h.app.model.run("old-0000").is_some(), "the newest first");

    // To the end of the Finished tray: the next page comes.
    h.press([key(KeyCode::End)]);
    h.pump_until("the second page", |app| finished_held(app) == 2 * page)
        .await;
    assert!(
        h.app
            .model
            .run(&format!("old-{:04}", 2 * page - 1))
            .is_some()
    );
    h.press([key(KeyCode::End)]);
    h.pump_until("the last, partial page", |app| {
        finished_held(app) == page * 5 / 2
    })
    .await;
    assert!(!h.app.model.wants_older(), "nothing older is left");

    // A fresh dashboard on the same ledger: the filter searches the ledger for a run that
    // is not in its window.
    let home = h.shutdown().await;
    let mut h = Harness::start_in(home).await;
    h.pump_until("the first window", |app| finished_held(app) > 0)
        .await;
    let needle = format!("old-{:04}", page * 5 / 2 - 3);
    assert!(
        h.app.model.run(&needle).is_none(),
        "the needle is not loaded"
    );
    h.press([char_key('/')]);
    h.type_text("haystack");
    h.pump_until("the search's answer", |app| {
        app.model
            .rows()
            .iter()
            .any(|r| matches!(r, drover_tui::model::Row::Run(id) if *id == needle))
    })
    .await;
    assert_eq!(h.app.model.selected(), Some(needle.as_str()));
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_oldest_permission_is_reached_and_answered_in_one_key() {
    let mut h = Harness::start().await;
    let first = h.dispatch("tool-permission", "first").await;
    h.pump_until("the first run's request", |app| {
        requests_loaded(app, &[&first])
    })
    .await;
    let second = h.dispatch("tool-permission", "second").await;
    h.pump_until("both runs' requests, in full", |app| {
        requests_loaded(app, &[&first, &second])
    })
    .await;
    // The second run is selected; the attention line shows the oldest request anyway.
    h.app.model.select(&second);
    let (shown_run, shown) = h
        .app
        .attention_request()
        .map(|(e, p)| (e.summary.head.run_id.clone(), p.request_id.clone()))
        .expect("the attention line shows a request");
    assert_eq!(shown_run, first, "the oldest request of any run");
    h.read();
    let keys = counted(&mut h, vec![char_key('y')]);
    assert_eq!(keys, 1);
    h.pump_until("the shown request answered", |app| {
        app.model
            .run(&first)
            .is_some_and(|e| e.pending.iter().all(|p| p.request_id != shown))
    })
    .await;
    let events = h.events_of(&first).await;
    assert!(
        events.iter().any(|e| e.kind == "permission_resolved"
            && e.body["request_id"] == shown.as_str()
            && e.body["decision"] == "allow"),
        "the allow landed on the request shown"
    );
    let others = h.events_of(&second).await;
    assert!(
        !others.iter().any(|e| e.kind == "permission_resolved"),
        "nothing landed on the other run"
    );
    let _ = h.shutdown().await;
}

/// Whether each of `runs` has its pending request in the model in full (its view, not
/// only the count a summary carries): the attention line can show only those.
fn requests_loaded(app: &App, runs: &[&str]) -> bool {
    runs.iter()
        .all(|run| app.model.run(run).is_some_and(|e| !e.pending.is_empty()))
}

/// Whether these effects answer a request.
fn answers(effects: &[Effect]) -> bool {
    effects.iter().any(|e| {
        matches!(
            e,
            Effect::Request {
                request: Request::Respond { .. },
                ..
            }
        )
    })
}

/// The user's decisions on a run's requests, as the ledger has them.
async fn user_decisions(h: &Harness, run_id: &str) -> Vec<String> {
    h.show(run_id)
        .await
        .decisions
        .iter()
        .filter(|d| d.who == "user")
        .map(|d| d.decision.clone())
        .collect()
}

/// A double-pressed `y`: the first answers the request on the attention line, which then
/// shows the next run's request; the second, 150 ms later, finds that one on screen too
/// briefly to have been read and does nothing to it (the line says so). 450 ms after the
/// first, `y` answers it. The dashboard's clock is stopped and set for each key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn y_y_150_ms_apart_answers_one_request_and_450_ms_apart_two() {
    let mut h = Harness::start().await;
    let first = h.dispatch("tool-permission", "first").await;
    h.pump_until("the first run's request", |app| {
        requests_loaded(app, &[&first])
    })
    .await;
    let second = h.dispatch("tool-permission", "second").await;
    h.pump_until("both runs' requests, in full", |app| {
        requests_loaded(app, &[&first, &second])
    })
    .await;
    h.read();
    h.freeze();
    let on_the_line = |app: &App| {
        app.attention_request()
            .map(|(e, p)| (e.summary.head.run_id.clone(), p.request_id.clone()))
    };
    let (run, shown) = on_the_line(&h.app).expect("a request on the line");
    assert_eq!(run, first, "the oldest first");

    h.press([char_key('y')]);
    h.pump_until(
        "the first answered and the second run's request on the line",
        |app| {
            app.model
                .run(&first)
                .is_some_and(|e| e.pending.iter().all(|p| p.request_id != shown))
                && on_the_line(app).is_some_and(|(run, _)| run == second)
        },
    )
    .await;
    let (_, next) = on_the_line(&h.app).expect("the second run's request");
    h.pass(150);
    h.app.model.now = h.now();
    let effects = h.app.handle(char_key('y'));
    assert!(!answers(&effects), "150 ms: {effects:?}");
    h.carry_out(effects);
    let screen = tui_common::render_app(&h.app);
    assert!(screen.contains("just changed — look again"), "{screen}");
    assert_eq!(user_decisions(&h, &first).await, ["allow"]);
    assert!(
        user_decisions(&h, &second).await.is_empty(),
        "nothing landed on the second"
    );
    assert_eq!(h.show(&second).await.pending.len(), 1);

    h.pass(300);
    h.app.model.now = h.now();
    let effects = h.app.handle(char_key('y'));
    assert!(answers(&effects), "450 ms: {effects:?}");
    h.carry_out(effects);
    h.pump_until("the second answered", |app| {
        app.model
            .run(&second)
            .is_some_and(|e| e.pending.iter().all(|p| p.request_id != next))
    })
    .await;
    assert_eq!(user_decisions(&h, &first).await, ["allow"]);
    assert_eq!(user_decisions(&h, &second).await, ["allow"]);
    let _ = h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_runs_task_is_dispatched_again_in_three_keys() {
    let mut h = Harness::start().await;
    let work = tempfile::tempdir_in(h.home.path()).expect("a work dir");
    let old: RunSummary = h
        .ask(Request::Dispatch {
            spec: Box::new(SpecInput {
                provider: Some("sim".into()),
                model: Some("sim-small".into()),
                task: "Check the README links".into(),
                cwd: Some(work.path().to_path_buf()),
                policy: Some("auto".into()),
                budget_usd: Some(1.25),
                workspace: Some("shared".into()),
                ..SpecInput::default()
            }),
        })
        .await;
    let old_id = old.head.run_id.clone();
    h.wait(&old_id, WaitUntil::Idle).await;
    let _: RunSummary = h
        .ask(Request::Complete {
            run_id: old_id.clone(),
        })
        .await;
    h.pump_until("the run finished on the dashboard", |app| {
        app.model
            .run(&old_id)
            .is_some_and(|e| e.summary.head.state.is_terminal())
    })
    .await;
    // Another run on top, so reaching the finished one takes a key.
    let other = h.dispatch("hang", "Keep working").await;
    h.pump_until("both runs listed", |app| app.model.run(&other).is_some())
        .await;
    h.app.model.select(&other);
    let mut keys = counted(&mut h, vec![char_key('G')]);
    assert_eq!(h.app.model.selected(), Some(old_id.as_str()));
    h.pump_until("its spec loaded", |app| {
        app.model.run(&old_id).is_some_and(|e| e.detail.is_some())
    })
    .await;
    keys += counted(&mut h, vec![char_key('r')]);
    let Some(form) = top::<DispatchForm>(&h.app) else {
        panic!("r opens the form: {:?}", h.app.model.flash)
    };
    assert_eq!(form.task.text, "Check the README links");
    assert_eq!(form.provider.value(), "sim");
    assert_eq!(form.model.text, "sim-small");
    assert_eq!(form.policy.value(), "auto");
    assert_eq!(form.budget.text, "1.25");
    assert_eq!(form.cwd.text, work.path().display().to_string());
    assert_eq!(form.workspace.value(), "shared");
    keys += counted(&mut h, vec![key(KeyCode::Enter)]);
    assert!(keys <= 3, "{keys} keys");
    h.pump_until("the form closes on the dispatch", |app| {
        app.views.is_empty()
    })
    .await;
    let new_id = h.app.model.selected().expect("the new run").to_string();
    assert_ne!(new_id, old_id);
    let view = h.show(&new_id).await;
    assert_eq!(view.task, "Check the README links");
    assert_eq!(view.head.provider, "sim");
    assert_eq!(view.head.model.as_deref(), Some("sim-small"));
    assert_eq!(view.policy, "auto");
    assert_eq!(view.budget.cap, 1.25);
    assert_eq!(view.cwd, work.path().display().to_string());
    let _ = h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_run_lands_in_needs_you_with_its_offer_and_e_takes_it() {
    let mut h = Harness::start().await;
    let run_id = h.dispatch("blocked", "Run the test suite").await;
    h.pump_until("the blocked run in Needs you with its offer", |app| {
        app.model.run(&run_id).is_some_and(|e| {
            drover_tui::model::Tray::of(&e.summary) == drover_tui::model::Tray::NeedsYou
                && e.summary.escalation_offered
                && e.summary.head.state == RunState::Idle
        })
    })
    .await;
    let view = h.show(&run_id).await;
    assert!(view.escalation.is_some());
    let need = view.needs_you.expect("show says why it needs you");
    assert_eq!(need.reason, drover_core::dispatch::api::Need::Escalation);
    // `e` on the idle run: a new run carries the result, the old one completes.
    h.app.model.select(&run_id);
    h.pump_until("its view loaded", |app| {
        app.model
            .run(&run_id)
            .is_some_and(|e| e.detail.as_ref().is_some_and(|d| d.escalation.is_some()))
    })
    .await;
    h.press([char_key('e')]);
    h.pump_until("the new run selected", |app| {
        app.model.selected().is_some_and(|s| s != run_id)
    })
    .await;
    let child = h.app.model.selected().unwrap().to_string();
    let old = h.wait(&run_id, WaitUntil::Terminal).await;
    assert_eq!(old.head.state, RunState::Completed);
    assert_eq!(old.head.completion_reason.as_deref(), Some("escalated"));
    let view = h.show(&child).await;
    assert_eq!(view.parent_run.as_deref(), Some(run_id.as_str()));
    let _ = h.shutdown().await;
}

/// `git ARGS` in `dir`, which must succeed.
fn git(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A scenario file of one turn whose one step is a Bash `command` behind a permission
/// request (`run`: it really runs once allowed), after an `ls` that asks too.
fn bash_scenario(dir: &std::path::Path, command: &str, run: bool) -> String {
    let path = dir.join("scenario.toml");
    let text = format!(
        r#"description = "one command behind a permission request"
model = "claude-sonnet-4-5"

[[turns]]
status = "done"
summary = "Ran the command."

[[turns.steps]]
tool = "Bash"
input = {{ command = "ls", description = "List the files" }}
needs_permission = true
output = "src"
on_deny = "No listing then."

[[turns.steps]]
tool = "Bash"
input = {{ command = {command:?}, description = "The command" }}
needs_permission = true
run = {run}
output = "ran"
on_deny = "Understood, I did not run it."
"#
    );
    std::fs::write(&path, text).expect("scenario written");
    path.display().to_string()
}

impl Harness {
    /// Dispatches a `sim` run of the scenario file in `cwd`, in a `workspace` of that mode.
    async fn dispatch_in(&self, scenario: &str, cwd: &std::path::Path, workspace: &str) -> String {
        let run: RunSummary = self
            .ask(Request::Dispatch {
                spec: Box::new(SpecInput {
                    provider: Some("sim".into()),
                    scenario: Some(scenario.into()),
                    task: "run the command".into(),
                    cwd: Some(cwd.to_path_buf()),
                    workspace: Some(workspace.into()),
                    ..SpecInput::default()
                }),
            })
            .await;
        run.head.run_id
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_saved_for_the_repository_answers_a_second_run_in_a_worktree_of_it() {
    let mut h = Harness::start().await;
    let repo = tempfile::tempdir_in(h.home.path())
        .expect("a repo dir")
        .keep();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.name", "Test User"]);
    git(&repo, &["config", "user.email", "test@example.invalid"]);
    git(&repo, &["config", "commit.gpgsign", "false"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "start"]);
    let scenario_dir = tempfile::tempdir_in(h.home.path()).expect("a dir").keep();
    let scenario = bash_scenario(&scenario_dir, "cargo test --lib foo", false);

    // The first run asks for `ls`: allowed once; then for `cargo test --lib foo`.
    let first = h.dispatch_in(&scenario, &repo, "shared").await;
    h.pump_until("the ls request", |app| {
        app.model.oldest_pending(None).is_some()
    })
    .await;
    h.press([char_key('p')]);
    h.read();
    h.press([char_key('y')]);
    // The request is in, and the answer to `ls` came back (its prompt moved on to the
    // new request, or closed).
    let cargo_test = |app: &App| {
        app.model
            .oldest_pending(None)
            .is_some_and(|(_, p)| p.ask.summary() == "cargo test --lib foo")
    };
    h.pump_until("the cargo test request", |app| {
        cargo_test(app)
            && top::<PromptView>(app)
                .is_none_or(|p| p.request.ask.summary() == "cargo test --lib foo")
    })
    .await;
    if top::<PromptView>(&h.app).is_none() {
        h.press([char_key('p')]);
    }
    // `a` opens the chooser with the proposed pattern and the repository scope.
    h.read();
    h.press([char_key('a')]);
    let Some(p) = top::<PromptView>(&h.app) else {
        panic!("the prompt")
    };
    let drover_tui::views::prompt::PromptMode::Rule(chooser) = &p.mode else {
        panic!("the chooser is open: {:?}", p.mode)
    };
    assert_eq!(chooser.pattern.text, "cargo test *");
    assert_eq!(chooser.scope, drover_core::rules::Scope::Repository);
    let shown = p.request.request_id.clone();
    h.press([key(KeyCode::Enter)]);
    h.pump_until("the prompt to close", |app| app.views.is_empty())
        .await;
    h.wait(&first, WaitUntil::Idle).await;
    let rules: Vec<drover_core::rules::Rule> = h.ask(Request::Rules).await;
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].pattern, "cargo test *");
    let common = std::fs::canonicalize(repo.join(".git")).expect("the git dir");
    assert_eq!(
        rules[0].repository.as_deref(),
        Some(common.to_str().unwrap())
    );
    let view = h.show(&first).await;
    assert!(
        view.decisions
            .iter()
            .any(|d| d.request_id.as_deref() == Some(shown.as_str()) && d.who == "rule:1"),
        "the request on screen was answered by the rule: {:?}",
        view.decisions
    );

    // A second run in a worktree of the same repository: `ls` asks, `cargo test` does not.
    let second = h.dispatch_in(&scenario, &repo, "worktree").await;
    h.pump_until("the second run's ls request", |app| {
        app.model
            .oldest_pending(None)
            .is_some_and(|(e, _)| e.summary.head.run_id == second)
    })
    .await;
    h.press([char_key('p')]);
    h.read();
    h.press([char_key('y')]);
    let run = h.wait(&second, WaitUntil::Idle).await;
    assert_eq!(run.pending, 0);
    let view = h.show(&second).await;
    let by_rule: Vec<_> = view
        .decisions
        .iter()
        .filter(|d| d.who == "rule:1")
        .collect();
    assert_eq!(by_rule.len(), 1, "{:?}", view.decisions);
    let tail: TranscriptView = h
        .ask(Request::Transcript {
            run_id: second.clone(),
            format: TranscriptFormat::Tail,
        })
        .await;
    assert!(
        tail.lines
            .iter()
            .any(|l| l.starts_with("rule 1 allowed Bash: cargo test --lib foo")),
        "{:?}",
        tail.lines
    );
    // And the ledger keeps the rule and who decided.
    let home = h.shutdown().await;
    let reader = drover_core::ledger::LedgerReader::open(&Paths::under(home.path()).ledger_file)
        .expect("the ledger");
    assert_eq!(reader.rules().expect("rules").len(), 1);
    let whos: Vec<String> = reader
        .decisions(&second)
        .expect("decisions")
        .into_iter()
        .map(|d| d.who)
        .collect();
    assert_eq!(whos, ["user", "rule:1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flagged_recursive_delete_outside_the_workspace_asks_despite_an_allow_everything_rule() {
    let mut h = Harness::start().await;
    // The canary: a directory of this test's own, outside the run's workspace. If the
    // guard failed, the command would delete only it.
    let canary_home = tempfile::tempdir().expect("a canary home");
    let canary = canary_home.path().join("canary");
    std::fs::create_dir_all(canary.join("inside")).expect("the canary");
    std::fs::write(canary.join("inside/keep.txt"), "still here").expect("a file");
    let work = tempfile::tempdir_in(h.home.path())
        .expect("a work dir")
        .keep();
    let command = format!("rm -rf {}", canary.display());
    let scenario = bash_scenario(&work, &command, true);
    let rule: drover_core::rules::Rule = h
        .ask(Request::RuleAdd {
            rule: drover_core::rules::RuleSpec {
                scope: drover_core::rules::Scope::Everywhere,
                kind: drover_core::rules::RuleKind::Any,
                pattern: "*".into(),
                decision: drover_core::rules::RuleDecision::Allow,
                run_id: None,
                repository: None,
            },
            answer: None,
        })
        .await;
    assert_eq!(rule.id, 1);

    let run_id = h.dispatch_in(&scenario, &work, "shared").await;
    // `ls` is answered by the rule; the delete waits for the person, flagged.
    h.pump_until("the flagged request", |app| {
        app.model.oldest_pending(None).is_some()
    })
    .await;
    let view = h.show(&run_id).await;
    assert_eq!(view.pending.len(), 1);
    let pending = &view.pending[0];
    assert_eq!(pending.ask.summary(), command);
    let reason = pending.guard.as_deref().expect("flagged");
    assert!(reason.contains("outside the workspace"), "{reason}");
    assert!(
        view.decisions.iter().any(|d| d.who == "rule:1"),
        "ls went by the rule"
    );
    assert!(
        canary.join("inside/keep.txt").exists(),
        "the canary survives the request"
    );

    // The prompt: one `y` does not allow it; `d` denies it.
    h.press([char_key('p')]);
    h.read();
    h.press([char_key('y')]);
    let Some(p) = top::<PromptView>(&h.app) else {
        panic!("the prompt")
    };
    assert_eq!(p.mode, drover_tui::views::prompt::PromptMode::ConfirmAllow);
    assert_eq!(p.state, PromptState::Open, "nothing sent on the first y");
    h.press([char_key('n'), char_key('d')]);
    let run = h.wait(&run_id, WaitUntil::Idle).await;
    assert_eq!(run.pending, 0);
    assert!(
        canary.join("inside/keep.txt").exists(),
        "the canary survives"
    );
    let view = h.show(&run_id).await;
    assert_eq!(
        view.decisions
            .iter()
            .map(|d| d.who.as_str())
            .collect::<Vec<_>>(),
        ["rule:1", "user"]
    );
    let _ = h.shutdown().await;
}

/// The agent's answer reaches the dashboard with its line breaks, through the real owner
/// (the sim's Claude stream, the core's transcript ring, the control socket), reads as
/// text full screen (`t`), and its lines and its result block copy as the agent wrote
/// them (docs/ARCHITECTURE.md §"Reading a transcript").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transcript_keeps_its_line_breaks_and_copies_lines_and_the_result_block() {
    use drover_tui::views::transcript::TranscriptScreen;
    let mut h = Harness::start().await;
    let run_id = h.dispatch("multi-turn", "Write the parser").await;
    h.wait(&run_id, WaitUntil::Idle).await;
    h.pump_until("the run idle in the dashboard", |app| {
        app.model
            .run(&run_id)
            .is_some_and(|e| e.summary.head.state == RunState::Idle)
    })
    .await;
    h.app.model.select(&run_id);
    h.pump_until("its transcript with the answer and the turn's end", |app| {
        app.model.run(&run_id).is_some_and(|e| {
            e.transcript.iter().any(|l| l.contains("\n## Result\n"))
                && e.transcript
                    .back()
                    .is_some_and(|l| l.starts_with("turn done"))
        })
    })
    .await;
    h.press([char_key('t')]);
    assert!(top::<TranscriptScreen>(&h.app).is_some(), "t opened it");
    let screen = tui_common::render_app(&h.app);
    for line in [
        "▸ Write: src/parser.rs · done",
        "The first version of the parser is in src/parser.rs.",
        "## Result",
        "status: done",
        "• src/parser.rs",
    ] {
        assert!(
            screen.lines().any(|l| l.contains(&format!("  {line} "))),
            "{line:?} on a line of its own:\n{screen}"
        );
    }
    // The cursor follows the last line (the turn's end); four up is `status: done`.
    let mut copied = Vec::new();
    for c in "kkkkvjjy".chars() {
        for effect in h.app.handle(char_key(c)) {
            if let Effect::Copy(text) = effect {
                copied.push(text);
            }
        }
    }
    assert_eq!(
        copied,
        ["status: done\nsummary: Wrote the first version of the parser.\nfiles:"]
    );
    assert_eq!(
        drover_tui::terminal::osc52(&copied[0]).as_bytes(),
        b"\x1b]52;c;c3RhdHVzOiBkb25lCnN1bW1hcnk6IFdyb3RlIHRoZSBmaXJzdCB2ZXJzaW9uIG9mIHRoZSBwYXJzZXIuCmZpbGVzOg==\x07"
    );
    let copied_result: Vec<Effect> = h.app.handle(char_key('Y'));
    assert_eq!(
        copied_result,
        [Effect::Copy(
            "## Result\nstatus: done\nsummary: Wrote the first version of the parser.\nfiles:\n- src/parser.rs"
                .into()
        )]
    );
    // The ledger gives the same transcript back once the owner is gone (the agent's text
    // stored once, in its event, its line made again on reading).
    let shown: Vec<String> = h
        .app
        .model
        .run(&run_id)
        .unwrap()
        .transcript
        .iter()
        .cloned()
        .collect();
    let home = h.shutdown().await;
    let reader =
        drover_core::ledger::LedgerReader::open(&Paths::under(home.path()).ledger_file).unwrap();
    let stored = drover_core::dispatch::projections::transcript_from_ledger(
        &reader,
        &run_id,
        TranscriptFormat::Tail,
    )
    .unwrap();
    // (the shutdown added the CLI's end after it.)
    assert!(
        stored.lines.len() >= shown.len() && stored.lines[..shown.len()] == shown[..],
        "shown: {shown:#?}\nstored: {:#?}",
        stored.lines
    );
}
