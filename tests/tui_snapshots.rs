//! Snapshots of every dashboard view, drawn on ratatui's `TestBackend` from hand-built
//! view models (a fixed clock; run and request ids masked by filters).
//!
//! Update after a deliberate UI change with `INSTA_UPDATE=always cargo test --test
//! tui_snapshots` and review the `.snap` files like code.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod tui_common;

use crossterm::event::KeyCode;
use drover_core::DroverError;
use drover_core::ErrorCode;
use drover_core::dispatch::Request;
use drover_core::dispatch::Response;
use drover_core::dispatch::api::RunSummary;
use drover_core::dispatch::api::{SpendBy, SpendRow, SpendView};
use drover_core::live_state::LiveStateKind;
use drover_core::run_state::RunState;
use drover_tui::views::confirm::ConfirmView;
use drover_tui::views::diff::DiffScreen;
use drover_tui::views::form::DispatchForm;
use drover_tui::views::input::InputBox;
use drover_tui::views::prompt::{PromptState, PromptView};
use drover_tui::views::route::{RouteState, RouteView};
use drover_tui::{App, AppEvent, ReplyTag};
use ratatui::style::Color;
use tui_common::*;

fn snap(name: &str, app: &App) {
    let screen = render_app(app);
    insta::with_settings!({
        snapshot_path => "snapshots",
        prepend_module_to_snapshot => false,
        filters => vec![
            (r"\br[0-9][0-9a-z]{6,10}\b", "[run-id]"),
            (r"\breq_[0-9a-z]+\b", "[req-id]"),
        ],
    }, {
        insta::assert_snapshot!(name, screen);
    });
}

fn press(app: &mut App, events: impl IntoIterator<Item = AppEvent>) {
    for e in events {
        let _ = app.handle(e);
    }
}

fn typed(text: &str) -> Vec<AppEvent> {
    text.chars().map(char_key).collect()
}

#[test]
fn empty_dashboard() {
    let mut app = app_with(Vec::new(), 100, 24);
    app.model.budget = Some(budget(0.0, 0.0));
    snap("empty_dashboard", &app);
}

/// A config reload the owner refused stays on the footer until a good one.
#[test]
fn footer_shows_a_refused_config_reload() {
    let mut app = app_with(Vec::new(), 100, 24);
    app.model.budget = Some(budget(0.0, 0.0));
    app.model.apply(&drover_core::dispatch::DispatchEvent::Health {
        config_refused: Some(
            "config not reloaded: /home/dev/.config/drover/config.toml line 3: `limits.per_account` is 0 (the config in force is kept)".into(),
        ),
        ledger_unavailable: None,
    });
    snap("footer_config_refused", &app);
}

/// While the owner's ledger cannot write, the header says so, and why, where the budget
/// gauge was, until it writes again.
#[test]
fn header_shows_a_ledger_that_cannot_write() {
    let mut app = app_with(Vec::new(), 100, 24);
    app.model.budget = Some(budget(0.0, 0.0));
    app.model.apply(&drover_core::dispatch::DispatchEvent::Health {
        config_refused: None,
        ledger_unavailable: Some(
            "the disk holding /home/dev/.local/share/drover is full (database or disk is full): nothing was recorded; free space on it".into(),
        ),
    });
    snap("header_ledger_unavailable", &app);
    app.model
        .apply(&drover_core::dispatch::DispatchEvent::Health {
            config_refused: None,
            ledger_unavailable: None,
        });
    assert!(app.model.ledger_unavailable.is_none());
}

fn one_tray(name: &str, runs: Vec<RunSummary>) {
    let app = app_with(runs, 100, 12);
    snap(name, &app);
}

#[test]
fn each_tray_populated() {
    let mut input = summary(2, "Deploy the release to staging", RunState::Idle);
    input.needs_input = true;
    input.head.live_state = Some(live(
        LiveStateKind::Working,
        20,
        1_180,
        Some("needs your input: answer with a follow-up"),
    ));
    one_tray(
        "tray_needs_you",
        vec![
            summary(
                1,
                "Update the greeting in src/main.rs",
                RunState::AwaitingPermission,
            ),
            input,
            summary(
                3,
                "Pick a model for the design review",
                RunState::AwaitingRoute,
            ),
        ],
    );
    one_tray(
        "tray_running",
        vec![
            summary(1, "Refactor the twenty storage modules", RunState::Running),
            summary(2, "Start the benchmark run", RunState::Starting),
        ],
    );
    one_tray(
        "tray_idle",
        vec![summary(1, "Write the changelog for 0.4", RunState::Idle)],
    );
    let mut hibernated = summary(2, "Write the release notes", RunState::Idle);
    hibernated.head.live_state = Some(live(
        LiveStateKind::Working,
        300,
        900,
        Some("idle · hibernated"),
    ));
    let mut waking = summary(3, "Answer the review comments", RunState::Idle);
    waking.head.live_state = Some(live(LiveStateKind::Working, 1, 900, Some("idle · waking")));
    one_tray(
        "tray_idle_hibernated",
        vec![
            summary(1, "Write the changelog for 0.4", RunState::Idle),
            hibernated,
            waking,
        ],
    );
    one_tray(
        "tray_queued",
        vec![
            summary(1, "Port the CLI to the new config API", RunState::Queued),
            summary(2, "Add a health check endpoint", RunState::Queued),
        ],
    );
    one_tray(
        "tray_finished",
        vec![
            summary(1, "Check the README links", RunState::Completed),
            summary(2, "Bump the MSRV to 1.88", RunState::Failed),
            summary(3, "Try the new parser", RunState::Stopped),
        ],
    );
    // After a restart: the request shown again, and the run whose turn the restart cut
    // short — in Needs you, not Finished, its line in words.
    one_tray(
        "tray_needs_you_after_a_restart",
        vec![
            summary(
                1,
                "Update the greeting in src/main.rs",
                RunState::AwaitingPermission,
            ),
            summary(4, "Rename the crate", RunState::Interrupted),
            summary(5, "Check the README links", RunState::Completed),
        ],
    );
}

#[test]
fn sub_runs_are_indented_under_their_parent() {
    let parent = summary(1, "Split the migration into parts", RunState::Running);
    let mut first = summary(2, "Migrate the users table", RunState::Running);
    first.parent_run = Some(id(1));
    first.depth = 1;
    let mut grandchild = summary(3, "Backfill the new column", RunState::Running);
    grandchild.parent_run = Some(id(2));
    grandchild.depth = 2;
    let mut second = summary(4, "Migrate the orders table", RunState::Running);
    second.parent_run = Some(id(1));
    second.depth = 1;
    let other = summary(5, "Start the benchmark run", RunState::Running);
    one_tray(
        "tray_sub_runs",
        vec![parent, first, grandchild, second, other],
    );
}

#[test]
fn the_whole_dashboard_with_the_detail_pane() {
    snap("dashboard_120x36", &busy_app(120, 36));
}

#[test]
fn the_live_line_in_each_live_state() {
    let details = [
        (LiveStateKind::Admitted, None),
        (LiveStateKind::WaitingDeploy, Some("claude 2.1.0 → 2.1.1")),
        (
            LiveStateKind::WaitingRepository,
            Some("another run holds /home/dev/project"),
        ),
        (LiveStateKind::FallingBack, Some("using a fresh worktree")),
        (LiveStateKind::Preparing, Some("starting the provider")),
        (LiveStateKind::Working, Some("running a tool: Bash")),
        (
            LiveStateKind::WaitingProvider,
            Some("rate limited until 12:05"),
        ),
        (LiveStateKind::WrappingUp, Some("stopping the provider")),
    ];
    let mut runs = Vec::new();
    for (i, (state, detail)) in details.into_iter().enumerate() {
        let mut s = summary(
            i as u32 + 1,
            &format!("live state {}", state.as_str()),
            RunState::Running,
        );
        s.head.live_state = Some(live(state, 75 + i as i64, 600 - 60 * i as i64, detail));
        runs.push(s);
    }
    // Past its bound: the countdown turns into "overdue".
    let mut overdue = summary(9, "live state overdue", RunState::Running);
    overdue.head.live_state = Some(live(
        LiveStateKind::Working,
        700,
        -42,
        Some("running a tool: Bash"),
    ));
    runs.push(overdue);
    let mut ended = summary(10, "live state ended", RunState::Stopped);
    ended.head.live_state = Some(live(LiveStateKind::Ended, 0, 0, None));
    runs.push(ended);
    let app = app_with(runs, 120, 26);
    snap("live_line_each_state", &app);
}

/// A run taken over in its CLI's own interface says so on its line while the user is
/// there (docs/ARCHITECTURE.md §"Take-over").
#[test]
fn a_taken_over_run_says_where_it_is() {
    let mut taken = summary(1, "refactor the parser", RunState::Idle);
    taken.head.live_state = Some(live(
        LiveStateKind::Working,
        240,
        3_000,
        Some("taken over · in claude's own interface"),
    ));
    let app = app_with(vec![taken], 100, 12);
    snap("taken_over_run", &app);
}

/// A run whose CLI runs in a sandbox says so on its line, live or finished, beside its
/// change (docs/ARCHITECTURE.md §"The sandbox"); a run outside one says nothing.
#[test]
fn a_sandboxed_run_says_so_on_its_line() {
    let mut boxed = summary(1, "refactor the parser in a box", RunState::Running);
    boxed.head.live_state = Some(live(
        LiveStateKind::Working,
        90,
        600,
        Some("running a tool: Bash"),
    ));
    boxed.sandbox = true;
    let mut finished = summary(2, "boxed and done", RunState::Completed);
    finished.sandbox = true;
    let mut free = summary(3, "not in a box", RunState::Running);
    free.head.live_state = Some(live(LiveStateKind::Working, 30, 600, None));
    let app = app_with(vec![boxed, finished, free], 100, 14);
    snap("sandboxed_run", &app);
}

