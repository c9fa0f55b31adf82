//! What the dispatcher's core asks of the ledger, and what comes back: the reads the
//! driver makes off the core's task ([`Query`] answered straight to a client, [`Fetch`]
//! answered to the core as [`Fetched`]) and what it reads at start ([`Startup`]).
//!
//! Plain data, below both the core (which asks) and `projections` (which answers from
//! ledger rows), so neither imports the other.

use std::path::PathBuf;

use super::api::{BudgetView, PendingView, RunSummary, RunView, RunsFilter, TranscriptFormat};
use crate::UnixMillis;
use crate::ledger::{BudgetSessionRecord, RunRecord};

/// How many finished runs `remove --finished` reads from the ledger at a time, so that
/// removing a long history holds one page in memory and commits it in one batch.
pub const REMOVE_PAGE: u32 = 500;

/// An answer built from the ledger (`super::projections`), with what only the core knows.
#[derive(Debug, Clone, PartialEq)]
pub enum Query {
    /// `show` of a run that is not in memory.
    Show {
        /// The run to show.
        run_id: String,
    },
    /// `transcript` of a run.
    Transcript {
        /// The run whose transcript is read.
        run_id: String,
        /// The format asked for.
        format: TranscriptFormat,
    },
    /// The ledger's runs, with the live ones (in memory) taking precedence.
    Runs {
        /// The filter of the `runs` request.
        filter: RunsFilter,
        /// The runs in memory, as they are now.
        live: Vec<RunSummary>,
    },
    /// The ledger's search, with the live runs (in memory) taking precedence.
    Search {
        /// The query, as the client sent it.
        query: String,
        /// Lines at most.
        limit: u32,
        /// The runs in memory, as they are now.
        live: Vec<RunSummary>,
    },
    /// Spend over time from the usage rows (`spend`).
    Spend {
        /// What the rows are grouped by.
        by: crate::ledger::SpendBy,
        /// Only usage from the start of this local day.
        since: Option<crate::ledger::spend::Since>,
    },
    /// How many runs the ledger holds in each state (every change is committed before it
    /// is shown, so the ledger's counts are the dispatcher's).
    Counts,
    /// The budget session's view, its money as the core holds it laid over the ledger's.
    Budget {
        /// The session's money as the core holds it.
        overlay: Box<BudgetView>,
    },
    /// Refuse a request on a run that is not in memory: `RUN_NOT_ACTIVE` with its state
    /// in the ledger, else `RUN_NOT_FOUND`.
    NotActive {
        /// The run the request named.
        run_id: String,
    },
}

/// What to read for the core.
#[derive(Debug, Clone, PartialEq)]
pub enum Fetch {
    /// The run created with this idempotency key since then, if any.
    ByIdempotencyKey {
        /// The idempotency key.
        key: String,
        /// The start of the idempotency window, in ms since the Unix epoch.
        since: UnixMillis,
    },
    /// Each run's summary (`RUN_NOT_FOUND` when one is missing).
    Summaries {
        /// The runs.
        run_ids: Vec<String>,
    },
    /// For a wait on a workflow: the summaries of the named runs (`RUN_NOT_FOUND` when
    /// one is missing) and of every run of the workflow, removed ones too.
    WaitRows {
        /// The runs the wait names that are not in memory.
        run_ids: Vec<String>,
        /// The workflow.
        workflow: String,
    },
    /// Everything about one run (`RUN_NOT_FOUND` when there is none).
    View {
        /// The run to view.
        run_id: String,
    },
    /// The summaries of finished runs not yet removed, newest-finished first: at most
    /// [`REMOVE_PAGE`] of them, finished before the run `before` when one is named.
    FinishedRuns {
        /// The last run of the page before; `None` for the first page.
        before: Option<String>,
    },
    /// A budget session's spend and record.
    Session {
        /// The session's name.
        name: String,
    },
}

/// The answer to a [`Fetch`].
#[derive(Debug, Clone, PartialEq)]
pub enum Fetched {
    /// For [`Fetch::ByIdempotencyKey`]: the run, when there is one.
    Run(Option<Box<RunSummary>>),
    /// For [`Fetch::Summaries`] and [`Fetch::FinishedRuns`].
    Summaries(Vec<RunSummary>),
    /// For [`Fetch::WaitRows`].
    WaitRows {
        /// The named runs' summaries.
        named: Vec<RunSummary>,
        /// The summaries of the workflow's runs, in the order `runs` lists them.
        workflow: Vec<RunSummary>,
    },
    /// For [`Fetch::View`].
    View(Box<RunView>),
    /// For [`Fetch::Session`].
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
    /// The repository scripts the user approved (docs/ARCHITECTURE.md §"Workspaces").
    pub script_approvals: Vec<crate::workspace::scripts::ApprovedScript>,
    /// The highest rule id ever given ([`RULES_HIGH_WATER`]; 0 when none is recorded).
    pub rules_high_water: u64,
    /// When the newest run in the ledger was created (new ids sort after it).
    pub newest_run_at: Option<UnixMillis>,
    /// The data directory (worktrees go under it unless `[workspaces] root` says).
    pub data_dir: PathBuf,
    /// The repositories that runs' worktrees belong to (stale entries are pruned at start).
    pub checkouts: Vec<PathBuf>,
    /// The runs a previous owner left active, oldest first, to be put back where they
    /// were (docs/ARCHITECTURE.md §"A restart").
    pub restored: Vec<ResumeData>,
}

/// A budget session as the ledger has it: its booked spend and its record.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedSession {
    /// The session's name.
    pub name: String,
    /// What its usage rows have booked, in US dollars (removed runs included).
    pub spent: f64,
    /// Its record; `None` when the ledger holds none (its caps are then the config's).
    pub record: Option<BudgetSessionRecord>,
}

/// What putting a run back in memory needs from the ledger (a run a previous owner left
/// active).
#[derive(Debug, Clone, PartialEq)]
pub struct ResumeData {
    /// The run's row.
    pub record: RunRecord,
    /// Everything about the run, as the ledger has it.
    pub view: RunView,
    /// The transcript's lines (the ring is rebuilt from them).
    pub tail: Vec<String>,
    /// The run's last event seq (its next events go on from it).
    pub last_seq: u64,
    /// The run's budget session.
    pub session: LoadedSession,
    /// Follow-ups queued behind a turn and not yet sent, oldest first.
    pub follow_ups: Vec<String>,
    /// The requests it asked that were never answered, oldest first (shown again).
    pub pending: Vec<PendingView>,
    /// For a run already `interrupted`: whether a turn of it was in flight then (only
    /// then may drover send its own resume turn).
    pub turn_cut: bool,
}
