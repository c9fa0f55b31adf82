//! The ledger through its public API: acknowledged writes survive an abrupt end of the
//! process, recovery interrupts runs left active, the schema refuses gaps in seqs, and
//! retention prunes old runs' events (keeping every run's row, turns, usage and
//! decisions) and deletes runs only beyond its hard cap; runs are read a page at a time.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use drover_core::ledger::{
    DecisionRecord, EventRecord, Ledger, LedgerOptions, LedgerReader, LedgerWriter,
    RetentionPolicy, RunPatch, RunRecord, RunsPage, TurnRecord, UsageRecord, WriteOp, kind,
    retention,
};
use drover_core::live_state::{self, Cause, LiveStateEvent, LiveStateKind};
use drover_core::run_state::RunState;
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

/// Commits a run's row (created at `created_at`), acknowledged.
fn insert_run(writer: &LedgerWriter, run_id: &str, state: RunState, created_at: i64) {
    writer
        .commit_blocking(vec![WriteOp::InsertRun(Box::new(run_record(
            run_id, state, created_at,
        )))])
        .unwrap();
}

/// A ledger at `dir`/ledger.sqlite3 whose commits and syncs pass a test gate; its path.
fn gated_ledger(dir: &Path) -> (Ledger, drover_core::ledger::Gate, std::path::PathBuf) {
    let path = dir.join("ledger.sqlite3");
    let gate = drover_core::ledger::Gate::default();
    let mut options = LedgerOptions::default();
    options.writer.gate = Some(gate.clone());
    let (ledger, _) = Ledger::open(&path, options, 0).unwrap();
    (ledger, gate, path)
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
#[ignore = "the child half of acknowledged_events_survive_an_abrupt_end, which runs it"]
fn child_writer_that_aborts() {
    let path = std::env::var("DROVER_TEST_LEDGER_CHILD")
        .expect("run by acknowledged_events_survive_an_abrupt_end, which names the ledger");
    let (ledger, _) = Ledger::open(Path::new(&path), LedgerOptions::default(), 1).unwrap();
    let writer = ledger.writer();
    insert_run(&writer, "r1", RunState::Running, 1);
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
            "--ignored",
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
    // The run was left running, its row a test's (its spec does not read back as a
    // dispatch's, so no dispatcher could hold it): recovery interrupted it and appended to
    // the same stream.
    let run = reader.run("r1").unwrap().unwrap();
    assert_eq!(run.state, RunState::Interrupted);
}

#[test]
fn recovery_leaves_runs_to_the_dispatcher_and_interrupts_only_a_row_that_does_not_read_back() {
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
        running.live_state = Some(s2.clone());
        // A run whose row reads back whole: the dispatcher puts it back
        // (docs/ARCHITECTURE.md §"A restart").
        let mut readable = run_record("readable", RunState::Running, 4);
        readable.spec = stored_spec();
        readable.live_state = Some(s2);
        let mut ops = vec![
            WriteOp::InsertRun(Box::new(running)),
            WriteOp::InsertRun(Box::new(run_record("idle-no-live", RunState::Idle, 2))),
            WriteOp::InsertRun(Box::new(run_record("done", RunState::Completed, 3))),
            WriteOp::InsertRun(Box::new(readable)),
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
    // (This file's rows carry a test spec that does not read back as a dispatch's.)
    assert_eq!(recovery.interrupted, ["running", "idle-no-live"]);
    let reader = ledger.reader().unwrap();
    let readable = reader.run("readable").unwrap().unwrap();
    assert_eq!(readable.state, RunState::Running, "left for the dispatcher");
    assert!(reader.events("readable", 0).unwrap().is_empty());
    for run_id in ["running", "idle-no-live"] {
        let run = reader.run(run_id).unwrap().unwrap();
        assert_eq!(run.state, RunState::Interrupted);
        assert_eq!(run.finished_at, None, "interrupted is not an end");
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
    insert_run(&w, "r", RunState::Running, 1);
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

fn kinded(run_id: &str, seq: u64, kind: &str) -> WriteOp {
    WriteOp::event(EventRecord {
        run_id: run_id.into(),
        seq,
        kind: kind.into(),
        at: 1_000 + seq as i64,
        body: json!({"line": format!("{kind} {seq}"), "text": format!("{kind} {seq}")}),
    })
    .unwrap()
}

/// A run's turn, usage row (priced at `cost`) and decision.
fn history_of(run_id: &str, cost: f64) -> Vec<WriteOp> {
    vec![
        WriteOp::UpsertTurn(Box::new(TurnRecord {
            run_id: run_id.into(),
            number: 1,
            origin: "dispatch".into(),
            started_at: 1_000,
            ended_at: Some(1_100),
            prompt_preview: "do it".into(),
            text: Some(format!("{run_id} did it")),
            usage: None,
            cost_usd: Some(cost),
            result: Some(json!({"status": "done"})),
            evidence: None,
        })),
        WriteOp::InsertUsage(Box::new(UsageRecord {
            run_id: run_id.into(),
            turn: Some(1),
            at: 1_100,
            provider: "sim".into(),
            model: Some("sim-standard".into()),
            part: "turn".into(),
            input: 10,
            output: 5,
            reasoning: 0,
            cache_read: 0,
            cache_write: 0,
            cost_usd: Some(cost),
            basis: "reported".into(),
            fidelity: "exact".into(),
            source: "provider".into(),
            budget_session: "default".into(),
        })),
        WriteOp::InsertDecision(Box::new(DecisionRecord {
            run_id: Some(run_id.into()),
            at: 1_050,
            kind: "permission".into(),
            request_id: Some("q1".into()),
            who: "user".into(),
            decision: "allow".into(),
            body: json!({"tool": "Bash"}),
        })),
    ]
}

const DAY: i64 = 86_400_000;

#[test]
fn retention_prunes_old_events_and_keeps_each_runs_row_turns_usage_and_decisions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    let now = 400 * DAY;
    // No pass of its own: this test runs them.
    let options = LedgerOptions {
        retention: RetentionPolicy::from_limits(0, 0),
        ..LedgerOptions::default()
    };
    let (ledger, _) = Ledger::open(&path, options, now).unwrap();
    let writer = ledger.writer();
    let mut old = run_record("old", RunState::Completed, 1_000);
    old.finished_at = Some(now - 31 * DAY);
    let mut recent = run_record("recent", RunState::Completed, 1_000);
    recent.finished_at = Some(now - 29 * DAY);
    let mut ops = vec![
        WriteOp::InsertRun(Box::new(old)),
        WriteOp::InsertRun(Box::new(recent)),
        // Active since long ago: never touched.
        WriteOp::InsertRun(Box::new(run_record("active", RunState::Running, 1_000))),
    ];
    let kinds = [
        "provider",
        "transcript",
        "note",
        "route",
        "live_state",
        "provider",
    ];
    for id in ["old", "recent", "active"] {
        for (i, kind) in kinds.iter().enumerate() {
            ops.push(kinded(id, i as u64 + 1, kind));
        }
        ops.extend(history_of(id, 0.25));
    }
    writer.commit_blocking(ops).unwrap();

    let policy = RetentionPolicy::from_limits(30, 0);
    let pruned = retention::prune(&path, &writer, policy, now).unwrap();
    assert_eq!(pruned.events_of, 1, "only the run finished 31 days ago");
    assert_eq!(pruned.deleted, 0);

    let reader = ledger.reader().unwrap();
    let seqs = |id: &str| -> Vec<(u64, String)> {
        reader
            .events(id, 0)
            .unwrap()
            .into_iter()
            .map(|e| (e.seq, e.kind))
            .collect()
    };
    // Its note and route card, and its last event (its seqs go on from it).
    assert_eq!(
        seqs("old"),
        [
            (3, "note".to_string()),
            (4, "route".into()),
            (6, "provider".into())
        ]
    );
    assert_eq!(seqs("recent").len(), 6);
    assert_eq!(seqs("active").len(), 6);
    assert_eq!(reader.events_pruned_at("old").unwrap(), Some(now));
    assert_eq!(reader.events_pruned_at("recent").unwrap(), None);
    for id in ["old", "recent", "active"] {
        assert!(reader.run(id).unwrap().is_some(), "{id}'s row stays");
        assert_eq!(reader.turns(id).unwrap().len(), 1, "{id}'s turn stays");
        assert_eq!(
            reader.usage(Some(id)).unwrap().len(),
            1,
            "{id}'s usage stays"
        );
        assert_eq!(
            reader.decisions(id).unwrap().len(),
            1,
            "{id}'s decision stays"
        );
    }
    assert_eq!(
        reader.run("active").unwrap().unwrap().state,
        RunState::Running
    );
    // The spend still counts the pruned run.
    assert!((reader.session_totals("default").unwrap().spent_usd - 0.75).abs() < 1e-9);

    // The next event of a pruned run goes on from its last seq.
    writer
        .commit_blocking(vec![kinded("old", 7, "provider")])
        .unwrap();
    // A second pass finds nothing new.
    let again = retention::prune(&path, &writer, policy, now).unwrap();
    assert_eq!(again, retention::Pruned::default());
    // What `show` and the transcript say of it.
    let tail = drover_core::dispatch::projections::transcript_from_ledger(
        &reader,
        "old",
        drover_core::dispatch::api::TranscriptFormat::Tail,
    )
    .unwrap();
    assert_eq!(tail.events_pruned_at, Some(now));
    assert!(
        tail.lines[0].contains("retention pruned"),
        "{:?}",
        tail.lines
    );
    ledger.close();
}

/// A stored spec the dispatcher can read back (a resume rebuilds the run from it).
fn stored_spec() -> Value {
    serde_json::to_value(drover_core::spec::Spec {
        provider: "sim".into(),
        model: Some("sim-standard".into()),
        effort: None,
        cwd: std::env::temp_dir(),
        task: "do it".into(),
        context: None,
        title: "do it".into(),
        tags: vec![],
        capability: drover_core::spec::Capability::Workspace,
        policy: drover_core::spec::PermissionPolicy::Ask,
        max_minutes: 45,
        budget_usd: 5.0,
        idle_timeout_secs: 1200,
        max_turns: 6,
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
    })
    .unwrap()
}

#[test]
fn retention_keeps_the_follow_ups_an_interrupted_run_has_not_sent() {
    use drover_core::dispatch::core::{FOLLOW_UP_QUEUED, FOLLOW_UP_SENT};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    let now = 400 * DAY;
    let options = LedgerOptions {
        retention: RetentionPolicy::from_limits(0, 0),
        ..LedgerOptions::default()
    };
    let (ledger, _) = Ledger::open(&path, options, now).unwrap();
    let writer = ledger.writer();
    // Interrupted by a restart 31 days ago, mid-turn, by a drover that still wrote an
    // end on an interrupted run's row, with two follow-ups queued behind its turns and
    // one of them sent.
    let mut run = run_record("left", RunState::Interrupted, 1_000);
    run.finished_at = Some(now - 31 * DAY);
    run.provider_session_id = Some("sess-1".into());
    run.spec = stored_spec();
    let queued = |seq: u64, text: &str| {
        WriteOp::event(EventRecord {
            run_id: "left".into(),
            seq,
            kind: FOLLOW_UP_QUEUED.into(),
            at: 1_000 + seq as i64,
            body: json!({"text": text}),
        })
        .unwrap()
    };
    let mut ops = vec![
        WriteOp::InsertRun(Box::new(run)),
        kinded("left", 1, "transcript"),
        queued(2, "first follow-up"),
        queued(3, "second follow-up"),
        kinded("left", 4, "transcript"),
        kinded("left", 5, FOLLOW_UP_SENT),
        kinded("left", 6, "transcript"),
        kinded("left", 7, kind::LIVE_STATE),
    ];
    ops.extend(history_of("left", 0.5));
    writer.commit_blocking(ops).unwrap();

    let pruned =
        retention::prune(&path, &writer, RetentionPolicy::from_limits(30, 0), now).unwrap();
    assert_eq!(pruned.events_of, 1, "its transcript is pruned");
    let reader = ledger.reader().unwrap();
    let kinds: Vec<(u64, String)> = reader
        .events("left", 0)
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            (2, FOLLOW_UP_QUEUED.to_string()),
            (3, FOLLOW_UP_QUEUED.into()),
            (5, FOLLOW_UP_SENT.into()),
            (7, kind::LIVE_STATE.into()),
        ]
    );
    // What the next owner reads to put it back: the follow-up not yet sent, to send
    // after its resume turn.
    let record = reader.run("left").unwrap().unwrap();
    let data = drover_core::dispatch::projections::resume_data(&reader, record).unwrap();
    assert_eq!(data.follow_ups, ["second follow-up"]);
    assert_eq!(data.last_seq, 7, "its seqs go on from where they were");
    ledger.close();
}

#[test]
fn retention_prunes_in_the_background_and_keeps_every_run() {
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
            ops.push(event(&id, 2));
        }
        ledger.writer().commit_blocking(ops).unwrap();
        ledger.close();
    }
    let options = LedgerOptions {
        retention: RetentionPolicy::from_limits(30, 1_000),
        retention_interval: Duration::from_millis(20),
        ..LedgerOptions::default()
    };
    let (ledger, _) = Ledger::open(&path, options, 100).unwrap();
    let reader = ledger.reader().unwrap();
    let pruned = |reader: &LedgerReader| {
        (0..30)
            .filter(|i| {
                reader
                    .events_pruned_at(&format!("f{i:02}"))
                    .unwrap()
                    .is_some()
            })
            .count()
    };
    for _ in 0..200 {
        ledger.writer().commit_blocking(vec![]).unwrap();
        if pruned(&reader) == 30 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(pruned(&reader), 30, "every run finished in 1970 is pruned");
    assert_eq!(reader.runs(true).unwrap().len(), 30, "no run is deleted");
    assert_eq!(
        reader.events("f00", 0).unwrap().len(),
        1,
        "only the last event stays"
    );
}

