//! The app's decisions without a dispatcher: which requests it sends for which events,
//! how fetches are coalesced, notifications, the mouse, scrolling.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};

use super::app::{App, AppOptions};
use super::event::{AppEvent, Effect, ReplyTag};
use super::model::ViewModel;
use drover_core::dispatch::api::{PendingView, RunSummary, TranscriptFormat, TranscriptView};
use drover_core::dispatch::{DispatchEvent, Request, Response};
use drover_core::providers::RequestKind;
use drover_core::run_state::RunState;

fn summary(id: &str, state: RunState) -> RunSummary {
    let mut run = RunSummary::example(id, state);
    run.head.created_at = id.len() as i64;
    run
}

fn app(runs: Vec<RunSummary>) -> App {
    let mut app = App::new(AppOptions::new("/".into()), ViewModel::new(0, 120, 40));
    let _ = app.handle(AppEvent::Reply {
        tag: ReplyTag::Runs,
        result: Ok(Response::Runs(runs)),
    });
    app
}

fn requests(effects: &[Effect]) -> Vec<&Request> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Request { request, .. } => Some(request),
            _ => None,
        })
        .collect()
}

fn key(c: char) -> AppEvent {
    AppEvent::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

#[test]
fn starting_fetches_runs_and_money() {
    let mut app = App::new(AppOptions::new("/".into()), ViewModel::new(0, 120, 40));
    let effects = app.start();
    assert_eq!(
        requests(&effects),
        [
            &Request::Runs {
                state: None,
                include_removed: false,
                workflow: None,
                limit: Some(crate::model::FINISHED_PAGE),
                before: None,
                search: None,
            },
            &Request::Budget
        ]
    );
}

#[test]
fn the_first_frame_waits_for_the_first_list_of_runs_or_the_owner_gone() {
    let started = || {
        let mut app = App::new(AppOptions::new("/".into()), ViewModel::new(0, 120, 40));
        let _ = app.start();
        app
    };
    let mut app = started();
    assert!(app.first_runs_pending(), "nothing listed yet");
    let refused = || {
        Err(drover_core::error::DroverError::new(
            drover_core::ErrorCode::Internal,
            "no",
        ))
    };
    let _ = app.handle(AppEvent::Reply {
        tag: ReplyTag::Budget,
        result: refused(),
    });
    assert!(app.first_runs_pending(), "another answer is not the list");
    let _ = app.handle(AppEvent::Reply {
        tag: ReplyTag::Runs,
        result: Ok(Response::Runs(vec![summary("r1", RunState::Running)])),
    });
    assert!(!app.first_runs_pending(), "the list is here");
    // A refused list is drawn too (its error on the footer), and so is an owner gone.
    let mut app = started();
    let _ = app.handle(AppEvent::Reply {
        tag: ReplyTag::Runs,
        result: refused(),
    });
    assert!(!app.first_runs_pending());
    let mut app = started();
    let _ = app.handle(AppEvent::OwnerGone);
    assert!(!app.first_runs_pending());
}

#[test]
fn the_first_list_selects_a_run_and_fetches_its_view_and_transcript() {
    let mut app = App::new(AppOptions::new("/".into()), ViewModel::new(0, 120, 40));
    let effects = app.handle(AppEvent::Reply {
        tag: ReplyTag::Runs,
        result: Ok(Response::Runs(vec![summary("a", RunState::Running)])),
    });
    let sent = requests(&effects);
    assert!(
        sent.contains(&&Request::Show { run_id: "a".into() }),
        "{sent:?}"
    );
    assert!(
        sent.iter()
            .any(|r| matches!(r, Request::Transcript { run_id, .. } if run_id == "a")),
        "{sent:?}"
    );
}

#[test]
fn show_fetches_of_one_run_are_coalesced() {
    let mut app = app(vec![summary("a", RunState::Running)]);
    // The selection already has a Show in flight; two changes send nothing new…
    for _ in 0..2 {
        let effects = app.handle(AppEvent::Dispatch(DispatchEvent::RunChanged {
            run: summary("a", RunState::Running),
        }));
        assert!(
            !requests(&effects)
                .iter()
                .any(|r| matches!(r, Request::Show { .. })),
            "{effects:?}"
        );
    }
    // …and one more goes out when the answer comes back.
    let effects = app.handle(AppEvent::Reply {
        tag: ReplyTag::Show("a".into()),
        result: Err(drover_core::DroverError::new(
            drover_core::ErrorCode::Internal,
            "x",
        )),
    });
    assert_eq!(requests(&effects), [&Request::Show { run_id: "a".into() }]);
}

#[test]
fn a_pending_count_without_known_requests_fetches_the_runs_view() {
    let mut app = app(vec![
        summary("a", RunState::Running),
        summary("bb", RunState::Running),
    ]);
    let mut asking = summary("bb", RunState::AwaitingPermission);
    asking.pending = 1;
    let effects = app.handle(AppEvent::Dispatch(DispatchEvent::RunChanged {
        run: asking,
    }));
    assert!(
        requests(&effects).contains(&&Request::Show {
            run_id: "bb".into()
        }),
        "{effects:?}"
    );
}

#[test]
fn a_new_permission_request_notifies_once_and_can_be_turned_off() {
    let pending = PendingView {
        request_id: "q1".into(),
        kind: RequestKind::Permission,
        tool: "Bash".into(),
        ask: drover_core::providers::Ask::command("ls", None, None),
        always: None,
        created_at: 0,
        expires_at: 1,
        guard: None,
    };
    let event = AppEvent::Dispatch(DispatchEvent::PermissionRequested {
        run_id: "a".into(),
        pending: pending.clone(),
    });
    let mut app = app(vec![summary("a", RunState::Running)]);
    let effects = app.handle(event.clone());
    assert_eq!(
        effects
            .iter()
            .filter(|e| matches!(e, Effect::Notify(t) if t.contains("asks to use Bash")))
            .count(),
        1
    );
    let mut options = AppOptions::new("/".into());
    options.notify = false;
    let mut quiet = App::new(options, ViewModel::new(0, 120, 40));
    let _ = quiet.handle(AppEvent::Reply {
        tag: ReplyTag::Runs,
        result: Ok(Response::Runs(vec![summary("a", RunState::Running)])),
    });
    assert!(
        !quiet
            .handle(event)
            .iter()
            .any(|e| matches!(e, Effect::Notify(_)))
    );
}

#[test]
fn a_click_selects_the_run_under_the_pointer_and_the_wheel_scrolls() {
    let mut app = app(vec![
        summary("a", RunState::Running),
        summary("bb", RunState::Running),
        summary("ccc", RunState::Running),
    ]);
    assert_eq!(app.model.selected(), Some("a"));
    // Row 2 (header) + 1 header line + 2 lines per run: "ccc" starts on screen row 7.
    let click = |row| {
        AppEvent::Mouse(MouseEvent {
            kind: MouseEventKind::Down(MouseButton::Left),
            column: 5,
            row,
            modifiers: KeyModifiers::NONE,
        })
    };
    let _ = app.handle(click(7));
    assert_eq!(app.model.selected(), Some("ccc"));
    let _ = app.handle(click(2));
    assert_eq!(
        app.model.selected(),
        Some("ccc"),
        "a header selects nothing"
    );
    let wheel = |kind, column| {
        AppEvent::Mouse(MouseEvent {
            kind,
            column,
            row: 10,
            modifiers: KeyModifiers::NONE,
        })
    };
    let _ = app.handle(wheel(MouseEventKind::ScrollUp, 5));
    assert_eq!(app.model.selected(), Some("bb"));
    // The wheel over the detail pane scrolls the transcript instead.
    let _ = app.handle(AppEvent::Reply {
        tag: ReplyTag::Transcript("bb".into()),
        result: Ok(Response::Transcript(Box::new(TranscriptView {
            run_id: "bb".into(),
            format: TranscriptFormat::Tail,
            lines: (0..100).map(|i| format!("line {i}")).collect(),
            events: Vec::new(),
            result: None,
            events_pruned_at: None,
            last_seq: None,
        }))),
    });
    assert_eq!(app.model.transcript_scroll, None, "following the end");
    let _ = app.handle(wheel(MouseEventKind::ScrollUp, 100));
    assert!(app.model.transcript_scroll.is_some(), "scrolled up");
    assert_eq!(app.model.selected(), Some("bb"));
    let _ = app.handle(AppEvent::Key(KeyEvent::new(
        KeyCode::Char('F'),
        KeyModifiers::SHIFT,
    )));
    assert_eq!(app.model.transcript_scroll, None, "F follows the end again");
}

#[test]
fn stop_and_complete_name_the_selected_run_and_finished_runs_refuse() {
    let mut app = app(vec![
        summary("a", RunState::Idle),
        summary("bb", RunState::Completed),
    ]);
    // An idle run is not in a turn: `s` stops it at once.
    assert_eq!(
        requests(&app.handle(key('s'))),
        [&Request::Stop { run_id: "a".into() }]
    );
    assert_eq!(
        requests(&app.handle(key('c'))),
        [&Request::Complete { run_id: "a".into() }]
    );
    app.model.select("bb");
    assert!(requests(&app.handle(key('s'))).is_empty());
    assert!(app.model.flash.as_ref().is_some_and(|f| f.error));
    assert_eq!(
        requests(&app.handle(key('x'))),
        [&Request::Remove {
            run_id: Some("bb".into()),
            finished: false,
            force: false,
        }]
    );
}

#[test]
fn s_on_a_working_run_offers_wrap_up_or_stop_now() {
    let mut app = app(vec![
        summary("a", RunState::Running),
        summary("b", RunState::AwaitingPermission),
    ]);
    app.model.select("a");
    // `s` asks; nothing is sent yet, and any other key leaves the choice open.
    assert!(requests(&app.handle(key('s'))).is_empty());
    assert!(requests(&app.handle(key('x'))).is_empty());
    // y (or enter) wraps it up.
    assert_eq!(
        requests(&app.handle(key('y'))),
        [&Request::WrapUp { run_id: "a".into() }]
    );
    // `s` again stops it now.
    app.handle(key('s'));
    assert_eq!(
        requests(&app.handle(key('s'))),
        [&Request::Stop { run_id: "a".into() }]
    );
    // esc leaves without doing anything.
    app.model.select("b");
    app.handle(key('s'));
    assert!(
        requests(&app.handle(AppEvent::Key(KeyEvent::new(
            KeyCode::Esc,
            KeyModifiers::NONE
        ))))
        .is_empty()
    );
    // `s` on another confirmation does nothing.
    app.handle(key('K'));
    assert!(requests(&app.handle(key('s'))).is_empty());
}

#[test]
fn quitting_with_nothing_active_does_not_ask() {
    let mut app = app(vec![summary("a", RunState::Completed)]);
    assert_eq!(app.handle(key('q')), vec![Effect::Quit]);
    assert!(app.quitting());
}

#[test]
fn countdowns_ask_for_frames_only_while_something_counts_down() {
    let app_idle = app(vec![summary("a", RunState::Completed)]);
    assert!(!app_idle.has_countdowns());
    let mut running = summary("a", RunState::Running);
    running.head.live_state = Some(drover_core::live_state::LiveState {
        state: drover_core::live_state::LiveStateKind::Working,
        since: 0,
        bound: Some(10_000),
        detail: None,
        cause: None,
        seq: 1,
    });
    assert!(app(vec![running]).has_countdowns());
}

#[test]
fn a_lagging_event_stream_fetches_everything_again() {
    let mut app = app(vec![summary("a", RunState::Running)]);
    let _ = app.handle(AppEvent::Reply {
        tag: ReplyTag::Budget,
        result: Err(drover_core::DroverError::new(
            drover_core::ErrorCode::Internal,
            "x",
        )),
    });
    let effects = app.handle(AppEvent::Lagged);
    let sent = requests(&effects);
    assert!(sent.contains(&&Request::Budget), "{sent:?}");
    assert!(
        sent.iter().any(|r| matches!(r, Request::Runs { .. })),
        "{sent:?}"
    );
}

#[test]
fn a_refused_reload_from_before_the_dashboard_attached_shows_on_the_footer() {
    let mut app = app(vec![summary("a", RunState::Running)]);
    let budget = |refused: Option<&str>| drover_core::dispatch::api::BudgetView {
        session: "default".into(),
        spent_usd: 0.0,
        reserved_usd: 0.0,
        available_usd: 25.0,
        warning_usd: 10.0,
        hard_cap_usd: 25.0,
        runs_by_basis: Default::default(),
        unpriced_runs: Vec::new(),
        warned: false,
        closed: false,
        config_refused: refused.map(str::to_string),
        ledger_unavailable: None,
    };
    let refused =
        "config not reloaded: line 2: `limits.per_account` is 0 (the config in force is kept)";
    let _ = app.handle(AppEvent::Reply {
        tag: ReplyTag::Budget,
        result: Ok(drover_core::dispatch::Response::Budget(Box::new(budget(
            Some(refused),
        )))),
    });
    assert_eq!(app.model.config_refused.as_deref(), Some(refused));
    let _ = app.handle(AppEvent::Reply {
        tag: ReplyTag::Budget,
        result: Ok(drover_core::dispatch::Response::Budget(Box::new(budget(
            None,
        )))),
    });
    assert_eq!(app.model.config_refused, None);
}

#[test]
fn a_follow_up_box_opened_on_a_hibernated_run_wakes_it_ahead() {
    use drover_core::live_state::{LiveState, LiveStateKind};
    let asleep = |detail: &str| LiveState {
        state: LiveStateKind::Working,
        since: 0,
        bound: Some(1_000_000),
        detail: Some(detail.into()),
        cause: None,
        seq: 2,
    };
    let mut hibernated = summary("a", RunState::Idle);
    hibernated.head.live_state = Some(asleep(drover_core::dispatch::core::HIBERNATED_DETAIL));
    let mut warm = summary("bb", RunState::Idle);
    warm.head.live_state = Some(asleep("idle: waiting for a follow-up"));
    let mut app = app(vec![hibernated, warm]);
    app.model.select("a");
    assert_eq!(
        requests(&app.handle(key('f'))),
        [&Request::Wake { run_id: "a".into() }],
        "f on a hibernated run"
    );
    app.handle(AppEvent::Key(KeyEvent::new(
        KeyCode::Esc,
        KeyModifiers::NONE,
    )));
    let enter = AppEvent::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert_eq!(
        requests(&app.handle(enter)),
        [&Request::Wake { run_id: "a".into() }],
        "enter opens the same box"
    );
    app.handle(AppEvent::Key(KeyEvent::new(
        KeyCode::Esc,
        KeyModifiers::NONE,
    )));
    // A warm run has nothing to wake.
    app.model.select("bb");
    assert!(requests(&app.handle(key('f'))).is_empty());
}

// ---- the answer guard: a key answers only what was on screen long enough to read ----

/// Draws one frame at the model's clock, as the loop does; returns the attention line.
fn frame(app: &App) -> String {
    let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(
        app.model.width,
        app.model.height,
    ))
    .unwrap();
    terminal
        .draw(|frame| crate::render::draw(frame, app))
        .unwrap();
    let screen = terminal.backend().to_string();
    let lines: Vec<&str> = screen.lines().collect();
    lines[app.model.areas().attention.y as usize].to_string()
}

