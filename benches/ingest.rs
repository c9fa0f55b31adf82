//! Ingest throughput: simulated agents emitting events as fast as they can, child stdout →
//! adapter → dispatcher → ledger committed; the same into a ledger without the search
//! index (what the index costs); beside raw rusqlite inserts of the same number of rows
//! (the ledger benchmark's baseline), in the same run.
//!
//! Run: `cargo bench --bench ingest`. Targets: at least 85 % of the raw rate; the index
//! costs at most 5 % of the rate without it. Each phase's CPU time is printed too (the
//! owner's, which is this process, and its children's, the simulated agents'): on a
//! machine shared with other work the rates move with its load, the CPU a phase used much
//! less. Sizes:
//! `DROVER_BENCH_RUNS` (default 100) runs × `DROVER_BENCH_EVENTS` (default 10,000) events.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::{DROP_SEARCH_INDEX, env_or, fts_options, raw_inserts};
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

fn main() {
    let runs = env_or("DROVER_BENCH_RUNS", 100);
    let events = env_or("DROVER_BENCH_EVENTS", 10_000);
    let home = tempfile::tempdir().expect("temp dir");
    // The ledger without the search index first, then with it (as drover runs), then
    // raw rusqlite: all three in one run, on one machine's load.
    let ((bare_secs, bare_committed), bare_cpu, bare_sims) =
        cpu_of(|| ingest(&home.path().join("bare"), runs, events, false));
    let ((elapsed, committed), owner_cpu, sims_cpu) =
        cpu_of(|| ingest(&home.path().join("indexed"), runs, events, true));
    let per_run = committed / runs.max(1);
    let (raw_secs, raw_cpu, _) =
        cpu_of(|| raw_inserts(&home.path().join("raw.sqlite3"), runs, per_run));
    let ingest_rate = committed as f64 / elapsed;
    let bare_rate = bare_committed as f64 / bare_secs;
    let raw_rate = (runs * per_run) as f64 / raw_secs;
    println!("ingest benchmark: {runs} simulated runs, {committed} events committed");
    println!("  sim stdout -> ledger:     {ingest_rate:>12.0} events/s ({elapsed:.2} s)");
    println!(
        "  the same, no search index: {bare_rate:>11.0} events/s ({bare_secs:.2} s): the index costs {:.1} % (target <= 5 %)",
        100.0 * (1.0 - ingest_rate / bare_rate)
    );
    println!("  raw rusqlite, 10k-row tx: {raw_rate:>12.0} events/s ({raw_secs:.2} s)");
    println!(
        "  ratio ingest/raw: {:.1} % (target >= 85 %)",
        100.0 * ingest_rate / raw_rate
    );
    let us = |secs: f64, n: u64| 1e6 * secs / n.max(1) as f64;
    println!(
        "  CPU per event: owner {:.1} us (no index {:.1} us: the index costs {:.1} %), \
         simulated agents {:.1} us (no index {:.1} us), raw rusqlite {:.1} us",
        us(owner_cpu, committed),
        us(bare_cpu, bare_committed),
        100.0 * (us(owner_cpu, committed) / us(bare_cpu, bare_committed) - 1.0),
        us(sims_cpu, committed),
        us(bare_sims, bare_committed),
        us(raw_cpu, runs * per_run),
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
