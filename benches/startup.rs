//! Startup as a user meets it: this build's real `drover` binary, exec'd, its wall time
//! and peak memory (the child's own `ru_maxrss`, from a runner process that starts only
//! it) for:
//! - `drover --version` and `drover config path` (no owner);
//! - with an owner up (`drover serve`) and 10 finished sim runs: `drover runs`,
//!   `drover status`, `drover dispatch --wait` (the sim's `quick-success`, at most 10 runs), and the
//!   dashboard's first frame in a pty (200×60): from exec until the screen shows a run's
//!   title.
//!
//! Run: `cargo bench --bench startup`. `DROVER_BENCH_SAMPLES` (default 30) runs of each; the
//! median and the worst are printed. `DROVER_BENCH_BIN` times another `drover` binary. Targets (issue figures): `config path` ≤ 5 ms, the
//! dashboard's first frame ≤ 20 ms. Prints figures, asserts nothing.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::env_or;
use common::exec::{Sample, drover_bin, summary, vmhwm_kb};
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
    let owner_hwm = vmhwm_kb(owner.id());
    println!(
        "  owner VmHWM after all of it: {:.1} MiB",
        owner_hwm / 1024.0
    );
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(owner.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = owner.wait();
}

fn drover(home: &Path, args: &[&str]) -> std::process::Output {
    Command::new(drover_bin())
        .args(args)
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