#[test]
fn the_hard_cap_deletes_the_oldest_finished_runs_whole_and_never_an_active_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    let options = LedgerOptions {
        retention: RetentionPolicy::from_limits(0, 0),
        ..LedgerOptions::default()
    };
    let (ledger, _) = Ledger::open(&path, options, 100).unwrap();
    let writer = ledger.writer();
    let mut ops = Vec::new();
    for i in 0..10 {
        let id = format!("f{i}");
        ops.push(WriteOp::InsertRun(Box::new(run_record(
            &id,
            RunState::Completed,
            10 + i,
        ))));
        ops.push(event(&id, 1));
        ops.extend(history_of(&id, 0.1));
    }
    // Active runs older than every finished one.
    for id in ["a0", "a1"] {
        ops.push(WriteOp::InsertRun(Box::new(run_record(
            id,
            RunState::Running,
            0,
        ))));
    }
    writer.commit_blocking(ops).unwrap();
    let policy = RetentionPolicy::from_limits(0, 5);
    let done = retention::prune(&path, &writer, policy, 100).unwrap();
    assert_eq!(done.deleted, 7);
    let reader = ledger.reader().unwrap();
    let mut ids: Vec<String> = reader
        .runs(true)
        .unwrap()
        .into_iter()
        .map(|r| r.run_id)
        .collect();
    ids.sort();
    assert_eq!(ids, ["a0", "a1", "f7", "f8", "f9"]);
    assert!(
        reader.events("f0", 0).unwrap().is_empty(),
        "a deleted run's events go"
    );
    assert!(reader.turns("f0").unwrap().is_empty(), "and its turns");
    assert_eq!(reader.run_counts().unwrap(), (5, 3));
    ledger.close();
}

