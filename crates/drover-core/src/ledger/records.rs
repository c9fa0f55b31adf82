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
    /// A change of the run's state (body: `from`, `to` and the `reason`).
    pub const RUN_STATE: &str = "run_state";
    /// A live-state assignment (body: a
    /// [`LiveStateEvent`](crate::live_state::LiveStateEvent)).
    pub const LIVE_STATE: &str = "live_state";
    /// A one-line note for the user (body: its `text`).
    pub const NOTE: &str = "note";
    /// A follow-up queued behind a running turn (body: its text, redacted).
    pub const FOLLOW_UP_QUEUED: &str = "follow_up_queued";
    /// A queued follow-up sent as a turn (the oldest one not yet sent).
    pub const FOLLOW_UP_SENT: &str = "follow_up_sent";
    /// A provider event (body: its transcript `line`, or `null`, and the `event` itself).
    pub const TRANSCRIPT: &str = "transcript";
}

/// One run as the `runs` table holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run's id (`r` and base-36 digits), unique in the ledger.
    pub run_id: String,
    /// When the run was dispatched, in ms since the Unix epoch.
    pub created_at: UnixMillis,
    /// When its row last changed, in ms since the Unix epoch.
    pub updated_at: UnixMillis,
    /// When it reached a terminal state, in ms since the Unix epoch; `None` while it is
    /// not finished.
    pub finished_at: Option<UnixMillis>,
    /// Its run state.
    pub state: RunState,
    /// Why it finished (`completed`, `timeout`, `user`, …); `None` while it is not
    /// finished.
    pub completion_reason: Option<String>,
    /// The provider's configured name.
    pub provider: String,
    /// The catalog id of the model; `None` for the provider's default (or not routed
    /// yet).
    pub model: Option<String>,
    /// The run's title: one line, at most 80 characters.
    pub title: String,
    /// The budget session its spend counts against.
    pub budget_session: String,
    /// The workflow it belongs to, if any.
    pub workflow_id: Option<String>,
    /// The run it was dispatched from, when it is a sub-run.
    pub parent_run: Option<String>,
    /// The dispatch's idempotency key, if it gave one.
    pub idempotency_key: Option<String>,
    /// The provider's own session id, once the provider reported one (what resume
    /// continues).
    pub provider_session_id: Option<String>,
    /// The run was removed: hidden from lists, kept for its spend.
    pub removed: bool,
    /// The validated spec (a [`Spec`](crate::spec::Spec) as JSON), redacted.
    pub spec: Value,
    /// The last live state, when it has one.
    pub live_state: Option<LiveState>,
    /// The run's latest result (a [`ResultView`](crate::dispatch::api::ResultView) as
    /// JSON).
    pub result: Option<Value>,
    /// The run's workspace (`crate::workspace::WorkspaceView` as JSON).
    #[serde(default)]
    pub workspace: Option<Value>,
}

/// A change to a run: `None` leaves a column as it is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunPatch {
    /// When the change was made, in ms since the Unix epoch (always written).
    pub updated_at: UnixMillis,
    /// The new run state.
    pub state: Option<RunState>,
    /// Why the run finished.
    pub completion_reason: Option<String>,
    /// When it finished, in ms since the Unix epoch.
    pub finished_at: Option<UnixMillis>,
    /// The model, once chosen or routed.
    pub model: Option<String>,
    /// The provider's session id.
    pub provider_session_id: Option<String>,
    /// Removed or not.
    pub removed: Option<bool>,
    /// The new live state.
    pub live_state: Option<LiveState>,
    /// The run's latest result.
    pub result: Option<Value>,
    /// The run's workspace, replaced whole.
    #[serde(default)]
    pub workspace: Option<Value>,
    /// The run is resumed: its end (`finished_at`, `completion_reason`) is cleared.
    #[serde(default)]
    pub reopened: bool,
}

