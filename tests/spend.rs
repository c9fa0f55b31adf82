//! `drover spend` on a real ledger, through the real binary: each grouping sums the usage
//! rows it should, each basis apart (reported, estimated, unpriced counted, never $0);
//! days are the machine's local days (`TZ`); `--since` starts at a local day; the owner
//! answers as the ledger does; a date it cannot read is refused with `INVALID_REQUEST`.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::Home;
use drover_core::ledger::spend::Since;
use drover_core::ledger::{
    Ledger, LedgerOptions, LedgerReader, RetentionPolicy, RunPatch, RunRecord, SpendBy, SpendView,
    Synchronous, UsageRecord, WriteOp, migrate_file_to, retention,
};
use drover_core::paths::Paths;
use drover_core::run_state::RunState;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Value, json};
use std::path::Path;

/// 2026-11-01 23:30 UTC (18:30 in EST5).
const NOV1_2330: i64 = 1_793_575_800_000;
const HOUR: i64 = 3_600_000;

fn run(run_id: &str, spec: Value, workspace: Option<Value>, workflow: Option<&str>) -> WriteOp {
    WriteOp::InsertRun(Box::new(RunRecord {
        run_id: run_id.into(),
        created_at: NOV1_2330,
        updated_at: NOV1_2330,
        finished_at: Some(NOV1_2330),
        state: RunState::Completed,
        completion_reason: None,
        provider: "claude".into(),
        model: None,
        title: format!("task {run_id}"),
        budget_session: "default".into(),
        workflow_id: workflow.map(str::to_string),
        parent_run: None,
        idempotency_key: None,
        provider_session_id: None,
        removed: false,
        spec,
        live_state: None,
        result: None,
        workspace,
    }))
}

fn usage(
    run_id: &str,
    at: i64,
    provider: &str,
    model: &str,
    cost: Option<f64>,
    basis: &str,
) -> WriteOp {
    WriteOp::InsertUsage(Box::new(UsageRecord {
        run_id: run_id.into(),
        turn: Some(1),
        at,
        provider: provider.into(),
        model: Some(model.into()),
        part: "main".into(),
        input: 100,
        output: 10,
        reasoning: 0,
        cache_read: 0,
        cache_write: 0,
        cost_usd: cost,
        basis: basis.into(),
        fidelity: "exact".into(),
        source: "provider".into(),
        budget_session: "default".into(),
    }))
}

/// Three runs: `a` in a worktree of /src/a with two tags and a workflow, `b` in /src/b,
/// `c` in /src/a again; four usage rows across 1, 2 and 9 November (UTC).
fn home_with_history() -> Home {
    let home = Home::new();
    let paths = Paths::under(home.path());
    paths.ensure_dirs().unwrap();
    let (ledger, _) =
        Ledger::open(&paths.ledger_file, LedgerOptions::default(), NOV1_2330).unwrap();
    ledger
        .writer()
        .commit_blocking(vec![
            run(
                "a",
                json!({"task": "a", "cwd": "/src/a/sub", "tags": ["x", "y"]}),
                Some(json!({"checkout": "/src/a"})),
                Some("wf"),
            ),
            run(
                "b",
                json!({"task": "b", "cwd": "/src/b", "tags": []}),
                None,
                None,
            ),
            run("c", json!({"task": "c", "cwd": "/src/a"}), None, None),
            usage("a", NOV1_2330, "claude", "sonnet", Some(1.0), "reported"),
            usage(
                "a",
                NOV1_2330 + HOUR,
                "codex",
                "gpt",
                Some(0.5),
                "estimated",
            ),
            usage("b", NOV1_2330 + 12 * HOUR, "codex", "gpt", None, "unpriced"),
            usage(
                "c",
                NOV1_2330 + 8 * 24 * HOUR,
                "claude",
                "sonnet",
                Some(0.25),
                "reported",
            ),
        ])
        .unwrap();
    ledger.close();
    home
}

