//! The search index on real SQLite (docs/ARCHITECTURE.md §"Ledger"): a word from a task,
//! a follow-up, the agent's text, a tool command and a result is found, in the
//! transaction that wrote it; a turn's agent text is one document, found once the turn's
//! end is recorded and not before; retention prunes transcript lines from the index with
//! their events while tasks and results stay found for every run; a run deleted whole
//! leaves nothing behind; a query FTS5 cannot read is refused with its stable code; a
//! ledger from before the index, or with migration 7's, gets this one on open; `drover
//! search` finds what a real sim run wrote, through the owner and from the ledger with
//! none.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use drover_core::DroverError;
use drover_core::error::ErrorCode;
use drover_core::ledger::{
    EventRecord, Ledger, LedgerError, LedgerOptions, LedgerReader, LedgerWriter, RetentionPolicy,
    RunRecord, SearchHit, SearchSource, TurnRecord, WriteOp, migrate_file_to, retention,
};
use drover_core::providers::{Ask, ProviderEvent};
use drover_core::run_state::RunState;
use serde_json::json;
use std::path::Path;

const DAY: i64 = 86_400_000;

fn run(run_id: &str, task: &str, created_at: i64, finished_at: Option<i64>) -> RunRecord {
    RunRecord {
        run_id: run_id.to_string(),
        created_at,
        updated_at: created_at,
        finished_at,
        state: if finished_at.is_some() {
            RunState::Completed
        } else {
            RunState::Running
        },
        completion_reason: None,
        provider: "sim".into(),
        model: Some("sim-standard".into()),
        title: format!("title of {run_id}"),
        budget_session: "default".into(),
        workflow_id: None,
        parent_run: None,
        idempotency_key: None,
        provider_session_id: None,
        removed: false,
        spec: json!({"task": task, "title": format!("title of {run_id}")}),
        live_state: None,
        result: None,
        workspace: None,
    }
}

/// A provider event as the dispatcher records it: kind `transcript`, its line and the
/// event itself.
fn transcript(run_id: &str, seq: u64, line: &str, event: ProviderEvent) -> WriteOp {
    WriteOp::event(EventRecord {
        run_id: run_id.into(),
        seq,
        kind: "transcript".into(),
        at: 5_000 + seq as i64,
        body: json!({"line": line, "event": event}),
    })
    .unwrap()
}

fn text(run_id: &str, seq: u64, words: &str) -> WriteOp {
    transcript(
        run_id,
        seq,
        &format!("text: {words}"),
        ProviderEvent::AssistantText { text: words.into() },
    )
}

fn command(run_id: &str, seq: u64, command: &str) -> WriteOp {
    transcript(
        run_id,
        seq,
        &format!("tool Bash: {command}"),
        ProviderEvent::ToolStarted {
            tool_use_id: format!("t{seq}"),
            name: "Bash".into(),
            ask: Ask::Command {
                command: command.into(),
                words: None,
                cwd: None,
                reason: None,
            },
        },
    )
}

/// The event the dispatcher writes when it sends a turn.
fn turn_started(run_id: &str, seq: u64, number: u32) -> WriteOp {
    WriteOp::event(EventRecord {
        run_id: run_id.into(),
        seq,
        kind: "turn_started".into(),
        at: 5_000 + seq as i64,
        body: json!({"number": number, "origin": "dispatch", "prompt": "drover's own prompt"}),
    })
    .unwrap()
}

/// A turn's row: ended (at 7,000 + its number) when it has a summary, its agent text then
/// read from its events by the writer (as for a turn a restart closed).
fn turn(run_id: &str, number: u32, origin: &str, prompt: &str, summary: Option<&str>) -> WriteOp {
    let row = Box::new(TurnRecord {
        run_id: run_id.into(),
        number,
        origin: origin.into(),
        started_at: 6_000 + i64::from(number),
        ended_at: summary.map(|_| 7_000 + i64::from(number)),
        prompt_preview: prompt.into(),
        text: None,
        usage: None,
        cost_usd: None,
        result: summary.map(|s| {
            json!({"found": true, "status": "done", "summary": s,
                   "changes": ["src/cache.rs: evict on write"], "files": [], "follow_ups": []})
        }),
        evidence: None,
    });
    match summary {
        Some(_) => WriteOp::EndTurn {
            turn: row,
            text: None,
        },
        None => WriteOp::UpsertTurn(row),
    }
}

