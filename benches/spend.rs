//! Spend over time at size: a ledger of `R` finished runs (default 100,000; each with
//! three usage rows spread over the last 90 days, four models and providers, 20
//! repositories, some workflows, two tags, a tenth estimated and about one row in a
//! hundred unpriced), then the real `drover spend --by X` exec'd for every grouping, and
//! `--by day --since 29d` (the dashboard's chart): with no owner (answered from the
//! ledger) and with a `drover serve` owner. Wall and peak memory, median and worst of 5.
//! The ledger is filled as a drover from before spend's running totals left it, then
//! migrated (timed): the totals are the migration's. Also timed: what the totals' trigger
//! adds to writing usage rows.
//!
//! Run: `cargo bench --bench spend`. `DROVER_BENCH_SPEND_RUNS` sets the runs;
//! `DROVER_BENCH_BIN` times another `drover` binary (with `DROVER_BENCH_SPEND_MIGRATE=0`
//! the ledger is left as filled, at schema 11: a drover from before the totals reads it). Target (issue figure): every answer
//! within 100 ms at 100,000 runs. Prints figures, asserts only that the answers add up.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::exec::{drover_bin, summary};
use drover_core::clock::now_millis;
use drover_core::paths::Paths;
use rusqlite::{Connection, params};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// Each command, sampled this many times (the median is printed).
const SAMPLES: usize = 5;

/// A schema version from before spend's running totals (migration 13; 12 is another
/// branch's): what a drover without them reads, so the same ledger times both.
const BEFORE_TOTALS: i64 = 11;

/// Usage rows inserted to time what the totals' trigger costs a write.
const WRITTEN: usize = 10_000;

/// Ms to insert [`WRITTEN`] usage rows (of runs already there, over the last 90 days) in
/// one transaction, rolled back.
fn write_usage(path: &Path) -> f64 {
    let mut conn = Connection::open(path).expect("open raw");
    let tx = conn.transaction().unwrap();
    let start = Instant::now();
    tx.execute(
        "WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < ?2)
         INSERT INTO usage (run_id, turn, at, provider, model, part, input, output,
             cost_usd, basis, fidelity, source, budget_session)
         SELECT printf('h%07d', i * 7 % (SELECT COUNT(*) FROM runs)), 4,
             ?1 - (i % 90) * 86400000, 'claude',
             'claude-sonnet-4-5', 'turn', 1200, 300, 0.02, 'reported', 'exact', 'provider',
             'default'
         FROM k",
        params![now_millis(), WRITTEN as i64],
    )
    .unwrap();
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    tx.rollback().unwrap();
    ms
}

