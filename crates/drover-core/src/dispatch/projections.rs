//! The ledger-to-view projections: the API's views ([`RunSummary`], [`RunView`],
//! [`TranscriptView`], [`WaitOutcome`], [`BudgetView`]) built from ledger rows, and the
//! reads the dispatcher makes off its task ([`answer`], [`fetch`], [`startup`]).
//!
//! This is the one place that turns ledger rows into API views; the owner uses it for
//! runs that are not in memory, and a client with no owner (`control::offline`) for
//! everything. What must stay true:
//! - only a read-only connection is used ([`LedgerReader`]); the file may be owned by
//!   nobody, and reading must never change it;
//! - money is summed from usage rows (never guessed): `cost_usd` adds what was priced and
//!   `cost_basis` is the weakest basis seen, so an unpriced row is never hidden as $0; a
//!   budget session's sums are the ledger's running totals of its rows;
//! - what only a live dispatcher knows is reported as absent, not invented: no pending
//!   requests, not stalled, no queued follow-ups (what putting a run back after a restart
//!   needs of them — the requests no resolution settled, the follow-ups not sent — is
//!   read for [`startup`] from the run's events, never shown as live);
//! - a damaged row is a `LEDGER_ERROR` naming the run, never a panic.

use std::collections::HashMap;

use super::api::{
    BudgetView, NoteView, Response, ResultView, RunCounts, RunSummary, RunView, RunsFilter,
    TranscriptFormat, TranscriptView, TurnView, WaitOutcome, WaitUntil,
};
use super::reads::{Fetch, Fetched, LoadedSession, Query, REMOVE_PAGE, ResumeData, Startup};
use super::run_view::{RowState, RunDetails, RunFacts};
use crate::error::{DroverError, ErrorCode};
use crate::ledger::{LedgerError, LedgerReader, RunRecord, UsageRecord, kind};
use crate::providers::Tokens;
use crate::result_contract::ResultBlock;
use crate::run_state::RunState;
use crate::spec::Spec;
use crate::workspace::WorkspaceView;

/// The event kind whose `body.line` is one transcript line (the transcript ring's lines,
/// as the dispatcher records them); the agent's text has its line made again from
/// `body.event.text` when read (see [`transcript_line`]).
pub const TRANSCRIPT_EVENT: &str = crate::ledger::kind::TRANSCRIPT;

/// The follow-ups a run queued behind a turn and did not send: each `follow_up_sent`
/// event took the oldest one queued before it.
fn pending_follow_ups(reader: &LedgerReader, run_id: &str) -> Result<Vec<String>, DroverError> {
    use crate::ledger::kind::{FOLLOW_UP_QUEUED, FOLLOW_UP_SENT};
    let mut pending = std::collections::VecDeque::new();
    for event in reader.events_of_kinds(run_id, &[FOLLOW_UP_QUEUED, FOLLOW_UP_SENT])? {
        if event.kind == FOLLOW_UP_QUEUED {
            let text = event.body["text"].as_str().unwrap_or_default();
            if !text.trim().is_empty() {
                pending.push_back(text.to_string());
            }
        } else {
            pending.pop_front();
        }
    }
    Ok(pending.into())
}

/// Everything needed to put a run a previous owner left active back in memory.
pub fn resume_data(reader: &LedgerReader, record: RunRecord) -> Result<ResumeData, DroverError> {
    let run_id = record.run_id.clone();
    let view = run_view_from_ledger(reader, &run_id)?;
    let tail = transcript_from_ledger(reader, &run_id, TranscriptFormat::Tail)?.lines;
    let last_seq = reader.last_seq(&run_id)?;
    let session = session(reader, &record.budget_session)?;
    let follow_ups = pending_follow_ups(reader, &run_id)?;
    let pending = unanswered_requests(reader, &run_id)?;
    let turn_cut = record.state == RunState::Interrupted && interrupted_in_a_turn(reader, &run_id)?;
    Ok(ResumeData {
        record,
        view,
        tail,
        last_seq,
        session,
        follow_ups,
        pending,
        turn_cut,
    })
}

/// The requests a run asked that left no resolution in its stream (answered, withdrawn,
/// timed out and denied-at-stop all leave one), oldest first.
fn unanswered_requests(
    reader: &LedgerReader,
    run_id: &str,
) -> Result<Vec<crate::dispatch::api::PendingView>, DroverError> {
    let mut pending: Vec<crate::dispatch::api::PendingView> = Vec::new();
    let kinds = [
        "permission_requested",
        "permission_resolved",
        "permission_withdrawn",
    ];
    for event in reader.events_of_kinds(run_id, &kinds)? {
        if event.kind == "permission_requested" {
            match serde_json::from_value(event.body) {
                Ok(view) => pending.push(view),
                Err(e) => tracing::warn!(%run_id, error = %e, "a request that does not read back"),
            }
        } else if let Some(id) = event.body.get("request_id").and_then(|v| v.as_str()) {
            pending.retain(|p| p.request_id != id);
        }
    }
    Ok(pending)
}

/// Whether an interrupted run's turn was in flight when it was interrupted: its last move
/// to `interrupted` says so (`turn_cut`), or — written before it did — came from a state
/// that runs a turn.
fn interrupted_in_a_turn(reader: &LedgerReader, run_id: &str) -> Result<bool, DroverError> {
    let moves = reader.events_of_kind(run_id, kind::RUN_STATE)?;
    let Some(last) = moves
        .iter()
        .rev()
        .find(|e| e.body.get("to").and_then(|v| v.as_str()) == Some("interrupted"))
    else {
        return Ok(false);
    };
    if let Some(cut) = last.body.get("turn_cut").and_then(|v| v.as_bool()) {
        return Ok(cut);
    }
    Ok(matches!(
        last.body.get("from").and_then(|v| v.as_str()),
        Some("running" | "starting")
    ))
}

