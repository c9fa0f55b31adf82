//! Where a run is in the dispatcher (docs/ARCHITECTURE.md §"Vocabulary"): the run state,
//! and the one table of the moves between states ([`RunState::allowed`]).
//!
//! Run state is distinct from the live state (`crate::live_state`): the run state says
//! which tray a run belongs to; the live state says what it is doing right now. What must
//! stay true: a run's state changes only through the dispatcher's one setter, which checks
//! every move against [`RunState::allowed`] and refuses (and logs) any other; a finished
//! run never changes again, except `interrupted` → `queued` when it is resumed.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Where a run is in the dispatcher: which tray it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Accepted, waiting for a slot on its rails (or for its directory, or for room).
    Queued,
    /// Held behind a route card until the user picks a provider and model.
    AwaitingRoute,
    /// Its workspace is being made or its child launched and handshaking.
    Starting,
    /// A turn is in flight.
    Running,
    /// Between turns: a follow-up starts the next one (its child may be hibernated).
    Idle,
    /// A turn waits for the user's answer to a permission request or question.
    AwaitingPermission,
    /// Ended as complete (by the user, the agent's result, or max turns).
    Completed,
    /// Ended by a failure (the provider, the launch, a timeout, money).
    Failed,
    /// Ended by the user, a cap, or a declined route.
    Stopped,
    /// Active when drover stopped or crashed; can be resumed in its provider session.
    Interrupted,
}

impl RunState {
    /// Every state, active ones first.
    pub const ALL: [RunState; 10] = [
        RunState::Queued,
        RunState::AwaitingRoute,
        RunState::Starting,
        RunState::Running,
        RunState::Idle,
        RunState::AwaitingPermission,
        RunState::Completed,
        RunState::Failed,
        RunState::Stopped,
        RunState::Interrupted,
    ];

    /// The state's word in the ledger and on the wire (`awaiting_permission`).
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::AwaitingRoute => "awaiting_route",
            RunState::Starting => "starting",
            RunState::Running => "running",
            RunState::Idle => "idle",
            RunState::AwaitingPermission => "awaiting_permission",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::Stopped => "stopped",
            RunState::Interrupted => "interrupted",
        }
    }

    /// The state a word names, if any.
    pub fn parse(s: &str) -> Option<RunState> {
        RunState::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Finished runs never change state again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunState::Completed | RunState::Failed | RunState::Stopped | RunState::Interrupted
        )
    }

    /// Not finished: the run is in memory and may change.
    pub fn is_active(self) -> bool {
        !self.is_terminal()
    }

    /// Whether a run may move from `from` to `to`: the run lifecycle in one table (the
    /// dispatcher refuses and logs any other move).
    ///
    /// | from | to |
    /// | --- | --- |
    /// | queued | awaiting_route, starting, any end but completed |
    /// | awaiting_route | queued, any end but completed |
    /// | starting | queued (its directory is taken), running, idle, any end |
    /// | running | starting (its CLI exited and is started again to send the turn again), idle, awaiting_permission, any end |
    /// | awaiting_permission | running, idle, any end |
    /// | idle | starting (waking a hibernated run), running, any end |
    /// | interrupted | queued (resumed) |
    /// | completed, failed, stopped | — |
    ///
    /// "Any end" is completed, failed, stopped or interrupted. A state never moves to
    /// itself.
    pub fn allowed(from: RunState, to: RunState) -> bool {
        use RunState::*;
        match (from, to) {
            (Interrupted, Queued) => true,
            (Completed | Failed | Stopped | Interrupted, _) => false,
            (from, to) if from == to => false,
            (Queued | AwaitingRoute, Completed) => false,
            (_, Completed | Failed | Stopped | Interrupted) => true,
            (Queued, AwaitingRoute | Starting) => true,
            (AwaitingRoute, Queued) => true,
            (Starting, Queued | Running | Idle) => true,
            (Running, Starting | Idle | AwaitingPermission) => true,
            (AwaitingPermission, Running | Idle) => true,
            (Idle, Starting | Running) => true,
            _ => false,
        }
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_round_trips_through_its_name() {
        for s in RunState::ALL {
            assert_eq!(RunState::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{s}\""));
        }
        assert_eq!(RunState::parse("nope"), None);
    }

    /// The lifecycle table, written out: every move [`RunState::allowed`] takes, and
    /// (by leaving it out) every move it refuses.
    #[test]
    fn the_lifecycle_table_allows_exactly_these_moves() {
        use RunState::*;
        let ends_but_completed = [Failed, Stopped, Interrupted];
        let any_end = [Completed, Failed, Stopped, Interrupted];
        let mut allowed: Vec<(RunState, RunState)> = Vec::new();
        let mut add = |from: RunState, tos: &[RunState]| {
            allowed.extend(tos.iter().map(|&to| (from, to)));
        };
        add(Queued, &[AwaitingRoute, Starting]);
        add(Queued, &ends_but_completed);
        add(AwaitingRoute, &[Queued]);
        add(AwaitingRoute, &ends_but_completed);
        add(Starting, &[Queued, Running, Idle]);
        add(Starting, &any_end);
        add(Running, &[Starting, Idle, AwaitingPermission]);
        add(Running, &any_end);
        add(AwaitingPermission, &[Running, Idle]);
        add(AwaitingPermission, &any_end);
        add(Idle, &[Starting, Running]);
        add(Idle, &any_end);
        add(Interrupted, &[Queued]);
        let mut checked = 0;
        for from in RunState::ALL {
            for to in RunState::ALL {
                let expected = allowed.contains(&(from, to));
                assert_eq!(
                    RunState::allowed(from, to),
                    expected,
                    "{from} -> {to} should be {}",
                    if expected { "allowed" } else { "refused" }
                );
                checked += 1;
            }
        }
        assert_eq!(checked, 100);
        assert_eq!(allowed.len(), 36);
    }

    #[test]
    fn a_finished_run_moves_only_when_an_interrupted_one_is_resumed() {
        for from in RunState::ALL.into_iter().filter(|s| s.is_terminal()) {
            let onward: Vec<_> = RunState::ALL
                .into_iter()
                .filter(|&to| RunState::allowed(from, to))
                .collect();
            let expected: &[RunState] = if from == RunState::Interrupted {
                &[RunState::Queued]
            } else {
                &[]
            };
            assert_eq!(onward, expected, "{from}");
        }
    }

    #[test]
    fn exactly_four_states_are_terminal() {
        let terminal: Vec<_> = RunState::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .collect();
        assert_eq!(
            terminal,
            [
                RunState::Completed,
                RunState::Failed,
                RunState::Stopped,
                RunState::Interrupted
            ]
        );
    }
}