/// A finished run with a task, a transcript (agent text, a tool command, usage), a
/// follow-up turn and a result, written as the dispatcher writes them.
fn history(run_id: &str, created_at: i64, finished_at: i64) -> Vec<WriteOp> {
    vec![
        WriteOp::InsertRun(Box::new(run(
            run_id,
            "migrate the Postgres schema for staging-eu",
            created_at,
            Some(finished_at),
        ))),
        turn(run_id, 1, "dispatch", "drover's own first prompt", None),
        turn_started(run_id, 1, 1),
        text(run_id, 2, "Looking at the candidate indexes first."),
        command(run_id, 3, "cargo test --package ledger -- flaky_timeout"),
        transcript(
            run_id,
            4,
            "usage",
            ProviderEvent::Usage {
                model: None,
                tokens: Default::default(),
            },
        ),
        turn(
            run_id,
            1,
            "dispatch",
            "drover's own first prompt",
            Some("dropped the unused trigram index"),
        ),
        turn(
            run_id,
            2,
            "follow_up",
            "also vacuum the replica afterwards",
            None,
        ),
        turn_started(run_id, 5, 2),
    ]
}

fn open(path: &Path, now: i64) -> (Ledger, LedgerWriter) {
    let options = LedgerOptions {
        retention: RetentionPolicy::KEEP_ALL,
        ..LedgerOptions::default()
    };
    let (ledger, _) = Ledger::open(path, options, now).unwrap();
    let writer = ledger.writer();
    (ledger, writer)
}

fn found(reader: &LedgerReader, query: &str) -> Vec<(String, SearchSource, String)> {
    reader
        .search(query, 50)
        .unwrap()
        .into_iter()
        .map(|h| (h.run_id.clone(), h.source, h.marked("[", "]")))
        .collect()
}

/// How many documents of the index itself match `query`.
fn indexed(path: &Path, query: &str) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row(
        "SELECT COUNT(*) FROM search WHERE search MATCH ?1",
        [query],
        |r| r.get(0),
    )
    .unwrap()
}

#[test]
fn a_word_from_a_task_a_follow_up_the_agent_a_tool_command_and_a_result_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    let (ledger, writer) = open(&path, 10 * DAY);
    writer.commit_blocking(history("r1", DAY, 2 * DAY)).unwrap();
    let reader = ledger.reader().unwrap();

    let task = found(&reader, "postgres");
    assert_eq!(
        task,
        [(
            "r1".to_string(),
            SearchSource::Task,
            "migrate the [Postgres] schema for staging-eu".to_string()
        )]
    );
    // A word with a `-` is a phrase once quoted.
    assert_eq!(
        found(&reader, "\"staging-eu\"")[0].2,
        "migrate the Postgres schema for [staging-eu]"
    );
    assert_eq!(
        found(&reader, "vacuum"),
        [(
            "r1".to_string(),
            SearchSource::FollowUp,
            "also [vacuum] the replica afterwards".to_string()
        )]
    );
    assert_eq!(
        found(&reader, "candidate"),
        [(
            "r1".to_string(),
            SearchSource::Text,
            "Looking at the [candidate] indexes first.".to_string()
        )]
    );
    assert_eq!(
        found(&reader, "flaky_timeout"),
        [(
            "r1".to_string(),
            SearchSource::Tool,
            "tool Bash: cargo test --package ledger -- [flaky_timeout]".to_string()
        )]
    );
    let result = reader.search("trigram", 50).unwrap();
    assert_eq!(result.len(), 1);
    assert_eq!(result[0].source, SearchSource::Result);
    assert_eq!(result[0].turn, Some(1));
    assert_eq!(result[0].at, 7_001, "a result is dated by its turn's end");
    assert_eq!(
        result[0].marked("[", "]"),
        "dropped the unused [trigram] index · src/cache.rs: evict on write"
    );
    // Prefixes of 2, 3 and more characters (the first two read the prefix indexes).
    for (prefix, sources) in [
        ("fl*", vec![SearchSource::Tool]),
        ("vac*", vec![SearchSource::FollowUp]),
        ("candid*", vec![SearchSource::Text]),
        (
            "ca*",
            vec![SearchSource::Result, SearchSource::Text, SearchSource::Tool],
        ),
    ] {
        let hits: Vec<SearchSource> = found(&reader, prefix).into_iter().map(|h| h.1).collect();
        assert_eq!(hits, sources, "{prefix}");
    }
    // drover's own prompt (the first turn's) and usage events are not indexed.
    assert!(found(&reader, "drover").is_empty());
    assert!(found(&reader, "usage").is_empty());
    // A turn's result written again is indexed once, as it is now.
    writer
        .commit_blocking(vec![turn(
            "r1",
            1,
            "dispatch",
            "drover's own first prompt",
            Some("kept the trigram index after all"),
        )])
        .unwrap();
    let again = found(&reader, "trigram");
    assert_eq!(again.len(), 1);
    assert!(
        again[0].2.starts_with("kept the [trigram] index"),
        "{again:?}"
    );
    assert!(found(&reader, "dropped").is_empty());
    ledger.close();
}