/// What the dispatcher reads at start: the current budget session, remembered routes,
/// when the newest run was created, and the runs left active to put back.
pub fn startup(
    reader: &LedgerReader,
    pid: u32,
    data_dir: &std::path::Path,
) -> Result<Startup, DroverError> {
    let name = reader
        .meta(crate::dispatch::core::SESSION_KEY)?
        .unwrap_or_else(|| crate::dispatch::core::DEFAULT_SESSION.to_string());
    let mut route_memory = Vec::new();
    for class in crate::route::TaskClass::ALL {
        if let Some(choice) = reader.meta(&crate::dispatch::core::route_memory_key(class))? {
            route_memory.push((class.as_str().to_string(), choice));
        }
    }
    // The repositories drover's worktrees belong to.
    let checkouts: Vec<std::path::PathBuf> = reader
        .worktree_checkouts()?
        .into_iter()
        .map(std::path::PathBuf::from)
        .collect();
    Ok(Startup {
        pid,
        version: crate::version().to_string(),
        session: session(reader, &name)?,
        route_memory,
        rules: reader.rules()?,
        script_approvals: reader.script_approvals()?,
        // Untrusted like any file: a value that is not a number counts as none.
        rules_high_water: reader
            .meta(crate::dispatch::core::RULES_HIGH_WATER)?
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0),
        newest_run_at: reader.newest_run_at()?,
        data_dir: data_dir.to_path_buf(),
        checkouts,
        restored: restorable_runs(reader)?,
    })
}

/// The runs left active, oldest first, each with what putting it back needs. A run whose
/// rows do not read back is left out (logged): no dispatcher can hold it.
fn restorable_runs(reader: &LedgerReader) -> Result<Vec<ResumeData>, DroverError> {
    let mut records = reader.active_runs()?;
    records.retain(|r| !r.removed);
    records.sort_by(|a, b| {
        a.created_at
            .cmp(&b.created_at)
            .then_with(|| a.run_id.cmp(&b.run_id))
    });
    let mut restored = Vec::with_capacity(records.len());
    for record in records {
        let run_id = record.run_id.clone();
        match resume_data(reader, record) {
            Ok(data) => restored.push(data),
            Err(e) => tracing::warn!(%run_id, error = %e, "a run left active does not read back"),
        }
    }
    Ok(restored)
}

/// A budget session's spend (every usage row of it, from the ledger's running totals)
/// and its record.
pub fn session(reader: &LedgerReader, name: &str) -> Result<LoadedSession, DroverError> {
    Ok(LoadedSession {
        name: name.to_string(),
        spent: reader.session_totals(name)?.spent_usd,
        record: reader.budget_session(name)?,
    })
}

/// Answers a client from the ledger, with what the dispatcher knows laid over it.
pub fn answer(reader: &LedgerReader, query: Query) -> Result<Response, DroverError> {
    Ok(match query {
        Query::Show { run_id } => Response::Show(Box::new(run_view_from_ledger(reader, &run_id)?)),
        Query::Transcript { run_id, format } => {
            Response::Transcript(Box::new(transcript_from_ledger(reader, &run_id, format)?))
        }
        Query::Runs { filter, live } => {
            // The ledger picks the page (every run is committed before it is shown); what
            // the dispatcher holds in memory is fresher, and replaces the ledger's row.
            let mut live: HashMap<String, RunSummary> = live
                .into_iter()
                .map(|r| (r.head.run_id.clone(), r))
                .collect();
            let rows = run_summaries_from_ledger(reader, &filter)?
                .into_iter()
                .map(|r| live.remove(&r.head.run_id).unwrap_or(r))
                .collect();
            Response::Runs(rows)
        }
        Query::Search { query, limit, live } => {
            Response::Search(Box::new(search_from_ledger(reader, &query, limit, live)?))
        }
        Query::Counts => Response::Counts(run_counts(reader)?),
        Query::Spend { by, since } => Response::Spend(Box::new(reader.spend(by, since)?)),
        Query::Budget { mut overlay } => {
            let bases = session_bases(reader, &overlay.session)?;
            overlay.runs_by_basis = bases.runs_by_basis;
            overlay.unpriced_runs = bases.unpriced_runs;
            Response::Budget(overlay)
        }
        Query::NotActive { run_id } => {
            return Err(match reader.run(&run_id)? {
                Some(record) => {
                    crate::dispatch::core::not_held(&run_id, record.state, record.removed)
                }
                None => crate::dispatch::core::not_found(&run_id),
            });
        }
    })
}

/// Reads what the dispatcher asked for.
pub fn fetch(reader: &LedgerReader, fetch: Fetch) -> Result<Fetched, DroverError> {
    Ok(match fetch {
        Fetch::ByIdempotencyKey { key, since } => {
            Fetched::Run(match reader.run_by_idempotency_key(&key, since)? {
                Some(record) => Some(Box::new(summary_from_record(reader, &record)?)),
                None => None,
            })
        }
        Fetch::Summaries { run_ids } => Fetched::Summaries(summaries(reader, &run_ids)?),
        Fetch::WaitRows { run_ids, workflow } => Fetched::WaitRows {
            named: summaries(reader, &run_ids)?,
            workflow: run_summaries_from_ledger(
                reader,
                &RunsFilter {
                    include_removed: true,
                    workflow: Some(workflow),
                    ..RunsFilter::default()
                },
            )?,
        },
        Fetch::FinishedRuns { before } => Fetched::Summaries(
            run_summaries_from_ledger(
                reader,
                &RunsFilter {
                    limit: Some(REMOVE_PAGE),
                    before,
                    ..RunsFilter::default()
                },
            )?
            .into_iter()
            .filter(|r| r.head.state.is_terminal())
            .collect(),
        ),
        Fetch::View { run_id } => Fetched::View(Box::new(run_view_from_ledger(reader, &run_id)?)),
        Fetch::Session { name } => Fetched::Session(session(reader, &name)?),
    })
}

