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
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Set in the runner child: the home, then the command's arguments (`dashboard` for the
/// dashboard in a pty), separated by `\x1f`.
const RUNNER_ENV: &str = "DROVER_BENCH_STARTUP_RUN";
/// The binary timed: this build's, or `DROVER_BENCH_BIN` (another build's, to compare).
fn drover_bin() -> String {
    std::env::var("DROVER_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_drover").into())
}
/// What the dashboard's first frame must show (a finished run's title).
const TITLE: &str = "startup bench run";

fn main() {
    if let Ok(spec) = std::env::var(RUNNER_ENV) {
        return runner(&spec);
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

    let mut owner = Command::new(drover_bin())
        .arg("serve")
        .env("DROVER_HOME", h)
        .env_remove("DROVER_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("drover serve");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !drover(h, &["status"]).status.success() {
        assert!(Instant::now() < deadline, "the owner never answered");
        std::thread::sleep(Duration::from_millis(10));
    }
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

/// `samples` runs of `args` (each in a runner of its own): wall ms and peak KiB each.
fn measure(home: &Path, args: &[&str], samples: usize) -> Vec<(f64, f64)> {
    let spec = std::iter::once(home.to_string_lossy().into_owned())
        .chain(args.iter().map(|a| a.to_string()))
        .collect::<Vec<_>>()
        .join("\u{1f}");
    (0..samples)
        .map(|_| {
            let out = Command::new(std::env::current_exe().expect("bench exe"))
                .env(RUNNER_ENV, &spec)
                .output()
                .expect("runner");
            let text = String::from_utf8_lossy(&out.stdout);
            let field = |name: &str| -> f64 {
                common::printed(&text, name)
                    .unwrap_or_else(|| panic!("the runner printed no {name}: {text} {out:?}"))
            };
            (field("wall_ms="), field("maxrss_kb="))
        })
        .collect()
}

fn report(what: &str, mut figures: Vec<(f64, f64)>) {
    let mut walls: Vec<f64> = figures.iter().map(|f| f.0).collect();
    figures.sort_by(|a, b| a.1.total_cmp(&b.1));
    walls.sort_by(|a, b| a.total_cmp(b));
    let median = |v: &[f64]| v[v.len() / 2];
    let rss: Vec<f64> = figures.iter().map(|f| f.1).collect();
    println!(
        "  {what:<32} wall {:>7.2} ms / {:>7.2} ms   peak RSS {:>5.1} MiB / {:>5.1} MiB",
        median(&walls),
        walls[walls.len() - 1],
        median(&rss) / 1024.0,
        rss[rss.len() - 1] / 1024.0
    );
}

/// The runner: starts the one command, waits for it, prints its wall time and its peak
/// memory (the only child it has waited for, so `RUSAGE_CHILDREN` is that child's).
fn runner(spec: &str) {
    let mut parts = spec.split('\u{1f}');
    let home = parts.next().expect("a home");
    let args: Vec<&str> = parts.collect();
    let wall_ms = if args == ["dashboard"] {
        dashboard_in_pty(Path::new(home))
    } else {
        let start = Instant::now();
        let status = Command::new(drover_bin())
            .args(&args)
            .env("DROVER_HOME", home)
            .env_remove("DROVER_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("drover");
        let ms = start.elapsed().as_secs_f64() * 1e3;
        assert!(status.success(), "drover {args:?}: {status}");
        ms
    };
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .expect("getrusage");
    println!("wall_ms={wall_ms:.3} maxrss_kb={}", usage.max_rss());
}

/// The dashboard (`drover` with no command) on a 200×60 pty: ms from exec until its
/// output shows a run's title; then it is ended (SIGTERM, by pid) and waited for.
fn dashboard_in_pty(home: &Path) -> f64 {
    let size = nix::pty::Winsize {
        ws_row: 60,
        ws_col: 200,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None).expect("a pty");
    let slave = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup the pty"));
    let start = Instant::now();
    let mut child = Command::new(drover_bin())
        .env("DROVER_HOME", home)
        .env_remove("DROVER_LOG")
        .env("TERM", "xterm-256color")
        .stdin(slave(&pty.slave))
        .stdout(slave(&pty.slave))
        .stderr(slave(&pty.slave))
        .spawn()
        .expect("the dashboard");
    drop(pty.slave);
    let mut master = std::fs::File::from(pty.master);
    let mut seen = Vec::new();
    let mut buf = [0u8; 65536];
    let mut answered = 0;
    let found = loop {
        match master.read(&mut buf) {
            Ok(0) | Err(_) => break None,
            Ok(n) => {
                seen.extend_from_slice(&buf[..n]);
                // The terminal's part: where the cursor is, when asked (as a terminal
                // answers at once).
                let asked = seen.windows(4).filter(|w| w == b"\x1b[6n").count();
                while answered < asked {
                    let _ = master.write_all(b"\x1b[1;1R");
                    answered += 1;
                }
                if seen.windows(TITLE.len()).any(|w| w == TITLE.as_bytes()) {
                    break Some(start.elapsed().as_secs_f64() * 1e3);
                }
            }
        }
    };
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    // Drain what it writes as it leaves, so it never blocks on a full pty.
    let drain =
        std::thread::spawn(move || while matches!(master.read(&mut buf), Ok(n) if n > 0) {});
    let _ = child.wait();
    let _ = drain.join();
    found.unwrap_or_else(|| {
        panic!(
            "the dashboard never showed a run: {}",
            String::from_utf8_lossy(&seen)
        )
    })
}

fn vmhwm_kb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0.0)
}