/// What an owner puts back at its start: every run in an active state, removed ones too,
/// newest first, and no finished one.
#[test]
fn active_runs_are_every_run_in_an_active_state_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    let ledger = open(&path);
    let mut ops = Vec::new();
    for (i, state) in RunState::ALL.iter().enumerate() {
        let mut run = run_record(&format!("r{i}"), *state, i as i64);
        run.removed = i == 1;
        ops.push(WriteOp::InsertRun(Box::new(run)));
    }
    ledger.writer().commit_blocking(ops).unwrap();
    let reader = ledger.reader().unwrap();
    let active: Vec<(String, RunState)> = reader
        .active_runs()
        .unwrap()
        .into_iter()
        .map(|r| (r.run_id, r.state))
        .collect();
    let expected: Vec<(String, RunState)> = RunState::ALL
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, s)| s.is_active())
        .map(|(i, s)| (format!("r{i}"), *s))
        .collect();
    assert!(expected.len() >= 6, "{expected:?}");
    assert_eq!(active, expected);
    ledger.close();
}

#[test]
fn a_page_of_runs_has_every_active_run_then_finished_ones_by_finish_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    let ledger = open(&path);
    let mut ops = Vec::new();
    for i in 0..7 {
        let mut run = run_record(&format!("f{i}"), RunState::Completed, i);
        // Finished in the reverse order of creation.
        run.finished_at = Some(1_000 - i);
        if i == 3 {
            run.title = "The Needle task".into();
        }
        ops.push(WriteOp::InsertRun(Box::new(run)));
    }
    ops.push(WriteOp::InsertRun(Box::new(run_record(
        "a",
        RunState::Idle,
        50,
    ))));
    ledger.writer().commit_blocking(ops).unwrap();
    let reader = ledger.reader().unwrap();
    let ids = |page: RunsPage<'_>| -> Vec<String> {
        reader
            .runs_page(&page)
            .unwrap()
            .expect("page")
            .into_iter()
            .map(|r| r.run_id)
            .collect()
    };
    let first = RunsPage {
        limit: Some(3),
        ..RunsPage::default()
    };
    assert_eq!(ids(first), ["a", "f0", "f1", "f2"]);
    let next = RunsPage {
        before: Some("f2"),
        ..first
    };
    assert_eq!(
        ids(next),
        ["f3", "f4", "f5"],
        "no active run on a next page"
    );
    let search = RunsPage {
        search: Some("needle"),
        ..first
    };
    assert_eq!(ids(search), ["f3"], "a search goes past the first page");
    let unknown = RunsPage {
        before: Some("nope"),
        ..first
    };
    assert!(reader.runs_page(&unknown).unwrap().is_none());
    ledger.close();
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
        retention: RetentionPolicy::from_limits(0, 5),
        retention_interval: Duration::from_millis(20),
        ..LedgerOptions::default()
    };
    let (ledger, _) = Ledger::open(&path, options, 100).unwrap();
    let reader = ledger.reader().unwrap();
    let ids = |reader: &drover_core::ledger::LedgerReader| -> Vec<String> {
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
    let user = drover_core::DroverError::from(err);
    assert_eq!(user.code, drover_core::ErrorCode::LedgerError);
    assert!(user.message.contains("newer"), "{}", user.message);
}

