//! Plain rows of the ledger, as the rest of drover sees them.
//!
//! These are data only: what goes in through the writer and what comes back from the
//! reader. JSON columns are carried as `serde_json::Value` so the ledger never depends on
//! the dispatcher's types.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::UnixMillis;
use crate::live_state::LiveState;
use crate::run_state::RunState;

/// Event kinds the ledger itself writes (the dispatcher adds its own).
pub mod kind {
    pub const RUN_STATE: &str = "run_state";
    pub const LIVE_STATE: &str = "live_state";
    pub const NOTE: &str = "note";
    /// A follow-up queued behind a running turn (body: its text, redacted).
    pub const FOLLOW_UP_QUEUED: &str = "follow_up_queued";
    /// A queued follow-up sent as a turn (the oldest one not yet sent).
    pub const FOLLOW_UP_SENT: &str = "follow_up_sent";
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub run_id: String,
    pub created_at: UnixMillis,
    pub updated_at: UnixMillis,
    pub finished_at: Option<UnixMillis>,
    pub state: RunState,
    pub completion_reason: Option<String>,
    pub provider: String,
    pub model: Option<String>,
    pub title: String,
    pub budget_session: String,
    pub workflow_id: Option<String>,
    pub parent_run: Option<String>,
    pub idempotency_key: Option<String>,
    pub provider_session_id: Option<String>,
    pub removed: bool,
    pub spec: Value,
    pub live_state: Option<LiveState>,
    pub result: Option<Value>,
    /// The run's workspace (`crate::workspace::WorkspaceView` as JSON).
    #[serde(default)]
    pub workspace: Option<Value>,
}

/// A change to a run: `None` leaves a column as it is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunPatch {
    pub updated_at: UnixMillis,
    pub state: Option<RunState>,
    pub completion_reason: Option<String>,
    pub finished_at: Option<UnixMillis>,
    pub model: Option<String>,
    pub provider_session_id: Option<String>,
    pub removed: Option<bool>,
    pub live_state: Option<LiveState>,
    pub result: Option<Value>,
    /// The run's workspace, replaced whole.
    #[serde(default)]
    pub workspace: Option<Value>,
    /// The run is resumed: its end (`finished_at`, `completion_reason`) is cleared.
    #[serde(default)]
    pub reopened: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    pub run_id: String,
    /// 1, 2, 3, … per run; the ledger refuses a gap or a repeat.
    pub seq: u64,
    pub kind: String,
    pub at: UnixMillis,
    pub body: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    pub run_id: String,
    pub number: u32,
    pub origin: String,
    pub started_at: UnixMillis,
    pub ended_at: Option<UnixMillis>,
    pub prompt_preview: String,
    pub text: Option<String>,
    pub usage: Option<Value>,
    pub cost_usd: Option<f64>,
    pub result: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageRecord {
    pub run_id: String,
    pub turn: Option<u32>,
    pub at: UnixMillis,
    pub provider: String,
    pub model: Option<String>,
    /// `main` or `subagents`.
    pub part: String,
    pub input: u64,
    pub output: u64,
    pub reasoning: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// `None` when the usage could not be priced (basis `unpriced`): never booked as $0.
    pub cost_usd: Option<f64>,
    /// `reported`, `estimated`, `free` or `unpriced`.
    pub basis: String,
    /// `exact` or `partial`.
    pub fidelity: String,
    pub source: String,
    pub budget_session: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    pub run_id: Option<String>,
    pub at: UnixMillis,
    /// `permission`, `route`, `budget`, …
    pub kind: String,
    pub request_id: Option<String>,
    /// `user`, `timeout`, `policy`, `system`, …
    pub who: String,
    pub decision: String,
    pub body: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetSessionRecord {
    pub name: String,
    pub created_at: UnixMillis,
    pub warning_usd: Option<f64>,
    pub hard_cap_usd: Option<f64>,
}

/// What an amount of money rests on, weakest first (the derived order is the ranking).
/// The default, `Free`, is the basis of no spend at all. It lives with the ledger's rows,
/// which store it as a word and rank it in their running totals; `money::pricing` gives it.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// No price: the usage is recorded without a cost.
    Unpriced,
    /// Priced by drover from the catalog's list prices.
    Estimated,
    /// Dollars the provider reported.
    Reported,
    /// The model is free.
    #[default]
    Free,
}

impl Basis {
    pub fn as_str(self) -> &'static str {
        match self {
            Basis::Unpriced => "unpriced",
            Basis::Estimated => "estimated",
            Basis::Reported => "reported",
            Basis::Free => "free",
        }
    }

    /// The basis a ledger word names; an unknown word is `Unpriced` (the weakest).
    pub fn parse(word: &str) -> Basis {
        match word {
            "estimated" => Basis::Estimated,
            "reported" => Basis::Reported,
            "free" => Basis::Free,
            _ => Basis::Unpriced,
        }
    }

    /// Every basis, weakest first.
    pub const ALL: [Basis; 4] = [
        Basis::Unpriced,
        Basis::Estimated,
        Basis::Reported,
        Basis::Free,
    ];

    /// The basis of a rank the ledger's running totals keep (its place in [`Basis::ALL`];
    /// the ledger's migration 6 ranks words the same way). An unknown rank is `Unpriced`.
    pub fn from_rank(rank: i64) -> Basis {
        usize::try_from(rank)
            .ok()
            .and_then(|i| Basis::ALL.get(i).copied())
            .unwrap_or(Basis::Unpriced)
    }

    /// Its place in [`Basis::ALL`] (see [`Basis::from_rank`]).
    pub fn rank(self) -> i64 {
        self as i64
    }

    /// The weakest of `bases`; `Free` when there are none (nothing was spent).
    pub fn weakest(bases: impl IntoIterator<Item = Basis>) -> Basis {
        bases.into_iter().min().unwrap_or(Basis::Free)
    }
}