/// `drover spend ARGS --json` in `TZ=tz`: each row as (key, reported, estimated,
/// unpriced rows, runs), then the total.
fn spend(home: &Home, tz: &str, args: &[&str]) -> (Vec<Row>, Value) {
    let mut command = home.command(&[&["spend", "--json"], args].concat());
    command.env("TZ", tz);
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let view: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = view["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_string(),
                r["reported_usd"].as_f64().unwrap(),
                r["estimated_usd"].as_f64().unwrap(),
                r["unpriced_rows"].as_u64().unwrap(),
                r["runs"].as_u64().unwrap(),
            )
        })
        .collect();
    (rows, view["total"].clone())
}

/// A row as the tests compare it: key, reported, estimated, unpriced rows, runs.
type Row = (String, f64, f64, u64, u64);

fn row(key: &str, reported: f64, estimated: f64, unpriced: u64, runs: u64) -> Row {
    (key.into(), reported, estimated, unpriced, runs)
}

#[test]
fn days_are_local_days_with_each_basis_apart() {
    let home = home_with_history();
    let (utc, total) = spend(&home, "UTC", &["--by", "day"]);
    assert_eq!(
        utc,
        vec![
            row("2026-11-01", 1.0, 0.0, 0, 1),
            row("2026-11-02", 0.0, 0.5, 1, 2),
            row("2026-11-09", 0.25, 0.0, 0, 1),
        ]
    );
    assert_eq!(total["reported_usd"], 1.25);
    assert_eq!(total["estimated_usd"], 0.5);
    assert_eq!(total["unpriced_rows"], 1);
    assert_eq!(total["runs"], 3);
    assert_eq!(total["tokens"], 440);
    // Five hours west of UTC, the first two rows fall on 1 November; the third (11:30
    // UTC) on 2 November still.
    let (est, _) = spend(&home, "EST5", &["--by", "day"]);
    assert_eq!(
        est,
        vec![
            row("2026-11-01", 1.0, 0.5, 0, 1),
            row("2026-11-02", 0.0, 0.0, 1, 1),
            row("2026-11-09", 0.25, 0.0, 0, 1)
        ]
    );
    // Weeks are named by their Monday: 26 October and 2 November (UTC).
    let (weeks, _) = spend(&home, "UTC", &["--by", "week"]);
    assert_eq!(
        weeks,
        vec![
            row("2026-10-26", 1.0, 0.0, 0, 1),
            row("2026-11-02", 0.0, 0.5, 1, 2),
            row("2026-11-09", 0.25, 0.0, 0, 1)
        ]
    );
}

#[test]
fn names_are_grouped_by_spend_and_a_row_counts_once_in_the_total() {
    let home = home_with_history();
    let by = |what: &str| spend(&home, "UTC", &["--by", what]);
    assert_eq!(
        by("model").0,
        vec![row("sonnet", 1.25, 0.0, 0, 2), row("gpt", 0.0, 0.5, 1, 2)]
    );
    assert_eq!(
        by("provider").0,
        vec![row("claude", 1.25, 0.0, 0, 2), row("codex", 0.0, 0.5, 1, 2)]
    );
    // The worktree's checkout, else the cwd.
    assert_eq!(
        by("repository").0,
        vec![
            row("/src/a", 1.25, 0.5, 0, 2),
            row("/src/b", 0.0, 0.0, 1, 1)
        ]
    );
    assert_eq!(
        by("workflow").0,
        vec![row("wf", 1.0, 0.5, 0, 1), row("none", 0.25, 0.0, 1, 2)]
    );
    // Run `a` counts under both its tags; the total counts each row once.
    let (tags, total) = by("tag");
    assert_eq!(
        tags,
        vec![
            row("x", 1.0, 0.5, 0, 1),
            row("y", 1.0, 0.5, 0, 1),
            row("none", 0.25, 0.0, 1, 2)
        ]
    );
    assert_eq!(total["reported_usd"], 1.25);
    assert_eq!(total["estimated_usd"], 0.5);
}