/// A tool call is indexed by the writer as it appends the call's event, in the same
/// transaction and both or neither, from what its sender said the event is: no trigger
/// reads the body of each event appended (migration 12).
#[test]
fn a_tool_call_is_indexed_with_its_event_and_no_trigger_reads_an_appended_events_body() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    let (ledger, writer) = open(&path, 10 * DAY);
    writer
        .commit_blocking(vec![WriteOp::InsertRun(Box::new(run(
            "r1",
            "tidy the cache",
            DAY,
            None,
        )))])
        .unwrap();
    let reader = ledger.reader().unwrap();
    // Refused (its seq leaves a gap): neither the event nor its document is written.
    writer
        .commit_blocking(vec![command("r1", 5, "cargo run --bin dirigible")])
        .unwrap_err();
    assert_eq!(indexed(&path, "dirigible"), 0);
    assert_eq!(documents(&path), 1, "the task");
    // Appended: found at once, as the tool call at its seq.
    writer
        .commit_blocking(vec![
            text("r1", 1, "the airship"),
            command("r1", 2, "cargo run --bin dirigible"),
        ])
        .unwrap();
    let hits = reader.search("dirigible", 50).unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!((hits[0].source, hits[0].seq), (SearchSource::Tool, Some(2)));
    assert_eq!(
        hits[0].marked("[", "]"),
        "tool Bash: cargo run --bin [dirigible]"
    );
    // Agent text that spells a tool call's body is not one.
    writer
        .commit_blocking(vec![text("r1", 3, r#"{"type":"tool_started"} zeppelin"#)])
        .unwrap();
    assert_eq!(indexed(&path, "zeppelin"), 0);
    assert_eq!(documents(&path), 2, "the task and the tool call");
    // No trigger of an insert into `events` looks into its body.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let reading: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'events'
             AND sql LIKE '%INSERT ON events%' AND sql LIKE '%body_json%'",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(reading.is_empty(), "{reading:?}");
    drop(reader);
    ledger.close();
}

#[test]
fn newest_runs_come_first_and_the_limit_bounds_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    let (ledger, writer) = open(&path, 10 * DAY);
    let mut ops = Vec::new();
    for i in 0..30 {
        ops.extend(history(&format!("r{i:02}"), DAY + i, 2 * DAY + i));
    }
    writer.commit_blocking(ops).unwrap();
    let reader = ledger.reader().unwrap();
    let hits: Vec<SearchHit> = reader.search("postgres OR candidate", 7).unwrap();
    assert_eq!(hits.len(), 7);
    let runs: Vec<&str> = hits.iter().map(|h| h.run_id.as_str()).collect();
    assert_eq!(runs, ["r29", "r29", "r28", "r28", "r27", "r27", "r26"]);
    // Within a run, the latest line first: the transcript's text, then the task.
    assert_eq!(hits[0].source, SearchSource::Text);
    assert_eq!(hits[1].source, SearchSource::Task);
    ledger.close();
}

#[test]
fn retention_prunes_transcript_lines_from_the_index_and_an_old_runs_task_and_result_stay() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    let now = 400 * DAY;
    let (ledger, writer) = open(&path, now);
    let mut ops = history("old", DAY, now - 31 * DAY);
    ops.extend(history("recent", 2 * DAY, now - DAY));
    writer.commit_blocking(ops).unwrap();
    assert_eq!(indexed(&path, "candidate OR flaky_timeout"), 4);
    let pruned =
        retention::prune(&path, &writer, RetentionPolicy::from_limits(30, 0), now).unwrap();
    assert_eq!(pruned.events_of, 1);
    // Gone from the index itself, not only from the answer (which reads each hit's row).
    assert_eq!(indexed(&path, "candidate OR flaky_timeout"), 2);
    let reader = ledger.reader().unwrap();
    let runs_of = |query: &str| -> Vec<(String, SearchSource)> {
        found(&reader, query)
            .into_iter()
            .map(|(run, source, _)| (run, source))
            .collect()
    };
    // The old run's transcript is gone from the index with its events…
    assert_eq!(
        runs_of("candidate"),
        [("recent".into(), SearchSource::Text)]
    );
    assert_eq!(
        runs_of("flaky_timeout"),
        [("recent".into(), SearchSource::Tool)]
    );
    // …its task, follow-up and result stay found.
    assert_eq!(
        runs_of("trigram"),
        [
            ("recent".into(), SearchSource::Result),
            ("old".into(), SearchSource::Result)
        ]
    );
    assert_eq!(
        runs_of("postgres"),
        [
            ("recent".into(), SearchSource::Task),
            ("old".into(), SearchSource::Task)
        ]
    );
    assert_eq!(runs_of("vacuum").len(), 2);
    // Deleted whole (beyond the cap), a run leaves nothing in the index.
    let done = retention::prune(&path, &writer, RetentionPolicy::from_limits(0, 1), now).unwrap();
    assert_eq!(done.deleted, 1);
    for query in [
        "postgres",
        "trigram",
        "vacuum",
        "candidate",
        "flaky_timeout",
    ] {
        let runs: Vec<String> = found(&reader, query).into_iter().map(|h| h.0).collect();
        assert_eq!(runs, ["recent"], "{query}");
    }
    assert_eq!(
        indexed(
            &path,
            "postgres OR trigram OR vacuum OR candidate OR flaky_timeout"
        ),
        5,
        "the recent run's five documents, none of the deleted one's"
    );
    let conn = rusqlite::Connection::open(&path).unwrap();
    let docs: i64 = conn
        .query_row("SELECT COUNT(*) FROM search_runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(docs, 1, "the deleted run's number is gone too");
    ledger.close();
}

#[test]
fn a_query_fts5_cannot_read_is_refused_with_its_code() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    let (ledger, writer) = open(&path, 10 * DAY);
    writer.commit_blocking(history("r1", DAY, 2 * DAY)).unwrap();
    let reader = ledger.reader().unwrap();
    for bad in [
        "staging-eu",
        "\"unbalanced",
        "AND postgres",
        "nosuchcolumn: word",
    ] {
        let e = reader.search(bad, 50).unwrap_err();
        assert!(matches!(e, LedgerError::SearchQuery(_)), "{bad}: {e:?}");
        let e = DroverError::from(e);
        assert_eq!(e.code, ErrorCode::SearchQueryInvalid, "{bad}");
        assert!(e.message.contains("\"staging-eu\""), "{}", e.message);
    }
    ledger.close();
}

