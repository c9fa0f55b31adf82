//! Shared by the dashboard tests: hand-built view models (fixed clock, fixed ids) and
//! rendering on ratatui's `TestBackend`.

#![allow(dead_code)]

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use drover_core::dispatch::DispatchEvent;
use drover_core::dispatch::api::{
    BudgetView, NoteView, PendingView, ResultView, RunSummary, RunView, TurnView,
};
use drover_core::live_state::{Cause, LiveState, LiveStateKind};
use drover_core::providers::{AlwaysOption, Ask, Question, QuestionOption, RequestKind, Tokens};
use drover_core::run_state::RunState;
use drover_tui::{App, AppEvent, AppOptions, ViewModel, render};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// The fixed clock of every hand-built model.
pub const NOW: i64 = 1_750_000_000_000;

/// A run id in the fixture's shape (`r` + digit + letters), masked in snapshots.
pub fn id(n: u32) -> String {
    format!("r{n}k9x2a0{n}")
}

pub fn live(
    state: LiveStateKind,
    ago_secs: i64,
    left_secs: i64,
    detail: Option<&str>,
) -> LiveState {
    LiveState {
        state,
        since: NOW - ago_secs * 1_000,
        bound: (state != LiveStateKind::Ended).then_some(NOW + left_secs * 1_000),
        detail: detail.map(str::to_string),
        cause: (state == LiveStateKind::Ended).then_some(Cause::Completed),
        seq: 3,
    }
}

pub fn summary(n: u32, title: &str, state: RunState) -> RunSummary {
    let live_state = if state.is_terminal() {
        Some(live(LiveStateKind::Ended, 0, 0, None))
    } else {
        Some(match state {
            RunState::Queued => live(LiveStateKind::Admitted, 40, 2_660, None),
            RunState::Starting => live(
                LiveStateKind::Preparing,
                2,
                58,
                Some("starting the provider"),
            ),
            RunState::Idle => live(
                LiveStateKind::Working,
                95,
                1_105,
                Some("idle: waiting for a follow-up"),
            ),
            RunState::AwaitingPermission => live(
                LiveStateKind::Working,
                12,
                588,
                Some("waiting for your answer: Bash"),
            ),
            RunState::AwaitingRoute => live(
                LiveStateKind::Admitted,
                50,
                1_750,
                Some("held on a route card"),
            ),
            // A restart cut its turn short: ended, and the line says so in words.
            RunState::Interrupted => LiveState {
                cause: Some(Cause::ResidentReplaced),
                ..live(
                    LiveStateKind::Ended,
                    240,
                    0,
                    Some(drover_core::dispatch::core::INTERRUPTED_DETAIL),
                )
            },
            _ => live(LiveStateKind::Working, 185, 2_515, Some("model turn")),
        })
    };
    RunSummary {
        head: drover_core::dispatch::api::RunHead {
            run_id: id(n),
            state,
            completion_reason: state.is_terminal().then(|| match state {
                RunState::Completed => "complete".to_string(),
                RunState::Failed => "provider_error".to_string(),
                RunState::Stopped => "user".to_string(),
                _ => "shutdown".to_string(),
            }),
            provider: "sim".into(),
            model: Some("claude-sonnet-4-5".into()),
            title: title.into(),
            live_state,
            cost_usd: 0.12 * f64::from(n % 5),
            budget_usd: 5.0,
            stalled: false,
            created_at: NOW - 600_000 + i64::from(n) * 1_000,
            finished_at: state
                .is_terminal()
                .then_some(NOW - 60_000 + i64::from(n) * 1_000),
            owner_gone: false,
            rev: 0,
            host: None,
        },
        pending: usize::from(state == RunState::AwaitingPermission),
        needs_input: false,
        escalation_offered: false,
        script_approval: false,
        conflict_offered: false,
        workspace: None,
        result_status: None,
        parent_run: None,
        depth: 0,
        workflow_id: None,
        sandbox: false,
    }
}

pub fn bash_request(n: u32, command: &str) -> PendingView {
    PendingView {
        request_id: format!("req_{n}"),
        kind: RequestKind::Permission,
        tool: "Bash".into(),
        ask: Ask::command(command, None, Some("Run the test suite".into())),
        always: Some(AlwaysOption::new(
            "allow Bash commands starting with `cargo test` for the rest of this run",
        )),
        created_at: NOW - 12_000,
        expires_at: NOW + 588_000,
        guard: None,
    }
}

