//! Frame time of the dashboard: 1,000 runs (100 active, 20 of them needing the user, 900
//! finished) and a 2,000-line transcript on the selected run, drawn on a 200×60
//! `TestBackend` (layout, widgets and the buffer diff; no terminal I/O).
//!
//! Run: `cargo bench --bench render`. Prints p50 and p99 over `DROVER_BENCH_FRAMES`
//! frames (default 3,000), for the dashboard alone, with a permission prompt open, and
//! with the selected run's transcript open full screen (`t`: every line laid out, the
//! agent's text read as markdown).
//! Targets: p50 ≤ 1 ms, p99 ≤ 3 ms. Each frame moves the clock (countdowns change) and
//! every tenth frame moves the selection, so frames are not identical.
//!
//! A baseline is printed too: a fixed busy loop as long as a typical frame, timed the
//! same way. Its p99 is the machine's noise floor (a loaded machine preempts any work
//! for whole scheduler ticks); a frame p99 near the baseline's is noise, not drawing.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

use drover_core::dispatch::api::{PendingView, RunSummary, RunView};
use drover_core::live_state::{LiveState, LiveStateKind};
use drover_core::providers::{AlwaysOption, Ask, RequestKind, Tokens};
use drover_core::run_state::RunState;
use drover_tui::views::prompt::PromptView;
use drover_tui::views::transcript::TranscriptScreen;
use drover_tui::{App, AppOptions, ViewModel, render};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use std::time::{Duration, Instant};

const NOW: i64 = 1_750_000_000_000;

fn main() {
    let frames = std::env::var("DROVER_BENCH_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3_000usize);
    let mut app = big_app();
    let plain = measure(&mut app, frames);
    let pending = app
        .model
        .oldest_pending(None)
        .map(|(e, p)| PromptView::new(e.summary.head.run_id.clone(), p.clone()))
        .expect("pending requests");
    app.views.push(pending);
    let prompt = measure(&mut app, frames);
    app.views.pop();
    app.views
        .push(TranscriptScreen::new(id(0), "the long refactor".into()));
    let transcript = measure(&mut app, frames);
    let typical = {
        let mut sorted = plain.clone();
        sorted.sort();
        sorted[sorted.len() / 2]
    };
    let baseline = baseline(typical, frames);
    println!("render: 1,000 runs (100 active, 20 need you), 2,000-line transcript, 200x60");
    report("dashboard", &plain);
    report("with a permission prompt", &prompt);
    report("with the transcript open", &transcript);
    report("baseline (busy loop)", &baseline);
}

/// `frames` runs of a busy loop calibrated to take about `typical`, timed like frames.
fn baseline(typical: Duration, frames: usize) -> Vec<Duration> {
    let spin = |n: u64| {
        let mut x = 0u64;
        for i in 0..n {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        x
    };
    let mut n = 1_000u64;
    loop {
        let start = Instant::now();
        spin(n);
        if start.elapsed() >= typical || n > 1 << 40 {
            break;
        }
        n *= 2;
    }
    (0..frames)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(spin(n));
            start.elapsed()
        })
        .collect()
}

