//! History at size: a ledger filled to `R` finished runs and `E` events (each run with its
//! turn, usage row and `E / R` events, half of them transcript lines), a real
//! `drover serve` owner on it, and then:
//! - the owner's start: spawning `drover serve` until its socket answers a ping;
//! - the dashboard's first frame: a dashboard in a process of its own (this bench run
//!   again as a child) attaches to the owner over the control socket, as a user's
//!   `drover` does, sends its first requests, and draws the first frame that shows the
//!   runs and the budget gauge on a 200×60 `TestBackend`; timed from before it connects
//!   (and, beside it, the frame the runs first show in);
//! - peak memory (VmHWM from /proc/<pid>/status) of that dashboard process and of the
//!   owner (the dashboard's figures: the median of 9 attaches);
//! - `drover runs` (its default page, human output) and `drover status` wall time,
//!   median of 5 each.
//!
//! Run: `cargo bench --bench history`. Sizes: `DROVER_BENCH_HISTORY` (default
//! `500:10000,100000:2000000`, pairs of runs:events). Targets at 100,000 runs / 2,000,000
//! events: first frame ≤ 150 ms and dashboard memory ≤ 40 MB, both within 1.3× of the
//! figures at 500 runs; `drover runs` ≤ 100 ms (and `drover status` alike). Prints figures,
//! asserts nothing.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use drover_core::clock::now_millis;
use drover_core::control::ControlClient;
use drover_core::dispatch::Request;
use drover_core::paths::Paths;
use drover_core::spec::{Capability, PermissionPolicy, Spec};
use drover_tui::{App, AppEvent, AppOptions, Link, ReplyTag, RequestRunner, ViewModel, render};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use rusqlite::{Connection, params};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Set (to a home directory) in the child that plays the dashboard.
const CHILD_ENV: &str = "DROVER_BENCH_HISTORY_DASHBOARD";
/// How many dashboards attach, one after the other (the median is printed).
const DASHBOARDS: usize = 9;

fn main() {
    if let Ok(home) = std::env::var(CHILD_ENV) {
        return dashboard_child(Path::new(&home));
    }
    let sizes =
        std::env::var("DROVER_BENCH_HISTORY").unwrap_or_else(|_| "500:10000,100000:2000000".into());
    println!("history: finished runs in the ledger, a `drover serve` owner, a dashboard attached");
    for pair in sizes.split(',') {
        let (runs, events) = pair
            .split_once(':')
            .and_then(|(r, e)| Some((r.trim().parse().ok()?, e.trim().parse().ok()?)))
            .expect("DROVER_BENCH_HISTORY is runs:events[,runs:events]");
        measure(runs, events);
    }
}