pub fn question_request(n: u32) -> PendingView {
    PendingView {
        request_id: format!("req_{n}"),
        kind: RequestKind::Question,
        tool: "AskUserQuestion".into(),
        ask: Ask::Question {
            questions: vec![Question {
                question: "Which database should the cache use?".into(),
                header: Some("Database".into()),
                options: vec![
                    QuestionOption {
                        label: "SQLite".into(),
                        description: Some("A file next to the app; nothing to run.".into()),
                    },
                    QuestionOption {
                        label: "Postgres".into(),
                        description: Some("The shared server the rest of the stack uses.".into()),
                    },
                ],
                multi_select: false,
            }],
        },
        always: None,
        created_at: NOW - 30_000,
        expires_at: NOW + 1_770_000,
        guard: None,
    }
}

pub fn view_of(s: &RunSummary) -> RunView {
    RunView {
        head: drover_core::dispatch::api::RunHead {
            run_id: s.head.run_id.clone(),
            state: s.head.state,
            completion_reason: s.head.completion_reason.clone(),
            provider: s.head.provider.clone(),
            model: s.head.model.clone(),
            title: s.head.title.clone(),
            live_state: s.head.live_state.clone(),
            cost_usd: s.head.cost_usd,
            budget_usd: s.head.budget_usd,
            stalled: false,
            created_at: s.head.created_at,
            finished_at: s.head.finished_at,
            owner_gone: false,
            rev: 0,
            host: None,
        },
        task: format!("{} — keep the public API as it is.", s.head.title),
        cwd: "/home/dev/project".into(),
        policy: "ask".into(),
        sandbox: false,
        cost_basis: "reported".into(),
        tokens: Tokens::default(),
        turns: vec![TurnView {
            number: 1,
            origin: "dispatch".into(),
            started_at: s.head.created_at,
            ended_at: None,
            prompt_preview: "…".into(),
            text: None,
            tokens: Tokens::default(),
            cost_usd: None,
            result: None,
            commands: Vec::new(),
        }],
        pending: Vec::new(),
        last_result: None,
        notes: Vec::new(),
        provider_session_id: None,
        max_turns: 6,
        queued_follow_ups: 0,
        pid: None,
        budget: drover_core::dispatch::api::RunBudget {
            cap: 5.0,
            spent: 0.0,
            remaining: 5.0,
            clamped_from: None,
        },
        usage: Vec::new(),
        route: None,
        escalation: None,
        depth: 0,
        parent_run: None,
        workspace: s.workspace.as_deref().cloned(),
        decisions: Vec::new(),
        needs_you: None,
        evidence: None,
        script_approval: None,
        conflict_offer: None,
    }
}

pub fn budget(spent: f64, reserved: f64) -> BudgetView {
    BudgetView {
        session: "default".into(),
        spent_usd: spent,
        reserved_usd: reserved,
        available_usd: (25.0 - spent - reserved).max(0.0),
        warning_usd: 8.0,
        hard_cap_usd: 25.0,
        runs_by_basis: Default::default(),
        unpriced_runs: Vec::new(),
        warned: spent >= 8.0,
        closed: spent >= 25.0,
        config_refused: None,
        ledger_unavailable: None,
    }
}

pub fn options() -> AppOptions {
    let mut o = AppOptions::new("/home/dev/project".into());
    o.providers = vec![
        "claude-code".into(),
        "codex".into(),
        "opencode".into(),
        "sim".into(),
    ];
    o.default_provider = "sim".into();
    o.scenarios = vec![
        "quick-success".into(),
        "tool-permission".into(),
        "hang".into(),
    ];
    o
}

/// An app with these runs, a budget, and nothing else.
pub fn app_with(runs: Vec<RunSummary>, width: u16, height: u16) -> App {
    let mut model = ViewModel::new(NOW, width, height);
    model.budget = Some(budget(1.84, 6.50));
    model.replace_runs(runs);
    App::new(options(), model)
}

