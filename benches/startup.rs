//! Startup as a user meets it: this build's real `drover` binary, exec'd, its wall time
//! and peak memory (the child's own `ru_maxrss`, from a runner process that starts only
//! it) for:
//! - `drover --version` and `drover config path` (no owner);
//! - with an owner up (`drover serve`) and 10 finished sim runs: `drover runs`,
//!   `drover status`, `drover dispatch --wait` (the sim's `quick-success`, at most 10 runs), and the
//!   dashboard's first frame in a pty (200×60): from exec until the screen shows a run's
//!   title;
//! - the owner's memory (`/proc/<pid>/status`: its peak VmHWM, and what it holds split
//!   into RssAnon and RssFile): idle just after it answers, after all of the above, and
//!   with 48 active sim runs (the `hang` scenario: each stays in its turn).
//!
//! Run: `cargo bench --bench startup`. `DROVER_BENCH_SAMPLES` (default 30) runs of each; the
//! median and the worst are printed. `DROVER_BENCH_BIN` times another `drover` binary. Targets (issue figures): `config path` ≤ 5 ms, the
//! dashboard's first frame ≤ 20 ms, the owner ≤ 16 MiB idle and ≤ 24 MiB with 48 active
//! runs. Prints figures, asserts nothing.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::env_or;
use common::exec::{Sample, drover_bin, memory_line, summary};
use std::path::Path;
use std::process::Command;

/// What the dashboard's first frame must show (a finished run's title).
const TITLE: &str = "startup bench run";

fn measure(home: &Path, args: &[&str], samples: usize) -> Vec<Sample> {
    common::exec::measure(home, args, TITLE, samples)
}

fn main() {
    if common::exec::runner_main() {
        return;
    }
    let samples = env_or("DROVER_BENCH_SAMPLES", 30) as usize;
    println!("startup: the real `drover` binary, {samples} runs each (median / worst)");
    let home = tempfile::tempdir().expect("temp dir");
    let h = home.path();
    report("drover --version", measure(h, &["--version"], samples));
    report(
        "drover config path",
        measure(h, &["config", "path"], samples),
    );

    let mut owner = common::exec::start_owner(h);
    // What it holds once its start's work (recovery, the first retention pass) is done.
    std::thread::sleep(std::time::Duration::from_millis(500));
    println!(
        "  owner idle (just started)       {}",
        memory_line(owner.id())
    );
    for i in 0..10 {
        let out = drover(
            h,
            &[
                "dispatch",
                "--provider",
                "sim",
                "--scenario",
                "quick-success",
                "--title",
                &format!("{TITLE} {i}"),
                "--wait",
                "finish the startup bench",
            ],
        );
        assert!(out.status.success(), "dispatch: {out:?}");
    }
    report("drover runs", measure(h, &["runs"], samples));
    report("drover status", measure(h, &["status"], samples));
    report(
        "drover dispatch --wait (sim)",
        measure(
            h,
            &[
                "dispatch",
                "--provider",
                "sim",
                "--scenario",
                "quick-success",
                "--wait",
                "one more",
            ],
            samples.min(10),
        ),
    );
    report(
        "dashboard first frame (pty)",
        measure(h, &["dashboard"], samples),
    );
    println!(
        "  owner after all of it           {}",
        memory_line(owner.id())
    );
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(owner.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = owner.wait();
    active_owner(ACTIVE);
}

/// How many runs stay active for the owner's memory figure.
const ACTIVE: u64 = 48;

/// A fresh owner whose rails let `n` runs work at once in one directory, `n` sim runs
/// dispatched that stay in their turn (the `hang` scenario), and its memory once it counts
/// `n` running (at most two minutes) and their first events are written.
fn active_owner(n: u64) {
    let home = tempfile::tempdir().expect("temp dir");
    let h = home.path();
    let cap = n + 2;
    std::fs::write(
        h.join("config.toml"),
        format!(
            "[limits]\nper_session_running = {cap}\nqueued_per_session = {cap}\n\
             session_warning_usd = 100000.0\nsession_hard_cap_usd = 100000.0\n\
             [limits.per_provider]\nsim = {cap}\n\
             [workspaces]\nshared_conflict = \"allow\"\n"
        ),
    )
    .expect("config");
    let mut owner = common::exec::start_owner(h);
    for i in 0..n {
        let out = drover(
            h,
            &[
                "dispatch",
                "--provider",
                "sim",
                "--scenario",
                "hang",
                "--title",
                &format!("active bench run {i}"),
                "stay in the turn",
            ],
        );
        assert!(out.status.success(), "dispatch: {out:?}");
    }
    let paths = drover_core::paths::Paths::under(h);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        let mut client = drover_core::control::ControlClient::connect(&paths)
            .await
            .expect("connect")
            .expect("an owner");
        loop {
            let counts = client
                .request(drover_core::dispatch::Request::Counts)
                .await
                .expect("counts")
                .into_counts()
                .expect("counts");
            if counts.by_state.get("running").copied().unwrap_or(0) >= n {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{n} runs never ran: {:?}",
                counts.by_state
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    println!(
        "  owner with {n} active runs        {}",
        memory_line(owner.id())
    );
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(owner.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = owner.wait();
}

fn drover(home: &Path, args: &[&str]) -> std::process::Output {
    // In the data directory, not a git repository: a run makes no worktree or branch.
    Command::new(drover_bin())
        .args(args)
        .current_dir(home)
        .env("DROVER_HOME", home)
        .env_remove("DROVER_LOG")
        .output()
        .expect("drover")
}

fn report(what: &str, samples: Vec<Sample>) {
    let ((wall, wall_worst), (rss, rss_worst)) = summary(&samples);
    println!(
        "  {what:<32} wall {wall:>7.2} ms / {wall_worst:>7.2} ms   peak RSS {rss:>5.1} MiB / {rss_worst:>5.1} MiB"
    );
}