#[test]
fn a_damaged_row_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    let ledger = open(&path);
    insert_run(&ledger.writer(), "r", RunState::Completed, 1);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE runs SET spec_json = '{not json', state = 'bogus'",
        [],
    )
    .unwrap();
    let err = ledger.reader().unwrap().run("r").unwrap_err();
    assert!(err.to_string().contains("damaged"), "{err}");
}

/// A usage row of `run_id` in `session`: `cost` dollars (`None`: unpriced) on `basis`.
fn usage_row(run_id: &str, session: &str, cost: Option<f64>, basis: &str) -> WriteOp {
    WriteOp::InsertUsage(Box::new(UsageRecord {
        run_id: run_id.into(),
        turn: Some(1),
        at: 1_100,
        provider: "sim".into(),
        model: Some("sim-standard".into()),
        part: "turn".into(),
        input: 10,
        output: 5,
        reasoning: 0,
        cache_read: 0,
        cache_write: 0,
        cost_usd: cost,
        basis: basis.into(),
        fidelity: "exact".into(),
        source: "provider".into(),
        budget_session: session.into(),
    }))
}

/// The ledger's running totals (sessions' money, runs by state) equal what summing its
/// rows gives: spend and row counts by SQL over `usage`, each run's weakest basis by
/// [`Basis::weakest`] over its rows, runs by state by SQL over `runs`.
fn assert_totals_match_rows(path: &Path, reader: &LedgerReader) {
    use drover_core::money::pricing::Basis;
    use std::collections::BTreeMap;
    let conn = rusqlite::Connection::open(path).unwrap();
    // Sessions with rows, and (where the file keeps totals) those whose rows are all gone.
    let has_totals: bool = conn
        .query_row(
            "SELECT COUNT(*) > 0 FROM sqlite_master WHERE name = 'session_money'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let emptied = match has_totals {
        true => {
            "UNION SELECT budget_session, 0.0, 0 FROM session_money
             WHERE budget_session NOT IN (SELECT budget_session FROM usage)"
        }
        false => "",
    };
    let sessions: Vec<(String, f64, i64)> = conn
        .prepare(&format!(
            "SELECT budget_session, COALESCE(SUM(cost_usd), 0.0), COUNT(*) FROM usage
             GROUP BY budget_session {emptied}"
        ))
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let rows = reader.usage(None).unwrap();
    for (session, spent, count) in &sessions {
        let totals = reader.session_totals(session).unwrap();
        assert!(
            (totals.spent_usd - spent).abs() < 1e-9,
            "{session}: totals {} vs rows {spent}",
            totals.spent_usd
        );
        assert_eq!(totals.usage_rows, *count as u64, "{session}");
        let mut weakest: BTreeMap<&str, Basis> = BTreeMap::new();
        for row in rows.iter().filter(|u| &u.budget_session == session) {
            let basis = Basis::parse(&row.basis);
            let w = weakest.entry(row.run_id.as_str()).or_insert(basis);
            *w = Basis::weakest([*w, basis]);
        }
        let mut by_basis: BTreeMap<Basis, u64> = BTreeMap::new();
        for basis in weakest.values() {
            *by_basis.entry(*basis).or_default() += 1;
        }
        assert_eq!(
            totals.runs_by_weakest,
            by_basis.into_iter().collect::<Vec<_>>(),
            "{session}"
        );
        let unpriced: Vec<String> = weakest
            .iter()
            .rev()
            .filter(|(_, b)| **b == Basis::Unpriced)
            .map(|(id, _)| id.to_string())
            .collect();
        assert_eq!(
            reader
                .session_runs_of_weakest(session, Basis::Unpriced, usize::MAX)
                .unwrap(),
            unpriced,
            "{session}"
        );
        let newest: Vec<String> = unpriced.iter().take(1).cloned().collect();
        assert_eq!(
            reader
                .session_runs_of_weakest(session, Basis::Unpriced, 1)
                .unwrap(),
            newest,
            "the newest, when fewer are asked for: {session}"
        );
    }
    for include_removed in [false, true] {
        let by_state: Vec<(RunState, u64)> = conn
            .prepare(
                "SELECT state, COUNT(*) FROM runs WHERE (?1 OR removed = 0)
                 GROUP BY state ORDER BY state",
            )
            .unwrap()
            .query_map([include_removed], |r| {
                Ok((
                    RunState::parse(&r.get::<_, String>(0)?).unwrap(),
                    r.get::<_, i64>(1)? as u64,
                ))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(reader.runs_by_state(include_removed).unwrap(), by_state);
    }
    let (total, finished): (i64, i64) = conn
        .query_row("SELECT COUNT(*), COUNT(finished_at) FROM runs", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(
        reader.run_counts().unwrap(),
        (total as u64, finished as u64)
    );
}

/// Runs of two sessions whose usage rows carry every basis (an unknown word and an
/// unpriced row among them), some finished, one removed.
fn mixed_history() -> Vec<WriteOp> {
    let mut ops = Vec::new();
    for (i, (session, bases)) in [
        ("default", &["reported", "reported"][..]),
        ("default", &["reported", "estimated"][..]),
        ("default", &["free"][..]),
        ("default", &["estimated", "unpriced", "reported"][..]),
        ("night", &["estimated"][..]),
        ("night", &["a-word-from-a-newer-drover"][..]),
        ("night", &[][..]),
    ]
    .into_iter()
    .enumerate()
    {
        let id = format!("m{i}");
        let state = if i % 2 == 0 {
            RunState::Completed
        } else {
            RunState::Running
        };
        let mut run = run_record(&id, state, 100 + i as i64);
        run.budget_session = session.into();
        ops.push(WriteOp::InsertRun(Box::new(run)));
        for (k, basis) in bases.iter().enumerate() {
            let cost = (*basis != "unpriced").then_some(0.1 * (k + 1) as f64 + 0.01 * i as f64);
            ops.push(usage_row(&id, session, cost, basis));
        }
    }
    ops.push(WriteOp::UpdateRun {
        run_id: "m2".into(),
        patch: Box::new(RunPatch {
            updated_at: 200,
            removed: Some(true),
            ..RunPatch::default()
        }),
    });
    ops
}

#[test]
fn running_totals_equal_the_sums_of_the_rows_as_runs_change_and_go() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    let options = LedgerOptions {
        retention: RetentionPolicy::from_limits(0, 0),
        ..LedgerOptions::default()
    };
    let (ledger, _) = Ledger::open(&path, options, 100).unwrap();
    let writer = ledger.writer();
    let reader = ledger.reader().unwrap();
    assert_totals_match_rows(&path, &reader);
    writer.commit_blocking(mixed_history()).unwrap();
    assert_totals_match_rows(&path, &reader);
    let default = reader.session_totals("default").unwrap();
    assert_eq!(default.usage_rows, 8);
    assert!(!default.runs_by_weakest.is_empty());

    // A run finishes, one is resumed (its end cleared), one stays as it was (a patch that
    // changes neither state nor removal).
    writer
        .commit_blocking(vec![
            WriteOp::UpdateRun {
                run_id: "m1".into(),
                patch: Box::new(RunPatch {
                    updated_at: 300,
                    state: Some(RunState::Failed),
                    finished_at: Some(300),
                    ..RunPatch::default()
                }),
            },
            WriteOp::UpdateRun {
                run_id: "m0".into(),
                patch: Box::new(RunPatch {
                    updated_at: 300,
                    state: Some(RunState::Running),
                    reopened: true,
                    ..RunPatch::default()
                }),
            },
            WriteOp::UpdateRun {
                run_id: "m3".into(),
                patch: Box::new(RunPatch {
                    updated_at: 300,
                    model: Some("sim-fast".into()),
                    ..RunPatch::default()
                }),
            },
            // A weaker row later in a run moves it down a basis.
            usage_row("m0", "default", None, "unpriced"),
        ])
        .unwrap();
    assert_totals_match_rows(&path, &reader);

    // Retention prunes the finished runs' events (usage stays) and deletes whole runs
    // beyond its cap (their usage goes with them).
    let mut events = Vec::new();
    for i in 0..7 {
        events.push(event(&format!("m{i}"), 1));
        events.push(event(&format!("m{i}"), 2));
    }
    writer.commit_blocking(events).unwrap();
    let pruned =
        retention::prune(&path, &writer, RetentionPolicy::from_limits(1, 0), DAY * 9).unwrap();
    assert!(pruned.events_of > 0);
    assert_totals_match_rows(&path, &reader);
    let (total, finished) = reader.run_counts().unwrap();
    let active = total - finished;
    let done = retention::prune(
        &path,
        &writer,
        RetentionPolicy::from_limits(0, active + 1),
        DAY * 9,
    )
    .unwrap();
    assert_eq!(done.deleted as u64, finished - 1);
    assert_totals_match_rows(&path, &reader);
    assert_eq!(reader.run_counts().unwrap(), (active + 1, 1));

    // Usage rows are append-only: the totals count them as written.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let refused = conn.execute("UPDATE usage SET cost_usd = 99.0", []);
    assert!(
        refused.is_err_and(|e| e.to_string().contains("append-only")),
        "an edited usage row would not be counted"
    );
    // Every run deleted: nothing is left counted (and no rounding dust stays spent).
    writer
        .commit_blocking(vec![WriteOp::DeleteRuns(
            (0..7).map(|i| format!("m{i}")).collect(),
        )])
        .unwrap();
    assert_totals_match_rows(&path, &reader);
    assert_eq!(
        reader.session_totals("default").unwrap(),
        drover_core::ledger::SessionTotals::default()
    );
    assert!(reader.runs_by_state(true).unwrap().is_empty());
    ledger.close();
}

#[test]
fn a_ledger_from_before_the_running_totals_is_read_and_migrated_with_the_same_figures() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    {
        let ledger = open(&path);
        ledger.writer().commit_blocking(mixed_history()).unwrap();
        ledger.close();
    }
    // The file as migration 5 left it: no totals, the session indexes back (and no
    // search index, migrations 7 and 8, nor the scripts' approvals, migration 10, nor turns'
    // evidence, migration 11, nor spend's totals, migration 13).
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "DROP TRIGGER search_run_added; DROP TRIGGER search_run_deleted;
         DROP TRIGGER search_tool_pruned;
         DROP TRIGGER search_turn_text_pruned; DROP TRIGGER search_turn_added;
         DROP TRIGGER search_turn_changed; DROP TRIGGER search_turn_reopened;
         DROP INDEX events_turn_started; DROP TABLE search; DROP TABLE search_runs;
         DROP TABLE session_money; DROP TABLE session_run_basis; DROP TABLE session_basis_runs;
         DROP TABLE run_counts; DROP TABLE script_approvals;
         DROP TRIGGER usage_counted; DROP TRIGGER usage_uncounted; DROP TRIGGER usage_immutable;
         DROP TRIGGER runs_counted; DROP TRIGGER runs_uncounted; DROP TRIGGER runs_recounted;
         CREATE INDEX usage_by_session_spend ON usage(budget_session, cost_usd);
         CREATE INDEX usage_by_session_basis ON usage(budget_session, basis, run_id);
         ALTER TABLE turns DROP COLUMN evidence_json;
         DROP TRIGGER spend_counted; DROP TRIGGER spend_run_forgotten;
         DROP TRIGGER spend_repository_moved; DROP TRIGGER spend_workflow_moved;
         DROP TRIGGER spend_tags_moved;
         DROP TABLE spend_totals; DROP TABLE spend_run_days; DROP TABLE spend_days;
         PRAGMA user_version = 5;",
    )
    .unwrap();
    drop(conn);
    // Read before any owner migrates it (reading never does): the figures are summed
    // from the rows.
    let old = LedgerReader::open(&path).unwrap();
    assert_totals_match_rows(&path, &old);
    assert_eq!(old.session_totals("default").unwrap().usage_rows, 8);
    drop(old);
    let ledger = open(&path);
    let reader = ledger.reader().unwrap();
    // Recovery interrupted the runs left running, after the totals were made.
    assert!(
        reader
            .runs_by_state(true)
            .unwrap()
            .contains(&(RunState::Interrupted, 3))
    );
    assert_totals_match_rows(&path, &reader);
    ledger.close();
}