#[test]
fn since_starts_at_a_local_day_and_a_bad_date_is_refused() {
    let home = home_with_history();
    let (rows, total) = spend(&home, "UTC", &["--by", "model", "--since", "2026-11-02"]);
    assert_eq!(
        rows,
        vec![row("gpt", 0.0, 0.5, 1, 2), row("sonnet", 0.25, 0.0, 0, 1)]
    );
    assert_eq!(total["runs"], 3);
    // Days back from today: the history is long past; by day, each day has its row.
    let (recent, total) = spend(&home, "UTC", &["--since", "2d"]);
    assert_eq!(recent.len(), 3, "{recent:?}");
    assert!(
        recent
            .iter()
            .all(|r| r.1 == 0.0 && r.2 == 0.0 && r.3 == 0 && r.4 == 0)
    );
    assert_eq!(total["runs"], 0);
    let line = home.refused(&["spend", "--since", "last tuesday"], "INVALID_REQUEST");
    assert!(line.contains("YYYY-MM-DD"), "{line}");
}

#[test]
fn the_owner_answers_as_the_ledger_does() {
    let home = home_with_history();
    let offline = spend(&home, "UTC", &["--by", "repository"]);
    let _owner = home.serve();
    // The owner was started with the test's environment; TZ matters only for days.
    let owned = spend(&home, "UTC", &["--by", "repository"]);
    assert_eq!(offline, owned);
    let human = home.drover(&["spend", "--by", "model"]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains("sonnet") && text.contains("1 row "), "{text}");
}

// The running totals (migration 13) against the rows they sum: after any sequence of
// writes, on a ledger migrated from before them, and through retention's deletes.

