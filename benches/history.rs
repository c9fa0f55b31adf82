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
//! - the owner's peak memory (VmHWM from /proc/<pid>/status), and what it holds then
//!   (VmRSS), after the dashboards and `runs` (before `status`), each with the
//!   dashboard's median peak added.
//!
//! Run: `cargo bench --bench history`. Sizes: `DROVER_BENCH_HISTORY` (default
//! `10:200,500:10000,100000:2000000`, pairs of runs:events). `DROVER_BENCH_BIN` times
//! another `drover` binary. Targets (issue figures): the first frame ≤ 20 ms with 10 runs
//! and ≤ 30 ms with 100,000 runs and 2,000,000 events; `drover runs` ≤ 100 ms (and
//! `drover status` alike). Prints figures, asserts nothing.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::exec::{Sample, drover_bin, summary, vmhwm_kb};
use drover_core::paths::Paths;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

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
    common::history::fill(&paths.ledger_file, runs, events);
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
    let mut owner = common::exec::start_owner(home.path());
    let owner_ms = owner_start.elapsed().as_secs_f64() * 1e3;

    // The dashboard, nine times (a fresh process each), the median kept: one start takes
    // a few milliseconds, so a busy machine's noise is larger than a single figure.
    let dashboards = common::exec::measure(home.path(), &["dashboard"], TITLE, DASHBOARDS);
    let runs_lines = lines(home.path(), "runs");
    let runs_cmd = common::exec::measure(home.path(), &["runs"], TITLE, 5);
    // The owner's peak before `status` runs (the figure of the dashboards' and `runs`' asks).
    let owner_hwm = vmhwm_kb(owner.id());
    // And what it holds then (its start's peak is behind it).
    let owner_rss = common::exec::proc_status_kb(owner.id(), "VmRSS").unwrap_or(0.0);
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
    let dashboard_mib = summary(&dashboards).1.0;
    println!(
        "    dashboard + owner             {dashboard_mib:>6.1} + {:.1} = {:.1} MiB (median dashboard peak + owner VmHWM; target ≤ 30 with 10 runs)",
        owner_hwm / 1024.0,
        dashboard_mib + owner_hwm / 1024.0
    );
    println!(
        "    dashboard + owner now         {dashboard_mib:>6.1} + {:.1} = {:.1} MiB (median dashboard peak + the owner's VmRSS after the dashboards)",
        owner_rss / 1024.0,
        dashboard_mib + owner_rss / 1024.0
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
