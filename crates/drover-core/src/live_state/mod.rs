//! The live-state machine (docs/ARCHITECTURE.md §"Live state"): what a run is doing right
//! now, with a deadline.
//!
//! Owns the states, the transition table, the rules an [`Assignment`] must pass, and the
//! fold that rebuilds a [`LiveState`] from the ledger's [`LiveStateEvent`]s. It is pure: no
//! I/O and no clock, `now` is always passed in. What must stay true:
//! - the only way to a new `LiveState` is [`assign`]; [`fold`] replays it, so a state
//!   rebuilt from the ledger equals the state that was shown;
//! - every accepted assignment raises `seq` by one, and an assignment names the `seq` it
//!   expects;
//! - `ended` is terminal, carries a cause and no bound; every other state has a bound
//!   that was not in the past when it was assigned. The one way out of `ended` is a
//!   *reopen* (`drover resume`): an assignment marked `reopen` that moves `ended` →
//!   `admitted` and starts a new segment of the same run; a reopen from any other state
//!   is refused, and an ordinary assignment never leaves `ended`;
//! - `assign` passes every detail through [`sanitize_detail`].

mod sanitize;
#[cfg(test)]
mod tests;

pub use sanitize::{MAX_DETAIL_CHARS, sanitize_detail};

use crate::UnixMillis;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Where a run is, as shown on its live line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LiveStateKind {
    /// Accepted (or resumed) and not started yet: queued, or waiting on a route card.
    Admitted,
    /// Waiting for a deploy under way to finish.
    WaitingDeploy,
    /// Waiting for another run that can write to leave the shared directory.
    WaitingRepository,
    /// The asked-for workspace cannot be made; switching to a fallback (the shared
    /// directory).
    FallingBack,
    /// Preparing the workspace and starting the provider's CLI.
    Preparing,
    /// The agent is working on a turn.
    Working,
    /// Waiting on the model provider: rate-limited, or a failed turn held to be sent
    /// again.
    WaitingProvider,
    /// The connection to the run's host dropped: the owner reconnects, waiting longer
    /// each time (docs/ARCHITECTURE.md §"Hosts").
    WaitingHost,
    /// The run is over; ending the provider session.
    WrappingUp,
    /// The run has ended (terminal, with a cause, without a bound).
    Ended,
}

impl LiveStateKind {
    /// Every state, in the order of the live-state table.
    pub const ALL: [LiveStateKind; 10] = [
        LiveStateKind::Admitted,
        LiveStateKind::WaitingDeploy,
        LiveStateKind::WaitingRepository,
        LiveStateKind::FallingBack,
        LiveStateKind::Preparing,
        LiveStateKind::Working,
        LiveStateKind::WaitingProvider,
        LiveStateKind::WaitingHost,
        LiveStateKind::WrappingUp,
        LiveStateKind::Ended,
    ];

    /// The serialized name (`waiting_deploy`).
    pub fn as_str(self) -> &'static str {
        match self {
            LiveStateKind::Admitted => "admitted",
            LiveStateKind::WaitingDeploy => "waiting_deploy",
            LiveStateKind::WaitingRepository => "waiting_repository",
            LiveStateKind::FallingBack => "falling_back",
            LiveStateKind::Preparing => "preparing",
            LiveStateKind::Working => "working",
            LiveStateKind::WaitingProvider => "waiting_provider",
            LiveStateKind::WaitingHost => "waiting_host",
            LiveStateKind::WrappingUp => "wrapping_up",
            LiveStateKind::Ended => "ended",
        }
    }

    /// The words shown on the live line.
    pub fn human(self) -> &'static str {
        match self {
            LiveStateKind::Admitted => "admitted",
            LiveStateKind::WaitingDeploy => "waiting for the current deploy",
            LiveStateKind::WaitingRepository => "waiting for the repository",
            LiveStateKind::FallingBack => "switching to a fallback workspace",
            LiveStateKind::Preparing => "preparing the workspace",
            LiveStateKind::Working => "working",
            LiveStateKind::WaitingProvider => "waiting for the model provider",
            LiveStateKind::WaitingHost => "waiting for host",
            LiveStateKind::WrappingUp => "wrapping up",
            LiveStateKind::Ended => "ended",
        }
    }

    /// Whether the state is `ended`, which only a reopen leaves.
    pub fn is_terminal(self) -> bool {
        self == LiveStateKind::Ended
    }
}

