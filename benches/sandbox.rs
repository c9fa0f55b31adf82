//! The sandbox's cost on a run's wall time (issue 32's figure, target ≤ 1.05×): this
//! build's real `drover dispatch --wait` of a sim run in a shared directory, exec'd
//! against an owner that is up, with and without `--sandbox`, interleaved (the order
//! alternates pair by pair, so drift in the machine's load falls on both alike). Two
//! scenarios: `worktree-change` (a run that works: it writes a file, edits one and runs a
//! command, about a second) and `quick-success` (one short answer, no tool: the fixed
//! cost of starting `bwrap` weighs most there). Each run is completed before the next, so
//! no idle run holds a slot, and the directory is put back.
//!
//! Run: `cargo bench --bench sandbox`. `DROVER_BENCH_PAIRS` (default 30, at least 20)
//! pairs per scenario. Prints the median wall of each, the ratio of the medians and the
//! median of the pairs' ratios. Needs bubblewrap (`bwrap`) that can make namespaces (root
//! on CI). Prints figures, asserts nothing but that the runs ran.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::exec::drover_bin;
use common::{env_or, median};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Instant;

fn drover(home: &Path, work: &Path, args: &[&str]) -> Output {
    Command::new(drover_bin())
        .args(args)
        .current_dir(work)
        .env("DROVER_HOME", home)
        .env_remove("DROVER_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("drover")
}

/// One `dispatch --wait` exec'd and timed (ms); the run is completed afterwards, untimed.
fn one(home: &Path, work: &Path, scenario: &str, sandbox: bool) -> f64 {
    std::fs::write(work.join("src/main.rs"), GREETING).expect("src/main.rs");
    let mut args = vec![
        "dispatch",
        "--provider",
        "sim",
        "--scenario",
        scenario,
        "--workspace",
        "shared",
        "--wait",
        "--json",
    ];
    if sandbox {
        args.push("--sandbox");
    }
    args.push("sandbox bench run");
    let start = Instant::now();
    let out = drover(home, work, &args);
    let wall = start.elapsed().as_secs_f64() * 1000.0;
    assert!(out.status.success(), "dispatch: {out:?}");
    let first = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    let run: serde_json::Value = serde_json::from_str(&first).expect("the run's summary");
    assert_eq!(run["sandbox"], sandbox, "{run}");
    let id = run["run_id"].as_str().expect("run id").to_string();
    let done = drover(home, work, &["complete", &id]);
    assert!(done.status.success(), "complete: {done:?}");
    wall
}

/// What `worktree-change` edits.
const GREETING: &str = "fn main() {\n    println!(\"hello\");\n}\n";

/// `pairs` interleaved pairs of `scenario`, and what they measured.
fn pairs_of(h: &Path, work: &Path, scenario: &str, pairs: usize) {
    // One of each first, untimed: the owner's first probe of bubblewrap, warm caches.
    one(h, work, scenario, false);
    one(h, work, scenario, true);
    let (mut plain, mut boxed, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..pairs {
        let (p, b) = if i % 2 == 0 {
            let p = one(h, work, scenario, false);
            (p, one(h, work, scenario, true))
        } else {
            let b = one(h, work, scenario, true);
            (one(h, work, scenario, false), b)
        };
        plain.push(p);
        boxed.push(b);
        ratios.push(b / p);
    }
    let (p, b) = (median(&mut plain), median(&mut boxed));
    println!(
        "sandbox: `drover dispatch --wait` of a sim run ({scenario}), {pairs} interleaved pairs"
    );
    println!("  without --sandbox  median wall {p:>8.2} ms");
    println!("  with --sandbox     median wall {b:>8.2} ms");
    println!(
        "  ratio of medians {:.3}x · median of the pairs' ratios {:.3}x (target <= 1.05x)",
        b / p,
        median(&mut ratios)
    );
}

fn main() {
    let pairs = env_or("DROVER_BENCH_PAIRS", 30).max(20) as usize;
    let home = tempfile::tempdir().expect("temp dir");
    let work = home.path().join("work");
    std::fs::create_dir_all(work.join("src")).expect("work dir");
    let h = home.path();
    let mut owner = common::exec::start_owner(h);
    for scenario in ["worktree-change", "quick-success"] {
        pairs_of(h, &work, scenario, pairs);
    }
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(owner.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = owner.wait();
}