/// A run on a host whose connection dropped shows `waiting_host` with its glyph, the
/// host's name and the countdown to the next reconnect, in a turn or between turns
/// (docs/ARCHITECTURE.md §"Hosts"); a run on the same host still connected does not.
#[test]
fn a_run_waiting_for_its_host_says_so_with_the_next_try() {
    let mut in_turn = summary(1, "port the parser on the build box", RunState::Running);
    in_turn.head.live_state = Some(live(LiveStateKind::WaitingHost, 3, 4, Some("buildbox")));
    in_turn.head.host = Some("buildbox".into());
    let mut between = summary(2, "review the migration there", RunState::Idle);
    between.head.live_state = Some(live(LiveStateKind::WaitingHost, 40, 32, Some("buildbox")));
    between.head.host = Some("buildbox".into());
    let mut connected = summary(3, "still connected", RunState::Running);
    connected.head.live_state = Some(live(LiveStateKind::Working, 30, 600, None));
    connected.head.host = Some("buildbox".into());
    let app = app_with(vec![in_turn, between, connected], 100, 16);
    snap("waiting_host_run", &app);
}

#[test]
fn a_permission_prompt_with_a_short_input() {
    let mut app = busy_app(100, 30);
    press(&mut app, [char_key('p')]);
    assert!(app.views.top_as::<PromptView>().is_some());
    snap("permission_prompt_short", &app);
}

#[test]
fn a_permission_prompt_with_a_long_input_scrolls() {
    let mut app = busy_app(100, 30);
    let script: String = (1..=40)
        .map(|i| format!("cargo test -p storage-module-{i:02} -- --test-threads=1 --nocapture\n"))
        .collect();
    let request = bash_request(7, &script);
    app.views.push(PromptView::new(id(1), request));
    snap("permission_prompt_long_top", &app);
    press(&mut app, std::iter::repeat_n(char_key('j'), 12));
    snap("permission_prompt_long_scrolled", &app);
}

#[test]
fn a_question() {
    let mut app = busy_app(100, 30);
    app.views.push(PromptView::new(id(3), question_request(3)));
    snap("question", &app);
}

#[test]
fn a_request_that_went_away_says_so() {
    let mut app = busy_app(100, 30);
    look(&mut app);
    press(&mut app, [char_key('p'), char_key('y')]);
    // The dispatcher says the request is gone (answered from another terminal).
    let events = app.handle(AppEvent::Reply {
        tag: ReplyTag::Respond {
            run_id: id(1),
            request_id: "req_1".into(),
        },
        result: Err(DroverError::new(
            ErrorCode::PermissionAlreadyResolved,
            "request req_1 was already answered, withdrawn or timed out",
        )),
    });
    assert!(events.is_empty(), "nothing more is sent");
    let Some(p) = app.views.top_as::<PromptView>() else {
        panic!("the prompt stays to say so")
    };
    assert!(matches!(p.state, PromptState::Gone(_)));
    snap("permission_prompt_gone", &app);
}

#[test]
fn the_dispatch_form_with_an_error() {
    let mut app = busy_app(100, 30);
    press(&mut app, [char_key('n')]);
    press(&mut app, typed("Fix the login redirect loop"));
    for _ in 0..5 {
        press(&mut app, [key(KeyCode::Tab)]);
    }
    press(&mut app, (0..40).map(|_| key(KeyCode::Backspace)));
    press(&mut app, typed("/no/such/dir"));
    let effects = app.handle(key(KeyCode::Enter));
    assert_eq!(effects.len(), 1, "{effects:?}");
    let _ = app.handle(AppEvent::Reply {
        tag: ReplyTag::Dispatch,
        result: Err(DroverError::new(
            ErrorCode::CwdInvalid,
            "The working directory \"/no/such/dir\" does not exist; give an existing directory.",
        )),
    });
    snap("dispatch_form_error", &app);
}

#[test]
fn the_dispatch_form_as_it_opens() {
    let mut app = busy_app(100, 30);
    press(&mut app, [char_key('n')]);
    snap("dispatch_form", &app);
}

#[test]
fn the_dispatch_form_marks_a_provider_whose_cli_is_not_installed() {
    let mut options = options();
    options.missing_providers = vec!["claude-code".into(), "opencode".into()];
    options.default_provider = "codex".into();
    let mut app = App::new(options, busy_app(100, 30).model);
    press(&mut app, [char_key('n')]);
    let Some(form) = app.views.top_as::<DispatchForm>() else {
        panic!("the form is open")
    };
    assert_eq!(form.provider.value(), "codex", "the first one found");
    // Tab to the provider, then ← to claude-code: it is marked.
    press(&mut app, [key(KeyCode::Tab), key(KeyCode::Left)]);
    let Some(form) = app.views.top_as::<DispatchForm>() else {
        panic!("the form is open")
    };
    assert_eq!(form.provider.value(), "claude-code");
    snap("dispatch_form_provider_not_installed", &app);
}