/// One write of a random history.
#[derive(Debug, Clone)]
enum Op {
    /// A new run: its tags (of four), its worktree's checkout (of three) or none, its cwd
    /// (of three), its workflow (of two) or none.
    Run {
        tags: Vec<u8>,
        checkout: Option<u8>,
        cwd: u8,
        workflow: Option<u8>,
    },
    /// A usage row of the `run`-th run (modulo the runs so far): minutes after the start
    /// of the history (over 40 days, in any order), provider and model (of three each,
    /// the model sometimes unknown), cost in cents (or none), basis, tokens.
    Usage {
        run: usize,
        minute: i64,
        provider: u8,
        model: Option<u8>,
        cents: Option<u16>,
        basis: u8,
        tokens: u16,
    },
    /// The run's workspace changes its checkout (the owner's `UpdateRun`).
    Checkout { run: usize, checkout: Option<u8> },
    /// The run's workflow or tags change (raw SQL: no op of the writer does it today).
    Retag {
        run: usize,
        tags: Vec<u8>,
        workflow: Option<u8>,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let tags = proptest::collection::btree_set(0u8..4, 0..3).prop_map(|t| t.into_iter().collect());
    prop_oneof![
        2 => (tags.clone(), proptest::option::of(0u8..3), 0u8..3, proptest::option::of(0u8..2))
            .prop_map(|(tags, checkout, cwd, workflow)| Op::Run { tags, checkout, cwd, workflow }),
        8 => (
            0usize..64,
            0i64..40 * 24 * 60,
            0u8..3,
            proptest::option::of(0u8..3),
            proptest::option::of(0u16..500),
            0u8..4,
            0u16..5000,
        )
            .prop_map(|(run, minute, provider, model, cents, basis, tokens)| Op::Usage {
                run,
                minute,
                provider,
                model,
                cents,
                basis,
                tokens,
            }),
        1 => (0usize..64, proptest::option::of(0u8..3))
            .prop_map(|(run, checkout)| Op::Checkout { run, checkout }),
        1 => (0usize..64, tags, proptest::option::of(0u8..2))
            .prop_map(|(run, tags, workflow)| Op::Retag { run, tags, workflow }),
    ]
}

/// The start of the random histories: 2026-10-30 00:00 UTC.
const HISTORY_START: i64 = NOV1_2330 - 2 * 24 * HOUR - 23 * HOUR - HOUR / 2;

fn tags_json(tags: &[u8]) -> Value {
    json!(tags.iter().map(|t| format!("tag-{t}")).collect::<Vec<_>>())
}

fn workspace_json(checkout: Option<u8>) -> Option<Value> {
    checkout.map(|c| json!({"checkout": format!("/src/repo-{c}")}))
}

fn usage_op(run_id: &str, op: &Op) -> Option<WriteOp> {
    let Op::Usage {
        minute,
        provider,
        model,
        cents,
        basis,
        tokens,
        ..
    } = op
    else {
        return None;
    };
    let basis = ["reported", "estimated", "unpriced", "free"][*basis as usize];
    Some(WriteOp::InsertUsage(Box::new(UsageRecord {
        run_id: run_id.into(),
        turn: Some(1),
        at: HISTORY_START + minute * 60_000,
        provider: ["claude", "codex", "opencode"][*provider as usize].into(),
        model: model.map(|m| format!("model-{m}")),
        part: "main".into(),
        input: u64::from(*tokens),
        output: 7,
        reasoning: 0,
        cache_read: 1,
        cache_write: 0,
        cost_usd: if basis == "unpriced" {
            None
        } else {
            cents.map(|c| f64::from(c) / 100.0)
        },
        basis: basis.into(),
        fidelity: "exact".into(),
        source: "provider".into(),
        budget_session: "default".into(),
    })))
}

/// Applies `ops` through the ledger's writer (the raw connection for what no op of the
/// writer does); `runs` is the run ids made so far.
fn apply(ledger: &Ledger, raw: &rusqlite::Connection, runs: &mut Vec<String>, ops: &[Op]) {
    let writer = ledger.writer();
    for op in ops {
        let pick = |run: &usize| runs.get(run % runs.len().max(1)).cloned();
        match op {
            Op::Run {
                tags,
                checkout,
                cwd,
                workflow,
            } => {
                let id = format!("r{}", runs.len());
                let spec =
                    json!({"task": "t", "cwd": format!("/src/cwd-{cwd}"), "tags": tags_json(tags)});
                writer
                    .commit_blocking(vec![run(
                        &id,
                        spec,
                        workspace_json(*checkout),
                        workflow.map(|w| format!("wf-{w}")).as_deref(),
                    )])
                    .unwrap();
                runs.push(id);
            }
            Op::Usage { run, .. } => {
                if let Some(id) = pick(run) {
                    writer
                        .commit_blocking(vec![usage_op(&id, op).unwrap()])
                        .unwrap();
                }
            }
            Op::Checkout { run, checkout } => {
                if let Some(id) = pick(run) {
                    writer
                        .commit_blocking(vec![WriteOp::UpdateRun {
                            run_id: id,
                            patch: Box::new(RunPatch {
                                updated_at: NOV1_2330,
                                // A shared run's workspace has no checkout: its cwd counts.
                                workspace: Some(
                                    workspace_json(*checkout).unwrap_or(json!({"mode": "shared"})),
                                ),
                                ..RunPatch::default()
                            }),
                        }])
                        .unwrap();
                }
            }
            Op::Retag {
                run,
                tags,
                workflow,
            } => {
                if let Some(id) = pick(run) {
                    raw.execute(
                        "UPDATE runs SET spec_json = json_set(spec_json, '$.tags', json(?2)),
                             workflow_id = ?3 WHERE run_id = ?1",
                        rusqlite::params![
                            id,
                            tags_json(tags).to_string(),
                            workflow.map(|w| format!("wf-{w}"))
                        ],
                    )
                    .unwrap();
                }
            }
        }
    }
}

/// Every grouping, over everything and since a few days of the history: the totals
/// answer (they can: one calendar) what the rows answer. Dollars to a millionth of a
/// cent (summed in another order); counts exactly.
fn totals_match_rows(path: &Path, days: &[i64]) -> Result<(), TestCaseError> {
    let reader = LedgerReader::open(path).unwrap();
    let day_of = rusqlite::Connection::open_in_memory().unwrap();
    let since = std::iter::once(None).chain(days.iter().map(|d| {
        let day: String = day_of
            .query_row(
                "SELECT date(?1 / 1000, 'unixepoch')",
                [HISTORY_START + d * 24 * HOUR],
                |r| r.get(0),
            )
            .unwrap();
        Some(Since::parse(&day).unwrap())
    }));
    for since in since {
        for by in SpendBy::ALL {
            let totals = reader.spend_from_totals(by, since).unwrap();
            prop_assert!(totals.is_some(), "the totals answer --by {by:?} {since:?}");
            let totals = keyed(&totals.unwrap());
            let rows = keyed(&reader.spend_from_rows(by, since).unwrap());
            prop_assert_eq!(
                totals.iter().map(|r| &r.0).collect::<Vec<_>>(),
                rows.iter().map(|r| &r.0).collect::<Vec<_>>(),
                "--by {:?} since {:?}",
                by,
                since
            );
            for (t, r) in totals.iter().zip(&rows) {
                prop_assert!(
                    (t.1 - r.1).abs() < 1e-8 && (t.2 - r.2).abs() < 1e-8,
                    "--by {:?} since {:?}: {:?} vs {:?}",
                    by,
                    since,
                    t,
                    r
                );
                prop_assert_eq!(
                    (t.3, t.4, t.5),
                    (r.3, r.4, r.5),
                    "--by {:?} since {:?} {}: unpriced rows, runs, tokens",
                    by,
                    since,
                    &t.0
                );
            }
        }
    }
    Ok(())
}

/// The view's rows and its total, by key: (key, reported, estimated, unpriced, runs,
/// tokens).
fn keyed(view: &SpendView) -> Vec<(String, f64, f64, u64, u64, u64)> {
    let mut rows: Vec<_> = view
        .rows
        .iter()
        .chain([&view.total])
        .map(|r| {
            (
                r.key.clone(),
                r.reported_usd,
                r.estimated_usd,
                r.unpriced_rows,
                r.runs,
                r.tokens,
            )
        })
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    rows
}

fn fast_ledger(path: &Path) -> Ledger {
    let options = LedgerOptions {
        synchronous: Synchronous::Normal,
        ..LedgerOptions::default()
    };
    Ledger::open(path, options, NOV1_2330).unwrap().0
}

/// proptest's generator for a fixed seed (ChaCha: the same inputs every run).
fn runner(cases: u32) -> TestRunner {
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&0x5be7_d0e5_u64.to_le_bytes());
    TestRunner::new_with_rng(
        Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed),
    )
}