/// One event of a run, as the `events` table holds it (append-only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    /// The run the event belongs to.
    pub run_id: String,
    /// 1, 2, 3, … per run; the ledger refuses a gap or a repeat.
    pub seq: u64,
    /// What the event is (see [`kind`]; the dispatcher adds its own).
    pub kind: String,
    /// When it happened, in ms since the Unix epoch.
    pub at: UnixMillis,
    /// The event's body, redacted.
    pub body: Value,
}

/// One turn of a run, as the `turns` table holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    /// The run the turn belongs to.
    pub run_id: String,
    /// 1, 2, 3, … per run.
    pub number: u32,
    /// What started it (`dispatch`, `follow_up`, `result_retry`, `resume`, `resend`).
    pub origin: String,
    /// When it started, in ms since the Unix epoch.
    pub started_at: UnixMillis,
    /// When it ended, in ms since the Unix epoch; `None` while it runs.
    pub ended_at: Option<UnixMillis>,
    /// The prompt on one line, at most 200 characters.
    pub prompt_preview: String,
    /// What the agent answered, at most 100,000 characters; `None` when it said nothing.
    pub text: Option<String>,
    /// The turn's tokens (a [`Tokens`](crate::providers::Tokens) as JSON).
    pub usage: Option<Value>,
    /// What the turn cost in US dollars, when known.
    pub cost_usd: Option<f64>,
    /// The turn's result, as JSON: its parsed `## Result` block (when it had one), or
    /// its JSON answer for a run with an output schema.
    pub result: Option<Value>,
    /// The commands the turn executed (a list of [`crate::evidence::CommandRun`] as
    /// JSON); `None` when it executed none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Value>,
}

/// One usage row, as the `usage` table holds it: tokens of one model, and what they cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageRecord {
    /// The run that used the tokens.
    pub run_id: String,
    /// The turn they were used in, when known.
    pub turn: Option<u32>,
    /// When the row was booked, in ms since the Unix epoch.
    pub at: UnixMillis,
    /// The provider's configured name.
    pub provider: String,
    /// The model the tokens went to; `None` when the provider did not say.
    pub model: Option<String>,
    /// `main` or `subagents`.
    pub part: String,
    /// Uncached input tokens.
    pub input: u64,
    /// Output tokens, reasoning excluded.
    pub output: u64,
    /// Reasoning tokens (billed at the output price).
    pub reasoning: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read: u64,
    /// Input tokens written to the prompt cache.
    pub cache_write: u64,
    /// `None` when the usage could not be priced (basis `unpriced`): never booked as $0.
    pub cost_usd: Option<f64>,
    /// `reported`, `estimated`, `free` or `unpriced`.
    pub basis: String,
    /// `exact` or `partial`.
    pub fidelity: String,
    /// Where the numbers come from, e.g. `result.total_cost_usd`.
    pub source: String,
    /// The budget session the row counts against.
    pub budget_session: String,
}

/// One decision, as the `decisions` table holds it: who decided what about a request, a
/// route card or a budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    /// The run it is about; `None` for a decision about a budget session.
    pub run_id: Option<String>,
    /// When it was made, in ms since the Unix epoch.
    pub at: UnixMillis,
    /// `permission`, `route`, `budget`, …
    pub kind: String,
    /// The request, route card or other item decided, when there is one.
    pub request_id: Option<String>,
    /// `user`, `timeout`, `policy`, `system`, …
    pub who: String,
    /// What was decided (`allow`, `deny`, `picked`, `declined`, …).
    pub decision: String,
    /// The details, as JSON.
    pub body: Value,
}

/// One budget session, as the `budget_sessions` table holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetSessionRecord {
    /// The session's name (letters, digits, `-`, `_`, `.`; at most 64).
    pub name: String,
    /// When it was made, in ms since the Unix epoch.
    pub created_at: UnixMillis,
    /// Its warning in US dollars; `None`: the config's `[limits] session_warning_usd`.
    pub warning_usd: Option<f64>,
    /// Its hard cap in US dollars; `None`: the config's `[limits] session_hard_cap_usd`.
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
    /// The basis as the ledger writes it (`unpriced`, `estimated`, `reported`, `free`).
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