/// The file at `path` as migration 6 left it: the rows, no index (nor migration 10's
/// `script_approvals`, nor turns' evidence, migration 11, nor spend's totals, 13).
fn before_the_index(path: &Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(
        "DROP TRIGGER search_run_added; DROP TRIGGER search_run_deleted;
         DROP TRIGGER search_tool_pruned;
         DROP TRIGGER search_turn_text_pruned; DROP TRIGGER search_turn_added;
         DROP TRIGGER search_turn_changed; DROP TRIGGER search_turn_reopened;
         DROP INDEX events_turn_started;
         DROP TABLE search; DROP TABLE search_runs; DROP TABLE script_approvals;
         ALTER TABLE turns DROP COLUMN evidence_json;
         DROP TRIGGER spend_counted; DROP TRIGGER spend_run_forgotten;
         DROP TRIGGER spend_repository_moved; DROP TRIGGER spend_workflow_moved;
         DROP TRIGGER spend_tags_moved;
         DROP TABLE spend_totals; DROP TABLE spend_run_days; DROP TABLE spend_days;
         PRAGMA user_version = 6;",
    )
    .unwrap();
}

/// Where the hit of each of the five words of [`history`] comes from, one hit each.
fn sources_of_history(reader: &LedgerReader) -> Vec<SearchSource> {
    [
        "postgres",
        "vacuum",
        "candidate",
        "flaky_timeout",
        "trigram",
    ]
    .iter()
    .map(|q| {
        let hits = reader.search(q, 50).unwrap();
        assert_eq!(hits.len(), 1, "{q}: {hits:?}");
        hits[0].source
    })
    .collect()
}

