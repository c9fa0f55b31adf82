//! Ingest throughput: simulated agents emitting events as fast as they can, child stdout →
//! adapter → dispatcher → ledger committed; the same into a ledger without the search
//! index (what the index costs); beside raw rusqlite inserts of the same number of rows
//! (the ledger benchmark's baseline), in the same run.
//!
//! Run: `cargo bench --bench ingest`. Targets: at least 85 % of the raw rate; the index
//! costs at most 5 % of the rate without it. The indexed and bare ledgers are timed in
//! `DROVER_BENCH_PAIRS` (default 3) pairs, alternating which goes first; each figure is
//! the median over the pairs. Each phase runs in a process of its own (this benchmark
//! again), the owner, as `drover serve` runs one dispatcher for its life; raw rusqlite
//! runs in this one. Each phase's CPU time is printed too (the owner's, the phase's
//! process, and its children's, the simulated agents'): on a machine shared with other
//! work the rates move with its load, the CPU a phase used much less. Sizes:
//! `DROVER_BENCH_RUNS` (default 100) runs × `DROVER_BENCH_EVENTS` (default 10,000) events.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::{DROP_SEARCH_INDEX, env_or, fts_options, median, raw_inserts};
use drover_core::config::Config;
use drover_core::dispatch::{self, DispatcherOptions, Request};
use drover_core::ledger::{Ledger, LedgerOptions};
use drover_core::paths::Paths;
use drover_core::spec::SpecInput;
use std::time::Instant;

/// CPU time (user + system) so far, in seconds: this process's, and its waited-for
/// children's.
fn cpu() -> (f64, f64) {
    use nix::sys::resource::{UsageWho, getrusage};
    let secs = |who| {
        getrusage(who).map_or(0.0, |u| {
            let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
            t(u.user_time()) + t(u.system_time())
        })
    };
    (secs(UsageWho::RUSAGE_SELF), secs(UsageWho::RUSAGE_CHILDREN))
}

/// CPU seconds used by this process and its children while `f` ran, with its answer.
fn cpu_of<T>(f: impl FnOnce() -> T) -> (T, f64, f64) {
    let (own, children) = cpu();
    let answer = f();
    let (own_after, children_after) = cpu();
    (answer, own_after - own, children_after - children)
}

/// One phase's figures: events committed, its wall seconds, the owner's CPU seconds
/// (this process) and the simulated agents' (its children).
struct Phase {
    committed: u64,
    secs: f64,
    owner_cpu: f64,
    sims_cpu: f64,
}

/// Set in the process a phase runs in: which ledger (`indexed` or `bare`), and its home.
const PHASE_ENV: &str = "DROVER_BENCH_INGEST_PHASE";
const HOME_ENV: &str = "DROVER_BENCH_INGEST_HOME";

impl Phase {
    /// Runs the phase in a process of its own (this benchmark again, told so by
    /// [`PHASE_ENV`]): one dispatcher for the life of the process, as the owner runs, and
    /// no phase left with the heap and the threads of the ones before it.
    fn run(dir: &std::path::Path, indexed: bool) -> Phase {
        let out = std::process::Command::new(std::env::current_exe().expect("the bench"))
            .arg("--bench")
            .env(PHASE_ENV, if indexed { "indexed" } else { "bare" })
            .env(HOME_ENV, dir)
            .stderr(std::process::Stdio::inherit())
            .output()
            .expect("the phase runs");
        assert!(out.status.success(), "the phase failed: {}", out.status);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let mut figures = None;
        for line in stdout.lines() {
            match line.strip_prefix("phase ") {
                Some(rest) => figures = Some(rest.to_string()),
                None => println!("{line}"),
            }
        }
        let figures = figures.expect("the phase says its figures");
        let v: Vec<f64> = figures
            .split_whitespace()
            .map(|f| f.parse().expect("a figure"))
            .collect();
        Phase {
            committed: v[0] as u64,
            secs: v[1],
            owner_cpu: v[2],
            sims_cpu: v[3],
        }
    }