/// A realistic dashboard: every tray populated, the first Needs-you run selected with its
/// detail and transcript loaded.
pub fn busy_app(width: u16, height: u16) -> App {
    let mut needs_input = summary(3, "Deploy the release to staging", RunState::Idle);
    needs_input.needs_input = true;
    needs_input.head.live_state = Some(live(
        LiveStateKind::Working,
        20,
        1_180,
        Some("needs your input: answer with a follow-up"),
    ));
    let mut stalled = summary(
        5,
        "Investigate the flaky integration test",
        RunState::Running,
    );
    stalled.head.stalled = true;
    let runs = vec![
        summary(
            1,
            "Update the greeting in src/main.rs",
            RunState::AwaitingPermission,
        ),
        needs_input,
        summary(4, "Refactor the twenty storage modules", RunState::Running),
        stalled,
        summary(6, "Write the changelog for 0.4", RunState::Idle),
        summary(7, "Port the CLI to the new config API", RunState::Queued),
        summary(8, "Check the README links", RunState::Completed),
        summary(9, "Bump the MSRV to 1.88", RunState::Failed),
    ];
    let mut app = app_with(runs, width, height);
    app.model.apply(&DispatchEvent::PermissionRequested {
        run_id: id(1),
        pending: bash_request(1, "cargo test --workspace"),
    });
    let first = app.model.run(&id(1)).unwrap().summary.clone();
    let mut view = view_of(&first);
    view.pending = vec![bash_request(1, "cargo test --workspace")];
    view.notes = vec![NoteView {
        at: NOW - 90_000,
        text: "clamped: budget $40.00 → $25.00".into(),
    }];
    view.last_result = Some(ResultView {
        status: Some("done".into()),
        summary: Some("Listed the project files.".into()),
        question: None,
        files: vec![],
        changes: vec![],
        follow_ups: vec![],
        json: None,
    });
    app.model.set_detail(view);
    app.model.set_transcript(
        &id(1),
        vec![
            "ready (2.1.0)".into(),
            "session 8f198f6b on claude-sonnet-4-5".into(),
            "text: I'll list the project files first.".into(),
            "tool Bash: ls -la".into(),
            "tool done: total 16 (4 lines)".into(),
            "text: Now I'll run the test suite.".into(),
            "tool Bash: cargo test --workspace".into(),
            "asks permission for Bash: cargo test --workspace".into(),
        ],
        None,
    );
    app.model.select(&id(1));
    app
}

