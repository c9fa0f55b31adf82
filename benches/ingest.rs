//! Ingest throughput: simulated agents emitting events as fast as they can, child stdout →
//! adapter → dispatcher → ledger committed; beside raw rusqlite inserts of the same number
//! of rows (the ledger benchmark's baseline), in the same run.
//!
//! Run: `cargo bench --bench ingest`. Target: at least 85 % of the raw rate. Sizes:
//! `DROVER_BENCH_RUNS` (default 100) runs × `DROVER_BENCH_EVENTS` (default 10,000) events.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::{env_or, raw_inserts};
use drover_core::config::Config;
use drover_core::dispatch::{self, DispatcherOptions, Request};
use drover_core::paths::Paths;
use drover_core::spec::SpecInput;
use std::time::Instant;

fn main() {
    let runs = env_or("DROVER_BENCH_RUNS", 100);
    let events = env_or("DROVER_BENCH_EVENTS", 10_000);
    let home = tempfile::tempdir().expect("temp dir");
    let paths = Paths::under(home.path());
    paths.ensure_dirs().expect("dirs");
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
    let (elapsed, committed) = runtime.block_on(async {
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
                cwd: Some(home.path().to_path_buf()),
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
        (elapsed, committed as u64)
    });
    let per_run = committed / runs.max(1);
    let raw_secs = raw_inserts(&home.path().join("raw.sqlite3"), runs, per_run);
    let ingest_rate = committed as f64 / elapsed;
    let raw_rate = (runs * per_run) as f64 / raw_secs;
    println!("ingest benchmark: {runs} simulated runs, {committed} events committed");
    println!("  sim stdout -> ledger:     {ingest_rate:>12.0} events/s ({elapsed:.2} s)");
    println!("  raw rusqlite, 10k-row tx: {raw_rate:>12.0} events/s ({raw_secs:.2} s)");
    println!(
        "  ratio ingest/raw: {:.1} % (target >= 85 %)",
        100.0 * ingest_rate / raw_rate
    );
}
