//! Ledger throughput: events per second through the group-committing writer thread, beside
//! raw rusqlite inserts of the same rows in 10,000-row transactions, on the same schema.
//!
//! Run: `cargo bench --bench ledger`. Target: the writer reaches at least 95 % of the raw
//! rate as the owner runs it (`Synchronous::Deferred`: commits at `NORMAL`, the WAL synced
//! by the sync thread beside the next commit, acknowledgements after that sync); the
//! writer with `FULL` (a sync inside each commit) and with `NORMAL` alone are measured in
//! the same run to show what durability against a machine crash costs each way (the raw
//! baseline stays `NORMAL`). Sizes can be lowered for a quick look with `DROVER_BENCH_RUNS` and
//! `DROVER_BENCH_EVENTS`.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::{body, env_or, raw_inserts, run_record};
use drover_core::ledger::{EventRecord, Ledger, LedgerOptions, Synchronous, WriteOp};
use std::path::Path;
use std::time::Instant;

/// Creates the ledger file with its runs and returns the time to push every event through
/// the writer (fire-and-forget, then one acknowledged barrier).
fn through_writer(path: &Path, runs: u64, events: u64, synchronous: Synchronous) -> f64 {
    let options = LedgerOptions {
        retention: drover_core::ledger::RetentionPolicy::from_limits(0, 0),
        synchronous,
        ..LedgerOptions::default()
    };
    let (ledger, _) = Ledger::open(path, options, 1).expect("open ledger");
    let writer = ledger.writer();
    let inserts = (0..runs)
        .map(|i| WriteOp::InsertRun(Box::new(run_record(i))))
        .collect();
    writer.commit_blocking(inserts).expect("insert runs");
    let ids: Vec<String> = (0..runs).map(|i| format!("run-{i:04}")).collect();
    let start = Instant::now();
    for seq in 1..=events {
        for id in &ids {
            writer
                .send(
                    WriteOp::event(EventRecord {
                        run_id: id.clone(),
                        seq,
                        kind: "provider".into(),
                        at: seq as i64,
                        body: body(seq),
                    })
                    .expect("serialize"),
                )
                .expect("send");
        }
    }
    writer.commit_blocking(vec![]).expect("barrier");
    let elapsed = start.elapsed().as_secs_f64();
    ledger.close();
    elapsed
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let runs = env_or("DROVER_BENCH_RUNS", 100);
    let events = env_or("DROVER_BENCH_EVENTS", 10_000);
    let total = (runs * events) as f64;
    let dir = tempfile::tempdir().expect("temp dir");
    let full_secs = through_writer(
        &dir.path().join("writer-full.sqlite3"),
        runs,
        events,
        Synchronous::Full,
    );
    let deferred_secs = through_writer(
        &dir.path().join("writer-deferred.sqlite3"),
        runs,
        events,
        Synchronous::Deferred,
    );
    let normal_secs = through_writer(
        &dir.path().join("writer-normal.sqlite3"),
        runs,
        events,
        Synchronous::Normal,
    );
    let raw_secs = raw_inserts(&dir.path().join("raw.sqlite3"), runs, events);
    let full_rate = total / full_secs;
    let deferred_rate = total / deferred_secs;
    let normal_rate = total / normal_secs;
    let raw_rate = total / raw_secs;
    println!("ledger benchmark: {runs} runs x {events} events = {total} events");
    println!("  writer, synchronous=FULL:     {full_rate:>12.0} events/s ({full_secs:.2} s)");
    println!(
        "  writer, as the owner (Deferred): {deferred_rate:>9.0} events/s ({deferred_secs:.2} s)"
    );
    println!("  writer, synchronous=NORMAL:   {normal_rate:>12.0} events/s ({normal_secs:.2} s)");
    println!("  raw rusqlite, 10k-row tx:     {raw_rate:>12.0} events/s ({raw_secs:.2} s)");
    println!(
        "  ratio writer(Deferred)/raw: {:.1} % (target >= 95 %); FULL/raw: {:.1} %; \
         Deferred/NORMAL: {:.1} %",
        100.0 * deferred_rate / raw_rate,
        100.0 * full_rate / raw_rate,
        100.0 * deferred_rate / normal_rate
    );
}