    /// The phase itself, in the process [`Phase::run`] started: its figures on one line.
    fn in_this_process(phase: &str, home: &std::path::Path, runs: u64, events: u64) {
        let ((secs, committed), owner_cpu, sims_cpu) =
            cpu_of(|| ingest(home, runs, events, phase == "indexed"));
        println!("phase {committed} {secs} {owner_cpu} {sims_cpu}");
    }

    fn rate(&self) -> f64 {
        self.committed as f64 / self.secs
    }

    /// Microseconds of the owner's CPU per event committed.
    fn owner_us(&self) -> f64 {
        1e6 * self.owner_cpu / self.committed.max(1) as f64
    }

    fn sims_us(&self) -> f64 {
        1e6 * self.sims_cpu / self.committed.max(1) as f64
    }
}

fn main() {
    // The heap as the `drover` binary sets it up (this process is the owner).
    drover_core::resident::limit_heap_arenas();
    let runs = env_or("DROVER_BENCH_RUNS", 100);
    let events = env_or("DROVER_BENCH_EVENTS", 10_000);
    let pairs = env_or("DROVER_BENCH_PAIRS", 3).max(1);
    if let (Ok(phase), Some(home)) = (std::env::var(PHASE_ENV), std::env::var_os(HOME_ENV)) {
        return Phase::in_this_process(&phase, std::path::Path::new(&home), runs, events);
    }
    let home = tempfile::tempdir().expect("temp dir");
    // Pairs of the ledger without the search index and with it (as drover runs), each
    // pair's order the other way round from the one before, so a change in the machine's
    // load or a warmer cache weighs on both sides alike; then raw rusqlite. Each figure
    // is the median over the pairs of the pair's own ratio.
    let mut phases = Vec::new();
    for pair in 0..pairs {
        let dir = |name: &str| home.path().join(format!("{name}-{pair}"));
        let (bare, indexed) = if pair % 2 == 0 {
            let bare = Phase::run(&dir("bare"), false);
            (bare, Phase::run(&dir("indexed"), true))
        } else {
            let indexed = Phase::run(&dir("indexed"), true);
            (Phase::run(&dir("bare"), false), indexed)
        };
        println!(
            "  pair {}: {:>9.0} events/s with the index, {:>9.0} without; owner CPU {:.1} us / {:.1} us an event",
            pair + 1,
            indexed.rate(),
            bare.rate(),
            indexed.owner_us(),
            bare.owner_us(),
        );
        phases.push((bare, indexed));
    }
    let committed = phases[0].1.committed;
    let per_run = committed / runs.max(1);
    let (raw_secs, raw_cpu, _) =
        cpu_of(|| raw_inserts(&home.path().join("raw.sqlite3"), runs, per_run));
    let raw_rate = (runs * per_run) as f64 / raw_secs;
    let of_pairs = |f: &dyn Fn(&Phase, &Phase) -> f64| {
        median(
            &mut phases
                .iter()
                .map(|(bare, indexed)| f(bare, indexed))
                .collect::<Vec<_>>(),
        )
    };
    let ingest_rate = of_pairs(&|_, i| i.rate());
    let bare_rate = of_pairs(&|b, _| b.rate());
    let rate_cost = of_pairs(&|b, i| 100.0 * (1.0 - i.rate() / b.rate()));
    let cpu_cost = of_pairs(&|b, i| 100.0 * (i.owner_us() / b.owner_us() - 1.0));
    println!(
        "ingest benchmark: {runs} simulated runs, {committed} events committed, \
         {pairs} pairs (medians)"
    );
    println!("  sim stdout -> ledger:       {ingest_rate:>12.0} events/s");
    println!(
        "  the same, no search index:  {bare_rate:>12.0} events/s: the index costs {rate_cost:.1} % (target <= 5 %)"
    );
    println!("  raw rusqlite, 10k-row tx:   {raw_rate:>12.0} events/s ({raw_secs:.2} s)");
    println!(
        "  ratio ingest/raw: {:.1} % (target >= 85 %)",
        100.0 * ingest_rate / raw_rate
    );
    println!(
        "  CPU per event: owner {:.1} us (no index {:.1} us: the index costs {cpu_cost:.1} %), \
         simulated agents {:.1} us (no index {:.1} us), raw rusqlite {:.1} us",
        of_pairs(&|_, i| i.owner_us()),
        of_pairs(&|b, _| b.owner_us()),
        of_pairs(&|_, i| i.sims_us()),
        of_pairs(&|b, _| b.sims_us()),
        1e6 * raw_cpu / (runs * per_run).max(1) as f64,
    );
}

