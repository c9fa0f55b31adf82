//! The ledger through its public API: acknowledged writes survive an abrupt end of the
//! process, recovery interrupts runs left active, the schema refuses gaps in seqs, and
//! retention deletes old finished runs.

use drover::ledger::{
    EventRecord, Ledger, LedgerOptions, LedgerReader, RunPatch, RunRecord, WriteOp, kind,
};
use drover::live_state::{self, Cause, LiveStateEvent, LiveStateKind};
use drover::run_state::RunState;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn run_record(run_id: &str, state: RunState, created_at: i64) -> RunRecord {
    RunRecord {
        run_id: run_id.to_string(),
        created_at,
        updated_at: created_at,
        finished_at: state.is_terminal().then_some(created_at),
        state,
        completion_reason: None,
        provider: "sim".into(),
        model: Some("sim-standard".into()),
        title: format!("task {run_id}"),
        budget_session: "default".into(),
        workflow_id: None,
        parent_run: None,
        idempotency_key: None,
        provider_session_id: None,
        removed: false,
        spec: json!({"task": "do it"}),
        live_state: None,
        result: None,
        workspace: None,
    }
}

fn event(run_id: &str, seq: u64) -> WriteOp {
    WriteOp::event(EventRecord {
        run_id: run_id.into(),
        seq,
        kind: "provider".into(),
        at: 1_000 + seq as i64,
        body: json!({"line": format!("event {seq}")}),
    })
    .unwrap()
}

fn open(path: &Path) -> Ledger {
    Ledger::open(path, LedgerOptions::default(), 10_000)
        .unwrap()
        .0
}

fn assert_contiguous(reader: &LedgerReader, run_id: &str) -> u64 {
    let events = reader.events(run_id, 0).unwrap();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1, "seq gap in {run_id}");
    }
    events.len() as u64
}

/// Child half of `acknowledged_events_survive_an_abrupt_end`: writes, prints each acked
/// seq, then aborts the process without closing anything.
#[test]
fn child_writer_that_aborts() {
    let Ok(path) = std::env::var("DROVER_TEST_LEDGER_CHILD") else {
        return; // only meaningful when the parent test spawns it
    };
    let (ledger, _) = Ledger::open(Path::new(&path), LedgerOptions::default(), 1).unwrap();
    let writer = ledger.writer();
    writer
        .commit_blocking(vec![WriteOp::InsertRun(Box::new(run_record(
            "r1",
            RunState::Running,
            1,
        )))])
        .unwrap();
    let mut acked = 0;
    for chunk in 0..20u64 {
        // Unacked writes in between: they may or may not survive, acked ones must.
        for seq in chunk * 100 + 1..chunk * 100 + 100 {
            writer.send(event("r1", seq)).unwrap();
        }
        let last = chunk * 100 + 100;
        writer.commit_blocking(vec![event("r1", last)]).unwrap();
        acked = last;
        println!("ACKED {acked}");
    }
    // Fire a few more without waiting, then die mid-flight.
    for seq in acked + 1..acked + 50 {
        writer.send(event("r1", seq)).unwrap();
    }
    std::process::abort();
}

#[test]
fn acknowledged_events_survive_an_abrupt_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite3");
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_writer_that_aborts",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("DROVER_TEST_LEDGER_CHILD", &path)
        .output()
        .unwrap();
    assert!(!out.status.success(), "the child must die by abort");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let acked: u64 = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("ACKED "))
        .filter_map(|n| n.trim().parse().ok())
        .max()
        .expect("the child acknowledged writes");
    assert_eq!(acked, 2000);

    let ledger = open(&path);
    let reader = ledger.reader().unwrap();
    let count = assert_contiguous(&reader, "r1");
    assert!(
        count >= acked,
        "{count} events on disk, {acked} acknowledged"
    );
    // The run was left running: recovery interrupted it and appended to the same stream.
    let run = reader.run("r1").unwrap().unwrap();
    assert_eq!(run.state, RunState::Interrupted);
}