fn bash(id: &str, command: &str, at: i64) -> PendingView {
    PendingView {
        request_id: id.into(),
        kind: RequestKind::Permission,
        tool: "Bash".into(),
        ask: drover_core::providers::Ask::command(command, None, None),
        always: None,
        created_at: at,
        expires_at: at + 600_000,
        guard: None,
    }
}

fn answered(effects: &[Effect]) -> Vec<String> {
    requests(effects)
        .into_iter()
        .filter_map(|r| match r {
            Request::Respond { request_id, .. } => Some(request_id.clone()),
            _ => None,
        })
        .collect()
}

/// Two runs each asking to run a command, the older one's on the attention line, drawn
/// at `t0` and a second later (the user has had it in front of them).
fn two_asking(t0: i64) -> App {
    let mut a = summary("a", RunState::AwaitingPermission);
    a.pending = 1;
    let mut b = summary("bb", RunState::AwaitingPermission);
    b.pending = 1;
    let mut app = app(vec![a, b]);
    for (run, request) in [
        ("a", bash("req-a", "ls", 10)),
        ("bb", bash("req-b", "rm -rf target", 20)),
    ] {
        let _ = app.handle(AppEvent::Dispatch(DispatchEvent::PermissionRequested {
            run_id: run.into(),
            pending: request,
        }));
    }
    app.model.now = t0;
    assert!(
        frame(&app).contains("ls"),
        "the older request is on the line"
    );
    app.model.now = t0 + 1_000;
    frame(&app);
    app
}

