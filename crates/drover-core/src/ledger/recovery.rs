//! Recovery on open: first what the runs' children left behind is ended (the processes
//! the ledger noted, matched by boot, pid and start time: never anything else). The runs
//! themselves are put back where they were by the dispatcher as it starts
//! (`dispatch::core`, docs/ARCHITECTURE.md §"A restart"), through the lifecycle table
//! like every other change; only a run whose row can no longer be read back (so no
//! dispatcher can hold it) is settled here: it becomes `interrupted`, its live state
//! `ended` with cause `resident_replaced`, with events saying so; its pending requests
//! get a decision (system, denied, owner gone) and its open turn an end. Nothing else is
//! guessed.

use rusqlite::{Connection, params};
use serde_json::json;

use super::LedgerError;
use super::reader::RawRun;
use super::records::kind;
use crate::UnixMillis;
use crate::live_state::{self, Assignment, Cause, LiveState, LiveStateEvent, LiveStateKind};
use crate::providers::sweep::{LeftOver, Noted};
use crate::run_state::RunState;

/// The reason given to a run whose damaged row recovery marks `interrupted`.
pub const INTERRUPTED_REASON: &str = "interrupted";

/// What recovery changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recovery {
    /// Active runs whose rows could not be read back, marked `interrupted`, oldest
    /// first (every other active run is the dispatcher's to put back).
    pub interrupted: Vec<String>,
    /// Processes a crashed owner's runs left, ended before the runs were marked.
    pub processes_ended: usize,
}