fn report(what: &str, times: &[Duration]) {
    let mut sorted = times.to_vec();
    sorted.sort();
    let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
    let mean = sorted.iter().sum::<Duration>() / sorted.len() as u32;
    println!(
        "  {what:<26} frames {:>5}  p50 {:>7.3} ms  p99 {:>7.3} ms  mean {:>7.3} ms  max {:>7.3} ms",
        sorted.len(),
        ms(at(0.50)),
        ms(at(0.99)),
        ms(mean),
        ms(*sorted.last().expect("frames"))
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}

fn measure(app: &mut App, frames: usize) -> Vec<Duration> {
    let mut terminal = Terminal::new(TestBackend::new(200, 60)).expect("test terminal");
    let warmup = frames / 10;
    let mut times = Vec::with_capacity(frames);
    for i in 0..(warmup + frames) {
        app.model.now = NOW + i as i64 * 37;
        if i % 10 == 0 {
            app.model
                .move_selection(if (i / 10) % 40 < 20 { 1 } else { -1 });
        }
        let start = Instant::now();
        terminal
            .draw(|frame| render::draw(frame, app))
            .expect("draw");
        let took = start.elapsed();
        if i >= warmup {
            times.push(took);
        }
    }
    times
}

fn big_app() -> App {
    let mut model = ViewModel::new(NOW, 200, 60);
    let mut runs = Vec::with_capacity(1_000);
    for i in 0..1_000 {
        let state = match i {
            0..20 => RunState::AwaitingPermission,
            20..70 => RunState::Running,
            70..90 => RunState::Idle,
            90..100 => RunState::Queued,
            _ => RunState::Completed,
        };
        runs.push(summary(i, state));
    }
    model.replace_runs(runs);
    for i in 0..20 {
        model.apply(&drover_core::dispatch::DispatchEvent::PermissionRequested {
            run_id: id(i),
            pending: pending(i),
        });
    }
    let selected = id(0);
    model.set_detail(view(&selected));
    model.set_transcript(
        &selected,
        (0..2_000)
            .map(|n| {
                format!(
                    "text: step {n} of the long refactor, touching module {}",
                    n % 20
                )
            })
            .collect(),
        None,
    );
    model.select(&selected);
    let mut app = App::new(AppOptions::new("/work".into()), model);
    app.model.flash = None;
    app
}

fn id(i: usize) -> String {
    format!("r{i:06}x")
}

fn summary(i: usize, state: RunState) -> RunSummary {
    let live = if state.is_terminal() {
        LiveState {
            state: LiveStateKind::Ended,
            since: NOW - 60_000,
            bound: None,
            detail: None,
            cause: Some(drover_core::live_state::Cause::Completed),
            seq: 9,
        }
    } else {
        LiveState {
            state: LiveStateKind::Working,
            since: NOW - (i as i64 * 1_000),
            bound: Some(NOW + 600_000),
            detail: Some("running a tool: Bash".into()),
            cause: None,
            seq: 4,
        }
    };
    RunSummary {
        head: drover_core::dispatch::api::RunHead {
            run_id: id(i),
            state,
            completion_reason: state.is_terminal().then(|| "complete".to_string()),
            provider: "sim".into(),
            model: Some("claude-sonnet-4-5".into()),
            title: format!("Refactor storage module {i} to the new error type"),
            live_state: Some(live),
            cost_usd: (i % 50) as f64 * 0.03,
            budget_usd: 5.0,
            stalled: false,
            created_at: NOW - 3_600_000 + i as i64,
            finished_at: state.is_terminal().then_some(NOW - 1_000 + i as i64),
            owner_gone: false,
            rev: 0,
            host: None,
        },
        pending: usize::from(i < 20),
        needs_input: false,
        escalation_offered: false,
        script_approval: false,
        conflict_offered: false,
        // Every other run works in a worktree with a change to show.
        workspace: i.is_multiple_of(2).then(|| {
            Box::new(drover_core::workspace::WorkspaceView {
                change: Some(drover_core::workspace::ChangeStat {
                    files: (i % 7) as u32 + 1,
                    added: i as u64 * 3,
                    removed: i as u64,
                }),
                status: drover_core::workspace::WorkspaceStatus::Ready,
                worktree: Some(format!("/data/worktrees/app/r{i}")),
                ..drover_core::workspace::WorkspaceView::preparing()
            })
        }),
        result_status: None,
        parent_run: None,
        depth: 0,
        workflow_id: None,
        sandbox: false,
    }
}

fn pending(i: usize) -> PendingView {
    PendingView {
        request_id: format!("req_{i:04}"),
        kind: RequestKind::Permission,
        tool: "Bash".into(),
        ask: Ask::command(
            &format!("cargo test -p storage-{i} -- --nocapture"),
            None,
            Some("Run the module's tests".into()),
        ),
        always: Some(AlwaysOption::new(
            "allow Bash commands starting with `cargo test` for the rest of this run",
        )),
        created_at: NOW - 30_000 + i as i64,
        expires_at: NOW + 570_000,
        guard: None,
    }
}

fn view(run_id: &str) -> RunView {
    RunView {
        head: drover_core::dispatch::api::RunHead {
            run_id: run_id.to_string(),
            state: RunState::AwaitingPermission,
            completion_reason: None,
            provider: "sim".into(),
            model: Some("claude-sonnet-4-5".into()),
            title: "Refactor storage module 0 to the new error type".into(),
            live_state: None,
            cost_usd: 0.0,
            budget_usd: 5.0,
            stalled: false,
            created_at: NOW - 3_600_000,
            finished_at: None,
            owner_gone: false,
            rev: 0,
            host: None,
        },
        task: "Refactor the storage module to the new error type.".into(),
        cwd: "/work/project".into(),
        policy: "ask".into(),
        sandbox: false,
        cost_basis: "reported".into(),
        tokens: Tokens::default(),
        turns: Vec::new(),
        pending: vec![pending(0)],
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
        workspace: None,
        decisions: Vec::new(),
        needs_you: None,
        evidence: None,
        script_approval: None,
        conflict_offer: None,
    }
}
