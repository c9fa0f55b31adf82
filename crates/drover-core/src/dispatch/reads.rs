//! What the dispatcher's core asks of the ledger, and what comes back: the reads the
//! driver makes off the core's task ([`Query`] answered straight to a client, [`Fetch`]
//! answered to the core as [`Fetched`]) and what it reads at start ([`Startup`]).
//!
//! Plain data, below both the core (which asks) and `projections` (which answers from
//! ledger rows), so neither imports the other.

use std::path::PathBuf;

use super::api::{BudgetView, RunSummary, RunView, RunsFilter, TranscriptFormat};
use crate::UnixMillis;
use crate::ledger::{BudgetSessionRecord, RunRecord};

/// How many finished runs `remove --finished` reads from the ledger at a time, so that
/// removing a long history holds one page in memory and commits it in one batch.
pub const REMOVE_PAGE: u32 = 500;

/// An answer built from the ledger (`super::projections`), with what only the core knows.
#[derive(Debug, Clone, PartialEq)]
pub enum Query {
    Show {
        run_id: String,
    },
    Transcript {
        run_id: String,
        format: TranscriptFormat,
    },
    /// The ledger's runs, with the live ones (in memory) taking precedence.
    Runs {
        filter: RunsFilter,
        live: Vec<RunSummary>,
    },
    /// How many runs the ledger holds in each state (every change is committed before it
    /// is shown, so the ledger's counts are the dispatcher's).
    Counts,
    /// The budget session's view, its money as the core holds it laid over the ledger's.
    Budget {
        overlay: Box<BudgetView>,
    },
    /// Refuse a request on a run that is not in memory: `RUN_NOT_ACTIVE` with its state
    /// in the ledger, else `RUN_NOT_FOUND`.
    NotActive {
        run_id: String,
    },
}

/// What to read for the core.
#[derive(Debug, Clone, PartialEq)]
pub enum Fetch {
    /// The run created with this idempotency key since then, if any.
    ByIdempotencyKey { key: String, since: UnixMillis },
    /// Everything needed to resume a run (`RUN_NOT_FOUND` when there is none).
    Resumable { run_id: String },
    /// Each run's summary (`RUN_NOT_FOUND` when one is missing).
    Summaries { run_ids: Vec<String> },
    /// Everything about one run (`RUN_NOT_FOUND` when there is none).
    View { run_id: String },
    /// The summaries of finished runs not yet removed, newest-finished first: at most
    /// [`REMOVE_PAGE`] of them, finished before the run `before` when one is named.
    FinishedRuns { before: Option<String> },
    /// A budget session's spend and record.
    Session { name: String },
}

/// The answer to a [`Fetch`].
#[derive(Debug, Clone, PartialEq)]
pub enum Fetched {
    Run(Option<Box<RunSummary>>),
    Resumable(Box<ResumeData>),
    Summaries(Vec<RunSummary>),
    View(Box<RunView>),
    Session(LoadedSession),
}

/// What the driver read from the ledger at start.
#[derive(Debug, Clone, PartialEq)]
pub struct Startup {
    /// This process's id (the answer to `ping`).
    pub pid: u32,
    /// This build's version (the answer to `ping`).
    pub version: String,
    /// The budget session new runs count against, with its money.
    pub session: LoadedSession,
    /// Remembered route choices: task class → `provider/model`.
    pub route_memory: Vec<(String, String)>,
    /// The approval rules, oldest first.
    pub rules: Vec<crate::rules::Rule>,
    /// The highest rule id ever given ([`RULES_HIGH_WATER`]; 0 when none is recorded).
    pub rules_high_water: u64,
    /// When the newest run in the ledger was created (new ids sort after it).
    pub newest_run_at: Option<UnixMillis>,
    /// The data directory (worktrees go under it unless `[workspaces] root` says).
    pub data_dir: PathBuf,
    /// The repositories that runs' worktrees belong to (stale entries are pruned at start).
    pub checkouts: Vec<PathBuf>,
}

/// A budget session as the ledger has it: its booked spend and its record.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedSession {
    pub name: String,
    pub spent: f64,
    pub record: Option<BudgetSessionRecord>,
}

/// What resuming a run needs from the ledger.
#[derive(Debug, Clone, PartialEq)]
pub struct ResumeData {
    pub record: RunRecord,
    pub view: RunView,
    /// The transcript's lines (the ring is rebuilt from them).
    pub tail: Vec<String>,
    /// The run's last event seq (its next events go on from it).
    pub last_seq: u64,
    /// The run's budget session.
    pub session: LoadedSession,
    /// Follow-ups queued behind a turn and not yet sent, oldest first.
    pub follow_ups: Vec<String>,
}