/// Each run's summary, in order (`RUN_NOT_FOUND` when one is missing).
fn summaries(reader: &LedgerReader, run_ids: &[String]) -> Result<Vec<RunSummary>, DroverError> {
    let mut rows = Vec::with_capacity(run_ids.len());
    for id in run_ids {
        let record = reader
            .run(id)?
            .ok_or_else(|| crate::dispatch::core::not_found(id))?;
        rows.push(summary_from_record(reader, &record)?);
    }
    Ok(rows)
}

/// `search` from the ledger: its lines, and the summaries of their runs (what `live`
/// holds of one, fresher, replaces the ledger's).
pub fn search_from_ledger(
    reader: &LedgerReader,
    query: &str,
    limit: u32,
    live: Vec<RunSummary>,
) -> Result<super::api::SearchView, DroverError> {
    let hits = reader.search(query, limit)?;
    let mut live: HashMap<String, RunSummary> = live
        .into_iter()
        .map(|r| (r.head.run_id.clone(), r))
        .collect();
    let mut ids: Vec<&str> = Vec::new();
    for hit in &hits {
        if !ids.contains(&hit.run_id.as_str()) {
            ids.push(&hit.run_id);
        }
    }
    // Each run's spend from its own usage rows (by the run's index), as a page of `runs`.
    let spend = reader.spend_of(&ids)?;
    let mut runs: Vec<RunSummary> = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(summary) = live.remove(id) {
            runs.push(summary);
        } else if let Some(record) = reader.run(id)? {
            let cost = spend.get(id).copied().unwrap_or(0.0);
            runs.push(summary(reader, record, cost)?);
        }
    }
    Ok(super::api::SearchView { hits, runs })
}

/// What `show` and the transcript say of a run whose events retention pruned.
pub fn pruned_note() -> String {
    "retention pruned this run's events ([limits] retention_events_days): its transcript \
     lines and provider events are gone; its turns (`drover transcript RUN --format text`), \
     result, usage and decisions are kept"
        .to_string()
}

/// `RUN_NOT_FOUND` for `run_id`.
pub fn run_not_found(run_id: &str) -> DroverError {
    DroverError::new(
        ErrorCode::RunNotFound,
        format!("there is no run {run_id}; `drover runs --all` lists every run"),
    )
}

/// Rows of `drover runs`: one page of the ledger ([`LedgerReader::runs_page`]), newest
/// first (by creation), each with its spend. `RUN_NOT_FOUND` when the page starts
/// `before` a run the ledger does not have.
pub fn run_summaries_from_ledger(
    reader: &LedgerReader,
    filter: &RunsFilter,
) -> Result<Vec<RunSummary>, DroverError> {
    let Some(mut runs) = reader.runs_page(&filter.page())? else {
        let id = filter.before.as_deref().unwrap_or_default();
        return Err(DroverError::new(
            ErrorCode::RunNotFound,
            format!(
                "there is no run {id} to page from; give --before the last run id a page \
                 printed, or see `drover runs --all`"
            ),
        ));
    };
    runs.sort_by(|a, b| {
        b.created_at
            .cmp(&a.created_at)
            .then_with(|| b.run_id.cmp(&a.run_id))
    });
    let ids: Vec<&str> = runs.iter().map(|r| r.run_id.as_str()).collect();
    let spend = reader.spend_of(&ids)?;
    runs.into_iter()
        .map(|run| {
            let cost = spend.get(&run.run_id).copied().unwrap_or(0.0);
            summary(reader, run, cost)
        })
        .collect()
}

/// How many runs the ledger holds, by state (from its running counts).
pub fn run_counts(reader: &LedgerReader) -> Result<RunCounts, DroverError> {
    let shown = reader.runs_by_state(false)?;
    let every: u64 = reader.runs_by_state(true)?.iter().map(|(_, n)| n).sum();
    let by_state: std::collections::BTreeMap<String, u64> = shown
        .into_iter()
        .map(|(state, n)| (state.as_str().to_string(), n))
        .collect();
    let removed = every - by_state.values().sum::<u64>();
    Ok(RunCounts { by_state, removed })
}

/// One run's row from its ledger record (its cost summed from its usage rows).
pub fn summary_from_record(
    reader: &LedgerReader,
    run: &RunRecord,
) -> Result<RunSummary, DroverError> {
    let cost = reader
        .usage(Some(&run.run_id))?
        .iter()
        .filter_map(|u| u.cost_usd)
        .sum();
    summary(reader, run.clone(), cost)
}

fn summary(
    reader: &LedgerReader,
    run: RunRecord,
    cost_usd: f64,
) -> Result<RunSummary, DroverError> {
    let spec = stored_spec(&run)?;
    let last_result = stored_result(&run)?;
    let depth = match run.parent_run {
        Some(_) => stored_depth(reader, &run.run_id)?,
        None => 0,
    };
    let workspace = stored_workspace(&run);
    Ok(facts(
        &run,
        &spec,
        cost_usd,
        depth,
        workspace.as_ref(),
        reader.last_seq(&run.run_id)?,
    )
    .summary(RowState {
        pending: 0,
        needs_input: needs_input(run.state, last_result.as_ref()),
        escalation_offered: false,
        script_approval: false,
        conflict_offered: false,
        result_status: last_result.and_then(|r| r.status),
    }))
}