/// Child half of `running_totals_survive_an_abrupt_end`: writes usage rows (some acked,
/// some not) and run changes, then aborts the process without closing anything.
#[test]
#[ignore = "the child half of running_totals_survive_an_abrupt_end, which runs it"]
fn child_usage_writer_that_aborts() {
    let path = std::env::var("DROVER_TEST_LEDGER_USAGE_CHILD")
        .expect("run by running_totals_survive_an_abrupt_end, which names the ledger");
    let (ledger, _) = Ledger::open(Path::new(&path), LedgerOptions::default(), 1).unwrap();
    let writer = ledger.writer();
    let bases = ["reported", "estimated", "unpriced", "free"];
    for i in 0..40 {
        let id = format!("c{i:02}");
        insert_run(&writer, &id, RunState::Running, i);
        for k in 0..20 {
            let basis = bases[(i as usize + k) % bases.len()];
            writer
                .send(usage_row(&id, "default", Some(0.001 * k as f64), basis))
                .unwrap();
        }
        writer
            .commit_blocking(vec![usage_row(&id, "default", Some(0.5), "reported")])
            .unwrap();
        println!("ACKED {id}");
    }
    for k in 0..200 {
        writer
            .send(usage_row("c39", "default", Some(0.01), bases[k % 4]))
            .unwrap();
    }
    std::process::abort();
}