#[test]
fn runs_left_active_are_interrupted_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite3");
    {
        let ledger = open(&path);
        let w = ledger.writer();
        let admitted = live_state::Assignment {
            expected_seq: 0,
            state: LiveStateKind::Admitted,
            bound: Some(20_000),
            detail: None,
            cause: None,
            reopen: false,
        };
        let working = live_state::Assignment {
            expected_seq: 1,
            state: LiveStateKind::Working,
            bound: Some(50_000),
            detail: Some("model turn".into()),
            cause: None,
            reopen: false,
        };
        let s1 = live_state::assign(None, &admitted, 10_000).unwrap();
        let s2 = live_state::assign(Some(&s1), &working, 11_000).unwrap();
        let mut running = run_record("running", RunState::Running, 1);
        running.live_state = Some(s2);
        let mut ops = vec![
            WriteOp::InsertRun(Box::new(running)),
            WriteOp::InsertRun(Box::new(run_record("idle-no-live", RunState::Idle, 2))),
            WriteOp::InsertRun(Box::new(run_record("done", RunState::Completed, 3))),
        ];
        for (seq, (at, a)) in [(10_000, admitted), (11_000, working)]
            .into_iter()
            .enumerate()
        {
            ops.push(
                WriteOp::event(EventRecord {
                    run_id: "running".into(),
                    seq: seq as u64 + 1,
                    kind: kind::LIVE_STATE.into(),
                    at,
                    body: serde_json::to_value(LiveStateEvent { at, assignment: a }).unwrap(),
                })
                .unwrap(),
            );
        }
        w.commit_blocking(ops).unwrap();
        ledger.close();
    }
    let (ledger, recovery) = Ledger::open(&path, LedgerOptions::default(), 99_000).unwrap();
    assert_eq!(recovery.interrupted, ["running", "idle-no-live"]);
    let reader = ledger.reader().unwrap();
    for run_id in ["running", "idle-no-live"] {
        let run = reader.run(run_id).unwrap().unwrap();
        assert_eq!(run.state, RunState::Interrupted);
        assert_eq!(run.finished_at, Some(99_000));
        let live = run.live_state.expect("live state recorded");
        assert_eq!(live.state, LiveStateKind::Ended);
        assert_eq!(live.cause, Some(Cause::ResidentReplaced));
        // Folding the run's live-state events gives the same state as the row.
        let events: Vec<LiveStateEvent> = reader
            .events(run_id, 0)
            .unwrap()
            .into_iter()
            .filter(|e| e.kind == kind::LIVE_STATE)
            .map(|e| serde_json::from_value(e.body).unwrap())
            .collect();
        let folded = live_state::fold(&events);
        assert_eq!(folded.skipped, 0);
        assert_eq!(folded.state.as_ref(), Some(&live));
        let last = reader.events(run_id, 0).unwrap().pop().unwrap();
        assert_eq!(last.kind, kind::RUN_STATE);
        assert_eq!(last.body["to"], "interrupted");
        assert_contiguous(&reader, run_id);
    }
    let done = reader.run("done").unwrap().unwrap();
    assert_eq!(done.state, RunState::Completed);
    assert!(reader.events("done", 0).unwrap().is_empty());
    // A second open finds nothing more to recover.
    drop(reader);
    ledger.close();
    let (_ledger, again) = Ledger::open(&path, LedgerOptions::default(), 100_000).unwrap();
    assert!(again.interrupted.is_empty());
}

#[test]
fn a_gap_in_seq_is_refused_and_the_rest_of_the_batch_kept() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = open(&dir.path().join("l.sqlite3"));
    let w = ledger.writer();
    w.commit_blocking(vec![WriteOp::InsertRun(Box::new(run_record(
        "r",
        RunState::Running,
        1,
    )))])
    .unwrap();
    w.send(event("r", 1)).unwrap();
    let gap = w.send_acked(vec![event("r", 3)]);
    let repeat = w.send_acked(vec![event("r", 1)]);
    let good = w.send_acked(vec![event("r", 2)]);
    assert!(gap.blocking_recv().unwrap().is_err());
    assert!(repeat.blocking_recv().unwrap().is_err());
    good.blocking_recv().unwrap().unwrap();
    let reader = ledger.reader().unwrap();
    assert_eq!(assert_contiguous(&reader, "r"), 2);
    // An event for a run that does not exist is refused by the foreign key.
    assert!(w.commit_blocking(vec![event("ghost", 1)]).is_err());
    // Updating a run that does not exist is refused, not silently ignored.
    let patch = WriteOp::UpdateRun {
        run_id: "ghost".into(),
        patch: Box::new(RunPatch::default()),
    };
    assert!(w.commit_blocking(vec![patch]).is_err());
}

#[test]
fn patches_change_only_what_they_name() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = open(&dir.path().join("l.sqlite3"));
    let w = ledger.writer();
    w.commit_blocking(vec![
        WriteOp::InsertRun(Box::new(run_record("r", RunState::Running, 1))),
        WriteOp::UpdateRun {
            run_id: "r".into(),
            patch: Box::new(RunPatch {
                updated_at: 5,
                state: Some(RunState::Completed),
                completion_reason: Some("complete".into()),
                finished_at: Some(5),
                provider_session_id: Some("sess-1".into()),
                result: Some(json!({"status": "done"})),
                ..RunPatch::default()
            }),
        },
    ])
    .unwrap();
    let run = ledger.reader().unwrap().run("r").unwrap().unwrap();
    assert_eq!(run.state, RunState::Completed);
    assert_eq!(run.completion_reason.as_deref(), Some("complete"));
    assert_eq!(run.provider_session_id.as_deref(), Some("sess-1"));
    assert_eq!(run.model.as_deref(), Some("sim-standard"));
    assert_eq!(run.title, "task r");
    assert_eq!(run.result, Some(json!({"status": "done"})));
}