/// At `at`: presses `y` and returns the requests it answered.
fn y_at(app: &mut App, at: i64) -> Vec<String> {
    app.model.now = at;
    answered(&app.handle(key('y')))
}

/// The answer to `request_id` came back: the line moves on, and a frame draws it.
fn answer_lands(app: &mut App, run_id: &str, request_id: &str) -> String {
    let _ = app.handle(AppEvent::Reply {
        tag: ReplyTag::Respond {
            run_id: run_id.into(),
            request_id: request_id.into(),
        },
        result: Ok(Response::Run(Box::new(summary("a", RunState::Running)))),
    });
    frame(app)
}

#[test]
fn y_y_150_ms_apart_answers_one_request_and_450_ms_apart_two() {
    let t0 = 1_000_000;
    // 150 ms apart: the second `y` finds the next run's request on the line since the
    // first one's answer landed, too briefly to have been read.
    let mut app = two_asking(t0);
    let first = t0 + 2_000;
    assert_eq!(y_at(&mut app, first), ["req-a"]);
    let line = answer_lands(&mut app, "a", "req-a");
    assert!(line.contains("rm -rf target"), "{line}");
    assert!(y_at(&mut app, first + 150).is_empty(), "nothing for req-b");
    let line = frame(&app);
    assert!(line.contains(crate::shown::JUST_CHANGED), "{line}");
    assert!(!line.contains("y allow"), "{line}");

    // 450 ms apart: it has been on screen long enough, and the second `y` answers it.
    let mut app = two_asking(t0);
    assert_eq!(y_at(&mut app, first), ["req-a"]);
    answer_lands(&mut app, "a", "req-a");
    assert_eq!(y_at(&mut app, first + 450), ["req-b"]);
}

