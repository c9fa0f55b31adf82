//! The ledger of a long history, filled with raw SQL: `runs` finished runs (finished in
//! the last day), each with its turn, one usage row and `events / runs` events (half of
//! them transcript lines). Shared by `benches/history.rs` and `benches/spend.rs`.

use drover_core::clock::now_millis;
use drover_core::spec::{Capability, PermissionPolicy, Spec};
use rusqlite::{Connection, params};
use std::path::Path;

/// Fills a new ledger with `runs` finished runs (finished in the last day) and `events`
/// events spread evenly over them, with raw SQL in one transaction per table.
pub fn fill(path: &Path, runs: u64, events: u64) {
    {
        // The schema, as drover makes it.
        let (ledger, _) = drover_core::ledger::Ledger::open(
            path,
            drover_core::ledger::LedgerOptions::default(),
            now_millis(),
        )
        .expect("open ledger");
        ledger.close();
    }
    fill_rows(path, runs, events, true);
}

/// [`fill`] into a ledger of schema `version` (as a drover of that version left it),
/// without the usage rows (the caller writes its own): what a bench of a later migration
/// starts from.
pub fn fill_at(path: &Path, version: i64, runs: u64, events: u64) {
    drover_core::ledger::migrate_file_to(path, version).expect("old schema");
    fill_rows(path, runs, events, false);
}

fn fill_rows(path: &Path, runs: u64, events: u64, usage: bool) {
    let now = now_millis();
    let per_run = (events / runs.max(1)).max(1);
    let base = now - 86_400_000;
    let step = 86_400_000 / runs.max(1) as i64;
    let spec = serde_json::to_string(&spec()).expect("spec");
    let mut conn = Connection::open(path).expect("open raw");
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    let tx = conn.transaction().unwrap();
    tx.execute(
        "WITH RECURSIVE r(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM r WHERE i + 1 < ?1)
         INSERT INTO runs (run_id, created_at, updated_at, finished_at, state,
             completion_reason, provider, model, title, budget_session, spec_json)
         SELECT printf('h%07d', i), ?2 + i * ?3, ?2 + i * ?3 + 500, ?2 + i * ?3 + 500,
             'completed', 'done', 'sim', 'sim-standard',
             printf('history run %d: fix the flaky test in module %d', i, i % 97),
             'default', ?4
         FROM r",
        params![runs as i64, base, step, spec],
    )
    .unwrap();
    tx.execute(
        "WITH RECURSIVE r(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM r WHERE i + 1 < ?1)
         INSERT INTO turns (run_id, number, origin, started_at, ended_at, prompt_preview,
             text, cost_usd)
         SELECT printf('h%07d', i), 1, 'dispatch', ?2 + i * ?3, ?2 + i * ?3 + 500,
             'fix the flaky test', 'Fixed it.', 0.01
         FROM r",
        params![runs as i64, base, step],
    )
    .unwrap();
    if usage {
        tx.execute(
            "WITH RECURSIVE r(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM r WHERE i + 1 < ?1)
             INSERT INTO usage (run_id, turn, at, provider, model, part, input, output,
                 cost_usd, basis, fidelity, source, budget_session)
             SELECT printf('h%07d', i), 1, ?2 + i * ?3 + 500, 'sim', 'sim-standard', 'turn',
                 1200, 300, 0.01, 'reported', 'exact', 'provider', 'default'
             FROM r",
            params![runs as i64, base, step],
        )
        .unwrap();
    }
    tx.execute(
        "WITH RECURSIVE r(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM r WHERE i + 1 < ?1),
              s(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM s WHERE k + 1 <= ?2)
         INSERT INTO events (run_id, seq, kind, at, body_json)
         SELECT printf('h%07d', i), k,
             CASE WHEN k % 2 = 0 THEN 'transcript' ELSE 'provider' END,
             ?3 + i * ?4 + k,
             CASE WHEN k % 2 = 0
                  THEN json_object('line', 'text: working on step ' || k || ' of the task')
                  ELSE json_object('type', 'assistant', 'summary', 'step ' || k) END
         FROM r, s ORDER BY i, k",
        params![runs as i64, per_run as i64, base, step],
    )
    .unwrap();
    tx.commit().unwrap();
}

pub fn spec() -> Spec {
    Spec {
        provider: "sim".into(),
        model: Some("sim-standard".into()),
        effort: None,
        cwd: "/work/project".into(),
        task: "fix the flaky test".into(),
        context: None,
        title: "fix the flaky test".into(),
        tags: vec![],
        capability: Capability::Workspace,
        policy: PermissionPolicy::Ask,
        max_minutes: 45,
        budget_usd: 5.0,
        idle_timeout_secs: 1200,
        max_turns: 10,
        output_schema: None,
        workflow_id: None,
        parent_run: None,
        idempotency_key: None,
        queue_if_busy: true,
        scenario: None,
        class: None,
        workspace: None,
        carry_changes: false,
        sandbox: false,
        host: None,
        clamps: vec![],
    }
}