const FIVE_SOURCES: [SearchSource; 5] = [
    SearchSource::Task,
    SearchSource::FollowUp,
    SearchSource::Text,
    SearchSource::Tool,
    SearchSource::Result,
];

#[test]
fn a_ledger_from_before_the_index_gets_it_built_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    {
        let (ledger, writer) = open(&path, 10 * DAY);
        writer.commit_blocking(history("r1", DAY, 2 * DAY)).unwrap();
        ledger.close();
    }
    before_the_index(&path);
    // Read before any owner migrates it: no index yet, said so.
    let old = LedgerReader::open(&path).unwrap();
    let e = DroverError::from(old.search("postgres", 50).unwrap_err());
    assert_eq!(e.code, ErrorCode::LedgerError);
    assert!(e.message.contains("drover serve"), "{}", e.message);
    drop(old);
    let (ledger, _) = open(&path, 10 * DAY);
    let reader = ledger.reader().unwrap();
    assert_eq!(sources_of_history(&reader), FIVE_SOURCES);
    ledger.close();
}

#[test]
fn a_ledger_with_the_first_index_gets_this_one_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    {
        let (ledger, writer) = open(&path, 10 * DAY);
        writer.commit_blocking(history("r1", DAY, 2 * DAY)).unwrap();
        ledger.close();
    }
    // As a drover of migration 7 left it: its index, one document per agent text event.
    before_the_index(&path);
    migrate_file_to(&path, 7).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 7);
    let v7: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM search WHERE search MATCH 'candidate'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(v7, 1, "migration 7's index holds the agent's text");
    drop(conn);
    // This build does not read migration 7's documents: it says what builds its own.
    let old = LedgerReader::open(&path).unwrap();
    let e = DroverError::from(old.search("candidate", 50).unwrap_err());
    assert!(e.message.contains("drover serve"), "{}", e.message);
    drop(old);
    let (ledger, writer) = open(&path, 10 * DAY);
    let reader = ledger.reader().unwrap();
    assert_eq!(sources_of_history(&reader), FIVE_SOURCES);
    let candidate = reader.search("candidate", 50).unwrap();
    assert_eq!(candidate[0].turn, Some(1));
    assert_eq!(
        candidate[0].at, 7_001,
        "agent text is dated by its turn's end"
    );
    assert_eq!(
        documents(&path),
        5,
        "task, follow-up, the first turn's text and result, the tool call"
    );
    // Its triggers are this build's: a new run is indexed as one written now.
    writer
        .commit_blocking(history("r2", 2 * DAY, 3 * DAY))
        .unwrap();
    assert_eq!(documents(&path), 10);
    ledger.close();
}