#[test]
fn every_answering_key_waits_for_the_guard_and_a_request_whose_words_change_starts_again() {
    let t0 = 1_000_000;
    let mut app = two_asking(t0);
    // Its words change under the same id.
    app.model.run_mut("a").unwrap().pending[0] = bash("req-a", "ls ~/.ssh", 10);
    let changed_at = t0 + 2_000;
    app.model.now = changed_at;
    assert!(frame(&app).contains("ls ~/.ssh"));
    // y, d, a and a digit each do nothing to it for the guard's time.
    for k in ['y', 'd', 'a', '1'] {
        app.model.now = changed_at + 399;
        let effects = app.handle(key(k));
        assert!(answered(&effects).is_empty(), "{k}: {effects:?}");
        assert!(app.views.is_empty(), "{k} opened nothing");
    }
    assert_eq!(y_at(&mut app, changed_at + 400), ["req-a"]);
}

#[test]
fn the_prompt_answers_only_a_request_it_has_shown_long_enough() {
    let t0 = 1_000_000;
    let mut app = two_asking(t0);
    // `p` opens the line's request, long on screen: `y` answers it at once.
    app.model.now = t0 + 2_000;
    let _ = app.handle(key('p'));
    assert_eq!(answered(&app.handle(key('y'))), ["req-a"]);
    // The answer moves the prompt to the next request, which no frame showed yet.
    let _ = app.handle(AppEvent::Reply {
        tag: ReplyTag::Respond {
            run_id: "a".into(),
            request_id: "req-a".into(),
        },
        result: Ok(Response::Run(Box::new(summary("a", RunState::Running)))),
    });
    let on_top = |app: &App| {
        app.views
            .top_as::<crate::views::prompt::PromptView>()
            .map(|p| (p.request.request_id.clone(), p.held))
    };
    assert_eq!(on_top(&app), Some(("req-b".to_string(), false)));
    assert!(answered(&app.handle(key('y'))).is_empty(), "never drawn");
    assert_eq!(on_top(&app), Some(("req-b".to_string(), true)));
    frame(&app);
    app.model.now += 399;
    assert!(answered(&app.handle(key('d'))).is_empty(), "399 ms");
    app.model.now += 1;
    assert_eq!(answered(&app.handle(key('d'))), ["req-b"]);
}