#[test]
fn retention_keeps_the_newest_finished_runs_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    {
        let ledger = open(&path);
        let mut ops = Vec::new();
        for i in 0..30 {
            let id = format!("f{i:02}");
            ops.push(WriteOp::InsertRun(Box::new(run_record(
                &id,
                RunState::Completed,
                i,
            ))));
            ops.push(event(&id, 1));
        }
        ops.push(WriteOp::InsertRun(Box::new(run_record(
            "live",
            RunState::Running,
            0,
        ))));
        ledger.writer().commit_blocking(ops).unwrap();
        ledger.close();
    }
    let options = LedgerOptions {
        retention_finished_runs: 10,
        retention_interval: Duration::from_millis(20),
        ..LedgerOptions::default()
    };
    let (ledger, _) = Ledger::open(&path, options, 100).unwrap();
    // The pass runs on its own thread; wait (bounded) for it to land.
    let reader = ledger.reader().unwrap();
    let mut remaining = usize::MAX;
    for _ in 0..200 {
        ledger.writer().commit_blocking(vec![]).unwrap();
        remaining = reader.runs(true).unwrap().len();
        if remaining == 10 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // 10 finished kept + the run recovery interrupted ("live" is finished now, and newest).
    assert_eq!(remaining, 10);
    let ids: Vec<String> = reader
        .runs(true)
        .unwrap()
        .into_iter()
        .map(|r| r.run_id)
        .collect();
    assert!(ids.contains(&"live".to_string()));
    assert!(ids.contains(&"f29".to_string()));
    assert!(!ids.contains(&"f19".to_string()));
    assert!(
        reader.events("f00", 0).unwrap().is_empty(),
        "events go with their run"
    );
}

#[test]
fn retention_never_deletes_a_run_whose_worktree_is_still_there() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    {
        let ledger = open(&path);
        let with = |id: &str, at: i64, workspace: Value| {
            let mut run = run_record(id, RunState::Completed, at);
            run.workspace = Some(workspace);
            WriteOp::InsertRun(Box::new(run))
        };
        let mut ops = vec![
            with(
                "worktree-ready",
                0,
                json!({"mode": "worktree", "status": "ready", "worktree": "/w/1"}),
            ),
            with(
                "worktree-merged",
                1,
                json!({"mode": "worktree", "status": "merged"}),
            ),
            with(
                "worktree-kept",
                2,
                json!({"mode": "worktree", "status": "kept"}),
            ),
            with(
                "shared",
                3,
                json!({"mode": "shared", "status": "ready", "dir": "/w"}),
            ),
        ];
        for i in 0..5 {
            ops.push(WriteOp::InsertRun(Box::new(run_record(
                &format!("new{i}"),
                RunState::Completed,
                100 + i,
            ))));
        }
        ledger.writer().commit_blocking(ops).unwrap();
        ledger.close();
    }
    let options = LedgerOptions {
        retention_finished_runs: 5,
        retention_interval: Duration::from_millis(20),
        ..LedgerOptions::default()
    };
    let (ledger, _) = Ledger::open(&path, options, 100).unwrap();
    let reader = ledger.reader().unwrap();
    let ids = |reader: &drover::ledger::LedgerReader| -> Vec<String> {
        let mut ids: Vec<String> = reader
            .runs(true)
            .unwrap()
            .into_iter()
            .map(|r| r.run_id)
            .collect();
        ids.sort();
        ids
    };
    for _ in 0..200 {
        ledger.writer().commit_blocking(vec![]).unwrap();
        if ids(&reader).len() == 6 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // The five newest, and the old run whose worktree is on disk; a merged, kept or shared
    // workspace holds nothing drover would lose.
    assert_eq!(
        ids(&reader),
        ["new0", "new1", "new2", "new3", "new4", "worktree-ready"]
    );
}

#[test]
fn a_newer_schema_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 999).unwrap();
    }
    let err = Ledger::open(&path, LedgerOptions::default(), 1)
        .err()
        .unwrap();
    let user = drover::DroverError::from(err);
    assert_eq!(user.code, drover::ErrorCode::LedgerError);
    assert!(user.message.contains("newer"), "{}", user.message);
}

#[test]
fn a_damaged_row_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    let ledger = open(&path);
    ledger
        .writer()
        .commit_blocking(vec![WriteOp::InsertRun(Box::new(run_record(
            "r",
            RunState::Completed,
            1,
        )))])
        .unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE runs SET spec_json = '{not json', state = 'bogus'",
        [],
    )
    .unwrap();
    let err = ledger.reader().unwrap().run("r").unwrap_err();
    assert!(err.to_string().contains("damaged"), "{err}");
}