#[test]
fn running_totals_survive_an_abrupt_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite3");
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_usage_writer_that_aborts",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("DROVER_TEST_LEDGER_USAGE_CHILD", &path)
        .output()
        .unwrap();
    assert!(!out.status.success(), "the child must die by abort");
    // (The first one shares its line with the harness's `test … ` prefix.)
    let acked = String::from_utf8_lossy(&out.stdout)
        .matches("ACKED c")
        .count();
    assert_eq!(acked, 40);
    // Recovery interrupts every run the child left running (their rows are a test's, not
    // a dispatcher's: no dispatcher could put them back); whatever rows made it to disk,
    // the totals count exactly them.
    let (ledger, recovery) = Ledger::open(&path, LedgerOptions::default(), 5_000).unwrap();
    assert_eq!(recovery.interrupted.len(), 40);
    let reader = ledger.reader().unwrap();
    assert!(reader.session_totals("default").unwrap().usage_rows >= 40 * 21);
    assert_totals_match_rows(&path, &reader);
    ledger.close();
}

#[test]
fn deleting_runs_deletes_their_run_scoped_rules_only() {
    use drover_core::rules::{Rule, RuleDecision, RuleKind, Scope};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    let ledger = open(&path);
    let rule = |id: u64, scope: Scope, run_id: Option<&str>| {
        WriteOp::PutRule(Box::new(Rule {
            id,
            scope,
            kind: RuleKind::Command,
            pattern: "ls".into(),
            decision: RuleDecision::Allow,
            run_id: run_id.map(str::to_string),
            repository: None,
            created_at: 0,
        }))
    };
    let writer = ledger.writer();
    writer
        .commit_blocking(vec![
            rule(1, Scope::Run, Some("gone")),
            rule(2, Scope::Run, Some("kept")),
            rule(3, Scope::Everywhere, None),
        ])
        .unwrap();
    writer
        .commit_blocking(vec![WriteOp::DeleteRuns(vec!["gone".into()])])
        .unwrap();
    let reader = LedgerReader::open(&path).unwrap();
    let left: Vec<u64> = reader.rules().unwrap().iter().map(|r| r.id).collect();
    assert_eq!(left, [2, 3]);
    ledger.close();
}