fn main() {
    if common::exec::runner_main() {
        return;
    }
    let runs = common::env_or("DROVER_BENCH_SPEND_RUNS", 100_000);
    let home = tempfile::tempdir().expect("temp dir");
    let paths = Paths::under(home.path());
    paths.ensure_dirs().expect("dirs");
    let fill_start = Instant::now();
    // Filled as a drover from before the running totals left it; the totals are then
    // made by the migration, timed here.
    common::history::fill_at(&paths.ledger_file, BEFORE_TOTALS, runs, runs);
    let usage_rows = spread(&paths.ledger_file);
    println!(
        "spend: {runs} runs, {usage_rows} usage rows (filled in {:.1} s), the real binary exec'd",
        fill_start.elapsed().as_secs_f64()
    );
    // `DROVER_BENCH_SPEND_MIGRATE=0` leaves the ledger as it was filled: what a drover
    // from before the totals (`DROVER_BENCH_BIN`) can read.
    if common::env_or("DROVER_BENCH_SPEND_MIGRATE", 1) == 1 {
        migrate(&paths.ledger_file, usage_rows);
    }
    std::fs::File::open(&paths.ledger_file)
        .and_then(|f| f.sync_all())
        .expect("sync the ledger");
    check_totals(home.path());

    let commands: Vec<Vec<&str>> = [
        "day",
        "week",
        "model",
        "provider",
        "repository",
        "workflow",
        "tag",
    ]
    .into_iter()
    .map(|by| vec!["spend", "--by", by])
    .chain([vec!["spend", "--by", "day", "--since", "29d"]])
    .collect();
    println!("  no owner (read from the ledger)");
    for args in &commands {
        report(home.path(), args);
    }

    let mut owner = common::exec::start_owner(home.path());
    println!("  a `drover serve` owner answers");
    for args in &commands {
        report(home.path(), args);
    }
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(owner.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = owner.wait();
}

/// Brings the ledger to the totals (timed), and times what their trigger adds to writing
/// usage rows.
fn migrate(path: &Path, usage_rows: i64) {
    let before = write_usage(path);
    let migrated = Instant::now();
    drover_core::ledger::migrate_file_to(path, i64::MAX).expect("migrate");
    println!(
        "  the totals' migration over {usage_rows} usage rows: {:.2} s",
        migrated.elapsed().as_secs_f64()
    );
    let after = write_usage(path);
    println!(
        "  {WRITTEN} usage rows inserted in one transaction: {before:.1} ms without the \
         totals' trigger, {after:.1} ms with it ({:.1} µs a row more)",
        (after - before) * 1000.0 / WRITTEN as f64
    );
}

fn report(home: &Path, args: &[&str]) {
    let samples = common::exec::measure(home, args, "", SAMPLES);
    let ((wall, wall_worst), (rss, rss_worst)) = summary(&samples);
    println!(
        "    drover {:<36}{wall:>8.1} / {wall_worst:>6.1} ms   peak RSS {rss:>5.1} / {rss_worst:>5.1} MiB",
        args.join(" ")
    );
}

/// Makes the history's usage look like months of work: three rows a run, over 90 days,
/// several models, providers, repositories, workflows and tags, each basis. Returns the
/// usage rows.
fn spread(path: &Path) -> i64 {
    let now = now_millis();
    let mut conn = Connection::open(path).expect("open raw");
    let tx = conn.transaction().unwrap();
    // The filler wrote no usage rows: three a run, each spread as wanted.
    tx.execute(
        "INSERT INTO usage (run_id, turn, at, provider, model, part, input, output,
             cost_usd, basis, fidelity, source, budget_session)
         SELECT run_id, n, ?1 - (i % 90) * 86400000 - (i * 7919 % 86400000),
             CASE i % 4 WHEN 0 THEN 'claude' WHEN 1 THEN 'codex'
                 WHEN 2 THEN 'opencode' ELSE 'sim' END,
             CASE i % 4 WHEN 0 THEN 'claude-sonnet-4-5' WHEN 1 THEN 'gpt-5-codex'
                 WHEN 2 THEN 'kimi-k2' ELSE 'sim-standard' END,
             'turn', 1200, 300,
             CASE WHEN i % 97 = 0 THEN NULL ELSE 0.01 + (i % 50) / 100.0 END,
             CASE WHEN i % 97 = 0 THEN 'unpriced' WHEN i % 10 = 0 THEN 'estimated'
                 ELSE 'reported' END,
             'exact', 'provider', 'default'
         FROM (SELECT r.run_id, k.n, r.rowid * 3 + k.n AS i
               FROM runs r, (SELECT 1 AS n UNION ALL SELECT 2 UNION ALL SELECT 3) k)",
        params![now],
    )
    .unwrap();
    tx.execute(
        "UPDATE runs SET
             workspace_json = json_object('checkout', '/home/me/src/repo-' || (rowid % 20)),
             workflow_id = CASE WHEN rowid % 3 = 0 THEN 'wf-' || (rowid % 7) END,
             spec_json = json_set(spec_json, '$.tags',
                 json_array('area-' || (rowid % 5), 'team-' || (rowid % 3)))",
        [],
    )
    .unwrap();
    tx.commit().unwrap();
    conn.query_row("SELECT count(*) FROM usage", [], |r| r.get(0))
        .unwrap()
}

/// Every grouping's rows add up to the same total, and that total is the ledger's own.
fn check_totals(home: &Path) {
    let spend = |by: &str| -> serde_json::Value {
        let out = Command::new(drover_bin())
            .args(["spend", "--json", "--by", by])
            .env("DROVER_HOME", home)
            .env_remove("DROVER_LOG")
            .output()
            .expect("drover spend");
        assert!(out.status.success(), "drover spend --by {by} failed");
        serde_json::from_slice(&out.stdout).expect("JSON")
    };
    let day = spend("day");
    let total = day["total"]["reported_usd"].as_f64().unwrap()
        + day["total"]["estimated_usd"].as_f64().unwrap();
    for by in ["day", "week", "model", "provider", "repository", "workflow"] {
        let view = spend(by);
        let sum: f64 = view["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["reported_usd"].as_f64().unwrap() + r["estimated_usd"].as_f64().unwrap())
            .sum();
        assert!(
            (sum - total).abs() < 1e-6 * total.max(1.0),
            "--by {by}: the rows add up to {sum}, the total is {total}"
        );
    }
}