/// `runs` sim runs of `events` events each, dispatched at once to an owner whose home is
/// `dir` (its ledger without the search index unless `indexed`): the time from the first
/// dispatch until all are idle, and the events committed.
fn ingest(dir: &std::path::Path, runs: u64, events: u64, indexed: bool) -> (f64, u64) {
    let paths = Paths::under(dir);
    paths.ensure_dirs().expect("dirs");
    {
        let (ledger, _) =
            Ledger::open(&paths.ledger_file, LedgerOptions::default(), 1).expect("open ledger");
        ledger.close();
    }
    if !indexed {
        let conn = rusqlite::Connection::open(&paths.ledger_file).expect("ledger");
        conn.execute_batch(DROP_SEARCH_INDEX)
            .expect("drop the index");
    } else if let Some(extra) = fts_options(&paths.ledger_file) {
        println!("  (the index made with {extra:?})");
    }
    std::fs::write(
        &paths.config_file,
        format!(
            "[limits]\nper_session_running = {runs}\nqueued_per_session = {runs}\n\
             session_warning_usd = 100000.0\nsession_hard_cap_usd = 100000.0\n\
             [limits.per_provider]\nsim = {runs}\n\
             [workspaces]\nshared_conflict = \"allow\"\n\
             [providers.sim.env]\nDROVER_SIM_FLOOD_EVENTS = \"{events}\"\n"
        ),
    )
    .expect("config");
    let config = Config::load(&paths.config_file).expect("config loads");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let (handle, join) = dispatch::start(DispatcherOptions {
            paths: paths.clone(),
            config,
            self_exe: env!("CARGO_BIN_EXE_drover").into(),
            warden: false,
            ledger_gate: None,
        })
        .await
        .expect("dispatcher starts");
        let start = Instant::now();
        let mut ids = Vec::new();
        for i in 0..runs {
            let spec = SpecInput {
                provider: Some("sim".into()),
                scenario: Some("flood".into()),
                task: format!("flood {i}"),
                cwd: Some(dir.to_path_buf()),
                ..SpecInput::default()
            };
            let run = handle
                .request(Request::Dispatch {
                    spec: Box::new(spec),
                })
                .await
                .and_then(|r| r.into_run())
                .expect("dispatch");
            ids.push(run.head.run_id);
        }
        let outcome = handle
            .request(Request::Wait {
                run_ids: ids,
                workflow: None,
                until: dispatch::api::WaitUntil::Idle,
                any: false,
                timeout_secs: Some(3600),
            })
            .await
            .and_then(|r| r.into_wait())
            .expect("wait");
        let elapsed = start.elapsed().as_secs_f64();
        assert!(!outcome.timed_out, "runs did not finish");
        handle.shutdown().await;
        let _ = join.await;
        let conn = rusqlite::Connection::open(&paths.ledger_file).expect("ledger");
        let committed: i64 = conn
            .query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))
            .expect("count");
        if indexed {
            // Each run's text is in the index: the bench measured what it says.
            let found: i64 = conn
                .query_row(
                    "SELECT COUNT(*) FROM search WHERE search MATCH 'chunk'",
                    [],
                    |r| r.get(0),
                )
                .expect("search");
            assert_eq!(
                found as u64, runs,
                "one document of agent text per run's turn"
            );
        }
        (elapsed, committed as u64)
    })
}