/// A small tmpfs mounted for one test (as root), unmounted (lazily) when dropped; `None`,
/// with the reason printed, where mounts are not allowed.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(out) if out.status.success() => Some(SmallDisk { dir }),
            Ok(out) => {
                eprintln!(
                    "skipped: cannot mount a {size} tmpfs here (not root, or mounts are not \
                     allowed): {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("skipped: cannot run mount: {e}");
                None
            }
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// An event whose body is `bytes` long, so that a few of them need new disk blocks.
fn big_event(run_id: &str, seq: u64, bytes: usize) -> WriteOp {
    WriteOp::event(EventRecord {
        run_id: run_id.into(),
        seq,
        kind: "provider".into(),
        at: seq as i64,
        body: json!({ "text": format!("{seq:x}").repeat(bytes / format!("{seq:x}").len()) }),
    })
    .unwrap()
}

/// Polls `ready` every 5 ms until it holds; panics naming `what` after 30 s.
fn until(what: &str, ready: impl FnMut() -> bool) {
    assert!(within_30s(ready), "{what}: not within 30 s");
}

/// Polls `ready` every 5 ms until it holds (true) or 30 s have passed (false).
fn within_30s(mut ready: impl FnMut() -> bool) -> bool {
    for _ in 0..6_000 {
        if ready() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// A commit the disk refuses changes nothing and loses nothing: on a full disk the writes
/// are kept, none acknowledged nor stored, the ledger's health names the disk as full with
/// its directory; once space is freed they commit, in order, with no gap, by themselves.
#[test]
fn a_batch_the_full_disk_refuses_is_kept_and_committed_in_order_once_there_is_room() {
    let Some(disk) = SmallDisk::mount("4m") else {
        return;
    };
    let path = disk.dir.path().join("ledger.sqlite3");
    let (ledger, _) = Ledger::open(&path, LedgerOptions::default(), 0).unwrap();
    let writer = ledger.writer();
    let health = ledger.health();
    insert_run(&writer, "r1", RunState::Running, 1);
    let filler = disk.dir.path().join("filler");
    common::fill_disk(&filler, 8 << 20);
    let mut acks: Vec<_> = (1..=16u64)
        .map(|seq| writer.send_acked(vec![big_event("r1", seq, 65_536)]))
        .collect();
    until("the ledger says it cannot write", || {
        health.borrow().is_some()
    });
    let why = health.borrow().clone().unwrap();
    assert!(
        why.contains(&format!(
            "the disk holding {} is full",
            disk.dir.path().display()
        )),
        "{why}"
    );
    // Tried again and again: never acknowledged, never stored.
    std::thread::sleep(Duration::from_millis(300));
    for ack in &mut acks {
        assert!(
            ack.try_recv().is_err(),
            "acknowledged while the disk was full"
        );
    }
    let reader = LedgerReader::open(&path).unwrap();
    assert_eq!(reader.events("r1", 0).unwrap().len(), 0);
    std::fs::remove_file(&filler).unwrap();
    for ack in acks {
        ack.blocking_recv()
            .unwrap()
            .expect("committed once there is room");
    }
    assert!(health.borrow().is_none(), "the ledger writes again");
    assert_eq!(assert_contiguous(&reader, "r1"), 16);
    writer
        .commit_blocking(vec![big_event("r1", 17, 16)])
        .unwrap();
    assert_eq!(assert_contiguous(&reader, "r1"), 17);
    ledger.close();
}

/// An idle ledger's WAL is copied into the database file without waiting for another
/// commit: an acknowledged run, and nothing after it, is soon in the file itself (a copy of
/// the file alone, without its WAL, has it), not only in the WAL (docs/ARCHITECTURE.md
/// §"Ledger").
#[test]
fn an_idle_ledgers_wal_is_checkpointed_into_the_database_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite3");
    let ledger = open(&path);
    insert_run(&ledger.writer(), "r1", RunState::Running, 1);
    let alone = dir.path().join("alone.sqlite3");
    until("the run is in the database file itself", || {
        std::fs::copy(&path, &alone).unwrap();
        let _ = std::fs::remove_file(dir.path().join("alone.sqlite3-wal"));
        rusqlite::Connection::open(&alone)
            .and_then(|c| {
                c.query_row("SELECT COUNT(*) FROM runs WHERE run_id = 'r1'", [], |r| {
                    r.get::<_, i64>(0)
                })
            })
            .is_ok_and(|n| n == 1)
    });
    ledger.close();
}

/// A staged write is told of its commit before the WAL is synced, and acknowledged only
/// after: with the sync thread held at the gate, its commit resolves and a reader sees the
/// row, while its durable ack — and a plain ack sent after it — wait; the sync released,
/// both resolve (docs/ARCHITECTURE.md §"Ledger").
#[test]
fn a_staged_write_is_committed_before_its_sync_and_acknowledged_after() {
    let dir = tempfile::tempdir().unwrap();
    let (ledger, gate, path) = gated_ledger(dir.path());
    let writer = ledger.writer();
    gate.hold_syncs();
    let staged = writer.send_staged(vec![WriteOp::InsertRun(Box::new(run_record(
        "r1",
        RunState::Running,
        1,
    )))]);
    staged
        .committed
        .blocking_recv()
        .expect("told of the commit while its sync is held")
        .unwrap();
    let reader = LedgerReader::open(&path).unwrap();
    assert!(
        reader.run("r1").unwrap().is_some(),
        "a reader sees the commit"
    );
    let mut plain = writer.send_acked(vec![event("r1", 1)]);
    let mut durable = staged.durable;
    until("the plain write is committed", || {
        reader.events("r1", 0).unwrap().len() == 1
    });
    assert!(durable.try_recv().is_err(), "acknowledged before the sync");
    assert!(plain.try_recv().is_err(), "acknowledged before the sync");
    until("the sync waits at the gate", || gate.sync_waiting());
    gate.release_syncs();
    durable.blocking_recv().unwrap().unwrap();
    plain.blocking_recv().unwrap().unwrap();
    ledger.close();
}

/// An ack with no write under it (what a request that only reads waits for) is answered
/// without a sync of its own once what came before it is synced, and waits while it is
/// not: with every sync held, it still comes after a synced write, and not after a write
/// whose sync is held.
#[test]
fn an_ack_with_nothing_written_waits_only_for_the_writes_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let (ledger, gate, _) = gated_ledger(dir.path());
    let writer = ledger.writer();
    insert_run(&writer, "r1", RunState::Running, 1);
    gate.hold_syncs();
    let mut nothing = writer.send_acked(Vec::new());
    let answered = within_30s(|| matches!(nothing.try_recv(), Ok(Ok(()))));
    // Released before asserting, so that a failure does not leave the sync held forever.
    gate.release_syncs();
    assert!(
        answered,
        "not answered while syncs are held, with nothing new to sync"
    );
    gate.hold_syncs();
    let mut written = writer.send_acked(vec![event("r1", 1)]);
    let mut read = writer.send_acked(Vec::new());
    until("the sync waits at the gate", || gate.sync_waiting());
    assert!(written.try_recv().is_err(), "acknowledged before the sync");
    assert!(
        read.try_recv().is_err(),
        "an ack behind an unsynced write came before its sync"
    );
    gate.release_syncs();
    written.blocking_recv().unwrap().unwrap();
    read.blocking_recv().unwrap().unwrap();
    ledger.close();
}

/// A commit that fails (held at a test gate that fails it, as a failing disk would) is
/// tried again with what came after it: nothing is acknowledged or stored until it
/// commits, then everything is, in order.
#[test]
fn a_failed_commit_is_tried_again_and_nothing_is_acknowledged_before_it_commits() {
    let dir = tempfile::tempdir().unwrap();
    let (ledger, gate, path) = gated_ledger(dir.path());
    let writer = ledger.writer();
    let health = ledger.health();
    insert_run(&writer, "r1", RunState::Running, 1);
    gate.fail("disk I/O error");
    let mut acks: Vec<_> = (1..=3u64)
        .map(|seq| writer.send_acked(vec![event("r1", seq)]))
        .collect();
    until("the ledger says it cannot write", || {
        health.borrow().is_some()
    });
    until("the batch is tried again", || gate.passed() >= 4);
    for ack in &mut acks {
        assert!(ack.try_recv().is_err(), "acknowledged before the commit");
    }
    let reader = LedgerReader::open(&path).unwrap();
    assert_eq!(reader.events("r1", 0).unwrap().len(), 0);
    // Sent while the ledger cannot write: behind the others.
    let later = writer.send_acked(vec![event("r1", 4)]);
    gate.heal();
    for ack in acks {
        ack.blocking_recv().unwrap().unwrap();
    }
    later.blocking_recv().unwrap().unwrap();
    assert_eq!(assert_contiguous(&reader, "r1"), 4);
    assert!(health.borrow().is_none());
    ledger.close();
}

/// A ledger closed while it cannot write ends within a bound: what never committed is
/// answered with the failure (it was never acknowledged), and the thread stops.
#[test]
fn a_ledger_closed_while_it_cannot_write_stops_and_says_what_was_not_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let (ledger, gate, _) = gated_ledger(dir.path());
    gate.fail("disk I/O error");
    let ack = ledger
        .writer()
        .send_acked(vec![WriteOp::InsertRun(Box::new(run_record(
            "r1",
            RunState::Running,
            1,
        )))]);
    let (done_tx, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        ledger.close();
        let _ = done_tx.send(());
    });
    done.recv_timeout(Duration::from_secs(30))
        .expect("close ends while the disk fails");
    let outcome = ack.blocking_recv().unwrap();
    assert!(
        outcome
            .as_ref()
            .is_err_and(|e| e.to_string().contains("disk I/O error")),
        "{outcome:?}"
    );
}