/// How many documents the index holds.
fn documents(path: &Path) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("SELECT COUNT(*) FROM search_docsize", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_turns_agent_text_is_one_document_found_once_its_end_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    let (ledger, writer) = open(&path, 10 * DAY);
    let mut ops = vec![
        WriteOp::InsertRun(Box::new(run("r1", "tidy the cache", DAY, None))),
        turn("r1", 1, "dispatch", "drover's own first prompt", None),
        turn_started("r1", 1, 1),
    ];
    // The agent's text as many small events, a tool call among them.
    for i in 0..100u64 {
        ops.push(text(
            "r1",
            2 + i,
            &format!("chunk{i} of the zeppelin answer"),
        ));
    }
    ops.push(command("r1", 102, "cargo run --bin airship"));
    writer.commit_blocking(ops).unwrap();
    let reader = ledger.reader().unwrap();
    // In flight: its tool call is found at once, its text not yet.
    assert_eq!(found(&reader, "airship").len(), 1);
    assert!(found(&reader, "zeppelin").is_empty());
    assert_eq!(indexed(&path, "zeppelin"), 0);
    assert_eq!(documents(&path), 2, "the task and the tool call");
    // Its end recorded (a turn cut short is recorded ended the same way): one document
    // holds all of its text.
    writer
        .commit_blocking(vec![turn(
            "r1",
            1,
            "dispatch",
            "drover's own first prompt",
            Some("tidied"),
        )])
        .unwrap();
    assert_eq!(documents(&path), 4, "+ the turn's text and its result");
    let hits = reader.search("zeppelin", 50).unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(
        (hits[0].source, hits[0].turn, hits[0].at),
        (SearchSource::Text, Some(1), 7_001)
    );
    assert!(hits[0].marked("[", "]").contains("[zeppelin]"), "{hits:?}");
    // Each event's text is in it, not only the first or the last.
    for i in [0, 57, 99] {
        let hits = reader.search(&format!("chunk{i}"), 50).unwrap();
        assert_eq!(hits.len(), 1, "chunk{i}");
        assert_eq!(hits[0].source, SearchSource::Text);
        assert!(
            hits[0].line.contains(&format!("chunk{i} of the")),
            "{hits:?}"
        );
    }
    // A second turn is a document of its own: its words find it, and not the first.
    writer
        .commit_blocking(vec![
            turn("r1", 2, "follow_up", "and the blimp", None),
            turn_started("r1", 103, 2),
            text("r1", 104, "The blimp hangar is tidy too."),
            turn("r1", 2, "follow_up", "and the blimp", Some("done")),
        ])
        .unwrap();
    let hangar = reader.search("hangar", 50).unwrap();
    assert_eq!((hangar.len(), hangar[0].turn), (1, Some(2)), "{hangar:?}");
    assert_eq!(hangar[0].line, "The blimp hangar is tidy too.");
    assert!(found(&reader, "zeppelin AND hangar").is_empty());
    let before = documents(&path);
    drop(reader);
    ledger.close();
    // Built again from the rows (a ledger of migration 7 migrated): each turn's text is
    // its own events', up to the next turn's start.
    before_the_index(&path);
    migrate_file_to(&path, 7).unwrap();
    let (ledger, _) = open(&path, 10 * DAY);
    let reader = ledger.reader().unwrap();
    assert_eq!(documents(&path), before);
    assert!(found(&reader, "zeppelin AND hangar").is_empty());
    let turns = |query: &str| -> Vec<Option<u32>> {
        let hits = reader.search(query, 50).unwrap();
        hits.iter().map(|h| h.turn).collect()
    };
    assert_eq!(turns("zeppelin"), [Some(1)]);
    assert_eq!(turns("hangar"), [Some(2)]);
    ledger.close();
}

#[test]
fn a_turns_end_indexes_the_text_it_hands_the_writer_and_reads_no_event_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    let (ledger, writer) = open(&path, 10 * DAY);
    writer
        .commit_blocking(vec![
            WriteOp::InsertRun(Box::new(run("r1", "tidy the cache", DAY, None))),
            turn("r1", 1, "dispatch", "drover's own first prompt", None),
            turn_started("r1", 1, 1),
            text("r1", 2, "the zeppelin answer"),
        ])
        .unwrap();
    let ended = |words: &str| WriteOp::EndTurn {
        turn: Box::new(TurnRecord {
            run_id: "r1".into(),
            number: 1,
            origin: "dispatch".into(),
            started_at: 6_001,
            ended_at: Some(7_001),
            prompt_preview: "drover's own first prompt".into(),
            text: None,
            usage: None,
            cost_usd: None,
            result: None,
            evidence: None,
        }),
        text: Some(words.into()),
    };
    // The text handed with the turn's end is what is indexed: the turn's events are not
    // read again (a word only they hold is not in the index).
    writer
        .commit_blocking(vec![ended("the dirigible answer")])
        .unwrap();
    assert_eq!(indexed(&path, "dirigible"), 1);
    assert_eq!(indexed(&path, "zeppelin"), 0);
    assert_eq!(documents(&path), 2, "the task and the turn's text");
    // Its end recorded again: the document is replaced, not added to.
    writer
        .commit_blocking(vec![ended("the airship answer")])
        .unwrap();
    assert_eq!(
        (indexed(&path, "airship"), indexed(&path, "dirigible")),
        (1, 0)
    );
    assert_eq!(documents(&path), 2);
    // A turn that said nothing has no document.
    writer.commit_blocking(vec![ended("")]).unwrap();
    assert_eq!(documents(&path), 1, "the task alone");
    ledger.close();
}

