//! History at size: a ledger filled to `R` finished runs and `E` events (each run with its
//! turn, usage row and `E / R` events, half of them transcript lines), a real
//! `drover serve` owner on it, and then, each the real `drover` binary exec'd as a user
//! runs it:
//! - the owner's start: spawning `drover serve` until its socket answers a ping;
//! - the dashboard's first frame: `drover` (the dashboard) in a 200×60 pty attaches to the
//!   owner and draws; timed from exec until the screen shows a run's title, with the
//!   process's peak memory (its own `ru_maxrss`, from a runner process that starts only
//!   it); the median and the worst of 9;
//! - `drover runs` (its default page, human output) and `drover status`: wall and peak
//!   memory, median of 5 each;
//! - the owner's peak memory (VmHWM from /proc/<pid>/status) after the dashboards and
//!   `runs` (before `status`).
//!
//! Run: `cargo bench --bench history`. Sizes: `DROVER_BENCH_HISTORY` (default
//! `10:200,500:10000,100000:2000000`, pairs of runs:events). `DROVER_BENCH_BIN` times
//! another `drover` binary. Targets (issue figures): the first frame ≤ 20 ms with 10 runs
//! and ≤ 30 ms with 100,000 runs and 2,000,000 events; `drover runs` ≤ 100 ms (and
//! `drover status` alike). Prints figures, asserts nothing.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::exec::{Sample, drover_bin, summary, vmhwm_kb};
use drover_core::clock::now_millis;
use drover_core::control::ControlClient;
use drover_core::dispatch::Request;
use drover_core::paths::Paths;
use drover_core::spec::{Capability, PermissionPolicy, Spec};
use rusqlite::{Connection, params};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How many dashboards start, one after the other (the median is printed).
const DASHBOARDS: usize = 9;
/// What the dashboard's first frame must show: a run's title (every title starts so).
const TITLE: &str = "history run ";

fn main() {
    if common::exec::runner_main() {
        return;
    }
    let sizes = std::env::var("DROVER_BENCH_HISTORY")
        .unwrap_or_else(|_| "10:200,500:10000,100000:2000000".into());
    println!(
        "history: finished runs in the ledger, a `drover serve` owner, the real binary exec'd"
    );
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
    let mut owner = Command::new(drover_bin())
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

    // The dashboard, nine times (a fresh process each), the median kept: one start takes
    // a few milliseconds, so a busy machine's noise is larger than a single figure.
    let dashboards = common::exec::measure(home.path(), &["dashboard"], TITLE, DASHBOARDS);
    let runs_lines = lines(home.path(), "runs");
    let runs_cmd = common::exec::measure(home.path(), &["runs"], TITLE, 5);
    // The owner's peak before `status` runs (the figure of the dashboards' and `runs`' asks).
    let owner_hwm = vmhwm_kb(owner.id());
    let status_lines = lines(home.path(), "status");
    let status_cmd = common::exec::measure(home.path(), &["status"], TITLE, 5);
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(owner.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = owner.wait();

    println!("  {runs} runs, {events} events (ledger {size_mb:.0} MB, filled in {fill_secs:.1} s)");
    println!(
        "    owner start (spawn -> ping)   {owner_ms:>8.1} ms             owner VmHWM {:>6.1} MiB",
        owner_hwm / 1024.0
    );
    report(
        &format!("dashboard first frame (of {DASHBOARDS})"),
        &dashboards,
        "",
    );
    report(
        "drover runs (of 5)",
        &runs_cmd,
        &format!("{runs_lines} lines"),
    );
    report(
        "drover status (of 5)",
        &status_cmd,
        &format!("{status_lines} lines"),
    );
}

/// One line of figures: median / worst wall, median / worst peak memory.
fn report(what: &str, samples: &[Sample], extra: &str) {
    let ((wall, wall_worst), (rss, rss_worst)) = summary(samples);
    println!(
        "    {what:<30}{wall:>8.1} / {wall_worst:>6.1} ms   peak RSS {rss:>5.1} / {rss_worst:>5.1} MiB   {extra}"
    );
}

/// How many lines `drover <command>` (human output, the owner up) prints.
fn lines(home: &Path, command: &str) -> usize {
    let out = Command::new(drover_bin())
        .arg(command)
        .env("DROVER_HOME", home)
        .env_remove("DROVER_LOG")
        .output()
        .expect("drover");
    assert!(out.status.success(), "drover {command} failed");
    out.stdout.iter().filter(|b| **b == b'\n').count()
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
        sandbox: false,
        clamps: vec![],
    }
}