/// An app whose `o` and `!` read `env` (as the dashboard's process had it).
fn app_with_env(runs: Vec<RunSummary>, env: &[(&str, &str)]) -> App {
    let mut options = AppOptions::new("/".into());
    options.open_env = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut app = App::new(options, ViewModel::new(0, 120, 40));
    let _ = app.handle(AppEvent::Reply {
        tag: ReplyTag::Runs,
        result: Ok(Response::Runs(runs)),
    });
    app
}

fn working_in(id: &str, dir: &str) -> RunSummary {
    let mut run = summary(id, RunState::Running);
    run.workspace = Some(Box::new(drover_core::workspace::WorkspaceView::shared(
        std::path::Path::new(dir),
    )));
    run
}

fn opened(effects: &[Effect]) -> Vec<super::event::OpenIn> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::OpenIn(open) => Some(open.clone()),
            _ => None,
        })
        .collect()
}

/// `o` opens the user's editor and `!` their shell in the selected run's directory: in
/// the foreground outside tmux (the runner lends it the terminal), in a tmux window named
/// after the run inside tmux; what comes back is said on the flash line.
#[test]
fn o_and_bang_open_the_users_editor_and_shell_where_the_run_works() {
    use drover_core::workspace::open::Program;
    let mut app = app_with_env(
        vec![working_in("a", "/home/me/app")],
        &[("EDITOR", "nvim -p"), ("SHELL", "/bin/zsh")],
    );
    let open = opened(&app.handle(key('o')));
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0].program, Program::Editor);
    assert_eq!(open[0].argv, ["nvim", "-p", "."]);
    assert_eq!(open[0].dir, std::path::PathBuf::from("/home/me/app"));
    assert!(open[0].foreground);
    let open = opened(&app.handle(key('!')));
    assert_eq!(open[0].argv, ["/bin/zsh"]);
    let _ = app.handle(AppEvent::Opened(Ok(
        "back from the shell in /home/me/app".into()
    )));
    let flash = app.model.flash.clone().expect("a flash");
    assert!(
        !flash.error && flash.text.contains("back from the shell"),
        "{flash:?}"
    );
    let _ = app.handle(AppEvent::Opened(Err("cannot start the shell".into())));
    assert!(app.model.flash.clone().is_some_and(|f| f.error));

    let mut app = app_with_env(
        vec![working_in("a", "/home/me/app")],
        &[("TMUX", "/tmp/tmux-0/default,1,0"), ("SHELL", "/bin/zsh")],
    );
    let open = opened(&app.handle(key('!')));
    assert_eq!(
        open[0].argv,
        [
            "tmux",
            "new-window",
            "-n",
            "a shell",
            "-c",
            "/home/me/app",
            "/bin/zsh"
        ]
    );
    assert!(!open[0].foreground, "the dashboard stays live beside it");
}