pub fn key(code: KeyCode) -> AppEvent {
    AppEvent::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

pub fn char_key(c: char) -> AppEvent {
    let mods = if c.is_ascii_uppercase() {
        KeyModifiers::SHIFT
    } else {
        KeyModifiers::NONE
    };
    AppEvent::Key(KeyEvent::new(KeyCode::Char(c), mods))
}

/// Draws the app on a `TestBackend` of the model's size and returns the screen as text.
pub fn render_app(app: &App) -> String {
    let mut terminal =
        Terminal::new(TestBackend::new(app.model.width, app.model.height)).expect("terminal");
    terminal
        .draw(|frame| render::draw(frame, app))
        .expect("draw");
    terminal.backend().to_string()
}

/// The user has had the screen in front of them: a frame is drawn a second before the
/// model's clock, so what it shows has been on screen long enough for a key to answer it
/// (the answer guard) when the key comes at the clock. The clock is left as it was.
pub fn look(app: &mut App) {
    let now = app.model.now;
    app.model.now = now - 1_000;
    render_app(app);
    app.model.now = now;
    render_app(app);
}

/// The buffer of one frame, for style assertions.
pub fn render_buffer(app: &App) -> ratatui::buffer::Buffer {
    let mut terminal =
        Terminal::new(TestBackend::new(app.model.width, app.model.height)).expect("terminal");
    terminal
        .draw(|frame| render::draw(frame, app))
        .expect("draw");
    terminal.backend().buffer().clone()
}

#[allow(clippy::too_many_arguments)]
fn route_option(
    number: u32,
    provider: &str,
    model: &str,
    tier: &str,
    prices: Option<(f64, f64)>,
    context: Option<u64>,
    vision: bool,
    reason: &str,
) -> drover_core::route::RouteOption {
    drover_core::route::RouteOption {
        number,
        provider: provider.into(),
        model: model.into(),
        effort: None,
        tier: tier.into(),
        input_per_mtok: prices.map(|p| p.0),
        output_per_mtok: prices.map(|p| p.1),
        free: prices.is_none() && provider == "sim",
        context_window: context,
        vision,
        reason: reason.into(),
        recommended: number == 1,
    }
}

/// A held run's open route card with three ranked options.
pub fn route_card() -> drover_core::dispatch::api::RouteCardView {
    drover_core::dispatch::api::RouteCardView {
        route_id: "route_1".into(),
        class: "code".into(),
        status: "open".into(),
        options: vec![
            route_option(
                1,
                "claude-code",
                "claude-sonnet-4-5",
                "standard",
                Some((3.0, 15.0)),
                Some(200_000),
                true,
                "standard tier suits code; $3/$15 per Mtok; 200k context",
            ),
            route_option(
                2,
                "claude-code",
                "claude-opus-4-1",
                "frontier",
                Some((15.0, 75.0)),
                Some(200_000),
                true,
                "frontier tier: stronger on hard refactors, five times the price",
            ),
            route_option(
                3,
                "sim",
                "sim-small",
                "small",
                None,
                Some(1_000_000),
                false,
                "small tier, free: good enough for mechanical edits",
            ),
        ],
        left_out: vec![drover_core::route::LeftOut {
            provider: "codex".into(),
            reason: "not installed".into(),
        }],
        created_at: NOW - 45_000,
        expires_at: NOW + 255_000,
        decided_by: None,
        decided_at: None,
        refused: None,
    }
}

/// A dashboard with one run held on a route card (selected, its view loaded).
pub fn held_app(width: u16, height: u16) -> App {
    let held = summary(
        3,
        "Pick a model for the design review",
        RunState::AwaitingRoute,
    );
    let runs = vec![
        held.clone(),
        summary(4, "Refactor the twenty storage modules", RunState::Running),
    ];
    let mut app = app_with(runs, width, height);
    let mut view = view_of(&held);
    view.route = Some(route_card());
    app.model.set_detail(view);
    app.model.select(&id(3));
    app
}

/// A worktree run's workspace: branch `drover/<id>-…` from `main`, with `change`.
pub fn worktree(n: u32, change: Option<(u32, u64, u64)>) -> drover_core::workspace::WorkspaceView {
    drover_core::workspace::WorkspaceView {
        mode: drover_core::workspace::WorkspaceMode::Worktree,
        status: drover_core::workspace::WorkspaceStatus::Ready,
        dir: Some(format!(
            "/home/dev/.local/share/drover/worktrees/project/{}",
            id(n)
        )),
        checkout: Some("/home/dev/project".into()),
        worktree: Some(format!(
            "/home/dev/.local/share/drover/worktrees/project/{}",
            id(n)
        )),
        branch: Some(format!("drover/{}-add-a-cache", id(n))),
        base_branch: Some("main".into()),
        base_commit: Some("3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a".into()),
        change: change.map(
            |(files, added, removed)| drover_core::workspace::ChangeStat {
                files,
                added,
                removed,
            },
        ),
        pr: None,
        host: None,
    }
}

/// The file list `diff --stat` answers for a run with three changed files.
pub fn diff_files(n: u32) -> drover_core::dispatch::api::DiffView {
    use drover_core::workspace::FileStat;
    let file = |path: &str, status: &str, added: u64, removed: u64| FileStat {
        path: path.into(),
        old_path: None,
        status: status.into(),
        added,
        removed,
        binary: false,
    };
    drover_core::dispatch::api::DiffView {
        run_id: id(n),
        branch: Some(format!("drover/{}-add-a-cache", id(n))),
        base_branch: Some("main".into()),
        base_commit: Some("3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a".into()),
        change: drover_core::workspace::ChangeStat {
            files: 3,
            added: 21,
            removed: 3,
        },
        files: vec![
            file("src/cache.rs", "added", 17, 0),
            file("src/main.rs", "modified", 3, 2),
            file(
                "docs/a/very/long/path/to/the/design/notes.md",
                "modified",
                1,
                1,
            ),
        ],
        file: None,
        patch: None,
        truncated: false,
    }
}

/// git's diff of one file, as `diff --file` answers it.
pub fn diff_patch(n: u32, path: &str) -> drover_core::dispatch::api::DiffView {
    let patch = if path == "src/main.rs" {
        "diff --git a/src/main.rs b/src/main.rs\n\
         index 3f2a1b0..9c1e2d3 100644\n\
         --- a/src/main.rs\n\
         +++ b/src/main.rs\n\
         @@ -1,3 +1,4 @@\n\
         +mod cache;\n\
         \x20fn main() {\n\
         -    println!(\"hello\");\n\
         -    // greet\n\
         +    let mut cache = cache::Cache::new();\n\
         +    println!(\"{}\", cache.get_or_insert(\"greeting\", || \"hello, cache\".to_string()));\n\
         \x20}\n"
            .to_string()
    } else {
        let mut text = format!(
            "diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..a1b2c3d\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,40 @@\n"
        );
        for i in 1..=40 {
            text.push_str(&format!("+// line {i} of the new module\n"));
        }
        text
    };
    drover_core::dispatch::api::DiffView {
        file: Some(path.into()),
        patch: Some(patch),
        ..diff_files(n)
    }
}