fn measure(runs: u64, events: u64) {
    let home = tempfile::tempdir().expect("temp dir");
    let paths = Paths::under(home.path());
    paths.ensure_dirs().expect("dirs");
    // The default config: every run finished in the last day, so retention keeps every
    // event (the ledger is measured at its fullest).
    let fill_start = Instant::now();
    fill(&paths.ledger_file, runs, events);
    // On disk before anything is timed: the kernel writing back hundreds of MB of dirty
    // pages would otherwise slow whatever the largest size measures first.
    std::fs::File::open(&paths.ledger_file)
        .and_then(|f| f.sync_all())
        .expect("sync the ledger");
    let fill_secs = fill_start.elapsed().as_secs_f64();
    let size_mb = std::fs::metadata(&paths.ledger_file)
        .map(|m| m.len() as f64 / 1e6)
        .unwrap_or(0.0);

    let owner_start = Instant::now();
    let mut owner = Command::new(env!("CARGO_BIN_EXE_drover"))
        .arg("serve")
        .env("DROVER_HOME", home.path())
        .env_remove("DROVER_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("drover serve");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(Some(mut client)) = ControlClient::connect(&paths).await
                && client.request(Request::Ping).await.is_ok()
            {
                break;
            }
            assert!(Instant::now() < deadline, "the owner never answered");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    });
    let owner_ms = owner_start.elapsed().as_secs_f64() * 1e3;

    // The dashboard, nine times (a fresh process each), the median kept: one attach takes
    // a few milliseconds, so a busy machine's noise is larger than a single figure.
    let mut frames = Vec::new();
    let mut runs_frames = Vec::new();
    let mut hwms = Vec::new();
    for _ in 0..DASHBOARDS {
        let out = Command::new(std::env::current_exe().expect("bench exe"))
            .env(CHILD_ENV, home.path())
            .output()
            .expect("dashboard child");
        let text = String::from_utf8_lossy(&out.stdout);
        let field = |name: &str| -> f64 {
            common::printed(&text, name)
                .unwrap_or_else(|| panic!("the dashboard child printed no {name}: {text}"))
        };
        frames.push(field("first_frame_ms="));
        runs_frames.push(field("runs_frame_ms="));
        hwms.push(field("vmhwm_kb="));
    }
    let (mut runs_ms, runs_lines) = command_ms(home.path(), "runs");
    // The owner's peak before `status` runs (the figure of the dashboard's and `runs`' asks).
    let owner_hwm = vmhwm_kb(owner.id()).unwrap_or(0.0);
    let (mut status_ms, status_lines) = command_ms(home.path(), "status");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(owner.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = owner.wait();

    println!("  {runs} runs, {events} events (ledger {size_mb:.0} MB, filled in {fill_secs:.1} s)");
    println!(
        "    owner start (spawn -> ping)   {owner_ms:>8.1} ms   owner VmHWM {:>6.1} MB",
        owner_hwm / 1024.0
    );
    println!(
        "    dashboard first frame         {:>8.1} ms   dashboard VmHWM {:>6.1} MB (median of {DASHBOARDS})",
        median(&mut frames),
        median(&mut hwms) / 1024.0
    );
    println!(
        "      of which the runs shown at  {:>8.1} ms   (the rest: the budget gauge's answer)",
        median(&mut runs_frames)
    );
    println!(
        "    drover runs (default page)    {:>8.1} ms   {runs_lines} lines (median of 5)",
        median(&mut runs_ms)
    );
    println!(
        "    drover status                 {:>8.1} ms   {status_lines} lines (median of 5)",
        median(&mut status_ms)
    );
}