/// A run's depth as its last `lineage` event recorded it (0 without one).
fn stored_depth(reader: &LedgerReader, run_id: &str) -> Result<u32, DroverError> {
    Ok(
        last_event_body::<serde_json::Value>(reader, run_id, "lineage")?
            .and_then(|l| l.get("depth")?.as_u64())
            .unwrap_or(0) as u32,
    )
}

/// What every view of a run is built from, from its ledger row and its newest event's
/// seq (only a live dispatcher knows a run is stalled).
fn facts<'a>(
    run: &'a RunRecord,
    spec: &'a Spec,
    cost_usd: f64,
    depth: u32,
    workspace: Option<&'a WorkspaceView>,
    rev: u64,
) -> RunFacts<'a> {
    RunFacts {
        run_id: &run.run_id,
        state: run.state,
        completion_reason: run.completion_reason.as_deref(),
        spec,
        provider: &run.provider,
        model: run.model.as_deref(),
        title: &run.title,
        parent_run: run.parent_run.as_deref(),
        workflow_id: run.workflow_id.as_deref(),
        live_state: run.live_state.as_ref(),
        cost_usd,
        stalled: false,
        created_at: run.created_at,
        finished_at: run.finished_at,
        depth,
        workspace,
        rev,
    }
}

/// What only the ledger tells about a session's runs: their spend, and each one's
/// weakest cost basis.
struct SessionBases {
    spent: f64,
    runs_by_basis: std::collections::BTreeMap<String, usize>,
    unpriced_runs: Vec<String>,
}

fn session_bases(reader: &LedgerReader, session: &str) -> Result<SessionBases, DroverError> {
    use crate::money::pricing::Basis;
    // The ledger keeps these as running totals: a few rows read, whatever the history.
    let totals = reader.session_totals(session)?;
    let runs_by_basis = totals
        .runs_by_weakest
        .iter()
        .map(|(basis, runs)| (basis.as_str().to_string(), *runs as usize))
        .collect();
    let unpriced_runs = reader.session_runs_of_weakest(
        session,
        Basis::Unpriced,
        crate::dispatch::api::UNPRICED_SHOWN,
    )?;
    Ok(SessionBases {
        spent: totals.spent_usd,
        runs_by_basis,
        unpriced_runs,
    })
}

/// The money of one budget session from its usage rows; `reserved_usd` is what live runs
/// may still spend (only an owner knows; offline it is 0).
pub fn budget_from_ledger(
    reader: &LedgerReader,
    session: &str,
    limits: &crate::config::Limits,
    reserved_usd: f64,
) -> Result<BudgetView, DroverError> {
    let record = reader.budget_session(session)?;
    let (warning_usd, hard_cap_usd) = crate::money::budget::session_caps(limits, record.as_ref());
    let bases = session_bases(reader, session)?;
    let money = crate::money::budget::SessionMoney::restore(
        session,
        bases.spent,
        reserved_usd,
        warning_usd,
        hard_cap_usd,
    );
    Ok(BudgetView {
        warned: money.warned,
        closed: money.closed,
        session: session.to_string(),
        spent_usd: bases.spent,
        reserved_usd,
        available_usd: money.available(),
        warning_usd,
        hard_cap_usd,
        unpriced_runs: bases.unpriced_runs,
        runs_by_basis: bases.runs_by_basis,
        config_refused: None,
        ledger_unavailable: None,
    })
}

/// The body of a run's last event of `kind`, parsed (`None` when it has none).
fn last_event_body<T: serde::de::DeserializeOwned>(
    reader: &LedgerReader,
    run_id: &str,
    kind: &str,
) -> Result<Option<T>, DroverError> {
    Ok(reader
        .last_event_of_kind(run_id, kind)?
        .and_then(|body| serde_json::from_value(body).ok()))
}

/// Everything about one run (`drover show`). `RUN_NOT_FOUND` when the ledger has no such
/// run.
pub fn run_view_from_ledger(reader: &LedgerReader, run_id: &str) -> Result<RunView, DroverError> {
    let run = reader.run(run_id)?.ok_or_else(|| run_not_found(run_id))?;
    let spec = stored_spec(&run)?;
    let last_result = stored_result(&run)?;
    let usage = reader.usage(Some(run_id))?;
    let mut tokens = Tokens::default();
    for row in &usage {
        tokens.add(&row_tokens(row));
    }
    let turns = reader
        .turns(run_id)?
        .into_iter()
        .map(|turn| {
            let mut turn_tokens = Tokens::default();
            for row in usage.iter().filter(|u| u.turn == Some(turn.number)) {
                turn_tokens.add(&row_tokens(row));
            }
            TurnView {
                number: turn.number,
                origin: turn.origin,
                started_at: turn.started_at,
                ended_at: turn.ended_at,
                prompt_preview: turn.prompt_preview,
                text: turn.text,
                tokens: turn_tokens,
                cost_usd: turn.cost_usd,
                result: turn.result,
                commands: turn
                    .evidence
                    .and_then(|e| serde_json::from_value(e).ok())
                    .unwrap_or_default(),
            }
        })
        .collect();
    let mut notes: Vec<NoteView> = reader
        .events_of_kind(run_id, kind::NOTE)?
        .into_iter()
        .filter_map(|e| {
            let text = e.body.get("text")?.as_str()?.to_string();
            Some(NoteView { at: e.at, text })
        })
        .collect();
    if let Some(at) = reader.events_pruned_at(run_id)? {
        notes.push(NoteView {
            at,
            text: pruned_note(),
        });
    }
    let spent: f64 = usage.iter().filter_map(|u| u.cost_usd).sum();
    let workspace = stored_workspace(&run);
    let depth = stored_depth(reader, run_id)?;
    let details = RunDetails {
        cost_basis: crate::money::pricing::weakest_basis(usage.iter().map(|u| u.basis.as_str()))
            .to_string(),
        tokens,
        turns,
        pending: Vec::new(),
        last_result,
        notes,
        provider_session_id: run.provider_session_id.clone(),
        queued_follow_ups: 0,
        pid: None,
        booked_usd: spent,
        usage,
        route: last_event_body(reader, run_id, "route")?,
        escalation: last_event_body(reader, run_id, "escalation_offer")?,
        decisions: decisions(reader, run_id)?,
        // Only a live run waits on its scripts' approval.
        script_approval: None,
        conflict_offer: None,
    };
    let rev = reader.last_seq(&run.run_id)?;
    Ok(facts(&run, &spec, spent, depth, workspace.as_ref(), rev).view(details))
}

