//! Retention: keeps every run's history and prunes the bulk. A finished run's events
//! (transcript lines, provider events, live states: most of the file) are pruned once it
//! finished longer ago than [`RetentionPolicy::events_after`]; its row, turns, usage rows,
//! decisions and a few small event kinds ([`KEPT_KINDS`]: its follow-ups among them, so an
//! interrupted run resumed later still sends the ones it had not sent) stay, so
//! `runs --all`, results and spend cover every run ever made. An optional hard cap on
//! runs ([`RetentionPolicy::max_runs`]) deletes the oldest finished runs whole beyond it.
//!
//! It runs on a thread of its own and sends small batches to the writer, each waited for
//! before the next, so pruning never sits on the write path of a live run. Active runs
//! are never touched, nor a run whose worktree is still there.

use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{LedgerError, LedgerReader, LedgerWriter, WriteOp};
use crate::UnixMillis;

/// Runs pruned or deleted per write batch.
const CHUNK: usize = 50;

/// The event kinds a pruned run keeps: few and small, and what its view reads (its
/// notes, route card, escalation offer and place in its workflow), and its follow-ups
/// queued and sent. An `interrupted` run can be resumed however old it is, and its
/// follow-ups not yet sent live only in those events: pruning never loses one (a
/// resumed run sends them after its resume turn; its transcript before the pruning is
/// gone, its provider session has it).
pub const KEPT_KINDS: &[&str] = &[
    super::kind::NOTE,
    "route",
    "escalation_offer",
    "lineage",
    super::kind::FOLLOW_UP_QUEUED,
    super::kind::FOLLOW_UP_SENT,
];

/// What retention keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// A finished run's events are pruned this long after it finished; `None` keeps
    /// them forever.
    pub events_after: Option<Duration>,
    /// At most this many runs are kept (the oldest finished ones beyond it are deleted
    /// whole); `None` keeps every run.
    pub max_runs: Option<u64>,
}

impl RetentionPolicy {
    /// Nothing pruned, nothing deleted.
    pub const KEEP_ALL: RetentionPolicy = RetentionPolicy {
        events_after: None,
        max_runs: None,
    };

    /// From `[limits]`: days (0: events kept forever) and a run cap (0: no cap).
    pub fn from_limits(events_days: u32, max_runs: u64) -> RetentionPolicy {
        RetentionPolicy {
            events_after: (events_days > 0)
                .then(|| Duration::from_secs(u64::from(events_days) * 86_400)),
            max_runs: (max_runs > 0).then_some(max_runs),
        }
    }
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        RetentionPolicy::from_limits(30, 1_000_000)
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Runs whose events were pruned.
    pub events_of: usize,
    /// Runs deleted whole (beyond the cap).
    pub deleted: usize,
}

pub(super) struct Retention {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<()>,
}

impl Retention {
    pub(super) fn start(
        path: PathBuf,
        writer: LedgerWriter,
        policy: RetentionPolicy,
        interval: Duration,
    ) -> Result<Retention, LedgerError> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("ledger-retention".into())
            .spawn(move || {
                loop {
                    match prune(&path, &writer, policy, crate::clock::now_millis()) {
                        Ok(p) if p != Pruned::default() => tracing::info!(
                            events_of = p.events_of,
                            deleted = p.deleted,
                            "ledger: retention pass"
                        ),
                        Ok(_) => {}
                        Err(e) => tracing::warn!(error = %e, "ledger: retention pass failed"),
                    }
                    match stopped.recv_timeout(interval) {
                        Err(RecvTimeoutError::Timeout) => continue,
                        _ => break,
                    }
                }
            })?;
        Ok(Retention { stop, thread })
    }

    pub(super) fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

/// One retention pass at `now`: prunes the events of runs finished before the cutoff,
/// then deletes the oldest finished runs beyond the cap.
pub fn prune(
    path: &std::path::Path,
    writer: &LedgerWriter,
    policy: RetentionPolicy,
    now: UnixMillis,
) -> Result<Pruned, LedgerError> {
    let reader = LedgerReader::open(path)?;
    let mut done = Pruned::default();
    if let Some(after) = policy.events_after {
        let cutoff = now.saturating_sub(i64::try_from(after.as_millis()).unwrap_or(i64::MAX));
        // Oldest first, from where the last chunk ended: each run is looked at once.
        let mut from = (i64::MIN, String::new());
        loop {
            let chunk = reader.events_to_prune(cutoff, &from, CHUNK)?;
            let Some(last) = chunk.last() else { break };
            from = last.clone();
            let run_ids: Vec<String> = chunk.into_iter().map(|(_, id)| id).collect();
            done.events_of += run_ids.len();
            writer.commit_blocking(vec![WriteOp::PruneEvents { run_ids, at: now }])?;
        }
    }
    if let Some(max) = policy.max_runs {
        let (total, finished) = reader.run_counts()?;
        if total > max {
            let active = total - finished;
            let keep = max.saturating_sub(active);
            let doomed = reader.finished_beyond(u32::try_from(keep).unwrap_or(u32::MAX))?;
            for chunk in doomed.chunks(CHUNK) {
                writer.commit_blocking(vec![WriteOp::DeleteRuns(chunk.to_vec())])?;
            }
            done.deleted = doomed.len();
        }
    }
    Ok(done)
}