#[test]
fn a_turn_a_crash_left_open_is_indexed_from_its_events_when_recovery_ends_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    {
        let (ledger, writer) = open(&path, 10 * DAY);
        writer
            .commit_blocking(vec![
                WriteOp::InsertRun(Box::new(run("r1", "tidy the cache", DAY, None))),
                turn("r1", 1, "dispatch", "drover's own first prompt", None),
                turn_started("r1", 1, 1),
                text("r1", 2, "the zeppelin answer"),
            ])
            .unwrap();
        ledger.close();
    }
    assert_eq!(indexed(&path, "zeppelin"), 0, "in flight: not yet");
    // The next open finds the run's row unreadable (its spec is not a spec): recovery
    // ends its turn, and nobody holds its text but its events.
    let (ledger, _) = open(&path, 10 * DAY);
    assert_eq!(indexed(&path, "zeppelin"), 1);
    let hits = ledger.reader().unwrap().search("zeppelin", 50).unwrap();
    assert_eq!(
        (hits.len(), hits[0].source),
        (1, SearchSource::Text),
        "{hits:?}"
    );
    assert_eq!(hits[0].line, "the zeppelin answer");
    ledger.close();
}

/// The lines `drover search QUERY --json` found: (source, line with the matches in `[…]`).
fn searched(home: &common::Home, query: &str) -> Vec<(String, String)> {
    let answer = home.json(&["search", query]);
    let hits = answer["hits"].as_array().unwrap().clone();
    hits.iter()
        .map(|h| {
            let hit: SearchHit = serde_json::from_value(h.clone()).unwrap();
            (
                h["source"].as_str().unwrap().to_string(),
                hit.marked("[", "]"),
            )
        })
        .collect()
}

#[test]
fn drover_search_finds_a_real_runs_task_follow_up_tool_call_and_result_with_or_without_an_owner() {
    let home = common::Home::new();
    let serve = home.serve();
    let run = home.dispatch(
        "multi-turn",
        "Write the tokenizer for Postgres dumps",
        &["--policy", "auto"],
    );
    home.wait_idle(&run);
    home.json(&["follow-up", &run, "also handle quoted identifiers"]);
    home.wait_for(&run, "the follow-up's turn ended", |view| {
        view["state"] == "idle" && view["turns"].as_array().is_some_and(|t| t.len() == 2)
    });
    let through_owner = searched(&home, "postgres");
    assert_eq!(
        through_owner,
        [(
            "task".to_string(),
            "Write the tokenizer for [Postgres] dumps".to_string()
        )]
    );
    let quoted = searched(&home, "quoted");
    let sources: Vec<&str> = quoted.iter().map(|(s, _)| s.as_str()).collect();
    assert!(sources.contains(&"follow_up"), "{quoted:?}");
    assert!(sources.contains(&"result"), "{quoted:?}");
    assert!(
        quoted.contains(&(
            "follow_up".to_string(),
            "also handle [quoted] identifiers".to_string()
        )),
        "{quoted:?}"
    );
    let parser = searched(&home, "\"src/parser.rs\"");
    assert!(
        parser
            .iter()
            .any(|(s, l)| s == "tool" && l.contains("[src/parser.rs]")),
        "the Write call's line: {parser:?}"
    );
    assert!(
        parser.iter().any(|(s, _)| s == "text"),
        "the agent's text: {parser:?}"
    );
    // The human form: run, age, where, the line.
    let out = home.drover(&["search", "postgres"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("RUN"), "{text}");
    assert!(
        text.contains(&run) && text.contains("task") && text.contains("[Postgres]"),
        "{text}"
    );
    let refusal = home.refused(&["search", "staging-eu"], "SEARCH_QUERY_INVALID");
    assert!(refusal.contains("\"staging-eu\""), "{refusal}");
    serve.stop();
    // No owner: the same answer, read from the ledger.
    assert_eq!(searched(&home, "postgres"), through_owner);
    home.refused(&["search", "AND"], "SEARCH_QUERY_INVALID");
    assert_eq!(home.json(&["search", "zzyzxnothere"])["hits"], json!([]));
}