/// The run's last [`DECISIONS_SHOWN`](crate::dispatch::api::DECISIONS_SHOWN) decisions.
fn decisions(
    reader: &LedgerReader,
    run_id: &str,
) -> Result<Vec<crate::dispatch::api::DecisionView>, DroverError> {
    let all = reader.decisions(run_id)?;
    let skip = all
        .len()
        .saturating_sub(crate::dispatch::api::DECISIONS_SHOWN);
    Ok(all
        .into_iter()
        .skip(skip)
        .map(|d| crate::dispatch::api::DecisionView {
            at: d.at,
            request_id: d.request_id,
            who: d.who,
            decision: d.decision,
        })
        .collect())
}

/// A run's workspace as its row keeps it; `None` for a row from before workspaces (or
/// one whose workspace does not read: the rest of the row still shows).
pub fn stored_workspace(run: &RunRecord) -> Option<crate::workspace::WorkspaceView> {
    let value = run.workspace.clone()?;
    match serde_json::from_value(value) {
        Ok(ws) => Some(ws),
        Err(e) => {
            tracing::warn!(run = %run.run_id, error = %e, "a run's workspace does not read");
            None
        }
    }
}

/// The transcript of one run in `format`, from its ledger rows: `tail` from the events
/// of kind [`TRANSCRIPT_EVENT`], `text` from the turns, `events` every event, `result`
/// the run's last result.
pub fn transcript_from_ledger(
    reader: &LedgerReader,
    run_id: &str,
    format: TranscriptFormat,
) -> Result<TranscriptView, DroverError> {
    let run = reader.run(run_id)?.ok_or_else(|| run_not_found(run_id))?;
    let mut view = TranscriptView {
        run_id: run_id.to_string(),
        format,
        lines: Vec::new(),
        events: Vec::new(),
        result: None,
        events_pruned_at: reader.events_pruned_at(run_id)?,
        last_seq: None,
    };
    match format {
        TranscriptFormat::Tail => {
            if view.events_pruned_at.is_some() {
                view.lines.push(format!("[{}]", pruned_note()));
            }
            view.lines.extend(
                reader
                    .events_of_kind(run_id, TRANSCRIPT_EVENT)?
                    .into_iter()
                    .filter_map(|e| transcript_line(&e.body)),
            );
        }
        TranscriptFormat::Text => {
            for turn in reader.turns(run_id)? {
                view.lines
                    .push(format!("## turn {} ({})", turn.number, turn.origin));
                if let Some(text) = turn.text {
                    view.lines.extend(text.lines().map(str::to_string));
                }
            }
        }
        TranscriptFormat::Events => view.events = reader.events(run_id, 0)?,
        TranscriptFormat::Result => view.result = stored_result(&run)?,
    }
    Ok(view)
}

/// The transcript line of a [`TRANSCRIPT_EVENT`]'s body: its `line`; or, for the agent's
/// text (stored with no line since its line breaks are kept), the entry the ring holds,
/// made again from the event's text.
fn transcript_line(body: &serde_json::Value) -> Option<String> {
    if let Some(line) = body.get("line").and_then(|l| l.as_str()) {
        return Some(line.to_string());
    }
    let event = body.get("event")?;
    (event.get("type")?.as_str()? == "assistant_text").then(|| {
        crate::dispatch::core::transcript::text_entry(
            event
                .get("text")
                .and_then(|t| t.as_str())
                .unwrap_or_default(),
        )
    })
}

/// A `wait` answered from the ledger: `Some` when the ledger already meets the
/// condition (nothing will change while nobody owns the directory, so a condition not
/// met now never will be: `None`). `until event` is never met offline.
pub fn wait_from_ledger(
    reader: &LedgerReader,
    run_ids: &[String],
    workflow: Option<&str>,
    until: WaitUntil,
    any: bool,
) -> Result<Option<WaitOutcome>, DroverError> {
    let mut runs = Vec::with_capacity(run_ids.len());
    for run_id in run_ids {
        let run = reader.run(run_id)?.ok_or_else(|| run_not_found(run_id))?;
        runs.push(summary_from_record(reader, &run)?);
    }
    if let Some(workflow) = workflow {
        let members = run_summaries_from_ledger(
            reader,
            &RunsFilter {
                include_removed: true,
                workflow: Some(workflow.to_string()),
                ..RunsFilter::default()
            },
        )?;
        if members.is_empty() {
            return Err(crate::dispatch::core::workflow_not_found(workflow));
        }
        let mut seen: std::collections::HashSet<String> = run_ids.iter().cloned().collect();
        runs.extend(
            members
                .into_iter()
                .rev()
                .filter(|r| seen.insert(r.head.run_id.clone())),
        );
    }
    // Nothing changes while nobody owns the directory: no new event will come.
    let met = |run: &RunSummary| until != WaitUntil::Event && until.met_by(run);
    let done = if any {
        runs.iter().any(met)
    } else {
        !runs.is_empty() && runs.iter().all(met)
    };
    Ok(done.then_some(WaitOutcome {
        timed_out: false,
        runs,
    }))
}

