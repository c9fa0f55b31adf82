//! `drover spend` on a real ledger, through the real binary: each grouping sums the usage
//! rows it should, each basis apart (reported, estimated, unpriced counted, never $0);
//! days are the machine's local days (`TZ`); `--since` starts at a local day; the owner
//! answers as the ledger does; a date it cannot read is refused with `INVALID_REQUEST`.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::Home;
use drover_core::ledger::{Ledger, LedgerOptions, RunRecord, UsageRecord, WriteOp};
use drover_core::paths::Paths;
use drover_core::run_state::RunState;
use serde_json::{Value, json};

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