/// The processes the runs' children started, as the ledger noted them (an owner notes
/// them while it runs and forgets a run's once its child is swept).
pub(super) fn noted_processes(conn: &Connection) -> Result<Vec<LeftOver>, LedgerError> {
    let mut st = conn.prepare("SELECT run_id, pid, start_ticks, pgid, boot_id FROM processes")?;
    let rows = st
        .query_map([], |r| {
            Ok(LeftOver {
                run_id: r.get(0)?,
                process: Noted {
                    pid: r.get(1)?,
                    start: u64::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
                    pgid: r.get(3)?,
                },
                boot_id: r.get(4)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub(super) fn recover(conn: &mut Connection, now: UnixMillis) -> Result<Recovery, LedgerError> {
    let tx = conn.transaction()?;
    // First what the runs' children left (same boot, pid and start time), then the runs.
    let left = noted_processes(&tx)?;
    let processes_ended = crate::providers::sweep::end_left_over(&left);
    tx.execute("DELETE FROM processes", [])?;
    // An interrupted run is already settled: it waits for the user.
    let active: Vec<String> = RunState::ALL
        .iter()
        .filter(|s| s.is_active() && **s != RunState::Interrupted)
        .map(|s| format!("'{}'", s.as_str()))
        .collect();
    let sql = format!(
        "SELECT run_id, created_at, updated_at, finished_at, state, completion_reason,
            provider, model, title, budget_session, workflow_id, parent_run, idempotency_key,
            provider_session_id, removed, spec_json, live_state_json, result_json, workspace_json
         FROM runs WHERE state IN ({}) ORDER BY created_at, run_id",
        active.join(", ")
    );
    let raws = {
        let mut st = tx.prepare(&sql)?;
        st.query_map([], RawRun::from_row)?
            .collect::<Result<Vec<_>, _>>()?
    };
    let mut report = Recovery {
        processes_ended,
        ..Recovery::default()
    };
    for raw in raws {
        // A row that reads back (its spec too) is the dispatcher's to put back; one that
        // does not is interrupted here: its live state starts afresh.
        let (run_id, previous_state, live) = match raw.into_record() {
            Ok(r) => match serde_json::from_value::<crate::spec::Spec>(r.spec.clone()) {
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!(run_id = %r.run_id, error = %e, "ledger: recovering a run with a damaged spec");
                    (r.run_id, r.state.as_str().to_string(), r.live_state)
                }
            },
            Err(LedgerError::Corrupt { run_id, what }) => {
                tracing::warn!(%run_id, %what, "ledger: recovering a run with a damaged row");
                (run_id, "unknown".to_string(), None)
            }
            Err(e) => return Err(e),
        };
        let ended = end_live_state(live.as_ref(), now);
        // Requests still pending at the crash: asked, never decided.
        let pending: Vec<String> = {
            let mut st = tx.prepare(
                "SELECT json_extract(body_json, '$.request_id') FROM events
                 WHERE run_id = ?1 AND kind = 'permission_requested'
                   AND json_extract(body_json, '$.request_id') IS NOT NULL
                   AND json_extract(body_json, '$.request_id') NOT IN (
                       SELECT request_id FROM decisions
                       WHERE run_id = ?1 AND request_id IS NOT NULL)
                   AND json_extract(body_json, '$.request_id') NOT IN (
                       SELECT json_extract(body_json, '$.request_id') FROM events
                       WHERE run_id = ?1 AND kind IN ('permission_resolved', 'permission_withdrawn')
                         AND json_extract(body_json, '$.request_id') IS NOT NULL)
                 ORDER BY seq",
            )?;
            st.query_map(params![run_id], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()?
        };
        // The turn the crash cut short ends now, its agent text indexed from its events
        // (docs/ARCHITECTURE.md §"Ledger").
        let cut: Vec<u32> = tx
            .prepare(
                "UPDATE turns SET ended_at = ?2 WHERE run_id = ?1 AND ended_at IS NULL
                 RETURNING number",
            )?
            .query_map(params![run_id, now], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        if !cut.is_empty() && super::search::has_index(&tx) {
            for number in cut {
                super::search::index_turn_text(&tx, &run_id, number, false, None)?;
            }
        }
        let mut seq: i64 = tx.query_row(
            "SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?1",
            params![run_id],
            |r| r.get(0),
        )?;
        let mut append = |kind: &str, body: serde_json::Value| -> Result<(), LedgerError> {
            seq += 1;
            tx.execute(
                "INSERT INTO events (run_id, seq, kind, at, body_json) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![run_id, seq, kind, now, serde_json::to_string(&body)?],
            )?;
            Ok(())
        };
        for request_id in &pending {
            tx.execute(
                "INSERT INTO decisions (run_id, at, kind, request_id, who, decision, body_json)
                 VALUES (?1, ?2, 'permission', ?3, 'system', 'deny: owner gone', ?4)",
                params![
                    run_id,
                    now,
                    request_id,
                    json!({"behavior": "deny", "message": "drover stopped before it was answered"})
                        .to_string()
                ],
            )?;
            append(
                "permission_resolved",
                json!({"request_id": request_id, "who": "system", "decision": "deny: owner gone"}),
            )?;
        }
        for event in ended.iter().flat_map(|(events, _)| events) {
            append(kind::LIVE_STATE, serde_json::to_value(event)?)?;
        }
        append(
            kind::RUN_STATE,
            json!({
                "from": previous_state,
                "to": RunState::Interrupted.as_str(),
                "reason": INTERRUPTED_REASON,
                "note": "drover stopped while this run was active, and its row no longer reads back",
            }),
        )?;
        let live_json = match &ended {
            Some((_, state)) => Some(serde_json::to_string(state)?),
            None => None,
        };
        tx.execute(
            "UPDATE runs SET state = ?2, completion_reason = ?3,
                updated_at = ?4, live_state_json = COALESCE(?5, live_state_json)
             WHERE run_id = ?1",
            params![
                run_id,
                RunState::Interrupted.as_str(),
                INTERRUPTED_REASON,
                now,
                live_json
            ],
        )?;
        report.interrupted.push(run_id);
    }
    tx.commit()?;
    Ok(report)
}

/// The events that end a run's last live state, and the state they yield. `None` when
/// the live state had already ended. A run that never had a live state is admitted first,
/// so folding its events still tells a legal story.
fn end_live_state(
    current: Option<&LiveState>,
    now: UnixMillis,
) -> Option<(Vec<LiveStateEvent>, LiveState)> {
    if current.is_some_and(|s| s.state == LiveStateKind::Ended) {
        return None;
    }
    let mut events = Vec::new();
    let mut state = current.cloned();
    if state.is_none() {
        let admitted = Assignment {
            expected_seq: 0,
            state: LiveStateKind::Admitted,
            bound: Some(now),
            detail: None,
            cause: None,
            reopen: false,
        };
        state = live_state::assign(None, &admitted, now).ok();
        events.push(LiveStateEvent {
            at: now,
            assignment: admitted,
        });
    }
    let ended = Assignment {
        expected_seq: state.as_ref().map_or(0, |s| s.seq),
        state: LiveStateKind::Ended,
        bound: None,
        detail: Some("drover stopped while this run was active".to_string()),
        cause: Some(Cause::ResidentReplaced),
        reopen: false,
    };
    let final_state = live_state::assign(state.as_ref(), &ended, now).ok()?;
    events.push(LiveStateEvent {
        at: now,
        assignment: ended,
    });
    Some((events, final_state))
}