/// A run shows in the Needs-you tray while its last result asks a question.
fn needs_input(state: RunState, result: Option<&ResultView>) -> bool {
    state.is_active() && result.and_then(|r| r.status.as_deref()) == Some("needs_input")
}

fn row_tokens(row: &UsageRecord) -> Tokens {
    Tokens {
        input: row.input,
        output: row.output,
        reasoning: row.reasoning,
        cache_read: row.cache_read,
        cache_write: row.cache_write,
    }
}

/// The run's spec as the ledger stored it; `LEDGER_ERROR` naming the run when it cannot
/// be read.
pub fn stored_spec(run: &RunRecord) -> Result<Spec, DroverError> {
    serde_json::from_value(run.spec.clone()).map_err(|e| damaged(run, "runs.spec_json", e))
}

/// The run's result column: a `ResultView` as the dispatcher stores it; a bare
/// `ResultBlock` (the parser's own shape) is read too.
fn stored_result(run: &RunRecord) -> Result<Option<ResultView>, DroverError> {
    let Some(value) = &run.result else {
        return Ok(None);
    };
    if let Ok(view) = serde_json::from_value::<ResultView>(value.clone()) {
        return Ok(Some(view));
    }
    if value.get("found").is_none() {
        return Err(damaged(
            run,
            "runs.result_json",
            "neither a result view nor a result block",
        ));
    }
    let block = serde_json::from_value::<ResultBlock>(value.clone())
        .map_err(|e| damaged(run, "runs.result_json", e))?;
    Ok(Some(block.into()))
}