/// The writer stores what it is given, scanning nothing (docs/ARCHITECTURE.md
/// §"Secrets"): the dispatcher core redacts every op before it sends it
/// (`WriteOp::redact`), and here is what that does to an op.
#[test]
fn the_writer_stores_what_it_is_given_and_the_core_redacts_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = open(&dir.path().join("ledger.sqlite3"));
    let key = "ghp_R4nd0mT0k3nF0rT3st1ngDr0v3rXyZ123456";
    let note = |seq: u64| {
        WriteOp::event(EventRecord {
            run_id: "r".into(),
            seq,
            kind: kind::NOTE.into(),
            at: 1_000,
            body: json!({ "text": format!("pushed with {key}") }),
        })
        .unwrap()
    };
    let mut redacted = note(2);
    redacted.redact(&drover_core::redact::Redactor::rules_only());
    ledger
        .writer()
        .commit_blocking(vec![
            WriteOp::InsertRun(Box::new(run_record("r", RunState::Running, 1))),
            note(1),
            redacted,
        ])
        .unwrap();
    let events = ledger.reader().unwrap().events("r", 0).unwrap();
    assert_eq!(events[0].body["text"], format!("pushed with {key}"));
    assert_eq!(events[1].body["text"], "pushed with [redacted]");
}

/// A file from before turns kept their evidence (migration 11) is read without it (reading
/// never migrates); the next owner adds the column, and a turn's evidence reads back.
#[test]
fn turns_from_before_evidence_are_read_and_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    {
        let ledger = open(&path);
        let mut ops = vec![WriteOp::InsertRun(Box::new(run_record(
            "e1",
            RunState::Completed,
            1,
        )))];
        ops.extend(history_of("e1", 0.1));
        ledger.writer().commit_blocking(ops).unwrap();
        ledger.close();
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "ALTER TABLE turns DROP COLUMN evidence_json;
         DROP TRIGGER spend_counted; DROP TRIGGER spend_run_forgotten;
         DROP TRIGGER spend_repository_moved; DROP TRIGGER spend_workflow_moved;
         DROP TRIGGER spend_tags_moved;
         DROP TABLE spend_totals; DROP TABLE spend_run_days; DROP TABLE spend_days;
         PRAGMA user_version = 10;",
    )
    .unwrap();
    drop(conn);
    let old = LedgerReader::open(&path).unwrap();
    let turns = old.turns("e1").unwrap();
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0].evidence, None);
    drop(old);

    let ledger = open(&path);
    let commands = json!([{"command": "cargo test", "exit_code": 0, "test": "cargo test"}]);
    let mut turn = ledger.reader().unwrap().turns("e1").unwrap().remove(0);
    turn.evidence = Some(commands.clone());
    ledger
        .writer()
        .commit_blocking(vec![WriteOp::UpsertTurn(Box::new(turn))])
        .unwrap();
    assert_eq!(
        ledger.reader().unwrap().turns("e1").unwrap()[0].evidence,
        Some(commands)
    );
    ledger.close();
}

/// Taking a deleted usage row out of its session's totals (migration 6's `usage_uncounted`,
/// run for each usage row the run cap deletes with its run) reads the run's rows in that
/// session through an index on both, not by scanning the session's rows (migration 14).
#[test]
fn a_usage_row_deleted_with_its_run_is_uncounted_without_scanning_its_session() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    open(&path).close();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let plan: Vec<String> = conn
        .prepare(
            "EXPLAIN QUERY PLAN
             SELECT MIN(CASE basis WHEN 'estimated' THEN 1 WHEN 'reported' THEN 2
                        WHEN 'free' THEN 3 ELSE 0 END), COUNT(*)
             FROM usage WHERE run_id = 'r1' AND budget_session = 'default'",
        )
        .unwrap()
        .query_map([], |row| row.get::<_, String>(3))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        plan,
        ["SEARCH usage USING COVERING INDEX usage_by_run_session (run_id=? AND budget_session=?)"],
        "the trigger's count of a run's rows in its session"
    );
}