/// `drover <command>` (human output, the owner up) 5 times: each wall time, and how many
/// lines it printed.
fn command_ms(home: &Path, command: &str) -> (Vec<f64>, usize) {
    let mut times = Vec::new();
    let mut lines = 0;
    for _ in 0..5 {
        let start = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_drover"))
            .arg(command)
            .env("DROVER_HOME", home)
            .env_remove("DROVER_LOG")
            .output()
            .expect("drover");
        times.push(start.elapsed().as_secs_f64() * 1e3);
        assert!(out.status.success(), "drover {command} failed");
        lines = out.stdout.iter().filter(|b| **b == b'\n').count();
    }
    (times, lines)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

fn vmhwm_kb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The child: attaches a dashboard to the owner of `home` and reports its first frame.
fn dashboard_child(home: &Path) {
    let start = Instant::now();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let ms = rt.block_on(async {
        let paths = Paths::under(home);
        let (sender, mut rx) = drover_tui::runner::channel();
        let link = Link::new(paths);
        let _pump = link.spawn_events(sender.clone());
        let requests = RequestRunner::new(link, sender.clone());
        let mut app = App::new(
            AppOptions::new(home.to_path_buf()),
            ViewModel::new(now_millis(), 200, 60),
        );
        for effect in app.start() {
            requests.execute(effect);
        }
        let mut terminal = Terminal::new(TestBackend::new(200, 60)).expect("test terminal");
        let (mut runs, mut budget) = (false, false);
        let mut runs_ms = 0.0;
        while !(runs && budget) {
            let event = tokio::time::timeout(Duration::from_secs(60), rx.recv())
                .await
                .expect("the owner answered")
                .expect("events");
            match &event {
                AppEvent::Reply {
                    tag: ReplyTag::Runs,
                    ..
                } => runs = true,
                AppEvent::Reply {
                    tag: ReplyTag::Budget,
                    ..
                } => budget = true,
                _ => {}
            }
            app.model.now = now_millis();
            for effect in app.handle(event) {
                requests.execute(effect);
            }
            if runs && runs_ms == 0.0 {
                // The frame the runs first show in (the budget gauge may still be empty).
                terminal
                    .draw(|frame| render::draw(frame, &app))
                    .expect("draw");
                runs_ms = start.elapsed().as_secs_f64() * 1e3;
            }
        }
        terminal
            .draw(|frame| render::draw(frame, &app))
            .expect("draw");
        assert!(app.model.run_count() > 0, "the dashboard shows no run");
        (runs_ms, start.elapsed().as_secs_f64() * 1e3)
    });
    let hwm = vmhwm_kb(std::process::id()).unwrap_or(0.0);
    println!(
        "runs_frame_ms={:.3} first_frame_ms={:.3} vmhwm_kb={hwm:.0}",
        ms.0, ms.1
    );
}

/// Fills a new ledger with `runs` finished runs (finished in the last day) and `events`
/// events spread evenly over them, with raw SQL in one transaction per table.
fn fill(path: &Path, runs: u64, events: u64) {
    let now = now_millis();
    {
        // The schema, as drover makes it.
        let (ledger, _) = drover_core::ledger::Ledger::open(
            path,
            drover_core::ledger::LedgerOptions::default(),
            now,
        )
        .expect("open ledger");
        ledger.close();
    }
    let per_run = (events / runs.max(1)).max(1);
    let base = now - 86_400_000;
    let step = 86_400_000 / runs.max(1) as i64;
    let spec = serde_json::to_string(&spec()).expect("spec");
    let mut conn = Connection::open(path).expect("open raw");
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    let tx = conn.transaction().unwrap();
    tx.execute(
        "WITH RECURSIVE r(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM r WHERE i + 1 < ?1)
         INSERT INTO runs (run_id, created_at, updated_at, finished_at, state,
             completion_reason, provider, model, title, budget_session, spec_json)
         SELECT printf('h%07d', i), ?2 + i * ?3, ?2 + i * ?3 + 500, ?2 + i * ?3 + 500,
             'completed', 'done', 'sim', 'sim-standard',
             printf('history run %d: fix the flaky test in module %d', i, i % 97),
             'default', ?4
         FROM r",
        params![runs as i64, base, step, spec],
    )
    .unwrap();
    tx.execute(
        "WITH RECURSIVE r(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM r WHERE i + 1 < ?1)
         INSERT INTO turns (run_id, number, origin, started_at, ended_at, prompt_preview,
             text, cost_usd)
         SELECT printf('h%07d', i), 1, 'dispatch', ?2 + i * ?3, ?2 + i * ?3 + 500,
             'fix the flaky test', 'Fixed it.', 0.01
         FROM r",
        params![runs as i64, base, step],
    )
    .unwrap();
    tx.execute(
        "WITH RECURSIVE r(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM r WHERE i + 1 < ?1)
         INSERT INTO usage (run_id, turn, at, provider, model, part, input, output,
             cost_usd, basis, fidelity, source, budget_session)
         SELECT printf('h%07d', i), 1, ?2 + i * ?3 + 500, 'sim', 'sim-standard', 'turn',
             1200, 300, 0.01, 'reported', 'exact', 'provider', 'default'
         FROM r",
        params![runs as i64, base, step],
    )
    .unwrap();
    tx.execute(
        "WITH RECURSIVE r(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM r WHERE i + 1 < ?1),
              s(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM s WHERE k + 1 <= ?2)
         INSERT INTO events (run_id, seq, kind, at, body_json)
         SELECT printf('h%07d', i), k,
             CASE WHEN k % 2 = 0 THEN 'transcript' ELSE 'provider' END,
             ?3 + i * ?4 + k,
             CASE WHEN k % 2 = 0
                  THEN json_object('line', 'text: working on step ' || k || ' of the task')
                  ELSE json_object('type', 'assistant', 'summary', 'step ' || k) END
         FROM r, s ORDER BY i, k",
        params![runs as i64, per_run as i64, base, step],
    )
    .unwrap();
    tx.commit().unwrap();
}

fn spec() -> Spec {
    Spec {
        provider: "sim".into(),
        model: Some("sim-standard".into()),
        effort: None,
        cwd: "/work/project".into(),
        task: "fix the flaky test".into(),
        context: None,
        title: "fix the flaky test".into(),
        tags: vec![],
        capability: Capability::Workspace,
        policy: PermissionPolicy::Ask,
        max_minutes: 45,
        budget_usd: 5.0,
        idle_timeout_secs: 1200,
        max_turns: 10,
        output_schema: None,
        workflow_id: None,
        parent_run: None,
        idempotency_key: None,
        queue_if_busy: true,
        scenario: None,
        class: None,
        workspace: None,
        carry_changes: false,
        clamps: vec![],
    }
}