#[test]
fn the_dispatch_form_offers_the_configured_hosts_and_sends_the_one_chosen() {
    let mut options = options();
    options.hosts = vec!["buildbox".into(), "gpu".into()];
    let mut app = App::new(options, busy_app(100, 32).model);
    press(&mut app, [char_key('n')]);
    press(&mut app, typed("Run the benchmarks"));
    // Task, provider, model, policy, budget, directory, then the host: → picks the first.
    press(&mut app, (0..6).map(|_| key(KeyCode::Tab)));
    press(&mut app, [key(KeyCode::Right)]);
    let effects = app.handle(key(KeyCode::Enter));
    let sent: Vec<_> = effects
        .iter()
        .filter_map(|e| match e {
            drover_tui::Effect::Request {
                request: Request::Dispatch { spec },
                ..
            } => Some(spec.host.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(sent, [Some("buildbox".to_string())], "{effects:?}");
    // The host's refusal is shown at the host field, the form left as it was.
    let _ = app.handle(AppEvent::Reply {
        tag: ReplyTag::Dispatch,
        result: Err(DroverError::new(
            ErrorCode::HostUnreachable,
            "Host buildbox does not answer over ssh; check it with drover doctor --host buildbox.",
        )),
    });
    snap("dispatch_form_host", &app);
    // Without hosts configured the field is not shown (the other form snapshots).
    let mut bare = busy_app(100, 30);
    press(&mut bare, [char_key('n')]);
    let Some(form) = bare.views.top_as::<DispatchForm>() else {
        panic!("the form is open")
    };
    assert!(
        !form
            .fields()
            .contains(&drover_tui::views::form::Field::Host)
    );
}

fn header_app(spent: f64, reserved: f64) -> App {
    let mut app = app_with(vec![summary(1, "a run", RunState::Running)], 120, 4);
    app.model.budget = Some(budget(spent, reserved));
    app
}

/// The colour of the first spent cell of the session gauge.
fn gauge_colour(app: &App) -> Option<Color> {
    let buf = render_buffer(app);
    (0..buf.area.width)
        .map(|x| &buf[(x, 1)])
        .find(|cell| cell.symbol() == "█")
        .and_then(|cell| cell.style().fg)
}

#[test]
fn the_budget_header_below_at_warning_and_at_cap() {
    let below = header_app(3.20, 4.00);
    snap("budget_below_warning", &below);
    assert_eq!(gauge_colour(&below), Some(Color::Green));
    let warning = header_app(9.75, 6.00);
    snap("budget_at_warning", &warning);
    assert_eq!(gauge_colour(&warning), Some(Color::Yellow));
    let cap = header_app(25.00, 0.0);
    snap("budget_at_cap", &cap);
    assert_eq!(gauge_colour(&cap), Some(Color::Red));
    // At 80 columns the words shorten so the level still shows.
    let mut narrow = header_app(9.75, 6.00);
    narrow.model.width = 80;
    snap("budget_at_warning_80", &narrow);
    let mut narrow = header_app(25.00, 0.0);
    narrow.model.width = 80;
    snap("budget_at_cap_80", &narrow);
}

#[test]
fn help() {
    let mut app = busy_app(100, 50);
    press(&mut app, [char_key('?')]);
    snap("help", &app);
}

#[test]
fn a_narrow_80x24_terminal() {
    snap("narrow_80x24", &busy_app(80, 24));
}

#[test]
fn the_follow_up_box_shows_the_runs_question() {
    let mut app = busy_app(100, 30);
    let mut view = view_of(&app.model.run(&id(3)).unwrap().summary.clone());
    view.last_result = Some(drover_core::dispatch::api::ResultView {
        status: Some("needs_input".into()),
        summary: Some("Two deploy targets match the task.".into()),
        question: Some("Should I deploy to staging-eu or staging-us?".into()),
        files: vec![],
        changes: vec![],
        follow_ups: vec![],
        json: None,
    });
    app.model.set_detail(view);
    app.model.select(&id(3));
    press(&mut app, [key(KeyCode::Enter)]);
    press(&mut app, typed("staging-eu"));
    snap("follow_up_with_question", &app);
}

#[test]
fn quitting_with_active_runs_asks_first() {
    // Only an in-process owner stops the runs when the dashboard goes.
    let mut opts = tui_common::options();
    opts.owner = drover_core::config::DashboardOwner::InProcess;
    let mut app = drover_tui::App::new(opts, busy_app(100, 30).model);
    let effects = app.handle(char_key('q'));
    assert!(effects.is_empty(), "nothing happens before the answer");
    snap("confirm_quit", &app);
    let effects = app.handle(char_key('y'));
    assert_eq!(effects, vec![drover_tui::Effect::Quit]);
}

#[test]
fn leaving_a_background_owners_dashboard_asks_nothing() {
    let mut app = busy_app(100, 30);
    let effects = app.handle(char_key('q'));
    assert_eq!(effects, vec![drover_tui::Effect::Quit]);
}

#[test]
fn the_header_says_when_drover_is_not_running() {
    let mut app = busy_app(100, 24);
    app.handle(drover_tui::AppEvent::OwnerGone);
    app.model.now += 12_000;
    snap("owner_gone", &app);
    app.handle(drover_tui::AppEvent::OwnerBack { resumed: true });
    assert!(app.model.owner_gone_since.is_none());
}

#[test]
fn the_filter_narrows_the_trays() {
    let mut app = busy_app(100, 24);
    press(&mut app, [char_key('/')]);
    press(&mut app, typed("readme"));
    assert!(app.views.top_as::<InputBox>().is_some());
    // The box is open: the trays are filtered as the user types.
    snap("filter_box", &app);
    press(&mut app, [key(KeyCode::Enter)]);
    assert!(
        app.views.is_empty(),
        "enter keeps the filter and closes the box"
    );
    snap("filtered", &app);
}

/// `/` also asks the ledger's search index (tasks, follow-ups, transcripts, results): a
/// run found there passes the filter — one not held comes in with the answer — and shows
/// the matching line, the match highlighted, as its second line.
#[test]
fn the_filter_finds_runs_by_the_search_index_and_shows_the_matching_line() {
    use drover_core::dispatch::Response;
    use drover_core::dispatch::api::{SearchHit, SearchSource, SearchView};
    use drover_tui::Effect;
    let mut app = busy_app(100, 24);
    press(&mut app, [char_key('/')]);
    let mut effects = Vec::new();
    for e in typed("staging-eu") {
        effects = app.handle(e);
    }
    // What the user typed is searched as a phrase, never read as the query syntax.
    assert!(
        effects.iter().any(|e| matches!(e, Effect::Request {
            tag: ReplyTag::FoundLines(needle),
            request: drover_core::dispatch::Request::Search { query, .. },
        } if needle == "staging-eu" && query == "\"staging-eu\"")),
        "{effects:?}"
    );
    press(&mut app, [key(KeyCode::Enter)]);
    let hit = |n: u32, source, line: &str, word: &str| {
        let start = line.find(word).unwrap();
        SearchHit {
            run_id: id(n),
            title: String::new(),
            state: RunState::Completed,
            at: NOW - 60_000,
            source,
            turn: None,
            seq: Some(4),
            line: line.into(),
            marks: vec![(start, start + word.len())],
        }
    };
    let old = summary(11, "Migrate the metrics database", RunState::Completed);
    let view = SearchView {
        hits: vec![
            hit(
                11,
                SearchSource::Tool,
                "tool Bash: kubectl --context staging-eu rollout status deploy/metrics",
                "staging-eu",
            ),
            hit(
                3,
                SearchSource::Text,
                "…the release is live on staging-eu; waiting for your go to promote it",
                "staging-eu",
            ),
        ],
        runs: vec![old],
    };
    press(
        &mut app,
        [AppEvent::Reply {
            tag: ReplyTag::FoundLines("staging-eu".into()),
            result: Ok(Response::Search(Box::new(view))),
        }],
    );
    snap("filter_found_in_the_search_index", &app);
}

/// Two views on the stack: each draws over what is under it, bottom first; the top one
/// takes the keys and says the footer's hints; closing it gives both back to the one
/// under it.
#[test]
fn a_view_stack_draws_bottom_first_and_the_top_one_takes_the_keys() {
    let mut app = busy_app(100, 30);
    app.views.push(PromptView::new(id(3), question_request(3)));
    app.views.push(ConfirmView {
        what: drover_tui::views::confirm::Confirmable::KillAll,
        message: "Stop all 4 active runs? Their pending requests are denied.".into(),
    });
    snap("view_stack_confirm_over_question", &app);
    let screen = render_app(&app);
    let footer = screen.lines().last().unwrap_or_default();
    assert!(
        !footer.contains("choose"),
        "the confirmation's hints: {footer}"
    );
    // A number key is the confirmation's (it means nothing there), not the question's.
    let effects = app.handle(char_key('1'));
    assert!(effects.is_empty(), "{effects:?}");
    assert_eq!(app.views.len(), 2);
    // n closes the confirmation only; the question is on top again, with its hints.
    let effects = app.handle(char_key('n'));
    assert!(effects.is_empty(), "{effects:?}");
    assert_eq!(app.views.len(), 1);
    assert!(app.views.top_as::<PromptView>().is_some());
    let screen = render_app(&app);
    let footer = screen.lines().last().unwrap_or_default();
    assert!(
        footer.contains("1-9 choose"),
        "the question's hints: {footer}"
    );
}

#[test]
fn a_route_card() {
    let mut app = held_app(100, 30);
    press(&mut app, [key(KeyCode::Enter)]);
    assert!(app.views.top_as::<RouteView>().is_some());
    // The run counts as held, and as one that needs you (its tray).
    assert_eq!(app.model.counts().held, 1);
    assert_eq!(app.model.counts().needs_you, 1);
    snap("route_card", &app);
}

#[test]
fn a_route_card_with_a_refused_pick() {
    let mut app = held_app(100, 30);
    press(&mut app, [key(KeyCode::Enter), char_key('r')]);
    let effects = app.handle(char_key('2'));
    assert!(
        effects.iter().any(|e| matches!(
            e,
            drover_tui::Effect::Request {
                request: drover_core::dispatch::Request::Route {
                    option: 2,
                    remember: true,
                    ..
                },
                ..
            }
        )),
        "{effects:?}"
    );
    let _ = app.handle(AppEvent::Reply {
        tag: ReplyTag::Route(id(3)),
        result: Err(DroverError::new(
            ErrorCode::RoutePickRefused,
            "option 2 (claude-opus-4-1) would need $12.00 but only $4.20 is left in the session",
        )),
    });
    let Some(r) = app.views.top_as::<RouteView>() else {
        panic!("the card stays open")
    };
    assert!(matches!(r.state, RouteState::Refused(_)));
    snap("route_card_refused", &app);
}

/// A dashboard with a finished worktree run (selected) and a running one, each with a
/// change.
fn worktree_app(width: u16, height: u16) -> App {
    let mut done = summary(
        1,
        "Put a cache in front of the greeting",
        RunState::Completed,
    );
    done.workspace = Some(Box::new(worktree(1, Some((3, 21, 3)))));
    let mut running = summary(2, "Refactor the twenty storage modules", RunState::Running);
    running.workspace = Some(Box::new(worktree(2, Some((12, 340, 128)))));
    let shared = summary(3, "Check the README links", RunState::Idle);
    let mut app = app_with(vec![done.clone(), running, shared], width, height);
    app.model.set_detail(view_of(&done));
    app.model.select(&id(1));
    app
}

/// The diff view of run 1 opened with `D`, its file list and first file's patch in.
fn diff_app(width: u16, height: u16) -> App {
    let mut app = worktree_app(width, height);
    let effects = app.handle(char_key('D'));
    assert!(
        matches!(
            &effects[..],
            [drover_tui::Effect::Request {
                request: drover_core::dispatch::Request::Diff {
                    stat: true,
                    file: None,
                    ..
                },
                ..
            }]
        ),
        "{effects:?}"
    );
    let effects = app.handle(AppEvent::Reply {
        tag: ReplyTag::Diff {
            run_id: id(1),
            file: None,
        },
        result: Ok(drover_core::dispatch::Response::Diff(Box::new(diff_files(
            1,
        )))),
    });
    assert!(
        matches!(
            &effects[..],
            [drover_tui::Effect::Request {
                request: drover_core::dispatch::Request::Diff { file: Some(f), stat: false, .. },
                ..
            }] if f == "src/cache.rs"
        ),
        "the first file's patch is asked for: {effects:?}"
    );
    app.handle(AppEvent::Reply {
        tag: ReplyTag::Diff {
            run_id: id(1),
            file: Some("src/cache.rs".into()),
        },
        result: Ok(drover_core::dispatch::Response::Diff(Box::new(diff_patch(
            1,
            "src/cache.rs",
        )))),
    });
    app
}

#[test]
fn worktree_runs_show_their_change_on_the_run_line_and_in_the_detail() {
    snap("worktree_runs", &worktree_app(120, 16));
    snap("worktree_runs_80x24", &worktree_app(80, 24));
}

/// A finished worktree run with an open pull request (selected: the detail shows its
/// URL) and a running one whose pull request was merged.
fn pr_app(width: u16, height: u16) -> App {
    use drover_core::workspace::forge::{Forge, PrChecks, PrState, PrView};
    let pr = |number: u64, state: PrState, checks: Option<PrChecks>| PrView {
        forge: Forge::Github,
        number,
        url: format!("https://github.com/dev/project/pull/{number}"),
        state,
        draft: false,
        checks,
        updated_at: 0,
    };
    let mut done = summary(
        1,
        "Put a cache in front of the greeting",
        RunState::Completed,
    );
    let mut ws = worktree(1, Some((3, 21, 3)));
    ws.pr = Some(pr(
        7,
        PrState::Open,
        Some(PrChecks {
            passed: 3,
            failed: 0,
            total: 4,
        }),
    ));
    done.workspace = Some(Box::new(ws));
    let mut running = summary(2, "Refactor the twenty storage modules", RunState::Idle);
    let mut ws = worktree(2, Some((12, 340, 128)));
    ws.pr = Some(pr(5, PrState::Merged, None));
    running.workspace = Some(Box::new(ws));
    let mut app = app_with(vec![done.clone(), running], width, height);
    app.model.set_detail(view_of(&done));
    app.model.select(&id(1));
    app
}

#[test]
fn a_run_with_a_pull_request_shows_it_on_its_line_and_its_url_in_the_detail() {
    snap("pr_runs", &pr_app(120, 16));
    snap("pr_runs_wide", &pr_app(160, 16));
}

#[test]
fn p_pushes_the_selected_worktree_runs_branch_and_a_refused_push_offers_force_with_lease() {
    let mut app = worktree_app(120, 16);
    // No pull request yet: its title box first, enter pushes.
    assert!(app.handle(char_key('P')).is_empty());
    let effects = app.handle(key(KeyCode::Enter));
    assert!(
        matches!(
            &effects[..],
            [drover_tui::Effect::Request {
                tag: ReplyTag::Pr(run),
                request: drover_core::dispatch::Request::Pr {
                    run_id,
                    force_with_lease: false,
                    refresh: false,
                    ..
                },
            }] if run_id == &id(1) && run == &id(1)
        ),
        "{effects:?}"
    );
    // The remote's branch moved on: a confirmation, whose yes pushes with the lease.
    app.handle(AppEvent::Reply {
        tag: ReplyTag::Pr(id(1)),
        result: Err(DroverError::new(
            ErrorCode::PushRefused,
            "`git push -u origin drover/x` was refused: ! [rejected] (fetch first); the remote's branch has commits the run's branch lacks: `--force-with-lease` replaces them",
        )),
    });
    assert!(app.views.top_as::<ConfirmView>().is_some(), "asks first");
    let effects = app.handle(char_key('y'));
    assert!(
        matches!(
            &effects[..],
            [drover_tui::Effect::Request {
                request: drover_core::dispatch::Request::Pr {
                    force_with_lease: true,
                    ..
                },
                ..
            }]
        ),
        "{effects:?}"
    );
    // A shared run has no branch: nothing is sent.
    app.model.select(&id(3));
    assert!(app.handle(char_key('P')).is_empty());
}

#[test]
fn the_diff_view_lists_files_and_shows_the_selected_ones_diff() {
    let app = diff_app(100, 30);
    assert!(app.views.top_as::<DiffScreen>().is_some());
    snap("diff_view", &app);
    // Added lines are green, removed red, hunk headers cyan: the theme's colours.
    let mut app = app;
    press(&mut app, [key(KeyCode::Tab)]);
    app.handle(AppEvent::Reply {
        tag: ReplyTag::Diff {
            run_id: id(1),
            file: Some("src/main.rs".into()),
        },
        result: Ok(drover_core::dispatch::Response::Diff(Box::new(diff_patch(
            1,
            "src/main.rs",
        )))),
    });
    snap("diff_view_second_file", &app);
    let buf = render_buffer(&app);
    let colour_of = |text: &str| -> Option<Color> {
        (0..buf.area.height).find_map(|y| {
            let row: String = (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect();
            let at = row.find(text)?;
            let x = row[..at].chars().count() as u16;
            buf[(x, y)].style().fg
        })
    };
    assert_eq!(colour_of("+mod cache;"), Some(Color::Green));
    assert_eq!(colour_of("-    println!(\"hello\");"), Some(Color::Red));
    assert_eq!(colour_of("@@ -1,3 +1,4 @@"), Some(Color::Cyan));
}

#[test]
fn the_diff_view_is_readable_at_80x24_and_scrolls() {
    let mut app = diff_app(80, 24);
    snap("diff_view_80x24", &app);
    press(&mut app, [key(KeyCode::PageDown), key(KeyCode::Down)]);
    snap("diff_view_80x24_scrolled", &app);
}

#[test]
fn discarding_from_the_diff_view_asks_first() {
    let mut app = diff_app(100, 30);
    let effects = app.handle(char_key('x'));
    assert!(effects.is_empty(), "nothing is sent before the answer");
    assert!(app.views.top_as::<ConfirmView>().is_some());
    snap("diff_discard_confirm", &app);
    let effects = app.handle(char_key('y'));
    assert!(
        matches!(
            &effects[..],
            [drover_tui::Effect::Request {
                request: drover_core::dispatch::Request::Discard { run_id },
                ..
            }] if *run_id == id(1)
        ),
        "{effects:?}"
    );
}

/// `r` in the diff view reads the diff again and, for a run with a pull request, the pull
/// request's state too (`gh pr view`, as the timer does); a run with none reads only the
/// diff (docs/ARCHITECTURE.md §"Workspaces").
#[test]
fn r_in_the_diff_view_reads_the_pull_request_again_when_the_run_has_one() {
    use drover_core::dispatch::Request;
    let mut app = diff_app(100, 30);
    let effects = app.handle(char_key('r'));
    assert!(
        matches!(
            &effects[..],
            [drover_tui::Effect::Request {
                request: Request::Diff {
                    file: None,
                    stat: true,
                    ..
                },
                ..
            }]
        ),
        "no pull request: the diff only: {effects:?}"
    );
    let mut app = pr_app(120, 30);
    app.handle(char_key('D'));
    app.handle(AppEvent::Reply {
        tag: ReplyTag::Diff {
            run_id: id(1),
            file: None,
        },
        result: Ok(drover_core::dispatch::Response::Diff(Box::new(diff_files(
            1,
        )))),
    });
    app.handle(AppEvent::Reply {
        tag: ReplyTag::Diff {
            run_id: id(1),
            file: Some("src/cache.rs".into()),
        },
        result: Ok(drover_core::dispatch::Response::Diff(Box::new(diff_patch(
            1,
            "src/cache.rs",
        )))),
    });
    let effects = app.handle(char_key('r'));
    assert!(
        matches!(
            &effects[..],
            [
                drover_tui::Effect::Request {
                    request: Request::Diff { file: None, stat: true, .. },
                    ..
                },
                drover_tui::Effect::Request {
                    tag: ReplyTag::Pr(tag),
                    request: Request::Pr { run_id, refresh: true, force_with_lease: false, .. },
                },
            ] if run_id == &id(1) && tag == &id(1)
        ),
        "the diff and the pull request: {effects:?}"
    );
}

#[test]
fn a_refused_merge_is_shown_in_the_diff_view() {
    let mut app = diff_app(100, 30);
    let effects = app.handle(char_key('m'));
    assert!(
        matches!(
            &effects[..],
            [drover_tui::Effect::Request {
                request: drover_core::dispatch::Request::Merge {
                    squash: false,
                    message: None,
                    ..
                },
                ..
            }]
        ),
        "{effects:?}"
    );
    snap("diff_merging", &app);
    assert!(
        app.handle(char_key('m')).is_empty(),
        "nothing more while a merge is on its way"
    );
    app.handle(AppEvent::Reply {
        tag: ReplyTag::WorkspaceAction {
            run_id: id(1),
            action: "merge".into(),
        },
        result: Err(DroverError::new(
            ErrorCode::MergeConflict,
            "drover/r1-add-a-cache conflicts with main in src/main.rs; nothing was changed",
        )),
    });
    snap("diff_merge_refused", &app);
}

#[test]
fn removing_a_run_with_unmerged_work_asks_first() {
    let mut app = worktree_app(100, 24);
    let effects = app.handle(char_key('x'));
    assert!(effects.is_empty());
    snap("remove_unmerged_confirm", &app);
    let effects = app.handle(char_key('y'));
    assert!(
        matches!(
            &effects[..],
            [drover_tui::Effect::Request {
                request: drover_core::dispatch::Request::Remove { force: true, .. },
                ..
            }]
        ),
        "{effects:?}"
    );
}

#[test]
fn a_run_whose_events_retention_pruned_says_so_in_its_detail() {
    let mut run = summary(1, "An old task from last year", RunState::Completed);
    run.head.finished_at = Some(run.head.created_at + 60_000);
    let mut app = app_with(vec![run.clone()], 120, 36);
    let mut view = view_of(&run);
    let note = drover_core::dispatch::projections::pruned_note();
    view.notes.push(drover_core::dispatch::api::NoteView {
        at: run.head.created_at + 90_000,
        text: note.clone(),
    });
    app.model.set_detail(view);
    app.model
        .set_transcript(&run.head.run_id, vec![format!("[{note}]")], None);
    snap("pruned_run_detail", &app);
}

// ---- the attention line ----

/// The attention line (above the footer, which a long message makes taller).
fn attention_line(app: &App) -> String {
    let screen = render_app(app);
    let lines: Vec<&str> = screen.lines().collect();
    lines[app.model.areas().attention.y as usize].to_string()
}

fn respond_of(effects: &[drover_tui::Effect]) -> Vec<(String, String, PermissionAnswer)> {
    effects
        .iter()
        .filter_map(|e| match e {
            drover_tui::Effect::Request {
                request:
                    drover_core::dispatch::Request::Respond {
                        run_id,
                        request_id,
                        answer,
                    },
                ..
            } => Some((run_id.clone(), request_id.clone(), answer.clone())),
            _ => None,
        })
        .collect()
}

use drover_core::providers::PermissionAnswer;

#[test]
fn the_attention_line_shows_the_oldest_permission_and_y_allows_exactly_it() {
    let mut app = busy_app(100, 24);
    // A younger request of another run: the line keeps the oldest.
    let mut younger = bash_request(2, "rm -rf target");
    younger.created_at = NOW - 2_000;
    app.model
        .apply(&drover_core::dispatch::DispatchEvent::PermissionRequested {
            run_id: id(4),
            pending: younger,
        });
    snap("attention_permission", &app);
    let line = attention_line(&app);
    assert!(line.contains("cargo test --workspace"), "{line}");
    assert!(line.contains("+1 waiting"), "{line}");
    look(&mut app);
    let effects = app.handle(char_key('y'));
    assert_eq!(
        respond_of(&effects),
        [(
            id(1),
            "req_1".to_string(),
            PermissionAnswer::Allow { always: false }
        )]
    );
    // A second press while the answer is on its way sends nothing more.
    assert!(respond_of(&app.handle(char_key('y'))).is_empty());
}

#[test]
fn a_key_acts_on_the_request_drawn_never_on_one_that_took_its_place() {
    let mut app = busy_app(100, 24);
    let mut younger = bash_request(2, "rm -rf target");
    younger.created_at = NOW - 2_000;
    app.model
        .apply(&drover_core::dispatch::DispatchEvent::PermissionRequested {
            run_id: id(4),
            pending: younger,
        });
    look(&mut app);
    // The shown request is answered elsewhere before the next frame is drawn.
    let _ = app.handle(AppEvent::Dispatch(
        drover_core::dispatch::DispatchEvent::PermissionResolved {
            run_id: id(1),
            request_id: "req_1".into(),
            how: "allow (cli)".into(),
        },
    ));
    let effects = app.handle(char_key('y'));
    assert!(respond_of(&effects).is_empty(), "{effects:?}");
    let flash = app.model.flash.clone().expect("told why");
    assert!(flash.text.contains("settled meanwhile"), "{}", flash.text);
    // Once drawn, the younger request is the one on the line, and `d` denies it once it
    // has been on screen long enough to read.
    assert!(attention_line(&app).contains("rm -rf target"));
    assert!(
        respond_of(&app.handle(char_key('d'))).is_empty(),
        "just drawn"
    );
    assert!(attention_line(&app).contains("just changed — look again"));
    look(&mut app);
    let effects = app.handle(char_key('d'));
    assert_eq!(
        respond_of(&effects),
        [(
            id(4),
            "req_2".to_string(),
            PermissionAnswer::Deny { message: None }
        )]
    );
}

/// A key that answers, pressed before its request has been on screen long enough to
/// read (the answer guard): nothing is sent, and the line — or the prompt — says why.
#[test]
fn a_key_too_soon_sends_nothing_and_says_just_changed() {
    let mut app = busy_app(100, 24);
    render_app(&app);
    assert!(respond_of(&app.handle(char_key('y'))).is_empty());
    snap("attention_just_changed", &app);
    assert!(attention_line(&app).contains("just changed — look again"));
    // Any other key takes the note away.
    let _ = app.handle(char_key('j'));
    assert!(attention_line(&app).contains("y allow"));

    let mut app = busy_app(100, 30);
    look(&mut app);
    app.views
        .push(PromptView::new(id(4), bash_request(2, "rm -rf target")));
    assert!(respond_of(&app.handle(char_key('y'))).is_empty());
    snap("permission_prompt_just_changed", &app);
    look(&mut app);
    assert_eq!(respond_of(&app.handle(char_key('y'))).len(), 1);
}

#[test]
fn a_on_the_attention_line_opens_the_rule_chooser_for_the_request_drawn() {
    let mut app = busy_app(100, 24);
    look(&mut app);
    let effects = app.handle(char_key('a'));
    assert!(
        respond_of(&effects).is_empty(),
        "a answers nothing by itself"
    );
    match app.views.top_as::<PromptView>() {
        Some(view) => {
            assert_eq!(view.request.request_id, "req_1");
            assert!(
                matches!(view.mode, drover_tui::views::prompt::PromptMode::Rule(_)),
                "the chooser is open"
            );
        }
        None => panic!(
            "expected the prompt with its chooser, got {:?}",
            app.views.top()
        ),
    }
}

#[test]
fn a_flagged_request_on_the_attention_line_is_never_allowed_by_one_key() {
    let mut app = busy_app(100, 24);
    let _ = app.handle(AppEvent::Dispatch(
        drover_core::dispatch::DispatchEvent::PermissionResolved {
            run_id: id(1),
            request_id: "req_1".into(),
            how: "allow (cli)".into(),
        },
    ));
    let mut flagged = bash_request(2, "rm -rf /home/me/project");
    flagged.guard = Some("a recursive delete outside the workspace".into());
    app.model
        .apply(&drover_core::dispatch::DispatchEvent::PermissionRequested {
            run_id: id(4),
            pending: flagged,
        });
    let line = attention_line(&app);
    assert!(line.contains("flagged: a recursiv"), "{line}");
    snap("attention_flagged", &app);
    let effects = app.handle(char_key('y'));
    assert!(respond_of(&effects).is_empty(), "{effects:?}");
    match app.views.top_as::<PromptView>() {
        Some(view) => {
            assert_eq!(view.request.request_id, "req_2");
            assert!(view.flagged().is_some());
        }
        None => panic!(
            "expected the flagged request's prompt, got {:?}",
            app.views.top()
        ),
    }
}

fn question_app() -> App {
    let mut asking = summary(
        3,
        "Add a cache to the lookups",
        RunState::AwaitingPermission,
    );
    asking.pending = 1;
    let mut app = app_with(
        vec![
            asking,
            summary(4, "Refactor the storage modules", RunState::Running),
        ],
        100,
        16,
    );
    app.model
        .apply(&drover_core::dispatch::DispatchEvent::PermissionRequested {
            run_id: id(3),
            pending: question_request(3),
        });
    app
}

#[test]
fn the_attention_line_shows_a_question_with_its_options_and_a_digit_answers_it() {
    let mut app = question_app();
    snap("attention_question", &app);
    let line = attention_line(&app);
    assert!(
        line.contains("1 SQLite") && line.contains("2 Postgres"),
        "{line}"
    );
    look(&mut app);
    // `y` is not an answer to a question: it says what is.
    let effects = app.handle(char_key('y'));
    assert!(respond_of(&effects).is_empty());
    let flash = app.model.flash.clone().expect("told");
    assert!(flash.text.contains("press 1–2"), "{}", flash.text);
    // A number that is not an option sends nothing.
    assert!(respond_of(&app.handle(char_key('7'))).is_empty());
    let effects = app.handle(char_key('2'));
    let answers = std::collections::BTreeMap::from([(
        "Which database should the cache use?".to_string(),
        "Postgres".to_string(),
    )]);
    assert_eq!(
        respond_of(&effects),
        [(
            id(3),
            "req_3".to_string(),
            PermissionAnswer::Answer { answers }
        )]
    );
}

#[test]
fn p_opens_the_request_on_the_attention_line_in_full() {
    let mut app = question_app();
    render_app(&app);
    let _ = app.handle(char_key('p'));
    let Some(p) = app.views.top_as::<PromptView>() else {
        panic!("the prompt opens");
    };
    assert_eq!(p.request.request_id, "req_3");
}

#[test]
fn the_attention_line_when_nothing_waits() {
    let app = app_with(
        vec![
            summary(4, "Refactor the storage modules", RunState::Running),
            summary(8, "Check the README links", RunState::Completed),
        ],
        100,
        12,
    );
    snap("attention_empty", &app);
    assert!(attention_line(&app).contains("nothing waits for you"));
}

#[test]
fn the_header_counts_are_the_trays_counts() {
    let app = busy_app(100, 24);
    let counts = app.model.counts();
    for row in app.model.rows() {
        if let drover_tui::model::Row::Header(tray, n) = row {
            let counted = match tray {
                drover_tui::model::Tray::NeedsYou => counts.needs_you,
                drover_tui::model::Tray::Running => counts.running,
                drover_tui::model::Tray::Idle => counts.idle,
                drover_tui::model::Tray::Queued => counts.queued,
                drover_tui::model::Tray::Finished => continue,
            };
            assert_eq!(counted, *n, "{tray:?}");
        }
    }
    let screen = render_app(&app);
    let header = screen.lines().next().unwrap();
    assert!(
        header.contains("2 need you · 2 running · 1 idle · 1 queued"),
        "{header}"
    );
}

#[test]
fn the_forms_budget_says_the_default_in_force_and_esc_clears_a_filter() {
    let mut options = options();
    options.default_budget_usd = 2.0;
    let mut app = App::new(options, drover_tui::ViewModel::new(NOW, 100, 30));
    press(&mut app, [char_key('n')]);
    let screen = render_app(&app);
    assert!(screen.contains("default ($2.00)"), "{screen}");
    press(&mut app, [key(KeyCode::Esc)]);
    app.model.set_filter("readme".into());
    press(&mut app, [key(KeyCode::Esc)]);
    assert!(app.model.filter.is_empty(), "esc clears the filter");
}

#[test]
fn the_terminal_title_counts_what_needs_you() {
    assert_eq!(busy_app(100, 24).title(), "drover · 2 need you");
    let app = app_with(vec![summary(4, "a run", RunState::Running)], 100, 24);
    assert_eq!(app.title(), "drover");
}

#[test]
fn the_dispatch_form_picks_a_model_from_the_catalog() {
    let mut app = busy_app(100, 34);
    press(&mut app, [char_key('n')]);
    press(&mut app, typed("Fix the login redirect loop"));
    // Provider (sim, the first offered), then the model field.
    press(&mut app, [key(KeyCode::Tab), key(KeyCode::Tab)]);
    // provider default → auto → the sim's first model.
    press(&mut app, [key(KeyCode::Right), key(KeyCode::Right)]);
    let Some(form) = app.views.top_as::<DispatchForm>() else {
        panic!("the form is open")
    };
    assert_eq!(form.model.text, "sim-standard");
    snap("dispatch_form_model_picker", &app);
    let screen = render_app(&app);
    assert!(screen.contains("$3/$15 per Mtok"), "{screen}");
    assert!(screen.contains("auto — routed"), "{screen}");
    press(&mut app, [key(KeyCode::Left)]);
    let Some(form) = app.views.top_as::<DispatchForm>() else {
        unreachable!()
    };
    assert_eq!(form.model.text, "auto");
}

#[test]
fn a_refusal_in_the_form_is_shown_in_full_wrapped() {
    let mut app = busy_app(100, 34);
    press(&mut app, [char_key('n')]);
    press(&mut app, typed("Fix the login redirect loop"));
    press(&mut app, [key(KeyCode::Tab), key(KeyCode::Tab)]);
    press(&mut app, typed("gpt-nine"));
    let _ = app.handle(key(KeyCode::Enter));
    let message = "provider sim has no model \"gpt-nine\" in the catalog; name a model from \
                   `drover models --provider sim` (sim-standard, sim-small, sim-frontier, \
                   sim-free, sim-unpriced), or leave the field blank for its default";
    let _ = app.handle(AppEvent::Reply {
        tag: ReplyTag::Dispatch,
        result: Err(DroverError::new(ErrorCode::ModelUnknown, message)),
    });
    snap("dispatch_form_refusal_wrapped", &app);
    let screen = render_app(&app);
    assert!(
        screen.contains("sim-unpriced), or leave the field blank for its"),
        "the end of it: {screen}"
    );
}

/// The requests a batch of effects sends.
fn requests(effects: &[drover_tui::Effect]) -> Vec<drover_core::dispatch::Request> {
    effects
        .iter()
        .filter_map(|e| match e {
            drover_tui::Effect::Request { request, .. } => Some(request.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_rule_chooser_proposes_a_pattern_and_saves_it_bound_to_the_request() {
    use drover_core::dispatch::Request;
    use drover_core::rules::{RuleDecision, RuleKind, Scope};
    let mut app = busy_app(100, 30);
    let request = bash_request(1, "cargo test --lib foo");
    app.views.push(PromptView::new(id(1), request));
    look(&mut app);
    press(&mut app, [char_key('a')]);
    snap("permission_prompt_rule_chooser", &app);
    // tab: the next scope; the pattern is edited; enter saves it and answers req_1.
    press(&mut app, [key(KeyCode::Tab)]);
    press(&mut app, std::iter::repeat_n(key(KeyCode::Backspace), 1));
    press(&mut app, typed("--lib *"));
    snap("permission_prompt_rule_chooser_edited", &app);
    let effects = app.handle(key(KeyCode::Enter));
    let sent: [Request; 1] = requests(&effects).try_into().expect("one request");
    let [Request::RuleAdd { rule, answer }] = sent else {
        panic!("a rule_add");
    };
    assert_eq!(rule.scope, Scope::Everywhere);
    assert_eq!(rule.kind, RuleKind::Command);
    assert_eq!(rule.decision, RuleDecision::Allow);
    assert_eq!(rule.pattern, "cargo test --lib *");
    let answer = answer.expect("bound to the request on screen");
    assert_eq!(
        (answer.run_id, answer.request_id),
        (id(1), "req_1".to_string())
    );
}

#[test]
fn a_flagged_request_has_a_red_banner_and_a_confirming_key() {
    use drover_core::dispatch::Request;
    use drover_core::providers::PermissionAnswer;
    let mut app = busy_app(100, 30);
    let mut request = bash_request(1, "rm -rf /tmp/canary");
    request.guard = Some("a recursive delete of `/tmp/canary`, outside the workspace".into());
    app.views.push(PromptView::new(id(1), request));
    snap("permission_prompt_flagged", &app);
    // The banner is red.
    let buf = render_buffer(&app);
    let banner = (0..buf.area.height)
        .flat_map(|y| (0..buf.area.width).map(move |x| (x, y)))
        .find(|&(x, y)| buf[(x, y)].symbol() == "⚠")
        .expect("the banner is drawn");
    assert_eq!(buf[banner].style().fg, Some(Color::Red));
    look(&mut app);
    // `a` makes no rule of it; `y` asks to confirm; only the second `y` allows it, once.
    assert!(requests(&app.handle(char_key('a'))).is_empty());
    assert!(requests(&app.handle(char_key('y'))).is_empty());
    snap("permission_prompt_flagged_confirm", &app);
    // Another key takes the first press back.
    assert!(requests(&app.handle(char_key('j'))).is_empty());
    assert!(requests(&app.handle(char_key('y'))).is_empty());
    let sent = requests(&app.handle(char_key('y')));
    assert_eq!(
        sent,
        [Request::Respond {
            run_id: id(1),
            request_id: "req_1".into(),
            answer: PermissionAnswer::Allow { always: false },
        }]
    );
}

// ---- smaller breaks: each says what it means, in full, in its own column ----

/// The lines of a screen, as drawn.
fn screen_lines(app: &App) -> Vec<String> {
    render_app(app)
        .lines()
        .map(|l| l.trim_matches('"').to_string())
        .collect()
}

/// The left pane's part of each screen line (up to its border).
fn tray_lines(app: &App) -> Vec<String> {
    screen_lines(app)
        .into_iter()
        .map(|l| l.split('│').next().unwrap_or_default().to_string())
        .collect()
}

/// The two lines of the run titled `title` in the left pane.
fn tray_row(app: &App, title: &str) -> (String, String) {
    let lines = tray_lines(app);
    let at = lines
        .iter()
        .position(|l| l.contains(title))
        .unwrap_or_else(|| panic!("{title} is listed: {lines:#?}"));
    (lines[at].clone(), lines[at + 1].clone())
}

fn requests_sent(effects: &[drover_tui::Effect]) -> Vec<drover_core::dispatch::Request> {
    requests(effects)
}

/// The footer's note and the header's gauge come from one source: the owner's budget
/// session. A warning note makes the dashboard read the session again, and the gauge says
/// the warning was reached whenever the session says so.
#[test]
fn the_header_says_the_warning_the_footer_announces() {
    let mut app = busy_app(120, 24);
    let mut stale = budget(0.29, 0.0);
    stale.warning_usd = 0.75;
    app.model.budget = Some(stale.clone());
    let effects = app.handle(AppEvent::Dispatch(
        drover_core::dispatch::DispatchEvent::Budget {
            session: "default".into(),
            note:
                "budget session default has spent $0.79, past its $0.75 warning (hard cap $25.00)"
                    .into(),
        },
    ));
    assert!(
        requests_sent(&effects).contains(&drover_core::dispatch::Request::Budget),
        "the session is read again: {effects:?}"
    );
    let mut fresh = budget(0.79, 0.0);
    fresh.warning_usd = 0.75;
    fresh.warned = true;
    let _ = app.handle(AppEvent::Reply {
        tag: ReplyTag::Budget,
        result: Ok(drover_core::dispatch::Response::Budget(Box::new(fresh))),
    });
    snap("budget_warning_note", &app);
    let header = &screen_lines(&app)[1];
    assert!(header.contains("$0.79 spent"), "{header}");
    assert!(header.contains("warning reached"), "{header}");
    // The session's own word counts even when its numbers lag a step behind.
    let mut lagging = stale;
    lagging.warned = true;
    app.model.budget = Some(lagging);
    let header = &screen_lines(&app)[1];
    assert!(header.contains("warning reached"), "{header}");
}

#[test]
fn an_interrupted_run_says_interrupted_once() {
    let mut run = summary(4, "Rename the crate", RunState::Interrupted);
    run.head.completion_reason = Some("interrupted".into());
    let app = app_with(vec![run], 100, 12);
    let screen = render_app(&app);
    assert!(screen.contains("interrupted"), "{screen}");
    assert!(!screen.contains("interrupted (interrupted)"), "{screen}");
}

/// Each countdown says what runs out: the run's time limit, the answer, the idle
/// timeout, the route card.
#[test]
fn every_countdown_says_what_it_counts_down_to() {
    let mut held = summary(5, "Pick a model for the review", RunState::AwaitingRoute);
    held.head.live_state = Some(live(
        LiveStateKind::Admitted,
        50,
        1_750,
        Some("waiting for your route choice"),
    ));
    let app = app_with(
        vec![
            summary(1, "Refactor the storage modules", RunState::Running),
            summary(2, "Update the greeting", RunState::AwaitingPermission),
            summary(3, "Write the changelog", RunState::Idle),
            summary(4, "Port the CLI", RunState::Queued),
            held,
        ],
        160,
        20,
    );
    snap("countdowns_labelled", &app);
    let screen = render_app(&app);
    for words in [
        "time limit in 41m55s",
        "answer in 9m48s",
        "times out in 18m25s",
        "card expiry in 29m10s",
        "time limit in 44m20s",
    ] {
        assert!(screen.contains(words), "{words:?}:\n{screen}");
    }
    assert!(!screen.contains("s left"), "{screen}");
}

/// A run asking a question is not "awaiting permission" anywhere on screen.
#[test]
fn a_question_is_called_a_question() {
    let mut app = question_app();
    app.model.select(&id(3));
    let screen = render_app(&app);
    assert!(screen.contains("asks you a question"), "{screen}");
    assert!(!screen.contains("awaiting permission"), "{screen}");
    assert!(!screen.contains("awaiting_permission"), "{screen}");
}

/// A run in Needs you says why, hibernated or not.
#[test]
fn needs_you_rows_say_why_even_when_hibernated() {
    let hibernated = |n: u32, title: &str| {
        let mut s = summary(n, title, RunState::Idle);
        s.head.live_state = Some(live(
            LiveStateKind::Working,
            300,
            900,
            Some("idle · hibernated"),
        ));
        s
    };
    let mut input = hibernated(1, "Deploy the release to staging");
    input.needs_input = true;
    let mut blocked = hibernated(2, "Bump the MSRV to 1.88");
    blocked.result_status = Some("blocked".into());
    let mut offered = hibernated(3, "Port the parser");
    offered.result_status = Some("blocked".into());
    offered.escalation_offered = true;
    let app = app_with(vec![input, blocked, offered], 100, 12);
    snap("tray_needs_you_hibernated", &app);
    let (_, input) = tray_row(&app, "Deploy the release");
    assert!(input.contains("needs your input · hibernated"), "{input}");
    let (_, blocked) = tray_row(&app, "Bump the MSRV");
    assert!(
        blocked.contains("blocked: say how to go on · hibernated"),
        "{blocked}"
    );
    let (_, offered) = tray_row(&app, "Port the parser");
    assert!(
        offered.contains("blocked: escalation offered · hibernated"),
        "{offered}"
    );
}

/// A run held on a route card has no worktree yet, and says so rather than "making" one.
#[test]
fn a_held_runs_worktree_waits_for_its_pick() {
    let mut app = held_app(120, 24);
    if let Some(e) = app.model.run_mut(&id(3)) {
        e.summary.workspace = Some(Box::new(drover_core::workspace::WorkspaceView::preparing()));
    }
    let screen = render_app(&app);
    assert!(!screen.contains("making the worktree"), "{screen}");
    assert!(screen.contains("once a model is picked"), "{screen}");
}

/// An idle worktree run merged into its base has nothing left to merge, not "no change
/// yet".
#[test]
fn a_merged_idle_run_has_nothing_to_merge() {
    let mut idle = summary(1, "Put a cache in front of the greeting", RunState::Idle);
    idle.workspace = Some(Box::new(worktree(1, Some((0, 0, 0)))));
    let mut app = app_with(vec![idle.clone()], 120, 16);
    app.model.set_detail(view_of(&idle));
    app.model.select(&id(1));
    let screen = render_app(&app);
    assert!(!screen.contains("no change yet"), "{screen}");
    assert!(screen.contains("nothing to merge"), "{screen}");
}

/// Every word of `text` is on screen (wrapped lines allowed), and no line of the view is
/// cut short.
fn shown_whole(screen: &str, text: &str) {
    let joined: String = screen
        .lines()
        .map(|l| l.trim_matches('"').trim_matches(|c| c == '│' || c == ' '))
        .collect::<Vec<_>>()
        .join(" ");
    for word in text.split_whitespace() {
        assert!(joined.contains(word), "{word:?} is not shown:\n{screen}");
    }
}

#[test]
fn a_long_refusal_wraps_in_the_diff_view_even_at_200_columns() {
    let mut app = diff_app(200, 40);
    let _ = app.handle(char_key('m'));
    let message = "drover/r1k9x2a01-add-a-cache conflicts with main in src/main.rs, src/cache.rs, \
                   docs/a/very/long/path/to/the/design/notes.md and 4 more; nothing was changed. Ask \
                   the run to merge main into its branch (a follow-up), or merge by hand";
    app.handle(AppEvent::Reply {
        tag: ReplyTag::WorkspaceAction {
            run_id: id(1),
            action: "merge".into(),
        },
        result: Err(DroverError::new(ErrorCode::MergeConflict, message)),
    });
    let screen = render_app(&app);
    shown_whole(&screen, message);
}

#[test]
fn help_lines_wrap_instead_of_being_cut() {
    let mut app = busy_app(80, 60);
    press(&mut app, [char_key('?')]);
    let screen = render_app(&app);
    shown_whole(
        &screen,
        "make a rule from the request on the attention line (saving it answers the request)",
    );
}

/// A long message in the footer (a refused key) is shown whole, wrapped above the hints.
#[test]
fn a_long_refusal_in_the_footer_wraps() {
    let mut app = busy_app(100, 30);
    app.model.select(&id(6));
    press(&mut app, [char_key('R')]);
    let flash = app.model.flash.clone().expect("a refusal");
    assert!(flash.error);
    snap("footer_long_refusal", &app);
    shown_whole(&render_app(&app), &flash.text);
}

/// After the terminal shrinks and grows again, the list starts at its top again instead
/// of leaving blank rows below its end.
#[test]
fn the_list_fills_the_pane_after_the_terminal_shrinks_and_grows() {
    let runs = (1..=8)
        .map(|n| summary(n, &format!("Run number {n}"), RunState::Running))
        .collect();
    let mut app = app_with(runs, 100, 12);
    app.model.select_last();
    assert!(app.model.list_top > 0, "scrolled to the last run");
    let _ = app.handle(AppEvent::Resize {
        width: 100,
        height: 40,
    });
    assert_eq!(app.model.list_top, 0, "the whole list fits again");
    let screen = render_app(&app);
    assert!(screen.contains("Running (8)"), "{screen}");
}

/// A title in wide characters is cut by columns, not characters: its row keeps its money
/// and provider columns and the pane's border.
#[test]
fn a_wide_title_stays_in_its_column() {
    let wide = summary(
        1,
        "修复登录页面的重定向循环问题并添加测试用例 🚀🚀🚀 以及更多的文字",
        RunState::Running,
    );
    let app = app_with(
        vec![
            wide,
            summary(2, "Refactor the storage modules", RunState::Running),
        ],
        120,
        10,
    );
    let (row, _) = tray_row(&app, "修复");
    assert!(row.contains("$0.12/$5.00"), "{row}");
    let (other, _) = tray_row(&app, "Refactor");
    // Both rows end at the pane's border, so the border lines up.
    assert_eq!(
        ratatui::text::Line::raw(row.as_str()).width(),
        ratatui::text::Line::raw(other.as_str()).width(),
        "{row}\n{other}"
    );
    assert!(row.trim_end().ends_with('▱'), "{row}");
}

/// The provider column stays put when one run's cost is wider than another's.
#[test]
fn the_provider_column_does_not_move_with_a_wider_cost() {
    let mut dear = summary(1, "Refactor the storage modules", RunState::Running);
    dear.head.cost_usd = 12.34;
    dear.head.budget_usd = 25.0;
    let cheap = summary(2, "Update the greeting", RunState::Running);
    let app = app_with(vec![dear, cheap], 160, 10);
    let end_of = |title: &str| {
        let (row, _) = tray_row(&app, title);
        let at = row
            .find("claude-sonnet-4-5")
            .unwrap_or_else(|| panic!("the provider column: {row}"));
        row[..at].chars().count()
    };
    assert_eq!(
        end_of("Refactor the storage"),
        end_of("Update the greeting"),
        "{:#?}",
        tray_lines(&app)
    );
}

/// A run wrapping up says so on its live line and in its detail (docs/ARCHITECTURE.md
/// §"Wrap up, then stop").
#[test]
fn a_run_wrapping_up_says_it_writes_its_final_answer() {
    let mut run = summary(1, "refactor the parser", RunState::Running);
    run.head.live_state = Some(live(
        LiveStateKind::WrappingUp,
        12,
        48,
        Some("writing the final answer"),
    ));
    let mut app = app_with(vec![run.clone()], 120, 24);
    app.model.set_detail(view_of(&run));
    app.model.select(&id(1));
    snap("wrapping_up", &app);
}

/// `s` on a working run asks: wrap up, or stop now.
#[test]
fn s_on_a_working_run_asks_wrap_up_or_stop_now() {
    let run = summary(1, "refactor the parser", RunState::Running);
    let mut app = app_with(vec![run], 100, 20);
    app.model.select(&id(1));
    let effects = app.handle(char_key('s'));
    assert!(effects.is_empty(), "nothing is sent before the choice");
    snap("stop_choice", &app);
}

/// The evidence line under the result (docs/ARCHITECTURE.md §"Evidence"): plain when a
/// test ran and passed, amber for a done with no test run.
#[test]
fn the_evidence_line_under_the_result() {
    use drover_core::evidence::{CommandRun, Evidence};
    let done = || drover_core::dispatch::api::ResultView {
        status: Some("done".into()),
        summary: Some("Fixed the off-by-one in the pager.".into()),
        question: None,
        files: vec![],
        changes: vec![],
        follow_ups: vec![],
        json: None,
    };
    let ran = |command: &str, exit: i32, test: Option<&str>| CommandRun {
        command: command.into(),
        exit_code: Some(exit),
        test: test.map(str::to_string),
    };
    let run = summary(1, "fix the pager", RunState::Idle);
    let mut view = view_of(&run);
    view.last_result = Some(done());
    view.evidence = Some(Evidence::of(
        &[
            ran("rg -n page src", 0, None),
            ran("cargo test -p pager", 101, Some("cargo test")),
            ran("cargo test -p pager", 0, Some("cargo test")),
        ],
        true,
    ));
    let mut app = app_with(vec![run.clone()], 120, 30);
    app.model.set_detail(view.clone());
    app.model.select(&id(1));
    snap("evidence_tests_passed", &app);
    let buffer = render_buffer(&app);
    let row = (0..buffer.area.height)
        .find(|y| {
            (0..buffer.area.width)
                .map(|x| buffer[(x, *y)].symbol())
                .collect::<String>()
                .contains("evidence: 3 commands")
        })
        .expect("the evidence line");
    let x = (0..buffer.area.width)
        .find(|x| buffer[(*x, row)].symbol() == "e" && buffer[(*x + 1, row)].symbol() == "v")
        .expect("its start");
    assert_ne!(buffer[(x, row)].fg, Color::Yellow, "passed: not amber");

    view.evidence = Some(Evidence::of(&[ran("git status", 0, None)], true));
    app.model.set_detail(view);
    snap("evidence_done_no_test", &app);
    let buffer = render_buffer(&app);
    let row = (0..buffer.area.height)
        .find(|y| {
            (0..buffer.area.width)
                .map(|x| buffer[(x, *y)].symbol())
                .collect::<String>()
                .contains("done, but no test ran")
        })
        .expect("the evidence line");
    let x = (0..buffer.area.width)
        .find(|x| buffer[(*x, row)].symbol() == "e" && buffer[(*x + 1, row)].symbol() == "v")
        .expect("its start");
    assert_eq!(
        buffer[(x, row)].fg,
        Color::Yellow,
        "done with no test: amber"
    );
}

/// A run whose new worktree's repository scripts wait for approval: in Needs you, its
/// live line says so; enter shows the scripts (the setup whole, the changed teardown as
/// its diff); `y` approves them with the prompt's allow key, `d` refuses.
#[test]
fn repository_scripts_to_approve() {
    use drover_core::dispatch::api::{ScriptApprovalView, ScriptAskView};
    use drover_core::workspace::scripts::ScriptKind;
    let mut waiting = summary(5, "Add a cache to the greeting", RunState::Starting);
    waiting.head.live_state = Some(tui_common::live(
        LiveStateKind::Preparing,
        12,
        1_788,
        Some("waiting for you to approve .drover/setup and .drover/teardown"),
    ));
    waiting.script_approval = true;
    waiting.workspace = Some(Box::new(worktree(5, None)));
    let runs = vec![
        waiting.clone(),
        summary(4, "Refactor the twenty storage modules", RunState::Running),
    ];
    let mut app = app_with(runs, 100, 30);
    assert_eq!(app.model.counts().needs_you, 1);
    let mut view = view_of(&waiting);
    view.script_approval = Some(ScriptApprovalView {
        repository: "/home/dev/project".into(),
        scripts: vec![
            ScriptAskView {
                kind: ScriptKind::Setup,
                path: ".drover/setup".into(),
                sha256: "9f2c4e1ab37d0c55e8a1f0b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6".into(),
                text: "#!/bin/sh\nnpm ci\ncp .env.example .env\n".into(),
                diff: None,
            },
            ScriptAskView {
                kind: ScriptKind::Teardown,
                path: ".drover/teardown".into(),
                sha256: "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9".into(),
                text: "#!/bin/sh\ndocker compose down\nrm -rf tmp\n".into(),
                diff: Some(
                    "--- .drover/teardown (approved)\n+++ .drover/teardown (now)\n@@ -1,2 +1,3 @@\n #!/bin/sh\n docker compose down\n+rm -rf tmp\n"
                        .into(),
                ),
            },
        ],
        since: tui_common::NOW - 12_000,
    });
    app.model.set_detail(view);
    app.model.select(&id(5));
    snap("scripts_waiting_in_needs_you", &app);
    press(&mut app, [key(KeyCode::Enter)]);
    assert!(
        app.views
            .top_as::<drover_tui::views::scripts::ScriptsView>()
            .is_some()
    );
    snap("scripts_to_approve", &app);
    let effects = app.handle(char_key('y'));
    assert!(
        effects.iter().any(|e| matches!(
            e,
            drover_tui::Effect::Request {
                request: drover_core::dispatch::Request::ApproveScripts { approve: true, .. },
                ..
            }
        )),
        "{effects:?}"
    );
    assert!(
        app.views
            .top_as::<drover_tui::views::scripts::ScriptsView>()
            .is_none()
    );
    press(&mut app, [key(KeyCode::Enter)]);
    let effects = app.handle(char_key('d'));
    assert!(
        effects.iter().any(|e| matches!(
            e,
            drover_tui::Effect::Request {
                request: drover_core::dispatch::Request::ApproveScripts { approve: false, .. },
                ..
            }
        )),
        "{effects:?}"
    );
}

/// An idle run whose branch conflicts with its base: in Needs you with the follow-up
/// offered (its live line and detail say so); enter sends that follow-up, as offered.
#[test]
fn a_conflict_offered_in_needs_you() {
    use drover_core::workspace::{UpdateHow, UpdateView};
    let mut idle = summary(6, "Add a cache to the greeting", RunState::Idle);
    idle.conflict_offered = true;
    idle.workspace = Some(Box::new(worktree(6, Some((2, 14, 1)))));
    let runs = vec![
        idle.clone(),
        summary(4, "Refactor the twenty storage modules", RunState::Running),
    ];
    let mut app = app_with(runs, 100, 30);
    assert_eq!(app.model.counts().needs_you, 1);
    let follow_up = "The branch main moved on and conflicts with your branch drover/x in src/main.rs. Merge main into your branch (git merge main), resolve the conflicts keeping the intent of both sides, run the tests, and commit the merge.";
    let mut view = view_of(&idle);
    view.conflict_offer = Some(UpdateView {
        how: UpdateHow::Conflict,
        base: "main".into(),
        commit: "c0ffee1111".into(),
        files: vec!["src/main.rs".into()],
        follow_up: Some(follow_up.into()),
    });
    app.model.set_detail(view);
    app.model.select(&id(6));
    snap("conflict_offered_in_needs_you", &app);
    let effects = app.handle(key(KeyCode::Enter));
    assert!(
        effects.iter().any(|e| matches!(
            e,
            drover_tui::Effect::Request {
                request: drover_core::dispatch::Request::FollowUp { text, .. },
                ..
            } if text == follow_up
        )),
        "{effects:?}"
    );
}

/// `P` on a worktree run with no pull request: a box with its title to edit first; `tab`
/// makes it a draft; `enter` pushes and opens it with that title and draft.
#[test]
fn p_asks_the_pull_requests_title_and_draft_first() {
    let mut app = worktree_app(100, 30);
    let effects = app.handle(char_key('P'));
    assert!(
        !effects
            .iter()
            .any(|e| matches!(e, drover_tui::Effect::Request { .. })),
        "nothing is pushed before enter: {effects:?}"
    );
    press(&mut app, [key(KeyCode::Tab)]);
    press(&mut app, typed(" (v2)"));
    snap("pull_request_box", &app);
    let effects = app.handle(key(KeyCode::Enter));
    assert!(
        effects.iter().any(|e| matches!(
            e,
            drover_tui::Effect::Request {
                request: drover_core::dispatch::Request::Pr {
                    draft: true,
                    title: Some(title),
                    refresh: false,
                    force_with_lease: false,
                    ..
                },
                ..
            } if title == "Put a cache in front of the greeting (v2)"
        )),
        "{effects:?}"
    );
}

/// The spend view (`$`) with its three answers: each of the last 30 days (`days`: the
/// dollars of each, oldest first), by model and by repository.
fn spend_app(days: &[f64], models: Vec<SpendRow>, repositories: Vec<SpendRow>) -> App {
    let mut app = app_with(Vec::new(), 100, 32);
    app.model.budget = Some(budget(0.0, 0.0));
    let effects = app.handle(char_key('$'));
    let asked: Vec<(SpendBy, Option<String>)> = effects
        .iter()
        .filter_map(|e| match e {
            drover_tui::Effect::Request {
                request: Request::Spend { by, since },
                ..
            } => Some((*by, since.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        asked,
        [SpendBy::Day, SpendBy::Model, SpendBy::Repository].map(|by| (by, Some("29d".to_string())))
    );
    let rows: Vec<SpendRow> = days
        .iter()
        .enumerate()
        .map(|(i, usd)| SpendRow {
            // 4 November to 3 December.
            key: match i + 4 {
                d @ ..=30 => format!("2026-11-{d:02}"),
                d => format!("2026-12-{:02}", d - 30),
            },
            reported_usd: usd * 0.75,
            estimated_usd: usd * 0.25,
            unpriced_rows: u64::from(i % 7 == 3 && *usd > 0.0),
            runs: u64::from(*usd > 0.0) * (i as u64 % 4 + 1),
            tokens: 0,
        })
        .collect();
    let total = |rows: &[SpendRow]| SpendRow {
        key: "total".into(),
        reported_usd: rows.iter().map(|r| r.reported_usd).sum(),
        estimated_usd: rows.iter().map(|r| r.estimated_usd).sum(),
        unpriced_rows: rows.iter().map(|r| r.unpriced_rows).sum(),
        runs: rows.iter().map(|r| r.runs).sum(),
        tokens: 0,
    };
    for (by, rows) in [
        (SpendBy::Day, rows),
        (SpendBy::Model, models),
        (SpendBy::Repository, repositories),
    ] {
        let view = SpendView {
            by,
            since: Some(1_000),
            total: total(&rows),
            rows,
        };
        app.handle(AppEvent::Reply {
            tag: ReplyTag::Spend(by),
            result: Ok(Response::Spend(Box::new(view))),
        });
    }
    app
}

fn spend_row(key: &str, reported: f64, estimated: f64, unpriced: u64, runs: u64) -> SpendRow {
    SpendRow {
        key: key.into(),
        reported_usd: reported,
        estimated_usd: estimated,
        unpriced_rows: unpriced,
        runs,
        tokens: 0,
    }
}

#[test]
fn the_spend_view_with_nothing_spent() {
    snap(
        "spend_empty",
        &spend_app(&[0.0; 30], Vec::new(), Vec::new()),
    );
}

#[test]
fn the_spend_view_charts_each_day_and_tables_models_and_repositories() {
    let days: Vec<f64> = (0..30)
        .map(|i| {
            if i % 6 == 5 {
                0.0
            } else {
                f64::from((i * 37) % 23) * 0.35
            }
        })
        .collect();
    let app = spend_app(
        &days,
        vec![
            spend_row("claude-sonnet-4-5", 61.2, 0.0, 0, 40),
            spend_row("gpt-5-codex", 0.0, 21.75, 0, 22),
            spend_row("kimi-k2", 0.0, 0.0, 4, 3),
        ],
        vec![
            spend_row("/home/me/src/api", 50.1, 10.0, 2, 38),
            spend_row("/home/me/src/web", 11.1, 11.75, 2, 27),
        ],
    );
    snap("spend_with_data", &app);
    // Esc closes it.
    let mut app = app;
    app.handle(AppEvent::Key(crossterm::event::KeyEvent::new(
        KeyCode::Esc,
        crossterm::event::KeyModifiers::NONE,
    )));
    assert!(app.views.is_empty());
}