/// `T` takes the selected idle run over: `drover attach RUN` (this drover, on its data
/// directory) opened where a shell would be — in the foreground outside tmux, in a tmux
/// window inside it; a run that is not idle opens nothing and says why.
#[test]
fn t_takes_an_idle_run_over_through_drover_attach() {
    use drover_core::workspace::open::Program;
    let mut idle = working_in("a", "/home/me/app");
    idle.head.state = RunState::Idle;
    let mut options = AppOptions::new("/".into());
    options.drover_exe = "/usr/bin/drover".into();
    options.data_dir = "/home/me/.local/share/drover".into();
    let mut app = App::new(options, ViewModel::new(0, 120, 40));
    let _ = app.handle(AppEvent::Reply {
        tag: ReplyTag::Runs,
        result: Ok(Response::Runs(vec![idle.clone()])),
    });
    let open = opened(&app.handle(key('T')));
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0].program, Program::TakeOver);
    assert_eq!(
        open[0].argv,
        [
            "env",
            "DROVER_HOME=/home/me/.local/share/drover",
            "/usr/bin/drover",
            "attach",
            "a"
        ]
    );
    assert!(open[0].foreground);
    let flash = app.model.flash.clone().expect("a flash");
    assert!(
        flash.text.contains("taken over in sim's own interface"),
        "{flash:?}"
    );

    let mut app = app_with_env(vec![idle], &[("TMUX", "/tmp/tmux-0/default,1,0")]);
    let open = opened(&app.handle(key('T')));
    assert_eq!(
        open[0].argv[..4],
        ["tmux", "new-window", "-n", "a take-over"]
    );
    assert!(!open[0].foreground);

    let mut app = app_with_env(vec![working_in("b", "/home/me/app")], &[]);
    assert!(opened(&app.handle(key('T'))).is_empty());
    let flash = app.model.flash.clone().expect("a flash");
    assert!(
        flash.error && flash.text.contains("once it is idle"),
        "{flash:?}"
    );
}