impl fmt::Display for LiveStateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a run's live state ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// The run finished its work.
    Completed,
    /// The run failed.
    Failed,
    /// The run was stopped (by the user or a budget cap).
    Stopped,
    /// The run was withdrawn before it started (its route card declined or expired).
    Withdrawn,
    /// The run was refused before it started (no money left, a full queue, a busy
    /// repository).
    Refused,
    /// The lease the run held lapsed.
    LeaseLapsed,
    /// drover stopped while the run was active; the next owner ended it.
    ResidentReplaced,
    /// The run's process went away without reporting an end.
    RunnerGone,
}

impl Cause {
    /// The cause as the ledger and the API write it (`lease_lapsed`).
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Completed => "completed",
            Cause::Failed => "failed",
            Cause::Stopped => "stopped",
            Cause::Withdrawn => "withdrawn",
            Cause::Refused => "refused",
            Cause::LeaseLapsed => "lease_lapsed",
            Cause::ResidentReplaced => "resident_replaced",
            Cause::RunnerGone => "runner_gone",
        }
    }
}

/// Whether docs/ARCHITECTURE.md §"Live state" allows the move `from` → `to`. Staying in the
/// same state is allowed for every state but `ended`.
pub fn allowed(from: Option<LiveStateKind>, to: LiveStateKind) -> bool {
    match from {
        None => to == LiveStateKind::Admitted,
        Some(from) if from == to => !from.is_terminal(),
        Some(from) => successors(from).contains(&to),
    }
}

/// The table in docs/ARCHITECTURE.md §"Live state", row by row (same-state moves aside).
#[rustfmt::skip]
fn successors(from: LiveStateKind) -> &'static [LiveStateKind] {
    use LiveStateKind::*;
    match from {
        Admitted => &[WaitingDeploy, WaitingRepository, FallingBack, Preparing, Working, WrappingUp, Ended],
        WaitingDeploy => &[WaitingRepository, FallingBack, Preparing, Working, WrappingUp, Ended],
        WaitingRepository => &[WaitingDeploy, FallingBack, Preparing, Working, WrappingUp, Ended],
        FallingBack => &[Preparing, Working, WrappingUp, Ended],
        Preparing => &[WaitingDeploy, WaitingRepository, FallingBack, Working, WaitingHost, WrappingUp, Ended],
        Working => &[WaitingDeploy, WaitingRepository, FallingBack, Preparing, WaitingProvider, WaitingHost, WrappingUp, Ended],
        WaitingProvider => &[Working, WaitingHost, WrappingUp, Ended],
        WaitingHost => &[Preparing, Working, WrappingUp, Ended],
        WrappingUp => &[Ended],
        Ended => &[],
    }
}

/// A run's current live state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveState {
    /// Where the run is.
    pub state: LiveStateKind,
    /// When the run entered `state`; kept when the same state is assigned again.
    pub since: UnixMillis,
    /// The deadline; `None` only for `ended`.
    pub bound: Option<UnixMillis>,
    /// One sanitised line, at most 160 characters.
    pub detail: Option<String>,
    /// Why the run ended; `Some` only for `ended`.
    pub cause: Option<Cause>,
    /// How many assignments have been accepted.
    pub seq: u64,
}

/// A request to set a run's live state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assignment {
    /// The `seq` of the live state this assignment replaces (0 for a run without one).
    pub expected_seq: u64,
    /// The state to move to.
    pub state: LiveStateKind,
    /// The deadline, in ms since the Unix epoch; required (and not in the past) for every
    /// state but `ended`, dropped for `ended`.
    pub bound: Option<UnixMillis>,
    /// One line about what the run is doing; sanitised before it is kept.
    pub detail: Option<String>,
    /// Why the run ended; required for `ended`, dropped otherwise.
    pub cause: Option<Cause>,
    /// Starts a new segment: the only move out of `ended`, and only to `admitted`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reopen: bool,
}

/// Why an assignment was refused. Serializes as its [`code`](Refusal::code).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The assignment names a `seq` other than the live state's.
    #[error(
        "Expected sequence {expected} but the live state is at {current}; read it again and retry."
    )]
    StaleSequence {
        /// The `seq` the assignment named.
        expected: u64,
        /// The live state's `seq`.
        current: u64,
    },
    /// The live state is `ended`; only a reopen may change it.
    #[error("The run has ended; its live state can no longer change.")]
    Terminal,
    /// The live-state table does not allow the move (or a reopen not from `ended` to
    /// `admitted`).
    #[error("A live state cannot move from {} to {to}.", .from.map_or("(none)", LiveStateKind::as_str))]
    InvalidTransition {
        /// The current state; `None` for a run without one.
        from: Option<LiveStateKind>,
        /// The state asked for.
        to: LiveStateKind,
    },
    /// An assignment to `ended` without a cause.
    #[error("Ending a run needs a cause.")]
    CauseRequired,
    /// An assignment to a state other than `ended` without a bound.
    #[error("The state {state} needs a bound (a deadline).")]
    BoundRequired {
        /// The state asked for.
        state: LiveStateKind,
    },
    /// The bound is in the past.
    #[error("The bound {bound} is in the past (now is {now}); give a deadline that is not.")]
    InvalidBound {
        /// The bound asked for, in ms since the Unix epoch.
        bound: UnixMillis,
        /// The time of the assignment, in ms since the Unix epoch.
        now: UnixMillis,
    },
}