#[test]
fn the_totals_answer_what_the_rows_sum_after_any_writes() {
    let ops = proptest::collection::vec(op(), 1..120);
    let days = proptest::collection::vec(0i64..41, 3);
    runner(40)
        .run(&(ops, days), |(ops, days)| {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("ledger.sqlite3");
            let ledger = fast_ledger(&path);
            let raw = rusqlite::Connection::open(&path).unwrap();
            raw.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
            let mut runs = Vec::new();
            apply(&ledger, &raw, &mut runs, &ops);
            totals_match_rows(&path, &days)?;
            ledger.close();
            Ok(())
        })
        .unwrap();
}

#[test]
fn a_ledger_from_before_the_totals_gets_them_on_open() {
    let ops = proptest::collection::vec(op(), 1..150);
    let more = proptest::collection::vec(op(), 1..40);
    let days = proptest::collection::vec(0i64..41, 3);
    runner(12)
        .run(&(ops, more, days), |(ops, more, days)| {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("ledger.sqlite3");
            // As a drover of migration 12 left it: runs and usage rows, no totals.
            migrate_file_to(&path, 12).unwrap();
            let raw = rusqlite::Connection::open(&path).unwrap();
            let mut runs = Vec::new();
            old_writes(&raw, &mut runs, &ops);
            let old = LedgerReader::open(&path).unwrap();
            prop_assert!(old.spend_from_totals(SpendBy::Day, None).unwrap().is_none());
            let summed = keyed(&old.spend(SpendBy::Model, None).unwrap());
            prop_assert_eq!(
                &summed,
                &keyed(&old.spend_from_rows(SpendBy::Model, None).unwrap())
            );
            drop(old);
            // The owner's open brings it to the totals: they answer what the rows sum,
            // and go on doing so as the writer adds to them.
            let ledger = fast_ledger(&path);
            totals_match_rows(&path, &days)?;
            apply(&ledger, &raw, &mut runs, &more);
            totals_match_rows(&path, &days)?;
            ledger.close();
            Ok(())
        })
        .unwrap();
}

