//! Shared by the benchmarks: the raw-rusqlite baseline every throughput figure is
//! compared with, and the rows it inserts; the real binary exec'd (`exec`); a long
//! history's ledger (`history`).

#![allow(dead_code)]

pub mod exec;
pub mod history;

use drover_core::config::Config;
use drover_core::control::Host;
use drover_core::dispatch::DispatcherOptions;
use drover_core::ledger::{Ledger, LedgerOptions, RunRecord, WriteOp};
use drover_core::paths::Paths;
use drover_core::run_state::RunState;
use rusqlite::{Connection, params};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Instant;

/// An owner in this process over `paths`, as `drover serve` starts one: its config read
/// from there, the real binary for its sims, a warden.
pub async fn start_owner_in_process(paths: &Paths) -> Host {
    let config = Config::load(&paths.config_file).expect("config loads");
    Host::start(DispatcherOptions {
        paths: paths.clone(),
        config,
        self_exe: env!("CARGO_BIN_EXE_drover").into(),
        warden: true,
        ledger_gate: None,
    })
    .await
    .expect("the owner starts")
}

/// The number a bench's child process printed as the word `name<value>` (e.g.
/// `wall_ms=3.2`) in `text`.
pub fn printed(text: &str, name: &str) -> Option<f64> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix(name)?.parse().ok())
}

/// The search index's tables, index and triggers, dropped: a ledger's rows as they were
/// before migration 7 (its version left as it is; the writer indexes nothing in a ledger
/// without the index).
pub const DROP_SEARCH_INDEX: &str = "DROP TRIGGER search_run_added;
    DROP TRIGGER search_run_deleted; DROP TRIGGER search_tool_pruned; DROP TRIGGER search_turn_text_pruned;
    DROP TRIGGER search_turn_added; DROP TRIGGER search_turn_changed;
    DROP TRIGGER search_turn_reopened; DROP INDEX events_turn_started;
    DROP TABLE search; DROP TABLE search_runs;";

/// To compare FTS5's options: when `DROVER_BENCH_FTS` is set (say `prefix='2'`,
/// `detail=column`, or empty for none), the ledger at `path` gets its (empty) search
/// table made again with those options instead of its own (`prefix='2 3'`); its
/// triggers stay. `DROVER_BENCH_FTS_AUTOMERGE` sets FTS5's `automerge` instead of the
/// ledger's. Returns what was used.
pub fn fts_options(path: &Path) -> Option<String> {
    let table = std::env::var("DROVER_BENCH_FTS").ok();
    let merge = std::env::var("DROVER_BENCH_FTS_AUTOMERGE").ok().map(|m| {
        m.parse::<i64>()
            .expect("DROVER_BENCH_FTS_AUTOMERGE is a number")
    });
    if table.is_none() && merge.is_none() {
        return None;
    }
    let conn = Connection::open(path).expect("open");
    let mut used = Vec::new();
    if let Some(extra) = table {
        let options = if extra.trim().is_empty() {
            String::new()
        } else {
            format!(", {extra}")
        };
        conn.execute_batch(&format!(
            "DROP TABLE search; CREATE VIRTUAL TABLE search USING fts5(text, content = '',
                contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 2'{options});"
        ))
        .expect("the search table with DROVER_BENCH_FTS's options");
        used.push(extra);
    }
    if let Some(merge) = merge {
        conn.execute(
            "INSERT INTO search (search, rank) VALUES ('automerge', ?1)",
            [merge],
        )
        .expect("automerge");
        used.push(format!("automerge={merge}"));
    }
    Some(used.join(", "))
}

/// The median of `values` (the mean of the middle two when their number is even).
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

pub fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn run_record(i: u64) -> RunRecord {
    RunRecord {
        run_id: format!("run-{i:04}"),
        created_at: 1,
        updated_at: 1,
        finished_at: None,
        state: RunState::Running,
        completion_reason: None,
        provider: "sim".into(),
        model: None,
        title: format!("bench run {i}"),
        budget_session: "default".into(),
        workflow_id: None,
        parent_run: None,
        idempotency_key: None,
        provider_session_id: None,
        removed: false,
        spec: json!({}),
        live_state: None,
        result: None,
        workspace: None,
    }
}

pub fn body(seq: u64) -> Value {
    json!({"type": "assistant", "summary": format!("text: working on step {seq} of the task")})
}

/// The same rows inserted directly with rusqlite, 10,000 per transaction.
pub fn raw_inserts(path: &Path, runs: u64, events: u64) -> f64 {
    {
        let (ledger, _) = Ledger::open(path, LedgerOptions::default(), 1).expect("open ledger");
        let inserts = (0..runs)
            .map(|i| WriteOp::InsertRun(Box::new(run_record(i))))
            .collect();
        ledger
            .writer()
            .commit_blocking(inserts)
            .expect("insert runs");
        ledger.close();
    }
    let mut conn = Connection::open(path).expect("open raw");
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    conn.pragma_update(None, "foreign_keys", "ON").unwrap();
    let ids: Vec<String> = (0..runs).map(|i| format!("run-{i:04}")).collect();
    let start = Instant::now();
    let mut tx = conn.transaction().unwrap();
    let mut in_tx = 0;
    for seq in 1..=events {
        for id in &ids {
            {
                let mut st = tx
                    .prepare_cached(
                        "INSERT INTO events (run_id, seq, kind, at, body_json)
                         VALUES (?1, ?2, ?3, ?4, ?5)",
                    )
                    .unwrap();
                let text = serde_json::to_string(&body(seq)).unwrap();
                st.execute(params![id, seq as i64, "provider", seq as i64, text])
                    .unwrap();
            }
            in_tx += 1;
            if in_tx == 10_000 {
                tx.commit().unwrap();
                tx = conn.transaction().unwrap();
                in_tx = 0;
            }
        }
    }
    tx.commit().unwrap();
    start.elapsed().as_secs_f64()
}
