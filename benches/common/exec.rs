//! The real `drover` binary exec'd as a user runs it: wall time and peak memory of one
//! command, or of the dashboard in a pty until its first frame shows a run. Each sample
//! runs in a runner process of its own (this bench's executable again), so the runner's
//! `RUSAGE_CHILDREN` peak is that one `drover` process's own. Every command runs in the
//! data directory it is given (no git repository), so a run it dispatches makes no
//! worktree or branch in the repository the bench was started from.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// Set in a runner child: the binary, the home, the text the dashboard's frame must show,
/// then the command's arguments (`dashboard` for the dashboard in a pty), separated by
/// `\x1f`.
const RUNNER_ENV: &str = "DROVER_BENCH_RUNNER";

/// The binary timed: this build's, or `DROVER_BENCH_BIN` (another build's, to compare).
pub fn drover_bin() -> String {
    std::env::var("DROVER_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_drover").into())
}

/// Starts `drover serve` on the data directory `home` (quiet, no log to the terminal) and
/// returns it once it answers a ping on its socket (at most two minutes).
pub fn start_owner(home: &Path) -> std::process::Child {
    let owner = Command::new(drover_bin())
        .arg("serve")
        .env("DROVER_HOME", home)
        .env_remove("DROVER_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("drover serve");
    let paths = drover_core::paths::Paths::under(home);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let deadline = Instant::now() + std::time::Duration::from_secs(120);
        loop {
            if let Ok(Some(mut client)) = drover_core::control::ControlClient::connect(&paths).await
                && client
                    .request(drover_core::dispatch::Request::Ping)
                    .await
                    .is_ok()
            {
                break;
            }
            assert!(Instant::now() < deadline, "the owner never answered");
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    });
    owner
}

/// One sample: wall time from exec (ms) and the process's peak RSS (KiB).
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub wall_ms: f64,
    pub maxrss_kb: f64,
}

/// When this process was started as a runner: runs its one command, prints its figures
/// and returns true (the bench's `main` then returns at once).
pub fn runner_main() -> bool {
    let Ok(spec) = std::env::var(RUNNER_ENV) else {
        return false;
    };
    let mut parts = spec.split('\u{1f}');
    let bin = parts.next().expect("a binary");
    let home = Path::new(parts.next().expect("a home"));
    let shows = parts.next().expect("what the frame shows");
    let args: Vec<&str> = parts.collect();
    let wall_ms = if args == ["dashboard"] {
        dashboard_in_pty(bin, home, shows)
    } else {
        let start = Instant::now();
        let status = Command::new(bin)
            .args(&args)
            .current_dir(home)
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
    true
}

/// `samples` runs of `drover <args>` on `home` (`["dashboard"]`: the dashboard in a pty,
/// timed until its output contains `shows`), each in a runner of its own.
pub fn measure(home: &Path, args: &[&str], shows: &str, samples: usize) -> Vec<Sample> {
    let spec = [
        drover_bin(),
        home.to_string_lossy().into_owned(),
        shows.into(),
    ]
    .into_iter()
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
                super::printed(&text, name)
                    .unwrap_or_else(|| panic!("the runner printed no {name}: {text} {out:?}"))
            };
            Sample {
                wall_ms: field("wall_ms="),
                maxrss_kb: field("maxrss_kb="),
            }
        })
        .collect()
}

/// The median and the worst of the walls (ms) and of the peaks (MiB).
pub fn summary(samples: &[Sample]) -> ((f64, f64), (f64, f64)) {
    let sorted = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[v.len() - 1])
    };
    (
        sorted(samples.iter().map(|s| s.wall_ms).collect()),
        sorted(samples.iter().map(|s| s.maxrss_kb / 1024.0).collect()),
    )
}

/// The dashboard (`drover` with no command) on a 200×60 pty: ms from exec until its
/// output contains `shows`; then it is ended (SIGTERM, by pid) and waited for.
fn dashboard_in_pty(bin: &str, home: &Path, shows: &str) -> f64 {
    let size = nix::pty::Winsize {
        ws_row: 60,
        ws_col: 200,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None).expect("a pty");
    let slave = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup the pty"));
    let start = Instant::now();
    let mut child = Command::new(bin)
        .current_dir(home)
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
                if seen.windows(shows.len()).any(|w| w == shows.as_bytes()) {
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
            "the dashboard never showed {shows:?}: {}",
            String::from_utf8_lossy(&seen)
        )
    })
}

/// The peak resident memory (KiB) of a running process, from /proc.
pub fn vmhwm_kb(pid: u32) -> f64 {
    proc_status_kb(pid, "VmHWM").unwrap_or(0.0)
}

/// One `KiB` field of /proc/<pid>/status (`VmHWM`, `RssAnon`, `RssFile`…).
pub fn proc_status_kb(pid: u32, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A running process's memory as one line: its peak (VmHWM) and what it holds now, split
/// into its own memory (RssAnon: heap, stacks) and the files it maps (RssFile: mostly the
/// `drover` binary's pages), in MiB.
pub fn memory_line(pid: u32) -> String {
    let mib = |field| proc_status_kb(pid, field).unwrap_or(0.0) / 1024.0;
    format!(
        "VmHWM {:>5.1} MiB   now: anon {:>5.1} MiB + file {:>5.1} MiB",
        mib("VmHWM"),
        mib("RssAnon"),
        mib("RssFile")
    )
}