/// `ops` written with raw SQL into a ledger of an older schema (runs and usage rows).
fn old_writes(raw: &rusqlite::Connection, runs: &mut Vec<String>, ops: &[Op]) {
    for op in ops {
        let pick = |run: &usize| runs.get(run % runs.len().max(1)).cloned();
        match op {
            Op::Run {
                tags,
                checkout,
                cwd,
                workflow,
            } => {
                let id = format!("r{}", runs.len());
                raw.execute(
                    "INSERT INTO runs (run_id, created_at, updated_at, state, provider, title,
                         budget_session, workflow_id, spec_json, workspace_json)
                     VALUES (?1, 0, 0, 'completed', 'claude', 't', 'default', ?2, ?3, ?4)",
                    rusqlite::params![
                        id,
                        workflow.map(|w| format!("wf-{w}")),
                        json!({"task": "t", "cwd": format!("/src/cwd-{cwd}"), "tags": tags_json(tags)})
                            .to_string(),
                        workspace_json(*checkout).map(|w| w.to_string()),
                    ],
                )
                .unwrap();
                runs.push(id);
            }
            Op::Usage { run, .. } => {
                let Some(id) = pick(run) else { continue };
                let Some(WriteOp::InsertUsage(u)) = usage_op(&id, op) else {
                    unreachable!()
                };
                raw.execute(
                    "INSERT INTO usage (run_id, turn, at, provider, model, part, input, output,
                         reasoning, cache_read, cache_write, cost_usd, basis, fidelity, source,
                         budget_session)
                     VALUES (?1, 1, ?2, ?3, ?4, 'main', ?5, ?6, 0, ?7, 0, ?8, ?9, 'exact',
                         'provider', 'default')",
                    rusqlite::params![
                        u.run_id,
                        u.at,
                        u.provider,
                        u.model,
                        u.input as i64,
                        u.output as i64,
                        u.cache_read as i64,
                        u.cost_usd,
                        u.basis
                    ],
                )
                .unwrap();
            }
            Op::Checkout { run, checkout } => {
                let Some(id) = pick(run) else { continue };
                raw.execute(
                    "UPDATE runs SET workspace_json = ?2 WHERE run_id = ?1",
                    rusqlite::params![id, workspace_json(*checkout).map(|w| w.to_string())],
                )
                .unwrap();
            }
            Op::Retag {
                run,
                tags,
                workflow,
            } => {
                let Some(id) = pick(run) else { continue };
                raw.execute(
                    "UPDATE runs SET spec_json = json_set(spec_json, '$.tags', json(?2)),
                         workflow_id = ?3 WHERE run_id = ?1",
                    rusqlite::params![
                        id,
                        tags_json(tags).to_string(),
                        workflow.map(|w| format!("wf-{w}"))
                    ],
                )
                .unwrap();
            }
        }
    }
}

#[test]
fn retention_deleting_runs_leaves_their_money_in_the_totals() {
    let home = home_with_history();
    let path = Paths::under(home.path()).ledger_file;
    let before: Vec<_> = SpendBy::ALL
        .iter()
        .map(|by| keyed(&LedgerReader::open(&path).unwrap().spend(*by, None).unwrap()))
        .collect();
    // The run cap keeps one run: the two finished first are deleted whole, their usage
    // rows with them.
    let ledger = fast_ledger(&path);
    let policy = RetentionPolicy {
        events_after: None,
        max_runs: Some(1),
    };
    let pruned =
        retention::prune(&path, &ledger.writer(), policy, NOV1_2330 + 30 * 24 * HOUR).unwrap();
    assert_eq!(pruned.deleted, 2);
    ledger.close();
    let reader = LedgerReader::open(&path).unwrap();
    let rows = reader.spend_from_rows(SpendBy::Day, None).unwrap();
    assert_eq!(rows.total.runs, 1, "the rows of two runs are gone");
    for (by, before) in SpendBy::ALL.iter().zip(before) {
        assert_eq!(
            keyed(&reader.spend(*by, None).unwrap()),
            before,
            "--by {by:?}"
        );
    }
}