fn damaged(run: &RunRecord, column: &str, e: impl std::fmt::Display) -> DroverError {
    LedgerError::Corrupt {
        run_id: run.run_id.clone(),
        what: format!("{column}: {e}"),
    }
    .into()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ledger::{EventRecord, Ledger, LedgerOptions, RunRecord, TurnRecord, WriteOp};
    use crate::live_state::{Cause, LiveState, LiveStateKind};
    use crate::paths::Paths;
    use crate::spec::{Capability, PermissionPolicy};
    use serde_json::Value;
    use serde_json::json;

    fn spec(task: &str, budget_usd: f64, policy: PermissionPolicy, max_turns: u32) -> Value {
        serde_json::to_value(Spec {
            provider: "sim".into(),
            model: Some("sim-standard".into()),
            effort: None,
            cwd: "/work/project".into(),
            task: task.into(),
            context: None,
            title: task.into(),
            tags: vec![],
            capability: Capability::Workspace,
            policy,
            max_minutes: 45,
            budget_usd,
            idle_timeout_secs: 1200,
            max_turns,
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

    fn run(run_id: &str, state: RunState, created_at: i64, spec: Value) -> RunRecord {
        RunRecord {
            run_id: run_id.into(),
            created_at,
            updated_at: created_at,
            finished_at: state.is_terminal().then_some(created_at + 500),
            state,
            completion_reason: state.is_terminal().then(|| "complete".to_string()),
            provider: "sim".into(),
            model: Some("sim-standard".into()),
            title: format!("title of {run_id}"),
            budget_session: "default".into(),
            workflow_id: None,
            parent_run: None,
            idempotency_key: None,
            provider_session_id: None,
            removed: false,
            spec,
            live_state: None,
            result: None,
            workspace: None,
        }
    }

    fn usage(run_id: &str, turn: Option<u32>, cost: Option<f64>, basis: &str) -> WriteOp {
        WriteOp::InsertUsage(Box::new(UsageRecord {
            run_id: run_id.into(),
            turn,
            at: 1_100,
            provider: "sim".into(),
            model: Some("sim-standard".into()),
            part: "main".into(),
            input: 100,
            output: 10,
            reasoning: 1,
            cache_read: 1_000,
            cache_write: 5,
            cost_usd: cost,
            basis: basis.into(),
            fidelity: "exact".into(),
            source: "test".into(),
            budget_session: "default".into(),
        }))
    }

    fn turn(run_id: &str, number: u32, origin: &str, text: &str) -> WriteOp {
        WriteOp::UpsertTurn(Box::new(TurnRecord {
            run_id: run_id.into(),
            number,
            origin: origin.into(),
            started_at: 1_000 + number as i64,
            ended_at: Some(1_050 + number as i64),
            prompt_preview: format!("prompt {number}"),
            text: Some(text.into()),
            usage: None,
            cost_usd: Some(0.1),
            result: Some(json!({"status": "done"})),
            evidence: None,
        }))
    }

    fn event(run_id: &str, seq: u64, kind: &str, body: Value) -> WriteOp {
        WriteOp::event(EventRecord {
            run_id: run_id.into(),
            seq,
            kind: kind.into(),
            at: 1_000 + seq as i64,
            body,
        })
        .unwrap()
    }

    fn done_result() -> ResultView {
        ResultView {
            status: Some("done".into()),
            summary: Some("fixed the parser".into()),
            question: None,
            files: vec!["src/parse.rs".into()],
            changes: vec!["handle empty input".into()],
            follow_ups: vec![],
            json: None,
        }
    }

    /// r1: completed with two turns, priced usage and events; r2: running and asking a
    /// question, unpriced usage; r3: completed and removed, no usage.
    fn fill_ledger(paths: &Paths) {
        let (ledger, _) = Ledger::open(&paths.ledger_file, LedgerOptions::default(), 0).unwrap();
        let mut r1 = run(
            "r1",
            RunState::Completed,
            1_000,
            spec("fix the parser", 2.5, PermissionPolicy::Auto, 4),
        );
        r1.result = Some(serde_json::to_value(done_result()).unwrap());
        r1.provider_session_id = Some("sess-1".into());
        r1.live_state = Some(LiveState {
            state: LiveStateKind::Ended,
            since: 1_500,
            bound: None,
            detail: None,
            cause: Some(Cause::Completed),
            seq: 4,
        });
        let mut r2 = run(
            "r2",
            RunState::Idle,
            3_000,
            spec("pick a database", 5.0, PermissionPolicy::Ask, 6),
        );
        // The parser's own shape, as a result column may hold it.
        r2.result = Some(json!({"found": true, "status": "needs_input", "question": "which db?"}));
        let mut r3 = run(
            "r3",
            RunState::Completed,
            2_000,
            spec("old chore", 1.0, PermissionPolicy::Ask, 6),
        );
        r3.removed = true;
        let mut ops = vec![
            WriteOp::InsertRun(Box::new(r1)),
            WriteOp::InsertRun(Box::new(r2)),
            WriteOp::InsertRun(Box::new(r3)),
            usage("r1", Some(1), Some(0.10), "reported"),
            usage("r1", Some(2), Some(0.05), "estimated"),
            usage("r2", Some(1), None, "unpriced"),
            turn("r1", 1, "dispatch", "line one\nline two"),
            turn("r1", 2, "follow_up", "done"),
        ];
        ops.extend([
            event("r1", 1, kind::RUN_STATE, json!({"state": "running"})),
            event("r1", 2, TRANSCRIPT_EVENT, json!({"line": "tool: Read"})),
            event(
                "r1",
                3,
                kind::NOTE,
                json!({"text": "budget lowered to $2.50"}),
            ),
            event(
                "r1",
                4,
                TRANSCRIPT_EVENT,
                json!({"line": "assistant: done"}),
            ),
        ]);
        ledger.writer().commit_blocking(ops).unwrap();
        ledger.close();
    }

    pub(crate) fn filled() -> (tempfile::TempDir, Paths, LedgerReader) {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::under(dir.path());
        fill_ledger(&paths);
        let reader = LedgerReader::open(&paths.ledger_file).unwrap();
        (dir, paths, reader)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn summaries_sum_spend_and_follow_the_filters() {
        let (_dir, _paths, reader) = filled();
        let rows = run_summaries_from_ledger(&reader, &RunsFilter::default()).unwrap();
        let ids: Vec<_> = rows.iter().map(|r| r.head.run_id.as_str()).collect();
        assert_eq!(ids, ["r2", "r1"], "newest first, removed runs left out");
        let (r2, r1) = (&rows[0], &rows[1]);
        assert!(close(r1.head.cost_usd, 0.15), "{}", r1.head.cost_usd);
        assert_eq!(r1.head.budget_usd, 2.5);
        assert_eq!(r1.head.completion_reason.as_deref(), Some("complete"));
        assert_eq!(r1.head.finished_at, Some(1_500));
        assert_eq!(
            r1.head.live_state.as_ref().unwrap().cause,
            Some(Cause::Completed)
        );
        assert!(!r1.needs_input && !r1.head.stalled && r1.pending == 0);
        // Unpriced usage is never booked as spend; the run asks a question.
        assert_eq!(r2.head.cost_usd, 0.0);
        assert!(r2.needs_input);

        let completed = run_summaries_from_ledger(
            &reader,
            &RunsFilter {
                state: Some(RunState::Completed),
                include_removed: true,
                ..RunsFilter::default()
            },
        )
        .unwrap();
        let ids: Vec<_> = completed.iter().map(|r| r.head.run_id.as_str()).collect();
        assert_eq!(ids, ["r3", "r1"]);
        assert!(
            run_summaries_from_ledger(
                &reader,
                &RunsFilter {
                    state: Some(RunState::Failed),
                    include_removed: true,
                    ..RunsFilter::default()
                },
            )
            .unwrap()
            .is_empty()
        );
    }

    #[test]
    fn a_run_view_is_built_from_every_table() {
        let (_dir, _paths, reader) = filled();
        let view = run_view_from_ledger(&reader, "r1").unwrap();
        assert_eq!(view.task, "fix the parser");
        assert_eq!(view.cwd, "/work/project");
        assert_eq!(view.policy, "auto");
        assert_eq!(view.max_turns, 4);
        assert_eq!(view.head.budget_usd, 2.5);
        assert!(close(view.head.cost_usd, 0.15));
        assert_eq!(view.cost_basis, "estimated");
        assert_eq!(
            view.tokens,
            Tokens {
                input: 200,
                output: 20,
                reasoning: 2,
                cache_read: 2_000,
                cache_write: 10
            }
        );
        assert_eq!(view.turns.len(), 2);
        assert_eq!(view.turns[0].origin, "dispatch");
        assert_eq!(view.turns[0].tokens.input, 100, "only turn 1's usage");
        assert_eq!(view.turns[1].text.as_deref(), Some("done"));
        assert_eq!(view.turns[1].result, Some(json!({"status": "done"})));
        assert_eq!(
            view.notes,
            vec![NoteView {
                at: 1_003,
                text: "budget lowered to $2.50".into()
            }]
        );
        assert_eq!(view.last_result, Some(done_result()));
        assert_eq!(view.provider_session_id.as_deref(), Some("sess-1"));
        assert!(view.pending.is_empty() && !view.head.stalled && view.queued_follow_ups == 0);

        let r2 = run_view_from_ledger(&reader, "r2").unwrap();
        assert_eq!(r2.cost_basis, "unpriced");
        let result = r2.last_result.unwrap();
        assert_eq!(result.status.as_deref(), Some("needs_input"));
        assert_eq!(result.question.as_deref(), Some("which db?"));
        assert_eq!(
            run_view_from_ledger(&reader, "r3").unwrap().cost_basis,
            "free"
        );

        let e = run_view_from_ledger(&reader, "nope").unwrap_err();
        assert_eq!(e.code, ErrorCode::RunNotFound);
    }

    #[test]
    fn transcripts_come_from_events_turns_and_the_result() {
        let (_dir, _paths, reader) = filled();
        let get = |format| transcript_from_ledger(&reader, "r1", format).unwrap();
        assert_eq!(
            get(TranscriptFormat::Tail).lines,
            ["tool: Read", "assistant: done"]
        );
        assert_eq!(
            get(TranscriptFormat::Text).lines,
            [
                "## turn 1 (dispatch)",
                "line one",
                "line two",
                "## turn 2 (follow_up)",
                "done"
            ]
        );
        let events = get(TranscriptFormat::Events).events;
        assert_eq!(
            events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
        assert_eq!(get(TranscriptFormat::Result).result, Some(done_result()));
        let e = transcript_from_ledger(&reader, "nope", TranscriptFormat::Tail).unwrap_err();
        assert_eq!(e.code, ErrorCode::RunNotFound);
    }

    #[test]
    fn the_agents_text_is_read_back_with_its_line_breaks_from_the_event() {
        let text = crate::providers::ProviderEvent::AssistantText {
            text: "## Plan\n\n- one\x1b[2J\n- two".into(),
        };
        let body = |line: serde_json::Value, event: &crate::providers::ProviderEvent| json!({"line": line, "event": serde_json::to_value(event).unwrap()});
        // Stored with no line: made again from the event's text, as the ring made it.
        assert_eq!(
            transcript_line(&body(serde_json::Value::Null, &text)).as_deref(),
            Some("text: ## Plan\n\n- one[2J\n- two")
        );
        assert_eq!(
            transcript_line(&body(serde_json::Value::Null, &text)),
            crate::dispatch::core::transcript::summarize(&text)
        );
        // A line stored (an older ledger's one-line text, any other event) is read as is.
        assert_eq!(
            transcript_line(&body(json!("text: ## Plan - one - two"), &text)).as_deref(),
            Some("text: ## Plan - one - two")
        );
        // An event with no line (usage) has none.
        let usage = crate::providers::ProviderEvent::Usage {
            model: None,
            tokens: Default::default(),
        };
        assert_eq!(
            transcript_line(&body(serde_json::Value::Null, &usage)),
            None
        );
    }

    #[test]
    fn a_wait_is_answered_offline_only_when_already_met() {
        let (_dir, _paths, reader) = filled();
        let ids = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // (runs, until, any, met)
        let cases = [
            (ids(&["r1"]), WaitUntil::Terminal, false, true),
            (ids(&["r1", "r2"]), WaitUntil::Terminal, false, false),
            (ids(&["r1", "r2"]), WaitUntil::Terminal, true, true),
            (ids(&["r2"]), WaitUntil::Idle, false, true),
            (ids(&["r1"]), WaitUntil::Event, true, false),
            (ids(&[]), WaitUntil::Terminal, false, false),
        ];
        for (run_ids, until, any, met) in cases {
            let outcome = wait_from_ledger(&reader, &run_ids, None, until, any).unwrap();
            assert_eq!(outcome.is_some(), met, "{run_ids:?} {until:?} any={any}");
            if let Some(outcome) = outcome {
                assert!(!outcome.timed_out);
                assert_eq!(outcome.runs.len(), run_ids.len());
            }
        }
        let e = wait_from_ledger(&reader, &ids(&["nope"]), None, WaitUntil::Terminal, false)
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::RunNotFound);
        // A workflow no run is in.
        let e = wait_from_ledger(&reader, &[], Some("wf-none"), WaitUntil::Terminal, false)
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::WorkflowNotFound);
    }

    #[test]
    fn a_damaged_spec_is_a_ledger_error_naming_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::under(dir.path());
        let (ledger, _) = Ledger::open(&paths.ledger_file, LedgerOptions::default(), 0).unwrap();
        let bad = run(
            "rb",
            RunState::Completed,
            1,
            json!({"task": "no other fields"}),
        );
        ledger
            .writer()
            .commit_blocking(vec![WriteOp::InsertRun(Box::new(bad))])
            .unwrap();
        let reader = ledger.reader().unwrap();
        let e = run_view_from_ledger(&reader, "rb").unwrap_err();
        assert_eq!(e.code, ErrorCode::LedgerError);
        assert!(
            e.message.contains("rb") && e.message.contains("spec_json"),
            "{}",
            e.message
        );
    }

    #[test]
    fn the_weakest_basis_wins() {
        let cases: &[(&[&str], &str)] = &[
            (&[], "free"),
            (&["free"], "free"),
            (&["free", "reported"], "reported"),
            (&["reported", "estimated", "free"], "estimated"),
            (&["estimated", "unpriced", "reported"], "unpriced"),
            (&["reported", "something-new"], "unpriced"),
        ];
        for (bases, weakest) in cases {
            assert_eq!(
                crate::money::pricing::weakest_basis(bases.iter().copied()),
                *weakest,
                "{bases:?}"
            );
        }
    }
}