impl Refusal {
    /// The stable code scripts match on.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::StaleSequence { .. } => "stale-sequence",
            Refusal::InvalidTransition { .. } => "invalid-transition",
            Refusal::Terminal => "terminal",
            Refusal::BoundRequired { .. } => "bound-required",
            Refusal::InvalidBound { .. } => "invalid-bound",
            Refusal::CauseRequired => "cause-required",
        }
    }
}

impl Serialize for Refusal {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.code())
    }
}

/// Checks `a` against `current` and returns the new live state, or why it was refused.
pub fn assign(
    current: Option<&LiveState>,
    a: &Assignment,
    now: UnixMillis,
) -> Result<LiveState, Refusal> {
    let current_seq = current.map_or(0, |c| c.seq);
    if a.expected_seq != current_seq {
        return Err(Refusal::StaleSequence {
            expected: a.expected_seq,
            current: current_seq,
        });
    }
    let from = current.map(|c| c.state);
    if a.reopen {
        if from != Some(LiveStateKind::Ended) || a.state != LiveStateKind::Admitted {
            return Err(Refusal::InvalidTransition { from, to: a.state });
        }
    } else if from.is_some_and(LiveStateKind::is_terminal) {
        return Err(Refusal::Terminal);
    } else if !allowed(from, a.state) {
        return Err(Refusal::InvalidTransition { from, to: a.state });
    }
    let (bound, cause) = if a.state.is_terminal() {
        (None, Some(a.cause.ok_or(Refusal::CauseRequired)?))
    } else {
        let bound = a.bound.ok_or(Refusal::BoundRequired { state: a.state })?;
        if bound < now {
            return Err(Refusal::InvalidBound { bound, now });
        }
        (Some(bound), None)
    };
    // Time counts in the state; while preparing, each step (making the worktree, waiting
    // for the scripts' approval, running setup) counts its own: a new detail starts it.
    let since = match current {
        Some(c)
            if c.state == a.state
                && !(a.state == LiveStateKind::Preparing && c.detail != a.detail) =>
        {
            c.since
        }
        _ => now,
    };
    Ok(LiveState {
        state: a.state,
        since,
        bound,
        detail: a.detail.as_deref().and_then(sanitize_detail),
        cause,
        // Saturating: 2^64 assignments cannot happen, and a forged seq must not panic.
        seq: current_seq.saturating_add(1),
    })
}

/// What the ledger stores for each accepted assignment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveStateEvent {
    /// When the assignment was accepted, in ms since the Unix epoch.
    pub at: UnixMillis,
    /// The assignment as accepted (its detail sanitised).
    pub assignment: Assignment,
}

impl LiveStateEvent {
    /// The event to store for an assignment that `assign` accepted as `accepted` at
    /// `at`: it holds what was kept (the sanitised detail, no dropped bound or cause), so
    /// no secret reaches the ledger, and folding it yields `accepted` again.
    pub fn accepted(a: &Assignment, accepted: &LiveState, at: UnixMillis) -> Self {
        LiveStateEvent {
            at,
            assignment: Assignment {
                expected_seq: a.expected_seq,
                state: accepted.state,
                bound: accepted.bound,
                detail: accepted.detail.clone(),
                cause: accepted.cause,
                reopen: a.reopen,
            },
        }
    }
}

/// The live state rebuilt from a run's events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fold {
    /// The state after the last accepted event; `None` when no event was accepted.
    pub state: Option<LiveState>,
    /// Events that `assign` refused (ledger data is untrusted); they were not applied.
    pub skipped: usize,
}

/// Replays `assign` over `events` in order, with `now = at`.
pub fn fold<'a>(events: impl IntoIterator<Item = &'a LiveStateEvent>) -> Fold {
    events.into_iter().fold(Fold::default(), |mut f, e| {
        match assign(f.state.as_ref(), &e.assignment, e.at) {
            Ok(next) => f.state = Some(next),
            Err(_) => f.skipped += 1,
        }
        f
    })
}