/// A run with no directory yet (its worktree is being made) opens nothing and says so.
#[test]
fn o_on_a_run_without_a_directory_yet_says_so_and_opens_nothing() {
    let mut run = summary("a", RunState::Starting);
    run.workspace = Some(Box::new(drover_core::workspace::WorkspaceView::preparing()));
    let mut app = app_with_env(vec![run], &[]);
    assert!(opened(&app.handle(key('o'))).is_empty());
    let flash = app.model.flash.clone().expect("a flash");
    assert!(
        flash.error && flash.text.contains("no directory yet"),
        "{flash:?}"
    );
}

/// `u` asks for the selected run's branch to be brought up to date; a conflict opens the
/// follow-up that hands it to the run, filled in — sent only when the user presses enter.
#[test]
fn u_updates_the_branch_and_a_conflict_offers_the_follow_up_unsent() {
    use drover_core::workspace::{UpdateHow, UpdateView, WorkspaceActionView, WorkspaceView};
    let mut app = app(vec![summary("a", RunState::Idle)]);
    let effects = app.handle(key('u'));
    assert_eq!(
        requests(&effects),
        [&Request::Update {
            run_id: "a".into(),
            rebase: false
        }]
    );
    let follow_up = "The branch main moved on and conflicts with your branch in src/main.rs.";
    let answer = WorkspaceActionView {
        run_id: "a".into(),
        action: "update".into(),
        workspace: WorkspaceView::shared(std::path::Path::new("/w")),
        merge: None,
        update: Some(UpdateView {
            how: UpdateHow::Conflict,
            base: "main".into(),
            commit: "abc".into(),
            files: vec!["src/main.rs".into()],
            follow_up: Some(follow_up.into()),
        }),
    };
    let effects = app.handle(AppEvent::Reply {
        tag: ReplyTag::WorkspaceAction {
            run_id: "a".into(),
            action: "update".into(),
        },
        result: Ok(Response::Workspace(Box::new(answer))),
    });
    assert!(
        !requests(&effects)
            .iter()
            .any(|r| matches!(r, Request::FollowUp { .. })),
        "nothing is sent unasked"
    );
    let input = app
        .views
        .top_as::<crate::views::input::InputBox>()
        .expect("the follow-up box");
    assert_eq!(input.field.text, follow_up);
    let effects = app.handle(AppEvent::Key(KeyEvent::new(
        KeyCode::Enter,
        KeyModifiers::NONE,
    )));
    assert!(
        requests(&effects).contains(&&Request::FollowUp {
            run_id: "a".into(),
            text: follow_up.into()
        }),
        "enter sends it"
    );
}

/// `X` removes what holds nothing at once; the runs it kept for their unmerged work are
/// listed and asked about, and a yes removes them keeping their work on their branches.
#[test]
fn x_lists_the_runs_it_kept_for_their_work_and_asks_about_them() {
    use drover_core::dispatch::api::Removed;
    let mut app = app(vec![
        summary("a", RunState::Completed),
        summary("bb", RunState::Completed),
    ]);
    let effects = app.handle(key('X'));
    assert_eq!(
        requests(&effects),
        [&Request::Remove {
            run_id: None,
            finished: true,
            force: false
        }]
    );
    let _ = app.handle(AppEvent::Reply {
        tag: ReplyTag::Remove,
        result: Ok(Response::Removed(Removed {
            removed: vec!["a".into()],
            unmerged: vec!["bb".into()],
            kept: vec![],
        })),
    });
    let confirm = app
        .views
        .top_as::<crate::views::confirm::ConfirmView>()
        .expect("asked about the kept runs");
    assert!(confirm.message.contains("bb ("), "{}", confirm.message);
    let effects = app.handle(key('y'));
    assert_eq!(
        requests(&effects),
        [&Request::Remove {
            run_id: None,
            finished: true,
            force: true
        }]
    );
}
